"""Search every legal layout of a training step and rank them by predicted step time (Chapters 5, 6 and 11).

:func:`plan` takes a model and a :class:`~tpu_notes.system.System`, a TPU ``Slice`` (``n_slices`` of them joined
over DCN) or a ``GpuCluster`` (NVLink nodes under a fat tree), and enumerates the degrees of tensor, pipeline,
expert, context, FSDP and data parallelism whose product is its chip count. A layout is ranked only if it is
**legal**, every degree dividing what it shards:

- the batch: ``data × fsdp × expert × dcn`` batch shards each hold the same whole number of sequences (no
  average over uneven shards), and each shard's sequences split into whole microbatches;
- a sequence: ``context`` ranks each hold an equal chunk of every sequence (context parallelism, the only way to
  split a sequence; its key/value exchange is priced by :func:`~tpu_notes.training.step_time`);
- the model: ``tensor`` divides the query heads and ``d_ff``, and divides or is a multiple of the KV heads (then
  each KV head is replicated, in memory and time); ``pipeline`` stages are at most the layers (and ``max_pipeline``),
  with ``circular_repeats`` interleaved groups per stage; stages that do not split the layers evenly are priced at
  the busiest one (Llama 3 405B ran 126 layers on 16 stages); ``expert`` divides the experts.

What can be launched, on top of legality (:mod:`tpu_notes.training.frameworks`): the system must be one slice
Cloud TPU schedules (a larger TPU request is ``n_slices`` slices over DCN; :mod:`tpu_notes.training.subslices`
ranks them); the framework's pipeline rules hold (MaxText: stages × repeats divide the layers and the microbatches
are a multiple of the stages; Megatron: uneven first and last stages only with ``uneven_stages``, microbatches a
multiple of the stages for its interleaved schedule); tensor parallelism stays in the scale-up domain (an NVLink
node) unless ``tensor_across_nodes``.

Each layout is placed on the system (:func:`~tpu_notes.training.step.map_to_slice`), tried with each remat policy,
microbatch count, pipeline interleaving and FSDP gather form (per microbatch, or once per step), checked against
``hbm_fraction`` of HBM with the **modelled peak** (:attr:`~tpu_notes.training.memory.MemoryBreakdown.peak`:
gathered FSDP weights, pipeline activations in flight, the largest transient) of the state as the framework's
precision recipe keeps it (:mod:`tpu_notes.training.precision`), and priced with
:func:`~tpu_notes.training.step_time` (the collectives as XLA compiles them). The ranking is by the expected step
of :mod:`tpu_notes.efficiency` by default, in **tiers**: layouts within the model's out-of-sample error of a tier's
fastest are a tie, ordered by fewer kinds of parallelism, then the faster step.

Every candidate that cannot run is kept with its reason (the text before the first colon is its kind: "uneven
batch", "too few sequences", "uneven stages", "tensor across nodes", "cannot place", "does not fit"...), one per
remat policy, so the ranked and rejected candidates add up to ``searched``; when nothing is legal the ranking is
empty and the reasons say why. The planner never raises for a layout, only for bad arguments (an unschedulable
slice among them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Annotated

from .. import rules
from ..efficiency import OUT_OF_SAMPLE_ERROR, check_efficiency
from ..system import System, check_system
from ..table import Column, Table
from ..transformer import as_config
from ..units import Bool, DTypeName, Fraction, OneOf, PositiveInt, Range, SeqLen, capped, checked, fmt
from .expected import ExpectedStep
from .frameworks import FRAMEWORKS, Framework, default_framework
from .memory import OPTIMIZERS, MemoryBreakdown, _memory, check_remat
from .parallelism import SHORT_NAMES, Parallelism
from .precision import RECIPES, PrecisionRecipe
from .step import Layout, StepTime, _price, map_to_slice

#: Remat policies the planner tries by default (cheapest recompute first).
DEFAULT_REMAT = (
    "none",
    "save_matmul_outputs",
    "save_dot_except_mlp",
    "save_qkv_proj",
    "full_block",
    "offload_layer_input",
)
#: The share of HBM a layout may use by default: the rest is headroom for what the memory model does not count
#: (the compiler's scratch buffers, fragmentation, the runtime).
DEFAULT_HBM_FRACTION = 0.9
#: What :func:`plan` ranks by: the roofline step (``StepTime.total``) or the expected one (``StepTime.expected``).
RANK_BY = ("roofline", "expected")


@dataclass(frozen=True)
class Plan:
    """One candidate layout with its predicted memory and time (``reason`` is empty when it can run)."""

    parallelism: Parallelism
    remat: object  # remat policy name, or D-sized checkpoints per layer
    layout: Layout | None  # placement on the torus (None if it could not be placed)
    memory: MemoryBreakdown | None  # bytes per chip (None if not computed)
    step: StepTime | None  # seconds (None when rejected)
    reason: str = ""  # why it was rejected; "" for a runnable layout
    circular_repeats: int = 1  # interleaved layer groups per pipeline stage
    gather_once: bool = False  # FSDP weights gathered once per step and kept across microbatches
    tier: int = 0  # 1 for the layouts the model cannot tell from the fastest, 2 for the next group...; 0: unranked

    @property
    def ok(self) -> bool:
        return not self.reason

    @property
    def mfu(self) -> float:
        return self.step.mfu if self.step else 0.0

    @property
    def expected(self) -> ExpectedStep | None:
        """The step at the efficiency model's rates (an :class:`~tpu_notes.training.ExpectedStep`, a forecast), or
        None when rejected."""
        return self.step.expected if self.step else None

    def row(self) -> dict:
        """The plan as a flat dict (for tables and JSON). ``step_s``, ``mfu`` and ``bound`` are the roofline's (a
        floor on the step, a ceiling on MFU), repeated as ``step_s_roofline``, ``mfu_roofline`` and
        ``bound_roofline``; the ``*_expected`` keys are the efficiency model's forecast of the same step."""
        st, ex = self.step, self.expected
        roof_tps = ex.tokens_per_s_per_chip * ex.total / st.total if st and ex and st.total else None
        return {
            "layout": self.parallelism.label(),
            "remat": self.remat,
            "circular_repeats": self.circular_repeats,
            "memory_peak_per_chip_bytes": self.memory.peak if self.memory else None,
            "placement": self.layout.describe() if self.layout else "",
            "memory_per_chip_bytes": self.memory.total if self.memory else None,
            "step_s": st.total if st else None,
            "compute_s": st.compute if st else None,
            "comms_s": st.comms if st else None,
            "bubble_s": st.bubble if st else None,
            "comms_over_compute": st.comms_ratio if st else None,
            "bound": st.bound if st else None,
            "mfu": st.mfu if st else None,
            "reason": self.reason,
            "step_s_roofline": st.total if st else None,
            "mfu_roofline": st.mfu if st else None,
            "bound_roofline": st.bound if st else None,
            "tokens_per_s_per_chip_roofline": roof_tps,
            "step_s_expected": ex.total if ex else None,
            "mfu_expected": ex.mfu if ex else None,
            "bound_expected": ex.bound if ex else None,
            "tokens_per_s_per_chip_expected": ex.tokens_per_s_per_chip if ex else None,
            "efficiency_model": ex.efficiency if ex else None,
        }


