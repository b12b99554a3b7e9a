"""A generation step with its communication: 1D model parallelism on a TPU slice (Chapter 8).

Chapter 7's :func:`~tpu_notes.inference.decode_step_time` assumes perfect sharding. Here the same step pays for the
activation collectives of ``tp``-way model (tensor) parallelism laid over ``tp_axes`` axes of the torus: per layer,
the attention block and the MLP block each AllGather their ``[B, D]`` input and ReduceScatter their output.

- bandwidth: each block moves ``2 · B · D · bytes`` through ``tp_axes`` bidirectional links per chip, so a layer
  takes ``2 · 2·B·D·bytes / (tp_axes · W_ici)`` (the 1D weight-stationary cost of Chapter 7, for two blocks);
- latency: each of the four collectives crosses ``tp_axes · ceil(side / 2)`` hops of ``ICI_HOP_LATENCY`` (1 µs),
  ``side = tp ** (1 / tp_axes)`` chips per axis (a bidirectional ring on each axis).

``overlap=False`` (the default) adds the collectives to the step, as when a layer's next matmul waits for them;
``overlap=True`` hides them under the weight load and FLOPs: ``KV + max(weights, FLOPs, comms)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from ..hardware import get_chip
from ..transformer import Model
from ..units import Bool, Positive, Shape, checked, dtype_bytes, fmt
from .serving import MAX_CANDIDATES
from .sharding import ICI_HOP_LATENCY
from .step import Batch, Chips, ComputeDType, Context, DecodeStepTime, StorageDType, decode_step_time

_Axes = Annotated[int, Positive(integer=True, maximum=3)]


@dataclass(frozen=True)
class ShardedStepTime:
    """One generation step on a model-parallel TPU deployment, with its collectives, in seconds."""

    step: DecodeStepTime  # Chapter 7's step (perfect sharding): KV, weights, FLOPs
    comms_bandwidth: float  # activation collectives' bytes over ICI, all layers, seconds
    comms_latency: float  # their per-hop latency, all layers, seconds
    total: float  # the step with communication, seconds
    bound: str  # "comms" when the collectives are the largest part, else step.bound
    tp: int  # model-parallel degree
    tp_axes: int  # torus axes the model-parallel group spans

    @property
    def comms(self) -> float:
        """All communication of the step, seconds."""
        return self.comms_bandwidth + self.comms_latency

    @property
    def tokens_per_s_per_chip(self) -> float:
        """Tokens per second per chip with communication paid."""
        return self.step.batch / self.total / self.step.n_chips

    def __repr__(self) -> str:
        return (
            f"ShardedStepTime(total={fmt(self.total, 's')}: step={fmt(self.step.total, 's')} + comms="
            f"{fmt(self.comms, 's')} (bandwidth {fmt(self.comms_bandwidth, 's')}, latency "
            f"{fmt(self.comms_latency, 's')}); bound={self.bound}, tp={self.tp} over {self.tp_axes} axes)"
        )


@checked
def sharded_step_time(
    model: Model,
    chip,
    n_chips: Chips,
    batch: Batch,
    seq_len: Context,
    *,
    tp_axes: _Axes = 2,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    activation_dtype: StorageDType = "bf16",
    overlap: Bool = False,
) -> ShardedStepTime:
    """A generation step of ``model`` on ``n_chips`` TPU chips, all of them one model-parallel group laid over
    ``tp_axes`` torus axes, with the activation collectives priced (see the module docstring)."""
    c = model
    chip_ = get_chip(chip)
    if chip_.ici_bw_bidi is None:
        raise ValueError(f"chip must have ICI links (a TPU); {chip_.long_name} has none in tpu_notes.hardware")
    n, axes = n_chips, tp_axes
    if axes > (chip_.ici_dims or 3):
        raise ValueError(f"tp_axes must be at most the {chip_.ici_dims} torus axes of {chip_.long_name}; got {axes}")
    act = dtype_bytes(activation_dtype)
    step = decode_step_time(
        c, chip_, n, batch, seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype
    )
    B, D = step.batch, c.d_model
    if n == 1:
        bw = lat = 0.0
    else:
        bw = c.n_layers * 2 * 2.0 * B * D * act / (axes * chip_.ici_bw_bidi)
        side = n ** (1.0 / axes)
        lat = c.n_layers * 4 * axes * math.ceil(side / 2 - 1e-9) * ICI_HOP_LATENCY
    comms = bw + lat
    if overlap:
        total = step.kv_load + max(step.weight_load, step.flops_time, comms)
    else:
        total = step.total + comms
    parts = {"kv": step.kv_load, "weights": step.weight_load, "compute": step.flops_time, "comms": comms}
    bound = "comms" if comms >= max(parts.values()) else step.bound
    return ShardedStepTime(
        step=step, comms_bandwidth=bw, comms_latency=lat, total=total, bound=bound, tp=n, tp_axes=axes
    )


@checked
def best_deployment(
    model: Model,
    chip,
    seq_len: Context,
    latency_limit_s: Annotated[float, Positive(maximum=3600.0)],
    *,
    chip_counts: Annotated[Sequence[int], Shape()] = (8, 16, 32, 64),
    batches: Annotated[Sequence[int], Shape()] = (8, 16, 32, 48, 64, 96, 128, 192, 256),
    tp_axes: _Axes = 2,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    overlap: Bool = False,
):
    """The :func:`sharded_step_time` with the most tokens/s per chip whose step (collectives included) is at most
    ``latency_limit_s``, over ``chip_counts`` model-parallel groups and the ``batches`` that fit in memory at
    ``seq_len`` (at most :data:`~tpu_notes.inference.serving.MAX_CANDIDATES` pairs); ``None`` when nothing meets
    the limit."""
    limit, counts, bs = latency_limit_s, chip_counts, batches
    for name, values, top in (("chip_counts", counts, 2**16), ("batches", bs, 2**20)):
        for i, v in enumerate(values):
            if v > top:
                raise ValueError(f"{name}[{i}] must be at most {top:,}; got {v}")
    if len(counts) * len(bs) > MAX_CANDIDATES:
        raise ValueError(
            f"chip_counts x batches may hold at most {MAX_CANDIDATES} candidates; got {len(counts)} x {len(bs)}"
        )
    best = None
    for n in counts:
        for b in bs:
            s = sharded_step_time(
                model,
                chip,
                n,
                b,
                seq_len,
                tp_axes=tp_axes,
                weight_dtype=weight_dtype,
                kv_dtype=kv_dtype,
                compute_dtype=compute_dtype,
                overlap=overlap,
            )
            if not s.step.fits or s.total > limit:
                continue
            if best is None or s.tokens_per_s_per_chip > best.tokens_per_s_per_chip:
                best = s
    return best


__all__ = ["ShardedStepTime", "best_deployment", "sharded_step_time"]
