"""The expected time of one training step: the roofline's parts at the rates real programs reach (Chapter 6).

:func:`~tpu_notes.training.step_time` prices a step twice. Its roofline (``StepTime.total``) is the chapter's upper
bound. Its ``StepTime.expected`` (an :class:`ExpectedStep`, built here) prices the same layout with the
:mod:`tpu_notes.efficiency` model, per chip:

- **matmuls**: the weight matmuls' hardware FLOPs at the large-matmul fraction times the FLOP-weighted shape factor
  of this layout's matmuls (tokens per microbatch and shard × the tensor-sharded widths) from the GEMM tile model
  (:func:`tpu_notes.gemm.shape_factor`: tile padding, waves over the cores, a fixed cost per call and the operands'
  bytes, checked against published GEMM sweeps), so a smaller microbatch pays for its smaller matmuls; an FP8 run
  does its layer matmuls at the FP8 peak times the GEMM model's FP8 plateau
  (``gemm.DEFAULT.plateau_of(chip, "fp8")``, MAMF's FP8 best: 0.709 of the H100's FP8 peak where bf16 reaches
  0.803), i.e. its bf16 pricing times
  ``bf16 plateau / FP8 plateau`` (1 on a chip without an FP8 sweep), and keeps the unembedding and attention in
  bf16;
- **attention**: the score and value matmuls at the flash-attention fraction of bf16 peak (a materialised kernel at
  the matmul fraction, with its score matrix in the memory-bound bytes);
- **memory-bound work**: :func:`~tpu_notes.efficiency.layer_elementwise_bytes` of every layer on this chip, three
  passes (forward, twice for backward) plus one per recomputed forward, the softmax over the vocabulary and one Adam
  update of this chip's parameter shard, at the achieved HBM rate; activations are taken as sharded over the tensor
  axis (sequence parallelism, as Megatron-Core and MaxText do); an FP8 run under a framework that scales tensorwise
  in passes of its own (torchtitan's float8, ``Framework.fp8_scaling``) adds that traffic
  (:func:`~tpu_notes.efficiency.fp8_scaling_bytes` per token and layer, and
  :data:`~tpu_notes.efficiency.FP8_WEIGHT_BYTES_PER_PARAM` per parameter of this chip per microbatch);
- **compute** is their sum (or the weight reads at the achieved HBM rate, if longer), since they run one after
  another on one chip;
- **communication**: each kind's roofline collective time at the achieved fraction of its link (ICI or DCN on a
  TPU; NVLink, or InfiniBand when a group spans nodes, on a GPU; PCIe for the host offload of
  ``remat="offload_layer_input"``, kind ``"host"``, exposed fraction ``HOST_EXPOSED``), plus the per-call
  latency for every call the step makes. The model's ``exposed`` fraction of it is on the critical path; FSDP
  adds the first gather and last reduce-scatter of each microbatch and data/DCN gradients the last layer's bucket;
  the rest hides under compute as far as compute lasts;
- **bubble** ``compute × (P − 1) / (v·M)`` and the per-step overhead;
- **stragglers**: slices joined over DCN synchronise every step (the gradient all-reduce), so the step lasts as
  long as the slowest slice's. With each slice's step jittering by ``slice_jitter`` (a coefficient of
  variation), ``n`` slices add ``slice_jitter × E[max of n standard normals]`` of the step
  (:func:`~tpu_notes.efficiency.expected_max_normal`): 0.56σ for 2 slices, 2.07σ for 32. The bandwidth of the
  cross-slice all-reduce barely changes with ``n`` (a ring moves ``2(n-1)/n`` of the shard), which is why
  measured multi-slice tables still lose throughput per chip as slices are added.

The MFU it implies is the model FLOPs over (expected step × peak): a forecast, where the roofline's MFU is a bound.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated

from .. import efficiency as eff_mod
from .. import gemm as gemm_mod
from ..efficiency import ATTENTION_KERNELS, EfficiencyModel
from ..transformer import ALL_REMAT_POLICIES
from ..units import DTypeName, NonNegativeFloat, OneOf, PositiveInt, SeqLen, checked, fmt
from .memory import _chip_params, _stage_layers


def _bracketed_times(times: Mapping[str, float]) -> str:
    """``" [kind=time, ...]"`` for the non-zero times of a step's collectives (the reprs of :class:`ExpectedStep`
    and :class:`~tpu_notes.training.step.StepTime`); ``""`` when there are none."""
    parts = ", ".join(f"{k}={fmt(v, 's')}" for k, v in times.items() if v)
    return f" [{parts}]" if parts else ""


@dataclass(frozen=True)
class ExpectedStep:
    """One training step on one chip at the efficiency model's rates, in seconds (see the module docstring)."""

    matmul: float  # weight matmuls at the achieved, shape-dependent rate, seconds
    attention: float  # attention score/value matmuls, seconds
    memory_bound: float  # norms, activations, casts, softmax, optimizer: bytes / achieved HBM rate, seconds
    compute: float  # matmul + attention + memory_bound (or the weight reads, if longer), seconds
    collectives: Mapping[str, float]  # each kind's communication at achieved bandwidth + latency, seconds
    exposed: float  # communication on the critical path (exposed parts + what compute cannot hide), seconds
    bubble: float  # pipeline idle time, seconds
    overhead: float  # the per-step fixed cost, seconds
    straggler: float  # the wait for the slowest of the slices over DCN (0 on one slice), seconds
    total: float  # the expected step, seconds
    bound: str  # the largest part: "matmul", "attention", "memory", or the kind whose communication is exposed most
    mfu: float  # model FLOPs / (total × peak): the expected MFU
    tokens_per_s_per_chip: float  # global batch tokens / total / chips
    efficiency: str  # the name of the EfficiencyModel used
    band: float = 0.0  # the out-of-sample error of the chip's family (efficiency.OUT_OF_SAMPLE_ERROR), a fraction

    @property
    def total_range(self) -> tuple[float, float]:
        """The expected step's band in seconds: ``total × (1 ∓ band)``, the spread held-out runs of the chip's
        family showed around the forecast (their median error; a layout can fall outside it)."""
        return self.total * (1.0 - self.band), self.total * (1.0 + self.band)

    @property
    def mfu_range(self) -> tuple[float, float]:
        """The expected MFU over :attr:`total_range`: ``mfu / (1 ± band)``, low first."""
        return self.mfu / (1.0 + self.band), self.mfu / (1.0 - self.band) if self.band < 1 else float("inf")

    def __repr__(self) -> str:
        band = f" ±{self.band:.0%}" if self.band else ""
        return (
            f"ExpectedStep(total={fmt(self.total, 's')}{band}, matmul={fmt(self.matmul, 's')}, "
            f"attention={fmt(self.attention, 's')}, memory_bound={fmt(self.memory_bound, 's')}, "
            f"exposed comms={fmt(self.exposed, 's')}{_bracketed_times(self.collectives)}, "
            f"bubble={fmt(self.bubble, 's')}, bound={self.bound!r}, mfu={self.mfu:.1%})"
        )


