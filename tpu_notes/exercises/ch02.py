"""Exercises of Chapter 2 (ids ch02.*), registered with their reference solutions.

Every worked problem of the scaling book's TPU chapter (restated in our own words, with this book's hardware
table), its appendix quizzes, and a few of our own. References are computed with tpu_notes, never typed in.
Where a book problem uses a figure other than the book's own spec table (v4p HBM 1.23e12 in its Q1, the typical
PCIe 1.6e10 for a v6e in its Q3, 1.5e10 in earlier versions; its Q4 now uses the table's v5e HBM 8.2e11 with rounded
counts), the reference uses ``tpu_notes.hardware`` and the chapter says so. The
"pulling it all together" problem (q15, q16) halves the book's int8[131072, 131072] matrix, which would not fit in
the HBM of the one v5e chip that must hold it.
"""

from __future__ import annotations

from .. import roofline, systolic, topology
from ..hardware import get_chip
from ..units import dtype_bytes
from . import Exercise, register

# ---- the chip -----------------------------------------------------------------------------------------------


#: Exercise 1: a v5e whose four MXUs per core were 256 x 256 (v6e's edge) instead of 128 x 128, same clock.
Q1_CHIP, Q1_MXU = "v5e", 256


def _q1():
    c = get_chip(Q1_CHIP)
    per_cycle = systolic.mxu_flops_per_cycle(Q1_MXU)
    return [per_cycle, c.cores_per_chip * c.mxus_per_core * per_cycle * c.clock_hz]


register(
    Exercise(
        id="ch02.q1",
        title="peak of a v5e with 256 × 256 MXUs",
        solve=_q1,
        unit="FLOPs/cycle, FLOP/s",
        hint="A 256 × 256 MXU does one multiply-add per cell per cycle: 2·256² FLOPs per cycle; a v5e TensorCore "
        "has 4 MXUs at 1.5 GHz and the chip has one core.",
    )
)


def _q2():
    per_core = systolic.vpu_flops("v5p", sublanes=8, lanes=128, alus_per_lane=4)
    return per_core * get_chip("v5p").cores_per_chip


register(
    Exercise(
        id="ch02.q2",
        title="VPU FLOP/s of a whole v5p chip",
        solve=_q2,
        unit="FLOP/s",
        hint="Each core's VPU is an 8 × 128 grid of lanes with 4 ALUs each; every ALU does one op per cycle at "
        "1.75 GHz, and a v5p chip has two TensorCores.",
    )
)


#: Exercise 3: a 256 x 256 array (v6e's MXU edge); the chapter simulates the 128 x 128 one.
Q3_ARRAY = 256


def _q3():
    s = Q3_ARRAY
    steady = systolic.predicted_cycles(s + 8, s, s, s) - systolic.predicted_cycles(s, s, s, s)
    isolated = systolic.predicted_cycles(8, s, s, s)
    return [steady, isolated]


register(
    Exercise(
        id="ch02.q3",
        title="cycles of one 256 × 256 MXU step",
        solve=_q3,
        unit="cycles",
        rtol=0.0,  # cycle counts are exact
        hint="In steady state one row of 256 inputs enters per cycle. Alone, the step also pays S cycles of weight "
        "loading and 2S − 2 cycles for the skewed wavefront to cross and leave the array: S + M + 2S − 2.",
    )
)

# ---- matmuls on one chip ------------------------------------------------------------------------------------
Q4_D, Q4_F = 4096, 16384
Q4_BATCHES = (1, 16, 256, 4096)


def _q4():
    return [roofline.matmul_time(B, Q4_D, Q4_F, "v5e", dtype="int8").lower for B in Q4_BATCHES]


register(
    Exercise(
        id="ch02.q4",
        title="int8 matmul latency on v5e",
        solve=_q4,
        unit="s",
        hint="T = max(2·B·D·F / int8 OP/s, (D·F + B·D + B·F) bytes / HBM B/s): weights dominate at small B, "
        "FLOPs at large B.",
    )
)


def _crossover(bandwidth: str) -> float:
    """Batch at which the int8 [B, 4096] @ [4096, 16384] matmul's math time equals its load time."""
    return roofline.crossover_batch(Q4_D, Q4_F, "v5e", "int8", bandwidth)


