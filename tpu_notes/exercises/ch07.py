"""Exercises of Chapter 7 (ids ch07.*), registered with their reference solutions.

The numbered problems follow the scaling book's inference chapter (inference.md): the pop quiz, the numbers its
text works out (critical batches, the Llama 2 13B tables, generation sharding limits, serving-engine arithmetic),
its worked questions 1–7 on the invented 18B model and its appendices; the last few are ours, on the simulator.
"""

from __future__ import annotations

from . import Exercise, register


def _book_model(**changes):
    """The scaling book's invented model of its worked problems: L=64, D=4096, F=16384, N=32, K=8, H=256,
    V=32128, input and output embeddings shared."""
    from ..transformer import TransformerConfig

    base = dict(
        d_model=4096,
        d_ff=16384,
        n_layers=64,
        n_heads=32,
        n_kv_heads=8,
        d_head=256,
        vocab=32128,
        tied_embeddings=True,
        name="book-18b",
    )
    base.update(changes)
    return TransformerConfig(**base)


BOOK_CONTEXT = 8192  # the context length we assume where the book's question leaves it open


def _pop_quiz(batch):
    from ..inference import step_time_from_counts

    return step_time_from_counts(30e9, batch * 8192 * 100e3, 2 * batch * 30e9, "v5e", 16, batch, 8192).total


def _q1():
    m = _book_model()
    return {"params": m.param_count(), "kv_bytes_per_token": m.kv_bytes_per_token("bf16")}


def _q2():
    from ..inference import max_batch

    return {
        k: max_batch(_book_model(n_kv_heads=k), "v5e", 16, BOOK_CONTEXT, weight_dtype="int8", kv_dtype="int8")
        for k in (8, 1)
    }


def _q2_solution():
    r = _q2()
    return {"K8": r[8], "K1": r[1]}


def _q3():
    from ..hardware import get_chip
    from ..inference import weight_params_read

    m = _book_model()
    return weight_params_read(m) * 1 / (16 * get_chip("v5e").hbm_bw)


def _q4():
    from ..inference import decode_step_time, kv_sharding, max_batch, max_tp_ici

    m = _book_model()
    b = max_batch(m, "v5e", 16, BOOK_CONTEXT, weight_dtype="int8", kv_dtype="int8")
    kv = kv_sharding(m, 16)
    step = decode_step_time(m, "v5e", 16, b, BOOK_CONTEXT, weight_dtype="int8", kv_dtype="int8")
    return {
        "max_tp": max_tp_ici("v5e", m.d_ff, n_axes=2),
        "kv_head_shards": kv.heads,
        "kv_batch_shards": kv.batch,
        "step_s": step.total,
    }


def _q5():
    m = _book_model(n_experts=16, experts_per_token=2)
    return {
        "params": m.param_count(),
        "critical_batch": m.critical_batch("v5e"),
        "kv_bytes_per_token": m.kv_bytes_per_token("int8"),
        "flops_per_token": 2.0 * m.matmul_params_per_token(),
    }


def _q6():
    from ..hardware import get_chip
    from ..inference import smallest_topology

    m = _book_model(n_experts=16, experts_per_token=2)
    c = get_chip("v5e")
    w = m.param_count() * 2
    return {
        "weight_load_s": w / (128 * c.hbm_bw),
        "free_hbm_per_chip": c.hbm_bytes - w / 128,
        "smallest_chips": smallest_topology(m, "v5e").n_chips,
    }


def _q7():
    from ..inference import ws_2d_crossover

    m = _book_model()
    return ws_2d_crossover(m.d_model, m.d_ff)


#: Exercise 7.4: one Llama 2 13B sequence of this many tokens, its cache in this dtype (the page prints 8k in bf16).
Q4_TOKENS, Q4_DTYPE = 32768, "int8"

#: Exercise 7.11: continuous batching at this batch, prompt and answer length (the page prints 32, 8192, 4096).
Q11_BATCH, Q11_PROMPT, Q11_ANSWER = 64, 2048, 512

#: Exercise 7.13: the arrival rate (requests/s) of the disaggregation question (the page prints 6 requests/s).
Q13_RATE = 4.0

#: Exercise 7.5's setting: Llama 2 13B on 8 v5e chips, int8 weights, a bf16 cache, 4096-token contexts, batch 24.
Q5_SETTING = dict(n_chips=8, batch=24, seq_len=4096, weight_dtype="int8", kv_dtype="bf16")


def _q5_llama2():
    from ..inference import decode_step_time

    q = Q5_SETTING
    s = decode_step_time(
        "llama2-13b",
        "v5e",
        q["n_chips"],
        q["batch"],
        q["seq_len"],
        weight_dtype=q["weight_dtype"],
        kv_dtype=q["kv_dtype"],
    )
    return {"step_s": s.total, "tokens_per_s": s.tokens_per_s}


