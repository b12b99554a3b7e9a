"""Chapter 7's reworked exercises graded against hand derivations, not against the library that computes them.

Each answer below is derived in the test from published figures written out here (a model's config.json, a chip's
datasheet row), then handed to the checker; the hint's numbers are held to the same derivation; and answers with
the usual mistakes must be rejected.
"""

from __future__ import annotations

import pytest

from tpu_notes import exercises

# TPU datasheet rows (the scaling book's tpus.md table, the figures tpu_notes.hardware records)
V5E_BF16_FLOPS = 1.97e14  # FLOP/s
V5E_HBM_BW = 8.2e11  # bytes/s
V6E_BF16_FLOPS = 9.2e14  # FLOP/s
V6E_HBM_BW = 1.6e12  # bytes/s

# Llama 2 13B (huggingface.co/meta-llama/Llama-2-13b-hf config.json): hidden_size, intermediate_size,
# num_hidden_layers, num_attention_heads = num_key_value_heads, vocab_size; head_dim = 5120 / 40
D, F, L, N, V = 5120, 13824, 40, 40, 32_000
H = D // N


def _correct(qid, answer) -> bool:
    return exercises.grade(qid, answer).correct


# --------------------------------------------------------------------------------------------- Exercise 7.3
# Critical batch with int8 weights and bf16 matmuls on a v6e. A step of B tokens through P weights does 2·B·P
# FLOPs and reads P bytes: compute-bound once 2·B·P / C > P / W, i.e. B > C / (2·W) = 9.2e14 / 3.2e12 = 287.5.
Q3_BY_HAND = V6E_BF16_FLOPS / (2 * V6E_HBM_BW)


def test_q3_answer_by_hand():
    assert Q3_BY_HAND == pytest.approx(287.5)
    assert _correct("ch07.q3", Q3_BY_HAND)
    assert _correct("ch07.q3", 288)  # rounded up to whole sequences


@pytest.mark.parametrize(
    "wrong",
    [
        V6E_BF16_FLOPS / V6E_HBM_BW,  # forgot that an int8 weight is one byte: 575
        V5E_BF16_FLOPS / (2 * V5E_HBM_BW),  # the v5e figure printed in the chapter: 120
        V5E_BF16_FLOPS / V5E_HBM_BW,  # the bf16 v5e figure: 240
    ],
)
def test_q3_rejects_wrong_answers(wrong):
    assert not _correct("ch07.q3", wrong)


def test_q3_hint_quotes_the_datasheet():
    hint = exercises.get("ch07.q3").hint
    assert f"{V6E_BF16_FLOPS / 1e12:.0f} TFLOP/s" in hint
    assert f"{V6E_HBM_BW / 1e12:.1f} TB/s" in hint


# --------------------------------------------------------------------------------------------- Exercise 7.5
# Llama 2 13B on 8 v5e chips, int8 weights, bf16 cache, batch 24 at 4096 tokens of context.
B5, S5, CHIPS5 = 24, 4096, 8
# parameters, projection by projection: per layer W_q, W_k, W_v, W_o (K = N: 4·D²), the gated MLP (3·D·F) and two
# norm gains; then the input embedding, the untied output embedding and the final norm
LAYER = 4 * D * D + 3 * D * F + 2 * D
PARAMS = L * LAYER + 2 * V * D + D
# a step reads every weight but the input embedding, of which it looks up B rows; int8: one byte each
WEIGHT_BYTES_READ = (PARAMS - V * D + B5 * D) * 1
# the cache: K and V, every layer, every (KV) head, bf16
KV_PER_TOKEN = 2 * L * N * H * 2
KV_BYTES = B5 * S5 * KV_PER_TOKEN
# the weight matmuls: 2 FLOPs per weight a token multiplies by (attention, MLP, the unembedding; no lookup, no norms)
MATMUL_PARAMS = L * (4 * D * D + 3 * D * F) + V * D
FLOPS_TIME = 2 * B5 * MATMUL_PARAMS / (CHIPS5 * V5E_BF16_FLOPS)
WEIGHT_TIME = WEIGHT_BYTES_READ / (CHIPS5 * V5E_HBM_BW)
KV_TIME = KV_BYTES / (CHIPS5 * V5E_HBM_BW)
Q5_STEP = KV_TIME + max(WEIGHT_TIME, FLOPS_TIME)
Q5_BY_HAND = {"step_s": Q5_STEP, "tokens_per_s": B5 / Q5_STEP}


def test_q5_derivation_matches_the_published_count():
    assert PARAMS == 13_015_864_320  # the parameter count of the released Llama-2-13b-hf checkpoint
    assert KV_PER_TOKEN == 819_200
    assert FLOPS_TIME < WEIGHT_TIME  # memory-bound: the FLOPs hide under the weight load
    assert Q5_STEP == pytest.approx(14.235e-3, rel=1e-3)
    assert Q5_BY_HAND["tokens_per_s"] == pytest.approx(1686, rel=1e-3)


