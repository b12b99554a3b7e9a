"""Interactive explorers for the notebooks, built on the analysis modules and :mod:`tpu_notes.plots`.

``roofline_explorer`` (Chapter 1: a matmul on a chip's roofline), ``slice_explorer`` (Chapter 2: hops and transfer
time on a TPU slice), ``collective_explorer`` (Chapter 3: one
collective on a slice, its hops and its two cost terms), ``memory_explorer`` (Chapter 4: KV cache and remat
activations against batch and context).

Each explorer returns an ipywidgets box when ipywidgets can run, and otherwise (ipywidgets missing, or
``static=True``) falls back to the static matplotlib figure for its starting settings. Widget state is kept small:
a few controls, one 80-dpi PNG and a few lines of text, set as widget values (nothing is printed into the cell's
output).

Displayed, the box offers two views of itself: the live widget (``application/vnd.jupyter.widget-view+json``,
which Jupyter and Colab draw) and, as ``text/html``, a Plotly figure of the same numbers over a small grid of the
explorer's settings, precomputed by the same functions (:mod:`tpu_notes.plots.interactive`), which the HTML book
draws without a kernel (``_config.yml`` ranks ``text/html`` first for the HTML builders).
"""

from __future__ import annotations

from dataclasses import dataclass

from .hardware import CHIPS, get_chip
from .roofline import RooflineTime, matmul_time
from .topology import parse_slice
from .units import canonical_dtype, check_positive, fmt

#: Choices offered by the explorer (powers of two keep the sliders short).
BATCH_CHOICES = tuple(2**k for k in range(0, 17))  # 1 ... 65536 tokens
DIM_CHOICES = tuple(2**k for k in range(8, 17))  # 256 ... 65536
DTYPE_CHOICES = ("bf16", "int8", "fp8")


@dataclass(frozen=True)
class MatmulOnRoofline:
    """Where ``x[B, D] @ w[D, F]`` lands on one chip's roofline."""

    chip: str  # tpu_notes chip name
    dtype: str  # compute dtype (also of x, w and the output)
    B: int  # token batch
    D: int  # contracting dimension
    F: int  # output dimension
    time: RooflineTime  # FLOPs, bytes, time bounds (s), intensity (FLOPs/B) and bound
    critical_intensity: float  # chip's peak / HBM bandwidth for dtype, FLOPs per byte

    def summary(self) -> str:
        """A few lines of text for the explorer."""
        t = self.time
        return (
            f"{self.chip} {self.dtype}: [{self.B}, {self.D}] x [{self.D}, {self.F}]\n"
            f"  {fmt(t.flops, 'FLOPs')}, {fmt(t.nbytes, 'B')} moved, intensity {t.intensity:.3g} FLOPs/B "
            f"vs critical {self.critical_intensity:.3g}\n"
            f"  T_math {fmt(t.t_math, 's')}, T_comms {fmt(t.t_comms, 's')} -> {t.bound}-bound, "
            f"time between {fmt(t.lower, 's')} and {fmt(t.upper, 's')}"
        )


def matmul_point(chip="v5e", dtype: str = "bf16", B: int = 256, D: int = 8192, F: int = 8192) -> MatmulOnRoofline:
    """The numbers behind the explorer: :func:`tpu_notes.roofline.matmul_time` plus the chip's critical intensity."""
    c = get_chip(chip)
    dtype = canonical_dtype(dtype)
    B, D, F = (check_positive(n, v, integer=True) for n, v in (("B", B), ("D", D), ("F", F)))
    return MatmulOnRoofline(
        chip=c.name,
        dtype=dtype,
        B=B,
        D=D,
        F=F,
        time=matmul_time(B, D, F, c, dtype=dtype),
        critical_intensity=c.critical_intensity(dtype),
    )


#: The static book's roofline figure: these chips, dtypes, batches and contracting sizes (F stays as started).
STATIC_ROOFLINE_CHIPS = ("v5e", "v5p", "v6e", "h100")
STATIC_ROOFLINE_DTYPES = ("bf16", "int8")
STATIC_BATCHES = tuple(4**k for k in range(9))  # 1 ... 65536 tokens
STATIC_DIMS = (1024, 8192, 65536)


def _roofline_spec(point: MatmulOnRoofline) -> dict:
    """The static book's version of :func:`roofline_explorer`: :func:`matmul_point` on a grid of chips, dtypes,
    batches and contracting sizes (``F`` fixed at the starting value), as a Plotly figure spec."""
    from .plots import interactive as ix

    lo, hi = 0.1, 1e5  # fixed axes: the point moves, the frame does not

    def cell(chip, dtype, B, D):
        p = matmul_point(chip, dtype, B, D, point.F)
        c = get_chip(chip)
        peak, bw, t = c.peak_flops(dtype), c.hbm_bw, p.time
        color = _chip_color(c.name)
        ridge = p.critical_intensity
        return {
            "data": [
                _line([lo, ridge, hi], [lo * bw, peak, peak], f"{c.name} {dtype} roofline", color),
                _line([ridge, ridge], [lo * bw, peak], f"critical intensity {ridge:.0f} FLOPs/B", color, "dot", 1),
                _line(
                    [t.intensity],
                    [t.flops / t.lower],
                    f"B={B}, D={D}, F={point.F}: {t.bound}-bound",
                    "black",
                    mode="markers",
                ),
            ],
            "text": p.summary(),
        }

    controls = [
        ix.control("chip", _with(STATIC_ROOFLINE_CHIPS, point.chip), point.chip, kind="buttons"),
        ix.control("dtype", _with(STATIC_ROOFLINE_DTYPES, point.dtype), point.dtype, kind="buttons"),
        ix.control("B (tokens)", _with(STATIC_BATCHES, point.B), point.B),
        ix.control("D", _with(STATIC_DIMS, point.D), point.D),
    ]
    layout = {
        "title": {"text": f"x[B, D] @ w[D, F] on the roofline (F = {point.F})", "font": {"size": 13}},
        "xaxis": _axis("arithmetic intensity (FLOPs per byte)", log=True, range=[-1, 5]),
        "yaxis": _axis("attainable FLOP/s", log=True),
        "legend": {"font": {"size": 11}},
    }
    return ix.explorer_spec("roofline", controls, cell, layout)


def _chip_color(name: str) -> str:
    from .plots.style import CHIP_COLORS

    return CHIP_COLORS.get(name, "#1f77b4")


def _html(spec_factory, *args, fallback=None):
    """A zero-argument function that builds the static book's HTML from ``spec_factory(*args)``; ``fallback`` (a
    zero-argument function returning the explorer's static matplotlib Figure) gives the ``<noscript>`` picture a
    page without JavaScript shows instead (one drawing per explorer on every page)."""

    def build():
        from .plots import interactive

        png = interactive.figure_png(fallback()) if fallback is not None else None
        return interactive.explorer_html(spec_factory(*args), fallback=png)

    return build


def roofline_explorer(
    chip="v5e", dtype: str = "bf16", B: int = 256, D: int = 8192, F: int = 8192, static: bool = False
):
    """Explore where a matmul ``[B, D] x [D, F]`` lands on a chip's roofline, and how long it takes.

    Returns an ipywidgets ``VBox`` (chip and dtype menus, B/D/F sliders, then an ``Image`` of the roofline and an
    ``HTML`` summary, both redrawn on change); displayed, it also carries a Plotly version over a grid of settings
    for pages without a kernel (:mod:`tpu_notes.plots.interactive`). Without ipywidgets, or with ``static=True``,
    returns the static matplotlib Figure for the starting settings instead (see
    :func:`tpu_notes.plots.matmul_on_roofline`).
    """
    from . import plots

    point = matmul_point(chip, dtype, B, D, F)  # validates the starting settings either way
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.matmul_on_roofline(point.B, point.D, point.F, chip=point.chip, dtype=point.dtype)

    style = {"description_width": "70px"}
    chip_w = widgets.Dropdown(options=sorted(CHIPS), value=point.chip, description="chip", style=style)
    dtype_w = _dropdown(widgets, DTYPE_CHOICES, point.dtype, "bf16", "dtype", style)
    b_w = _slider(widgets, BATCH_CHOICES, point.B, "B (tokens)", style)
    d_w = _slider(widgets, DIM_CHOICES, point.D, "D", style)
    f_w = _slider(widgets, DIM_CHOICES, point.F, "F", style)
    image = widgets.Image(format="png")
    text = widgets.HTML()

    def draw(*_):
        import html

        try:
            p = matmul_point(chip_w.value, dtype_w.value, b_w.value, d_w.value, f_w.value)
        except ValueError as err:  # e.g. a chip with no published peak for this dtype
            text.value = f"<pre>{html.escape(str(err))}</pre>"
            return
        fig = plots.matmul_on_roofline(p.B, p.D, p.F, chip=p.chip, dtype=p.dtype, width=5.5, height=3.2)
        _show(image, text, fig, p.summary())

    for w in (chip_w, dtype_w, b_w, d_w, f_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([chip_w, dtype_w]), widgets.HBox([b_w, d_w, f_w]), image, text],
        _html(_roofline_spec, point, fallback=lambda: roofline_explorer(chip, dtype, B, D, F, static=True)),
        f"roofline explorer: {point.chip} {point.dtype}, B={point.B}, D={point.D}, F={point.F}",
    )


