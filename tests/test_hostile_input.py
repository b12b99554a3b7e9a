"""Bad input, tried as a hostile user would: every public function, one argument at a time.

The registry of valid baseline calls is ``tests/hostile_cases.py`` (its docstring says how to add a function). For each
function, each argument is replaced in turn by hostile values (inf, nan, -1, 0, 10**12 where a simulation would build
that many steps, strings, None, lists, bools, wrong-type chips and models, truncated text...) while the other
arguments stay valid. Every such call must raise ``ValueError`` or ``TypeError`` whose message names the argument:
no silent result, no error in Python's words (``KeyError``, ``OverflowError``, ``ZeroDivisionError``), and no hang. A
fixed list of values is tried exhaustively; hypothesis then generates more of the same kinds. A completeness test
fails when a public function of a covered module has no entry.

Functions decorated with ``tpu_notes.units.checked`` declare each argument's kind in the signature; the hostile values
of those kinds (``Kind.hostile()``) are tried in addition to the registry's, and a checked function whose required
arguments all declare kinds is covered without any entry: its call is built from the kinds' examples.

Every numeric argument (a registry ``Int``/``Num`` or a declared ``Positive``/``Range``) is also given the extreme
values of :data:`EXTREMES`: numbers that pass a per-argument check yet lie far outside any real size (``10**400``,
``1e308``, the subnormal ``5e-324``, a count of ``10**18``). Each must be refused by name or give a *sane* result:
every number in it finite (no ``inf`` or ``nan`` that the baseline call does not also return).

Each call runs under a CPU-time cap (``CPU_LIMIT_S`` of the process's CPU time, counted by ``ITIMER_PROF``, so a
loaded machine does not fail it) and an address-space cap (``MEMORY_BUDGET`` bytes above the process's size, by
lowering ``RLIMIT_AS``'s soft limit for the call): a hang or a runaway allocation is reported as a finding and the
worker goes on. ``benchmarks/hostile_corpus.py`` counts the corpus and its outcomes.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import hostile_cases as H
import pytest
from hostile_limits import CPU_LIMIT_S, EXTREME_CPU_LIMIT_S, EXTREMES, MEMORY_BUDGET, Hang, limits, non_finite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tpu_notes.units import Positive, Range, argument_kinds


def _resolve(dotted: str):
    """``tpu_notes.mod.Class.method`` -> (module, [attribute names])."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            mod = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        return mod, parts[i:]
    raise ImportError(dotted)


def _target(dotted: str, case: H.Case):
    mod, attrs = _resolve(dotted)
    if case.self_ is not None:
        obj = case.self_()
        return getattr(obj, attrs[-1])
    obj = mod
    for a in attrs:
        obj = getattr(obj, a)
    return obj


def _call(fn, case: H.Case, values: dict, cpu_s: float = CPU_LIMIT_S, *, timeout: float | None = None):
    """``fn`` called with ``values`` under :func:`hostile_limits.limits` (``timeout``: the CPU cap, as
    ``tests/test_bounded_work.py`` names it)."""
    if timeout is not None:
        cpu_s = timeout
    args = [values[n] for n in case.positional if n in values]
    kwargs = {k: v for k, v in values.items() if k not in case.positional}
    with limits(cpu_s):
        return fn(*args, **kwargs)


def _names_pattern(name: str, arg: H.Arg) -> re.Pattern:
    words = (name,) + tuple(arg.names)
    return re.compile("|".join(rf"(?<![A-Za-z0-9_]){re.escape(w)}(?![A-Za-z0-9_])" for w in words))


def _hostile_value(v):
    return v() if callable(v) and getattr(v, "lazy_hostile", False) else v


def _show(value) -> str:
    try:
        return repr(value)[:60]
    except Exception:  # noqa: BLE001 - a value whose repr fails is shown by its type
        return f"<{type(value).__name__}>"


_BASELINE_NON_FINITE: dict = {}


