"""Chapters 1-4: the exercises changed so that no output above them prints their answer (issue 40).

Each changed exercise's reference is recomputed here from the library by a different route, and the quantity the
chapter prints above it (the exercise's old answer) is rejected by its checker.
"""

import pytest

from tpu_notes import exercises, hardware, roofline, systolic, topology
from tpu_notes.transformer import get_model
from tpu_notes.units import dtype_bytes


def _rejects(exercise_id, answer):
    return not exercises.grade(exercise_id, answer).correct


def test_ch01_new_quantities():
    v5p, v6e, card = (hardware.get_chip(n) for n in ("v5p", "v6e", "h100-pcie"))
    assert exercises.solution("ch01.q2") == pytest.approx(v5p.bf16_flops / v5p.hbm_bw * dtype_bytes("int4") / 2)
    assert exercises.solution("ch01.q5") == pytest.approx(card.bf16_flops / card.hbm_bw)
    assert exercises.solution("ch01.q6a") == pytest.approx(1 / 3)  # one OP per 3 int8 bytes
    assert exercises.solution("ch01.q7") == pytest.approx(2 * v6e.bf16_flops / v6e.ici_bw_oneway)
    assert exercises.solution("ch01.q1d")["lower"] == pytest.approx(
        roofline.matmul_time(768, 4096, 16384, "v5e", "int8").t_math
    )
    # what the chapter prints above them
    assert _rejects("ch01.q2", roofline.critical_batch_size("v5e", "bf16", "int8"))
    assert _rejects("ch01.q5", roofline.critical_batch_size("h100"))
    assert _rejects("ch01.q6a", roofline.elementwise_add_time(2**30, "v5e").intensity)
    assert _rejects("ch01.q7", 2 * hardware.get_chip("v5e").critical_intensity("bf16", bandwidth="ici_oneway"))


def test_ch02_new_quantities():
    v5e, v5p, v4p = (hardware.get_chip(n) for n in ("v5e", "v5p", "v4p"))
    per_cycle, peak = exercises.solution("ch02.q1")
    assert per_cycle == 4 * systolic.mxu_flops_per_cycle(128)
    assert peak == pytest.approx(4 * systolic.derived_peak_flops(v5e))  # four times the cells, same clock
    assert exercises.solution("ch02.q2") == pytest.approx(2 * systolic.vpu_flops(v5p, alus_per_lane=4))
    assert exercises.solution("ch02.q3") == [8, systolic.predicted_cycles(8, 256, 256, 256)]
    assert exercises.solution("ch02.q12")["cores"] == topology.pod("tpu7x").n_chips * 2
    assert exercises.solution("ch02.q14") == pytest.approx([v4p.hbm_bw / v4p.dcn_bw, v4p.ici_bw_oneway / v4p.dcn_bw])
    q15, q16 = exercises.solution("ch02.q15"), exercises.solution("ch02.q16")
    assert q16["speedup"] == pytest.approx(q15["total"] / q15["pcie"])  # plan 2 is left with the shared PCIe load
    assert _rejects("ch02.q1", [systolic.mxu_flops_per_cycle(128), systolic.derived_peak_flops(v5e)])
    assert _rejects("ch02.q3", [8, systolic.predicted_cycles(8, 128, 128, 128)])
    assert _rejects("ch02.q7", [systolic.padding_efficiency(300, 300, s) for s in (128, 256)])


def test_ch03_new_quantities():
    assert exercises.solution("ch03.q1") == [128 * 2048 // 32, 4 * 128 * 2048]
    assert exercises.solution("ch03.q11")[2] == pytest.approx(12288 / 3072)
    assert exercises.solution("ch03.q14") == [1024 * 2560 * 2, 1024 * 2560 * 2 / 8]
    assert exercises.solution("ch03.q16")[1] == 8192 * 32768 * 2 / 8
    assert _rejects("ch03.q1", [16384, 524288])
    assert _rejects("ch03.q14", [1024 * 2048 * 2, 1024 * 2048 * 2 / 8])


def test_ch04_new_quantities():
    mx, l70 = get_model("mixtral-8x7b"), get_model("llama3-70b")
    assert exercises.solution("ch04.q4") == pytest.approx(2 * 5120)  # T = 2D for MHA with F = 4D
    assert exercises.solution("ch04.q5")["active_fraction"] == pytest.approx(mx.active_param_count() / mx.param_count())
    assert exercises.solution("ch04.q7") == pytest.approx(
        l70.attention_flops(8192, causal=True) / l70.flops_per_token(8192, training=True)
    )
    assert exercises.solution("ch04.q8")["none"] == l70.checkpoint_bytes(16 * 8192, "none")
    assert _rejects("ch04.q4", 16384)
    ds = get_model("deepseek-v3")
    assert _rejects(
        "ch04.q5",
        {
            "active_fraction": ds.active_param_count() / ds.param_count(),
            "critical_batch_bf16": ds.critical_batch("v5e"),
            "critical_batch_int8": ds.critical_batch("v5e", "bf16", weight_dtype="int8"),
        },
    )
    l8 = get_model("llama3-8b")
    assert _rejects(
        "ch04.q10",
        [
            l70.attention_intensity(8192, 8192),
            l70.attention_intensity(1, 8192),
            hardware.get_chip("v5e").critical_intensity("bf16") / l70.attention_intensity(1, 1),
        ],
    )
    assert _rejects("ch04.q8", {p: l8.checkpoint_bytes(16 * 8192, p) for p in ("none", "full_block")})
