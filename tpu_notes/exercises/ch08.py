"""Exercises of Chapter 8 (ids ch08.*), registered with their reference solutions.

ch08.q1–q4 and q12 follow the questions the scaling book's applied-inference section works in its text (Llama 3
70B on TPU v5e), each moved to a case the page does not print (Llama 3 405B's cache, 32k-token conversations, the
v6e's critical batches, the v5p's sharding limits); q5–q11 ask the same questions of another case the page does
not print (Llama 3 405B on v5e for the slice, batch, throughput, prefill and disaggregation questions; other
request lengths for the eviction one), so a reader computes rather than copies; q13 is ours on the
latency–throughput frontier, and q14–q16 are the book's three worked problems, which it leaves unanswered.
"""

from __future__ import annotations

import math

from . import Exercise, register

M70 = "llama3-70b"
M405 = "llama3-405b"  # the model Exercises 8.5-8.9 and 8.11 ask about (the page works Llama 3 70B)
CONTEXT = 8192  # the context the book's questions assume
DECODE_LEN = 512  # the median generation length they assume
DTYPES = ("bf16", "int8", "int4")
#: Exercises 8.2 and 8.3: the page's batch of 32 conversations at this context (the page prints 8192 tokens).
Q2_CONTEXT = 32768
#: Exercise 8.4's chip, 8.12's chip and batch (the page prints v5e's, and 8.12's limit at batch 64).
Q4_CHIP, Q12_CHIP, Q12_BATCH = "v6e", "v5p", 32


def _inf():
    from .. import inference

    return inference


def _q2():
    inf = _inf()
    mem = inf.serving_memory(M70, 32, Q2_CONTEXT, weight_dtype="int8", kv_dtype="int8")
    s = inf.smallest_topology(M70, "v5e", batch=32, seq_len=Q2_CONTEXT, weight_dtype="int8", kv_dtype="int8")
    return {"bytes": mem.total, "chips": s.n_chips}


def _q3():
    inf = _inf()
    kw = dict(weight_dtype="int8", kv_dtype="int8")
    s16 = inf.decode_step_time(M70, "v5e", 16, 32, Q2_CONTEXT, **kw)
    s32 = inf.decode_step_time(M70, "v5e", 32, 32, Q2_CONTEXT, **kw)
    return {"step_4x4_s": s16.total, "tokens_per_s_per_chip": s16.tokens_per_s_per_chip, "step_4x8_s": s32.total}


def smallest_slices(model=M70):
    """The smallest v5e slice holding ``model``'s weights in each dtype of ``DTYPES`` (KV caches left out)."""
    inf = _inf()
    return [inf.smallest_topology(model, "v5e", weight_dtype=d, kv_dtype=d) for d in DTYPES]


def largest_batch_steps(doubled: bool = False, model=M70):
    """The step at the largest 8k-context batch on each smallest slice of ``model`` (or on twice as many chips)."""
    inf = _inf()
    out = []
    for d, s in zip(DTYPES, smallest_slices(model)):
        n = s.n_chips * (2 if doubled else 1)
        b = inf.max_batch(model, "v5e", n, CONTEXT, weight_dtype=d, kv_dtype=d)
        out.append(inf.decode_step_time(model, "v5e", n, b, CONTEXT, weight_dtype=d, kv_dtype=d))
    return out


def _q6():
    steps = largest_batch_steps(model=M405)
    return {"batch": [s.batch for s in steps], "kv_load_s": [s.kv_load for s in steps]}


def _qps(steps):
    return [s.tokens_per_s_per_chip / DECODE_LEN for s in steps]


def _q9():
    inf = _inf()
    from ..transformer import get_model

    F = get_model(M70).d_ff
    return {
        "max_tp_compute": inf.max_tp_ici(Q12_CHIP, F, n_axes=2),
        "max_tp_batch32": inf.max_tp_memory(Q12_CHIP, F, Q12_BATCH),
    }


def prefill_8k(model=M70, n_chips: int = 16):
    """The book's prefill: 8192 tokens of Llama 3 70B on 16 v5e at 40% MFU (or of ``model`` on ``n_chips``)."""
    return _inf().prefill_time(model, "v5e", n_chips, CONTEXT, mfu=0.4)


#: Exercises 8.9 and 8.11: Llama 3 405B's prefill and generation on a v5e 8x8, bf16, at batch 32.
N405, B405 = 64, 32


def _q11():
    inf = _inf()
    step = inf.decode_step_time(M405, "v5e", N405, B405, CONTEXT)
    return inf.disaggregation_ratio(prefill_8k(M405, N405).total, step.total, B405, DECODE_LEN)


#: Exercise 8.10: shorter requests than the page's (prompt, generated tokens, batch), caches in int8.
EVICT_P, EVICT_G, EVICT_B = 2048, 256, 64


def _q10():
    inf = _inf()
    ev = inf.eviction_per_step(EVICT_B, EVICT_P, EVICT_G)
    return {**ev, "bytes": ev["tokens"] * inf.kv_bytes_per_token(M70, "int8")}


