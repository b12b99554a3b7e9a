"""Published, measured serving benchmarks with public configurations, and the model's prediction for each
(Chapter 8).

Each :class:`PublishedServing` records what its source states: hardware, chips, model, weight dtype, batch (or
concurrency), input and output lengths or the cache length, and one measured figure, either a **throughput** (output
tokens per second, all chips of the deployment together) or a **per-token latency** (the inter-token latency of one
sequence). What a source leaves out and we had to choose is said in ``notes``; the chapter prints it.

How a row is priced (:func:`predict`), all with Chapter 7's step-time model and one efficiency assumption:

- ``mode="static"``: a batch of ``batch`` requests of ``input_len`` prompt tokens each is prefilled together, then
  decoded for ``output_len`` steps. Time = prefill + ``output_len`` generation steps at the mean context
  ``input_len + output_len / 2`` (the KV load grows linearly, so the mean is exact). Throughput =
  ``batch · output_len / time``.
- ``mode="decode"``: generation steps alone at ``batch`` sequences and a context of ``cache_len`` tokens (an engine
  with a fixed-size cache reads all of it every step). Prefill is left out, so this is an upper bound on throughput.
- ``mode="latency"``: the per-token latency is one generation step at ``batch`` sequences and context
  ``input_len + output_len / 2``.

The efficiency ``e`` divides every roofline time (HBM and FLOP/s both reach ``e`` of their datasheet rates) and is
the prefill MFU; :data:`EFFICIENCY` is the value the chapter states. ``e = 1`` gives the pure roofline, which should
be an upper bound on every measured speed.

Sources (all read for this chapter; figures restated, not copied):

- ``jetstream-pt``: github.com/AI-Hypercomputer/jetstream-pytorch, ``benchmarks/summary.md`` (commit f636ff7):
  TPU v5e-8, JetStream's ``benchmark_serving.py`` over 2000 ShareGPT prompts, stated batch size, cache length 2048,
  max input 1024 and output 1024, "throughput (token/s)"; int8 rows quantise weights and KV cache
  (``--quantize_weights`` and ``--quantize_kv_cache`` take the same value in its run command).
- ``trtllm-0.5``: github.com/NVIDIA/TensorRT-LLM, ``docs/source/performance.md`` on branch release/0.5.0, "High
  Throughput" table, H100 FP8: batch, tensor parallelism, input and output length, "Throughput (out tok/s)".
- ``trtllm-h200``: github.com/NVIDIA/TensorRT-LLM, ``docs/source/blogs/H200launch.md`` (commit 1555478), "H200 FP8
  Max throughput": batch, TP, input and output length, "Throughput (out tok/s/GPU)", TensorRT-LLM v0.5.0.
- ``nim``: docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance, Llama-3.3-70b-instruct, NIM 1.8.0, 2 x H100
  80G, fp8, TP2: concurrency, TTFT, ITL (inter-token latency) and throughput at stated input/output lengths.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from ..hardware import get_chip
from ..runs import PublishedRecord, Reconciliation, check_rows, check_runs, check_under_roofline, median_ratio
from ..transformer import get_model
from ..units import Fraction, OneOf, Positive, PositiveFloat, checked, fmt
from .step import ComputeDType, StorageDType, decode_step_time, prefill_time

#: How a row is priced (see the module docstring).
MODES = ("static", "decode", "latency")

#: The one efficiency assumption of Chapter 8: HBM streams and matmuls both reach 80% of the datasheet rate, and a
#: prefill runs at 80% MFU. The matmul figure is Chapter 6's (measured maximum achievable matmul FLOP/s on H100: 80%
#: of peak); for HBM, Azure measured 92% of the datasheet bandwidth on GB200 (techcommunity.microsoft.com, "Azure's
#: ND GB200 v6 delivers record performance for inference workloads"); we round down to one figure for both.
EFFICIENCY = 0.8

#: Prompt, output or cache length of one benchmark row, tokens.
_Len = Annotated[int, Positive(integer=True, maximum=2**22)]

#: Llama 2 7B and 70B: the presets ``"llama2-7b"`` and ``"llama2-70b"`` of :mod:`tpu_notes.transformer` (these names
#: are kept as aliases).
LLAMA2_7B = get_model("llama2-7b")
LLAMA2_70B = get_model("llama2-70b")


@dataclass(frozen=True)
class PublishedServing(PublishedRecord):
    """One measured serving benchmark and its configuration (what the source states; ``notes`` say what is
    assumed). ``name``, ``source`` and ``model`` come first (:class:`~tpu_notes.runs.PublishedRecord`); a benchmark
    whose measured figure beats the roofline by more than :data:`~tpu_notes.runs.ROOFLINE_TOLERANCE` is refused."""

    chip: str  # chip name in tpu_notes.hardware
    n_chips: Annotated[int, Positive(integer=True, maximum=2**16)]  # chips of one model replica (TP), as stated
    batch: Annotated[int, Positive(integer=True, maximum=2**20)]  # batch size or concurrency, sequences
    mode: Annotated[str, OneOf(MODES)]  # "static", "decode" or "latency" (how it is priced)
    weight_dtype: StorageDType = "bf16"  # as stated
    kv_dtype: StorageDType = "bf16"  # as stated, or assumed (then notes say so)
    compute_dtype: ComputeDType = "bf16"  # the matmul dtype whose peak applies
    input_len: _Len | None = None  # prompt tokens per request (static, latency)
    output_len: _Len | None = None  # generated tokens per request (static, latency)
    cache_len: _Len | None = None  # tokens of KV cache read per step (decode)
    reported_tokens_per_s: PositiveFloat | None = None  # output tokens/s, all n_chips together (static, decode)
    reported_latency_s: Annotated[float, Positive(maximum=10.0)] | None = None  # s per output token (latency)
    group: str = ""  # one of runs.GROUPS (who ran it, on what)
    notes: str = ""  # mapping choices and assumptions

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.chip, str):
            raise TypeError(f"chip must be a chip name such as 'v5e' or 'h100'; got {type(self.chip).__name__}")
        get_chip(self.chip)
        mode = self.mode
        if mode in ("static", "latency") and (self.input_len is None or self.output_len is None):
            raise ValueError(f"mode={mode!r} needs input_len and output_len (tokens per request)")
        if mode == "decode" and self.cache_len is None:
            raise ValueError("mode='decode' needs cache_len (the KV tokens read per step)")
        if mode == "latency" and (self.reported_latency_s is None or self.reported_tokens_per_s is not None):
            raise ValueError("mode='latency' takes reported_latency_s (seconds per token) and no reported_tokens_per_s")
        if mode != "latency" and (self.reported_tokens_per_s is None or self.reported_latency_s is not None):
            raise ValueError(f"mode={mode!r} takes reported_tokens_per_s (output tokens/s) and no reported_latency_s")
        check_under_roofline(self.measured_field, predict(self).ratio)

    @property
    def measured_field(self) -> str:
        """The field that holds the measured figure."""
        return "reported_latency_s" if self.mode == "latency" else "reported_tokens_per_s"

    @property
    def context(self) -> int:
        """Tokens of context of the priced generation step: the cache length, or prompt + half the output."""
        if self.mode == "decode":
            return self.cache_len
        return self.input_len + self.output_len // 2

    @property
    def metric(self) -> str:
        """``"tokens/s/chip"`` for throughput rows, ``"s/token"`` for latency rows."""
        return "s/token" if self.mode == "latency" else "tokens/s/chip"

    @property
    def reported(self) -> float:
        """The measured figure in :attr:`metric` units (throughput divided by the chips)."""
        if self.mode == "latency":
            return self.reported_latency_s
        return self.reported_tokens_per_s / self.n_chips


@dataclass(frozen=True)
class ServingReconciliation(Reconciliation):
    """A published serving benchmark beside the model's prediction for its configuration: ``predicted`` and
    ``reported`` are in ``run.metric`` units (tokens/s per chip, or seconds per token), ``ratio`` is achieved speed
    / modelled speed (< 1: slower than the model)."""

    step_s: float  # the priced generation step, seconds (at the efficiency)
    prefill_s: float  # the priced prefill of the whole batch, seconds (0 when not priced)
    bound: str  # what bounds the step: "weights", "compute" or "kv"
    fits: bool  # weights and caches fit the chips' memory

    def __repr__(self) -> str:
        unit = "s" if self.run.metric == "s/token" else "tokens/s"
        return (
            f"ServingReconciliation({self.run.name}: reported {fmt(self.reported, unit)}, predicted "
            f"{fmt(self.predicted, unit)}, ratio {self.ratio:.2f})"
        )


@checked
def predict(run: PublishedServing, efficiency: Fraction = 1.0) -> ServingReconciliation:
    """Price ``run`` with Chapter 7's :func:`~tpu_notes.inference.decode_step_time` and
    :func:`~tpu_notes.inference.prefill_time` (see the module docstring for the three modes) at ``efficiency``
    of the datasheet rates, and compare with what was measured."""
    if not isinstance(run, PublishedServing):
        raise TypeError(f"run must be a PublishedServing; got {type(run).__name__}")
    eff = efficiency
    step = decode_step_time(
        run.model,
        run.chip,
        run.n_chips,
        run.batch,
        run.context,
        weight_dtype=run.weight_dtype,
        kv_dtype=run.kv_dtype,
        compute_dtype=run.compute_dtype,
    )
    step_s = step.total / eff
    prefill_s = 0.0
    if run.mode == "latency":
        predicted = step_s
        ratio = predicted / run.reported
    else:
        if run.mode == "static":
            prefill_s = prefill_time(
                run.model,
                run.chip,
                run.n_chips,
                run.input_len,
                run.batch,
                mfu=eff,
                weight_dtype=run.weight_dtype,
                compute_dtype=run.compute_dtype,
            ).total
            tokens = run.batch * run.output_len
            predicted = tokens / (prefill_s + run.output_len * step_s) / run.n_chips
        else:
            predicted = run.batch / step_s / run.n_chips
        ratio = run.reported / predicted
    return ServingReconciliation(
        run=run,
        predicted=predicted,
        reported=run.reported,
        ratio=ratio,
        step_s=step_s,
        prefill_s=prefill_s,
        bound=step.bound,
        fits=step.fits,
    )


_JP = "jetstream-pt, benchmarks/summary.md"
_JP_NOTE = (
    "ShareGPT prompts (lengths not stated, at most 1024 in and 1024 out), continuous batching, prefill "
    "interleaved: priced as generation steps alone at the stated batch, reading the whole 2048-token cache "
    "each step (our reading of a fixed-size cache); an upper bound. Output tokens/s assumed (the table "
    "says 'throughput (token/s)')."
)
_TRT = "trtllm-0.5, performance.md, H100 FP8"
_TRT_NOTE = (
    "'LLaMA 70B' of TensorRT-LLM 0.5 taken as Llama 2 70B; throughput read as all GPUs of the TP group "
    "together (the table gives 'out tok/s'); KV dtype not stated: fp8 assumed."
)
_H200 = "trtllm-h200, H200launch.md"
_H200_NOTE = "Per-GPU throughput as stated; KV dtype not stated: fp8 assumed. 'llama_70b' taken as Llama 2 70B."
_NIM = "nim, Llama-3.3-70b-instruct 1.8.0"
_NIM_NOTE = (
    "ITL at the stated concurrency (taken as the decode batch); fp8 KV cache assumed (not stated). At high "
    "concurrency prefills of new requests interleave with generation, which the step alone leaves out."
)

RUNS: tuple[PublishedServing, ...] = (
    PublishedServing(
        "Llama 2 7B bf16, v5e-8",
        _JP,
        LLAMA2_7B,
        "v5e",
        8,
        96,
        "decode",
        cache_len=2048,
        reported_tokens_per_s=3663,
        group="tpu-serving",
        notes=_JP_NOTE,
    ),
    PublishedServing(
        "Llama 2 7B int8, v5e-8",
        _JP,
        LLAMA2_7B,
        "v5e",
        8,
        96,
        "decode",
        weight_dtype="int8",
        kv_dtype="int8",
        cache_len=2048,
        reported_tokens_per_s=4783,
        group="tpu-serving",
        notes=_JP_NOTE,
    ),
    PublishedServing(
        "Llama 2 13B bf16, v5e-8",
        _JP,
        "llama2-13b",
        "v5e",
        8,
        48,
        "decode",
        cache_len=2048,
        reported_tokens_per_s=2056,
        group="tpu-serving",
        notes=_JP_NOTE,
    ),
    PublishedServing(
        "Llama 2 13B int8, v5e-8",
        _JP,
        "llama2-13b",
        "v5e",
        8,
        96,
        "decode",
        weight_dtype="int8",
        kv_dtype="int8",
        cache_len=2048,
        reported_tokens_per_s=3458,
        group="tpu-serving",
        notes=_JP_NOTE,
    ),
    PublishedServing(
        "Llama 3 8B bf16, v5e-8",
        _JP,
        "llama3-8b",
        "v5e",
        8,
        128,
        "decode",
        cache_len=2048,
        reported_tokens_per_s=8249,
        group="tpu-serving",
        notes=_JP_NOTE,
    ),
    PublishedServing(
        "Llama 3 8B int8, v5e-8",
        _JP,
        "llama3-8b",
        "v5e",
        8,
        256,
        "decode",
        weight_dtype="int8",
        kv_dtype="int8",
        cache_len=2048,
        reported_tokens_per_s=10873,
        group="tpu-serving",
        notes=_JP_NOTE,
    ),
    PublishedServing(
        "Llama 2 70B fp8 128/128, 4 H100",
        _TRT,
        LLAMA2_70B,
        "h100",
        4,
        64,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=3317,
        group="gpu-serving",
        notes=_TRT_NOTE,
    ),
    PublishedServing(
        "Llama 2 70B fp8 128/2048, 4 H100",
        _TRT,
        LLAMA2_70B,
        "h100",
        4,
        64,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=2048,
        reported_tokens_per_s=2616,
        group="gpu-serving",
        notes=_TRT_NOTE,
    ),
    PublishedServing(
        "Llama 2 70B fp8 2048/128, 4 H100",
        _TRT,
        LLAMA2_70B,
        "h100",
        4,
        64,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=2048,
        output_len=128,
        reported_tokens_per_s=843,
        group="gpu-serving",
        notes=_TRT_NOTE,
    ),
    PublishedServing(
        "Llama 2 70B fp8 2048/2048, 4 H100",
        _TRT,
        LLAMA2_70B,
        "h100",
        4,
        64,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=2048,
        output_len=2048,
        reported_tokens_per_s=1583,
        group="gpu-serving",
        notes=_TRT_NOTE,
    ),
    PublishedServing(
        "Llama 7B fp8 128/128, 1 H100",
        _TRT,
        LLAMA2_7B,
        "h100",
        1,
        64,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=9193,
        group="gpu-serving",
        notes="'LLaMA 7B' priced with Llama 2 7B's shapes (the same layers); KV dtype assumed fp8.",
    ),
    PublishedServing(
        "Llama 2 70B fp8 128/128, 1 H200",
        _H200,
        LLAMA2_70B,
        "h200",
        1,
        512,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=3014,
        group="gpu-serving",
        notes=_H200_NOTE,
    ),
    PublishedServing(
        "Llama 2 70B fp8 2048/128, 1 H200",
        _H200,
        LLAMA2_70B,
        "h200",
        1,
        32,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=2048,
        output_len=128,
        reported_tokens_per_s=303,
        group="gpu-serving",
        notes=_H200_NOTE,
    ),
    PublishedServing(
        "Llama 2 13B fp8 128/2048, 1 H200",
        _H200,
        "llama2-13b",
        "h200",
        1,
        128,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=2048,
        reported_tokens_per_s=4750,
        group="gpu-serving",
        notes=_H200_NOTE,
    ),
    PublishedServing(
        "Llama 3.3 70B fp8, 2 H100, c=1 5000/500",
        _NIM,
        "llama3-70b",
        "h100",
        2,
        1,
        "latency",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=5000,
        output_len=500,
        reported_latency_s=18.58e-3,
        group="gpu-serving",
        notes=_NIM_NOTE,
    ),
    PublishedServing(
        "Llama 3.3 70B fp8, 2 H100, c=1 500/2000",
        _NIM,
        "llama3-70b",
        "h100",
        2,
        1,
        "latency",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=500,
        output_len=2000,
        reported_latency_s=18.91e-3,
        group="gpu-serving",
        notes=_NIM_NOTE,
    ),
    PublishedServing(
        "Llama 3.3 70B fp8, 2 H100, c=50 5000/500",
        _NIM,
        "llama3-70b",
        "h100",
        2,
        50,
        "latency",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=5000,
        output_len=500,
        reported_latency_s=59.73e-3,
        group="gpu-serving",
        notes=_NIM_NOTE,
    ),
)


@checked
def reconcile(runs: Sequence[PublishedServing] = RUNS, efficiency: Fraction = 1.0) -> list[ServingReconciliation]:
    """:func:`predict` for every run."""
    return [predict(r, efficiency) for r in check_runs(runs, PublishedServing)]


def fitted_efficiency(runs: Sequence[PublishedServing] = RUNS) -> float:
    """The median of achieved / roofline speed over ``runs``: the efficiency that would make the typical run come
    out exact (what the chapter compares its stated assumption with). Exact for latency and decode rows; for static
    rows the prefill MFU moves too, so this is a summary, not a fit."""
    return median_ratio(reconcile(runs, 1.0))


def format_table(rows: Sequence[ServingReconciliation]) -> str:
    """One line per run: the source key, reported and predicted figure, their ratio and the step's bound."""
    lines = [f"{'run':40s} {'source':12s} {'reported':>10} {'predicted':>10} {'ratio':>5}  bound"]
    for r in check_rows(rows, ServingReconciliation):
        if r.run.metric == "s/token":
            rep, pre = f"{r.reported * 1e3:7.1f} ms", f"{r.predicted * 1e3:7.1f} ms"
        else:
            rep, pre = f"{r.reported:10,.0f}", f"{r.predicted:10,.0f}"
        lines.append(
            f"{r.run.name:40.40s} {r.run.source.split(',')[0]:12.12s} {rep:>10} {pre:>10} {r.ratio:5.2f}  {r.bound}"
        )
    return "\n".join(lines)


__all__ = [
    "EFFICIENCY",
    "LLAMA2_70B",
    "LLAMA2_7B",
    "MODES",
    "RUNS",
    "PublishedServing",
    "ServingReconciliation",
    "fitted_efficiency",
    "format_table",
    "predict",
    "reconcile",
]
