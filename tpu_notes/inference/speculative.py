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

**What drafts.** A draft is priced the way it runs, on the target's own system and through the same engine:

- *A draft model* (``draft="llama3.2-1b"``, ``"llama3-8b"``, or any :class:`~tpu_notes.transformer.TransformerConfig`
  with the target's vocabulary, which speculative sampling needs): :func:`draft_deployment` deploys it on
  ``target.system`` with the target's dtypes and efficiency model, tensor-parallel over the same devices (vLLM's
  default ``draft_tensor_parallel_size``), and one draft step is its engine step at batch ``B`` and the round's
  context. Its weights and caches come out of the target's KV pool, which :func:`speculative_decoding` checks. A
  small draft is not a small fraction of a step: every layer pays the engine's per-layer overhead and its two
  AllReduces whatever its width, so on 32 v5e chips Llama 3.2 1B's 16 layers cost about 15% of Llama 3 70B's 80
  and Llama 3 8B's 32 about 30%.
- *A draft head* (``draft="eagle"`` or ``"mtp"``, :func:`draft_head`): one extra transformer layer of the target's
  own shape that reads the target's last hidden state with the next token's embedding and predicts through the
  target's LM head. EAGLE (Y. Li et al., "EAGLE: Speculative Sampling Requires Rethinking Feature Uncertainty", ICML
  2024, arXiv 2401.15077) trains it beside a frozen target; DeepSeek-V3's multi-token-prediction module
  (DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437, §2.2 "Multi-Token Prediction", and its discussion
  of reusing the module for speculative decoding) is the same block trained with the model. Both join the two inputs
  through a ``[2D, D]`` projection before the layer (DeepSeek-V3 normalises each first). One draft token costs one
  engine step of a one-layer model of the target's shape with the target's (untied) LM head (the projection's
  ``2D²`` parameters carried as extra MLP width, same bytes and FLOPs; a MoE target's head keeps one MoE layer, its
  projection left out): about one layer's share of a target step plus the LM head's read. Its cache is one layer's.
- *A fixed fraction* (``draft_cost=0.05``: the draft step in target steps): the assumption Chapter 7 used to start
  from, kept as an explicit option; it is not what the engine prices any named draft at.
- *Nothing* (neither given): a draft that costs nothing (prompt lookup, n-grams).

**Acceptance as engines report it.** Engines report the *mean acceptance length* ``τ``: tokens per round
including the bonus token (vLLM's spec-decode metrics, ``1 + accepted / drafts``, and its per-request
``mean_acceptance_length``; SGLang's ``avg_spec_accept_length`` / ``accept_length``; TensorRT-LLM's acceptance
length), and often an *acceptance rate*, ``accepted draft tokens / drafted tokens`` (vLLM's
``draft_acceptance_rate``), which is ``(τ − 1) / k``, not the per-token probability ``a`` of the formula above.
:func:`acceptance_from_mean_length` and :func:`acceptance_from_draft_rate` convert either into ``a`` under the
same independence model, so a figure an engine printed can be fed back in.

**For a simulator.** :func:`round_seconds` is one round's seconds (``k`` draft steps and one verify step) for
``decode`` sequences and ``kv_tokens`` tokens of context between them: a step clock for a speculative engine, each
sequence emitting :func:`expected_tokens_per_round` tokens per round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated

from .. import rules
from ..transformer import TransformerConfig, as_config
from ..units import NonNegativeFloat, Positive, PositiveFloat, Probability, Shape, checked, fmt
from .engine import MAX_ROWS, MAX_STEP_TOKENS, Deployment, EngineStep, _check_deployment, deploy
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
    return _tokens(acceptance, k)


def _tokens(a: float, k: int) -> float:
    """:func:`expected_tokens_per_round`, unchecked."""
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


