"""Physical sanity, as properties (hypothesis): whatever legal input the model is given, what it predicts could happen.

- a step is never faster than its compute roofline (FLOPs / peak) nor its memory roofline (bytes / bandwidth);
- MFU and HFU are in (0, 1], and MFU <= HFU (recompute only adds FLOPs);
- a chip holds at least its share of the weights: weights / the degree that shards them;
- throughput never beats the peak's bound (tokens/s <= chips x peak / FLOPs per token);
- the planner ranks only layouts whose degrees multiply to the chips, that divide the model, and that fit in HBM;
- the expected step (the efficiency model's forecast) is never faster than the roofline step, for every layout
  ``step_time`` accepts and every layout the planner ranks, and the throughput of a roofline step gives an MFU and
  an HFU (by ``training.mfu``/``hfu``) of at most 1;
- a served generation step is never faster than reading the weights it reads once over every chip's HBM;
- a collective takes at least its bandwidth and latency terms, and more bytes never take less time;
- a published run whose measured figure beats the roofline (beyond ``runs.ROOFLINE_TOLERANCE``) is refused.

Each property draws its inputs from the presets and the legal layouts (the planner's own candidates), so a failure
is a prediction no machine could produce, not bad input (that is tests/test_hostile_input.py's business).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, event, example, given, settings
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


#: The training setups the layout properties draw from: a model, a TPU, a slice size and a batch in sequences.
TRAINING_SETUPS = dict(
    model=st.sampled_from(TRAIN_MODELS),
    chip=st.sampled_from(TPU),
    n=st.sampled_from((16, 64)),
    batch_seqs=st.sampled_from((64, 256)),
)

_PLANS: dict = {}


def _plan(model: str, chip: str, n: int, batch_seqs: int):
    key = (model, chip, n, batch_seqs)
    if key not in _PLANS:
        seq = 512 if model.startswith("tiny") else 4096
        _PLANS[key] = (T.plan(model, _slice(chip, n), batch_seqs * seq, seq, max_pipeline=4, max_microbatches=8), seq)
    return _PLANS[key]


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(**TRAINING_SETUPS, pick=st.integers(0, 10**6))
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


# ---------------------------------------------------------------------------------------------------------------
# Every public figure of a legal call, not only the planner's picks
# ---------------------------------------------------------------------------------------------------------------
def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@st.composite
def _layouts(draw, n: int):
    """A Parallelism whose degrees multiply to ``n`` (legal or not for a given model: the call decides)."""
    tensor = draw(st.sampled_from(_divisors(n)))
    pipeline = draw(st.sampled_from(_divisors(n // tensor)))
    fsdp = draw(st.sampled_from(_divisors(n // tensor // pipeline)))
    data = n // tensor // pipeline // fsdp
    microbatches = pipeline * draw(st.sampled_from((1, 2))) if pipeline > 1 else 1
    return T.Parallelism(data=data, fsdp=fsdp, tensor=tensor, pipeline=pipeline, microbatches=microbatches)


def _legal_step(model, par, slc, batch_tokens, seq):
    """``step_time`` of a drawn layout, or None when the layout is refused (a refusal is the rules' business)."""
    try:
        return T.step_time(model, par, slc, batch_tokens, seq)
    except ValueError:
        return None


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(**TRAINING_SETUPS, data=st.data())
def test_every_legal_step_time_is_physical(model, chip, n, batch_seqs, data):
    """Any layout step_time accepts: the roofline step is no faster than its FLOPs or its weight reads, MFU and HFU
    are in (0, 1], the expected step is never faster than the roofline, and the throughput it implies gives an MFU
    (by ``training.mfu``) of at most 1."""
    par = data.draw(_layouts(n), label="parallelism")
    seq = 512 if model.startswith("tiny") else 4096
    step = _legal_step(model, par, _slice(chip, n), batch_seqs * seq, seq)
    event("refused" if step is None else "priced")
    if step is None:
        return
    assert math.isfinite(step.total) and step.total > 0
    assert step.total >= step.flops_time * (1 - 1e-9) and step.total >= step.hbm_time * (1 - 1e-9)
    assert 0 < step.mfu <= step.hfu * (1 + 1e-9) and step.hfu <= 1 + 1e-9, (par, step)
    assert step.expected is not None and step.expected.total >= step.total * (1 - 1e-9), (par, step)
    assert 0 < step.expected.mfu <= step.mfu * (1 + 1e-9)
    tokens_per_s = batch_seqs * seq / step.total
    assert 0 < T.mfu(model, tokens_per_s, chip, n) <= 1 + 1e-9
    assert 0 < T.hfu(model, tokens_per_s, chip, n, seq_len=seq) <= 1 + 1e-9


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    model=st.sampled_from(TRAIN_MODELS),
    n=st.sampled_from((16, 64)),
    batch_seqs=st.sampled_from((64, 256)),
    data=st.data(),
)
def test_training_memory_holds_at_least_the_weights_share(model, n, batch_seqs, data):
    """Any layout the step model accepts: the memory per chip holds at least the weights divided by every degree
    that shards them, and its total is at least its parts."""
    par = data.draw(_layouts(n), label="parallelism")
    seq = 512 if model.startswith("tiny") else 4096
    legal = _legal_step(model, par, _slice("v5p", n), batch_seqs * seq, seq) is not None
    event("priced" if legal else "refused")
    if not legal:
        return
    mem = T.training_memory(model, par, batch_seqs * seq, seq)
    cfg = get_model(model)
    shards = par.fsdp * par.tensor * par.pipeline * par.expert
    assert mem.params >= cfg.param_count() * 2.0 / shards * (1 - 1e-6), (par, mem)
    assert mem.total >= (mem.params + mem.grads + mem.optimizer) * (1 - 1e-9), (par, mem)
    assert all(math.isfinite(v) and v >= 0 for v in (mem.params, mem.grads, mem.optimizer, mem.activations))


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    model=st.sampled_from(TRAIN_MODELS),
    chip=st.sampled_from(TPU),
    n=st.sampled_from((16, 64)),
    batch_seqs=st.sampled_from((64, 256)),
)
def test_every_ranked_layout_expects_no_faster_than_its_roofline(model, chip, n, batch_seqs):
    """The planner's expected step (what it ranks by) is never faster than the same layout's roofline, and the
    expected MFU never above the roofline MFU."""
    result, _ = _plan(model, chip, n, batch_seqs)
    for p in result.ranked:
        assert p.expected is not None and p.expected.total >= p.step.total * (1 - 1e-9), p.parallelism
        assert 0 < p.expected.mfu <= p.step.mfu * (1 + 1e-9) and p.step.mfu <= 1 + 1e-9