def _q13():
    from ..hardware import get_chip
    from ..transformer import get_model

    m, c = get_model("llama3-405b"), get_chip("v5e")
    flops = 2.0 * m.matmul_params_per_token()
    n = 64
    return {
        "flops_per_token": flops,
        "compute_s": flops / (n * c.peak_flops("bf16")),
        "memory_s": _inf().weight_params_read(m) * 2 / (n * c.hbm_bw),
    }


def _q14():
    inf = _inf()
    from ..transformer import get_model

    m = get_model("llama3-8b")
    mem = inf.serving_memory(m, 240, CONTEXT, weight_dtype="int8", kv_dtype="int8")
    s = inf.smallest_topology(m, "v5e", batch=240, seq_len=CONTEXT, weight_dtype="int8", kv_dtype="int8")
    return {
        "params_bytes": mem.weights,
        "kv_bytes": mem.kv_cache,
        "activation_bytes": 240 * m.d_ff * 2,
        "chips": s.n_chips,
    }


def best_under_latency(
    model="llama3-405b",
    limit_s: float = 15e-3,
    seq_len: int = CONTEXT,
    weight_dtype: str = "int8",
    kv_dtype: str = "int8",
):
    """Highest tokens/s per chip over v5e slices and batches with a generation step under ``limit_s`` (perfect
    sharding): returns the best step (a DecodeStepTime) or None."""
    inf = _inf()
    best = None
    kw = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    for shape in inf.slice_shapes("v5e"):
        n = math.prod(shape)
        try:
            top = inf.max_batch(model, "v5e", n, seq_len, **kw)
        except ValueError:
            continue
        if inf.decode_step_time(model, "v5e", n, 1, seq_len, **kw).total > limit_s:
            continue
        lo, hi = 1, top  # the step grows with the batch: bisect for the largest under limit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if inf.decode_step_time(model, "v5e", n, mid, seq_len, **kw).total <= limit_s:
                lo = mid
            else:
                hi = mid - 1
        step = inf.decode_step_time(model, "v5e", n, lo, seq_len, **kw)
        if best is None or step.tokens_per_s_per_chip > best.tokens_per_s_per_chip:
            best = step
    return best


def _q15():
    inf = _inf()
    best = best_under_latency()
    largest = max(math.prod(s) for s in inf.slice_shapes("v5e"))
    floor = inf.decode_step_time("llama3-405b", "v5e", largest, 1, CONTEXT, weight_dtype="int8", kv_dtype="int8")
    return {
        "chips": best.n_chips,
        "batch": best.batch,
        "tokens_per_s_per_chip": best.tokens_per_s_per_chip,
        "min_step_s": floor.total,
    }


def pareto_steps(seq_len: int = CONTEXT, expected: bool = False):
    """Every (slice, batch) step of Llama 3 70B in int8 on v5e slices of 4 to 64 chips, batches 1 to 512 that fit:
    Chapter 7's perfectly sharded roofline, or with ``expected`` the engine's step with its collectives at the
    efficiency model's rates."""
    inf = _inf()
    steps = []
    for n in (4, 8, 16, 32, 64):
        steps += inf.latency_throughput_curve(
            M70,
            "v5e",
            n,
            seq_len,
            [2**i for i in range(10)],
            weight_dtype="int8",
            kv_dtype="int8",
            fitting_only=True,
            expected=expected,
        )
    return steps


def cheapest_under(limit_s: float = 20e-3, seq_len: int = CONTEXT, expected: bool = True):
    """The frontier step with the lowest cost per generated token whose step is at most ``limit_s``: on the
    frontier with communication (the engine's expected steps) unless ``expected=False``."""
    inf = _inf()
    front = [s for s in inf.pareto_frontier(pareto_steps(seq_len, expected)) if s.total <= limit_s]
    return max(front, key=lambda s: s.tokens_per_s_per_chip)


def _q16():
    inf = _inf()
    s = cheapest_under()
    return {"chips": s.n_chips, "batch": s.batch, "dollars_per_million": inf.cost_per_million_tokens(s, chip="v5e")}


