"""Memory of a training step per chip, and how a batch splits over chips (Chapter 5).

Four things live in HBM during training: the **parameters**, their **gradients**, the **optimizer state** (Adam
keeps two moments per parameter, usually in fp32, and sometimes an fp32 master copy of bf16 weights), and the
**activations** saved for the backward pass (the remat policy decides which). Sharding divides each by the
degrees that split it:

- parameters, gradients and optimizer state by ``fsdp × tensor × pipeline`` (expert weights also by ``expert``);
  the pure ``data`` axis replicates them unless a ZeRO stage shards them over it too (``zero=1``: optimizer
  state; ``2``: and gradients; ``3``: and parameters, i.e. FSDP);
- activations by the chips that split the tokens (``data × fsdp × expert × context``) and by ``tensor`` (the
  activations between blocks are sharded over the tensor axis, ``In[B, D_Y]``); a pipeline stage holds only its
  layers, but for every microbatch in flight (1F1B: ``min(stages, microbatches)``, times ``1 + (P − 1)/(P·v)`` with
  ``v`` interleaved groups per stage; GPipe: every microbatch); gradient accumulation (``microbatches > 1`` without a
  pipeline) holds one microbatch at a time.
- with more tensor ranks than KV heads, each KV head's projection is **replicated** on ``tensor / n_kv_heads``
  ranks, so a chip holds ``1 / n_kv_heads`` of ``wk`` and ``wv``, not ``1 / tensor``.

That sum is ``MemoryBreakdown.total``, the count Chapter 5 adds up. A compiled step needs more, and
:attr:`MemoryBreakdown.peak`, the modelled peak (what the planner checks against HBM), adds it:

- **gathered weights** (``gathered``): under FSDP each weight is all-gathered before use. Without remat XLA keeps
  every gathered copy alive until its backward pass (``tpu_notes.parallel.FINDINGS["fsdp-gathers-once"]``): a
  chip holds the whole of its stage's tensor-split weights. With remat, or when the framework reshards after the
  forward pass (PyTorch FSDP's default), each layer's weights are gathered again in the backward pass and dropped
  after use: two layers live (the one in use and the next, prefetched), or the unembedding if larger;
- the **largest transient** (``transient``): the logits of one microbatch over the vocabulary in fp32, which their
  gradient overwrites (``4 · tokens · V / tensor`` bytes; the vocabulary split over the tensor axis, as Megatron and
  MaxText do), or, with context parallelism, one layer's keys and values gathered over the whole sequence, whichever is
  larger; under ``remat="offload_layer_input"`` plus two layers' inputs staged in HBM on their way to or from the
  host (the one being recomputed and the next, prefetched).

Under ``remat="offload_layer_input"`` the layers' checkpoints live in host memory: ``activations`` is 0 and
``MemoryBreakdown.host`` holds what the host keeps for this chip (``D`` values per token and layer, sharded over
the tensor axis like the activations in HBM); :func:`~tpu_notes.training.step_time` prices moving them.

The modelled peak is a model, not a compilation: :mod:`tpu_notes.memory_oracle` sets it beside XLA's
``compiled.memory_analysis()`` of the Chapter 5 layouts and names what the model leaves out (its ``DEPARTURES``).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, fields
from numbers import Real
from typing import Annotated

from .. import rules
from ..hardware import get_chip
from ..transformer import ALL_REMAT_POLICIES, OFFLOAD_REMAT_POLICIES, as_config
from ..units import (
    DTYPE_BYTES,
    Bool,
    DTypeName,
    Fraction,
    Kind,
    OneOf,
    PositiveInt,
    Range,
    SeqLen,
    check_choice,
    check_positive,
    checked,
    fmt,
)
from .parallelism import Parallelism
from .precision import RECIPES

#: Optimizer moments kept per parameter.
OPTIMIZERS = {"adam": 2, "adamw": 2, "momentum": 1, "sgd": 0}
#: Remat policies by name: Chapter 4's three, the recipes' ``"save_qkv_proj"``, ``"save_dot_except_mlp"`` and
#: ``"offload_layer_input"`` (:data:`tpu_notes.transformer.ALL_REMAT_POLICIES`), and ``"mlp_outputs"`` (save the
#: outputs of the three big MLP matmuls, ``D + 2F`` values per token and layer). A number ``k`` instead means ``k``
#: D-sized checkpoints per layer.
REMAT = ALL_REMAT_POLICIES + ("mlp_outputs",)
#: What a framework shards over the context-parallel ranks too (see :func:`training_memory`).
OVER_CONTEXT = ("none", "optimizer", "all")
#: Pipeline schedules: GPipe keeps every microbatch's activations until its backward; 1F1B at most ``stages``.
SCHEDULES = ("1f1b", "gpipe")


@dataclass(frozen=True)
class _RematPolicy(Kind):
    """The kind of a ``remat`` argument: a policy name from :data:`REMAT` or a positive number of D-sized
    checkpoints per layer."""

    def check(self, name: str, value):
        if isinstance(value, str):
            return check_choice(name, value, REMAT)
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(
                f"{name} must be one of {list(REMAT)} or a number of D-sized checkpoints per layer; got {value!r}"
            )
        return check_positive(name, value)

    def describe(self) -> str:
        return f"one of {', '.join(repr(r) for r in REMAT)}, or D-sized checkpoints per layer > 0"

    def hostile(self) -> list:
        return ["sometimes", "", None, -1, 0, float("nan"), float("inf"), True, [3]]

    def example(self):
        return "full_block"


Remat = Annotated[str | float, _RematPolicy()]
Optimizer = Annotated[str, OneOf(tuple(OPTIMIZERS))]


def check_remat(remat) -> Remat:
    """A remat policy name from :data:`REMAT` or a positive number of D-sized checkpoints per layer."""
    return _RematPolicy().check("remat", remat)


@checked
def activation_values_per_token_layer(model, remat: Remat = "full_block") -> float:
    """Values saved in HBM per token and layer for the backward pass under ``remat`` (elements, not bytes; 0 under
    ``"offload_layer_input"``, whose checkpoint lives in host memory: :func:`offloaded_values_per_token_layer`)."""
    return _activation_values(as_config(model), remat)


@checked
def offloaded_values_per_token_layer(model, remat: Remat = "offload_layer_input") -> float:
    """Values per token and layer that ``remat`` keeps in host memory (elements): ``d_model`` under
    ``"offload_layer_input"``, else 0. Each crosses the chip's host link twice per step: written in the forward
    pass, read back in the backward pass."""
    return _offloaded_values(as_config(model), remat)


def _offloaded_values(m, remat) -> float:
    return float(m.d_model) if isinstance(remat, str) and remat in OFFLOAD_REMAT_POLICIES else 0.0


@functools.lru_cache(maxsize=1024)
def _activation_values(m, remat) -> float:
    if not isinstance(remat, str):
        return remat * m.d_model
    if remat == "mlp_outputs":
        F = m._avg_active_ff()
        return m.d_model + (2 if m.gated_mlp else 1) * F
    return float(sum(m.saved_activations(remat).values()))


@dataclass(frozen=True)
class MemoryBreakdown:
    """HBM used by one chip during a training step, in bytes."""

    params: float  # weights held by this chip
    grads: float  # gradients held by this chip
    optimizer: float  # optimizer moments (and fp32 master weights) held in HBM by this chip
    activations: float  # activations saved for the backward pass
    total: float  # sum of the above (Chapter 5's count)
    gathered: float = 0.0  # FSDP-gathered weight copies alive at once, beyond this chip's own shard
    transient: float = 0.0  # the largest short-lived buffer (logits or gathered K/V) + offload staging buffers
    host: float = 0.0  # activations offloaded to host memory (remat "offload_layer_input"); not in HBM

    @property
    def peak(self) -> float:
        """The modelled peak: bytes at the step's high-water mark, ``total + gathered + transient`` (a model of the
        compiled step; :mod:`tpu_notes.memory_oracle` compares it with XLA's own figures)."""
        return self.total + self.gathered + self.transient

    @checked
    def fits(self, chip, fraction: Fraction = 1.0) -> bool:
        """True when ``peak`` is at most ``fraction`` (in (0, 1]) of the chip's HBM."""
        return self.peak <= fraction * get_chip(chip).hbm_bytes

    def __repr__(self) -> str:
        return (
            "MemoryBreakdown("
            + ", ".join(
                f"{f.name}={fmt(getattr(self, f.name), 'B')}"
                for f in fields(self)
                if f.name != "host" or self.host  # host memory shown only when something is offloaded
            )
            + f", peak={fmt(self.peak, 'B')})"
        )


