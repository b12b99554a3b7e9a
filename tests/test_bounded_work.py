"""Bounded work by construction: every declared cap is checked up front, and a call at the cap finishes in seconds.

A public function whose cost grows with an argument declares the largest value it takes in its signature
(``n_steps: Annotated[int, Positive(integer=True, maximum=...)]``, or ``units.capped(...)``). This test finds every
such cap in the package, calls the function with that argument at its cap (the other arguments as in the hostile-input
registry, ``tests/hostile_cases*.py``) and requires the call to return within ``CAP_LIMIT_S``; one past the cap must
be refused at once, naming the argument. ``GROWING`` lists the functions known to grow with an argument: each must
declare a cap on it.
"""
from __future__ import annotations

import time

import pytest

import test_hostile_input as T
from tpu_notes.units import Positive

#: Longest a call at its cap may take on this project's slowest machine (2 cores), seconds.
CAP_LIMIT_S = 10.0

#: (function, argument) pairs whose cost grows with the argument: each must declare a cap on it.
GROWING = [
    ("tpu_notes.training.pipeline.simulate", "microbatches"),
    ("tpu_notes.training.pipeline.simulate", "stages"),
    ("tpu_notes.gpu.routing.link_loads", "group"),
    ("tpu_notes.inference.simulator.simulate", "n_requests"),
    ("tpu_notes.parallel.train", "steps"),
]


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


@pytest.mark.parametrize("dotted, name, cap", CAPS, ids=[f"{d.split('tpu_notes.')[1]}:{n}" for d, n, _ in CAPS])
def test_a_call_at_the_cap_finishes_and_one_past_is_refused(dotted, name, cap):
    case = T.ALL_CASES[dotted]
    fn = T._target(dotted, case)
    values = dict(T._valid(dotted, case))
    values[name] = int(cap) if float(cap).is_integer() else cap
    start = time.perf_counter()
    try:
        T._call(fn, case, values, timeout=CAP_LIMIT_S)
    except T.Hang:
        pytest.fail(f"{dotted}({name}={cap}) still running after {CAP_LIMIT_S:.0f} s: the cap is too high")
    except (ValueError, TypeError) as err:
        # the cap may be unreachable with the other baseline arguments (e.g. a batch that must divide): then it is
        # the message that must not blame the capped argument
        assert not T._names_pattern(name, case.args[name]).search(str(err)), \
            f"{dotted} refuses its own cap {name}={cap}: {err}"
    elapsed = time.perf_counter() - start
    assert elapsed < CAP_LIMIT_S
    values[name] = int(cap) + 1 if float(cap).is_integer() else cap * 2
    with pytest.raises((ValueError, TypeError), match=name):
        T._call(fn, case, values, timeout=CAP_LIMIT_S)
