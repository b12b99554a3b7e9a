"""Chapter 10's JAX programs: the sharded algorithms of the earlier chapters written with ``jax.shard_map``.

Each program has a plain reference it must equal (``tests/test_jaxprog.py`` checks every one):

- :func:`collective_table`: every collective of Chapter 3 run under ``shard_map`` on a 1-D mesh, with the local
  shapes before and after and the bytes of the op XLA compiled, next to Chapter 3's array size ``V``.
- :func:`allgather_matmul` and :func:`collective_matmul`: ``A[B, D_X] ·_D W[D, F_X] → Out[B, F_X]``, either
  AllGather A then multiply, or a ring of ``ppermute`` hops each overlapped with one partial matmul (one way round
  or both ways at once). :func:`collective_matmul_time` prices both on a TPU with Chapter 3's ICI model.
  :func:`reducescatter_matmul` is the down-projection's counterpart, ``x[B, F_X] ·_F w[F_X, D] → [B, D_X]``:
  a ``psum_scatter`` after the matmul, or an accumulator passed round the ring.
- :func:`moe_expert_parallel`: a top-1 mixture-of-experts layer whose experts are split over a mesh axis, tokens
  sent to their expert and back with two ``all_to_all``; a fixed capacity per expert and per sending device drops
  the overflow. :func:`moe_reference` computes the same layer densely, one token at a time.
- :func:`async_windows`: every ``-start``/``-done`` pair of a scheduled HLO module and the compute XLA put
  between them, i.e. what a transfer can overlap (none on CPU, whose collectives are synchronous).
- :func:`ring_reduce_scatter` and :func:`ring_all_reduce`: the two collectives written as rings of ``ppermute``,
  one way round or both ways at once (``⌈(N−1)/2⌉`` rounds); :func:`ring_collective_rounds` counts them.
- :func:`transformer_block`: a pre-norm decoder block (causal attention and a gelu MLP) with tensor parallelism,
  every matmul a collective matmul; :func:`transformer_block_reference` is the same block on one device.
- :func:`moe_topk_ragged`: a dropless top-k MoE layer whose experts run on ragged groups
  (``jax.lax.ragged_dot``); :func:`moe_topk_reference` computes it densely.
- :class:`ProgramCheck`: grades a reader's function against a reference on random inputs and shapes; the
  exercises of Chapter 10 whose answer is code use it (``tpu_notes.exercises`` calls its ``check_program``).

Importing this module imports JAX.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from . import collectives as C
from . import hlo
from .compat import make_mesh as _make_mesh
from .compat import shard_map as _shard_map
from .hardware import get_chip
from .roofline import compute_time
from .transformer import moe_capacity  # the one capacity formula (Chapter 4), used by the MoE layer below
from .units import Bool, capped, check_bool, check_choice, check_positive, checked, dtype_bytes

#: Most devices a 1-D mesh of this module spans (a ring of ``ppermute`` hops is unrolled in the program).
MAX_RING = 64
#: Largest array (elements) a program of this module accepts: these are teaching programs, not production ones.
MAX_ELEMENTS = 2**26
#: Largest side of a teaching program's array (rows, cols, B, D, F) and of a Pallas block.
MAX_SIDE = 2**14
MAX_BLOCK = 2**16

#: The argument kinds of this module.
RingSize = capped(MAX_RING)
Side = capped(MAX_SIDE)
Capacity = capped(MAX_ELEMENTS)

# ------------------------------------------------------------------------------------------------------------
# Checks
# ------------------------------------------------------------------------------------------------------------


def _check_mesh(mesh, axis) -> int:
    """The size of ``axis`` in ``mesh``, or an error naming ``mesh`` or ``axis``."""
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh (e.g. jaxprog.ring_mesh(8)); got {type(mesh).__name__}")
    if not isinstance(axis, str) or axis not in mesh.axis_names:
        raise ValueError(f"axis must name an axis of the mesh, one of {list(mesh.axis_names)}; got {axis!r}")
    return int(mesh.shape[axis])


def _check_array(name: str, x, ndim: int):
    if not hasattr(x, "shape") or not hasattr(x, "dtype") or isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be an array of {ndim} dimensions; got {type(x).__name__}")
    if len(x.shape) != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions; got shape {tuple(x.shape)}")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"{name} must hold floating-point numbers; got dtype {x.dtype}")
    if math.prod(x.shape) > MAX_ELEMENTS or min(x.shape) < 1:
        raise ValueError(
            f"{name} must have between 1 and {MAX_ELEMENTS} elements and no empty dimension; got shape {tuple(x.shape)}"
        )
    return x


def _divides(what: str, size: int, n: int, axis: str) -> None:
    if size % n:
        raise ValueError(
            f"{what} ({size}) must be divisible by the {n} devices of mesh axis {axis!r}; "
            f"allowed sizes are multiples of {n}"
        )


# ------------------------------------------------------------------------------------------------------------
# Meshes and the collectives one by one
# ------------------------------------------------------------------------------------------------------------


@checked
def ring_mesh(n_devices: RingSize | None = None, axis: str = "x", *, devices=None):
    """A 1-D mesh with one Auto axis named ``axis`` over ``n_devices`` of the demo's devices.

    ``devices`` is the setup cell's ``DEVICES`` (None: :func:`tpu_notes.devices.demo_devices`); ``n_devices``
    defaults to all of them (at most 8 when ``devices`` is None). Asking for more devices than there are is a
    ``ValueError`` that says how many there are.
    """
    from .devices import demo_devices

    if not isinstance(axis, str) or not axis.isidentifier():
        raise ValueError(f"axis must be a mesh axis name such as 'x'; got {axis!r}")
    if n_devices is None:
        devs = demo_devices(MAX_RING, devices=devices) if devices is not None else demo_devices(8)
        n = len(devs)
    else:
        n = n_devices
        devs = demo_devices(n, devices=devices)
        if len(devs) < n:
            raise ValueError(
                f"n_devices ({n}) is more than the {len(devs)} devices available; allowed: 1 to {len(devs)}"
            )
    return _make_mesh((n,), (axis,), devices=devs[:n])


@dataclass(frozen=True)
class CollectiveRow:
    """One collective run under ``shard_map``: what each device holds before and after, and what XLA compiled."""

    kind: str  # Chapter 3's name: "all-gather", "reduce-scatter", ...
    jax_call: str  # the jax.lax call that produced it
    local_in: tuple  # shape of one device's block before
    local_out: tuple  # shape of one device's block after
    hlo_op: str  # the collective op XLA compiled (after CPU's reduce-scatter spelling is undone)
    hlo_bytes: float  # bytes of that op per device: the larger of its operand and result, bytes
    device_bytes: float  # the same, expected from the notation: the larger local block, bytes
    array_bytes: float  # V as tpu_notes.collectives takes it (gathered, unreduced or whole array), bytes
    received_bytes: float  # bytes one device receives on a one-way ring (Chapter 3's model), bytes

    @property
    def agrees(self) -> bool:
        """True when XLA compiled the expected op on the bytes the notation predicts."""
        return self.hlo_op == self.kind and math.isclose(self.hlo_bytes, self.device_bytes)


#: The collectives of Chapter 3 and the jax.lax call that makes each one (x is the local block of one device).
_LAX_CALLS = {
    "all-gather": "all_gather(x, 'x', tiled=True)",
    "reduce-scatter": "psum_scatter(x, 'x', tiled=True)",
    "all-reduce": "psum(x, 'x')",
    "all-to-all": "all_to_all(x, 'x', 1, 0, tiled=True)",
    "collective-permute": "ppermute(x, 'x', ring)",
}


@checked
def collective_table(mesh, axis: str = "x", rows: Side = 64, cols: Side = 128) -> list[CollectiveRow]:
    """Run each collective of Chapter 3 on a ``float32[rows, cols]`` array split over ``axis``; one row each.

    The input of every program is the array split along its rows, so each device starts with ``[rows/N, cols]``
    (a block of ``b`` bytes). ``array_bytes`` is ``V`` as :mod:`tpu_notes.collectives` takes it: the gathered
    array ``N·b`` of an AllGather, each device's addend ``b`` of an AllReduce or a ReduceScatter, the whole array
    ``N·b`` of an AllToAll, the block of a permute. ``received_bytes`` is what one device receives on a one-way
    ring: ``(N−1)/N`` of the gathered or reduced array (twice that for an AllReduce), ``(N−1)/N`` of its own
    block for an AllToAll, the whole block for a permute.
    """
    n = _check_mesh(mesh, axis)
    _divides("rows", rows, n, axis)
    _divides("cols", cols, n, axis)
    x = jax.device_put(
        jnp.arange(rows * cols, dtype=jnp.float32).reshape(rows, cols), NamedSharding(mesh, P(axis, None))
    )
    ring = [(i, (i + 1) % n) for i in range(n)]
    bodies = {
        "all-gather": (lambda b: jax.lax.all_gather(b, axis, tiled=True), P()),
        "reduce-scatter": (lambda b: jax.lax.psum_scatter(b, axis, tiled=True), P(axis, None)),
        "all-reduce": (lambda b: jax.lax.psum(b, axis), P()),
        "all-to-all": (lambda b: jax.lax.all_to_all(b, axis, 1, 0, tiled=True), P(None, axis)),
        "collective-permute": (lambda b: jax.lax.ppermute(b, axis, ring), P(axis, None)),
    }
    block = rows // n * cols * 4.0
    out = []
    for kind, (body, spec) in bodies.items():
        f = jax.jit(
            _shard_map()(
                body,
                mesh=mesh,
                in_specs=P(axis, None),
                out_specs=spec,
                check_vma=kind in ("reduce-scatter", "collective-permute"),
            )
        )
        compiled = f.lower(x).compile()
        # one device's block of the result, as JAX lays out the global result it returns
        local_out = tuple(NamedSharding(mesh, spec).shard_shape(jax.eval_shape(f, x).shape))
        found = hlo.normalize_cpu_collectives(hlo.collectives(compiled), compiled.as_text())
        op = found[0] if found else None
        v = {
            "all-gather": block * n,
            "all-reduce": block,
            "reduce-scatter": block,
            "all-to-all": block * n,
            "collective-permute": block,
        }[kind]
        device = block * n if kind == "all-gather" else block
        received = (
            {
                "all-gather": (n - 1) / n * v,
                "all-reduce": 2 * (n - 1) / n * v,
                "reduce-scatter": (n - 1) / n * v,
                "all-to-all": (n - 1) / n * block,
                "collective-permute": v,
            }[kind]
            if n > 1
            else 0.0
        )
        out.append(
            CollectiveRow(
                kind=kind,
                jax_call=_LAX_CALLS[kind],
                local_in=(rows // n, cols),
                local_out=tuple(local_out),
                hlo_op=op.kind if op else "(none)",
                hlo_bytes=op.bytes if op else 0.0,
                device_bytes=device,
                array_bytes=v,
                received_bytes=received,
            )
        )
    return out


# ------------------------------------------------------------------------------------------------------------
# Collective matmul: A[B, D_X] ·_D W[D, F_X] → Out[B, F_X]
# ------------------------------------------------------------------------------------------------------------


def _matmul_inputs(x, w, mesh, axis, inner: str = "D", outer: str = "F", w_spec=None):
    """Check ``x [B, inner] @ w [inner, outer]`` against the mesh (``axis`` divides both ``x``'s and ``w``'s last
    dimension) and place both on it, ``x`` split by columns and ``w`` by ``w_spec`` (default: by columns too)."""
    n = _check_mesh(mesh, axis)
    _check_array("x", x, 2)
    _check_array("w", w, 2)
    if x.shape[1] != w.shape[0]:
        raise ValueError(
            f"x [B, {inner}] and w [{inner}, {outer}] must share {inner}; got x {tuple(x.shape)} and w {tuple(w.shape)}"
        )
    _divides(f"x.shape[1] ({inner})", x.shape[1], n, axis)
    _divides(f"w.shape[1] ({outer})", w.shape[1], n, axis)
    x = jax.device_put(x, NamedSharding(mesh, P(None, axis)))
    w = jax.device_put(w, NamedSharding(mesh, w_spec or P(None, axis)))
    return n, x, w


def allgather_matmul(x, w, mesh, axis: str = "x"):
    """``x[B, D_X] @ w[D, F_X] → [B, F_X]`` by AllGathering ``x`` over ``axis``, then one local matmul.

    The communication (``(N−1)/N`` of ``x`` into each device) must finish before the matmul can start.
    """
    _, x, w = _matmul_inputs(x, w, mesh, axis)
    return _matmul_program(mesh, axis, "allgather")(x, w)


@lru_cache(maxsize=64)
def _matmul_program(mesh, axis: str, program: str):
    """The jitted ``shard_map`` program (built once per mesh, axis and program, so repeated calls reuse it)."""
    n = int(mesh.shape[axis])
    from_right = [(j, (j - 1) % n) for j in range(n)]  # device j-1 receives device j's block
    from_left = [(j, (j + 1) % n) for j in range(n)]

    def allgather(xb, wb):  # xb [B, D/N], wb [D, F/N]
        return jax.lax.all_gather(xb, axis, axis=1, tiled=True) @ wb

    def ring(xb, wb):
        me = jax.lax.axis_index(axis)
        k = xb.shape[1]

        def partial(block, owner):  # block of x owned by device `owner` times its w rows
            return block @ jax.lax.dynamic_slice_in_dim(wb, (owner % n) * k, k, axis=0)

        acc = partial(xb, me)
        if program == "collective":
            cur = xb
            for hop in range(1, n):
                cur = jax.lax.ppermute(cur, axis, from_right)
                acc = acc + partial(cur, me + hop)
            return acc
        right, left = xb, xb
        for hop in range(1, n // 2 + 1):
            right = jax.lax.ppermute(right, axis, from_right)  # block me + hop
            acc = acc + partial(right, me + hop)
            if 2 * hop != n:  # the two ways meet half-way round
                left = jax.lax.ppermute(left, axis, from_left)  # block me - hop
                acc = acc + partial(left, me - hop)
        return acc

    body = allgather if program == "allgather" else ring
    return jax.jit(_shard_map()(body, mesh=mesh, in_specs=(P(None, axis), P(None, axis)), out_specs=P(None, axis)))


def collective_matmul(x, w, mesh, axis: str = "x", *, bidirectional: bool = False):
    """The same product as :func:`allgather_matmul`, with the AllGather broken into a ring of ``ppermute`` hops.

    Device ``i`` starts with block ``i`` of ``x``'s columns and multiplies it by the matching rows of its ``w``.
    One way round (``bidirectional=False``), it then receives its right neighbour's current block ``N − 1`` times,
    each hop overlapped with the previous block's partial matmul. Both ways round, it receives from both neighbours
    at once and needs only ``⌊N/2⌋`` hops, each carrying one block on each of the ring's two directions.
    """
    _, x, w = _matmul_inputs(x, w, mesh, axis)
    check_bool("bidirectional", bidirectional)
    return _matmul_program(mesh, axis, "bidirectional" if bidirectional else "collective")(x, w)


def reducescatter_matmul(x, w, mesh, axis: str = "x", *, collective: bool = True):
    """``x[B, F_X] ·_F w[F_X, D] → [B, D_X]``: the down-projection, whose partial sums must be ReduceScattered.

    ``collective=False`` multiplies the local blocks (a ``[B, D]`` partial sum per device) and then calls
    ``psum_scatter``. ``collective=True`` never builds the whole partial sum: an accumulator for one ``[B, D/N]``
    output block travels round the ring, and each device adds its own contribution to the block passing through
    before handing it on (``N`` partial matmuls, ``N − 1`` hops), so every hop can overlap the next partial matmul.
    """
    _, x, w = _matmul_inputs(x, w, mesh, axis, "F", "D", P(axis, None))
    check_bool("collective", collective)
    return _reducescatter_program(mesh, axis, collective)(x, w)


@lru_cache(maxsize=64)
def _reducescatter_program(mesh, axis: str, collective: bool):
    n = int(mesh.shape[axis])
    to_next = [(j, (j + 1) % n) for j in range(n)]

    def plain(xb, wb):  # xb [B, F/N], wb [F/N, D]
        return jax.lax.psum_scatter(xb @ wb, axis, scatter_dimension=1, tiled=True)

    def ring(xb, wb):
        me = jax.lax.axis_index(axis)
        k = wb.shape[1] // n

        def partial(block):  # my contribution to output block `block`
            return xb @ jax.lax.dynamic_slice_in_dim(wb, (block % n) * k, k, axis=1)

        acc = partial(me - 1)  # the block that ends, N-1 hops later, at device me-1
        for step in range(1, n):
            acc = jax.lax.ppermute(acc, axis, to_next)  # received from me-1: its block is me - step - 1
            acc = acc + partial(me - step - 1)
        return acc  # after N-1 hops: block me, summed over all devices

    return jax.jit(
        _shard_map()(
            ring if collective else plain, mesh=mesh, in_specs=(P(None, axis), P(axis, None)), out_specs=P(None, axis)
        )
    )


@checked
def matmul_hlo_collectives(program: str, mesh, axis: str = "x", B: Side = 64, D: Side = 256, F: Side = 256) -> dict:
    """The collectives XLA compiles for one of the matmul programs, counted by kind (e.g. ``{"all-gather": 1}``).

    ``program`` is ``"allgather"``, ``"collective"`` or ``"bidirectional"`` (``x[B, D_X] · w[D, F_X]``), or
    ``"reducescatter"`` or ``"collective-reducescatter"`` (:func:`reducescatter_matmul` of ``x[B, D_X] ·
    w[D_X, F]``); the inputs are ``float32`` zeros.
    """
    program = check_choice(
        "program", program, ("allgather", "collective", "bidirectional", "reducescatter", "collective-reducescatter")
    )
    n = _check_mesh(mesh, axis)
    _divides("D", D, n, axis)
    _divides("F", F, n, axis)
    x = jax.device_put(jnp.zeros((B, D), jnp.float32), NamedSharding(mesh, P(None, axis)))
    if program.endswith("reducescatter"):
        w = jax.device_put(jnp.zeros((D, F), jnp.float32), NamedSharding(mesh, P(axis, None)))
        fn = _reducescatter_program(mesh, axis, program.startswith("collective"))
    else:
        w = jax.device_put(jnp.zeros((D, F), jnp.float32), NamedSharding(mesh, P(None, axis)))
        fn = _matmul_program(mesh, axis, program)
    text = fn.lower(x, w).compile().as_text()
    counts: dict = {}
    for c in hlo.collectives(text):
        counts[c.kind] = counts.get(c.kind, 0) + 1
    return dict(sorted(counts.items()))


@dataclass(frozen=True)
class CollectiveMatmulTime:
    """Chapter 3's prediction for ``A[B, D_X] ·_D W[D, F_X]`` on ``n`` chips of one ICI ring, in seconds."""

    allgather_s: float  # AllGather of A over the ring (both directions), s
    matmul_s: float  # the whole local matmul [B, D] x [D, F/n] at peak FLOP/s, s
    sequential_s: float  # AllGather, then matmul: allgather_s + matmul_s, s
    overlapped_s: float  # ring of hops, each hidden behind a partial matmul when it can be, s
    hop_s: float  # one hop: a [B, D/n] block over one link one way, s
    steps: int  # hops of the ring (N − 1 one way, ⌊N/2⌋ both ways)

    @property
    def speedup(self) -> float:
        """sequential_s / overlapped_s."""
        return self.sequential_s / self.overlapped_s if self.overlapped_s else 1.0


