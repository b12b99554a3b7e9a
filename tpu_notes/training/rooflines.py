"""When each kind of parallelism stops paying: the per-layer rooflines of Chapter 5.

The algebra runs on a simplified MLP block, ``Out[B, D] = In[B, D] ·_D W_in[D, F] ·_F W_out[F, D]`` in bf16, with
``B`` the tokens of the step, ``C`` the chip's peak FLOP/s and ``W`` the bidirectional ICI bandwidth of one link
(``W_ici``; several mesh axes multiply it by their number ``M``). Its forward pass costs ``4BDF`` FLOPs and its
backward ``8BDF``. Per layer and step (forward + backward), with ``X`` chips of data or FSDP parallelism and ``Y``
of tensor parallelism:

- **data**: compute ``12BDF / X``; communication ``8DF``, two AllReduces of the ``2DF``-byte weight gradients
  (backward);
- **fsdp**: compute ``12BDF / X``; communication ``12DF``: AllGather the weights (forward, and again in the
  backward), ReduceScatter the gradients, each ``4DF`` bytes' worth;
- **tensor**: compute ``12BDF / Y``; communication ``8BD``: AllGather the input and ReduceScatter the output,
  forward and backward;
- **fsdp+tensor**: compute ``12BDF / (XY)``; communication ``12DF / Y + 8BD / X``.

Comparing compute with communication gives the critical batches: data/FSDP are compute-bound iff ``B / X > C / W`` per mesh
axis (``α = C / W_ici``: 2550 on v5p); tensor parallelism iff ``Y < M_Y · F / α``, whatever the batch; mixed FSDP
+ tensor parallelism at its best FSDP degree ``X = sqrt((B / F)(M_X / M_Y) N)`` iff ``B / N > 4α² / (M_X M_Y F)``;
data parallelism across slices over DCN iff the tokens **per slice** exceed ``C / W_dcn``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..hardware import get_chip
from ..units import check_choice, check_positive, dtype_bytes, fmt

#: Strategies of the per-layer table and of :func:`critical_batch_per_chip`.
STRATEGIES = ("data", "fsdp", "tensor", "fsdp+tensor")
_CRITICAL = ("dp", "data", "fsdp", "fsdp+tp", "fsdp+tensor", "dcn")


def ici_intensity(chip, dtype: str = "bf16") -> float:
    """``α = C / W_ici``: peak FLOP/s over one link's bidirectional ICI bandwidth (2550 on v5p in bf16)."""
    c = get_chip(chip)
    if c.ici_bw_bidi is None:
        raise ValueError(f"chip must be a TPU with an ICI figure; {c.long_name} has none (GPUs: tpu_notes.gpu)")
    return c.critical_intensity(dtype, "ici")


def critical_batch_per_chip(strategy: str, chip, *, n_axes: int = 1, d_ff: int | None = None, fsdp_axes: int = 1,
                            tp_axes: int = 1, dtype: str = "bf16") -> float:
    """The batch (tokens) below which ``strategy`` is communication-bound on ``chip``.

    - ``"dp"``/``"data"``, ``"fsdp"``: tokens **per chip** ``α / n_axes`` (2550 on v5p over one axis, 850 over 3);
    - ``"fsdp+tp"``/``"fsdp+tensor"``: tokens per chip ``4α² / (M_X M_Y F)`` at the optimal FSDP degree
      (``fsdp_axes = M_X``, ``tp_axes = M_Y``, ``d_ff = F`` needed): 453 for Llama 3 70B on v5p with
      ``M_X M_Y = 2``;
    - ``"dcn"``: tokens **per slice** ``C / W_dcn`` (73,440 on v5p), pure data parallelism between slices.

    Tensor parallelism alone has no critical batch (see :func:`max_tensor_parallelism`).
    """
    s = check_choice("strategy", strategy, _CRITICAL)
    c = get_chip(chip)
    n_axes = check_positive("n_axes", n_axes, integer=True)
    if s in ("dp", "data", "fsdp"):
        return ici_intensity(c, dtype) / n_axes
    if s == "dcn":
        return c.peak_flops(dtype) / c.bandwidth("dcn")
    if d_ff is None:
        raise ValueError("d_ff (the MLP width F) is needed for strategy 'fsdp+tp'")
    F = check_positive("d_ff", d_ff, integer=True)
    mx = check_positive("fsdp_axes", fsdp_axes, integer=True)
    my = check_positive("tp_axes", tp_axes, integer=True)
    return 4 * ici_intensity(c, dtype) ** 2 / (mx * my * F)


def max_tensor_parallelism(chip, d_ff: int, n_axes: int = 1, dtype: str = "bf16") -> float:
    """Largest tensor-parallel degree that stays compute-bound: ``Y < n_axes · F / α`` (about 11 for F = 28,672
    on one v5p axis). Independent of batch and of precision (int8 halves the bytes and doubles C)."""
    F = check_positive("d_ff", d_ff, integer=True)
    return check_positive("n_axes", n_axes, integer=True) * F / ici_intensity(chip, dtype)