@dataclass(frozen=True)
class PlanResult:
    """The ranking (best first) and the rejected candidates of one :func:`plan` call. Iterates over the ranking."""

    ranked: tuple[Plan, ...]  # runnable layouts by increasing step time (expected, or roofline with rank_by)
    rejected: tuple[Plan, ...]  # layouts that cannot run, each with its reason
    searched: int  # candidates considered (layouts x remat policies): len(ranked) + len(rejected)
    rank_by: str = "expected"  # the step time the ranking uses: "expected" or "roofline"
    tie_within: float = 0.0  # fraction: steps this close to a tier's fastest share its tier
    framework: str = "maxtext"  # the framework whose launch rules applied (tpu_notes.training.frameworks)
    recipe: str = "maxtext"  # the precision recipe the memory used (tpu_notes.training.precision)
    hbm_fraction: float = 1.0  # the share of HBM a layout could use
    disabled: tuple = ()  # kinds of parallelism never tried
    kv_heads: int = 0  # the model's KV heads (a tensor degree above it replicates them); 0 for MLA

    def __iter__(self):
        return iter(self.ranked)

    def __len__(self) -> int:
        return len(self.ranked)

    def __getitem__(self, i):
        return self.ranked[i]

    def reasons(self) -> dict[str, int]:
        """How many candidates were rejected for each kind of reason (the text before the first colon)."""
        out: dict[str, int] = {}
        for p in self.rejected:
            key = p.reason.split(":")[0]
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    @checked
    def legend(self, top: PositiveInt = 10) -> list[str]:
        """The lines under :meth:`table` that say what the ranking, the tiers and the columns mean (the CLI prints
        them under its own table); ``top`` is the rows the table shows (their efficiency models are named)."""
        names = {p.expected.efficiency for p in self.ranked[:top] if p.expected}
        model = ", ".join(repr(n) for n in sorted(names)) or "none"
        tie = f"{self.tie_within:.0%}"
        lines = [
            f"t: tier: {self.rank_by} steps within {tie} of the tier's fastest, simplest first",
            f"HBM/chip: modelled peak, at most {self.hbm_fraction:.0%} of HBM ({self.recipe} precision, "
            f"{self.framework} rules)",
            "roof: the roofline (matmuls at peak, comms hidden), a floor on the step",
            f"exp: expected step (efficiency model {model}) ± out-of-sample error; its MFU",
        ]
        wide = sorted({p.parallelism.tensor for p in self.ranked[:top] if self.kv_heads < p.parallelism.tensor})
        if self.kv_heads and wide:
            lines.append(
                f"tp{'/'.join(map(str, wide))} > {self.kv_heads} KV heads: each KV head replicated on tensor / "
                f"{self.kv_heads} ranks (counted in memory and FLOPs)"
            )
        if self.disabled:
            lines.append("not tried: " + ", ".join(self.disabled))
        return lines

    @checked
    def distinct(self, top: PositiveInt = 10) -> list[Plan]:
        """The first ``top`` plans of the ranking with distinct degrees: each layout once, under its remat policy
        and schedule that rank first (the ranking itself lists every policy tried)."""
        seen, out = set(), []
        for p in self.ranked:
            key = p.parallelism.short()
            if key not in seen:
                seen.add(key)
                out.append(p)
                if len(out) == top:
                    break
        return out

    @checked
    def table(self, top: PositiveInt = 10) -> str:
        """The ``top`` distinct layouts (:meth:`distinct`) as a fixed-width table of at most 84 columns, or the
        rejection reasons if none can run. A layout is named by :meth:`~tpu_notes.training.Parallelism.short`
        (``v2``: two interleaved layer groups per pipeline stage; ``ag1``: FSDP weights gathered once per step);
        ``t`` is its tier; ``HBM/chip`` the modelled peak; each row then gives the roofline step and its bound (the
        chapters' figures) and the expected step and its MFU (the :mod:`tpu_notes.efficiency` forecast), the
        header giving the expected step's out-of-sample error. ``Plan.row()`` has every figure."""
        if not self.ranked:
            lines = [f"No legal layout fits ({self.searched} candidates). Rejected because:"]
            lines += [f"  {n:6d} x {r}" for r, n in self.reasons().items()]
            return "\n".join(lines)
        shown = self.distinct(top)
        w = min(29, max(6, *(len(_name(p)) for p in shown)))  # its longest name, at most 29
        err = f"±{self.tie_within:.0%}" if self.rank_by == "expected" else ""
        head = (
            f"{'#':>2} {'t':>2} {'layout':<{w}} {'remat':<7} {'HBM/chip':>8} {'roof':>7} {'bound':<7} "
            f"{'exp' + err:>8} {'MFU':>5}"
        )
        lines = [head]
        for i, p in enumerate(shown, 1):
            st, ex = p.step, p.expected
            exp = f"{fmt(ex.total, 's'):>8} {ex.mfu:>5.1%}" if ex else f"{'-':>8} {'-':>5}"
            remat = _REMAT_SHORT.get(str(p.remat), str(p.remat))
            lines.append(
                f"{i:>2} {p.tier:>2} {_name(p)[:w]:<{w}} {remat:<7.7} {fmt(p.memory.peak, 'B'):>8} "
                f"{fmt(st.total, 's'):>7} {st.bound:<7.7} {exp}"
            )
        lines += self.legend(top)
        used = {SHORT_NAMES[a] for p in shown for a in p.parallelism.mesh_shape()}
        lines.append(
            "layout: " + ", ".join(f"{v} {k}" for k, v in SHORT_NAMES.items() if v in used) + ", mb microbatches"
        )
        extra = [
            t
            for t, on in (
                ("v: layer groups per stage", any(p.circular_repeats > 1 for p in shown)),
                ("ag1: FSDP weights gathered once per step", any(p.gather_once for p in shown)),
            )
            if on
        ]
        if extra:
            lines.append("; ".join(extra))
        short = sorted({_REMAT_SHORT[str(p.remat)] for p in shown if str(p.remat) in _REMAT_SHORT})
        if short:
            full = {v: k for k, v in _REMAT_SHORT.items()}
            lines.append("remat " + ", ".join(f"{s}: {full[s]}" for s in short))
        return "\n".join(lines)

    @checked
    def ranking_table(self, top: PositiveInt = 10) -> Table:
        """:meth:`table` as a :class:`~tpu_notes.table.Table` for the page: the ``top`` distinct layouts (named as a
        practitioner writes them, ``fsdp=1024 tp=4``), their tier, remat policy, modelled peak HBM per chip (bytes),
        roofline step (seconds) and bound, expected step (seconds) and its MFU; the legend lines as notes. With no
        legal layout, one row per rejection reason and the number of candidates it rejected."""
        if not self.ranked:
            return Table(
                ["rejected because", "candidates"],
                list(self.reasons().items()),
                caption=f"No legal layout fits ({self.searched} candidates)",
            )
        shown = self.distinct(top)
        rows = []
        for i, p in enumerate(shown, 1):
            st, ex = p.step, p.expected
            remat = _REMAT_SHORT.get(str(p.remat), str(p.remat))
            rows.append(
                (i, p.tier, _readable(p), remat, p.memory.peak, st.total, st.bound, ex.total if ex else None)
                + (ex.mfu if ex else None,)
            )
        cols = [
            Column("#"),
            Column("t"),
            Column("layout"),
            Column("remat"),
            Column("HBM", "B"),
            Column("roof", "s"),
            Column("bound"),
            Column("exp", "s"),
            Column("MFU", "%", digits=2),
        ]
        notes = self.legend(top)
        used = {SHORT_NAMES[a] for p in shown for a in p.parallelism.mesh_shape()}
        notes.append(
            "layout: " + ", ".join(f"{v} {k}" for k, v in SHORT_NAMES.items() if v in used) + ", mb microbatches"
        )
        if any(p.circular_repeats > 1 for p in shown):
            notes.append("v: layer groups per stage")
        if any(p.gather_once for p in shown):
            notes.append("ag1: FSDP weights gathered once per step")
        short = sorted({_REMAT_SHORT[str(p.remat)] for p in shown if str(p.remat) in _REMAT_SHORT})
        if short:
            full = {v: k for k, v in _REMAT_SHORT.items()}
            notes.append("remat " + ", ".join(f"{s}: {full[s]}" for s in short))
        caption = f"The {len(shown)} fastest distinct layouts of {len(self.ranked)} legal ({self.rank_by} step)"
        return Table(cols, rows, caption=caption, notes=notes)


