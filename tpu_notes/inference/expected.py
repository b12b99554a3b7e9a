"""The expected time of a generation step and of a prefill: Chapter 7's roofline at the rates engines reach.

:func:`~tpu_notes.inference.decode_step_time` is the roofline (every weight and cache byte at the datasheet HBM
bandwidth, the FLOPs at peak, no communication). :func:`expected_decode_step` prices the same step with the
:mod:`tpu_notes.efficiency` model:

- the weights and the KV caches stream at the achieved HBM fraction; the weight matmuls run at
  :func:`~tpu_notes.efficiency.matmul_fraction` of peak for their real shape (``batch`` rows: a decode matmul is
  thin, so the fraction is low exactly when it does not matter);
- tensor parallelism over ``n_chips`` costs two all-reduces of the ``[batch, D]`` activations per layer, at the
  achieved fraction of the link (ICI on a TPU; NVLink inside a GPU node, the scale-out NIC beyond it), plus the
  per-call latency: they do not overlap (the next matmul needs them);
- each layer pays the model's ``decode_overhead`` (what the reads and FLOPs leave unexplained: norms, rotary,
  sampling, kernel boundaries, the engine's scheduling).

:func:`expected_prefill` prices a prefill the same way: FLOPs at the shape's matmul fraction, attention at the
flash fraction, the forward's memory-bound bytes at the achieved HBM rate, and the same all-reduces on
``[tokens, D]``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from .. import efficiency as eff_mod
from ..efficiency import EfficiencyModel, check_efficiency
from ..transformer import Model
from ..units import Positive, checked, dtype_bytes, fmt
from .step import (
    MAX_CONTEXT,
    Batch,
    Chips,
    ComputeDType,
    Context,
    StorageDType,
    _cluster_chips,
    decode_step_time,
    machine,
)


@dataclass(frozen=True)
class ExpectedDecodeStep:
    """One generation step at the efficiency model's rates, in seconds."""

    kv_load: float  # KV caches at the achieved HBM rate, seconds
    weight_load: float  # weights at the achieved HBM rate, seconds
    flops_time: float  # weight matmuls at the achieved rate for their shape, seconds
    collectives: float  # tensor-parallel all-reduces (bandwidth + latency), seconds
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


def _all_reduces(model, chip, n: int, rows: float, e: EfficiencyModel) -> float:
    """Seconds of the two tensor-parallel all-reduces per layer of ``[rows, D]`` bf16 activations over ``n``
    chips, all layers: ``2(n − 1)/n`` of the bytes over the achieved link rate, plus a call's latency."""
    if n == 1:
        return 0.0
    c = chip
    if c.kind == "gpu":
        inside = n <= (c.node_size or 1)
        link = "nvlink" if inside else "ib"
        bw = c.nvlink_bw if inside else c.dcn_bw
        if bw is None:
            raise ValueError(
                f"{c.long_name} has no {'NVLink' if inside else 'scale-out NIC'} figure to price "
                f"tensor parallelism over {n} GPUs"
            )
    else:
        link, bw = "ici", c.bandwidth("ici")
    nbytes = rows * model.d_model * 2.0
    one = 2.0 * (n - 1) / n * nbytes / (bw * e.link(link)) + e.latency(link)
    return 2.0 * model.n_layers * one


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
) -> ExpectedDecodeStep:
    """The generation step of :func:`~tpu_notes.inference.decode_step_time` (same arguments) at the rates of the
    efficiency model ``efficiency`` (default :data:`tpu_notes.efficiency.DEFAULT`); see the module docstring.
    ``decode_step_time(...).expected`` is this step at the default model."""
    roof = decode_step_time(
        model, chip, n_chips, batch, seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype
    )
    chip, n = _cluster_chips(chip, n_chips)
    return expected_from_roofline(roof, model, chip, efficiency)


def expected_from_roofline(roof, model, chip, efficiency: EfficiencyModel | None = None) -> ExpectedDecodeStep:
    """The :class:`ExpectedDecodeStep` of a roofline step ``roof`` (a :class:`~tpu_notes.inference.DecodeStepTime`)
    of ``model`` on ``roof.n_chips`` chips of ``chip`` (a name or a Chip); what :func:`expected_decode_step` and
    ``decode_step_time`` use."""
    from .step import DecodeStepTime

    e = check_efficiency(efficiency)
    if not isinstance(roof, DecodeStepTime):
        raise TypeError(f"roof must be a DecodeStepTime from decode_step_time; got {type(roof).__name__}")
    c = machine(chip).chip
    if c is None:
        raise TypeError(
            "chip must be a chip name or a tpu_notes.hardware.Chip: a measured roofline has no efficiency figures"
        )
    n, batch = roof.n_chips, roof.batch
    kv, w = roof.kv_load / e.hbm, roof.weight_load / e.hbm
    F = (model.d_ff_expert or model.d_ff) if model.is_moe else model.d_ff
    f = roof.flops_time / e.fraction(c, batch, model.d_model, max(F / n, 1.0))
    comm = _all_reduces(model, c, n, batch, e)
    over = e.decode_overhead * model.n_layers
    total = kv + max(w, f) + comm + over
    parts = {"kv": kv, "weights": w, "compute": f, "collectives": comm, "overhead": over}
    return ExpectedDecodeStep(
        kv_load=kv,
        weight_load=w,
        flops_time=f,
        collectives=comm,
        overhead=over,
        total=total,
        bound=max(parts, key=parts.get),
        batch=batch,
        n_chips=n,
        efficiency=e.name,
    )


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
    ``cached_len`` come from a prefix cache (see the module docstring); the roofline is
    :func:`~tpu_notes.inference.prefill_time` at ``mfu=1``, whose ``expected`` is this at the default model."""
    e = check_efficiency(efficiency)
    c = machine(chip, compute_dtype).chip
    if c is None:
        raise TypeError("chip must be a chip name or a tpu_notes.hardware.Chip")
    m, n, T, B = model, n_chips, prompt_len, batch
    if cached_len >= T:
        raise ValueError(f"cached_len must be smaller than prompt_len ({T}); got {cached_len}")
    new = T - cached_len
    tokens = float(B * new)
    F = (m.d_ff_expert or m.d_ff) if m.is_moe else m.d_ff
    weight_flops = 2.0 * m.matmul_params_per_token() * tokens
    frac = e.fraction(c, tokens, m.d_model, max(F / n, 1.0))
    sustain = e.sustained_fraction(c)
    mm = weight_flops / (n * c.peak_flops(compute_dtype) * frac * sustain)
    keys = new * cached_len + new * (new + 1) / 2.0  # causal: new token i sees cached_len + i + 1 keys
    attn_flops = 2.0 * m.n_layers * m.n_heads * (m.qk_head_dim + m.v_dim) * keys * B
    attn = attn_flops / (n * c.peak_flops("bf16") * e.attention_fraction(c) * sustain)
    elem = tokens * m.n_layers * eff_mod.layer_elementwise_bytes(m, T) / n / (c.hbm_bw * e.hbm)
    weights = m.param_count() * dtype_bytes(weight_dtype) / n / (c.hbm_bw * e.hbm)
    return max(mm + attn + elem, weights) + _all_reduces(m, c, n, tokens, e)


__all__ = ["ExpectedDecodeStep", "expected_decode_step", "expected_from_roofline", "expected_prefill"]
