"""Figures of Chapter 5 (training parallelism), drawn from :mod:`tpu_notes.training`."""

from __future__ import annotations

import numpy as np

from ..hardware import get_chip
from ..units import fmt
from .style import decade_ticks, figure_and_axes, legend_below, new_figure

_KIND_COLORS = {
    "compute": "#1f77b4",
    "fsdp": "#ff7f0e",
    "data": "#8c564b",
    "tensor": "#2ca02c",
    "expert": "#9467bd",
    "pipeline": "#7f7f7f",
    "dcn": "#d62728",
    "bubble": "#c7c7c7",
}


def training_roofline_chart(
    chip="v5p",
    d_model: int = 8192,
    d_ff: int = 28672,
    n_chips: int = 64,
    n_axes: int = 3,
    batch_range=(32, 65536),
    ax=None,
):
    """Per-layer compute time and each strategy's communication time (forward + backward) against the per-chip
    batch, for ``n_chips`` chips: pure FSDP (all ``n_axes`` axes), pure tensor parallelism, and FSDP + tensor at
    the best power-of-two split. Lines above the compute line are communication-bound."""
    from ..training import mlp_layer_times, optimal_fsdp_degree

    c = get_chip(chip)
    fig, ax = figure_and_axes(ax)
    per_chip = np.geomspace(batch_range[0], batch_range[1], 60)
    comp, fsdp, tp, mixed = [], [], [], []
    for b in per_chip:
        B = b * n_chips
        comp.append(mlp_layer_times("fsdp", c, B, d_model, d_ff, fsdp=n_chips).compute)
        fsdp.append(mlp_layer_times("fsdp", c, B, d_model, d_ff, fsdp=n_chips, fsdp_axes=n_axes).comms)
        tp.append(mlp_layer_times("tensor", c, B, d_model, d_ff, tensor=n_chips, tp_axes=n_axes).comms)
        x_opt = optimal_fsdp_degree(B, n_chips, d_ff, fsdp_axes=2, tp_axes=1)
        X = int(min(n_chips, max(1, 2 ** round(np.log2(x_opt)))))
        mixed.append(
            mlp_layer_times(
                "fsdp+tensor", c, B, d_model, d_ff, fsdp=X, tensor=n_chips // X, fsdp_axes=2, tp_axes=1
            ).comms
        )
    ax.loglog(per_chip, comp, "k--", label="compute (both passes)")
    ax.loglog(per_chip, fsdp, color=_KIND_COLORS["fsdp"], label=f"FSDP over {n_axes} axes")
    ax.loglog(per_chip, tp, color=_KIND_COLORS["tensor"], label=f"tensor parallel, {n_chips}-way")
    ax.loglog(per_chip, mixed, color="#9467bd", label="FSDP + tensor, best split")
    ax.set_xlabel("tokens per chip (B / N)")
    ax.set_ylabel("seconds per layer")
    ax.set_title(f"{c.long_name}, {n_chips} chips, D={d_model:,}, F={d_ff:,}")
    legend_below(ax, fontsize=9)
    return decade_ticks(fig)


def pipeline_schedule_chart(stages: int = 4, microbatches: int = 8):
    """GPipe and 1F1B timelines side by side (forward 1 unit, backward 2): the same bubble, different memory."""
    from ..training.pipeline import bubble_fraction, peak_in_flight, simulate

    fig, axes = new_figure(ncols=1, nrows=2, width=7.2, height=4.6)
    for ax, name in zip(axes.ravel(), ("gpipe", "1f1b")):
        tasks = simulate(stages, microbatches, name)
        for t in tasks:
            ax.barh(
                t.stage,
                t.end - t.start,
                left=t.start,
                height=0.8,
                color="#1f77b4" if t.kind == "F" else "#ff7f0e",
                edgecolor="white",
                linewidth=0.6,
            )
            ax.text(
                (t.start + t.end) / 2, t.stage, str(t.microbatch), ha="center", va="center", fontsize=8, color="white"
            )
        ax.set_yticks(range(stages), [f"stage {s}" for s in range(stages)])
        ax.invert_yaxis()
        ax.grid(False)
        ax.set_title(
            f"{'GPipe' if name == 'gpipe' else '1F1B'}: bubble {bubble_fraction(tasks):.0%}, "
            f"stage 0 holds {peak_in_flight(tasks)} microbatches",
            fontsize=10,
        )
    axes.ravel()[-1].set_xlabel("time (forward = 1 unit, backward = 2; blue forward, orange backward)")
    fig.tight_layout()
    return decade_ticks(fig)


