"""Exercises of Chapter 10 (ids ch10.*), registered with their reference solutions.

Three of them take code as the answer (``ch10.q4``-``q6``): the reader's function is run against a reference on
random inputs and meshes of several shapes by :class:`tpu_notes.jaxprog.ProgramCheck`. JAX is imported only when
one of these exercises is graded.
"""

from __future__ import annotations

from functools import cache

from . import Exercise, register

#: Mesh shapes (X, Y) the code exercises run on, one per trial.
MESH_SHAPES = ((2, 4), (4, 2), (8, 1))


@cache
def _mesh(shape):
    from tpu_notes.compat import make_mesh
    from tpu_notes.devices import require

    n = shape[0] * shape[1]
    return make_mesh(shape, ("X", "Y"), devices=require(n, what="this exercise"))


# -- 10.1: local shapes ---------------------------------------------------------------------------------------
Q1_SHAPE = (1024, 4096)  # A: float32[S_X, D_Y] on a (X=2, Y=4) mesh


def _q1():
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    return list(NamedSharding(_mesh((2, 4)), P("X", "Y")).shard_shape(Q1_SHAPE))


register(
    Exercise(
        id="ch10.q1",
        title="local shape of A[S_X, D_Y]",
        solve=_q1,
        unit="",
        rtol=0.0,
        hint="Each mesh axis divides the dimension it shards by its size: S by X, D by Y.",
    )
)


# -- 10.4: hops and permutes of the two-way ring, on a ring the chapter does not print ---------------------------
#: The ring of Exercise 10.4: six devices (the chapter prints the counts for eight). Even, so the two ways meet.
Q4_RING = 6


def _q2():
    from tpu_notes import jaxprog
    from tpu_notes.devices import require

    n = Q4_RING
    mesh = jaxprog.ring_mesh(devices=require(n, what="this exercise"))
    rounds = jaxprog.collective_matmul_time(64, 64 * n, 64 * n, n, bidirectional=True).steps
    ops = jaxprog.matmul_hlo_collectives("bidirectional", mesh, D=64 * n, F=64 * n)["collective-permute"]
    return [rounds, ops]


register(
    Exercise(
        id="ch10.q4",
        title="hops and permutes of a two-way ring of 6",
        solve=_q2,
        unit="",
        rtol=0.0,
        hint="Every device needs the N-1 blocks it does not own; two ways round, each round brings one "
        "block from each side, except where the two ways meet on an even ring. Each block still "
        "crosses to each device once: count the permutes of both directions.",
    )
)


# -- 10.3: what overlap buys on a TPU -------------------------------------------------------------------------
Q3 = dict(B=1024, D=8192, F=32768, n=8, chip="v5e", dtype="bf16")


def _q3():
    from tpu_notes import jaxprog

    t = jaxprog.collective_matmul_time(**Q3)
    return [t.sequential_s, t.overlapped_s]


register(
    Exercise(
        id="ch10.q5",
        title="AllGather-then-matmul vs the ring on v5e",
        solve=_q3,
        unit="s",
        rtol=0.05,
        hint="Sequential: the AllGather of A (Chapter 3) plus the whole matmul. Ring: one partial "
        "matmul, then N-1 hops, each taking the longer of sending a [B, D/N] block one way and "
        "one partial matmul.",
    )
)


# -- 10.4 / 10.5: shard_map programs (the book's first worked problem) ------------------------------------------
def _sharded_input(rng, trial):
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    X, Y = MESH_SHAPES[trial % len(MESH_SHAPES)]
    mesh = _mesh((X, Y))
    S = X * int(rng.integers(2, 6))
    D = Y * int(rng.integers(1, 4)) * 2
    a = rng.standard_normal((S, D)).astype(np.float32)
    return jax.device_put(a, NamedSharding(mesh, P("X", "Y"))), mesh


def _shard_mean_ref(a, mesh):
    import numpy as np

    X = mesh.shape["X"]
    return np.asarray(a).reshape(X, -1, a.shape[1]).mean(axis=1)


def _q4_inputs(rng, trial):
    return _sharded_input(rng, trial)


