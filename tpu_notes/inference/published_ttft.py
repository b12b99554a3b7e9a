"""Published first-token latencies (TTFT) and the engine's prediction for each, reported beside the per-token
latency and throughput rows of :mod:`tpu_notes.inference.published` (Chapter 8).

Prefill is most of every serving bill the book prints, so the time to the first token is checked against
measurement as the decode side is. Each :class:`PublishedTTFT` records what its source states: hardware, chips,
model, dtypes, batch size or concurrency, input and output lengths, which statistic the figure is (mean or median
over requests) and the measured first-token time. What a source leaves out and we had to choose is said in
``notes``.

How a row is priced (:func:`predict_ttft`); nothing here is fitted to these rows (they are held out: no figure of
:data:`tpu_notes.efficiency.DEFAULT` is fitted on them):

- ``workload="static"`` (TensorRT-LLM's ``gptSessionBenchmark`` run with one output token): the prefill of
  ``batch`` prompts of ``input_len`` tokens together, :meth:`~tpu_notes.inference.engine.Deployment.prefill_step`
  of :func:`~tpu_notes.inference.engine.deploy`. The first token is the one sampled from the prefill's last
  logits, so no generation step is added: TensorRT-LLM's first-token latency is the run with a single output token.
- ``workload="closed"`` (NIM's AIPerf sweep, vLLM's ``bench serve`` at a maximum concurrency): ``batch`` clients in
  a closed loop served by the simulator (:func:`~tpu_notes.inference.published.simulate_run`, the same deployment,
  scheduler and token budget as the per-token latency rows of the same source), TTFT = arrival to the first token
  of each request, queueing and chunked prefill included; the row's statistic (mean or median) over every request
  simulated.

The roofline of a row (``predicted``) is the same prefill at datasheet rates, one prompt at a time for a closed
loop (no queueing): a lower bound on the first-token time, so ``ratio`` (roofline / measured time) is at most 1.

:func:`serving_groups` puts these rows beside the published per-token latency and throughput rows and gives, per
source and metric, the median of predicted / measured and its spread; :func:`format_serving_groups` prints the
table and :func:`serving_medians` returns the medians (``benchmarks/serving.py`` prints both). Issue 38's targets:
TTFT within :data:`TTFT_TARGET` and TPOT/ITL within :data:`TPOT_TARGET` of measured, median per group.

Sources (read for this chapter; figures restated, not copied):

- ``nim``: docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance ("Performance", Llama-3.3-70b-instruct results,
  Version 1.8.0, 2 x H100 80G, fp8 TP2), tables "5000 Input Tokens / 500 Output Tokens" and "500 Input Tokens /
  2000 Output Tokens": concurrency, TTFT (ms), ITL (ms), throughput. Read 2026-07; the stored copy of the page was
  cut after the second table's first rows, so its remaining rows were read from a transcription of the same tables
  (github.com/zivbeker42/llm-guesstimator, ``tested_benchmarks/nim_llama33_70b_v1.8.0_2xH100_fp8TP2.csv``, commit
  cf11e66), whose every row that the stored page shows agrees with it.
- ``trtllm-0.5``: github.com/NVIDIA/TensorRT-LLM, ``docs/source/performance.md`` on branch release/0.5.0, "Low
  Latency" tables (batch size 1; "1st Token Latency (ms)") for H100 GPUs (FP8) and A100 GPUs (FP16): model, batch,
  TP, input length. The same tables are kept, marked "data from TensorRT-LLM v0.5", in the v0.6 and v0.7 pages.
- ``tpu-recipes``: github.com/AI-Hypercomputer/tpu-recipes (commit b709d73),
  ``inference/trillium/vLLM/Llama3.x/README.md``, the benchmark output after Step 11: vLLM on v6e-8, Llama 3.3 70B,
  TP 8, 3000 prompts of 1000 input and 1000 output tokens, mean and median TTFT at maximum concurrency 64 and 128.

JetStream's published summary (``jetstream-pt``, ``benchmarks/summary.md``) states throughput only, no first-token
time, so it has no row here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from ..efficiency import EfficiencyModel, check_efficiency
from ..hardware import get_chip
from ..runs import PublishedRecord, Reconciliation, check_rows, check_runs, check_under_roofline
from ..table import Column, Table
from ..units import OneOf, Positive, checked, fmt
from .engine import deploy
from .published import LLAMA2_7B, LLAMA2_70B, RUNS, ServingReconciliation, reconcile, simulate_run
from .step import ComputeDType, StorageDType

#: How a source drove its server: ``"static"`` (a batch prefilled together, the first token its output) or
#: ``"closed"`` (a fixed concurrency of clients in a closed loop, fixed lengths; priced by the simulator).
TTFT_WORKLOADS = ("static", "closed")
#: Which statistic over requests a row's figure is.
STATISTICS = ("mean", "median")
#: Issue 38's tolerance for first-token rows: ``abs(median(predicted / measured) - 1)`` per source, at most 20%.
TTFT_TARGET = 0.20
#: Per-token latency (TPOT / ITL) within 10%.
TPOT_TARGET = 0.10
#: The three metrics a group is reported by.
METRICS = ("TTFT", "TPOT/ITL", "throughput")
#: Most prompt + output tokens one closed-loop row may simulate (the simulator's bound on one call's work).
MAX_SIMULATED_TOKENS = 10_000_000

_Len = Annotated[int, Positive(integer=True, maximum=2**22)]


@dataclass(frozen=True)
class PublishedTTFT(PublishedRecord):
    """One measured first-token latency and its configuration (what the source states; ``notes`` say what is
    assumed). ``name``, ``source`` and ``model`` come first (:class:`~tpu_notes.runs.PublishedRecord`); a figure
    faster than the roofline's prefill by more than :data:`~tpu_notes.runs.ROOFLINE_TOLERANCE` is refused."""

    chip: str  # chip name in tpu_notes.hardware
    n_chips: Annotated[int, Positive(integer=True, maximum=2**16)]  # chips of one model replica (TP), as stated
    batch: Annotated[int, Positive(integer=True, maximum=2**20)]  # batch size (static) or concurrency (closed)
    workload: Annotated[str, OneOf(TTFT_WORKLOADS)]  # "static" or "closed" (how it is priced)
    input_len: _Len  # prompt tokens per request, as stated
    output_len: _Len  # tokens generated per request, as stated (1: a first-token-only run)
    reported_ttft_s: Annotated[float, Positive(maximum=3600.0)]  # measured time to first token, s
    statistic: Annotated[str, OneOf(STATISTICS)] = "mean"  # which statistic over requests the figure is
    weight_dtype: StorageDType = "bf16"  # as stated
    kv_dtype: StorageDType = "bf16"  # as stated, or assumed (then notes say so)
    compute_dtype: ComputeDType = "bf16"  # the matmul dtype whose peak applies
    group: str = ""  # one of runs.GROUPS (who ran it, on what)
    notes: str = ""  # mapping choices and assumptions
    n_requests: Annotated[int, Positive(integer=True, maximum=100_000)] | None = None  # requests simulated (closed)
    token_budget: Annotated[int, Positive(integer=True, maximum=2**16)] | None = None  # engine's tokens per step

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.chip, str):
            raise TypeError(f"chip must be a chip name such as 'v5e' or 'h100'; got {type(self.chip).__name__}")
        get_chip(self.chip)
        if self.workload == "closed":
            if self.n_requests is None:
                raise ValueError("workload='closed' needs n_requests (how many requests to simulate)")
            if self.n_requests < self.batch:
                raise ValueError(
                    f"n_requests ({self.n_requests}) must be at least batch ({self.batch}): every client sends one"
                )
            if self.n_requests * (self.input_len + self.output_len) > MAX_SIMULATED_TOKENS:
                raise ValueError(
                    f"n_requests x (input_len + output_len) must be at most {MAX_SIMULATED_TOKENS:,} tokens "
                    "(MAX_SIMULATED_TOKENS): lower n_requests"
                )
        elif self.n_requests is not None or self.token_budget is not None:
            raise ValueError("workload='static' takes no n_requests or token_budget (they size a simulation)")
        check_under_roofline("reported_ttft_s", _roofline_s(self) / self.reported_ttft_s)

    @property
    def measured_field(self) -> str:
        """The field that holds the measured figure."""
        return "reported_ttft_s"

    @property
    def metric(self) -> str:
        """Seconds to the first token."""
        return "s"

    @property
    def reported(self) -> float:
        """The measured first-token time, seconds."""
        return self.reported_ttft_s


