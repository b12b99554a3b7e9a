"""How long the capped simulations take at their caps: the seconds the tests no longer time.

    python benchmarks/caps.py               # each case, best of 3
    python benchmarks/caps.py --repeats 1

The tests count the work these calls do (tests/test_bounded_work.py and tests/test_system.py: function calls under
a budget, the same on any machine); this measures what that work costs here. Cases: the pipeline simulator at both
of its caps at once (``MAX_STAGES`` stages, ``MAX_TASKS`` tasks), and the link-by-link router over the largest
cluster it enumerates (an AllToAll over ``MAX_DIRECT_GPUS`` GB200 GPUs). Target: at most ``TARGET_S`` seconds per
call on a 2-core machine (the bound the tests used to assert).
"""

from __future__ import annotations

import os
import time

from repeats import parse_repeats

from tpu_notes.gpu import MAX_DIRECT_GPUS, dgx_superpod, link_loads
from tpu_notes.training import pipeline

#: Most seconds one call at its cap should take on a 2-core machine.
TARGET_S = 10.0


def cases():
    """(name, zero-argument call) of each timed case."""
    stages = pipeline.MAX_STAGES
    microbatches = pipeline.MAX_TASKS // (2 * stages)
    pod = dgx_superpod("gb200", MAX_DIRECT_GPUS, nodes_per_su=8)
    return [
        (f"pipeline.simulate({stages}, {microbatches})", lambda: pipeline.simulate(stages, microbatches)),
        (
            f"link_loads(GB200 x {MAX_DIRECT_GPUS}, all-to-all, group {MAX_DIRECT_GPUS})",
            lambda: link_loads(pod, "all-to-all", 1e9, MAX_DIRECT_GPUS),
        ),
    ]


def main() -> None:
    repeats = parse_repeats(__doc__.splitlines()[0])
    print(f"calls at their caps on {os.cpu_count()} CPU cores; target <= {TARGET_S:g} s each (on 2 cores)\n")
    for name, call in cases():
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        best = min(times)
        verdict = "ok" if best <= TARGET_S else "OVER TARGET"
        print(f"{name}: first {times[0]:.2f} s, best of {repeats} {best:.2f} s ({verdict})")


if __name__ == "__main__":
    main()
