"""One generation step and one prefill, timed by the roofline (Chapter 7).

A generation (decode) step reads every weight once and every sequence's KV cache once, and does ``2 ×`` the active
matmul parameters in FLOPs per token. On ``n`` chips that share the work perfectly:

    step = KV load + max(weight load, FLOPs)
         = B·S·kv_bytes / (n·W_hbm) + max(weight_bytes / (n·W_hbm), 2·B·P_active / (n·C))

The attention term never hides under the FLOPs (its intensity is about ``G = N/K`` FLOPs per byte whatever the
batch); the weight matmuls become compute-bound once the batch passes the critical batch ``C / W_hbm`` (times the
weight bytes per parameter). Dot-product attention FLOPs are left out of the ``max``: they run at the KV load's
pace. Weight bytes are the matmul weights actually read per step: every parameter but the input embedding (a
lookup reads only ``B`` rows of it), and for a mixture of experts only the experts the batch is expected to visit.

A prefill of ``T`` tokens is training-like: ``T × flops_per_token`` at a stated MFU, or the weight load if that is
longer.

``chip`` is a chip name, a :class:`~tpu_notes.hardware.Chip`, or a measured roofline (anything with float
attributes ``peak_flops`` and ``bandwidth``, such as :class:`tpu_notes.bench.FittedRoofline`): the last lets a
chapter hold a CPU measurement against the same formula. Everything here is plain Python (no JAX).

This is a *view* of the one serving step model, :mod:`tpu_notes.inference.engine`, not a second model: the formula above
is the engine's roofline with one device and no prefill (``Deployment.step(...).roofline`` on one chip is
:func:`decode_step_time`'s ``total`` exactly, a test holds them together), and each result's ``expected`` is the
engine's step (:mod:`tpu_notes.inference.expected`). The counts it reads
(:func:`~tpu_notes.inference.formulas.weight_params_read`, :func:`~tpu_notes.inference.formulas.kv_bytes_per_token`,
:func:`~tpu_notes.inference.formulas.machine`, the argument kinds) live in :mod:`tpu_notes.inference.formulas`, below
the engine, and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

from .. import rules
from ..gpu import GpuCluster
from ..hardware import Chip
from ..transformer import Model
from ..units import Fraction, NonNegativeFloat, Positive, PositiveFloat, Range, checked, dtype_bytes, fmt
from .expected import expected_decode_step, expected_prefill
from .formulas import (  # noqa: F401  (re-exported: tpu_notes.inference.step.X is where chapters import them)
    COMPUTE_DTYPES,
    MAX_BATCH,
    MAX_CHIPS,
    MAX_CONTEXT,
    STORAGE_DTYPES,
    Batch,
    Chips,
    ComputeDType,
    Context,
    Machine,
    StorageDType,
    _with_memory,
    kv_bytes_per_token,
    machine,
    weight_params_read,
)


# ----------------------------------------------------------------------------------------------- decode step
@dataclass(frozen=True)
class DecodeStepTime:
    """One generation step of ``batch`` sequences at context ``seq_len`` on ``n_chips`` chips, in seconds."""

    kv_load: float  # KV caches read from HBM, seconds
    weight_load: float  # weights read from HBM, seconds
    flops_time: float  # weight-matmul FLOPs at peak, seconds
    total: float  # kv_load + max(weight_load, flops_time), seconds
    bound: str  # the largest part: "kv" (the KV load), else "weights" or "compute" (see matmul_bound)
    batch: int  # sequences (= tokens) in the step
    seq_len: int  # tokens of context per sequence
    n_chips: int  # chips sharing the step
    weight_bytes: float  # bytes of weights read, all chips together
    kv_bytes: float  # bytes of KV cache read, all chips together
    flops: float  # weight-matmul FLOPs, all chips together
    memory_per_chip: float  # weights + KV caches resident per chip, bytes
    hbm_per_chip: float  # memory each chip has, bytes (inf for a measured roofline)
    machine: str  # what the rates came from
    expected: object = None  # the same step at tpu_notes.efficiency.DEFAULT's rates (an ExpectedDecodeStep), a forecast

    @property
    def fits(self) -> bool:
        """True when weights and caches fit in the chips' memory."""
        return self.memory_per_chip <= self.hbm_per_chip

    @property
    def matmul_bound(self) -> str:
        """What bounds the weight matmuls, the ``max`` term: ``"compute"`` (FLOPs outlast the weight reads) or
        ``"weights"``. ``bound`` names the largest part of the whole step, which may be the KV load while the
        matmuls are compute-bound (Llama 3 70B in int4 at batch 138 on 8 v5e chips: KV 14 ms, FLOPs 12 ms,
        weights 5 ms)."""
        return "compute" if self.flops_time > self.weight_load else "weights"

    @property
    def tokens_per_s(self) -> float:
        """Tokens generated per second by all chips together (one per sequence per step)."""
        return self.batch / self.total

    @property
    def tokens_per_s_per_chip(self) -> float:
        """Tokens per second per chip: the figure cost follows."""
        return self.tokens_per_s / self.n_chips

    def __repr__(self) -> str:
        return (
            f"DecodeStepTime(total={fmt(self.total, 's')}: kv={fmt(self.kv_load, 's')} + "
            f"max(weights={fmt(self.weight_load, 's')}, flops={fmt(self.flops_time, 's')}); "
            f"bound={self.bound} (matmuls {self.matmul_bound}-bound), batch={self.batch}, seq_len={self.seq_len}, "
            f"n_chips={self.n_chips}, "
            f"memory/chip={fmt(self.memory_per_chip, 'B')}"
            + (f"; expected total={fmt(self.expected.total, 's')}" if self.expected is not None else "")
            + ")"
        )


