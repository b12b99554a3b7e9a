"""Chapter 2 figures: the systolic array cycle by cycle, ICI hops on tori, the bandwidth ladder, MXU padding."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

from ..hardware import VREG_BYTES, get_chip
from ..topology import Slice, bandwidth_ladder, hop_grid
from ..units import check_positive, fmt
from .style import CHIP_COLORS, MIN_FONT_PT, decade_ticks, legend_below, new_figure, panel_grid


def systolic_steps(result, cycles=None, ncols: int = 3):
    """Panels of a :func:`tpu_notes.systolic.simulate_matmul` run (recorded with ``record_cycles``): each panel is
    the array on one cycle, each PE coloured by the streamed row it works on and labelled with its running partial
    sum. Shows the skewed wavefront entering from the left and sums flowing down."""
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
    return decade_ticks(fig)


def torus_hops(items, origin=None):
    """Heatmaps of ICI hops from chip 0 for each item: a :class:`tpu_notes.topology.Slice`, or a ``(shape,
    wraparound)`` pair for a mesh no generation builds (e.g. a 4×4 closed into a torus).

    A 2D item is one panel; a 3D item is shown as one panel per z-plane. Titles say which axes wrap."""
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
    fig, axes = new_figure(ncols=ncols, nrows=nrows, width=min(7.2, 1.8 * ncols), height=2.0 * nrows)
    axes = np.array(axes, dtype=object).reshape(-1)
    vmax = max(d for _, _, d in panels)
    for ax, (name, grid, _) in zip(axes.flat, panels):
        ax.imshow(grid, cmap="viridis", vmin=0, vmax=vmax)
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, str(v), ha="center", va="center", fontsize=8, color="white" if v < 0.6 * vmax else "black")
        ax.set_title(name, fontsize=8)
        ax.set_xticks([])
        ax.set_yticks([])
        ax.grid(False)
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    fig.suptitle("ICI hops from chip 0 ([w] = axis wraps, [-] = open)", fontsize=9)
    fig.tight_layout()
    return decade_ticks(fig)


def bandwidth_ladder_chart(chips=("v4p", "v5e", "v5p", "v6e")):
    """Grouped bars (log scale) of HBM, ICI (one link, one way), PCIe and DCN (per chip) bandwidth per chip."""
    kinds = ("HBM", "ICI", "PCIe", "DCN")
    fig, ax = new_figure(width=7.0, height=3.4)
    width = 0.8 / len(chips)
    for k, name in enumerate(chips):
        ladder = bandwidth_ladder(name)
        xs = [i + (k - (len(chips) - 1) / 2) * width for i, kind in enumerate(kinds) if kind in ladder]
        ax.bar(xs, [ladder[kind] for kind in kinds if kind in ladder], width, label=name, color=CHIP_COLORS.get(name))
    ax.set_xticks(range(len(kinds)))
    ax.set_xticklabels(["HBM", "ICI (1 link)", "PCIe", "DCN (per chip)"])
    ax.set_yscale("log")
    ax.set_ylabel("bytes/s")
    ax.set_title("Bandwidth per chip: HBM > ICI > PCIe > DCN", fontsize=10)
    legend_below(ax, fontsize=8, ncol=len(chips))
    fig.tight_layout()
    return decade_ticks(fig)


def padding_sweep(sizes, seconds, mxu_size: int = 128, title: str = ""):
    """Measured time of ``[N, N] @ [N, N]`` against N, with the multiples of ``mxu_size`` marked, and the FLOP/s
    achieved (``2·N³ / seconds``) on a second axis."""
    sizes = np.asarray(sizes, dtype=float)
    seconds = np.asarray(seconds, dtype=float)
    if sizes.ndim != 1 or sizes.shape != seconds.shape or not sizes.size:
        raise ValueError(
            f"sizes and seconds must be equally long, non-empty 1-D sequences; got shapes "
            f"{sizes.shape} and {seconds.shape}"
        )
    if not (seconds > 0).all() or not (sizes > 0).all():
        raise ValueError("sizes and seconds must all be positive")
    if isinstance(mxu_size, bool) or not isinstance(mxu_size, int) or mxu_size < 1:
        raise ValueError(f"mxu_size must be a positive integer (128 or 256 on TPUs); got {mxu_size!r}")
    fig, axes = new_figure(ncols=2, width=7.2, height=3.2)
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
    return decade_ticks(fig)


def tpu_chip_diagram(chip="v5p"):
    """Block diagram of one TPU chip with its parts and every link labelled with its bandwidth (Chapter 2).

    Inside the chip: each TensorCore's MXUs, VPU (8 × 128 lanes), vector registers, VMEM and scalar unit, and the
    HBM beside them; outside it: the ICI ports to neighbouring chips, PCIe to the host CPU and the host's share of
    the data-centre network. Every number is read from :mod:`tpu_notes.hardware` (``?`` where the table has none).
    """
    c = get_chip(chip)
    if c.kind != "tpu":
        raise ValueError(f"chip must be a TPU (the diagram draws TensorCores and ICI); got {c.name!r}")

    def num(value, unit):
        return "?" if value is None else fmt(value, unit)

    fig, ax = new_figure(width=7.2, height=4.6)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 64)
    ax.axis("off")
    fs = 8.5

    def box(x, y, w, h, text, color, size=fs, weight="normal"):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.4", fc=color, ec="#444", lw=1))
        ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight)

    def arrow(p, q, text, where=(0, 0), rot=0, both=True):
        ax.add_patch(
            FancyArrowPatch(p, q, arrowstyle="<|-|>" if both else "-|>", mutation_scale=10, lw=1.4, color="#333")
        )
        mx, my = (p[0] + q[0]) / 2 + where[0], (p[1] + q[1]) / 2 + where[1]
        ax.text(
            mx, my, text, ha="center", va="center", fontsize=fs, rotation=rot, bbox=dict(fc="white", ec="none", pad=0.5)
        )

    # the chip outline
    ax.add_patch(FancyBboxPatch((4, 12), 64, 46, boxstyle="round,pad=0.6", fc="#fafafa", ec="#222", lw=1.5))
    ax.text(6, 55.5, f"{c.long_name} chip", fontsize=10, weight="bold", va="center")
    cores = c.cores_per_chip or 1
    core_label = f"{cores} TensorCore{'s' if cores > 1 else ''}" + (" (shown: one)" if cores > 1 else "")
    # one TensorCore
    ax.add_patch(FancyBboxPatch((7, 15), 38, 37, boxstyle="round,pad=0.4", fc="#eef3fb", ec="#557", lw=1))
    ax.text(26, 50, core_label, ha="center", fontsize=fs, weight="bold")
    mxu = f"{c.mxu_size}×{c.mxu_size}" if c.mxu_size else "?"
    box(9, 39, 16, 8, f"MXU ×{c.mxus_per_core or '?'}\n{mxu} systolic", "#cfe0f7")
    box(27, 39, 16, 8, "VPU\n8 × 128 lanes", "#d8f0d8")
    vregs = "count not published" if c.vregs_per_core is None else f"{c.vregs_per_core} × {VREG_BYTES // 1024} KiB"
    box(9, 29.5, 34, 5, f"vector registers (VREGs): {vregs}", "#e9f7e9", size=8)
    vmem = "?" if c.vmem_bytes is None else f"{c.vmem_bytes / 2**20:.0f} MiB"
    box(9, 18.5, 22, 6.5, f"VMEM {vmem}\n(on-chip scratchpad)", "#fdf1d6", size=8)
    box(33.5, 18.5, 9.5, 6.5, "scalar unit\n+ SMEM", "#eeeeee", size=8)
    for x in (17, 35):
        arrow((x, 38.6), (x, 34.9), "")
    arrow((20, 29.1), (20, 25.4), "")
    if c.vmem_bw is not None:
        ax.text(21.5, 27.3, f"{num(c.vmem_bw, 'B/s')}", fontsize=8, ha="left", va="center")
    # HBM
    box(52, 22, 13, 22, f"HBM\n{num(c.hbm_bytes, 'B')}", "#fbe0dc", weight="bold")
    arrow((45.5, 33), (51.6, 33), f"{num(c.hbm_bw, 'B/s')}", where=(0, 3.2))
    # ICI ports
    ports = 2 * (c.ici_dims or 0)
    arrow((68.8, 44), (80.6, 44), "")
    ax.text(
        80, 56, f"ICI: {ports} links,\n{num(c.ici_bw_oneway, 'B/s')} each way", fontsize=fs, ha="center", va="center"
    )
    box(81, 40, 17, 8, "neighbour\nchips", "#f2f2f2")
    # host, PCIe, DCN
    box(81, 20, 17, 9, "host CPU\n+ DRAM", "#f2f2f2")
    arrow((68.8, 24.5), (80.6, 24.5), f"PCIe\n{num(c.pcie_bw, 'B/s')}", where=(0, 4.5))
    box(81, 1, 17, 7, "other hosts", "#f2f2f2")
    arrow((89.5, 19.6), (89.5, 8.6), f"DCN {num(c.dcn_bw, 'B/s')}\nper chip", where=(-9.5, 0))
    ax.text(
        4,
        6.5,
        "Bandwidths per chip from tpu_notes.hardware;\nHBM and links decimal (1 GB = 1e9 B), VMEM binary (MiB).",
        fontsize=8,
        va="center",
    )
    fig.tight_layout()
    return decade_ticks(fig)


def slice_hops_chart(chip="v5e", shape=(8, 16), nbytes: float = 2.0**26):
    """Two panels for one TPU slice (Chapter 2's explorer and its static figure): the ICI hops from chip 0 to
    every chip (the z = 0 plane of a 3D slice), and the time to move ``nbytes`` bytes three ways: to the farthest
    chip point to point, and AllGathered over each axis and over all axes, split into bandwidth and latency."""
    sl = chip if isinstance(chip, Slice) else Slice(chip, shape)
    nbytes = check_positive("nbytes", nbytes)
    grid = sl.hop_grid()
    plane = grid if grid.ndim == 2 else grid[:, :, 0]
    fig, axes = new_figure(ncols=2, width=7.2, height=3.3)
    left, right = axes.flat
    vmax = max(1, int(grid.max()))
    left.imshow(plane, cmap="viridis", vmin=0, vmax=vmax, aspect="auto")
    if plane.size <= 128:
        for (i, j), v in np.ndenumerate(plane):
            left.text(
                j,
                i,
                str(v),
                ha="center",
                va="center",
                fontsize=MIN_FONT_PT,
                color="white" if v < 0.6 * vmax else "black",
            )
    wraps = "".join("w" if w else "-" for w in sl.wraparound)
    where = "" if grid.ndim == 2 else " (z = 0 plane)"
    left.set_title(
        f"{sl.chip.name} {'×'.join(map(str, sl.shape))} [{wraps}], diameter {sl.diameter}\nhops from chip 0{where}",
        fontsize=9,
    )
    left.set_xticks([])
    left.set_yticks([])
    left.grid(False)
    far = tuple(int(i) for i in np.unravel_index(int(np.argmax(grid)), grid.shape))
    rows = [(f"to farthest chip {far}", sl.transfer_time(nbytes, (0,) * len(sl.shape), far))]
    names = "xyz"[: len(sl.shape)]
    for i, a in enumerate(names):
        rows.append(
            (
                f"AllGather over {a} ({sl.shape[i]}, {'ring' if sl.wraparound[i] else 'line'})",
                sl.collective_time("all_gather", nbytes, a),
            )
        )
    rows.append((f"AllGather over {names}", sl.collective_time("all_gather", nbytes, None)))
    labels = [r[0] for r in rows]
    bw = np.array([r[1].bandwidth_time for r in rows])
    lat = np.array([r[1].latency_time for r in rows])
    y = np.arange(len(rows))[::-1]
    right.barh(y, bw * 1e3, color="tab:blue", label="bandwidth")
    right.barh(y, lat * 1e3, left=bw * 1e3, color="tab:orange", label="hops × 1 µs")
    right.set_yticks(y)
    right.set_yticklabels(labels, fontsize=MIN_FONT_PT)
    right.set_xlabel(f"ms to move {fmt(nbytes, 'B')}")
    legend_below(right, fontsize=MIN_FONT_PT)
    right.set_title("time: bandwidth + latency", fontsize=9)
    right.tick_params(axis="x", labelsize=MIN_FONT_PT)
    fig.tight_layout()
    return decade_ticks(fig)
