"""Baseline calls of tpu_notes.parallel and tpu_notes.training.collectives (Chapter 5's JAX side and its oracle)
for tests/test_hostile_input.py; merged into ``hostile_cases.CASES`` at the end of that file."""

from hostile_cases import ODD, Case, Choice, Fixed, Flag, Int, Model, Num, Opt, Raw, lazy

T = "tpu_notes."


def _P(**k):
    from tpu_notes.training import Parallelism

    return Parallelism(**k)


def _cfg():
    from tpu_notes import parallel

    return parallel.ORACLE_CONFIG


_bad_par = [None, "data=8", 8, {"data": 8}, ODD]
# 16: more devices than exist; context=2: context parallelism is priced analytically only, the trainer refuses it
for f in (lambda: _P(data=16), lambda: _P(data=4, dcn=2), lambda: _P(data=4, context=2), lambda: _P(expert=8)):
    _bad_par.append(lazy(f))


def _params():
    from tpu_notes import model

    return model.init_params(_cfg().with_(n_layers=4), 0)


def _staged():
    from tpu_notes import parallel

    return parallel.stage_params(_params(), 2)


def _compiled():
    from tpu_notes import parallel

    return parallel.compiled_step(_cfg(), _P(data=8), 16, 16)


def _mesh():
    from tpu_notes import parallel

    return parallel.make_mesh(_P(data=8))


def _rows():
    from tpu_notes import parallel

    return parallel.run_training_case(parallel.TRAINING_CASES[0])


def _case():
    from tpu_notes import parallel

    return parallel.TRAINING_CASES[0]


def _summary():
    from tpu_notes import parallel

    return [(parallel.TRAINING_CASES[0], _rows())]


def _pred():
    from tpu_notes.training.collectives import predicted_collectives

    return predicted_collectives("tiny-mha", _P(data=8), 1024, 64)


_step = dict(
    model=Model(_cfg, lazy=True),
    parallelism=Raw(lambda: _P(data=8), _bad_par, lazy=True),
    batch=Int(16),
    seq_len=Int(16),
)
CASES = {
    T + "parallel.make_mesh": Case(
        parallelism=Raw(lambda: _P(data=8), _bad_par[:-1], lazy=True),
        devices=Opt(Raw(None, ["cpu", 3, [1, 2], ODD]), none_baseline=True),
    ),
    T + "parallel.batch_spec": Case(parallelism=Raw(lambda: _P(data=8), [None, "x", 3, ODD], lazy=True)),
    T + "parallel.param_specs": Case(
        model=Model(_cfg, lazy=True), parallelism=Raw(lambda: _P(data=8), [None, "x", 3, ODD], lazy=True)
    ),
    T + "parallel.stage_params": Case(params=Raw(_params, [None, "x", 3, {}, ODD], lazy=True), n_stages=Int(2)),
    T + "parallel.unstage_params": Case(params=Raw(_staged, [None, "x", 3, {}, ODD], lazy=True)),
    T + "parallel.compiled_step": Case(
        **_step, dtype=Choice("fp32"), constrain=Flag(True), optimize=Flag(False), remat=Flag(False)
    ),
    T + "parallel.train": Case(
        **{**_step, "steps": Int(1, big=True)},
        seed=Int(0, zero=True, big=True),
        lr=Num(0.5),
        dtype=Choice("fp32"),
        same_batch=Flag(True),
        remat=Flag(False),
    ),
    T + "parallel.measure_step": Case(**_step, repeats=Int(1, big=True), dtype=Choice("fp32"), timing=Flag(False)),
    T + "parallel.xla_collectives": Case(
        compiled=Raw(_compiled, [None, 3, ODD], lazy=True), mesh=Raw(_mesh, [None, "x", {"data": 8}, ODD], lazy=True)
    ),
    T + "parallel.training_cases": Case(ids=Opt(Raw(["data=8"], ["data=8", ["nope"], 3, ODD]))),
    T + "parallel.oracle_rows": Case(**_step, dtype=Choice("fp32"), remat=Flag(False)),
    T + "parallel.run_training_case": Case(case=Raw(_case, [None, "data=8", 3, ODD], lazy=True)),
    T + "parallel.format_training_table": Case(
        rows=Raw(_rows, [None, "x", 3, [3], ODD], lazy=True), title=Opt(Raw("t", [3, ["t"], ODD]))
    ),
    T + "parallel.oracle_summary": Case(
        run_baseline=False, cases=Opt(Raw(None, ["x", 3, [3], ODD]), none_baseline=True)
    ),
    T + "parallel.format_oracle_summary": Case(results=Raw(_summary, [None, "x", 3, [3], ODD], lazy=True)),
    T + "training.collectives.predicted_collectives": Case(
        model=Model("tiny-mha"),
        parallelism=Raw(lambda: _P(data=8), [None, "x", 3, ODD, lazy(lambda: _P(data=4, context=2))], lazy=True),
        batch_tokens=Int(1024),
        seq_len=Int(64),
        dtype=Choice("bf16"),
        remat=Flag(False),
        fused_projections=Flag(False),
    ),
    T + "training.collectives.collective_totals": Case(predicted=Raw(_pred, [None, "x", 3, [3], ODD], lazy=True)),
}


