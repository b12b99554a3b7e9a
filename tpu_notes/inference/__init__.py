"""Serving cost (Chapters 7 and 8): generation and prefill step times, memory, sharding limits, throughput, cost,
speculative sampling in expectation, and a discrete-event serving simulator.

Pure Python, no JAX (the analysis layer). One module per idea:

- :mod:`.formulas`: the counts every step model shares (weights read, KV bytes per token, the KV pool, the
  argument types and limits), importing nothing above them;
- :mod:`.engine`: the one serving step model every path prices with: a :class:`.Deployment` (a model replica on a
  TPU slice or a GPU cluster, or several behind a router, its dtypes, compute dtype, prefill layout and KV pool)
  and its :class:`.EngineStep` (decoded sequences and prefill
  chunks together: weights, KV, FLOPs, the sharding's collectives, expected beside the roofline);
- :mod:`.step`: Chapter 7's roofline of one generation step (``KV load + max(weight load, FLOPs)``, each part) and
  one prefill: views of the engine's roofline;
- :mod:`.expected`: the same step and prefill at the rates of :mod:`tpu_notes.efficiency` (the forecast beside
  the roofline);
- :mod:`.serving`: what fits (largest batch, fewest chips, smallest slice), throughput per chip, the
  latency–throughput curve and its Pareto frontier, dollars per million generated tokens, the prefill:generate
  server ratio;
- :mod:`.sharding`: how far generation can be model-sharded (HBM vs ICI, compute, latency), KV-cache sharding,
  1D vs 2D weight-stationary layouts;
- :mod:`.cost`: what a buyer pays: dollars per million input and per million output tokens and per request of a
  workload, every chip busy (a floor), and at the rate a simulated run served, per request meeting an SLO;
  dated prices and their range; the fitted decode overhead's weight in the bill;
- :mod:`.long_context`: attention of a generation step (GQA and MLA), KV caches shared across layers, the KV
  cache split over the sequence for long-context decoding, and chunked prefill priced on a :class:`.Deployment`;
- :mod:`.speculative`: expected tokens per round, and the speedup at a batch with the verify step's and a named
  draft's (or an EAGLE/MTP head's) real cost; acceptance converted from the mean acceptance length engines report;
- :mod:`.parallel_serving`: expert-parallel decode (dispatch and combine all-to-alls, data-parallel attention) and
  pipeline-parallel decode across nodes, reconciled in :mod:`.published_parallel`;
- :mod:`.workload`: request streams: Poisson, bursty and closed-loop arrivals; fixed, log-normal and ShareGPT-like
  lengths;
- :mod:`.simulator`: a discrete-event serving engine on a :class:`.Deployment`: continuous batching over a paged KV
  pool with preemption, chunked or prefill-first scheduling, prefix caching, disaggregated prefill with KV transfer
  and backpressure; replicas behind a router; TTFT, TPOT and time-between-tokens percentiles (warm-up and drain
  trimmed), SLO attainment, KV utilisation;
- :mod:`.slo`: the latency objective a request meets or misses;
- :mod:`.goodput`: DistServe's goodput: the highest request rate at which a share of requests meets an
  :class:`~.goodput.SLO`, per chip, by a bounded search; the best serving layout within a chip budget.

The JAX side (a KV-cached decoder for :mod:`tpu_notes.model`, speculative sampling) is :mod:`tpu_notes.generate`.
"""

from __future__ import annotations

from . import published  # noqa: F401  (Chapter 8: published serving benchmarks)
from .cost import (  # Chapter 8: the bill, at 100% busy (a floor) and at the rate a simulated run served
    DEFAULT_UTILISATION,
    CostAtRate,
    ServingCost,
    chip_prices,
    cost_at_rate,
    overhead_sensitivity,
    price_sensitivity,
    serving_cost,
    with_decode_overhead,
)
from .deployment import RANK_BY, ShardedStepTime, axis_sizes, best_deployment, sharded_step_time  # Chapter 8
from .engine import Deployment, EngineStep, deploy  # the one serving step model
from .expected import ExpectedDecodeStep, expected_decode_step, expected_prefill
from .formulas import (  # the counts every step model shares (below the engine)
    COMPUTE_DTYPES,
    STORAGE_DTYPES,
    DecodeAttention,
    Machine,
    decode_attention,
    kv_bytes_per_token,
    machine,
    weight_params_read,
)
from .goodput import GoodputResult, best_serving, max_rate_at_attainment
from .long_context import (  # Chapter 7: MLA decode attention, cross-layer KV, sequence-sharded KV, chunked prefill
    MAX_CHUNK_STEPS,
    MAX_SHARE,
    ChunkedPrefill,
    SequenceShardedDecode,
    SharedKV,
    chunked_prefill,
    cross_layer_kv,
    sequence_sharded_decode,
)
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
from .simulator import (
    MAX_BLOCKS,
    MAX_STEPS,
    MAX_SWEEP_RUNS,
    ROUTERS,
    Disaggregation,
    Scheduler,
    SimResult,
    default_engines,
    simulate,
    sweep,
)
from .slo import SLO
from .speculative import (
    SpeculativeResult,
    acceptance_from_mean_length,
    best_k,
    best_k_at_batch,
    draft_deployment,
    draft_head,
    expected_tokens_per_round,
    round_seconds,
    speculative_decoding,
    speculative_speedup,
    speculative_vs_batch,
)
from .step import (
    MAX_MODEL_BATCH,
    DecodeStepModel,
    DecodeStepTime,
    PrefillTime,
    ServingMemory,
    critical_batch,
    decode_step_model,
    decode_step_time,
    prefill_time,
    serving_memory,
    step_time_from_counts,
)
from .workload import LengthDistribution, Requests, Workload

__all__ = [
    "ROUTERS",
    "SLO",
    "GoodputResult",
    "best_serving",
    "max_rate_at_attainment",
    "MAX_CHUNK_STEPS",
    "MAX_SHARE",
    "ChunkedPrefill",
    "DecodeAttention",
    "SequenceShardedDecode",
    "SharedKV",
    "chunked_prefill",
    "cross_layer_kv",
    "decode_attention",
    "sequence_sharded_decode",
    "COMPUTE_DTYPES",
    "DEFAULT_UTILISATION",
    "MAX_BLOCKS",
    "MAX_STEPS",
    "MAX_SWEEP_RUNS",
    "Disaggregation",
    "LengthDistribution",
    "Requests",
    "Scheduler",
    "Workload",
    "default_engines",
    "sweep",
    "RANK_BY",
    "ServingCost",
    "SpeculativeResult",
    "axis_sizes",
    "best_k_at_batch",
    "serving_cost",
    "CostAtRate",
    "chip_prices",
    "cost_at_rate",
    "overhead_sensitivity",
    "price_sensitivity",
    "with_decode_overhead",
    "speculative_decoding",
    "speculative_vs_batch",
    "acceptance_from_mean_length",
    "draft_deployment",
    "draft_head",
    "round_seconds",
    "ICI_HOP_LATENCY",
    "MAX_CANDIDATES",
    "MAX_MODEL_BATCH",
    "STORAGE_DTYPES",
    "DecodeStepModel",
    "Deployment",
    "EngineStep",
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
    "deploy",
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
