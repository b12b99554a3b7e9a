"""Generate the boilerplate cells of every chapter: Colab badge, setup cell and prev/next footer.

    python tools/nbcells.py          # rewrite the generated cells of every notebook in notebooks/
    python tools/nbcells.py --check  # exit 1 if any notebook's generated cells are stale (used by the tests)

A generated cell carries ``metadata.tpu_notes.generated`` = "badge" | "setup" | "footer". The badge is the first
cell, the setup cell comes right after the title cell, and the footer is the last cell. Nothing else is touched,
so a notebook's outputs stay as executed (the setup cell keeps its outputs: off Colab its install lines print
nothing, and nbval compares the rest).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
sys.path.insert(0, str(ROOT / "tools"))

import chapters  # noqa: E402  (the list of chapters)
import status  # noqa: E402  (tools/status.py: imports chapters, never this module)

CHAPTERS = chapters.CHAPTERS


def repo_settings() -> tuple[str, str, str]:
    """(GitHub "owner/name", branch, ref to install tpu_notes from), all read from _config.yml's ``repository``.

    The pinned ref is the branch (one setting, ``repository.branch``): the Colab badge and the book's launch button
    open ``blob/<branch>/notebooks/...``, and that notebook's setup cell installs ``tpu_notes`` from the same
    ``<branch>``, so a reader always gets a notebook and a package from the same tested state of the repository
    (CI tests every commit of the branch with both together). A release tag or commit hash would pin harder but
    would drift from the notebook the badge opens; to freeze a release, point ``repository.branch`` at the tag,
    run ``tools/nbcells.py`` (badges and setup cells follow), and build the book from that commit.
    """
    import re

    config = (ROOT / "_config.yml").read_text()
    url = re.search(r"^\s*url:\s*https://github.com/([\w.-]+/[\w.-]+)\s*$", config, re.M)
    branch = re.search(r"^\s*branch:\s*([\w./-]+)\s*$", config, re.M)
    if not url or not branch:
        raise SystemExit("_config.yml must set repository.url (https://github.com/OWNER/NAME) and repository.branch")
    return url.group(1), branch.group(1), branch.group(1)


def badge_source(stem: str) -> str:
    repo, branch, _ = repo_settings()
    return (
        f"[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        f"(https://colab.research.google.com/github/{repo}/blob/{branch}/notebooks/{stem}.ipynb)"
    )


#: What a Colab runtime already has, pinned, as far as the chapters are concerned: JAX at the oldest version
#: ``tpu_notes`` supports (pyproject's ``jax`` extra; README), the scientific stack and the notebook tools at
#: Colab's versions, and *not* the project's own extras (``xprof``) nor ``tpu_notes``. tests/test_colab_path.py
#: builds a virtual environment from exactly these lines and runs every chapter's setup and import cells in it; a
#: chapter's setup cell installs on Colab only what it needs beyond them (:func:`colab_needs`). Colab has much more
#: (pandas, plotly, ...): nothing here imports those and the install is ``--no-deps``, so they are left out (plotly
#: alone is 20,000 files, a quarter of a cold build).
COLAB_IMAGE = (
    "jax==0.7.0",
    "jaxlib==0.7.0",
    "numpy==2.0.2",
    "scipy==1.15.3",
    "matplotlib==3.10.0",
    "ipython==7.34.0",
    "ipykernel==6.17.1",
    "ipywidgets==7.7.1",
    "rich==13.9.4",
)

#: Optional tools a chapter may call, each with the code that needs it (a cell holding one of these strings needs
#: the tool) and the words a cell prints when the tool is missing. Their versions: pyproject's ``notebooks`` extra.
OPTIONAL_TOOLS = {
    "xprof": ("profile.xprof_",),
    "rich": ("visualize_array_sharding",),
}


def _requirement_name(line: str) -> str:
    return re.split(r"[\[<>=!~; ]", line, maxsplit=1)[0].strip().lower().replace("_", "-")


def notebooks_extra() -> dict[str, str]:
    """pyproject.toml's ``notebooks`` extra, ``{package name: requirement}``."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {_requirement_name(r): r for r in project["optional-dependencies"]["notebooks"]}


