"""Bounded work by construction: every declared cap is checked up front, and a call at the cap finishes in seconds.

A public function whose cost grows with an argument declares the largest value it takes in its signature
(``n_steps: Annotated[int, Positive(integer=True, maximum=...)]``, or ``units.capped(...)``). This test finds every
such cap in the package. A function of the analysis layers (pure Python) is called with that argument at its cap (the
other arguments as in the hostile-input registry, ``tests/hostile_cases*.py``) and must return within
``CAP_LIMIT_S``; one past the cap must be refused, naming the argument, within ``REFUSE_LIMIT_S`` (checked up front,
before any work). A measurement function (JAX compiles, subprocesses, timed loops) is not run at its cap here, where
a compile cannot be interrupted: its caps are held to the up-front refusal, and what it costs at the cap is the
benchmarks' business. ``GROWING`` lists the functions known to grow with an argument: each must
declare a cap on it.
"""

from __future__ import annotations

import time

import pytest
import test_hostile_input as T
from test_layering import layer_of

from tpu_notes.units import Positive

#: Longest a call at its cap may take on this project's slowest machine (2 cores), seconds.
CAP_LIMIT_S = 10.0
#: Longest a refusal of one-past-the-cap may take, seconds: a check, not a computation.
REFUSE_LIMIT_S = 1.0

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


@pytest.mark.parametrize("dotted, name, cap", CAPS, ids=[f"{d.split('tpu_notes.')[1]}:{n}" for d, n, _ in CAPS])
def test_a_call_at_the_cap_finishes_and_one_past_is_refused(dotted, name, cap):
    case = T.ALL_CASES[dotted]
    fn = T._target(dotted, case)
    values = dict(T._valid(dotted, case))
    past = int(cap) + 1 if float(cap).is_integer() else cap * 2
    start = time.perf_counter()
    with pytest.raises((ValueError, TypeError), match=name):
        T._call(fn, case, {**values, name: past}, timeout=CAP_LIMIT_S)
    assert time.perf_counter() - start < REFUSE_LIMIT_S, f"{dotted} took seconds to refuse {name}={past}"
    if (dotted, name) in UNREACHABLE or layer_of(dotted.split(".")[1]) == "measurement":
        return
    values[name] = int(cap) if float(cap).is_integer() else cap
    start = time.perf_counter()
    try:
        T._call(fn, case, values, timeout=CAP_LIMIT_S)
    except T.Hang:
        pytest.fail(f"{dotted}({name}={cap}) still running after {CAP_LIMIT_S:.0f} s: the cap is too high")
    except (ValueError, TypeError):
        # a cap can be out of reach of the other baseline arguments (tp_axes=3 on a 2-D v5e, a batch that must
        # divide): a refusal is an answer in time too
        pass
    assert time.perf_counter() - start < CAP_LIMIT_S
