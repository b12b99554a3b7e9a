"""A generation step with its communication: 1D model parallelism on a TPU slice (Chapter 8).

Chapter 7's :func:`~tpu_notes.inference.decode_step_time` assumes perfect sharding. Here the same step pays for the
activation collectives of ``tp``-way model (tensor) parallelism laid over ``tp_axes`` axes of the torus: per layer,
the attention block and the MLP block each AllGather their ``[B, D]`` input and ReduceScatter their output.

- bandwidth: each block moves ``2 · B · D · bytes`` through ``tp_axes`` bidirectional links per chip, so a layer
  takes ``2 · 2·B·D·bytes / (tp_axes · W_ici)`` (the 1D weight-stationary cost of Chapter 7, for two blocks);
- latency: each of the four collectives crosses ``tp_axes · ceil(side / 2)`` hops of ``ICI_HOP_LATENCY`` (1 µs),
  ``side = tp ** (1 / tp_axes)`` chips per axis (a bidirectional ring on each axis).

When the KV heads are fewer than the chips, the caches are sharded over the batch too
(:func:`~tpu_notes.inference.kv_sharding`) and each attention layer adds ``all_to_alls`` AllToAlls (2: the decoded
rows' queries to the chips that hold their caches, the attention outputs back), each of the ``[B, D]`` activations,
priced by :func:`tpu_notes.collectives.all_to_all_time` on the same bidirectional rings (``n`` chips factored over
``tp_axes`` axes) at ``max(bandwidth, hops × 1 µs)``: the ``kv_all_to_all`` part.

``overlap=False`` (the default) adds the collectives to the step, as when a layer's next matmul waits for them;
``overlap=True`` hides them under the weight load and FLOPs: ``KV + max(weights, FLOPs, comms)``.

Beside this roofline-with-communication sum, every :class:`ShardedStepTime` carries ``expected``: the step of the
same point from the one serving step model (:meth:`tpu_notes.inference.engine.Deployment.step`, at the efficiency
model's rates, the collectives at the system's formulas, 10% of HBM in reserve). :func:`best_deployment` ranks by it
unless asked for the roofline.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from .. import collectives, rules
from ..hardware import get_chip
from ..topology import Slice
from ..transformer import Model
from ..units import Bool, OneOf, Positive, Shape, checked, dtype_bytes, fmt
from .engine import EngineStep, _decode_point, _whole_heads, deploy, system_for
from .formulas import Batch, Chips, ComputeDType, Context, StorageDType
from .serving import MAX_CANDIDATES
from .sharding import ICI_HOP_LATENCY, kv_sharding
from .step import DecodeStepTime, decode_step_time

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
    kv_all_to_all: float = 0.0  # the KV AllToAlls (kv_sharding's all_to_alls per layer), all layers, seconds
    all_to_alls: int = 0  # AllToAlls per attention layer: 2 when the caches are sharded over the batch, else 0
    expected: EngineStep | None = field(default=None, repr=False)  # the engine's step of the same point

    @property
    def comms(self) -> float:
        """All communication of the step: the activation collectives' bandwidth and latency and the KV AllToAlls,
        seconds."""
        return self.comms_bandwidth + self.comms_latency + self.kv_all_to_all

    @property
    def fits(self) -> bool:
        """Whether the weights and caches fit: Chapter 7's memory check (``step.fits``, all of HBM) and, when the
        engine's step is there, its pool too (HBM less its reserve)."""
        return self.step.fits and (self.expected is None or self.expected.fits)

    @property
    def tokens_per_s_per_chip(self) -> float:
        """Tokens per second per chip with communication paid."""
        return self.step.batch / self.total / self.step.n_chips

    def __repr__(self) -> str:
        return (
            f"ShardedStepTime(total={fmt(self.total, 's')}: step={fmt(self.step.total, 's')} + comms="
            f"{fmt(self.comms, 's')} (bandwidth {fmt(self.comms_bandwidth, 's')}, latency "
            f"{fmt(self.comms_latency, 's')}"
            + (f", KV AllToAlls {fmt(self.kv_all_to_all, 's')}" if self.all_to_alls else "")
            + f"); bound={self.bound}, tp={self.tp} over {self.tp_axes} axes"
            + (f"; expected {fmt(self.expected.total, 's')}" if self.expected is not None else "")
            + ("" if self.fits else "; does NOT fit")
            + ")"
        )


@checked
def axis_sizes(n_chips: Chips, n_axes: _Axes) -> tuple[int, ...]:
    """``n_chips`` factored over ``n_axes`` torus axes as evenly as whole numbers allow, smallest first
    (16 over 2 axes: (4, 4); 8 over 2: (2, 4); 8 over 3: (2, 2, 2); a prime p over 2: (1, p))."""
    sizes, rest = [], n_chips
    for left in range(n_axes, 0, -1):
        target = rest ** (1.0 / left) + 1e-9
        d = max(d for d in range(1, int(target) + 1) if rest % d == 0)
        sizes.append(d)
        rest //= d
    sizes[-1] *= rest  # rest is 1 unless rounding left a factor behind
    return tuple(sorted(sizes))


