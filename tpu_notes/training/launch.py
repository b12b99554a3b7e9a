"""Can the planner's answer be launched? One ranked layout re-checked against every rule, apart from the planner.

:func:`~tpu_notes.training.plan` screens each candidate as it searches (:mod:`tpu_notes.training.planner`). That
screening is fast because it is interleaved with the search; :func:`launch_check` asks the same questions again
of one finished :class:`~tpu_notes.training.Plan`, one rule at a time, with the public rule functions of
:mod:`tpu_notes.rules` and the public memory model :func:`~tpu_notes.training.training_memory`, so that a slip in
the search shows up as a broken rule instead of a layout nobody can run. The rules (Chapters 5, 6 and 11):

- the system can be asked for in one piece (:attr:`tpu_notes.topology.Slice.why_not_schedulable`), and ``dcn``
  copies of it only where copies join over DCN (a TPU slice);
- the degrees multiply to the system's devices, and the layout can be placed on them;
- the framework launches the pipeline (:func:`tpu_notes.rules.pipeline_schedule`): stages x layer groups divide the
  layers, or the framework accepts shorter first and last stages; microbatches a multiple of the stages where the
  framework requires it; layer groups only with a pipeline;
- tensor parallelism stays in the scale-up domain (an NVLink node), and gives each rank whole heads;
- whole sequences, equal context chunks, whole experts, and every batch shard the same whole number of sequences
  in whole microbatches (the parts of :func:`tpu_notes.rules.training_layout`);
- the modelled peak memory, recomputed under the result's precision recipe and the framework's sharding over the
  context ranks and resharding, with the plan's remat, layer groups and gather form, is at most the result's share
  of HBM (and is the figure the plan carries);
- the plan sits in its tier: its step within ``tie_within`` of its tier's fastest, and beyond the previous tier's.

What a :class:`~tpu_notes.training.PlanResult` does not record is taken at :func:`~tpu_notes.training.plan`'s
defaults: Adam's moments, the framework's own resharding, tensor parallelism inside the scale-up domain (a plan
made with ``tensor_across_nodes=True`` is flagged where it leaves an NVLink node). The other way, shorter first
and last stages are accepted wherever the framework launches them, whether or not ``uneven_stages`` was asked for.
"""

from __future__ import annotations

import math

from .. import rules
from ..system import check_system
from ..transformer import as_config
from ..units import PositiveInt, SeqLen, checked, fmt
from .frameworks import FRAMEWORKS
from .memory import training_memory
from .planner import Plan, PlanResult
from .precision import RECIPES
from .step import map_to_slice

__all__ = ["launch_check"]


@checked
def launch_check(
    plan: Plan, result: PlanResult, model, system, batch_tokens: PositiveInt, seq_len: SeqLen
) -> list[str]:
    """Every launch rule ``plan`` (one plan of ``result``, the :func:`~tpu_notes.training.plan` call that ranked
    ``model`` on ``system`` for batches of ``batch_tokens`` tokens in sequences of ``seq_len``) breaks, each as
    ``"kind: what is wrong"``; an empty list when it can be launched. See the module docstring for the rules.
    Memory is recomputed only for a layout that passes the layout rules (the memory model needs a legal one)."""
    _check_plan_and_result(plan, result)
    m = as_config(model)
    check_system(system, "system")
    fw = FRAMEWORKS[result.framework]
    p, v = plan.parallelism, plan.circular_repeats
    out: list[str] = []
    _add_new(out, _system_violations(p, system))
    _add_new(out, _placement_violations(p, system))
    _add_new(out, _pipeline_violations(m, p, v, fw))
    _add_new(out, _layout_violations(m, p, system, batch_tokens, seq_len))

    # memory, recomputed with the public model (only for a legal layout: it refuses the others)
    if not out:
        out += _memory_violations(plan, result, m, system, batch_tokens, seq_len)
    if plan.reason:
        _add_new(out, [f"rejected: the planner rejected this plan ({plan.reason})"])

    out += _tier_violations(plan, result)
    return out


def _check_plan_and_result(plan, result) -> None:
    """Refuse a ``plan`` that is not a Plan, or a ``result`` that is not a PlanResult of a known framework and
    recipe."""
    if not isinstance(plan, Plan):
        raise TypeError(f"plan must be a Plan (one of PlanResult.ranked); got {type(plan).__name__}")
    if not isinstance(result, PlanResult):
        raise TypeError(f"result must be the PlanResult of tpu_notes.training.plan; got {type(result).__name__}")
    if result.framework not in FRAMEWORKS or result.recipe not in RECIPES:
        raise ValueError(
            f"result must name a framework of {tuple(FRAMEWORKS)} and a recipe of {tuple(RECIPES)}; got "
            f"{result.framework!r} and {result.recipe!r}"
        )


def _add_new(out: list[str], lines: list[str]) -> None:
    """Append to ``out`` each of ``lines`` it does not hold yet (two checks may meet the same rule: stages
    against layers)."""
    for line in lines:
        if line not in out:
            out.append(line)


def _broken_rule(check, *args, **kwargs) -> list[str]:
    """The rule ``check`` (a function of :mod:`tpu_notes.rules`) as ``["kind: what is wrong"]`` when it is
    broken; an empty list when it holds."""
    try:
        check(*args, **kwargs)
    except rules.Illegal as err:
        return [f"{err.kind}: {err}"]
    return []


