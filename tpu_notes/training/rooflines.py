"""When each kind of parallelism stops paying: the per-layer rooflines of Chapter 5 (TPUs) and Chapter 11 (GPUs).

One implementation for both machines: every function takes a chip (a name or a
:class:`~tpu_notes.hardware.Chip`) or a :class:`~tpu_notes.system.System` (a TPU ``Slice`` or a ``GpuCluster``: its
chip is used), and the bandwidth ``W`` a strategy's collectives use is :func:`collective_bandwidth`: on a TPU the
bidirectional ICI bandwidth of one link (``W_ici``, times the number of mesh axes), on a GPU the scaling book's
``W_collective``, a GPU's NVLink egress inside a node or the node's scale-out egress across nodes.

The algebra runs on a simplified MLP block, ``Out[B, D] = In[B, D] ·_D W_in[D, F] ·_F W_out[F, D]`` in bf16, with
``B`` the tokens of the step, ``C`` the chip's peak FLOP/s and ``W`` as above (several TPU mesh axes multiply it by
their number ``M``). Its forward pass costs ``4BDF`` FLOPs and its backward ``8BDF``. Per layer and step (forward
+ backward), with ``X`` chips of data or FSDP parallelism and ``Y`` of tensor parallelism:

- **data**: compute ``12BDF / X``; communication ``8DF``, two AllReduces of the ``2DF``-byte weight gradients
  (backward);
- **fsdp**: compute ``12BDF / X``; communication ``12DF``: AllGather the weights (forward, and again in the
  backward), ReduceScatter the gradients, each ``4DF`` bytes' worth;
- **tensor**: compute ``12BDF / Y``; communication ``8BD``: AllGather the input and ReduceScatter the output,
  forward and backward;
- **fsdp+tensor**: compute ``12BDF / (XY)``; communication ``12DF / Y + 8BD / X`` bytes, the first over the FSDP
  axes and the second over the tensor axes. The two run on different links and overlap, so a pass lasts as long as
  the slower of the two (``combine="max"``, the default); ``combine="sum"`` adds them, as an older text did.

Comparing compute with communication gives the critical batches: data/FSDP are compute-bound iff ``B / X > C / W``
(``α = C / W_ici``: 2550 on v5p per mesh axis; ``C / W_collective``: 2200 inside an H100 node, 2475 across nodes);
tensor parallelism iff ``Y < M_Y · F W / C``, whatever the batch; mixed FSDP + tensor parallelism on a torus at its
best FSDP degree ``X = sqrt((B / F)(M_X / M_Y) N)`` iff ``B / N > α² / (M_X M_Y F)`` (``4α² / (M_X M_Y F)`` if the
two axes' times are added instead of overlapped, ``combine="sum"``); data parallelism across TPU slices over DCN iff
the tokens **per slice** exceed ``C / W_dcn``.

The GPU chapter's own rooflines (scaling book, ``gpus.md``) follow: :func:`two_node_tensor_parallelism_ok`,
:func:`expert_parallel_times`, :func:`pipeline_comms_time` and :func:`strategy_times` (each strategy priced on a
cluster's fat tree). Every per-layer result is one record, :class:`LayerTimes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

from ..gpu import GpuCluster
from ..hardware import Chip, get_chip
from ..system import System
from ..transformer import as_config
from ..units import Bool, DTypeName, OneOf, PositiveFloat, PositiveInt, checked, dtype_bytes, fmt

__all__ = [
    "COMBINES",
    "STRATEGIES",
    "LayerTimes",
    "collective_bandwidth",
    "critical_batch_per_chip",
    "critical_batch_per_gpu",
    "expert_parallel_times",
    "ici_intensity",
    "max_tensor_parallelism",
    "mlp_layer_times",
    "optimal_fsdp_degree",
    "pipeline_bubble_fraction",
    "pipeline_comms_time",
    "strategy_times",
    "two_node_tensor_parallelism_ok",
]

#: Strategies of the per-layer table (:func:`mlp_layer_times`).
STRATEGIES = ("data", "fsdp", "tensor", "fsdp+tensor")
#: Strategies of :func:`critical_batch_per_chip` ("dp" and "data" are the same; "fsdp+tp" and "dcn" are TPU-only).
_CRITICAL = ("dp", "data", "fsdp", "fsdp+tp", "fsdp+tensor", "dcn")

#: How mixed FSDP + tensor parallelism combines the time of its two kinds of collective within a pass: "max" (they
#: overlap on different mesh axes, so the pass waits for the slower; the scaling book's current text) or "sum" (they
#: run one after the other; the book's older text, whose thresholds come out 4x higher).
#: Source: jax-ml/scaling-book, training.md, section "Combining FSDP and Tensor Parallelism": at commit
#: 6f859b440efe108ac36867f252111af8e297f268 (2025-12-09; https://jax-ml.github.io/scaling-book/training/) it
#: assumes the X-axis and Y-axis collectives overlap fully, takes T_comms = max(T_FSDP, T_TP) and gets
#: B/N > α²/(M_X M_Y F) (about 99 for F = 32,768); the change came in 91e016f6d5a2ad2a80530743da2dad8e37087348
#: (2025-08-12, "Big update to the training overlap section"). The older text, at
#: 0819a7d8c55ddc113f5cba0285a5f97380cac1e3 (2025-02-18), adds the two and gets 4α²/(M_X M_Y F) (about 400).
#: Both texts give the same optimal FSDP degree (the sum and the max of an increasing and a decreasing term are
#: both smallest where the two are equal). Read from the upstream history carried by github.com/EeToSe/scaling-book.
COMBINES = ("max", "sum")
Combine = Annotated[Literal["max", "sum"], OneOf(COMBINES)]


def _chip_of(chip, argument: str = "chip") -> Chip:
    """The Chip of a chip name, a Chip, or a System (a Slice or a GpuCluster)."""
    if isinstance(chip, System):
        return chip.chip
    return get_chip(chip, argument)


def _tpu_only(c: Chip, what: str, **non_defaults) -> None:
    """Refuse GPU-only arguments on a TPU: each ``name=(value, default)`` must be at its default."""
    for name, (value, default) in non_defaults.items():
        if value != default and c.kind == "tpu":
            raise ValueError(f"{name} applies to GPUs ({what}); {c.long_name} is a TPU: leave {name}={default!r}")


@checked
def ici_intensity(chip, dtype: DTypeName = "bf16") -> float:
    """``α = C / W_ici``: peak FLOP/s over one link's bidirectional ICI bandwidth (2550 on v5p in bf16)."""
    c = _chip_of(chip)
    if c.ici_bw_bidi is None:
        raise ValueError(
            f"chip must be a TPU with an ICI figure; {c.long_name} has none (for a GPU, "
            "collective_bandwidth and critical_batch_per_chip take its NVLink and scale-out figures)"
        )
    return c.critical_intensity(dtype, "ici")