def _engine_step(model, chip, n, axes, batch, seq_len, weight_dtype, kv_dtype, compute_dtype) -> EngineStep:
    """The engine's step for ``batch`` sequences of ``seq_len`` on ``n`` chips laid over ``axes`` axes (the slice of
    that shape; the standard slice of ``n`` chips when the pod has no such shape), priced even when it does not fit
    (``fits=False``)."""
    c = get_chip(chip)
    shape = axis_sizes(n, axes) + (1,) * ((c.ici_dims or axes) - axes)
    try:
        system = Slice(c, shape)
    except ValueError:
        system = system_for(c, n)
    d = deploy(
        model,
        system,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        compute_dtype=compute_dtype,
        check_memory=False,
    )
    return d.decode_step(batch, seq_len, allow_unfit=True)


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
    ``tp_axes`` torus axes, with the activation collectives and the KV AllToAlls priced (see the module docstring).
    ``expected`` is the engine's step of the same point (:func:`~tpu_notes.inference.engine.deploy` on the slice
    of ``n_chips`` factored over ``tp_axes`` axes, same dtypes; marked ``fits=False`` rather than refused when the
    weights and caches do not fit its pool). Refuses, naming ``n_chips``, a count that cannot give every chip whole
    query heads (:func:`tpu_notes.rules.whole_heads`), and, naming ``batch`` and ``seq_len``, a step larger than one
    engine step holds."""
    c = model
    chip_ = get_chip(chip)
    if chip_.ici_bw_bidi is None:
        raise ValueError(f"chip must have ICI links (a TPU); {chip_.long_name} has none in tpu_notes.hardware")
    n, axes = n_chips, tp_axes
    if axes > (chip_.ici_dims or 3):
        raise ValueError(f"tp_axes must be at most the {chip_.ici_dims} torus axes of {chip_.long_name}; got {axes}")
    _whole_heads(c, n, argument="n_chips")
    _decode_point(batch, seq_len)
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
    sharding = kv_sharding(c, n) if n > 1 else None
    a2a_per_layer = sharding.all_to_alls if sharding is not None else 0
    a2a = 0.0
    if a2a_per_layer:
        one = collectives.all_to_all_time(
            B * D * act, axis_sizes(n, axes), chip_.ici_bw_bidi, wraparound=True, hop_latency=ICI_HOP_LATENCY
        )
        a2a = c.n_layers * a2a_per_layer * one.total
    comms = bw + lat + a2a
    if overlap:
        total = step.kv_load + max(step.weight_load, step.flops_time, comms)
    else:
        total = step.total + comms
    parts = {"kv": step.kv_load, "weights": step.weight_load, "compute": step.flops_time, "comms": comms}
    bound = "comms" if comms >= max(parts.values()) else step.bound
    expected = _engine_step(c, chip_, n, axes, batch, seq_len, weight_dtype, kv_dtype, compute_dtype)
    return ShardedStepTime(
        step=step,
        comms_bandwidth=bw,
        comms_latency=lat,
        total=total,
        bound=bound,
        tp=n,
        tp_axes=axes,
        kv_all_to_all=a2a,
        all_to_alls=a2a_per_layer,
        expected=expected,
    )


#: What :func:`best_deployment` ranks by: the engine's expected step, or the roofline with communication.
RANK_BY = ("expected", "roofline")


def _legal_counts(model, chip_counts) -> list[int]:
    """The chip counts of ``chip_counts`` whose chips each hold whole query heads; refuses, naming ``chip_counts``,
    a list with none."""
    legal, first = [], None
    for n in chip_counts:
        try:
            _whole_heads(model, n, argument="chip_counts")
        except rules.Illegal as err:
            first = first or err
            continue
        legal.append(n)
    if not legal:
        raise ValueError(f"chip_counts: not one count gives every chip whole heads; {first}")
    return legal


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
    rank_by: Annotated[str, OneOf(RANK_BY)] = "expected",
):
    """The :func:`sharded_step_time` with the most tokens/s per chip whose step is at most ``latency_limit_s``,
    over ``chip_counts`` model-parallel groups and ``batches`` (at most
    :data:`~tpu_notes.inference.serving.MAX_CANDIDATES` pairs); ``None`` when nothing meets the limit.

    ``rank_by="expected"`` (the default) judges each point by the engine's step (``.expected``: the efficiency
    model's rates, the collectives at the system's formulas, the per-layer overhead) for both the latency limit and
    the throughput; ``"roofline"`` by the roofline with communication (``.total``), the behaviour before the engine.
    Either way a point whose weights and caches do not fit is skipped (:attr:`ShardedStepTime.fits`: all of HBM for
    Chapter 7's check and, for the engine's, HBM less its 10% reserve), so the answer always fits. A chip count that
    cannot give every chip whole query heads (:func:`tpu_notes.rules.whole_heads`) is no candidate: it is skipped,
    and refused (naming ``chip_counts``) when every count is such."""
    limit, bs = latency_limit_s, batches
    rules.bounded_work(len(chip_counts) * len(bs), argument="chip_counts x batches", limit=MAX_CANDIDATES)
    for name, values, top in (("chip_counts", chip_counts, 2**16), ("batches", bs, 2**20)):
        for i, v in enumerate(values):
            if v > top:
                raise ValueError(f"{name}[{i}] must be at most {top:,}; got {v}")
    for i, b in enumerate(bs):
        _decode_point(b, seq_len, batch_arg=f"batches[{i}]")
    counts = _legal_counts(model, chip_counts)

    def judged(s: ShardedStepTime) -> tuple[float, float]:  # (latency, tokens/s per chip) by the chosen step
        if rank_by == "expected":
            return s.expected.total, s.expected.tokens_per_s_per_chip
        return s.total, s.tokens_per_s_per_chip

    best, best_rate = None, -1.0
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
            if not s.fits:
                continue
            latency, rate = judged(s)
            if latency <= limit and rate > best_rate:
                best, best_rate = s, rate
    return best


__all__ = ["RANK_BY", "ShardedStepTime", "axis_sizes", "best_deployment", "sharded_step_time"]
