"""Counting a Transformer (tpu_notes.transformer) against published configs and hand derivations."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_notes import roofline
from tpu_notes.transformer import PRESETS, REMAT_POLICIES, TransformerConfig, einsum_flops, get_model

# Published totals (facts/models.md, computed from the released configs) and KV bytes per token in bf16.
PUBLISHED = {
    "llama3-8b": (8_030_261_248, 131_072),
    "llama3-70b": (70_553_706_496, 327_680),
    "llama3-405b": (405_853_388_800, 516_096),
    "llama2-13b": (13_015_864_320, 819_200),
}


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_llama_param_counts_are_exact(name):
    total, kv = PUBLISHED[name]
    m = get_model(name)
    assert m.param_count() == total
    assert m.active_param_count() == total  # dense: every parameter is active
    assert m.kv_bytes_per_token("bf16") == kv


def test_llama3_8b_by_hand():
    # The formula sheet's total: L(3DF + 2D(N+K)H + 2D) + D + 2DV, typed out from the published shapes.
    L, D, F, N, K, H, V = 32, 4096, 14336, 32, 8, 128, 128256
    b = get_model("llama3-8b").param_breakdown()
    assert b.mlp == L * 3 * D * F
    assert b.attention == L * 2 * D * (N + K) * H
    assert b.norms == 2 * L * D + D
    assert b.embedding == b.unembedding == V * D
    assert b.total == L * (3 * D * F + 2 * D * (N + K) * H + 2 * D) + D + 2 * D * V


def _deepseek_v3_by_hand():
    """DeepSeek-V3's weights, projection by projection, from the shapes in facts/models.md (arXiv 2412.19437 and
    its config.json), independently of TransformerConfig. Returns (total, active)."""
    D, L, dense_L, V = 7168, 61, 3, 129_280
    F_dense, F_e, E, k, shared = 18432, 2048, 256, 8, 1
    N, r_q, r_kv, rope, nope, v = 128, 1536, 512, 64, 128, 128
    attn = (
        D * r_q  # W_q down-projection
        + r_q * N * (nope + rope)  # W_q up-projection
        + D * (r_kv + rope)  # joint KV down-projection + the shared rotary key
        + r_kv * N * (nope + v)  # KV up-projection (keys' non-rotary part and values)
        + N * v * D
    )  # output projection
    norms = 2 * D + r_q + r_kv  # two layer norms + the query and KV latent norms
    expert = 3 * D * F_e
    moe_total = D * E + (E + shared) * expert  # router + routed + shared experts
    moe_active = D * E + (k + shared) * expert
    common = L * (attn + norms) + dense_L * 3 * D * F_dense + D + 2 * V * D  # + final norm, untied embeddings
    moe_L = L - dense_L
    return common + moe_L * moe_total, common + moe_L * moe_active


def test_deepseek_v3_totals():
    m = get_model("deepseek-v3")
    total, active = _deepseek_v3_by_hand()
    assert m.param_count() == total
    assert m.active_param_count() == active
    # Published (paper abstract): "671B total, 37B activated", without the 14B multi-token-prediction module.
    assert m.param_count() == pytest.approx(671e9, rel=1e-3)
    # The honest active count, every weight a token touches incl. both embedding tables, is 37.55B: 1.5% ABOVE
    # the published 37B (which it would round to 38B). Without the input embedding (a lookup, no FLOPs) it is
    # 36.63B, 1.0% below. The published figure is rounded to two digits and its convention is not stated; we keep
    # the honest count and pin both readings tightly rather than loosening the tolerance.
    assert m.active_param_count() == pytest.approx(37.552e9, rel=1e-4)
    assert m.active_param_count() / 37e9 - 1 == pytest.approx(0.0149, abs=5e-4)
    assert m.active_param_count() - m.vocab * m.d_model == pytest.approx(36.626e9, rel=1e-4)
    assert round((m.active_param_count() - m.vocab * m.d_model) / 1e9) == 37
    # Latent KV cache: 61 layers x (512 latent + 64 rotary key) x 2 bytes (paper, §2.1.1).
    assert m.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2
    # One MoE layer by hand: router + 257 experts of 3 x 7168 x 2048.
    assert m.moe_mlp_params() == 7168 * 256 + 257 * 3 * 7168 * 2048


def test_presets_lookup_and_errors():
    assert get_model("LLaMA3-8B") is get_model("llama3-8b")
    for name in PRESETS:
        assert get_model(name).param_count() > 0
    with pytest.raises(ValueError, match="known models"):
        get_model("gpt-5")
    with pytest.raises(TypeError):
        get_model(3)


# ---------------------------------------------------------------------------------------------------------------
# einsum FLOPs
# ---------------------------------------------------------------------------------------------------------------


def test_einsum_flops_matches_matmul_and_hand_counts():
    assert einsum_flops("bd,df->bf", b=3, d=5, f=7) == roofline.matmul_flops(3, 5, 7)
    # attention scores: batch b, heads n, queries t, keys s, head dim h -> 2·B·N·T·S·H
    assert einsum_flops("btnh,bsnh->bnts", b=2, t=3, s=4, n=5, h=6) == 2 * 2 * 3 * 4 * 5 * 6
    # an outer product has no contracting dim: one multiply per output element, doubled by convention
    assert einsum_flops("i,j->ij", i=4, j=6) == 2 * 24


@pytest.mark.parametrize(
    "spec,dims",
    [
        ("bd,df->bf", dict(b=8, d=16, f=32)),
        ("btd,dnh->btnh", dict(b=2, t=8, d=16, n=4, h=8)),
        ("bkgts,bskh->btkgh", dict(b=2, k=2, g=3, t=8, s=8, h=4)),
    ],
)
def test_einsum_flops_against_xla(spec, dims):
    import jax
    import jax.numpy as jnp

    ins, _ = spec.split("->")
    arrays = [jnp.ones(tuple(dims[c] for c in op), jnp.float32) for op in ins.split(",")]
    cost = jax.jit(lambda *a: jnp.einsum(spec, *a)).lower(*arrays).compile().cost_analysis()
    assert cost["flops"] == pytest.approx(einsum_flops(spec, **dims), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=3, max_size=3), st.permutations("abc"))
def test_einsum_flops_ignores_names_and_operand_order(sizes, letters):
    x, y, z = letters
    dims = dict(zip(letters, sizes))
    f1 = einsum_flops(f"{x}{y},{y}{z}->{x}{z}", **dims)
    f2 = einsum_flops(f"{y}{z},{x}{y}->{z}{x}", **dims)
    assert f1 == f2 == 2 * math.prod(sizes)


@pytest.mark.parametrize(
    "spec,dims,exc",
    [
        ("bd,df", dict(b=1, d=1, f=1), ValueError),
        ("bd,df->bq", dict(b=1, d=1, f=1, q=1), ValueError),
        ("bd,df->bf", dict(b=1, d=1), ValueError),
        ("bd,df->bf", dict(b=1, d=1, f=1, z=2), ValueError),
        ("bd,df->bf", dict(b=0, d=1, f=1), ValueError),
        ("b1,df->bf", dict(b=1, d=1, f=1), ValueError),
    ],
)
def test_einsum_flops_rejects_bad_input(spec, dims, exc):
    with pytest.raises(exc):
        einsum_flops(spec, **dims)


# ---------------------------------------------------------------------------------------------------------------
# FLOPs, attention, KV cache
# ---------------------------------------------------------------------------------------------------------------

MHA = TransformerConfig(d_model=1024, d_ff=4096, n_layers=4, n_heads=16, n_kv_heads=16, d_head=64, vocab=1000)


def test_attention_crossovers_of_the_book():
    D = MHA.d_model
    qkvo = 2 * 4 * D * D  # forward FLOPs per token per layer of the four projections
    mlp = 2 * 3 * D * 4 * D
    # self-attention (full matrix) equals the projections at T = 2D
    assert MHA.attention_flops(2 * D, causal=False) / MHA.n_layers == pytest.approx(qkvo)
    # attention / (projections + MLP) = T / (8D)
    for T in (512, 8 * D, 32 * D):
        assert MHA.attention_flops(T, causal=False) / MHA.n_layers / (qkvo + mlp) == pytest.approx(T / (8 * D))
    # causal masking halves the useful attention FLOPs
    assert MHA.attention_flops(4096) == pytest.approx(MHA.attention_flops(4096, causal=False) / 2)


def test_flops_per_token_dense_is_two_and_six_times_matmul_params():
    m = get_model("llama3-8b")
    P_mm = m.param_count() - m.vocab * m.d_model - m.param_breakdown().norms  # weights used in matmuls
    assert m.flops_per_token(8192, include_attention=False) == 2 * P_mm
    assert m.flops_per_token(8192, training=True, include_attention=False) == 6 * P_mm
    # attention per token per layer, causal: 2 products x 2 FLOPs x (T/2 keys) x N x H
    att = m.n_layers * 4 * (8192 / 2) * m.n_heads * m.d_head
    assert m.flops_per_token(8192) == pytest.approx(2 * P_mm + att)


def test_tied_embeddings_still_pay_for_the_unembedding_matmul():
    tied, untied = get_model("tiny-tied"), get_model("tiny-tied").with_(tied_embeddings=False)
    assert untied.param_count() - tied.param_count() == tied.vocab * tied.d_model
    assert tied.flops_per_token(64) == untied.flops_per_token(64)


def test_moe_active_params_and_flops():
    m = get_model("tiny-moe")
    D, Fe, E, k = m.d_model, m.expert_ff, m.n_experts, m.experts_per_token
    inactive = m.n_moe_layers * (E - k) * 3 * D * Fe
    assert m.param_count() - m.active_param_count() == inactive
    dense_equiv = m.with_(n_experts=k, experts_per_token=k)
    # same FLOPs as a model that only has the k used experts (router of size E vs k aside)
    router_diff = 2 * m.n_moe_layers * D * (E - k)
    assert m.flops_per_token(32) - dense_equiv.flops_per_token(32) == pytest.approx(router_diff)


def test_moe_critical_batch_scales_with_sparsity():
    m = get_model("deepseek-v3")
    dense = roofline.critical_batch_size("v5e")
    assert m.critical_batch("v5e") == pytest.approx(dense * 256 / 8)
    assert get_model("llama3-8b").critical_batch("v5e") == pytest.approx(dense)


def test_kv_cache_and_gqa_saving():
    m = get_model("llama3-70b")
    assert m.kv_cache_bytes(4, 8192) == 4 * 8192 * 2 * 80 * 8 * 128 * 2
    mha = m.with_(n_kv_heads=m.n_heads)
    assert mha.kv_bytes_per_token() / m.kv_bytes_per_token() == m.n_heads / m.n_kv_heads
    assert m.kv_bytes_per_token("int8") == m.kv_bytes_per_token("bf16") / 2
    with pytest.raises(ValueError):
        m.kv_bytes_per_token("fp64")
    with pytest.raises(ValueError):
        m.kv_cache_bytes(0, 10)


def test_attention_intensity_limits():
    m = get_model("llama3-70b")
    G = m.n_heads // m.n_kv_heads
    T = 4096
    assert m.attention_intensity(T, T) == pytest.approx(T * G / (G + 1))  # prefill
    assert MHA.attention_intensity(T, T) == pytest.approx(T / 2)  # MHA prefill
    S = 10**7
    assert m.attention_intensity(1, S) == pytest.approx(S * G / (S + G))  # decode -> G
    assert m.attention_intensity(1, S) < G


# ---------------------------------------------------------------------------------------------------------------
# Checkpointing
# ---------------------------------------------------------------------------------------------------------------


def test_checkpoint_counts_per_layer():
    assert MHA.checkpoints_per_layer("none") == 20  # the book's "about 20" for MHA with F = 4D
    assert MHA.checkpoints_per_layer("full_block") == 1
    # Q, K, V, O (1 each) + gate, up (4 each) + down (1)
    assert MHA.checkpoints_per_layer("save_matmul_outputs") == 4 + 8 + 1
    bt = 4096
    assert MHA.checkpoint_bytes(bt, "full_block", "bf16") == 2 * bt * MHA.d_model * MHA.n_layers


def test_recompute_flops():
    T = 2048
    m = MHA
    # saving only matmul outputs: redo the two attention products, 4·T·N·H per token and layer (full matrix)
    assert m.recompute_flops(T, "save_matmul_outputs", causal=False) == m.n_layers * 4 * T * m.n_heads * m.d_head
    assert m.recompute_flops(T, "none") == 0
    # full remat: one more forward of the layers -> about 8 x params per token instead of 6
    big = get_model("llama3-8b")
    train = big.flops_per_token(T, training=True, include_attention=False)
    extra = big.recompute_flops(T, "full_block") - big.attention_flops(T)
    layers = big.param_count() - 2 * big.vocab * big.d_model - big.param_breakdown().norms
    # the layers cost 8x their weights, the unembedding (never rematerialised) still 6x
    assert train + extra == pytest.approx(8 * layers + 6 * big.vocab * big.d_model)
    with pytest.raises(ValueError, match="policy"):
        m.recompute_flops(T, "selective")
    assert set(REMAT_POLICIES) == {"none", "save_matmul_outputs", "full_block"}


# ---------------------------------------------------------------------------------------------------------------
# Validation and invariants
# ---------------------------------------------------------------------------------------------------------------

BASE = dict(d_model=64, d_ff=256, n_layers=2, n_heads=4, n_kv_heads=2, d_head=16, vocab=100)


@pytest.mark.parametrize(
    "changes,exc,match",
    [
        (dict(n_kv_heads=3), ValueError, "n_kv_heads"),
        (dict(d_model=0), ValueError, "d_model"),
        (dict(n_layers=-1), ValueError, "n_layers"),
        (dict(vocab=10.5), ValueError, "vocab"),
        (dict(d_head="16"), TypeError, "d_head"),
        (dict(n_experts=4, experts_per_token=5), ValueError, "experts_per_token"),
        (dict(n_experts=4, experts_per_token=2, n_dense_layers=3), ValueError, "n_dense_layers"),
        (dict(n_shared_experts=1), ValueError, "n_experts"),
        (dict(kv_lora_rank=32), ValueError, "MLA"),
        (dict(q_lora_rank=32), ValueError, "q_lora_rank"),
        (dict(gated_mlp=1), TypeError, "gated_mlp"),
    ],
)
def test_config_validation(changes, exc, match):
    with pytest.raises(exc, match=match):
        TransformerConfig(**{**BASE, **changes})


def test_config_is_frozen():
    c = TransformerConfig(**BASE)
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.d_model = 3


@settings(max_examples=60, deadline=None)
@given(
    D=st.integers(8, 512),
    F=st.integers(8, 2048),
    L=st.integers(1, 8),
    K=st.integers(1, 4),
    G=st.integers(1, 4),
    H=st.integers(2, 64),
    V=st.integers(2, 5000),
    E=st.integers(1, 8),
    tied=st.booleans(),
    gated=st.booleans(),
    T=st.integers(1, 4096),
)
def test_invariants(D, F, L, K, G, H, V, E, tied, gated, T):
    moe = dict(n_experts=E, experts_per_token=max(1, E // 2)) if E > 1 else {}
    c = TransformerConfig(
        d_model=D,
        d_ff=F,
        n_layers=L,
        n_heads=K * G,
        n_kv_heads=K,
        d_head=H,
        vocab=V,
        tied_embeddings=tied,
        gated_mlp=gated,
        **moe,
    )
    b = c.param_breakdown()
    assert b.total == b.embedding + b.attention + b.mlp + b.norms + b.unembedding == c.param_count()
    assert c.active_param_count() <= c.param_count()
    assert c.flops_per_token(T, training=True) == pytest.approx(3 * c.flops_per_token(T))
    assert c.flops_per_token(T, causal=True) <= c.flops_per_token(T, causal=False)
    assert 0 < c.attention_fraction(T) < 1
    # more layers never fewer parameters; a 2-matrix MLP has 2/3 of a gated one's MLP weights
    assert c.with_(n_layers=L + 1).param_count() > c.param_count()
    if not c.is_moe:
        assert c.with_(gated_mlp=False).param_breakdown().mlp * 3 == c.with_(gated_mlp=True).param_breakdown().mlp * 2
    for policy in REMAT_POLICIES:
        assert c.checkpoint_bytes(T, policy) == pytest.approx(2 * T * L * D * c.checkpoints_per_layer(policy))
    assert (
        c.checkpoints_per_layer("full_block")
        <= c.checkpoints_per_layer("save_matmul_outputs")
        <= c.checkpoints_per_layer("none")
    )


def test_chapter4_figures_draw_the_library_numbers():
    import matplotlib.pyplot as plt

    from tpu_notes import plots

    fig = plots.attention_share_chart(("llama3-8b", "llama3-70b"), seq_lens=[256, 4096, 65536])
    ys = fig.axes[0].lines[0].get_ydata()
    assert list(ys) == pytest.approx(
        [get_model("llama3-8b").attention_fraction(T, causal=False) for T in (256, 4096, 65536)]
    )
    fig2 = plots.param_breakdown_chart(("llama3-8b", "deepseek-v3"))
    widths = [p.get_width() for p in fig2.axes[0].patches]
    assert sum(widths) == pytest.approx(2.0)  # each model's bar adds up to 1
    fig3 = plots.kv_cache_chart(("llama3-70b",), seq_lens=[1024, 2048], hbm_bytes=1e11)
    assert list(fig3.axes[0].lines[0].get_ydata()) == [
        get_model("llama3-70b").kv_cache_bytes(1, T) for T in (1024, 2048)
    ]
    for f in (fig, fig2, fig3):
        plt.close(f)


@pytest.mark.parametrize(
    "call,exc,match",
    [
        (lambda m: m.attention_flops(0), ValueError, "seq_len"),
        (lambda m: m.flops_per_token(-5), ValueError, "seq_len"),
        (lambda m: m.flops_per_token(2.5), ValueError, "seq_len"),
        (lambda m: m.attention_intensity(0, 128), ValueError, "q_len"),
        (lambda m: m.attention_intensity(1, 0), ValueError, "kv_len"),
        (lambda m: m.kv_cache_bytes(1, 0), ValueError, "seq_len"),
        (lambda m: m.checkpoint_bytes(1024, "everything"), ValueError, "policy"),
        (lambda m: m.checkpoint_bytes(0, "none"), ValueError, "batch_tokens"),
        (lambda m: m.checkpoint_bytes(1024, "none", dtype="fp128"), ValueError, "dtype"),
        (lambda m: m.saved_activations("dots"), ValueError, "policy"),
        (lambda m: m.with_(n_kv_heads=5), ValueError, "n_kv_heads"),
    ],
)
def test_methods_reject_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call(get_model("llama3-8b"))


def test_mla_only_counts_what_it_models():
    ds = get_model("deepseek-v3")
    with pytest.raises(NotImplementedError, match="MLA"):
        ds.saved_activations("none")
    with pytest.raises(NotImplementedError, match="MLA"):
        ds.layer_shapes()


def test_remat_chart_draws_the_library_numbers():
    import matplotlib.pyplot as plt

    from tpu_notes import plots

    fig = plots.remat_tradeoff_chart(("llama3-8b",), seq_len=4096)
    m = get_model("llama3-8b")
    left, right = fig.axes
    kept = [p.get_height() for p in left.patches]
    extra = [p.get_height() for p in right.patches]
    # bytes per token: 2 bytes x D-vectors x d_model x layers, hand-counted for Llama 3 8B (GQA, F = 3.5 D):
    # none 17, save_matmul_outputs 10.5, full_block 1 D-vectors per token and layer
    assert kept == pytest.approx([2 * c * 4096 * 32 for c in (17, 10.5, 1)])
    assert extra[0] == 0 and extra[1] < extra[2] < 0.34  # full remat: under a third more FLOPs
    assert extra[1] == pytest.approx(m.attention_flops(4096) / m.flops_per_token(4096, training=True))
    with pytest.raises(ValueError, match="models"):
        plots.remat_tradeoff_chart(())
    plt.close(fig)


@pytest.mark.parametrize("name", ["llama3-70b", "deepseek-v3", "tiny-moe"])
@pytest.mark.parametrize("training", [False, True])
def test_flops_breakdown_adds_up(name, training):
    c = get_model(name)
    b = c.flops_breakdown(4096, training=training)
    assert b.total == pytest.approx(c.flops_per_token(4096, training=training))
    assert b.unembedding == (3 if training else 1) * 2 * c.vocab * c.d_model
    assert b.attention == pytest.approx(c.attention_flops(4096, training=training))
    one = c.flops_breakdown(4096, training=training, per_layer=True)
    assert one.projections * c.n_layers == pytest.approx(b.projections)
    assert one.mlp * c.n_layers == pytest.approx(b.mlp) and one.unembedding == b.unembedding


def test_llama2_presets_match_the_released_configs():
    # Totals of the released Llama 2 7B / 70B checkpoints (HF config.json shapes).
    assert get_model("llama2-7b").param_count() == 6_738_415_616
    assert get_model("llama2-70b").param_count() == 68_976_648_192


def test_moe_capacity_is_one_function():
    from tpu_notes import transformer

    assert transformer.moe_capacity(512, 16, 1.0) == 32
    assert transformer.moe_capacity(100, 16, 1.25) == 8
    assert transformer.moe_capacity(12, 4, 1.0, experts_per_token=2) == 6
    with pytest.raises(ValueError, match="experts_per_token"):
        transformer.moe_capacity(8, 4, experts_per_token=5)
    with pytest.raises(ValueError, match="capacity_factor"):
        transformer.moe_capacity(8, 4, 1e4)
