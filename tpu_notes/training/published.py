"""Published, measured training runs with public configurations, and the model's prediction for each (Chapter 6).

Each :class:`PublishedRun` records what a source states (hardware, layout, batch, sequence length and a measured
throughput) and how it maps onto :func:`~tpu_notes.training.step_time`. Throughput is compared as **tokens per second
per chip**, which needs no FLOP-counting convention; where a source states only FLOP/s per chip, the tokens/s follow
from its own counting (``counting``: MaxText's and PaLM's count full, non-causal attention; Chapter 4's count halves
it), and the conversion is done here in code, not by hand.

Sources (all read for this chapter; figures restated, not copied):

- ``llama3``: A. Grattafiori et al., "The Llama 3 Herd of Models", arXiv 2407.21783, Table 4 and §3.3.2 (405B on
  H100: TP, PP, DP degrees, 16M-token batches of 8192, TFLOP/s per GPU and BF16 MFU; FSDP without resharding after
  the forward pass; interleaved pipeline, production microbatching not published; no activation checkpointing).
- ``tpu-recipes``: github.com/AI-Hypercomputer/tpu-recipes (commit c8cfe2f), the READMEs under
  ``training/trillium/*-MaxText`` and ``training/v5p/Llama3.1-405B-MaxText``: measured step-log lines (tokens/s/device,
  TFLOP/s/device) of MaxText configs named in ``benchmarks/maxtext_trillium_model_configs.py`` and
  ``maxtext_v5p_model_configs.py``.
- ``nemo-25.11``: github.com/NVIDIA-NeMo/Megatron-Bridge (commit 067f987), ``docs/performance-summary-archive.md``,
  "25.11 NeMo Container" pre-training tables per system (DGX-B200, DGX-GB200, DGX-H100): GPUs, precision, GBS,
  MBS, sequence length, FSDP/TP/PP/CP/VP/EP, gradient accumulation, tokens/s/GPU.
- ``maxtext-readme``: github.com/google/maxtext (commit e64f681, 2024-10-10), README "Runtime Performance Results"
  and ``MaxText/configs/v5p/*.sh`` and ``v5e/*.sh``: synthetic dense models (shapes from
  ``global_parameter_scale``), TFLOP/s per chip with non-causal attention counting. The TPU v5e multi-slice table
  (1 to 32 x v5e-256) is from the same README; the TPU v4 table (22B on 1 to 8 x v4-128) and its
  ``MaxText/configs/*xv4-128.sh`` are at commit f70c643b (2023-08-30).
- ``tpu-recipes`` also: ``training/trillium/{Mixtral-8x7B,Mixtral-8x22B,Mistral-7B,GPT3-175B}-MaxText`` and
  ``Llama3.1-8B-MaxText/v6e-8`` READMEs (step-log lines); the 8x22B config (``mixtral_8x22b_dropped``) is in MaxText's
  ``benchmarks/maxtext_trillium_model_configs.py`` at tag tpu-recipes-v0.1.2; model shapes from MaxText
  ``MaxText/configs/models/{mixtral-8x22b,gpt3-175b}.yml`` (commit e64f681).
- ``megatron-a100``: D. Narayanan et al., "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", SC21, arXiv 2104.04473, Table 1 (GPT models 1.7B to 1T on A100-80GB, vocabulary 51,200, sequence
  2048, TP, PP, GPUs, batch, achieved TFLOP/s per GPU with the paper's FLOP formula, eq. 3, which counts full
  recomputation and full attention) and the abstract (502 PFLOP/s on 3072 GPUs).
- ``nemo``: github.com/NVIDIA-NeMo/Megatron-Bridge (commit 067f987), ``docs/performance-summary-archive.md``,
  "26.04.01 NeMo Container", pre-training tables (DGX-H100 rows: GPUs, precision, GBS, MBS, sequence, TP/PP/CP/VP,
  tokens/s/GPU, model TFLOP/s/GPU).
- ``torchtitan``: github.com/pytorch/torchtitan (commit b5bcd76), ``benchmarks/llama3_h100_202412_torchtitan.md``
  (Tables 1, 3, 4, 5; H100 96 GB HBM2e at 500 W), ``benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md`` (70B,
  bf16, vanilla TP) and ``benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md`` (8B on 4 nodes of 8 H200); the
  sequence length (8192) and the activation checkpointing mode are those of ``train_configs/llama3_*.toml`` at
  torchtitan commit 9dec370 (the one the Dec. 2024 benchmark names).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from ..efficiency import ATTENTION_KERNELS, EfficiencyModel, check_efficiency
from ..gpu import GpuCluster
from ..hardware import get_chip
from ..runs import PublishedRecord, check_rows, check_runs, check_under_roofline, median_ratio
from ..runs import Reconciliation as _Reconciliation
from ..topology import Slice
from ..transformer import TransformerConfig, as_config, get_model
from ..units import Fraction, OneOf, PositiveFloat, PositiveInt, SeqLen, checked
from .frameworks import FRAMEWORKS, default_framework
from .memory import REMAT, MemoryBreakdown, training_memory
from .parallelism import Parallelism
from .step import StepTime, step_time

#: FLOP-counting conventions of the sources: attention counted over the full score matrix or the causal half.
COUNTINGS = ("noncausal", "causal")

#: The one efficiency assumption of Chapter 6: a large bf16 matmul reaches about 80% of the datasheet peak. Measured
#: "maximum achievable matmul FLOPs" (shared/facts/models.md): H100 SXM 794.5 of 989 TFLOP/s (80%), A100 SXM 271 of
#: 312 (87%), B200 1745 of 2250 (78%). No such measurement is public for TPUs; the chapter uses the same figure.
MATMUL_EFFICIENCY = 0.8


def _synthetic(name: str, d_model: int, heads: int, d_ff: int, layers: int) -> TransformerConfig:
    """MaxText's synthetic dense models: multi-head attention, head dim 128, SwiGLU, vocabulary 32,000."""
    return TransformerConfig(
        d_model=d_model,
        d_ff=d_ff,
        n_layers=layers,
        n_heads=heads,
        n_kv_heads=heads,
        d_head=128,
        vocab=32_000,
        name=name,
    )


