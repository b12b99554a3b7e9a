"""How long the training planner takes to rank every layout, and whether its answers can be launched.

    python benchmarks/planner.py                    # every case timed, its top layouts launch-checked
    python benchmarks/planner.py --tables           # and each case's rejection reasons and top 3
    python benchmarks/planner.py --practitioners    # and the planner beside the published layouts

Times :func:`tpu_notes.training.plan` (ranked by the expected step) for Llama 3 8B, 70B and 405B on a v5e 16x16,
a v5p 16x16x16, a v6e 16x16 and an H100 cluster of 1,024 GPUs; 405B also on 16,384 H100s and on a full v5p pod,
which Cloud TPU does not schedule as one slice: the pod is taken as :func:`~tpu_notes.training.plan_slices` offers
it (slices per pod joined over DCN, its fastest option). Batches: 4M tokens (2**22) of 4096 for 8B and 70B, 16M
(2**24) of 8192 for 405B. Per case: the wall seconds of the first call and the best of ``--repeats`` (the planner
caches some per-model figures, so the first call is the cold one), the layouts ranked out of the candidates
searched, and :func:`~tpu_notes.training.launch_check` run on each of the top 10 distinct layouts
(:meth:`~tpu_notes.training.PlanResult.distinct`): the violations must be 0, or the script exits with status 1.
The targets (issue 23): 405B on 16,384 H100s and 405B on a full v5p pod, each at most 1 s on a 2-core machine.

A memory line follows: how many published runs' stated layouts fit the planner's default share of HBM
(:func:`~tpu_notes.training.published.stated_memory`) and which are the known gaps
(:data:`~tpu_notes.training.published.MEMORY_GAPS`). ``--practitioners`` adds
:func:`tpu_notes.training.practitioners.compare_with_practitioners` over every published run, its table and its
summary.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from tpu_notes.system import parse_system
from tpu_notes.training import launch_check, plan, plan_slices
from tpu_notes.training.planner import DEFAULT_HBM_FRACTION
from tpu_notes.training.practitioners import compare_with_practitioners, format_comparison, summarize
from tpu_notes.training.published import MEMORY_GAPS, RUNS, stated_memory

#: Global batches: (tokens, sequence length) for the 8B and 70B models, and for 405B.
SMALL_BATCH = (4 * 2**20, 4096)
LARGE_BATCH = (2**24, 8192)
#: (model, system spelling, batch): every case. A system spelled "v5p" is the full pod, taken as plan_slices
#: offers it (slices over DCN); the others are planned as spelled.
CASES = tuple(
    (model, system, LARGE_BATCH if model == "llama3-405b" else SMALL_BATCH)
    for model in ("llama3-8b", "llama3-70b", "llama3-405b")
    for system in ("v5e:16x16", "v5p:16x16x16", "v6e:16x16", "h100:1024")
) + (("llama3-405b", "v5p", LARGE_BATCH), ("llama3-405b", "h100:16384", LARGE_BATCH))
#: The cases the target applies to, and the target for one plan() call on a 2-core machine, seconds.
TARGETED = {("llama3-405b", "h100:16384"), ("llama3-405b", "v5p")}
TARGET_S = 1.0
#: Distinct layouts of each ranking that are launch-checked.
TOP = 10


def resolve(model: str, spelling: str, batch: int, seq: int):
    """(system, n_slices, label) of a case: a full TPU pod (spelled without a shape) as plan_slices' fastest
    option, slices joined over DCN; anything else as spelled."""
    if ":" in spelling:
        return parse_system(spelling), 1, spelling
    options = plan_slices(model, spelling, batch, seq, min_fraction=1.0)
    best = next(o for o in options if o.ok)
    shape = "x".join(map(str, best.slice.shape))
    return best.slice, best.n_slices, f"{spelling} pod: {best.n_slices} x {shape}"


def time_case(model: str, system, n_slices: int, batch: int, seq: int, repeats: int):
    """(first call's seconds, best of ``repeats`` calls' seconds, the last PlanResult)."""
    times = []
    result = None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        result = plan(model, system, batch, seq, n_slices=n_slices, rank_by="expected")
        times.append(time.perf_counter() - t0)
    return times[0], min(times), result


def memory_line() -> list[str]:
    """How many published runs' stated layouts fit the planner's default HBM share, and the known gaps."""
    fit, gaps, unexplained = [], [], []
    for run in RUNS:
        peak = stated_memory(run).peak
        limit = DEFAULT_HBM_FRACTION * run.system.chip.hbm_bytes
        if peak <= limit:
            fit.append(run.name)
        elif run.name in MEMORY_GAPS:
            gaps.append(f"  gap: {run.name}: {peak / 1e9:.1f} GB > {limit / 1e9:.1f} GB")
        else:
            unexplained.append(f"  UNEXPLAINED: {run.name}: {peak / 1e9:.1f} GB > {limit / 1e9:.1f} GB")
    stale = sorted(set(MEMORY_GAPS) & set(fit))
    lines = [
        f"Memory of the {len(RUNS)} published layouts (stated_memory, at most {DEFAULT_HBM_FRACTION:.0%} of HBM): "
        f"{len(fit)} fit, {len(gaps)} in MEMORY_GAPS, {len(unexplained)} unexplained"
    ]
    lines += gaps + unexplained
    lines += [f"  STALE: {name} is in MEMORY_GAPS but fits" for name in stale]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per case (best reported; default 3)")
    parser.add_argument("--tables", action="store_true", help="also print each case's reasons and top 3")
    parser.add_argument("--practitioners", action="store_true", help="also compare with the published layouts")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    print(
        f"plan() on {os.cpu_count()} CPU cores, best of {args.repeats}; launch_check on the top {TOP} distinct "
        f"layouts; target <= {TARGET_S:g} s on 2 cores for 405B on h100:16384 and on a v5p pod\n"
    )
    counts = f"{'ranked/searched':>16} {'checked':>7} {'viol.':>5}"
    print(f"{'model':<12} {'system':<26} {'first s':>7} {'best s':>7} {counts}")
    total_violations, details = 0, []
    for model, spelling, (batch, seq) in CASES:
        system, n_slices, label = resolve(model, spelling, batch, seq)
        first, best, result = time_case(model, system, n_slices, batch, seq, args.repeats)
        top = result.distinct(TOP)
        found = [(p, launch_check(p, result, model, system, batch, seq)) for p in top]
        bad = [(p, v) for p, v in found if v]
        total_violations += sum(len(v) for _, v in bad)
        target = ""
        if (model, spelling) in TARGETED:
            target = "  ok" if best <= TARGET_S else "  OVER TARGET"
        print(
            f"{model:<12} {label:<26} {first:>7.3f} {best:>7.3f} {f'{len(result.ranked)}/{result.searched}':>16} "
            f"{len(top):>7} {sum(len(v) for _, v in bad):>5}{target}"
        )
        if not result.ranked:
            reasons = ", ".join(f"{r} {n}" for r, n in result.reasons().items())
            print(f"{'':<12} no legal layout ({reasons})")
        for p, violations in bad:
            print(f"{'':<12} VIOLATION {p.parallelism.short()} (remat {p.remat}, v{p.circular_repeats}):")
            for v in violations:
                print(f"{'':<14} {v}")
        details.append((model, label, batch, seq, result))
    print(f"\nlaunch_check: {total_violations} violations in the top layouts (must be 0)\n")
    print("\n".join(memory_line()))
    if args.tables:
        for model, label, batch, seq, result in details:
            print(f"\n== {model} on {label}, {batch:,} tokens of {seq}")
            for reason, n in result.reasons().items():
                print(f"   rejected {n:6d} x {reason}")
            print("   " + result.table(3).replace("\n", "\n   "))
    if args.practitioners:
        t0 = time.perf_counter()
        rows = compare_with_practitioners()
        wall = time.perf_counter() - t0
        print(f"\nThe planner beside {len(rows)} published layouts ({wall:.1f} s):\n")
        print(format_comparison(rows))
        print()
        for key, value in summarize(rows).items():
            shown = f"{value:.3f}" if isinstance(value, float) else value
            print(f"  {key:20s} {shown}")
    if total_violations:
        sys.exit(1)


if __name__ == "__main__":
    main()
