"""Chapter 8: published serving benchmarks against the model, the communication-aware step, the deployment search,
the chapter's exercises and figures."""

from __future__ import annotations

import math
import statistics

import matplotlib
import pytest

matplotlib.use("Agg")

from tpu_notes import inference, plots  # noqa: E402
from tpu_notes.exercises import ch08  # noqa: E402
from tpu_notes.hardware import get_chip  # noqa: E402
from tpu_notes.inference import published  # noqa: E402
from tpu_notes.transformer import get_model  # noqa: E402


# ------------------------------------------------------------------------------------------------ the records
def test_at_least_three_sources_and_every_row_fits_in_memory():
    sources = {r.source.split(",")[0] for r in published.RUNS}
    assert len(sources) >= 3
    assert all(r.fits for r in published.reconcile())


def test_the_roofline_is_an_upper_bound_on_every_benchmark():
    """At the datasheet rates the model must be at least as fast as every measurement (ratio <= 1)."""
    for r in published.reconcile(efficiency=1.0):
        assert 0.1 < r.ratio <= 1.0, (r.run.name, r.ratio)


def test_the_stated_efficiency_brings_the_median_closer_to_one():
    raw = statistics.median(r.ratio for r in published.reconcile(efficiency=1.0))
    cal = statistics.median(r.ratio for r in published.reconcile(efficiency=published.EFFICIENCY))
    assert abs(cal - 1) < abs(raw - 1)
    assert published.fitted_efficiency() == pytest.approx(raw)


def test_batch_one_latency_matches_a_hand_count():
    """NIM's concurrency-1 row: every fp8 weight but the embedding table, plus 5250 tokens of fp8 KV cache, read
    from 2 H100s' HBM (3.35 TB/s each)."""
    row = next(r for r in published.RUNS if r.name.endswith("c=1 5000/500"))
    m = get_model("llama3-70b")
    weights = m.param_count() - m.vocab * m.d_model + m.d_model  # the embedding reads one row
    kv = (5000 + 250) * 2 * m.n_layers * m.n_kv_heads * m.d_head  # 1 byte per number
    expected = (weights + kv) / (2 * 3.35e12)
    assert published.predict(row).predicted == pytest.approx(expected, rel=1e-3)
    assert published.predict(row, 0.5).predicted == pytest.approx(2 * expected, rel=1e-3)


def test_static_rows_count_the_prefill_and_every_step():
    row = next(r for r in published.RUNS if r.name == "Llama 2 70B fp8 2048/128, 1 H200")
    r = published.predict(row)
    pre = inference.prefill_time(row.model, "h200", 1, 2048, 32, mfu=1.0, weight_dtype="fp8", compute_dtype="fp8").total
    step = inference.decode_step_time(
        row.model, "h200", 1, 32, 2048 + 64, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8"
    ).total
    assert r.predicted == pytest.approx(32 * 128 / (pre + 128 * step))
    assert r.prefill_s > 0.5 * pre


def test_records_refuse_inconsistent_configurations():
    base = dict(name="x", source="y", model="llama3-8b", chip="v5e", n_chips=8, batch=8, group="tpu-serving")
    with pytest.raises(ValueError, match="input_len"):
        published.PublishedServing(mode="static", reported_tokens_per_s=1.0, **base)
    with pytest.raises(ValueError, match="cache_len"):
        published.PublishedServing(mode="decode", reported_tokens_per_s=1.0, **base)
    with pytest.raises(ValueError, match="reported_latency_s"):
        published.PublishedServing(mode="latency", input_len=8, output_len=8, reported_tokens_per_s=1.0, **base)
    with pytest.raises(ValueError, match="chip"):
        published.PublishedServing(
            mode="decode", cache_len=8, reported_tokens_per_s=1.0, **{**base, "chip": "no-such-chip"}
        )


def test_source_and_runs_tables_summarise_every_row():
    raw = published.reconcile(efficiency=1.0)
    cal = published.reconcile(efficiency=published.EFFICIENCY)
    summary = published.source_table(raw, cal)
    assert sum(summary.column("runs")) == len(raw)
    jet = [r.ratio for r in raw if r.run.source.startswith("jetstream-pt")]
    row = summary.column("source").index("jetstream-pt")
    assert summary.column("median")[row] == pytest.approx(statistics.median(jet))
    assert summary.column("median, calibrated")[row] > summary.column("median")[row]
    fast = published.runs_table(raw, cal)
    slow = published.runs_table(raw, cal, "s/token")
    assert fast.collapse and len(fast.rows) + len(slow.rows) == len(raw)
    assert slow.column("roofline") == [r.ratio for r in raw if r.run.metric == "s/token"]
    with pytest.raises(ValueError, match="metric"):
        published.runs_table(raw, cal, "tokens")
    with pytest.raises(ValueError, match="same runs"):
        published.source_table(raw, cal[:-1])