def _decode_parts(m: Machine, n: int, weight_bytes: float, kv_bytes: float, flops: float):
    """The one generation-step formula: ``(kv_load, weight_load, flops_time, total)`` in seconds, with
    ``total = kv_load + max(weight_load, flops_time)`` (counts are all chips together, shared by ``n``)."""
    kv_t, w_t, f_t = kv_bytes / (n * m.hbm_bw), weight_bytes / (n * m.hbm_bw), flops / (n * m.peak_flops)
    return kv_t, w_t, f_t, kv_t + max(w_t, f_t)


@checked
def step_time_from_counts(
    weight_bytes: NonNegativeFloat,
    kv_bytes: NonNegativeFloat,
    flops: NonNegativeFloat,
    chip,
    n_chips: Chips,
    batch: Batch,
    seq_len: Context,
    *,
    compute_dtype: ComputeDType = "bf16",
    resident_bytes: PositiveFloat | None = None,
) -> DecodeStepTime:
    """The step-time formula on raw counts (all chips together): ``weight_bytes`` and ``kv_bytes`` read, weight
    ``flops`` done. ``resident_bytes`` (default ``weight_bytes + kv_bytes``) is what must stay in memory."""
    m = machine(chip, compute_dtype)
    n, wb, kb, fl, B, S = n_chips, weight_bytes, kv_bytes, flops, batch, seq_len
    resident = wb + kb if resident_bytes is None else resident_bytes
    kv_t, w_t, f_t, total = _decode_parts(m, n, wb, kb, fl)
    bound = "kv" if kv_t >= max(w_t, f_t) else ("compute" if f_t > w_t else "weights")
    return DecodeStepTime(
        kv_load=kv_t,
        weight_load=w_t,
        flops_time=f_t,
        total=total,
        bound=bound,
        batch=B,
        seq_len=S,
        n_chips=n,
        weight_bytes=wb,
        kv_bytes=kb,
        flops=fl,
        memory_per_chip=resident / n,
        hbm_per_chip=m.hbm_bytes,
        machine=m.name,
    )


