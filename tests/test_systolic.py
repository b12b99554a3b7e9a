"""The systolic-array simulator: products against numpy, cycle counts against hand derivations."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tpu_notes import systolic
from tpu_notes.hardware import get_chip


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 12), st.integers(1, 5), st.integers(0, 2**32 - 1))
def test_product_matches_numpy(M, K, N, S, seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(M, K)), rng.normal(size=(K, N))
    r = systolic.simulate_matmul(a, b, array_size=S)
    np.testing.assert_allclose(r.output, a @ b, rtol=1e-12, atol=1e-12)
    assert r.n_tiles == math.ceil(K / S) * math.ceil(N / S)
    assert r.macs == M * K * N and 0 < r.utilization <= 1


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 12), st.integers(1, 5))
def test_cycles_match_closed_form(M, K, N, S):
    # The simulator runs until the array drains; its observed count must equal the formula derived in the chapter.
    r = systolic.simulate_matmul(np.ones((M, K)), np.ones((K, N)), array_size=S)
    assert r.cycles == systolic.predicted_cycles(M, K, N, S)


def test_single_tile_by_hand():
    # One 4x4 tile, 3 rows: 4 cycles to load weights; row m enters at cycle 4 + m; the result of row 2,
    # column 3 leaves the bottom-right PE at cycle 4 + 2 + 3 + 3 = 12, so 13 cycles in all.
    r = systolic.simulate_matmul(np.ones((3, 4)), np.ones((4, 4)), array_size=4)
    assert r.cycles == 13 and r.tile_starts == (4,)


def test_several_tiles_by_hand():
    # [2, 4] @ [4, 4] on a 2x2 array: 2 x 2 = 4 weight tiles. M = 2 <= S = 2, so a tile starts every S = 2 cycles
    # (the loader is the bottleneck): starts 2, 4, 6, 8. The last tile's row 1 enters at 9, reaches the bottom row
    # at 10 and the last column at 11: 12 cycles.
    r = systolic.simulate_matmul(np.ones((2, 4)), np.ones((4, 4)), array_size=2)
    assert r.tile_starts == (2, 4, 6, 8) and r.cycles == 12
    # [5, 2] @ [2, 4] on a 2x2 array: 2 tiles, M = 5 > S, so tile 1 waits for tile 0's 5 rows: starts 2 and 7.
    # Its row 4 enters at 11 and leaves the bottom-right PE at 11 + 1 + 1 = 13: 14 cycles.
    r = systolic.simulate_matmul(np.arange(10.0).reshape(5, 2), np.ones((2, 4)), array_size=2)
    assert r.tile_starts == (2, 7) and r.cycles == 14
    np.testing.assert_array_equal(r.output, np.arange(10.0).reshape(5, 2) @ np.ones((2, 4)))


def test_integer_inputs_are_exact():
    rng = np.random.default_rng(7)
    a, b = rng.integers(-50, 50, size=(9, 11)), rng.integers(-50, 50, size=(11, 6))
    np.testing.assert_array_equal(systolic.simulate_matmul(a, b, array_size=4).output, a @ b)


def test_mxu_step_is_eight_cycles_in_steady_state():
    # Streaming 8 more rows past a loaded 128x128 array costs exactly 8 more cycles: one [8,128] @ [128,128]
    # step per 8 cycles, i.e. every PE does one multiply-add per cycle.
    w = np.eye(128)
    c1 = systolic.simulate_matmul(np.ones((256, 128)), w).cycles
    c2 = systolic.simulate_matmul(np.ones((264, 128)), w).cycles
    assert c2 - c1 == 8
    assert systolic.mxu_flops_per_cycle(128) == 2 * 8 * 128 * 128 / 8
    assert systolic.mxu_flops_per_cycle(256) == 4 * systolic.mxu_flops_per_cycle(128)


def test_utilization_approaches_one_for_long_streams():
    short = systolic.simulate_matmul(np.ones((4, 8)), np.ones((8, 8)), array_size=8)
    long = systolic.simulate_matmul(np.ones((400, 8)), np.ones((8, 8)), array_size=8)
    assert short.utilization < 0.25 < 0.9 < long.utilization


def test_snapshots_show_the_skewed_wavefront():
    r = systolic.simulate_matmul(np.arange(12.0).reshape(3, 4), np.ones((4, 4)), array_size=4, record_cycles=8)
    assert [s.cycle for s in r.snapshots] == list(range(8))
    # Weights load on cycles 0..3: nothing streams yet.
    assert all((s.row < 0).all() for s in r.snapshots[:4])
    # On cycle 4 + t, PE (i, j) works on row m = t - i - j (when 0 <= m < 3).
    for t in range(4):
        snap = r.snapshots[4 + t]
        for i in range(4):
            for j in range(4):
                m = t - i - j
                assert snap.row[i, j] == (m if 0 <= m < 3 else -1)


def test_tile_schedule_by_hand():
    # M >= S: tiles follow each other every M cycles; M < S: every S cycles (weight loads are the bottleneck).
    assert systolic.tile_schedule(3, 10, 4) == (4, 14, 24)
    assert systolic.tile_schedule(3, 2, 4) == (4, 8, 12)


def test_peaks_from_parts_match_the_hardware_table():
    # cores x MXUs x 2*8*128*128/8 FLOPs/cycle x clock
    assert systolic.derived_peak_flops("v5e") == pytest.approx(1 * 4 * 32768 * 1.5e9)
    assert systolic.derived_peak_flops("v5e") == pytest.approx(get_chip("v5e").bf16_flops, rel=0.01)
    assert systolic.derived_peak_flops("v5p") == pytest.approx(get_chip("v5p").bf16_flops, rel=0.01)
    assert systolic.vpu_flops("v5p") == pytest.approx(8 * 128 * 4 * 1.75e9)
    assert systolic.derived_peak_flops("v4p") == pytest.approx(get_chip("v4p").bf16_flops, rel=0.01)
    assert systolic.derived_peak_flops("v6e") == pytest.approx(get_chip("v6e").bf16_flops, rel=0.01)
    with pytest.raises(ValueError, match="clock_hz"):
        systolic.derived_peak_flops("tpu7x")


@settings(deadline=None)  # the CPU is shared: no per-example time limit
@given(st.integers(1, 2000), st.integers(1, 2000), st.sampled_from([128, 256]))
def test_padding(K, N, s):
    pk = systolic.padded_dim(K, s)
    assert pk % s == 0 and K <= pk < K + s
    eff = systolic.padding_efficiency(K, N, s)
    assert 0 < eff <= 1
    assert (eff == 1) == (K % s == 0 and N % s == 0)


def test_bad_input_raises():
    with pytest.raises(ValueError, match="inner dimensions"):
        systolic.simulate_matmul(np.ones((2, 3)), np.ones((4, 2)))
    with pytest.raises(ValueError, match="2-D"):
        systolic.simulate_matmul(np.ones(3), np.ones((3, 2)))
    with pytest.raises(ValueError, match="array_size"):
        systolic.simulate_matmul(np.ones((2, 2)), np.ones((2, 2)), array_size=0)
    with pytest.raises(TypeError, match="array_size"):
        systolic.simulate_matmul(np.ones((2, 2)), np.ones((2, 2)), array_size="big")
    with pytest.raises(ValueError, match="non-empty"):
        systolic.simulate_matmul(np.ones((0, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match="n"):
        systolic.padded_dim(0)


def test_systolic_steps_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tpu_notes import plots

    r = systolic.simulate_matmul(np.ones((2, 3)), np.ones((3, 3)), array_size=3, record_cycles=10)
    fig = plots.systolic_steps(r, cycles=range(3, 9), ncols=3)
    drawn = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in drawn] == [f"cycle {t}" for t in range(3, 9)]
    plt.close(fig)
    with pytest.raises(ValueError, match="record_cycles"):
        plots.systolic_steps(systolic.simulate_matmul(np.ones((1, 1)), np.ones((1, 1)), array_size=1))
    with pytest.raises(ValueError, match="cycles"):
        plots.systolic_steps(r, cycles=[50])


def test_padding_sweep_figure():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tpu_notes import plots

    sizes = [120, 128, 136, 256, 264]
    seconds = [1e-5, 1e-5, 2e-5, 2e-5, 3e-5]
    fig = plots.padding_sweep(sizes, seconds, mxu_size=128)
    left, right = fig.axes
    # dotted lines at the multiples of 128 inside [120, 264]: 128 and 256, on both panels
    assert sorted(line.get_xdata()[0] for line in left.lines[1:]) == [128, 256]
    # the right panel plots achieved FLOP/s = 2 N^3 / seconds
    np.testing.assert_allclose(right.lines[0].get_ydata(), 2 * np.array(sizes, float) ** 3 / np.array(seconds))
    plt.close(fig)
    with pytest.raises(ValueError, match="equally long"):
        plots.padding_sweep([128, 256], [1e-5])
    with pytest.raises(ValueError, match="positive"):
        plots.padding_sweep([128], [0.0])
    with pytest.raises(ValueError, match="mxu_size"):
        plots.padding_sweep([128], [1e-5], mxu_size=0)


def test_simulations_are_bounded():
    with pytest.raises(ValueError, match="n_tiles must be at most"):
        systolic.tile_schedule(10**12, 8, 128)
    with pytest.raises(ValueError, match="MAX_CYCLES"):
        systolic.simulate_matmul(np.ones((10**5, 128)), np.ones((128, 128)))
    with pytest.raises(ValueError, match="MAX_PE_CYCLES"):
        systolic.simulate_matmul(np.ones((2000, 128)), np.ones((128, 256)))
    with pytest.raises(ValueError, match="record_cycles.*MAX_RECORD_PE_CYCLES"):
        systolic.simulate_matmul(np.ones((2, 2)), np.ones((2, 1)), array_size=256, record_cycles=4096)
    with pytest.raises(ValueError, match="array_size must be at most 256"):
        systolic.simulate_matmul(np.ones((2, 2)), np.ones((2, 1)), array_size=257)
    with pytest.raises(ValueError, match="record_cycles must be at most"):
        systolic.simulate_matmul(np.ones((2, 2)), np.ones((2, 2)), array_size=2, record_cycles=10**6)
