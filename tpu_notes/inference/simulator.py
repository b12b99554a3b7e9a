"""A discrete-event simulator of a serving engine, one engine step at a time (Chapter 7).

:func:`simulate` serves a :class:`~tpu_notes.inference.workload.Workload` on one replica, an
:class:`~tpu_notes.inference.engine.Deployment`. Its only clock is the engine step model: every step, whatever it
holds, takes ``deployment._seconds(decode, kv_tokens, prefill_tokens, prefill_pairs, prefill_kv)``, the formula of
:meth:`Deployment.step <tpu_notes.inference.engine.Deployment.step>` (a test holds the two equal). The
:class:`Scheduler` says what goes into each step:

- ``policy="chunked"`` (vLLM V1, Sarathi-Serve): every running sequence decodes one token, and the rest of the
  ``token_budget`` goes to prompt chunks in arrival order: the partly prefilled prompts first, then new requests
  while there are sequence slots and KV blocks. A prompt may take several steps; decoding never pauses.
- ``policy="prefill_first"`` (vLLM V0's default): whenever waiting prompts can be admitted, a step prefills as many
  whole prompts as the token budget holds (at least one: a longer prompt runs alone) and decoding pauses for it;
  otherwise a step decodes every running sequence.

KV memory, ``kv="paged"``: a pool of ``deployment.kv_blocks(block_size)`` blocks. A request is admitted when the
pool has blocks for its whole prompt, keeping a watermark of 1% of the blocks free (vLLM V0's block manager keeps
the same); a decoding sequence takes a new block each time its context crosses a block boundary. When the pool has
no block for a sequence's next token, the most recently admitted running sequence is **preempted**: its blocks are
freed and it goes back to the head of the queue, to prefill its prompt and the tokens it has generated again
(vLLM's default *recompute* mode; swapping KV to host memory is not modelled). ``kv="static"``: each admitted
request reserves a slot of the workload's longest prompt + answer (or ``slot_tokens``), as servers did before
paging, and attention reads each running sequence's whole slot every step (a padded buffer: what paged attention
avoids, Chapter 7); no preemption.
``prefix_caching=True`` (paged only): once one request carrying the workload's shared prefix has been prefilled,
the prefix's whole blocks stay resident for good (never evicted: a simplification) and every later request carrying
it shares them and skips computing those tokens.

**Disaggregation** (:class:`Disaggregation`): ``instances`` prefill instances (each a ``Deployment``) take prompts
from one arrival-ordered queue, whole prompts batched up to the token budget, and keep each prompt's KV in their own
pool (``kv_capacity_tokens``) until it is sent. A finished prefill first reserves the blocks (and a sequence slot)
it needs on the decode replica, in order of completion (**backpressure**: while the decode pool is full, finished
KV waits in the prefill pool, and an instance whose pool cannot hold the next prompt stops taking prompts: a
*stall*, counted and timed). It then crosses the link, ``prompt tokens × kv_bytes_per_token`` bytes at
``B = b × min(n_prefill, n_decode) × efficiency.link(link)`` plus ``efficiency.latency(link)`` seconds, ``b`` the
chip's per-device bandwidth of that link (one ICI link one way, a TPU's DCN share, a GPU's NVLink or its NIC) and
``min(...)`` the devices sending shards in parallel; one instance's transfers go one after another. The decode
replica only decodes. A preempted sequence goes back to the prefill queue. With prefix caching, each prefill
instance keeps its own copy of the prefix (in its pool); the whole prompt's KV is sent.

Definitions. **TTFT**: arrival to the end of the step that completes the prompt (the first token streams to the
user from there, also from a prefill instance). **TPOT**: ``(last token - first token) / (tokens - 1)``, so under
disaggregation the KV transfer and the wait for decode blocks fall in the first TPOT interval; a one-token answer
has none (excluded from the TPOT percentiles, counted as meeting a TPOT objective, as vLLM's benchmark does:
vllm-project/vllm benchmarks/benchmark_serving.py, ``calculate_metrics``, commit 0049e29c41fd).
**Chip-seconds**: each step's seconds times its replica's chips, split between prefill and decode work; a mixed
step is split in proportion to what its decode part and its prefill part would each cost as a step alone.

**Speculative decoding** (``simulate(..., speculative=Speculation(draft, k, acceptance))``): every decode step of
a replica is a round. Its seconds are :func:`~tpu_notes.inference.speculative.round_seconds` for the step's
decoding rows (``k`` draft steps and the target's verify step scoring ``k + 1`` positions per sequence; a test
holds the two equal). A prompt chunk in the same step (chunked scheduling) joins the verify step as its rows join a
plain step (``target._seconds(n, kv, chunk + n·k, pairs + n·k(k+1)/2, cached)``) and the draft reads it in its first
step (``draft._seconds(n, kv, chunk, ...)``); a step with no sequence decoding is the target's prefill plus the
draft's. Each sequence advances **deterministically** by the expected tokens per round ``τ =``
:func:`~tpu_notes.inference.speculative.expected_tokens_per_round`, accumulated: after ``m`` rounds in the batch it
has emitted ``floor(m·τ)`` tokens (at least one a round, since ``τ ≥ 1``), so completions stay bucketed by round and
the run stays reproducible with no draw (a per-round geometric draw would spread the TBT tail more; the mean and
TPOT are the same). Tokens of one round reach the user together, as vLLM streams them: the first at the round's end,
the others with gaps of 0 s, counted in the TBT percentiles (a request's largest stall is a whole round). A draft on
the target's devices (a model or a head) takes its weights (a head's one layer: it shares the target's embedding
and LM head) out of the target's KV pool, and each token's cache costs the target's plus the draft's bytes: the
pool holds ``(pool bytes − draft weights) / (target + draft bytes per token)`` tokens; a draft
:class:`~tpu_notes.inference.engine.Deployment` of its own keeps the tighter of the two pools. Blocks are taken for
the tokens a round keeps (the ``k + 1`` scored positions' transient slots are not reserved). The vectorised
fast-forward is off under speculation (one round at a time, one pass over the batch per round). Chip-seconds split
a mixed step by the target's step costs alone. Under disaggregation the prefill instances price the target's
prefill only (the draft's prompt pass there is left out).

Work is O(1) per step amortised: the KV context sum is kept incrementally, sequences needing a new block in a step
are counted by the phase of their context modulo the block size (all decoding sequences advance together), and
completions are bucketed by the decode step at which they happen. Same arguments, same result.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Annotated

import numpy as np

from .. import rules
from ..hardware import get_chip
from ..transformer import TransformerConfig
from ..units import Bool, OneOf, Positive, Probability, Range, check_fields, checked, fmt
from .engine import MAX_ROWS, Deployment
from .slo import SLO
from .speculative import HEAD_DRAFTS, Drafts, draft_deployment, expected_tokens_per_round
from .workload import MAX_REQUESTS, Workload, _check_rate

#: Most engine steps one simulation runs (decode replica and prefill instances together).
MAX_STEPS = 2_000_000
#: Most blocks a paged KV pool may have (raise ``Scheduler.block_size`` past it).
MAX_BLOCKS = 2**26
#: Most simulations one :func:`sweep` runs.
MAX_SWEEP_RUNS = 64
#: Links a KV transfer may cross, with the chip kind each belongs to.
LINKS = {"ici": "tpu", "dcn": "tpu", "nvlink": "gpu", "ib": "gpu"}
#: The chip bandwidth kind (``Chip.bandwidth``) of each link, bytes/s per device.
_LINK_BANDWIDTH = {"ici": "ici_oneway", "dcn": "dcn", "nvlink": "nvlink", "ib": "nic"}
#: Share of the paged pool kept free when admitting a request: vLLM V0's ``BlockSpaceManager(watermark=0.01)``
#: (vllm-project/vllm vllm/core/block_manager.py), which keeps admissions from preempting at once.
WATERMARK = 0.01

#: How a request is sent to one of a deployment's replicas. ``"round-robin"``: in turn. ``"least-loaded"``: to the
#: replica with the fewest *outstanding tokens*, the prompt + answer tokens of the requests routed to it and not yet
#: completed (tokens, not requests, so that one long prompt counts for what it costs; ties go to the lowest index).
#: ``"prefix-aware"``: a request carrying the workload's shared prefix goes to the least loaded of the replicas
#: already sent that prefix (whose prefix cache holds it), unless that one carries more than
#: :data:`PREFIX_BALANCE` times the least loaded replica's tokens plus the request's own, when the least loaded
#: replica takes it and joins the holders (SGLang's cache-aware router balances the same way, by a load ratio);
#: every other request goes least-loaded. A workload with no shared prefix is routed least-loaded.
ROUTERS = ("round-robin", "least-loaded", "prefix-aware")
#: How much more a prefix holder may carry than the least loaded replica before the prefix spreads to another.
PREFIX_BALANCE = 2.0
#: Fewest plain decode steps (nothing arriving, prefilling or completing) run at once by vectorised arithmetic
#: rather than one by one: below it the per-step loop is as fast.
FAST_FORWARD_MIN = 8
#: Most replicas one simulation serves.
MAX_REPLICAS = 256
#: Share of the requests (the first to arrive) left out of the percentiles, and of the last to arrive. A choice:
#: the first requests meet an empty server and the last a draining one, both kinder than the steady state a
#: provisioned service runs in; a tenth at each end leaves 80% of a run, and a test holds that it removes the
#: empty-server start (a queue that needs more than a tenth of the run to fill means the run is too short).
DEFAULT_WARMUP = 0.1
DEFAULT_DRAIN = 0.1

_Route = Annotated[str, OneOf(ROUTERS)]
_Share = Annotated[float, Range(0.0, 0.9)]
_Budget = Annotated[int, Positive(integer=True, maximum=2**20)]
_Seqs = Annotated[int, Positive(integer=True, maximum=2**16)]
_Instances = Annotated[int, Positive(integer=True, maximum=1024)]
_Link = Annotated[str, OneOf(tuple(LINKS))]


def _check_deployment(name: str, value) -> Deployment:
    if not isinstance(value, Deployment):
        raise TypeError(
            f"{name} must be an engine.Deployment (tpu_notes.inference.engine.deploy(model, chip, n_chips, ...)); "
            f"got {type(value).__name__}"
        )
    return value


@dataclass(frozen=True)
class Scheduler:
    """How one replica fills its steps (see the module docstring).

    The defaults are vLLM's: ``max_num_batched_tokens=2048`` and ``max_num_seqs=256`` for its OpenAI server on GPUs
    under 70 GiB (vllm-project/vllm vllm/engine/arg_utils.py, ``EngineArgs.get_batch_defaults``, file as stored at
    commit 99d7eb5d6a512cfcc5a2b104f24ebf2d6cda772b; larger GPUs get 8192 and 1024), and 16-token blocks (what its
    platforms set when ``block_size`` is left unset, vllm/platforms/rocm.py ``check_and_update_config``). Why a
    budget of 2048 rows: enough for a step's matmuls to run near their sustained rate, while it caps what one prompt
    chunk adds to the decode steps it joins (about 0.15 s for Llama 3 70B in int8 on a v5e 4x4, against 0.57 s for
    a whole 8k-token prompt)."""

    policy: Annotated[str, OneOf(("chunked", "prefill_first"))] = "chunked"  # what a step holds
    token_budget: _Budget = 2048  # most rows (decoded tokens + prompt tokens) per step
    max_seqs: _Seqs = 256  # most sequences running at once
    kv: Annotated[str, OneOf(("paged", "static"))] = "paged"  # paged blocks, or one max-length slot per sequence
    block_size: Annotated[int, Positive(integer=True, maximum=2**16)] = 16  # tokens per KV block (paged)
    preemption: Annotated[str, OneOf(("recompute",))] = "recompute"  # what happens to a preempted sequence
    prefix_caching: Bool = False  # share the workload's prefix blocks and skip computing them
    slot_tokens: Annotated[int, Positive(integer=True, maximum=2**26)] | None = None  # kv="static": tokens per slot
    # (None: the workload's longest prompt + answer, as a server configured for exactly that stream would reserve)

    def __post_init__(self):
        check_fields(self)
        if self.max_seqs > self.token_budget:
            raise ValueError(
                f"max_seqs ({self.max_seqs}) must not exceed token_budget ({self.token_budget}): every running "
                "sequence's decode token is a row of the step"
            )
        if self.prefix_caching and self.kv != "paged":
            raise ValueError("prefix_caching needs kv='paged' (shared blocks); static slots cannot share a prefix")
        if self.slot_tokens is not None and self.kv != "static":
            raise ValueError("slot_tokens applies only to kv='static'; leave it None with paged blocks")

    def label(self) -> str:
        """A short name, e.g. ``"chunked, paged"``."""
        pc = ", prefix cache" if self.prefix_caching else ""
        return f"{self.policy.replace('_', '-')}, {self.kv}{pc}"


@dataclass(frozen=True)
class Disaggregation:
    """Prefill on separate instances (see the module docstring): ``instances`` copies of ``prefill`` sending each
    prompt's KV to the decode replica over ``link``."""

    prefill: Deployment  # one prefill instance (same model and KV dtype as the decode replica)
    instances: _Instances = 1  # prefill instances
    link: _Link | None = None  # "ici", "dcn" (TPU), "nvlink", "ib" (GPU); None: "ici" on TPUs, "nvlink" on GPUs

    def __post_init__(self):
        _check_deployment("prefill", self.prefill)
        check_fields(self)
        kind = self.prefill.chip.kind
        if self.link is None:
            object.__setattr__(self, "link", "nvlink" if kind == "gpu" else "ici")
        if LINKS[self.link] != kind:
            ok = [k for k, v in LINKS.items() if v == kind]
            raise ValueError(f"link {self.link!r} does not join {kind.upper()} devices; use one of {ok}")
        if self.prefill.kv_capacity_tokens < 1:
            raise ValueError("prefill has no KV pool (its weights fill its HBM): give it more chips")

    def bandwidth(self, decode: Deployment) -> float:
        """Bytes/s one KV transfer to ``decode`` achieves: per-device link bandwidth × the devices sending in
        parallel (``min`` of the two replicas' devices) × the efficiency model's achieved fraction of the link."""
        _check_deployment("decode", decode)
        per_device = get_chip(self.prefill.chip).bandwidth(_LINK_BANDWIDTH[self.link])
        parallel = min(self.prefill.n_chips, decode.n_chips)
        return per_device * parallel * self.prefill.efficiency.link(self.link)

    def transfer_seconds(self, decode: Deployment, tokens: int) -> float:
        """Seconds to send ``tokens`` tokens of KV cache to ``decode``: bytes / :meth:`bandwidth` + one call's
        latency (``efficiency.latency(link)``)."""
        tokens = Positive(integer=True, allow_zero=True, maximum=2**30).check("tokens", tokens)
        lat = self.prefill.efficiency.latency(self.link)
        return tokens * self.prefill.kv_bytes_per_token / self.bandwidth(decode) + lat

    def label(self) -> str:
        return f"disaggregated: {self.instances} x {self.prefill.n_chips}-chip prefill over {self.link}"


