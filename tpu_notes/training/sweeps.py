"""Published layout sweeps: the same model on the same chips measured under several layouts, and what the model's
ranking of them is worth (Chapter 6).

A planner is judged by the layout it picks, not by its error on one layout. A :class:`LayoutSweep` records a
source's measured points, each a :class:`~tpu_notes.training.published.PublishedRun` (so each point is checked and
priced exactly as the published runs are), and what varies between them. Two kinds of sweep are kept apart:

- **ranking sweeps** (``kind`` in ``RANKING_KINDS``: layouts, remat policies, microbatch sizes, overlap on or
  off) hold the model, the chips and the global batch fixed. The model is asked which point is fastest. The
  sweep reports the **rank correlation** (Spearman's ρ between the predicted and measured tokens/s per chip, ties
  at their mean rank) and the **regret**: the measured time per token of the point the model ranks first over the
  measured best, minus one (0 when the model picks the measured best; a tie at the top is charged its worst
  member).
- **scaling series** (``kind`` in ``SCALING_KINDS``: slices over DCN, nodes, model size, context length) change
  the system or the model along one axis. What matters is the trend: the **per-chip change** of throughput from
  the first point to the last, measured and predicted (``tokens/s per chip, last / first - 1``).

Nothing here is fitted: the points are priced with the efficiency model as it is
(:data:`~tpu_notes.efficiency.DEFAULT` unless given). :data:`SWEEPS` holds the project's set, each with its source.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..efficiency import EfficiencyModel, check_efficiency
from ..units import checked
from .published import RUNS, predict
from .sweep_record import RANKING_KINDS, SCALING_KINDS, SWEEP_KINDS, LayoutSweep


@dataclass(frozen=True)
class SweepResult:
    """A sweep beside the model's prediction of each point (tokens/s per chip)."""

    sweep: LayoutSweep
    measured: tuple  # tokens/s per chip, per point
    predicted: tuple  # the expected model's tokens/s per chip, per point
    rank_correlation: float | None  # Spearman's rho, predicted vs measured (None: a series of 2, or a constant)
    regret: float | None  # ranking sweeps: measured time of the model's pick / measured best - 1; else None
    measured_change: float  # tokens/s per chip, last point / first - 1
    predicted_change: float  # the same, predicted

    @property
    def change_error(self) -> float:
        """Predicted minus measured per-chip change, in fractions (0.03: three points)."""
        return self.predicted_change - self.measured_change


def _numbers(name: str, values, positive: bool = False, at_least: int = 1) -> list[float]:
    """``values`` as a list of finite floats, or a TypeError/ValueError naming ``name``."""
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of numbers; got {type(values).__name__}")
    out = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise TypeError(f"{name} must hold finite numbers; got {v!r}")
        if positive and v <= 0:
            raise ValueError(f"{name} must hold throughputs > 0; got {v!r}")
        out.append(float(v))
    if len(out) < at_least:
        raise ValueError(f"{name} must hold at least {at_least} numbers; got {len(out)}")
    return out


def _ranks(values: Sequence[float]) -> list[float]:
    """Ranks from 1, ties at their mean rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and math.isclose(values[order[j + 1]], values[order[i]], rel_tol=1e-9):
            j += 1
        for t in range(i, j + 1):
            ranks[order[t]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


@checked
def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of two equal-length sequences (ties at mean rank), in [-1, 1]; a ValueError
    when either is constant (there is no order to correlate)."""
    a, b = _numbers("a", a, at_least=2), _numbers("b", b, at_least=2)
    if len(a) != len(b):
        raise ValueError(f"a and b must have the same length; got {len(a)} and {len(b)}")
    rho = _spearman(a, b)
    if rho is None:
        raise ValueError("a and b must each hold at least two different values (a constant has no order)")
    return rho