# --------------------------------------------------------------------------------------------------------------
# Shared by the explorers below: a widgets module or None, and a redraw that stores one small PNG and some text
# --------------------------------------------------------------------------------------------------------------
def _widgets_or_none(static: bool):
    if not isinstance(static, bool):
        raise TypeError(f"static must be True or False; got {type(static).__name__}")
    if static:
        return None
    try:
        import ipywidgets
    except ImportError:
        return None
    return ipywidgets


_EXPLORER_CLASS = None


def _explorer_class():
    """``Explorer``: an ipywidgets ``VBox`` that also offers the static book an interactive HTML view.

    Its ``_repr_mimebundle_`` holds the widget view (``application/vnd.jupyter.widget-view+json``: what Jupyter
    and Colab draw, the live explorer), ``text/html`` (a Plotly figure over a precomputed grid of the explorer's
    settings, :mod:`tpu_notes.plots.interactive`: what the HTML book draws, see ``nb_mime_priority_overrides`` in
    ``_config.yml``) and a one-line ``text/plain``. The HTML is built on first display, then kept."""
    global _EXPLORER_CLASS
    if _EXPLORER_CLASS is None:
        import ipywidgets

        class Explorer(ipywidgets.VBox):
            def __init__(self, children, html_factory, plain: str):
                super().__init__(children)
                self._html_factory, self._plain, self._html = html_factory, plain, None

            def static_html(self) -> str:
                """The Plotly snippet the static book shows (computed once). Should building it fail, the
                live widget still displays, beside a line saying why (tests/test_browser.py fails on such a page)."""
                if self._html is None:
                    import html

                    try:
                        self._html = self._html_factory()
                    except Exception as err:  # noqa: BLE001 - never let the static view break the live one
                        self._html = f"<pre>static figure not available: {html.escape(repr(err))}</pre>"
                return self._html

            def _repr_mimebundle_(self, **kwargs):
                bundle = super()._repr_mimebundle_(**kwargs) or {}
                bundle["text/plain"] = self._plain
                bundle["text/html"] = self.static_html()
                return bundle

        _EXPLORER_CLASS = Explorer
    return _EXPLORER_CLASS


def _explorer(children, html_factory, plain: str):
    return _explorer_class()(children, html_factory, plain)


def _nearest(value, choices):
    return min(choices, key=lambda c: abs(c - value))


def _with(choices, value):
    """``choices`` with the starting ``value`` in them, so that it is a point of the precomputed grid: a number
    replaces the nearest choice (the grid keeps its size), a name is added at the end."""
    choices = tuple(choices)
    if value in choices:
        return choices
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in choices + (value,)):
        near = _nearest(value, choices)
        return tuple(sorted(value if c == near else c for c in choices))
    return choices + (value,)


def _line(x, y, name, color, dash="solid", width=2.0, mode="lines", xaxis=None, **extra):
    trace = {
        "type": "scatter",
        "mode": mode,
        "x": list(x),
        "y": list(y),
        "name": name,
        "line": {"color": color, "dash": dash, "width": width},
        "marker": {"color": color, "size": 8},
    }
    if xaxis:
        trace.update(xaxis=xaxis[0], yaxis=xaxis[1])
    trace.update(extra)
    return trace


def _axis(title, log=False, **extra):
    axis = {"title": {"text": title}, "type": "log" if log else "linear", "exponentformat": "power"}
    if log:  # labels at the powers of ten only; an unlabelled light grid at 2-9 times each
        axis["dtick"] = 1
        axis["minor"] = {"dtick": "D1", "showgrid": True, "gridcolor": "rgba(0,0,0,0.06)", "ticks": ""}
    axis.update(extra)
    return axis


def _show(image, text, fig, summary: str) -> None:
    """Put ``fig`` (as an 80-dpi PNG) and ``summary`` into the explorer's Image and HTML widgets."""
    import html
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
    # Widget values, not printed output: nothing is sent to the cell, so the state stays one small PNG + text.
    image.value = buf.getvalue()
    text.value = f"<pre>{html.escape(summary)}</pre>"


# --------------------------------------------------------------------------------------------------------------
# Chapter 3: one collective on a slice
# --------------------------------------------------------------------------------------------------------------
#: Slice shapes offered by the collective explorer, per chip (all valid ``Slice`` shapes).
SLICE_SHAPES = {
    "v4p": ((2, 2, 2), (2, 2, 4), (4, 4, 4), (4, 4, 8), (8, 8, 8)),
    "v5p": ((2, 2, 2), (2, 2, 4), (4, 4, 4), (4, 4, 8), (8, 8, 8)),
    "v5e": ((2, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16)),
    "v6e": ((2, 2), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16)),
}
#: The shape the explorer starts from when the chip changes.
DEFAULT_SHAPES = {"v4p": (4, 4, 4), "v5p": (4, 4, 4), "v5e": (4, 4), "v6e": (4, 4)}
#: Array sizes offered by the collective explorer: powers of 4 from 1 kiB to 4 GiB (bytes).
NBYTES_CHOICES = tuple(4**k * 1024 for k in range(12))
COLLECTIVE_CHOICES = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


@dataclass(frozen=True)
class CollectiveOnSlice:
    """One collective over some axes of a TPU slice, priced by :mod:`tpu_notes.collectives`."""

    chip: str  # tpu_notes chip name
    shape: tuple  # slice shape, chips per axis
    kind: str  # "all_gather", "reduce_scatter", "all_reduce" or "all_to_all"
    axes: tuple  # axis names the collective runs over, e.g. ("x", "y")
    nbytes: float  # V: the whole (gathered / unreduced) array, bytes
    wraparound: tuple  # per chosen axis: does it close into a ring?
    hops: int  # hops of the slowest path (summed over the chosen axes)
    time: object  # tpu_notes.collectives.CollectiveTime, seconds

    def summary(self) -> str:
        """A few lines of text for the explorer."""
        rings = ", ".join(
            f"{a}: {'ring' if w else 'line'} of {self.shape['xyz'.index(a)]}"
            for a, w in zip(self.axes, self.wraparound)
        )
        t = self.time
        return (
            f"{self.kind} of {fmt(self.nbytes, 'B')} over {''.join(self.axes)} of a {self.chip} "
            f"{'x'.join(map(str, self.shape))} slice ({rings})\n"
            f"  {self.hops} hops; bandwidth term {fmt(t.bandwidth_time, 's')}, latency term "
            f"{fmt(t.latency_time, 's')} -> {fmt(t.total, 's')}, {t.bound}-bound"
        )


def _slice_dropdowns(widgets, point, style: dict):
    """The chip and slice-shape dropdowns of the collective and slice explorers, set from ``point`` where the
    choices allow; picking a chip offers its shapes and starts from its default one."""

    def shape_options(chip):
        return [("x".join(map(str, s)), s) for s in SLICE_SHAPES[chip]]

    chip_w = widgets.Dropdown(
        options=sorted(SLICE_SHAPES),
        value=point.chip if point.chip in SLICE_SHAPES else "v5e",
        description="chip",
        style=style,
    )
    shape_w = widgets.Dropdown(
        options=shape_options(chip_w.value),
        value=point.shape if point.shape in SLICE_SHAPES[chip_w.value] else DEFAULT_SHAPES[chip_w.value],
        description="slice",
        style=style,
    )

    def on_chip(*_):
        shape_w.options = shape_options(chip_w.value)
        shape_w.value = DEFAULT_SHAPES[chip_w.value]

    chip_w.observe(on_chip, names="value")
    return chip_w, shape_w


def _dropdown(widgets, options, start, fallback, description: str, style: dict):
    """A Dropdown over ``options`` starting at ``start``, or at ``fallback`` when ``start`` is not one of them."""
    return widgets.Dropdown(
        options=options, value=start if start in options else fallback, description=description, style=style
    )


def _slider(widgets, options, start, description: str, style: dict):
    """A SelectionSlider over ``options`` (numbers) starting at the one nearest ``start``."""
    return widgets.SelectionSlider(
        options=options, value=_nearest(start, options), description=description, style=style
    )


def _bytes_slider(widgets, nbytes: float, description: str, style: dict):
    """A slider over :data:`NBYTES_CHOICES` (labelled with SI suffixes), starting at the choice nearest ``nbytes``."""
    return widgets.SelectionSlider(
        options=[(fmt(v, "B"), v) for v in NBYTES_CHOICES],
        value=_nearest(nbytes, NBYTES_CHOICES),
        description=description,
        style=style,
    )


def collective_point(
    chip="v5e", shape=(4, 4), kind: str = "all_gather", axes=("x",), nbytes: float = 64e6
) -> CollectiveOnSlice:
    """The numbers behind :func:`collective_explorer`: ``Slice(chip, shape).collective_time`` plus the hops."""
    from .collectives import gather_hops
    from .topology import Slice

    sl = Slice(chip, tuple(shape))
    t = sl.collective_time(kind, nbytes, axes)
    idx = sl._axis_indices(axes)
    wraps = tuple(sl.wraparound[i] for i in idx)
    hops = sum(gather_hops(sl.shape[i], w) for i, w in zip(idx, wraps))
    return CollectiveOnSlice(
        chip=sl.chip.name,
        shape=tuple(sl.shape),
        kind=kind,
        axes=tuple("xyz"[i] for i in idx),
        nbytes=float(nbytes),
        wraparound=wraps,
        hops=hops,
        time=t,
    )


