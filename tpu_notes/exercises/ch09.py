"""Exercises of Chapter 9 (ids ch09.*), registered with their reference solutions.

Questions 1–3 follow the scaling book's profiling chapter (profiling.md): reading a sharded matmul's true shape
off its HLO and replica groups, and predicting a matmul's and a ReduceScatter's time from what a profile shows.
Questions 4–5 are ours: counting a fusion's FLOPs as XLA does, and finding the bottleneck op of a table.
"""

from __future__ import annotations

from ..collectives import reduce_scatter_time
from ..hardware import get_chip
from ..hlo import parse_replica_groups
from ..roofline import compute_time, matmul_flops, roofline
from ..units import dtype_bytes
from . import Exercise, register

#: Question 1: the per-device op and the AllReduce's replica groups, as a profile shows them.
Q1_LOCAL_ROWS = 2048
Q1_GROUPS = "[16,8]<=[8,16]T(1,0)"
Q1_DEVICES = 128

#: Questions 2-3: X bf16[32, 1024, 8192] times W_in bf16[8192, 32768] on 8 v5e chips, 4-way data x 2-way tensor.
Q2_BATCH, Q2_SEQ, Q2_D, Q2_F, Q2_CHIPS = 32, 1024, 8192, 32768, 8
Q3_DATA, Q3_TENSOR = 4, 2

#: Question 4: a fusion from this chapter's training step (CPU backend), as the HLO text shows it.
Q4_HLO = """HloModule q4

max_fn {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}

fused {
  p1 = f32[64,64]{1,0} parameter(1)
  p2 = f32[64,256]{1,0} parameter(2)
  d = f32[64,256]{1,0} dot(p1, p2), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  p0 = f32[] parameter(0)
  r = f32[64]{0} reduce(d, p0), dimensions={1}, to_apply=max_fn
  b = f32[64,256]{1,0} broadcast(r), dimensions={0}
  ROOT s = f32[64,256]{1,0} subtract(d, b)
}

ENTRY e {
  c = f32[] parameter(0)
  x = f32[64,64]{1,0} parameter(1)
  w = f32[64,256]{1,0} parameter(2)
  ROOT f = f32[64,256]{1,0} fusion(c, x, w), kind=kOutput, calls=fused
}
"""

#: Question 5: three ops of a step on one v5e chip: (name, FLOPs, bytes) per execution.
Q5_OPS = (
    ("fusion.12 (attention scores)", 6.9e10, 1.3e9),
    ("fusion.40 (MLP up-projection)", 2.7e11, 4.0e8),
    ("all-reduce.3 (loss)", 0.0, 4.0),
)


def _q1():
    group = parse_replica_groups(Q1_GROUPS, Q1_DEVICES)[0]
    return Q1_LOCAL_ROWS * len(group)


def _q2():
    return compute_time(matmul_flops(Q2_BATCH * Q2_SEQ, Q2_D, Q2_F), "v5e") / Q2_CHIPS


def _q3():
    shard = dtype_bytes("bf16") * (Q2_BATCH // Q3_DATA) * Q2_SEQ * Q2_D
    return reduce_scatter_time(shard, Q3_TENSOR, get_chip("v5e").ici_bw_bidi).total


def _q4():
    from ..profile import op_costs  # local: tpu_notes.profile imports JAX; loading the exercises must not

    return op_costs(Q4_HLO)["f"].flops


def _q5():
    c = get_chip("v5e")
    return max(roofline(f, b, c.peak_flops("bf16"), c.hbm_bw).lower for _, f, b in Q5_OPS)


register(
    Exercise(
        id="ch09.q1",
        title="true rows of a sharded matmul",
        solve=_q1,
        unit="rows",
        hint="Count the devices in one replica group of the AllReduce (expand the iota spelling, or use "
        "hlo.parse_replica_groups); the per-device rows are one shard of that many.",
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
        hint="The dot is 2 x 64 x 64 x 256; a max-reduction of n numbers is n - 1 comparisons per output; the "
        "subtraction is one FLOP per element (profile.op_costs asks XLA).",
    )
)
register(
    Exercise(
        id="ch09.q5",
        title="the bottleneck op of a table",
        solve=_q5,
        unit="s",
        hint="For each op take max(FLOPs / peak, bytes / HBM bandwidth) on a v5e; the largest is the bottleneck "
        "(roofline.roofline gives both terms).",
    )
)
