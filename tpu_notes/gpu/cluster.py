"""GPU clusters: NVLink nodes under a multi-level fat tree, and the time of a collective on them (Chapters 6, 11).

**The topology.** A :class:`GpuCluster` is ``n_gpus`` GPUs of one kind in NVLink nodes of ``node_size`` (8 for
H100/B200 boards, 72 for a GB200 NVL72), every GPU reaching its node's NVSwitches at ``Chip.nvlink_bw`` bytes/s
each way, and its own NIC at ``Chip.dcn_bw`` (the "nic" bandwidth: 50 GB/s for a 400 Gb/s InfiniBand port). Above
the node sit the levels of a fat tree (:class:`FatTreeLevel`: leaf, spine, core...), each with a *degree* (how many
subtrees of the level below one unit joins) and an *oversubscription* (how much less bandwidth each child gets
into that level than it has below; 1 is full bisection). The degrees multiply to the number of nodes. The default
is one level joining every node with full bisection, the model Chapter 6 uses; :func:`dgx_superpod` builds
NVIDIA's reference design (32-node scalable units under leaf switches, then spine and core levels).

**The collective model.** A collective runs over a *group* of ``g`` GPUs placed like one axis of a mesh: ``inner``
members share a node and the group's members are spread over ``span`` GPUs (the group times the mesh axes inside
it), every GPU of the cluster running its own group's copy at the same time. For an AllGather (or ReduceScatter)
of a ``V``-byte array (``V`` is the whole gathered array of one group), every subtree must bring in, through its
one uplink, the shards its members lack:

- the node level (NVLink): each GPU receives ``V (inner - 1) / inner`` from its node-mates at ``W_nvlink``;
- scale-out level ``l`` whose child subtrees hold ``S_l`` GPUs and ``s_l = max(1, g S_l / span)`` members of the
  group: ``V (1 - s_l / g) / (s_l · w_l)``, where ``w_l`` is the per-GPU share of the child's uplink
  (``W_nic`` divided by the oversubscription of this level and every level below);
- the collective takes the slowest level: ``T = max_l`` of those terms.

With every node whole in the group (``inner = 8`` on H100) the first scale-out term is ``V (M - 1)/M / W_node``
(``W_node`` = 8 NICs = 400 GB/s): the scaling book's ``V / W_node``. An axis sharded inside (``span > g``)
divides ``V`` by the number of nodes it spans and no more (the book's "reductions over an axis sharded on an inner
axis"). AllReduce = ReduceScatter + AllGather (twice); with ``sharp=True`` (in-network reduction in the
switches) each level moves ``V / (s_l w_l)`` once, not twice. An AllToAll sends ``V / g²`` from every member to
every other: ``(inner - 1) V / (g² W_nvlink)`` inside the node, ``V (1 - s_l / g) / (g w_l)`` through each
uplink; ``top_k`` makes it ragged (each token goes to ``k`` of ``g`` shards: the dense time × ``1 - ((g-1)/g)^k``).

**One system.** A :class:`GpuCluster` is a :class:`tpu_notes.system.System`, as a TPU ``Slice`` is: its axes are
``"node"`` (the NVLink domain, ``node_size`` GPUs) and then each fat-tree level by name (``degree`` children each),
:meth:`GpuCluster.bandwidth` of an axis is what one GPU sends into it **one way** (``W_nvlink`` for the node, its
share ``w_l`` of the uplink for a level; a TPU slice answers with the bidirectional ICI figure its chapters use),
:meth:`GpuCluster.latency` the chip's ``hop_latency`` (5 µs per ring step), and
:meth:`~tpu_notes.gpu.cluster.GpuCluster.collective_time`
takes either a group size with its placement or a contiguous run of axes (``("node", "leaf")``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated

from ..collectives import CollectiveTime, canonical_kind
from ..hardware import GPU_HOP_LATENCY, Chip, get_chip
from ..system import NETWORK, NODE, PHASES, AxisPart, check_group_collective
from ..units import (
    Bool,
    NonNegativeFloat,
    NonNegativeInt,
    OneOf,
    PositiveInt,
    Range,
    check_fields,
    check_positive,
    checked,
    fmt,
)

__all__ = [
    "GPU_HOP_LATENCY",
    "H100_MEASURED_ALLREDUCE_BW",
    "H100_MEASURED_SHARP_ALLREDUCE_BW",
    "NODE_AXIS",
    "PHASES",
    "SHARP_MEASURED_GAIN",
    "FatTreeLevel",
    "GpuCluster",
    "LevelInfo",
    "dgx_superpod",
    "ragged_fraction",
]

# GPU_HOP_LATENCY (5 µs per ring step) is every GPU's Chip.hop_latency in tpu_notes.hardware; it is re-exported
# here under its old name, which Chapter 11 and the tests use.

#: Name of the NVLink level among a cluster's axes (a fat-tree level may not take it).
NODE_AXIS = "node"

# PHASES (tpu_notes.system): how GpuCluster.collective_time adds the terms of a collective that crosses levels,
# "max" (the phases overlap and the slowest sets the time, the model of Chapter 11) or "sequence" (the NVLink phase
# and each network phase run one after the other, as a hierarchical ring does: their sum).

#: Measured gain of SHARP in-network AllReduce inside an H100 node: NCCL's peak bus bandwidth with NVLink SHARP,
#: about 480 GB/s on 8 GPUs, over the ring's 370 GB/s (:data:`H100_MEASURED_ALLREDUCE_BW`) is 1.30x, where the
#: model predicts up to 2x. Sources: NCCL maintainer S. Jeaugey in NVIDIA/nccl-tests issue #212 (2024-05-06,
#: https://github.com/NVIDIA/nccl-tests/issues/212: "a peak busBw of ~480GB/s (algbw ~275GB/s)" with NVLink SHARP);
#: the scaling book, gpus.md, quotes the same ~30% with NCCL 2.27.
SHARP_MEASURED_GAIN = 0.30

#: Measured NVLink bus bandwidth (nccl-tests ``busbw``) of an 8xH100 node with ring collectives on large messages,
#: B/s: 450 GB/s line rate less ~20% protocol overhead. Source: NVIDIA/nccl-tests issue #212 (NCCL maintainer
#: S. Jeaugey, 2024-05-06: "NCCL can get an effective NVLink bandwidth of 370GB/s, which you can observe as
#: 'BusBw' when running non-allreduce operations, or when running with NCCL_ALGO=RING"); the scaling book,
#: gpus.md, quotes the same 370 GB/s for ~10 GB messages.
H100_MEASURED_ALLREDUCE_BW = 370e9

#: Measured peak bus bandwidth (nccl-tests ``busbw``) of an AllReduce with NVLink SHARP on an 8xH100 node, B/s
#: (algbw about 275 GB/s). Source: NVIDIA/nccl-tests issue #212 (S. Jeaugey, 2024-05-06: "On 8 GPUs, you should
#: reach a peak busBw of ~480GB/s (algbw ~275GB/s)"); on 8xH200 a user measured 475 GB/s (nccl-tests issue #272).
H100_MEASURED_SHARP_ALLREDUCE_BW = 480e9


#: How much less bandwidth a child gets into a fat-tree level than it has below: 1 (full bisection) or more.
Oversubscription = Annotated[float, Range(1.0, math.inf)]


@dataclass(frozen=True)
class FatTreeLevel:
    """One level of switches above the NVLink nodes."""

    name: str  # "leaf", "spine", "core"... (not "node": that is the NVLink level)
    degree: PositiveInt  # children (subtrees of the level below) joined by one unit of this level
    oversubscription: Oversubscription = 1.0  # child bandwidth below / into this level (1: full bisection)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"name must be a non-empty string; got {self.name!r}")
        if self.name.strip().lower() == NODE_AXIS:
            raise ValueError(f"name {self.name!r} is reserved for the NVLink node level; call it e.g. 'leaf'")
        check_fields(self)


@dataclass(frozen=True)
class LevelInfo:
    """Bandwidth of one level of a :class:`GpuCluster`, as the scaling book's SuperPod table lists it."""

    name: str  # "node" or the fat-tree level's name
    gpus: int  # GPUs in one unit of this level
    degree: int  # children per unit (GPUs for the node)
    per_gpu_bw: float  # bytes/s each GPU has into this level (one direction)
    child_uplink_bw: float  # bytes/s of one child's link into this level (one direction)
    collective_bw: float  # bytes/s the level gives a collective spanning it: uplink of a whole child

    def __repr__(self) -> str:
        return (
            f"LevelInfo({self.name!r}, gpus={self.gpus}, degree={self.degree}, "
            f"per_gpu={fmt(self.per_gpu_bw, 'B/s')}, collective={fmt(self.collective_bw, 'B/s')})"
        )


