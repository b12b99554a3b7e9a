"""Figures of Chapter 8 (serving Llama 3): the latency–throughput frontier across slices, a sharded step with its
collectives, published benchmarks against the model, and the serving simulator's latency distributions."""

from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter

from .style import decade_ticks, figure_and_axes, legend_below, new_figure

_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")


def pareto_chart(steps, frontier=None, ax=None, title=None):
    """Latency per token against throughput per chip for generation steps (``DecodeStepTime``), one colour per
    chip count, with the latency–throughput frontier (``inference.pareto_frontier``) drawn as a line."""
    from ..inference import pareto_frontier

    steps = list(steps)
    if not steps:
        raise ValueError("steps must hold at least one DecodeStepTime")
    fig, ax = figure_and_axes(ax, width=7.0, height=4.4)
    for color, n in zip(_COLORS * 4, sorted({s.n_chips for s in steps})):
        pts = sorted((s for s in steps if s.n_chips == n), key=lambda s: s.batch)
        ax.plot(
            [s.tokens_per_s_per_chip for s in pts],
            [s.total * 1e3 for s in pts],
            "o-",
            color=color,
            ms=4,
            lw=1,
            alpha=0.8,
            label=f"{n} chips",
        )
    front = pareto_frontier(steps) if frontier is None else list(frontier)
    ax.plot(
        [s.tokens_per_s_per_chip for s in front],
        [s.total * 1e3 for s in front],
        "k-",
        lw=2.5,
        alpha=0.35,
        label="frontier",
    )
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    ax.set_yticks(
        [t for t in (1, 2, 5, 10, 20, 50, 100) if t <= ax.get_ylim()[1] * 1.01 and t >= ax.get_ylim()[0] * 0.99]
    )
    ax.set_xlabel("throughput, tokens/s per chip (cost falls to the right)")
    ax.set_ylabel("latency, ms per token")
    if title:
        ax.set_title(title, fontsize=10)
    legend_below(ax, fontsize=8, ncol=2)
    return decade_ticks(fig)


def sharded_step_chart(rows, ax=None):
    """Stacked parts of a model-parallel generation step (``inference.ShardedStepTime``), one bar per row: KV
    load, the larger of weight load and FLOPs, the activation collectives' bandwidth and latency, and the KV
    AllToAlls (zero where the caches are not sharded over the batch)."""
    rows = list(rows)
    if not rows:
        raise ValueError("rows must hold at least one ShardedStepTime")
    fig, ax = figure_and_axes(ax, width=7.0, height=3.8)
    x = np.arange(len(rows))
    parts = [
        ("KV load", [r.step.kv_load for r in rows], "#9467bd"),
        ("max(weights, FLOPs)", [max(r.step.weight_load, r.step.flops_time) for r in rows], "#1f77b4"),
        ("collectives: bandwidth", [r.comms_bandwidth for r in rows], "#ff7f0e"),
        ("collectives: hop latency", [r.comms_latency for r in rows], "#d62728"),
        ("KV AllToAlls", [r.kv_all_to_all for r in rows], "#8c564b"),
    ]
    bottom = np.zeros(len(rows))
    for label, vals, color in parts:
        v = np.array(vals) * 1e3
        ax.bar(x, v, bottom=bottom, color=color, label=label, width=0.6)
        bottom += v
    ax.set_xticks(x)
    ax.set_xticklabels([f"{r.tp} chips\nbatch {r.step.batch}" for r in rows], fontsize=8)
    ax.set_ylabel("ms per generation step")
    legend_below(ax, fontsize=8)
    return decade_ticks(fig)


