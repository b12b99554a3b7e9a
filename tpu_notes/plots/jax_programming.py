"""Figures of Chapter 10 (programming TPUs in JAX)."""

from __future__ import annotations

import numpy as np

from ..hardware import get_chip
from .style import decade_ticks, figure_and_axes, legend_below


def collective_matmul_chart(
    B: int = 2048, D: int = 8192, n: int = 8, chip="v5e", dtype: str = "bf16", widths=None, ax=None
):
    """Predicted time of ``A[B, D_X] ·_D W[D, F_X]`` on ``n`` chips against the output width ``F``, relative to the
    matmul alone: AllGather then matmul, and the one-way and two-way rings of
    :func:`tpu_notes.jaxprog.collective_matmul_time`. A dotted line marks ``F/n = C / W_oneway``, where one hop
    takes as long as one partial matmul. Imports JAX (through :mod:`tpu_notes.jaxprog`) when called."""
    from ..jaxprog import collective_matmul_time  # local: jaxprog imports JAX; `from tpu_notes import plots` must not

    c = get_chip(chip)
    fs = np.unique((np.geomspace(1024, 262144, 33) // n * n).astype(int)) if widths is None else np.asarray(widths, int)
    curves = {"sequential": [], "one-way": [], "two-way": []}
    for f in fs:
        one = collective_matmul_time(B, D, int(f), n, c, dtype)
        two = collective_matmul_time(B, D, int(f), n, c, dtype, bidirectional=True)
        curves["sequential"].append(one.sequential_s / one.matmul_s)
        curves["one-way"].append(one.overlapped_s / one.matmul_s)
        curves["two-way"].append(two.overlapped_s / one.matmul_s)
    fig, ax = figure_and_axes(ax, width=7.0, height=3.8)
    style = {
        "sequential": ("AllGather, then matmul", "-", "#d62728"),
        "one-way": ("ring of ppermute, one way", "-", "#1f77b4"),
        "two-way": ("ring of ppermute, both ways", "--", "#2ca02c"),
    }
    for key, (label, ls, color) in style.items():
        ax.plot(fs, curves[key], ls, color=color, label=label)
    ax.axhline(1.0, color="#7f7f7f", lw=0.8)
    balance = n * c.peak_flops(dtype) / c.ici_bw_oneway
    ax.axvline(balance, color="#7f7f7f", ls=":", lw=1.0)
    ax.annotate(
        "hop = partial matmul",
        (balance, 1.0),
        xytext=(4, 4),
        textcoords="offset points",
        ha="left",
        va="bottom",
        fontsize=8,
        color="#555555",
    )
    ax.set_xscale("log", base=2)
    ax.set_xlabel("output width F (columns of W)")
    ax.set_ylabel("time / matmul alone")
    ax.set_yscale("log")
    ax.set_ylim(0.9, max(max(v) for v in curves.values()) * 1.1)
    ax.set_title(f"A[B, D_X] · W[D, F_X] on {n} × {c.name}: B={B}, D={D}, {dtype}")
    legend_below(ax)
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return decade_ticks(fig)


def ring_collective_chart(nbytes: float = 64 * 2**20, chip="v5e", max_n: int = 16, mark: int = 8, ax=None):
    """Chapter 3's time of a ReduceScatter and an AllReduce of a ``nbytes`` addend per chip on a ring of ``N`` chips
    (``N`` = 2 to ``max_n``), one way round against both ways round (``tpu_notes.collectives``), in µs; the points
    at ``N = mark`` are annotated with the ratio of the two."""
    from ..collectives import all_reduce_time, reduce_scatter_time
    from ..units import check_positive

    check_positive("nbytes", nbytes)
    max_n = check_positive("max_n", max_n, integer=True, maximum=4096)
    if max_n < 2:
        raise ValueError(f"max_n must be at least 2 (a ring of one chip sends nothing); got {max_n}")
    mark = check_positive("mark", mark, integer=True, maximum=max_n)
    if mark < 2:
        raise ValueError(f"mark must be a ring size from 2 to max_n ({max_n}); got {mark}")
    c = get_chip(chip)
    if not c.ici_bw_bidi:
        raise ValueError(f"chip must have ICI links (a TPU); {c.name} has none")
    ns = np.arange(2, max_n + 1)
    fig, ax = figure_and_axes(ax, width=7.0, height=3.8)
    for kind, fn, ls in (("ReduceScatter", reduce_scatter_time, "-"), ("AllReduce", all_reduce_time, "--")):
        for two, color in ((False, "#1f77b4"), (True, "#2ca02c")):
            t = np.array([fn(nbytes, int(n), c.ici_bw_bidi, bidirectional=two).total for n in ns]) * 1e6
            way = "both ways" if two else "one way"
            ax.plot(ns, t, ls, color=color, marker=".", label=f"{kind}, {way}")
            if two:
                one = fn(nbytes, mark, c.ici_bw_bidi, bidirectional=False).total * 1e6
                here = t[mark - 2]
                ax.annotate(
                    f"{one / here:.2f}x faster",
                    (mark, here),
                    xytext=(6, -12),
                    textcoords="offset points",
                    fontsize=8,
                    color="#555555",
                )
    ax.set_xlabel("chips in the ring, N")
    ax.set_ylabel("time (µs)")
    ax.set_title(f"{nbytes / 2**20:.0f} MiB per chip on a ring of {c.name}: one way vs both ways round")
    legend_below(ax, fontsize=8)
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return decade_ticks(fig)
