"""Training cost and parallelism (Chapters 5 and 6): FLOPs and time, memory, rooflines, step time, planner.

Pure Python, no JAX (the analysis layer). One module per idea:

- :mod:`.parallelism`: :class:`~tpu_notes.training.Parallelism`, the degrees of data / FSDP / tensor / pipeline / expert parallelism;
- :mod:`.cost`: training FLOPs, time, MFU/HFU, chip-hours and dollars;
- :mod:`.memory`: parameters, gradients, optimizer state and activations per chip; how a batch splits;
- :mod:`.rooflines`: the per-layer compute-vs-communication table and the critical batches;
- :mod:`.step`: a layout placed on a slice's torus axes, and the time of one step;
- :mod:`.planner`: every layout ranked by step time;
- :mod:`.collectives`: the collectives of one step of :mod:`tpu_notes.model`, to compare with XLA's.

The JAX side, the same layouts run for real on (simulated) devices, is :mod:`tpu_notes.parallel`.
"""
from __future__ import annotations

from .collectives import PredictedCollective, collective_totals, predicted_collectives
from .cost import chip_hours, flops_per_token, hfu, mfu, training_cost, training_flops, training_time
from .memory import (OPTIMIZERS, REMAT, BatchSplit, MemoryBreakdown, activation_values_per_token_layer,
                     batch_split, min_chips_for_memory, optimizer_bytes_per_param, training_memory)
from .parallelism import MESH_AXES, Parallelism
from .planner import Plan, PlanResult, plan
from .rooflines import (STRATEGIES, LayerTimes, critical_batch_per_chip, ici_intensity, max_tensor_parallelism,
                        mlp_layer_times, optimal_fsdp_degree, pipeline_bubble_fraction)
from .step import AxisPart, Layout, StepTime, map_to_slice, step_time


def compiled_step(model, parallelism, batch, seq_len, devices=None, **kwargs):
    """One jitted, compiled training step laid out per ``parallelism`` (imports JAX; see :mod:`tpu_notes.parallel`)."""
    from ..parallel import compiled_step as _compiled

    return _compiled(model, parallelism, batch, seq_len, devices=devices, **kwargs)


__all__ = [
    "MESH_AXES", "OPTIMIZERS", "REMAT", "STRATEGIES", "AxisPart", "BatchSplit", "Layout", "LayerTimes",
    "MemoryBreakdown", "Parallelism", "Plan", "PlanResult", "PredictedCollective", "StepTime", "collective_totals", "activation_values_per_token_layer",
    "batch_split", "chip_hours", "compiled_step", "critical_batch_per_chip", "flops_per_token", "hfu",
    "ici_intensity", "map_to_slice", "max_tensor_parallelism", "mfu", "min_chips_for_memory", "mlp_layer_times",
    "optimal_fsdp_degree", "optimizer_bytes_per_param", "pipeline_bubble_fraction", "plan", "predicted_collectives",
    "step_time", "training_cost", "training_flops", "training_memory", "training_time",
]
