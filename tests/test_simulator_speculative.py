"""Speculative decoding in the simulator (:class:`tpu_notes.inference.simulator.Speculation`): its clock is the
analytic round (:func:`tpu_notes.inference.speculative.round_seconds`), a lone request's time per output token is
that round over the tokens a round yields, and at load its advantage shrinks."""

from __future__ import annotations

import math

import pytest

from tpu_notes.inference.engine import deploy
from tpu_notes.inference.simulator import Disaggregation, Scheduler, Speculation, _colocated, _Spec, simulate
from tpu_notes.inference.speculative import draft_deployment, expected_tokens_per_round, round_seconds
from tpu_notes.inference.workload import LengthDistribution as LD
from tpu_notes.inference.workload import Workload


@pytest.fixture(scope="module")
def dep():
    return deploy("llama3-8b", "v5e", 4, weight_dtype="int8", kv_dtype="int8")


def _alone(prompt: int, output: int, n: int = 3) -> Workload:
    """``n`` requests far apart: each runs alone (batch 1)."""
    return Workload.poisson(1e-3, n_requests=n, prompt=LD.fixed(prompt), output=LD.fixed(output))


@pytest.mark.parametrize("draft", [None, "eagle", "llama3.2-1b"])
def test_round_clock_is_the_analytic_round(dep, draft):
    sp = _Spec(dep, Speculation(draft, 4, 0.7))
    d = None if draft is None else draft_deployment(dep, draft)
    for n, kv in [(1, 1000), (8, 8 * 4000), (64, 64 * 700)]:
        assert sp.seconds(n, kv) == pytest.approx(round_seconds(dep, d, n, kv, 4), rel=1e-12)


