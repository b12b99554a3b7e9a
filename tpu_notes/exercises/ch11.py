"""Exercises of Chapter 11 (ids ch11.*), registered with their reference solutions.

Every worked problem of the scaling book's GPU chapter (gpus.md): its five quizzes, its three pop quizzes and the
numbers its text works out, plus a few of our own (the exact pod bandwidth, ragged top-k, GB200 racks). The id
``ch11.qM`` is the notebook's Exercise 11.M, in the order the chapter asks them. Each reference is computed with
``tpu_notes.gpu`` and the chip table, never typed in.
"""

from __future__ import annotations

from . import Exercise, register

D_Q3, F_Q3 = 4096, 65_536  # Quiz 2 question 3's bf16[D, F]
D_SU, F_SU = 8192, 32_768  # pop quiz 3 and Quiz 4's bf16[D, F]


def _chip(name):
    from ..hardware import get_chip

    return get_chip(name)


def _q1():
    v5p = _chip("v5p")
    return {
        "a100": _chip("a100").cuda_cores,
        "b200": _chip("b200").cuda_cores,
        "v5p": v5p.cores_per_chip * v5p.vpu_alus_per_lane * 8 * 128,
    }


def _q2():
    h = _chip("h100")
    base = h.cuda_cores * h.base_clock_hz
    return {"base": base, "boost": h.peak_flops("fp32"), "matmul_ratio": h.peak_flops("bf16") / h.peak_flops("fp32")}


def _q4():
    return {f"{n}_{d}": _chip(n).critical_intensity(d, "hbm") for n in ("h100", "b200") for d in ("bf16", "fp8")}


def _q5():
    from ..roofline import matmul_time

    return {"b64": matmul_time(64, 4096, 8192, "b200").lower, "b512": matmul_time(512, 4096, 8192, "b200").lower}


def _q6():
    a = _chip("a100")
    return {"smem": a.sms * a.smem_bytes_per_sm, "registers": a.sms * a.register_bytes_per_sm}


def _q3():
    b = _chip("b200")
    return b.fp32_fma_flops / (2 * b.cuda_cores)


def _q7():
    from ..roofline import elementwise_add_time

    t = elementwise_add_time(2**30, "h100", "fp32")
    return {"intensity": t.intensity, "seconds": t.lower}


def _node(n=8, chip="h100"):
    from ..gpu import GpuCluster

    return GpuCluster(chip, n)


def _superpod(n=1024, chip="h100", **kw):
    from ..gpu import dgx_superpod

    return dgx_superpod(chip, n, **kw)


def _q10():
    return _node().collective_time("all-gather", 2 * D_Q3 * F_Q3, 8, hop_latency=0).total


def _q11():
    pod = _superpod(2048)
    return {"su_to_spine": pod.level_table()[2].child_uplink_bw, "bisection": pod.bisection_bandwidth()}


def _q12():
    return [len(_superpod(n).levels) for n in (1024, 2048, 4096)]


def _q13():
    return _node().collective_time("all-gather", 2 * 1024 * 16_384, 8, hop_latency=0).total


def _q14():
    from ..gpu import ragged_fraction

    dense = _node().collective_time("all-to-all", 2 * 1024 * 16_384, 8, hop_latency=0).total
    return {"dense": dense, "ragged": dense * ragged_fraction(4, 8, exact=False)}


