"""Chapter 1 figures: rooflines, matmul intensity against the batch, and the measured roofline."""

from __future__ import annotations

import numpy as np

from ..bench import RooflineMeasurement
from ..hardware import get_chip
from ..roofline import matmul_intensity, matmul_time
from ..systolic import vpu_flops
from ..units import check_positive, fmt
from .style import (
    CHIP_COLORS,
    PAGE_WIDTH_IN,
    _batch_range,
    decade_ticks,
    figure_and_axes,
    legend_below,
    new_figure,
    use_book_style,
)


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
        out.append((label, check_positive(f"intensity of op {label!r}", intensity)))
    return out


def _vpu_peak(chip) -> float | None:
    """FLOP/s of a TPU's vector units (VPU), all TensorCores of the chip, from
    :func:`tpu_notes.systolic.vpu_flops`; None for a GPU or where the table lacks the VPU's ALUs per lane
    (e.g. v5e, v6e). Elementwise ops and reductions (a dot product) run there, not on the MXUs."""
    c = get_chip(chip)
    if c.kind != "tpu" or not c.cores_per_chip:
        return None
    try:
        return vpu_flops(c) * c.cores_per_chip
    except ValueError:
        return None


def _roof(ax, intensities, peak: float, bandwidth: float, **kw):
    ax.plot(intensities, np.minimum(peak, intensities * bandwidth), **kw)


def _as_units(units, op_list) -> dict:
    """``units`` ({op label: "MXU" | "VPU"}) as a dict, each label one of ``op_list``'s."""
    units = dict(units or {})
    for label, unit in units.items():
        if label not in dict(op_list):
            raise ValueError(f"units names an op that is not in ops: {label!r}; ops are {[k for k, _ in op_list]}")
        if unit not in ("MXU", "VPU"):
            raise ValueError(f"units must map op labels to 'MXU' or 'VPU'; got {unit!r} for {label!r}")
    return units


def _mark_ops(ax, op_list, units: dict, y_text: float) -> None:
    """A dotted vertical line at each op's intensity, labelled (with its unit, if named) from ``y_text`` down."""
    for label, intensity in op_list:
        ax.axvline(intensity, color="0.45", ls=":", lw=1)
        shown = f"{label} ({units[label]})" if label in units else label
        ax.text(
            intensity * 1.1,
            y_text,
            shown,
            rotation=90,
            fontsize=8,
            color="0.2",
            va="top",
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1},
        )