def _megatron_gpt(name: str, heads: int, hidden: int, layers: int) -> TransformerConfig:
    """The GPT models of Narayanan et al. (2021): multi-head attention, a 2-matrix GeLU MLP of 4 x hidden,
    vocabulary 51,200, embeddings tied to the output layer (Megatron's default); learned position embeddings are a
    lookup and cost no FLOPs here."""
    return TransformerConfig(
        d_model=hidden,
        d_ff=4 * hidden,
        n_layers=layers,
        n_heads=heads,
        n_kv_heads=heads,
        d_head=hidden // heads,
        vocab=51_200,
        gated_mlp=False,
        tied_embeddings=True,
        name=f"megatron-gpt-{name}",
    )


def _megatron_tokens_per_s(flops_per_s: float, model: TransformerConfig, seq_len: int) -> float:
    """Tokens/s per GPU from the TFLOP/s per GPU of Narayanan et al. (2021), inverting their eq. 3: FLOPs per token
    ``96 l h^2 (1 + s/(6h) + V/(16 l h))``, which counts the recomputed forward pass (4 passes over the layers, 3 over
    the logits) and the full ``s x s`` attention matrix; this package's counts would differ, so the paper's own
    formula converts its figure."""
    h, L, V = model.d_model, model.n_layers, model.vocab
    per_token = 96 * L * h**2 * (1 + seq_len / (6 * h) + V / (16 * L * h))
    return flops_per_s / per_token


def _mfu(tokens_per_s: float, model, seq_len: int, chip: str, causal: bool) -> float:
    """Model FLOPs utilisation from a measured tokens/s per chip, with this package's FLOP count (no recomputation)
    over the chip's bf16 peak: for sources that state no MFU, or state it with another count (the notes say so)."""
    per_token = as_config(model).flops_per_token(seq_len, training=True, causal=causal)
    return tokens_per_s * per_token / get_chip(chip).peak_flops("bf16")


_NEMO_2511 = (
    "Megatron-Bridge performance archive, 25.11 NeMo container pre-training table (FP8-CS: per-tensor current "
    "scaling, the row's first figure). "
)


#: Mixtral 8x7B (MaxText ``mixtral-8x7b``): the preset ``"mixtral-8x7b"`` of :mod:`tpu_notes.transformer`.
MIXTRAL_8X7B = get_model("mixtral-8x7b")
#: Mixtral 8x22B (MaxText ``configs/models/mixtral-8x22b.yml``).
MIXTRAL_8X22B = TransformerConfig(
    d_model=6144,
    d_ff=16384,
    n_layers=56,
    n_heads=48,
    n_kv_heads=8,
    d_head=128,
    vocab=32_768,
    n_experts=8,
    experts_per_token=2,
    d_ff_expert=16384,
    name="mixtral-8x22b",
)
#: Mistral 7B (MaxText ``mistral-7b``); its sliding-window attention is not modelled (at 8192 tokens it is dense).
MISTRAL_7B = TransformerConfig(
    d_model=4096, d_ff=14336, n_layers=32, n_heads=32, n_kv_heads=8, d_head=128, vocab=32_000, name="mistral-7b"
)
#: GPT-3 175B as MaxText configures it (``configs/models/gpt3-175b.yml``): GeLU MLP (2 matrices), tied logits.
GPT3_175B = TransformerConfig(
    d_model=12288,
    d_ff=49152,
    n_layers=96,
    n_heads=96,
    n_kv_heads=96,
    d_head=128,
    vocab=50_304,
    gated_mlp=False,
    tied_embeddings=True,
    name="gpt3-175b",
)
#: MaxText's 2023 TPU v4 benchmark model (README at f70c643b, ``configs/1xv4-128.sh``): "22B", ReLU MLP
#: (2 matrices), 24 heads of 256, vocabulary 32,768, logits via the embedding.
MAXTEXT_V4_22B = TransformerConfig(
    d_model=6144,
    d_ff=24576,
    n_layers=48,
    n_heads=24,
    n_kv_heads=24,
    d_head=256,
    vocab=32_768,
    gated_mlp=False,
    tied_embeddings=True,
    name="maxtext-v4-22b",
)

#: Llama 2 70B: the preset ``"llama2-70b"`` of :mod:`tpu_notes.transformer` (this name is kept as an alias).
LLAMA2_70B = get_model("llama2-70b")


@dataclass(frozen=True)
class PublishedRun(PublishedRecord):
    """One measured training run and its configuration (what the source states; ``notes`` say what is assumed).
    ``name``, ``source`` and ``model`` come first (:class:`~tpu_notes.runs.PublishedRecord`); a run whose measured
    throughput beats the roofline by more than :data:`~tpu_notes.runs.ROOFLINE_TOLERANCE` is refused."""

    system: object  # topology.Slice or gpu.GpuCluster
    parallelism: Parallelism  # the stated layout in this package's terms
    batch_tokens: PositiveInt  # global batch, tokens
    seq_len: SeqLen  # tokens per sequence
    remat: Annotated[str, OneOf(REMAT)]  # the remat policy, or the closest one this package prices
    reported_mfu: Fraction  # the MFU as the source states (or computes from its own numbers)
    reported_tokens_per_s: PositiveFloat | None = None  # per chip, when the source states it
    reported_flops_per_s: PositiveFloat | None = None  # per chip, when the source states it (its counting)
    counting: Annotated[str, OneOf(COUNTINGS)] = "noncausal"  # how the source counts attention FLOPs
    circular_repeats: PositiveInt = 1  # interleaved pipeline stages per chip
    dtype: Annotated[str, OneOf(("bf16", "fp8"))] = "bf16"  # the dtype of the run's large matmuls
    attention: Annotated[str, OneOf(ATTENTION_KERNELS)] = "flash"  # the attention kernel the source states
    group: str = ""  # one of runs.GROUPS (who ran it, on what)
    notes: str = ""  # mapping choices and assumptions
    remat_assumed: bool = False  # the source does not publish the remat policy: the least recompute that fits
    async_tensor: bool | None = None  # tensor collectives decomposed into collective matmuls (torchtitan's async
    # TP); None: the family's default (decomposed on TPU, exposed on GPU)

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.system, (Slice, GpuCluster)):
            raise TypeError(f"system must be a topology.Slice or a gpu.GpuCluster; got {type(self.system).__name__}")
        if not isinstance(self.parallelism, Parallelism):
            raise TypeError(f"parallelism must be a Parallelism; got {type(self.parallelism).__name__}")
        if self.reported_tokens_per_s is None and self.reported_flops_per_s is None:
            raise ValueError("give reported_tokens_per_s or reported_flops_per_s (a measured throughput)")
        if self.async_tensor is not None and not isinstance(self.async_tensor, bool):
            raise TypeError(f"async_tensor must be True, False or None; got {self.async_tensor!r}")
        if self.parallelism.chips_per_slice != self.system.n_chips:
            raise ValueError(
                f"parallelism {self.parallelism} needs {self.parallelism.chips_per_slice} chips per "
                f"slice; system has {self.system.n_chips}"
            )
        check_under_roofline(self.measured_field, predict(self).ratio)

    @property
    def framework(self) -> str:
        """The framework that ran it (:data:`GROUP_FRAMEWORK` by its group, else the system's default): its
        launch rules, fusion, resharding and precision recipe apply to this run."""
        return GROUP_FRAMEWORK.get(self.group) or default_framework(self.system).name

    @property
    def measured_field(self) -> str:
        """The field that holds the measured throughput."""
        return "reported_tokens_per_s" if self.reported_tokens_per_s is not None else "reported_flops_per_s"

    def reported_tokens_per_chip(self) -> float:
        """Measured tokens per second per chip: stated, or the stated FLOP/s over the source's FLOPs per token."""
        if self.reported_tokens_per_s is not None:
            return self.reported_tokens_per_s
        causal = self.counting == "causal"
        per_token = as_config(self.model).flops_per_token(self.seq_len, training=True, causal=causal)
        return self.reported_flops_per_s / per_token


