"""The one serving step model (tpu_notes.inference.engine) against Chapter 7's roofline, the system's collective
formulas, the model's parameter counts and its own fast path."""

from __future__ import annotations

import math

import pytest

from tpu_notes import inference as I
from tpu_notes.efficiency import DEFAULT
from tpu_notes.gpu import GpuCluster
from tpu_notes.hardware import get_chip
from tpu_notes.inference.engine import deploy, system_for
from tpu_notes.transformer import get_model


def test_one_device_no_prefill_roofline_is_chapter_7s_step():
    """With one chip and no prefill, the engine's roofline is decode_step_time's formula, exactly."""
    d = deploy("llama2-7b", "v5e", 1, reserve_fraction=0.0)
    for batch, ctx in ((1, 128), (4, 1024), (16, 700)):
        s = d.step(batch, batch * ctx)
        ref = I.decode_step_time("llama2-7b", "v5e", 1, batch, ctx)
        assert s.roofline == pytest.approx(ref.total, rel=1e-12)
        assert s.roofline_parts["kv"] == pytest.approx(ref.kv_load, rel=1e-12)
        assert s.roofline_parts["weights"] == pytest.approx(ref.weight_load, rel=1e-12)
        assert s.roofline_parts["matmul"] == pytest.approx(ref.flops_time, rel=1e-12)


def test_expected_reads_are_the_roofline_reads_at_the_achieved_hbm_fraction():
    d = deploy("llama3-70b", "h100", 8, weight_dtype="fp8", kv_dtype="fp8", compute_dtype="fp8")
    s = d.decode_step(64, 2048)
    assert s.kv == pytest.approx(s.roofline_parts["kv"] / DEFAULT.hbm)
    assert s.weights == pytest.approx(s.roofline_parts["weights"] / DEFAULT.hbm)
    assert s.overhead == pytest.approx(80 * DEFAULT.decode_overhead)
    assert s.total > s.roofline


def test_the_fast_clock_is_the_checked_step():
    d = deploy("llama3-70b", "v5e", 16, weight_dtype="int8", kv_dtype="int8")
    for args in (
        (1, 5000, 0, 0.0, 0),
        (37, 37 * 3111, 0, 0.0, 0),
        (12, 40_000, 500, 500 * 1300.0, 1000),
        (0, 0, 2048, 2.1e6, 0),
    ):
        assert d._seconds(*args) == pytest.approx(d.step(*args).total, rel=1e-12)


def test_collectives_are_the_systems_all_reduces_and_kv_all_to_alls():
    """Two AllReduces of the [rows, D] activations per layer (the slice's own formula), and two AllToAlls of the
    decoded rows when kv_sharding shards the caches over the batch (Llama 3 70B's 8 KV heads on 16 chips)."""
    m = get_model("llama3-70b")
    rows = 48
    d16 = deploy(m, "v5e", 16, weight_dtype="int8", kv_dtype="int8")
    d8 = deploy(m, "v5e", 8, weight_dtype="int4", kv_dtype="int4")
    ar16 = d16.system.collective_time("all_reduce", rows * m.d_model * 2.0).bandwidth_time
    a2a16 = d16.system.collective_time("all_to_all", rows * m.d_model * 2.0).bandwidth_time
    ar8 = d8.system.collective_time("all_reduce", rows * m.d_model * 2.0).bandwidth_time
    assert I.kv_sharding(m, 16).all_to_alls == 2 and I.kv_sharding(m, 8).all_to_alls == 0
    got16 = d16.step(rows, rows * 4096).roofline_parts["collectives"]
    got8 = d8.step(rows, rows * 4096).roofline_parts["collectives"]
    assert got16 == pytest.approx(2 * m.n_layers * ar16 + 2 * m.n_layers * a2a16, rel=1e-9)
    assert got8 == pytest.approx(2 * m.n_layers * ar8, rel=1e-9)
    # one device: nothing to communicate
    assert deploy("llama2-7b", "v5e", 1, reserve_fraction=0.0).step(4, 4000).collectives == 0.0


def test_a_gpu_step_pays_nvlink_inside_a_node_and_the_network_beyond():
    m = get_model("llama3-70b")
    inside = deploy(m, GpuCluster("h100", 8), weight_dtype="fp8", kv_dtype="fp8")
    beyond = deploy(m, GpuCluster("h100", 16), weight_dtype="fp8", kv_dtype="fp8")
    a, b = inside.step(32, 32 * 2048), beyond.step(32, 32 * 2048)
    assert b.collectives > a.collectives
    assert a.collectives == pytest.approx(
        2
        * m.n_layers
        * (DEFAULT.latency("nvlink") + a.roofline_parts["collectives"] / (2 * m.n_layers) / DEFAULT.link("nvlink")),
        rel=1e-9,
    )


def test_a_mixture_of_experts_reads_the_experts_its_rows_visit():
    m = get_model("mixtral-8x7b")
    d = deploy(m, "h100", 2, reserve_fraction=0.0)
    hbm = 2 * get_chip("h100").hbm_bw
    for rows in (1, 3, 64):
        want = I.weight_params_read(m, rows) * 2 / hbm
        assert d.step(rows, rows * 100).roofline_parts["weights"] == pytest.approx(want, rel=1e-12)


