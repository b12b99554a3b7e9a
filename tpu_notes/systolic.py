"""A cycle-level model of a TPU MXU: a weight-stationary systolic array in numpy (Chapter 2).

The array is an ``S × S`` grid of processing elements (PEs). PE ``(i, j)`` holds one weight ``w[i, j]`` (row ``i``
of the contraction dimension, column ``j`` of the output) and does one multiply-add per cycle:

* **Weight-stationary.** A ``S × S`` tile of the right-hand matrix is shifted into the array from the top, one row per
  cycle (``S`` cycles), and stays there while rows of the left-hand matrix stream past. A shadow copy of the weights
  lets the next tile load while the current one is in use (double buffering).
* **Inputs flow right.** Element ``x[m, i]`` enters row ``i`` at the left edge on cycle ``start + m + i`` (the input
  is *skewed*: row ``i`` is delayed by ``i`` cycles) and moves one PE to the right per cycle.
* **Partial sums flow down.** PE ``(i, j)`` adds ``x · w[i, j]`` to the partial sum arriving from above and passes it
  down; the finished dot product for output row ``m`` and column ``j`` leaves the bottom of column ``j`` on cycle
  ``start + m + (S - 1) + j``.

Every datum carries a tag (which tile, which row), so a PE always multiplies by the weights of the tile its datum
belongs to. Outputs of the tiles that split the contraction dimension are summed in an accumulator below the array,
as the MXU's result buffers do.

Closed form (derived in the chapter): with ``T`` weight tiles, ``M`` streamed rows per tile and ``S`` the array edge,
tile ``τ`` starts streaming at ``S + τ·max(M, S)`` and the last result leaves ``M + 2S - 2`` cycles after the last
tile starts, so ``cycles = S + (T - 1)·max(M, S) + M + 2S - 2``. In steady state (``M ≥ S``) each PE does one
multiply-add per cycle: an ``[8, 128] @ [128, 128]`` step keeps a ``128 × 128`` array busy for 8 cycles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np

from .hardware import get_chip
from .units import Positive, PositiveInt, capped, checked

#: Most weight tiles :func:`tile_schedule` lists (it builds one entry per tile; well under a second at the cap).
MAX_TILES = 2**20
#: Largest array edge the simulator builds (PEs per side): the largest MXU (256 × 256, v6e). The smallest product
#: on an array this size, ``3·S`` cycles of ``S²`` PEs, fits :data:`MAX_PE_CYCLES` and runs in about a second.
MAX_ARRAY_SIZE = 256
#: Most PE-cycles (``S² × cycles``) :func:`simulate_matmul` simulates: a few seconds of numpy on one core
#: (about 30 ns per PE-cycle).
MAX_PE_CYCLES = 2**26
#: Most cycles :func:`simulate_matmul` simulates, whatever the array size: each costs tens of microseconds of
#: Python even on a tiny array, so this bounds a long stream of rows (a second or two at the cap).
MAX_CYCLES = 2**15
#: Most cycles :func:`simulate_matmul` records as snapshots.
MAX_RECORD_CYCLES = 4096
#: Most PE-cycles it records (``S²`` × recorded cycles; four float64/int64 ``S × S`` arrays per cycle, 32 bytes
#: per PE-cycle: 128 MiB at the cap).
MAX_RECORD_PE_CYCLES = 2**22


@dataclass(frozen=True)
class Snapshot:
    """State of the array at the end of one cycle (for pictures). Empty PEs hold NaN."""

    cycle: int  # clock cycle, counted from 0 (the first weight-load cycle)
    x: np.ndarray  # [S, S] input value sitting in each PE this cycle (NaN where idle)
    psum: np.ndarray  # [S, S] partial sum leaving each PE downwards this cycle (NaN where idle)
    row: np.ndarray  # [S, S] int: which streamed row (m) each PE works on, -1 where idle
    tile: np.ndarray  # [S, S] int: which weight tile each PE uses, -1 where idle


@dataclass(frozen=True)
class SystolicResult:
    """What a simulated matmul produced and how long it took."""

    output: np.ndarray  # [M, N] product, float64
    cycles: int  # clock cycles from the first weight load to the last result leaving the array
    array_size: int  # S, the array edge (PEs per side)
    n_tiles: int  # weight tiles streamed: ceil(K / S) · ceil(N / S)
    macs: int  # useful multiply-adds, M · K · N
    pe_cycles: int  # multiply-add slots offered, S² · cycles
    utilization: float  # macs / pe_cycles (1.0 would be a perfectly fed, never-draining array)
    tile_starts: tuple  # cycle at which each tile's first row enters the array
    snapshots: tuple  # Snapshot per recorded cycle (empty unless record_cycles > 0)

    def __repr__(self) -> str:
        return (
            f"SystolicResult(shape={self.output.shape}, cycles={self.cycles}, array_size={self.array_size}, "
            f"n_tiles={self.n_tiles}, utilization={self.utilization:.3f})"
        )


@checked
def tile_schedule(n_tiles: capped(MAX_TILES), rows: PositiveInt, array_size: PositiveInt) -> tuple[int, ...]:
    """Cycle at which each weight tile starts streaming, with one weight loader and a shadow weight buffer.

    Loading a tile takes ``array_size`` cycles (one row per cycle). Tile ``τ + 1`` may load while tile ``τ`` streams,
    and streams once it is loaded and tile ``τ``'s ``rows`` rows have entered: ``start_τ = S + τ · max(rows, S)``.
    """
    s = array_size
    starts = []
    load_end = s  # tile 0 loads on cycles 0 .. S-1
    start = s
    for tau in range(n_tiles):
        if tau > 0:
            load_begin = max(load_end, starts[-1])  # the shadow buffer frees when the previous tile goes live
            load_end = load_begin + s
            start = max(starts[-1] + rows, load_end)
        starts.append(start)
    return tuple(starts)


@checked
def predicted_cycles(M: PositiveInt, K: PositiveInt, N: PositiveInt, array_size: PositiveInt = 128) -> int:
    """Closed-form cycle count of :func:`simulate_matmul` for ``[M, K] @ [K, N]`` on an ``S × S`` array.

    ``T = ceil(K/S)·ceil(N/S)`` tiles; ``cycles = S + (T - 1)·max(M, S) + M + 2S - 2``.
    """
    s = array_size
    T = math.ceil(K / s) * math.ceil(N / s)
    return s + (T - 1) * max(M, s) + M + 2 * s - 2


@checked
def padded_dim(n: PositiveInt, mxu_size: PositiveInt = 128) -> int:
    """``n`` rounded up to a multiple of the MXU edge: what the hardware actually multiplies."""
    return math.ceil(n / mxu_size) * mxu_size


@checked
def padding_efficiency(K: PositiveInt, N: PositiveInt, mxu_size: PositiveInt = 128) -> float:
    """Fraction of the MXU's multiply-adds that are useful for a ``[·, K] @ [K, N]`` matmul whose weight dimensions
    are padded to multiples of ``mxu_size``: ``K·N / (padded K · padded N)``."""
    return (K * N) / (padded_dim(K, mxu_size) * padded_dim(N, mxu_size))


def _matrices(a, b) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` as float64 matrices of finite numbers whose inner dimensions match, else a clear error."""
    arrays = []
    for name, m in (("a", a), ("b", b)):
        if isinstance(m, (str, bytes)) or m is None:
            raise TypeError(f"{name} must be a 2-D array of numbers; got {type(m).__name__}")
        try:
            arr = np.asarray(m, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{name} must be a 2-D array of numbers; got {type(m).__name__} ({err})") from None
        if arr.ndim == 2 and not np.isfinite(arr).all():
            raise ValueError(f"{name} must hold finite numbers; it has inf or nan")
        arrays.append(arr)
    a, b = arrays
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"a and b must be 2-D matrices; got shapes {a.shape} and {b.shape}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions must match: a is {a.shape}, b is {b.shape}")
    if min(a.shape + b.shape) == 0:
        raise ValueError(f"a and b must be non-empty; got shapes {a.shape} and {b.shape}")
    return a, b


