"""Context parallelism: splitting each sequence over chips, and what the split costs (Chapter 5).

With ``context = CP`` ranks, each holds ``S / CP`` tokens of every sequence. Everything in a layer is local to a
token except attention, where a query needs the keys and values of every earlier token. Each rank therefore
obtains, in every attention layer, the keys and values of the whole sequence for the KV heads it holds:
``S × 2 × K_held × H × b`` bytes, with ``K_held = n_kv_heads / min(tensor, n_kv_heads)`` (tensor ranks split the
KV heads while there are enough of them, and replicate them beyond). Its own queries are only
``S / CP × N_held × H × b`` bytes, ``N_held = n_heads / tensor``. With grouped-query attention ``K ≪ N``, so the
keys and values to move are small beside the activations the rank already holds: :func:`kv_exchange`.

Two ways to move them (:func:`exchange_time`):

- **all-gather**: gather the K/V of the whole sequence over the context ranks, then run attention locally.
  MaxText on TPU and Llama 3's own training (A. Grattafiori et al., "The Llama 3 Herd of Models", arXiv
  2407.21783, §3.3.2) do this; the gather is exposed, but with GQA it is small beside attention at long context.
  It is priced with the system's own collective formulas, on the axes :func:`~tpu_notes.training.map_to_slice`
  gives the context ranks (the same call :func:`~tpu_notes.training.step_time` makes).
- **ring**: ``CP − 1`` point-to-point passes of one chunk's K/V to the next rank, each overlapped with the
  attention of the queries against the chunk received before (ring attention: H. Liu, M. Zaharia, P. Abbeel,
  arXiv 2310.01889; Megatron-Core / TransformerEngine's context parallelism). A pass hides when it is shorter
  than one chunk's attention. The pass grows as ``S`` and the chunk's attention as ``S²``, so past a break-even
  sequence length the ring's exchange is free.

With a causal mask the rank holding the last chunk of the sequence attends to the most keys. Cutting the sequence
into ``2·CP`` chunks and giving rank ``i`` chunks ``i`` and ``2CP − 1 − i`` (the "zig-zag" split Llama 3 and
Megatron-Core use) balances the work exactly: :func:`causal_balance`.

:func:`context_or_tensor` prices, with :func:`~tpu_notes.training.step_time`, whether a factor of chips is better
spent on more tensor parallelism or on context parallelism. ``LLAMA3_405B_LONG_CONTEXT`` (in
:mod:`tpu_notes.training.published`) is the worked case: Llama 3 405B's 131,072-token stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from .. import rules
from ..gpu import GpuCluster
from ..system import check_system
from ..transformer import as_config
from ..units import DTypeName, OneOf, Positive, PositiveInt, SeqLen, checked, dtype_bytes, fmt
from .parallelism import Parallelism
from .step import StepTime, map_to_slice, step_time

__all__ = [
    "EXCHANGE_FORMS",
    "MAX_CONTEXT",
    "CausalBalance",
    "ContextOrTensor",
    "ExchangeTime",
    "KVExchange",
    "causal_balance",
    "context_or_tensor",
    "exchange_time",
    "kv_exchange",
]

#: The two ways of moving keys and values between context ranks (see the module docstring).
EXCHANGE_FORMS = ("all-gather", "ring")
#: The largest context degree these functions take (one entry per rank is built for the load balance).
MAX_CONTEXT = 2**16
ContextDegree = Annotated[int, Positive(integer=True, maximum=MAX_CONTEXT)]


def _check_model(model):
    m = as_config(model)
    if m.is_mla:
        raise ValueError(
            f"model: {m.name} uses multi-head latent attention, whose cached latent is not split into KV heads; "
            "this module prices grouped-query (or multi-head) attention only"
        )
    return m


def _heads_held(m, tensor: int) -> tuple[float, float]:
    rules.whole_heads(m, tensor, d_ff=False)
    return m.n_kv_heads / min(tensor, m.n_kv_heads), m.n_heads / tensor


@dataclass(frozen=True)
class KVExchange:
    """The keys and values one context-parallel rank must obtain in one attention layer, beside its own queries
    (one sequence, bytes)."""

    seq_len: int  # tokens of the whole sequence
    context: int  # context-parallel degree (chunks of the sequence)
    tensor: int  # tensor-parallel degree (splits the heads)
    kv_heads_held: float  # KV heads on one tensor rank: n_kv_heads / min(tensor, n_kv_heads)
    query_heads_held: float  # query heads on one tensor rank: n_heads / tensor
    kv_bytes: float  # K and V of the whole sequence for the heads held: S × 2 × K_held × H × b, bytes
    received_bytes: float  # the part of them other ranks hold: kv_bytes × (CP − 1) / CP, bytes
    query_bytes: float  # this rank's own queries: S / CP × N_held × H × b, bytes
    kv_to_query: float  # received_bytes / query_bytes
    mha_kv_bytes: float  # kv_bytes if every query head had its own KV head (multi-head attention), bytes
    gqa_saving: float  # mha_kv_bytes / kv_bytes: how much less grouped-query attention moves

    def __repr__(self) -> str:
        return (
            f"KVExchange(S={self.seq_len:,}, CP={self.context}, TP={self.tensor}: receives "
            f"{fmt(self.received_bytes, 'B')} of K/V per layer against {fmt(self.query_bytes, 'B')} of its queries "
            f"({self.kv_to_query:.3g}x); multi-head attention would move {self.gqa_saving:.3g}x as much)"
        )


@checked
def kv_exchange(
    model, seq_len: SeqLen, context: ContextDegree, *, tensor: PositiveInt = 1, dtype: DTypeName = "bf16"
) -> KVExchange:
    """Bytes of keys and values a context-parallel rank of ``model`` obtains per attention layer for one sequence of
    ``seq_len`` tokens split over ``context`` ranks, with ``tensor``-way tensor parallelism, in ``dtype``; beside
    its own queries and beside multi-head attention (see the module docstring). ``seq_len`` must divide into
    ``context`` equal chunks and ``tensor`` must split the heads whole."""
    m = _check_model(model)
    rules.context_degree(seq_len, context)
    k_held, n_held = _heads_held(m, tensor)
    b = dtype_bytes(dtype)
    H = m.d_head
    kv = seq_len * 2 * k_held * H * b
    received = kv * (context - 1) / context
    query = seq_len / context * n_held * H * b
    mha = seq_len * 2 * (m.n_heads / tensor) * H * b
    return KVExchange(
        seq_len=seq_len,
        context=context,
        tensor=tensor,
        kv_heads_held=k_held,
        query_heads_held=n_held,
        kv_bytes=kv,
        received_bytes=received,
        query_bytes=query,
        kv_to_query=received / query,
        mha_kv_bytes=mha,
        gqa_saving=mha / kv,
    )


def _place(context: int, tensor: int, rest: int, system):
    """The context group placed as :func:`~tpu_notes.training.map_to_slice` places it (tensor ranks first, then
    context), the other ``rest`` chips given to FSDP and data ranks in the first split the torus can take."""
    last = None
    for fsdp in (d for d in range(rest, 0, -1) if rest % d == 0):
        try:
            return map_to_slice(Parallelism(context=context, tensor=tensor, fsdp=fsdp, data=rest // fsdp), system)
        except ValueError as err:
            last = err
    raise ValueError(f"context ({context}) x tensor ({tensor}) cannot be placed on the system: {last}")


@dataclass(frozen=True)
class ExchangeTime:
    """One context-parallel rank's K/V exchange in one attention layer (forward pass, one sequence), beside the
    attention it accompanies, at peak FLOP/s (seconds)."""

    form: str  # "all-gather" or "ring"
    kv_bytes: float  # the gathered K/V of the whole sequence for the heads held, bytes
    comm_time: float  # the whole exchange: the gather, or the CP − 1 passes, seconds
    step_comm: float  # one unit of overlap: the gather (all-gather) or one chunk's pass (ring), seconds
    attention_time: float  # this rank's attention of the layer (its queries against every key), seconds
    step_attention: float  # what one unit of exchange can hide under: nothing (all-gather), one chunk's attention
    exposed_time: float  # exchange time not hidden under attention, seconds
    hidden: bool  # True when the exchange is fully hidden (ring passes no longer than a chunk's attention)
    break_even_seq_len: float  # tokens at which the exchange's bandwidth time equals the attention it accompanies

    def __repr__(self) -> str:
        return (
            f"ExchangeTime({self.form}: exchange {fmt(self.comm_time, 's')} ({fmt(self.kv_bytes, 'B')} gathered), "
            f"attention {fmt(self.attention_time, 's')}, exposed {fmt(self.exposed_time, 's')}, "
            f"hidden={self.hidden}, break-even at {self.break_even_seq_len:,.0f} tokens)"
        )


@checked
def exchange_time(
    model,
    system,
    seq_len: SeqLen,
    context: ContextDegree,
    *,
    tensor: PositiveInt = 1,
    form: Annotated[str, OneOf(EXCHANGE_FORMS)] = "all-gather",
    dtype: DTypeName = "bf16",
) -> ExchangeTime:
    """The K/V exchange of one attention layer (forward, one sequence of ``seq_len`` tokens) for a rank of a
    ``context``-way context-parallel group on ``system`` (a TPU ``Slice`` or a ``GpuCluster``), with ``tensor``
    tensor ranks placed first (:func:`~tpu_notes.training.map_to_slice` with the rest of the chips as data ranks):

    - ``form="all-gather"``: the gather of :func:`kv_exchange`'s ``kv_bytes`` over the context ranks, priced by
      the system's collective formulas, then the attention; the gather is exposed;
    - ``form="ring"``: ``CP − 1`` passes of ``kv_bytes / CP`` to the neighbouring rank (one ICI link one way on a
      TPU slice, NVLink or the NIC on a GPU cluster, plus one hop's latency), each overlapped with the attention of
      one chunk (the rank's attention / CP, balanced by the zig-zag split): the exposed time is
      ``(CP − 1) · max(0, pass − chunk attention)``.

    Attention runs at the chip's ``dtype`` peak on ``n_heads / tensor`` query heads, causal (half the keys on
    average). ``break_even_seq_len`` is the length at which the exchange's bandwidth time equals the attention it
    accompanies (the pass grows as ``S``, the attention as ``S²``)."""
    m = _check_model(model)
    sys_ = check_system(system)
    kv = kv_exchange(m, seq_len, context, tensor=tensor, dtype=dtype)
    n = sys_.n_devices
    if n % (context * tensor):
        raise ValueError(
            f"context ({context}) x tensor ({tensor}) must divide the system's {n:,} devices (the rest are data ranks)"
        )
    lay = _place(context, tensor, n // (context * tensor), sys_)
    c = sys_.chip
    hop = sys_.latency(sys_.axes[0])
    attn_flops = seq_len / context * m.attention_flops(seq_len, training=False, causal=True) / m.n_layers / tensor
    attn = attn_flops / c.peak_flops(dtype)
    if form == "all-gather":
        comm = lay.collective("context", "all-gather", kv.kv_bytes, hop) if context > 1 else 0.0
        bw = lay.collective("context", "all-gather", kv.kv_bytes, 0.0) if context > 1 else 0.0
        step_comm, step_attn, exposed = comm, 0.0, comm
        # bandwidth time ∝ S, attention ∝ S²: they are equal at S × bw / attention
        even = seq_len * bw / attn
    else:
        chunk = kv.kv_bytes / context
        if isinstance(sys_, GpuCluster):
            across = any(p.size > 1 for p in lay.parts["context"][1:])  # the group leaves its NVLink node
            bw = sys_.send_time(chunk, across_nodes=across, hop_latency=0.0)
            lat = sys_.send_time(0.0, across_nodes=across) if context > 1 else 0.0
        else:
            bw = chunk / c.bandwidth("ici_oneway")
            lat = c.hop_latency
        step_comm = (bw + lat) if context > 1 else 0.0
        step_attn = attn / context
        comm = (context - 1) * step_comm
        exposed = (context - 1) * max(0.0, step_comm - step_attn)
        even = seq_len * bw / step_attn
    return ExchangeTime(
        form=form,
        kv_bytes=kv.kv_bytes,
        comm_time=comm,
        step_comm=step_comm,
        attention_time=attn,
        step_attention=step_attn,
        exposed_time=exposed,
        hidden=exposed == 0.0,
        break_even_seq_len=even,
    )


@dataclass(frozen=True)
class CausalBalance:
    """Causal attention work per context rank, as a share of the whole (plain split vs zig-zag split)."""

    context: int  # context-parallel degree
    plain_work: tuple[float, ...]  # rank i holds chunk i of CP: its share of the attention work
    zigzag_work: tuple[float, ...]  # rank i holds chunks i and 2CP − 1 − i of 2CP: its share
    plain_ratio: float  # busiest rank over the mean, plain split (the step waits for the busiest)
    zigzag_ratio: float  # the same for the zig-zag split

    def __repr__(self) -> str:
        return (
            f"CausalBalance(CP={self.context}: busiest/mean {self.plain_ratio:.4g} plain, "
            f"{self.zigzag_ratio:.4g} zig-zag)"
        )


def _triangle(a: float, b: float, exact: bool) -> float:
    """Causal work of the queries at positions [a, b): each attends to the keys up to itself. Exactly (tokens):
    sum of (t + 1); as areas (continuous): (b² − a²) / 2."""
    return (b * (b + 1) - a * (a + 1)) / 2 if exact else (b * b - a * a) / 2


@checked
def causal_balance(context: ContextDegree, *, seq_len: SeqLen | None = None) -> CausalBalance:
    """Each context rank's share of causal attention work, and the busiest rank over the mean, for the plain split
    (rank ``i`` takes chunk ``i`` of ``CP``) and the zig-zag split (``2·CP`` chunks; rank ``i`` takes chunks ``i``
    and ``2CP − 1 − i``). Without ``seq_len`` the work is the area of the causal triangle over each chunk's rows
    (chunk ``j`` of ``n`` holds ``(2j + 1)/n²`` of the whole); with it, exact token counts (query ``t`` sees
    ``t + 1`` keys), and ``seq_len`` must split into ``2·CP`` equal chunks. Plain: busiest/mean
    ``= (2CP − 1)/CP``; zig-zag: 1."""
    exact = seq_len is not None
    if exact:
        rules.context_degree(seq_len, 2 * context, argument="context (2 x context zig-zag chunks)")
    S = float(seq_len) if exact else 1.0
    total = _triangle(0.0, S, exact)
    c1 = S / context
    plain = [_triangle(i * c1, (i + 1) * c1, exact) / total for i in range(context)]
    c2 = S / (2 * context)
    zig = [
        (_triangle(i * c2, (i + 1) * c2, exact) + _triangle((2 * context - 1 - i) * c2, (2 * context - i) * c2, exact))
        / total
        for i in range(context)
    ]
    mean = 1.0 / context
    return CausalBalance(
        context=context,
        plain_work=tuple(plain),
        zigzag_work=tuple(zig),
        plain_ratio=max(plain) / mean,
        zigzag_ratio=max(zig) / mean,
    )


@dataclass(frozen=True)
class ContextOrTensor:
    """The same chips spent two ways: ``factor`` more tensor ranks, or ``factor`` context ranks (step times from
    :func:`~tpu_notes.training.step_time`)."""

    more_tensor: Parallelism  # the base layout with tensor × factor
    more_context: Parallelism  # the base layout with context × factor
    tensor_step: StepTime  # one step of more_tensor
    context_step: StepTime  # one step of more_context
    tensor_comms: float  # tensor + context collectives of one step of more_tensor, seconds
    context_comms: float  # tensor + context collectives of one step of more_context, seconds
    winner: str  # "context" or "tensor": the shorter step (ties: "context", the cheaper exchange)

    def __repr__(self) -> str:
        return (
            f"ContextOrTensor({self.more_tensor.short()}: step {fmt(self.tensor_step.total, 's')}, TP+CP comms "
            f"{fmt(self.tensor_comms, 's')} | {self.more_context.short()}: step {fmt(self.context_step.total, 's')}, "
            f"TP+CP comms {fmt(self.context_comms, 's')} -> {self.winner})"
        )


@checked
def context_or_tensor(
    model,
    system,
    base: Parallelism,
    factor: PositiveInt,
    batch_tokens: PositiveInt,
    seq_len: SeqLen,
    *,
    take_from: Annotated[str, OneOf(("fsdp", "data"))] = "fsdp",
    remat: Annotated[str, OneOf(("none", "save_matmul_outputs", "full_block"))] = "full_block",
) -> ContextOrTensor:
    """Spend ``factor`` of the ``take_from`` degree of ``base`` (``"fsdp"`` or ``"data"``, which must be divisible
    by it) on ``factor`` times more tensor parallelism, or on ``factor``-way more context parallelism, and price
    one step of each with :func:`~tpu_notes.training.step_time` on ``system`` (same chips, batch and ``remat``).
    Per layer, more tensor ranks mean more AllGathers and ReduceScatters of ``[tokens, D]`` activations over a
    wider group; context ranks gather the K/V of the sequence instead, which grouped-query attention keeps small.
    Either layout may be refused by the model (tensor ranks must split the heads whole; chunks must be equal)."""
    check_system(system, "system")
    if not isinstance(base, Parallelism):
        raise TypeError(f"base must be a Parallelism; got {type(base).__name__}")
    if factor < 2:
        raise ValueError(f"factor must be at least 2 (the chips moved to tensor or context ranks); got {factor}")
    have = getattr(base, take_from)
    if have % factor:
        raise ValueError(f"factor ({factor}) must divide base.{take_from} ({have}): its chips are the ones moved")
    fields = {k: getattr(base, k) for k in ("data", "fsdp", "tensor", "pipeline", "expert", "microbatches", "dcn")}
    fields["context"] = base.context
    fields[take_from] = have // factor
    tp = Parallelism(**{**fields, "tensor": base.tensor * factor})
    cp = Parallelism(**{**fields, "context": base.context * factor})
    t_step = step_time(model, tp, system, batch_tokens, seq_len, remat=remat)
    c_step = step_time(model, cp, system, batch_tokens, seq_len, remat=remat)

    def tc(st: StepTime) -> float:
        return st.collectives.get("tensor", 0.0) + st.collectives.get("context", 0.0)

    return ContextOrTensor(
        more_tensor=tp,
        more_context=cp,
        tensor_step=t_step,
        context_step=c_step,
        tensor_comms=tc(t_step),
        context_comms=tc(c_step),
        winner="context" if c_step.total <= t_step.total else "tensor",
    )
