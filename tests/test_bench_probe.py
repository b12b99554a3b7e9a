"""The bandwidth probe of Chapter 1 is sized from the detected last-level cache, fitted by its median with the
spread reported, and says which level of the memory hierarchy it measured (tpu_notes.bench)."""

import pytest

from tpu_notes import bench

MiB = 2**20


def probe(size, rate, op="add", samples=None):
    """A synthetic x + 1 (or sum) probe over ``size`` bytes at ``rate`` bytes/s (median), with optional samples."""
    nbytes = 2.0 * size if op == "add" else float(size)
    timing = None
    if samples is not None:
        secs = tuple(nbytes / r for r in samples)
        timing = bench.Timing(
            compile_s=0.0, median_s=nbytes / rate, min_s=min(secs), max_s=max(secs), samples=secs, number=1, warmup=0
        )
    return bench.Measurement(
        "copy", f"{op} {size}", size / 4, nbytes, nbytes / rate, "fp32", timing=timing, shape=(size // 4,), op=op
    )


MATMUL = bench.Measurement("matmul", "mm", 2e12, 1e9, 1.0, "fp32", shape=(512, 4096, 4096))


def test_the_cache_size_is_read_from_the_operating_system():
    llc = bench.last_level_cache_bytes()
    assert llc is None or (isinstance(llc, int) and 2**16 <= llc <= 2**33)
    available = bench.available_memory_bytes()
    assert available is None or available > 0


@pytest.mark.parametrize("cache", [32 * MiB, 300 * MiB])
def test_probe_sizes_are_several_times_the_cache_and_fit_in_memory(monkeypatch, cache):
    monkeypatch.setattr(bench, "available_memory_bytes", lambda: 64e9)
    sizes = bench.default_copy_sizes("cpu", cache_bytes=cache)
    large = [s for s in sizes if s >= 2 * cache]
    assert large == [k * cache for k in bench.LLC_MULTIPLES]  # 4x, 6x, 8x
    assert [s for s in sizes if s < 2 * cache] == [s for s in (MiB, 4 * MiB, 16 * MiB) if s < 4 * cache]
    monkeypatch.setattr(bench, "available_memory_bytes", lambda: 8e9)  # a small machine: an eighth at most
    assert max(bench.default_copy_sizes("cpu", cache_bytes=300 * MiB)) <= 1e9
    assert max(bench.default_copy_sizes("tpu")) == 512 * MiB
    with pytest.raises(ValueError, match="cache_bytes"):
        bench.default_copy_sizes("cpu", cache_bytes=-1)


def test_the_bandwidth_is_the_median_with_its_spread():
    rates = (40e9, 60e9, 90e9)
    probes = [probe(s, r, samples=(r * 0.8, r, r * 1.1)) for s, r in zip((128 * MiB, 192 * MiB, 256 * MiB), rates)]
    cached = probe(16 * MiB, 300e9)  # below the threshold: left out
    fit = bench.fit_roofline([MATMUL, cached, *probes], min_copy_bytes=2 * 32 * MiB)
    assert fit.bandwidth == pytest.approx(60e9)  # the median probe, not the best one (90e9)
    assert fit.bandwidth_from == probes[1].label
    assert fit.bandwidth_spread == pytest.approx((40e9 * 0.8, 90e9 * 1.1))
    assert fit.bandwidth_probes == tuple(p.label for p in probes)
    # each probe op gets its median; the faster op sets the bandwidth
    reads = [probe(s, r / 2, op="sum") for s, r in zip((128 * MiB, 192 * MiB, 256 * MiB), rates)]
    assert bench.fit_roofline([MATMUL, *reads, *probes], min_copy_bytes=0).bandwidth == pytest.approx(60e9)


def test_memory_level_names_what_was_measured():
    assert "main memory" in bench.memory_level("cpu", 128 * MiB, 32 * MiB)
    assert "4x" in bench.memory_level("cpu", 128 * MiB, 32 * MiB)
    assert "cache" in bench.memory_level("cpu", 64 * MiB, 300 * MiB)
    assert "unknown" in bench.memory_level("cpu", 64 * MiB, None)
    assert "HBM" in bench.memory_level("tpu", 512 * MiB, None)


def test_measure_roofline_sizes_its_threshold_from_the_cache(monkeypatch):
    monkeypatch.setattr(bench, "last_level_cache_bytes", lambda: 2**18)  # pretend a 256 KiB cache
    r = bench.measure_roofline(matmul_shapes=((16, 128, 128),), copy_sizes=(2**16, 2**20), repeats=2, copy_ops=("add",))
    assert r.cache_bytes == 2**18 and r.fit.min_copy_bytes == 2 * 2**18
    assert r.fit.bandwidth_probes == ("x + 1 over 1.05 MB fp32",)  # the 64 KiB probe ran from cache
    assert "main memory" in r.memory_level and "4x" in r.memory_level
    low, high = r.fit.bandwidth_spread
    assert low <= r.fit.bandwidth <= high
    text = bench.report(r)
    assert "median" in text and "memory measured: main memory" in text
    with pytest.raises((TypeError, ValueError), match="min_copy_bytes"):
        bench.measure_roofline(matmul_shapes=((16, 128, 128),), copy_sizes=(2**16,), min_copy_bytes="8")


def test_one_table_of_measurements_within_the_page():
    probes = [probe(s, 50e9) for s in (MiB, 128 * MiB)]
    fit = bench.fit_roofline([MATMUL, *probes], min_copy_bytes=0)
    result = bench.RooflineMeasurement(
        platform="cpu",
        device_kind="cpu",
        chip=None,
        dtype="fp32",
        matmuls=(MATMUL,),
        copies=tuple(probes),
        fit=fit,
        wall_s=1.0,
    )
    table = bench.format_measurements(result)
    assert table.collapse  # 18 rows in the chapter: folded under a one-line summary
    assert table.column("measurement")[:2] == ["matmul B=512", "x + 1 1.05 MB"]
    assert table.column("memory")[1] == pytest.approx(probes[0].bytes_per_s) and table.column("rate")[1] is None
    assert "model ratio" not in [c.name for c in table.columns]  # no chip model on a CPU
    lines = table.text().splitlines()
    assert len(lines) == 1 + 3 + 3 + 1  # a caption, the header, units and rule, one row per measurement, a note
    assert all(len(line) <= 88 for line in lines)
    with pytest.raises(TypeError, match="RooflineMeasurement"):
        bench.format_measurements(fit)
