"""The remat policies real training recipes use (MaxText's ``save_qkv_proj``, ``save_dot_except_mlp``, and a
full_block whose layer input is offloaded to host memory): saved values, recompute FLOPs, repeated tensor-parallel
collectives and the host-link cost, each derived here from the model's dimensions, not read back from the code."""

from __future__ import annotations

import pytest

from tpu_notes import hardware, topology
from tpu_notes.training import (
    REMAT,
    Parallelism,
    activation_values_per_token_layer,
    flops_per_token,
    offloaded_values_per_token_layer,
    step_time,
    training_memory,
)
from tpu_notes.transformer import ALL_REMAT_POLICIES, REMAT_POLICIES, get_model

NEW = ("save_qkv_proj", "save_dot_except_mlp", "offload_layer_input")
# from most HBM kept to least (and least recompute to most)
BY_MEMORY = ("none", "save_matmul_outputs", "save_dot_except_mlp", "save_qkv_proj", "full_block")


def _dims(name):
    m = get_model(name)
    return m, m.d_model, m.n_heads, m.n_kv_heads, m.d_head, m.d_ff, m.n_layers


def test_new_policies_are_accepted_everywhere_and_chapter_4s_three_are_kept():
    assert set(NEW) <= set(ALL_REMAT_POLICIES) and set(NEW) <= set(REMAT)
    assert REMAT_POLICIES == ("none", "save_matmul_outputs", "full_block")  # the chapters' table and chart


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "tiny-mha"])
def test_saved_values_from_the_model_dims(name):
    m, D, N, K, H, F, _ = _dims(name)
    qkv = (N + 2 * K) * H
    assert activation_values_per_token_layer(m, "save_qkv_proj") == D + qkv
    assert activation_values_per_token_layer(m, "save_dot_except_mlp") == D + qkv + D
    assert activation_values_per_token_layer(m, "full_block") == D
    assert activation_values_per_token_layer(m, "offload_layer_input") == 0
    assert offloaded_values_per_token_layer(m, "offload_layer_input") == D
    assert all(offloaded_values_per_token_layer(m, p) == 0 for p in BY_MEMORY)
    # llama3-8b by hand: D = 4096, 32 query heads, 8 KV heads of 128 -> 4096 + 48·128 = 10,240 values
    if name == "llama3-8b":
        assert activation_values_per_token_layer(m, "save_qkv_proj") == 4096 + (32 + 16) * 128 == 10_240


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "mixtral-8x7b"])
def test_memory_falls_and_recompute_rises_along_the_policies(name):
    m = get_model(name)
    saved = [activation_values_per_token_layer(m, p) for p in BY_MEMORY]
    assert saved == sorted(saved, reverse=True) and len(set(saved)) == len(saved)
    extra = [flops_per_token(m, seq_len=8192, remat=p) for p in BY_MEMORY]
    assert extra == sorted(extra) and len(set(extra)) == len(extra)
    # offloading the layer input recomputes exactly what full_block does
    assert flops_per_token(m, seq_len=8192, remat="offload_layer_input") == extra[-1]


def test_recompute_flops_derived_from_the_recomputed_matmuls():
    m, D, N, K, H, F, L = _dims("llama3-8b")
    S = 4096
    attn = L * 2.0 * (S / 2) * N * (H + H)  # scores + values, causal, one forward pass
    out_proj = 2.0 * N * H * D
    mlp = 2.0 * 3 * D * F  # gate, up, down
    assert m.recompute_flops(S, "save_dot_except_mlp") == pytest.approx(attn + L * mlp, rel=1e-12)
    assert m.recompute_flops(S, "save_qkv_proj") == pytest.approx(attn + L * (mlp + out_proj), rel=1e-12)
    full = attn + L * (mlp + out_proj + 2.0 * D * (N + 2 * K) * H)
    assert m.recompute_flops(S, "full_block") == pytest.approx(full, rel=1e-12)
    assert m.recompute_flops(S, "save_matmul_outputs") == pytest.approx(attn, rel=1e-12)


def _setup(**p):
    return get_model("llama3-8b"), topology.Slice("v5p", (4, 4, 4)), Parallelism(**p), 2**21, 8192


def test_tensor_collectives_repeated_per_policy():
    m, sl, p, B, S = _setup(fsdp=16, tensor=4)
    t = {r: step_time(m, p, sl, B, S, remat=r).collectives["tensor"] for r in BY_MEMORY + ("offload_layer_input",)}
    one = (t["full_block"] - t["save_matmul_outputs"]) / 3  # one layer-collective's share of the step
    assert one > 0
    assert t["save_dot_except_mlp"] - t["save_matmul_outputs"] == pytest.approx(one)  # the MLP's AllGather
    assert t["save_qkv_proj"] - t["save_matmul_outputs"] == pytest.approx(2 * one)  # ReduceScatter + AllGather
    assert t["offload_layer_input"] == t["full_block"]
    assert t["none"] == t["save_matmul_outputs"]


