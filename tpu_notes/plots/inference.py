"""Figures of Chapter 7 (inference), drawn from :mod:`tpu_notes.inference`."""

from __future__ import annotations

import numpy as np

from .style import decade_ticks, figure_and_axes, legend_below, new_figure

_PART_COLORS = {"kv": "#d62728", "weights": "#1f77b4", "flops": "#2ca02c"}


def _plain_log_ticks(ax) -> None:
    """No labels on the minor ticks of log axes (they crowd into each other on short ranges)."""
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())


_DTYPE_COLORS = {"bf16": "#1f77b4", "int8": "#ff7f0e", "int4": "#2ca02c", "fp8": "#9467bd", "fp32": "#7f7f7f"}


def decode_step_parts_chart(
    model="llama3-8b",
    chip="v5e",
    n_chips: int = 4,
    seq_len: int = 8192,
    batch_range=(1, 1024),
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    ax=None,
):
    """The three parts of a generation step against the batch: KV load (grows with B), weight load (flat) and
    weight FLOPs (grows with B; hidden under the weight load until the critical batch), with their total."""
    from ..inference import critical_batch, decode_step_time

    fig, ax = figure_and_axes(ax)
    bs = np.unique(np.geomspace(batch_range[0], batch_range[1], 40).astype(int))
    steps = [
        decode_step_time(model, chip, n_chips, int(b), seq_len, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
        for b in bs
    ]
    ax.loglog(bs, [s.kv_load for s in steps], color=_PART_COLORS["kv"], label="KV load")
    ax.loglog(bs, [s.weight_load for s in steps], color=_PART_COLORS["weights"], label="weight load")
    ax.loglog(bs, [s.flops_time for s in steps], color=_PART_COLORS["flops"], label="weight FLOPs")
    ax.loglog(bs, [s.total for s in steps], "k", lw=2.2, label="step = KV + max(weights, FLOPs)")
    b_crit = critical_batch(model, chip, weight_dtype=weight_dtype)
    ax.axvline(b_crit, color="0.5", ls=":", lw=1)
    ax.text(b_crit, ax.get_ylim()[0] * 1.5, f" critical batch {b_crit:.0f}", fontsize=9, color="0.3")
    fits = [s.fits for s in steps]
    if not all(fits):
        b_oom = bs[fits.index(False)]
        ax.axvspan(b_oom, bs[-1], color="0.9", zorder=0)
        ax.text(b_oom, ax.get_ylim()[1] / 2, " caches do not fit", fontsize=9, color="0.3", va="top")
    name = getattr(model, "name", model)
    ax.set_xlabel("batch (sequences generating together)")
    ax.set_ylabel("seconds per step")
    ax.set_title(f"{name} on {n_chips} × {chip}, {seq_len:,}-token context, {weight_dtype} weights")
    legend_below(ax, fontsize=9)
    return decade_ticks(fig)


def latency_throughput_chart(
    model="llama2-13b",
    chip="v5e",
    n_chips: int = 8,
    seq_len: int = 8192,
    weight_dtypes=("bf16", "int8"),
    batches=None,
    ax=None,
):
    """Latency per token (step time) against throughput per chip, one curve per weight dtype (KV cache in the same
    dtype), batches marked; hollow markers are batches whose caches do not fit."""
    from ..inference import latency_throughput_curve

    fig, ax = figure_and_axes(ax)
    batches = batches or [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
    for wd in weight_dtypes:
        pts = latency_throughput_curve(model, chip, n_chips, seq_len, batches, weight_dtype=wd, kv_dtype=wd)
        x = [p.tokens_per_s_per_chip for p in pts]
        y = [p.total * 1e3 for p in pts]
        color = _DTYPE_COLORS.get(wd, "k")
        ax.plot(x, y, color=color, label=f"{wd} weights and KV")
        for p, xi, yi in zip(pts, x, y):
            ax.plot(xi, yi, "o", color=color, mfc=color if p.fits else "white", ms=5)
            if wd == weight_dtypes[0] or p.batch in (batches[0], batches[-1]):
                ax.annotate(str(p.batch), (xi, yi), textcoords="offset points", xytext=(4, -10), fontsize=8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("throughput, tokens/s per chip")
    ax.set_ylabel("latency, ms per token")
    name = getattr(model, "name", model)
    ax.set_title(
        f"{name}, {n_chips} × {chip}, {seq_len:,} tokens: batch moves along the curve (hollow: does not fit)",
        fontsize=10,
    )
    legend_below(ax, fontsize=9)
    return decade_ticks(fig)


def measured_decode_chart(rows, ax=None):
    """Measured against predicted decode step time, from rows of dicts with keys ``batch``, ``seq_len``,
    ``measured_s`` and ``predicted_s`` (two panels: against the batch at the smallest context, and against the
    context at the smallest batch)."""
    fig, axes = new_figure(ncols=2, width=7.2, height=3.2)
    axes = axes.ravel()
    b0 = min(r["batch"] for r in rows)
    s0 = min(r["seq_len"] for r in rows)
    for ax, key, fixed, label in (
        (axes[0], "batch", ("seq_len", s0), "batch"),
        (axes[1], "seq_len", ("batch", b0), "context, tokens"),
    ):
        sel = sorted((r for r in rows if r[fixed[0]] == fixed[1]), key=lambda r: r[key])
        x = [r[key] for r in sel]
        ax.loglog(x, [r["measured_s"] for r in sel], "o-", label="measured (this CPU)")
        ax.loglog(x, [r["predicted_s"] for r in sel], "s--", label="model (fitted roofline)")
        ax.set_xlabel(label)
        ax.set_title(f"{fixed[0].replace('_', ' ')} = {fixed[1]:,}", fontsize=10)
        _plain_log_ticks(ax)
    axes[0].set_ylabel("seconds per decode step")
    legend_below(axes[0], fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def speculative_speedup_chart(draft_costs=(0.02, 0.1, 0.25), k_values=(1, 2, 4, 8), ax=None, verify_cost=1.0):
    """Speedup of speculative sampling over plain decoding against the acceptance rate, for several draft lengths
    ``k`` and draft costs (in target steps), at a verify step costing ``verify_cost`` plain steps (1: the small-batch
    limit; :func:`speculative_batch_chart` shows how it grows with the batch)."""
    from ..inference import speculative_speedup

    fig, axes = new_figure(ncols=len(draft_costs), width=7.2, height=2.8)
    axes = np.atleast_1d(axes).ravel()
    a = np.linspace(0.0, 0.98, 50)
    for ax, dc in zip(np.atleast_1d(axes), draft_costs):
        for k in k_values:
            ax.plot(a, [speculative_speedup(x, k, dc, verify_cost) for x in a], label=f"k = {k}")
        ax.axhline(1.0, color="0.5", lw=0.8, ls=":")
        ax.set_title(
            f"draft costs {dc:g} of a step" + (f", verify {verify_cost:g}" if verify_cost != 1.0 else ""), fontsize=9
        )
        ax.set_xlabel("acceptance rate")
    np.atleast_1d(axes)[0].set_ylabel("speedup")
    np.atleast_1d(axes)[0].legend(fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def speculative_batch_chart(
    model="llama3-70b",
    chip="v5e",
    n_chips: int = 32,
    context: int = 8192,
    k: int = 4,
    acceptances=(0.5, 0.7, 0.9),
    draft_cost: float | None = None,
    weight_dtype: str = "int8",
    kv_dtype: str = "int8",
    batches=None,
    draft="llama3.2-1b",
):
    """Speculative sampling against the batch, at the verify cost the engine prices
    (:func:`tpu_notes.inference.speculative.speculative_vs_batch`): left, the target's step scoring ``k + 1``
    positions over its plain decode step (1 at small batch, towards ``k + 1`` once the matmuls are compute-bound);
    right, the speedup for a few acceptance rates, with the line at 1 below which speculation loses. The draft is
    ``draft`` (a model name, ``"eagle"``/``"mtp"``, or a deployment) priced by the same engine on the target's
    chips, unless ``draft_cost`` (a fraction of a target step) is given instead."""
    from matplotlib.ticker import NullFormatter

    from ..inference.engine import deploy
    from ..inference.speculative import speculative_vs_batch

    if not acceptances:
        raise ValueError("acceptances must hold at least one acceptance rate")
    d = deploy(model, chip, n_chips, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    bs = tuple(2**i for i in range(11)) if batches is None else tuple(batches)
    fig, axes = new_figure(ncols=2, width=7.2, height=2.9)
    left, right = np.atleast_1d(axes).ravel()
    how = {"draft_cost": draft_cost} if draft_cost is not None else {"draft": draft}
    first = speculative_vs_batch(d, context, k, acceptances[0], bs, **how)
    x = [r.batch for r in first]
    left.semilogx(x, [r.verify_cost for r in first], "k-o", ms=3, base=2)
    left.axhline(k + 1, color="0.5", lw=0.8, ls="--")
    left.text(x[0], k + 1, f" k + 1 = {k + 1}", va="bottom", fontsize=8, color="0.3")
    left.set_ylim(0.0, k + 1.6)
    left.set_xlabel("batch (sequences decoding together)")
    left.set_ylabel("verify step / decode step")
    left.set_title(f"verifying {k} drafts", fontsize=9)
    for a in acceptances:
        rows = first if a == acceptances[0] else speculative_vs_batch(d, context, k, a, bs, **how)
        right.semilogx([r.batch for r in rows], [r.speedup for r in rows], "-o", ms=3, base=2, label=f"a = {a:g}")
    right.axhline(1.0, color="k", lw=0.9, ls=":")
    right.text(x[-1], 1.0, "no gain ", ha="right", va="top", fontsize=8, color="0.3")
    right.set_xlabel("batch (sequences decoding together)")
    right.set_ylabel("speedup over plain decoding")
    named = draft if isinstance(draft, str) else "the draft"
    right.set_title(
        f"draft costs {draft_cost:g} of a step (assumed)" if draft_cost is not None else f"{named} as the draft",
        fontsize=9,
    )
    legend_below(right, fontsize=8)
    for ax in (left, right):  # the batches themselves as tick labels (1, 4, 16, ...), every other one
        ax.set_xticks(x[::2])
        ax.set_xticklabels([str(b) for b in x[::2]], fontsize=8)
        ax.xaxis.set_minor_formatter(NullFormatter())
    name = getattr(model, "name", model)
    fig.suptitle(f"{name} on {n_chips} x {chip}, {weight_dtype}, {context:,}-token context", fontsize=9)
    fig.tight_layout()
    return decade_ticks(fig)


def weight_stationary_chart(
    chip="v5p",
    batch: int = 64,
    d_model: int = 8192,
    d_ff: int = 32768,
    chips=(8, 16, 32, 64, 128, 256, 512, 1024),
    ax=None,
):
    """ICI time of one MLP block's collectives in a generation step: 1D weight-stationary (flat in N) against 2D
    (falling as 1/sqrt(N)), with the crossover ``N = 32 (F/D) (3/4)²``."""
    from ..inference import weight_stationary_comms, ws_2d_crossover

    fig, ax = figure_and_axes(ax)
    ns = list(chips)
    ax.loglog(
        ns,
        [weight_stationary_comms(chip, batch, d_model, d_ff, n, "1d").comms for n in ns],
        "o-",
        label="1D: F sharded N ways",
    )
    ax.loglog(
        ns,
        [weight_stationary_comms(chip, batch, d_model, d_ff, n, "2d").comms for n in ns],
        "s-",
        label="2D: D over X, F over YZ (best X)",
    )
    cross = ws_2d_crossover(d_model, d_ff)
    ax.axvline(cross, color="0.5", ls=":")
    ax.text(cross, ax.get_ylim()[0] * 1.3, f" N = {cross:.0f}", fontsize=9)
    ax.set_xlabel("chips N")
    ax.set_ylabel("seconds of ICI per MLP block")
    ax.set_title(f"{chip}, batch {batch}, D = {d_model:,}, F = {d_ff:,}", fontsize=10)
    legend_below(ax, fontsize=9)
    return decade_ticks(fig)


def serving_sweep_chart(sweep, ax=None):
    """TTFT and TPOT (p50 and p90) against the arrival rate, from ``sweep``: a dict ``label -> list of (rate,
    SimResult)`` (e.g. interleaved and disaggregated engines)."""
    fig, axes = new_figure(ncols=2, width=7.2, height=3.2)
    axes = axes.ravel()
    for (label, runs), color in zip(sweep.items(), ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")):
        rates = [r for r, _ in runs]
        for ax, attr in zip(axes, ("ttft", "tpot")):
            ax.plot(rates, [getattr(s, attr)[0] for _, s in runs], "o-", color=color, label=f"{label} p50")
            ax.plot(rates, [getattr(s, attr)[1] for _, s in runs], "--", color=color, label=f"{label} p90")
    for ax, title in zip(axes, ("time to first token", "time per output token")):
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        ax.set_xlabel("arrival rate, requests/s")
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("seconds")
    legend_below(axes[1], fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)


def kv_share_chart(
    model="llama3-70b", chip="v5e", n_chips: int = 16, contexts=(1024, 8192, 32768), batch: int = 32, ax=None
):
    """How the step time splits between KV and weights as the context grows, for bf16 and int8 KV caches."""
    from ..inference import decode_step_time

    fig, ax = figure_and_axes(ax, height=3.4)
    labels, kv, rest = [], [], []
    for S in contexts:
        for kd in ("bf16", "int8"):
            s = decode_step_time(model, chip, n_chips, batch, S, kv_dtype=kd)
            labels.append(f"{S // 1024}k\n{kd} KV")
            kv.append(s.kv_load * 1e3)
            rest.append(max(s.weight_load, s.flops_time) * 1e3)
    x = np.arange(len(labels))
    ax.bar(x, rest, color=_PART_COLORS["weights"], label="max(weights, FLOPs)")
    ax.bar(x, kv, bottom=rest, color=_PART_COLORS["kv"], label="KV load")
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("ms per step")
    name = getattr(model, "name", model)
    ax.set_title(f"{name}, batch {batch}, {n_chips} × {chip}", fontsize=10)
    legend_below(ax, fontsize=9)
    return decade_ticks(fig)


__all__ = [
    "decode_step_parts_chart",
    "kv_share_chart",
    "latency_throughput_chart",
    "measured_decode_chart",
    "serving_sweep_chart",
    "speculative_batch_chart",
    "speculative_speedup_chart",
    "weight_stationary_chart",
]


def chunked_prefill_chart(deployment, decode: int = 32, context: int = 4096, prompt_len: int = 8192, chunks=None):
    """Chunked prefill priced by the engine (:func:`tpu_notes.inference.long_context.chunked_prefill`): left, the
    step that carries a prompt chunk beside ``decode`` decoding sequences (mean and slowest), against the bare
    decode step; right, the prompt's time to its first token. Small chunks keep decoding smooth and delay the
    prompt; large ones do the opposite."""
    from ..inference.long_context import chunked_prefill

    cs = tuple(2**i for i in range(7, 14) if 2**i <= prompt_len) if chunks is None else tuple(chunks)
    if not cs:
        raise ValueError("chunks must hold at least one chunk size (tokens)")
    rows = [chunked_prefill(deployment, decode, context, prompt_len, int(c)) for c in cs]
    fig, axes = new_figure(ncols=2, width=7.2, height=2.9)
    left, right = np.atleast_1d(axes).ravel()
    x = [r.chunk for r in rows]
    left.semilogx(x, [r.mean_step * 1e3 for r in rows], "-o", ms=3, base=2, label="step with a chunk (mean)")
    left.semilogx(x, [r.max_step * 1e3 for r in rows], "--", base=2, color="0.4", label="slowest (last chunk)")
    left.axhline(rows[0].decode_step * 1e3, color="k", lw=0.9, ls=":")
    left.annotate("decode alone", (x[-1], rows[0].decode_step * 1e3), fontsize=8, color="0.3", ha="right",
                  xytext=(0, 3), textcoords="offset points")  # fmt: skip
    left.set_xlabel("chunk (prompt tokens per step)")
    left.set_ylabel("step time (ms)")
    left.set_title(f"{decode} sequences at {context:,} tokens keep decoding", fontsize=9)
    legend_below(left, fontsize=8)
    right.semilogx(x, [r.prompt_time * 1e3 for r in rows], "-o", ms=3, base=2, color="#d62728")
    for r in (rows[0], rows[-1]):
        right.annotate(f"{r.n_steps} steps", (r.chunk, r.prompt_time * 1e3), fontsize=8, xytext=(4, 4),
                       textcoords="offset points")  # fmt: skip
    right.set_xlabel("chunk (prompt tokens per step)")
    right.set_ylabel("prompt's time to first token (ms)")
    right.set_title(f"a {prompt_len:,}-token prompt", fontsize=9)
    for ax in (left, right):
        ax.set_xticks(x)
        ax.set_xticklabels([str(c) for c in x], fontsize=8)
        _plain_log_ticks(ax)
    name = getattr(deployment.model, "name", "") or "model"
    fig.suptitle(f"chunked prefill: {name} on {deployment.n_chips} x {deployment.chip.name}", fontsize=9)
    fig.tight_layout()
    return decade_ticks(fig)


def batch_scaling_chart(chip="v5e", n_chips: int = 4, d_model: int = 8192, d_ff: int = 32768, batches=None):
    """The scaling book's Appendix A experiment, predicted: one layer of two ``D x F`` bf16 matmuls sharded
    ``n_chips`` ways, against the batch. Left, the layer's time: the roofline ``max(weight load, FLOPs)`` of the two
    matmuls (:func:`tpu_notes.inference.generation_matmul_times`), flat until the critical batch ``C / W_hbm`` and
    linear after it, and the engine's expected step for the same layer (:func:`tpu_notes.inference.deploy`),
    whose activation AllReduces and per-layer overhead do not overlap; right, tokens per microsecond."""
    from ..hardware import get_chip
    from ..inference.engine import deploy
    from ..inference.sharding import generation_matmul_times
    from ..roofline import critical_batch_size

    bs = tuple(range(16, 1025, 16)) if batches is None else tuple(int(b) for b in batches)
    if not bs:
        raise ValueError("batches must hold at least one batch size")
    layer = _appendix_layer(d_model, d_ff, n_chips)
    d = deploy(layer, chip, n_chips)
    roof, expected = [], []
    for b in bs:
        t = generation_matmul_times(chip, b, d_model, d_ff, n_chips)
        roof.append(2 * max(t.hbm, t.math))  # W_in and W_out
        expected.append(d.decode_step(b, 1).total)
    b_crit = critical_batch_size(chip)
    fig, axes = new_figure(ncols=2, width=7.2, height=2.9)
    left, right = np.atleast_1d(axes).ravel()
    left.plot(bs, np.array(roof) * 1e6, "k-", label="roofline: max(weights, FLOPs)")
    left.plot(bs, np.array(expected) * 1e6, "-", color="#ff7f0e", label="engine: + AllReduces, overhead")
    right.plot(bs, [b / (t * 1e6) for b, t in zip(bs, roof)], "k-", label="roofline")
    right.plot(bs, [b / (t * 1e6) for b, t in zip(bs, expected)], "-", color="#ff7f0e", label="engine")
    for ax in (left, right):
        ax.axvline(b_crit, color="0.5", ls=":", lw=1)
        ax.set_xlabel("batch (tokens per step)")
    floor = 2 * generation_matmul_times(chip, 1, d_model, d_ff, n_chips).hbm * 1e6
    left.annotate(
        f"weight load {floor:.0f} µs", (bs[0], floor), fontsize=8, xytext=(0, -12), textcoords="offset points"
    )
    left.text(b_crit, left.get_ylim()[1] * 0.95, f" C/W_hbm = {b_crit:.0f}", fontsize=8, va="top", color="0.3")
    left.set_ylabel("layer time (µs)")
    left.set_ylim(bottom=0)
    right.set_ylabel("throughput (tokens/µs)")
    right.set_ylim(bottom=0)
    legend_below(left, fontsize=8)
    legend_below(right, fontsize=8)
    c = get_chip(chip)
    fig.suptitle(f"one {d_model} x {d_ff} layer (2 matmuls, bf16) on {n_chips} x {c.name}", fontsize=9)
    fig.tight_layout()
    return decade_ticks(fig)


def _appendix_layer(d_model: int, d_ff: int, n_chips: int):
    """A one-layer model that is all MLP (two matmuls, no gate): attention and embeddings shrunk to nothing, with one
    query head per chip (a tensor-parallel deployment gives every chip whole heads) and one KV head."""
    from ..transformer import TransformerConfig

    return TransformerConfig(
        d_model=d_model, d_ff=d_ff, n_layers=1, n_heads=n_chips, n_kv_heads=1, d_head=2, vocab=2, gated_mlp=False,
        name=f"one {d_model} x {d_ff} layer",
    )  # fmt: skip