@dataclass(frozen=True)
class Speculation:
    """Speculative decoding on every replica (see the module docstring, "Speculative decoding"): each decode step
    is a round of ``k`` drafts, each kept with probability ``acceptance``, proposed by ``draft``: a model name or
    :class:`~tpu_notes.transformer.TransformerConfig` deployed on the target's devices (``"llama3.2-1b"``),
    ``"eagle"``/``"mtp"`` for a draft head, a :class:`~tpu_notes.inference.engine.Deployment` of its own, or None for
    a draft that costs nothing (prompt lookup, n-grams); as
    :func:`~tpu_notes.inference.speculative.draft_deployment` reads it."""

    draft: Deployment | str | TransformerConfig | None  # what proposes the drafts (None: free)
    k: Drafts  # drafts per round
    acceptance: Probability  # probability each draft token is kept (independently)

    def __post_init__(self):
        if self.draft is not None and not isinstance(self.draft, (Deployment, str, TransformerConfig)):
            raise TypeError(
                f"draft must be a model name (e.g. 'llama3.2-1b'), a TransformerConfig, one of {list(HEAD_DRAFTS)}, "
                f"an engine.Deployment or None (a free draft); got {type(self.draft).__name__}"
            )
        check_fields(self)

    @property
    def tokens_per_round(self) -> float:
        """Expected tokens one round yields per sequence (the bonus token included)."""
        return expected_tokens_per_round(self.acceptance, self.k)

    def label(self) -> str:
        name = "free draft" if self.draft is None else (
            self.draft if isinstance(self.draft, str) else (self.draft.name or "draft")
            if isinstance(self.draft, TransformerConfig) else (self.draft.model.name or "draft")
        )  # fmt: skip
        return f"speculative: {name}, k={self.k}, acceptance {self.acceptance:g}"