def _baseline_non_finite(dotted: str, case: H.Case, fn) -> set[str]:
    """The non-finite paths of the valid call's own result (an ``inf`` meaning "unbounded" is not a finding)."""
    if dotted not in _BASELINE_NON_FINITE:
        found: set[str] = set()
        if case.run_baseline:
            try:
                found = non_finite(_call(fn, case, _valid(dotted, case), cpu_s=60.0))
            except Exception:  # noqa: BLE001 - test_baseline_call_is_valid reports a broken baseline
                found = set()
        _BASELINE_NON_FINITE[dotted] = found
    return _BASELINE_NON_FINITE[dotted]


def classify(dotted: str, case: H.Case, fn, valid: dict, name: str, bad, *, extreme: bool = False):
    """``(outcome, problem)`` of calling ``fn`` with ``bad`` for argument ``name``, the others valid. ``outcome`` is
    one of :data:`hostile_limits.OUTCOMES`; ``problem`` is None for a proper refusal (or, with ``extreme``, a sane
    result), else a line describing the finding. An extreme runs under the tighter CPU cap."""
    arg = case.args[name]
    values = dict(valid)
    values[name] = _hostile_value(bad)
    shown = _show(values[name])
    cpu_s = EXTREME_CPU_LIMIT_S if extreme else CPU_LIMIT_S
    try:
        result = _call(fn, case, values, cpu_s=cpu_s)
    except Hang:
        return "hang", f"{name}={shown}: still running after {cpu_s:.0f} s of CPU (unbounded?)"
    except MemoryError:
        return "memory", f"{name}={shown}: MemoryError: asked for more than {MEMORY_BUDGET / 2**30:.0f} GiB more"
    except (ValueError, TypeError) as err:
        if not _names_pattern(name, arg).search(str(err)):
            return "unnamed", f"{name}={shown}: {type(err).__name__} does not name {name!r}: {str(err)[:160]}"
        return "refused", None
    except Exception as err:  # noqa: BLE001 - any other exception is the finding
        return "python", f"{name}={shown}: raised {type(err).__name__} (not ValueError/TypeError): {str(err)[:160]}"
    if extreme:
        wrong = non_finite(result) - _baseline_non_finite(dotted, case, fn)
        if not wrong:
            return "sane", None
        return "insane", f"{name}={shown}: returned non-finite {', '.join(sorted(wrong)[:4])}"
    # an array's repr would compute it; show its type and shape instead
    what = f"{type(result).__name__} of shape {tuple(result.shape)}" if hasattr(result, "shape") else repr(result)[:80]
    return "silent", f"{name}={shown}: returned {what} silently"


def _check_one(dotted: str, case: H.Case, fn, valid: dict, name: str, bad) -> str | None:
    """None if ``fn`` refuses ``bad`` for argument ``name`` properly, else a line describing the failure."""
    return classify(dotted, case, fn, valid, name, bad)[1]


_VALID_CACHE: dict = {}


def _valid(dotted: str, case: H.Case) -> dict:
    # Built once per function: lazy values (parameter pytrees, meshes, compiled objects) are immutable in use.
    if dotted not in _VALID_CACHE:
        _VALID_CACHE[dotted] = {k: a.valid() for k, a in case.args.items()}
    return _VALID_CACHE[dotted]


def _declared(fn) -> dict:
    """Parameter name -> ArgumentKind for a function decorated with ``units.checked`` (else {})."""
    if not getattr(fn, "__tpu_notes_checked__", False):
        return {}
    return argument_kinds(fn)


def _declared_of(dotted: str, case: H.Case) -> dict:
    if case.self_ is not None:  # a method: the kinds are on the class's function
        mod, attrs = _resolve(dotted)
        obj = mod
        for a in attrs:
            obj = getattr(obj, a)
        return _declared(obj)
    return _declared(_target(dotted, case))


def _hostile_values(dotted: str, case: H.Case, name: str) -> list:
    """The registry's hostile values for ``name`` and those of the kind the signature declares for it."""
    arg = case.args[name]
    values = [] if isinstance(arg, H.Fixed) and not isinstance(arg, H.Sig) else list(arg.hostile())
    spec = _declared_of(dotted, case).get(name)
    if spec is not None:
        for kind in spec.kinds:
            values += [v for v in kind.hostile() if not (v is None and spec.optional)]
    return values