def collective_explorer(
    chip="v5e", shape=(4, 4), kind: str = "all_gather", axes=("x",), nbytes: float = 64e6, static: bool = False
):
    """Explore one collective on a slice: chip, slice shape, kind, mesh axes and array size (Chapter 3).

    Returns an ipywidgets ``VBox`` whose figure (time against ``V`` with the bandwidth and latency terms, see
    :func:`tpu_notes.plots.collective_cost_chart`) and summary (hops, each term, the bound) redraw on change.
    Without ipywidgets, or with ``static=True``, returns the static figure for the starting settings.
    """
    from . import plots

    point = collective_point(chip, shape, kind, axes, nbytes)  # validates the starting settings either way
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.collective_cost_chart(point.chip, point.shape, point.kind, point.axes, point.nbytes)

    style = {"description_width": "60px"}

    def axis_options(shape_):
        names = "xyz"[: len(shape_)]
        subsets = [names[i] for i in range(len(names))] + [names[:2]] + ([names] if len(names) == 3 else [])
        return subsets

    chip_w, shape_w = _slice_dropdowns(widgets, point, style)
    kind_w = _dropdown(widgets, COLLECTIVE_CHOICES, point.kind, "all_gather", "kind", style)
    axes_w = _dropdown(widgets, axis_options(shape_w.value), "".join(point.axes), "x", "axes", style)
    v_w = _bytes_slider(widgets, point.nbytes, "V", style)
    image, text = widgets.Image(format="png"), widgets.HTML()

    def on_shape(*_):
        axes_w.options = axis_options(shape_w.value)
        axes_w.value = "x"

    def draw(*_):
        try:
            p = collective_point(chip_w.value, shape_w.value, kind_w.value, tuple(axes_w.value), v_w.value)
        except ValueError as err:
            text.value = f"<pre>{err}</pre>"
            return
        fig = plots.collective_cost_chart(p.chip, p.shape, p.kind, p.axes, p.nbytes)
        fig.set_size_inches(5.5, 3.4)
        _show(image, text, fig, p.summary())

    shape_w.observe(on_shape, names="value")
    for w in (chip_w, shape_w, kind_w, axes_w, v_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([chip_w, shape_w, kind_w, axes_w]), v_w, image, text],
        _html(
            _collective_spec,
            point,
            fallback=lambda: plots.collective_cost_chart(point.chip, point.shape, point.kind, point.axes, point.nbytes),
        ),
        f"collective explorer: {point.kind} over {''.join(point.axes)} of a {point.chip} "
        f"{'x'.join(map(str, point.shape))} slice",
    )


# --------------------------------------------------------------------------------------------------------------
# Chapter 4: KV cache and remat memory against batch and context
# --------------------------------------------------------------------------------------------------------------
MEMORY_MODELS = ("llama2-13b", "llama3-8b", "llama3-70b", "llama3-405b")
SEQ_CHOICES = tuple(2**k for k in range(9, 18))  # 512 ... 131072 tokens
SEQUENCE_BATCH_CHOICES = tuple(2**k for k in range(0, 11))  # 1 ... 1024 sequences


@dataclass(frozen=True)
class MemoryPoint:
    """Memory of one model at one batch and context: what serving and training keep besides the weights."""

    model: str  # preset name
    batch: int  # sequences
    seq_len: int  # tokens per sequence
    policy: str  # remat policy for the activations
    weight_bytes: float  # bf16 weights, bytes
    kv_bytes: float  # bf16 KV cache of the batch, bytes
    activation_bytes: float  # bf16 activations kept for the backward pass under ``policy``, bytes
    hbm_bytes: float  # HBM of one chip, bytes
    chip: str  # the chip whose HBM is compared

    def summary(self) -> str:
        """A few lines of text for the explorer."""
        return (
            f"{self.model}, {self.batch} sequences of {self.seq_len:,} tokens\n"
            f"  weights {fmt(self.weight_bytes, 'B')}; KV cache {fmt(self.kv_bytes, 'B')} "
            f"({self.kv_bytes / self.hbm_bytes:.3g} x one {self.chip}'s HBM)\n"
            f"  training activations, remat '{self.policy}': {fmt(self.activation_bytes, 'B')} "
            f"({self.activation_bytes / self.hbm_bytes:.3g} x HBM)"
        )


def memory_point(
    model="llama3-8b", batch: int = 16, seq_len: int = 8192, policy: str = "full_block", chip="v5p"
) -> MemoryPoint:
    """The numbers behind :func:`memory_explorer`, from :class:`tpu_notes.transformer.TransformerConfig`."""
    from .transformer import as_config

    m, c = as_config(model), get_chip(chip)
    if m.is_mla:
        raise ValueError(f"model must use GQA attention (MLA activations are not modelled); got {m.name!r}")
    batch = check_positive("batch", batch, integer=True)
    seq_len = check_positive("seq_len", seq_len, integer=True)
    return MemoryPoint(
        model=m.name,
        batch=batch,
        seq_len=seq_len,
        policy=policy,
        weight_bytes=2.0 * m.param_count(),
        kv_bytes=m.kv_cache_bytes(batch, seq_len),
        activation_bytes=m.checkpoint_bytes(batch * seq_len, policy),
        hbm_bytes=c.hbm_bytes,
        chip=c.name,
    )


def memory_explorer(
    model="llama3-8b",
    batch: int = 16,
    seq_len: int = 8192,
    policy: str = "full_block",
    chip="v5p",
    static: bool = False,
):
    """Explore the KV cache and the remat activations of a model against batch and context (Chapter 4).

    Returns an ipywidgets ``VBox`` (model, remat policy, batch and context sliders) whose figure
    (:func:`tpu_notes.plots.memory_vs_context_chart`) and summary redraw on change. Without ipywidgets, or with
    ``static=True``, returns the static figure for the starting settings.
    """
    from . import plots
    from .transformer import REMAT_POLICIES

    point = memory_point(model, batch, seq_len, policy, chip)  # validates the starting settings either way
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.memory_vs_context_chart(point.model, point.batch, point.seq_len, point.chip)

    style = {"description_width": "70px"}
    model_w = _dropdown(widgets, MEMORY_MODELS, point.model, "llama3-8b", "model", style)
    policy_w = widgets.Dropdown(options=REMAT_POLICIES, value=point.policy, description="remat", style=style)
    batch_w = _slider(widgets, SEQUENCE_BATCH_CHOICES, point.batch, "sequences", style)
    seq_w = _slider(widgets, SEQ_CHOICES, point.seq_len, "context", style)
    image, text = widgets.Image(format="png"), widgets.HTML()

    def draw(*_):
        p = memory_point(model_w.value, batch_w.value, seq_w.value, policy_w.value, point.chip)
        fig = plots.memory_vs_context_chart(p.model, p.batch, p.seq_len, p.chip)
        fig.set_size_inches(5.5, 3.4)
        _show(image, text, fig, p.summary())

    for w in (model_w, policy_w, batch_w, seq_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([model_w, policy_w]), widgets.HBox([batch_w, seq_w]), image, text],
        _html(
            _memory_spec,
            point,
            fallback=lambda: plots.memory_vs_context_chart(point.model, point.batch, point.seq_len, point.chip),
        ),
        f"memory explorer: {point.model}, {point.batch} sequences of {point.seq_len} tokens",
    )


# ------------------------------------------------------------------------------------------ planner (Chapter 5)
#: Slices offered by the planner explorer, as ``python -m tpu_notes plan`` spells them (each one Cloud TPU schedules).
PLANNER_SLICES = ("v5p:16x16x16", "v5p:16x16x24", "v5p:8x16x16", "v5p:4x4x8", "v5e:16x16", "v6e:16x16", "v4p:16x16x16")
PLANNER_MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "llama2-13b")


def planner_explorer(
    model: str = "llama3-70b",
    slice: str = "v5p:16x16x16",
    batch_tokens: int = 4 * 2**20,
    seq_len: int = 4096,
    top: int = 8,
    static: bool = False,
):
    """Explore :func:`tpu_notes.training.plan`: pick a model, a slice, a batch and a sequence length and read the
    ranked layouts (memory per chip, step time, comms/compute, MFU, bound) and why the others were rejected.

    Returns an ipywidgets ``VBox``; without ipywidgets, or with ``static=True``, the static
    :func:`tpu_notes.plots.planner_chart` of the starting settings.
    """
    from . import plots
    from .training import plan

    top = check_positive("top", top, integer=True)
    first = plan(model, parse_slice(slice), batch_tokens, seq_len)  # validates the starting settings
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.planner_chart(first, top=top)

    style = {"description_width": "90px"}
    model_w = _dropdown(widgets, PLANNER_MODELS, model, PLANNER_MODELS[1], "model", style)
    slice_w = _dropdown(widgets, PLANNER_SLICES, slice, PLANNER_SLICES[0], "slice", style)
    batches = tuple(2**k for k in range(18, 27))
    batch_w = _slider(widgets, batches, batch_tokens, "batch tokens", style)
    seq_w = _dropdown(widgets, (2048, 4096, 8192, 16384, 32768), seq_len, 4096, "seq len", style)
    seqshard_w = widgets.Checkbox(value=True, description="allow context parallelism")
    text = widgets.HTML()

    def draw(*_):
        import html

        try:
            result = plan(
                model_w.value,
                parse_slice(slice_w.value),
                batch_w.value,
                seq_w.value,
                max_context=16 if seqshard_w.value else 1,
            )
        except ValueError as err:
            text.value = f"<pre>{html.escape(str(err))}</pre>"
            return
        lines = [result.table(top)]
        if result.ranked:
            lines.append("best placement: " + result.ranked[0].layout.describe())
        lines.append("rejected: " + ", ".join(f"{n} {r}" for r, n in result.reasons().items()))
        text.value = f"<pre style='white-space: pre-wrap'>{html.escape(chr(10).join(lines))}</pre>"

    for w in (model_w, slice_w, batch_w, seq_w, seqshard_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([model_w, slice_w]), widgets.HBox([batch_w, seq_w]), seqshard_w, text],
        _html(
            _planner_spec,
            model,
            slice,
            batch_tokens,
            seq_len,
            top,
            fallback=lambda: plots.planner_chart(first, top=top),
        ),
        f"planner explorer: {model} on {slice}",
    )


