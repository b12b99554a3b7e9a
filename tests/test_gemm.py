"""The GEMM model against published sweeps (tpu_notes.gemm.GEMM_SWEEPS, sources in SWEEP_SOURCES).

The fitted parameters are few and stated (tpu_notes.gemm.SOURCES): per family an exposed-bytes share, per chip a
fixed cost, per host-timed sweep a dispatch time; the plateau is each sweep's best measured point. Every other
point of a sweep is a check of the tile, wave and bytes mechanisms, not an echo.
"""

import math

import pytest

from tpu_notes import efficiency, gemm
from tpu_notes.hardware import get_chip

ROWS = gemm.gemm_report()


def test_sweeps_are_many_points_on_several_chips():
    sizes = {}
    for r in gemm.GEMM_SWEEPS:
        if r.size >= 1024:
            sizes.setdefault(r.chip, []).append(r)
    # The fit has at most 3 parameters per chip; the checked chips have many more points than that.
    assert {c for c, rs in sizes.items() if len(rs) >= 5} >= {"tpu7x", "v6e", "h100", "b200"}


@pytest.mark.parametrize(
    "row",
    [r for r in ROWS if r.record.size >= 1024],
    ids=lambda r: f"{r.chip}-{r.record.m}x{r.record.k}x{r.record.n}-{r.record.source}",
)
def test_within_15_percent_from_1024_up(row):
    assert abs(row.error) <= 0.15, gemm.format_gemm_report([row])


def test_summary_matches_rows():
    summary = gemm.error_summary(ROWS, 1024)
    for chip, (count, median, worst) in summary.items():
        errs = sorted(abs(r.error) for r in ROWS if r.chip == chip and r.record.size >= 1024)
        assert count == len(errs) and worst == errs[-1] and errs[0] <= median <= errs[-1]


def test_small_matmuls_are_slow_as_published():
    # TPU7x 1024^3 is published at 349.7 TFLOP/s per TensorCore, 30% of its 1153.5 peak; the knee model said 79%.
    (rec,) = [r for r in gemm.GEMM_SWEEPS if r.chip == "tpu7x" and r.m == 1024]
    assert rec.fraction == pytest.approx(0.303, abs=0.002)
    assert gemm.DEFAULT.predict(rec) / rec.flops_per_s == pytest.approx(1.0, abs=0.15)
    assert gemm.gemm_fraction("tpu7x", 1024, 1024, 1024) < 0.45 < efficiency.matmul_fraction("tpu7x", 1024, 1024, 1024)


@pytest.mark.parametrize("chip", ["tpu7x", "v6e", "h100", "b200", "a100"])
def test_plateau_is_the_sweeps_best_point(chip):
    best = max(
        (r for r in gemm.GEMM_SWEEPS if r.chip == chip and r.timing == "device" and r.dtype == "bf16"),
        key=lambda r: r.fraction,
    )
    assert gemm.DEFAULT.plateau_of(chip) == pytest.approx(best.fraction, rel=1e-3)
    predicted = gemm.DEFAULT.predict(best) / (get_chip(chip).bf16_flops * best.chip_share)
    assert predicted == pytest.approx(gemm.DEFAULT.plateau_of(chip), rel=0.02)
    shape = gemm.DEFAULT.plateau_shape[chip]
    assert shape[:3] == (best.m, best.k, best.n)


@pytest.mark.parametrize("chip", ["h100", "b200"])
def test_fp8_plateau_is_the_fp8_sweeps_best_point(chip):
    best = max((r for r in gemm.GEMM_SWEEPS if r.chip == chip and r.dtype == "fp8"), key=lambda r: r.fraction)
    assert gemm.DEFAULT.plateau_of(chip, "fp8") == pytest.approx(best.fraction, rel=1e-3)
    assert gemm.gemm_fraction(chip, best.m, best.k, best.n, "fp8") == pytest.approx(best.fraction, rel=0.02)


def test_fp8_points_are_checked_from_1024_up():
    # XLA's B200 FP8 table gives 27 shapes from 1024 up that the plateau (MAMF's best shape) does not come from.
    fp8 = [r for r in ROWS if r.record.dtype == "fp8" and r.record.size >= 1024 and r.chip == "b200"]
    assert len(fp8) >= 20 and all(abs(r.error) <= 0.15 for r in fp8), gemm.format_gemm_report(fp8)


