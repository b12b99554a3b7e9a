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
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from ..hardware import Chip, get_chip
from ..transformer import as_config
from ..units import canonical_dtype, check_positive, dtype_bytes, fmt

#: Dtype names the step-time functions take for weights and KV caches.
STORAGE_DTYPES = ("bf16", "fp32", "fp8", "int8", "int4")
#: Dtype names the matmuls can run in (the chip's peak for that dtype is used).
COMPUTE_DTYPES = ("bf16", "fp8", "int8")
#: Largest batch (sequences) and context (tokens) the functions accept: a typo must not mean 10**15 sequences.
MAX_BATCH = 2**24
MAX_CONTEXT = 2**26


@dataclass(frozen=True)
class Machine:
    """The three figures the step-time model needs, read off a chip or a measured roofline."""

    name: str              # e.g. "TPU v5e", or "fitted roofline"
    peak_flops: float      # FLOP/s of the matmuls in the compute dtype
    hbm_bw: float          # bytes/s of the memory the weights and caches stream from
    hbm_bytes: float       # bytes of that memory per chip (inf for a measured roofline)
    chip: Optional[Chip]   # the Chip, when there is one (prices, ICI, slices)


def machine(chip, compute_dtype: str = "bf16") -> Machine:
    """Resolve ``chip`` (a name, a :class:`~tpu_notes.hardware.Chip`, or a measured roofline) into a :class:`Machine`."""
    if isinstance(chip, (str, Chip)):
        c = get_chip(chip)
        return Machine(c.long_name, c.peak_flops(_compute(compute_dtype)), c.hbm_bw, c.hbm_bytes, c)
    peak, bw = getattr(chip, "peak_flops", None), getattr(chip, "bandwidth", None)
    if isinstance(peak, (int, float)) and isinstance(bw, (int, float)) and not isinstance(peak, bool):
        check_positive("chip.peak_flops", peak)
        check_positive("chip.bandwidth", bw)
        return Machine("fitted roofline", float(peak), float(bw), math.inf, None)
    raise TypeError("chip must be a chip name (e.g. 'v5e'), a tpu_notes.hardware.Chip, or a measured roofline "
                    f"with float peak_flops and bandwidth (tpu_notes.bench.FittedRoofline); got {type(chip).__name__}")


def _storage(name: str, argument: str) -> str:
    d = canonical_dtype(name, argument)
    if d not in STORAGE_DTYPES:
        raise ValueError(f"{argument} must be one of {list(STORAGE_DTYPES)}; got {name!r}")
    return d


def _compute(name: str) -> str:
    d = canonical_dtype(name, "compute_dtype")
    if d not in COMPUTE_DTYPES:
        raise ValueError(f"compute_dtype must be one of {list(COMPUTE_DTYPES)}; got {name!r}")
    return d


def _batch(batch) -> int:
    return check_positive("batch", batch, integer=True, maximum=MAX_BATCH)


def _context(seq_len, name: str = "seq_len") -> int:
    return check_positive(name, seq_len, integer=True, maximum=MAX_CONTEXT)


def _chips(n_chips) -> int:
    return check_positive("n_chips", n_chips, integer=True, maximum=2**20)


# ----------------------------------------------------------------------------------------------- what is read
def weight_params_read(model, batch: int = 1) -> float:
    """Parameters one generation step of ``batch`` sequences reads from memory.

    Every parameter but the input embedding (a lookup reads ``batch`` rows of it; a tied embedding is read whole by
    the unembedding). A mixture of experts reads only the experts the batch visits: with ``E`` experts and ``k`` per
    token, ``E·(1 − (1 − k/E)^B)`` of them per MoE layer on average (all of them once ``B`` is large).
    """
    c = as_config(model)
    B = _batch(batch)
    total = float(c.param_count())
    if not c.tied_embeddings:
        total -= c.vocab * c.d_model - min(B, c.vocab) * c.d_model
    if c.is_moe:
        E, k = c.n_experts, c.experts_per_token
        visited = E * (1.0 - (1.0 - k / E) ** B)
        total -= c.n_moe_layers * (E - visited) * c.expert_params()
    return total


