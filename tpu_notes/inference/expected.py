"""The expected time of a generation step and of a prefill: Chapter 7's roofline at the rates engines reach.

:func:`~tpu_notes.inference.decode_step_time` is the roofline (every weight and cache byte at the datasheet HBM
bandwidth, the FLOPs at peak, no communication). :func:`expected_decode_step` and :func:`expected_prefill` price the
same work with the one serving step model, :mod:`tpu_notes.inference.engine`, at the rates of an
:class:`~tpu_notes.efficiency.EfficiencyModel`:

- the weights and the KV caches stream at the achieved HBM fraction; the weight matmuls run at
  :func:`~tpu_notes.efficiency.matmul_fraction` of peak for their real shape (``batch`` rows: a decode matmul is
  thin, so the fraction is low exactly when it does not matter);
- tensor parallelism over ``n_chips`` costs two AllReduces of the ``[rows, D]`` activations per layer (and two
  AllToAlls when the KV caches are sharded over the batch), at the achieved fraction of the link (ICI on a TPU;
  NVLink inside a GPU node, the scale-out network beyond it), plus each call's latency: they do not overlap;
- each layer pays the model's ``decode_overhead`` (what the reads and FLOPs leave unexplained: norms, rotary,
  sampling, kernel boundaries, the engine's scheduling).

A prefill adds its attention FLOPs at the flash fraction and its memory-bound non-matmul bytes at the achieved HBM
rate. These are :class:`~tpu_notes.inference.engine.Deployment` steps with no memory reserve and no memory check
(they price a point; whether it fits is the roofline's ``fits``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..efficiency import EfficiencyModel, check_efficiency
from ..gpu import GpuCluster
from ..hardware import Chip
from ..transformer import Model
from ..units import Positive, Range, checked, fmt
from .engine import _decode_point, deploy
from .formulas import MAX_CONTEXT, Batch, Chips, ComputeDType, Context, StorageDType, kv_bytes_per_token


@dataclass(frozen=True)
class ExpectedDecodeStep:
    """One generation step at the efficiency model's rates, in seconds."""

    kv_load: float  # KV caches at the achieved HBM rate, seconds
    weight_load: float  # weights at the achieved HBM rate, seconds
    flops_time: float  # weight matmuls at the achieved rate for their shape, seconds
    collectives: float  # tensor-parallel AllReduces and KV AllToAlls (bandwidth + latency), seconds
    overhead: float  # the per-layer overhead, all layers, seconds
    total: float  # kv_load + max(weight_load, flops_time) + collectives + overhead, seconds
    bound: str  # the largest part: "kv", "weights", "compute", "collectives" or "overhead"
    batch: int  # sequences in the step
    n_chips: int  # chips sharing it
    efficiency: str  # the EfficiencyModel's name

    @property
    def tokens_per_s_per_chip(self) -> float:
        """Tokens generated per second per chip at this step time."""
        return self.batch / self.total / self.n_chips

    def __repr__(self) -> str:
        return (
            f"ExpectedDecodeStep(total={fmt(self.total, 's')}: kv={fmt(self.kv_load, 's')} + "
            f"max(weights={fmt(self.weight_load, 's')}, flops={fmt(self.flops_time, 's')}) + "
            f"collectives={fmt(self.collectives, 's')} + overhead={fmt(self.overhead, 's')}; bound={self.bound})"
        )


#: Deployments already built for pricing, by their arguments (a frontier prices hundreds of points on one).
_PRICING: dict = {}


def _pricing_deployment(model, chip, n_chips, weight_dtype, kv_dtype, compute_dtype, efficiency):
    """The :class:`~tpu_notes.inference.engine.Deployment` the expected figures are priced on: ``chip`` a name or
    Chip with ``n_chips``, or a GPU cluster (``n_chips`` None or its size); no reserve, no memory check."""
    key = (model, chip if isinstance(chip, (str, Chip)) else id(chip), n_chips, weight_dtype, kv_dtype, compute_dtype)
    hit = _PRICING.get(key + (id(efficiency),))
    if hit is not None and hit[0] is efficiency and hit[1] is chip:
        return hit[2]
    dep = _build_pricing(model, chip, n_chips, weight_dtype, kv_dtype, compute_dtype, efficiency)
    if len(_PRICING) > 512:
        _PRICING.clear()
    _PRICING[key + (id(efficiency),)] = (efficiency, chip, dep)
    return dep


