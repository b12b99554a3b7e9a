"""The serving simulator (tpu_notes.inference.simulator) and its workloads (tpu_notes.inference.workload): exact
against the step model where a hand count exists, and each engine feature against the effect it must have."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tpu_notes.inference import simulator as S
from tpu_notes.inference.engine import deploy
from tpu_notes.inference.simulator import Disaggregation, Scheduler, SimResult, simulate, sweep
from tpu_notes.inference.workload import LengthDistribution as LD
from tpu_notes.inference.workload import Workload

P, G = 1000, 20


@pytest.fixture(scope="module")
def small():
    """Llama 3 8B on a v5e 2x2 (bf16): 317k tokens of KV pool."""
    return deploy("llama3-8b", "v5e", 4)


@pytest.fixture(scope="module")
def tight():
    """The same with 70% of HBM held back: a KV pool of about 24k tokens (KV pressure)."""
    return deploy("llama3-8b", "v5e", 4, reserve_fraction=0.7)


@pytest.fixture(scope="module")
def big():
    """Llama 3 70B on a v5e 4x4, int8 weights and caches."""
    return deploy("llama3-70b", "v5e", 16, weight_dtype="int8", kv_dtype="int8")


def _one(n_prompt=P, n_out=G):
    return Workload(n_requests=1, rate=1.0, prompt=LD.fixed(n_prompt), output=LD.fixed(n_out))


# ------------------------------------------------------------------------------------------ the simplest truth
def test_one_request_prefill_first_is_one_prefill_then_batch_one_steps(small):
    r = simulate(small, _one(), scheduler=Scheduler(policy="prefill_first"))
    assert r.ttft[0] == pytest.approx(small.prefill_step(P).total, rel=1e-9)
    # decode step k reads the prompt and k tokens (the one it writes included): contexts P+1 ... P+G-1
    tpot = sum(small.step(1, P + k).total for k in range(1, G)) / (G - 1)
    assert r.tpot[0] == pytest.approx(tpot, rel=1e-9)
    assert r.steps == 1 + (G - 1) and r.completed == 1 and r.tokens_all == (G,)
    # chip-seconds: the prefill step is prefill work, every other step decode work
    assert r.chip_seconds_prefill == pytest.approx(small.prefill_step(P).total * 4, rel=1e-9)
    assert r.chip_seconds_decode == pytest.approx(tpot * (G - 1) * 4, rel=1e-9)


def test_a_rate_so_low_nothing_queues_gives_the_same_times(small):
    w = Workload(n_requests=5, rate=1e-3, prompt=LD.fixed(P), output=LD.fixed(G), seed=1)
    r = simulate(small, w, scheduler=Scheduler(policy="prefill_first"))
    pre = small.prefill_step(P).total
    assert r.ttft[0] == pytest.approx(pre, rel=1e-9) and r.ttft[2] == pytest.approx(pre, rel=1e-9)
    assert r.peak_seqs == 1 and r.mean_batch == 1.0


def test_chunked_prefill_ttft_is_the_sum_of_its_chunk_steps(small):
    budget = 256
    r = simulate(small, _one(), scheduler=Scheduler(token_budget=budget, max_seqs=64))
    done, chunks = 0, []
    while done < P:
        c = min(budget, P - done)
        chunks.append(small.step(0, 0, c, c * done + c * (c + 1) / 2.0, done).total)
        done += c
    assert len(chunks) == 4
    assert r.ttft[0] == pytest.approx(sum(chunks), rel=1e-9)
    assert r.steps == len(chunks) + G - 1


# ------------------------------------------------------------------------------------------ paging
def test_paged_kv_runs_more_sequences_than_static_slots(small):
    mixed = dict(prompt=LD.lognormal(400, 1.0, 16, 4096), output=LD.lognormal(200, 1.0, 4, 4096))
    w = Workload.closed(200, n_requests=1500, seed=1, **mixed)
    paged = simulate(small, w)
    static = simulate(small, w, scheduler=Scheduler(kv="static"))
    assert paged.peak_seqs > 2.5 * static.peak_seqs  # 200 (every client) against 63 slots of the longest request
    assert paged.mean_batch > 1.5 * static.mean_batch
    assert paged.output_tokens_per_s > 1.2 * static.output_tokens_per_s
    assert paged.preemptions == static.preemptions == 0
    # fixed slots of 8192 tokens: fewer still
    fixed = simulate(small, w, scheduler=Scheduler(kv="static", slot_tokens=8192))
    assert fixed.peak_seqs == small.kv_capacity_tokens // 8192 < static.peak_seqs
    with pytest.raises(ValueError, match="slot_tokens"):
        simulate(small, w, scheduler=Scheduler(kv="static", slot_tokens=1024))


# ------------------------------------------------------------------------------------------ preemption
def test_preemption_under_kv_pressure_still_serves_every_token(tight):
    lengths = dict(prompt=LD.lognormal(300, 0.5, 16, 2048), output=LD.lognormal(400, 0.5, 16, 2048))
    w = Workload.closed(64, n_requests=300, seed=2, **lengths)
    for policy in ("chunked", "prefill_first"):
        r = simulate(tight, w, scheduler=Scheduler(policy=policy))
        assert r.preemptions > 50, policy
        assert r.completed == 300
        assert r.tokens_all == tuple(int(g) for g in w.draw().outputs)
        assert r.kv_utilisation > 0.5
    roomy = simulate(deploy("llama3-8b", "v5e", 4), w)
    assert roomy.preemptions == 0


def test_the_workload_must_fit_the_pool(tight):
    with pytest.raises(ValueError, match="does not fit"):
        simulate(tight, Workload(n_requests=2, rate=1.0, prompt=LD.fixed(30_000), output=LD.fixed(4)))
    with pytest.raises(ValueError, match="static"):
        simulate(tight, Workload(n_requests=2, rate=1.0, prompt=LD.fixed(20_000), output=LD.fixed(8_000)),
                 scheduler=Scheduler(kv="static"))  # fmt: skip


# ------------------------------------------------------------------------------------------ prefix caching
def test_prefix_caching_skips_the_shared_tokens(small):
    w = Workload(n_requests=200, rate=4.0, prompt=LD.fixed(64), output=LD.fixed(16), prefix_share=1.0,
                 prefix_len=2048, seed=3)  # fmt: skip
    cold = simulate(small, w)
    warm = simulate(small, w, scheduler=Scheduler(prefix_caching=True))
    assert warm.ttft[0] < 0.25 * cold.ttft[0]
    assert warm.chip_seconds_prefill < 0.2 * cold.chip_seconds_prefill
    # the first request still computes the whole prompt
    assert warm.ttft_all[0] == pytest.approx(cold.ttft_all[0], rel=1e-9)


# ------------------------------------------------------------------------------------------ disaggregation
HEAVY = dict(prompt=LD.fixed(8192), output=LD.fixed(256))


def test_disaggregation_keeps_tpot_flat_under_a_prefill_heavy_load(big):
    w = Workload.poisson(2.0, n_requests=300, seed=3, **HEAVY)
    mixed = simulate(big, w, scheduler=Scheduler(policy="prefill_first"))
    split = simulate(big, w, disaggregation=Disaggregation(big, 2, "ici"))
    assert split.tpot[2] < 0.2 * mixed.tpot[2]
    assert split.n_chips == 48 and split.prefill_steps > 0
    # every 8k prompt is longer than the token budget, so each runs alone: 300 whole prefills on 16 chips
    assert split.chip_seconds_prefill == pytest.approx(300 * big.prefill_step(8192).total * 16, rel=1e-9)


def test_at_light_load_disaggregation_buys_no_tpot_and_costs_chips(big):
    w = Workload.poisson(0.1, n_requests=100, seed=3, **HEAVY)
    mixed = simulate(big, w, scheduler=Scheduler(policy="prefill_first"))
    split = simulate(big, w, disaggregation=Disaggregation(big, 2, "ici"))
    assert split.tpot[0] == pytest.approx(mixed.tpot[0], rel=0.05)
    assert split.tokens_per_s_per_chip < 0.5 * mixed.tokens_per_s_per_chip
    assert split.output_tokens_per_s == pytest.approx(mixed.output_tokens_per_s, rel=0.02)


def test_a_slower_link_lengthens_the_ttft_the_user_sees_by_the_transfer(big):
    w = Workload.poisson(0.5, n_requests=50, seed=5, **HEAVY)
    fast = simulate(big, w, disaggregation=Disaggregation(big, 1, "ici"))
    slow = simulate(big, w, disaggregation=Disaggregation(big, 1, "dcn"))
    d_ici, d_dcn = Disaggregation(big, 1, "ici"), Disaggregation(big, 1, "dcn")
    assert fast.transfer_s == pytest.approx(d_ici.transfer_seconds(big, 8192), rel=1e-9)
    assert slow.transfer_s == pytest.approx(d_dcn.transfer_seconds(big, 8192), rel=1e-9)
    # 8192 tokens x 160 KiB: 1.34 GB at 16 x 45 GB/s x 0.82 (ICI) and at 16 x 3.125 GB/s x 0.5 (DCN)
    assert fast.transfer_s == pytest.approx(8192 * 163840 / (16 * 45e9 * 0.82) + 5e-6, rel=1e-6)
    assert slow.transfer_s > 20 * fast.transfer_s
    # the user's first token streams from the decode replica: after the transfer and its first decode step
    extra = slow.transfer_s - fast.transfer_s
    assert slow.ttft[0] - fast.ttft[0] == pytest.approx(extra, rel=0.2)
    pre = big.prefill_step(8192).total
    assert fast.ttft[0] > pre + fast.transfer_s  # prefill, transfer, then at least one decode step
    # counted at the prefill instead, TTFT ignores the link and the first TPOT interval takes the transfer
    fast_p = simulate(big, w, disaggregation=Disaggregation(big, 1, "ici"), ttft_at="prefill")
    slow_p = simulate(big, w, disaggregation=Disaggregation(big, 1, "dcn"), ttft_at="prefill")
    assert slow_p.ttft == fast_p.ttft and fast_p.ttft[0] < fast.ttft[0]
    assert slow_p.tpot[0] - fast_p.tpot[0] == pytest.approx(extra / 255, rel=0.3)
    # the largest stall of each stream holds the transfer when TTFT is counted at the prefill
    assert slow_p.tbt_max[0] > extra


def test_backpressure_a_full_decode_pool_stalls_the_prefill_instances(big):
    small_pool = deploy("llama3-70b", "v5e", 16, weight_dtype="int8", kv_dtype="int8", reserve_fraction=0.7)
    w = Workload.poisson(3.0, n_requests=200, seed=3, **HEAVY)
    free = simulate(big, w, disaggregation=Disaggregation(big, 2))
    assert free.prefill_stalls == 0 and free.transfer_wait_s == 0.0
    # a decode pool of 4 sequences: finished prefills wait for blocks in the prefill pools, which fill and stall
    jammed = simulate(small_pool, w, disaggregation=Disaggregation(small_pool, 2))
    assert jammed.prefill_stalls > 10 and jammed.prefill_stall_s > 10.0
    assert jammed.transfer_wait_s > 1.0 and jammed.peak_seqs <= 4
    # with a roomy prefill pool nothing stalls, and the wait for decode memory shows in the TTFT the user sees
    waiting = simulate(small_pool, w, disaggregation=Disaggregation(big, 2))
    assert waiting.prefill_stalls == 0 and waiting.transfer_wait_s > jammed.transfer_wait_s
    assert waiting.ttft[0] > free.ttft[0] + 0.5 * waiting.transfer_wait_s
    # counted at the prefill instance, the wait lands in the first TPOT interval instead
    waiting_p = simulate(small_pool, w, disaggregation=Disaggregation(big, 2), ttft_at="prefill")
    free_p = simulate(big, w, disaggregation=Disaggregation(big, 2), ttft_at="prefill")
    assert waiting_p.tpot[0] > 5 * free_p.tpot[0] and waiting_p.ttft[0] < waiting.ttft[0]


def test_disaggregation_refuses_a_mismatched_prefill(big, small):
    w = Workload.poisson(1.0, n_requests=5)
    with pytest.raises(ValueError, match="same model"):
        simulate(big, w, disaggregation=Disaggregation(small))
    with pytest.raises(ValueError, match="link"):
        Disaggregation(big, 1, "nvlink")


# ------------------------------------------------------------------------------------------ arrivals
def test_bursty_arrivals_raise_the_tail_ttft_at_the_same_mean_rate(small):
    poisson = simulate(small, Workload.poisson(20.0, n_requests=2000, seed=4))
    bursty = simulate(small, Workload.bursty(20.0, n_requests=2000, seed=4))
    gaps = np.diff(Workload.bursty(20.0, n_requests=2000, seed=4).draw().arrivals)
    assert gaps.mean() == pytest.approx(1 / 20.0, rel=0.1) and gaps.std() / gaps.mean() > 1.5
    assert bursty.ttft[2] > 1.3 * poisson.ttft[2]


@pytest.mark.parametrize("clients", [1, 8, 64])
def test_a_closed_loop_never_holds_more_requests_than_its_clients(small, clients):
    r = simulate(small, Workload.closed(clients, n_requests=300, seed=4))
    assert r.peak_in_system == clients  # reached, never passed
    assert r.peak_seqs <= clients and r.completed == 300


# ------------------------------------------------------------------------------------------ results
def test_determinism_and_the_result_record(small):
    w = Workload.poisson(10.0, n_requests=300, seed=7)
    a, b = simulate(small, w), simulate(small, w)
    assert a == b
    assert simulate(small, replace(w, seed=8)) != a
    assert a.ttft[0] <= a.ttft[1] <= a.ttft[2] and a.tpot[0] <= a.tpot[1] <= a.tpot[2]
    assert len(a.ttft_all) == len(a.tpot_all) == len(a.tokens_all) == 300
    assert a.goodput(1e9, 1e9) == pytest.approx(300 / a.duration)
    assert a.goodput(1e-6, 1e-6) == 0.0
    ttft, tpot = np.array(a.ttft_all), np.array(a.tpot_all)
    assert a.goodput(a.ttft[0], 1.0) == pytest.approx((ttft <= a.ttft[0]).sum() / a.duration)
    assert 0 < a.goodput(1.0, a.tpot[0]) < a.goodput(1.0, 1.0)
    assert (tpot >= 0).all()
    total = sum(a.tokens_all)
    assert a.output_tokens_per_s == pytest.approx(total / a.duration)
    assert a.tokens_per_s_per_chip == pytest.approx(total / a.duration / 4)
    row = a.row()
    assert row["ttft_p99_s"] == a.ttft[2] and row["n_chips"] == 4
    assert "TTFT" in repr(a) and "chunked" in repr(a)
    assert a.chip_seconds == pytest.approx(a.chip_seconds_prefill + a.chip_seconds_decode)


def test_mixed_steps_split_chip_seconds_by_their_parts(small):
    # a closed loop keeps the replica busy from the first arrival to the last token: every second is a step's
    w = Workload.closed(16, n_requests=200, seed=1)
    r = simulate(small, w)
    assert r.chip_seconds == pytest.approx(r.duration * 4, rel=1e-9)
    # most steps mix decode tokens with a prompt chunk; each is split by what its parts would cost alone
    assert 0 < r.chip_seconds_prefill < r.chip_seconds_decode
    d, kv, c, done = 16, 16 * 400, 100, 0
    whole = small.step(d, kv, c, c * done + c * (c + 1) / 2.0, done).total
    alone = small.step(d, kv).total, small.step(0, 0, c, c * (c + 1) / 2.0, 0).total
    cp, cd = S._split(small, d, kv, c, c * (c + 1) / 2.0, 0, whole)
    assert cp + cd == pytest.approx(whole) and cp / cd == pytest.approx(alone[1] / alone[0])


def test_sweep_returns_rows_for_the_chart(small):
    from tpu_notes.plots.serving import percentiles_vs_load_chart

    w = Workload.poisson(1.0, n_requests=60, prompt=LD.fixed(512), output=LD.fixed(32), seed=2)
    engines = S.default_engines()
    rows = sweep(small, w, [2.0, 8.0], engines)
    assert len(rows) == 4 and {r["label"] for r in rows} == set(engines)
    assert all(isinstance(r["result"], SimResult) for r in rows)
    fig = percentiles_vs_load_chart(rows)
    assert len(fig.axes) == 2 and all(len(ax.lines) == 2 * len(engines) for ax in fig.axes)
    assert fig.get_figwidth() <= 7.2 + 1e-9
    with pytest.raises(ValueError, match="rates x engines"):
        sweep(small, w, [1.0] * 40, engines)
    with pytest.raises(ValueError, match="rows"):
        percentiles_vs_load_chart([])
    with pytest.raises(ValueError, match="arrival rate"):
        sweep(small, Workload.closed(4, n_requests=10), [1.0], engines)
    import matplotlib.pyplot as plt

    plt.close(fig)


# ------------------------------------------------------------------------------------------ bounded
def test_the_caps_raise_naming_what_to_reduce(small, monkeypatch):
    with pytest.raises(ValueError, match="n_requests"):
        Workload(n_requests=S.MAX_REQUESTS + 1, rate=1.0)
    monkeypatch.setattr(S, "MAX_STEPS", 50)
    with pytest.raises(ValueError, match="MAX_STEPS.*n_requests"):
        simulate(small, Workload.poisson(1.0, n_requests=20))
    monkeypatch.setattr(S, "MAX_STEPS", 2_000_000)
    monkeypatch.setattr(S, "MAX_BLOCKS", 1000)
    with pytest.raises(ValueError, match="MAX_BLOCKS.*block_size"):
        simulate(small, Workload.poisson(1.0, n_requests=20))
    assert simulate(small, Workload.poisson(1.0, n_requests=20), scheduler=Scheduler(block_size=512)).completed


def test_ten_thousand_sharegpt_requests_on_a_70b_replica_take_few_engine_steps(big):
    """The simulator's work is its engine steps (each one vectorised update of the running batch): 10,000 requests,
    2.3 million generated tokens, in under 25,000 steps (a stream of about 500 s at steps of 20-30 ms: the count
    follows the step's length, not the requests'). Counted, not timed; the wall time (target 2 s on 2 cores) is
    benchmarks/serving.py's, in `make bench`."""
    w = Workload.poisson(20.0, n_requests=10_000, seed=0)
    r = simulate(big, w)
    assert r.completed == 10_000 and r.mean_batch > 50
    assert r.prefill_steps == 0 and r.steps < 25_000
    assert sum(r.tokens_all) > 100 * r.steps  # batching: over a hundred tokens per step on average