def _check_work(a_shape, b_shape, s: int, expected: int, record_cycles: int) -> None:
    """Refuse a simulation past the caps: :data:`MAX_CYCLES`, :data:`MAX_PE_CYCLES`, :data:`MAX_RECORD_PE_CYCLES`."""
    if expected > MAX_CYCLES:
        raise ValueError(
            f"a is {a_shape} and b is {b_shape}: simulating {expected:,} cycles exceeds "
            f"MAX_CYCLES={MAX_CYCLES:,}; use predicted_cycles for large shapes"
        )
    if s * s * expected > MAX_PE_CYCLES:
        raise ValueError(
            f"a is {a_shape} and b is {b_shape}: simulating {expected:,} cycles of a {s}x{s} array "
            f"exceeds MAX_PE_CYCLES={MAX_PE_CYCLES:,}; use predicted_cycles for large shapes"
        )
    if s * s * min(record_cycles, expected) > MAX_RECORD_PE_CYCLES:
        raise ValueError(
            f"record_cycles={record_cycles} on a {s}x{s} array would record "
            f"{s * s * min(record_cycles, expected):,} PE-cycles, more than "
            f"MAX_RECORD_PE_CYCLES={MAX_RECORD_PE_CYCLES:,}; record fewer cycles"
        )


def _weight_tiles(a: np.ndarray, b: np.ndarray, s: int):
    """``a`` zero-padded to whole contraction blocks, and the ``S × S`` weight tiles of padded ``b`` in streaming
    order (for each output column block, every contraction block) with each tile's contraction and column block."""
    M, K = a.shape
    N = b.shape[1]
    kt, nt = math.ceil(K / s), math.ceil(N / s)
    Kp, Np = kt * s, nt * s
    a_pad = np.zeros((M, Kp))
    a_pad[:, :K] = a
    b_pad = np.zeros((Kp, Np))
    b_pad[:K, :N] = b
    order = [(nb, kb) for nb in range(nt) for kb in range(kt)]
    w_tiles = np.stack([b_pad[kb * s : (kb + 1) * s, nb * s : (nb + 1) * s] for nb, kb in order])  # [T, S, S]
    tile_k = np.array([kb for _, kb in order])
    tile_n = np.array([nb for nb, _ in order])
    return a_pad, w_tiles, tile_k, tile_n