def kv_bytes_per_token(model, kv_dtype: str = "bf16", *, local_window: Optional[int] = None,
                       local_fraction: float = 0.0, seq_len: Optional[int] = None) -> float:
    """Bytes of KV cache one token of context costs, averaged over layers.

    With local (sliding-window) attention on ``local_fraction`` of the layers, those layers keep only the last
    ``local_window`` tokens, so at context ``seq_len`` the average per token is
    ``kv · (1 − f + f · min(window, S)/S)``.
    """
    c = as_config(model)
    kv = c.kv_bytes_per_token(_storage(kv_dtype, "kv_dtype"))
    if local_window is None:
        if local_fraction:
            raise ValueError("local_fraction needs local_window (the sliding window, in tokens)")
        return kv
    window = check_positive("local_window", local_window, integer=True, maximum=MAX_CONTEXT)
    f = check_positive("local_fraction", local_fraction, allow_zero=True, maximum=1.0)
    S = _context(seq_len if seq_len is not None else window)
    return kv * (1.0 - f + f * min(window, S) / S)


# ----------------------------------------------------------------------------------------------- decode step
@dataclass(frozen=True)
class DecodeStepTime:
    """One generation step of ``batch`` sequences at context ``seq_len`` on ``n_chips`` chips, in seconds."""

    kv_load: float            # KV caches read from HBM, seconds
    weight_load: float        # weights read from HBM, seconds
    flops_time: float         # weight-matmul FLOPs at peak, seconds
    total: float              # kv_load + max(weight_load, flops_time), seconds
    bound: str                # "weights" (weight load), "compute" (FLOPs) or "kv" (the KV load is the largest part)
    batch: int                # sequences (= tokens) in the step
    seq_len: int              # tokens of context per sequence
    n_chips: int              # chips sharing the step
    weight_bytes: float       # bytes of weights read, all chips together
    kv_bytes: float           # bytes of KV cache read, all chips together
    flops: float              # weight-matmul FLOPs, all chips together
    memory_per_chip: float    # weights + KV caches resident per chip, bytes
    hbm_per_chip: float       # memory each chip has, bytes (inf for a measured roofline)
    machine: str              # what the rates came from

    @property
    def fits(self) -> bool:
        """True when weights and caches fit in the chips' memory."""
        return self.memory_per_chip <= self.hbm_per_chip

    @property
    def tokens_per_s(self) -> float:
        """Tokens generated per second by all chips together (one per sequence per step)."""
        return self.batch / self.total

    @property
    def tokens_per_s_per_chip(self) -> float:
        """Tokens per second per chip: the figure cost follows."""
        return self.tokens_per_s / self.n_chips

    def __repr__(self) -> str:
        return (f"DecodeStepTime(total={fmt(self.total, 's')}: kv={fmt(self.kv_load, 's')} + "
                f"max(weights={fmt(self.weight_load, 's')}, flops={fmt(self.flops_time, 's')}); "
                f"bound={self.bound}, batch={self.batch}, seq_len={self.seq_len}, n_chips={self.n_chips}, "
                f"memory/chip={fmt(self.memory_per_chip, 'B')})")


def step_time_from_counts(weight_bytes: float, kv_bytes: float, flops: float, chip, n_chips: int, batch: int,
                          seq_len: int, *, compute_dtype: str = "bf16",
                          resident_bytes: Optional[float] = None) -> DecodeStepTime:
    """The step-time formula on raw counts (all chips together): ``weight_bytes`` and ``kv_bytes`` read, weight
    ``flops`` done. ``resident_bytes`` (default ``weight_bytes + kv_bytes``) is what must stay in memory."""
    m = machine(chip, compute_dtype)
    n = _chips(n_chips)
    wb = check_positive("weight_bytes", weight_bytes, allow_zero=True)
    kb = check_positive("kv_bytes", kv_bytes, allow_zero=True)
    fl = check_positive("flops", flops, allow_zero=True)
    B, S = _batch(batch), _context(seq_len)
    resident = wb + kb if resident_bytes is None else check_positive("resident_bytes", resident_bytes)
    kv_t, w_t, f_t = kb / (n * m.hbm_bw), wb / (n * m.hbm_bw), fl / (n * m.peak_flops)
    total = kv_t + max(w_t, f_t)
    bound = "kv" if kv_t >= max(w_t, f_t) else ("compute" if f_t > w_t else "weights")
    return DecodeStepTime(kv_load=kv_t, weight_load=w_t, flops_time=f_t, total=total, bound=bound, batch=B,
                          seq_len=S, n_chips=n, weight_bytes=wb, kv_bytes=kb, flops=fl,
                          memory_per_chip=resident / n, hbm_per_chip=m.hbm_bytes, machine=m.name)


