"""Interactive explorers for the notebooks, built on the analysis modules and :mod:`tpu_notes.plots`.

``roofline_explorer`` (Chapter 1: a matmul on a chip's roofline), ``slice_explorer`` (Chapter 2: hops and transfer
time on a TPU slice), ``collective_explorer`` (Chapter 3: one
collective on a slice, its hops and its two cost terms), ``memory_explorer`` (Chapter 4: KV cache and remat
activations against batch and context).

Each explorer returns an ipywidgets box when ipywidgets can run, and otherwise (ipywidgets missing, or
``static=True``) falls back to the static matplotlib figure for its starting settings, so a notebook still shows
something in a plain HTML page or a kernel without widgets. Widget state is kept small: a few controls, one
80-dpi PNG and a few lines of text, set as widget values (nothing is printed into the cell's output).
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


def roofline_explorer(
    chip="v5e", dtype: str = "bf16", B: int = 256, D: int = 8192, F: int = 8192, static: bool = False
):
    """Explore where a matmul ``[B, D] x [D, F]`` lands on a chip's roofline, and how long it takes.

    Returns an ipywidgets ``VBox`` (chip and dtype menus, B/D/F sliders, then an ``Image`` of the roofline and an
    ``HTML`` summary, both redrawn on change). Without ipywidgets, or with ``static=True``, returns the static
    matplotlib Figure for
    the starting settings instead (see :func:`tpu_notes.plots.matmul_on_roofline`).
    """
    from . import plots

    point = matmul_point(chip, dtype, B, D, F)  # validates the starting settings either way
    widgets = _widgets_or_none(static)
    if widgets is None:
        return plots.matmul_on_roofline(point.B, point.D, point.F, chip=point.chip, dtype=point.dtype)

    def nearest(value, choices):
        return min(choices, key=lambda c: abs(c - value))

    style = {"description_width": "70px"}
    chip_w = widgets.Dropdown(options=sorted(CHIPS), value=point.chip, description="chip", style=style)
    dtype_w = widgets.Dropdown(
        options=DTYPE_CHOICES,
        value=point.dtype if point.dtype in DTYPE_CHOICES else "bf16",
        description="dtype",
        style=style,
    )
    b_w = widgets.SelectionSlider(
        options=BATCH_CHOICES, value=nearest(point.B, BATCH_CHOICES), description="B (tokens)", style=style
    )
    d_w = widgets.SelectionSlider(
        options=DIM_CHOICES, value=nearest(point.D, DIM_CHOICES), description="D", style=style
    )
    f_w = widgets.SelectionSlider(
        options=DIM_CHOICES, value=nearest(point.F, DIM_CHOICES), description="F", style=style
    )
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


def _show(image, text, fig, summary: str) -> None:
    """Put ``fig`` (as an 80-dpi PNG) and ``summary`` into the explorer's Image and HTML widgets."""
    import html
    import io

    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    plt.close(fig)
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

    chip_w = widgets.Dropdown(
        options=sorted(SLICE_SHAPES),
        value=point.chip if point.chip in SLICE_SHAPES else "v5e",
        description="chip",
        style=style,
    )
    shapes = SLICE_SHAPES[chip_w.value]
    shape_w = widgets.Dropdown(
        options=[("x".join(map(str, s)), s) for s in shapes],
        value=point.shape if point.shape in shapes else DEFAULT_SHAPES[chip_w.value],
        description="slice",
        style=style,
    )
    kind_w = widgets.Dropdown(
        options=COLLECTIVE_CHOICES,
        value=point.kind if point.kind in COLLECTIVE_CHOICES else "all_gather",
        description="kind",
        style=style,
    )
    axes_w = widgets.Dropdown(
        options=axis_options(shape_w.value),
        value="".join(point.axes) if "".join(point.axes) in axis_options(shape_w.value) else "x",
        description="axes",
        style=style,
    )
    v_w = widgets.SelectionSlider(
        options=[(fmt(v, "B"), v) for v in NBYTES_CHOICES],
        value=min(NBYTES_CHOICES, key=lambda v: abs(v - point.nbytes)),
        description="V",
        style=style,
    )
    image, text = widgets.Image(format="png"), widgets.HTML()

    def on_chip(*_):
        options = SLICE_SHAPES[chip_w.value]
        shape_w.options = [("x".join(map(str, s)), s) for s in options]
        shape_w.value = DEFAULT_SHAPES[chip_w.value]

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

    chip_w.observe(on_chip, names="value")
    shape_w.observe(on_shape, names="value")
    for w in (chip_w, shape_w, kind_w, axes_w, v_w):
        w.observe(draw, names="value")
    draw()
    return widgets.VBox([widgets.HBox([chip_w, shape_w, kind_w, axes_w]), v_w, image, text])


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

    def nearest(value, choices):
        return min(choices, key=lambda c: abs(c - value))

    style = {"description_width": "70px"}
    model_w = widgets.Dropdown(
        options=MEMORY_MODELS,
        value=point.model if point.model in MEMORY_MODELS else "llama3-8b",
        description="model",
        style=style,
    )
    policy_w = widgets.Dropdown(options=REMAT_POLICIES, value=point.policy, description="remat", style=style)
    batch_w = widgets.SelectionSlider(
        options=SEQUENCE_BATCH_CHOICES,
        value=nearest(point.batch, SEQUENCE_BATCH_CHOICES),
        description="sequences",
        style=style,
    )
    seq_w = widgets.SelectionSlider(
        options=SEQ_CHOICES, value=nearest(point.seq_len, SEQ_CHOICES), description="context", style=style
    )
    image, text = widgets.Image(format="png"), widgets.HTML()

    def draw(*_):
        p = memory_point(model_w.value, batch_w.value, seq_w.value, policy_w.value, point.chip)
        fig = plots.memory_vs_context_chart(p.model, p.batch, p.seq_len, p.chip)
        fig.set_size_inches(5.5, 3.4)
        _show(image, text, fig, p.summary())

    for w in (model_w, policy_w, batch_w, seq_w):
        w.observe(draw, names="value")
    draw()
    return widgets.VBox([widgets.HBox([model_w, policy_w]), widgets.HBox([batch_w, seq_w]), image, text])