@checked
def acceptance_from_mean_length(tau: PositiveFloat, k: Drafts) -> float:
    """The per-token acceptance probability ``a`` whose :func:`expected_tokens_per_round` at ``k`` drafts is
    ``tau``, the *mean acceptance length* engines report (tokens per round, the bonus token included; see the module
    docstring): the root of ``(1 − a^{k+1}) / (1 − a) = tau``, which rises from 1 at ``a = 0`` to ``k + 1`` at
    ``a = 1``. Found by bisection to the float's precision. Refuses, naming ``tau``, a length outside ``[1, k + 1]``
    (a round yields at least its bonus token and at most every draft plus it)."""
    if not 1.0 <= tau <= k + 1:
        raise ValueError(
            f"tau must be in [1, k + 1] = [1, {k + 1}] for k={k} drafts (tokens per round, the bonus token included); "
            f"got {tau!r}"
        )
    if tau == 1.0:
        return 0.0
    if tau == k + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(200):  # each halving gains a bit; 64 reach the float's resolution on [0, 1]
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if _tokens(mid, k) < tau:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@checked
def acceptance_from_draft_rate(rate: Probability, k: Drafts) -> float:
    """The per-token acceptance probability ``a`` from a *draft acceptance rate* (accepted draft tokens over drafted
    tokens, vLLM's ``draft_acceptance_rate``) at ``k`` drafts per round: the mean acceptance length is
    ``1 + rate · k``, inverted by :func:`acceptance_from_mean_length`. Under the independence model ``rate`` is
    ``(a + a² + … + a^k) / k``, below ``a`` for ``k > 1``: the two "acceptance rates" are not the same number."""
    return acceptance_from_mean_length(min(1.0 + rate * k, float(k + 1)), k)


#: Draft heads on the target's hidden state (:func:`draft_head`), by the names ``draft=`` takes.
HEAD_DRAFTS = ("eagle", "mtp")


def _same_system(target: Deployment, model: TransformerConfig) -> Deployment:
    """``model`` deployed on ``target``'s system with its dtypes, reserve and efficiency model (memory unchecked:
    :func:`speculative_decoding` checks the two together)."""
    try:
        return deploy(
            model,
            target.system,
            weight_dtype=target.weight_dtype,
            kv_dtype=target.kv_dtype,
            compute_dtype=target.compute_dtype,
            reserve_fraction=target.reserve_fraction,
            efficiency=target.efficiency,
            check_memory=False,
        )
    except ValueError as err:
        raise ValueError(
            f"draft {model.name or 'model'!r} cannot be laid out on the target's {target.n_chips} devices: {err}"
        ) from None


@checked
def draft_head(target: Deployment) -> Deployment:
    """An EAGLE / multi-token-prediction draft head of ``target`` (see the module docstring), as a
    :class:`~tpu_notes.inference.engine.Deployment` on the target's system: a one-layer model of the target's shape
    (its attention, its MLP or MoE layer, its LM head, untied), the ``[2D, D]`` projection that joins the hidden
    state and the token embedding carried as ``2D² / (matrices · D)`` extra MLP width in a dense layer. Its
    :meth:`~tpu_notes.inference.engine.Deployment.step` at a batch is one draft token's cost."""
    t = _target(target, "target")
    m = t.model
    if m.is_moe:
        head = m.with_(n_layers=1, n_dense_layers=0, tied_embeddings=False, name=f"{m.name}-head")
    else:
        extra = round(2 * m.d_model / m.mlp_matrices)  # 2·D² parameters as extra width of a D-wide MLP
        head = m.with_(n_layers=1, d_ff=m.d_ff + extra, tied_embeddings=False, name=f"{m.name}-head")
    return _same_system(t, head)