def _readable(p: Plan, dcn: bool = True) -> str:
    """A plan's layout as a practitioner writes it: ``fsdp=64 pp=4 tp=8 mb=16 v2 ag1`` (the degrees above 1 under
    their short names, then DCN slices unless ``dcn`` is False, microbatches, interleaving and a gather-once FSDP)."""
    par = p.parallelism
    parts = [f"{SHORT_NAMES[a]}={n}" for a, n in par.mesh_shape().items()]
    if dcn and par.dcn > 1:
        parts.append(f"dcn={par.dcn}")
    if par.pipeline > 1 or par.microbatches > 1:
        parts.append(f"mb={par.microbatches}")
    parts += [f"v{p.circular_repeats}"] if p.circular_repeats > 1 else []
    parts += ["ag1"] if p.gather_once else []
    return " ".join(parts) or "1 chip"


def _name(p: Plan) -> str:
    """A plan's layout as the table names it: ``fsdp64 pp4 tp8 mb16 v2 ag1``."""
    return (
        p.parallelism.short()
        + (f" v{p.circular_repeats}" if p.circular_repeats > 1 else "")
        + (" ag1" if p.gather_once else "")
    )


#: Remat policy names shortened in :meth:`PlanResult.table` (the legend under the table spells them out).
_REMAT_SHORT = {
    "save_matmul_outputs": "save_mm",
    "full_block": "full",
    "save_qkv_proj": "qkv",
    "save_dot_except_mlp": "dot-mlp",
    "offload_layer_input": "offload",
}


