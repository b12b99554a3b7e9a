"""Slices, hops and transfer times: checked against a breadth-first search, the book's facts and hand derivations."""

import math
from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_notes import topology as tp
from tpu_notes.hardware import get_chip


def bfs_hops(shape, wrap, origin):
    """Hop counts from ``origin`` by breadth-first search over an explicitly built torus/mesh graph."""
    dist = {origin: 0}
    queue = deque([origin])
    while queue:
        c = queue.popleft()
        for ax, n in enumerate(shape):
            for step in (-1, 1):
                v = c[ax] + step
                if wrap[ax]:
                    v %= n
                elif not 0 <= v < n:
                    continue
                nb = c[:ax] + (v,) + c[ax + 1 :]
                if nb not in dist:
                    dist[nb] = dist[c] + 1
                    queue.append(nb)
    return dist


shapes_2d = st.tuples(st.integers(1, 16), st.integers(1, 16))
# Buildable 3D shapes: smaller than a 4x4x4 cube, or whole cubes (every axis a multiple of 4).
sub_cube = st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
whole_cubes = st.tuples(*(st.sampled_from([4, 8, 12]) for _ in range(3)))
shapes_3d = st.one_of(sub_cube, whole_cubes)
any_slice = st.one_of(shapes_2d.map(lambda s: tp.Slice("v5e", s)), shapes_3d.map(lambda s: tp.Slice("v5p", s)))


def coord(sl, data):
    return tuple(data.draw(st.integers(0, n - 1)) for n in sl.shape)


# ---- wraparound rules: the generations' facts (scaling book tpus.md) -----------------------------------------
@pytest.mark.parametrize(
    "chip, shape, expected",
    [
        ("v5e", (16, 16), (True, True)),  # a full v5e pod is a torus
        ("v5e", (8, 16), (False, True)),  # an 8x16 wraps on the long axis only
        ("v5e", (4, 4), (False, False)),  # small 2D slices have no wraparound
        ("v6e", (16, 4), (True, False)),
        ("v5p", (4, 4, 4), (True, True, True)),  # a full cube wraps on every axis
        ("v5p", (2, 4, 4), (False, False, False)),  # half a cube: no optical links
        ("v5p", (4, 4, 2), (False, False, False)),
        ("v5p", (4, 4, 8), (True, True, True)),
        ("v5p", (2, 2, 4), (False, False, False)),  # smaller than a cube: no optical wraparound at all
        ("v5p", (4, 8, 12), (True, True, True)),
        ("tpu7x", (4, 4, 576), (True, True, True)),
        ("v5p", (2, 2, 1), (False, False, False)),
        ("v4p", (16, 16, 16), (True, True, True)),
        ("v4p", (2, 2, 2), (False, False, False)),
    ],
)
def test_wraparound_rules(chip, shape, expected):
    assert tp.Slice(chip, shape).wraparound == expected


@settings(max_examples=60, deadline=None)
@given(any_slice, st.data())
def test_hops_match_breadth_first_search(sl, data):
    a = coord(sl, data)
    dist = bfs_hops(sl.shape, sl.wraparound, a)
    b = coord(sl, data)
    assert sl.hops(a, b) == dist[b]


@settings(max_examples=30, deadline=None)
@given(any_slice)
def test_diameter_is_largest_bfs_distance(sl):
    # On a torus every chip looks the same; on an open mesh the corner (0, ...) is an end of a longest path.
    dist = bfs_hops(sl.shape, sl.wraparound, (0,) * len(sl.shape))
    assert sl.diameter == max(dist.values())


@settings(max_examples=80, deadline=None)
@given(any_slice, st.data())
def test_hops_metric_properties(sl, data):
    a, b, c = coord(sl, data), coord(sl, data), coord(sl, data)
    assert sl.hops(a, a) == 0
    assert sl.hops(a, b) == sl.hops(b, a)
    assert sl.hops(a, c) <= sl.hops(a, b) + sl.hops(b, c)
    assert 0 <= sl.hops(a, b) <= sl.diameter


