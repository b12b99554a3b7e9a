"""Figures of the book, drawn with matplotlib from the library's own numbers.

Every figure uses :func:`use_book_style` (explicit rcParams: named styles change between matplotlib versions)
and a fixed size, so committed PNGs stay small and comparable.
"""
from __future__ import annotations

import matplotlib

BOOK_RC = {
    "figure.figsize": (7.0, 4.2),
    "figure.dpi": 100,
    "savefig.dpi": 100,
    "font.size": 10,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
    "lines.linewidth": 1.8,
}

#: One colour per chip, so a chip looks the same in every figure.
CHIP_COLORS = {
    "v3": "#8c564b", "v4p": "#9467bd", "v5e": "#1f77b4", "v5p": "#ff7f0e", "v6e": "#2ca02c", "tpu7x": "#17becf",
    "a100": "#7f7f7f", "h100": "#d62728", "h200": "#e377c2", "b200": "#bcbd22",
}


def use_book_style() -> None:
    """Apply the book's rcParams to matplotlib (idempotent)."""
    matplotlib.rcParams.update(BOOK_RC)


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 7.0, height: float = 4.2):
    """``(fig, axes)`` in the book style with a fixed size in inches."""
    import matplotlib.pyplot as plt

    use_book_style()
    return plt.subplots(nrows, ncols, figsize=(width, height), squeeze=nrows * ncols == 1)


def figure_and_axes(ax=None, width: float = 7.0, height: float = 4.2):
    """``(fig, ax)``: a new book-style figure, or the figure that owns the given ``ax`` (to draw into a panel)."""
    if ax is None:
        return new_figure(width=width, height=height)
    use_book_style()
    return ax.figure, ax


def _batch_range(batch_range) -> tuple[int, int]:
    """Validate a ``(low, high)`` token-batch range and return it as integers."""
    lo, hi = (int(v) for v in batch_range)
    if not 1 <= lo < hi:
        raise ValueError(f"batch_range must be (low, high) with 1 <= low < high; got {batch_range!r}")
    return lo, hi


# ---------------------------------------------------------------------------------------- Chapter 1: rooflines
def _as_ops(ops) -> list[tuple[str, float]]:
    """``ops`` as (label, intensity) pairs, from a mapping or a sequence of pairs."""
    if ops is None:
        return []
    items = list(ops.items()) if hasattr(ops, "items") else list(ops)
    out = []
    for item in items:
        if len(item) != 2:
            raise ValueError(f"ops must map labels to intensities (FLOPs/byte); got entry {item!r}")
        label, intensity = item
        if not isinstance(label, str):
            raise TypeError(f"op labels must be strings; got {type(label).__name__}")
        from .units import check_positive

        out.append((label, check_positive(f"intensity of op {label!r}", intensity)))
    return out


def _roof(ax, intensities, peak: float, bandwidth: float, **kw):
    import numpy as np

    ax.plot(intensities, np.minimum(peak, intensities * bandwidth), **kw)


