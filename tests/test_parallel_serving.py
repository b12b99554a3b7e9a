"""Expert- and pipeline-parallel serving (tpu_notes.inference.parallel_serving) and its published reconciliation."""

from __future__ import annotations

import pytest

from tpu_notes.efficiency import DEFAULT
from tpu_notes.gpu import GpuCluster
from tpu_notes.inference import deploy
from tpu_notes.inference.parallel_serving import (
    H800_IB,
    ep_all_to_all_bytes,
    ep_batch_for_tpot,
    ep_decode_step,
    ep_throughput_curve,
    pipeline_decode,
)
from tpu_notes.inference.published_parallel import RECORDS, format_table, reconcile
from tpu_notes.rules import Illegal
from tpu_notes.transformer import get_model

DS = get_model("deepseek-v3")
L405 = get_model("llama3-405b")


def test_parts_add_up_with_and_without_overlap():
    s = ep_decode_step(DS, GpuCluster("h100", 72), 64, 2000, redundant_experts=32)
    assert s.compute == pytest.approx(s.kv + s.dense + s.experts)
    assert s.total == pytest.approx(max(s.compute, s.all_to_all) + s.overhead)
    n = ep_decode_step(DS, GpuCluster("h100", 72), 64, 2000, redundant_experts=32, overlap=False)
    assert n.total == pytest.approx(n.kv + n.dense + n.experts + n.all_to_all + n.overhead)
    assert n.overhead == pytest.approx(DEFAULT.decode_overhead * DS.n_layers)  # one micro-batch
    assert s.overhead == pytest.approx(2 * n.overhead)  # two micro-batches


def test_all_to_all_bytes_from_the_formula():
    b, k, D = 128, 8, 7168  # DeepSeek-V3: top-8 routing, hidden 7168 (its config.json)
    disp, comb = ep_all_to_all_bytes(DS, b)
    assert disp == pytest.approx(b * k * D * (1 + 4 / 128))  # FP8 + one fp32 scale per 128 elements
    assert comb == pytest.approx(b * k * D * 2)  # BF16
    # the step's all-to-all: cross-node share over the NIC at the achieved rate, per MoE layer, plus latencies
    ep, node = 144, 8
    s = ep_decode_step(DS, GpuCluster(H800_IB, ep), b, 4096, overlap=False, redundant_experts=32)
    ib = (disp + comb) * (ep - node) / ep / (50e9 * DEFAULT.links["ib"])
    lat = 2 * (61 - 3) * DEFAULT.collective_latency["ib"]
    assert s.all_to_all == pytest.approx((61 - 3) * ib + lat)


def test_rows_per_expert_and_weights_per_rank():
    s = ep_decode_step(DS, GpuCluster("h100", 64), 100, 1000)
    assert s.rows_per_expert == pytest.approx(100 * 64 * 8 / 256)
    small = ep_decode_step(DS, GpuCluster("h100", 32), 100, 1000)
    big = ep_decode_step(DS, GpuCluster("h100", 128), 100, 1000)
    assert big.weight_bytes_per_rank < s.weight_bytes_per_rank < small.weight_bytes_per_rank
    # the routed experts held: 256 / EP of them, 58 MoE layers of 3 x 7168 x 2048 weights, FP8
    per_expert = 58 * 3 * 7168 * 2048
    assert small.weight_bytes_per_rank - s.weight_bytes_per_rank == pytest.approx((8 - 4) * per_expert)


def test_throughput_grows_with_batch_and_tpot_search():
    curve = ep_throughput_curve(DS, GpuCluster("h100", 72), 2000, (8, 32, 128), redundant_experts=32)
    tps = [s.tokens_per_s_per_node for s in curve]
    assert tps == sorted(tps)
    best = ep_batch_for_tpot(DS, GpuCluster("h100", 72), 2000, 0.05, redundant_experts=32)
    assert best.total <= 0.05
    over = ep_decode_step(DS, GpuCluster("h100", 72), best.batch_per_rank + 1, 2000, redundant_experts=32)
    assert over.total > 0.05 or not over.fits


def test_pipeline_latency_is_stages_of_layer_slices_plus_sends():
    cl = GpuCluster("h100", 16)
    p = pipeline_decode(L405, cl, 2, 64, 2048, weight_dtype="fp8", compute_dtype="fp8")
    half = deploy(L405.with_(n_layers=63), GpuCluster("h100", 8), weight_dtype="fp8", compute_dtype="fp8")
    stage = half.decode_step(32, 2048).total
    send = 32 * 16384 * 2 / 8 / (50e9 * DEFAULT.links["ib"]) + DEFAULT.collective_latency["ib"]
    assert p.tpot_s == pytest.approx(2 * (stage + send))
    assert p.tokens_per_s == pytest.approx(64 / p.tpot_s)


def test_refusals():
    with pytest.raises(Illegal, match="system"):
        ep_decode_step(DS, GpuCluster("h100", 24), 8, 100)  # 24 does not divide 256 experts
    ep_decode_step(DS, GpuCluster("h100", 24), 8, 100, redundant_experts=8)  # 264 slots: legal
    with pytest.raises(ValueError, match="dense"):
        ep_decode_step(L405, GpuCluster("h100", 16), 8, 100)
    with pytest.raises(Illegal, match="stages"):
        pipeline_decode(L405, GpuCluster("h100", 40), 5, 10, 100)  # 5 does not divide 126 layers
    with pytest.raises(Illegal, match="stages"):
        pipeline_decode(L405, GpuCluster("h100", 16), 1, 8, 100)  # TP16 across nodes
    with pytest.raises(ValueError, match="stages"):
        pipeline_decode(L405, GpuCluster("h100", 4), 2, 8, 100)  # 203 GB of bf16 weights on 2 GPUs
    with pytest.raises(TypeError, match="system"):
        ep_decode_step(DS, "h100", 8, 100)


def test_memory_fit_flag():
    s = ep_decode_step(DS, GpuCluster("h100", 72), 256, 2000, redundant_experts=32)
    assert s.fits
    assert not ep_decode_step(DS, GpuCluster("h100", 8), 512, 32000).fits


def test_reconciliation_within_a_loose_factor():
    rows = reconcile()
    assert len(rows) == len(RECORDS)
    for r in rows:
        assert 0.5 < r.ratio < 2.0, r  # tight targets (25%, 20%) belong to benchmarks/serving.py
    table = format_table(rows)
    assert "ratio" in str(table) and table.column("ratio") == [r.ratio for r in rows]