def _cluster_chips(chip, n_chips):
    """A :class:`~tpu_notes.gpu.GpuCluster` stands for its GPU and its GPU count (``n_chips`` None or equal)."""
    if isinstance(chip, GpuCluster):
        if n_chips is not None and n_chips != chip.n_gpus:
            raise ValueError(f"n_chips ({n_chips!r}) must be None or the cluster's {chip.n_gpus} GPUs")
        return chip.chip, chip.n_gpus
    if n_chips is None:
        raise TypeError("n_chips must be a whole number of chips (None only with a tpu_notes.gpu.GpuCluster)")
    return chip, n_chips


def _is_cluster(x) -> bool:
    return isinstance(x, GpuCluster)


@checked
def decode_step_time(
    model: Model,
    chip,
    n_chips: Chips | None,
    batch: Batch,
    seq_len: Context,
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    local_window: Context | None = None,
    local_fraction: Annotated[float, Range(0.0, 1.0)] = 0.0,
) -> DecodeStepTime:
    """Time of one generation step of ``model`` (a config or preset name): ``batch`` sequences, each with
    ``seq_len`` tokens of context, on ``n_chips`` chips (perfect sharding, no communication). ``chip`` may also be
    a :class:`~tpu_notes.gpu.GpuCluster` (Chapter 11): its GPU and its GPU count, with ``n_chips=None``.

    ``weight_dtype``/``kv_dtype`` set the bytes read (``"bf16"``, ``"int8"``, ``"int4"``...); ``compute_dtype``
    picks the chip's peak (int8 weights multiplied in bf16: ``compute_dtype="bf16"``). ``local_window`` and
    ``local_fraction`` model sliding-window attention on that share of layers (see
    :func:`~tpu_notes.inference.formulas.kv_bytes_per_token`). Paged attention is the default here: the caches read
    are the ``seq_len`` tokens that exist, not a padded maximum; pass the padded length to see what padding costs.

    The result is the roofline: the one serving step model's roofline (``Deployment.step(...).roofline``,
    :mod:`tpu_notes.inference.engine`) with one device and no prefill, exactly, its three parts named as Chapter 7
    names them; on ``n`` chips it is the engine's roofline less the collectives (perfect sharding). Its
    ``expected`` is the same step at the rates of
    :data:`tpu_notes.efficiency.DEFAULT` (:func:`~tpu_notes.inference.expected_decode_step` takes another model),
    None for a measured roofline or when a figure it needs is missing (e.g. no NVLink figure for a PCIe GPU's
    tensor parallelism: :func:`~tpu_notes.inference.expected_decode_step` raises and names it).
    """
    c = model
    system = chip
    chip, n_chips = _cluster_chips(chip, n_chips)
    wd, kd, B, S = weight_dtype, kv_dtype, batch, seq_len
    kv = B * S * kv_bytes_per_token(c, kd, local_window=local_window, local_fraction=local_fraction, seq_len=S)
    wb = weight_params_read(c, B) * dtype_bytes(wd)
    flops = 2.0 * B * c.matmul_params_per_token()
    resident = c.param_count() * dtype_bytes(wd) + kv
    roof = step_time_from_counts(
        wb, kv, flops, chip, n_chips, B, S, compute_dtype=compute_dtype, resident_bytes=resident
    )
    if not isinstance(system, (str, Chip)) and not _is_cluster(system):  # a measured roofline: no efficiency figures
        return roof
    try:
        exp = expected_decode_step(
            c,
            system,
            None if _is_cluster(system) else n_chips,
            B,
            S,
            weight_dtype=wd,
            kv_dtype=kd,
            compute_dtype=compute_dtype,
            local_window=local_window,
            local_fraction=local_fraction,
        )
    except ValueError:  # a figure the expected step needs is missing: expected_decode_step names it
        return roof
    return replace(roof, expected=exp)


#: Largest batch a :class:`DecodeStepModel` precomputes its weight reads for (the serving simulator's batch cap).
MAX_MODEL_BATCH = 4096


