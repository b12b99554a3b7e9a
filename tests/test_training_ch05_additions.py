"""Chapter 5's additions: zero-bubble pipeline schedules, the optimisation critical batch, optically reshaped tori,
the renumbered exercises (Exercise 5.M checks ch05.qM) and the answers of the reworked pod-limit exercises.

Published values are checked against hand derivations written out here, not against the reference functions.
"""

import json
import math
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from tpu_notes import collectives, exercises, training  # noqa: E402
from tpu_notes.topology import Slice  # noqa: E402
from tpu_notes.training import pipeline  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
NB = ROOT / "notebooks" / "05_training_parallelism.ipynb"

# v5p's published figures (tpu_notes.hardware; the scaling book's tpus.md): 4.59e14 bf16 FLOP/s per chip,
# 1.8e11 B/s bidirectional per ICI link, so alpha = C / W_ici = 2550 tokens and 850 over three axes.
C_V5P, W_ICI = 4.59e14, 1.8e11
PER_CHIP_3AXES = C_V5P / W_ICI / 3  # = 850
POD = 16 * 20 * 28  # = 8960 chips


# --- the exercise numbering -----------------------------------------------------------------------------------


def _cells():
    return json.loads(NB.read_text())["cells"]


def test_exercise_m_checks_ch05_qm_and_ids_run_1_to_22():
    cells = _cells()
    seen = []
    for i, cell in enumerate(cells):
        src = "".join(cell["source"])
        m = re.search(r"^### Exercise 5\.(\d+) ", src, re.M)
        if cell["cell_type"] != "markdown" or not m:
            continue
        number = int(m.group(1))
        following = "".join("".join(c["source"]) for c in cells[i + 1 : i + 3] if c["cell_type"] == "code")
        ids = set(re.findall(r'exercises\.check\("(ch05\.q\w+)"', following))
        assert ids == {f"ch05.q{number}"}, f"Exercise 5.{number} checks {ids}"
        seen.append(number)
    assert seen == list(range(1, 23))
    assert exercises.all_ids("ch05") and set(exercises.all_ids("ch05")) == {f"ch05.q{i}" for i in range(1, 23)}


# --- the pod-limit exercises (5.2, 5.4) ---------------------------------------------------------------------


def test_exercise_5_2_the_ici_bound_exceeds_a_pod_and_five_pods_share_the_batch():
    # The scaling book (training.md): a 40M batch "would allow us to scale to roughly 47,000 chips, or around 5
    # TPUv5 pods". By hand: 40e6 / 850 = 47,059 chips; each pod needs 850 x 8960 = 7,616,000 tokens, so
    # floor(40e6 / 7,616,000) = floor(5.25) = 5 whole pods.
    ref = exercises.solution("ch05.q2")
    assert ref["chips_ici_bound"] == pytest.approx(47_000, rel=0.01)
    assert ref["chips_ici_bound"] > POD
    assert ref["pods"] == 5 == math.floor(40e6 / (PER_CHIP_3AXES * POD))
    assert exercises.grade("ch05.q2", {"chips_ici_bound": 47_059, "pods": 5}).correct
    # the unrounded pod count, or the old single number, is not the answer
    assert not exercises.grade("ch05.q2", {"chips_ici_bound": 47_059, "pods": 47_059 / POD}).correct
    assert not exercises.grade("ch05.q2", 47_059).correct


def test_exercise_5_4_two_pods_and_the_days_they_take():
    # 16e6 / 7,616,000 = 2.10 -> 2 whole pods = 17,920 chips. Time: Llama 3 70B trains at 6 FLOPs per parameter
    # and token, counting 70,553,706,496 parameters less the 128,256 x 8,192 input embedding (a lookup):
    # 6 x 69.5e9 x 15e12 / (17,920 x 4.59e14 x 0.5) s = 17.6 days.
    flops_per_token = 6 * (70_553_706_496 - 128_256 * 8_192)
    days = flops_per_token * 15e12 / (2 * POD * C_V5P * 0.5) / 86_400
    assert days == pytest.approx(17.6, abs=0.05)
    ref = exercises.solution("ch05.q4")
    assert ref["pods"] == 2 and ref["days"] == pytest.approx(days, rel=1e-3)
    # the old answer, 18,824 chips beyond a pod (16.8 days), is rejected
    assert not exercises.grade("ch05.q4", {"pods": 18_824 / POD, "days": 16.8}).correct


