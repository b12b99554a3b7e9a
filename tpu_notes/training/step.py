"""The time of one training step for a layout on a system (a TPU slice or a GPU cluster): compute, each collective,
the pipeline bubble (Chapter 5).

Two steps, each a small function:

1. :func:`map_to_slice` places each parallelism degree on the slice's physical torus axes. A kind takes whole axes
   when their sizes multiply to its degree (a whole axis keeps its wraparound); otherwise it also takes a
   contiguous part of one axis, which is priced as a line (no wraparound). Kinds are placed in order of how much
   bandwidth they need (tensor, expert, FSDP, data, pipeline), so tensor parallelism gets whole rings first.
   On a :class:`~tpu_notes.gpu.GpuCluster` the same order fills each NVLink node first: a kind keeps as many of its
   members inside a node as the GPUs the earlier kinds left there, and spans nodes over the scale-out network for
   the rest; the earlier kinds sit inside it like mesh axes, so on a multi-level fat tree its collectives are
   priced with the GPUs they spread over (``span`` of :meth:`~tpu_notes.gpu.GpuCluster.collective_time`).
2. :func:`step_time` prices one step of a Transformer with :mod:`tpu_notes.collectives`:

   - **compute**: training FLOPs per chip (causal attention included, plus what ``remat`` recomputes, plus the
     KV projections repeated on every tensor rank that holds a replicated KV head) / peak, or, if longer, the time
     to read this chip's gathered weights from HBM three times per microbatch (forward, and the two backward
     matmuls): tiny microbatches make the matmuls memory-bound, as in Chapter 1;
   - **FSDP**: per microbatch, an AllGather of this chip's weights, once without remat (XLA keeps the gathered
     copy for the backward pass: :data:`tpu_notes.parallel.FINDINGS`, "fsdp-gathers-once") or twice with it, and
     one reduction of the gradients: a ReduceScatter over ``fsdp``, or, with ``data`` or ``context`` ranks too,
     one AllReduce over all of those axes at once, as XLA compiles it ("dp-fsdp-one-reduction"). Where the framework
     shards the weights over the context ranks too (MaxText, torchtitan: :mod:`tpu_notes.training.frameworks`), the
     gathers and the reduction run over ``fsdp × context``; with ``gather_once`` each weight is gathered once per
     step and kept across microbatches and pipeline steps, its gradient reduced once;
   - **data** (no FSDP): one AllReduce of the gradients over ``data × context`` per step; **DCN**: the slice's
     gradients AllReduced over DCN at ``slice chips × W_dcn`` (the large-ring form ``2V / W``, as in the
     chapter's critical batch);
   - **context** (ring attention): per layer and microbatch, the keys and values of the whole sequence gathered
     over the context ranks (again in the backward pass under remat), and their gradients reduce-scattered;
   - **tensor**: per layer and microbatch, AllGather + ReduceScatter of the ``[tokens, D]`` activations around
     attention and around the MLP (4), their transposes in the backward pass with one ReduceScatter per input
     projection as XLA compiles separate weights (q, k, v; gate and up: "tp-backward-per-projection", 7 in all)
     or one per block with fused weights (``fused_projections``; 4), and the AllGather, ReduceScatter and
     AllGather of the recomputed forward under ``remat="full_block"`` (3; ``"save_qkv_proj"`` repeats the
     ReduceScatter and the MLP's AllGather, 2; ``"save_dot_except_mlp"`` the MLP's AllGather, 1);
   - **expert**: two AllToAlls (dispatch, combine) per MoE layer, forward and backward;
   - **host** (``remat="offload_layer_input"``): each layer's input (this chip's ``1/tensor`` of it) written to host
     memory in the forward pass and read back in the backward, per microbatch, over the chip's host link
     (``Chip.pcie_bw``); it overlaps compute like the collectives (XLA's host offload is asynchronous DMA);
   - **pipeline**: one activation and one gradient send per microbatch (one hop, one link), and the bubble
     ``compute × (P − 1) / M``. Stages that do not split the layers evenly are priced at the busiest one
     (:func:`~tpu_notes.training.memory.stage_layers`): its compute, weights and activations set the step.

   With ``overlap=True`` communication hides under compute (``max``, the chapter's lower bound); otherwise they
   add. The bubble always adds.

A layout the model cannot take is refused, each with the argument and its limit: a tensor degree that does not
divide the query heads and ``d_ff`` (every rank holds whole heads), or neither divides nor is a multiple of the KV
heads (KV heads fewer than the degree are replicated), a context degree that does not divide the sequence, more
pipeline stages × circular repeats than layers, expert parallelism on a dense model or not dividing the experts,
and a batch that is not a whole number of sequences. (The planner's legality rules go further: see
:mod:`tpu_notes.training.planner`.)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

from .. import collectives as coll
from .. import rules
from ..efficiency import ATTENTION_KERNELS, EfficiencyModel, check_efficiency
from ..system import NETWORK, NODE, PLACEMENT_ORDER, AxisPart, System, check_system
from ..transformer import ALL_REMAT_POLICIES, OFFLOAD_REMAT_POLICIES, TransformerConfig, as_config
from ..units import Bool, DTypeName, Fraction, NonNegativeFloat, OneOf, PositiveInt, SeqLen, checked, dtype_bytes, fmt
from .cost import flops_per_token
from .expected import ExpectedStep, _bracketed_times, _expected_step
from .frameworks import FRAMEWORKS, default_framework
from .memory import Remat, _chip_params, _kv_replication, _param_counts, _stage_layers
from .parallelism import Parallelism

#: A kind of parallelism, as a ``Layout`` method's argument (``PLACEMENT_ORDER``: the most bandwidth-hungry first;
#: ``AxisPart``, ``NODE`` and ``NETWORK`` live in :mod:`tpu_notes.system` and are re-exported here).
ParallelKind = Annotated[str, OneOf(PLACEMENT_ORDER)]


@dataclass(frozen=True)
class Layout:
    """A :class:`~tpu_notes.training.Parallelism` placed on a :class:`~tpu_notes.system.System`: the axes of a
    :class:`~tpu_notes.topology.Slice`, or the nodes and network of a :class:`~tpu_notes.gpu.GpuCluster`."""

    parallelism: Parallelism
    slice: System
    parts: Mapping[str, tuple[AxisPart, ...]]  # kind -> the axis parts it uses (empty for a degree of 1)
    _cache: dict = field(default_factory=dict, compare=False, repr=False, hash=False)  # collective times per call

    @checked
    def collective(
        self,
        kind: ParallelKind,
        op: Annotated[str, OneOf(coll.KINDS)],
        nbytes: NonNegativeFloat,
        hop_latency: NonNegativeFloat,
    ) -> float:
        """Seconds of collective ``op`` ("all-gather", "all-reduce", ...) over the chips of parallelism ``kind``."""
        return self._cached((kind,), op, nbytes, hop_latency)

    @checked
    def collective_over(
        self,
        kinds: tuple,
        op: Annotated[str, OneOf(coll.KINDS)],
        nbytes: NonNegativeFloat,
        hop_latency: NonNegativeFloat,
    ) -> float:
        """Seconds of collective ``op`` over the chips of several kinds at once (e.g. one gradient reduction over
        ``("data", "fsdp")``): the union of their axis parts on a torus; on a GPU cluster the product of their degrees,
        with the NVLink members of each."""
        return self._cached(kinds, op, nbytes, hop_latency)

    def _cached(self, kinds: tuple, op: str, nbytes: float, hop_latency: float, phases: str | None = None) -> float:
        """``phases`` as in the GPU cluster's ``collective_time`` (None: "sequence" for a tensor group alone, else
        "max", the book's teaching form; the expected step asks for "sequence" everywhere)."""
        if isinstance(kinds, str) or not isinstance(kinds, tuple) or not kinds:
            raise TypeError(f"kinds must be a non-empty tuple of parallelism kinds {PLACEMENT_ORDER}; got {kinds!r}")
        for k in kinds:
            if k not in PLACEMENT_ORDER:
                raise ValueError(f"kinds must name kinds of {PLACEMENT_ORDER}; got {k!r}")
        if phases is None:
            phases = "sequence" if kinds == ("tensor",) else "max"
        key = (kinds, op, nbytes, hop_latency, phases)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._collective_over(kinds, coll.canonical_kind(op), nbytes, hop_latency, phases)
        return hit

    def _collective_over(self, kinds: tuple, op: str, nbytes: float, hop_latency: float, phases: str) -> float:
        parts = tuple(pt for k in kinds for pt in self.parts[k])
        if not parts:
            return 0.0
        group = math.prod(getattr(self.parallelism, k) for k in kinds)
        # the kinds placed before these sit inside them (a mesh): the group spreads over their devices too
        last = max(PLACEMENT_ORDER.index(k) for k in kinds)
        span = math.prod(getattr(self.parallelism, k) for k in PLACEMENT_ORDER[: last + 1])
        return self.slice.group_collective(
            op, nbytes, parts, group=group, span=span, hop_latency=hop_latency, phases=phases
        )

    @checked
    def sizes(self, kind: ParallelKind) -> tuple[int, ...]:
        """Chips of each axis part ``kind`` uses (``()`` for a degree of 1)."""
        return tuple(p.size for p in self.parts[kind])

    @checked
    def wraps(self, kind: ParallelKind) -> tuple[bool, ...]:
        """Wraparound of each axis part ``kind`` uses."""
        return tuple(p.wraparound for p in self.parts[kind])

    def describe(self) -> str:
        """E.g. ``"tensor: x4(line); fsdp: y16(ring) z16(ring) x4(line)"``; on GPUs ``"tensor: node8; data: net64"``."""
        names = "xyzw"

        def part(p):
            if p.axis == NODE:
                return f"node{p.size}"
            if p.axis == NETWORK:
                return f"net{p.size}"
            return f"{names[p.axis]}{p.size}({'ring' if p.wraparound else 'line'})"

        out = [
            f"{kind}: " + " ".join(part(p) for p in self.parts[kind] if p.size > 1)
            for kind in PLACEMENT_ORDER
            if self.parts[kind]
        ]
        return "; ".join(out) or "one chip"


