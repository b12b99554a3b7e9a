"""tpu_notes.bench: the timing helper, the sweeps on the CPU, and the roofline fit against a known roofline."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_notes import bench, hardware


# ------------------------------------------------------------------------------------------------- time_fn
def test_time_fn_measures_a_known_duration():
    # Oracle: time.sleep sleeps at least the requested time (no upper bound: a loaded machine may oversleep).
    t = bench.time_fn(lambda: time.sleep(0.004), repeats=3, warmup=0, number=1)
    assert 0.004 <= t.min_s <= t.median_s <= t.max_s
    assert t.repeats == 3 and len(t.samples) == 3 and t.number == 1 and t.warmup == 0
    assert t.compile_s >= 0.004  # the first, untimed call also slept


def test_time_fn_on_a_jitted_function_separates_compile_time():
    import jax
    import jax.numpy as jnp

    x = jnp.ones((64, 64), jnp.float32)
    t = bench.time_fn(jax.jit(lambda a: a @ a), x, repeats=4, warmup=2)
    assert t.compile_s > 0 and t.median_s > 0
    assert t.min_s <= t.median_s <= t.max_s
    assert t.median_s == pytest.approx(float(np.median(t.samples)))
    assert t.number >= 1 and t.warmup == 2 and t.repeats == 4
    assert "median=" in repr(t)


def test_time_fn_auto_number_makes_samples_long_enough(monkeypatch):
    """A 2.5 µs call: the helper batches enough calls per sample to reach target_s. The clock is the test's own (each
    call advances it by exactly 2.5 µs), so the sizing is checked, not the machine's speed or load."""
    clock = [0.0]
    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock[0])

    def call():
        clock[0] += 2.5e-6

    t = bench.time_fn(call, repeats=2, warmup=1, target_s=1e-3, max_number=10_000)
    assert t.number == 400 and t.median_s == pytest.approx(2.5e-6)
    assert t.number * t.median_s == pytest.approx(1e-3)
    capped = bench.time_fn(call, repeats=2, warmup=1, target_s=1e-3, max_number=100)
    assert capped.number == 100


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"repeats": 0}, ValueError),
        ({"repeats": 1.5}, ValueError),
        ({"warmup": -1}, ValueError),
        ({"number": 0}, ValueError),
        ({"target_s": 0}, ValueError),
        ({"max_number": 0}, ValueError),
        ({"repeats": True}, TypeError),
    ],
)
def test_time_fn_rejects_bad_arguments(kwargs, exc):
    with pytest.raises(exc) as err:
        bench.time_fn(lambda: None, **kwargs)
    assert next(iter(kwargs)) in str(err.value)


def test_time_fn_rejects_a_non_callable():
    with pytest.raises(TypeError, match="fn"):
        bench.time_fn(42)


# ---------------------------------------------------------------------------------------- sweeps on the CPU
def test_matmul_sweep_on_cpu_gives_positive_flop_rates():
    shapes = ((8, 256, 128), (64, 256, 256))
    ms = bench.matmul_sweep(shapes, dtype="fp32", repeats=2)
    assert len(ms) == 2
    for m, (B, D, F) in zip(ms, shapes):
        assert m.kind == "matmul" and m.shape == (B, D, F) and m.dtype == "fp32"
        assert m.flops == 2 * B * D * F  # hand count: one multiply-add per (b, d, f)
        assert m.nbytes == 4 * (B * D + D * F + B * F)  # fp32 reads of x, w and write of out
        assert m.seconds > 0 and m.flops_per_s > 0 and m.bytes_per_s > 0
        assert m.timing is not None and m.timing.median_s == m.seconds
        assert m.intensity == pytest.approx(m.flops / m.nbytes)