@dataclass(frozen=True)
class DecodeStepModel:
    """:func:`decode_step_time`'s formula for one deployment, ready to evaluate once per step (the serving
    simulator's clock): the weights read at each batch up to :attr:`max_batch` precomputed, KV bytes and FLOPs per
    unit. :meth:`seconds` goes through the same formula as :func:`step_time_from_counts`."""

    machine: Machine  # the rates (see :func:`machine`)
    n_chips: int  # chips sharing each step
    weight_bytes: tuple  # bytes of weights one step reads, all chips together; index = batch (0..max)
    kv_bytes_per_token: float  # bytes of KV cache one token of context costs
    flops_per_sequence: float  # weight-matmul FLOPs per sequence per step

    @property
    def max_batch(self) -> int:
        """Largest batch :meth:`seconds` takes."""
        return len(self.weight_bytes) - 1

    def seconds(self, batch: int, kv_tokens: int) -> float:
        """Seconds of one generation step of ``batch`` sequences whose contexts add up to ``kv_tokens`` tokens
        (paged attention: the caches that exist are read)."""
        if type(batch) is not int or not 1 <= batch <= self.max_batch:
            raise ValueError(f"batch must be a whole number in [1, {self.max_batch}]; got {batch!r}")
        if type(kv_tokens) is not int or not 0 <= kv_tokens <= MAX_BATCH * MAX_CONTEXT:
            raise ValueError(f"kv_tokens must be a whole number in [0, {MAX_BATCH * MAX_CONTEXT}]; got {kv_tokens!r}")
        return _decode_parts(
            self.machine,
            self.n_chips,
            self.weight_bytes[batch],
            kv_tokens * self.kv_bytes_per_token,
            self.flops_per_sequence * batch,
        )[3]


@checked
def decode_step_model(
    model: Model,
    chip,
    n_chips: Chips,
    max_batch: Annotated[int, Positive(integer=True, maximum=MAX_MODEL_BATCH)],
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
) -> DecodeStepModel:
    """A :class:`DecodeStepModel` of ``model`` on ``n_chips`` chips for batches up to ``max_batch`` (at most
    :data:`MAX_MODEL_BATCH`); the arguments mean what they mean for :func:`decode_step_time`."""
    c = model
    m = machine(chip, compute_dtype)
    per_param = dtype_bytes(weight_dtype)
    weights = (0.0,) + tuple(weight_params_read(c, b) * per_param for b in range(1, max_batch + 1))
    return DecodeStepModel(
        machine=m,
        n_chips=n_chips,
        weight_bytes=weights,
        kv_bytes_per_token=c.kv_bytes_per_token(kv_dtype),
        flops_per_sequence=2.0 * c.matmul_params_per_token(),
    )


@checked
def critical_batch(
    model: Model, chip, *, weight_dtype: StorageDType = "bf16", compute_dtype: ComputeDType = "bf16"
) -> float:
    """Sequences per step above which the weight matmuls of a generation step are compute-bound:
    ``C / W_hbm × bytes per weight`` (240 in bf16 on v5e, 120 with int8 weights and bf16 math); a MoE multiplies
    it by ``E / k``."""
    c = model
    m = machine(chip, compute_dtype)
    per_param = dtype_bytes(weight_dtype)
    return m.peak_flops / m.hbm_bw * per_param / 2.0 * c.n_experts / c.experts_per_token


# ----------------------------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class ServingMemory:
    """What a generation server holds, all chips together, in bytes."""

    weights: float  # every parameter in the weight dtype
    kv_cache: float  # batch × seq_len tokens of KV cache
    total: float  # weights + kv_cache
    per_chip: float  # total / n_chips

    def __repr__(self) -> str:
        return (
            f"ServingMemory(weights={fmt(self.weights, 'B')}, kv_cache={fmt(self.kv_cache, 'B')}, "
            f"total={fmt(self.total, 'B')}, per_chip={fmt(self.per_chip, 'B')})"
        )


