"""Count the hostile-input corpus and what each call gives: refused properly, a silent answer, Python's words, a hang.

The corpus is every fixed hostile call of ``tests/test_hostile_input.py`` (the registry's values, the declared kinds'
values and the numeric extremes, one argument at a time) plus the table of impossible combinations in
``tests/test_impossible_combinations.py``. Each is run once under the suite's CPU-time and memory caps and counted by
outcome; ``--list OUTCOME`` prints the findings of that outcome, ``--only PREFIX`` restricts to functions whose dotted
name starts with PREFIX.

    JAX_NUM_CPU_DEVICES=8 JAX_PLATFORMS=cpu .venv/bin/python benchmarks/hostile_corpus.py
    JAX_NUM_CPU_DEVICES=8 JAX_PLATFORMS=cpu .venv/bin/python benchmarks/hostile_corpus.py --list hang

Against an older checkout whose harness has no ``corpus()``, it counts the registry's and the kinds' values only
(what that harness tried).
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent))

#: How each outcome is reported: the two proper ones first.
GROUPS = {
    "refused": "refused properly (ValueError/TypeError naming the argument)",
    "sane": "a sane (finite) answer to an extreme but legal number",
    "silent": "a silent answer",
    "insane": "a non-finite answer (inf or nan) to finite input",
    "unnamed": "refused without naming the argument",
    "python": "Python's words (another exception)",
    "memory": "ran out of the memory budget",
    "hang": "a hang (CPU-time cap reached)",
}


def _old_corpus(h):
    """The corpus of a harness without ``corpus()``: the registry's and the declared kinds' values."""
    for dotted in h.NAMES:
        case = h.ALL_CASES[dotted]
        for name in h._fuzzable_of(dotted, case):
            for bad in h._hostile_values(dotted, case, name):
                yield dotted, name, bad, True


def _old_classify(h, dotted, case, fn, valid, name, bad):
    problem = h._check_one(dotted, case, fn, valid, name, bad)
    if problem is None:
        return "refused", None
    for needle, outcome in (
        ("still running", "hang"),
        ("silently", "silent"),
        ("does not name", "unnamed"),
        ("MemoryError", "memory"),
    ):
        if needle in problem:
            return outcome, problem
    return "python", problem


def run_corpus(h, only: str, counts, findings):
    has_classify = hasattr(h, "classify")
    items = h.corpus() if hasattr(h, "corpus") else _old_corpus(h)
    fns: dict = {}
    for dotted, name, bad, strict in items:
        if not dotted.startswith(only):
            continue
        case = h.ALL_CASES[dotted]
        if dotted not in fns:
            try:
                fns[dotted] = (h._target(dotted, case), h._valid(dotted, case))
            except Exception as err:  # noqa: BLE001 - a broken baseline is counted, not fatal
                fns[dotted] = err
        if isinstance(fns[dotted], Exception):
            counts["python"] += 1
            findings["python"].append(f"{dotted}: baseline: {fns[dotted]!r}"[:200])
            continue
        fn, valid = fns[dotted]
        if has_classify:
            outcome, problem = h.classify(dotted, case, fn, valid, name, bad, extreme=not strict)
        else:
            outcome, problem = _old_classify(h, dotted, case, fn, valid, name, bad)
        counts[outcome] += 1
        if problem:
            findings[outcome].append(f"{dotted}: {problem}")


def run_combinations(only: str, counts, findings) -> int:
    try:
        import test_impossible_combinations as C
    except ImportError:
        return 0
    n = 0
    for row in C.COMBINATIONS:
        if not row.target.startswith(only):
            continue
        n += 1
        outcome, problem = C.classify(row)
        counts[outcome] += 1
        if problem:
            findings[outcome].append(f"{row.id}: {problem}")
    return n


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", choices=sorted(GROUPS), action="append", default=[], help="print these findings")
    parser.add_argument("--only", default="tpu_notes.", help="dotted-name prefix of the functions to try")
    args = parser.parse_args(argv)
    import test_hostile_input as h

    start, cpu = time.perf_counter(), time.process_time()
    counts: collections.Counter = collections.Counter()
    findings: dict = collections.defaultdict(list)
    run_corpus(h, args.only, counts, findings)
    calls = sum(counts.values())
    combos = run_combinations(args.only, counts, findings)
    total = sum(counts.values())
    print(f"hostile corpus: {total:,} calls ({calls:,} one argument at a time, {combos} impossible combinations)")
    for key, label in GROUPS.items():
        print(f"  {counts[key]:6,}  {label}")
    print(f"({time.perf_counter() - start:.0f} s wall, {time.process_time() - cpu:.0f} s CPU)")
    for key in args.list:
        print(f"\n{GROUPS[key]}:")
        for line in findings[key]:
            print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
