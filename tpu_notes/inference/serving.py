"""Serving economics: what fits, the smallest slice, throughput, the latency–throughput curve, cost (Chapter 7).

Memory only decides what fits: ``n · HBM ≥ weights + B · S · kv_bytes``. The largest batch is what the rest of
the memory holds; the smallest slice is the first standard slice shape with enough chips. Throughput follows from
:func:`~tpu_notes.inference.step.decode_step_time`; cost from throughput and a price per chip-hour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

from .. import rules
from ..hardware import get_chip
from ..topology import Slice
from ..transformer import Model
from ..units import Bool, PositiveFloat, Range, Shape, check_positive, checked, dtype_bytes
from .engine import EngineStep, _decode_point, deploy, slice_shapes
from .formulas import (
    MAX_BATCH,
    Batch,
    Chips,
    ComputeDType,
    Context,
    StorageDType,
    _kv_pool_tokens,
    _with_memory,
    machine,
)
from .step import DecodeStepTime, decode_step_time

#: Most candidates (batches, or chip counts × batches) one search or curve evaluates.
MAX_CANDIDATES = 4096
#: The share of memory kept free for activations and the runtime: [0, 0.99].
Reserve = Annotated[float, Range(0.0, 0.99)]


def _memory(c, weight_dtype, kv_dtype):
    return c, c.param_count() * dtype_bytes(weight_dtype), c.kv_bytes_per_token(kv_dtype)


def _candidates(name: str, values) -> tuple:
    """A checked list of candidate batches (at most :data:`MAX_CANDIDATES`), each a whole number in [1, MAX_BATCH]."""
    values = Shape().check(name, values)
    rules.bounded_work(len(values), argument=name, limit=MAX_CANDIDATES)
    for i, b in enumerate(values):
        if b > MAX_BATCH:
            raise ValueError(f"{name}[{i}] must be at most {MAX_BATCH:,}; got {b}")
    return values


@checked
def max_batch(
    model: Model,
    chip,
    n_chips: Chips,
    seq_len: Context,
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    reserve_fraction: Reserve = 0.0,
) -> int:
    """Largest number of sequences of ``seq_len`` tokens whose KV caches fit beside the weights on ``n_chips``:
    ``floor((n · HBM · (1 − reserve) − weights) / (seq_len · kv_bytes))``: the KV pool's tokens
    (``formulas._kv_pool_tokens``, the pool a :class:`~tpu_notes.inference.Deployment`
    keeps) ``// seq_len``, so ``deploy(...).max_batch(seq_len)`` is this at the deployment's ``reserve_fraction``.

    ``reserve_fraction`` keeps that share of memory for activations and the runtime. Raises ``ValueError`` (naming
    ``n_chips`` and the chips needed) when not even one sequence fits.
    """
    c, w, kv = _memory(model, weight_dtype, kv_dtype)
    m = _with_memory(chip)
    n, S, r = n_chips, seq_len, reserve_fraction
    b = _kv_pool_tokens(n * m.hbm_bytes, r, w, kv) // S
    if b < 1:
        need = min_chips(c, chip, batch=1, seq_len=S, weight_dtype=weight_dtype, kv_dtype=kv_dtype, reserve_fraction=r)
        raise ValueError(
            f"n_chips={n} {m.name} chips cannot hold {c.name or 'the model'} "
            f"({w / 1e9:.3g} GB of weights) and one {S:,}-token KV cache; it needs at least {need} "
            "chips"
        )
    return int(min(b, MAX_BATCH))


@checked
def min_chips(
    model: Model,
    chip,
    *,
    batch: Batch | None = None,
    seq_len: Context | None = None,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    reserve_fraction: Reserve = 0.0,
) -> int:
    """Fewest chips whose memory holds the weights (and, given ``batch`` and ``seq_len``, their KV caches):
    ``ceil(bytes / (HBM · (1 − reserve)))``. Memory only: no slice shape, no speed."""
    c, w, kv = _memory(model, weight_dtype, kv_dtype)
    m = machine(chip)
    r = reserve_fraction
    if (batch is None) != (seq_len is None):
        raise ValueError("batch and seq_len go together: give both (to count KV caches) or neither")
    need = w + (0.0 if batch is None else batch * seq_len * kv)
    return max(1, math.ceil(need / (m.hbm_bytes * (1.0 - r)) - 1e-9))


@checked
def smallest_topology(
    model: Model,
    chip,
    *,
    batch: Batch | None = None,
    seq_len: Context | None = None,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    reserve_fraction: Reserve = 0.0,
) -> Slice:
    """The smallest standard slice (:func:`~tpu_notes.inference.engine.slice_shapes`) with at least
    :func:`min_chips` chips."""
    need = min_chips(
        model,
        chip,
        batch=batch,
        seq_len=seq_len,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        reserve_fraction=reserve_fraction,
    )
    for shape in slice_shapes(chip):
        if math.prod(shape) >= need:
            return Slice(chip, shape)
    c = get_chip(chip)
    raise ValueError(f"model needs {need} {c.long_name} chips, more than one pod ({math.prod(c.pod_shape)}) holds")


@checked
def throughput_per_chip(
    model: Model,
    chip,
    n_chips: Chips,
    batch: Batch,
    seq_len: Context,
    *,
    decode_len: Context | None = None,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    allow_unfit: Bool = False,
) -> float:
    """Tokens per second per chip of generation at ``batch`` and ``seq_len`` (``B / (step · n)``); with
    ``decode_len``, queries per second per chip instead (``B / (step · decode_len · n)``).

    A batch whose weights and caches do not fit in the chips' HBM has no throughput to quote: it is refused with a
    ``ValueError`` naming the largest batch that fits, unless ``allow_unfit=True`` (the figure is then the step's
    speed as if the memory were there)."""
    step = decode_step_time(
        model, chip, n_chips, batch, seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype
    )
    if not step.fits and not allow_unfit:
        try:
            top = max_batch(model, chip, n_chips, seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
            most = f"the largest batch that fits is {top}"
        except ValueError as err:  # not even one sequence fits
            most = f"not one sequence fits ({err})"
        raise ValueError(
            f"batch={batch} sequences of {seq_len:,} tokens do not fit beside the weights on n_chips={n_chips}: "
            f"{most}; pass allow_unfit=True for the figure anyway"
        )
    if decode_len is None:
        return step.tokens_per_s_per_chip
    return step.tokens_per_s_per_chip / decode_len


@checked
def latency_throughput_curve(
    model: Model,
    chip,
    n_chips: Chips,
    seq_len: Context,
    batches: Sequence[int] | None = None,
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    fitting_only: Bool = False,
    expected: Bool = False,
) -> tuple:
    """The step at each batch of ``batches`` (default: powers of two up to 1024; at most :data:`MAX_CANDIDATES`):
    latency is ``.total``, throughput ``.tokens_per_s_per_chip``. ``fitting_only`` drops the batches whose caches
    do not fit.

    By default these are Chapter 7's perfectly sharded :class:`~tpu_notes.inference.DecodeStepTime` steps (no
    communication, all of HBM for weights and caches). ``expected=True`` returns the one serving step model's
    :class:`~tpu_notes.inference.engine.EngineStep` instead (:func:`~tpu_notes.inference.engine.deploy` on the
    standard slice of ``n_chips``: collectives, the efficiency model's rates and overhead, 10% of HBM in reserve;
    ``fits`` by that pool). Both kinds have ``.total``, ``.tokens_per_s_per_chip`` and ``.fits``, so
    :func:`pareto_frontier` takes either."""
    batches = _candidates("batches", tuple(2**i for i in range(11)) if batches is None else batches)
    if expected:
        for i, b in enumerate(batches):
            _decode_point(b, seq_len, batch_arg=f"batches[{i}]")
        d = deploy(
            model,
            chip,
            n_chips,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            compute_dtype=compute_dtype,
            check_memory=False,
        )
        steps = [d.decode_step(b, seq_len, allow_unfit=True) for b in batches]
        return tuple(s for s in steps if s.fits or not fitting_only)
    out = [
        decode_step_time(
            model, chip, n_chips, b, seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype
        )
        for b in batches
    ]
    return tuple(s for s in out if s.fits or not fitting_only)


def pareto_frontier(steps: Sequence) -> tuple:
    """The steps no other step beats on both latency (``.total``, lower is better) and throughput per chip
    (``.tokens_per_s_per_chip``, higher is better), sorted by latency: the latency–throughput frontier across
    batches, topologies and precisions. ``steps`` is a sequence of :class:`~tpu_notes.inference.DecodeStepTime`
    (Chapter 7's step) or :class:`~tpu_notes.inference.engine.EngineStep` (the engine's, from
    ``latency_throughput_curve(..., expected=True)``), one kind or both; ones that do not fit in memory are left
    out."""
    if isinstance(steps, (str, bytes)) or not isinstance(steps, (list, tuple)):
        raise TypeError(f"steps must be a list of DecodeStepTime or EngineStep; got {type(steps).__name__}")
    rules.bounded_work(len(steps), argument="steps", limit=2**20, unit="steps")
    for i, s in enumerate(steps):
        if not isinstance(s, (DecodeStepTime, EngineStep)):
            raise TypeError(f"steps[{i}] must be a DecodeStepTime or an EngineStep; got {type(s).__name__}")
    best, front = -math.inf, []
    for s in sorted((s for s in steps if s.fits), key=lambda s: (s.total, -s.tokens_per_s_per_chip)):
        if s.tokens_per_s_per_chip > best:
            front.append(s)
            best = s.tokens_per_s_per_chip
    return tuple(front)


@checked
def cost_per_million_tokens(
    tokens_per_s_per_chip, dollars_per_chip_hour: PositiveFloat | None = None, *, chip=None
) -> float:
    """Dollars per million generated tokens: ``1e6 / (tokens/s/chip) × price / 3600``.

    ``tokens_per_s_per_chip`` is a number, a :class:`~tpu_notes.inference.DecodeStepTime` or an
    :class:`~tpu_notes.inference.engine.EngineStep`; a step whose weights and caches do not fit is refused (it has
    no price). The price is ``dollars_per_chip_hour`` or, when omitted, the on-demand price of ``chip`` in
    :mod:`tpu_notes.hardware`.

    This counts generated tokens only, at a chip busy all the time: on a long-prompt workload the prefill is most of
    the bill. :func:`tpu_notes.inference.cost.serving_cost` prices input and output tokens and a whole request.
    """
    if isinstance(tokens_per_s_per_chip, (DecodeStepTime, EngineStep)):
        if not tokens_per_s_per_chip.fits:
            raise ValueError(
                "tokens_per_s_per_chip is a step whose weights and caches do not fit in memory: it has no price "
                f"(batch {getattr(tokens_per_s_per_chip, 'batch', getattr(tokens_per_s_per_chip, 'decode', '?'))})"
            )
        rate = tokens_per_s_per_chip.tokens_per_s_per_chip
    else:
        rate = check_positive("tokens_per_s_per_chip", tokens_per_s_per_chip)
    if dollars_per_chip_hour is None:
        if chip is None:
            raise ValueError("give dollars_per_chip_hour, or chip to use its listed price")
        c = get_chip(chip)
        if c.dollars_per_hour is None:
            raise ValueError(f"chip {c.long_name} has no price in tpu_notes.hardware; give dollars_per_chip_hour")
        price = c.dollars_per_hour
    else:
        price = dollars_per_chip_hour
    dollars = 1e6 / rate * price / 3600.0
    return rules.finite_result(dollars, argument="tokens_per_s_per_chip", what="dollars per million tokens")


@checked
def disaggregation_ratio(prefill_s: PositiveFloat, step_s: PositiveFloat, batch: Batch, decode_len: Context) -> float:
    """Prefill servers per generation server that keep both busy (``prefill_s`` and ``step_s`` in seconds).

    ``n_prefill`` prefill servers turn out ``n_prefill / prefill_s`` sequences a second; ``n_decode`` generation
    servers finish ``n_decode · B / (step_s · S_g)`` of them, ``S_g = decode_len`` tokens each. Equal rates give
    ``n_prefill / n_decode = prefill_s · B / (step_s · S_g)`` (Chapter 7's notation).
    """
    made = rules.finite_result(prefill_s * batch, argument="prefill_s", what="prefill seconds of a batch")
    used = rules.finite_result(step_s * decode_len, argument="step_s", what="seconds of a generation")
    return rules.finite_result(made / used, argument="prefill_s / step_s", what="the ratio")


@checked
def eviction_per_step(batch: Batch, prompt_len: Context, decode_len: Context) -> dict:
    """With continuous batching and every sequence ``S_p + S_g`` long (``prompt_len`` and ``decode_len`` tokens):
    sequences finishing per step ``B / S_g`` and KV tokens freed per step ``B · (S_p + S_g) / S_g``."""
    B, S_p, S_g = batch, prompt_len, decode_len
    return {"sequences": B / S_g, "tokens": B * (S_p + S_g) / S_g}


__all__ = [
    "MAX_CANDIDATES",
    "cost_per_million_tokens",
    "disaggregation_ratio",
    "eviction_per_step",
    "latency_throughput_curve",
    "max_batch",
    "min_chips",
    "pareto_frontier",
    "smallest_topology",
    "throughput_per_chip",
]