def _skewed_feed(a_pad: np.ndarray, tile_k: np.ndarray, starts: tuple, M: int, s: int):
    """The skewed input of every cycle, worked out up front: ``(feed_x, feed_row, feed_tile)``, each ``[cycles, S]``.

    At the left edge, on cycle c, row ``entry_m[c]`` of tile ``entry_tau[c]`` enters row 0 of the array (-1: nothing
    enters); tiles start at least M cycles apart, so no two rows enter on the same cycle. On cycle t, row i of the
    left column receives the job that entered row 0 on cycle t - i (feed_row/feed_tile -1 and feed_x 0 where none
    does)."""
    last_entry = starts[-1] + M - 1
    entry_tau = np.full(last_entry + 1, -1, dtype=np.int64)
    entry_m = np.full(last_entry + 1, -1, dtype=np.int64)
    for tau, st in enumerate(starts):
        entry_tau[st : st + M] = tau
        entry_m[st : st + M] = np.arange(M)
    n_feed = last_entry + s
    entered = np.arange(n_feed)[:, None] - np.arange(s)[None, :]  # [n_feed, S]
    inside = (entered >= 0) & (entered <= last_entry)
    feed_tile = np.where(inside, entry_tau[np.clip(entered, 0, last_entry)], -1)
    feed_row = np.where(feed_tile >= 0, entry_m[np.clip(entered, 0, last_entry)], -1)
    cols = np.where(feed_tile >= 0, tile_k[np.maximum(feed_tile, 0)] * s + np.arange(s)[None, :], 0)
    feed_x = np.where(feed_tile >= 0, a_pad[np.maximum(feed_row, 0), cols], 0.0)
    return feed_x, feed_row, feed_tile


