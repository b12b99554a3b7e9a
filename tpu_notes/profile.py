"""Where a step's time goes: capture a JAX profiler trace and read it op by op (Chapter 9).

:func:`capture` compiles a function, runs it a few times inside :func:`jax.profiler.trace` (each call one
annotated step) and returns a :class:`Trace`: the trace directory ``jax.profiler`` wrote, the wall time of every
step, and the optimised HLO text of the program. Nothing here parses a protobuf or a trace file by hand:

- the events are read with :class:`jax.profiler.ProfileData` (JAX's own reader of the ``.xplane.pb`` file); each
  op event carries the HLO op name, the HLO module and the device it ran on;
- the cost of each op is XLA's own ``HloCostAnalysis``: every top-level instruction of the compiled module is cut
  out into a one-op module (its fused computation included) and costed with the same analysis that
  ``compiled.cost_analysis()`` runs on the whole program (:func:`op_costs`; the per-op FLOPs add up to the
  module's total, a test checks it);
- the tables XProf/TensorBoard show (``hlo_stats``, ``framework_op_stats``, ``roofline_model``, the
  ``trace_viewer`` JSON) come from the ``xprof`` package's converters (:func:`xprof_tables`). On a CPU the
  per-op device tables are empty (XProf fills them from device planes that TPUs and GPUs write); on a TPU or GPU
  they are full.

:func:`op_table` joins the two: per op, how often it ran per step, its total and mean seconds, its share of the
step, XLA's FLOPs and bytes, their ratio (arithmetic intensity) and, given a roofline, the time the roofline
predicts. :func:`step_summary` is the honesty check: the ops' seconds per device add up to the step's wall time.
:func:`memory` reads ``compiled.memory_analysis()`` (arguments, outputs, temporaries).

:func:`collective_costs` prices each collective of a compiled program on a TPU slice with Chapter 3's model;
:func:`op_scopes` maps each op back to the ``jax.named_scope`` it came from (:func:`layer` is a Llama-style decoder
layer written with scopes, the real-size workload the chapter profiles); :func:`trace_planes` shows which planes of
the trace hold the ops (the reason XProf's per-op tables are empty on a CPU).

Times are per device: on 8 simulated CPU devices every op runs once per device per step, and the table reports
the mean over devices. On simulated devices the host CPU runs all of them; the times measure that CPU.

Importing this module imports JAX.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import math
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

import jax
import numpy as np

from . import hlo
from .table import Column, Table
from .units import Bool, OneOf, Positive, capped, checked, fmt

#: Most steps :func:`capture` traces (a notebook-scale trace; each step's events are kept in memory).
MAX_STEPS = 100
#: Most warm-up calls before the trace starts.
MAX_WARMUP = 100

#: HLO opcodes of collectives (the ``-start``/``-done`` forms of asynchronous ones included).
COLLECTIVE_OPCODES = (
    "all-gather",
    "all-reduce",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "collective-broadcast",
    "ragged-all-to-all",
)

#: Opcodes that cost nothing to cost: they name buffers, they do not compute.
_FREE_OPCODES = (
    "parameter",
    "constant",
    "tuple",
    "get-tuple-element",
    "bitcast",
    "partition-id",
    "replica-id",
    "after-all",
)

#: The tables :func:`xprof_tables` converts by default.
XPROF_TOOLS = ("hlo_stats", "framework_op_stats", "roofline_model")


# --------------------------------------------------------------------------------------------------- records
@dataclass(frozen=True)
class Trace:
    """A captured trace (:func:`capture`)."""

    directory: str  # the log directory jax.profiler.trace wrote (plugins/profile/<run>/...)
    xplane: str  # path of the .xplane.pb file inside it
    module: str  # HLO module name of the traced program, e.g. "jit_step"
    steps: int  # steps traced
    step_s: tuple[float, ...]  # wall seconds of each traced step (from the step annotations)
    devices: int  # devices the program ran on
    hlo_text: str  # optimised HLO text of the program (what compiled.as_text() returns)
    step_name: str = "step"  # name of the step annotations

    @property
    def wall_s(self) -> float:
        """Median wall seconds of a step."""
        return float(np.median(self.step_s))

    def __repr__(self) -> str:
        return (
            f"Trace({self.module}: {self.steps} steps on {self.devices} device(s), median step {fmt(self.wall_s, 's')})"
        )


@dataclass(frozen=True)
class OpCost:
    """XLA's cost analysis of one HLO instruction (:func:`op_costs`)."""

    name: str  # HLO instruction name, e.g. "fusion.3" or "all-gather.1"
    opcode: str  # HLO opcode, e.g. "fusion", "dot", "all-gather"
    category: str  # "matmul" (a dot or a fusion holding one), "collective", "fusion" or "other"
    shape: str  # result shape, e.g. "f32[8,64]{1,0}"
    flops: float  # FLOPs XLA counts for it
    bytes: float  # bytes it reads and writes, per XLA
    transcendentals: float  # transcendental ops (exp, log, ...)

    @property
    def intensity(self) -> float:
        """FLOPs per byte (0 when it touches no bytes)."""
        return self.flops / self.bytes if self.bytes else 0.0


@dataclass(frozen=True)
class OpEvent:
    """One execution of one op on one device, from the trace (:func:`events`)."""

    name: str  # HLO instruction name
    device: int  # device ordinal it ran on
    step: int  # step number (the annotation it fell in)
    start_s: float  # seconds from the start of its step
    duration_s: float  # seconds it ran


@dataclass(frozen=True)
class OpRow:
    """One row of :func:`op_table`: an op's time per step and per device, with XLA's cost of one execution."""

    name: str  # HLO instruction name
    opcode: str  # HLO opcode ("?" when the op is not in the program's entry computation)
    category: str  # "matmul", "collective", "fusion" or "other"
    count: float  # executions per step per device
    total_s: float  # seconds per step per device, all executions
    mean_s: float  # seconds per execution
    share: float  # total_s / the step's median wall time
    flops: float  # FLOPs of one execution (XLA's cost analysis; nan when unknown)
    bytes: float  # bytes of one execution (XLA's cost analysis; nan when unknown)
    intensity: float  # flops / bytes, FLOPs per byte
    predicted_s: float  # roofline time of one execution, max(flops / peak, bytes / bandwidth); nan without one

    @property
    def achieved_flops(self) -> float:
        """FLOP/s the op reached: flops / mean_s."""
        return self.flops / self.mean_s if self.mean_s > 0 else float("nan")

    @property
    def ratio(self) -> float:
        """Measured over predicted time of one execution (nan without a prediction)."""
        return self.mean_s / self.predicted_s if self.predicted_s > 0 else float("nan")


@dataclass(frozen=True)
class StepSummary:
    """The sum-vs-wall check of a trace (:func:`step_summary`)."""

    wall_s: float  # median wall seconds of a step
    ops_s: float  # seconds of all ops per step per device (mean over devices)
    ratio: float  # ops_s / wall_s
    ops: int  # distinct ops that ran
    executions: float  # op executions per step per device

    def __repr__(self) -> str:
        return (
            f"StepSummary(wall {fmt(self.wall_s, 's')}, ops {fmt(self.ops_s, 's')} per device, "
            f"ratio {self.ratio:.2f}, {self.ops} ops)"
        )


