"""A small Llama-style decoder in plain JAX, built from any :class:`~tpu_notes.transformer.TransformerConfig`.

Chapter 4 checks its parameter count and XLA's FLOP count against :mod:`tpu_notes.transformer`; later chapters
train, shard, serve and profile it. Everything is a pure function of a parameter pytree (nested dicts of arrays):

- ``init_params(config, key)`` → ``{"embed": [V, D], "layers": [layer, ...], "final_norm": [D], "unembed": [D, V]}``
  (no ``"unembed"`` when the embeddings are tied). A layer is ``{"attn_norm", "wq" [D, N, H], "wk" [D, K, H],
  "wv" [D, K, H], "wo" [N, H, D], "mlp_norm", "mlp"}``; a dense ``"mlp"`` is ``{"w_gate" [D, F], "w_up" [D, F],
  "w_down" [F, D]}`` (no gate when ``gated_mlp=False``: then ``gelu(x W_up) W_down``); a MoE ``"mlp"`` adds a
  ``"router" [D, E]``, stacks the experts (``"w_gate" [E, D, F_e]``...) and keeps the shared experts as one
  dense MLP of width ``n_shared_experts · F_e`` under ``"shared"``.
- ``forward(params, tokens, config)`` → logits ``[B, T, V]``: embedding lookup, per layer
  ``x + attn(rmsnorm(x))`` then ``x + mlp(rmsnorm(x))``, a final RMSNorm and the unembedding. Attention is
  grouped-query attention with rotary embeddings and a causal mask; it computes the full ``T × T`` score matrix and
  masks it (so it does the FLOPs of ``causal=False`` in the counting functions).
- MoE routing is top-k with **capacity-based dispatch by gather/scatter**: each expert gets
  ``C = ceil(capacity_factor · T·k / E)`` slots; the tokens routed to it are gathered into its slots (tokens over
  capacity are dropped and keep only their residual and the shared expert), the experts run as one batched matmul
  ``[E, C, D] @ [E, D, F_e]`` and the results are scattered back, weighted by the router scores (renormalised over
  the ``k`` chosen experts when ``k > 1``). With ``capacity_factor=1`` and ``T·k`` divisible by ``E`` the experts
  do exactly ``k`` experts' worth of FLOPs per token, which is what
  :meth:`~tpu_notes.transformer.TransformerConfig.flops_per_token`
  counts; gathers and scatters move data and add no matmul FLOPs.
- ``loss`` is the mean next-token cross-entropy (the last position has no target and is masked out, not sliced,
  so the unembedding still runs on all ``T`` positions); ``train_step`` is one step of plain SGD.

Importing this module imports JAX; ``import tpu_notes`` alone does not.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Annotated

import jax
import jax.numpy as jnp
import numpy as np

from .transformer import TransformerConfig, as_config
from .transformer import moe_capacity as transformer_moe_capacity
from .units import Bool, Positive, PositiveFloat, check_bool, check_positive, checked

#: Largest sequence length and batch the model builds tables or shapes for (a typo must not allocate terabytes).
MAX_SEQ_LEN = 2**20
MAX_BATCH = 2**20
#: Most tokens (batch × seq_len) a call materialises as an array.
MAX_TOKENS = 2**26


def _check_array(name: str, x, ndim: int | None = None, min_ndim: int = 1):
    """``x`` must be an array (anything with ``shape``, ``ndim`` and ``dtype``) of ``ndim`` dimensions."""
    if not (hasattr(x, "shape") and hasattr(x, "ndim") and hasattr(x, "dtype")):
        raise TypeError(f"{name} must be an array; got {type(x).__name__}")
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimensions; got shape {tuple(x.shape)}")
    if x.ndim < min_ndim:
        raise ValueError(f"{name} must have at least {min_ndim} dimension(s); got shape {tuple(x.shape)}")
    return x


def _check_params(name: str, params, config: TransformerConfig | None = None) -> dict:
    """``params`` must be an :func:`init_params` pytree (of ``config``'s layer count and vocabulary, when given)."""
    if not isinstance(params, dict) or "embed" not in params or "layers" not in params:
        raise TypeError(
            f"{name} must be the parameter pytree of init_params (a dict with 'embed' and 'layers'); "
            f"got {type(params).__name__}"
        )
    if config is not None:
        if not isinstance(params["layers"], (list, tuple)) or len(params["layers"]) != config.n_layers:
            got = len(params["layers"]) if isinstance(params["layers"], (list, tuple)) else type(params["layers"])
            raise ValueError(f"{name} must hold the {config.n_layers} layers of config {config.name or ''}; got {got}")
        if getattr(params["embed"], "shape", (None,))[0] != config.vocab:
            raise ValueError(
                f"{name}['embed'] must have {config.vocab} rows (config's vocab); got shape "
                f"{tuple(getattr(params['embed'], 'shape', ()))}"
            )
    return params


def _check_tokens(tokens, config: TransformerConfig, min_len: int = 1, name: str = "tokens"):
    """Integer ids ``[batch, seq_len]`` in ``[0, vocab)`` (the range is checked on concrete arrays: JAX's gather
    would clamp an id past the table silently; a traced array under ``jit`` is checked by its caller)."""
    _check_array(name, tokens, ndim=2)
    if not jnp.issubdtype(tokens.dtype, jnp.integer):
        raise TypeError(f"{name} must hold integer token ids; got dtype {tokens.dtype}")
    if tokens.shape[0] < 1 or tokens.shape[1] < min_len:
        raise ValueError(f"{name} must have shape [batch >= 1, seq_len >= {min_len}]; got {tuple(tokens.shape)}")
    if not isinstance(tokens, jax.core.Tracer):
        lo, hi = int(tokens.min()), int(tokens.max())
        if lo < 0 or hi >= config.vocab:
            raise ValueError(f"{name} must hold token ids in [0, vocab={config.vocab}); got ids from {lo} to {hi}")
    return tokens


def _check_scalar(name: str, value, **kwargs):
    """:func:`check_positive` for a number; a traced value (under ``jax.jit``) passes through, and a concrete
    array scalar (numpy's or JAX's, e.g. ``np.float32(nan)``) is checked by its value and returned as it is."""
    if isinstance(value, jax.core.Tracer):
        return value
    if hasattr(value, "shape"):
        if tuple(value.shape) != ():
            raise TypeError(f"{name} must be a number (a scalar); got an array of shape {tuple(value.shape)}")
        check_positive(name, float(value), **kwargs)
        return value
    return check_positive(name, value, **kwargs)


def _check_fn(name: str, fn):
    if not callable(fn):
        raise TypeError(f"{name} must be a function such as tpu_notes.model.attention; got {fn!r}")
    return fn


def _check_supported(config: TransformerConfig) -> TransformerConfig:
    config = as_config(config, "config")
    if config.is_mla:
        raise NotImplementedError(
            f"{config.name or 'this config'} uses multi-head latent attention (MLA), which tpu_notes.model does not "
            "implement; the counting functions of tpu_notes.transformer support it. Use a GQA config."
        )
    if config.d_head % 2:
        raise ValueError(f"d_head must be even for rotary embeddings; got {config.d_head}")
    return config


# ------------------------------------------------------------------------------------------------------------
# Parameters
# ------------------------------------------------------------------------------------------------------------


def _build(c: TransformerConfig, leaf) -> dict:
    """The parameter pytree of ``c``; ``leaf(shape, fan_in)`` makes each array (``fan_in=None``: a norm gain)."""
    D, F, N, K, H, V = c.d_model, c.d_ff, c.n_heads, c.n_kv_heads, c.d_head, c.vocab

    def mlp(Fw, lead=()):
        p = {"w_gate": leaf(lead + (D, Fw), D)} if c.gated_mlp else {}
        p.update(w_up=leaf(lead + (D, Fw), D), w_down=leaf(lead + (Fw, D), Fw))
        return p

    params = {"embed": leaf((V, D), 1), "layers": []}
    for i in range(c.n_layers):
        layer = {
            "attn_norm": leaf((D,), None),
            "wq": leaf((D, N, H), D),
            "wk": leaf((D, K, H), D),
            "wv": leaf((D, K, H), D),
            "wo": leaf((N, H, D), N * H),
            "mlp_norm": leaf((D,), None),
        }
        if c.is_moe and i >= c.n_dense_layers:
            layer["mlp"] = {"router": leaf((D, c.n_experts), D), **mlp(c.expert_ff, (c.n_experts,))}
            if c.n_shared_experts:
                layer["mlp"]["shared"] = mlp(c.n_shared_experts * c.expert_ff)
        else:
            layer["mlp"] = mlp(F)
        params["layers"].append(layer)
    params["final_norm"] = leaf((D,), None)
    if not c.tied_embeddings:
        params["unembed"] = leaf((D, V), D)
    return params


def init_params(config: TransformerConfig, key, dtype=jnp.float32) -> dict:
    """Random parameters for ``config`` (normal, scaled by ``1/sqrt(fan_in)``; norm gains 1), as a pytree.

    ``key`` is a JAX PRNG key or an integer seed; the numbers are drawn with numpy (fast, nothing to compile)
    from a seed derived from it, so the same key always gives the same parameters. The number of elements
    equals ``config.param_count()`` exactly (Chapter 4 tests it).
    """
    c = _check_supported(config)
    dtype = _check_float_dtype("dtype", dtype)
    if isinstance(key, bool) or (not isinstance(key, int) and not hasattr(key, "dtype")):
        raise TypeError(f"key must be a JAX PRNG key or a non-negative integer seed; got {type(key).__name__}")
    if isinstance(key, int):
        if key < 0:
            raise ValueError(f"key must be a non-negative integer seed or a PRNG key; got {key}")
        seed = [key]
    else:
        data = jax.random.key_data(key) if jnp.issubdtype(key.dtype, jax.dtypes.prng_key) else key
        seed = [int(v) for v in np.asarray(data).ravel()]
    rng = np.random.default_rng(seed)

    def leaf(shape, fan_in):
        if fan_in is None:
            return jnp.ones(shape, dtype)
        return jnp.asarray(rng.standard_normal(shape, dtype=np.float32) / np.float32(math.sqrt(fan_in)), dtype)

    return _build(c, leaf)


def _check_float_dtype(name: str, dtype):
    if dtype is None:
        raise TypeError(f"{name} must be a floating-point dtype such as jnp.float32 or 'bfloat16'; got None")
    try:
        d = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(
            f"{name} must be a floating-point dtype such as jnp.float32 or 'bfloat16'; got {dtype!r}"
        ) from err
    if not jnp.issubdtype(d, jnp.floating):
        raise ValueError(f"{name} must be a floating-point dtype such as jnp.float32 or 'bfloat16'; got {dtype!r}")
    return d


def param_groups(params) -> dict:
    """Elements of ``params`` by role, with the keys of :class:`~tpu_notes.transformer.ParamBreakdown`.

    Classified from the pytree paths alone (``embed``, ``unembed``, ``*norm``, ``w[qkvo]``, ``mlp``), so the test
    can compare the model with the counting formulas role by role.
    """
    _check_params("params", params)
    groups = {"embedding": 0, "attention": 0, "mlp": 0, "norms": 0, "unembedding": 0}
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        names = [str(getattr(p, "key", getattr(p, "idx", ""))) for p in path]
        last = names[-1]
        if names[0] == "embed":
            g = "embedding"
        elif names[0] == "unembed":
            g = "unembedding"
        elif last.endswith("norm"):
            g = "norms"
        elif last in ("wq", "wk", "wv", "wo"):
            g = "attention"
        elif "mlp" in names:
            g = "mlp"
        else:
            raise ValueError(f"params holds an unclassified parameter {'/'.join(names)}")
        groups[g] += int(np.prod(leaf.shape))
    groups["total"] = sum(groups.values())
    return groups


def count_params(params) -> int:
    """Number of elements in a parameter pytree."""
    leaves = jax.tree_util.tree_leaves(params)
    if isinstance(params, (str, bytes)) or not leaves or not all(hasattr(x, "shape") for x in leaves):
        raise TypeError(f"params must be a pytree of arrays (e.g. from init_params); got {type(params).__name__}")
    return int(sum(np.prod(x.shape) for x in jax.tree_util.tree_leaves(params)))


# ------------------------------------------------------------------------------------------------------------
# Building blocks
# ------------------------------------------------------------------------------------------------------------


def rms_norm(x, gain, eps: float = 1e-6):
    """RMSNorm over the last axis: ``x / sqrt(mean(x²) + eps) · gain`` (``eps`` > 0: it keeps a zero row finite)."""
    _check_array("x", x)
    _check_array("gain", gain)
    if tuple(gain.shape) not in ((x.shape[-1],), ()):
        raise ValueError(f"gain must have shape ({x.shape[-1]},) to match x's last axis; got {tuple(gain.shape)}")
    eps = _check_scalar("eps", eps)
    x32 = x.astype(jnp.float32)
    return (x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)).astype(x.dtype) * gain