def _snapshot(t: int, busy, x_reg, psum, row_reg, tile_reg) -> Snapshot:
    """The array's state after cycle ``t``: inputs and partial sums of busy PEs (nan elsewhere) and the tags."""
    return Snapshot(
        cycle=t,
        x=np.where(busy, x_reg, np.nan),
        psum=np.where(busy, psum, np.nan),
        row=row_reg.copy(),
        tile=tile_reg.copy(),
    )


@checked
def simulate_matmul(
    a,
    b,
    array_size: capped(MAX_ARRAY_SIZE) = 128,
    record_cycles: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_RECORD_CYCLES)] = 0,
) -> SystolicResult:
    """Multiply ``a[M, K] @ b[K, N]`` the way a weight-stationary MXU does, one clock cycle at a time.

    ``b`` is cut into ``S × S`` weight tiles (zero-padded to multiples of ``S = array_size``), ordered by output column
    block then contraction block; all ``M`` rows of ``a`` stream past each tile. ``record_cycles`` keeps a
    :class:`Snapshot` of the first that many cycles (for :func:`tpu_notes.plots.systolic_steps`). Arithmetic is done in
    float64, so the output matches ``a @ b`` to rounding. The simulation is bounded: ``array_size`` at most
    :data:`MAX_ARRAY_SIZE`, the cycles at most :data:`MAX_CYCLES` and ``S² × cycles`` at most :data:`MAX_PE_CYCLES`
    (use :func:`predicted_cycles` beyond), ``record_cycles`` at most :data:`MAX_RECORD_CYCLES` and the recorded
    ``S² × cycles`` at most :data:`MAX_RECORD_PE_CYCLES`: a call at the caps runs in seconds.
    """
    s = array_size
    a, b = _matrices(a, b)
    M, K = a.shape
    N = b.shape[1]
    expected = predicted_cycles(M, K, N, s)
    _check_work(a.shape, b.shape, s, expected, record_cycles)
    a_pad, w_tiles, tile_k, tile_n = _weight_tiles(a, b, s)
    T = len(w_tiles)
    Np = math.ceil(N / s) * s
    starts = tile_schedule(T, M, s)
    last_entry = starts[-1] + M - 1
    feed_x, feed_row, feed_tile = _skewed_feed(a_pad, tile_k, starts, M, s)
    n_feed = len(feed_x)

    x_reg = np.zeros((s, s))
    row_reg = np.full((s, s), -1, dtype=np.int64)  # tag: streamed row index, -1 = empty
    tile_reg = np.full((s, s), -1, dtype=np.int64)  # tag: weight tile index
    psum = np.zeros((s, s))
    acc = np.zeros((M, Np))
    snapshots = []
    ii, jj = np.meshgrid(np.arange(s), np.arange(s), indexing="ij")

    t, last_busy = 0, -1
    while t <= last_entry or last_busy == t - 1:  # run until every row has entered and the array has drained
        # 1. inputs move one PE to the right; new (skewed) inputs enter the left column.
        x_reg[:, 1:] = x_reg[:, :-1]
        row_reg[:, 1:] = row_reg[:, :-1]
        tile_reg[:, 1:] = tile_reg[:, :-1]
        if t < n_feed:
            x_reg[:, 0], row_reg[:, 0], tile_reg[:, 0] = feed_x[t], feed_row[t], feed_tile[t]
        else:
            x_reg[:, 0], row_reg[:, 0], tile_reg[:, 0] = 0.0, -1, -1
        # 2. every busy PE multiplies by the weight of its datum's tile and adds the sum arriving from above.
        busy = row_reg >= 0
        w = np.where(busy, w_tiles[np.where(busy, tile_reg, 0), ii, jj], 0.0)
        above = np.vstack([np.zeros((1, s)), psum[:-1, :]])
        psum = np.where(busy, above + x_reg * w, 0.0)
        # 3. the bottom row's sums are finished dot products: accumulate them into the output buffer.
        #    (one result per column, so no output element is hit twice in a cycle)
        j = np.nonzero(busy[s - 1])[0]
        acc[row_reg[s - 1, j], tile_n[tile_reg[s - 1, j]] * s + j] += psum[s - 1, j]
        if t < record_cycles:
            snapshots.append(_snapshot(t, busy, x_reg, psum, row_reg, tile_reg))
        if busy.any():
            last_busy = t
        t += 1

    cycles = last_busy + 1  # observed: the cycle after the last result left the array
    macs = M * K * N
    return SystolicResult(
        output=acc[:, :N],
        cycles=cycles,
        array_size=s,
        n_tiles=T,
        macs=macs,
        pe_cycles=s * s * cycles,
        utilization=macs / (s * s * cycles),
        tile_starts=starts,
        snapshots=tuple(snapshots),
    )


