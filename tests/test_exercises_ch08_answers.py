"""Chapter 8's reworked exercises (8.5-8.11): the published answers, derived here by hand from the models'
published configs and the chips' datasheets, never from the reference functions; and wrong answers rejected.

Sources of the figures written below:
- Llama 3 405B (Llama 3.1 405B config, meta-llama/Llama-3.1-405B config.json): 126 layers, d_model 16384,
  d_ff 53248, 128 query heads, 8 KV heads, head dim 128, vocab 128256, untied embeddings, gated 3-matrix MLP.
- Llama 3 70B (meta-llama/Meta-Llama-3-70B config.json): 80 layers, d_model 8192, d_ff 28672, 64 query heads,
  8 KV heads, head dim 128, vocab 128256.
- TPU v5e (How To Scale Your Model, "tpus" chapter table; /work/shared/facts/hardware.json): 1.97e14 bf16 FLOP/s,
  16e9 bytes of HBM, 8.2e11 bytes/s of HBM bandwidth; standard slices 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16.
"""

import math

import pytest

from tpu_notes import exercises
from tpu_notes.exercises import grade

# ------------------------------------------------------------------------------------------- published configs
L405, D405, F405, H405, K405, HD, VOCAB = 126, 16384, 53248, 128, 8, 128, 128256
L70, D70, F70, H70, K70 = 80, 8192, 28672, 64, 8
C_BF16, HBM, W_HBM = 1.97e14, 16e9, 8.2e11  # v5e: FLOP/s, bytes, bytes/s
SLICES = (1, 4, 8, 16, 32, 64, 128, 256)  # chips of v5e's standard slices
CONTEXT, DECODE_LEN = 8192, 512
BYTES = {"bf16": 2.0, "int8": 1.0, "int4": 0.5}


def _params_405b():
    """Every parameter: per layer Q and O (D·H·hd each), K and V (D·K·hd each), the gated MLP (3·D·F), two RMSNorm
    weights (2·D); then the input embedding and the unembedding (V·D each) and the final norm (D)."""
    attn = 2 * D405 * H405 * HD + 2 * D405 * K405 * HD
    layer = attn + 3 * D405 * F405 + 2 * D405
    return L405 * layer + 2 * VOCAB * D405 + D405


P405 = _params_405b()
# A step reads every parameter but the input embedding, of which it reads only B rows.
READ405 = P405 - VOCAB * D405
# The matmul parameters a token multiplies by: every matrix but the input embedding (norms are not matmuls).
MATMUL405 = L405 * (2 * D405 * H405 * HD + 2 * D405 * K405 * HD + 3 * D405 * F405) + VOCAB * D405
KV405_BF16 = 2 * L405 * K405 * HD * 2  # bytes of K and V per token of context, bf16
KV70_INT8 = 2 * L70 * K70 * HD * 1


def test_the_405b_counts_match_the_published_totals():
    """/work/shared/facts/models.md: 405,853,388,800 parameters and 516,096 KV bytes per token in bf16."""
    assert P405 == 405_853_388_800
    assert KV405_BF16 == 516_096
    assert KV70_INT8 == 163_840


def _smallest_slice(need_bytes):
    chips = math.ceil(need_bytes / HBM)
    return min(n for n in SLICES if n >= chips)


def _step(n, batch, dtype):
    """Chapter 7's step: KV time + max(weight time, FLOP time); int8/int4 weights still multiply in bf16."""
    kv_t = batch * CONTEXT * KV405_BF16 * BYTES[dtype] / 2 / (n * W_HBM)
    w_t = (READ405 + batch * D405) * BYTES[dtype] / (n * W_HBM)
    f_t = 2 * batch * MATMUL405 / (n * C_BF16)
    return kv_t + max(w_t, f_t)


def _largest(n, dtype):
    kv_seq = CONTEXT * KV405_BF16 * BYTES[dtype] / 2
    return math.floor((n * HBM - P405 * BYTES[dtype]) / kv_seq)


def test_q5_smallest_405b_slices():
    """bf16: 811.7 GB / 16 GB = 50.7 -> 51 chips -> an 8x8 (64); int8: 25.4 -> 26 -> 4x8 (32); int4: 12.7 -> 13
    -> 4x4 (16)."""
    chips = [_smallest_slice(P405 * BYTES[d]) for d in ("bf16", "int8", "int4")]
    assert chips == [64, 32, 16]
    assert exercises.solution("ch08.q5") == chips
    assert grade("ch08.q5", [64, 32, 16]).correct
    assert not grade("ch08.q5", [51, 26, 13]).correct  # the chip count before rounding to a slice
    assert not grade("ch08.q5", [16, 8, 4]).correct  # Llama 3 70B's slices, copied from the table


