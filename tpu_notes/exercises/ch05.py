"""Exercises of Chapter 5 (ids ch05.*), registered with their reference solutions.

The numbered problems follow the scaling book's training chapter (training.md): its worked questions 1–4 on
Llama 2 13B (Exercises 5.12–5.17) and the numbers its text works out along the way; ours are the pod limits of
5.2 and 5.4, the optimisation batch (5.3), the optically reshaped torus (5.8), the zero-bubble pipeline (5.10) and
the planner (5.18), context parallelism (5.19, 5.20) and FP8 training (5.21, 5.22).
Exercise 5.M of the chapter checks ``ch05.qM``.
"""

from __future__ import annotations

from functools import cache

from . import Exercise, register

POD_CHIPS = 16 * 20 * 28  # a full TPU v5p pod
CUBE_CHIPS = 16 * 16 * 16  # a v5p 16x16x16 slice


def _fsdp_critical(n_axes: int = 3) -> float:
    from ..training import critical_batch_per_chip

    return critical_batch_per_chip("fsdp", "v5p", n_axes=n_axes)


def _q6():
    from ..training import max_tensor_parallelism
    from ..transformer import get_model

    return max_tensor_parallelism("v4p", get_model("llama3-70b").d_ff)


def _q7():
    from ..training import optimal_fsdp_degree
    from ..transformer import get_model

    return optimal_fsdp_degree(3.5e6, POD_CHIPS, get_model("llama3-70b").d_ff, fsdp_axes=2, tp_axes=1)


def _q12():
    from ..transformer import get_model

    return get_model("llama2-13b").param_count()


def _q13():
    from ..training import training_memory

    m = training_memory("llama2-13b", None, 16_000_000, 4000, remat="mlp_outputs")  # 4,000 sequences of 4,000
    return {"params_and_optimizer_bytes": m.params + m.optimizer, "activation_bytes": m.activations}


def _q14():
    from ..training import training_memory

    # every data-parallel chip holds a whole replica of the weights and Adam state, whatever the batch (96 sequences
    # would leave most of the 4,096 chips without one: the layout is refused; one chip's replica is the answer)
    m = training_memory("llama2-13b", None, 32768, 32768, remat="mlp_outputs")
    return m.params + m.grads + m.optimizer  # bf16 gradients too: 2 + 2 + 8 bytes per parameter


def _q15():
    from ..training import training_memory

    one = training_memory("llama2-13b", None, 3 * 2**20, 32768, remat="mlp_outputs")
    return {
        "min_batch_tokens": _fsdp_critical(3) * CUBE_CHIPS,
        "bytes_per_chip": (one.params + one.optimizer + one.activations) / CUBE_CHIPS,
    }


def _q16():
    from ..training import critical_batch_per_chip
    from ..transformer import get_model

    F = get_model("llama2-13b").d_ff
    return {  # the book's current convention (235 tokens per chip); combine="sum" is the older 4x (940)
        "critical_tokens_per_chip": critical_batch_per_chip("fsdp+tp", "v5p", d_ff=F, fsdp_axes=2, combine="max"),
        "tokens_per_chip": 3 * 2**20 / CUBE_CHIPS,
    }


@cache  # the planner takes a second; the notebook checks this answer twice
def _q18():
    from ..topology import Slice
    from ..training import plan

    p = plan("llama3-70b", Slice("v5p", (16, 16, 16)), 4 * 2**20, 8192)[0].parallelism
    return p.tensor * p.context  # the chips that share each sequence: tensor or context ranks


def _q9():
    from ..training import pipeline_bubble_fraction

    return pipeline_bubble_fraction(12, 40)


def _q11():
    from ..training import critical_batch_per_chip

    return 4 * critical_batch_per_chip("dcn", "v5p")


