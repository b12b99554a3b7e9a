"""The book's figure style and the helpers every figure module shares.

Every figure uses :func:`use_book_style` (explicit rcParams: named styles change between matplotlib versions)
and a fixed size, so committed PNGs stay small and comparable.
"""

from __future__ import annotations

import matplotlib
import matplotlib.figure
import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np

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
    "v3": "#8c564b",
    "v4p": "#9467bd",
    "v5e": "#1f77b4",
    "v5p": "#ff7f0e",
    "v6e": "#2ca02c",
    "tpu7x": "#17becf",
    "a100": "#7f7f7f",
    "h100": "#d62728",
    "h200": "#e377c2",
    "b200": "#bcbd22",
}


def use_book_style() -> None:
    """Apply the book's rcParams to matplotlib (idempotent)."""
    matplotlib.rcParams.update(BOOK_RC)


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 7.0, height: float = 4.2):
    """``(fig, axes)`` in the book style with a fixed size in inches."""
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


#: The widest figure (inches) the book shows at its natural size: the content column is ~750 px at 100 dpi. A wider
#: figure is scaled down to fit, and its labels shrink with it (an 8-inch figure's 7-point text reads as 6 points).
PAGE_WIDTH_IN = 7.2

#: The smallest font size (points) for text inside a figure that fits PAGE_WIDTH_IN.
MIN_FONT_PT = 8


