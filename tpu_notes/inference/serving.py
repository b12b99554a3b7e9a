"""Serving economics: what fits, the smallest slice, throughput, the latency–throughput curve, cost (Chapter 7).

Memory only decides what fits: ``n · HBM ≥ weights + B · S · kv_bytes``. The largest batch is what the rest of
the memory holds; the smallest slice is the first standard slice shape with enough chips. Throughput follows from
:func:`~tpu_notes.inference.step.decode_step_time`; cost from throughput and a price per chip-hour.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

from ..hardware import get_chip
from ..topology import Slice
from ..transformer import as_config
from ..units import check_positive, check_sizes, dtype_bytes
from .step import (MAX_BATCH, MAX_CONTEXT, DecodeStepTime, _batch, _chips, _context, _storage, decode_step_time, machine)


def _memory(model, weight_dtype, kv_dtype):
    c = as_config(model)
    w = c.param_count() * dtype_bytes(_storage(weight_dtype, "weight_dtype"))
    kv = c.kv_bytes_per_token(_storage(kv_dtype, "kv_dtype"))
    return c, w, kv


def max_batch(model, chip, n_chips: int, seq_len: int, *, weight_dtype: str = "bf16", kv_dtype: str = "bf16",
              reserve_fraction: float = 0.0) -> int:
    """Largest number of sequences of ``seq_len`` tokens whose KV caches fit beside the weights on ``n_chips``:
    ``floor((n · HBM · (1 − reserve) − weights) / (seq_len · kv_bytes))``.

    ``reserve_fraction`` keeps that share of memory for activations and the runtime. Raises ``ValueError`` (naming
    ``n_chips`` and the chips needed) when not even one sequence fits.
    """
    c, w, kv = _memory(model, weight_dtype, kv_dtype)
    m = machine(chip)
    n, S = _chips(n_chips), _context(seq_len)
    r = check_positive("reserve_fraction", reserve_fraction, allow_zero=True, maximum=0.99)
    free = n * m.hbm_bytes * (1.0 - r) - w
    b = math.floor(free / (S * kv)) if free > 0 else 0
    if b < 1:
        need = min_chips(c, chip, batch=1, seq_len=S, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                         reserve_fraction=r)
        raise ValueError(f"n_chips={n} {m.name} chips cannot hold {c.name or 'the model'} "
                         f"({w / 1e9:.3g} GB of weights) and one {S:,}-token KV cache; it needs at least {need} "
                         "chips")
    return int(min(b, MAX_BATCH))


def min_chips(model, chip, *, batch: Optional[int] = None, seq_len: Optional[int] = None,
              weight_dtype: str = "bf16", kv_dtype: str = "bf16", reserve_fraction: float = 0.0) -> int:
    """Fewest chips whose memory holds the weights (and, given ``batch`` and ``seq_len``, their KV caches):
    ``ceil(bytes / (HBM · (1 − reserve)))``. Memory only: no slice shape, no speed."""
    c, w, kv = _memory(model, weight_dtype, kv_dtype)
    m = machine(chip)
    r = check_positive("reserve_fraction", reserve_fraction, allow_zero=True, maximum=0.99)
    if (batch is None) != (seq_len is None):
        raise ValueError("batch and seq_len go together: give both (to count KV caches) or neither")
    need = w + (0.0 if batch is None else _batch(batch) * _context(seq_len) * kv)
    return max(1, math.ceil(need / (m.hbm_bytes * (1.0 - r)) - 1e-9))


def slice_shapes(chip) -> tuple[tuple[int, ...], ...]:
    """The standard slice shapes of a TPU generation, smallest first: powers of two with axes at most 2:1 on a 2D
    torus (1x1, 2x2, 2x4, 4x4, 4x8, ... v5e's menu); on a 3D torus the sub-cube shapes 2x2x1 ... 4x4x4, then whole
    4x4x4 cubes (4x4x8, 4x8x8, 8x8x8, ...), up to the pod."""
    c = get_chip(chip)
    if c.kind != "tpu" or not c.pod_shape:
        raise ValueError(f"chip must be a TPU with a torus (slices are TPU shapes); got {c.long_name}")
    pod = sorted(c.pod_shape)
    if c.ici_dims == 2:
        shapes = [(1, 1)]
        a = 2
        while a <= pod[-1]:
            shapes += [(a, a), (a, 2 * a)]
            a *= 2
    else:
        shapes = [(1, 1, 1), (2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4)]
        while True:
            x, y, z = shapes[-1]
            nxt = (x, y, 2 * z) if x == y == z else ((x, 2 * y, z) if x == y else (2 * x, y, z))
            if nxt == shapes[-1] or any(a > b for a, b in zip(sorted(nxt), pod)) or len(shapes) > 64:
                break
            shapes.append(nxt)
    out = [s for s in shapes if all(a <= b for a, b in zip(sorted(s), pod))]
    return tuple(sorted(out, key=lambda s: (math.prod(s), s)))


def smallest_topology(model, chip, *, batch: Optional[int] = None, seq_len: Optional[int] = None,
                      weight_dtype: str = "bf16", kv_dtype: str = "bf16", reserve_fraction: float = 0.0) -> Slice:
    """The smallest standard slice (:func:`slice_shapes`) with at least :func:`min_chips` chips."""
    need = min_chips(model, chip, batch=batch, seq_len=seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                     reserve_fraction=reserve_fraction)
    for shape in slice_shapes(chip):
        if math.prod(shape) >= need:
            return Slice(chip, shape)
    c = get_chip(chip)
    raise ValueError(f"model needs {need} {c.long_name} chips, more than one pod ({math.prod(c.pod_shape)}) holds")


def throughput_per_chip(model, chip, n_chips: int, batch: int, seq_len: int, *, decode_len: Optional[int] = None,
                        weight_dtype: str = "bf16", kv_dtype: str = "bf16", compute_dtype: str = "bf16") -> float:
    """Tokens per second per chip of generation at ``batch`` and ``seq_len`` (``B / (step · n)``); with
    ``decode_len``, queries per second per chip instead (``B / (step · decode_len · n)``)."""
    step = decode_step_time(model, chip, n_chips, batch, seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                            compute_dtype=compute_dtype)
    if decode_len is None:
        return step.tokens_per_s_per_chip
    return step.tokens_per_s_per_chip / check_positive("decode_len", decode_len, integer=True, maximum=MAX_CONTEXT)


def latency_throughput_curve(model, chip, n_chips: int, seq_len: int, batches: Optional[Sequence[int]] = None, *,
                             weight_dtype: str = "bf16", kv_dtype: str = "bf16", compute_dtype: str = "bf16",
                             fitting_only: bool = False) -> tuple[DecodeStepTime, ...]:
    """The step at each batch of ``batches`` (default: powers of two up to 1024): latency is ``.total``,
    throughput ``.tokens_per_s_per_chip``. ``fitting_only`` drops the batches whose caches do not fit."""
    if batches is None:
        batches = tuple(2**i for i in range(11))
    batches = tuple(check_positive(f"batches[{i}]", b, integer=True, maximum=MAX_BATCH)
                    for i, b in enumerate(check_sizes("batches", batches)))
    if not isinstance(fitting_only, bool):
        raise TypeError(f"fitting_only must be True or False; got {fitting_only!r}")
    out = [decode_step_time(model, chip, n_chips, b, seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
                            compute_dtype=compute_dtype) for b in batches]
    return tuple(s for s in out if s.fits or not fitting_only)


def pareto_frontier(steps) -> tuple:
    """The steps no other step beats on both latency (``.total``, lower is better) and throughput per chip
    (``.tokens_per_s_per_chip``, higher is better), sorted by latency: the latency–throughput frontier across
    batches, topologies and precisions. ``steps`` is a sequence of :class:`~tpu_notes.inference.DecodeStepTime`; ones that do not fit in
    memory are left out."""
    if isinstance(steps, (str, bytes)) or not isinstance(steps, (list, tuple)):
        raise TypeError(f"steps must be a list of DecodeStepTime; got {type(steps).__name__}")
    for i, s in enumerate(steps):
        if not isinstance(s, DecodeStepTime):
            raise TypeError(f"steps[{i}] must be a DecodeStepTime; got {type(s).__name__}")
    best, front = -math.inf, []
    for s in sorted((s for s in steps if s.fits), key=lambda s: (s.total, -s.tokens_per_s_per_chip)):
        if s.tokens_per_s_per_chip > best:
            front.append(s)
            best = s.tokens_per_s_per_chip
    return tuple(front)


def cost_per_million_tokens(tokens_per_s_per_chip, dollars_per_chip_hour: Optional[float] = None, *,
                            chip=None) -> float:
    """Dollars per million generated tokens: ``1e6 / (tokens/s/chip) × price / 3600``.

    ``tokens_per_s_per_chip`` is a number or a :class:`~tpu_notes.inference.DecodeStepTime`; the price is ``dollars_per_chip_hour`` or,
    when omitted, the on-demand price of ``chip`` in :mod:`tpu_notes.hardware`.
    """
    if isinstance(tokens_per_s_per_chip, DecodeStepTime):
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
        price = check_positive("dollars_per_chip_hour", dollars_per_chip_hour)
    return 1e6 / rate * price / 3600.0


def disaggregation_ratio(prefill_s: float, step_s: float, batch: int, decode_len: int) -> float:
    """Prefill servers per generation server that keep both busy.

    Prefill servers turn out ``P / prefill_s`` sequences a second; generation servers finish ``G · B /
    (step_s · decode_len)``. Equal rates give ``P / G = prefill_s · B / (step_s · decode_len)``.
    """
    p = check_positive("prefill_s", prefill_s)
    s = check_positive("step_s", step_s)
    return p * _batch(batch) / (s * check_positive("decode_len", decode_len, integer=True))


def eviction_per_step(batch: int, prompt_len: int, decode_len: int) -> dict:
    """With continuous batching and every sequence ``prompt_len + decode_len`` long: sequences finishing per step
    ``B / G`` and KV tokens freed per step ``B · (P + G) / G``."""
    B = _batch(batch)
    P = check_positive("prompt_len", prompt_len, integer=True)
    G = check_positive("decode_len", decode_len, integer=True)
    return {"sequences": B / G, "tokens": B * (P + G) / G}


__all__ = ["cost_per_million_tokens", "disaggregation_ratio", "eviction_per_step", "latency_throughput_curve",
           "max_batch", "min_chips", "pareto_frontier", "slice_shapes", "smallest_topology", "throughput_per_chip"]
