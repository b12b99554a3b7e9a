"""The chapter manifest (``tools/chapters.json``): the book's chapters in order, and what belongs to each.

One entry per chapter: its file stem and title, its exercise module, its plots module, the hostile-input case files
that cover its library modules, and its oracles (what its analysis is checked against that nobody here wrote, with
the test that holds each check). ``tools/new_chapter.py`` adds an entry; ``tools/status.py`` (the status page),
``tools/nbcells.py`` (generated cells) and the tests read it from here, so no other list of chapters is kept.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "tools" / "chapters.json"


@dataclass(frozen=True)
class Oracle:
    """One check against something nobody here wrote: what it compares, and the test file that holds it."""

    what: str
    test: str


@dataclass(frozen=True)
class Chapter:
    """One entry of the manifest."""

    stem: str  # "05_training_parallelism": the notebook is notebooks/<stem>.ipynb
    title: str
    exercises: str  # the module that registers its exercises, tpu_notes.exercises.chNN
    plots: str  # the module that draws its figures, tpu_notes.plots.<name>
    hostile_cases: tuple  # tests/hostile_cases*.py files covering the modules it teaches
    oracles: tuple  # Oracle, ...

    @property
    def number(self) -> int:
        return int(self.stem[:2])


def load(path: Path = MANIFEST) -> list[Chapter]:
    """The manifest's chapters, in book order (stems must be unique and numbered 01, 02, ... in order)."""
    entries = json.loads(path.read_text())["chapters"]
    out = [
        Chapter(
            e["stem"],
            e["title"],
            e["exercises"],
            e["plots"],
            tuple(e["hostile_cases"]),
            tuple(Oracle(o["what"], o["test"]) for o in e["oracles"]),
        )
        for e in entries
    ]
    for i, chapter in enumerate(out, start=1):
        if not re.fullmatch(r"\d\d_\w+", chapter.stem) or chapter.number != i:
            raise ValueError(f"{path.name}: entry {i} has stem {chapter.stem!r}; stems are numbered in order")
    return out


def add(stem: str, title: str, path: Path = MANIFEST) -> bool:
    """Append chapter ``stem`` to the manifest (modules named after its number, no oracles yet); False if present."""
    doc = json.loads(path.read_text())
    if any(e["stem"] == stem for e in doc["chapters"]):
        return False
    number = stem[:2]
    doc["chapters"].append(
        {
            "stem": stem,
            "title": title,
            "exercises": f"tpu_notes.exercises.ch{number}",
            "plots": f"tpu_notes.plots.{stem[3:]}",
            "hostile_cases": [],
            "oracles": [],
        }
    )
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    load(path)  # refuses an entry out of order
    return True


MANIFEST_CHAPTERS = load()
#: The whole book, in order: (file stem, chapter title). A stem whose notebook does not exist yet is "coming".
CHAPTERS = [(c.stem, c.title) for c in MANIFEST_CHAPTERS]
#: Oracles by stem, as (what, test file) pairs.
ORACLES = {c.stem: [(o.what, o.test) for o in c.oracles] for c in MANIFEST_CHAPTERS if c.oracles}


def hostile_case_files() -> tuple[str, ...]:
    """Every hostile-input case file the manifest names, in chapter order, each once."""
    out: list[str] = []
    for c in MANIFEST_CHAPTERS:
        out += [f for f in c.hostile_cases if f not in out]
    return tuple(out)


def toc_stems(root: Path = ROOT) -> set[str]:
    """Stems of the chapter notebooks listed in ``root``'s _toc.yml (only those become pages of the book)."""
    toc = root / "_toc.yml"
    text = toc.read_text() if toc.exists() else ""
    return set(re.findall(r"^\s*-\s*file:\s*notebooks/(\w+)\s*$", text, re.M))