def _cluster_chips(chip, n_chips):
    """A :class:`~tpu_notes.gpu.GpuCluster` stands for its GPU and its GPU count (``n_chips`` None or equal)."""
    from ..gpu import GpuCluster

    if isinstance(chip, GpuCluster):
        if n_chips is not None and n_chips != chip.n_gpus:
            raise ValueError(f"n_chips ({n_chips!r}) must be None or the cluster's {chip.n_gpus} GPUs")
        return chip.chip, chip.n_gpus
    if n_chips is None:
        raise TypeError("n_chips must be a whole number of chips (None only with a tpu_notes.gpu.GpuCluster)")
    return chip, n_chips


def decode_step_time(model, chip, n_chips: int | None, batch: int, seq_len: int, *, weight_dtype: str = "bf16",
                     kv_dtype: str = "bf16", compute_dtype: str = "bf16", local_window: Optional[int] = None,
                     local_fraction: float = 0.0) -> DecodeStepTime:
    """Time of one generation step of ``model`` (a config or preset name): ``batch`` sequences, each with
    ``seq_len`` tokens of context, on ``n_chips`` chips (perfect sharding, no communication). ``chip`` may also be
    a :class:`~tpu_notes.gpu.GpuCluster` (Chapter 11): its GPU and its GPU count, with ``n_chips=None``.

    ``weight_dtype``/``kv_dtype`` set the bytes read (``"bf16"``, ``"int8"``, ``"int4"``...); ``compute_dtype``
    picks the chip's peak (int8 weights multiplied in bf16: ``compute_dtype="bf16"``). ``local_window`` and
    ``local_fraction`` model sliding-window attention on that share of layers (see :func:`kv_bytes_per_token`).
    Paged attention is the default here: the caches read are the ``seq_len`` tokens that exist, not a padded
    maximum; pass the padded length to see what padding costs.
    """
    c = as_config(model)
    chip, n_chips = _cluster_chips(chip, n_chips)
    wd, kd = _storage(weight_dtype, "weight_dtype"), _storage(kv_dtype, "kv_dtype")
    B, S = _batch(batch), _context(seq_len)
    kv = B * S * kv_bytes_per_token(c, kd, local_window=local_window, local_fraction=local_fraction, seq_len=S)
    wb = weight_params_read(c, B) * dtype_bytes(wd)
    flops = 2.0 * B * c.matmul_params_per_token()
    resident = c.param_count() * dtype_bytes(wd) + kv
    return step_time_from_counts(wb, kv, flops, chip, n_chips, B, S, compute_dtype=compute_dtype,
                                 resident_bytes=resident)


def critical_batch(model, chip, *, weight_dtype: str = "bf16", compute_dtype: str = "bf16") -> float:
    """Sequences per step above which the weight matmuls of a generation step are compute-bound:
    ``C / W_hbm × bytes per weight`` (240 in bf16 on v5e, 120 with int8 weights and bf16 math); a MoE multiplies
    it by ``E / k``."""
    c = as_config(model)
    m = machine(chip, compute_dtype)
    per_param = dtype_bytes(_storage(weight_dtype, "weight_dtype"))
    return m.peak_flops / m.hbm_bw * per_param / 2.0 * c.n_experts / c.experts_per_token