# --- the optimisation critical batch ------------------------------------------------------------------------


def test_tradeoff_identity_and_the_factor_two_at_the_critical_batch():
    # McCandlish et al. 2018, eq. 2.11: (S/S_min - 1)(E/E_min - 1) = 1; at B = B_crit both ratios are 2.
    for b in (1e4, 3e5, 7.6e6, 1e9):
        t = training.batch_tradeoff(b, 3e5)
        assert (t.steps_ratio - 1) * (t.data_ratio - 1) == pytest.approx(1.0)
    t = training.batch_tradeoff(3e5, 3e5)
    assert t.steps_ratio == pytest.approx(2.0) and t.data_ratio == pytest.approx(2.0)


def test_noise_scale_from_two_batches_inverts_the_expected_norms():
    # E|G_B|^2 = |G|^2 + tr(Sigma) / B. With |G|^2 = 2 and tr = 30: B = 8 -> 5.75, B = 512 -> 2.05859375.
    est = training.noise_scale_from_batches(8, 2 + 30 / 8, 512, 2 + 30 / 512)
    assert est.grad_sq_norm == pytest.approx(2.0) and est.trace_cov == pytest.approx(30.0)
    assert est.b_simple == pytest.approx(15.0) == training.noise_scale(2.0, 30.0).b_simple
    with pytest.raises(ValueError, match="batch_big"):
        training.noise_scale_from_batches(512, 2.1, 8, 5.0)
    with pytest.raises(ValueError, match="sq_norm_small"):
        training.noise_scale_from_batches(8, 1.0, 512, 2.0)  # the small batch must be the noisier


def test_noise_scale_estimate_on_least_squares_matches_the_exact_value():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(2048, 8))
    y = X @ rng.normal(size=8) + rng.normal(size=2048)
    g = (X @ np.zeros(8) - y)[:, None] * X
    exact = training.noise_scale(np.sum(g.mean(0) ** 2), np.sum(g.var(0)))

    def sq(b):
        idx = rng.integers(0, len(g), size=(4000, b))
        return np.mean(np.sum(g[idx].mean(axis=1) ** 2, axis=1))

    est = training.noise_scale_from_batches(4, sq(4), 256, sq(256))
    assert est.b_simple == pytest.approx(exact.b_simple, rel=0.15)


def test_kaplan_fit_and_exercise_5_3():
    # Kaplan et al. 2020, eq. 1.4: B_crit = 2e8 / L^(1/0.21). At L = 2.2: 2.2^(4.762) = exp(0.7885 / 0.21) = 42.72,
    # so B_crit = 4.68e6 tokens. A full pod's floor is 850 x 8960 = 7,616,000 tokens: E/E_min = 1 + 7.616/4.682
    # = 2.63 and S/S_min = 1 + 4.682/7.616 = 1.61.
    assert training.kaplan_critical_batch(2.2) == pytest.approx(4.68e6, rel=2e-3)
    assert training.kaplan_critical_batch(1.0) == pytest.approx(2e8)
    ref = exercises.solution("ch05.q3")
    assert ref["critical_batch_tokens"] == pytest.approx(4.68e6, rel=2e-3)
    assert ref["data_ratio"] == pytest.approx(2.63, abs=0.01) and ref["steps_ratio"] == pytest.approx(1.61, abs=0.01)
    assert not exercises.grade("ch05.q3", {**ref, "data_ratio": ref["steps_ratio"]}).correct  # swapped


# --- zero-bubble pipelines ----------------------------------------------------------------------------------


