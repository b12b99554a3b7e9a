"""The planner's choice beside the layouts practitioners ran (Chapters 5 and 6).

Every run of ``tpu_notes.training.published.RUNS`` states a layout that somebody chose, compiled and measured.
:func:`compare_with_practitioners` hands each run's problem (its model, its system, its global batch and sequence
length, its dtype, its number of DCN slices and, by default, its remat policy) to
:func:`~tpu_notes.training.plan` and asks three questions: where does the planner rank the stated layout, why does
it refuse it when it does, and how much faster is the planner's own first choice by the planner's own expected model.

**Matching.** A plan is the stated layout when its degrees of ``data``, ``fsdp``, ``tensor``, ``pipeline``,
``expert``, ``context`` and ``dcn`` and its remat policy are the run's; the number of microbatches is left free (the
planner picks its own per layout, and most sources do not publish theirs), and so is the number of interleaved
layer groups per pipeline stage. Among several matches one with the stated microbatches and interleaving counts,
else the best-ranked one.

**Speedup.** ``speedup`` is the expected step of the stated layout, priced as the run states it (its microbatches,
interleaving and attention kernel: the step of :func:`~tpu_notes.training.published.predict`), over the expected
step of the planner's first choice. Both are forecasts of the same model, so a speedup above 1 says the model prefers
another layout, not that the run was slow. Where the planner did not price the stated configuration itself (a
microbatch count or an interleaving it does not try or does not pick, the materialized attention kernel) its price
for the same degrees differs from the stated one, and the speedup can fall below 1: ``used_as_stated`` says which.
"""

from __future__ import annotations

import inspect
import statistics
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

from ..runs import check_runs
from ..system import check_system
from ..transformer import as_config
from ..units import Bool, PositiveInt, check_bool, checked, fmt
from .parallelism import Parallelism
from .planner import Plan, PlanResult, plan
from .published import RUNS, PublishedRun, stated_step
from .step import step_time

#: The degrees a plan must share with a run's stated layout to count as that layout (microbatches are left free).
MATCHED_DEGREES = ("data", "fsdp", "tensor", "pipeline", "expert", "context", "dcn")
#: A planner's choice "beats" the stated layout when its expected step is shorter by more than this fraction: 5%.
BEATS_BY = 0.05
#: Widest line of :func:`format_comparison`, characters.
TABLE_WIDTH = 100
#: Keywords of :func:`~tpu_notes.training.plan` that each run fixes: passing them in ``plan_kwargs`` is refused.
_FIXED_BY_RUN = ("model", "system", "slice", "batch_tokens", "seq_len", "n_slices", "dtype")
#: Keywords of :func:`~tpu_notes.training.step_time` that a run states itself: never taken from ``plan_kwargs``.
_STATED_BY_RUN = _FIXED_BY_RUN + ("parallelism", "remat", "circular_repeats", "attention", "layout")
#: The reason given when the planner never generated the stated degrees (followed by ": " and what keeps them out).
NOT_SEARCHED = "not searched"


@dataclass(frozen=True)
class PractitionerComparison:
    """One published run's stated layout beside the planner's ranking of the same problem."""

    run: str  # the published run's name (PublishedRun.name)
    group: str  # who ran it, on what (a key of tpu_notes.runs.GROUPS)
    system: str  # the hardware, e.g. "2 x v5e 16x16" (DCN slices x chip and torus) or "8192 x H100 (1024 nodes)"
    used: str  # the stated layout, Parallelism.label() (its microbatches included)
    used_remat: str  # the stated remat policy
    used_expected_s: float  # seconds: expected step of the stated configuration (StepTime.expected.total)
    used_roofline_s: float  # seconds: roofline step of the stated configuration (StepTime.total), a floor
    used_rank: int | None  # 1-based rank of the stated degrees + remat in the planner's ranking; None if not ranked
    used_plan_expected_s: float | None  # seconds: the planner's expected step for those degrees (its microbatches)
    used_plan: Parallelism | None  # the planner's version of the stated layout (its microbatches); None: not ranked
    used_plan_repeats: int | None  # interleaved layer groups per pipeline stage in that plan (1: not interleaved)
    used_as_stated: bool  # the planner priced the stated configuration itself (same microbatches and interleaving)
    used_reason: str  # "" when ranked; else the planner's rejection reason, or "not searched: <why>"
    best: str | None  # the planner's first choice, Parallelism.label(); None when it ranked nothing
    best_parallelism: Parallelism | None  # the same layout as a Parallelism
    best_remat: str | None  # its remat policy
    best_expected_s: float | None  # seconds: its expected step (StepTime.expected.total)
    best_roofline_s: float | None  # seconds: its roofline step (StepTime.total)
    speedup: float | None  # used_expected_s / best_expected_s (> 1: the planner's choice is faster); None: no plan
    ranked: int  # layouts the planner ranked
    rejected: int  # candidates the planner rejected
    same_remat: bool  # whether the planner was held to the run's remat policy
    used_tier: int | None = None  # the stated layout's tier in the ranking (1: the model cannot beat it); None
    tie_within: float = 0.0  # fraction: the width of the planner's tiers (the model's out-of-sample error)

    @property
    def within_error(self) -> bool:
        """Whether the stated layout shares the planner's first tier: the model cannot say another is faster."""
        return self.used_tier == 1

    @property
    def agrees(self) -> bool:
        """Whether the planner's first choice has the stated degrees (and remat): ``used_rank == 1``."""
        return self.used_rank == 1


