"""Chapter 6's exercise answers, derived by hand from published figures, not from the library's reference functions.

Every value below is written out from the public configurations and datasheets, with the arithmetic in the test:

- Llama 3 configurations (the released checkpoints' ``config.json``: meta-llama/Meta-Llama-3-8B, Meta-Llama-3-70B,
  Llama-3.1-405B): layers L, d_model D, d_ff F, query heads N, key/value heads K, head width H = 128, vocabulary
  V = 128,256, untied input and output embeddings, two RMSNorm vectors per layer and one final one.
- TPU v5p: 4.59e14 bf16 FLOP/s, 96e9 bytes of HBM, 9e10 B/s one way (1.8e11 both ways) per ICI link; TPU v5e:
  16e9 bytes of HBM (the scaling book's hardware table, jax-ml/scaling-book tpus.md).
- The chapter's recipe (the scaling book's applied-training.md): bf16 weights (2 B), fp32 Adam moments (8 B), no
  gradients, ``r`` checkpoints of D bf16 values per layer and token; 6 FLOPs per token per weight a token multiplies
  by (every parameter but the input embedding table, a lookup, and the norms' scales); 15e12 tokens; 86,400 s a day.

Each test also shows that plausible wrong answers (the book's own numbers for the other case, a factor slip) are
rejected by the checker, and that the worked values quoted in the hints are the hand-derived ones.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from tpu_notes import exercises  # noqa: E402
from tpu_notes.units import fmt  # noqa: E402

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "06_training_llama3.ipynb"

# Published configurations: (L, D, F, N, K)
LLAMA = {"8b": (32, 4096, 14336, 32, 8), "70b": (80, 8192, 28672, 64, 8), "405b": (126, 16384, 53248, 128, 8)}
H, V = 128, 128_256
# Parameter counts of the released checkpoints (the safetensors index's total size / 2 bytes)
RELEASED = {"8b": 8_030_261_248, "70b": 70_553_706_496, "405b": 405_853_388_800}

V5P_FLOPS, V5P_HBM, V5P_ICI_BIDI = 4.59e14, 96e9, 1.8e11
V5E_HBM = 16e9
POD = 16 * 20 * 28  # v5p pod: 8960 chips
TOKENS, DAY = 15e12, 86_400
ALPHA = V5P_FLOPS / V5P_ICI_BIDI  # 2550: the v5p's FLOPs per byte of one ICI link


def params(size: str) -> int:
    """L (3DF + 2DH(N + K) + 2D) + 2VD + D: MLP, attention, norms; input and output embeddings; the final norm."""
    L, D, F, N, K = LLAMA[size]
    return L * (3 * D * F + 2 * D * H * (N + K) + 2 * D) + 2 * V * D + D


def matmul_params(size: str) -> int:
    """The weights a token multiplies by: all but the input embedding table (a lookup) and the 2L + 1 RMSNorm
    vectors (elementwise scales)."""
    L, D = LLAMA[size][:2]
    return params(size) - V * D - (2 * L + 1) * D


def step_bytes(size: str, tokens: float, checkpoints: int) -> float:
    """10 B per parameter (bf16 weights + fp32 Adam) + checkpoints x D x 2 B x L per token."""
    L, D = LLAMA[size][:2]
    return 10 * params(size) + checkpoints * D * 2 * L * tokens


def _correct(qid, answer) -> bool:
    return exercises.grade(qid, answer).correct


def test_hand_counts_match_the_released_checkpoints():
    # 70B by hand: 80 x (704,643,072 + 150,994,944 + 16,384) + 2,101,346,304 + 8,192
    assert 80 * (3 * 8192 * 28672 + 2 * 8192 * 128 * 72 + 2 * 8192) + 2 * 128_256 * 8192 + 8192 == RELEASED["70b"]
    for size, count in RELEASED.items():
        assert params(size) == count
    assert matmul_params("405b") == 405_853_388_800 - 2_101_346_304 - 253 * 16384 == 403_747_897_344


def test_q5_full_recomputation_floor():
    # 10 x 70,553,706,496 = 705.5 GB; 1 x 8192 x 2 x 80 x 4e6 = 5.243 TB; total 5.948 TB / 96 GB = 61.96 -> 62
    total = step_bytes("70b", 4e6, 1)
    hand = math.ceil(total / V5P_HBM)
    assert hand == 62
    assert exercises.solution("ch06.q5") == hand
    assert _correct("ch06.q5", 62)
    four = math.ceil(step_bytes("70b", 4e6, 4) / V5P_HBM)  # the chapter's own answer with four checkpoints
    assert four == 226
    for wrong in (four, 31, 93):
        assert not _correct("ch06.q5", wrong)
    hint = exercises.get("ch06.q5").hint
    for value in (10 * params("70b"), 8192 * 2 * 80 * 4e6, 4 * 8192 * 2 * 80 * 4e6):
        assert fmt(value, "B") in hint  # 706 GB, 5.24 TB, 21 TB


def test_q6_llama_8b_on_a_v5e_pod():
    # 10 x 8,030,261,248 = 80.3 GB; 4 x 4096 x 2 x 32 x 4e6 = 4.194 TB; / 256 = 16.70 GB; / 16 GB = 1.044
    per_chip = step_bytes("8b", 4e6, 4) / 256
    assert per_chip == pytest.approx(16.6977e9, rel=1e-4)
    ref = exercises.solution("ch06.q6")
    assert ref["bytes_per_chip"] == pytest.approx(per_chip, rel=1e-9)
    assert ref["fraction_of_hbm"] == pytest.approx(per_chip / V5E_HBM, rel=1e-9)
    assert per_chip / V5E_HBM > 1  # it does not fit
    assert _correct("ch06.q6", {"bytes_per_chip": per_chip, "fraction_of_hbm": per_chip / V5E_HBM})
    seventy_per_pod_chip = step_bytes("70b", 4e6, 4) / POD  # the chapter's printed 2.42 GB, a different case
    for wrong in (
        {"bytes_per_chip": seventy_per_pod_chip, "fraction_of_hbm": seventy_per_pod_chip / V5P_HBM},
        {"bytes_per_chip": per_chip, "fraction_of_hbm": per_chip / V5P_HBM},  # the v5p's HBM, not the v5e's
        {"bytes_per_chip": per_chip * 2, "fraction_of_hbm": per_chip * 2 / V5E_HBM},  # bf16 checkpoints counted twice
    ):
        assert not _correct("ch06.q6", wrong)
    hint = exercises.get("ch06.q6").hint
    assert fmt(10 * params("8b"), "B") in hint and fmt(4 * 4096 * 2 * 32 * 4e6, "B") in hint
    assert f"{RELEASED['8b']:,}" in hint


def test_q8_fsdp_alone_on_the_largest_slice():
    # 4 x 2^20 / (16 x 16 x 24 = 6144) = 682.67 tokens per chip; alpha / 3 = 2550 / 3 = 850; 682.67 / 850 = 0.803
    assert ALPHA == pytest.approx(2550)
    tokens = 4 * 2**20 / (16 * 16 * 24)
    assert tokens == pytest.approx(682.667, abs=0.001)
    ref = exercises.solution("ch06.q8")
    assert ref["tokens_per_chip"] == pytest.approx(tokens)
    assert ref["tokens_over_critical"] == pytest.approx(tokens / 850)
    assert ref["tokens_over_critical"] < 1  # FSDP alone is communication-bound on the largest slice
    assert _correct("ch06.q8", {"tokens_per_chip": 683, "tokens_over_critical": 0.8})
    for wrong in (
        {"tokens_per_chip": 4 * 2**20 / POD, "tokens_over_critical": 4 * 2**20 / POD / 850},  # the whole pod (468)
        {"tokens_per_chip": 1024, "tokens_over_critical": 1024 / 850},  # the 16 x 16 x 16 cube
        {"tokens_per_chip": tokens, "tokens_over_critical": tokens / 2550},  # one axis's alpha, not three
    ):
        assert not _correct("ch06.q8", wrong)
    assert "2550 / 3 = 850" in exercises.get("ch06.q8").hint


def test_q9_mixed_fsdp_tensor_for_405b():
    # alpha^2 / (M_X M_Y F) = 2550^2 / (2 x 53,248) = 61.06; X = sqrt(2^24 / 53,248 x 2 x 8960) = 2376.2
    F = LLAMA["405b"][2]
    crit = ALPHA**2 / (2 * F)
    x_opt = math.sqrt(16 * 2**20 / F * 2 * POD)
    assert crit == pytest.approx(61.06, abs=0.01) and x_opt == pytest.approx(2376.2, abs=0.1)
    ref = exercises.solution("ch06.q9")
    assert ref["critical_tokens_per_chip"] == pytest.approx(crit, rel=1e-9)
    assert ref["optimal_fsdp"] == pytest.approx(x_opt, rel=1e-9)
    assert 16 * 2**20 / POD > crit  # the pod's 1872 tokens per chip clear the bar
    f70 = LLAMA["70b"][2]
    for wrong in (
        {"critical_tokens_per_chip": ALPHA**2 / (2 * f70), "optimal_fsdp": math.sqrt(4 * 2**20 / f70 * 2 * POD)},
        {"critical_tokens_per_chip": 4 * crit, "optimal_fsdp": x_opt},  # the older "sum" convention
        {"critical_tokens_per_chip": crit, "optimal_fsdp": math.sqrt(16 * 2**20 / F * POD)},  # M_X / M_Y left out
    ):
        assert not _correct("ch06.q9", wrong)
    hint = exercises.get("ch06.q9").hint
    assert "2550" in hint and "53,248" in hint and "8960" in hint


def test_q12_eight_pods_against_the_ideal():
    # 6 x 403,747,897,344 x 15e12 = 3.634e25 FLOPs over 8 x 8960 x 4.59e14 FLOP/s = 1.1045e6 s = 12.78 days
    ideal = 6 * matmul_params("405b") * TOKENS / (8 * POD * V5P_FLOPS) / DAY
    assert ideal == pytest.approx(12.7829, abs=0.0001)
    ref = exercises.solution("ch06.q12")
    assert ref["ideal_days"] == pytest.approx(ideal, rel=1e-9)
    # The fraction divides by the planner's roofline days: the one library input. Its step is at least the model
    # FLOPs at peak on the chips it uses, so the fraction cannot exceed the share of the eight pods it uses.
    from tpu_notes.exercises.ch06 import best_slice

    option = best_slice("llama3-405b", 16 * 2**20, 8192, 8)
    days = option.step_s * TOKENS / 2**24 / DAY
    assert ref["fraction"] == pytest.approx(ideal / days, rel=1e-9)
    assert 0 < ref["fraction"] <= option.chips / (8 * POD)
    for wrong in (
        {"ideal_days": 6 * params("405b") * TOKENS / (8 * POD * V5P_FLOPS * 0.4) / DAY, "fraction": ref["fraction"]},
        {"ideal_days": ideal, "fraction": days / ideal},  # inverted
        {"ideal_days": ideal * 8, "fraction": ref["fraction"]},  # one pod, not eight
    ):
        assert not _correct("ch06.q12", wrong)
    assert f"{matmul_params('405b'):,}" in exercises.get("ch06.q12").hint


def test_q13_405b_on_its_memory_floor_with_full_recomputation():
    # 10 x 405,853,388,800 = 4.06 TB; 1 x 16384 x 2 x 126 x 2^24 = 69.27 TB; / 96 GB = 763.8 -> 764 chips
    chips = math.ceil(step_bytes("405b", 2**24, 1) / V5P_HBM)
    assert chips == 764
    days = 6 * matmul_params("405b") * TOKENS / (chips * V5P_FLOPS * 0.4) / DAY
    assert days == pytest.approx(2998.29, abs=0.01)
    assert exercises.solution("ch06.q13") == pytest.approx(days, rel=1e-9)
    assert _correct("ch06.q13", 2998)
    four = math.ceil(step_bytes("405b", 2**24, 4) / V5P_HBM)  # the chapter's printed floor, 2929 chips
    assert four == 2929
    for wrong in (
        6 * matmul_params("405b") * TOKENS / (four * V5P_FLOPS * 0.4) / DAY,  # four checkpoints (782 days)
        days * 0.4,  # at peak instead of 40% MFU
        days / 365.25,  # years, not days
    ):
        assert not _correct("ch06.q13", wrong)
    hint = exercises.get("ch06.q13").hint
    assert fmt(10 * params("405b"), "B") in hint and fmt(16384 * 2 * 126 * 2**24, "B") in hint


# Llama 3.2 3B (meta-llama/Llama-3.2-3B config.json): L 28, D 3072, F 8192, N 24, K 8, tied embeddings
L32, D32, F32, N32, K32 = 28, 3072, 8192, 24, 8
P32 = L32 * (3 * D32 * F32 + 2 * D32 * H * (N32 + K32) + 2 * D32) + V * D32 + D32  # one table: tied
MATMUL32 = P32 - (2 * L32 + 1) * D32  # the tied table is the unembedding's matmul; the norms are not matmuls


def test_q1_to_q3_llama_3_2_3b():
    assert P32 == 3_212_749_824  # the released checkpoint's 3.21B
    assert exercises.solution("ch06.q1") == P32
    assert _correct("ch06.q1", P32)
    for wrong in (P32 + V * D32, RELEASED["70b"], P32 / 2):  # untied tables, the 70B, a halving slip
        assert not _correct("ch06.q1", wrong)
    ref2 = exercises.solution("ch06.q2")
    assert ref2["flops_per_token"] == pytest.approx(6 * MATMUL32, rel=1e-9)
    assert ref2["seconds_on_one_chip"] == pytest.approx(6 * MATMUL32 / V5P_FLOPS, rel=1e-9)
    assert not _correct("ch06.q2", {"flops_per_token": 2 * MATMUL32, "seconds_on_one_chip": 2 * MATMUL32 / V5P_FLOPS})
    total = 6 * MATMUL32 * 9e12
    ref3 = exercises.solution("ch06.q3")
    assert ref3["total_flops"] == pytest.approx(total, rel=1e-9)
    assert ref3["years_on_one_chip"] == pytest.approx(total / V5P_FLOPS / (365.25 * DAY), rel=1e-9)
    assert not _correct("ch06.q3", {"total_flops": 6 * MATMUL32 * TOKENS, "years_on_one_chip": 18.0})  # 15T


def test_q4_and_q7_changed_cases():
    # 6 x (70,553,706,496 - 128,256 x 8192 - 161 x 8192) x 15e12 / (6144 x 4.59e14 x 0.4) / 86,400 = 64.18 days
    days = 6 * matmul_params("70b") * TOKENS / (6144 * V5P_FLOPS * 0.4) / DAY
    assert days == pytest.approx(64.18, abs=0.01)
    assert exercises.solution("ch06.q4") == pytest.approx(days, rel=1e-9)
    assert not _correct("ch06.q4", days * 6144 / POD)  # the whole pod's 44 days
    assert exercises.solution("ch06.q7") == 16 * 2**20 // 8192 == 2048
    assert not _correct("ch06.q7", 1024)  # 70B's 1024 sequences


def test_q11_long_context_flops():
    # 6 x matmul weights + attention; at 131,072 tokens attention is a large share: more than 1.5x the 6N count
    ref = exercises.solution("ch06.q11")
    plain = 6 * matmul_params("405b") * 2**24
    assert 1.5 * plain < ref["flops_per_step"] < 2 * plain
    assert ref["total_flops"] == pytest.approx(ref["flops_per_step"] * 800e9 / 2**24, rel=1e-9)
    assert not _correct("ch06.q11", {"flops_per_step": plain, "total_flops": plain * 800e9 / 2**24})
    assert not _correct(
        "ch06.q11", {"flops_per_step": ref["flops_per_step"], "total_flops": 6 * matmul_params("405b") * TOKENS}
    )


def test_q14_whole_slice_throughput():
    from tpu_notes.training import published

    run = next(r for r in published.RUNS if r.name == "Llama 3.1 405B, v5p-1024")
    per_chip = published.predict(run, published.MATMUL_EFFICIENCY).predicted_tokens_per_s
    ref = exercises.solution("ch06.q14")
    assert run.parallelism.n_chips == 512  # v5p-1024 counts cores: 512 chips
    assert ref["tokens_per_s"] == pytest.approx(512 * per_chip, rel=1e-9)
    assert ref["days"] == pytest.approx(TOKENS / (512 * per_chip) / DAY, rel=1e-9)
    assert not _correct("ch06.q14", {"tokens_per_s": per_chip, "days": TOKENS / per_chip / DAY})  # per chip
    assert not _correct("ch06.q14", {"tokens_per_s": 1024 * per_chip, "days": TOKENS / (1024 * per_chip) / DAY})


def test_exercise_headings_match_their_check_ids():
    """'### Exercise 6.M' is followed by a cell that checks ch06.qM (and its solution by the same id)."""
    cells = json.loads(NOTEBOOK.read_text())["cells"]
    seen = []
    for i, cell in enumerate(cells):
        m = re.match(r"### Exercise 6\.(\d+)\b", "".join(cell["source"]))
        if not m:
            continue
        n = m.group(1)
        checks = []
        for nxt in cells[i + 1 : i + 3]:
            checks += re.findall(r'exercises\.check\("(ch06\.q\w+)"', "".join(nxt["source"]))
        assert checks and all(re.fullmatch(rf"ch06\.q{n}[a-z]?", c) for c in checks), (n, checks)
        seen.append(int(n))
    assert seen == list(range(1, len(seen) + 1)) and len(seen) >= 15


# The chapter's figures (tpu_notes.plots.training, "Chapter 6" functions)


def _step(**kw):
    from tpu_notes.training.step import StepTime

    base = dict(compute=1.0, flops_time=1.0, hbm_time=0.1, collectives={"tensor": 0.6, "fsdp": 0.6}, bubble=0.2)
    base.update(kw)
    comms = sum(base["collectives"].values())
    total = max(base["compute"], comms) + base["bubble"]
    return StepTime(**base, comms=comms, total=total, bound="tensor", mfu=0.5, hfu=0.5)


def test_step_breakdown_chart_rows_reach_the_step():
    from tpu_notes.plots.training import step_breakdown_chart

    st = _step()
    fig = step_breakdown_chart({"case A": st})
    ax = fig.axes[0]
    # the communication row (1.2 s + 0.2 s bubble) reaches the 1.4 s step: its right edge is 1
    rights = [p.get_x() + p.get_width() for p in ax.patches]
    assert max(rights) == pytest.approx(1.0)
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    assert "case A" in texts and any("tensor-bound" in t for t in texts)
    assert {"compute", "pipeline bubble", "tensor collectives", "fsdp collectives"} <= set(
        ax.get_legend_handles_labels()[1]
    )
    for bad in ({}, [], None, {"x": None}, {"x": 3.0}):
        with pytest.raises(ValueError, match="cases"):
            step_breakdown_chart(bad)


def test_labelled_reconciliation_chart_numbers_and_names_the_runs():
    from tpu_notes.plots.training import labelled_reconciliation_chart
    from tpu_notes.training import published

    roof = published.reconcile(efficiency=1.0)[:4]
    cal = published.reconcile(efficiency=published.MATMUL_EFFICIENCY)[:4]
    labels = {cal[0].run.name: "first", cal[2].run.name: "third"}
    fig = labelled_reconciliation_chart(roof, cal, labels)
    numbers = [t.get_text() for t in fig.axes[0].texts]
    assert "1" in numbers and "2" in numbers  # at the points
    key = "\n".join(t.get_text() for t in fig.texts)  # under the axes
    assert "1  first" in key and "2  third" in key
    _, ax = plt.subplots()  # drawn into a panel, the key sits inside it
    assert labelled_reconciliation_chart(roof, cal, labels, ax=ax) is ax.figure
    assert any("1  first" in t.get_text() and "2  third" in t.get_text() for t in ax.texts)
    with pytest.raises(ValueError, match="labels"):
        labelled_reconciliation_chart(roof, cal, {"no such run": "x"})
    with pytest.raises(ValueError, match="labels"):
        labelled_reconciliation_chart(roof, cal, {})
    with pytest.raises(ValueError, match="calibrated_rows"):
        labelled_reconciliation_chart(roof, cal[:2], labels)