def panel_grid(n_panels: int, ncols: int = 3, panel_width: float = 2.4, panel_height: float = 2.5):
    """``(fig, axes)`` for ``n_panels`` small panels, ``ncols`` to a row (fewer when a row would pass
    :data:`PAGE_WIDTH_IN`), as a flat list; spare axes of the last row are switched off. Multi-panel figures use
    it so that they are shown at their natural size and their labels stay readable."""
    if isinstance(n_panels, bool) or not isinstance(n_panels, int) or n_panels < 1:
        raise ValueError(f"n_panels must be a positive integer; got {n_panels!r}")
    if isinstance(ncols, bool) or not isinstance(ncols, int) or ncols < 1:
        raise ValueError(f"ncols must be a positive integer; got {ncols!r}")
    ncols = max(1, min(ncols, n_panels, int(PAGE_WIDTH_IN // panel_width)))
    nrows = -(-n_panels // ncols)
    fig, axes = new_figure(
        ncols=ncols, nrows=nrows, width=min(PAGE_WIDTH_IN, panel_width * ncols), height=panel_height * nrows
    )
    axes = list(np.array(axes, dtype=object).reshape(-1))
    for ax in axes[n_panels:]:
        ax.axis("off")
    return fig, axes[:n_panels]


# --------------------------------------------------------------------------------------------------------------
# Log axes: decade ticks only, readable labels, a light minor grid
# --------------------------------------------------------------------------------------------------------------
def _decade_label(value: float, unit: str | None, plain: bool = True) -> str:
    """A decade tick's label: ``100 µs`` or ``10 GB`` on an axis in seconds or bytes, a plain number (``0.01``,
    ``1,000``) when ``plain``, else ``10^k`` in mathtext."""
    from ..units import fmt

    if value <= 0 or not np.isfinite(value):
        return ""
    if unit in ("s", "B", "B/s"):
        return fmt(float(value), unit)
    k = int(np.floor(np.log10(value) + 1e-9))
    if abs(value - 10.0**k) > 1e-9 * value:  # a 1-2-5 tick of a short axis
        return f"{value:g}"
    if plain:
        return f"{value:,.{max(0, -k)}f}"
    return f"$10^{{{k}}}$"


class _DecadeFormatter(matplotlib.ticker.Formatter):
    """Labels of :class:`_DecadeLocator`'s ticks, one style per axis: plain numbers when every tick in view lies
    from 0.001 to 10,000, powers of ten otherwise (never ``1,000`` beside ``10^5``)."""

    def __init__(self, unit: str | None):
        self.unit = unit
        self.ticks: list[float] = []

    def set_locs(self, locs) -> None:  # the ticks about to be labelled (Formatter.locs is deprecated)
        self.ticks = [float(v) for v in locs]

    def __call__(self, x, pos=None):
        lo, hi = sorted(self.axis.get_view_interval()) if self.axis is not None else (x, x)
        shown = [v for v in self.ticks if lo * (1 - 1e-9) <= v <= hi * (1 + 1e-9) and v > 0] or [x]
        plain = 1e-3 <= min(shown) and max(shown) <= 1e4
        return _decade_label(x, self.unit, plain)


class _DecadeLocator(matplotlib.ticker.LogLocator):
    """Major ticks on the powers of ten in view (every few decades when there are many); on an axis shorter than
    two decades, at 1, 2 and 5 times each power of ten instead, so that it always carries at least two labels."""

    def __init__(self):
        super().__init__(base=10.0, subs=(1.0,), numticks=9)

    def tick_values(self, vmin, vmax):
        vmin, vmax = sorted((vmin, vmax))
        if vmin > 0 and np.isfinite(vmax) and vmax / vmin < 100.0:
            lo, hi = int(np.floor(np.log10(vmin))), int(np.ceil(np.log10(vmax)))
            ticks = [m * 10.0**k for k in range(lo, hi + 1) for m in (1.0, 2.0, 5.0)]
            inside = [t for t in ticks if vmin <= t <= vmax]
            if len(inside) >= 2:
                return np.array(ticks)
            return np.array([m * 10.0**k for k in range(lo, hi + 1) for m in range(1, 10)])
        return super().tick_values(vmin, vmax)


def _axis_unit(label: str) -> str | None:
    """``"s"`` or ``"B"`` when an axis label says it is in seconds or bytes (ticks then read ``1 ms``, ``10 GB``)."""
    text = label.strip().lower()
    if text.endswith("(s)") or text.startswith("seconds") or "(seconds" in text:
        return "s"
    if text.endswith("(b)") or text.startswith("bytes") or "(bytes" in text:
        return "B"
    return None


def decade_ticks(fig):
    """Give every base-10 log axis of ``fig`` the book's log ticks and return ``fig``: major ticks at the powers of
    ten only, labelled readably (``100 µs``, ``1 ms`` on an axis in seconds; ``0.01``, ``100``, ``10^6`` otherwise),
    unlabelled minor ticks at 2-9 times each power, and a light minor grid. Linear axes and base-2 log axes are
    left as they are. Every figure function of the package ends with it."""
    from matplotlib.ticker import LogLocator, NullFormatter

    if not isinstance(fig, matplotlib.figure.Figure):
        raise TypeError(f"fig must be a matplotlib Figure; got {type(fig).__name__}")
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_scale() != "log" or getattr(axis.get_transform(), "base", 10) != 10:
                continue
            unit = _axis_unit(axis.get_label_text())
            axis.set_major_locator(_DecadeLocator())
            axis.set_major_formatter(_DecadeFormatter(unit))
            axis.set_minor_locator(LogLocator(base=10.0, subs=tuple(range(2, 10)), numticks=12))
            axis.set_minor_formatter(NullFormatter())
            if matplotlib.rcParams["axes.grid"]:
                axis.grid(True, which="minor", alpha=0.12, lw=0.5)
    return fig


# --------------------------------------------------------------------------------------------------------------
# Legends outside the data
# --------------------------------------------------------------------------------------------------------------
def legend_below(ax, *args, ncol: int | None = None, **kwargs):
    """``ax.legend(*args, **kwargs)`` placed below the axes, under its tick labels and x label, so that it never
    covers the data; entries run in as many columns as fit the axes' width (or ``ncol``). Returns the Legend (or
    None when the axes has nothing to label). ``loc`` and ``bbox_to_anchor`` are this function's to choose."""
    import matplotlib.axes
    from matplotlib.transforms import offset_copy

    if not isinstance(ax, matplotlib.axes.Axes):
        raise TypeError(f"ax must be a matplotlib Axes; got {type(ax).__name__}")
    if ncol is not None and (isinstance(ncol, bool) or not isinstance(ncol, int) or ncol < 1):
        raise ValueError(f"ncol must be a positive integer or None; got {ncol!r}")
    kwargs.pop("loc", None)
    kwargs.pop("bbox_to_anchor", None)
    if "handles" in kwargs:
        n = len(kwargs["handles"])
    elif args:
        n = len(args[-1])
    else:
        n = len(ax.get_legend_handles_labels()[1])
    if n == 0:
        return None
    fig = ax.figure
    renderer = fig.canvas.get_renderer()
    below = (ax.bbox.y0 - ax.get_tightbbox(renderer).y0) * 72.0 / fig.dpi + 4.0  # points under the axes' bottom
    anchor = offset_copy(ax.transAxes, fig=fig, y=-below, units="points")
    columns = n if ncol is None else ncol
    while True:
        legend = ax.legend(
            *args, loc="upper center", bbox_to_anchor=(0.5, 0.0), bbox_transform=anchor, ncol=columns, **kwargs
        )
        if ncol is not None or columns == 1 or legend.get_window_extent(renderer).width <= 1.15 * ax.bbox.width:
            return legend
        columns -= 1