def map_to_slice(parallelism: Parallelism, slc: System) -> Layout:
    """Place ``parallelism`` on the system ``slc`` (a TPU ``Slice`` or a ``GpuCluster``) with its own
    ``place`` method, the kinds in ``PLACEMENT_ORDER`` (see the module docstring); ``ValueError`` when the
    degrees do not fit."""
    if not isinstance(parallelism, Parallelism):
        raise TypeError(f"parallelism must be a Parallelism; got {type(parallelism).__name__}")
    check_system(slc, "slice")
    parts = slc.place({kind: getattr(parallelism, kind) for kind in PLACEMENT_ORDER})
    if parallelism.dcn > 1 and not slc.joins_over_dcn:
        raise ValueError(
            f"dcn counts TPU slices joined over DCN; a {type(slc).__name__} already includes its whole network "
            "(use dcn=1)"
        )
    return Layout(parallelism=parallelism, slice=slc, parts=parts)


@dataclass(frozen=True)
class StepTime:
    """One training step on one chip, in seconds (and the utilisation it implies)."""

    compute: float  # max(flops_time, hbm_time), seconds
    flops_time: float  # training FLOPs (remat included) / peak, seconds
    hbm_time: float  # weight reads from HBM (3 per microbatch) / HBM bandwidth, seconds
    collectives: Mapping[str, float]  # seconds of each kind's communication ("fsdp", "tensor", ...)
    bubble: float  # pipeline idle time, seconds
    comms: float  # sum of the collectives, seconds
    total: float  # the step, seconds
    bound: str  # "compute", "hbm", or the kind whose communication sets the step
    mfu: float  # model FLOPs (no remat) / (total × peak): the roofline's MFU, an upper bound
    hfu: float  # hardware FLOPs (with remat) / (total × peak)
    expected: ExpectedStep | None = None  # the same step at the efficiency model's rates (a forecast)

    @property
    def comms_ratio(self) -> float:
        """Communication over compute time (> 1: communication-bound)."""
        return self.comms / self.compute if self.compute else math.inf

    def __repr__(self) -> str:
        return (
            f"StepTime(total={fmt(self.total, 's')}, compute={fmt(self.compute, 's')}, comms={fmt(self.comms, 's')}"
            f"{_bracketed_times(self.collectives)}, bubble={fmt(self.bubble, 's')}, bound={self.bound!r}, "
            f"roofline mfu={self.mfu:.1%}"
            + (
                f"; expected total={fmt(self.expected.total, 's')}, mfu={self.expected.mfu:.1%}"
                if self.expected is not None
                else ""
            )
            + ")"
        )