@functools.lru_cache(maxsize=1024)
def _param_counts(m) -> tuple[float, float]:
    """(non-expert parameters, routed-expert parameters) of a model."""
    expert = m.n_moe_layers * m.n_experts * m.expert_params() if m.is_moe else 0
    return float(m.param_count() - expert), float(expert)


@checked
def stage_layers(model, pipeline: PositiveInt, circular_repeats: PositiveInt = 1) -> float:
    """Layers on the busiest pipeline stage of ``model``: ``L / P`` when ``pipeline`` stages (``circular_repeats``
    groups each) split the ``L`` layers evenly, else ``ceil(L / (P·v))·v``: stages hold whole layers, and the one
    with most sets the pace (Llama 3 405B's 126 layers on 16 stages: 8 on the busiest)."""
    m = as_config(model)
    if pipeline * circular_repeats > m.n_layers:
        raise ValueError(
            f"pipeline ({pipeline}) x circular_repeats ({circular_repeats}) must be at most the {m.n_layers} layers"
        )
    return _stage_layers(m, pipeline, circular_repeats)


def _stage_layers(m, pipeline: int, circular_repeats: int = 1) -> float:
    P, v, L = pipeline, circular_repeats, m.n_layers
    if P == 1:
        return float(L)
    if L % (P * v) == 0:
        return L / P
    return float(math.ceil(L / (P * v)) * v)


