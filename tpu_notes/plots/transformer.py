"""Chapter 4 figures: attention share, parameter breakdown, KV cache, and the remat trade-off."""
from __future__ import annotations

from .style import new_figure


def attention_share_chart(models=("llama3-8b", "llama3-70b", "llama3-405b"), seq_lens=None, causal: bool = False):
    """Chapter 4: share of the forward FLOPs spent in dot-product attention against context length.

    ``causal=False`` counts the full score matrix (the book's convention for the crossovers); a dot marks where
    attention equals the projections (QKVO) of the layer.
    """
    import numpy as np

    from ..transformer import as_config

    if seq_lens is None:
        seq_lens = np.unique(np.logspace(7, 20, 60, base=2).astype(int))
    fig, ax = new_figure()
    for name in models:
        m = as_config(name)
        share = [m.attention_fraction(int(T), causal=causal) for T in seq_lens]
        line, = ax.plot(seq_lens, share, label=f"{m.name or name} (D={m.d_model})")
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
    ax.legend(loc="upper left")
    return fig


def param_breakdown_chart(models=("tiny-mha", "llama2-13b", "llama3-8b", "llama3-70b", "llama3-405b",
                                  "deepseek-v3")):
    """Chapter 4: each model's parameters split by role (embedding, attention, MLP, norms, unembedding)."""
    from ..transformer import as_config

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
    ax.legend(ncol=5, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8)
    ax.grid(axis="y", visible=False)
    return fig


def kv_cache_chart(models=("llama2-13b", "llama3-70b", "deepseek-v3"), seq_lens=None, batch: int = 1,
                   dtype: str = "bf16", hbm_bytes: float | None = None):
    """Chapter 4: KV-cache bytes of ``batch`` sequences against context length (MHA vs GQA vs MLA).

    ``hbm_bytes`` draws a horizontal line (e.g. one chip's HBM) for scale.
    """
    import numpy as np

    from ..transformer import as_config

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
    ax.legend()
    return fig


def remat_tradeoff_chart(models=("llama3-8b", "llama3-70b"), seq_len: int = 8192, dtype: str = "bf16"):
    """Chapter 4: what each remat policy keeps and what it costs. Left: activation bytes kept per token (all
    layers); right: the FLOPs recomputation adds, as a fraction of a training step. One bar per policy and model.
    """
    import numpy as np

    from ..transformer import REMAT_POLICIES, as_config

    configs = [as_config(m) for m in models]
    if not configs:
        raise ValueError("models must name at least one model")
    fig, axes = new_figure(ncols=2, width=8.0, height=3.6)
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
    left.legend(fontsize=8)
    fig.suptitle("Remat trades activation memory for recomputation", fontsize=11)
    fig.tight_layout()
    return fig