@checked
def collective_matmul_time(
    B: capped(2**40),
    D: capped(2**40),
    F: capped(2**40),
    n: capped(2**16),
    chip="v5e",
    dtype: str = "bf16",
    bidirectional: Bool = False,
) -> CollectiveMatmulTime:
    """Predicted times of the two programs above on ``n`` chips of ``chip`` (a 1-D ICI ring with wraparound).

    Each device does ``2·B·D·F/n`` FLOPs in ``N`` partial matmuls of ``2·B·(D/n)·(F/n)``. The AllGather moves A
    (``B·D`` elements) in Chapter 3's time; a hop moves one ``[B, D/n]`` block over one link in one direction.
    The ring's time is the first partial matmul, then for every hop the slower of the hop and the partial matmuls
    it overlaps (two per hop both ways round, one at the meeting point of an even ring).
    """
    check_bool("bidirectional", bidirectional)
    c = get_chip(chip)
    if not c.ici_bw_bidi:
        raise ValueError(f"chip must have ICI links (a TPU); {c.name} has none")
    nbytes = dtype_bytes(dtype)
    matmul = compute_time(2.0 * B * D * F / n, c, dtype)
    ag = C.all_gather_time(B * D * nbytes, n, c.ici_bw_bidi, hop_latency=0.0).total
    part = matmul / n
    hop = B * D / n * nbytes / (c.ici_bw_bidi / 2)
    if n == 1:
        return CollectiveMatmulTime(0.0, matmul, matmul, matmul, 0.0, 0)
    if bidirectional:
        steps = n // 2
        per = [1 if 2 * s == n else 2 for s in range(1, steps + 1)]
    else:
        steps = n - 1
        per = [1] * steps
    ring = part + sum(max(hop, k * part) for k in per)
    return CollectiveMatmulTime(
        allgather_s=ag, matmul_s=matmul, sequential_s=ag + matmul, overlapped_s=ring, hop_s=hop, steps=steps
    )


