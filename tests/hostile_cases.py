"""The registry that ``tests/test_hostile_input.py`` drives: one valid baseline call per public function.

HOW TO ADD A FUNCTION (every public function and method of a covered module needs an entry, or the completeness test
fails): add a line to ``CASES`` keyed by the function's dotted name, e.g.

    "tpu_notes.training.training_time": Case(model=Model("llama3-8b"), tokens=Num(1e12), chip=ChipArg("v5p"),
                                             n_chips=Int(256), mfu=Num(0.4, top=1.0)),

A function decorated with ``tpu_notes.units.checked`` declares the kind of each argument in its signature
(``n_chips: PositiveInt``); the test reads those kinds and tries their hostile values, so its entry may give plain
valid values (``Case(n_chips=256, chip="v5p")``), and a checked function whose required arguments all declare a kind
needs no entry at all (the test builds its call from the kinds' examples). Otherwise each keyword is one argument of a
valid call, wrapped in the kind of value it is; the kind decides which hostile
values the test tries in its place (one argument at a time, the others kept valid), and each must raise a ValueError
or TypeError whose message names that argument. Kinds: ``Int`` (a whole number > 0), ``Num`` (a finite number > 0),
``Choice`` (a string from a fixed set), ``ChipArg``, ``Model``, ``Flag`` (True/False), ``Text`` (a string the
function parses), ``Sizes`` (a tuple of whole numbers), ``Opt(kind)`` (``None`` is also valid), ``Raw(value,
hostile=[...])`` (hostile values listed by hand) and ``Fixed`` (not fuzzed: objects a hostile value makes no sense
for, such as a callable). ``big=True`` on ``Int`` asks that 10**12 be rejected too: use it for every size that a
simulation turns into per-step structures. A method gets ``Case(self_=lambda: <an instance>, ...)``; a class is its
constructor. ``run_baseline=False`` skips running the valid call itself (measurements that take seconds).
To cover a new module, add it to ``COVERED_MODULES``, or (as every chapter since the fifth does) write a file
``tests/hostile_cases_<topic>.py`` defining ``CASES``, ``COVERED`` and ``RESULT_RECORDS`` and name it in the
chapter's ``hostile_cases`` in the manifest ``tools/chapters.json``. A module of the analysis or measure layer that
is neither covered nor
listed in ``NOT_YET_COVERED`` (with a reason) fails the completeness test.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

NAN, INF = float("nan"), float("inf")


def _demo_table():
    from tpu_notes.table import Column, Table

    return Table(["chip", Column("step", "s")], [("v5e", 0.0123), ("v5p", 0.0045)], caption="Two chips")


class _Sentinel:
    def __repr__(self) -> str:
        return "<an unrelated object>"


ODD = _Sentinel()  # an object of no expected type


# --------------------------------------------------------------------------------------------------------------
# Kinds of argument
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Arg:
    """One argument of a baseline call: its valid value and the hostile values to try in its place."""

    value: Any  # a valid value (a zero-argument callable is called lazily)
    names: tuple = ()  # other words an error message may use for this argument
    lazy: bool = False  # value is a factory to call for each use

    def valid(self):
        return self.value() if self.lazy else self.value

    def hostile(self) -> list:
        return []

    def strategy(self):
        """A hypothesis strategy of generated hostile values (beyond the fixed list)."""
        from hypothesis import strategies as st

        return st.sampled_from(self.hostile()) if self.hostile() else st.nothing()


_NOT_A_NUMBER = ["8", None, [8], {"n": 8}, ODD, True, b"8", 3j]


@dataclass
class Int(Arg):
    """A whole number: > 0 (``zero=True``: >= 0); ``big=True``: 10**12 and more must be refused (simulations)."""

    zero: bool = False
    big: bool = False
    top: int | None = None  # a documented maximum; top + 1 must be refused

    def hostile(self) -> list:
        out = [INF, -INF, NAN, -1, 2.5, -(10**12)] + _NOT_A_NUMBER
        if not self.zero:
            out.append(0)
        if self.big:
            out += [10**12, 2**63]
        if self.top is not None:
            out.append(self.top + 1)
        return out

    def strategy(self):
        from hypothesis import strategies as st

        s = st.one_of(
            st.integers(max_value=-1 if self.zero else 0),
            st.floats(allow_nan=True).filter(
                lambda x: (
                    not (
                        math.isfinite(x)
                        and x.is_integer()
                        and (x > 0 or (self.zero and x == 0))
                        and (not self.big or x < 10**12)
                    )
                )
            ),
            st.text(max_size=4),
            st.none(),
            st.lists(st.integers(1, 9), max_size=2),
            st.booleans(),
        )
        if self.big:
            s = st.one_of(s, st.integers(min_value=10**12, max_value=2**70))
        return s


@dataclass
class Num(Arg):
    """A finite real number: > 0 (``zero=True``: >= 0); ``top``: an inclusive maximum (e.g. 1 for a fraction)."""

    zero: bool = False
    top: float | None = None

    def hostile(self) -> list:
        out = [INF, -INF, NAN, -1, -1e-300] + _NOT_A_NUMBER
        if not self.zero:
            out.append(0)
        if self.top is not None:
            out.append(self.top * 1.5)
        return out

    def strategy(self):
        from hypothesis import strategies as st

        neg = st.floats(max_value=-1e-300) if self.zero else st.floats(max_value=0.0)
        return st.one_of(
            neg,
            st.sampled_from([INF, -INF, NAN]),
            st.text(max_size=4),
            st.none(),
            st.lists(st.floats(0.1, 9), max_size=2),
            st.booleans(),
        )


@dataclass
class Choice(Arg):
    """A string from a fixed set (e.g. a dtype or a policy name)."""

    def hostile(self) -> list:
        return ["no-such-choice", "", 3, None, [self.valid()], True, ODD, b"bf16"]

    def strategy(self):
        from hypothesis import strategies as st

        # random text made of letters that spell no dtype, kind or policy name
        return st.one_of(st.text(alphabet="qzjxQZJX!?", min_size=1, max_size=6), st.integers(), st.none())


@dataclass
class ChipArg(Arg):
    """A chip name or Chip; ``tpu=True``: a GPU must be refused too."""

    tpu: bool = False

    def hostile(self) -> list:
        from tpu_notes.transformer import get_model

        out = ["no-such-chip", "", 3, None, [self.valid()], ODD, get_model("tiny-mha"), b"v5e"]
        if self.tpu:
            out.append("h100")
        return out

    def strategy(self):
        from hypothesis import strategies as st

        return st.one_of(st.text(alphabet="qzjxQZJX!?", min_size=1, max_size=6), st.integers(), st.floats())


@dataclass
class Model(Arg):
    """A TransformerConfig or a preset name."""

    def hostile(self) -> list:
        from tpu_notes.hardware import get_chip

        return ["no-such-model", "", 3, None, [self.valid()], ODD, get_chip("v5e")]


@dataclass
class Flag(Arg):
    """True or False only."""

    def hostile(self) -> list:
        return ["yes", "False", None, 2, 0.5, [True], ODD]


@dataclass
class Text(Arg):
    """A string the function parses; ``bad`` lists malformed strings to try."""

    bad: tuple = ()

    def hostile(self) -> list:
        return [3, None, ["x"], ODD, True] + list(self.bad)

    def strategy(self):
        from hypothesis import strategies as st

        return st.one_of(
            st.sampled_from(self.hostile()),
            st.text(alphabet="{}[],=<>T()0123456789'", max_size=12).filter(lambda t: t not in self.ok_generated),
        )

    ok_generated: tuple = ("", "{}")


@dataclass
class Sizes(Arg):
    """A tuple or list of whole numbers (a shape, a list of sizes)."""

    zero: bool = False
    big: bool = False

    def hostile(self) -> list:
        out = ["abc", "44", 4, None, ODD, [-1], (INF,), (NAN,), (2.5,), (True,), ("4",), {"x": 4}]
        if not self.zero:
            out.append((0,))
        if self.big:
            out += [(10**12,), (10**6, 10**6)]
        return out


@dataclass
class Opt(Arg):
    """``None`` or a value of the kind ``inner`` (``Opt(Choice("int8"))``); the valid value is ``inner``'s."""

    inner: Arg = None

    def __init__(self, inner: Arg, *, none_baseline: bool = False, names: tuple = ()):
        self.inner = inner
        self.value = None if none_baseline else inner.value
        self.lazy = False if none_baseline else inner.lazy
        self.names = names or inner.names

    def hostile(self) -> list:
        return [h for h in self.inner.hostile() if h is not None]

    def strategy(self):

        return self.inner.strategy().filter(lambda v: v is not None)