@pytest.mark.parametrize("P,M,tf,tb", [(4, 8, 1.0, 2.0), (8, 32, 1.0, 2.0), (3, 7, 0.7, 1.9), (2, 2, 1.0, 1.0)])
def test_1f1b_formula_matches_the_task_by_task_simulation(P, M, tf, tb):
    sim = pipeline.bubble_fraction(pipeline.simulate(P, M, "1f1b", tf, tb))
    assert training.schedule_bubble_fraction("1f1b", P, M, tf, tb) == pytest.approx(sim)
    assert training.schedule_bubble_fraction("gpipe", P, M, tf, tb) == pytest.approx((P - 1) / (M + P - 1))


def test_zero_bubble_formulas_against_the_papers():
    # Qi et al. 2023 (their README's table, t_F = t_B = t_W): bubble rate (p-1)/m for 1F1B, (p-1)/(3m) for ZB1P,
    # with the bubble rate = idle / (m (t_F + t_B + t_W)). Here t_B = 2 is the whole backward, t_W = 1.
    p, m = 8, 24
    assert training.bubble_time("1f1b", p, 1, 2, 1) / (m * 3) == pytest.approx((p - 1) / m)
    assert training.bubble_time("zb-h1", p, 1, 2, 1) / (m * 3) == pytest.approx((p - 1) / (3 * m))
    # DeepSeek-V3, Table 2: DualPipe (PP/2 - 1)(F&B + B - 3W); without overlap F&B = 3: (4 - 1)(3 + 2 - 3) = 6.
    assert training.bubble_time("dualpipe", 8, 1, 2, 1) == pytest.approx(6.0)
    assert training.bubble_time("dualpipe", 8, 1, 2, 1, overlapped_time=2.5) == pytest.approx(3 * 1.5)
    # a weight pass too long for the gaps: clamped at no bubble
    assert training.bubble_time("zb-h1", 8, 1, 2, 1.9) == 0.0


def test_exercise_5_10():
    # 1F1B: 15 / (48 + 15) = 0.2381. ZB-H1: idle 15 x (1 + 2 - 1.6) = 21 against 48 x 3 = 144: 21/165 = 0.12727.
    ref = exercises.solution("ch05.q10")
    assert ref["one_f_one_b"] == pytest.approx(15 / 63) and ref["zb_h1"] == pytest.approx(21 / 165)
    assert not exercises.grade("ch05.q10", {"one_f_one_b": 15 / 63, "zb_h1": 15 / 63 / 3}).correct
    assert not exercises.grade("ch05.q10", {"one_f_one_b": 15 / 79, "zb_h1": 21 / 213}).correct  # 64 microbatches'


def test_exercises_5_6_5_9_5_14_5_18_5_21_changed_cases():
    """The cases the chapter does not print: Llama 3 70B on v4 (F / alpha = 28,672 / 3056 = 9.38), 12 stages of 40
    microbatches (11 / 51), Llama 2 13B's replica with gradients (12 B per parameter), 8192-token sequences for the
    planner (512 sequences on 4096 chips: at least 8 chips per sequence), Llama 3 8B's FP8 gain at 16,384 tokens."""
    from tpu_notes import exercises
    from tpu_notes.transformer import get_model

    alpha_v4 = training.ici_intensity("v4p")
    assert exercises.solution("ch05.q6") == pytest.approx(28_672 / alpha_v4)
    assert not exercises.grade("ch05.q6", 28_672 / training.ici_intensity("v5p")).correct  # v5p's 11.2
    assert exercises.solution("ch05.q9") == pytest.approx(11 / 51)
    assert not exercises.grade("ch05.q9", 7 / 39).correct  # 8 stages of 32
    p13 = get_model("llama2-13b").param_count()
    assert exercises.solution("ch05.q14") == pytest.approx(12 * p13)
    assert not exercises.grade("ch05.q14", 10 * p13).correct  # gradients left out (the 130 GB of 5.13)
    # 512 sequences on 4096 chips: each sequence shared by at least 8; the planner's first layout shares no wider
    assert exercises.solution("ch05.q18") == 4096 // (4 * 2**20 // 8192)
    assert not exercises.grade("ch05.q18", 4).correct  # 4096-token sequences' answer
    ref = exercises.solution("ch05.q21")
    g = training.fp8_gain("llama3-8b", "h100", 16_384)
    assert ref["fp8_fraction"] == pytest.approx(g.fp8_fraction) and ref["fp8_fraction"] < 0.8
    assert not exercises.grade("ch05.q21", {"fp8_fraction": 0.814, "speedup": 1.686}).correct  # 8192 tokens


