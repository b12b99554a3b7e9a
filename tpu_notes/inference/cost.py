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
**floor** rather than a forecast (a server loaded to half its capacity pays twice as much per token), and the repr
says so. The price defaults to the chip's on-demand ``dollars_per_hour`` in :mod:`tpu_notes.hardware`, whose source
(and date) the result records.

**The bill at a rate** (:func:`cost_at_rate`, a :class:`CostAtRate`) prices a simulated run instead
(:func:`tpu_notes.inference.simulate`): every provisioned chip (``result.n_chips``: replicas and prefill instances
included) for the run's wall-clock, busy or not. The bill is ``n_chips × duration × price``; it is split between
input and output tokens in proportion to the run's busy chip-seconds of prefill and of decode (idle time is shared
in the same proportion: an idle chip is waiting for either kind of work), so ``$/M input = bill × prefill share /
input tokens`` and likewise for output. The utilisation achieved is busy chip-seconds / provisioned chip-seconds;
the same run's 100%-busy floor is each figure × that utilisation. Given SLO bounds (``ttft_slo_s``, ``tpot_slo_s``),
it also prices each request that met them: the bill / the requests that met the SLO (DistServe's view: a late answer
is paid for and worth nothing).

**Prices** (:func:`chip_prices`, :class:`ChipPrice`): the on-demand price in :mod:`tpu_notes.hardware` and, where
the vendor publishes them, 1-year and 3-year committed-use prices, each with its source and date;
:func:`price_sensitivity` re-prices a bill between two of them (every dollar figure is proportional to the price), and
:func:`overhead_sensitivity` re-prices a deployment with the efficiency model's fitted per-layer decode overhead
scaled (:func:`with_decode_overhead`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Annotated, ClassVar

import numpy as np

from .. import rules
from ..hardware import CHIPS, get_chip, source
from ..units import Positive, checked, fmt
from .engine import MAX_ROWS, Deployment, EngineStep, _check_deployment, _decode_point, deploy
from .simulator import SimResult
from .slo import SLO
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

    #: The fields that are dollars (proportional to dollars_per_chip_hour; price_sensitivity rescales them).
    DOLLARS: ClassVar[tuple[str, ...]] = (
        "dollars_per_million_input",
        "dollars_per_million_output",
        "dollars_per_request",
    )

    def __repr__(self) -> str:
        return (
            f"ServingCost(${self.dollars_per_million_input:.3g}/M input, ${self.dollars_per_million_output:.3g}/M "
            f"output, ${self.dollars_per_request:.3g} per request of {self.prompt_len:,} in + {self.output_len:,} "
            f"out ({self.prefill_share:.0%} prefill); batch {self.batch}, prefill batch {self.prefill_batch}, "
            f"{self.n_chips} chips at ${self.dollars_per_chip_hour:.3g}/chip-hour ({self.price_source}), "
            f"{_utilisation_words(self.utilisation)}; prefill step {fmt(self.prefill_step_s, 's')}, mean decode step "
            f"{fmt(self.decode_step_s, 's')}; from {self.source})"
        )


def _utilisation_words(utilisation: float) -> str:
    """How a repr states the utilisation a bill assumes: at 1.0 the bill is a floor, and says so."""
    if utilisation == 1.0:
        return "floor (100% busy)"
    return f"utilisation {utilisation:.0%}"


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


# ---------------------------------------------------------------------------------------------- prices
#: Kinds of price a chip is rented at, dearest first.
PRICE_KINDS = ("on-demand", "1-yr committed", "3-yr committed")

_TPU_PRICING = (
    "{kind}, cloud.google.com/tpu/pricing (cheapest US region), Feb 2025 figures, as copies of that table give them "
    "(the stored copy of the page itself predates v5e); read 2026-12-06"
)

#: Committed-use prices per chip-hour (US dollars) where the vendor publishes them: {chip: {kind: (price, source)}}.
#: The on-demand price is the chip's ``dollars_per_hour`` in :mod:`tpu_notes.hardware`. No GPU list price for a
#: committed term was found (cloud GPUs are sold as whole 8-GPU machines, with discounts negotiated per contract).
COMMITTED_PRICES: dict[str, dict[str, tuple[float, str]]] = {
    "v5e": {
        "1-yr committed": (0.84, _TPU_PRICING.format(kind="1-year committed use")),
        "3-yr committed": (0.54, _TPU_PRICING.format(kind="3-year committed use")),
    },
    "v5p": {
        "1-yr committed": (2.94, _TPU_PRICING.format(kind="1-year committed use")),
        "3-yr committed": (1.89, _TPU_PRICING.format(kind="3-year committed use")),
    },
}


@dataclass(frozen=True)
class ChipPrice:
    """One price of one chip-hour, with what kind of rental it is and where it was read."""

    chip: str  # chip name (tpu_notes.hardware)
    kind: str  # one of PRICE_KINDS: "on-demand", "1-yr committed", "3-yr committed"
    dollars_per_chip_hour: float  # $ per chip-hour (one GPU, one TPU chip)
    source: str  # where and when the figure was read

    def __post_init__(self):
        if not isinstance(self.chip, str):
            raise TypeError(f"chip must be a chip name, e.g. 'v5e'; got {type(self.chip).__name__}")
        object.__setattr__(self, "chip", get_chip(self.chip, argument="chip").name)
        if not isinstance(self.kind, str) or self.kind not in PRICE_KINDS:
            raise ValueError(f"kind must be one of {', '.join(PRICE_KINDS)}; got {self.kind!r}")
        price = Positive(maximum=MAX_PRICE).check("dollars_per_chip_hour", self.dollars_per_chip_hour)
        object.__setattr__(self, "dollars_per_chip_hour", float(price))
        if not isinstance(self.source, str) or not self.source.strip():
            raise TypeError(f"source must be a non-empty string saying where the price was read; got {self.source!r}")

    def __repr__(self) -> str:
        return f"ChipPrice({self.chip} {self.kind}: ${self.dollars_per_chip_hour:.3g}/chip-hour; {self.source})"


def chip_prices(chip) -> dict[str, ChipPrice]:
    """The published prices of ``chip`` (a name, a :class:`~tpu_notes.hardware.Chip`, a system or a
    :class:`~tpu_notes.inference.engine.Deployment`), ``{kind: ChipPrice}`` in :data:`PRICE_KINDS` order: the
    on-demand price of :mod:`tpu_notes.hardware` and the committed-use prices of :data:`COMMITTED_PRICES`. Refuses
    (``ValueError`` naming ``chip``) a chip with no price."""
    c = get_chip(chip, argument="chip")
    if c.dollars_per_hour is None:
        priced = ", ".join(n for n, x in CHIPS.items() if x.dollars_per_hour is not None)
        raise ValueError(f"chip {c.name!r} has no price in tpu_notes.hardware; priced chips: {priced}")
    out = {"on-demand": ChipPrice(c.name, "on-demand", c.dollars_per_hour, source(c, "dollars_per_hour"))}
    for kind in PRICE_KINDS[1:]:
        if kind in COMMITTED_PRICES.get(c.name, {}):
            price, where = COMMITTED_PRICES[c.name][kind]
            out[kind] = ChipPrice(c.name, kind, price, where)
    return out


#: The figures a sentence about a bill can quote: ``what`` → (the cost record's field, its unit in words).
_FIGURES = {
    "input": ("dollars_per_million_input", "per million input tokens"),
    "output": ("dollars_per_million_output", "per million output tokens"),
    "request": ("dollars_per_request", "per request"),
}


def _figure(what) -> tuple[str, str]:
    """``(field, words)`` of the figure ``what`` names ("input", "output" or "request"), or a ValueError."""
    if not isinstance(what, str) or what not in _FIGURES:
        raise ValueError(f"what must be one of 'input', 'output', 'request'; got {what!r}")
    return _FIGURES[what]


@dataclass(frozen=True)
class PriceRange:
    """One bill at two prices per chip-hour (:func:`price_sensitivity`): what a chapter prints as "$X–Y per million
    output tokens between 3-yr committed and on-demand prices"."""

    low: ServingCost | CostAtRate  # the bill at the low price
    high: ServingCost | CostAtRate  # the bill at the high price
    low_label: str  # the low price's kind ("3-yr committed") or "given"
    high_label: str  # the high price's kind ("on-demand") or "given"

    def sentence(self, what: str = "output") -> str:
        """One sentence giving the range of the ``what`` figure: "input", "output" (per million tokens) or
        "request"."""
        name, words = _figure(what)
        lo, hi = getattr(self.low, name), getattr(self.high, name)
        return (
            f"${lo:.3g}–{hi:.3g} {words} between {self.low_label} (${self.low.dollars_per_chip_hour:.3g}/chip-hour) "
            f"and {self.high_label} (${self.high.dollars_per_chip_hour:.3g}/chip-hour) prices"
        )

    def __repr__(self) -> str:
        return f"PriceRange({self.sentence('input')}; {self.sentence('output')})"


def _check_cost(value, name: str = "cost"):
    if not isinstance(value, (ServingCost, CostAtRate)):
        raise TypeError(
            f"{name} must be a ServingCost (serving_cost(...)) or a CostAtRate (cost_at_rate(...)); "
            f"got {type(value).__name__}"
        )
    return value


def _price_arg(value, name: str) -> tuple[float, str]:
    """A price given as a :class:`ChipPrice` (its figure and kind) or a number of dollars per chip-hour."""
    if isinstance(value, ChipPrice):
        return value.dollars_per_chip_hour, value.kind
    return Positive(maximum=MAX_PRICE).check(name, value), "given"


def _repriced(cost, price: float, where: str):
    """``cost`` with every dollar figure scaled to ``price`` per chip-hour (each is proportional to it)."""
    k = price / cost.dollars_per_chip_hour
    changes = {f: getattr(cost, f) * k for f in cost.DOLLARS if getattr(cost, f) is not None}
    return replace(cost, dollars_per_chip_hour=price, price_source=where, **changes)


def price_sensitivity(cost, low, high) -> PriceRange:
    """``cost`` (a :class:`ServingCost` or a :class:`CostAtRate`) re-priced at ``low`` and at ``high``, each a
    :class:`ChipPrice` (from :func:`chip_prices`) or dollars per chip-hour. Every dollar figure is proportional to
    the price, so the chip-seconds are not recomputed. Refuses ``low`` above ``high``."""
    _check_cost(cost)
    lo, lo_label = _price_arg(low, "low")
    hi, hi_label = _price_arg(high, "high")
    if lo > hi:
        raise ValueError(f"low must be at most high; got low=${lo:.3g} and high=${hi:.3g} per chip-hour")
    where_lo = low.source if isinstance(low, ChipPrice) else "given"
    where_hi = high.source if isinstance(high, ChipPrice) else "given"
    return PriceRange(_repriced(cost, lo, where_lo), _repriced(cost, hi, where_hi), lo_label, hi_label)


# ---------------------------------------------------------------------------------------------- the bill at a rate
_Seconds = Annotated[float, Positive(maximum=1e6)]


@dataclass(frozen=True)
class CostAtRate:
    """The bill of a simulated run (:func:`cost_at_rate`): every provisioned chip paid for the run's wall-clock,
    busy or not, split between input and output tokens by the run's busy chip-seconds of prefill and decode."""

    dollars_per_million_input: float  # $ per 1e6 prompt tokens served, at the run's rate
    dollars_per_million_output: float  # $ per 1e6 tokens generated, at the run's rate
    dollars_per_request: float  # $ per request served (the bill / requests completed)
    dollars_per_slo_request: float | None  # $ per request that met the SLO (None: no SLO given; inf: none met it)
    floor_dollars_per_million_input: float  # the same run's input price were its chips busy 100% of the time
    floor_dollars_per_million_output: float  # the same run's output price were its chips busy 100% of the time
    prefill_share: float  # share of the bill that pays for prefill (busy prefill / busy chip-seconds), in [0, 1]
    utilisation: float  # busy chip-seconds / provisioned chip-seconds, in (0, 1]
    slo_attainment: float | None  # share of completed requests that met the SLO (None: no SLO given)
    dollars_per_chip_hour: float  # price of one chip for one hour, $
    price_source: str  # where dollars_per_chip_hour came from
    n_chips: int  # chips provisioned: every replica and prefill instance
    duration_s: float  # the run's measured wall-clock, s
    requests: int  # requests completed in it
    request_rate: float  # requests completed per second of it, requests/s
    input_tokens: float  # prompt tokens served, tokens
    output_tokens: float  # tokens generated, tokens
    chip_seconds_provisioned: float  # n_chips × duration_s, chip·s
    chip_seconds_prefill: float  # busy chip-seconds of prefill, chip·s
    chip_seconds_decode: float  # busy chip-seconds of decode, chip·s
    ttft_slo_s: float | None  # the SLO's bound on time to first token, s (None: no bound)
    tpot_slo_s: float | None  # the SLO's bound on time per output token, s (None: no bound)
    engine: str  # the scheduler (and disaggregation) that ran
    source: str = "simulated run"  # what the figures rest on

    #: The fields that are dollars (proportional to dollars_per_chip_hour; price_sensitivity rescales them).
    DOLLARS: ClassVar[tuple[str, ...]] = (
        "dollars_per_million_input",
        "dollars_per_million_output",
        "dollars_per_request",
        "dollars_per_slo_request",
        "floor_dollars_per_million_input",
        "floor_dollars_per_million_output",
    )

    def __repr__(self) -> str:
        slo = ""
        if self.dollars_per_slo_request is not None:
            slo = (
                f", ${self.dollars_per_slo_request:.3g} per SLO-meeting request ({self.slo_attainment:.0%} met "
                f"{_slo_words(self.ttft_slo_s, self.tpot_slo_s)})"
            )
        return (
            f"CostAtRate(${self.dollars_per_million_input:.3g}/M input, ${self.dollars_per_million_output:.3g}/M "
            f"output, ${self.dollars_per_request:.3g} per request{slo}; at {self.request_rate:.3g} requests/s, "
            f"utilisation {self.utilisation:.0%} of {self.n_chips} chips (were they busy 100% of the time: "
            f"${self.floor_dollars_per_million_input:.3g}/M input, ${self.floor_dollars_per_million_output:.3g}/M "
            f"output); {self.prefill_share:.0%} prefill; ${self.dollars_per_chip_hour:.3g}/chip-hour "
            f"({self.price_source}); {self.requests:,} requests in {fmt(self.duration_s, 's')}; {self.engine})"
        )


def _slo_words(ttft_slo_s, tpot_slo_s) -> str:
    parts = []
    if ttft_slo_s is not None:
        parts.append(f"TTFT ≤ {fmt(ttft_slo_s, 's')}")
    if tpot_slo_s is not None:
        parts.append(f"TPOT ≤ {fmt(tpot_slo_s, 's')}")
    return ", ".join(parts)


@dataclass(frozen=True)
class _Window:
    """What :func:`cost_at_rate` reads of a run, over the run's measured window."""

    duration: float  # s
    completed: int  # requests
    input_tokens: float  # tokens
    output_tokens: float  # tokens
    chip_seconds_prefill: float  # chip·s
    chip_seconds_decode: float  # chip·s
    ttft: np.ndarray  # each request's TTFT, s
    tpot: np.ndarray  # each request's TPOT, s


def _window(result: SimResult) -> _Window:
    """The billed span of ``result``: the whole run, first arrival to last token (every provisioned chip is paid
    for all of it, warm-up and drain included), its token totals recovered from its rates × its duration. The SLO
    share is counted over the simulator's trimmed window instead (:func:`cost_at_rate`)."""
    d = float(result.duration)
    out = float(sum(result.tokens_all)) if result.tokens_all else result.output_tokens_per_s * d
    return _Window(
        duration=d,
        completed=int(result.completed),
        input_tokens=result.input_tokens_per_s * d,
        output_tokens=out,
        chip_seconds_prefill=float(result.chip_seconds_prefill),
        chip_seconds_decode=float(result.chip_seconds_decode),
        ttft=np.asarray(result.ttft_all, dtype=float),
        tpot=np.asarray(result.tpot_all, dtype=float),
    )


def _check_sim_result(result) -> None:
    """Refuse a ``result`` that is not a :class:`~tpu_notes.inference.simulator.SimResult`."""
    if not isinstance(result, SimResult):
        raise TypeError(
            f"result must be a SimResult (tpu_notes.inference.simulate(deployment, workload)); "
            f"got {type(result).__name__}"
        )


def _price_per_chip_hour(c, dollars_per_chip_hour: float | None) -> tuple[float, str]:
    """``(dollars per chip-hour, where it comes from)``: the figure given, else chip ``c``'s on-demand price in
    :mod:`tpu_notes.hardware` and its source; refuses a chip with no price when none is given."""
    if dollars_per_chip_hour is not None:
        return float(dollars_per_chip_hour), "given"
    if c.dollars_per_hour is None:
        raise ValueError(f"dollars_per_chip_hour must be given: chip {c.name!r} has no price in tpu_notes.hardware")
    return c.dollars_per_hour, source(c, "dollars_per_hour")


def _busy_and_provisioned(w: _Window, n) -> tuple[float, float]:
    """``(busy, provisioned)`` chip-seconds of the billed span ``w`` on ``n`` chips: prefill + decode, and
    ``n × duration``. Refuses a chip count that is not a positive whole number, a run that served no request over
    a positive duration, one with no busy chip-seconds, and one busier than its provisioned chip-seconds."""
    if type(n) is not int or n < 1:
        raise ValueError(f"result.n_chips must be a positive whole number of chips; got {n!r}")
    if not (math.isfinite(w.duration) and w.duration > 0 and w.completed > 0):
        raise ValueError(
            f"result must have served requests over a positive duration; got {w.completed} requests in {w.duration!r} s"
        )
    busy = w.chip_seconds_prefill + w.chip_seconds_decode
    provisioned = n * w.duration
    if not (math.isfinite(busy) and busy > 0):
        raise ValueError(f"result must record busy chip-seconds (prefill + decode > 0); got {busy!r}")
    if busy > provisioned * (1 + 1e-9):
        raise ValueError(
            f"result's busy chip-seconds ({busy:.6g}) exceed its provisioned chip-seconds ({n} chips × "
            f"{w.duration:.6g} s = {provisioned:.6g}): the run's n_chips or duration is inconsistent"
        )
    return busy, provisioned


def _split_bill(w: _Window, bill: float, busy: float) -> tuple[float, float, float]:
    """``(prefill share, $ per 1e6 input tokens, $ per 1e6 output tokens)``: ``bill`` dollars split between the
    span's prompt and output tokens by its prefill share of the ``busy`` chip-seconds. Refuses a span that served
    no prompt token or no output token."""
    share = w.chip_seconds_prefill / busy
    per_in = 1e6 * bill * share / w.input_tokens if w.input_tokens > 0 else math.nan
    per_out = 1e6 * bill * (1 - share) / w.output_tokens if w.output_tokens > 0 else math.nan
    if math.isnan(per_in) or math.isnan(per_out):
        raise ValueError("result must have served both prompt tokens and output tokens")
    return share, per_in, per_out


def _slo_share(result: SimResult, w: _Window, slo: SLO | None, ttft_slo_s, tpot_slo_s) -> tuple:
    """``(share of requests meeting the SLO or None when none is given, TTFT bound s, TPOT bound s)``: ``slo``'s
    bounds and the simulator's attainment, or the share of the trimmed window's requests within the bounds given
    as floats (each None: not bounded). Refuses both ways at once."""
    if slo is not None and (ttft_slo_s is not None or tpot_slo_s is not None):
        raise ValueError("slo and ttft_slo_s/tpot_slo_s are alternatives: pass one or the other")
    if slo is not None:
        return result.attainment(slo), slo.ttft_s, slo.tpot_s
    if ttft_slo_s is None and tpot_slo_s is None:
        return None, None, None
    ok = np.ones(w.ttft.shape, dtype=bool)
    if ttft_slo_s is not None:
        ok &= w.ttft <= ttft_slo_s
    if tpot_slo_s is not None:
        ok &= w.tpot <= tpot_slo_s
    win = result.window() if len(result.arrivals_all) == len(ok) else np.ones_like(ok)
    return (float(ok[win].mean()) if win.any() else 0.0), ttft_slo_s, tpot_slo_s


@checked
def cost_at_rate(
    result: SimResult,
    chip,
    *,
    dollars_per_chip_hour: _Price | None = None,
    ttft_slo_s: _Seconds | None = None,
    tpot_slo_s: _Seconds | None = None,
    slo: SLO | None = None,
) -> CostAtRate:
    """The bill of the simulated run ``result`` (:func:`tpu_notes.inference.simulate`) at the rate it served: all
    ``result.n_chips`` provisioned chips × its wall-clock × the price, split between prefill and decode by their busy
    chip-seconds (idle time shared in the same proportion); see the module docstring.

    ``chip`` is the chip every provisioned device is (a name, a :class:`~tpu_notes.hardware.Chip`, or the
    :class:`~tpu_notes.inference.engine.Deployment` that ran): its on-demand price unless ``dollars_per_chip_hour``
    is given (a run that mixes chips is priced at one blended figure). With ``ttft_slo_s`` and/or ``tpot_slo_s``, a
    request meets the SLO when every bound given holds; the bill per such request is reported (``inf`` when none
    did); or pass ``slo``, a :class:`~tpu_notes.inference.slo.SLO` (its time-between-tokens bound included),
    instead of the two floats. The share that meets it is counted as the simulator's attainment is, over the
    requests inside the run's trimmed window (:meth:`~tpu_notes.inference.simulator.SimResult.window`), and applied
    to every request billed. Refuses a result that is not a :class:`~tpu_notes.inference.simulator.SimResult`, one
    that served no request or did no work, and one whose busy chip-seconds exceed its provisioned ones."""
    _check_sim_result(result)
    c = get_chip(chip, argument="chip")
    price, where = _price_per_chip_hour(c, dollars_per_chip_hour)
    w = _window(result)
    n = result.n_chips
    busy, provisioned = _busy_and_provisioned(w, n)
    bill = provisioned * price / 3600.0  # dollars
    share, per_in, per_out = _split_bill(w, bill, busy)
    util = min(busy / provisioned, 1.0)
    attainment, ttft_slo_s, tpot_slo_s = _slo_share(result, w, slo, ttft_slo_s, tpot_slo_s)
    per_slo = None
    if attainment is not None:
        per_slo = bill / (w.completed * attainment) if attainment > 0 else math.inf
    for figure in (per_in, per_out, bill / w.completed):
        rules.finite_result(figure, argument="dollars_per_chip_hour", what="dollars per token")
    return CostAtRate(
        dollars_per_million_input=per_in,
        dollars_per_million_output=per_out,
        dollars_per_request=bill / w.completed,
        dollars_per_slo_request=per_slo,
        floor_dollars_per_million_input=per_in * util,
        floor_dollars_per_million_output=per_out * util,
        prefill_share=share,
        utilisation=util,
        slo_attainment=attainment,
        dollars_per_chip_hour=price,
        price_source=where,
        n_chips=n,
        duration_s=w.duration,
        requests=w.completed,
        request_rate=w.completed / w.duration,
        input_tokens=w.input_tokens,
        output_tokens=w.output_tokens,
        chip_seconds_provisioned=provisioned,
        chip_seconds_prefill=w.chip_seconds_prefill,
        chip_seconds_decode=w.chip_seconds_decode,
        ttft_slo_s=ttft_slo_s,
        tpot_slo_s=tpot_slo_s,
        engine=result.engine,
    )


# ---------------------------------------------------------------------------------------------- the fitted overhead
#: The largest factor :func:`with_decode_overhead` scales the fitted per-layer decode overhead by.
MAX_OVERHEAD_FACTOR = 100.0
_Factor = Annotated[float, Positive(allow_zero=True, maximum=MAX_OVERHEAD_FACTOR)]


@checked
def with_decode_overhead(deployment: Deployment, factor: _Factor) -> Deployment:
    """``deployment`` re-deployed with its efficiency model's per-layer decode overhead
    (``EfficiencyModel.decode_overhead``, a fitted figure) multiplied by ``factor`` (0:
    none; 1: the same deployment's rates), everything else unchanged: for the sensitivity of a recommendation to
    that fit (re-simulate with it, or price it with :func:`overhead_sensitivity`)."""
    d = _check_deployment(deployment)
    e = replace(d.efficiency, decode_overhead=d.efficiency.decode_overhead * factor)
    return deploy(
        d.model,
        d.system,
        weight_dtype=d.weight_dtype,
        kv_dtype=d.kv_dtype,
        compute_dtype=d.compute_dtype,
        reserve_fraction=d.reserve_fraction,
        efficiency=e,
        check_memory=d.kv_capacity_tokens > 0,
        replicas=d.replicas,
    )


@dataclass(frozen=True)
class OverheadSensitivity:
    """A deployment's 100%-busy bill (:func:`serving_cost`) with the fitted per-layer decode overhead as fitted and
    scaled by two factors (:func:`overhead_sensitivity`)."""

    decode_overhead_s: float  # the fitted overhead, seconds per layer of one generation step
    low_factor: float  # the smaller factor it is scaled by
    high_factor: float  # the larger factor it is scaled by
    base: ServingCost  # the bill with the overhead as fitted
    low: ServingCost  # the bill with the overhead × low_factor
    high: ServingCost  # the bill with the overhead × high_factor

    def sentence(self, what: str = "output") -> str:
        """One sentence: the ``what`` figure ("input", "output" per million tokens, or "request") over the range."""
        name, words = _figure(what)
        lo, base, hi = (getattr(c, name) for c in (self.low, self.base, self.high))
        return (
            f"${lo:.3g}–{hi:.3g} {words} with the fitted per-layer decode overhead "
            f"({fmt(self.decode_overhead_s, 's')}) scaled {self.low_factor:g}–{self.high_factor:g}× "
            f"(${base:.3g} as fitted)"
        )

    def __repr__(self) -> str:
        return f"OverheadSensitivity({self.sentence('output')}; {self.sentence('request')})"


@checked
def overhead_sensitivity(
    deployment: Deployment,
    prompt_len: Context,
    output_len: Context,
    batch: Batch,
    *,
    low: _Factor = 0.5,
    high: _Factor = 1.5,
    dollars_per_chip_hour: _Price | None = None,
    prefill_batch: Batch | None = None,
) -> OverheadSensitivity:
    """:func:`serving_cost` of ``deployment`` (the same arguments) with the efficiency model's fitted per-layer
    decode overhead as fitted, × ``low`` and × ``high`` (:func:`with_decode_overhead`). Refuses ``low`` above
    ``high``."""
    d = _check_deployment(deployment)
    if low > high:
        raise ValueError(f"low must be at most high; got low={low!r} and high={high!r}")
    kw = dict(dollars_per_chip_hour=dollars_per_chip_hour, prefill_batch=prefill_batch)
    costs = [
        serving_cost(x, prompt_len, output_len, batch, **kw)
        for x in (d, with_decode_overhead(d, low), with_decode_overhead(d, high))
    ]
    return OverheadSensitivity(d.efficiency.decode_overhead, low, high, *costs)


__all__ = [
    "COMMITTED_PRICES",
    "DEFAULT_UTILISATION",
    "EXACT_STEPS",
    "MAX_OVERHEAD_FACTOR",
    "PRICE_KINDS",
    "ChipPrice",
    "CostAtRate",
    "OverheadSensitivity",
    "PriceRange",
    "ServingCost",
    "chip_prices",
    "cost_at_rate",
    "overhead_sensitivity",
    "price_sensitivity",
    "serving_cost",
    "with_decode_overhead",
]