# ------------------------------------------------------------------------------------------------------------
# Mixture of experts with expert parallelism
# ------------------------------------------------------------------------------------------------------------


@checked
def _check_buffer(n_experts: int, capacity: int, d_model: int) -> None:
    """The ``[E, capacity, D]`` dispatch buffer within :data:`MAX_ELEMENTS`, or an error naming ``capacity``."""
    if n_experts * capacity * d_model > MAX_ELEMENTS:
        raise ValueError(
            f"capacity ({capacity}) makes the [E, capacity, D] = [{n_experts}, {capacity}, {d_model}] "
            f"buffer larger than {MAX_ELEMENTS} elements (MAX_ELEMENTS); allowed: capacity <= "
            f"{max(1, MAX_ELEMENTS // (n_experts * d_model))}"
        )


def _moe_inputs(x, router, w_in, w_out):
    _check_array("x", x, 2)
    _check_array("router", router, 2)
    _check_array("w_in", w_in, 3)
    _check_array("w_out", w_out, 3)
    T, D = x.shape
    E = router.shape[1]
    if router.shape[0] != D:
        raise ValueError(
            f"router must have shape [D, E] with the D of x [T, D={D}]; got router "
            f"{tuple(router.shape)} and x {tuple(x.shape)}"
        )
    if w_in.shape[:2] != (E, D):
        raise ValueError(f"w_in must have shape [E={E}, D={D}, F]; got {tuple(w_in.shape)}")
    if w_out.shape != (E, w_in.shape[2], D):
        raise ValueError(f"w_out must have shape [E={E}, F={w_in.shape[2]}, D={D}]; got {tuple(w_out.shape)}")
    return T, D, E


