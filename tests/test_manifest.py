"""The chapter manifest (tools/chapters.json) is the one list of chapters, and what it says of each is true."""

import importlib
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import chapters  # noqa: E402

ENTRIES = chapters.load()


def test_every_notebook_has_an_entry_and_every_entry_a_notebook():
    on_disk = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert [c.stem for c in ENTRIES] == on_disk


@pytest.mark.parametrize("chapter", ENTRIES, ids=lambda c: c.stem)
def test_entry_names_what_exists(chapter):
    from tpu_notes import exercises

    source = (ROOT / "notebooks" / f"{chapter.stem}.ipynb").read_text()
    prefix = chapter.exercises.rsplit(".", 1)[1]
    assert exercises.all_ids(prefix), f"{chapter.exercises} registers no exercise"
    assert f'exercises.check(\\"{prefix}.' in source, f"{chapter.stem} checks none of {prefix}'s exercises"
    plots = importlib.import_module(chapter.plots)
    public = [
        n
        for n, o in vars(plots).items()
        if callable(o) and not n.startswith("_") and getattr(o, "__module__", "") == plots.__name__
    ]
    assert any(re.search(rf"\b{n}\(", source) for n in public), f"{chapter.stem} draws nothing from {chapter.plots}"
    for case_file in chapter.hostile_cases:
        assert (ROOT / "tests" / f"{case_file}.py").is_file(), case_file
    for oracle in chapter.oracles:
        assert (ROOT / oracle.test).is_file(), f"{chapter.stem}: {oracle.what!r} points at a missing {oracle.test}"


def test_every_chapter_has_an_oracle():
    missing = [c.stem for c in ENTRIES if not c.oracles]
    assert not missing, f"chapters checked against nothing nobody here wrote: {missing}"


def test_every_hostile_case_file_is_named_by_the_manifest():
    named = set(chapters.hostile_case_files())
    on_disk = {p.stem for p in (ROOT / "tests").glob("hostile_cases*.py")}
    assert on_disk == named, f"case files the manifest does not name: {sorted(on_disk - named)}"


def test_the_manifest_refuses_chapters_out_of_order(tmp_path):
    doc = json.loads(chapters.MANIFEST.read_text())
    doc["chapters"][0], doc["chapters"][1] = doc["chapters"][1], doc["chapters"][0]
    path = tmp_path / "chapters.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="numbered in order"):
        chapters.load(path)


def test_the_status_page_counts_the_manifest_oracles():
    import status

    page = status.expected()
    for chapter in ENTRIES:
        row = next(line for line in page.splitlines() if f"{chapter.number} · {chapter.title}" in line)
        assert f"| {len(chapter.oracles)} |" in row, row