def _q21():
    su = _superpod(256)
    V = 2 * D_SU * F_SU
    return [su.collective_time("all-gather", V / y, 256 // y, span=256, hop_latency=0).total for y in (2, 8, 16, 64)]


def _q20():
    from ..gpu import link_loads

    loads = link_loads(_superpod(256), "all-gather", 1e9, 256, 8)
    into_node0 = sum(ld.nbytes for ld in loads if ld.link[1][0] == "gpu" and ld.link[1][1] < 8)
    from_leaf = sum(ld.nbytes for ld in loads if ld.link[0][0] == "leaf")
    return {"node_ingress": into_node0, "leaf_egress": from_leaf}


def _q17():
    c = _node()
    t = c.collective_time("all-reduce", 4e9, 8, hop_latency=0, sharp=True).total
    return {"seconds": t, "switch_egress_bytes": t * c.node_size * c.chip.nvlink_bw}


def _q22():
    # AllReduce over X = 4 of bf16[D, F_Y] with Y = 2 inside one node, in the switches (SHARP)
    return _node().collective_time("all-reduce", 2 * D_SU * F_SU / 2, 4, 4, sharp=True, hop_latency=0).total


def _q23():
    # Y = 256 (a whole SU) inside, X = 4 SUs outside, SHARP: each SU's uplink carries its 1/256 share once
    V = 2 * D_SU * F_SU / 256
    return _superpod().collective_time("all-reduce", V, 4, 1, span=1024, sharp=True, hop_latency=0).total


def _q18():
    t = _node(16).collective_terms("all-gather", 1e9, 16, 8)
    return {"node": t["node"], "network": t["network"]}


def _q29():
    from ..training import critical_batch_per_gpu

    return {
        "tp_intensity": _chip("b200").critical_intensity("bf16", "nvlink"),
        "dp_across_nodes": critical_batch_per_gpu("b200"),
    }


def _q30():
    import math

    from ..training import optimizer_bytes_per_param
    from ..transformer import get_model

    per_param = 2 + optimizer_bytes_per_param("adam")
    return math.ceil(get_model("llama3-70b").param_count() * per_param / _chip("h100").hbm_bytes)


def _q31():
    from ..training import training_time

    return training_time("llama3-70b", 15e12, "h100", 4096, 0.45) / 86_400


def _q32():
    from ..training import max_tensor_parallelism
    from ..transformer import get_model

    return max_tensor_parallelism("b200", get_model("llama3-70b").d_ff)


def _q33():
    from ..training import critical_batch_per_gpu

    return {
        "per_gpu_batch": 4 * 2**20 / 4096,
        "critical_8_way_pp": critical_batch_per_gpu("h100", model_parallel_nodes=8),
    }


def _q34():
    from ..training import critical_batch_per_gpu

    return {
        "ratio70": (384 * 4096 / 768) / critical_batch_per_gpu("h100", model_parallel_nodes=2),
        "ratio314": (1536 * 4096 / 3072) / critical_batch_per_gpu("h100", model_parallel_nodes=8),
    }


def _q24():
    from ..training import critical_batch_per_gpu

    return {
        "in_node": critical_batch_per_gpu("a100", across_nodes=False),
        "across_nodes": critical_batch_per_gpu("a100"),
    }


def _q26():
    from ..training import critical_batch_per_gpu

    per_gpu = critical_batch_per_gpu("h800", across_nodes=False)
    return {"per_gpu": per_gpu, "batch_2048": 2048 * per_gpu}


def _q25():
    from ..training import critical_batch_per_gpu

    return {
        "llama3_16k": 16_384 * critical_batch_per_gpu("h100"),
        "moe_e128_k4": critical_batch_per_gpu("h100", experts=128, experts_per_token=4),
        "two_nodes": critical_batch_per_gpu("h100", nodes=2),
    }


def _q27():
    from ..training import max_tensor_parallelism

    F = 53_248  # Llama 3 405B
    one = max_tensor_parallelism("h100", F, across_nodes=False)
    two = _chip("h100").node_size + max_tensor_parallelism("h100", F, across_nodes=True)
    return {"one_node": one, "two_nodes": two}


def _q16():
    inside = _node(8, "b200").collective_time("all-to-all", 1e9, 8, hop_latency=0).total
    across = _node(16, "b200").collective_time("all-to-all", 1e9, 16, hop_latency=0).total
    return across / inside


def _q28():
    from ..training import pipeline_comms_time
    from ..transformer import get_model

    m = get_model("llama3-405b")
    return pipeline_comms_time(2**20, m.d_model, _chip("h100").dcn_bw, 16, 16)


def _q35():
    from ..training import critical_batch_per_gpu

    return critical_batch_per_gpu("gb200")


def _q19():
    return _superpod(2048).collective_time("all-gather", 4e9, 2048, 8, hop_latency=0).total


def _q15():
    from ..gpu import ragged_fraction

    return ragged_fraction(8, 64)


_E = [
    (
        "q1",
        "CUDA cores of an A100 and a B200, ALUs of a v5p",
        _q1,
        "cores",
        "SMs x 4 subpartitions x fp32 cores per subpartition (16 on an A100, 32 on a B200); a v5p has 2 "
        "TensorCores x 4 ALUs x (8 x 128) lanes. Answer {'a100': ..., 'b200': ..., 'v5p': ...}.",
    ),
    (
        "q2",
        "H100 vector fp32 FLOP/s at base and boost clocks",
        _q2,
        "FLOP/s",
        "cores x clock, one op per core per cycle (no FMA); matmul_ratio = 990e12 / boost. Answer {'base': ..., "
        "'boost': ..., 'matmul_ratio': ...}.",
    ),
    (
        "q4",
        "peak matmul intensity of H100 and B200, bf16 and fp8",
        _q4,
        "FLOPs/byte",
        "C / W_hbm; fp8 doubles C. Answer {'h100_bf16', 'h100_fp8', 'b200_bf16', 'b200_fp8'}.",
    ),
    (
        "q5",
        "two matmuls on a B200",
        _q5,
        "s",
        "Below ~281 tokens it is bytes/W_hbm (2BD + 2DF + 2BF bytes), above it 2BDF/C. Answer {'b64': ..., "
        "'b512': ...}.",
    ),
    (
        "q6",
        "an A100's SMEM and registers, all SMs together",
        _q6,
        "bytes",
        "108 SMs x 192 kB of SMEM; 108 x 256 KiB of registers. Answer {'smem': ..., 'registers': ...}.",
    ),
    (
        "q3",
        "the B200's clock from its 80 TFLOP/s of fp32",
        _q3,
        "Hz",
        "80e12 / (cores x 2 FLOPs per FMA) with 148 x 4 x 32 cores.",
    ),
    (
        "q7",
        "adding two fp32[2**30] vectors on an H100",
        _q7,
        "FLOPs/byte, s",
        "N FLOPs over 12N bytes; the time is the larger of N / C_vector and 12N / W_hbm. Answer {'intensity': ..., "
        "'seconds': ...}.",
    ),
    (
        "q8",
        "an 8xH100 node's total NVLink bandwidth",
        lambda: _chip("h100").nvlink_node_bw,
        "B/s",
        "min(8 GPUs x 450 GB/s, 4 switches x 64 ports x 25 GB/s).",
    ),
    (
        "q9",
        "the bisection bandwidth of an 8xB200 node",
        lambda: _node(8, "b200").bisection_bandwidth(),
        "B/s",
        "4 GPUs on each side each send 900 GB/s across, both directions counted.",
    ),
    (
        "q10",
        "AllGather of bf16[4096, 65536] in an 8xH100 node",
        _q10,
        "s",
        "V (N - 1) / (N W_nvlink) with V the whole array's bytes.",
    ),
    (
        "q11",
        "the 2048-GPU SuperPod's bandwidth into the spine and across its bisection",
        _q11,
        "B/s",
        "An SU's 32 nodes of 8 NICs into the spine; the pod's GPUs x 50 GB/s across the bisection, both "
        "directions counted. Answer {'su_to_spine', 'bisection'}.",
    ),
    (
        "q12",
        "switch levels above the node for 1024, 2048 and 4096 H100s",
        _q12,
        "levels",
        "Scalable units of 32 nodes; a spine joins up to 8 SUs (its ports run out); beyond, a core level. A list.",
    ),
    ("q13", "AllGather of bf16[1024, 16384] in an 8xH100 node", _q13, "s", "2 B F (N - 1) / (N x 450e9)."),
    (
        "q14",
        "AllToAll in a node, dense and with 4 of 8 shards used",
        _q14,
        "s",
        "Dense V (N - 1) / (N^2 W); ragged multiplies by about k / N. Answer {'dense': ..., 'ragged': ...}.",
    ),
    (
        "q21",
        "AllGather_X(bf16[D_X, F_Y]) over one SU as Y grows",
        _q21,
        "s",
        "Y <= 8 stays inside a node: the leaf term V (1 - 8/256)/400e9 does not shrink; past 8 the array per "
        "group shrinks by Y while each GPU keeps its own NIC. A list for Y = 2, 8, 16, 64 (D = 8192, F = 32768).",
    ),
    (
        "q20",
        "bytes in and out during an AllGather over one SU",
        _q20,
        "bytes",
        "Per node, its GPUs receive N (B - B/MN); the leaf sends each node B (M - 1)/M. Count it on the explicit "
        "graph: {'node_ingress': ..., 'leaf_egress': ...} for B = 1 GB, M = 32, N = 8.",
    ),
    (
        "q17",
        "an in-switch (SHARP) AllReduce in one node",
        _q17,
        "s, bytes",
        "B (N-1)/N in, B out, B in, B (N-1)/N out: B / W in time, N B through the switch. Answer {'seconds', "
        "'switch_egress_bytes'} for B = 4 GB.",
    ),
    (
        "q22",
        "SHARP AllReduce of bf16[D, F_Y] with Y = 2 in a node",
        _q22,
        "s",
        "Each X group reduces 2DF / Y bytes at the GPU's egress: 2 D F / (Y W_nvlink).",
    ),
    (
        "q23",
        "SHARP AllReduce across 4 SUs with Y = 256 inside",
        _q23,
        "s",
        "Each of the 256 GPUs of an SU sends its 1/256 share up its own NIC once: V / 50 GB/s.",
    ),
    (
        "q18",
        "AllGather over exactly 2 nodes: which level binds?",
        _q18,
        "s",
        "Node: B x 7 / (8 x 450e9); network: B (2 - 1) / (2 x 400e9). Answer {'node': ..., 'network': ...} for "
        "B = 1 GB.",
    ),
    (
        "q29",
        "B200 rooflines",
        _q29,
        "tokens",
        "TP in a node: C / W_nvlink; DP across nodes: C / W_node with W_node still 400 GB/s. Answer "
        "{'tp_intensity', 'dp_across_nodes'}.",
    ),
    (
        "q30",
        "the fewest H100s that hold Llama 3 70B and Adam",
        _q30,
        "GPUs",
        "2 bytes of bf16 weight + 8 bytes of fp32 moments per parameter, over 80 GB.",
    ),
    (
        "q31",
        "days to train Llama 3 70B on 15T tokens with 4096 H100s at 45% MFU",
        _q31,
        "days",
        "6 N T / (chips x 990e12 x 0.45).",
    ),
    (
        "q32",
        "the most tensor parallelism Llama 3 70B affords in a B200 node",
        _q32,
        "GPUs",
        "Y < F W_nvlink / C with F = 28,672, W_nvlink = 900 GB/s and C = 2.25 PFLOP/s.",
    ),
    (
        "q33",
        "4M tokens on 4096 H100s: the batch per GPU and the bar with 8-way PP",
        _q33,
        "tokens",
        "4M / 4096; with model parallelism over 8 nodes each data-parallel shard crosses on 8x the NICs. Answer "
        "{'per_gpu_batch', 'critical_8_way_pp'}.",
    ),
    (
        "q34",
        "Megatron-LM's batches per GPU against their thresholds",
        _q34,
        "x",
        "Sequences x 4096 / GPUs; model parallelism over 2 and 8 nodes divides C / W_node by 2 and 8; the "
        "ratio is the batch per GPU over that threshold. Answer {'ratio70', 'ratio314'}.",
    ),
    (
        "q24",
        "the A100's data-parallel critical batches",
        _q24,
        "tokens/GPU",
        "C / 300e9 inside a node (12 NVLinks of 25 GB/s), C / 200e9 across nodes (8 NICs of 25 GB/s). Answer "
        "{'in_node': ..., 'across_nodes': ...}.",
    ),
    (
        "q26",
        "DeepSeek-V3's H800s: tokens per GPU and per batch",
        _q26,
        "tokens",
        "C / 200e9 per GPU (NVLink cut to 400 GB/s counting both directions, 200 GB/s each way), times 2048 "
        "GPUs. Answer {'per_gpu', 'batch_2048'}.",
    ),
    (
        "q25",
        "three data-parallel thresholds from the text",
        _q25,
        "tokens",
        "16,384 H100s x 2475; a 128-expert top-4 MoE multiplies by E/k = 32; 2 nodes halve it by (X-1)/X. "
        "Answer {'llama3_16k', 'moe_e128_k4', 'two_nodes'}.",
    ),
    (
        "q27",
        "tensor parallelism of Llama 3 405B's MLP in one node and over two",
        _q27,
        "GPUs",
        "F / 2200 in a node; over two nodes F > 2475 (Y - 8), with F = 53,248. Answer {'one_node', 'two_nodes'}.",
    ),
    (
        "q16",
        "how much slower a B200 AllToAll gets across 2 nodes",
        _q16,
        "x",
        "B (N-1)/(N^2 W_nvlink) in a node (900 GB/s) vs B (M-1)/(M^2 W_node) over M = 2 nodes (exactly: "
        "1 - 8/16 of each member's data leaves through its 50 GB/s NIC).",
    ),
    (
        "q28",
        "the pipeline's sends for Llama 3 405B, 1M tokens, 16 stages and microbatches",
        _q28,
        "s",
        "2 B D / (W N_mb) x (N_mb + N_stages - 2) with W one 50 GB/s NIC.",
    ),
    (
        "q35",
        "a GB200 NVL72's cross-node critical batch",
        _q35,
        "tokens/GPU",
        "C / W_node with W_node = 3.6 TB/s for 72 GPUs.",
    ),
    (
        "q19",
        "a 4 GB AllGather over the 2048-GPU SuperPod, counted exactly",
        _q19,
        "s",
        "A node receives from all 255 others through its 400 GB/s, not only from its own SU: V x 255 / (256 x 400e9).",
    ),
    (
        "q15",
        "a ragged top-8 AllToAll over 64 shards",
        _q15,
        "fraction",
        "The expected share of shards a token reaches: 1 - (63/64)^8.",
    ),
]

for _id, _title, _solve, _unit, _hint in sorted(_E, key=lambda e: int(e[0][1:])):
    register(Exercise(id=f"ch11.{_id}", title=_title, solve=_solve, unit=_unit, hint=_hint, rtol=0.03))
