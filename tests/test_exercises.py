"""Every registered exercise: its reference passes its checker and perturbed answers are rejected."""

import json
from pathlib import Path

import pytest

from tpu_notes import exercises
from tpu_notes.exercises import Exercise, grade

ROOT = Path(__file__).resolve().parent.parent
IDS = exercises.all_ids()


def test_there_are_exercises_for_every_written_chapter():
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        chapter = "ch" + nb.name[:2]
        assert exercises.all_ids(chapter), f"{nb.name} has no registered exercises"


@pytest.mark.parametrize("exercise_id", IDS)
def test_reference_passes(exercise_id):
    g = grade(exercise_id, exercises.solution(exercise_id))
    assert g.correct and g.message.startswith("✓"), g.message


@pytest.mark.parametrize("exercise_id", IDS)
def test_perturbed_answers_are_rejected(exercise_id):
    wrong = exercises.wrong_answers(exercise_id)
    assert wrong, "no perturbation could be made"
    for answer in wrong:
        g = grade(exercise_id, answer)
        assert g.attempted and not g.correct, f"{exercise_id} accepted {answer!r}"
        assert g.message.startswith("✗") and "Hint" in g.message


@pytest.mark.parametrize("exercise_id", IDS)
def test_unattempted_is_not_a_failure(exercise_id, capsys):
    exercises.check(exercise_id, None)
    out = capsys.readouterr().out
    assert "not attempted yet" in " ".join(out.split())  # a long title wraps the verdict at the page's width
    assert max(len(line) for line in out.splitlines()) <= exercises.HINT_WIDTH


def test_notebook_exercises_are_registered_and_solved():
    """Each exercise a chapter checks is registered, and its solution cell is tagged and hidden."""
    for nb_path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        nb = json.loads(nb_path.read_text())
        checked, solved = set(), set()
        for cell in nb["cells"]:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] != "code" or "exercises.check(" not in src:
                continue
            ids = {part.split('"')[1] for part in src.split("exercises.check(")[1:]}
            tags = cell["metadata"].get("tags", [])
            if src.lstrip().startswith("# Solution"):
                assert {"solution", "hide-cell"} <= set(tags), f"{nb_path.name}: untagged solution {ids}"
                solved |= ids
            else:
                checked |= ids
        assert checked, f"{nb_path.name} has no exercises"
        assert checked <= set(IDS), f"{nb_path.name} checks unregistered ids {checked - set(IDS)}"
        assert checked <= solved, f"{nb_path.name}: exercises without a solution cell: {checked - solved}"


def _exercise_calls(nb: dict):
    """(heading number N.M, checker id) for every ``exercises.check`` below an ``Exercise N.M`` heading."""
    import re

    heading, out = None, []
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            found = re.findall(r"Exercise (\d+)\.(\d+)", src)
            if found:
                heading = found[0]
        elif heading is not None:
            out += [(heading, ex_id) for ex_id in re.findall(r'exercises\.check\("([\w.]+)"', src)]
    return out


@pytest.mark.parametrize("nb_path", sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")), ids=lambda p: p.stem)
def test_exercise_numbers_and_checker_ids_agree(nb_path):
    """Book-wide: "Exercise 11.3" checks ``ch11.q3`` (or a part of it, ``ch11.q3a``, ``ch03.q8_plans``), never
    another exercise's id (Chapter 11 once called ``ch11.q6`` from Exercise 11.3)."""
    import re

    wrong = []
    for (chapter, number), ex_id in _exercise_calls(json.loads(nb_path.read_text())):
        if not re.fullmatch(rf"ch{int(chapter):02d}\.q{int(number)}(?!\d)\w*", ex_id):
            wrong.append(f"Exercise {chapter}.{number} checks {ex_id}")
    assert not wrong, wrong


def test_the_numbering_check_catches_a_mismatch():
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "### Exercise 11.3 · bandwidth"},
            {"cell_type": "code", "source": 'exercises.check("ch11.q6", answer)'},
            {"cell_type": "markdown", "source": "### Exercise 11.4 · latency"},
            {"cell_type": "code", "source": 'exercises.check("ch11.q4b", answer)'},
        ]
    }
    import re

    calls = _exercise_calls(nb)
    assert calls == [(("11", "3"), "ch11.q6"), (("11", "4"), "ch11.q4b")]
    bad = [i for (c, n), i in calls if not re.fullmatch(rf"ch{int(c):02d}\.q{int(n)}(?!\d)\w*", i)]
    assert bad == ["ch11.q6"]


# --- the checker itself, on a throwaway registry entry -------------------------------------------------------


def _temp(ref, **kw):
    ex = Exercise(id=f"test.{len(exercises._REGISTRY)}", title="temp", solve=lambda: ref, hint="think", **kw)
    exercises._REGISTRY[ex.id] = ex
    return ex.id


def test_numeric_tolerance_is_relative():
    i = _temp(100.0, rtol=0.05)
    assert grade(i, 104).correct and not grade(i, 106).correct and not grade(i, -100).correct


def test_sequences_dicts_strings_and_bools():
    assert grade(_temp([1.0, 2.0]), (1.0, 2.01)).correct
    assert not grade(_temp([1.0, 2.0]), [1.0]).correct
    assert grade(_temp({"a": 1.0, "b": 2.0}), {"b": 2.0, "a": 1.0}).correct
    assert not grade(_temp({"a": 1.0}), {"c": 1.0}).correct
    assert grade(_temp("compute"), " Compute ").correct
    assert not grade(_temp("compute"), "bandwidth").correct
    assert grade(_temp(True), True).correct and not grade(_temp(True), 1).correct


def test_wrong_type_is_reported_not_raised():
    g = grade(_temp(1.0), "one")
    assert g.attempted and not g.correct and "number" in g.message


def test_registry_rejects_bad_entries():
    with pytest.raises(ValueError, match="rtol"):
        exercises.register(Exercise(id="test.loose", title="t", solve=lambda: 1, hint="h", rtol=0.5))
    with pytest.raises(TypeError):
        exercises.register("not an exercise")
    with pytest.raises(ValueError, match="unknown exercise_id"):
        exercises.get("ch99.q1")