def planner_chart(result, top: int = 10):
    """The planner's ``top`` layouts: compute, communication and bubble time per step, and the modelled peak memory
    per chip (``Plan.memory.peak``, the number ``result.table()`` prints) against the chip's HBM capacity."""
    plans = list(result.ranked[:top])
    if not plans:
        raise ValueError("the plan result has no runnable layout to draw; print result.table() for the reasons")
    fig, axes = new_figure(ncols=2, width=7.2, height=0.35 * len(plans) + 1.8)
    ax1, ax2 = axes.ravel()
    labels = [f"{p.parallelism} | {p.remat}" for p in plans]
    y = np.arange(len(plans))
    comp = np.array([p.step.compute for p in plans])
    comms = np.array([p.step.comms for p in plans])
    bubble = np.array([p.step.bubble for p in plans])
    ax1.barh(y - 0.2, comp, height=0.4, color=_KIND_COLORS["compute"], label="compute")
    ax1.barh(y - 0.2, bubble, left=comp, height=0.4, color=_KIND_COLORS["bubble"], label="bubble")
    ax1.barh(y + 0.2, comms, height=0.4, color=_KIND_COLORS["fsdp"], label="communication")
    ax1.set_yticks(y, labels, fontsize=8)
    ax1.invert_yaxis()
    ax1.set_xlabel("seconds per step")
    fig.legend(*ax1.get_legend_handles_labels(), loc="upper center", ncol=3, fontsize=8)
    hbm = plans[0].layout.slice.chip.hbm_bytes if plans[0].layout else None
    ax2.barh(y, [p.memory.peak / 1e9 for p in plans], color="#2ca02c")  # the peak the planner's table prints
    if hbm:
        ax2.axvline(hbm / 1e9, color="k", ls="--", lw=1)
        ax2.text(hbm / 1e9, -0.6, " HBM", fontsize=8, va="bottom")
    ax2.set_yticks(y, [""] * len(plans))
    ax2.invert_yaxis()
    ax2.set_xlabel("peak GB per chip")
    fig.tight_layout(rect=(0, 0, 1, 0.92))
    return decade_ticks(fig)


