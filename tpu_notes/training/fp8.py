"""FP8 training: which matmuls run in FP8, what share of the FLOPs that is, and the step-time gain it allows
(Chapter 5).

The common recipes (NVIDIA Transformer Engine's FP8 linear layers in Megatron-Core / NeMo; torchtitan's Float8
linears; DeepSeek-V3's fine-grained FP8, arXiv 2412.19437 §3.3) run the **linear layers** in FP8: the attention
projections (q, k, v, o) and the MLP matrices, in all three of their GEMMs (forward, input gradient, weight
gradient), with per-tensor or per-block scales. They keep in bf16 (or fp32) what is small or sensitive: attention's
own score and context matmuls (``Q·Kᵀ`` and ``P·V``), the embedding and the unembedding (the output head), the
norms, the softmax, and the optimizer state. :func:`fp8_gain` takes the FLOPs of each part from
:meth:`tpu_notes.transformer.TransformerConfig.flops_breakdown` (the same counts as
:func:`tpu_notes.training.flops_per_token`) and applies Amdahl's law: if a fraction ``f`` of the training FLOPs
runs ``r = peak_fp8 / peak_bf16`` times faster, an ideal, compute-bound step takes ``(1 − f) + f / r`` of its bf16
time. Attention grows with the sequence, so the gain falls at long context.

The FP8 runs recorded in ``tpu_notes.training.published.RUNS`` are those with ``dtype == "fp8"`` (NeMo's Llama
3 rows on H100/B200, torchtitan's Float8 rows): :func:`fp8_runs`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..hardware import get_chip
from ..transformer import as_config
from ..units import SeqLen, checked

__all__ = ["BF16_PARTS", "FP8_PARTS", "Fp8Gain", "fp8_gain", "fp8_runs"]

#: Parts of :class:`~tpu_notes.transformer.FlopsBreakdown` the common recipes run in FP8 (the linear layers).
FP8_PARTS = ("projections", "mlp")
#: Parts they keep in bf16: attention's score/context matmuls and the unembedding (embedding lookups and norms
#: cost no matmul FLOPs here).
BF16_PARTS = ("attention", "unembedding")


@dataclass(frozen=True)
class Fp8Gain:
    """The FP8 share of a model's training FLOPs per token and the ideal step-time gain on one chip."""

    seq_len: int  # tokens per sequence (sets the attention FLOPs)
    fp8_flops: float  # training FLOPs per token in the linear layers' GEMMs (FP8), FLOPs
    bf16_flops: float  # training FLOPs per token left in bf16 (attention matmuls, unembedding), FLOPs
    fp8_fraction: float  # fp8_flops / (fp8_flops + bf16_flops)
    peak_ratio: float  # chip's FP8 peak / its bf16 peak
    step_ratio: float  # ideal FP8 step time / bf16 step time: (1 − f) + f / r
    speedup: float  # 1 / step_ratio

    def __repr__(self) -> str:
        return (
            f"Fp8Gain(S={self.seq_len:,}: {self.fp8_fraction:.1%} of the FLOPs in FP8 at {self.peak_ratio:.3g}x the "
            f"bf16 peak -> ideal speedup {self.speedup:.3g}x)"
        )


@checked
def fp8_gain(model, chip, seq_len: SeqLen) -> Fp8Gain:
    """The share of ``model``'s training FLOPs per token (causal attention at ``seq_len`` tokens included) that the
    common FP8 recipes run in FP8 (:data:`FP8_PARTS`), and the ideal compute-bound speedup at ``chip``'s FP8 peak
    by Amdahl's law with the bf16 remainder (:data:`BF16_PARTS`). A ``ValueError`` names ``chip`` if it has no FP8
    peak (TPU v5p and v6e list int8, not FP8)."""
    m = as_config(model)
    c = get_chip(chip)
    try:
        r = c.peak_flops("fp8") / c.peak_flops("bf16")
    except ValueError as err:
        raise ValueError(f"chip: {err}") from None
    b = m.flops_breakdown(seq_len, training=True, causal=True)
    fp8 = sum(getattr(b, k) for k in FP8_PARTS)
    bf16 = sum(getattr(b, k) for k in BF16_PARTS)
    f = fp8 / (fp8 + bf16)
    step = (1 - f) + f / r
    return Fp8Gain(
        seq_len=seq_len,
        fp8_flops=fp8,
        bf16_flops=bf16,
        fp8_fraction=f,
        peak_ratio=r,
        step_ratio=step,
        speedup=1 / step,
    )


def fp8_runs() -> tuple:
    """The published runs of ``tpu_notes.training.published.RUNS`` whose large matmuls ran in FP8."""
    from .published import RUNS

    return tuple(r for r in RUNS if r.dtype == "fp8")
