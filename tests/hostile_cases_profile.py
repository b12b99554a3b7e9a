"""Baseline calls of tpu_notes.profile (Chapter 9: traces, op tables, XLA's per-op costs) for
tests/test_hostile_input.py; merged into ``hostile_cases.CASES`` at the end of that file."""

from __future__ import annotations

from hostile_cases import ODD, Case, Fixed, Flag, Int, Opt, Raw

T = "tpu_notes.profile."

_CACHE: dict = {}


def _sin():
    import jax

    return jax.jit(lambda x: (x @ x).sum())


def _x():
    import jax.numpy as jnp

    return jnp.ones((64, 64), jnp.float32)


def _trace():
    """One small captured trace, shared by every entry (a capture takes a fraction of a second)."""
    if "trace" not in _CACHE:
        from tpu_notes import profile

        _CACHE["trace"] = profile.capture(_sin(), _x(), steps=2)
    return _CACHE["trace"]


def _compiled():
    return _sin().lower(_x()).compile()


def _hlo_text():
    return _compiled().as_text()


def _rows():
    from tpu_notes import profile

    return profile.op_table(_trace())


_bad_trace = [None, "x", 3, "/nonexistent/trace", ODD]
_bad_text = [None, 3, "", "HloModule", "not HLO at all", "HloModule m\n\nENTRY e {\n  ROOT x =", ODD]

CASES = {
    T + "capture": Case(
        positional=("fn", "x"),
        fn=Fixed(_sin, lazy=True),
        x=Fixed(_x, lazy=True),
        steps=Int(1, big=True),
        warmup=Int(1, zero=True, big=True),
        logdir=Opt(Raw(None, [3, ODD, [1]]), none_baseline=True),
        step_name=Raw("step", [3, "", "a step", None, ODD, "x" * 200]),
    ),
    T + "events": Case(trace=Raw(_trace, _bad_trace, lazy=True), step=Opt(Int(0, zero=True, big=True))),
    T + "op_costs": Case(compiled_or_hlo_text=Raw(_hlo_text, _bad_text, lazy=True)),
    T + "entry_computation": Case(compiled_or_hlo_text=Raw(_hlo_text, _bad_text, lazy=True)),
    T + "op_table": Case(
        trace=Raw(_trace, _bad_trace, lazy=True),
        roofline=Opt(Raw("v5e", ["nope", 3, ODD, [1]])),
        costs=Opt(Raw(None, ["x", 3, {"a": 1}, ODD]), none_baseline=True),
    ),
    T + "step_summary": Case(trace=Raw(_trace, _bad_trace, lazy=True)),
    T + "category_totals": Case(rows=Raw(_rows, [None, "x", 3, [3], ODD], lazy=True)),
    T + "format_op_table": Case(
        rows=Raw(_rows, [None, "x", 3, [3], ODD], lazy=True), top=Int(10, big=True), timings=Flag(True)
    ),
    T + "memory": Case(compiled=Raw(_compiled, [None, "x", 3, ODD], lazy=True)),
    T + "xprof_tables": Case(
        trace=Raw(_trace, _bad_trace, lazy=True), tools=Raw(("hlo_stats",), ["nope", ["nope"], 3, None, ODD])
    ),
    T + "xprof_trace_events": Case(trace=Raw(_trace, _bad_trace, lazy=True)),
}

COVERED = ("profile",)
RESULT_RECORDS = {
    "profile.Trace",
    "profile.OpCost",
    "profile.OpEvent",
    "profile.OpRow",
    "profile.StepSummary",
    "profile.MemoryUse",
}