def loss_curves_chart(curves: dict, reference: str | None = None, ax=None):
    """Do the layouts train the same model? ``curves`` maps a layout's name to its losses per step; ``reference``
    names the curve to compare with (``None``: the first). Left: every curve against step, each layout's markers
    nudged sideways by a fraction of a step so that coinciding points stay visible. Right: each layout's
    ``|loss − reference|`` per step on a log axis, beside the float32 spacing of the loss (one unit in the last
    place): differences of a few units are rounding, not a different model; exact zeros sit on the axis floor as
    hollow markers. With ``ax`` given, only the left panel is drawn, into it."""
    if not isinstance(curves, dict) or not curves:
        raise ValueError("curves must map at least one layout name to its losses")
    names = list(curves)
    reference = names[0] if reference is None else reference
    if reference not in curves:
        raise ValueError(f"reference must name one of the curves {names}; got {reference!r}")
    arrays = {k: np.asarray(v, dtype=float) for k, v in curves.items()}
    ref = arrays[reference]
    if any(a.ndim != 1 or a.shape != ref.shape or not a.size or not np.all(np.isfinite(a)) for a in arrays.values()):
        raise ValueError("every curve must be a non-empty 1-D sequence of finite losses, all of the same length")
    markers = ["o", "s", "^", "v", "D", "P", "X", "*"]
    steps = np.arange(1, ref.size + 1)
    if ax is None:
        fig, axes = new_figure(ncols=2, width=7.2, height=3.6)
        left, right = axes.ravel()
    else:
        fig, left = figure_and_axes(ax)
        right = None
    width = 0.5  # the sideways spread of the markers, in steps
    offsets = np.linspace(-width / 2, width / 2, len(names)) if len(names) > 1 else [0.0]
    left.plot(steps, ref, color="k", lw=1.0, zorder=1, label=f"{reference} (line)")
    for i, name in enumerate(names):
        left.plot(steps + offsets[i], arrays[name], ls="none", marker=markers[i % len(markers)], ms=5, label=name)
    left.set_xlabel(f"step (markers nudged up to ±{width / 2:g} step apart)")
    left.set_ylabel("training loss (nats)")
    left.set_title("every layout's loss, step by step", fontsize=10)
    legend_below(left, fontsize=9)
    if right is None:
        return decade_ticks(fig)
    ulp = np.spacing(ref.astype(np.float32)).astype(float)
    others = [n for n in names if n != reference]
    diffs = {n: np.abs(arrays[n] - ref) for n in others}
    positive = [d[d > 0] for d in diffs.values() if np.any(d > 0)]
    floor = (min(float(np.min(p)) for p in positive) if positive else float(np.min(ulp))) / 4
    for name in others:
        d = diffs[name]
        color = f"C{(names.index(name)) % 10}"
        m = markers[names.index(name) % len(markers)]
        x = steps + offsets[names.index(name)]
        nz = d > 0
        right.plot(x[nz], d[nz], ls="none", marker=m, ms=5, color=color, label=name)
        if np.any(~nz):
            right.plot(x[~nz], np.full(int(np.sum(~nz)), floor), ls="none", marker=m, ms=5, mfc="none", color=color)
    right.plot(steps, ulp, "k--", lw=1.0, label="float32 spacing of the loss")
    right.set_yscale("log")
    worst = max((float(np.max(d)) for d in diffs.values()), default=0.0)
    right.set_ylim(floor / 1.5, max(worst, float(np.max(ulp))) * 40)
    drop = float(ref[0] - ref[-1])
    right.set_title(f"|loss − {reference}|: at most {worst:.1e} nats; the loss falls {drop:.2f}", fontsize=10)
    right.set_xlabel("step (hollow markers on the floor: exactly equal)")
    right.set_ylabel("|difference| (nats, log scale)")
    legend_below(right, fontsize=9, ncol=2)
    fig.tight_layout()
    return decade_ticks(fig)


def memory_breakdown_chart(rows: dict, chip=None, ax=None):
    """Stacked bars of HBM per chip (parameters, gradients, optimizer, activations) for each labelled
    :class:`~tpu_notes.training.MemoryBreakdown`; a dashed line at ``chip``'s HBM when given."""
    if not rows:
        raise ValueError("rows must map at least one label to a MemoryBreakdown")
    fig, ax = figure_and_axes(ax, height=0.45 * len(rows) + 1.6)
    parts = ("params", "grads", "optimizer", "activations")
    colors = ("#1f77b4", "#aec7e8", "#ff7f0e", "#2ca02c")
    y = np.arange(len(rows))
    left = np.zeros(len(rows))
    for part, color in zip(parts, colors):
        vals = np.array([getattr(m, part) for m in rows.values()]) / 1e9
        ax.barh(y, vals, left=left, color=color, label=part)
        left += vals
    for yi, total in zip(y, left):
        ax.text(total, yi, " " + fmt(total * 1e9, "B"), va="center", fontsize=8)
    if chip is not None:
        ax.axvline(get_chip(chip).hbm_bytes / 1e9, color="k", ls="--", lw=1, label=f"{get_chip(chip).name} HBM")
    ax.set_yticks(y, list(rows), fontsize=9)
    ax.invert_yaxis()
    ax.set_xlabel("GB per chip")
    legend_below(ax, fontsize=8)
    return decade_ticks(fig)