def _deployment(run: PublishedTTFT, e: EfficiencyModel | None = None):
    return deploy(run.model, run.chip, run.n_chips, weight_dtype=run.weight_dtype, kv_dtype=run.kv_dtype,
                  compute_dtype=run.compute_dtype, efficiency=e)  # fmt: skip


def _roofline_s(run: PublishedTTFT) -> float:
    """The prefill at datasheet rates: the whole batch (static), or one prompt alone (closed, no queueing)."""
    batch = run.batch if run.workload == "static" else 1
    return _deployment(run).prefill_step(run.input_len, batch).roofline


@dataclass(frozen=True)
class TTFTReconciliation(Reconciliation):
    """A published first-token time beside the model's prediction: ``predicted`` (the roofline's prefill),
    ``expected`` (the engine or the simulator at the efficiency model's rates) and ``reported`` in seconds;
    ``ratio`` and ``expected_ratio`` are modelled / measured time (achieved speed / modelled speed, < 1: the run
    was slower than the model)."""

    prefill_s: float  # the engine's prefill of one prompt (closed) or the batch (static), s, at the model's rates
    bound: str  # what bounds that prefill step: "compute", "weights", "kv", "collectives" or "overhead"
    priced_by: str  # "engine" (static: deploy(...).prefill_step) or "simulator" (closed: simulate_run)

    def __repr__(self) -> str:
        return (
            f"TTFTReconciliation({self.run.name}: reported {fmt(self.reported, 's')}, expected "
            f"{fmt(self.expected, 's')}, roofline {fmt(self.predicted, 's')})"
        )