def _fuzzable_of(dotted: str, case: H.Case) -> list[str]:
    return [k for k in case.args if _hostile_values(dotted, case, k)]


def _fuzzable(case: H.Case) -> list[str]:
    return [k for k, a in case.args.items() if not isinstance(a, H.Fixed) and a.hostile()]


def _numeric(dotted: str, case: H.Case, name: str) -> bool:
    """Whether argument ``name`` is a number: a registry ``Int``/``Num`` (maybe ``Opt``) or a declared
    ``Positive``/``Range``."""
    arg = case.args[name]
    inner = arg.inner if isinstance(arg, H.Opt) else arg
    if isinstance(inner, (H.Int, H.Num)):
        return True
    spec = _declared_of(dotted, case).get(name)
    return spec is not None and any(isinstance(k, (Positive, Range)) for k in spec.kinds)


def _same(a, b) -> bool:
    return type(a) is type(b) and (a == b or (a != a and b != b))


def _strict_extras() -> tuple:
    """Numbers every numeric argument must refuse, beyond its kind's list: a digit string, numpy's nan and inf (a
    ``numbers.Real`` that slips past a check written for ``float``)."""
    import numpy as np

    return ("1e3", np.float64("nan"), np.float64("inf"))


def _extreme_values(dotted: str, case: H.Case, name: str) -> list[tuple[object, bool]]:
    """``[(value, strict), ...]`` for a numeric argument: :func:`_strict_extras` (strict: must be refused) and
    :data:`EXTREMES` (refused by name or a sane result), less those its hostile lists already try."""
    if not _numeric(dotted, case, name):
        return []
    tried = _hostile_values(dotted, case, name)
    out = []
    for strict, values in ((True, _strict_extras()), (False, EXTREMES)):
        for v in values:
            if not any(_same(v, t) for t in tried):
                out.append((v, strict))
    return out


# ----------------------------------------------------------------------------------------------- completeness
def _public_callables(modname: str) -> set[str]:
    mod = importlib.import_module(f"tpu_notes.{modname}")
    out = set()
    for n, o in vars(mod).items():
        if n.startswith("_") or getattr(o, "__module__", None) != mod.__name__:
            continue
        if f"{modname}.{n}" in H.VALIDATOR_KINDS:
            continue
        if inspect.isfunction(o):
            out.add(f"tpu_notes.{modname}.{n}")
        elif inspect.isclass(o):
            if f"{modname}.{n}" not in H.RESULT_RECORDS:
                out.add(f"tpu_notes.{modname}.{n}")
            for m, v in vars(o).items():
                if (
                    not m.startswith("_")
                    and isinstance(v, (staticmethod, classmethod))
                    or (not m.startswith("_") and inspect.isfunction(v))
                ):
                    out.add(f"tpu_notes.{modname}.{n}.{m}")
    return out


def test_every_module_is_covered_or_listed():
    """Every module of the package (and of its analysis subpackages, e.g. ``training.cost``) is covered, waiting
    with a reason, or outside the analysis and measure layers."""
    import tpu_notes

    listed = set(H.COVERED_MODULES) | set(H.NOT_YET_COVERED) | set(H.NOT_ANALYSIS)
    found = set()
    for m in pkgutil.iter_modules(tpu_notes.__path__):
        if m.name in H.NOT_ANALYSIS or m.name in H.NOT_YET_COVERED:
            continue
        if m.ispkg:  # a subpackage: its modules count one by one
            sub = importlib.import_module(f"tpu_notes.{m.name}")
            found |= {f"{m.name}.{s.name}" for s in pkgutil.iter_modules(sub.__path__)}
        else:
            found.add(m.name)
    unlisted = found - listed
    assert not unlisted, (
        f"modules {sorted(unlisted)} are neither in hostile_cases.COVERED_MODULES nor in "
        "NOT_YET_COVERED (with a reason) nor in NOT_ANALYSIS"
    )


