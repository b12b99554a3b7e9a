"""Write the book's status page, ``book/status.md``, from ``book/status.json``.

    python tools/status.py           # (re)write book/status.md
    python tools/status.py --check   # exit 1 if book/status.md is missing or out of date

``book/status.json`` is written by ``tools/execute.py`` each time it executes a chapter: the wall time, the JAX
version and the devices of that run. This page turns it into a table, one row per chapter of the book (in the order
of ``tools/chapters.py``'s ``CHAPTERS``), including chapters that are not written yet. ``tools/execute.py`` rewrites the
page after each run and ``tools/build_book.py`` before every build, so the page matches book/status.json; the page
is committed (the table of contents lists it) and a test fails when it is stale.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import chapters  # noqa: E402  (not nbcells: nbcells imports this module)

STATUS_JSON = ROOT / "book" / "status.json"
STATUS_MD = ROOT / "book" / "status.md"


def render(status: dict, linked: set[str] | None = None) -> str:
    """The Markdown of the status page for ``status`` (the parsed book/status.json).

    ``linked``: the chapters that get a link (default: those in _toc.yml). The page depends on nothing else, so
    it changes only when book/status.json, _toc.yml, the exercise registry or the oracle list changes.
    """
    linked = chapters.toc_stems() if linked is None else linked
    counts = exercise_counts()
    lines = [
        "# Status of the chapters",
        "",
        "Every chapter is executed before it is published, and the outputs on these pages are the ones the tests",
        "compare against (strict `nbval`). The table says where and how each chapter was last executed. Times",
        "are the wall time of a whole notebook run, kernel start included; they are the machine's, not a benchmark.",
        "",
        "| chapter | status | executed in | exercises | oracles | JAX | devices |",
        "|---|---|---|---|---|---|---|",
    ]
    for number, (stem, title) in enumerate(chapters.CHAPTERS, start=1):
        name = f"[{number} · {title}](../notebooks/{stem}.ipynb)" if stem in linked else f"{number} · {title}"
        run = status.get(stem)
        ex = counts.get(stem[:2], 0)
        oracles = len(chapters.ORACLES.get(stem, []))
        if run is not None:
            lines.append(
                f"| {name} | executed | {float(run['seconds']):.1f} s | {ex} | {oracles} "
                f"| {run.get('jax', '?')} | {run.get('device', '?')} |"
            )
        elif stem in linked:
            lines.append(f"| {name} | no execution record | – | {ex} | {oracles} | – | – |")
        else:
            lines.append(f"| {name} | coming in a later part | – | – | – | – | – |")
    lines += [
        "",
        "The chapters run unchanged on a laptop CPU (JAX then simulates 8 devices), on a TPU VM, on a GPU machine",
        "and on Colab. To refresh a row, execute the chapter again with `make execute` (or",
        "`python tools/execute.py notebooks/NN_slug.ipynb`).",
        "",
        "## The oracles",
        "",
        "What each chapter's analysis is held to, that nobody here wrote, and the test that holds it:",
        "",
    ]
    for number, (stem, _title) in enumerate(chapters.CHAPTERS, start=1):
        for what, test in chapters.ORACLES.get(stem, []):
            lines.append(f"- Chapter {number}: {what} (`{test}`).")
    lines.append("")
    return "\n".join(lines)


def exercise_counts() -> dict[str, int]:
    """Registered exercises per chapter number (``{"01": 12, ...}``), from tpu_notes.exercises."""
    sys.path.insert(0, str(ROOT))
    from tpu_notes import exercises

    out: dict[str, int] = {}
    for i in exercises.all_ids():
        chapter = i.split(".")[0][2:]
        out[chapter] = out.get(chapter, 0) + 1
    return out


def expected() -> str:
    status = json.loads(STATUS_JSON.read_text()) if STATUS_JSON.exists() else {}
    return render(status)


def write() -> bool:
    """Write book/status.md if its content changes; return True if it was written."""
    text = expected()
    if STATUS_MD.exists() and STATUS_MD.read_text() == text:
        return False
    STATUS_MD.write_text(text)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report whether book/status.md is current")
    args = parser.parse_args(argv)
    if args.check:
        ok = STATUS_MD.exists() and STATUS_MD.read_text() == expected()
        print("book/status.md is " + ("current" if ok else "stale: run python tools/status.py"))
        return 0 if ok else 1
    print("wrote book/status.md" if write() else "book/status.md unchanged")
    return 0


if __name__ == "__main__":
    sys.exit(main())