#: The exposed fraction of host-offload transfers (remat ``"offload_layer_input"``): 0, since XLA's host offload
#: issues them as asynchronous copies scheduled behind the neighbouring layers' compute (MaxText's offload
#: policies rely on this); what compute cannot hide still spills onto the step, as for every kind.
HOST_EXPOSED = 0.0


def _link(lay, kind: str) -> str:
    """The interconnect a kind's collectives cross: "dcn" for slices over DCN; "pcie" for host offload
    ("host"); on a GPU cluster "ib" when the group spans nodes, else "nvlink"; "ici" on a slice."""
    if kind == "dcn":
        return "dcn"
    if kind == "host":
        return "pcie"
    return lay.slice.link(lay.parts.get(kind, ()))


def _layer_shape_factor(m, p, tokens_mb: float, chip) -> float:
    """The FLOP-weighted (harmonic) shape factor of one layer's weight matmuls on one chip, and the unembedding."""
    return _shape_factor_cached(m, p.tensor, p.expert, float(tokens_mb), chip)


@functools.lru_cache(maxsize=16384)
def _shape_factor_cached(m, tp: int, ep: int, tokens_mb: float, chip) -> float:
    """:func:`_layer_shape_factor` by value (the planner prices the same shapes many times)."""
    D, N, K, H, t = m.d_model, m.n_heads, m.n_kv_heads, m.d_head, max(tokens_mb, 1.0)
    mats = [(t, D, (N + 2 * K) * H / tp), (t, N * H / tp, D)]
    if m.is_moe:
        Fe = m.d_ff_expert or m.d_ff
        te = max(t * m.experts_per_token * ep / m.n_experts, 1.0)  # tokens per local expert
        n_e = m.n_experts / ep
        mlp = [(te, D, Fe / tp)] * (2 if m.gated_mlp else 1) + [(te, Fe / tp, D)]
        mats += [x for x in mlp for _ in range(max(int(n_e), 1))]
    else:
        F = m.d_ff
        mats += [(t, D, F / tp)] * (2 if m.gated_mlp else 1) + [(t, F / tp, D)]
    mats.append((t, D, m.vocab / tp))
    flops = [a * b * c for a, b, c in mats]
    g = gemm_mod.DEFAULT
    time = sum(f / g.shape_factor(chip, max(a, 1.0), max(b, 1.0), max(c, 1.0)) for f, (a, b, c) in zip(flops, mats))
    return sum(flops) / time


