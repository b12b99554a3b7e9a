"""Serving cost as a buyer sees it, speculative decoding at its real verify cost, the deployment search and the
``serve`` subcommand, all on the one serving step model (:mod:`tpu_notes.inference.engine`; issue 24)."""

from __future__ import annotations

import json

import matplotlib
import pytest

matplotlib.use("Agg")

from tpu_notes import collectives, inference  # noqa: E402
from tpu_notes.__main__ import main  # noqa: E402
from tpu_notes.hardware import get_chip, source  # noqa: E402
from tpu_notes.inference import speculative as spec  # noqa: E402
from tpu_notes.inference.cost import EXACT_STEPS, ServingCost, serving_cost  # noqa: E402
from tpu_notes.inference.engine import EngineStep, deploy  # noqa: E402
from tpu_notes.transformer import get_model  # noqa: E402

# Chapter 8's workload and deployment: Llama 3 70B with int8 weights and caches on a v5e 4x4 at batch 96
# (notebooks/08_serving_llama3.ipynb, section 8.9), 8192-token prompts and 512 generated tokens (exercise 8.11).
M70, PROMPT, OUTPUT, BATCH = "llama3-70b", 8192, 512, 96
INT8 = dict(weight_dtype="int8", kv_dtype="int8")


@pytest.fixture(scope="module")
def d16():
    return deploy(M70, "v5e", 16, **INT8)


@pytest.fixture(scope="module")
def d32():
    return deploy(M70, "v5e", 32, **INT8)


# ------------------------------------------------------------------------------------------------ the cost sheet
def _by_hand(d, prompt, output, batch, price, utilisation=1.0):
    """Chip-seconds of a request recomputed from the engine's checked steps, one decode step per output token."""
    pre = d.prefill_step(prompt).total * d.n_chips  # one prompt per prefill step: chip-seconds of one prompt
    dec = sum(d.step(batch, batch * (prompt + i)).total for i in range(1, output + 1)) * d.n_chips / batch
    per_s = price / 3600.0 / utilisation
    return pre, dec, per_s


def test_input_and_output_prices_are_the_engine_steps_priced(d16):
    c = serving_cost(d16, PROMPT, OUTPUT, BATCH)
    pre, dec, per_s = _by_hand(d16, PROMPT, OUTPUT, BATCH, 1.2)
    assert c.dollars_per_million_input == pytest.approx(1e6 * pre / PROMPT * per_s, rel=1e-12)
    assert c.dollars_per_million_output == pytest.approx(1e6 * dec / OUTPUT * per_s, rel=1e-12)
    assert c.dollars_per_request == pytest.approx((pre + dec) * per_s, rel=1e-12)
    assert c.prefill.total == d16.prefill_step(PROMPT).total
    assert c.decode_first.total == d16.step(BATCH, BATCH * (PROMPT + 1)).total
    assert c.decode_last.total == d16.step(BATCH, BATCH * (PROMPT + OUTPUT)).total
    assert c.decode_first.total < c.decode_step_s < c.decode_last.total  # the mean lies between the ends


def test_prefill_is_most_of_the_bill_on_chapter_8s_workload(d16):
    """An 8k prompt costs a whole 8k-row prefill; 512 output tokens cost 512 steps shared by 96 sequences. The
    share is the prefill's chip-seconds over the request's, recomputed here from the engine's steps; the old
    generated-tokens-only price leaves all of it out."""
    c = serving_cost(d16, PROMPT, OUTPUT, BATCH)
    pre, dec, _ = _by_hand(d16, PROMPT, OUTPUT, BATCH, 1.2)
    assert c.prefill_share == pytest.approx(pre / (pre + dec), rel=1e-12)
    assert c.prefill_share > 0.5  # most of the bill: the number the issue says the old sheet leaves out
    old = inference.cost_per_million_tokens(d16.step(BATCH, BATCH * PROMPT), chip="v5e")  # output-only, at 8k
    assert c.dollars_per_request > OUTPUT * old / 1e6 * 2  # the old figure understates a request more than 2x


def test_long_outputs_use_an_exact_rule(d16):
    """Past EXACT_STEPS the mean comes from the trapezoid rule, exact for a step affine in the context: it equals
    the mean of the two end steps computed by hand."""
    G = EXACT_STEPS + 1000
    c = serving_cost(d16, 1024, G, 8)
    ends = (d16.step(8, 8 * 1025).total + d16.step(8, 8 * (1024 + G)).total) / 2
    assert c.decode_step_s == pytest.approx(ends, rel=1e-9)