#: Pipeline interleavings (layer groups per stage) the planner tries by default.
DEFAULT_INTERLEAVE = (1, 2, 4)


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _model_degrees(m, n_chips: int, seq_len: int, *, max_pipeline: int, max_context: int) -> dict[str, list[int]]:
    """The degrees of each model-splitting kind that are legal for config ``m`` and divide ``n_chips``:
    ``{"tensor": [...], "pipeline": [...], "expert": [...], "context": [...]}`` (see the module docstring)."""
    divs = _divisors(n_chips)
    kv_ok = (lambda t: True) if m.is_mla else (lambda t: m.n_kv_heads % t == 0 or t % m.n_kv_heads == 0)
    return {
        "tensor": [t for t in divs if m.n_heads % t == 0 and m.d_ff % t == 0 and kv_ok(t)],
        "pipeline": [q for q in divs if q <= min(max_pipeline, m.n_layers)],
        "expert": [e for e in divs if m.n_experts % e == 0] if m.is_moe else [1],
        "context": [c for c in divs if seq_len % c == 0 and c <= max_context],
    }


#: The most microbatch counts or pipeline interleavings a caller may ask the planner to consider (each is priced for
#: every legal layout: a cap keeps one call's work bounded).
MAX_MICROBATCHES = 4096


@dataclass(frozen=True)
class _Search:
    """What every candidate of one :func:`plan` call shares, resolved once from its arguments."""

    model: object  # the TransformerConfig
    system: System
    batch_tokens: int  # global batch, tokens
    seq_len: int  # tokens per sequence
    n_slices: int  # slices joined over DCN
    policies: tuple  # remat policies tried
    repeats: tuple  # pipeline interleavings tried
    max_microbatches: int
    hbm: float  # bytes a layout may use per chip
    dtype: str
    overlap: bool
    matmul_efficiency: float
    fused_projections: bool
    reshard: bool  # weights dropped after their forward use
    framework: Framework
    recipe: PrecisionRecipe
    optimizer_bytes: float  # bytes of optimizer state per parameter (master copy and moments)
    efficiency: object  # the EfficiencyModel
    hop: float  # seconds, the system's per-hop latency
    rank_by: str
    tensor_across_nodes: bool  # tensor parallelism may leave the scale-up domain
    uneven_stages: bool  # the framework's uneven first and last stages may be used
    disabled: frozenset = frozenset()  # kinds of parallelism never used

    @property
    def sequences(self) -> int:
        return self.batch_tokens // self.seq_len

    def seconds(self, st: StepTime) -> float:
        """The step time the ranking uses."""
        return st.expected.total if self.rank_by == "expected" and st.expected is not None else st.total


