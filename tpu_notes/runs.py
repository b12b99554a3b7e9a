"""Published, measured runs beside the model's prediction: the framework Chapters 6 and 8 share.

A domain module (:mod:`tpu_notes.training.published` for training runs, :mod:`tpu_notes.inference.published` for
serving benchmarks) defines its record (a subclass of :class:`PublishedRecord` with the configuration its source
states), its prediction (a subclass of :class:`Reconciliation`) and a ``predict(run, efficiency)`` that prices one
record with that domain's step-time model. What is the same for both lives here once: the fields every record has,
the checks of a list of records or of rows, the median achieved/modelled ratio, and the physical sanity check that
refuses a record faster than the roofline.

**Faster than the roofline.** Priced at the datasheet rates (efficiency 1), the model is an upper bound on every
measured speed, so ``ratio = achieved / modelled`` should be at most 1. A record is refused at construction when its
ratio passes :data:`ROOFLINE_TOLERANCE`: then the measured figure is wrong (a typo, or a per-chip figure entered as
all chips together), not the physics.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .table import Column, Table
from .transformer import as_config
from .units import NonNegativeFloat, check_fields, checked

#: The largest achieved / modelled-at-the-roofline ratio a published record may have: 1.5. The roofline is an upper
#: bound, but mapping a source's configuration onto this package's can overprice the step: full-block remat, the
#: closest policy to some custom ones, prices one forward pass more (8/6 = 1.33 × the FLOPs of a run that recomputes
#: nothing), and a fixed-size serving cache is read whole. Beyond 1.5 × the roofline a record is refused.
ROOFLINE_TOLERANCE = 1.5

#: The groups the published set is reported by (median and worst error per group, and the leave-one-group-out
#: check of anything fitted): who ran it and on what, since a framework's habits (what it overlaps, which kernels it
#: has) are shared by its runs and differ between frameworks.
GROUPS = {
    "maxtext-synthetic": "MaxText README tables: synthetic dense models on TPU v4, v5e, v5p, one slice or several",
    "maxtext-recipes": "tpu-recipes and MaxText recipes: Llama, Mixtral and GPT-3 configs on TPU v5p and v6e",
    "tpu-other": "other TPU training runs (PaLM, papers and blogs)",
    "megatron": "Megatron-LM on A100, Megatron-Core / NeMo on H100, Llama 3 405B on H100",
    "torchtitan": "torchtitan and other PyTorch-native training on H100/H200/B200, bf16 and FP8",
    "gpu-other": "other GPU training runs",
    "tpu-serving": "serving on TPU: JetStream, vLLM on TPU",
    "gpu-serving": "serving on GPU: TensorRT-LLM, NIM, vLLM, gpt-fast",
}


@dataclass(frozen=True)
class PublishedRecord:
    """The fields every published, measured run has; a domain's subclass adds its configuration, the measured
    figure and a ``notes`` string (what was assumed), and names the measured field in ``measured_field``."""

    name: str  # short label for tables
    source: str  # key of the domain module's source list, with the table / row / file
    model: object  # preset name or TransformerConfig

    def __post_init__(self):
        check_fields(self)  # every field whose annotation declares a kind (the subclass's included)
        for f in ("name", "source", "notes"):
            if not isinstance(getattr(self, f, ""), str):
                raise TypeError(f"{f} must be a string; got {type(getattr(self, f)).__name__}")
        as_config(self.model)
        group = getattr(self, "group", None)
        if hasattr(type(self), "group") and group not in GROUPS:  # a domain's record names its group
            raise ValueError(f"group must be one of {sorted(GROUPS)} (runs.GROUPS); got {group!r}")


@dataclass(frozen=True)
class Reconciliation:
    """A published run beside the model's prediction for its configuration (a domain's subclass adds the parts)."""

    run: PublishedRecord  # the record priced
    predicted: float  # the modelled figure, in the record's units (tokens/s per chip, or seconds per token)
    reported: float  # the measured figure, the same units
    ratio: float  # achieved speed / roofline speed (1: the roofline is exact; < 1: the run was slower)
    expected: float  # the efficiency model's figure, in the record's units
    expected_ratio: float  # achieved speed / expected speed (1: the expected model is exact)

    @property
    def roofline_error(self) -> float:
        """Roofline speed / measured speed − 1: positive when the roofline is optimistic (it always should be)."""
        return 1.0 / self.ratio - 1.0

    @property
    def expected_error(self) -> float:
        """Expected speed / measured speed − 1: positive when the forecast is optimistic."""
        return 1.0 / self.expected_ratio - 1.0


@checked
def check_under_roofline(field: str, ratio: NonNegativeFloat) -> None:
    """Refuse a record whose measured figure (in ``field``) is ``ratio`` × faster than the roofline allows, when
    ``ratio`` passes :data:`ROOFLINE_TOLERANCE`."""
    if not ratio <= ROOFLINE_TOLERANCE:
        raise ValueError(
            f"{field} is {ratio:.3g} x faster than the roofline (the model at the datasheet rates, an "
            f"upper bound); at most {ROOFLINE_TOLERANCE} x is accepted: check the figure and its units "
            "(per chip or all chips together)"
        )


def check_runs(runs, record_type: type) -> list:
    """``runs`` as a non-empty list of ``record_type`` records (a TypeError or ValueError naming ``runs``)."""
    kind = record_type.__name__
    if isinstance(runs, (str, bytes)) or not hasattr(runs, "__iter__"):
        raise TypeError(f"runs must be a sequence of {kind}; got {type(runs).__name__}")
    runs = list(runs)
    if not runs or not all(isinstance(r, record_type) for r in runs):
        raise ValueError(f"runs must be a non-empty sequence of {kind} (e.g. published.RUNS)")
    return runs


def check_rows(rows, row_type: type) -> list:
    """``rows`` as a list of ``row_type`` predictions (what a domain's ``reconcile`` returns)."""
    kind = row_type.__name__
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of {kind} from reconcile(); got {type(rows).__name__}")
    rows = list(rows)
    if not all(isinstance(r, row_type) for r in rows):
        raise TypeError(f"rows must be a list of {kind} from reconcile()")
    return rows


@dataclass(frozen=True)
class GroupError:
    """How far the two predictions are from the measured runs of one group (errors are speed ratios − 1: +0.2
    means the prediction is 20% faster than the run)."""

    group: str  # a key of GROUPS, or "all"
    n: int  # runs in the group
    roofline_median: float  # median |error| of the roofline
    roofline_worst: float  # the largest |error| of the roofline, signed
    expected_median: float  # median |error| of the expected model
    expected_worst: float  # the largest |error| of the expected model, signed
    optimistic: int  # runs the expected model predicts faster than measured
    worst_run: str  # the run with the worst expected error


def _worst(errors):
    return max(errors, key=abs)


def group_errors(rows) -> list[GroupError]:
    """One :class:`GroupError` per group present in ``rows`` (in :data:`GROUPS` order), then one for all."""
    rows = check_rows(rows, Reconciliation)
    if not rows:
        raise ValueError("rows must hold at least one Reconciliation")
    out = []
    groups = [g for g in GROUPS if any(r.run.group == g for r in rows)] + ["all"]
    for g in groups:
        rs = [r for r in rows if g == "all" or r.run.group == g]
        roof = [r.roofline_error for r in rs]
        exp = [r.expected_error for r in rs]
        worst = max(rs, key=lambda r: abs(r.expected_error))
        out.append(
            GroupError(
                group=g,
                n=len(rs),
                roofline_median=statistics.median(abs(x) for x in roof),
                roofline_worst=_worst(roof),
                expected_median=statistics.median(abs(x) for x in exp),
                expected_worst=_worst(exp),
                optimistic=sum(x > 0 for x in exp),
                worst_run=worst.run.name,
            )
        )
    return out


def errors_table(errors) -> Table:
    """The per-group errors as a :class:`tpu_notes.table.Table`: runs, the roofline's and the expected model's
    median and worst error, and how many runs the expected model predicts too fast."""
    if isinstance(errors, (str, bytes)) or not hasattr(errors, "__iter__"):
        raise TypeError(f"errors must be a list of GroupError from group_errors(); got {type(errors).__name__}")
    errors = list(errors)
    if not all(isinstance(e, GroupError) for e in errors):
        raise TypeError("errors must be a list of GroupError from group_errors()")
    cols = [
        Column("group"),
        Column("runs"),
        Column("roofline median", "%", digits=2),
        Column("roofline worst", "%", digits=2),
        Column("expected median", "%", digits=2),
        Column("expected worst", "%", digits=2),
        Column("too fast"),
    ]
    body = [
        (
            e.group,
            e.n,
            e.roofline_median,
            e.roofline_worst,
            e.expected_median,
            e.expected_worst,
            f"{e.optimistic}/{e.n}",
        )
        for e in errors
    ]
    return Table(cols, body, caption="Error of each model, per group of published runs (worst: signed)")


def format_errors(errors) -> str:
    """:func:`errors_table` as plain text (worst errors signed: +150% is 2.5x too slow)."""
    return errors_table(errors).text()


def median_ratio(rows) -> float:
    """The median achieved / modelled ratio of ``rows`` (predictions at efficiency 1: the efficiency that would
    make the typical run come out exact)."""
    rows = check_rows(rows, Reconciliation)
    if not rows:
        raise ValueError("rows must hold at least one Reconciliation")
    return statistics.median(r.ratio for r in rows)


__all__ = [
    "GROUPS",
    "GroupError",
    "errors_table",
    "format_errors",
    "group_errors",
    "ROOFLINE_TOLERANCE",
    "PublishedRecord",
    "Reconciliation",
    "check_rows",
    "check_runs",
    "check_under_roofline",
    "median_ratio",
]
