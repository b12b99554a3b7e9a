"""Exercises of Chapter 9 (ids ch09.*), registered with their reference solutions.

Questions 1–3 follow the scaling book's profiling chapter (profiling.md): reading a sharded matvec's true shape
off its HLO and replica groups, and predicting a matmul's and a ReduceScatter's time from what a profile shows.
Questions 4–6 are ours: counting a fusion's FLOPs as XLA does, pricing a step op by op (compute, memory or
communication, the step their sum), and the bytes a TPU layout's tiles pad an array to.
"""

from __future__ import annotations

import math

from ..collectives import reduce_scatter_time
from ..hardware import get_chip
from ..hlo import parse_layout, parse_replica_groups
from ..roofline import compute_time, matmul_flops
from ..topology import Slice
from ..units import dtype_bytes
from . import Exercise, register

#: Question 1: a matvec whose weight rows are sharded (so its output rows are too), then the AllGather of that
#: output, as a profile shows them; question 1b asks for the devices in device Q1_DEVICE's replica group.
Q1_LOCAL_ROWS = 2048
Q1_GROUPS = "[16,8]<=[8,16]T(1,0)"
Q1_DEVICES = 128
Q1_DEVICE = 3

#: Questions 2-3: X bf16[32, 1024, 8192] times W_in bf16[8192, 32768] on 8 v5e chips, 4-way data x 2-way tensor.
Q2_BATCH, Q2_SEQ, Q2_D, Q2_F, Q2_CHIPS = 32, 1024, 8192, 32768, 8
Q3_DATA, Q3_TENSOR = 4, 2

#: Question 4: a fusion of the same pattern as this chapter's training step (a matmul, then each row's maximum
#: subtracted from it), at a shape that step does not have: f32[Q4_M, Q4_K] times f32[Q4_K, Q4_N].
Q4_M, Q4_K, Q4_N = 128, 64, 512
Q4_HLO = f"""HloModule q4

max_fn {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}}

fused {{
  p1 = f32[{Q4_M},{Q4_K}]{{1,0}} parameter(1)
  p2 = f32[{Q4_K},{Q4_N}]{{1,0}} parameter(2)
  d = f32[{Q4_M},{Q4_N}]{{1,0}} dot(p1, p2), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  p0 = f32[] parameter(0)
  r = f32[{Q4_M}]{{0}} reduce(d, p0), dimensions={{1}}, to_apply=max_fn
  b = f32[{Q4_M},{Q4_N}]{{1,0}} broadcast(r), dimensions={{0}}
  ROOT s = f32[{Q4_M},{Q4_N}]{{1,0}} subtract(d, b)
}}

ENTRY e {{
  c = f32[] parameter(0)
  x = f32[{Q4_M},{Q4_K}]{{1,0}} parameter(1)
  w = f32[{Q4_K},{Q4_N}]{{1,0}} parameter(2)
  ROOT f = f32[{Q4_M},{Q4_N}]{{1,0}} fusion(c, x, w), kind=kOutput, calls=fused
}}
"""

#: Question 5: three ops of one step, per device, on a TPU v5e 2x4 slice: two fusions as (name, FLOPs, bytes)
#: of one execution, and an AllReduce of a bf16 array of Q5_AR_SHAPE over the slice's 4-chip "y" axis.
Q5_OPS = (
    ("fusion.12", 6.9e10, 1.3e9),  # attention scores
    ("fusion.40", 2.7e11, 4.0e8),  # MLP up-projection
)
Q5_AR_NAME = "all-reduce.3"  # partial sums of a 4-way tensor-parallel matmul
Q5_AR_SHAPE = (2, 1024, 4096)
Q5_SLICE, Q5_AXIS = ("v5e", (2, 4)), "y"

#: Question 6: a KV-cache buffer with head size 64 in a TPU layout (bf16 tiled by 8 x 128, packed in pairs).
Q6_SHAPE = "bf16[40,2048,96]{2,1,0:T(8,128)(2,1)}"


def _q1():
    group = parse_replica_groups(Q1_GROUPS, Q1_DEVICES)[0]
    return Q1_LOCAL_ROWS * len(group)


def _q1b():
    return [g for g in parse_replica_groups(Q1_GROUPS, Q1_DEVICES) if Q1_DEVICE in g][0]


def _q2():
    return compute_time(matmul_flops(Q2_BATCH * Q2_SEQ, Q2_D, Q2_F), "v5e") / Q2_CHIPS


