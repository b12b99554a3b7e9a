"""The book's figure style and the helpers every figure module shares.

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