def _route(x, router, capacity):
    """Top-1 routing of a group of tokens: expert, gate, slot in its expert and whether it was kept."""
    probs = jax.nn.softmax(x @ router, axis=-1)  # [t, E]
    expert = jnp.argmax(probs, axis=-1)  # [t]
    gate = jnp.take_along_axis(probs, expert[:, None], axis=-1)[:, 0]  # [t]
    onehot = jax.nn.one_hot(expert, probs.shape[1], dtype=jnp.int32)  # [t, E]
    slot = jnp.sum(jnp.cumsum(onehot, axis=0) * onehot, axis=-1) - 1  # rank among its expert's tokens
    return expert, gate, slot, slot < capacity


@checked
def moe_reference(x, router, w_in, w_out, n_groups: RingSize, capacity: Capacity):
    """The MoE layer computed densely: ``y[t] = g_t · W_out[e_t] · gelu(W_in[e_t] · x[t])``, or 0 if dropped.

    Tokens are split into ``n_groups`` consecutive groups (one per sending device); within a group, an expert keeps
    its first ``capacity`` tokens in order and drops the rest. Returns ``(y[T, D], dropped)``: the number of
    tokens dropped in all groups.
    """
    T, D, E = _moe_inputs(x, router, w_in, w_out)
    g, cap = n_groups, capacity
    _check_buffer(E, cap, D)
    if T % g:
        raise ValueError(f"n_groups ({g}) must divide the {T} tokens of x")
    expert, gate, _, kept = jax.vmap(lambda xs: _route(xs, router, cap))(x.reshape(g, T // g, D))
    expert, gate, kept = expert.reshape(T), gate.reshape(T), kept.reshape(T)
    h = jax.nn.gelu(jnp.einsum("td,tdf->tf", x, w_in[expert]))
    y = jnp.einsum("tf,tfd->td", h, w_out[expert]) * (gate * kept)[:, None]
    return y, int(T - jnp.sum(kept))


def _moe_capacity_on(mesh, axis: str, x, router, w_in, w_out, capacity) -> int:
    """Check the MoE inputs against ``axis`` (it divides the tokens and the experts); return the slots per expert
    (``capacity``, or :func:`~tpu_notes.transformer.moe_capacity` of each device's tokens)."""
    n = _check_mesh(mesh, axis)
    T, D, E = _moe_inputs(x, router, w_in, w_out)
    _divides("the number of tokens x.shape[0]", T, n, axis)
    _divides("the number of experts router.shape[1]", E, n, axis)
    cap = moe_capacity(T // n, E) if capacity is None else capacity
    _check_buffer(E, cap, D)
    return cap


@checked
def moe_expert_parallel(x, router, w_in, w_out, mesh, axis: str = "x", capacity: Capacity | None = None):
    """The MoE layer with its ``E`` experts split over ``axis`` (``E/N`` per device) and tokens split too.

    Under ``shard_map`` each device routes its ``T/N`` tokens (top-1), packs them into a ``[E, capacity, D]``
    buffer (overflow dropped), and one ``all_to_all`` sends each expert's slots to the device that holds it; the
    experts run on ``[N·E/N, capacity, D]`` and a second ``all_to_all`` returns the results, which are scaled by
    the gate and put back in token order. ``capacity`` defaults to :func:`~tpu_notes.transformer.moe_capacity`
    of ``T/N`` tokens.
    Returns ``(y[T, D], dropped)``, equal to :func:`moe_reference` with ``n_groups = N``.
    """
    cap = _moe_capacity_on(mesh, axis, x, router, w_in, w_out, capacity)
    y, dropped = _moe_program(mesh, axis, cap)(x, router, w_in, w_out)
    return y, int(dropped)


@checked
def moe_hlo_collectives(x, router, w_in, w_out, mesh, axis: str = "x", capacity: Capacity | None = None) -> list:
    """The collectives XLA compiles for :func:`moe_expert_parallel` on these inputs (``hlo.HloCollective`` each):
    two AllToAlls of the ``[E, capacity, D]`` buffer and one small AllReduce of the dropped count."""
    cap = _moe_capacity_on(mesh, axis, x, router, w_in, w_out, capacity)
    compiled = _moe_program(mesh, axis, cap).lower(x, router, w_in, w_out).compile()
    return hlo.collectives(compiled)


@lru_cache(maxsize=64)
def _moe_program(mesh, axis: str, cap: int):
    n = int(mesh.shape[axis])

    def body(xb, rb, wi, wo):  # xb [T/N, D], rb [D, E], wi [E/N, D, F], wo [E/N, F, D]
        E, D, ex = rb.shape[1], xb.shape[1], wi.shape[0]
        expert, gate, slot, kept = _route(xb, rb, cap)
        where = jnp.where(kept, expert * cap + slot, E * cap)  # E·cap: out of range, dropped
        buf = jnp.zeros((E * cap, D), xb.dtype).at[where].set(xb, mode="drop")
        buf = buf.reshape(n, ex * cap, D)  # [dest device, its slots, D]
        got = jax.lax.all_to_all(buf, axis, 0, 0, tiled=True)  # [source device, my slots, D]
        got = got.reshape(n, ex, cap, D)
        h = jax.nn.gelu(jnp.einsum("secd,edf->secf", got, wi))
        res = jnp.einsum("secf,efd->secd", h, wo).reshape(n, ex * cap, D)
        back = jax.lax.all_to_all(res, axis, 0, 0, tiled=True).reshape(E * cap, D)
        y = back.at[where].get(mode="fill", fill_value=0) * gate[:, None]
        dropped = jax.lax.psum(jnp.sum(~kept), axis)
        return y, dropped

    return jax.jit(
        _shard_map()(body, mesh=mesh, in_specs=(P(axis, None), P(), P(axis), P(axis)), out_specs=(P(axis, None), P()))
    )


# ------------------------------------------------------------------------------------------------------------
# Grading code: a reader's function against a reference
# ------------------------------------------------------------------------------------------------------------


class ProgramCheck:
    """An exercise whose answer is a function: ``check_program(fn)`` runs ``fn`` and ``reference`` on the same
    random inputs and compares the results.

    ``make_inputs(rng, trial)`` returns the positional arguments of one trial (different shapes per trial, so a
    function that only works for one shape fails); ``trials`` trials are run, each must match to ``rtol``/``atol``.
    ``wrong`` are deliberately wrong programs the checker must reject (the exercise tests use them).
    ``inspect(fn, args)``, if given, runs once the values match, with the first trial's arguments: it returns
    ``None`` or the reason the program is still wrong (e.g. its compiled HLO holds an AllGather it should not).
    Calling a ``ProgramCheck`` calls the reference, so the reference solution of the exercise is the checker itself.
    """

    def __init__(
        self,
        reference: Callable,
        make_inputs: Callable,
        *,
        trials: int = 3,
        rtol: float = 1e-4,
        atol: float = 1e-4,
        seed: int = 0,
        wrong: Sequence[Callable] = (),
        inspect: Callable | None = None,
    ):
        for name, f in (("reference", reference), ("make_inputs", make_inputs)):
            if not callable(f):
                raise TypeError(f"{name} must be callable; got {type(f).__name__}")
        self.reference = reference
        self.make_inputs = make_inputs
        self.trials = check_positive("trials", trials, integer=True, maximum=100)
        self.rtol = check_positive("rtol", rtol, allow_zero=True, maximum=0.1)
        self.atol = check_positive("atol", atol, allow_zero=True, maximum=1.0)
        self.seed = check_positive("seed", seed, integer=True, allow_zero=True, maximum=2**32)
        if isinstance(wrong, (str, bytes)) or not isinstance(wrong, Sequence) or not all(callable(f) for f in wrong):
            raise TypeError("wrong must be a sequence of callables (wrong programs to reject)")
        self.wrong = tuple(wrong)
        if inspect is not None and not callable(inspect):
            raise TypeError(f"inspect must be None or callable; got {type(inspect).__name__}")
        self.inspect = inspect

    def __call__(self, *args):
        return self.reference(*args)

    def __repr__(self) -> str:
        name = getattr(self.reference, "__name__", "program")
        return f"ProgramCheck({name}, trials={self.trials})"

    def check_program(self, fn) -> tuple:
        """``(correct, detail)``: whether ``fn`` equals the reference on every trial (TypeError if not callable)."""
        if not callable(fn):
            raise TypeError(f"answer must be a function (the program); got {type(fn).__name__}")
        rng = np.random.default_rng(self.seed)
        first = None
        for trial in range(self.trials):
            args = self.make_inputs(rng, trial)
            first = args if first is None else first
            want = np.asarray(self.reference(*args))
            try:
                got = np.asarray(fn(*args))
            except Exception as err:  # noqa: BLE001 - the reader's code may raise anything; report it
                return False, f" (trial {trial + 1} raised {type(err).__name__}: {str(err)[:120]})"
            if got.shape != want.shape:
                return False, f" (trial {trial + 1}: shape {got.shape}, expected {want.shape})"
            if not np.allclose(got, want, rtol=self.rtol, atol=self.atol):
                worst = float(np.max(np.abs(got - want)))
                return False, f" (trial {trial + 1}: values differ by up to {worst:.3g})"
        if self.inspect is not None:
            reason = self.inspect(fn, first)
            if reason:
                return False, f" (the values are right, but {reason})"
        return True, f" (equal to the reference on {self.trials} random inputs)"

    def wrong_programs(self) -> list:
        """The wrong programs the checker must reject."""
        return list(self.wrong)


# ------------------------------------------------------------------------------------------------------------
# Reading a schedule: what runs between an async collective's start and its done
# ------------------------------------------------------------------------------------------------------------

#: Opcodes that do the work a collective can hide behind (a fusion holds the matmuls and elementwise ops).
COMPUTE_OPCODES = ("fusion", "convolution", "dot", "custom-call")


@dataclass(frozen=True)
class AsyncWindow:
    """One asynchronous collective of a scheduled HLO module: its ``-start``, its ``-done`` and what runs between."""

    kind: str  # the collective, without -start: "collective-permute", "all-gather", ...
    start: str  # name of the -start instruction
    done: str  # name of the matching -done instruction ("" if the module never waits for it)
    computation: str  # the computation holding both
    between: tuple  # names of the compute instructions (COMPUTE_OPCODES) scheduled between the two

    @property
    def hidden(self) -> bool:
        """True when some compute is scheduled between the start and the done (the transfer can overlap it)."""
        return bool(self.between)


def async_windows(compiled_or_hlo_text) -> list[AsyncWindow]:
    """Every ``*-start`` / ``*-done`` pair of a scheduled HLO module, with the compute scheduled between them.

    XLA prints a scheduled module (``is_scheduled=true``, what ``compiled.as_text()`` returns) in the order it will
    run. A backend that runs a collective asynchronously (TPU, GPU) splits it into a ``-start`` that launches the
    transfer and a ``-done`` that waits for it; the ops printed between them are what the transfer can overlap.
    A window with nothing between (``hidden`` False) is a collective the chip waits for. The CPU backend emits
    synchronous collectives only, so there this returns an empty list. ``compiled_or_hlo_text`` is HLO text or a
    compiled JAX object.
    """
    module = hlo.parse_module(compiled_or_hlo_text)
    out = []
    for comp, instructions in module.computations.items():
        for i, ins in enumerate(instructions):
            if not ins.opcode.endswith("-start") or ins.opcode == "copy-start":
                continue
            done_op = ins.opcode[: -len("-start")] + "-done"
            end, done = len(instructions), ""
            for j in range(i + 1, len(instructions)):
                later = instructions[j]
                if later.opcode == done_op and ins.name in later.operands:
                    end, done = j, later.name
                    break
            between = tuple(x.name for x in instructions[i + 1 : end] if x.opcode in COMPUTE_OPCODES)
            out.append(AsyncWindow(ins.opcode[: -len("-start")], ins.name, done, comp, between))
    return out


# ------------------------------------------------------------------------------------------------------------
# ReduceScatter and AllReduce written as rings of ppermute, one way or both ways round
# ------------------------------------------------------------------------------------------------------------


def _ring_counts(n: int, bidirectional: bool) -> tuple[int, int]:
    """Hops of the clockwise and anticlockwise halves: (N − 1, 0) one way, (⌈(N−1)/2⌉, ⌊(N−1)/2⌋) both ways."""
    if not bidirectional:
        return n - 1, 0
    a = (n - 1 + 1) // 2
    return a, n - 1 - a


def _chunk(x, j, size):
    """Rows ``[j·size, (j+1)·size)`` of ``x`` (``j`` a traced device index, taken modulo the ring)."""
    return jax.lax.dynamic_slice_in_dim(x, j * size, size, axis=0)


def _ring_rs_body(xb, axis: str, n: int, bidirectional: bool):
    """One device's share of a ReduceScatter of the addends ``xb [R, C]``: block ``me`` (rows ``R/N``) of the sum.

    Block ``j``'s sum is built by accumulators travelling towards device ``j``: one way round, one accumulator
    starts at ``j + 1`` and collects ``N − 1`` addends on its way; both ways round, one comes clockwise from
    ``j − a`` and one anticlockwise from ``j + b`` (``a + b = N − 1``), both at once, and they meet at ``j``.
    """
    me = jax.lax.axis_index(axis)
    k = xb.shape[0] // n
    a, b = _ring_counts(n, bidirectional)
    to_next = [(j, (j + 1) % n) for j in range(n)]
    to_prev = [(j, (j - 1) % n) for j in range(n)]
    total = _chunk(xb, me, k)
    cw = _chunk(xb, (me + a) % n, k) if a else None
    ccw = _chunk(xb, (me - b) % n, k) if b else None
    for step in range(1, a + 1):
        cw = jax.lax.ppermute(cw, axis, to_next)  # now carrying block me - step + a
        if step < a:
            cw = cw + _chunk(xb, (me - step + a) % n, k)
        if step <= b:
            ccw = jax.lax.ppermute(ccw, axis, to_prev)  # now carrying block me + step - b
            if step < b:
                ccw = ccw + _chunk(xb, (me + step - b) % n, k)
    for acc in (cw, ccw):
        if acc is not None:
            total = total + acc
    return total


def _ring_ag_body(block, axis: str, n: int, bidirectional: bool):
    """One device's copy of the AllGather of the ``[k, C]`` blocks, in ring order: ``[N·k, C]``."""
    me = jax.lax.axis_index(axis)
    k = block.shape[0]
    a, b = _ring_counts(n, bidirectional)
    out = jnp.zeros((n * k,) + block.shape[1:], block.dtype)
    out = jax.lax.dynamic_update_slice_in_dim(out, block, me * k, axis=0)
    cw, ccw = block, block
    for step in range(1, a + 1):
        cw = jax.lax.ppermute(cw, axis, [(j, (j + 1) % n) for j in range(n)])  # block me - step
        out = jax.lax.dynamic_update_slice_in_dim(out, cw, ((me - step) % n) * k, axis=0)
        if step <= b:
            ccw = jax.lax.ppermute(ccw, axis, [(j, (j - 1) % n) for j in range(n)])  # block me + step
            out = jax.lax.dynamic_update_slice_in_dim(out, ccw, ((me + step) % n) * k, axis=0)
    return out


@lru_cache(maxsize=64)
def _ring_collective_program(mesh, axis: str, kind: str, bidirectional: bool):
    n = int(mesh.shape[axis])

    def rs(xb):
        return _ring_rs_body(xb, axis, n, bidirectional)

    def ar(xb):
        return _ring_ag_body(_ring_rs_body(xb, axis, n, bidirectional), axis, n, bidirectional)

    body, out = (rs, P(axis, None)) if kind == "reduce-scatter" else (ar, P())
    return jax.jit(_shard_map()(body, mesh=mesh, in_specs=P(axis, None), out_specs=out, check_vma=False))


def _ring_inputs(x, mesh, axis):
    n = _check_mesh(mesh, axis)
    _check_array("x", x, 2)
    _divides("x.shape[0] (N·R rows: one [R, C] addend per device)", x.shape[0], n, axis)
    _divides("R, the rows of each device's addend,", x.shape[0] // n, n, axis)
    return jax.device_put(x, NamedSharding(mesh, P(axis, None)))


def ring_reduce_scatter(x, mesh, axis: str = "x", *, bidirectional: bool = True):
    """ReduceScatter written with ``ppermute``: ``x [N·R, C]`` holds one ``[R, C]`` addend per device (split over
    ``axis`` by rows); the result ``[R, C]`` is their sum, split over ``axis`` by rows (``R/N`` rows each).

    One way round (``bidirectional=False``): ``N − 1`` rounds of hops, each carrying one ``[R/N, C]`` block one
    way. Both ways round: ``⌈(N−1)/2⌉`` rounds, each carrying a block in each direction, so each direction of a
    link carries half of what the one-way ring sends on it (Chapter 3's model,
    ``collectives.reduce_scatter_time``, prices the two). Equal to ``x.reshape(N, R, C).sum(0)``.
    """
    check_bool("bidirectional", bidirectional)
    x = _ring_inputs(x, mesh, axis)
    return _ring_collective_program(mesh, axis, "reduce-scatter", bidirectional)(x)


def ring_all_reduce(x, mesh, axis: str = "x", *, bidirectional: bool = True):
    """AllReduce as Chapter 3 builds it: :func:`ring_reduce_scatter` then an AllGather ring of ``ppermute``
    (``2(N − 1)`` rounds one way, ``2⌈(N−1)/2⌉`` both ways). ``x [N·R, C]`` holds one ``[R, C]`` addend per
    device; every device ends with the whole sum ``[R, C]``."""
    check_bool("bidirectional", bidirectional)
    x = _ring_inputs(x, mesh, axis)
    return _ring_collective_program(mesh, axis, "all-reduce", bidirectional)(x)


@checked
def ring_collective_rounds(kind: str, n: RingSize, bidirectional: Bool = True) -> dict:
    """How :func:`ring_reduce_scatter` (``kind="reduce-scatter"``) or :func:`ring_all_reduce` (``"all-reduce"``)
    runs on ``n`` devices: ``{"rounds": ..., "permutes": ...}``, the rounds of simultaneous hops and the
    ``ppermute`` calls (one per direction per round). A pure count, no devices needed."""
    kind = check_choice("kind", kind, ("reduce-scatter", "all-reduce"))
    check_bool("bidirectional", bidirectional)
    a, b = _ring_counts(n, bidirectional)
    times = 2 if kind == "all-reduce" else 1
    return {"rounds": times * a, "permutes": times * (a + b)}


# ------------------------------------------------------------------------------------------------------------
# A Transformer block with tensor parallelism and every matmul a collective matmul
# ------------------------------------------------------------------------------------------------------------


def _ring_ag_matmuls(xb, ws, axis: str, n: int):
    """``x[T, D_X] · w[D, F_X]`` for several ``w`` at once, the blocks of ``x`` passed round a one-way ring:
    ``xb [T, D/N]``, each ``w`` block ``[D, F_i/N]``; returns the ``[T, F_i/N]`` blocks."""
    me = jax.lax.axis_index(axis)
    k = xb.shape[1]
    from_right = [(j, (j - 1) % n) for j in range(n)]

    def part(block, owner):
        return tuple(block @ jax.lax.dynamic_slice_in_dim(w, (owner % n) * k, k, axis=0) for w in ws)

    acc = part(xb, me)
    cur = xb
    for hop in range(1, n):
        cur = jax.lax.ppermute(cur, axis, from_right)  # block me + hop
        acc = tuple(s + p for s, p in zip(acc, part(cur, me + hop)))
    return acc


def _ring_rs_matmul(xb, wb, axis: str, n: int):
    """``x[T, F_X] · w[F_X, D] → [T, D_X]``: an accumulator for each output block passed round the ring."""
    me = jax.lax.axis_index(axis)
    k = wb.shape[1] // n
    to_next = [(j, (j + 1) % n) for j in range(n)]

    def part(block):
        return xb @ jax.lax.dynamic_slice_in_dim(wb, (block % n) * k, k, axis=1)

    acc = part(me - 1)
    for step in range(1, n):
        acc = jax.lax.ppermute(acc, axis, to_next) + part(me - step - 1)
    return acc


def _rms_norm(x, axis: str | None = None, eps: float = 1e-6):
    """RMSNorm over the last dimension (no gain); ``axis`` names the mesh axis that splits it, if any."""
    ss = jnp.sum(x * x, axis=-1, keepdims=True)
    d = x.shape[-1]
    if axis is not None:
        ss = jax.lax.psum(ss, axis)
        d = d * jax.lax.axis_size(axis)
    return x * jax.lax.rsqrt(ss / d + eps)


def _attention(q, k, v, n_heads: int):
    """Causal multi-head attention of ``q, k, v [T, n_heads·d_head]`` → ``[T, n_heads·d_head]``."""
    T = q.shape[0]
    dh = q.shape[1] // n_heads
    q, k, v = (a.reshape(T, n_heads, dh) for a in (q, k, v))
    s = jnp.einsum("thd,shd->hts", q, k) / math.sqrt(dh)
    mask = jnp.tril(jnp.ones((T, T), bool))
    p = jax.nn.softmax(jnp.where(mask, s, -jnp.inf), axis=-1)
    return jnp.einsum("hts,shd->thd", p, v).reshape(T, n_heads * dh)


def _block_inputs(x, wq, wk, wv, wo, w_in, w_out, n_heads, n=1, axis="x"):
    _check_array("x", x, 2)
    for name, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo), ("w_in", w_in), ("w_out", w_out)):
        _check_array(name, w, 2)
    T, D = x.shape
    hd, F = wq.shape[1], w_in.shape[1]
    want = {"wq": (D, hd), "wk": (D, hd), "wv": (D, hd), "wo": (hd, D), "w_in": (D, F), "w_out": (F, D)}
    for name, w in (("wq", wq), ("wk", wk), ("wv", wv), ("wo", wo), ("w_in", w_in), ("w_out", w_out)):
        if tuple(w.shape) != want[name]:
            raise ValueError(
                f"{name} must have shape {list(want[name])} for x [T={T}, D={D}], wq [D, H·d_head={hd}] and "
                f"w_in [D, F={F}]; got {tuple(w.shape)}"
            )
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1 or hd % n_heads:
        raise ValueError(f"n_heads must be a positive integer dividing wq.shape[1] ({hd}); got {n_heads!r}")
    if n_heads % n:
        raise ValueError(
            f"n_heads ({n_heads}) must be divisible by the {n} devices of mesh axis {axis!r}: each device "
            f"holds whole heads; allowed: multiples of {n}"
        )
    _divides("x.shape[1] (D)", D, n, axis)
    _divides("w_in.shape[1] (F)", F, n, axis)


def transformer_block_reference(x, wq, wk, wv, wo, w_in, w_out, *, n_heads: int):
    """One pre-norm decoder block on one device: ``h = x + Attn(norm(x))``, ``y = h + W_out·gelu(W_in·norm(h))``.

    ``x [T, D]`` (one sequence, causal attention), ``wq, wk, wv [D, H·d_head]``, ``wo [H·d_head, D]``,
    ``w_in [D, F]``, ``w_out [F, D]``; the norm is RMSNorm without a gain. Returns ``[T, D]``.
    """
    _block_inputs(x, wq, wk, wv, wo, w_in, w_out, n_heads)
    return _block_reference(x, wq, wk, wv, wo, w_in, w_out, n_heads)


def _block_math(x, wq, wk, wv, wo, w_in, w_out, n_heads):
    h = _rms_norm(x)
    h = x + _attention(h @ wq, h @ wk, h @ wv, n_heads) @ wo
    return h + jax.nn.gelu(_rms_norm(h) @ w_in) @ w_out


_block_reference = jax.jit(_block_math, static_argnums=7)


@lru_cache(maxsize=64)
def _block_program(mesh, axis: str, n_heads: int):
    n = int(mesh.shape[axis])
    heads = n_heads // n

    def body(xb, wq, wk, wv, wo, w_in, w_out):  # xb [T, D/N]; w* blocks as in_specs say
        q, k, v = _ring_ag_matmuls(_rms_norm(xb, axis), (wq, wk, wv), axis, n)  # [T, H/N·d_head] each
        h = xb + _ring_rs_matmul(_attention(q, k, v, heads), wo, axis, n)  # [T, D/N]
        (up,) = _ring_ag_matmuls(_rms_norm(h, axis), (w_in,), axis, n)  # [T, F/N]
        return h + _ring_rs_matmul(jax.nn.gelu(up), w_out, axis, n)

    col, row = P(None, axis), P(axis, None)
    return jax.jit(
        _shard_map()(body, mesh=mesh, in_specs=(col, col, col, col, row, col, row), out_specs=col, check_vma=False)
    )


def _block_args(x, wq, wk, wv, wo, w_in, w_out, mesh, axis, n_heads):
    n = _check_mesh(mesh, axis)
    _block_inputs(x, wq, wk, wv, wo, w_in, w_out, n_heads, n, axis)
    col, row = NamedSharding(mesh, P(None, axis)), NamedSharding(mesh, P(axis, None))
    specs = (col, col, col, col, row, col, row)
    return [jax.device_put(a, s) for a, s in zip((x, wq, wk, wv, wo, w_in, w_out), specs)]


def transformer_block(x, wq, wk, wv, wo, w_in, w_out, mesh, axis: str = "x", *, n_heads: int):
    """:func:`transformer_block_reference` with tensor parallelism over ``axis`` and every matmul a collective
    matmul, so no AllGather or ReduceScatter of activations is left for the chip to wait on.

    The activations between the sub-layers stay split over the model dimension, ``x[T, D_X]``. Each device holds
    ``H/N`` whole heads (the ``wq, wk, wv`` columns and ``wo`` rows of its heads) and ``F/N`` of the MLP.
    The Q, K and V projections share one ring that passes the blocks of ``norm(x)`` round (Section 10.4's
    AllGather hidden behind the matmuls), attention runs on the local heads, and the output projection sends
    accumulators round the ring (the hidden ReduceScatter); the MLP does the same with ``w_in`` and ``w_out``.
    The only other collective is the RMSNorm's sum of squares, a ``[T, 1]`` AllReduce per norm.
    """
    args = _block_args(x, wq, wk, wv, wo, w_in, w_out, mesh, axis, n_heads)
    return _block_program(mesh, axis, n_heads)(*args)


def transformer_block_collectives(x, wq, wk, wv, wo, w_in, w_out, mesh, axis: str = "x", *, n_heads: int) -> dict:
    """The collectives XLA compiles for :func:`transformer_block` on these inputs, counted by kind: ``4(N − 1)``
    ``collective-permute`` (four rings) and the norms' two small ``all-reduce``."""
    args = _block_args(x, wq, wk, wv, wo, w_in, w_out, mesh, axis, n_heads)
    counts: dict = {}
    for c in hlo.collectives(_block_program(mesh, axis, n_heads).lower(*args).compile()):
        counts[c.kind] = counts.get(c.kind, 0) + 1
    return dict(sorted(counts.items()))


# ------------------------------------------------------------------------------------------------------------
# A dropless top-k MoE layer: per-expert ragged groups
# ------------------------------------------------------------------------------------------------------------


def _topk_inputs(x, router, w_in, w_out, k):
    T, D, E = _moe_inputs(x, router, w_in, w_out)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= E:
        raise ValueError(f"k must be an integer from 1 to the {E} experts; got {k!r}")
    return T, D, E


def _topk_route(x, router, k):
    """Top-k routing: each token's ``k`` best experts and their gates (a softmax over the ``k`` chosen logits)."""
    logits, experts = jax.lax.top_k(x @ router, k)  # [T, k] each
    return experts, jax.nn.softmax(logits, axis=-1)


def moe_topk_reference(x, router, w_in, w_out, k: int = 2):
    """The top-k MoE layer computed densely: every expert on every token, weighted by a ``[T, E]`` gate matrix
    that is zero outside each token's top ``k`` (``y[t] = Σ_e g[t, e] · W_out[e] · gelu(W_in[e] · x[t])``).
    ``E/k`` times the FLOPs the layer needs, but no routing bookkeeping to get wrong. Returns ``y [T, D]``."""
    _topk_inputs(x, router, w_in, w_out, k)
    return _topk_dense(x, router, w_in, w_out, k)


@partial(jax.jit, static_argnums=4)
def _topk_dense(x, router, w_in, w_out, k):
    experts, gates = _topk_route(x, router, k)
    g = jnp.sum(jax.nn.one_hot(experts, router.shape[1], dtype=x.dtype) * gates[..., None], axis=1)  # [T, E]
    h = jax.nn.gelu(jnp.einsum("td,edf->etf", x, w_in))
    return jnp.einsum("te,etd->td", g, jnp.einsum("etf,efd->etd", h, w_out))


@partial(jax.jit, static_argnums=4)
def _topk_ragged(x, router, w_in, w_out, k):
    E = router.shape[1]
    experts, gates = _topk_route(x, router, k)
    flat = experts.reshape(-1)  # [T·k]: assignment i is token i // k to expert flat[i]
    order = jnp.argsort(flat, stable=True)  # assignments grouped by expert
    token = order // k
    sizes = jnp.bincount(flat, length=E).astype(jnp.int32)  # the ragged groups
    h = jax.nn.gelu(jax.lax.ragged_dot(x[token], w_in, sizes))  # [T·k, F]: group e times w_in[e]
    out = jax.lax.ragged_dot(h, w_out, sizes) * gates.reshape(-1)[order][:, None]  # [T·k, D]
    return jnp.zeros_like(x).at[token].add(out), sizes


def moe_topk_ragged(x, router, w_in, w_out, k: int = 2):
    """The top-k MoE layer with no capacity and no dropped token: the ``T·k`` (token, expert) assignments sorted
    by expert into ragged groups, each group multiplied by its expert's weights with ``jax.lax.ragged_dot``,
    and the gated results added back to their tokens. The FLOPs are those of the ``T·k`` assignments only.

    Returns ``(y [T, D], group_sizes [E])``; ``y`` equals :func:`moe_topk_reference`. Under expert parallelism
    this is what each device runs on the tokens its ``all_to_all`` brought (with ``E/N`` groups).
    """
    _topk_inputs(x, router, w_in, w_out, k)
    y, sizes = _topk_ragged(x, router, w_in, w_out, k)
    return y, np.asarray(sizes)