def _sim(rate: float = 6.0, **kw):
    """Chapter 7's simulated stream: Llama 3 8B on a v5e 2x2, 150 Poisson requests of 4096 prompt tokens and 128
    answer tokens, seed 1; ``kw`` goes to ``simulate`` (a scheduler, a disaggregation)."""
    from ..inference.engine import deploy
    from ..inference.simulator import simulate
    from ..inference.workload import LengthDistribution, Workload

    wl = Workload.poisson(
        rate, n_requests=150, prompt=LengthDistribution.fixed(4096), output=LengthDistribution.fixed(128), seed=1
    )
    return simulate(deploy("llama3-8b", "v5e", 4), wl, **kw)


def _sim_tpot(rate: float = Q13_RATE):
    """p90 TPOT at ``rate`` requests/s (4 by default): interleaved (prefill-first, one 2x2) against a 2x2 decoding
    beside a 2x2 prefill instance that sends it the KV over ICI."""
    from ..inference.engine import deploy
    from ..inference.simulator import Disaggregation, Scheduler

    mixed = _sim(rate, scheduler=Scheduler(policy="prefill_first"))
    split = _sim(rate, disaggregation=Disaggregation(deploy("llama3-8b", "v5e", 4), 1, "ici"))
    return {"interleaved_p90_s": mixed.tpot[1], "disaggregated_p90_s": split.tpot[1]}


def _sim_rate():
    """The largest of a grid of arrival rates whose median TTFT stays under 0.5 s (interleaved prefill-first)."""
    from ..inference.simulator import Scheduler

    interleaved = Scheduler(policy="prefill_first")
    ok = [r for r in (1, 2, 4, 6, 8, 10, 12, 14, 16) if _sim(float(r), scheduler=interleaved).ttft[0] < 0.5]
    return float(max(ok))