def _code(stem: str) -> str:
    path = NOTEBOOKS / f"{stem}.ipynb"
    if not path.exists():
        return ""
    cells = json.loads(path.read_text())["cells"]
    return "\n".join(
        _src(c) for c in cells if c["cell_type"] == "code" and not c["metadata"].get("tpu_notes", {}).get("generated")
    )


def colab_needs(stem: str) -> list[str]:
    """Requirements (from the ``notebooks`` extra) of the optional tools chapter ``stem`` calls that Colab's image
    (:data:`COLAB_IMAGE`) lacks: what its setup cell installs on Colab besides ``tpu_notes``."""
    code = _code(stem)
    have = {_requirement_name(r) for r in COLAB_IMAGE}
    extra = notebooks_extra()
    return [
        extra[tool]
        for tool, calls in OPTIONAL_TOOLS.items()
        if tool not in have and any(call in code for call in calls)
    ]


def setup_source(stem: str) -> str:
    repo, _, ref = repo_settings()
    needs = colab_needs(stem)
    tools = ""
    if needs:
        names = ", ".join(_requirement_name(r) for r in needs)
        listed = ", ".join(f'"{r}"' for r in needs)
        tools = f"""
    tools = [{listed}]  # what this chapter calls beyond Colab's image
    if subprocess.run([*pip, *tools]).returncode:
        print("could not install {names}: the cells that need it will say so and go on")"""
    return f"""# Setup (generated by tools/nbcells.py). On Colab, install tpu_notes from the repository
# (and the tools this chapter needs beyond Colab's image) without touching Colab's JAX;
# everywhere, ask for 8 devices before JAX starts
# (real accelerators when there are 8, simulated CPU devices otherwise).
import os, subprocess, sys
REPO, BRANCH = "{repo}", "{ref}"  # _config.yml's repository
if "google.colab" in sys.modules or os.environ.get("TPU_NOTES_FORCE_COLAB"):
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    source = f"git+https://github.com/{{REPO}}@{{BRANCH}}"
    source = os.environ.get("TPU_NOTES_REPO", source)  # tests: a local wheel or path
    subprocess.run([*pip, "--no-deps", source], check=True)  # leaves Colab's JAX alone{tools}

from tpu_notes import devices
DEVICES = devices.setup(8)
print(devices.describe())"""


def _toc_stems() -> set[str]:
    """Stems of the chapter notebooks listed in _toc.yml (only those become pages of the book)."""
    return chapters.toc_stems(ROOT)


def footer_source(stem: str) -> str:
    stems = [s for s, _ in CHAPTERS]
    i = stems.index(stem)
    parts = []
    if i > 0:
        prev_stem, prev_title = CHAPTERS[i - 1]
        parts.append(f"← Previous: [Chapter {i} · {prev_title}]({prev_stem}.ipynb)")
    else:
        parts.append("← Previous: [Preface](../book/intro.md)")
    if i + 1 < len(CHAPTERS):
        next_stem, next_title = CHAPTERS[i + 1]
        if (NOTEBOOKS / f"{next_stem}.ipynb").exists() and next_stem in _toc_stems():  # a link must hit a page
            parts.append(f"Next: [Chapter {i + 2} · {next_title}]({next_stem}.ipynb) →")
        else:
            parts.append(f"Next: Chapter {i + 2} · {next_title} (coming in a later part of the book)")
    used = library_modules(stem)
    api = f"\n\nThe library behind this chapter: {', '.join(used)}." if used else ""
    return "---\n\n" + " · ".join(parts) + api


