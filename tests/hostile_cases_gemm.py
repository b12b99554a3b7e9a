"""Baseline calls of the GEMM model (tpu_notes.gemm) for tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES``; see that file's docstring for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import INF, NAN, ODD, Case, ChipArg, Choice, Fixed, Num, Raw

G = "tpu_notes.gemm."
_MODEL_BAD = ["default", 3, {}, True, ODD]


def _default():
    from tpu_notes.gemm import DEFAULT

    return DEFAULT


def _record():
    from tpu_notes.gemm import GEMM_SWEEPS

    return GEMM_SWEEPS[3]


def _rows():
    from tpu_notes.gemm import gemm_report

    return gemm_report(records=[_record()])


CASES = {
    G + "GemmMeasurement": Case(
        chip=Raw("h100", ["nope", None, 3, ODD]),
        m=Raw(1024, [0, -1, 1.5, None, "1", True]),
        k=Raw(1024, [0, -1, 1.5, None, "1", True]),
        n=Raw(1024, [0, -1, 1.5, None, "1", True]),
        dtype=Raw("bf16", ["fp64", None, 3]),
        flops_per_s=Raw(1e14, [0, -1.0, NAN, INF, None, "1", True]),
        source=Raw("mamf", ["blog", None, 3]),
        chip_share=Raw(1.0, [0, 1.5, NAN, None, True]),
        timing=Raw("device", ["wall", None, 3]),
    ),
    G + "GemmModel": Case(
        plateau=Raw(
            lambda: dict(_default().plateau),
            ["x", None, {"tpu": 0.0}, {"tpu": 1.5}, {"tpu": NAN}, {"cpu": 0.5}, {"tpu": True}],
            lazy=True,
        ),  # fmt: skip
        plateau_shape=Raw(lambda: dict(_default().plateau_shape), ["x", None, {}, {"tpu": (1, 2)}], lazy=True),
        fixed=Raw({"tpu": 3e-6, "gpu": 5e-6}, ["x", None, {"tpu": -1.0}, {"tpu": INF}, {"cpu": 1e-6}]),
        exposed_bytes=Raw({"tpu": 0.5}, ["x", None, {"tpu": -0.1}, {"tpu": 2.0}, {"h100": 0.1}]),
        host_dispatch=Raw({}, ["x", None, {"blog": 1e-6}, {"mamf": -1.0}]),
        gpu_tile=Raw((128, 256), [None, (128,), (0, 256), (128.5, 256), "128x256"]),
        split_k_min=Raw(256, [0, -1, 1.5, None, True]),
        row_tile=Raw(8, [0, -1, 1.5, None, True]),
        name=Raw("m", [3, None, ["x"]]),
    ),
    G + "GemmModel.with_": Case(self_=_default),
    G + "GemmModel.plateau_of": Case(self_=_default, chip=ChipArg("v5e")),
    G + "GemmModel.fixed_of": Case(self_=_default, chip=ChipArg("h100")),
    G + "GemmModel.rate": Case(self_=_default, chip=ChipArg("v6e")),
    G + "GemmModel.seconds": Case(
        self_=_default,
        chip=ChipArg("v5e"),
        m=Fixed(4096.0),
        k=Fixed(4096.0),
        n=Fixed(4096.0),
        dtype=Fixed("bf16"),
        share=Fixed(1.0),
    ),  # fmt: skip
    G + "GemmModel.fraction": Case(
        self_=_default, chip=ChipArg("h100"), m=Fixed(4096.0), k=Fixed(4096.0), n=Fixed(4096.0), dtype=Fixed("bf16")
    ),
    G + "GemmModel.shape_factor": Case(
        self_=_default, chip=ChipArg("v6e"), m=Fixed(4096.0), k=Fixed(4096.0), n=Fixed(4096.0)
    ),
    G + "GemmModel.predict": Case(self_=_default, record=Raw(_record, ["x", None, 3, ODD], lazy=True)),
    G + "check_model": Case(model=Raw(None, _MODEL_BAD), argument=Fixed("model")),
    G + "gemm_seconds": Case(
        chip=ChipArg("v5e"),
        m=Num(4096.0),
        k=Num(4096.0),
        n=Num(4096.0),
        dtype=Choice("bf16"),
        model=Raw(None, _MODEL_BAD),
    ),  # fmt: skip
    G + "gemm_fraction": Case(
        chip=ChipArg("h100"),
        m=Num(4096.0),
        k=Num(4096.0),
        n=Num(4096.0),
        dtype=Choice("bf16"),
        model=Raw(None, _MODEL_BAD),
    ),  # fmt: skip
    G + "shape_factor": Case(
        chip=ChipArg("v5p"), m=Num(4096.0), k=Num(4096.0), n=Num(4096.0), model=Raw(None, _MODEL_BAD)
    ),  # fmt: skip
    G + "gemm_report": Case(
        model=Raw(None, _MODEL_BAD), records=Raw(lambda: [_record()], ["abc", 3, [ODD], [None], ODD], lazy=True)
    ),
    G + "error_summary": Case(
        rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True), min_size=Raw(1024, [0, -1, 1.5, None, True])
    ),
    G + "format_gemm_report": Case(rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True)),
}

COVERED = ("gemm",)

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {"gemm.GemmRow"}
