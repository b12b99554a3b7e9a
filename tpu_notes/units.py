"""Units, dtypes, the one validator and the one number formatter of the book.

Everything in ``tpu_notes`` is SI: seconds, bytes, FLOPs, FLOP/s, bytes/s. "GB" means 1e9 bytes.

Arguments are checked by one mechanism: a public function declares the *kind* of each argument in its signature
(``n_chips: PositiveInt``, ``mfu: Fraction``, ``stages: Annotated[int, Positive(integer=True, maximum=4096)]``) and
is decorated with :func:`checked`, which refuses a bad value with a ``ValueError``/``TypeError`` naming the argument
and what it allows, and passes the normalised value on. A dataclass calls :func:`check_fields` in ``__post_init__``.
The hostile-input test reads the same kinds from the signatures, so what is declared is what is tested.
"""

from __future__ import annotations

import functools
import inspect
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from numbers import Integral, Real
from typing import Annotated, Any

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


_FLOAT_MAX = 1.7976931348623157e308


def _show(value) -> str:
    """``repr(value)``, cut to 60 characters (an int of 400 digits is not a message)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: The magnitudes a number given to the book may have. Every real size, time, rate, price or count lies far inside
#: (a frontier run is ~1e26 FLOPs; an hour is 3.6e12 ns); beyond them a product or a reciprocal over- or underflows
#: (1e308 x 10 is inf, 1 / 5e-324 is inf, 5e-324 / 2 is 0), so :func:`check_positive` and :class:`Range` refuse a
#: value outside ``[SMALLEST, LARGEST]`` (zero aside) by name instead of returning inf or nan later.
LARGEST = 1e36
SMALLEST = 1e-36


def _check_magnitude(name: str, value) -> None:
    """Refuse a non-zero ``value`` whose magnitude lies outside ``[SMALLEST, LARGEST]``, naming ``name``."""
    size = abs(value)
    if size > LARGEST:
        raise ValueError(
            f"{name} must be at most {LARGEST:g} in magnitude (no real size is larger; beyond it the arithmetic "
            f"overflows); got {_show(value)}"
        )
    if 0 < size < SMALLEST:
        raise ValueError(
            f"{name} must be 0 or at least {SMALLEST:g} in magnitude (no real size is smaller; below it the "
            f"arithmetic underflows); got {value!r}"
        )


def check_positive(
    name: str, value, *, integer: bool = False, allow_zero: bool = False, maximum: float | None = None
) -> float:
    """Validate that argument ``name`` is a finite positive number (an integer if asked) and return it.

    ``allow_zero`` admits 0; ``maximum`` (optional) is an inclusive upper bound, for sizes that a simulation turns
    into per-step structures. Finiteness is checked before the integer conversion, so ``inf`` and ``nan`` raise a
    ``ValueError`` naming ``name`` rather than Python's ``OverflowError``.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        kind = "an integer" if integer else "a number"
        raise TypeError(f"{name} must be {kind}; got {type(value).__name__} {value!r}")
    bound = ">= 0" if allow_zero else "> 0"
    if isinstance(value, Integral):  # exact: an int beyond float range is compared as an int, never converted
        value = int(value)
    elif not math.isfinite(value):
        raise ValueError(f"{name} must be finite and {bound}; got {value!r}")
    elif integer and int(value) != value:
        raise ValueError(f"{name} must be a whole number; got {value!r}")
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be finite and {bound}; got {value!r}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum:,}; got {value!r}")
    if value > _FLOAT_MAX:
        raise ValueError(f"{name} must be a finite number {bound} below {_FLOAT_MAX:.3g}; got {_show(value)}")
    _check_magnitude(name, value)
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
    return tuple(check_positive(f"{name}[{i}]", v, integer=True, allow_zero=allow_zero) for i, v in enumerate(value))


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


