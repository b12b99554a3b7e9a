"""Exercises of Chapter 3 (ids ch03.*), registered with their reference solutions.

Numbered in the order the chapter meets them; each title names the scaling book's question it reworks ("book
pop quiz 1", "book Q5", ...) or says "our own". Every reference answer is computed with tpu_notes (sharding,
collectives, roofline, topology, hardware); the statements are in the notebook. Times are seconds, sizes bytes.
"""

from __future__ import annotations

from .. import collectives as c
from .. import roofline, sharding
from ..hardware import get_chip
from ..topology import Slice
from . import Exercise, register

# ---- 3.1 (book pop quiz 1): memory of an int8 array sharded over two of three mesh axes ------------------------
_POP1 = dict(text="A[I_XY, J]", sizes={"I": 128, "J": 2048}, mesh={"X": 4, "Y": 8, "Z": 4})


def _q1():
    a = sharding.parse(_POP1["text"])
    return [
        a.bytes_per_device(_POP1["sizes"], _POP1["mesh"], "int8"),
        a.total_bytes(_POP1["sizes"], _POP1["mesh"], "int8"),
    ]


register(
    Exercise(
        id="ch03.q1",
        title="int8 A[I_XY, J] on 128 devices (book pop quiz 1)",
        solve=_q1,
        unit="B",
        hint="X and Y split I 32 ways; Z replicates, so the mesh holds Z = 4 copies of the 128·2048 "
        "one-byte array. Answer [bytes per device, bytes over all devices].",
    )
)


# ---- 3.2 and 3.3 (book pop quiz 2): an AllGather on a v5e 8x4, big and small ------------------------------------
_POP2 = dict(mesh={"X": 8, "Y": 4})


def _v5e_gather(E, F, wraparound):
    v = sharding.parse("A[E, F]").bytes_per_device({"E": E, "F": F}, _POP2["mesh"])  # gathered bf16[E, F]
    if wraparound:  # as if the 4-long axis closed into a ring
        return c.all_gather_time(v, 4, get_chip("v5e").ici_bw_bidi).total
    return Slice("v5e", (8, 4)).collective_time("all_gather", v, "y").total  # the real slice: no wraparound


#: Exercise 2: the book's bf16[2048, 8192] array made 1.5 times wider.
Q2_F = 12288


def _q2():
    return [_v5e_gather(2048, Q2_F, True), _v5e_gather(2048, Q2_F, False)]


register(
    Exercise(
        id="ch03.q2",
        title="v5e AllGather and wraparound (pop quiz 2a)",
        solve=_q2,
        unit="s",
        hint="with a ring V / W_ici; without, the end chip receives N−1 shards of V/N through its one "
        "link at the one-way bandwidth",
    )
)


def _q3():
    return _v5e_gather(256, 256, False)


register(
    Exercise(
        id="ch03.q3",
        title="a small AllGather on a v5e 8x4 (book pop quiz 2b)",
        solve=_q3,
        unit="s",
        hint="3 hops of a 32 kB shard at 45 GB/s each way against 3 hops of about 1 µs: which is larger?",
    )
)


# ---- 3.4 (book Q1) ----------------------------------------------------------------------------------------------
def _q4():
    return float(sharding.parse("A[I_X, J, K]").replication({"X": 4, "Y": 8, "Z": 2}))


register(
    Exercise(
        id="ch03.q4",
        title="replication of A[I_X, J, K] (book Q1)",
        solve=_q4,
        unit="copies",
        hint="count the devices along the mesh axes that the array does not use",
    )
)


# ---- 3.5 (book Q2) ----------------------------------------------------------------------------------------------
_Q5 = dict(sizes={"B": 1024, "D": 4096}, mesh={"X": 4, "Y": 4, "Z": 4})


def _q5():
    sizes, mesh = _Q5["sizes"], _Q5["mesh"]
    sl = Slice("v4p", (4, 4, 4))  # every axis of 4 wraps around on a v4p cube

    def nbytes(text):  # V: the whole array over the collective's group, bytes per device
        return sharding.parse(text).bytes_per_device(sizes, mesh)

    ag_x = sl.collective_time("all_gather", nbytes("A[B, D_Y]"), "x").total  # [B_X, D_Y] -> [B, D_Y]
    ag_y = sl.collective_time("all_gather", nbytes("A[B_X, D]"), "y").total  # [B_X, D_Y] -> [B_X, D]
    ag_xy = sl.collective_time("all_gather", nbytes("A[B, D]"), ("x", "y")).total
    ar_z = sl.collective_time("all_reduce", nbytes("A[B_X, D_Y]"), "z").total  # [B_X, D_Y]{U_Z} -> [B_X, D_Y]
    return [ag_x, ag_y, ag_xy, ar_z]