def _spearman(a: list[float], b: list[float]) -> float | None:
    """Spearman's rho of checked sequences; None when either is constant."""
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = sum(ra) / len(ra), sum(rb) / len(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / math.sqrt(va * vb) if va and vb else None


@checked
def regret(measured: Sequence[float], predicted: Sequence[float]) -> float:
    """The measured throughput lost by taking the predicted best: ``max(measured) / measured[pick] - 1``, where
    ``pick`` is the point with the highest ``predicted`` (throughputs, higher is better; among points predicted
    equal at the top, the worst measured)."""
    measured = _numbers("measured", measured, positive=True)
    predicted = _numbers("predicted", predicted)
    if len(measured) != len(predicted):
        raise ValueError(f"measured and predicted must have the same length; got {len(measured)}, {len(predicted)}")
    top = max(predicted)
    picks = [i for i, p in enumerate(predicted) if math.isclose(p, top, rel_tol=1e-9)]
    return max(measured) / min(measured[i] for i in picks) - 1.0


@checked
def evaluate(sweep: LayoutSweep, model: EfficiencyModel | None = None) -> SweepResult:
    """Price every point of ``sweep`` with the expected model (``model``, default
    :data:`~tpu_notes.efficiency.DEFAULT`) and compare the order and the trend with the measured one."""
    if not isinstance(sweep, LayoutSweep):
        raise TypeError(f"sweep must be a LayoutSweep (e.g. sweeps.SWEEPS[0]); got {type(sweep).__name__}")
    e = check_efficiency(model, "model")
    rows = [predict(r, 1.0, e) for r in sweep.runs]
    measured = tuple(r.reported for r in rows)
    predicted = tuple(r.expected for r in rows)
    rho = _spearman(list(predicted), list(measured)) if len(rows) > 2 or sweep.kind in RANKING_KINDS else None
    return SweepResult(
        sweep=sweep,
        measured=measured,
        predicted=predicted,
        rank_correlation=rho,
        regret=regret(measured, predicted) if sweep.kind in RANKING_KINDS else None,
        measured_change=measured[-1] / measured[0] - 1.0,
        predicted_change=predicted[-1] / predicted[0] - 1.0,
    )


@checked
def evaluate_all(sweeps: Sequence[LayoutSweep] | None = None, model: EfficiencyModel | None = None) -> list:
    """:func:`evaluate` for every sweep of ``sweeps`` (default :data:`SWEEPS`)."""
    sweeps = SWEEPS if sweeps is None else sweeps
    if isinstance(sweeps, (str, bytes)) or not isinstance(sweeps, Sequence):
        raise TypeError(f"sweeps must be a sequence of LayoutSweep records; got {type(sweeps).__name__}")
    if not all(isinstance(s, LayoutSweep) for s in sweeps):
        raise TypeError("sweeps must hold LayoutSweep records")
    e = check_efficiency(model, "model")
    return [evaluate(s, e) for s in sweeps]


def format_sweeps(results: Sequence[SweepResult]) -> str:
    """One line per sweep: its kind and points, the rank correlation and regret (ranking sweeps), the measured and
    predicted per-chip change from first to last point (scaling series)."""
    if isinstance(results, (str, bytes)) or not isinstance(results, Sequence):
        raise TypeError(f"results must be a sequence of SweepResult rows; got {type(results).__name__}")
    if not all(isinstance(r, SweepResult) for r in results):
        raise TypeError("results must hold SweepResult rows (from evaluate or evaluate_all)")
    lines = [f"{'sweep':38s} {'kind':10s} {'n':>2} {'comm':>4} {'rho':>5} {'regret':>6} {'Δ meas':>7} {'Δ pred':>7}"]
    for r in results:
        s = r.sweep
        rho = "" if r.rank_correlation is None else f"{r.rank_correlation:+.2f}"
        reg = "" if r.regret is None else f"{r.regret:.1%}"
        lines.append(
            f"{s.name:38.38s} {s.kind:10s} {len(s.runs):2d} {'yes' if s.comm_bound else '':>4} {rho:>5} {reg:>6} "
            f"{r.measured_change:+7.1%} {r.predicted_change:+7.1%}"
        )
    return "\n".join(lines)


def _runs(*names: str) -> tuple:
    """The published runs of these names (tpu_notes.training.published.RUNS), in this order."""
    by_name = {r.name: r for r in RUNS}
    return tuple(by_name[n] for n in names)


#: Scaling series already in the published runs: MaxText's multi-slice tables.
_MULTISLICE = (
    LayoutSweep(
        "32B on 1-32 x v5e-256 (DCN)",
        "maxtext-readme, v5e multi-slice table (1x to 32x v5e-256 rows), configs/v5e/32b.sh",
        "slices",
        "slices over DCN (data parallelism across slices, FSDP within each)",
        _runs("32B synthetic, v5e-256", *(f"32B synthetic, {n} x v5e-256" for n in (2, 4, 8, 16, 32))),
        comm_bound=True,
        notes="the per-chip batch is fixed, so the drop is the DCN gradient all-reduce the slices add",
    ),
    LayoutSweep(
        "22B on 1-8 x v4-128 (DCN)",
        "maxtext-readme at f70c643b, v4 multi-slice table, configs/*xv4-128.sh",
        "slices",
        "slices over DCN (data parallelism across slices, FSDP within each)",
        _runs(*(f"22B synthetic, {n} x v4-128" for n in (1, 2, 4, 8))),
        comm_bound=True,
    ),
)


def _all_sweeps() -> tuple:
    """The multi-slice series here and the per-platform records (imported here: they import this module)."""
    from .sweeps_gpu import GPU_SWEEPS
    from .sweeps_tpu import TPU_SWEEPS

    return _MULTISLICE + tuple(TPU_SWEEPS) + tuple(GPU_SWEEPS)


#: The project's published sweeps: MaxText's multi-slice series here, the TPU records of
#: :mod:`tpu_notes.training.sweeps_tpu` and the GPU records of :mod:`tpu_notes.training.sweeps_gpu`.
SWEEPS: tuple[LayoutSweep, ...] = _all_sweeps()

__all__ = [
    "LayoutSweep",
    "RANKING_KINDS",
    "SCALING_KINDS",
    "SWEEPS",
    "SWEEP_KINDS",
    "SweepResult",
    "evaluate",
    "evaluate_all",
    "format_sweeps",
    "regret",
    "spearman",
]
