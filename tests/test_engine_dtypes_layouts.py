"""Issue 38's engine: compute dtypes as engines run them, weight-only dequantisation, the GEMM tile model's
matmul fraction, eager-prefill launches and the sequence-parallel prefill layout."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tpu_notes import gemm
from tpu_notes.efficiency import DEFAULT as EFF
from tpu_notes.gpu import GpuCluster
from tpu_notes.hardware import get_chip
from tpu_notes.inference import deploy
from tpu_notes.inference.engine import (
    DEQUANT_OPS,
    best_prefill_sharding,
    resolve_compute_dtype,
    vector_rate,
)
from tpu_notes.transformer import get_model


# ------------------------------------------------------------------------------------------ compute dtypes
@pytest.mark.parametrize(
    "chip, weights, want",
    [("h100", "fp8", "fp8"), ("h200", "fp8", "fp8"), ("b200", "fp8", "fp8"), ("v5e", "int8", "int8"),
     ("v6e", "int8", "int8"), ("h100", "int8", "int8"), ("v5e", "fp8", "bf16"), ("v5e", "int4", "bf16"),
     ("h100", "bf16", "bf16"), ("a100", "fp8", "bf16")],
)  # fmt: skip
def test_default_compute_dtype_is_the_weight_dtype_where_the_chip_has_its_peak(chip, weights, want):
    c = get_chip(chip)
    has_peak = {"bf16": c.bf16_flops, "int8": c.int8_flops, "fp8": c.fp8_flops}.get(weights)
    assert (want == weights) == bool(has_peak)  # the table above agrees with the chip records
    assert resolve_compute_dtype(chip, weights) == want


@pytest.mark.parametrize("chip, dtype", [("v5e", "fp8"), ("v6e", "fp8"), ("a100", "fp8"), ("tpu7x", "fp8")])
def test_a_compute_dtype_the_chip_lacks_is_refused_with_its_dtypes(chip, dtype):
    c = get_chip(chip)
    with pytest.raises(ValueError, match="compute_dtype") as err:
        deploy("llama3-8b", chip, 8 if c.kind == "gpu" else 8, weight_dtype="int8", compute_dtype=dtype)
    msg = str(err.value)
    assert c.long_name in msg and "bf16" in msg and f"'{dtype}'" in msg


def test_fp8_matmuls_are_faster_than_bf16_on_h100_and_refused_on_v5e():
    fp8 = deploy("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8")
    bf16 = deploy("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="bf16")
    assert fp8.compute_dtype == "fp8" and not fp8.weight_only
    a, b = fp8.prefill_step(4096), bf16.prefill_step(4096)
    # FP8 matmuls run at the FP8 sweep's plateau: faster than bf16 by at most the datasheet ratio (2x)
    ratio = b.matmul / a.matmul
    g = gemm.DEFAULT
    bound = get_chip("h100").peak_flops("fp8") / get_chip("h100").peak_flops("bf16")
    assert 1.0 < ratio <= bound * 1.0001
    assert ratio == pytest.approx(bound * g.plateau_of("h100", "fp8") / g.plateau_of("h100"), rel=0.1)
    assert a.total < b.total
    with pytest.raises(ValueError, match="compute_dtype"):
        deploy("llama3-70b", "v5e", 16, weight_dtype="int8", compute_dtype="fp8")


# ------------------------------------------------------------------------------------------ dequantisation
@pytest.mark.parametrize(
    "chip, n, weights, compute, weight_only",
    [("v5e", 16, "fp8", None, True), ("v5e", 16, "int8", None, False), ("v5e", 16, "int8", "bf16", True),
     ("h100", 8, "fp8", None, False), ("h100", 8, "int4", None, True), ("h100", 8, "bf16", None, False),
     ("v5e", 16, "bf16", None, False)],
)  # fmt: skip
def test_the_dequant_part_appears_only_for_weight_only_dtypes(chip, n, weights, compute, weight_only):
    d = deploy("llama3-70b", chip, n, weight_dtype=weights, compute_dtype=compute, check_memory=False)
    s = d.decode_step(8, 1024, allow_unfit=True)
    assert d.weight_only is weight_only
    assert (s.dequant > 0) is weight_only
    if weight_only:
        # every weight the step reads widened once on the vector units of its device: derived from the records
        c = get_chip(chip)
        if c.kind == "gpu":
            rate = c.fp32_flops
        else:
            rate = c.cores_per_chip * 8 * 128 * (c.vpu_alus_per_lane or 4) * c.clock_hz
        assert rate == vector_rate(chip)
        read = s.weights * d.efficiency.hbm * n * c.hbm_bw / {"fp8": 1, "int8": 1, "int4": 0.5}[weights]
        assert s.dequant == pytest.approx(read * DEQUANT_OPS[weights] / (n * rate), rel=1e-9)
        assert s.total == pytest.approx(
            s.kv + max(s.weights, s.dequant, s.matmul + s.attention + s.elementwise) + s.collectives + s.overhead
        )  # a pipelined kernel widens one tile while the next loads: the widening overlaps the stream


def test_weight_only_int8_gains_no_more_than_int8_matmuls():
    """Chapter 8 §8.7: JetStream's int8 Llama 3 8B rows gain 1.32x over bf16, not the halved bytes' 2x: the step's
    fixed parts (overhead, collectives) do not shrink with the bytes. Widening the weights overlaps their stream, so
    weight-only int8 gains at most what int8 matmuls (v5e has their peak) gain."""
    bf16 = deploy("llama3-8b", "v5e", 8).decode_step(8, 2048).total
    wo = deploy("llama3-8b", "v5e", 8, weight_dtype="int8", kv_dtype="int8", compute_dtype="bf16")
    i8 = deploy("llama3-8b", "v5e", 8, weight_dtype="int8", kv_dtype="int8")
    assert 1.0 < bf16 / wo.decode_step(8, 2048).total <= bf16 / i8.decode_step(8, 2048).total < 2.0


def test_the_widening_bites_only_when_it_outlasts_the_stream():
    """int4 weights on an A100 at batch 1: four vector operations per weight on the CUDA cores take longer than
    streaming half a byte per weight, so the step's max term is the widening (and the step is that much longer
    than the stream alone would make it)."""
    d = deploy("llama2-7b", "a100", 1, weight_dtype="int4")
    s = d.decode_step(1, 512)
    assert d.weight_only and s.dequant > s.weights > 0
    assert s.matmul_bound == "dequant"
    assert s.total == pytest.approx(s.kv + s.dequant + s.collectives + s.overhead)


# ------------------------------------------------------------------------------------------ the matmul fraction
def test_the_matmul_fraction_follows_the_gemm_tile_model():
    d = deploy("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8")
    f = {rows: d._matmul_fraction(rows) for rows in (1, 8, 64, 65536)}
    cap = EFF.large_matmul("h100") * EFF.sustained_fraction("h100")
    cap *= gemm.DEFAULT.plateau_of("h100", "fp8") / gemm.DEFAULT.plateau_of("h100")
    assert all(0 < v <= cap * (1 + 1e-9) for v in f.values())
    assert f[1] < f[8] < f[64] <= f[65536]  # a thin matmul pads its tiles and splits k: a small share of the array


def test_a_short_prefill_pays_its_kernel_launches_on_a_gpu_only():
    m = get_model("llama3-70b")
    gpu = deploy(m, "h100", 8, weight_dtype="fp8", kv_dtype="fp8")
    p, dstep = gpu.prefill_step(128), gpu.decode_step(1, 128)
    launches = (10 + 2) * m.n_layers * gemm.DEFAULT.fixed_of("h100")  # eager kernels, the GEMM model's fixed cost
    assert p.overhead - dstep.overhead == pytest.approx(launches)
    tpu = deploy(m, "v5e", 16, weight_dtype="int8", kv_dtype="int8")
    assert tpu.prefill_step(128).overhead == tpu.decode_step(1, 128).overhead


# ------------------------------------------------------------------------------------------ prefill layouts
def _pair(system, n=None, **kw):
    t = deploy("llama3-70b", system, n, prefill_sharding="tensor", check_memory=False, **kw)
    s = deploy("llama3-70b", system, n, prefill_sharding="sequence", check_memory=False, **kw)
    return t, s


@pytest.mark.parametrize("layout", ["tensor", "sequence"])
@pytest.mark.parametrize("system, n", [("v5e", 16), ("h100", 8)])
def test_seconds_equals_the_checked_step_for_both_layouts(layout, system, n):
    d = deploy("llama3-70b", system, n, weight_dtype="int8", kv_dtype="int8", prefill_sharding=layout)
    assert d.prefill_sharding == layout
    for args in [(32, 32 * 4096, 0, 0.0, 0), (0, 0, 8192, 8192 * 8193 / 2, 0), (16, 16 * 2048, 512, 512 * 1000.0, 700),
                 (1, 1, 1, 1.0, 0)]:  # fmt: skip
        assert d._seconds(*args) == pytest.approx(d.step(*args).total, rel=1e-12)


def test_decode_steps_do_not_depend_on_the_prefill_layout():
    t, s = _pair("v5e", 32, weight_dtype="int8", kv_dtype="int8")
    assert t.decode_step(64, 8192).total == s.decode_step(64, 8192).total


def test_sequence_prefill_wins_long_prompts_on_a_large_replica_and_loses_short_ones():
    """Tensor parallelism pays its activation AllReduces per token (exposed on a GPU: the next matmul waits);
    sequence parallelism gathers the weights once per step. The gather's whole time ``G`` and the AllReduces'
    time per token ``r`` come from the system's collective formulas here, not from the engine: past ``2G / r``
    tokens the gather (at worst all exposed) costs less than the AllReduces; at 128 tokens the AllReduces cost
    less than the gather left after the prompt's compute."""
    system = GpuCluster("h100", 8)
    m = get_model("llama3-70b")
    t, s = _pair(system, weight_dtype="fp8", kv_dtype="fp8")
    link = EFF.link("nvlink")
    G = system.collective_time("all_gather", m.param_count() * 1.0).bandwidth_time / link
    row = 2.0 * m.d_model  # bf16 activations per token
    r = 2 * m.n_layers * system.collective_time("all_reduce", row * 1e6).bandwidth_time / 1e6 / link
    long = int(2 * G / r) + 1
    assert s.prefill_step(long).total < t.prefill_step(long).total
    assert best_prefill_sharding(t, long) == "sequence"
    short = 128
    assert r * short < G  # the AllReduces of a short prompt are cheaper than one weight gather
    assert t.prefill_step(short).total < s.prefill_step(short).total
    assert best_prefill_sharding(s, short) == "tensor"