def _tokens():
    from tpu_notes import model

    return model.random_tokens(_cfg(), 16, 16)


def _init():
    from tpu_notes import model

    return model.init_params(_cfg(), 0)


def _pp_mesh():
    from tpu_notes import parallel

    return parallel.make_mesh(_P(data=4, pipeline=2, microbatches=2))


def _pp_params():
    from tpu_notes import model, parallel

    return parallel.stage_params(model.init_params(_cfg(), 0), 2)


CASES.update(
    {
        T + "parallel.layout_loss": Case(
            params=Fixed(_init, lazy=True),
            tokens=Fixed(_tokens, lazy=True),
            model=Model(_cfg, lazy=True),
            parallelism=Raw(lambda: _P(data=8), [None, "x", 3, ODD], lazy=True),
            mesh=Fixed(_mesh, lazy=True),
            remat=Flag(False),
        ),
        T + "parallel.pipeline_loss": Case(
            run_baseline=False,
            params=Fixed(_pp_params, lazy=True),
            tokens=Fixed(_tokens, lazy=True),
            model=Model(_cfg, lazy=True),
            parallelism=Raw(lambda: _P(data=4, pipeline=2, microbatches=2), [None, "x", 3, ODD], lazy=True),
            mesh=Fixed(_pp_mesh, lazy=True),
        ),
    }
)


def _training_init_cases() -> dict:
    """The JAX-facing wrapper in tpu_notes.training's own __init__ (compiled_step moved out: tpu_notes.parallel's)."""
    return {
        T + "training.predicted_collectives": Case(
            model=Model("tiny-mha"),
            parallelism=Raw(lambda: _P(data=8), [None, "x", 3, ODD], lazy=True),
            batch_tokens=Int(1024),
            seq_len=Int(64),
            dtype=Choice("bf16"),
        ),
    }


CASES.update(_training_init_cases())

CASES[T + "parallel.train_layouts"] = Case(n_devices=Int(8, top=4096))


def _mrows():
    from tpu_notes import memory_oracle, parallel

    return memory_oracle.memory_rows(parallel.TRAINING_CASES[:1])


CASES.update(
    {
        T + "memory_oracle.step_memory": Case(case=Raw(_case, [None, "data=8", 3, ODD], lazy=True)),
        T + "memory_oracle.trainer_param_bytes": Case(
            config=Raw(_cfg, [None, "x", 3, ODD], lazy=True),
            parallelism=Raw(lambda: _P(data=8), [None, "x", 3, ODD], lazy=True),
            dtype=Choice("fp32"),
        ),
        T + "memory_oracle.memory_row": Case(
            case=Raw(_case, [None, "data=8", 3, ODD], lazy=True),
            devices=Opt(Raw(None, ["cpu", 3, [1, 2], ODD]), none_baseline=True),
        ),
        T + "memory_oracle.memory_rows": Case(
            run_baseline=False, cases=Opt(Raw(None, ["x", 3, [3], ODD]), none_baseline=True)
        ),
        T + "memory_oracle.format_memory_table": Case(
            rows=Raw(_mrows, [None, "x", 3, [3], ODD], lazy=True), notes=Flag(True)
        ),
    }
)
COVERED = ("parallel", "training", "training.collectives", "memory_oracle")
RESULT_RECORDS = {
    "memory_oracle.MemoryRow",
    "parallel.XlaCollective",
    "parallel.TrainingRow",
    "parallel.TrainingCase",
    "training.collectives.PredictedCollective",
}
