"""Chapter 11's exercises that issue 40 moved off the numbers the chapter prints (another chip, size or pod),
their answers derived by hand here from published figures (not by the reference functions), and the old
answers, which the page prints above the question, rejected."""

from __future__ import annotations

import pytest

from tpu_notes import exercises

# Published figures the chip table records (each with its source in tpu_notes.hardware): H100 989 TFLOP/s bf16,
# 450 GB/s of NVLink per GPU each way; B200 2.25 PFLOP/s, 900 GB/s; A100 312 TFLOP/s, 300 GB/s, 8 NICs of
# 25 GB/s; every H100 or B200 node 8 NICs of 50 GB/s.
H100_C, H100_NVL = 989e12, 450e9
B200_C, B200_NVL = 2.25e15, 900e9
A100_C, A100_NVL, A100_NODE = 312e12, 300e9, 8 * 25e9
NIC = 50e9


def _correct(qid, answer) -> bool:
    return exercises.grade(qid, answer).correct


def test_q1_a100_has_16_cores_per_subpartition():
    v5p = 2 * 4 * 8 * 128
    assert _correct("ch11.q1", {"a100": 108 * 4 * 16, "b200": 148 * 4 * 32, "v5p": v5p})
    assert not _correct("ch11.q1", {"a100": 108 * 4 * 32, "b200": 148 * 4 * 32, "v5p": v5p})
    assert not _correct("ch11.q1", {"h100": 132 * 4 * 32, "b200": 148 * 4 * 32, "v5p": v5p})  # the old key


def test_q6_a100_smem_and_registers():
    assert _correct("ch11.q6", {"smem": 108 * 192e3, "registers": 108 * 256 * 1024})
    assert not _correct("ch11.q6", {"smem": 132 * 256e3, "registers": 132 * 256 * 1024})  # the H100's


def test_q9_b200_node_bisection():
    assert _correct("ch11.q9", 2 * 4 * B200_NVL)
    assert not _correct("ch11.q9", 2 * 4 * H100_NVL)
    assert not _correct("ch11.q9", 4 * B200_NVL)  # one direction only


def test_q11_a_2048_gpu_pod():
    answer = {"su_to_spine": 256 * NIC, "bisection": 2048 * NIC}
    assert _correct("ch11.q11", answer)
    assert not _correct("ch11.q11", {**answer, "bisection": 1024 * NIC})  # the 1024-GPU pod's


def test_q16_b200_alltoall_across_two_nodes():
    inside = 7 / (64 * B200_NVL)  # V (N - 1) / (N^2 W) per byte
    across = (1 - 8 / 16) / 16 / NIC  # each member's off-node share through its NIC
    assert _correct("ch11.q16", across / inside)
    assert across / inside == pytest.approx(5.14, rel=1e-2)
    assert not _correct("ch11.q16", 2.57)  # the H100's ratio


def test_q17_a_4_gb_sharp_allreduce():
    assert _correct("ch11.q17", {"seconds": 4e9 / H100_NVL, "switch_egress_bytes": 8 * 4e9})
    assert not _correct("ch11.q17", {"seconds": 1e9 / H100_NVL, "switch_egress_bytes": 8e9})


def test_q19_4_gb_over_2048_gpus():
    assert _correct("ch11.q19", 4e9 * 255 / (256 * 8 * NIC))
    assert not _correct("ch11.q19", 4e9 / (8 * NIC) * 1.5)


def test_q24_a100_thresholds():
    assert _correct("ch11.q24", {"in_node": A100_C / A100_NVL, "across_nodes": A100_C / A100_NODE})
    assert not _correct("ch11.q24", {"in_node": H100_C / H100_NVL, "across_nodes": H100_C / (8 * NIC)})


def test_q27_llama3_405b_tensor_parallelism():
    F = 53_248
    one = F * H100_NVL / H100_C
    two = 8 + F * 8 * NIC / H100_C  # F > (C / W_node)(Y - 8)
    assert _correct("ch11.q27", {"one_node": one, "two_nodes": two})
    assert not _correct("ch11.q27", {"one_node": 28_672 * H100_NVL / H100_C, "two_nodes": two})


def test_q29_b200_rooflines():
    assert _correct("ch11.q29", {"tp_intensity": B200_C / B200_NVL, "dp_across_nodes": B200_C / (8 * NIC)})
    assert not _correct("ch11.q29", {"tp_intensity": B200_C / NIC, "dp_across_nodes": B200_C / (8 * NIC)})


def test_q32_llama3_70b_on_a_b200_node():
    assert _correct("ch11.q32", 28_672 * B200_NVL / B200_C)
    assert not _correct("ch11.q32", 28_672 * H100_NVL / H100_C)


def test_q34_megatron_batches_against_thresholds():
    crit70, crit314 = H100_C / (8 * NIC) / 2, H100_C / (8 * NIC) / 8
    answer = {"ratio70": 2048 / crit70, "ratio314": 2048 / crit314}
    assert _correct("ch11.q34", answer)
    assert not _correct("ch11.q34", {**answer, "ratio314": crit314})
    assert not _correct("ch11.q34", {**answer, "ratio70": 2048 / (H100_C / (8 * NIC))})