_EXERCISES = [
    Exercise(
        id="ch07.q1",
        title="pop quiz: a small generation step",
        solve=lambda: _pop_quiz(4),
        unit="s",
        rtol=0.05,
        hint="Memory-bound: (B · KV bytes per sequence + parameter bytes) / (16 chips × W_hbm).",
    ),
    Exercise(
        id="ch07.q2",
        title="pop quiz: a batch of 256",
        solve=lambda: _pop_quiz(256),
        unit="s",
        rtol=0.05,
        hint="Past the critical batch: KV load + the FLOPs time 2 · B · params / (16 × C).",
    ),
    Exercise(
        id="ch07.q3",
        title="critical batch with int8 weights on a v6e",
        solve=lambda: __import__("tpu_notes.inference", fromlist=["x"]).critical_batch(
            "llama3-70b", "v6e", weight_dtype="int8"
        ),
        unit="tokens",
        rtol=0.05,
        hint="2 · B · P FLOPs at C against P one-byte weights at W_hbm: B = C / (2 · W_hbm), with the v6e's "
        "C = 920 TFLOP/s (bf16) and W_hbm = 1.6 TB/s.",
    ),
    Exercise(
        id="ch07.q4",
        title="Llama 2 13B: one 32k-token KV cache in int8",
        solve=lambda: (
            __import__("tpu_notes.transformer", fromlist=["x"])
            .get_model("llama2-13b")
            .kv_cache_bytes(1, Q4_TOKENS, Q4_DTYPE)
        ),
        unit="bytes",
        rtol=0.05,
        hint="2 (K and V) × L × K × H × 1 byte (int8) × 32,768 tokens.",
    ),
    Exercise(
        id="ch07.q5",
        title="Llama 2 13B, 8 v5e, int8, 4k, batch 24",
        solve=_q5_llama2,
        unit="s, tokens/s",
        rtol=0.05,
        hint="KV: 24 × 4096 tokens × 819 kB (bf16); weights: 12.9 G one-byte parameters (all but the input "
        "embedding); both over 8 × 820 GB/s. The FLOPs (2 · 24 · 12.9e9 at 8 × 197 TFLOP/s) hide under the weight "
        "load. Throughput: 24 tokens per step.",
    ),
    Exercise(
        id="ch07.q7",
        title="model parallelism before ICI beats HBM",
        solve=lambda: __import__("tpu_notes.inference", fromlist=["x"]).max_tp_memory("v5e", 16384, 32),
        unit="chips",
        rtol=0.05,
        hint="Y = F / (B · β) with β = W_hbm / W_ici (bidirectional link).",
    ),
    Exercise(
        id="ch07.q15",
        title="the invented model: params, KV/token",
        solve=_q1,
        unit="params, bytes",
        rtol=0.02,
        hint="L · D · (3F + 2H(N + K)) + D · V (shared embeddings) + norms; KV: 2 · L · K · H · 2 bytes.",
    ),
    Exercise(
        id="ch07.q16",
        title="largest int8 batch on a v5e 4x4 (8k)",
        solve=_q2_solution,
        unit="sequences",
        rtol=0.03,
        hint="(16 × 16 GB − weights) / (8192 × KV bytes per token); try K = 1 too.",
    ),
    Exercise(
        id="ch07.q17",
        title="load every int8 weight from HBM on a 4x4",
        solve=_q3,
        unit="s",
        rtol=0.05,
        hint="Weight bytes / (16 × W_hbm): a floor on the step time.",
    ),
    Exercise(
        id="ch07.q18",
        title="sharding the invented model on a v5e 4x4",
        solve=_q4,
        unit="mixed",
        rtol=0.05,
        hint="Tensor parallelism up to 2 axes · F / α; KV heads first (8), then the batch; step time at the "
        "largest int8 batch.",
    ),
    Exercise(
        id="ch07.q19",
        title="the invented model as a 16-expert MoE (k = 2)",
        solve=_q5,
        unit="mixed",
        rtol=0.03,
        hint="Experts multiply the MLP weights by E; the critical batch by E/k; KV per token is the dense model's "
        "(here in int8, one byte per number); FLOPs use the k active experts.",
    ),
    Exercise(
        id="ch07.q20",
        title="expert sharding on a v5e 8x16",
        solve=_q6,
        unit="s, bytes, chips",
        rtol=0.05,
        hint="All bf16 weights spread over 128 chips; free HBM = 16 GB minus that share; then the smallest "
        "slice that holds the weights.",
    ),
    Exercise(
        id="ch07.q9",
        title="when 2D weight-stationary sharding wins",
        solve=_q7,
        unit="chips",
        rtol=0.02,
        hint="Compare 4BD/(3W) with the optimised 2D cost: N > 32 · (F/D) · (3/4)².",
    ),
    Exercise(
        id="ch07.q8",
        title="latency-bound activations (Appendix C)",
        solve=lambda: __import__("tpu_notes.inference", fromlist=["x"]).latency_bound_tp("v5e", 16, 8192),
        unit="chips",
        rtol=0.05,
        hint="Y > B · D · 1 byte / (W_ici one-way × 1 µs).",
    ),
    Exercise(
        id="ch07.q10",
        title="a 600M-parameter layer on 4 chips (Appendix A)",
        solve=lambda: 600e6 * 2 / (4 * __import__("tpu_notes.hardware", fromlist=["x"]).get_chip("v5e").hbm_bw),
        unit="s",
        rtol=0.05,
        hint="bf16 weights / (4 × W_hbm).",
    ),
    Exercise(
        id="ch07.q11",
        title="tokens freed per step by continuous batching",
        solve=lambda: __import__("tpu_notes.inference", fromlist=["x"]).eviction_per_step(
            Q11_BATCH, Q11_PROMPT, Q11_ANSWER
        )["tokens"],
        unit="tokens",
        rtol=0.02,
        hint="B / S_g sequences finish per step (S_g: answer tokens), each S_p + S_g tokens long (S_p: prompt).",
    ),
    Exercise(
        id="ch07.q12",
        title="prefill servers per generation server",
        solve=lambda: __import__("tpu_notes.inference", fromlist=["x"]).disaggregation_ratio(0.91, 0.019, 32, 512),
        unit="",
        rtol=0.05,
        hint="Balance n_prefill / t_prefill = n_decode · B / (t_step · S_g): n_prefill and n_decode are server "
        "counts, S_g the answer length.",
    ),
    Exercise(
        id="ch07.q6",
        title="speculative sampling: tokens per round",
        solve=lambda: __import__("tpu_notes.inference", fromlist=["x"]).expected_tokens_per_round(0.8, 4),
        unit="tokens",
        rtol=0.02,
        hint="1 + a + a² + … + a^k: each draft is kept only if all before it were.",
    ),
    Exercise(
        id="ch07.q13",
        title="simulator: what disaggregation does to the p90 TPOT",
        solve=_sim_tpot,
        unit="s",
        rtol=0.05,
        hint="Run inference.simulate twice on the same seeded Workload: scheduler=Scheduler(policy='prefill_first'), "
        "then disaggregation=Disaggregation(<a 4-chip prefill deployment>, 1, 'ici'); read SimResult.tpot[1].",
    ),
    Exercise(
        id="ch07.q14",
        title="simulator: top load, TTFT p50 < 0.5 s",
        solve=_sim_rate,
        unit="requests/s",
        rtol=0.05,
        hint="Sweep the Workload's rate over 1, 2, 4, 6, ... 16 with Scheduler(policy='prefill_first') and read "
        "SimResult.ttft[0].",
    ),
]

for _ex in _EXERCISES:
    register(_ex)
