"""Speculative decoding with a named draft priced through the engine (tpu_notes.inference.speculative): draft models
on the target's chips, EAGLE/MTP heads, acceptance as engines report it, and the round clock a simulator uses.

Every expectation is rebuilt from engine parts (``deploy(...).decode_step``, ``Deployment.step``) or from the
published model configurations, never typed from the code's own output."""

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_notes.__main__ import main
from tpu_notes.inference import speculative as spec
from tpu_notes.inference.engine import MAX_ROWS, deploy
from tpu_notes.inference.step import weight_params_read
from tpu_notes.transformer import PUBLISHED_PARAMS, get_model

INT8 = dict(weight_dtype="int8", kv_dtype="int8")
#: Chapter 7's setup (notebooks/07_inference.ipynb, "07-201"): Llama 3 70B, int8 weights and cache, 32 v5e chips,
#: 8k context, 4 drafts, acceptance 0.7, batch 1 (the headline), the draft's step assumed at 5% of the target's.
S, K, A = 8192, 4, 0.7
ASSUMED = 0.05


@pytest.fixture(scope="module")
def v5e():
    return deploy("llama3-70b", "v5e", 32, **INT8)


@pytest.fixture(scope="module")
def h100():
    return deploy("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")


# ------------------------------------------------------------------------------------------- the draft models
@pytest.mark.parametrize("name", ["llama3.2-1b", "llama3.2-3b"])
def test_llama32_presets_match_the_published_totals_and_shapes(name):
    # Meta's released config.json: 1B is 16 layers of width 2048 (32 heads of 64, 8 KV heads, MLP 8192); 3B is 28
    # of width 3072 (24 heads of 128, 8 KV heads, MLP 8192); both tie the 128,256-token embedding. The total by the
    # formula sheet, with the tied embedding counted once: L(3DF + 2D(N+K)H + 2D) + D + VD.
    L, D, F, N, H = {"llama3.2-1b": (16, 2048, 8192, 32, 64), "llama3.2-3b": (28, 3072, 8192, 24, 128)}[name]
    Kh, V = 8, 128_256
    m = get_model(name)
    by_hand = L * (3 * D * F + 2 * D * (N + Kh) * H + 2 * D) + D + V * D
    assert m.param_count() == by_hand == PUBLISHED_PARAMS[name]
    assert m.tied_embeddings and m.vocab == get_model("llama3-70b").vocab
    assert m.kv_bytes_per_token("bf16") == 2 * L * Kh * H * 2


@pytest.mark.parametrize("setup", ["v5e", "h100"])
def test_a_named_1b_draft_is_priced_from_engine_parts_and_is_below_the_5_percent_assumption(setup, request):
    t = request.getfixturevalue(setup)
    r = spec.speculative_decoding(t, 1, S, K, A, draft="llama3.2-1b")
    dtypes = dict(weight_dtype=t.weight_dtype, kv_dtype=t.kv_dtype, compute_dtype=t.compute_dtype)
    draft_step = deploy("llama3.2-1b", t.system, check_memory=False, **dtypes).decode_step(1, S)
    verify = t.step(1, S, K, K * (K + 1) / 2)
    plain = t.step(1, S)
    tokens = (1 - A ** (K + 1)) / (1 - A)
    round_s = K * draft_step.total + verify.total
    assert r.round_s == pytest.approx(round_s, rel=1e-12)
    assert r.speedup == pytest.approx(tokens / (round_s / plain.total), rel=1e-12)
    assert r.draft == "llama3.2-1b" and r.draft_cost == pytest.approx(draft_step.total / plain.total)
    assumed = spec.speculative_decoding(t, 1, S, K, A, draft_cost=ASSUMED)
    assert r.speedup < assumed.speedup < spec.speculative_speedup(A, K, ASSUMED) * 1.01
    # the draft's engine step pays the per-layer overhead of its 16 layers: 16/80 of the target's, alone above 5%
    assert draft_step.overhead / plain.overhead == pytest.approx(16 / 80)
    assert r.draft_cost > 16 / 80 * plain.overhead / plain.total > ASSUMED


def test_a_larger_draft_costs_more_and_buys_less(v5e):
    small = spec.speculative_decoding(v5e, 1, S, K, A, draft="llama3.2-1b")
    big = spec.speculative_decoding(v5e, 1, S, K, A, draft="llama3-8b")
    assert big.draft_cost > small.draft_cost and big.speedup < small.speedup
    # a Deployment of the same draft on the same chips prices the same step
    same = deploy("llama3-8b", v5e.system, check_memory=False, **INT8)
    assert spec.speculative_decoding(v5e, 1, S, K, A, draft=same).speedup == pytest.approx(big.speedup)


