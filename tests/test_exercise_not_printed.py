"""Issue 40: no exercise asks for a number the page has already printed above it.

For every chapter, every numeric element of every exercise's reference answer (``exercises.solution``) is compared
with every number printed in an output above the exercise's question (tools/exercise_scan.py): a match in unit,
within the checker's tolerance and to the printed precision means the reader can copy the answer instead of
computing it. The scanner itself is checked on planted pages: it finds a restatement printed with another SI
prefix, as a percentage or inside a sentence, and ignores the same digits in another unit, at another precision,
or below the question.
"""

import json
import sys
from pathlib import Path

import pytest

from tpu_notes.exercises import Exercise

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import exercise_scan as scan  # noqa: E402

NOTEBOOKS = scan.notebooks()

#: Reviewed matches that are not restatements, by (exercise id, element path) -> why. Each entry is a number the page
#: prints for another quantity, which the scan cannot tell apart; an entry the scan no longer reports must go.
COINCIDENCES: dict[tuple[str, str], str] = {
    ("ch05.q20", "plain_imbalance"): "the 1.88x printed above is the K/V-to-query byte ratio of a KV exchange, not "
    "the causal imbalance of plain context sharding, which happens to be 1.875",
}


def _offences(nb_path: Path) -> list:
    refs = scan.references(scan.chapter_of(nb_path))
    return scan.first_per_element(scan.scan(json.loads(nb_path.read_text()), refs))