@dataclass
class Raw(Arg):
    """Hostile values listed by hand (``hostile=[...]``)."""

    bad: list = field(default_factory=list)

    def __init__(self, value, hostile=(), *, names: tuple = (), lazy: bool = False):
        self.value, self.bad, self.names, self.lazy = value, list(hostile), names, lazy

    def hostile(self) -> list:
        return [b() if callable(b) and getattr(b, "lazy_hostile", False) else b for b in self.bad]


@dataclass
class Fixed(Arg):
    """Not fuzzed (a callable, a JAX mesh, an array whose hostile forms are covered elsewhere)."""


@dataclass
class Sig(Arg):
    """A plain valid value whose hostile values come from the kind the function's signature declares for it
    (``n_chips: PositiveInt``): a ``Case`` wraps every keyword that is not an :class:`Arg` in one."""


def lazy(fn: Callable) -> Callable:
    """Mark a hostile value as a factory (built when the test runs, e.g. an object that needs JAX)."""
    fn.lazy_hostile = True
    return fn


@dataclass
class Case:
    """A valid call of one public function; each keyword is an :class:`Arg`."""

    args: dict
    self_: Callable | None = None  # builds the instance for a method
    run_baseline: bool = True  # False: the valid call is slow (a measurement); only hostile calls run
    positional: tuple = ()  # names passed positionally (positional-only or *args functions)

    def __init__(self, self_=None, run_baseline=True, positional=(), **args):
        args = {k: v if isinstance(v, Arg) else Sig(v) for k, v in args.items()}
        self.args, self.self_, self.run_baseline, self.positional = args, self_, run_baseline, positional


# --------------------------------------------------------------------------------------------------------------
# Helpers that build valid objects lazily (so importing this file does not start JAX)
# --------------------------------------------------------------------------------------------------------------
def _units_record():
    from tpu_notes.hardware import get_chip

    return get_chip("v5e")


def _units_record_type():
    return type(_units_record())


def _slice():
    from tpu_notes.topology import Slice

    return Slice("v5e", (4, 4))


def _plan():
    from tpu_notes.sharding import matmul_plan

    return matmul_plan("A[I_X, J]", "B[J, K_Y]", mesh={"X": 2, "Y": 4}, sizes={"I": 64, "J": 128, "K": 256})


def _arr():
    from tpu_notes.sharding import parse

    return parse("A[I_X, J_Y]")


def _cfg():
    from tpu_notes.transformer import get_model

    return get_model("tiny-gqa")


def _moe():
    from tpu_notes.transformer import get_model

    return get_model("tiny-moe")


def _jnp(shape, dtype="float32"):
    import jax.numpy as jnp

    return jnp.ones(shape, dtype)


def _mesh():
    import jax

    from tpu_notes.compat import make_mesh

    return make_mesh([8], ["x"], devices=jax.devices("cpu")[:8])


def _eight_devices():
    import jax

    return jax.devices()[:8]


def _measurements():
    from tpu_notes.bench import Measurement

    return (
        Measurement(
            kind="matmul", label="mm", flops=2e6, nbytes=1.2e5, seconds=1e-4, dtype="fp32", shape=(100, 100, 100)
        ),
        Measurement(kind="copy", label="cp", flops=2.5e7, nbytes=2e8, seconds=1e-2, dtype="fp32", shape=(25_000_000,)),
    )


def _roofline_result():
    from tpu_notes.bench import RooflineMeasurement, fit_roofline

    mm, cp = _measurements()
    return RooflineMeasurement(
        platform="cpu",
        device_kind="cpu",
        chip=None,
        dtype="fp32",
        matmuls=(mm,),
        copies=(cp,),
        fit=fit_roofline([mm, cp], min_copy_bytes=1e6),
        wall_s=1.0,
    )


def _coll_measurements():
    from tpu_notes.bench import CollectiveMeasurement

    return (
        CollectiveMeasurement(kind="all-gather", nbytes=1e5, n_devices=8, seconds=1e-4),
        CollectiveMeasurement(kind="all-gather", nbytes=1e6, n_devices=8, seconds=5e-4),
    )


def _hlo_module():
    from tpu_notes import hlo

    return hlo.parse_module(_hlo_text())


def _hlo_text():
    return (
        "HloModule m, num_partitions=8\n"
        "ENTRY %main (p: f32[8,16]) -> f32[64,16] {\n"
        "  %p = f32[8,16]{1,0} parameter(0)\n"
        "  ROOT %all-gather.1 = f32[64,16]{1,0} all-gather(f32[8,16]{1,0} %p), replica_groups={{0,1,2,3,4,5,6,7}},"
        " dimensions={0}\n}\n"
    )


def _oracle_case():
    from tpu_notes.hlo import matmul_cases

    return matmul_cases(["c1-rows"])[0]


def _oracle_row():
    from tpu_notes.hlo import CollectiveSig, MatmulRow

    sig = CollectiveSig("all-gather", "X", 4096, 32768)
    return MatmulRow(_oracle_case(), (sig,), (sig,), ("all-gather",))


def _compiled():
    import jax

    return jax.jit(lambda x: x * 2).lower(_jnp((4,))).compile()


def _found():
    from tpu_notes.hlo import collectives

    return collectives(_hlo_text())


def _params():
    from tpu_notes.model import init_params

    return init_params(_cfg(), 0)


def _tokens():
    from tpu_notes.model import random_tokens

    return random_tokens(_cfg(), 2, 8)


def _layer():
    return _params()["layers"][0]


def _rotary():
    from tpu_notes.model import rotary_tables

    return rotary_tables(8, 16)


def _attention_fn():
    from tpu_notes.model import attention

    return attention


def _moe_layer_mlp():
    from tpu_notes.model import init_params

    return init_params(_moe(), 0)["layers"][-1]["mlp"]


def _bench_rows():
    from tpu_notes.bench import BenchRow

    return (BenchRow(name="peak", unit="FLOP/s", measured=1e11, predicted=None, ratio=None),)


def _predictions():
    from tpu_notes.bench import Prediction

    return (Prediction(label="mm", measured_s=1e-3, fitted_s=1e-3, model_s=None, bound="compute"),)


def _host_transfers():
    from tpu_notes.transfer import HostTransfer

    return (HostTransfer(nbytes=2**20, seconds=1e-4, platform="cpu"),)


_CHIP_KW = dict(
    name="test",
    kind="tpu",
    long_name="Test TPU",
    bf16_flops=1e14,
    int8_flops=None,
    fp8_flops=None,
    hbm_bytes=16e9,
    hbm_bw=8e11,
)
NOT_A_MESH = [{"X": 0}, {"X": -2}, {"X": 2.5}, {"X": True}, {3: 2}, {}, "X", [("X", 2)], None, {"X": INF}]
NOT_A_SIZES = [
    {"I": 0, "J": 128},
    {"I": -64, "J": 128},
    {"I": 2.5, "J": 128},
    {"I": "64", "J": 128},
    {"I": INF, "J": 128},
    {"I": True, "J": 128},
    "IJ",
    None,
    ODD,
]


# --------------------------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------------------------
def _explorer_controls():
    from tpu_notes.plots.interactive import control

    return [control("a", (1, 2))]


def _explorer_cell(a):
    return {"data": [{"type": "scatter", "x": [a], "y": [a]}], "text": str(a)}


def _explorer_spec():
    from tpu_notes.plots.interactive import explorer_spec

    return explorer_spec("demo", _explorer_controls(), _explorer_cell)