def simulated_ttft(run: PublishedTTFT, model: EfficiencyModel | None = None) -> float:
    """The simulator's first-token time of a closed-loop row: the row's statistic (mean or median) of the TTFT of
    the simulated requests in the run's steady-state window (:meth:`~tpu_notes.inference.simulator.SimResult.window`:
    the first and last 10% of arrivals trimmed), seconds (:func:`~tpu_notes.inference.published.simulate_run`).
    Every client of a closed loop sends its first request at once, so the first wave queues behind one another's
    prefills; NVIDIA's and vLLM's benchmark clients measure after a warm-up phase (AIPerf/GenAI-Perf
    ``--warmup-request-count``), and the window is that phase's counterpart."""
    if not isinstance(run, PublishedTTFT):
        raise TypeError(f"run must be a PublishedTTFT; got {type(run).__name__}")
    if run.workload != "closed":
        raise ValueError(f"run {run.name!r} is a static batch (workload='static'): the engine's prefill prices it")
    res = simulate_run(run, model)
    ttft = np.asarray(res.ttft_all)[res.window()]
    return float(np.mean(ttft) if run.statistic == "mean" else np.median(ttft))


@checked
def predict_ttft(run: PublishedTTFT, model: EfficiencyModel | None = None) -> TTFTReconciliation:
    """Price ``run``'s first-token time (see the module docstring): the engine's prefill for a static batch, the
    simulator for a closed loop, at the rates of ``model`` (default :data:`tpu_notes.efficiency.DEFAULT`)."""
    if not isinstance(run, PublishedTTFT):
        raise TypeError(f"run must be a PublishedTTFT; got {type(run).__name__}")
    e = check_efficiency(model, "model")
    batch = run.batch if run.workload == "static" else 1
    step = _deployment(run, e).prefill_step(run.input_len, batch)
    if run.workload == "static":
        expected, priced_by = step.total, "engine"
    else:
        expected, priced_by = simulated_ttft(run, e), "simulator"
    predicted = step.roofline
    return TTFTReconciliation(
        run=run,
        predicted=predicted,
        reported=run.reported_ttft_s,
        ratio=predicted / run.reported_ttft_s,
        expected=expected,
        expected_ratio=expected / run.reported_ttft_s,
        prefill_s=step.total,
        bound=step.bound,
        priced_by=priced_by,
    )