def roofline_chart(
    chips=("v5e", "v5p", "v6e", "h100"),
    ops=None,
    dtype: str = "bf16",
    bandwidth: str = "hbm",
    intensity_range=(0.05, 3e4),
    ax=None,
    title: str | None = None,
    units=None,
    vpu: bool = True,
):
    """Log-log rooflines (attainable FLOP/s against arithmetic intensity) of ``chips`` for ``dtype`` against
    ``bandwidth`` ("hbm", "ici", ...), with each chip's ridge point (its critical intensity) marked and the
    operations of ``ops`` ({label: FLOPs per byte}) drawn as vertical lines, with a dot where each meets each roof.

    ``vpu=True`` adds, dashed, the lower roof of the vector units (``_vpu_peak``) of each TPU whose VPU is in the
    table: matmuls run on the MXUs, elementwise ops and reductions on the VPU. ``units`` ({label: "MXU" | "VPU"})
    names the unit each op runs on in its label, and puts a VPU op's dots on the VPU roof where there is one.

    Returns the matplotlib Figure.
    """
    chip_objs = [get_chip(c) for c in ([chips] if isinstance(chips, str) else chips)]
    if not chip_objs:
        raise ValueError("chips must name at least one chip")
    lo, hi = (float(v) for v in intensity_range)
    if not 0 < lo < hi:
        raise ValueError(f"intensity_range must be (low, high) with 0 < low < high; got {intensity_range!r}")
    op_list = _as_ops(ops)
    units = _as_units(units, op_list)
    fig, ax = figure_and_axes(ax)
    use_book_style()
    x = np.geomspace(lo, hi, 400)
    for c in chip_objs:
        peak, bw = c.peak_flops(dtype), c.bandwidth(bandwidth)
        color = CHIP_COLORS.get(c.name, None)
        _roof(ax, x, peak, bw, color=color, label=f"{c.name}: ridge at {peak / bw:.0f} FLOPs/B")
        ax.plot([peak / bw], [peak], "o", color=color, ms=5)
        vector = _vpu_peak(c) if vpu else None
        if vector is not None:
            _roof(
                ax,
                x,
                vector,
                bw,
                color=color,
                ls="--",
                lw=1.2,
                label=f"{c.name} VPU: ridge at {vector / bw:.1f} FLOPs/B",
            )
        for label, intensity in op_list:
            roof = vector if (units.get(label) == "VPU" and vector is not None) else peak
            ax.plot([intensity], [min(roof, intensity * bw)], ".", color=color, ms=6)
    ymin = min(min(c.peak_flops(dtype), lo * c.bandwidth(bandwidth)) for c in chip_objs) / 2
    ymax = max(c.peak_flops(dtype) for c in chip_objs) * 3
    _mark_ops(ax, op_list, units, ymax / 1.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(ymin, ymax)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel(f"attainable {dtype} FLOP/s")
    ax.set_title(title or f"Rooflines against {bandwidth.upper()} bandwidth")
    legend_below(ax, fontsize=8)
    return decade_ticks(fig)


def matmul_intensity_chart(
    D: int = 8192,
    F: int = 8192,
    chips=("v5e", "v5p", "v6e", "h100"),
    dtype: str = "bf16",
    w_dtype: str | None = None,
    batch_range=(1, 65536),
    ax=None,
):
    """Exact arithmetic intensity of ``x[B, D] @ w[D, F]`` against the token batch ``B`` (log-log), with each
    chip's critical intensity as a horizontal line: where the curve crosses a line is that chip's critical batch.

    Returns the matplotlib Figure.
    """
    chip_objs = [get_chip(c) for c in ([chips] if isinstance(chips, str) else chips)]
    lo, hi = _batch_range(batch_range)
    fig, ax = figure_and_axes(ax)
    use_book_style()
    w = w_dtype or dtype
    bs = np.unique(np.geomspace(lo, hi, 200).astype(int))
    ax.plot(
        bs,
        [matmul_intensity(int(b), D, F, dtype, w, dtype) for b in bs],
        color="black",
        label=f"[B, {D}] x [{D}, {F}], {dtype} x {w}",
    )
    for c in chip_objs:
        ax.axhline(
            c.critical_intensity(dtype),
            color=CHIP_COLORS.get(c.name),
            ls="--",
            lw=1.2,
            label=f"{c.name} critical intensity ({c.critical_intensity(dtype):.0f})",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("token batch B")
    ax.set_ylabel("FLOPs per byte")
    ax.set_title("Matmul intensity against the token batch")
    legend_below(ax, fontsize=8)
    return decade_ticks(fig)


def matmul_on_roofline(
    B: int,
    D: int,
    F: int,
    chip="v5e",
    dtype: str = "bf16",
    w_dtype: str | None = None,
    ax=None,
    width: float = 6.0,
    height: float = 3.6,
):
    """One chip's roofline with the matmul ``x[B, D] @ w[D, F]`` placed on it: its intensity, the FLOP/s it can
    attain (FLOPs over the perfect-overlap time), and its time bounds in the title. Used by the explorer widget.

    Returns the matplotlib Figure.
    """
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
    ax.plot([r.intensity], [r.flops / r.lower], "o", color="black", ms=7, label=f"B={B}, D={D}, F={F}: {r.bound}-bound")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(
        f"T_math {fmt(r.t_math, 's')}, T_comms {fmt(r.t_comms, 's')}: "
        f"between {fmt(r.lower, 's')} and {fmt(r.upper, 's')}",
        fontsize=9,
    )
    legend_below(ax, fontsize=8)
    return decade_ticks(fig)


def measured_roofline(result, chip=None, ax=None):
    """Two panels from a :class:`tpu_notes.bench.RooflineMeasurement`: left, every measurement at its intensity
    and achieved FLOP/s under the fitted roofline (and ``chip``'s datasheet roofline, if given); right, the
    bandwidth probes' bytes/s against the bytes each call touches, with the fitted bandwidth and the size below
    which probes were left out of the fit (they run from cache).

    Returns the matplotlib Figure.
    """
    if not isinstance(result, RooflineMeasurement):
        raise TypeError(f"result must be a tpu_notes.bench.RooflineMeasurement; got {type(result).__name__}")
    if ax is None:
        fig, axes = new_figure(nrows=2, width=PAGE_WIDTH_IN, height=7.6)  # stacked: readable at page width
        left, right = axes[0][0], axes[1][0]
    else:
        fig, left, right = ax[0].figure, ax[0], ax[1]
    use_book_style()
    _measured_rooflines_panel(left, result, chip)
    _cache_panel(right, result)
    fig.tight_layout()
    return decade_ticks(fig)


#: How :func:`measured_roofline` draws each kind of bandwidth probe: (marker, colour, legend name).
_PROBE_STYLE = {"sum": ("^", "tab:green", "sum(x): reads"), "add": ("s", "tab:orange", "x + 1: reads + writes")}


def _probe_groups(result):
    """The bandwidth probes of ``result`` by op, sorted, each with its (marker, colour, name)."""
    cp = result.copies
    for op in sorted({m.op for m in cp}):
        yield _PROBE_STYLE.get(op, ("s", "tab:gray", op or "probe")), [m for m in cp if m.op == op]


def _measured_rooflines_panel(left, result, chip) -> None:
    """The left panel of :func:`measured_roofline`: the fitted (and datasheet) roofline under every measurement."""
    fit = result.fit
    every = result.measurements
    lo = min(m.intensity for m in every) / 3
    hi = max(max(m.intensity for m in every), fit.critical_intensity) * 3
    x = np.geomspace(lo, hi, 300)
    _roof(
        left,
        x,
        fit.peak_flops,
        fit.bandwidth,
        color="black",
        label=f"fitted: {fit.peak_flops:.3g} FLOP/s, {fit.bandwidth:.3g} B/s",
    )
    if chip is not None:
        c = get_chip(chip)
        try:
            _roof(
                left,
                x,
                c.peak_flops(result.dtype),
                c.hbm_bw,
                color=CHIP_COLORS.get(c.name),
                ls="--",
                label=f"{c.name} datasheet",
            )
        except ValueError:
            pass
    mm = result.matmuls
    left.plot(
        [m.intensity for m in mm], [m.flops_per_s for m in mm], "o", color="tab:blue", label="matmuls [B, D] x [D, F]"
    )
    for m in mm:
        left.annotate(
            f"B={m.shape[0]}" if m.shape else m.label,
            (m.intensity, m.flops_per_s),
            fontsize=8,
            xytext=(4, -10),
            textcoords="offset points",
        )
    for (marker, color, name), ms in _probe_groups(result):
        left.plot(
            [m.intensity for m in ms],
            [m.flops_per_s for m in ms],
            marker,
            color=color,
            ms=5,
            ls="none",
            label=f"{name} (all sizes)",
        )
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("arithmetic intensity (FLOPs per byte)")
    left.set_ylabel(f"achieved {result.dtype} FLOP/s")
    left.set_title(f"Measured on {result.device_kind} ({result.platform})", fontsize=10)
    legend_below(left, fontsize=8)


def _cache_panel(right, result) -> None:
    """The right panel of :func:`measured_roofline`: the probes' bytes/s against the bytes each call touches."""
    fit = result.fit
    for (marker, color, name), ms in _probe_groups(result):
        right.plot([m.nbytes for m in ms], [m.bytes_per_s for m in ms], marker + "-", color=color, ms=5, label=name)
    right.axhline(fit.bandwidth, color="black", lw=1, label="fitted bandwidth (median)")
    if fit.min_copy_bytes > 0:
        right.axvline(fit.min_copy_bytes, color="0.4", ls=":", lw=1, label="fit uses probes right of this")
    cache = getattr(result, "cache_bytes", None)
    if cache:
        right.axvspan(
            min(m.nbytes for m in result.copies) / 1.5,
            cache,
            color="0.85",
            alpha=0.5,
            lw=0,
            label=f"fits in the {cache / 2**20:.0f} MiB last-level cache",
        )
    spread = getattr(fit, "bandwidth_spread", ())
    if spread:
        right.axhspan(*spread, color="black", alpha=0.08, lw=0, label="spread of the fitted probes")
    right.set_xscale("log")
    right.set_xlabel("bytes touched per call")
    right.set_ylabel("bytes/s moved")
    right.set_yscale("log")
    right.set_title("Small arrays stay in cache", fontsize=10)
    legend_below(right, fontsize=8)


def matmul_flops_vs_batch(
    dims=(4096, 1024), chip="v5e", dtype: str = "bf16", w_dtype: str | None = None, batch_range=(1, 1024), ax=None
):
    """Chapter 1: the roofline as a function of the token batch. For each ``D`` in ``dims`` (square weights
    ``D = F``), the FLOP/s that ``x[B, D] @ w[D, D]`` can attain on ``chip`` (its FLOPs over the perfect-overlap
    time, exact byte count), against ``B``; ``dtype`` is the activation and compute dtype, ``w_dtype`` the
    weights'. A dot marks the smallest compute-bound ``B`` of each curve; the dashed line is the peak.

    Returns the matplotlib Figure.
    """
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
    legend_below(ax, fontsize=8)
    return decade_ticks(fig)