def library_modules(stem: str) -> list[str]:
    """Links to the API pages of the ``tpu_notes`` modules a chapter imports (from its code cells, in import order)."""
    path = NOTEBOOKS / f"{stem}.ipynb"
    if not path.exists():
        return []
    code = "\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in json.loads(path.read_text())["cells"]
        if c["cell_type"] == "code"
    )
    names: list[str] = []
    pattern = r"^[ \t]*from tpu_notes(\.[\w.]+)? import (?:\(([^)]*)\)|([\w \t,]+)$)"
    for match in re.finditer(pattern, code, re.M):
        sub, items = match.group(1), match.group(2) or match.group(3)
        candidates = [f"tpu_notes{sub}"] if sub else [f"tpu_notes.{n.strip()}" for n in items.split(",") if n.strip()]
        for name in candidates:
            if name not in names and (ROOT / "book" / "api" / f"{name}.md").exists():
                names.append(name)
    return [f"[`{n}`](../book/api/{n}.md)" for n in names]


def _cell(kind: str, source: str, generated: str, tags: list[str]) -> dict:
    cell = {
        "cell_type": kind,
        "id": f"generated-{generated}",
        "metadata": {"tags": tags, "tpu_notes": {"generated": generated}},
        "source": source,
    }
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def expected_cells(stem: str) -> dict[str, dict]:
    return {
        "badge": _cell("markdown", badge_source(stem), "badge", ["remove-cell"]),
        "setup": _cell("code", setup_source(stem), "setup", ["hide-input"]),
        "footer": _cell("markdown", footer_source(stem), "footer", []),
    }


def _src(cell: dict) -> str:
    s = cell.get("source", "")
    return "".join(s) if isinstance(s, list) else s


def refresh(nb: dict, stem: str) -> dict:
    """Return ``nb`` with its generated cells in place and up to date."""
    want = expected_cells(stem)
    old = {c["metadata"].get("tpu_notes", {}).get("generated"): c for c in nb["cells"]}
    body = [c for c in nb["cells"] if not c["metadata"].get("tpu_notes", {}).get("generated")]
    setup = want["setup"]
    if "setup" in old:  # keep executed outputs: the Colab lines print nothing off Colab (nbval checks the rest)
        setup = old["setup"]
        setup["source"] = want["setup"]["source"]
        setup["metadata"]["tags"] = want["setup"]["metadata"]["tags"]
        setup["id"] = want["setup"]["id"]
    title_at = 1 if body and body[0]["cell_type"] == "markdown" else 0
    nb["cells"] = [want["badge"]] + body[:title_at] + [setup] + body[title_at:] + [want["footer"]]
    for cell in (want["badge"], setup, want["footer"]):  # stored as nbformat writes sources: one string per line
        cell["source"] = _src(cell).splitlines(keepends=True)
    return nb


def stale(nb: dict, stem: str) -> list[str]:
    """Names of the generated cells of ``nb`` that are missing, misplaced or out of date."""
    want = expected_cells(stem)
    cells = nb["cells"]
    problems = []
    where = {"badge": 0, "setup": 2, "footer": len(cells) - 1}
    for name, index in where.items():
        cell = cells[index] if -len(cells) <= index < len(cells) else None
        gen = cell and cell["metadata"].get("tpu_notes", {}).get("generated")
        if (
            gen != name
            or _src(cell) != want[name]["source"]
            or cell.get("id") != want[name]["id"]
            or cell["metadata"].get("tags") != want[name]["metadata"]["tags"]
        ):
            problems.append(name)
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report stale cells instead of rewriting")
    args = parser.parse_args(argv)
    bad = 0
    for stem, _ in CHAPTERS:
        path = NOTEBOOKS / f"{stem}.ipynb"
        if not path.exists():
            continue
        nb = json.loads(path.read_text())
        problems = stale(nb, stem)
        if args.check:
            if problems:
                bad += 1
                print(f"{path.relative_to(ROOT)}: stale generated cells {problems}; run python tools/nbcells.py")
        elif problems:
            path.write_text(json.dumps(refresh(nb, stem), indent=1, ensure_ascii=False) + "\n")
            print(f"refreshed {path.relative_to(ROOT)}: {problems}")
    if not args.check and NOTEBOOKS == Path(__file__).resolve().parent.parent / "notebooks":  # not under tests
        status.write()  # the status page lists the chapters of _toc.yml
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