@checked
def collective_bandwidth(chip, across_nodes: Bool = False, n_axes: PositiveInt = 1) -> float:
    """Bytes/s a strategy's collectives move per chip, the ``W`` of the rooflines: on a TPU ``n_axes`` times one
    ICI link's bidirectional bandwidth (``W_ici``); on a GPU the scaling book's ``W_collective``, its NVLink
    egress inside a node (450 GB/s on H100) or, ``across_nodes``, the node's scale-out egress (400 GB/s)."""
    c = _chip_of(chip)
    if c.kind == "gpu":
        if n_axes != 1:
            raise ValueError(f"n_axes counts TPU torus axes; a GPU ({c.long_name}) has one NVLink domain: n_axes=1")
        return c.bandwidth("node_egress") if across_nodes else c.bandwidth("nvlink")
    if across_nodes:
        raise ValueError(f"across_nodes applies to GPU nodes; between {c.long_name} slices use strategy 'dcn'")
    return n_axes * c.bandwidth("ici")


def _across(chip, across_nodes) -> bool:
    """``across_nodes`` with its default filled in: a GpuCluster of several nodes, or any GPU chip by name."""
    if across_nodes is not None:
        return across_nodes
    if isinstance(chip, GpuCluster):
        return chip.n_nodes > 1
    return _chip_of(chip).kind == "gpu"


