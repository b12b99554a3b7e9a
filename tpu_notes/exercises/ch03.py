"""Exercises of Chapter 3 (ids ch03.*), registered with their reference solutions.

Every reference answer is computed with tpu_notes (sharding, collectives, roofline, hardware); the statements are
in the notebook. Times are seconds, sizes bytes.
"""
from __future__ import annotations

from . import Exercise, register


def _q1():
    from tpu_notes import sharding

    return float(sharding.parse("A[I_X, J, K]").replication({"X": 4, "Y": 8, "Z": 2}))


register(Exercise(id="ch03.q1", title="replication of A[I_X, J, K]", solve=_q1, unit="copies",
                  hint="count the devices along the mesh axes that the array does not use"))


_Q2 = dict(sizes={"B": 1024, "D": 4096}, mesh={"X": 4, "Y": 4, "Z": 4})


def _q2():
    from tpu_notes import sharding
    from tpu_notes.topology import Slice

    sizes, mesh = _Q2["sizes"], _Q2["mesh"]
    sl = Slice("v4p", (4, 4, 4))      # every axis of 4 wraps around on a v4p cube

    def nbytes(text):                 # V: the whole array over the collective's group, bytes per device
        return sharding.parse(text).bytes_per_device(sizes, mesh)

    ag_x = sl.collective_time("all_gather", nbytes("A[B, D_Y]"), "x").total     # [B_X, D_Y] -> [B, D_Y]
    ag_y = sl.collective_time("all_gather", nbytes("A[B_X, D]"), "y").total     # [B_X, D_Y] -> [B_X, D]
    ag_xy = sl.collective_time("all_gather", nbytes("A[B, D]"), ("x", "y")).total
    ar_z = sl.collective_time("all_reduce", nbytes("A[B_X, D_Y]"), "z").total   # [B_X, D_Y]{U_Z} -> [B_X, D_Y]
    return [ag_x, ag_y, ag_xy, ar_z]


register(Exercise(id="ch03.q2", title="AllGather and AllReduce on a v4p 4x4x4", solve=_q2, unit="s",
                  hint="V is the array each device holds after the gather; with wraparound a ring moves it in "
                       "V / W_ici whatever its size; two axes double the links; an AllReduce costs two passes"))


def _q3():
    from tpu_notes import sharding
    from tpu_notes.topology import Slice

    sl = Slice("v4p", (4, 4, 4))
    mesh = {"X": 4, "Y": 4, "Z": 4}
    tiny = sharding.parse("A[B]").bytes_per_device({"B": 128}, mesh)              # bf16[128], gathered over X
    small = sharding.parse("A[I, J]").bytes_per_device({"I": 128, "J": 128}, mesh)  # A[I_XYZ, J] -> A[I, J]
    return [sl.collective_time("all_gather", tiny, "x").total,
            sl.collective_time("all_gather", small, ("x", "y", "z")).total]


register(Exercise(id="ch03.q3", title="latency-bound AllGathers", solve=_q3, unit="s",
                  hint="each axis of 4 with wraparound needs ⌈3/2⌉ = 2 hops of about 1 µs; the bytes are negligible"))


_Q4 = dict(sizes={"B": 512, "D": 8192, "F": 32768}, mesh={"X": 4})


def _q4():
    from tpu_notes import collectives as c, roofline, sharding
    from tpu_notes.hardware import get_chip

    chip = get_chip("v5p")
    sizes, mesh = _Q4["sizes"], _Q4["mesh"]
    w = sharding.parse("W[D_X, F]")
    # strategy 1: AllGather W, then the whole matmul on every device
    v_w = sharding.parse("W[D, F]").bytes_per_device(sizes, mesh)
    gather = (c.all_gather_time(v_w, mesh["X"], chip.ici_bw_bidi).total
              + roofline.matmul_time(sizes["B"], sizes["D"], sizes["F"], chip).lower)
    # strategy 2: slice In along D (free), multiply the local quarter, AllReduce the partial sums of Out
    plan = sharding.matmul_plan("In[B, D]", w, "Out[B, F]", mesh=mesh, sizes=sizes)
    assert [s.kind for s in plan.collectives] == ["all-reduce"]
    return {"gather": gather, "reduce": plan.total_time(chip)}


register(Exercise(id="ch03.q4", title="two strategies for In[B, D] · W[D_X, F]", solve=_q4, unit="s",
                  hint="strategy 1 moves the whole weight (D·F·2 bytes) and repeats the FLOPs on every device; "
                       "strategy 2 moves the output twice (B·F·2 bytes, AllReduce) and splits the FLOPs four ways"))


_Q5 = dict(mesh={"X": 8, "Y": 4})


def _q5_time(E, F, wraparound):
    from tpu_notes import collectives as c, sharding
    from tpu_notes.hardware import get_chip
    from tpu_notes.topology import Slice

    v = sharding.parse("A[E, F]").bytes_per_device({"E": E, "F": F}, _Q5["mesh"])   # gathered bf16[E, F]
    if wraparound:   # as if the 4-long axis closed into a ring
        return c.all_gather_time(v, 4, get_chip("v5e").ici_bw_bidi).total
    return Slice("v5e", (8, 4)).collective_time("all_gather", v, "y").total       # the real slice: no wraparound


def _q5():
    return [_q5_time(2048, 8192, True), _q5_time(2048, 8192, False)]


