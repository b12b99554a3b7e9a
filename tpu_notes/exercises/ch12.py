"""Exercises of Chapter 12 (ids ch12.*): end-to-end problems that need several chapters at once."""

from __future__ import annotations

from ..hardware import get_chip
from ..inference import (
    SLO,
    LengthDistribution,
    Workload,
    cost_at_rate,
    deploy,
    max_rate_at_attainment,
    smallest_topology,
)
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


#: Exercise 12.3's traffic and objective, as Chapter 8 serves Llama 3 70B: 8k-token prompts, 512-token answers.
SERVING_SLO = SLO(ttft_s=2.0, tpot_s=0.05)


def serving_workload() -> Workload:
    """Exercise 12.3's seeded Poisson stream (its rate is what the goodput search varies)."""
    return Workload.poisson(
        1.0, n_requests=1500, prompt=LengthDistribution.fixed(8192), output=LengthDistribution.fixed(512), seed=0
    )


def _q3():
    int8 = dict(weight_dtype="int8", kv_dtype="int8")
    topo = smallest_topology("llama3-70b", "v5e", batch=32, seq_len=8192, **int8)
    deployment = deploy("llama3-70b", "v5e", topo.n_chips, **int8)
    good = max_rate_at_attainment(deployment, serving_workload(), SERVING_SLO, 0.9)
    bill = cost_at_rate(good.result, "v5e", slo=SERVING_SLO)
    return {
        "chips": topo.n_chips,
        "requests_per_s": good.rate_per_s,
        "dollars_per_million_output": bill.dollars_per_million_output,
    }


def _q4():
    return {
        "v5p": training_cost("llama3-405b", TOKENS, "v5p", 0.45),
        "h100": training_cost("llama3-405b", TOKENS, "h100", 0.40),
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
        title="serving the trained model under an objective",
        solve=_q3,
        unit="chips, requests/s, $ per million output tokens",
        hint="inference.smallest_topology for int8 weights and KV at batch 32 and 8192 tokens gives the slice; "
        "inference.deploy it, search the highest Poisson rate at which 90% of requests meet SLO(ttft_s=2.0, "
        "tpot_s=0.05) with inference.max_rate_at_attainment over Workload.poisson(1.0, n_requests=1500, "
        "prompt=LengthDistribution.fixed(8192), output=LengthDistribution.fixed(512), seed=0), and bill that run "
        "with inference.cost_at_rate. Answer {'chips': ..., 'requests_per_s': ..., "
        "'dollars_per_million_output': ...}.",
    )
)
register(
    Exercise(
        id="ch12.q4",
        title="the 405B run on v5p and on H100",
        solve=_q4,
        unit="$",
        hint="training.training_cost for llama3-405b over 15T tokens at each chip's price: 45% MFU on v5p, 40% on "
        "H100. Answer {'v5p': ..., 'h100': ...}.",
    )
)