@dataclass(frozen=True)
class Reconciliation(_Reconciliation):
    """A published run beside the model's prediction for its configuration: ``predicted`` and ``reported`` are
    tokens/s per chip, ``ratio`` is reported / predicted (< 1: the run was slower than the model)."""

    step: StepTime  # the model's step at the given efficiency

    @property
    def predicted_tokens_per_s(self) -> float:
        """The model's tokens/s per chip (= ``predicted``)."""
        return self.predicted

    @property
    def reported_tokens_per_s(self) -> float:
        """The measured tokens/s per chip (= ``reported``)."""
        return self.reported


#: The framework of each group of runs (other groups take the system's default: MaxText on TPU, Megatron on GPU).
GROUP_FRAMEWORK = {
    "maxtext-synthetic": "maxtext",
    "maxtext-recipes": "maxtext",
    "megatron": "megatron",
    "torchtitan": "torchtitan",
}


#: Runs whose modelled peak (:func:`stated_memory`) exceeds the planner's default share of HBM
#: (:data:`~tpu_notes.training.planner.DEFAULT_HBM_FRACTION`), though they ran: what the model lacks for each.
#: The planner refuses these layouts for memory; tests/test_published.py keeps this list exact.
MEMORY_GAPS = {
    "Llama 3.1 70B, v6e-256": "the logits of a 5-sequence microbatch counted in fp32 as one live buffer (21 GB); "
    "XLA fuses the cast into the loss and MaxText can tile the vocabulary, which the model does not price",
    "Llama 3.1 8B, v6e-8": "the logits of a 3-sequence microbatch counted in fp32 as one live buffer (12.6 GB), "
    "as for the 70B run",
    "Llama 3.1 405B, 2 x v6e-256": "FSDP over DCN (MaxText's dcn_fsdp=2): the model keeps DCN slices as pure data "
    "parallelism, so each slice holds a whole copy of the weights, gradients and optimizer state",
    "32B synthetic, v5p-128": "fits the 96 GB (87.8 GB) but not the 10% headroom: the model adds the gradients to "
    "every saved activation though XLA frees activations as gradients appear (tpu_notes.memory_oracle)",
    "64B synthetic, v5p-128": "fits the 96 GB (94.8 GB) but not the 10% headroom, as the 32B run",
    "GPT-3 175B, v6e-256": "two gathered layers live at once (7.2 GB) plus gradients summed with activations: "
    "1.9 GB over the 32 GB",
}


@checked
def stated_memory(run: PublishedRun) -> MemoryBreakdown:
    """The modelled memory per chip of ``run`` as it states itself (layout, batch, remat, interleaving), kept as
    its framework keeps it: the framework's precision recipe, resharding and sharding over the context ranks
    (:mod:`tpu_notes.training.frameworks`), in bytes. :data:`MEMORY_GAPS` lists the runs whose modelled peak
    exceeds the planner's default share of HBM, and what the model lacks to fit them."""
    if not isinstance(run, PublishedRun):
        raise TypeError(f"run must be a PublishedRun; got {type(run).__name__}")
    fw = FRAMEWORKS[run.framework]
    return training_memory(
        run.model,
        run.parallelism,
        run.batch_tokens,
        run.seq_len,
        remat=run.remat,
        circular_repeats=run.circular_repeats,
        recipe=fw.recipe,
        over_context=fw.over_context,
        reshard_after_forward=fw.reshard_after_forward,
    )


def stated_step(run: PublishedRun, **step_kwargs) -> StepTime:
    """:func:`~tpu_notes.training.step_time` of ``run`` as it states itself: its model, layout, system, batch,
    sequence length, remat policy, dtype, interleaving and attention kernel, under the framework that ran it
    (:attr:`PublishedRun.framework`); ``step_kwargs`` are step_time's other keywords (``matmul_efficiency``,
    ``efficiency``, ``overlap``...)."""
    if not isinstance(run, PublishedRun):
        raise TypeError(f"run must be a PublishedRun; got {type(run).__name__}")
    return step_time(
        run.model,
        run.parallelism,
        run.system,
        run.batch_tokens,
        run.seq_len,
        remat=run.remat,
        dtype=run.dtype,
        circular_repeats=run.circular_repeats,
        attention=run.attention,
        async_tensor=run.async_tensor,
        **{"framework": run.framework, **step_kwargs},
    )


