"""The efficiency model's figure for Chapters 6 and 8: predicted against measured speed for every published run,
the roofline and the expected prediction side by side (rows from :func:`tpu_notes.validation.reconcile_all`)."""

from __future__ import annotations

import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..hardware import get_chip
from ..runs import Reconciliation, check_rows
from .style import CHIP_COLORS, figure_and_axes

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
    ax.legend(handles=handles, fontsize=8, loc="upper left", ncol=2)
    return fig


__all__ = ["predicted_vs_measured_chart"]