def reconciliation_chart(roofline_rows, calibrated_rows=None, ax=None):
    """Measured against predicted tokens/s per chip for published runs (``training.published.reconcile`` rows), on
    log axes: points on the diagonal are exact, points below it ran slower than predicted. With
    ``calibrated_rows`` (the same runs at the stated matmul efficiency) each run is drawn twice, joined by a line."""
    rows = list(roofline_rows)
    if not rows:
        raise ValueError("roofline_rows must hold at least one Reconciliation")
    fig, ax = figure_and_axes(ax, width=7.0, height=5.0)
    colors = {"tpu": "#1f77b4", "gpu": "#d62728"}
    pred = np.array([r.predicted_tokens_per_s for r in rows])
    meas = np.array([r.reported_tokens_per_s for r in rows])
    kinds = [r.run.system.chip.kind for r in rows]
    for kind in ("tpu", "gpu"):
        idx = [i for i, k in enumerate(kinds) if k == kind]
        if idx:
            ax.scatter(
                pred[idx],
                meas[idx],
                facecolors="none",
                edgecolors=colors[kind],
                s=40,
                label=f"{kind.upper()} runs, roofline prediction",
            )
    if calibrated_rows is not None:
        cal = np.array([r.predicted_tokens_per_s for r in calibrated_rows])
        ax.scatter(cal, meas, c=[colors[k] for k in kinds], s=40, label="at the stated matmul efficiency")
        for p0, p1, m in zip(pred, cal, meas):
            ax.plot([p0, p1], [m, m], color="#999999", lw=0.8)
    lo, hi = min(pred.min(), meas.min()) / 1.5, max(pred.max(), meas.max()) * 1.5
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="measured = predicted")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("predicted tokens/s per chip")
    ax.set_ylabel("measured tokens/s per chip")
    legend_below(ax, fontsize=8)
    return decade_ticks(fig)


# Chapter 6


def _step_of(case):
    """The :class:`~tpu_notes.training.StepTime` of a plan, a slice option or a step (None when it has none)."""
    for attr in ("best", "step"):
        if getattr(case, attr, None) is not None and not hasattr(case, "collectives"):
            case = getattr(case, attr)
    return case if hasattr(case, "collectives") and hasattr(case, "bubble") else None