@checked
def plan(
    model,
    system: System,
    batch_tokens: PositiveInt,
    seq_len: SeqLen,
    *,
    n_slices: PositiveInt = 1,
    remat: Sequence = DEFAULT_REMAT,
    max_context: PositiveInt = 16,
    max_pipeline: PositiveInt = 16,
    interleave: Sequence = DEFAULT_INTERLEAVE,
    optimizer: Annotated[str, OneOf(tuple(OPTIMIZERS))] = "adam",
    dtype: DTypeName | None = None,
    hbm_fraction: Fraction = DEFAULT_HBM_FRACTION,
    overlap: Bool = True,
    max_microbatches: capped(MAX_MICROBATCHES) = 64,
    matmul_efficiency: Fraction = 1.0,
    fused_projections: Bool | None = None,
    reshard_after_forward: Bool | None = None,
    rank_by: Annotated[str, OneOf(RANK_BY)] = "expected",
    framework: Annotated[str, OneOf(tuple(FRAMEWORKS))] | None = None,
    recipe: Annotated[str, OneOf(tuple(RECIPES))] | None = None,
    tensor_across_nodes: Bool = False,
    uneven_stages: Bool = False,
    disable: Sequence = (),
    tie_within: Annotated[float, Range(0.0, 1.0)] | None = None,
) -> PlanResult:
    """Rank every legal layout of a training step of ``model`` on ``system`` (``n_slices`` copies over DCN).

    ``system`` is a :class:`~tpu_notes.system.System`: a TPU ``Slice`` or a ``GpuCluster`` (which includes its
    whole network: ``n_slices=1``). ``batch_tokens`` is the global batch, ``seq_len`` the sequence length; see the
    module docstring for the legality rules. ``max_context`` caps the context-parallel degree (1: never split a
    sequence), ``max_pipeline`` the stages, ``interleave`` the layer groups per stage tried with a pipeline
    (``circular_repeats`` of :func:`~tpu_notes.training.step_time`), ``max_microbatches`` the microbatches, and
    ``disable`` names kinds never used (e.g. ``("pipeline", "context")``).

    What can be launched: ``framework`` (:mod:`tpu_notes.training.frameworks`; default MaxText on a TPU slice,
    Megatron-LM on a GPU cluster) sets the pipeline schedules allowed (``uneven_stages`` lets Megatron shorten the
    first and last stages), fused projections and resharding (unless ``fused_projections`` or
    ``reshard_after_forward`` say otherwise); tensor parallelism stays inside the scale-up domain (an NVLink node)
    unless ``tensor_across_nodes``.

    Memory: ``recipe`` (:mod:`tpu_notes.training.precision`; default the framework's: MaxText's fp32 weights, 16
    bytes per parameter; Megatron's distributed optimizer, 6 + 12/data) with ``optimizer``'s moments; a layout fits
    when its modelled peak (:attr:`~tpu_notes.training.memory.MemoryBreakdown.peak`) is at most ``hbm_fraction``
    of HBM (default 0.9: headroom for what the model does not count, e.g. XLA's scratch buffers and
    fragmentation). FSDP layouts with several microbatches are tried both gathering the weights per microbatch and
    once per step (``gather_once`` of :func:`~tpu_notes.training.step_time`). ``dtype`` is the matmuls' (default
    the recipe's: ``"fp8"`` for the FP8 recipe).

    ``matmul_efficiency`` is passed to :func:`~tpu_notes.training.step_time`. ``rank_by`` picks the step time the
    ranking (and the choice of microbatches, interleaving, gather form and remat per layout) uses: ``"expected"``
    (the default: the :mod:`tpu_notes.efficiency` forecast) or ``"roofline"``. Layouts whose steps lie within
    ``tie_within`` of a tier's fastest (default: the expected model's out-of-sample error on this platform,
    ``tpu_notes.efficiency.OUT_OF_SAMPLE_ERROR``; 0 for the roofline) form one tier, ordered by fewer kinds
    of parallelism, then the faster step. Returns a :class:`PlanResult`.
    """
    m = as_config(model)
    check_system(system, "system").check_schedulable("system")
    if n_slices != 1 and not system.joins_over_dcn:
        raise ValueError("n_slices joins TPU slices over DCN; a GpuCluster includes its whole network (n_slices=1)")
    rules.whole_sequences(batch_tokens, seq_len)
    fw = default_framework(system) if framework is None else FRAMEWORKS[framework]
    rc = RECIPES[fw.recipe if recipe is None else recipe]
    dtype = rc.matmul_dtype if dtype is None else dtype
    system.chip.peak_flops(dtype)  # a dtype the chip has a peak for
    if tie_within is None:
        tie_within = OUT_OF_SAMPLE_ERROR[system.chip.kind] if rank_by == "expected" else 0.0
    search = _Search(
        model=m,
        system=system,
        batch_tokens=batch_tokens,
        seq_len=seq_len,
        n_slices=n_slices,
        policies=_host_policies(_check_policies(remat), system.chip, remat is DEFAULT_REMAT),
        repeats=_check_interleave(interleave),
        max_microbatches=max_microbatches,
        hbm=hbm_fraction * system.chip.hbm_bytes,
        dtype=dtype,
        overlap=overlap,
        matmul_efficiency=matmul_efficiency,
        fused_projections=fw.fused_projections if fused_projections is None else fused_projections,
        reshard=fw.reshard_after_forward if reshard_after_forward is None else reshard_after_forward,
        framework=fw,
        recipe=rc,
        optimizer_bytes=rc.master + rc.moments * OPTIMIZERS[optimizer] / OPTIMIZERS["adam"],
        efficiency=check_efficiency(None),
        hop=system.latency(system.axes[0]),
        rank_by=rank_by,
        tensor_across_nodes=tensor_across_nodes,
        uneven_stages=uneven_stages,
        disabled=_check_disable(disable),
    )
    off = search.disabled
    deg = _model_degrees(
        m, system.n_devices, seq_len, max_pipeline=1 if "pipeline" in off else max_pipeline, max_context=max_context
    )
    for kind in off - {"fsdp"}:
        deg[kind] = [1]
    ranked, rejected = _search_all(search, deg)
    ranked = _tiered(search, ranked, tie_within)
    return PlanResult(
        ranked=tuple(ranked),
        rejected=tuple(rejected),
        searched=len(ranked) + len(rejected),
        rank_by=rank_by,
        tie_within=tie_within,
        framework=fw.name,
        recipe=rc.name,
        hbm_fraction=hbm_fraction,
        disabled=tuple(sorted(off)),
        kv_heads=0 if m.is_mla else m.n_kv_heads,
    )