def _auto_case(dotted: str) -> H.Case | None:
    """A call built from the declared kinds' examples, for a checked function with no registry entry (or None when
    some required argument declares no kind)."""
    mod, attrs = _resolve(dotted)
    fn = mod
    for a in attrs:
        fn = getattr(fn, a, None)
    if not inspect.isfunction(fn) or not getattr(fn, "__tpu_notes_checked__", False):
        return None
    kinds = argument_kinds(fn)
    args = {}
    for name, p in inspect.signature(inspect.unwrap(fn)).parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.default is not p.empty:
            if name in kinds:
                args[name] = H.Sig(p.default)
            continue
        if name not in kinds:
            return None
        args[name] = H.Sig(kinds[name].kinds[0].example())
    return H.Case(**args)


def _auto_cases() -> dict:
    out = {}
    for modname in H.COVERED_MODULES:
        for dotted in sorted(_public_callables(modname) - set(H.CASES)):
            case = _auto_case(dotted)
            if case is not None:
                out[dotted] = case
    return out


AUTO_CASES = _auto_cases()
ALL_CASES = {**H.CASES, **AUTO_CASES}


@pytest.mark.parametrize("modname", H.COVERED_MODULES)
def test_every_public_function_has_a_baseline(modname):
    missing = sorted(_public_callables(modname) - set(ALL_CASES))
    assert not missing, (
        f"public functions of tpu_notes.{modname} without an entry in tests/hostile_cases.CASES "
        f"(see its docstring): {missing}"
    )


def test_no_stale_entries():
    stale = []
    for dotted in H.CASES:
        mod, attrs = _resolve(dotted)
        obj = mod
        try:
            for a in attrs:
                obj = getattr(obj, a)
        except AttributeError:
            stale.append(dotted)
    assert not stale, f"entries in hostile_cases.CASES name nothing: {stale}"


# ----------------------------------------------------------------------------------------------- the calls
NAMES = sorted(ALL_CASES)


@pytest.mark.parametrize("dotted", [n for n in NAMES if ALL_CASES[n].run_baseline])
def test_baseline_call_is_valid(dotted):
    """The valid call itself succeeds, so that each refusal below is caused by the one hostile argument."""
    case = ALL_CASES[dotted]
    result = _call(_target(dotted, case), case, _valid(dotted, case), cpu_s=60.0)
    _BASELINE_NON_FINITE.setdefault(dotted, non_finite(result))


@pytest.mark.parametrize("dotted", [n for n in NAMES if _fuzzable_of(n, ALL_CASES[n])])
def test_fixed_hostile_values_are_refused_by_name(dotted):
    case = ALL_CASES[dotted]
    fn = _target(dotted, case)
    valid = _valid(dotted, case)
    failures = []
    for name in _fuzzable_of(dotted, case):
        for bad in _hostile_values(dotted, case, name):
            problem = _check_one(dotted, case, fn, valid, name, bad)
            if problem:
                failures.append(problem)
    assert not failures, f"{dotted}:\n  " + "\n  ".join(failures)


def corpus(names=None):
    """Every fixed hostile call of the suite, as ``(dotted, argument, value, strict)``: the registry's and the
    declared kinds' hostile values (strict: must be refused by name) and the numeric extremes (strict or not, see
    :func:`_extreme_values`). ``benchmarks/hostile_corpus.py`` counts and classifies them."""
    for dotted in NAMES if names is None else names:
        case = ALL_CASES[dotted]
        for name in case.args:
            for bad in _hostile_values(dotted, case, name):
                yield dotted, name, bad, True
            for bad, strict in _extreme_values(dotted, case, name):
                yield dotted, name, bad, strict


#: Functions that still give a silent, non-finite or Python-worded answer to an extreme number, in modules this
#: suite's owner does not maintain: ``dotted name -> owner``. Strict: when the owner's fix lands the entry fails and
#: is removed.
EXTREME_PENDING: dict[str, str] = {}


def _extreme_param(dotted: str):
    owner = EXTREME_PENDING.get(dotted)
    marks = [pytest.mark.xfail(strict=True, reason=f"owner: {owner}")] if owner else []
    return pytest.param(dotted, marks=marks, id=dotted)


