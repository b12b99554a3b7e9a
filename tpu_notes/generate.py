"""Generation with a KV cache, and speculative sampling, for the small JAX model of :mod:`tpu_notes.model` (Ch. 7).

Fixed shapes throughout, so each function compiles once:

- :func:`init_cache` allocates per-layer key and value buffers ``[B, K, max_len, H]``;
- :func:`prefill` runs the prompt through the model, writes its keys and values at positions ``0..T-1`` and returns
  the last position's logits; :func:`decode_step` embeds one token per sequence at position ``pos``, writes its key
  and value into the cache, attends to positions ``<= pos`` (the rest of the buffer is masked) and returns the
  next logits. Both reuse the model's own blocks (:func:`tpu_notes.model.rms_norm`, its rotary tables, its MLP),
  so cached decoding reproduces the uncached forward pass token for token;
- :func:`generate` is prefill then a ``lax.scan`` of decode steps, greedy (``temperature=0``) or sampled
  (``jax.random.categorical`` with the key ``fold_in(key, step)``); :func:`generate_uncached` makes the same choices
  by re-running the whole forward pass on the growing sequence (the quadratic algorithm, kept as the reference);
- :func:`speculative_generate`: a draft model proposes ``k`` tokens, the target scores them in one pass, each draft
  ``x`` is kept with probability ``min(1, p(x)/q(x))`` and the first rejected one is replaced by a sample of
  ``max(p − q, 0)`` normalised (or, when all are kept, one more token from ``p``). Its output distribution is the
  target's exactly; :func:`speculative_step_distribution` computes that distribution for one position from the same
  two helpers the sampler uses, so the test can check it against ``p`` exactly. The speculative loop re-runs both
  models on the whole (fixed-size) buffer each round: simple and exact, fine for the tiny models of the chapter.

Measuring: :func:`measure_decode_step` times one jitted decode step with :mod:`tpu_notes.bench`, and
:func:`decode_cost` returns XLA's cost analysis of it, for the oracle against
:func:`tpu_notes.inference.decode_step_time`'s bytes.

Importing this module imports JAX.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Annotated

import jax
import jax.numpy as jnp
import numpy as np

from . import model as M
from .transformer import TransformerConfig, as_config
from .units import Positive, checked

#: Largest prompt + generated length the generation buffers are built for.
MAX_LEN = 2**16


def _config(config, name: str = "config") -> TransformerConfig:
    return M._check_supported(as_config(config, name))


def _model_and_prompt(params, config, prompt) -> TransformerConfig:
    """``config`` as a supported config, once ``params`` and ``prompt`` are checked against it."""
    c = _config(config)
    M._check_params("params", params, c)
    M._check_tokens(prompt, c, name="prompt")
    return c


#: Most speculative generations :func:`speculative_samples` vmaps in one call.
MAX_SAMPLES = 2**15
_Len = Annotated[int, Positive(integer=True, maximum=MAX_LEN)]
_Short = Annotated[int, Positive(integer=True, maximum=4096)]  # speculative outputs
_Batch = Annotated[int, Positive(integer=True, maximum=2**16)]  # measured decode steps
_Temperature = Annotated[float, Positive(allow_zero=True, maximum=1e6)]
_Seed = Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**32 - 1)]
_Drafts = Annotated[int, Positive(integer=True, maximum=64)]


# ------------------------------------------------------------------------------------------------ the cache
def _check_cache(cache, config: TransformerConfig | None = None) -> dict:
    """``cache`` must be an :func:`init_cache` dict (with ``config``'s layers and KV heads, when given: a cache of
    fewer layers than the parameters would silently skip the rest)."""
    ok = (
        isinstance(cache, dict)
        and isinstance(cache.get("k"), list)
        and isinstance(cache.get("v"), list)
        and cache["k"]
        and all(hasattr(x, "shape") and getattr(x, "ndim", 0) == 4 for x in cache["k"] + cache["v"])
    )
    if not ok:
        raise TypeError(
            "cache must be the dict of init_cache or prefill ({'k': [arrays], 'v': [arrays]}); "
            f"got {type(cache).__name__}"
        )
    if config is not None:
        L, K, H = config.n_layers, config.n_kv_heads, config.d_head
        if len(cache["k"]) != L or len(cache["v"]) != L:
            raise ValueError(
                f"cache must hold the {L} layers of config {config.name or ''}; got {len(cache['k'])} "
                f"key and {len(cache['v'])} value buffers"
            )
        shape = tuple(cache["k"][0].shape)
        if any(tuple(x.shape) != shape for x in cache["k"] + cache["v"]) or shape[1] != K or shape[3] != H:
            raise ValueError(
                f"cache buffers must all have shape [batch, {K} KV heads, max_len, {H}] of config "
                f"{config.name or ''}; got {shape} (first)"
            )
    return cache


#: Most bytes :func:`init_cache` allocates (keys and values of every layer): 1 GiB. The chapter's models need
#: kilobytes to megabytes; ``init_cache(config, 2**20, 2**16)`` would ask for terabytes.
#: The most bytes :func:`init_cache` allocates (1 GiB): the key/value buffers of every layer together.
MAX_CACHE_BYTES = 2**30


@checked
def init_cache(
    config, batch: Annotated[int, Positive(integer=True, maximum=M.MAX_BATCH)], max_len: _Len, dtype=jnp.float32
) -> dict:
    """Zeroed key/value buffers: ``{"k": [L arrays of [B, K, max_len, H]], "v": [...]}`` (heads before positions:
    the layout both attention contractions read without a transpose). At most ``MAX_CACHE_BYTES`` (1 GiB) in all."""
    c = _config(config)
    B, S = batch, max_len
    dtype = M._check_float_dtype("dtype", dtype)
    shape = (B, c.n_kv_heads, S, c.d_head)
    nbytes = 2 * c.n_layers * math.prod(shape) * jnp.dtype(dtype).itemsize
    if nbytes > MAX_CACHE_BYTES:
        raise ValueError(
            f"batch={B} x max_len={S} asks for a {nbytes / 1e9:.3g} GB cache (2 x {c.n_layers} layers "
            f"of {list(shape)}); at most {MAX_CACHE_BYTES / 2**30:g} GiB (MAX_CACHE_BYTES): lower batch "
            "or max_len"
        )
    return {
        "k": [jnp.zeros(shape, dtype) for _ in range(c.n_layers)],
        "v": [jnp.zeros(shape, dtype) for _ in range(c.n_layers)],
    }


def cache_bytes(cache) -> int:
    """Bytes held by a cache pytree."""
    _check_cache(cache)
    return int(sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(cache)))


def _cached_forward(params, tokens, cache, pos, c: TransformerConfig, capacity_factor: float = 1.0):
    """Logits ``[B, T, V]`` of ``tokens[B, T]`` placed at positions ``pos..pos+T-1``, and the updated cache."""
    B, T = tokens.shape
    S = cache["k"][0].shape[2]
    cos_all, sin_all = M.rotary_tables(S, c.d_head)
    cos = jax.lax.dynamic_slice_in_dim(cos_all, pos, T, axis=0)
    sin = jax.lax.dynamic_slice_in_dim(sin_all, pos, T, axis=0)
    rows = pos + jnp.arange(T)
    mask = jnp.arange(S)[None, :] <= rows[:, None]  # [T, S]: keys at or before each query
    x = params["embed"][tokens]
    new_k, new_v = [], []
    for layer, ck, cv in zip(params["layers"], cache["k"], cache["v"]):
        h = M.rms_norm(x, layer["attn_norm"])
        q = M.apply_rotary(jnp.einsum("btd,dnh->btnh", h, layer["wq"]), cos, sin)
        k = M.apply_rotary(jnp.einsum("btd,dkh->btkh", h, layer["wk"]), cos, sin)
        v = jnp.einsum("btd,dkh->btkh", h, layer["wv"])
        ck = jax.lax.dynamic_update_slice(ck, k.transpose(0, 2, 1, 3).astype(ck.dtype), (0, 0, pos, 0))
        cv = jax.lax.dynamic_update_slice(cv, v.transpose(0, 2, 1, 3).astype(cv.dtype), (0, 0, pos, 0))
        new_k.append(ck)
        new_v.append(cv)
        K = c.n_kv_heads
        qg = q.reshape(B, T, K, c.n_heads // K, c.d_head)
        s = jnp.einsum("btkgh,bksh->bkgts", qg, ck.astype(q.dtype)) / math.sqrt(c.d_head)
        s = jnp.where(mask, s, jnp.finfo(s.dtype).min)
        p = jax.nn.softmax(s, axis=-1)
        o = jnp.einsum("bkgts,bksh->bkgth", p, cv.astype(q.dtype))  # this output order: a fast dot on CPU
        o = o.transpose(0, 3, 1, 2, 4).reshape(B, T, c.n_heads, c.d_head)
        x = x + jnp.einsum("btnh,nhd->btd", o, layer["wo"])
        h = M.rms_norm(x, layer["mlp_norm"])
        if "router" in layer["mlp"]:
            D = c.d_model
            y = M.moe_mlp(h.reshape(B * T, D), layer["mlp"], c, capacity_factor).reshape(B, T, D)
        else:
            y = M._mlp(h, layer["mlp"], c.gated_mlp)
        x = x + y
    x = M.rms_norm(x, params["final_norm"])
    w_out = params["embed"].T if c.tied_embeddings else params["unembed"]
    return jnp.einsum("btd,dv->btv", x, w_out), {"k": new_k, "v": new_v}


@partial(jax.jit, static_argnames=("config", "max_len"))
def _prefill(params, tokens, config, max_len):
    cache = init_cache(config, tokens.shape[0], max_len, params["embed"].dtype)
    logits, cache = _cached_forward(params, tokens, cache, 0, config)
    return logits[:, -1], cache


@checked
def prefill(params, tokens, config, max_len: _Len):
    """Run the prompt ``tokens[B, T]``: ``(logits of the last position [B, V], cache with T positions filled)``.
    ``max_len`` (>= T) sizes the cache for the tokens to come."""
    c = _config(config)
    M._check_params("params", params, c)
    M._check_tokens(tokens, c)
    if max_len < tokens.shape[1]:
        raise ValueError(f"max_len ({max_len}) must be at least the prompt length ({tokens.shape[1]})")
    return _prefill(params, tokens, c, max_len)


@partial(jax.jit, static_argnames=("config",), donate_argnames=("cache",))
def _decode_step(params, cache, token, pos, config):
    logits, cache = _cached_forward(params, token[:, None], cache, pos, config)
    return logits[:, 0], cache


def decode_step(params, cache, token, pos, config):
    """One generation step: ``token[B]`` at position ``pos`` → ``(logits [B, V], updated cache)``.

    The cache is donated (updated in place; do not reuse the one passed in)."""
    c = _config(config)
    M._check_params("params", params, c)
    M._check_array("token", token, ndim=1)
    _check_cache(cache, c)
    if token.shape[0] != cache["k"][0].shape[0]:
        raise ValueError(
            f"token must hold one id per cached sequence ({cache['k'][0].shape[0]}); got shape {tuple(token.shape)}"
        )
    M._check_tokens(token[:, None], c, name="token")
    if not isinstance(pos, (jax.Array, jax.core.Tracer)):
        pos = Positive(integer=True, allow_zero=True, maximum=cache["k"][0].shape[2] - 1).check("pos", pos)
    return _decode_step(params, cache, token, jnp.asarray(pos, jnp.int32), c)


def _choose(logits, key, temperature: float):
    """Greedy (``temperature == 0``) or a sample from ``softmax(logits / temperature)``."""
    if temperature == 0:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    return jax.random.categorical(key, logits.astype(jnp.float32) / temperature, axis=-1).astype(jnp.int32)


@partial(jax.jit, static_argnames=("config", "new_tokens", "temperature"))
def _generate(params, prompt, key, config, new_tokens, temperature):
    B, T = prompt.shape
    logits, cache = _prefill(params, prompt, config, T + new_tokens)
    first = _choose(logits, jax.random.fold_in(key, 0), temperature)

    def body(carry, i):
        tok, cache = carry
        logits, cache = _cached_forward(params, tok[:, None], cache, T + i - 1, config)
        nxt = _choose(logits[:, 0], jax.random.fold_in(key, i), temperature)
        return (nxt, cache), nxt

    (_, _), rest = jax.lax.scan(body, (first, cache), jnp.arange(1, new_tokens))
    return jnp.concatenate([first[:, None], rest.T], axis=1)


@checked
def generate(params, prompt, config, new_tokens: _Len, *, temperature: _Temperature = 0.0, seed: _Seed = 0):
    """``new_tokens`` tokens ``[B, new_tokens]`` after ``prompt[B, T]``: prefill, then cached decode steps.
    ``temperature=0`` is greedy; otherwise step ``i`` samples with ``jax.random.fold_in(PRNGKey(seed), i)``."""
    c = _model_and_prompt(params, config, prompt)
    if prompt.shape[1] + new_tokens > MAX_LEN:
        raise ValueError(f"prompt length + new_tokens must be at most {MAX_LEN}")
    return _generate(params, prompt, jax.random.PRNGKey(seed), c, new_tokens, temperature)


@checked
def generate_uncached(params, prompt, config, new_tokens: _Short, *, temperature: _Temperature = 0.0, seed: _Seed = 0):
    """The same tokens as :func:`generate`, by running :func:`tpu_notes.model.forward` on the whole sequence at every
    step (no cache: the quadratic algorithm): the reference the cached decoder is tested against."""
    c = _model_and_prompt(params, config, prompt)
    key = jax.random.PRNGKey(seed)
    fwd = jax.jit(M.forward, static_argnames=("config",))
    T = prompt.shape[1]
    # one fixed-length buffer (one compile): with causal attention the logits at position t depend only on the
    # tokens at positions <= t, so the not-yet-generated slots after it change nothing
    seq = jnp.zeros((prompt.shape[0], T + new_tokens - 1), jnp.int32).at[:, :T].set(prompt)
    out = []
    for i in range(new_tokens):
        logits = fwd(params, seq, config=c)[:, T - 1 + i]
        tok = _choose(logits, jax.random.fold_in(key, i), temperature)
        out.append(tok)
        if i + 1 < new_tokens:
            seq = seq.at[:, T + i].set(tok)
    return jnp.stack(out, axis=1)


# ------------------------------------------------------------------------------------ speculative sampling
@checked
def token_probs(logits, temperature: _Temperature):
    """Next-token probabilities: ``softmax(logits / temperature)``, or one-hot at the argmax when it is 0."""
    if temperature == 0:
        return jax.nn.one_hot(jnp.argmax(logits, axis=-1), logits.shape[-1], dtype=jnp.float32)
    return jax.nn.softmax(logits.astype(jnp.float32) / temperature, axis=-1)


def acceptance_probability(p, q):
    """Probability of keeping a draft token ``x`` drawn from ``q`` when the target gives ``p``:
    ``min(1, p(x)/q(x))`` for every ``x`` (the sampler keeps ``x`` when ``u · q(x) < p(x)``, ``u ~ U[0, 1)``)."""
    return jnp.where(q > 0, jnp.minimum(1.0, p / jnp.where(q > 0, q, 1.0)), 1.0)


def residual_distribution(p, q):
    """What to sample after a rejection: ``max(p − q, 0)`` normalised (``p`` itself when ``p == q``)."""
    r = jnp.maximum(p - q, 0.0)
    total = r.sum(axis=-1, keepdims=True)
    return jnp.where(total > 0, r / jnp.where(total > 0, total, 1.0), p)


def speculative_step_distribution(p, q):
    """The exact distribution of the token one speculative position emits, for target ``p`` and draft ``q``
    (vectors over the vocabulary): ``q(y)·a(y) + (1 − Σ_x q(x)·a(x)) · r(y)`` with ``a`` =
    :func:`acceptance_probability` and ``r`` = :func:`residual_distribution`. It equals ``p``."""
    p, q = jnp.asarray(p, jnp.float32), jnp.asarray(q, jnp.float32)
    a = acceptance_probability(p, q)
    return q * a + (1.0 - jnp.sum(q * a)) * residual_distribution(p, q)


def _spec_round(state, tp, tc, dp, dc, k, temperature, stop):
    buf, n, key, rounds, accepted = state
    V = tc.vocab
    kr = jax.random.fold_in(key, rounds)
    k_draft, k_u, k_y = jax.random.split(kr, 3)

    def draft(i, carry):
        buf, qs = carry
        logits = jax.lax.dynamic_index_in_dim(M.forward(dp, buf, dc)[0], n - 1 + i, keepdims=False)
        q = token_probs(logits, temperature)
        x = jax.random.categorical(jax.random.fold_in(k_draft, i), jnp.log(q)).astype(jnp.int32)
        return buf.at[0, n + i].set(x), qs.at[i].set(q)

    buf, qs = jax.lax.fori_loop(0, k, draft, (buf, jnp.zeros((k, V), jnp.float32)))
    logits = M.forward(tp, buf, tc)[0]
    p = token_probs(jax.lax.dynamic_slice_in_dim(logits, n - 1, k + 1, axis=0), temperature)  # [k+1, V]
    xs = jax.lax.dynamic_slice_in_dim(buf[0], n, k)
    px, qx = p[jnp.arange(k), xs], qs[jnp.arange(k), xs]
    keep = jax.random.uniform(k_u, (k,)) * qx < px
    j = jnp.sum(jnp.cumprod(keep.astype(jnp.int32)))  # drafts kept before the first rejection
    q_j = jnp.where(j < k, qs[jnp.minimum(j, k - 1)], jnp.zeros((V,), jnp.float32))
    fix = residual_distribution(p[j], q_j)
    y = jax.random.categorical(k_y, jnp.log(fix)).astype(jnp.int32)
    buf = buf.at[0, n + j].set(y)
    return buf, n + j + 1, key, rounds + 1, accepted + j


@partial(jax.jit, static_argnames=("tc", "dc", "new_tokens", "k", "temperature"))
def _speculative(tp, dp, prompt, key, tc, dc, new_tokens, k, temperature):
    T = prompt.shape[1]
    buf = jnp.zeros((1, T + new_tokens + k + 1), jnp.int32).at[:, :T].set(prompt)
    stop = T + new_tokens
    state = (buf, jnp.int32(T), key, jnp.int32(0), jnp.int32(0))
    state = jax.lax.while_loop(
        lambda s: s[1] < stop, lambda s: _spec_round(s, tp, tc, dp, dc, k, temperature, stop), state
    )
    buf, n, _, rounds, accepted = state
    return buf[0, T:stop], rounds, accepted


def _speculative_configs(target_params, target_config, draft_params, draft_config, prompt):
    """The target's and the draft's configs, once both models and the one-sequence ``prompt`` are checked against
    them (a shared vocabulary, matching parameters, ids in range)."""
    tc, dc = _config(target_config, "target_config"), _config(draft_config, "draft_config")
    if tc.vocab != dc.vocab:
        raise ValueError(f"draft_config must share the target's vocabulary ({tc.vocab}); got {dc.vocab}")
    M._check_params("target_params", target_params, tc)
    M._check_params("draft_params", draft_params, dc)
    M._check_tokens(prompt, tc, name="prompt")
    if prompt.shape[0] != 1:
        raise ValueError(f"prompt must hold one sequence, shape [1, T]; got {tuple(prompt.shape)}")
    return tc, dc


@checked
def speculative_generate(
    target_params,
    target_config,
    draft_params,
    draft_config,
    prompt,
    new_tokens: _Short,
    *,
    k: _Drafts = 4,
    temperature: _Temperature = 1.0,
    seed: _Seed = 0,
) -> dict:
    """Speculative sampling of ``new_tokens`` after ``prompt[1, T]`` (one sequence).

    Returns ``{"tokens": [new_tokens], "rounds": target passes, "accepted": draft tokens kept}``; tokens per
    target pass is ``new_tokens / rounds`` (about, the last round may overshoot). The target and draft must share
    the vocabulary. ``temperature=0`` reproduces the target's greedy tokens exactly.
    """
    tc, dc = _speculative_configs(target_params, target_config, draft_params, draft_config, prompt)
    tokens, rounds, accepted = _speculative(
        target_params, draft_params, prompt, jax.random.PRNGKey(seed), tc, dc, new_tokens, k, temperature
    )
    return {"tokens": tokens, "rounds": int(rounds), "accepted": int(accepted)}


@checked
def speculative_samples(
    target_params,
    target_config,
    draft_params,
    draft_config,
    prompt,
    new_tokens: _Short,
    n_samples: Annotated[int, Positive(integer=True, maximum=MAX_SAMPLES)],
    *,
    k: _Drafts = 2,
    temperature: _Temperature = 1.0,
    seed: _Seed = 0,
):
    """``n_samples`` independent speculative generations (vmapped over keys): tokens ``[n_samples, new_tokens]``
    and the acceptance rate (draft tokens kept / drafted)."""
    tc, dc = _speculative_configs(target_params, target_config, draft_params, draft_config, prompt)
    keys = jax.random.split(jax.random.PRNGKey(seed), n_samples)
    run = jax.jit(
        jax.vmap(lambda key: _speculative(target_params, draft_params, prompt, key, tc, dc, new_tokens, k, temperature))
    )
    tokens, rounds, accepted = run(keys)
    rate = float(jnp.sum(accepted)) / float(k * jnp.sum(rounds))
    return tokens, rate


@checked
def target_distribution(
    params,
    config,
    prompt,
    new_tokens: Annotated[int, Positive(integer=True, maximum=4)] = 2,
    *,
    temperature: _Temperature = 1.0,
) -> np.ndarray:
    """The exact probability of every continuation of ``new_tokens`` tokens (``vocab ** new_tokens`` of them, in
    row-major order) under ``params``: the chain rule over the model's own next-token distributions. For tiny
    vocabularies only (the speculative-sampling test)."""
    c = _config(config)
    if c.vocab**new_tokens > 2**16:
        raise ValueError(f"vocab ** new_tokens must be at most 65,536; got {c.vocab**new_tokens:,}")
    fwd = jax.jit(M.forward, static_argnames=("config",))
    probs = np.ones(1)
    seqs = np.asarray(prompt)
    for _ in range(new_tokens):
        p = np.asarray(token_probs(fwd(params, jnp.asarray(seqs), config=c)[:, -1], temperature), np.float64)
        probs = (probs[:, None] * p).reshape(-1)
        seqs = np.concatenate(
            [np.repeat(seqs, c.vocab, axis=0), np.tile(np.arange(c.vocab), len(seqs))[:, None]], axis=1
        ).astype(np.int32)
    return probs


# ------------------------------------------------------------------------------------------------ measuring
def _decode_args(c, batch, seq_len, dtype, concrete: bool):
    S = seq_len + 1
    if concrete:
        params = M.init_params(c, 0, dtype)
        cache = init_cache(c, batch, S, dtype)
        token = jnp.zeros((batch,), jnp.int32)
    else:
        params = M.param_shapes(c, dtype)
        kv = jax.ShapeDtypeStruct((batch, c.n_kv_heads, S, c.d_head), jnp.dtype(dtype))
        cache = {"k": [kv] * c.n_layers, "v": [kv] * c.n_layers}
        token = jax.ShapeDtypeStruct((batch,), jnp.int32)
    return params, cache, token, jnp.int32(seq_len)


@checked
def decode_cost(config, batch: _Batch, seq_len: _Len, dtype=jnp.float32) -> dict:
    """XLA's cost analysis (keys sorted) of one compiled :func:`decode_step` of ``batch`` sequences whose caches
    hold ``seq_len`` tokens (buffer ``seq_len + 1``, the new token written at ``seq_len``), cache donated."""
    c = _config(config)
    dtype = M._check_float_dtype("dtype", dtype)
    params, cache, token, pos = _decode_args(c, batch, seq_len, dtype, concrete=False)
    compiled = _decode_step.lower(params, cache, token, pos, c).compile()
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):
        cost = cost[0]
    return {key: float(cost[key]) for key in sorted(cost)}


@checked
def measure_decode_step(
    config,
    batch: _Batch,
    seq_len: _Len,
    dtype=jnp.float32,
    repeats: Annotated[int, Positive(integer=True, maximum=1000)] = 5,
    steps: Annotated[int, Positive(integer=True, maximum=64)] = 4,
):
    """Seconds per decode step at ``batch`` sequences with ``seq_len`` tokens of cache, on the default device.

    Times (:func:`tpu_notes.bench.time_fn`) one jitted loop of ``steps`` greedy decode steps from position
    ``seq_len`` (the cache is the loop's carry, so XLA updates it in place, as in :func:`generate`) and divides by
    ``steps``. Returns the :class:`~tpu_notes.bench.Timing` of the loop and the seconds per step."""
    from .bench import time_fn

    c = _config(config)
    dtype = M._check_float_dtype("dtype", dtype)
    params = M.init_params(c, 0, dtype)
    cache = init_cache(c, batch, seq_len + steps, dtype)
    token = jnp.zeros((batch,), jnp.int32)

    def loop(params, cache, token):
        def body(i, carry):
            cache, tok = carry
            logits, cache = _cached_forward(params, tok[:, None], cache, seq_len + i, c)
            return cache, jnp.argmax(logits[:, 0], axis=-1).astype(jnp.int32)

        return jax.lax.fori_loop(0, steps, body, (cache, token))[1]

    timing = time_fn(jax.jit(loop), params, cache, token, repeats=repeats)
    return timing, timing.median_s / steps


def _check_cases(name: str, cases, width: int) -> list:
    what = "(batch, seq_len)" if width == 2 else "(config, batch, seq_len)"
    if isinstance(cases, (str, bytes)) or not isinstance(cases, (list, tuple)) or not cases:
        raise TypeError(f"{name} must be a non-empty list of {what} tuples; got {cases!r}")
    out = []
    for i, case in enumerate(cases):
        if isinstance(case, (str, bytes)) or not isinstance(case, (list, tuple)) or len(case) != width:
            raise TypeError(f"{name}[{i}] must be a {what} tuple; got {case!r}")
        head = [_config(case[0], f"{name}[{i}] config")] if width == 3 else []
        out.append(
            (
                *head,
                Positive(integer=True, maximum=2**16).check(f"{name}[{i}] batch", case[-2]),
                Positive(integer=True, maximum=MAX_LEN).check(f"{name}[{i}] seq_len", case[-1]),
            )
        )
    return out


def measured_vs_predicted(config, fit, cases, dtype=jnp.float32, repeats: int = 3) -> list[dict]:
    """For each ``(batch, seq_len)`` of ``cases``: the measured seconds per decode step
    (:func:`measure_decode_step`) beside :func:`tpu_notes.inference.decode_step_time` on ``fit`` (a measured
    roofline, or a chip), with their ratio and the bound the model names."""
    from .inference import decode_step_time
    from .units import canonical_dtype

    c = _config(config)
    name = canonical_dtype(jnp.dtype(M._check_float_dtype("dtype", dtype)).name)
    rows = []
    for batch, seq_len in _check_cases("cases", cases, 2):
        _, measured = measure_decode_step(c, batch, seq_len, dtype, repeats=repeats)
        pred = decode_step_time(c, fit, 1, batch, seq_len, weight_dtype=name, kv_dtype=name, compute_dtype="bf16")
        rows.append(
            {
                "batch": batch,
                "seq_len": seq_len,
                "measured_s": measured,
                "predicted_s": pred.total,
                "ratio": measured / pred.total,
                "bound": pred.bound,
            }
        )
    return rows


def decode_bytes_oracle(cases, dtype=jnp.float32) -> list[dict]:
    """For each ``(config, batch, seq_len)``: XLA's bytes accessed for one compiled decode step
    (:func:`decode_cost`) beside the model's weights read and KV cache read, and the embedding table that XLA counts
    whole for the token lookup (a gather) while the model counts the ``B`` rows it reads."""
    from .inference import weight_params_read

    rows = []
    for config, batch, seq_len in _check_cases("cases", cases, 3):
        c = _config(config)
        b = jnp.dtype(M._check_float_dtype("dtype", dtype)).itemsize
        weights = weight_params_read(c, batch) * b
        kv = batch * seq_len * c.kv_bytes_per_token("fp32") * b / 4
        table = 0.0 if c.tied_embeddings else c.vocab * c.d_model * b
        xla = decode_cost(c, batch, seq_len, dtype)["bytes accessed"]
        rows.append(
            {
                "model": c.name,
                "batch": batch,
                "seq_len": seq_len,
                "weights": weights,
                "kv": kv,
                "table": table,
                "xla": xla,
                "ratio": xla / (weights + kv),
                "ratio_with_table": xla / (weights + kv + table),
            }
        )
    return rows


__all__ = [
    "MAX_LEN",
    "acceptance_probability",
    "cache_bytes",
    "decode_bytes_oracle",
    "decode_cost",
    "decode_step",
    "generate",
    "measured_vs_predicted",
    "generate_uncached",
    "init_cache",
    "measure_decode_step",
    "prefill",
    "residual_distribution",
    "speculative_generate",
    "speculative_samples",
    "speculative_step_distribution",
    "target_distribution",
    "token_probs",
]