# ------------------------------------------------------------------------------------------ planner (Chapter 5)
#: Slices offered by the planner explorer, as ``python -m tpu_notes plan`` spells them.
PLANNER_SLICES = ("v5p:16x16x16", "v5p:16x20x28", "v5p:8x16x16", "v5p:4x4x8", "v5e:16x16", "v6e:16x16", "v4p:16x16x16")
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
    model_w = widgets.Dropdown(
        options=PLANNER_MODELS,
        value=model if model in PLANNER_MODELS else PLANNER_MODELS[1],
        description="model",
        style=style,
    )
    slice_w = widgets.Dropdown(
        options=PLANNER_SLICES,
        value=slice if slice in PLANNER_SLICES else PLANNER_SLICES[0],
        description="slice",
        style=style,
    )
    batches = tuple(2**k for k in range(18, 27))
    batch_w = widgets.SelectionSlider(
        options=batches,
        value=min(batches, key=lambda b: abs(b - batch_tokens)),
        description="batch tokens",
        style=style,
    )
    seq_w = widgets.Dropdown(
        options=(2048, 4096, 8192, 16384, 32768),
        value=seq_len if seq_len in (2048, 4096, 8192, 16384, 32768) else 4096,
        description="seq len",
        style=style,
    )
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
    return widgets.VBox([widgets.HBox([model_w, slice_w]), widgets.HBox([batch_w, seq_w]), seqshard_w, text])


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
    chip_w = widgets.Dropdown(
        options=sorted(SLICE_SHAPES),
        value=point.chip if point.chip in SLICE_SHAPES else "v5e",
        description="chip",
        style=style,
    )
    shapes = SLICE_SHAPES[chip_w.value]
    shape_w = widgets.Dropdown(
        options=[("x".join(map(str, s)), s) for s in shapes],
        value=point.shape if point.shape in shapes else DEFAULT_SHAPES[chip_w.value],
        description="slice",
        style=style,
    )
    v_w = widgets.SelectionSlider(
        options=[(fmt(v, "B"), v) for v in NBYTES_CHOICES],
        value=min(NBYTES_CHOICES, key=lambda v: abs(v - point.nbytes)),
        description="bytes",
        style=style,
    )
    image, text = widgets.Image(format="png"), widgets.HTML()

    def on_chip(*_):
        shape_w.options = [("x".join(map(str, s)), s) for s in SLICE_SHAPES[chip_w.value]]
        shape_w.value = DEFAULT_SHAPES[chip_w.value]

    def draw(*_):
        try:
            p = slice_point(chip_w.value, shape_w.value, v_w.value)
        except ValueError as err:
            text.value = f"<pre>{err}</pre>"
            return
        _show(image, text, plots.slice_hops_chart(p.chip, p.shape, p.nbytes), p.summary())

    chip_w.observe(on_chip, names="value")
    for w in (chip_w, shape_w, v_w):
        w.observe(draw, names="value")
    draw()
    return widgets.VBox([widgets.HBox([chip_w, shape_w]), v_w, image, text])


