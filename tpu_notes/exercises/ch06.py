"""Exercises of Chapter 6 (ids ch06.*), registered with their reference solutions.

Questions 1–9 follow the scaling book's applied-training chapter (applied-training.md) in the order it asks them;
where the chapter's cells already print the book's answer, the exercise asks the same question for other numbers, so
that no output above a question answers it: Llama 3.2 3B for 1–3, the largest schedulable slice for 4 and 8, full
recomputation for 5, Llama 3 8B on a v5e pod for 6, 405B's batch for 7, Llama 3 405B on a pod for 9. 10–12 are its
worked problems (11 at the long-context stage, 12 asks what the eight-pod layout reaches of the ideal), 13–14 are ours
on the 405B case and the measured runs, 15 on the expected step time, 16 on what a ranking by the roofline alone
would cost on a published layout sweep.
"""

from __future__ import annotations

import functools

from . import Exercise, register

LLAMA3_TOKENS = 15e12  # Llama 3 pre-training tokens (Llama 3 paper, §3)
BATCH_70B = 4 * 2**20  # "about 4M tokens": 1024 sequences of 4096
BATCH_405B = 16 * 2**20  # 16M tokens: 2048 sequences of 8192 (Llama 3 paper, Table 4)
POD_CHIPS = 16 * 20 * 28
CUBE_CHIPS = 16 * 16 * 16  # the 16 x 16 x 16 slice the planner ranks cheapest per chip used for 70B
V5E_POD_CHIPS = 16 * 16
MFU = 0.4  # the chapter's assumed utilisation (the scaling book's round figure)
SECONDS_PER_YEAR = 365.25 * 86_400
SMALL_MODEL = "llama3.2-3b"  # Exercises 6.1-6.3: a model none of the chapter's cells prints
SMALL_TOKENS = 9e12  # Llama 3.2 1B and 3B pre-training tokens ("up to 9 trillion", Meta's Llama 3.2 model card)
LARGEST_SLICE_CHIPS = 16 * 16 * 24  # the largest v5p slice Cloud TPU schedules (topology.largest_shape)
LONG_CONTEXT = 131_072  # Llama 3's long-context stage: sequences of 128k tokens
LONG_CONTEXT_TOKENS = 800e9  # its tokens ("about 800B", Llama 3 paper, §3.4.2)


def _pod():
    from ..topology import pod

    return pod("v5p")


def _q1():
    from ..transformer import get_model

    return get_model(SMALL_MODEL).param_count()


def _q2():
    from ..hardware import get_chip
    from ..training import flops_per_token

    f = flops_per_token(SMALL_MODEL)
    return {"flops_per_token": f, "seconds_on_one_chip": f / get_chip("v5p").peak_flops()}


def _q3():
    from ..hardware import get_chip
    from ..training import training_flops

    total = training_flops(SMALL_MODEL, SMALL_TOKENS)
    return {"total_flops": total, "years_on_one_chip": total / get_chip("v5p").peak_flops() / SECONDS_PER_YEAR}


def _q4():
    from ..training import training_time

    return training_time("llama3-70b", LLAMA3_TOKENS, "v5p", LARGEST_SLICE_CHIPS, 0.4) / 86_400


def _q5():
    from ..training import min_chips_for_memory

    # full recomputation: only each layer's input is kept, one D-sized checkpoint per layer and token
    return min_chips_for_memory("llama3-70b", "v5p", 4_000_000, 4000, remat=1, include_grads=False)


def _q6():
    from ..hardware import get_chip
    from ..training import training_memory

    m = training_memory("llama3-8b", None, 4_000_000, 4000, remat=4)
    per_chip = (m.params + m.optimizer + m.activations) / V5E_POD_CHIPS
    return {"bytes_per_chip": per_chip, "fraction_of_hbm": per_chip / get_chip("v5e").hbm_bytes}


def _q8():
    from ..training import critical_batch_per_chip

    per_chip = BATCH_70B / LARGEST_SLICE_CHIPS
    return {
        "tokens_per_chip": per_chip,
        "tokens_over_critical": per_chip / critical_batch_per_chip("fsdp", "v5p", n_axes=3),
    }


def _q9():
    from ..training import critical_batch_per_chip, optimal_fsdp_degree
    from ..transformer import get_model

    F = get_model("llama3-405b").d_ff
    return {  # the book's convention (combine="max"), for 405B's 16M-token batch on one full pod
        "critical_tokens_per_chip": critical_batch_per_chip("fsdp+tp", "v5p", d_ff=F, fsdp_axes=2, combine="max"),
        "optimal_fsdp": optimal_fsdp_degree(BATCH_405B, POD_CHIPS, F, fsdp_axes=2),
    }


@functools.lru_cache(maxsize=16)
def best_slice(model: str, batch_tokens: int, seq_len: int, n_slices: int):
    """The fastest legal option of :func:`tpu_notes.training.subslices.plan_slices` on ``n_slices`` v5p pods, by the
    roofline step (a full v5p pod of 8,960 chips is not one slice Cloud TPU schedules: at most 6,144 chips)."""
    from ..training.subslices import plan_slices

    options = [o for o in plan_slices(model, "v5p", batch_tokens, seq_len, n_slices=n_slices, rank_by="roofline")]
    return next(o for o in options if o.ok)