def step_breakdown_chart(cases, ax=None):
    """Where each roofline step goes, as fractions of the step: one row of compute and one of communication (stacked
    by collective kind) per case, each followed by the pipeline bubble. The step is ``max(compute, communication) +
    bubble`` (:func:`~tpu_notes.training.step_time`), so the row that reaches 1 sets it.

    ``cases`` maps a label (e.g. the model, the pods and the layout) to a plan, a slice option of
    :func:`~tpu_notes.training.subslices.plan_slices` or a :class:`~tpu_notes.training.StepTime`."""
    from collections.abc import Mapping

    if not isinstance(cases, Mapping) or not cases:
        raise ValueError("cases must be a non-empty mapping of label -> plan, slice option or StepTime")
    steps = {}
    for label, case in cases.items():
        st = _step_of(case)
        if st is None or not st.total > 0:
            raise ValueError(f"cases[{label!r}] must be a runnable plan, slice option or StepTime with a step > 0")
        steps[str(label)] = st
    fig, ax = figure_and_axes(ax, width=7.2, height=1.15 * len(steps) + 1.3)
    kinds = [k for k in _KIND_COLORS if k not in ("compute", "bubble")]
    kinds += sorted({k for st in steps.values() for k in st.collectives} - set(kinds))
    extra = ("#17becf", "#bcbd22", "#e377c2")
    colors = {k: _KIND_COLORS.get(k, extra[i % len(extra)]) for i, k in enumerate(kinds)}
    seen, yticks, ylabels = set(), [], []

    def bar(y, width, left, color, label, **kw):
        show = label not in seen
        seen.add(label)
        ax.barh(y, width, left=left, height=0.34, color=color, label=label if show else None, **kw)

    for i, (label, st) in enumerate(steps.items()):
        y0 = 1.3 * i
        ax.text(0.0, y0 - 0.3, label, fontsize=9, fontweight="bold", va="bottom")
        bar(y0, st.compute / st.total, 0.0, _KIND_COLORS["compute"], "compute")
        bar(y0, st.bubble / st.total, st.compute / st.total, _KIND_COLORS["bubble"], "pipeline bubble", hatch="//")
        left = 0.0
        for k in kinds:
            t = st.collectives.get(k, 0.0)
            if t > 0:
                bar(y0 + 0.4, t / st.total, left, colors[k], f"{k} collectives")
                left += t / st.total
        bar(y0 + 0.4, st.bubble / st.total, left, _KIND_COLORS["bubble"], "pipeline bubble", hatch="//")
        ax.text(1.02, y0 + 0.2, f"{fmt(st.total, 's')}\n{st.bound}-bound", va="center", fontsize=8)
        yticks += [y0, y0 + 0.4]
        ylabels += ["compute", "communication"]
    ax.axvline(1.0, color="k", ls="--", lw=1)
    ax.set_yticks(yticks, ylabels, fontsize=8)
    ax.set_ylim(1.3 * len(steps) - 0.55, -0.6)
    ax.set_xlim(0, 1.25)
    ax.set_xlabel("fraction of the roofline step (the longer row reaches 1: it sets the step)")
    legend_below(ax, fontsize=8, ncol=4, frameon=False)
    fig.tight_layout()
    return decade_ticks(fig)


def labelled_reconciliation_chart(roofline_rows, calibrated_rows, labels, ax=None):
    """:func:`~tpu_notes.plots.reconciliation_chart` with the runs named in ``labels`` (``{run name: short text}``)
    numbered at their filled (stated-efficiency) points and named in a key: under the axes in a figure of its own,
    in the lower right of a given ``ax``. Numbers that would overlap are moved down and joined to their point."""
    from collections.abc import Mapping

    rows, cal = list(roofline_rows), list(calibrated_rows)
    if len(cal) != len(rows):
        raise ValueError("calibrated_rows must hold the same runs as roofline_rows (one row per run)")
    if not isinstance(labels, Mapping) or not labels:
        raise ValueError("labels must be a non-empty mapping of run name -> short text")
    names = {r.run.name for r in cal}
    unknown = [n for n in labels if n not in names]
    if unknown:
        raise ValueError(f"labels names runs that are not in the rows: {unknown[:3]}")
    own_figure = ax is None
    fig = reconciliation_chart(rows, cal, ax=ax)
    ax = fig.axes[0] if ax is None else ax
    if own_figure:  # make room for the key first: the numbers are placed in the final pixel grid
        half = (len(labels) + 1) // 2
        width, height = fig.get_size_inches()
        key_in = 0.15 * half + 0.2
        fig.set_size_inches(width, height + key_in)
        fig.subplots_adjust(bottom=(key_in + 0.6) / (height + key_in), top=0.97)
    ax.figure.canvas.draw()  # the limits and the transform are final only once drawn
    px_per_pt = ax.figure.dpi / 72
    by_name = {r.run.name: r for r in cal}
    keyed = [(i + 1, by_name[name], text) for i, (name, text) in enumerate(labels.items())]
    placed = []  # (x, y) of the numbers already drawn, in pixels
    for number, r, _ in sorted(keyed, key=lambda k: -k[1].reported_tokens_per_s):
        xy = (r.predicted_tokens_per_s, r.reported_tokens_per_s)
        x, y = ax.transData.transform(xy)
        tx, ty = x - 7 * px_per_pt, y
        while any(abs(tx - px) < 14 * px_per_pt and abs(ty - py) < 9 * px_per_pt for px, py in placed):
            ty -= 9 * px_per_pt
        placed.append((tx, ty))
        ax.annotate(
            str(number),
            xy,
            xytext=((tx - x) / px_per_pt, (ty - y) / px_per_pt),
            textcoords="offset points",
            fontsize=8,
            fontweight="bold",
            ha="right",
            va="center",
            arrowprops={"arrowstyle": "-", "color": "#777777", "lw": 0.6} if ty != y else None,
        )
    entries = [f"{number}  {text}" for number, _, text in keyed]
    if not own_figure:  # drawn into the caller's panel: the key goes in the panel's lower right
        ax.text(
            0.98,
            0.02,
            "\n".join(entries),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            multialignment="left",
            fontsize=8,
            bbox={"boxstyle": "round", "facecolor": "white", "edgecolor": "#cccccc"},
        )
        return decade_ticks(fig)
    # a figure of its own: the key goes under the axes (which made room for it above), in two columns
    half = (len(entries) + 1) // 2
    for column, x in ((entries[:half], 0.08), (entries[half:], 0.54)):
        fig.text(x, 0.015, "\n".join(column), ha="left", va="bottom", fontsize=8)
    return decade_ticks(fig)