# --------------------------------------------------------------------------------------------------------------
# Kinds of argument, declared in signatures and checked by one mechanism
# --------------------------------------------------------------------------------------------------------------
class Kind:
    """What values one argument allows. Subclasses implement :meth:`check` and :meth:`hostile`.

    ``check(name, value)`` returns the normalised value or raises ``ValueError``/``TypeError`` naming ``name``;
    ``hostile()`` lists values the kind must refuse (the hostile-input test tries each); ``example()`` is one value
    it accepts.
    """

    def check(self, name: str, value):
        """The normalised ``value`` of argument ``name``, or a ``ValueError``/``TypeError`` naming ``name``."""
        raise NotImplementedError

    def hostile(self) -> list:
        """Values this kind must refuse (the hostile-input test tries each in place of the argument)."""
        return [None, "x", object()]

    def example(self):
        """One value this kind accepts."""
        raise NotImplementedError

    def describe(self) -> str:
        """The allowed values in words, for messages."""
        return type(self).__name__

    def __repr__(self) -> str:
        """The kind as written in a signature, defaults left out (``Positive(integer=True, maximum=4096)``): what the
        API pages show beside each parameter."""
        if not is_dataclass(self):
            return f"{type(self).__name__}()"
        parts = [
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if f.default is MISSING or getattr(self, f.name) != f.default
        ]
        return f"{type(self).__name__}({', '.join(parts)})"


_NAN, _INF = float("nan"), float("inf")


@dataclass(frozen=True, repr=False)
class Positive(Kind):
    """A finite number > 0 (``>= 0`` with ``allow_zero``), a whole number if ``integer``; ``maximum`` is an
    inclusive cap: the largest value the function's cost is documented to take."""

    integer: bool = False
    allow_zero: bool = False
    maximum: float | None = None

    def check(self, name: str, value):
        return check_positive(name, value, integer=self.integer, allow_zero=self.allow_zero, maximum=self.maximum)

    def hostile(self) -> list:
        out = [_NAN, _INF, -_INF, -1, "1", None, [1], True, 10**400, 1e308, 5e-324]
        if not self.allow_zero:
            out.append(0)
        if self.integer:
            out.append(1.5)
        if self.maximum is not None:
            out.append(int(self.maximum) + 1 if self.integer else self.maximum * 2)
        return out

    def example(self):
        return 1 if self.integer else 1.0

    def describe(self) -> str:
        what = "whole number" if self.integer else "number"
        cap = f", at most {self.maximum:,}" if self.maximum is not None else ""
        return f"{what} {'>= 0' if self.allow_zero else '> 0'}{cap}"