@checked
def mxu_flops_per_cycle(mxu_size: PositiveInt = 128, rows: PositiveInt = 8) -> float:
    """FLOPs per cycle of one MXU: a ``[rows, S] @ [S, S]`` step (``2·rows·S²`` FLOPs) takes ``rows`` cycles in
    steady state, so ``2·S²`` FLOPs per cycle (32 768 for a 128 × 128 array, 4× that for 256 × 256)."""
    return 2.0 * rows * mxu_size * mxu_size / rows


def derived_peak_flops(chip) -> float:
    """Peak bf16 FLOP/s of a TPU from its parts: cores × MXUs per core × FLOPs per cycle per MXU × clock (Hz)."""
    c = get_chip(chip)
    missing = [f for f in ("cores_per_chip", "mxus_per_core", "clock_hz", "mxu_size") if getattr(c, f) is None]
    if missing:
        raise ValueError(
            f"chip {c.name!r} lacks {missing} in tpu_notes.hardware; pick a chip with all of them (e.g. 'v5e' or 'v5p')"
        )
    return c.cores_per_chip * c.mxus_per_core * mxu_flops_per_cycle(c.mxu_size) * c.clock_hz


@checked
def vpu_flops(
    chip, sublanes: PositiveInt = 8, lanes: PositiveInt = 128, alus_per_lane: PositiveInt | None = None
) -> float:
    """VPU throughput of one TensorCore in FLOP/s: ``sublanes × lanes × ALUs per lane × clock`` (one op per ALU per
    cycle; 4 ALUs per lane on v5p, 2 on v4). Elementwise work runs here, in fp32. ``alus_per_lane`` defaults to the
    chip's ``vpu_alus_per_lane`` (raises ``ValueError`` naming it where the table has none, e.g. v5e)."""
    c = get_chip(chip)
    if c.clock_hz is None:
        raise ValueError(f"chip {c.name!r} has no clock_hz in tpu_notes.hardware; use e.g. 'v4p' or 'v5p'")
    if alus_per_lane is None:
        if c.vpu_alus_per_lane is None:
            raise ValueError(
                f"chip {c.name!r} has no vpu_alus_per_lane in tpu_notes.hardware; pass alus_per_lane "
                "or use e.g. 'v4p' or 'v5p'"
            )
        alus_per_lane = c.vpu_alus_per_lane
    return float(sublanes * lanes * alus_per_lane) * c.clock_hz


def vreg_file_bytes(chip) -> int:
    """Bytes of one TensorCore's vector registers: ``vregs_per_core`` registers of 8 × 128 32-bit words (4 KiB)
    each, 256 KiB on v5p (Chapter 2's appendix). Raises ``ValueError`` where the table has no count."""
    c = get_chip(chip)
    if c.vregs_per_core is None:
        raise ValueError(f"chip {c.name!r} has no vregs_per_core in tpu_notes.hardware; use e.g. 'v4p' or 'v5p'")
    return c.vreg_file_bytes
