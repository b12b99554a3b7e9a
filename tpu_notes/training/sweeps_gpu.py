"""Published GPU layout sweeps: the same model on the same GPUs measured under several layouts, remat policies,
schedules or overlaps, and the scaling series beside them (Chapter 6; the records :mod:`.sweeps` evaluates).

Each point is a :class:`~tpu_notes.training.published.PublishedRun`, so it is checked and priced exactly as the
published runs are. Figures are restated from the sources, never read off a plot. Sources (all read for this module):

- ``megatron-ptdp``: D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", SC21, arXiv 2104.04473, Table 2 (§5.2): PTD-P against ZeRO-3 without model parallelism for the
  174.6B and 529.6B GPT models on A100-80GB, at a fixed global batch (1536 and 2240 sequences of 2048), with the
  GPUs, the model-parallel size, the microbatch size and the achieved TFLOP/s per GPU (the paper's eq. 3, which
  counts the recomputed forward pass). Figures 11-18 (tensor vs pipeline, pipeline vs data, tensor vs data,
  microbatch size, recomputation, scatter/gather) give their figures only as plots and are not entered.
- ``megatron-sp``: V. Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models",
  MLSys 2023, arXiv 2205.05198, Table 3 (22B, 175B, 530B, 1T: heads, hidden, layers, TP 8, PP, GPUs, global and
  micro batch; sequence 2048, vocabulary 51,200, interleaving of 3 stages for 175B and 530B), Table 5 (iteration
  time with full recomputation and with selective recomputation + sequence parallelism, MFU) and §6.3 (530B at
  8-way data parallelism on 2240 GPUs: 39.15 s against 37.83 s). The Megatron-LM README of 2022 restates Table 5's
  MFU column.
- ``torchtitan``: github.com/pytorch/torchtitan (commit b5bcd76), ``benchmarks/llama3_h100_202412_torchtitan.md``
  (Tables 2-6: context parallelism, 8 to 128 GPUs, async TP, 1F1B vs interleaved 1F1B; torchtitan 9dec370,
  whose ``train_configs`` give the sequence length and whose pipeline default is one microbatch per pipeline rank),
  ``benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md`` (vanilla vs async TP, bf16 and float8 tensorwise;
  torchtitan 820504e) and ``benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md`` (4 and 8 nodes of H200).
- ``llm-foundry``: github.com/mosaicml/llm-foundry (commit 061f2c7), ``scripts/train/benchmarking/README.md``, the
  "H100 80GB BF16" table: MPT-13B at sequence 2048 with 2 sequences per GPU, no checkpointing, FSDP FULL_SHARD, on
  8 to 64 GPUs (tokens/s/GPU, MFU with the README's own formula).

:data:`GPU_SWEEPS` holds them; :func:`tpu_notes.training.sweeps.evaluate_all` prices them. Nothing is fitted.
"""

from __future__ import annotations

from ..gpu import GpuCluster
from ..transformer import TransformerConfig
from .parallelism import Parallelism
from .published import RUNS, PublishedRun, _megatron_gpt, _megatron_tokens_per_s, _mfu
from .sweep_record import LayoutSweep

SEQ_MEGATRON = 2048  # both Megatron papers train on sequences of 2048 tokens


def _run(name: str) -> PublishedRun:
    """The published run of this name (:data:`~tpu_notes.training.published.RUNS`)."""
    return {r.name: r for r in RUNS}[name]


# -- Narayanan et al. (2021), Table 2: PTD-P vs ZeRO-3 at a fixed batch ------------------------------------------------
GPT_174B = _megatron_gpt("174.6b", 96, 12288, 96)  # GPT-3: 96 layers, 96 heads, hidden 12288
GPT_530B = _megatron_gpt("529.6b", 128, 20480, 105)  # MT-NLG: 105 layers, 128 heads, hidden 20480

