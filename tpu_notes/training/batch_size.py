"""The batch that optimisation can use: the gradient noise scale and the steps-versus-data trade-off (Chapter 5).

Chapter 5's *hardware* critical batch is the smallest batch per chip that keeps a layout compute-bound (e.g.
``C / W_ici`` tokens for data parallelism). Optimisation sets a ceiling from the other side. McCandlish, Kaplan,
Amodei and the OpenAI Dota team, "An Empirical Model of Large-Batch Training" (2018, arXiv 1812.06162), model one
SGD step as a noisy estimate of the true gradient ``G``: averaging ``B`` examples divides the noise by ``B``, and once
``B`` is much larger than the **gradient noise scale**

    B_noise ≈ B_simple = tr(Σ) / ‖G‖²

(``Σ`` the covariance of one example's gradient; their eq. 2.8 for ``B_simple``, the Hessian-free form) a larger
batch barely improves a step any more. Over a whole run the same model gives the trade-off (their eq. 2.11)

    (S / S_min − 1) · (E / E_min − 1) = 1,  i.e.  S = S_min (1 + B_crit / B),  E = E_min (1 + B / B_crit),

between the optimisation steps ``S`` and the examples (here tokens) ``E`` needed to reach a given loss, with
``S_min``, ``E_min`` the limits at infinite and at tiny batch and the **critical batch** ``B_crit = E_min / S_min ≈
B_noise``. At ``B = B_crit`` a run takes twice the minimal steps and twice the minimal data; far above it, each
doubling of the batch doubles the tokens and saves almost no steps. Kaplan et al., "Scaling Laws for Neural Language
Models" (2020, arXiv 2001.08361, eq. 1.4 and section 5.1) fit ``B_crit(L) ≈ B_* / L^(1/α_B)`` tokens for their
WebText2 Transformers, with ``B_* ≈ 2·10⁸`` tokens and ``α_B ≈ 0.21``: the critical batch grows as the loss falls.

Pure Python, no JAX.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..units import PositiveFloat, checked

__all__ = [
    "KAPLAN_ALPHA_B",
    "KAPLAN_B_STAR",
    "BatchTradeoff",
    "NoiseScale",
    "batch_tradeoff",
    "kaplan_critical_batch",
    "noise_scale",
    "noise_scale_from_batches",
]

#: Tokens: the scale ``B_*`` of Kaplan et al. 2020's fit (arXiv 2001.08361, eq. 1.4), ``B_crit(L) ≈ B_* / L^(1/α_B)``
#: with ``L`` the cross-entropy loss in nats per token on their WebText2 test set (their tokenizer and data; the fit
#: does not carry over to another tokenizer's loss without refitting).
KAPLAN_B_STAR = 2e8
#: The exponent ``α_B`` of the same fit (arXiv 2001.08361, eq. 1.4).
KAPLAN_ALPHA_B = 0.21


@dataclass(frozen=True)
class NoiseScale:
    """The simple gradient noise scale and the two quantities it is the ratio of (McCandlish et al. 2018)."""

    grad_sq_norm: float  # ‖G‖², squared norm of the true (full-batch) gradient
    trace_cov: float  # tr(Σ), summed variance of one example's gradient
    b_simple: float  # tr(Σ) / ‖G‖², in examples (tokens when one example is one token)


@dataclass(frozen=True)
class BatchTradeoff:
    """What a batch costs in optimisation steps and in data, relative to the two ideal limits (eq. 2.11)."""

    batch: float  # examples (tokens) per step
    critical_batch: float  # B_crit, same unit
    steps_ratio: float  # S / S_min = 1 + B_crit / B
    data_ratio: float  # E / E_min = 1 + B / B_crit


@checked
def noise_scale(grad_sq_norm: PositiveFloat, trace_cov: PositiveFloat) -> NoiseScale:
    """``B_simple = tr(Σ) / ‖G‖²`` from the squared norm of the true gradient and the summed per-example variance
    (McCandlish et al. 2018, eq. 2.8)."""
    return NoiseScale(grad_sq_norm, trace_cov, trace_cov / grad_sq_norm)


@checked
def noise_scale_from_batches(
    batch_small: PositiveFloat,
    sq_norm_small: PositiveFloat,
    batch_big: PositiveFloat,
    sq_norm_big: PositiveFloat,
) -> NoiseScale:
    """Estimate the noise scale from the squared norms of gradients averaged over two batch sizes, as data-parallel
    training gets them for free (one chip's gradient and the AllReduced one; McCandlish et al. 2018, appendix A.1).
    Since ``E‖G_B‖² = ‖G‖² + tr(Σ)/B``:

        ‖G‖² ≈ (B_big ‖G_big‖² − B_small ‖G_small‖²) / (B_big − B_small),
        tr(Σ) ≈ (‖G_small‖² − ‖G_big‖²) / (1/B_small − 1/B_big).

    ``batch_big`` must exceed ``batch_small``, and the smaller batch's gradient must be the noisier one (a larger
    squared norm); otherwise the estimate is not positive and a ``ValueError`` says so."""
    if batch_big <= batch_small:
        raise ValueError(f"batch_big ({batch_big}) must be larger than batch_small ({batch_small})")
    g2 = (batch_big * sq_norm_big - batch_small * sq_norm_small) / (batch_big - batch_small)
    tr = (sq_norm_small - sq_norm_big) / (1 / batch_small - 1 / batch_big)
    if g2 <= 0 or tr <= 0:
        raise ValueError(
            f"sq_norm_small ({sq_norm_small}) and sq_norm_big ({sq_norm_big}) give a non-positive estimate "
            f"(‖G‖² = {g2:.3g}, tr(Σ) = {tr:.3g}): the small batch's squared norm must be the larger one, by less "
            "than batch_big / batch_small times"
        )
    return NoiseScale(g2, tr, tr / g2)


@checked
def batch_tradeoff(batch: PositiveFloat, critical_batch: PositiveFloat) -> BatchTradeoff:
    """Steps and data a run at ``batch`` needs relative to their minima, given the critical batch (same unit):
    ``S/S_min = 1 + B_crit/B`` and ``E/E_min = 1 + B/B_crit`` (McCandlish et al. 2018, eq. 2.11)."""
    return BatchTradeoff(batch, critical_batch, 1 + critical_batch / batch, 1 + batch / critical_batch)


@checked
def kaplan_critical_batch(loss: PositiveFloat) -> float:
    """Critical batch in tokens at cross-entropy ``loss`` (nats per token), Kaplan et al. 2020's fit
    ``B_* / L^(1/α_B)`` (:data:`KAPLAN_B_STAR`, :data:`KAPLAN_ALPHA_B`); meaningful only for losses measured as
    theirs were (their tokenizer and test set)."""
    return KAPLAN_B_STAR / loss ** (1 / KAPLAN_ALPHA_B)