class _Spec:
    """A :class:`Speculation` bound to a target replica: the round's clock, the tokens a sequence has after ``m``
    rounds (``floor(m · τ)``, the expected ``τ`` accumulated) and the KV pool left beside the draft."""

    def __init__(self, target: Deployment, s: Speculation):
        self.t, self.k = target, s.k
        self.tau = s.tokens_per_round
        self.d = None if s.draft is None else draft_deployment(target, s.draft)
        cap, kvb = target.kv_capacity_tokens, target.kv_bytes_per_token
        if self.d is None:
            self.cap = cap
        elif isinstance(s.draft, Deployment):  # its own devices, its own pool: the tighter of the two bounds
            self.cap = min(cap, s.draft.kv_capacity_tokens)
        else:  # on the target's devices: its weights and its cache come out of the target's pool
            added = self.d.weight_bytes
            if isinstance(s.draft, str) and s.draft.strip().lower() in HEAD_DRAFTS:
                b = self.d.model.param_breakdown()  # a head shares the target's embedding and LM head
                added *= (b.total - b.embedding - b.unembedding) / b.total
            self.cap = max(0, int((cap * kvb - added) // (kvb + self.d.kv_bytes_per_token)))
        if self.cap < 1:
            raise ValueError(
                f"its weights leave no KV pool on the deployment's {target.n_chips} devices; "
                "give it more chips or a smaller draft"
            )

    def tok(self, m: int) -> int:
        """Tokens a sequence has emitted after ``m`` rounds: ``floor(m · τ)``."""
        return int(m * self.tau + 1e-9)

    def rounds(self, x: int) -> int:
        """Fewest rounds that emit ``x`` tokens."""
        m = max(1, math.ceil(x / self.tau))
        while self.tok(m) < x:
            m += 1
        while m > 1 and self.tok(m - 1) >= x:
            m -= 1
        return m

    def seconds(self, n: int, kv, ptok: int = 0, pairs: float = 0.0, pkv: int = 0) -> float:
        """A step of ``n`` decoding sequences (``kv`` tokens of context) and ``ptok`` prompt tokens: ``k`` draft
        steps (the first also runs the draft over the prompt chunk) and the target's step scoring ``k + 1``
        positions per sequence with the chunk; with no sequence decoding, the two prefills."""
        t, d, k = self.t, self.d, self.k
        if not n:
            return t._seconds(0, 0, ptok, pairs, pkv) + (d._seconds(0, 0, ptok, pairs, pkv) if d is not None else 0.0)
        verify = t._seconds(n, kv, ptok + n * k, pairs + n * k * (k + 1) / 2.0, pkv)
        if d is None:
            return verify
        if ptok:
            return verify + d._seconds(n, kv, ptok, pairs, pkv) + (k - 1) * d._seconds(n, kv)
        return verify + k * d._seconds(n, kv)


def _pct(values) -> tuple[float, float, float]:
    if len(values) == 0:
        return (0.0, 0.0, 0.0)
    return tuple(float(v) for v in np.percentile(values, (50, 90, 99)))


@dataclass(frozen=True)
class SimResult:
    """What :func:`simulate` measured. Seconds, tokens, chips; percentiles are (p50, p90, p99)."""

    engine: str  # the scheduler (and disaggregation) that ran
    ttft: tuple  # time to first token, s: (p50, p90, p99)
    tpot: tuple  # time per output token after the first, s: (p50, p90, p99), answers of 2+ tokens
    output_tokens_per_s: float  # tokens generated per second over the run
    input_tokens_per_s: float  # prompt tokens served per second over the run
    tokens_per_s_per_chip: float  # output_tokens_per_s / n_chips
    kv_utilisation: float  # time-weighted share of the decode replica's KV pool allocated (blocks or slots)
    peak_seqs: int  # most sequences running at once on the decode (or only) replica
    peak_in_system: int  # most requests arrived and not yet completed at once
    mean_batch: float  # sequences per decoding step, on average
    preemptions: int  # sequences preempted (recompute)
    steps: int  # engine steps of the decode (or only) replica
    prefill_steps: int  # engine steps of the prefill instances (0 without disaggregation)
    duration: float  # first arrival to last token, s
    completed: int  # requests served
    n_chips: int  # chips in all, prefill instances included
    chip_seconds_prefill: float  # chip-seconds of prefill work
    chip_seconds_decode: float  # chip-seconds of decode work
    prefill_stalls: int  # times a prefill instance stopped taking prompts because its pool was full
    prefill_stall_s: float  # seconds prefill instances spent stalled, all instances together
    transfer_s: float  # mean KV transfer time per request, s (0 without disaggregation)
    transfer_wait_s: float  # mean wait of a finished prefill for decode blocks, s (backpressure)
    tbt: tuple = (0.0, 0.0, 0.0)  # time between tokens, s: (p50, p90, p99) over every gap of every request
    tbt_max: tuple = (0.0, 0.0, 0.0)  # each request's largest gap between tokens, s: (p50, p90, p99), 2+ tokens
    replicas: int = 1  # decode (or colocated) replicas served
    router: str = "least-loaded"  # how requests were sent to them (ROUTERS)
    ttft_at: str = "decode"  # where TTFT was counted under disaggregation ("decode" or "prefill")
    warmup: float = DEFAULT_WARMUP  # share of the first arrivals left out of the percentiles
    drain: float = DEFAULT_DRAIN  # share of the last arrivals left out of the percentiles
    ttft_all: tuple = field(repr=False, default=())  # every request's TTFT, s, in request order
    tpot_all: tuple = field(repr=False, default=())  # every request's TPOT, s (0 for a one-token answer)
    tokens_all: tuple = field(repr=False, default=())  # tokens each request generated (its answer length)
    tbt_max_all: tuple = field(repr=False, default=())  # every request's largest gap between tokens, s (0: none)
    arrivals_all: tuple = field(repr=False, default=())  # every request's arrival time, s
    replica_all: tuple = field(repr=False, default=())  # the replica each request was routed to

    def window(self) -> np.ndarray:
        """The requests the percentiles count: a boolean array, True for those that arrived after the first
        ``warmup`` share and before the last ``drain`` share (all of them when that leaves none)."""
        return _window(np.asarray(self.arrivals_all, dtype=float), self.warmup, self.drain)

    def meets(self, slo) -> np.ndarray:
        """A boolean array: True for each request that meets every bound of ``slo`` (a
        :class:`~tpu_notes.inference.goodput.SLO`): TTFT, TPOT (a one-token answer has none and meets it, as
        vLLM's benchmark counts it) and, when ``slo.tbt_s`` is set, its largest gap between tokens."""
        if not isinstance(slo, SLO):
            raise TypeError(f"slo must be a tpu_notes.inference.goodput.SLO; got {type(slo).__name__}")
        ok = (np.asarray(self.ttft_all) <= slo.ttft_s) & (np.asarray(self.tpot_all) <= slo.tpot_s)
        if slo.tbt_s is not None:
            ok &= np.asarray(self.tbt_max_all) <= slo.tbt_s
        return ok

    def attainment(self, slo) -> float:
        """Share of the window's requests (:meth:`window`) that meet every bound of ``slo``: DistServe's SLO
        attainment (Zhong et al., OSDI 2024, arXiv:2401.09670, section 2)."""
        ok = self.meets(slo)
        win = self.window()
        return float(ok[win].mean()) if win.any() else 0.0

    def slo_requests_per_s(self, slo) -> float:
        """Requests per second, over the whole run, that meet every bound of ``slo``: vLLM's benchmark's
        "goodput" (``--goodput``; vllm-project/vllm benchmarks/benchmark_serving.py, ``calculate_metrics``), a
        figure *at this load*, not the highest load that meets the SLO (that is
        :func:`~tpu_notes.inference.goodput.max_rate_at_attainment`)."""
        ok = self.meets(slo)
        return float(ok.sum()) / self.duration if self.duration else 0.0

    def goodput(self, ttft_slo_s: float, tpot_slo_s: float) -> float:
        """Deprecated name of :meth:`slo_requests_per_s`: ``slo_requests_per_s(SLO(ttft_slo_s, tpot_slo_s))``,
        requests/s meeting both bounds at this load (not DistServe's goodput; see
        :func:`~tpu_notes.inference.goodput.max_rate_at_attainment`)."""
        ttft_slo_s = Positive().check("ttft_slo_s", ttft_slo_s)
        tpot_slo_s = Positive().check("tpot_slo_s", tpot_slo_s)
        if not self.duration:
            return 0.0
        ok = (np.asarray(self.ttft_all) <= ttft_slo_s) & (np.asarray(self.tpot_all) <= tpot_slo_s)
        return float(ok.sum()) / self.duration

    @property
    def chip_seconds(self) -> float:
        """Chip-seconds of work in all (prefill + decode)."""
        return self.chip_seconds_prefill + self.chip_seconds_decode

    def row(self) -> dict:
        """The headline numbers as a flat dict (for tables)."""
        return {
            "engine": self.engine,
            "ttft_p50_s": self.ttft[0],
            "ttft_p90_s": self.ttft[1],
            "ttft_p99_s": self.ttft[2],
            "tpot_p50_s": self.tpot[0],
            "tpot_p90_s": self.tpot[1],
            "tpot_p99_s": self.tpot[2],
            "tbt_p50_s": self.tbt[0],
            "tbt_p99_s": self.tbt[2],
            "tbt_max_p99_s": self.tbt_max[2],
            "output_tokens_per_s": self.output_tokens_per_s,
            "input_tokens_per_s": self.input_tokens_per_s,
            "tokens_per_s_per_chip": self.tokens_per_s_per_chip,
            "kv_utilisation": self.kv_utilisation,
            "peak_seqs": self.peak_seqs,
            "mean_batch": self.mean_batch,
            "preemptions": self.preemptions,
            "n_chips": self.n_chips,
        }

    def __repr__(self) -> str:
        t = " / ".join(fmt(v, "s") for v in self.ttft)
        p = " / ".join(fmt(v, "s") for v in self.tpot)
        b = " / ".join(fmt(v, "s") for v in self.tbt)
        extra = f"; {self.preemptions} preemptions" if self.preemptions else ""
        if self.prefill_steps:
            extra += f"; KV transfer {fmt(self.transfer_s, 's')}, {self.prefill_stalls} prefill stalls"
        return (
            f"SimResult({self.engine}: TTFT p50/p90/p99 {t}; TPOT {p}; TBT {b}, largest stall p99 "
            f"{fmt(self.tbt_max[2], 's')}; {fmt(self.output_tokens_per_s, 'tokens/s')}"
            f" ({fmt(self.tokens_per_s_per_chip, 'tokens/s')} per chip on {self.n_chips}); mean batch "
            f"{self.mean_batch:.1f}, peak {self.peak_seqs} sequences, KV {self.kv_utilisation:.0%} used{extra}; "
            f"{self.completed:,} requests in {fmt(self.duration, 's')})"
        )


# ---------------------------------------------------------------------------------------------- the engine
class _Run:
    """The state of one replica's engine: its KV pool, its decode batch and its counters. The per-request lists
    (and the router's books) are shared by every replica of one simulation: the first ``_Run`` draws them, the
    others (``base``) hold the same lists."""

    def __init__(self, dep: Deployment, sch: Scheduler, wl: Workload, base: _Run | None = None, rep: int = 0,
                 spec: _Spec | None = None):  # fmt: skip
        self.dep, self.sch, self.wl, self.rep, self.spec = dep, sch, wl, rep, spec
        if base is None:
            req = wl.draw()
            n = wl.n_requests
            self.N = n
            self.P = [int(v) for v in req.prompts]
            self.G = [int(v) for v in req.outputs]
            rules.bounded_work(
                sum(self.G) + sum(self.P) / sch.token_budget,
                argument="workload.n_requests",
                unit="output tokens + prompt chunks",
            )  # every output token is a row of some step and every prompt is cut into chunks of at most the token
            # budget: the least work the run can take, refused before it starts  # fmt: skip
            self.shared = [bool(v) for v in req.shared_prefix]
            self.closed = wl.arrival == "closed"
            self.arr = [math.inf if math.isnan(v) else float(v) for v in req.arrivals]
            self.first = [math.nan] * n
            self.last = [math.nan] * n
            self.gen = [0] * n  # tokens generated when the sequence (re)joined the decode batch
            self.L = list(self.P)  # tokens its next (or last) prefill computes KV for: prompt + regenerated tokens
            self.done = [0] * n  # tokens of the current prefill computed
            self.d0 = [0] * n  # decode-step counter of its replica when it joined the batch
            self.shb = [0] * n  # shared prefix blocks it uses (prefix cache)
            self.epoch = [0] * n  # bumped at each preemption (stale completion entries are skipped)
            self.state = [0] * n  # 0 not arrived/waiting, 1 prefilling, 2 decoding, 3 reserved/transferring, 4 done
            self.seg_t0 = [math.nan] * n  # when the current decode segment's first token was delivered
            # [requests completed (all replicas), requests released (closed loop)]
            self.g = [0, min(wl.concurrency, n) if self.closed else n]
            self.segs: list = []  # (replica, first decode step, last decode step, t0, request): every decode stretch
            self.route = [0] * n  # the replica each request was routed to
            self.load = []  # outstanding prompt + answer tokens routed to each replica (the router's books)
            self.zeros = [0] * n  # speculative: tokens that arrived with an earlier one of their round (0 s gaps)
        else:
            for name in ("N", "P", "G", "shared", "closed", "arr", "first", "last", "gen", "L", "done", "d0",
                         "shb", "epoch", "state", "seg_t0", "g", "segs", "route", "load", "zeros"):  # fmt: skip
                setattr(self, name, getattr(base, name))
        self.load.append(0)
        self.completed = 0  # requests this replica completed
        self.bs = sch.block_size
        self.paged = sch.kv == "paged"
        self.pool, self.watermark = self._pool(dep, sch)  # units: blocks (paged) or whole-request slots
        self.free = self.pool
        # the decode batch (O(1) per step)
        self.d = 0  # decode steps run
        self.T = [math.nan]  # T[d]: when decode step d ended, s
        self.n_dec = 0  # sequences decoding
        self.ctx = 0  # sum of their contexts before the next step (tokens in their caches)
        self.cnt = [0] * self.bs  # decoding sequences by (context - d) mod block_size
        self.finish: dict = {}  # decode-step counter -> [(request, epoch)] completing at that step
        self.fkeys: list = []  # the keys of `finish`, a min-heap (stale keys dropped lazily)
        self.dec_set: dict = {}  # speculative: the decoding requests (insertion-ordered)
        self.spec_inc = 0  # speculative: tokens the running round adds to the batch's contexts
        self.order: list = []  # (request, epoch) in admission order: the last valid one is the preemption victim
        # the shared prefix (paged prefix cache)
        self.prefix_blocks = wl.prefix_len // self.bs if (sch.prefix_caching and self.paged) else 0
        self.prefix_ready = False
        # counters
        self.preemptions = 0
        self.steps = 0
        self.batch_sum = 0
        self.decode_steps = 0
        self.peak = 0
        self.cs_prefill = 0.0
        self.cs_decode = 0.0
        self.used_time = 0.0  # integral of allocated units over time
        self.t_mark = math.nan  # time up to which used_time is counted

    def _pool(self, dep: Deployment, sch: Scheduler) -> tuple[int, int]:
        """``(units, watermark)`` of the KV pool: blocks of ``block_size`` tokens (paged) or whole-request slots
        (static, ``self.slot`` tokens each, set here); refuses a pool that cannot hold the longest request."""
        cap = dep.kv_capacity_tokens if self.spec is None else self.spec.cap
        if cap < 1:
            raise ValueError("deployment has no KV pool (its weights fill its HBM): give it more chips")
        longest = max(p + g for p, g in zip(self.P, self.G))
        if self.paged:
            blocks = cap // self.bs
            if blocks > MAX_BLOCKS:
                raise ValueError(
                    f"the KV pool has {blocks:,} blocks of {self.bs} tokens, more than MAX_BLOCKS "
                    f"({MAX_BLOCKS:,}): raise scheduler.block_size"
                )
            watermark = math.ceil(WATERMARK * blocks)
            if -(-longest // self.bs) > blocks - watermark:
                raise ValueError(
                    f"the workload's longest request ({longest:,} tokens of prompt + answer) does not fit the "
                    f"deployment's KV pool ({blocks:,} blocks of {self.bs} tokens, {WATERMARK:.0%} kept free): "
                    "shorten the workload's lengths or give the deployment more chips"
                )
            return blocks, watermark
        self.slot = longest if sch.slot_tokens is None else sch.slot_tokens
        if self.slot < longest:
            raise ValueError(
                f"scheduler.slot_tokens ({self.slot:,}) must hold the workload's longest request ({longest:,} "
                "tokens of prompt + answer)"
            )
        if cap // self.slot < 1:
            raise ValueError(
                f"kv='static' reserves {self.slot:,} tokens per request, more than the deployment's KV pool "
                f"({cap:,} tokens): use kv='paged' or give the deployment more chips"
            )
        return cap // self.slot, 0

    def account(self, t: float) -> None:
        """Count the pool's allocated units up to ``t``."""
        if t > self.t_mark:
            self.used_time += (self.pool - self.free) * (t - self.t_mark)
            self.t_mark = t
        elif self.t_mark != self.t_mark:  # NaN: the first call
            self.t_mark = t

    # -- pool -----------------------------------------------------------------------------------------------
    def shared_blocks(self, i: int) -> int:
        """Resident prefix blocks request ``i`` would share if admitted now."""
        return self.prefix_blocks if (self.prefix_ready and self.shared[i]) else 0

    def prompt_units(self, i: int) -> int:
        """Units request ``i`` would reserve at admission (its whole prefill), the shared prefix excepted."""
        if not self.paged:
            return 1
        return -(-self.L[i] // self.bs) - self.shared_blocks(i)

    def held_units(self, i: int, tokens: int) -> int:
        return (-(-tokens // self.bs) - self.shb[i]) if self.paged else 1

    def cached_tokens(self, i: int) -> int:
        return self.shb[i] * self.bs

    def seconds(self, n: int, kv, ptok: int = 0, pairs: float = 0.0, pkv: int = 0) -> float:
        """One step's seconds: the engine's step, or a speculative round (:meth:`_Spec.seconds`)."""
        if self.spec is None:
            return self.dep._seconds(n, kv, ptok, pairs, pkv)
        return self.spec.seconds(n, kv, ptok, pairs, pkv)

    def seg_tokens(self, i: int) -> int:
        """Tokens decoding request ``i`` has been delivered since it joined the batch (a speculative round's
        overshoot past its answer cut off); records the ones that came with an earlier token of their round."""
        m = self.d - self.d0[i]
        if self.spec is None:
            return m
        got = min(self.spec.tok(m), self.G[i] - self.gen[i])
        self.zeros[i] += got - m
        return got

    # -- the decode batch -----------------------------------------------------------------------------------
    def join(self, i: int, t0: float) -> None:
        """Request ``i`` has just finished a prefill of ``L[i]`` tokens (and emitted a token, delivered at ``t0``):
        decode it."""
        self.d0[i] = self.d
        self.seg_t0[i] = t0
        self.state[i] = 2
        self.n_dec += 1
        self.ctx += self.L[i]
        if self.paged:
            self.cnt[(self.L[i] - self.d) % self.bs] += 1
        if self.spec is None:
            key = self.d + self.G[i] - self.gen[i]
        else:
            key = self.d + self.spec.rounds(self.G[i] - self.gen[i])
            self.dec_set[i] = None
        b = self.finish.get(key)
        if b is None:
            self.finish[key] = [(i, self.epoch[i])]
            heapq.heappush(self.fkeys, key)
        else:
            b.append((i, self.epoch[i]))

    def leave(self, i: int) -> int:
        """Take decoding request ``i`` out of the batch (``gen[i]`` brought up to date first); returns the units it
        held. Records its decode stretch (tokens at this replica's decode steps ``d0 + 1 ... d``)."""
        if self.spec is None:
            c = self.L[i] + self.d - self.d0[i]
        else:
            c = self.L[i] + self.spec.tok(self.d - self.d0[i])
            del self.dec_set[i]
        self.n_dec -= 1
        self.ctx -= c
        if self.paged:
            self.cnt[(self.L[i] - self.d0[i]) % self.bs] -= 1
        self.segs.append((self.rep, self.d0[i] + 1, self.d, self.seg_t0[i], i))
        return self.held_units(i, c)

    def grow(self, victims) -> None:
        """Give every decoding sequence that needs one its next block, preempting from ``victims`` while the pool
        cannot."""
        if self.spec is not None:
            return self.spec_grow(victims)
        if not self.paged or not self.n_dec:
            return
        bs, cnt = self.bs, self.cnt
        need = cnt[(-self.d) % bs]
        while need > self.free:
            victims()
            need = cnt[(-self.d) % bs]
        self.free -= need

    def spec_grow(self, victims) -> None:
        """:meth:`grow` for speculative rounds: each sequence's round adds ``floor((m + 1) τ) − floor(m τ)``
        tokens (``m`` rounds since it joined), one pass over the batch."""
        tau, bs, L, d0, paged = self.spec.tau, self.bs, self.L, self.d0, self.paged
        while True:
            d = self.d
            inc = need = 0
            for i in self.dec_set:
                m = d - d0[i]
                a = L[i] + int(m * tau + 1e-9)
                b = L[i] + int((m + 1) * tau + 1e-9)
                inc += b - a
                if paged:
                    need += (b - 1) // bs - (a - 1) // bs
            if need <= self.free:
                break
            victims()
        self.free -= need
        self.spec_inc = inc

    def fast_forward(self, t: float, bound: float, padded: bool) -> tuple[float, int]:
        """Run, at once, the plain decode steps from ``t``: the batch as it is, no prompt, no completion, every step
        ending by ``bound`` (the next event that could change the batch) and the pool holding their new blocks.
        Same accounting as one step at a time; the caller has checked that nothing waits. Returns ``(time, steps
        run)``; runs none unless at least :data:`FAST_FORWARD_MIN` qualify."""
        n = self.n_dec
        fk = self.fkeys
        if self.spec is not None:  # rounds advance sequences unevenly: one at a time
            return t, 0
        while fk and fk[0] <= self.d:
            heapq.heappop(fk)
        if not n or not fk:
            return t, 0
        k = fk[0] - self.d - 1  # steps before the next completion
        if self.paged:
            k = min(k, (self.free // n) * self.bs)
        if k < FAST_FORWARD_MIN:
            return t, 0
        dep = self.dep
        kv0 = n * self.slot if padded else self.ctx + n
        dt0 = dep._seconds(n, kv0)
        if bound < math.inf:
            k = min(k, int((bound - t) / dt0) + 1)
            if k < FAST_FORWARD_MIN:
                return t, 0
        s = np.arange(k)
        if padded or k == 1:
            dts = np.full(k, dt0)
        else:  # a step's time is linear in the context it reads, which grows by n tokens a step
            dt1 = dep._seconds(n, kv0 + n * (k - 1))
            dts = dt0 + (dt1 - dt0) * (s / (k - 1))
        times = np.cumsum(np.concatenate(([t], dts)))
        if bound < math.inf:
            k = min(k, int(np.searchsorted(times, bound, side="right")) - 1)
            if k < FAST_FORWARD_MIN:
                return t, 0
            dts, times = dts[:k], times[: k + 1]
        if self.paged:
            need = np.asarray(self.cnt)[(-(self.d + s[:k])) % self.bs]
            free_s = self.free - np.cumsum(need)
            self.used_time += float(np.dot(self.pool - free_s, dts))
            self.free = int(free_s[-1])
        else:
            self.used_time += (self.pool - self.free) * float(times[k] - t)
        t_end = float(times[k])
        self.t_mark = t_end
        self.d += k
        self.ctx += k * n
        self.T.extend(times[1:].tolist())
        self.steps += k
        self.decode_steps += k
        self.batch_sum += k * n
        self.cs_decode += (t_end - t) * dep.n_chips
        return t_end, k

    def after_decode(self, t: float) -> None:
        """The batch has decoded one token each at time ``t``: advance and complete the sequences due."""
        self.d += 1
        self.T.append(t)
        if self.spec is None:
            self.ctx += self.n_dec
        else:
            self.ctx += self.spec_inc
            self.spec_inc = 0
        due = self.finish.pop(self.d, None)
        if due:
            for i, ep in due:
                if ep != self.epoch[i] or self.state[i] != 2:
                    continue
                self.gen[i] += self.seg_tokens(i)
                self.free += self.leave(i)
                self.complete(i, t)

    def complete(self, i: int, t: float) -> None:
        self.state[i] = 4
        self.last[i] = t
        self.completed += 1
        g = self.g
        g[0] += 1
        self.load[self.route[i]] -= self.P[i] + self.G[i]
        if self.closed and g[1] < self.N:
            self.arr[g[1]] = t
            g[1] += 1


class _Router:
    """Sends each arriving request to a replica (see :data:`ROUTERS`); keeps the books in ``run.load``."""

    def __init__(self, policy: str, run: _Run, n: int):
        self.policy, self.r, self.n = policy, run, n
        self.count = 0
        self.holders: list = []  # replicas that have been sent the shared prefix (prefix-aware)
        self.prefix = run.wl.prefix_share > 0

    def least(self, among) -> int:
        load = self.r.load
        return min(among, key=load.__getitem__)

    def __call__(self, i: int) -> int:
        r, n = self.r, self.n
        if n == 1:
            k = 0
        elif self.policy == "round-robin":
            k = self.count % n
        elif self.policy == "prefix-aware" and self.prefix and r.shared[i]:
            load = r.load
            low = min(load)
            k = self.least(self.holders) if self.holders else -1
            if k < 0 or load[k] > PREFIX_BALANCE * low + r.P[i] + r.G[i]:
                k = self.least(range(n))  # the holders are too busy: one more replica takes the prefix
                if k not in self.holders:
                    self.holders.append(k)
        else:
            k = self.least(range(n))
        self.count += 1
        r.route[i] = k
        r.load[k] += r.P[i] + r.G[i]
        return k


def _split(dep: Deployment, n_dec, kv, ptok, pairs, pkv, dt) -> tuple[float, float]:
    """(prefill, decode) shares of a step's ``dt`` seconds: by what each part would cost as a step alone."""
    if not ptok:
        return 0.0, dt
    if not n_dec:
        return dt, 0.0
    a = dep._seconds(n_dec, kv)
    b = dep._seconds(0, 0, ptok, pairs, pkv)
    return dt * b / (a + b), dt * a / (a + b)


class _TooManySteps(ValueError):
    """A simulation passed :data:`MAX_STEPS` engine steps (a ValueError: lower the requests or raise the load)."""


def _too_many_steps():
    raise _TooManySteps(
        f"the simulation passed MAX_STEPS ({MAX_STEPS:,}) engine steps: reduce workload.n_requests or its output "
        "lengths (or raise the load: a lightly loaded server runs one step per token per request)"
    )


class _Colocated:
    """One replica that prefills and decodes in the same steps (:attr:`Scheduler.policy` says how)."""

    def __init__(self, dep: Deployment, sch: Scheduler, wl: Workload, base: _Run | None = None, rep: int = 0,
                 spec: _Spec | None = None):  # fmt: skip
        self.r = _Run(dep, sch, wl, base, rep, spec)
        self.dep, self.sch = dep, sch
        self.padded = sch.kv == "static"  # a static slot's buffer is read whole every step (no paged attention)
        self.waiting: deque = deque()
        self.prefilling: list = []  # admitted, prompt not finished (admission order)
        self.fill = self.fill_chunked if sch.policy == "chunked" else self.fill_prefill_first
        self.pending = None  # (chunks, decoded) of the step running

    def victim(self) -> None:
        """Preempt the most recently admitted running sequence (recompute): it goes back to the head of the queue."""
        r, state, L = self.r, self.r.state, self.r.L
        while True:
            i, ep = r.order.pop()
            if ep == r.epoch[i] and state[i] in (1, 2):
                break
        if state[i] == 2:
            r.gen[i] += r.seg_tokens(i)
            r.free += r.leave(i)
        else:
            self.prefilling.remove(i)
            r.free += r.held_units(i, L[i])
        L[i] = r.P[i] + r.gen[i]
        r.done[i] = 0
        r.epoch[i] += 1
        state[i] = 0
        self.waiting.appendleft(i)
        r.preemptions += 1

    def admit(self, i: int) -> bool:
        """Reserve request ``i``'s prompt blocks and start its prefill, if the pool (less its watermark) has room."""
        r = self.r
        u = r.prompt_units(i)
        if u + r.watermark > r.free:
            return False
        r.free -= u
        r.shb[i] = r.shared_blocks(i)
        r.state[i] = 1
        r.done[i] = r.cached_tokens(i)
        r.order.append((i, r.epoch[i]))
        self.prefilling.append(i)
        return True

    def fill_chunked(self) -> tuple[list, int]:
        """A chunked step: every running sequence decodes, the rest of the budget goes to prompt chunks (the partly
        prefilled first, then new admissions). Returns ``(chunks, sequences decoded)``."""
        r, L, done, waiting, prefilling = self.r, self.r.L, self.r.done, self.waiting, self.prefilling
        chunks = []
        r.grow(self.victim)
        n_dec = r.n_dec
        room = self.sch.token_budget - n_dec
        for i in prefilling:
            if room <= 0:
                break
            c = min(L[i] - done[i], room)
            chunks.append((i, c))
            room -= c
        while room > 0 and waiting and n_dec + len(prefilling) < self.sch.max_seqs and self.admit(waiting[0]):
            i = waiting.popleft()
            c = min(L[i] - done[i], room)
            chunks.append((i, c))
            room -= c
        return chunks, n_dec

    def fill_prefill_first(self) -> tuple[list, int]:
        """A prefill-first step: whole prompts up to the budget (at least one) while any can be admitted, decoding
        paused; else a decode step of every running sequence. Returns ``(chunks, sequences decoded)``."""
        r, L, done, waiting = self.r, self.r.L, self.r.done, self.waiting
        chunks = []
        n_dec = r.n_dec
        room = self.sch.token_budget
        while waiting and n_dec + len(self.prefilling) < self.sch.max_seqs:
            i = waiting[0]
            if chunks and L[i] - r.shared_blocks(i) * r.bs > room:
                break
            if not self.admit(i):
                break
            waiting.popleft()
            c = L[i] - done[i]
            chunks.append((i, c))
            room -= c
        if chunks:
            return chunks, 0  # decoding pauses for the prefill step
        r.grow(self.victim)
        return chunks, r.n_dec

    def start(self, t: float, steps: list) -> float:
        """Fill and price the next step from ``t``; returns its end time, or ``inf`` when there is nothing to run."""
        chunks, n_dec = self.fill()
        if not n_dec and not chunks:
            return math.inf
        r, done, n_chips = self.r, self.r.done, self.dep.n_chips
        ptok, pairs, pkv = 0, 0.0, 0
        for i, c in chunks:
            d0 = done[i]
            ptok += c
            pairs += c * d0 + c * (c + 1) / 2.0
            pkv += d0
        kv = n_dec * r.slot if self.padded else r.ctx + n_dec
        dt = r.seconds(n_dec, kv, ptok, pairs, pkv)
        cp, cd = _split(self.dep, n_dec, kv, ptok, pairs, pkv, dt)
        r.cs_prefill += cp * n_chips
        r.cs_decode += cd * n_chips
        r.account(t)
        running = r.n_dec + len(self.prefilling)
        if running > r.peak:
            r.peak = running
        r.steps += 1
        steps[0] += 1
        if steps[0] > MAX_STEPS:
            _too_many_steps()
        self.pending = (chunks, n_dec)
        return t + dt

    def end(self, t: float) -> None:
        """The step started by :meth:`start` ends at ``t``: decoded tokens land, finished prompts emit their first
        token and decode."""
        r, L, done = self.r, self.r.L, self.r.done
        chunks, n_dec = self.pending
        r.account(t)
        if n_dec:
            r.decode_steps += 1
            r.batch_sum += n_dec
            r.after_decode(t)
        for i, c in chunks:
            done[i] += c
            if done[i] < L[i]:
                continue
            self.prefilling.remove(i)
            if math.isnan(r.first[i]):
                r.first[i] = t
            r.gen[i] += 1
            if r.prefix_blocks and r.shared[i] and not r.prefix_ready:
                r.prefix_ready = True  # this request's prefix blocks become the shared, resident copy
                r.shb[i] = r.prefix_blocks
            if r.gen[i] >= r.G[i]:
                r.free += r.held_units(i, L[i])
                r.segs.append((r.rep, 1, 0, t, i))  # a stretch of one token, delivered at t
                r.complete(i, t)
            else:
                r.join(i, t)


def _colocated(dep: Deployment, sch: Scheduler, wl: Workload, router: str, spec: _Spec | None = None) -> tuple:
    """Serve ``wl`` on ``dep.replicas`` colocated replicas behind ``router``: every replica's step is an event;
    arrivals are routed at their time."""
    n_rep = dep.replicas
    first = _Colocated(dep, sch, wl, spec=spec)
    engines = [first] + [_Colocated(dep, sch, wl, first.r, k, spec) for k in range(1, n_rep)]
    r0 = first.r
    route = _Router(router, r0, n_rep)
    arr, N, g = r0.arr, r0.N, r0.g
    steps = [0]
    t = arr[0]
    t_start = t
    nxt = 0
    ends = [math.inf] * n_rep
    heap: list = []
    poke = set(range(n_rep))
    if n_rep == 1:  # one replica: no router, no heap (the common case, kept fast)
        waiting, start, end, prefilling, padded = first.waiting, first.start, first.end, first.prefilling, first.padded
        while g[0] < N:
            while nxt < N and arr[nxt] <= t:
                waiting.append(nxt)
                nxt += 1
            if not waiting and not prefilling and r0.n_dec >= 1:
                t, k = r0.fast_forward(t, arr[nxt] if nxt < N else math.inf, padded)
                steps[0] += k
                if steps[0] > MAX_STEPS:
                    _too_many_steps()
            e = start(t, steps)
            if e == math.inf:
                if nxt >= N:
                    raise RuntimeError("the simulator has requests left but nothing to run (a bug)")
                t = arr[nxt]
                continue
            end(e)
            t = e
        poke.clear()
    while g[0] < N:
        while nxt < N and arr[nxt] <= t:
            k = route(nxt)
            engines[k].waiting.append(nxt)
            poke.add(k)
            nxt += 1
        for k in poke:
            if ends[k] == math.inf:
                eng = engines[k]
                if not eng.waiting and not eng.prefilling and eng.r.n_dec:
                    bound = arr[nxt] if nxt < N else math.inf
                    if r0.closed and heap:
                        bound = min(bound, heap[0][0])  # another replica's completion may release a client
                    t_k, n_ff = eng.r.fast_forward(t, bound, eng.padded)
                    steps[0] += n_ff
                    if steps[0] > MAX_STEPS:
                        _too_many_steps()
                    e = eng.start(t_k, steps)
                else:
                    e = eng.start(t, steps)
                if e != math.inf:
                    ends[k] = e
                    heapq.heappush(heap, (e, k))
        poke.clear()
        if g[0] >= N:
            break
        t_new = min(heap[0][0] if heap else math.inf, arr[nxt] if nxt < N else math.inf)
        if t_new == math.inf:
            raise RuntimeError("the simulator has requests left but nothing to run (a bug)")
        t = t_new
        while heap and heap[0][0] <= t:
            e, k = heapq.heappop(heap)
            ends[k] = math.inf
            engines[k].end(e)
            poke.add(k)
    runs = [e.r for e in engines]
    for r in runs:
        r.account(t)
    return runs, t_start, t, dep.total_chips, sch.label(), {}


class _Decoder:
    """One decode replica under disaggregation: its engine state and its side of the KV hand-off."""

    def __init__(self, run: _Run):
        self.r = run
        self.ready: deque = deque()  # (request, instance, time its prefill ended) waiting for this pool's blocks
        self.arrived: list = []  # KV on this replica, joining at its next step
        self.busy = False
        self.n_reserved = 0  # transfers under way to it


class _Disaggregated:
    """Decode replicas fed by prefill instances over a link (see the module docstring). Events are ``(time, order,
    kind, payload)`` on a heap; kinds: 0 a decode step ends, 1 a KV transfer ends, 2 a prefill step ends."""

    def __init__(self, dep: Deployment, sch: Scheduler, dis: Disaggregation, wl: Workload, router: str,
                 spec: _Spec | None = None):  # fmt: skip
        _check_prefill(dep, dis)
        r = _Run(dep, sch, wl, spec=spec)
        self.r = r  # the shared per-request lists (and replica 0)
        self.dec = [_Decoder(r)] + [_Decoder(_Run(dep, sch, wl, r, k, spec)) for k in range(1, dep.replicas)]
        for d in self.dec:
            d.r.prefix_blocks = 0  # the decode side receives whole prompts (no shared prefix there)
        self.victims = [self._victim_of(k) for k in range(len(self.dec))]
        self.route = _Router(router, r, len(self.dec))
        self.dep, self.sch, self.dis, self.pre = dep, sch, dis, dis.prefill
        _check_prefill_pool(r, dis.prefill.kv_capacity_tokens)
        K, N = dis.instances, r.N
        self.K = K
        self.bw = dis.bandwidth(dep)
        self.lat = self.pre.efficiency.latency(dis.link)
        self.pb_tokens = (wl.prefix_len // sch.block_size) * sch.block_size if sch.prefix_caching else 0
        self.queue: deque = deque()  # requests waiting for a prefill instance
        self.ppool = [0] * K  # tokens held in each instance's pool
        self.pbusy = [False] * K
        self.plink = [0.0] * K  # when each instance's link is next free
        self.pprefix = [False] * K  # the instance holds the shared prefix
        self.stalled_since = [math.nan] * K
        self.owner = [0] * N  # the instance that prefilled each request
        self.pcached = [0] * N  # prefix tokens its prefill read from that instance's cache
        self.keep = [0] * N  # prefix tokens of its KV that stay resident in that instance's pool
        self.tpre = [math.nan] * N  # when its last prefill ended
        self.events: list = []
        self.seq = 0
        self.stalls, self.stall_s, self.xfer_sum, self.wait_sum, self.n_xfer = 0, 0.0, 0.0, 0.0, 0
        self.prefill_steps = 0
        self.steps = 0
        self.nxt = 0  # the next request to arrive
        self.now = r.arr[0]

    def push(self, t: float, kind: int, payload) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, kind, payload))

    def _victim_of(self, k: int):
        return lambda: self.victim(k)

    def victim(self, k: int) -> None:
        """Preempt decode replica ``k``'s most recently admitted sequence: back to the head of the prefill queue."""
        r = self.dec[k].r
        state = r.state
        while True:
            i, ep = r.order.pop()
            if ep == r.epoch[i] and state[i] == 2:
                break
        r.gen[i] += r.seg_tokens(i)
        r.free += r.leave(i)
        r.L[i] = r.P[i] + r.gen[i]
        r.epoch[i] += 1
        state[i] = 0
        self.queue.appendleft(i)
        r.preemptions += 1

    def start_transfers(self) -> None:
        """Send finished prefills' KV, in order, while each decode pool has blocks and sequence slots for them."""
        for dec in self.dec:
            r, ready = dec.r, dec.ready
            while ready:
                i, j, t_done = ready[0]
                u = r.prompt_units(i)
                if u + r.watermark > r.free or r.n_dec + dec.n_reserved + len(dec.arrived) >= self.sch.max_seqs:
                    break
                ready.popleft()
                r.account(self.now)
                r.free -= u
                dec.n_reserved += 1
                r.state[i] = 3
                begin = max(self.now, self.plink[j])
                dur = r.L[i] * self.pre.kv_bytes_per_token / self.bw + self.lat
                self.plink[j] = begin + dur
                self.xfer_sum += dur
                self.wait_sum += self.now - t_done
                self.n_xfer += 1
                self.push(begin + dur, 1, i)

    def end_stall(self, j: int) -> None:
        if not math.isnan(self.stalled_since[j]):
            self.stall_s += self.now - self.stalled_since[j]
            self.stalled_since[j] = math.nan

    def take_prompts(self, j: int) -> tuple[list, int, float, int]:
        """Whole prompts from the queue for instance ``j``, up to the token budget and its pool: ``(requests,
        tokens computed, attention pairs, cached tokens read)``."""
        r, L, queue, pb = self.r, self.r.L, self.queue, self.pb_tokens
        pcap = self.pre.kv_capacity_tokens
        batch, ptok, pairs, pkv = [], 0, 0.0, 0
        while queue:
            i = queue[0]
            cached = pb if (pb and r.shared[i] and self.pprefix[j]) else 0
            new = L[i] - cached
            if batch and ptok + new > self.sch.token_budget:
                break
            if self.ppool[j] + L[i] - cached > pcap:
                break
            queue.popleft()
            self.owner[i], self.pcached[i], self.keep[i] = j, cached, 0
            self.ppool[j] += L[i] - cached
            batch.append(i)
            ptok += new
            pairs += new * cached + new * (new + 1) / 2.0
            pkv += cached
        return batch, ptok, pairs, pkv

    def start_prefills(self) -> None:
        """Every idle instance takes what prompts its pool holds; one that can take none while work waits stalls."""
        for j in range(self.K):
            if self.pbusy[j]:
                continue
            if not self.queue:
                self.end_stall(j)
                continue
            batch, ptok, pairs, pkv = self.take_prompts(j)
            if not batch:  # work waits but this instance's pool cannot take it: backpressure
                if math.isnan(self.stalled_since[j]):
                    self.stalled_since[j] = self.now
                    self.stalls += 1
                continue
            self.end_stall(j)
            self.pbusy[j] = True
            dt = self.pre._seconds(0, 0, ptok, pairs, pkv)
            self.r.cs_prefill += dt * self.pre.n_chips
            self.prefill_steps += 1
            if self.prefill_steps + self.steps > MAX_STEPS:
                _too_many_steps()
            self.push(self.now + dt, 2, (j, batch))

    def start_decode(self, k: int) -> None:
        """Let the KV that has arrived at replica ``k`` join its batch, grow it a block where needed, and start a
        decode step."""
        dec = self.dec[k]
        r = dec.r
        r.account(self.now)
        for i in dec.arrived:
            r.join(i, self.tpre[i])  # its prefill's token (delivered here or with this replica's next step)
            r.order.append((i, r.epoch[i]))
        dec.arrived.clear()
        t0 = self.now
        if r.n_dec:
            nxt = self.nxt
            bound = r.arr[nxt] if nxt < r.N else math.inf
            for e in self.events:  # prefills ending and transfers landing may change the batch
                if e[2] and e[0] < bound:
                    bound = e[0]
            t0, n_ff = r.fast_forward(t0, bound, self.sch.kv == "static")
            self.steps += n_ff
        r.grow(self.victims[k])
        if not r.n_dec:
            return
        n = r.n_dec
        dt = r.seconds(n, n * r.slot if self.sch.kv == "static" else r.ctx + n)
        r.cs_decode += dt * self.dep.n_chips
        if n > r.peak:
            r.peak = n
        r.steps += 1
        self.steps += 1
        if self.prefill_steps + self.steps > MAX_STEPS:
            _too_many_steps()
        r.decode_steps += 1
        r.batch_sum += n
        dec.busy = True
        self.push(t0 + dt, 0, k)

    def decode_ended(self, k: int) -> None:
        dec = self.dec[k]
        dec.busy = False
        dec.r.account(self.now)
        dec.r.after_decode(self.now)
        if dec.r.n_dec or dec.arrived:
            self.start_transfers()
            self.start_decode(k)

    def transfer_ended(self, i: int) -> None:
        L = self.r.L
        self.ppool[self.owner[i]] -= L[i] - self.pcached[i] - self.keep[i]
        k = self.r.route[i]
        dec = self.dec[k]
        dec.n_reserved -= 1
        dec.arrived.append(i)
        if not dec.busy:
            self.start_decode(k)

    def prefill_ended(self, j: int, batch: list) -> None:
        """Instance ``j``'s prompts are prefilled: each emits its first token, then waits for decode blocks on its
        replica (or is done)."""
        r, L, pb, now = self.r, self.r.L, self.pb_tokens, self.now
        self.pbusy[j] = False
        for i in batch:
            if math.isnan(r.first[i]):
                r.first[i] = now
            r.gen[i] += 1
            self.tpre[i] = now
            if pb and r.shared[i] and not self.pprefix[j] and not self.pcached[i]:
                self.pprefix[j] = True  # its prefix tokens stay in this instance's pool from now on
                self.keep[i] = pb
            if r.gen[i] >= r.G[i]:
                self.ppool[j] -= L[i] - self.pcached[i] - self.keep[i]
                r.segs.append((r.route[i], 1, 0, now, i))  # a stretch of one token, delivered at the prefill
                self.dec[r.route[i]].r.complete(i, now)
            else:
                self.dec[r.route[i]].ready.append((i, j, now))

    def run(self) -> tuple:
        r, arr, N, events, g = self.r, self.r.arr, self.r.N, self.events, self.r.g
        nxt = 0
        t_start = self.now
        while g[0] < N:
            while nxt < N and arr[nxt] <= self.now:
                self.route(nxt)
                self.queue.append(nxt)
                nxt += 1
            self.nxt = nxt
            self.start_transfers()
            self.start_prefills()
            for k, dec in enumerate(self.dec):
                if not dec.busy and dec.arrived:
                    self.start_decode(k)
            if g[0] >= N:
                break
            t_new = min(events[0][0] if events else math.inf, arr[nxt] if nxt < N else math.inf)
            if t_new == math.inf:
                raise RuntimeError("the simulator has requests left but nothing to run (a bug)")
            self.now = t_new
            # every event due now, in (time, order): decode ends free blocks first only when they are earlier
            while events and events[0][0] <= self.now:
                _, _, kind, payload = heapq.heappop(events)
                if kind == 0:
                    self.decode_ended(payload)
                elif kind == 1:
                    self.transfer_ended(payload)
                else:
                    self.prefill_ended(*payload)
        for j in range(self.K):
            self.end_stall(j)
        runs = [d.r for d in self.dec]
        for x in runs:
            x.account(self.now)
        n = self.n_xfer
        extra = dict(
            prefill_steps=self.prefill_steps,
            prefill_stalls=self.stalls,
            prefill_stall_s=self.stall_s,
            transfer_s=self.xfer_sum / n if n else 0.0,
            transfer_wait_s=self.wait_sum / n if n else 0.0,
        )
        n_chips = self.dep.total_chips + self.K * self.pre.n_chips
        t_end = max(x for x in r.last)
        return runs, t_start, t_end, n_chips, f"{self.sch.label()}; {self.dis.label()}", extra


def _check_prefill(dep: Deployment, dis: Disaggregation) -> None:
    if dis.prefill.model != dep.model or dis.prefill.kv_dtype != dep.kv_dtype:
        raise ValueError(
            "disaggregation.prefill must serve the same model with the same kv_dtype as the deployment (the KV it "
            "sends is decoded there)"
        )


def _check_prefill_pool(r: _Run, pcap: int) -> None:
    longest = max(p + g for p, g in zip(r.P, r.G))
    if longest > pcap:
        raise ValueError(
            f"the workload's longest request ({longest:,} tokens, which a preempted "
            f"sequence may re-prefill) does not fit a prefill instance's KV pool ({pcap:,} tokens): give "
            "disaggregation.prefill more chips"
        )


def _window(arr: np.ndarray, warmup: float, drain: float) -> np.ndarray:
    """Requests that arrived after the first ``warmup`` share and before the last ``drain`` share (by arrival
    order); every request when that leaves none."""
    n = len(arr)
    lo, hi = int(math.floor(warmup * n)), n - int(math.floor(drain * n))
    if lo >= hi:
        return np.ones(n, dtype=bool)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(arr, kind="stable")] = np.arange(n)
    return (rank >= lo) & (rank < hi)


def _weighted_pct(values: np.ndarray, weights: np.ndarray) -> tuple[float, float, float]:
    """(p50, p90, p99) of ``values`` counted ``weights`` times each (the inverted CDF: the smallest value whose
    cumulative count reaches the share)."""
    keep = weights > 0
    values, weights = values[keep], weights[keep]
    if not len(values):
        return (0.0, 0.0, 0.0)
    o = np.argsort(values, kind="stable")
    v, cw = values[o], np.cumsum(weights[o])
    idx = np.searchsorted(cw, np.array([0.5, 0.9, 0.99]) * cw[-1], side="left")
    return tuple(float(v[min(k, len(v) - 1)]) for k in idx)


def _deliveries(runs: list, N: int, disaggregated: bool, ttft_at: str, window: np.ndarray):
    """From the decode stretches: each request's first delivered token (s; NaN where it had no stretch), its
    largest gap between delivered tokens (s), and the (p50, p90, p99) of every gap of the window's requests."""
    segs = runs[0].segs
    first_del = np.full(N, np.nan)
    stall = np.zeros(N)
    if not segs:
        return first_del, stall, (0.0, 0.0, 0.0)
    Ts = [np.asarray(r.T, dtype=float) for r in runs]
    offs = np.cumsum([0] + [len(x) for x in Ts])
    Tg = np.concatenate(Ts)
    dT = np.append(np.diff(Tg), 0.0)  # dT[j] = Tg[j+1] - Tg[j] (a sentinel 0 at the end)
    S = np.array(segs, dtype=float)
    rep, a, b, t0, req = S[:, 0].astype(np.int64), S[:, 1].astype(np.int64), S[:, 2].astype(np.int64), S[:, 3], \
        S[:, 4].astype(np.int64)  # fmt: skip
    has = a <= b
    ga = offs[rep] + np.minimum(a, np.maximum(b, 0))
    gb = offs[rep] + np.maximum(b, 0)
    if disaggregated and ttft_at == "decode":
        t0 = np.where(has, np.nan, t0)  # the user's stream starts at the decode replica's first step
    fd = np.where(np.isnan(t0), Tg[ga], t0)  # first delivery of each stretch
    ld = np.where(has, Tg[gb], t0)  # last delivery of each stretch
    # the stretches in time order per request: the first is where the user's first token came from
    order = np.argsort(req, kind="stable")
    rq = req[order]
    head = np.ones(len(rq), dtype=bool)
    head[1:] = rq[1:] != rq[:-1]
    first_del[rq[head]] = fd[order][head]
    # gaps: a stretch's first decode token after its prefill token, inside a stretch, and between stretches
    g1 = has & ~np.isnan(t0)
    first_gap = Tg[ga[g1]] - t0[g1]
    np.maximum.at(stall, req[g1], first_gap)
    cross = fd[order][~head] - ld[order][np.flatnonzero(~head) - 1]
    cross_req = rq[~head]
    np.maximum.at(stall, cross_req, cross)
    inner = b > a
    if inner.any():
        s_, e_, rr = ga[inner], gb[inner], req[inner]
        o = np.argsort(s_, kind="stable")
        s_, e_, rr = s_[o], e_[o], rr[o]
        idx = np.empty(2 * len(s_), dtype=np.int64)
        idx[0::2], idx[1::2] = s_, e_
        np.maximum.at(stall, rr, np.maximum.reduceat(dT, idx)[0::2])
        w_in = window[rr]
        cov = np.bincount(s_[w_in], minlength=len(dT) + 1) - np.bincount(e_[w_in], minlength=len(dT) + 1)
        weights = np.cumsum(cov)[: len(dT)].astype(float)
    else:
        weights = np.zeros(len(dT))
    zeros = float(np.asarray(runs[0].zeros)[window].sum())  # speculative: tokens that came with their round's first
    vals = np.concatenate([np.nan_to_num(dT), first_gap[window[req[g1]]], cross[window[cross_req]], [0.0]])
    wts = np.concatenate([weights, np.ones(int(window[req[g1]].sum()) + int(window[cross_req].sum())), [zeros]])
    return first_del, stall, _weighted_pct(vals, wts)


def _finish(runs: list, t_start: float, t_end: float, n_chips: int, engine: str, extra: dict, *,
            disaggregated: bool, ttft_at: str, warmup: float, drain: float, router: str) -> dict:  # fmt: skip
    r = runs[0]
    arr = np.array(r.arr)
    last = np.array(r.last)
    G = np.array(r.G)
    out = np.array(r.gen)  # tokens generated, counted step by step (the tests hold it equal to G)
    win = _window(arr, warmup, drain)
    first_del, stall, tbt = _deliveries(runs, r.N, disaggregated, ttft_at, win)
    first = np.array(r.first)
    if disaggregated and ttft_at == "decode":
        first = np.where(np.isnan(first_del), first, first_del)
    ttft = first - arr
    tpot = np.where(G > 1, (last - first) / np.maximum(G - 1, 1), 0.0)
    duration = float(np.max(last) - t_start)
    events = np.concatenate([arr, last])
    kinds = np.concatenate([np.ones(r.N), -np.ones(r.N)])
    order = np.lexsort((kinds, events))  # at equal times a completion (-1) comes before an arrival (+1)
    peak_in = int(np.max(np.cumsum(kinds[order])))
    span = max(t_end - t_start, 1e-300)
    decode_steps = sum(x.decode_steps for x in runs)
    res = dict(
        engine=engine + (f"; {len(runs)} replicas, {router}" if len(runs) > 1 else ""),
        ttft=_pct(ttft[win]),
        tpot=_pct(tpot[(G > 1) & win]),
        output_tokens_per_s=float(out.sum()) / duration if duration else 0.0,
        input_tokens_per_s=float(np.sum(r.P)) / duration if duration else 0.0,
        tokens_per_s_per_chip=float(out.sum()) / duration / n_chips if duration else 0.0,
        kv_utilisation=sum(x.used_time for x in runs) / (sum(x.pool for x in runs) * span),
        peak_seqs=max(x.peak for x in runs),
        peak_in_system=peak_in,
        mean_batch=sum(x.batch_sum for x in runs) / decode_steps if decode_steps else 0.0,
        preemptions=sum(x.preemptions for x in runs),
        steps=sum(x.steps for x in runs),
        prefill_steps=0,
        duration=duration,
        completed=r.g[0],
        n_chips=n_chips,
        chip_seconds_prefill=sum(x.cs_prefill for x in runs),
        chip_seconds_decode=sum(x.cs_decode for x in runs),
        prefill_stalls=0,
        prefill_stall_s=0.0,
        transfer_s=0.0,
        transfer_wait_s=0.0,
        tbt=tbt,
        tbt_max=_pct(stall[(G > 1) & win]),
        replicas=len(runs),
        router=router,
        ttft_at=ttft_at,
        warmup=warmup,
        drain=drain,
        ttft_all=tuple(ttft.tolist()),
        tpot_all=tuple(tpot.tolist()),
        tokens_all=tuple(r.gen),
        tbt_max_all=tuple(stall.tolist()),
        arrivals_all=tuple(arr.tolist()),
        replica_all=tuple(r.route),
    )
    res.update(extra)
    return res


@checked
def simulate(
    deployment: Deployment,
    workload: Workload,
    *,
    scheduler: Scheduler | None = None,
    disaggregation: Disaggregation | None = None,
    router: _Route = "least-loaded",
    ttft_at: Annotated[str, OneOf(("decode", "prefill"))] = "decode",
    warmup: _Share = DEFAULT_WARMUP,
    drain: _Share = DEFAULT_DRAIN,
    speculative: Speculation | None = None,
) -> SimResult:
    """Serve ``workload`` on the ``deployment.replicas`` replicas of ``deployment`` behind ``router`` (one of
    :data:`ROUTERS`), each filling its steps with ``scheduler`` (default ``Scheduler()``) and, if given, prefill on
    the instances of ``disaggregation`` (the decode side is then the deployment's replicas). ``ttft_at``: where the
    first token is counted under disaggregation: ``"decode"`` (default) when the decode replica's first step
    streams it to the user, as vLLM's disaggregated prefill proxy does (so TTFT holds the KV transfer and the wait
    for decode memory), or ``"prefill"`` when the prefill instance computes it. Percentiles count the requests that
    arrive after the first ``warmup`` share and before the last ``drain`` share (by arrival order); the ``*_all``
    arrays keep every request. ``speculative`` (a :class:`Speculation`): every decode step of every replica is a
    speculative round (module docstring, "Speculative decoding"). See the module docstring for the rest. Refuses a
    workload whose longest request does not fit the KV pool, and stops past :data:`MAX_STEPS` engine steps."""
    _check_deployment("deployment", deployment)
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload (tpu_notes.inference.Workload); got {type(workload).__name__}")
    if scheduler is None:
        scheduler = Scheduler()
    if not isinstance(scheduler, Scheduler):
        raise TypeError(f"scheduler must be a Scheduler or None; got {type(scheduler).__name__}")
    if speculative is not None and not isinstance(speculative, Speculation):
        raise TypeError(f"speculative must be a Speculation or None; got {type(speculative).__name__}")
    if disaggregation is not None and not isinstance(disaggregation, Disaggregation):
        raise TypeError(f"disaggregation must be a Disaggregation or None; got {type(disaggregation).__name__}")
    if workload.n_requests > MAX_REQUESTS:  # the Workload refuses it already; kept for a replaced field
        raise ValueError(f"workload.n_requests must be at most MAX_REQUESTS ({MAX_REQUESTS:,})")
    if warmup + drain >= 1.0:
        raise ValueError(f"warmup + drain ({warmup!r} + {drain!r}) must be below 1 (they trim the run's two ends)")
    if deployment.replicas > MAX_REPLICAS:
        raise ValueError(f"deployment.replicas ({deployment.replicas}) must be at most MAX_REPLICAS ({MAX_REPLICAS})")
    spec = None
    if speculative is not None:
        rules.product_within(
            {"scheduler.max_seqs": scheduler.max_seqs, "(speculative.k + 1)": speculative.k + 1},
            MAX_ROWS,
            what="rows in one verify step",
        )
        try:
            spec = _Spec(deployment, speculative)
        except ValueError as err:
            raise ValueError(f"speculative.draft: {err}") from None
    if disaggregation is None:
        parts = _colocated(deployment, scheduler, workload, router, spec)
    else:
        if disaggregation.prefill.chip.kind != deployment.chip.kind:
            raise ValueError("disaggregation.prefill and deployment must be the same kind of chip (TPU or GPU)")
        parts = _Disaggregated(deployment, scheduler, disaggregation, workload, router, spec).run()
    if speculative is not None:
        parts = parts[:4] + (f"{parts[4]}; {speculative.label()}",) + parts[5:]
    out = _finish(*parts, disaggregated=disaggregation is not None, ttft_at=ttft_at, warmup=warmup, drain=drain,
                  router=router)  # fmt: skip
    return SimResult(**out)


@checked
def default_engines(prefill: Deployment | None = None, instances: _Instances = 1, link: _Link | None = None) -> dict:
    """The engines the chapter compares, ``{label: (Scheduler, Disaggregation or None)}`` for :func:`sweep`:
    interleaved prefill-first, chunked prefill and, when ``prefill`` is given, ``instances`` disaggregated prefill
    instances of it over ``link`` (None: the chip's own fast link; chunked scheduling on the decode side)."""
    out = {
        "interleaved (prefill-first)": (Scheduler(policy="prefill_first"), None),
        "chunked prefill": (Scheduler(), None),
    }
    if prefill is not None:
        out["disaggregated"] = (Scheduler(), Disaggregation(prefill, instances, link))
    return out


@checked
def sweep(deployment: Deployment, workload: Workload, rates, engines: dict) -> list:
    """One :func:`simulate` per arrival rate of ``rates`` (requests/s) and engine of ``engines`` (``{label:
    (Scheduler, Disaggregation or None)}``), the workload's stream re-drawn at each rate with the same seed. Rows
    (:meth:`SimResult.row` plus ``"label"``, ``"rate"`` and the ``"result"``) for
    :func:`~tpu_notes.plots.percentiles_vs_load_chart`; at most :data:`MAX_SWEEP_RUNS` runs."""
    _check_deployment("deployment", deployment)
    if not isinstance(workload, Workload):
        raise TypeError(f"workload must be a Workload; got {type(workload).__name__}")
    if workload.arrival == "closed":
        raise ValueError("workload must have an arrival rate ('poisson' or 'bursty') to sweep rates over")
    if isinstance(rates, (str, bytes)) or not isinstance(rates, (list, tuple)) or not rates:
        raise TypeError(f"rates must be a non-empty list of arrival rates, requests/s; got {rates!r}")
    rates = [_check_rate(Positive().check(f"rates[{k}]", v), workload.n_requests, argument=f"rates[{k}]")
             for k, v in enumerate(rates)]  # fmt: skip
    if not isinstance(engines, dict) or not engines:
        raise TypeError("engines must be a non-empty dict {label: (Scheduler, Disaggregation or None)}")
    for label, e in engines.items():
        if (
            not isinstance(label, str)
            or not isinstance(e, tuple)
            or len(e) != 2
            or not isinstance(e[0], (Scheduler, type(None)))
            or not isinstance(e[1], (Disaggregation, type(None)))
        ):
            raise TypeError(f"engines[{label!r}] must be a (Scheduler or None, Disaggregation or None) pair")
    rules.bounded_work(len(rates) * len(engines), argument="rates x engines", limit=MAX_SWEEP_RUNS, unit="runs")
    rows = []
    for label, (sch, dis) in engines.items():
        for rate in rates:
            res = simulate(deployment, replace(workload, rate=rate), scheduler=sch, disaggregation=dis)
            rows.append({"label": label, "rate": rate, **res.row(), "result": res})
    return rows


__all__ = [
    "DEFAULT_DRAIN",
    "DEFAULT_WARMUP",
    "LINKS",
    "MAX_BLOCKS",
    "MAX_REPLICAS",
    "PREFIX_BALANCE",
    "ROUTERS",
    "MAX_STEPS",
    "MAX_SWEEP_RUNS",
    "Disaggregation",
    "Scheduler",
    "SimResult",
    "Speculation",
    "default_engines",
    "simulate",
    "sweep",
]