def days_with_best_layout(model: str, batch_tokens: int, seq_len: int, n_slices: int, tokens: float = LLAMA3_TOKENS):
    """Days to train on ``tokens`` with the planner's best legal layout on the best slice of each of ``n_slices`` v5p
    pods (:func:`best_slice`; roofline step time)."""
    return best_slice(model, batch_tokens, seq_len, n_slices).step_s * tokens / batch_tokens / 86_400


def _q10():
    return {
        "tokens_per_chip": BATCH_70B / (4 * POD_CHIPS),
        "days": days_with_best_layout("llama3-70b", BATCH_70B, 4096, 4),
    }


def _q11():
    from ..training import training_flops

    step = training_flops("llama3-405b", BATCH_405B, include_attention=True, seq_len=LONG_CONTEXT)
    return {"flops_per_step": step, "total_flops": step * LONG_CONTEXT_TOKENS / BATCH_405B}


def _q12():
    from ..hardware import get_chip
    from ..training import training_flops

    ideal = training_flops("llama3-405b", LLAMA3_TOKENS) / (8 * POD_CHIPS * get_chip("v5p").peak_flops()) / 86_400
    return {"ideal_days": ideal, "fraction": ideal / days_with_best_layout("llama3-405b", BATCH_405B, 8192, 8)}


def _q13():
    from ..training import min_chips_for_memory, training_time

    chips = min_chips_for_memory("llama3-405b", "v5p", BATCH_405B, 8192, remat=1, include_grads=False)
    return training_time("llama3-405b", LLAMA3_TOKENS, "v5p", chips, MFU) / 86_400


register(
    Exercise(
        id="ch06.q1",
        title="Llama 3.2 3B's parameters",
        solve=_q1,
        unit="parameters",
        hint="3·D·F per layer for the MLP, 2·D·H·(N + K) for attention, 2·D for its two norms, V·D for the one "
        "embedding table (3B ties input and output), D for the final norm.",
    )
)
register(
    Exercise(
        id="ch06.q2",
        title="Llama 3.2 3B's FLOPs per token, on one chip",
        solve=_q2,
        unit="FLOPs, s",
        hint="6 × the weights a token multiplies by (the tied table is the unembedding's: it counts; the norms do "
        "not); divide by one v5p's peak. "
        "Answer {'flops_per_token': ..., 'seconds_on_one_chip': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q3",
        title="Llama 3.2 3B's 9T-token run, on one chip",
        solve=_q3,
        unit="FLOPs, years",
        hint="FLOPs per token × 9e12 tokens; years = FLOPs / v5p peak / seconds per year (365.25 days). "
        "Answer {'total_flops': ..., 'years_on_one_chip': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q4",
        title="days on the largest v5p slice at 40% MFU",
        solve=_q4,
        unit="days",
        hint="Total FLOPs / (16 x 16 x 24 = 6144 chips × 4.59e14 FLOP/s × 0.4), in days.",
    )
)
register(
    Exercise(
        id="ch06.q5",
        title="the fewest chips by memory, full remat",
        solve=_q5,
        unit="chips",
        hint="bf16 weights (2 B/param) + fp32 Adam (8 B/param) = 706 GB, plus 1 checkpoint of D bf16 values per "
        "layer and token: 80 x 8192 x 2 B x 4e6 tokens = 5.24 TB (a quarter of the 21 TB of four); "
        "round the total over 96 GB per v5p up.",
    )
)
register(
    Exercise(
        id="ch06.q6",
        title="Llama 3 8B per chip on a v5e pod",
        solve=_q6,
        unit="bytes, fraction",
        hint="10 B per parameter for 8,030,261,248 parameters (80.3 GB) plus 4 checkpoints x 4096 x 2 B x 32 "
        "layers x 4e6 tokens (4.19 TB), over 256 chips; divide by v5e's 16e9 B of HBM. "
        "Answer {'bytes_per_chip': ..., 'fraction_of_hbm': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q7",
        title="FSDP alone on 405B's batch, whole sequences",
        solve=lambda: BATCH_405B // 8192,
        unit="chips",
        hint="Without splitting sequences, each batch shard needs at least one whole 8192-token sequence of the "
        "16 x 2^20-token batch.",
    )
)
register(
    Exercise(
        id="ch06.q8",
        title="FSDP alone, largest v5p slice",
        solve=_q8,
        unit="tokens per chip, ratio",
        hint="Tokens per chip = 4 x 2^20 / (16 x 16 x 24); pure FSDP over three axes needs alpha / 3 = 2550 / 3 = 850. "
        "Answer {'tokens_per_chip': ..., 'tokens_over_critical': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q9",
        title="FSDP + TP for 405B on a pod",
        solve=_q9,
        unit="tokens per chip, chips",
        hint="B / N > α² / (M_X M_Y F) with α = 2550, M_X M_Y = 2 and F = 53,248 (405B's d_ff): the FSDP and "
        "tensor collectives overlap, so the slower of the two sets the time. X_opt = sqrt((B / F)(M_X / M_Y) N) "
        "with B = 16 x 2^20 and N = 8960. Answer {'critical_tokens_per_chip': ..., 'optimal_fsdp': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q10",
        title="four pods, one batch (book 1)",
        solve=_q10,
        unit="tokens per chip, days",
        hint="4M tokens over 4 × 8960 chips would be 117 per chip, but Cloud TPU does not schedule a whole v5p pod "
        "as one slice (at most 6,144 chips), and 1024 sequences do not split evenly over its largest slice "
        "either. Rank the slices each pod offers "
        "(training.subslices.plan_slices('llama3-70b', 'v5p', 4 * 2**20, 4096, n_slices=4, rank_by='roofline')), "
        "take the fastest legal one and turn its roofline step into days for 15T tokens. "
        "Answer {'tokens_per_chip': ..., 'days': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q11",
        title="405B at long context (book problem 2a)",
        solve=_q11,
        unit="FLOPs",
        hint="6 x the matmul weights per token plus attention: training_flops('llama3-405b', 16 * 2**20, "
        "include_attention=True, seq_len=131072) for a 16M-token step of 131,072-token sequences; the stage is "
        "800e9 tokens of such steps. Answer {'flops_per_step': ..., 'total_flops': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q12",
        title="405B on 8 pods vs the ideal (book 2b)",
        solve=_q12,
        unit="days, fraction",
        hint="Ideal: 6 x the 403,747,897,344 weights a token multiplies by (all but the input embedding and the "
        "norms) x 15e12 tokens over 8 x 8960 chips x 4.59e14 FLOP/s, in days (86,400 s). Fraction: the ideal over the "
        "planner's roofline days (the fastest legal slice of each pod: training.subslices.plan_slices(..., "
        "n_slices=8, rank_by='roofline'), step x 15e12 / 2^24 tokens). "
        "Answer {'ideal_days': ..., 'fraction': ...}.",
    )
)
register(
    Exercise(
        id="ch06.q13",
        title="405B on its memory floor, full remat",
        solve=_q13,
        unit="days",
        hint="The fewest chips: 10 B x 405,853,388,800 parameters (4.06 TB) + 1 x 16384 x 2 B x 126 layers x "
        "2^24 tokens (69.3 TB), over 96 GB, rounded up. Days: 6 x the weights a token multiplies by (all but the "
        "input embedding and the norms) x 15e12 tokens / (chips x 4.59e14 FLOP/s x 0.4) / 86,400.",
    )
)


