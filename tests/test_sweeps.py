"""Published layout sweeps (tpu_notes.training.sweeps): the rank and regret arithmetic, the records' checks, and the
model's ranking and trends against the project's set."""

from __future__ import annotations

import math

import pytest

from tpu_notes.training import sweeps as S


def test_spearman_matches_its_definition_without_ties():
    a, b = [10.0, 20.0, 30.0, 40.0], [1.0, 3.0, 2.0, 4.0]
    d2 = sum((x - y) ** 2 for x, y in zip([1, 2, 3, 4], [1, 3, 2, 4]))  # rank differences
    assert S.spearman(a, b) == pytest.approx(1 - 6 * d2 / (4 * (16 - 1)))
    assert S.spearman(a, a[::-1]) == pytest.approx(-1.0)


def test_spearman_ties_take_their_mean_rank_and_a_constant_is_refused():
    assert S.spearman([1.0, 1.0, 2.0], [1.0, 2.0, 3.0]) == pytest.approx(math.sqrt(3) / 2)
    with pytest.raises(ValueError, match="constant"):
        S.spearman([1.0, 1.0], [1.0, 2.0])


def test_regret_is_zero_for_the_best_pick_and_charges_ties_their_worst():
    assert S.regret([1.0, 2.0, 3.0], [0.5, 0.6, 0.9]) == 0.0
    assert S.regret([1.0, 2.0, 4.0], [0.5, 0.9, 0.6]) == pytest.approx(1.0)
    assert S.regret([1.0, 2.0, 4.0], [0.9, 0.5, 0.9]) == pytest.approx(3.0)


def test_a_ranking_sweep_must_hold_its_model_chips_and_batch_fixed():
    series = S.SWEEPS[0]
    with pytest.raises(ValueError, match="number of chips"):
        S.LayoutSweep("x", "y", "layout", "z", series.runs[:2])
    with pytest.raises(ValueError, match="runs"):
        S.LayoutSweep("x", "y", "slices", "z", series.runs[:1])


def test_every_sweep_states_its_source_and_is_evaluated():
    results = S.evaluate_all()
    assert len(results) == len(S.SWEEPS) >= 2
    for r in results:
        assert r.sweep.source and r.sweep.varies
        assert len(r.predicted) == len(r.measured) == len(r.sweep.runs)
        if r.sweep.kind in S.RANKING_KINDS:
            assert r.regret is not None and r.regret >= 0
    assert S.format_sweeps(results).count("\n") == len(results)


def test_exercise_6_16_is_the_roofline_ranking_regret_and_rejects_the_expected_one():
    from tpu_notes import exercises
    from tpu_notes.exercises.ch06 import SWEEP_16
    from tpu_notes.training import published

    sweep = next(s for s in S.SWEEPS if s.name == SWEEP_16)
    rows = [published.predict(r) for r in sweep.runs]
    pick = max(range(len(rows)), key=lambda i: rows[i].predicted)
    by_hand = max(r.reported for r in rows) / rows[pick].reported - 1
    assert exercises.solution("ch06.q16") == pytest.approx(by_hand)
    assert exercises.grade("ch06.q16", by_hand).correct
    expected_regret = S.evaluate(sweep).regret
    if not math.isclose(expected_regret, by_hand, rel_tol=0.05):
        assert not exercises.grade("ch06.q16", expected_regret).correct
    assert not exercises.grade("ch06.q16", by_hand + 0.5).correct