_PTDP_NOTE = (
    "Table 2 states the model-parallel size ({mp}) only: TP 8 inside each DGX node (the paper's rule, and every "
    "Table 1 row with more than 8 GPUs) gives PP {pp}. Microbatch 1, so {mb} microbatches per data-parallel group; "
    "the non-interleaved 1F1B schedule and full recomputation (the paper's default) are assumed. TFLOP/s per GPU "
    "are the paper's eq. 3 (recompute counted), converted to tokens/s with it; reported_mfu is this package's "
    "count over the A100 bf16 peak. fp16 priced as bf16; materialized attention (pre-FlashAttention)."
)
_ZERO_NOTE = (
    "ZeRO-3 (DeepSpeed inside the Megatron codebase) without model parallelism: FSDP over all {gpus} GPUs, "
    "microbatch {mbs}, one microbatch per step ({batch} sequences / {gpus} GPUs). Full recomputation is assumed "
    "(Table 2's TFLOP/s use the same eq. 3, which counts it). fp16 priced as bf16; materialized attention."
)


def _a100(name, source, model, gpus, par, batch_seqs, tflops, note, remat="full_block", circular=1) -> PublishedRun:
    tps = _megatron_tokens_per_s(tflops * 1e12, model, SEQ_MEGATRON)
    return PublishedRun(
        name,
        source,
        model,
        GpuCluster("a100", gpus),
        par,
        batch_seqs * SEQ_MEGATRON,
        SEQ_MEGATRON,
        remat,
        reported_mfu=_mfu(tps, model, SEQ_MEGATRON, "a100", False),
        reported_tokens_per_s=tps,
        circular_repeats=circular,
        attention="materialized",
        group="megatron",
        notes=note,
    )


def _ptdp(model, label, gpus, batch, pp, tflops) -> PublishedRun:
    data = gpus // (8 * pp)
    mb = batch // data
    return _a100(
        f"GPT {label} PTD-P, {gpus} A100",
        f"megatron-ptdp, Table 2 (PTD parallelism, {label}, {gpus} GPUs)",
        model,
        gpus,
        Parallelism(tensor=8, pipeline=pp, data=data, microbatches=mb),
        batch,
        tflops,
        _PTDP_NOTE.format(mp=8 * pp, pp=pp, mb=mb),
    )