def test_a_batch_that_does_not_fit_has_no_price(d16):
    top = d16.max_batch(PROMPT + OUTPUT)
    assert serving_cost(d16, PROMPT, OUTPUT, top).batch == top
    with pytest.raises(ValueError, match=rf"batch={top + 1}.*largest batch that fits is {top}"):
        serving_cost(d16, PROMPT, OUTPUT, top + 1)
    with pytest.raises(ValueError, match="prefill_batch"):
        serving_cost(d16, PROMPT, OUTPUT, 8, prefill_batch=d16.max_batch(PROMPT) + 1)


def test_utilisation_scales_every_price(d16):
    full = serving_cost(d16, PROMPT, OUTPUT, BATCH)
    half = serving_cost(d16, PROMPT, OUTPUT, BATCH, utilisation=0.5)
    assert full.utilisation == 1.0  # the stated default: busy all the time, a price floor
    for name in ("dollars_per_million_input", "dollars_per_million_output", "dollars_per_request"):
        assert getattr(half, name) == pytest.approx(2 * getattr(full, name))
    assert half.prefill_share == pytest.approx(full.prefill_share)


def test_the_price_and_where_it_came_from(d16):
    c = serving_cost(d16, PROMPT, OUTPUT, BATCH)
    assert c.dollars_per_chip_hour == get_chip("v5e").dollars_per_hour
    assert c.price_source == source("v5e", "dollars_per_hour") and c.source == "engine steps"
    given = serving_cost(d16, PROMPT, OUTPUT, BATCH, dollars_per_chip_hour=2.4)
    assert given.price_source == "given"
    assert given.dollars_per_million_output == pytest.approx(2 * c.dollars_per_million_output)
    unpriced = deploy("llama3-8b", "v6e", 4)
    assert get_chip("v6e").dollars_per_hour is None
    with pytest.raises(ValueError, match="dollars_per_chip_hour"):
        serving_cost(unpriced, 1024, 128, 8)
    with pytest.raises(TypeError, match="deployment"):
        serving_cost("llama3-8b", 1024, 128, 8)
    assert "per request" in repr(c) and "prefill" in repr(c)


def test_a_simulation_can_fill_the_record():
    """The record holds figures, not methods that recompute them: built from measured chip-seconds, no steps."""
    c = ServingCost(
        dollars_per_million_input=0.1,
        dollars_per_million_output=1.0,
        dollars_per_request=0.001,
        prefill_share=0.5,
        utilisation=0.7,
        dollars_per_chip_hour=1.2,
        price_source="given",
        prompt_len=1024,
        output_len=256,
        batch=16,
        prefill_batch=1,
        n_chips=16,
        chip_seconds_per_input_token=3e-4,
        chip_seconds_per_output_token=3e-3,
        prefill_step_s=0.1,
        decode_step_s=0.02,
        source="simulation",
    )
    assert c.prefill is None and "simulation" in repr(c)


# ------------------------------------------------------------------------------------------------ speculative
def test_verify_cost_is_the_ratio_of_two_engine_steps_and_grows_with_batch(d32):
    k = 4
    rows = spec.speculative_vs_batch(d32, PROMPT, k, 0.8, (1, 8, 32, 128))
    for r in rows:
        B = r.batch
        verify = d32.step(B, B * PROMPT, B * k, B * k * (k + 1) / 2)
        assert r.verify_cost == pytest.approx(verify.total / d32.step(B, B * PROMPT).total, rel=1e-12)
    costs = [r.verify_cost for r in rows]
    assert costs == sorted(costs) and costs[0] == pytest.approx(1.0, abs=0.01) and costs[-1] > 1.5
    assert all(c < k + 1 for c in costs)  # never more than k + 1 plain steps


def test_speculation_stops_paying_at_large_batch(d32):
    small = spec.speculative_decoding(d32, 1, PROMPT, 4, 0.5, draft_cost=0.05)
    large = spec.speculative_decoding(d32, 128, PROMPT, 4, 0.5, draft_cost=0.05)
    assert small.pays and not large.pays and large.speedup < 1.0
    # the old fixed-cost formula is the small-batch limit, and overstates the large batch
    assert spec.speculative_speedup(0.5, 4, 0.05) == pytest.approx(small.speedup, rel=0.01)
    assert spec.speculative_speedup(0.5, 4, 0.05) > 1.5 * large.speedup


