"""`make test`: ruff first, then pytest over tests/ and, beside it, every chapter pinned (tools/device_matrix.py).

    python tools/run_tests.py            # what `make test` runs
    python tools/run_tests.py --jobs 1   # one thing at a time
    python tools/run_tests.py -- -x -k browser   # extra pytest arguments (paths replace tests/)

Ruff (``ruff check`` and ``ruff format --check``, what ``make lint`` runs) goes first and stops the run when it
finds anything: it takes a second, the rest takes minutes.

Then two kinds of work share the cores, side by side:

- pytest over ``tests/`` only (unit, property and oracle tests, notebook hygiene, the book build and the browser
  pass) on every core (``-n JOBS`` from pytest-xdist, ``--dist loadfile``: a file stays on one worker);
- the chapters (tools/device_matrix.py, without ``--full``) on ``JOBS // 2`` lanes (at least one), each lane pinned
  to its core: each chapter compared under strict nbval once, with one thread on a 1-device runtime, and the
  chapters that build meshes executed on one CPU device. This is the only nbval pass: pytest does not compare the
  notebooks again (pytest.ini's ``testpaths`` is ``tests``; ``pytest notebooks/NN_slug.ipynb`` still compares one
  chapter by hand).

The test files of ``AFTER_CHAPTERS`` (the Colab path) run in the chapters' lane once the chapters are done.
The cores are oversubscribed while the chapters run (on 2 cores: two pytest workers and one chapter), so no core
waits for another's queue to drain; the chapters start longest first. They print into ``_build/device_matrix.log``
as they go; its lines are repeated after pytest's, and the command fails if either fails. ``--jobs 1`` runs the
chapters, then pytest in one process.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import device_matrix  # noqa: E402

#: What ruff lints and formats (the Makefile's LINTED).
LINTED = ("tpu_notes", "tests", "tools")
#: Test files run in the chapters' lane once its chapters are done, instead of in the main pytest run: mostly
#: subprocesses (the Colab path builds a virtual environment and runs every chapter's setup cells), they fill the
#: time that lane would otherwise sit idle while pytest finishes.
AFTER_CHAPTERS = ("tests/test_colab_path.py",)


def pytest_command(workers: int, extra: list[str]) -> list[str]:
    """The pytest run of `make test` on ``workers`` processes, listing the slowest tests: ``tests/`` only (pytest.ini's
    ``testpaths``), or what ``extra`` names instead."""
    spread = ["-n", str(workers), "--dist", "loadfile"] if workers > 1 else ["-p", "no:xdist"]
    # --durations: the slowest tests are listed after every run, so the 15-minute budget can be watched
    timing = ["--durations=25", "--durations-min=5"]
    return [sys.executable, "-m", "pytest", *spread, *timing, *extra]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="lanes, one per core (default: cores)")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    lint = [
        subprocess.run([sys.executable, "-m", "ruff", *cmd, *LINTED], cwd=ROOT).returncode
        for cmd in (["check"], ["format", "--check"])
    ]
    if any(lint):
        print("--- make test: ruff found problems (run `make lint`; `ruff check --fix` and `ruff format` fix most) ---")
        return 1
    log = ROOT / "_build" / "device_matrix.log"
    log.parent.mkdir(exist_ok=True)
    tests: list[int] = []

    def run_pytest() -> None:
        tests.append(subprocess.run(pytest_command(args.jobs, args.pytest_args), cwd=ROOT).returncode)

    start = time.perf_counter()
    todo = device_matrix.jobs()
    with log.open("w") as out:
        if args.jobs == 1:  # one thing at a time: the chapters, then pytest
            failed = device_matrix.run_lanes(todo, 1, out=out)
            run_pytest()
        else:  # pytest on every core, the chapters beside it on half as many pinned lanes, then AFTER_CHAPTERS
            after = [] if args.pytest_args else list(AFTER_CHAPTERS)
            main_args = [*args.pytest_args, *(f"--ignore={path}" for path in after)]
            beside = threading.Thread(
                target=lambda: tests.append(subprocess.run(pytest_command(args.jobs, main_args), cwd=ROOT).returncode)
            )
            beside.start()
            failed = device_matrix.run_lanes(todo, max(1, args.jobs // 2), out=out)
            if after:
                tests.append(subprocess.run(pytest_command(1, after), cwd=ROOT).returncode)
            beside.join()
        print(f"{len(todo) - failed} of {len(todo)} jobs passed in {time.perf_counter() - start:.0f} s", file=out)
    print(f"\n--- chapters (tools/device_matrix.py, {log.relative_to(ROOT)}) ---")
    print(log.read_text().rstrip())
    ok = bool(tests) and all(rc == 0 for rc in tests)
    print(
        f"--- make test: pytest {'passed' if ok else 'FAILED'}, chapters "
        f"{'passed' if not failed else 'FAILED'}, {time.perf_counter() - start:.0f} s in all ---"
    )
    return 0 if ok and not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