def _q14():
    from ..training import published

    run = next(r for r in published.RUNS if r.name == "Llama 3.1 405B, v5p-1024")
    per_chip = published.predict(run, published.MATMUL_EFFICIENCY).predicted_tokens_per_s
    tokens_per_s = per_chip * run.parallelism.n_chips
    return {"tokens_per_s": tokens_per_s, "days": LLAMA3_TOKENS / tokens_per_s / 86_400}


register(
    Exercise(
        id="ch06.q14",
        title="the 405B v5p run: slice rate and days",
        solve=_q14,
        unit="tokens/s, days",
        hint="published.predict(run, published.MATMUL_EFFICIENCY).predicted_tokens_per_s for the v5p-1024 run is "
        "per chip: times its run.parallelism.n_chips chips, then 15e12 tokens over that rate, in days. "
        "Answer {'tokens_per_s': ..., 'days': ...}.",
    )
)


def _q15():
    from ..training import published

    run = next(r for r in published.RUNS if r.name == "Llama 3.1 8B, v6e-256")
    return published.predict(run).step.expected.memory_bound


register(
    Exercise(
        id="ch06.q15",
        title="the memory-bound part of an expected step",
        solve=_q15,
        unit="s",
        hint="tokens per chip x layers x efficiency.layer_elementwise_bytes(model, seq_len) x 4 passes, plus tokens "
        "per chip x efficiency.logits_bytes(model), plus efficiency.optimizer_bytes(params / 256), all over "
        "efficiency.DEFAULT.hbm x the v6e HBM bandwidth.",
    )
)


#: The published sweep Exercise 6.16 asks about (training.sweeps.SWEEPS).
SWEEP_16 = "Llama 3.1 70B FP8, 256 H100: vanilla vs async TP"


def _q16():
    from ..training import published, sweeps

    sweep = next(s for s in sweeps.SWEEPS if s.name == SWEEP_16)
    rows = [published.predict(r) for r in sweep.runs]
    return sweeps.regret([r.reported for r in rows], [r.predicted for r in rows])


register(
    Exercise(
        id="ch06.q16",
        title="the regret of ranking by the roofline",
        solve=_q16,
        unit="fraction",
        hint="For each point of the sweep, published.predict(run).predicted is the roofline's tokens/s per chip; "
        "pick the point it ranks first and compare its measured tokens/s with the best measured: best / picked - 1.",
    )
)