@pytest.mark.parametrize("n", [4, 8, 12, 16])
def test_wraparound_roughly_halves_the_diameter(n):
    # A 3D cube of side n wraps (multiple of 4); a v5e n x n only at n = 16. Compare with the open mesh by hand.
    cube = tp.Slice("v5p", (n, n, n))
    assert cube.diameter == 3 * (n // 2)
    open_diameter = 3 * (n - 1)
    assert open_diameter / cube.diameter == pytest.approx(2 * (n - 1) / n)
    full = tp.Slice("v5e", (16, 16))
    assert full.diameter == 16 and tp.Slice("v5e", (15, 15)).diameter == 28


def test_hop_grid_matches_hops():
    sl = tp.Slice("v5p", (4, 4, 4))
    grid = sl.hop_grid()
    assert grid.shape == (4, 4, 4) and grid.max() == sl.diameter == 6
    assert all(grid[c] == sl.hops((0, 0, 0), c) for c in sl.coords())


# ---- sizes and totals --------------------------------------------------------------------------------------
def test_full_pod_totals_by_hand():
    v5e = tp.pod("v5e")
    assert v5e.n_chips == 256 and v5e.n_hosts == 256 // 8 and v5e.n_cores == 256
    assert v5e.total_flops() == pytest.approx(256 * 1.97e14)
    assert v5e.total_hbm_bytes == pytest.approx(256 * 16e9)
    v5p = tp.pod("v5p")
    assert v5p.n_chips == 16 * 20 * 28 == 8960 and v5p.n_hosts == 2240 and v5p.n_cores == 17920


@pytest.mark.parametrize(
    "chip, shape, hosts",
    [
        ("v5e", (2, 2), 1),
        ("v5e", (4, 4), 2),
        ("v5e", (1, 1), 1),
        ("v5p", (2, 2, 1), 1),
        ("v5p", (4, 4, 4), 16),
        ("v5p", (2, 2, 3), 3),
    ],
)
def test_hosts_round_up(chip, shape, hosts):
    assert tp.Slice(chip, shape).n_hosts == hosts


@settings(max_examples=40, deadline=None)
@given(whole_cubes, st.integers(1, 2))
def test_totals_scale_with_chip_count(shape, k):
    small = tp.Slice("v5p", shape)
    big_shape = (shape[0] * k, shape[1], shape[2])
    big = tp.Slice("v5p", big_shape)
    c = get_chip("v5p")
    assert big.n_chips == k * small.n_chips == k * math.prod(shape)
    for got, per_chip in (
        (big.total_flops(), c.bf16_flops),
        (big.total_flops("int8"), c.int8_flops),
        (big.total_hbm_bytes, c.hbm_bytes),
        (big.total_hbm_bw, c.hbm_bw),
    ):
        assert got == pytest.approx(big.n_chips * per_chip)


def test_links_per_chip():
    assert tp.Slice("v5e", (4, 4)).links_per_chip == 4
    assert tp.Slice("v4p", (4, 4, 4)).links_per_chip == 6


# ---- invalid input -----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "chip, shape, match",
    [
        ("v5e", (4, 4, 4), "2 axes"),  # v5e is a 2D torus
        ("v5p", (4, 4), "3 axes"),
        ("v5e", (32, 8), "does not fit"),  # bigger than the pod
        ("v5p", (16, 20, 32), "does not fit"),
        ("v5p", (4, 4, 6), "whole cubes"),  # bigger than a cube but not made of whole 4x4x4 cubes
        ("v5p", (2, 2, 8), "whole cubes"),
        ("v4p", (5, 5, 5), "whole cubes"),
        ("tpu7x", (4, 4, 570), "whole cubes"),
        ("v5e", (0, 4), ">= 1"),
        ("v5e", (-2, 4), ">= 1"),
        ("h100", (2, 2), "TPU"),
        ("nonsense", (2, 2), "unknown chip"),
    ],
)
def test_invalid_slices_raise(chip, shape, match):
    with pytest.raises(ValueError, match=match):
        tp.Slice(chip, shape)


