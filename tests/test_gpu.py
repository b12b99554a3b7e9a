"""tpu_notes.gpu: collective times on NVLink nodes and the scale-out network, and GPU layouts in step_time."""

import pytest

from tpu_notes import gpu as G
from tpu_notes import hardware, inference
from tpu_notes import training as T
from tpu_notes.gpu import GpuCluster
from tpu_notes.hardware import get_chip

H100 = get_chip("h100")


def test_inside_a_node_is_the_nvlink_ring():
    c = GpuCluster("h100", 8)
    t = c.collective_time("all-gather", 1e9, 8, hop_latency=0)
    assert t.total == pytest.approx(1e9 * 7 / (8 * H100.nvlink_bw))
    assert c.collective_time("all-reduce", 1e9, 8, hop_latency=0).total == pytest.approx(2 * t.total)


def test_across_nodes_whole_nodes_use_the_node_bandwidth():
    c = GpuCluster("h100", 1024)
    t = c.collective_time("all-gather", 1e9, 1024, inner=8, hop_latency=0).total
    # the scaling book's H100 figure: a node of 8 GPUs x 400 Gb/s NICs moves 400 GB/s
    assert t == pytest.approx(1e9 / 400e9, rel=0.01)
    one_per_node = c.collective_time("all-gather", 1e9, 128, inner=1, hop_latency=0).total
    assert one_per_node == pytest.approx(8 * t, rel=0.02)


def test_critical_batches_match_the_book_for_h100():
    # DP over one node: C / W_nvlink ~ 2200 tokens per GPU; across nodes with whole nodes: C / W_node ~ 2475
    assert H100.peak_flops() / H100.nvlink_bw == pytest.approx(2200, rel=0.01)
    assert H100.peak_flops() / (8 * H100.dcn_bw) == pytest.approx(2475, rel=0.01)


def test_gpu_layout_fills_the_node_with_tensor_parallelism_first():
    c = GpuCluster("h100", 8192)
    lay = T.map_to_slice(T.Parallelism(tensor=8, pipeline=16, data=64, microbatches=16), c)
    assert lay.describe() == "tensor: node8; data: net64; pipeline: net16"
    mixed = T.map_to_slice(T.Parallelism(tensor=2, fsdp=4096), c)
    assert mixed.describe() == "tensor: node2; fsdp: node4 net1024"


def test_step_time_on_gpus_interleaving_shrinks_the_bubble():
    c = GpuCluster("h100", 8192)
    p = T.Parallelism(tensor=8, pipeline=16, data=64, microbatches=32)  # 32 sequences per data rank
    plain = T.step_time("llama3-405b", p, c, 16 * 2**20, 8192, remat="none")
    inter = T.step_time("llama3-405b", p, c, 16 * 2**20, 8192, remat="none", circular_repeats=4)
    assert inter.bubble == pytest.approx(plain.bubble / 4)
    assert inter.mfu > plain.mfu


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: GpuCluster("v5p", 8), "GPU"),
        (lambda: GpuCluster("h100", 12), "multiple of node_size"),
        (lambda: GpuCluster("h100", 16).collective_time("all-gather", 1e6, 32), "group"),
        (lambda: GpuCluster("h100", 16).collective_time("all-gather", 1e6, 16, inner=3), "inner"),
        (lambda: GpuCluster("h100", 16).collective_time("broadcast", 1e6, 16), "kind"),
        (lambda: T.map_to_slice(T.Parallelism(data=8, dcn=2), GpuCluster("h100", 8)), "dcn"),
        (lambda: T.plan("llama3-8b", GpuCluster("h100", 64), 2**20, 4096, n_slices=2), "n_slices"),
    ],
)
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# -- Chapter 11: the multi-level fat tree, the explicit-graph oracle, the chip table's GPU parts ----------------


