"""Exercises of Chapter 5 (ids ch05.*), registered with their reference solutions.

The numbered problems follow the scaling book's training chapter (training.md): its worked questions 1–4 on
Llama 2 13B and the numbers its text works out along the way; the last few are ours, on the planner.
"""

from __future__ import annotations

from . import Exercise, register

POD_CHIPS = 16 * 20 * 28  # a full TPU v5p pod
CUBE_CHIPS = 16 * 16 * 16  # a v5p 16x16x16 slice


def _fsdp_critical(n_axes: int = 3) -> float:
    from ..training import critical_batch_per_chip

    return critical_batch_per_chip("fsdp", "v5p", n_axes=n_axes)


def _q3():
    from ..training import training_time

    chips = 16e6 / _fsdp_critical(3)
    return {"chips": chips, "days": training_time("llama3-70b", 15e12, "v5p", round(chips), 0.5) / 86_400}


def _q5():
    from ..training import max_tensor_parallelism
    from ..transformer import get_model

    return max_tensor_parallelism("v5p", get_model("llama3-70b").d_ff)


def _q6():
    from ..training import optimal_fsdp_degree
    from ..transformer import get_model

    return optimal_fsdp_degree(3.5e6, POD_CHIPS, get_model("llama3-70b").d_ff, fsdp_axes=2, tp_axes=1)


def _q7():
    from ..transformer import get_model

    return get_model("llama2-13b").param_count()


def _q8():
    from ..training import training_memory

    m = training_memory("llama2-13b", None, 16_000_000, 4096, remat="mlp_outputs")
    return {"params_and_optimizer_bytes": m.params + m.optimizer, "activation_bytes": m.activations}


def _q9():
    from ..training import Parallelism, training_memory

    m = training_memory("llama2-13b", Parallelism(data=CUBE_CHIPS), 3 * 2**20, 32768, remat="mlp_outputs")
    return m.params + m.optimizer


def _q10():
    from ..training import training_memory

    one = training_memory("llama2-13b", None, 3 * 2**20, 32768, remat="mlp_outputs")
    return {
        "min_batch_tokens": _fsdp_critical(3) * CUBE_CHIPS,
        "bytes_per_chip": (one.params + one.optimizer + one.activations) / CUBE_CHIPS,
    }


def _q11():
    from ..training import critical_batch_per_chip
    from ..transformer import get_model

    F = get_model("llama2-13b").d_ff
    return {  # the book's current convention (235 tokens per chip); combine="sum" is the older 4x (940)
        "critical_tokens_per_chip": critical_batch_per_chip("fsdp+tp", "v5p", d_ff=F, fsdp_axes=2, combine="max"),
        "tokens_per_chip": 3 * 2**20 / CUBE_CHIPS,
    }


def _q13():
    from ..topology import Slice
    from ..training import plan

    return plan("llama3-70b", Slice("v5p", (16, 16, 16)), 4 * 2**20, 4096)[0].parallelism.tensor


def _q14():
    from ..training import pipeline_bubble_fraction

    return pipeline_bubble_fraction(8, 32)


def _q15():
    from ..training import critical_batch_per_chip

    return 4 * critical_batch_per_chip("dcn", "v5p")


