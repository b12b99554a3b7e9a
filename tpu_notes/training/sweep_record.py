"""The record of a published layout sweep: the same model on the same chips measured several ways
(:mod:`tpu_notes.training.sweeps` evaluates them; :mod:`~tpu_notes.training.sweeps_tpu` and
:mod:`~tpu_notes.training.sweeps_gpu` hold the records). It lives apart from the evaluation so that the record
modules and the evaluation can import it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..units import Bool, OneOf, check_fields
from .published import PublishedRun

#: Sweeps whose points share the model, the chips and the batch: the model ranks them.
RANKING_KINDS = ("layout", "remat", "microbatch", "overlap")
#: Series along one axis of scale: the model's per-chip trend is compared.
SCALING_KINDS = ("slices", "nodes", "model-size", "context")
SWEEP_KINDS = RANKING_KINDS + SCALING_KINDS


@dataclass(frozen=True)
class LayoutSweep:
    """One published sweep: ``runs`` are its measured points in the source's order (at least two)."""

    name: str  # short label for tables
    source: str  # where the points come from: paper / repository, table or figure, commit
    kind: Annotated[str, OneOf(SWEEP_KINDS)]  # what varies: a ranking kind or a scaling axis
    varies: str  # what changes between the points, in words
    runs: tuple  # of PublishedRun, one per point
    comm_bound: Bool = False  # communication (not the matmuls) decides the order: the source says so or shows it
    notes: str = ""  # how the points were read (a figure read off to a stated precision) and what is assumed

    def __post_init__(self):
        check_fields(self)
        for f in ("name", "source", "varies", "notes"):
            if not isinstance(getattr(self, f), str):
                raise TypeError(f"{f} must be a string; got {type(getattr(self, f)).__name__}")
        if not isinstance(self.runs, tuple) or not all(isinstance(r, PublishedRun) for r in self.runs):
            raise TypeError("runs must be a tuple of tpu_notes.training.PublishedRun records")
        if len(self.runs) < 2:
            raise ValueError(f"runs must hold at least 2 points (a sweep); {self.name!r} has {len(self.runs)}")
        chips = {r.system.chip.name for r in self.runs}
        if len(chips) != 1:
            raise ValueError(f"every point of a sweep runs on one chip kind; {self.name!r} mixes {sorted(chips)}")
        if self.kind in RANKING_KINDS:
            for what, key in (
                ("model", lambda r: r.model if isinstance(r.model, str) else r.model.name),
                ("number of chips", lambda r: r.system.n_chips * r.parallelism.dcn),
                ("global batch (tokens)", lambda r: r.batch_tokens),
                ("sequence length", lambda r: r.seq_len),
            ):
                values = {key(r) for r in self.runs}
                if len(values) != 1:
                    raise ValueError(
                        f"a {self.kind!r} sweep holds the {what} fixed; {self.name!r} has {sorted(map(str, values))}"
                    )


__all__ = ["LayoutSweep", "RANKING_KINDS", "SCALING_KINDS", "SWEEP_KINDS"]
