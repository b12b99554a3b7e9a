"""The efficiency model against every published run: the per-group table, the fits and the held-out check.

    python benchmarks/efficiency.py            # the tables
    python benchmarks/efficiency.py --runs     # and one line per run

Prints, for the roofline (an upper bound) and the expected model (tpu_notes.efficiency.DEFAULT): the median and
worst error per group of published runs and overall (error = predicted speed / measured speed - 1, positive when the
prediction is too fast); every parameter of the model with its source or fit; each fitted parameter refitted from its
stated subset now; and the leave-one-group-out table (each group graded by a model fitted without it). Nothing here
is timed; it is the table the closing note of issue 22 quotes.
"""

from __future__ import annotations

import argparse
import time

from tpu_notes import efficiency, gemm, runs, validation
from tpu_notes.training import sweeps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", action="store_true", help="also print one line per published run")
    args = parser.parse_args()
    t0 = time.perf_counter()
    rows = validation.reconcile_all()
    print(f"{len(rows)} published runs ({sum(r.run.group in ('tpu-serving', 'gpu-serving') for r in rows)} serving)\n")
    print(runs.format_errors(runs.group_errors(rows)))
    print("\nleave one group out (the fitted parameters refitted without the group):")
    print(validation.format_held_out(validation.leave_one_group_out()))
    outside = [r for r in rows if not validation.in_sample(r.run)]
    print(f"\nruns outside every fit: {len(outside)}; their expected median |error|: "
          f"{runs.group_errors(outside)[-1].expected_median:.1%}")
    print("\npublished sweeps and scaling series (training.sweeps):")
    print(sweeps.format_sweeps(sweeps.evaluate_all()))
    print("\nGEMM tile model against published GEMM sweeps (tpu_notes.gemm; every dimension >= 1024):")
    print(f"  {'chip':<7}{'points':>7}{'median':>9}{'worst':>9}")
    for chip, (count, median, worst) in gemm.error_summary(gemm.gemm_report(), 1024).items():
        print(f"  {chip:<7}{count:>7}{median:>9.1%}{worst:>9.1%}")
    print("\nfitted parameters, refitted from their stated subsets now:")
    for f in validation.FITS:
        chosen = [r for r in validation.all_runs() if f.select(r)]
        print(f"  {f.parameter:16s} = {validation.fit_parameter(f, chosen):.4g}  on {len(chosen)} runs: {f.subset}")
    print("\nparameters of efficiency.DEFAULT and their sources:")
    for key, source in efficiency.SOURCES.items():
        print(f"  {key:26s} {source}")
    if args.runs:
        print(f"\n{'run':44s} {'group':18s} {'roofline':>9} {'expected':>9}  in-sample for")
        for r in rows:
            fits = ", ".join(validation.in_sample(r.run)) or "-"
            print(f"{r.run.name:44.44s} {r.run.group:18s} {r.roofline_error:+9.0%} {r.expected_error:+9.0%}  {fits}")
    print(f"\n({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