@pytest.mark.parametrize(
    "dotted",
    [_extreme_param(n) for n in NAMES if any(_extreme_values(n, ALL_CASES[n], a) for a in ALL_CASES[n].args)],
)
def test_numeric_extremes_are_refused_or_sane(dotted):
    """Each numeric argument given 10**400, 10**18, 1e308, 5e-324 or -0.0 (and, strictly, "1e3", numpy's nan and
    inf): a refusal naming it, or a result whose numbers are all finite. A hang stops that argument's remaining
    extremes (the next, larger ones would hang as long)."""
    case = ALL_CASES[dotted]
    fn = _target(dotted, case)
    valid = _valid(dotted, case)
    failures = []
    for name in case.args:
        for bad, strict in _extreme_values(dotted, case, name):
            outcome, problem = classify(dotted, case, fn, valid, name, bad, extreme=not strict)
            if problem:
                failures.append(problem)
            if outcome == "hang":
                break
    assert not failures, f"{dotted}:\n  " + "\n  ".join(failures)


@pytest.mark.parametrize("dotted", [n for n in NAMES if _fuzzable(ALL_CASES[n])])
@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_generated_hostile_values_are_refused_by_name(dotted, data):
    case = ALL_CASES[dotted]
    fn = _target(dotted, case)
    valid = _valid(dotted, case)
    name = data.draw(st.sampled_from(_fuzzable(case)), label="argument")
    bad = data.draw(case.args[name].strategy(), label="value")
    problem = _check_one(dotted, case, fn, valid, name, bad)
    assert problem is None, f"{dotted}: {problem}"


def test_a_checked_function_can_be_covered_from_its_kinds_alone():
    """The no-entry path: a call built from the kinds' examples runs, and a required argument without a kind (here
    ``chip`` of ``roofline.compute_time``) means an entry is needed."""
    case = _auto_case("tpu_notes.transformer.moe_capacity")
    assert case is not None and set(case.args) >= {"n_tokens", "n_experts"}
    _call(_target("tpu_notes.transformer.moe_capacity", case), case, {k: a.valid() for k, a in case.args.items()})
    assert _auto_case("tpu_notes.roofline.compute_time") is None
    assert _auto_case("tpu_notes.units.fmt") is None  # not decorated: its registry entry is what covers it


# ----------------------------------------------------------------------------------------------- the caps themselves
def test_a_runaway_allocation_is_a_memory_error_and_the_worker_goes_on():
    """Under the address-space cap an allocation past the budget fails at once (numpy's ``empty`` touches no page,
    so without the cap it would succeed); the limit is restored afterwards, and ``classify`` reports it as a
    finding rather than dying."""
    np = pytest.importorskip("numpy")
    resource = pytest.importorskip("resource")
    before = resource.getrlimit(resource.RLIMIT_AS)
    with pytest.raises(MemoryError), limits(cpu_s=5.0, memory=256 * 2**20):
        np.empty(2**32, dtype=np.uint8)  # 4 GiB against a 256 MiB budget
    assert resource.getrlimit(resource.RLIMIT_AS) == before
    case = H.Case(n=H.Int(1))
    outcome, problem = classify("a.fake", case, lambda n: np.empty(n, dtype=np.uint8), {"n": 1}, "n", 2**40)
    assert outcome == "memory" and "n=" in problem
    assert np.empty(2**20, dtype=np.uint8).size == 2**20  # the worker still allocates


def test_a_busy_loop_is_a_hang_by_cpu_time_and_the_timer_is_cleared():
    import signal

    with pytest.raises(Hang), limits(cpu_s=0.2):
        while True:
            pass
    assert signal.getitimer(signal.ITIMER_PROF) == (0.0, 0.0)


def test_a_sane_answer_is_one_whose_numbers_are_finite():
    import dataclasses

    @dataclasses.dataclass
    class R:
        total: float
        parts: dict

    assert non_finite(R(1.0, {"a": [1.0, 2]})) == set()
    assert non_finite(R(float("inf"), {"a": [1.0, float("nan")]})) == {".total", ".parts['a'][1]"}
