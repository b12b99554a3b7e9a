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

import statistics
from dataclasses import dataclass
from typing import Optional, Sequence

from ..gpu import GpuCluster
from ..topology import Slice
from ..transformer import TransformerConfig, as_config
from ..units import check_choice, check_positive
from .cost import flops_per_token
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
    return TransformerConfig(d_model=d_model, d_ff=d_ff, n_layers=layers, n_heads=heads, n_kv_heads=heads,
                             d_head=128, vocab=32_000, name=name)


#: Llama 2 70B (Llama 2 paper, Table 1 / HF config.json): GQA with 8 KV heads, vocabulary 32,000.
LLAMA2_70B = TransformerConfig(d_model=8192, d_ff=28672, n_layers=80, n_heads=64, n_kv_heads=8, d_head=128,
                               vocab=32_000, name="llama2-70b")


@dataclass(frozen=True)
class PublishedRun:
    """One measured training run and its configuration (what the source states; ``notes`` say what is assumed)."""

    name: str                       # short label for tables
    source: str                     # key of the module docstring's source list, with the table / file
    model: object                   # preset name or TransformerConfig
    system: object                  # topology.Slice or gpu.GpuCluster
    parallelism: Parallelism        # the stated layout in this package's terms
    batch_tokens: int               # global batch, tokens
    seq_len: int                    # tokens per sequence
    remat: str                      # closest remat policy of this package to the stated one
    reported_mfu: float             # the MFU as the source states (or computes from its own numbers)
    reported_tokens_per_s: Optional[float] = None   # per chip, when the source states it
    reported_flops_per_s: Optional[float] = None    # per chip, when the source states it (its counting)
    counting: str = "noncausal"     # how the source counts attention FLOPs
    circular_repeats: int = 1       # interleaved pipeline stages per chip
    notes: str = ""                 # mapping choices and assumptions

    def __post_init__(self):
        for f in ("name", "source", "notes"):
            if not isinstance(getattr(self, f), str):
                raise TypeError(f"{f} must be a string; got {type(getattr(self, f)).__name__}")
        as_config(self.model)
        if not isinstance(self.system, (Slice, GpuCluster)):
            raise TypeError(f"system must be a topology.Slice or a gpu.GpuCluster; got {type(self.system).__name__}")
        if not isinstance(self.parallelism, Parallelism):
            raise TypeError(f"parallelism must be a Parallelism; got {type(self.parallelism).__name__}")
        check_positive("batch_tokens", self.batch_tokens, integer=True)
        check_positive("seq_len", self.seq_len, integer=True)
        check_choice("remat", self.remat, ("none", "save_matmul_outputs", "full_block"))
        mfu = check_positive("reported_mfu", self.reported_mfu)
        if mfu > 1:
            raise ValueError(f"reported_mfu is a fraction, in (0, 1]; got {self.reported_mfu!r}")
        if self.reported_tokens_per_s is None and self.reported_flops_per_s is None:
            raise ValueError("give reported_tokens_per_s or reported_flops_per_s (a measured throughput)")
        for f in ("reported_tokens_per_s", "reported_flops_per_s"):
            if getattr(self, f) is not None:
                check_positive(f, getattr(self, f))
        check_choice("counting", self.counting, COUNTINGS)
        check_positive("circular_repeats", self.circular_repeats, integer=True)
        if self.parallelism.chips_per_slice != self.system.n_chips:
            raise ValueError(f"parallelism {self.parallelism} needs {self.parallelism.chips_per_slice} chips per "
                             f"slice; system has {self.system.n_chips}")

    def reported_tokens_per_chip(self) -> float:
        """Measured tokens per second per chip: stated, or the stated FLOP/s over the source's FLOPs per token."""
        if self.reported_tokens_per_s is not None:
            return self.reported_tokens_per_s
        causal = check_choice("counting", self.counting, COUNTINGS) == "causal"
        per_token = as_config(self.model).flops_per_token(self.seq_len, training=True, causal=causal)
        return self.reported_flops_per_s / per_token


def _v5p(shape):
    return Slice("v5p", shape)