def _pods_for(batch_tokens: float) -> int:
    """Whole v5p pods that can share ``batch_tokens`` with each pod's three-axis ICI data parallelism / FSDP still
    compute-bound: each pod needs at least C / W_ici / 3 tokens per chip on its 8960 chips (ICI stops at a pod;
    between pods the copies are data-parallel over DCN, which needs far fewer tokens per pod, §5.8)."""
    return int(batch_tokens // (_fsdp_critical(3) * POD_CHIPS))


def _q2():
    return {"chips_ici_bound": 40e6 / _fsdp_critical(3), "pods": _pods_for(40e6)}


def _q3():
    from ..training import batch_tradeoff, kaplan_critical_batch

    b_crit = kaplan_critical_batch(2.2)
    t = batch_tradeoff(_fsdp_critical(3) * POD_CHIPS, b_crit)
    return {"critical_batch_tokens": b_crit, "data_ratio": t.data_ratio, "steps_ratio": t.steps_ratio}


def _q4():
    from ..training import training_time

    pods = _pods_for(16e6)
    return {"pods": pods, "days": training_time("llama3-70b", 15e12, "v5p", pods * POD_CHIPS, 0.5) / 86_400}


def _q8():
    from ..training import cube_shapes, group_collective_time, one_axis_group

    shapes = cube_shapes("v5p", 2048)
    times = {s: group_collective_time("v5p", s, one_axis_group(s, 4), "all_gather", 64e6).total for s in shapes}
    rings = [s for s in shapes if 4 in s]
    return {"ring_shapes": len(rings), "slowdown": times[(8, 16, 16)] / min(times.values())}


def _q10():
    from ..training import schedule_bubble_fraction

    return {
        "one_f_one_b": schedule_bubble_fraction("1f1b", 16, 48, 1.0, 2.0, 0.8),
        "zb_h1": schedule_bubble_fraction("zb-h1", 16, 48, 1.0, 2.0, 0.8),
    }


register(
    Exercise(
        id="ch05.q1",
        title="the smallest batch a pod takes with pure DP",
        solve=lambda: _fsdp_critical(3) * POD_CHIPS,
        unit="tokens",
        hint="Over three torus axes the critical batch is C / W_ici / 3 tokens per chip; multiply by the chips of a "
        "16 x 20 x 28 pod.",
    )
)
register(
    Exercise(
        id="ch05.q2",
        title="a 40M-token batch inside and across pods",
        solve=_q2,
        unit="chips, pods",
        rtol=0.04,
        hint="The three-axis ICI bound is 40M / (C / W_ici / 3) chips, more than a pod's 8960; ICI stops at a pod, "
        "so count the whole pods whose share of the batch keeps at least 850 tokens on each of their 8960 chips (the "
        "pods then AllReduce over DCN). Answer {'chips_ici_bound': ..., 'pods': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q3",
        title="the optimisation batch vs a pod's floor",
        solve=_q3,
        unit="tokens, ratios",
        hint="B_crit = 2e8 / 2.2**(1 / 0.21) tokens (training.kaplan_critical_batch); the pod's minimum batch is "
        "850 x 8960 tokens (Exercise 5.1); E/E_min = 1 + B/B_crit and S/S_min = 1 + B_crit/B "
        "(training.batch_tradeoff). Answer {'critical_batch_tokens': ..., 'data_ratio': ..., 'steps_ratio': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q4",
        title="Llama 3 70B, 16M tokens: pods and days",
        solve=_q4,
        unit="pods, days",
        rtol=0.03,
        hint="Each pod needs at least 850 x 8960 tokens of the batch to keep its FSDP compute-bound; take the whole "
        "number of pods that leaves, then time = 6 · params · 15T tokens / (chips · C · 0.5). Answer "
        "{'pods': ..., 'days': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q5",
        title="pure FSDP with a 2M-token batch",
        solve=lambda: 2e6 / _fsdp_critical(3),
        unit="chips",
        hint="The batch per chip must stay above 2550 / 3 tokens on v5p.",
    )
)
register(
    Exercise(
        id="ch05.q6",
        title="tensor parallelism for 70B on one TPU v4 axis",
        solve=_q6,
        unit="chips",
        hint="Tensor parallelism stays compute-bound while Y < F / (C / W_ici), with v4's C / W_ici (§5.2's "
        "alpha); it does not depend on the batch.",
    )
)
register(
    Exercise(
        id="ch05.q7",
        title="the best FSDP degree, 3.5M tokens on a pod",
        solve=_q7,
        unit="chips",
        hint="X_opt = sqrt((B / F)(M_X / M_Y) N) with F = 28,672, N = 8960 and two FSDP axes for one tensor axis.",
    )
)
register(
    Exercise(
        id="ch05.q8",
        title="4-way TP on the shapes of 2048 v5p chips",
        solve=_q8,
        unit="shapes, ratio",
        hint="training.cube_shapes('v5p', 2048) lists the arrangements of 32 cubes; a 4-way group has its own ring "
        "only where an axis is exactly 4 chips long (training.one_axis_group); price a 64 MB AllGather with "
        "training.group_collective_time on each. Answer {'ring_shapes': ..., 'slowdown': time on 8x16x16 / best}.",
    )
)
register(
    Exercise(
        id="ch05.q9",
        title="the bubble of 12 stages and 40 microbatches",
        solve=_q9,
        unit="fraction",
        hint="(P − 1) / (M + P − 1): the warm-up and drain of the pipeline over the whole step.",
    )
)
register(
    Exercise(
        id="ch05.q10",
        title="1F1B and ZB-H1 bubbles, 16 stages, 48 mb",
        solve=_q10,
        unit="fractions",
        hint="1F1B: (P − 1)/(M + P − 1). ZB-H1 idles (P − 1)(t_F + t_B − 2 t_W) per device against M (t_F + t_B) "
        "of work, with t_B = 2 the whole backward and t_W = 0.8 its weight part "
        "(training.schedule_bubble_fraction). Answer {'one_f_one_b': ..., 'zb_h1': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q11",
        title="the smallest batch of four slices over DCN",
        solve=_q11,
        unit="tokens",
        hint="Each slice needs C / W_dcn tokens (C and W_dcn per chip: the slice's compute and DCN bandwidth both "
        "scale with its chips).",
    )
)
register(
    Exercise(
        id="ch05.q12",
        title="Llama 2 13B's parameters (book question 1)",
        solve=_q12,
        unit="parameters",
        hint="3·L·D·F for the gated MLP, 4·D·N·H·L for attention (N = K: multi-head), 2·V·D for the embeddings.",
    )
)
register(
    Exercise(
        id="ch05.q13",
        title="Llama 2 13B's memory at 16M tokens (book Q2)",
        solve=_q13,
        unit="bytes",
        hint="Parameters and Adam: (2 + 4 + 4) bytes per parameter. Checkpoints after the three MLP matmuls: "
        "2 · L · B · (D + 2F) bytes. Answer {'params_and_optimizer_bytes': ..., 'activation_bytes': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q14",
        title="pure DP for Llama 2 13B, per chip (book Q3.1)",
        solve=_q14,
        unit="bytes",
        hint="Data parallelism replicates the bf16 weights, their bf16 gradients and the fp32 Adam moments on "
        "every chip: (2 + 2 + 8) bytes per parameter.",
    )
)
register(
    Exercise(
        id="ch05.q15",
        title="pure FSDP on a v5p 16x16x16 (book Q3.2)",
        solve=_q15,
        unit="tokens, bytes",
        hint="Smallest compute-bound batch: 850 tokens per chip x 4096 chips. Memory: parameters, Adam state and the "
        "checkpoints of a 3M-token batch, spread over 4096 chips. Answer {'min_batch_tokens': ..., "
        "'bytes_per_chip': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q16",
        title="FSDP + TP for Llama 2 13B (book Q3.3)",
        solve=_q16,
        unit="tokens per chip",
        hint="The mixed layout needs B / N > α² / (M_X M_Y F) with M_X M_Y = 2 (its FSDP and tensor collectives "
        "overlap on different axes, so the slower sets the time; adding them instead gives 4x); compare with 3M "
        "tokens over 4096 chips. Answer {'critical_tokens_per_chip': ..., 'tokens_per_chip': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q17",
        title="1M and 10M tokens, pure FSDP (book Q4)",
        solve=lambda: {
            "max_chips_1M": 1e6 / _fsdp_critical(3),
            "max_chips_10M": 10e6 / _fsdp_critical(3),
            "pods_10M": 10e6 / _fsdp_critical(3) / POD_CHIPS,
        },
        unit="chips, pods",
        hint="Chips = batch / 850 for each batch. FSDP's collectives ride ICI, which stops at a pod of 8960 chips: "
        "the 10M bound, over 8960, says how many pods' worth of chips it would need (more than one: the rest would "
        "be DCN data parallelism, Exercise 5.2). Answer {'max_chips_1M': ..., 'max_chips_10M': ..., "
        "'pods_10M': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q18",
        title="chips per 8k-token sequence, planner's 70B",
        solve=_q18,
        unit="chips",
        hint="Run training.plan('llama3-70b', Slice('v5p', (16, 16, 16)), 4 * 2**20, 8192), read the layout it "
        "ranks first (result[0]: the simplest of the first tier) and multiply its tensor and context degrees.",
    )
)


def _q19():
    from ..training import kv_exchange

    x = kv_exchange("llama3-70b", 65_536, 8, tensor=8)
    return {"received_bytes": x.received_bytes, "mha_ratio": x.gqa_saving}


def _q20():
    from ..topology import Slice
    from ..training import causal_balance, exchange_time

    ring = exchange_time("llama3-70b", Slice("v5p", (16, 16, 16)), 32_768, 8, tensor=4, form="ring")
    return {"break_even_tokens": ring.break_even_seq_len, "plain_imbalance": causal_balance(8).plain_ratio}


def _q21():
    from ..training import fp8_gain

    g = fp8_gain("llama3-8b", "h100", 16_384)
    return {"fp8_fraction": g.fp8_fraction, "speedup": g.speedup}


def _q22():
    from ..training import fp8_gain

    lo, hi = 1024, 2**24  # the gain falls as the sequence grows: bisect for 1.5x
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fp8_gain("llama3-70b", "h100", mid).speedup > 1.5 else (lo, mid)
    return hi


register(
    Exercise(
        id="ch05.q19",
        title="K/V a context rank gathers, 70B at 64k",
        solve=_q19,
        unit="bytes, ratio",
        hint="With CP = 8 and TP = 8 each rank holds n_kv_heads / min(8, 8) KV heads; it receives the K and V of the "
        "7/8 of the sequence other ranks hold: S x 2 x K_held x H x 2 bytes x 7/8 (training.kv_exchange). Multi-head "
        "attention would give each tensor rank n_heads / 8 KV heads. Answer {'received_bytes': ..., 'mha_ratio': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q20",
        title="K/V ring passes on v5p; plain imbalance",
        solve=_q20,
        unit="tokens, ratio",
        hint="A pass moves S/CP x 2 x K_held x H x 2 bytes over one ICI link one way; the chunk's attention is the "
        "rank's causal attention FLOPs / CP at the bf16 peak. The pass grows as S and the attention as S^2: solve for "
        "equality (training.exchange_time(..., form='ring').break_even_seq_len). Plain split: rank i does "
        "(2i + 1)/CP^2 of the work (training.causal_balance). Answer {'break_even_tokens': ..., "
        "'plain_imbalance': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q21",
        title="FP8 share and gain, Llama 3 8B at 16k",
        solve=_q21,
        unit="fraction, ratio",
        hint="FP8: the projections and the MLP (flops_breakdown(16384, training=True)); bf16: attention and the "
        "unembedding. Amdahl: speedup = 1 / ((1 - f) + f / r) with r = FP8 peak / bf16 peak (training.fp8_gain). "
        "Answer {'fp8_fraction': ..., 'speedup': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q22",
        title="where FP8 stops paying 1.5x for 70B on H100",
        solve=_q22,
        unit="tokens",
        hint="With r = 2, a speedup of 1.5 needs f = 2/3 of the FLOPs in FP8. Attention FLOPs per token grow linearly "
        "with S while the linear layers' do not: solve f(S) = 2/3, or bisect "
        "training.fp8_gain('llama3-70b', 'h100', S).",
    )
)
