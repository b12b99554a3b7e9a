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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_ignored_outputs_give_a_reason(path):
    for cell in _cells(path):
        if "nbval-ignore-output" in cell["metadata"].get("tags", []):
            first = _src(cell).lstrip().splitlines()[0]
            assert first.startswith("#") and len(first) > 25, f"tagged cell without a reason: {first!r}"


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
