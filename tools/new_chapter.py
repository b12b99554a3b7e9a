"""Start a new chapter from the template in CONTRIBUTING.md.

    python tools/new_chapter.py 05_training_parallelism          # a chapter the manifest lists
    python tools/new_chapter.py 13_epilogue "Epilogue"             # a new chapter: its manifest entry is added

Creates ``notebooks/<stem>.ipynb`` (title, hardware note, learning goals, one section in the
prose → compute → figure → exercise rhythm, summary, key numbers, exercises, further reading) and
``tpu_notes/exercises/chNN.py`` (found by ``tpu_notes.exercises`` without a list), writes the chapter's entry in the
manifest ``tools/chapters.json`` when it has none (exercise and plots modules, hostile-input case files and oracles
to fill in), adds the chapter to ``_toc.yml``, and refreshes the generated cells. Every placeholder says TODO, and
the hygiene tests keep failing on the new chapter until it is written and executed.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import chapters  # noqa: E402
import nbcells  # noqa: E402


def _md(text: str) -> dict:
    return {"cell_type": "markdown", "id": None, "metadata": {}, "source": text}


def _code(text: str, tags: list[str] | None = None, nbval_reason: str | None = None) -> dict:
    """A code cell; ``nbval_reason`` tags it ``nbval-ignore-output`` with that reason in its metadata."""
    metadata = {"tags": list(tags or [])}
    if nbval_reason is not None:
        metadata["tags"].append("nbval-ignore-output")
        metadata["tpu_notes"] = {"nbval_reason": nbval_reason}
    return {
        "cell_type": "code",
        "id": None,
        "metadata": metadata,
        "execution_count": None,
        "outputs": [],
        "source": text,
    }


def skeleton(number: int, title: str, chapter: str) -> dict:
    """The template notebook of chapter ``number`` (ids ``chNN.*``)."""
    ex = f"{chapter}.q1"
    cells = [
        _md(
            f"# Chapter {number} · {title}\n\n*TODO: a one-line promise.*\n\n"
            "> **Hardware.** TODO: what runs where (laptop CPU with 8 simulated devices; what a TPU/GPU changes).\n\n"
            "## What you will learn\n\n- TODO\n- TODO\n- TODO\n\nIt builds on TODO (link the chapters)."
        ),
        _code(
            "import matplotlib.pyplot as plt\n\nfrom tpu_notes import exercises, hardware, plots\n"
            "from tpu_notes.units import fmt\n\nplots.use_book_style()"
        ),
        _md(f"## {number}.1 TODO: the first idea\n\nTODO: prose that explains; the cell below computes it."),
        _code("# TODO: a few lines that compute with tpu_notes and print through fmt"),
        _code(
            "# TODO: a measurement with tpu_notes.bench beside the prediction (or delete this cell)",
            nbval_reason="measured timings differ from run to run and from machine to machine",
        ),
        _md(f"### Exercise {number}.1 · TODO\n\nTODO: the statement, in our own words."),
        _code(f'answer = None  # TODO: unit\nexercises.check("{ex}", answer)'),
        _code(
            f'# Solution\nanswer = None  # TODO: computed with tpu_notes\nexercises.check("{ex}", answer)',
            ["solution", "hide-cell"],
        ),
        _md("## Summary\n\n- TODO"),
        _md("## Key numbers"),
        _code("# TODO: print the constants worth memorising, from tpu_notes.hardware"),
        _md("## Exercises\n\nTODO: the chapter's remaining exercises, or a pointer to those in the flow."),
        _md("## Further reading\n\n- TODO"),
    ]
    for i, cell in enumerate(cells):
        cell["id"] = f"cell-{i:02d}"
    return {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


EXERCISE_MODULE = '''"""Exercises of Chapter {number} (ids {chapter}.*), registered with their reference solutions."""
from __future__ import annotations

from . import Exercise, register  # noqa: F401

# register(Exercise(id="{chapter}.q1", title="...", solve=lambda: ..., hint="...", unit="..."))
'''


def create(stem: str, root: Path = ROOT, title: str | None = None) -> list[Path]:
    """Create chapter ``stem`` under ``root``; return the files written or changed.

    A stem the manifest (``root/tools/chapters.json``) lists takes its title from there; a new stem needs ``title``
    and must be the next number.
    """
    manifest = root / "tools" / "chapters.json"
    known = {c.stem: c.title for c in chapters.load(manifest)}
    written: list[Path] = []
    if stem not in known:
        if title is None:
            raise SystemExit(
                f"unknown chapter {stem!r}; the manifest knows {', '.join(known)}; give a title to add a new one"
            )
        try:
            chapters.add(stem, title, manifest)
        except ValueError as err:
            raise SystemExit(str(err)) from None
        known[stem] = title
        written.append(manifest)
    number, title = int(stem[:2]), known[stem]
    chapter = f"ch{number:02d}"
    notebook = root / "notebooks" / f"{stem}.ipynb"
    module = root / "tpu_notes" / "exercises" / f"{chapter}.py"
    if notebook.exists():
        raise SystemExit(f"{notebook.relative_to(root)} already exists")
    notebook.write_text(json.dumps(skeleton(number, title, chapter), indent=1, ensure_ascii=False) + "\n")
    if not module.exists():
        module.write_text(EXERCISE_MODULE.format(number=number, chapter=chapter))
    toc = root / "_toc.yml"
    lines = toc.read_text().splitlines()
    entries = [i for i, line in enumerate(lines) if re.match(r"\s*- file: notebooks/\d\d_", line)]
    if f"notebooks/{stem}" not in toc.read_text():
        # Insert in chapter order: after the last listed chapter that comes before this one (or before the first).
        before = [i for i in entries if lines[i].split("notebooks/")[1].strip() < stem]
        anchor = before[-1] if before else entries[0]
        indent = lines[anchor][: len(lines[anchor]) - len(lines[anchor].lstrip())]
        lines.insert(anchor + 1 if before else anchor, f"{indent}- file: notebooks/{stem}")
        toc.write_text("\n".join(lines) + "\n")
    return [notebook, module, toc] + written


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print(__doc__)
        return 2
    for path in create(argv[0], title=argv[1] if len(argv) == 2 else None):
        print(f"wrote {path.relative_to(ROOT)}")
    nbcells.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