# --------------------------------------------------------------------------------------------------------------
# Chapter 2: hops and transfer cost on a slice
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SliceHops:
    """How far apart the chips of a TPU slice are, and what moving ``nbytes`` across it costs."""

    chip: str  # tpu_notes chip name
    shape: tuple  # slice shape, chips per axis
    wraparound: tuple  # per axis: does it close into a ring?
    n_chips: int  # chips in the slice
    n_hosts: int  # host CPUs serving it
    diameter: int  # most hops between two chips
    mean_hops: float  # average hops from chip 0 to the others
    nbytes: float  # bytes moved, as the summary's times assume
    farthest_s: float  # seconds to send nbytes from chip 0 to the farthest chip (Slice.transfer_time)
    all_gather_s: float  # seconds to AllGather nbytes over every axis (Slice.collective_time)

    def summary(self) -> str:
        """A few lines of text for the explorer."""
        axes = ", ".join(
            f"{'xyz'[i]}={n} {'ring' if w else 'line'}" for i, (n, w) in enumerate(zip(self.shape, self.wraparound))
        )
        return (
            f"{self.chip} {'x'.join(map(str, self.shape))}: {self.n_chips} chips on {self.n_hosts} host(s); "
            f"{axes}\n  diameter {self.diameter} hops, {self.mean_hops:.2f} hops on average from chip 0\n"
            f"  {fmt(self.nbytes, 'B')}: {fmt(self.farthest_s, 's')} to the farthest chip, "
            f"{fmt(self.all_gather_s, 's')} to AllGather over every axis"
        )


def slice_point(chip="v5e", shape=(8, 16), nbytes: float = 2.0**26) -> SliceHops:
    """The numbers behind :func:`slice_explorer`, from :class:`tpu_notes.topology.Slice`."""
    import numpy as np

    from .topology import Slice

    sl = Slice(chip, tuple(shape) if isinstance(shape, (list, tuple)) else shape)
    nbytes = check_positive("nbytes", nbytes)
    grid = sl.hop_grid()
    far = tuple(int(i) for i in np.unravel_index(int(np.argmax(grid)), grid.shape))
    mean = float(grid.sum()) / max(1, sl.n_chips - 1)
    return SliceHops(
        chip=sl.chip.name,
        shape=tuple(sl.shape),
        wraparound=sl.wraparound,
        n_chips=sl.n_chips,
        n_hosts=sl.n_hosts,
        diameter=sl.diameter,
        mean_hops=mean,
        nbytes=nbytes,
        farthest_s=sl.transfer_time(nbytes, (0,) * len(sl.shape), far).total,
        all_gather_s=sl.collective_time("all_gather", nbytes).total,
    )


def slice_explorer(chip="v5e", shape=(8, 16), nbytes: float = 2.0**26, static: bool = False):
    """Explore a TPU slice (Chapter 2): pick the generation, the slice shape and an array size; see the hops from
    chip 0 to every chip, which axes wrap, and the time to move the array point to point and by AllGather
    (:func:`tpu_notes.plots.slice_hops_chart`). Without ipywidgets, or with ``static=True``, returns that figure
    for the starting settings."""
    from . import plots

    point = slice_point(chip, shape, nbytes)  # validates the starting settings either way
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.slice_hops_chart(point.chip, point.shape, point.nbytes)

    style = {"description_width": "60px"}
    chip_w, shape_w = _slice_dropdowns(widgets, point, style)
    v_w = _bytes_slider(widgets, point.nbytes, "bytes", style)
    image, text = widgets.Image(format="png"), widgets.HTML()

    def draw(*_):
        try:
            p = slice_point(chip_w.value, shape_w.value, v_w.value)
        except ValueError as err:
            text.value = f"<pre>{err}</pre>"
            return
        _show(image, text, plots.slice_hops_chart(p.chip, p.shape, p.nbytes), p.summary())

    for w in (chip_w, shape_w, v_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([chip_w, shape_w]), v_w, image, text],
        _html(_slice_spec, point, fallback=lambda: plots.slice_hops_chart(point.chip, point.shape, point.nbytes)),
        f"slice explorer: {point.chip} {'x'.join(map(str, point.shape))}",
    )


#: The static book's slice explorer: slices of the starting chip and of one generation of the other kind.
STATIC_SLICES = {
    2: (("v5e", (4, 4)), ("v5e", (8, 8)), ("v5e", (8, 16)), ("v5e", (16, 16))),
    3: (("v5p", (2, 2, 2)), ("v5p", (4, 4, 4)), ("v5p", (4, 4, 8)), ("v5p", (8, 8, 8))),
}
STATIC_NBYTES = NBYTES_CHOICES[1::2]  # 4 kiB ... 4 GiB, every other power of 4


def _static_slices(chip: str, shape: tuple) -> tuple:
    """(chip, shape) pairs offered by the static slice and collective figures, the starting one included."""
    own = tuple((chip, s) for s in SLICE_SHAPES.get(chip, ()))[:6] or ((chip, shape),)
    other = STATIC_SLICES[2 if len(shape) == 3 else 3]
    return _with(own, (chip, shape)) + other


def _slice_rows(sl, nbytes: float, far: tuple) -> list:
    """(label, CollectiveTime) rows of the slice explorer's bars: to the farthest chip, then AllGather over each
    axis and over all of them."""
    rows = [(f"to farthest chip {far}", sl.transfer_time(nbytes, (0,) * len(sl.shape), far))]
    names = "xyz"[: len(sl.shape)]
    for i, a in enumerate(names):
        ring = "ring" if sl.wraparound[i] else "line"
        rows.append((f"AllGather over {a} ({sl.shape[i]}, {ring})", sl.collective_time("all_gather", nbytes, a)))
    rows.append((f"AllGather over {names}", sl.collective_time("all_gather", nbytes, None)))
    return rows


def _hop_heatmap(grid) -> dict:
    """Plotly heatmap of the hops from chip 0 (the z = 0 plane of a 3D slice), numbered when small enough."""
    plane = grid if grid.ndim == 2 else grid[:, :, 0]
    heat = {
        "type": "heatmap",
        "z": plane.tolist(),
        "zmin": 0,
        "zmax": max(1, int(grid.max())),
        "colorscale": "Viridis",
        "showscale": False,
        "xaxis": "x",
        "yaxis": "y",
        "hovertemplate": "row %{y}, column %{x}: %{z} hops<extra></extra>",
    }
    if plane.size <= 128:
        heat.update(texttemplate="%{z}", textfont={"size": 10})
    return heat


def _slice_heading(sl, grid) -> dict:
    """The annotation above the hop heatmap: chip, shape, wraparound and diameter."""
    wraps = "".join("w" if w else "-" for w in sl.wraparound)
    where_txt = "" if grid.ndim == 2 else " (z = 0 plane)"
    heading = (
        f"{sl.chip.name} {'×'.join(map(str, sl.shape))} [{wraps}], diameter {sl.diameter}<br>"
        f"hops from chip 0{where_txt}"
    )
    return {
        "text": heading,
        "x": 0.15,
        "xref": "paper",
        "xanchor": "center",
        "y": 1.0,
        "yref": "paper",
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": 11},
    }


