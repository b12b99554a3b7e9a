"""Benchmark: how long `tpu_notes.training.plan` takes to rank every layout (Chapter 5's speed promise: <= 1 s for
Llama 3 405B on a full v5p pod of 8960 chips on a 2-core machine).

Run: `make bench-planner` or `.venv/bin/python benchmarks/planner.py [--repeats 5]`. Prints the median and the
spread of wall-clock times for a few (model, slice, batch) cases, and the candidates searched.
"""
from __future__ import annotations

import argparse
import statistics
import time

from tpu_notes.topology import Slice
from tpu_notes.training import plan

CASES = [
    ("llama3-405b", Slice("v5p", (16, 20, 28)), 16 * 2**20, 8192),
    ("llama3-70b", Slice("v5p", (16, 16, 16)), 4 * 2**20, 4096),
    ("llama3-8b", Slice("v5e", (16, 16)), 2**20, 8192),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per case (median reported)")
    args = parser.parse_args()
    print(f"{'case':<44} {'searched':>8} {'ranked':>7} {'median':>9} {'min':>9} {'max':>9}")
    for model, slc, batch, seq in CASES:
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            result = plan(model, slc, batch, seq)
            times.append(time.perf_counter() - t0)
        label = f"{model} on {slc!r}, {batch:,} tok"
        print(f"{label:<44.44} {result.searched:>8} {len(result):>7} {statistics.median(times):>8.3f}s "
              f"{min(times):>8.3f}s {max(times):>8.3f}s")


if __name__ == "__main__":
    main()