@checked
def describe_system(system, n_slices: PositiveInt = 1) -> str:
    """A short name of a system: ``"v5e 16x16"`` for a TPU slice (``"4 x v5e 16x16"`` for 4 slices over DCN),
    ``"8192 x H100 (1024 nodes)"`` for a GPU cluster (``str`` of the system)."""
    check_system(system, "system")
    if not system.joins_over_dcn and n_slices != 1:
        raise ValueError(
            f"n_slices must be 1 for a {type(system).__name__} (it includes its whole network); got {n_slices}"
        )
    one = str(system)
    return f"{n_slices} x {one}" if n_slices > 1 else one


def _degrees(p: Parallelism) -> tuple[int, ...]:
    return tuple(getattr(p, k, 1) for k in MATCHED_DEGREES)


def _repeats(q: Plan) -> int:
    """Interleaved layer groups per stage of plan ``q`` (1 where the planner does not record them)."""
    return getattr(q, "circular_repeats", 1)


def _find(plans: Sequence[Plan], run: PublishedRun) -> Plan | None:
    """The first plan with the degrees of the run's layout and its remat policy, preferring one with the same
    microbatches and interleaving too."""
    p = run.parallelism
    hits = [q for q in plans if _degrees(q.parallelism) == _degrees(p) and str(q.remat) == run.remat]
    same = [q for q in hits if q.parallelism.microbatches == p.microbatches and _repeats(q) == run.circular_repeats]
    return (same or hits or [None])[0]


def _plan_default(name: str):
    """The default of keyword ``name`` of :func:`plan` (None when it has no such keyword)."""
    param = inspect.signature(inspect.unwrap(plan)).parameters.get(name)
    return None if param is None or param.default is inspect.Parameter.empty else param.default


def _not_searched(run: PublishedRun, plan_kwargs: dict) -> str:
    """:data:`NOT_SEARCHED` and what keeps the stated degrees out of the planner's candidates where a rule of
    :func:`plan` names it (a pipeline with more stages than layers or than ``max_pipeline``, a tensor degree that
    does not divide the heads and ``d_ff``, an expert degree that does not divide the experts)."""
    m, p = as_config(run.model), run.parallelism
    why = []
    if p.pipeline > m.n_layers:
        why.append(f"pipeline={p.pipeline} has more stages than the {m.n_layers} layers")
    limit = plan_kwargs.get("max_pipeline", _plan_default("max_pipeline"))
    if isinstance(limit, int) and p.pipeline > limit:
        why.append(f"pipeline={p.pipeline} > max_pipeline={limit}")
    if m.n_heads % p.tensor or m.d_ff % p.tensor:
        why.append(f"tensor={p.tensor} does not divide {m.n_heads} heads and d_ff={m.d_ff}")
    if p.expert > 1 and (not m.is_moe or m.n_experts % p.expert):
        why.append(f"expert={p.expert} does not divide {m.n_experts} experts")
    return f"{NOT_SEARCHED}: " + ("; ".join(why) if why else "not among the planner's candidates")


def _step_kwargs(plan_kwargs: dict) -> dict:
    """The keywords of ``plan_kwargs`` that :func:`step_time` takes too (``overlap``, ``matmul_efficiency``...), so
    that the stated layout is priced as the planner prices its own."""
    accepted = inspect.signature(inspect.unwrap(step_time)).parameters
    return {k: v for k, v in plan_kwargs.items() if k in accepted and k not in _STATED_BY_RUN}