def draft_deployment(target: Deployment, draft) -> Deployment:
    """The draft ``draft`` names, on ``target``'s system: a model name or
    :class:`~tpu_notes.transformer.TransformerConfig` deployed there with the target's dtypes and efficiency model;
    ``"eagle"`` or ``"mtp"`` its :func:`draft_head`; a :class:`~tpu_notes.inference.engine.Deployment` as given (a
    draft served on its own devices). Refuses, naming ``draft``, a draft whose vocabulary is not the target's
    (speculative sampling compares the two models' probabilities token by token), one with at least the target's
    parameters (it cannot save time), and one whose heads do not split over the target's devices."""
    t = _target(target, "target")
    if isinstance(draft, Deployment):
        d = draft
    elif isinstance(draft, str) and draft.strip().lower() in HEAD_DRAFTS:
        return draft_head(t)
    elif isinstance(draft, (str, TransformerConfig)):
        try:
            model = as_config(draft, "draft")
        except ValueError as err:
            raise ValueError(f"{err}; or a draft head, one of {list(HEAD_DRAFTS)}") from None
        d = _same_system(t, model)
    else:
        raise TypeError(
            f"draft must be a model name (e.g. 'llama3.2-1b'), a TransformerConfig, one of {list(HEAD_DRAFTS)} or a "
            f"tpu_notes.inference.engine.Deployment; got {type(draft).__name__}"
        )
    if d.model.vocab != t.model.vocab:
        raise ValueError(
            f"draft {d.model.name or 'model'!r} has a vocabulary of {d.model.vocab:,} tokens and the target "
            f"{t.model.name or 'model'!r} {t.model.vocab:,}: speculative sampling needs the same vocabulary"
        )
    if d.model.param_count() >= t.model.param_count():
        raise ValueError(
            f"draft {d.model.name or 'model'!r} ({d.model.param_count():.3g} parameters) must be smaller than the "
            f"target {t.model.name or 'model'!r} ({t.model.param_count():.3g})"
        )
    return d


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
    draft: str = ""  # what drafted: a model's name, "<target>-head" (EAGLE/MTP), "" for a given draft_cost

    @property
    def mean_accepted_length(self) -> float:
        """Tokens per round, the bonus token included: the mean acceptance length engines report (tokens)."""
        return self.tokens_per_round

    @property
    def pays(self) -> bool:
        """Whether speculation is faster than plain decoding here (speedup above 1)."""
        return self.speedup > 1.0

    def __repr__(self) -> str:
        return (
            f"SpeculativeResult(speedup={self.speedup:.2f}x at batch {self.batch}, context {self.context:,}: "
            f"k={self.k}, acceptance {self.acceptance:g}, {self.tokens_per_round:.2f} tokens per round; verify "
            f"{self.verify_cost:.2f} steps, draft{' ' + self.draft if self.draft else ''} {self.draft_cost:.3g} of a "
            f"step; round {fmt(self.round_s, 's')} "
            f"vs step {fmt(self.decode_s, 's')})"
        )


def _resolve(target: Deployment, draft, draft_cost):
    """(the draft's Deployment or None, where it lives: ``"own"`` devices (a Deployment given), the target's as a
    ``"model"``, or the target's as a ``"head"``)."""
    if draft is not None and draft_cost is not None:
        raise ValueError("give draft (a draft model, a head or a Deployment) or draft_cost (in target steps), not both")
    if draft is None:
        return None, "own"
    if isinstance(draft, Deployment):
        return draft_deployment(target, draft), "own"
    head = isinstance(draft, str) and draft.strip().lower() in HEAD_DRAFTS
    return draft_deployment(target, draft), "head" if head else "model"


def _added_weight_bytes(d: Deployment, where: str) -> float:
    """Bytes of weights a draft adds beside the target: all of a draft model's; a head's one layer (it shares the
    target's embedding and LM head)."""
    if where != "head":
        return d.weight_bytes
    b = d.model.param_breakdown()
    return d.weight_bytes * (b.total - b.embedding - b.unembedding) / b.total