def test_the_kv_pool_is_hbm_left_after_weights_and_reserve():
    m = get_model("llama3-70b")
    c = get_chip("v5e")
    d = deploy(m, "v5e", 16, weight_dtype="int8", kv_dtype="int8", reserve_fraction=0.1)
    free = 16 * c.hbm_bytes * 0.9 - m.param_count() * 1
    assert d.kv_capacity_tokens == math.floor(free / m.kv_bytes_per_token("int8"))
    assert d.kv_blocks(16) == d.kv_capacity_tokens // 16
    b = d.max_batch(8192)
    assert d.decode_step(b, 8192).fits
    with pytest.raises(ValueError, match=f"at most {b}"):
        d.decode_step(b + 1, 8192)
    assert not d.decode_step(b + 1, 8192, allow_unfit=True).fits


def test_a_deployment_that_cannot_hold_the_weights_is_refused_by_n_chips():
    with pytest.raises(ValueError, match="n_chips=1"):
        deploy("llama3-70b", "v5e", 1)
    priced = deploy("llama3-70b", "v5e", 1, check_memory=False)
    assert priced.kv_capacity_tokens == 0 and not priced.decode_step(1, 100, allow_unfit=True).fits


def test_prefill_step_is_the_expected_prefill_and_the_prefix_cache_saves_work():
    d = deploy("llama3-70b", "h100", 8, reserve_fraction=0.0, check_memory=False)
    full = d.prefill_step(8192)
    assert full.total == pytest.approx(I.expected_prefill("llama3-70b", "h100", 8, 8192), rel=1e-12)
    cached = d.prefill_step(8192, cached_len=4096)
    assert cached.total < full.total and cached.prefill_tokens == 4096
    # the attention of 8192 causal tokens: T(T+1)/2 pairs
    per_pair = 2 * 80 * 64 * 256
    assert full.roofline_parts["attention"] == pytest.approx(
        8192 * 8193 / 2 * per_pair / (8 * get_chip("h100").peak_flops("bf16")), rel=1e-12
    )


def test_bound_names_the_largest_part_and_matmul_bound_the_max_term():
    """Llama 3 70B in int4 at batch 138 on 8 v5e chips: the KV load is the largest part while the matmuls are
    compute-bound (the issue's case): both are reported."""
    step = I.decode_step_time("llama3-70b", "v5e", 8, 138, 8192, weight_dtype="int4", kv_dtype="int4")
    assert step.flops_time > step.weight_load and step.kv_load > step.flops_time
    assert step.bound == "kv" and step.matmul_bound == "compute"
    assert "matmuls compute-bound" in repr(step)
    e = deploy("llama3-70b", "v5e", 8, weight_dtype="int4", kv_dtype="int4").decode_step(100, 8192)
    assert e.matmul_bound == ("compute" if e.matmul > e.weights else "weights")


def test_system_for_builds_the_standard_slice_or_a_line():
    assert system_for("v5e", 16).shape == (4, 4)
    assert system_for("v5e", 3).n_chips == 3
    assert system_for("h100", 16).n_gpus == 16
    with pytest.raises(ValueError, match="n_chips"):
        system_for("v5p", 7 * 64)


def test_an_mla_models_decode_attention_is_priced_at_its_flops_when_they_outlast_the_read():
    """DeepSeek-V3's latent cache is 70,272 bytes per token in bf16 (61 layers x (512 + 64) x 2 bytes, the HF
    config), and its absorbed decode attention does 2 x 128 heads x (2 x 512 + 64) FLOPs per layer and cached token
    (arXiv 2405.04434, section 2.1.3): 278,528 x 61 ~ 1.70e7 FLOPs per token against 7.0e4 bytes, about 242 per
    byte, far above a GQA model's ~8. On 64 v5p the KV part is the FLOPs, not the read."""
    from tpu_notes.hardware import get_chip
    from tpu_notes.inference import kv_sharding
    from tpu_notes.transformer import get_model

    ds = get_model("deepseek-v3")
    dep = deploy(ds, "v5p", 64, weight_dtype="fp8")
    tokens = 32 * 8192
    step = dep.step(32, tokens)
    v5p = get_chip("v5p")
    flops_per_token = 61 * 2 * 128 * (2 * 512 + 64)
    read = tokens * 61 * (512 + 64) * 2 / (64 * v5p.hbm_bw)
    compute = tokens * flops_per_token / (64 * v5p.peak_flops("bf16"))
    assert compute > read  # the premise: MLA decode attention outlasts its read at this size
    assert step.roofline_parts["kv"] == pytest.approx(compute, rel=1e-9)
    assert step.total == pytest.approx(dep._seconds(32, tokens), rel=1e-12)
    # a GQA model keeps the read: Llama 3 70B's KV part is its bytes over the HBM bandwidth
    llama = deploy(get_model("llama3-70b"), "v5p", 8)
    kv_bytes = 80 * 2 * 8 * 128 * 2  # layers x (K, V) x KV heads x head dim x bf16
    assert llama.step(8, 8 * 4096).roofline_parts["kv"] == pytest.approx(8 * 4096 * kv_bytes / (8 * v5p.hbm_bw))
    # the latent is one cache every head reads: it splits over the batch, with the AllToAlls that costs
    assert kv_sharding(ds, 64).heads == 1 and kv_sharding(ds, 64).all_to_alls == 2