def _wrong_global_mean(a, mesh):
    import numpy as np

    return np.broadcast_to(np.asarray(a).mean(axis=0), (mesh.shape["X"], a.shape[1]))


def _wrong_shard_sum(a, mesh):
    return _shard_mean_ref(a, mesh) * (a.shape[0] // mesh.shape["X"])


def _q4():
    from tpu_notes.jaxprog import ProgramCheck

    return ProgramCheck(_shard_mean_ref, _q4_inputs, wrong=(_wrong_global_mean, _wrong_shard_sum))


register(
    Exercise(
        id="ch10.q2",
        title="mean of each X shard, with shard_map",
        solve=_q4,
        unit="a function",
        rtol=0.0,
        hint="in_specs=P('X', 'Y'), out_specs=P('X', 'Y'); inside, each device holds [S/X, D/Y]: "
        "average over axis 0 with keepdims=True. No collective is needed.",
    )
)

Q5_SHIFT = 1


def _roll_ref(a, mesh, shift):
    import numpy as np

    X = mesh.shape["X"]
    b = np.asarray(a).reshape(X, -1, a.shape[1])
    return (np.roll(b, shift, axis=1) - b).reshape(a.shape)


def _q5_inputs(rng, trial):
    a, mesh = _sharded_input(rng, trial)
    return a, mesh, int(rng.integers(1, 3))


def _wrong_global_roll(a, mesh, shift):
    import numpy as np

    b = np.asarray(a)
    return np.roll(b, shift, axis=0) - b


def _wrong_roll_sign(a, mesh, shift):
    return -_roll_ref(a, mesh, shift)


def _q5():
    from tpu_notes.jaxprog import ProgramCheck

    return ProgramCheck(_roll_ref, _q5_inputs, wrong=(_wrong_global_roll, _wrong_roll_sign))


register(
    Exercise(
        id="ch10.q3",
        title="roll within each X shard, with shard_map",
        solve=_q5,
        unit="a function",
        rtol=0.0,
        hint="Inside shard_map the rows a device holds are its whole shard: jnp.roll(x, shift, axis=0) "
        "- x there, with the same spec in and out.",
    )
)


# -- reading a program's structure from its jaxpr (10.6 and 10.9) ------------------------------------------------
#: A loop body (scan, while) is counted this many times at most when a program's primitives are listed in order:
#: enough to see whether a body that permutes also multiplies before it permutes again.
_LOOP_UNROLL = 8


def _sub_jaxprs(value):
    """The jaxprs held by one parameter of an equation (a Jaxpr, a ClosedJaxpr, or a tuple of them)."""
    if hasattr(value, "eqns"):
        return [value]
    if hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
        return [value.jaxpr]
    if isinstance(value, (tuple, list)):
        return [j for v in value for j in _sub_jaxprs(v)]
    return []


def _primitive_order(jaxpr) -> list:
    """``(primitive name, output shapes)`` of every equation of ``jaxpr`` in program order, nested jaxprs (jit,
    shard_map, remat, ...) expanded in place and loop bodies repeated (``scan`` its length, ``while`` three times,
    both capped at :data:`_LOOP_UNROLL`), so the order of communication and compute reads as it runs."""
    out = []
    for eqn in jaxpr.eqns:
        subs = [j for v in eqn.params.values() for j in _sub_jaxprs(v)]
        name = eqn.primitive.name
        if not subs:
            out.append((name, tuple(tuple(getattr(v.aval, "shape", ())) for v in eqn.outvars)))
            continue
        if name == "while":
            body = [j for j in _sub_jaxprs(eqn.params.get("body_jaxpr")) if j is not None]
            repeat, subs = 3, body or subs
        elif name == "scan":
            repeat = int(eqn.params.get("length", 1))
        else:
            repeat = 1
        for _ in range(max(1, min(repeat, _LOOP_UNROLL))):
            for sub in subs:
                out.extend(_primitive_order(sub))
    return out


def _traced(fn, args, static: int):
    """``fn(*args)``'s jaxpr (argument ``static`` static), or the reason it cannot be traced."""
    import jax

    try:
        return jax.make_jaxpr(fn, static_argnums=static)(*args).jaxpr, None
    except Exception as err:  # noqa: BLE001 - the reader's code may fail to trace in many ways
        return None, f"jax.make_jaxpr cannot trace it ({type(err).__name__}), so its structure cannot be read"


# -- 10.6: a collective matmul written by the reader -------------------------------------------------------------
def _matmul_ref(x, w, mesh):
    """The library's one-way ring (tests/test_jaxprog.py checks it against the plain product)."""
    from tpu_notes import jaxprog

    return jaxprog.collective_matmul(x, w, mesh)


def _q6_inputs(rng, trial):
    import jax
    import numpy as np
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    from tpu_notes import jaxprog
    from tpu_notes.devices import require

    n = (8, 4, 2)[trial % 3]
    mesh = jaxprog.ring_mesh(devices=require(n, what="this exercise"))
    B, D, F = int(rng.integers(2, 9)), n * int(rng.integers(1, 5)), n * int(rng.integers(1, 5))
    x = rng.standard_normal((B, D)).astype(np.float32)
    w = rng.standard_normal((D, F)).astype(np.float32)
    return (
        jax.device_put(x, NamedSharding(mesh, P(None, "x"))),
        jax.device_put(w, NamedSharding(mesh, P(None, "x"))),
        mesh,
    )


def _wrong_one_hop_short(x, w, mesh):
    """A ring that stops one hop early: the block N-1 places away is never multiplied."""
    import numpy as np

    n = mesh.shape["x"]
    x, w = np.asarray(x), np.asarray(w)
    k, f = x.shape[1] // n, w.shape[1] // n
    out = np.zeros((x.shape[0], w.shape[1]))
    for me in range(n):
        for hop in range(n - 1):
            j = (me + hop) % n
            out[:, me * f : (me + 1) * f] += x[:, j * k : (j + 1) * k] @ w[j * k : (j + 1) * k, me * f : (me + 1) * f]
    return out


def _wrong_block_index(x, w, mesh):
    """A ring that multiplies each received block by the rows of the wrong block (off by one)."""
    import numpy as np

    n = mesh.shape["x"]
    x, w = np.asarray(x), np.asarray(w)
    k = x.shape[1] // n
    return np.roll(x, k, axis=1) @ w if n > 1 else 2 * (x @ w)


def _no_all_gather(fn, args):
    """None if ``fn`` compiles (under jax.jit, the mesh static) to a program without an AllGather, else why not."""
    import jax

    from tpu_notes import hlo

    x, w, mesh = args
    try:
        compiled = jax.jit(fn, static_argnums=2).lower(x, w, mesh).compile()
    except Exception as err:  # noqa: BLE001 - the reader's code may fail to trace in many ways
        return f"it does not compile under jax.jit ({type(err).__name__}), so its HLO cannot be read"
    kinds = sorted({c.kind for c in hlo.collectives(compiled)})
    if "all-gather" in kinds:
        return "its compiled HLO still gathers x with an all-gather: pass blocks round the ring with ppermute"
    if "collective-permute" not in kinds:
        return f"its compiled HLO has no collective-permute (collectives: {kinds or 'none'})"
    return _ring_interleaves(fn, args)


def _ring_interleaves(fn, args):
    """None if ``fn``'s jaxpr multiplies between its hops, else why not.

    The point of the ring is that each hop travels while a partial matmul computes, so in program order the
    ``ppermute``s must be interleaved with ``dot_general``s: between two matmuls at most two permutes (one each way
    round, for a two-way ring). A program that does all its permutes first and one matmul after has the ring's
    collectives but hides nothing."""
    jaxpr, reason = _traced(fn, args, 2)
    if reason:
        return reason
    run, longest, seen = 0, 0, 0
    for name, _ in _primitive_order(jaxpr):
        if name == "ppermute":
            run, seen = run + 1, seen + 1
            longest = max(longest, run)
        elif name == "dot_general":
            run = 0
    if seen == 0:
        return "its jaxpr has no ppermute"
    if longest > 2:
        return (
            f"{longest} ppermutes follow each other with no matmul between them: each hop must travel while "
            "a partial matmul computes (multiply the block you hold, then pass it on)"
        )
    return None


def _gather_then_multiply(x, w, mesh):
    """The AllGather program: right values, but not a collective matmul."""
    from tpu_notes import jaxprog

    return jaxprog.allgather_matmul(x, w, mesh)


def _permutes_then_one_matmul(x, w, mesh):
    """Right values and N-1 permutes, but the ring only gathers: every hop first, one matmul after (no overlap)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    n = mesh.shape["x"]
    perm = [(j, (j - 1) % n) for j in range(n)]

    def body(xb, wb):
        me, k = jax.lax.axis_index("x"), xb.shape[1]
        blocks, cur = [xb], xb
        for _ in range(1, n):
            cur = jax.lax.ppermute(cur, "x", perm)  # block me + hop
            blocks.append(cur)
        gathered = jnp.concatenate(blocks, axis=1)  # blocks me, me+1, ...: rows of w rolled to match
        return gathered @ jnp.roll(wb, -me * k, axis=0)

    spec = P(None, "x")
    return jax.shard_map(body, mesh=mesh, in_specs=(spec, spec), out_specs=spec)(x, w)


def _q6():
    from tpu_notes.jaxprog import ProgramCheck

    return ProgramCheck(
        _matmul_ref,
        _q6_inputs,
        inspect=_no_all_gather,
        wrong=(_wrong_one_hop_short, _wrong_block_index, _gather_then_multiply, _permutes_then_one_matmul),
    )


register(
    Exercise(
        id="ch10.q6",
        title="a one-way collective matmul",
        solve=_q6,
        unit="a function",
        rtol=0.0,
        hint="Inside shard_map: acc = x @ (my rows of w); then N-1 times: ppermute x one step round "
        "the ring, work out whose block arrived (axis_index + hop, modulo N) and add that block "
        "times its rows of w.",
    )
)


# -- 10.8: the MoE layer's AllToAll ----------------------------------------------------------------------------
Q7 = dict(tokens_per_device=4096, n_experts=64, d_model=4096, n=8, capacity_factor=1.25, chip="v5e")


def _q7():
    from tpu_notes import collectives, hardware, jaxprog

    q = Q7
    cap = jaxprog.moe_capacity(q["tokens_per_device"], q["n_experts"], q["capacity_factor"])
    nbytes = q["n_experts"] * cap * q["d_model"] * 2  # the [E, C, D] bf16 dispatch buffer
    chip = hardware.get_chip(q["chip"])
    # tpu_notes.collectives prices an AllToAll by the whole array: one buffer per device
    t = collectives.all_to_all_time(q["n"] * nbytes, q["n"], chip.ici_bw_bidi).total
    return [nbytes, 2 * t]


register(
    Exercise(
        id="ch10.q8",
        title="the two AllToAlls of an MoE layer",
        solve=_q7,
        unit="",
        rtol=0.05,
        hint="The buffer is [E, C, D] with C = ceil(f·T/E) slots per expert; dispatch and combine are "
        "each one AllToAll of Chapter 3 over the N buffers together.",
    )
)


# -- 10.10: tile sizes of the Pallas kernel --------------------------------------------------------------------
#: Exercise 10.10: the intensity of one rectangular tile, and the smallest square tile (a multiple of 128) that
#: makes a bf16 matmul compute-bound on a chip whose critical intensity the chapter does not print.
Q8_TILE, Q8_CHIP, Q8_STEP = (256, 2048), "v6e", 128


def _q8():
    from tpu_notes import hardware, roofline

    intensity = roofline.tiled_matmul_intensity(*Q8_TILE, "bf16")
    critical = hardware.get_chip(Q8_CHIP).critical_intensity("bf16")
    b = Q8_STEP
    while roofline.tiled_matmul_intensity(b, b, "bf16") < critical:
        b += Q8_STEP
    return [intensity, b]


register(
    Exercise(
        id="ch10.q10",
        title="intensity of a tile, and the tile v6e needs",
        solve=_q8,
        unit="",
        rtol=1e-3,  # the tile side is an integer: 1150 is not an answer
        hint="A bm x bn output tile streams bm + bn elements of K per 2·bm·bn FLOPs: in bf16 the "
        "intensity is bm·bn/(bm + bn), b/2 for a square b x b tile. v6e's critical intensity is its "
        "peak bf16 FLOP/s over its HBM bandwidth.",
    )
)


# -- 10.7: a ReduceScatter both ways round ----------------------------------------------------------------------
#: A bf16 ReduceScatter of 64 MiB (each device's addend) over a ring of 6 v5e chips.
Q_RS = dict(nbytes=64 * 2**20, n=6, chip="v5e")


def _q9():
    from tpu_notes import collectives, hardware, jaxprog

    q = Q_RS
    bw = hardware.get_chip(q["chip"]).ici_bw_bidi
    rounds = jaxprog.ring_collective_rounds("reduce-scatter", q["n"], bidirectional=True)["rounds"]
    one = collectives.reduce_scatter_time(q["nbytes"], q["n"], bw, bidirectional=False).total
    two = collectives.reduce_scatter_time(q["nbytes"], q["n"], bw, bidirectional=True).total
    return [rounds, one, two]


register(
    Exercise(
        id="ch10.q7",
        title="ReduceScatter one way and both ways round",
        solve=_q9,
        unit="",
        rtol=0.05,
        hint="Both ways round, block j's sum arrives from both sides and the two accumulators meet at j: "
        "ceil((N-1)/2) rounds. Each hop carries one V/N block over one direction of a link (W_bidi/2): "
        "N-1 hops one way, ceil((N-1)/2) both ways.",
    )
)


# -- 10.9: a dropless top-k MoE layer with ragged groups ----------------------------------------------------------
def _topk_ref(x, router, w_in, w_out, k):
    """The layer as the exercise asks for it, with ``ragged_dot`` (so the checker's reference passes its own
    structural check); tests/test_jaxprog.py checks the library's ragged layer against the dense reference."""
    import jax
    import jax.numpy as jnp

    logits, experts = jax.lax.top_k(x @ router, k)
    gates = jax.nn.softmax(logits, axis=-1).reshape(-1)
    flat = experts.reshape(-1)  # assignment i: token i // k to expert flat[i]
    order = jnp.argsort(flat, stable=True)
    tokens = order // k
    sizes = jnp.bincount(flat, length=router.shape[1]).astype(jnp.int32)
    h = jax.nn.gelu(jax.lax.ragged_dot(jnp.asarray(x)[tokens], jnp.asarray(w_in), sizes))
    out = jax.lax.ragged_dot(h, jnp.asarray(w_out), sizes) * gates[order][:, None]
    return jnp.zeros(x.shape, out.dtype).at[tokens].add(out)


def _dense_reference(x, router, w_in, w_out, k):
    """Right values, every expert on every token: E/k times the FLOPs, and no ragged_dot."""
    from tpu_notes import jaxprog

    return jaxprog.moe_topk_reference(x, router, w_in, w_out, k)


def _q10_inputs(rng, trial):
    import numpy as np

    T, D, E, F = ((24, 8, 4, 16), (40, 12, 8, 8), (16, 4, 6, 12))[trial % 3]  # shapes differ per trial
    k = (2, 3, 1)[trial % 3]
    x = rng.standard_normal((T, D)).astype(np.float32)
    router = rng.standard_normal((D, E)).astype(np.float32)
    w_in = (rng.standard_normal((E, D, F)) / np.sqrt(D)).astype(np.float32)
    w_out = (rng.standard_normal((E, F, D)) / np.sqrt(F)).astype(np.float32)
    return x, router, w_in, w_out, k


def _wrong_top1(x, router, w_in, w_out, k):
    """Only the best expert, with its full gate: right for k = 1 only."""
    from tpu_notes import jaxprog

    return jaxprog.moe_topk_reference(x, router, w_in, w_out, 1)


def _wrong_softmax_over_all(x, router, w_in, w_out, k):
    """Gates from a softmax over all E logits (not renormalised over the chosen k)."""
    import jax
    import numpy as np

    y = np.zeros(x.shape)
    logits = x @ router
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    top = np.argsort(-logits, axis=-1)[:, :k]
    for t in range(x.shape[0]):
        for e in top[t]:
            h = np.asarray(jax.nn.gelu(x[t] @ w_in[e]))
            y[t] += p[t, e] * (h @ w_out[e])
    return y


def _ragged_not_dense(fn, args):
    """None if ``fn``'s jaxpr multiplies with ``ragged_dot`` and builds no dense ``[tokens, experts, ...]`` value,
    else why not. The dense reference (every expert on every token) has the right values at ``E/k`` times the
    FLOPs: the exercise is to avoid it."""
    x, router, w_in = args[0], args[1], args[2]
    T, E, features = x.shape[0], router.shape[1], set(w_in.shape[1:])  # features: D and F
    jaxpr, reason = _traced(fn, args, 4)
    if reason:
        return reason
    order = _primitive_order(jaxpr)
    if not any(name.startswith("ragged_dot") for name, _ in order):
        return "its jaxpr has no ragged_dot: multiply each expert's group of rows with jax.lax.ragged_dot"
    for name, shapes in order:
        for shape in shapes:
            if len(shape) >= 3 and T in shape and E in shape and features & set(shape):
                return (
                    f"it builds a dense {list(shape)} value ({name}) over all {T} tokens and {E} experts: "
                    "run each expert on its own tokens only"
                )
    return None


def _q10():
    from tpu_notes.jaxprog import ProgramCheck

    return ProgramCheck(
        _topk_ref,
        _q10_inputs,
        rtol=1e-4,
        atol=1e-5,
        inspect=_ragged_not_dense,
        wrong=(_wrong_top1, _wrong_softmax_over_all, _dense_reference),
    )


register(
    Exercise(
        id="ch10.q9",
        title="a top-k MoE layer with ragged_dot",
        solve=_q10,
        unit="a function",
        rtol=0.0,
        hint="jax.lax.top_k(x @ router, k) gives each token's experts and logits; softmax the k logits. "
        "Sort the T·k assignments by expert, count each expert's group (jnp.bincount), run "
        "jax.lax.ragged_dot(x[tokens], w_in, sizes), gelu, ragged_dot with w_out, scale by the gates and "
        "add each row back to its token (.at[tokens].add).",
    )
)


# -- 10.11: write a Pallas kernel body (fused silu(x) * y) ----------------------------------------------------------
#: The array the kernel of Exercise 10.11 runs over, its block (a multiple of a TPU's (8, 128) tile) and grid.
Q11_SHAPE = (64, 256)
Q11_BLOCK = (16, 128)
Q11_GRID = (Q11_SHAPE[0] // Q11_BLOCK[0], Q11_SHAPE[1] // Q11_BLOCK[1])
#: float32 in and out: the interpreter and a TPU's exp and divide agree with numpy to a few ulps.
Q11_RTOL, Q11_ATOL = 1e-5, 1e-6


def q11_call(body, *, interpret: bool):
    """The ``pallas_call`` of Exercise 10.11 around the reader's ``body(x_ref, y_ref, o_ref)``: float32
    ``Q11_SHAPE`` arrays, one ``Q11_BLOCK`` block of each per program of a ``Q11_GRID`` grid (both axes
    "parallel"), run by Pallas's TPU interpreter when ``interpret`` (on a CPU) or compiled for a TPU."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    if not callable(body):
        raise TypeError(f"body must be a function body(x_ref, y_ref, o_ref); got {type(body).__name__}")
    spec = pl.BlockSpec(Q11_BLOCK, lambda i, j: (i, j))
    return pl.pallas_call(
        body,
        out_shape=jax.ShapeDtypeStruct(Q11_SHAPE, jnp.float32),
        grid=Q11_GRID,
        in_specs=[spec, spec],
        out_specs=spec,
        compiler_params=pltpu.CompilerParams(dimension_semantics=("parallel", "parallel")),
        interpret=pltpu.InterpretParams() if interpret else False,
    )


def _q11_inputs():
    import numpy as np

    rng = np.random.default_rng(11)
    x = (4 * rng.standard_normal(Q11_SHAPE)).astype(np.float32)  # both signs, silu far from x and from relu
    y = rng.standard_normal(Q11_SHAPE).astype(np.float32)
    return x, y


def _q11_body(x_ref, y_ref, o_ref):
    import jax.numpy as jnp

    x = x_ref[...]
    o_ref[...] = x / (1 + jnp.exp(-x)) * y_ref[...]


def _q11_wrong_product(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * y_ref[...]


def _q11_wrong_sigmoid(x_ref, y_ref, o_ref):
    import jax.numpy as jnp

    o_ref[...] = y_ref[...] / (1 + jnp.exp(-x_ref[...]))


def _q11_wrong_cumsum(x_ref, y_ref, o_ref):
    """Right values, but through a cumulative sum, which Mosaic TPU does not lower (the interpreter runs it)."""
    import jax.numpy as jnp

    x = x_ref[...]
    z = x / (1 + jnp.exp(-x)) * y_ref[...]
    o_ref[...] = z + 0.0 * jnp.cumsum(z, axis=0)


class _KernelBodyCheck:
    """Exercise 10.11's checker: the answer is a kernel body; it is run in the TPU interpreter on fixed inputs and
    compared with ``silu(x) * y`` (numpy, float64) at ``Q11_RTOL``/``Q11_ATOL``, then lowered for a TPU (Mosaic)
    with :func:`tpu_notes.kernels.lowered_text`. Calling it runs the reference body."""

    def __call__(self, x_ref, y_ref, o_ref):
        _q11_body(x_ref, y_ref, o_ref)

    def __repr__(self) -> str:
        return "KernelBodyCheck(silu(x) * y)"

    def wrong_programs(self):
        return [_q11_wrong_product, _q11_wrong_sigmoid, _q11_wrong_cumsum]

    def check_program(self, body) -> tuple:
        import jax
        import numpy as np

        from tpu_notes import kernels

        if not callable(body):
            raise TypeError(f"answer must be a kernel body(x_ref, y_ref, o_ref); got {type(body).__name__}")
        x, y = _q11_inputs()
        x64 = x.astype(np.float64)
        want = x64 / (1 + np.exp(-x64)) * y
        try:
            got = np.asarray(jax.jit(q11_call(body, interpret=True))(x, y), np.float64)
        except Exception as err:  # noqa: BLE001 - the reader's code may raise anything; report it
            return False, f" (the interpreter raised {type(err).__name__}: {str(err)[:160]})"
        if got.shape != want.shape or not np.allclose(got, want, rtol=Q11_RTOL, atol=Q11_ATOL):
            bad = int(np.sum(~np.isclose(got, want, rtol=Q11_RTOL, atol=Q11_ATOL)))
            return False, f" ({bad} of {want.size} outputs differ from silu(x) * y)"
        spec = jax.ShapeDtypeStruct(Q11_SHAPE, np.float32)
        try:
            kernels.lowered_text(q11_call(body, interpret=False), (spec, spec), platform="tpu")
        except kernels.KernelRefused as err:
            return False, f" (the interpreter's values are right, but Mosaic TPU refuses it: {str(err)[:200]})"
        except Exception as err:  # noqa: BLE001 - any other failure to lower is the reader's to see
            return False, f" (lowering for TPU raised {type(err).__name__}: {str(err)[:160]})"
        return True, ""


register(
    Exercise(
        id="ch10.q11",
        title="a fused silu(x) * y Pallas kernel",
        solve=_KernelBodyCheck,
        unit="a kernel body",
        rtol=0.0,
        hint="The body sees one (16, 128) block of each array as a Ref: read x_ref[...] and y_ref[...], compute "
        "x / (1 + exp(-x)) * y (or jax.nn.silu(x) * y) and write the whole block with o_ref[...] = ...; use only "
        "elementwise jnp operations, which Mosaic TPU lowers.",
    )
)
