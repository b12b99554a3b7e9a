"""Multi-head latent attention (MLA) against the published DeepSeek-V2/V3 configurations, worked by hand.

Sources: DeepSeek-V2 (arXiv 2405.04434) §2.1 and Table 1: MLA caches one compressed latent of d_c = 4·d_h and one
decoupled rotary key of d_h^R = d_h/2 per token and layer, (d_c + d_h^R)·l = 4.5·d_h·l elements, with d_h = 128;
DeepSeek-V3 (arXiv 2412.19437) keeps those widths; huggingface.co/deepseek-ai/DeepSeek-V3 config.json:
kv_lora_rank 512, qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128, num_attention_heads 128,
num_hidden_layers 61.
"""

from __future__ import annotations

import pytest

from tpu_notes import inference
from tpu_notes.inference import long_context
from tpu_notes.transformer import TransformerConfig, get_model

# DeepSeek-V3 config.json
L3, N3, R_KV, ROPE, NOPE, VH, D3 = 61, 128, 512, 64, 128, 128, 7168
D_H = 128  # the per-head width the V2 paper's Table 1 counts in


def test_v3_config_is_the_published_one():
    m = get_model("deepseek-v3")
    assert (m.n_layers, m.n_heads, m.d_model) == (L3, N3, D3)
    assert (m.kv_lora_rank, m.qk_rope_head_dim, m.qk_nope_head_dim, m.v_head_dim) == (R_KV, ROPE, NOPE, VH)


def test_kv_bytes_per_token_by_hand():
    m = get_model("deepseek-v3")
    elements = L3 * (R_KV + ROPE)  # 61 × 576 = 35,136 per token
    assert elements == L3 * 4.5 * D_H  # the V2 paper's (d_c + d_h^R)·l = 4.5·d_h·l
    assert m.kv_bytes_per_token("bf16") == elements * 2 == 70_272
    assert m.kv_bytes_per_token("fp8") == 35_136
    # the same 128 heads with plain multi-head attention would cache 2·n_h·d_h·l elements: 56.9 times more
    mha = 2 * N3 * D_H * L3
    assert mha / elements == pytest.approx(56.9, abs=0.05)
    assert m.kv_cache_bytes(4, 32_768) == 4 * 32_768 * 70_272


def test_deepseek_v2_shapes_by_hand():
    """DeepSeek-V2's config.json (60 layers, 5120 wide, 160 routed experts of 1536, 6 per token, 2 shared, the first
    layer dense with 12,288, vocabulary 102,400): 236B parameters, 21B active (arXiv 2405.04434, abstract), and
    60 × 576 cached elements per token."""
    v2 = TransformerConfig(
        d_model=5120,
        d_ff=12288,
        n_layers=60,
        n_heads=128,
        n_kv_heads=128,
        d_head=128,
        vocab=102_400,
        n_experts=160,
        experts_per_token=6,
        n_shared_experts=2,
        d_ff_expert=1536,
        n_dense_layers=1,
        q_lora_rank=1536,
        kv_lora_rank=512,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        name="deepseek-v2",
    )
    assert v2.kv_bytes_per_token("bf16") == 60 * 576 * 2
    assert v2.param_count() == pytest.approx(236e9, rel=0.01)
    assert v2.active_param_count() == pytest.approx(21e9, rel=0.03)


def test_absorbed_decode_attention_by_hand():
    """Absorbed MLA decode: each of the 128 heads scores the 576-wide cached row (latent + rotary key) and sums
    512-wide latents: 2·128·(576 + 512) FLOPs per cached token and layer, over 576 elements read once."""
    m = get_model("deepseek-v3")
    S, B = 8192, 32
    a = long_context.decode_attention(m, S, batch=B)
    flops = B * S * L3 * 2 * N3 * ((R_KV + ROPE) + R_KV)
    kv = B * S * L3 * (R_KV + ROPE) * 2
    assert a.form == "mla-absorbed"
    assert a.cached_per_token == 576
    assert a.flops == flops
    assert a.kv_bytes == kv == B * S * m.kv_bytes_per_token()
    assert a.intensity == pytest.approx(2 * N3 * 1088 / (576 * 2))  # 241.8 FLOPs/byte in bf16
    # the fused kernel's intensity tends to the same figure at long context, far above a GQA model's G
    assert m.attention_intensity(1, 2**20) == pytest.approx(a.intensity, rel=1e-3)
    assert m.attention_intensity(1, S) < a.intensity
    l70 = get_model("llama3-70b")
    assert long_context.decode_attention(l70, S).intensity == pytest.approx(64 / 8)  # G = N/K, bf16
    assert a.intensity > 25 * l70.attention_intensity(1, S)