def _q3():
    shard = dtype_bytes("bf16") * (Q2_BATCH // Q3_DATA) * Q2_SEQ * Q2_D
    return reduce_scatter_time(shard, Q3_TENSOR, get_chip("v5e").ici_bw_bidi).total


def _q4():
    # counted by hand, as XLA's HloCostAnalysis counts (the reader asks XLA with profile.op_costs): a dot is
    # 2 M K N, a max-reduction of N numbers N - 1 comparisons per row, the subtraction one FLOP per element
    m, k, n = Q4_M, Q4_K, Q4_N
    return 2 * m * k * n + m * (n - 1) + m * n


def _q5():
    c = get_chip("v5e")
    out = {}
    for name, f, b in Q5_OPS:
        t_math, t_mem = f / c.peak_flops("bf16"), b / c.hbm_bw
        out[name] = ("compute" if t_math >= t_mem else "memory", max(t_math, t_mem))
    ar = Slice(*Q5_SLICE).collective_time("all_reduce", dtype_bytes("bf16") * math.prod(Q5_AR_SHAPE), Q5_AXIS)
    out[Q5_AR_NAME] = ("comms", ar.total)
    answer = {name: bound for name, (bound, _) in out.items()}
    answer["step"] = sum(t for _, t in out.values())  # nothing overlaps: the ops run one after another
    return answer


def _q6():
    return parse_layout(Q6_SHAPE).padded_bytes


register(
    Exercise(
        id="ch09.q1",
        title="true rows of a sharded matvec",
        solve=_q1,
        unit="rows",
        hint="Count the devices in one replica group of the AllGather (expand the iota spelling, or use "
        "hlo.parse_replica_groups); the per-device rows are one shard of that many.",
    )
)
register(
    Exercise(
        id="ch09.q1b",
        title="the devices of one replica group",
        solve=_q1b,
        unit="device ids",
        rtol=0.0,
        hint="[16,8]<=[8,16]T(1,0): lay out the ids 0..127 as an 8 x 16 array (id = 16 a + b), transpose it to "
        "16 x 8, and read each row as a group: row b is b, 16 + b, 32 + b, ...",
    )
)
register(
    Exercise(
        id="ch09.q2",
        title="time of the up-projection on 8 v5e chips",
        solve=_q2,
        unit="s",
        hint="2 x (batch x sequence) x d_model x d_ff FLOPs for the whole matmul, split over all 8 chips, at the "
        "v5e's bf16 peak (roofline.compute_time).",
    )
)
register(
    Exercise(
        id="ch09.q3",
        title="time of the ReduceScatter after the down-projection",
        solve=_q3,
        unit="s",
        hint="Each device holds bf16[8, 1024, 8192] of partial sums (its data shard); it is reduce-scattered over "
        "the 2-way tensor axis (collectives.reduce_scatter_time with the v5e's bidirectional ICI bandwidth).",
    )
)
register(
    Exercise(
        id="ch09.q4",
        title="FLOPs XLA counts for a matmul fusion",
        solve=_q4,
        unit="FLOPs",
        rtol=0.01,
        hint="The dot is 2 x M x K x N; a max-reduction of n numbers is n - 1 comparisons per output; the "
        "subtraction is one FLOP per element (profile.op_costs asks XLA).",
    )
)
register(
    Exercise(
        id="ch09.q5",
        title="what bounds each op, and the step",
        solve=_q5,
        unit="s for 'step'",
        hint="Per fusion: max(FLOPs / bf16 peak, bytes / HBM bandwidth) on a v5e, labelled 'compute' or 'memory' "
        "by the larger term. The AllReduce is 'comms': ICI, not HBM, on 4 chips of an open (non-wrapping) axis: "
        "Slice('v5e', (2, 4)).collective_time('all_reduce', V, 'y'), twice a ReduceScatter's 2(N-1)/N V / W_ici. "
        "The step, with nothing overlapped, is the sum of the three.",
    )
)
register(
    Exercise(
        id="ch09.q6",
        title="bytes of a tiled KV-cache buffer",
        solve=_q6,
        unit="bytes",
        hint="T(8,128) rounds the last two dimensions up to multiples of 8 and 128 (the (2,1) sub-tile packs row "
        "pairs inside a tile and adds nothing here); a minor dimension of 96 becomes 128 (hlo.parse_layout).",
    )
)
