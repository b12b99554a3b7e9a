"""Chapter 7's teaching formulas are views of the one serving step model (tpu_notes.inference.engine), and the
largest batch is one arithmetic: each view is checked against the engine, or against the formula written out here
from the datasheet figures, on the chapters' cases (Llama 3 70B on 16 v5e chips in int8, Llama 3 8B on one H100)."""

from __future__ import annotations

import math

import pytest

from tpu_notes import inference as I
from tpu_notes.hardware import get_chip
from tpu_notes.inference import engine, formulas, serving, step
from tpu_notes.transformer import get_model

CASES = [  # (model, chip, chips, weight dtype, KV dtype)
    ("llama3-70b", "v5e", 16, "int8", "int8"),
    ("llama3-8b", "h100", 1, "bf16", "bf16"),
]
POINTS = [(1, 128), (8, 2048), (64, 8192)]


def test_names_are_importable_where_they_were():
    """The counts moved below the engine are the same objects wherever the chapters import them."""
    for name in ("machine", "Machine", "weight_params_read", "kv_bytes_per_token", "MAX_BATCH", "Batch"):
        assert getattr(step, name) is getattr(formulas, name)
    assert I.decode_attention is formulas.decode_attention is I.long_context.decode_attention
    assert I.slice_shapes is serving.slice_shapes is engine.slice_shapes
    assert I.machine is formulas.machine and I.COMPUTE_DTYPES is formulas.COMPUTE_DTYPES


@pytest.mark.parametrize("model, chip, n, wd, kd", CASES)
def test_decode_step_time_is_the_formula_on_the_datasheet(model, chip, n, wd, kd):
    """KV + max(weights, FLOPs), written out from the chip's datasheet and the model's counts."""
    m, c = get_model(model), get_chip(chip)
    per = {"bf16": 2, "int8": 1}
    for B, S in POINTS:
        s = I.decode_step_time(model, chip, n, B, S, weight_dtype=wd, kv_dtype=kd)
        kv = B * S * m.kv_bytes_per_token(kd) / (n * c.hbm_bw)
        w = formulas.weight_params_read(m, B) * per[wd] / (n * c.hbm_bw)
        f = 2.0 * B * m.matmul_params_per_token() / (n * c.peak_flops("bf16"))
        assert s.total == pytest.approx(kv + max(w, f), rel=1e-12)


@pytest.mark.parametrize("model, chip, n, wd, kd", CASES)
def test_the_views_are_the_engine(model, chip, n, wd, kd):
    """expected_decode_step and expected_prefill are the engine's steps; on one chip the engine's roofline is
    decode_step_time."""
    kw = dict(weight_dtype=wd, compute_dtype="bf16", reserve_fraction=0.0, check_memory=False)
    d = I.deploy(model, chip, n, kv_dtype=kd, **kw)
    d_prefill = I.deploy(model, chip, n, kv_dtype="bf16", **kw)  # expected_prefill's pricing deployment
    for B, S in POINTS:
        e = I.expected_decode_step(model, chip, n, B, S, weight_dtype=wd, kv_dtype=kd)
        assert e.total == d.step(B, B * S).total
        assert I.decode_step_time(model, chip, n, B, S, weight_dtype=wd, kv_dtype=kd).expected == e
        pf = I.prefill_time(model, chip, n, S, B, weight_dtype=wd)
        assert pf.expected == I.expected_prefill(model, chip, n, S, B, weight_dtype=wd)
        assert pf.expected == d_prefill.prefill_step(S, B).total
        if n == 1:
            assert d.step(B, B * S).roofline == pytest.approx(I.decode_step_time(model, chip, n, B, S).total)


@pytest.mark.parametrize("model, chip, n, wd, kd", CASES)
@pytest.mark.parametrize("reserve", [0.0, 0.1])
def test_one_max_batch(model, chip, n, wd, kd, reserve):
    """serving.max_batch, Deployment.max_batch and the memory formula floor((n·HBM·(1−r) − W) / (S·kv)) agree."""
    m, c = get_model(model), get_chip(chip)
    d = I.deploy(model, chip, n, weight_dtype=wd, kv_dtype=kd, reserve_fraction=reserve)
    free = n * c.hbm_bytes * (1.0 - reserve) - m.param_count() * {"bf16": 2, "int8": 1}[wd]
    for S in (128, 1000, 8192, 32768):
        b = I.max_batch(model, chip, n, S, weight_dtype=wd, kv_dtype=kd, reserve_fraction=reserve)
        assert b == d.max_batch(S) == math.floor(free / (S * m.kv_bytes_per_token(kd)))
