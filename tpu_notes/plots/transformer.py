"""Chapter 4 figures: attention share, parameter breakdown, KV cache, the remat trade-off, memory against
context, a decoder layer as einsums, and MoE routing."""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.patches import FancyBboxPatch

from ..hardware import get_chip
from ..transformer import REMAT_POLICIES, as_config, einsum_flops
from ..units import check_positive, fmt
from .style import decade_ticks, figure_and_axes, legend_below, new_figure


def attention_share_chart(models=("llama3-8b", "llama3-70b", "llama3-405b"), seq_lens=None, causal: bool = False):
    """Chapter 4: share of the forward FLOPs spent in dot-product attention against context length.

    ``causal=False`` counts the full score matrix (the book's convention for the crossovers); a dot marks where
    attention equals the projections (QKVO) of the layer.
    """
    if seq_lens is None:
        seq_lens = np.unique(np.logspace(7, 20, 60, base=2).astype(int))
    fig, ax = new_figure()
    for name in models:
        m = as_config(name)
        share = [m.attention_fraction(int(T), causal=causal) for T in seq_lens]
        (line,) = ax.plot(seq_lens, share, label=f"{m.name or name} (D={m.d_model})")
        per_T = m.attention_flops(1, causal=causal) / m.n_layers
        t_eq = 2.0 * m.attention_params_per_layer() / per_T
        ax.plot([t_eq], [m.attention_fraction(max(1, int(round(t_eq))), causal=causal)], "o", color=line.get_color())
    ax.set_xscale("log", base=2)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set_xlabel("context length T (tokens)")
    ax.set_ylabel("attention share of forward FLOPs")
    ax.set_ylim(0, 1)
    kind = "causal, T/2 keys on average" if causal else "full score matrix"
    ax.set_title(f"Attention share of the forward FLOPs ({kind})")
    ax.plot([], [], "o", color="grey", label="attention = QKVO projections")
    legend_below(ax)
    return decade_ticks(fig)


def param_breakdown_chart(models=("tiny-mha", "llama2-13b", "llama3-8b", "llama3-70b", "llama3-405b", "deepseek-v3")):
    """Chapter 4: each model's parameters split by role (embedding, attention, MLP, norms, unembedding)."""
    roles = ("embedding", "attention", "mlp", "norms", "unembedding")
    colors = ("#9467bd", "#1f77b4", "#ff7f0e", "#7f7f7f", "#2ca02c")
    fig, ax = new_figure(height=0.45 * len(models) + 1.4)
    names = [as_config(m).name or str(m) for m in models]
    left = [0.0] * len(models)
    for role, color in zip(roles, colors):
        frac = []
        for m in models:
            b = as_config(m).param_breakdown()
            frac.append(getattr(b, role) / b.total)
        ax.barh(names, frac, left=left, color=color, label=role)
        left = [a + f for a, f in zip(left, frac)]
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel("fraction of parameters")
    legend_below(ax, ncol=5, fontsize=8)
    ax.grid(axis="y", visible=False)
    return decade_ticks(fig)


