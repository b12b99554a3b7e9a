"""Which chips to ask for: the slices a TPU pod offers, each with the planner's best legal layout (Chapter 6).

A full pod is not always something one can ask for, nor the best place to train. A v5p pod has 8,960 chips, but
Cloud TPU schedules at most 6,144 (16x16x24) in one slice (:attr:`tpu_notes.topology.Slice.schedulable`), and a
shape must be one it offers. :func:`plan_slices` plans every schedulable slice shape of the pod above a size
(:func:`slice_shapes`) and ranks them by the run's throughput; when the request is larger than one slice can be,
it also offers several slices per pod joined over DCN (``n_slices``). Each :class:`SliceOption` counts the chips
left idle and prices a million tokens twice: paying for the chips used, and paying for the whole pod (when the
idle chips cannot be lent to anyone else).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..hardware import get_chip
from ..table import Column, Table
from ..topology import Slice, largest_slice_chips, schedulable_shapes
from ..units import Fraction, PositiveInt, SeqLen, checked, fmt
from .planner import Plan, _readable, plan


@dataclass(frozen=True)
class SliceOption:
    """One slice shape of a pod with the planner's best legal layout on it (``best`` None when nothing is legal)."""

    slice: Slice  # the slice shape asked for
    n_slices: int  # copies of it over DCN
    chips: int  # chips the run uses: slice chips x n_slices
    idle_chips: int  # chips of the pods reserved (n_slices full pods) left idle
    legal: int  # legal layouts that fit (the planner's ranking)
    best: Plan | None  # the planner's first choice, or None
    step_s: float | None  # its expected step, seconds (None without a legal layout)
    tokens_per_s: float  # the whole run's tokens per second (0 without a legal layout)
    dollars_per_mtoken_used: float | None  # $ per million tokens paying for the chips used (None: no price)
    dollars_per_mtoken_pod: float | None  # $ per million tokens paying for the whole pods, idle chips included
    per_pod: int = 1  # slices of this shape in each pod, joined over DCN (n_slices = per_pod x pods)

    @property
    def ok(self) -> bool:
        return self.best is not None


#: Most slices per pod :func:`plan_slices` joins over DCN when one slice cannot hold the request.
MAX_SLICES_PER_POD = 4


@checked
def slice_shapes(chip, min_chips: PositiveInt = 1) -> list[Slice]:
    """Every slice shape of ``chip``'s pod with at least ``min_chips`` chips that Cloud TPU schedules as one slice
    (:func:`tpu_notes.topology.schedulable_shapes`: on v5p the sub-cube shapes and whole 4×4×4 cubes up to 6,144
    chips; on v5e/v6e the documented 1×1 ... 16×16), largest first. Axes are listed smallest first; shapes that
    differ only by the order of their axes appear once."""
    c = get_chip(chip, "chip")
    if c.kind != "tpu" or not c.pod_shape:
        raise ValueError(f"chip must be a TPU generation with a pod shape (e.g. 'v5p'); got {c.name!r}")
    out = [Slice(c, s) for s in schedulable_shapes(c)]
    out = [s for s in out if s.n_chips >= min_chips]
    return sorted(out, key=lambda s: (-s.n_chips, s.shape))


