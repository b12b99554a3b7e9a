"""Chapter 10's programs (tpu_notes.jaxprog) equal their plain references, and refuse bad input clearly."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P

from tpu_notes import collectives, exercises, hardware, jaxprog  # noqa: E402


def _rand(rng, *shape):
    return jnp.asarray(rng.standard_normal(shape), jnp.float32)


# --- the collectives one by one ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [4, 8])
def test_collective_table_matches_the_notation(n):
    rows, cols = 8 * n, 4 * n
    table = {r.kind: r for r in jaxprog.collective_table(jaxprog.ring_mesh(n), rows=rows, cols=cols)}
    local = (rows // n, cols)
    expected_out = {
        "all-gather": (rows, cols),
        "reduce-scatter": (rows // n // n, cols),
        "all-reduce": local,
        "all-to-all": (rows, cols // n),
        "collective-permute": local,
    }
    block = rows // n * cols * 4
    for kind, out in expected_out.items():
        r = table[kind]
        assert r.local_in == local and r.local_out == out, kind
        assert r.hlo_op == kind and r.agrees, r
    assert table["all-gather"].hlo_bytes == n * block
    assert all(r.hlo_bytes == block for k, r in table.items() if k != "all-gather")
    # V as tpu_notes.collectives takes it: the whole array of an AllToAll, each device holding V/N
    assert table["all-to-all"].array_bytes == n * block
    assert table["all-to-all"].received_bytes == pytest.approx((n - 1) / n * block)
    # what one device receives of an AllGather on a one-way ring is the busiest link's one-way load (Chapter 3)
    assert table["all-gather"].received_bytes == pytest.approx(
        collectives.ring_link_bytes("all-gather", n, n * block, bidirectional=False)
    )


# --- collective matmul ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8])
def test_matmul_programs_equal_the_product(n):
    rng = np.random.default_rng(n)
    mesh = jaxprog.ring_mesh(n)
    x, w = _rand(rng, 16, 8 * n), _rand(rng, 8 * n, 4 * n)
    want = np.asarray(x, np.float64) @ np.asarray(w, np.float64)
    for out in (
        jaxprog.allgather_matmul(x, w, mesh),
        jaxprog.collective_matmul(x, w, mesh),
        jaxprog.collective_matmul(x, w, mesh, bidirectional=True),
    ):
        assert out.shape == want.shape
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-4)
        assert out.sharding.spec == P(None, "x")
    # the down-projection: x[B, F_X] . w[F_X, D] -> [B, D_X], ReduceScatter or an accumulator round the ring
    x2, w2 = _rand(rng, 16, 8 * n), _rand(rng, 8 * n, 2 * n)
    want2 = np.asarray(x2, np.float64) @ np.asarray(w2, np.float64)
    for collective in (False, True):
        out = jaxprog.reducescatter_matmul(x2, w2, mesh, collective=collective)
        np.testing.assert_allclose(np.asarray(out), want2, rtol=1e-4, atol=1e-4)
        assert out.sharding.spec == P(None, "x")


@pytest.mark.parametrize("n", [2, 5, 8])
def test_hlo_shows_the_gather_or_the_ring(n):
    mesh = jaxprog.ring_mesh(n)
    assert jaxprog.matmul_hlo_collectives("allgather", mesh, D=8 * n, F=8 * n) == {"all-gather": 1}
    for program in ("collective", "bidirectional"):
        assert jaxprog.matmul_hlo_collectives(program, mesh, D=8 * n, F=8 * n) == {"collective-permute": n - 1}
    assert jaxprog.matmul_hlo_collectives("collective-reducescatter", mesh, D=8 * n, F=8 * n) == {
        "collective-permute": n - 1
    }
    rs = jaxprog.matmul_hlo_collectives("reducescatter", mesh, D=8 * n, F=8 * n)
    assert rs in ({"reduce-scatter": 1}, {"all-reduce": 1})  # CPU may spell it all-reduce + slice


def test_collective_matmul_time_follows_chapter_3():
    v5e = hardware.get_chip("v5e")
    B, D, F, n = 2048, 8192, 65536, 8
    one = jaxprog.collective_matmul_time(B, D, F, n, "v5e")
    two = jaxprog.collective_matmul_time(B, D, F, n, "v5e", bidirectional=True)
    assert one.steps == n - 1 and two.steps == n // 2
    assert one.matmul_s == pytest.approx(2 * B * D * F / n / v5e.peak_flops("bf16"))
    assert one.allgather_s == pytest.approx(
        collectives.all_gather_time(B * D * 2, n, v5e.ici_bw_bidi, hop_latency=0).total
    )
    assert one.sequential_s == pytest.approx(one.allgather_s + one.matmul_s)
    # F/n above C / W_oneway: every hop is hidden and the ring costs the matmul alone
    assert F / n > v5e.peak_flops("bf16") / v5e.ici_bw_oneway
    assert one.overlapped_s == pytest.approx(one.matmul_s) and two.overlapped_s == pytest.approx(one.matmul_s)
    # narrow F: communication-bound; both ways round beats gathering, one way round does not
    narrow = jaxprog.collective_matmul_time(B, D, 2048, n, "v5e")
    narrow2 = jaxprog.collective_matmul_time(B, D, 2048, n, "v5e", bidirectional=True)
    assert narrow2.overlapped_s < narrow.sequential_s < narrow.overlapped_s
    single = jaxprog.collective_matmul_time(B, D, F, 1, "v5e")
    assert single.allgather_s == 0 and single.overlapped_s == single.matmul_s and single.speedup == 1


# --- mixture of experts -----------------------------------------------------------------------------------------


def _moe(rng, T=128, D=16, E=8, F=32):
    return (_rand(rng, T, D), _rand(rng, D, E), _rand(rng, E, D, F) / 4, _rand(rng, E, F, D) / 4)


@pytest.mark.parametrize("n,capacity", [(2, 1), (2, 3), (4, 2), (8, 1), (8, 2), (8, 16)])
def test_moe_expert_parallel_equals_the_dense_reference(n, capacity):
    rng = np.random.default_rng(10 * n + capacity)
    x, r, wi, wo = _moe(rng)
    y, dropped = jaxprog.moe_expert_parallel(x, r, wi, wo, jaxprog.ring_mesh(n), capacity=capacity)
    y_ref, dropped_ref = jaxprog.moe_reference(x, r, wi, wo, n, capacity)
    assert dropped == dropped_ref
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_ref), rtol=1e-4, atol=1e-5)
    if capacity >= 128 // n:  # room for every token: nothing dropped
        assert dropped == 0


def test_moe_reference_by_hand():
    """The reference itself, token by token in numpy: top-1 expert, gate, capacity in token order per group."""
    rng = np.random.default_rng(3)
    x, r, wi, wo = (np.asarray(a, np.float64) for a in _moe(rng, T=32))
    cap, groups = 2, 4
    y_ref, dropped = jaxprog.moe_reference(*(jnp.asarray(a, jnp.float32) for a in (x, r, wi, wo)), groups, cap)
    want, n_dropped = np.zeros_like(x), 0
    for g in range(groups):
        used = {}
        for t in range(g * 8, (g + 1) * 8):
            logits = x[t] @ r
            p = np.exp(logits - logits.max())
            p /= p.sum()
            e = int(np.argmax(p))
            used[e] = used.get(e, 0) + 1
            if used[e] > cap:
                n_dropped += 1
                continue
            h = x[t] @ wi[e]
            h = jax.nn.gelu(jnp.asarray(h, jnp.float32))
            want[t] = p[e] * (np.asarray(h, np.float64) @ wo[e])
    assert dropped == n_dropped > 0
    np.testing.assert_allclose(np.asarray(y_ref), want, rtol=1e-4, atol=1e-4)


def test_moe_compiles_two_all_to_alls_of_the_buffer():
    rng = np.random.default_rng(4)
    x, r, wi, wo = _moe(rng)
    found = jaxprog.moe_hlo_collectives(x, r, wi, wo, jaxprog.ring_mesh(8), capacity=3)
    a2a = [c for c in found if c.kind == "all-to-all"]
    assert len(a2a) == 2
    assert all(c.bytes == 8 * 3 * 16 * 4 for c in a2a)  # [E, C, D] float32 per device
    assert [c.kind for c in found if c.kind != "all-to-all"] == ["all-reduce"]


def test_moe_capacity():
    assert jaxprog.moe_capacity(512, 16, 1.0) == 32
    assert jaxprog.moe_capacity(100, 16, 1.25) == 8
    assert jaxprog.moe_capacity(1, 64, 1.0) == 1


# --- Pallas -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("k_loop", [False, True], ids=["k-grid-axis", "k-loop-in-kernel"])
@pytest.mark.parametrize("tiles", [dict(bm=64, bn=64), dict(bm=128, bn=32, bk=32), dict(bm=16, bn=96, bk=48)])
def test_pallas_matmul_equals_dot(tiles, k_loop):
    """Both programs (k as a sequential grid axis with a scratch accumulator, for TPUs; k as a loop inside the
    kernel, for GPUs whose grid programs run concurrently), interpreted here, on one and several k steps."""
    rng = np.random.default_rng(5)
    x, y = _rand(rng, 128, 96), _rand(rng, 96, 192)
    out = jaxprog.pallas_matmul(x, y, k_loop=k_loop, **tiles)
    np.testing.assert_allclose(
        np.asarray(out), np.asarray(x, np.float64) @ np.asarray(y, np.float64), rtol=1e-4, atol=1e-4
    )


# --- the code exercises' checker --------------------------------------------------------------------------------


def _reader_shard_mean(a, mesh):
    spec = P("X", "Y")
    return jax.shard_map(lambda b: jnp.mean(b, axis=0, keepdims=True), mesh=mesh, in_specs=spec, out_specs=spec)(a)


def _reader_ring(x, w, mesh):
    """A reader's collective matmul: the library's ring, called through its public API."""
    return jaxprog.collective_matmul(x, w, mesh)


def test_program_checker_accepts_correct_programs_and_rejects_wrong_ones():
    assert exercises.grade("ch10.q2", _reader_shard_mean).correct
    assert exercises.grade("ch10.q6", _reader_ring).correct
    # the AllGather program has the right values but is not a collective matmul: its HLO gives it away
    g = exercises.grade("ch10.q6", lambda x, w, m: jaxprog.allgather_matmul(x, w, m))
    assert not g.correct and "all-gather" in g.message
    # right values computed outside JAX: nothing to compile, so the ring cannot be checked
    g = exercises.grade("ch10.q6", lambda x, w, m: np.asarray(x) @ np.asarray(w))
    assert not g.correct and "compile" in g.message
    # a program that only works for one mesh shape: mean over a fixed 2 shards
    fixed = lambda a, mesh: np.asarray(a).reshape(2, -1, a.shape[1]).mean(axis=1)  # noqa: E731
    g = exercises.grade("ch10.q2", fixed)
    assert not g.correct and "trial" in g.message

    # a shard_map program with the wrong spec (averages over the Y blocks too)
    def wrong_spec(a, mesh):
        f = lambda b: jax.lax.pmean(jnp.mean(b, axis=0, keepdims=True), "Y")  # noqa: E731
        return jax.shard_map(f, mesh=mesh, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(a)

    assert not exercises.grade("ch10.q2", wrong_spec).correct

    # a program that raises is a wrong answer with the error in the message, not a crash
    def boom(a, mesh):
        raise RuntimeError("not written yet")

    g = exercises.grade("ch10.q2", boom)
    assert not g.correct and "RuntimeError" in g.message
    # not a function at all
    g = exercises.grade("ch10.q6", 3.0)
    assert not g.correct and "function" in g.message
    for wrong in exercises.wrong_answers("ch10.q6"):
        assert not exercises.grade("ch10.q6", wrong).correct


def test_program_check_runs_several_shapes():
    check = exercises.solution("ch10.q2")
    assert isinstance(check, jaxprog.ProgramCheck)
    shapes = {check.make_inputs(np.random.default_rng(0), t)[0].shape for t in range(check.trials)}
    meshes = {tuple(check.make_inputs(np.random.default_rng(0), t)[1].shape.values()) for t in range(3)}
    assert len(meshes) == 3 and len(shapes) >= 2


# --- bad input --------------------------------------------------------------------------------------------------


def test_bad_input_is_refused_with_the_argument_named():
    rng = np.random.default_rng(6)
    ring = jaxprog.ring_mesh(8)
    x, w = _rand(rng, 4, 64), _rand(rng, 64, 64)
    with pytest.raises(ValueError, match="D"):
        jaxprog.collective_matmul(_rand(rng, 4, 60), _rand(rng, 60, 64), ring)
    with pytest.raises(ValueError, match="F"):
        jaxprog.allgather_matmul(x, _rand(rng, 64, 60), ring)
    with pytest.raises(ValueError, match="share F"):
        jaxprog.reducescatter_matmul(x, _rand(rng, 32, 64), ring)
    with pytest.raises(TypeError, match="collective"):
        jaxprog.reducescatter_matmul(x, w, ring, collective="yes")
    with pytest.raises(ValueError, match="share D"):
        jaxprog.collective_matmul(x, _rand(rng, 32, 64), ring)
    with pytest.raises(ValueError, match="axis"):
        jaxprog.collective_matmul(x, w, ring, axis="y")
    with pytest.raises(TypeError, match="mesh"):
        jaxprog.collective_matmul(x, w, "ring")
    with pytest.raises(TypeError, match="bidirectional"):
        jaxprog.collective_matmul(x, w, ring, bidirectional=1)
    with pytest.raises(TypeError, match="x"):
        jaxprog.allgather_matmul(np.arange(256).reshape(4, 64), w, ring)
    with pytest.raises(ValueError, match="bm"):
        jaxprog.pallas_matmul(_rand(rng, 100, 64), _rand(rng, 64, 64), bm=64, bn=64)
    with pytest.raises(ValueError, match="bk"):
        jaxprog.pallas_matmul(_rand(rng, 64, 64), _rand(rng, 64, 64), bm=64, bn=64, bk=48)
    moe = _moe(rng)
    with pytest.raises(ValueError, match="experts"):
        jaxprog.moe_expert_parallel(moe[0], moe[1][:, :6], moe[2][:6], moe[3][:6], jaxprog.ring_mesh(4))
    with pytest.raises(ValueError, match="w_in"):
        jaxprog.moe_expert_parallel(moe[0], moe[1], moe[2][:4], moe[3], ring)
    with pytest.raises(ValueError, match="n_devices"):
        jaxprog.ring_mesh(len(jax.devices()) + 1)
    with pytest.raises(ValueError, match="program"):
        jaxprog.matmul_hlo_collectives("allreduce", ring)
    with pytest.raises(ValueError, match="n_groups"):
        jaxprog.moe_reference(*moe, 3, 2)


def test_jax_itself_refuses_what_the_chapter_shows():
    """The errors the chapter prints are JAX's own, raised by the pinned version."""
    from tpu_notes import devices

    mesh = devices.demo_mesh((2, 4), ("X", "Y"))
    with pytest.raises(ValueError, match="divisible"):
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("Y", None), out_specs=P("Y", None))(jnp.ones((6, 16)))
    with pytest.raises(ValueError, match="'Z'"):
        jax.shard_map(lambda b: b, mesh=mesh, in_specs=P("Z", None), out_specs=P("Z", None))(jnp.ones((8, 16)))
    with pytest.raises(ValueError, match="evenly divide"):
        jax.device_put(np.ones((6, 16), np.float32), NamedSharding(mesh, P("Y", None)))
