"""Figures of Chapter 11 (GPUs), drawn from :mod:`tpu_notes.gpu` and the chip table."""

from __future__ import annotations

import numpy as np

from ..hardware import get_chip
from ..units import fmt
from .style import decade_ticks, figure_and_axes, legend_below, panel_grid

_TPU_COLOR, _GPU_COLOR = "#1f77b4", "#76b900"


def gpu_tpu_chips_chart(names=("v5e", "v5p", "v6e", "a100", "h100", "b200")):
    """Three panels side by side from the one chip table: bf16 FLOP/s, HBM bandwidth and their ratio (the
    critical intensity), TPUs in blue and GPUs in green."""
    chips = [get_chip(n) for n in names]
    fig, axes = panel_grid(3, panel_width=2.4, panel_height=2.6)
    panels = [
        ("bf16 FLOP/s", [c.bf16_flops for c in chips], "FLOP/s"),
        ("HBM bandwidth", [c.hbm_bw for c in chips], "B/s"),
        ("critical intensity", [c.critical_intensity("bf16", "hbm") for c in chips], "FLOPs/B"),
    ]
    colors = [_GPU_COLOR if c.kind == "gpu" else _TPU_COLOR for c in chips]
    for ax, (title, values, unit) in zip(axes, panels):
        ax.bar(range(len(chips)), values, color=colors)
        ax.set_xticks(range(len(chips)), [c.name for c in chips], rotation=90)
        ax.set_title(title)
        ax.set_ylabel(unit)
    fig.tight_layout()
    return decade_ticks(fig)


def gpu_collective_chart(cluster, nbytes: float = 1e9, direct_up_to: int = 256):
    """AllGather, AllReduce and AllToAll time of a ``nbytes`` array against the group size on ``cluster``, whole
    nodes in each group from 8 GPUs up: the closed forms as lines, the explicit-graph router's busiest link as
    dots (groups up to ``direct_up_to`` GPUs). The kink after one node is the step from NVLink to the NICs."""
    from ..gpu import direct_collective_time

    fig, ax = figure_and_axes(width=6.5, height=3.6)
    groups = [g for g in (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096) if g <= cluster.n_gpus]
    colors = {"all-gather": "#1f77b4", "all-reduce": "#d62728", "all-to-all": "#2ca02c"}
    for kind, color in colors.items():
        closed = [cluster.collective_time(kind, nbytes, g, hop_latency=0).total for g in groups]
        ax.loglog(groups, closed, color=color, label=kind)
        small = [g for g in groups if g <= direct_up_to]
        ax.loglog(
            small, [direct_collective_time(cluster, kind, nbytes, g) for g in small], "o", color=color, markersize=4
        )
    ax.axvline(cluster.node_size, color="0.6", ls=":", lw=1)
    ax.text(cluster.node_size * 1.05, ax.get_ylim()[1] * 0.5, "one node", fontsize=8, color="0.4")
    ax.set_xlabel("GPUs in the group")
    ax.set_ylabel("seconds")
    ax.set_title(f"{fmt(nbytes, 'B')} on {cluster.describe()}"[:90], fontsize=9)
    legend_below(ax, title="lines: formula; dots: link by link", fontsize=8, title_fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def sharded_all_gather_chart(cluster, d: int = 8192, f: int = 32768, ys=(1, 2, 4, 8, 16, 32, 64, 128)):
    """``AllGather_X(bf16[D_X, F_Y])`` over the whole ``cluster`` with ``Y`` the inner axis: the time against
    ``Y`` and each level's term. Inner sharding pays only once ``Y`` spans nodes."""
    n = cluster.n_gpus
    ys = [y for y in ys if n % y == 0 and n // y >= 2]
    V = 2 * d * f
    fig, ax = figure_and_axes(width=6.0, height=3.4)
    terms = {y: cluster.collective_terms("all-gather", V / y, n // y, span=n) for y in ys}
    for level in terms[ys[0]]:
        values = [terms[y][level] or np.nan for y in ys]  # a level the group never crosses: no point
        ax.loglog(ys, values, "--", label=f"{level} term")
    ax.loglog(ys, [max(terms[y].values()) for y in ys], "k-o", markersize=4, label="total (the slowest level)")
    ax.axvline(cluster.node_size, color="0.6", ls=":", lw=1)
    ax.set_xlabel("Y: GPUs the array is sharded over inside (inner axis)")
    ax.set_ylabel("seconds")
    ax.set_title(f"AllGather over X = {n} / Y of bf16[{d}, {f}]", fontsize=9)
    legend_below(ax, fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def gpu_strategy_chart(rows, title: str = ""):
    """Compute and communication time of one MLP block for each strategy (from
    :func:`tpu_notes.training.strategy_times`), side by side; a strategy whose communication bar is taller than its
    compute bar is communication-bound."""
    fig, ax = figure_and_axes(width=6.0, height=3.4)
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [r.math for r in rows], 0.4, color="#1f77b4", label="compute")
    ax.bar(x + 0.2, [r.comms for r in rows], 0.4, color="#d62728", label="communication")
    ax.set_yscale("log")
    ax.set_xticks(x, [f"{r.strategy.upper()} ({r.degree}-way)\n{r.bound}-bound" for r in rows])
    ax.set_ylabel("seconds per MLP block")
    ax.set_title(title, fontsize=9)
    legend_below(ax, fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def gpu_critical_batch_chart(names=("a100", "h100", "h800", "b200", "gb200")):
    """Tokens per GPU that data parallelism needs to stay compute-bound, inside a node (``C / W_nvlink``) and
    across nodes (``C / W_node``), for each GPU with both figures."""
    from ..training import critical_batch_per_gpu

    chips = [get_chip(n) for n in names]
    fig, ax = figure_and_axes(width=6.0, height=3.2)
    x = np.arange(len(chips))
    inside = [critical_batch_per_gpu(c, across_nodes=False) for c in chips]
    across = [critical_batch_per_gpu(c) if c.node_egress_bw else np.nan for c in chips]
    ax.bar(x - 0.2, inside, 0.4, color="#76b900", label="inside a node (C / W_nvlink)")
    ax.bar(x + 0.2, across, 0.4, color="#d62728", label="across nodes (C / W_node)")
    for xi, v in zip(x, across):
        if np.isfinite(v):
            ax.text(xi + 0.2, v, f"{v:,.0f}", ha="center", va="bottom", fontsize=8)
    ax.set_xticks(x, [c.name for c in chips])
    ax.set_ylabel("tokens per GPU")
    legend_below(ax, fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)