def _compare_one(run: PublishedRun, same_remat: bool, plan_kwargs: dict) -> PractitionerComparison:
    p = run.parallelism
    kwargs = dict(plan_kwargs)
    kwargs.setdefault("rank_by", "expected")
    kwargs.setdefault("framework", run.framework)  # the launch rules, memory and kernels of the run's framework
    # search at least as far as the run went: its pipeline depth and microbatch count
    kwargs.setdefault("max_pipeline", max(_plan_default("max_pipeline"), p.pipeline))
    kwargs.setdefault("max_microbatches", max(_plan_default("max_microbatches"), p.microbatches))
    if same_remat:
        kwargs["remat"] = run.remat
    m = as_config(run.model)
    if p.pipeline > 1 and m.n_layers % (p.pipeline * run.circular_repeats):
        kwargs.setdefault("uneven_stages", True)  # the run's own stages are uneven: its framework was asked for it
    result: PlanResult = plan(
        run.model, run.system, run.batch_tokens, run.seq_len, n_slices=p.dcn, dtype=run.dtype, **kwargs
    )
    used = stated_step(run, **_step_kwargs(plan_kwargs))
    ranked = tuple(result.ranked)
    hit = _find(ranked, run)
    rank = ranked.index(hit) + 1 if hit is not None else None
    if hit is not None:
        reason = ""
    else:
        refused = _find(tuple(result.rejected), run)
        if refused is None:
            reason = _not_searched(run, plan_kwargs)
        else:
            reason = refused.reason
            if refused.parallelism.microbatches != p.microbatches:
                reason += f" (at {refused.parallelism.microbatches} microbatches; the run states {p.microbatches})"
    as_stated = (
        hit is not None
        and hit.parallelism == p
        and _repeats(hit) == run.circular_repeats
        and run.attention == "flash"  # the kernel plan() prices (step_time's default)
        and run.async_tensor is None  # plan() prices the family's default for splitting tensor collectives
    )
    best = ranked[0] if ranked else None
    best_exp = best.step.expected.total if best is not None else None
    return PractitionerComparison(
        run=run.name,
        group=run.group,
        system=describe_system(run.system, p.dcn),
        used=p.label(),
        used_remat=run.remat,
        used_expected_s=used.expected.total,
        used_roofline_s=used.total,
        used_rank=rank,
        used_plan_expected_s=hit.step.expected.total if hit is not None else None,
        used_plan=hit.parallelism if hit is not None else None,
        used_plan_repeats=_repeats(hit) if hit is not None else None,
        used_as_stated=as_stated,
        used_reason=reason,
        best=best.parallelism.label() if best is not None else None,
        best_parallelism=best.parallelism if best is not None else None,
        best_remat=str(best.remat) if best is not None else None,
        best_expected_s=best_exp,
        best_roofline_s=best.step.total if best is not None else None,
        speedup=used.expected.total / best_exp if best_exp else None,
        ranked=len(ranked),
        rejected=len(result.rejected),
        same_remat=same_remat,
        used_tier=hit.tier if hit is not None else None,
        tie_within=result.tie_within,
    )


@checked
def compare_with_practitioners(
    runs: Sequence[PublishedRun] = RUNS, *, same_remat: Bool = True, **plan_kwargs
) -> list[PractitionerComparison]:
    """One :class:`PractitionerComparison` per run of ``runs`` (default: every published training run), in order.

    Each run is planned with :func:`~tpu_notes.training.plan` on its own system, global batch (tokens), sequence
    length (tokens), dtype and ``n_slices = run.parallelism.dcn``, ranked by the expected step
    (``rank_by="expected"`` unless ``plan_kwargs`` says otherwise); with ``same_remat`` (the default) the planner
    tries only the run's remat policy, else its own default set (or ``plan_kwargs["remat"]``). Other planner
    keywords pass through ``plan_kwargs``; those :func:`~tpu_notes.training.step_time` also takes (``overlap``,
    ``matmul_efficiency``) price the stated layout too, so that both sides are priced alike. Steps are in seconds.
    See the module docstring for how the stated layout is matched and what ``speedup`` means.
    """
    runs = check_runs(runs, PublishedRun)
    same_remat = check_bool("same_remat", same_remat)
    for key in plan_kwargs:
        if key in _FIXED_BY_RUN:
            raise TypeError(f"plan_kwargs may not set {key!r}: each run fixes it (its own model, system and batch)")
    if same_remat and "remat" in plan_kwargs:
        raise ValueError("remat: give remat in plan_kwargs only with same_remat=False (same_remat uses the run's)")
    out = []
    for i, run in enumerate(runs):
        if not run.system.joins_over_dcn and run.parallelism.dcn != 1:
            raise ValueError(f"runs[{i}] ({run.name!r}): a GpuCluster includes its whole network; dcn must be 1")
        out.append(_compare_one(run, same_remat, plan_kwargs))
    return out


def _check_rows(rows) -> list[PractitionerComparison]:
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of PractitionerComparison; got {type(rows).__name__}")
    rows = list(rows)
    bad = [type(r).__name__ for r in rows if not isinstance(r, PractitionerComparison)]
    if bad:
        raise TypeError(f"rows must be PractitionerComparison rows from compare_with_practitioners(); got {bad[0]}")
    if not rows:
        raise ValueError("rows must hold at least one PractitionerComparison (compare_with_practitioners())")
    return rows