def _check_layout(
    model, parallelism: Parallelism, batch_tokens: int, seq_len: int, circular_repeats: int = 1
) -> TransformerConfig:
    """Refuse a layout ``model`` cannot take (:func:`tpu_notes.rules.training_layout`: heads, context chunks,
    stages, experts, whole sequences and batch shards), naming the argument and its limit; return the model's
    config. :func:`step_time`, the memory model and the planner all call it."""
    m = as_config(model)
    rules.training_layout(m, parallelism, batch_tokens, seq_len, circular_repeats)
    return m


@checked
def step_time(
    model,
    parallelism: Parallelism,
    slice,
    batch_tokens: PositiveInt,
    seq_len: SeqLen,
    *,
    remat: Remat = "full_block",
    dtype: DTypeName = "bf16",
    overlap: Bool = True,
    hop_latency: NonNegativeFloat | None = None,
    circular_repeats: PositiveInt = 1,
    matmul_efficiency: Fraction = 1.0,
    layout: Layout | None = None,
    attention: Annotated[str, OneOf(ATTENTION_KERNELS)] = "flash",
    efficiency: EfficiencyModel | None = None,
    fused_projections: Bool | None = None,
    reshard_after_forward: Bool | None = None,
    framework: Annotated[str, OneOf(tuple(FRAMEWORKS))] | None = None,
    gather_once: Bool = False,
    async_tensor: Bool | None = None,
) -> StepTime:
    """Seconds of one training step of ``model`` with ``parallelism`` on ``slice`` (``parallelism.dcn`` copies of
    it over DCN), for a global batch of ``batch_tokens`` tokens in sequences of ``seq_len``. ``slice`` is a
    :class:`~tpu_notes.system.System`: a TPU :class:`~tpu_notes.topology.Slice` or a
    :class:`~tpu_notes.gpu.GpuCluster`. See the module docstring for what is priced and what is refused;
    ``hop_latency`` defaults to the system's (``Chip.hop_latency``: 1 µs per ICI hop, 5 µs per GPU ring step);
    ``circular_repeats`` (``v``, at most the layers per stage) gives each pipeline stage ``v`` interleaved groups
    of layers, dividing the bubble by ``v`` and multiplying the stage-boundary sends by ``v``;
    ``matmul_efficiency`` is the fraction of peak FLOP/s the matmuls reach, in (0, 1] (1: the roofline; Chapter 6
    calibrates it against published runs); ``layout`` reuses a placement from :func:`map_to_slice`;
    ``fused_projections`` says whether the QKV and gate-up weights are fused (one tensor-parallel backward
    reduction per block), ``reshard_after_forward`` whether FSDP drops each gathered weight after the forward pass
    and gathers it again for the backward even without remat (defaults: the framework's).

    The result is the roofline (``total``, ``mfu``: upper bounds) with ``expected``, the same step at the rates of
    the :class:`~tpu_notes.efficiency.EfficiencyModel` ``efficiency`` (default :data:`tpu_notes.efficiency.DEFAULT`;
    see :mod:`tpu_notes.training.expected`), whose ``attention`` kernel is ``"flash"`` or ``"materialized"``.

    ``framework`` (:mod:`tpu_notes.training.frameworks`; default MaxText on a TPU slice, Megatron-LM on a GPU
    cluster) sets the defaults of ``fused_projections`` and ``reshard_after_forward``, and whether the weights are
    sharded over the context ranks too (then gathered over ``fsdp × context``). ``gather_once`` gathers each FSDP
    weight once per step and keeps it across microbatches and pipeline steps, reducing its gradient once
    (MaxText's ``pipeline_fsdp_ag_once``, Llama 3's FSDP without resharding). ``async_tensor``: tensor collectives
    split into collective matmuls (XLA on TPU, torchtitan's async TP), ``1/tensor`` of them exposed (None: the
    efficiency model's ``collective_matmul`` families)."""
    p = parallelism
    if not isinstance(p, Parallelism):
        raise TypeError(f"parallelism must be a Parallelism; got {type(p).__name__}")
    check_system(slice, "slice").check_schedulable("slice")
    _check_given_layout(layout, p, slice)
    B, S, v_rep, eff = batch_tokens, seq_len, circular_repeats, matmul_efficiency
    effm = check_efficiency(efficiency)
    m = _check_layout(model, p, B, S, v_rep)
    lay = layout if layout is not None else map_to_slice(p, slice)
    if hop_latency is None:
        hop_latency = lay.slice.latency(lay.slice.axes[0])  # the chip's: 1 µs (ICI) or 5 µs (GPU)
    fw = default_framework(slice) if framework is None else FRAMEWORKS[framework]
    return _price(
        m,
        p,
        lay,
        B,
        S,
        remat,
        dtype,
        overlap,
        hop_latency,
        v_rep,
        eff,
        attention,
        effm,
        fw.fused_projections if fused_projections is None else fused_projections,
        fw.reshard_after_forward if reshard_after_forward is None else reshard_after_forward,
        fw.over_context,
        gather_once,
        async_tensor,
        fw,
    )