@dataclass(frozen=True)
class MemoryUse:
    """What ``compiled.memory_analysis()`` reports for one device (:func:`memory`), in bytes."""

    arguments: float  # input buffers (parameters, batch)
    outputs: float  # output buffers
    aliased: float  # outputs that reuse an input buffer (donation)
    temporaries: float  # scratch XLA allocates during the step (activations kept for the backward pass, ...)
    code: float  # generated code
    xla_peak: float = float("nan")  # XLA's own peak of live buffers over the step (peak_memory_in_bytes)

    @property
    def total(self) -> float:
        """arguments + outputs - aliased + temporaries: every buffer XLA assigns, added up. Not the peak: buffers
        that are never live together are counted together here (``xla_peak`` is XLA's own peak)."""
        return self.arguments + self.outputs - self.aliased + self.temporaries

    def __repr__(self) -> str:
        return (
            f"MemoryUse(arguments {fmt(self.arguments, 'B')}, outputs {fmt(self.outputs, 'B')}, "
            f"aliased {fmt(self.aliased, 'B')}, temporaries {fmt(self.temporaries, 'B')}, "
            f"total {fmt(self.total, 'B')}, XLA's peak {fmt(self.xla_peak, 'B')})"
        )


# --------------------------------------------------------------------------------------------------- checks
def _check_trace(trace) -> Trace:
    if not isinstance(trace, Trace):
        raise TypeError(f"trace must be a tpu_notes.profile.Trace (from capture); got {type(trace).__name__}")
    if not os.path.isfile(trace.xplane):
        raise ValueError("trace: its .xplane.pb file is gone (was its directory deleted?); capture it again")
    return trace


def _check_text(name: str, value) -> str:
    if hasattr(value, "as_text") and callable(value.as_text):
        value = value.as_text()
    if not isinstance(value, str):
        raise TypeError(f"{name} must be HLO text or a compiled JAX function; got {type(value).__name__}")
    if not value.lstrip().startswith("HloModule"):
        raise ValueError(f"{name} must be HLO module text (starting 'HloModule'); got {value[:40]!r}")
    return value


@contextlib.contextmanager
def _quiet_stderr():
    """Silence C++ logging on file descriptor 2 (xprof and the profiler log progress lines there, which a
    notebook kernel would show under the cell)."""
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (an embedded interpreter)
        yield
        return
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# --------------------------------------------------------------------------------------------------- capture
_TEMPORARY: list[str] = []  # trace directories capture() made itself; removed when the interpreter exits


def _temporary_directory() -> str:
    if not _TEMPORARY:
        atexit.register(_remove_temporary)
    directory = tempfile.mkdtemp(prefix="tpu_notes_trace_")
    _TEMPORARY.append(directory)
    return directory


def _remove_temporary() -> None:
    while _TEMPORARY:
        shutil.rmtree(_TEMPORARY.pop(), ignore_errors=True)


def _compile(fn: Callable, args: tuple):
    from jax.stages import Compiled

    if isinstance(fn, Compiled):
        return fn
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args).compile()


def _module_name(hlo_text: str) -> str:
    return hlo.parse_module(hlo_text).name or "?"


def _find_xplane(directory: str) -> str:
    found = sorted(glob.glob(os.path.join(directory, "**", "*.xplane.pb"), recursive=True))
    if not found:
        raise ValueError("directory holds no trace (no .xplane.pb file under it)")
    if len(found) > 1:
        raise ValueError(f"directory holds {len(found)} traces; expected one (use a fresh directory per capture)")
    return found[0]


def _events(profile):
    """Every event of a profile, plane by plane and line by line."""
    for plane in profile.planes:
        for line in plane.lines:
            yield from line.events


def _step_windows(profile, step_name: str) -> list[tuple[int, float, float]]:
    """(step number, start ns, end ns) of every step annotation named ``step_name``."""
    out = []
    for e in _events(profile):
        if e.name != step_name:
            continue
        stats = dict(e.stats)
        if "step_num" in stats:
            out.append((int(stats["step_num"]), float(e.start_ns), float(e.end_ns)))
    return sorted(out)


def _check_capture(fn, step_name, logdir) -> str | None:
    """Check :func:`capture`'s ``fn``, ``step_name`` and ``logdir`` (an empty or new directory); return ``logdir``
    as a string path (or None)."""
    if not callable(fn):
        raise TypeError(
            f"fn must be a callable (a function, a jitted function or a compiled one); got {type(fn).__name__}"
        )
    if not isinstance(step_name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}", step_name):
        raise ValueError(f"step_name must be a short identifier (letters, digits, _ . -); got {step_name!r}")
    if logdir is not None:
        if not isinstance(logdir, (str, os.PathLike)):
            raise TypeError(f"logdir must be a directory path or None; got {type(logdir).__name__}")
        logdir = os.fspath(logdir)
        if os.path.exists(logdir) and (not os.path.isdir(logdir) or os.listdir(logdir)):
            raise ValueError(
                f"logdir must be an empty or new directory (a second trace in it would be ambiguous); {logdir!r} is not"
            )
    return logdir


def _compile_and_warm_up(fn, args: tuple, warmup: int):
    """``fn`` compiled for ``args`` and called ``warmup`` times; a failure in either stage is a ``ValueError``
    naming the stage."""
    try:
        compiled = _compile(fn, args)
    except Exception as e:  # noqa: BLE001 - reported with its type, chained
        raise ValueError(f"fn failed to compile for these args: {type(e).__name__}: {e}") from e
    try:
        for _ in range(warmup):
            jax.block_until_ready(compiled(*args))
    except Exception as e:  # noqa: BLE001
        raise ValueError(f"fn failed when called (warm-up, before tracing): {type(e).__name__}: {e}") from e
    return compiled


def _remove_written(directory: str, created: bool) -> None:
    """Undo a failed trace: remove ``directory`` if this call ``created`` it, else only what is in it now."""
    if created:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        for entry in os.listdir(directory):
            path = os.path.join(directory, entry)
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.remove(path)


@checked
def capture(
    fn: Callable,
    *args,
    steps: capped(MAX_STEPS) = 3,
    warmup: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_WARMUP)] = 1,
    logdir: str | None = None,
    step_name: str = "step",
) -> Trace:
    """Compile ``fn`` for ``args``, call it ``warmup`` times, then trace ``steps`` calls with
    :func:`jax.profiler.trace`, each inside a :class:`jax.profiler.StepTraceAnnotation` named ``step_name`` and
    ended by ``block_until_ready``. Returns the :class:`Trace`.

    ``fn`` may be a plain function (jitted here), a jitted one, or an already compiled one
    (``jax.jit(f).lower(...).compile()``, e.g. :func:`tpu_notes.parallel.compiled_step`); it is compiled once and
    the compiled program is what runs. ``logdir``: an empty or new directory (default: a fresh temporary one,
    which the caller may delete). When ``fn`` fails, or the trace cannot be written, what this call wrote is
    removed and a ``ValueError`` says which stage failed. A temporary directory made here is removed when
    the Python process exits (pass ``logdir`` to keep the trace).
    """
    logdir = _check_capture(fn, step_name, logdir)
    compiled = _compile_and_warm_up(fn, args, warmup)
    created = logdir is None or not os.path.exists(logdir)
    directory = _temporary_directory() if logdir is None else logdir
    os.makedirs(directory, exist_ok=True)
    try:
        with _quiet_stderr():
            with jax.profiler.trace(directory):
                for i in range(steps):
                    with jax.profiler.StepTraceAnnotation(step_name, step_num=i):
                        jax.block_until_ready(compiled(*args))
        xplane = _find_xplane(directory)
        profile = jax.profiler.ProfileData.from_file(xplane)
        windows = _step_windows(profile, step_name)
        if len(windows) != steps:
            raise ValueError(f"the trace holds {len(windows)} step annotations, expected {steps}")
    except BaseException as e:
        _remove_written(directory, created)
        if isinstance(e, ValueError):
            raise
        if isinstance(e, Exception):
            raise ValueError(f"tracing fn failed: {type(e).__name__}: {e}") from e
        raise
    text = compiled.as_text()
    trace = Trace(
        directory=directory,
        xplane=xplane,
        module=_module_name(text),
        steps=steps,
        step_s=tuple((end - start) * 1e-9 for _, start, end in windows),
        devices=1,
        hlo_text=text,
        step_name=step_name,
    )
    n_dev = len({e.device for e in _raw_events(trace, profile)})
    return Trace(**{**trace.__dict__, "devices": max(1, n_dev)})


