"""Chapter 3 figures: a ring AllGather hop by hop, and measured collective times against the model."""
from __future__ import annotations

import matplotlib

from .style import new_figure


def ring_all_gather_figure(n: int = 8, wraparound: bool = True, max_panels: int = 6):
    """A ring AllGather hop by hop: one panel per hop, devices around a circle, each showing which shards it holds
    (from ``tpu_notes.collectives.ring_all_gather_schedule``). Returns the figure."""
    import math

    import numpy as np

    from ..collectives import ring_all_gather_schedule

    states = ring_all_gather_schedule(n, wraparound)[:max_panels]
    fig, axes = new_figure(ncols=len(states), width=2.3 * len(states), height=2.6)
    colors = matplotlib.colormaps["tab10"] if n <= 10 else matplotlib.colormaps["tab20"]
    ang = [math.pi / 2 - 2 * math.pi * d / n for d in range(n)]
    for h, (ax, state) in enumerate(zip(axes[0], states)):
        ax.set_aspect("equal")
        ax.axis("off")
        xs, ys = np.cos(ang), np.sin(ang)
        if not wraparound:
            xs, ys = np.linspace(-1, 1, n), np.zeros(n)
        ax.plot(np.append(xs, xs[0]) if wraparound else xs, np.append(ys, ys[0]) if wraparound else ys,
                color="0.8", zorder=0, lw=1)
        for d in range(n):
            held = sorted(state[d])
            for j, s in enumerate(range(n)):
                a = 2 * math.pi * j / n
                r = 0.22
                face = colors(s % colors.N) if s in held else "white"
                ax.add_patch(matplotlib.patches.Wedge((xs[d], ys[d]), r, math.degrees(a), math.degrees(a) + 360 / n,
                                                      facecolor=face, edgecolor="0.5", lw=0.4))
            ax.text(xs[d], ys[d] - 0.33, str(d), ha="center", va="center", fontsize=7)
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        full = sum(len(s) for s in state) / (n * n)
        ax.set_title(f"after {h} hop{'s' if h != 1 else ''}\n{full:.0%} gathered", fontsize=9)
    kind = "bidirectional ring" if wraparound else "line (no wraparound)"
    fig.suptitle(f"AllGather over {n} devices on a {kind}: each wedge is one shard", fontsize=10)
    fig.tight_layout()
    return fig


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
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    return fig