def _search_all(s: _Search, deg: dict[str, list[int]]) -> tuple[list[Plan], list[Plan]]:
    """Every base layout screened, then priced under each remat policy: (runnable, rejected). A candidate is one
    layout under one remat policy, so a layout refused before any policy is tried counts once per policy."""
    ranked: list[Plan] = []
    rejected: list[Plan] = []
    for base in _base_layouts(s, deg):
        reason, lay, mbs, vs = _screen(s, base)
        if reason:  # rejected before any remat policy is tried
            rejected += [Plan(base, r, lay, None, None, reason) for r in s.policies]
            continue
        for r in s.policies:
            best = _best_schedule(s, base, lay, r, mbs, vs)
            (ranked if best.ok else rejected).append(best)
    return ranked, rejected


def _base_layouts(s: _Search, deg: dict[str, list[int]]):
    """Every split of the system's chips into tensor x pipeline x expert x context x FSDP x data degrees (one
    microbatch per stage, the schedule chosen later), in the order the planner reports them."""
    N = s.system.n_devices
    for t in deg["tensor"]:
        for pp in deg["pipeline"]:
            for e in deg["expert"]:
                left = N // (t * pp * e) if N % (t * pp * e) == 0 else 0
                for cp in _contexts(deg["context"], left, s.sequences, s.n_slices, pp):
                    rest = N // (t * pp * e * cp)
                    for f in [1] if "fsdp" in s.disabled else _divisors(rest):
                        yield Parallelism(
                            data=rest // f,
                            fsdp=f,
                            tensor=t,
                            pipeline=pp,
                            expert=e,
                            context=cp,
                            microbatches=pp,
                            dcn=s.n_slices,
                        )


