"""The arithmetic every serving model of this package shares (Chapter 7), at the bottom of its imports.

- the kinds and bounds of the serving arguments (dtypes, batch, context, chips: ``StorageDType``,
  ``Batch``, ...);
- a chip's rates as the step models read them (:class:`Machine`, :func:`machine`);
- what one generation step reads and computes, counted: the weights it visits (:func:`weight_params_read`), the KV
  cache one token costs (:func:`kv_bytes_per_token`), one step's dot-product attention (:func:`decode_attention`);
- how many tokens of KV cache the memory left beside the weights holds (``_kv_pool_tokens``): the arithmetic of
  both :func:`~tpu_notes.inference.max_batch` and :meth:`~tpu_notes.inference.engine.Deployment.max_batch`.

The engine (:mod:`tpu_notes.inference.engine`) prices steps with these; the teaching views
(:mod:`tpu_notes.inference.step`, :mod:`tpu_notes.inference.expected`, :mod:`tpu_notes.inference.serving`,
:mod:`tpu_notes.inference.long_context`, :mod:`tpu_notes.inference.deployment`) sit on top of the engine. Nothing here
imports another module of :mod:`tpu_notes.inference`. Plain Python (no JAX).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from ..hardware import Chip, get_chip
from ..transformer import Model
from ..units import DType, OneOf, Positive, Range, check_positive, checked, dtype_bytes

#: Dtype names the step-time functions take for weights and KV caches.
STORAGE_DTYPES = ("bf16", "fp32", "fp8", "int8", "int4")
#: Dtype names the matmuls can run in (the chip's peak for that dtype is used).
COMPUTE_DTYPES = ("bf16", "fp8", "int8")
#: Largest batch (sequences) and context (tokens) the functions accept: a typo must not mean 10**15 sequences.
MAX_BATCH = 2**24
MAX_CONTEXT = 2**26
#: Largest number of chips one step is shared by.
MAX_CHIPS = 2**20

#: The kinds of this package's serving arguments (for :func:`tpu_notes.units.checked`).
StorageDType = Annotated[str, DType(), OneOf(STORAGE_DTYPES)]
ComputeDType = Annotated[str, DType(), OneOf(COMPUTE_DTYPES)]
Batch = Annotated[int, Positive(integer=True, maximum=MAX_BATCH)]
Context = Annotated[int, Positive(integer=True, maximum=MAX_CONTEXT)]
Chips = Annotated[int, Positive(integer=True, maximum=MAX_CHIPS)]


@dataclass(frozen=True)
class Machine:
    """The three figures the step-time model needs, read off a chip or a measured roofline."""

    name: str  # e.g. "TPU v5e", or "fitted roofline"
    peak_flops: float  # FLOP/s of the matmuls in the compute dtype
    hbm_bw: float  # bytes/s of the memory the weights and caches stream from
    hbm_bytes: float  # bytes of that memory per chip (inf for a measured roofline)
    chip: Chip | None  # the Chip, when there is one (prices, ICI, slices)


@checked
def machine(chip, compute_dtype: ComputeDType = "bf16") -> Machine:
    """Resolve ``chip`` (a name, a :class:`~tpu_notes.hardware.Chip`, or a measured roofline) into a
    :class:`Machine`."""
    if isinstance(chip, (str, Chip)):
        c = get_chip(chip)
        return Machine(c.long_name, c.peak_flops(compute_dtype), c.hbm_bw, c.hbm_bytes, c)
    peak, bw = getattr(chip, "peak_flops", None), getattr(chip, "bandwidth", None)
    if isinstance(peak, (int, float)) and isinstance(bw, (int, float)) and not isinstance(peak, bool):
        check_positive("chip.peak_flops", peak)
        check_positive("chip.bandwidth", bw)
        if peak < 1.0 or bw < 1.0:  # a rate this small (a subnormal float) turns every time into inf or 0/0
            raise ValueError(
                f"chip.peak_flops ({peak:.3g} FLOP/s) and chip.bandwidth ({bw:.3g} bytes/s) must each be at least 1 "
                "(a measured roofline's rates are in FLOP/s and bytes/s)"
            )
        return Machine("fitted roofline", float(peak), float(bw), math.inf, None)
    raise TypeError(
        "chip must be a chip name (e.g. 'v5e'), a tpu_notes.hardware.Chip, or a measured roofline "
        f"with float peak_flops and bandwidth (tpu_notes.bench.FittedRoofline); got {type(chip).__name__}"
    )


def _with_memory(chip) -> Machine:
    """``chip``'s :class:`Machine`, refused (naming ``chip``) when it has no memory size: a measured roofline (what
    fits needs the HBM per chip)."""
    m = machine(chip)
    if not math.isfinite(m.hbm_bytes):
        raise TypeError("chip must be a chip name or a Chip (a measured roofline has no memory size to fill)")
    return m


# ----------------------------------------------------------------------------------------------- what is read
@checked
def weight_params_read(model: Model, batch: Batch = 1) -> float:
    """Parameters one generation step of ``batch`` sequences reads from memory.

    Every parameter but the input embedding (a lookup reads ``batch`` rows of it; a tied embedding is read whole by
    the unembedding). A mixture of experts reads only the experts the batch visits: with ``E`` experts and ``k`` per
    token, ``E·(1 − (1 − k/E)^B)`` of them per MoE layer on average (all of them once ``B`` is large).
    """
    c, B = model, batch
    total = float(c.param_count())
    if not c.tied_embeddings:
        total -= c.vocab * c.d_model - min(B, c.vocab) * c.d_model
    if c.is_moe:
        E, k = c.n_experts, c.experts_per_token
        visited = E * (1.0 - (1.0 - k / E) ** B)
        total -= c.n_moe_layers * (E - visited) * c.expert_params()
    return total


@checked
def kv_bytes_per_token(
    model: Model,
    kv_dtype: StorageDType = "bf16",
    *,
    local_window: Context | None = None,
    local_fraction: Annotated[float, Range(0.0, 1.0)] = 0.0,
    seq_len: Context | None = None,
) -> float:
    """Bytes of KV cache one token of context costs, averaged over layers.

    With local (sliding-window) attention on ``local_fraction`` of the layers, those layers keep only the last
    ``local_window`` tokens, so at context ``seq_len`` the average per token is
    ``kv · (1 − f + f · min(window, S)/S)``.
    """
    kv = model.kv_bytes_per_token(kv_dtype)
    if local_window is None:
        if local_fraction:
            raise ValueError("local_fraction needs local_window (the sliding window, in tokens)")
        return kv
    window, f = local_window, local_fraction
    S = seq_len if seq_len is not None else window
    return kv * (1.0 - f + f * min(window, S) / S)


# ----------------------------------------------------------------------------------------------- the KV pool
def _kv_pool_tokens(hbm_bytes: float, reserve_fraction: float, weight_bytes: float, kv_bytes_per_token: float) -> int:
    """Tokens of KV cache that ``hbm_bytes`` (all devices together) hold beside ``weight_bytes`` of weights, with
    ``reserve_fraction`` of the memory kept back: ``floor((HBM · (1 − reserve) − weights) / kv)``, 0 when the
    weights alone fill it. The one max-batch arithmetic: the most sequences of ``S`` tokens are this ``// S``
    (:func:`~tpu_notes.inference.max_batch`, :meth:`~tpu_notes.inference.engine.Deployment.max_batch`)."""
    free = hbm_bytes * (1.0 - reserve_fraction)
    return math.floor((free - weight_bytes) / kv_bytes_per_token) if free > weight_bytes else 0


# ----------------------------------------------------------------------------------------- decode attention
@dataclass(frozen=True)
class DecodeAttention:
    """One decode step's dot-product attention, all layers, ``batch`` sequences of ``seq_len`` cached tokens."""

    form: str  # "gqa" (cached K and V heads) or "mla-absorbed" (cached latent + shared rotary key)
    flops: float  # scores and weighted sums, FLOPs
    kv_bytes: float  # cache read, bytes
    cached_per_token: int  # elements cached per token and layer
    intensity: float  # flops / kv_bytes, FLOPs per byte (the queries and outputs are left out: tiny at long S)