_SeqLen = Annotated[int, Positive(integer=True, maximum=MAX_SEQ_LEN)]
_Batch = Annotated[int, Positive(integer=True, maximum=MAX_BATCH)]
_Seed = Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**32 - 1)]


@checked
def rotary_tables(
    seq_len: _SeqLen,
    d_head: Annotated[int, Positive(integer=True, maximum=2**16)],
    base: PositiveFloat = 10_000.0,
    offset: Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**31)] = 0,
):
    """``(cos, sin)`` of shape ``[seq_len, d_head/2]`` for positions ``offset .. offset+seq_len-1``.

    ``d_head`` must be even (pairs of features rotate together); ``base`` > 0."""
    if d_head % 2:
        raise ValueError(f"d_head must be even for rotary embeddings; got {d_head}")
    if offset + seq_len > 2**31:
        raise ValueError(f"offset + seq_len must be at most 2**31 (int32 positions); got offset={offset:,}")
    inv = 1.0 / base ** (np.arange(0, d_head, 2) / d_head)
    ang = np.arange(offset, offset + seq_len)[:, None] * inv[None, :]
    return jnp.asarray(np.cos(ang), jnp.float32), jnp.asarray(np.sin(ang), jnp.float32)


def apply_rotary(x, cos, sin):
    """Rotate pairs (first half, second half) of the last axis of ``x[B, T, heads, H]`` by the position angles."""
    _check_array("x", x, ndim=4)
    _check_array("cos", cos, ndim=2)
    _check_array("sin", sin, ndim=2)
    want = (x.shape[1], x.shape[-1] // 2)
    for name, t in (("cos", cos), ("sin", sin)):
        if tuple(t.shape) != want:
            raise ValueError(
                f"{name} must have shape {want} (seq_len, H/2) for x of shape {tuple(x.shape)}; got {tuple(t.shape)}"
            )
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    c, s = cos[None, :, None, :].astype(x.dtype), sin[None, :, None, :].astype(x.dtype)
    return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def attention(q, k, v, causal: bool = True):
    """Plain grouped-query attention. ``q[B, T, N, H]``, ``k, v[B, S, K, H]`` → ``[B, T, N, H]``.

    Materialises the ``[B, K, G, T, S]`` score matrix (``G = N/K``); with ``causal`` the query at position
    ``t`` (aligned to the end of the keys) sees keys ``<= t + S - T``.
    """
    _check_qkv(q, k, v, causal)
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    qg = q.reshape(B, T, K, N // K, H)
    s = jnp.einsum("btkgh,bskh->bkgts", qg, k) / math.sqrt(H)
    if causal:
        mask = jnp.arange(S)[None, :] <= jnp.arange(T)[:, None] + (S - T)
        s = jnp.where(mask, s, jnp.finfo(s.dtype).min)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bkgts,bskh->btkgh", p, v).reshape(B, T, N, H)


@checked
def flash_attention(
    q, k, v, causal: Bool = True, block_size: Annotated[int, Positive(integer=True, maximum=2**20)] = 128
):
    """The same result as :func:`attention`, computed one block of ``block_size`` keys at a time.

    Online softmax: a ``lax.scan`` over key blocks updates a running row maximum ``m``, a running denominator ``l``
    and an unnormalised output ``acc``, rescaling the old ones by ``exp(m_old - m_new)``. Only ``[.., T, block]``
    scores exist at any time, never the ``T × S`` matrix; the result is divided by ``l`` at the end. (A real
    kernel also tiles the queries and skips fully masked blocks; this one keeps the arithmetic visible.)
    """
    _check_qkv(q, k, v, causal)
    B, T, N, H = q.shape
    S, K = k.shape[1], k.shape[2]
    if block_size <= 0 or S % block_size:
        raise ValueError(f"block_size ({block_size}) must be positive and divide the key length ({S})")
    G, nb = N // K, S // block_size
    qg = (q.reshape(B, T, K, G, H) / math.sqrt(H)).astype(jnp.float32)
    kb = jnp.moveaxis(k.reshape(B, nb, block_size, K, H), 1, 0).astype(jnp.float32)
    vb = jnp.moveaxis(v.reshape(B, nb, block_size, K, H), 1, 0).astype(jnp.float32)
    rows = jnp.arange(T)[:, None] + (S - T)

    def step(carry, xs):
        m, denom, acc = carry
        i, kblk, vblk = xs
        s = jnp.einsum("btkgh,bskh->bkgts", qg, kblk)
        if causal:
            s = jnp.where(i * block_size + jnp.arange(block_size)[None, :] <= rows, s, -jnp.inf)
        m_new = jnp.maximum(m, s.max(axis=-1))
        safe = jnp.where(jnp.isfinite(m_new), m_new, 0.0)  # rows that have seen no key yet
        p = jnp.exp(s - safe[..., None])
        scale = jnp.exp(jnp.where(jnp.isfinite(m), m - safe, -jnp.inf))
        denom = denom * scale + p.sum(axis=-1)
        acc = acc * scale[..., None] + jnp.einsum("bkgts,bskh->bkgth", p, vblk)
        return (m_new, denom, acc), None

    init = (
        jnp.full((B, K, G, T), -jnp.inf, jnp.float32),
        jnp.zeros((B, K, G, T), jnp.float32),
        jnp.zeros((B, K, G, T, H), jnp.float32),
    )
    (m, denom, acc), _ = jax.lax.scan(step, init, (jnp.arange(nb), kb, vb))
    out = acc / denom[..., None]
    return jnp.transpose(out, (0, 3, 1, 2, 4)).reshape(B, T, N, H).astype(q.dtype)


def _check_qkv(q, k, v, causal) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_array(name, t, ndim=4)
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"v must have the shape of k {tuple(k.shape)}; got {tuple(v.shape)}")
    if k.shape[0] != q.shape[0] or k.shape[3] != q.shape[3]:
        raise ValueError(f"k must match q's batch and head width: q {tuple(q.shape)}, k {tuple(k.shape)}")
    if q.shape[2] % k.shape[2]:
        raise ValueError(f"k's {k.shape[2]} key/value heads must divide q's {q.shape[2]} query heads")
    check_bool("causal", causal)


def _mlp(x, p, gated: bool):
    up = x @ p["w_up"]
    h = jax.nn.silu(x @ p["w_gate"]) * up if gated else jax.nn.gelu(up)
    return h @ p["w_down"]


def moe_capacity(n_tokens: int, config: TransformerConfig, capacity_factor: float = 1.0) -> int:
    """Slots per expert of ``config``'s MoE layers: :func:`tpu_notes.transformer.moe_capacity` with its experts,
    ``ceil(capacity_factor · n_tokens · k / E)``."""
    c = as_config(config, "config")
    return transformer_moe_capacity(n_tokens, c.n_experts, capacity_factor, experts_per_token=c.experts_per_token)


def moe_mlp(x, p, config: TransformerConfig, capacity_factor: float = 1.0):
    """Top-k mixture of experts on ``x[T, D]`` with capacity-based gather/scatter dispatch (see module doc)."""
    c = _check_supported(config)
    if not c.is_moe:
        raise ValueError(f"config must be a mixture-of-experts model (n_experts > 1); got {c.name or c}")
    _check_array("x", x, ndim=2)
    if x.shape[1] != c.d_model:
        raise ValueError(f"x must have shape [tokens, d_model={c.d_model}]; got {tuple(x.shape)}")
    if not isinstance(p, dict) or "router" not in p:
        raise TypeError(f"p must be a MoE layer's 'mlp' parameters (a dict with 'router'); got {type(p).__name__}")
    T, D = x.shape
    E, k = c.n_experts, c.experts_per_token
    C = moe_capacity(T, c, capacity_factor)
    probs = jax.nn.softmax((x @ p["router"]).astype(jnp.float32), axis=-1)  # [T, E]
    top_p, top_e = jax.lax.top_k(probs, k)  # [T, k]
    if k > 1:  # renormalise over the chosen experts (k = 1 keeps the raw score,
        top_p = top_p / top_p.sum(axis=-1, keepdims=True)  # so the router still gets a gradient)
    flat_e = top_e.reshape(-1)  # [T·k] expert of each assignment
    flat_t = jnp.arange(T * k) // k  # token of each assignment
    order = jnp.argsort(flat_e, stable=True)  # group assignments by expert
    e_sorted, t_sorted = flat_e[order], flat_t[order]
    counts = jnp.zeros((E,), jnp.int32).at[flat_e].add(1)
    starts = jnp.cumsum(counts) - counts
    pos = jnp.arange(T * k) - starts[e_sorted]  # rank within its expert
    slot = jnp.where(pos < C, e_sorted * C + pos, E * C)  # E·C = dropped (out of range)
    buf = jnp.zeros((E * C, D), x.dtype).at[slot].set(x[t_sorted], mode="drop").reshape(E, C, D)
    up = jnp.einsum("ecd,edf->ecf", buf, p["w_up"])
    h = jax.nn.silu(jnp.einsum("ecd,edf->ecf", buf, p["w_gate"])) * up if c.gated_mlp else jax.nn.gelu(up)
    out = jnp.einsum("ecf,efd->ecd", h, p["w_down"]).reshape(E * C, D)
    back = out.at[slot].get(mode="fill", fill_value=0)  # [T·k, D], 0 where dropped
    w = top_p.reshape(-1)[order].astype(x.dtype)
    y = jnp.zeros((T, D), x.dtype).at[t_sorted].add(back * w[:, None])
    if "shared" in p:
        y = y + _mlp(x, p["shared"], c.gated_mlp)
    return y


def block(x, layer, config: TransformerConfig, cos, sin, capacity_factor: float = 1.0, attention_fn=attention):
    """One pre-norm decoder layer on ``x[B, T, D]``."""
    config = _check_supported(config)
    _check_array("x", x, ndim=3)
    if x.shape[2] != config.d_model:
        raise ValueError(f"x must have shape [batch, seq_len, d_model={config.d_model}]; got {tuple(x.shape)}")
    if not isinstance(layer, dict) or "wq" not in layer or "mlp" not in layer:
        raise TypeError(
            f"layer must be one entry of params['layers'] (a dict with 'wq' and 'mlp'); got {type(layer).__name__}"
        )
    _check_fn("attention_fn", attention_fn)
    _check_scalar("capacity_factor", capacity_factor, maximum=1e6)
    B, T, D = x.shape
    h = rms_norm(x, layer["attn_norm"])
    q = apply_rotary(jnp.einsum("btd,dnh->btnh", h, layer["wq"]), cos, sin)
    k = apply_rotary(jnp.einsum("btd,dkh->btkh", h, layer["wk"]), cos, sin)
    v = jnp.einsum("btd,dkh->btkh", h, layer["wv"])
    o = attention_fn(q, k, v, causal=True)
    x = x + jnp.einsum("btnh,nhd->btd", o, layer["wo"])
    h = rms_norm(x, layer["mlp_norm"])
    if "router" in layer["mlp"]:
        y = moe_mlp(h.reshape(B * T, D), layer["mlp"], config, capacity_factor).reshape(B, T, D)
    else:
        y = _mlp(h, layer["mlp"], config.gated_mlp)
    return x + y


# ------------------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------------------


def forward(params, tokens, config: TransformerConfig, capacity_factor: float = 1.0, attention_fn=attention):
    """Logits ``[B, T, V]`` for integer ``tokens[B, T]``. ``attention_fn`` may be :func:`flash_attention`."""
    c = _check_supported(config)
    _check_params("params", params, c)
    _check_tokens(tokens, c)
    _check_scalar("capacity_factor", capacity_factor, maximum=1e6)
    _check_fn("attention_fn", attention_fn)
    T = tokens.shape[1]
    cos, sin = rotary_tables(T, c.d_head)
    x = params["embed"][tokens]
    for layer in params["layers"]:
        x = block(x, layer, c, cos, sin, capacity_factor, attention_fn)
    x = rms_norm(x, params["final_norm"])
    w_out = params["embed"].T if c.tied_embeddings else params["unembed"]
    return jnp.einsum("btd,dv->btv", x, w_out)


def loss(params, tokens, config: TransformerConfig, capacity_factor: float = 1.0):
    """Mean next-token cross-entropy (nats) of ``tokens[B, T]``; position ``t`` predicts token ``t + 1``
    (so ``T`` >= 2)."""
    _check_tokens(tokens, _check_supported(config), min_len=2)
    logits = forward(params, tokens, config, capacity_factor)
    return _summed_nll(logits, tokens) / (tokens.shape[0] * (tokens.shape[1] - 1))


def _summed_nll(logits, tokens):
    """Summed next-token cross-entropy (nats) of ``tokens[B, T]`` under ``logits[B, T, V]``, the last position
    masked (:func:`loss` and the pipeline's loss in :mod:`tpu_notes.parallel`)."""
    logits = logits.astype(jnp.float32)
    targets = jnp.roll(tokens, -1, axis=1)
    logp = jax.nn.log_softmax(logits, axis=-1)
    nll = -jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    mask = (jnp.arange(tokens.shape[1]) < tokens.shape[1] - 1).astype(jnp.float32)[None, :]
    return jnp.sum(nll * mask)


def grads(params, tokens, config: TransformerConfig, capacity_factor: float = 1.0):
    """``(loss, gradients)``: one forward and one backward pass."""
    _check_params("params", params)
    return jax.value_and_grad(loss)(params, tokens, config, capacity_factor)


def train_step(params, tokens, config: TransformerConfig, lr: float = 1e-2, capacity_factor: float = 1.0):
    """One step of plain SGD: ``(new_params, loss)``. Jit it with ``static_argnames=("config",)``."""
    lr = _check_scalar("lr", lr)
    value, g = grads(params, tokens, config, capacity_factor)
    return jax.tree_util.tree_map(lambda p, d: p - lr * d.astype(p.dtype), params, g), value


@checked
def random_tokens(config: TransformerConfig, batch: _Batch, seq_len: _SeqLen, seed: _Seed = 0):
    """Uniform random token ids ``[batch, seq_len]`` (int32), reproducible from ``seed``."""
    c = as_config(config, "config")
    if batch * seq_len > MAX_TOKENS:
        raise ValueError(f"batch x seq_len = {batch * seq_len:,} tokens exceeds MAX_TOKENS={MAX_TOKENS:,}")
    return jax.random.randint(jax.random.PRNGKey(seed), (batch, seq_len), 0, c.vocab, dtype=jnp.int32)


# ------------------------------------------------------------------------------------------------------------
# XLA's own FLOP count
# ------------------------------------------------------------------------------------------------------------


@checked
def xla_cost(fn, *args, compiled: Bool = True) -> dict:
    """XLA's cost analysis of ``jax.jit(fn)(*args)`` on one device, keys sorted (``"flops"``, ``"bytes accessed"``...).

    ``compiled=True`` analyses the optimised program that would run (``.lower(...).compile()``); ``False`` the
    program as lowered, before XLA's optimisation passes (``.lower(...).cost_analysis()``): much faster to get,
    and for a forward pass nearly identical. ``args`` may be arrays or ``jax.ShapeDtypeStruct`` objects.
    """
    _check_fn("fn", fn)
    lowered = jax.jit(fn).lower(*args)
    cost = lowered.compile().cost_analysis() if compiled else lowered.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX returned one dict per device
        cost = cost[0]
    return {key: float(cost[key]) for key in sorted(cost)}


@checked
def xla_flops(
    config: TransformerConfig, batch: _Batch, seq_len: _SeqLen, training: Bool = False, compiled: Bool = True
) -> float:
    """FLOPs XLA counts for the model's forward pass (``training=False``) or loss + gradients (``True``)
    on ``batch × seq_len`` tokens, for one device, from shapes alone (see :func:`xla_cost` for ``compiled``)."""
    c = _check_supported(config)
    if training and seq_len < 2:
        raise ValueError(f"seq_len must be >= 2 with training=True (the loss predicts the next token); got {seq_len}")
    params = param_shapes(c)
    tokens = jax.ShapeDtypeStruct((batch, seq_len), jnp.int32)
    fn = partial(grads, config=c) if training else partial(forward, config=c)
    return xla_cost(fn, params, tokens, compiled=compiled)["flops"]


def param_shapes(config: TransformerConfig, dtype=jnp.float32):
    """The parameter pytree of ``config`` as ``jax.ShapeDtypeStruct`` leaves (no memory, no random numbers):
    enough to lower and compile the model for its cost analysis."""
    c = _check_supported(config)
    dtype = _check_float_dtype("dtype", dtype)
    return _build(c, lambda shape, fan_in: jax.ShapeDtypeStruct(shape, dtype))


@checked
def xla_component_flops(
    config: TransformerConfig,
    batch: _Batch,
    seq_len: Annotated[int, Positive(integer=True, maximum=2**14)],  # it compiles a [T, T]
    compiled: Bool = False,
) -> dict:
    """FLOPs XLA counts for the forward pass's non-matmul pieces, each compiled on its own, summed over layers.

    Keys (sorted): ``"mlp_activation"`` (SiLU·up or GELU), ``"residual_adds"``, ``"rms_norms"``, ``"rotary"``,
    ``"softmax_and_mask"`` (attention scores), ``"attention_scale"`` (the ``1/sqrt(H)`` multiply),
    ``"router_and_dispatch"`` (MoE layers: router softmax, top-k, sort, gathers/scatters, gate weighting; 0 when
    dense). The counting formulas leave all of these out; Chapter 4 compares their sum with the gap between
    XLA's total and the formula.
    """
    c = _check_supported(config)
    B, T, D, N, K, H = batch, seq_len, c.d_model, c.n_heads, c.n_kv_heads, c.d_head
    G = N // K
    f32 = jnp.float32

    def ones(*shape):
        return jax.ShapeDtypeStruct(shape, f32)

    x = ones(B, T, D)
    cos, sin = rotary_tables(T, H)
    L, n_moe = c.n_layers, c.n_moe_layers
    n_dense = L - n_moe

    def flops(fn, *args):
        return xla_cost(fn, *args, compiled=compiled)["flops"]

    out = {}
    out["rms_norms"] = (2 * L + 1) * flops(rms_norm, x, ones(D))
    out["rotary"] = L * (
        flops(apply_rotary, ones(B, T, N, H), cos, sin) + flops(apply_rotary, ones(B, T, K, H), cos, sin)
    )
    s = ones(B, K, G, T, T)

    def mask_softmax(s):
        mask = jnp.arange(T)[None, :] <= jnp.arange(T)[:, None]
        return jax.nn.softmax(jnp.where(mask, s, jnp.finfo(s.dtype).min), axis=-1)

    out["softmax_and_mask"] = L * flops(mask_softmax, s)
    out["attention_scale"] = L * flops(lambda s: s / math.sqrt(H), s)
    out["residual_adds"] = 2 * L * flops(jnp.add, x, x)

    def act(a, b):
        return jax.nn.silu(a) * b if c.gated_mlp else jax.nn.gelu(b)

    act_dense = flops(act, ones(B, T, c.d_ff), ones(B, T, c.d_ff))
    act_moe = 0.0
    route = 0.0
    if n_moe:
        E, Fe = c.n_experts, c.expert_ff
        C = moe_capacity(B * T, c)
        act_moe = flops(act, ones(E, C, Fe), ones(E, C, Fe))
        if c.n_shared_experts:
            Fs = c.n_shared_experts * Fe
            act_moe += flops(act, ones(B * T, Fs), ones(B * T, Fs))
        # the MoE layer with its three expert matmuls, its shared MLP and its router matmul subtracted
        p = param_shapes(c)["layers"][-1]["mlp"]
        xt = ones(B * T, D)
        whole = flops(partial(moe_mlp, config=c), xt, p)
        mm = 2.0 * (B * T) * D * E + 2.0 * E * C * D * Fe * c.mlp_matrices
        if c.n_shared_experts:
            mm += 2.0 * B * T * D * c.n_shared_experts * Fe * c.mlp_matrices
        route = n_moe * (whole - mm - act_moe)
    out["mlp_activation"] = n_dense * act_dense + n_moe * act_moe
    out["router_and_dispatch"] = route
    return {k: out[k] for k in sorted(out)}
