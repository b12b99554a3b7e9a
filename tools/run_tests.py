"""`make test`: ruff first, then pytest on every core and, beside it, the device-count matrix (tools/device_matrix.py).

    python tools/run_tests.py            # what `make test` runs
    python tools/run_tests.py --jobs 1   # one thing at a time

The two run at once: pytest (``-n JOBS --dist loadfile``: a file, and so a notebook, stays on one worker) leaves a
core idle while it waits on
the browser, the book build and subprocesses, and the matrix's kernels fill those gaps. The matrix prints into
``_build/device_matrix.log`` as it goes; its lines are repeated after pytest's, and the command fails if either
fails. Ruff (``ruff check`` and ``ruff format --check``, what ``make lint`` runs) goes first and stops the run when it
finds anything: it takes a second, the rest takes minutes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


#: What ruff lints and formats (the Makefile's LINTED).
LINTED = ("tpu_notes", "tests", "tools")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="pytest workers (default: cores)")
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
    start = time.perf_counter()
    with log.open("w") as out:
        matrix = subprocess.Popen(
            [sys.executable, str(ROOT / "tools" / "device_matrix.py"), "--lanes", "1"],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        if args.jobs == 1:  # one thing at a time: the matrix first, then pytest
            matrix.wait()
        workers = ["-n", str(args.jobs), "--dist", "loadfile"] if args.jobs > 1 else []
        # --durations: the slowest tests are listed after every run, so the 15-minute budget can be watched
        timing = ["--durations=25", "--durations-min=5"]
        tests = subprocess.run([sys.executable, "-m", "pytest", *workers, *timing, *args.pytest_args], cwd=ROOT)
        matrix.wait()
    print(f"\n--- device-count matrix (tools/device_matrix.py, {log.relative_to(ROOT)}) ---")
    print(log.read_text().rstrip())
    print(
        f"--- make test: pytest {'passed' if tests.returncode == 0 else 'FAILED'}, matrix "
        f"{'passed' if matrix.returncode == 0 else 'FAILED'}, {time.perf_counter() - start:.0f} s in all ---"
    )
    return 0 if tests.returncode == 0 and matrix.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
