"""The efficiency model's figure for Chapters 6 and 8: predicted against measured speed for every published run,
the roofline and the expected prediction side by side (rows from :func:`tpu_notes.validation.reconcile_all`)."""

from __future__ import annotations

import textwrap

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..hardware import get_chip
from ..runs import Reconciliation, check_rows
from .style import CHIP_COLORS, decade_ticks, figure_and_axes, legend_below, new_figure

#: The half-width of the shaded band around y = x: a prediction within ±15% of the measured speed. A reading aid
#: chosen for the figure, not a sourced figure.
BAND = 0.15

#: What ``which`` may ask for.
WHICH = ("both", "roofline", "expected")

_FALLBACK_COLOR = "#444444"  # a chip with no entry in CHIP_COLORS


def _chip(row: Reconciliation):
    """The chip a row's run ran on: a training run's system chip, or a serving benchmark's named chip."""
    run = row.run
    system = getattr(run, "system", None)
    if system is not None:
        return system.chip
    return get_chip(run.chip)


def _label(chip) -> str:
    """A chip's legend label: "TPU v5e" for a TPU, "H100" for a GPU (its long name carries the form factor)."""
    return chip.long_name if chip.kind == "tpu" else chip.name.upper()


def _speeds(row: Reconciliation) -> tuple[float, float, float]:
    """``(measured, roofline, expected)`` as speeds: tokens/s per chip as they are, a latency row (seconds per
    output token) as its inverse, output tokens/s of one sequence."""
    if getattr(row.run, "metric", "tokens/s/chip") == "s/token":
        return 1.0 / row.reported, 1.0 / row.predicted, 1.0 / row.expected
    return row.reported, row.predicted, row.expected


def predicted_vs_measured_chart(rows, ax=None, which: str = "both"):
    """Predicted (y) against measured (x) speed on log-log axes for ``rows`` (``validation.reconcile_all`` rows,
    training or serving or both): hollow triangles at the roofline, filled circles at the expected figure, one
    colour per chip, the line y = x and a shaded ±:data:`BAND` band around it. A point above the line is an
    optimistic prediction. Speeds are tokens/s per chip, except latency rows (``run.metric == "s/token"``), drawn as
    1 / (seconds per token): one sequence's tokens/s. ``which`` is ``"both"``, ``"roofline"`` or ``"expected"``.
    Returns the Figure."""
    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}; got {which!r}")
    rows = check_rows(rows, Reconciliation)
    if not rows:
        raise ValueError("rows must hold at least one Reconciliation (from validation.reconcile_all)")
    fig, ax = figure_and_axes(ax, width=7.0, height=5.0)
    chips = [_chip(r) for r in rows]
    colors = [CHIP_COLORS.get(c.name, _FALLBACK_COLOR) for c in chips]
    speeds = np.array([_speeds(r) for r in rows])
    measured, roofline, expected = speeds.T
    drawn = [measured]
    if which in ("both", "roofline"):
        ax.scatter(measured, roofline, s=42, marker="^", facecolors="none", edgecolors=colors, gid="roofline")
        drawn.append(roofline)
    if which in ("both", "expected"):
        ax.scatter(measured, expected, s=30, marker="o", c=colors, edgecolors="none", gid="expected")
        drawn.append(expected)
    lo, hi = min(d.min() for d in drawn) / 1.5, max(d.max() for d in drawn) * 1.5
    xs = np.geomspace(lo, hi, 64)
    ax.fill_between(xs, xs * (1 - BAND), xs * (1 + BAND), color="#999999", alpha=0.25, lw=0, gid="band")
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    latency = any(getattr(r.run, "metric", "") == "s/token" for r in rows)
    if latency:
        ax.set_xlabel("measured speed, tokens/s per chip (latency rows: 1 / (s per token))")
        ax.set_ylabel("predicted speed, the same units")
    else:
        ax.set_xlabel("measured speed, tokens/s per chip")
        ax.set_ylabel("predicted speed, tokens/s per chip")
    # one legend entry per chip (TPUs first, in CHIP_COLORS order), then the markers, the line and the band
    present = {c.name: c for c in chips}
    rank = {n: i for i, n in enumerate(CHIP_COLORS)}
    order = sorted(present, key=lambda n: (present[n].kind != "tpu", rank.get(n, len(rank)), n))
    handles = [Patch(color=CHIP_COLORS.get(n, _FALLBACK_COLOR), label=_label(present[n])) for n in order]
    if which in ("both", "roofline"):
        handles.append(Line2D([], [], ls="none", marker="^", mfc="none", mec="k", label="roofline (upper bound)"))
    if which in ("both", "expected"):
        handles.append(Line2D([], [], ls="none", marker="o", mfc="k", mec="none", label="expected"))
    handles.append(Line2D([], [], color="k", ls="--", lw=1, label="predicted = measured"))
    handles.append(Patch(color="#999999", alpha=0.25, label=f"within ±{BAND:.0%}"))
    legend_below(ax, handles=handles, fontsize=8, ncol=2)
    return decade_ticks(fig)