@checked
def expected_step(
    m,
    p,
    lay,
    batch_tokens: PositiveInt,
    seq_len: SeqLen,
    *,
    remat: Annotated[str, OneOf(ALL_REMAT_POLICIES)],
    dtype: DTypeName,
    circular_repeats: PositiveInt,
    collectives: Mapping[str, float],
    calls: Mapping[str, float] | None = None,
    hbm_time: NonNegativeFloat,
    model_flops: NonNegativeFloat,
    attention: Annotated[str, OneOf(ATTENTION_KERNELS)],
    efficiency: EfficiencyModel | None,
) -> ExpectedStep:
    """:class:`ExpectedStep` of a layout :func:`~tpu_notes.training.step_time` has already priced: ``m`` its model
    config, ``p`` its Parallelism, ``lay`` its Layout, ``collectives`` its roofline seconds per kind, ``hbm_time``
    its weight-read seconds, ``calls`` how many collective calls of each kind the step makes (each pays the link's
    latency) and ``model_flops`` its model FLOPs per chip. Call
    :func:`~tpu_notes.training.step_time` rather than this."""
    e = eff_mod.check_efficiency(efficiency)
    if not isinstance(collectives, Mapping) or not all(
        isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < float("inf")
        for k, v in collectives.items()
    ):
        raise TypeError("collectives must map parallelism kinds to finite seconds >= 0 (StepTime.collectives)")
    if calls is not None and not isinstance(calls, Mapping):
        raise TypeError(f"calls must map parallelism kinds to call counts (or be None); got {type(calls).__name__}")
    return _expected_step(
        m,
        p,
        lay,
        batch_tokens,
        seq_len,
        remat=remat,
        dtype=dtype,
        circular_repeats=circular_repeats,
        collectives=collectives,
        calls=calls,
        hbm_time=hbm_time,
        model_flops=model_flops,
        attention=attention,
        efficiency=e,
    )