T = "tpu_notes."
CASES: dict[str, Case] = {
    # ---- units
    T + "units.canonical_dtype": Case(name=Choice("bf16", names=("dtype",))),
    T + "units.dtype_bytes": Case(name=Choice("bf16", names=("dtype",))),
    T + "units.check_positive": Case(name=Fixed("size"), value=Num(3.0, names=("size",))),
    T + "units.check_bool": Case(name=Fixed("flag"), value=Flag(True, names=("flag",))),
    T + "units.check_sizes": Case(name=Fixed("shape"), value=Sizes((2, 3), names=("shape",))),
    T + "units.capped": Case(maximum=Int(100)),
    T + "units.argument_kinds": Case(fn=Raw(lambda n: n, [3, None, "f", int])),
    T + "units.checked": Case(fn=Raw(lambda n: n, [3, None, "f", int])),
    T + "units.check_fields": Case(obj=Raw(_units_record, [3, None, "x", lazy(_units_record_type)], lazy=True)),
    T + "units.array_bytes": Case(shape=Sizes((8, 4096), zero=True), dtype=Choice("bf16")),
    T + "units.check_choice": Case(
        name=Fixed("policy"), value=Choice("a", names=("policy",)), allowed=Fixed(("a", "b"))
    ),
    # fmt prints any real number, inf and nan included (an intensity with no bytes is inf): only non-numbers fail
    T + "table.Column": Case(
        name=Raw("step", ["", "  ", None, 3, ODD]),
        unit=Raw("s", [None, 3, ["s"]]),
        digits=Raw(3, [0, -1, 2.5, "3", None, True, 10**12]),
        scale=Raw("ms", ["GB", "", 3, ["ms"]]),
        wrap=Raw(False, [None, 1, "yes"]),
    ),
    T + "table.Table": Case(
        columns=Raw(
            lambda: ["chip", __import__("tpu_notes.table").table.Column("step", "s")],
            [[], "chip", None, 3, [3], ["a", "a"]],
            lazy=True,
        ),
        rows=Raw(
            [("v5e", 0.01)], [None, "ab", [("v5e",)], [("v5e", 0.01, 3)], [("v5e", float("inf"))], [("v5e", ODD)], [3]]
        ),
        caption=Raw("Two chips", [None, 3, ["x"]]),
        notes=Raw((), [[3], None, 3]),
        collapse=Raw(False, [None, 1, "yes"]),
    ),
    T + "table.Table.text": Case(self_=lambda: _demo_table()),
    T + "table.Table.html": Case(self_=lambda: _demo_table()),
    T + "table.Table.column": Case(self_=lambda: _demo_table(), name=Raw("step", ["nope", None, 3])),
    T + "units.fmt": Case(
        value=Raw(5.6e-4, ["8", None, [8], True, ODD, 3j]),
        unit=Raw("s", [3, None, ["s"]]),
        digits=Raw(3, [-1, 0, 2.5, "3", None, INF, True, 10**12]),
    ),
    # ---- hardware
    T + "hardware.Chip": Case(
        **{k: Fixed(v) for k, v in _CHIP_KW.items() if k not in ("name", "kind", "bf16_flops", "hbm_bw")},
        name=Raw("test", ["", 3, None]),
        kind=Raw("tpu", ["cpu", "", 3, None]),
        bf16_flops=Num(1e14),
        hbm_bw=Num(8e11),
        mxu_size=Opt(Int(128)),
        pod_shape=Raw((16, 16), [(16, 0), "16x16", (16,), (2.5, 2)]),
        ici_dims=Raw(2, [4, 0, "2"]),
        clock_hz=Opt(Num(1.5e9)),
    ),
    T + "hardware.Chip.peak_flops": Case(
        self_=lambda: __import__("tpu_notes.hardware").hardware.get_chip("v5e"), dtype=Choice("int8")
    ),
    T + "hardware.Chip.bandwidth": Case(
        self_=lambda: __import__("tpu_notes.hardware").hardware.get_chip("v5e"), kind=Choice("pcie")
    ),
    T + "hardware.Chip.critical_intensity": Case(
        self_=lambda: __import__("tpu_notes.hardware").hardware.get_chip("v5e"),
        dtype=Choice("bf16"),
        bandwidth=Raw("hbm", ["dram", "", -1, 0, INF, NAN, None, ["hbm"], True]),
    ),
    T + "hardware.get_chip": Case(name=ChipArg("v5e", names=("chip",))),
    T + "hardware.source": Case(chip=ChipArg("v5e"), field_name=Raw("hbm_bw", ["sources", "nope", 3, None])),
    T + "hardware.spec_table": Case(names=Raw(["v5e", "h100"], ["abc", "v5e", [3], ["nope"], 3, ODD])),
    T + "hardware.format_spec_table": Case(names=Raw(["v5e"], ["abc", [None], ["nope"], 3])),
    # ---- roofline
    T + "roofline.roofline": Case(
        flops=Num(1e12, zero=True), nbytes=Num(1e9, zero=True), peak_flops=Num(1.97e14), bandwidth=Num(8.2e11)
    ),
    T + "roofline.attainable_flops": Case(intensity=Num(100.0), peak_flops=Num(1.97e14), bandwidth=Num(8.2e11)),
    T + "roofline.matmul_flops": Case(B=Int(8), D=Int(4096), F=Int(16384)),
    T + "roofline.matmul_bytes": Case(
        B=Int(8), D=Int(4096), F=Int(16384), x_dtype=Choice("bf16"), w_dtype=Choice("int8"), out_dtype=Choice("bf16")
    ),
    T + "roofline.matmul_intensity": Case(
        B=Int(8), D=Int(4096), F=Int(16384), x_dtype=Choice("bf16"), w_dtype=Choice("int8"), out_dtype=Choice("bf16")
    ),
    T + "roofline.compute_time": Case(flops=Num(1e12, zero=True), chip=ChipArg("v5e"), dtype=Choice("int8")),
    T + "roofline.memory_time": Case(
        nbytes=Num(1e9, zero=True), chip=ChipArg("v5e"), bandwidth=Raw("hbm", ["dram", -1, 0, NAN, INF, None, True])
    ),
    T + "roofline.matmul_time": Case(
        B=Int(8),
        D=Int(4096),
        F=Int(16384),
        chip=ChipArg("v5e"),
        dtype=Choice("bf16"),
        w_dtype=Opt(Choice("int8")),
        out_dtype=Opt(Choice("bf16")),
    ),
    T + "roofline.critical_batch_size": Case(
        chip=ChipArg("v5e"), compute_dtype=Choice("bf16"), weight_dtype=Opt(Choice("int8"))
    ),
    T + "roofline.sharded_contraction_time": Case(
        B=Int(8),
        D=Int(4096),
        F=Int(16384),
        chip=ChipArg("v5e"),
        n_chips=Raw(2, [1, 0, -2, 2.5, INF, NAN, "2", None, True, 3]),
        dtype=Choice("bf16"),
        link=Choice("ici_oneway"),
    ),
    T + "roofline.smallest_compute_bound_batch": Case(
        D=Int(4096),
        F=Int(4096),
        chip=ChipArg("v5e"),
        dtype=Choice("bf16"),
        limit=Int(2**20),
        w_dtype=Opt(Choice("int8"), none_baseline=True),
    ),
    T + "roofline.crossover_batch": Case(
        D=Int(4096),
        F=Int(16384),
        chip=ChipArg("v5e"),
        dtype=Choice("int8"),
        bandwidth=Raw("hbm", ["dram", -1, 0, NAN, INF, None, True]),
    ),
    T + "roofline.per_example_weights_time": Case(
        B=Int(256), D=Int(4096), F=Int(16384), chip=ChipArg("v5e"), dtype=Choice("int8")
    ),
    T + "roofline.tiled_matmul_intensity": Case(bm=Int(128), bn=Int(256), dtype=Choice("bf16")),
    T + "roofline.elementwise_add_time": Case(N=Int(2**20), chip=ChipArg("v5e"), dtype=Choice("bf16")),
    # ---- collectives
    T + "collectives.gather_hops": Case(axis_size=Int(8), wraparound=Flag(True), bidirectional=Flag(True)),
    **{
        T + f"collectives.{k}_time": Case(
            nbytes=Num(1e8, zero=True),
            axis_size=Raw(
                8,
                [0, -1, 2.5, INF, NAN, "8", None, True, [], [0], ["8"], (8, INF), ODD],
                names=("axis_size[0]", "axis_size[1]"),
            ),
            link_bw_bidi=Num(9e10),
            n_axes=Int(1),
            wraparound=Raw(True, ["yes", None, 2, [True, True], ("yes",), ODD]),
            hop_latency=Num(1e-6, zero=True),
            bidirectional=Flag(True),
        )
        for k in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all")
    },
    T + "collectives.collective_time": Case(
        kind=Choice("all-gather"),
        nbytes=Num(1e8, zero=True),
        axis_size=Raw(8, [0, -1, 2.5, INF, NAN, "8", None, True, [], [0]]),
        link_bw_bidi=Num(9e10),
        wraparound=Raw(True, ["yes", None, 2, [True, True], ODD]),
        hop_latency=Num(1e-6, zero=True),
        n_axes=Int(1),
        bidirectional=Flag(True),
    ),
    T + "collectives.canonical_kind": Case(kind=Choice("AllGather")),
    T + "collectives.latency_bound_bytes": Case(
        axis_size=Int(8), link_bw_bidi=Num(9e10), hop_latency=Num(1e-6), wraparound=Flag(True), per=Choice("hop")
    ),
    T + "collectives.ring_all_gather_schedule": Case(axis_size=Int(8, big=True, top=256), wraparound=Flag(True)),
    T + "collectives.ring_link_bytes": Case(
        kind=Choice("all-to-all"), axis_size=Int(8, big=True), nbytes=Num(1e8, zero=True), bidirectional=Flag(True)
    ),
    T + "collectives.ring_reduce_scatter_schedule": Case(axis_size=Int(8, big=True)),
    T + "collectives.ring_all_to_all_schedule": Case(axis_size=Int(8, big=True)),
    T + "bench.run_collective": Case(
        kind=Choice("all-gather"),
        x=Raw(lambda: _jnp((16, 8)), ["abc", None, 3], lazy=True),
        mesh=Raw(_mesh, [None, "x", {"x": 8}], lazy=True),
        axis=Raw("x", ["y", None, 3]),
        dim=Raw(0, [-1, 2, 2.5, "0", None, True]),
    ),
    T + "bench.ring_all_gather": Case(
        x=Raw(lambda: _jnp((16, 8)), ["abc", None, 3, lazy(lambda: _jnp((3, 2)))], lazy=True),
        mesh=Raw(_mesh, [None, "x", {"x": 8}], lazy=True),
        axis=Raw("x", ["y", None, 3]),
    ),
    # ---- topology
    T + "topology.Slice": Case(
        chip=ChipArg("v5e", tpu=True),
        shape=Raw(
            (4, 4), [(4,), (4, 0), (4, 2.5), (4, INF), (4, NAN), "4x4", 16, (32, 32), (10**12, 1), (True, 4), [None, 4]]
        ),
    ),
    T + "topology.Slice.total_flops": Case(self_=_slice, dtype=Choice("int8")),
    T + "topology.Slice.axis_hops": Case(
        self_=_slice,
        a=Raw((0, 0), [(0,), (4, 0), (-1, 0), (0.5, 0), "00", None, (True, 0)]),
        b=Raw((3, 3), [(3,), (3, 4), None, "33"]),
    ),
    T + "topology.Slice.hops": Case(
        self_=_slice, a=Raw((0, 0), [(0,), (4, 0), None, "00"]), b=Raw((3, 3), [(3, 9), None])
    ),
    T + "topology.Slice.coords": Case(self_=_slice),
    T + "topology.Slice.hop_grid": Case(self_=_slice, origin=Raw((1, 1), [(1,), (9, 9), "11", (0.5, 1)])),
    T + "topology.Slice.transfer_time": Case(
        self_=_slice,
        nbytes=Num(1e8, zero=True),
        src=Raw((0, 0), [0, (0,), (5, 0), None, "00"]),
        dst=Raw((3, 3), [3, (3, 5), None]),
        ports=Opt(Int(2, top=4)),
        hop_latency=Opt(Num(1e-6, zero=True)),
    ),
    T + "topology.Slice.check_schedulable": Case(self_=_slice, argument="slice"),
    T + "topology.Slice.place": Case(
        self_=_slice,
        degrees=Raw({"tensor": 4, "fsdp": 4}, [None, {}, "tensor", {"tensor": 0}, {"tensor": True}, {"fsdp": 3}]),
    ),
    T + "topology.Slice.group_collective": Case(
        self_=_slice,
        op=Choice("all-gather"),
        nbytes=1e8,
        parts=Raw(lambda: _slice().place({"tensor": 4, "fsdp": 4})["tensor"], [], lazy=True),
        group=4,
        span=4,
        hop_latency=1e-6,
        phases=Choice("max"),
    ),
    T + "topology.Slice.stage_send_time": Case(
        self_=_slice,
        nbytes=1e8,
        parts=Raw(lambda: _slice().place({"pipeline": 16})["pipeline"], [], lazy=True),
        hop_latency=1e-6,
    ),
    T + "topology.Slice.link": Case(
        self_=_slice, parts=Raw(lambda: _slice().place({"tensor": 16})["tensor"], [], lazy=True)
    ),
    T + "topology.largest_slice_chips": Case(chip=ChipArg("v5p", tpu=True)),
    T + "topology.largest_shape": Case(chip=ChipArg("v5p", tpu=True)),
    T + "topology.schedulable_shapes": Case(chip=ChipArg("v5e", tpu=True)),
    T + "topology.Slice.collective_time": Case(
        self_=_slice,
        kind=Choice("all_gather"),
        nbytes=Num(1e8, zero=True),
        axes=Raw("x", ["w", 5, -1, (), ("x", "x"), True, 2.5]),
        hop_latency=Opt(Num(1e-6, zero=True)),
    ),
    T + "topology.Slice.axis_size": Case(self_=_slice, axis=Raw("x", ["w", "", None, ("x",), 5, -1, True, ODD])),
    T + "topology.Slice.bandwidth": Case(self_=_slice, axis=Raw("y", ["w", "", None, ("y",), 5, ODD])),
    T + "topology.Slice.latency": Case(self_=_slice, axis=Raw(1, ["w", None, [1], 5, -1, 2.5, ODD])),
    T + "topology.hop_grid": Case(
        shape=Sizes((4, 4), big=True),
        wraparound=Raw((True, False), [(True,), ("yes", True), None, 1, "TT"]),
        origin=Raw((1, 1), [(9, 9), (1,), "11", (0.5, 1), 3]),
    ),
    T + "topology.transfer_time": Case(
        nbytes=Num(1e8, zero=True),
        src=Raw((0, 0), [(0,), None, "00"]),
        dst=Raw((3, 3), [(9, 9), None]),
        topology=Raw(_slice, ["v5e", None, ODD], lazy=True),
        ports=Opt(Int(2, top=4)),
        hop_latency=Opt(Num(1e-6, zero=True)),
    ),
    T + "topology.host_transfer_time": Case(
        nbytes=Num(1e8, zero=True), chip=ChipArg("v5e"), n_chips=Int(4), latency=Num(0.0, zero=True)
    ),
    T + "topology.dcn_transfer_time": Case(
        nbytes=Num(1e8, zero=True), chip=ChipArg("v5e"), n_chips=Int(4), latency=Num(0.0, zero=True)
    ),
    T + "topology.pod": Case(chip=ChipArg("v5e", tpu=True)),
    T + "topology.parse_slice": Case(
        text=Raw(
            "v5p:4x4x4",
            ["", "  ", "v5p:4xx4", "v5p:4x4.5", "v5p:²", "nosuch:4x4", "nosuch", None, 3, ODD],
            names=("slice", "chip", "shape"),
        )
    ),
    T + "topology.bandwidth_ladder": Case(chip=ChipArg("v5e", tpu=True)),
    # ---- systolic
    T + "systolic.tile_schedule": Case(n_tiles=Int(4, big=True), rows=Int(8), array_size=Int(4)),
    T + "systolic.predicted_cycles": Case(M=Int(8), K=Int(128), N=Int(128), array_size=Int(128)),
    T + "systolic.padded_dim": Case(n=Int(300), mxu_size=Int(128)),
    T + "systolic.padding_efficiency": Case(K=Int(300), N=Int(300), mxu_size=Int(128)),
    T + "systolic.simulate_matmul": Case(
        a=Raw(
            lambda: [[1.0, 2.0], [3.0, 4.0]],
            [
                "abc",
                None,
                [[1, 2, 3]],
                [[NAN, 1.0], [1.0, 1.0]],
                3,
                lazy(lambda: __import__("numpy").ones((10**6, 4))),
                [["a", "b"], ["c", "d"]],
            ],
            lazy=True,
        ),
        b=Raw(lambda: [[1.0], [1.0]], ["abc", None, [[1.0]], [[INF], [1.0]]], lazy=True),
        array_size=Int(2, big=True),
        record_cycles=Int(0, zero=True, big=True),
    ),
    T + "systolic.mxu_flops_per_cycle": Case(mxu_size=Int(128), rows=Int(8)),
    T + "systolic.derived_peak_flops": Case(chip=ChipArg("v5e")),
    T + "systolic.vpu_flops": Case(chip=ChipArg("v5p"), sublanes=Int(8), lanes=Int(128), alus_per_lane=Opt(Int(4))),
    T + "systolic.vreg_file_bytes": Case(chip=ChipArg("v5p")),
    # ---- transfer
    T + "transfer.measure_host_to_device": Case(
        run_baseline=False,
        sizes=Raw((2**20,), [(), "abc", (0,), (-4,), (3,), (INF,), (10**15,), None, 4]),
        repeats=Int(3, big=True),
        device=Raw(None, ["cpu", 3]),
    ),
    T + "transfer.predicted_host_to_device": Case(nbytes=Num(1e9, zero=True), chip=ChipArg("v5e")),
    T + "transfer.report": Case(measured=Raw(_host_transfers, ["abc", None, [3]], lazy=True), chip=ChipArg("v5e")),
    # ---- sharding
    T + "sharding.Dim": Case(
        name=Raw("I", ["", 3, None, "I J", "1x"]), axes=Raw(("X",), ["X", ("X", "X"), (3,), None, ("",)])
    ),
    T + "sharding.ShardedArray": Case(
        name=Raw("A", ["", 3, None]),
        dims=Raw(lambda: _arr().dims, [(), "IJ", None, ("I",), lazy(lambda: _arr().dims * 2)], lazy=True),
        unreduced=Raw((), ["X", ("X",), (3,), None]),
    ),
    T + "sharding.ShardedArray.dim": Case(self_=_arr, name=Raw("I", ["K", 3, None])),
    T + "sharding.ShardedArray.with_dims": Case(self_=_arr, J=Raw(("Z",), ["X", None, 3, ("Z", "Z"), ("X",), ("",)])),
    T + "sharding.ShardedArray.renamed": Case(self_=_arr, name=Raw("B", ["", 3, None])),
    T + "sharding.ShardedArray.validate": Case(
        self_=_arr,
        mesh=Raw({"X": 2, "Y": 4}, NOT_A_MESH + [{"X": 2}]),
        sizes=Raw({"I": 64, "J": 128}, [v for v in NOT_A_SIZES if v is not None] + [{"I": 63, "J": 128}]),
    ),
    T + "sharding.ShardedArray.shard_shape": Case(
        self_=_arr, sizes=Raw({"I": 64, "J": 128}, NOT_A_SIZES), mesh=Raw({"X": 2, "Y": 4}, NOT_A_MESH)
    ),
    T + "sharding.ShardedArray.bytes_per_device": Case(
        self_=_arr,
        sizes=Raw({"I": 64, "J": 128}, NOT_A_SIZES),
        mesh=Raw({"X": 2, "Y": 4}, NOT_A_MESH),
        dtype=Choice("bf16"),
    ),
    T + "sharding.ShardedArray.total_bytes": Case(
        self_=_arr,
        sizes=Raw({"I": 64, "J": 128}, NOT_A_SIZES),
        mesh=Raw({"X": 2, "Y": 4}, NOT_A_MESH),
        dtype=Choice("bf16"),
    ),
    T + "sharding.ShardedArray.replication": Case(self_=_arr, mesh=Raw({"X": 2, "Y": 4, "Z": 2}, NOT_A_MESH)),
    T + "sharding.ShardedArray.partition_spec": Case(self_=_arr),
    T + "sharding.parse": Case(text=Text("A[I_X, J]", bad=("A[I_X, J_X]", "A[", "A[I, I]", "[I]", "A[I_x1]"))),
    T + "sharding.MatmulPlan.describe": Case(self_=_plan),
    T + "sharding.MatmulPlan.times": Case(
        self_=_plan, chip_or_slice=ChipArg("v5e"), hop_latency=Opt(Num(1e-6, zero=True))
    ),
    T + "sharding.MatmulPlan.total_time": Case(
        self_=_plan, chip_or_slice=ChipArg("v5e"), hop_latency=Opt(Num(1e-6, zero=True))
    ),
    T + "sharding.matmul_plan": Case(
        lhs=Text("A[I_X, J]", bad=("A[I_X, J_X]", "A[")),
        rhs=Text("B[J, K_Y]", bad=("B[K, L]", "B[J_Z, K]")),
        out=Opt(Text("C[I_X, K_Y]", bad=("C[I, Q]",))),
        mesh=Raw({"X": 2, "Y": 4}, NOT_A_MESH),
        sizes=Raw(
            {"I": 64, "J": 128, "K": 256},
            [
                {"I": 64, "J": 128},
                {"I": 0, "J": 128, "K": 256},
                {"I": 63, "J": 128, "K": 256},
                {"I": INF, "J": 128, "K": 256},
                {"I": "64", "J": 128, "K": 256},
                (64, 128, 256),
                None,
            ],
        ),
        dtype=Choice("bf16"),
    ),
    # ---- transformer
    T + "transformer.einsum_flops": Case(
        spec=Text("bd,df->bf", bad=("bd,df", "b1,df->bf", "bd,df->bq", "")), b=Int(8), d=Int(64), f=Int(256)
    ),
    T + "transformer.TransformerConfig": Case(
        d_model=Int(64),
        d_ff=Int(256),
        n_layers=Int(2),
        n_heads=Int(4),
        n_kv_heads=Raw(2, [3, 0, -1, INF, "2", None, 2.5, True, 8]),
        d_head=Int(16),
        vocab=Int(512),
        gated_mlp=Flag(True),
        tied_embeddings=Flag(False),
        name=Raw("t", [3, None, ["t"]]),
    ),
    **{
        T + f"transformer.TransformerConfig.{m}": Case(self_=_cfg)
        for m in (
            "attention_params_per_layer",
            "norm_params_per_layer",
            "dense_mlp_params",
            "expert_params",
            "param_count",
            "active_param_count",
            "matmul_params_per_token",
        )
    },
    T + "transformer.TransformerConfig.moe_mlp_params": Case(self_=_moe, active=Flag(True)),
    T + "transformer.TransformerConfig.param_breakdown": Case(self_=_cfg, active=Flag(True)),
    T + "transformer.TransformerConfig.attention_flops": Case(
        self_=_cfg, seq_len=Int(128), training=Flag(False), causal=Flag(True)
    ),
    T + "transformer.TransformerConfig.flops_per_token": Case(
        self_=_cfg, seq_len=Int(128), training=Flag(False), causal=Flag(True), include_attention=Flag(True)
    ),
    T + "transformer.TransformerConfig.flops_breakdown": Case(
        self_=_cfg, seq_len=Int(128), training=Flag(False), causal=Flag(True), per_layer=Flag(False)
    ),
    T + "transformer.TransformerConfig.attention_fraction": Case(self_=_cfg, seq_len=Int(128), causal=Flag(True)),
    T + "transformer.TransformerConfig.attention_intensity": Case(
        self_=_cfg, q_len=Int(1), kv_len=Int(128), dtype=Choice("bf16")
    ),
    T + "transformer.TransformerConfig.critical_batch": Case(
        self_=_moe, chip=ChipArg("v5e"), compute_dtype=Choice("bf16"), weight_dtype=Opt(Choice("int8"))
    ),
    T + "transformer.TransformerConfig.kv_bytes_per_token": Case(self_=_cfg, dtype=Choice("bf16")),
    T + "transformer.TransformerConfig.kv_cache_bytes": Case(
        self_=_cfg, batch=Int(8), seq_len=Int(128), dtype=Choice("bf16")
    ),
    T + "transformer.TransformerConfig.saved_activations": Case(self_=_cfg, policy=Choice("none")),
    T + "transformer.TransformerConfig.checkpoints_per_layer": Case(self_=_cfg, policy=Choice("none")),
    T + "transformer.TransformerConfig.offloaded_activations": Case(self_=_cfg, policy=Choice("offload_layer_input")),
    T + "transformer.TransformerConfig.recomputed_matmul_params": Case(self_=_cfg, policy=Choice("save_qkv_proj")),
    T + "transformer.TransformerConfig.checkpoint_bytes": Case(
        self_=_cfg, batch_tokens=Int(4096), policy=Choice("none"), dtype=Choice("bf16")
    ),
    T + "transformer.TransformerConfig.recompute_flops": Case(
        self_=_cfg, seq_len=Int(128), policy=Choice("none"), causal=Flag(True)
    ),
    T + "transformer.TransformerConfig.layer_shapes": Case(self_=_moe, moe=Opt(Flag(True))),
    T + "transformer.TransformerConfig.with_": Case(self_=_cfg, d_model=Int(64), n_kv_heads=Raw(2, [3, 0, "2"])),
    T + "transformer.get_model": Case(name=Model("llama3-8b", names=("model",))),
    T + "transformer.as_config": Case(model=Model("llama3-8b")),
    T + "transformer.moe_capacity": Case(n_tokens=512, n_experts=16, capacity_factor=1.25, experts_per_token=2),
    # ---- hlo
    T + "hlo.parse_replica_groups": Case(
        text=Opt(
            Text(
                "{{0,1},{2,3}}",
                bad=(
                    "{{0,1},{2,",
                    "{{0,1}",
                    "{0,1},{2,3}}",
                    "{{0,a}}",
                    "[2,4]<=[9]",
                    "[2,4]<=",
                    "mesh['x'=2] {'y'}",
                    "mesh['x'=2",
                    "{{0,1},{1,2}}",
                    "{{-1}}",
                ),
            )
        ),
        num_devices=Opt(Int(4), none_baseline=True),
    ),
    T + "hlo.collectives": Case(compiled_or_hlo_text=Raw(_hlo_text(), [3, None, ["x"], ODD])),
    T + "hlo.parse_module": Case(compiled_or_hlo_text=Raw(_hlo_text(), [3, None, ["x"], ODD])),
    T + "hlo.single_op_module": Case(
        module=Raw(_hlo_text(), [3, None, ["x"], ODD, "no module"]), name=Raw("all-gather.1", ["nope", None, 3])
    ),
    T + "hlo.HloInstruction.attribute": Case(
        self_=lambda: _hlo_module().instructions[-1], key=Raw("replica_groups", [None, 3, ""])
    ),
    T + "hlo.HloModule.computation": Case(self_=_hlo_module, name=Raw("main", ["nope", None, 3])),
    T + "hlo.HloModule.callees": Case(
        self_=_hlo_module, instruction=Raw(lambda: _hlo_module().instructions[-1], [None, "x", 3], lazy=True)
    ),
    T + "hlo.HloModule.called_computations": Case(
        self_=_hlo_module, instruction=Raw(lambda: _hlo_module().instructions[-1], [None, "x", 3], lazy=True)
    ),
    T + "hlo.axis_groups": Case(
        mesh=Raw({"X": 2, "Y": 4}, NOT_A_MESH), axes=Raw(("X",), ["Z", ("Z",), "X", None, (3,), ("X", "X")])
    ),
    T + "hlo.mesh_axes": Case(
        groups=Raw(((0, 1), (2, 3)), ["ab", None, 3, ((0, "a"),), ((0, -1),)]), mesh=Raw({"X": 2, "Y": 2}, NOT_A_MESH)
    ),
    T + "hlo.normalize_cpu_collectives": Case(
        found=Raw(_found, ["abc", None, 3, [3]], lazy=True), hlo_text=Raw(_hlo_text(), [3, ["x"], ODD])
    ),
    T + "hlo.cost": Case(compiled=Raw(_compiled, ["abc", None, 3], lazy=True), keys=Raw(("flops",), ["flops", [3], 3])),
    T + "hlo.MatmulCase": Case(
        id=Raw("x", ["", 3, None]),
        mesh=Raw((("X", 8),), [(("X", 0),), {"X": 8}, "X8", (("X", 2.5),), None]),
        matmuls=Raw(("A[I_X, J] · B[J, K] -> C[I_X, K]",), ["A", (), ("A[I] B[J]",), None]),
        sizes=Raw((("I", 64), ("J", 128), ("K", 256)), [(("I", 0),), {"I": 64}, None]),
    ),
    T + "hlo.predict": Case(case=Raw(_oracle_case, ["c1-rows", None, 3], lazy=True), dtype=Choice("fp32")),
    T + "hlo.compile_case": Case(
        case=Raw(_oracle_case, ["c1-rows", None, 3], lazy=True),
        devices=Raw(None, ["cpu", 3, [1, 2]]),
        dtype=Choice("fp32"),
        return_inputs=Flag(False),
    ),
    T + "hlo.signatures_from_xla": Case(
        found=Raw(_found, ["abc", None, 3, [3]], lazy=True), mesh=Raw({"X": 8}, NOT_A_MESH)
    ),
    T + "hlo.signatures_from_plan": Case(steps=Raw(lambda: _plan().collectives, ["abc", None, 3, [3]], lazy=True)),
    T + "hlo.run_matmul_case": Case(
        case=Raw(_oracle_case, ["c1-rows", None, 3], lazy=True),
        devices=Raw(None, ["cpu", 3, [1, 2]]),
        dtype=Choice("fp32"),
    ),
    T + "hlo.matmul_cases": Case(ids=Raw(["c1-rows"], ["c1-rows", ["nope"], [3], 3])),
    T + "hlo.format_matmul_table": Case(rows=Raw(lambda: [_oracle_row()], ["abc", None, 3, [3]], lazy=True)),
    # ---- model (JAX)
    T + "model.init_params": Case(
        config=Model("tiny-gqa"),
        key=Raw(0, [-1, 2.5, "0", None, INF, True]),
        dtype=Raw("float32", ["float99", 3, None]),
    ),
    T + "model.param_groups": Case(params=Raw(_params, ["abc", None, 3, {"weird": 1}], lazy=True)),
    T + "model.count_params": Case(params=Raw(_params, ["abc", None, 3], lazy=True)),
    T + "model.rms_norm": Case(
        x=Raw(lambda: _jnp((2, 16)), ["abc", None, 3], lazy=True),
        gain=Raw(lambda: _jnp((16,)), ["abc", None, lazy(lambda: _jnp((3,)))], lazy=True),
        eps=Num(1e-6),
    ),
    T + "model.rotary_tables": Case(
        seq_len=Int(8, big=True),
        d_head=Raw(16, [15, 0, -2, INF, NAN, "16", None, True, 2.5, 10**12]),
        base=Num(10_000.0),
        offset=Int(0, zero=True, big=True),
    ),
    T + "model.apply_rotary": Case(
        x=Raw(lambda: _jnp((2, 8, 4, 16)), ["abc", None, lazy(lambda: _jnp((2, 8)))], lazy=True),
        cos=Raw(lambda: _rotary()[0], ["abc", None, lazy(lambda: _jnp((3, 8)))], lazy=True),
        sin=Raw(lambda: _rotary()[1], ["abc", None], lazy=True),
    ),
    T + "model.attention": Case(
        q=Raw(lambda: _jnp((2, 8, 4, 16)), ["abc", None, lazy(lambda: _jnp((2, 8, 3, 16)))], lazy=True),
        k=Raw(lambda: _jnp((2, 8, 2, 16)), ["abc", None, lazy(lambda: _jnp((2, 8, 3, 16)))], lazy=True),
        v=Raw(lambda: _jnp((2, 8, 2, 16)), ["abc", None, lazy(lambda: _jnp((2, 7, 2, 16)))], lazy=True),
        causal=Flag(True),
    ),
    T + "model.flash_attention": Case(
        q=Raw(lambda: _jnp((2, 8, 4, 16)), ["abc", None], lazy=True),
        k=Raw(lambda: _jnp((2, 8, 2, 16)), ["abc", None], lazy=True),
        v=Raw(lambda: _jnp((2, 8, 2, 16)), ["abc", None], lazy=True),
        causal=Flag(True),
        block_size=Raw(4, [3, 0, -4, 2.5, "4", None, INF, True]),
    ),
    T + "model.moe_capacity": Case(n_tokens=Int(64), config=Model("tiny-moe"), capacity_factor=Num(1.0)),
    T + "model.moe_mlp": Case(
        x=Raw(lambda: _jnp((8, 64)), ["abc", None, lazy(lambda: _jnp((8, 63)))], lazy=True),
        p=Raw(_moe_layer_mlp, ["abc", None, {}], lazy=True),
        config=Model("tiny-moe"),
        capacity_factor=Num(1.0),
    ),
    T + "model.block": Case(
        x=Raw(lambda: _jnp((2, 8, 128)), ["abc", None, lazy(lambda: _jnp((2, 8, 64)))], lazy=True),
        layer=Raw(_layer, ["abc", None, {}], lazy=True),
        config=Model("tiny-gqa"),
        cos=Raw(lambda: _rotary()[0], ["abc", None], lazy=True),
        sin=Raw(lambda: _rotary()[1], ["abc", None], lazy=True),
        capacity_factor=Num(1.0, top=1e6),
        attention_fn=Raw(_attention_fn, [3, "attention", None], lazy=True),
    ),
    T + "model.forward": Case(
        params=Raw(_params, ["abc", None, {}], lazy=True),
        tokens=Raw(
            _tokens,
            ["abc", None, lazy(lambda: _jnp((2, 8, 1), "int32")), lazy(lambda: _jnp((2, 8), "float32"))],
            lazy=True,
        ),
        config=Model("tiny-gqa"),
        capacity_factor=Num(1.0, top=1e6),
        attention_fn=Raw(_attention_fn, [3, "attention", None], lazy=True),
    ),
    T + "model.loss": Case(
        params=Raw(_params, ["abc", None], lazy=True),
        tokens=Raw(_tokens, ["abc", None, lazy(lambda: _jnp((2, 1), "int32"))], lazy=True),
        config=Model("tiny-gqa"),
        capacity_factor=Num(1.0),
    ),
    T + "model.grads": Case(
        params=Raw(_params, ["abc", None], lazy=True),
        tokens=Raw(_tokens, ["abc", None], lazy=True),
        config=Model("tiny-gqa"),
        capacity_factor=Num(1.0),
    ),
    T + "model.train_step": Case(
        params=Raw(_params, ["abc", None], lazy=True),
        tokens=Raw(_tokens, ["abc", None], lazy=True),
        config=Model("tiny-gqa"),
        lr=Num(1e-2),
        capacity_factor=Num(1.0),
    ),
    T + "model.random_tokens": Case(
        config=Model("tiny-gqa"), batch=Int(2, big=True), seq_len=Int(8, big=True), seed=Int(0, zero=True)
    ),
    T + "model.xla_cost": Case(
        fn=Raw(lambda x: x * 2, [3, None, "f"]),
        positional=("fn", "x"),
        x=Raw(lambda: _jnp((4,)), [], lazy=True),
        compiled=Flag(False),
    ),
    T + "model.xla_flops": Case(
        config=Model("tiny-gqa"),
        batch=Int(1, big=True),
        seq_len=Int(8, big=True),
        training=Flag(False),
        compiled=Flag(False),
    ),
    T + "model.param_shapes": Case(config=Model("tiny-gqa"), dtype=Raw("float32", ["float99", 3, None])),
    T + "model.xla_component_flops": Case(
        run_baseline=False,
        config=Model("tiny-gqa"),
        batch=Int(1, big=True),
        seq_len=Int(8, big=True),
        compiled=Flag(False),
    ),
    # ---- devices
    T + "devices.setup": Case(n=Int(8, big=True)),
    T + "devices.demo_devices": Case(
        n=Int(8, big=True), backend=Raw(None, ["tpu", "", 3, ODD]), devices=Raw(None, ["cpu", [], [1, 2], ODD])
    ),
    T + "devices.default_devices": Case(),
    T + "devices.cpu_devices": Case(),
    T + "devices.fit_shape": Case(shape=Sizes((2, 4), big=True), n_devices=Int(8, big=True)),
    T + "devices.demo_mesh": Case(
        shape=Sizes((2, 4), big=True),
        names=Fixed(("X", "Y")),
        devices=Raw(None, ["cpu", [], [1, 2], ODD]),
        explicit=Flag(False),
        quiet=Flag(False),
    ),
    T + "devices.enough": Case(
        n=Int(8, big=True),
        devices=Raw(_eight_devices, ["cpu", [], [1, 2], ODD, None], lazy=True),
        what=Fixed("this cell"),
    ),
    T + "devices.require": Case(
        n=Int(8, big=True), devices=Raw(None, ["cpu", [], [1, 2], ODD]), what=Fixed("this demo")
    ),
    T + "multihost.train_layout": Case(n_devices=Int(8, top=128), n_processes=Int(2, top=8)),
    T + "multihost.launch": Case(
        task=Choice("train"),
        n_processes=Int(2, top=8),
        devices_per_process=Int(4, top=16),
        timeout_s=Num(240.0, top=3600),
        run_baseline=False,
    ),
    T + "devices.chip_for_device_kind": Case(device_kind=Raw("TPU v5 lite", [3, None, ["TPU"], ODD])),
    T + "devices.in_colab": Case(),
    T + "devices.describe": Case(),
    # ---- bench (measurements: their valid calls take seconds and are not run here)
    T + "bench.time_fn": Case(
        run_baseline=False,
        positional=("fn",),
        fn=Raw(lambda: 1, [3, None, "f"]),
        repeats=Int(3, big=True),
        warmup=Int(1, zero=True, big=True),
        number=Opt(Int(1, big=True)),
        target_s=Num(2e-3, top=60.0),
        max_number=Int(1000, big=True),
    ),
    T + "bench.default_dtype": Case(platform=Opt(Choice("cpu"))),
    T + "bench.default_matmul_shapes": Case(platform=Opt(Choice("cpu"))),
    T + "bench.default_copy_sizes": Case(platform=Opt(Choice("cpu")), cache_bytes=Opt(Num(32e6))),
    T + "bench.last_level_cache_bytes": Case(),
    T + "bench.build_parser": Case(),
    T + "bench.memory_limit_bytes": Case(),
    T + "bench.check_fits": Case(name=Raw("nbytes", [None, 3]), nbytes=Num(1e6, zero=True)),
    T + "bench.available_memory_bytes": Case(),
    T + "bench.memory_level": Case(platform=Choice("cpu"), array_bytes=Num(1e9), cache_bytes=Opt(Num(32e6))),
    T + "bench.measure_matmul": Case(
        run_baseline=False,
        B=Int(8, big=True),
        D=Int(8, big=True),
        F=Int(8, big=True),
        dtype=Choice("fp32"),
        repeats=Int(3, big=True),
        seed=Int(0, zero=True),
    ),
    T + "bench.measure_copy": Case(
        run_baseline=False,
        nbytes=Int(2**20, big=True),
        dtype=Choice("fp32"),
        repeats=Int(3, big=True),
        op=Choice("add"),
    ),
    T + "bench.matmul_sweep": Case(
        run_baseline=False,
        shapes=Raw(((8, 8, 8),), ["abc", (), [(8, 8)], [(0, 8, 8)], [(10**12, 8, 8)], 3]),
        dtype=Opt(Choice("fp32")),
        repeats=Int(3, big=True),
    ),
    T + "bench.copy_sweep": Case(
        run_baseline=False,
        sizes=Raw((2**20,), ["abc", (), (0,), (10**15,), 3]),
        dtype=Opt(Choice("fp32")),
        repeats=Int(3, big=True),
        ops=Raw(("add",), [(), ("nope",), None, 3, ["add", 3]]),
    ),
    T + "bench.FittedRoofline.attainable": Case(self_=lambda: _roofline_result().fit, intensity=Num(10.0)),
    T + "bench.fit_roofline": Case(
        measurements=Raw(_measurements, ["abc", None, [3], ()], lazy=True), min_copy_bytes=Num(1e6, zero=True)
    ),
    T + "bench.measure_roofline": Case(
        run_baseline=False,
        matmul_shapes=Raw(((8, 8, 8),), ["abc", (), [(0, 8, 8)], 3]),
        copy_sizes=Raw((2**20,), ["abc", (), (0,), 3]),
        dtype=Opt(Choice("fp32")),
        repeats=Int(3, big=True),
        min_copy_bytes=Num(1e6, zero=True),
        copy_ops=Raw(("add",), [(), ("nope",), 3, None]),
    ),
    T + "bench.compare": Case(result=Raw(_roofline_result, ["abc", None, 3], lazy=True), chip=Opt(ChipArg("v5e"))),
    T + "bench.format_rows": Case(rows=Raw(_bench_rows, ["abc", None, 3, [3]], lazy=True)),
    T + "bench.report": Case(result=Raw(_roofline_result, ["abc", None, 3], lazy=True), chip=Opt(ChipArg("v5e"))),
    # a command line: argparse answers bad flags with exit status 2 and one line, as every CLI does
    T + "bench.main": Case(run_baseline=False, argv=Fixed(["--repeats", "1"])),
    T + "bench.measure_collective": Case(
        run_baseline=False,
        kind=Choice("all-gather"),
        nbytes=Num(1e5),
        n_devices=Int(8, big=True),
        dtype=Choice("fp32"),
        repeats=Int(3, big=True),
    ),
    T + "bench.collective_sweep": Case(
        run_baseline=False,
        kinds=Raw(("all-gather",), ["all-gather", (), ("x",), 3]),
        sizes=Raw((1e4,), ["abc", (), (0,), (-1,), (1e15,), 3]),
        n_devices=Int(8, big=True),
        repeats=Int(3, big=True),
    ),
    T + "bench.fit_collective_bandwidth": Case(measurements=Raw(_coll_measurements, ["abc", None, [3], ()], lazy=True)),
    T + "bench.predict": Case(result=Raw(_roofline_result, ["abc", None, 3], lazy=True), chip=Opt(ChipArg("v5e"))),
    T + "bench.format_predictions": Case(rows=Raw(_predictions, ["abc", None, 3, [3]], lazy=True)),
    T + "bench.format_measurements": Case(
        result=Raw(_roofline_result, ["abc", None, 3], lazy=True), chip=Opt(ChipArg("v5e"))
    ),
    # The explorers' static figures (plots.interactive, a book-layer module: covered by these entries only).
    T + "plots.interactive.control": Case(
        label=Raw("B", ["", "  ", 3, None, ["B"]]),
        values=Raw((1, 2), ["ab", (), tuple(range(25)), None, 3, {1: 2}]),
        start=Raw(1, [5, "x", 1.5]),
        names=Raw(None, [("one",), "ab", (1, 2), 3, ("a", "b", "c")]),
        kind=Raw("slider", ["dial", None, 3, "Slider"]),
    ),
    T + "plots.interactive.round_floats": Case(obj=Fixed([1.0, 2]), digits=Raw(4, [0, 18, 2.5, True, "4", None, -1])),
    T + "plots.interactive.explorer_spec": Case(
        name=Raw("demo", ["Demo", "", "1x", None, 3, "a b", "x" * 60]),
        controls=Raw(_explorer_controls, [[], None, "ab", [3], 3], lazy=True),
        cell=Raw(_explorer_cell, [3, None, lambda a: 3, lambda a: {"data": [3]}]),
        layout=Raw(None, [[], "x", 3]),
    ),
    T + "plots.interactive.explorer_html": Case(spec=Raw(_explorer_spec, [None, {}, "x", 3, {"id": "a"}], lazy=True)),
}

