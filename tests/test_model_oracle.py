"""The JAX model (tpu_notes.model) against the counting formulas and independent references.

Oracles: the parameter pytree's size vs ``param_count()``; XLA's ``cost_analysis()`` FLOPs of the compiled forward
and forward+backward vs ``flops_per_token × tokens``; a numpy attention and a numpy mixture of experts.
"""

import math

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from tpu_notes import model as M  # noqa: E402
from tpu_notes.transformer import get_model  # noqa: E402

CONFIGS = ["tiny-mha", "tiny-gqa", "tiny-tied", "tiny-moe", "tiny-mlp2"]
B, T = 4, 64  # 256 tokens: T·k = 512 assignments divide evenly over the 4 experts of tiny-moe


@pytest.mark.parametrize("name", CONFIGS)
def test_param_pytree_matches_count(name):
    c = get_model(name)
    params = M.init_params(c, jax.random.PRNGKey(0))
    assert M.count_params(params) == c.param_count()
    b = c.param_breakdown()
    assert M.param_groups(params) == {
        f: getattr(b, f) for f in ("embedding", "attention", "mlp", "norms", "unembedding", "total")
    }


@pytest.mark.parametrize("name", CONFIGS)
def test_layer_shapes_match_the_model(name):
    c = get_model(name)
    layer = M.init_params(c, jax.random.PRNGKey(0))["layers"][-1]
    got = {
        "/".join(str(k.key) for k in path): tuple(leaf.shape)
        for path, leaf in jax.tree_util.tree_leaves_with_path(layer)
    }
    assert got == c.layer_shapes()


@pytest.mark.parametrize("name", CONFIGS)
def test_xla_flops_match_formula(name):
    c = get_model(name)
    tokens = B * T
    # The model computes the full masked score matrix, so the matching count is causal=False.
    fwd_pred = c.flops_per_token(T, causal=False) * tokens
    train_pred = c.flops_per_token(T, training=True, causal=False) * tokens
    for compiled in (True, False):  # the optimised program, and the program as lowered
        fwd = M.xla_flops(c, B, T, compiled=compiled)
        train = M.xla_flops(c, B, T, training=True, compiled=compiled)
        assert fwd == pytest.approx(fwd_pred, rel=0.05)
        assert train == pytest.approx(train_pred, rel=0.05)
        # XLA counts more, never less: the formula leaves out norms, softmax, rotary and activations
        assert fwd > fwd_pred and train > train_pred


@pytest.mark.parametrize("name", ["tiny-mha", "tiny-moe"])
def test_gap_is_the_elementwise_work(name):
    c = get_model(name)
    gap = M.xla_flops(c, B, T, compiled=False) - c.flops_per_token(T, causal=False) * B * T
    parts = M.xla_component_flops(c, B, T)
    assert list(parts) == sorted(parts)
    assert sum(parts.values()) == pytest.approx(gap, rel=0.05)


def _np_attention(q, k, v, causal):
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    Bq, Tq, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    out = np.zeros_like(q)
    for n in range(N):
        kv = n // (N // K)
        s = np.einsum("bth,bsh->bts", q[:, :, n], k[:, :, kv]) / math.sqrt(H)
        if causal:
            s = np.where(np.arange(S)[None, :] <= np.arange(Tq)[:, None] + S - Tq, s, -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        out[:, :, n] = np.einsum("bts,bsh->bth", p, v[:, :, kv])
    return out


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("T_q,S,block", [(64, 64, 16), (8, 64, 32), (32, 32, 32)])
def test_attention_and_flash_match_numpy(causal, T_q, S, block):
    ks = jax.random.split(jax.random.PRNGKey(1), 3)
    q = jax.random.normal(ks[0], (2, T_q, 6, 8))
    k = jax.random.normal(ks[1], (2, S, 2, 8))
    v = jax.random.normal(ks[2], (2, S, 2, 8))
    ref = _np_attention(q, k, v, causal)
    np.testing.assert_allclose(M.attention(q, k, v, causal), ref, atol=2e-5)
    np.testing.assert_allclose(M.flash_attention(q, k, v, causal, block_size=block), ref, atol=2e-5)
    with pytest.raises(ValueError, match="block_size"):
        M.flash_attention(q, k, v, causal, block_size=S + 1)


def test_moe_matches_numpy_when_nothing_is_dropped():
    c = get_model("tiny-moe")
    p = M.init_params(c, jax.random.PRNGKey(3))["layers"][-1]["mlp"]
    x = jax.random.normal(jax.random.PRNGKey(4), (40, c.d_model))
    # capacity E/k x the even share: every expert can take every token, so no assignment is dropped
    y = M.moe_mlp(x, p, c, capacity_factor=c.n_experts / c.experts_per_token)
    P = jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64), p)
    xn = np.asarray(x, np.float64)
    silu = lambda a: a / (1 + np.exp(-a))  # noqa: E731
    logits = xn @ P["router"]
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    ref = np.zeros_like(xn)
    for t in range(xn.shape[0]):
        top = np.argsort(-probs[t])[: c.experts_per_token]
        w = probs[t, top] / probs[t, top].sum()
        for e, we in zip(top, w):
            h = silu(xn[t] @ P["w_gate"][e]) * (xn[t] @ P["w_up"][e])
            ref[t] += we * (h @ P["w_down"][e])
    sh = P["shared"]
    ref += (silu(xn @ sh["w_gate"]) * (xn @ sh["w_up"])) @ sh["w_down"]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    # with capacity 1 some tokens may lose an expert, but the output keeps its shape and stays finite
    y1 = M.moe_mlp(x, p, c, capacity_factor=1.0)
    assert y1.shape == x.shape and bool(jnp.all(jnp.isfinite(y1)))


