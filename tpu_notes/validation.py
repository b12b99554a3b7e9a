"""The efficiency model against every published run: the per-group table, the fits, and the leave-one-group-out
check (Chapters 6 and 8, ``benchmarks/efficiency.py``).

Four parameters of :data:`tpu_notes.efficiency.DEFAULT` have no public measurement and are fitted, each on a stated
subset of the published runs (:data:`FITS`), by bisection until the median of measured / expected speed over the
subset is 1:

- ``matmul["tpu"]``, the large-matmul fraction of peak on TPUs, on the ``maxtext-synthetic`` group (synthetic dense
  models whose configurations are fully stated, on v4, v5e and v5p);
- ``matmul["v6e"]``, the same figure for TPU v6e (Trillium: a 256-wide MXU and the highest FLOPs per HBM byte of
  the table), on the v6e training runs (all in ``maxtext-recipes``: no synthetic table covers v6e);
- ``sustained["gpu"]``, the share of the GPU matmul microbenchmark figures a whole training step keeps, on the
  ``megatron`` group (the most published GPU training stack);
- ``decode_overhead``, the seconds per layer of a generation step that neither the reads nor the FLOPs explain, on
  the GPU serving rows measured at batch 1 (``gpu-serving``, ``mode="latency"``, ``batch == 1``).

:func:`leave_one_group_out` refits both with one group's runs removed and reports that group's error under the
refitted model, so a group never grades a figure fitted on itself. Every other figure is sourced
(:data:`tpu_notes.efficiency.SOURCES`) and fitted on nothing.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .efficiency import EfficiencyModel, check_efficiency
from .inference import published as serving
from .runs import GROUPS, GroupError, Reconciliation, errors_table, format_errors, group_errors
from .table import Column, Table
from .training import published as training


def _check_runs(runs) -> list:
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__iter__"):
        raise TypeError(
            f"runs must be a sequence of PublishedRun / PublishedServing records; got {type(runs).__name__}"
        )
    runs = list(runs)
    for r in runs:
        if not isinstance(r, (training.PublishedRun, serving.PublishedServing)):
            raise TypeError(f"runs must hold PublishedRun or PublishedServing records; got {type(r).__name__}")
    return runs


def all_runs() -> list:
    """Every published run: the training runs (Chapter 6), then the serving benchmarks (Chapter 8)."""
    return list(training.RUNS) + list(serving.RUNS)


def reconcile_all(runs: Sequence | None = None, model: EfficiencyModel | None = None) -> list[Reconciliation]:
    """The roofline (efficiency 1) and the expected prediction of every run in ``runs`` (default: all)."""
    e = check_efficiency(model, "model")
    runs = all_runs() if runs is None else _check_runs(runs)
    out = []
    for r in runs:
        if isinstance(r, training.PublishedRun):
            out.append(training.predict(r, 1.0, e))
        elif isinstance(r, serving.PublishedServing):
            out.append(serving.predict(r, 1.0, e))
        else:
            raise TypeError(f"runs must hold PublishedRun or PublishedServing records; got {type(r).__name__}")
    return out


@dataclass(frozen=True)
class Fit:
    """One fitted parameter: which, on which runs, and the value."""

    parameter: str  # e.g. 'matmul["tpu"]'
    subset: str  # the runs it is fitted on, in words
    select: Callable  # run -> bool: the subset
    apply: Callable  # (model, value) -> model with the parameter set
    low: float  # bisection bounds
    high: float
    fallback: str  # what a held-out refit does when the subset is all held out: "drop" (use the family figure)
    # or "family" (fit on the other runs of the same kind and chip family that the parameter prices)
    objective: Callable | None = None  # (runs, model) -> the median ratio the fit brings to 1 (None: measured /
    # expected speed); a trend's fit compares each point with its series' first point instead


def _set_tpu_matmul(e: EfficiencyModel, x: float) -> EfficiencyModel:
    return e.with_(matmul={**e.matmul, "tpu": x})


def _set_v6e_matmul(e: EfficiencyModel, x: float) -> EfficiencyModel:
    return e.with_(matmul={**e.matmul, "v6e": x})


def _set_gpu_sustained(e: EfficiencyModel, x: float) -> EfficiencyModel:
    return e.with_(sustained={**e.sustained, "gpu": x})


def _set_decode_overhead(e: EfficiencyModel, x: float) -> EfficiencyModel:
    return e.with_(decode_overhead=x)


def _set_slice_jitter(e: EfficiencyModel, x: float) -> EfficiencyModel:
    return e.with_(slice_jitter=x)


def _is_multislice_series(r) -> bool:
    """A point of MaxText's TPU v4 multi-slice table (22B on 1 to 8 x v4-128): the fit subset of slice_jitter."""
    return isinstance(r, training.PublishedRun) and r.name.endswith("x v4-128") and "synthetic" in r.name