register(
    Exercise(
        id="ch05.q1",
        title="the smallest batch a full pod can take with pure data parallelism",
        solve=lambda: _fsdp_critical(3) * POD_CHIPS,
        unit="tokens",
        hint="Over three torus axes the critical batch is C / W_ici / 3 tokens per chip; multiply by the chips of a "
        "16 x 20 x 28 pod.",
    )
)
register(
    Exercise(
        id="ch05.q2",
        title="how far a 40M-token batch scales with FSDP",
        solve=lambda: 40e6 / _fsdp_critical(3),
        unit="chips",
        hint="Each chip needs at least 850 tokens (three axes on v5p) to hide the weight gathers under compute.",
    )
)
register(
    Exercise(
        id="ch05.q3",
        title="Llama 3 70B with a 16M-token batch: chips and days",
        solve=_q3,
        unit="chips, days",
        hint="Chips = batch / 850. Time = 6 · params · tokens / (chips · C · MFU) with 15T tokens and MFU 0.5; "
        "answer a dict {'chips': ..., 'days': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q4",
        title="pure FSDP with a 2M-token batch",
        solve=lambda: 2e6 / _fsdp_critical(3),
        unit="chips",
        hint="The batch per chip must stay above 2550 / 3 tokens on v5p.",
    )
)
register(
    Exercise(
        id="ch05.q5",
        title="the most tensor parallelism Llama 3 70B's MLP affords on one v5p axis",
        solve=_q5,
        unit="chips",
        hint="Tensor parallelism stays compute-bound while Y < F / (C / W_ici); it does not depend on the batch.",
    )
)
register(
    Exercise(
        id="ch05.q6",
        title="the best FSDP degree for a 3.5M-token batch on a pod",
        solve=_q6,
        unit="chips",
        hint="X_opt = sqrt((B / F)(M_X / M_Y) N) with F = 28,672, N = 8960 and two FSDP axes for one tensor axis.",
    )
)
register(
    Exercise(
        id="ch05.q7",
        title="Llama 2 13B's parameters (book question 1)",
        solve=_q7,
        unit="parameters",
        hint="3·L·D·F for the gated MLP, 4·D·N·H·L for attention (N = K: multi-head), 2·V·D for the embeddings.",
    )
)
register(
    Exercise(
        id="ch05.q8",
        title="Llama 2 13B's training memory at a 16M-token batch (book question 2)",
        solve=_q8,
        unit="bytes",
        hint="Parameters and Adam: (2 + 4 + 4) bytes per parameter. Checkpoints after the three MLP matmuls: "
        "2 · L · B · (D + 2F) bytes. Answer {'params_and_optimizer_bytes': ..., 'activation_bytes': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q9",
        title="pure data parallelism for Llama 2 13B: bytes per chip (book question 3.1)",
        solve=_q9,
        unit="bytes",
        hint="Data parallelism replicates the bf16 weights and the fp32 Adam moments on every chip.",
    )
)
register(
    Exercise(
        id="ch05.q10",
        title="pure FSDP on a v5p 16x16x16 (book question 3.2)",
        solve=_q10,
        unit="tokens, bytes",
        hint="Smallest compute-bound batch: 850 tokens per chip x 4096 chips. Memory: parameters, Adam state and the "
        "checkpoints of a 3M-token batch, spread over 4096 chips. Answer {'min_batch_tokens': ..., "
        "'bytes_per_chip': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q11",
        title="mixed FSDP + tensor parallelism for Llama 2 13B (book question 3.3)",
        solve=_q11,
        unit="tokens per chip",
        hint="The mixed layout needs B / N > α² / (M_X M_Y F) with M_X M_Y = 2 (its FSDP and tensor collectives "
        "overlap on different axes, so the slower sets the time; adding them instead gives 4x); compare with 3M "
        "tokens over 4096 chips. Answer {'critical_tokens_per_chip': ..., 'tokens_per_chip': ...}.",
    )
)
register(
    Exercise(
        id="ch05.q12",
        title="batch 1M and 10M with pure FSDP (book question 4)",
        solve=lambda: {"max_chips_1M": 1e6 / _fsdp_critical(3), "max_chips_10M": 10e6 / _fsdp_critical(3)},
        unit="chips",
        hint="Chips = batch / 850 for each batch; compare with the 4096 chips of the slice.",
    )
)
register(
    Exercise(
        id="ch05.q13",
        title="the planner's tensor degree for Llama 3 70B",
        solve=_q13,
        unit="chips",
        hint="Run training.plan('llama3-70b', Slice('v5p', (16, 16, 16)), 4 * 2**20, 4096) and read the best layout.",
    )
)
register(
    Exercise(
        id="ch05.q14",
        title="the bubble of 8 stages and 32 microbatches",
        solve=_q14,
        unit="fraction",
        hint="(P − 1) / (M + P − 1): the warm-up and drain of the pipeline over the whole step.",
    )
)
register(
    Exercise(
        id="ch05.q15",
        title="the smallest global batch for four v5p slices over DCN",
        solve=_q15,
        unit="tokens",
        hint="Each slice needs C / W_dcn tokens (C and W_dcn per chip: the slice's compute and DCN bandwidth both "
        "scale with its chips).",
    )
)