@checked
def serving_memory(
    model: Model,
    batch: Batch,
    seq_len: Context,
    *,
    n_chips: Chips = 1,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
) -> ServingMemory:
    """Weights + KV caches of ``batch`` sequences of ``seq_len`` tokens (activations are negligible in
    generation and are left out)."""
    c = model
    w = c.param_count() * dtype_bytes(weight_dtype)
    kv = batch * seq_len * c.kv_bytes_per_token(kv_dtype)
    return ServingMemory(weights=w, kv_cache=kv, total=w + kv, per_chip=(w + kv) / n_chips)


# ----------------------------------------------------------------------------------------------- prefill
@dataclass(frozen=True)
class PrefillTime:
    """One prefill of ``batch`` prompts of ``prompt_len`` tokens, in seconds."""

    flops: float  # forward FLOPs (causal attention included), all chips together
    compute: float  # flops / (n_chips · peak · mfu), seconds
    weight_load: float  # the weights read once, seconds (a floor for very short prompts)
    total: float  # max(compute, weight_load), seconds
    tokens: int  # batch × prompt_len
    mfu: float  # the utilisation assumed
    expected: float | None = None  # seconds at efficiency.DEFAULT (None: a measured roofline, or a figure missing)

    def __repr__(self) -> str:
        return (
            f"PrefillTime(total={fmt(self.total, 's')}, compute={fmt(self.compute, 's')}, "
            f"weight_load={fmt(self.weight_load, 's')}, tokens={self.tokens:,}, mfu={self.mfu:.2f}"
            + (f"; expected {fmt(self.expected, 's')}" if self.expected is not None else "")
            + ")"
        )


@checked
def prefill_time(
    model: Model,
    chip,
    n_chips: Chips,
    prompt_len: Context,
    batch: Batch = 1,
    *,
    mfu: Fraction = 0.5,
    weight_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    cached_len: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_CONTEXT)] = 0,
) -> PrefillTime:
    """Prefill (the time to first token, less queueing) of ``batch`` prompts of ``prompt_len`` tokens at ``mfu``.

    FLOPs are the forward pass with causal attention; ``cached_len`` tokens of each prompt come from a prefix
    cache, so only the rest are computed (each still attends to the whole prompt).
    """
    c = model
    m = machine(chip, compute_dtype)
    n, T, B, cached = n_chips, prompt_len, batch, cached_len
    if cached >= T:
        raise ValueError(f"cached_len must be smaller than prompt_len ({T}); got {cached}")
    new = T - cached
    per_token = 2.0 * c.matmul_params_per_token()
    # causal attention: new token i (at position cached + i) sees cached + i + 1 keys
    keys = new * cached + new * (new + 1) / 2.0
    attn = 2.0 * c.n_layers * c.n_heads * (c.qk_head_dim + c.v_dim) * keys
    flops = B * (new * per_token + attn)
    compute = rules.finite_result(flops / (n * m.peak_flops * mfu), argument="mfu", what="the prefill's compute time")
    w = weight_params_read(c, min(B * new, MAX_BATCH)) * dtype_bytes(weight_dtype)
    w_t = w / (n * m.hbm_bw)
    expected = None
    if m.chip is not None:
        try:
            expected = expected_prefill(
                c, chip, n, T, B, weight_dtype=weight_dtype, compute_dtype=compute_dtype, cached_len=cached
            )
        except ValueError:  # a figure the expected prefill needs is missing: expected_prefill names it
            expected = None
    return PrefillTime(
        flops=flops,
        compute=compute,
        weight_load=w_t,
        total=max(compute, w_t),
        tokens=B * T,
        mfu=mfu,
        expected=expected,
    )


__all__ = [
    "MAX_MODEL_BATCH",
    "DecodeStepModel",
    "DecodeStepTime",
    "PrefillTime",
    "ServingMemory",
    "critical_batch",
    "decode_step_model",
    "decode_step_time",
    "prefill_time",
    "serving_memory",
    "step_time_from_counts",
]