register(
    Exercise(
        id="ch03.q5",
        title="AllGather and AllReduce on a v4p 4x4x4 (book Q2)",
        solve=_q5,
        unit="s",
        hint="V is the array each device holds after the gather; with wraparound a ring moves it in "
        "V / W_ici whatever its size; two axes double the links; an AllReduce costs two passes",
    )
)


# ---- 3.6 (book Q3) ----------------------------------------------------------------------------------------------
def _q6():
    sl = Slice("v4p", (4, 4, 4))
    mesh = {"X": 4, "Y": 4, "Z": 4}
    tiny = sharding.parse("A[B]").bytes_per_device({"B": 128}, mesh)  # bf16[128], gathered over X
    small = sharding.parse("A[I, J]").bytes_per_device({"I": 128, "J": 128}, mesh)  # A[I_XYZ, J] -> A[I, J]
    return [
        sl.collective_time("all_gather", tiny, "x").total,
        sl.collective_time("all_gather", small, ("x", "y", "z")).total,
    ]


register(
    Exercise(
        id="ch03.q6",
        title="latency-bound AllGathers (book Q3)",
        solve=_q6,
        unit="s",
        hint="each axis of 4 with wraparound needs ⌈3/2⌉ = 2 hops of about 1 µs; the bytes are negligible",
    )
)


# ---- 3.7 (book Q4) ----------------------------------------------------------------------------------------------
_Q7 = dict(sizes={"B": 512, "D": 8192, "F": 32768}, mesh={"X": 4})


def _q7():
    chip = get_chip("v5p")
    sizes, mesh = _Q7["sizes"], _Q7["mesh"]
    w = sharding.parse("W[D_X, F]")
    # strategy 1: AllGather W, then the whole matmul on every device
    v_w = sharding.parse("W[D, F]").bytes_per_device(sizes, mesh)
    gather = (
        c.all_gather_time(v_w, mesh["X"], chip.ici_bw_bidi).total
        + roofline.matmul_time(sizes["B"], sizes["D"], sizes["F"], chip).lower
    )
    # strategy 2: slice In along D (free), multiply the local quarter, AllReduce the partial sums of Out
    plan = sharding.matmul_plan("In[B, D]", w, "Out[B, F]", mesh=mesh, sizes=sizes)
    assert [s.kind for s in plan.collectives] == ["all-reduce"]
    return {"gather": gather, "reduce": plan.total_time(chip)}


register(
    Exercise(
        id="ch03.q7",
        title="two strategies for In[B, D] · W[D_X, F] (book Q4)",
        solve=_q7,
        unit="s",
        hint="strategy 1 moves the whole weight (D·F·2 bytes) and repeats the FLOPs on every device; "
        "strategy 2 moves the output twice (B·F·2 bytes, AllReduce) and splits the FLOPs four ways",
    )
)


# ---- 3.8 (book Q5): the fastest layout for a replicated result on a v5p 4x4x4 ------------------------------------
_Q8 = dict(sizes={"I": 1024, "J": 8192, "K": 8192}, mesh={"X": 4, "Y": 4, "Z": 4})
#: The four layouts the book lists for Q5, in our notation: operands, then the replicated output.
Q8_LAYOUTS = {
    "rows": ("A[I_XYZ, J]", "B[J, K]"),
    "cols": ("A[I, J]", "B[J, K_XYZ]"),
    "contracting": ("A[I, J_XYZ]", "B[J_XYZ, K]"),
    "replicated": ("A[I, J]", "B[J, K]"),
}


def q8_plans():
    """The plan of each Q8 layout (used by the notebook to print the steps)."""
    return {k: sharding.matmul_plan(a, b, "C[I, K]", **_Q8) for k, (a, b) in Q8_LAYOUTS.items()}


def _q8():
    sl = Slice("v5p", (4, 4, 4))
    return {k: p.total_time(sl) for k, p in q8_plans().items()}


register(
    Exercise(
        id="ch03.q8",
        title="the lowest-latency layout on a v5p 4x4x4 (book Q5)",
        solve=_q8,
        unit="s",
        hint="the split layouts each do 1/64 of the FLOPs; 'rows' and 'cols' then AllGather C over all "
        "three axes, 'contracting' AllReduces it (twice the bytes), 'replicated' moves nothing but "
        "does all the FLOPs; each local matmul is at its HBM roofline (who reads the whole B?)",
    )
)