CASES = [  # (cluster, group, inner, span)
    (lambda: GpuCluster("h100", 8), 8, 8, None),
    (lambda: GpuCluster("h100", 64), 64, 8, None),
    (lambda: GpuCluster("h100", 64), 16, 2, None),
    (lambda: G.dgx_superpod("h100", 256), 32, 1, None),
    (lambda: G.dgx_superpod("h100", 256), 16, 1, 256),
    (lambda: G.dgx_superpod("h100", 256), 128, 4, None),
    (lambda: GpuCluster("h100", 256, levels=(("leaf", 8), ("spine", 4, 2.0))), 256, 8, None),
    (lambda: GpuCluster("h100", 256, levels=(("leaf", 8), ("spine", 4, 2.0))), 32, 1, None),
    (lambda: G.dgx_superpod("h100", 512), 512, 8, None),  # leaf and spine (link_loads takes <= 576 GPUs)
    (lambda: G.dgx_superpod("h100", 512), 64, 1, None),
    (lambda: G.dgx_superpod("gb200", 576, nodes_per_su=8), 576, 72, None),
]


@pytest.mark.parametrize("kind", ["all-gather", "reduce-scatter", "all-reduce", "all-to-all"])
@pytest.mark.parametrize("make, group, inner, span", CASES)
def test_closed_form_matches_the_explicit_graph(make, group, inner, span, kind):
    c = make()
    closed = c.collective_time(kind, 1e9, group, inner, span=span, hop_latency=0).total
    direct = G.direct_collective_time(c, kind, 1e9, group, inner, span=span)
    assert closed > 0
    assert closed == pytest.approx(direct, rel=1e-9)


def test_the_explicit_graph_finds_the_busiest_link_where_the_formula_says():
    c = G.dgx_superpod("h100", 256)
    loads = G.link_loads(c, "all-gather", 1e9, 256, 8)
    worst = max(loads, key=lambda ld: ld.time)
    terms = c.collective_terms("all-gather", 1e9, 256, 8)
    assert max(terms, key=terms.get) == "leaf"
    assert worst.link[1][0] == "gpu" and worst.link[0][0] == "leaf"  # a NIC's downlink
    assert sum(ld.nbytes for ld in loads if ld.link[1] == ("gpu", 0)) == pytest.approx(1e9 * 255 / 256)


def test_the_books_superpod_numbers():
    c = G.dgx_superpod("h100", 1024)
    assert [lv.degree for lv in c.levels] == [32, 4]
    table = c.level_table()
    assert [r.gpus for r in table] == [8, 256, 1024]
    assert table[1].collective_bw == pytest.approx(400e9) and table[2].child_uplink_bw == pytest.approx(12.8e12)
    terms = c.collective_terms("all-gather", 1.0, 1024, 8)
    assert 1 / terms["node"] == pytest.approx(514e9, rel=0.01)  # 450e9 * 8/7
    # the book's per-level (D-1)/D gives 413 GB/s at the leaf; a node receives from all 127 others: 403 GB/s
    assert 1 / terms["leaf"] == pytest.approx(400e9 * 128 / 127)
    assert 1 / terms["spine"] > 1e13
    two = GpuCluster("h100", 16).collective_terms("all-gather", 1.0, 16, 8)
    assert two["node"] > two["network"]  # Quiz 4 Q5: the node level binds
    assert 1 / two["network"] == pytest.approx(800e9)


def test_sharp_halves_the_all_reduce_and_inner_sharding_divides_by_nodes_spanned():
    c = GpuCluster("h100", 8)
    plain = c.collective_time("all-reduce", 1e9, 8, hop_latency=0).total
    sharp = c.collective_time("all-reduce", 1e9, 8, hop_latency=0, sharp=True).total
    assert sharp == pytest.approx(1e9 / 450e9) and plain / sharp == pytest.approx(2 * 7 / 8)
    su = G.dgx_superpod("h100", 256)
    V = 2 * 8192 * 32768
    base = su.collective_time("all-gather", V, 32, 1, span=256, hop_latency=0).total  # Y = 8 inside the node
    y16 = su.collective_time("all-gather", V / 16, 16, 1, span=256, hop_latency=0).total
    y8 = su.collective_time("all-gather", V / 8, 32, 1, span=256, hop_latency=0).total
    assert y8 == pytest.approx(V * 31 / 32 / 400e9)  # Y <= 8: no gain over the leaf
    assert y16 == pytest.approx(V / 16 * 15 / 16 / 50e9)  # Y = 16: 2 nodes spanned
    assert base > y8