def _check_given_layout(layout, p: Parallelism, slc) -> None:
    """Refuse a ``layout`` passed to :func:`step_time` that is not ``map_to_slice(p, slc)`` (None is fine)."""
    if layout is None:
        return
    if not isinstance(layout, Layout):
        raise TypeError(f"layout must be a Layout from map_to_slice (or None); got {type(layout).__name__}")
    if layout.slice != slc or any(getattr(layout.parallelism, k) != getattr(p, k) for k in PLACEMENT_ORDER + ("dcn",)):
        raise ValueError("layout must be map_to_slice(parallelism, slice) for the same degrees and slice")


@functools.lru_cache(maxsize=4096)
def _flops(m: TransformerConfig, seq_len: int, remat: str) -> float:
    """Training FLOPs per token (causal attention included) under ``remat`` (cached: the planner asks often)."""
    return flops_per_token(m, include_attention=True, seq_len=seq_len, remat=remat)


def _price(
    m,
    p,
    lay,
    B,
    S,
    remat,
    dtype,
    overlap,
    hop_latency,
    v_rep,
    eff,
    attention,
    effm,
    fused_projections,
    reshard,
    over_context="none",
    gather_once=False,
    async_tensor=None,
    framework=None,
):
    """The body of :func:`step_time` for arguments already checked and the framework's defaults resolved (the
    planner calls it in its inner loop)."""
    c = lay.slice.chip
    # "mlp_outputs" and a number of D-sized checkpoints are priced as saving the matmul outputs
    flops_remat = remat if isinstance(remat, str) and remat in ALL_REMAT_POLICIES else "save_matmul_outputs"
    peak = c.peak_flops(dtype)
    model_flops, hw_flops, imbalance = _chip_flops(m, p, B, S, flops_remat, v_rep)
    flops_time = hw_flops * imbalance / (peak * eff)
    args = (m, p, lay, B, dtype, flops_remat, v_rep, hop_latency, fused_projections, reshard, imbalance)
    times, calls, shard_w = _collective_times(*args, over_context, gather_once)
    # the expected step prices a collective that spans levels (NVLink, then the network) as its phases in
    # sequence; the roofline keeps the book's max over the levels (they are equal on a TPU slice)
    multilevel = lay.slice.scale_up_size < lay.slice.n_devices
    seq = _collective_times(*args, over_context, gather_once, "sequence")[0] if multilevel else times
    if flops_remat in OFFLOAD_REMAT_POLICIES:
        times["host"], calls["host"] = _host_offload_time(m, p, c, B, dtype, v_rep)
        seq = {**seq, "host": times["host"]}
    hbm_time = 3 * p.microbatches * shard_w / c.bandwidth("hbm")  # the gathered weights read per microbatch
    compute, comms, bubble, total, bound = _roofline(times, flops_time, hbm_time, p, v_rep, overlap)
    expected = _expected_step(
        m,
        p,
        lay,
        B,
        S,
        remat=flops_remat,
        dtype=dtype,
        circular_repeats=v_rep,
        collectives=seq,
        calls=calls,
        hbm_time=hbm_time,
        model_flops=model_flops,
        attention=attention,
        efficiency=effm,
        async_tensor=async_tensor,
        framework=framework,
    )
    return StepTime(
        expected=expected,
        compute=compute,
        flops_time=flops_time,
        hbm_time=hbm_time,
        collectives={k: v for k, v in times.items() if v},
        bubble=bubble,
        comms=comms,
        total=total,
        bound=bound,
        mfu=model_flops / (total * peak),
        hfu=hw_flops / (total * peak),
    )