def optimal_fsdp_degree(batch_tokens: float, n_chips: int, d_ff: int, fsdp_axes: int = 1, tp_axes: int = 1) -> float:
    """The FSDP degree that minimises mixed FSDP + tensor communication: ``X = sqrt((B / F)(M_X / M_Y) N)``.

    Not rounded: a layout uses a power of two near it (1618 → 2048 for Llama 3 70B, 4M tokens, 8960 chips, with
    ``M_X / M_Y = 2``). The tensor degree is ``N / X``.
    """
    B = check_positive("batch_tokens", batch_tokens)
    N = check_positive("n_chips", n_chips, integer=True)
    F = check_positive("d_ff", d_ff, integer=True)
    mx = check_positive("fsdp_axes", fsdp_axes, integer=True)
    my = check_positive("tp_axes", tp_axes, integer=True)
    return math.sqrt(B / F * mx / my * N)


@dataclass(frozen=True)
class LayerTimes:
    """Seconds one simplified MLP layer spends computing and communicating per chip (forward and backward)."""

    strategy: str               # "data", "fsdp", "tensor" or "fsdp+tensor"
    forward_compute: float      # seconds
    forward_comms: float        # seconds
    backward_compute: float     # seconds
    backward_comms: float       # seconds

    @property
    def compute(self) -> float:
        """Forward + backward compute, seconds."""
        return self.forward_compute + self.backward_compute

    @property
    def comms(self) -> float:
        """Forward + backward communication, seconds."""
        return self.forward_comms + self.backward_comms

    @property
    def bound(self) -> str:
        """``"compute"`` or ``"comms"``: which is longer over the whole step (ties count as compute)."""
        return "compute" if self.compute >= self.comms else "comms"

    def __repr__(self) -> str:
        return (f"LayerTimes({self.strategy}: forward {fmt(self.forward_compute, 's')} compute / "
                f"{fmt(self.forward_comms, 's')} comms, backward {fmt(self.backward_compute, 's')} / "
                f"{fmt(self.backward_comms, 's')}; {self.bound}-bound)")


def mlp_layer_times(strategy: str, chip, batch_tokens: float, d_model: int, d_ff: int, *, data: int = 1,
                    fsdp: int = 1, tensor: int = 1, fsdp_axes: int = 1, tp_axes: int = 1,
                    dtype: str = "bf16") -> LayerTimes:
    """The per-layer roofline table of the module docstring as seconds on ``chip``.

    ``batch_tokens`` is the global ``B``; ``data``/``fsdp``/``tensor`` the degrees (``X`` and ``Y``); the bandwidth
    of a strategy's collectives is ``W_ici`` times its number of mesh axes (``fsdp_axes`` for data or FSDP,
    ``tp_axes`` for tensor). Ring collectives are taken at their large-array limit (AllGather ``V / W``, AllReduce
    ``2V / W``) as in the chapter's derivation; :func:`tpu_notes.training.step_time` prices exact collectives.
    """
    s = check_choice("strategy", strategy, STRATEGIES)
    c = get_chip(chip)
    B = check_positive("batch_tokens", batch_tokens)
    D = check_positive("d_model", d_model, integer=True)
    F = check_positive("d_ff", d_ff, integer=True)
    data = check_positive("data", data, integer=True)
    fsdp = check_positive("fsdp", fsdp, integer=True)
    Y = check_positive("tensor", tensor, integer=True)
    X = data if s == "data" else fsdp
    mx = check_positive("fsdp_axes", fsdp_axes, integer=True)
    my = check_positive("tp_axes", tp_axes, integer=True)
    b = dtype_bytes(dtype)
    C, W = c.peak_flops(dtype), c.peak_flops(dtype) / ici_intensity(c, dtype)
    if s in ("data", "fsdp"):
        Y = 1
    if s == "tensor":
        X = 1
    chips = X * Y
    fwd_c, bwd_c = 4 * B * D * F / (chips * C), 8 * B * D * F / (chips * C)
    w_bytes = 2 * D * F * b / Y                  # both weight matrices, this tensor rank's share
    act_bytes = B * D * b / X                    # one [B, D] activation, this data/FSDP shard's share
    if s == "data":
        fwd, bwd = 0.0, 2 * w_bytes / (W * mx)                              # AllReduce of the gradients
    elif s == "fsdp":
        fwd, bwd = w_bytes / (W * mx), 2 * w_bytes / (W * mx)              # AG; AG + RS
    elif s == "tensor":
        fwd, bwd = 2 * act_bytes / (W * my), 2 * act_bytes / (W * my)      # AG in + RS out, and transposes
    else:
        fwd = w_bytes / (W * mx) + 2 * act_bytes / (W * my)
        bwd = 2 * w_bytes / (W * mx) + 2 * act_bytes / (W * my)
    return LayerTimes(strategy=s, forward_compute=fwd_c, forward_comms=fwd, backward_compute=bwd_c,
                      backward_comms=bwd)


def pipeline_bubble_fraction(stages: int, microbatches: int, circular_repeats: int = 1) -> float:
    """Share of a pipelined step the chips sit idle: ``(P − 1) / (v·M + P − 1)`` for ``P`` stages, ``M`` microbatches
    and ``v`` circular repeats (each chip holds ``v`` non-adjacent groups of layers; GPipe and 1F1B have ``v = 1``
    and the same bubble, 1F1B only holds fewer activations)."""
    P = check_positive("stages", stages, integer=True)
    M = check_positive("microbatches", microbatches, integer=True)
    v = check_positive("circular_repeats", circular_repeats, integer=True)
    return (P - 1) / (v * M + P - 1)