def _build_pricing(model, chip, n_chips, weight_dtype, kv_dtype, compute_dtype, efficiency):
    if isinstance(chip, GpuCluster):
        system, n = chip, (None if n_chips is None or n_chips == chip.n_gpus else n_chips)
    elif isinstance(chip, (str, Chip)):
        if n_chips is None:
            raise TypeError("n_chips must be a whole number of chips (None only with a tpu_notes.gpu.GpuCluster)")
        system, n = chip, n_chips
    else:
        raise TypeError(
            "chip must be a chip name, a tpu_notes.hardware.Chip or a tpu_notes.gpu.GpuCluster (a measured roofline "
            f"has no efficiency figures); got {type(chip).__name__}"
        )
    return deploy(
        model,
        system,
        n,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        compute_dtype=compute_dtype,
        reserve_fraction=0.0,
        efficiency=efficiency,
        check_memory=False,
    )


def _from_engine(step, efficiency_name: str) -> ExpectedDecodeStep:
    bound = step.bound
    return ExpectedDecodeStep(
        kv_load=step.kv,
        weight_load=step.weights,
        flops_time=step.matmul,
        collectives=step.collectives,
        overhead=step.overhead,
        total=step.total,
        bound=bound,
        batch=step.decode,
        n_chips=step.n_chips,
        efficiency=efficiency_name,
    )


@checked
def expected_decode_step(
    model: Model,
    chip,
    n_chips: Chips | None,
    batch: Batch,
    seq_len: Context,
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    efficiency: EfficiencyModel | None = None,
    local_window: Context | None = None,
    local_fraction: Annotated[float, Range(0.0, 1.0)] = 0.0,
) -> ExpectedDecodeStep:
    """The generation step of :func:`~tpu_notes.inference.decode_step_time` (same arguments) at the rates of the
    efficiency model ``efficiency`` (default :data:`tpu_notes.efficiency.DEFAULT`): the
    :meth:`~tpu_notes.inference.engine.Deployment.step` of ``batch`` sequences with ``batch × seq_len`` tokens of
    context (fewer with sliding-window layers). ``decode_step_time(...).expected`` is this step at the default
    model."""
    e = check_efficiency(efficiency)
    _decode_point(batch, seq_len)
    dep = _pricing_deployment(model, chip, n_chips, weight_dtype, kv_dtype, compute_dtype, e)
    per_token = kv_bytes_per_token(
        model, kv_dtype, local_window=local_window, local_fraction=local_fraction, seq_len=seq_len
    )
    kv_tokens = max(batch, round(batch * seq_len * per_token / dep.kv_bytes_per_token))
    return _from_engine(dep.step(batch, kv_tokens), e.name)


@checked
def expected_prefill(
    model: Model,
    chip,
    n_chips: Chips,
    prompt_len: Context,
    batch: Batch = 1,
    *,
    weight_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    cached_len: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_CONTEXT)] = 0,
    efficiency: EfficiencyModel | None = None,
) -> float:
    """Expected seconds of a prefill of ``batch`` prompts of ``prompt_len`` tokens on ``n_chips`` chips, of which
    ``cached_len`` come from a prefix cache: :meth:`~tpu_notes.inference.engine.Deployment.prefill_step`'s total.
    The roofline is :func:`~tpu_notes.inference.prefill_time` at ``mfu=1``, whose ``expected`` is this at the
    default model."""
    e = check_efficiency(efficiency)
    if cached_len >= prompt_len:
        raise ValueError(f"cached_len must be smaller than prompt_len ({prompt_len}); got {cached_len}")
    dep = _pricing_deployment(model, chip, n_chips, weight_dtype, "bf16", compute_dtype, e)
    return dep.prefill_step(prompt_len, batch, cached_len=cached_len).total


__all__ = ["ExpectedDecodeStep", "expected_decode_step", "expected_prefill"]