# ------------------------------------------------------------------------------------------ workloads
def test_length_distributions_mean_and_sample():
    rng = np.random.default_rng(0)
    for d in (LD.lognormal(300, 0.8, 4, 2048), LD.sharegpt_like("prompt"), LD.sharegpt_like("output")):
        x = d.sample(rng, 200_000)
        assert x.dtype == np.int64 and x.min() >= d.low and x.max() <= d.high
        assert x.mean() == pytest.approx(d.mean, rel=0.01)
    assert LD.fixed(7).mean == 7 and (LD.fixed(7).sample(rng, 3) == 7).all()
    # the ShareGPT-like means against the ShareGPT replay they were fitted to (120.7 and 233.4 tokens)
    assert LD.sharegpt_like("prompt").mean == pytest.approx(214914 / 1780, rel=0.02)
    assert LD.sharegpt_like("output").mean == pytest.approx(415416 / 1780, rel=0.02)


def test_workloads_draw_deterministically_and_validate():
    w = Workload(n_requests=50, rate=2.0, prefix_share=0.5, prefix_len=100, seed=9)
    a, b = w.draw(), w.draw()
    assert (a.prompts == b.prompts).all() and (a.arrivals == b.arrivals).all()
    assert (a.prompts[a.shared_prefix] > 100).all() and 0 < a.shared_prefix.sum() < 50
    assert w.mean_prompt == pytest.approx(LD.sharegpt_like().mean + 50)
    closed = Workload.closed(4, n_requests=10).draw().arrivals
    assert (closed[:4] == 0).all() and np.isnan(closed[4:]).all()
    for kwargs, name in [
        (dict(rate=None), "rate"),
        (dict(rate=1.0, arrival="closed", concurrency=2), "rate"),
        (dict(arrival="closed", concurrency=None), "concurrency"),
        (dict(rate=1.0, concurrency=3), "concurrency"),
        (dict(rate=1.0, cv=3.0), "cv"),
        (dict(rate=1.0, arrival="uniform"), "arrival"),
        (dict(rate=1.0, prefix_share=0.5), "prefix_len"),
        (dict(rate=1.0, prefix_len=10), "prefix_share"),
        (dict(rate=1.0, prompt=512), "prompt"),
    ]:
        with pytest.raises((ValueError, TypeError), match=name):
            Workload(**kwargs)
    with pytest.raises(ValueError, match="cv"):
        Workload.bursty(1.0, cv=1.0)
    with pytest.raises(ValueError, match="weights"):
        LD(((0.5, 10.0, 0.1),))