def test_q6_largest_batch_and_its_kv_read():
    """Free memory (64 × 16 GB − 811.7 GB = 212.3 GB) over one 8k cache (8192 × 516,096 B = 4.23 GB): 50 in bf16,
    and the same 50 in int8 and int4 because chips and bytes halve together. Reading those caches takes
    50 × 4.23 GB / (64 × 820 GB/s) = 4.03 ms in every dtype (the whole step, weights included, is 19.4 ms)."""
    batches = [_largest(n, d) for n, d in ((64, "bf16"), (32, "int8"), (16, "int4"))]
    assert batches == [50, 50, 50]
    kv = [50 * CONTEXT * KV405_BF16 * BYTES[d] / 2 / (n * W_HBM) for n, d in ((64, "bf16"), (32, "int8"), (16, "int4"))]
    assert kv == pytest.approx([4.03e-3] * 3, rel=1e-3)
    assert _step(64, 50, "bf16") == pytest.approx(19.41e-3, rel=1e-3)
    ref = exercises.solution("ch08.q6")
    assert ref["batch"] == batches and ref["kv_load_s"] == pytest.approx(kv, rel=1e-3)
    assert grade("ch08.q6", {"batch": [50, 50, 50], "kv_load_s": [4.03e-3] * 3}).correct
    assert not grade("ch08.q6", {"batch": [50, 50, 50], "kv_load_s": [19.4e-3] * 3}).correct  # the whole step
    assert not grade("ch08.q6", {"batch": [42, 42, 42], "kv_load_s": [4.03e-3] * 3}).correct  # 70B's batch
    assert not grade("ch08.q6", {"batch": [50, 100, 200], "kv_load_s": [4.03e-3] * 3}).correct


def test_q7_requests_per_second_per_chip():
    """B / (step × 512 × chips): 50 / (19.4 ms × 512 × 64) = 0.0786 in bf16, twice that in int8, four times in
    int4."""
    qps = [50 / (_step(n, 50, d) * DECODE_LEN * n) for n, d in ((64, "bf16"), (32, "int8"), (16, "int4"))]
    assert qps == pytest.approx([0.0786, 0.1572, 0.3144], rel=1e-3)
    assert exercises.solution("ch08.q7") == pytest.approx(qps, rel=1e-3)
    assert grade("ch08.q7", [0.0786, 0.157, 0.314]).correct
    assert not grade("ch08.q7", [0.27, 0.53, 1.07]).correct  # Llama 3 70B's column
    assert not grade("ch08.q7", [50 / (19.4e-3 * 512)] * 3).correct  # per slice, not per chip


def test_q8_twice_the_chips():
    """On 128/64/32 chips the batch is 292 in every dtype (1236 GB free / 4.23 GB). bf16: KV 11.8 ms + max(weights
    7.7 ms, FLOPs 2 × 292 × 403.7e9 / (128 × 197 TFLOP/s) = 9.35 ms) = 21.1 ms; int8 and int4 keep the KV time but
    their FLOPs double and quadruple per chip (bf16 math): 30.5 ms and 49.2 ms. int4 buys 1.7x bf16, not 4x."""
    cases = ((128, "bf16"), (64, "int8"), (32, "int4"))
    assert [_largest(n, d) for n, d in cases] == [292, 292, 292]
    steps = [_step(n, 292, d) for n, d in cases]
    assert steps == pytest.approx([21.11e-3, 30.46e-3, 49.16e-3], rel=1e-3)
    qps = [292 / (t * DECODE_LEN * n) for t, (n, _) in zip(steps, cases)]
    assert qps == pytest.approx([0.2110, 0.2925, 0.3625], rel=1e-3)
    assert exercises.solution("ch08.q8") == pytest.approx(qps, rel=1e-3)
    assert grade("ch08.q8", [0.211, 0.2925, 0.3625]).correct
    wrong_weight_bound = [292 / ((292 * CONTEXT * KV405_BF16 / 2 / (128 * W_HBM) + 7.69e-3) * 512 * 128)]
    wrong = [wrong_weight_bound[0], 2 * wrong_weight_bound[0], 4 * wrong_weight_bound[0]]  # FLOPs forgotten
    assert not grade("ch08.q8", wrong).correct
    assert not grade("ch08.q8", [0.43, 0.83, 1.28]).correct  # Llama 3 70B's row


def test_q9_405b_prefill():
    """2 × 403.7e9 matmul parameters × 8192 tokens = 6.615e18 FLOPs, plus causal attention
    2 · 126 · 128 · (128 + 128) · 8192 · 8193 / 2 = 2.77e17, over 64 × 1.97e14 × 0.4 = 5.04e15 FLOP/s: 1.37 s."""
    flops = 2 * MATMUL405 * CONTEXT + 2 * L405 * H405 * (HD + HD) * CONTEXT * (CONTEXT + 1) / 2
    t = flops / (64 * C_BF16 * 0.4)
    assert t == pytest.approx(1.367, rel=1e-3)
    assert exercises.solution("ch08.q9") == pytest.approx(t, rel=1e-6)
    assert grade("ch08.q9", 1.37).correct
    assert not grade("ch08.q9", 0.973).correct  # Llama 3 70B's prefill on 16 chips, printed on the page
    assert not grade("ch08.q9", t * 0.4).correct  # at peak instead of 40%