def test_ragged_all_to_all():
    assert G.ragged_fraction(4, 8, exact=False) == 0.5
    assert G.ragged_fraction(4, 8) == pytest.approx(1 - (7 / 8) ** 4)
    c = GpuCluster("h100", 8)
    dense = c.collective_time("all-to-all", 1e9, 8, hop_latency=0).total
    assert dense == pytest.approx(1e9 * 7 / (64 * 450e9))
    assert c.collective_time("all-to-all", 1e9, 8, hop_latency=0, top_k=4).total < dense


def test_gpu_rooflines_match_the_book():
    assert T.critical_batch_per_gpu("h100", across_nodes=False) == pytest.approx(2198, rel=1e-3)
    assert T.critical_batch_per_gpu("h100") == pytest.approx(2472.5)
    assert T.critical_batch_per_gpu("b200") == pytest.approx(5625)
    assert T.critical_batch_per_gpu("h100", nodes=2) == pytest.approx(2472.5 / 2)
    assert T.critical_batch_per_gpu("h100", experts=128, experts_per_token=4) == pytest.approx(32 * 2472.5)
    assert T.critical_batch_per_gpu("h100", model_parallel_nodes=8) == pytest.approx(309, rel=1e-3)
    assert T.max_tensor_parallelism("h100", 28672) == pytest.approx(28672 / 2198, rel=1e-3)
    assert T.two_node_tensor_parallelism_ok("h100", 28672, 16)
    assert not T.two_node_tensor_parallelism_ok("h100", 8192, 16)
    ep = T.expert_parallel_times("h100", 1e6, 7168, 2048, 8, 64)
    assert ep.math == pytest.approx(4e6 * 8 * 7168 * 2048 / (64 * 9.89e14))


def test_critical_intensity_per_gpu_and_per_node_are_explicit():
    h = hardware.get_chip("h100")
    with pytest.raises(ValueError, match="node_egress"):
        h.critical_intensity("bf16", "dcn")
    assert h.critical_intensity("bf16", "node_egress") == pytest.approx(2472.5)
    assert h.critical_intensity("bf16", "nic") == pytest.approx(19780)
    assert hardware.get_chip("v5p").critical_intensity("bf16", "dcn") == pytest.approx(73440)


def test_gpu_parts_in_the_chip_table():
    h, b = hardware.get_chip("h100"), hardware.get_chip("b200")
    assert (h.cuda_cores, b.cuda_cores, h.tensor_cores) == (16896, 18944, 528)
    assert h.peak_flops("fp32") == pytest.approx(33.5e12, rel=0.01)
    assert h.fp32_fma_flops == 2 * h.fp32_flops
    assert b.clock_hz == pytest.approx(2.1e9, rel=0.01)
    assert h.nvlink_links * h.nvlink_link_bw == h.nvlink_bw
    assert h.nvlink_node_bw == pytest.approx(3.6e12)
    for name in ("v100", "a100", "h100", "b200"):
        c = hardware.get_chip(name)
        derived = c.bf16_flops / (c.sms * c.tensor_cores_per_sm * c.tensor_clock_hz)
        assert derived == pytest.approx(c.tc_flops_per_cycle, rel=0.05), name
    for c in hardware.CHIPS.values():
        if c.nvlink_links and c.nvlink_link_bw:
            assert c.nvlink_links * c.nvlink_link_bw == pytest.approx(c.nvlink_bw), c.name
    gb = hardware.get_chip("gb200")
    assert gb.node_size == 72 and gb.node_egress_bw == pytest.approx(72 * gb.dcn_bw)


