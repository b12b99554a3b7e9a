"""How long the training planner takes to rank every layout, and how its choice compares with published runs.

    python benchmarks/planner.py                    # the three cases, timed
    python benchmarks/planner.py --practitioners    # and the planner beside the 46 published layouts

Times :func:`tpu_notes.training.plan` (ranked by the expected step) on the cases of issue 23, whose target is at most
1 s each on a 2-core machine: Llama 3 405B on a full v5p pod and on 16,384 H100s with 16M-token batches (2**24
tokens) of 8192, and Llama 3 70B on a v5p 16x16x16 slice with 4M-token batches (2**22) of 4096. Per case: the wall
seconds of the first call and the best of ``--repeats`` (the planner caches some per-model figures, so the first call
is the cold one), the candidates searched, ranked and rejected (by reason), and the top 3 of the ranking.
``--practitioners`` adds :func:`tpu_notes.training.practitioners.compare_with_practitioners` over every published
run, its table and its summary.
"""

from __future__ import annotations

import argparse
import os
import time

from tpu_notes.system import parse_system
from tpu_notes.training import plan
from tpu_notes.training.practitioners import compare_with_practitioners, format_comparison, summarize

#: (model, system spelling, global batch in tokens, sequence length in tokens): the cases of issue 23.
CASES = (
    ("llama3-405b", "v5p", 2**24, 8192),
    ("llama3-405b", "h100:16384", 2**24, 8192),
    ("llama3-70b", "v5p:16x16x16", 4 * 2**20, 4096),
)
#: The issue's target for one plan() call on a 2-core machine, seconds.
TARGET_S = 1.0


def time_case(model: str, system: str, batch: int, seq: int, repeats: int):
    """(first call's seconds, best of ``repeats`` calls' seconds, the last PlanResult)."""
    times = []
    result = None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        result = plan(model, parse_system(system), batch, seq, rank_by="expected")
        times.append(time.perf_counter() - t0)
    return times[0], min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case (best reported; default 3)")
    parser.add_argument("--practitioners", action="store_true", help="also compare with the published layouts")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    print(f"plan() timings on {os.cpu_count()} CPU cores; target <= {TARGET_S:g} s per case (on 2 cores)\n")
    for model, system, batch, seq in CASES:
        first, best, result = time_case(model, system, batch, seq, args.repeats)
        verdict = "ok" if best <= TARGET_S else "OVER TARGET"
        print(f"== {model} on {system}, {batch:,} tokens of {seq}")
        print(
            f"   wall: first {first:.3f} s, best of {args.repeats} {best:.3f} s ({verdict}); searched "
            f"{result.searched}, ranked {len(result.ranked)}, rejected {len(result.rejected)}"
        )
        for reason, n in result.reasons().items():
            print(f"   rejected {n:6d} x {reason}")
        print("   " + result.table(3).replace("\n", "\n   ") + "\n")
    if args.practitioners:
        t0 = time.perf_counter()
        rows = compare_with_practitioners()
        wall = time.perf_counter() - t0
        print(f"The planner beside {len(rows)} published layouts ({wall:.1f} s):\n")
        print(format_comparison(rows))
        print()
        for key, value in summarize(rows).items():
            shown = f"{value:.3f}" if isinstance(value, float) else value
            print(f"  {key:20s} {shown}")


if __name__ == "__main__":
    main()