def serving_reconciliation_chart(roofline_rows, calibrated_rows=None, ax=None):
    """Achieved / modelled speed for published serving benchmarks (``inference.published.reconcile`` rows), one
    bar per benchmark: hollow at the roofline, filled at the stated efficiency; 1 means the model is exact."""
    rows = list(roofline_rows)
    if not rows:
        raise ValueError("roofline_rows must hold at least one ServingReconciliation")
    fig, ax = figure_and_axes(ax, width=6.0, height=0.3 * len(rows) + 1.2)
    y = np.arange(len(rows))[::-1]
    sources = sorted({r.run.source.split(",")[0] for r in rows})
    color = {s: c for s, c in zip(sources, _COLORS)}
    cols = [color[r.run.source.split(",")[0]] for r in rows]
    ax.barh(y, [r.ratio for r in rows], height=0.6, fill=False, edgecolor=cols)
    if calibrated_rows is not None:
        ax.barh(y, [r.ratio for r in calibrated_rows], height=0.3, color=cols)
    ax.axvline(1.0, color="k", ls="--", lw=1)
    ax.set_yticks(y)
    ax.set_yticklabels([r.run.name for r in rows], fontsize=9)
    ax.set_xlabel("achieved / modelled speed (hollow: roofline; filled: at the stated efficiency)")
    legend_below(ax, handles=[Patch(color=color[s], label=s) for s in sources], fontsize=9)
    ax.set_xlim(0, 1.15)
    return decade_ticks(fig)


def simulation_chart(results):
    """TTFT and TPOT distributions (empirical CDFs) of serving-simulator runs, ``{label: SimResult}`` (TPOT over the
    answers of two tokens or more)."""
    results = dict(results)
    if not results:
        raise ValueError("results must map at least one label to a SimResult")
    fig, axes = new_figure(ncols=2, width=7.2, height=3.2)
    axes = list(np.ravel(axes))
    for color, (label, r) in zip(_COLORS * 4, results.items()):
        tpot = np.asarray(r.tpot_all)
        if r.tokens_all:
            tpot = tpot[np.asarray(r.tokens_all) > 1]
        for ax, vals in zip(axes, (r.ttft_all, tpot)):
            v = np.sort(np.asarray(vals))
            ax.plot(v * 1e3, np.arange(1, len(v) + 1) / max(len(v), 1), color=color, label=label)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("time to first token, ms")
    axes[1].set_xlabel("time per output token, ms")
    axes[0].set_ylabel("share of requests")
    legend_below(axes[1], fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def percentiles_vs_load_chart(rows, title=None):
    """TTFT and TPOT against the arrival rate, p50 (solid) and p99 (dashed), one colour per engine: the rows of
    ``inference.sweep`` (each with ``label``, ``rate`` and the ``ttft_p50_s`` ... ``tpot_p99_s`` of
    ``SimResult.row``)."""
    rows = list(rows)
    if not rows:
        raise ValueError("rows must hold at least one row of inference.sweep")
    need = ("label", "rate", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")
    for k, r in enumerate(rows):
        if not isinstance(r, dict) or any(n not in r for n in need):
            raise ValueError(f"rows[{k}] must be a dict with keys {need} (a row of inference.sweep)")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    fig, axes = new_figure(ncols=2, width=7.2, height=3.4)
    axes = list(np.ravel(axes))
    for color, label in zip(_COLORS * 4, labels):
        pts = sorted((r for r in rows if r["label"] == label), key=lambda r: r["rate"])
        x = [r["rate"] for r in pts]
        for ax, what in zip(axes, ("ttft", "tpot")):
            ax.plot(x, [r[f"{what}_p50_s"] * 1e3 for r in pts], "o-", color=color, ms=3, lw=1.2, label=f"{label} p50")
            ax.plot(x, [r[f"{what}_p99_s"] * 1e3 for r in pts], "s--", color=color, ms=3, lw=1, label=f"{label} p99")
    plain = FuncFormatter(lambda v, _: f"{v:g}")
    for ax, name in zip(axes, ("time to first token", "time per output token")):
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("arrival rate, requests/s")
        ax.set_title(name, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("ms")
    legend_below(axes[1], fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return decade_ticks(fig)


__all__ = [
    "pareto_chart",
    "percentiles_vs_load_chart",
    "serving_reconciliation_chart",
    "sharded_step_chart",
    "simulation_chart",
]