def _screen(s: _Search, base: Parallelism) -> tuple[str, Layout | None, list[int], list[int]]:
    """``(reason, layout, microbatch counts, interleavings)`` of ``base``: ``reason`` is why it cannot run at all
    (its kind, a colon, the detail; ``""`` when it can), from the batch and model rules of :mod:`tpu_notes.rules`,
    the framework's pipeline rules, tensor parallelism inside the scale-up domain, and its placement on the system."""
    try:
        per_shard = rules.batch_shards(
            s.sequences,
            base.batch_shards,
            argument="batch_tokens",
            advice="split sequences with context parallelism, max_context, or use fewer chips",
        )
        if not s.tensor_across_nodes:
            rules.scale_up_domain(base.tensor, s.system.scale_up_size)
    except rules.Illegal as err:
        return f"{err.kind}: {err.detail}", None, [], []
    try:
        lay = map_to_slice(base, s.system)
        rules.model_layout(s.model, base, s.seq_len)
    except ValueError as err:
        return f"cannot place: {err}", None, [], []
    pp, fw = base.pipeline, s.framework
    vs = [v for v in s.repeats if pp > 1 and pp * v <= s.model.n_layers] if pp > 1 else [1]
    vs = [v for v in vs if not _schedule_refusal(s, base, v, pp)]  # layer splits the framework accepts
    if not vs:
        why = _schedule_refusal(s, base, 1, pp)
        if not why:  # every interleaving asked for has more layer groups than the layers
            asked = ", ".join(map(str, s.repeats))
            why = f"too many stages: {pp} stages x interleave ({asked}) exceed the {s.model.n_layers} layers"
        return why, lay, [], []
    mbs = [k for k in range(pp, min(per_shard, s.max_microbatches) + 1) if per_shard % k == 0]
    if pp > 1 and fw.microbatches_per_stage == "always":
        mbs = [k for k in mbs if k % pp == 0]
    if pp > 1 and len(mbs) > 5:
        # five counts from the fewest that fill the pipeline (the least sends) to the most (the smallest
        # microbatches: the least activation memory and the shortest bubble)
        mbs = [mbs[round(i * (len(mbs) - 1) / 4)] for i in range(5)]
    if not mbs:
        rule = f" that are multiples of {pp} ({fw.name})" if fw.microbatches_per_stage == "always" else ""
        reason = (
            f"too few sequences: {per_shard:,} sequences per batch shard for {pp} pipeline stages (each needs a "
            f"whole microbatch{rule})"
        )
        return reason, lay, [], []
    return "", lay, mbs, vs


def _schedule_refusal(s: _Search, base: Parallelism, repeats: int, microbatches: int) -> str:
    """Why the framework refuses ``base`` with ``repeats`` layer groups per stage and ``microbatches``
    microbatches (``""`` when it accepts them)."""
    fw = s.framework
    try:
        rules.pipeline_schedule(
            s.model,
            base.pipeline,
            repeats,
            microbatches,
            framework=fw.name,
            even_layers=fw.even_layers,
            microbatches_per_stage=fw.microbatches_per_stage,
            uneven_edges=fw.uneven_edges and s.uneven_stages,
        )
    except rules.Illegal as err:
        return f"{err.kind}: {err}"
    return ""


def _best_schedule(s: _Search, base: Parallelism, lay: Layout, remat, mbs: list[int], vs: list[int]) -> Plan:
    """The fastest (microbatches, interleaving, FSDP gather form) of ``base`` under one remat policy, or the first
    that does not fit when none does."""
    best = None
    sharded = base.fsdp > 1 or (base.context > 1 and s.framework.over_context == "all")
    for mb in mbs:
        for v in vs:
            if _schedule_refusal(s, base, v, mb):
                continue
            cand = replace(base, microbatches=mb)
            for once in (False, True) if sharded and mb > 1 else (False,):
                plan_ = _priced(s, cand, lay, remat, v, once)
                if best is None or (plan_.ok and (not best.ok or s.seconds(plan_.step) < s.seconds(best.step))):
                    best = plan_
        if base.pipeline == 1 and best is not None and best.ok:
            break  # more accumulation steps only repeat the FSDP gathers
    return best


def _priced(s: _Search, cand: Parallelism, lay: Layout, remat, v: int, once: bool) -> Plan:
    """One schedule of one layout: its memory, and its step when it fits."""
    rc = s.recipe
    mem = _memory(
        s.model,
        cand,
        s.batch_tokens,
        remat,
        pb=rc.weights,
        gb=rc.grads,
        ab=2,
        ob=s.optimizer_bytes,
        zero=1 if rc.optimizer_over_data else 0,
        circular_repeats=v,
        reshard=s.reshard,
        over_context=s.framework.over_context,
        gather_once=once,
        cb=min(rc.weights, 2),
    )
    if mem.peak > s.hbm:
        reason = f"does not fit: {fmt(mem.peak, 'B')} per chip at peak > {fmt(s.hbm, 'B')} HBM"
        return Plan(cand, remat, lay, mem, None, reason, circular_repeats=v, gather_once=once)
    st = _price(
        s.model,
        cand,
        lay,
        s.batch_tokens,
        s.seq_len,
        remat,
        s.dtype,
        s.overlap,
        s.hop,
        v,
        s.matmul_efficiency,
        "flash",
        s.efficiency,
        s.fused_projections,
        s.reshard,
        s.framework.over_context,
        once,
        None,
        s.framework,
    )
    return Plan(cand, remat, lay, mem, st, circular_repeats=v, gather_once=once)


