"""The planner beside the layouts practitioners ran (tpu_notes.training.practitioners): properties, not numbers.

The planner is being rewritten (issue 23), so nothing here pins a rank or a step time; what must hold whatever the
numbers are: one row per run, the planner's first choice no slower than any layout it ranked, the stated layout priced
as ``step_time`` prices it, the summary's counts adding up, bad input refused by name and the table's width.

Planning all 46 published runs took 5 to 47 s on the 2-core machine while the planner was being rewritten; this file
plans a fixed third of them (every third run, plus RUNS[4]), which covers TPU slices, DCN slices, GPU clusters,
pipelines, MoE, and stated layouts the planner ranks, rejects and never generates.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from tpu_notes.gpu import GpuCluster
from tpu_notes.topology import Slice
from tpu_notes.training import plan, step_time
from tpu_notes.training.practitioners import (
    TABLE_WIDTH,
    PractitionerComparison,
    compare_with_practitioners,
    describe_system,
    format_comparison,
    summarize,
)
from tpu_notes.training.published import RUNS, predict

#: The runs planned here: every third published run and RUNS[4] (Llama 3.1 405B on 2 x v6e-256: FSDP over DCN, which
#: the model does not keep, so it is rejected for memory: published.MEMORY_GAPS).
SUBSET = tuple(RUNS[::3]) + (RUNS[4],)


@pytest.fixture(scope="module")
def rows():
    return compare_with_practitioners(SUBSET)


def test_one_row_per_run_in_order(rows):
    assert [r.run for r in rows] == [run.name for run in SUBSET]
    assert all(isinstance(r, PractitionerComparison) and r.same_remat for r in rows)
    assert [r.group for r in rows] == [run.group for run in SUBSET]
    assert [r.used for r in rows] == [run.parallelism.label() for run in SUBSET]


def test_the_stated_layout_is_priced_as_published_predict_prices_it(rows):
    for run, r in zip(SUBSET, rows):
        st = predict(run).step
        assert math.isclose(r.used_expected_s, st.expected.total, rel_tol=1e-9), run.name
        assert math.isclose(r.used_roofline_s, st.total, rel_tol=1e-9), run.name
        assert r.used_roofline_s <= r.used_expected_s * (1 + 1e-9), f"{run.name}: the roofline is a floor"


def test_the_planners_best_is_no_slower_than_any_layout_it_ranked(rows):
    checked_as_stated = 0
    for r in rows:
        assert r.best is not None and r.best_expected_s > 0, r.run
        if r.used_rank is None:
            continue
        assert r.used_rank >= 1 and r.used_rank <= r.ranked
        # the first choice heads the first tier: within the model's error of the fastest layout it ranked
        assert r.best_expected_s <= r.used_plan_expected_s * (1 + r.tie_within) * (1 + 1e-9), r.run
        if r.used_as_stated:  # the planner priced exactly the stated configuration: at worst a tie
            checked_as_stated += 1
            assert r.speedup >= 1 / (1 + r.tie_within) - 1e-9, r.run
            assert math.isclose(r.used_plan_expected_s, r.used_expected_s, rel_tol=1e-9), r.run
        if r.used_rank == 1:
            assert r.agrees and r.best == r.used_plan.label()
    assert checked_as_stated, "no row priced the stated configuration itself: the property was not exercised"


def test_the_matched_plan_is_priced_as_step_time_prices_it(rows):
    for run, r in zip(SUBSET, rows):
        if r.used_plan is None:
            continue
        degrees = ("data", "fsdp", "tensor", "pipeline", "expert", "context", "dcn")
        assert all(getattr(r.used_plan, k) == getattr(run.parallelism, k) for k in degrees), r.run
        st = step_time(
            run.model,
            r.used_plan,
            run.system,
            run.batch_tokens,
            run.seq_len,
            remat=run.remat,
            dtype=run.dtype,
            circular_repeats=r.used_plan_repeats,
            framework=run.framework,  # the planner searched under the run's framework
        )
        assert math.isclose(st.expected.total, r.used_plan_expected_s, rel_tol=1e-9), r.run


def test_an_unranked_layout_says_why(rows):
    unranked = [r for r in rows if r.used_rank is None]
    assert unranked, "the subset was chosen to hold a rejected stated layout"
    for r in unranked:
        assert r.used_reason and r.used_plan is None and r.used_plan_expected_s is None
    assert all(r.used_reason == "" for r in rows if r.used_rank is not None)


def test_summary_counts_add_up(rows):
    s = summarize(rows)
    assert s["runs"] == len(rows)
    assert s["used_ranked"] + s["used_rejected"] == len(rows)
    assert sum(s["rejected_by_reason"].values()) == s["used_rejected"]
    assert 0 <= s["agrees"] <= s["used_ranked"]
    assert s["beats"] + s["slower"] <= len(rows) - s["no_plan"]
    assert s["agrees"] == sum(r.used_rank == 1 for r in rows)


def test_more_remat_policies_never_make_the_best_slower():
    small = (RUNS[27], RUNS[28])  # the two 8-chip v6e runs: quick to plan
    held = compare_with_practitioners(small)
    free = compare_with_practitioners(small, same_remat=False)
    for a, b in zip(held, free):
        assert not b.same_remat
        assert b.best_expected_s <= a.best_expected_s * (1 + 1e-9), a.run


def test_planner_keywords_pass_through():
    (r,) = compare_with_practitioners([RUNS[28]], hbm_fraction=1e-6)
    assert r.best is None and r.speedup is None and r.ranked == 0  # nothing fits in a millionth of HBM
    assert r.used_reason.startswith("does not fit")
    assert "-" in format_comparison([r])


def test_bad_input_is_refused_by_name():
    with pytest.raises(TypeError, match="runs"):
        compare_with_practitioners("abc")
    with pytest.raises(ValueError, match="runs"):
        compare_with_practitioners([])
    with pytest.raises(ValueError, match="runs"):
        compare_with_practitioners([3])
    with pytest.raises(TypeError, match="same_remat"):
        compare_with_practitioners([RUNS[28]], same_remat="yes")
    with pytest.raises(TypeError, match="n_slices"):
        compare_with_practitioners([RUNS[28]], n_slices=2)
    with pytest.raises(ValueError, match="remat"):
        compare_with_practitioners([RUNS[28]], remat="none")
    for fn in (format_comparison, summarize):
        with pytest.raises(TypeError, match="rows"):
            fn("abc")
        with pytest.raises(TypeError, match="rows"):
            fn([3])
        with pytest.raises(ValueError, match="rows"):
            fn([])
    with pytest.raises(TypeError, match="system"):
        describe_system("v5p")


def test_table_width_and_rows(rows):
    text = format_comparison(rows)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= TABLE_WIDTH
    assert len(lines) >= len(rows) + 1
    long = dataclasses.replace(rows[0], run="x" * 300, used="data=1 x " * 40, best="fsdp=2 x " * 40, used_rank=None)
    long = dataclasses.replace(long, used_reason="does not fit: " + "very " * 80 + "large")
    assert max(len(line) for line in format_comparison([long]).splitlines()) <= TABLE_WIDTH


def test_describe_system():
    assert describe_system(Slice("v5e", (16, 16)), 4) == "4 x v5e 16x16"
    assert describe_system(Slice("v5p", (4, 4, 4))) == "v5p 4x4x4"
    assert describe_system(GpuCluster("h100", 64)) == "64 x H100 (8 nodes)"


def test_plan_is_what_the_rows_rank():
    # The comparison's best is the planner's first choice for the same problem (no re-ranking of its own).
    run = RUNS[28]
    (r,) = compare_with_practitioners([run])
    result = plan(run.model, run.system, run.batch_tokens, run.seq_len, remat=run.remat, rank_by="expected")
    assert r.best == result.ranked[0].parallelism.label()
    assert r.ranked == len(result.ranked)