def test_matmul_result_is_right():
    # The sweep times a real matmul: check the function it times against numpy.
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((8, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)
    out = jax.jit(lambda x, y: x @ y)(jnp.asarray(a), jnp.asarray(b))
    np.testing.assert_allclose(np.asarray(out), a @ b, rtol=1e-5, atol=1e-5)


def test_copy_probe_counts_read_and_write():
    m = bench.measure_copy(2**16, dtype="fp32", repeats=2)
    assert m.kind == "copy" and m.shape == (2**14,) and m.op == "add"
    assert m.nbytes == 2 * 2**16 and m.flops == 2**14
    assert m.intensity == pytest.approx(1 / 8)
    assert m.bytes_per_s > 0


def test_sum_probe_counts_reads_only():
    m = bench.measure_copy(2**16, dtype="fp32", repeats=2, op="sum")
    assert m.op == "sum" and m.label.startswith("sum(x)")
    assert m.nbytes == 2**16 + 4 and m.flops == 2**14  # one read of the array, one fp32 scalar written
    assert m.bytes_per_s > 0


def test_copy_sweep_runs_each_probe_at_each_size():
    ms = bench.copy_sweep((2**12, 2**14), dtype="fp32", repeats=1)
    assert [(m.op, m.shape[0]) for m in ms] == [("sum", 2**10), ("sum", 2**12), ("add", 2**10), ("add", 2**12)]
    assert [m.op for m in bench.copy_sweep((2**12,), repeats=1, ops="add")] == ["add"]


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda: bench.measure_matmul(0, 4, 4), ValueError),
        (lambda: bench.measure_matmul(4, 4, 4, dtype="int8"), ValueError),
        (lambda: bench.measure_copy(-1), ValueError),
        (lambda: bench.matmul_sweep(()), ValueError),
        (lambda: bench.matmul_sweep([(4, 4)]), ValueError),
        (lambda: bench.copy_sweep(()), ValueError),
        (lambda: bench.copy_sweep((2**12,), ops=()), ValueError),
        (lambda: bench.measure_copy(2**12, op="memcpy"), ValueError),
    ],
)
def test_sweeps_reject_bad_arguments(call, exc):
    with pytest.raises(exc):
        call()


def test_measure_roofline_end_to_end_on_cpu():
    r = bench.measure_roofline(matmul_shapes=((32, 256, 256),), copy_sizes=(2**18,), repeats=2, min_copy_bytes=0)
    assert r.platform == "cpu" and r.chip is None and r.dtype == "fp32"
    assert len(r.matmuls) == 1 and len(r.copies) == 2 and r.measurements == r.matmuls + r.copies
    assert r.fit.peak_flops == pytest.approx(r.matmuls[0].flops_per_s)
    assert r.fit.bandwidth == pytest.approx(max(m.bytes_per_s for m in r.copies))
    text = bench.report(r)
    assert "no tpu_notes chip model" in text and "matmul peak" in text
    rows = bench.compare(r)
    assert all(row.predicted is None and row.ratio is None for row in rows)
    preds = bench.predict(r)
    assert [p.label for p in preds] == [m.label for m in r.measurements]
    assert all(
        p.model_s is None and p.fitted_s > 0 and p.measured_s == m.seconds for p, m in zip(preds, r.measurements)
    )


def test_main_help_exits_cleanly(capsys):
    with pytest.raises(SystemExit) as stop:
        bench.main(["--help"])
    assert stop.value.code == 0
    assert "tpu_notes.bench" in capsys.readouterr().out