@checked
def critical_batch_per_chip(
    strategy: Annotated[str, OneOf(_CRITICAL)],
    chip,
    *,
    n_axes: PositiveInt = 1,
    d_ff: PositiveInt | None = None,
    fsdp_axes: PositiveInt = 1,
    tp_axes: PositiveInt = 1,
    dtype: DTypeName = "bf16",
    across_nodes: Bool | None = None,
    experts: PositiveInt = 1,
    experts_per_token: PositiveInt = 1,
    nodes: PositiveInt | None = None,
    model_parallel_nodes: PositiveInt = 1,
    combine: Combine = "max",
) -> float:
    """The batch (tokens) below which ``strategy`` is communication-bound on ``chip`` (a TPU or a GPU).

    - ``"dp"``/``"data"``, ``"fsdp"``: tokens **per chip** ``C / W`` with ``W`` from :func:`collective_bandwidth`:
      ``α / n_axes`` on a TPU (2550 on v5p over one axis, 850 over 3); on a GPU ``C / W_collective``, across nodes
      (2475 on H100; the default for a GPU name or a cluster of several nodes) or inside one (2200). Times ``E / k``
      for a MoE (``experts``, ``experts_per_token``); on a GPU also times ``(X - 1) / X`` when only ``nodes = X``
      nodes take part, and divided by the ``model_parallel_nodes`` a model-parallel group spans (its shards each
      cross on their own NICs);
    - ``"fsdp+tp"``/``"fsdp+tensor"`` (TPU): tokens per chip at the optimal FSDP degree (``fsdp_axes = M_X``,
      ``tp_axes = M_Y``, ``d_ff = F`` needed), ``α² / (M_X M_Y F)`` with ``combine="max"`` (the default): 113 for
      Llama 3 70B on v5p with ``M_X M_Y = 2``; ``4α² / (M_X M_Y F)`` with ``combine="sum"`` (453);
    - ``"dcn"`` (TPU): tokens **per slice** ``C / W_dcn`` (73,440 on v5p), pure data parallelism between slices.

    ``combine`` says how the mixed layout's FSDP weight gathers (over the ``M_X`` FSDP axes) and tensor-parallel
    activation gathers (over the ``M_Y`` tensor axes) add up in time. They use different links and overlap, so the
    step waits for the slower of the two, not for their sum: ``"max"``, the scaling book's current derivation
    (training.md, "Combining FSDP and Tensor Parallelism"; commits in the comment on ``COMBINES``). At the optimal
    degree the two times are equal, so adding them (``"sum"``, the book's older text) doubles the communication;
    as that communication grows with ``sqrt(B)`` and the compute with ``B``, doubling it quadruples the threshold.
    Every other strategy has one kind of collective, so both conventions give the same answer there.

    Tensor parallelism alone has no critical batch (see :func:`max_tensor_parallelism`).
    """
    s = strategy
    c = _chip_of(chip)
    across = _across(chip, across_nodes)
    if experts_per_token > experts:
        raise ValueError(f"experts_per_token ({experts_per_token}) cannot exceed experts ({experts})")
    _tpu_only(c, "nodes and NICs", nodes=(nodes, None), model_parallel_nodes=(model_parallel_nodes, 1))
    if c.kind == "gpu":
        if s not in ("dp", "data", "fsdp"):
            raise ValueError(
                f"strategy {s!r} belongs to a TPU torus or DCN and chip {c.long_name} is a GPU: its "
                "critical batch is strategy 'dp' or 'fsdp' (across_nodes=True for the scale-out network)"
            )
        b = c.peak_flops(dtype) / collective_bandwidth(c, across) * experts / experts_per_token / model_parallel_nodes
        if nodes is not None:
            if nodes < 2:
                raise ValueError(f"nodes must be at least 2 (the data-parallel degree in nodes); got {nodes!r}")
            b *= (nodes - 1) / nodes
        return b
    if across_nodes:
        raise ValueError(f"across_nodes applies to GPU nodes; between {c.long_name} slices use strategy 'dcn'")
    moe = experts / experts_per_token
    if s in ("dp", "data", "fsdp"):
        b = ici_intensity(c, dtype) / n_axes
        return b * moe if moe != 1 else b
    if s == "dcn":
        return c.peak_flops(dtype) / c.bandwidth("dcn")
    if d_ff is None:
        raise ValueError("d_ff (the MLP width F) is needed for strategy 'fsdp+tp'")
    # at X_opt each axis's time is sqrt(B F / (N M_X M_Y)) · 4D / W: "max" keeps one of them, "sum" both (2x),
    # and compute ≥ comms then needs B / N above α² / (M_X M_Y F) times 1 or 2² = 4
    factor = 1 if combine == "max" else 4
    return factor * ici_intensity(c, dtype) ** 2 / (fsdp_axes * tp_axes * d_ff)


