"""Figures of the book, drawn with matplotlib from the library's own numbers.

One module per topic, as ``tpu_notes.exercises`` is split by chapter: :mod:`.style` (the book's rcParams,
``new_figure``, ``figure_and_axes`` and shared helpers), :mod:`.roofline` (Chapter 1), :mod:`.tpu` (Chapter 2),
:mod:`.collectives` (Chapter 3), :mod:`.transformer` (Chapter 4), :mod:`.training` (Chapters 5-6),
:mod:`.inference` (Chapter 7), :mod:`.serving` (Chapter 8), :mod:`.profiling` (Chapter 9),
:mod:`.jax_programming` (Chapter 10), :mod:`.gpus` (Chapter 11), :mod:`.conclusion` (Chapter 12) and
:mod:`.validation` (the efficiency model against published runs, Chapters 6 and 8); the chapter
manifest ``tools/chapters.json`` names each chapter's module. Every public name is re-exported here, so
``from tpu_notes import plots; plots.roofline_chart(...)`` works whichever module defines it.

:mod:`.interactive` is not a chapter's: it turns the explorers of :mod:`tpu_notes.widgets` into Plotly figures
over a precomputed grid for the static HTML book; its generic names (``control``, ``explorer_spec``,
``explorer_html``) are used as ``plots.interactive.<name>`` and not re-exported here.

A new chapter adds one module (importing its helpers from ``.style``), one ``from .<module> import ...`` line below,
and the module's name in its manifest entry.
"""

from __future__ import annotations

from .collectives import collective_cost_chart, collective_timing_chart, ring_all_gather_figure, ring_collective_figure
from .conclusion import critical_batches_chart
from .gpus import (
    gpu_collective_chart,
    gpu_critical_batch_chart,
    gpu_strategy_chart,
    gpu_tpu_chips_chart,
    sharded_all_gather_chart,
)
from .inference import (
    batch_scaling_chart,
    chunked_prefill_chart,
    decode_step_parts_chart,
    kv_share_chart,
    latency_throughput_chart,
    measured_decode_chart,
    serving_sweep_chart,
    speculative_batch_chart,
    speculative_speedup_chart,
    weight_stationary_chart,
)
from .jax_programming import collective_matmul_chart, ring_collective_chart
from .profiling import category_chart, ops_on_roofline, timeline
from .roofline import (
    matmul_flops_vs_batch,
    matmul_intensity_chart,
    matmul_on_roofline,
    measured_roofline,
    roofline_chart,
)
from .serving import (
    pareto_chart,
    percentiles_vs_load_chart,
    serving_reconciliation_chart,
    sharded_step_chart,
    simulation_chart,
)
from .style import BOOK_RC, CHIP_COLORS, figure_and_axes, new_figure, use_book_style
from .tpu import bandwidth_ladder_chart, padding_sweep, slice_hops_chart, systolic_steps, torus_hops, tpu_chip_diagram
from .training import (
    context_split_chart,
    fp8_gain_chart,
    labelled_reconciliation_chart,
    loss_curves_chart,
    memory_breakdown_chart,
    pipeline_bubble_chart,
    pipeline_schedule_chart,
    planner_chart,
    reconciliation_chart,
    step_breakdown_chart,
    training_roofline_chart,
)
from .transformer import (
    attention_share_chart,
    kv_cache_chart,
    memory_vs_context_chart,
    moe_routing_figure,
    param_breakdown_chart,
    remat_tradeoff_chart,
    transformer_layer_diagram,
)
from .validation import predicted_vs_measured_chart, sweep_chart

__all__ = [
    "critical_batches_chart",
    "BOOK_RC",
    "CHIP_COLORS",
    "use_book_style",
    "new_figure",
    "figure_and_axes",
    "roofline_chart",
    "matmul_intensity_chart",
    "matmul_on_roofline",
    "measured_roofline",
    "matmul_flops_vs_batch",
    "systolic_steps",
    "torus_hops",
    "bandwidth_ladder_chart",
    "padding_sweep",
    "tpu_chip_diagram",
    "slice_hops_chart",
    "ring_all_gather_figure",
    "collective_timing_chart",
    "ring_collective_figure",
    "collective_cost_chart",
    "attention_share_chart",
    "param_breakdown_chart",
    "kv_cache_chart",
    "remat_tradeoff_chart",
    "memory_vs_context_chart",
    "transformer_layer_diagram",
    "moe_routing_figure",
    "training_roofline_chart",
    "pipeline_schedule_chart",
    "planner_chart",
    "loss_curves_chart",
    "memory_breakdown_chart",
    "reconciliation_chart",
    "timeline",
    "category_chart",
    "ops_on_roofline",
    "decode_step_parts_chart",
    "latency_throughput_chart",
    "measured_decode_chart",
    "speculative_batch_chart",
    "speculative_speedup_chart",
    "weight_stationary_chart",
    "serving_sweep_chart",
    "sweep_chart",
    "kv_share_chart",
    "pareto_chart",
    "sharded_step_chart",
    "serving_reconciliation_chart",
    "percentiles_vs_load_chart",
    "simulation_chart",
    "collective_matmul_chart",
    "gpu_tpu_chips_chart",
    "gpu_collective_chart",
    "sharded_all_gather_chart",
    "gpu_strategy_chart",
    "gpu_critical_batch_chart",
    "predicted_vs_measured_chart",
    "pipeline_bubble_chart",
    "context_split_chart",
    "fp8_gain_chart",
    "step_breakdown_chart",
    "labelled_reconciliation_chart",
    "chunked_prefill_chart",
    "batch_scaling_chart",
    "ring_collective_chart",
]