RUNS: tuple[PublishedRun, ...] = (
    PublishedRun(
        "Llama 3 405B, 8192 H100", "llama3, Table 4 row 1", "llama3-405b", GpuCluster("h100", 8192),
        Parallelism(tensor=8, pipeline=16, data=64, microbatches=32), 16 * 2**20, 8192, "none",
        reported_mfu=0.43, reported_flops_per_s=430e12, circular_repeats=2,
        notes="DP is FSDP that keeps gathered weights for the backward pass: priced as data parallelism (one "
              "gradient reduction per step). Microbatches (32 = one sequence each) and 2 interleaved stages per "
              "rank are assumptions: the paper does not publish its production values."),
    PublishedRun(
        "Llama 3 405B, 16384 H100", "llama3, Table 4 row 2", "llama3-405b", GpuCluster("h100", 16384),
        Parallelism(tensor=8, pipeline=16, data=128, microbatches=16), 16 * 2**20, 8192, "none",
        reported_mfu=0.41, reported_flops_per_s=400e12, circular_repeats=2,
        notes="As row 1 with twice the data parallelism: 16 sequences per DP group, so 16 microbatches."),
    PublishedRun(
        "Llama 3.1 8B, v6e-256", "tpu-recipes, trillium/Llama3.1-8B-MaxText (llama3_1_8b_8192)", "llama3-8b",
        Slice("v6e", (16, 16)), Parallelism(fsdp=256), 256 * 4 * 8192, 8192, "full_block",
        reported_mfu=0.4546, reported_tokens_per_s=7207.3,
        notes="Custom remat offloads the layer input and attention projections to host and recomputes the rest: "
              "priced as full_block recomputation."),
    PublishedRun(
        "Llama 3.1 70B, v6e-256", "tpu-recipes, trillium/Llama3.1-70B-MaxText (llama3_1_70b_8192)", "llama3-70b",
        Slice("v6e", (16, 16)), Parallelism(fsdp=256), 256 * 5 * 8192, 8192, "full_block",
        reported_mfu=0.5033, reported_tokens_per_s=960.2,
        notes="Custom remat with host offload, priced as full_block."),
    PublishedRun(
        "Llama 3.1 405B, 2 x v6e-256", "tpu-recipes, trillium/Llama3.1-405B-MaxText (pure_fsdp_ici)", "llama3-405b",
        Slice("v6e", (16, 16)), Parallelism(fsdp=256, dcn=2), 512 * 8192, 8192, "full_block",
        reported_mfu=0.4275, reported_tokens_per_s=149.48,
        notes="FSDP over each slice and over DCN (MaxText's dcn_fsdp=2); priced as data parallelism over DCN. "
              "MaxText's tiering table quotes 38.6% for a different 405B config with no measured log."),
    PublishedRun(
        "Llama 2 70B, v6e-256", "tpu-recipes, trillium/Llama2-70B-MaxText (llama2_70b_4096_sc)", LLAMA2_70B,
        Slice("v6e", (16, 16)), Parallelism(fsdp=256), 256 * 2 * 4096, 4096, "save_matmul_outputs",
        reported_mfu=0.4382, reported_tokens_per_s=905.0,
        notes="The log line was taken with per-device batch 2 (its token count says so). qkv_proj_offloaded remat "
              "priced as saving the matmul outputs."),
    PublishedRun(
        "Llama 3.1 405B, v5p-1024", "tpu-recipes, v5p/Llama3.1-405B-MaxText (llama3_1_405b_8192_v5p_1024)",
        "llama3-405b", _v5p((8, 8, 8)), Parallelism(fsdp=512), 512 * 2 * 8192, 8192, "full_block",
        reported_mfu=0.685, reported_tokens_per_s=124.6, counting="causal",
        notes="512 chips (v5p-1024 counts cores). Custom remat offloading two tensors, priced as full_block."),
    PublishedRun(
        "32B synthetic, v5p-128", "maxtext-readme, configs/v5p/32b.sh", _synthetic("maxtext-32b", 8192, 64, 28672, 32),
        _v5p((4, 4, 4)), Parallelism(fsdp=16, tensor=4), 64 * 6 * 2048, 2048, "save_matmul_outputs",
        reported_mfu=0.7147, reported_flops_per_s=328e12,
        notes="remat 'minimal' saves the matmul outputs."),
    PublishedRun(
        "256B synthetic, v5p-1024", "maxtext-readme, configs/v5p/256b.sh",
        _synthetic("maxtext-256b", 16384, 128, 57344, 64), _v5p((8, 8, 8)), Parallelism(fsdp=64, tensor=8),
        512 * 1 * 2048, 2048, "save_matmul_outputs", reported_mfu=0.6882, reported_flops_per_s=316e12,
        notes="remat 'minimal'."),
    PublishedRun(
        "1024B synthetic, v5p-4096", "maxtext-readme, configs/v5p/1024b.sh",
        _synthetic("maxtext-1024b", 16384, 256, 114688, 128), _v5p((8, 16, 16)), Parallelism(fsdp=128, tensor=16),
        2048 * 2 * 2048, 2048, "full_block", reported_mfu=0.648, reported_flops_per_s=297e12,
        notes="remat 'full'."),
    PublishedRun(
        "32B synthetic, v5e-256", "maxtext-readme, configs/v5e/32b.sh", _synthetic("maxtext-32b", 8192, 64, 28672, 32),
        Slice("v5e", (16, 16)), Parallelism(fsdp=256), 256 * 4 * 2048, 2048, "full_block",
        reported_mfu=0.6686, reported_flops_per_s=132e12, notes="remat 'full'."),
    PublishedRun(
        "128B synthetic, 4 x v5e-256", "maxtext-readme, configs/v5e/128b.sh",
        _synthetic("maxtext-128b", 8192, 128, 57344, 64), Slice("v5e", (16, 16)),
        Parallelism(fsdp=16, tensor=16, dcn=4), 4 * 256 * 1 * 2048, 2048, "save_matmul_outputs",
        reported_mfu=0.5493, reported_flops_per_s=108e12,
        notes="qkv_proj_offloaded remat priced as saving the matmul outputs; data parallelism over DCN."),
)