def _trend_ratio(runs, e: EfficiencyModel) -> float:
    """The median over the multi-slice points of (measured / measured on one slice) / (expected / expected on one
    slice): 1 when the model loses per-chip throughput with the slices as the measurements do."""
    rows = {r.run.name: r for r in reconcile_all(runs, e)}
    base = [x for x in rows.values() if x.run.parallelism.dcn == 1]
    if len(base) != 1:
        raise ValueError("a trend fit needs exactly one single-slice point in its subset")
    b = base[0]
    ratios = [(x.reported / b.reported) / (x.expected / b.expected) for x in rows.values() if x is not b]
    return statistics.median(ratios)


#: The fitted parameters of :data:`~tpu_notes.efficiency.DEFAULT`, each with its subset.
FITS: tuple[Fit, ...] = (
    Fit(
        'matmul["tpu"]',
        "maxtext-synthetic (MaxText's synthetic dense models on TPU)",
        lambda r: r.group == "maxtext-synthetic",
        _set_tpu_matmul,
        0.3,
        1.0,
        "family",
    ),
    Fit(
        'matmul["v6e"]',
        "the TPU v6e training runs (maxtext-recipes: Llama, Mistral, Mixtral and GPT-3 on v6e)",
        lambda r: isinstance(r, training.PublishedRun) and r.system.chip.name == "v6e",
        _set_v6e_matmul,
        0.3,
        1.0,
        "drop",
    ),
    Fit(
        'sustained["gpu"]',
        "megatron (Megatron-LM on A100, Megatron-Core / NeMo on H100, B200 and GB200), less the runs whose remat "
        "policy is assumed (remat_assumed: Llama 3 405B on H100, NeMo's 70B FP8 rows)",
        lambda r: r.group == "megatron" and not getattr(r, "remat_assumed", False),
        _set_gpu_sustained,
        0.3,
        1.0,
        "family",
    ),
    Fit(
        "decode_overhead",
        "gpu-serving rows measured at batch 1 (latency)",
        lambda r: r.group == "gpu-serving" and getattr(r, "mode", "") == "latency" and r.batch == 1,
        _set_decode_overhead,
        0.0,
        5e-4,
        "family",
    ),
    Fit(
        "slice_jitter",
        "the TPU v4 multi-slice series (MaxText's 22B on 1, 2, 4 and 8 x v4-128): each point's per-chip "
        "throughput over the one-slice point's, measured against expected; the v5e series (32B on 1 to 32 x "
        "v5e-256) is held out",
        _is_multislice_series,
        _set_slice_jitter,
        0.0,
        0.2,
        "drop",
        _trend_ratio,
    ),
)


def in_sample(run) -> tuple[str, ...]:
    """The parameters of :data:`FITS` whose fit subset holds ``run`` (a published training run or serving row):
    empty when ``run`` is out of sample for every fit, so its error is a forecast's."""
    if not isinstance(run, (training.PublishedRun, serving.PublishedServing)):
        raise TypeError(f"run must be a PublishedRun or PublishedServing; got {type(run).__name__}")
    return tuple(f.parameter for f in FITS if f.select(run))


