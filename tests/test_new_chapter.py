"""tools/new_chapter.py scaffolds a chapter that has the template's structure and registers it everywhere."""

import json
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import nbcells  # noqa: E402
import new_chapter  # noqa: E402
from test_notebook_hygiene import REQUIRED_HEADINGS  # noqa: E402


@pytest.fixture()
def repo(tmp_path):
    for part in ("notebooks", "tpu_notes/exercises", "tools"):
        (tmp_path / part).mkdir(parents=True)
    shutil.copy(ROOT / "_toc.yml", tmp_path / "_toc.yml")
    shutil.copy(ROOT / "tools" / "chapters.json", tmp_path / "tools" / "chapters.json")
    return tmp_path


def test_scaffold_follows_the_template(repo):
    written = new_chapter.create("05_training_parallelism", root=repo)
    nb = json.loads(written[0].read_text())
    cells = nb["cells"]
    assert cells[0]["source"].startswith("# Chapter 5 · Training parallelism")
    assert "**Hardware.**" in cells[0]["source"]
    markdown = "\n".join(c["source"] for c in cells if c["cell_type"] == "markdown")
    for heading in REQUIRED_HEADINGS:
        assert heading in markdown
    solution = [c for c in cells if c["source"].startswith("# Solution")]
    assert solution and {"solution", "hide-cell"} <= set(solution[0]["metadata"]["tags"])
    assert 'exercises.check("ch05.q1"' in solution[0]["source"]
    # Generated cells slot in as usual (badge first, setup after the title, footer last).
    refreshed = nbcells.refresh(nb, "05_training_parallelism")
    assert [c["metadata"].get("tpu_notes", {}).get("generated") for c in refreshed["cells"]][:3] == [
        "badge",
        None,
        "setup",
    ]


def test_scaffold_registers_the_chapter(repo):
    new_chapter.create("05_training_parallelism", root=repo)
    toc = (repo / "_toc.yml").read_text()
    assert toc.index("notebooks/04_transformer_math") < toc.index("notebooks/05_training_parallelism")
    assert (repo / "tpu_notes/exercises/ch05.py").read_text().startswith('"""Exercises of Chapter 5')


def test_a_new_chapter_gets_its_manifest_entry(repo):
    import chapters

    written = new_chapter.create("13_epilogue", root=repo, title="Epilogue")
    assert repo / "tools" / "chapters.json" in written
    entry = chapters.load(repo / "tools" / "chapters.json")[-1]
    assert (entry.stem, entry.title, entry.exercises) == ("13_epilogue", "Epilogue", "tpu_notes.exercises.ch13")
    assert entry.oracles == () and entry.hostile_cases == ()
    assert "notebooks/13_epilogue" in (repo / "_toc.yml").read_text()
    with pytest.raises(SystemExit, match="numbered in order"):
        new_chapter.create("15_skipped", root=repo, title="Skipped")


def test_scaffold_refuses_unknown_or_existing_chapters(repo):
    with pytest.raises(SystemExit, match="unknown chapter"):
        new_chapter.create("13_epilogue", root=repo)
    new_chapter.create("05_training_parallelism", root=repo)
    with pytest.raises(SystemExit, match="already exists"):
        new_chapter.create("05_training_parallelism", root=repo)
