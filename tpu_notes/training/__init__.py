"""Training cost and parallelism (Chapters 5 and 6): FLOPs and time, memory, rooflines, step time, planner.

Pure Python, no JAX (the analysis layer). One module per idea:

- :mod:`.parallelism`: :class:`~tpu_notes.training.Parallelism`, the degrees of data / FSDP / tensor / pipeline /
  expert parallelism;
- :mod:`.cost`: training FLOPs, time, MFU/HFU, chip-hours and dollars;
- :mod:`.memory`: parameters, gradients, optimizer state and activations per chip; how a batch splits;
- :mod:`.rooflines`: the per-layer compute-vs-communication table and the critical batches, on a TPU or a GPU
  (Chapter 11's GPU rooflines included);
- :mod:`.step`: a layout placed on a system (a TPU slice's torus axes, a GPU cluster's nodes), and the time of
  one step;
- :mod:`.expected`: the same step at the rates of :mod:`tpu_notes.efficiency` (``StepTime.expected``, the
  forecast beside the roofline);
- :mod:`.frameworks`: what MaxText, Megatron-LM and torchtitan will launch (pipeline rules, fusion, resharding);
- :mod:`.precision`: the precision recipes frameworks keep a model's state in (bytes per parameter);
- :mod:`.planner`: every launchable layout ranked by step time, in tiers the model's error cannot split;
- :mod:`.launch`: one of the planner's layouts re-checked against every launch rule;
- :mod:`.subslices`: which chips to ask for: the slices a pod offers, each with its best legal layout;
- :mod:`.practitioners`: the planner's choice beside the layouts published runs used;
- :mod:`.collectives`: the collectives of one step of :mod:`tpu_notes.model`, to compare with XLA's;
- :mod:`.context`: context parallelism: the K/V a rank gathers, all-gather vs ring, the causal load balance,
  context vs more tensor parallelism;
- :mod:`.fp8`: which matmuls FP8 training runs in FP8 and the step-time gain that allows;
- :mod:`.pipeline`: pipeline schedules simulated (GPipe, 1F1B) and priced (zero-bubble ZB-H1, DualPipe);
- :mod:`.batch_size`: the batch optimisation can use (gradient noise scale, steps-versus-data trade-off);
- :mod:`.ocs`: the torus shapes optical circuit switches give a slice of cubes, and a collective's time on each;
- :mod:`.context`: context parallelism (key/value exchange under GQA, causal load balance); :mod:`.fp8`: what FP8
  matmuls buy.

The JAX side, the same layouts run for real on (simulated) devices, is :mod:`tpu_notes.parallel` (its
``compiled_step`` compiles one step; this package never imports it).
"""

from __future__ import annotations

from .batch_size import (
    BatchTradeoff,
    NoiseScale,
    batch_tradeoff,
    kaplan_critical_batch,
    noise_scale,
    noise_scale_from_batches,
)
from .collectives import PredictedCollective, collective_totals, predicted_collectives
from .context import (
    EXCHANGE_FORMS,
    CausalBalance,
    ContextOrTensor,
    ExchangeTime,
    KVExchange,
    causal_balance,
    context_or_tensor,
    exchange_time,
    kv_exchange,
)
from .cost import chip_hours, flops_per_token, hfu, mfu, training_cost, training_flops, training_time
from .expected import ExpectedStep
from .fp8 import Fp8Gain, fp8_gain, fp8_runs
from .launch import launch_check
from .memory import (
    OPTIMIZERS,
    REMAT,
    BatchSplit,
    MemoryBreakdown,
    activation_values_per_token_layer,
    batch_split,
    min_chips_for_memory,
    offloaded_values_per_token_layer,
    optimizer_bytes_per_param,
    stage_layers,
    training_memory,
)
from .ocs import cube_shapes, group_collective_time, largest_slice, one_axis_group
from .parallelism import MESH_AXES, Parallelism
from .pipeline import BUBBLE_SCHEDULES, bubble_time, schedule_bubble_fraction
from .planner import Plan, PlanResult, plan
from .rooflines import (
    STRATEGIES,
    LayerTimes,
    collective_bandwidth,
    critical_batch_per_chip,
    critical_batch_per_gpu,
    expert_parallel_times,
    ici_intensity,
    max_tensor_parallelism,
    mlp_layer_times,
    optimal_fsdp_degree,
    pipeline_bubble_fraction,
    pipeline_comms_time,
    strategy_times,
    two_node_tensor_parallelism_ok,
)
from .step import AxisPart, Layout, StepTime, map_to_slice, step_time
from .subslices import SliceOption, format_slices, plan_slices, slice_shapes, slices_table

__all__ = [
    "EXCHANGE_FORMS",
    "CausalBalance",
    "ContextOrTensor",
    "ExchangeTime",
    "Fp8Gain",
    "KVExchange",
    "causal_balance",
    "context_or_tensor",
    "exchange_time",
    "fp8_gain",
    "fp8_runs",
    "kv_exchange",
    "launch_check",
    "BUBBLE_SCHEDULES",
    "BatchTradeoff",
    "NoiseScale",
    "batch_tradeoff",
    "bubble_time",
    "cube_shapes",
    "group_collective_time",
    "kaplan_critical_batch",
    "largest_slice",
    "noise_scale",
    "noise_scale_from_batches",
    "one_axis_group",
    "schedule_bubble_fraction",
    "MESH_AXES",
    "OPTIMIZERS",
    "REMAT",
    "STRATEGIES",
    "AxisPart",
    "BatchSplit",
    "ExpectedStep",
    "Layout",
    "LayerTimes",
    "MemoryBreakdown",
    "Parallelism",
    "Plan",
    "PlanResult",
    "PredictedCollective",
    "SliceOption",
    "StepTime",
    "collective_totals",
    "activation_values_per_token_layer",
    "offloaded_values_per_token_layer",
    "batch_split",
    "chip_hours",
    "collective_bandwidth",
    "critical_batch_per_chip",
    "critical_batch_per_gpu",
    "expert_parallel_times",
    "flops_per_token",
    "format_slices",
    "slices_table",
    "hfu",
    "ici_intensity",
    "map_to_slice",
    "max_tensor_parallelism",
    "mfu",
    "min_chips_for_memory",
    "mlp_layer_times",
    "optimal_fsdp_degree",
    "optimizer_bytes_per_param",
    "pipeline_bubble_fraction",
    "pipeline_comms_time",
    "plan",
    "plan_slices",
    "predicted_collectives",
    "slice_shapes",
    "stage_layers",
    "step_time",
    "strategy_times",
    "training_cost",
    "training_flops",
    "training_memory",
    "training_time",
    "two_node_tensor_parallelism_ok",
]
