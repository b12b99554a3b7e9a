"""Figures of Chapter 12 (the conclusion), drawn from :mod:`tpu_notes.cheatsheet`."""

from __future__ import annotations

import numpy as np

from .style import decade_ticks, figure_and_axes, legend_below


def critical_batches_chart(rows, ax=None):
    """The three critical batches of each TPU (HBM per chip, ICI per chip on one axis, DCN per slice) on a log scale:
    the book's thresholds side by side, from :func:`tpu_notes.cheatsheet.numbers_to_know` rows."""
    kinds = (
        ("critical batch (HBM, bf16)", "HBM: tokens per matmul"),
        ("data/FSDP critical batch per chip, one axis", "ICI: tokens per chip"),
        ("DCN critical batch per slice", "DCN: tokens per slice"),
    )
    by: dict = {}
    for r in rows:
        by.setdefault(r.subject, {})[r.name] = r.value
    chips = [c for c, d in by.items() if all(d.get(k) for k, _ in kinds)]
    if not chips:
        raise ValueError("rows hold no TPU with all three critical batches (use cheatsheet.numbers_to_know())")
    fig, ax = figure_and_axes(ax)
    x = np.arange(len(chips))
    width = 0.26
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c")
    for i, ((key, label), color) in enumerate(zip(kinds, colors)):
        values = [by[c][key] for c in chips]
        bars = ax.bar(x + (i - 1) * width, values, width, label=label, color=color)
        for b, v in zip(bars, values):
            ax.text(b.get_x() + b.get_width() / 2, v * 1.08, f"{v:,.0f}", ha="center", fontsize=8, rotation=90)
    ax.set_yscale("log")
    ax.set_ylim(50, 1e7)
    ax.set_xticks(x, chips)
    ax.set_ylabel("tokens (log scale)")
    ax.set_title("Below these batches, each resource waits on its bandwidth")
    legend_below(ax, fontsize=8, ncol=3)
    return decade_ticks(fig)
