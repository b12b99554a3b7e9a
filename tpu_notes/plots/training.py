"""Figures of Chapter 5 (training parallelism), drawn from :mod:`tpu_notes.training`."""

from __future__ import annotations

import numpy as np

from ..hardware import get_chip
from ..units import fmt
from .style import figure_and_axes, new_figure

_KIND_COLORS = {
    "compute": "#1f77b4",
    "fsdp": "#ff7f0e",
    "data": "#8c564b",
    "tensor": "#2ca02c",
    "expert": "#9467bd",
    "pipeline": "#7f7f7f",
    "dcn": "#d62728",
    "bubble": "#c7c7c7",
}


def training_roofline_chart(
    chip="v5p",
    d_model: int = 8192,
    d_ff: int = 28672,
    n_chips: int = 64,
    n_axes: int = 3,
    batch_range=(32, 65536),
    ax=None,
):
    """Per-layer compute time and each strategy's communication time (forward + backward) against the per-chip
    batch, for ``n_chips`` chips: pure FSDP (all ``n_axes`` axes), pure tensor parallelism, and FSDP + tensor at
    the best power-of-two split. Lines above the compute line are communication-bound."""
    from ..training import mlp_layer_times, optimal_fsdp_degree

    c = get_chip(chip)
    fig, ax = figure_and_axes(ax)
    per_chip = np.geomspace(batch_range[0], batch_range[1], 60)
    comp, fsdp, tp, mixed = [], [], [], []
    for b in per_chip:
        B = b * n_chips
        comp.append(mlp_layer_times("fsdp", c, B, d_model, d_ff, fsdp=n_chips).compute)
        fsdp.append(mlp_layer_times("fsdp", c, B, d_model, d_ff, fsdp=n_chips, fsdp_axes=n_axes).comms)
        tp.append(mlp_layer_times("tensor", c, B, d_model, d_ff, tensor=n_chips, tp_axes=n_axes).comms)
        x_opt = optimal_fsdp_degree(B, n_chips, d_ff, fsdp_axes=2, tp_axes=1)
        X = int(min(n_chips, max(1, 2 ** round(np.log2(x_opt)))))
        mixed.append(
            mlp_layer_times(
                "fsdp+tensor", c, B, d_model, d_ff, fsdp=X, tensor=n_chips // X, fsdp_axes=2, tp_axes=1
            ).comms
        )
    ax.loglog(per_chip, comp, "k--", label="compute (both passes)")
    ax.loglog(per_chip, fsdp, color=_KIND_COLORS["fsdp"], label=f"FSDP over {n_axes} axes")
    ax.loglog(per_chip, tp, color=_KIND_COLORS["tensor"], label=f"tensor parallel, {n_chips}-way")
    ax.loglog(per_chip, mixed, color="#9467bd", label="FSDP + tensor, best split")
    ax.set_xlabel("tokens per chip (B / N)")
    ax.set_ylabel("seconds per layer")
    ax.set_title(f"{c.long_name}, {n_chips} chips, D={d_model:,}, F={d_ff:,}")
    ax.legend(fontsize=9)
    return fig


def pipeline_schedule_chart(stages: int = 4, microbatches: int = 8):
    """GPipe and 1F1B timelines side by side (forward 1 unit, backward 2): the same bubble, different memory."""
    from ..training.pipeline import bubble_fraction, peak_in_flight, simulate

    fig, axes = new_figure(ncols=1, nrows=2, width=7.5, height=4.6)
    for ax, name in zip(axes.ravel(), ("gpipe", "1f1b")):
        tasks = simulate(stages, microbatches, name)
        for t in tasks:
            ax.barh(
                t.stage,
                t.end - t.start,
                left=t.start,
                height=0.8,
                color="#1f77b4" if t.kind == "F" else "#ff7f0e",
                edgecolor="white",
                linewidth=0.6,
            )
            ax.text(
                (t.start + t.end) / 2, t.stage, str(t.microbatch), ha="center", va="center", fontsize=8, color="white"
            )
        ax.set_yticks(range(stages), [f"stage {s}" for s in range(stages)])
        ax.invert_yaxis()
        ax.grid(False)
        ax.set_title(
            f"{'GPipe' if name == 'gpipe' else '1F1B'}: bubble {bubble_fraction(tasks):.0%}, "
            f"stage 0 holds {peak_in_flight(tasks)} microbatches",
            fontsize=10,
        )
    axes.ravel()[-1].set_xlabel("time (forward = 1 unit, backward = 2; blue forward, orange backward)")
    fig.tight_layout()
    return fig