# ---- 3.9 (book Q6): three layouts on a v5e 4x4 -------------------------------------------------------------------
_Q9 = dict(sizes={"I": 32768, "J": 8192, "K": 32768}, mesh={"X": 4, "Y": 4})
#: The book's three layouts: (lhs, rhs, out).
Q9_LAYOUTS = {
    "a": ("A[I_X, J_Y]", "B[J_Y, K]", "C[I_X, K]"),
    "b": ("A[I_X, J]", "B[J_X, K_Y]", "C[I_X, K_Y]"),
    "c": ("A[I_X, J]", "B[J, K_Y]", "C[I_X, K_Y]"),
}


def q9_plans():
    """The plan of each Q9 layout (used by the notebook to print the steps)."""
    return {k: sharding.matmul_plan(*layout, **_Q9) for k, layout in Q9_LAYOUTS.items()}


def _q9():
    sl = Slice("v5e", (4, 4))  # no wraparound: a v5e axis wraps only at 16
    out = {}
    for k, plan in q9_plans().items():
        times = plan.times(sl)
        out[f"{k}_comms"] = sum(t.time for t in times if t.step.is_collective)
        out[f"{k}_compute"] = sum(t.time for t in times if t.step.kind == "matmul")
    return out


register(
    Exercise(
        id="ch03.q9",
        title="three layouts on a v5e 4x4 (book Q6)",
        solve=_q9,
        unit="s",
        hint="(a) partial sums over Y: AllReduce C[I_X, K] over a 4-chip line; (b) B's contracting J is "
        "split over X, which A's I already uses: AllGather B over X; (c) nothing moves. Every "
        "layout splits the FLOPs 16 ways. Keys a_comms, a_compute, b_comms, ...",
    )
)


# ---- 3.10 (book Q7) ---------------------------------------------------------------------------------------------
_Q10 = dict(sizes={"B": 128, "D": 8192, "F": 32768}, mesh={"X": 2, "Y": 2})


def _comms_and_compute(plans, system) -> dict:
    """Seconds of the plans' collectives and of their matmuls on ``system``: ``{"comms", "compute"}``."""
    times = [t for p in plans for t in p.times(system)]
    return {
        "comms": sum(t.time for t in times if t.step.is_collective),
        "compute": sum(t.time for t in times if t.step.kind == "matmul"),
    }


def _q10_plans():
    up = sharding.matmul_plan("x[B, D]", "Win[D, F_XY]", "h[B, F_XY]", **_Q10)
    down = sharding.matmul_plan("h[B, F_XY]", "Wout[F_XY, D]", "out[B, D]", **_Q10)
    return up, down


def _q10():
    sl = Slice("v5e", (2, 2))
    weights = sum(
        sharding.parse(w).bytes_per_device(_Q10["sizes"], _Q10["mesh"]) for w in ("Win[D, F_XY]", "Wout[F_XY, D]")
    )
    return {"weight_bytes": weights, **_comms_and_compute(_q10_plans(), sl)}


register(
    Exercise(
        id="ch03.q10",
        title="a Transformer block on a v5e 2x2 (book Q7)",
        solve=_q10,
        unit="B, s",
        hint="the two weights are 2·D·F·2 bytes: only a 4-way split fits; split F over XY so the first "
        "matmul needs nothing and the second leaves partial sums to AllReduce (B·D·2 bytes)",
    )
)


# ---- 3.11 (book Q9): gather the operand, or reduce-scatter the output? -------------------------------------------
_Q11 = dict(sizes={"N": 1024, "M": 12288, "K": 3072}, mesh={"X": 8})


def _q11():
    sizes, mesh = _Q11["sizes"], _Q11["mesh"]
    gathered = sharding.parse("A[N, M]").bytes_per_device(sizes, mesh)  # V of AllGather_X(A[N, M_X])
    plan = sharding.matmul_plan("A[N, M_X]", "B[M_X, K]", "C[N_X, K]", mesh=mesh, sizes=sizes)
    (rs,) = plan.collectives  # ReduceScatter of C[N, K]{U_X}
    return [gathered, rs.nbytes, gathered / rs.nbytes]


register(
    Exercise(
        id="ch03.q11",
        title="AllGather A or ReduceScatter C (book Q9)",
        solve=_q11,
        unit="B, B, ratio",
        hint="both collectives cost V / W_ici with V the whole array they act on: A[N, M] for the "
        "gather, the unreduced C[N, K] for the ReduceScatter. Answer [V gather, V reduce-scatter, "
        "their ratio].",
    )
)