def kv_cache_chart(
    models=("llama2-13b", "llama3-70b", "deepseek-v3"),
    seq_lens=None,
    batch: int = 1,
    dtype: str = "bf16",
    hbm_bytes: float | None = None,
):
    """Chapter 4: KV-cache bytes of ``batch`` sequences against context length (MHA vs GQA vs MLA).

    ``hbm_bytes`` draws a horizontal line (e.g. one chip's HBM) for scale.
    """
    if seq_lens is None:
        seq_lens = np.unique(np.logspace(9, 17, 40, base=2).astype(int))
    fig, ax = new_figure()
    for name in models:
        m = as_config(name)
        kind = "MLA" if m.is_mla else ("MHA" if m.n_kv_heads == m.n_heads else f"GQA, K={m.n_kv_heads}")
        ax.plot(seq_lens, [m.kv_cache_bytes(batch, int(T), dtype) for T in seq_lens], label=f"{m.name} ({kind})")
    if hbm_bytes:
        ax.axhline(hbm_bytes, color="grey", ls=":", lw=1)
        ax.text(seq_lens[0], hbm_bytes * 1.15, "one chip's HBM", fontsize=8, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel(f"KV cache bytes ({dtype}, batch {batch})")
    ax.set_title("KV cache per sequence: grouped and latent attention shrink it")
    legend_below(ax)
    return decade_ticks(fig)


def remat_tradeoff_chart(models=("llama3-8b", "llama3-70b"), seq_len: int = 8192, dtype: str = "bf16"):
    """Chapter 4: what each remat policy keeps and what it costs. Left: activation bytes kept per token (all
    layers); right: the FLOPs recomputation adds, as a fraction of a training step. One bar per policy and model.
    """
    configs = [as_config(m) for m in models]
    if not configs:
        raise ValueError("models must name at least one model")
    fig, axes = new_figure(ncols=2, width=7.2, height=3.4)
    left, right = axes[0]
    width = 0.8 / len(configs)
    x = np.arange(len(REMAT_POLICIES))
    for i, m in enumerate(configs):
        kept = [m.checkpoint_bytes(1, p, dtype) for p in REMAT_POLICIES]
        train = m.flops_per_token(seq_len, training=True)
        extra = [m.recompute_flops(seq_len, p) / train for p in REMAT_POLICIES]
        left.bar(x + i * width, kept, width, color=f"C{i}", label=m.name)
        right.bar(x + i * width, extra, width, color=f"C{i}", label=m.name)
    for ax in (left, right):
        ax.set_xticks(x + width * (len(configs) - 1) / 2, [p.replace("_", " ") for p in REMAT_POLICIES], fontsize=8)
    left.set_yscale("log")
    left.set_ylabel(f"activation bytes kept per token ({dtype})")
    right.set_ylabel(f"extra FLOPs / training step (T = {seq_len})")
    legend_below(left, fontsize=8)
    fig.suptitle("Remat trades activation memory for recomputation", fontsize=11)
    fig.tight_layout()
    return decade_ticks(fig)


def _layer_boxes(m) -> list:
    """The boxes of :func:`transformer_layer_diagram` for config ``m``: ``(row, column, text, colour)``, columns
    0..2; weight matmuls in blue, the attention scores (which depend on the context S, not per weight) in orange."""
    D, N, K, H, F = m.d_model, m.n_heads, m.n_kv_heads, m.d_head, m.d_ff
    sizes = dict(b=1, t=1, d=D, n=N, k=K, g=N // K, h=H, f=F)

    def fl(spec):
        return fmt(einsum_flops(spec, **{c: sizes[c] for c in set(spec) if c.isalpha()}), "FLOPs")

    weight, attn, elem = "#cfe2f3", "#f9cb9c", "#eeeeee"
    return [
        (0, 1, "x [B, T, D]: the residual stream", elem),
        (1, 1, "RMSNorm (gain [D])", elem),
        (2, 0, f"Q: BTD,DNH→BTNH\nW_q [D, N, H]\n{fl('btd,dnh->btnh')}/token", weight),
        (2, 1, f"K: BTD,DKH→BTKH\nW_k [D, K, H]\n{fl('btd,dkh->btkh')}/token", weight),
        (2, 2, f"V: BTD,DKH→BTKH\nW_v [D, K, H]\n{fl('btd,dkh->btkh')}/token", weight),
        (3, 1, "rotary positions on Q and K", elem),
        (4, 1, f"scores: BTKGH,BSKH→BTSKG\n{fmt(2 * N * H, 'FLOPs')} × S per token", attn),
        (5, 1, "causal mask, softmax over S", elem),
        (6, 1, f"values: BTSKG,BSKH→BTKGH\n{fmt(2 * N * H, 'FLOPs')} × S per token", attn),
        (7, 1, f"out: BTNH,NHD→BTD\nW_o [N, H, D]\n{fl('btnh,nhd->btd')}/token", weight),
        (8, 1, "x + attention(x)", elem),
        (9, 1, "RMSNorm (gain [D])", elem),
        (10, 0, f"gate: BTD,DF→BTF\nW_gate [D, F]\n{fl('btd,df->btf')}/token", weight),
        (10, 2, f"up: BTD,DF→BTF\nW_up [D, F]\n{fl('btd,df->btf')}/token", weight),
        (11, 1, "silu(gate) × up", elem),
        (12, 1, f"down: BTF,FD→BTD\nW_down [F, D]\n{fl('btf,fd->btd')}/token", weight),
        (13, 1, "x + mlp(x)  → next layer", elem),
    ]


#: The data flow of :func:`transformer_layer_diagram`: (row, column) of each arrow's source and target box.
_LAYER_ARROWS = (
    ((0, 1), (1, 1)),
    ((1, 1), (2, 0)),
    ((1, 1), (2, 1)),
    ((1, 1), (2, 2)),
    ((2, 0), (3, 1)),
    ((2, 1), (3, 1)),
    ((3, 1), (4, 1)),
    ((2, 2), (6, 1)),
    ((4, 1), (5, 1)),
    ((5, 1), (6, 1)),
    ((6, 1), (7, 1)),
    ((7, 1), (8, 1)),
    ((8, 1), (9, 1)),
    ((9, 1), (10, 0)),
    ((9, 1), (10, 2)),
    ((10, 0), (11, 1)),
    ((10, 2), (11, 1)),
    ((11, 1), (12, 1)),
    ((12, 1), (13, 1)),
)


def _draw_boxes(ax, boxes, col_x, row_h: float, box_w: float) -> dict:
    """Draw each ``(row, column, text, colour)`` box in axes coordinates; return each one's ``(x, y, height)``."""
    centres = {}
    for row, col, text, color in boxes:
        x, y = col_x[col], 1 - (row + 0.7) * row_h
        tall = text.count("\n") >= 2
        h = row_h * (0.86 if tall else 0.5)
        ax.add_patch(
            FancyBboxPatch(
                (x - box_w / 2, y - h / 2),
                box_w,
                h,
                boxstyle="round,pad=0.004",
                facecolor=color,
                edgecolor="0.4",
                lw=0.8,
                transform=ax.transAxes,
            )
        )
        ax.text(x, y, text, ha="center", va="center", fontsize=8.5, transform=ax.transAxes)
        centres[(row, col)] = (x, y, h)
    return centres


def _draw_residuals(ax, centres: dict, xr: float, box_w: float) -> None:
    """The two residual connections, in green, round the right of the boxes at ``x = xr``."""
    for start, end in (((0, 1), (8, 1)), ((8, 1), (13, 1))):
        (x0, y0, _), (x1, y1, _) = centres[start], centres[end]
        ax.annotate(
            "",
            xy=(x1 + box_w / 2, y1),
            xytext=(xr, y1),
            xycoords="axes fraction",
            arrowprops=dict(arrowstyle="->", color="#2ca02c", lw=1.0),
        )
        ax.plot([x0 + box_w / 2, xr, xr], [y0, y0, y1], color="#2ca02c", lw=1.0, transform=ax.transAxes, clip_on=False)


def transformer_layer_diagram(model="llama3-8b"):
    """One decoder layer as a flow of einsums, each box with its contraction, weight shape and forward FLOPs per
    token at the sizes of ``model`` (Chapter 4). Pre-norm, GQA, gated MLP; the shapes come from
    ``TransformerConfig.layer_shapes`` and the FLOPs from ``einsum_flops``. Returns the figure."""
    m = as_config(model)
    if m.is_mla or m.is_moe:
        raise ValueError(f"model must be a dense GQA config (no MLA, no MoE) to draw this diagram; got {m.name!r}")
    D, N, K, H, F = m.d_model, m.n_heads, m.n_kv_heads, m.d_head, m.d_ff
    G = N // K
    boxes = _layer_boxes(m)
    fig, ax = new_figure(width=7.2, height=8.6)
    fig.subplots_adjust(left=0.01, right=0.97, top=0.93, bottom=0.0)
    ax.axis("off")
    ax.grid(False)
    col_x, row_h, box_w = (0.17, 0.5, 0.83), 1.0 / 14.5, 0.31
    centres = _draw_boxes(ax, boxes, col_x, row_h, box_w)
    for a, b in _LAYER_ARROWS:
        (x0, y0, h0), (x1, y1, h1) = centres[a], centres[b]
        ax.annotate(
            "",
            xy=(x1, y1 + h1 / 2),
            xytext=(x0, y0 - h0 / 2),
            xycoords="axes fraction",
            arrowprops=dict(arrowstyle="->", color="0.35", lw=0.9),
        )
    _draw_residuals(ax, centres, col_x[2] + box_w / 2 + 0.01, box_w)
    dense = 2 * (m.attention_params_per_layer() + m.dense_mlp_params())
    ax.set_title(
        f"One decoder layer of {m.name or 'the model'}: D={D}, N={N}, K={K} (G={G}), H={H}, F={F}\n"
        f"weight matmuls {fmt(dense, 'FLOPs')} per token forward (blue), attention 4·S·N·H "
        f"(orange); green: residual adds",
        fontsize=10,
    )
    return decade_ticks(fig)


def moe_routing_figure(top_experts, n_experts: int, capacity: int, probs=None):
    """Top-k routing of a few tokens to experts with a fixed number of slots each (Chapter 4).

    ``top_experts``: integer array ``[T, k]``, the experts each token chose, best first (e.g. from
    ``jax.lax.top_k`` of the router's softmax). Slots are filled in token order, as ``tpu_notes.model.moe_mlp``
    does; an assignment that finds its expert full is dropped (dashed red). ``probs`` ``[T, k]`` (optional) sets the
    line widths. Returns the figure.
    """
    top = np.asarray(top_experts)
    if top.ndim != 2 or top.size == 0 or not np.issubdtype(top.dtype, np.integer):
        raise ValueError(f"top_experts must be a non-empty integer array [T, k]; got shape {top.shape}")
    for name, value in (("n_experts", n_experts), ("capacity", capacity)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer; got {value!r}")
    if top.min() < 0 or top.max() >= n_experts:
        raise ValueError(f"top_experts must hold expert indices in [0, {n_experts}); got {top.min()}..{top.max()}")
    T, k = top.shape
    if T > 64 or n_experts * capacity > 256:
        raise ValueError("the figure draws at most 64 tokens and 256 slots")
    w = np.ones((T, k)) if probs is None else np.asarray(probs, dtype=float)
    fig, ax = new_figure(width=7.0, height=max(3.6, 0.18 * max(T, n_experts * (capacity + 0.6)) + 1.5))
    ax.axis("off")
    ax.grid(False)
    colors = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd")
    ty = np.linspace(1, 0, T)
    slot_y, y = {}, 1.0
    step = 1.0 / max(1, n_experts * (capacity + 0.6))
    for e in range(n_experts):
        for s in range(capacity):
            slot_y[(e, s)] = y
            ax.add_patch(
                matplotlib.patches.Rectangle(
                    (0.78, y - step * 0.4), 0.05, step * 0.8, facecolor="white", edgecolor="0.4", lw=0.6
                )
            )
            y -= step
        ax.text(0.86, slot_y[(e, 0)] - step * (capacity - 1) / 2, f"expert {e}", va="center", fontsize=9)
        y -= 0.6 * step
    for t in range(T):
        ax.text(0.07, ty[t], f"token {t}", ha="right", va="center", fontsize=9)
    used = {e: 0 for e in range(n_experts)}
    dropped = 0
    for t in range(T):  # token order, as the model's stable sort by expert keeps it
        for r in range(k):
            e = int(top[t, r])
            lw = 0.6 + 2.0 * float(w[t, r])
            if used[e] < capacity:
                ax.plot([0.09, 0.78], [ty[t], slot_y[(e, used[e])]], color=colors[r % len(colors)], lw=lw, alpha=0.8)
                used[e] += 1
            else:
                dropped += 1
                ax.plot([0.09, 0.5], [ty[t], ty[t] - 0.02], "--", color="#d62728", lw=1.0)
                ax.plot([0.5], [ty[t] - 0.02], "x", color="#d62728")
    for r in range(k):
        ax.plot([], [], color=colors[r % len(colors)], label=f"choice {r + 1}")
    ax.plot([], [], "--x", color="#d62728", label="dropped: expert full")
    legend_below(ax, ncol=k + 1, fontsize=8)
    ax.set_xlim(-0.08, 1.02)
    ax.set_title(
        f"Top-{k} routing of {T} tokens to {n_experts} experts with {capacity} slots each "
        f"({dropped} of {T * k} assignments dropped)",
        fontsize=10,
    )
    return decade_ticks(fig)


def memory_vs_context_chart(
    model="llama3-8b", batch: int = 16, seq_len: int = 8192, chip="v5p", seq_lens=None, ax=None
):
    """Bytes against context length for ``batch`` sequences (Chapter 4): the bf16 KV cache a server keeps, the
    activations training keeps under each remat policy, the bf16 weights, and one chip's HBM. A dot marks
    ``seq_len``. Returns the figure (draws into ``ax`` when given)."""
    m, c = as_config(model), get_chip(chip)
    batch = check_positive("batch", batch, integer=True)
    seq_len = check_positive("seq_len", seq_len, integer=True)
    if seq_lens is None:
        seq_lens = 2 ** np.arange(9, 18)  # 512 ... 131072 tokens
    seq_lens = [int(s) for s in seq_lens]
    fig, ax = figure_and_axes(ax, width=7.0, height=4.2)
    ax.loglog(
        seq_lens,
        [m.kv_cache_bytes(batch, s) for s in seq_lens],
        "-o",
        ms=3,
        color="#d62728",
        label=f"KV cache, {batch} sequences (bf16)",
    )
    styles = {"none": "-", "save_matmul_outputs": "--", "full_block": ":"}
    if not m.is_mla:
        for policy in REMAT_POLICIES:
            ax.loglog(
                seq_lens,
                [m.checkpoint_bytes(batch * s, policy) for s in seq_lens],
                styles[policy],
                color="#1f77b4",
                label=f"activations kept, remat '{policy}'",
            )
    ax.axhline(2 * m.param_count(), color="#7f7f7f", lw=1, label="weights (bf16)")
    ax.axhline(c.hbm_bytes, color="black", lw=1, ls="-.", label=f"HBM of one {c.name}")
    ax.plot([seq_len], [m.kv_cache_bytes(batch, seq_len)], "o", color="#d62728", ms=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length (tokens per sequence)")
    ax.set_ylabel("bytes")
    ax.set_title(f"{m.name}: memory against context, batch of {batch} sequences", fontsize=10)
    legend_below(ax, fontsize=8)
    fig.tight_layout()
    return decade_ticks(fig)