def test_format_table_has_a_line_per_row_with_the_ratio():
    rows = published.reconcile()
    lines = published.format_table(rows).splitlines()
    assert len(lines) == len(rows) + 1
    assert lines[1].split()[-2] == f"{rows[0].ratio:.2f}"


# ------------------------------------------------------------------------------------------------ the sharded step
def test_one_chip_pays_no_communication():
    s = inference.sharded_step_time("llama3-8b", "v5e", 1, 4, 1024)
    assert s.comms == 0 and s.total == s.step.total


def test_communication_terms_match_the_formula():
    """16 v5e over 2 axes: 4 chips per axis, 2 hops each way; 4 collectives per layer; bf16 activations."""
    m = get_model("llama3-70b")
    s = inference.sharded_step_time(m, "v5e", 16, 32, 8192, weight_dtype="int8", kv_dtype="int8")
    w = get_chip("v5e").ici_bw_bidi
    assert s.comms_bandwidth == pytest.approx(m.n_layers * 2 * 2 * 32 * m.d_model * 2 / (2 * w))
    assert s.comms_latency == pytest.approx(m.n_layers * 4 * 2 * 2 * 1e-6)
    assert s.total == pytest.approx(s.step.total + s.comms)
    hidden = inference.sharded_step_time(m, "v5e", 16, 32, 8192, weight_dtype="int8", kv_dtype="int8", overlap=True)
    assert s.step.total <= hidden.total < s.total


def test_more_chips_cost_more_communication_per_step():
    a, b = (
        inference.sharded_step_time("llama3-70b", "v5e", n, 32, 8192, weight_dtype="int8", kv_dtype="int8")
        for n in (16, 64)
    )
    assert b.comms > a.comms and b.bound == "comms"
    assert b.tokens_per_s_per_chip < a.tokens_per_s_per_chip


@pytest.mark.parametrize("rank_by", ["expected", "roofline"])
def test_best_deployment_is_the_best_point_of_its_grid(rank_by):
    """By the step it ranks by (the engine's expected step by default, the roofline with communication when
    asked): within the latency limit, fitting, and no fitting point of the grid within the limit does better."""
    grid = [(n, b) for n in (8, 16, 32) for b in (16, 32, 64, 128)]
    best = inference.best_deployment(
        "llama3-70b",
        "v5e",
        8192,
        0.03,
        chip_counts=(8, 16, 32),
        batches=(16, 32, 64, 128),
        weight_dtype="int8",
        kv_dtype="int8",
        rank_by=rank_by,
    )

    def judged(s):
        return s.expected if rank_by == "expected" else s

    assert judged(best).total <= 0.03 and best.fits
    for n, b in grid:
        s = inference.sharded_step_time("llama3-70b", "v5e", n, b, 8192, weight_dtype="int8", kv_dtype="int8")
        if s.fits and judged(s).total <= 0.03:
            assert judged(s).tokens_per_s_per_chip <= judged(best).tokens_per_s_per_chip
    assert inference.best_deployment("llama3-70b", "v5e", 8192, 1e-4, weight_dtype="int8", kv_dtype="int8") is None


# ------------------------------------------------------------------------------------------------ exercises
def test_405b_under_15ms_is_the_largest_batch_under_the_limit():
    best = ch08.best_under_latency("llama3-405b", 15e-3)
    assert best.total <= 15e-3
    nxt = inference.decode_step_time(
        "llama3-405b", "v5e", best.n_chips, best.batch + 1, 8192, weight_dtype="int8", kv_dtype="int8"
    )
    assert nxt.total > 15e-3 or not nxt.fits


def test_every_precision_that_fills_hbm_has_the_same_step():
    """With HBM full, a step reads one chip's memory: 16 GB / 820 GB/s, whatever the dtype."""
    v5e = get_chip("v5e")
    for s in ch08.largest_batch_steps():
        assert s.total == pytest.approx(v5e.hbm_bytes / v5e.hbm_bw, rel=0.02)


def test_cheapest_frontier_point_respects_the_limit():
    """Exercise 8.13's point is on the frontier with communication, within the limit, and no cheaper point of
    that frontier is; the perfectly sharded frontier would have answered differently (more chips)."""
    s = ch08.cheapest_under(20e-3)
    front = inference.pareto_frontier(ch08.pareto_steps(expected=True))
    assert s.total <= 20e-3 and s in front
    assert all(f.tokens_per_s_per_chip <= s.tokens_per_s_per_chip for f in front if f.total <= 20e-3)
    roof = ch08.cheapest_under(20e-3, expected=False)
    assert roof in inference.pareto_frontier(ch08.pareto_steps())
    assert roof.n_chips > s.n_chips


