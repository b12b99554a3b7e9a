"""The bill of a simulated run at the rate it served (issue 38): every provisioned chip paid for the run's
wall-clock; dated prices with their committed-use kinds and a sensitivity line; the fitted per-layer decode
overhead's sensitivity. Expectations are recomputed from the run's own counters or from the price table, never
echoed from the code under test."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from tpu_notes.hardware import CHIPS, get_chip, source
from tpu_notes.inference import Disaggregation, Scheduler, simulate
from tpu_notes.inference.cost import (
    COMMITTED_PRICES,
    PRICE_KINDS,
    ChipPrice,
    CostAtRate,
    chip_prices,
    cost_at_rate,
    overhead_sensitivity,
    price_sensitivity,
    serving_cost,
    with_decode_overhead,
)
from tpu_notes.inference.engine import deploy
from tpu_notes.inference.workload import LengthDistribution, Workload

PROMPT, OUTPUT = 1024, 128


@pytest.fixture(scope="module")
def d8b():
    """Llama 3 8B on a v5e 2x2 (bf16): small enough to simulate in a fraction of a second."""
    return deploy("llama3-8b", "v5e", 4)


def _run(d, rate, n=200):
    fixed = LengthDistribution.fixed
    wl = Workload(n_requests=n, rate=rate, prompt=fixed(PROMPT), output=fixed(OUTPUT), seed=3)
    return simulate(d, wl, scheduler=Scheduler())


@pytest.fixture(scope="module")
def low(d8b):
    return _run(d8b, 0.5)  # about one request every two seconds: the chips mostly idle


@pytest.fixture(scope="module")
def high(d8b):
    return _run(d8b, 12.0)


# ------------------------------------------------------------------------------------------------ the bill
def test_the_bill_is_every_provisioned_chip_for_the_runs_wall_clock(d8b, low):
    c = cost_at_rate(low, d8b)
    bill = low.n_chips * low.duration * get_chip("v5e").dollars_per_hour / 3600.0  # recomputed from the run
    assert c.dollars_per_request == pytest.approx(bill / low.completed, rel=1e-12)
    # the input and output prices together pay the whole bill, split by busy chip-seconds
    paid = c.dollars_per_million_input * c.input_tokens / 1e6 + c.dollars_per_million_output * c.output_tokens / 1e6
    assert paid == pytest.approx(bill, rel=1e-12)
    share = low.chip_seconds_prefill / (low.chip_seconds_prefill + low.chip_seconds_decode)
    assert c.prefill_share == pytest.approx(share, rel=1e-12)
    assert c.input_tokens == pytest.approx(PROMPT * low.completed, rel=1e-9)
    assert c.output_tokens == pytest.approx(OUTPUT * low.completed, rel=1e-9)
    assert c.n_chips == low.n_chips == d8b.n_chips and c.requests == low.completed
    assert c.price_source == source("v5e", "dollars_per_hour")


def test_at_low_load_a_token_costs_more_than_the_100_percent_busy_floor(d8b, low):
    c = cost_at_rate(low, d8b)
    # the floor at the batch the run actually reached (rounded up: a larger batch is cheaper per token)
    floor = serving_cost(d8b, PROMPT, OUTPUT, max(1, math.ceil(low.mean_batch)))
    assert c.dollars_per_million_output > floor.dollars_per_million_output
    assert c.dollars_per_million_input > floor.dollars_per_million_input
    assert c.dollars_per_request > floor.dollars_per_request
    assert "floor (100% busy)" in repr(floor)
    assert "floor" not in repr(serving_cost(d8b, PROMPT, OUTPUT, 8, utilisation=0.5))


def test_utilisation_is_busy_over_provisioned_chip_seconds(d8b, low, high):
    lo, hi = cost_at_rate(low, d8b), cost_at_rate(high, d8b)
    for run, c in ((low, lo), (high, hi)):
        busy = run.chip_seconds_prefill + run.chip_seconds_decode
        assert 0.0 < c.utilisation <= 1.0
        assert c.utilisation == pytest.approx(busy / (run.n_chips * run.duration), rel=1e-12)
        # the same run's floor: what it would cost were the busy chip-seconds all that was paid for
        assert c.floor_dollars_per_million_output == pytest.approx(c.dollars_per_million_output * c.utilisation)
        assert c.floor_dollars_per_million_input <= c.dollars_per_million_input
    assert lo.utilisation < hi.utilisation  # more load, fewer idle chip-seconds
    assert lo.dollars_per_million_output > hi.dollars_per_million_output  # and a cheaper token


def test_a_request_that_met_the_slo_costs_at_least_a_served_one(d8b, high):
    loose = cost_at_rate(high, d8b, ttft_slo_s=1e5, tpot_slo_s=1e3)
    assert loose.slo_attainment == 1.0
    assert loose.dollars_per_slo_request == pytest.approx(loose.dollars_per_request, rel=1e-12)
    ttft = sorted(high.ttft_all)
    mid = ttft[len(ttft) // 2]  # about half the requests meet a TTFT bound at the median
    tight = cost_at_rate(high, d8b, ttft_slo_s=mid)
    win = high.window()  # the share that met it is counted over the simulator's trimmed window, as attainment is
    share = sum(t <= mid for t, w in zip(high.ttft_all, win) if w) / int(win.sum())
    assert tight.slo_attainment == pytest.approx(share)
    assert tight.dollars_per_slo_request == pytest.approx(tight.dollars_per_request / share)
    assert tight.dollars_per_slo_request >= tight.dollars_per_request
    none = cost_at_rate(high, d8b, ttft_slo_s=1e-9)
    assert none.slo_attainment == 0.0 and none.dollars_per_slo_request == math.inf
    assert cost_at_rate(high, d8b).dollars_per_slo_request is None  # no SLO: no figure


def test_doubling_the_price_doubles_every_dollar_figure(d8b, low):
    a = cost_at_rate(low, d8b, dollars_per_chip_hour=1.5, ttft_slo_s=1.0, tpot_slo_s=0.05)
    b = cost_at_rate(low, d8b, dollars_per_chip_hour=3.0, ttft_slo_s=1.0, tpot_slo_s=0.05)
    dollars = [f for f in vars(a) if "dollars" in f]
    assert len(dollars) == len(CostAtRate.DOLLARS) + 1  # every dollar figure, and the price itself
    for f in dollars:
        assert getattr(b, f) == pytest.approx(2 * getattr(a, f), rel=1e-12), f
    for f in ("utilisation", "prefill_share", "slo_attainment", "request_rate"):
        assert getattr(b, f) == getattr(a, f)
    assert a.price_source == "given"


def test_a_disaggregated_run_pays_for_its_prefill_instances(d8b):
    pre = deploy("llama3-8b", "v5e", 4)
    fixed = LengthDistribution.fixed
    wl = Workload(n_requests=100, rate=2.0, prompt=fixed(PROMPT), output=fixed(OUTPUT), seed=1)
    run = simulate(d8b, wl, disaggregation=Disaggregation(prefill=pre, instances=2))
    c = cost_at_rate(run, d8b)
    assert c.n_chips == d8b.n_chips + 2 * pre.n_chips == run.n_chips
    assert c.chip_seconds_provisioned == pytest.approx(run.n_chips * run.duration)
    assert 0.0 < c.utilisation <= 1.0


# ------------------------------------------------------------------------------------------------ refusals
def test_cost_at_rate_refuses_what_it_cannot_price(d8b, low):
    with pytest.raises(TypeError, match="result must be a SimResult"):
        cost_at_rate(serving_cost(d8b, PROMPT, OUTPUT, 8), d8b)
    assert get_chip("v6e").dollars_per_hour is None
    with pytest.raises(ValueError, match="dollars_per_chip_hour must be given"):
        cost_at_rate(low, "v6e")
    assert cost_at_rate(low, "v6e", dollars_per_chip_hour=2.7).dollars_per_chip_hour == 2.7
    with pytest.raises(ValueError, match="busy chip-seconds .* exceed"):  # a run billed for fewer chips than worked
        cost_at_rate(replace(low, duration=low.duration / 10), d8b)
    with pytest.raises(ValueError, match="served requests"):
        cost_at_rate(replace(low, completed=0), d8b)
    with pytest.raises(ValueError, match="ttft_slo_s"):
        cost_at_rate(low, d8b, ttft_slo_s=-1.0)
    with pytest.raises(TypeError, match="tpot_slo_s"):
        cost_at_rate(low, d8b, tpot_slo_s="50ms")


# ------------------------------------------------------------------------------------------------ prices
def test_every_listed_price_is_dated_sourced_and_of_a_kind():
    priced = [c for c in CHIPS.values() if c.dollars_per_hour is not None]
    assert priced
    for c in priced:
        where = source(c, "dollars_per_hour")
        assert "on-demand" in where and re.search(r"20\d\d", where), (c.name, where)
        prices = chip_prices(c.name)
        assert list(prices) == [k for k in PRICE_KINDS if k in prices] and list(prices)[0] == "on-demand"
        assert prices["on-demand"].dollars_per_chip_hour == c.dollars_per_hour
        # a committed term is cheaper, and the longer one cheaper still
        figures = [p.dollars_per_chip_hour for p in prices.values()]
        assert figures == sorted(figures, reverse=True) and len(set(figures)) == len(figures)
        for p in prices.values():
            assert re.search(r"20\d\d", p.source), p
    assert set(COMMITTED_PRICES) <= {c.name for c in priced}
    assert set(chip_prices("v5e")) == set(PRICE_KINDS)
    with pytest.raises(ValueError, match="chip 'v6e' has no price"):
        chip_prices("v6e")


def test_price_sensitivity_rescales_the_bill_and_says_so_in_one_sentence(d8b, low):
    c = cost_at_rate(low, d8b, ttft_slo_s=1.0)
    p = chip_prices("v5e")
    r = price_sensitivity(c, p["3-yr committed"], p["on-demand"])
    k = p["3-yr committed"].dollars_per_chip_hour / p["on-demand"].dollars_per_chip_hour
    for f in CostAtRate.DOLLARS:
        assert getattr(r.low, f) == pytest.approx(getattr(c, f) * k, rel=1e-12)
        assert getattr(r.high, f) == pytest.approx(getattr(c, f), rel=1e-12)
    s = r.sentence("output")
    assert f"{r.low.dollars_per_million_output:.3g}" in s and f"{c.dollars_per_million_output:.3g}" in s
    assert "3-yr committed" in s and "on-demand" in s
    floor = serving_cost(d8b, PROMPT, OUTPUT, 8)
    f = price_sensitivity(floor, 0.6, 1.2)  # plain numbers are prices "given"
    assert f.low.dollars_per_request == pytest.approx(floor.dollars_per_request / 2, rel=1e-12)
    assert "given" in f.sentence("request")
    with pytest.raises(ValueError, match="low must be at most high"):
        price_sensitivity(floor, 1.2, 0.6)
    with pytest.raises(ValueError, match="what must be one of"):
        f.sentence("tokens")


def test_a_chip_price_record_checks_its_fields():
    assert ChipPrice("V5E", "on-demand", 1.2, "given").chip == "v5e"
    with pytest.raises(ValueError, match="kind must be one of"):
        ChipPrice("v5e", "spot", 0.4, "given")
    with pytest.raises(ValueError, match="unknown chip"):
        ChipPrice("v9z", "on-demand", 1.0, "given")


# ------------------------------------------------------------------------------------------------ the fitted overhead
def test_scaling_the_decode_overhead_moves_each_step_by_layers_times_overhead(d8b):
    per_step = d8b.model.n_layers * d8b.efficiency.decode_overhead  # what the fit adds to every step, s
    assert per_step > 0
    same = with_decode_overhead(d8b, 1.0)
    none = with_decode_overhead(d8b, 0.0)
    twice = with_decode_overhead(d8b, 2.0)
    kv = 8 * (PROMPT + 64)
    assert same.step(8, kv).total == d8b.step(8, kv).total
    assert d8b.step(8, kv).total - none.step(8, kv).total == pytest.approx(per_step, rel=1e-9)
    assert twice.step(8, kv).total - d8b.step(8, kv).total == pytest.approx(per_step, rel=1e-9)
    assert none.kv_capacity_tokens == d8b.kv_capacity_tokens and none.replicas == d8b.replicas


def test_overhead_sensitivity_brackets_the_fitted_bill(d8b):
    s = overhead_sensitivity(d8b, PROMPT, OUTPUT, 16)
    assert s.base == serving_cost(d8b, PROMPT, OUTPUT, 16)
    assert s.decode_overhead_s == d8b.efficiency.decode_overhead
    for f in ("dollars_per_million_output", "dollars_per_request"):
        assert getattr(s.low, f) < getattr(s.base, f) < getattr(s.high, f)
    # an affine step: the fitted bill sits midway between 0.5x and 1.5x
    mid = (s.low.dollars_per_million_output + s.high.dollars_per_million_output) / 2
    assert s.base.dollars_per_million_output == pytest.approx(mid, rel=1e-9)
    assert "0.5–1.5×" in s.sentence("output")
    with pytest.raises(ValueError, match="low must be at most high"):
        overhead_sensitivity(d8b, PROMPT, OUTPUT, 16, low=2.0, high=1.0)
    with pytest.raises(ValueError, match="factor"):
        with_decode_overhead(d8b, -0.5)