def _roofline(times: dict, flops_time: float, hbm_time: float, p: Parallelism, v_rep: int, overlap: bool):
    """The roofline step from its parts, seconds: ``(compute, comms, bubble, total, bound)``. Compute is the longer
    of the FLOPs and the weight reads; communication hides under it with ``overlap`` (else adds); the bubble adds."""
    compute = max(flops_time, hbm_time)
    comms = sum(times.values())
    bubble = compute * (p.pipeline - 1) / (v_rep * p.microbatches)
    total = (max(compute, comms) if overlap else compute + comms) + bubble
    if compute < comms:
        bound = max(times, key=times.get)
    else:
        bound = "compute" if flops_time >= hbm_time else "hbm"
    return compute, comms, bubble, total, bound


def _chip_flops(m, p: Parallelism, B: int, S: int, flops_remat: str, v_rep: int) -> tuple[float, float, float]:
    """One chip's model FLOPs and hardware FLOPs of a step (remat and replicated KV projections counted in the
    latter), and the busiest pipeline stage's share of the layers relative to an even split (>= 1)."""
    n = p.n_chips
    model_flops = B * _flops(m, S, "none") / n
    hw_flops = B * _flops(m, S, flops_remat) / n
    rep = _kv_replication(m, p.tensor)
    if rep > 1:  # each KV head's projections computed on `rep` tensor ranks: (rep - 1) extra copies of their FLOPs
        kv_flops = 2.0 * 2 * m.d_model * m.n_kv_heads * m.d_head * m.n_layers  # forward, per token
        passes = 3.0 + (1.0 if flops_remat in _WHOLE_LAYER_RECOMPUTE else 0.0)  # k, v recomputed with the layer
        hw_flops += B * kv_flops * passes * (rep - 1) / n
    imbalance = _stage_layers(m, p.pipeline, v_rep) * p.pipeline / m.n_layers
    return model_flops, hw_flops, imbalance