def test_the_draft_is_priced_on_its_own_deployment(d16):
    draft = deploy("llama3-8b", "v5e", 16, **INT8)
    r = spec.speculative_decoding(d16, 32, PROMPT, 4, 0.8, draft=draft)
    assert r.draft_cost == pytest.approx(draft.step(32, 32 * PROMPT).total / d16.step(32, 32 * PROMPT).total)
    assert r.speedup == pytest.approx(r.tokens_per_round / (4 * r.draft_cost + r.verify_cost))
    assert r.round_s == pytest.approx(4 * r.draft_step.total + r.verify_step.total)
    with pytest.raises(ValueError, match="not both"):
        spec.speculative_decoding(d16, 32, PROMPT, 4, 0.8, draft=draft, draft_cost=0.1)
    with pytest.raises(ValueError, match="batch="):
        spec.speculative_decoding(d16, d16.max_batch(PROMPT) + 1, PROMPT, 4, 0.8)
    with pytest.raises(TypeError, match="draft"):
        spec.speculative_decoding(d16, 32, PROMPT, 4, 0.8, draft=8)


def test_best_k_wants_fewer_drafts_at_large_batch(d32):
    one = spec.best_k_at_batch(d32, 1, PROMPT, 0.8, draft_cost=0.02)
    many = spec.best_k_at_batch(d32, 256, PROMPT, 0.8, draft_cost=0.02)
    assert many.k < one.k
    for k in range(1, 17):
        assert spec.speculative_decoding(d32, 256, PROMPT, k, 0.8, draft_cost=0.02).speedup <= many.speedup


def test_speculative_batch_chart_draws_each_acceptance_and_the_line_at_one():
    import matplotlib.pyplot as plt

    from tpu_notes.plots.inference import speculative_batch_chart, speculative_speedup_chart

    fig = speculative_batch_chart(acceptances=(0.5, 0.9), batches=(1, 4, 16, 64))
    left, right = fig.axes
    assert len(right.lines) == 2 + 1 and any(list(line.get_ydata()) == [1.0, 1.0] for line in right.lines)
    assert fig.get_figwidth() <= 7.2 + 1e-9
    old = speculative_speedup_chart(draft_costs=(0.1,), verify_cost=1.5)
    assert len(old.axes[0].lines) == 4 + 1
    plt.close(fig)
    plt.close(old)


# ------------------------------------------------------------------------------------------------ the sharded step
@pytest.mark.parametrize(
    "model, n", [("llama3-70b", 16), ("llama3-70b", 32), ("llama3-70b", 8), ("llama3-8b", 8), ("llama3-8b", 1)]
)
def test_kv_all_to_alls_are_there_iff_kv_sharding_says_so(model, n):
    m = get_model(model)
    s = inference.sharded_step_time(m, "v5e", n, 32, 4096, **INT8)
    per_layer = inference.kv_sharding(m, n).all_to_alls if n > 1 else 0
    assert s.all_to_alls == per_layer
    if per_layer:
        from tpu_notes.inference.deployment import axis_sizes

        one = collectives.all_to_all_time(32 * m.d_model * 2, axis_sizes(n, 2), get_chip("v5e").ici_bw_bidi)
        assert s.kv_all_to_all == pytest.approx(m.n_layers * per_layer * one.total, rel=1e-12) and one.total > 0
    else:
        assert s.kv_all_to_all == 0.0
    assert s.total == pytest.approx(s.step.total + s.comms_bandwidth + s.comms_latency + s.kv_all_to_all)


def test_the_sharded_step_carries_the_engines_step():
    s = inference.sharded_step_time(M70, "v5e", 16, 64, 8192, **INT8)
    e = deploy(M70, "v5e", 16, **INT8).step(64, 64 * 8192)
    assert isinstance(s.expected, EngineStep) and s.expected.total == pytest.approx(e.total, rel=1e-12)
    assert s.fits and s.expected.fits
    big = inference.sharded_step_time(M70, "v5e", 8, 256, 8192, **INT8)  # priced, marked, not refused
    assert not big.fits and not big.expected.fits and "does NOT fit" in repr(big)


@pytest.mark.parametrize("rank_by", ["expected", "roofline"])
def test_best_deployment_never_returns_an_unfit_point(rank_by):
    kw = dict(chip_counts=(8, 16, 32), batches=(64, 128, 256, 512), rank_by=rank_by, **INT8)
    best = inference.best_deployment(M70, "v5e", 8192, 10.0, **kw)  # no latency limit to speak of
    assert best is not None and best.fits and best.step.fits and best.expected.fits
    for n in (8, 16, 32):
        for b in (64, 128, 256, 512):
            s = inference.sharded_step_time(M70, "v5e", n, b, 8192, **INT8)
            rate = (s.expected if rank_by == "expected" else s).tokens_per_s_per_chip
            if s.fits:
                assert rate <= (best.expected if rank_by == "expected" else best).tokens_per_s_per_chip
    with pytest.raises(ValueError, match="rank_by"):
        inference.best_deployment(M70, "v5e", 8192, 0.02, rank_by="fastest")


