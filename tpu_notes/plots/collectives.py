"""Chapter 3 figures: ring collectives hop by hop, one collective's cost on a slice, and measured collective
times against the model."""

from __future__ import annotations

import math

import matplotlib
import numpy as np

from ..collectives import (
    canonical_kind,
    ring_all_gather_schedule,
    ring_all_to_all_schedule,
    ring_reduce_scatter_schedule,
)
from ..topology import Slice
from ..units import fmt
from .style import decade_ticks, figure_and_axes, legend_below, new_figure, panel_grid


def ring_all_gather_figure(n: int = 8, wraparound: bool = True, max_panels: int = 6):
    """A ring AllGather hop by hop: one panel per hop, devices around a circle, each showing which shards it holds
    (from ``tpu_notes.collectives.ring_all_gather_schedule``). Returns the figure."""
    states = ring_all_gather_schedule(n, wraparound)[:max_panels]
    fig, axes = panel_grid(len(states), ncols=3, panel_width=2.4, panel_height=2.8)
    colors = matplotlib.colormaps["tab10"] if n <= 10 else matplotlib.colormaps["tab20"]
    ang = [math.pi / 2 - 2 * math.pi * d / n for d in range(n)]
    for h, (ax, state) in enumerate(zip(axes, states)):
        ax.set_aspect("equal")
        ax.axis("off")
        xs, ys = np.cos(ang), np.sin(ang)
        if not wraparound:
            xs, ys = np.linspace(-1, 1, n), np.zeros(n)
        ax.plot(
            np.append(xs, xs[0]) if wraparound else xs,
            np.append(ys, ys[0]) if wraparound else ys,
            color="0.8",
            zorder=0,
            lw=1,
        )
        for d in range(n):
            held = sorted(state[d])
            for j, s in enumerate(range(n)):
                a = 2 * math.pi * j / n
                r = 0.22
                face = colors(s % colors.N) if s in held else "white"
                ax.add_patch(
                    matplotlib.patches.Wedge(
                        (xs[d], ys[d]),
                        r,
                        math.degrees(a),
                        math.degrees(a) + 360 / n,
                        facecolor=face,
                        edgecolor="0.5",
                        lw=0.4,
                    )
                )
            # the device's number inside the ring (below the node on a line), clear of the panel titles
            lx, ly = (0.58 * xs[d], 0.58 * ys[d]) if wraparound else (xs[d], ys[d] - 0.36)
            ax.text(lx, ly, str(d), ha="center", va="center", fontsize=9)
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        full = sum(len(s) for s in state) / (n * n)
        ax.set_title(f"after {h} hop{'s' if h != 1 else ''}\n{full:.0%} gathered", fontsize=10)
    kind = "bidirectional ring" if wraparound else "line (no wraparound)"
    fig.suptitle(f"AllGather over {n} devices on a {kind}:\neach wedge is one shard", fontsize=11)
    fig.tight_layout()
    return decade_ticks(fig)


def collective_timing_chart(measurements, model_times: dict, title: str = ""):
    """Measured collective times (points) against the model's curves (lines), log-log.

    ``measurements``: ``tpu_notes.bench.CollectiveMeasurement`` items; ``model_times``: kind -> list of
    (nbytes, seconds) for the model's curve. Returns the figure.
    """
    fig, ax = new_figure(width=6.5, height=4.0)
    colors = {"all-gather": "#1f77b4", "reduce-scatter": "#ff7f0e", "all-reduce": "#2ca02c", "all-to-all": "#d62728"}
    for kind, color in colors.items():
        pts = [(m.nbytes, m.seconds) for m in measurements if m.kind == kind]
        if pts:
            ax.loglog(*zip(*pts), "o", color=color, label=f"{kind} measured")
        if kind in model_times:
            ax.loglog(*zip(*model_times[kind]), "-", color=color, alpha=0.7, label=f"{kind} model")
    ax.set_xlabel("array size V (bytes)")
    ax.set_ylabel("time (s)")
    ax.set_title(title or "Collectives: measured vs model")
    legend_below(ax, fontsize=8, ncol=2)
    fig.tight_layout()
    return decade_ticks(fig)


def _ring_positions(n: int):
    ang = [math.pi / 2 - 2 * math.pi * d / n for d in range(n)]
    return np.cos(ang), np.sin(ang)


