"""Published multi-GPU serving throughputs of DeepSeek-V3 (expert-parallel decode) and Llama 3.1 405B, beside the
prediction of :mod:`tpu_notes.inference.parallel_serving` for each (Chapter 8).

Each :class:`ParallelServingRecord` restates what its source says (figures restated, not copied); ``notes`` say what
the source leaves out and what was chosen. :func:`reconcile` prices every record at the efficiency model's rates
(:data:`tpu_notes.efficiency.DEFAULT`; nothing is fitted to these rows) and :func:`format_table` prints predicted
against published output tokens per second per 8-GPU node, with ``ratio = published / predicted`` (< 1: slower than
the model). ``benchmarks/serving.py`` can print it: ``print(format_table(reconcile()))``.

Sources:

- ``sglang-ep``: The SGLang Team, "Deploying DeepSeek with PD Disaggregation and Large-scale Expert Parallelism on
  96 H100 GPUs", lmsys.org/blog/2025-05-05-large-scale-ep (2025-05-05; source file
  github.com/lm-sys/lm-sys.github.io, ``blog/2025-05-05-large-scale-ep.md``): decode on 9 nodes of 8 H100
  (EP72, DP attention, 288 expert slots with EPLB's 32 redundant experts), 256 sequences per GPU, KV cache length
  2,000, 22,282 output tokens/s per node ("Profile Results", decode table, column "SGLang (Default)"; no MTP).
- ``deepseek-profile``: the same table's "DeepSeek Profile" column, SGLang's reading of DeepSeek's published
  profile (github.com/deepseek-ai/profile-data: decode EP128, 128 requests per GPU, 4K context): 18,598 tokens/s
  per node on 16 nodes of H800.
- ``deepseek-online``: DeepSeek, "DeepSeek-V3/R1 Inference System Overview", github.com/deepseek-ai/open-infra-index,
  ``202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md`` (2025-03-01): each H800
  node delivers about 14.8k output tokens/s during decoding, a 24-hour average of the online service, decode units
  of 18 nodes (EP144, 2 routed + 1 shared expert per GPU, 32 redundant experts); SGLang's table gives 128 sequences
  per GPU and an average KV length of 4,989 for it.
- ``trtllm-405b-h200``: NVIDIA Technical Blog, "Boosting Llama 3.1 405B Performance up to 1.44x with NVIDIA
  TensorRT Model Optimizer on NVIDIA H200 GPUs" (2024-08-28), developer.nvidia.com/blog/boosting-llama-3-1-405b-
  performance-by-up-to-44-with-nvidia-tensorrt-model-optimizer-on-nvidia-h200-gpus/, Table 1: one HGX H200 node (8
  GPUs), FP8 weights, activations and KV cache (Model Optimizer recipe), 2,048 input and 128 output tokens, maximum
  throughput 463.1 output tokens/s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..gpu import GpuCluster
from ..hardware import get_chip
from ..table import Column, Table
from ..transformer import get_model
from ..units import OneOf, Positive, PositiveFloat, check_fields, checked
from .engine import deploy
from .parallel_serving import H800_IB, ep_decode_step, pipeline_decode

#: How a record is priced: "ep" (:func:`~tpu_notes.inference.parallel_serving.ep_decode_step` at the stated
#: per-GPU batch and KV length) or "static" (one node's static batch: prefill, then ``output_len`` decode steps of
#: :func:`~tpu_notes.inference.parallel_serving.pipeline_decode`).
LAYOUTS = ("ep", "static")
_Len = Annotated[int, Positive(integer=True, maximum=2**20)]


@dataclass(frozen=True)
class ParallelServingRecord:
    """One published multi-GPU serving throughput and the configuration its source states."""

    name: str  # short label
    source: str  # where it is published, with the date
    model: str  # preset of tpu_notes.transformer
    chip: str  # GPU name of tpu_notes.hardware ("h800": priced with H800_IB's stated NIC)
    n_gpus: Annotated[int, Positive(integer=True, maximum=4096)]  # GPUs of one deployment unit
    layout: Annotated[str, OneOf(LAYOUTS)]  # "ep" or "static"
    batch: _Len  # sequences per GPU ("ep") or per node ("static", None: the largest that fits)
    seq_len: _Len  # KV length ("ep") or prompt length ("static"), tokens
    reported_tokens_per_s_per_node: PositiveFloat  # output tokens/s per 8-GPU node
    output_len: _Len = 1  # generated tokens per request ("static")
    redundant_experts: Annotated[int, Positive(integer=True, allow_zero=True, maximum=1024)] = 0  # EPLB slots
    weight_dtype: str = "fp8"  # as stated
    kv_dtype: str = "bf16"  # as stated or assumed
    notes: str = ""  # what the source leaves out and what was chosen

    def __post_init__(self):
        check_fields(self)
        for f in ("name", "source", "model", "chip", "notes"):
            if not isinstance(getattr(self, f), str):
                raise TypeError(f"{f} must be a string; got {type(getattr(self, f)).__name__}")
        get_model(self.model)
        get_chip(self.chip, "chip")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}; got {self.layout!r}")


@dataclass(frozen=True)
class ParallelReconciliation:
    """A record beside its prediction: output tokens/s per node, ``ratio`` = published / predicted."""

    record: ParallelServingRecord  # the published row
    predicted: float  # output tokens/s per node, the model's
    reported: float  # output tokens/s per node, the source's
    ratio: float  # reported / predicted
    step_s: float  # the priced decode step (time per output token), s
    bound: str  # what bounds the priced step

    def __repr__(self) -> str:
        return (
            f"ParallelReconciliation({self.record.name}: reported {self.reported:,.0f}, predicted "
            f"{self.predicted:,.0f} tokens/s/node, ratio {self.ratio:.2f})"
        )


RECORDS = (
    ParallelServingRecord(
        name="SGLang DeepSeek-V3 decode, 9x8 H100 EP72",
        source="lmsys.org/blog/2025-05-05-large-scale-ep (2025-05-05), decode table, SGLang (Default)",
        model="deepseek-v3",
        chip="h100",
        n_gpus=72,
        layout="ep",
        batch=256,
        seq_len=2000,
        reported_tokens_per_s_per_node=22282.0,
        redundant_experts=32,
        notes="KV cache in bf16 (SGLang's default; not stated); no MTP; EPLB with 32 redundant experts (288 slots).",
    ),
    ParallelServingRecord(
        name="DeepSeek profile decode, 16x8 H800 EP128",
        source="lmsys.org/blog/2025-05-05-large-scale-ep, decode table, DeepSeek Profile (github.com/deepseek-ai/"
        "profile-data)",
        model="deepseek-v3",
        chip="h800",
        n_gpus=128,
        layout="ep",
        batch=128,
        seq_len=4096,
        reported_tokens_per_s_per_node=18598.0,
        notes="SGLang's reading of DeepSeek's profile; the profile runs MTP (not priced here: one token per step); "
        "KV cache assumed bf16; no redundant experts stated.",
    ),
    ParallelServingRecord(
        name="DeepSeek online decode, 18x8 H800 EP144",
        source="github.com/deepseek-ai/open-infra-index, 202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_"
        "inference_system_overview.md (2025-03-01)",
        model="deepseek-v3",
        chip="h800",
        n_gpus=144,
        layout="ep",
        batch=128,
        seq_len=4989,
        reported_tokens_per_s_per_node=14800.0,
        redundant_experts=32,
        notes="a 24-hour average of the online service (load varies; MTP in use), priced as a full batch of 128 per "
        "GPU at the stated mean KV length 4,989 (SGLang's table); KV cache assumed bf16.",
    ),
    ParallelServingRecord(
        name="TensorRT-LLM Llama 3.1 405B FP8, 1x8 H200",
        source="developer.nvidia.com/blog/boosting-llama-3-1-405b-performance-by-up-to-44-with-nvidia-tensorrt-"
        "model-optimizer-on-nvidia-h200-gpus/ (2024-08-28), Table 1, 2048 in / 128 out",
        model="llama3-405b",
        chip="h200",
        n_gpus=8,
        layout="static",
        batch=256,
        seq_len=2048,
        output_len=128,
        reported_tokens_per_s_per_node=463.1,
        kv_dtype="fp8",
        notes="maximum throughput with an unstated batch: priced as static batches of 256 prompts (prefill, then "
        "128 decode steps at the mean context), TP8 in one node (PP1); FP8 weights, matmuls and KV cache.",
    ),
)


def _chip(r: ParallelServingRecord):
    return H800_IB if r.chip == "h800" else r.chip


@checked
def predict(record: ParallelServingRecord, efficiency=None) -> ParallelReconciliation:
    """The model's output tokens/s per node for ``record`` (see the module docstring)."""
    if not isinstance(record, ParallelServingRecord):
        raise TypeError(f"record must be a ParallelServingRecord; got {type(record).__name__}")
    r = record
    m = get_model(r.model)
    cluster = GpuCluster(_chip(r), r.n_gpus)
    if r.layout == "ep":
        s = ep_decode_step(
            m,
            cluster,
            r.batch,
            r.seq_len,
            weight_dtype=r.weight_dtype,
            kv_dtype=r.kv_dtype,
            compute_dtype="fp8",
            redundant_experts=r.redundant_experts,
            efficiency=efficiency,
        )
        pred, step, bound = s.tokens_per_s_per_node, s.total, s.bound
    else:
        dep = deploy(m, cluster, weight_dtype=r.weight_dtype, kv_dtype=r.kv_dtype, compute_dtype="fp8",
                     efficiency=efficiency)  # fmt: skip
        pre = dep.prefill_step(r.seq_len, r.batch).total
        pp = pipeline_decode(m, cluster, 1, r.batch, r.seq_len + r.output_len // 2, weight_dtype=r.weight_dtype,
                             kv_dtype=r.kv_dtype, compute_dtype="fp8", efficiency=efficiency)  # fmt: skip
        total = pre + r.output_len * pp.tpot_s
        pred = r.batch * r.output_len / total * cluster.node_size / r.n_gpus
        step, bound = pp.tpot_s, "prefill" if pre > r.output_len * pp.tpot_s else "decode"
    return ParallelReconciliation(
        record=r,
        predicted=pred,
        reported=r.reported_tokens_per_s_per_node,
        ratio=r.reported_tokens_per_s_per_node / pred,
        step_s=step,
        bound=bound,
    )


def reconcile(records=RECORDS, efficiency=None) -> list[ParallelReconciliation]:
    """:func:`predict` for every record of ``records`` (a tuple or list of :class:`ParallelServingRecord`)."""
    if not isinstance(records, (tuple, list)) or not records:
        raise TypeError("records must be a non-empty tuple or list of ParallelServingRecord")
    return [predict(r, efficiency) for r in records]


def format_table(rows):
    """The reconciliation as a :class:`~tpu_notes.table.Table`: published tokens/s per node, published over
    predicted, and what bounds the predicted step."""
    if not isinstance(rows, (tuple, list)) or not all(isinstance(x, ParallelReconciliation) for x in rows):
        raise TypeError("rows must be a list of ParallelReconciliation (from reconcile())")
    cols = [
        Column("record"),
        Column("published", "tokens/s"),
        Column("ratio"),
        Column("bound"),
    ]
    out = [(x.record.name, x.reported, x.ratio, x.bound) for x in rows]
    return Table(cols, out, caption="Expert- and pipeline-parallel serving per node: published / predicted")


__all__ = [
    "LAYOUTS",
    "RECORDS",
    "ParallelReconciliation",
    "ParallelServingRecord",
    "format_table",
    "predict",
    "reconcile",
]
