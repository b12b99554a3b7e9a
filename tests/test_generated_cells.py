"""The generated cells of every chapter (Colab badge, setup cell, footer) are current, and the check can tell.

``tools/nbcells.py --check`` is what fails here when a notebook's generated cells are stale; the other tests show
that it does catch a stale, missing or moved cell (on copies, never on the committed notebooks), and that the
status page (tools/status.py) matches book/status.json.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import nbcells  # noqa: E402
import status  # noqa: E402

NOTEBOOKS = sorted(nbcells.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _src(cell) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def test_generated_cells_are_current():
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "nbcells.py"), "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr


def _sample_notebook(stem: str = "01_rooflines") -> dict:
    """A committed chapter if there is one, else a minimal chapter; with its generated cells refreshed."""
    path = nbcells.NOTEBOOKS / f"{stem}.ipynb"
    if path.exists():
        nb = json.loads(path.read_text())
    else:
        nb = {
            "cells": [
                {"cell_type": "markdown", "metadata": {}, "source": "# Chapter 1 · Rooflines"},
                {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [], "execution_count": None},
            ],
            "metadata": {},
            "nbformat": 4,
            "nbformat_minor": 5,
        }
    return nbcells.refresh(nb, stem)


@pytest.mark.parametrize(
    "damage", ["edit setup", "edit badge", "edit footer", "drop setup", "untag setup", "move footer", "old repository"]
)
def test_check_catches_stale_cells(damage):
    stem = "01_rooflines"
    fresh = _sample_notebook(stem)
    assert nbcells.stale(fresh, stem) == [], "a refreshed notebook must pass the check"
    nb = copy.deepcopy(fresh)
    cells = nb["cells"]
    gen = {c["metadata"].get("tpu_notes", {}).get("generated"): c for c in cells}
    if damage == "edit setup":
        gen["setup"]["source"] = _src(gen["setup"]).replace("--no-deps", "--upgrade")
    elif damage == "edit badge":
        gen["badge"]["source"] = _src(gen["badge"]).replace("/blob/", "/tree/")
    elif damage == "edit footer":
        gen["footer"]["source"] = _src(gen["footer"]) + " extra"
    elif damage == "drop setup":
        cells.remove(gen["setup"])
    elif damage == "untag setup":
        gen["setup"]["metadata"]["tags"] = []
    elif damage == "move footer":
        cells.insert(3, cells.pop())
    elif damage == "old repository":
        gen["setup"]["source"] = _src(gen["setup"]).replace('REPO, BRANCH = "', 'REPO, BRANCH = "old/')
    assert nbcells.stale(nb, stem), f"{damage}: not detected"
    assert nbcells.stale(nbcells.refresh(nb, stem), stem) == [], f"{damage}: refresh does not repair it"


def test_check_command_fails_on_a_stale_copy(tmp_path, monkeypatch):
    """The command-line check (what CI runs) exits 1 on a stale notebook and 0 once it is refreshed."""
    stem = "01_rooflines"
    nb = _sample_notebook(stem)
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())  # repository settings
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())  # the notebooks extra
    monkeypatch.setattr(nbcells, "ROOT", tmp_path)
    monkeypatch.setattr(nbcells, "NOTEBOOKS", tmp_path / "notebooks")
    path = tmp_path / "notebooks" / f"{stem}.ipynb"
    nb = nbcells.refresh(nb, stem)  # footer as seen from tmp_path (no next chapter there)
    path.write_text(json.dumps(nb))
    assert nbcells.main(["--check"]) == 0
    nb["cells"][2]["source"] = "print('hand-edited setup cell')"
    path.write_text(json.dumps(nb))
    assert nbcells.main(["--check"]) == 1
    assert nbcells.main([]) == 0  # rewrites it
    assert nbcells.main(["--check"]) == 0
    assert "TPU_NOTES_REPO" in _src(json.loads(path.read_text())["cells"][2])


def test_setup_cell_installs_from_the_pinned_ref_without_touching_jax():
    """The install ref comes from one place (_config.yml repository.branch), shared with the Colab badge."""
    repo, branch, ref = nbcells.repo_settings()
    assert ref == branch
    for stem, _ in nbcells.CHAPTERS:
        setup = nbcells.setup_source(stem)
        assert f'REPO, BRANCH = "{repo}", "{ref}"' in setup and "TPU_NOTES_REPO" in setup
        assert 'f"git+https://github.com/{REPO}@{BRANCH}"' in setup
        colab_branch = re.sub(r"#.*", "", setup.split("from tpu_notes")[0])  # code only, not the comments
        assert "--no-deps" in colab_branch and "jax" not in colab_branch.lower()
        assert all(len(line) <= 88 for line in setup.splitlines()), "notebook code lines are at most 88 columns"
    assert f"/blob/{branch}/notebooks/01_rooflines.ipynb" in nbcells.badge_source("01_rooflines")


# A URL that names a GitHub repository: github.com/OWNER/NAME[/blob|tree|raw/REF], raw.githubusercontent.com/OWNER/
# NAME/REF, Colab's github/OWNER/NAME/blob/REF.
REPO_URL = re.compile(
    r"(?:github\.com|raw\.githubusercontent\.com|colab\.research\.google\.com/github)/([\w.-]+)/([\w.-]+)"
    r"(?:/(?:blob/|tree/|raw/)?([\w.-]+))?"
)


def url_problems(text: str, code: bool, repo: str, branch: str) -> list[str]:
    """Repository URLs in ``text`` that disagree with _config.yml's ``repo`` and ``branch``: a URL naming this
    repository's owner or name must name both and the branch; code may not spell this repository at all (it uses
    the setup cell's REPO and BRANCH)."""
    owner, name = repo.split("/")
    problems = []
    for m in REPO_URL.finditer(text):
        url_owner, url_name, url_ref = m.group(1), m.group(2).removesuffix(".git"), m.group(3)
        ours = url_owner.lower() == owner.lower() or url_name.lower() == name.lower()
        if not ours:
            continue  # another project, cited
        if code:
            problems.append(f"hard-coded {m.group(0)} (use REPO and BRANCH from the setup cell)")
        elif f"{url_owner}/{url_name}" != repo:
            problems.append(f"{m.group(0)} names {url_owner}/{url_name}, _config.yml says {repo}")
        elif url_ref and "raw.githubusercontent" in m.group(0) and url_ref != branch:
            problems.append(f"{m.group(0)} reads branch {url_ref}, _config.yml says {branch}")
        elif url_ref and re.search(r"/(blob|tree|raw)/", m.group(0)) and url_ref != branch:
            problems.append(f"{m.group(0)} opens branch {url_ref}, _config.yml says {branch}")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_repository_url_agrees_with_config(path):
    """No notebook hard-codes this repository's URL; the generated cells (badge, setup) derive it from _config.yml."""
    repo, branch, _ = nbcells.repo_settings()
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        generated = cell["metadata"].get("tpu_notes", {}).get("generated")
        code = cell["cell_type"] == "code" and not generated
        found += [f"{cell.get('id')}: {p}" for p in url_problems(_src(cell), code, repo, branch)]
    assert not found, found


