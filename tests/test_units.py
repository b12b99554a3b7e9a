"""Units, dtypes, input checks and the formatter."""

import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tpu_notes import units as U
from tpu_notes.units import canonical_dtype, check_choice, check_positive, dtype_bytes, fmt


def test_dtype_bytes_follow_bit_widths():
    bits = {"fp32": 32, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
    for name, b in bits.items():
        assert dtype_bytes(name) == b / 8
    assert canonical_dtype("BFloat16") == "bf16"


@pytest.mark.parametrize("bad", ["fp16x", "", "int3"])
def test_unknown_dtype_lists_known_ones(bad):
    with pytest.raises(ValueError, match="known dtypes: bf16, fp32, fp8, int4, int8"):
        dtype_bytes(bad)


def test_dtype_must_be_a_string():
    with pytest.raises(TypeError, match="dtype"):
        dtype_bytes(2)


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf")])
def test_check_positive_rejects(value):
    with pytest.raises(ValueError, match="size"):
        check_positive("size", value)


def test_check_positive_types_and_integers():
    with pytest.raises(TypeError, match="size"):
        check_positive("size", "3")
    with pytest.raises(TypeError):
        check_positive("size", True)
    with pytest.raises(ValueError, match="whole number"):
        check_positive("size", 2.5, integer=True)
    assert check_positive("size", 0, allow_zero=True) == 0
    assert check_positive("size", 4.0, integer=True) == 4


def test_check_choice():
    assert check_choice("bound", "HBM", ["hbm", "ici"]) == "hbm"
    with pytest.raises(ValueError, match=r"bound must be one of \['hbm', 'ici'\]"):
        check_choice("bound", "dram", ["hbm", "ici"])


@pytest.mark.parametrize(
    "value, unit, text",
    [
        (5.6e-4, "s", "560 µs"),
        (3.4e7, "B", "34 MB"),
        (1.97e14, "FLOP/s", "1.97e14 FLOP/s"),
        (8.2e11, "B/s", "820 GB/s"),
        (2.0, "s", "2 s"),
        (1.5e-9, "s", "1.5 ns"),
        (0, "s", "0 s"),
        (9.999e13, "FLOPs", "1.00e14 FLOPs"),
        (240.24, "", "240"),
        (512, "B", "512 B"),
    ],
)
def test_fmt_examples(value, unit, text):
    assert fmt(value, unit) == text


@given(st.floats(min_value=1e-12, max_value=1e18, allow_nan=False))
def test_fmt_round_trips_to_three_digits(x):
    # The printed mantissa times its prefix recovers the value to 3 significant digits.
    text = fmt(x, "B")
    number, unit = text.split()
    scale = {"PB": 1e15, "TB": 1e12, "GB": 1e9, "MB": 1e6, "kB": 1e3, "B": 1.0}[unit]
    assert math.isclose(float(number) * scale, x, rel_tol=5e-3)


def test_fmt_rejects_non_numbers():
    with pytest.raises(TypeError, match="value"):
        fmt("1", "s")


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_check_positive_integer_checks_finiteness_first(value):
    # inf used to reach int() and raise Python's OverflowError instead of a message naming the argument
    with pytest.raises(ValueError, match="seq_len must be finite"):
        check_positive("seq_len", value, integer=True)


def test_check_positive_maximum_and_check_bool():
    from tpu_notes.units import check_bool

    assert check_positive("n", 256, integer=True, maximum=256) == 256
    with pytest.raises(ValueError, match="n must be at most 256"):
        check_positive("n", 257, integer=True, maximum=256)
    assert check_bool("causal", False) is False
    for bad in (1, "yes", None):
        with pytest.raises(TypeError, match="causal must be True or False"):
            check_bool("causal", bad)


def test_array_bytes_of_shape_and_dtype():
    from tpu_notes.units import array_bytes

    assert array_bytes((8, 4096), "bf16") == 8 * 4096 * 2
    assert array_bytes((3, 5), "int4") == 7.5
    assert array_bytes((), "fp32") == 4
    with pytest.raises(TypeError, match="shape"):
        array_bytes("8x4096")
    with pytest.raises(ValueError, match=r"shape\[1\]"):
        array_bytes((8, -1))


def test_fmt_digits_are_checked():
    assert fmt(1234.5, "", digits=5) == "1234.5"
    for bad in (0, -1, 2.5, "3"):
        with pytest.raises(ValueError, match="digits"):
            fmt(1.0, "s", digits=bad)


# ----------------------------------------------------------------------------------------------- the one validator


@U.checked
def _sample(
    n: U.PositiveInt,
    mfu: U.Fraction = 0.4,
    *,
    kind: Annotated[str, U.OneOf(("ring", "tree"))] = "ring",
    inner: U.PositiveInt | None = None,
    steps: U.capped(100) = 1,
    dtype: U.DTypeName = "bf16",
    shape: Annotated[tuple, U.Shape()] = (1,),
    flag: U.Bool = False,
    share: U.Probability = 0.5,
):
    return n, mfu, kind, inner, steps, dtype, shape, flag, share


def test_checked_passes_normalised_values():
    out = _sample(np.int64(3), 1, kind="TREE", inner=None, steps=100, dtype="bfloat16", shape=[2, 3], share=0)
    assert out == (3, 1.0, "tree", None, 100, "bf16", (2, 3), False, 0.0)
    assert type(out[0]) is int and type(out[1]) is float


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(n=0), "n"),
        (dict(n=2.5), "n"),
        (dict(n=True), "n"),
        (dict(n="3"), "n"),
        (dict(n=10**400), "n"),
        (dict(n=float("nan")), "n"),
        (dict(n=1, mfu=0), "mfu"),
        (dict(n=1, mfu=1.01), "mfu"),
        (dict(n=1, kind="star"), "kind"),
        (dict(n=1, inner=0), "inner"),
        (dict(n=1, steps=101), "steps"),
        (dict(n=1, dtype="fp13"), "dtype"),
        (dict(n=1, shape="4x4"), "shape"),
        (dict(n=1, flag=1), "flag"),
        (dict(n=1, share=-0.1), "share"),
    ],
)
def test_checked_refuses_by_name(kwargs, word):
    with pytest.raises((ValueError, TypeError), match=rf"\b{word}\b"):
        _sample(**kwargs)