def test_schedulers_validate():
    for kwargs, name in [
        (dict(policy="fifo"), "policy"),
        (dict(token_budget=128, max_seqs=256), "token_budget"),
        (dict(kv="static", prefix_caching=True), "prefix_caching"),
        (dict(preemption="swap"), "preemption"),
        (dict(block_size=0), "block_size"),
        (dict(slot_tokens=4096), "slot_tokens"),
    ]:
        with pytest.raises((ValueError, TypeError), match=name):
            Scheduler(**kwargs)


@pytest.mark.parametrize(
    "call, name",
    [
        (lambda d: simulate("llama3-8b", Workload.poisson(1.0)), "deployment"),
        (lambda d: simulate(d, 3), "workload"),
        (lambda d: simulate(d, Workload.poisson(1.0), scheduler="chunked"), "scheduler"),
        (lambda d: simulate(d, Workload.poisson(1.0), disaggregation=d), "disaggregation"),
        (lambda d: Workload.poisson(0.0), "rate"),
        (lambda d: Workload.poisson(-1.0), "rate"),
    ],
)
def test_bad_input_names_the_argument(small, call, name):
    with pytest.raises((ValueError, TypeError), match=name):
        call(small)


def test_the_simulator_does_not_import_jax():
    import subprocess
    import sys

    code = (
        "import sys; from tpu_notes.inference.engine import deploy; "
        "from tpu_notes.inference.simulator import simulate; from tpu_notes.inference.workload import Workload; "
        "simulate(deploy('llama3-8b', 'v5e', 4), Workload.poisson(1.0, n_requests=5)); print('jax' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
