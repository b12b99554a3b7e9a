"""Baseline calls of Chapter 8's analysis modules (tpu_notes.inference.published, tpu_notes.inference.deployment) for
tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES`` at the end of that file; see its docstring for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import INF, NAN, ODD, Case, ChipArg, Choice, Fixed, Flag, Int, Model, Num, Opt, Raw, Sizes

I = "tpu_notes.inference."
_TEXT_BAD = [3, None, ODD, ["x"], True]


def _run():
    from tpu_notes.inference.published import RUNS

    return RUNS[6]


def _rows():
    from tpu_notes.inference.published import reconcile

    return reconcile()[:2]


CASES = {
    I + "published.PublishedServing": Case(
        name=Raw("run", _TEXT_BAD),
        source=Raw("a benchmark", _TEXT_BAD),
        model=Model("llama3-8b"),
        chip=ChipArg("h100"),
        n_chips=Int(2, big=True),
        batch=Int(64, big=True),
        mode=Choice("static"),
        weight_dtype=Choice("fp8"),
        kv_dtype=Choice("fp8"),
        compute_dtype=Choice("fp8"),
        input_len=Opt(Int(128, big=True)),
        output_len=Opt(Int(128, big=True)),
        cache_len=Opt(Int(2048, big=True), none_baseline=True),
        reported_tokens_per_s=Opt(Num(3000.0)),
        reported_latency_s=Opt(Num(0.02, top=10.0), none_baseline=True),
        group=Raw("gpu-serving", ["", "serving", 3, None, ODD]),
        notes=Raw("", _TEXT_BAD),
    ),
    I + "published.predict": Case(
        run=Raw(_run, ["abc", None, 3, ODD], lazy=True),
        efficiency=Num(0.8, top=1.0),
        model=Raw(None, ["default", 3, {}, True, ODD]),
    ),
    I + "published.reconcile": Case(
        runs=Raw(lambda: [_run()], ["abc", None, 3, [], [ODD], ODD], lazy=True), efficiency=Num(0.8, top=1.0)
    ),
    I + "published.fitted_efficiency": Case(runs=Raw(lambda: [_run()], ["abc", None, 3, [], [ODD], ODD], lazy=True)),
    I + "published.format_table": Case(rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True)),
    I + "deployment.sharded_step_time": Case(
        model=Model("llama3-70b"),
        chip=ChipArg("v5e", tpu=True),
        n_chips=Int(16, big=True),
        batch=Int(32, big=True),
        seq_len=Int(8192, big=True),
        tp_axes=Int(2, top=2),
        weight_dtype=Choice("int8"),
        kv_dtype=Choice("int8"),
        compute_dtype=Choice("bf16"),
        activation_dtype=Choice("bf16"),
        overlap=Flag(True),
    ),
    I + "deployment.best_deployment": Case(
        model=Model("llama3-70b"),
        chip=ChipArg("v5e", tpu=True),
        seq_len=Int(8192, big=True),
        latency_limit_s=Num(0.02, top=3600.0),
        chip_counts=Sizes((8, 16)),
        batches=Sizes((16, 64)),
        tp_axes=Int(2, top=2),
        weight_dtype=Choice("int8"),
        kv_dtype=Choice("int8"),
        compute_dtype=Choice("bf16"),
        overlap=Flag(False),
    ),
}

# -- tpu_notes.runs: the framework both published-run modules share ---------------------------------------------------
R = "tpu_notes.runs."


def _record_type():
    from tpu_notes.inference.published import PublishedServing

    return PublishedServing


def _row_type():
    from tpu_notes.inference.published import ServingReconciliation

    return ServingReconciliation


CASES.update(
    {
        R + "PublishedRecord": Case(
            name=Raw("run", _TEXT_BAD), source=Raw("a benchmark", _TEXT_BAD), model=Model("llama3-8b")
        ),
        R + "check_under_roofline": Case(
            field=Fixed("reported_tokens_per_s"),
            ratio=Raw(0.5, [2.0, 1e5, NAN, INF, -1.0, None, "0.5"], names=("roofline", "reported_tokens_per_s")),
        ),
        R + "check_runs": Case(
            runs=Raw(lambda: [_run()], ["abc", None, 3, [], [ODD], ODD], lazy=True),
            record_type=Fixed(_record_type, lazy=True),
        ),
        R + "check_rows": Case(
            rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True), row_type=Fixed(_row_type, lazy=True)
        ),
        R + "median_ratio": Case(rows=Raw(_rows, ["abc", None, 3, [ODD], ODD, []], lazy=True)),
    }
)

COVERED = ("inference.published", "inference.deployment", "runs")

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {
    "inference.published.ServingReconciliation",
    "inference.deployment.ShardedStepTime",
    "runs.Reconciliation",
}
