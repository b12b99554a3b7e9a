"""Replicas behind a router, the metrics users feel (time between tokens, TTFT where the stream starts, trimmed
percentiles), closed-loop jitter, and DistServe's goodput (tpu_notes.inference.goodput)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tpu_notes.inference.engine import deploy
from tpu_notes.inference.goodput import SLO, GoodputResult, best_serving, max_rate_at_attainment
from tpu_notes.inference.simulator import Disaggregation, Scheduler, simulate
from tpu_notes.inference.workload import LengthDistribution as LD
from tpu_notes.inference.workload import Workload


@pytest.fixture(scope="module")
def small():
    """Llama 3 8B on a v5e 2x2 (bf16)."""
    return deploy("llama3-8b", "v5e", 4)


@pytest.fixture(scope="module")
def big():
    """Llama 3 70B on a v5e 4x4, int8 weights and caches."""
    return deploy("llama3-70b", "v5e", 16, weight_dtype="int8", kv_dtype="int8")


# ------------------------------------------------------------------------------------------ routers
def test_round_robin_spreads_requests_evenly(small):
    w = Workload.poisson(20.0, n_requests=400, seed=1)
    r = simulate(replace(small, replicas=4), w, router="round-robin")
    counts = np.bincount(r.replica_all, minlength=4)
    assert counts.tolist() == [100, 100, 100, 100]
    assert r.n_chips == 16 and r.replicas == 4 and r.completed == 400


def test_least_loaded_beats_round_robin_on_tail_ttft_for_skewed_lengths(small):
    # one request in five is a 6k-token document, the rest are short chat turns: round-robin piles documents
    # onto whichever replica's turn they fall on; counting outstanding tokens spreads them
    prompt = LD.mixture(((0.8, 100.0, 0.3), (0.2, 6000.0, 0.1)), low=16, high=8192)
    w = Workload(n_requests=2000, rate=45.0, prompt=prompt, output=LD.fixed(64), seed=2)
    dep = replace(small, replicas=4)
    rr = simulate(dep, w, router="round-robin")
    ll = simulate(dep, w, router="least-loaded")
    assert ll.ttft[2] < 0.9 * rr.ttft[2]


def test_prefix_aware_keeps_the_shared_prefix_on_few_replicas(small):
    w = Workload(n_requests=400, rate=10.0, prompt=LD.fixed(64), output=LD.fixed(32), prefix_share=0.5,
                 prefix_len=2048, seed=3)  # fmt: skip
    dep = replace(small, replicas=4)
    sch = Scheduler(prefix_caching=True)
    aware = simulate(dep, w, scheduler=sch, router="prefix-aware")
    plain = simulate(dep, w, scheduler=sch, router="round-robin")
    shared = np.asarray(w.draw().shared_prefix)
    holders = set(np.asarray(aware.replica_all)[shared].tolist())
    assert len(holders) < 4  # sticky: the prefix lives on fewer replicas than round-robin spreads it over
    # fewer prefix prefills: less prefill work in all
    assert aware.chip_seconds_prefill < plain.chip_seconds_prefill


def test_two_replicas_at_twice_the_rate_serve_like_one_at_the_rate(small):
    # independent Poisson streams split between identical replicas: each sees about half of 2r. With 2,000 requests
    # per replica the p50s of TTFT and TPOT are estimated to a few per cent (their spread across seeds, below, is
    # the tolerance's yardstick); least-loaded routing can only make the pair better, never much worse
    one = [simulate(small, Workload.poisson(8.0, n_requests=2000, seed=s)) for s in (0, 1)]
    two = simulate(replace(small, replicas=2), Workload.poisson(16.0, n_requests=4000, seed=7))
    spread = abs(one[0].tpot[0] - one[1].tpot[0]) / one[0].tpot[0]
    tol = max(0.1, 3 * spread)
    assert two.tpot[0] == pytest.approx(one[0].tpot[0], rel=tol)
    assert two.ttft[0] <= one[0].ttft[0] * (1 + tol)
    assert two.output_tokens_per_s == pytest.approx(2 * one[0].output_tokens_per_s, rel=0.1)


def test_router_and_replica_refusals(small):
    w = Workload.poisson(2.0, n_requests=10)
    with pytest.raises(ValueError, match="router"):
        simulate(small, w, router="random")
    with pytest.raises(ValueError, match="warmup"):
        simulate(small, w, warmup=0.6, drain=0.5)
    with pytest.raises(ValueError, match="replicas"):
        simulate(replace(small, replicas=1000), w)


# ------------------------------------------------------------------------------------------ metrics users feel
def test_prefill_first_stalls_a_stream_for_at_least_a_whole_prompt(small):
    # one long request decoding, then a second arrives: prefill-first pauses the first's stream for the prompt
    w = Workload(n_requests=2, rate=1.0, prompt=LD.fixed(4096), output=LD.fixed(400), seed=0)
    pre = small.prefill_step(4096).total
    r = simulate(small, w, scheduler=Scheduler(policy="prefill_first", token_budget=8192), warmup=0, drain=0)
    assert max(r.tbt_max_all) >= pre
    chunked = simulate(small, w, warmup=0, drain=0)
    assert max(chunked.tbt_max_all) < pre  # chunks of 2,048 tokens: a stall of about half a prompt at most
    # TPOT (the mean) hides it: far below the stall
    assert r.tpot[2] < 0.2 * pre


def test_time_between_tokens_of_one_request_alone_is_its_decode_steps(small):
    w = Workload(n_requests=1, rate=1.0, prompt=LD.fixed(1000), output=LD.fixed(20))
    r = simulate(small, w, scheduler=Scheduler(policy="prefill_first"))
    steps = [small.step(1, 1000 + k).total for k in range(1, 20)]
    assert r.tbt[0] == pytest.approx(float(np.percentile(steps, 50, method="inverted_cdf")), rel=1e-9)
    assert r.tbt_max_all[0] == pytest.approx(max(steps), rel=1e-9)
    assert r.tpot[0] == pytest.approx(sum(steps) / 19, rel=1e-9)


def test_disaggregated_ttft_grows_with_the_kv_transfer(big):
    w = Workload.poisson(0.3, n_requests=40, prompt=LD.fixed(8192), output=LD.fixed(64), seed=2)
    ici = simulate(big, w, disaggregation=Disaggregation(big, 1, "ici"))
    dcn = simulate(big, w, disaggregation=Disaggregation(big, 1, "dcn"))
    extra = Disaggregation(big, 1, "dcn").transfer_seconds(big, 8192) - Disaggregation(big, 1, "ici").transfer_seconds(
        big, 8192
    )
    assert dcn.ttft[0] - ici.ttft[0] == pytest.approx(extra, rel=0.2)
    at_prefill = simulate(big, w, disaggregation=Disaggregation(big, 1, "dcn"), ttft_at="prefill")
    assert at_prefill.ttft[0] < dcn.ttft[0] - extra * 0.8


def test_trimming_removes_the_warm_up(small):
    # a burst: 300 requests at once on an idle server; the first to be served see no queue, the last the longest
    w = Workload.poisson(1e4, n_requests=300, prompt=LD.fixed(2000), output=LD.fixed(16), seed=0)
    raw = simulate(small, w, warmup=0, drain=0)
    trimmed = simulate(small, w, warmup=0.3, drain=0)
    assert trimmed.ttft[0] > raw.ttft[0]
    win = trimmed.window()
    assert win.sum() == 210 and raw.window().all()
    ttft = np.asarray(trimmed.ttft_all)
    assert trimmed.ttft[0] == pytest.approx(float(np.percentile(ttft[win], 50)))
    assert len(trimmed.ttft_all) == 300  # the raw arrays keep every request


def test_closed_loop_jitter_breaks_synchronised_waves(small):
    def same_instant_share(r):
        a = np.sort(np.asarray(r.arrivals_all))[64:]  # after the clients' first requests
        return float(np.mean(np.diff(a) == 0.0))

    kw = dict(prompt=LD.fixed(512), output=LD.fixed(128))
    waves = simulate(small, Workload.closed(64, 640, jitter=0.0, **kw))
    jittered = simulate(small, Workload.closed(64, 640, **kw))
    assert same_instant_share(waves) > 0.6  # clients finish in the same step and come back together
    assert same_instant_share(jittered) < 0.6 * same_instant_share(waves)
    assert jittered.ttft[0] < waves.ttft[0]  # no wave of 64 prompts queueing behind each other
    with pytest.raises(ValueError, match="jitter"):
        Workload(n_requests=10, rate=1.0, jitter=0.1)


# ------------------------------------------------------------------------------------------ goodput
def test_slo_attainment_and_slo_requests_per_s(small):
    r = simulate(small, Workload.poisson(10.0, n_requests=300, seed=1))
    loose, tight = SLO(10.0, 1.0), SLO(r.ttft[0], r.tpot[0])
    assert r.attainment(loose) == 1.0
    win = r.window()
    ttft, tpot = np.asarray(r.ttft_all), np.asarray(r.tpot_all)
    ok = (ttft <= r.ttft[0]) & (tpot <= r.tpot[0])
    assert r.attainment(tight) == pytest.approx(ok[win].mean())
    assert r.slo_requests_per_s(tight) == pytest.approx(ok.sum() / r.duration)
    assert r.goodput(r.ttft[0], r.tpot[0]) == r.slo_requests_per_s(tight)  # the deprecated name
    with_tbt = SLO(10.0, 1.0, tbt_s=float(np.median(r.tbt_max_all)))
    assert r.attainment(with_tbt) < 1.0
    with pytest.raises(ValueError, match="ttft_s"):
        SLO(0.0, 1.0)
    with pytest.raises(TypeError, match="slo"):
        r.attainment((1.0, 0.05))


@pytest.fixture(scope="module")
def searches(small):
    w = Workload.poisson(4.0, n_requests=400, seed=0)
    tight = max_rate_at_attainment(small, w, SLO(0.5, 0.03), rtol=0.05)
    loose = max_rate_at_attainment(small, w, SLO(2.0, 0.05), rtol=0.05)
    return w, tight, loose


def test_max_rate_meets_the_attainment_and_a_tenth_more_does_not(small, searches):
    w, tight, loose = searches
    for g in (tight, loose):
        assert isinstance(g, GoodputResult) and g.rate_per_s > 0
        assert g.attainment >= 0.9 and g.result.attainment(g.slo) == g.attainment
        assert g.per_chip == g.rate_per_s / 4
        over = simulate(small, replace(w, rate=1.1 * g.rate_per_s))
        assert over.attainment(g.slo) < 0.9 or "probes ran out" in g.bracket
        assert len(g.probes) <= 16


def test_max_rate_is_monotone_in_the_slo(searches):
    _, tight, loose = searches
    assert loose.rate_per_s >= tight.rate_per_s


def test_max_rate_says_why_when_no_rate_meets_it(small):
    w = Workload.poisson(4.0, n_requests=100, prompt=LD.fixed(8000), output=LD.fixed(16))
    g = max_rate_at_attainment(small, w, SLO(small.prefill_step(8000).total / 2, 0.05))
    assert g.rate_per_s == 0.0 and g.result is None and "idle server" in g.bracket
    with pytest.raises(ValueError, match="arrival rate"):
        max_rate_at_attainment(small, Workload.closed(4, 20), SLO(1.0, 0.05))


def test_best_serving_ranks_layouts_by_goodput_per_chip():
    w = Workload.poisson(4.0, n_requests=200, prompt=LD.fixed(512), output=LD.fixed(64), seed=0)
    out = best_serving("llama3-8b", "v5e", 8, w, SLO(1.0, 0.05), max_candidates=4, max_probes=8, rtol=0.2)
    assert out and all(g.n_chips <= 8 for g in out)
    per_chip = [g.per_chip for g in out]
    assert per_chip == sorted(per_chip, reverse=True)
    assert any(g.deployment.replicas > 1 for g in out)