@checked
def decode_attention(model: Model, seq_len: Context, *, batch: Batch = 1, kv_dtype: StorageDType = "bf16"):
    """The attention of one generation step (:class:`DecodeAttention`): every query head of each of ``batch``
    sequences scores ``seq_len`` cached tokens and sums their values, in every layer.

    GQA: ``2·S·N·(H_qk + H_v)`` FLOPs per layer and sequence over ``2·K·H`` cached elements per token.
    MLA (absorbed): ``2·S·N·(2·r_kv + r_rope)`` FLOPs over ``r_kv + r_rope`` cached elements per token, read once
    for all ``N`` heads, so its intensity is about ``N`` times the GQA figure's ``G``.
    """
    m, S, B = model, seq_len, batch
    b = dtype_bytes(kv_dtype)
    if m.is_mla:
        score, value, cached = m._mla_absorbed_widths()
        per_pair = 2.0 * m.n_heads * (score + value)
        form = "mla-absorbed"
    else:
        cached = 2 * m.n_kv_heads * m.d_head
        per_pair = 2.0 * m.n_heads * (m.qk_head_dim + m.v_dim)
        form = "gqa"
    flops = B * S * m.n_layers * per_pair
    kv = B * S * m.n_layers * cached * b
    return DecodeAttention(form=form, flops=flops, kv_bytes=kv, cached_per_token=cached, intensity=flops / kv)


__all__ = [
    "COMPUTE_DTYPES",
    "MAX_BATCH",
    "MAX_CHIPS",
    "MAX_CONTEXT",
    "STORAGE_DTYPES",
    "DecodeAttention",
    "Machine",
    "decode_attention",
    "kv_bytes_per_token",
    "machine",
    "weight_params_read",
]