# --------------------------------------------------------------------------------------------------- events
def _raw_events(trace: Trace, profile=None) -> list[OpEvent]:
    profile = profile or jax.profiler.ProfileData.from_file(trace.xplane)
    windows = _step_windows(profile, trace.step_name)
    out = []
    for e in _events(profile):
        stats = dict(e.stats)
        if stats.get("hlo_module") != trace.module or "hlo_op" not in stats:
            continue
        start = float(e.start_ns)
        for num, lo, hi in windows:
            if lo <= start < hi:
                out.append(
                    OpEvent(
                        name=str(stats["hlo_op"]),
                        device=int(stats.get("device_ordinal", 0)),
                        step=num,
                        start_s=(start - lo) * 1e-9,
                        duration_s=float(e.duration_ns) * 1e-9,
                    )
                )
                break
    return out


@checked
def events(
    trace: Trace, step: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_STEPS - 1)] | None = None
) -> list[OpEvent]:
    """Every op execution of the traced program inside the step annotations (``step``: only that step), read
    with :class:`jax.profiler.ProfileData`, sorted by step, device and start time."""
    trace = _check_trace(trace)
    if step is not None:
        if step > trace.steps - 1:
            raise ValueError(
                f"step must be in [0, {trace.steps - 1}] (the trace holds {trace.steps} steps); got {step}"
            )
    evs = [e for e in _raw_events(trace) if step is None or e.step == step]
    return sorted(evs, key=lambda e: (e.step, e.device, e.start_s, e.name))


# --------------------------------------------------------------------------------------------------- costs
def _category(ins: hlo.HloInstruction, module: hlo.HloModule | None) -> str:
    """ "matmul" for a dot, a convolution or (with ``module``) a fusion or call holding one; "collective";
    "fusion"; "other"."""
    opcode = ins.opcode
    base = opcode.replace("-start", "").replace("-done", "")
    if base in COLLECTIVE_OPCODES:
        return "collective"
    inside = (
        () if module is None else [i.opcode for c in module.called_computations(ins) for i in module.computation(c)]
    )
    if opcode in ("dot", "convolution") or "dot" in inside or "convolution" in inside:
        return "matmul"
    if opcode == "fusion":
        return "fusion"
    return "other"


def _clean_module_text(text: str, name: str = "compiled_or_hlo_text") -> str:
    from jaxlib import _hlo

    try:
        with _quiet_stderr():
            module = _hlo.hlo_module_from_text(text)
    except Exception as e:  # noqa: BLE001 - XLA's parser raises its own error types
        raise ValueError(f"{name}: XLA cannot parse this HLO text: {str(e).splitlines()[0][:200]}") from e
    options = _hlo.HloPrintOptions.short_parsable()
    options.print_metadata = False
    return module.to_string(options)


def entry_computation(compiled_or_hlo_text) -> str:
    """The entry computation of a compiled program as short HLO text (no metadata, operands by name): the ops
    that run one after another, each line ``name = shape opcode(operands), attributes``."""
    text = _check_text("compiled_or_hlo_text", compiled_or_hlo_text)
    module = hlo.parse_module(_clean_module_text(text))
    if module.entry is None:
        raise ValueError("compiled_or_hlo_text: no ENTRY computation found")
    return module.computation_text[module.entry]


def op_costs(compiled_or_hlo_text) -> dict[str, OpCost]:
    """XLA's cost analysis of every top-level instruction of a compiled program (``compiled.as_text()`` or the
    compiled object itself): ``{instruction name: OpCost}``.

    Each instruction of the entry computation is cut out into a module of its own (its operands become
    parameters; its fused or called computations come along) and costed by XLA's ``HloCostAnalysis`` on the
    current backend, the analysis behind ``compiled.cost_analysis()``. Buffers that compute nothing
    (parameters, constants, tuples, bitcasts) are left out. FLOPs and bytes are per device (the module is the
    partitioned, per-device program)."""
    text = _check_text("compiled_or_hlo_text", compiled_or_hlo_text)
    if text not in _COSTS_CACHE:
        if len(_COSTS_CACHE) >= 16:
            _COSTS_CACHE.pop(next(iter(_COSTS_CACHE)))
        _COSTS_CACHE[text] = _op_costs(text)
    return dict(_COSTS_CACHE[text])


#: op_costs of the last few programs, by HLO text (a table, a figure and a check often cost the same program).
_COSTS_CACHE: dict = {}


def _op_costs(text: str) -> dict:
    from jax._src.lib import _jax
    from jaxlib import _hlo

    module = hlo.parse_module(_clean_module_text(text))
    if module.entry is None:
        raise ValueError("compiled_or_hlo_text: no ENTRY computation found")
    from .devices import default_devices

    client = default_devices()[0].client
    out = {}
    for ins in module.computation(module.entry):
        if ins.opcode in _FREE_OPCODES:
            continue
        single = hlo.single_op_module(module, ins.name)
        cost = {}
        if single is not None:
            try:
                with _quiet_stderr():
                    cost = _jax.hlo_module_cost_analysis(client, _hlo.hlo_module_from_text(single))
            except Exception:  # noqa: BLE001 - an op XLA cannot cost alone keeps nan
                cost = {}
        miss = 0.0 if cost else float("nan")  # XLA leaves out keys that are zero
        category = _category(ins, module if single is not None else None)
        out[ins.name] = OpCost(
            name=ins.name,
            opcode=ins.opcode,
            category=category,
            shape=ins.shape,
            flops=float(cost.get("flops", miss)),
            bytes=float(cost.get("bytes accessed", miss)),
            transcendentals=float(cost.get("transcendentals", miss)),
        )
    return out


# --------------------------------------------------------------------------------------------------- tables
def _peak_and_bandwidth(roofline) -> tuple[float, float]:
    if roofline is None:
        return float("nan"), float("nan")
    from .bench import FittedRoofline

    if isinstance(roofline, FittedRoofline):
        return float(roofline.peak_flops), float(roofline.bandwidth)
    from .hardware import get_chip

    try:
        chip = get_chip(roofline)
    except (ValueError, TypeError, KeyError) as e:
        raise ValueError(f"roofline must be a bench.FittedRoofline, a chip name or a Chip; got {roofline!r}") from e
    return float(chip.peak_flops("bf16")), float(chip.hbm_bw)