def sweep_chart(results, ncols: int = 3):
    """One panel per published sweep (``training.sweeps.evaluate_all`` rows): each point's tokens/s per chip,
    measured (filled) and expected (hollow), each over its own best point, so the panels compare order and trend,
    not level. A panel's title gives the sweep's rank correlation and regret (ranking sweeps) or the per-chip change
    from its first to its last point (scaling series). Returns the Figure."""
    from ..training.sweeps import SweepResult

    if isinstance(results, (str, bytes)) or not hasattr(results, "__iter__"):
        raise TypeError(f"results must be a list of SweepResult rows; got {type(results).__name__}")
    results = list(results)
    if not results or not all(isinstance(r, SweepResult) for r in results):
        raise ValueError("results must hold at least one SweepResult (from training.sweeps.evaluate_all)")
    if isinstance(ncols, bool) or not isinstance(ncols, int) or not 1 <= ncols <= 6:
        raise ValueError(f"ncols must be a whole number of columns in [1, 6]; got {ncols!r}")
    ncols = min(ncols, len(results))
    nrows = -(-len(results) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=min(7.2, 3.4 * ncols), height=2.6 * nrows)
    axes = np.atleast_1d(axes).ravel()
    for ax, r in zip(axes, results):
        x = np.arange(len(r.measured))
        meas = np.array(r.measured) / max(r.measured)
        pred = np.array(r.predicted) / max(r.predicted)
        ax.plot(x, meas, "o-", color="#1f77b4", ms=5, lw=1.2, label="measured")
        ax.plot(x, pred, "o--", color="#d62728", mfc="none", ms=6, lw=1.0, label="expected")
        if r.regret is not None:
            rho = "" if r.rank_correlation is None else f"ρ {r.rank_correlation:+.2f}, "
            detail = f"{rho}regret {r.regret:.0%}"
        else:
            detail = f"Δ {r.measured_change:+.0%} measured, {r.predicted_change:+.0%} expected"
        name = textwrap.wrap(r.sweep.name, 34)
        name = name[0] + ("\n" + name[1] if len(name) > 1 else "") + ("…" if len(name) > 2 else "")
        ax.set_title(f"{name}\n{detail}", fontsize=8.5)
        ax.set_xticks(x)
        ax.set_xticklabels([str(i + 1) for i in x], fontsize=8)
        ax.tick_params(axis="y", labelsize=8)
        lo = min(meas.min(), pred.min())
        ax.set_ylim(max(0.0, lo - 0.1), 1.05)
    for ax in axes[len(results) :]:
        ax.set_visible(False)
    legend_below(axes[0], fontsize=8)
    fig.supxlabel("point of the sweep (the source's order)", fontsize=8)
    fig.supylabel("tokens/s per chip / best point", fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


__all__ = ["predicted_vs_measured_chart", "sweep_chart"]
