"""Chapter 9's published answers, derived by hand here (not by the reference functions), and the wrong answers
the issue named rejected by the checkers."""

from __future__ import annotations

import pytest

from tpu_notes import exercises

# TPU v5e, typed in from the published figures tpu_notes.hardware records (each with its source there): 197 TFLOP/s
# bf16 (Google Cloud's v5e page), 820 GB/s HBM, 90 GB/s per ICI link both directions together (the scaling book's
# 4.5e10 B/s each way), 1 us per ICI hop.
PEAK, HBM, W_ICI, HOP = 1.97e14, 8.2e11, 9.0e10, 1e-6


def _correct(qid, answer) -> bool:
    return exercises.grade(qid, answer).correct


def test_q1_rows_of_a_sharded_matvec():
    # [16,8]<=[8,16]T(1,0): 16 groups of 8 devices, so the 2048 local rows are one eighth of the weight
    assert _correct("ch09.q1", 8 * 2048)
    assert not _correct("ch09.q1", 16 * 2048)  # the number of groups, not their size
    assert not _correct("ch09.q1", 2048)


def test_q1b_the_group_of_device_3():
    # ids 0..127 as an 8x16 array: id = 16a + b. Transposed to 16x8, row b holds 16a + b for a = 0..7.
    group = tuple(16 * a + 3 for a in range(8))
    assert group == (3, 19, 35, 51, 67, 83, 99, 115)
    assert _correct("ch09.q1b", group)
    assert not _correct("ch09.q1b", tuple(range(8)))  # reading the iota untransposed: devices 0..7
    assert not _correct("ch09.q1b", tuple(range(48, 64, 2)))


def test_q5_each_op_bound_and_the_step_is_their_sum():
    # fusion.12: 6.9e10 / 1.97e14 = 350 us of math, 1.3e9 / 8.2e11 = 1.585 ms of HBM traffic -> memory, 1.585 ms
    t12 = max(6.9e10 / PEAK, 1.3e9 / HBM)
    assert t12 == pytest.approx(1.5854e-3, rel=1e-3)
    # fusion.40: 2.7e11 / 1.97e14 = 1.371 ms of math, 4e8 / 8.2e11 = 488 us -> compute, 1.371 ms
    t40 = max(2.7e11 / PEAK, 4.0e8 / HBM)
    assert t40 == pytest.approx(1.3706e-3, rel=1e-3)
    # all-reduce.3: V = 2 B x 2 x 1024 x 4096 = 16,777,216 B over the 4-chip y axis of a v5e 2x4 slice, which does
    # not wrap (only a full 16-chip v5e axis does). ReduceScatter on a line of N: N-1 hops of V/N at W/2 each way,
    # 2 (N-1)/N V / W = 1.5 V / W; AllReduce twice that, 3 V / W = 559 us; latency 2 x 3 hops x 1 us = 6 us.
    v = 2 * 2 * 1024 * 4096
    t_ar = max(2 * 2 * (4 - 1) / 4 * v / W_ICI, 2 * 3 * HOP)
    assert t_ar == pytest.approx(559.2e-6, rel=1e-3)
    step = t12 + t40 + t_ar
    assert step == pytest.approx(3.515e-3, rel=1e-3)
    right = {"fusion.12": "memory", "fusion.40": "compute", "all-reduce.3": "comms", "step": step}
    assert _correct("ch09.q5", right)
    # the wrong answers: the largest op taken as the step, and the AllReduce priced at HBM bandwidth
    assert not _correct("ch09.q5", {**right, "step": max(t12, t40, t_ar)})
    assert not _correct("ch09.q5", {**right, "step": t12 + t40 + 4 / HBM})
    # a wrong label: the AllReduce is not an HBM op, the attention-scores fusion is not compute-bound
    assert not _correct("ch09.q5", {**right, "all-reduce.3": "memory"})
    assert not _correct("ch09.q5", {**right, "fusion.12": "compute"})


def test_q6_a_tiled_kv_buffer_pads_head_size_96_to_128():
    # bf16[40,2048,96] with T(8,128): 2048 is a multiple of 8, 96 rounds up to 128; (2,1) packs row pairs
    padded = 40 * 2048 * 128 * 2
    assert padded == 20_971_520
    assert _correct("ch09.q6", padded)
    assert not _correct("ch09.q6", 40 * 2048 * 96 * 2)  # the logical size: the padding forgotten
    assert not _correct("ch09.q6", 40 * 2048 * 128 * 4)  # 4 bytes per element


def test_q2_q3_published_values():
    # q2: 2 x (32 x 1024) x 8192 x 32768 FLOPs = 1.759e13 over 8 chips at 1.97e14 FLOP/s = 11.2 ms
    flops = 2 * 32 * 1024 * 8192 * 32768
    assert _correct("ch09.q2", flops / 8 / PEAK)
    # q3: ReduceScatter of bf16[8,1024,8192] (134 MB) over 2 chips: ceil(1/2) = 1 hop of V/2 at W/2, V / W = 1.49 ms
    v = 2 * 8 * 1024 * 8192
    assert _correct("ch09.q3", v / W_ICI)
    assert not _correct("ch09.q3", v / HBM)


def test_q4_xla_counts_the_fusion_as_the_checker_does_and_wrong_counts_fail():
    from tpu_notes import profile
    from tpu_notes.exercises import ch09

    xla = profile.op_costs(ch09.Q4_HLO)["f"].flops  # what the reader computes
    # f32[128,64] x f32[64,512]: dot 2 x 128 x 64 x 512 = 8,388,608; max over 512 per row: 128 x 511 = 65,408;
    # subtraction 128 x 512 = 65,536
    assert xla == 8_519_552
    assert _correct("ch09.q4", xla)
    assert not _correct("ch09.q4", 2 * 128 * 64 * 512)  # the dot alone
    assert not _correct("ch09.q4", 2 * 64 * 64 * 256 + 64 * 255 + 64 * 256)  # the training step's fusion, printed above
