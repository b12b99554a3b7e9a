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
- ``maxtext-readme``: github.com/google/maxtext (commit e64f681, 2024-10-10), README "Runtime Performance Results"
  and ``MaxText/configs/v5p/*.sh`` and ``v5e/*.sh``: synthetic dense models (shapes from
  ``global_parameter_scale``), TFLOP/s per chip with non-causal attention counting.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from ..gpu import GpuCluster
from ..runs import PublishedRecord, check_rows, check_runs, check_under_roofline, median_ratio
from ..runs import Reconciliation as _Reconciliation
from ..topology import Slice
from ..transformer import TransformerConfig, as_config, get_model
from ..units import Fraction, OneOf, PositiveFloat, PositiveInt, checked
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
    seq_len: PositiveInt  # tokens per sequence
    remat: Annotated[str, OneOf(("none", "save_matmul_outputs", "full_block"))]  # closest remat policy here
    reported_mfu: Fraction  # the MFU as the source states (or computes from its own numbers)
    reported_tokens_per_s: PositiveFloat | None = None  # per chip, when the source states it
    reported_flops_per_s: PositiveFloat | None = None  # per chip, when the source states it (its counting)
    counting: Annotated[str, OneOf(COUNTINGS)] = "noncausal"  # how the source counts attention FLOPs
    circular_repeats: PositiveInt = 1  # interleaved pipeline stages per chip
    dtype: Annotated[str, OneOf(("bf16", "fp8"))] = "bf16"  # the dtype of the run's large matmuls
    group: str = ""  # one of runs.GROUPS (who ran it, on what)
    notes: str = ""  # mapping choices and assumptions

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.system, (Slice, GpuCluster)):
            raise TypeError(f"system must be a topology.Slice or a gpu.GpuCluster; got {type(self.system).__name__}")
        if not isinstance(self.parallelism, Parallelism):
            raise TypeError(f"parallelism must be a Parallelism; got {type(self.parallelism).__name__}")
        if self.reported_tokens_per_s is None and self.reported_flops_per_s is None:
            raise ValueError("give reported_tokens_per_s or reported_flops_per_s (a measured throughput)")
        if self.parallelism.chips_per_slice != self.system.n_chips:
            raise ValueError(
                f"parallelism {self.parallelism} needs {self.parallelism.chips_per_slice} chips per "
                f"slice; system has {self.system.n_chips}"
            )
        check_under_roofline(self.measured_field, predict(self).ratio)

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


@checked
def predict(run: PublishedRun, efficiency: Fraction = 1.0) -> Reconciliation:
    """Price ``run`` with :func:`~tpu_notes.training.step_time` and compare tokens/s per chip.

    ``efficiency`` is the one assumption: the fraction of peak FLOP/s a compute-bound matmul reaches in practice
    (Chapter 6 states the value it uses and why). 1 gives the roofline.
    """
    if not isinstance(run, PublishedRun):
        raise TypeError(f"run must be a PublishedRun; got {type(run).__name__}")
    st = step_time(
        run.model,
        run.parallelism,
        run.system,
        run.batch_tokens,
        run.seq_len,
        remat=run.remat,
        dtype=run.dtype,
        circular_repeats=run.circular_repeats,
        matmul_efficiency=efficiency,
    )
    predicted = run.batch_tokens / st.total / run.parallelism.n_chips
    reported = run.reported_tokens_per_chip()
    return Reconciliation(run=run, predicted=predicted, reported=reported, ratio=reported / predicted, step=st)


def _v5p(shape):
    return Slice("v5p", shape)


RUNS: tuple[PublishedRun, ...] = (
    PublishedRun(
        "Llama 3 405B, 8192 H100",
        "llama3, Table 4 row 1",
        "llama3-405b",
        GpuCluster("h100", 8192),
        Parallelism(tensor=8, pipeline=16, data=64, microbatches=32),
        16 * 2**20,
        8192,
        "none",
        reported_mfu=0.43,
        reported_flops_per_s=430e12,
        circular_repeats=2,
        group="megatron",
        notes="DP is FSDP that keeps gathered weights for the backward pass: priced as data parallelism (one "
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
        "none",
        reported_mfu=0.41,
        reported_flops_per_s=400e12,
        circular_repeats=2,
        group="megatron",
        notes="As row 1 with twice the data parallelism: 16 sequences per DP group, so 16 microbatches.",
    ),
    PublishedRun(
        "Llama 3.1 8B, v6e-256",
        "tpu-recipes, trillium/Llama3.1-8B-MaxText (llama3_1_8b_8192)",
        "llama3-8b",
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 4 * 8192,
        8192,
        "full_block",
        reported_mfu=0.4546,
        reported_tokens_per_s=7207.3,
        group="maxtext-recipes",
        notes="Custom remat offloads the layer input and attention projections to host and recomputes the rest: "
        "priced as full_block recomputation.",
    ),
    PublishedRun(
        "Llama 3.1 70B, v6e-256",
        "tpu-recipes, trillium/Llama3.1-70B-MaxText (llama3_1_70b_8192)",
        "llama3-70b",
        Slice("v6e", (16, 16)),
        Parallelism(fsdp=256),
        256 * 5 * 8192,
        8192,
        "full_block",
        reported_mfu=0.5033,
        reported_tokens_per_s=960.2,
        group="maxtext-recipes",
        notes="Custom remat with host offload, priced as full_block.",
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
        "save_matmul_outputs",
        reported_mfu=0.4382,
        reported_tokens_per_s=905.0,
        group="maxtext-recipes",
        notes="The log line was taken with per-device batch 2 (its token count says so). qkv_proj_offloaded remat "
        "priced as saving the matmul outputs.",
    ),
    PublishedRun(
        "Llama 3.1 405B, v5p-1024",
        "tpu-recipes, v5p/Llama3.1-405B-MaxText (llama3_1_405b_8192_v5p_1024)",
        "llama3-405b",
        _v5p((8, 8, 8)),
        Parallelism(fsdp=512),
        512 * 2 * 8192,
        8192,
        "full_block",
        reported_mfu=0.685,
        reported_tokens_per_s=124.6,
        counting="causal",
        group="maxtext-recipes",
        notes="512 chips (v5p-1024 counts cores). Custom remat offloading two tensors, priced as full_block.",
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
        "save_matmul_outputs",
        reported_mfu=0.5493,
        reported_flops_per_s=108e12,
        group="maxtext-synthetic",
        notes="qkv_proj_offloaded remat priced as saving the matmul outputs; data parallelism over DCN.",
    ),
)


@checked
def reconcile(runs: Sequence[PublishedRun] = RUNS, efficiency: Fraction = 1.0) -> list[Reconciliation]:
    """:func:`predict` for every run."""
    return [predict(r, efficiency) for r in check_runs(runs, PublishedRun)]


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