def _expected_step(
    m,
    p,
    lay,
    batch_tokens,
    seq_len,
    *,
    remat,
    dtype,
    circular_repeats,
    collectives,
    calls,
    hbm_time,
    model_flops,
    attention,
    efficiency,
    async_tensor=None,
    framework=None,
) -> ExpectedStep:
    """:func:`expected_step` for arguments already checked (``efficiency`` an EfficiencyModel)."""
    e = efficiency
    c = lay.slice.chip
    n = p.n_chips
    B, S, M, v_rep = batch_tokens, seq_len, p.microbatches, circular_repeats
    tokens_chip = B / p.token_shards  # tokens this chip's layers see per step (its batch shard's context chunk)
    tokens_mb = tokens_chip / M
    layers = _stage_layers(m, p.pipeline, v_rep)  # on the busiest stage
    imbalance = layers * p.pipeline / m.n_layers
    peak16 = c.peak_flops("bf16")
    recompute = remat != "none"  # every other policy recomputes the attention products and element-wise work

    large = e.large_matmul(c)
    sustain = e.sustained_fraction(c)
    at_peak, shape = _matmul_seconds(m, p, c, e, B, tokens_mb, remat, dtype, imbalance)
    matmul = at_peak / (large * shape * sustain)

    # attention: 3 passes (+1 forward when anything is recomputed)
    attn_flops = m.attention_flops(S, causal=True) * (3.0 + (1.0 if recompute else 0.0)) * B / n * imbalance
    if attention == "flash":
        attn = attn_flops / (peak16 * e.attention_fraction(c) * sustain)
    else:
        attn = attn_flops / (peak16 * large * sustain)

    tensorwise = framework is not None and framework.fp8_scaling == "tensorwise"
    memory = _memory_seconds(m, p, c, e, S, tokens_chip, layers, recompute, attention, dtype, tensorwise)
    compute = max(matmul + attn + memory, hbm_time / e.hbm)

    decomposed = c.kind in e.collective_matmul if async_tensor is None else async_tensor
    gathered_kv = framework is not None and framework.context_exchange == "all-gather"
    comm, exposed_parts, spill = _exposed_communication(
        lay, p, c, e, collectives, calls or {}, layers, compute, decomposed, gathered_kv
    )
    exposed = sum(exposed_parts.values()) + spill
    bubble = compute * (p.pipeline - 1) / (v_rep * M)
    # synchronous data parallelism over DCN waits every step for the slowest of its slices
    straggler = (compute + exposed + bubble) * e.slice_jitter * eff_mod._expected_max_normal(p.dcn)
    total = compute + exposed + bubble + straggler + e.step_overhead
    parts = {"matmul": matmul, "attention": attn, "memory": memory}
    if exposed_parts:
        worst = max(exposed_parts, key=exposed_parts.get)
        parts[worst] = exposed_parts[worst] + spill
    bound = max(parts, key=parts.get)
    return ExpectedStep(
        matmul=matmul,
        attention=attn,
        memory_bound=memory,
        compute=compute,
        collectives=comm,
        exposed=exposed,
        bubble=bubble,
        overhead=e.step_overhead,
        straggler=straggler,
        total=total,
        bound=bound,
        mfu=model_flops / (total * peak16) if math.isfinite(total) else 0.0,
        tokens_per_s_per_chip=B / total / n,
        efficiency=e.name,
        band=eff_mod.OUT_OF_SAMPLE_ERROR[c.kind],
    )


def _memory_seconds(m, p, c, e, S, tokens_chip, layers, recompute, attention, dtype, tensorwise) -> float:
    """Seconds of one chip's memory-bound work in a step: each layer's element-wise bytes per token over three
    passes (four with recomputation), the softmax over the vocabulary, one Adam update of the chip's shard and, for
    an FP8 run scaled tensorwise (torchao), its amax passes, backward casts, transposes and weight casts; all at the
    achieved HBM rate."""
    per_token_layer = eff_mod.layer_elementwise_bytes(m, S, attention=attention, fp8=dtype == "fp8")
    elem_passes = 3.0 + (1.0 if recompute else 0.0)
    elem = tokens_chip * layers * per_token_layer * elem_passes / p.tensor
    logits = tokens_chip * eff_mod.logits_bytes(m) / p.tensor
    opt = eff_mod.optimizer_bytes(sum(_chip_params(m, p)) / p.fsdp)
    scaling = 0.0
    if dtype == "fp8" and tensorwise:
        scaling = tokens_chip * layers * eff_mod.fp8_scaling_bytes(m) / p.tensor
        scaling += eff_mod.FP8_WEIGHT_BYTES_PER_PARAM * sum(_chip_params(m, p)) * p.microbatches
    return (elem + logits + opt + scaling) / (c.hbm_bw * e.hbm)