@checked
def predict(run: PublishedRun, efficiency: Fraction = 1.0, model: EfficiencyModel | None = None) -> Reconciliation:
    """Price ``run`` with :func:`~tpu_notes.training.step_time` and compare tokens/s per chip, twice: ``predicted``
    is the roofline with matmuls at ``efficiency`` of peak (1: the pure roofline, an upper bound), ``expected`` the
    same step with the :mod:`tpu_notes.efficiency` model ``model`` (default :data:`~tpu_notes.efficiency.DEFAULT`).
    """
    if not isinstance(run, PublishedRun):
        raise TypeError(f"run must be a PublishedRun; got {type(run).__name__}")
    model = check_efficiency(model, "model")
    st = stated_step(run, matmul_efficiency=efficiency, efficiency=model)
    predicted = run.batch_tokens / st.total / run.parallelism.n_chips
    reported = run.reported_tokens_per_chip()
    expected = st.expected.tokens_per_s_per_chip
    return Reconciliation(
        run=run,
        predicted=predicted,
        reported=reported,
        ratio=reported / predicted,
        expected=expected,
        expected_ratio=reported / expected,
        step=st,
    )


def _v5p(shape):
    return Slice("v5p", shape)


#: What a record says when its source does not publish the remat policy and no recomputation does not fit.
_ASSUMED_REMAT = (
    "the one with least recomputation that the modelled memory fits in the planner's default share of HBM "
    "(tests/test_published.py derives it)"
)
#: The note of a run whose source does not publish its remat policy.
_REMAT_NOT_PUBLISHED = "The remat policy is not published: " + _ASSUMED_REMAT + "."
#: NeMo 25.11 rows whose memory does not fit without recomputation: (size, chip) -> the policy assumed.
_NEMO_ASSUMED_REMAT = {("70b", "gb200"): "save_dot_except_mlp"}

