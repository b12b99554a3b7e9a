"""Print the GEMM model against every published sweep (tpu_notes.gemm.GEMM_SWEEPS): the full table, then per chip
the median and worst |error| over the points whose every dimension is at least 1024 (target: within 15%).

Run: python benchmarks/gemm.py
"""

from tpu_notes import gemm


def main() -> None:
    rows = gemm.gemm_report()
    print(gemm.format_gemm_report(rows))
    print()
    print(f"{'chip':<7}{'points':>7}{'median':>9}{'worst':>9}   (every dimension >= 1024)")
    for chip, (count, median, worst) in gemm.error_summary(rows, 1024).items():
        print(f"{chip:<7}{count:>7}{median:>9.1%}{worst:>9.1%}")


if __name__ == "__main__":
    main()