def test_bad_types_raise():
    with pytest.raises(TypeError):
        tp.Slice("v5e", "4x4")
    with pytest.raises(TypeError):
        tp.Slice("v5e", (4.5, 4))
    sl = tp.Slice("v5e", (4, 4))
    with pytest.raises(ValueError, match="0..3"):
        sl.hops((0, 0), (4, 0))
    with pytest.raises(TypeError):
        sl.hops((0, 0), (1, 1, 1))
    with pytest.raises(ValueError, match="ports"):
        sl.transfer_time(1e6, (0, 0), (1, 1), ports=5)
    with pytest.raises(ValueError, match="nbytes"):
        sl.transfer_time(-1, (0, 0), (1, 1))
    with pytest.raises(TypeError, match="topology"):
        tp.transfer_time(1e6, (0, 0), (1, 1), "v5e")


# ---- transfer times ----------------------------------------------------------------------------------------
def test_point_to_point_by_hand():
    # bf16[8, 128, 8192] from (0, 0) to (3, 3) of a v5e 4x4 (no wraparound): 6 hops, 2 ports leave the source.
    sl = tp.Slice("v5e", (4, 4))
    nbytes = 2 * 8 * 128 * 8192
    t = tp.transfer_time(nbytes, (0, 0), (3, 3), sl)
    assert t.hops == 6
    assert t.bandwidth_time == pytest.approx(nbytes / (2 * 4.5e10))
    assert t.latency_time == pytest.approx(6e-6)
    assert t.total == pytest.approx(t.bandwidth_time + t.latency_time)


@settings(max_examples=60, deadline=None)
@given(st.just(0.0) | st.floats(1e-3, 1e12), st.floats(1.01, 100), st.data())
def test_transfer_monotone_in_bytes_and_hops(nbytes, factor, data):
    sl = tp.Slice("v5e", (16, 16))
    a, b = (0, 0), (data.draw(st.integers(0, 15)), 0)
    t = sl.transfer_time(nbytes, a, b)
    assert sl.transfer_time(nbytes * factor, a, b).total >= t.total
    # One more hop along the same axis (same ports) never makes it faster.
    if sl.hops(a, (b[0], 1)) > t.hops:
        assert sl.transfer_time(nbytes, a, (b[0], 1), ports=1).total >= sl.transfer_time(nbytes, a, b, ports=1).total


def test_host_and_dcn_bad_input():
    with pytest.raises(ValueError, match="n_chips"):
        tp.host_transfer_time(1e6, "v5e", 0)
    with pytest.raises(ValueError, match="nbytes"):
        tp.dcn_transfer_time(-5, "v5e", 4)
    with pytest.raises(ValueError, match="dcn"):
        tp.dcn_transfer_time(1e6, "v3", 4)  # no DCN figure for v3 in the table
    with pytest.raises(ValueError, match="latency"):
        tp.host_transfer_time(1e6, "v5e", latency=-1e-6)
    with pytest.raises(ValueError, match="TPU"):
        tp.pod("h100")


def test_point_to_point_ports_by_hand():
    # A v5p 4x4x4 cube wraps: (0,0,0) -> (2,1,3) is 2 + 1 + 1 = 4 hops and differs on 3 axes, so 3 ports leave.
    sl = tp.Slice("v5p", (4, 4, 4))
    t = sl.transfer_time(9e9, (0, 0, 0), (2, 1, 3))
    assert t.hops == 4 and t.bandwidth == pytest.approx(3 * 9e10)
    assert t.total == pytest.approx(9e9 / 2.7e11 + 4e-6)
    # Asking for one port triples the bandwidth term; a zero-byte message pays only the latency.
    assert sl.transfer_time(9e9, (0, 0, 0), (2, 1, 3), ports=1).bandwidth_time == pytest.approx(0.1)
    assert sl.transfer_time(0, (0, 0, 0), (2, 1, 3)).total == pytest.approx(4e-6)


