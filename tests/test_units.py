"""Units, dtypes, input checks and the formatter."""
import math

import pytest
from hypothesis import given, strategies as st

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


@pytest.mark.parametrize("value, unit, text", [
    (5.6e-4, "s", "560 µs"), (3.4e7, "B", "34 MB"), (1.97e14, "FLOP/s", "1.97e14 FLOP/s"),
    (8.2e11, "B/s", "820 GB/s"), (2.0, "s", "2 s"), (1.5e-9, "s", "1.5 ns"), (0, "s", "0 s"),
    (9.999e13, "FLOPs", "1.00e14 FLOPs"), (240.24, "", "240"), (512, "B", "512 B"),
])
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