def _median_ratio(runs, e: EfficiencyModel) -> float:
    return statistics.median(x.expected_ratio for x in reconcile_all(runs, e))


def _objective(fit: Fit):
    return fit.objective or _median_ratio


def fit_parameter(fit: Fit, runs: Sequence, model: EfficiencyModel | None = None, steps: int = 30) -> float:
    """The value of ``fit``'s parameter that makes the median measured / expected speed over ``runs`` 1 (by
    bisection; a bound when no value inside reaches 1). ``runs`` must be non-empty."""
    if not isinstance(fit, Fit):
        raise TypeError(f"fit must be a validation.Fit (one of FITS); got {type(fit).__name__}")
    if isinstance(steps, bool) or not isinstance(steps, int) or not 1 <= steps <= 200:
        raise ValueError(f"steps must be a whole number of bisection steps in [1, 200]; got {steps!r}")
    runs = _check_runs(runs)
    if not runs:
        raise ValueError("runs must hold at least one run to fit on")
    e = check_efficiency(model, "model")
    lo, hi = fit.low, fit.high
    # the ratio measured/expected falls as the parameter makes the model faster (matmul up) and rises as it makes
    # it slower (overhead up): find the direction from the two ends
    ratio = _objective(fit)
    r_lo, r_hi = ratio(runs, fit.apply(e, lo)), ratio(runs, fit.apply(e, hi))
    if (r_lo - 1.0) * (r_hi - 1.0) > 0:
        return lo if abs(r_lo - 1.0) < abs(r_hi - 1.0) else hi
    for _ in range(steps):
        mid = 0.5 * (lo + hi)
        r = ratio(runs, fit.apply(e, mid))
        if (r - 1.0) * (r_lo - 1.0) > 0:
            lo, r_lo = mid, r
        else:
            hi = mid
    return 0.5 * (lo + hi)


def fit_model(runs: Sequence | None = None, model: EfficiencyModel | None = None) -> EfficiencyModel:
    """``model`` (default :data:`~tpu_notes.efficiency.DEFAULT`) with every parameter of :data:`FITS` refitted
    on its subset of ``runs`` (default: all published runs); a subset left empty keeps the model's value."""
    e = check_efficiency(model, "model")
    runs = all_runs() if runs is None else _check_runs(runs)
    for f in FITS:
        chosen = [r for r in runs if f.select(r)]
        if chosen:
            e = f.apply(e, fit_parameter(f, chosen, e))
    return e.with_(name=f"{e.name} (refitted)")


def report(model: EfficiencyModel | None = None) -> list[GroupError]:
    """:func:`~tpu_notes.runs.group_errors` of every published run under ``model`` (default
    :data:`~tpu_notes.efficiency.DEFAULT`)."""
    return group_errors(reconcile_all(None, model))


@dataclass(frozen=True)
class HeldOut:
    """One group's expected error when the fitted parameters are refitted without it."""

    group: str  # the group held out
    n: int  # its runs
    expected_median: float  # median |error| under the model fitted without the group
    expected_worst: float  # the worst error, signed
    in_sample_median: float  # the same under DEFAULT (fitted with it)


