"""Long-context decode arithmetic (Chapter 7): what a generation step reads and moves when the KV cache, not the
weights, is the bulk of memory.

- :func:`~tpu_notes.inference.formulas.decode_attention` (defined below the engine, which prices MLA with it, and
  re-exported here): the FLOPs and bytes of one decode step's attention over ``seq_len`` cached tokens, for
  grouped-query attention and for multi-head latent attention (MLA, DeepSeek-V2/V3) in the absorbed form its decode
  kernels run: one latent of ``kv_lora_rank`` plus a shared rotary key of ``qk_rope_head_dim`` per token and layer
  (arXiv 2405.04434 §2.1; DeepSeek-V3: arXiv 2412.19437 and huggingface.co/deepseek-ai/DeepSeek-V3 config.json).
- :func:`cross_layer_kv`: cross-layer attention (CLA; Brandon et al. 2024, arXiv 2405.12981): groups of ``share``
  adjacent layers use the keys and values of the group's first layer, so only ``ceil(L / share)`` layers cache
  anything (and the others drop their key and value projections). It divides the KV bytes per token by about
  ``share`` and multiplies the batch the memory holds.
- :func:`sequence_sharded_decode`: the KV cache of one very long sequence split over the chips along its sequence.
  Each chip runs attention for every head over its own slice of the keys and values, giving a partial output and
  the two softmax statistics (running maximum and sum of exponentials, the log-sum-exp trick of flash attention);
  two small AllReduces per layer combine them exactly (the maximum, then the rescaled outputs and sums). Each chip
  reads ``1/n`` of the cache; the price is ``2·L`` latency-bound collectives per step.
- :func:`chunked_prefill`: a prompt cut into chunks that ride in the steps of the sequences being decoded, priced
  by the serving engine (``Deployment.step`` with ``prefill_tokens`` beside the decode
  rows): how long each such step takes and how long the prompt waits for its first token, by chunk size.

All times are roofline times at the chip's datasheet rates (as :func:`~tpu_notes.inference.decode_step_time`);
the collectives are the system's own (:func:`~tpu_notes.inference.engine.system_for`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from .. import rules
from ..transformer import Model
from ..units import DType, OneOf, Positive, Range, checked, dtype_bytes
from .engine import MAX_ROWS, Deployment, _decode_point, system_for
from .formulas import (  # noqa: F401  (DecodeAttention, decode_attention: re-exported, Chapter 7 imports them here)
    MAX_BATCH,
    Batch,
    Chips,
    Context,
    DecodeAttention,
    StorageDType,
    _kv_pool_tokens,
    _with_memory,
    decode_attention,
    machine,
    weight_params_read,
)
from .sharding import kv_sharding
from .step import DecodeStepTime, step_time_from_counts

#: Most layers one cross-layer KV group may span.
MAX_SHARE = 64
_Share = Annotated[int, Positive(integer=True, maximum=MAX_SHARE)]
_Reserve = Annotated[float, Range(0.0, 0.99)]
_PartialDType = Annotated[str, DType(), OneOf(("fp32", "bf16"))]


# ----------------------------------------------------------------------------------------- cross-layer KV
@dataclass(frozen=True)
class SharedKV:
    """A model whose layers share KV caches in groups of ``share`` (cross-layer attention), served on a slice."""

    share: int  # adjacent layers per KV group (1: no sharing)
    layers_with_kv: int  # ceil(L / share): layers that compute and cache keys and values
    kv_bytes_per_token: float  # bytes of cache per token of context, all layers
    weight_bytes: float  # all weights, the dropped K/V projections left out, bytes
    max_batch: int  # most sequences of seq_len tokens whose caches fit beside the weights (0: not one)
    step: DecodeStepTime  # a generation step at `batch` (default: max_batch, or 1 when not one fits)


def _kv_projection_params(m) -> int:
    """Weights of one layer that only produce keys and values (what a layer reusing another's cache drops)."""
    if m.is_mla:
        return m.d_model * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank * m.n_heads * (
            m.qk_nope_head_dim + m.v_head_dim
        )
    return 2 * m.d_model * m.n_kv_heads * m.d_head


@checked
def cross_layer_kv(
    model: Model,
    chip,
    n_chips: Chips,
    seq_len: Context,
    *,
    share: _Share = 2,
    batch: Batch | None = None,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    reserve_fraction: _Reserve = 0.0,
) -> SharedKV:
    """``model`` with cross-layer KV sharing in groups of ``share`` layers on ``n_chips`` (:class:`SharedKV`).

    KV bytes per token: ``kv · ceil(L/share) / L``; the layers that reuse a cache drop their key and value
    projections (weights and FLOPs). The batch held is ``floor((n · HBM · (1 − reserve) − weights) / (seq_len ·
    kv))`` as in :func:`~tpu_notes.inference.max_batch`; ``step`` is the roofline generation step at ``batch``.
    """
    m, S, n = model, seq_len, n_chips
    if share > m.n_layers:
        raise ValueError(f"share={share} exceeds the model's {m.n_layers} layers")
    groups = math.ceil(m.n_layers / share)
    dropped = (m.n_layers - groups) * _kv_projection_params(m)
    kv_tok = m.kv_bytes_per_token(kv_dtype) * groups / m.n_layers
    wb = dtype_bytes(weight_dtype)
    weights = (m.param_count() - dropped) * wb
    pool = _kv_pool_tokens(n * _with_memory(chip).hbm_bytes, reserve_fraction, weights, kv_tok)
    most = int(min(pool // S, MAX_BATCH))
    B = batch if batch is not None else max(most, 1)
    step = step_time_from_counts(
        (weight_params_read(m, B) - dropped) * wb,
        B * S * kv_tok,
        2.0 * B * (m.matmul_params_per_token() - dropped),
        chip,
        n,
        B,
        S,
        resident_bytes=weights + B * S * kv_tok,
    )
    return SharedKV(
        share=share,
        layers_with_kv=groups,
        kv_bytes_per_token=kv_tok,
        weight_bytes=weights,
        max_batch=most,
        step=step,
    )


# ------------------------------------------------------------------------------------- sequence-sharded KV
@dataclass(frozen=True)
class SequenceShardedDecode:
    """One generation step with the KV cache split over ``n_chips`` along the sequence, weights split ``n`` ways."""

    n_chips: int  # chips sharing the cache (and the weights)
    batch: int  # sequences
    seq_len: int  # tokens of context per sequence
    kv_bytes: float  # the whole cache, bytes
    kv_bytes_per_chip: float  # kv_bytes / n_chips: each chip's slice of the sequence, all heads
    kv_bytes_per_chip_heads_only: float  # the same cache sharded over KV heads alone (at most K ways; MLA: 1)
    weight_bytes_per_chip: float  # bytes
    fits: bool  # weights + slice fit one chip's HBM
    kv_load: float  # reading the chip's slice, seconds
    weight_load: float  # reading the chip's weights, seconds
    flops_time: float  # the weight matmuls, seconds
    combine_bytes: float  # what one chip contributes to one layer's combine (max, then outputs + sums), bytes
    combine: float  # the 2·L AllReduces of every step, seconds (latency-bound at small batches)
    total: float  # kv_load + max(weight_load, flops_time) + combine, seconds


@checked
def sequence_sharded_decode(
    model: Model,
    chip,
    n_chips: Chips,
    seq_len: Context,
    *,
    batch: Batch = 1,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    partial_dtype: _PartialDType = "fp32",
) -> SequenceShardedDecode:
    """A generation step whose KV cache is split over ``n_chips`` along the sequence (:class:`SequenceShardedDecode`).

    Each chip attends, for every query head, over its ``seq_len / n`` tokens and keeps a partial output
    ``[B, N, H_v]`` with its maximum score and sum of exponentials ``[B, N]``. The exact softmax over the whole
    sequence is rebuilt with two AllReduces per layer: the maxima (``B·N`` values, a max-reduction), then the
    outputs and sums rescaled by ``exp(m_i − m)`` (``B·N·(H_v + 1)`` values), in ``partial_dtype``. The step is
    ``kv_load + max(weight_load, flops) + combine``; the tensor-parallel collectives of the weight matmuls
    (Chapter 7's sharding section) come on top and are the same with or without sequence sharding.
    """
    m, S, n, B = model, seq_len, n_chips, batch
    c = machine(chip)
    kv = B * S * m.kv_bytes_per_token(kv_dtype)
    heads = 1 if m.is_mla else kv_sharding(m, n).heads
    w = m.param_count() * dtype_bytes(weight_dtype)
    read = weight_params_read(m, B) * dtype_bytes(weight_dtype)
    pb = dtype_bytes(partial_dtype)
    N, Hv = m.n_heads, m.v_dim
    small, big = B * N * pb, B * N * (Hv + 1) * pb
    if n > 1:
        system = system_for(chip, n)
        combine = m.n_layers * (
            system.collective_time("all_reduce", small).total + system.collective_time("all_reduce", big).total
        )
    else:
        combine = 0.0
    kv_t, w_t = kv / (n * c.hbm_bw), read / (n * c.hbm_bw)
    f_t = 2.0 * B * m.matmul_params_per_token() / (n * c.peak_flops)
    return SequenceShardedDecode(
        n_chips=n,
        batch=B,
        seq_len=S,
        kv_bytes=kv,
        kv_bytes_per_chip=kv / n,
        kv_bytes_per_chip_heads_only=kv / heads,
        weight_bytes_per_chip=w / n,
        fits=(w + kv) / n <= c.hbm_bytes,
        kv_load=kv_t,
        weight_load=w_t,
        flops_time=f_t,
        combine_bytes=small + big,
        combine=combine,
        total=kv_t + max(w_t, f_t) + combine,
    )


# ------------------------------------------------------------------------------------------ chunked prefill
#: Most steps :func:`chunked_prefill` walks through (prompt_len / chunk).
MAX_CHUNK_STEPS = 2**16


@dataclass(frozen=True)
class ChunkedPrefill:
    """One prompt prefilled in chunks of ``chunk`` tokens, each chunk riding in a step with ``decode`` sequences."""

    chunk: int  # prompt tokens per step
    n_steps: int  # ceil(prompt_len / chunk): steps that carry a chunk
    decode_step: float  # the step with no chunk in it, seconds
    mean_step: float  # mean of the steps that carry a chunk (the decoding sequences' time per token then), seconds
    max_step: float  # the slowest of them (the last chunk, which attends over the longest prefix), seconds
    prompt_time: float  # sum of those steps: the prompt's time to its first token with no queueing, seconds


@checked
def chunked_prefill(deployment, decode: Batch, context: Context, prompt_len: Context, chunk: Context):
    """Price chunked prefill on ``deployment`` (a :class:`~tpu_notes.inference.Deployment`), as a
    :class:`ChunkedPrefill`: ``decode`` sequences of ``context`` tokens keep decoding while a ``prompt_len``-token
    prompt goes in ``chunk`` tokens per step. Chunk ``k`` (prefix ``p = k·chunk``) adds ``c`` rows attending over
    ``c·p + c(c+1)/2`` (query, key) pairs and reads ``p`` cached tokens. The decoding contexts are held at
    ``context`` (they grow by ``n_steps`` tokens meanwhile, a small change). Refuses, naming them, a ``decode`` and
    ``context`` or a ``chunk`` larger than one engine step holds, and more than :data:`MAX_CHUNK_STEPS` chunks."""
    if not isinstance(deployment, Deployment):
        raise TypeError(
            f"deployment must be a Deployment (tpu_notes.inference.deploy(...)); got {type(deployment).__name__}"
        )
    n_steps = rules.bounded_work(
        math.ceil(prompt_len / chunk), argument="prompt_len / chunk", limit=MAX_CHUNK_STEPS, unit="steps"
    )
    _decode_point(decode, context, batch_arg="decode", seq_arg="context")
    rows = decode + min(chunk, prompt_len)
    if rows > MAX_ROWS:
        raise ValueError(
            f"decode + chunk ({decode:,} + {min(chunk, prompt_len):,}) must be at most {MAX_ROWS:,} rows in one engine "
            "step (MAX_ROWS): lower chunk or decode"
        )
    kv = decode * context
    times = []
    for k in range(n_steps):
        p = k * chunk
        c = min(chunk, prompt_len - p)
        times.append(deployment.step(decode, kv, c, c * p + c * (c + 1) / 2.0, p).total)
    return ChunkedPrefill(
        chunk=chunk,
        n_steps=n_steps,
        decode_step=deployment.step(decode, kv).total,
        mean_step=sum(times) / n_steps,
        max_step=max(times),
        prompt_time=sum(times),
    )


__all__ = [
    "MAX_CHUNK_STEPS",
    "ChunkedPrefill",
    "chunked_prefill",
    "MAX_SHARE",
    "SequenceShardedDecode",
    "SharedKV",
    "cross_layer_kv",
    "sequence_sharded_decode",
]