#: Tensor-parallel collectives per layer and microbatch that the recomputed forward of each remat policy repeats
#: (sequence parallelism: AllGather before attention's and the MLP's input projections, ReduceScatter after their
#: output projections). ``full_block`` and ``offload_layer_input`` rebuild the layer from its input: AllGather,
#: attention, ReduceScatter, AllGather, MLP (3; the MLP's ReduceScatter feeds only the next, saved, layer input).
#: ``save_qkv_proj`` starts from the saved q, k, v: attention and its output projection, ReduceScatter, AllGather,
#: MLP (2). ``save_dot_except_mlp`` also keeps the output projection: AllGather, MLP (1). ``save_matmul_outputs``
#: recomputes only the attention products and element-wise work, local to each rank (0), as Chapter 5 counts it.
#: (Like Chapter 5's count, the gathered inputs the weight gradients read are not counted as repeated.)
_TP_RECOMPUTE = {"full_block": 3, "offload_layer_input": 3, "save_qkv_proj": 2, "save_dot_except_mlp": 1}
#: Policies that recompute the whole layer (its k and v projections included).
_WHOLE_LAYER_RECOMPUTE = ("full_block", "offload_layer_input")


def _host_offload_time(m, p: Parallelism, c, B, dtype, v_rep) -> tuple[float, float]:
    """Seconds and transfers of one step's host offload under ``remat="offload_layer_input"``: per microbatch and
    layer on this chip, its share of the layer input (``tokens × D × bytes / tensor``, sharded like the activations)
    written to host memory in the forward pass and read back in the backward pass, over the chip's own host link
    (``Chip.pcie_bw``, one direction; the two transfers happen at different times, so they add)."""
    if c.pcie_bw is None:
        raise ValueError(
            f"remat='offload_layer_input' moves checkpoints over the chip's host link, and {c.long_name} has no "
            "host-link (PCIe) bandwidth figure in tpu_notes.hardware; choose another remat policy or give the "
            "chip a pcie_bw"
        )
    tokens_mb = B / (p.token_shards * p.microbatches)
    layers = _stage_layers(m, p.pipeline, v_rep)
    per_transfer = tokens_mb * m.d_model * dtype_bytes(dtype) / p.tensor
    transfers = 2.0 * p.microbatches * layers
    return transfers * per_transfer / c.pcie_bw, transfers