def test_url_check_catches_each_disagreement():
    repo, branch = "owner/book", "main"
    assert url_problems("see https://github.com/NVIDIA/nccl-tests/issues/212", False, repo, branch) == []
    assert url_problems("[x](https://github.com/owner/book/blob/main/a.md)", False, repo, branch) == []
    assert url_problems("https://github.com/other/book", False, repo, branch)
    assert url_problems("https://github.com/owner/book/blob/dev/a.md", False, repo, branch)
    assert url_problems('u = "https://raw.githubusercontent.com/owner/book/dev/"', False, repo, branch)
    assert url_problems('u = "https://raw.githubusercontent.com/owner/book/main/"', True, repo, branch)
    assert url_problems('u = f"https://raw.githubusercontent.com/{REPO}/{BRANCH}/"', True, repo, branch) == []
    assert url_problems("https://colab.research.google.com/github/owner/book/blob/v1/n.ipynb", False, repo, branch)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_setup_cell_runs_first_and_is_hidden(path):
    cells = json.loads(path.read_text())["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and code[0]["metadata"].get("tpu_notes", {}).get("generated") == "setup"
    assert "hide-input" in code[0]["metadata"].get("tags", [])


def test_status_page_is_current():
    assert status.STATUS_MD.read_text() == status.expected(), "book/status.md is stale: run python tools/status.py"


def test_status_page_lists_every_chapter():
    text = status.render(
        {"01_rooflines": {"seconds": 12.34, "jax": "9.9.9", "device": "8 x test (cpu)"}}, linked={"01_rooflines"}
    )
    rows = [line for line in text.splitlines() if line.startswith("| ") and "·" in line]
    assert len(rows) == len(nbcells.CHAPTERS)
    assert "12.3 s" in rows[0] and "9.9.9" in rows[0] and "8 x test (cpu)" in rows[0]
    assert "](../notebooks/01_rooflines.ipynb)" in rows[0]
    assert all("](" not in row and "coming" in row for row in rows[1:]), "unlisted chapters must not be linked"


def test_every_listed_oracle_names_a_test_file_that_exists():
    import chapters

    for stem, oracles in chapters.ORACLES.items():
        assert stem in dict(chapters.CHAPTERS), f"ORACLES names an unknown chapter {stem}"
        for what, test in oracles:
            assert (ROOT / test).is_file(), f"{stem}: oracle {what!r} points at a missing {test}"