def leave_one_group_out(model: EfficiencyModel | None = None, groups=None) -> list[HeldOut]:
    """For each group (in :data:`~tpu_notes.runs.GROUPS` order; only those named in ``groups`` when given, e.g.
    the training groups for Chapter 6): refit :data:`FITS` on every other group's runs, and grade the group with
    that model. A group's row is the same whichever other groups are asked for."""
    e = check_efficiency(model, "model")
    if groups is not None:
        if isinstance(groups, (str, bytes)) or not hasattr(groups, "__iter__"):
            raise TypeError(f"groups must be a collection of group names; got {type(groups).__name__}")
        groups = list(groups)
        unknown = [g for g in groups if not isinstance(g, str) or g not in GROUPS]
        if unknown:
            raise ValueError(f"groups must name groups of tpu_notes.runs.GROUPS {sorted(GROUPS)}; got {unknown!r}")
    wanted = [g for g in GROUPS if groups is None or g in groups]
    runs = all_runs()
    graded = [r for r in runs if r.group in wanted]
    base = {g.group: g for g in group_errors(reconcile_all(graded, e))} if graded else {}
    # Holding out a group that none of a fit's runs belong to leaves that fit's subset, and so its value, as with
    # every run: a fit seen before (same parameter, same runs, same model so far) is reused, not bisected again.
    fitted: list[tuple] = []  # (parameter, ids of the runs, model) -> value, as a list: models hold dicts

    def fit_once(f: Fit, chosen: list, refit: EfficiencyModel) -> float:
        key = (f.parameter, tuple(id(r) for r in chosen))
        for k, m, value in fitted:
            if k == key and m == refit:
                return value
        value = fit_parameter(f, chosen, refit)
        fitted.append((key, refit, value))
        return value

    out = []
    for g in wanted:
        held = [r for r in runs if r.group == g]
        if not held:
            continue
        rest = [r for r in runs if r.group != g]
        refit = e
        for f in FITS:
            chosen = [r for r in rest if f.select(r)]
            if not chosen and f.fallback == "drop":  # e.g. v6e held out: it takes the TPU family's figure
                if f.parameter == "slice_jitter":
                    refit = refit.with_(slice_jitter=0.0)
                else:
                    refit = refit.with_(matmul={k: v for k, v in refit.matmul.items() if k != "v6e"})
                continue
            if not chosen:  # the subset is the group held out: fit on the other runs the parameter prices
                chosen = [r for r in rest if _priced_by(f, r, refit)]
            if chosen:
                refit = f.apply(refit, fit_once(f, chosen, refit))
        err = group_errors(reconcile_all(held, refit))[0]
        out.append(HeldOut(g, len(held), err.expected_median, err.expected_worst, base[g].expected_median))
    return out


def _priced_by(f: Fit, run, e: EfficiencyModel) -> bool:
    """True when ``run``'s expected time depends on ``f``'s parameter: TPU training runs on chips without their
    own matmul figure for ``matmul["tpu"]``; serving rows for ``decode_overhead``."""
    if f.parameter.startswith("matmul"):
        return _kind(run) == "training" and _family(run) == "tpu" and run.system.chip.name not in e.matmul
    if f.parameter.startswith("sustained"):
        return _kind(run) == "training" and _family(run) == "gpu"
    return _kind(run) == "serving"


def _family(run) -> str:
    from .hardware import get_chip

    if isinstance(run, serving.PublishedServing):
        return get_chip(run.chip).kind
    return run.system.chip.kind


def _kind(run) -> str:
    return "training" if isinstance(run, training.PublishedRun) else "serving"


def held_out_table(rows: Sequence[HeldOut]) -> Table:
    """The leave-one-group-out errors as a :class:`tpu_notes.table.Table`."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of HeldOut from leave_one_group_out(); got {type(rows).__name__}")
    rows = list(rows)
    if not all(isinstance(h, HeldOut) for h in rows):
        raise TypeError("rows must be a list of HeldOut from leave_one_group_out()")
    cols = [
        Column("group held out"),
        Column("runs"),
        Column("median", "%", digits=2),
        Column("worst", "%", digits=2),
        Column("in-sample median", "%", digits=2),
    ]
    body = [(h.group, h.n, h.expected_median, h.expected_worst, h.in_sample_median) for h in rows]
    return Table(cols, body, caption="The expected model's error on each group, fitted without it")


def format_held_out(rows: Sequence[HeldOut]) -> str:
    """:func:`held_out_table` as plain text."""
    return held_out_table(rows).text()


__all__ = [
    "FITS",
    "Fit",
    "HeldOut",
    "all_runs",
    "fit_model",
    "fit_parameter",
    "errors_table",
    "format_errors",
    "format_held_out",
    "held_out_table",
    "in_sample",
    "leave_one_group_out",
    "reconcile_all",
    "report",
]