# ------------------------------------------------------------------------------------ Llama 3 training (Chapter 6)
TRAINING_CHIPS = ("v5p", "v6e", "v5e")
TRAINING_TOKENS = 15e12


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
    from .topology import pod
    from .training import plan

    result = plan(model, pod(chip), batch_tokens, seq_len, n_slices=pods, matmul_efficiency=efficiency)
    note = ""
    if not len(result):  # no legal layout uses every chip of the pod: take the fastest slice that has one
        from .training.subslices import plan_slices

        options = [
            o
            for o in plan_slices(model, chip, batch_tokens, seq_len, n_slices=pods, matmul_efficiency=efficiency)
            if o.ok
        ]
        if not options:
            return result.table()
        best = options[0].best
        note = f"  (no legal layout uses the full pod: {options[0].idle_chips:,} chips left idle)\n"
    else:
        best = result[0]
    days = best.step.total * tokens / batch_tokens / 86_400
    return (
        f"{model} on {pods} x {best.layout.slice!r}: {best.parallelism.label()}, remat {best.remat}\n"
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
    batch_w = widgets.SelectionSlider(
        options=batches,
        value=min(batches, key=lambda b: abs(b - batch_tokens)),
        description="batch tokens",
        style=style,
    )
    seq_w = widgets.Dropdown(
        options=(2048, 4096, 8192),
        value=seq_len if seq_len in (2048, 4096, 8192) else 4096,
        description="seq len",
        style=style,
    )
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
    return widgets.VBox([widgets.HBox([model_w, chip_w, pods_w]), widgets.HBox([batch_w, seq_w]), text])


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
    model_w = widgets.Dropdown(
        options=SERVING_MODELS,
        value=model if model in SERVING_MODELS else "llama3-8b",
        description="model",
        style=style,
    )
    chip_w = widgets.Dropdown(
        options=SERVING_CHIPS, value=chip if chip in SERVING_CHIPS else "v5e", description="chip", style=style
    )
    counts = (1, 2, 4, 8, 16, 32, 64)
    chips_w = widgets.Dropdown(
        options=counts, value=n_chips if n_chips in counts else 8, description="chips", style=style
    )
    seq_w = widgets.SelectionSlider(
        options=SERVING_CONTEXTS,
        value=min(SERVING_CONTEXTS, key=lambda s: abs(s - seq_len)),
        description="context",
        style=style,
    )
    batch_w = widgets.SelectionSlider(
        options=tuple(2**k for k in range(10)),
        value=min((2**k for k in range(10)), key=lambda b: abs(b - batch)),
        description="batch",
        style=style,
    )
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
    return widgets.VBox([widgets.HBox([model_w, chip_w, chips_w]), widgets.HBox([seq_w, batch_w]), image, text])


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
        f"{model} on {cluster!r}",
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
    nodes_w = widgets.Dropdown(
        options=GPU_NODES, value=nodes if nodes in GPU_NODES else 8, description="nodes", style=style
    )
    tree_w = widgets.Dropdown(options=GPU_TREES, value=fat_tree, description="fat tree", style=style)
    model_w = widgets.Dropdown(
        options=GPU_MODELS, value=model if model in GPU_MODELS else "llama3-70b", description="model", style=style
    )
    batches = tuple(2**k for k in range(8, 16))
    batch_w = widgets.SelectionSlider(
        options=batches,
        value=min(batches, key=lambda x: abs(x - tokens_per_gpu)),
        description="tokens/GPU",
        style=style,
    )
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
    return widgets.VBox([widgets.HBox([chip_w, nodes_w, tree_w]), widgets.HBox([model_w, batch_w]), image, text])


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
    seq_w = widgets.SelectionSlider(
        options=PARETO_CONTEXTS,
        value=min(PARETO_CONTEXTS, key=lambda s: abs(s - seq_len)),
        description="context",
        style=style,
    )
    dtype_w = widgets.Dropdown(
        options=PARETO_DTYPES,
        value=weight_dtype if weight_dtype in PARETO_DTYPES else "int8",
        description="precision",
        style=style,
    )
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
    return widgets.VBox([widgets.HBox([seq_w, dtype_w]), image, text])