def _zero3(model, label, gpus, batch, mbs, tflops) -> PublishedRun:
    return _a100(
        f"GPT {label} ZeRO-3, {gpus} A100",
        f"megatron-ptdp, Table 2 (ZeRO-3 without model parallelism, {label}, {gpus} GPUs)",
        model,
        gpus,
        Parallelism(fsdp=gpus, microbatches=batch // (gpus * mbs)),
        batch,
        tflops,
        _ZERO_NOTE.format(gpus=gpus, mbs=mbs, batch=batch),
    )


#: Table 2's rows: (GPUs, TFLOP/s per GPU) of PTD-P and (GPUs, microbatch, TFLOP/s) of ZeRO-3, per model.
PTDP_174B = {
    384: _ptdp(GPT_174B, "174.6B", 384, 1536, 12, 153),
    768: _ptdp(GPT_174B, "174.6B", 768, 1536, 12, 149),
    1536: _ptdp(GPT_174B, "174.6B", 1536, 1536, 12, 141),
}
ZERO3_174B = {
    384: _zero3(GPT_174B, "174.6B", 384, 1536, 4, 144),
    768: _zero3(GPT_174B, "174.6B", 768, 1536, 2, 88),
    1536: _zero3(GPT_174B, "174.6B", 1536, 1536, 1, 44),
}
PTDP_530B = {
    560: _ptdp(GPT_530B, "529.6B", 560, 2240, 35, 171),
    1120: _ptdp(GPT_530B, "529.6B", 1120, 2240, 35, 167),
    2240: _ptdp(GPT_530B, "529.6B", 2240, 2240, 35, 159),
}
ZERO3_530B = {
    640: _zero3(GPT_530B, "529.6B", 640, 2560, 4, 138),
    1120: _zero3(GPT_530B, "529.6B", 1120, 2240, 2, 98),
    2240: _zero3(GPT_530B, "529.6B", 2240, 2240, 1, 48),
}


def _ptdp_vs_zero(label, gpus, ptdp, zero, comm_bound) -> LayoutSweep:
    return LayoutSweep(
        f"GPT {label}, {gpus} A100: PTD-P vs ZeRO-3",
        f"megatron-ptdp, Table 2 ({label}, {gpus} GPUs)",
        "layout",
        "TP 8 x PP x DP (PTD-P) against ZeRO-3 over all GPUs, at the same GPUs and global batch",
        (ptdp, zero),
        comm_bound=comm_bound,
        notes="The paper attributes PTD-P's lead to less cross-node communication: ZeRO-3 gathers every layer's "
        "weights over the whole data-parallel group, and its per-GPU batch shrinks as GPUs are added."
        if comm_bound
        else "At the fewest GPUs ZeRO-3 runs microbatches of 4 and is within 6% of PTD-P.",
    )


_MEGATRON_PTDP = (
    _ptdp_vs_zero("174.6B", 384, PTDP_174B[384], ZERO3_174B[384], False),
    _ptdp_vs_zero("174.6B", 768, PTDP_174B[768], ZERO3_174B[768], True),
    _ptdp_vs_zero("174.6B", 1536, PTDP_174B[1536], ZERO3_174B[1536], True),
    _ptdp_vs_zero("529.6B", 1120, PTDP_530B[1120], ZERO3_530B[1120], True),
    _ptdp_vs_zero("529.6B", 2240, PTDP_530B[2240], ZERO3_530B[2240], True),
    LayoutSweep(
        "GPT 174.6B PTD-P, 384-1536 A100",
        "megatron-ptdp, Table 2 (PTD parallelism, 174.6B rows)",
        "nodes",
        "GPUs (data-parallel degree 4, 8, 16) at a fixed global batch of 1536: strong scaling",
        tuple(PTDP_174B.values()),
    ),
    LayoutSweep(
        "GPT 174.6B ZeRO-3, 384-1536 A100",
        "megatron-ptdp, Table 2 (ZeRO-3 rows, 174.6B)",
        "nodes",
        "GPUs (FSDP degree) at a fixed global batch of 1536; the microbatch falls from 4 to 1",
        tuple(ZERO3_174B.values()),
        comm_bound=True,
        notes="The per-GPU batch shrinks with the GPUs while every layer's weights are still gathered once per "
        "step: the gathers, over the network, decide the throughput.",
    ),
    LayoutSweep(
        "GPT 529.6B PTD-P, 560-2240 A100",
        "megatron-ptdp, Table 2 (PTD parallelism, 529.6B rows)",
        "nodes",
        "GPUs (data-parallel degree 2, 4, 8) at a fixed global batch of 2240: strong scaling",
        tuple(PTDP_530B.values()),
    ),
    LayoutSweep(
        "GPT 529.6B ZeRO-3, 640-2240 A100",
        "megatron-ptdp, Table 2 (ZeRO-3 rows, 529.6B)",
        "nodes",
        "GPUs (FSDP degree); the microbatch falls from 4 to 1",
        tuple(ZERO3_530B.values()),
        comm_bound=True,
        notes="The 640-GPU row runs a batch of 2560 (the model did not fit 560 GPUs at microbatch 4), the others 2240.",
    ),
)


# -- Korthikanti et al. (2022): full recomputation vs selective recomputation + sequence parallelism ------------------
#: Table 3 (name, heads, hidden, layers, PP, GPUs, batch, micro batch, interleaved stages) and Table 5 (iteration
#: time in s with full recomputation, with the paper's method).
_SP_MODELS = (
    ("22B", 64, 6144, 48, 1, 8, 4, 4, 1, 1.42, 1.10),
    ("175B", 96, 12288, 96, 8, 64, 64, 1, 3, 18.13, 13.75),
    ("530B", 128, 20480, 105, 35, 280, 280, 1, 3, 49.05, 37.83),
    ("1T", 160, 25600, 128, 64, 512, 512, 1, 1, 94.42, 71.49),
)
_SP_NOTE = (
    "Tokens/s per GPU = batch x 2048 / iteration time / GPUs (Table 5's iteration time). No data parallelism; TP 8, "
    "fp16 priced as bf16, materialized attention (Megatron's fused softmax, pre-FlashAttention). "
)
_SELECTIVE = (
    "Selective recomputation recomputes the attention core (QK^T, softmax, dropout, attention over V) from the "
    "saved q, k, v and keeps every other activation: priced as save_matmul_outputs, which saves the matmul outputs "
    "and recomputes the rest. Sequence parallelism (layer norms and dropout split over the TP ranks, all-gather + "
    "reduce-scatter instead of all-reduce) is not expressible here and is priced as plain tensor parallelism."
)
_FULL = "Full recomputation without sequence parallelism: full_block."


def _sp_run(label, heads, hidden, layers, pp, gpus, batch, mbs, v, seconds, selective, data=1) -> PublishedRun:
    model = _megatron_gpt(label.lower(), heads, hidden, layers)
    gpus, batch = gpus * data, batch * data
    tps = batch * SEQ_MEGATRON / seconds / gpus
    what = "selective + SP" if selective else "full recompute"
    return PublishedRun(
        f"GPT {label} {what}, {gpus} A100",
        f"megatron-sp, Tables 3 and 5 ({label}, {'present work' if selective else 'full recompute'})"
        + (f", §6.3 ({data}-way data parallelism)" if data > 1 else ""),
        model,
        GpuCluster("a100", gpus),
        Parallelism(tensor=8, pipeline=pp, data=data, microbatches=batch // data // mbs),
        batch * SEQ_MEGATRON,
        SEQ_MEGATRON,
        "save_matmul_outputs" if selective else "full_block",
        reported_mfu=_mfu(tps, model, SEQ_MEGATRON, "a100", False),
        reported_tokens_per_s=tps,
        circular_repeats=v,
        attention="materialized",
        group="megatron",
        notes=_SP_NOTE + (_SELECTIVE if selective else _FULL) + (f" {v} interleaved stages per rank." if v > 1 else ""),
    )


#: Table 5's points, per model: (full recomputation, selective + sequence parallelism).
SP_RUNS = {m[0]: (_sp_run(*m[:9], m[9], False), _sp_run(*m[:9], m[10], True)) for m in _SP_MODELS}
#: §6.3: the 530B model at 8-way data parallelism (2240 GPUs, batch x 8), 39.15 s per iteration.
SP_530B_DP8 = _sp_run(*_SP_MODELS[2][:9], 39.15, True, data=8)

_MEGATRON_SP = (
    *(
        LayoutSweep(
            f"GPT {label}, {SP_RUNS[label][0].system.n_gpus} A100: full vs selective remat",
            f"megatron-sp, Table 5 ({label} row)",
            "remat",
            "full recomputation against selective recomputation + sequence parallelism",
            SP_RUNS[label],
            notes="Table 5's 'throughput increase' (29.0-32.1%) is the ratio of the two iteration times.",
        )
        for label in SP_RUNS
    ),
    LayoutSweep(
        "GPT 22B-1T selective + SP, 8-512 A100",
        "megatron-sp, Tables 3 and 5 (present work column)",
        "model-size",
        "model size (and GPUs with it: TP 8 x PP 1, 8, 35, 64, no data parallelism)",
        tuple(r[1] for r in SP_RUNS.values()),
        notes="MFU rises with size (41.5% to 56.3%): larger matmuls, relatively less TP communication.",
    ),
    LayoutSweep(
        "GPT 530B selective + SP, 280-2240 A100",
        "megatron-sp, Table 5 (530B) and §6.3 (8-way data parallelism)",
        "nodes",
        "data-parallel degree 1 to 8 at a fixed batch per model replica (weak scaling)",
        (SP_RUNS["530B"][1], SP_530B_DP8),
        comm_bound=True,
        notes="The paper does not overlap the gradient all-reduce with the backward pass: the 3.5% slower "
        "iteration is that all-reduce.",
    ),
)


# -- torchtitan on H100 / H200 ---------------------------------------------------------------------------------------
def _titan(
    name,
    source,
    model,
    gpus,
    par,
    batch_tokens,
    seq,
    remat,
    tps,
    notes,
    dtype="bf16",
    chip="h100-500w",
    circular=1,
    async_tp=None,
) -> PublishedRun:
    return PublishedRun(
        name,
        source,
        model,
        GpuCluster(chip, gpus),
        par,
        batch_tokens,
        seq,
        remat,
        reported_mfu=_mfu(tps, model, seq, chip, True),
        reported_tokens_per_s=tps,
        counting="causal",
        circular_repeats=circular,
        dtype=dtype,
        group="torchtitan",
        notes=notes,
        async_tensor=async_tp,
    )


_ATP = "torchtitan, asyncTP_llama3_h100_2025-06"
_ATP_70B = (
    "FSDP 32 x TP 8 (TP inside each node), local batch 16, torch.compile, full activation checkpointing; "
    "sequence 8192 (train_configs/llama3_70b.toml at 820504e). 500 W H100s with HBM2e. "
)
_ATP_8B = (
    "FSDP 8 x TP 8 (TP inside each node), local batch 12 per FSDP rank, torch.compile, per-op selective "
    "checkpointing priced as save_matmul_outputs; sequence 8192 (llama3_8b.toml at 820504e). 500 W H100s. "
)
_ASYNC = (
    "Async TP decomposes the TP all-gather / reduce-scatter into steps that overlap the matmuls (torch "
    "SymmetricMemory); priced with async_tensor=True: 1/TP of the TP traffic exposed, against all of it."
)
_F8TW = "Float8 tensorwise linears (attention stays bf16; the step is priced at the fp8 peak). "


def _async_pair(label, model, gpus, par, batch_tokens, remat, vanilla, asynchronous, note, dtype, row):
    runs = []
    for mode, tps in (("vanilla TP", vanilla), ("async TP", asynchronous)):
        if isinstance(tps, PublishedRun):
            runs.append(tps)
            continue
        runs.append(
            _titan(
                f"{label}, {gpus} H100, {mode} (torchtitan)",
                f"{_ATP} ({row}, {mode})",
                model,
                gpus,
                par,
                batch_tokens,
                8192,
                remat,
                tps,
                note + _ASYNC,
                dtype=dtype,
                async_tp=mode == "async TP",
            )
        )
    return LayoutSweep(
        f"{label}, {gpus} H100: vanilla vs async TP",
        f"{_ATP} ({row})",
        "overlap",
        "TP collectives exposed (vanilla) or overlapped with the matmuls (async TP)",
        tuple(runs),
        comm_bound=True,
        notes="The benchmark exists to show the TP communication's share: async TP gains "
        f"{(runs[1].reported_tokens_per_s / runs[0].reported_tokens_per_s - 1):.0%} by hiding it.",
    )


_P70 = Parallelism(fsdp=32, tensor=8)
_P8 = Parallelism(fsdp=8, tensor=8)
_TITAN_ASYNC = (
    _async_pair(
        "Llama 3.1 70B",
        "llama3-70b",
        256,
        _P70,
        32 * 16 * 8192,
        "full_block",
        _run("Llama 3.1 70B, 256 H100 (torchtitan)"),
        652.4,
        _ATP_70B,
        "bf16",
        "70B table, bfloat16 row",
    ),
    _async_pair(
        "Llama 3.1 70B FP8",
        "llama3-70b",
        256,
        _P70,
        32 * 16 * 8192,
        "full_block",
        809.8,
        942.4,
        _ATP_70B + _F8TW,
        "fp8",
        "70B table, float8 tensorwise row",
    ),
    _async_pair(
        "Llama 3.1 8B",
        "llama3-8b",
        64,
        _P8,
        8 * 12 * 8192,
        "save_matmul_outputs",
        4378,
        4809.4,
        _ATP_8B,
        "bf16",
        "8B table, bfloat16 row",
    ),
    _async_pair(
        "Llama 3.1 8B FP8",
        "llama3-8b",
        64,
        _P8,
        8 * 12 * 8192,
        "save_matmul_outputs",
        5078.1,
        5570.1,
        _ATP_8B + _F8TW,
        "fp8",
        "8B table, float8 tensorwise row",
    ),
)

_T24 = "torchtitan, llama3_h100_202412"
_TABLE4_ASYNC = _titan(
    "Llama 3.1 70B FP8, 256 H100, async TP (torchtitan)",
    f"{_T24} Table 4 (2D + AsyncTP)",
    "llama3-70b",
    256,
    _P70,
    512 * 8192,
    8192,
    "full_block",
    876,
    "FSDP 32 x TP 8, global batch 512, Float8 linears, full activation checkpointing, async TP. " + _ASYNC,
    dtype="fp8",
    async_tp=True,
)

#: Table 5's two pipeline schedules; torchtitan 9dec370 splits each step into pipeline_parallel_degree (8)
#: microbatches by default. The stages per rank of the interleaved run are not published: 2 assumed.
_PP_NOTE = (
    "FSDP 8 x TP 8 x PP 8, global batch 256 (32 sequences per FSDP rank), Float8 + async TP, full checkpointing. "
    "8 microbatches: torchtitan 9dec370's default (pipeline_parallel_microbatches unset = the pipeline degree). "
)
_PP_405B = (
    _titan(
        "Llama 3.1 405B FP8, 512 H100, 1F1B (torchtitan)",
        f"{_T24} Table 5 (1F1B)",
        "llama3-405b",
        512,
        Parallelism(fsdp=8, tensor=8, pipeline=8, microbatches=8),
        256 * 8192,
        8192,
        "full_block",
        100,
        _PP_NOTE + "One stage per rank.",
        dtype="fp8",
        async_tp=True,
    ),
    _titan(
        "Llama 3.1 405B FP8, 512 H100, interleaved 1F1B, 8 microbatches (torchtitan)",
        f"{_T24} Table 5 (Interleaved 1F1B)",
        "llama3-405b",
        512,
        Parallelism(fsdp=8, tensor=8, pipeline=8, microbatches=8),
        256 * 8192,
        8192,
        "full_block",
        128,
        _PP_NOTE + "Two stages per rank assumed (the split points are not published). The same measurement is "
        "in published.RUNS with 16 microbatches assumed.",
        dtype="fp8",
        circular=2,
        async_tp=True,
    ),
)


def _cp_points(label, model, gpus, tp, pp, local, seqs_tps, note, row) -> tuple:
    out = []
    for fsdp, cp, seq, tps in seqs_tps:
        par = Parallelism(fsdp=fsdp, context=cp, tensor=tp, pipeline=pp, microbatches=local if pp > 1 else 1)
        out.append(
            _titan(
                f"{label} FP8, {gpus} H100, CP {cp}, {seq} tokens (torchtitan)",
                f"{_T24} {row} (FSDP {fsdp}, CP {cp})",
                model,
                gpus,
                par,
                fsdp * local * seq,
                seq,
                "full_block",
                tps,
                note,
                dtype="fp8",
                async_tp=tp > 1 and "async TP" in note,
            )
        )
    return tuple(out)


_CP_8B = _cp_points(
    "Llama 3.1 8B",
    "llama3-8b",
    8,
    1,
    1,
    1,
    ((8, 1, 32768, 3890), (4, 2, 65536, 2540), (2, 4, 131072, 1071), (1, 8, 262144, 548)),
    "FSDP x CP over one node of 8, local batch 1 (262,144 tokens per step at every point), torch.compile + Float8, "
    "full activation checkpointing.",
    "Table 2",
)
_CP_405B = _cp_points(
    "Llama 3.1 405B",
    "llama3-405b",
    512,
    8,
    8,
    8,
    ((8, 1, 32768, 76), (4, 2, 65536, 47), (2, 4, 131072, 31), (1, 8, 262144, 16)),
    "TP 8 x PP 8 x FSDP x CP, local batch 8 (2,097,152 tokens per step at every point), torch.compile + Float8 + "
    "async TP, 1F1B with 8 microbatches (torchtitan's default: the pipeline degree), full checkpointing.",
    "Table 6",
)

_TITAN_8B_128 = _titan(
    "Llama 3.1 8B, 128 H100 (torchtitan)",
    f"{_T24} Table 3 (FSDP + torch.compile)",
    "llama3-8b",
    128,
    Parallelism(fsdp=128),
    128 * 2 * 8192,
    8192,
    "save_matmul_outputs",
    6514,
    "Local batch 2, global 256, FSDP over 16 nodes, torch.compile; selective per-op checkpointing priced as "
    "save_matmul_outputs. 500 W H100s with HBM2e.",
)
_TRAINY_8 = _titan(
    "Llama 3.1 8B FP8, 64 H200 (torchtitan)",
    "torchtitan, llama3-8b_h200_202506_trainy-whitefiber (8 nodes)",
    "llama3-8b",
    64,
    Parallelism(fsdp=64),
    64 * 2 * 8192,
    8192,
    "save_matmul_outputs",
    10753,
    "As the 4-node run of published.RUNS on 8 nodes: local batch 2, torch.compile, Float8 linears with fp8 FSDP "
    "all-gathers, selective per-op checkpointing, FSDP over all 64.",
    dtype="fp8",
    chip="h200",
)

_TORCHTITAN = (
    *_TITAN_ASYNC,
    LayoutSweep(
        "Llama 3.1 70B FP8, 256 H100: 2D vs 2D + async TP",
        f"{_T24} Table 4",
        "overlap",
        "TP collectives exposed (2D) or overlapped with the matmuls (2D + AsyncTP)",
        (_run("Llama 3.1 70B FP8, 256 H100 (torchtitan)"), _TABLE4_ASYNC),
        comm_bound=True,
    ),
    LayoutSweep(
        "Llama 3.1 405B FP8, 512 H100: 1F1B vs interleaved",
        f"{_T24} Table 5",
        "layout",
        "pipeline schedule: 1F1B (one stage per rank) against interleaved 1F1B (two, assumed)",
        _PP_405B,
        comm_bound=True,
        notes="8 microbatches over 8 stages: the bubble ((p-1)/m of the step under 1F1B) decides the order, and "
        "interleaving divides it by the stages per rank.",
    ),
    LayoutSweep(
        "Llama 3.1 8B FP8, 8 H100: CP 1-8, 32k-256k",
        f"{_T24} Table 2",
        "context",
        "context length 32,768 to 262,144 with the context-parallel degree (FSDP x CP = 8), tokens per step fixed",
        _CP_8B,
        comm_bound=False,
        notes="Attention's s^2 work, not the K/V exchange, dominates the drop: the source gives no breakdown.",
    ),
    LayoutSweep(
        "Llama 3.1 405B FP8, 512 H100: CP 1-8, 32k-256k",
        f"{_T24} Table 6",
        "context",
        "context length 32,768 to 262,144 with the context-parallel degree (FSDP x CP = 8), tokens per step fixed",
        _CP_405B,
    ),
    LayoutSweep(
        "Llama 3.1 8B, 8-128 H100 (torchtitan)",
        f"{_T24} Tables 1 and 3 (FSDP + torch.compile)",
        "nodes",
        "1 node to 16 nodes at 2 sequences per GPU (weak scaling, FSDP over all GPUs)",
        (_run("Llama 3.1 8B, 8 H100 (torchtitan)"), _TITAN_8B_128),
    ),
    LayoutSweep(
        "Llama 3.1 8B FP8, 8-128 H100 (torchtitan)",
        f"{_T24} Tables 1 and 3 (FSDP + torch.compile + Float8)",
        "nodes",
        "1 node to 16 nodes at 2 sequences per GPU (weak scaling, FSDP over all GPUs)",
        (_run("Llama 3.1 8B FP8, 8 H100 (torchtitan)"), _run("Llama 3.1 8B FP8, 128 H100 (torchtitan)")),
    ),
    LayoutSweep(
        "Llama 3.1 8B FP8, 32-64 H200 (Trainy)",
        "torchtitan, llama3-8b_h200_202506_trainy-whitefiber",
        "nodes",
        "4 nodes to 8 nodes at 2 sequences per GPU (weak scaling, FSDP over all GPUs)",
        (_run("Llama 3.1 8B FP8, 32 H200 (torchtitan)"), _TRAINY_8),
    ),
)


# -- MosaicML llm-foundry: MPT-13B on 8 to 64 H100 -------------------------------------------------------------------
#: MPT-13B as the benchmark counted it: d_model 5120, 40 heads, 40 layers, 4 x MLP (GeLU, 2 matrices), vocabulary
#: 50,368, tied embeddings; its NumParams (12,853,954,560 at sequence 2048) also holds a learned position
#: embedding and biases, which cost no matmul FLOPs worth pricing.
MPT_13B = TransformerConfig(
    d_model=5120,
    d_ff=20480,
    n_layers=40,
    n_heads=40,
    n_kv_heads=40,
    d_head=128,
    vocab=50_368,
    gated_mlp=False,
    tied_embeddings=True,
    name="mpt-13b",
)
_MPT_ROWS = ((8, 4792), (16, 4767), (32, 4811), (64, 4800))  # GPUs, tokens/s/GPU (13b, 2048 rows)
_MPT = tuple(
    PublishedRun(
        f"MPT-13B, {gpus} H100 (llm-foundry)",
        f"llm-foundry, benchmarking README, H100 80GB BF16 table (13b, 2048, {gpus} GPUs)",
        MPT_13B,
        GpuCluster("h100", gpus),
        Parallelism(fsdp=gpus),
        gpus * 2 * 2048,
        2048,
        "none",
        reported_mfu=_mfu(tps, MPT_13B, 2048, "h100", False),
        reported_tokens_per_s=tps,
        counting="noncausal",
        group="gpu-other",
        notes="Microbatch 2, no gradient accumulation (2 sequences per GPU), amp_bf16, FSDP FULL_SHARD over all "
        "GPUs, no activation checkpointing; FlashAttention (llm-foundry's default attention kernel).",
    )
    for gpus, tps in _MPT_ROWS
)
_LLM_FOUNDRY = (
    LayoutSweep(
        "MPT-13B, 8-64 H100 (llm-foundry)",
        "llm-foundry, benchmarking README at 061f2c7, H100 80GB BF16 table (13b rows at sequence 2048)",
        "nodes",
        "1 node to 8 nodes at 2 sequences per GPU (weak scaling, FSDP over all GPUs)",
        _MPT,
        notes="Flat within 1%: FSDP's gathers stay hidden behind 4096 tokens per GPU.",
    ),
)

#: The published GPU sweeps: Megatron on A100 (PTD-P vs ZeRO-3, recomputation), torchtitan on H100/H200 (async TP,
#: pipeline schedules, context parallelism, nodes), llm-foundry on H100 (nodes).
GPU_SWEEPS: tuple[LayoutSweep, ...] = _MEGATRON_PTDP + _MEGATRON_SP + _TORCHTITAN + _LLM_FOUNDRY

__all__ = ["GPT_174B", "GPT_530B", "GPU_SWEEPS", "MPT_13B", "SP_RUNS"]
