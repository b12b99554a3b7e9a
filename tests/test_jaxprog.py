"""Chapter 10's programs (tpu_notes.jaxprog) equal their plain references, and refuse bad input clearly."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P

from tpu_notes import collectives, exercises, hardware, hlo, jaxprog  # noqa: E402


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


# --- async windows of a scheduled module ------------------------------------------------------------------------

# A scheduled module written for this test (not a dump): one permute hidden behind a fusion, one all-gather whose
# start is followed at once by its done, and a second permute inside a while body.
_SCHEDULED = """HloModule windows, is_scheduled=true

%body (p: (f32[8], s32[])) -> (f32[8], s32[]) {
  %p = (f32[8]{0}, s32[]) parameter(0)
  %v = f32[8]{0} get-tuple-element(%p), index=0
  %i = s32[] get-tuple-element(%p), index=1
  %cps = (f32[8]{0}, f32[8]{0}, u32[], u32[]) collective-permute-start(%v), source_target_pairs={{0,1},{1,0}}
  %cpd = f32[8]{0} collective-permute-done(%cps)
  ROOT %t = (f32[8]{0}, s32[]) tuple(%cpd, %i)
}

ENTRY %main (a: f32[4,8], b: f32[8,8]) -> (f32[4,8], f32[8,8]) {
  %a = f32[4,8]{1,0} parameter(0)
  %b = f32[8,8]{1,0} parameter(1)
  %cp-start = (f32[4,8], f32[4,8], u32[], u32[]) collective-permute-start(%a), source_target_pairs={{0,1},{1,0}}
  %fusion.1 = f32[4,8]{1,0} fusion(%a, %b), kind=kOutput, calls=%body
  %dot.2 = f32[4,8]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %cp-done = f32[4,8]{1,0} collective-permute-done(%cp-start)
  %ag-start = (f32[4,8]{1,0}, f32[8,8]{1,0}) all-gather-start(%cp-done), replica_groups={{0,1}}, dimensions={0}
  %ag-done = f32[8,8]{1,0} all-gather-done(%ag-start)
  ROOT %out = (f32[4,8]{1,0}, f32[8,8]{1,0}) tuple(%dot.2, %ag-done)
}
"""


def test_async_windows_reads_what_runs_between_start_and_done():
    found = jaxprog.async_windows(_SCHEDULED)
    by_start = {w.start: w for w in found}
    assert set(by_start) == {"cp-start", "ag-start", "cps"}
    cp = by_start["cp-start"]
    assert cp.kind == "collective-permute" and cp.done == "cp-done" and cp.between == ("fusion.1", "dot.2")
    assert cp.hidden and cp.computation == "main"
    ag = by_start["ag-start"]
    assert ag.kind == "all-gather" and ag.done == "ag-done" and ag.between == () and not ag.hidden
    assert by_start["cps"].computation == "body" and not by_start["cps"].hidden


def test_cpu_collectives_are_synchronous():
    """The CPU backend compiles each ppermute to one synchronous collective-permute: no window to overlap."""
    mesh = jaxprog.ring_mesh(4)
    x = jax.device_put(jnp.zeros((8, 32)), NamedSharding(mesh, P(None, "x")))
    w = jax.device_put(jnp.zeros((32, 32)), NamedSharding(mesh, P(None, "x")))
    compiled = jaxprog._matmul_program(mesh, "x", "collective").lower(x, w).compile()
    if jax.default_backend() == "cpu":
        assert jaxprog.async_windows(compiled) == []
        assert "collective-permute-start" not in compiled.as_text()
    with pytest.raises(TypeError, match="compiled_or_hlo_text"):
        jaxprog.async_windows(3)


# --- ReduceScatter and AllReduce as rings, one way and both ways -----------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8])
def test_ring_reduce_scatter_and_all_reduce_equal_the_sum(n):
    rng = np.random.default_rng(20 + n)
    mesh = jaxprog.ring_mesh(n)
    R, C = 2 * n, 6
    x = _rand(rng, n * R, C)
    want = np.asarray(x, np.float64).reshape(n, R, C).sum(axis=0)
    for bidirectional in (False, True):
        rs = jaxprog.ring_reduce_scatter(x, mesh, bidirectional=bidirectional)
        assert rs.shape == (R, C) and rs.sharding.spec == P("x", None)
        np.testing.assert_allclose(np.asarray(rs), want, rtol=1e-5, atol=1e-5)
        ar = jaxprog.ring_all_reduce(x, mesh, bidirectional=bidirectional)
        np.testing.assert_allclose(np.asarray(ar), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [2, 5, 8])
def test_ring_collectives_compile_to_the_counted_permutes(n):
    mesh = jaxprog.ring_mesh(n)
    x = jax.device_put(jnp.zeros((n * n, 4)), NamedSharding(mesh, P("x", None)))
    for kind in ("reduce-scatter", "all-reduce"):
        for bidirectional in (False, True):
            program = jaxprog._ring_collective_program(mesh, "x", kind, bidirectional)
            permutes = [c for c in hlo.collectives(program.lower(x).compile()) if c.kind == "collective-permute"]
            counted = jaxprog.ring_collective_rounds(kind, n, bidirectional)
            assert len(permutes) == counted["permutes"]
    # by hand: one way N-1 rounds; both ways ceil((N-1)/2), the library's hop count for a bidirectional ring
    assert jaxprog.ring_collective_rounds("reduce-scatter", 8, False) == {"rounds": 7, "permutes": 7}
    assert jaxprog.ring_collective_rounds("reduce-scatter", 8, True) == {"rounds": 4, "permutes": 7}
    assert jaxprog.ring_collective_rounds("all-reduce", 6, True) == {"rounds": 6, "permutes": 10}
    for n in range(1, 10):
        assert jaxprog.ring_collective_rounds("reduce-scatter", n)["rounds"] == collectives.gather_hops(n)


def test_two_way_reduce_scatter_costs_half_in_chapter_3s_model():
    v5e = hardware.get_chip("v5e")
    V, n = 64 * 2**20, 8
    one = collectives.reduce_scatter_time(V, n, v5e.ici_bw_bidi, bidirectional=False, hop_latency=0)
    two = collectives.reduce_scatter_time(V, n, v5e.ici_bw_bidi, bidirectional=True, hop_latency=0)
    # one way: N-1 hops of V/N at W_bidi/2; both ways: ceil((N-1)/2) = N/2 hops of V/N (even N)
    assert one.total == pytest.approx((n - 1) * V / n / (v5e.ici_bw_bidi / 2))
    assert two.total == pytest.approx(n // 2 * V / n / (v5e.ici_bw_bidi / 2))


# --- the Transformer block ------------------------------------------------------------------------------------


def _block(rng, n, T=12, H=None, dh=4):
    H = H or 2 * n
    D, F = 8 * n, 16 * n
    shapes = [(D, H * dh)] * 3 + [(H * dh, D), (D, F), (F, D)]
    return _rand(rng, T, D), [_rand(rng, *s) / np.sqrt(s[0]) for s in shapes], H


def _block_numpy(x, wq, wk, wv, wo, w_in, w_out, n_heads):
    """The block written out in float64 numpy, independent of the library's reference."""
    x, wq, wk, wv, wo, w_in, w_out = (np.asarray(a, np.float64) for a in (x, wq, wk, wv, wo, w_in, w_out))

    def norm(a):
        return a / np.sqrt(np.mean(a * a, axis=-1, keepdims=True) + 1e-6)

    def gelu(a):  # jax.nn.gelu's default, the tanh approximation
        return 0.5 * a * (1 + np.tanh(np.sqrt(2 / np.pi) * (a + 0.044715 * a**3)))

    T = x.shape[0]
    h = norm(x)
    q, k, v = (m.reshape(T, n_heads, -1) for m in (h @ wq, h @ wk, h @ wv))
    s = np.einsum("thd,shd->hts", q, k) / np.sqrt(q.shape[-1])
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    h = x + np.einsum("hts,shd->thd", p, v).reshape(T, -1) @ wo
    return h + gelu(norm(h) @ w_in) @ w_out


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_transformer_block_equals_the_unsharded_block(n):
    rng = np.random.default_rng(30 + n)
    x, ws, H = _block(rng, n)
    mesh = jaxprog.ring_mesh(n)
    want = _block_numpy(x, *ws, H)
    ref = jaxprog.transformer_block_reference(x, *ws, n_heads=H)
    np.testing.assert_allclose(np.asarray(ref), want, rtol=1e-4, atol=1e-4)
    out = jaxprog.transformer_block(x, *ws, mesh, n_heads=H)
    assert out.shape == x.shape and out.sharding.spec == P(None, "x")
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-4, atol=1e-4)
    counts = jaxprog.transformer_block_collectives(x, *ws, mesh, n_heads=H)
    assert counts.get("collective-permute", 0) == 4 * (n - 1)
    assert "all-gather" not in counts and "reduce-scatter" not in counts and counts["all-reduce"] == 2