def _requests(c, min_chips: int) -> list[tuple[Slice, int]]:
    """``(slice, per_pod)`` pairs to plan: every schedulable slice of at least ``min_chips``; when ``min_chips``
    is more than one slice may have (the request is larger than one slice), ``k`` copies per pod joined over DCN of
    each schedulable shape of a power-of-two number of chips (the sizes every power-of-two batch and head count
    divides), as many as fit in the pod (2 <= k <= MAX_SLICES_PER_POD), where they give more chips than one slice."""
    top = largest_slice_chips(c)
    if min_chips <= top:
        return [(slc, 1) for slc in slice_shapes(c, min_chips)]
    pod_chips = math.prod(c.pod_shape)
    out, seen = [], set()
    for slc in slice_shapes(c, 1):
        n = slc.n_chips
        k = min(MAX_SLICES_PER_POD, pod_chips // n)
        if n & (n - 1) or n in seen or k < 2 or k * n <= top:
            continue
        seen.add(n)  # one shape per size: slice_shapes lists the most compact first within a size
        out.append((slc, k))
    return out


@checked
def plan_slices(
    model,
    chip,
    batch_tokens: PositiveInt,
    seq_len: SeqLen,
    *,
    n_slices: PositiveInt = 1,
    min_fraction: Fraction = 0.25,
    **plan_kwargs,
) -> list[SliceOption]:
    """Plan a training step of ``model`` on every schedulable slice shape of ``chip``'s pod with at least
    ``min_fraction`` (in (0, 1]) of its chips (``n_slices`` pods, one copy of the slice in each, joined over DCN),
    and rank the shapes by the run's expected throughput, fastest first (shapes without a legal layout last). When
    that many chips exceed the largest slice Cloud TPU schedules (v5p: 6,144 of the pod's 8,960), the options are
    several slices per pod instead (``SliceOption.per_pod``, up to :data:`MAX_SLICES_PER_POD`), all joined over
    DCN. ``plan_kwargs`` go to :func:`~tpu_notes.training.plan` (``rank_by`` included; the throughput is the
    ranked step's).
    """
    c = get_chip(chip, "chip")
    pod_chips = Slice(c).n_chips
    rank_by = plan_kwargs.get("rank_by", "expected")
    price = c.dollars_per_hour
    out = []
    for slc, per_pod in _requests(c, max(1, int(min_fraction * pod_chips + 0.999999))):
        result = plan(model, slc, batch_tokens, seq_len, n_slices=n_slices * per_pod, **plan_kwargs)
        chips = slc.n_chips * n_slices * per_pod
        best = result.ranked[0] if result.ranked else None
        step = None
        if best is not None:
            step = best.expected.total if rank_by == "expected" and best.expected is not None else best.step.total
        tps = batch_tokens / step if step else 0.0

        out.append(
            SliceOption(
                slice=slc,
                n_slices=n_slices * per_pod,
                chips=chips,
                idle_chips=(pod_chips - slc.n_chips * per_pod) * n_slices,
                legal=len(result.ranked),
                best=best,
                step_s=step,
                tokens_per_s=tps,
                dollars_per_mtoken_used=_dollars(chips, price, tps),
                dollars_per_mtoken_pod=_dollars(pod_chips * n_slices, price, tps),
                per_pod=per_pod,
            )
        )
    return sorted(out, key=lambda o: (not o.ok, -o.tokens_per_s, o.chips))


def _dollars(chips: int, dollars_per_chip_hour: float | None, tokens_per_s: float) -> float | None:
    """$ per million tokens for ``chips`` at ``dollars_per_chip_hour``, or None without a price or throughput."""
    if not dollars_per_chip_hour or not tokens_per_s:
        return None
    return chips * dollars_per_chip_hour / 3600.0 / tokens_per_s * 1e6


def format_slices(options, top: int = 8) -> str:
    """The first ``top`` options of :func:`plan_slices` as a table of at most 88 columns."""
    if isinstance(options, (str, bytes)) or not hasattr(options, "__iter__"):
        raise TypeError(f"options must be plan_slices' list of SliceOption; got {type(options).__name__}")
    options = list(options)
    if not all(isinstance(o, SliceOption) for o in options):
        raise TypeError("options must be plan_slices' list of SliceOption")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be a positive integer; got {top!r}")
    lines = [
        f"{'slice':<9} {'chips':>6} {'idle':>5} {'legal':>5} {'best layout':<22} {'step':>7} {'Mtok/s':>6} "
        f"{'$/Mtok':>6} {'pod':>6}"
    ]
    for o in options[:top]:
        shape = ("" if o.per_pod == 1 else f"{o.per_pod}x ") + "x".join(map(str, o.slice.shape))
        if not o.ok:
            lines.append(f"{shape:<9} {o.chips:>6} {o.idle_chips:>5} {0:>5} {'(none legal)':<22}")
            continue

        def usd(x):
            return f"{x:>6.2f}" if x is not None else f"{'-':>6}"

        lines.append(
            f"{shape:<9} {o.chips:>6} {o.idle_chips:>5} {o.legal:>5} {o.best.parallelism.short()[:22]:<22} "
            f"{fmt(o.step_s, 's'):>7} {o.tokens_per_s / 1e6:>6.2f} {usd(o.dollars_per_mtoken_used)} "
            f"{usd(o.dollars_per_mtoken_pod)}"
        )
    lines.append("$/Mtok: paying for the chips used; pod: paying for the whole pod, idle chips included")
    return "\n".join(lines)


def slices_table(options, top: int = 8) -> Table:
    """The first ``top`` options of :func:`plan_slices` as a :class:`~tpu_notes.table.Table` for the page: each
    slice's shape (``16x16x16``; ``2 x 8x16x16`` for two per pod), the chips the run uses, the planner's
    best layout (``fsdp=1024 tp=4``; the caption gives the pods joined over DCN), its step (seconds), the run's million
    tokens per second and the dollars per million tokens paying for the chips used and for the whole pods."""
    if hasattr(options, "__iter__") and not isinstance(options, (str, bytes)):
        options = list(options)
    format_slices(options, top)  # the same checks of options and top
    rows = []
    for o in options[:top]:
        shape = ("" if o.per_pod == 1 else f"{o.per_pod} x ") + "x".join(map(str, o.slice.shape))
        best = _readable(o.best, dcn=False) if o.ok else "(none legal)"
        mtok = o.tokens_per_s / 1e6 if o.tokens_per_s else None
        rows.append((shape, o.chips, best, o.step_s, mtok, o.dollars_per_mtoken_used, o.dollars_per_mtoken_pod))
    cols = [Column("slice"), Column("chips"), Column("best layout"), Column("step", "s")]
    cols += [Column("Mtok/s"), Column("$/Mtok"), Column("pod")]
    n = options[0].n_slices // max(1, options[0].per_pod) if options else 1
    chip = options[0].slice.chip.name if options else ""
    pods = f"{n} {chip} pods, joined over DCN" if n > 1 else f"one {chip} pod"
    return Table(
        cols,
        rows,
        caption=f"Slices of {pods}, fastest first",
        notes="$/Mtok: $ per million tokens for the chips used; pod: for whole pods, idle chips too",
    )


__all__ = ["MAX_SLICES_PER_POD", "SliceOption", "format_slices", "plan_slices", "slice_shapes", "slices_table"]