# ----------------------------------------------------------------------------------------------------------------
# Chapter 5 (continued): the bubble of each pipeline schedule
# ----------------------------------------------------------------------------------------------------------------
def pipeline_bubble_chart(
    stages: int = 8,
    max_microbatches: int = 64,
    forward_time: float = 1.0,
    backward_time: float = 2.0,
    weight_time: float = 1.0,
    ax=None,
):
    """Bubble fraction against microbatches per step for 1F1B (= GPipe), ZB-H1 and DualPipe at ``stages`` stages
    (:func:`tpu_notes.training.schedule_bubble_fraction`, pass times in the same units; DualPipe without overlap,
    ``t_F&B = t_F + t_B``), from ``M = stages`` to ``max_microbatches``; the point at ``M = 4P`` is labelled."""
    from ..training.pipeline import schedule_bubble_fraction

    if not isinstance(max_microbatches, int) or isinstance(max_microbatches, bool) or max_microbatches < stages:
        raise ValueError(f"max_microbatches must be an integer >= stages ({stages}); got {max_microbatches!r}")
    fig, ax = figure_and_axes(ax)
    ms = np.arange(stages, max_microbatches + 1)
    names = {
        "1f1b": "1F1B / GPipe",
        "zb-h1": "ZB-H1 (split backward, 1F1B memory)",
        "dualpipe": "DualPipe (2x weights)",
    }
    colors = {"1f1b": _KIND_COLORS["pipeline"], "zb-h1": _KIND_COLORS["tensor"], "dualpipe": _KIND_COLORS["expert"]}
    for sched, label in names.items():
        if sched == "dualpipe" and stages % 2:
            continue
        y = [schedule_bubble_fraction(sched, stages, int(m), forward_time, backward_time, weight_time) for m in ms]
        ax.plot(ms, y, color=colors[sched], label=label)
        m4 = 4 * stages
        if m4 <= max_microbatches:
            f = schedule_bubble_fraction(sched, stages, m4, forward_time, backward_time, weight_time)
            ax.plot([m4], [f], "o", color=colors[sched])
            below = sched == "dualpipe"
            ax.annotate(f"{f:.1%}", (m4, f), textcoords="offset points", xytext=(6, -12 if below else 5), fontsize=8)
    ax.set_xlabel(f"microbatches per step M ({stages} stages)")
    ax.set_ylabel("bubble: idle share of the step")
    ax.set_title(f"t_F = {forward_time:g}, t_B = {backward_time:g} (of which t_W = {weight_time:g})", fontsize=10)
    legend_below(ax, fontsize=9)
    return decade_ticks(fig)