def _kv_replication(m, tensor: int) -> int:
    """Tensor ranks that hold a copy of each KV head: ``tensor / n_kv_heads`` when the tensor degree exceeds the KV
    heads (a multiple of them), else 1. MLA models (no per-head K/V weights) return 1."""
    if m.is_mla or tensor <= m.n_kv_heads:
        return 1
    return tensor // m.n_kv_heads


def _chip_params(m, p: Parallelism) -> tuple[float, float]:
    """(non-expert, routed-expert) parameters one chip uses, split over ``tensor × pipeline`` (experts also over
    ``expert``) but not over ``fsdp``: the weights an FSDP group gathers. KV projections replicated over the tensor
    ranks (:func:`_kv_replication`) count once per copy."""
    dense, expert = _param_counts(m)
    imbalance = _stage_layers(m, p.pipeline) * p.pipeline / m.n_layers  # > 1 when the stages are uneven
    per = dense / (p.tensor * p.pipeline) * imbalance
    rep = _kv_replication(m, p.tensor)
    if rep > 1:
        kv = m.n_layers * 2 * m.d_model * m.n_kv_heads * m.d_head  # wk and wv
        per += kv * (rep - 1) / (p.tensor * p.pipeline)
    return per, expert / (p.tensor * p.pipeline * p.expert) * imbalance


def _weight_shards(p: Parallelism, over_context: str = "none") -> int:
    """Ranks each weight (and its gradient and optimizer state) is sharded over: ``fsdp``, times ``context`` when
    the framework shards the state over the context ranks too (``over_context="all"``: MaxText, torchtitan)."""
    return p.fsdp * (p.context if over_context == "all" else 1)


@checked
def optimizer_bytes_per_param(
    optimizer: Optimizer = "adam", moment_dtype: DTypeName = "fp32", master_weights: Bool = False
) -> float:
    """Bytes of optimizer state per parameter: moments × bytes (Adam in fp32: 8), +4 with an fp32 master copy."""
    return OPTIMIZERS[optimizer] * DTYPE_BYTES[moment_dtype] + (4.0 if master_weights else 0.0)