def test_host_offload_frees_hbm_and_costs_host_link_time():
    m, sl, p, B, S = _setup(fsdp=16, tensor=4)
    full = training_memory(m, p, B, S, remat="full_block")
    off = training_memory(m, p, B, S, remat="offload_layer_input")
    assert off.activations == 0 and off.host == pytest.approx(full.activations)
    assert full.host == 0 and off.peak < full.peak
    # staging: two layers' inputs (this chip's share) in HBM on their way to or from the host
    tokens = B / p.token_shards
    assert off.transient - full.transient == pytest.approx(2 * 2 * tokens * m.d_model / p.tensor)
    st = step_time(m, p, sl, B, S, remat="offload_layer_input")
    # each layer input written in the forward pass and read back in the backward, over this chip's PCIe link
    want = 2 * m.n_layers * tokens * m.d_model * 2 / p.tensor / hardware.get_chip("v5p").pcie_bw
    assert st.collectives["host"] == pytest.approx(want)
    assert "host" not in step_time(m, p, sl, B, S, remat="full_block").collectives
    assert st.expected is not None and "host" in st.expected.collectives
    assert st.expected.collectives["host"] > st.collectives["host"]  # at the achieved PCIe rate, plus latency


def test_host_time_scales_with_tokens_and_layers():
    m, sl, p, B, S = _setup(fsdp=16, tensor=4)
    base = step_time(m, p, sl, B, S, remat="offload_layer_input").collectives["host"]
    assert step_time(m, p, sl, 2 * B, S, remat="offload_layer_input").collectives["host"] == pytest.approx(2 * base)
    deeper = m.with_(n_layers=2 * m.n_layers)
    assert step_time(deeper, p, sl, B, S, remat="offload_layer_input").collectives["host"] == pytest.approx(2 * base)


def test_offload_needs_a_host_link_figure():
    m = get_model("llama3-8b")
    sl = topology.Slice("tpu7x", (2, 2, 1))
    with pytest.raises(ValueError, match="host-link"):
        step_time(m, Parallelism(fsdp=4), sl, 2**16, 8192, remat="offload_layer_input")


def test_existing_policies_price_as_before():
    """The three chapter policies keep their FLOPs: full_block adds the layers' forward, save_matmul_outputs the
    attention products (the published formulas, independently of the new code paths)."""
    m = get_model("llama3-8b")
    S = 8192
    base = flops_per_token(m, include_attention=True, seq_len=S)
    layers_fwd = 2.0 * (m.matmul_params_per_token() - m.vocab * m.d_model) + m.attention_flops(S)
    assert flops_per_token(m, include_attention=True, seq_len=S, remat="full_block") == pytest.approx(
        base + layers_fwd, rel=1e-12
    )
    assert flops_per_token(m, include_attention=True, seq_len=S, remat="save_matmul_outputs") == pytest.approx(
        base + m.attention_flops(S), rel=1e-12
    )


@pytest.mark.parametrize("bad", ["save_qkv", "offload", "minimal", "save_everything"])
def test_bad_policy_names_list_the_allowed_ones(bad):
    m = get_model("llama3-8b")
    for call in (
        lambda: training_memory(m, None, 4096, 4096, remat=bad),
        lambda: m.saved_activations(bad),
        lambda: flops_per_token(m, seq_len=4096, remat=bad),
    ):
        with pytest.raises(ValueError) as e:
            call()
        msg = str(e.value)
        assert ("remat" in msg or "policy" in msg) and all(p in msg for p in NEW)


def test_jax_has_the_policies_these_mirror():
    """MaxText builds its named policies from JAX's checkpoint policies: save_qkv_proj and save_dot_except_mlp are
    ``save_only_these_names`` over named projections, ``minimal`` saves the dots, and the offload policies use
    ``save_and_offload_only_these_names``."""
    jax = pytest.importorskip("jax")
    cp = jax.checkpoint_policies
    for name in ("save_only_these_names", "dots_with_no_batch_dims_saveable", "nothing_saveable"):
        assert callable(getattr(cp, name))
    if not hasattr(cp, "save_and_offload_only_these_names"):
        pytest.skip("this JAX has no host-offload checkpoint policy")
    assert callable(cp.save_and_offload_only_these_names)