register(
    Exercise(
        id="ch02.q5",
        title="compute-bound batch of the int8 matmul (HBM)",
        solve=lambda: _crossover("hbm"),
        unit="tokens",
        hint="Set 2·B·D·F / C equal to (D·F + B·D + B·F) / W_hbm with 1-byte int8 elements and solve for B.",
    )
)

register(
    Exercise(
        id="ch02.q6",
        title="compute-bound batch of the int8 matmul (VMEM)",
        solve=lambda: _crossover("vmem"),
        unit="tokens",
        hint="Same equation with VMEM's bandwidth (about 22× HBM's) in place of W_hbm.",
    )
)


#: Exercise 7: a square weight matrix of this size (the chapter's padding table stops at 384).
Q7_DIM = 520


def _q7():
    return [systolic.padding_efficiency(Q7_DIM, Q7_DIM, get_chip(n).mxu_size) for n in ("v5e", "v6e")]


register(
    Exercise(
        id="ch02.q7",
        title="useful MXU work after padding (ours)",
        solve=_q7,
        unit="fraction",
        hint="The MXU multiplies 128-wide (v5e) or 256-wide (v6e) tiles: 520 pads to 640 or 768 in both dimensions.",
    )
)

# ---- the host -----------------------------------------------------------------------------------------------


def _q8():
    return get_chip("v6e").critical_intensity("bf16", bandwidth="pcie")


register(
    Exercise(
        id="ch02.q8",
        title="batch to stay compute-bound over PCIe (v6e)",
        solve=_q8,
        unit="tokens",
        hint="With F = 4D and B ≪ D: FLOPs 8·B·D², bytes ≈ 2·D·F = 8·D², so B > C / W_pcie.",
    )
)

# ---- ICI ----------------------------------------------------------------------------------------------------
Q9_SLICES = (("v5e", (16, 16)), ("v5e", (8, 16)), ("v5p", (4, 4, 4)), ("v5p", (2, 2, 4)))


def _q9():
    return [topology.Slice(c, s).diameter for c, s in Q9_SLICES]


register(
    Exercise(
        id="ch02.q9",
        title="diameters with and without wraparound (ours)",
        solve=_q9,
        unit="hops",
        rtol=0.0,  # exact
        hint="Per axis: n // 2 if it wraps, n − 1 if not. v5e wraps only full 16-chip axes; v5p wraps every axis of a "
        "slice made of whole 4×4×4 cubes and no axis of a smaller slice.",
    )
)


def _q10():
    sl = topology.Slice("v5e", (4, 4))
    t = sl.transfer_time(8 * 128 * 8192 * dtype_bytes("bf16"), (0, 0), (3, 3))
    return [t.latency_time, t.total]


register(
    Exercise(
        id="ch02.q10",
        title="point-to-point ICI transfer on a v5e 4×4",
        solve=_q10,
        unit="s",
        hint="No wraparound on a 4×4, so 3 + 3 hops at 1 µs; the data can leave over 2 links at the one-way "
        "bandwidth: T = bytes / (2 · W_oneway) + hops · 1 µs.",
    )
)

# ---- slices and pods ----------------------------------------------------------------------------------------


def _q11():
    sl = topology.Slice("v4p", (2, 4, 4))  # 32 chips
    return 200e9 * dtype_bytes("bf16") / sl.total_hbm_bw


register(
    Exercise(
        id="ch02.q11",
        title="latency floor for sampling a 200B model on 32 v4p",
        solve=_q11,
        unit="s",
        hint="Every decode step reads every parameter once: param bytes / (chips × HBM bandwidth).",
    )
)


def _pod_totals(chip: str) -> dict:
    p = topology.pod(chip)
    return {"hosts": p.n_hosts, "cores": p.n_cores, "flops": p.total_flops("bf16"), "hbm_bytes": p.total_hbm_bytes}


