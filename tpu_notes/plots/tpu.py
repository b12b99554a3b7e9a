"""Chapter 2 figures: the systolic array cycle by cycle, ICI hops on tori, the bandwidth ladder, MXU padding."""
from __future__ import annotations

import matplotlib

from .style import CHIP_COLORS, MIN_FONT_PT, new_figure, panel_grid


def systolic_steps(result, cycles=None, ncols: int = 3):
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
    fig, axes = panel_grid(len(chosen), ncols=ncols, panel_width=2.4, panel_height=2.5)
    s = result.array_size
    number_pt = min(11, max(MIN_FONT_PT, 30 / s))  # readable at the page's width, smaller only for big arrays
    n_rows_streamed = max(int(sn.row.max()) for sn in snaps) + 1
    cmap = ListedColormap(["#f2f2f2"] + [matplotlib.colormaps["tab10"](i % 10) for i in range(max(1, n_rows_streamed))])
    for ax, snap in zip(axes, chosen):
        ax.imshow(snap.row + 1, cmap=cmap, vmin=0, vmax=max(1, n_rows_streamed), origin="upper")
        for i in range(s):
            for j in range(s):
                if snap.row[i, j] >= 0:
                    ax.text(j, i, f"{snap.psum[i, j]:.0f}", ha="center", va="center", fontsize=number_pt)
        ax.set_title(f"cycle {snap.cycle}", fontsize=10)
        ax.set_xticks(range(s))
        ax.set_yticks(range(s))
        ax.tick_params(labelsize=MIN_FONT_PT, length=0)
        ax.grid(False)
    fig.suptitle("Weight-stationary array: colour = input row m,\nnumber = partial sum leaving the PE", fontsize=10)
    fig.tight_layout()
    return fig


def torus_hops(items, origin=None):
    """Heatmaps of ICI hops from chip 0 for each item: a :class:`tpu_notes.topology.Slice`, or a ``(shape,
    wraparound)`` pair for a mesh no generation builds (e.g. a 4×4 closed into a torus).

    A 2D item is one panel; a 3D item is shown as one panel per z-plane. Titles say which axes wrap."""
    import numpy as np

    from ..topology import Slice, hop_grid

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
    from ..topology import bandwidth_ladder

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
