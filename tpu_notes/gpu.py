"""GPU clusters: NVLink nodes joined by a scale-out network, and the time of a collective on them (Chapters 6, 11).

A :class:`GpuCluster` is ``n_gpus`` GPUs of one kind in nodes of ``node_size`` (8 for H100/H200/B200 boards), each
node an all-to-all NVLink domain (NVSwitch) where every GPU can send ``Chip.nvlink_bw`` bytes/s, and the nodes joined
by a fat-tree network with full bisection where every GPU has its own NIC of ``Chip.dcn_bw`` bytes/s (400 Gb/s
InfiniBand on H100 clusters). Chapter 11 teaches the model; Chapter 6 uses it to price published H100 runs.

A collective runs over a **group** of ``g`` GPUs of which ``inner`` share a node (``inner`` divides ``g`` and the
node size). For an AllGather or ReduceScatter of a ``V``-byte array (the whole, gathered array):

- inside one node (``g == inner``): ``V (g − 1) / (g · W_nvlink)``, the ring (or switch) bound;
- across ``m = g / inner`` nodes: each node must receive the other nodes' ``V (m − 1) / m`` bytes through the
  ``inner`` NICs of its members, and inside the node the ``inner`` members share their pieces over NVLink; the
  slower level sets the time: ``max(V (inner − 1) / (inner · W_nvlink), V (m − 1) / (m · inner · W_nic))``.

An AllReduce costs twice that (ReduceScatter then AllGather); an AllToAll moves ``(g − 1)/g`` of each member's
``V / g`` bytes out: ``V (g − 1) / (g² · W)`` at the slowest level's per-GPU bandwidth. Every ring step also pays
``hop_latency`` (``g − 1`` steps; a few microseconds on NVLink and InfiniBand). SHARP in-network reduction and
multi-level fat trees are Chapter 11's refinements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .collectives import CollectiveTime, _result, canonical_kind
from .hardware import Chip, get_chip
from .units import check_positive

#: Default latency of one step of a GPU ring collective, seconds (NCCL over NVLink/IB is a few µs).
GPU_HOP_LATENCY = 5e-6


@dataclass(frozen=True)
class GpuCluster:
    """``n_gpus`` GPUs of ``chip`` in NVLink nodes of ``node_size``, nodes joined by a full-bisection fat tree."""

    chip: Chip          # a GPU of tpu_notes.hardware (name or Chip; stored as the Chip)
    n_gpus: int         # GPUs in the cluster
    node_size: int = 0  # GPUs per NVLink node (0: the chip's node_size, 8 for H100)

    def __post_init__(self):
        c = get_chip(self.chip)
        if c.kind != "gpu":
            raise ValueError(f"chip must be a GPU (e.g. 'h100'); {c.long_name} is a {c.kind.upper()}: use "
                             "tpu_notes.topology.Slice for TPUs")
        n = check_positive("n_gpus", self.n_gpus, integer=True)
        node = check_positive("node_size", self.node_size, integer=True, allow_zero=True) or c.node_size
        if node is None:
            raise ValueError(f"{c.long_name} has no node size in tpu_notes.hardware; pass node_size")
        if n > node and n % node:
            raise ValueError(f"n_gpus ({n}) must be a multiple of node_size ({node}) when it spans several nodes")
        if c.nvlink_bw is None or c.dcn_bw is None:
            raise ValueError(f"{c.long_name} needs nvlink_bw and dcn_bw figures in tpu_notes.hardware")
        object.__setattr__(self, "chip", c)
        object.__setattr__(self, "n_gpus", n)
        object.__setattr__(self, "node_size", min(node, n))

    def __repr__(self) -> str:
        return f"GpuCluster({self.chip.name!r}, {self.n_gpus} GPUs, {self.node_size} per node)"

    @property
    def n_chips(self) -> int:
        """GPUs in the cluster (the name ``Slice`` uses, so code can take either)."""
        return self.n_gpus

    @property
    def n_nodes(self) -> int:
        return math.ceil(self.n_gpus / self.node_size)

    def collective_time(self, kind: str, nbytes: float, group: int, inner: int | None = None, *,
                        hop_latency: float = GPU_HOP_LATENCY) -> CollectiveTime:
        """Time of collective ``kind`` on a ``nbytes``-byte array over ``group`` GPUs, ``inner`` of them per node
        (default: as many as fit in one node). See the module docstring for the formulas."""
        kind = canonical_kind(kind)
        v = check_positive("nbytes", nbytes, allow_zero=True)
        g = check_positive("group", group, integer=True)
        if g > self.n_gpus:
            raise ValueError(f"group ({g}) cannot exceed the cluster's {self.n_gpus} GPUs")
        inner = min(g, self.node_size) if inner is None else check_positive("inner", inner, integer=True)
        if inner > self.node_size or g % inner:
            raise ValueError(f"inner ({inner}) must divide group ({g}) and be at most node_size ({self.node_size})")
        lat = check_positive("hop_latency", hop_latency, allow_zero=True)
        if g == 1:
            return _result(0.0, 0.0)
        w_nv, w_nic = self.chip.nvlink_bw, self.chip.dcn_bw
        m = g // inner
        if kind == "all-to-all":
            w = w_nic if m > 1 else w_nv
            bw = v * (g - 1) / (g * g * w)
        else:
            node_part = v * (inner - 1) / (inner * w_nv)
            net_part = v * (m - 1) / (m * inner * w_nic) if m > 1 else 0.0
            bw = max(node_part, net_part)
            if kind == "all-reduce":
                bw *= 2
        steps = (g - 1) * (2 if kind == "all-reduce" else 1)
        return _result(bw, steps * lat)

    def send_time(self, nbytes: float, across_nodes: bool = True, *, hop_latency: float = GPU_HOP_LATENCY) -> float:
        """Seconds for one GPU to send ``nbytes`` to another (a pipeline stage boundary): NIC or NVLink."""
        v = check_positive("nbytes", nbytes, allow_zero=True)
        if not isinstance(across_nodes, bool):
            raise TypeError(f"across_nodes must be True or False; got {across_nodes!r}")
        hop_latency = check_positive("hop_latency", hop_latency, allow_zero=True)
        return v / (self.chip.dcn_bw if across_nodes else self.chip.nvlink_bw) + hop_latency