register(
    Exercise(
        id="ch02.q12",
        title="a full TPU7x pod",
        solve=lambda: _pod_totals("tpu7x"),
        unit="{hosts, cores, FLOP/s, bytes}",
        hint="4 × 4 × 576 chips as published, 4 chips (a 2 × 2 × 1 host shape) per host, two TensorCores per chip.",
    )
)

register(
    Exercise(
        id="ch02.q13",
        title="a full v5p pod",
        solve=lambda: _pod_totals("v5p"),
        unit="{hosts, cores, FLOP/s, bytes}",
        hint="16 × 20 × 28 chips, 4 (2 × 2 × 1) per host, two TensorCores per chip.",
    )
)


#: Exercise 14: the chip whose bandwidth ladder the chapter draws but does not print.
Q14_CHIP = "v4p"


def _q14():
    c = get_chip(Q14_CHIP)
    return [c.hbm_bw / c.dcn_bw, c.ici_bw_oneway / c.dcn_bw]


register(
    Exercise(
        id="ch02.q14",
        title="how much slower each link is (ours)",
        solve=_q14,
        unit="ratios",
        hint="Divide the v4p figures: HBM by the chip's DCN share, and one ICI link (one way) by the same share.",
    )
)

# ---- pulling it together (the book's hard problem with A halved to fit one chip's HBM; plan 2 is ours) -------
Q15_N = 64 * 1024  # A is int8[Q15_N, Q15_N]
Q15_BATCH = 8  # x is bf16[Q15_BATCH, Q15_N]
Q15_SLICE = ("v5e", (4, 4))


def _q15() -> dict:
    sl = topology.Slice(*Q15_SLICE)
    c = sl.chip
    V = Q15_N * Q15_N * dtype_bytes("int8")
    pcie = topology.host_transfer_time(V, c, n_chips=sl.n_chips).total  # every chip loads its shard
    ici = sl.transfer_time(V * (sl.n_chips - 1) / sl.n_chips, (0, 0), (3, 3)).total  # 2 ports into chip (0, 0)
    hbm = V / c.hbm_bw
    flops = roofline.matmul_flops(Q15_BATCH, Q15_N, Q15_N) / c.peak_flops("bf16")
    parts = {"pcie": pcie, "ici": ici, "hbm": hbm, "flops": flops}
    return {**parts, "total": max(parts.values())}


register(
    Exercise(
        id="ch02.q15",
        title="gather then multiply (the book's problem, halved)",
        solve=_q15,
        unit="s",
        hint="Four stages that pipeline: each chip's PCIe load of its 1/16, the ICI trip of the other 15/16 into chip "
        "(0, 0) over 2 links, one HBM read of A on chip (0, 0), and 2·8·N² FLOPs. The slowest stage sets the total.",
    )
)


def _q16() -> dict:
    sl = topology.Slice(*Q15_SLICE)
    c = sl.chip
    V = Q15_N * Q15_N * dtype_bytes("int8")
    n = sl.n_chips
    pcie = topology.host_transfer_time(V, c, n_chips=n).total
    hbm = V / n / c.hbm_bw
    flops = roofline.matmul_flops(Q15_BATCH, Q15_N // n, Q15_N) / c.peak_flops("bf16")
    out_bytes = Q15_BATCH * Q15_N * dtype_bytes("bf16")  # each chip's partial sum of the output
    allreduce = sl.collective_time("all_reduce", out_bytes).total
    stages = {"pcie": pcie, "hbm": hbm, "flops": flops, "allreduce": allreduce}
    # the PCIe load is the stage both plans share (Exercise 2.15 prints it); ask for the other three and the speedup
    return {k: stages[k] for k in ("hbm", "flops", "allreduce")} | {"speedup": _q15()["total"] / max(stages.values())}


register(
    Exercise(
        id="ch02.q16",
        title="multiply where the shards live (ours)",
        solve=_q16,
        unit="s, s, s, ratio",
        hint="Shard A's contraction dimension: each chip loads its own 1/16 over PCIe, reads it from HBM and "
        "multiplies it, then the 16 partial bf16[8, N] outputs are AllReduced over both axes of the 4×4 "
        "(no wraparound: Slice.collective_time). The slowest stage sets plan 2's total; the speedup is "
        "plan 1's total over plan 2's.",
    )
)
