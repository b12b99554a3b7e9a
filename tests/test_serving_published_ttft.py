"""Chapter 8: published first-token times (NIM, TensorRT-LLM 0.5, vLLM on v6e) against the engine and the
simulator, and the per-source, per-metric summary beside the per-token latency and throughput rows."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from tpu_notes.inference import published, published_ttft
from tpu_notes.inference.engine import deploy
from tpu_notes.inference.published_ttft import TTFT_RUNS, PublishedTTFT
from tpu_notes.inference.simulator import Scheduler, simulate
from tpu_notes.inference.workload import LengthDistribution, Workload
from tpu_notes.transformer import get_model

# The figures as the sources print them (restated here from the pages, not from the module).
# NIM 1.8.0, Llama-3.3-70b-instruct, 2 x H100 80G fp8 TP2: {(input, output): {concurrency: TTFT ms}}
NIM = {
    (5000, 500): {1: 406.77, 5: 546.7, 25: 688.69, 50: 834.51, 100: 7996.25, 150: 34794.22, 200: 61680.22,
                  250: 88605.32},
    (500, 2000): {1: 47.77, 5: 126.53, 25: 147.63, 50: 181.64, 100: 229.77, 150: 296.74, 200: 4867.89},
}  # fmt: skip
# TensorRT-LLM 0.5 performance.md, Low Latency, batch 1: {(model, chip, TP, input): 1st token latency ms}
TRT = {
    ("llama2-7b", "h100", 1, 128): 7,
    ("llama2-7b", "h100", 1, 2048): 36,
    ("llama2-70b", "h100", 4, 128): 26,
    ("llama2-70b", "h100", 4, 2048): 109,
    ("llama2-7b", "a100", 1, 128): 16,
    ("llama2-7b", "a100", 1, 2048): 133,
    ("llama2-70b", "a100", 4, 128): 47,
    ("llama2-70b", "a100", 4, 2048): 377,
}
# tpu-recipes vLLM Llama3.x README (b709d73), v6e-8: {(concurrency, statistic): TTFT ms}
VLLM = {(64, "mean"): 251.04, (64, "median"): 198.81, (128, "mean"): 512.34, (128, "median"): 229.09}

#: Rows the engine and simulator miss by more than 2x (see the report of benchmarks/serving.py), all too fast:
#: NIM's short prompts (500 tokens) under concurrency 5-200, whose measured TTFT grows from 48 ms to 297 ms (and
#: 4.9 s saturated) while the simulator admits each prompt into the next step (about 60-100 ms), and vLLM's TTFT
#: on v6e at concurrency 64 and 128 (mixed prefill steps priced too cheaply there: its measured ITL p99 is 1.6x
#: its mean). Strict xfail: when a change brings one within 2x, the test says so and the entry goes.
KNOWN_MISSES = (
    "Llama 3.3 70B fp8, 2 H100, c=5 500/2000",
    "Llama 3.3 70B fp8, 2 H100, c=25 500/2000",
    "Llama 3.3 70B fp8, 2 H100, c=50 500/2000",
    "Llama 3.3 70B fp8, 2 H100, c=100 500/2000",
    "Llama 3.3 70B fp8, 2 H100, c=150 500/2000",
    "Llama 3.3 70B fp8, 2 H100, c=200 500/2000",
    "Llama 3.3 70B bf16, v6e-8, c=64 1k/1k, mean",
    "Llama 3.3 70B bf16, v6e-8, c=64 1k/1k, median",
    "Llama 3.3 70B bf16, v6e-8, c=128 1k/1k, mean",
)


def _source(r) -> str:
    return r.source.split(",")[0]


@pytest.fixture(scope="module")
def rows():
    return published_ttft.reconcile_ttft()


# ------------------------------------------------------------------------------------------------ the records
def test_nim_rows_are_the_page_tables():
    nim = [r for r in TTFT_RUNS if _source(r) == "nim"]
    got = {(r.input_len, r.output_len): {} for r in nim}
    for r in nim:
        got[(r.input_len, r.output_len)][r.batch] = r.reported_ttft_s * 1e3
        assert (r.model, r.chip, r.n_chips, r.weight_dtype, r.compute_dtype) == ("llama3-70b", "h100", 2, "fp8", "fp8")
        assert r.workload == "closed" and r.statistic == "mean"
    assert got.keys() == NIM.keys()
    for key, table in NIM.items():
        assert got[key] == pytest.approx(table, rel=1e-9)


def test_trtllm_rows_are_the_low_latency_tables():
    trt = [r for r in TTFT_RUNS if _source(r) == "trtllm-0.5"]
    assert len(trt) == len(TRT)
    for (model, chip, tp, inp), ms in TRT.items():
        (r,) = [x for x in trt if (x.model, x.chip, x.n_chips, x.input_len) == (get_model(model), chip, tp, inp)]
        assert r.reported_ttft_s == pytest.approx(ms * 1e-3)
        assert (r.batch, r.output_len, r.workload) == (1, 1, "static")
        assert r.compute_dtype == ("fp8" if chip == "h100" else "bf16")


def test_vllm_rows_are_the_readme_output():
    vt = {(r.batch, r.statistic): r for r in TTFT_RUNS if _source(r) == "tpu-recipes"}
    assert vt.keys() == VLLM.keys()
    for key, ms in VLLM.items():
        r = vt[key]
        assert r.reported_ttft_s == pytest.approx(ms * 1e-3)
        assert (r.chip, r.n_chips, r.input_len, r.output_len, r.n_requests) == ("v6e", 8, 1000, 1000, 3000)


def test_records_refuse_malformed_configurations():
    base = dict(name="x", source="y", model="llama3-8b", chip="h100", n_chips=1, batch=4, input_len=512,
                output_len=64, reported_ttft_s=0.5, group="gpu-serving")  # fmt: skip
    with pytest.raises(ValueError, match="n_requests"):
        PublishedTTFT(workload="closed", **base)
    with pytest.raises(ValueError, match="n_requests"):
        PublishedTTFT(workload="closed", n_requests=2, **base)  # fewer requests than clients
    with pytest.raises(ValueError, match="MAX_SIMULATED_TOKENS"):
        PublishedTTFT(workload="closed", n_requests=20_000, **{**base, "input_len": 1000})
    with pytest.raises(ValueError, match="n_requests or token_budget"):
        PublishedTTFT(workload="static", token_budget=512, **base)
    with pytest.raises(ValueError, match="statistic"):
        PublishedTTFT(workload="static", statistic="p99", **base)
    with pytest.raises(ValueError, match="workload"):
        PublishedTTFT(workload="poisson", **base)
    with pytest.raises(ValueError, match="reported_ttft_s.*faster than the roofline"):
        PublishedTTFT(workload="static", **{**base, "reported_ttft_s": 1e-6})
    with pytest.raises(ValueError, match="chip"):
        PublishedTTFT(workload="static", **{**base, "chip": "no-such-chip"})
    with pytest.raises(ValueError, match="group"):
        PublishedTTFT(workload="static", **{**base, "group": "serving"})


# ------------------------------------------------------------------------------------------------ the predictions
def test_every_record_has_a_row_priced_by_its_workload(rows):
    assert [r.run for r in rows] == list(TTFT_RUNS)
    for r in rows:
        assert r.priced_by == ("engine" if r.run.workload == "static" else "simulator")
        assert r.expected_ratio == pytest.approx(r.expected / r.reported)


def test_a_static_row_is_the_engine_prefill_with_no_generation_step(rows):
    r = next(x for x in rows if x.run.workload == "static" and x.run.input_len == 2048 and x.run.chip == "h100")
    dep = deploy(r.run.model, "h100", r.run.n_chips, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    step = dep.prefill_step(2048, 1)
    assert r.expected == pytest.approx(step.total)
    assert r.predicted == pytest.approx(step.roofline)


def test_a_closed_row_is_the_statistic_of_a_closed_loop_simulation(rows):
    for stat in ("mean", "median"):
        r = next(x for x in rows if x.run.name == f"Llama 3.3 70B bf16, v6e-8, c=64 1k/1k, {stat}")
        wl = Workload.closed(64, 3000, prompt=LengthDistribution.fixed(1000), output=LengthDistribution.fixed(1000))
        res = simulate(deploy("llama3-70b", "v6e", 8), wl, scheduler=Scheduler("chunked", token_budget=512,
                                                                                max_seqs=64))  # fmt: skip
        steady = np.asarray(res.ttft_all)[res.window()]  # warm-up and drain trimmed, as the benchmarks measure
        want = np.mean(steady) if stat == "mean" else np.median(steady)
        assert r.expected == pytest.approx(want)


def test_the_roofline_is_a_lower_bound_on_every_first_token_time(rows):
    for r in rows:
        assert 0.0 < r.ratio <= 1.0, (r.run.name, r.ratio)


def test_prediction_is_within_a_factor_two_of_every_measurement(rows):
    """A loose guard (the 20% target is the benchmark's): no first-token time is off by more than 2x."""
    for r in rows:
        if r.run.name not in KNOWN_MISSES:
            assert 0.5 <= r.expected_ratio <= 2.0, (r.run.name, r.expected_ratio)


@pytest.mark.parametrize("name", KNOWN_MISSES)
@pytest.mark.xfail(strict=True, reason="the engine and simulator miss these by more than 2x (see KNOWN_MISSES)")
def test_known_misses_are_within_a_factor_two(rows, name):
    r = next(x for x in rows if x.run.name == name)
    assert 0.5 <= r.expected_ratio <= 2.0


# ------------------------------------------------------------------------------------------------ the groups
def test_group_medians_are_the_medians_of_their_rows(rows):
    serving = published.reconcile(published.RUNS, 1.0)
    groups = published_ttft.serving_groups(rows + serving)
    by_hand = {}
    for r in rows:
        by_hand.setdefault(("TTFT", _source(r.run)), []).append(r.expected / r.reported)
    for r in serving:
        metric = "TPOT/ITL" if r.run.mode == "latency" else "throughput"
        by_hand.setdefault((metric, _source(r.run)), []).append(r.expected / r.reported)
    assert {(g.metric, g.source) for g in groups} == by_hand.keys()
    for g in groups:
        ratios = by_hand[(g.metric, g.source)]
        assert g.n == len(ratios)
        assert g.median == pytest.approx(statistics.median(ratios))
        assert (g.low, g.high) == pytest.approx((min(ratios), max(ratios)))
    medians = published_ttft.serving_medians(groups)
    assert medians == {f"{m} {s}": pytest.approx(statistics.median(v)) for (m, s), v in by_hand.items()}
    assert published_ttft.serving_groups() == groups  # the default is every published row


def test_targets_follow_the_metric_and_the_table_has_a_line_per_group(rows):
    groups = published_ttft.serving_groups(rows)
    assert {g.target for g in groups} == {published_ttft.TTFT_TARGET}
    for g in groups:
        assert g.meets_target == (abs(g.median - 1) <= 0.20)
    table = published_ttft.format_serving_groups(groups)
    lines = str(table).splitlines()
    assert len(lines) == len(groups) + 3  # caption, header, rule
    assert lines[3].split()[3] == f"{groups[0].median:.2f}"
    assert table.column("median") == [g.median for g in groups]
    assert len(published_ttft.format_ttft_table(rows).splitlines()) == len(rows) + 1


def test_group_functions_refuse_foreign_rows():
    with pytest.raises(TypeError, match="row"):
        published_ttft.serving_groups([object()])
    with pytest.raises(ValueError, match="at least one"):
        published_ttft.serving_groups([])
    with pytest.raises(TypeError, match="groups"):
        published_ttft.format_serving_groups(["x"])
