"""Baseline calls of the efficiency model and its validation (tpu_notes.efficiency, tpu_notes.validation, the expected
steps of tpu_notes.training.expected and tpu_notes.inference.expected) for tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES``; see that file's docstring for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import INF, NAN, ODD, Case, ChipArg, Choice, Fixed, Flag, Int, Model, Num, Opt, Raw

E = "tpu_notes.efficiency."
V = "tpu_notes.validation."
_FRACTIONS_BAD = ["x", None, 3, {"tpu": 0.0}, {"tpu": 1.5}, {"tpu": NAN}, {"tpu": INF}, {"tpu": True}, {3: 0.5}]
_MODEL_BAD = ["default", 3, {}, True, ODD]


def _default():
    from tpu_notes.efficiency import DEFAULT

    return DEFAULT


def _kw():
    d = _default()
    return {f: getattr(d, f) for f in ("matmul", "matmul_knee", "attention", "links", "collective_latency", "exposed")}


def _chip(name):
    from tpu_notes.hardware import get_chip

    return get_chip(name)


def _run():
    from tpu_notes.training.published import RUNS

    return RUNS[10]


def _serving_run():
    from tpu_notes.inference.published import RUNS

    return RUNS[0]


def _rows():
    from tpu_notes.validation import reconcile_all

    return reconcile_all([_run(), _serving_run()])


def _fit():
    from tpu_notes.validation import FITS

    return FITS[1]


def _held():
    from tpu_notes.validation import HeldOut

    return [HeldOut("megatron", 8, 0.3, 0.5, 0.3)]


def _priced():
    from tpu_notes.topology import Slice
    from tpu_notes.training import Parallelism, step_time
    from tpu_notes.training.step import map_to_slice
    from tpu_notes.transformer import get_model

    p, s = Parallelism(fsdp=16), Slice("v5e", (4, 4))
    return get_model("llama3-8b"), p, map_to_slice(p, s), step_time("llama3-8b", p, s, 16 * 4096, 4096)


CASES = {
    E + "expected_max_normal": Case(n=Int(8)),
    E + "EfficiencyModel": Case(
        matmul=Raw(lambda: _kw()["matmul"], _FRACTIONS_BAD, lazy=True),
        matmul_knee=Raw({"tpu": 128.0}, ["x", None, {"cpu": 1.0}, {"tpu": -1.0}, {"tpu": NAN}, {"tpu": 1e9}]),
        attention=Raw({"tpu": 0.5, "gpu": 0.5}, _FRACTIONS_BAD + [{"cpu": 0.5}]),
        hbm=Num(0.9, top=1.0),
        links=Raw({"ici": 0.8}, ["x", None, {"ici": 0.0}, {"ici": 2.0}, {"wifi": 0.5}]),
        collective_latency=Raw({"ici": 5e-6}, ["x", None, {"ici": -1.0}, {"ici": INF}, {"ici": NAN}, {"wifi": 1e-6}]),
        exposed=Raw({"tensor": 1.0}, ["x", None, {"tensor": -0.1}, {"tensor": 1.5}, {"sideways": 0.5}]),
        sustained=Raw({"tpu": 1.0, "gpu": 0.8}, _FRACTIONS_BAD),
        step_overhead=Raw(0.0, [-1.0, NAN, INF, 5.0, "0", None, True]),
        decode_overhead=Raw(0.0, [-1.0, NAN, INF, 5.0, "0", None, True]),
        name=Raw("m", [3, None, ["x"]]),
    ),
    E + "EfficiencyModel.large_matmul": Case(self_=_default, chip=ChipArg("v5e")),
    E + "EfficiencyModel.attention_fraction": Case(self_=_default, chip=ChipArg("h100")),
    E + "EfficiencyModel.sustained_fraction": Case(self_=_default, chip=ChipArg("h100")),
    E + "EfficiencyModel.link": Case(self_=_default, link=Raw("ici", ["wifi", None, 3, "", ODD])),
    E + "EfficiencyModel.latency": Case(self_=_default, link=Raw("nvlink", ["wifi", None, 3, "", ODD])),
    E + "EfficiencyModel.exposed_fraction": Case(
        self_=_default, kind=Raw("tensor", ["sideways", None, 3, ODD]), chip=Opt(ChipArg("v5e"))
    ),
    E + "EfficiencyModel.with_": Case(self_=_default),
    E + "EfficiencyModel.shape_factor": Case(
        self_=_default,
        chip=Raw(lambda: _chip("v5e"), ["v5e", None, 3, ODD], lazy=True),
        m=Fixed(4096.0),
        k=Fixed(4096.0),
        n=Fixed(4096.0),
    ),
    E + "EfficiencyModel.fraction": Case(
        self_=_default,
        chip=Raw(lambda: _chip("h100"), ["h100", None, 3, ODD], lazy=True),
        m=Fixed(4096.0),
        k=Fixed(4096.0),
        n=Fixed(4096.0),
    ),
    E + "check_efficiency": Case(efficiency=Raw(None, _MODEL_BAD), argument=Fixed("efficiency")),
    E + "shape_factor": Case(
        chip=ChipArg("v5e"), m=Num(4096.0), k=Num(4096.0), n=Num(4096.0), efficiency=Raw(None, _MODEL_BAD)
    ),
    E + "matmul_fraction": Case(
        chip=ChipArg("h100"), m=Num(4096.0), k=Num(4096.0), n=Num(4096.0), efficiency=Raw(None, _MODEL_BAD)
    ),
    E + "matmul_seconds": Case(
        chip=ChipArg("h100"),
        m=Num(4096.0),
        k=Num(4096.0),
        n=Num(4096.0),
        dtype=Choice("bf16"),
        efficiency=Raw(None, _MODEL_BAD),
    ),
    E + "layer_elementwise_bytes": Case(
        model=Model("llama3-8b"), seq_len=Int(4096), attention=Choice("flash"), fp8=Flag(False)
    ),
    E + "logits_bytes": Case(model=Model("llama3-8b")),
    E + "fp8_scaling_bytes": Case(model=Model("llama3-8b")),
    E + "optimizer_bytes": Case(params=Num(1e9, zero=True)),
    # -- validation
    V + "all_runs": Case(),
    V + "in_sample": Case(run=Raw(_run, ["abc", None, 3, ODD], lazy=True)),
    V + "reconcile_all": Case(
        runs=Raw(lambda: [_run()], ["abc", 3, [ODD], [None], ODD], lazy=True), model=Raw(None, _MODEL_BAD)
    ),
    V + "fit_parameter": Case(
        fit=Raw(_fit, ["x", None, 3, ODD], lazy=True),
        runs=Raw(lambda: [_serving_run()], ["abc", 3, [], [ODD], ODD], lazy=True),
        model=Raw(None, _MODEL_BAD),
        steps=Int(4, top=200),
    ),
    V + "fit_model": Case(runs=Raw(lambda: [_run()], ["abc", 3, [ODD], ODD], lazy=True), model=Raw(None, _MODEL_BAD)),
    V + "report": Case(model=Raw(None, _MODEL_BAD), run_baseline=False),
    V + "leave_one_group_out": Case(model=Raw(None, _MODEL_BAD), run_baseline=False),
    V + "format_held_out": Case(rows=Raw(_held, ["abc", None, 3, [ODD], ODD], lazy=True)),
    V + "held_out_table": Case(rows=Raw(_held, ["abc", None, 3, [ODD], ODD], lazy=True)),
    # -- the expected steps
    "tpu_notes.training.expected.expected_step": Case(
        m=Fixed(lambda: _priced()[0], lazy=True),
        p=Fixed(lambda: _priced()[1], lazy=True),
        lay=Fixed(lambda: _priced()[2], lazy=True),
        batch_tokens=Int(16 * 4096),
        seq_len=Int(4096),
        remat=Choice("full_block"),
        dtype=Choice("bf16"),
        circular_repeats=Int(1),
        collectives=Raw(
            lambda: dict(_priced()[3].collectives), ["x", None, 3, {"fsdp": -1.0}, {"fsdp": NAN}], lazy=True
        ),
        hbm_time=Num(0.01, zero=True),
        model_flops=Num(1e15, zero=True),
        attention=Choice("flash"),
        efficiency=Raw(None, _MODEL_BAD),
    ),
    "tpu_notes.inference.expected.expected_decode_step": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("h100"),
        n_chips=Int(2, big=True),
        batch=Int(32, big=True),
        seq_len=Int(2048, big=True),
        weight_dtype=Choice("bf16"),
        kv_dtype=Choice("bf16"),
        compute_dtype=Choice("bf16"),
        efficiency=Raw(None, _MODEL_BAD),
        local_window=Opt(Int(1024, big=True)),
        local_fraction=Num(0.0, zero=True, top=1.0),
    ),
    "tpu_notes.inference.expected.expected_prefill": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=Int(4, big=True),
        prompt_len=Int(1024, big=True),
        batch=Int(2, big=True),
        weight_dtype=Choice("bf16"),
        compute_dtype=Choice("bf16"),
        cached_len=Raw(0, [-1, 1024, 2.5, None, "0", True]),
        efficiency=Raw(None, _MODEL_BAD),
    ),
    # -- the per-group report of tpu_notes.runs
    "tpu_notes.runs.group_errors": Case(rows=Raw(_rows, ["abc", None, 3, [ODD], ODD, []], lazy=True)),
    "tpu_notes.runs.format_errors": Case(
        errors=Raw(
            lambda: __import__("tpu_notes.runs").runs.group_errors(_rows()), ["abc", None, 3, [ODD], ODD], lazy=True
        )
    ),
    "tpu_notes.runs.errors_table": Case(
        errors=Raw(
            lambda: __import__("tpu_notes.runs").runs.group_errors(_rows()), ["abc", None, 3, [ODD], ODD], lazy=True
        )
    ),
}


S = "tpu_notes.training.sweeps."
T2 = "tpu_notes.training.sweeps_tpu."


def _sweep():
    from tpu_notes.training.sweeps import SWEEPS

    return SWEEPS[0]


def _sweep_runs():
    return _sweep().runs[:2]


CASES.update(
    {
        "tpu_notes.training.sweep_record.LayoutSweep": Case(
            name=Raw("a sweep", [3, None, ODD]),
            source=Raw("a source", [3, None, ODD]),
            kind=Choice("slices"),
            varies=Raw("slices", [3, None, ODD]),
            runs=Raw(_sweep_runs, ["abc", None, 3, (), [ODD], (ODD, ODD)], lazy=True),
            comm_bound=Flag(True),
        ),
        S + "spearman": Case(
            a=Raw([1.0, 2.0, 3.0], ["abc", None, 3, [1.0], [ODD, ODD]]),
            b=Raw([1.0, 3.0, 2.0], ["abc", None, 3, [1.0], [1.0, 2.0]]),
        ),
        S + "regret": Case(
            measured=Raw([1.0, 2.0, 3.0], ["abc", None, 3, [], [1.0, 0.0, 2.0], [ODD, ODD, ODD]]),
            predicted=Raw([1.0, 3.0, 2.0], ["abc", None, 3, [1.0]]),
        ),
        S + "evaluate": Case(sweep=Raw(_sweep, ["abc", None, 3, ODD], lazy=True), model=Raw(None, _MODEL_BAD)),
        S + "evaluate_all": Case(
            sweeps=Raw(lambda: [_sweep()], ["abc", 3, [ODD], ODD], lazy=True), model=Raw(None, _MODEL_BAD)
        ),
        S + "format_sweeps": Case(
            results=Raw(
                lambda: [__import__("tpu_notes.training.sweeps").training.sweeps.evaluate(_sweep())],
                ["abc", None, 3, [ODD], ODD],
                lazy=True,
            )
        ),
    }
)

#: training.sweeps_gpu holds records only (GPU_SWEEPS, no public function or class): covered with no entries.
CASES[T2 + "maxtext_2023"] = Case(scale=Raw(32, [0, 3, -4, 2.5, "32", None, True, 2**20]))

COVERED = (
    "efficiency",
    "validation",
    "training.expected",
    "inference.expected",
    "training.sweeps",
    "training.sweep_record",
    "training.sweeps_gpu",
    "training.sweeps_tpu",
)

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {
    "validation.Fit",
    "validation.HeldOut",
    "training.sweeps.SweepResult",
    "runs.GroupError",
    "training.expected.ExpectedStep",
    "inference.expected.ExpectedDecodeStep",
}
