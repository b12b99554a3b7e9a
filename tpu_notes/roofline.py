"""Rooflines: is an operation limited by compute or by moving bytes? (Chapter 1.)

``T_math = FLOPs / peak FLOP/s`` and ``T_comms = bytes / bandwidth``. With perfect overlap the op takes
``max(T_math, T_comms)`` (the lower bound); with none it takes ``T_math + T_comms`` (the upper bound). The
arithmetic intensity ``FLOPs / bytes`` against the chip's critical intensity ``peak / bandwidth`` says which wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from .hardware import BANDWIDTH_KINDS, get_chip
from .units import (
    DTypeName,
    Kind,
    NonNegativeFloat,
    OneOf,
    PositiveFloat,
    PositiveInt,
    capped,
    check_choice,
    check_positive,
    checked,
    dtype_bytes,
    fmt,
)


@dataclass(frozen=True)
class _BandwidthArg(Kind):
    """A bandwidth given either as a kind of link or memory of the chip (one of ``BANDWIDTH_KINDS``, e.g.
    ``"hbm"``) or as a number of bytes/s > 0."""

    def check(self, name: str, value):
        if isinstance(value, str):
            return check_choice(name, value, BANDWIDTH_KINDS)
        return check_positive(name, value)

    def hostile(self) -> list:
        return ["dram", "", -1, 0, float("nan"), float("inf"), None, True, [8.2e11]]

    def example(self):
        return "hbm"

    def describe(self) -> str:
        return f"one of {list(BANDWIDTH_KINDS)} or bytes/s > 0"


#: A bandwidth argument: a kind (``"hbm"``, ``"ici_oneway"``...) or bytes/s.
_Bandwidth = Annotated[object, _BandwidthArg()]
#: A kind of link or memory of the chip.
_LinkKind = Annotated[str, OneOf(BANDWIDTH_KINDS)]


@dataclass(frozen=True)
class RooflineTime:
    """Time bounds of one operation, in seconds."""

    flops: float  # FLOPs performed
    nbytes: float  # bytes moved over the limiting link or memory
    t_math: float  # flops / peak FLOP/s, seconds
    t_comms: float  # nbytes / bandwidth, seconds
    lower: float  # max(t_math, t_comms): perfect overlap, seconds
    upper: float  # t_math + t_comms: no overlap, seconds
    intensity: float  # flops / nbytes, FLOPs per byte
    bound: str  # "compute" or "bandwidth" (which term is larger; ties count as compute)

    def __repr__(self) -> str:
        return (
            f"RooflineTime(t_math={fmt(self.t_math, 's')}, t_comms={fmt(self.t_comms, 's')}, "
            f"lower={fmt(self.lower, 's')}, upper={fmt(self.upper, 's')}, "
            f"intensity={self.intensity:.4g} FLOPs/B, bound={self.bound!r})"
        )


@checked
def roofline(
    flops: NonNegativeFloat, nbytes: NonNegativeFloat, peak_flops: PositiveFloat, bandwidth: PositiveFloat
) -> RooflineTime:
    """Bound an operation of ``flops`` FLOPs that moves ``nbytes`` bytes on hardware with ``peak_flops`` FLOP/s
    and ``bandwidth`` bytes/s."""
    if flops == 0 and nbytes == 0:
        raise ValueError("flops and nbytes cannot both be zero: there is nothing to bound")
    t_math = flops / peak_flops
    t_comms = nbytes / bandwidth
    intensity = flops / nbytes if nbytes > 0 else float("inf")
    return RooflineTime(
        flops=flops,
        nbytes=nbytes,
        t_math=t_math,
        t_comms=t_comms,
        lower=max(t_math, t_comms),
        upper=t_math + t_comms,
        intensity=intensity,
        bound="compute" if t_math >= t_comms else "bandwidth",
    )


@checked
def attainable_flops(intensity: PositiveFloat, peak_flops: PositiveFloat, bandwidth: PositiveFloat) -> float:
    """The roofline itself: FLOP/s attainable at ``intensity`` FLOPs/byte, ``min(peak, intensity * bandwidth)``."""
    return min(peak_flops, intensity * bandwidth)


@checked
def matmul_flops(B: PositiveInt, D: PositiveInt, F: PositiveInt) -> float:
    """FLOPs of ``[B, D] @ [D, F]``: one multiply and one add per (b, d, f), ``2·B·D·F``."""
    return 2.0 * B * D * F


@checked
def matmul_bytes(
    B: PositiveInt,
    D: PositiveInt,
    F: PositiveInt,
    x_dtype: DTypeName = "bf16",
    w_dtype: DTypeName = "bf16",
    out_dtype: DTypeName = "bf16",
) -> float:
    """Bytes to read ``x[B, D]`` and ``w[D, F]`` and write ``out[B, F]`` once each."""
    return B * D * dtype_bytes(x_dtype) + D * F * dtype_bytes(w_dtype) + B * F * dtype_bytes(out_dtype)


@checked
def matmul_intensity(
    B: PositiveInt,
    D: PositiveInt,
    F: PositiveInt,
    x_dtype: DTypeName = "bf16",
    w_dtype: DTypeName = "bf16",
    out_dtype: DTypeName = "bf16",
) -> float:
    """Arithmetic intensity of ``[B, D] @ [D, F]`` in FLOPs/byte (tends to ``B`` in bf16 when ``B ≪ D, F``)."""
    return matmul_flops(B, D, F) / matmul_bytes(B, D, F, x_dtype, w_dtype, out_dtype)


@checked
def compute_time(flops: NonNegativeFloat, chip, dtype: DTypeName = "bf16") -> float:
    """Seconds to perform ``flops`` FLOPs at ``chip``'s peak matmul rate for ``dtype`` (``flops / peak``): the
    ``T_math`` of a roofline, for when no bytes are counted."""
    return flops / get_chip(chip).peak_flops(dtype)


@checked
def memory_time(nbytes: NonNegativeFloat, chip, bandwidth: _Bandwidth = "hbm") -> float:
    """Seconds to move ``nbytes`` bytes over ``chip``'s ``bandwidth`` (a kind such as ``"hbm"``, or bytes/s):
    the ``T_comms`` of a roofline."""
    c = get_chip(chip)
    return nbytes / (c.bandwidth(bandwidth) if isinstance(bandwidth, str) else bandwidth)


@checked
def matmul_time(
    B: PositiveInt,
    D: PositiveInt,
    F: PositiveInt,
    chip,
    dtype: DTypeName = "bf16",
    w_dtype: DTypeName | None = None,
    out_dtype: DTypeName | None = None,
) -> RooflineTime:
    """Roofline of ``x[B, D] @ w[D, F]`` on ``chip`` against HBM.

    ``dtype`` is the compute dtype (it picks the peak FLOP/s) and the dtype of ``x``; ``w_dtype`` (default ``dtype``)
    is the stored weight dtype; ``out_dtype`` defaults to ``dtype``. int8 weights with bf16 compute:
    ``matmul_time(B, D, F, "v5e", dtype="bf16", w_dtype="int8")``.
    """
    c = get_chip(chip)
    w_dtype = w_dtype if w_dtype is not None else dtype
    out_dtype = out_dtype if out_dtype is not None else dtype
    return roofline(
        matmul_flops(B, D, F), matmul_bytes(B, D, F, dtype, w_dtype, out_dtype), c.peak_flops(dtype), c.hbm_bw
    )


@checked
def critical_batch_size(chip, compute_dtype: DTypeName = "bf16", weight_dtype: DTypeName | None = None) -> float:
    """Token batch above which a weight-streaming matmul (``B ≪ D, F``) is compute-bound on ``chip``.

    With ``B ≪ D, F`` the bytes are dominated by the weights, ``D·F·w_bytes``, and the FLOPs are ``2·B·D·F``, so
    the intensity is ``2B / w_bytes``; setting it equal to ``peak(compute_dtype) / W_hbm`` gives
    ``B* = peak · w_bytes / (2 · W_hbm)``: 240 on v5e in bf16, 120 with int8 weights and bf16 compute,
    and 240 again for int8 throughout (twice the OP/s, half the bytes).
    """
    c = get_chip(chip)
    weight_dtype = weight_dtype if weight_dtype is not None else compute_dtype
    return c.peak_flops(compute_dtype) * dtype_bytes(weight_dtype) / (2.0 * c.hbm_bw)


@checked
def sharded_contraction_time(
    B: PositiveInt,
    D: PositiveInt,
    F: PositiveInt,
    chip,
    n_chips: PositiveInt = 2,
    dtype: DTypeName = "bf16",
    link: _LinkKind = "ici_oneway",
) -> RooflineTime:
    """Network roofline of ``x[B, D] @ w[D, F]`` with ``D`` split over ``n_chips`` chips (Chapter 1).

    Each chip multiplies its ``D / n`` slice (``2·B·D·F / n`` FLOPs) and then its ``B × F`` partial sum
    (``B·F·bytes``) must be exchanged and added. Links are full duplex: with two chips, each sends its partial sum
    while receiving the other's, so each direction of the link carries ``B·F·bytes`` at the **one-way** per-link
    bandwidth (``link="ici_oneway"``, the default). That is also the ring AllReduce cost of Chapter 3,
    ``2V / W_bidi = V / W_oneway`` for ``V = B·F·bytes``, which for ``n > 2`` chips this function assumes.
    The ratio is ``T_math / T_comms = (D / n) / (C / W_oneway)`` (``D / 2 > C / W_oneway``, i.e. ``D > 8755.6`` on
    a v5e, for two chips): the threshold depends on the model dimension ``D``, not the batch.
    """
    c = get_chip(chip)
    if n_chips < 2:
        raise ValueError(f"n_chips must be >= 2 for a sharded contraction; got {n_chips}")
    if D % n_chips:
        raise ValueError(f"D={D} must be divisible by n_chips={n_chips}")
    flops = matmul_flops(B, D, F) / n_chips
    nbytes = B * F * dtype_bytes(dtype)
    return roofline(flops, nbytes, c.peak_flops(dtype), c.bandwidth(link))


# --------------------------------------------------------------------------------------------------------------
# Worked cases of Chapters 1 and 2 (the exercises check answers with these; the modelling lives here)
# --------------------------------------------------------------------------------------------------------------
#: Largest batch :func:`smallest_compute_bound_batch` searches by default.
BATCH_SEARCH_LIMIT = 2**24
#: Largest ``limit`` :func:`smallest_compute_bound_batch` accepts: its bisection takes ``log2(limit)`` roofline
#: evaluations (62 at the cap, well under a millisecond each).
MAX_BATCH_SEARCH_LIMIT = 2**62


@checked
def smallest_compute_bound_batch(
    D: PositiveInt,
    F: PositiveInt,
    chip="v5e",
    dtype: DTypeName = "bf16",
    limit: capped(MAX_BATCH_SEARCH_LIMIT) = BATCH_SEARCH_LIMIT,
    w_dtype: DTypeName | None = None,
) -> int:
    """Smallest token batch ``B`` for which ``x[B, D] @ w[D, F]`` is compute-bound on ``chip`` (exact byte
    count, activations and output included; see :func:`matmul_time`). ``dtype`` is the activation and compute
    dtype, ``w_dtype`` (default ``dtype``) the stored weights'. A bisection over ``1 .. limit``; raises
    ``ValueError`` if no batch up to ``limit`` is compute-bound (small ``D`` or ``F`` never are)."""
    get_chip(chip)

    def compute_bound(b: int) -> bool:
        return matmul_time(b, D, F, chip, dtype=dtype, w_dtype=w_dtype).bound == "compute"

    if not compute_bound(limit):
        raise ValueError(
            f"no batch up to limit={limit} makes [B, {D}] x [{D}, {F}] compute-bound on {get_chip(chip).name}"
        )
    lo, hi = 0, limit  # invariant: lo is bandwidth-bound (or 0), hi is compute-bound
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if compute_bound(mid):
            hi = mid
        else:
            lo = mid
    return hi


@checked
def crossover_batch(
    D: PositiveInt, F: PositiveInt, chip="v5e", dtype: DTypeName = "bf16", bandwidth: _Bandwidth = "hbm"
) -> float:
    """The closed form behind :func:`smallest_compute_bound_batch`: the (real) batch at which
    ``x[B, D] @ w[D, F]`` (all in ``dtype``) has ``T_math = T_comms`` against ``bandwidth`` (a kind, or bytes/s).

    ``2·B·D·F / C = (D·F + B·(D + F))·b / W``  gives  ``B = (D·F·b / W) / (2·D·F / C − (D + F)·b / W)``.
    Raises ``ValueError`` when no batch is compute-bound (the denominator is not positive).
    """
    c = get_chip(chip)
    w = c.bandwidth(bandwidth) if isinstance(bandwidth, str) else bandwidth
    b = dtype_bytes(dtype)
    denom = 2 * D * F / c.peak_flops(dtype) - (D + F) * b / w
    if denom <= 0:
        raise ValueError(
            f"no batch makes [B, {D}] x [{D}, {F}] compute-bound on {c.name} in {dtype}: D and F "
            "are too small for this chip's critical intensity"
        )
    return (D * F * b / w) / denom


@checked
def per_example_weights_time(
    B: PositiveInt, D: PositiveInt, F: PositiveInt, chip="v5e", dtype: DTypeName = "int8"
) -> RooflineTime:
    """Roofline of ``x[B, D] @ w[B, D, F]`` (every example has its own weights): ``2·B·D·F`` FLOPs over
    ``B·D + B·D·F + B·F`` elements, so the intensity stays below 2 FLOPs/element however large ``B``."""
    nbytes = (B * D + B * D * F + B * F) * dtype_bytes(dtype)
    c = get_chip(chip)
    return roofline(matmul_flops(B, D, F), nbytes, c.peak_flops(dtype), c.hbm_bw)


@checked
def elementwise_add_time(N: PositiveInt, chip="v5e", dtype: DTypeName = "bf16") -> RooflineTime:
    """Roofline of ``z = x + y`` on ``[N]`` vectors against HBM: ``N`` FLOPs; reads two vectors and writes one.

    The FLOPs are timed at the chip's matmul peak, as the scaling book does; they actually run on the VPU,
    whose peak is far lower (:func:`tpu_notes.systolic.vpu_flops`), which only makes the op more bandwidth-bound.
    """
    c = get_chip(chip)
    return roofline(float(N), 3 * N * dtype_bytes(dtype), c.peak_flops(dtype), c.hbm_bw)


@checked
def tiled_matmul_intensity(bm: PositiveInt, bn: PositiveInt, dtype: DTypeName = "bf16") -> float:
    """Arithmetic intensity (FLOPs per byte) that memory sees when a matmul ``[M, K] x [K, N]`` is computed in
    output tiles of ``bm × bn``: each tile streams a ``[bm, K]`` strip of the left operand and a ``[K, bn]`` strip
    of the right one through on-chip memory, doing ``2·bm·bn·K`` FLOPs over ``(bm + bn)·K`` elements, so

        intensity = 2·bm·bn / ((bm + bn)·bytes per element)   ( = bm·bn / (bm + bn) in bf16),

    whatever ``M``, ``N`` and ``K`` (output writes, amortised over ``K``, are left out). A matmul too big for
    on-chip memory is only as compute-bound as its tiles: they must satisfy this > ``C / W`` (Chapter 1)."""
    return 2.0 * bm * bn / ((bm + bn) * dtype_bytes(dtype))
