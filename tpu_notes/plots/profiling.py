"""Figures of Chapter 9 (profiling), drawn from :mod:`tpu_notes.profile`'s traces and op tables."""

from __future__ import annotations

import math

import numpy as np
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from ..units import fmt
from .style import decade_ticks, figure_and_axes, legend_below

#: One colour per op category of :func:`tpu_notes.profile.op_table`.
CATEGORY_COLORS = {"matmul": "#1f77b4", "fusion": "#ff7f0e", "collective": "#d62728", "other": "#7f7f7f"}


def timeline(trace, step: int = None, ax=None, width: float = 7.0, height: float = 3.4):
    """A Gantt chart of one traced step: one row per device, one bar per op execution, coloured by category
    (the picture XProf's trace viewer draws). ``step``: which traced step (default: the middle one).

    Returns the matplotlib Figure."""
    from .. import profile  # local: tpu_notes.profile imports JAX; `from tpu_notes import plots` must not

    trace = profile._check_trace(trace)
    step = trace.steps // 2 if step is None else step
    evs = profile.events(trace, step)
    costs = profile.op_costs(trace.hlo_text)
    fig, ax = figure_and_axes(ax, width=width, height=height)
    devices = sorted({e.device for e in evs})
    spans = {}  # (device row, category) -> [(start ms, width ms)]: one artist per group, not per op
    for e in evs:
        c = costs.get(e.name)
        key = (devices.index(e.device), c.category if c else "other")
        spans.setdefault(key, []).append((e.start_s * 1e3, max(e.duration_s * 1e3, 1e-4)))
    for (row, category), bars in sorted(spans.items()):
        ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=CATEGORY_COLORS[category], linewidth=0)
    ax.set_yticks(range(len(devices)))
    ax.set_yticklabels([f"device {d}" for d in devices])
    ax.invert_yaxis()
    ax.set_xlabel("ms from the start of the step")
    ax.set_title(f"{trace.module}, step {step}: {len(evs)} op executions")
    legend_below(
        ax,
        handles=[Patch(color=v, label=k) for k, v in CATEGORY_COLORS.items()],
        ncol=4,
        frameon=False,
    )
    fig.tight_layout()
    return decade_ticks(fig)


def category_chart(tables: dict, ax=None, width: float = 7.0, height: float = 2.8):
    """Stacked horizontal bars: seconds per step per device by op category, one bar per labelled op table
    (``{label: rows of profile.op_table}``), with the total at the end of each bar.

    Returns the matplotlib Figure."""
    from .. import profile  # local: imports JAX (see timeline)

    if not isinstance(tables, dict) or not tables:
        raise TypeError("tables must be a non-empty dict {label: op_table rows}")
    fig, ax = figure_and_axes(ax, width=width, height=height)
    labels = list(tables)
    for i, label in enumerate(labels):
        totals = profile.category_totals(tables[label])
        left = 0.0
        for cat, color in CATEGORY_COLORS.items():
            ax.barh(i, totals[cat] * 1e3, left=left, color=color, label=cat if i == 0 else None)
            left += totals[cat] * 1e3
        ax.text(left, i, " " + fmt(left * 1e-3, "s"), va="center", fontsize=8)
    ax.set_yticks(range(len(labels)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step per device")
    ax.set_xlim(0, ax.get_xlim()[1] * 1.15)
    legend_below(ax, ncol=4, frameon=False, fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def ops_on_roofline(rows, fit, top: int = 8, ax=None, width: float = 7.0, height: float = 3.8):
    """The ``top`` most expensive ops that do arithmetic, placed at their XLA intensity and the FLOP/s they
    reached (FLOPs of one execution over its mean time) under a fitted roofline
    (:class:`tpu_notes.bench.FittedRoofline`, e.g. the measured CPU roofline of Chapter 1).

    Returns the matplotlib Figure."""
    picked = [r for r in rows if math.isfinite(r.flops) and r.flops > 0 and r.bytes > 0 and r.mean_s > 0][:top]
    if not picked:
        raise ValueError("rows: no op with FLOPs, bytes and a time to place on the roofline")
    fig, ax = figure_and_axes(ax, width=width, height=height)
    lo = min(min(r.intensity for r in picked), fit.critical_intensity) / 4
    hi = max(max(r.intensity for r in picked) * 4, fit.critical_intensity * 4)
    xs = np.geomspace(lo, hi, 200)
    ax.loglog(xs, [fit.attainable(x) for x in xs], "k-", label="measured roofline of this machine")
    ax.axvline(
        fit.critical_intensity,
        color="0.6",
        ls=":",
        lw=1,
        label=f"critical intensity {fit.critical_intensity:.3g} FLOP/B",
    )
    for k, r in enumerate(sorted(picked, key=lambda r: -r.achieved_flops)):
        ax.scatter(r.intensity, r.achieved_flops, color=CATEGORY_COLORS[r.category], zorder=3)
        ax.annotate(
            r.name,
            (r.intensity, r.achieved_flops),
            textcoords="offset points",
            xytext=(8 if k % 2 == 0 else -8, 2),
            ha="left" if k % 2 == 0 else "right",
            fontsize=8,
        )
    ax.set_xlabel("arithmetic intensity (FLOPs per byte, XLA's count)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(f"Top {len(picked)} ops of the step on the roofline")
    ax.set_ylim(top=fit.peak_flops * 2.5)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    legend_below(ax, fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)