def ring_collective_figure(kind: str = "reduce-scatter", n: int = 8, max_panels: int = 6):
    """A ring collective hop by hop, one panel per hop, devices around a circle (Chapter 3).

    ``kind``: "all-gather" (the same as :func:`ring_all_gather_figure`), "reduce-scatter" (each wedge is one shard's
    partial sum, filled out to the share of the ``N`` addends it already includes, from
    ``collectives.ring_reduce_scatter_schedule``) or "all-to-all" (each device's pie shows the blocks it holds,
    coloured by destination, from ``collectives.ring_all_to_all_schedule``). Returns the figure.
    """
    kind = canonical_kind(kind)
    if kind == "all-gather":
        return ring_all_gather_figure(n, True, max_panels)
    if kind == "all-reduce":
        raise ValueError(
            "kind must be 'all-gather', 'reduce-scatter' or 'all-to-all' (an AllReduce is a "
            "ReduceScatter followed by an AllGather: draw both)"
        )
    if isinstance(max_panels, bool) or not isinstance(max_panels, int) or max_panels < 2:
        raise ValueError(f"max_panels must be an integer >= 2; got {max_panels!r}")
    schedule = ring_reduce_scatter_schedule(n) if kind == "reduce-scatter" else ring_all_to_all_schedule(n)
    hops = list(range(len(schedule)))
    if len(hops) > max_panels:  # keep the first panels and the final state
        hops = hops[: max_panels - 1] + [hops[-1]]
    states = [schedule[h] for h in hops]
    fig, axes = panel_grid(len(states), ncols=3, panel_width=2.4, panel_height=2.9)
    colors = matplotlib.colormaps["tab10"] if n <= 10 else matplotlib.colormaps["tab20"]
    xs, ys = _ring_positions(n)
    r = 0.3
    for h, ax, state in zip(hops, axes, states):
        ax.set_aspect("equal")
        ax.axis("off")
        ax.plot(list(xs) + [xs[0]], list(ys) + [ys[0]], color="0.8", zorder=0, lw=1)
        for d in range(n):
            if kind == "reduce-scatter":
                for s in state[d]:  # shards whose partial sum d still holds
                    a0 = 360 * s / n
                    ax.add_patch(
                        matplotlib.patches.Wedge(
                            (xs[d], ys[d]), r, a0, a0 + 360 / n, facecolor="white", edgecolor="0.6", lw=0.5
                        )
                    )
                    filled = r * math.sqrt(len(state[d][s]) / n)  # area: the share of addends summed
                    ax.add_patch(
                        matplotlib.patches.Wedge(
                            (xs[d], ys[d]), filled, a0, a0 + 360 / n, facecolor=colors(s % colors.N), edgecolor="none"
                        )
                    )
            else:
                total, a0 = sum(state[d].values()), 0.0
                for t in sorted(state[d]):
                    span = 360 * state[d][t] / total
                    ax.add_patch(
                        matplotlib.patches.Wedge(
                            (xs[d], ys[d]), r, a0, a0 + span, facecolor=colors(t % colors.N), edgecolor="0.5", lw=0.4
                        )
                    )
                    a0 += span
            ax.text(0.55 * xs[d], 0.55 * ys[d], str(d), ha="center", va="center", fontsize=9)  # inside the ring
        ax.set_xlim(-1.45, 1.45)
        ax.set_ylim(-1.45, 1.45)
        if kind == "reduce-scatter":
            done = sum(1 for d in range(n) if len(state[d].get(d, ())) == n)
            status = f"{done} of {n} shards summed"
        else:
            home = sum(state[d].get(d, 0) for d in range(n))
            status = f"{home / n**2:.0%} of blocks home"
        ax.set_title(f"after {h} hop{'s' if h != 1 else ''}\n{status}", fontsize=10)
    what = {
        "reduce-scatter": "a wedge per shard, filled by the share of addends summed",
        "all-to-all": "each device's blocks, coloured by destination",
    }[kind]
    name = {"reduce-scatter": "ReduceScatter", "all-to-all": "AllToAll"}[kind]
    fig.suptitle(f"{name} over {n} devices on a bidirectional ring:\n{what}", fontsize=11)
    fig.tight_layout()
    return decade_ticks(fig)


def collective_cost_chart(chip="v5e", shape=(4, 4), kind: str = "all_gather", axes="x", nbytes: float = 64e6, ax=None):
    """Time of one collective on a slice against the array size ``V`` (log-log), with its two terms (Chapter 3).

    Draws the bandwidth term, the latency term (hops × 1 µs) and their maximum for ``kind`` over ``axes`` of the
    slice ``Slice(chip, shape)``, and marks ``nbytes``. ``axes`` as in ``Slice.collective_time`` ("x", ("x", "y"),
    None for all). Returns the figure (draws into ``ax`` when given).
    """
    sl = Slice(chip, tuple(shape))
    point = sl.collective_time(kind, nbytes, axes)
    sizes = np.geomspace(1e3, 1e10, 120)
    times = [sl.collective_time(kind, v, axes) for v in sizes]
    fig, ax = figure_and_axes(ax, width=6.5, height=4.0)
    ax.loglog(sizes, [t.total for t in times], color="#1f77b4", label="time = max of the two terms")
    ax.loglog(sizes, [t.bandwidth_time for t in times], "--", color="#ff7f0e", lw=1.2, label="bandwidth term")
    ax.loglog(
        sizes,
        [max(t.latency_time, 1e-9) for t in times],
        ":",
        color="#2ca02c",
        lw=1.5,
        label="latency term (hops × 1 µs)",
    )
    ax.plot([nbytes], [point.total], "o", color="black")
    ax.annotate(
        f"V = {fmt(nbytes, 'B')}: {fmt(point.total, 's')} ({point.bound})",
        (nbytes, point.total),
        textcoords="offset points",
        xytext=(8, 10),
        ha="left",
        fontsize=9,
    )
    idx = sl._axis_indices(axes)
    names = "".join("xyz"[i] for i in idx)
    wraps = ", ".join(f"{'xyz'[i]}: {'ring' if sl.wraparound[i] else 'line'}" for i in idx)
    ax.set_ylim(1e-7, max(t.total for t in times) * 2)
    ax.set_xlabel("array size V (bytes, the whole gathered / unreduced array)")
    ax.set_ylabel("time (s)")
    shape_txt = "x".join(str(s) for s in sl.shape)
    ax.set_title(f"{kind.replace('_', ' ')} over {names} of a {sl.chip.name} {shape_txt} slice ({wraps})", fontsize=10)
    legend_below(ax, fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)