def test_forward_is_causal_and_training_learns():
    c = get_model("tiny-gqa")
    params = M.init_params(c, jax.random.PRNGKey(0))
    tokens = M.random_tokens(c, 2, 16, seed=1)
    logits = M.forward(params, tokens, c)
    assert logits.shape == (2, 16, c.vocab)
    changed = tokens.at[:, 10].set((tokens[:, 10] + 1) % c.vocab)
    logits2 = M.forward(params, changed, c)
    np.testing.assert_allclose(logits[:, :10], logits2[:, :10], atol=1e-5)  # the past ignores the future
    assert not np.allclose(logits[:, 10:], logits2[:, 10:])
    # a fresh model is close to uniform: loss near log(V)
    first = float(M.loss(params, tokens, c))
    assert abs(first - math.log(c.vocab)) < 1.5
    step = jax.jit(M.train_step, static_argnames=("config",))
    for _ in range(5):
        params, value = step(params, tokens, c, 0.5)
    assert float(M.loss(params, tokens, c)) < first - 0.5


def test_flash_attention_inside_the_model_gives_the_same_logits():
    c = get_model("tiny-mha")
    params = M.init_params(c, jax.random.PRNGKey(0))
    tokens = M.random_tokens(c, 2, 32)
    plain = M.forward(params, tokens, c)
    flash = M.forward(params, tokens, c, attention_fn=lambda q, k, v, causal: M.flash_attention(q, k, v, causal, 8))
    np.testing.assert_allclose(plain, flash, atol=1e-4)


def test_unsupported_configs_raise():
    with pytest.raises(NotImplementedError, match="MLA"):
        M.init_params(get_model("deepseek-v3"), jax.random.PRNGKey(0))
    odd = get_model("tiny-mha").with_(d_head=15, n_heads=4)
    with pytest.raises(ValueError, match="d_head"):
        M.init_params(odd, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match="tokens"):
        M.forward(
            M.init_params(get_model("tiny-mha"), jax.random.PRNGKey(0)),
            jnp.zeros((4,), jnp.int32),
            get_model("tiny-mha"),
        )


def test_router_learns_with_one_expert_per_token_and_init_is_reproducible():
    c = get_model("tiny-moe").with_(experts_per_token=1, n_shared_experts=0)
    p = M.init_params(c, jax.random.PRNGKey(5))["layers"][-1]["mlp"]
    x = jax.random.normal(jax.random.PRNGKey(6), (32, c.d_model))
    g = jax.grad(lambda p: jnp.sum(M.moe_mlp(x, p, c, capacity_factor=4.0) ** 2))(p)
    assert float(jnp.abs(g["router"]).sum()) > 0  # k = 1 keeps the raw router score as the weight
    a, b = M.init_params(c, jax.random.PRNGKey(5)), M.init_params(c, jax.random.PRNGKey(5))
    assert all(np.array_equal(u, v) for u, v in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)))
    assert not np.array_equal(M.init_params(c, 1)["embed"], M.init_params(c, 2)["embed"])
