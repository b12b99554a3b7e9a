"""Units, dtypes, input checks and the one number formatter of the book.

Everything in ``tpu_notes`` is SI: seconds, bytes, FLOPs, FLOP/s, bytes/s. "GB" means 1e9 bytes.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Iterable

#: Bytes per element of each dtype the book talks about.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}

_DTYPE_ALIASES = {"float32": "fp32", "f32": "fp32", "bfloat16": "bf16", "float8": "fp8", "s8": "int8"}


def canonical_dtype(name: str, argument: str = "dtype") -> str:
    """Return the canonical dtype name (``"bf16"``, ``"fp32"``, ...) or raise naming the allowed ones."""
    if not isinstance(name, str):
        raise TypeError(f"{argument} must be a dtype name string, one of {sorted(DTYPE_BYTES)}; got {name!r}")
    key = name.strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown {argument} {name!r}; known dtypes: {', '.join(sorted(DTYPE_BYTES))}")
    return key


def dtype_bytes(name: str, argument: str = "dtype") -> float:
    """Bytes per element of dtype ``name`` (e.g. ``dtype_bytes("bf16") == 2``; ``"int4"`` is 0.5).

    ``argument`` is the name an error message gives the dtype (e.g. ``"w_dtype"``)."""
    return DTYPE_BYTES[canonical_dtype(name, argument)]


def check_positive(name: str, value, *, integer: bool = False, allow_zero: bool = False,
                   maximum: float | None = None) -> float:
    """Validate that argument ``name`` is a finite positive number (an integer if asked) and return it.

    ``allow_zero`` admits 0; ``maximum`` (optional) is an inclusive upper bound, for sizes that a simulation turns
    into per-step structures. Finiteness is checked before the integer conversion, so ``inf`` and ``nan`` raise a
    ``ValueError`` naming ``name`` rather than Python's ``OverflowError``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        kind = "an integer" if integer else "a number"
        raise TypeError(f"{name} must be {kind}; got {type(value).__name__} {value!r}")
    bound = ">= 0" if allow_zero else "> 0"
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite and {bound}; got {value!r}")
    if integer and int(value) != value:
        raise ValueError(f"{name} must be a whole number; got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be finite and {bound}; got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}; got {value!r}")
    return int(value) if integer else float(value)


def check_bool(name: str, value) -> bool:
    """Validate that argument ``name`` is ``True`` or ``False`` (not 1, "yes" or None) and return it."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False; got {type(value).__name__} {value!r}")
    return value


def check_sizes(name: str, value, *, allow_zero: bool = False, min_len: int = 1) -> tuple[int, ...]:
    """Validate a sequence of whole-number sizes (a shape) and return it as a tuple of ints.

    A string is refused rather than read letter by letter; each entry goes through :func:`check_positive` with the
    name ``name[i]``.
    """
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a tuple or list of whole numbers; got {type(value).__name__} {value!r}")
    if len(value) < min_len:
        raise ValueError(f"{name} must have at least {min_len} entries; got {tuple(value)!r}")
    return tuple(check_positive(f"{name}[{i}]", v, integer=True, allow_zero=allow_zero)
                 for i, v in enumerate(value))


def array_bytes(shape, dtype: str = "bf16") -> float:
    """Bytes of an array of ``shape`` (a tuple of sizes; ``()`` is a scalar) with elements of ``dtype``.

    ``array_bytes((8, 4096), "bf16") == 65536``; int4 counts half a byte per element.
    """
    shape = check_sizes("shape", shape, allow_zero=True, min_len=0)
    return math.prod(shape) * dtype_bytes(dtype)


def check_choice(name: str, value, allowed: Iterable[str]) -> str:
    """Validate that ``value`` is one of ``allowed`` (case-insensitive); return the canonical spelling."""
    allowed = list(allowed)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, one of {allowed}; got {type(value).__name__} {value!r}")
    if isinstance(value, str):
        for a in allowed:
            if value.strip().lower() == a.lower():
                return a
    raise ValueError(f"{name} must be one of {allowed}; got {value!r}")


_SI_PREFIXES = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_TIME_UNITS = [(1.0, "s"), (1e-3, "ms"), (1e-6, "µs"), (1e-9, "ns"), (1e-12, "ps")]


def _sig(x: float, digits: int = 3) -> str:
    """``x`` with ``digits`` significant digits, without trailing zeros or exponent."""
    if x == 0:
        return "0"
    text = f"{x:.{digits}g}"
    if "e" in text and abs(x) >= 1:  # e.g. 1e+03 for 999.7 rounded: print the integer
        text = f"{float(text):.0f}"
    return text


def fmt(value: float, unit: str = "", digits: int = 3) -> str:
    """Format a number with its unit, the way the whole book prints numbers.

    - ``"s"``: picks s/ms/µs/ns (``fmt(5.6e-4, "s") == "560 µs"``).
    - ``"B"`` and ``"B/s"``: SI prefixes, 1 kB = 1000 B (``fmt(3.4e7, "B") == "34 MB"``).
    - ``"FLOPs"`` and ``"FLOP/s"``: scientific notation (``fmt(1.97e14, "FLOP/s") == "1.97e14 FLOP/s"``).
    - anything else: ``digits`` significant digits followed by the unit.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"value must be a number; got {type(value).__name__}")
    if not isinstance(unit, str):
        raise TypeError(f"unit must be a string such as 's', 'B' or 'FLOP/s'; got {type(unit).__name__}")
    if isinstance(digits, bool) or not isinstance(digits, int) or not 1 <= digits <= 17:
        raise ValueError(f"digits must be a whole number from 1 to 17; got {digits!r}")
    v = float(value)
    if not math.isfinite(v):
        return f"{v} {unit}".strip()
    sign = "-" if v < 0 else ""
    a = abs(v)
    if unit == "s":
        if a == 0:
            return "0 s"
        if a >= 1:
            return f"{sign}{_sig(a, digits)} s"
        for scale, name in _TIME_UNITS:
            if a >= scale:
                return f"{sign}{_sig(a / scale, digits)} {name}"
        return f"{sign}{_sig(a / 1e-12, digits)} ps"
    if unit in ("B", "B/s", "bytes", "bytes/s"):
        suffix = "B/s" if unit.endswith("/s") else "B"
        for scale, prefix in _SI_PREFIXES:
            if a >= scale:
                return f"{sign}{_sig(a / scale, digits)} {prefix}{suffix}"
        return f"{sign}{_sig(a, digits)} {suffix}"
    if unit in ("FLOPs", "FLOP/s", "OPs", "OP/s"):
        if a == 0:
            return f"0 {unit}"
        exponent = int(math.floor(math.log10(a)))
        mantissa = a / 10**exponent
        if round(mantissa, digits - 1) >= 10:
            exponent += 1
            mantissa /= 10
        return f"{sign}{mantissa:.{digits - 1}f}e{exponent} {unit}"
    return f"{sign}{_sig(a, digits)} {unit}".strip()
