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


def _v4p_array():
    from tpu_notes.units import dtype_bytes

    return 8192 * 4096 * dtype_bytes("bf16")   # bf16[D=8192, F=4096]


def _q2():
    from tpu_notes import collectives as c
    from tpu_notes.hardware import get_chip

    w = get_chip("v4p").ici_bw_bidi
    v = _v4p_array()
    ag_x = c.all_gather_time(v, 4, w).total              # A[D_X, F] -> A[D, F], one axis of 4 with wraparound
    ag_xy = c.all_gather_time(v, (4, 4), w).total        # A[D_XY, F] -> A[D, F], two axes at once
    ar_x = c.all_reduce_time(v, 4, w).total              # A[D, F]{U_X} -> A[D, F]
    return [ag_x, ag_xy, ar_x]


register(Exercise(id="ch03.q2", title="AllGather and AllReduce on a v4p 4x4x4", solve=_q2, unit="s",
                  hint="with wraparound a bidirectional ring gathers V bytes in V / W_ici whatever its size; "
                       "two axes double the links; an AllReduce is a ReduceScatter plus an AllGather"))


def _q3():
    from tpu_notes import collectives as c
    from tpu_notes.hardware import get_chip
    from tpu_notes.units import dtype_bytes

    v = 128 * 128 * dtype_bytes("bf16")                   # A[I_XYZ, J], bf16[128, 128] over all 64 chips
    return c.all_gather_time(v, (4, 4, 4), get_chip("v4p").ici_bw_bidi).total


register(Exercise(id="ch03.q3", title="a latency-bound AllGather", solve=_q3, unit="s",
                  hint="each axis of 4 with wraparound needs ⌈3/2⌉ hops of about 1 µs; compare with V / (3 W_ici)"))


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


def _q5():
    from tpu_notes import collectives as c
    from tpu_notes.hardware import get_chip

    w = get_chip("v5e").ici_bw_bidi
    return [c.all_gather_time(34e6, 4, w, wraparound=True).total,
            c.all_gather_time(34e6, 4, w, wraparound=False).total]


register(Exercise(id="ch03.q5", title="v5e AllGather with and without wraparound", solve=_q5, unit="s",
                  hint="without wraparound the shards go N−1 hops of V/N bytes at the one-way bandwidth"))


def _q6():
    from tpu_notes import collectives as c
    from tpu_notes.hardware import get_chip

    return c.all_gather_time(4 * 32e3, 4, get_chip("v5e").ici_bw_bidi, wraparound=False).total


register(Exercise(id="ch03.q6", title="a small AllGather on a v5e 4x4", solve=_q6, unit="s",
                  hint="3 hops of 32 kB at 45 GB/s each way against 3 hops of about 1 µs: which is larger?"))


_Q7 = dict(sizes={"B": 8192, "D": 8192, "F": 32768}, mesh={"Y": 8})


def _q7_plans():
    from tpu_notes import sharding

    up = sharding.matmul_plan("In[B, D_Y]", "Win[D, F_Y]", "H[B, F_Y]", **_Q7)
    down = sharding.matmul_plan("H[B, F_Y]", "Wout[F_Y, D]", "Out[B, D_Y]", **_Q7)
    return up, down


def _q7():
    up, down = _q7_plans()
    comms = sum(t.time for p in (up, down) for t in p.times("v5p") if t.step.is_collective)
    compute = sum(t.time for p in (up, down) for t in p.times("v5p") if t.step.kind == "matmul")
    return {"comms": comms, "compute": compute}


register(Exercise(id="ch03.q7", title="per-layer communication of a Megatron MLP", solve=_q7, unit="s",
                  hint="an AllGather of In[B, D_Y] before the first matmul and a ReduceScatter of Out after the "
                       "second, each of B·D·2 bytes; the matmuls are 4·B·D·F FLOPs split 8 ways"))


def _q8():
    from tpu_notes import collectives as c
    from tpu_notes.hardware import get_chip

    w = get_chip("v5p").ici_bw_bidi
    v = 64e6
    return [c.all_to_all_time(v, 4, w).total, c.all_to_all_time(v, 4, w, wraparound=False).total,
            c.all_to_all_time(v, (4, 4, 4), w).total]


register(Exercise(id="ch03.q8", title="AllToAll costs", solve=_q8, unit="s",
                  hint="a quarter of an AllGather on a ring, half on a line; on a torus V·max(axis)/(4·N·W)"))


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
