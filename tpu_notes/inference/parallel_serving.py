"""Expert and pipeline parallelism at serving time (Chapter 8): how DeepSeek-V3 and Llama 3.1 405B are served on
several GPU nodes, beside the one tensor-parallel replica of :func:`~tpu_notes.inference.deploy`.

**Expert parallelism at decode** (:func:`ep_decode_step`). ``expert`` ranks (every GPU of a
:class:`~tpu_notes.gpu.GpuCluster`) each run attention for their own ``batch_per_rank`` sequences over their own KV
caches (data-parallel attention), hold every non-routed weight (attention, the dense layers, the shared experts, the
router, the embeddings: replicated), and ``(n_experts + redundant_experts) / expert`` routed experts of every MoE
layer. One step of ``R = batch_per_rank · expert`` sequences costs each rank, in seconds:

- **kv**: its own caches, ``batch_per_rank · seq_len`` tokens, at the achieved HBM rate; for MLA the slower of
  that read and the absorbed attention's FLOPs (:func:`~tpu_notes.inference.decode_attention`) at the efficiency
  model's attention fraction, as the engine prices it;
- **dense**: the slower of reading the replicated weights and their matmuls over ``batch_per_rank`` rows (the
  efficiency model's matmul fraction at ``[rows, D] @ [D, F/1]``);
- **experts**: the slower of reading the rank's hosted experts (each one visited: ``R · k / E`` rows reach every
  expert, far above one) and their matmuls: ``batch_per_rank · k`` expert-rows per rank, each expert's grouped
  matmul ``[R · k / E, D] @ [D, F_e]`` at the matmul fraction of that shape (DeepGEMM's masked layout);
- **all_to_all**: per MoE layer, a dispatch of ``batch_per_rank · k · D`` elements in ``dispatch_dtype`` (FP8 plus
  one fp32 scale per 128 elements) and a combine of as many in ``combine_dtype`` (BF16), as DeepEP's low-latency
  kernels move them (github.com/deepseek-ai/DeepEP, README, "low-latency kernels": FP8 dispatch, BF16 combine, the
  figure DeepSeek-V3's report states, arXiv:2412.19437 sec. 3.3). The share ``(node - 1) / expert`` of a rank's
  destinations sits in its node (NVLink at ``Chip.nvlink_bw``), ``(expert - node) / expert`` across (its NIC,
  ``Chip.dcn_bw``); the two go in parallel, the slower sets the time, at the efficiency model's achieved link
  fraction, plus one call's latency on the slower link;
- **overhead**: the efficiency model's per-layer decode overhead, once per layer per micro-batch.

**Overlap** (``overlap=True``, DeepSeek's decode: two micro-batches, one's all-to-all under the other's attention
and MoE; the DeepSeek-V3/R1 inference system overview, github.com/deepseek-ai/open-infra-index,
``202502OpenSourceWeek/day_6_one_more_thing_deepseekV3R1_inference_system_overview.md``, 2025-03-01). Assumed here:
the batch splits in two halves; each half reads every weight again (the compute of one step is twice that of a
half batch); communication hides under compute as far as compute lasts and the other way round, so
``total = max(compute, all_to_all) + overhead``. Without overlap the parts add up. Nothing here is fitted to a
published throughput: every rate is :data:`tpu_notes.efficiency.DEFAULT`'s (or the model passed).

**Pipeline parallelism for a dense model** (:func:`pipeline_decode`): ``stages`` stages of ``L / stages`` layers,
each tensor-parallel over ``tensor = n_gpus / stages`` GPUs of one node. A stage's step is the engine's
(:func:`~tpu_notes.inference.deploy` of the model cut to ``L / stages`` layers on ``tensor`` GPUs; each stage is
priced with the embedding and LM head, which only the first and last hold: an overcount of ``V · D`` weights per
stage, about 1% for Llama 3.1 405B at two stages); ``stages`` micro-batches of ``batch / stages`` sequences are in
flight, and each sends its ``[rows, D]`` BF16 activations to the next stage, every GPU of the stage its ``1 /
tensor`` share over its own NIC (exposed: ``exposed["pipeline"] = 1``). A token's latency is ``stages · (stage +
send)``; throughput is ``batch`` tokens per such cycle.

The engine's internal rates are not used: everything is recomputed from the public records
(:mod:`tpu_notes.hardware`, :mod:`tpu_notes.transformer`, :mod:`tpu_notes.efficiency`), as the task that built this
module was told to.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Annotated

from .. import rules
from ..efficiency import EfficiencyModel, check_efficiency
from ..gpu import GpuCluster
from ..hardware import get_chip
from ..transformer import as_config
from ..units import Bool, OneOf, Positive, checked, dtype_bytes, fmt
from .engine import deploy
from .long_context import decode_attention
from .step import Batch, ComputeDType, Context, StorageDType

__all__ = [
    "FP8_SCALE_GROUP",
    "H800_IB",
    "EpDecodeStep",
    "PipelineDecode",
    "ep_decode_step",
    "ep_all_to_all_bytes",
    "ep_batch_for_tpot",
    "ep_throughput_curve",
    "pipeline_decode",
]

#: DeepSeek's H800 nodes as its papers describe them: the H800 SXM of :mod:`tpu_notes.hardware` with one 400 Gb/s
#: InfiniBand NIC per GPU, 50 GB/s each way (DeepSeek-V3 technical report, arXiv:2412.19437, sec. 3.2.2: "cross-node
#: GPUs are fully interconnected with IB (50 GB/s)"; 'Insights into DeepSeek-V3', arXiv:2505.09343, sec. 2: eight
#: 400G InfiniBand CX7 NICs per node). The hardware table leaves the H800's NIC unstated; this record states it here.
H800_IB = replace(get_chip("h800"), dcn_bw=50e9)

#: Elements per FP8 scale in DeepEP's dispatch (one fp32 scale per 128 channels: DeepSeek-V3 report sec. 3.3.2,
#: fine-grained quantization of activations in 1x128 tiles).
FP8_SCALE_GROUP = 128
_CommDType = Annotated[str, OneOf(("fp8", "bf16"))]
_Redundant = Annotated[int, Positive(integer=True, allow_zero=True, maximum=4096)]
_Degree = Annotated[int, Positive(integer=True, maximum=4096)]


def _element_bytes(dtype: str) -> float:
    """Bytes one activation element takes on the wire: FP8 carries one fp32 scale per :data:`FP8_SCALE_GROUP`."""
    return 1.0 + 4.0 / FP8_SCALE_GROUP if dtype == "fp8" else float(dtype_bytes(dtype))


def _cluster(system, argument: str = "system") -> GpuCluster:
    if not isinstance(system, GpuCluster):
        raise TypeError(
            f"{argument} must be a tpu_notes.gpu.GpuCluster (expert and pipeline serving are priced on GPU nodes); "
            f"got {type(system).__name__}"
        )
    return system


# ------------------------------------------------------------------------------------------------- experts
@dataclass(frozen=True)
class EpDecodeStep:
    """One decode step of an expert-parallel deployment, per rank, in seconds (see the module docstring)."""

    kv: float  # the rank's KV caches read (MLA: or its attention FLOPs, if slower), s
    dense: float  # replicated weights: max(read, matmuls), s
    experts: float  # hosted routed experts: max(read, grouped matmuls), s
    all_to_all: float  # dispatch + combine over all MoE layers, s
    overhead: float  # per-layer decode overhead, all layers and micro-batches, s
    total: float  # max(compute, all_to_all) + overhead with overlap, else the sum, s
    compute: float  # kv + dense + experts (both micro-batches), s
    expert: int  # EP ranks (GPUs)
    batch_per_rank: int  # sequences each rank decodes
    seq_len: int  # tokens of context per sequence
    rows_per_expert: float  # R·k/E: rows each routed expert multiplies per step (per micro-batch: half)
    weight_bytes_per_rank: float  # weights one rank holds, bytes
    kv_bytes_per_rank: float  # caches one rank holds, bytes
    fits: bool  # weights + caches within the rank's HBM less the reserve
    node_size: int  # GPUs per node

    @property
    def tokens_per_s_per_node(self) -> float:
        """Output tokens per second of one node (one token per sequence per step)."""
        return self.batch_per_rank * self.node_size / self.total

    @property
    def bound(self) -> str:
        """The largest part: "kv", "dense", "experts", "all_to_all" or "overhead"."""
        p = {k: getattr(self, k) for k in ("kv", "dense", "experts", "all_to_all", "overhead")}
        return max(p, key=p.get)

    def __repr__(self) -> str:
        return (
            f"EpDecodeStep(EP{self.expert}, {self.batch_per_rank} seq/rank at {self.seq_len:,} tokens: total "
            f"{fmt(self.total, 's')} = max(compute {fmt(self.compute, 's')} [kv {fmt(self.kv, 's')}, dense "
            f"{fmt(self.dense, 's')}, experts {fmt(self.experts, 's')}], all-to-all {fmt(self.all_to_all, 's')}) + "
            f"overhead {fmt(self.overhead, 's')}; {self.tokens_per_s_per_node:,.0f} tokens/s/node"
            + ("" if self.fits else "; does NOT fit")
            + ")"
        )


@checked
def ep_all_to_all_bytes(
    model,
    batch_per_rank: Batch,
    *,
    dispatch_dtype: _CommDType = "fp8",
    combine_dtype: _CommDType = "bf16",
) -> tuple[float, float]:
    """``(dispatch, combine)`` bytes one rank sends per MoE layer: ``batch_per_rank · k · D`` elements each, FP8
    (with its scales) out and BF16 back (DeepEP's low-latency mode)."""
    m = _moe(model)
    elems = batch_per_rank * m.experts_per_token * m.d_model
    return elems * _element_bytes(dispatch_dtype), elems * _element_bytes(combine_dtype)


def _moe(model):

    m = as_config(model)
    if not m.is_moe:
        raise ValueError(f"model must be a mixture of experts for expert-parallel serving; {m.name or m} is dense")
    return m


def _param_split(m) -> tuple[float, float]:
    """``(replicated matmul params read per step, routed params of one expert, all MoE layers)``."""
    routed_all = m.n_moe_layers * m.n_experts * m.expert_params()
    replicated = m.param_count() - routed_all - m.vocab * m.d_model * (0 if m.tied_embeddings else 1)
    # the input embedding is a lookup (batch rows), not a read of the table; the LM head is read in full
    return float(replicated), float(m.n_moe_layers * m.expert_params())


def _ep_compute_seconds(
    m, c, e, b: float, seq_len: int, ep: int, hosted: int, weight_dtype, kv_dtype, compute_dtype
) -> tuple[float, float, float]:
    """``(kv, dense, experts)`` seconds of one micro-batch of ``b`` sequences of ``seq_len`` tokens on one of
    ``ep`` ranks of chip ``c`` (efficiency model ``e``): its KV caches read (MLA: or its attention FLOPs, if
    slower), the replicated weights (max of read and matmuls), and its ``hosted`` routed experts (max of read and
    grouped matmuls over the rows routed to them)."""
    E, k, D = m.n_experts, m.experts_per_token, m.d_model
    wb = dtype_bytes(weight_dtype)
    replicated, per_expert = _param_split(m)
    hbm = c.hbm_bw * e.hbm
    peak = c.peak_flops(compute_dtype) * e.sustained_fraction(c)
    att = decode_attention(m, seq_len, batch=1, kv_dtype=kv_dtype)
    kv_read = b * att.kv_bytes / hbm
    kv = max(kv_read, b * att.flops / (c.peak_flops("bf16") * e.attention_fraction(c) * e.sustained_fraction(c)))
    if not m.is_mla:
        kv = kv_read
    f_dense = e.fraction(c, b, D, m.d_ff)
    dense_mm = 2.0 * b * (m.matmul_params_per_token() - m.n_moe_layers * k * m.expert_params())
    dense = max(replicated * wb / hbm, dense_mm / (peak * f_dense))
    rows_e = b * ep * k / E
    f_exp = e.fraction(c, rows_e, D, m.expert_ff)
    exp_mm = 2.0 * b * k * per_expert
    experts = max(hosted * per_expert * wb / hbm, exp_mm / (peak * f_exp))
    return kv, dense, experts


def _ep_all_to_all_seconds(
    m, c, e, batch_per_rank: int, ep: int, node: int, micro: int, dispatch_dtype, combine_dtype
) -> float:
    """Seconds of one step's dispatch and combine AllToAlls over all MoE layers on ``ep`` ranks in nodes of
    ``node``: each rank's bytes to the other ranks of its node over NVLink and to the rest over InfiniBand (the
    slower of the two), plus a latency per call (two per micro-batch per layer); 0 on one rank."""
    disp, comb = ep_all_to_all_bytes(m, batch_per_rank, dispatch_dtype=dispatch_dtype, combine_dtype=combine_dtype)
    inside, across = (min(node, ep) - 1) / ep, max(ep - node, 0) / ep
    t_nv = (disp + comb) * inside / (c.nvlink_bw * e.link("nvlink"))
    t_ib = (disp + comb) * across / (c.dcn_bw * e.link("ib"))
    link = "ib" if across else "nvlink"
    calls = 2 * micro * m.n_moe_layers
    a2a = m.n_moe_layers * max(t_nv, t_ib) + (calls * e.latency(link) if ep > 1 else 0.0)
    if ep == 1:
        a2a = 0.0
    return a2a


def _ep_rank_bytes(m, hosted: int, batch_per_rank: int, seq_len: int, weight_dtype, kv_dtype) -> tuple[float, float]:
    """``(weights, KV caches)`` bytes one rank holds: the replicated weights, the LM head (untied embeddings) and its
    ``hosted`` experts; ``batch_per_rank`` caches of ``seq_len`` tokens."""
    replicated, per_expert = _param_split(m)
    lm_head = m.vocab * m.d_model * (0 if m.tied_embeddings else 1)
    w_rank = (replicated + lm_head + hosted * per_expert) * dtype_bytes(weight_dtype)
    kv_rank = batch_per_rank * seq_len * m.kv_bytes_per_token(kv_dtype)
    return w_rank, kv_rank


@checked
def ep_decode_step(
    model,
    system,
    batch_per_rank: Batch,
    seq_len: Context,
    *,
    weight_dtype: StorageDType = "fp8",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "fp8",
    dispatch_dtype: _CommDType = "fp8",
    combine_dtype: _CommDType = "bf16",
    redundant_experts: _Redundant = 0,
    overlap: Bool = True,
    reserve_fraction: Annotated[float, Positive(maximum=0.99)] = 0.1,
    efficiency: EfficiencyModel | None = None,
) -> EpDecodeStep:
    """One decode step of ``model`` served expert-parallel over every GPU of ``system`` (a
    :class:`~tpu_notes.gpu.GpuCluster`), ``batch_per_rank`` sequences of ``seq_len`` tokens per GPU (see the module
    docstring). Refuses (:func:`tpu_notes.rules.expert_degree`, naming ``system``) a rank count that does not
    divide ``n_experts + redundant_experts``."""
    m = _moe(model)
    sysm = _cluster(system)
    e = check_efficiency(efficiency)
    c, ep, node = sysm.chip, sysm.n_gpus, sysm.node_size
    slots = m.n_experts + redundant_experts
    rules.expert_degree(m.with_(n_experts=slots), ep, argument="system")
    hosted = slots // ep
    E, k = m.n_experts, m.experts_per_token
    micro = 2 if overlap and batch_per_rank >= 2 else 1
    per_micro = _ep_compute_seconds(
        m, c, e, batch_per_rank / micro, seq_len, ep, hosted, weight_dtype, kv_dtype, compute_dtype
    )
    kv, dense, experts = (micro * x for x in per_micro)
    a2a = _ep_all_to_all_seconds(m, c, e, batch_per_rank, ep, node, micro, dispatch_dtype, combine_dtype)
    overhead = e.decode_overhead * m.n_layers * micro
    comp = kv + dense + experts
    total = (max(comp, a2a) if micro == 2 else comp + a2a) + overhead
    w_rank, kv_rank = _ep_rank_bytes(m, hosted, batch_per_rank, seq_len, weight_dtype, kv_dtype)
    return EpDecodeStep(
        kv=kv,
        dense=dense,
        experts=experts,
        all_to_all=a2a,
        overhead=overhead,
        total=total,
        compute=comp,
        expert=ep,
        batch_per_rank=batch_per_rank,
        seq_len=seq_len,
        rows_per_expert=batch_per_rank * ep * k / E,
        weight_bytes_per_rank=w_rank,
        kv_bytes_per_rank=kv_rank,
        fits=w_rank + kv_rank <= c.hbm_bytes * (1.0 - reserve_fraction),
        node_size=node,
    )


@checked
def ep_throughput_curve(
    model,
    system,
    seq_len: Context,
    batches: tuple = (16, 32, 64, 128, 256),
    **kwargs,
) -> list[EpDecodeStep]:
    """:func:`ep_decode_step` at each per-rank batch of ``batches`` (a tuple of at most 64 whole numbers):
    per-node throughput and step time as the batch grows. ``kwargs`` go to :func:`ep_decode_step`."""
    if not isinstance(batches, tuple) or not 1 <= len(batches) <= 64:
        raise ValueError(f"batches must be a tuple of 1 to 64 per-rank batch sizes; got {batches!r}")
    for b in batches:
        if type(b) is not int or not 1 <= b <= 2**20:
            raise ValueError(f"batches must hold whole per-rank batch sizes in [1, 2**20]; got {b!r} in {batches!r}")
    return [ep_decode_step(model, system, b, seq_len, **kwargs) for b in batches]


@checked
def ep_batch_for_tpot(
    model,
    system,
    seq_len: Context,
    tpot_s: Annotated[float, Positive(maximum=10.0)],
    **kwargs,
) -> EpDecodeStep | None:
    """The step at the largest per-rank batch (a power of two up to 4096, or the largest that fits) whose step
    time meets ``tpot_s`` seconds per output token, or None when not even one sequence does. The step time grows
    with the batch, so the search is a bisection over whole batches."""
    lo, hi = 0, 4096
    best = None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        s = ep_decode_step(model, system, mid, seq_len, **kwargs)
        if s.total <= tpot_s and s.fits:
            lo, best = mid, s
        else:
            hi = mid - 1
    return best


# ------------------------------------------------------------------------------------------------ pipeline
@dataclass(frozen=True)
class PipelineDecode:
    """Decode with ``stages`` pipeline stages, each tensor-parallel over ``tensor`` GPUs (see the module docstring)."""

    stages: int  # pipeline stages
    tensor: int  # GPUs per stage (tensor parallelism, inside one node)
    batch: int  # sequences in flight, all micro-batches together
    micro_batch: int  # sequences per micro-batch (batch / stages)
    stage_s: float  # one stage's engine step on one micro-batch, s
    send_s: float  # one inter-stage send of a micro-batch's activations, s
    tpot_s: float  # a token's latency: stages x (stage + send), s
    tokens_per_s: float  # output tokens per second, all stages
    n_gpus: int  # GPUs of the deployment
    node_size: int  # GPUs per node
    fits: bool  # every stage's weights and caches fit

    @property
    def tokens_per_s_per_node(self) -> float:
        """Output tokens per second per node of ``node_size`` GPUs."""
        return self.tokens_per_s * self.node_size / self.n_gpus

    def __repr__(self) -> str:
        return (
            f"PipelineDecode(PP{self.stages} x TP{self.tensor}, batch {self.batch} in {self.stages} micro-batches: "
            f"stage {fmt(self.stage_s, 's')} + send {fmt(self.send_s, 's')}, TPOT {fmt(self.tpot_s, 's')}, "
            f"{self.tokens_per_s:,.0f} tokens/s" + ("" if self.fits else "; does NOT fit") + ")"
        )


@checked
def pipeline_decode(
    model,
    system,
    stages: _Degree,
    batch: Batch,
    seq_len: Context,
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType = "bf16",
    efficiency: EfficiencyModel | None = None,
) -> PipelineDecode:
    """Decode ``batch`` sequences of ``seq_len`` tokens on ``system`` (a :class:`~tpu_notes.gpu.GpuCluster`) cut
    into ``stages`` pipeline stages, each tensor-parallel inside a node (see the module docstring). Refuses
    (:mod:`tpu_notes.rules`, naming ``stages``) stages that do not divide the layers, the GPUs, or the batch, or that
    leave a stage's tensor group across nodes; and, naming ``stages``, a stage whose weights do not fit its GPUs."""

    m = as_config(model)
    sysm = _cluster(system)
    e = check_efficiency(efficiency)
    n = sysm.n_gpus
    rules.pipeline_stages(m, stages, argument="stages")
    rules.even_stages(m, stages, argument="stages")
    if n % stages:
        raise ValueError(f"stages ({stages}) must divide the {n} GPUs of system")
    if batch % stages:
        raise ValueError(f"batch ({batch}) must be a multiple of stages ({stages}): one micro-batch per stage")
    tensor = n // stages
    if tensor > 1 and sysm.node_size % tensor:
        raise rules.Illegal(
            "tensor across nodes",
            f"stages ({stages}) leaves {tensor} GPUs per stage, which must divide the {sysm.node_size}-GPU node "
            f"(each stage is tensor-parallel inside one node); use at least {max(1, n // sysm.node_size)} stages",
        )
    stage_model = m.with_(n_layers=m.n_layers // stages, n_dense_layers=min(m.n_dense_layers, m.n_layers // stages))
    try:
        dep = deploy(
            stage_model,
            GpuCluster(sysm.chip, tensor, node_size=sysm.node_size),
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            compute_dtype=compute_dtype,
            efficiency=e,
        )
    except ValueError as err:
        raise ValueError(
            f"stages ({stages}): one stage of {stage_model.n_layers} layers on {tensor} GPUs: {err}"
        ) from None
    micro = batch // stages
    step = dep.decode_step(micro, seq_len, allow_unfit=True)
    fits = batch * seq_len <= dep.kv_capacity_tokens  # every stage holds the caches of all micro-batches
    across = stages > 1 and tensor >= sysm.node_size
    per_gpu = micro * m.d_model * 2.0 / tensor
    if stages == 1:
        send = 0.0
    elif across:
        send = per_gpu / (sysm.nic_bw * e.link("ib")) + e.latency("ib")
    else:
        send = per_gpu / (sysm.chip.nvlink_bw * e.link("nvlink")) + e.latency("nvlink")
    tpot = stages * (step.total + send)
    return PipelineDecode(
        stages=stages,
        tensor=tensor,
        batch=batch,
        micro_batch=micro,
        stage_s=step.total,
        send_s=send,
        tpot_s=tpot,
        tokens_per_s=batch / tpot,
        n_gpus=n,
        node_size=sysm.node_size,
        fits=fits,
    )
