"""Search every layout of a training step and rank them by predicted step time (Chapter 5).

:func:`plan` enumerates the degrees of tensor, pipeline, expert, FSDP and data parallelism whose product is the
slice's chip count, places each on the torus (:func:`~tpu_notes.training.step.map_to_slice`), tries each remat
policy (and, with a pipeline, several microbatch counts; without one, the fewest gradient-accumulation steps that
fit), checks memory against HBM, and prices the survivors with :func:`~tpu_notes.training.step_time`.
Candidates that cannot run are kept with the reason: the degrees do not divide the model or the batch, they cannot
be placed on the axes, or the step does not fit in HBM. When nothing fits the ranking is empty and the reasons say
why; the planner never raises for a layout, only for bad arguments.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from ..gpu import GpuCluster
from ..system import System, check_system
from ..transformer import as_config
from ..units import Bool, DTypeName, Fraction, OneOf, PositiveInt, checked, fmt
from .expected import ExpectedStep
from .memory import OPTIMIZERS, MemoryBreakdown, check_remat, training_memory
from .parallelism import Parallelism
from .step import Layout, StepTime, map_to_slice, step_time

#: Remat policies the planner tries by default (cheapest recompute first).
DEFAULT_REMAT = ("none", "save_matmul_outputs", "full_block")
#: What :func:`plan` ranks by: the roofline step (``StepTime.total``) or the expected one (``StepTime.expected``).
RANK_BY = ("roofline", "expected")


@dataclass(frozen=True)
class Plan:
    """One candidate layout with its predicted memory and time (``reason`` is empty when it can run)."""

    parallelism: Parallelism
    remat: object  # remat policy name, or D-sized checkpoints per layer
    layout: Layout | None  # placement on the torus (None if it could not be placed)
    memory: MemoryBreakdown | None  # bytes per chip (None if not computed)
    step: StepTime | None  # seconds (None when rejected)
    reason: str = ""  # why it was rejected; "" for a runnable layout

    @property
    def ok(self) -> bool:
        return not self.reason

    @property
    def mfu(self) -> float:
        return self.step.mfu if self.step else 0.0

    @property
    def expected(self) -> ExpectedStep | None:
        """The step at the efficiency model's rates (an :class:`~tpu_notes.training.ExpectedStep`, a forecast), or
        None when rejected."""
        return self.step.expected if self.step else None

    def row(self) -> dict:
        """The plan as a flat dict (for tables and JSON). ``step_s``, ``mfu`` and ``bound`` are the roofline's (a
        floor on the step, a ceiling on MFU), repeated as ``step_s_roofline``, ``mfu_roofline`` and
        ``bound_roofline``; the ``*_expected`` keys are the efficiency model's forecast of the same step."""
        st, ex = self.step, self.expected
        roof_tps = ex.tokens_per_s_per_chip * ex.total / st.total if st and ex and st.total else None
        return {
            "layout": self.parallelism.label(),
            "remat": self.remat,
            "placement": self.layout.describe() if self.layout else "",
            "memory_per_chip_bytes": self.memory.total if self.memory else None,
            "step_s": st.total if st else None,
            "compute_s": st.compute if st else None,
            "comms_s": st.comms if st else None,
            "bubble_s": st.bubble if st else None,
            "comms_over_compute": st.comms_ratio if st else None,
            "bound": st.bound if st else None,
            "mfu": st.mfu if st else None,
            "reason": self.reason,
            "step_s_roofline": st.total if st else None,
            "mfu_roofline": st.mfu if st else None,
            "bound_roofline": st.bound if st else None,
            "tokens_per_s_per_chip_roofline": roof_tps,
            "step_s_expected": ex.total if ex else None,
            "mfu_expected": ex.mfu if ex else None,
            "bound_expected": ex.bound if ex else None,
            "tokens_per_s_per_chip_expected": ex.tokens_per_s_per_chip if ex else None,
            "efficiency_model": ex.efficiency if ex else None,
        }