def _matmul_seconds(m, p, c, e, B, tokens_mb, remat, dtype, imbalance) -> tuple[float, float]:
    """One chip's matmul time of a step at peak (seconds: the layers' FLOPs, 3 passes plus the forward of the
    matmuls ``remat`` recomputes (all of them under full_block: +1), at the step's dtype; the unembedding's, 3
    passes, at bf16) and the layers' shape factor. An FP8 run's layer FLOPs are priced at the FP8 peak and scaled
    by the GEMM model's ``bf16 plateau / FP8 plateau`` (:mod:`tpu_notes.gemm`), so they run at the FP8 sweep's
    plateau, not the bf16 one; bf16 runs are untouched."""
    n = p.n_chips
    layer_params = m.matmul_params_per_token() - m.vocab * m.d_model
    passes = 3.0 + m.recomputed_matmul_params(remat) / layer_params
    layer_flops = 2.0 * layer_params * passes * B / n * imbalance
    unembed_flops = 2.0 * m.vocab * m.d_model * 3.0 * B / n
    shape = _layer_shape_factor(m, p, tokens_mb, c)
    layer_t = layer_flops / c.peak_flops(dtype)
    if dtype == "fp8":
        g = gemm_mod.DEFAULT
        layer_t *= g.plateau_of(c) / g.plateau_of(c, "fp8")
    return layer_t + unembed_flops / c.peak_flops("bf16"), shape


def _exposed_communication(
    lay, p, c, e, collectives: dict, calls: dict, layers: float, compute: float, decomposed: bool, gathered_kv: bool
):
    """Each collective kind at its achieved bandwidth plus per-call latency (seconds), the part of each left exposed
    after overlap, and the hidden part that spills past ``compute`` (seconds): ``(comm, exposed_parts, spill)``.

    When the tensor-parallel matmuls are ``decomposed`` into collective matmuls (by default on the families of
    ``e.collective_matmul``; torchtitan's async TP on a GPU), each collective is cut into ``tensor`` chunks
    overlapped with the partial matmuls, and the first chunk waits: ``1 / tensor`` of the tensor traffic stays
    exposed; otherwise the model's ``exposed["tensor"]`` (all of it: the next matmul waits for it). Context
    parallelism whose framework all-gathers the keys and values before attention (``gathered_kv``: MaxText) is
    all exposed: the gather waits for this layer's key/value projections and attention waits for the gather; a
    ring of passes (Megatron, torchtitan) takes the model's ``exposed["context"]``."""
    comm, exposed_parts = {}, {}
    hidden = 0.0
    for kind, t in collectives.items():
        if not t:
            continue
        link = _link(lay, kind)
        te = t / e.link(link) + calls.get(kind, 1) * e.latency(link)
        f = HOST_EXPOSED if kind == "host" else e.exposed_fraction(kind, c)
        if kind == "tensor" and decomposed:
            f = 1.0 / p.tensor
        elif kind == "context" and gathered_kv:
            f = 1.0
        elif kind == "fsdp":
            f = max(f, 2.0 / (3.0 * layers))
        elif kind in ("data", "dcn"):
            f = max(f, 1.0 / layers)
        comm[kind] = te
        exposed_parts[kind] = f * te
        hidden += (1.0 - f) * te
    return comm, exposed_parts, max(0.0, hidden - compute)


__all__ = ["ExpectedStep", "expected_step"]
