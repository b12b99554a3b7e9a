"""How far generation can be sharded: the limits of model parallelism, KV-cache sharding, 2D weight-stationary
layouts and latency-bound collectives (Chapter 7).

Generation keeps the weights and caches where they are and moves activations. With ``Y``-way model (tensor)
parallelism of a ``[B, D] × [D, F]`` matmul, per chip and per matmul:

- HBM: ``T_hbm = 2·D·F / (Y · W_hbm)`` (bf16 weights: 2 bytes each);
- ICI: ``T_ici = 2·B·D / W_ici`` (AllGather the bf16 ``[B, D]`` activations; ``W_ici`` bidirectional per link);
- FLOPs: ``T_math = 2·B·D·F / (Y · C)``.

ICI time passes HBM time once ``Y > F / (B · β)`` with ``β = W_hbm / W_ici`` (:func:`max_tp_memory`); in the
compute-bound regime the training limit ``Y < M · F / α`` holds (:func:`max_tp_ici`). Small activations make the
collectives latency-bound (:func:`latency_bound_tp`). 1D weight-stationary sharding of an MLP costs
``4·B·D / (M · W)`` of communication on ``M`` axes; the 2D layout (``W_in[D_X, F_YZ]``) costs
``2·B·D / (X·W) + 4·B·F / (YZ·W)``, least at ``X = sqrt(N·D / (2F))``, and wins past
``N = 32 · (F/D) · (3/4)²`` chips (72 for ``F = 4D``) on a 3D torus (:func:`weight_stationary_comms`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from ..hardware import ICI_HOP_LATENCY, get_chip
from ..transformer import Model
from ..units import OneOf, Positive, PositiveInt, checked, dtype_bytes, fmt
from .formulas import Batch, Chips, StorageDType

#: A model dimension (d_model, d_ff), a whole number up to 2**24.
Dim = Annotated[int, Positive(integer=True, maximum=2**24)]

# ICI_HOP_LATENCY (imported from tpu_notes.hardware, re-exported): the hop latency of Appendix C; a collective
# whose per-hop transfer is shorter than this is latency-bound.


def _ici(chip, kind="ici"):
    c = get_chip(chip)
    if c.ici_bw_bidi is None:
        raise ValueError(f"chip must have ICI links (a TPU); {c.long_name} has none in tpu_notes.hardware")
    return c, c.bandwidth(kind)


@dataclass(frozen=True)
class GenerationMatmulTimes:
    """One ``[B, D] × [D, F]`` matmul sharded ``tp`` ways during generation, seconds per chip."""

    hbm: float  # weights read: 2·D·F·bytes/2 / (Y · W_hbm)
    ici: float  # activations gathered: 2·B·D / W_ici
    math: float  # 2·B·D·F / (Y · C)
    bound: str  # "hbm", "ici" or "compute": the largest

    def __repr__(self) -> str:
        return (
            f"GenerationMatmulTimes(hbm={fmt(self.hbm, 's')}, ici={fmt(self.ici, 's')}, "
            f"math={fmt(self.math, 's')}, bound={self.bound})"
        )


@checked
def generation_matmul_times(
    chip, batch: Batch, d_model: Dim, d_ff: Dim, tp: Chips, *, weight_dtype: StorageDType = "bf16"
) -> GenerationMatmulTimes:
    """The three times of one model-parallel matmul in a generation step (see the module docstring)."""
    c, w_ici = _ici(chip)
    B, D, F, Y = batch, d_model, d_ff, tp
    wb = dtype_bytes(weight_dtype)
    hbm = wb * D * F / (Y * c.hbm_bw)
    ici = 2.0 * B * D / w_ici
    mth = 2.0 * B * D * F / (Y * c.peak_flops("bf16"))
    bound = max((("hbm", hbm), ("ici", ici), ("compute", mth)), key=lambda t: t[1])[0]
    return GenerationMatmulTimes(hbm=hbm, ici=ici, math=mth, bound=bound)


@checked
def max_tp_memory(chip, d_ff: Dim, batch: Batch) -> float:
    """Largest model-parallel degree before ICI time exceeds the weight-load time in a memory-bound generation
    step: ``Y = F / (B · β)``, ``β = W_hbm / W_ici`` (about 9 on v5e)."""
    c, w_ici = _ici(chip)
    return d_ff / (batch * c.hbm_bw / w_ici)


@checked
def max_tp_ici(chip, d_ff: Dim, n_axes: Annotated[int, Positive(integer=True, maximum=3)] = 1) -> float:
    """Largest model-parallel degree that stays compute-bound against ICI (large batches):
    ``Y = n_axes · F / α``, ``α = C / W_ici`` (as in training, Chapter 5)."""
    c, w_ici = _ici(chip)
    return n_axes * d_ff * w_ici / c.peak_flops("bf16")


@checked
def latency_bound_tp(chip, batch: Batch, d_model: Dim, *, dtype: StorageDType = "int8") -> float:
    """Model-parallel degree above which the activation collectives are latency-bound: each of the ``Y`` shards
    of the ``[B, D]`` activations takes less than one hop latency (1 µs) on a one-way link,
    ``Y > B · D · bytes / (W_ici_oneway · 1 µs)`` (``B·D / 45,000`` in int8 on v5e)."""
    c, w = _ici(chip, "ici_oneway")
    return batch * d_model * dtype_bytes(dtype) / (w * ICI_HOP_LATENCY)


@dataclass(frozen=True)
class KVSharding:
    """How a KV cache ``[B, S, K, H]`` is spread over ``n_chips``: over heads first, then over the batch."""

    heads: int  # ways over the K key/value heads
    batch: int  # ways over the sequences
    all_to_alls: int  # AllToAlls per attention layer (2 when the batch is sharded, else 0)
    replicated: int  # copies of each cache shard (1 when fully distributed)


@checked
def kv_sharding(
    model: Model, n_chips: Chips, *, heads: PositiveInt | None = None, batch: Batch | None = None
) -> KVSharding:
    """Shard the KV cache of ``model`` over ``n_chips``: ``heads`` ways over the KV heads (default: the largest
    divisor of both ``K`` and ``n_chips``), the rest over the batch (``batch`` sequences must divide by it, when
    given). Asking for more head shards than the model has KV heads is a ``ValueError``.

    A multi-head latent attention (MLA) model caches one latent per token that every head reads: it counts as one
    KV head here, so its cache is split over the batch (each chip holds its sequences' whole latents)."""
    c, n = model, n_chips
    K = 1 if c.is_mla else c.n_kv_heads
    if heads is None:
        heads = max(d for d in range(1, min(K, n) + 1) if K % d == 0 and n % d == 0)
    else:
        if heads > K:
            raise ValueError(f"heads={heads} exceeds the model's {K} KV heads; shard the rest over the batch")
        if K % heads or n % heads:
            raise ValueError(f"heads={heads} must divide both the {K} KV heads and n_chips={n}")
    ways = n // heads
    if batch is not None:
        B = batch
        if B % ways and B >= ways:
            raise ValueError(f"batch={B} must be divisible by the {ways} batch shards")
        ways = min(ways, B)
    return KVSharding(heads=heads, batch=ways, all_to_alls=2 if ways > 1 else 0, replicated=n // (heads * ways))


@dataclass(frozen=True)
class WeightStationary:
    """Communication of one MLP block (``W_in``, ``W_out``) in a generation step, per chip, in seconds."""

    layout: str  # "1d" or "2d"
    comms: float  # seconds of ICI communication
    x: float  # 2D: ways the D dimension is sharded (1 for 1D)
    yz: float  # 2D: ways the F dimension is sharded (N for 1D)


@checked
def weight_stationary_comms(
    chip,
    batch: Batch,
    d_model: Dim,
    d_ff: Dim,
    n_chips: Chips,
    layout: Annotated[str, OneOf(("1d", "2d"))] = "1d",
    *,
    n_axes: Annotated[int, Positive(integer=True, maximum=3)] = 3,
) -> WeightStationary:
    """ICI time of an MLP block's collectives under 1D (``F`` sharded over all chips: AllGather + ReduceScatter of
    the bf16 ``[B, D]`` activations on ``n_axes`` axes, ``4·B·D / (n_axes · W)``) or 2D weight-stationary sharding
    (``2·B·D / (X·W) + 4·B·F / (YZ·W)`` at the best real ``X = sqrt(N·D / (2F))``), ``W`` the bidirectional
    link bandwidth."""
    c, w = _ici(chip)
    B, D, F, N, axes = batch, d_model, d_ff, n_chips, n_axes
    if layout == "1d":
        return WeightStationary("1d", 4.0 * B * D / (axes * w), 1.0, N)
    x = max(1.0, math.sqrt(N * D / (2.0 * F)))
    yz = N / x
    return WeightStationary("2d", 2.0 * B * D / (x * w) + 4.0 * B * F / (yz * w), x, yz)


@checked
def ws_2d_crossover(d_model: Dim, d_ff: Dim) -> float:
    """Chips above which 2D weight-stationary sharding communicates less than 1D on a 3D torus:
    ``N = 32 · (F/D) · (3/4)²`` (72 when ``F = 4D``)."""
    return 32.0 * (d_ff / d_model) * (3.0 / 4.0) ** 2


__all__ = [
    "ICI_HOP_LATENCY",
    "GenerationMatmulTimes",
    "KVSharding",
    "WeightStationary",
    "generation_matmul_times",
    "kv_sharding",
    "latency_bound_tp",
    "max_tp_ici",
    "max_tp_memory",
    "weight_stationary_comms",
    "ws_2d_crossover",
]