_EXERCISES = [
    Exercise(
        id="ch08.q1",
        title="Llama 3 405B: KV cache per token in int8",
        solve=lambda: _inf().kv_bytes_per_token(M405, "int8"),
        unit="bytes",
        rtol=0.05,
        hint="2 (K and V) × L × K × H × 1 byte, with Llama 3 405B's 126 layers, 8 KV heads of 128.",
    ),
    Exercise(
        id="ch08.q2",
        title="32 x 32k in int8: bytes, slice",
        solve=_q2,
        unit="bytes, chips",
        rtol=0.05,
        hint="70.6 GB of int8 weights + 32 × 32,768 × the KV bytes per token; divide by 16 GB and round up to a "
        "slice shape.",
    ),
    Exercise(
        id="ch08.q3",
        title="32 x 32k on a 4x4 and a 4x8",
        solve=_q3,
        unit="s, tokens/s/chip",
        rtol=0.05,
        hint="Batch 32 is far below the critical batch: (KV + weights) / (chips × W_hbm), with 32 caches of "
        "32,768 tokens.",
    ),
    Exercise(
        id="ch08.q4",
        title="critical batches on v6e",
        solve=lambda: [
            _inf().critical_batch(M70, Q4_CHIP, weight_dtype=w, compute_dtype=c)
            for w, c in (("bf16", "bf16"), ("int8", "bf16"), ("int8", "int8"))
        ],
        unit="sequences",
        rtol=0.05,
        hint="C / W_hbm × bytes per weight / 2, with the peak of the dtype the MXU multiplies in (v6e: 920 "
        "TFLOP/s bf16, 1,840 TOP/s int8, 1.6 TB/s HBM).",
    ),
    Exercise(
        id="ch08.q5",
        title="405B: smallest v5e slices",
        solve=lambda: [s.n_chips for s in smallest_slices(M405)],
        unit="chips",
        rtol=0.05,
        hint="ceil(405.9e9 parameters × bytes per weight / 16 GB), rounded up to a slice shape (1x1, 2x2, 2x4, "
        "4x4, 4x8, 8x8, ...).",
    ),
    Exercise(
        id="ch08.q6",
        title="405B: largest 8k batch, KV read",
        solve=_q6,
        unit="sequences, s",
        rtol=0.05,
        hint="batch = floor((chips × 16 GB − weight bytes) / (8192 × KV bytes per token)); a step reads those "
        "caches once: batch × 8192 × KV bytes per token / (chips × 820 GB/s).",
    ),
    Exercise(
        id="ch08.q7",
        title="405B: queries per second per chip",
        solve=lambda: _qps(largest_batch_steps(model=M405)),
        unit="QPS/chip",
        rtol=0.05,
        hint="B / (step × 512 × chips), with the batch and step of Exercise 8.6.",
    ),
    Exercise(
        id="ch08.q8",
        title="Llama 3 405B: the same on twice the chips",
        solve=lambda: _qps(largest_batch_steps(doubled=True, model=M405)),
        unit="QPS/chip",
        rtol=0.05,
        hint="The batch grows about 6x; at that batch compare the weight reads with the FLOPs at the bf16 peak "
        "(the critical batch of Exercise 8.4): step = KV time + max(weight time, FLOP time).",
    ),
    Exercise(
        id="ch08.q12",
        title="model parallelism limits on v5p",
        solve=_q9,
        unit="chips",
        rtol=0.05,
        hint="Y = n_axes · F / α (α = C / W_ici) for large batches; Y = F / (B · β) (β = W_hbm / W_ici) when "
        "memory-bound; with the v5p's rates.",
    ),
    Exercise(
        id="ch08.q9",
        title="Llama 3 405B: an 8k prefill on 64 v5e at 40% MFU",
        solve=lambda: prefill_8k(M405, N405).total,
        unit="s",
        rtol=0.05,
        hint="2 × matmul parameters × 8192 tokens, plus causal attention (2 · L · heads · (d_qk + d_v) · T(T+1)/2), "
        "over 64 × 197 TFLOP/s × 0.4.",
    ),
    Exercise(
        id="ch08.q10",
        title="what a step frees (2k/256, B = 64)",
        solve=_q10,
        unit="per step",
        rtol=0.05,
        hint="B / G sequences finish per step, each freeing P + G tokens; a token of Llama 3 70B's int8 cache is "
        "2 × 80 × 8 × 128 bytes.",
    ),
    Exercise(
        id="ch08.q11",
        title="405B: prefill servers per decode server",
        solve=_q11,
        unit="ratio",
        rtol=0.05,
        hint="prefill time × B / (step time × decode length), with the prefill of Exercise 8.9 and the bf16 step "
        "at batch 32 on the same 64 chips (weights and 32 caches of 8192 tokens read once).",
    ),
    Exercise(
        id="ch08.q14",
        title="405B: FLOPs per token, two floors",
        solve=_q13,
        unit="FLOPs, s",
        rtol=0.05,
        hint="2 × matmul parameters per token; FLOPs / (64 × C) or bf16 weight bytes / (64 × W_hbm).",
    ),
    Exercise(
        id="ch08.q15",
        title="Llama 3 8B, batch 240, int8: memory",
        solve=_q14,
        unit="bytes, chips",
        rtol=0.05,
        hint="Params at 1 byte each; KV at 8192 tokens per sequence; the largest activation is [B, F] in bf16.",
    ),
    Exercise(
        id="ch08.q16",
        title="405B under 15 ms",
        solve=_q15,
        unit="chips, sequences, tokens/s/chip, s",
        rtol=0.05,
        hint="For each slice, the largest batch whose step stays under 15 ms; keep the best tokens/s/chip. "
        "The floor is batch 1 on the largest slice.",
    ),
    Exercise(
        id="ch08.q13",
        title="cheapest point under 20 ms",
        solve=_q16,
        unit="chips, sequences, $",
        rtol=0.05,
        hint="Build the expected steps (latency_throughput_curve(..., expected=True)) for each slice, keep the "
        "frontier steps of at most 20 ms and take the one with the most tokens/s per chip; its price is "
        "cost_per_million_tokens(step, chip='v5e').",
    ),
]

for _e in _EXERCISES:
    register(_e)