def _slice_spec(point: SliceHops) -> dict:
    """The static book's version of :func:`slice_explorer`: :func:`slice_point` and the hop grid of
    :class:`tpu_notes.topology.Slice` on a grid of slices and sizes, as a Plotly figure spec."""
    import numpy as np

    from .plots import interactive as ix
    from .topology import Slice

    def cell(where, nbytes):
        chip, shape = where
        sl = Slice(chip, shape)
        grid = sl.hop_grid()
        far = tuple(int(i) for i in np.unravel_index(int(np.argmax(grid)), grid.shape))
        rows = _slice_rows(sl, nbytes, far)[::-1]
        labels = [r[0] for r in rows]
        bars = [
            _bars(labels, [r[1].bandwidth_time * 1e3 for r in rows], "bandwidth", "#1f77b4", ("x2", "y2")),
            _bars(labels, [r[1].latency_time * 1e3 for r in rows], "hops × 1 µs", "#ff7f0e", ("x2", "y2")),
        ]
        return {
            "data": [_hop_heatmap(grid)] + bars,
            "layout": {
                "annotations": [_slice_heading(sl, grid)],
                "xaxis2": {"title": {"text": f"ms to move {fmt(nbytes, 'B')}"}},
            },
            "text": slice_point(chip, shape, nbytes).summary(),
        }

    slices = _static_slices(point.chip, point.shape)
    controls = [
        ix.control(
            "slice", slices, (point.chip, point.shape), names=[f"{c} {'x'.join(map(str, s))}" for c, s in slices]
        ),
        ix.control("bytes", _with(STATIC_NBYTES, point.nbytes), point.nbytes, names=None),
    ]
    controls[1] = ix.control("bytes", controls[1].values, point.nbytes, names=[fmt(v, "B") for v in controls[1].values])
    layout = {
        "title": {"text": "Hops on a TPU slice, and the time to move an array", "font": {"size": 13}},
        "xaxis": {"domain": [0, 0.3], "showticklabels": False, "showgrid": False, "zeroline": False},
        "yaxis": {"autorange": "reversed", "showticklabels": False, "showgrid": False, "zeroline": False},
        "xaxis2": {"domain": [0.62, 1], "anchor": "y2", "rangemode": "tozero"},
        "yaxis2": {"anchor": "x2", "tickfont": {"size": 10}},
        "barmode": "stack",
        "legend": {"font": {"size": 11}},
        "margin_left": 20,
        "margin_top": 40,
    }
    return ix.explorer_spec("slice", controls, cell, layout)


#: The static book's collective explorer: these kinds, axes and sizes.
STATIC_AXES = ("x", "xy", "all")


def _collective_spec(point: CollectiveOnSlice) -> dict:
    """The static book's version of :func:`collective_explorer`: :func:`collective_point` and
    ``Slice.collective_time`` on a grid of kinds, slices, axes and sizes, as a Plotly figure spec."""
    import numpy as np

    from .plots import interactive as ix
    from .topology import Slice

    sizes = np.geomspace(1e3, 1e10, 15)  # two points a decade: each term is a straight line on log-log axes

    def cell(kind, where, axes, nbytes):
        chip, shape = where
        ax = tuple("xyz"[: len(shape)]) if axes == "all" else tuple(axes)
        p = collective_point(chip, shape, kind, ax, nbytes)
        sl = Slice(chip, shape)
        times = [sl.collective_time(kind, float(v), ax) for v in sizes]
        t = p.time
        return {
            "data": [
                _line(sizes, [x.total for x in times], "time = max of the two terms", "#1f77b4"),
                _line(sizes, [x.bandwidth_time for x in times], "bandwidth term", "#ff7f0e", "dash", 1.5),
                _line(
                    sizes, [max(x.latency_time, 1e-9) for x in times], "latency term (hops × 1 µs)", "#2ca02c", "dot"
                ),
                _line(
                    [p.nbytes],
                    [t.total],
                    f"V = {fmt(p.nbytes, 'B')}: {fmt(t.total, 's')} ({t.bound})",
                    "black",
                    mode="markers",
                ),
            ],
            "text": p.summary(),
        }

    slices = ((point.chip, point.shape),) + tuple(
        w
        for w in (("v5e", (4, 4)), ("v5e", (16, 16)), ("v5p", (4, 4, 4)), ("v5p", (8, 8, 8)))
        if w != (point.chip, point.shape)
    )
    start_axes = "".join(point.axes)
    axes_choices = STATIC_AXES if start_axes in STATIC_AXES else (start_axes,) + STATIC_AXES
    values = _with(STATIC_NBYTES, point.nbytes)
    controls = [
        ix.control("kind", _with(COLLECTIVE_CHOICES, point.kind), point.kind, kind="buttons"),
        ix.control(
            "slice", slices, slices[0], names=[f"{c} {'x'.join(map(str, s))}" for c, s in slices], kind="buttons"
        ),
        ix.control("axes", axes_choices, start_axes, kind="buttons"),
        ix.control("V", values, point.nbytes, names=[fmt(v, "B") for v in values]),
    ]
    layout = {
        "title": {"text": "One collective on a slice: time against the array size V", "font": {"size": 13}},
        "xaxis": _axis("array size V (bytes, the whole gathered / unreduced array)", log=True),
        "yaxis": _axis("time (s)", log=True, range=[-7, 1]),
        "legend": {"font": {"size": 11}},
    }
    return ix.explorer_spec("collective", controls, cell, layout)


#: The static book's memory explorer: these batches and contexts (the remat policy stays as started).
STATIC_SEQUENCE_BATCHES = (1, 4, 16, 64, 256, 1024)
STATIC_CONTEXTS = (512, 2048, 8192, 32768, 131072)


def _memory_spec(point: MemoryPoint) -> dict:
    """The static book's version of :func:`memory_explorer`: :func:`memory_point` and the curves of
    :func:`tpu_notes.plots.memory_vs_context_chart` on a grid of models, batches and contexts."""
    from .plots import interactive as ix
    from .transformer import REMAT_POLICIES, as_config

    seq_lens = list(SEQ_CHOICES)
    styles = {"none": "solid", "save_matmul_outputs": "dash", "full_block": "dot"}

    def cell(model, batch, seq_len):
        p = memory_point(model, batch, seq_len, point.policy, point.chip)
        m = as_config(model)
        data = [
            _line(
                seq_lens,
                [m.kv_cache_bytes(batch, s) for s in seq_lens],
                f"KV cache, {batch} sequences (bf16)",
                "#d62728",
                mode="lines+markers",
            )
        ]
        for policy in REMAT_POLICIES:
            data.append(
                _line(
                    seq_lens,
                    [m.checkpoint_bytes(batch * s, policy) for s in seq_lens],
                    f"activations kept, remat '{policy}'",
                    "#1f77b4",
                    styles.get(policy, "solid"),
                )
            )
        ends = [seq_lens[0], seq_lens[-1]]
        data.append(_line(ends, [p.weight_bytes] * 2, "weights (bf16)", "#7f7f7f", width=1))
        data.append(_line(ends, [p.hbm_bytes] * 2, f"HBM of one {p.chip}", "black", "dashdot", 1))
        data.append(_line([seq_len], [p.kv_bytes], f"{seq_len:,} tokens", "#d62728", mode="markers"))
        return {"data": data, "text": p.summary()}

    controls = [
        ix.control("model", _with(MEMORY_MODELS, point.model), point.model, kind="buttons"),
        ix.control("sequences", _with(STATIC_SEQUENCE_BATCHES, point.batch), point.batch),
        ix.control("context", _with(STATIC_CONTEXTS, point.seq_len), point.seq_len),
    ]
    layout = {
        "title": {"text": "Memory against context (bytes)", "font": {"size": 13}},
        "xaxis": _axis("context length (tokens per sequence)", log=True),
        "yaxis": _axis("bytes", log=True),
        "legend": {"font": {"size": 11}},
    }
    return ix.explorer_spec("memory", controls, cell, layout)


# ------------------------------------------------------------------------------------ Llama 3 training (Chapter 6)
TRAINING_CHIPS = ("v5p", "v6e", "v5e")
TRAINING_TOKENS = 15e12

#: Planner answers already computed, by their arguments: the explorer, its first drawing, its static figure and a
#: chapter's own training_run ask for the same settings several times, and one answer takes seconds (the planner's
#: results are frozen records, read and never changed here). At most _PLANS_KEPT answers are kept.
_PLANS: dict = {}
_PLANS_KEPT = 64


def _remembered(key: tuple, compute):
    """``compute()``, computed once per hashable ``key`` (an error is raised each time, never kept)."""
    try:
        hash(key)
    except TypeError:  # an unhashable argument: let the planner say what is wrong with it
        return compute()
    if key not in _PLANS:
        if len(_PLANS) >= _PLANS_KEPT:
            _PLANS.clear()
        _PLANS[key] = compute()
    return _PLANS[key]


def _pod_plan(model, chip, pods, batch_tokens, seq_len, efficiency):
    """:func:`tpu_notes.training.plan` of ``pods`` full pods of ``chip`` (remembered); None when Cloud TPU does not
    schedule the whole pod as one slice."""
    from .topology import pod
    from .training import plan

    if not pod(chip).schedulable:
        return None
    return _remembered(
        ("plan", model, chip, pods, batch_tokens, seq_len, efficiency),
        lambda: plan(model, pod(chip), batch_tokens, seq_len, n_slices=pods, matmul_efficiency=efficiency),
    )


def _legal_slices(model, chip, pods, batch_tokens, seq_len, efficiency) -> tuple:
    """The options of :func:`tpu_notes.training.subslices.plan_slices` that have a legal layout, fastest first
    (remembered)."""
    from .training.subslices import plan_slices

    return _remembered(
        ("slices", model, chip, pods, batch_tokens, seq_len, efficiency),
        lambda: tuple(
            o
            for o in plan_slices(model, chip, batch_tokens, seq_len, n_slices=pods, matmul_efficiency=efficiency)
            if o.ok
        ),
    )