def test_decode_step_takes_a_gpu_cluster():
    c = GpuCluster("h100", 16)
    a = inference.decode_step_time("llama3-70b", c, None, 32, 4096)
    b = inference.decode_step_time("llama3-70b", "h100", 16, 32, 4096)
    assert a == b
    with pytest.raises(ValueError, match="n_chips"):
        inference.decode_step_time("llama3-70b", c, 8, 32, 4096)


def test_step_time_on_a_superpod_uses_the_inner_axes():
    flat, pod = GpuCluster("h100", 1024), G.dgx_superpod("h100", 1024)
    p = T.Parallelism(tensor=8, data=128)
    a = T.step_time("llama3-70b", p, flat, 4 * 2**20, 4096)
    b = T.step_time("llama3-70b", p, pod, 4 * 2**20, 4096)
    assert a.collectives["data"] == pytest.approx(b.collectives["data"])


def test_strategy_times_cover_each_strategy():
    rows = T.strategy_times(GpuCluster("h100", 64), "llama3-70b", 64 * 2048)
    assert [r.strategy for r in rows] == ["dp", "tp", "pp"]
    assert rows[0].bound == "comms"  # 2048 tokens per GPU < 2475
    moe = T.strategy_times(GpuCluster("h100", 64), "deepseek-v3", 64 * 4096)
    assert "ep" in [r.strategy for r in moe]


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: GpuCluster("h100", 64, levels=(("leaf", 4),)), "levels"),
        (lambda: GpuCluster("h100", 64, levels=(("leaf", 8, 0.0),)), "oversubscription"),
        (lambda: GpuCluster("h100", 64, levels=(("leaf", 8, -1.0),)), "oversubscription"),
        (lambda: GpuCluster("a800", 8), "chip"),
        (lambda: G.dgx_superpod("h100", 1000), "n_gpus"),
        (lambda: GpuCluster("h100", 64).collective_time("all-gather", 1e6, 16, 1, span=100), "span"),
        (lambda: GpuCluster("h100", 8).collective_time("all-gather", 1e6, 8, sharp=True), "sharp"),
        (
            lambda: GpuCluster("h100", 768, levels=(("leaf", 32), ("spine", 3))).collective_time(
                "all-gather", 1e6, 32, span=768
            ),
            "line up",
        ),
        (lambda: T.critical_batch_per_gpu("v5p"), "chip"),
        (lambda: GpuCluster("v100", 8), "NVSwitch"),  # the DGX-1's cube-mesh is not one switch hop
    ],
)
def test_bad_input_ch11(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


# -- GPU figures against NVIDIA's documents (each literal is the document's, with the document named) ------------


def test_v100_is_the_sxm2_part_throughout():
    v = hardware.get_chip("v100")
    # NVIDIA Tesla V100 datasheet, V100 SXM2 column: 125 TFLOP/s tensor (fp16), 15.7 TFLOP/s fp32, 900 GB/s HBM2,
    # NVLink 300 GB/s (both directions). The PCIe card's 112 / 14 TFLOP/s must not be mixed in.
    assert v.bf16_flops == 125e12
    assert v.fp32_fma_flops == pytest.approx(15.7e12, rel=0.005)
    assert v.hbm_bw == 900e9
    assert 2 * v.nvlink_bw == 300e9
    # NVIDIA Tesla V100 GPU Architecture whitepaper, Table 1 (Tesla V100 SXM2): 80 SMs, 64 FP32 cores and 8 tensor
    # cores per SM (5120 and 640 per GPU), GPU boost clock 1530 MHz; each tensor core does 64 FMAs per clock.
    assert (v.sms, v.cuda_cores, v.tensor_cores) == (80, 5120, 640)
    assert v.clock_hz == v.tensor_clock_hz == 1530e6
    assert v.tc_flops_per_cycle == 2 * 64
    # parts x clock lands on the datasheet: 80 x 8 x 128 x 1.53e9 = 1.2534e14
    assert v.sms * v.tensor_cores_per_sm * v.tc_flops_per_cycle * v.tensor_clock_hz == pytest.approx(125e12, rel=0.003)
    # NVIDIA DGX-1 whitepaper: six NVLinks of 25 GB/s each way per V100, no NVSwitch (hybrid cube-mesh)
    assert (v.nvlink_links, v.nvlink_link_bw, v.nvswitches_per_node) == (6, 25e9, 0)
    assert v.nvlink_node_bw == pytest.approx(8 * 150e9)  # the GPUs' egress; no switch bounds it
    assert "SXM2" in v.long_name and "cube-mesh" in hardware.source(v, "nvswitches_per_node")


def test_a100_has_64_fp32_cores_per_sm():
    a = hardware.get_chip("a100")
    # NVIDIA A100 datasheet: FP32 19.5 TFLOP/s; A100 whitepaper: 6912 FP32 CUDA cores (108 SMs x 64)
    assert a.cuda_cores == 6912
    assert a.fp32_fma_flops == pytest.approx(19.5e12, rel=0.001)
    assert a.bf16_flops == 312e12  # A100 datasheet, dense BF16 tensor
    assert a.sms * a.tensor_cores_per_sm * a.tc_flops_per_cycle * a.tensor_clock_hz == pytest.approx(312e12, rel=0.001)


def test_hopper_tensor_clock_makes_the_product_land_on_the_datasheet():
    # NVIDIA H100 datasheet (SXM5): 989.4 TFLOP/s dense bf16 (1,979 with sparsity), fp32 67 TFLOP/s, boost 1.98 GHz.
    # 989.4e12 / (132 SMs x 4 tensor cores x 1024 FLOPs/cycle) = 1.830e9 Hz, the tensor-core clock of NVIDIA's
    # H100 whitepaper peak-rate table; the boost clock would give 1.07e15 and the scaling book's 1.76 GHz 9.5e14.
    for name in ("h100", "h200", "h800"):
        h = hardware.get_chip(name)
        parts = h.sms * h.tensor_cores_per_sm * h.tc_flops_per_cycle
        assert parts * h.tensor_clock_hz == pytest.approx(989.4e12, rel=0.001), name
        assert parts * h.clock_hz > 1.07e15  # the boost clock does not land
        assert h.clock_hz == 1.98e9
        assert h.fp32_fma_flops == pytest.approx(67e12, rel=0.005)  # 16,896 x 2 x 1.98e9 = 66.9e12


def test_h800_nvlink_is_400_gb_s_counting_both_directions():
    h800, h100 = hardware.get_chip("h800"), hardware.get_chip("h100")
    # NVIDIA H800 SXM5 datasheet: NVLink 400 GB/s; H100 SXM5: 900 GB/s. Both count both directions; the library's
    # nvlink_bw is one direction (the H100's 4.5e11), so the H800's is 2e11: 8 NVLink-4 links of 25 GB/s.
    assert 2 * h800.nvlink_bw == 400e9 and 2 * h100.nvlink_bw == 900e9
    assert h800.nvlink_links * h800.nvlink_link_bw == h800.nvlink_bw
    # DeepSeek-V3's data-parallel bar over NVLink: 989e12 / 200e9 = 4945 tokens per GPU (300 GB/s would give 3297)
    assert T.critical_batch_per_gpu("h800", across_nodes=False) == pytest.approx(989e12 / 200e9)


def test_measured_nvlink_bus_bandwidths_are_nccl_tests_figures():
    # NVIDIA/nccl-tests issue #212 (NCCL maintainer, 2024-05-06): ~370 GB/s effective NVLink bandwidth (busbw) with
    # ring collectives on 8 x H100, and a peak busbw of ~480 GB/s for an AllReduce with NVLink SHARP.
    assert G.H100_MEASURED_ALLREDUCE_BW == 370e9
    assert G.H100_MEASURED_SHARP_ALLREDUCE_BW == 480e9
    assert G.H100_MEASURED_SHARP_ALLREDUCE_BW / G.H100_MEASURED_ALLREDUCE_BW == pytest.approx(
        1 + G.SHARP_MEASURED_GAIN, abs=0.01
    )
    assert G.H100_MEASURED_ALLREDUCE_BW < H100.nvlink_bw  # measured stays under the 450 GB/s line rate