#: Modules whose public functions must all have an entry above.
COVERED_MODULES = (
    "units",
    "table",
    "hardware",
    "roofline",
    "collectives",
    "topology",
    "systolic",
    "transfer",
    "sharding",
    "transformer",
    "hlo",
    "model",
    "devices",
    "bench",
    "multihost",
)

#: Modules of the analysis and measure layers not covered yet, each with the reason.
NOT_YET_COVERED: dict[str, str] = {
    "rules": "the combination rules take values their callers' kinds have already checked (an int tensor degree, a "
    "model config) and are driven through those callers by tests/test_impossible_combinations.py; fuzzing them "
    "one argument at a time waits for their owner (training) to check their own arguments",
}

#: Modules outside the analysis and measure layers (the book layer and glue), never driven by this test.
NOT_ANALYSIS = ("exercises", "plots", "widgets", "compat", "__main__")

#: Public classes whose constructors are not fuzzed: result records the library builds itself (their fields are
#: computed, not read from a user), with the reason. Their public methods still need entries.
#: Public classes that are not part of the analysis but of the validator itself (the kinds of ``units``): their
#: ``check`` refuses by design, and every kind is tried against its own hostile values in ``tests/test_units.py``.
VALIDATOR_KINDS = (
    "units.Kind",
    "units.Positive",
    "units.Range",
    "units.OneOf",
    "units.Flag",
    "units.Shape",
    "units.DType",
    "units.ArgumentKind",
)

