"""Baseline calls of expert- and pipeline-parallel serving (tpu_notes.inference.parallel_serving and
tpu_notes.inference.published_parallel) for tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES`` through the chapter manifest (``tools/chapters.json``); see the docstring of
``tests/hostile_cases.py`` for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import ODD, Case, Choice, Flag, Int, Model, Num, Raw

P = "tpu_notes.inference.parallel_serving."
Q = "tpu_notes.inference.published_parallel."
_SYSTEM_BAD = ["h100", 3, None, ODD, [72]]
_EFF_BAD = ["default", 3, ODD]


def _ep():
    from tpu_notes.gpu import GpuCluster

    return GpuCluster("h100", 64)


def _pp():
    from tpu_notes.gpu import GpuCluster

    return GpuCluster("h100", 16)


def _record():
    from tpu_notes.inference.published_parallel import RECORDS

    return RECORDS[0]


def _rows():
    from tpu_notes.inference.published_parallel import reconcile

    return reconcile()[:1]


_EP_KW = dict(
    model=Model("deepseek-v3"),
    system=Raw(_ep, _SYSTEM_BAD, lazy=True),
)

CASES = {
    P + "ep_decode_step": Case(
        **_EP_KW,
        batch_per_rank=Int(64, big=True),
        seq_len=Int(2000, big=True),
        weight_dtype=Choice("fp8"),
        kv_dtype=Choice("bf16"),
        compute_dtype=Choice("fp8"),
        dispatch_dtype=Choice("fp8"),
        combine_dtype=Choice("bf16"),
        redundant_experts=Raw(0, [-1, 2.5, None, "0", True, 10**9]),
        overlap=Flag(True),
        reserve_fraction=Num(0.1, top=0.99),
        efficiency=Raw(None, _EFF_BAD),
    ),
    P + "ep_all_to_all_bytes": Case(
        model=Model("deepseek-v3"),
        batch_per_rank=Int(128, big=True),
        dispatch_dtype=Choice("fp8"),
        combine_dtype=Choice("bf16"),
    ),
    P + "ep_throughput_curve": Case(
        **_EP_KW,
        seq_len=Int(2000, big=True),
        batches=Raw((8, 64), ["abc", None, (), (0,), ("x",), ODD, tuple(range(1, 100))]),
    ),
    P + "ep_batch_for_tpot": Case(**_EP_KW, seq_len=Int(2000, big=True), tpot_s=Num(0.05, top=10.0)),
    P + "pipeline_decode": Case(
        model=Model("llama3-405b"),
        system=Raw(_pp, _SYSTEM_BAD, lazy=True),
        stages=Raw(2, [0, -1, 2.5, None, "2", True, 5, 10**9]),
        batch=Int(64, big=True),
        seq_len=Int(2048, big=True),
        weight_dtype=Choice("fp8"),
        kv_dtype=Choice("bf16"),
        compute_dtype=Choice("fp8"),
        efficiency=Raw(None, _EFF_BAD),
    ),
    Q + "ParallelServingRecord": Case(
        name=Raw("row", [3, None, ODD]),
        source=Raw("a blog", [3, None, ODD]),
        model=Raw("deepseek-v3", ["no-such-model", 3, None, ODD]),
        chip=Raw("h100", ["no-such-chip", 3, None, ODD]),
        n_gpus=Int(72),
        layout=Choice("ep"),
        batch=Int(256),
        seq_len=Int(2000),
        reported_tokens_per_s_per_node=Num(22282.0),
    ),
    Q + "predict": Case(record=Raw(_record, ["abc", None, 3, ODD], lazy=True), efficiency=Raw(None, _EFF_BAD)),
    Q + "reconcile": Case(records=Raw(lambda: [_record()], ["abc", None, 3, [], ODD], lazy=True)),
    Q + "format_table": Case(rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True)),
}

COVERED = ("inference.parallel_serving", "inference.published_parallel")

#: Records the library builds itself (their fields are computed): constructors not fuzzed.
RESULT_RECORDS = {
    "inference.parallel_serving.EpDecodeStep",
    "inference.parallel_serving.PipelineDecode",
    "inference.published_parallel.ParallelReconciliation",
}
