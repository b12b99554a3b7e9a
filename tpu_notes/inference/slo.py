"""A serving latency objective (Chapters 7 and 8): the bounds a request's first token, its mean time per output
token and, optionally, its largest gap between tokens must meet. The simulator counts the requests that meet one
(:meth:`~tpu_notes.inference.simulator.SimResult.attainment`); :mod:`~tpu_notes.inference.goodput` searches the
highest load at which enough of them do; :mod:`~tpu_notes.inference.cost` bills each request that does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..units import Positive, check_fields, fmt

#: Longest objective one bound may state, seconds (a day).
MAX_SLO_S = 86_400.0
_SloS = Annotated[float, Positive(maximum=MAX_SLO_S)]


@dataclass(frozen=True)
class SLO:
    """A latency objective: every bound in seconds, all must hold for a request to meet it."""

    ttft_s: _SloS  # time to first token, at most, s
    tpot_s: _SloS  # mean time per output token after the first, at most, s (a one-token answer meets it)
    tbt_s: _SloS | None = None  # largest gap between two tokens of the request, at most, s (None: no bound)

    def __post_init__(self):
        check_fields(self)

    def __repr__(self) -> str:
        tbt = f", largest gap <= {fmt(self.tbt_s, 's')}" if self.tbt_s is not None else ""
        return f"SLO(TTFT <= {fmt(self.ttft_s, 's')}, TPOT <= {fmt(self.tpot_s, 's')}{tbt})"


__all__ = ["MAX_SLO_S", "SLO"]