@checked
def training_memory(
    model,
    parallelism: Parallelism | None = None,
    batch_tokens: PositiveInt = 1,
    seq_len: SeqLen = 1,
    *,
    optimizer: Optimizer = "adam",
    param_dtype: DTypeName = "bf16",
    grad_dtype: DTypeName | None = None,
    moment_dtype: DTypeName = "fp32",
    master_weights: Bool = False,
    remat: Remat = "full_block",
    activation_dtype: DTypeName = "bf16",
    zero: Annotated[int, Range(0, 3, integer=True)] = 0,
    offload_optimizer: Bool = False,
    schedule: Annotated[str, OneOf(SCHEDULES)] = "1f1b",
    circular_repeats: PositiveInt = 1,
    reshard_after_forward: Bool = False,
    recipe: Annotated[str, OneOf(tuple(RECIPES))] | None = None,
    over_context: Annotated[str, OneOf(OVER_CONTEXT)] = "none",
    gather_once: Bool = False,
) -> MemoryBreakdown:
    """Bytes per chip of a training step of ``model`` laid out as ``parallelism`` (default: one chip).

    ``batch_tokens`` is the global batch in tokens (all slices), ``seq_len`` the sequence length. Adam with bf16
    parameters and fp32 moments costs ``2 + 8 = 10`` bytes per parameter before gradients (``grad_dtype`` defaults to
    ``param_dtype``); ``master_weights=True`` adds an fp32 copy (16 bytes with bf16 gradients). ``zero`` (0–3) is the
    ZeRO stage applied over the pure ``data`` axis. ``offload_optimizer`` keeps the optimizer state in host memory
    (it then costs PCIe time, not HBM). ``schedule`` is the pipeline schedule
    (:data:`~tpu_notes.training.memory.SCHEDULES`) and ``circular_repeats`` its interleaved layer groups per stage.
    ``total`` is Chapter 5's sum; ``peak`` adds the gathered FSDP weights and the largest transient (see the module
    docstring), the figure :func:`~tpu_notes.training.plan` checks against HBM. ``reshard_after_forward`` drops
    each gathered weight after its forward use even without remat (PyTorch FSDP's default); ``False`` is XLA's
    behaviour, which keeps them until the backward pass when nothing is rematerialised.

    ``recipe`` names a precision recipe of :mod:`tpu_notes.training.precision` (``"maxtext"``: 16 bytes per
    parameter; ``"megatron"``: 18, its master weights and moments sharded over ``data``...): it replaces
    ``param_dtype``, ``grad_dtype``, ``moment_dtype`` and ``master_weights`` (Adam), and its distributed optimizer
    raises ``zero`` to at least 1; gathered weight copies are then counted in bf16, the compute dtype.
    ``over_context`` is what the framework shards over the context ranks too: ``"none"``, ``"optimizer"`` (the
    distributed optimizer's state over ``data × context``: Megatron) or ``"all"`` (weights, gradients and optimizer
    state, as over ``fsdp``: MaxText, torchtitan). ``gather_once`` keeps the FSDP-gathered weights for the whole
    step, across microbatches and pipeline steps, with the gradients accumulated unsharded until one reduction
    (MaxText's ``pipeline_fsdp_ag_once``; Llama 3's FSDP without resharding after the forward pass).
    """
    m = as_config(model)
    p = Parallelism() if parallelism is None else parallelism
    if not isinstance(p, Parallelism):
        raise TypeError(f"parallelism must be a Parallelism; got {type(p).__name__}")
    rules.training_layout(m, p, batch_tokens, seq_len, circular_repeats)
    pb = DTYPE_BYTES[param_dtype]
    gb = pb if grad_dtype is None else DTYPE_BYTES[grad_dtype]
    ob = optimizer_bytes_per_param(optimizer, moment_dtype, master_weights)
    cb = pb
    if recipe is not None:
        r = RECIPES[recipe]
        pb, gb, cb = r.weights, r.grads, min(r.weights, DTYPE_BYTES["bf16"])
        ob = r.master + r.moments * OPTIMIZERS[optimizer] / OPTIMIZERS["adam"]  # moments as the optimizer keeps
        zero = max(zero, 1 if r.optimizer_over_data else 0)
    return _memory(
        m,
        p,
        batch_tokens,
        remat,
        pb=pb,
        gb=gb,
        ab=DTYPE_BYTES[activation_dtype],
        ob=ob,
        zero=zero,
        offload_optimizer=offload_optimizer,
        schedule=schedule,
        circular_repeats=circular_repeats,
        reshard=reshard_after_forward,
        over_context=over_context,
        gather_once=gather_once,
        cb=cb,
    )