# ----------------------------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class ServingMemory:
    """What a generation server holds, all chips together, in bytes."""

    weights: float     # every parameter in the weight dtype
    kv_cache: float    # batch × seq_len tokens of KV cache
    total: float       # weights + kv_cache
    per_chip: float    # total / n_chips

    def __repr__(self) -> str:
        return (f"ServingMemory(weights={fmt(self.weights, 'B')}, kv_cache={fmt(self.kv_cache, 'B')}, "
                f"total={fmt(self.total, 'B')}, per_chip={fmt(self.per_chip, 'B')})")


def serving_memory(model, batch: int, seq_len: int, *, n_chips: int = 1, weight_dtype: str = "bf16",
                   kv_dtype: str = "bf16") -> ServingMemory:
    """Weights + KV caches of ``batch`` sequences of ``seq_len`` tokens (activations are negligible in
    generation and are left out)."""
    c = as_config(model)
    w = c.param_count() * dtype_bytes(_storage(weight_dtype, "weight_dtype"))
    kv = _batch(batch) * _context(seq_len) * c.kv_bytes_per_token(_storage(kv_dtype, "kv_dtype"))
    return ServingMemory(weights=w, kv_cache=kv, total=w + kv, per_chip=(w + kv) / _chips(n_chips))


# ----------------------------------------------------------------------------------------------- prefill
@dataclass(frozen=True)
class PrefillTime:
    """One prefill of ``batch`` prompts of ``prompt_len`` tokens, in seconds."""

    flops: float          # forward FLOPs (causal attention included), all chips together
    compute: float        # flops / (n_chips · peak · mfu), seconds
    weight_load: float    # the weights read once, seconds (a floor for very short prompts)
    total: float          # max(compute, weight_load), seconds
    tokens: int           # batch × prompt_len
    mfu: float            # the utilisation assumed

    def __repr__(self) -> str:
        return (f"PrefillTime(total={fmt(self.total, 's')}, compute={fmt(self.compute, 's')}, "
                f"weight_load={fmt(self.weight_load, 's')}, tokens={self.tokens:,}, mfu={self.mfu:.2f})")


def prefill_time(model, chip, n_chips: int, prompt_len: int, batch: int = 1, *, mfu: float = 0.5,
                 weight_dtype: str = "bf16", compute_dtype: str = "bf16", cached_len: int = 0) -> PrefillTime:
    """Prefill (the time to first token, less queueing) of ``batch`` prompts of ``prompt_len`` tokens at ``mfu``.

    FLOPs are the forward pass with causal attention; ``cached_len`` tokens of each prompt come from a prefix
    cache, so only the rest are computed (each still attends to the whole prompt).
    """
    c = as_config(model)
    m = machine(chip, compute_dtype)
    n = _chips(n_chips)
    T, B = _context(prompt_len, "prompt_len"), _batch(batch)
    cached = check_positive("cached_len", cached_len, integer=True, allow_zero=True)
    if cached >= T:
        raise ValueError(f"cached_len must be smaller than prompt_len ({T}); got {cached}")
    mfu = check_positive("mfu", mfu, maximum=1.0)
    new = T - cached
    per_token = 2.0 * c.matmul_params_per_token()
    # causal attention: new token i (at position cached + i) sees cached + i + 1 keys
    keys = new * cached + new * (new + 1) / 2.0
    attn = 2.0 * c.n_layers * c.n_heads * (c.qk_head_dim + c.v_dim) * keys
    flops = B * (new * per_token + attn)
    compute = flops / (n * m.peak_flops * mfu)
    w = weight_params_read(c, min(B * new, MAX_BATCH)) * dtype_bytes(_storage(weight_dtype, "weight_dtype"))
    w_t = w / (n * m.hbm_bw)
    return PrefillTime(flops=flops, compute=compute, weight_load=w_t, total=max(compute, w_t), tokens=B * T,
                       mfu=mfu)


__all__ = ["COMPUTE_DTYPES", "STORAGE_DTYPES", "DecodeStepTime", "Machine", "PrefillTime", "ServingMemory",
           "critical_batch", "decode_step_time", "kv_bytes_per_token", "machine", "prefill_time",
           "serving_memory", "step_time_from_counts", "weight_params_read"]