def training_run(
    model: str = "llama3-70b",
    chip: str = "v5p",
    pods: int = 1,
    batch_tokens: int = 4 * 2**20,
    seq_len: int = 4096,
    tokens: float = TRAINING_TOKENS,
    efficiency: float = 0.8,
) -> str:
    """The text the training explorer shows: the planner's best layout for ``pods`` full pods of ``chip``, its
    memory per chip, step time, MFU and the days for ``tokens`` at matmul ``efficiency`` (sequence sharding on)."""
    result = _pod_plan(model, chip, pods, batch_tokens, seq_len, efficiency)
    note = ""
    if result is None or not len(result):  # the pod is not one slice, or no layout uses it: the fastest slice
        options = _legal_slices(model, chip, pods, batch_tokens, seq_len, efficiency)
        if not options:
            return result.table() if result is not None else f"{model}: no slice of {chip} has a legal layout"
        best = options[0].best
        why = "Cloud TPU does not schedule the whole pod as one slice" if result is None else "no legal layout uses it"
        note = f"  ({why}: {options[0].idle_chips:,} chips of the pod left idle)\n"
    else:
        best = result[0]
    days = best.step.total * tokens / batch_tokens / 86_400
    return (
        f"{model} on {pods} x {best.layout.slice}: {best.parallelism}, remat {best.remat}\n"
        f"{note}  placement: {best.layout.describe()}\n"
        f"  {fmt(best.memory.peak, 'B')} HBM per chip; step {fmt(best.step.total, 's')} "
        f"({best.step.bound}-bound); MFU {best.step.mfu:.0%} at {efficiency:.0%} matmul efficiency\n"
        f"  {tokens:.3g} tokens in {days:,.1f} days"
    )


def training_explorer(
    model: str = "llama3-70b",
    chip: str = "v5p",
    pods: int = 1,
    batch_tokens: int = 4 * 2**20,
    seq_len: int = 4096,
    static: bool = False,
):
    """Pick a Llama 3 model, a TPU generation, a number of full pods, a batch and a sequence length; read the
    planner's best layout, memory per chip, step time, MFU and days (:func:`training_run`). Without ipywidgets, or
    with ``static=True``, returns the text for the starting settings."""
    first = training_run(model, chip, pods, batch_tokens, seq_len)  # validates the starting settings
    widgets = _widgets_or_none(static)
    if widgets is None:
        return first
    style = {"description_width": "90px"}
    model_w = widgets.Dropdown(
        options=("llama3-8b", "llama3-70b", "llama3-405b"), value=model, description="model", style=style
    )
    chip_w = widgets.Dropdown(options=TRAINING_CHIPS, value=chip, description="chip", style=style)
    pods_w = widgets.Dropdown(options=(1, 2, 4, 8), value=pods, description="pods", style=style)
    batches = tuple(2**k for k in range(20, 26))
    batch_w = _slider(widgets, batches, batch_tokens, "batch tokens", style)
    seq_w = _dropdown(widgets, (2048, 4096, 8192), seq_len, 4096, "seq len", style)
    text = widgets.HTML()

    def draw(*_):
        import html

        try:
            out = training_run(model_w.value, chip_w.value, pods_w.value, batch_w.value, seq_w.value)
        except ValueError as err:
            out = str(err)
        text.value = f"<pre style='white-space: pre-wrap'>{html.escape(out)}</pre>"

    for w in (model_w, chip_w, pods_w, batch_w, seq_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([model_w, chip_w, pods_w]), widgets.HBox([batch_w, seq_w]), text],
        _html(_training_spec, model, chip, pods, batch_tokens, seq_len),
        f"training explorer: {model} on {pods} x {chip}",
    )


# ------------------------------------------------------------------------------------ serving (Chapters 7 and 8)
SERVING_MODELS = ("llama3-8b", "llama3-70b", "llama2-13b")
SERVING_CHIPS = ("v5e", "v5p", "v6e", "h100")
SERVING_CONTEXTS = (1024, 2048, 4096, 8192, 16384, 32768)


def serving_summary(
    model: str = "llama2-13b",
    chip: str = "v5e",
    n_chips: int = 8,
    seq_len: int = 8192,
    batch: int = 32,
    weight_dtype: str = "bf16",
) -> str:
    """A few lines on one generation setting: the step and its parts, throughput per chip, whether it fits."""
    from .inference import decode_step_time

    s = decode_step_time(model, chip, n_chips, batch, seq_len, weight_dtype=weight_dtype, kv_dtype=weight_dtype)
    return (
        f"{model} on {n_chips} x {chip}, batch {batch}, {seq_len:,} tokens, {weight_dtype}\n"
        f"  step {fmt(s.total, 's')} = KV {fmt(s.kv_load, 's')} + max(weights {fmt(s.weight_load, 's')}, "
        f"FLOPs {fmt(s.flops_time, 's')}): {s.bound}-bound\n"
        f"  {fmt(s.tokens_per_s_per_chip, 'tokens/s')} per chip; memory {fmt(s.memory_per_chip, 'B')} per "
        f"chip of {fmt(s.hbm_per_chip, 'B')} ({'fits' if s.fits else 'does not fit'})"
    )


def serving_explorer(
    model: str = "llama2-13b",
    chip: str = "v5e",
    n_chips: int = 8,
    seq_len: int = 8192,
    batch: int = 32,
    static: bool = False,
):
    """Latency against throughput of generation (:func:`tpu_notes.plots.latency_throughput_chart`) for a model,
    chip, chip count and context, with the summary of one batch (:func:`serving_summary`). Without ipywidgets, or
    with ``static=True``, returns the static figure for the starting settings."""
    from . import plots

    serving_summary(model, chip, n_chips, seq_len, batch)  # validates the starting settings
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.latency_throughput_chart(model, chip, n_chips, seq_len)
    style = {"description_width": "70px"}
    model_w = _dropdown(widgets, SERVING_MODELS, model, "llama3-8b", "model", style)
    chip_w = _dropdown(widgets, SERVING_CHIPS, chip, "v5e", "chip", style)
    counts = (1, 2, 4, 8, 16, 32, 64)
    chips_w = _dropdown(widgets, counts, n_chips, 8, "chips", style)
    seq_w = _slider(widgets, SERVING_CONTEXTS, seq_len, "context", style)
    batch_w = _slider(widgets, tuple(2**k for k in range(10)), batch, "batch", style)
    image, text = widgets.Image(format="png"), widgets.HTML()

    def draw(*_):
        try:
            fig = plots.latency_throughput_chart(model_w.value, chip_w.value, chips_w.value, seq_w.value)
            fig.set_size_inches(5.5, 3.6)
            summary = serving_summary(model_w.value, chip_w.value, chips_w.value, seq_w.value, batch_w.value)
        except ValueError as err:
            text.value = f"<pre>{err}</pre>"
            return
        _show(image, text, fig, summary)

    for w in (model_w, chip_w, chips_w, seq_w, batch_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([model_w, chip_w, chips_w]), widgets.HBox([seq_w, batch_w]), image, text],
        _html(
            _serving_spec,
            model,
            chip,
            n_chips,
            seq_len,
            batch,
            fallback=lambda: plots.latency_throughput_chart(model, chip, n_chips, seq_len),
        ),
        f"serving explorer: {model} on {n_chips} x {chip}",
    )


# ------------------------------------------------------------------------------------ GPUs (Chapter 11)
GPU_CHIPS = ("h100", "h200", "b200", "gb200")
GPU_MODELS = ("llama3-8b", "llama3-70b", "llama3-405b", "deepseek-v3")
GPU_NODES = (1, 2, 4, 8, 16, 32, 64, 128)
GPU_TREES = ("flat", "superpod")


def gpu_cluster(chip: str = "h100", nodes: int = 8, fat_tree: str = "superpod"):
    """The explorer's cluster: ``nodes`` NVLink nodes of ``chip`` under one full-bisection level (``"flat"``)
    or NVIDIA's SuperPod levels (``"superpod"``: 32-node units for 8-GPU nodes, 8 racks for GB200 NVL72)."""
    from .gpu import GpuCluster, dgx_superpod

    c = get_chip(chip)
    n = check_positive("nodes", nodes, integer=True) * (c.node_size or 0)
    if fat_tree not in GPU_TREES:
        raise ValueError(f"fat_tree must be one of {GPU_TREES}; got {fat_tree!r}")
    if fat_tree == "flat":
        return GpuCluster(c, n)
    return dgx_superpod(c, n, nodes_per_su=8 if c.node_size > 8 else 32)


def gpu_strategies(
    chip: str = "h100",
    nodes: int = 8,
    fat_tree: str = "superpod",
    model: str = "llama3-70b",
    tokens_per_gpu: int = 2048,
):
    """``(cluster, rows, text)``: the comms-vs-compute of DP/TP/EP/PP (:func:`tpu_notes.training.strategy_times`)
    of ``model`` on :func:`gpu_cluster` with ``tokens_per_gpu`` tokens of batch per GPU, and a summary."""
    from .training import critical_batch_per_gpu, strategy_times

    cluster = gpu_cluster(chip, nodes, fat_tree)
    b = check_positive("tokens_per_gpu", tokens_per_gpu, integer=True)
    rows = strategy_times(cluster, model, b * cluster.n_gpus)
    lines = [
        f"{model} on {cluster}",
        f"batch {b:,} tokens per GPU ({b * cluster.n_gpus:,} in all); "
        f"DP needs {critical_batch_per_gpu(cluster.chip, across_nodes=cluster.n_nodes > 1):,.0f} per GPU",
    ]
    lines += [
        f"  {r.strategy.upper():2s} {r.degree:5d}-way: compute {fmt(r.math, 's'):>9}, comms "
        f"{fmt(r.comms, 's'):>9} -> {r.bound}-bound"
        for r in rows
    ]
    return cluster, rows, "\n".join(lines)