def _reason_key(reason: str) -> str:
    return reason.split(":")[0]


def summarize(rows: Sequence[PractitionerComparison]) -> dict:
    """Counts over ``rows``: ``runs``; ``agrees`` (the planner's first choice is the stated degrees and remat);
    ``beats`` (its expected step is more than :data:`BEATS_BY` shorter than the stated layout's); ``slower`` (its
    expected step is more than :data:`BEATS_BY` longer: the stated configuration lies outside its search);
    ``used_ranked`` and ``used_rejected`` (the stated layout ranked or not), ``rejected_by_reason`` (the text before
    the first colon of each reason: count); ``no_plan`` (runs the planner ranked nothing for); ``median_speedup``
    (over the runs with a plan, None when none has)."""
    rows = _check_rows(rows)
    speedups = [r.speedup for r in rows if r.speedup is not None]
    reasons: dict[str, int] = {}
    for r in rows:
        if r.used_rank is None:
            key = _reason_key(r.used_reason)
            reasons[key] = reasons.get(key, 0) + 1
    return {
        "runs": len(rows),
        "agrees": sum(r.agrees for r in rows),
        "beats": sum(s > 1 + BEATS_BY for s in speedups),
        "slower": sum(s < 1 - BEATS_BY for s in speedups),
        "used_ranked": sum(r.used_rank is not None for r in rows),
        "used_rejected": sum(r.used_rank is None for r in rows),
        "rejected_by_reason": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))),
        "no_plan": sum(r.best is None for r in rows),
        "median_speedup": statistics.median(speedups) if speedups else None,
    }


#: Abbreviations of Parallelism.label() in the table (the legend spells them out).
_SHORT_AXES = (("data=", "dp"), ("fsdp=", "fsdp"), ("tensor=", "tp"), ("pipeline=", "pp"), ("expert=", "ep"))
_SHORT_AXES += (("context=", "cp"), ("dcn=", "dcn"), ("mb=", "mb"), (" x ", " "))
_SHORT_REMAT = {"none": "none", "save_matmul_outputs": "save_mm", "full_block": "full"}


def _short(label: str | None, width: int) -> str:
    if label is None:
        return "-"
    for long, short in _SHORT_AXES:
        label = label.replace(long, short)
    return label if len(label) <= width else label[: width - 1] + "~"


def format_comparison(rows: Sequence[PractitionerComparison]) -> str:
    """``rows`` as a fixed-width table of at most :data:`TABLE_WIDTH` (100) characters a line: per run the stated
    layout and its expected step, its rank in the planner's ranking (``*`` when the planner priced those degrees
    otherwise than stated, ``-`` when it did not rank them: the reasons follow the table), the planner's first
    choice, its remat and expected step, and the speedup. Labels are abbreviated (the legend says how) and cut
    with ``~``."""
    rows = _check_rows(rows)
    head = f"{'run':<21} {'used':<20} {'exp step':>8} {'rank':>4} {'planner':<20} {'remat':<7} {'exp step':>8} {'x':>5}"
    lines = [head]
    notes = []
    for r in rows:
        rank = "-" if r.used_rank is None else f"{r.used_rank}{'' if r.used_as_stated else '*'}"
        best_s = fmt(r.best_expected_s, "s") if r.best_expected_s is not None else "-"
        speed = f"{r.speedup:.2f}" if r.speedup is not None else "-"
        remat = _SHORT_REMAT.get(r.best_remat, r.best_remat or "-")
        lines.append(
            f"{_short(r.run, 21):<21} {_short(r.used, 20):<20} {fmt(r.used_expected_s, 's'):>8} {rank:>4} "
            f"{_short(r.best, 20):<20} {remat:<7.7} {best_s:>8} {speed:>5}"
        )
        if r.used_rank is None:
            notes += textwrap.wrap(
                f"{r.run}: {r.used_reason}", TABLE_WIDTH, initial_indent="  ", subsequent_indent="      "
            )
    lines.append("exp step: the expected step (efficiency model); rank: the used layout's in the planner's ranking")
    lines.append("*: the planner priced the used degrees with other microbatches or interleaving than stated")
    lines.append("x: used exp step / planner's; remat: the planner's (save_mm: save_matmul_outputs, full: full_block)")
    lines.append("dp data, fsdp FSDP, tp tensor, pp pipeline, ep expert, cp context, dcn slices, mb microbatches")
    if notes:
        lines.append("used layouts the planner did not rank:")
        lines += notes
    return "\n".join(line if len(line) <= TABLE_WIDTH else line[: TABLE_WIDTH - 1] + "~" for line in lines)