def test_slice_to_slice_over_dcn_by_hand():
    # v5p: 25 GB/s of DCN per host (training.md), 4 chips per host. A 4x4x4 slice has 16 hosts, so all of its
    # chips sending at once move 16 x 25e9 = 4e11 B/s: 10 GB takes 25 ms. One chip alone gets a quarter of a NIC.
    sl = tp.Slice("v5p", (4, 4, 4))
    t = tp.dcn_transfer_time(10e9, "v5p", sl.n_chips)
    assert t.bandwidth == pytest.approx(sl.n_hosts * 25e9) and t.total == pytest.approx(0.025)
    assert tp.dcn_transfer_time(10e9, "v5p").total == pytest.approx(10e9 / (25e9 / 4))


@settings(deadline=None)  # the CPU is shared: no per-example time limit
@given(st.floats(1, 1e12), st.integers(1, 256))
def test_host_and_dcn_transfers(nbytes, n):
    c = get_chip("v5e")
    h = tp.host_transfer_time(nbytes, "v5e", n)
    assert h.total == pytest.approx(nbytes / (n * c.pcie_bw))
    d = tp.dcn_transfer_time(nbytes, "v5e", n)
    assert d.total == pytest.approx(nbytes / (n * c.dcn_bw))
    assert d.total > h.total  # DCN per chip is slower than PCIe on v5e


def test_bandwidth_ladder_order():
    # HBM > ICI > PCIe > DCN on every chip that has all four figures.
    for name in ("v5e", "v5p", "v6e"):
        ladder = tp.bandwidth_ladder(name)
        assert list(ladder) == ["HBM", "ICI", "PCIe", "DCN"]
        values = list(ladder.values())
        assert values == sorted(values, reverse=True)


# ---- collectives on a slice --------------------------------------------------------------------------------
def test_collective_time_uses_axes_and_wraparound():
    coll = pytest.importorskip("tpu_notes.collectives")
    sl = tp.Slice("v5e", (16, 4))  # axis 0 spans the pod (wraps), axis 1 does not
    w = get_chip("v5e").ici_bw_bidi
    V = 1e9
    # By hand: an AllGather on a wrapped ring of 16 moves ceil(15/2) = 8 hops of V/16 bytes each way at W/2: V/W, 8 µs.
    x = sl.collective_time("all_gather", V, "x")
    assert x.bandwidth_time == pytest.approx(V / w) and x.latency_time == pytest.approx(8e-6)
    # On the open axis of 4: a line of 3 hops of V/4 bytes at the one-way bandwidth W/2: 1.5 V/W, 3 µs.
    y = sl.collective_time("all_gather", V, 1)
    assert y.bandwidth_time == pytest.approx(1.5 * V / w) and y.latency_time == pytest.approx(3e-6)
    # An AllReduce is a ReduceScatter plus an AllGather.
    assert sl.collective_time("all_reduce", V, "x").total == pytest.approx(2 * x.total)
    # Several axes: each passed with its own size and wraparound flag.
    got = sl.collective_time("reduce_scatter", V, ("x", "y"))
    assert got == coll.reduce_scatter_time(V, (16, 4), w, wraparound=(True, False), n_axes=2)
    assert sl.collective_time("all_to_all", V) == coll.all_to_all_time(
        V, (16, 4), w, wraparound=(True, False), n_axes=2
    )
    with pytest.raises(ValueError, match="kind"):
        sl.collective_time("broadcast", V, 0)
    with pytest.raises(ValueError, match="axes"):
        sl.collective_time("all_gather", V, 2)
    with pytest.raises(ValueError, match="axes"):
        sl.collective_time("all_gather", V, (0, 0))