_NIM = "nim, Llama-3.3-70b-instruct 1.8.0"
_NIM_NOTE = (
    "TTFT as the page gives it at each concurrency; which statistic is not stated (AIPerf's headline is the "
    "average: mean assumed). fp8 weights and matmuls (fp8 TP2), fp8 KV cache assumed (not stated). Simulated as "
    "the per-token latency rows of the same page are: the stated concurrency as clients in a closed loop, 10 "
    "requests per client (2 at concurrency 1; fewer where 10 would pass the simulator's 10M-token bound), chunked "
    "prefill at vLLM's default budget of 2048 tokens per step (NIM's own setting is not stated)."
)
#: NIM's tables (concurrency, TTFT ms) at 5000/500 and 500/2000 tokens.
_NIM_5000 = ((1, 406.77), (5, 546.7), (25, 688.69), (50, 834.51), (100, 7996.25), (150, 34794.22),
             (200, 61680.22), (250, 88605.32))  # fmt: skip
_NIM_500 = ((1, 47.77), (5, 126.53), (25, 147.63), (50, 181.64), (100, 229.77), (150, 296.74), (200, 4867.89))


def _nim_requests(c: int, tokens: int) -> int:
    return 2 if c == 1 else min(10 * c, MAX_SIMULATED_TOKENS // tokens)


def _nim(c: int, inp: int, out: int, ms: float) -> PublishedTTFT:
    return PublishedTTFT(
        f"Llama 3.3 70B fp8, 2 H100, c={c} {inp}/{out}",
        _NIM + f", {inp} Input Tokens / {out} Output Tokens, concurrency {c}",
        "llama3-70b",
        "h100",
        2,
        c,
        "closed",
        inp,
        out,
        ms * 1e-3,
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        group="gpu-serving",
        notes=_NIM_NOTE,
        n_requests=_nim_requests(c, inp + out),
    )


_TRT = "trtllm-0.5, performance.md, Low Latency"
_TRT_NOTE = (
    "Batch 1, first-token latency measured with gptSessionBenchmark and a single output token (the page's method): "
    "the prefill of one prompt, no generation step. 'LLaMA 7B/70B' of TensorRT-LLM 0.5 priced as Llama 2 7B/70B."
)
_TRT_H100 = " H100 FP8: FP8 weights, matmuls and KV cache (the page's build enables fp8 and an fp8 KV cache)."
_TRT_A100 = " A100 FP16: priced as bf16 (the same 2 bytes and peak; no FP8 on A100)."


def _trt(model, label: str, chip: str, tp: int, inp: int, ms: float) -> PublishedTTFT:
    fp8 = chip == "h100"
    dt = "fp8" if fp8 else "bf16"
    table = "H100 GPUs (FP8)" if fp8 else "A100 GPUs (FP16)"
    return PublishedTTFT(
        f"{label} {dt} {inp} in, {tp} {chip.upper()}, b=1",
        f"{_TRT}, {table}, {label.replace('Llama 2 ', 'LLaMA ')}, input {inp}",
        model,
        chip,
        tp,
        1,
        "static",
        inp,
        1,
        ms * 1e-3,
        weight_dtype=dt,
        kv_dtype=dt,
        compute_dtype=dt,
        group="gpu-serving",
        notes=_TRT_NOTE + (_TRT_H100 if fp8 else _TRT_A100),
    )


_VT = "tpu-recipes, inference/trillium/vLLM/Llama3.x/README.md"
_VT_NOTE = (
    "vLLM (vllm/vllm-tpu:v0.12.0) on v6e-8, Llama-3.3-70B-Instruct in bf16, TP 8, 3000 random prompts of 1000 "
    "tokens (2,997,000 input tokens in all) and 1000 output tokens, at the stated maximum concurrency; the "
    "benchmark's mean and median TTFT over all 3000 requests (the first wave included). Simulated as the TPOT rows "
    "of the same run are (closed loop at the concurrency, chunked prefill at max-num-batched-tokens 512), with the "
    "run's own 3000 requests. bf16 KV cache assumed (not stated)."
)


def _vt(c: int, stat: str, ms: float) -> PublishedTTFT:
    return PublishedTTFT(
        f"Llama 3.3 70B bf16, v6e-8, c={c} 1k/1k, {stat}",
        _VT + f", MAX_CONCURRENCY={c} output, {stat.capitalize()} TTFT",
        "llama3-70b",
        "v6e",
        8,
        c,
        "closed",
        1000,
        1000,
        ms * 1e-3,
        statistic=stat,
        group="tpu-serving",
        notes=_VT_NOTE,
        n_requests=3000,
        token_budget=512,
    )


#: The published first-token times: NIM at every concurrency of both input lengths, TensorRT-LLM 0.5's batch-1
#: table for the Llama models, vLLM on v6e-8 (mean and median).
TTFT_RUNS: tuple[PublishedTTFT, ...] = (
    *(_nim(c, 5000, 500, ms) for c, ms in _NIM_5000),
    *(_nim(c, 500, 2000, ms) for c, ms in _NIM_500),
    _trt(LLAMA2_7B, "Llama 2 7B", "h100", 1, 128, 7),
    _trt(LLAMA2_7B, "Llama 2 7B", "h100", 1, 2048, 36),
    _trt(LLAMA2_70B, "Llama 2 70B", "h100", 4, 128, 26),
    _trt(LLAMA2_70B, "Llama 2 70B", "h100", 4, 2048, 109),
    _trt(LLAMA2_7B, "Llama 2 7B", "a100", 1, 128, 16),
    _trt(LLAMA2_7B, "Llama 2 7B", "a100", 1, 2048, 133),
    _trt(LLAMA2_70B, "Llama 2 70B", "a100", 4, 128, 47),
    _trt(LLAMA2_70B, "Llama 2 70B", "a100", 4, 2048, 377),
    _vt(64, "mean", 251.04),
    _vt(64, "median", 198.81),
    _vt(128, "mean", 512.34),
    _vt(128, "median", 229.09),
)


@checked
def reconcile_ttft(
    runs: Sequence[PublishedTTFT] = TTFT_RUNS, model: EfficiencyModel | None = None
) -> list[TTFTReconciliation]:
    """:func:`predict_ttft` for every row of ``runs`` at the rates of ``model``."""
    return [predict_ttft(r, model) for r in check_runs(runs, PublishedTTFT)]


# ---------------------------------------------------------------------------------------------- the group table
@dataclass(frozen=True)
class ServingGroup:
    """One source × metric of the published serving rows: the median of predicted / measured over its rows (in the
    metric's own units: seconds for TTFT and TPOT/ITL, output tokens/s for throughput; > 1 means a predicted time
    too long, or a predicted throughput too high) and its spread."""

    source: str  # the source key ("nim", "trtllm-0.5", ...)
    metric: str  # "TTFT", "TPOT/ITL" or "throughput"
    n: int  # rows
    median: float  # median of predicted / measured
    low: float  # smallest predicted / measured
    high: float  # largest predicted / measured
    worst_run: str  # the row farthest from 1 (by |log ratio|)
    target: float | None  # the bound on |median − 1| for this metric (None: no target)

    @property
    def meets_target(self) -> bool | None:
        """Whether ``|median − 1|`` is within ``target`` (None where the metric has none)."""
        return None if self.target is None else abs(self.median - 1.0) <= self.target


def row_metric(row) -> str:
    """The metric a reconciliation row measures: ``"TTFT"``, ``"TPOT/ITL"`` or ``"throughput"``."""
    if isinstance(row, TTFTReconciliation):
        return "TTFT"
    if isinstance(row, ServingReconciliation):
        return "TPOT/ITL" if row.run.metric == "s/token" else "throughput"
    raise TypeError(f"row must be a TTFTReconciliation or ServingReconciliation; got {type(row).__name__}")


def row_ratio(row) -> float:
    """Predicted / measured of one row in its metric's own units (the expected model's figure)."""
    row_metric(row)
    return row.expected / row.reported


def _source(row) -> str:
    return row.run.source.split(",")[0]


def _check_group_rows(rows) -> list:
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of TTFTReconciliation / ServingReconciliation; got {type(rows).__name__}")
    rows = list(rows)
    if not rows:
        raise ValueError("rows must hold at least one reconciliation row")
    for r in rows:
        if not isinstance(r, (TTFTReconciliation, ServingReconciliation)):
            raise TypeError(
                f"rows must hold TTFTReconciliation / ServingReconciliation rows (reconcile_ttft(), "
                f"published.reconcile()); got {type(r).__name__}"
            )
    return rows


def serving_groups(rows=None, model: EfficiencyModel | None = None) -> list[ServingGroup]:
    """One :class:`ServingGroup` per source × metric of ``rows`` (default: :func:`reconcile_ttft` and
    :func:`~tpu_notes.inference.published.reconcile` of every published serving row at ``model``'s rates),
    TTFT groups first, then TPOT/ITL, then throughput; sources in the order they first appear. ``model`` prices
    the default rows; rows already priced take no ``model``."""
    e = check_efficiency(model, "model")
    if rows is None:
        rows = reconcile_ttft(model=e) + reconcile(RUNS, 1.0, e)
    elif model is not None:
        raise ValueError("model prices the default rows: pass rows or model, not both")
    rows = _check_group_rows(rows)
    targets = {"TTFT": TTFT_TARGET, "TPOT/ITL": TPOT_TARGET, "throughput": None}
    out = []
    for metric in METRICS:
        of_metric = [r for r in rows if row_metric(r) == metric]
        for src in dict.fromkeys(_source(r) for r in of_metric):
            rs = [r for r in of_metric if _source(r) == src]
            ratios = [row_ratio(r) for r in rs]
            worst = max(rs, key=lambda r: abs(math.log(row_ratio(r))))
            out.append(
                ServingGroup(
                    source=src,
                    metric=metric,
                    n=len(rs),
                    median=statistics.median(ratios),
                    low=min(ratios),
                    high=max(ratios),
                    worst_run=worst.run.name,
                    target=targets[metric],
                )
            )
    return out


def _check_groups(groups) -> list:
    if isinstance(groups, (str, bytes)) or not hasattr(groups, "__iter__"):
        raise TypeError(f"groups must be a list of ServingGroup from serving_groups(); got {type(groups).__name__}")
    groups = list(groups)
    if not all(isinstance(g, ServingGroup) for g in groups):
        raise TypeError("groups must be a list of ServingGroup from serving_groups()")
    return groups


def format_serving_groups(groups):
    """The per-group table, as a :class:`~tpu_notes.table.Table`: metric, source, rows, the median of predicted /
    measured, its range and whether the median meets the issue's target (each group's row farthest from 1 is
    ``ServingGroup.worst_run``)."""
    groups = _check_groups(groups)
    cols = [
        Column("metric"),
        Column("source"),
        Column("rows"),
        Column("median"),
        Column("lowest"),
        Column("highest"),
        Column("target"),
    ]
    out = []
    for g in groups:
        verdict = "-" if g.target is None else (f"ok ±{g.target:.0%}" if g.meets_target else f"MISS ±{g.target:.0%}")
        out.append((g.metric, g.source, g.n, g.median, g.low, g.high, verdict))
    return Table(cols, out, caption="Predicted / measured per source and metric (1: exact)")


def serving_medians(groups=None) -> dict[str, float]:
    """The median of predicted / measured per group, keyed ``"metric source"`` (e.g. ``"TTFT nim"``): what the
    serving benchmark prints and the closing note quotes. ``groups`` defaults to :func:`serving_groups`."""
    groups = serving_groups() if groups is None else _check_groups(groups)
    return {f"{g.metric} {g.source}": g.median for g in groups}


def format_ttft_table(rows: Sequence[TTFTReconciliation]) -> str:
    """One line per TTFT row: the source key, measured, expected and roofline time, expected / measured, what
    priced it and what bounds its prefill."""
    lines = [f"{'row':44s} {'source':11s} {'measured':>10} {'expected':>10} {'roofline':>10} {'ratio':>5}  priced by"]
    for r in check_rows(rows, TTFTReconciliation):
        lines.append(
            f"{r.run.name:44.44s} {_source(r):11.11s} {r.reported * 1e3:7.1f} ms {r.expected * 1e3:7.1f} ms "
            f"{r.predicted * 1e3:7.1f} ms {r.expected_ratio:5.2f}  {r.priced_by} ({r.bound})"
        )
    return "\n".join(lines)


__all__ = [
    "MAX_SIMULATED_TOKENS",
    "METRICS",
    "STATISTICS",
    "TPOT_TARGET",
    "TTFT_RUNS",
    "TTFT_TARGET",
    "TTFT_WORKLOADS",
    "PublishedTTFT",
    "ServingGroup",
    "TTFTReconciliation",
    "format_serving_groups",
    "format_ttft_table",
    "predict_ttft",
    "reconcile_ttft",
    "row_metric",
    "row_ratio",
    "serving_groups",
    "serving_medians",
    "simulated_ttft",
]
