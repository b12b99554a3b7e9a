"""The serving functions obey the one legality layer (tpu_notes.rules) and refuse in their caller's terms: whole heads
per chip, one engine step's limits named by the arguments that set them, bounded simulations, arrival rates the
float range can hold, and no inf, NaN or Python arithmetic error from finite arguments."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tpu_notes import inference as I
from tpu_notes import rules
from tpu_notes.gpu import GpuCluster
from tpu_notes.inference import LengthDistribution as LD
from tpu_notes.inference import Workload
from tpu_notes.inference.engine import MAX_ROWS, deploy
from tpu_notes.inference.workload import MAX_RATE, MAX_SPAN
from tpu_notes.topology import Slice


@pytest.fixture(scope="module")
def d8b():
    return deploy("llama3-8b", "v5e", 4)


# ------------------------------------------------------------------------------------------ whole heads
@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda: deploy("llama3-70b", "v5e", 12), "n_chips (12)"),
        (lambda: deploy("llama3-70b", "h100", 56), "n_chips (56)"),
        (lambda: deploy("llama3-70b", GpuCluster("h100", 56)), "system (56)"),
        (lambda: deploy("llama3-8b", Slice("v5e", (8, 8))), "system (64)"),
        (lambda: I.sharded_step_time("llama3-70b", "v5e", 12, 8, 1024), "n_chips (12)"),
        (lambda: I.latency_throughput_curve("llama3-70b", "v5e", 128, 1024, [8], expected=True), "n_chips (128)"),
    ],
)
def test_a_replica_gives_every_chip_whole_query_heads(call, argument):
    with pytest.raises(rules.Illegal, match=r"query heads") as err:
        call()
    assert str(err.value).startswith(argument) and "allowed: one of 1, 2, 4, 8" in str(err.value)
    assert err.value.kind == "whole heads"


def test_the_kv_heads_divide_the_chips_or_the_chips_divide_them():
    """40 query heads split over 5 GPUs, but 8 KV heads neither divide 5 nor are a multiple of it (vLLM's rule)."""
    from tpu_notes.transformer import TransformerConfig

    m = TransformerConfig(d_model=5120, d_ff=13824, n_layers=4, n_heads=40, n_kv_heads=8, d_head=128, vocab=1000)
    with pytest.raises(rules.Illegal, match=r"n_chips \(5\) must divide the 8 KV heads"):
        deploy(m, "h100", 5)
    assert deploy(m, "h100", 8).n_chips == 8  # 8 divides 40 and equals the KV heads


def test_a_legal_replica_is_priced_as_before():
    assert deploy("llama3-70b", "v5e", 16).n_chips == 16
    assert deploy("llama3-70b", GpuCluster("h100", 64)).n_chips == 64


def test_best_deployment_skips_counts_without_whole_heads_and_refuses_a_list_of_them():
    kw = dict(weight_dtype="int8", kv_dtype="int8", batches=(8, 16))
    legal = I.best_deployment("llama3-70b", "v5e", 4096, 0.05, chip_counts=(8, 16), **kw)
    mixed = I.best_deployment("llama3-70b", "v5e", 4096, 0.05, chip_counts=(8, 12, 16), **kw)
    assert mixed is not None and mixed.tp == legal.tp and mixed.total == legal.total
    with pytest.raises(ValueError, match=r"^chip_counts: not one count .* chip_counts \(12\) must divide"):
        I.best_deployment("llama3-70b", "v5e", 4096, 0.05, chip_counts=(12, 24), **kw)


# ------------------------------------------------------------------------------------------ the caller's terms
@pytest.mark.parametrize(
    "call, names",
    [
        (lambda d: d.decode_step(2**23, 8), ["batch (8,388,608)", "MAX_ROWS", "lower batch"]),
        (lambda d: d.decode_step(2**20, 2**20), ["batch (1,048,576) x seq_len (1,048,576)", "lower batch or seq_len"]),
        (lambda d: d.prefill_step(2**22, 2), ["batch (2) x prompt_len - cached_len (4,194,304)"]),
        (lambda d: I.expected_decode_step("llama3-8b", "v5e", 4, 2**20, 2**20), ["batch (1,048,576) x seq_len"]),
        (lambda d: I.sharded_step_time("llama3-8b", "v5e", 4, 2**23, 8), ["batch (8,388,608)"]),
        (
            lambda d: I.latency_throughput_curve("llama3-8b", "v5e", 4, 2**20, [1, 2**20], expected=True),
            ["batches[1] (1,048,576) x seq_len (1,048,576)"],
        ),
        (lambda d: I.chunked_prefill(d, 2**20, 2**20, 4096, 512), ["decode (1,048,576) x context (1,048,576)"]),
        (lambda d: I.chunked_prefill(d, 4, 1024, 2**23, 2**23), ["decode + chunk (4 + 8,388,608)"]),
        (lambda d: I.chunked_prefill(d, 4, 1024, 2**20, 1), ["prompt_len / chunk asks for 1.05e+06 steps"]),
        (lambda d: I.speculative_decoding(d, 2**21, 16, 4, 0.5), ["batch (2,097,152) x (k + 1) (5)"]),
        (lambda d: I.best_k_at_batch(d, 2**19, 16, 0.5, k_max=16), ["batch (524,288) x (k_max + 1) (17)"]),
        (lambda d: I.serving_cost(d, 1, 1, 2**23), ["batch (8,388,608)"]),
        (lambda d: I.serving_cost(d, 2**12, 1, 1, prefill_batch=2**11), ["prefill_batch (2,048) x prompt_len"]),
    ],
)
def test_engine_step_limits_are_refused_by_the_callers_arguments(d8b, call, names):
    with pytest.raises(ValueError) as err:
        call(d8b)
    for name in names:
        assert name in str(err.value)
    assert "kv_tokens" not in str(err.value) and "prefill_tokens" not in str(err.value)


def test_speculative_vs_batch_names_the_batch_in_its_list(d8b):
    big = deploy("llama3-8b", "v5e", 32, kv_dtype="int8")  # a pool of 7.4M tokens: 900,000 sequences of 6 fit
    with pytest.raises(ValueError, match=r"batches\[1\] \(900,000\) x \(k \+ 1\) \(5\)"):
        I.speculative_vs_batch(big, 1, 4, 0.5, batches=(8, 900_000))


# ------------------------------------------------------------------------------------------ bounded work
def test_a_simulation_larger_than_the_work_cap_is_refused_before_it_starts(d8b):
    # every output token is a row of some step, every prompt at least one chunk: 20,000 x (600 + 1) > 1e7
    big = Workload.poisson(1000.0, n_requests=20_000, prompt=LD.fixed(400), output=LD.fixed(600))
    with pytest.raises(
        rules.Illegal, match=r"workload.n_requests asks for 1.2e\+07 output tokens \+ prompt chunks"
    ) as err:
        I.simulate(d8b, big)
    assert "lower workload.n_requests" in str(err.value)


def test_candidate_counts_go_through_bounded_work():
    with pytest.raises(rules.Illegal, match=r"chip_counts x batches asks for 8.19e\+03 candidates"):
        I.best_deployment("llama3-70b", "v5e", 8192, 0.05, chip_counts=(8,) * 64, batches=list(range(1, 129)))
    with pytest.raises(rules.Illegal, match=r"batches asks for 4.1e\+03 candidates.*lower batches"):
        I.latency_throughput_curve("llama3-8b", "v5e", 4, 1024, list(range(1, 4098)))


def test_batch_and_step_lists_go_through_bounded_work(d8b):
    with pytest.raises(rules.Illegal, match=r"^batches asks for 4.1e\+03 batches.*lower batches"):
        I.speculative_vs_batch(d8b, 1024, 4, 0.5, batches=[1] * 4097)
    step = I.decode_step_time("llama3-8b", "v5e", 4, 8, 1024)
    with pytest.raises(rules.Illegal, match=r"^steps asks for 1.05e\+06 steps"):
        I.pareto_frontier([step] * (2**20 + 1))


def test_a_sweep_names_rates_x_engines(d8b):
    w = Workload.poisson(1.0, n_requests=10, prompt=LD.fixed(64), output=LD.fixed(4))
    with pytest.raises(rules.Illegal, match=r"rates x engines asks for 80 runs"):
        I.sweep(d8b, w, [1.0] * 40, I.default_engines())


# ------------------------------------------------------------------------------------------ arrival rates
@pytest.mark.parametrize("rate", [1e-12, 1e-7])
def test_a_rate_whose_stream_outlasts_the_clock_is_refused_naming_rate(rate):
    with pytest.raises(ValueError, match=r"^rate \(.* requests/s\) makes 1,000 requests span .* MAX_SPAN"):
        Workload.poisson(rate)
    # further out, the magnitude window of tpu_notes.units refuses the rate before the workload is built
    with pytest.raises(ValueError, match=r"^rate must be 0 or at least 1e-36 in magnitude"):
        Workload.poisson(5e-324)


def test_a_rate_whose_gaps_vanish_is_refused_naming_rate():
    with pytest.raises(ValueError, match=r"^rate \(1e\+20 requests/s\) must be at most MAX_RATE"):
        Workload(n_requests=10, rate=1e20)
    assert Workload(n_requests=10, rate=MAX_RATE).rate == MAX_RATE
    assert Workload(n_requests=10, rate=10 / MAX_SPAN).rate == 10 / MAX_SPAN


def test_a_sweep_names_the_rate_in_its_list(d8b):
    w = Workload.poisson(1.0, n_requests=10, prompt=LD.fixed(64), output=LD.fixed(4))
    with pytest.raises(ValueError, match=r"^rates\[1\] \(1e-12 requests/s\) makes 10 requests span"):
        I.sweep(d8b, w, [1.0, 1e-12], I.default_engines())


def test_the_slowest_accepted_rate_still_gives_finite_percentiles(d8b):
    w = Workload.poisson(3 / MAX_SPAN, n_requests=3, prompt=LD.fixed(64), output=LD.fixed(4))
    r = I.simulate(d8b, w)
    assert all(0 < v < 1 for v in r.ttft + r.tpot) and r.completed == 3


# ------------------------------------------------------------------------------------------ finite results
@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda d: I.prefill_time("llama3-8b", "v5e", 4, 4096, mfu=5e-324), "mfu"),
        (lambda d: I.cost_per_million_tokens(5e-324, 1.0), "tokens_per_s_per_chip"),
        (lambda d: I.disaggregation_ratio(1e308, 0.01, 64, 512), "prefill_s"),
        (lambda d: I.disaggregation_ratio(0.5, 5e-324, 64, 512), "step_s"),
        (lambda d: I.serving_cost(d, 1024, 128, 8, utilisation=5e-324), "utilisation"),
        (lambda d: I.speculative_decoding(d, 8, 1024, 4, 0.7, draft_cost=1e308), "draft_cost"),
    ],
)
def test_a_result_that_overflows_is_refused_by_the_argument_that_caused_it(d8b, call, argument):
    """An argument that would take a result out of the float range is refused by its name: by the magnitude window
    of tpu_notes.units (1e-36 to 1e36) first, by the function's own finite-result check behind it."""
    with pytest.raises(ValueError, match=rf"^{argument}( is too large or too small| must be (0 or )?at)"):
        call(d8b)


def test_a_measured_roofline_has_no_memory_to_fill_and_no_subnormal_rates():
    roof = SimpleNamespace(peak_flops=1e12, bandwidth=1e11)
    with pytest.raises(TypeError, match=r"^chip must be a chip name or a Chip \(a measured roofline"):
        I.max_batch("llama3-8b", roof, 1, 1024)
    with pytest.raises(TypeError, match=r"^chip must be"):
        I.cross_layer_kv("llama3-8b", roof, 1, 1024)
    tiny = SimpleNamespace(peak_flops=5e-324, bandwidth=5e-324)
    with pytest.raises(ValueError, match=r"chip.peak_flops"):
        I.prefill_time("llama3-8b", tiny, 1, 1024)
    assert I.decode_step_time("llama3-8b", roof, 1, 8, 1024).total > 0


def test_rows_past_max_rows_are_what_the_step_itself_refuses(d8b):
    """The public checks sit just below the step's own: MAX_ROWS sequences decode, one more does not."""
    assert d8b.step(MAX_ROWS, MAX_ROWS, 0).decode == MAX_ROWS
    with pytest.raises(ValueError, match="decode"):
        d8b.step(MAX_ROWS + 1, MAX_ROWS + 1)
