"""The planner's answers can be launched: :func:`tpu_notes.training.launch_check` re-checks its top layouts.

Four plans of ``make bench-planner`` that take well under a second each are re-checked layout by layout against
every launch rule, apart from the planner's own screening; hand-built plans that break one rule each show the
checker is not vacuous, and the planner's rejected candidates show it agrees with the planner in the other direction.
"""

from __future__ import annotations

import dataclasses

import pytest

from tpu_notes.system import parse_system
from tpu_notes.topology import Slice
from tpu_notes.training import launch_check, plan

#: (model, system spelling, n_slices, global batch in tokens, sequence length): cheap cases of the benchmark.
CASES = {
    "70b-v5p": ("llama3-70b", "v5p:16x16x16", 1, 4 * 2**20, 4096),
    "405b-h100": ("llama3-405b", "h100:16384", 1, 2**24, 8192),
    "8b-v6e": ("llama3-8b", "v6e:16x16", 1, 4 * 2**20, 4096),
    "405b-v5p-dcn": ("llama3-405b", "v5p:16x16x16", 2, 2**24, 8192),
}


@pytest.fixture(scope="module")
def planned():
    """Each case planned once: name -> (PlanResult, model, system, batch_tokens, seq_len)."""
    out = {}
    for name, (model, spelling, n_slices, batch, seq) in CASES.items():
        system = parse_system(spelling)
        out[name] = (plan(model, system, batch, seq, n_slices=n_slices), model, system, batch, seq)
    return out


def _kinds(violations: list[str]) -> set[str]:
    return {v.split(":")[0] for v in violations}


@pytest.mark.parametrize("name", CASES)
def test_top_layouts_can_be_launched(planned, name):
    result, model, system, batch, seq = planned[name]
    top = result.distinct(10)
    assert len(top) == 10, f"{name}: fewer than 10 distinct layouts ranked"
    for p in top:
        assert launch_check(p, result, model, system, batch, seq) == [], p.parallelism.short()


def test_rejected_candidates_break_a_rule(planned):
    """The other direction: every candidate the planner refused breaks a rule the checker names by itself (not
    only the planner's own verdict or the missing place in the ranking)."""
    result, model, system, batch, seq = planned["405b-h100"]
    kinds = {p.reason.split(":")[0] for p in result.rejected}
    assert {"tensor across nodes", "uneven stages", "does not fit"} <= kinds
    seen = {}
    for p in result.rejected:  # one candidate of each (reason, layout) is enough
        seen.setdefault((p.reason.split(":")[0], p.parallelism.short()), p)
    for p in seen.values():
        own = _kinds(launch_check(p, result, model, system, batch, seq)) - {"tier", "rejected"}
        assert own, f"{p.parallelism.short()} ({p.reason}) breaks no rule the checker knows"


def test_microbatches_not_a_multiple_of_the_stages(planned):
    """MaxText wants a multiple of the stages in microbatches; Megatron's plain 1F1B does not."""
    result, model, system, batch, seq = planned["70b-v5p"]
    assert result.framework == "maxtext"
    base = next(p for p in result.ranked if p.parallelism.pipeline > 1 and p.circular_repeats == 1)
    stages = base.parallelism.pipeline
    mb = stages + 1  # at least the stages, not a multiple of them
    bad = dataclasses.replace(base, parallelism=dataclasses.replace(base.parallelism, microbatches=mb))
    found = launch_check(bad, result, model, system, batch, seq)
    rule = [v for v in found if v.startswith("microbatches per stage")]
    assert len(rule) == 1 and f"microbatches ({mb})" in rule[0] and f"pipeline ({stages})" in rule[0]
    assert "maxtext" in rule[0]
    as_megatron = dataclasses.replace(result, framework="megatron", recipe="megatron")
    assert "microbatches per stage" not in _kinds(launch_check(bad, as_megatron, model, system, batch, seq))


def test_tensor_beyond_an_nvlink_node(planned):
    result, model, system, batch, seq = planned["405b-h100"]
    base = next(p for p in result.ranked if p.parallelism.tensor == 8 and p.parallelism.fsdp % 2 == 0)
    wide = dataclasses.replace(base.parallelism, tensor=16, fsdp=base.parallelism.fsdp // 2)
    assert wide.n_chips == system.n_devices == 16384 and system.scale_up_size == 8
    found = launch_check(dataclasses.replace(base, parallelism=wide), result, model, system, batch, seq)
    assert _kinds(found) == {"tensor across nodes"}
    assert "tensor (16) must divide the 8 devices" in found[0]


def test_a_slice_cloud_tpu_does_not_schedule(planned):
    result, model, system, batch, seq = planned["70b-v5p"]
    big = Slice("v5p", (16, 16, 28))
    found = launch_check(result[0], result, model, big, batch, seq)
    assert big.n_chips == 7168 != result[0].parallelism.n_chips  # the layout is for the 4,096 chips it was planned on
    assert _kinds(found) == {"not schedulable", "mesh size"}
    assert f"not schedulable: {big.why_not_schedulable}" in found


def test_memory_beyond_the_hbm_share(planned):
    """The top 405B layout on H100s (6.8 GB at peak) against 5% of HBM, and with a peak it does not carry."""
    result, model, system, batch, seq = planned["405b-h100"]
    base = result[0]
    assert base.memory.peak > 0.05 * system.chip.hbm_bytes
    tight = dataclasses.replace(result, hbm_fraction=0.05)
    found = launch_check(base, tight, model, system, batch, seq)
    assert _kinds(found) == {"does not fit"} and "5% of" in found[0]
    other = dataclasses.replace(base, memory=dataclasses.replace(base.memory, total=base.memory.total * 2))
    assert _kinds(launch_check(other, result, model, system, batch, seq)) == {"memory record"}


def test_a_plan_out_of_its_tier(planned):
    result, model, system, batch, seq = planned["8b-v6e"]
    first = result[0]
    assert first.tier == 1
    found = launch_check(dataclasses.replace(first, tier=2), result, model, system, batch, seq)
    assert _kinds(found) == {"tier"}
    unranked = launch_check(dataclasses.replace(first, tier=0), result, model, system, batch, seq)
    assert unranked == ["tier: the plan has tier 0; a ranked plan has tier 1 or more"]


def test_dcn_copies_of_a_gpu_cluster(planned):
    result, model, system, batch, seq = planned["405b-v5p-dcn"]
    top = result[0]
    assert top.parallelism.dcn == 2 and launch_check(top, result, model, system, batch, seq) == []
    cluster = parse_system("h100:4096")
    found = launch_check(top, result, model, cluster, batch, seq)
    assert "no DCN" in _kinds(found)


def test_every_ranked_plan_sits_in_its_tier_once():
    """Llama 2 13B on 128 H100s: every ranked plan, not only the top 10, passes the checker, and none is listed
    twice (the tiers are cut from the ranking sorted by the exact step, so a plan at a tier's edge lands in one)."""
    system = parse_system("h100:128")
    result = plan("llama2-13b", system, 2**20, 4096)
    keys = [(p.parallelism, str(p.remat), p.circular_repeats, p.gather_once) for p in result.ranked]
    assert len(set(keys)) == len(keys), "a plan is ranked twice"
    for p in result.ranked:
        assert launch_check(p, result, "llama2-13b", system, 2**20, 4096) == [], p.parallelism.short()
