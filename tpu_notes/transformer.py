"""Counting a Transformer: parameters, FLOPs, KV cache and checkpoint memory of a decoder (Chapter 4).

A decoder-only Transformer is described by a frozen :class:`TransformerConfig`. Every count here is derived from
the weight shapes of one decoder layer (the same shapes :mod:`tpu_notes.model` allocates), so the counts can be held
to two oracles: the published parameter totals of real models, and XLA's own FLOP count of the JAX model.

Conventions (Chapter 4 explains each):

- A contraction costs ``2 ×`` the product of every named dimension (batch and contracting dimensions once):
  one multiply and one add per term. :func:`einsum_flops` applies it to any einsum.
- Forward FLOPs per token = ``2 ×`` the parameters used as matmul weights (the input embedding is a lookup, not a
  matmul; the unembedding is a matmul whether or not it is tied) + dot-product attention. Training (forward +
  backward) costs ``3 ×`` the forward: the backward pass computes two products per forward product.
- Norm weights, elementwise ops, softmax and rotary embeddings are not counted as FLOPs (they are ``O(D)`` per
  token, not ``O(D²)``); the chapter measures how much XLA counts for them.
- Causal attention (``causal=True``) counts the useful half of the score matrix: each query sees on average
  ``seq_len / 2`` keys. A kernel that computes the full masked matrix does ``causal=False``'s work.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields, replace
from typing import Annotated

from .units import Kind, Positive, PositiveInt, check_bool, check_choice, check_positive, checked, dtype_bytes

# ----------------------------------------------------------------------------------------------------------------
# Contractions
# ----------------------------------------------------------------------------------------------------------------


def einsum_flops(spec: str, **dims: int) -> float:
    """FLOPs of the contraction ``spec`` (e.g. ``"bd,df->bf"``) with the size of each letter given by ``dims``.

    Every distinct index letter is counted once, whether it is a batch, free or contracting index, and the product
    is doubled (a multiply and an add per term): ``einsum_flops("bd,df->bf", b=B, d=D, f=F) == 2·B·D·F``.
    """
    if not isinstance(spec, str) or "->" not in spec:
        raise ValueError(f"spec must be an einsum string such as 'bd,df->bf'; got {spec!r}")
    lhs, out = spec.replace(" ", "").split("->")
    operands = lhs.split(",")
    if (
        not all(operands)
        or not re.fullmatch(r"[A-Za-z]*", out)
        or not all(re.fullmatch(r"[A-Za-z]+", op) for op in operands)
    ):
        raise ValueError(f"spec must name dimensions with letters, e.g. 'bd,df->bf'; got {spec!r}")
    letters = sorted(set("".join(operands)))
    missing_out = sorted(set(out) - set(letters))
    if missing_out:
        raise ValueError(f"spec output uses {missing_out} that no operand has: {spec!r}")
    missing = [c for c in letters if c not in dims]
    if missing:
        raise ValueError(f"dims must give a size for every index of {spec!r}; missing {missing}")
    extra = sorted(set(dims) - set(letters))
    if extra:
        raise ValueError(f"dims {extra} do not appear in spec {spec!r}")
    total = 2.0
    for c in letters:
        total *= check_positive(c, dims[c], integer=True)
    return total


# ----------------------------------------------------------------------------------------------------------------
# The configuration
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters of a model by role (counts of weights, not bytes)."""

    embedding: int  # input token embedding, vocab × d_model
    attention: int  # Q/K/V/O projections of every layer (MLA: the down/up projections)
    mlp: int  # MLP weights of every layer: dense MLPs, routers, routed and shared experts
    norms: int  # RMSNorm gains: two per layer, the final norm, and MLA's latent norms
    unembedding: int  # output projection d_model × vocab (0 when tied to the embedding)
    total: int  # sum of the above

    def __repr__(self) -> str:
        parts = ", ".join(f"{f.name}={getattr(self, f.name):,}" for f in fields(self))
        return f"ParamBreakdown({parts})"


@dataclass(frozen=True)
class FlopsBreakdown:
    """Forward (or training) FLOPs **per token** by part, from :meth:`TransformerConfig.flops_breakdown`.

    With ``per_layer=True`` the three layer parts are one layer's (the average layer's in a MoE model whose dense
    and MoE layers differ); the unembedding is always the whole model's single projection.
    """

    projections: float  # Q/K/V/O weight matmuls (MLA: its down/up projections), FLOPs per token
    mlp: float  # MLP weight matmuls: dense MLPs, routers, the routed experts used and shared experts
    attention: float  # dot-product attention: scores and the weighted sum of values (grows with seq_len)
    unembedding: float  # the output projection d_model x vocab (also when tied)
    total: float  # the sum: flops_per_token(...) when per_layer is False
    per_layer: bool  # True when projections, mlp and attention are for one layer

    def __repr__(self) -> str:
        from .units import fmt

        parts = ", ".join(
            f"{f.name}={fmt(getattr(self, f.name), 'FLOPs')}" for f in fields(self) if f.name != "per_layer"
        )
        return f"FlopsBreakdown({parts}, per_layer={self.per_layer})"