RUNS: tuple[PublishedRun, ...] = (
    PublishedRun(
        "Llama 3 405B, 8192 H100",
        "llama3, Table 4 row 1",
        "llama3-405b",
        GpuCluster("h100", 8192),
        Parallelism(tensor=8, pipeline=16, data=64, microbatches=32),
        16 * 2**20,
        8192,
        "save_dot_except_mlp",
        reported_mfu=0.43,
        reported_flops_per_s=430e12,
        circular_repeats=2,
        group="megatron",
        remat_assumed=True,
        notes=_REMAT_NOT_PUBLISHED
        + " DP is FSDP that keeps gathered weights for the backward pass: priced as data parallelism (one "
        "gradient reduction per step). Microbatches (32 = one sequence each) and 2 interleaved stages per "
        "rank are assumptions: the paper does not publish its production values.",
    ),
    PublishedRun(
        "Llama 3 405B, 16384 H100",
        "llama3, Table 4 row 2",
        "llama3-405b",
        GpuCluster("h100", 16384),
        Parallelism(tensor=8, pipeline=16, data=128, microbatches=16),
        16 * 2**20,
        8192,
        "save_dot_except_mlp",
        reported_mfu=0.41,
        reported_flops_per_s=400e12,
        circular_repeats=2,
        group="megatron",
        remat_assumed=True,
        notes="As row 1 with twice the data parallelism: 16 sequences per DP group, so 16 microbatches. "
        + _REMAT_NOT_PUBLISHED,
    ),
    PublishedRun(
        "Llama 3.1 8B, v6e-256",
        "tpu-recipes, trillium/Llama3.1-8B-MaxText (llama3_1_8b_8192)",
        "llama3-8b",
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 4 * 8192,
        8192,
        "offload_layer_input",
        reported_mfu=0.4546,
        reported_tokens_per_s=7207.3,
        group="maxtext-recipes",
        notes="Custom remat offloads the layer input and attention projections to host and recomputes the rest: "
        "priced as offload_layer_input (the layer input offloaded, the rest recomputed).",
    ),
    PublishedRun(
        "Llama 3.1 70B, v6e-256",
        "tpu-recipes, trillium/Llama3.1-70B-MaxText (llama3_1_70b_8192)",
        "llama3-70b",
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 5 * 8192,
        8192,
        "offload_layer_input",
        reported_mfu=0.5033,
        reported_tokens_per_s=960.2,
        group="maxtext-recipes",
        notes="Custom remat with host offload, priced as offload_layer_input.",
    ),
    PublishedRun(
        "Llama 3.1 405B, 2 x v6e-256",
        "tpu-recipes, trillium/Llama3.1-405B-MaxText (pure_fsdp_ici)",
        "llama3-405b",
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256, dcn=2),
        512 * 8192,
        8192,
        "full_block",
        reported_mfu=0.4275,
        reported_tokens_per_s=149.48,
        group="maxtext-recipes",
        notes="FSDP over each slice and over DCN (MaxText's dcn_fsdp=2); priced as data parallelism over DCN. "
        "MaxText's tiering table quotes 38.6% for a different 405B config with no measured log.",
    ),
    PublishedRun(
        "Llama 2 70B, v6e-256",
        "tpu-recipes, trillium/Llama2-70B-MaxText (llama2_70b_4096_sc)",
        LLAMA2_70B,
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 2 * 4096,
        4096,
        "offload_layer_input",
        reported_mfu=0.4382,
        reported_tokens_per_s=905.0,
        group="maxtext-recipes",
        notes="The log line was taken with per-device batch 2 (its token count says so). qkv_proj_offloaded remat "
        "(q/k/v kept in host memory) priced as offload_layer_input.",
    ),
    PublishedRun(
        "Llama 3.1 405B, v5p-1024",
        "tpu-recipes, v5p/Llama3.1-405B-MaxText (llama3_1_405b_8192_v5p_1024)",
        "llama3-405b",
        _v5p((8, 8, 8)),
        Parallelism(fsdp=512),
        512 * 2 * 8192,
        8192,
        "offload_layer_input",
        reported_mfu=0.685,
        reported_tokens_per_s=124.6,
        counting="causal",
        group="maxtext-recipes",
        notes="512 chips (v5p-1024 counts cores). Custom remat offloading two tensors, priced as offload_layer_input.",
    ),
    PublishedRun(
        "32B synthetic, v5p-128",
        "maxtext-readme, configs/v5p/32b.sh",
        _synthetic("maxtext-32b", 8192, 64, 28672, 32),
        _v5p((4, 4, 4)),
        Parallelism(fsdp=16, tensor=4),
        64 * 6 * 2048,
        2048,
        "save_matmul_outputs",
        reported_mfu=0.7147,
        reported_flops_per_s=328e12,
        group="maxtext-synthetic",
        notes="remat 'minimal' saves the matmul outputs.",
    ),
    PublishedRun(
        "256B synthetic, v5p-1024",
        "maxtext-readme, configs/v5p/256b.sh",
        _synthetic("maxtext-256b", 16384, 128, 57344, 64),
        _v5p((8, 8, 8)),
        Parallelism(fsdp=64, tensor=8),
        512 * 1 * 2048,
        2048,
        "save_matmul_outputs",
        reported_mfu=0.6882,
        reported_flops_per_s=316e12,
        group="maxtext-synthetic",
        notes="remat 'minimal'.",
    ),
    PublishedRun(
        "1024B synthetic, v5p-4096",
        "maxtext-readme, configs/v5p/1024b.sh",
        _synthetic("maxtext-1024b", 16384, 256, 114688, 128),
        _v5p((8, 16, 16)),
        Parallelism(fsdp=128, tensor=16),
        2048 * 2 * 2048,
        2048,
        "full_block",
        reported_mfu=0.648,
        reported_flops_per_s=297e12,
        group="maxtext-synthetic",
        notes="remat 'full'.",
    ),
    PublishedRun(
        "32B synthetic, v5e-256",
        "maxtext-readme, configs/v5e/32b.sh",
        _synthetic("maxtext-32b", 8192, 64, 28672, 32),
        Slice("v5e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 4 * 2048,
        2048,
        "full_block",
        reported_mfu=0.6686,
        reported_flops_per_s=132e12,
        group="maxtext-synthetic",
        notes="remat 'full'.",
    ),
    PublishedRun(
        "128B synthetic, 4 x v5e-256",
        "maxtext-readme, configs/v5e/128b.sh",
        _synthetic("maxtext-128b", 8192, 128, 57344, 64),
        Slice("v5e", (16, 16)),
        Parallelism(fsdp=16, tensor=16, dcn=4),
        4 * 256 * 1 * 2048,
        2048,
        "offload_layer_input",
        reported_mfu=0.5493,
        reported_flops_per_s=108e12,
        group="maxtext-synthetic",
        notes="qkv_proj_offloaded remat (q/k/v kept in host memory) priced as offload_layer_input; data parallelism "
        "over DCN.",
    ),
    # -- MaxText README: the v5e multi-slice table (same model, 1 to 32 slices over DCN) -----------------------------
    *(
        PublishedRun(
            f"32B synthetic, {n} x v5e-256",
            f"maxtext-readme, v5e table ({n}x v5e-256 row), configs/v5e/32b.sh",
            _synthetic("maxtext-32b", 8192, 64, 28672, 32),
            Slice("v5e", (16, 16)),
            Parallelism(fsdp=256, dcn=n),
            n * 256 * 4 * 2048,
            2048,
            "full_block",
            reported_mfu=mfu,
            reported_flops_per_s=tflops * 1e12,
            group="maxtext-synthetic",
            notes="remat 'full'; base.yml's dcn_data_parallelism=-1 puts the slices in data parallelism over DCN, "
            "FSDP inside each slice (ici_fsdp_parallelism=-1).",
        )
        for n, tflops, mfu in (
            (2, 128, 0.6481),
            (4, 126, 0.6410),
            (8, 125, 0.6367),
            (16, 123, 0.6226),
            (32, 119, 0.6040),
        )
    ),
    PublishedRun(
        "16B synthetic, v5e-256",
        "maxtext-readme, v5e table (1x v5e-256 row), configs/v5e/16b.sh",
        _synthetic("maxtext-16b", 4096, 64, 28672, 32),
        Slice("v5e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 6 * 2048,
        2048,
        "full_block",
        reported_mfu=0.6110,
        reported_flops_per_s=120e12,
        group="maxtext-synthetic",
        notes="global_parameter_scale=16: d_model 4096, 64 heads of 128 (8192 wide), d_ff 28672, 32 layers; "
        "remat 'full'.",
    ),
    PublishedRun(
        "64B synthetic, v5p-128",
        "maxtext-readme, v5p table (64B row), configs/v5p/64b.sh",
        _synthetic("maxtext-64b", 8192, 64, 28672, 64),
        _v5p((4, 4, 4)),
        Parallelism(fsdp=16, tensor=4),
        64 * 3 * 2048,
        2048,
        "save_matmul_outputs",
        reported_mfu=0.7031,
        reported_flops_per_s=323e12,
        group="maxtext-synthetic",
        notes="remat 'minimal' saves the matmul outputs.",
    ),
    PublishedRun(
        "512B synthetic, v5p-1024",
        "maxtext-readme, v5p table (512B row), configs/v5p/512b.sh",
        _synthetic("maxtext-512b", 16384, 128, 57344, 128),
        _v5p((8, 8, 8)),
        Parallelism(fsdp=64, tensor=8),
        512 * 2 * 2048,
        2048,
        "full_block",
        reported_mfu=0.6399,
        reported_flops_per_s=294e12,
        group="maxtext-synthetic",
        notes="512 chips (v5p-1024 counts cores); remat 'full'.",
    ),
    # -- MaxText README (2023): the TPU v4 multi-slice table ---------------------------------------------------------
    *(
        PublishedRun(
            f"22B synthetic, {n} x v4-128",
            f"maxtext-readme@f70c643b, TPU v4 table ({n}x v4-128 row), configs/{n}xv4-128.sh",
            MAXTEXT_V4_22B,
            Slice("v4", (4, 4, 4)),
            Parallelism(fsdp=64, dcn=n),
            n * 64 * 16 * 1024,
            1024,
            "full_block",
            reported_mfu=mfu,
            reported_flops_per_s=tflops * 1e12,
            group="maxtext-synthetic",
            notes="64 chips per slice (v4-128 counts cores); dcn_data_parallelism=n, ici_fsdp_parallelism=64, "
            "per-device batch 16 of base.yml's max_target_length 1024; remat 'full'. The README's companion 52B "
            "table is not entered (its 2-slice row is faster than 1 slice, a compiler quirk the README flags).",
        )
        for n, tflops, mfu in ((1, 156, 0.567), (2, 152, 0.552), (4, 149, 0.543), (8, 146, 0.532))
    ),
    # -- tpu-recipes on Trillium: MoE, GPT-3 and small models ----------------------------------------------------------
    PublishedRun(
        "Mixtral 8x7B, v6e-256",
        "tpu-recipes, trillium/Mixtral-8x7B-MaxText (mixtral_8x7b_dropped)",
        MIXTRAL_8X7B,
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 12 * 4096,
        4096,
        "full_block",
        reported_mfu=0.3286,
        reported_tokens_per_s=3645.203,
        group="maxtext-recipes",
        notes="FSDP only (no expert parallelism); token dropping at capacity factor 1.25 without megablox, so the "
        "expert matmuls may do up to 1.25 x the 2-of-8 work, which neither MaxText's TFLOP/s (302.3, 32.9%) nor this "
        "package counts. Custom remat offloading the layer input and q/k/v/out projections, priced as full_block.",
    ),
    PublishedRun(
        "Mixtral 8x22B, v6e-256",
        "tpu-recipes, trillium/Mixtral-8x22B-MaxText (mixtral_8x22b_dropped)",
        MIXTRAL_8X22B,
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=64, expert=4),
        256 * 8 * 4096,
        4096,
        "offload_layer_input",
        reported_mfu=0.3614,
        reported_tokens_per_s=1326.307,
        group="maxtext-recipes",
        notes="ici_fsdp_parallelism=64, ici_expert_parallelism=4, per-device batch 8 (the log's 8,388,608 tokens "
        "agree); dropped tokens at capacity factor 1.25 (not counted); custom offload remat priced as "
        "offload_layer_input.",
    ),
    PublishedRun(
        "GPT-3 175B, v6e-256",
        "tpu-recipes, trillium/GPT3-175B-MaxText/bf16 (gpt_3_175b_bf16)",
        GPT3_175B,
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 3 * 2048,
        2048,
        "full_block",
        reported_mfu=0.4184,
        reported_tokens_per_s=357.580,
        group="maxtext-recipes",
        notes="Per-device batch 3 of 2048 tokens (the log's 1,572,864 tokens agree); remat 'full'. The fp8 recipe "
        "has no log line and v6e has no fp8 peak here, so it is not entered.",
    ),
    PublishedRun(
        "Mistral 7B, v6e-8",
        "tpu-recipes, trillium/Mistral-7B-MaxText (mistral_7b)",
        MISTRAL_7B,
        Slice("v6e", (2, 4)),
        Parallelism(fsdp=8),
        8 * 6 * 8192,
        8192,
        "offload_layer_input",
        reported_mfu=0.4695,
        reported_tokens_per_s=7776.813,
        group="maxtext-recipes",
        notes="Custom remat with host offload of the layer input and projections, priced as offload_layer_input.",
    ),
    PublishedRun(
        "Llama 3.1 8B, v6e-8",
        "tpu-recipes, trillium/Llama3.1-8B-MaxText/v6e-8 (llama3_1_8b_8192_no_collective_matmul)",
        "llama3-8b",
        Slice("v6e", (2, 4)),
        Parallelism(fsdp=8),
        8 * 3 * 8192,
        8192,
        "full_block",
        reported_mfu=0.4494,
        reported_tokens_per_s=7138.890,
        group="maxtext-recipes",
        notes="Per-device batch 3 (the log's 196,608 tokens agree); custom remat priced as full_block.",
    ),
    # -- Megatron-LM on A100 (Narayanan et al. 2021, Table 1) ----------------------------------------------------------
    *(
        PublishedRun(
            f"Megatron GPT {size}, {gpus} A100",
            f"megatron-a100, Table 1 ({size} row)",
            model,
            GpuCluster("a100", gpus),
            Parallelism(tensor=tp, pipeline=pp, data=gpus // (tp * pp), microbatches=batch // (gpus // (tp * pp))),
            batch * 2048,
            2048,
            "full_block",
            reported_mfu=_mfu(_megatron_tokens_per_s(tflops * 1e12, model, 2048), model, 2048, "a100", False),
            reported_tokens_per_s=_megatron_tokens_per_s(tflops * 1e12, model, 2048),
            attention="materialized",
            group="megatron",
            notes=f"The paper states {tflops} TFLOP/s per GPU ({pct}% of peak) counted with its eq. 3, which includes "
            "the recomputed forward pass: converted to tokens/s with that formula (_megatron_tokens_per_s); "
            "reported_mfu is this package's model-FLOP count (no recomputation) over the A100's bf16 peak. Full "
            "activation recomputation (full_block). Microbatches of one sequence (batch / data-parallel degree) and "
            "the non-interleaved 1F1B schedule are assumptions: Table 1 does not give the microbatch size. fp16 "
            "mixed precision, priced at the same peak as bf16. Data parallelism is plain (no optimizer sharding). "
            "The paper predates FlashAttention (2022): its fused softmax kernel writes the score matrix to HBM and "
            "reads it back (attention='materialized').",
        )
        for size, model, tp, pp, gpus, batch, tflops, pct in (
            ("1.7B", _megatron_gpt("1.7b", 24, 2304, 24), 1, 1, 32, 512, 137, 44),
            ("18.4B", _megatron_gpt("18.4b", 48, 6144, 40), 8, 1, 256, 1024, 135, 43),
            ("145.6B", _megatron_gpt("145.6b", 96, 12288, 80), 8, 8, 1536, 2304, 148, 47),
            ("529.6B", _megatron_gpt("529.6b", 128, 20480, 105), 8, 35, 2520, 2520, 163, 52),
            ("1008B", _megatron_gpt("1008b", 160, 25600, 128), 8, 64, 3072, 3072, 163, 52),
        )
    ),
    # -- Megatron-Core / NeMo on H100 ---------------------------------------------------------------------------------
    PublishedRun(
        "Llama 3 70B FP8, 64 H100 (NeMo)",
        "nemo, 26.04.01 pre-training, LLAMA3_70B, DGX-H100 row",
        "llama3-70b",
        GpuCluster("h100", 64),
        Parallelism(tensor=4, pipeline=8, data=2, microbatches=128),
        256 * 8192,
        8192,
        "save_matmul_outputs",
        reported_mfu=0.7561,
        reported_tokens_per_s=1664,
        counting="causal",
        circular_repeats=5,
        dtype="fp8",
        group="megatron",
        remat_assumed=True,
        notes="GBS 256, MBS 1, TP 4, PP 8, VP 5, CP 1, DDP (FSDP 0): data parallelism 2, 128 microbatches of one "
        "sequence. The table does not say which remat policy ran: "
        + _ASSUMED_REMAT
        + ". The source's 731 TFLOP/s/GPU is "
        "2.3% under "
        "this package's causal count, so reported_mfu is 1664 tokens/s x our count over the bf16 peak (989 TFLOP/s); "
        "the step is priced at the fp8 peak although attention runs in bf16. The 405B H100 row uses context "
        "parallelism 2, which cannot be expressed here, and is not entered.",
    ),
    *(
        PublishedRun(
            f"Llama 3 {size.upper()} FP8, {gpus} {chip.upper()} (NeMo 25.11)",
            f"nemo-25.11, pre-training, DGX-{chip.upper()} table, LLAMA3_{size.upper()} row",
            f"llama3-{size}",
            GpuCluster(chip, gpus),
            par,
            gbs * 8192,
            8192,
            _NEMO_ASSUMED_REMAT.get((size, chip), "none"),
            reported_mfu=_mfu(tps, f"llama3-{size}", 8192, chip, True),
            reported_tokens_per_s=tps,
            counting="causal",
            dtype="fp8",
            group="megatron",
            remat_assumed=(size, chip) in _NEMO_ASSUMED_REMAT,
            notes=_NEMO_2511
            + note
            + (
                " The table does not say which remat policy ran: " + _ASSUMED_REMAT
                if (size, chip) in _NEMO_ASSUMED_REMAT
                else " No recomputation is assumed (the table does not say)"
            )
            + "; reported_mfu is our causal count over the bf16 peak.",
        )
        for size, chip, gpus, par, gbs, tps, note in (
            (
                "8b",
                "b200",
                8,
                Parallelism(data=8, microbatches=8),
                128,
                30624.0,
                "GBS 128, MBS 2, DDP over 8 GPUs (FSDP 0), TP 1, PP 1, GA 8: eight microbatches of 2 sequences.",
            ),
            (
                "8b",
                "h100",
                8,
                Parallelism(fsdp=8, microbatches=16),
                128,
                14451.0,
                "GBS 128, MBS 1, FSDP over 8 GPUs, GA 16: sixteen microbatches of one sequence.",
            ),
            (
                "8b",
                "gb200",
                8,
                Parallelism(data=8, microbatches=8),
                128,
                31508.0,
                "GBS 128, MBS 2, DDP over 8 GPUs of one NVL72 rack, GA 8.",
            ),
            (
                "70b",
                "gb200",
                64,
                Parallelism(fsdp=64, microbatches=2),
                256,
                4312.0,
                "GBS 256, MBS 2, FSDP over 64 GPUs of one NVL72 rack, GA 2.",
            ),
        )
    ),
    # -- torchtitan on H100 / H200 ------------------------------------------------------------------------------------
    PublishedRun(
        "Llama 3.1 8B, 8 H100 (torchtitan)",
        "torchtitan, llama3_h100_202412 Table 1 (FSDP + torch.compile)",
        "llama3-8b",
        GpuCluster("h100-500w", 8),
        Parallelism(fsdp=8),
        8 * 2 * 8192,
        8192,
        "save_matmul_outputs",
        reported_mfu=_mfu(6667, "llama3-8b", 8192, "h100-500w", True),
        reported_tokens_per_s=6667,
        counting="causal",
        group="torchtitan",
        notes="Local batch 2, global 16; sequence 8192 from train_configs/llama3_8b.toml. Selective per-op "
        "activation checkpointing (saves most matmul outputs) priced as save_matmul_outputs. The GPUs are 96 GB "
        "HBM2e H100s at 500 W (2.4 TB/s), priced as hardware h100-500w (its bf16 peak is the SXM datasheet's: the "
        "500 W clock is not published). reported_mfu: our causal count over the SXM bf16 peak (the benchmark "
        "states 33-39% for its 1D 8B runs).",
    ),
    PublishedRun(
        "Llama 3.1 8B FP8, 8 H100 (torchtitan)",
        "torchtitan, llama3_h100_202412 Table 1 (FSDP + torch.compile + Float8)",
        "llama3-8b",
        GpuCluster("h100-500w", 8),
        Parallelism(fsdp=8),
        8 * 2 * 8192,
        8192,
        "save_matmul_outputs",
        reported_mfu=_mfu(8532, "llama3-8b", 8192, "h100-500w", True),
        reported_tokens_per_s=8532,
        counting="causal",
        dtype="fp8",
        group="torchtitan",
        notes="As the bf16 row, with Float8 linear layers (attention stays bf16; the step is priced at the fp8 "
        "peak). reported_mfu is over the bf16 peak.",
    ),
    PublishedRun(
        "Llama 3.1 8B FP8, 128 H100 (torchtitan)",
        "torchtitan, llama3_h100_202412 Table 3 (FSDP + torch.compile + Float8)",
        "llama3-8b",
        GpuCluster("h100-500w", 128),
        Parallelism(fsdp=128),
        128 * 2 * 8192,
        8192,
        "save_matmul_outputs",
        reported_mfu=_mfu(8380, "llama3-8b", 8192, "h100-500w", True),
        reported_tokens_per_s=8380,
        counting="causal",
        dtype="fp8",
        group="torchtitan",
        notes="Local batch 2, global 256, FSDP over 16 nodes; selective per-op checkpointing; Float8 linears.",
    ),
    PublishedRun(
        "Llama 3.1 70B, 256 H100 (torchtitan)",
        "torchtitan, asyncTP_llama3_h100_2025-06 (70B, bfloat16, vanilla TP)",
        "llama3-70b",
        GpuCluster("h100-500w", 256),
        Parallelism(fsdp=32, tensor=8),
        32 * 16 * 8192,
        8192,
        "full_block",
        reported_mfu=_mfu(597.3, "llama3-70b", 8192, "h100-500w", True),
        reported_tokens_per_s=597.3,
        counting="causal",
        group="torchtitan",
        notes="FSDP 32 x TP 8 (TP inside each node), local batch 16 per FSDP rank, torch.compile, full activation "
        "checkpointing; sequence 8192 (train_configs/llama3_70b.toml). 500 W H100s with HBM2e.",
    ),
    PublishedRun(
        "Llama 3.1 70B FP8, 256 H100 (torchtitan)",
        "torchtitan, llama3_h100_202412 Table 4 (2D)",
        "llama3-70b",
        GpuCluster("h100-500w", 256),
        Parallelism(fsdp=32, tensor=8),
        512 * 8192,
        8192,
        "full_block",
        reported_mfu=_mfu(829, "llama3-70b", 8192, "h100-500w", True),
        reported_tokens_per_s=829,
        counting="causal",
        dtype="fp8",
        group="torchtitan",
        notes="FSDP 32 x TP 8, global batch 512, Float8 linears, full activation checkpointing, no async TP.",
    ),
    PublishedRun(
        "Llama 3.1 405B FP8, 512 H100 (torchtitan)",
        "torchtitan, llama3_h100_202412 Table 5 (Interleaved 1F1B)",
        "llama3-405b",
        GpuCluster("h100-500w", 512),
        Parallelism(fsdp=8, tensor=8, pipeline=8, microbatches=16),
        256 * 8192,
        8192,
        "full_block",
        reported_mfu=_mfu(128, "llama3-405b", 8192, "h100-500w", True),
        reported_tokens_per_s=128,
        counting="causal",
        circular_repeats=2,
        dtype="fp8",
        group="torchtitan",
        async_tensor=True,
        notes="FSDP 8 x TP 8 x PP 8, global batch 256 (32 sequences per FSDP rank), Float8 + async TP, full "
        "checkpointing. Two stages per rank and 16 microbatches (torchtitan's default: one per pipeline stage) are "
        "assumptions: the benchmark does not give its split points or microbatch count.",
    ),
    PublishedRun(
        "Llama 3.1 8B FP8, 32 H200 (torchtitan)",
        "torchtitan, llama3-8b_h200_202506_trainy-whitefiber (4 nodes)",
        "llama3-8b",
        GpuCluster("h200", 32),
        Parallelism(fsdp=32),
        32 * 2 * 8192,
        8192,
        "save_matmul_outputs",
        reported_mfu=_mfu(10938, "llama3-8b", 8192, "h200", True),
        reported_tokens_per_s=10938,
        counting="causal",
        dtype="fp8",
        group="torchtitan",
        notes="Trainy on WhiteFiber with torchtitan: local batch 2, torch.compile, Float8 linears with fp8 FSDP "
        "all-gathers; llama3_8b.toml's defaults (sequence 8192, selective per-op checkpointing, FSDP over all 32).",
    ),
)


#: Llama 3 405B's long-context stage (arXiv 2407.21783, Table 4 row 3 and §3.3.2): 16,384 H100 with TP 8, CP 16,
#: PP 16, sequences of 131,072 tokens, 16 sequences per data-parallel group, 16M tokens per batch, 380 TFLOP/s per
#: GPU, 38% BF16 MFU. The table prints DP 4, but 8 × 16 × 16 × 4 is 8192 GPUs, not 16,384; a Llama 3 author
#: confirmed DP 8 (github.com/meta-llama/llama3 issue #324: "DP should be 8"), which also gives 8 × 16 × 131,072 =
#: 16M tokens. Counted like the table's other rows (full attention, ``counting="noncausal"``); the paper does not
#: say how its FLOPs count causal attention, which at 131,072 tokens is more than half of them. Not in
#: ``RUNS``, so the efficiency fit and Chapter 6's tables stay those of the 8192-token runs; Chapter 5's
#: section on context parallelism (:mod:`tpu_notes.training.context`) uses it.
LLAMA3_405B_LONG_CONTEXT = PublishedRun(
    "Llama 3 405B, 131,072 tokens, 16384 H100 (CP 16)",
    "llama3, Table 4 row 3 (DP read as 8: meta-llama/llama3 issue #324)",
    "llama3-405b",
    GpuCluster("h100", 16384),
    Parallelism(tensor=8, context=16, pipeline=16, data=8, microbatches=16),
    8 * 16 * 131_072,
    131_072,
    "none",
    reported_mfu=0.38,
    reported_flops_per_s=380e12,
    circular_repeats=2,
    group="megatron",
    notes="As the 8192-token rows (FSDP kept as data parallelism, 2 interleaved stages assumed), with context "
    "parallelism 16 over the network (TP 8 fills each NVLink node): all-gathered K/V, zig-zag chunks. 16 "
    "sequences per DP group: 16 microbatches of one sequence.",
)


@checked
def reconcile(
    runs: Sequence[PublishedRun] = RUNS, efficiency: Fraction = 1.0, model: EfficiencyModel | None = None
) -> list[Reconciliation]:
    """:func:`predict` for every run."""
    return [predict(r, efficiency, model) for r in check_runs(runs, PublishedRun)]


def fitted_efficiency(runs: Sequence[PublishedRun] = RUNS) -> float:
    """The median of reported / roofline-predicted throughput over ``runs``: the efficiency that makes the typical
    run come out exact (what Chapter 6 compares its stated assumption with)."""
    return median_ratio(reconcile(runs, 1.0))


def format_table(rows: Sequence[Reconciliation]) -> str:
    """One line per run: reported and predicted tokens/s per chip, their ratio, and what bounds the model's step."""
    lines = [f"{'run':32s} {'reported':>9} {'predicted':>9} {'ratio':>6} {'MFU rep.':>8}  bound"]
    for r in check_rows(rows, Reconciliation):
        lines.append(
            f"{r.run.name:32.32s} {r.reported:9,.0f} {r.predicted:9,.0f} "
            f"{r.ratio:6.2f} {r.run.reported_mfu:8.1%}  {r.step.bound}"
        )
    return "\n".join(lines)