def _as_level(x, i: int) -> FatTreeLevel:
    if isinstance(x, FatTreeLevel):
        return x
    if isinstance(x, tuple) and len(x) in (2, 3):
        try:
            return FatTreeLevel(*x)
        except (TypeError, ValueError) as err:
            raise type(err)(f"levels[{i}]: {err}") from None
    raise TypeError(f"levels[{i}] must be a FatTreeLevel or a (name, degree[, oversubscription]) tuple; got {x!r}")


@dataclass(frozen=True)
class GpuCluster:
    """``n_gpus`` GPUs of ``chip`` in NVLink nodes of ``node_size``, nodes joined by the fat tree ``levels``."""

    chip: Chip  # a GPU of tpu_notes.hardware (name or Chip; stored as the Chip)
    n_gpus: PositiveInt  # GPUs in the cluster
    node_size: NonNegativeInt = 0  # GPUs per NVLink node (0: the chip's node_size, 8 for H100, 72 for GB200)
    levels: tuple | None = None  # fat-tree levels above the node, bottom first (None: one full-bisection level)

    def __post_init__(self):
        c = get_chip(self.chip)
        if c.kind != "gpu":
            raise ValueError(
                f"chip must be a GPU (e.g. 'h100'); {c.long_name} is a {c.kind.upper()}: use "
                "tpu_notes.topology.Slice for TPUs"
            )
        check_fields(self)
        n = self.n_gpus
        node = self.node_size or c.node_size
        if node is None:
            raise ValueError(f"{c.long_name} has no node size in tpu_notes.hardware; pass node_size")
        if n > node and n % node:
            raise ValueError(f"n_gpus ({n}) must be a multiple of node_size ({node}) when it spans several nodes")
        if c.nvswitches_per_node == 0:
            raise ValueError(
                f"chip: {c.long_name}'s {c.node_size}-GPU node has no NVSwitch (a hybrid cube-mesh: each GPU "
                "reaches only 4 of its 7 peers in one NVLink hop), and this model prices every node as one switch "
                "hop; use an NVSwitch GPU ('a100', 'h100', 'h200', 'b200', 'gb200')"
            )
        if c.nvlink_bw is None or c.dcn_bw is None:
            raise ValueError(f"{c.long_name} needs nvlink_bw and dcn_bw figures in tpu_notes.hardware")
        node = min(node, n)
        nodes = n // node
        if self.levels is None:
            levels = (FatTreeLevel("network", nodes),) if nodes > 1 else ()
        else:
            if not isinstance(self.levels, (tuple, list)):
                raise TypeError(f"levels must be a tuple of FatTreeLevel (or None); got {type(self.levels).__name__}")
            levels = tuple(_as_level(x, i) for i, x in enumerate(self.levels))
            names = [lv.name for lv in levels]
            if len(set(names)) != len(names):
                raise ValueError(
                    f"levels: each fat-tree level needs its own name (a level's collective term and "
                    f"its axis are looked up by it); got {names}"
                )
            if math.prod(lv.degree for lv in levels) != nodes:
                raise ValueError(
                    f"levels: the degrees {[lv.degree for lv in levels]} must multiply to the {nodes} nodes of "
                    f"n_gpus ({n}) in nodes of node_size ({node})"
                )
        object.__setattr__(self, "chip", c)
        object.__setattr__(self, "n_gpus", n)
        object.__setattr__(self, "node_size", node)
        object.__setattr__(self, "levels", levels)

    def __repr__(self) -> str:
        tree = " > ".join(
            f"{lv.name}{lv.degree}" + (f"(1:{lv.oversubscription:g})" if lv.oversubscription > 1 else "")
            for lv in self.levels
        )
        return (
            f"GpuCluster({self.chip.name!r}, {self.n_gpus} GPUs, {self.node_size} per node"
            + (f", {tree}" if tree else "")
            + ")"
        )

    def __str__(self) -> str:
        """The readable name: ``"8 x H100"`` for one NVLink node (or part of one), ``"1024 x H100 (128 nodes)"``
        for several; :meth:`describe` adds the fat tree, ``repr`` is for debugging."""
        name = f"{self.n_gpus} x {self.chip}"
        return f"{name} ({self.n_nodes:,} nodes)" if self.n_nodes > 1 else name

    def describe(self) -> str:
        """``str(cluster)`` with the fat tree above the nodes, bottom level first, e.g. ``"256 x H100 (32 nodes of
        8; leaf 8 > spine 4 at 2:1)"`` (``a:1``: a level oversubscribed ``a`` times)."""
        if self.n_nodes == 1:
            return str(self)
        tree = " > ".join(
            f"{lv.name} {lv.degree}" + (f" at {lv.oversubscription:g}:1" if lv.oversubscription > 1 else "")
            for lv in self.levels
        )
        return f"{self.n_gpus} x {self.chip} ({self.n_nodes:,} nodes of {self.node_size}; {tree})"

    @property
    def n_chips(self) -> int:
        """GPUs in the cluster (the name ``Slice`` uses, so code can take either)."""
        return self.n_gpus

    @property
    def n_nodes(self) -> int:
        return self.n_gpus // self.node_size

    @property
    def nic_bw(self) -> float:
        """One GPU's NIC, bytes/s each way."""
        return self.chip.dcn_bw

    @property
    def node_egress_bw(self) -> float:
        """The node's scale-out bandwidth, bytes/s each way: its GPUs' NICs together (400 GB/s on H100)."""
        return self.node_size * self.nic_bw

    def subtree_sizes(self) -> tuple[int, ...]:
        """GPUs in one child subtree of each fat-tree level, bottom first (the node, then leaf units...)."""
        out, s = [], self.node_size
        for lv in self.levels:
            out.append(s)
            s *= lv.degree
        return tuple(out)

    def per_gpu_bw(self) -> tuple[float, ...]:
        """Each GPU's share of its subtree's uplink into each fat-tree level, bytes/s, bottom first."""
        out, o = [], 1.0
        for lv in self.levels:
            o *= lv.oversubscription
            out.append(self.nic_bw / o)
        return tuple(out)

    def level_table(self) -> list[LevelInfo]:
        """The node and every fat-tree level with its bandwidths (the scaling book's SuperPod table)."""
        rows = [
            LevelInfo(
                NODE_AXIS, self.node_size, self.node_size, self.chip.nvlink_bw, self.chip.nvlink_bw, self.chip.nvlink_bw
            )
        ]
        for lv, s, w in zip(self.levels, self.subtree_sizes(), self.per_gpu_bw()):
            rows.append(LevelInfo(lv.name, s * lv.degree, lv.degree, w, s * w, s * w))
        return rows

    def bisection_bandwidth(self) -> float:
        """Bytes/s crossing the worst even split of the cluster, both directions counted (3.6 TB/s for one H100
        node): inside a node ``node_size × W_nvlink``; above it the narrowest level's ``n_gpus × w``."""
        if self.n_gpus == 1:
            return 0.0
        if not self.levels:
            return self.n_gpus * self.chip.nvlink_bw
        return self.n_gpus * min(self.per_gpu_bw())

    def _placement(self, group: int, inner: int | None, span: int | None) -> tuple[int, int]:
        """Check a group's placement; return ``(inner, span)`` with the defaults filled in."""
        g = check_positive("group", group, integer=True)
        N = self.node_size
        if g > self.n_gpus:
            raise ValueError(f"group ({g}) cannot exceed the cluster's {self.n_gpus} GPUs")
        if inner is not None:
            inner = check_positive("inner", inner, integer=True)
            if inner > N or g % inner or N % inner:
                raise ValueError(f"inner ({inner}) must divide group ({g}) and node_size ({N})")
        if span is None:
            inner = min(g, N) if inner is None else inner
            span = g if inner == min(g, N) else g * N // inner
            if self.n_gpus % span:
                raise ValueError(
                    f"inner ({inner}) spreads the group of {g} over {span} GPUs, which must divide "
                    f"n_gpus ({self.n_gpus})"
                )
            return inner, span
        span = check_positive("span", span, integer=True)
        if span % g or self.n_gpus % span:
            raise ValueError(f"span ({span}) must be a multiple of group ({g}) and divide n_gpus ({self.n_gpus})")
        stride = span // g
        if (stride < N and N % stride) or (stride >= N and stride % N):
            raise ValueError(
                f"span ({span}) / group ({g}) = {stride} GPUs between members must divide node_size "
                f"({N}) or be a multiple of it"
            )
        for S in self.subtree_sizes()[1:]:
            if S < span and S % stride and stride % S:
                raise ValueError(
                    f"span ({span}) / group ({g}) = {stride} GPUs between members does not line up "
                    f"with the fat tree's units of {S} GPUs (one must divide the other)"
                )
        expect = min(max(1, N // stride), g)
        if inner is not None and inner != expect:
            raise ValueError(
                f"inner ({inner}) must be {expect} for span {span}: members every {stride} GPUs put "
                f"{expect} in each node"
            )
        return expect, span

    # ---- the System questions (tpu_notes.system) ---------------------------------------------------------------
    @property
    def n_devices(self) -> int:
        """GPUs in the cluster (``n_gpus``: the name every :class:`~tpu_notes.system.System` answers to)."""
        return self.n_gpus

    @property
    def axes(self) -> tuple[str, ...]:
        """``"node"`` (the NVLink domain), then each fat-tree level's name, bottom first."""
        return (NODE_AXIS,) + tuple(lv.name for lv in self.levels)

    def _axis_index(self, axis, argument: str = "axis") -> int:
        if not isinstance(axis, str):
            raise TypeError(f"{argument} must be an axis name, one of {list(self.axes)}; got {axis!r}")
        key = axis.strip().lower()
        for i, name in enumerate(self.axes):
            if key == name.lower():
                return i
        raise ValueError(f"{argument} must be one of {list(self.axes)}; got {axis!r}")

    def axis_size(self, axis: str) -> int:
        """GPUs per node for ``"node"``; for a fat-tree level its degree (children joined by one unit)."""
        i = self._axis_index(axis)
        return self.node_size if i == 0 else self.levels[i - 1].degree

    def bandwidth(self, axis: str) -> float:
        """Bytes/s one GPU sends into ``axis``, **one direction**: ``W_nvlink`` for ``"node"``, its share of the
        child's uplink for a fat-tree level (``W_nic`` over the oversubscriptions up to it), Chapter 11's figures."""
        i = self._axis_index(axis)
        return self.chip.nvlink_bw if i == 0 else self.per_gpu_bw()[i - 1]

    def latency(self, axis: str) -> float:
        """Seconds per ring step on ``axis``: the chip's ``hop_latency`` (5 µs), the same at every level."""
        self._axis_index(axis)
        return self._hop_latency(None)

    def _hop_latency(self, hop_latency) -> float:
        if hop_latency is None:
            hop_latency = self.chip.hop_latency if self.chip.hop_latency is not None else GPU_HOP_LATENCY
        return check_positive("hop_latency", hop_latency, allow_zero=True)

    def _group(self, group, inner, span) -> tuple[int, int | None, int | None]:
        """``(group, inner, span)`` from a group size, ``None`` (every GPU) or a contiguous run of axis names."""
        if group is None:
            return self.n_gpus, inner, span
        if isinstance(group, str):
            group = (group,)
        if not isinstance(group, (list, tuple)):
            return check_positive("group", group, integer=True), inner, span
        if inner is not None or span is not None:
            raise ValueError(
                "inner and span place a group given by its size; a group given by its axes "
                f"({tuple(group)!r}) is placed by them"
            )
        idx = sorted(self._axis_index(a, "group") for a in group)
        if not idx or idx != list(range(idx[0], idx[-1] + 1)):
            raise ValueError(
                f"group must name distinct, adjacent axes from {list(self.axes)} (e.g. ('node', "
                f"'{self.axes[-1]}')); got {tuple(group)!r}"
            )
        sizes = [self.axis_size(a) for a in self.axes]
        g = math.prod(sizes[idx[0] : idx[-1] + 1])
        return g, (self.node_size if idx[0] == 0 else 1), math.prod(sizes[: idx[-1] + 1])

    @checked
    def collective_terms(
        self,
        kind: str,
        nbytes: NonNegativeFloat,
        group=None,
        inner: PositiveInt | None = None,
        *,
        span: PositiveInt | None = None,
        sharp: Bool = False,
        top_k: PositiveInt | None = None,
    ) -> dict:
        """Seconds of collective ``kind`` at each level (``"node"``, then each fat-tree level by name): the
        bandwidth terms whose maximum :meth:`collective_time` reports. See the module docstring and
        :meth:`collective_time` for ``group``."""
        kind = canonical_kind(kind)
        v = nbytes
        if sharp and kind != "all-reduce":
            raise ValueError(f"sharp (in-network reduction) applies to an all-reduce only; kind is {kind!r}")
        if top_k is not None and kind != "all-to-all":
            raise ValueError(f"top_k (a ragged dispatch) applies to an all-to-all only; kind is {kind!r}")
        g, inner, span = self._group(group, inner, span)
        inner, span = self._placement(g, inner, span)
        terms = {NODE_AXIS: 0.0}
        for lv in self.levels:
            terms[lv.name] = 0.0
        if g == 1:
            return terms
        w_nv = self.chip.nvlink_bw
        if kind == "all-to-all":
            terms[NODE_AXIS] = v * (inner - 1) / (g * g * w_nv)
        elif sharp:
            terms[NODE_AXIS] = v / w_nv if inner > 1 else 0.0
        else:
            terms[NODE_AXIS] = v * (inner - 1) / (inner * w_nv)
        for lv, S, w in zip(self.levels, self.subtree_sizes(), self.per_gpu_bw()):
            if S >= span:
                continue
            s = max(1, g * S // span)
            if kind == "all-to-all":
                terms[lv.name] = v * (1 - s / g) / (g * w)
            elif sharp:
                terms[lv.name] = v / (s * w)
            else:
                terms[lv.name] = v * (1 - s / g) / (s * w)
        if kind == "all-reduce" and not sharp:
            terms = {k: 2 * t for k, t in terms.items()}
        if top_k is not None:
            f = ragged_fraction(top_k, g)
            terms = {k: f * t for k, t in terms.items()}
        return terms

    @checked
    def collective_time(
        self,
        kind: str,
        nbytes: NonNegativeFloat,
        group=None,
        inner: PositiveInt | None = None,
        *,
        span: PositiveInt | None = None,
        hop_latency: NonNegativeFloat | None = None,
        sharp: Bool = False,
        top_k: PositiveInt | None = None,
        phases: Annotated[str, OneOf(PHASES)] = "max",
    ) -> CollectiveTime:
        """Time of collective ``kind`` on a ``nbytes``-byte array over ``group`` GPUs, ``inner`` of them per node
        (default: as many as fit in one node), spread over ``span`` GPUs (default: ``group`` times the node GPUs
        ``inner`` leaves to other groups). ``group`` may also be ``None`` (every GPU) or axis names, a contiguous
        run of :attr:`axes` such as ``("node", "leaf")`` or ``"spine"`` (the System form: one GPU per child below
        the lowest named level). ``hop_latency``: seconds per ring step (``None``: the chip's, 5 µs). ``sharp``:
        in-network AllReduce; ``top_k``: a ragged AllToAll. ``phases``: how the per-level terms of
        :meth:`collective_terms` add, ``"max"`` (the slowest level, the module docstring's model and Chapter 11's
        figures) or ``"sequence"`` (their sum: the NVLink phase, then each network phase, one after the other; the
        two agree when the group stays in one node). See the module docstring for the formulas."""
        g, inner, span = self._group(group, inner, span)
        terms = self.collective_terms(kind, nbytes, g, inner, span=span, sharp=sharp, top_k=top_k)
        lat = self._hop_latency(hop_latency)
        if g == 1:
            return _time(0.0, 0.0)
        steps = (g - 1) * (2 if canonical_kind(kind) == "all-reduce" and not sharp else 1)
        bw = sum(terms.values()) if phases == "sequence" else max(terms.values())
        return _time(bw, steps * lat)

    # ---- Chapter 5: placing a layout, what can be scheduled ---------------------------------------------------
    @property
    def joins_over_dcn(self) -> bool:
        """False: a GPU cluster includes its whole network; it is never one of several copies joined over DCN."""
        return False

    @property
    def scale_up_size(self) -> int:
        """GPUs joined by the scale-up fabric: one NVLink node (``node_size``: 8 on H100, 72 on GB200 NVL72)."""
        return self.node_size

    @property
    def schedulable(self) -> bool:
        """True: a cluster of whole nodes (which ``GpuCluster`` already requires) can always be asked for."""
        return True

    @property
    def why_not_schedulable(self) -> str:
        """``""``: see :attr:`schedulable`."""
        return ""

    def check_schedulable(self, argument: str = "system") -> GpuCluster:
        """This cluster: every ``GpuCluster`` can be requested (a :class:`~tpu_notes.system.System` question)."""
        return self

    def place(self, degrees) -> dict[str, tuple[AxisPart, ...]]:
        """Place parallelism ``degrees`` (kind -> degree, in the order to place them) on the cluster: each kind
        keeps as many members inside an NVLink node as the GPUs the earlier kinds left there
        (``AxisPart(NODE, ...)``), and spans nodes over the network for the rest (``AxisPart(NETWORK, ...)``).
        ``ValueError`` when the degrees do not multiply to the cluster's GPUs."""
        if not hasattr(degrees, "items") or not degrees:
            raise TypeError(f"degrees must be a non-empty mapping of parallelism kind -> degree; got {degrees!r}")
        for k, d in degrees.items():
            if not isinstance(k, str) or isinstance(d, bool) or not isinstance(d, int) or d < 1:
                raise ValueError(f"degrees must map kind names to positive integers; got {k!r}: {d!r}")
        total = math.prod(degrees.values())
        if total != self.n_gpus:
            shown = ", ".join(f"{k}={d}" for k, d in degrees.items() if d > 1) or "all 1"
            raise ValueError(
                f"the degrees ({shown}) multiply to {total} GPUs, but the cluster has {self.n_gpus}; they must be equal"
            )
        left = self.node_size
        parts: dict[str, tuple[AxisPart, ...]] = {}
        for kind, d in degrees.items():
            inner = math.gcd(d, left)
            left //= inner
            parts[kind] = () if d == 1 else (AxisPart(NODE, inner, False), AxisPart(NETWORK, d // inner, False))
        return parts

    def group_collective(
        self, op: str, nbytes: float, parts, *, group: int, span: int, hop_latency: float, phases: str = "max"
    ) -> float:
        """Seconds of collective ``op`` on a ``nbytes``-byte array over one group of ``group`` GPUs placed on
        ``parts`` (its NVLink members: the ``NODE`` parts), spread over ``span`` GPUs by the kinds placed inside it
        (:meth:`collective_time`'s ``span``); a placement that is not mesh-like is priced on the node and the
        first level only. ``phases`` as in :meth:`collective_time`."""
        op = check_group_collective(op, phases)
        if not parts:
            return 0.0
        inner = math.prod(pt.size for pt in parts if pt.axis == NODE)
        try:
            return self.collective_time(
                op, nbytes, group, inner, span=span, hop_latency=hop_latency, phases=phases
            ).total
        except ValueError:  # not a mesh-like placement: price the node and first level only
            return self.collective_time(op, nbytes, group, inner, hop_latency=hop_latency, phases=phases).total

    def link(self, parts) -> str:
        """The interconnect a group placed on ``parts`` talks over: ``"ib"`` when it spans nodes (a network part
        of more than one), else ``"nvlink"`` (the efficiency model's names)."""
        return "ib" if any(p.axis == NETWORK and p.size > 1 for p in parts) else "nvlink"

    def stage_send_time(self, nbytes: float, parts, hop_latency: float) -> float:
        """Seconds of one pipeline send of ``nbytes`` to the neighbouring stage (:meth:`send_time`): over the NIC
        when the stages sit in different nodes (a ``NETWORK`` part of more than one), else over NVLink."""
        across = any(pt.axis == NETWORK and pt.size > 1 for pt in parts)
        return self.send_time(nbytes, across_nodes=across, hop_latency=hop_latency)

    @checked
    def send_time(
        self, nbytes: NonNegativeFloat, across_nodes: Bool = True, *, hop_latency: NonNegativeFloat | None = None
    ) -> float:
        """Seconds for one GPU to send ``nbytes`` to another (a pipeline stage boundary): NIC or NVLink, plus
        ``hop_latency`` (``None``: the chip's)."""
        return nbytes / (self.nic_bw if across_nodes else self.chip.nvlink_bw) + self._hop_latency(hop_latency)


def _time(bandwidth_time: float, latency_time: float) -> CollectiveTime:
    """A CollectiveTime whose total is the larger term (as tpu_notes.collectives builds them)."""
    return CollectiveTime(
        bandwidth_time=bandwidth_time,
        latency_time=latency_time,
        total=max(bandwidth_time, latency_time),
        bound="bandwidth" if bandwidth_time >= latency_time else "latency",
    )


@checked
def dgx_superpod(
    chip="h100", n_gpus: PositiveInt = 1024, *, nodes_per_su: PositiveInt = 32, sus_per_spine: PositiveInt = 8
) -> GpuCluster:
    """NVIDIA's reference DGX SuperPod: nodes in scalable units of ``nodes_per_su`` under leaf switches, units
    joined by spine switches in groups of up to ``sus_per_spine`` (8: 2048 GPUs; the 1024-GPU pod has 4), and a
    core level above when there are more. Full bisection everywhere (scaling book, gpus.md). A GB200 NVL72 pod:
    ``dgx_superpod("gb200", 576, nodes_per_su=8)``."""
    c = get_chip(chip)
    if c.kind != "gpu" or c.node_size is None:
        raise ValueError(f"chip must be a GPU with a node size (e.g. 'h100'); got {c.long_name}")
    n, su, sps = n_gpus, nodes_per_su, sus_per_spine
    if n % c.node_size:
        raise ValueError(f"n_gpus ({n}) must be a multiple of the {c.long_name} node of {c.node_size}")
    nodes = n // c.node_size
    if nodes <= su:
        return GpuCluster(c, n, levels=(FatTreeLevel("leaf", nodes),) if nodes > 1 else ())
    if nodes % su:
        raise ValueError(f"n_gpus ({n}) must fill whole scalable units of {su} nodes ({su * c.node_size} GPUs)")
    sus = nodes // su
    if sus <= sps:
        return GpuCluster(c, n, levels=(FatTreeLevel("leaf", su), FatTreeLevel("spine", sus)))
    if sus % sps:
        raise ValueError(f"n_gpus ({n}) must fill whole spine groups of {sps} scalable units")
    return GpuCluster(
        c, n, levels=(FatTreeLevel("leaf", su), FatTreeLevel("spine", sps), FatTreeLevel("core", sus // sps))
    )


@checked
def ragged_fraction(top_k: PositiveInt, n_shards: PositiveInt, exact: Bool = True) -> float:
    """Fraction of a dense AllToAll's bytes a ragged one moves when each token goes to ``top_k`` of ``n_shards``
    shards picked at random: ``1 - ((n - 1)/n)^k`` (the expected share of shards a token reaches), or the scaling
    book's approximation ``min(k / n, 1)`` with ``exact=False``."""
    n = n_shards
    return 1 - ((n - 1) / n) ** top_k if exact else min(top_k / n, 1.0)
