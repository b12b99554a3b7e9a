"""Exercises of Chapter 1 (ids ch01.*), registered with their reference solutions.

Every reference is computed with :mod:`tpu_notes.roofline` and :mod:`tpu_notes.hardware`; the sizes used in the
statements are the module constants below, so the notebook and the checker cannot drift apart.
"""

from __future__ import annotations

from ..hardware import get_chip

# The modelling lives in tpu_notes.roofline; these names also stay importable from here for old notebooks.
from ..roofline import (
    critical_batch_size,
    elementwise_add_time,
    matmul_bytes,
    matmul_flops,
    matmul_time,
    per_example_weights_time,
    smallest_compute_bound_batch,
)
from . import Exercise, register

#: Exercise 1: an int8 matmul x[B, D] @ w[D, F] -> out[B, F] (all int8) on a TPU v5e.
Q1_CHIP, Q1_B, Q1_D, Q1_F = "v5e", 768, 4096, 16384
#: Exercise 3 (the book's roofline-plot problem): square int8 weights D = F, bf16 activations and FLOPs, on a v5e.
Q3_CHIP, Q3_DIMS, Q3_DTYPE, Q3_W_DTYPE = "v5e", (4096, 1024), "bf16", "int8"
#: Exercise 4: per-example weights x[B, D] @ w[B, D, F] in int8 on a TPU v5e.
Q4_CHIP, Q4_B, Q4_D, Q4_F = "v5e", 256, 4096, 16384
Q4_BIG_B = 4096
#: Exercise 2: int4 weights (half a byte each) with bf16 activations and bf16 FLOPs, on a TPU v5p.
Q2_CHIP, Q2_W_DTYPE = "v5p", "int4"
#: Exercise 5: a GPU whose critical batch the chapter does not print (the H100 PCIe card).
Q5_CHIP = "h100-pcie"
#: Exercise 6: adding two int8[N] vectors on a TPU v5e (the chapter prints the bf16 add).
Q6_CHIP, Q6_N, Q6_DTYPE = "v5e", 2**30, "int8"
#: Exercise 7: x[B, D] @ w[D, F] split over two v6e chips along D, partial sums exchanged over ICI.
Q7_CHIP = "v6e"
#: Exercise 8: square bf16 weights D = F on a TPU v5e, every byte counted.
Q8_CHIP, Q8_DIMS = "v5e", (512, 1024, 4096, 16384)


def _q1():
    return matmul_time(Q1_B, Q1_D, Q1_F, Q1_CHIP, dtype="int8")


register(
    Exercise(
        id="ch01.q1a",
        title="int8 matmul: bytes moved",
        solve=lambda: matmul_bytes(Q1_B, Q1_D, Q1_F, "int8", "int8", "int8"),
        hint="Read x and w once and write the output once; int8 is one byte per element.",
        unit="bytes",
    )
)
register(
    Exercise(
        id="ch01.q1b",
        title="int8 matmul: operations",
        solve=lambda: matmul_flops(Q1_B, Q1_D, Q1_F),
        hint="One multiply and one add for every (b, d, f) triple.",
        unit="OPs",
    )
)
register(
    Exercise(
        id="ch01.q1c",
        title="int8 matmul: arithmetic intensity",
        solve=lambda: _q1().intensity,
        hint="Divide the operations by the bytes.",
        unit="OPs/byte",
    )
)
register(
    Exercise(
        id="ch01.q1d",
        title="int8 matmul: time bounds on v5e",
        solve=lambda: {"lower": _q1().lower, "upper": _q1().upper},
        hint="T_math uses the int8 OP/s of a v5e, T_comms its HBM bandwidth; lower = max, upper = sum.",
        unit="s",
    )
)
register(
    Exercise(
        id="ch01.q1e",
        title="int8 matmul: which bound",
        solve=lambda: _q1().bound,
        hint="Compare the intensity with the v5e's int8 OP/s divided by its HBM bandwidth.",
    )
)
register(
    Exercise(
        id="ch01.q2",
        title="int4 weights, bf16 compute: critical batch",
        solve=lambda: critical_batch_size(Q2_CHIP, compute_dtype="bf16", weight_dtype=Q2_W_DTYPE),
        hint="The weights now cost half a byte each while the FLOP rate is still the bf16 one.",
        unit="tokens",
    )
)
register(
    Exercise(
        id="ch01.q3",
        title="int8 weights: reaching the roof",
        solve=lambda: [smallest_compute_bound_batch(d, d, Q3_CHIP, Q3_DTYPE, w_dtype=Q3_W_DTYPE) for d in Q3_DIMS],
        hint="Exact bytes: 2*B*D (bf16 x) + D*F (int8 w) + 2*B*F (bf16 out); FLOPs 2*B*D*F at the bf16 rate. "
        "Solve 2*B*D*F / bytes >= C_bf16 / W_hbm for B.",
        unit="tokens",
    )
)
register(
    Exercise(
        id="ch01.q4a",
        title="per-example weights: intensity",
        solve=lambda: per_example_weights_time(Q4_B, Q4_D, Q4_F, Q4_CHIP).intensity,
        hint="Each weight element is now used by one example only: count B*D*F weight bytes.",
        unit="OPs/byte",
    )
)
register(
    Exercise(
        id="ch01.q4b",
        title="per-example weights at a large batch",
        solve=lambda: per_example_weights_time(Q4_BIG_B, Q4_D, Q4_F, Q4_CHIP).bound,
        hint="Does the intensity grow with B here?",
    )
)
register(
    Exercise(
        id="ch01.q5",
        title="H100 PCIe critical batch",
        solve=lambda: critical_batch_size(Q5_CHIP),
        hint="Dense bf16 FLOP/s over HBM bandwidth (not the sparse FLOP figure).",
        unit="tokens",
    )
)
register(
    Exercise(
        id="ch01.q6a",
        title="int8 elementwise add: intensity",
        solve=lambda: elementwise_add_time(Q6_N, Q6_CHIP, Q6_DTYPE).intensity,
        hint="One add per element; two int8 reads and one int8 write per element.",
        unit="OPs/byte",
    )
)
register(
    Exercise(
        id="ch01.q6b",
        title="int8 elementwise add: time on v5e",
        solve=lambda: elementwise_add_time(Q6_N, Q6_CHIP, Q6_DTYPE).lower,
        hint="It is bandwidth-bound: bytes over HBM bandwidth.",
        unit="s",
    )
)
register(
    Exercise(
        id="ch01.q7",
        title="two-chip v6e contraction: threshold on D",
        solve=lambda: 2 * get_chip(Q7_CHIP).critical_intensity("bf16", bandwidth="ici_oneway"),
        hint="T_math = B*D*F/C per chip; the 2*B*F bytes of each partial sum cross the link in each direction at "
        "once, so T_comms = 2*B*F/W_oneway; B and F cancel.",
        unit="elements",
    )
)
register(
    Exercise(
        id="ch01.q8",
        title="exact critical batch, square bf16 weights",
        solve=lambda: [smallest_compute_bound_batch(d, d, Q8_CHIP) for d in Q8_DIMS],
        hint="Keep the activation and output bytes: solve B*D*F / (B*D + D*F + B*F) >= C / W_hbm for B.",
        unit="tokens",
    )
)