def test_q5_answer_by_hand():
    assert _correct("ch07.q5", Q5_BY_HAND)


@pytest.mark.parametrize(
    "wrong",
    [
        # bf16 weights (the weight bytes doubled)
        {"step_s": Q5_STEP + WEIGHT_TIME, "tokens_per_s": B5 / (Q5_STEP + WEIGHT_TIME)},
        # 8192-token contexts, the chapter's table
        {"step_s": 2 * KV_TIME + WEIGHT_TIME, "tokens_per_s": B5 / (2 * KV_TIME + WEIGHT_TIME)},
        # throughput per chip instead of for the slice
        {"step_s": Q5_STEP, "tokens_per_s": B5 / Q5_STEP / CHIPS5},
        # KV and FLOPs added instead of KV + max(weights, FLOPs) with the weights forgotten
        {"step_s": KV_TIME, "tokens_per_s": B5 / KV_TIME * 1.2},
    ],
)
def test_q5_rejects_wrong_answers(wrong):
    assert not _correct("ch07.q5", wrong)


def test_q5_hint_quotes_the_derivation():
    hint = exercises.get("ch07.q5").hint
    assert f"{B5} × {S5} tokens × {KV_PER_TOKEN / 1e3:.0f} kB" in hint
    assert f"{(PARAMS - V * D) / 1e9:.1f} G one-byte parameters" in hint
    assert f"{CHIPS5} × {V5E_HBM_BW / 1e9:.0f} GB/s" in hint
    assert f"{V5E_BF16_FLOPS / 1e12:.0f} TFLOP/s" in hint


# ----------------------------------------------------------------------------------- the notation of 7.11/7.12
def test_serving_hints_use_the_chapter_notation():
    """Prompt and answer lengths are S_p and S_g; prefill and decode server counts n_prefill and n_decode (P, G
    and N are parameters, query heads per KV head and query heads elsewhere in the book)."""
    assert "S_p + S_g" in exercises.get("ch07.q11").hint
    hint = exercises.get("ch07.q12").hint
    assert "n_prefill / t_prefill = n_decode" in hint
    assert " P " not in hint and " G " not in hint


# ------------------------------------------------------------- Exercises 7.4, 7.11, 7.13 (moved off the page)
def test_q4_one_32k_int8_cache_by_hand():
    """Llama 2 13B caches 2 · 40 layers · 40 KV heads · 128 = 409,600 numbers per token; in int8 (one byte) one
    32,768-token sequence takes 13.4 GB. The page prints the 8k bf16 cache (6.71 GB), which must be rejected."""
    by_hand = 2 * L * N * H * 1 * 32768
    assert by_hand == 13_421_772_800
    assert exercises.solution("ch07.q4") == pytest.approx(by_hand)
    assert _correct("ch07.q4", 13.4e9)
    assert not _correct("ch07.q4", 2 * L * N * H * 2 * 8192)  # the page's 8k bf16 cache, 6.71 GB
    assert not _correct("ch07.q4", 2 * by_hand)  # bf16 instead of int8
    assert not _correct("ch07.q4", by_hand / 2)  # K or V only


def test_q11_tokens_freed_by_hand():
    """64 / 512 = 0.125 sequences finish per step, each 2048 + 512 tokens long: 320 tokens. The page prints the
    32 / 8192 / 4096 case (96 tokens)."""
    by_hand = 64 / 512 * (2048 + 512)
    assert by_hand == 320
    assert exercises.solution("ch07.q11") == pytest.approx(by_hand)
    assert _correct("ch07.q11", 320)
    assert not _correct("ch07.q11", 96)  # the page's case
    assert not _correct("ch07.q11", 64 / 512 * 2048)  # the prompt only


def test_q13_asks_another_rate_than_the_page():
    """The page's sweep prints the p90 TPOTs at 6 requests/s; the exercise asks 4 requests/s, where the prefill-first
    engine pauses decoding less often (a smaller p90) and disaggregation still keeps it near one bare step."""
    from tpu_notes.exercises import ch07

    at4 = exercises.solution("ch07.q13")
    at6 = ch07._sim_tpot(6.0)
    assert at4["interleaved_p90_s"] < at6["interleaved_p90_s"]
    assert at4["disaggregated_p90_s"] < at4["interleaved_p90_s"] / 2
    assert _correct("ch07.q13", at4)
    wrong = {k: v for k, v in at6.items()}
    assert not _correct("ch07.q13", wrong)  # the page's rate