@checked
def critical_batch_per_gpu(
    chip,
    *,
    across_nodes: Bool = True,
    experts: PositiveInt = 1,
    experts_per_token: PositiveInt = 1,
    nodes: PositiveInt | None = None,
    model_parallel_nodes: PositiveInt = 1,
    dtype: DTypeName = "bf16",
) -> float:
    """Chapter 11's name for ``critical_batch_per_chip("dp", chip, ...)`` on a GPU (a thin alias, kept because
    the chapter and its exercises use it): tokens per GPU above which data parallelism or FSDP stays
    compute-bound, ``C / W_collective`` (2200 inside an H100 node, 2475 across nodes), times ``E / k`` for a MoE,
    times ``(X - 1) / X`` for ``nodes = X``, divided by ``model_parallel_nodes``."""
    c = _chip_of(chip)
    if c.kind != "gpu":
        raise ValueError(
            f"chip must be a GPU (e.g. 'h100') or a GpuCluster; {c.long_name} is a TPU "
            "(critical_batch_per_chip takes either)"
        )
    return critical_batch_per_chip(
        "dp",
        chip,
        across_nodes=across_nodes,
        experts=experts,
        experts_per_token=experts_per_token,
        nodes=nodes,
        model_parallel_nodes=model_parallel_nodes,
        dtype=dtype,
    )


@checked
def max_tensor_parallelism(
    chip, d_ff: PositiveInt, n_axes: PositiveInt = 1, dtype: DTypeName = "bf16", *, across_nodes: Bool = False
) -> float:
    """Largest tensor-parallel degree that stays compute-bound: ``Y < n_axes · F W / C`` (a float: round down to a
    usable degree). On a TPU ``F / α`` per mesh axis (about 11 for F = 28,672 on one v5p axis); on a GPU
    ``F W_collective / C``, about ``F / 2200`` inside an H100 node and ``F / 2475`` across nodes. Independent of
    batch and of precision (int8 halves the bytes and doubles C)."""
    c = _chip_of(chip)
    if c.kind == "gpu":
        if n_axes != 1:
            raise ValueError(f"n_axes counts TPU torus axes; a GPU ({c.long_name}) has one NVLink domain: n_axes=1")
        return d_ff * collective_bandwidth(c, across_nodes) / c.peak_flops(dtype)
    if across_nodes:
        raise ValueError(f"across_nodes applies to GPU nodes; {c.long_name} is a TPU")
    return n_axes * d_ff / ici_intensity(c, dtype)


@checked
def two_node_tensor_parallelism_ok(chip, d_ff: PositiveInt, degree: PositiveInt, *, dtype: DTypeName = "bf16") -> bool:
    """GPU: whether ``degree``-way TP over two nodes stays compute-bound: ``F > (C / W_node) (Y - node_size)``
    (the two nodes' halves exchange over the scale-out network at twice one node's egress)."""
    c = _gpu(chip)
    return d_ff > c.peak_flops(dtype) / c.bandwidth("node_egress") * (degree - c.node_size)


def _gpu(chip) -> Chip:
    c = _chip_of(chip)
    if c.kind != "gpu":
        raise ValueError(f"chip must be a GPU (e.g. 'h100') or a GpuCluster; {c.long_name} is a TPU")
    return c