def test_q10_what_a_step_frees():
    """64 / 256 = 0.25 sequences finish per step, each freeing 2048 + 256 tokens: 576 tokens, × 163,840 bytes of
    int8 cache per token = 94.4 MB."""
    ans = {"sequences": 64 / 256, "tokens": 64 * (2048 + 256) / 256, "bytes": 576 * KV70_INT8}
    assert ans == {"sequences": 0.25, "tokens": 576.0, "bytes": 94_371_840}
    ref = exercises.solution("ch08.q10")
    assert ref == pytest.approx(ans)
    assert grade("ch08.q10", ans).correct
    assert not grade("ch08.q10", {**ans, "bytes": 576 * 2 * KV70_INT8}).correct  # a bf16 cache
    assert not grade("ch08.q10", {"sequences": 0.25, "tokens": 0.25 * 2048, "bytes": 0.25 * 2048 * 163840}).correct
    assert not grade("ch08.q10", {"sequences": 0.0078125, "tokens": 96.0}).correct  # the page's case, keys short


def test_q11_405b_disaggregation():
    """The bf16 step at batch 32 on 64 chips: (807.5 GB of weights + 32 × 4.23 GB of caches) / (64 × 820 GB/s)
    = 17.97 ms (FLOPs 2 ms); prefill servers per generation server = 1.367 s × 32 / (17.97 ms × 512) = 4.75."""
    prefill = (2 * MATMUL405 * CONTEXT + 2 * L405 * H405 * 2 * HD * CONTEXT * (CONTEXT + 1) / 2) / (64 * C_BF16 * 0.4)
    step = _step(64, 32, "bf16")
    assert step == pytest.approx(17.97e-3, rel=1e-3)
    ratio = prefill * 32 / (step * DECODE_LEN)
    assert ratio == pytest.approx(4.754, rel=1e-3)
    assert exercises.solution("ch08.q11") == pytest.approx(ratio, rel=1e-6)
    assert grade("ch08.q11", 4.75).correct
    assert not grade("ch08.q11", 3.5).correct  # Llama 3 70B's ratio, printed on the page
    assert not grade("ch08.q11", 1 / ratio).correct


def test_hints_carry_the_right_figures():
    """The hints quote v5e's 16 GB and 820 GB/s and 197 TFLOP/s, the 405B parameter count, Llama 3 70B's int8 KV
    formula and the exercises they build on."""
    hint = {i: exercises.get(i).hint for i in exercises.all_ids("ch08")}
    assert "405.9e9" in hint["ch08.q5"] and f"{P405 / 1e9:.1f}e9" == "405.9e9" and "16 GB" in hint["ch08.q5"]
    assert "16 GB" in hint["ch08.q6"] and "820 GB/s" in hint["ch08.q6"] and "8192" in hint["ch08.q6"]
    assert "Exercise 8.6" in hint["ch08.q7"] and "512" in hint["ch08.q7"]
    assert "6x" in hint["ch08.q8"] and 292 / 50 == pytest.approx(6, rel=0.05)
    assert "64 × 197 TFLOP/s × 0.4" in hint["ch08.q9"]
    assert "2 × 80 × 8 × 128" in hint["ch08.q10"] and 2 * 80 * 8 * 128 == KV70_INT8
    assert "Exercise 8.9" in hint["ch08.q11"] and "batch 32" in hint["ch08.q11"]


@pytest.mark.parametrize("exercise_id", [f"ch08.q{i}" for i in range(5, 12)])
def test_unattempted_and_perturbed(exercise_id):
    assert not grade(exercise_id, None).attempted
    for bad in exercises.wrong_answers(exercise_id):
        assert not grade(exercise_id, bad).correct


# ------------------------------------------------------------- Exercises 8.1-8.4 and 8.12 (moved off the page)
V5P_BF16, V5P_HBM_BW, V5P_ICI_BIDI = 4.59e14, 2.8e12, 1.8e11  # v5p datasheet: FLOP/s, B/s
V6E_BF16, V6E_INT8, V6E_HBM_BW = 9.2e14, 1.84e15, 1.6e12  # v6e datasheet: FLOP/s (bf16, int8), B/s