@pytest.mark.parametrize("nb_path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_exercise_answer_is_printed_above_it(nb_path):
    """Every exercise asks for a quantity no output above its question prints (another model, dtype, chip, context
    or batch). Whole numbers <= 16, strings, booleans and programs are not judged here (see scan.elements)."""
    found = [o for o in _offences(nb_path) if (o.exercise_id, o.element.path) not in COINCIDENCES]
    if found:
        lines = "\n".join(o.message() for o in found)
        pytest.fail(f"{len(found)} exercise answer(s) printed above the question:\n{lines}", pytrace=False)


def test_every_listed_coincidence_is_still_reported():
    """COINCIDENCES stays short: an entry the scan no longer reports (the exercise or the output changed) is removed."""
    by_chapter: dict[str, set] = {}
    for ex_id, path in COINCIDENCES:
        by_chapter.setdefault(ex_id.split(".")[0], set()).add((ex_id, path))
    stale = []
    for chapter, keys in by_chapter.items():
        (nb_path,) = [p for p in NOTEBOOKS if scan.chapter_of(p) == chapter]
        reported = {(o.exercise_id, o.element.path) for o in _offences(nb_path)}
        stale += sorted(keys - reported)
    assert not stale, f"no longer reported, remove from COINCIDENCES: {stale}"


def test_every_checked_exercise_has_its_question_above_it():
    """The scan's "above" is the markdown cell that asks the exercise: each checked id finds its own heading."""
    import re

    for nb_path in NOTEBOOKS:
        nb = json.loads(nb_path.read_text())
        cells = nb["cells"]
        for ex_id, at in scan.exercise_cells(nb).items():
            cell = cells[at]
            m = re.match(r"ch(\d+)\.q(\d+)", ex_id)
            assert cell["cell_type"] == "markdown", f"{nb_path.name}: {ex_id} has no question cell"
            assert f"Exercise {int(m[1])}.{int(m[2])}" in scan._source(cell), f"{nb_path.name}: {ex_id} -> cell {at}"


# --- the scanner on planted pages ----------------------------------------------------------------------------


def _page(*cells):
    """A notebook of ("out", text) code cells and ("ask", exercise id) questions, in order."""
    out = []
    for kind, text in cells:
        if kind == "out":
            out.append({"cell_type": "code", "id": f"c{len(out)}", "source": "print()", "outputs": [_stream(text)]})
        else:
            n = text.split(".q")[1]
            out.append({"cell_type": "markdown", "id": f"c{len(out)}", "source": f"### Exercise 99.{n} · planted"})
            out.append({"cell_type": "code", "id": f"c{len(out)}", "source": f'exercises.check("{text}", answer)'})
    return {"cells": out}


def _stream(text):
    return {"output_type": "stream", "name": "stdout", "text": [text + "\n"]}


def _refs(**answers):
    """Exercise id -> (Exercise, reference): ``q1=(0.0171, "s")`` is ch99.q1 with that answer and unit."""
    return {
        f"ch99.{k}": (Exercise(id=f"ch99.{k}", title="planted", solve=lambda v=v: v, hint="", unit=u), v)
        for k, (v, u) in answers.items()
    }


@pytest.mark.parametrize(
    "printed",
    [
        "step 17.1 ms (bound: weights)",  # as units.fmt prints it
        "step 17,142 µs",  # another prefix, thousands separators
        "the step takes 1.71e-2 s on 8 chips",  # scientific notation inside a sentence
        "<table><tr><td>step</td><td>17.1 ms</td></tr></table>",  # an HTML table cell
    ],
)
def test_a_planted_restatement_is_found(printed):
    refs = _refs(q1=(0.017142, "s"))
    html = printed.startswith("<")
    page = _page(("out", "" if html else printed), ("ask", "ch99.q1"))
    if html:
        page["cells"][0]["outputs"] = [{"output_type": "display_data", "data": {"text/html": [printed]}}]
    found = scan.scan(page, refs)
    assert [o.exercise_id for o in found] == ["ch99.q1"], printed
    assert "ch99.q1's answer 0.01714 s is printed above it in cell c0" in found[0].message()


@pytest.mark.parametrize(
    ("printed", "answer", "unit"),
    [
        ("a bubble of 17.9% with 32 microbatches", 0.17949, "fraction"),  # a fraction printed as a percentage
        ("KV cache in int8: 164 kB per token", 163840.0, "bytes"),
        ("llama3-70b   80  8,192  70,553,706,496  80%", 70553706496, "parameters"),  # a bare table column
        ("v5e 16x16  5.04e16 FLOP/s  4.1 TB", {"flops": 5.0432e16, "hbm_bytes": 4.096e12}, "{FLOP/s, bytes}"),
        ("$35M over the run", 35331300.0, "$"),
    ],
)
def test_restatements_in_other_forms_are_found(printed, answer, unit):
    found = scan.scan(_page(("out", printed), ("ask", "ch99.q1")), _refs(q1=(answer, unit)))
    assert found and all(o.exercise_id == "ch99.q1" for o in found), printed


@pytest.mark.parametrize(
    ("printed", "why"),
    [
        ("a buffer of 17.1 MB", "the same digits in another unit"),
        ("17.1 FLOPs/B", "the same digits in another unit"),
        ("a step of 17.3 ms", "within 5%, but 17.3 is not the answer rounded to the printed digits"),
        ("a step of 20 ms", "one significant digit: too coarse to be evidence"),
        ("0.0171", "a time printed without its unit"),
    ],
)
def test_a_coincidence_is_ignored(printed, why):
    assert not scan.scan(_page(("out", printed), ("ask", "ch99.q1")), _refs(q1=(0.017142, "s"))), why


def test_shapes_and_products_are_settings_not_answers():
    refs = _refs(q1=(17142.0, "elements"))
    assert scan.scan(_page(("out", "compute-bound when D > 17142"), ("ask", "ch99.q1")), refs)
    for printed in ("float32[2048, 17142]", "Slice('v5e', (17142, 8))", "17142 × 8192 × 2 bytes"):
        assert not scan.scan(_page(("out", printed), ("ask", "ch99.q1")), refs), printed


def test_only_outputs_above_the_question_count():
    refs = _refs(q1=(0.017142, "s"))
    assert not scan.scan(_page(("ask", "ch99.q1"), ("out", "step 17.1 ms")), refs)
    assert scan.scan(_page(("out", "step 17.1 ms"), ("ask", "ch99.q1")), refs)


def test_counts_match_their_own_word_or_a_bare_number():
    refs = _refs(q1=(2472.5, "tokens/GPU"))
    assert scan.scan(_page(("out", "data parallelism across nodes: 2,472 tokens per GPU"), ("ask", "ch99.q1")), refs)
    assert scan.scan(_page(("out", "across nodes   2,472   1.2 ms"), ("ask", "ch99.q1")), refs)
    assert not scan.scan(_page(("out", "a fleet of 2,472 chips"), ("ask", "ch99.q1")), refs)


def test_answers_the_scan_cannot_judge_are_left_out():
    """Strings, booleans, programs and small whole numbers have no numeric element to match."""
    assert scan.elements("", "compute") == []
    assert scan.elements("", True) == []
    assert scan.elements("chips", 4) == []  # a tensor degree of 4: every page prints a 4
    assert scan.elements("chips", {"tensor": 4, "pods": 5}) == []
    assert [e.path for e in scan.elements("chips", {"tensor": 4, "chips": 11683.6})] == ["chips"]


def test_exercise_units_line_up_with_the_answer():
    els = {e.path: e for e in scan.elements("s, bytes, chips", {"t": 0.004, "free": 1.27e10, "n": 32})}
    assert els["t"].dims == ("time",) and els["free"].dims == ("bytes",) and els["n"].dims == ("count:chips",)
    (days,) = scan.elements("days", 44.0)
    assert days.dims == ("time",) and days.value == pytest.approx(44 * 86400)
    mixed = {e.path: e.dims for e in scan.elements("mixed", {"step_s": 0.019, "kv_bytes_per_token": 524288.0})}
    assert mixed == {"step_s": ("time",), "kv_bytes_per_token": ("bytes",)}


def test_every_exercise_unit_is_known():
    """A new unit string in an exercise must be taught to the scan (scan.EXERCISE_UNITS), or it would match
    anything counted."""
    from tpu_notes import exercises

    unknown = set()
    for ex_id in exercises.all_ids():
        unit = exercises.get(ex_id).unit
        if unit in ("a function", "a kernel body"):
            continue
        unknown |= {u for u in scan._unit_items(unit) if u not in scan.EXERCISE_UNITS}
    assert not unknown, f"teach tools/exercise_scan.EXERCISE_UNITS these units: {sorted(unknown)}"


@pytest.mark.parametrize(
    ("text", "value", "dim"),
    [
        ("560 µs", 5.6e-4, "time"),
        ("3.89 ms", 3.89e-3, "time"),
        ("44 days", 44 * 86400.0, "time"),
        ("34 MB", 3.4e7, "bytes"),
        ("1.5 GiB", 1.5 * 2**30, "bytes"),
        ("450 GB/s", 4.5e11, "bandwidth"),
        ("1.97e14 FLOP/s", 1.97e14, "flop_rate"),
        ("6.26e24 FLOPs", 6.26e24, "flops"),
        ("295 FLOPs/B", 295.0, "intensity"),
        ("1.86 GHz", 1.86e9, "freq"),
        ("17.9%", 0.179, "ratio"),
        ("2.57x", 2.57, "ratio"),
        ("16,896", 16896.0, "bare"),
        ("$40M", 4e7, "dollars"),
        ("2,472 tokens", 2472.0, "count:tokens"),
    ],
)
def test_printed_numbers_are_read_as_units_fmt_prints_them(text, value, dim):
    (p,) = scan.printed_numbers(text)
    assert p.dim == dim and p.value == pytest.approx(value), p


def test_names_and_shapes_are_not_numbers():
    for text in ("llama3-70b", "v5p 16x16x16", "fsdp1024 tp4", "a: float32[8@X,2048@Y]", "Slice('v5e', (32, 8))"):
        assert all(p.value <= 16 for p in scan.printed_numbers(text)), text
