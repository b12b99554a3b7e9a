"""Baseline calls of Chapter 11's GPU model (tpu_notes.gpu) for tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES`` at the end of that file; see its docstring for the kinds of argument.
"""
from __future__ import annotations

from hostile_cases import ODD, Case, ChipArg, Choice, Flag, Int, Model, Num, Opt, Raw

T = "tpu_notes.gpu."


def _cluster():
    from tpu_notes.gpu import GpuCluster

    return GpuCluster("h100", 64)


_CLUSTER = Raw(_cluster, ["h100", None, 3, ODD], lazy=True)
_DTYPE = Choice("bf16")

CASES = {
    T + "FatTreeLevel": Case(name=Raw("leaf", ["", 3, None]), degree=Int(4), oversubscription=Num(1.0)),
    T + "GpuCluster": Case(chip=ChipArg("h100"), n_gpus=Int(64), node_size=Int(8, zero=True),
                           levels=Opt(Raw((("leaf", 8),), [3, "leaf", (("leaf", 3),), ("x",), [ODD], ODD]))),
    T + "GpuCluster.subtree_sizes": Case(self_=_cluster),
    T + "GpuCluster.per_gpu_bw": Case(self_=_cluster),
    T + "GpuCluster.level_table": Case(self_=_cluster),
    T + "GpuCluster.bisection_bandwidth": Case(self_=_cluster),
    T + "GpuCluster.collective_terms": Case(self_=_cluster, kind=Choice("all-gather"), nbytes=Num(1e8, zero=True),
                                            group=Int(16), inner=Opt(Int(8)),
                                            span=Opt(Int(16), none_baseline=True), sharp=Flag(False),
                                            top_k=Opt(Int(2), none_baseline=True)),
    T + "GpuCluster.collective_time": Case(self_=_cluster, kind=Choice("all-gather"), nbytes=Num(1e8, zero=True),
                                           group=Int(16), inner=Opt(Int(8)), span=Opt(Int(16), none_baseline=True),
                                           hop_latency=Num(5e-6, zero=True), sharp=Flag(False),
                                           top_k=Opt(Int(2), none_baseline=True)),
    T + "GpuCluster.send_time": Case(self_=_cluster, nbytes=Num(1e8, zero=True), across_nodes=Flag(True),
                                     hop_latency=Num(5e-6, zero=True)),
    T + "dgx_superpod": Case(chip=ChipArg("h100"), n_gpus=Int(1024), nodes_per_su=Int(32), sus_per_spine=Int(8)),
    T + "ragged_fraction": Case(top_k=Int(4), n_shards=Int(8), exact=Flag(True)),
    T + "link_loads": Case(cluster=_CLUSTER, kind=Choice("all-gather"), nbytes=Num(1e8, zero=True), group=Int(16),
                           inner=Opt(Int(8)), span=Opt(Int(16), none_baseline=True)),
    T + "direct_collective_time": Case(cluster=_CLUSTER, kind=Choice("all-gather"), nbytes=Num(1e8, zero=True),
                                       group=Int(16), inner=Opt(Int(8)), span=Opt(Int(16), none_baseline=True)),
    T + "collective_bandwidth": Case(chip=ChipArg("h100"), across_nodes=Flag(True)),
    T + "critical_batch_per_gpu": Case(chip=ChipArg("h100"), across_nodes=Flag(True), experts=Int(1),
                                       experts_per_token=Int(1), nodes=Opt(Int(2), none_baseline=True),
                                       model_parallel_nodes=Int(1), dtype=_DTYPE),
    T + "max_tensor_parallelism": Case(chip=ChipArg("h100"), d_ff=Int(28672), across_nodes=Flag(False),
                                       dtype=_DTYPE),
    T + "two_node_tensor_parallelism_ok": Case(chip=ChipArg("h100"), d_ff=Int(28672), degree=Int(16),
                                               dtype=_DTYPE),
    T + "expert_parallel_times": Case(chip=ChipArg("h100"), batch_tokens=Num(1e6), d_model=Int(7168),
                                      d_ff=Int(2048), experts_per_token=Int(8), degree=Int(64), dtype=_DTYPE),
    T + "pipeline_comms_time": Case(batch_tokens=Num(1e6), d_model=Int(8192), bandwidth=Num(5e10),
                                    microbatches=Int(16), stages=Int(8), bytes_per_value=Int(2)),
    T + "strategy_times": Case(cluster=_CLUSTER, model=Model("llama3-8b"), batch_tokens=Num(2**17), dtype=_DTYPE,
                               microbatches=Int(16)),
}

COVERED = ("gpu",)

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {"gpu.LevelInfo", "gpu.LinkLoad", "gpu.RooflineTimes"}
