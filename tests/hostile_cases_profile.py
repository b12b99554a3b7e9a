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


def _slice():
    from tpu_notes.topology import Slice

    return Slice("v5e", (2, 4))


def _sharded_text():
    """A small per-device module with one AllGather over 8 devices (the shapes of the chapter's FSDP step)."""
    return (
        "HloModule m, num_partitions=8\n\nENTRY e {\n  p = f32[256,8]{1,0} parameter(0)\n"
        "  ROOT ag = f32[256,64]{1,0} all-gather(p), replica_groups={{0,1,2,3,4,5,6,7}}, dimensions={1}\n}\n"
    )


def _scopes():
    from tpu_notes import profile

    return profile.op_scopes(_hlo_text())


def _costs():
    from tpu_notes import profile

    return profile.op_costs(_hlo_text())


def _small_layer():
    import jax.numpy as jnp

    from tpu_notes import model as M
    from tpu_notes import profile

    if "layer" not in _CACHE:
        cos, sin = M.rotary_tables(8, 16)
        _CACHE["layer"] = (jnp.ones((1, 8, 64), jnp.float32), profile.layer_params(64, 4, 128), cos, sin)
    return _CACHE["layer"]


def _synthetic():
    from tpu_notes import profile

    return profile.synthetic_device_trace("TPU")


def _device_events():
    from tpu_notes import profile

    return profile.device_events(_synthetic())


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
    T + "op_summary_table": Case(
        rows=Raw(_rows, [None, "x", 3, [3], ODD], lazy=True), top=Int(10, big=True), timings=Flag(True)
    ),
    T + "format_op_table": Case(
        rows=Raw(_rows, [None, "x", 3, [3], ODD], lazy=True), top=Int(10, big=True), timings=Flag(True)
    ),
    T + "memory": Case(compiled=Raw(_compiled, [None, "x", 3, ODD], lazy=True)),
    T + "xprof_tables": Case(
        trace=Raw(_trace, _bad_trace, lazy=True), tools=Raw(("hlo_stats",), ["nope", ["nope"], 3, None, ODD])
    ),
    T + "xprof_trace_events": Case(trace=Raw(_trace, _bad_trace, lazy=True)),
    T + "collective_costs": Case(
        compiled_or_hlo_text=Raw(_sharded_text, _bad_text, lazy=True),
        slice_=Raw(_slice, [None, "v5e", 3, ODD], lazy=True),
    ),
    T + "op_scopes": Case(compiled_or_hlo_text=Raw(_hlo_text, _bad_text, lazy=True), depth=Int(2, big=True)),
    T + "scope_totals": Case(
        rows=Raw(_costs, [None, "x", 3, [3], ODD], lazy=True), scopes=Raw(_scopes, [None, "x", 3, [1], ODD], lazy=True)
    ),
    T + "layer_params": Case(
        d_model=Raw(64, [0, -8, 2.5, "64", None, ODD, 2**20, 63]),
        n_heads=Raw(4, [0, -1, 1.5, "4", None, ODD, 3]),
        d_ff=Raw(128, [0, -1, 1.5, "128", None, ODD, 2**30]),
        dtype=Raw("fp32", ["int8", 3, None, ODD]),
        seed=Raw(0, [-1, 1.5, "0", None, ODD, 2**40]),
    ),
    T + "layer": Case(
        positional=("x", "params", "cos", "sin"),
        x=Raw(lambda: _small_layer()[0], [None, 3, "x", ODD], lazy=True),
        params=Raw(lambda: _small_layer()[1], [None, 3, "x", {"a": 1}, ODD], lazy=True),
        cos=Fixed(lambda: _small_layer()[2], lazy=True),
        sin=Fixed(lambda: _small_layer()[3], lazy=True),
    ),
    T + "trace_planes": Case(trace=Raw(_trace, _bad_trace, lazy=True)),
    T + "xprof_steps": Case(trace=Raw(_trace, _bad_trace, lazy=True)),
    T + "device_events": Case(
        xspace=Raw(_synthetic, [None, 3, "/nonexistent/x.xplane.pb", b"\xff\x00junk", ODD], lazy=True),
        module=Opt(Raw("jit_step", [3, ODD, [1]])),
    ),
    T + "device_op_table": Case(device_events_=Raw(_device_events, [None, "x", 3, [3], ODD], lazy=True)),
    T + "synthetic_device_trace": Case(
        platform=Raw("TPU", ["CPU", "NPU", 3, None, ODD]),
        devices=Int(2, big=True),
        streams=Int(2, big=True),
        ops=Raw((("f.1", 1e-5),), [None, "x", 3, [], [("f.1", -1.0)], [("f.1", True)], [("a b", 1e-5)], ODD]),
        module=Raw("jit_step", [None, 3, "", "a b", ODD]),
        steps=Int(2, big=True),
    ),
    "tpu_notes.hlo.parse_layout": Case(
        shape=Raw("bf16[3,1000]{1,0:T(8,128)(2,1)}", [None, 3, "", "x[3]", "bf16[3,1000]{1,1}", "bf16[3]{0:T(0)}", ODD])
    ),
    "tpu_notes.hlo.layouts": Case(compiled_or_hlo_text=Raw(_hlo_text, [None, 3, ["x"], ODD], lazy=True)),
}

COVERED = ("profile",)
RESULT_RECORDS = {
    "profile.Trace",
    "profile.OpCost",
    "profile.OpEvent",
    "profile.OpRow",
    "profile.StepSummary",
    "profile.MemoryUse",
    "profile.CollectiveCost",
    "profile.DeviceEvent",
    "profile.DeviceOpRow",
    "hlo.HloLayout",
}
