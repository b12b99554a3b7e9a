"""What speculative sampling buys, in expectation (Chapter 7; the sampler itself is :mod:`tpu_notes.generate`).

A draft model proposes ``k`` tokens; the target scores all of them in one step and keeps a prefix. If each draft
token is accepted with probability ``a`` (independently), a round yields ``1 + a + a² + … + a^k =
(1 − a^{k+1}) / (1 − a)`` tokens: the accepted drafts plus the target's own token at the first rejection (or after
the last draft). A round costs ``k`` draft steps and one target step that scores ``k + 1`` positions; while the
target's step is memory-bound that costs about as much as a normal step.
"""

from __future__ import annotations

from typing import Annotated

from ..units import NonNegativeFloat, Positive, PositiveFloat, Probability, checked

#: Most drafts per round the functions take.
MAX_DRAFTS = 1024
Drafts = Annotated[int, Positive(integer=True, maximum=MAX_DRAFTS)]


@checked
def expected_tokens_per_round(acceptance: Probability, k: Drafts) -> float:
    """Expected tokens a round of ``k`` drafts yields: ``(1 − a^{k+1}) / (1 − a)`` (``k + 1`` when ``a = 1``)."""
    a = acceptance
    return float(k + 1) if a == 1.0 else (1.0 - a ** (k + 1)) / (1.0 - a)


@checked
def speculative_speedup(
    acceptance: Probability, k: Drafts, draft_cost: NonNegativeFloat = 0.0, verify_cost: PositiveFloat = 1.0
) -> float:
    """Tokens per unit time relative to plain decoding: ``E[tokens] / (k · draft_cost + verify_cost)``, with costs
    in units of one target decode step (``verify_cost`` > 1 when scoring ``k + 1`` positions is not free)."""
    return expected_tokens_per_round(acceptance, k) / (k * draft_cost + verify_cost)


@checked
def best_k(
    acceptance: Probability, draft_cost: NonNegativeFloat, k_max: Drafts = 16, verify_cost: PositiveFloat = 1.0
) -> int:
    """The number of drafts per round (1..``k_max``) with the largest :func:`speculative_speedup`."""
    return max(range(1, k_max + 1), key=lambda k: speculative_speedup(acceptance, k, draft_cost, verify_cost))


__all__ = ["best_k", "expected_tokens_per_round", "speculative_speedup"]