def planner_chart(result, top: int = 10):
    """The planner's ``top`` layouts: compute, communication and bubble time per step, and HBM per chip."""
    plans = list(result.ranked[:top])
    if not plans:
        raise ValueError("the plan result has no runnable layout to draw; print result.table() for the reasons")
    fig, axes = new_figure(ncols=2, width=9.0, height=0.35 * len(plans) + 1.6)
    ax1, ax2 = axes.ravel()
    labels = [f"{p.parallelism.label()} | {p.remat}" for p in plans]
    y = np.arange(len(plans))
    comp = np.array([p.step.compute for p in plans])
    comms = np.array([p.step.comms for p in plans])
    bubble = np.array([p.step.bubble for p in plans])
    ax1.barh(y - 0.2, comp, height=0.4, color=_KIND_COLORS["compute"], label="compute")
    ax1.barh(y - 0.2, bubble, left=comp, height=0.4, color=_KIND_COLORS["bubble"], label="bubble")
    ax1.barh(y + 0.2, comms, height=0.4, color=_KIND_COLORS["fsdp"], label="communication")
    ax1.set_yticks(y, labels, fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlabel("seconds per step")
    fig.legend(*ax1.get_legend_handles_labels(), loc="upper center", ncol=3, fontsize=8)
    hbm = plans[0].layout.slice.chip.hbm_bytes if plans[0].layout else None
    ax2.barh(y, [p.memory.total / 1e9 for p in plans], color="#2ca02c")
    if hbm:
        ax2.axvline(hbm / 1e9, color="k", ls="--", lw=1)
        ax2.text(hbm / 1e9, -0.6, " HBM", fontsize=8, va="bottom")
    ax2.set_yticks(y, [""] * len(plans))
    ax2.invert_yaxis()
    ax2.set_xlabel("GB per chip")
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return fig


def loss_curves_chart(curves: dict, ax=None):
    """Loss against step for each layout (``{label: losses}``); equal curves lie on top of each other."""
    if not curves:
        raise ValueError("curves must map at least one layout name to its losses")
    fig, ax = figure_and_axes(ax)
    styles = ["-", "--", ":", "-.", (0, (5, 1)), (0, (1, 1)), (0, (3, 1, 1, 1))]
    for i, (label, losses) in enumerate(curves.items()):
        ax.plot(np.arange(1, len(losses) + 1), losses, ls=styles[i % len(styles)], marker="o", ms=3, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss")
    ax.legend(fontsize=9)
    return fig


def memory_breakdown_chart(rows: dict, chip=None, ax=None):
    """Stacked bars of HBM per chip (parameters, gradients, optimizer, activations) for each labelled
    :class:`~tpu_notes.training.MemoryBreakdown`; a dashed line at ``chip``'s HBM when given."""
    if not rows:
        raise ValueError("rows must map at least one label to a MemoryBreakdown")
    fig, ax = figure_and_axes(ax, height=0.45 * len(rows) + 1.6)
    parts = ("params", "grads", "optimizer", "activations")
    colors = ("#1f77b4", "#aec7e8", "#ff7f0e", "#2ca02c")
    y = np.arange(len(rows))
    left = np.zeros(len(rows))
    for part, color in zip(parts, colors):
        vals = np.array([getattr(m, part) for m in rows.values()]) / 1e9
        ax.barh(y, vals, left=left, color=color, label=part)
        left += vals
    for yi, total in zip(y, left):
        ax.text(total, yi, " " + fmt(total * 1e9, "B"), va="center", fontsize=8)
    if chip is not None:
        ax.axvline(get_chip(chip).hbm_bytes / 1e9, color="k", ls="--", lw=1, label=f"{get_chip(chip).name} HBM")
    ax.set_yticks(y, list(rows), fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("GB per chip")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def reconciliation_chart(roofline_rows, calibrated_rows=None, ax=None):
    """Measured against predicted tokens/s per chip for published runs (``training.published.reconcile`` rows), on
    log axes: points on the diagonal are exact, points below it ran slower than predicted. With
    ``calibrated_rows`` (the same runs at the stated matmul efficiency) each run is drawn twice, joined by a line."""
    rows = list(roofline_rows)
    if not rows:
        raise ValueError("roofline_rows must hold at least one Reconciliation")
    fig, ax = figure_and_axes(ax, width=7.0, height=5.0)
    colors = {"tpu": "#1f77b4", "gpu": "#d62728"}
    pred = np.array([r.predicted_tokens_per_s for r in rows])
    meas = np.array([r.reported_tokens_per_s for r in rows])
    kinds = [r.run.system.chip.kind for r in rows]
    for kind in ("tpu", "gpu"):
        idx = [i for i, k in enumerate(kinds) if k == kind]
        if idx:
            ax.scatter(
                pred[idx],
                meas[idx],
                facecolors="none",
                edgecolors=colors[kind],
                s=40,
                label=f"{kind.upper()} runs, roofline prediction",
            )
    if calibrated_rows is not None:
        cal = np.array([r.predicted_tokens_per_s for r in calibrated_rows])
        ax.scatter(cal, meas, c=[colors[k] for k in kinds], s=40, label="at the stated matmul efficiency")
        for p0, p1, m in zip(pred, cal, meas):
            ax.plot([p0, p1], [m, m], color="#999999", lw=0.8)
    lo, hi = min(pred.min(), meas.min()) / 1.5, max(pred.max(), meas.max()) * 1.5
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted tokens/s per chip")
    ax.set_ylabel("measured tokens/s per chip")
    ax.legend(fontsize=8, loc="upper left")
    return fig