# ---- 3.12 (book Q10): where the AllToAll's factor of 4 comes from ------------------------------------------------
_Q12 = dict(n=8, nbytes=5632 * 4096 * 2)


def _q12():
    n, v = _Q12["n"], _Q12["nbytes"]
    out = {}
    for way, bidi in (("one_way", False), ("two_way", True)):
        out[f"ag_{way}"] = c.ring_link_bytes("all-gather", n, v, bidirectional=bidi)
        out[f"a2a_{way}"] = c.ring_link_bytes("all-to-all", n, v, bidirectional=bidi)
    # the ratios (1/2 one way, 1/4 both ways) are the section's own result, printed above: the answer is the loads
    return out


register(
    Exercise(
        id="ch03.q12",
        title="the AllToAll's factor of 4 (book Q10)",
        solve=_q12,
        unit="B per link",
        hint="one-way: each shard of V/N crosses N−1 links; an AllToAll block to distance d crosses d, "
        "and Σd = N(N−1)/2. Two ways: shards split their N−1 links between the directions, blocks "
        "go at most N/2 the short way (Σ ≈ N²/8). Divide each total by the N links.",
    )
)


# ---- our own -----------------------------------------------------------------------------------------------------
def _q13():
    w = get_chip("v5p").ici_bw_bidi
    v = 96e6
    ring = c.all_to_all_time(v, 4, w).total
    return [
        ring,
        c.all_to_all_time(v, 4, w, wraparound=False).total,
        c.all_to_all_time(v, (4, 4, 4), w).total,
        c.all_gather_time(v, 4, w).bandwidth_time / c.all_to_all_time(v, 4, w).bandwidth_time,
    ]


register(
    Exercise(
        id="ch03.q13",
        title="AllToAll costs (our own)",
        solve=_q13,
        unit="s, s, s, ratio",
        hint="on a ring V/4 bytes cross a cut of two links each way; a line is cut at one link; "
        "on a torus V·max(axis)/(4·N·W); mind the latency of 2 hops per axis",
    )
)


def _q14():
    plan = sharding.matmul_plan(
        "A[I, J_X]", "B[J_X, K]", "C[I_X, K]", mesh={"X": 8}, sizes={"I": 1024, "J": 4096, "K": 2560}
    )
    (rs,) = plan.collectives
    return [rs.bytes_in, rs.bytes_out]


register(
    Exercise(
        id="ch03.q14",
        title="bytes of a ReduceScatter (our own)",
        solve=_q14,
        unit="B",
        hint="each device starts with the whole unreduced C (I·K·2 bytes) and keeps an eighth",
    )
)


def _q15():
    return c.latency_bound_bytes(32, get_chip("v5e").ici_bw_bidi)


register(
    Exercise(
        id="ch03.q15",
        title="smallest bandwidth-bound AllGather (our own)",
        solve=_q15,
        unit="B",
        hint="a hop is latency-bound while its V/N bytes take less than 1 µs at the one-way bandwidth",
    )
)


def _q16():
    sizes, mesh = {"D": 8192, "F": 32768}, {"X": 8}
    v = sharding.parse("W[D, F]").bytes_per_device(sizes, mesh)
    t = c.all_gather_time(v, 8, get_chip("v5p").ici_bw_bidi).total
    return [t, sharding.parse("W[D_X, F]").bytes_per_device(sizes, mesh)]


register(
    Exercise(
        id="ch03.q16",
        title="an FSDP weight gather (our own)",
        solve=_q16,
        unit="s, B",
        hint="the gathered weight is D·F·2 bytes whatever the axis size; each device stores 1/8 of it",
    )
)


_Q17 = dict(sizes={"B": 8192, "D": 8192, "F": 32768}, mesh={"Y": 8})


def _q17():
    up = sharding.matmul_plan("In[B, D_Y]", "Win[D, F_Y]", "H[B, F_Y]", **_Q17)
    down = sharding.matmul_plan("H[B, F_Y]", "Wout[F_Y, D]", "Out[B, D_Y]", **_Q17)
    return _comms_and_compute((up, down), "v5p")


register(
    Exercise(
        id="ch03.q17",
        title="a Megatron MLP layer on 8 v5p chips (our own)",
        solve=_q17,
        unit="s",
        hint="an AllGather of In[B, D_Y] before the first matmul and a ReduceScatter of Out after the "
        "second, each of B·D·2 bytes; the matmuls are 4·B·D·F FLOPs split 8 ways",
    )
)
