"""Physical sanity, as properties (hypothesis): whatever legal input the model is given, what it predicts could happen.

- a step is never faster than its compute roofline (FLOPs / peak) nor its memory roofline (bytes / bandwidth);
- MFU and HFU are in (0, 1], and MFU <= HFU (recompute only adds FLOPs);
- a chip holds at least its share of the weights: weights / the degree that shards them;
- throughput never beats the peak's bound (tokens/s <= chips x peak / FLOPs per token);
- the planner ranks only layouts whose degrees multiply to the chips, that divide the model, and that fit in HBM;
- a published run whose measured figure beats the roofline (beyond ``runs.ROOFLINE_TOLERANCE``) is refused.

Each property draws its inputs from the presets and the legal layouts (the planner's own candidates), so a failure
is a prediction no machine could produce, not bad input (that is tests/test_hostile_input.py's business).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tpu_notes import inference as I
from tpu_notes import training as T
from tpu_notes.hardware import get_chip
from tpu_notes.inference import published as IP
from tpu_notes.roofline import roofline
from tpu_notes.runs import ROOFLINE_TOLERANCE
from tpu_notes.topology import Slice
from tpu_notes.training import published as TP
from tpu_notes.transformer import get_model

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
TPU = ("v4", "v5e", "v5p", "v6e")
TRAIN_MODELS = ("llama3-8b", "llama3-70b", "tiny-gqa", "tiny-moe")
SERVE_MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "tiny-gqa")


@SETTINGS
@given(flops=st.floats(1.0, 1e20), nbytes=st.floats(1.0, 1e15), peak=st.floats(1e9, 1e16), bw=st.floats(1e6, 1e13))
def test_a_roofline_is_never_faster_than_either_bound(flops, nbytes, peak, bw):
    r = roofline(flops, nbytes, peak, bw)
    assert r.lower >= flops / peak * (1 - 1e-12) and r.lower >= nbytes / bw * (1 - 1e-12)
    assert r.upper >= r.lower and r.upper <= 2 * r.lower * (1 + 1e-12)


def _slice(chip: str, n: int) -> Slice:
    shape = (
        {16: (4, 4), 64: (8, 8), 256: (16, 16)}[n]
        if chip in ("v5e", "v6e")
        else {16: (2, 2, 4), 64: (4, 4, 4), 256: (4, 8, 8)}[n]
    )
    return Slice(chip, shape)


_PLANS: dict = {}


def _plan(model: str, chip: str, n: int, batch_seqs: int):
    key = (model, chip, n, batch_seqs)
    if key not in _PLANS:
        seq = 512 if model.startswith("tiny") else 4096
        _PLANS[key] = (T.plan(model, _slice(chip, n), batch_seqs * seq, seq, max_pipeline=4, max_microbatches=8), seq)
    return _PLANS[key]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    model=st.sampled_from(TRAIN_MODELS),
    chip=st.sampled_from(TPU),
    n=st.sampled_from((16, 64)),
    batch_seqs=st.sampled_from((64, 256)),
    pick=st.integers(0, 10**6),
)
@example(model="tiny-moe", chip="v4", n=16, batch_seqs=64, pick=0)  # 3 layers on 2 stages: uneven, legal
def test_every_ranked_training_layout_is_physical(model, chip, n, batch_seqs, pick):
    result, seq = _plan(model, chip, n, batch_seqs)
    if not result.ranked:
        return
    cfg, hw = get_model(model), get_chip(chip)
    for p in result.ranked:  # the planner ranks only what can run
        par = p.parallelism
        assert par.data * par.fsdp * par.context * par.tensor * par.pipeline * par.expert == n, par
        assert par.pipeline * p.circular_repeats <= cfg.n_layers  # stages hold whole layers (maybe unevenly)
        assert cfg.n_heads % par.tensor == 0 and cfg.d_ff % par.tensor == 0 and seq % par.context == 0
        assert p.memory.total <= p.memory.peak <= hw.hbm_bytes, (par, p.memory)
    plan = result.ranked[pick % len(result.ranked)]
    step, par = plan.step, plan.parallelism
    assert step.total >= step.flops_time * (1 - 1e-9) and step.total >= step.hbm_time * (1 - 1e-9)
    assert 0 < step.mfu <= step.hfu * (1 + 1e-9) and step.hfu <= 1 + 1e-9
    weight_shards = par.fsdp * par.tensor * par.pipeline * par.expert  # the most any weight is split
    assert plan.memory.params >= cfg.param_count() * 2.0 / weight_shards * (1 - 1e-6), (par, plan.memory)
    tokens_per_s = batch_seqs * seq / step.total  # training: at least 6 FLOPs per matmul parameter per token
    assert tokens_per_s <= n * hw.peak_flops("bf16") / (6 * cfg.matmul_params_per_token()) * (1 + 1e-6)


@SETTINGS
@given(
    model=st.sampled_from(SERVE_MODELS),
    chip=st.sampled_from(TPU),
    n=st.sampled_from((1, 4, 8, 16, 64)),
    batch=st.integers(1, 512),
    seq=st.integers(1, 32768),
)
def test_every_decode_step_is_physical(model, chip, n, batch, seq):
    s = I.decode_step_time(model, chip, n, batch, seq)
    hw = get_chip(chip)
    assert s.total >= s.weight_load * (1 - 1e-12) and s.total >= s.flops_time * (1 - 1e-12)
    assert s.weight_load >= s.weight_bytes / (n * hw.hbm_bw) * (1 - 1e-9)
    assert s.flops_time >= s.flops / (n * hw.peak_flops("bf16")) * (1 - 1e-9)
    # one token per sequence per step: never more tokens than the peak can compute
    cfg = get_model(model)
    assert s.tokens_per_s <= n * hw.peak_flops("bf16") / (2 * cfg.matmul_params_per_token()) * (1 + 1e-6)
    assert s.memory_per_chip * n >= cfg.param_count() * 2.0 * (1 - 1e-9)
    assert math.isfinite(s.total) and s.total > 0


def _faster(run, factor: float):
    """``run`` with its measured figure ``factor`` x faster (a speed multiplied, a latency divided)."""
    field = run.measured_field
    value = getattr(run, field)
    return dataclasses.replace(
        run, **{field: value / factor if field.endswith("_s") and "per_s" not in field else value * factor}
    )


@SETTINGS
@given(index=st.integers(0, 10**6), factor=st.floats(1.0, 1e6), serving=st.booleans())
def test_a_published_run_faster_than_the_roofline_is_refused(index, factor, serving):
    runs = IP.RUNS if serving else TP.RUNS
    run = runs[index % len(runs)]
    ratio = (IP.predict(run) if serving else TP.predict(run)).ratio * factor
    if ratio <= ROOFLINE_TOLERANCE:
        assert _faster(run, factor).measured_field == run.measured_field  # accepted: still physical
        return
    with pytest.raises(ValueError, match=run.measured_field):
        _faster(run, factor)
