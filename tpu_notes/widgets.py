"""Interactive explorers for the notebooks, built on :mod:`tpu_notes.roofline` and :mod:`tpu_notes.plots`.

Each explorer returns an ipywidgets box when ipywidgets can run, and otherwise (ipywidgets missing, or
``static=True``) falls back to the static matplotlib figure for its starting settings, so a notebook still shows
something in a plain HTML page or a kernel without widgets. Widget state is kept small: a few controls, one
80-dpi PNG and a few lines of text, set as widget values (nothing is printed into the cell's output).
"""
from __future__ import annotations

from dataclasses import dataclass

from .hardware import CHIPS, get_chip
from .roofline import RooflineTime, matmul_time
from .units import canonical_dtype, check_positive, fmt

#: Choices offered by the explorer (powers of two keep the sliders short).
BATCH_CHOICES = tuple(2**k for k in range(0, 17))       # 1 ... 65536 tokens
DIM_CHOICES = tuple(2**k for k in range(8, 17))         # 256 ... 65536
DTYPE_CHOICES = ("bf16", "int8", "fp8")


@dataclass(frozen=True)
class MatmulOnRoofline:
    """Where ``x[B, D] @ w[D, F]`` lands on one chip's roofline."""

    chip: str                   # tpu_notes chip name
    dtype: str                  # compute dtype (also of x, w and the output)
    B: int                      # token batch
    D: int                      # contracting dimension
    F: int                      # output dimension
    time: RooflineTime          # FLOPs, bytes, time bounds (s), intensity (FLOPs/B) and bound
    critical_intensity: float   # chip's peak / HBM bandwidth for dtype, FLOPs per byte

    def summary(self) -> str:
        """A few lines of text for the explorer."""
        t = self.time
        return (f"{self.chip} {self.dtype}: [{self.B}, {self.D}] x [{self.D}, {self.F}]\n"
                f"  {fmt(t.flops, 'FLOPs')}, {fmt(t.nbytes, 'B')} moved, intensity {t.intensity:.3g} FLOPs/B "
                f"vs critical {self.critical_intensity:.3g}\n"
                f"  T_math {fmt(t.t_math, 's')}, T_comms {fmt(t.t_comms, 's')} -> {t.bound}-bound, "
                f"time between {fmt(t.lower, 's')} and {fmt(t.upper, 's')}")


def matmul_point(chip="v5e", dtype: str = "bf16", B: int = 256, D: int = 8192, F: int = 8192) -> MatmulOnRoofline:
    """The numbers behind the explorer: :func:`tpu_notes.roofline.matmul_time` plus the chip's critical intensity."""
    c = get_chip(chip)
    dtype = canonical_dtype(dtype)
    B, D, F = (check_positive(n, v, integer=True) for n, v in (("B", B), ("D", D), ("F", F)))
    return MatmulOnRoofline(chip=c.name, dtype=dtype, B=B, D=D, F=F, time=matmul_time(B, D, F, c, dtype=dtype),
                            critical_intensity=c.critical_intensity(dtype))


def roofline_explorer(chip="v5e", dtype: str = "bf16", B: int = 256, D: int = 8192, F: int = 8192,
                      static: bool = False):
    """Explore where a matmul ``[B, D] x [D, F]`` lands on a chip's roofline, and how long it takes.

    Returns an ipywidgets ``VBox`` (chip and dtype menus, B/D/F sliders, then an ``Image`` of the roofline and an
    ``HTML`` summary, both redrawn on change). Without ipywidgets, or with ``static=True``, returns the static matplotlib Figure for
    the starting settings instead (see :func:`tpu_notes.plots.matmul_on_roofline`).
    """
    from . import plots

    point = matmul_point(chip, dtype, B, D, F)  # validates the starting settings either way
    if not isinstance(static, bool):
        raise TypeError(f"static must be True or False; got {type(static).__name__}")
    widgets = None
    if not static:
        try:
            import ipywidgets as widgets
        except ImportError:
            widgets = None
    if widgets is None:
        return plots.matmul_on_roofline(point.B, point.D, point.F, chip=point.chip, dtype=point.dtype)

    def nearest(value, choices):
        return min(choices, key=lambda c: abs(c - value))

    style = {"description_width": "70px"}
    chip_w = widgets.Dropdown(options=sorted(CHIPS), value=point.chip, description="chip", style=style)
    dtype_w = widgets.Dropdown(options=DTYPE_CHOICES, value=point.dtype if point.dtype in DTYPE_CHOICES else "bf16",
                               description="dtype", style=style)
    b_w = widgets.SelectionSlider(options=BATCH_CHOICES, value=nearest(point.B, BATCH_CHOICES),
                                  description="B (tokens)", style=style)
    d_w = widgets.SelectionSlider(options=DIM_CHOICES, value=nearest(point.D, DIM_CHOICES), description="D",
                                  style=style)
    f_w = widgets.SelectionSlider(options=DIM_CHOICES, value=nearest(point.F, DIM_CHOICES), description="F",
                                  style=style)
    image = widgets.Image(format="png")
    text = widgets.HTML()

    def draw(*_):
        import html
        import io

        import matplotlib.pyplot as plt

        try:
            p = matmul_point(chip_w.value, dtype_w.value, b_w.value, d_w.value, f_w.value)
        except ValueError as err:  # e.g. a chip with no published peak for this dtype
            text.value = f"<pre>{html.escape(str(err))}</pre>"
            return
        fig = plots.matmul_on_roofline(p.B, p.D, p.F, chip=p.chip, dtype=p.dtype, width=5.5, height=3.2)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
        plt.close(fig)
        # Widget values, not printed output: nothing is sent to the cell, so the state stays one small PNG + text.
        image.value = buf.getvalue()
        text.value = f"<pre>{html.escape(p.summary())}</pre>"

    for w in (chip_w, dtype_w, b_w, d_w, f_w):
        w.observe(draw, names="value")
    draw()
    return widgets.VBox([widgets.HBox([chip_w, dtype_w]), widgets.HBox([b_w, d_w, f_w]), image, text])