def _tiered(s: _Search, plans: list[Plan], tie_within: float) -> list[Plan]:
    """``plans`` in tiers: the fastest remaining plan opens a tier holding every plan within ``tie_within`` of its
    step (the model cannot tell them apart); inside a tier the simpler layout comes first (fewer kinds of
    parallelism), then the faster (memory is already held to the HBM fraction: a lighter layout that is slower is
    not preferred, so an 8B model on one node keeps FSDP rather than an eight-stage pipeline). Each plan gets its
    tier number (1 first)."""
    rest = sorted(plans, key=lambda p: (s.seconds(p.step), _rank_key(s, p)))  # exact steps: a tier is a prefix
    out: list[Plan] = []
    tier = 0
    while rest:
        tier += 1
        edge = s.seconds(rest[0].step) * (1.0 + tie_within)
        inside = [p for p in rest if s.seconds(p.step) <= edge * (1 + 1e-12)]
        rest = rest[len(inside) :]
        inside.sort(key=lambda p: (len(p.parallelism.mesh_shape()), _rank_key(s, p)))
        out += [replace(p, tier=tier) for p in inside]
    return out


def _rank_key(s: _Search, p: Plan) -> tuple:
    """Ties in step time (to 4 significant digits; common when compute-bound) go to the simpler layout (fewer kinds
    of parallelism, then no context parallelism), then to the one that recomputes least, then to the one with the
    most communication headroom, then to the one that needs least memory."""
    par = p.parallelism
    return (
        float(f"{s.seconds(p.step):.4g}"),
        len(par.mesh_shape()),
        par.context,
        round(p.step.hfu, 9),
        p.step.comms_ratio,
        p.memory.peak,
    )


def _check_disable(disable) -> frozenset:
    """The kinds of parallelism ``disable`` names (model-splitting kinds and ``fsdp``/``data``)."""
    allowed = ("tensor", "pipeline", "expert", "context", "fsdp")
    if isinstance(disable, str):
        disable = (disable,)
    if not isinstance(disable, (tuple, list, set, frozenset)):
        raise TypeError(f"disable must be a sequence of parallelism kinds from {allowed}; got {disable!r}")
    bad = [k for k in disable if k not in allowed]
    if bad:
        raise ValueError(f"disable must name kinds from {allowed}; got {bad!r}")
    return frozenset(disable)


def _contexts(degrees: list[int], chips: int, seqs: int, n_slices: int, stages: int) -> list[int]:
    """The context degrees worth pricing when ``chips`` remain for data, FSDP and context: 1, and the larger ones up
    to the first that gives every batch shard the same whole number of sequences and at least one per pipeline
    stage. Beyond it a larger degree keeps the tokens per chip and only adds key/value exchange (and takes chips
    from FSDP, which shards the weights), so it cannot rank higher."""
    if not chips:
        return []
    out = []
    for cp in degrees:
        if chips % cp:
            continue
        out.append(cp)
        shards = chips // cp * n_slices
        if seqs % shards == 0 and seqs // shards >= stages:
            break
    return out


def _check_policies(remat) -> tuple:
    if isinstance(remat, (str, int, float)):
        remat = (remat,)
    if not isinstance(remat, (tuple, list)):
        raise TypeError(
            f"remat must be a policy name or a sequence of them (e.g. {DEFAULT_REMAT}); got {type(remat).__name__}"
        )
    policies = tuple(check_remat(r) for r in remat)
    if not policies:
        raise ValueError("remat must name at least one policy")
    return policies


def _host_policies(policies: tuple, chip, default: bool) -> tuple:
    """``policies`` without host offload when ``chip`` has no host-link figure: dropped from the default set,
    refused when asked for by name."""
    if chip.pcie_bw is not None or "offload_layer_input" not in policies:
        return policies
    if not default:
        raise ValueError(
            f"remat: 'offload_layer_input' moves checkpoints over the host link, and {chip.name} has no host-link "
            "figure (Chip.pcie_bw); choose another policy"
        )
    return tuple(r for r in policies if r != "offload_layer_input")


def _check_interleave(interleave) -> tuple[int, ...]:
    if isinstance(interleave, bool) or isinstance(interleave, int):
        interleave = (interleave,)
    if not isinstance(interleave, (tuple, list)) or not interleave:
        raise TypeError(
            f"interleave must be a non-empty sequence of positive integers (e.g. (1, 2)); got {interleave!r}"
        )
    for v in interleave:
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"interleave must hold positive integers (layer groups per stage); got {v!r}")
    return tuple(sorted(set(interleave)))