def gpu_explorer(
    chip: str = "h100",
    nodes: int = 8,
    fat_tree: str = "superpod",
    model: str = "llama3-70b",
    tokens_per_gpu: int = 2048,
    static: bool = False,
):
    """Pick a GPU, a number of nodes, a fat tree, a model and a batch per GPU; see one MLP block's compute and
    each strategy's communication (:func:`gpu_strategies`). Without ipywidgets, or with ``static=True``, returns
    the static figure for the starting settings."""
    from . import plots

    cluster, rows, text0 = gpu_strategies(chip, nodes, fat_tree, model, tokens_per_gpu)
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.gpu_strategy_chart(rows, text0.splitlines()[0])
    style = {"description_width": "90px"}
    chip_w = widgets.Dropdown(options=GPU_CHIPS, value=cluster.chip.name, description="GPU", style=style)
    nodes_w = _dropdown(widgets, GPU_NODES, nodes, 8, "nodes", style)
    tree_w = widgets.Dropdown(options=GPU_TREES, value=fat_tree, description="fat tree", style=style)
    model_w = _dropdown(widgets, GPU_MODELS, model, "llama3-70b", "model", style)
    batches = tuple(2**k for k in range(8, 16))
    batch_w = _slider(widgets, batches, tokens_per_gpu, "tokens/GPU", style)
    image, text = widgets.Image(format="png"), widgets.HTML()

    def draw(*_):
        try:
            _, r, t = gpu_strategies(chip_w.value, nodes_w.value, tree_w.value, model_w.value, batch_w.value)
        except ValueError as err:
            text.value = f"<pre>{err}</pre>"
            return
        _show(image, text, plots.gpu_strategy_chart(r, t.splitlines()[0]), t)

    for w in (chip_w, nodes_w, tree_w, model_w, batch_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([chip_w, nodes_w, tree_w]), widgets.HBox([model_w, batch_w]), image, text],
        _html(
            _gpu_spec,
            cluster.chip.name,
            nodes,
            fat_tree,
            model,
            tokens_per_gpu,
            fallback=lambda: plots.gpu_strategy_chart(rows, text0.splitlines()[0]),
        ),
        f"GPU explorer: {model} on {nodes} nodes of {cluster.chip.name}",
    )


# ------------------------------------------------------------------------------------ serving Llama 3 (Chapter 8)
PARETO_CONTEXTS = (2048, 4096, 8192, 16384, 32768, 65536)
PARETO_DTYPES = ("bf16", "int8", "int4")


def pareto_summary(
    model: str = "llama3-70b",
    chip: str = "v5e",
    seq_len: int = 8192,
    weight_dtype: str = "int8",
    chip_counts=(4, 8, 16, 32, 64),
    expected: bool = True,
):
    """``(steps, text)``: every (chip count, batch) generation step that fits at ``seq_len`` (weights and KV cache in
    ``weight_dtype``, batches 1 to 512) and a few lines on its latency–throughput frontier. The steps are the
    engine's, with their collectives at the efficiency model's rates (``expected=False``: Chapter 7's perfectly
    sharded roofline). Raises ``ValueError`` when nothing fits."""
    from .inference import latency_throughput_curve, pareto_frontier
    from .units import check_bool, check_sizes

    counts = check_sizes("chip_counts", chip_counts)
    check_bool("expected", expected)
    steps = []
    for n in counts:
        steps += latency_throughput_curve(
            model,
            chip,
            n,
            seq_len,
            [2**i for i in range(10)],
            weight_dtype=weight_dtype,
            kv_dtype=weight_dtype,
            fitting_only=True,
            expected=expected,
        )
    if not steps:
        raise ValueError(
            f"nothing fits: {model} in {weight_dtype} at {seq_len:,} tokens of context on "
            f"{max(counts)} x {chip}; lower seq_len or add chip_counts"
        )
    front = pareto_frontier(list(steps))
    fast, cheap = front[0], front[-1]
    text = (
        f"{len(steps)} settings fit, {len(front)} on the frontier\n"
        f"  fastest: {fast.n_chips} chips, batch {fast.batch}: {fmt(fast.total, 's')} per token, "
        f"{fast.tokens_per_s_per_chip:.0f} tokens/s/chip\n"
        f"  cheapest: {cheap.n_chips} chips, batch {cheap.batch}: {fmt(cheap.total, 's')} per token, "
        f"{cheap.tokens_per_s_per_chip:.0f} tokens/s/chip"
    )
    return steps, text


def pareto_explorer(
    model: str = "llama3-70b",
    chip: str = "v5e",
    seq_len: int = 8192,
    weight_dtype: str = "int8",
    chip_counts=(4, 8, 16, 32, 64),
    static: bool = False,
):
    """The latency–throughput frontier across chip counts and batches (:func:`tpu_notes.plots.pareto_chart`, the
    engine's steps with their collectives, as :func:`pareto_summary`), with the context and the precision as
    controls. Without ipywidgets, or with ``static=True``, returns the static figure for the starting settings."""
    from . import plots

    def figure(ctx, wd):
        steps, text = pareto_summary(model, chip, ctx, wd, chip_counts)
        name = getattr(model, "name", model)
        title = f"{name}, {wd} on {chip}, {ctx:,}-token context, with communication"
        return plots.pareto_chart(steps, title=title), text

    widgets = _widgets_or_none(static)
    fig, _ = figure(seq_len, weight_dtype)  # validates the starting settings
    if widgets is None:
        return fig
    import matplotlib.pyplot as plt

    plt.close(fig)
    style = {"description_width": "70px"}
    seq_w = _slider(widgets, PARETO_CONTEXTS, seq_len, "context", style)
    dtype_w = _dropdown(widgets, PARETO_DTYPES, weight_dtype, "int8", "precision", style)
    image, text = widgets.Image(format="png"), widgets.HTML()

    def draw(*_):
        try:
            fig, summary = figure(seq_w.value, dtype_w.value)
        except ValueError as err:
            text.value = f"<pre>{err}</pre>"
            return
        fig.set_size_inches(5.5, 3.6)
        _show(image, text, fig, summary)

    for w in (seq_w, dtype_w):
        w.observe(draw, names="value")
    draw()
    return _explorer(
        [widgets.HBox([seq_w, dtype_w]), image, text],
        _html(
            _pareto_spec,
            model,
            chip,
            seq_len,
            weight_dtype,
            chip_counts,
            fallback=lambda: figure(seq_len, weight_dtype)[0],
        ),
        f"Pareto explorer: {getattr(model, 'name', model)} on {chip}",
    )


def _bars(labels, values, name, color, xaxis=("x", "y"), offset=None):
    trace = {
        "type": "bar",
        "orientation": "h",
        "x": list(values),
        "y": list(labels),
        "name": name,
        "marker": {"color": color},
        "xaxis": xaxis[0],
        "yaxis": xaxis[1],
    }
    if offset is not None:
        trace["offsetgroup"] = offset
    return trace


def _plan_cell(plans, top: int, slices: bool = False) -> dict:
    """Traces of :func:`tpu_notes.plots.planner_chart` (compute, bubble, communication per step; HBM per chip) for
    the first ``top`` of ``plans`` (``Plan`` records, fastest first); ``slices`` names each one's slice too."""
    plans = list(plans)[:top]
    labels = [(f"{p.layout.slice} " if slices and p.layout else "") + f"{p.parallelism} | {p.remat}" for p in plans]
    data = [
        _bars(labels, [p.step.compute for p in plans], "compute", "#1f77b4", offset="a"),
        _bars(labels, [p.step.bubble for p in plans], "bubble", "#bcbd22", offset="a"),
        _bars(labels, [p.step.comms for p in plans], "communication", "#ff7f0e", offset="b"),
        _bars(labels, [p.memory.peak / 1e9 for p in plans], "peak memory per chip", "#2ca02c", ("x2", "y2")),
    ]
    hbm = _plan_hbm(plans)
    if hbm is None:
        return {"data": data}
    line = {"type": "line", "xref": "x2", "yref": "paper", "x0": hbm / 1e9, "x1": hbm / 1e9, "y0": 0, "y1": 1}
    line["line"] = {"color": "black", "dash": "dash", "width": 1.5}
    note = {"text": "HBM", "x": hbm / 1e9, "xref": "x2", "y": 1, "yref": "paper", "yanchor": "bottom"}
    note.update(showarrow=False, font={"size": 11})
    return {"data": data, "layout": {"shapes": [line], "annotations": [note]}}


def _plan_hbm(plans) -> float | None:
    """The HBM capacity (bytes) of one chip of the plans' system, or None when the plans do not say."""
    for p in plans:
        chip = getattr(getattr(p.layout, "slice", None), "chip", None)
        if getattr(chip, "hbm_bytes", None):
            return float(chip.hbm_bytes)
    return None


def _plan_layout(title: str) -> dict:
    return {
        "title": {"text": title, "font": {"size": 13}},
        "xaxis": {"domain": [0, 0.62], "title": {"text": "seconds per step"}},
        "yaxis": {"autorange": "reversed", "tickfont": {"size": 10}, "automargin": True},
        "xaxis2": {"domain": [0.7, 1], "anchor": "y2", "title": {"text": "peak GB per chip"}, "rangemode": "tozero"},
        "yaxis2": {"anchor": "x2", "autorange": "reversed", "showticklabels": False, "matches": "y"},
        "barmode": "stack",
        "legend": {"font": {"size": 11}},
        "margin_left": 200,
    }


