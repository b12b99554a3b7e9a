"""Rooflines: worked numbers, invariants and input checks."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tpu_notes import roofline as rl
from tpu_notes.hardware import CHIPS, get_chip
from tpu_notes.units import DType, Positive, argument_kinds

pos = st.floats(min_value=1.0, max_value=1e18, allow_nan=False, allow_infinity=False)
dims = st.integers(min_value=1, max_value=2**16)


def test_roofline_fields():
    r = rl.roofline(flops=2e12, nbytes=1e9, peak_flops=1e14, bandwidth=1e12)
    assert (r.t_math, r.t_comms) == (0.02, 0.001)
    assert r.lower == 0.02 and r.upper == pytest.approx(0.021)
    assert r.intensity == 2000 and r.bound == "compute"
    assert "µs" in repr(r) or "ms" in repr(r)


@given(pos, pos, pos, pos)
def test_bounds_ordering(flops, nbytes, peak, bw):
    r = rl.roofline(flops, nbytes, peak, bw)
    assert max(r.t_math, r.t_comms) == r.lower <= r.upper <= 2 * r.lower * (1 + 1e-12)
    assert (r.bound == "compute") == (r.intensity >= peak / bw * (1 - 1e-12)) or math.isclose(
        r.intensity, peak / bw, rel_tol=1e-9
    )


@given(pos, pos, pos, pos, st.floats(min_value=1.01, max_value=100))
def test_more_bandwidth_never_slower(flops, nbytes, peak, bw, factor):
    slow, fast = rl.roofline(flops, nbytes, peak, bw), rl.roofline(flops, nbytes, peak, bw * factor)
    assert fast.lower <= slow.lower and fast.upper <= slow.upper


@given(dims, dims, dims, st.integers(min_value=2, max_value=8))
def test_bigger_matmul_never_faster(B, D, F, k):
    small = rl.matmul_time(B, D, F, "v5e")
    big = rl.matmul_time(B * k, D, F, "v5e")
    assert big.lower >= small.lower and big.flops == k * small.flops


def test_matmul_counts():
    assert rl.matmul_flops(2, 3, 4) == 48
    assert rl.matmul_bytes(2, 3, 4) == 2 * (6 + 12 + 8)
    assert rl.matmul_bytes(2, 3, 4, "int8", "int8", "int8") == 26
    # B << D, F: the intensity tends to B in bf16 (weights dominate the bytes).
    assert rl.matmul_intensity(64, 2**15, 2**15) == pytest.approx(64, rel=0.01)


def test_critical_batch_sizes():
    assert rl.critical_batch_size("v5e") == pytest.approx(1.97e14 / 8.2e11)
    assert rl.critical_batch_size("v5e", weight_dtype="int8") == pytest.approx(1.97e14 / 8.2e11 / 2)
    assert rl.critical_batch_size("v5e", "int8") == pytest.approx(rl.critical_batch_size("v5e"))
    assert round(rl.critical_batch_size("h100")) == 295


def test_critical_batch_is_where_the_matmul_turns_compute_bound():
    # Independent check through matmul_time: just below / above B*, with D, F huge so weights dominate.
    for chip, dtype, w in [("v5e", "bf16", None), ("v5e", "bf16", "int8"), ("v6e", "int8", None)]:
        b_star = rl.critical_batch_size(chip, dtype, w)
        D = F = 2**17
        assert rl.matmul_time(int(b_star * 0.9), D, F, chip, dtype, w).bound == "bandwidth"
        assert rl.matmul_time(int(b_star * 1.1) + 1, D, F, chip, dtype, w).bound == "compute"


@pytest.mark.parametrize("chip", sorted(n for n, c in CHIPS.items() if c.int8_flops and c.bf16_flops))
def test_critical_batch_scales_with_weight_bytes_and_peak(chip):
    # B* = peak(compute) * bytes_per_weight / (2 W_hbm), from the chip's own fields.
    c = get_chip(chip)
    assert rl.critical_batch_size(chip) == pytest.approx(c.bf16_flops / c.hbm_bw)
    assert rl.critical_batch_size(chip, "bf16", "int8") == pytest.approx(c.bf16_flops / c.hbm_bw / 2)
    assert rl.critical_batch_size(chip, "int8", "int8") == pytest.approx(c.int8_flops / c.hbm_bw / 2)


def test_sharded_contraction_threshold_depends_on_D_not_B():
    # The scaling book's worked example (roofline.md): 4.5e10 bytes/s each way, 1.97e14 FLOP/s per chip, so the
    # two-chip contraction is compute-bound for D / 2 > 1.97e14 / 4.5e10, i.e. D > 8755 (8755.6).
    D_star = 2 * 1.97e14 / 4.5e10
    assert 8755 < D_star < 8756
    for B in (16, 4096):
        assert rl.sharded_contraction_time(B, int(D_star * 0.9) // 2 * 2, 8192, "v5e").bound == "bandwidth"
        assert rl.sharded_contraction_time(B, int(D_star * 1.1) // 2 * 2, 8192, "v5e").bound == "compute"
        # 8754 and 8756 straddle the threshold exactly
        assert rl.sharded_contraction_time(B, 8754, 4096, "v5e").bound == "bandwidth"
        assert rl.sharded_contraction_time(B, 8756, 4096, "v5e").bound == "compute"


def test_sharded_contraction_times_by_hand():
    # Two v5e chips, bf16: T_math = 2BDF / (2 C); T_comms = the [B, F] bf16 partial sum (2BF bytes) at 45 GB/s.
    B, D, F = 512, 8192, 4096
    r = rl.sharded_contraction_time(B, D, F, "v5e")
    assert r.t_math == pytest.approx(B * D * F / 1.97e14)
    assert r.t_comms == pytest.approx(2 * B * F / 4.5e10)
    # The one-way figure is half the bidirectional one: asking for "ici" (bidirectional) halves T_comms.
    assert rl.sharded_contraction_time(B, D, F, "v5e", link="ici").t_comms == pytest.approx(r.t_comms / 2)
    # n chips: the FLOPs split n ways, the partial sum stays B*F elements.
    r4 = rl.sharded_contraction_time(B, D, F, "v5e", n_chips=4)
    assert r4.t_math == pytest.approx(r.t_math / 2) and r4.t_comms == pytest.approx(r.t_comms)


@given(st.integers(1, 2**14), st.integers(1, 2**12).map(lambda d: 2 * d), st.integers(1, 2**14))
def test_sharded_contraction_bound_ignores_the_batch(B, D, F):
    # T_math / T_comms = (D / 2) / (C / W): neither B nor F enters the verdict.
    a = rl.sharded_contraction_time(B, D, F, "v5e")
    b = rl.sharded_contraction_time(1, D, 1, "v5e")
    assert a.t_math / a.t_comms == pytest.approx(b.t_math / b.t_comms)


def test_attainable_flops_is_the_roofline():
    assert rl.attainable_flops(10, 1e14, 1e12) == 1e13
    assert rl.attainable_flops(1e4, 1e14, 1e12) == 1e14


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: rl.roofline(-1, 1, 1, 1), "flops"),
        (lambda: rl.roofline(1, 1, 0, 1), "peak_flops"),
        (lambda: rl.roofline(0, 0, 1, 1), "both be zero"),
        (lambda: rl.matmul_flops(0, 1, 1), "B"),
        (lambda: rl.matmul_bytes(1, 2.5, 1), "D"),
        (lambda: rl.matmul_time(1, 1, 1, "v99"), "unknown chip"),
        (lambda: rl.matmul_time(1, 1, 1, "v5e", dtype="fp8"), "fp8"),
        (lambda: rl.matmul_time(1, 1, 1, "v5e", w_dtype="int2"), "w_dtype"),
        (lambda: rl.critical_batch_size("v5e", weight_dtype="q4"), "weight_dtype"),
        (lambda: rl.sharded_contraction_time(1, 3, 1, "v5e"), "divisible"),
        (lambda: rl.sharded_contraction_time(1, 4, 1, "v5e", n_chips=1), "n_chips"),
        (lambda: rl.sharded_contraction_time(1, 4, 1, "v5e", link="wifi"), "wifi"),
    ],
)
def test_bad_input_raises_clearly(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_compute_and_memory_time():
    assert rl.compute_time(1.97e14, "v5e") == pytest.approx(1.0)
    assert rl.compute_time(3.94e14, "v5e", "int8") == pytest.approx(1.0)
    assert rl.memory_time(8.2e11, "v5e") == pytest.approx(1.0)
    assert rl.memory_time(1e9, "v5e", bandwidth=1e9) == 1.0
    r = rl.roofline(1e12, 0, get_chip("v5e").bf16_flops, get_chip("v5e").hbm_bw)
    assert rl.compute_time(1e12, "v5e") == r.t_math


@pytest.mark.parametrize("D", [1024, 4096, 16384])
def test_closed_form_crossover_agrees_with_the_bisection(D):
    exact = rl.crossover_batch(D, D, "v5e", "bf16")
    assert rl.smallest_compute_bound_batch(D, D, "v5e") == math.ceil(exact)
    with pytest.raises(ValueError, match="no batch"):
        rl.crossover_batch(64, 64, "v5e")


def test_moved_worked_cases_stay_importable_from_the_exercises():
    from tpu_notes.exercises import ch01

    assert ch01.smallest_compute_bound_batch is rl.smallest_compute_bound_batch
    assert rl.per_example_weights_time(4096, 4096, 16384, "v5e").bound == "bandwidth"
    assert rl.elementwise_add_time(2**20, "v5e").intensity == pytest.approx(1 / 6)


def test_arguments_declare_their_kinds():
    # the kinds live in the signatures (read by the hostile-input test); the function bodies hold no checks
    kinds = argument_kinds(rl.matmul_time)
    assert {"B", "D", "F", "dtype", "w_dtype", "out_dtype"} <= set(kinds)
    assert kinds["B"].kinds == (Positive(integer=True),) and isinstance(kinds["dtype"].kinds[0], DType)
    assert kinds["w_dtype"].optional and not kinds["dtype"].optional
    cap = argument_kinds(rl.smallest_compute_bound_batch)["limit"].kinds[0]
    assert cap.maximum == rl.MAX_BATCH_SEARCH_LIMIT
    with pytest.raises(ValueError, match="limit must be at most"):
        rl.smallest_compute_bound_batch(4096, 4096, limit=rl.MAX_BATCH_SEARCH_LIMIT + 1)


def test_a_bandwidth_is_a_kind_of_link_or_bytes_per_second():
    assert rl.memory_time(8.2e11, "v5e", bandwidth="HBM") == rl.memory_time(8.2e11, "v5e", bandwidth=8.2e11)
    assert rl.crossover_batch(4096, 4096, "v5e", bandwidth="hbm") == rl.crossover_batch(
        4096, 4096, "v5e", bandwidth=8.2e11
    )
    for bad, error in (
        ("dram", ValueError),
        (0, ValueError),
        (float("nan"), ValueError),
        (None, TypeError),
        (True, TypeError),
    ):
        with pytest.raises(error, match="bandwidth"):
            rl.memory_time(1e9, "v5e", bandwidth=bad)


def test_normalised_values_reach_the_body():
    # whole floats and numpy integers are accepted as sizes and give the same numbers as ints
    assert rl.matmul_flops(8.0, np.int64(4096), 16384) == rl.matmul_flops(8, 4096, 16384) == 2.0 * 8 * 4096 * 16384
    assert rl.matmul_bytes(8, 4096, 16384, "bfloat16") == rl.matmul_bytes(8, 4096, 16384, "bf16")
