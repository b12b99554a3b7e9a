"""The collective cost model (tpu_notes.collectives) against hand derivations, a hop-by-hop simulation and the
collectives JAX runs on 8 simulated devices."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_notes import bench
from tpu_notes import collectives as C
from tpu_notes.hardware import get_chip

W = 1e11  # a round bidirectional link bandwidth for hand arithmetic


@pytest.mark.parametrize("n", [2, 4, 6, 8, 16])
def test_even_ring_all_gather_is_V_over_W(n):
    # N/2 hops, each moving V/N bytes per direction at W/2: (N/2)(V/N)/(W/2) = V/W
    t = C.all_gather_time(1e9, n, W, hop_latency=0)
    assert t.bandwidth_time == pytest.approx(1e9 / W)
    assert t.bound == "bandwidth"


@pytest.mark.parametrize("n", [3, 5, 7])
def test_odd_ring_all_gather(n):
    # (N-1)/2 hops of V/N at W/2 = (N-1)/N * V/W
    assert C.all_gather_time(1e9, n, W).bandwidth_time == pytest.approx((n - 1) / n * 1e9 / W)


def test_no_wraparound_matches_the_v5e_worked_example():
    # bf16[2048, 8192] (33.6 MB) gathered over a 4-chip v5e axis without wraparound: the end chip receives 3
    # shards of 8.39 MB through one link at 45 GB/s one way -> the book's ~560 µs
    v = 2048 * 8192 * 2
    t = C.all_gather_time(v, 4, get_chip("v5e").ici_bw_bidi, wraparound=False)
    assert t.total == pytest.approx(3 * (v / 4) / 4.5e10)
    assert t.total == pytest.approx(560e-6, rel=0.005)
    # with wraparound it would be V / W_bidi: the book's 377 µs uses a rounded 34 MB
    assert C.all_gather_time(v, 4, 9e10).total == pytest.approx(v / 9e10)
    assert C.all_gather_time(34e6, 4, 9e10).total == pytest.approx(377e-6, rel=0.005)


def test_v4p_cube_worked_answers():
    # the scaling book's v4p 4x4x4 problem, B=1024, D=4096 bf16, 9e10 B/s bidirectional per link
    w, bd = get_chip("v4p").ici_bw_bidi, 2 * 1024 * 4096
    assert C.all_gather_time(bd / 4, 4, w).total == pytest.approx(23.3e-6, rel=0.01)  # AllGather_X [B_X, D_Y]
    t = C.all_gather_time(bd, (4, 4), w)  # AllGather_XY
    assert t.total == pytest.approx(46.6e-6, rel=0.01) and t.latency_time == pytest.approx(4e-6)
    assert C.all_gather_time(256, 4, w).total == pytest.approx(2e-6)  # bf16[128]: 2 hops
    # AllReduce of [B_X, D_Y]{U_Z}: two passes over the 524 kB local array (the book prints one pass, 5.8 µs)
    assert C.all_reduce_time(bd / 16, 4, w).total == pytest.approx(2 * 5.83e-6, rel=0.01)


def test_latency_bound_small_gather():
    # 4 shards of 32 kB, no wraparound: 3 hops of 1 µs vs 3 * 32 kB / 45 GB/s = 2.13 µs
    t = C.all_gather_time(4 * 32e3, 4, get_chip("v5e").ici_bw_bidi, wraparound=False)
    assert t.latency_time == pytest.approx(3e-6)
    assert t.bandwidth_time == pytest.approx(3 * 32e3 / 4.5e10)
    assert t.bound == "latency" and t.total == t.latency_time


def test_kinds_relate_as_the_model_says():
    for wrap in (True, False):
        ag = C.all_gather_time(5e8, 8, W, wraparound=wrap)
        assert C.reduce_scatter_time(5e8, 8, W, wraparound=wrap) == ag
        ar = C.all_reduce_time(5e8, 8, W, wraparound=wrap)
        assert ar.bandwidth_time == pytest.approx(2 * ag.bandwidth_time)
        assert ar.latency_time == pytest.approx(2 * ag.latency_time)
        a2a = C.all_to_all_time(5e8, 8, W, wraparound=wrap)
        # ring: a quarter of the AllGather; line of 8: N/(4(N-1)) = 2/7 of the line's AllGather
        assert a2a.bandwidth_time == pytest.approx(ag.bandwidth_time * (1 / 4 if wrap else 8 / (4 * 7)))


def _a2a_link_time(n, wrap, v, w):
    """Independent check of the AllToAll model: route every block i -> j (V/N^2 bytes) along the shortest path
    (on a ring, a block exactly half-way round is split half each way), add up the bytes on each directed link,
    and charge the busiest link at the one-way bandwidth w/2."""
    load = {}
    block = v / n**2
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            if wrap:
                right = (j - i) % n
                ways = (
                    [(+1, right, 1.0)]
                    if right < n - right
                    else [(-1, n - right, 1.0)]
                    if right > n - right
                    else [(+1, right, 0.5), (-1, right, 0.5)]
                )
            else:
                ways = [(+1 if j > i else -1, abs(j - i), 1.0)]
            for step, hops, share in ways:
                d = i
                for _ in range(hops):
                    link = (d, (d + step) % n)
                    load[link] = load.get(link, 0.0) + share * block
                    d = (d + step) % n
    return max(load.values()) / (w / 2)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 16])
@pytest.mark.parametrize("wrap", [True, False])
def test_all_to_all_matches_busiest_link(n, wrap):
    t = C.all_to_all_time(1e9, n, W, wraparound=wrap, hop_latency=0).bandwidth_time
    oracle = _a2a_link_time(n, wrap, 1e9, W)
    assert t == pytest.approx(oracle)
    if wrap and n % 2 == 0 and n > 2:
        assert t == pytest.approx(1e9 / (4 * W))  # the book's V / (4 W_ici) on an even ring


def test_several_axes():
    one = C.all_gather_time(1e9, 4, W)
    two = C.all_gather_time(1e9, (4, 4), W)
    assert two.bandwidth_time == pytest.approx(1e9 / W / 2)  # even total 16: V/W over 2 sets of links
    assert two.latency_time == pytest.approx(2 * one.latency_time)
    assert C.all_gather_time(1e9, 4, W, n_axes=2) == two  # int size with n_axes = same sizes per axis
    # torus AllToAll: V * max(X_i) / (4 N W)
    assert C.all_to_all_time(1e9, (4, 4, 4), W, hop_latency=0).bandwidth_time == pytest.approx(1e9 * 4 / (4 * 64 * W))


def test_single_device_costs_nothing():
    assert C.all_gather_time(1e9, 1, W).total == 0.0


def test_bad_input():
    with pytest.raises(ValueError, match="nbytes"):
        C.all_gather_time(-1, 4, W)
    with pytest.raises(ValueError, match="axis_size"):
        C.all_gather_time(1e6, 0, W)
    with pytest.raises(TypeError, match="axis_size"):
        C.all_gather_time(1e6, "4", W)
    with pytest.raises(ValueError, match="link_bw_bidi"):
        C.all_reduce_time(1e6, 4, 0)
    with pytest.raises(TypeError, match="wraparound"):
        C.all_gather_time(1e6, 4, W, wraparound="yes")
    with pytest.raises(ValueError, match="n_axes"):
        C.all_gather_time(1e6, (4, 4), W, n_axes=3)
    with pytest.raises(ValueError, match="kind"):
        C.collective_time("broadcast", 1e6, 4, W)
    with pytest.raises(ValueError, match="wraparound"):
        C.all_to_all_time(1e6, (4, 4), W, wraparound=(True,))
    with pytest.raises(ValueError, match="nbytes"):
        C.all_to_all_time(-5, 4, W)


def _simulated_time(n, wrap, v, w):
    """Independent check: run the hop-by-hop schedule, and charge each hop the largest bytes any directed link
    carries in it (one shard, V/N) at the one-way bandwidth w/2."""
    states = C.ring_all_gather_schedule(n, wrap)
    for before, after in zip(states, states[1:]):
        for d in range(n):
            gained = len(after[d]) - len(before[d])
            assert gained <= 2  # at most one shard per incoming link per hop
    assert all(len(s) == n for s in states[-1])
    return (len(states) - 1) * (v / n) / (w / 2)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 24), wrap=st.booleans(), v=st.floats(1e3, 1e10))
def test_formula_matches_simulation_and_bounds(n, wrap, v):
    t = C.all_gather_time(v, n, W, wraparound=wrap, hop_latency=0)
    assert t.bandwidth_time == pytest.approx(_simulated_time(n, wrap, v, W))
    # never faster than receiving (N-1)/N of V over two incoming links of W/2 each
    assert t.bandwidth_time >= (n - 1) / n * v / W * (1 - 1e-12)
    assert len(C.ring_all_gather_schedule(n, wrap)) - 1 == C.gather_hops(n, wrap)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 32), v=st.floats(1e3, 1e10), lat=st.just(0.0) | st.floats(1e-12, 1e-5))
def test_total_is_max_and_monotone(n, v, lat):
    a = C.all_gather_time(v, n, W, hop_latency=lat)
    b = C.all_gather_time(2 * v, n, W, hop_latency=lat)
    assert a.total == max(a.bandwidth_time, a.latency_time)
    assert b.total >= a.total
    assert C.all_gather_time(v, n, W, wraparound=False, hop_latency=lat).total >= a.total


def test_latency_bound_bytes_is_the_crossover():
    v_star = C.latency_bound_bytes(8, get_chip("v5e").ici_bw_bidi)
    assert v_star == pytest.approx(8 * 45e3)  # 45 kB per shard on v5e, 360 kB for 8-way
    t = C.all_gather_time(v_star, 8, get_chip("v5e").ici_bw_bidi)
    assert t.bandwidth_time == pytest.approx(t.latency_time)


# ---- the collectives run for real (8 simulated devices) match the unsharded computation
@pytest.fixture(scope="module")
def mesh():
    import jax

    from tpu_notes.compat import make_mesh

    return make_mesh((8,), ("X",), devices=jax.devices()[:8])


def test_run_collectives_numerically(mesh):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(bench.run_collective("all-gather", x, mesh, "X")), x)
    y = rng.standard_normal((64, 3)).astype(np.float32)
    total = y.reshape(8, 8, 3).sum(0)  # device d holds rows 8d..8d+7: the sum of the 8 addends
    np.testing.assert_allclose(
        np.asarray(bench.run_collective("all-reduce", y, mesh, "X")), total, rtol=1e-5, atol=1e-5
    )
    rs = bench.run_collective("reduce-scatter", y, mesh, "X")
    np.testing.assert_allclose(np.asarray(rs), total, rtol=1e-5, atol=1e-5)
    assert rs.sharding.spec[0] == "X"
    z = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    a2a = bench.run_collective("all-to-all", z, mesh, "X")
    np.testing.assert_array_equal(np.asarray(a2a), z)
    assert tuple(a2a.sharding.spec) == (None, "X")


def test_hand_written_ring_matches_all_gather(mesh):
    x = np.arange(8 * 5, dtype=np.float32).reshape(8, 5)
    np.testing.assert_array_equal(np.asarray(bench.ring_all_gather(x, mesh, "X")), x)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(2, 40), v=st.floats(1e3, 1e10))
def test_all_to_all_is_cheaper_than_all_gather(n, v):
    for wrap in (True, False):
        a2a = C.all_to_all_time(v, n, W, wraparound=wrap, hop_latency=0).bandwidth_time
        ag = C.all_gather_time(v, n, W, wraparound=wrap, hop_latency=0).bandwidth_time
        assert a2a <= ag * (1 + 1e-12)
        # and never faster than pushing V/4 (the blocks that must cross the middle) through the whole cut:
        # at most two links, W/2 each way
        assert a2a >= (n // 2) * ((n + 1) // 2) / n**2 * v / W * (1 - 1e-12)
    assert C.all_to_all_time(v, n, W, wraparound=False).bandwidth_time >= C.all_to_all_time(
        v, n, W, wraparound=True
    ).bandwidth_time * (1 - 1e-12)


@pytest.mark.parametrize("n", [3, 4, 8, 9, 16])
def test_one_way_ring(n):
    # a one-way ring moves every shard the same way: N-1 hops of V/N at W/2 (the line's bandwidth term)
    v = 1e9
    ag = C.all_gather_time(v, n, W, hop_latency=0, bidirectional=False)
    assert ag.bandwidth_time == pytest.approx(2 * (n - 1) * v / (n * W))
    assert ag.bandwidth_time == pytest.approx(
        C.all_gather_time(v, n, W, wraparound=False, hop_latency=0).bandwidth_time
    )
    assert C.gather_hops(n, True, bidirectional=False) == n - 1
    # AllToAll: half the AllGather one way; a quarter of the AllGather on a bidirectional ring (even N)
    a2a = C.all_to_all_time(v, n, W, hop_latency=0, bidirectional=False)
    assert a2a.bandwidth_time == pytest.approx(ag.bandwidth_time / 2)
    assert a2a.bandwidth_time == pytest.approx(C.ring_link_bytes("all-to-all", n, v, bidirectional=False) / (W / 2))
    if n % 2 == 0:
        bidi = C.all_to_all_time(v, n, W, hop_latency=0).bandwidth_time
        assert bidi == pytest.approx(C.all_gather_time(v, n, W, hop_latency=0).bandwidth_time / 4)
    assert C.all_reduce_time(v, n, W, hop_latency=0, bidirectional=False).bandwidth_time == pytest.approx(
        2 * ag.bandwidth_time
    )
    with pytest.raises(ValueError, match="wraparound"):
        C.all_gather_time(v, n, W, wraparound=False, bidirectional=False)


def test_latency_bound_bytes_per_hop_and_per_array():
    w = get_chip("v5e").ici_bw_bidi
    per_hop = C.latency_bound_bytes(8, w, per="hop")
    assert per_hop == pytest.approx(1e-6 * w / 2)  # one shard in one microsecond
    assert C.latency_bound_bytes(8, w) == pytest.approx(8 * per_hop)  # the whole gathered array
    assert C.latency_bound_bytes(64, w, per="hop") == per_hop  # independent of N
    with pytest.raises(ValueError, match="per"):
        C.latency_bound_bytes(8, w, per="shard")


def test_schedules_are_bounded():
    with pytest.raises(ValueError, match="axis_size must be at most"):
        C.ring_all_gather_schedule(10**12)
    with pytest.raises(ValueError, match="axis_size must be finite"):
        C.ring_all_gather_schedule(float("inf"))