def context_split_chart(context: int = 4, seq_len: int = 64):
    """The causal attention mask of one ``seq_len``-token sequence with each query row coloured by the context rank
    that holds it, for the plain split (rank ``i`` takes chunk ``i``) and the zig-zag split (chunks ``i`` and
    ``2CP − 1 − i``), and each rank's share of the work under both
    (:func:`tpu_notes.training.causal_balance`, exact token counts)."""
    from matplotlib.colors import ListedColormap

    from ..training.context import causal_balance

    bal = causal_balance(context, seq_len=seq_len)  # checks context and that seq_len splits into 2·CP chunks
    fig, axes = new_figure(ncols=3, width=7.2, height=3.0)
    axes = axes[0]
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    cmap = ListedColormap([palette[i % len(palette)] for i in range(context)])
    t = np.arange(seq_len)
    c1, c2 = seq_len // context, seq_len // (2 * context)
    plain = t // c1
    chunk = t // c2
    zig = np.where(chunk < context, chunk, 2 * context - 1 - chunk)
    for ax, owner, title in ((axes[0], plain, "plain split"), (axes[1], zig, "zig-zag split (2·CP chunks)")):
        grid = np.where(t[None, :] <= t[:, None], owner[:, None], np.nan).astype(float)
        ax.imshow(grid, cmap=cmap, vmin=-0.5, vmax=context - 0.5, interpolation="nearest")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("key position")
        ax.set_ylabel("query position")
        ax.set_xticks([])
        ax.set_yticks([])
    ranks = np.arange(context)
    w = 0.4
    axes[2].bar(ranks - w / 2, bal.plain_work, w, color="#7f7f7f", label=f"plain (max/mean {bal.plain_ratio:.2f})")
    axes[2].bar(ranks + w / 2, bal.zigzag_work, w, color=_KIND_COLORS["tensor"], label="zig-zag (max/mean 1.00)")
    axes[2].axhline(1 / context, color="k", ls="--", lw=0.8)
    axes[2].set_xticks(ranks)
    axes[2].set_xlabel("context rank")
    axes[2].set_ylabel("share of attention work")
    legend_below(axes[2], fontsize=8)
    fig.suptitle(f"Causal attention over CP = {context} ranks: colour = rank that holds the query", fontsize=11)
    fig.tight_layout()
    return decade_ticks(fig)


def fp8_gain_chart(models=("llama3-8b", "llama3-70b", "llama3-405b"), chip="h100", seq_lens=None, ax=None):
    """The ideal step-time speedup of FP8 linear layers (:func:`tpu_notes.training.fp8_gain`) against the sequence
    length for each of ``models`` on ``chip``, beside the peak ratio it cannot pass: attention stays in bf16 and
    grows with the sequence."""
    from ..training.fp8 import fp8_gain

    if seq_lens is None:
        seq_lens = [2**k for k in range(10, 18)]
    fig, ax = figure_and_axes(ax)
    ratio = None
    for i, name in enumerate(models):
        gains = [fp8_gain(name, chip, int(s)) for s in seq_lens]
        ratio = gains[0].peak_ratio
        ax.semilogx(
            seq_lens, [g.speedup for g in gains], "o-", ms=3, label=str(name), color=list(_KIND_COLORS.values())[i]
        )
    ax.axhline(ratio, color="k", ls="--", lw=0.8, label=f"FP8 / bf16 peak ({ratio:.3g}x)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("sequence length (tokens)")
    ax.set_ylabel("ideal speedup over bf16")
    ax.set_ylim(1.0, ratio * 1.05)
    ax.set_title(f"FP8 linear layers, attention and unembedding in bf16 ({get_chip(chip).long_name})", fontsize=10)
    legend_below(ax, fontsize=9)
    return decade_ticks(fig)