def _largest_batch(target: Deployment, d: Deployment | None, where: str, S: int, k: int) -> int:
    """The most sequences of ``S`` tokens a round fits: the target's caches with ``k + 1`` scored positions each,
    and the draft's weights and caches out of the same pool when it shares the target's devices (``where`` as
    :func:`_resolve` says), or in its own pool."""
    fit = target.max_batch(min(S + k + 1, 2**26))
    if d is None:
        return fit
    if where == "own":
        return min(fit, d.max_batch(min(S + 1, 2**26)))
    pool = target.kv_capacity_tokens * target.kv_bytes_per_token - _added_weight_bytes(d, where)
    per_seq = (S + k + 1) * target.kv_bytes_per_token + (S + k) * d.kv_bytes_per_token
    return max(0, min(fit, int(pool // per_seq)))


def _check_fit(target: Deployment, d: Deployment, where: str, B: int, S: int, k: int) -> None:
    """Refuse, naming ``batch``, a batch whose draft's weights and caches do not fit beside the target's."""
    most = _largest_batch(target, d, where, S, k)
    if B <= most:
        return
    if where == "own":
        raise ValueError(
            f"draft: batch={B} sequences of {S:,} tokens do not fit the draft's deployment "
            f"({d.n_chips} {d.chip.long_name} devices hold at most {d.max_batch(S + 1)})"
        )
    raise ValueError(
        f"batch={B} sequences of {S:,} tokens do not fit beside the target's and the draft's ({d.model.name}) "
        f"weights on {target.n_chips} {target.chip.long_name} devices: with the draft's weights and caches in the "
        f"target's pool the largest batch that fits is {most}"
    )


def _draft_cost(target: Deployment, d, where, draft_cost, batch: int, context: int, k: int, decode: EngineStep):
    """(draft cost in target steps, the draft's step or None)."""
    if d is None:
        return (0.0 if draft_cost is None else draft_cost), None
    _check_fit(target, d, where, batch, context, k)
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
    d, where = draft
    dc, dstep = _draft_cost(target, d, where, draft_cost, B, S, k, decode)
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
        draft=d.model.name if d is not None else "",
    )


def _target(deployment, name: str = "deployment") -> Deployment:
    return _check_deployment(deployment, name)


@checked
def speculative_decoding(
    deployment: Deployment,
    batch: Batch,
    context: Context,
    k: Drafts,
    acceptance: Probability,
    *,
    draft: Deployment | str | TransformerConfig | None = None,
    draft_cost: NonNegativeFloat | None = None,
) -> SpeculativeResult:
    """Speculative decoding of ``batch`` sequences at ``context`` tokens on ``deployment`` (the target), ``k``
    drafts per round each kept with probability ``acceptance``, with the verify step priced by the engine (see the
    module docstring). The draft (:func:`draft_deployment`): a model name or config (``"llama3.2-1b"``) deployed on
    the target's devices, ``"eagle"``/``"mtp"`` for a draft head, or a Deployment of its own; its cost is its engine
    step at ``batch`` and the round's starting context over the target's plain step, once per proposed token. Or
    ``draft_cost`` in target steps (an assumption, not a price), or 0 when neither is given (a draft that costs
    nothing: prompt lookup, n-grams). Refuses, naming ``batch``, a batch whose caches with the ``k + 1`` scored
    positions do not fit (with a draft on the target's devices, its weights and caches taken from the target's pool
    too), and a ``batch`` and ``k`` whose verify step has more rows than one engine step holds."""
    _rows(batch, k)
    t = _target(deployment)
    return _result(t, batch, context, k, acceptance, _resolve(t, draft, draft_cost), draft_cost)


@checked
def speculative_vs_batch(
    deployment: Deployment,
    context: Context,
    k: Drafts,
    acceptance: Probability,
    batches: Annotated[Sequence[int], Shape()] = DEFAULT_BATCHES,
    *,
    draft: Deployment | str | TransformerConfig | None = None,
    draft_cost: NonNegativeFloat | None = None,
) -> tuple[SpeculativeResult, ...]:
    """:func:`speculative_decoding` at each of ``batches`` (at most :data:`MAX_BATCHES`) whose caches fit (the
    draft's beside them, as :func:`speculative_decoding` counts them), in the order given: the speedup falls as the
    batch grows and the verify step turns compute-bound. Refuses, naming ``batches``, a list of which not one fits."""
    d = _target(deployment)
    rules.bounded_work(len(batches), argument="batches", limit=MAX_BATCHES, unit="batches")
    for i, b in enumerate(batches):
        if b > MAX_BATCH:
            raise ValueError(f"batches[{i}] must be at most {MAX_BATCH:,}; got {b}")
    dr = _resolve(d, draft, draft_cost)
    fit = _largest_batch(d, dr[0], dr[1], context, k)
    for i, b in enumerate(batches):
        if b <= fit:
            _rows(b, k, batch_arg=f"batches[{i}]")
    out = tuple(_result(d, b, context, k, acceptance, dr, draft_cost) for b in batches if b <= fit)
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
    draft: Deployment | str | TransformerConfig | None = None,
    draft_cost: NonNegativeFloat | None = None,
) -> SpeculativeResult:
    """The :func:`speculative_decoding` with the largest speedup over ``k = 1 .. k_max`` at ``batch``: the verify
    cost is priced for each ``k``, so a large batch wants fewer drafts than :func:`best_k` at ``verify_cost = 1``
    says (its speedup may stay below 1: then no speculation is the better choice)."""
    d = _target(deployment)
    _rows(batch, k_max, k_arg="k_max")
    dr = _resolve(d, draft, draft_cost)
    results = [_result(d, batch, context, k, acceptance, dr, draft_cost) for k in range(1, k_max + 1)]
    return max(results, key=lambda r: r.speedup)


_Decode = Annotated[int, Positive(integer=True, maximum=MAX_BATCH)]
_KvTokens = Annotated[int, Positive(integer=True, maximum=MAX_STEP_TOKENS)]


def _round_seconds(target: Deployment, draft: Deployment | None, decode: int, kv_tokens: int, k: int,
                   draft_cost: float = 0.0) -> float:  # fmt: skip
    """:func:`round_seconds`, unchecked: the simulator's clock (a few float operations on the engines' fast
    paths; a test keeps it equal to the checked one)."""
    verify = target._seconds(decode, kv_tokens, decode * k, decode * k * (k + 1) / 2.0)
    if draft is not None:
        return k * draft._seconds(decode, kv_tokens) + verify
    return k * draft_cost * target._seconds(decode, kv_tokens) + verify if draft_cost else verify


@checked
def round_seconds(
    target: Deployment,
    draft: Deployment | str | TransformerConfig | None,
    decode: _Decode,
    kv_tokens: _KvTokens,
    k: Drafts,
    *,
    draft_cost: NonNegativeFloat | None = None,
) -> float:
    """Seconds of one speculative round for ``decode`` sequences holding ``kv_tokens`` tokens of context between
    them: ``k`` steps of ``draft`` (as :func:`draft_deployment` reads it; pass a Deployment in a loop, a name is
    deployed on each call) at ``decode`` rows, then the target's verify step scoring ``k + 1`` positions per
    sequence (module docstring); with ``draft=None``, ``k · draft_cost`` plain target steps (0 when not given) in
    place of the draft's. Each sequence emits :func:`expected_tokens_per_round` tokens per round on average, so a
    simulator advances every running sequence by that many (or by a sample: :func:`expected_tokens_per_round`'s
    distribution is a truncated geometric) per round. The caches' fit is the caller's: a simulator's pool tracks
    it. Refuses, naming ``kv_tokens``, fewer tokens than sequences, and, naming ``decode`` and ``k``, a verify step
    of more rows than one engine step holds."""
    t = _target(target, "target")
    if kv_tokens < decode:
        raise ValueError(f"kv_tokens ({kv_tokens}) must be at least decode ({decode}): each sequence has a token")
    _rows(decode, k, batch_arg="decode")
    d, _ = _resolve(t, draft, draft_cost)
    seconds = _round_seconds(t, d, decode, kv_tokens, k, draft_cost or 0.0)
    rules.finite_result(seconds, argument="draft_cost", what="one round's seconds")
    return seconds


__all__ = [
    "DEFAULT_BATCHES",
    "HEAD_DRAFTS",
    "MAX_BATCHES",
    "MAX_DRAFTS",
    "SpeculativeResult",
    "acceptance_from_draft_rate",
    "acceptance_from_mean_length",
    "best_k",
    "best_k_at_batch",
    "draft_deployment",
    "draft_head",
    "expected_tokens_per_round",
    "round_seconds",
    "speculative_decoding",
    "speculative_speedup",
    "speculative_vs_batch",
]