@SETTINGS
@given(
    model=st.sampled_from(SERVE_MODELS),
    chip=st.sampled_from(TPU),
    n=st.sampled_from((4, 8, 16, 64)),
    batch=st.integers(1, 256),
    seq=st.integers(1, 32768),
)
def test_every_served_step_reads_its_weights_at_most_at_hbm_speed(model, chip, n, batch, seq):
    """A deployment's generation step, expected and roofline: never faster than reading the weights it reads once
    over every chip's HBM, and the expected step never faster than the roofline."""
    try:
        dep = I.deploy(model, chip, n)
        step = dep.decode_step(batch, seq)
    except ValueError:  # the chips cannot hold the model or the batch: refused, not priced
        event("refused")
        return
    event("priced")
    hw = get_chip(chip)
    weights_read = (I.weight_params_read(model, 1) - get_model(model).d_model) * 2.0  # bf16, one embedding row less
    floor = weights_read / (n * hw.hbm_bw)
    assert step.roofline >= floor * (1 - 1e-9), (model, chip, n, step)
    assert step.total >= step.roofline * (1 - 1e-9)
    assert math.isfinite(step.total) and step.tokens_per_s_per_chip > 0


@SETTINGS
@given(
    nbytes=st.floats(1.0, 1e12),
    factor=st.floats(1.0, 1e3),
    axis=st.integers(2, 64),
    n_axes=st.integers(1, 3),
    bw=st.floats(1e9, 1e12),
    kind=st.sampled_from(("all_gather", "reduce_scatter", "all_reduce", "all_to_all")),
)
def test_a_collective_is_no_faster_than_its_bandwidth_and_grows_with_its_bytes(nbytes, factor, axis, n_axes, bw, kind):
    """A collective over an axis of ``axis`` devices takes at least its bandwidth and latency terms, both finite,
    and more bytes never take less time."""
    from tpu_notes.collectives import collective_time

    small = collective_time(kind, nbytes, axis, bw, n_axes=n_axes)
    big = collective_time(kind, nbytes * factor, axis, bw, n_axes=n_axes)
    for t in (small, big):
        assert math.isfinite(t.total) and t.total >= max(t.bandwidth_time, t.latency_time) * (1 - 1e-12) > 0
    assert big.total >= small.total * (1 - 1e-12)
