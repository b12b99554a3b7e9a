"""The caps each hostile call runs under, and what a sane answer is (shared by the hostile-input tests and
``benchmarks/hostile_corpus.py``).

:func:`limits` caps a call's CPU time (``ITIMER_PROF`` counts the process's CPU time, so a loaded machine does not
fail it; :class:`Hang` is raised when spent) and its address space (``RLIMIT_AS``'s soft limit lowered to the
process's size plus a budget for the call, so a runaway allocation is a ``MemoryError`` at once instead of a swapped
machine); both are restored afterwards and the worker goes on. :func:`non_finite` lists the non-finite numbers of a
result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal

try:
    import resource
except ImportError:  # not a POSIX system: no memory cap
    resource = None

#: CPU seconds a single hostile call may use: a check that raises takes microseconds; a JAX compile started by
#: mistake takes seconds; an unbounded search or simulation never ends. CPU time, not wall time, so load is no
#: failure.
CPU_LIMIT_S = 20.0
#: Bytes of address space a single hostile call may add to the process (a list of 10**12 steps is refused by the
#: allocator at once instead of swapping the machine).
MEMORY_BUDGET = 2 * 2**30
#: CPU seconds a call given an extreme number (:data:`EXTREMES`) may use: a count that a check lets through must not
#: make the work grow with it (the planner ranks a 405B model's layouts on 8,960 chips in about a second; a JAX
#: training step compiles in about two, and a slower machine must not make that a finding).
EXTREME_CPU_LIMIT_S = 10.0

#: Numbers that pass a check of their kind (or nearly do) yet lie far outside any real size: a call given one must
#: refuse it by name or return a sane (finite) result.
EXTREMES = (10**400, 10**18, 1e308, 5e-324)

#: Outcomes of one hostile call (``classify``): the first two are what the test asks for.
OUTCOMES = ("refused", "sane", "unnamed", "silent", "insane", "python", "memory", "hang")


class Hang(BaseException):
    """Raised by the CPU-time signal inside a call that ran too long (a BaseException, so library code cannot
    swallow it)."""


def _on_cpu_limit(signum, frame):
    raise Hang()


def _address_space() -> int | None:
    """The process's virtual size in bytes (Linux ``/proc``), or None where unknown."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def limits(cpu_s: float = CPU_LIMIT_S, memory: int = MEMORY_BUDGET):
    """Run the body under a CPU-time cap (``Hang`` when spent) and an address-space cap (``MemoryError`` when
    exceeded); both are restored afterwards, so the worker survives a call that hit either."""
    old_handler = signal.signal(signal.SIGPROF, _on_cpu_limit)
    old_as = None
    size = _address_space() if resource is not None else None
    if size is not None:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = size + memory
        if hard != resource.RLIM_INFINITY:
            cap = min(cap, hard)
        if soft == resource.RLIM_INFINITY or cap < soft:
            old_as = (soft, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    signal.setitimer(signal.ITIMER_PROF, cpu_s)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        if old_as is not None:
            resource.setrlimit(resource.RLIMIT_AS, old_as)
        signal.signal(signal.SIGPROF, old_handler)


def non_finite(obj, path: str = "", depth: int = 0) -> set[str]:
    """The paths (``.total``, ``[3].ttft``) of the non-finite floats in a result: its fields, items and values,
    numpy arrays included (a few levels deep; other objects are not opened)."""
    if depth > 5 or isinstance(obj, (bool, int, str, bytes)) or obj is None:
        return set()
    if isinstance(obj, float) or type(obj).__module__ == "numpy" and hasattr(obj, "dtype") and obj.shape == ():
        try:
            return set() if math.isfinite(float(obj)) else {path or "."}
        except (TypeError, ValueError):
            return set()
    if type(obj).__module__ == "numpy" and hasattr(obj, "dtype"):
        import numpy as np

        if obj.dtype.kind in "fc" and obj.size and not np.isfinite(obj).all():
            return {path or "."}
        return set()
    out: set[str] = set()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            out |= non_finite(getattr(obj, f.name, None), f"{path}.{f.name}", depth + 1)
    elif isinstance(obj, dict):
        for k, v in list(obj.items())[:1000]:
            out |= non_finite(v, f"{path}[{k!r}]", depth + 1)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj[:1000]):
            out |= non_finite(v, f"{path}[{i}]", depth + 1)
    return out