# ------------------------------------------------------------------------------------------------ serving.py
def test_throughput_per_chip_refuses_a_batch_that_does_not_fit():
    top = inference.max_batch(M70, "v5e", 16, 8192, **INT8)
    assert inference.throughput_per_chip(M70, "v5e", 16, top, 8192, **INT8) > 0
    with pytest.raises(ValueError, match=rf"batch={top + 1}.*largest batch that fits is {top}"):
        inference.throughput_per_chip(M70, "v5e", 16, top + 1, 8192, **INT8)
    assert inference.throughput_per_chip(M70, "v5e", 16, top + 1, 8192, allow_unfit=True, **INT8) > 0
    with pytest.raises(ValueError, match="not one sequence fits"):
        inference.throughput_per_chip(M70, "v5e", 4, 1, 8192, **INT8)
    unfit = inference.decode_step_time(M70, "v5e", 16, top + 1, 8192, **INT8)
    with pytest.raises(ValueError, match="do not fit"):
        inference.cost_per_million_tokens(unfit, chip="v5e")


def test_the_frontier_can_be_the_engines():
    steps = inference.latency_throughput_curve(M70, "v5e", 16, 8192, [1, 8, 64, 256], fitting_only=True,
                                               expected=True, **INT8)  # fmt: skip
    d = deploy(M70, "v5e", 16, **INT8)
    assert [s.decode for s in steps] == [1, 8, 64]  # 256 does not fit the pool
    assert all(isinstance(s, EngineStep) and s.total == d.step(s.decode, s.decode * 8192).total for s in steps)
    old = inference.latency_throughput_curve(M70, "v5e", 16, 8192, [1, 8, 64], fitting_only=True, **INT8)
    front = inference.pareto_frontier(list(steps) + list(old))
    assert front and all(s.fits for s in front)
    with pytest.raises(TypeError, match="EngineStep"):
        inference.pareto_frontier([1.0])


# ------------------------------------------------------------------------------------------------ the CLI
SERVE = ["serve", "--model", M70, "--chip", "v5e", "--batch", "64", "--context", "8192", "--weights", "int8"]


def test_serve_prints_no_price_for_a_setup_that_does_not_fit(capsys):
    assert main([*SERVE, "--chips", "4"]) == 0
    out = capsys.readouterr().out
    assert "$" not in out and "does NOT fit" in out and "needs at least v5e 4x4 (16 chips)" in out
    assert main([*SERVE, "--chips", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["fits"] is False and data["no_price_reason"] == "does not fit"
    assert data["dollars_per_million_input"] is None and data["dollars_per_request"] is None


def test_serve_prices_input_output_and_a_request(capsys):
    assert main([*SERVE, "--prompt", "8192", "--output", "512", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    d = deploy(M70, "v5e", 16, **INT8)
    c = serving_cost(d, 8192, 512, 64)
    assert data["n_chips"] == 16 and data["fits"] is True
    for key in ("dollars_per_million_input", "dollars_per_million_output", "dollars_per_request", "prefill_share"):
        assert data[key] == pytest.approx(getattr(c, key))
    assert data["step_s_expected"] == pytest.approx(d.step(64, 64 * 8192).total)
    assert main(SERVE) == 0
    out = capsys.readouterr().out
    assert f"${c.dollars_per_million_input:.3g} per million input tokens" in out
    assert f"${c.dollars_per_request:.3g} per request" in out


def test_serve_prices_speculative_decoding_at_the_real_verify_cost(capsys):
    assert main([*SERVE, "--speculate", "4", "--acceptance", "0.8", "--draft-cost", "0.05", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["speculative"]
    r = spec.speculative_decoding(deploy(M70, "v5e", 16, **INT8), 64, 8192, 4, 0.8, draft_cost=0.05)
    assert data["verify_cost"] == pytest.approx(r.verify_cost) and data["speedup"] == pytest.approx(r.speedup)
    assert main([*SERVE, "--speculate", "4"]) == 2
    assert "--acceptance" in capsys.readouterr().err
