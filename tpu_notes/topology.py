"""TPU slices: chips on a 2D or 3D torus, how far apart they are, and how long bytes take to move (Chapter 2).

A *slice* is a set of TPU chips joined by ICI (inter-chip interconnect) links to their nearest neighbours: 4 on a 2D
torus (v3, v5e, v6e), 6 on a 3D torus (v4p, v5p, TPU7x). The largest slice is a *pod*; slices talk to each other, and
hosts to hosts, over the much slower data-centre network (DCN), and each chip talks to its host CPU over PCIe.

Wraparound links (the edges that close each ring into a torus) follow each generation's rule, as the scaling book's
``tpus.md`` describes them:

* 2D pods (v3, v5e, v6e): an axis wraps only when it spans the full pod axis (16 on v5e/v6e; an 8 × 16 v5e slice wraps
  on its long axis only).
* 3D pods (v4p, v5p; assumed for TPU7x, whose torus the book does not detail): wraparounds come from the optical
  switches that join whole 4 × 4 × 4 cubes. A slice smaller than a cube (every axis at most 4, at least one below 4:
  2 × 2 × 1, 2 × 2 × 4, 2 × 4 × 4...) has no wraparound at all; a slice of one or more whole cubes (every axis a
  multiple of 4: 4 × 4 × 4, 4 × 4 × 8...) wraps on every axis. Any other 3D shape (4 × 4 × 6, 2 × 2 × 8, 5 × 5 × 5)
  is neither, cannot be built, and :class:`Slice` rejects it.

The point-to-point transfer model is the book's: ``T = bytes / (ports · W_link_oneway) + hops · T_hop`` with
``T_hop ≈ 1 µs`` (``Chip.hop_latency`` of :mod:`tpu_notes.hardware`); latency and bandwidth add.

A :class:`Slice` is a :class:`tpu_notes.system.System`: its axes are ``"x"``, ``"y"`` (and ``"z"``), each with its
size, the bidirectional per-link ICI bandwidth the collective formulas of Chapter 3 take, the chip's hop latency,
and :meth:`Slice.collective_time` over any set of them, as a :class:`~tpu_notes.gpu.GpuCluster` answers for its
NVLink node and fat-tree levels. It also places a layout's parallelism degrees on its axes (:meth:`Slice.place`,
Chapter 5) and prices a collective over the placed parts (:meth:`Slice.group_collective`).

**What Cloud TPU schedules.** A shape :class:`Slice` can build is not always one a user can ask for: Cloud TPU
schedules at most ``Chip.max_slice_chips`` chips in one slice (v5p: 6,144 chips = 96 cubes, 16x16x24, of its
8,960-chip pod; v4: 4,096; v5e and v6e: 256) and offers only some shapes (``Chip.slice_topologies``: 1x1 ...
16x16 on v5e/v6e; on v4/v5p the sub-cube shapes 2x2x1, 2x2x2, 2x2x4, 2x4x4 and any shape of whole 4x4x4 cubes).
:attr:`Slice.schedulable` says whether one slice of a shape can be requested; larger runs join slices over DCN
(``n_slices``). Sources are on each chip's figures in :mod:`tpu_notes.hardware`. Chips without those figures (v3,
TPU7x) are taken as schedulable up to the whole pod.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from . import collectives, rules
from .hardware import CHIPS, ICI_HOP_LATENCY, Chip, get_chip
from .system import AxisPart, check_group_collective
from .units import DTypeName, NonNegativeFloat, PositiveInt, check_choice, check_positive, check_sizes, checked, fmt

#: Most chips :func:`hop_grid` draws (it builds an array with one entry per chip).
MAX_GRID_CHIPS = 2**20

#: Per-hop ICI latency in seconds: ``tpu_notes.hardware.ICI_HOP_LATENCY`` (every TPU's ``Chip.hop_latency``), kept
#: under this name for Chapter 2.
HOP_LATENCY = ICI_HOP_LATENCY

#: Edge of the optically switched cube that 3D pods (v4p, v5p) are built from, in chips (scaling book, tpus.md).
CUBE = 4

#: Axis names accepted by :meth:`Slice.collective_time` besides integer indices.
AXIS_NAMES = ("x", "y", "z")

#: Collectives :meth:`Slice.collective_time` knows, mapped to their functions in ``tpu_notes.collectives``.
COLLECTIVE_KINDS = ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")


@dataclass(frozen=True)
class TransferTime:
    """How long a transfer takes, in seconds: bandwidth and latency terms add."""

    nbytes: float  # bytes moved
    bandwidth_time: float  # nbytes / (links · bandwidth per link), seconds
    latency_time: float  # hops · per-hop latency (or a fixed link latency), seconds
    total: float  # bandwidth_time + latency_time, seconds
    hops: int  # ICI hops between the endpoints (0 for PCIe and DCN transfers)
    bandwidth: float  # aggregate bandwidth used, bytes/s

    def __repr__(self) -> str:
        return (
            f"TransferTime(nbytes={fmt(self.nbytes, 'B')}, bandwidth_time={fmt(self.bandwidth_time, 's')}, "
            f"latency_time={fmt(self.latency_time, 's')}, total={fmt(self.total, 's')}, hops={self.hops})"
        )


def _check_tpu(chip) -> Chip:
    c = get_chip(chip)
    if c.kind != "tpu" or c.ici_dims is None or c.pod_shape is None:
        tpus = [n for n, ch in _tpu_chips()]
        raise ValueError(f"chip must be a TPU with an ICI torus, one of {tpus}; got {c.name!r}")
    return c


def _tpu_chips():
    return [(n, c) for n, c in CHIPS.items() if c.kind == "tpu" and c.ici_dims is not None]


def _as_shape(shape, dims: int, chip_name: str) -> tuple[int, ...]:
    if isinstance(shape, (str, bytes)) or not isinstance(shape, Sequence):
        raise TypeError(f"shape must be a tuple of {dims} chip counts, e.g. {(4,) * dims}; got {shape!r}")
    if len(shape) != dims:
        raise ValueError(f"shape must have {dims} axes on {chip_name} (a {dims}D torus); got {tuple(shape)}")
    out = []
    for i, n in enumerate(shape):
        if isinstance(n, bool) or not isinstance(n, int) and not (hasattr(n, "__index__")):
            raise TypeError(f"shape[{i}] must be an integer number of chips; got {n!r}")
        n = int(n)
        if n < 1:
            raise ValueError(f"shape[{i}] must be >= 1 chip; got {n}")
        out.append(n)
    return tuple(out)


@dataclass(frozen=True)
class Slice:
    """A TPU slice: ``Slice("v5e", (4, 4))`` or ``Slice("v5p", (4, 4, 8))``; ``Slice("v6e")`` is the full pod.

    ``chip`` is a chip name or :class:`~tpu_notes.hardware.Chip` (stored as the ``Chip``); ``shape`` gives chips per
    axis and must have as many axes as the generation's torus (2 or 3) and fit inside its pod (axes may be listed
    in any order); a 3D shape must also be buildable: smaller than one 4 × 4 × 4 cube, or whole cubes. Anything else
    raises ``ValueError`` (``TypeError`` for a shape that is not a tuple of integers).
    """

    chip: Chip  # the TPU generation
    shape: tuple = None  # chips along each torus axis (None: the chip's full pod)

    def __post_init__(self):
        c = _check_tpu(self.chip)
        shape = _as_shape(c.pod_shape if self.shape is None else self.shape, c.ici_dims, c.name)
        pod = c.pod_shape
        if any(s > p for s, p in zip(sorted(shape), sorted(pod))):
            raise ValueError(
                f"shape {shape} does not fit in a {c.name} pod of shape {pod}; each axis (in some order) "
                f"must be at most the pod's, e.g. {pod} itself"
            )
        if c.ici_dims == 3 and max(shape) > CUBE and any(n % CUBE for n in shape):
            raise ValueError(
                f"shape {shape} cannot be built on {c.name}: a 3D slice is either smaller than a "
                f"{CUBE}x{CUBE}x{CUBE} cube (every axis <= {CUBE}, e.g. (2, 2, 4)) or made of whole cubes "
                f"(every axis a multiple of {CUBE}, e.g. (4, 4, 8))"
            )
        object.__setattr__(self, "chip", c)
        object.__setattr__(self, "shape", shape)

    def __repr__(self) -> str:
        return f"Slice({self.chip.name!r}, {self.shape})"

    def __str__(self) -> str:
        """The readable name: ``"v5p 16x16x16"`` (chip, then the shape joined by ``x``); ``repr`` is the
        constructor call, ``Slice('v5p', (16, 16, 16))``."""
        return f"{self.chip} {'x'.join(str(n) for n in self.shape)}"

    # ---- sizes -------------------------------------------------------------------------------------------------
    @property
    def n_chips(self) -> int:
        """Chips in the slice (product of the shape)."""
        return math.prod(self.shape)

    @property
    def chips_per_host(self) -> int:
        """Chips attached to one host CPU (product of the chip's host shape: 8 on v5e, 4 on v5p)."""
        return math.prod(self.chip.host_shape)

    @property
    def n_hosts(self) -> int:
        """Host CPUs serving the slice: ``ceil(n_chips / chips_per_host)`` (a slice smaller than a host still needs
        one)."""
        return math.ceil(self.n_chips / self.chips_per_host)

    @property
    def n_cores(self) -> int:
        """TensorCores in the slice (``n_chips × cores_per_chip``)."""
        if self.chip.cores_per_chip is None:
            raise ValueError(f"tpu_notes.hardware has no cores_per_chip for {self.chip.name!r}")
        return self.n_chips * self.chip.cores_per_chip

    @property
    def links_per_chip(self) -> int:
        """ICI ports on each chip: 2 per torus axis (4 on a 2D torus, 6 on a 3D torus)."""
        return 2 * self.chip.ici_dims

    @checked
    def total_flops(self, dtype: DTypeName = "bf16") -> float:
        """Peak matmul throughput of the whole slice, FLOP/s (OP/s for int8)."""
        return self.n_chips * self.chip.peak_flops(dtype)

    @property
    def total_hbm_bytes(self) -> float:
        """HBM capacity of the whole slice, bytes."""
        return self.n_chips * self.chip.hbm_bytes

    @property
    def total_hbm_bw(self) -> float:
        """Aggregate HBM bandwidth of the whole slice, bytes/s."""
        return self.n_chips * self.chip.hbm_bw

    # ---- the torus ---------------------------------------------------------------------------------------------
    @property
    def wraparound(self) -> tuple[bool, ...]:
        """Per axis: does this axis close into a ring? (See the module docstring for each generation's rule.)"""
        if self.chip.ici_dims == 2:
            full = max(self.chip.pod_shape)
            return tuple(n == full for n in self.shape)
        # 3D: __post_init__ admits only sub-cube slices and slices of whole cubes. Wraparound links come from the
        # optical switches, which only whole cubes use: all axes wrap, or none does.
        whole_cubes = all(n % CUBE == 0 for n in self.shape)
        return (whole_cubes,) * len(self.shape)

    def _check_coord(self, name: str, coord) -> tuple[int, ...]:
        if isinstance(coord, (str, bytes)) or not isinstance(coord, Sequence) or len(coord) != len(self.shape):
            raise TypeError(f"{name} must be a tuple of {len(self.shape)} integer coordinates; got {coord!r}")
        out = []
        for i, (c, n) in enumerate(zip(coord, self.shape)):
            if isinstance(c, bool) or not hasattr(c, "__index__"):
                raise TypeError(f"{name}[{i}] must be an integer; got {c!r}")
            if not 0 <= int(c) < n:
                raise ValueError(f"{name}[{i}] must be in 0..{n - 1} for shape {self.shape}; got {c}")
            out.append(int(c))
        return tuple(out)

    def axis_hops(self, a, b, *, _names=("a", "b")) -> tuple[int, ...]:
        """Hops along each axis between chips ``a`` and ``b``: ``|d|``, or ``min(|d|, n - |d|)`` on a wrapped axis."""
        a = self._check_coord(_names[0], a)
        b = self._check_coord(_names[1], b)
        out = []
        for x, y, n, wrap in zip(a, b, self.shape, self.wraparound):
            d = abs(x - y)
            out.append(min(d, n - d) if wrap else d)
        return tuple(out)

    def hops(self, a, b) -> int:
        """ICI hops on a shortest path between chips ``a`` and ``b`` (coordinate tuples)."""
        return sum(self.axis_hops(a, b))

    @property
    def can_twist(self) -> bool:
        """Whether Google Cloud offers this shape as a *twisted* torus (v4/v5p): 3D, every axis a multiple of 4,
        and sorted axes ``A ≤ B ≤ C`` with ``2A = B = C`` or ``2A = 2B = C`` (e.g. 4x4x8, 4x8x8). The hop counts
        here are for the plain torus; a twisted one has shorter worst-case paths."""
        if len(self.shape) != 3 or any(n % CUBE for n in self.shape):
            return False
        a, b, c = sorted(self.shape)
        return (2 * a == b == c) or (2 * a == 2 * b == c)

    @property
    def diameter(self) -> int:
        """Largest hop count between two chips: ``n // 2`` per wrapped axis, ``n - 1`` per open one."""
        return sum(n // 2 if wrap else n - 1 for n, wrap in zip(self.shape, self.wraparound))

    def coords(self):
        """Every chip coordinate, in row-major order."""
        return list(itertools.product(*(range(n) for n in self.shape)))

    def hop_grid(self, origin=None):
        """numpy array of the slice's shape holding the hops from ``origin`` (default chip 0) to every chip."""
        origin = self._check_coord("origin", origin if origin is not None else (0,) * len(self.shape))
        return hop_grid(self.shape, self.wraparound, origin)

    # ---- moving bytes ------------------------------------------------------------------------------------------
    @checked
    def transfer_time(
        self,
        nbytes: NonNegativeFloat,
        src,
        dst,
        *,
        ports: PositiveInt | None = None,
        hop_latency: NonNegativeFloat | None = None,
    ) -> TransferTime:
        """Point-to-point ICI transfer of ``nbytes`` bytes from chip ``src`` to chip ``dst``.

        ``T = nbytes / (ports · W_link_oneway) + hops · hop_latency`` (``hop_latency`` in seconds; ``None``: the
        chip's ``hop_latency``, 1 µs). ``ports`` (the links used in parallel) defaults to the number of axes along
        which ``src`` and ``dst`` differ (data can leave along each of them), at least 1, and at most
        ``links_per_chip``.
        """
        hop_latency = self._hop_latency(hop_latency)
        per_axis = self.axis_hops(src, dst, _names=("src", "dst"))
        if ports is None:
            ports = max(1, sum(h > 0 for h in per_axis))
        if ports > self.links_per_chip:
            raise ValueError(f"ports must be at most links_per_chip={self.links_per_chip}; got {ports}")
        hops = sum(per_axis)
        bw = ports * self.chip.bandwidth("ici_oneway")
        bw_t = nbytes / bw
        lat_t = hops * hop_latency
        return TransferTime(
            nbytes=nbytes, bandwidth_time=bw_t, latency_time=lat_t, total=bw_t + lat_t, hops=hops, bandwidth=bw
        )

    def collective_time(self, kind: str, nbytes: float, axes=None, *, hop_latency: float | None = None):
        """Time of a collective over ``axes`` of this slice, from :mod:`tpu_notes.collectives`.

        ``kind``: "all_gather", "reduce_scatter", "all_reduce" or "all_to_all" (any spelling
        :func:`tpu_notes.collectives.canonical_kind` reads, e.g. "all-gather"). ``nbytes`` is the size of the whole
        (gathered / unreduced) array. ``axes``: an axis index or name ("x", "y", "z"), a sequence of them, or ``None``
        for every axis. Each chosen axis is passed with its own size and wraparound flag; the collective uses the
        bidirectional per-link bandwidth (``Chip.ici_bw_bidi``) and ``n_axes = len(axes)`` sets of links.
        ``hop_latency``: seconds per hop (``None``: the chip's, 1 µs). Returns a
        ``tpu_notes.collectives.CollectiveTime``.
        """
        if isinstance(kind, str) and kind not in COLLECTIVE_KINDS:
            try:
                kind = collectives.canonical_kind(kind).replace("-", "_")
            except ValueError:
                pass  # check_choice below names the allowed kinds
        kind = check_choice("kind", kind, COLLECTIVE_KINDS)
        idx = self._axis_indices(axes)
        sizes = tuple(self.shape[i] for i in idx)
        wraps = tuple(self.wraparound[i] for i in idx)
        fn = getattr(collectives, f"{kind}_time")
        if len(idx) == 1:
            sizes, wraps = sizes[0], wraps[0]
        return fn(
            nbytes,
            sizes,
            self.chip.bandwidth("ici"),
            wraparound=wraps,
            n_axes=len(idx),
            hop_latency=self._hop_latency(hop_latency),
        )

    # ---- what Cloud TPU schedules -----------------------------------------------------------------------------
    @property
    def max_chips(self) -> int:
        """Most chips one slice of this chip may have when Cloud TPU schedules it (``Chip.max_slice_chips``; the
        whole pod where the chip has no such figure)."""
        return largest_slice_chips(self.chip)

    @property
    def why_not_schedulable(self) -> str:
        """Why Cloud TPU would not schedule this slice in one piece (``""`` when it would): too many chips for one
        slice, or a shape not among the offered topologies (see the module docstring)."""
        c = self.chip
        top = self.max_chips
        if self.n_chips > top:
            big = largest_shape(c)
            k = -(-self.n_chips // top)
            return (
                f"{self} has {self.n_chips:,} chips, more than the largest slice Cloud TPU schedules on {c.name}: "
                f"{top:,} chips ({'x'.join(map(str, big))}); ask for smaller slices joined over DCN with n_slices "
                f"(e.g. n_slices={k} of {c.name} {'x'.join(map(str, big))})"
            )
        if not _offered(c, self.shape):
            return f"{self} is not a slice shape Cloud TPU offers on {c.name}: {_offered_text(c)}"
        return ""

    @property
    def schedulable(self) -> bool:
        """Whether one slice of this shape can be requested from Cloud TPU (:attr:`why_not_schedulable`)."""
        return not self.why_not_schedulable

    def check_schedulable(self, argument: str = "slice") -> Slice:
        """This slice, or :class:`tpu_notes.rules.Illegal` (a ``ValueError``, kind ``"not schedulable"``) whose
        message names ``argument``, gives the largest slice and suggests ``n_slices``."""
        why = self.why_not_schedulable
        if why:
            raise rules.Illegal("not schedulable", f"{argument}: {why}", why)
        return self

    # ---- Chapter 5: placing a layout ---------------------------------------------------------------------------
    @property
    def joins_over_dcn(self) -> bool:
        """True: copies of a TPU slice are joined over the data-centre network (``n_slices``, ``dcn``)."""
        return True

    @property
    def scale_up_size(self) -> int:
        """Chips joined by the scale-up fabric: every chip of the slice (ICI links them all, ``n_chips``)."""
        return self.n_chips

    def place(self, degrees) -> dict[str, tuple[AxisPart, ...]]:
        """Place parallelism ``degrees`` (kind -> degree, in the order to place them: the most bandwidth-hungry
        first) on the torus axes. A kind takes whole axes when their sizes multiply to its degree (a whole axis
        keeps its wraparound); otherwise it also takes a contiguous part of one axis, priced as a line (no
        wraparound). ``ValueError`` when the degrees do not multiply to the slice's chips or do not fit."""
        degrees = _check_degrees(degrees)
        total = math.prod(degrees.values())
        if total != self.n_chips:
            shown = ", ".join(f"{k}={d}" for k, d in degrees.items() if d > 1) or "all 1"
            raise ValueError(
                f"the degrees ({shown}) multiply to {total} chips, but the slice {self.shape} has {self.n_chips}; "
                "they must be equal (dcn counts slices, not chips)"
            )
        left = list(self.shape)  # chips of each axis not yet given away
        whole = [True] * len(left)  # axis untouched so far
        parts: dict[str, tuple[AxisPart, ...]] = {}
        for kind, d in degrees.items():
            if d == 1:
                parts[kind] = ()
                continue
            best = None
            free = [i for i in range(len(left)) if whole[i]]
            for r in range(len(free), -1, -1):
                for combo in itertools.combinations(free, r):
                    prod = math.prod(left[i] for i in combo)
                    if d % prod:
                        continue
                    rest = d // prod
                    if rest == 1:
                        best = (combo, None)
                        break
                    for j in range(len(left)):
                        if j not in combo and left[j] % rest == 0 and left[j] > 1:
                            best = (combo, j)
                            break
                    if best:
                        break
                if best:
                    break
            if best is None:
                raise ValueError(
                    f"{kind}={d} cannot be placed on the axes left of slice {self.shape} ({left}); choose "
                    "degrees that are products of whole axes and parts of axes"
                )
            combo, j = best
            got = [AxisPart(i, left[i], self.wraparound[i]) for i in combo]
            for i in combo:
                left[i], whole[i] = 1, False
            if j is not None:
                rest = d // math.prod(p.size for p in got)
                got.append(AxisPart(j, rest, False))
                left[j] //= rest
                whole[j] = False
            parts[kind] = tuple(got)
        return parts

    def group_collective(
        self, op: str, nbytes: float, parts, *, group: int = 0, span: int = 0, hop_latency: float, phases: str = "max"
    ) -> float:
        r"""Seconds of collective ``op`` (any spelling of :func:`tpu_notes.collectives.canonical_kind`) on a
        ``nbytes``-byte array over one group placed on ``parts`` (:class:`~tpu_notes.system.AxisPart`\ s of
        this slice): the torus formulas of :mod:`tpu_notes.collectives` with each part's size and wraparound, at
        the bidirectional ICI bandwidth. ``group``, ``span`` and ``phases`` are the GPU cluster's and change
        nothing here (a torus collective runs on all its axes at once)."""
        op = check_group_collective(op, phases)
        if not parts:
            return 0.0
        fn = getattr(collectives, op.replace("-", "_") + "_time")
        return fn(
            nbytes,
            [pt.size for pt in parts],
            self.chip.bandwidth("ici"),
            wraparound=[pt.wraparound for pt in parts],
            hop_latency=hop_latency,
        ).total

    def link(self, parts) -> str:
        """The interconnect a group placed on ``parts`` talks over: ``"ici"``, for any part of a slice (the
        efficiency model's name for its achieved bandwidth and per-call latency)."""
        return "ici"

    def stage_send_time(self, nbytes: float, parts, hop_latency: float) -> float:
        """Seconds of one pipeline send of ``nbytes`` to the neighbouring stage: one hop over one ICI link one
        way (``nbytes / W_ici_oneway + hop_latency``)."""
        return nbytes / self.chip.bandwidth("ici_oneway") + hop_latency

    # ---- the System questions (tpu_notes.system) ---------------------------------------------------------------
    @property
    def n_devices(self) -> int:
        """Chips in the slice (``n_chips``: the name every :class:`~tpu_notes.system.System` answers to)."""
        return self.n_chips

    @property
    def axes(self) -> tuple[str, ...]:
        """The torus axes by name: ``("x", "y")`` on a 2D torus, ``("x", "y", "z")`` on a 3D one."""
        return AXIS_NAMES[: len(self.shape)]

    def axis_size(self, axis) -> int:
        """Chips along ``axis`` (a name from :attr:`axes` or an index)."""
        return self.shape[self._one_axis(axis)]

    def bandwidth(self, axis) -> float:
        """Bytes/s of one ICI link **both directions together** (``Chip.ici_bw_bidi``) along ``axis``: the
        ``W_ici`` of Chapters 3 and 5 (the collective formulas halve it per direction and handle wraparound)."""
        self._one_axis(axis)
        return self.chip.bandwidth("ici")

    def latency(self, axis) -> float:
        """Seconds per ICI hop along ``axis`` (``Chip.hop_latency``, 1 µs on every TPU here)."""
        self._one_axis(axis)
        return self._hop_latency(None)

    def _one_axis(self, axis) -> int:
        if isinstance(axis, (list, tuple)) or axis is None:
            raise TypeError(f"axis must be one axis name or index, from {self.axes}; got {axis!r}")
        return self._axis_indices(axis, "axis")[0]

    def _hop_latency(self, hop_latency) -> float:
        if hop_latency is None:
            hop_latency = self.chip.hop_latency if self.chip.hop_latency is not None else ICI_HOP_LATENCY
        return check_positive("hop_latency", hop_latency, allow_zero=True)

    def _axis_indices(self, axes, argument: str = "axes") -> tuple[int, ...]:
        dims = len(self.shape)
        allowed = list(range(dims)) + list(AXIS_NAMES[:dims])
        if axes is None:
            return tuple(range(dims))
        if isinstance(axes, (int, str)) and not isinstance(axes, bool):
            axes = (axes,)
        if not isinstance(axes, (list, tuple)):
            raise TypeError(
                f"{argument} must be an axis index or name, a sequence of them, or None (from {allowed}); got {axes!r}"
            )
        idx = []
        for ax in axes:
            if isinstance(ax, str) and ax.lower() in AXIS_NAMES[:dims]:
                idx.append(AXIS_NAMES.index(ax.lower()))
            elif isinstance(ax, int) and not isinstance(ax, bool) and 0 <= ax < dims:
                idx.append(ax)
            else:
                raise ValueError(f"{argument} must name axes of shape {self.shape}, from {allowed}; got {ax!r}")
        if len(set(idx)) != len(idx) or not idx:
            raise ValueError(f"{argument} must be distinct and non-empty, from {allowed}; got {axes!r}")
        return tuple(idx)


def _check_degrees(degrees) -> dict[str, int]:
    if not isinstance(degrees, Mapping) or not degrees:
        raise TypeError(f"degrees must be a non-empty mapping of parallelism kind -> degree; got {degrees!r}")
    out = {}
    for k, d in degrees.items():
        if not isinstance(k, str) or isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"degrees must map kind names to positive integers; got {k!r}: {d!r}")
        out[k] = d
    return out


def largest_slice_chips(chip) -> int:
    """Most chips of one slice of TPU ``chip`` Cloud TPU schedules: ``Chip.max_slice_chips`` (v5p: 6,144; v4:
    4,096; v5e, v6e: 256), else the whole pod."""
    c = _check_tpu(chip)
    return c.max_slice_chips if c.max_slice_chips is not None else math.prod(c.pod_shape)


def _offered(c: Chip, shape) -> bool:
    """Whether Cloud TPU offers a slice of ``shape`` (any axis order) on ``c``, size limit aside."""
    key = tuple(sorted(shape))
    if c.slice_topologies is None or key in c.slice_topologies:
        return True
    return c.ici_dims == 3 and all(n % CUBE == 0 for n in key)


def _offered_text(c: Chip) -> str:
    shapes = ", ".join("x".join(map(str, t)) for t in c.slice_topologies)
    if c.ici_dims == 3:
        return (
            f"below one {CUBE}x{CUBE}x{CUBE} cube the offered shapes are {shapes}; larger slices are whole cubes "
            f"(every axis a multiple of {CUBE}), at most {largest_slice_chips(c):,} chips"
        )
    return f"the offered shapes are {shapes} (axes in any order)"


def schedulable_shapes(chip) -> list[tuple[int, ...]]:
    """Every slice shape of TPU ``chip`` Cloud TPU schedules as one slice, axes sorted, fewest chips first (ties:
    the most compact first): the documented topologies (``Chip.slice_topologies``) and, on a 3D torus, every shape
    of whole 4x4x4 cubes that fits the pod, up to :func:`largest_slice_chips`. For a chip without documented
    topologies (v3, TPU7x): the powers of two at most 2:1 on a 2D torus, the sub-cube shapes and whole cubes on a
    3D one."""
    c = _check_tpu(chip)
    pod = sorted(c.pod_shape)
    top = largest_slice_chips(c)
    if c.ici_dims == 3:
        small = set(c.slice_topologies or ()) or {
            (a, b, d) for a in (1, 2, 4) for b in (1, 2, 4) for d in (1, 2, 4) if a <= b <= d
        }
        cubes = {
            (a, b, d)
            for a in range(CUBE, pod[0] + 1, CUBE)
            for b in range(a, pod[1] + 1, CUBE)
            for d in range(b, pod[2] + 1, CUBE)
        }
        shapes = small | cubes
    elif c.slice_topologies is not None:
        shapes = set(c.slice_topologies)
    else:
        sizes = [2**k for k in range(0, pod[-1].bit_length()) if 2**k <= pod[-1]]
        shapes = {(a, b) for a in sizes for b in sizes if a <= b <= 2 * a}
    fits = [s for s in shapes if all(a <= b for a, b in zip(s, pod)) and math.prod(s) <= top]
    return sorted(fits, key=lambda s: (math.prod(s), s[-1], s))


def largest_shape(chip) -> tuple[int, ...]:
    """The largest slice shape Cloud TPU schedules on ``chip`` (axes sorted; the most compact of the largest):
    16x16x24 on v5p, 16x16x16 on v4, 16x16 on v5e and v6e."""
    shapes = schedulable_shapes(chip)
    most = max(math.prod(s) for s in shapes)
    return min((s for s in shapes if math.prod(s) == most), key=lambda s: (s[-1], s))


def hop_grid(shape, wraparound, origin=None):
    """Hops from ``origin`` (default all zeros) to every chip of a mesh of ``shape`` whose axes wrap where
    ``wraparound`` (one bool per axis) says: pure geometry, for drawing tori a generation would not build."""
    shape = check_sizes("shape", shape)
    if math.prod(shape) > MAX_GRID_CHIPS:
        raise ValueError(
            f"shape {shape} has {math.prod(shape):,} chips; hop_grid draws at most MAX_GRID_CHIPS={MAX_GRID_CHIPS:,}"
        )
    if (
        isinstance(wraparound, (str, bytes))
        or not isinstance(wraparound, (list, tuple))
        or len(wraparound) != len(shape)
        or not all(isinstance(w, bool) for w in wraparound)
    ):
        raise ValueError(f"wraparound must be {len(shape)} booleans, one per axis; got {wraparound!r}")
    if origin is None:
        origin = (0,) * len(shape)
    elif (
        isinstance(origin, (str, bytes))
        or not isinstance(origin, (list, tuple))
        or len(origin) != len(shape)
        or not all(not isinstance(o, bool) and isinstance(o, int) and 0 <= o < n for o, n in zip(origin, shape))
    ):
        raise ValueError(f"origin must be a coordinate of {len(shape)} integers inside {shape}; got {origin!r}")
    origin = tuple(origin)
    total = np.zeros(shape, dtype=int)
    for ax, (n, wrap, o) in enumerate(zip(shape, wraparound, origin)):
        d = np.abs(np.arange(n) - o)
        if wrap:
            d = np.minimum(d, n - d)
        total += d.reshape([n if k == ax else 1 for k in range(len(shape))])
    return total


@checked
def transfer_time(
    nbytes: NonNegativeFloat,
    src,
    dst,
    topology: Slice,
    *,
    ports: PositiveInt | None = None,
    hop_latency: NonNegativeFloat | None = None,
) -> TransferTime:
    """Point-to-point ICI transfer time on ``topology`` (a :class:`Slice`); see :meth:`Slice.transfer_time`."""
    if not isinstance(topology, Slice):
        raise TypeError(f"topology must be a tpu_notes.topology.Slice; got {type(topology).__name__}")
    return topology.transfer_time(nbytes, src, dst, ports=ports, hop_latency=hop_latency)


def _shared_links_time(nbytes: float, bw: float, latency: float) -> TransferTime:
    """``nbytes`` over links of ``bw`` bytes/s in all, plus ``latency`` seconds, no ICI hops."""
    return TransferTime(
        nbytes=nbytes,
        bandwidth_time=nbytes / bw,
        latency_time=latency,
        total=nbytes / bw + latency,
        hops=0,
        bandwidth=bw,
    )


@checked
def host_transfer_time(
    nbytes: NonNegativeFloat, chip, n_chips: PositiveInt = 1, *, latency: NonNegativeFloat = 0.0
) -> TransferTime:
    """Host ↔ device copy of ``nbytes`` bytes spread over ``n_chips`` chips, each with its own PCIe link.

    ``T = nbytes / (n_chips · W_pcie) + latency`` (``latency`` in seconds, default 0).
    """
    return _shared_links_time(nbytes, n_chips * get_chip(chip).bandwidth("pcie"), latency)


@checked
def dcn_transfer_time(
    nbytes: NonNegativeFloat, chip, n_chips: PositiveInt = 1, *, latency: NonNegativeFloat = 0.0
) -> TransferTime:
    """Slice ↔ slice transfer of ``nbytes`` bytes over DCN, spread over ``n_chips`` chips' share of their hosts' NICs
    (same argument order as :func:`host_transfer_time`).

    ``T = nbytes / (n_chips · W_dcn_per_chip) + latency`` (``latency`` in seconds, default 0). ``Chip.dcn_bw`` is per
    chip (a host's NIC bandwidth divided among its chips), so a whole slice sending at once uses ``n_chips`` shares.
    """
    return _shared_links_time(nbytes, n_chips * get_chip(chip).bandwidth("dcn"), latency)


def pod(chip) -> Slice:
    """The largest slice of ``chip``: its full pod (``Slice(chip, chip.pod_shape)``).

    For TPU7x the public figures give only the pod's 4x4x576 extent; the real machine joins 4x4x4 cubes through
    optical switches, so hop counts and the diameter of this torus are bookkeeping, not documented routes.
    """
    c = _check_tpu(chip)
    return Slice(c, c.pod_shape)


def parse_slice(text: str) -> Slice:
    """``"v5p:16x16x16"`` → ``Slice("v5p", (16, 16, 16))``; ``"v5p"`` alone → the full pod (the spelling the CLI's
    ``--slice`` and the planner widget take)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(
            "slice must look like CHIP:AxBxC, e.g. v5p:16x16x16 or v5e:16x16 (or a chip name for a "
            f"full pod); got {text!r}"
        )
    chip, _, shape = text.strip().partition(":")
    if not shape:
        return pod(chip)
    parts = shape.lower().split("x")
    if not all(p.isascii() and p.isdigit() for p in parts):
        raise ValueError(f"slice shape must be axis sizes joined by 'x', e.g. 16x16x16; got {shape!r}")
    return Slice(chip, tuple(int(p) for p in parts))


def bandwidth_ladder(chip) -> dict:
    """The bandwidths a chip's bytes can use, bytes/s: HBM, ICI (one link, one way), PCIe and DCN (the chip's share
    of its host's NIC). Missing figures are left out."""
    c = _check_tpu(chip)
    out = {"HBM": c.hbm_bw}
    if c.ici_bw_oneway is not None:
        out["ICI"] = c.ici_bw_oneway
    if c.pcie_bw is not None:
        out["PCIe"] = c.pcie_bw
    if c.dcn_bw is not None:
        out["DCN"] = c.dcn_bw
    return out
