"""What serving costs as a buyer sees it: dollars per million input tokens, per million output tokens and per request
(Chapter 8), from the one serving step model (:mod:`tpu_notes.inference.engine`).

A request of ``P`` prompt tokens and ``G`` output tokens costs the chips two things:

- its **prefill**: a share of a prefill step (:meth:`~tpu_notes.inference.engine.Deployment.prefill_step` of
  ``prefill_batch`` whole prompts), ``step × n_chips / (prefill_batch · P)`` chip-seconds per prompt token;
- its **generation**: ``G`` decode steps at ``batch`` sequences, the step reading ``P + i`` tokens of context per
  sequence at the ``i``-th output token (``i = 1 .. G``: the prompt, the tokens generated so far and the new one),
  each step's chip-time shared by the ``batch`` tokens it emits. The first output token is counted as a decode step
  too (an engine samples it at the end of the prefill; counting it here overstates the bill by one step in ``G``).

The decode price is the exact mean of the step over those ``G`` contexts: every step is priced (``G`` calls of the
engine's clock, a few microseconds each) for ``G ≤`` :data:`EXACT_STEPS`; past that, the composite trapezoid rule
over :data:`EXACT_STEPS` + 1 evenly spaced contexts, which is exact while the step is affine in the context (it is
in the engine: the KV read is the only part that grows with it, and it sits outside the ``max``). A batch whose
sequences are at every age of a continuous batch, rather than all at the same one, has the same mean (the step is
affine in the total KV), so the figure holds for both.

Dollars are chip-seconds × price per chip-hour / 3600 / ``utilisation``. The default utilisation,
:data:`DEFAULT_UTILISATION` = 1.0, is a chip busy every second it is paid for: the lowest price these steps allow, a
floor rather than a forecast (a server loaded to half its capacity pays twice as much per token). The price defaults
to the chip's on-demand ``dollars_per_hour`` in :mod:`tpu_notes.hardware`, whose source the result records.

:class:`ServingCost` holds figures, not methods that recompute them, so that a simulated run (the serving simulator's
measured chip-seconds) can fill the same record: its step fields are then ``None`` and ``source`` says where the
figures came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from .. import rules
from ..hardware import get_chip, source
from ..units import Positive, checked, fmt
from .engine import MAX_ROWS, Deployment, EngineStep, _decode_point
from .step import Batch, Context

#: The utilisation :func:`serving_cost` assumes unless told: every paid chip-second runs a step (a price floor).
DEFAULT_UTILISATION = 1.0
#: Output lengths up to this are priced step by step; longer ones by the trapezoid rule over this many intervals.
EXACT_STEPS = 4096
_Utilisation = Annotated[float, Positive(maximum=1.0)]
#: The highest price per chip-hour (US dollars) a cost accepts: above any listed accelerator by orders of magnitude.
MAX_PRICE = 1e6
_Price = Annotated[float, Positive(maximum=MAX_PRICE)]


@dataclass(frozen=True)
class ServingCost:
    """The bill of serving one workload (``prompt_len`` tokens in, ``output_len`` out per request) on one
    deployment, as a buyer of chip-hours sees it."""

    dollars_per_million_input: float  # $ per 1e6 prompt tokens prefilled
    dollars_per_million_output: float  # $ per 1e6 tokens generated
    dollars_per_request: float  # $ for one request: prompt_len tokens in, output_len out
    prefill_share: float  # share of dollars_per_request that pays for the prefill, in [0, 1]
    utilisation: float  # share of paid chip-time that runs steps (1.0: busy all the time, a price floor)
    dollars_per_chip_hour: float  # price of one chip for one hour, $
    price_source: str  # where dollars_per_chip_hour came from
    prompt_len: int  # tokens in per request
    output_len: int  # tokens out per request
    batch: int  # sequences decoding together
    prefill_batch: int  # whole prompts per prefill step
    n_chips: int  # devices of the replica
    chip_seconds_per_input_token: float  # chip-seconds of prefill per prompt token, chip·s
    chip_seconds_per_output_token: float  # chip-seconds of decode per output token, chip·s
    prefill_step_s: float  # one prefill step of prefill_batch prompts, seconds
    decode_step_s: float  # mean decode step over the output's contexts, seconds
    source: str  # what the figures rest on: "engine steps" (serving_cost) or a simulation
    prefill: EngineStep | None = field(default=None, repr=False)  # the prefill step (None: not from steps)
    decode_first: EngineStep | None = field(default=None, repr=False)  # decode step at context prompt_len + 1
    decode_last: EngineStep | None = field(default=None, repr=False)  # decode step at prompt_len + output_len

    def __repr__(self) -> str:
        return (
            f"ServingCost(${self.dollars_per_million_input:.3g}/M input, ${self.dollars_per_million_output:.3g}/M "
            f"output, ${self.dollars_per_request:.3g} per request of {self.prompt_len:,} in + {self.output_len:,} "
            f"out ({self.prefill_share:.0%} prefill); batch {self.batch}, prefill batch {self.prefill_batch}, "
            f"{self.n_chips} chips at ${self.dollars_per_chip_hour:.3g}/chip-hour ({self.price_source}), "
            f"utilisation {self.utilisation:.0%}; prefill step {fmt(self.prefill_step_s, 's')}, mean decode step "
            f"{fmt(self.decode_step_s, 's')}; from {self.source})"
        )


def _check_deployment(value, name: str = "deployment") -> Deployment:
    """``value`` if it is an engine :class:`~tpu_notes.inference.engine.Deployment`, else a ``TypeError`` naming
    ``name``."""
    if not isinstance(value, Deployment):
        raise TypeError(
            f"{name} must be a tpu_notes.inference.engine.Deployment (build one with "
            f"tpu_notes.inference.engine.deploy(model, chip, n_chips, ...)); got {type(value).__name__}"
        )
    return value


def _price(d: Deployment, dollars_per_chip_hour) -> tuple[float, str]:
    if dollars_per_chip_hour is not None:
        return float(dollars_per_chip_hour), "given"
    c = get_chip(d.chip)
    if c.dollars_per_hour is None:
        raise ValueError(f"dollars_per_chip_hour must be given: {c.long_name} has no price in tpu_notes.hardware")
    return c.dollars_per_hour, source(c, "dollars_per_hour")


def _mean_decode_step(d: Deployment, batch: int, prompt_len: int, output_len: int) -> float:
    """Mean seconds of the ``output_len`` decode steps at ``batch`` over contexts ``prompt_len + 1 ..
    prompt_len + output_len`` (see the module docstring for how it is summed). Unchecked: :func:`serving_cost`
    checks first."""
    P, G = prompt_len, output_len
    if G <= EXACT_STEPS:
        return sum(d._seconds(batch, batch * (P + i)) for i in range(1, G + 1)) / G
    n = EXACT_STEPS
    xs = [1 + (G - 1) * j / n for j in range(n + 1)]  # evenly spaced output positions, 1 .. G
    ys = [d._seconds(batch, round(batch * (P + x))) for x in xs]
    return (sum(ys) - 0.5 * (ys[0] + ys[-1])) / n  # trapezoid rule's mean over [1, G]


@checked
def serving_cost(
    deployment: Deployment,
    prompt_len: Context,
    output_len: Context,
    batch: Batch,
    *,
    utilisation: _Utilisation = DEFAULT_UTILISATION,
    dollars_per_chip_hour: _Price | None = None,
    prefill_batch: Batch | None = None,
) -> ServingCost:
    """The bill of serving requests of ``prompt_len`` tokens in and ``output_len`` out on ``deployment``, decoding
    ``batch`` sequences at a time and prefilling ``prefill_batch`` prompts per step (default 1: an 8k prompt is
    already a large matmul). See the module docstring for the sums.

    Refuses (``ValueError`` naming ``batch`` and the largest that fits) a batch whose caches at ``prompt_len +
    output_len`` do not fit the deployment's KV pool, and likewise a ``prefill_batch`` whose prompts do not. The
    price is ``dollars_per_chip_hour`` or the chip's listed on-demand price (an error if it has none)."""
    d = _check_deployment(deployment)
    P, G, B = prompt_len, output_len, batch
    pb = 1 if prefill_batch is None else prefill_batch
    top = P + G
    if top > 2**26:
        raise ValueError(f"prompt_len + output_len must be at most {2**26:,} tokens; got {top:,}")
    _decode_point(B, top, seq_arg="(prompt_len + output_len)")
    rules.product_within({"prefill_batch": pb, "prompt_len": P}, MAX_ROWS, what="prompt tokens in one prefill step")
    if B * top > d.kv_capacity_tokens:
        raise ValueError(
            f"batch={B} sequences of {P:,} + {G:,} tokens do not fit beside the weights on {d.n_chips} "
            f"{d.chip.long_name} devices: the largest batch that fits is {d.max_batch(top)}"
        )
    if pb * P > d.kv_capacity_tokens:
        raise ValueError(
            f"prefill_batch={pb} prompts of {P:,} tokens do not fit the KV pool of {d.n_chips} "
            f"{d.chip.long_name} devices: at most {d.max_batch(P)}"
        )
    price, where = _price(d, dollars_per_chip_hour)
    pre = d.prefill_step(P, pb)
    first = d.step(B, B * (P + 1))
    last = d.step(B, B * top)
    mean_step = _mean_decode_step(d, B, P, G)
    n = d.n_chips
    cs_in = pre.total * n / (pb * P)
    cs_out = mean_step * n / B
    per_s = price / 3600.0 / utilisation  # dollars per chip-second of steps
    for figure in (1e6 * cs_in * per_s, 1e6 * cs_out * per_s):
        rules.finite_result(figure, argument="utilisation", what="dollars per million tokens")
    request_in, request_out = P * cs_in, G * cs_out
    return ServingCost(
        dollars_per_million_input=1e6 * cs_in * per_s,
        dollars_per_million_output=1e6 * cs_out * per_s,
        dollars_per_request=(request_in + request_out) * per_s,
        prefill_share=request_in / (request_in + request_out),
        utilisation=utilisation,
        dollars_per_chip_hour=price,
        price_source=where,
        prompt_len=P,
        output_len=G,
        batch=B,
        prefill_batch=pb,
        n_chips=n,
        chip_seconds_per_input_token=cs_in,
        chip_seconds_per_output_token=cs_out,
        prefill_step_s=pre.total,
        decode_step_s=mean_step,
        source="engine steps",
        prefill=pre,
        decode_first=first,
        decode_last=last,
    )


__all__ = ["DEFAULT_UTILISATION", "EXACT_STEPS", "ServingCost", "serving_cost"]
