"""tpu_notes.generate: the KV-cached decoder against the uncached forward pass, speculative sampling against the
target distribution (exactly, and by a seeded sample), and XLA's bytes of one decode step against the model."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tpu_notes import generate as g
from tpu_notes import inference as I
from tpu_notes import model as M
from tpu_notes.transformer import TransformerConfig, get_model

TARGET = TransformerConfig(
    d_model=32, d_ff=64, n_layers=2, n_heads=4, n_kv_heads=2, d_head=8, vocab=6, name="spec-target"
)
DRAFT = TransformerConfig(
    d_model=16, d_ff=32, n_layers=1, n_heads=2, n_kv_heads=1, d_head=8, vocab=6, name="spec-draft"
)


@pytest.fixture(scope="module")
def tiny():
    c = get_model("tiny-gqa")
    return c, M.init_params(c, 0), M.random_tokens(c, 2, 7, seed=1)


def test_cached_greedy_decoding_equals_the_uncached_forward_pass(tiny):
    c, params, prompt = tiny
    cached = np.asarray(g.generate(params, prompt, c, 10))
    uncached = np.asarray(g.generate_uncached(params, prompt, c, 10))
    np.testing.assert_array_equal(cached, uncached)


def test_cached_sampling_equals_the_uncached_sampler(tiny):
    c, params, prompt = tiny
    a = np.asarray(g.generate(params, prompt, c, 8, temperature=0.8, seed=4))
    b = np.asarray(g.generate_uncached(params, prompt, c, 8, temperature=0.8, seed=4))
    np.testing.assert_array_equal(a, b)
    assert len(set(a[0].tolist())) > 1


def test_prefill_and_decode_logits_match_forward(tiny):
    c, params, prompt = tiny
    # the reference forward pass compiled whole (one program per length), not dispatched op by op (one per op)
    forward = jax.jit(M.forward, static_argnames=("config",))
    logits, cache = g.prefill(params, prompt, c, 12)
    np.testing.assert_allclose(logits, forward(params, prompt, config=c)[:, -1], atol=1e-4)
    tok = jnp.argmax(logits, -1).astype(jnp.int32)
    step, cache = g.decode_step(params, cache, tok, 7, c)
    longer = jnp.concatenate([prompt, tok[:, None]], axis=1)
    np.testing.assert_allclose(step, forward(params, longer, config=c)[:, -1], atol=1e-4)


def test_speculative_step_distribution_is_the_target_exactly():
    rng = np.random.default_rng(0)
    for trial in range(20):
        p = rng.dirichlet(np.full(7, 0.5))
        q = rng.dirichlet(np.full(7, 0.5))
        if trial % 3 == 0:
            q[rng.integers(7)] = 0.0  # a token the draft never proposes
            q /= q.sum()
        np.testing.assert_allclose(g.speculative_step_distribution(p, q), p, atol=1e-6)
    # greedy: one-hot p and q
    p, q = np.eye(5)[2], np.eye(5)[4]
    np.testing.assert_allclose(g.speculative_step_distribution(p, q), p, atol=0)


def test_speculative_greedy_reproduces_the_target_greedy_tokens():
    tp, dp = M.init_params(TARGET, 1), M.init_params(DRAFT, 2)
    prompt = jnp.array([[1, 4, 2]], jnp.int32)
    out = g.speculative_generate(tp, TARGET, dp, DRAFT, prompt, 9, k=3, temperature=0.0)
    ref = g.generate(tp, prompt, TARGET, 9)[0]
    np.testing.assert_array_equal(out["tokens"], ref)
    # the draft as its own target accepts every proposal
    same = g.speculative_generate(tp, TARGET, tp, TARGET, prompt, 8, k=3, temperature=0.0)
    assert same["accepted"] == 3 * same["rounds"] and same["rounds"] == 2


def test_speculative_samples_follow_the_target_distribution():
    """A seeded statistical check on the first two generated tokens (36 outcomes): the empirical frequencies of
    20,000 speculative runs against the chain-rule probabilities of the target model (chi-squared, and every
    outcome within 5 standard errors)."""
    tp, dp = M.init_params(TARGET, 1), M.init_params(DRAFT, 2)
    prompt = jnp.array([[1, 4, 2]], jnp.int32)
    exact = g.target_distribution(tp, TARGET, prompt, 2)
    n = 20_000
    tokens, rate = g.speculative_samples(tp, TARGET, dp, DRAFT, prompt, 2, n, k=2, seed=0)
    tokens = np.asarray(tokens)
    counts = np.bincount(tokens[:, 0] * TARGET.vocab + tokens[:, 1], minlength=exact.size)
    expected = n * exact
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 70.0, chi2  # 35 degrees of freedom: p ~ 5e-4 at 70
    se = np.sqrt(expected * (1 - exact))
    assert np.all(np.abs(counts - expected) < 5 * se + 1)
    assert 0.05 < rate < 1.0  # drafts are sometimes kept and sometimes not
    # the draft's own distribution is measurably different (the check has power)
    draft_exact = g.target_distribution(dp, DRAFT, prompt, 2)
    assert float(np.sum((counts - n * draft_exact) ** 2 / (n * draft_exact))) > 10 * chi2


@pytest.mark.parametrize(
    "name, batch, seq_len", [("tiny-gqa", 1, 64), ("tiny-gqa", 8, 256), ("small", 4, 512), ("small", 16, 2048)]
)
def test_xla_bytes_of_a_decode_step_match_the_model(name, batch, seq_len):
    """XLA's bytes accessed for one compiled decode step against weights + KV cache read (fp32). XLA also counts
    the whole embedding table for the token lookup (a gather; the model counts B rows), the in-place cache write
    and the softmax temporaries; with the table added the two agree within a factor 1.6."""
    c = get_model(name)
    xla = g.decode_cost(c, batch, seq_len)["bytes accessed"]
    model = I.weight_params_read(c, batch) * 4 + batch * seq_len * c.kv_bytes_per_token("fp32")
    table = c.vocab * c.d_model * 4
    assert 0.95 < xla / (model + table) < 1.6


def test_bad_input():
    c = get_model("tiny-gqa")
    params = M.init_params(c, 0)
    prompt = M.random_tokens(c, 1, 4)
    with pytest.raises(ValueError, match="new_tokens"):
        g.generate(params, prompt, c, 0)
    with pytest.raises(ValueError, match="temperature"):
        g.generate(params, prompt, c, 3, temperature=-1.0)
    with pytest.raises(ValueError, match="max_len"):
        g.prefill(params, prompt, c, 2)
    with pytest.raises(ValueError, match="draft_config"):
        g.speculative_generate(params, c, params, get_model("tiny-mha"), prompt, 3)
    with pytest.raises(TypeError, match="cache"):
        g.decode_step(params, None, prompt[:, 0], 0, c)


def test_measured_vs_predicted_rows_are_positive_and_named():
    class Fit:  # a stand-in roofline: the test times, it does not judge speed
        peak_flops = 1e11
        bandwidth = 1e10

    rows = g.measured_vs_predicted(get_model("tiny-mha"), Fit(), [(2, 16)], repeats=1)
    (r,) = rows
    assert r["batch"] == 2 and r["seq_len"] == 16 and r["measured_s"] > 0
    pred = I.decode_step_time("tiny-mha", Fit(), 1, 2, 16, weight_dtype="fp32", kv_dtype="fp32")
    assert r["predicted_s"] == pytest.approx(pred.total) and r["ratio"] == pytest.approx(r["measured_s"] / pred.total)


# -- hostile inputs the decoder used to accept ----------------------------------------------------------------------
def test_init_cache_refuses_terabytes():
    with pytest.raises(ValueError, match="max_len"):
        g.init_cache("tiny-gqa", 2**20, 2**16)
    assert g.cache_bytes(g.init_cache("tiny-gqa", 2, 16)) == 2 * 2 * 2 * 2 * 16 * 16 * 4


def test_token_ids_past_the_vocabulary_and_short_caches_are_refused():
    c = get_model("tiny-gqa")
    params = M.init_params(c, 0)
    with pytest.raises(ValueError, match="prompt"):
        g.generate(params, jnp.full((1, 4), c.vocab, jnp.int32), c, 2)
    with pytest.raises(ValueError, match="tokens"):
        g.prefill(params, jnp.full((1, 4), -1, jnp.int32), c, 8)
    _, cache = g.prefill(params, M.random_tokens(c, 1, 4, seed=1), c, 8)
    short = {"k": cache["k"][:1], "v": cache["v"][:1]}
    with pytest.raises(ValueError, match="cache"):
        g.decode_step(params, short, jnp.zeros((1,), jnp.int32), 4, c)
    with pytest.raises(ValueError, match="params"):
        g.decode_step({**params, "layers": params["layers"][:1]}, cache, jnp.zeros((1,), jnp.int32), 4, c)
