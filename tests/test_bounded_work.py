"""Bounded work by construction: every declared cap is checked up front, and a call at the cap does bounded work.

A public function whose cost grows with an argument declares the largest value it takes in its signature
(``n_steps: Annotated[int, Positive(integer=True, maximum=...)]``, or ``units.capped(...)``). This test finds every
such cap in the package. A function of the analysis layers (pure Python) is called with that argument at its cap (the
other arguments as in the hostile-input registry, ``tests/hostile_cases*.py``) and must return within
``CAP_CALLS`` function calls; one past the cap must be refused, naming the argument, within ``REFUSE_CALLS`` (checked
up front, before any work). Work is counted, not timed: a profile hook counts every Python and C function call the
call makes (the same count on any machine, under any load) and stops the call once it passes the budget, so a cap
set too high fails here instead of hanging. What a call costs in seconds is the benchmarks' business (``make
bench``; benchmarks/caps.py for the capped simulations). A measurement function (JAX compiles, subprocesses, timed
loops) is not run at its cap here: its caps are held to the up-front refusal. ``GROWING`` lists the functions known
to grow with an argument: each must declare a cap on it.
"""

from __future__ import annotations

import sys

import pytest
import test_hostile_input as T
from test_layering import layer_of

from tpu_notes.units import Positive

#: Most function calls (Python and C, counted by a profile hook) a call at its cap may make. The largest today:
#: training.pipeline.simulate at 1024 stages, 3.3 million; systolic.tile_schedule at 2**20 tiles, 3.1 million.
CAP_CALLS = 10_000_000
#: Most function calls a refusal of one-past-the-cap may make: a check and its message, not a computation (the
#: largest today is under 900, the first call of a function reading its annotations included).
REFUSE_CALLS = 5_000

#: (function, argument) pairs whose cost grows with the argument: each must declare a cap on it.
GROWING = [
    ("tpu_notes.training.pipeline.simulate", "microbatches"),
    ("tpu_notes.training.pipeline.simulate", "stages"),
    ("tpu_notes.gpu.routing.link_loads", "group"),
    # the simulator serves a Workload: its request count is capped where a workload is built
    ("tpu_notes.inference.workload.Workload.poisson", "n_requests"),
    ("tpu_notes.inference.workload.Workload.closed", "n_requests"),
    ("tpu_notes.parallel.train", "steps"),
    ("tpu_notes.roofline.smallest_compute_bound_batch", "limit"),
    ("tpu_notes.systolic.tile_schedule", "n_tiles"),
    ("tpu_notes.systolic.simulate_matmul", "array_size"),
]


#: Caps no test machine can reach, with the reason; for these only "one past the cap is refused" is checked.
UNREACHABLE = {
    ("tpu_notes.bench.collective_sweep", "n_devices"): "the cap is 4096 devices; a test machine simulates 8",
}


def _caps() -> list[tuple[str, str, int]]:
    out = []
    for dotted, case in sorted(T.ALL_CASES.items()):
        for name, spec in T._declared_of(dotted, case).items():
            for kind in spec.kinds:
                if isinstance(kind, Positive) and kind.maximum is not None and name in case.args:
                    out.append((dotted, name, kind.maximum))
    return out


CAPS = _caps()


def test_caps_are_found():
    assert CAPS, "no function declares a cap: the mechanism found nothing to check"


@pytest.mark.parametrize("dotted, name", GROWING)
def test_growing_functions_declare_their_cap(dotted, name):
    declared = {(d, n) for d, n, _ in CAPS}
    assert (dotted, name) in declared, f"{dotted} grows with {name} but declares no cap on it"


class OverBudget(BaseException):
    """Raised inside a call that made more function calls than its budget (a BaseException: not swallowed)."""


def count_calls(thunk, budget: int) -> int:
    """Run ``thunk()``, counting the Python and C function calls it makes (``thunk`` itself included); return the
    count. Raises ``OverBudget`` as soon as the count passes ``budget``, and whatever ``thunk`` raises (with
    ``.calls`` set on it to the count so far). The count is the same on any machine and under any load."""
    count = 0

    def hook(frame, event, arg):
        nonlocal count
        if event == "call" or (event == "c_call" and arg is not sys.setprofile):  # not the hook's own removal
            count += 1
            if count > budget:
                raise OverBudget()

    sys.setprofile(hook)
    try:
        thunk()
    except Exception as err:
        err.calls = count
        raise
    finally:
        sys.setprofile(None)
    return count


def _counted_call(fn, case, values: dict, budget: int) -> int:
    """:func:`count_calls` of ``fn`` called with ``values``, split as the registry's ``case`` says; the count
    excludes the wrapper that makes the call."""
    args = [values[n] for n in case.positional if n in values]
    kwargs = {k: v for k, v in values.items() if k not in case.positional}
    try:
        return count_calls(lambda: fn(*args, **kwargs), budget + 1) - 1
    except Exception as err:
        err.calls -= 1
        raise


def test_counting_stops_a_call_past_its_budget():
    """The count is exact and the budget has teeth: a call that would make a million calls is stopped after the
    budget, not run out."""
    case = T.ALL_CASES["tpu_notes.training.pipeline.simulate"]

    def two_calls():
        return abs(-1) + abs(-2)

    def busy():
        return sum(abs(i) for i in range(1_000_000))

    assert _counted_call(two_calls, case, {}, budget=10) == 3  # the function itself and its two abs() calls
    with pytest.raises(OverBudget):
        _counted_call(busy, case, {}, budget=1_000)


@pytest.mark.parametrize("dotted, name, cap", CAPS, ids=[f"{d.split('tpu_notes.')[1]}:{n}" for d, n, _ in CAPS])
def test_a_call_at_the_cap_finishes_and_one_past_is_refused(dotted, name, cap):
    case = T.ALL_CASES[dotted]
    fn = T._target(dotted, case)
    values = dict(T._valid(dotted, case))
    past = int(cap) + 1 if float(cap).is_integer() else cap * 2
    try:
        with pytest.raises((ValueError, TypeError), match=name) as refused:
            _counted_call(fn, case, {**values, name: past}, budget=REFUSE_CALLS)
    except OverBudget:
        pytest.fail(f"{dotted} made over {REFUSE_CALLS} calls before refusing {name}={past}: not checked up front")
    assert refused.value.calls <= REFUSE_CALLS
    if (dotted, name) in UNREACHABLE or layer_of(dotted.split(".")[1]) == "measurement":
        return
    values[name] = int(cap) if float(cap).is_integer() else cap
    try:
        calls = _counted_call(fn, case, values, budget=CAP_CALLS)
    except OverBudget:
        pytest.fail(f"{dotted}({name}={cap}) made over {CAP_CALLS:,} function calls: the cap is too high")
    except (ValueError, TypeError) as err:
        # a cap can be out of reach of the other baseline arguments (tp_axes=3 on a 2-D v5e, a batch that must
        # divide): a refusal is an answer within the budget too
        calls = err.calls
    assert 0 < calls <= CAP_CALLS
