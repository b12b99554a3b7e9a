"""One system, two machines: the questions a TPU slice and a GPU cluster both answer (Chapters 2, 3, 5, 6, 11).

A :class:`System` is a set of devices of one chip joined by a network with named *axes*: the torus axes ``"x"``,
``"y"`` (``"z"``) of a :class:`tpu_notes.topology.Slice`; the NVLink ``"node"`` and the fat-tree levels (``"leaf"``,
``"spine"``...) of a :class:`tpu_notes.gpu.GpuCluster`. Training, inference and the planner take either, asking it:

- ``chip``: the :class:`~tpu_notes.hardware.Chip` every device is;
- ``n_devices``: how many devices (chips or GPUs);
- ``axes``: the axis (level) names, innermost first for a GPU cluster;
- ``axis_size(axis)``: devices along a torus axis; GPUs per node, or a fat-tree level's degree;
- ``bandwidth(axis)``: bytes/s one device sends over that axis, **in the convention its chapter uses**: a TPU
  slice answers with one ICI link's *bidirectional* figure (``Chip.ici_bw_bidi``, the ``W_ici`` of Chapters 3 and
  5, which the ring formulas halve per direction); a GPU cluster with the *one-way* egress (``W_nvlink`` in a node,
  the GPU's share of a level's uplink above it: Chapter 11's figures). Compare like with like;
- ``latency(axis)``: seconds per hop (one ICI link, 1 µs) or per ring step (NCCL, 5 µs): ``Chip.hop_latency``;
- ``collective_time(kind, nbytes, axes)``: a :class:`~tpu_notes.collectives.CollectiveTime` for ``kind`` in
  all_gather / reduce_scatter / all_reduce / all_to_all (any spelling) over a set of axes (``None``: all of
  them), computed by the system's own formulas (:mod:`tpu_notes.collectives` on a torus, the fat-tree model of
  :mod:`tpu_notes.gpu`), so no number the chapters print moves.

Both classes also keep their own richer methods (``Slice.transfer_time``, ``GpuCluster.collective_terms``...).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .gpu import dgx_superpod
from .hardware import Chip, get_chip
from .topology import parse_slice

__all__ = ["System", "check_system", "parse_system"]


@runtime_checkable
class System(Protocol):
    """What a TPU ``Slice`` and a ``GpuCluster`` both answer (see the module docstring for each convention)."""

    chip: Chip

    @property
    def n_devices(self) -> int:
        """Devices (chips or GPUs) in the system."""

    @property
    def axes(self) -> tuple[str, ...]:
        """Names of the system's axes or levels."""

    def axis_size(self, axis: str) -> int:
        """Devices along ``axis`` (a torus axis), or children per unit (a GPU node or fat-tree level)."""

    def bandwidth(self, axis: str) -> float:
        """Bytes/s one device sends over ``axis``: bidirectional per ICI link (TPU), one-way egress (GPU)."""

    def latency(self, axis: str) -> float:
        """Seconds per hop (ICI) or ring step (GPU) on ``axis``."""

    def collective_time(self, kind: str, nbytes: float, axes=None):
        """A ``CollectiveTime`` for collective ``kind`` of a ``nbytes``-byte array over ``axes`` (None: all)."""


def check_system(value, argument: str = "system") -> System:
    """Return ``value`` if it is a :class:`System` (a ``Slice`` or a ``GpuCluster``); else a ``TypeError`` naming
    ``argument``."""
    if isinstance(value, System):
        return value
    raise TypeError(
        f"{argument} must be a System: a tpu_notes.topology.Slice (e.g. Slice('v5p', (4, 4, 4))) or a "
        f"tpu_notes.gpu.GpuCluster (e.g. GpuCluster('h100', 64)); got {type(value).__name__}"
    )


def parse_system(text: str) -> System:
    """A system from the spelling the CLI and the explorers take: ``"v5p:16x16x16"`` (a TPU slice, or ``"v5p"`` for
    the full pod; see :func:`tpu_notes.topology.parse_slice`) or ``"h100:1024"`` (a DGX SuperPod of that many GPUs,
    :func:`tpu_notes.gpu.dgx_superpod`; ``"gb200:576"`` builds NVL72 nodes in units of 8)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError(
            "system must look like CHIP:AxBxC for a TPU slice (e.g. v5p:16x16x16) or GPU:N for a GPU "
            f"cluster (e.g. h100:1024); got {text!r}"
        )
    name, _, size = text.strip().partition(":")
    chip = get_chip(name, "system")
    if chip.kind != "gpu":
        return parse_slice(text)
    if not (size.isascii() and size.isdigit()) or int(size) < 1:
        raise ValueError(
            f"system must be spelled GPU:N for a GPU cluster, N the number of GPUs (e.g. h100:1024); got {text!r}"
        )
    try:
        return dgx_superpod(chip.name, int(size), nodes_per_su=8 if chip.node_size and chip.node_size > 8 else 32)
    except ValueError as err:
        raise ValueError(f"system {text!r}: {err}") from None