def _memory(
    m,
    p,
    batch_tokens,
    remat,
    *,
    pb,
    gb,
    ab,
    ob,
    zero=0,
    offload_optimizer=False,
    schedule="1f1b",
    circular_repeats=1,
    reshard=False,
    over_context="none",
    gather_once=False,
    cb=None,
) -> MemoryBreakdown:
    """:func:`training_memory` for arguments already checked, with the bytes per parameter (``pb``), gradient
    (``gb``), activation value (``ab``) and optimizer state (``ob``) resolved (the planner's inner loop); ``cb``
    is the bytes per element of a gathered weight copy (the compute dtype; default ``pb``)."""
    cb = pb if cb is None else cb
    dense_chip, expert_chip = _chip_params(m, p)  # tensor/pipeline/expert split, before fsdp
    ws = _weight_shards(p, over_context)  # ranks each weight is sharded over
    per_chip = (dense_chip + expert_chip) / ws
    params = per_chip * pb / (p.data if zero >= 3 else 1)
    grads = per_chip * gb / (p.data if zero >= 2 else 1)
    opt_shards = (p.data * (p.context if over_context == "optimizer" else 1)) if zero >= 1 else 1
    optim = 0.0 if offload_optimizer else per_chip * ob / opt_shards

    per_token_layer = _activation_values(m, remat)
    tokens_per_mb = batch_tokens / (p.token_shards * p.microbatches)  # tokens one chip's layers see per microbatch
    P, v = p.pipeline, circular_repeats
    if P == 1:
        in_flight = 1.0
    elif schedule == "gpipe":
        in_flight = float(p.microbatches)
    else:
        in_flight = min(P, p.microbatches) * (1.0 + (P - 1) / (P * v) if v > 1 else 1.0)
    layers = _stage_layers(m, P, v)  # on the busiest stage
    acts = ab * per_token_layer * layers * tokens_per_mb * in_flight / p.tensor
    offloaded = _offloaded_values(m, remat)
    host = ab * offloaded * layers * tokens_per_mb * in_flight / p.tensor
    # offload staging: a layer's input on its way to the host (forward), and in the backward the one being
    # recomputed plus the next one prefetched from the host: two layers' checkpoints in HBM at once
    staging = 2.0 * ab * offloaded * tokens_per_mb / p.tensor

    # the modelled peak's extras: gathered FSDP weights and the largest transient
    gathered = 0.0
    unembed = m.vocab * m.d_model / p.tensor * cb
    if ws > 1:
        stage = (dense_chip + expert_chip) * cb
        if gather_once:  # kept for the whole step, and the gradients accumulated unsharded until one reduction
            gathered = (stage + (dense_chip + expert_chip) * gb * (p.microbatches > 1)) * (1.0 - 1.0 / ws)
        elif remat == "none" and not reshard:
            gathered = stage * (1.0 - 1.0 / ws)  # every gathered copy kept for the backward pass
        else:
            per_layer = (stage - 2.0 * unembed / P) / layers if layers else 0.0
            gathered = max(2.0 * max(per_layer, 0.0), unembed)
    logits = 4.0 * tokens_per_mb * m.vocab / p.tensor  # fp32 logits; their gradient overwrites them in place
    kv_gather = 0.0
    if p.context > 1 and not m.is_mla:
        kv_heads = m.n_kv_heads / min(p.tensor, m.n_kv_heads)
        kv_gather = tokens_per_mb * p.context * 2 * kv_heads * m.d_head * ab
    transient = max(logits, kv_gather) + staging
    return MemoryBreakdown(
        params=params,
        grads=grads,
        optimizer=optim,
        activations=acts,
        total=params + grads + optim + acts,
        gathered=gathered,
        transient=transient,
        host=host,
    )