@checked
def optimal_fsdp_degree(
    batch_tokens: PositiveFloat,
    n_chips: PositiveInt,
    d_ff: PositiveInt,
    fsdp_axes: PositiveInt = 1,
    tp_axes: PositiveInt = 1,
    combine: Combine = "max",
) -> float:
    """The FSDP degree that minimises mixed FSDP + tensor communication: ``X = sqrt((B / F)(M_X / M_Y) N)``.

    Not rounded: a layout uses a power of two near it (1618 → 2048 for Llama 3 70B, 4M tokens, 8960 chips, with
    ``M_X / M_Y = 2``; the scaling book's applied-training.md). The tensor degree is ``N / X``.

    ``combine`` (``"max"``, the default, or ``"sum"``; see :func:`critical_batch_per_chip`) is accepted so one switch
    can be passed to every FSDP + tensor function, and the answer is the same for both: the FSDP time grows as ``X``
    and the tensor time falls as ``1 / X``, and both their maximum and their sum are smallest where the two are
    equal. Only the communication left at that degree differs (the sum is twice the maximum).
    """
    return math.sqrt(batch_tokens / d_ff * fsdp_axes / tp_axes * n_chips)


@dataclass(frozen=True)
class LayerTimes:
    """Seconds one simplified MLP layer spends computing and communicating per chip (GPU), by pass.

    The one roofline record of Chapters 5 and 11. A roofline that prices one pass only (the GPU chapter's: a
    strategy's forward collectives against its forward FLOPs, or data parallelism's backward AllReduce against the
    backward FLOPs) leaves the other pass at 0. ``strategy`` is ``"data"``, ``"fsdp"``, ``"tensor"`` or
    ``"fsdp+tensor"`` (:func:`mlp_layer_times`), or ``"dp"``, ``"tp"``, ``"ep"``, ``"pp"`` (the GPU rooflines).
    """

    strategy: str  # the strategy priced
    forward_compute: float  # seconds
    forward_comms: float  # seconds
    backward_compute: float  # seconds
    backward_comms: float  # seconds
    degree: int = 0  # chips (GPUs) the strategy spans; 0 where the table does not record one

    @property
    def compute(self) -> float:
        """Forward + backward compute, seconds."""
        return self.forward_compute + self.backward_compute

    @property
    def math(self) -> float:
        """Compute seconds under Chapter 11's name (``T_math``): the same as :attr:`compute`."""
        return self.compute

    @property
    def comms(self) -> float:
        """Forward + backward communication, seconds."""
        return self.forward_comms + self.backward_comms

    @property
    def ratio(self) -> float:
        """Communication over compute time (> 1: communication-bound)."""
        return self.comms / self.compute if self.compute else math.inf

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"comms"``: which is longer over the whole step (ties count as compute)."""
        return "compute" if self.compute >= self.comms else "comms"

    def __repr__(self) -> str:
        degree = f", {self.degree}-way" if self.degree else ""
        return (
            f"LayerTimes({self.strategy}{degree}: forward {fmt(self.forward_compute, 's')} compute / "
            f"{fmt(self.forward_comms, 's')} comms, backward {fmt(self.backward_compute, 's')} / "
            f"{fmt(self.backward_comms, 's')}; {self.bound}-bound)"
        )


@checked
def mlp_layer_times(
    strategy: Annotated[str, OneOf(STRATEGIES)],
    chip,
    batch_tokens: PositiveFloat,
    d_model: PositiveInt,
    d_ff: PositiveInt,
    *,
    data: PositiveInt = 1,
    fsdp: PositiveInt = 1,
    tensor: PositiveInt = 1,
    fsdp_axes: PositiveInt = 1,
    tp_axes: PositiveInt = 1,
    dtype: DTypeName = "bf16",
    across_nodes: Bool = False,
    combine: Combine = "max",
) -> LayerTimes:
    """The per-layer roofline table of the module docstring as seconds on ``chip`` (a TPU or a GPU).

    ``batch_tokens`` is the global ``B``; ``data``/``fsdp``/``tensor`` the degrees (``X`` and ``Y``); the bandwidth
    of a strategy's collectives is :func:`collective_bandwidth` (on a TPU ``W_ici`` times its number of mesh axes,
    ``fsdp_axes`` for data or FSDP, ``tp_axes`` for tensor; on a GPU NVLink, or the node's egress
    ``across_nodes``). Ring collectives are taken at their large-array limit (AllGather ``V / W``, AllReduce
    ``2V / W``) as in the chapter's derivation; :func:`tpu_notes.training.step_time` prices exact collectives.

    For ``"fsdp+tensor"`` each pass's communication is the slower of its FSDP weight collectives and its tensor
    activation collectives with ``combine="max"`` (the default: they run on different mesh axes and overlap, as in
    the scaling book's current text), or their sum with ``combine="sum"`` (its older text). The other strategies
    have one kind of collective each, and ``combine`` does not change them.
    """
    s = strategy
    c = _chip_of(chip)
    X = data if s == "data" else fsdp
    Y = tensor
    mx, my = fsdp_axes, tp_axes
    b = dtype_bytes(dtype)
    C = c.peak_flops(dtype)
    if c.kind == "gpu":
        if mx != 1 or my != 1:
            raise ValueError(f"fsdp_axes and tp_axes count TPU torus axes; on a GPU ({c.long_name}) leave them 1")
        W = collective_bandwidth(c, across_nodes)
    else:
        if across_nodes:
            raise ValueError(f"across_nodes applies to GPU nodes; {c.long_name} is a TPU")
        W = C / ici_intensity(c, dtype)
    if s in ("data", "fsdp"):
        Y = 1
    if s == "tensor":
        X = 1
    chips = X * Y
    fwd_c, bwd_c = 4 * batch_tokens * d_model * d_ff / (chips * C), 8 * batch_tokens * d_model * d_ff / (chips * C)
    w_bytes = 2 * d_model * d_ff * b / Y  # both weight matrices, this tensor rank's share
    act_bytes = batch_tokens * d_model * b / X  # one [B, D] activation, this data/FSDP shard's share
    if s == "data":
        fwd, bwd = 0.0, 2 * w_bytes / (W * mx)  # AllReduce of the gradients
    elif s == "fsdp":
        fwd, bwd = w_bytes / (W * mx), 2 * w_bytes / (W * mx)  # AG; AG + RS
    elif s == "tensor":
        fwd, bwd = 2 * act_bytes / (W * my), 2 * act_bytes / (W * my)  # AG in + RS out, and transposes
    else:
        join = max if combine == "max" else (lambda a, b: a + b)
        fwd = join(w_bytes / (W * mx), 2 * act_bytes / (W * my))  # AG weights over X; AG in + RS out over Y
        bwd = join(2 * w_bytes / (W * mx), 2 * act_bytes / (W * my))  # AG + RS weights; the activations' transposes
    return LayerTimes(
        strategy=s, forward_compute=fwd_c, forward_comms=fwd, backward_compute=bwd_c, backward_comms=bwd, degree=chips
    )


@checked
def pipeline_bubble_fraction(
    stages: PositiveInt, microbatches: PositiveInt, circular_repeats: PositiveInt = 1
) -> float:
    """Share of a pipelined step the chips sit idle: ``(P − 1) / (v·M + P − 1)`` for ``P`` stages, ``M`` microbatches
    and ``v`` circular repeats (each chip holds ``v`` non-adjacent groups of layers; GPipe and 1F1B have ``v = 1``
    and the same bubble, 1F1B only holds fewer activations)."""
    return (stages - 1) / (circular_repeats * microbatches + stages - 1)


# ---------------------------------------------------------------------------------------------------------------
# The GPU chapter's rooflines (scaling book, gpus.md), priced with a GPU's NVLink and scale-out figures
# ---------------------------------------------------------------------------------------------------------------


def _forward(strategy: str, degree: int, t_math: float, t_comms: float) -> LayerTimes:
    return LayerTimes(strategy, t_math, t_comms, 0.0, 0.0, degree)


@checked
def expert_parallel_times(
    chip,
    batch_tokens: PositiveFloat,
    d_model: PositiveInt,
    d_ff: PositiveInt,
    experts_per_token: PositiveInt,
    degree: PositiveInt,
    *,
    dtype: DTypeName = "bf16",
) -> LayerTimes:
    """GPU: the scaling book's expert-parallel roofline over ``Z = degree`` GPUs spanning nodes:
    ``T_math = 4 B k D F / (Z C)``, ``T_comms = 4 B D (Z - n) / (W_node Z) · min(n k / Z, 1)`` with ``n`` the
    node size (the two AllToAlls of the forward pass; only the cross-node part counts). A forward-pass record."""
    c = _gpu(chip)
    B, D, F, k, Z = batch_tokens, d_model, d_ff, experts_per_token, degree
    n = c.node_size
    t_math = 4 * B * k * D * F / (Z * c.peak_flops(dtype))
    t_comms = 4 * B * D * max(Z - n, 0) / (c.bandwidth("node_egress") * Z) * min(n * k / Z, 1.0)
    return _forward("ep", Z, t_math, t_comms)


@checked
def pipeline_comms_time(
    batch_tokens: PositiveFloat,
    d_model: PositiveInt,
    bandwidth: PositiveFloat,
    microbatches: PositiveInt,
    stages: PositiveInt,
    *,
    bytes_per_value: PositiveInt = 2,
) -> float:
    """Seconds of a pipeline's activation sends: ``2 B D / (W N_mb) × (N_mb + N_stages - 2)`` hops (with 2-byte
    values; the scaling book's formula), ``bandwidth`` the link between stages in bytes/s."""
    M = microbatches
    return bytes_per_value * batch_tokens * d_model / (bandwidth * M) * (M + stages - 2)


@checked
def strategy_times(
    cluster: GpuCluster,
    model,
    batch_tokens: PositiveFloat,
    *,
    dtype: DTypeName = "bf16",
    microbatches: PositiveInt = 16,
) -> list[LayerTimes]:
    """GPU: comms vs compute of one MLP block (``x[B, D] W_in[D, F] W_out[F, D]``, expert MLPs for a MoE) for each
    strategy, priced on the cluster's topology with :meth:`~tpu_notes.gpu.cluster.GpuCluster.collective_time` (no
    latency): DP over
    every GPU (the backward pass's weight AllReduce vs its ``8 B D F k / X`` FLOPs, ``E`` expert copies), TP
    over one node (AllGather + ReduceScatter of the activations per forward pass), EP over ``gcd(GPUs,
    experts)`` GPUs (two ragged AllToAlls of the routed tokens), PP with a stage per node or group of nodes
    (its activation sends, in at least as many microbatches as stages, spread over the layers)."""
    if not isinstance(cluster, GpuCluster):
        raise TypeError(f"cluster must be a GpuCluster; got {type(cluster).__name__}")
    m = as_config(model)
    B, M = batch_tokens, microbatches
    c = cluster.chip
    C = c.peak_flops(dtype)
    b = dtype_bytes(dtype)
    D = m.d_model
    E = m.n_experts if m.is_moe else 1
    k = m.experts_per_token if m.is_moe else 1
    F = m.expert_ff if m.is_moe else m.d_ff
    n = cluster.n_gpus
    rows = []
    t = cluster.collective_time("all-reduce", 2 * D * F * E * b, n, hop_latency=0).total
    rows.append(LayerTimes("dp", 0.0, 0.0, 2 * 2 * 2 * B * D * F * k / (n * C), t, n))  # the backward pass
    y = cluster.node_size
    t = 2 * cluster.collective_time("all-gather", B * D * b / max(n // y, 1), y, hop_latency=0).total
    rows.append(_forward("tp", y, 2 * 2 * B * D * F * k / (n * C), t))
    if m.is_moe:
        z = math.gcd(n, E)  # experts split evenly over GPUs that split the cluster evenly
        span = z
        # each EP group's tokens, one D-vector slot per shard (the dense [B, D, Z] array), k slots filled
        t = 2 * cluster.collective_time("all-to-all", B * z / n * D * b * z, z, span=span, hop_latency=0, top_k=k).total
        rows.append(_forward("ep", z, 2 * 2 * B * D * F * k / (n * C), t))
    if cluster.n_nodes > 1:
        p = max(d for d in range(1, m.n_layers + 1) if cluster.n_nodes % d == 0)  # one stage per node(s)
        w = cluster.nic_bw
        # one pipeline carries B p / n tokens in at least p microbatches; its sends spread over the layers
        t = pipeline_comms_time(B * p / n, D, w, max(M, p), p, bytes_per_value=b) / m.n_layers
        rows.append(_forward("pp", p, 2 * 2 * B * D * F * k / (n * C), t))
    return rows
