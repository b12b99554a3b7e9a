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


def _workload_run():
    from tpu_notes.inference.published import RUNS

    return next(r for r in RUNS if r.workload == "closed" and r.batch == 1)


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
    I + "published.simulate_run": Case(
        run=Raw(_workload_run, ["abc", None, 3, ODD, _run], lazy=True),
        model=Raw(None, ["default", 3, {}, True, ODD]),
    ),
    I + "published.simulated_figure": Case(
        run=Raw(_workload_run, ["abc", None, 3, ODD, _run], lazy=True),
        model=Raw(None, ["default", 3, {}, True, ODD]),
    ),
    I + "published.reconcile": Case(
        runs=Raw(lambda: [_run()], ["abc", None, 3, [], [ODD], ODD], lazy=True), efficiency=Num(0.8, top=1.0)
    ),
    I + "published.fitted_efficiency": Case(runs=Raw(lambda: [_run()], ["abc", None, 3, [], [ODD], ODD], lazy=True)),
    I + "published.format_table": Case(rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True)),
    I + "published.source_table": Case(
        rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True),
        calibrated=Raw(None, ["abc", 3, [ODD], ODD]),
    ),
    I + "published.runs_table": Case(
        rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True),
        calibrated=Raw(None, ["abc", 3, [ODD], ODD]),
        metric=Raw("tokens/s/chip", ["abc", None, 3, ODD]),
    ),
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
        rank_by=Choice("roofline"),
    ),
    I + "deployment.axis_sizes": Case(n_chips=Int(16, big=True), n_axes=Int(2, top=3)),
}

# -- tpu_notes.inference.cost and the engine-priced speculative decoding: a Deployment is an object, tried against
# the things a user might pass instead (a model name, a chip, None) ---------------------------------------------------
_NOT_A_DEPLOYMENT = ["llama3-8b", "v5e", None, 3, ODD, ["llama3-8b"]]


def _deployment():
    from tpu_notes.inference.engine import deploy

    return deploy("llama3-8b", "v5e", 4)


def _sim_run():
    from tpu_notes.inference.simulator import simulate
    from tpu_notes.inference.workload import LengthDistribution, Workload

    fixed = LengthDistribution.fixed
    return simulate(_deployment(), Workload(n_requests=20, rate=2.0, prompt=fixed(256), output=fixed(32)))


def _slo():
    from tpu_notes.inference.slo import SLO

    return SLO(2.0, 0.05)


def _floor_cost():
    from tpu_notes.inference.cost import serving_cost

    return serving_cost(_deployment(), 1024, 128, 8)


def _price_range():
    from tpu_notes.inference.cost import price_sensitivity

    return price_sensitivity(_floor_cost(), 0.54, 1.2)


def _overhead_range():
    from tpu_notes.inference.cost import overhead_sensitivity

    return overhead_sensitivity(_deployment(), 1024, 128, 8)


def _draft():
    from tpu_notes.inference.engine import deploy

    return deploy("llama3.2-1b", "v5e", 4)  # a small draft model of the same vocabulary beside the 8B target


CASES.update(
    {
        I + "cost.serving_cost": Case(
            deployment=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            prompt_len=Int(1024, big=True),
            output_len=Int(128, big=True),
            batch=Int(8, big=True),
            utilisation=Num(0.5, top=1.0),
            dollars_per_chip_hour=Opt(Num(1.2)),
            prefill_batch=Opt(Int(2, big=True)),
        ),
        I + "cost.cost_at_rate": Case(
            result=Raw(_sim_run, [None, 3, "run", ODD, _deployment], names=("SimResult",), lazy=True),
            chip=ChipArg("v5e"),
            dollars_per_chip_hour=Opt(Num(1.2)),
            ttft_slo_s=Opt(Num(1.0)),
            tpot_slo_s=Opt(Num(0.05)),
            slo=Opt(Raw(_slo, [3, "slo", (2.0, 0.05), ODD], lazy=True), none_baseline=True),
        ),
        I + "cost.chip_prices": Case(chip=ChipArg("v5e")),
        I + "cost.ChipPrice": Case(
            chip=Raw("v5e", ["no-such-chip", 3, None, ODD, ["v5e"]]),
            kind=Choice("3-yr committed"),
            dollars_per_chip_hour=Num(0.54, top=1e6),
            source=Raw("given", [3, None, ODD, "", ["given"]]),
        ),
        I + "cost.price_sensitivity": Case(
            cost=Raw(_floor_cost, [None, 3, "cost", ODD, 1.2], lazy=True),
            low=Num(0.54, top=1e6),
            high=Num(1.2, top=1e6),
        ),
        I + "cost.PriceRange.sentence": Case(self_=_price_range, what=Choice("output")),
        I + "cost.with_decode_overhead": Case(
            deployment=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            factor=Num(0.5, zero=True, top=100.0),
        ),
        I + "cost.overhead_sensitivity": Case(
            deployment=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            prompt_len=Int(1024, big=True),
            output_len=Int(128, big=True),
            batch=Int(8, big=True),
            low=Num(0.5, zero=True, top=100.0),
            high=Num(1.5, zero=True, top=100.0),
            dollars_per_chip_hour=Opt(Num(1.2)),
            prefill_batch=Opt(Int(2, big=True)),
        ),
        I + "cost.OverheadSensitivity.sentence": Case(self_=_overhead_range, what=Choice("output")),
        I + "speculative.speculative_decoding": Case(
            deployment=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            batch=Int(8, big=True),
            context=Int(1024, big=True),
            k=Int(4, big=True),
            acceptance=Num(0.8, zero=True, top=1.0),
            draft=Raw(_draft, ["llama3-8b", "llama2-7b", "nosuch", "", 3, ODD], lazy=True),
        ),
        I + "speculative.speculative_vs_batch": Case(
            deployment=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            context=Int(1024, big=True),
            k=Int(4, big=True),
            acceptance=Num(0.8, zero=True, top=1.0),
            batches=Sizes((1, 8, 64), big=True),
            draft_cost=Opt(Num(0.05, zero=True)),
        ),
        I + "speculative.draft_head": Case(target=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True)),
        I + "speculative.draft_deployment": Case(
            target=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            draft=Raw("llama3.2-1b", ["llama3-8b", "llama3-405b", "llama2-7b", "nosuch", "", None, 3, ODD]),
        ),
        I + "speculative.round_seconds": Case(
            target=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            draft=Raw("eagle", ["llama2-7b", "nosuch", "", 3, ODD]),
            decode=Int(8, big=True),
            kv_tokens=Int(8192, big=True),
            k=Int(4, big=True),
        ),
        I + "speculative.best_k_at_batch": Case(
            deployment=Raw(_deployment, _NOT_A_DEPLOYMENT, lazy=True),
            batch=Int(8, big=True),
            context=Int(1024, big=True),
            acceptance=Num(0.8, zero=True, top=1.0),
            k_max=Int(8, top=64),
            draft_cost=Opt(Num(0.05, zero=True)),
        ),
    }
)

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