@pytest.mark.parametrize("draft", [None, "eagle"])
def test_no_acceptance_costs_a_round_per_token(dep, draft):
    """Acceptance near 0: one token per round, so a lone request's TPOT is the round's time, at least a plain step."""
    P, G, k = 1024, 129, 4
    wl = _alone(P, G)
    plain = simulate(dep, wl)
    spec = simulate(dep, wl, speculative=Speculation(draft, k, 1e-9))
    d = None if draft is None else draft_deployment(dep, draft)
    # the round's time is linear in context: the mean over the G - 1 rounds is the round at the mean context
    mid = round_seconds(dep, d, 1, P + 1 + (G - 2) // 2, k)
    assert spec.tpot[0] == pytest.approx(mid, rel=2e-3)
    assert spec.tpot[0] >= plain.tpot[0]
    assert sum(spec.tokens_all) == sum(plain.tokens_all) == 3 * G


def test_lone_request_tpot_is_round_over_tokens_per_round(dep):
    """Acceptance 0.9: the G - 1 tokens after the first take ceil((G - 1) / tau) rounds (the expected tau accumulated
    per sequence), so TPOT lies in [round / tau, round / tau * (1 + tau / (G - 1))], the round taken at the mean
    context (linear in it) within 0.5%."""
    P, G, k, a = 2048, 257, 4, 0.9
    tau = expected_tokens_per_round(a, k)
    r = simulate(dep, _alone(P, G), speculative=Speculation("eagle", k, a))
    rnd = round_seconds(dep, "eagle", 1, P + 1 + (G - 2) // 2, k)
    lo, hi = rnd / tau * (1 - 5e-3), rnd / tau * (1 + tau / (G - 1) + 5e-3)
    assert lo <= r.tpot[0] <= hi
    assert r.tpot[0] < simulate(dep, _alone(P, G)).tpot[0]  # an EAGLE head at 0.9 pays at batch 1
    # tokens of one round arrive together: about (tau - 1) / tau of the gaps are 0
    assert r.tbt[0] == 0.0
    assert r.tbt[2] == pytest.approx(rnd, rel=0.05)


def test_advantage_shrinks_with_load(dep):
    """Closed loops of 1 and 128 clients: speculation's output tokens/s over plain decoding falls as the batch grows
    (the verify step's k + 1 rows per sequence turn the matmuls compute-bound)."""
    sp = Speculation("eagle", 4, 0.7)

    def ratio(c):
        wl = Workload.closed(c, n_requests=max(8, 2 * c), prompt=LD.fixed(256), output=LD.fixed(128))
        return simulate(dep, wl, speculative=sp).output_tokens_per_s / simulate(dep, wl).output_tokens_per_s

    light, heavy = ratio(1), ratio(128)
    assert light > 1.5
    assert heavy < light - 0.3


def test_pool_shrinks_and_preemption_conserves_tokens(dep):
    """A draft model's weights and cache come out of the target's pool: fewer blocks; under pressure sequences are
    preempted, every block comes back and every request gets all its tokens."""
    sch = Scheduler(token_budget=8192, max_seqs=256)
    wl = Workload.closed(256, n_requests=384, prompt=LD.fixed(4096), output=LD.fixed(1024))
    sp = _Spec(dep, Speculation("llama3.2-1b", 4, 0.8))
    assert sp.cap < dep.kv_capacity_tokens
    runs, *_ = _colocated(dep, sch, wl, "least-loaded", sp)
    r = runs[0]
    assert r.pool == sp.cap // sch.block_size
    assert r.preemptions > 0
    assert r.free == r.pool and r.n_dec == 0 and r.ctx == 0
    assert r.gen == r.G


def test_disaggregated_and_replicas_run(dep):
    wl = Workload.poisson(4.0, n_requests=60, prompt=LD.fixed(512), output=LD.fixed(64))
    sp = Speculation("eagle", 3, 0.8)
    dis = simulate(dep, wl, disaggregation=Disaggregation(dep, 1), speculative=sp)
    rep = simulate(deploy("llama3-8b", "v5e", 4, weight_dtype="int8", kv_dtype="int8", replicas=2), wl,
                   speculative=sp)  # fmt: skip
    for res in (dis, rep):
        assert sum(res.tokens_all) == 60 * 64
        assert "speculative: eagle" in res.engine
        assert math.isfinite(res.tpot[0]) and res.tpot[0] > 0


def test_prefill_first_and_static(dep):
    wl = Workload.poisson(2.0, n_requests=40, prompt=LD.fixed(512), output=LD.fixed(64))
    sp = Speculation(None, 4, 0.6)
    for sch in (Scheduler(policy="prefill_first"), Scheduler(kv="static")):
        res = simulate(dep, wl, scheduler=sch, speculative=sp)
        assert sum(res.tokens_all) == 40 * 64
        assert res.tpot[0] < simulate(dep, wl, scheduler=sch).tpot[0]  # a free draft always helps at light load


@pytest.mark.parametrize(
    "kwargs, err, match",
    [
        (dict(draft="eagle", k=0, acceptance=0.5), ValueError, "k"),
        (dict(draft="eagle", k=4, acceptance=1.5), ValueError, "acceptance"),
        (dict(draft=3, k=4, acceptance=0.5), TypeError, "draft"),
    ],
)
def test_speculation_refusals(kwargs, err, match):
    with pytest.raises(err, match=match):
        Speculation(**kwargs)


def test_simulate_refusals(dep):
    wl = _alone(256, 16)
    with pytest.raises(TypeError, match="speculative"):
        simulate(dep, wl, speculative="eagle")
    with pytest.raises(ValueError, match="vocabulary"):
        simulate(dep, wl, speculative=Speculation("llama2-7b", 4, 0.7))
    with pytest.raises(ValueError, match="smaller than"):
        simulate(dep, wl, speculative=Speculation("llama3-70b", 4, 0.7))
    with pytest.raises(ValueError, match="rows in one verify step"):
        big = Scheduler(token_budget=2**16, max_seqs=2**16)
        simulate(dep, wl, scheduler=big, speculative=Speculation(None, 64, 0.7))
    tight = deploy("llama3-8b", "v5e", 1, weight_dtype="int8", kv_dtype="int8", reserve_fraction=0.45)
    assert 0 < tight.kv_capacity_tokens * tight.kv_bytes_per_token < draft_deployment(tight, "llama3.2-1b").weight_bytes
    with pytest.raises(ValueError, match="speculative.draft: .*no KV pool"):
        simulate(tight, wl, speculative=Speculation("llama3.2-1b", 4, 0.7))