def _system_violations(p, system) -> list[str]:
    """The system rules: it can be asked for in one piece, and copies of it join over DCN only where they can."""
    out = []
    if system.why_not_schedulable:
        out.append(f"not schedulable: {system.why_not_schedulable}")
    if p.dcn > 1 and not system.joins_over_dcn:
        out.append(f"no DCN: dcn ({p.dcn}) joins TPU slices; {system} includes its whole network (dcn must be 1)")
    return out


def _placement_violations(p, system) -> list[str]:
    """The degrees against the devices: they multiply to the system's devices, and the layout can be placed."""
    degrees = {k: getattr(p, k) for k in ("data", "fsdp", "tensor", "pipeline", "expert", "context")}
    if math.prod(degrees.values()) != system.n_devices:
        return _broken_rule(rules.mesh_devices, degrees, system.n_devices)
    try:
        map_to_slice(p, system)
    except ValueError as err:
        return [f"cannot place: {err}"]
    return []


def _pipeline_violations(m, p, v: int, fw) -> list[str]:
    """The framework's pipeline: layers per stage, then microbatches per stage, and layer groups only with a
    pipeline."""
    uneven_edges = fw.uneven_edges and m.n_layers % (p.pipeline * v) != 0
    schedule = {"framework": fw.name, "uneven_edges": uneven_edges}
    out = _broken_rule(
        rules.pipeline_schedule,
        m,
        p.pipeline,
        v,
        p.microbatches,
        even_layers=fw.even_layers,
        microbatches_per_stage="never",
        **schedule,
    )
    out += _broken_rule(
        rules.pipeline_schedule,
        m,
        p.pipeline,
        v,
        p.microbatches,
        even_layers=False,
        microbatches_per_stage=fw.microbatches_per_stage,
        **schedule,
    )
    if v > 1 and p.pipeline == 1:
        out.append(f"layer groups: circular_repeats ({v}) interleaves pipeline stages; this layout has none")
    return out


def _layout_violations(m, p, system, batch_tokens: int, seq_len: int) -> list[str]:
    """Tensor parallelism, and the model and batch rules of a training layout."""
    out = _broken_rule(rules.scale_up_domain, p.tensor, system.scale_up_size)
    out += _broken_rule(rules.whole_heads, m, p.tensor)
    out += _broken_rule(rules.context_degree, seq_len, p.context)
    out += _broken_rule(rules.expert_degree, m, p.expert)
    if batch_tokens % seq_len:
        out += _broken_rule(rules.whole_sequences, batch_tokens, seq_len)
    else:
        sequences = batch_tokens // seq_len
        out += _broken_rule(
            rules.batch_shards, sequences, p.batch_shards, microbatches=p.microbatches, stages=p.pipeline
        )
    return out


def _memory_violations(plan: Plan, result: PlanResult, m, system, batch_tokens: int, seq_len: int) -> list[str]:
    """The memory rule: the plan's peak, recomputed, within the result's share of HBM and equal to the plan's."""
    fw = FRAMEWORKS[result.framework]
    mem = training_memory(
        m,
        plan.parallelism,
        batch_tokens,
        seq_len,
        remat=plan.remat,
        recipe=result.recipe,
        over_context=fw.over_context,
        reshard_after_forward=fw.reshard_after_forward,
        circular_repeats=plan.circular_repeats,
        gather_once=plan.gather_once,
    )
    out = []
    hbm = result.hbm_fraction * system.chip.hbm_bytes
    if mem.peak > hbm:
        out.append(
            f"does not fit: {fmt(mem.peak, 'B')} per chip at peak > {result.hbm_fraction:.0%} of "
            f"{fmt(system.chip.hbm_bytes, 'B')} HBM ({result.recipe} recipe, remat {plan.remat})"
        )
    if plan.memory is None or not math.isclose(plan.memory.peak, mem.peak, rel_tol=1e-9):
        carried = "none" if plan.memory is None else fmt(plan.memory.peak, "B")
        out.append(f"memory record: the plan carries a peak of {carried}; recomputed {fmt(mem.peak, 'B')}")
    return out


def _seconds(result: PlanResult, plan: Plan) -> float:
    """The step the ranking of ``result`` orders ``plan`` by."""
    st = plan.step
    return st.expected.total if result.rank_by == "expected" and st.expected is not None else st.total


def _tier_violations(plan: Plan, result: PlanResult) -> list[str]:
    """The tier rule: a ranked plan's step lies within ``tie_within`` of its tier's fastest, and beyond the reach
    of the tier before it (whose plans it would otherwise have joined)."""
    if plan.step is None:
        return ["tier: the plan has no step, so no place in the ranking"]
    if plan.tier < 1:
        return [f"tier: the plan has tier {plan.tier}; a ranked plan has tier 1 or more"]
    fastest = {}
    for q in result.ranked:
        if q.step is not None:
            fastest[q.tier] = min(fastest.get(q.tier, math.inf), _seconds(result, q))
    if plan.tier not in fastest:
        return [f"tier: no plan of the ranking is in tier {plan.tier}"]
    own, reach = _seconds(result, plan), 1.0 + result.tie_within
    out = []
    if own > fastest[plan.tier] * reach * (1 + 1e-12):
        out.append(
            f"tier: a step of {fmt(own, 's')} is more than {result.tie_within:.0%} slower than tier "
            f"{plan.tier}'s fastest ({fmt(fastest[plan.tier], 's')})"
        )
    before = fastest.get(plan.tier - 1)
    if before is not None and own <= before * reach * (1 + 1e-12):
        out.append(
            f"tier: a step of {fmt(own, 's')} is within {result.tie_within:.0%} of tier {plan.tier - 1}'s fastest "
            f"({fmt(before, 's')}), so it belongs to that tier"
        )
    return out
