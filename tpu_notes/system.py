r"""One system, two machines: the questions a TPU slice and a GPU cluster both answer (Chapters 2, 3, 5, 6, 11).

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
  :mod:`tpu_notes.gpu`), so no number the chapters print moves;
- ``scale_up_size``: devices joined by the scale-up fabric, the fast domain a tensor-parallel group should stay
  in: every chip of a TPU slice (ICI reaches them all), the GPUs of one NVLink node on a GPU cluster;
- ``joins_over_dcn``: whether copies of the system are joined over the data-centre network (``n_slices`` of the
  planner, ``dcn`` of a layout): True for a TPU slice, False for a GPU cluster (its network is part of it);
- ``check_schedulable(argument)``: the system itself, or a ``ValueError`` naming ``argument`` when no one can
  ask for it in one piece (a TPU slice larger than the chip's largest schedulable slice, or a shape Cloud TPU does
  not offer; a GPU cluster is always accepted).

Chapter 5's placement of a layout on a system is the system's own too: ``place(degrees)`` gives each kind of
parallelism its :class:`AxisPart`\ s (whole and partial torus axes on a slice; the NVLink node and the network on a
GPU cluster), ``group_collective(op, nbytes, parts, ...)`` prices a collective over the parts of one group, and
``stage_send_time(nbytes, parts, hop_latency)`` one pipeline send between stages. :mod:`tpu_notes.training.step`
asks only these, whatever the machine.

Both classes also keep their own richer methods (``Slice.transfer_time``, ``GpuCluster.collective_terms``...).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .hardware import Chip, get_chip

__all__ = [
    "NETWORK",
    "NODE",
    "PHASES",
    "PLACEMENT_ORDER",
    "AxisPart",
    "System",
    "check_group_collective",
    "check_system",
    "parse_system",
]

#: Kinds of parallelism in the order a system places them: the most bandwidth-hungry first (Chapter 5).
PLACEMENT_ORDER = ("tensor", "expert", "context", "fsdp", "data", "pipeline")

#: How a collective that crosses levels adds its phases (``System.group_collective``, ``GpuCluster.collective_time``):
#: ``"max"`` (they overlap; the slowest sets the time) or ``"sequence"`` (one after the other: their sum).
PHASES = ("max", "sequence")


def check_group_collective(op, phases) -> str:
    """The canonical name of collective ``op`` (``"all-gather"``...), after checking ``op`` and ``phases`` (one of
    :data:`PHASES`); a ``ValueError``/``TypeError`` naming the argument otherwise."""
    from .collectives import KINDS, canonical_kind

    if not isinstance(phases, str) or phases not in PHASES:
        raise ValueError(f"phases must be one of {PHASES}; got {phases!r}")
    if not isinstance(op, str):
        raise TypeError(f"op must be a collective name, one of {KINDS}; got {type(op).__name__}")
    try:
        return canonical_kind(op)
    except ValueError:
        raise ValueError(f"op must be a collective name, one of {KINDS}; got {op!r}") from None


#: ``AxisPart.axis`` of the two levels of a GPU cluster: the NVLink node and the scale-out network.
NODE, NETWORK = -1, -2


@dataclass(frozen=True)
class AxisPart:
    """Part of one axis of a system given to one kind of parallelism."""

    axis: int  # index of the slice's torus axis; on a GPU cluster NODE (-1, NVLink) or NETWORK (-2, scale-out)
    size: int  # chips (GPUs) along it
    wraparound: bool  # True only for a whole torus axis that closes into a ring


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

    @property
    def scale_up_size(self) -> int:
        """Devices joined by the scale-up fabric: every chip of a TPU slice (ICI), the GPUs of one NVLink node."""

    @property
    def joins_over_dcn(self) -> bool:
        """Whether copies of this system are joined over DCN (True for a TPU slice, False for a GPU cluster)."""

    def check_schedulable(self, argument: str = "system"):
        """The system, or a ``ValueError`` naming ``argument`` when it cannot be asked for in one piece."""

    def place(self, degrees: Mapping[str, int]) -> dict[str, tuple[AxisPart, ...]]:
        r"""The :class:`AxisPart`\ s of each kind of ``degrees`` (kind -> degree), placed in the order given."""

    def group_collective(
        self, op: str, nbytes: float, parts, *, group: int, span: int, hop_latency: float, phases: str = "max"
    ) -> float:
        """Seconds of collective ``op`` over one group placed on ``parts`` (``group`` members spread over ``span``
        devices); ``phases`` says how a collective crossing levels adds them ("max" or "sequence")."""

    def stage_send_time(self, nbytes: float, parts, hop_latency: float) -> float:
        """Seconds of one pipeline send of ``nbytes`` between neighbouring stages placed on ``parts``."""


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
    from .gpu import dgx_superpod
    from .topology import parse_slice

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