register(Exercise(id="ch03.q5", title="v5e AllGather with and without wraparound", solve=_q5, unit="s",
                  hint="with a ring V / W_ici; without, the end chip receives N−1 shards of V/N through its one "
                       "link at the one-way bandwidth"))


def _q6():
    return _q5_time(256, 256, False)


register(Exercise(id="ch03.q6", title="a small AllGather on a v5e 8x4", solve=_q6, unit="s",
                  hint="3 hops of a 32 kB shard at 45 GB/s each way against 3 hops of about 1 µs: which is larger?"))


_Q7 = dict(sizes={"B": 128, "D": 8192, "F": 32768}, mesh={"X": 2, "Y": 2})


def _q7_plans():
    from tpu_notes import sharding

    up = sharding.matmul_plan("x[B, D]", "Win[D, F_XY]", "h[B, F_XY]", **_Q7)
    down = sharding.matmul_plan("h[B, F_XY]", "Wout[F_XY, D]", "out[B, D]", **_Q7)
    return up, down


def _q7():
    from tpu_notes import sharding
    from tpu_notes.topology import Slice

    sl = Slice("v5e", (2, 2))
    weights = sum(sharding.parse(w).bytes_per_device(_Q7["sizes"], _Q7["mesh"])
                  for w in ("Win[D, F_XY]", "Wout[F_XY, D]"))
    times = [t for p in _q7_plans() for t in p.times(sl)]
    return {"weight_bytes": weights,
            "comms": sum(t.time for t in times if t.step.is_collective),
            "compute": sum(t.time for t in times if t.step.kind == "matmul")}


register(Exercise(id="ch03.q7", title="a Transformer block on a v5e 2x2 with 300 MB per chip", solve=_q7, unit="B, s",
                  hint="the two weights are 2·D·F·2 bytes: only a 4-way split fits; split F over XY so the first "
                       "matmul needs nothing and the second leaves partial sums to AllReduce (B·D·2 bytes)"))


def _q8():
    from tpu_notes import collectives as c
    from tpu_notes.hardware import get_chip

    w = get_chip("v5p").ici_bw_bidi
    v = 64e6
    ring = c.all_to_all_time(v, 4, w).total
    return [ring, c.all_to_all_time(v, 4, w, wraparound=False).total,
            c.all_to_all_time(v, (4, 4, 4), w).total,
            c.all_gather_time(v, 4, w).bandwidth_time / c.all_to_all_time(v, 4, w).bandwidth_time]


register(Exercise(id="ch03.q8", title="AllToAll costs", solve=_q8, unit="s, s, s, ratio",
                  hint="on a ring V/4 bytes cross a cut of two links each way; a line is cut at one link; "
                       "on a torus V·max(axis)/(4·N·W); mind the latency of 2 hops per axis"))


def _q9():
    from tpu_notes import sharding

    plan = sharding.matmul_plan("A[I, J_X]", "B[J_X, K]", "C[I_X, K]", mesh={"X": 8},
                                sizes={"I": 1024, "J": 4096, "K": 2048})
    (rs,) = plan.collectives
    return [rs.bytes_in, rs.bytes_out]


register(Exercise(id="ch03.q9", title="bytes of a ReduceScatter (our own)", solve=_q9, unit="B",
                  hint="each device starts with the whole unreduced C (I·K·2 bytes) and keeps an eighth"))


def _q10():
    from tpu_notes import collectives as c
    from tpu_notes.hardware import get_chip

    return c.latency_bound_bytes(8, get_chip("v5e").ici_bw_bidi)


register(Exercise(id="ch03.q10", title="smallest bandwidth-bound AllGather (our own)", solve=_q10, unit="B",
                  hint="a hop is latency-bound while its V/N bytes take less than 1 µs at the one-way bandwidth"))


def _q11():
    from tpu_notes import collectives as c, sharding
    from tpu_notes.hardware import get_chip

    sizes, mesh = {"D": 8192, "F": 32768}, {"X": 16}
    v = sharding.parse("W[D, F]").bytes_per_device(sizes, mesh)
    t = c.all_gather_time(v, 16, get_chip("v5p").ici_bw_bidi).total
    return [t, sharding.parse("W[D_X, F]").bytes_per_device(sizes, mesh)]


register(Exercise(id="ch03.q11", title="an FSDP weight gather (our own)", solve=_q11, unit="s, B",
                  hint="the gathered weight is D·F·2 bytes whatever the axis size; each device stores 1/16 of it"))


_Q12 = dict(sizes={"B": 8192, "D": 8192, "F": 32768}, mesh={"Y": 8})


def _q12():
    from tpu_notes import sharding

    up = sharding.matmul_plan("In[B, D_Y]", "Win[D, F_Y]", "H[B, F_Y]", **_Q12)
    down = sharding.matmul_plan("H[B, F_Y]", "Wout[F_Y, D]", "Out[B, D_Y]", **_Q12)
    times = [t for p in (up, down) for t in p.times("v5p")]
    return {"comms": sum(t.time for t in times if t.step.is_collective),
            "compute": sum(t.time for t in times if t.step.kind == "matmul")}


register(Exercise(id="ch03.q12", title="a Megatron MLP layer on 8 v5p chips (our own)", solve=_q12, unit="s",
                  hint="an AllGather of In[B, D_Y] before the first matmul and a ReduceScatter of Out after the "
                       "second, each of B·D·2 bytes; the matmuls are 4·B·D·F FLOPs split 8 ways"))
