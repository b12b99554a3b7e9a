"""Serving cost (Chapters 7 and 8): generation and prefill step times, memory, sharding limits, throughput, cost,
speculative sampling in expectation, and a discrete-event serving simulator.

Pure Python, no JAX (the analysis layer). One module per idea:

- :mod:`.step`: one generation step (``KV load + max(weight load, FLOPs)``, each part) and one prefill;
- :mod:`.expected`: the same step and prefill at the rates of :mod:`tpu_notes.efficiency` (the forecast beside
  the roofline);
- :mod:`.serving`: what fits (largest batch, fewest chips, smallest slice), throughput per chip, the
  latency–throughput curve and its Pareto frontier, dollars per million tokens, the prefill:generate server ratio;
- :mod:`.sharding`: how far generation can be model-sharded (HBM vs ICI, compute, latency), KV-cache sharding,
  1D vs 2D weight-stationary layouts;
- :mod:`.speculative`: expected tokens per round and speedup against the acceptance rate;
- :mod:`.simulator`: continuous batching, prefix caching and disaggregation, TTFT/TPOT percentiles.

The JAX side (a KV-cached decoder for :mod:`tpu_notes.model`, speculative sampling) is :mod:`tpu_notes.generate`.
"""

from __future__ import annotations

from . import published  # noqa: F401  (Chapter 8: published serving benchmarks)
from .deployment import ShardedStepTime, best_deployment, sharded_step_time  # Chapter 8
from .expected import ExpectedDecodeStep, expected_decode_step, expected_prefill
from .serving import (
    MAX_CANDIDATES,
    cost_per_million_tokens,
    disaggregation_ratio,
    eviction_per_step,
    latency_throughput_curve,
    max_batch,
    min_chips,
    pareto_frontier,
    slice_shapes,
    smallest_topology,
    throughput_per_chip,
)
from .sharding import (
    ICI_HOP_LATENCY,
    GenerationMatmulTimes,
    KVSharding,
    WeightStationary,
    generation_matmul_times,
    kv_sharding,
    latency_bound_tp,
    max_tp_ici,
    max_tp_memory,
    weight_stationary_comms,
    ws_2d_crossover,
)
from .simulator import SimResult, simulate
from .speculative import best_k, expected_tokens_per_round, speculative_speedup
from .step import (
    COMPUTE_DTYPES,
    MAX_MODEL_BATCH,
    STORAGE_DTYPES,
    DecodeStepModel,
    DecodeStepTime,
    Machine,
    PrefillTime,
    ServingMemory,
    critical_batch,
    decode_step_model,
    decode_step_time,
    kv_bytes_per_token,
    machine,
    prefill_time,
    serving_memory,
    step_time_from_counts,
    weight_params_read,
)

__all__ = [
    "COMPUTE_DTYPES",
    "ICI_HOP_LATENCY",
    "MAX_CANDIDATES",
    "MAX_MODEL_BATCH",
    "STORAGE_DTYPES",
    "DecodeStepModel",
    "DecodeStepTime",
    "ExpectedDecodeStep",
    "GenerationMatmulTimes",
    "KVSharding",
    "Machine",
    "PrefillTime",
    "ServingMemory",
    "ShardedStepTime",
    "SimResult",
    "WeightStationary",
    "best_deployment",
    "best_k",
    "cost_per_million_tokens",
    "critical_batch",
    "decode_step_model",
    "decode_step_time",
    "disaggregation_ratio",
    "eviction_per_step",
    "expected_decode_step",
    "expected_prefill",
    "expected_tokens_per_round",
    "generation_matmul_times",
    "kv_bytes_per_token",
    "kv_sharding",
    "latency_bound_tp",
    "latency_throughput_curve",
    "machine",
    "max_batch",
    "max_tp_ici",
    "max_tp_memory",
    "min_chips",
    "pareto_frontier",
    "prefill_time",
    "serving_memory",
    "sharded_step_time",
    "simulate",
    "slice_shapes",
    "smallest_topology",
    "speculative_speedup",
    "step_time_from_counts",
    "throughput_per_chip",
    "weight_params_read",
    "weight_stationary_comms",
    "ws_2d_crossover",
]