def roofline_chart(chips=("v5e", "v5p", "v6e", "h100"), ops=None, dtype: str = "bf16", bandwidth: str = "hbm",
                   intensity_range=(0.05, 3e4), ax=None, title: str | None = None):
    """Log-log rooflines (attainable FLOP/s against arithmetic intensity) of ``chips`` for ``dtype`` against
    ``bandwidth`` ("hbm", "ici", ...), with each chip's ridge point (its critical intensity) marked and the
    operations of ``ops`` ({label: FLOPs per byte}) drawn as vertical lines, with a dot where each meets each roof.

    Returns the matplotlib Figure.
    """
    import numpy as np

    from .hardware import get_chip

    chip_objs = [get_chip(c) for c in ([chips] if isinstance(chips, str) else chips)]
    if not chip_objs:
        raise ValueError("chips must name at least one chip")
    lo, hi = (float(v) for v in intensity_range)
    if not 0 < lo < hi:
        raise ValueError(f"intensity_range must be (low, high) with 0 < low < high; got {intensity_range!r}")
    op_list = _as_ops(ops)
    fig, ax = figure_and_axes(ax)
    use_book_style()
    x = np.geomspace(lo, hi, 400)
    for c in chip_objs:
        peak, bw = c.peak_flops(dtype), c.bandwidth(bandwidth)
        color = CHIP_COLORS.get(c.name, None)
        _roof(ax, x, peak, bw, color=color, label=f"{c.name}: ridge at {peak / bw:.0f} FLOPs/B")
        ax.plot([peak / bw], [peak], "o", color=color, ms=5)
        for _, intensity in op_list:
            ax.plot([intensity], [min(peak, intensity * bw)], ".", color=color, ms=6)
    ymin = min(min(c.peak_flops(dtype), lo * c.bandwidth(bandwidth)) for c in chip_objs) / 2
    ymax = max(c.peak_flops(dtype) for c in chip_objs) * 3
    for label, intensity in op_list:
        ax.axvline(intensity, color="0.45", ls=":", lw=1)
        ax.text(intensity * 1.1, ymax / 1.5, label, rotation=90, fontsize=8, color="0.2", va="top",
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(ymin, ymax)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel(f"attainable {dtype} FLOP/s")
    ax.set_title(title or f"Rooflines against {bandwidth.upper()} bandwidth")
    ax.legend(loc="lower right", fontsize=8)
    return fig


def matmul_intensity_chart(D: int = 8192, F: int = 8192, chips=("v5e", "v5p", "v6e", "h100"),
                           dtype: str = "bf16", w_dtype: str | None = None, batch_range=(1, 65536), ax=None):
    """Exact arithmetic intensity of ``x[B, D] @ w[D, F]`` against the token batch ``B`` (log-log), with each
    chip's critical intensity as a horizontal line: where the curve crosses a line is that chip's critical batch.

    Returns the matplotlib Figure.
    """
    import numpy as np

    from .hardware import get_chip
    from .roofline import matmul_intensity

    chip_objs = [get_chip(c) for c in ([chips] if isinstance(chips, str) else chips)]
    lo, hi = _batch_range(batch_range)
    fig, ax = figure_and_axes(ax)
    use_book_style()
    w = w_dtype or dtype
    bs = np.unique(np.geomspace(lo, hi, 200).astype(int))
    ax.plot(bs, [matmul_intensity(int(b), D, F, dtype, w, dtype) for b in bs], color="black",
            label=f"[B, {D}] x [{D}, {F}], {dtype} x {w}")
    for c in chip_objs:
        ax.axhline(c.critical_intensity(dtype), color=CHIP_COLORS.get(c.name), ls="--", lw=1.2,
                   label=f"{c.name} critical intensity ({c.critical_intensity(dtype):.0f})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("token batch B")
    ax.set_ylabel("FLOPs per byte")
    ax.set_title("Matmul intensity against the token batch")
    ax.legend(loc="lower right", fontsize=8)
    return fig


def matmul_on_roofline(B: int, D: int, F: int, chip="v5e", dtype: str = "bf16", w_dtype: str | None = None,
                       ax=None, width: float = 6.0, height: float = 3.6):
    """One chip's roofline with the matmul ``x[B, D] @ w[D, F]`` placed on it: its intensity, the FLOP/s it can
    attain (FLOPs over the perfect-overlap time), and its time bounds in the title. Used by the explorer widget.

    Returns the matplotlib Figure.
    """
    import numpy as np

    from .hardware import get_chip
    from .roofline import matmul_time
    from .units import fmt

    c = get_chip(chip)
    r = matmul_time(B, D, F, c, dtype=dtype, w_dtype=w_dtype)
    peak, bw = c.peak_flops(dtype), c.hbm_bw
    fig, ax = figure_and_axes(ax, width, height)
    use_book_style()
    ridge = peak / bw
    lo = min(0.1, r.intensity / 10)
    hi = max(1e4, r.intensity * 10)
    x = np.geomspace(lo, hi, 300)
    color = CHIP_COLORS.get(c.name, "tab:blue")
    _roof(ax, x, peak, bw, color=color, label=f"{c.name} {dtype} roofline")
    ax.axvline(ridge, color=color, ls=":", lw=1, label=f"critical intensity {ridge:.0f} FLOPs/B")
    ax.plot([r.intensity], [r.flops / r.lower], "o", color="black", ms=7,
            label=f"B={B}, D={D}, F={F}: {r.bound}-bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(f"T_math {fmt(r.t_math, 's')}, T_comms {fmt(r.t_comms, 's')}: "
                 f"between {fmt(r.lower, 's')} and {fmt(r.upper, 's')}", fontsize=9)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def measured_roofline(result, chip=None, ax=None):
    """Two panels from a :class:`tpu_notes.bench.RooflineMeasurement`: left, every measurement at its intensity
    and achieved FLOP/s under the fitted roofline (and ``chip``'s datasheet roofline, if given); right, the
    bandwidth probes' bytes/s against the bytes each call touches, with the fitted bandwidth and the size below
    which probes were left out of the fit (they run from cache).

    Returns the matplotlib Figure.
    """
    import numpy as np

    from .bench import RooflineMeasurement
    from .hardware import get_chip

    if not isinstance(result, RooflineMeasurement):
        raise TypeError(f"result must be a tpu_notes.bench.RooflineMeasurement; got {type(result).__name__}")
    fit = result.fit
    if ax is None:
        fig, axes = new_figure(ncols=2, width=10.0, height=4.0)
        left, right = axes[0]
    else:
        fig, left, right = ax[0].figure, ax[0], ax[1]
    use_book_style()
    every = result.measurements
    lo = min(m.intensity for m in every) / 3
    hi = max(max(m.intensity for m in every), fit.critical_intensity) * 3
    x = np.geomspace(lo, hi, 300)
    _roof(left, x, fit.peak_flops, fit.bandwidth, color="black",
          label=f"fitted: {fit.peak_flops:.3g} FLOP/s, {fit.bandwidth:.3g} B/s")
    if chip is not None:
        c = get_chip(chip)
        try:
            _roof(left, x, c.peak_flops(result.dtype), c.hbm_bw, color=CHIP_COLORS.get(c.name), ls="--",
                  label=f"{c.name} datasheet")
        except ValueError:
            pass
    mm = result.matmuls
    left.plot([m.intensity for m in mm], [m.flops_per_s for m in mm], "o", color="tab:blue",
              label="matmuls [B, D] x [D, F]")
    for m in mm:
        left.annotate(f"B={m.shape[0]}" if m.shape else m.label, (m.intensity, m.flops_per_s), fontsize=7,
                      xytext=(4, -10), textcoords="offset points")
    cp = result.copies
    probe_style = {"sum": ("^", "tab:green", "sum(x): reads"), "add": ("s", "tab:orange", "x + 1: reads + writes")}
    for op in sorted({m.op for m in cp}):
        marker, color, name = probe_style.get(op, ("s", "tab:gray", op or "probe"))
        ms = [m for m in cp if m.op == op]
        left.plot([m.intensity for m in ms], [m.flops_per_s for m in ms], marker, color=color, ms=5, ls="none",
                  label=f"{name} (all sizes)")
        right.plot([m.nbytes for m in ms], [m.bytes_per_s for m in ms], marker + "-", color=color, ms=5, label=name)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("arithmetic intensity (FLOPs per byte)")
    left.set_ylabel(f"achieved {result.dtype} FLOP/s")
    left.set_title(f"Measured on {result.device_kind} ({result.platform})", fontsize=10)
    left.legend(loc="lower right", fontsize=7)
    right.axhline(fit.bandwidth, color="black", lw=1, label="fitted bandwidth")
    if fit.min_copy_bytes > 0:
        right.axvline(fit.min_copy_bytes, color="0.4", ls=":", lw=1, label="fit uses probes right of this")
    right.set_xscale("log")
    right.set_xlabel("bytes touched per call")
    right.set_ylabel("bytes/s moved")
    right.set_yscale("log")
    right.set_title("Small arrays stay in cache", fontsize=10)
    right.legend(loc="best", fontsize=7)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------- Chapter 2: TPUs
def systolic_steps(result, cycles=None, ncols: int = 4):
    """Panels of a :func:`tpu_notes.systolic.simulate_matmul` run (recorded with ``record_cycles``): each panel is
    the array on one cycle, each PE coloured by the streamed row it works on and labelled with its running partial
    sum. Shows the skewed wavefront entering from the left and sums flowing down."""
    import numpy as np
    from matplotlib.colors import ListedColormap

    snaps = list(result.snapshots)
    if not snaps:
        raise ValueError("result has no snapshots; simulate with record_cycles > 0")
    chosen = [s for s in snaps if cycles is None or s.cycle in set(cycles)]
    if not chosen:
        raise ValueError(f"cycles must name recorded cycles 0..{len(snaps) - 1}; got {cycles!r}")
    nrows = -(-len(chosen) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=2.0 * ncols, height=2.1 * nrows)
    axes = np.array(axes, dtype=object).reshape(-1)
    s = result.array_size
    n_rows_streamed = max(int(sn.row.max()) for sn in snaps) + 1
    cmap = ListedColormap(["#f2f2f2"] + [matplotlib.colormaps["tab10"](i % 10) for i in range(max(1, n_rows_streamed))])
    for ax, snap in zip(axes.flat, chosen):
        ax.imshow(snap.row + 1, cmap=cmap, vmin=0, vmax=max(1, n_rows_streamed), origin="upper")
        for i in range(s):
            for j in range(s):
                if snap.row[i, j] >= 0:
                    ax.text(j, i, f"{snap.psum[i, j]:.0f}", ha="center", va="center", fontsize=7)
        ax.set_title(f"cycle {snap.cycle}", fontsize=9)
        ax.set_xticks(range(s))
        ax.set_yticks(range(s))
        ax.tick_params(labelsize=6, length=0)
        ax.grid(False)
    for ax in list(axes.flat)[len(chosen):]:
        ax.axis("off")
    fig.suptitle("Weight-stationary array: colour = input row m, number = partial sum leaving the PE", fontsize=9)
    fig.tight_layout()
    return fig


def torus_hops(items, origin=None):
    """Heatmaps of ICI hops from chip 0 for each item: a :class:`tpu_notes.topology.Slice`, or a ``(shape,
    wraparound)`` pair for a mesh no generation builds (e.g. a 4×4 closed into a torus).

    A 2D item is one panel; a 3D item is shown as one panel per z-plane. Titles say which axes wrap."""
    import numpy as np

    from .topology import Slice, hop_grid

    panels = []
    for item in items:
        if isinstance(item, Slice):
            shape, wrap, chip = item.shape, item.wraparound, item.chip.name + " "
        else:
            (shape, wrap), chip = item, ""
        grid = hop_grid(shape, tuple(wrap), origin)
        flags = "".join("w" if w else "-" for w in wrap)
        name = f"{chip}{'×'.join(map(str, shape))} [{flags}]"
        if grid.ndim == 2:
            panels.append((name, grid, int(grid.max())))
        else:
            for z in range(grid.shape[2]):
                panels.append((f"{name} z={z}", grid[:, :, z], int(grid.max())))
    ncols = min(4, len(panels))
    nrows = -(-len(panels) // ncols)
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=1.9 * ncols, height=2.0 * nrows)
    axes = np.array(axes, dtype=object).reshape(-1)
    vmax = max(d for _, _, d in panels)
    for ax, (name, grid, _) in zip(axes.flat, panels):
        ax.imshow(grid, cmap="viridis", vmin=0, vmax=vmax)
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=7, color="white" if v < 0.6 * vmax else "black")
        ax.set_title(name, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle("ICI hops from chip 0 ([w] = axis wraps, [-] = open)", fontsize=9)
    fig.tight_layout()
    return fig


def bandwidth_ladder_chart(chips=("v4p", "v5e", "v5p", "v6e")):
    """Grouped bars (log scale) of HBM, ICI (one link, one way), PCIe and DCN (per chip) bandwidth per chip."""
    from .topology import bandwidth_ladder

    kinds = ("HBM", "ICI", "PCIe", "DCN")
    fig, ax = new_figure(width=7.0, height=3.4)
    width = 0.8 / len(chips)
    for k, name in enumerate(chips):
        ladder = bandwidth_ladder(name)
        xs = [i + (k - (len(chips) - 1) / 2) * width for i, kind in enumerate(kinds) if kind in ladder]
        ax.bar(xs, [ladder[kind] for kind in kinds if kind in ladder], width, label=name,
               color=CHIP_COLORS.get(name))
    ax.set_xticks(range(len(kinds)))
    ax.set_xticklabels(["HBM", "ICI (1 link)", "PCIe", "DCN (per chip)"])
    ax.set_yscale("log")
    ax.set_ylabel("bytes/s")
    ax.set_title("Bandwidth per chip: HBM > ICI > PCIe > DCN", fontsize=10)
    ax.legend(fontsize=8, ncol=len(chips))
    fig.tight_layout()
    return fig


def padding_sweep(sizes, seconds, mxu_size: int = 128, title: str = ""):
    """Measured time of ``[N, N] @ [N, N]`` against N, with the multiples of ``mxu_size`` marked, and the FLOP/s
    achieved (``2·N³ / seconds``) on a second axis."""
    import numpy as np

    sizes = np.asarray(sizes, dtype=float)
    seconds = np.asarray(seconds, dtype=float)
    if sizes.ndim != 1 or sizes.shape != seconds.shape or not sizes.size:
        raise ValueError(f"sizes and seconds must be equally long, non-empty 1-D sequences; got shapes "
                         f"{sizes.shape} and {seconds.shape}")
    if not (seconds > 0).all() or not (sizes > 0).all():
        raise ValueError("sizes and seconds must all be positive")
    if isinstance(mxu_size, bool) or not isinstance(mxu_size, int) or mxu_size < 1:
        raise ValueError(f"mxu_size must be a positive integer (128 or 256 on TPUs); got {mxu_size!r}")
    fig, axes = new_figure(ncols=2, width=8.0, height=3.2)
    left, right = axes.flat
    left.plot(sizes, seconds * 1e6, "o-", ms=4)
    right.plot(sizes, 2 * sizes**3 / seconds, "o-", ms=4, color="tab:green")
    for ax in (left, right):
        for m in np.arange(np.ceil(sizes.min() / mxu_size), np.floor(sizes.max() / mxu_size) + 1) * mxu_size:
            ax.axvline(m, color="grey", ls=":", lw=1)
        ax.set_xlabel("N")
    left.set_ylabel("median time (µs)")
    right.set_ylabel("achieved FLOP/s")
    left.set_title(title or f"[N, N] @ [N, N] (dotted: multiples of {mxu_size})", fontsize=9)
    right.set_title("throughput", fontsize=9)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------------------------------ Chapter 3
def ring_all_gather_figure(n: int = 8, wraparound: bool = True, max_panels: int = 6):
    """A ring AllGather hop by hop: one panel per hop, devices around a circle, each showing which shards it holds
    (from ``tpu_notes.collectives.ring_all_gather_schedule``). Returns the figure."""
    import math

    import numpy as np

    from .collectives import ring_all_gather_schedule

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


# ---- Chapter 4: Transformer math ------------------------------------------------------------------------------

def attention_share_chart(models=("llama3-8b", "llama3-70b", "llama3-405b"), seq_lens=None, causal: bool = False):
    """Chapter 4: share of the forward FLOPs spent in dot-product attention against context length.

    ``causal=False`` counts the full score matrix (the book's convention for the crossovers); a dot marks where
    attention equals the projections (QKVO) of the layer.
    """
    import numpy as np

    from .transformer import as_config

    if seq_lens is None:
        seq_lens = np.unique(np.logspace(7, 20, 60, base=2).astype(int))
    fig, ax = new_figure()
    for name in models:
        m = as_config(name)
        share = [m.attention_fraction(int(T), causal=causal) for T in seq_lens]
        line, = ax.plot(seq_lens, share, label=f"{m.name or name} (D={m.d_model})")
        per_T = m.attention_flops(1, causal=causal) / m.n_layers
        t_eq = 2.0 * m.attention_params_per_layer() / per_T
        ax.plot([t_eq], [m.attention_fraction(max(1, int(round(t_eq))), causal=causal)], "o", color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("context length T (tokens)")
    ax.set_ylabel("attention share of forward FLOPs")
    ax.set_ylim(0, 1)
    kind = "causal, T/2 keys on average" if causal else "full score matrix"
    ax.set_title(f"Attention share of the forward FLOPs ({kind})")
    ax.plot([], [], "o", color="grey", label="attention = QKVO projections")
    ax.legend(loc="upper left")
    return fig


def param_breakdown_chart(models=("tiny-mha", "llama2-13b", "llama3-8b", "llama3-70b", "llama3-405b",
                                  "deepseek-v3")):
    """Chapter 4: each model's parameters split by role (embedding, attention, MLP, norms, unembedding)."""
    from .transformer import as_config

    roles = ("embedding", "attention", "mlp", "norms", "unembedding")
    colors = ("#9467bd", "#1f77b4", "#ff7f0e", "#7f7f7f", "#2ca02c")
    fig, ax = new_figure(height=0.45 * len(models) + 1.4)
    names = [as_config(m).name or str(m) for m in models]
    left = [0.0] * len(models)
    for role, color in zip(roles, colors):
        frac = []
        for m in models:
            b = as_config(m).param_breakdown()
            frac.append(getattr(b, role) / b.total)
        ax.barh(names, frac, left=left, color=color, label=role)
        left = [a + f for a, f in zip(left, frac)]
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("fraction of parameters")
    ax.legend(ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8)
    ax.grid(axis="y", visible=False)
    return fig


def kv_cache_chart(models=("llama2-13b", "llama3-70b", "deepseek-v3"), seq_lens=None, batch: int = 1,
                   dtype: str = "bf16", hbm_bytes: float | None = None):
    """Chapter 4: KV-cache bytes of ``batch`` sequences against context length (MHA vs GQA vs MLA).

    ``hbm_bytes`` draws a horizontal line (e.g. one chip's HBM) for scale.
    """
    import numpy as np

    from .transformer import as_config

    if seq_lens is None:
        seq_lens = np.unique(np.logspace(9, 17, 40, base=2).astype(int))
    fig, ax = new_figure()
    for name in models:
        m = as_config(name)
        kind = "MLA" if m.is_mla else ("MHA" if m.n_kv_heads == m.n_heads else f"GQA, K={m.n_kv_heads}")
        ax.plot(seq_lens, [m.kv_cache_bytes(batch, int(T), dtype) for T in seq_lens], label=f"{m.name} ({kind})")
    if hbm_bytes:
        ax.axhline(hbm_bytes, color="grey", ls=":", lw=1)
        ax.text(seq_lens[0], hbm_bytes * 1.15, "one chip's HBM", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel(f"KV cache bytes ({dtype}, batch {batch})")
    ax.set_title("KV cache per sequence: grouped and latent attention shrink it")
    ax.legend()
    return fig


def matmul_flops_vs_batch(dims=(4096, 1024), chip="v5e", dtype: str = "bf16", w_dtype: str | None = None,
                          batch_range=(1, 1024), ax=None):
    """Chapter 1: the roofline as a function of the token batch. For each ``D`` in ``dims`` (square weights
    ``D = F``), the FLOP/s that ``x[B, D] @ w[D, D]`` can attain on ``chip`` (its FLOPs over the perfect-overlap
    time, exact byte count), against ``B``; ``dtype`` is the activation and compute dtype, ``w_dtype`` the
    weights'. A dot marks the smallest compute-bound ``B`` of each curve; the dashed line is the peak.

    Returns the matplotlib Figure.
    """
    import numpy as np

    from .hardware import get_chip
    from .roofline import matmul_time

    c = get_chip(chip)
    dims = [dims] if isinstance(dims, int) else list(dims)
    if not dims:
        raise ValueError("dims must list at least one model dimension D")
    lo, hi = _batch_range(batch_range)
    fig, ax = figure_and_axes(ax)
    use_book_style()
    peak = c.peak_flops(dtype)
    bs = np.arange(lo, hi + 1)
    for i, D in enumerate(dims):
        times = [matmul_time(int(b), D, D, c, dtype=dtype, w_dtype=w_dtype) for b in bs]
        attained = np.array([t.flops / t.lower for t in times])
        bound = np.array([t.bound == "compute" for t in times])
        first = int(np.argmax(bound)) if bound.any() else None
        where = f": compute-bound from B = {bs[first]}" if first is not None else ": bandwidth-bound throughout"
        ax.plot(bs, attained, color=f"C{i}", label=f"D = F = {D}{where}")
        if first is not None:
            ax.plot([bs[first]], [attained[first]], "o", color=f"C{i}", ms=5)
    ax.axhline(peak, color="0.3", ls="--", lw=1, label=f"{c.name} {dtype} peak")
    ax.set_xlim(lo, hi)
    ax.set_ylim(0, peak * 1.1)
    ax.set_xlabel("token batch B")
    ax.set_ylabel(f"attainable {dtype} FLOP/s")
    ax.set_title(f"[B, D] x [D, D] on {c.name}: {dtype} activations, {w_dtype or dtype} weights", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    return fig


def remat_tradeoff_chart(models=("llama3-8b", "llama3-70b"), seq_len: int = 8192, dtype: str = "bf16"):
    """Chapter 4: what each remat policy keeps and what it costs. Left: activation bytes kept per token (all
    layers); right: the FLOPs recomputation adds, as a fraction of a training step. One bar per policy and model.
    """
    import numpy as np

    from .transformer import REMAT_POLICIES, as_config

    configs = [as_config(m) for m in models]
    if not configs:
        raise ValueError("models must name at least one model")
    fig, axes = new_figure(ncols=2, width=8.0, height=3.6)
    left, right = axes[0]
    width = 0.8 / len(configs)
    x = np.arange(len(REMAT_POLICIES))
    for i, m in enumerate(configs):
        kept = [m.checkpoint_bytes(1, p, dtype) for p in REMAT_POLICIES]
        train = m.flops_per_token(seq_len, training=True)
        extra = [m.recompute_flops(seq_len, p) / train for p in REMAT_POLICIES]
        left.bar(x + i * width, kept, width, color=f"C{i}", label=m.name)
        right.bar(x + i * width, extra, width, color=f"C{i}", label=m.name)
    for ax in (left, right):
        ax.set_xticks(x + width * (len(configs) - 1) / 2, [p.replace("_", " ") for p in REMAT_POLICIES], fontsize=8)
    left.set_yscale("log")
    left.set_ylabel(f"activation bytes kept per token ({dtype})")
    right.set_ylabel(f"extra FLOPs / training step (T = {seq_len})")
    left.legend(fontsize=8)
    fig.suptitle("Remat trades activation memory for recomputation", fontsize=11)
    fig.tight_layout()
    return fig