#: Chapter 4's three remat policies (its table and chart show these): save everything, only the weight matmuls'
#: outputs, or only each layer's input.
REMAT_POLICIES = ("none", "save_matmul_outputs", "full_block")
#: The further policies real training recipes name (MaxText's ``remat_policy``): ``"save_qkv_proj"`` (the block
#: input and the q, k, v projections), ``"save_dot_except_mlp"`` (the block input and every matmul output but the
#: MLP's) and ``"offload_layer_input"`` (full_block with its one checkpoint per layer in host memory instead of HBM,
#: as MaxText's ``decoder_layer_input: offload``). See :meth:`TransformerConfig.saved_activations`.
RECIPE_REMAT_POLICIES = ("save_qkv_proj", "save_dot_except_mlp", "offload_layer_input")
#: Every remat policy name :meth:`TransformerConfig.saved_activations` and friends understand.
ALL_REMAT_POLICIES = REMAT_POLICIES + RECIPE_REMAT_POLICIES
#: Policies that keep their checkpoints in host memory (moved over the chip's host link, ``Chip.pcie_bw``).
OFFLOAD_REMAT_POLICIES = ("offload_layer_input",)


@dataclass(frozen=True)
class TransformerConfig:
    """Shapes of a decoder-only Transformer (pre-norm, RMSNorm, rotary positions, no biases).

    Grouped-query attention has ``n_kv_heads`` key/value heads shared by ``n_heads / n_kv_heads`` query heads each
    (``n_kv_heads == n_heads`` is multi-head attention, ``1`` is multi-query). A mixture-of-experts model replaces
    the MLP of every layer after the first ``n_dense_layers`` by a router, ``n_experts`` routed experts of hidden
    size ``d_ff_expert`` (``experts_per_token`` of them used per token) and ``n_shared_experts`` always-on experts.
    Setting ``kv_lora_rank`` switches attention to multi-head latent attention (MLA, DeepSeek-V2/V3).
    """

    d_model: int  # D, width of the residual stream
    d_ff: int  # F, hidden size of a dense MLP
    n_layers: int  # L, decoder layers
    n_heads: int  # N, query heads
    n_kv_heads: int  # K, key/value heads (divides N)
    d_head: int  # H, width of one head
    vocab: int  # V, vocabulary size
    gated_mlp: bool = True  # 3 matrices (gate, up, down; SwiGLU) instead of 2 (up, down)
    tied_embeddings: bool = False  # unembedding is the transposed input embedding
    n_experts: int = 1  # E, routed experts per MoE layer (1: a dense model)
    experts_per_token: int = 1  # k, routed experts each token uses
    n_shared_experts: int = 0  # experts every token uses, beside the routed ones
    d_ff_expert: int | None = None  # hidden size of one expert (defaults to d_ff)
    n_dense_layers: int = 0  # in a MoE model, the first layers keep a dense MLP of size d_ff
    q_lora_rank: int | None = None  # MLA: rank of the query down-projection (None: direct projection)
    kv_lora_rank: int | None = None  # MLA: rank of the compressed key/value latent (None: not MLA)
    qk_rope_head_dim: int | None = None  # MLA: rotary part of each query/key head (key part shared by heads)
    qk_nope_head_dim: int | None = None  # MLA: non-rotary part of each query/key head
    v_head_dim: int | None = None  # MLA: width of each value head
    name: str = ""  # label used in tables

    def __post_init__(self):
        for f in (
            "d_model",
            "d_ff",
            "n_layers",
            "n_heads",
            "n_kv_heads",
            "d_head",
            "vocab",
            "n_experts",
            "experts_per_token",
        ):
            check_positive(f, getattr(self, f), integer=True)
        for f in ("n_shared_experts", "n_dense_layers"):
            check_positive(f, getattr(self, f), integer=True, allow_zero=True)
        for f in ("d_ff_expert", "q_lora_rank", "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if getattr(self, f) is not None:
                check_positive(f, getattr(self, f), integer=True)
        for f in ("gated_mlp", "tied_embeddings"):
            if not isinstance(getattr(self, f), bool):
                raise TypeError(f"{f} must be True or False; got {getattr(self, f)!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_kv_heads ({self.n_kv_heads}) must divide n_heads ({self.n_heads})")
        if self.experts_per_token > self.n_experts:
            raise ValueError(f"experts_per_token ({self.experts_per_token}) must be <= n_experts ({self.n_experts})")
        if self.n_dense_layers > self.n_layers:
            raise ValueError(f"n_dense_layers ({self.n_dense_layers}) must be <= n_layers ({self.n_layers})")
        if not self.is_moe and (self.n_shared_experts or self.n_dense_layers or self.d_ff_expert is not None):
            raise ValueError("n_shared_experts, n_dense_layers and d_ff_expert need n_experts > 1 (a MoE model)")
        mla = ("kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
        given = [f for f in mla if getattr(self, f) is not None]
        if given and len(given) != len(mla):
            raise ValueError(f"MLA needs all of {list(mla)}; got only {given}")
        if self.q_lora_rank is not None and not given:
            raise ValueError(
                "q_lora_rank is an MLA field: set kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim and v_head_dim too"
            )
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string; got {type(self.name).__name__}")

    # -- derived shapes ------------------------------------------------------------------------------------------
    @property
    def is_moe(self) -> bool:
        """True for a mixture-of-experts model (``n_experts > 1``)."""
        return self.n_experts > 1

    @property
    def is_mla(self) -> bool:
        """True when attention is multi-head latent attention."""
        return self.kv_lora_rank is not None

    @property
    def n_moe_layers(self) -> int:
        """Layers whose MLP is a mixture of experts."""
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    @property
    def expert_ff(self) -> int:
        """Hidden size of one expert (``d_ff_expert``, or ``d_ff`` when not given)."""
        return self.d_ff_expert if self.d_ff_expert is not None else self.d_ff

    @property
    def qk_head_dim(self) -> int:
        """Width of one query/key head used in the score dot product."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.d_head

    @property
    def v_dim(self) -> int:
        """Width of one value head."""
        return self.v_head_dim if self.is_mla else self.d_head

    @property
    def mlp_matrices(self) -> int:
        """Weight matrices per MLP: 3 when gated (gate, up, down), else 2."""
        return 3 if self.gated_mlp else 2

    # -- parameters ----------------------------------------------------------------------------------------------
    def attention_params_per_layer(self) -> int:
        """Weights of one layer's attention projections (without norm gains).

        GQA: ``W_q[D, N, H]``, ``W_k[D, K, H]``, ``W_v[D, K, H]``, ``W_o[N, H, D]``, i.e. ``2·D·H·(N + K)``.
        MLA: query down/up projections (or a direct one), the joint key/value down-projection that also
        produces the shared rotary key, the key/value up-projection and the output projection.
        """
        D, N, K, H = self.d_model, self.n_heads, self.n_kv_heads, self.d_head
        if not self.is_mla:
            return 2 * D * H * (N + K)
        q_out = N * self.qk_head_dim
        q = D * q_out if self.q_lora_rank is None else D * self.q_lora_rank + self.q_lora_rank * q_out
        kv_down = D * (self.kv_lora_rank + self.qk_rope_head_dim)
        kv_up = self.kv_lora_rank * N * (self.qk_nope_head_dim + self.v_head_dim)
        out = N * self.v_head_dim * D
        return q + kv_down + kv_up + out

    def norm_params_per_layer(self) -> int:
        """RMSNorm gains of one layer: before attention and before the MLP (MLA adds its latent norms)."""
        n = 2 * self.d_model
        if self.is_mla:
            n += self.kv_lora_rank + (self.q_lora_rank or 0)
        return n

    def dense_mlp_params(self) -> int:
        """Weights of one dense MLP: ``3·D·F`` gated, ``2·D·F`` otherwise."""
        return self.mlp_matrices * self.d_model * self.d_ff

    def expert_params(self) -> int:
        """Weights of one expert: ``3·D·F_e`` gated."""
        return self.mlp_matrices * self.d_model * self.expert_ff

    def moe_mlp_params(self, active: bool = False) -> int:
        """Weights of one MoE layer's MLP: router ``D·E`` + routed experts + shared experts.

        With ``active=True`` only the ``experts_per_token`` routed experts one token uses are counted.
        """
        routed = self.experts_per_token if check_bool("active", active) else self.n_experts
        return (
            self.d_model * self.n_experts + routed * self.expert_params() + self.n_shared_experts * self.expert_params()
        )

    def param_breakdown(self, active: bool = False) -> ParamBreakdown:
        """Parameters by role (:class:`ParamBreakdown`). ``active=True`` counts the experts one token uses."""
        check_bool("active", active)
        D, V, L = self.d_model, self.vocab, self.n_layers
        dense_layers = L - self.n_moe_layers
        mlp = dense_layers * self.dense_mlp_params() + self.n_moe_layers * self.moe_mlp_params(active)
        parts = dict(
            embedding=V * D,
            attention=L * self.attention_params_per_layer(),
            mlp=mlp,
            norms=L * self.norm_params_per_layer() + D,
            unembedding=0 if self.tied_embeddings else V * D,
        )
        return ParamBreakdown(**parts, total=sum(parts.values()))

    def param_count(self) -> int:
        """Total parameters (weights), every expert included."""
        return self.param_breakdown().total

    def active_param_count(self) -> int:
        """Parameters one token uses: all but the routed experts it was not sent to (= ``param_count`` if dense)."""
        return self.param_breakdown(active=True).total

    def matmul_params_per_token(self) -> int:
        """Weights one token multiplies by: active attention and MLP weights (routers included) + the
        unembedding (also when tied). Excludes the embedding lookup and the norm gains."""
        b = self.param_breakdown(active=True)
        return b.attention + b.mlp + self.vocab * self.d_model

    # -- FLOPs ---------------------------------------------------------------------------------------------------
    def attention_flops(self, seq_len: int, training: bool = False, causal: bool = True) -> float:
        """Dot-product attention FLOPs **per token**, all layers, for sequences of ``seq_len`` tokens.

        Per layer and token: scores ``2·S·N·H_qk`` plus the weighted sum of values ``2·S·N·H_v``, with ``S`` the
        keys a query sees: ``seq_len`` (full matrix) or ``seq_len / 2`` on average when ``causal``.
        ``training=True`` multiplies by 3 (forward + backward).
        """
        seq_len = check_positive("seq_len", seq_len, integer=True)
        check_bool("training", training)
        s = seq_len / 2 if check_bool("causal", causal) else seq_len
        per_layer = 2.0 * s * self.n_heads * (self.qk_head_dim + self.v_dim)
        return (3.0 if training else 1.0) * self.n_layers * per_layer

    def flops_per_token(
        self, seq_len: int, training: bool = False, causal: bool = True, include_attention: bool = True
    ) -> float:
        """FLOPs per token: ``2 × matmul_params_per_token()`` + attention (forward), ×3 when ``training``.

        Dense training thus costs ``≈ 6 · params`` FLOPs per token; a MoE model uses its *active* parameters.
        """
        seq_len = check_positive("seq_len", seq_len, integer=True)
        check_bool("causal", causal)
        f = 2.0 * self.matmul_params_per_token() * (3.0 if check_bool("training", training) else 1.0)
        if check_bool("include_attention", include_attention):
            f += self.attention_flops(seq_len, training=training, causal=causal)
        return f

    def flops_breakdown(
        self, seq_len: int, training: bool = False, causal: bool = True, per_layer: bool = False
    ) -> FlopsBreakdown:
        """FLOPs per token split into the weight matmuls of attention (projections) and of the MLP, dot-product
        attention, and the unembedding (:class:`FlopsBreakdown`); ``training=True`` triples each part.

        ``total`` equals :meth:`flops_per_token` with the same arguments; ``per_layer=True`` divides the three
        layer parts by ``n_layers`` (and keeps ``total`` their per-layer sum plus the unembedding).
        """
        seq_len = check_positive("seq_len", seq_len, integer=True)
        training = check_bool("training", training)
        causal = check_bool("causal", causal)
        per_layer = check_bool("per_layer", per_layer)
        k = 3.0 if training else 1.0
        b = self.param_breakdown(active=True)
        div = float(self.n_layers) if per_layer else 1.0
        parts = dict(
            projections=k * 2.0 * b.attention / div,
            mlp=k * 2.0 * b.mlp / div,
            attention=self.attention_flops(seq_len, training=training, causal=causal) / div,
            unembedding=k * 2.0 * self.vocab * self.d_model,
        )
        return FlopsBreakdown(**parts, total=sum(parts.values()), per_layer=per_layer)

    def attention_fraction(self, seq_len: int, causal: bool = True) -> float:
        """Share of the forward FLOPs spent in dot-product attention at ``seq_len``."""
        return self.attention_flops(seq_len, causal=causal) / self.flops_per_token(seq_len, causal=causal)

    def attention_intensity(self, q_len: int, kv_len: int, dtype: str = "bf16") -> float:
        """Arithmetic intensity (FLOPs/byte) of one fused (flash-style) attention layer, per sequence.

        FLOPs ``4·T·S·N·H`` (scores + values, full matrix); bytes: read Q and write O (``T·N·H`` each), read K
        and V (``S·K·H`` each). Prefill (``T = S``) gives ``T·G/(G+1)`` with ``G = N/K`` in bf16; decode
        (``T = 1``) tends to ``G``: attention during generation is bandwidth-bound.

        MLA is priced in its *absorbed* form, the one its decode kernels run (DeepSeek-V2, arXiv 2405.04434,
        §2.1.3): the key up-projection is folded into each query and the value up-projection into the output, so
        every head scores against the cached latent (``kv_lora_rank``) and the shared rotary key
        (``qk_rope_head_dim``) and sums latents: FLOPs ``2·T·S·N·(2·r_kv + r_rope)``; bytes: the absorbed queries
        and latent outputs (``T·N·(r_kv + r_rope)`` and ``T·N·r_kv``) and **one** cached latent per token
        (``S·(r_kv + r_rope)``) shared by all ``N`` heads. Decode thus tends to ``N·(2·r_kv + r_rope)/(r_kv +
        r_rope)`` FLOPs per element read (about 242 FLOPs/byte in bf16 for DeepSeek-V3): not bandwidth-bound.
        """
        T = check_positive("q_len", q_len, integer=True)
        S = check_positive("kv_len", kv_len, integer=True)
        b = dtype_bytes(dtype)
        N = self.n_heads
        if self.is_mla:
            score, value, cached = self._mla_absorbed_widths()
            flops = 2.0 * T * S * N * (score + value)
            return flops / (b * (T * N * score + T * N * value + S * cached))
        K = self.n_kv_heads
        flops = 2.0 * T * S * N * (self.qk_head_dim + self.v_dim)
        nbytes = b * (T * N * self.qk_head_dim + T * N * self.v_dim + S * K * (self.qk_head_dim + self.v_dim))
        return flops / nbytes

    def _mla_absorbed_widths(self) -> tuple[int, int, int]:
        """MLA's absorbed attention, per head and cached token: (score width ``r_kv + r_rope``, value width
        ``r_kv``, elements cached per token and layer ``r_kv + r_rope``, shared by every head)."""
        r, rope = self.kv_lora_rank, self.qk_rope_head_dim
        return r + rope, r, r + rope

    def critical_batch(self, chip, compute_dtype: str = "bf16", weight_dtype: str | None = None) -> float:
        """Tokens per step needed for the weight matmuls to be compute-bound on ``chip``.

        Dense: :func:`tpu_notes.roofline.critical_batch_size`. MoE: each expert only sees ``k/E`` of the tokens,
        so the batch must be ``E/k`` times larger.
        """
        from .roofline import critical_batch_size

        return critical_batch_size(chip, compute_dtype, weight_dtype) * self.n_experts / self.experts_per_token

    # -- KV cache ------------------------------------------------------------------------------------------------
    def kv_bytes_per_token(self, dtype: str = "bf16") -> float:
        """Bytes of KV cache per token: ``2·L·K·H·bytes`` (MLA caches one latent of ``kv_lora_rank`` plus the
        shared rotary key per layer: ``L·(r_kv + H_rope)·bytes``)."""
        b = dtype_bytes(dtype)
        if self.is_mla:
            return float(self.n_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * b)
        return float(2 * self.n_layers * self.n_kv_heads * self.d_head * b)

    def kv_cache_bytes(self, batch: int, seq_len: int, dtype: str = "bf16") -> float:
        """Bytes of KV cache for ``batch`` sequences of ``seq_len`` tokens."""
        batch = check_positive("batch", batch, integer=True)
        seq_len = check_positive("seq_len", seq_len, integer=True)
        return batch * seq_len * self.kv_bytes_per_token(dtype)

    # -- activation checkpoints (remat) ---------------------------------------------------------------------------
    def saved_activations(self, policy: str = "full_block") -> dict[str, int]:
        """Activations saved **in HBM** per token in one (dense, GQA) layer for the backward pass, by name
        (elements).

        - ``"none"``: no rematerialisation; everything the backward reads: the block input, both norm outputs,
          Q, K, V (after rotary), the attention output, the residual after attention, and the MLP's gate, up and
          gated product (a flash-style kernel keeps no ``T×T`` probabilities; it recomputes them).
          For MHA with ``F = 4D`` this is 20 ``D``-sized vectors.
        - ``"save_matmul_outputs"``: only the outputs of the weight matmuls (Q, K, V, O, gate, up, down);
          norms, activations and the two attention products are recomputed (MaxText's ``minimal``).
        - ``"save_dot_except_mlp"``: the block input and every weight matmul's output except the MLP's (Q, K, V
          and the attention output projection, ``D + (N + 2K)·H + D``); the MLP is recomputed (MaxText's
          ``save_dot_except_mlp``).
        - ``"save_qkv_proj"``: the block input and the Q, K, V projections, ``D + (N + 2K)·H``; the attention
          products, the output projection and the MLP are recomputed (MaxText's ``save_qkv_proj``).
        - ``"full_block"``: only the layer's input; the whole layer is recomputed in the backward pass.
        - ``"offload_layer_input"``: as ``full_block``, but the layer's input lives in host memory
          (:meth:`offloaded_activations`): nothing stays in HBM.

        A MoE layer's MLP entries use the hidden size of the ``k`` routed + shared experts a token visits.
        """
        policy = check_choice("policy", policy, ALL_REMAT_POLICIES)
        if self.is_mla:
            raise NotImplementedError("saved_activations counts GQA layers; MLA configs are not modelled")
        D, N, K, H = self.d_model, self.n_heads, self.n_kv_heads, self.d_head
        F = self._avg_active_ff()
        if policy == "offload_layer_input":
            return {}
        if policy == "full_block":
            return {"block_input": D}
        qkv = {"q": N * H, "k": K * H, "v": K * H}
        if policy == "save_qkv_proj":
            return {"block_input": D, **qkv}
        if policy == "save_dot_except_mlp":
            return {"block_input": D, **qkv, "attn_proj_out": D}
        if policy == "save_matmul_outputs":
            return {
                **qkv,
                "attn_proj_out": D,
                **({"gate": F} if self.gated_mlp else {}),
                "up": F,
                "down_out": D,
            }
        return {
            "block_input": D,
            "attn_norm_out": D,
            **qkv,
            "attn_out": N * H,
            "residual_mid": D,
            "mlp_norm_out": D,
            **({"gate": F} if self.gated_mlp else {}),
            "up": F,
            "hidden": F,
        }

    def offloaded_activations(self, policy: str = "offload_layer_input") -> dict[str, int]:
        """Activations kept **in host memory** per token in one layer for the backward pass, by name (elements):
        the layer's input (``D``) under ``"offload_layer_input"``, nothing under the other policies. Each is
        written to the host in the forward pass and read back in the backward pass, over the chip's host link."""
        policy = check_choice("policy", policy, ALL_REMAT_POLICIES)
        return {"block_input": self.d_model} if policy in OFFLOAD_REMAT_POLICIES else {}

    def _avg_active_ff(self) -> float:
        dense = self.n_layers - self.n_moe_layers
        moe_ff = (self.experts_per_token + self.n_shared_experts) * self.expert_ff
        avg = (dense * self.d_ff + self.n_moe_layers * moe_ff) / self.n_layers
        return int(avg) if float(avg).is_integer() else avg

    def checkpoints_per_layer(self, policy: str = "full_block") -> float:
        """Saved activations (in HBM) per token and layer in units of ``d_model``-sized vectors."""
        return sum(self.saved_activations(policy).values()) / self.d_model

    def checkpoint_bytes(self, batch_tokens: int, policy: str = "full_block", dtype: str = "bf16") -> float:
        """Bytes of activations kept in HBM for the backward pass: ``bytes · elements-per-token-and-layer · tokens ·
        L`` (0 under ``"offload_layer_input"``, whose checkpoints live in host memory)."""
        batch_tokens = check_positive("batch_tokens", batch_tokens, integer=True)
        per_token = sum(self.saved_activations(policy).values())
        return dtype_bytes(dtype) * per_token * batch_tokens * self.n_layers

    def recompute_flops(self, seq_len: int, policy: str = "full_block", causal: bool = True) -> float:
        """Extra FLOPs per token that rematerialisation under ``policy`` adds to a training step.

        A weight matmul is recomputed when its output is not saved (:meth:`saved_activations`); the two attention
        products (scores and values) whenever the attention output is not saved, i.e. under every policy but
        ``"none"``. So: ``"none"``: 0. ``"save_matmul_outputs"``: the attention products again (one forward
        attention pass). ``"save_dot_except_mlp"``: those and the MLP's matmuls (routers included).
        ``"save_qkv_proj"``: those and the attention output projection. ``"full_block"`` and
        ``"offload_layer_input"``: the whole forward pass of the layers (everything but the unembedding), so
        training costs about ``8·params`` instead of ``6·params`` FLOPs per token. (XLA may drop the last matmul
        of a recomputed layer, the MLP's down projection, when only the next layer's saved input reads it; this
        count, like Chapter 4's ``8·params``, includes it.)
        """
        policy = check_choice("policy", policy, ALL_REMAT_POLICIES)
        seq_len = check_positive("seq_len", seq_len, integer=True)
        check_bool("causal", causal)
        if policy == "none":
            return 0.0
        attn = self.attention_flops(seq_len, causal=causal)
        if policy == "save_matmul_outputs":
            return attn
        full = self.flops_per_token(seq_len, causal=causal) - 2.0 * self.vocab * self.d_model
        return full - 2.0 * self.n_layers * self._saved_projection_params(policy)

    def _saved_projection_params(self, policy: str) -> float:
        """Weights per layer of the projections whose outputs ``policy`` saves besides the block input (their
        forward is not recomputed): q, k, v (``D·(N + 2K)·H``) under save_qkv_proj, and the output projection
        (``N·H·D``) too under save_dot_except_mlp; 0 for full_block and offload_layer_input."""
        if policy not in ("save_qkv_proj", "save_dot_except_mlp"):
            return 0.0
        if self.is_mla:
            raise NotImplementedError(f"remat policy {policy!r} is modelled for GQA layers; MLA is not")
        D, N, K, H = self.d_model, self.n_heads, self.n_kv_heads, self.d_head
        qkv = D * (N + 2 * K) * H
        return float(qkv + (N * H * D if policy == "save_dot_except_mlp" else 0))

    def recomputed_matmul_params(self, policy: str = "full_block") -> float:
        """Weights per token (all layers) of the weight matmuls whose forward ``policy`` recomputes in the backward
        pass: 0 for ``"none"`` and ``"save_matmul_outputs"``, every layer weight for ``"full_block"`` and
        ``"offload_layer_input"``, all but the saved projections otherwise (:meth:`recompute_flops` is twice this
        plus the attention products)."""
        policy = check_choice("policy", policy, ALL_REMAT_POLICIES)
        if policy in ("none", "save_matmul_outputs"):
            return 0.0
        layer = self.matmul_params_per_token() - self.vocab * self.d_model
        return float(layer - self.n_layers * self._saved_projection_params(policy))

    def layer_shapes(self, moe: bool | None = None) -> dict[str, tuple]:
        """Weight shapes of one GQA decoder layer, named as in :mod:`tpu_notes.model` (``"mlp/w_up"``...).

        ``moe`` picks a MoE layer (default: the model's last layer kind). Shared experts appear fused into one MLP
        of width ``n_shared_experts · F_e`` under ``"mlp/shared/..."``.
        """
        if self.is_mla:
            raise NotImplementedError(
                "layer_shapes lists GQA layers; MLA projections are counted in attention_params_per_layer"
            )
        D, N, K, H = self.d_model, self.n_heads, self.n_kv_heads, self.d_head
        moe = self.is_moe if moe is None else check_bool("moe", moe)
        shapes = {
            "attn_norm": (D,),
            "wq": (D, N, H),
            "wk": (D, K, H),
            "wv": (D, K, H),
            "wo": (N, H, D),
            "mlp_norm": (D,),
        }

        def mlp(prefix, lead, F):
            out = {f"{prefix}/w_gate": lead + (D, F)} if self.gated_mlp else {}
            out.update({f"{prefix}/w_up": lead + (D, F), f"{prefix}/w_down": lead + (F, D)})
            return out

        if moe and self.is_moe:
            shapes["mlp/router"] = (D, self.n_experts)
            shapes.update(mlp("mlp", (self.n_experts,), self.expert_ff))
            if self.n_shared_experts:
                shapes.update(mlp("mlp/shared", (), self.n_shared_experts * self.expert_ff))
        else:
            shapes.update(mlp("mlp", (), self.d_ff))
        return shapes

    def with_(self, **changes) -> TransformerConfig:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)


#: Largest capacity factor :func:`moe_capacity` takes (slots per expert over the even share): beyond it every
#: expert keeps a slot for every token many times over.
MAX_CAPACITY_FACTOR = 1e3


@checked
def moe_capacity(
    n_tokens: Annotated[int, Positive(integer=True, maximum=2**40)],
    n_experts: Annotated[int, Positive(integer=True, maximum=2**16)],
    capacity_factor: Annotated[float, Positive(maximum=MAX_CAPACITY_FACTOR)] = 1.0,
    experts_per_token: PositiveInt = 1,
) -> int:
    """Slots each expert keeps for ``n_tokens`` tokens routed to ``experts_per_token`` of ``n_experts`` experts:
    ``⌈capacity_factor · n_tokens · k / E⌉``, at least 1 (Chapter 4; the JAX MoE layers of :mod:`tpu_notes.model`
    and :mod:`tpu_notes.jaxprog` both size their dispatch with it). Tokens past an expert's capacity are dropped."""
    if experts_per_token > n_experts:
        raise ValueError(f"experts_per_token ({experts_per_token}) must be at most n_experts ({n_experts})")
    return max(1, math.ceil(capacity_factor * n_tokens * experts_per_token / n_experts))


# ----------------------------------------------------------------------------------------------------------------
# Presets
# ----------------------------------------------------------------------------------------------------------------


def _llama3(name, L, D, F, N) -> TransformerConfig:
    # Llama 3 / 3.1 model cards and params.json: 8 KV heads, head dim 128, vocabulary 128,256, untied.
    return TransformerConfig(
        d_model=D, d_ff=F, n_layers=L, n_heads=N, n_kv_heads=8, d_head=128, vocab=128_256, name=name
    )


_PRESETS: dict[str, TransformerConfig] = {
    "llama2-13b": TransformerConfig(
        d_model=5120, d_ff=13824, n_layers=40, n_heads=40, n_kv_heads=40, d_head=128, vocab=32_000, name="llama2-13b"
    ),  # Llama 2 paper / HF config.json
    # Llama 2 7B (Llama 2 paper, Table 1 / HF config.json): multi-head attention (32 KV heads), vocabulary 32,000.
    "llama2-7b": TransformerConfig(
        d_model=4096, d_ff=11008, n_layers=32, n_heads=32, n_kv_heads=32, d_head=128, vocab=32_000, name="llama2-7b"
    ),
    # Llama 2 70B (Llama 2 paper, Table 1 / HF config.json): GQA with 8 KV heads, vocabulary 32,000.
    "llama2-70b": TransformerConfig(
        d_model=8192, d_ff=28672, n_layers=80, n_heads=64, n_kv_heads=8, d_head=128, vocab=32_000, name="llama2-70b"
    ),
    "llama3-8b": _llama3("llama3-8b", 32, 4096, 14336, 32),
    "llama3-70b": _llama3("llama3-70b", 80, 8192, 28672, 64),
    "llama3-405b": _llama3("llama3-405b", 126, 16384, 53248, 128),
    # Llama 3.2 1B and 3B (Meta's model card and the released config.json): the small Llama 3 shapes used as draft
    # models; 8 KV heads, vocabulary 128,256, input and output embeddings tied; head width 64 (1B) and 128 (3B).
    "llama3.2-1b": TransformerConfig(
        d_model=2048,
        d_ff=8192,
        n_layers=16,
        n_heads=32,
        n_kv_heads=8,
        d_head=64,
        vocab=128_256,
        tied_embeddings=True,
        name="llama3.2-1b",
    ),  # fmt: skip
    "llama3.2-3b": TransformerConfig(
        d_model=3072,
        d_ff=8192,
        n_layers=28,
        n_heads=24,
        n_kv_heads=8,
        d_head=128,
        vocab=128_256,
        tied_embeddings=True,
        name="llama3.2-3b",
    ),  # fmt: skip
    # DeepSeek-V3 technical report (arXiv 2412.19437) and its config.json; the multi-token-prediction module
    # (about 14B more) is not part of this count, as in the published 671B.
    "deepseek-v3": TransformerConfig(
        d_model=7168,
        d_ff=18432,
        n_layers=61,
        n_heads=128,
        n_kv_heads=128,
        d_head=128,
        vocab=129_280,
        n_experts=256,
        experts_per_token=8,
        n_shared_experts=1,
        d_ff_expert=2048,
        n_dense_layers=3,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        name="deepseek-v3",
    ),
    # Mixtral 8x7B (Jiang et al., "Mixtral of Experts", arXiv 2401.04088; shapes from the released config.json):
    # Mistral 7B's attention, 8 gated experts of 14336 per layer, 2 per token.
    "mixtral-8x7b": TransformerConfig(
        d_model=4096,
        d_ff=14336,
        n_layers=32,
        n_heads=32,
        n_kv_heads=8,
        d_head=128,
        vocab=32_000,
        n_experts=8,
        experts_per_token=2,
        d_ff_expert=14336,
        name="mixtral-8x7b",
    ),
    # Small configurations the notebooks compile and train on a CPU.
    "tiny-mha": TransformerConfig(
        d_model=64, d_ff=256, n_layers=2, n_heads=4, n_kv_heads=4, d_head=16, vocab=512, name="tiny-mha"
    ),
    "tiny-gqa": TransformerConfig(
        d_model=128, d_ff=384, n_layers=2, n_heads=8, n_kv_heads=2, d_head=16, vocab=1024, name="tiny-gqa"
    ),
    "tiny-tied": TransformerConfig(
        d_model=64,
        d_ff=256,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_head=16,
        vocab=1024,
        tied_embeddings=True,
        name="tiny-tied",
    ),
    "tiny-moe": TransformerConfig(
        d_model=64,
        d_ff=256,
        n_layers=3,
        n_heads=4,
        n_kv_heads=2,
        d_head=16,
        vocab=512,
        n_experts=4,
        experts_per_token=2,
        n_shared_experts=1,
        d_ff_expert=128,
        n_dense_layers=1,
        name="tiny-moe",
    ),
    "tiny-mlp2": TransformerConfig(
        d_model=128,
        d_ff=512,
        n_layers=2,
        n_heads=4,
        n_kv_heads=4,
        d_head=32,
        vocab=512,
        gated_mlp=False,
        name="tiny-mlp2",
    ),
    "small": TransformerConfig(
        d_model=256, d_ff=1024, n_layers=4, n_heads=8, n_kv_heads=4, d_head=32, vocab=4096, name="small"
    ),
}

#: Published parameter totals, to compare with ``param_count()``: Llama totals computed from the released
#: configs (facts/models.md); DeepSeek-V3's rounded "671B total, 37B activated" (arXiv 2412.19437, abstract),
#: which leave out its 14B multi-token-prediction module.
PUBLISHED_PARAMS = {
    "llama2-13b": 13_015_864_320,
    "llama3-8b": 8_030_261_248,
    "llama3-70b": 70_553_706_496,
    "llama3-405b": 405_853_388_800,
    "llama3.2-1b": 1_235_814_400,  # the released checkpoint's tensors, tied embedding counted once ("1.23B")
    "llama3.2-3b": 3_212_749_824,  # the same ("3.21B")
    "deepseek-v3": 671e9,
    "mixtral-8x7b": 46_702_792_704,  # the released checkpoint's total ("46.7B", arXiv 2401.04088)
}
#: Component by component (Chapter 4, tests/test_transformer.py), DeepSeek-V3's ``active_param_count()`` is 37.55B with
#: both embedding tables and 36.63B without the input embedding: the published "37B" (two digits, convention not
#: stated) matches the second reading, not the first, which is 1.5% above it. We keep the honest count.
PUBLISHED_ACTIVE_PARAMS = {"deepseek-v3": 37e9}

#: Names accepted by :func:`get_model`.
PRESETS = tuple(_PRESETS)


def get_model(name: str, argument: str = "model") -> TransformerConfig:
    """A preset :class:`TransformerConfig` by name (case-insensitive), e.g. ``get_model("llama3-70b")``.

    A ``TransformerConfig`` passes through. ``argument`` is the name error messages give the input."""
    if isinstance(name, TransformerConfig):
        return name
    if not isinstance(name, str):
        raise TypeError(
            f"{argument} must be a TransformerConfig or a model name string, one of {list(PRESETS)}; "
            f"got {type(name).__name__}"
        )
    key = name.strip().lower()
    if key not in _PRESETS:
        raise ValueError(f"unknown {argument} {name!r}; known models: {', '.join(PRESETS)}")
    return _PRESETS[key]


def as_config(model, argument: str = "model") -> TransformerConfig:
    """Accept a :class:`TransformerConfig` or a preset name (errors call it ``argument``)."""
    return get_model(model, argument)


@dataclass(frozen=True)
class _ModelKind(Kind):
    """The kind of a ``model`` argument: a :class:`TransformerConfig` or a preset name (:func:`get_model`); the
    config is passed on."""

    def check(self, name: str, value):
        return get_model(value, name)

    def hostile(self) -> list:
        return ["no-such-model", "", None, 3, ["llama3-8b"]]

    def example(self):
        return "tiny-mha"

    def describe(self) -> str:
        return f"a TransformerConfig or one of {list(PRESETS)}"


#: Annotation of a model argument for :func:`tpu_notes.units.checked`: a config or a preset name, passed on as the
#: :class:`TransformerConfig`.
Model = Annotated[TransformerConfig, _ModelKind()]