# ---- measured host -> device copies (tpu_notes.transfer) -----------------------------------------------------
def test_host_to_device_measurement_runs_and_reports():
    from tpu_notes import transfer

    got = transfer.measure_host_to_device((4096, 65536), repeats=2)
    assert [m.nbytes for m in got] == [4096, 65536]
    assert all(m.seconds > 0 and m.bytes_per_s == m.nbytes / m.seconds for m in got)
    assert got[0].platform == "cpu"  # the tests run on simulated CPU devices
    assert transfer.predicted_host_to_device(1.6e10, "v5e") == pytest.approx(1.0)  # 16 GB/s PCIe on v5e
    text = transfer.report(got, "v5e")
    assert len(text.splitlines()) == 3 and "v5e PCIe model" in text
    with pytest.raises(ValueError, match="multiple of 4"):
        transfer.measure_host_to_device((4097,))
    with pytest.raises(ValueError, match="sizes"):
        transfer.measure_host_to_device(())
    with pytest.raises(ValueError, match="pcie"):
        transfer.predicted_host_to_device(1e6, "tpu7x")  # no PCIe figure in the table


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=3), st.data())
def test_hop_grid_geometry_matches_bfs(shape, data):
    shape = tuple(shape)
    wrap = tuple(data.draw(st.booleans()) for _ in shape)
    origin = tuple(data.draw(st.integers(0, n - 1)) for n in shape)
    grid = tp.hop_grid(shape, wrap, origin)
    dist = bfs_hops(shape, wrap, origin)
    assert all(grid[c] == d for c, d in dist.items())
    with pytest.raises(ValueError, match="wraparound"):
        tp.hop_grid(shape, wrap + (True,))


def test_torus_hops_and_ladder_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tpu_notes import plots

    fig = plots.torus_hops([tp.Slice("v5p", (4, 4, 4)), ((4, 4), (True, True))])
    titles = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert len(titles) == 4 + 1 and titles[-1] == "4×4 [ww]"  # one panel per z-plane of the cube
    plt.close(fig)
    fig = plots.bandwidth_ladder_chart(("v5e", "v5p"))
    assert len(fig.axes[0].patches) == 8  # 4 links x 2 chips
    plt.close(fig)


def test_twisted_tori_follow_google_clouds_rule():
    from tpu_notes.topology import Slice

    offered = {
        s
        for s in [(4, 4, 4), (4, 4, 8), (4, 8, 8), (8, 8, 8), (8, 8, 16), (2, 2, 4), (12, 12, 24)]
        if Slice("v5p", s).can_twist
    }
    assert offered == {(4, 4, 8), (4, 8, 8), (8, 8, 16), (12, 12, 24)}
    assert not Slice("v5e", (16, 16)).can_twist


def test_slice_explorer_numbers_and_figures():
    import matplotlib

    matplotlib.use("Agg")
    from tpu_notes import plots, widgets
    from tpu_notes.plots import style
    from tpu_notes.topology import Slice

    p = widgets.slice_point("v5e", (8, 16), nbytes=2**26)
    sl = Slice("v5e", (8, 16))
    assert p.diameter == sl.diameter == 7 + 8  # open axis of 8, ring of 16
    assert p.all_gather_s == sl.collective_time("all_gather", 2**26).total
    assert p.farthest_s == sl.transfer_time(2**26, (0, 0), (7, 8)).total
    assert "diameter 15 hops" in p.summary()
    assert isinstance(widgets.slice_explorer("v5p", (4, 4, 8), static=True), matplotlib.figure.Figure)
    for fig in (plots.slice_hops_chart("v5p", (4, 4, 8)), plots.tpu_chip_diagram("v5e"), plots.tpu_chip_diagram("v5p")):
        assert fig.get_size_inches()[0] <= style.PAGE_WIDTH_IN + 1e-9
        small = [
            t.get_text()
            for t in fig.findobj(matplotlib.text.Text)
            if t.get_text().strip() and t.get_fontsize() < style.MIN_FONT_PT
        ]
        assert not small, small
    texts = " ".join(t.get_text() for t in plots.tpu_chip_diagram("v5p").findobj(matplotlib.text.Text))
    assert "2.8 TB/s" in texts and "96 GB" in texts and "64 × 4 KiB" in texts  # from the hardware table
    with pytest.raises(ValueError, match="chip must be a TPU"):
        plots.tpu_chip_diagram("h100")