@dataclass(frozen=True)
class Reconciliation:
    """A published run beside the model's prediction for its configuration."""

    run: PublishedRun
    step: StepTime                  # the model's step at the given efficiency
    predicted_tokens_per_s: float   # per chip
    reported_tokens_per_s: float    # per chip
    ratio: float                    # reported / predicted (1: the model is exact; < 1: the run was slower)


def predict(run: PublishedRun, efficiency: float = 1.0) -> Reconciliation:
    """Price ``run`` with :func:`~tpu_notes.training.step_time` and compare tokens/s per chip.

    ``efficiency`` is the one assumption: the fraction of peak FLOP/s a compute-bound matmul reaches in practice
    (Chapter 6 states the value it uses and why). 1 gives the roofline.
    """
    if not isinstance(run, PublishedRun):
        raise TypeError(f"run must be a PublishedRun; got {type(run).__name__}")
    eff = check_positive("efficiency", efficiency)
    if eff > 1:
        raise ValueError(f"efficiency is a fraction of peak and must be in (0, 1]; got {efficiency!r}")
    st = step_time(run.model, run.parallelism, run.system, run.batch_tokens, run.seq_len, remat=run.remat,
                   circular_repeats=run.circular_repeats, matmul_efficiency=eff)
    predicted = run.batch_tokens / st.total / run.parallelism.n_chips
    reported = run.reported_tokens_per_chip()
    return Reconciliation(run=run, step=st, predicted_tokens_per_s=predicted, reported_tokens_per_s=reported,
                          ratio=reported / predicted)


def _check_runs(runs) -> list[PublishedRun]:
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__iter__"):
        raise TypeError(f"runs must be a sequence of PublishedRun; got {type(runs).__name__}")
    runs = list(runs)
    if not runs or not all(isinstance(r, PublishedRun) for r in runs):
        raise ValueError("runs must be a non-empty sequence of PublishedRun (e.g. published.RUNS)")
    return runs


def reconcile(runs: Sequence[PublishedRun] = RUNS, efficiency: float = 1.0) -> list[Reconciliation]:
    """:func:`predict` for every run."""
    return [predict(r, efficiency) for r in _check_runs(runs)]


def fitted_efficiency(runs: Sequence[PublishedRun] = RUNS) -> float:
    """The median of reported / roofline-predicted throughput over ``runs``: the efficiency that makes the typical
    run come out exact (what Chapter 6 compares its stated assumption with)."""
    return statistics.median(r.ratio for r in reconcile(_check_runs(runs), 1.0))


def format_table(rows: Sequence[Reconciliation]) -> str:
    """One line per run: reported and predicted tokens/s per chip, their ratio, and what bounds the model's step."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of Reconciliation from reconcile(); got {type(rows).__name__}")
    rows = list(rows)
    if not all(isinstance(r, Reconciliation) for r in rows):
        raise TypeError("rows must be a list of Reconciliation from reconcile()")
    lines = [f"{'run':32s} {'reported':>9} {'predicted':>9} {'ratio':>6} {'MFU rep.':>8}  bound"]
    for r in rows:
        lines.append(f"{r.run.name:32.32s} {r.reported_tokens_per_s:9,.0f} {r.predicted_tokens_per_s:9,.0f} "
                     f"{r.ratio:6.2f} {r.run.reported_mfu:8.1%}  {r.step.bound}")
    return "\n".join(lines)