def op_table(trace: Trace, roofline=None, costs: dict | None = None) -> list[OpRow]:
    """Per-op rows of a captured trace, most time first.

    ``count``, ``total_s`` and ``mean_s`` are per step and per device (the trace's events summed over every
    traced step and device, divided by both); ``share`` is ``total_s`` over the median step wall time. Each
    row carries XLA's FLOPs and bytes of one execution (:func:`op_costs`, or ``costs`` when given), their
    ratio, and, when ``roofline`` is given (a :class:`tpu_notes.bench.FittedRoofline`, e.g. Chapter 1's
    measured CPU roofline, or a chip name/``Chip``: its bf16 peak and HBM bandwidth), the roofline's time for
    one execution (``nan`` for collectives: their time is the interconnect's, :mod:`tpu_notes.collectives`)."""
    trace = _check_trace(trace)
    peak, bw = _peak_and_bandwidth(roofline)
    if costs is None:
        costs = op_costs(trace.hlo_text)
    elif not isinstance(costs, dict) or not all(isinstance(v, OpCost) for v in costs.values()):
        raise TypeError("costs must be a dict {name: OpCost} from op_costs, or None")
    evs = _raw_events(trace)
    n = trace.steps * trace.devices
    total, count = {}, {}
    for e in evs:
        total[e.name] = total.get(e.name, 0.0) + e.duration_s
        count[e.name] = count.get(e.name, 0) + 1
    wall = trace.wall_s
    rows = []
    nan = float("nan")
    for name in total:
        c = costs.get(name)
        flops, nbytes = (c.flops, c.bytes) if c else (nan, nan)
        inten = flops / nbytes if c and nbytes > 0 else (0.0 if c else nan)
        # a collective's time is set by the interconnect (Chapter 3's model), not by this roofline
        pred = max(flops / peak, nbytes / bw) if (c and c.category != "collective" and peak > 0 and bw > 0) else nan
        rows.append(
            OpRow(
                name=name,
                opcode=c.opcode if c else "?",
                category=c.category if c else "other",
                count=count[name] / n,
                total_s=total[name] / n,
                mean_s=total[name] / count[name],
                share=total[name] / n / wall,
                flops=flops,
                bytes=nbytes,
                intensity=inten,
                predicted_s=pred,
            )
        )
    return sorted(rows, key=lambda r: (-r.total_s, r.name))


def step_summary(trace: Trace) -> StepSummary:
    """The sum-vs-wall check: seconds of all ops per step per device against the median step wall time."""
    rows = op_table(trace, costs={})
    ops = sum(r.total_s for r in rows)
    return StepSummary(
        wall_s=trace.wall_s, ops_s=ops, ratio=ops / trace.wall_s, ops=len(rows), executions=sum(r.count for r in rows)
    )


def _op_rows(rows) -> list[OpRow]:
    """``rows`` as a list, once checked to be :func:`op_table` rows."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError("rows must be a list of OpRow (from op_table)")
    rows = list(rows)
    if not all(isinstance(r, OpRow) for r in rows):
        raise TypeError("rows must be a list of OpRow (from op_table)")
    return rows


def category_totals(rows: Sequence[OpRow]) -> dict[str, float]:
    """Seconds per step per device by category ("matmul", "fusion", "collective", "other"), from
    :func:`op_table` rows."""
    rows = _op_rows(rows)
    out = {k: 0.0 for k in ("matmul", "fusion", "collective", "other")}
    for r in rows:
        out[r.category] += r.total_s
    return out


@checked
def op_summary_table(rows: Sequence[OpRow], top: capped(10_000) = 10, timings: Bool = True) -> Table:
    """The first ``top`` rows as a :class:`tpu_notes.table.Table`.

    ``timings=True``: op, category, executions per step, measured time per step and its share of the step, XLA's
    FLOPs and intensity of one execution, and the roofline's time of one execution. ``timings=False`` shows only
    what the compiler decides (op, opcode, executions per step, FLOPs, bytes, intensity), sorted by FLOPs then
    name: identical on every run, so a notebook can compare it."""
    rows = _op_rows(rows)

    def num(x):
        return x if math.isfinite(x) else None

    def count(x):
        return int(x) if float(x).is_integer() else x

    if not timings:
        rows = sorted(rows, key=lambda r: (-(r.flops if math.isfinite(r.flops) else -1), r.name))
        cols = [
            Column("op"),
            Column("opcode"),
            Column("per step"),
            Column("FLOPs", "FLOPs"),
            Column("bytes", "B"),
            Column("intensity", "FLOP/B"),
        ]
        body = [(r.name, r.opcode, count(r.count), num(r.flops), num(r.bytes), num(r.intensity)) for r in rows[:top]]
        return Table(cols, body, caption=f"The {min(top, len(rows))} ops with the most FLOPs, as XLA counts them")
    cols = [
        Column("op"),
        Column("category"),
        Column("n"),
        Column("total", "s"),
        Column("share", "%"),
        Column("FLOPs", "FLOPs"),
        Column("intensity", "FLOP/B"),
        Column("roofline", "s"),
    ]
    body = [
        (
            r.name,
            r.category,
            count(r.count),
            r.total_s,
            r.share,
            num(r.flops),
            num(r.intensity),
            num(r.predicted_s),
        )
        for r in rows[:top]
    ]
    return Table(cols, body, caption=f"The {min(top, len(rows))} ops that take the most time per step")


@checked
def format_op_table(rows: Sequence[OpRow], top: capped(10_000) = 10, timings: Bool = True) -> str:
    """:func:`op_summary_table` as plain text (for a terminal)."""
    return op_summary_table(rows, top, timings).text()


def memory(compiled) -> MemoryUse:
    """Bytes per device of a compiled program, from XLA's ``memory_analysis()``: its buffer sizes by kind and
    its own peak of live buffers (``peak_memory_in_bytes``; nan where the backend does not report it)."""
    if not hasattr(compiled, "memory_analysis"):
        raise TypeError(
            f"compiled must be a compiled JAX function (jax.jit(f).lower(...).compile()); got {type(compiled).__name__}"
        )
    m = compiled.memory_analysis()
    if m is None:
        raise ValueError("compiled: this backend reports no memory analysis")
    return MemoryUse(
        arguments=float(m.argument_size_in_bytes),
        outputs=float(m.output_size_in_bytes),
        aliased=float(m.alias_size_in_bytes),
        temporaries=float(m.temp_size_in_bytes),
        code=float(m.generated_code_size_in_bytes),
        xla_peak=float(getattr(m, "peak_memory_in_bytes", float("nan"))),
    )


# --------------------------------------------------------------------------------------------------- xprof
def _xprof():
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError as e:
        raise ImportError(
            "reading a trace with XProf's converters needs the xprof package "
            "(pip install xprof; requirements.txt pins the version the book uses)"
        ) from e
    return raw_to_tool_data


def xprof_tables(trace: Trace, tools: Sequence[str] = XPROF_TOOLS) -> dict[str, list[dict[str, Any]]]:
    """The tables XProf shows, converted offline by the ``xprof`` package from the trace's ``.xplane.pb``:
    ``{tool: rows}``, each row a dict keyed by the column ids of XProf's table (``hlo_op_name``,
    ``total_time`` in µs, ``bound_by``, ...). ``tools`` from ``hlo_stats``, ``framework_op_stats``,
    ``roofline_model``, ``overview_page``. On a CPU the device tables hold no rows."""
    import json

    trace = _check_trace(trace)
    allowed = ("hlo_stats", "framework_op_stats", "roofline_model", "overview_page")
    if isinstance(tools, str) or not hasattr(tools, "__iter__"):
        raise TypeError(f"tools must be a sequence of tool names from {allowed}; got {tools!r}")
    tools = list(tools)
    for t in tools:
        if t not in allowed:
            raise ValueError(f"tools: unknown tool {t!r}; allowed: {allowed}")
    raw_to_tool_data = _xprof()
    out = {}
    with _quiet_stderr():
        for tool in tools:
            data, _ = raw_to_tool_data.xspace_to_tool_data([trace.xplane], tool, {})
            tables = json.loads(data) if data else []
            tables = tables if isinstance(tables, list) else [tables]
            rows = []
            for table in tables:
                ids = [c["id"] for c in table.get("cols", [])]
                for r in table.get("rows", []):
                    rows.append({k: (cell or {}).get("v") for k, cell in zip(ids, r.get("c", []))})
            out[tool] = rows
    return out


def xprof_trace_events(trace: Trace) -> list[dict[str, Any]]:
    """The op events of the traced program as XProf's trace viewer sees them (its Chrome-trace JSON, converted
    by ``xprof``): one dict per execution with ``name``, ``ts`` and ``dur`` in µs and ``args`` (``hlo_op``,
    ``hlo_module``, ``device_ordinal``). What the trace viewer draws; :func:`events` reads the same file with
    JAX's own reader."""
    import json

    trace = _check_trace(trace)
    raw_to_tool_data = _xprof()
    with _quiet_stderr():
        data, _ = raw_to_tool_data.xspace_to_tool_data([trace.xplane], "trace_viewer", {})
    evs = json.loads(data)["traceEvents"]
    return [
        e
        for e in evs
        if e.get("ph") == "X" and e.get("args", {}).get("hlo_module") == trace.module and "hlo_op" in e.get("args", {})
    ]