# -- tpu_notes.inference.published_ttft: first-token rows and the per-group table ------------------------------------
T = "tpu_notes.inference.published_ttft."


def _ttft_static():
    from tpu_notes.inference.published_ttft import TTFT_RUNS

    return next(r for r in TTFT_RUNS if r.workload == "static")


def _ttft_closed():
    from tpu_notes.inference.published_ttft import TTFT_RUNS

    return next(r for r in TTFT_RUNS if r.workload == "closed" and r.batch == 1)


def _ttft_rows():
    from tpu_notes.inference.published_ttft import predict_ttft

    return [predict_ttft(_ttft_static())]


def _groups():
    from tpu_notes.inference.published_ttft import serving_groups

    return serving_groups(_ttft_rows() + _rows())


CASES.update(
    {
        T + "PublishedTTFT": Case(
            name=Raw("run", _TEXT_BAD),
            source=Raw("a benchmark", _TEXT_BAD),
            model=Model("llama3-8b"),
            chip=ChipArg("h100"),
            n_chips=Int(1, big=True),
            batch=Int(1, big=True),
            workload=Choice("static"),
            input_len=Int(2048, big=True),
            output_len=Int(1, big=True),
            reported_ttft_s=Num(0.05, top=3600.0),
            statistic=Choice("mean"),
            weight_dtype=Choice("fp8"),
            kv_dtype=Choice("fp8"),
            compute_dtype=Choice("fp8"),
            group=Raw("gpu-serving", ["", "serving", 3, None, ODD]),
            notes=Raw("", _TEXT_BAD),
        ),
        T + "predict_ttft": Case(
            run=Raw(_ttft_static, ["abc", None, 3, ODD, _run], lazy=True),
            model=Raw(None, ["default", 3, {}, True, ODD]),
        ),
        T + "simulated_ttft": Case(
            run=Raw(_ttft_closed, ["abc", None, 3, ODD, _run, _ttft_static], lazy=True),
            model=Raw(None, ["default", 3, {}, True, ODD]),
        ),
        T + "reconcile_ttft": Case(
            runs=Raw(lambda: [_ttft_static()], ["abc", None, 3, [], [ODD], ODD, [_run]], lazy=True),
            model=Raw(None, ["default", 3, {}, True, ODD]),
        ),
        T + "row_metric": Case(row=Raw(lambda: _ttft_rows()[0], ["abc", None, 3, ODD], lazy=True)),
        T + "row_ratio": Case(row=Raw(lambda: _ttft_rows()[0], ["abc", None, 3, ODD], lazy=True)),
        T + "serving_groups": Case(
            rows=Raw(_ttft_rows, ["abc", 3, [], [ODD], ODD], lazy=True),
            model=Raw(None, ["default", 3, {}, True, ODD]),
        ),
        T + "format_serving_groups": Case(groups=Raw(_groups, ["abc", None, 3, [ODD], ODD], lazy=True)),
        T + "serving_medians": Case(groups=Raw(_groups, ["abc", 3, [ODD], ODD], lazy=True)),
        T + "format_ttft_table": Case(rows=Raw(_ttft_rows, ["abc", None, 3, [ODD], ODD], lazy=True)),
    }
)

COVERED = ("inference.published", "inference.published_ttft", "inference.deployment", "inference.cost", "runs")

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {
    "inference.published.ServingReconciliation",
    "inference.published_ttft.TTFTReconciliation",
    "inference.published_ttft.ServingGroup",
    "inference.deployment.ShardedStepTime",
    "inference.cost.ServingCost",
    "inference.cost.CostAtRate",
    "inference.cost.PriceRange",
    "inference.cost.OverheadSensitivity",
    "inference.speculative.SpeculativeResult",
    "runs.Reconciliation",
}