def test_pipeline_formulas_refuse_impossible_inputs():
    with pytest.raises(ValueError, match="weight_time"):
        training.bubble_time("zb-h1", 8, 1.0, 2.0, 2.5)
    with pytest.raises(ValueError, match="stages"):
        training.bubble_time("dualpipe", 7)
    with pytest.raises(ValueError, match="overlapped_time"):
        training.bubble_time("1f1b", 8, overlapped_time=2.0)
    with pytest.raises(ValueError, match="overlapped_time"):
        training.bubble_time("dualpipe", 8, 1.0, 2.0, 1.0, overlapped_time=1.5)  # below max(t_F, t_B)
    with pytest.raises(ValueError, match="microbatches"):
        training.schedule_bubble_fraction("zb-h1", 8, 4)
    with pytest.raises(ValueError, match="schedule"):
        training.bubble_time("zb-h2", 8)


# --- optically reshaped tori --------------------------------------------------------------------------------


def test_cube_shapes_of_4096_and_2048_chips():
    # 64 cubes = a x b x c with a <= b <= c: (1,1,64) (1,2,32) (1,4,16) (1,8,8) (2,2,16) (2,4,8) (4,4,4).
    assert sorted(training.cube_shapes("v5p", 4096)) == sorted(
        [(4, 4, 256), (4, 8, 128), (4, 16, 64), (4, 32, 32), (8, 8, 64), (8, 16, 32), (16, 16, 16)]
    )
    assert training.cube_shapes("v5p", 4096)[0] == (16, 16, 16)  # the most compact first
    # 32 cubes: (1,1,32) (1,2,16) (1,4,8) (2,2,8) (2,4,4)
    assert len(training.cube_shapes("v5p", 2048)) == 5
    assert training.largest_slice("v5p") == 6144 and training.largest_slice("v4p") == 4096
    with pytest.raises(ValueError, match="n_chips"):
        training.cube_shapes("v5p", 4000)
    with pytest.raises(ValueError, match="n_chips"):
        training.cube_shapes("v5p", 8192)  # above the 6144-chip slice cap
    with pytest.raises(ValueError, match="chip"):
        training.cube_shapes("v5e", 256)  # a 2D torus has no optical cubes


def test_ring_and_line_by_hand_and_against_slice():
    # 8 chips, V bytes, W bidirectional per link: a ring moves ceil(7/2) = 4 hops of V/8 at W/2 = V/W, a line
    # 7 hops of V/8 at W/2 = 1.75 V/W; the latency terms (4 and 7 hops of 1 us) are far smaller, and the
    # collectives model takes the larger of the two terms.
    V = 64e6
    ring = training.group_collective_time("v5p", (8, 16, 32), (8, 1, 1), "all_gather", V)
    line = training.group_collective_time("v5p", (16, 16, 16), (8, 1, 1), "all_gather", V)
    assert ring.total == pytest.approx(V / W_ICI) and ring.latency_time == pytest.approx(4e-6)
    assert line.total == pytest.approx(1.75 * V / W_ICI) and line.latency_time == pytest.approx(7e-6)
    # the whole 16x16x16 slice: the same as Slice.collective_time over every axis
    whole = training.group_collective_time("v5p", (16, 16, 16), (16, 16, 16), "all_reduce", V)
    assert whole.total == pytest.approx(Slice("v5p", (16, 16, 16)).collective_time("all_reduce", V).total)
    assert training.group_collective_time("v5p", (16, 16, 16), (1, 1, 1), "all_gather", V).total == 0.0
    assert collectives.all_gather_time(V, 8, W_ICI, wraparound=True).total == pytest.approx(ring.total)


