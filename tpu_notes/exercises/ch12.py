"""Exercises of Chapter 12 (ids ch12.*): end-to-end problems that need several chapters at once."""

from __future__ import annotations

from ..hardware import get_chip
from ..inference import cost_per_million_tokens, decode_step_time, smallest_topology
from ..training import training_cost, training_flops
from . import Exercise, register

TOKENS = 15e12  # a Llama-3-sized pre-training run
DEADLINE_DAYS = 30
TRAIN_MFU = 0.45


def _q1():
    c = get_chip("v5p")
    chips = training_flops("llama3-70b", TOKENS) / (DEADLINE_DAYS * 86_400 * c.peak_flops() * TRAIN_MFU)
    return {"chips": chips, "dollars": chips * DEADLINE_DAYS * 24 * c.dollars_per_hour}


def _q2():
    from ..training.subslices import plan_slices

    options = plan_slices("llama3-70b", "v5p", 4 * 2**20, 4096, matmul_efficiency=0.8, rank_by="roofline")
    best = next(o for o in options if o.ok).best
    return {"tensor": best.parallelism.tensor, "mfu": best.step.mfu}


def _q3():
    need = dict(batch=32, seq_len=8192, weight_dtype="int8", kv_dtype="int8")
    topo = smallest_topology("llama3-70b", "v5e", **need)
    step = decode_step_time("llama3-70b", "v5e", topo.n_chips, 32, 8192, weight_dtype="int8", kv_dtype="int8")
    return {"chips": topo.n_chips, "dollars_per_million_tokens": cost_per_million_tokens(step, chip="v5e")}


def _q4():
    return {
        "v5p": training_cost("llama3-70b", TOKENS, "v5p", 0.45),
        "h100": training_cost("llama3-70b", TOKENS, "h100", 0.40),
    }


register(
    Exercise(
        id="ch12.q1",
        title="chips and dollars for a deadline",
        solve=_q1,
        unit="chips, $",
        hint="Training FLOPs (Chapter 6) / (30 days x peak x 0.45) gives the chips; chips x hours x the v5p "
        "price gives the bill. Answer {'chips': ..., 'dollars': ...}.",
    )
)
register(
    Exercise(
        id="ch12.q2",
        title="the layout on a v5p pod, at a realistic efficiency",
        solve=_q2,
        unit="chips, fraction",
        hint="A whole v5p pod is more than one slice Cloud TPU schedules (topology.pod('v5p').max_chips): rank "
        "the slices it offers with training.subslices.plan_slices('llama3-70b', 'v5p', 4 * 2**20, 4096, "
        "matmul_efficiency=0.8, rank_by='roofline') and read the fastest legal option's best layout: its tensor "
        "degree and step.mfu (the roofline's MFU). Answer {'tensor': ..., 'mfu': ...}.",
    )
)
register(
    Exercise(
        id="ch12.q3",
        title="serving the trained model",
        solve=_q3,
        unit="chips, $ per million tokens",
        hint="inference.smallest_topology for int8 weights and KV at batch 32 and 8192 tokens of context, then the "
        "decode step on that many chips and its cost per million tokens. Answer {'chips': ..., "
        "'dollars_per_million_tokens': ...}.",
    )
)
register(
    Exercise(
        id="ch12.q4",
        title="the same run on v5p and on H100",
        solve=_q4,
        unit="$",
        hint="training.training_cost at each chip's price: 45% MFU on v5p, 40% on H100. "
        "Answer {'v5p': ..., 'h100': ...}.",
    )
)