# --------------------------------------------------------------------------------------------------- collectives
#: How :func:`collective_costs` turns a per-device HLO collective into the whole array ``V`` of Chapter 3's model.
ARRAY_BYTES_RULE = {
    "all-gather": "result bytes (the gathered array)",
    "reduce-scatter": "operand bytes (the unreduced array)",
    "all-reduce": "operand bytes (the array being summed)",
    "all-to-all": "operand bytes x group size (each device holds V / N)",
    "collective-permute": "operand bytes (one shard, one hop)",
}


@dataclass(frozen=True)
class CollectiveCost:
    """One collective of a compiled program priced on a TPU slice by Chapter 3's model (:func:`collective_costs`)."""

    name: str  # HLO instruction name, e.g. "all-gather.9"
    kind: str  # "all-gather", "reduce-scatter", "all-reduce", "all-to-all" or "collective-permute"
    group_size: int  # devices in each replica group (N)
    axes: tuple[str, ...]  # slice axes the group spans, e.g. ("x", "y")
    device_bytes: float  # bytes per device XLA's HLO shows (operand or result, as ARRAY_BYTES_RULE says)
    array_bytes: float  # V, the whole array the model prices (ARRAY_BYTES_RULE)
    bandwidth_s: float  # the model's bandwidth term, seconds
    latency_s: float  # hops x hop latency, seconds
    seconds: float  # max(bandwidth_s, latency_s)
    factor: float  # bandwidth_s x W_ici / V: the ring factor of this kind on these axes (W_ici bidirectional)

    @property
    def bound(self) -> str:
        """ "bandwidth" or "latency": which term sets the time."""
        return "bandwidth" if self.bandwidth_s >= self.latency_s else "latency"


def _entry_of(text: str) -> hlo.HloModule:
    module = hlo.parse_module(text)
    if module.entry is None or module.entry not in module.computations:
        raise ValueError("compiled_or_hlo_text: no complete ENTRY computation found (truncated text?)")
    return module


def _group_axes(sl, n: int, name: str) -> tuple[int, ...]:
    """The fewest slice axes (by position) whose sizes multiply to ``n``; ValueError when none do."""
    import itertools as _it

    if n == 1:
        return ()
    live = [i for i, s in enumerate(sl.shape) if s > 1]
    for k in range(1, len(live) + 1):
        for combo in _it.combinations(live, k):
            if math.prod(sl.shape[i] for i in combo) == n:
                return combo
    raise ValueError(
        f"slice_: collective {name} has replica groups of {n} devices, but no set of axes of the slice "
        f"{sl.chip.name} {'x'.join(map(str, sl.shape))} holds {n} chips; pick a slice whose axes match the mesh"
    )


def collective_costs(compiled_or_hlo_text, slice_) -> list[CollectiveCost]:
    """Every collective of a compiled (per-device) program, read by :func:`tpu_notes.hlo.collectives` (CPU's
    AllReduce-then-slice folded back into a ReduceScatter by :func:`tpu_notes.hlo.normalize_cpu_collectives`),
    priced on ``slice_`` (a :class:`tpu_notes.topology.Slice`) by Chapter 3's model through
    ``Slice.collective_time``: each replica group is placed on the fewest slice axes whose chips it counts, with
    those axes' sizes and wraparound. The array ``V`` the model takes is :data:`ARRAY_BYTES_RULE` of the HLO's
    per-device bytes. A collective-permute is one hop of its operand at one link's one-way bandwidth.
    Program order."""
    from . import collectives as coll
    from .topology import Slice

    if not isinstance(slice_, Slice):
        raise TypeError(
            f"slice_ must be a tpu_notes.topology.Slice (e.g. Slice('v5e', (2, 4))); got {type(slice_).__name__}"
        )
    text = _check_text("compiled_or_hlo_text", compiled_or_hlo_text)
    _entry_of(text)
    found = hlo.normalize_cpu_collectives(hlo.collectives(text), text)
    w = slice_.chip.bandwidth("ici")
    lat = slice_.latency(slice_.axes[0])
    out = []
    for c in found:
        if c.kind == "collective-permute":
            n = 2
            v = dev = c.operand_bytes
            idx: tuple[int, ...] = ()
            bw_t, lat_t = v / slice_.chip.bandwidth("ici_oneway"), lat
        elif c.kind in coll.KINDS:
            n = c.group_size or 1
            idx = _group_axes(slice_, n, c.name)
            dev = c.result_bytes if c.kind == "all-gather" else c.operand_bytes
            v = dev * n if c.kind == "all-to-all" else dev
            if not idx:
                bw_t = lat_t = 0.0
            else:
                t = slice_.collective_time(c.kind, v, tuple(slice_.axes[i] for i in idx))
                bw_t, lat_t = t.bandwidth_time, t.latency_time
        else:  # collective-broadcast, ragged-all-to-all: not priced by the chapter's model
            continue
        out.append(
            CollectiveCost(
                name=c.name,
                kind=c.kind,
                group_size=n,
                axes=tuple(slice_.axes[i] for i in idx),
                device_bytes=float(dev),
                array_bytes=float(v),
                bandwidth_s=float(bw_t),
                latency_s=float(lat_t),
                seconds=float(max(bw_t, lat_t)),
                factor=float(bw_t * w / v) if v > 0 else 0.0,
            )
        )
    return out


# --------------------------------------------------------------------------------------------------- scopes
_OP_NAME_RE = re.compile(r'op_name="([^"]*)"')


def _scope_of(op_name: str, depth: int) -> str:
    parts = [p for p in op_name.split("/") if p]
    if parts and parts[0].startswith(("jit(", "pjit(")):
        parts = parts[1:]
    parts = [p for p in parts[:-1] if not p.startswith(("jit(", "pjit(")) and "->" not in p]  # the primitive goes
    return "/".join(parts[:depth])