@dataclass(frozen=True)
class PlanResult:
    """The ranking (best first) and the rejected candidates of one :func:`plan` call. Iterates over the ranking."""

    ranked: tuple[Plan, ...]  # runnable layouts by increasing step time (roofline, or expected with rank_by)
    rejected: tuple[Plan, ...]  # layouts that cannot run, each with its reason
    searched: int  # candidates considered

    def __iter__(self):
        return iter(self.ranked)

    def __len__(self) -> int:
        return len(self.ranked)

    def __getitem__(self, i):
        return self.ranked[i]

    def reasons(self) -> dict[str, int]:
        """How many candidates were rejected for each kind of reason (the text before the first colon)."""
        out: dict[str, int] = {}
        for p in self.rejected:
            key = p.reason.split(":")[0]
            out[key] = out.get(key, 0) + 1
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    @checked
    def table(self, top: PositiveInt = 10) -> str:
        """The ``top`` layouts as a fixed-width table of at most 84 columns (a layout label is cut at 28), or the
        rejection reasons if none can run. Each row gives the roofline step and its bound (the chapter's figures)
        and then the expected step and its MFU (the :mod:`tpu_notes.efficiency` model's forecast); ``Plan.row()``
        has every figure, the roofline MFU, the expected bound and the communication ratio included."""
        if not self.ranked:
            lines = [f"No layout fits ({self.searched} candidates). Rejected because:"]
            lines += [f"  {n:6d} x {r}" for r, n in self.reasons().items()]
            return "\n".join(lines)
        shown = self.ranked[:top]
        w = min(28, max(6, *(len(p.parallelism.label()) for p in shown)))  # its longest label, at most 28
        head = (
            f"{'#':>2} {'layout':<{w}} {'remat':<8} {'HBM/chip':>8} {'roof step':>9} {'bound':<8} {'exp step':>8} "
            f"{'MFU':>6}"
        )
        lines = [head]
        names = set()
        for i, p in enumerate(shown, 1):
            st, ex = p.step, p.expected
            exp = f"{fmt(ex.total, 's'):>8} {ex.mfu:>6.1%}" if ex else f"{'-':>8} {'-':>6}"
            if ex:
                names.add(ex.efficiency)
            remat = _REMAT_SHORT.get(str(p.remat), str(p.remat))
            lines.append(
                f"{i:>2} {p.parallelism.label()[:w]:<{w}} {remat:<8.8} {fmt(p.memory.total, 'B'):>8} "
                f"{fmt(st.total, 's'):>9} {st.bound:<8} {exp}"
            )
        model = ", ".join(repr(n) for n in sorted(names)) or "none"
        lines.append("roof: the roofline (matmuls at peak, comms hidden), a floor on the step")
        lines.append(f"exp: expected, at the rates of efficiency model {model}: a forecast (MFU: its MFU)")
        short = sorted({_REMAT_SHORT[str(p.remat)] for p in shown if str(p.remat) in _REMAT_SHORT})
        if short:
            full = {v: k for k, v in _REMAT_SHORT.items()}
            lines.append("remat " + ", ".join(f"{s}: {full[s]}" for s in short))
        return "\n".join(lines)


#: Remat policy names shortened in :meth:`PlanResult.table` (the legend under the table spells them out).
_REMAT_SHORT = {"save_matmul_outputs": "save_mm", "full_block": "full"}


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