def test_every_kind_refuses_its_own_hostile_values():
    kinds = [
        U.Positive(),
        U.Positive(integer=True, maximum=10),
        U.Positive(allow_zero=True),
        U.Range(0, 1),
        U.Range(0, 1, low_open=True, high_open=True, integer=False),
        U.OneOf(("a", "b")),
        U.Flag(),
        U.Shape(),
        U.DType(),
    ]
    for kind in kinds:
        assert kind.check("x", kind.example()) is not None
        for bad in kind.hostile():
            with pytest.raises((ValueError, TypeError), match=r"\bx\b"):
                kind.check("x", bad)


def test_argument_kinds_reads_the_signature():
    kinds = U.argument_kinds(_sample)
    assert set(kinds) == {"n", "mfu", "kind", "inner", "steps", "dtype", "shape", "flag", "share"}
    assert kinds["inner"].optional and not kinds["n"].optional
    assert kinds["steps"].kinds == (U.Positive(integer=True, maximum=100),)


@dataclass(frozen=True)
class _Record:
    chips: U.PositiveInt
    share: U.Fraction | None = None

    def __post_init__(self):
        U.check_fields(self)


def test_check_fields_validates_and_normalises_a_frozen_dataclass():
    assert _Record(np.int32(4), 1) == _Record(4, 1.0)
    with pytest.raises(ValueError, match="chips"):
        _Record(0)
    with pytest.raises(ValueError, match="share"):
        _Record(1, 2.0)


def test_numbers_beyond_float_range_are_refused_in_words_not_overflow():
    with pytest.raises(ValueError, match="size"):
        U.check_positive("size", 10**400)
    assert U.check_positive("size", 10**30, integer=True) == 10**30