def test_q1_405b_int8_kv_per_token():
    """2 · 126 layers · 8 KV heads · 128 · 1 byte = 258,048 bytes; the page prints Llama 3 70B's 163,840."""
    by_hand = 2 * L405 * K405 * HD * 1
    assert by_hand == 258_048
    assert exercises.solution("ch08.q1") == pytest.approx(by_hand)
    assert grade("ch08.q1", 258e3).correct
    assert not grade("ch08.q1", KV70_INT8).correct  # the page's model
    assert not grade("ch08.q1", KV405_BF16).correct  # bf16


def _weights70_int8():
    attn = 2 * D70 * H70 * HD + 2 * D70 * K70 * HD
    return L70 * (attn + 3 * D70 * F70 + 2 * D70) + 2 * VOCAB * D70 + D70


def test_q2_32k_memory_and_slice():
    """70.55 GB of int8 weights + 32 × 32,768 × 163,840 B = 171.8 GB of caches = 242.4 GB, 15.1 chips' worth: a
    4x4 (16 chips). The page prints the 8k case (114 GB on 8 chips)."""
    total = _weights70_int8() + 32 * 32768 * KV70_INT8
    assert total == pytest.approx(242.35e9, rel=1e-3)
    assert _smallest_slice(total) == 16
    ref = exercises.solution("ch08.q2")
    assert ref["bytes"] == pytest.approx(total, rel=1e-6) and ref["chips"] == 16
    assert grade("ch08.q2", {"bytes": 242e9, "chips": 16}).correct
    assert not grade("ch08.q2", {"bytes": 114e9, "chips": 8}).correct  # the page's 8k case
    assert not grade("ch08.q2", {"bytes": 242e9, "chips": 15}).correct  # not rounded to a slice


def test_q3_32k_steps():
    """Batch 32 is weight- and KV-bound: (70.55 GB − the input embedding's 1.05 GB + 32 rows + 171.8 GB) / (16 ×
    820 GB/s) = 18.4 ms on the 4x4, half that on the 4x8; 32 / 18.4 ms / 16 = 109 tokens/s per chip."""
    read = _weights70_int8() - VOCAB * D70 + 32 * D70 + 32 * 32768 * KV70_INT8
    s16, s32 = read / (16 * W_HBM), read / (32 * W_HBM)
    assert s16 == pytest.approx(18.39e-3, rel=1e-3)
    ref = exercises.solution("ch08.q3")
    assert ref == pytest.approx({"step_4x4_s": s16, "tokens_per_s_per_chip": 32 / s16 / 16, "step_4x8_s": s32})
    assert grade("ch08.q3", {"step_4x4_s": 18.4e-3, "tokens_per_s_per_chip": 109, "step_4x8_s": 9.2e-3}).correct
    page = {"step_4x4_s": 8.57e-3, "tokens_per_s_per_chip": 233, "step_4x8_s": 4.29e-3}  # the 8k case
    assert not grade("ch08.q3", page).correct


def test_q4_v6e_critical_batches():
    """C / W_hbm = 9.2e14 / 1.6e12 = 575 in bf16; int8 weights in bf16 math halve it (287.5); int8 math doubles the
    peak back (575). The page prints v5e's 240/120/240."""
    by_hand = [V6E_BF16 / V6E_HBM_BW, V6E_BF16 / V6E_HBM_BW / 2, V6E_INT8 / V6E_HBM_BW / 2]
    assert by_hand == pytest.approx([575, 287.5, 575], rel=1e-6)
    assert exercises.solution("ch08.q4") == pytest.approx(by_hand, rel=1e-6)
    assert grade("ch08.q4", [575, 288, 575]).correct
    assert not grade("ch08.q4", [240, 120, 240]).correct  # v5e, printed on the page
    assert not grade("ch08.q4", [575, 575, 575]).correct


def test_q12_v5p_sharding_limits():
    """Compute-bound: 2 axes · F / (C / W_ici) = 2 · 28,672 / (4.59e14 / 1.8e11) = 22.5; memory-bound at batch 32:
    F / (B · W_hbm / W_ici) = 28,672 / (32 · 2.8e12 / 1.8e11) = 57.6. The page prints v5e's 26 and 49 (batch 64)."""
    compute = 2 * F70 / (V5P_BF16 / V5P_ICI_BIDI)
    memory = F70 / (32 * V5P_HBM_BW / V5P_ICI_BIDI)
    assert (compute, memory) == pytest.approx((22.49, 57.6), rel=1e-3)
    ref = exercises.solution("ch08.q12")
    assert ref == pytest.approx({"max_tp_compute": compute, "max_tp_batch32": memory})
    assert grade("ch08.q12", {"max_tp_compute": 22.5, "max_tp_batch32": 57.6}).correct
    assert not grade("ch08.q12", {"max_tp_compute": 26.2, "max_tp_batch32": 49.2}).correct  # the page's v5e
    assert not grade("ch08.q12", {"max_tp_compute": 22.5, "max_tp_batch32": 28.8}).correct  # one-way links