#: The static book's planner figure: these models and batches (slice and sequence length as started).
STATIC_PLANNER_MODELS = ("llama3-8b", "llama3-70b")
STATIC_PLANNER_BATCHES = (2**20, 2**22, 2**24)


def _planner_spec(model, slice_, batch_tokens, seq_len, top) -> dict:
    """The static book's version of :func:`planner_explorer`: :func:`tpu_notes.training.plan` for a few models and
    batches, its top layouts drawn as :func:`tpu_notes.plots.planner_chart` draws them."""
    from .plots import interactive as ix
    from .training import plan

    def cell(m, batch):
        result = plan(m, parse_slice(slice_), batch, seq_len)
        if not result.ranked:
            raise ValueError(result.table(top))
        out = _plan_cell(result.ranked, top)
        lines = [result.table(top), "best placement: " + result.ranked[0].layout.describe()]
        lines.append("rejected: " + ", ".join(f"{n} {r}" for r, n in result.reasons().items()))
        out["text"] = "\n".join(lines)
        return out

    controls = [
        ix.control("model", _with(STATIC_PLANNER_MODELS, model), model, kind="buttons"),
        ix.control(
            "batch tokens",
            _with(STATIC_PLANNER_BATCHES, batch_tokens),
            batch_tokens,
            names=[f"{b:,}" for b in _with(STATIC_PLANNER_BATCHES, batch_tokens)],
        ),
    ]
    return ix.explorer_spec("planner", controls, cell, _plan_layout(f"The planner's best layouts on {slice_}"))


#: The static book's training figure: every model of the explorer (chip, pods, batch and length as started).
STATIC_TRAINING_MODELS = ("llama3-8b", "llama3-70b", "llama3-405b")


def _training_spec(model, chip, pods, batch_tokens, seq_len) -> dict:
    """The static book's version of :func:`training_explorer`: :func:`training_run` for each Llama 3 model, with
    the planner's best layouts of ``pods`` full pods drawn as :func:`tpu_notes.plots.planner_chart` draws them."""
    from .plots import interactive as ix

    def cell(m):
        result = _pod_plan(m, chip, pods, batch_tokens, seq_len, 0.8)
        if result is not None and result.ranked:
            out = _plan_cell(result.ranked, 6)
        else:  # as training_run: the pod is not one slice or has no legal layout: the fastest slices that have one
            options = _legal_slices(m, chip, pods, batch_tokens, seq_len, 0.8)
            out = _plan_cell([o.best for o in options], 6, slices=True)
        out["text"] = training_run(m, chip, pods, batch_tokens, seq_len)
        return out

    controls = [ix.control("model", _with(STATIC_TRAINING_MODELS, model), model, kind="buttons")]
    title = f"Training on {pods} x {chip} pod(s), {batch_tokens:,} tokens a batch of {seq_len:,}-token sequences"
    return ix.explorer_spec("training", controls, cell, _plan_layout(title))


#: The static book's serving figure: these chip counts and contexts (the batch summarised stays as started).
STATIC_SERVING_COUNTS = (2, 8, 32)
STATIC_SERVING_CONTEXTS = (1024, 4096, 16384)
_DTYPE_COLORS = {"bf16": "#1f77b4", "int8": "#ff7f0e", "int4": "#2ca02c"}


def _serving_spec(model, chip, n_chips, seq_len, batch) -> dict:
    """The static book's version of :func:`serving_explorer`: the curves of
    :func:`tpu_notes.plots.latency_throughput_chart` (:func:`tpu_notes.inference.latency_throughput_curve`) and
    :func:`serving_summary` on a grid of models, chips, chip counts and contexts."""
    from .inference import latency_throughput_curve
    from .plots import interactive as ix

    batches = [2**k for k in range(10)]

    def cell(m, c, n, s):
        data = []
        for wd in ("bf16", "int8"):
            pts = latency_throughput_curve(m, c, n, s, batches, weight_dtype=wd, kv_dtype=wd)
            color = _DTYPE_COLORS[wd]
            data.append(
                _line(
                    [p.tokens_per_s_per_chip for p in pts],
                    [p.total * 1e3 for p in pts],
                    f"{wd} weights and KV",
                    color,
                    mode="lines+markers",
                    marker={
                        "color": [color if p.fits else "white" for p in pts],
                        "line": {"color": color, "width": 1.5},
                        "size": 7,
                    },
                )
            )
        return {"data": data, "text": serving_summary(m, c, n, s, batch)}

    controls = [
        ix.control("model", _with(SERVING_MODELS, model), model, kind="buttons"),
        ix.control("chip", _with(SERVING_CHIPS, chip), chip, kind="buttons"),
        ix.control("chips", _with(STATIC_SERVING_COUNTS, n_chips), n_chips),
        ix.control("context", _with(STATIC_SERVING_CONTEXTS, seq_len), seq_len),
    ]
    layout = {
        "title": {
            "text": f"Latency against throughput (hollow: does not fit; summary: batch {batch})",
            "font": {"size": 13},
        },
        "xaxis": _axis("throughput, tokens/s per chip", log=True),
        "yaxis": _axis("latency, ms per token", log=True),
        "legend": {"font": {"size": 11}},
    }
    return ix.explorer_spec("serving", controls, cell, layout)


def _pareto_spec(model, chip, seq_len, weight_dtype, chip_counts) -> dict:
    """The static book's version of :func:`pareto_explorer`: :func:`pareto_summary` (the engine's steps and their
    frontier) for every context and precision the explorer offers."""
    from .inference import pareto_frontier
    from .plots import interactive as ix

    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")

    def cell(ctx, wd):
        steps, text = pareto_summary(model, chip, ctx, wd, chip_counts)
        data = []
        for color, n in zip(colors * 4, sorted({s.n_chips for s in steps})):
            pts = sorted((s for s in steps if s.n_chips == n), key=lambda s: s.batch)
            data.append(
                _line(
                    [s.tokens_per_s_per_chip for s in pts],
                    [s.total * 1e3 for s in pts],
                    f"{n} chips",
                    color,
                    width=1,
                    mode="lines+markers",
                    text=[f"batch {s.batch}" for s in pts],
                )
            )
        front = pareto_frontier(list(steps))
        data.append(
            _line(
                [s.tokens_per_s_per_chip for s in front],
                [s.total * 1e3 for s in front],
                "frontier",
                "rgba(0,0,0,0.35)",
                width=5,
            )
        )
        return {"data": data, "text": text}

    controls = [
        ix.control(
            "context",
            _with(PARETO_CONTEXTS, seq_len),
            seq_len,
            names=[f"{c:,}" for c in _with(PARETO_CONTEXTS, seq_len)],
        ),
        ix.control("precision", _with(PARETO_DTYPES, weight_dtype), weight_dtype, kind="buttons"),
    ]
    name = getattr(model, "name", model)
    layout = {
        "title": {"text": f"{name} on {chip}: latency against throughput, with communication", "font": {"size": 13}},
        "xaxis": _axis("throughput, tokens/s per chip (cost falls to the right)", log=True),
        "yaxis": _axis("latency, ms per token", log=True),
        "legend": {"font": {"size": 11}},
    }
    return ix.explorer_spec("pareto", controls, cell, layout)


#: The static book's GPU figure: these node counts and batches (fat tree as started).
STATIC_GPU_NODES = (1, 8, 64)
STATIC_GPU_BATCHES = (256, 1024, 4096, 16384)


def _gpu_spec(chip, nodes, fat_tree, model, tokens_per_gpu) -> dict:
    """The static book's version of :func:`gpu_explorer`: :func:`gpu_strategies` on a grid of GPUs, node counts,
    models and batches, drawn as :func:`tpu_notes.plots.gpu_strategy_chart` draws it."""
    from .plots import interactive as ix

    def cell(c, m, n, b):
        _, rows, text = gpu_strategies(c, n, fat_tree, m, b)
        labels = [f"{r.strategy.upper()} ({r.degree}-way)<br>{r.bound}-bound" for r in rows]
        data = [
            {
                "type": "bar",
                "x": labels,
                "y": [r.math for r in rows],
                "name": "compute",
                "marker": {"color": "#1f77b4"},
            },
            {
                "type": "bar",
                "x": labels,
                "y": [r.comms for r in rows],
                "name": "communication",
                "marker": {"color": "#d62728"},
            },
        ]
        return {"data": data, "text": text}

    controls = [
        ix.control("GPU", _with(GPU_CHIPS, chip), chip, kind="buttons"),
        ix.control("model", _with(GPU_MODELS, model), model, kind="buttons"),
        ix.control("nodes", _with(STATIC_GPU_NODES, nodes), nodes),
        ix.control("tokens/GPU", _with(STATIC_GPU_BATCHES, tokens_per_gpu), tokens_per_gpu),
    ]
    layout = {
        "title": {
            "text": f"One MLP block on a GPU cluster ({fat_tree} fat tree): compute and communication",
            "font": {"size": 13},
        },
        "xaxis": {"type": "category"},
        "yaxis": _axis("seconds per MLP block", log=True),
        "barmode": "group",
        "legend": {"font": {"size": 11}},
    }
    return ix.explorer_spec("gpu", controls, cell, layout)