def _collective_times(
    m,
    p: Parallelism,
    lay,
    B,
    dtype,
    flops_remat,
    v_rep,
    hop_latency,
    fused,
    reshard,
    imbalance,
    over_context,
    once,
    phases=None,
) -> tuple[dict, dict, float]:
    """Seconds and calls of each kind of collective in one step on ``lay`` (Chapter 5's accounting, per kind), and
    the bytes of this chip's tensor/pipeline/expert split of the weights before FSDP."""
    c = lay.slice.chip
    b = dtype_bytes(dtype)

    def ici(kind, op: str, nbytes: float) -> float:
        return lay._cached(kind if isinstance(kind, tuple) else (kind,), op, nbytes, hop_latency, phases)

    dense_chip, expert_chip = _chip_params(m, p)
    shard_w = (dense_chip + expert_chip) * b
    M = p.microbatches
    tokens_mb = B / (p.token_shards * M)  # tokens one chip's layers see per microbatch
    layers = _stage_layers(m, p.pipeline, v_rep)  # on the busiest stage
    # without remat (and without resharding) the gathered weights are kept for the backward pass: one gather
    gathers = 1 if flops_remat == "none" and not reshard else 2
    grad_axes = tuple(k for k in ("data", "fsdp", "context") if getattr(p, k) > 1)
    # the ranks each weight is sharded over: fsdp, and the context ranks when the framework shards over them too
    wgroup = tuple(k for k in ("fsdp", "context") if getattr(p, k) > 1 and (k == "fsdp" or over_context == "all"))
    times = dict.fromkeys(("fsdp", "data", "context", "tensor", "expert", "pipeline", "dcn"), 0.0)
    calls = dict.fromkeys(times, 0.0)
    if wgroup:
        # the gathers of every weight, and one reduction of its gradient, over the weight's shards alone
        # (ReduceScatter) or, with data (or unsharded context) ranks too, over all of them at once (XLA's one
        # AllReduce); per microbatch, or once per step when the gathered weights are kept (gather_once)
        grad = ici(wgroup, "reduce-scatter", shard_w) if grad_axes == wgroup else ici(grad_axes, "all-reduce", shard_w)
        rounds, g = (1, 1) if once else (M, gathers)
        times["fsdp"] = rounds * (g * ici(wgroup, "all-gather", shard_w) + grad)
        calls["fsdp"] = rounds * (g + 1) * layers
    elif grad_axes:
        times["data"] = ici(grad_axes, "all-reduce", shard_w)  # once per step, gradients accumulated locally
        calls["data"] = layers
    if p.dcn > 1:
        times["dcn"] = 2 * sum(_param_counts(m)) * b / (p.chips_per_slice * c.bandwidth("dcn"))
        calls["dcn"] = layers
    if p.context > 1 and not m.is_mla:
        # ring attention: every layer gathers the keys and values of the whole sequence (forward; again in the
        # backward unless kept, i.e. without remat) and reduce-scatters their gradients
        kv = tokens_mb * p.context * 2 * (m.n_kv_heads / min(p.tensor, m.n_kv_heads)) * m.d_head * b
        times["context"] = M * layers * (gathers + 1) * ici("context", "all-gather", kv)
        calls["context"] = M * layers * (gathers + 1)
    if p.tensor > 1:
        per = ici("tensor", "all-gather", tokens_mb * m.d_model * b)
        # forward: AllGather + ReduceScatter around attention and around the MLP (4); backward: the transposes,
        # with one ReduceScatter per input projection as XLA compiles them (q, k, v; gate and up) unless fused
        inputs = 2 if fused else 3 + (2 if m.gated_mlp else 1)
        per_layer = 4 + 2 + inputs + _TP_RECOMPUTE.get(flops_remat, 0)  # + what the recomputed forward repeats
        times["tensor"] = M * layers * per_layer * per
        calls["tensor"] = M * layers * per_layer
    if p.expert > 1 and m.is_moe:
        moe_layers = m.n_moe_layers / p.pipeline * imbalance
        v = p.expert * tokens_mb * m.experts_per_token * m.d_model * b / p.tensor
        times["expert"] = M * moe_layers * 4 * ici("expert", "all-to-all", v)
        calls["expert"] = 4 * M * moe_layers
    if p.pipeline > 1:
        v = tokens_mb * m.d_model * b / p.tensor
        send = lay.slice.stage_send_time(v, lay.parts["pipeline"], hop_latency)
        times["pipeline"] = 2 * M * v_rep * send
        calls["pipeline"] = 2 * M * v_rep
    return times, calls, shard_w
