"""What speculative sampling buys, in expectation (Chapter 7; the sampler itself is :mod:`tpu_notes.generate`).

A draft model proposes ``k`` tokens; the target scores all of them in one step and keeps a prefix. If each draft
token is accepted with probability ``a`` (independently), a round yields ``1 + a + a² + … + a^k =
(1 − a^{k+1}) / (1 − a)`` tokens: the accepted drafts plus the target's own token at the first rejection (or after
the last draft). A round costs ``k`` draft steps and one target step that scores ``k + 1`` positions per sequence.

That verify step is not free. :func:`speculative_speedup` takes its cost as a number (``verify_cost = 1``: the
small-batch limit, where the step reads its weights and caches and the extra rows ride along);
:func:`speculative_decoding` prices it on a deployment with the one serving step model
(:mod:`tpu_notes.inference.engine`). Scoring ``k + 1`` positions for each of ``B`` sequences is a step of
``B·(k + 1)`` rows: ``Deployment.step(decode=B, kv_tokens=B·S, prefill_tokens=B·k, prefill_pairs=B·k(k+1)/2)``.
The ``B·k`` draft rows pass through every weight matmul, AllReduce and elementwise pass like prompt tokens; their
attention over the cache reads the same ``B·S`` tokens the decoded rows read (the ``kv`` part, counted once); the
pairs are the drafts attending to each other. The cache attention of ``k + 1`` queries per head stays memory-bound
while ``2 (k + 1) · G / kv_bytes`` FLOPs per byte (``G`` query heads per KV head) is below the chip's ridge: 80 of
v5e's 240 for Llama 3 70B with ``k = 4`` and an int8 cache; past it this mapping undercounts. The verify cost is that
step over the plain decode step at ``B``. While the matmuls are weight-bound (``B·(k + 1)`` under the critical
batch) it is near 1; past it the matmul FLOPs and the AllReduces grow with the rows and the verify step costs up to
``k + 1`` steps, so speculation pays only while the batch is small: it trades spare FLOPs for latency, and a server
run at large batch has none to spare.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from .. import rules
from ..units import NonNegativeFloat, Positive, PositiveFloat, Probability, Shape, checked, fmt
from .engine import MAX_ROWS, Deployment, EngineStep
from .step import MAX_BATCH, Batch, Context

#: Most drafts per round the functions take.
MAX_DRAFTS = 1024
Drafts = Annotated[int, Positive(integer=True, maximum=MAX_DRAFTS)]
#: Most batches :func:`speculative_vs_batch` evaluates.
MAX_BATCHES = 4096
#: The batches :func:`speculative_vs_batch` tries by default: powers of two, 1 to 1024.
DEFAULT_BATCHES = tuple(2**i for i in range(11))
_DraftsMax = Annotated[int, Positive(integer=True, maximum=64)]


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
    in units of one target decode step. ``verify_cost = 1`` is the small-batch limit; the real cost at a batch is
    ``SpeculativeResult.verify_cost`` (:func:`speculative_decoding`)."""
    return expected_tokens_per_round(acceptance, k) / (k * draft_cost + verify_cost)


@checked
def best_k(
    acceptance: Probability, draft_cost: NonNegativeFloat, k_max: Drafts = 16, verify_cost: PositiveFloat = 1.0
) -> int:
    """The number of drafts per round (1..``k_max``) with the largest :func:`speculative_speedup` at a fixed
    ``verify_cost``; :func:`best_k_at_batch` lets the verify cost grow with ``k`` as the engine prices it."""
    return max(range(1, k_max + 1), key=lambda k: speculative_speedup(acceptance, k, draft_cost, verify_cost))