def test_transformer_block_refuses_bad_shapes():
    rng = np.random.default_rng(7)
    x, ws, H = _block(rng, 4)
    mesh = jaxprog.ring_mesh(4)
    with pytest.raises(ValueError, match="n_heads"):
        jaxprog.transformer_block(x, *ws, mesh, n_heads=6)  # 6 heads on 4 devices
    with pytest.raises(ValueError, match="n_heads"):
        jaxprog.transformer_block_reference(x, *ws, n_heads=0)
    with pytest.raises(ValueError, match="wo"):
        jaxprog.transformer_block(x, *ws[:3], ws[3][:, :4], *ws[4:], mesh, n_heads=H)


# --- the top-k MoE layer with ragged groups ----------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 2, 3])
def test_moe_topk_ragged_equals_the_dense_reference(k):
    rng = np.random.default_rng(40 + k)
    x, r, wi, wo = _moe(rng, T=48)
    y, sizes = jaxprog.moe_topk_ragged(x, r, wi, wo, k)
    assert sizes.shape == (8,) and int(sizes.sum()) == 48 * k  # dropless: every assignment is computed
    want = np.zeros(x.shape)
    xs, rs, wis, wos = (np.asarray(a, np.float64) for a in (x, r, wi, wo))
    for t in range(x.shape[0]):  # by hand, token by token
        logits = xs[t] @ rs
        top = np.argsort(-logits)[:k]
        g = np.exp(logits[top] - logits[top].max())
        g /= g.sum()
        for e, ge in zip(top, g):
            h = np.asarray(jax.nn.gelu(jnp.asarray(xs[t] @ wis[e], jnp.float32)), np.float64)
            want[t] += ge * (h @ wos[e])
    np.testing.assert_allclose(np.asarray(y), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(jaxprog.moe_topk_reference(x, r, wi, wo, k)), want, rtol=1e-4, atol=1e-4)
    counts = np.bincount(np.argsort(-np.asarray(x @ r), axis=1)[:, :k].ravel(), minlength=8)
    np.testing.assert_array_equal(sizes, counts)


def test_moe_topk_refuses_bad_k():
    x, r, wi, wo = _moe(np.random.default_rng(8))
    for k in (0, 9, 1.5, True):
        with pytest.raises(ValueError, match="k must"):
            jaxprog.moe_topk_ragged(x, r, wi, wo, k)