def test_best_prefill_sharding_refuses_a_non_deployment():
    with pytest.raises(TypeError, match="deployment"):
        best_prefill_sharding("v5e", 1024)
    with pytest.raises(ValueError, match="prefill_sharding"):
        deploy("llama3-70b", "v5e", 16, weight_dtype="int8", prefill_sharding="pipeline")


# ------------------------------------------------------------------------------------------ the CLI
def _serve(*args):
    return subprocess.run(
        [sys.executable, "-m", "tpu_notes", "serve", "--model", "llama3-70b", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_serve_prints_the_compute_dtype_and_its_json_step_is_the_expected_one():
    out = _serve("--system", "h100", "--chips", "8", "--batch", "64", "--context", "2048", "--weights", "fp8")
    assert out.returncode == 0, out.stderr
    assert "fp8 matmuls" in out.stdout.splitlines()[0]
    wo = _serve("--system", "v5e", "--chips", "16", "--batch", "8", "--context", "2048", "--weights", "fp8")
    assert "bf16 matmuls" in wo.stdout.splitlines()[0] and "weight-only" in wo.stdout.splitlines()[0]
    js = _serve("--system", "v5e", "--chips", "16", "--batch", "8", "--context", "2048", "--weights", "int8", "--json")
    data = json.loads(js.stdout)
    assert data["step_s"] == data["step_s_expected"] != data["step_s_roofline"]
    assert data["compute_dtype"] == "int8" and data["weight_only"] is False
    bad = _serve("--system", "v5e", "--chips", "16", "--batch", "8", "--context", "2048", "--compute", "fp8")
    assert bad.returncode != 0 and "--compute" in bad.stderr and "TPU v5e" in bad.stderr