@dataclass(frozen=True)
class SpeculativeResult:
    """Speculative decoding at one batch on one deployment: what a round costs and yields, against plain decoding."""

    k: int  # drafts per round
    acceptance: float  # probability each draft token is kept (independently)
    batch: int  # sequences decoding together
    context: int  # tokens of context per sequence when the round starts
    tokens_per_round: float  # expected tokens a round yields per sequence
    verify_cost: float  # the target's step scoring k + 1 positions / its plain decode step, at this batch
    draft_cost: float  # one draft step / one plain target decode step, at this batch
    speedup: float  # tokens per second per sequence relative to plain decoding: tokens_per_round / round cost
    round_s: float  # one round: k draft steps + one verify step, seconds
    decode_s: float  # one plain target decode step at this batch, seconds
    verify_step: EngineStep = field(repr=False)  # the target's verify step
    decode_step: EngineStep = field(repr=False)  # the target's plain decode step
    draft_step: EngineStep | None = field(default=None, repr=False)  # the draft's step (None: draft_cost given)

    @property
    def pays(self) -> bool:
        """Whether speculation is faster than plain decoding here (speedup above 1)."""
        return self.speedup > 1.0

    def __repr__(self) -> str:
        return (
            f"SpeculativeResult(speedup={self.speedup:.2f}x at batch {self.batch}, context {self.context:,}: "
            f"k={self.k}, acceptance {self.acceptance:g}, {self.tokens_per_round:.2f} tokens per round; verify "
            f"{self.verify_cost:.2f} steps, draft {self.draft_cost:.3g} of a step; round {fmt(self.round_s, 's')} "
            f"vs step {fmt(self.decode_s, 's')})"
        )


def _draft_cost(target: Deployment, draft, draft_cost, batch: int, context: int, decode: EngineStep):
    """(draft cost in target steps, the draft's step or None)."""
    from .cost import _check_deployment

    if draft is not None and draft_cost is not None:
        raise ValueError("give draft (a Deployment of the draft model) or draft_cost (in target steps), not both")
    if draft is None:
        return (0.0 if draft_cost is None else draft_cost), None
    d = _check_deployment(draft, "draft")
    if batch * (context + 1) > d.kv_capacity_tokens:
        raise ValueError(
            f"draft: batch={batch} sequences of {context:,} tokens do not fit the draft's deployment "
            f"({d.n_chips} {d.chip.long_name} devices hold at most {d.max_batch(context + 1)})"
        )
    s = d.step(batch, batch * context)
    return s.total / decode.total, s


def _rows(batch: int, k: int, *, batch_arg: str = "batch", k_arg: str = "k") -> None:
    """A verify step scores ``k + 1`` positions of each of ``batch`` sequences: at most one engine step's rows."""
    rules.product_within({batch_arg: batch, f"({k_arg} + 1)": k + 1}, MAX_ROWS, what="rows in one verify step")


def _result(target: Deployment, batch, context, k, acceptance, draft, draft_cost) -> SpeculativeResult:
    B, S = batch, context
    if B * (S + k + 1) > target.kv_capacity_tokens:
        raise ValueError(
            f"batch={B} sequences of {S:,} tokens plus {k + 1} scored positions do not fit beside the weights on "
            f"{target.n_chips} {target.chip.long_name} devices: the largest batch that fits is "
            f"{target.max_batch(S + k + 1)}"
        )
    decode = target.step(B, B * S)
    verify = target.step(B, B * S, B * k, B * k * (k + 1) / 2.0)
    dc, dstep = _draft_cost(target, draft, draft_cost, B, S, decode)
    vc = verify.total / decode.total
    tokens = expected_tokens_per_round(acceptance, k)
    if dc:
        rules.finite_result(k * dc * decode.total, argument="draft_cost", what="the drafts' seconds per round")
    return SpeculativeResult(
        k=k,
        acceptance=acceptance,
        batch=B,
        context=S,
        tokens_per_round=tokens,
        verify_cost=vc,
        draft_cost=dc,
        speedup=tokens / (k * dc + vc),
        round_s=k * dc * decode.total + verify.total,
        decode_s=decode.total,
        verify_step=verify,
        decode_step=decode,
        draft_step=dstep,
    )


