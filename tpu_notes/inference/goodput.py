"""Goodput as DistServe defines it: the highest request rate a deployment serves while a stated share of requests
meets a latency objective, per chip provisioned (Chapters 7 and 8).

DistServe (Zhong et al., "DistServe: Disaggregating Prefill and Decoding for Goodput-optimized Large Language Model
Serving", OSDI 2024, arXiv:2401.09670, section 2) states an objective as a bound on the time to first token and one
on the time per output token, calls the share of requests meeting both the *SLO attainment*, and the maximum request
rate at which the attainment reaches a target (90% in its figures) the *goodput*; per-GPU goodput divides it by the
devices provisioned. vLLM's benchmark reports a different figure under the same word: requests per second meeting
the objectives *at the load it ran* (:meth:`SimResult.slo_requests_per_s
<tpu_notes.inference.simulator.SimResult.slo_requests_per_s>`); at a load past the knee it can stay high while most
requests miss.

- :class:`SLO`: the bounds, seconds (time between tokens optional: each request's largest gap);
- :func:`max_rate_at_attainment`: the bounded search for DistServe's goodput of one deployment (a
  :class:`GoodputResult`);
- :func:`best_serving`: replicas x slice shape (x disaggregation splits) within a chip budget, ranked by goodput
  per chip.

The search: probe the workload's own rate first; double while the attainment holds (or halve while it does not)
until a rate that meets it and one that does not bracket the answer, then bisect (geometric midpoints) until the
bracket's upper end is within ``rtol`` of its lower end. Every probe serves the same requests (the workload's seed):
a Poisson stream at rate ``r`` is the same gaps scaled by ``1/r``, so the attainment is close to monotone in the rate
and the bisection does not chase noise. At most ``max_probes`` simulations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Annotated

import numpy as np

from .. import rules
from ..hardware import get_chip
from ..transformer import Model
from ..units import Bool, OneOf, Positive, Range, checked
from .engine import Deployment, deploy, slice_shapes
from .simulator import (
    DEFAULT_DRAIN,
    DEFAULT_WARMUP,
    ROUTERS,
    Disaggregation,
    Scheduler,
    SimResult,
    _check_deployment,
    _TooManySteps,
    simulate,
)
from .slo import MAX_SLO_S, SLO
from .step import ComputeDType, StorageDType
from .workload import MAX_RATE, MAX_SPAN, Workload

#: Most simulations one :func:`max_rate_at_attainment` runs.
MAX_PROBES = 40
#: Most candidate deployments one :func:`best_serving` searches.
MAX_CANDIDATES = 32
#: Relative width of the final bracket unless stated: 5% (the answer is the bracket's lower end, so it is low by
#: at most this much).
DEFAULT_RTOL = 0.05

_Target = Annotated[float, Range(0.0, 1.0, low_open=True)]
_Probes = Annotated[int, Positive(integer=True, maximum=MAX_PROBES)]
_Rtol = Annotated[float, Range(1e-4, 1.0)]
_Share = Annotated[float, Range(0.0, 0.9)]
_Chips = Annotated[int, Positive(integer=True, maximum=100_000)]


@dataclass(frozen=True)
class GoodputResult:
    """What :func:`max_rate_at_attainment` found (built by it and by :func:`best_serving`)."""

    rate_per_s: float  # highest arrival rate found whose attainment reaches the target, requests/s (0: none)
    per_chip: float  # rate_per_s / n_chips, requests/s per chip provisioned
    n_chips: int  # chips provisioned: every replica, and every prefill instance under disaggregation
    attainment: float  # the share of requests meeting the SLO at rate_per_s (0 when no rate met it)
    target: float  # the attainment asked for
    slo: SLO  # the objective
    probes: tuple  # ((rate requests/s, attainment), ...) in the order simulated
    bracket: str  # how the search ended, in words
    result: SimResult | None = field(repr=False, default=None)  # the simulation at rate_per_s (None: no rate met)
    deployment: Deployment | None = field(repr=False, default=None)  # what was served
    disaggregation: Disaggregation | None = field(repr=False, default=None)  # its prefill instances, if any

    def label(self) -> str:
        """The layout in words, e.g. ``"2 x v5e 4x4"`` or ``"1 x v5e 4x4 decode + 1 x v5e 4x4 prefill"``."""
        if self.deployment is None:
            return "?"
        d = self.deployment
        out = f"{d.replicas} x {_shape(d)}"
        if self.disaggregation is not None:
            dis = self.disaggregation
            out += f" decode + {dis.instances} x {_shape(dis.prefill)} prefill"
        return out

    def __repr__(self) -> str:
        what = self.label() + ": " if self.deployment is not None else ""
        return (
            f"GoodputResult({what}{self.rate_per_s:.3g} requests/s ({self.per_chip:.3g} per chip on {self.n_chips}) "
            f"at {self.attainment:.0%} attainment of {self.slo!r} (target {self.target:.0%}); "
            f"{len(self.probes)} probes; {self.bracket})"
        )


def _shape(d: Deployment) -> str:
    sysm = d.system
    shape = getattr(sysm, "shape", None)
    if shape:
        return f"{d.chip.name} " + "x".join(str(s) for s in shape)
    return f"{d.n_chips} x {d.chip.name}"


def _unloaded_share(dep: Deployment, wl: Workload, slo: SLO, dis: Disaggregation | None) -> float:
    """Share of the workload's requests that would meet ``slo`` alone on an idle server (a lower bound on what any
    load can do: a request's prefill and its decode steps at batch one): when it is below the target, no rate
    meets it."""
    req = wl.draw()
    pre = dis.prefill if dis is not None else dep
    ok = np.ones(len(req.prompts), dtype=bool)
    for p in np.unique(req.prompts):
        p = int(p)
        sel = req.prompts == p
        ttft = pre._seconds(0, 0, p, p * (p + 1) / 2.0, 0)
        if ttft > slo.ttft_s:
            ok[sel] = False
            continue
        g = req.outputs[sel]
        tpot = np.array([dep._seconds(1, p + int(x)) for x in g]) if len(g) < 64 else None
        if tpot is None:  # many requests share this prompt length: price the longest context as a bound
            tpot = np.full(len(g), dep._seconds(1, p + 1))
        ok[sel] &= (g <= 1) | (tpot <= slo.tpot_s)
    return float(ok.mean())


def _check_workload_and_slo(workload, slo) -> None:
    """Refuse a ``workload`` that is not a :class:`~tpu_notes.inference.Workload` with an arrival rate (the search
    varies it), and an ``slo`` that is not an :class:`SLO`."""
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload (tpu_notes.inference.Workload); got {type(workload).__name__}")
    if workload.arrival == "closed":
        raise ValueError("workload must have an arrival rate ('poisson' or 'bursty'): the search varies it")
    if not isinstance(slo, SLO):
        raise TypeError(f"slo must be an SLO (tpu_notes.inference.goodput.SLO); got {type(slo).__name__}")


def _check_search_options(scheduler, disaggregation, warmup: float, drain: float) -> None:
    """Refuse a ``scheduler`` or ``disaggregation`` of the wrong type, and trimmed shares (``warmup + drain``, of
    the run's requests) that leave nothing."""
    if scheduler is not None and not isinstance(scheduler, Scheduler):
        raise TypeError(f"scheduler must be a Scheduler or None; got {type(scheduler).__name__}")
    if disaggregation is not None and not isinstance(disaggregation, Disaggregation):
        raise TypeError(f"disaggregation must be a Disaggregation or None; got {type(disaggregation).__name__}")
    if warmup + drain >= 1.0:
        raise ValueError(f"warmup + drain ({warmup!r} + {drain!r}) must be below 1 (they trim the run's two ends)")


def _provisioned_chips(deployment: Deployment, disaggregation: Disaggregation | None) -> int:
    """Chips the search is billed for: every replica of ``deployment``, and every prefill instance of
    ``disaggregation``."""
    return deployment.total_chips + (
        disaggregation.instances * disaggregation.prefill.n_chips if disaggregation is not None else 0
    )


@dataclass
class _Search:
    """One :func:`max_rate_at_attainment` search: what it serves, and every probe so far."""

    deployment: Deployment
    workload: Workload
    slo: SLO
    target: float  # the attainment asked for
    disaggregation: Disaggregation | None
    n_chips: int  # chips provisioned
    sim_kw: dict  # the other arguments of every simulate() call
    probes: list = field(default_factory=list)  # (rate requests/s, attainment), in the order simulated
    at: dict = field(default_factory=dict)  # rate requests/s -> attainment there

    def record(self, rate: float, attainment: float) -> None:
        """Note the attainment (a share) found at ``rate`` (requests/s)."""
        self.probes.append((rate, attainment))
        self.at[rate] = attainment

    def simulate(self, rate: float) -> SimResult:
        """The workload served at ``rate`` (requests/s)."""
        return simulate(self.deployment, replace(self.workload, rate=rate), **self.sim_kw)

    def probe(self, rate: float) -> tuple:
        """Simulate at ``rate`` (requests/s) and record it: ``(whether the attainment meets the target, result)``."""
        res = self.simulate(rate)
        a = res.attainment(self.slo)
        self.record(rate, a)
        return a >= self.target, res

    def done(self, rate: float, res: SimResult | None, why: str) -> GoodputResult:
        """The answer: ``rate`` (requests/s; 0 when none met the target), its simulation, and how the search ended."""
        att = self.at.get(rate, 0.0) if res is not None else 0.0
        return GoodputResult(
            rate_per_s=rate,
            per_chip=rate / self.n_chips,
            n_chips=self.n_chips,
            attainment=att,
            target=self.target,
            slo=self.slo,
            probes=tuple(self.probes),
            bracket=why,
            result=res,
            deployment=self.deployment,
            disaggregation=self.disaggregation,
        )


def _double_until_miss(search: _Search, lo: float, lo_res, max_probes: int) -> tuple:
    """From ``lo`` (requests/s, a rate that meets the target), double the rate until one misses:
    ``(lo, lo_res, hi, ended)``, ``hi`` the first rate that misses; ``ended`` is None, or why the search stops
    at ``lo`` (``hi`` None: every rate probed met it)."""
    hi = None
    while hi is None and len(search.probes) < max_probes:
        rate = lo * 2.0
        if rate > MAX_RATE:
            return lo, lo_res, None, f"every rate probed meets it, up to {lo:.3g} requests/s (MAX_RATE next)"
        ok, res = search.probe(rate)
        if ok:
            lo, lo_res = rate, res
        else:
            hi = rate
    if hi is None:
        return lo, lo_res, None, f"every rate probed meets it, up to {lo:.3g} requests/s (probes ran out)"
    return lo, lo_res, hi, None


def _halve_until_meet(search: _Search, hi: float, max_probes: int) -> tuple:
    """From ``hi`` (requests/s, a rate that misses the target), halve the rate until one meets it:
    ``(lo, lo_res, hi, ended)``, ``lo`` the first rate that meets it; ``ended`` is None, or why no rate meets it
    (``lo`` then 0 and ``lo_res`` None)."""
    lowest = search.workload.n_requests / MAX_SPAN
    lo = lo_res = None
    while lo is None and len(search.probes) < max_probes:
        rate = hi / 2.0
        if rate < lowest:
            return 0.0, None, hi, f"no rate down to {hi:.3g} requests/s meets it (MAX_SPAN below)"
        try:
            ok, res = search.probe(rate)
        except _TooManySteps:
            return 0.0, None, hi, (f"no rate down to {hi:.3g} requests/s meets it; lower ones take more than "
                                   "MAX_STEPS engine steps")  # fmt: skip
        if ok:
            lo, lo_res = rate, res
        else:
            hi = rate
    if lo is None:
        return 0.0, None, hi, f"no rate down to {hi:.3g} requests/s meets it (probes ran out)"
    return lo, lo_res, hi, None


def _bisect(search: _Search, lo: float, lo_res, hi: float, rtol: float, max_probes: int) -> GoodputResult:
    """Narrow the bracket ``lo`` (meets) .. ``hi`` (misses), requests/s, at geometric midpoints until ``hi / lo - 1``
    is within ``rtol`` or the probes run out; the answer is ``lo``."""
    while hi / lo - 1.0 > rtol and len(search.probes) < max_probes:
        mid = math.sqrt(lo * hi)
        ok, res = search.probe(mid)
        if ok:
            lo, lo_res = mid, res
        else:
            hi = mid
    if lo_res is None:  # the first probe was too light to simulate and every doubling met it: simulate lo once
        lo_res = search.simulate(lo)
        search.at[lo] = lo_res.attainment(search.slo)
    width = hi / lo - 1.0
    why = f"bracketed between {lo:.4g} (meets) and {hi:.4g} requests/s (misses), {width:.1%} apart"
    if width > rtol:
        why += f", wider than rtol {rtol:g} (probes ran out)"
    return search.done(lo, lo_res, why)


@checked
def max_rate_at_attainment(
    deployment: Deployment,
    workload: Workload,
    slo: SLO,
    attainment: _Target = 0.9,
    *,
    scheduler: Scheduler | None = None,
    disaggregation: Disaggregation | None = None,
    router: Annotated[str, OneOf(ROUTERS)] = "least-loaded",
    ttft_at: Annotated[str, OneOf(("decode", "prefill"))] = "decode",
    warmup: _Share = DEFAULT_WARMUP,
    drain: _Share = DEFAULT_DRAIN,
    rtol: _Rtol = DEFAULT_RTOL,
    max_probes: _Probes = 16,
) -> GoodputResult:
    """DistServe's goodput of ``deployment`` (all its replicas, and the prefill instances of ``disaggregation``):
    the highest arrival rate, requests/s, at which at least ``attainment`` of ``workload``'s requests (those
    :meth:`SimResult.attainment <tpu_notes.inference.simulator.SimResult.attainment>` counts, warm-up and drain
    trimmed) meet every bound of ``slo``. ``workload`` gives the requests and the first rate probed (its ``rate``;
    a Poisson or bursty stream, whose rate the search replaces); the search (module docstring) doubles or halves
    from there, then bisects until the bracket is within ``rtol``; at most ``max_probes`` simulations. When no rate
    meets the target (an idle server already misses it, or halving ran out of probes), ``rate_per_s`` is 0 and
    ``bracket`` says why; when every probed rate meets it, ``rate_per_s`` is the highest probed and ``bracket``
    says so."""
    _check_deployment("deployment", deployment)
    _check_workload_and_slo(workload, slo)
    _check_search_options(scheduler, disaggregation, warmup, drain)
    kw = dict(scheduler=scheduler, disaggregation=disaggregation, router=router, ttft_at=ttft_at, warmup=warmup,
              drain=drain)  # fmt: skip
    n_chips = _provisioned_chips(deployment, disaggregation)
    search = _Search(deployment, workload, slo, attainment, disaggregation, n_chips, kw)
    alone = _unloaded_share(deployment, workload, slo, disaggregation)
    if alone < attainment:
        return search.done(
            0.0, None, f"no load meets it: only {alone:.0%} of the requests meet the SLO on an idle server"
        )
    rate = workload.rate
    try:
        ok, res = search.probe(rate)
    except _TooManySteps:
        ok, res = True, None  # so light a load that a request decodes alone: it meets what an idle server meets
        search.record(rate, alone)
    if ok:
        lo, lo_res, hi, ended = _double_until_miss(search, rate, res, max_probes)
    else:
        lo, lo_res, hi, ended = _halve_until_meet(search, rate, max_probes)
    if ended is not None:
        return search.done(lo, lo_res, ended)
    return _bisect(search, lo, lo_res, hi, rtol, max_probes)


def _sizes(chip, budget: int) -> list:
    """Chips per replica to try: the standard TPU slices (:func:`~tpu_notes.inference.slice_shapes`), or powers of
    two GPUs, up to ``budget``."""

    c = get_chip(chip)
    if c.kind == "tpu":
        sizes = sorted({math.prod(s) for s in slice_shapes(c)})
    else:
        sizes = [2**k for k in range(0, 18)]
    return [s for s in sizes if s <= budget]


def _replicas_that_fit(model: Model, c, chips_budget: int, longest: int, deploy_kw: dict) -> dict:
    """``{chips per replica: Deployment}`` for every replica size up to ``chips_budget`` (:func:`_sizes`) whose
    memory holds the weights and ``longest`` tokens of KV cache; refuses a budget that holds none."""
    fits = {}
    for s in _sizes(c, chips_budget):
        try:
            d = deploy(model, c, s, **deploy_kw)
        except ValueError:
            continue
        if d.kv_capacity_tokens >= longest:
            fits[s] = d
    if not fits:
        raise ValueError(
            f"chips_budget ({chips_budget}) holds no {c.long_name} replica whose memory fits the model and the "
            f"workload's longest request ({longest:,} tokens): raise chips_budget"
        )
    return fits


def _candidates(fits: dict, chips_budget: int, disaggregate: bool, link: str | None) -> list:
    """Every layout within ``chips_budget`` chips, fewest chips first: ``(chips, decode Deployment, Disaggregation
    or None)``. Replica counts are powers of two; with ``disaggregate``, also prefill instances (powers of two) of
    a size no larger than the decode replica's, over ``link``."""
    cands = []
    for s, d in fits.items():
        r = 1
        while r * s <= chips_budget:
            cands.append((r * s, replace(d, replicas=r), None))
            r *= 2
    if disaggregate:
        for s, d in fits.items():
            for sp, dp in fits.items():
                if sp > s:
                    continue
                r = 1
                while r * s + sp <= chips_budget:
                    m = 1
                    while r * s + m * sp <= chips_budget:
                        cands.append((r * s + m * sp, replace(d, replicas=r), Disaggregation(dp, m, link)))
                        m *= 2
                    r *= 2
    cands.sort(key=lambda x: x[0])
    return cands


@checked
def best_serving(
    model: Model,
    chip,
    chips_budget: _Chips,
    workload: Workload,
    slo: SLO,
    attainment: _Target = 0.9,
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType | None = None,
    scheduler: Scheduler | None = None,
    disaggregate: Bool = False,
    link: Annotated[str, OneOf(("ici", "dcn", "nvlink", "ib"))] | None = None,
    router: Annotated[str, OneOf(ROUTERS)] = "least-loaded",
    rtol: _Rtol = 0.1,
    max_probes: _Probes = 12,
    max_candidates: Annotated[int, Positive(integer=True, maximum=MAX_CANDIDATES)] = 16,
) -> list:
    """Serving layouts of ``model`` on ``chip`` within ``chips_budget`` chips, ranked by DistServe's goodput per chip
    (:func:`max_rate_at_attainment`), best first (a list of :class:`GoodputResult`). Candidates: every replica size
    the chip offers (standard TPU slices, :func:`~tpu_notes.inference.slice_shapes`, built by
    :func:`~tpu_notes.inference.engine.system_for`; or powers of two GPUs) whose memory holds the weights and the
    workload's longest request, times replica counts in powers of two up to the budget; with ``disaggregate=True``,
    also decode replicas of one size plus prefill instances (powers of two) of a size no larger, over ``link``. A
    candidate that the memory check refuses is left out. The first ``max_candidates`` candidates in order of chips
    (fewest first) are searched; the search's first probe scales ``workload.rate`` by the candidate's chips over the
    budget. ``compute_dtype=None`` takes :func:`~tpu_notes.inference.engine.deploy`'s default."""
    _check_workload_and_slo(workload, slo)
    c = get_chip(chip)
    kw = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    if compute_dtype is not None:
        kw["compute_dtype"] = compute_dtype
    fits = _replicas_that_fit(model, c, chips_budget, workload.longest, kw)
    cands = _candidates(fits, chips_budget, disaggregate, link)
    rules.bounded_work(
        min(len(cands), max_candidates) * max_probes, argument="max_candidates x max_probes", limit=MAX_CANDIDATES * 16,
        unit="simulations",
    )  # fmt: skip
    out = []
    for chips, dep, dis in cands[:max_candidates]:
        first = max(workload.rate * chips / chips_budget, workload.n_requests / MAX_SPAN * 2)
        out.append(
            max_rate_at_attainment(
                dep,
                replace(workload, rate=first),
                slo,
                attainment,
                scheduler=scheduler,
                disaggregation=dis,
                router=router,
                rtol=rtol,
                max_probes=max_probes,
            )  # fmt: skip
        )
    out.sort(key=lambda g: -g.per_chip)
    return out


__all__ = [
    "DEFAULT_RTOL",
    "MAX_CANDIDATES",
    "MAX_PROBES",
    "MAX_SLO_S",
    "SLO",
    "GoodputResult",
    "best_serving",
    "max_rate_at_attainment",
]
