"""Every chapter follows the template (CONTRIBUTING.md) and is safe to render and to compare."""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
REQUIRED_HEADINGS = ["## What you will learn", "## Summary", "## Key numbers", "## Exercises"]


def _src(cell):
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _cells(path):
    return json.loads(path.read_text())["cells"]


def test_there_is_at_least_one_chapter():
    assert NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_template_structure(path):
    cells = _cells(path)
    gen = [c["metadata"].get("tpu_notes", {}).get("generated") for c in cells]
    assert gen[0] == "badge" and gen[-1] == "footer" and gen[2] == "setup"
    title = _src(cells[1])
    assert re.match(rf"# Chapter {int(path.name[:2])} · ", title), "title cell must be '# Chapter N · ...'"
    assert "**Hardware.**" in title, "title cell must carry the one-line hardware note"
    markdown = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    for heading in REQUIRED_HEADINGS:
        assert re.search(rf"^{re.escape(heading)}", markdown, re.M), f"missing '{heading}'"
    setup = _src(cells[2])
    assert "google.colab" in setup and "devices.setup(8)" in setup
    colab_branch = re.sub(r"#.*", "", setup.split("from tpu_notes")[0])
    assert "--no-deps" in colab_branch and "jax" not in colab_branch.lower(), "the Colab branch must not install JAX"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_code_cell_ran_and_none_failed(path):
    for cell in _cells(path):
        if cell["cell_type"] != "code" or not _src(cell).strip():
            continue
        assert cell["execution_count"] is not None, f"unexecuted cell: {_src(cell)[:60]!r}"
        tags = cell["metadata"].get("tags", [])
        errors = [o for o in cell["outputs"] if o["output_type"] == "error"]
        assert not errors or "raises-exception" in tags, f"stored error in {_src(cell)[:60]!r}"
        streams = "".join("".join(o.get("text", "")) for o in cell["outputs"] if o.get("name") == "stderr")
        assert "Traceback" not in streams


def ignore_output_problems(cell) -> list[str]:
    """What is wrong with a cell's nbval exclusion: the tag ``nbval-ignore-output`` must come with a reason of a few
    words in ``metadata.tpu_notes.nbval_reason`` (kept out of the source, where the book would show it), and a
    reason without the tag (or the old first-line comment) is a mistake too."""
    tagged = "nbval-ignore-output" in cell["metadata"].get("tags", [])
    reason = cell["metadata"].get("tpu_notes", {}).get("nbval_reason")
    problems = []
    if tagged and not (isinstance(reason, str) and len(reason.split()) >= 3):
        problems.append(f"tagged nbval-ignore-output without metadata.tpu_notes.nbval_reason: {reason!r}")
    if reason is not None and not tagged:
        problems.append("nbval_reason given but the cell is not tagged nbval-ignore-output")
    if re.search(r"^\s*#\s*nbval[-_]ignore[-_]output", _src(cell), re.I | re.M):
        problems.append("nbval marker comment in the source (the page shows it): use the tag and metadata")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_ignored_outputs_give_a_reason(path):
    for cell in _cells(path):
        if cell["cell_type"] == "code":
            assert not ignore_output_problems(cell), f"{ignore_output_problems(cell)} in {_src(cell)[:60]!r}"


def test_the_reason_check_catches_each_mistake():
    def cell(src="x = 1", tags=(), reason=None):
        meta = {"tags": list(tags)}
        if reason is not None:
            meta["tpu_notes"] = {"nbval_reason": reason}
        return {"cell_type": "code", "metadata": meta, "source": src}

    assert ignore_output_problems(cell(tags=["nbval-ignore-output"], reason="timings differ run to run")) == []
    assert ignore_output_problems(cell()) == []
    assert ignore_output_problems(cell(tags=["nbval-ignore-output"]))
    assert ignore_output_problems(cell(tags=["nbval-ignore-output"], reason="timing"))
    assert ignore_output_problems(cell(reason="timings differ run to run"))
    old_style = cell(
        "# nbval-ignore-output: timings differ\nx = 1", tags=["nbval-ignore-output"], reason="timings differ run to run"
    )
    assert ignore_output_problems(old_style)


MAX_CODE_COLUMNS = 88  # what fits the book's content column without a scroll bar


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_code_cells_fit_the_page(path):
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        long = [line for line in _src(cell).splitlines() if len(line) > MAX_CODE_COLUMNS]
        assert not long, f"code lines over {MAX_CODE_COLUMNS} columns (the page clips them): {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_nothing_machine_specific_in_outputs(path):
    bad = re.compile(r"0x[0-9a-f]{8,}|/tmp/|/home/|/work/|/root/|\b20\d\d-\d\d-\d\d[ T]\d\d:")
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        for out in cell["outputs"]:
            text = "".join(out.get("text", "")) + "".join(out.get("data", {}).get("text/plain", ""))
            assert not bad.search(text), f"machine-specific output: {bad.search(text).group(0)!r}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_size_budget_and_no_widget_state(path):
    assert path.stat().st_size <= 2_000_000
    meta = json.loads(path.read_text())["metadata"]
    assert "widgets" not in meta, "saved widget state bloats the notebook"
    assert meta.get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_imports_are_explicit(path):
    for cell in _cells(path):
        src = _src(cell)
        if cell["cell_type"] == "code":
            assert "import *" not in src and "sys.path" not in src


def test_toc_lists_every_chapter_in_order():
    toc = (ROOT / "_toc.yml").read_text()
    listed = re.findall(r"file:\s*notebooks/(\S+)", toc)
    assert listed == [p.stem for p in NOTEBOOKS]


def test_the_chapter_template_passes_these_checks():
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import new_chapter

    cells = new_chapter.skeleton(5, "Training parallelism", "ch05")["cells"]
    assert any("nbval-ignore-output" in c["metadata"].get("tags", []) for c in cells), "template shows the tag"
    for cell in cells:
        assert not ignore_output_problems(cell)
        assert all(len(line) <= MAX_CODE_COLUMNS for line in _src(cell).splitlines() if cell["cell_type"] == "code")


def test_tools_import_without_a_cycle():
    """tools/status.py reads the chapter list from tools/chapters.py, not from nbcells (which imports status)."""
    import subprocess
    import sys

    code = (
        "import sys; sys.path.insert(0, 'tools'); import status; "
        "assert 'nbcells' not in sys.modules, 'status imports nbcells'; import nbcells"
    )
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_exercise_hints_sit_on_their_own_lines():
    """A hint is printed under the verdict, indented and wrapped, so the page never clips it."""
    from tpu_notes import exercises

    for exercise_id in ("ch01.q2", "ch01.q7"):
        for answer in (None, 3 * exercises.solution(exercise_id)):
            verdict, *hint = exercises.grade(exercise_id, answer).message.splitlines()
            assert "Hint" not in verdict and hint and hint[0].startswith("  Hint: ")
            assert all(line.startswith("        ") for line in hint[1:])
            assert all(len(line) <= MAX_CODE_COLUMNS for line in hint)