# -------------------------------------------------------------------- the fit, against a known roofline
def synthetic(peak, bw, shapes, copy_sizes, noise, rng, cache_speedup=4.0, cache_bytes=3.2e7):
    """Measurements a machine with roofline (peak, bw) would produce: time = max(FLOPs/peak, bytes/bw), slowed by
    a random factor in [1, 1 + noise); copies whose data fits in `cache_bytes` run `cache_speedup` x faster."""
    out = []
    for B, D, F in shapes:
        flops, nbytes = 2.0 * B * D * F, 2.0 * (B * D + D * F + B * F)
        t = max(flops / peak, nbytes / bw) * (1 + noise * rng.random())
        out.append(bench.Measurement("matmul", f"mm{B}", flops, nbytes, t, "bf16", shape=(B, D, F)))
    for size in copy_sizes:
        nbytes = 2.0 * size
        speed = bw * (cache_speedup if size <= cache_bytes else 1.0)
        t = max(size / 2 / peak, nbytes / speed) * (1 + noise * rng.random())
        out.append(bench.Measurement("copy", f"cp{size}", size / 2, nbytes, t, "bf16", shape=(size // 2,)))
    return out


def test_fit_recovers_a_known_roofline_from_noisy_measurements():
    rng = np.random.default_rng(0)
    chip = hardware.get_chip("v5e")
    shapes = [(b, 8192, 8192) for b in (1, 16, 128, 1024, 8192)]
    sizes = [2**20, 2**24, 2**27, 2**29]
    ms = synthetic(chip.bf16_flops, chip.hbm_bw, shapes, sizes, noise=0.03, rng=rng)
    fit = bench.fit_roofline(ms)
    # Slowdowns only, so the fit is within 3% below the truth and never above it.
    assert chip.bf16_flops / 1.03 <= fit.peak_flops <= chip.bf16_flops * (1 + 1e-12)
    assert chip.hbm_bw / 1.03 <= fit.bandwidth <= chip.hbm_bw * (1 + 1e-12)
    assert fit.critical_intensity == pytest.approx(fit.peak_flops / fit.bandwidth)
    assert fit.attainable(1.0) == pytest.approx(fit.bandwidth)
    assert fit.attainable(1e6) == pytest.approx(fit.peak_flops)
    # The cache-resident copies (4x faster) were excluded: with them the bandwidth would be ~4x too high.
    assert fit.bandwidth_from.startswith("cp") and int(fit.bandwidth_from[2:]) * 2 >= bench.DEFAULT_MIN_COPY_BYTES
    with_cache = bench.fit_roofline(ms, min_copy_bytes=0)
    assert with_cache.bandwidth > 3 * chip.hbm_bw
    assert fit.min_copy_bytes == bench.DEFAULT_MIN_COPY_BYTES and with_cache.min_copy_bytes == 0


@settings(max_examples=40, deadline=None)
@given(ridge=st.floats(1.0, 1e4), bw=st.floats(1e9, 1e13), big_b=st.integers(1, 64))
def test_fit_is_exact_without_noise(ridge, bw, big_b):
    # Any roofline with a ridge above the copy's intensity (real chips: tens to thousands of FLOPs/byte) is
    # recovered exactly when one matmul is compute-bound and one large copy is bandwidth-bound.
    D = 2**20  # synthetic: large enough that a matmul's intensity (up to D / 2) can pass any ridge tested
    peak = ridge * bw
    b_compute = int(2 * ridge * big_b) + 1  # intensity ~ B / (1 + 2B/D) with bf16 and D = F; make it > ridge
    B = max(b_compute, 1)
    while (2.0 * B * D * D) / (2.0 * (2 * B * D + D * D)) < ridge * 1.01:
        B *= 2
    rng = np.random.default_rng(0)
    ms = synthetic(peak, bw, [(1, D, D), (B, D, D)], [2**28], noise=0.0, rng=rng)
    fit = bench.fit_roofline(ms)
    assert math.isclose(fit.peak_flops, peak, rel_tol=1e-9)
    assert math.isclose(fit.bandwidth, bw, rel_tol=1e-9)


def test_fit_rejects_incomplete_measurements():
    rng = np.random.default_rng(0)
    ms = synthetic(1e14, 1e12, [(64, 1024, 1024)], [2**20], noise=0.0, rng=rng)
    with pytest.raises(ValueError, match="min_copy_bytes"):
        bench.fit_roofline(ms)  # only a cache-sized copy
    with pytest.raises(ValueError, match="matmul"):
        bench.fit_roofline([m for m in ms if m.kind == "copy"], min_copy_bytes=0)
    with pytest.raises(TypeError, match="Measurement"):
        bench.fit_roofline([("matmul", 1.0)])
    with pytest.raises(ValueError, match="min_copy_bytes"):
        bench.fit_roofline(ms, min_copy_bytes=-1)


def test_compare_against_a_chip_model():
    rng = np.random.default_rng(0)
    chip = hardware.get_chip("v5e")
    ms = synthetic(
        chip.bf16_flops / 2, chip.hbm_bw / 4, [(1, 8192, 8192), (8192, 8192, 8192)], [2**29], noise=0.0, rng=rng
    )
    fit = bench.fit_roofline(ms)
    result = bench.RooflineMeasurement(
        platform="tpu",
        device_kind="TPU v5 lite",
        chip="v5e",
        dtype="bf16",
        matmuls=tuple(m for m in ms if m.kind == "matmul"),
        copies=tuple(m for m in ms if m.kind == "copy"),
        fit=fit,
        wall_s=1.0,
    )
    rows = {r.name: r for r in bench.compare(result)}
    assert rows["matmul peak"].predicted == chip.bf16_flops
    assert rows["matmul peak"].ratio == pytest.approx(0.5)
    assert rows["memory bandwidth"].predicted == chip.hbm_bw
    assert rows["memory bandwidth"].ratio == pytest.approx(0.25)
    assert "0.50" in bench.format_rows(bench.compare(result)) and "chip model: v5e" in bench.report(result)
    with pytest.raises(TypeError, match="RooflineMeasurement"):
        bench.compare(fit)


def test_predict_puts_each_measurement_beside_the_fit_and_the_chip_model():
    # A synthetic v5e that reaches half its datasheet peak and a quarter of its HBM bandwidth, without noise.
    rng = np.random.default_rng(0)
    chip = hardware.get_chip("v5e")
    ms = synthetic(
        chip.bf16_flops / 2, chip.hbm_bw / 4, [(1, 8192, 8192), (8192, 8192, 8192)], [2**29], noise=0.0, rng=rng
    )
    result = bench.RooflineMeasurement(
        platform="tpu",
        device_kind="TPU v5 lite",
        chip="v5e",
        dtype="bf16",
        matmuls=tuple(m for m in ms if m.kind == "matmul"),
        copies=tuple(m for m in ms if m.kind == "copy"),
        fit=bench.fit_roofline(ms),
        wall_s=1.0,
    )
    rows = {r.label: r for r in bench.predict(result)}
    assert list(rows) == [m.label for m in result.measurements]
    big, vector, copy = rows["mm8192"], rows["mm1"], rows[f"cp{2**29}"]
    for r in rows.values():
        assert r.ratio_fit == pytest.approx(1.0)  # noise-free: the fitted roofline explains every time
    # Hand derivation: the big matmul (intensity 8192/3 >> 240) runs at half the datasheet peak, so it takes 2x the
    # model's time; the copy and the B=1 matmul are bandwidth-bound at a quarter of the bandwidth: 4x.
    B = D = F = 8192
    assert big.model_s == pytest.approx(2.0 * B * D * F / chip.bf16_flops)
    assert big.ratio_model == pytest.approx(2.0) and big.bound == "compute"
    assert copy.ratio_model == pytest.approx(4.0) and copy.bound == "bandwidth"
    assert vector.ratio_model == pytest.approx(4.0) and vector.bound == "bandwidth"
    text = bench.format_predictions(bench.predict(result))
    assert "2.00" in text and "4.00" in text and "chip model" in text
    # No chip model for a CPU (or no datasheet peak for fp32): a dash, never a made-up number.
    cpu = bench.RooflineMeasurement(
        platform="cpu",
        device_kind="cpu",
        chip=None,
        dtype="bf16",
        matmuls=result.matmuls,
        copies=result.copies,
        fit=result.fit,
        wall_s=1.0,
    )
    assert all(r.model_s is None and r.ratio_model is None for r in bench.predict(cpu))
    assert "—" in bench.format_predictions(bench.predict(cpu))
    fp32 = bench.RooflineMeasurement(
        platform="tpu",
        device_kind="TPU v5 lite",
        chip="v5e",
        dtype="fp32",
        matmuls=result.matmuls,
        copies=result.copies,
        fit=result.fit,
        wall_s=1.0,
    )
    assert all(r.model_s is None for r in bench.predict(fp32))
    # An explicit chip overrides the detected one.
    assert bench.predict(cpu, chip="v5e")[0].model_s == pytest.approx(vector.model_s)
    with pytest.raises(TypeError, match="RooflineMeasurement"):
        bench.predict(result.fit)
    with pytest.raises(ValueError, match="unknown chip"):
        bench.predict(result, chip="tpu9000")


def test_import_tpu_notes_bench_does_not_import_jax():
    import subprocess
    import sys

    code = "import sys, tpu_notes.bench, tpu_notes.widgets, tpu_notes.plots; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_measure_roofline_when_the_cache_outgrows_the_probes(monkeypatch):
    """A CPU with a last-level cache larger than the probes (300 MB L3s exist): the default threshold falls back to
    the largest probe and says the probes ran partly from cache, instead of refusing a call valid elsewhere; an
    explicit threshold no probe reaches is still refused."""
    monkeypatch.setattr(bench, "last_level_cache_bytes", lambda: 2**40)
    r = bench.measure_roofline(matmul_shapes=((64, 64, 64),), copy_sizes=(2**20,), repeats=1)
    assert r.fit.min_copy_bytes == max(m.nbytes for m in r.copies)
    assert r.memory_level.startswith("partly the last-level cache")
    with pytest.raises(ValueError, match="min_copy_bytes"):
        bench.measure_roofline(matmul_shapes=((64, 64, 64),), copy_sizes=(2**20,), repeats=1, min_copy_bytes=2**40)