RESULT_RECORDS = {
    "roofline.RooflineTime",
    "collectives.CollectiveTime",
    "topology.TransferTime",
    "systolic.Snapshot",
    "systolic.SystolicResult",
    "transfer.HostTransfer",
    "sharding.Step",
    "sharding.StepTime",
    "sharding.MatmulPlan",
    "transformer.ParamBreakdown",
    "transformer.FlopsBreakdown",
    "hlo.HloShape",
    "hlo.HloCollective",
    "hlo.CollectiveSig",
    "hlo.MatmulRow",
    "hlo.HloInstruction",
    "hlo.HloModule",
    "devices.DeviceInfo",
    "bench.Timing",
    "bench.Measurement",
    "bench.FittedRoofline",
    "bench.RooflineMeasurement",
    "bench.BenchRow",
    "bench.CollectiveMeasurement",
    "bench.Prediction",
    "devices.NotEnoughDevices",
    "multihost.ProcessResult",
    "multihost.GlooUnavailable",
}


# -- The later chapters keep their baseline calls in their own files, each defining CASES, COVERED (the modules it
# covers) and RESULT_RECORDS; a new chapter adds its file's name here. ------------------------------------------------
def _manifest_case_files() -> tuple[str, ...]:
    """The case files the chapter manifest (``tools/chapters.json``) names, this file excepted."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))
    import chapters

    return tuple(f for f in chapters.hostile_case_files() if f != "hostile_cases")


CHAPTER_CASE_FILES = _manifest_case_files()


def _merge_chapter_files() -> None:
    import importlib

    global COVERED_MODULES
    for name in CHAPTER_CASE_FILES:
        module = importlib.import_module(name)
        CASES.update(module.CASES)
        COVERED_MODULES = COVERED_MODULES + tuple(module.COVERED)
        RESULT_RECORDS.update(module.RESULT_RECORDS)
        for covered in module.COVERED:
            NOT_YET_COVERED.pop(covered, None)


_merge_chapter_files()