@checked
def min_chips_for_memory(
    model,
    chip,
    batch_tokens: PositiveInt,
    seq_len: SeqLen,
    *,
    include_grads: Bool = True,
    fraction: Fraction = 1.0,
    **kwargs,
) -> int:
    """Fewest chips whose HBM holds a training step of ``model`` if everything is sharded evenly (memory alone).

    ``ceil(total bytes / (fraction × HBM per chip))`` where the total is :func:`training_memory` on one chip (same
    keyword arguments) and ``fraction`` is in (0, 1]. ``include_grads=False`` follows the scaling book's worked
    answers, which count parameters, optimizer state and checkpoints only.
    """
    c = get_chip(chip)
    f = fraction
    mem = training_memory(model, None, batch_tokens, seq_len, **kwargs)
    total = mem.total - (0.0 if include_grads else mem.grads)
    return max(1, math.ceil(total / (f * c.hbm_bytes)))


@dataclass(frozen=True)
class BatchSplit:
    """How a global batch of ``tokens`` splits over the chips of a layout (uneven splits allowed and reported)."""

    tokens: int  # global batch, tokens
    seq_len: int  # tokens per sequence
    sequences: int  # global batch, sequences
    batch_shards: int  # chips (groups) the batch is split over: data x fsdp x expert x dcn
    sequences_per_shard: float  # may be fractional: then a sequence is split over several shards
    tokens_per_shard: float  # tokens each batch shard processes
    tokens_per_chip: float  # tokens / all chips (the "B / N" of the mixed FSDP + TP roofline)
    sequence_split: int  # shards that share one sequence (1: whole sequences per shard)
    even: bool  # every shard gets the same number of whole sequences (or equal pieces)
    legal: str = ""  # "" when the layout can run this batch; else why not (tpu_notes.rules: shards, microbatches)

    def __str__(self) -> str:
        how = (
            "each shard holds whole sequences"
            if self.sequence_split == 1
            else f"each sequence is split over {self.sequence_split} shards (needs sequence sharding)"
        )
        return (
            f"{self.tokens:,} tokens = {self.sequences:,} sequences of {self.seq_len:,} over {self.batch_shards:,} "
            f"batch shards: {self.sequences_per_shard:g} sequences ({self.tokens_per_shard:,.0f} tokens) per "
            f"shard; {how}{'' if self.even else '; UNEVEN: some shards get one sequence more'}"
        )


@checked
def batch_split(batch_tokens: PositiveInt, seq_len: SeqLen, parallelism: Parallelism) -> BatchSplit:
    """Split ``batch_tokens`` (whole sequences of ``seq_len``) over the batch shards of ``parallelism``, reporting
    (not refusing) a split the layout cannot run: ``legal`` says why, in the words of :mod:`tpu_notes.rules`.

    Unlike the sharding notation of Chapter 3, this accepts splits that do not divide: 4M tokens of 4096-token
    sequences (1024 sequences) over 4096 chips is a quarter sequence per chip, which works only with sequence
    (context) sharding; 1000 sequences over 64 shards is uneven (some get 16, some 15).
    """
    if not isinstance(parallelism, Parallelism):
        raise TypeError(f"parallelism must be a Parallelism; got {type(parallelism).__name__}")
    if batch_tokens % seq_len:
        raise ValueError(
            f"batch_tokens ({batch_tokens:,}) must be a whole number of sequences of seq_len ({seq_len:,})"
        )
    seqs = batch_tokens // seq_len
    shards = parallelism.batch_shards
    if seqs >= shards:
        split, even = 1, seqs % shards == 0
    else:
        split, even = math.ceil(shards / seqs), shards % seqs == 0
    return BatchSplit(
        tokens=batch_tokens,
        seq_len=seq_len,
        sequences=seqs,
        batch_shards=shards,
        sequences_per_shard=seqs / shards,
        tokens_per_shard=batch_tokens / shards,
        tokens_per_chip=batch_tokens / parallelism.n_chips,
        sequence_split=split,
        even=even,
        legal=_why_not(seqs, shards, parallelism),
    )


def _why_not(sequences: int, shards: int, p: Parallelism) -> str:
    """Why the batch rules of :mod:`tpu_notes.rules` refuse this split ("" when they accept it)."""
    try:
        rules.batch_shards(sequences, shards, microbatches=p.microbatches, stages=p.pipeline)
    except rules.Illegal as err:
        return f"{err.kind}: {err.detail}"
    return ""