@checked
def plan(
    model,
    slice: System,
    batch_tokens: PositiveInt,
    seq_len: PositiveInt,
    *,
    n_slices: PositiveInt = 1,
    remat: Sequence = DEFAULT_REMAT,
    sequence_sharding: Bool = False,
    max_pipeline: PositiveInt = 16,
    optimizer: Annotated[str, OneOf(tuple(OPTIMIZERS))] = "adam",
    dtype: DTypeName = "bf16",
    hbm_fraction: Fraction = 1.0,
    overlap: Bool = True,
    max_microbatches: PositiveInt = 64,
    matmul_efficiency: Fraction = 1.0,
    rank_by: Annotated[str, OneOf(RANK_BY)] = "roofline",
) -> PlanResult:
    """Rank every layout of a training step of ``model`` on ``n_slices`` copies of ``slice`` (joined over DCN).

    ``slice`` is a :class:`~tpu_notes.system.System`: a TPU ``Slice`` or a ``GpuCluster`` (which includes its
    whole network: ``n_slices=1``).

    ``batch_tokens`` is the global batch, ``seq_len`` the sequence length. Without ``sequence_sharding`` a batch
    shard must hold whole sequences (at most ``batch_tokens / seq_len`` shards). Tensor parallelism must divide
    the query heads and ``d_ff``; pipeline stages must divide the layers (at most ``max_pipeline``); expert
    parallelism must divide the experts of a MoE model. A layout fits when its
    :func:`~tpu_notes.training.training_memory` is at most
    ``hbm_fraction`` (in (0, 1]) of HBM. ``matmul_efficiency`` (fraction of peak the matmuls reach) is passed to
    :func:`~tpu_notes.training.step_time`; 1 ranks by the roofline. ``rank_by`` picks the step time the ranking (and
    the choice of microbatch count per layout) uses: ``"roofline"`` (``StepTime.total``, the default) or
    ``"expected"`` (``StepTime.expected.total``, the :mod:`tpu_notes.efficiency` model's forecast). Returns a
    :class:`PlanResult`.
    """
    m = as_config(model)
    check_system(slice, "slice")

    def seconds(st: StepTime) -> float:  # the step time the ranking uses
        return st.expected.total if rank_by == "expected" and st.expected is not None else st.total

    if isinstance(slice, GpuCluster) and n_slices != 1:
        raise ValueError("n_slices joins TPU slices over DCN; a GpuCluster includes its whole network (n_slices=1)")
    B, S, max_mb, frac = batch_tokens, seq_len, max_microbatches, hbm_fraction
    if isinstance(remat, (str, int, float)):
        remat = (remat,)
    if not isinstance(remat, (tuple, list)):
        raise TypeError(
            f"remat must be a policy name or a sequence of them (e.g. {DEFAULT_REMAT}); got {type(remat).__name__}"
        )
    policies = tuple(check_remat(r) for r in remat)
    if not policies:
        raise ValueError("remat must name at least one policy")
    if B % S:
        raise ValueError(f"batch_tokens ({B:,}) must be a whole number of sequences of seq_len ({S:,})")
    slice.chip.peak_flops(dtype)  # a dtype the chip has a peak for
    hbm = frac * slice.chip.hbm_bytes
    seqs = B // S
    N = slice.n_devices
    divs = _divisors(N)
    tensors = [t for t in divs if m.n_heads % t == 0 and m.d_ff % t == 0]
    pipes = [p for p in divs if m.n_layers % p == 0 and p <= max_pipeline]
    experts = [e for e in divs if m.n_experts % e == 0] if m.is_moe else [1]

    ranked: list[Plan] = []
    rejected: list[Plan] = []
    searched = 0
    for t in tensors:
        for pp in pipes:
            for e in experts:
                if N % (t * pp * e):
                    continue
                rest = N // (t * pp * e)
                for f in _divisors(rest):
                    base = Parallelism(
                        data=rest // f, fsdp=f, tensor=t, pipeline=pp, expert=e, microbatches=pp, dcn=n_slices
                    )
                    shards = base.batch_shards
                    try:
                        lay = map_to_slice(base, slice)
                    except ValueError as err:
                        searched += len(policies)
                        rejected.append(Plan(base, policies[0], None, None, None, f"cannot place: {err}"))
                        continue
                    if not sequence_sharding and seqs < shards:
                        searched += len(policies)
                        rejected.append(
                            Plan(
                                base,
                                policies[0],
                                lay,
                                None,
                                None,
                                f"too few sequences: {seqs} sequences for {shards} batch shards "
                                "(allow sequence sharding)",
                            )
                        )
                        continue
                    mbs = (
                        [pp * k for k in (1, 2, 4, 8) if pp * k <= max_mb]
                        if pp > 1
                        else [2**i for i in range(int(math.log2(max_mb)) + 1)]
                    )
                    for r in policies:
                        searched += 1
                        best = None
                        for mb in mbs:
                            if not sequence_sharding and seqs < shards * mb:
                                break
                            cand = Parallelism(
                                data=base.data, fsdp=f, tensor=t, pipeline=pp, expert=e, microbatches=mb, dcn=n_slices
                            )
                            mem = training_memory(m, cand, B, S, optimizer=optimizer, remat=r, param_dtype=dtype)
                            if mem.total > hbm:
                                best = best or Plan(
                                    cand,
                                    r,
                                    lay,
                                    mem,
                                    None,
                                    f"does not fit: {fmt(mem.total, 'B')} per chip > {fmt(hbm, 'B')} HBM",
                                )
                                continue
                            st = step_time(
                                m,
                                cand,
                                slice,
                                B,
                                S,
                                remat=r,
                                dtype=dtype,
                                overlap=overlap,
                                layout=lay,
                                matmul_efficiency=matmul_efficiency,
                            )
                            plan_ = Plan(cand, r, lay, mem, st)
                            if best is None or not best.ok or seconds(st) < seconds(best.step):
                                best = plan_
                            if pp == 1:
                                break  # more accumulation steps only repeat the FSDP gathers
                        if best is None:
                            best = Plan(
                                base,
                                r,
                                lay,
                                None,
                                None,
                                f"too few sequences: {seqs} sequences for {shards} shards x microbatches",
                            )
                        (ranked if best.ok else rejected).append(best)
    # Ties in step time (common when compute-bound) go to the layout that recomputes least, then to the one with
    # the most communication headroom, then to the one that needs least memory.
    ranked.sort(key=lambda p: (round(seconds(p.step), 12), round(p.step.hfu, 9), p.step.comms_ratio, p.memory.total))
    return PlanResult(ranked=tuple(ranked), rejected=tuple(rejected), searched=searched)
