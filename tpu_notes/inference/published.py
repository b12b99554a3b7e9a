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

A row whose source states how it drove the server (``workload``: a closed loop of clients at a fixed concurrency,
or ShareGPT prompts sent at once to fixed cache slots) has its expected figure from the serving simulator instead
(:func:`.simulate_run`), where prefills of arriving requests share the steps with generation; the roofline stays
the step model's.

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
- ``gpt-fast``: github.com/pytorch-labs/gpt-fast (commit 32971d3), ``README.md`` tables "Benchmarks", "Tensor
  Parallelism" and "Tensor Parallelism + Quantization", and ``mixtral-moe/README.md``: 8 x A100-80GB (power
  limited to 330 W), batch 1, a 5-token prompt, tokens/s of one sequence; bf16, int8 and int4 (groups of 32)
  weight-only quantisation, tensor parallelism over 1 to 8 GPUs.
- ``trtllm-0.9``: github.com/NVIDIA/TensorRT-LLM, ``docs/source/performance.md`` as of v0.9.0 ("All data was
  generated using version 0.9.0"), "Peak Throughput" tables for H200 FP8, H100 FP8 and A100 FP16: batch, TP,
  input and output length, "Throughput (out tok/s/GPU)", measured with ``gptSessionBenchmark`` (static batches).
- ``tpu-recipes``: github.com/AI-Hypercomputer/tpu-recipes (commit b709d73),
  ``inference/trillium/vLLM/Llama3.x/README.md``, Step 11: vLLM on v6e-8, Llama 3.3 70B, TP 8, 1000 input and
  1000 output tokens, mean TPOT at maximum concurrency 64 and 128.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Annotated

from ..efficiency import EfficiencyModel, check_efficiency
from ..hardware import get_chip
from ..runs import PublishedRecord, Reconciliation, check_rows, check_runs, check_under_roofline, median_ratio
from ..table import Column, Table
from ..transformer import get_model
from ..units import Fraction, OneOf, Positive, PositiveFloat, checked, fmt
from .engine import deploy
from .expected import expected_decode_step, expected_prefill
from .simulator import Scheduler, simulate
from .step import ComputeDType, StorageDType, decode_step_time, prefill_time
from .workload import LengthDistribution, Workload

#: How a row is priced (see the module docstring).
MODES = ("static", "decode", "latency")
#: How a source drove its server, when it says: ``""`` (a fixed batch: the step model prices it), ``"closed"``
#: (a fixed concurrency of clients in a closed loop, fixed lengths), ``"sharegpt"`` (ShareGPT prompts sent at once
#: to fixed-size cache slots). A row with a workload is also predicted by :func:`~tpu_notes.inference.simulate`.
WORKLOADS = ("", "closed", "sharegpt")
#: Most requests one row's simulation serves (the source's count when it states one, else a stated multiple of the
#: concurrency).
MAX_SIMULATED = 5000

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
    workload: Annotated[str, OneOf(WORKLOADS)] = ""  # how the source drove the server ("" : a fixed batch)
    n_requests: Annotated[int, Positive(integer=True, maximum=MAX_SIMULATED)] | None = None  # requests simulated
    token_budget: Annotated[int, Positive(integer=True, maximum=2**16)] | None = None  # engine's tokens per step

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
        if self.workload == "closed" and (mode != "latency" or self.input_len is None):
            raise ValueError("workload='closed' is a latency row: mode='latency' with input_len and output_len")
        if self.workload == "sharegpt" and (mode != "decode" or self.cache_len is None):
            raise ValueError("workload='sharegpt' is a throughput row on fixed slots: mode='decode' with cache_len")
        if self.workload and self.n_requests is None:
            raise ValueError(f"workload={self.workload!r} needs n_requests (how many requests to simulate)")
        check_under_roofline(self.measured_field, _roofline(self, 1.0)[1])

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
    priced_by: str = "step model"  # what gave `expected`: "step model" or "simulator" (a stated workload)

    def __repr__(self) -> str:
        unit = "s" if self.run.metric == "s/token" else "tokens/s"
        return (
            f"ServingReconciliation({self.run.name}: reported {fmt(self.reported, unit)}, predicted "
            f"{fmt(self.predicted, unit)}, ratio {self.ratio:.2f})"
        )


def _expected(run: PublishedServing, model: EfficiencyModel | None) -> tuple[float, str]:
    """The efficiency model's figure for ``run`` in ``run.metric`` units, and what priced it: ``"simulator"`` for a
    row whose source states its workload (:func:`.simulate_run`), else ``"step model"`` (the same three modes as the
    roofline, on the engine's steps)."""
    if run.workload:
        return simulated_figure(run, model), "simulator"
    kw = dict(weight_dtype=run.weight_dtype, compute_dtype=run.compute_dtype, efficiency=model)
    step = expected_decode_step(run.model, run.chip, run.n_chips, run.batch, run.context, kv_dtype=run.kv_dtype, **kw)
    if run.mode == "latency":
        return step.total, "step model"
    if run.mode == "decode":
        return run.batch / step.total / run.n_chips, "step model"
    prefill = expected_prefill(run.model, run.chip, run.n_chips, run.input_len, run.batch, **kw)
    return run.batch * run.output_len / (prefill + run.output_len * step.total) / run.n_chips, "step model"


#: ShareGPT prompts and answers as JetStream's benchmark sends them: the simulator's ShareGPT-like lengths, capped
#: at the row's stated maximum input and output (1024 each).
_SHAREGPT_CAP = 1024
#: Requests per client simulated when a closed-loop source does not state its request count.
CLOSED_REQUESTS_PER_CLIENT = 10


def _simulation(run: PublishedServing, model: EfficiencyModel | None):
    """The deployment, workload and scheduler one row's simulation uses (see :func:`.simulate_run`)."""
    e = check_efficiency(model, "model")
    if run.workload == "closed":
        dep = deploy(run.model, run.chip, run.n_chips, weight_dtype=run.weight_dtype, kv_dtype=run.kv_dtype,
                     compute_dtype=run.compute_dtype, efficiency=e)  # fmt: skip
        wl = Workload.closed(
            run.batch,
            run.n_requests,
            prompt=LengthDistribution.fixed(run.input_len),
            output=LengthDistribution.fixed(run.output_len),
        )
        budget = run.token_budget or Scheduler().token_budget
        sch = Scheduler("chunked", token_budget=budget, max_seqs=min(max(run.batch, 1), budget))
        return dep, wl, sch
    # "sharegpt": every prompt sent at once to `batch` fixed slots of cache_len tokens (JetStream allocates them
    # up front: no memory reserve beyond them), prefilled ahead of decoding
    dep = deploy(run.model, run.chip, run.n_chips, weight_dtype=run.weight_dtype, kv_dtype=run.kv_dtype,
                 compute_dtype=run.compute_dtype, reserve_fraction=0.0, efficiency=e)  # fmt: skip
    cap = min(_SHAREGPT_CAP, run.cache_len // 2)
    prompt = LengthDistribution.sharegpt_like("prompt")
    output = LengthDistribution.sharegpt_like("output")
    wl = Workload.poisson(
        1e6,
        run.n_requests,
        prompt=LengthDistribution.mixture(prompt.components, low=prompt.low, high=cap, name="ShareGPT-like prompt"),
        output=LengthDistribution.mixture(output.components, low=output.low, high=cap, name="ShareGPT-like answer"),
    )
    sch = Scheduler(
        "prefill_first",
        token_budget=max(run.batch, 2 * cap),
        max_seqs=run.batch,
        kv="static",
        slot_tokens=run.cache_len,
    )
    return dep, wl, sch


def simulate_run(run: PublishedServing, model: EfficiencyModel | None = None):
    """Serve ``run``'s stated workload with :func:`~tpu_notes.inference.simulate` on its deployment at the rates of
    ``model`` (default :data:`tpu_notes.efficiency.DEFAULT`), returning the
    :class:`~tpu_notes.inference.simulator.SimResult`:

    - ``workload="closed"`` (NIM, vLLM's benchmark at a maximum concurrency): ``batch`` clients in a closed loop,
      fixed prompt and output lengths, ``n_requests`` requests (the source's count, or
      :data:`CLOSED_REQUESTS_PER_CLIENT` per client when it states none), chunked prefill with the engine's stated
      ``token_budget`` (vLLM's default 2048 when not stated), a paged KV pool with 10% of HBM in reserve;
    - ``workload="sharegpt"`` (JetStream): ``n_requests`` ShareGPT-like requests, capped at half the cache length
      each, sent at once to ``batch`` fixed slots of ``cache_len`` tokens (static KV, read whole every step, no
      memory reserve), whole prompts prefilled ahead of decoding.

    A closed-loop :class:`~tpu_notes.inference.published_ttft.PublishedTTFT` row is served the same way (its
    first-token times are read from the same simulation)."""
    # PublishedTTFT (published_ttft, a module built on this one) is told apart by its fields, not imported
    if not isinstance(run, PublishedRecord) or not all(hasattr(run, f) for f in ("workload", "batch", "input_len")):
        raise TypeError(f"run must be a PublishedServing or PublishedTTFT; got {type(run).__name__}")
    if run.workload not in ("closed", "sharegpt"):
        raise ValueError(f"run {run.name!r} states no served workload (workload={run.workload!r}): a step prices it")
    key = (run, _efficiency_key(check_efficiency(model, "model")))
    hit = _SIMULATED.get(key)
    if hit is None:
        dep, wl, sch = _simulation(run, model)
        hit = _SIMULATED[key] = simulate(dep, wl, scheduler=sch)
        if len(_SIMULATED) > 4096:
            _SIMULATED.clear()
    return hit


def _efficiency_key(e: EfficiencyModel) -> tuple:
    """The efficiency model's figures as a hashable key (two models with the same figures price a run alike)."""
    out = []
    for f in fields(e):
        v = getattr(e, f.name)
        out.append(tuple(sorted(v.items())) if hasattr(v, "items") else v)
    return tuple(out)


#: Simulations already run, by (run, efficiency model): validation refits price the same rows many times.
_SIMULATED: dict = {}


def simulated_figure(run: PublishedServing, model: EfficiencyModel | None = None) -> float:
    """:func:`.simulate_run`'s figure in ``run.metric`` units: the mean time per output token (latency rows, what
    NIM's ITL and vLLM's mean TPOT report) or output tokens/s per chip (throughput rows)."""
    r = simulate_run(run, model)
    if run.mode == "latency":
        tpot = [t for t in r.tpot_all if t > 0]
        return sum(tpot) / len(tpot)
    return r.output_tokens_per_s / run.n_chips


def _roofline(run: PublishedServing, efficiency: float):
    """Chapter 7's roofline of ``run`` at ``efficiency``: ``(predicted, ratio, step_s, prefill_s, step)``."""
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
        return predicted, predicted / run.reported, step_s, prefill_s, step
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
        predicted = run.batch * run.output_len / (prefill_s + run.output_len * step_s) / run.n_chips
    else:
        predicted = run.batch / step_s / run.n_chips
    return predicted, run.reported / predicted, step_s, prefill_s, step


@checked
def predict(
    run: PublishedServing, efficiency: Fraction = 1.0, model: EfficiencyModel | None = None
) -> ServingReconciliation:
    """Price ``run`` with Chapter 7's :func:`~tpu_notes.inference.decode_step_time` and
    :func:`~tpu_notes.inference.prefill_time` (see the module docstring for the three modes) at ``efficiency``
    of the datasheet rates, and with the efficiency model ``model`` (the simulator for a row that states its
    workload, the engine's steps otherwise), and compare both with what was measured."""
    if not isinstance(run, PublishedServing):
        raise TypeError(f"run must be a PublishedServing; got {type(run).__name__}")
    model = check_efficiency(model, "model")
    predicted, ratio, step_s, prefill_s, step = _roofline(run, efficiency)
    expected, priced_by = _expected(run, model)
    exp_ratio = expected / run.reported if run.mode == "latency" else run.reported / expected
    return ServingReconciliation(
        run=run,
        predicted=predicted,
        reported=run.reported,
        ratio=ratio,
        expected=expected,
        expected_ratio=exp_ratio,
        step_s=step_s,
        prefill_s=prefill_s,
        bound=step.bound,
        fits=step.fits,
        priced_by=priced_by,
    )


_JP = "jetstream-pt, benchmarks/summary.md"
_JP_NOTE = (
    "ShareGPT prompts (lengths not stated, at most 1024 in and 1024 out), continuous batching, prefill "
    "interleaved: the step model prices generation steps alone at the stated batch, reading the whole "
    "2048-token cache each step (our reading of a fixed-size cache), an upper bound; the simulator sends the "
    "2000 prompts at once (ShareGPT-like lengths capped at 1024) to that many fixed 2048-token slots, whole "
    "prompts prefilled ahead of decoding. Output tokens/s assumed (the table says 'throughput (token/s)')."
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
    "ITL at the stated concurrency (taken as the decode batch by the step model); fp8 KV cache assumed (not "
    "stated). At high concurrency prefills of new requests interleave with generation, which the step alone "
    "leaves out: the simulator serves the stated concurrency as clients in a closed loop (request count not "
    "stated: 10 per client simulated; 2 at concurrency 1, where every request is the same), chunked prefill "
    "at vLLM's default budget of 2048 tokens per step (NIM's "
    "own setting is not stated)."
)

#: Mixtral 8x7B: the preset ``"mixtral-8x7b"`` of :mod:`tpu_notes.transformer` (46.7B parameters, 12.9B used per
#: token; its shapes agree with github.com/pytorch-labs/gpt-fast ``mixtral-moe/model.py``, commit 32971d3).
MIXTRAL_8X7B = get_model("mixtral-8x7b")
_MOE_NOTE = (
    "Mixtral 8x7B priced with MIXTRAL_8X7B; a step reads the experts its batch is expected to visit "
    "(2 of 8 per token, drawn independently)."
)
_GF = "gpt-fast, README.md"
_GF_MOE = "gpt-fast, mixtral-moe/README.md"
#: gpt-fast's generate.py defaults (commit 32971d3): the prompt "Hello, my name is" (the README: "just 5 tokens")
#: and max_new_tokens=200.
_GF_IN, _GF_OUT = 5, 200
_GF_NOTE = (
    "Batch 1 on A100-80GB power-limited to 330 W (the roofline uses the datasheet rates). Tokens/s as stated, "
    "entered as seconds per token = 1 / (tokens/s); it averages the whole generation of 200 tokens (the "
    "generate.py default) after a 5-token prompt, the tiny prefill included. bf16 KV cache. TP rows: all "
    "GPUs of the group share each step."
)
_GF_INT8 = "int8 is weight-only (matmuls in bf16)."
_GF_INT4 = (
    "int4 is weight-only with groups of 32 (matmuls in bf16); the group scales and zeros (about 1/8 byte per "
    "weight more) are not counted."
)
_T9 = "trtllm-0.9, performance.md v0.9.0"
_T9_NOTE = (
    "gptSessionBenchmark: a static batch of the stated size, prefilled then decoded for the output length. "
    "Throughput stated per GPU; entered here as all GPUs of the TP group together (per-GPU x TP). FP8 weights "
    "and FP8 KV cache (the LLaMA build configs set quant_algo and kv_cache_quant_algo to FP8; the page gives "
    "no Mixtral config, so the same is assumed for it)."
)
_T9_A100_NOTE = (
    "gptSessionBenchmark: a static batch of the stated size, prefilled then decoded for the output length. "
    "Throughput stated per GPU; entered here as all GPUs of the TP group together (per-GPU x TP). FP16 "
    "weights, activations and KV cache (no FP8 on A100); priced as bf16 (the same 2 bytes and peak)."
)
_T9_LLAMA = (
    "'LLaMA 7B/70B' priced as Llama 2 7B/70B (the build configs give Llama 2's shapes: vocab 32000, 8 KV "
    "heads for 70B)."
)
_VT = "tpu-recipes, inference/trillium/vLLM/Llama3.x/README.md"
_VT_NOTE = (
    "vLLM (vllm/vllm-tpu:v0.12.0), Llama-3.3-70B-Instruct in bf16 (the Hugging Face checkpoint, no "
    "quantisation flag), TP 8 on v6e-8, random 1000-token prompts and 1000 output tokens (ignore-eos), "
    "3000 prompts at the stated maximum concurrency, taken as the decode batch. Mean TPOT (excluding the "
    "first token) as the per-token latency; prefills of new requests (max-num-batched-tokens 512) "
    "interleave with generation, which the step alone leaves out and the simulator serves: the stated "
    "concurrency as clients in a closed loop (10 requests per client simulated, of the 3000 the run sent), "
    "chunked prefill at 512 tokens per step. bf16 KV cache assumed (not stated)."
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
        workload="sharegpt",
        n_requests=2000,
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
        workload="sharegpt",
        n_requests=2000,
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
        workload="sharegpt",
        n_requests=2000,
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
        workload="sharegpt",
        n_requests=2000,
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
        workload="sharegpt",
        n_requests=2000,
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
        workload="sharegpt",
        n_requests=2000,
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
        workload="closed",
        n_requests=2,
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
        workload="closed",
        n_requests=2,
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
        workload="closed",
        n_requests=500,
    ),
    # ---------------------------------------------------------------- gpt-fast: batch 1 on A100 (latency rows)
    PublishedServing(
        "Llama 2 7B bf16, 1 A100, b=1",
        _GF + ", Benchmarks table, Llama-2-7B Base",
        LLAMA2_7B,
        "a100",
        1,
        1,
        "latency",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 104.9,
        group="gpu-serving",
        notes=_GF_NOTE,
    ),
    PublishedServing(
        "Llama 2 7B int8, 1 A100, b=1",
        _GF + ", Benchmarks table, Llama-2-7B 8-bit",
        LLAMA2_7B,
        "a100",
        1,
        1,
        "latency",
        weight_dtype="int8",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 155.58,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _GF_INT8,
    ),
    PublishedServing(
        "Llama 2 7B int4, 1 A100, b=1",
        _GF + ", Benchmarks table, Llama-2-7B 4-bit (G=32)",
        LLAMA2_7B,
        "a100",
        1,
        1,
        "latency",
        weight_dtype="int4",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 196.80,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _GF_INT4,
    ),
    PublishedServing(
        "Llama 2 70B int8, 1 A100, b=1",
        _GF + ", Benchmarks table, Llama-2-70B 8-bit",
        LLAMA2_70B,
        "a100",
        1,
        1,
        "latency",
        weight_dtype="int8",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 19.13,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _GF_INT8,
    ),
    PublishedServing(
        "Llama 2 70B bf16, 8 A100 TP8, b=1",
        _GF + ", Tensor Parallelism table, Llama-2-70B 8 GPUs",
        LLAMA2_70B,
        "a100",
        8,
        1,
        "latency",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 62.50,
        group="gpu-serving",
        notes=_GF_NOTE,
    ),
    PublishedServing(
        "Llama 2 70B int4, 8 A100 TP8, b=1",
        _GF + ", Tensor Parallelism + Quantization table, Llama-2-70B 4-bit (G=32)",
        LLAMA2_70B,
        "a100",
        8,
        1,
        "latency",
        weight_dtype="int4",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 90.77,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _GF_INT4,
    ),
    PublishedServing(
        "Llama 3.1 8B bf16, 1 A100, b=1",
        _GF + ", Benchmarks table, Llama-3.1-8B Base",
        "llama3-8b",
        "a100",
        1,
        1,
        "latency",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 93.89,
        group="gpu-serving",
        notes=_GF_NOTE + " Llama 3.1 8B priced with the llama3-8b preset (the same shapes).",
    ),
    PublishedServing(
        "Llama 3.1 70B int8, 8 A100 TP8, b=1",
        _GF + ", Tensor Parallelism + Quantization table, Llama-3.1-70B 8-bit",
        "llama3-70b",
        "a100",
        8,
        1,
        "latency",
        weight_dtype="int8",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 75.58,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _GF_INT8 + " Llama 3.1 70B priced with the llama3-70b preset (the same shapes).",
    ),
    PublishedServing(
        "Llama 3.1 405B int8, 8 A100 TP8, b=1",
        _GF + ", Tensor Parallelism + Quantization table, Llama-3.1-405B 8-bit",
        "llama3-405b",
        "a100",
        8,
        1,
        "latency",
        weight_dtype="int8",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 15.60,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _GF_INT8 + " The table does not say 8 GPUs for this row; taken from the table's 8-GPU "
        "rows above it (405 GB of int8 weights need more than 4 A100s).",
    ),
    PublishedServing(
        "Mixtral 8x7B int8, 1 A100, b=1",
        _GF_MOE + ", int8 row, 1 GPU",
        MIXTRAL_8X7B,
        "a100",
        1,
        1,
        "latency",
        weight_dtype="int8",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 97.92,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _GF_INT8 + " " + _MOE_NOTE,
    ),
    PublishedServing(
        "Mixtral 8x7B bf16, 8 A100 TP8, b=1",
        _GF_MOE + ", baseline (bfloat16) row, 8 GPU",
        MIXTRAL_8X7B,
        "a100",
        8,
        1,
        "latency",
        input_len=_GF_IN,
        output_len=_GF_OUT,
        reported_latency_s=1 / 227.82,
        group="gpu-serving",
        notes=_GF_NOTE + " " + _MOE_NOTE,
    ),
    # ---------------------------------------------------------------- TensorRT-LLM 0.9.0: static batches, per GPU
    PublishedServing(
        "Mixtral 8x7B fp8 128/128, 2 H200",
        _T9 + ", H200 GPUs (FP8), Mixtral 8x7B, batch 1024",
        MIXTRAL_8X7B,
        "h200",
        2,
        1024,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=5444 * 2,
        group="gpu-serving",
        notes=_T9_NOTE + " " + _MOE_NOTE,
    ),
    PublishedServing(
        "Mixtral 8x7B fp8 2048/2048, 2 H100",
        _T9 + ", H100 GPUs (FP8), Mixtral 8x7B, batch 32",
        MIXTRAL_8X7B,
        "h100",
        2,
        32,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=2048,
        output_len=2048,
        reported_tokens_per_s=1317 * 2,
        group="gpu-serving",
        notes=_T9_NOTE + " " + _MOE_NOTE,
    ),
    PublishedServing(
        "Mixtral 8x7B fp16 128/128, 2 A100",
        _T9 + ", A100 GPUs (FP16), Mixtral 8x7B, batch 512",
        MIXTRAL_8X7B,
        "a100",
        2,
        512,
        "static",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=2842 * 2,
        group="gpu-serving",
        notes=_T9_A100_NOTE + " " + _MOE_NOTE,
    ),
    PublishedServing(
        "Llama 2 70B fp8 128/128, 1 H200, b=1024",
        _T9 + ", H200 GPUs (FP8), LLaMA 70B, batch 1024",
        LLAMA2_70B,
        "h200",
        1,
        1024,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=3989,
        group="gpu-serving",
        notes=_T9_NOTE + " " + _T9_LLAMA,
    ),
    PublishedServing(
        "Llama 2 70B fp8 2048/2048, 1 H200",
        _T9 + ", H200 GPUs (FP8), LLaMA 70B, batch 64",
        LLAMA2_70B,
        "h200",
        1,
        64,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=2048,
        output_len=2048,
        reported_tokens_per_s=1458,
        group="gpu-serving",
        notes=_T9_NOTE + " " + _T9_LLAMA,
    ),
    PublishedServing(
        "Llama 2 70B fp8 128/2048, 4 H100, b=512",
        _T9 + ", H100 GPUs (FP8), LLaMA 70B, batch 512",
        LLAMA2_70B,
        "h100",
        4,
        512,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=2048,
        reported_tokens_per_s=2725 * 4,
        group="gpu-serving",
        notes=_T9_NOTE + " " + _T9_LLAMA,
    ),
    PublishedServing(
        "Llama 7B fp8 128/128, 1 H100, b=896",
        _T9 + ", H100 GPUs (FP8), LLaMA 7B, batch 896",
        LLAMA2_7B,
        "h100",
        1,
        896,
        "static",
        weight_dtype="fp8",
        kv_dtype="fp8",
        compute_dtype="fp8",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=19854,
        group="gpu-serving",
        notes=_T9_NOTE + " " + _T9_LLAMA,
    ),
    PublishedServing(
        "Llama 2 70B fp16 128/128, 4 A100",
        _T9 + ", A100 GPUs (FP16), LLaMA 70B, batch 1024",
        LLAMA2_70B,
        "a100",
        4,
        1024,
        "static",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=686 * 4,
        group="gpu-serving",
        notes=_T9_A100_NOTE + " " + _T9_LLAMA,
    ),
    PublishedServing(
        "Llama 7B fp16 128/128, 1 A100",
        _T9 + ", A100 GPUs (FP16), LLaMA 7B, batch 256",
        LLAMA2_7B,
        "a100",
        1,
        256,
        "static",
        input_len=128,
        output_len=128,
        reported_tokens_per_s=5390,
        group="gpu-serving",
        notes=_T9_A100_NOTE + " " + _T9_LLAMA,
    ),
    # ---------------------------------------------------------------- vLLM on TPU v6e-8 (tpu-recipes)
    PublishedServing(
        "Llama 3.3 70B bf16, v6e-8, c=64 1k/1k",
        _VT + ", MAX_CONCURRENCY=64 output",
        "llama3-70b",
        "v6e",
        8,
        64,
        "latency",
        input_len=1000,
        output_len=1000,
        reported_latency_s=25.35e-3,
        group="tpu-serving",
        notes=_VT_NOTE,
        workload="closed",
        n_requests=640,
        token_budget=512,
    ),
    PublishedServing(
        "Llama 3.3 70B bf16, v6e-8, c=128 1k/1k",
        _VT + ", MAX_CONCURRENCY=128 output",
        "llama3-70b",
        "v6e",
        8,
        128,
        "latency",
        input_len=1000,
        output_len=1000,
        reported_latency_s=35.12e-3,
        group="tpu-serving",
        notes=_VT_NOTE,
        workload="closed",
        n_requests=1280,
        token_budget=512,
    ),
)


@checked
def reconcile(
    runs: Sequence[PublishedServing] = RUNS, efficiency: Fraction = 1.0, model: EfficiencyModel | None = None
) -> list[ServingReconciliation]:
    """:func:`predict` for every run: the roofline at ``efficiency`` and the expected figure with ``model``."""
    return [predict(r, efficiency, model) for r in check_runs(runs, PublishedServing)]


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


def _pair(rows, calibrated, name: str):
    rows = check_rows(rows, ServingReconciliation)
    if calibrated is None:
        return rows, None
    if isinstance(calibrated, (str, bytes)) or not hasattr(calibrated, "__iter__"):
        raise TypeError(
            f"{name} must be a list of ServingReconciliation from reconcile(); got {type(calibrated).__name__}"
        )
    cal = list(calibrated)
    if not all(isinstance(r, ServingReconciliation) for r in cal):
        raise TypeError(f"{name} must be a list of ServingReconciliation from reconcile()")
    if [r.run.name for r in cal] != [r.run.name for r in rows]:
        raise ValueError(f"{name} must reconcile the same runs as rows, in the same order")
    return rows, cal


def source_table(rows: Sequence[ServingReconciliation], calibrated: Sequence[ServingReconciliation] | None = None):
    """The reconciliation per source and metric, as a :class:`~tpu_notes.table.Table`: how many runs, the median
    of achieved / modelled speed at ``rows``' rates (the roofline, say) and, given ``calibrated`` (the same runs
    at another efficiency), at those rates, with the lowest and highest ratio there."""
    rows, cal = _pair(rows, calibrated, "calibrated")
    groups: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault((r.run.source.split(",")[0], r.run.metric), []).append(i)
    cols = [Column("source"), Column("metric"), Column("runs"), Column("median", digits=2)]
    if cal is not None:
        cols += [Column("median, calibrated", digits=2)]
    cols += [Column("lowest", digits=2), Column("highest", digits=2)]
    out = []
    for (src, metric), idx in groups.items():
        ratios = [rows[i].ratio for i in idx]
        row = [src, "ms/token" if metric == "s/token" else metric, len(idx), median_ratio([rows[i] for i in idx])]
        if cal is not None:
            row.append(median_ratio([cal[i] for i in idx]))
            ratios = [cal[i].ratio for i in idx]
        out.append((*row, min(ratios), max(ratios)))
    return Table(cols, out, caption="Achieved / modelled speed per source and metric (1: the model is exact)")


def runs_table(
    rows: Sequence[ServingReconciliation],
    calibrated: Sequence[ServingReconciliation] | None = None,
    metric: str = "tokens/s/chip",
):
    """One line per run of ``metric`` (``"tokens/s/chip"`` or ``"s/token"``), as a collapsed
    :class:`~tpu_notes.table.Table`: the measured figure and the ratio of achieved to modelled speed at ``rows``'
    rates (column "roofline") and, given ``calibrated`` (the same runs at another efficiency), at its rates; the
    modelled figure is the measured one over the ratio for throughput, times it for time per token."""
    if not isinstance(metric, str) or metric not in ("tokens/s/chip", "s/token"):
        raise ValueError(f"metric must be 'tokens/s/chip' or 's/token'; got {metric!r}")
    rows, cal = _pair(rows, calibrated, "calibrated")
    unit = "s" if metric == "s/token" else "tokens/s"
    cols = [Column("run"), Column("measured", unit), Column("roofline", digits=2)]
    if cal is not None:
        cols.append(Column("calibrated", digits=2))
    out = []
    for i, r in enumerate(rows):
        if r.run.metric == metric:
            out.append((r.run.name, r.reported, r.ratio) + ((cal[i].ratio,) if cal is not None else ()))
    what = "time per token" if metric == "s/token" else "throughput per chip"
    return Table(cols, out, caption=f"Each run's {what}, and achieved / modelled speed", collapse=True)


__all__ = [
    "CLOSED_REQUESTS_PER_CLIENT",
    "EFFICIENCY",
    "LLAMA2_70B",
    "LLAMA2_7B",
    "MIXTRAL_8X7B",
    "MAX_SIMULATED",
    "MODES",
    "RUNS",
    "WORKLOADS",
    "PublishedServing",
    "ServingReconciliation",
    "fitted_efficiency",
    "format_table",
    "predict",
    "reconcile",
    "runs_table",
    "simulate_run",
    "source_table",
    "simulated_figure",
]