def test_one_axis_group_prefers_an_exact_axis():
    assert training.one_axis_group((8, 16, 32), 8) == (8, 1, 1)
    assert training.one_axis_group((16, 16, 16), 8) == (8, 1, 1)
    assert training.one_axis_group((4, 4, 256), 8) == (1, 1, 8)
    with pytest.raises(ValueError, match="degree"):
        training.one_axis_group((4, 4, 4), 8)
    with pytest.raises(ValueError, match="group"):
        training.group_collective_time("v5p", (16, 16, 16), (3, 1, 1), "all_gather", 1e6)
    with pytest.raises(ValueError, match="shape"):
        training.group_collective_time("v5p", (6, 8, 8), (2, 1, 1), "all_gather", 1e6)


def test_exercise_5_8():
    # 32 cubes: 4x4x128, 4x8x64, 4x16x32 have a 4-long axis (a ring), 8x8x32 and 8x16x16 do not. 64 MB over 4
    # chips: ring 2 hops of V/4 at W/2 = V/W; line on an 8-axis 3 hops = 1.5 V/W (both bandwidth-bound: the
    # 2-3 us of hops are far below V/W = 356 us), so the slowdown is 1.5.
    slowdown = 1.5
    ref = exercises.solution("ch05.q8")
    assert ref["ring_shapes"] == 3 and ref["slowdown"] == pytest.approx(slowdown, rel=1e-6)
    assert not exercises.grade("ch05.q8", {"ring_shapes": 5, "slowdown": 1.5}).correct


# --- the figures --------------------------------------------------------------------------------------------


def test_loss_figure_draws_curves_and_differences():
    from tpu_notes.plots.training import loss_curves_chart

    base = np.array([6.0, 5.0, 4.0])
    curves = {"1 device": base, "data=8": base + 2e-7, "tensor=8": base.copy()}
    fig = loss_curves_chart(curves, reference="1 device")
    left, right = fig.axes
    assert right.get_yscale() == "log" and "2.0e-07" in right.get_title()
    assert len(left.get_legend().get_texts()) == 4  # the reference line and three layouts' markers
    plt.close(fig)
    with pytest.raises(ValueError, match="reference"):
        loss_curves_chart(curves, reference="nope")
    with pytest.raises(ValueError, match="same length"):
        loss_curves_chart({"a": [1.0, 2.0], "b": [1.0]})
    with pytest.raises(ValueError, match="curves"):
        loss_curves_chart({})


def test_bubble_chart_draws_three_schedules():
    from tpu_notes.plots.training import pipeline_bubble_chart

    fig = pipeline_bubble_chart(stages=8, max_microbatches=40)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert len(labels) == 3 and any("ZB-H1" in t for t in labels)
    plt.close(fig)
    with pytest.raises(ValueError, match="max_microbatches"):
        pipeline_bubble_chart(stages=8, max_microbatches=4)


def test_exercise_5_17_caps_the_10m_token_fsdp_group_at_a_pod():
    """10M tokens over 850 tokens per chip (C / W_ici / 3 on v5p) is 11,765 chips, more than the 16 x 20 x 28 = 8,960
    of a pod, where ICI and with it FSDP stop (Section 5.8): one FSDP group can use 8,960 of them."""
    from tpu_notes import exercises

    ref = exercises.solution("ch05.q17")
    assert ref["max_chips_10M"] == pytest.approx(10e6 / 850, rel=2e-3)  # alpha = 2550 to three figures
    assert ref["pods_10M"] == pytest.approx(ref["max_chips_10M"] / (16 * 20 * 28)) and ref["pods_10M"] > 1
    for wrong in ({**ref, "pods_10M": 1}, {**ref, "pods_10M": ref["max_chips_10M"]}):  # whole pods; chips
        assert not exercises.grade("ch05.q17", wrong).correct
    assert exercises.grade("ch05.q17", ref).correct