@checked
def op_scopes(compiled_or_hlo_text, depth: Annotated[int, Positive(integer=True, maximum=64)] = 2) -> dict[str, str]:
    """The source scope of every op of the entry computation: ``{instruction name: scope}``, from the
    ``op_name`` metadata JAX writes into the HLO (``jit(f)/attention/qkv/dot_general`` gives ``attention/qkv``
    with ``depth=2``: the ``jax.named_scope`` names, the jitted function's name and the primitive left out). An
    op without metadata of its own (a fusion XLA built) takes the scope of the first instruction inside the
    computation it calls that has one, else the scope of the first op that uses its result (XLA's CPU backend
    drops the metadata of the dots it hands to its matmul library); ``""`` when nothing says. Needs the long
    printing (``compiled`` or ``compiled.as_text()``), which keeps the metadata."""
    text = _check_text("compiled_or_hlo_text", compiled_or_hlo_text)
    module = _entry_of(text)
    out = {}
    for ins in module.computation(module.entry):
        if ins.opcode in _FREE_OPCODES:
            continue
        m = _OP_NAME_RE.search(ins.attributes)
        scope = _scope_of(m.group(1), depth) if m else ""
        if not scope:
            for comp in module.called_computations(ins):
                for inner in module.computation(comp):
                    mm = _OP_NAME_RE.search(inner.attributes)
                    if mm and _scope_of(mm.group(1), depth):
                        scope = _scope_of(mm.group(1), depth)
                        break
                if scope:
                    break
        out[ins.name] = scope
    users: dict[str, list[str]] = {}
    for ins in module.computation(module.entry):
        for o in ins.operands:
            users.setdefault(o, []).append(ins.name)
    for name in [n for n, s in out.items() if not s]:  # no metadata anywhere inside: the scope of its first user
        scope = next((out[u] for u in users.get(name, ()) if out.get(u)), "")
        out[name] = scope
    return out


def scope_totals(rows, scopes: dict) -> dict[str, dict[str, float]]:
    """Per source scope (:func:`op_scopes`), the ops, their FLOPs and bytes (one execution each, XLA's cost
    analysis) and, for :func:`op_table` rows, their seconds per step: ``{scope: {"ops", "flops", "bytes",
    "seconds"}}`` in the order scopes first appear. ``rows``: :func:`op_table` rows, or the dict
    :func:`op_costs` returns (then ``seconds`` is nan). Ops missing from ``scopes`` count under ``""``."""
    if isinstance(rows, dict):
        rows = list(rows.values())
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError("rows must be op_table rows or the dict op_costs returns")
    rows = list(rows)
    if not all(isinstance(r, (OpRow, OpCost)) for r in rows):
        raise TypeError("rows must be op_table rows or the dict op_costs returns")
    if not isinstance(scopes, dict):
        raise TypeError(f"scopes must be the dict op_scopes returns; got {type(scopes).__name__}")
    out: dict[str, dict[str, float]] = {}
    order = {s: i for i, s in enumerate(dict.fromkeys(scopes.values()))}
    for r in sorted(rows, key=lambda r: order.get(scopes.get(r.name, ""), len(order))):
        t = out.setdefault(scopes.get(r.name, ""), {"ops": 0, "flops": 0.0, "bytes": 0.0, "seconds": 0.0})
        t["ops"] += 1
        t["flops"] += r.flops if math.isfinite(r.flops) else 0.0
        t["bytes"] += r.bytes if math.isfinite(r.bytes) else 0.0
        t["seconds"] += r.total_s if isinstance(r, OpRow) else float("nan")
    return out


