"""Baseline calls of the one serving step model (tpu_notes.inference.engine) for tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES`` at the end of that file; see its docstring for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import INF, NAN, ODD, Case, ChipArg, Choice, Fixed, Flag, Int, Model, Num, Opt, Raw

E = "tpu_notes.inference.engine."
_SYSTEM_BAD = ["no-such-chip", 3, None, ODD, [16], b"v5e"]


def _dep():
    from tpu_notes.inference.engine import deploy

    return deploy("llama3-70b", "v5e", 16, weight_dtype="int8", kv_dtype="int8")


CASES = {
    E + "system_for": Case(chip=ChipArg("v5e"), n_chips=Int(16)),
    E + "deploy": Case(
        model=Model("llama3-70b"),
        system=Raw("v5e", _SYSTEM_BAD),
        n_chips=Opt(Int(16, big=True)),
        weight_dtype=Choice("int8"),
        kv_dtype=Choice("int8"),
        compute_dtype=Opt(Choice("bf16")),
        reserve_fraction=Num(0.1, zero=True, top=0.99),
        efficiency=Raw(None, ["default", 3, ODD]),
        check_memory=Flag(True),
        prefill_sharding=Choice("tensor"),
    ),
    E + "Deployment.kv_blocks": Case(self_=_dep, block_size=Int(16, top=65536)),
    E + "Deployment.max_batch": Case(self_=_dep, seq_len=Int(8192, big=True)),
    E + "Deployment.step": Case(
        self_=_dep,
        decode=Int(32, zero=True, big=True),
        kv_tokens=Int(32 * 8192, zero=True, big=True),
        prefill_tokens=Int(0, zero=True, big=True),
        prefill_pairs=Num(0.0, zero=True),
        prefill_kv=Int(0, zero=True, big=True),
    ),
    E + "Deployment.decode_step": Case(
        self_=_dep, batch=Int(32, big=True), seq_len=Int(8192, big=True), allow_unfit=Flag(False)
    ),
    E + "Deployment.prefill_step": Case(
        self_=_dep,
        prompt_len=Int(8192, big=True),
        batch=Int(1, big=True),
        cached_len=Raw(0, [-1, 8192, 2.5, None, "0", True, NAN, INF]),
    ),
}

COVERED = ("inference.engine",)

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {"inference.engine.Deployment", "inference.engine.EngineStep"}

_ = Fixed  # the kinds this file may need as it grows

CASES.update(
    {
        E + "resolve_compute_dtype": Case(
            chip=ChipArg("v5e"), weight_dtype=Choice("int8"), compute_dtype=Opt(Choice("int8"))
        ),
        E + "vector_rate": Case(chip=ChipArg("v5e")),
        E + "best_prefill_sharding": Case(
            deployment=Raw(_dep, [None, 3, "v5e", ODD], lazy=True),
            prompt_len=Int(8192, big=True),
            batch=Int(1, big=True),
        ),
    }
)