def test_a_draft_on_the_target_chips_takes_its_weights_and_caches_from_the_target_pool(v5e):
    d = spec.draft_deployment(v5e, "llama3-8b")
    pool = v5e.kv_capacity_tokens * v5e.kv_bytes_per_token
    per_seq = (S + K + 1) * v5e.kv_bytes_per_token + (S + K) * d.kv_bytes_per_token
    most = int((pool - d.weight_bytes) // per_seq)
    assert most < v5e.max_batch(S + K + 1)
    assert spec.speculative_decoding(v5e, most, S, K, A, draft="llama3-8b").batch == most
    with pytest.raises(ValueError, match=f"batch={most + 1}.*largest batch that fits is {most}"):
        spec.speculative_decoding(v5e, most + 1, S, K, A, draft="llama3-8b")
    rows = spec.speculative_vs_batch(v5e, S, K, A, (1, most, most + 1, 512), draft="llama3-8b")
    assert [r.batch for r in rows] == [1, most]


def test_draft_refusals_name_the_draft(v5e):
    with pytest.raises(ValueError, match="draft 'llama2-7b'.*same vocabulary"):
        spec.draft_deployment(v5e, "llama2-7b")
    with pytest.raises(ValueError, match="must be smaller than the target"):
        spec.draft_deployment(v5e, "llama3-405b")
    with pytest.raises(ValueError, match="draft 'llama3.2-3b' cannot be laid out.*24 query heads"):
        spec.speculative_decoding(v5e, 1, S, K, A, draft="llama3.2-3b")
    with pytest.raises(ValueError, match="unknown draft.*eagle"):
        spec.speculative_decoding(v5e, 1, S, K, A, draft="nosuch")
    with pytest.raises(TypeError, match="draft must be"):
        spec.draft_deployment(v5e, 3.0)
    with pytest.raises(ValueError, match="not both"):
        spec.speculative_decoding(v5e, 1, S, K, A, draft="llama3.2-1b", draft_cost=ASSUMED)
    # on 8 chips the 3B draft's 24 query heads and 8 KV heads split whole, so it lays out
    eight = deploy("llama3-70b", "v5e", 8, **INT8)
    assert spec.speculative_decoding(eight, 1, 1024, K, A, draft="llama3.2-3b").draft == "llama3.2-3b"


# ------------------------------------------------------------------------------------------- EAGLE / MTP heads
@pytest.mark.parametrize("batch", [1, 64])
def test_a_draft_head_costs_one_layer_of_the_target_plus_its_lm_head(v5e, batch):
    head = spec.draft_head(v5e)
    t, h, L = v5e.step(batch, batch * S), head.step(batch, batch * S), v5e.model.n_layers
    # the parts that scale with layers are one layer's share of the target's
    for part in ("overhead", "kv", "collectives"):
        assert getattr(h, part) == pytest.approx(getattr(t, part) / L, rel=1e-9)
    # the weights read: one layer, the [2D, D] joining projection and the LM head, at the target's bytes per param
    m, D = v5e.model, v5e.model.d_model
    layer = m.attention_params_per_layer() + m.dense_mlp_params() + m.norm_params_per_layer()
    read = layer + 2 * D * D + m.vocab * D + D + batch * D
    assert h.weights / t.weights == pytest.approx(read / weight_params_read(m, batch), rel=2e-4)
    r = spec.speculative_decoding(v5e, batch, S, K, A, draft="eagle")
    assert r.draft_cost == pytest.approx(h.total / t.total)
    # about one layer's share: above 1/L, below 1/L plus the LM head's and projection's share of the weight read
    assert 1 / L < r.draft_cost < 1 / L + (m.vocab * D + 2 * D * D) / weight_params_read(m, batch)
    assert spec.speculative_decoding(v5e, batch, S, K, A, draft="MTP").round_s == pytest.approx(r.round_s)


def test_a_moe_target_head_keeps_one_moe_layer():
    ds = deploy("deepseek-v3", "h100", 16, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    head = spec.draft_head(ds)
    assert head.model.n_layers == 1 and head.model.n_moe_layers == 1
    t, h = ds.step(1, 4096), head.step(1, 4096)
    assert h.overhead == pytest.approx(t.overhead / ds.model.n_layers)
    assert spec.speculative_decoding(ds, 1, 4096, 1, 0.8, draft="mtp").pays


# ------------------------------------------------------------------------------------------- acceptance as reported
@settings(max_examples=200, deadline=None)
@given(a=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(1e-9, 1.0 - 1e-6)), k=st.integers(1, 16))
def test_acceptance_from_mean_length_inverts_expected_tokens_per_round(a, k):
    # (1 − a^{k+1}) / (1 − a) loses digits to cancellation as a nears 1: the round trip holds to 1e-9, not to the ulp
    tau = spec.expected_tokens_per_round(a, k)
    back = spec.acceptance_from_mean_length(tau, k)
    assert spec.expected_tokens_per_round(back, k) == pytest.approx(tau, rel=1e-9)
    if 1.0 < tau < k + 1:
        assert back == pytest.approx(a, abs=1e-7)


def test_acceptance_conversions_by_hand():
    # k = 1: tau = 1 + a; k = 2: tau = 1 + a + a², so tau = 2.75 is the root of a² + a − 1.75 = 0
    assert spec.acceptance_from_mean_length(1.6, 1) == pytest.approx(0.6, abs=1e-12)
    assert spec.acceptance_from_mean_length(2.75, 2) == pytest.approx(0.5 * (-1 + math.sqrt(1 + 4 * 1.75)), abs=1e-12)
    assert spec.acceptance_from_mean_length(1, 4) == 0.0 and spec.acceptance_from_mean_length(5, 4) == 1.0
    # vLLM's draft acceptance rate is accepted / drafted = (tau − 1) / k, not the per-token probability
    a = 0.8
    rate = sum(a**i for i in range(1, 5)) / 4
    assert spec.acceptance_from_draft_rate(rate, 4) == pytest.approx(a, abs=1e-9) and rate < a


@pytest.mark.parametrize("tau", [0.999, 5.0001, 0.0, -1.0, math.nan, math.inf])
def test_mean_lengths_outside_one_to_k_plus_one_are_refused(tau):
    with pytest.raises(ValueError, match="tau"):
        spec.acceptance_from_mean_length(tau, 4)


# ------------------------------------------------------------------------------------------- the simulator's clock
@pytest.mark.parametrize("draft", ["llama3.2-1b", "eagle", None])
def test_round_seconds_is_the_round_speculative_decoding_prices(v5e, draft):
    cost = ASSUMED if draft is None else None
    for B in (1, 16, 64):
        r = spec.speculative_decoding(v5e, B, S, K, A, draft=draft, draft_cost=cost)
        d = None if draft is None else spec.draft_deployment(v5e, draft)
        clock = spec.round_seconds(v5e, d, B, B * S, K, draft_cost=cost)
        assert clock == pytest.approx(r.round_s, rel=1e-12)
        assert spec._round_seconds(v5e, d, B, B * S, K, cost or 0.0) == clock
    # uneven contexts: the clock takes the batch's total tokens, and adds k draft steps to one verify step
    d = spec.draft_deployment(v5e, "llama3.2-1b")
    got = spec.round_seconds(v5e, d, 3, 1000 + 5000 + 9000, K)
    want = K * d.step(3, 15000).total + v5e.step(3, 15000, 3 * K, 3 * K * (K + 1) / 2).total
    assert got == pytest.approx(want, rel=1e-12)


def test_round_seconds_refusals(v5e):
    with pytest.raises(ValueError, match="kv_tokens"):
        spec.round_seconds(v5e, None, 8, 7, K)
    with pytest.raises(ValueError, match=r"decode .* x \(k \+ 1\)"):
        spec.round_seconds(v5e, None, MAX_ROWS // 2, MAX_ROWS, K)
    with pytest.raises(ValueError, match="not both"):
        spec.round_seconds(v5e, "eagle", 8, 8 * S, K, draft_cost=0.1)
    with pytest.raises(TypeError, match="target must be a tpu_notes.inference.engine.Deployment"):
        spec.round_seconds("llama3-70b", None, 8, 8 * S, K)


# ------------------------------------------------------------------------------------------- the CLI
SERVE = ["serve", "--model", "llama3-70b", "--system", "v5e", "--chips", "32", "--weights", "int8", "--batch", "1"]


def test_serve_takes_the_mean_acceptance_length_and_a_named_draft(capsys, v5e):
    args = [*SERVE, "--context", str(S), "--speculate", str(K), "--accept-len", "2.5", "--draft-model", "llama3.2-1b"]
    assert main([*args, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)["speculative"]
    a = spec.acceptance_from_mean_length(2.5, K)
    r = spec.speculative_decoding(v5e, 1, S, K, a, draft="llama3.2-1b")
    assert data["acceptance"] == pytest.approx(a) and data["tokens_per_round"] == pytest.approx(2.5)
    assert data["speedup"] == pytest.approx(r.speedup) and data["draft"] == "llama3.2-1b"
    assert main(args) == 0
    assert "llama3.2-1b on the same chips" in capsys.readouterr().out
    assert main([*SERVE, "--context", str(S), "--speculate", "4", "--acceptance", "0.7", "--draft-cost", "0.05"]) == 0
    assert "(assumed)" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, flag",
    [
        (["--accept-len", "5.5"], "--accept-len"),
        (["--accept-len", "0.9"], "--accept-len"),
        (["--accept-len", "2", "--acceptance", "0.5"], "--accept-len"),
        (["--acceptance", "0.7", "--draft-model", "llama2-7b"], "--draft-model"),
        (["--acceptance", "0.7", "--draft-model", "nosuch"], "--draft-model"),
    ],
)
def test_serve_refuses_bad_speculative_flags(capsys, extra, flag):
    assert main([*SERVE, "--context", "4096", "--speculate", "4", *extra]) == 2
    assert flag in capsys.readouterr().err