def _target(deployment) -> Deployment:
    from .cost import _check_deployment

    return _check_deployment(deployment)


@checked
def speculative_decoding(
    deployment: Deployment,
    batch: Batch,
    context: Context,
    k: Drafts,
    acceptance: Probability,
    *,
    draft: Deployment | None = None,
    draft_cost: NonNegativeFloat | None = None,
) -> SpeculativeResult:
    """Speculative decoding of ``batch`` sequences at ``context`` tokens on ``deployment`` (the target), ``k``
    drafts per round each kept with probability ``acceptance``, with the verify step priced by the engine (see the
    module docstring). The draft's cost is its own deployment's decode step at ``batch`` over the target's (``draft``,
    one draft step per proposed token, at the round's starting context), or ``draft_cost`` in target steps, or 0
    when neither is given (a draft that costs nothing: prompt lookup, n-grams). Refuses, naming ``batch``, a batch
    whose caches with the ``k + 1`` scored positions do not fit, and a ``batch`` and ``k`` whose verify step has more
    rows than one engine step holds."""
    _rows(batch, k)
    return _result(_target(deployment), batch, context, k, acceptance, draft, draft_cost)


@checked
def speculative_vs_batch(
    deployment: Deployment,
    context: Context,
    k: Drafts,
    acceptance: Probability,
    batches: Annotated[Sequence[int], Shape()] = DEFAULT_BATCHES,
    *,
    draft: Deployment | None = None,
    draft_cost: NonNegativeFloat | None = None,
) -> tuple[SpeculativeResult, ...]:
    """:func:`speculative_decoding` at each of ``batches`` (at most :data:`MAX_BATCHES`) whose caches fit, in the
    order given: the speedup falls as the batch grows and the verify step turns compute-bound. Refuses, naming
    ``batches``, a list of which not one fits."""
    d = _target(deployment)
    rules.bounded_work(len(batches), argument="batches", limit=MAX_BATCHES, unit="batches")
    for i, b in enumerate(batches):
        if b > MAX_BATCH:
            raise ValueError(f"batches[{i}] must be at most {MAX_BATCH:,}; got {b}")
    fit = d.max_batch(min(context + k + 1, 2**26))
    for i, b in enumerate(batches):
        if b <= fit:
            _rows(b, k, batch_arg=f"batches[{i}]")
    out = tuple(_result(d, b, context, k, acceptance, draft, draft_cost) for b in batches if b <= fit)
    if not out:
        raise ValueError(f"batches: not one of {tuple(batches)} fits at context {context:,}: at most {fit}")
    return out


@checked
def best_k_at_batch(
    deployment: Deployment,
    batch: Batch,
    context: Context,
    acceptance: Probability,
    *,
    k_max: _DraftsMax = 16,
    draft: Deployment | None = None,
    draft_cost: NonNegativeFloat | None = None,
) -> SpeculativeResult:
    """The :func:`speculative_decoding` with the largest speedup over ``k = 1 .. k_max`` at ``batch``: the verify
    cost is priced for each ``k``, so a large batch wants fewer drafts than :func:`best_k` at ``verify_cost = 1``
    says (its speedup may stay below 1: then no speculation is the better choice)."""
    d = _target(deployment)
    _rows(batch, k_max, k_arg="k_max")
    results = [_result(d, batch, context, k, acceptance, draft, draft_cost) for k in range(1, k_max + 1)]
    return max(results, key=lambda r: r.speedup)


__all__ = [
    "DEFAULT_BATCHES",
    "MAX_BATCHES",
    "MAX_DRAFTS",
    "SpeculativeResult",
    "best_k",
    "best_k_at_batch",
    "expected_tokens_per_round",
    "speculative_decoding",
    "speculative_speedup",
    "speculative_vs_batch",
]