def test_engine_prices_the_latent_cache():
    """The serving engine's pool and KV term use the latent bytes: 70,272 per token in bf16."""
    e = inference.deploy("deepseek-v3", "v5p", 64, weight_dtype="int8")
    assert e.kv_bytes_per_token == 70_272
    free = 64 * 96e9 * 0.9 - e.weight_bytes
    assert e.kv_capacity_tokens == int(free // 70_272)
    step = e.step(32, 32 * 8192)
    read = 32 * 8192 * 70_272 / (64 * 2.8e12)
    # absorbed MLA decode attention: 2 x 128 heads x (2 x 512 + 64) FLOPs per layer and cached token, 61 layers,
    # at v5p's 4.59e14 bf16 FLOP/s on each of 64 chips; the KV part is the slower of the read and those FLOPs
    flops = 32 * 8192 * 61 * 2 * 128 * (2 * 512 + 64) / (64 * 4.59e14)
    assert flops > read
    assert step.roofline_parts["kv"] == pytest.approx(max(read, flops))


def test_latent_cache_is_not_split_over_heads():
    """Sequence-sharded decode: an MLA cache has one latent per token, so head sharding alone cannot split it."""
    r = long_context.sequence_sharded_decode("deepseek-v3", "v5p", 64, 2**17, weight_dtype="int8")
    assert r.kv_bytes_per_chip_heads_only == r.kv_bytes == 2**17 * 70_272
    assert r.kv_bytes_per_chip == r.kv_bytes / 64


# ---------------------------------------------------------------- the other long-context helpers of Chapter 7
def test_cross_layer_sharing_by_hand():
    """Llama 3 70B (80 layers, 8 KV heads of 128) in int8: 2·80·8·128 = 163,840 bytes per token; CLA2 keeps 40
    layers' caches, 81,920 bytes, and drops 40 layers' K/V projections (2·8192·8·128 weights each)."""
    kw = dict(weight_dtype="int8", kv_dtype="int8")
    one = long_context.cross_layer_kv("llama3-70b", "v5e", 16, 8192, share=1, **kw)
    two = long_context.cross_layer_kv("llama3-70b", "v5e", 16, 8192, share=2, **kw)
    assert one.kv_bytes_per_token == 2 * 80 * 8 * 128 == 163_840
    assert two.kv_bytes_per_token == 81_920 and two.layers_with_kv == 40
    assert one.weight_bytes - two.weight_bytes == 40 * 2 * 8192 * 8 * 128
    assert one.max_batch == inference.max_batch("llama3-70b", "v5e", 16, 8192, **kw)
    assert one.step.total == pytest.approx(
        inference.decode_step_time("llama3-70b", "v5e", 16, one.max_batch, 8192, **kw).total
    )
    free = 16 * 16e9 - two.weight_bytes
    assert two.max_batch == int(free // (8192 * 81_920))
    with pytest.raises(ValueError, match="share"):
        long_context.cross_layer_kv("llama3-8b", "v5e", 4, 1024, share=33)


def test_sequence_sharded_combine_by_hand():
    """Llama 3 8B, batch 1: each layer combines 32 maxima, then 32 × (128 + 1) fp32 outputs and sums."""
    r = long_context.sequence_sharded_decode("llama3-8b", "v5p", 16, 2**20)
    assert r.combine_bytes == 32 * 4 + 32 * 129 * 4
    from tpu_notes.inference.engine import system_for

    sys_ = system_for("v5p", 16)
    per_layer = (
        sys_.collective_time("all_reduce", 32 * 4).total + sys_.collective_time("all_reduce", 32 * 129 * 4).total
    )
    assert r.combine == pytest.approx(32 * per_layer)
    assert r.kv_bytes == 2**20 * 2 * 32 * 8 * 128 * 2
    assert r.kv_bytes_per_chip == r.kv_bytes / 16
    assert r.kv_bytes_per_chip_heads_only == r.kv_bytes / 8  # 8 KV heads
    assert long_context.sequence_sharded_decode("llama3-8b", "v5p", 1, 4096).combine == 0.0


def test_chunked_prefill_walks_the_engine():
    e = inference.deploy("llama3-8b", "v5e", 4)
    whole = long_context.chunked_prefill(e, 8, 1024, 2048, 2048)
    assert whole.n_steps == 1
    assert whole.prompt_time == pytest.approx(e.step(8, 8 * 1024, 2048, 2048 * 2049 / 2, 0).total)
    halves = long_context.chunked_prefill(e, 8, 1024, 2048, 1024)
    by_hand = (
        e.step(8, 8192, 1024, 1024 * 1025 / 2, 0).total
        + e.step(8, 8192, 1024, 1024 * 1024 + 1024 * 1025 / 2, 1024).total
    )
    assert halves.prompt_time == pytest.approx(by_hand)
    assert halves.decode_step == pytest.approx(e.step(8, 8192).total)
    assert halves.decode_step < halves.mean_step < whole.mean_step
    with pytest.raises(ValueError, match="chunk"):
        long_context.chunked_prefill(e, 8, 1024, 2**20, 1)