def test_fp8_gain_below_the_datasheet_ratio():
    # MAMF: H100 FP8 1402.6 TFLOP/s, bf16 794.5: 1.77x at each one's best shape, where the peaks say 2x.
    big = [gemm.gemm_seconds("h100", s, s, s, d) for s in (8192,) for d in ("bf16", "fp8")]
    assert big[0] / big[1] == pytest.approx(1402.6 / 794.5, rel=0.02)
    # A chip without an FP8 sweep (a TPU) is priced at its bf16 plateau.
    assert gemm.DEFAULT.plateau_of("v5p", "fp8") == gemm.DEFAULT.plateau_of("v5p")


def test_h100_mamf_shape_returns_mamf():
    # The knee model returned ~740 TFLOP/s at MAMF's own best shape; this one returns MAMF's 794.5.
    t = gemm.gemm_seconds("h100", 2048, 13312, 2048)
    assert 2 * 2048 * 13312 * 2048 / t == pytest.approx(794.5e12, rel=0.02)


@pytest.mark.parametrize("chip", ["v5e", "v6e", "v5p", "tpu7x", "h100", "b200", "a100"])
def test_square_gemms_get_no_slower_per_flop(chip):
    fr = [gemm.gemm_fraction(chip, s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192, 16384)]
    assert all(b >= a * 0.999 for a, b in zip(fr, fr[1:])), fr


@pytest.mark.parametrize("chip", ["v5e", "v6e", "v5p", "h100"])
@pytest.mark.parametrize("m", [1, 7, 64, 2048, 8192, 1e6])
def test_shape_factor_in_unit_interval(chip, m):
    f = gemm.shape_factor(chip, m, 8192, 1024)
    assert 0 < f <= 1 and math.isfinite(f)


def test_padding_costs_time():
    # 130 columns on a 128-wide MXU pay for 256 (compute-bound shape: large m and k).
    t128 = gemm.gemm_seconds("v5e", 65536, 8192, 128)
    t130 = gemm.gemm_seconds("v5e", 65536, 8192, 130)
    assert t130 > 1.5 * t128


def test_gpu_wave_quantisation():
    # 132 SMs: 132 tiles of 128x256 fill one wave, 133 need two.
    one = gemm.gemm_seconds("h100", 128 * 12, 16384, 256 * 11)
    two = gemm.gemm_seconds("h100", 128 * 12 + 1, 16384, 256 * 11)
    assert two > 1.6 * one


def test_thin_matmul_is_bytes_bound():
    c = get_chip("v5e")
    t = gemm.gemm_seconds(c, 1, 8192, 8192)
    assert t >= 2 * 8192 * 8192 / c.hbm_bw


def test_fixed_cost_bounds_tiny_calls():
    assert gemm.gemm_seconds("h100", 1, 1, 1) >= gemm.DEFAULT.fixed_of("h100")


def test_report_formats():
    text = gemm.format_gemm_report(ROWS[:3])
    assert len(text.splitlines()) == 4 and "FLOP/s" in text


@pytest.mark.parametrize(
    "call, word",
    [
        (lambda: gemm.gemm_seconds("v5e", 0, 8, 8), "m"),
        (lambda: gemm.gemm_seconds("v5e", 8, -1, 8), "k"),
        (lambda: gemm.gemm_seconds("v5e", 8, 8, float("nan")), "n"),
        (lambda: gemm.gemm_seconds("v5e", 8, 8, 8, dtype="fp64"), "dtype"),
        (lambda: gemm.gemm_seconds("nope", 8, 8, 8), "chip"),
        (lambda: gemm.shape_factor("v5e", 8, 8, 8, model="default"), "model"),
        (
            lambda: gemm.GemmModel(
                plateau={"v5e": 1.5}, plateau_shape={"v5e": (1, 1, 1, 1.0)}, fixed={}, exposed_bytes={}
            ),
            "plateau",
        ),
        (lambda: gemm.DEFAULT.with_(fixed={"tpu": -1.0}), "fixed"),
        (lambda: gemm.DEFAULT.with_(exposed_bytes={"cpu": 0.1}), "exposed_bytes"),
        (lambda: gemm.GemmMeasurement("v5e", 0, 8, 8, "bf16", 1e12, "mamf"), "m"),
        (lambda: gemm.GemmMeasurement("v5e", 8, 8, 8, "bf16", 1e12, "blog"), "source"),
        (lambda: gemm.error_summary(ROWS, 0), "min_size"),
    ],
)
def test_bad_input_names_the_argument(call, word):
    with pytest.raises((ValueError, TypeError), match=word):
        call()
