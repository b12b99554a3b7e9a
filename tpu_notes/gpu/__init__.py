"""GPU clusters (Chapters 6 and 11): NVLink nodes under a fat tree, collective times on them, and the explicit link
graph that checks those times.

One module per idea:

- :mod:`.cluster`: :class:`~.cluster.FatTreeLevel`, :class:`~.cluster.GpuCluster` (a
  :class:`tpu_notes.system.System`, as a TPU ``Slice`` is), :func:`~.cluster.dgx_superpod`,
  :func:`~.cluster.ragged_fraction` and the closed-form collective model;
- :mod:`.routing`: :func:`~.routing.link_loads` and :func:`~.routing.direct_collective_time`, every shard routed
  over every link.

The rooflines of LLM scaling on GPUs (critical batches, the largest tensor-parallel degree, the expert-parallel and
pipeline rooflines, :func:`~tpu_notes.training.strategy_times`) are the same formulas as on TPUs, with a GPU's
bandwidths: they live in :mod:`tpu_notes.training.rooflines` (the analysis layer, above this one), which takes a
TPU or a GPU chip or system.
"""

from __future__ import annotations

from .cluster import (
    GPU_HOP_LATENCY,
    H100_MEASURED_ALLREDUCE_BW,
    H100_MEASURED_SHARP_ALLREDUCE_BW,
    NODE_AXIS,
    SHARP_MEASURED_GAIN,
    FatTreeLevel,
    GpuCluster,
    LevelInfo,
    dgx_superpod,
    ragged_fraction,
)
from .routing import MAX_DIRECT_GPUS, LinkLoad, direct_collective_time, link_loads

__all__ = [
    "GPU_HOP_LATENCY",
    "H100_MEASURED_ALLREDUCE_BW",
    "H100_MEASURED_SHARP_ALLREDUCE_BW",
    "MAX_DIRECT_GPUS",
    "NODE_AXIS",
    "SHARP_MEASURED_GAIN",
    "FatTreeLevel",
    "GpuCluster",
    "LevelInfo",
    "LinkLoad",
    "dgx_superpod",
    "direct_collective_time",
    "link_loads",
    "ragged_fraction",
]