# --------------------------------------------------------------------------------------------------- a layer
# The layer's default size is Llama 3.2 1B's d_model and MLP width
# (https://huggingface.co/meta-llama/Llama-3.2-1B/blob/main/config.json: hidden_size 2048, intermediate_size 8192);
# its 32 query heads of 64 sharing 8 KV heads become 16 heads of 128 here, one einsum per projection.
@checked
def layer_params(
    d_model: Annotated[int, Positive(integer=True, maximum=2**15)] = 2048,
    n_heads: Annotated[int, Positive(integer=True, maximum=1024)] = 16,
    d_ff: Annotated[int, Positive(integer=True, maximum=2**17)] = 8192,
    dtype: Annotated[str, OneOf(("fp32", "bf16"))] = "fp32",
    seed: Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**31 - 1)] = 0,
) -> dict:
    """Random weights of one Llama-style decoder layer (pre-norm attention with rotary embeddings, SwiGLU MLP):
    ``attn_norm``, ``wq``/``wk``/``wv`` ``[D, N, H]``, ``wo`` ``[N, H, D]``, ``mlp_norm``, ``w_gate``/``w_up``
    ``[D, F]``, ``w_down`` ``[F, D]``, with ``H = d_model / n_heads`` (which must be even). Scaled by
    ``1/sqrt(fan_in)``."""
    import jax.numpy as jnp

    if d_model % n_heads or (d_model // n_heads) % 2:
        raise ValueError(f"d_model must split into n_heads heads of an even size; got {d_model=} and {n_heads=}")
    dt = jnp.float32 if dtype == "fp32" else jnp.bfloat16
    h = d_model // n_heads
    shapes = {
        "wq": ((d_model, n_heads, h), d_model),
        "wk": ((d_model, n_heads, h), d_model),
        "wv": ((d_model, n_heads, h), d_model),
        "wo": ((n_heads, h, d_model), d_model),
        "w_gate": ((d_model, d_ff), d_model),
        "w_up": ((d_model, d_ff), d_model),
        "w_down": ((d_ff, d_model), d_ff),
    }
    rng = np.random.default_rng(seed)  # numpy's generator: a few times faster than jax.random on a CPU here
    p = {
        k: jnp.asarray(rng.standard_normal(s, dtype=np.float32) / np.float32(math.sqrt(f)), dt)
        for k, (s, f) in shapes.items()
    }
    p["attn_norm"] = jnp.ones((d_model,), dt)
    p["mlp_norm"] = jnp.ones((d_model,), dt)
    return p


def layer(x, params, cos, sin):
    """One Llama-style decoder layer on ``x[B, T, D]`` (causal attention, SwiGLU MLP), each part inside a
    :func:`jax.named_scope` (``attention/norm``, ``attention/qkv``, ``attention/core``, ``attention/out``,
    ``mlp/norm``, ``mlp/gate_up``, ``mlp/down``) so that the ops of the compiled program name the source line
    they came from (:func:`op_scopes`). ``cos, sin`` from :func:`tpu_notes.model.rotary_tables`."""
    import jax.numpy as jnp

    from . import model as M

    keys = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")
    if not isinstance(params, dict) or any(k not in params for k in keys):
        raise TypeError(f"params must be the dict layer_params returns, with keys {keys}; got {type(params).__name__}")
    if getattr(x, "ndim", None) != 3 or x.shape[-1] != params["wq"].shape[0]:
        raise ValueError(
            f"x must be an array [batch, seq, d_model={params['wq'].shape[0]}]; got shape {getattr(x, 'shape', None)}"
        )
    with jax.named_scope("attention"):
        with jax.named_scope("norm"):
            h = M.rms_norm(x, params["attn_norm"])
        with jax.named_scope("qkv"):
            q = M.apply_rotary(jnp.einsum("btd,dnh->btnh", h, params["wq"]), cos, sin)
            k = M.apply_rotary(jnp.einsum("btd,dnh->btnh", h, params["wk"]), cos, sin)
            v = jnp.einsum("btd,dnh->btnh", h, params["wv"])
        with jax.named_scope("core"):
            o = M.attention(q, k, v, causal=True)
        with jax.named_scope("out"):
            x = x + jnp.einsum("btnh,nhd->btd", o, params["wo"])
    with jax.named_scope("mlp"):
        with jax.named_scope("norm"):
            h = M.rms_norm(x, params["mlp_norm"])
        with jax.named_scope("gate_up"):
            g = jax.nn.silu(h @ params["w_gate"]) * (h @ params["w_up"])
        with jax.named_scope("down"):
            x = x + g @ params["w_down"]
    return x


# --------------------------------------------------------------------------------------------------- planes
def trace_planes(trace: Trace) -> dict[str, int]:
    """``{plane name: op events of the traced program on it}`` for every plane of the trace file. XProf's device
    tables (``hlo_stats``, ``roofline_model``) read planes named ``/device:TPU:N`` or ``/device:GPU:N``; the CPU
    backend writes its XLA ops as host-thread events on ``/host:CPU``, which is why those tables are empty on a
    CPU (Chapter 9)."""
    trace = _check_trace(trace)
    profile = jax.profiler.ProfileData.from_file(trace.xplane)
    out = {}
    for plane in profile.planes:
        n = 0
        for line in plane.lines:
            for e in line.events:
                stats = dict(e.stats)
                n += stats.get("hlo_module") == trace.module and "hlo_op" in stats
        out[plane.name] = n
    return out


def xprof_steps(trace: Trace) -> list[dict[str, Any]]:
    """XProf's step-time breakdown of the trace (its ``overview_page`` converter, the table the overview page
    plots): one dict per step with ``stepnum`` and milliseconds of ``deviceComputeTimeMs``,
    ``hostComputeTimeMs``, ``deviceCollectivesTimeMs``, ... . Filled on a CPU too (as host compute)."""
    import json

    trace = _check_trace(trace)
    raw_to_tool_data = _xprof()
    with _quiet_stderr():
        data, _ = raw_to_tool_data.xspace_to_tool_data([trace.xplane], "overview_page", {})
    tables = json.loads(data) if data else []
    tables = tables if isinstance(tables, list) else [tables]
    for table in tables:
        ids = [c["id"] for c in table.get("cols", [])]
        if "stepnum" in ids:
            return [{k: (cell or {}).get("v") for k, cell in zip(ids, r.get("c", []))} for r in table.get("rows", [])]
    return []


# --------------------------------------------------------------------------------------------------- device planes
# The layout XProf reads on accelerators (facts from the XPlane schema, tsl/profiler/utils/xplane_schema.cc in
# openxla/xla, and XProf's op-stats converters in openxla/xprof): one plane per device, named "/device:TPU:N" or
# "/device:GPU:N". A TPU plane holds a line "XLA Ops" whose events are named by the HLO instruction and a line
# "XLA Modules" whose events (named by the module, often with the program id in parentheses) enclose them in time.
# A raw GPU plane holds one line per CUDA stream with one event per kernel, named by the kernel; XLA attaches the
# HLO instruction and module as "hlo_op" and "hlo_module" stats, and XProf may add derived "XLA Ops" / "XLA
# Modules" lines to the same plane (then reading the streams as well would count every op twice).
_DEVICE_PLANE_RE = re.compile(r"^/device:(TPU|GPU):(\d+)$")
#: Lines of a device plane that hold no op executions of their own (XProf's derived and bookkeeping lines).
DERIVED_LINES = (
    "XLA Modules",
    "Steps",
    "TensorFlow Ops",
    "Framework Ops",
    "TensorFlow Name Scope",
    "Framework Name Scope",
    "Launch Stats",
    "Source code",
    "Async XLA Ops",
    "Host Offload Ops",
    "_counters_",
)
_PROGRAM_ID_RE = re.compile(r"\(\d+\)$")


@dataclass(frozen=True)
class DeviceEvent:
    """One execution of one HLO op on one accelerator, read from a device plane (:func:`device_events`)."""

    name: str  # HLO instruction name ("hlo_op" stat, else the event's name)
    module: str  # HLO module name ("hlo_module" stat, else the enclosing "XLA Modules" event; "" when none)
    platform: str  # "TPU" or "GPU"
    device: int  # N of the plane "/device:TPU:N" or "/device:GPU:N"
    line: str  # the line it was read from ("XLA Ops" or a GPU stream's line)
    start_ns: float  # start, nanoseconds on the trace's clock
    duration_s: float  # seconds it ran


@dataclass(frozen=True)
class DeviceOpRow:
    """One op of :func:`device_op_table`: its executions and seconds on each device, and their mean."""

    name: str  # HLO instruction name
    module: str  # HLO module name
    devices: tuple[int, ...]  # device ordinals (every device plane read, in order)
    counts: tuple[int, ...]  # executions on each device
    seconds: tuple[float, ...]  # total seconds on each device
    mean_s: float  # mean over devices of the total seconds (a device where it never ran counts 0)
    mean_count: float  # mean over devices of the executions


def _profile_of(xspace):
    """A :class:`jax.profiler.ProfileData` from a Trace, a .xplane.pb path, serialized XSpace bytes or a
    ProfileData."""
    P = jax.profiler.ProfileData
    if isinstance(xspace, P):
        return xspace
    if isinstance(xspace, Trace):
        return P.from_file(_check_trace(xspace).xplane)
    if isinstance(xspace, (bytes, bytearray)):
        try:
            return P.from_serialized_xspace(bytes(xspace))
        except Exception as e:  # noqa: BLE001 - the C++ parser's own error type
            raise ValueError(f"xspace: these bytes are not a serialized XSpace: {e}") from e
    if isinstance(xspace, (str, os.PathLike)):
        path = os.fspath(xspace)
        if not os.path.isfile(path):
            raise ValueError(f"xspace: no such .xplane.pb file: {path!r}")
        return P.from_file(path)
    raise TypeError(
        "xspace must be a profile.Trace, a .xplane.pb path, serialized XSpace bytes or a jax.profiler.ProfileData; "
        f"got {type(xspace).__name__}"
    )


def device_events(xspace, module: str | None = None) -> list[DeviceEvent]:
    """Every HLO op execution on the accelerator planes of an XSpace trace, read as XProf reads them.

    Planes named ``/device:TPU:N`` or ``/device:GPU:N`` are read, one device each (CPU traces have none: their
    ops are host-thread events, read by :func:`events`). On a plane with an ``XLA Ops`` line only that line is
    read; otherwise (a raw GPU plane) every line not in :data:`DERIVED_LINES` is read as a stream, keeping the
    events that carry an ``hlo_op`` stat (kernels XLA launched; a memcpy or a library's helper kernel has none).
    The op is the ``hlo_op`` stat, else the event's name; the module is the ``hlo_module`` stat, else the name
    of the ``XLA Modules`` event that contains the op in time (its trailing ``(program id)`` dropped).
    ``module``: keep only that module's ops. Sorted by device, start time and name."""
    profile = _profile_of(xspace)
    if module is not None and not isinstance(module, str):
        raise TypeError(f"module must be an HLO module name (str) or None; got {type(module).__name__}")
    out = []
    for plane in profile.planes:
        m = _DEVICE_PLANE_RE.match(plane.name)
        if not m:
            continue
        platform, device = m.group(1), int(m.group(2))
        lines = list(plane.lines)
        spans = sorted(
            (float(e.start_ns), float(e.end_ns), _PROGRAM_ID_RE.sub("", e.name))
            for ln in lines
            if ln.name == "XLA Modules"
            for e in ln.events
        )
        ops_lines = [ln for ln in lines if ln.name == "XLA Ops"]
        streams = not ops_lines
        for ln in ops_lines or [ln for ln in lines if ln.name not in DERIVED_LINES]:
            for e in ln.events:
                stats = dict(e.stats)
                if streams and "hlo_op" not in stats:
                    continue
                start, end = float(e.start_ns), float(e.end_ns)
                mod = stats.get("hlo_module")
                if mod is None:
                    mod = next((n for lo, hi, n in spans if lo <= start and end <= hi), "")
                mod = str(mod)
                if module is not None and mod != module:
                    continue
                out.append(
                    DeviceEvent(
                        name=str(stats.get("hlo_op", e.name)),
                        module=mod,
                        platform=platform,
                        device=device,
                        line=ln.name,
                        start_ns=start,
                        duration_s=float(e.duration_ns) * 1e-9,
                    )
                )
    return sorted(out, key=lambda e: (e.platform, e.device, e.start_ns, e.name))


def device_op_table(device_events_) -> list[DeviceOpRow]:
    """Per (module, op), executions and seconds on each device and their mean over devices, most time first,
    from :func:`device_events`. Each device plane is counted once: the mean divides by the number of devices,
    so N GPUs running an op once each report one execution, not N."""
    if isinstance(device_events_, (str, bytes)) or not hasattr(device_events_, "__iter__"):
        raise TypeError("device_events_ must be a list of DeviceEvent (from device_events)")
    evs = list(device_events_)
    if not all(isinstance(e, DeviceEvent) for e in evs):
        raise TypeError("device_events_ must be a list of DeviceEvent (from device_events)")
    devices = tuple(sorted({e.device for e in evs}))
    if len({e.platform for e in evs}) > 1:
        raise ValueError("device_events_: mixes TPU and GPU planes; read one platform at a time")
    acc: dict[tuple[str, str], dict[int, list[float]]] = {}
    for e in evs:
        per = acc.setdefault((e.module, e.name), {})
        c = per.setdefault(e.device, [0, 0.0])
        c[0] += 1
        c[1] += e.duration_s
    rows = []
    for (mod, name), per in acc.items():
        counts = tuple(int(per.get(d, [0, 0.0])[0]) for d in devices)
        secs = tuple(float(per.get(d, [0, 0.0])[1]) for d in devices)
        rows.append(
            DeviceOpRow(
                name=name,
                module=mod,
                devices=devices,
                counts=counts,
                seconds=secs,
                mean_s=sum(secs) / len(devices),
                mean_count=sum(counts) / len(devices),
            )
        )
    return sorted(rows, key=lambda r: (-r.mean_s, r.module, r.name))


def _stat_text(key: int, value) -> str:
    if isinstance(value, str):
        return f'stats {{ metadata_id: {key} str_value: "{value}" }}'
    return f"stats {{ metadata_id: {key} int64_value: {int(value)} }}"


@checked
def synthetic_device_trace(
    platform: Annotated[str, OneOf(("TPU", "GPU"))] = "TPU",
    devices: Annotated[int, Positive(integer=True, maximum=64)] = 2,
    streams: Annotated[int, Positive(integer=True, maximum=16)] = 2,
    ops: Sequence[tuple[str, float]] = (("fusion.1", 40e-6), ("convolution.2", 120e-6), ("all-reduce.3", 30e-6)),
    module: str = "jit_step",
    steps: Annotated[int, Positive(integer=True, maximum=MAX_STEPS)] = 2,
) -> bytes:
    """A SYNTHETIC serialized XSpace shaped as XProf's schema describes an accelerator trace (nothing ran):
    ``devices`` planes ``/device:<platform>:N``. TPU: an ``XLA Modules`` line with one event per step named
    ``<module>(1234)`` enclosing an ``XLA Ops`` line with ``ops`` ((name, seconds) pairs) run one after another,
    named by the op with no stats. GPU: ``streams`` stream lines per plane, each op's kernel on stream
    ``i % streams``, named like a kernel (``<op>_kernel``) with ``hlo_op`` and ``hlo_module`` stats, plus one
    memcpy event without them; device N's times are scaled by ``1 + N / 10``. For testing and demonstrating
    :func:`device_events` where no accelerator is at hand."""
    if isinstance(ops, (str, bytes)) or not hasattr(ops, "__iter__"):
        raise TypeError("ops must be a sequence of (op name, seconds) pairs")
    ops = list(ops)
    if not ops or not all(
        isinstance(o, tuple)
        and len(o) == 2
        and isinstance(o[0], str)
        and re.fullmatch(r"[A-Za-z_][\w.\-]*", o[0])
        and isinstance(o[1], (int, float))
        and not isinstance(o[1], bool)
        and 0 < o[1] < 10
        for o in ops
    ):
        raise ValueError("ops must be a non-empty sequence of (HLO op name, seconds in (0, 10)) pairs")
    if not isinstance(module, str) or not re.fullmatch(r"[A-Za-z_][\w.\-]{0,63}", module):
        raise ValueError(f"module must be an HLO module name (letters, digits, _ . -); got {module!r}")
    names = [n for n, _ in ops]
    meta = {n: i + 1 for i, n in enumerate(dict.fromkeys(names))}
    gap_ps = 1_000_000  # 1 µs between ops
    planes = []
    for d in range(devices):
        scale = 1 + d / 10
        emeta = dict(meta)
        kernel = {n: len(emeta) + i + 1 for i, n in enumerate(meta)}
        mod_id = len(emeta) + len(kernel) + 1
        memcpy_id = mod_id + 1
        lines: dict[str, list[str]] = {}
        t = 0
        for _ in range(steps):
            step_start = t
            for i, (n, s) in enumerate(ops):
                dur = round(s * scale * 1e12)
                if platform == "TPU":
                    lines.setdefault("XLA Ops", []).append(
                        f"events {{ metadata_id: {meta[n]} offset_ps: {t} duration_ps: {dur} }}"
                    )
                else:
                    lines.setdefault(f"Stream #{i % streams + 7}", []).append(
                        f"events {{ metadata_id: {kernel[n]} offset_ps: {t} duration_ps: {dur} "
                        f"{_stat_text(1, n)} {_stat_text(2, module)} }}"
                    )
                t += dur + gap_ps
            if platform == "TPU":
                lines.setdefault("XLA Modules", []).append(
                    f"events {{ metadata_id: {mod_id} offset_ps: {step_start} duration_ps: {t - step_start} }}"
                )
            else:
                lines.setdefault(f"Stream #{7}", []).append(
                    f"events {{ metadata_id: {memcpy_id} offset_ps: {t} duration_ps: {gap_ps // 2} }}"
                )
            t += 10 * gap_ps
        line_text = " ".join(
            f'lines {{ id: {k + 1} name: "{ln}" timestamp_ns: 1000 {" ".join(evs)} }}'
            for k, (ln, evs) in enumerate(sorted(lines.items()))
        )
        md = [f'event_metadata {{ key: {i} value {{ id: {i} name: "{n}" }} }}' for n, i in meta.items()]
        md += [f'event_metadata {{ key: {i} value {{ id: {i} name: "{n}_kernel" }} }}' for n, i in kernel.items()]
        md.append(f'event_metadata {{ key: {mod_id} value {{ id: {mod_id} name: "{module}(1234)" }} }}')
        md.append(f'event_metadata {{ key: {memcpy_id} value {{ id: {memcpy_id} name: "MemcpyD2H" }} }}')
        sm = [
            f'stat_metadata {{ key: {k} value {{ id: {k} name: "{n}" }} }}'
            for k, n in ((1, "hlo_op"), (2, "hlo_module"))
        ]
        planes.append(f'planes {{ id: {d + 1} name: "/device:{platform}:{d}" {line_text} {" ".join(md + sm)} }}')
    return jax.profiler.ProfileData.text_proto_to_serialized_xspace(" ".join(planes))