@dataclass(frozen=True, repr=False)
class Range(Kind):
    """A finite number in ``[low, high]`` (either end open if asked), a whole number if ``integer``."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def describe(self) -> str:
        return f"{'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}" + (
            " (a whole number)" if self.integer else ""
        )

    def check(self, name: str, value):
        if isinstance(value, bool) or not isinstance(value, Real):
            raise TypeError(f"{name} must be a number in {self.describe()}; got {type(value).__name__} {value!r}")
        if not isinstance(value, Integral) and not math.isfinite(value):
            raise ValueError(f"{name} must be a finite number in {self.describe()}; got {value!r}")
        if self.integer and int(value) != value:
            raise ValueError(f"{name} must be a whole number in {self.describe()}; got {value!r}")
        below = value <= self.low if self.low_open else value < self.low
        above = value >= self.high if self.high_open else value > self.high
        if below or above:
            raise ValueError(f"{name} must be in {self.describe()}; got {_show(value)}")
        _check_magnitude(name, value)
        return int(value) if self.integer else float(value)

    def hostile(self) -> list:
        width = self.high - self.low
        out = [_NAN, _INF, -_INF, "0.5", None, True, self.low - max(width, 1.0), self.high + max(width, 1.0)]
        if self.low_open:
            out.append(self.low)
        if self.high_open:
            out.append(self.high)
        if self.low <= 5e-324 <= self.high:
            out.append(5e-324)  # inside the range, but a subnormal: its reciprocal overflows
        return out

    def example(self):
        mid = (self.low + self.high) / 2
        return int(round(mid)) if self.integer else mid


@dataclass(frozen=True, repr=False)
class OneOf(Kind):
    """One of a fixed set of strings, matched case-insensitively; the canonical spelling is passed on."""

    choices: tuple

    def check(self, name: str, value):
        return check_choice(name, value, self.choices)

    def hostile(self) -> list:
        return ["no-such-choice", "", None, 3, [self.choices[0]]]

    def example(self):
        return self.choices[0]

    def describe(self) -> str:
        return f"one of {list(self.choices)}"


@dataclass(frozen=True, repr=False)
class Flag(Kind):
    """``True`` or ``False`` (not 1, "yes" or None)."""

    def check(self, name: str, value):
        return check_bool(name, value)

    def hostile(self) -> list:
        return [1, 0, "yes", None]

    def example(self):
        return True


@dataclass(frozen=True, repr=False)
class Shape(Kind):
    """A tuple or list of whole numbers (> 0, or >= 0 with ``allow_zero``) with at least ``min_len`` entries."""

    allow_zero: bool = False
    min_len: int = 1

    def check(self, name: str, value):
        return check_sizes(name, value, allow_zero=self.allow_zero, min_len=self.min_len)

    def hostile(self) -> list:
        out = ["4x4", None, (1.5,), (-1,), 7]
        if self.min_len > 0:
            out.append(())
        return out

    def example(self):
        return (1,) * max(self.min_len, 1)


@dataclass(frozen=True, repr=False)
class DType(Kind):
    """A dtype name the book knows (:data:`DTYPE_BYTES`, or an alias such as ``"bfloat16"``)."""

    def check(self, name: str, value):
        return canonical_dtype(value, name)

    def hostile(self) -> list:
        return ["float13", "", None, 2]

    def example(self):
        return "bf16"


#: The common kinds, spelled as annotations.
PositiveInt = Annotated[int, Positive(integer=True)]
NonNegativeInt = Annotated[int, Positive(integer=True, allow_zero=True)]
PositiveFloat = Annotated[float, Positive()]
NonNegativeFloat = Annotated[float, Positive(allow_zero=True)]
Fraction = Annotated[float, Range(0.0, 1.0, low_open=True)]  # (0, 1]: an efficiency, an MFU
Probability = Annotated[float, Range(0.0, 1.0)]  # [0, 1]
Bool = Annotated[bool, Flag()]
DTypeName = Annotated[str, DType()]
#: The longest sequence a model of the book prices, tokens: 64Mi, above any published context window (10M).
MAX_SEQ_LEN = 2**26
SeqLen = Annotated[int, Positive(integer=True, maximum=MAX_SEQ_LEN)]  # tokens per sequence


def capped(maximum: int) -> Any:
    """``PositiveInt`` with an inclusive cap, for a size the function turns into that much work or memory."""
    maximum = check_positive("maximum", maximum, integer=True)
    return Annotated[int, Positive(integer=True, maximum=maximum)]


@dataclass(frozen=True)
class ArgumentKind:
    """The kind one parameter declares: ``kinds`` checked in order, ``None`` allowed when ``optional``."""

    name: str
    kinds: tuple
    optional: bool


def _kinds_of(hint) -> tuple[tuple, bool]:
    """(kinds, optional) of one resolved annotation: ``Annotated[T, K...]``, optionally ``| None``."""
    optional = False
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(hint)
        optional = type(None) in members
        annotated = [m for m in members if typing.get_origin(m) is Annotated]
        if len(annotated) != 1:
            return (), optional
        hint = annotated[0]
    if typing.get_origin(hint) is Annotated:
        return tuple(m for m in hint.__metadata__ if isinstance(m, Kind)), optional
    return (), optional


def argument_kinds(fn: Callable) -> dict[str, ArgumentKind]:
    """The declared kind of every parameter of ``fn`` that has one (parameter name -> :class:`ArgumentKind`).

    Reads the annotations (strings under ``from __future__ import annotations`` are resolved in ``fn``'s module).
    The hostile-input test uses this to know what each argument allows.
    """
    if not callable(fn) or isinstance(fn, type):
        raise TypeError(f"fn must be a function or method; got {type(fn).__name__} {_show(fn)}")
    target = inspect.unwrap(fn)
    hints = typing.get_type_hints(target, include_extras=True)
    signature = inspect.signature(target)
    out = {}
    for name, param in signature.parameters.items():
        if name not in hints:
            continue
        kinds, optional = _kinds_of(hints[name])
        if kinds:
            out[name] = ArgumentKind(name, kinds, optional or param.default is None)
    return out


def checked(fn: Callable) -> Callable:
    """Decorate a public function so every argument annotated with a :class:`Kind` is checked on each call.

    The normalised values (``int`` for whole-number kinds, ``float``, the canonical spelling of a choice) are what
    the function body sees. Arguments without a kind pass untouched. The annotations are read on the first call.
    """
    if not inspect.isfunction(fn):
        raise TypeError(f"fn must be a function (checked decorates def statements); got {type(fn).__name__}")
    signature = inspect.signature(fn)
    plan: list = []

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not plan:
            plan.append(argument_kinds(fn))
        kinds = plan[0]
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"{fn.__qualname__}(): {err}") from None
        arguments = bound.arguments
        for name, spec in kinds.items():
            if name not in arguments:
                continue
            value = arguments[name]
            if value is None and spec.optional:
                continue
            for kind in spec.kinds:
                value = kind.check(name, value)
            arguments[name] = value
        result = fn(*bound.args, **bound.kwargs)
        _check_result(fn.__qualname__, result, arguments)
        return result

    wrapper.__tpu_notes_checked__ = True
    return wrapper


def _non_finite(result) -> str | None:
    """The name of ``result``'s first figure that left the float range (``"the result"`` for a bare float, a field
    name for a dataclass), or None: a float result that is NaN or infinite; a dataclass field that is NaN, or its
    headline ``total`` when infinite (other fields may be infinite on purpose: the memory size of a measured
    roofline, a ratio over a zero time)."""
    if isinstance(result, float):
        return None if math.isfinite(result) else "the result"
    if is_dataclass(result) and not isinstance(result, type):
        for f in fields(result):
            value = getattr(result, f.name, None)
            if isinstance(value, float) and (math.isnan(value) or (f.name == "total" and math.isinf(value))):
                return f.name
    return None


def _check_result(function: str, result, arguments: Mapping) -> None:
    """Refuse a result that over- or underflowed to NaN or infinity, naming the numeric argument of the call
    furthest from 1 in magnitude (the one that took the arithmetic out of range): arguments that each pass their
    own check can still multiply past the largest float."""
    what = _non_finite(result)
    if what is None:
        return
    numbers = {
        k: v
        for k, v in arguments.items()
        if isinstance(v, Real) and not isinstance(v, bool) and v != 0 and math.isfinite(float(min(abs(v), _FLOAT_MAX)))
    }
    if not numbers:
        raise ValueError(f"{function}: {what} comes out as {getattr(result, what, result)!r} for these arguments")
    name = max(numbers, key=lambda k: abs(math.log10(min(abs(numbers[k]), _FLOAT_MAX))))
    raise ValueError(
        f"{name}={_show(numbers[name])} is outside the range {function} can price: {what} comes out as "
        f"{getattr(result, what, result)!r}; use a value nearer real sizes"
    )


def check_fields(obj) -> None:
    """Check (and normalise in place) every field of dataclass ``obj`` whose annotation carries a :class:`Kind`.

    Call it first thing in ``__post_init__``; works on frozen dataclasses too.
    """
    if not is_dataclass(obj) or isinstance(obj, type):
        raise TypeError(f"obj must be a dataclass instance; got {type(obj).__name__} {_show(obj)}")
    specs = _FIELD_KINDS.get(type(obj))
    if specs is None:  # read the annotations once per class
        hints = typing.get_type_hints(type(obj), include_extras=True)
        specs = []
        for f in fields(obj):
            if f.name not in hints:
                continue
            kinds, optional = _kinds_of(hints[f.name])
            if kinds:
                specs.append((f.name, kinds, optional or f.default is None))
        _FIELD_KINDS[type(obj)] = specs
    for name, kinds, may_be_none in specs:
        value = getattr(obj, name)
        if value is None and may_be_none:
            continue
        for kind in kinds:
            value = kind.check(name, value)
        object.__setattr__(obj, name, value)


#: The checked fields of each dataclass :func:`check_fields` has seen: ``[(name, kinds, may be None), ...]``.
_FIELD_KINDS: dict[type, list] = {}


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