# ------------------------------------------------------------------------------------------------ figures
def test_figures_draw_what_they_are_given():
    import matplotlib.pyplot as plt

    steps = ch08.pareto_steps()
    fig = plots.pareto_chart(steps)
    assert len(fig.axes[0].lines) == len({s.n_chips for s in steps}) + 1
    rows = [inference.sharded_step_time("llama3-70b", "v5e", n, 32, 8192) for n in (16, 32)]
    fig2 = plots.sharded_step_chart(rows)
    assert len(fig2.axes[0].patches) == 5 * len(rows)
    raw = published.reconcile()
    fig3 = plots.serving_reconciliation_chart(raw, published.reconcile(efficiency=0.8))
    assert len(fig3.axes[0].patches) == 2 * len(raw)
    from tpu_notes.inference.engine import deploy
    from tpu_notes.inference.workload import LengthDistribution, Workload

    wl = Workload.poisson(2.0, n_requests=20, output=LengthDistribution.fixed(16))
    sim = inference.simulate(deploy("llama3-8b", "v5e", 4), wl)
    fig4 = plots.simulation_chart({"a": sim})
    assert len(fig4.axes) == 2 and all(len(ax.lines) == 1 for ax in fig4.axes)
    for f in (fig, fig2, fig3, fig4):
        assert f.get_figwidth() <= 7.2 + 1e-9
        plt.close(f)
    for fn in (plots.pareto_chart, plots.sharded_step_chart, plots.serving_reconciliation_chart):
        with pytest.raises(ValueError):
            fn([])
    with pytest.raises(ValueError):
        plots.simulation_chart({})


def test_recommended_deployment_is_a_4x4():
    """The chapter's recommendation at the roofline with communication: 16 chips beat 32 and 64 on throughput per
    chip under 20 ms per token (Llama 3 70B, int8 weights and caches, 8k context). The engine's expected step is
    slower (overhead, achieved rates): under the same 20 ms only a 4x8 qualifies; with 30 ms, the 4x4 again."""
    kw = dict(weight_dtype="int8", kv_dtype="int8")
    best = inference.best_deployment("llama3-70b", "v5e", 8192, 20e-3, rank_by="roofline", **kw)
    assert best.tp == 16
    assert math.isclose(best.total, best.step.total + best.comms)
    expected = inference.best_deployment("llama3-70b", "v5e", 8192, 20e-3, **kw)
    assert expected.expected.total <= 20e-3 < best.expected.total and expected.tp > best.tp
    assert inference.best_deployment("llama3-70b", "v5e", 8192, 30e-3, **kw).tp == 16


# ------------------------------------------------------------------------------------------------ the explorer
def test_pareto_explorer_static_and_live():
    import sys

    from matplotlib.figure import Figure

    from tpu_notes import widgets

    assert isinstance(widgets.pareto_explorer(static=True), Figure)
    ipywidgets = pytest.importorskip("ipywidgets")
    box = widgets.pareto_explorer("llama3-70b", "v5e", 8192, "int8")
    assert isinstance(box, ipywidgets.VBox)
    seq_w, dtype_w = box.children[0].children
    image, text = box.children[1], box.children[2]
    assert bytes(image.value).startswith(b"\x89PNG") and "on the frontier" in text.value
    first = bytes(image.value)
    seq_w.value = 32768  # longer caches: fewer settings fit
    assert bytes(image.value) != first
    steps8k, _ = widgets.pareto_summary("llama3-70b", "v5e", 8192, "int8")
    steps32k, _ = widgets.pareto_summary("llama3-70b", "v5e", 32768, "int8")
    assert len(steps32k) < len(steps8k)
    with pytest.raises(ValueError, match="nothing fits"):
        widgets.pareto_summary("llama3-70b", "v5e", 65536, "bf16", chip_counts=(4,))
    with pytest.raises(TypeError):
        widgets.pareto_explorer(static="yes")
    assert "ipywidgets" in sys.modules


def test_serving_runs_share_the_framework_and_refuse_beating_the_roofline():
    import dataclasses

    from tpu_notes import runs
    from tpu_notes.transformer import get_model

    assert issubclass(published.PublishedServing, runs.PublishedRecord)
    assert issubclass(published.ServingReconciliation, runs.Reconciliation)
    assert published.LLAMA2_7B is get_model("llama2-7b") and published.LLAMA2_70B is get_model("llama2-70b")
    tput = next(r for r in published.RUNS if r.mode != "latency")
    with pytest.raises(ValueError, match="reported_tokens_per_s"):
        dataclasses.replace(tput, reported_tokens_per_s=tput.reported_tokens_per_s * 1e5)
    lat = next(r for r in published.RUNS if r.mode == "latency")
    with pytest.raises(ValueError, match="reported_latency_s"):
        dataclasses.replace(lat, reported_latency_s=lat.reported_latency_s / 1e5)
    assert all(r.ratio <= 1.0 for r in published.reconcile(efficiency=1.0))
    with pytest.raises(ValueError, match="runs"):
        published.reconcile([])
    with pytest.raises(ValueError, match="efficiency"):
        published.reconcile(efficiency=1.5)
