"""Pipeline schedules, simulated: who computes what when, and where the bubble is (Chapter 5).

A pipeline of ``P`` stages (each a run of consecutive layers on its own chips) processes ``M`` microbatches. A
forward task ``F(s, m)`` of stage ``s`` needs ``F(s − 1, m)``; a backward task ``B(s, m)`` needs ``B(s + 1, m)`` and
``F(s, m)``. Each stage runs its tasks in a fixed order and starts one as soon as the stage is free and its inputs
exist:

- **GPipe**: every forward, then every backward (it keeps all ``M`` microbatches' activations);
- **1F1B**: ``P − s − 1`` warm-up forwards, then one forward and one backward alternately, then the remaining
  backwards (at most ``P − s`` microbatches in flight on stage ``s``).

Both leave the same idle time, ``(P − 1)(t_F + t_B)`` per stage, i.e. the bubble fraction ``(P − 1)/(M + P − 1)`` of
:func:`~tpu_notes.training.rooflines.pipeline_bubble_fraction`; 1F1B only needs less memory.

**Zero-bubble schedules** split each backward pass in two: ``B``, the gradient of the stage's *input* (what the
previous stage waits for), and ``W``, the gradient of its *weights* (which nothing waits for), and move the ``W``
passes into the idle slots. :func:`bubble_time` and :func:`schedule_bubble_fraction` give the published closed forms
(not simulated here), with ``t_B`` the *whole* backward and ``t_W`` its weight part:

- 1F1B (and GPipe): ``(P − 1)(t_F + t_B)``;
- ZB-H1 (Qi, Wan, Huang and Lin, "Zero Bubble Pipeline Parallelism", ICLR 2024, arXiv 2401.10241, section 2.1;
  called ZB1P in DeepSeek-V3's table): ``(P − 1)(t_F + t_B − 2 t_W)``, a third of 1F1B's when forward, input
  gradient and weight gradient take equal time, holding no more activations than 1F1B;
- DualPipe (DeepSeek-AI, "DeepSeek-V3 Technical Report", arXiv 2412.19437, section 3.2.1 and Table 2; also
  github.com/deepseek-ai/DualPipe, README): ``(P/2 − 1)(t_F&B + t_B − 3 t_W)``, with ``t_F&B`` the time of a
  forward and a backward chunk run overlapped (their communication hidden under each other's compute; at most
  ``t_F + t_B``), feeding microbatches from both ends of the pipeline, at the price of two copies of the weights per
  device and ``P + 1`` microbatches of activations.

The paper's ZB-H2 reaches zero bubble (with equal pass times) by holding up to ``2P − 1`` microbatches; it has no
closed form for unequal times and is not priced here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..units import NonNegativeFloat, NonNegativeInt, OneOf, PositiveFloat, PositiveInt, capped, checked

#: Schedules :func:`simulate` runs task by task.
SCHEDULE_NAMES = ("gpipe", "1f1b")
#: Schedules :func:`bubble_time` prices in closed form (see the module docstring for the sources).
BUBBLE_SCHEDULES = ("gpipe", "1f1b", "zb-h1", "dualpipe")
#: Per schedule: (copies of the stage's weights per device, microbatches of activations the busiest device holds as
#: a formula in P stages and M microbatches). GPipe: every microbatch; 1F1B and ZB-H1: P (Qi et al. 2023, arXiv
#: 2401.10241, section 2.1: ZB-H1 keeps 1F1B's peak); DualPipe: 2 copies and P + 1 (DeepSeek-V3 report, arXiv
#: 2412.19437, Table 2).
SCHEDULE_MEMORY = {
    "gpipe": (1, "M"),
    "1f1b": (1, "P"),
    "zb-h1": (1, "P"),
    "dualpipe": (2, "P + 1"),
}
#: Largest 2 × stages × microbatches simulated (each task is a Python object).
MAX_TASKS = 100_000
#: Most stages simulated: the event loop sweeps every stage once per round and a backward pass advances one stage
#: per round, so the work grows as stages² × (tasks per stage); at this cap with MAX_TASKS it takes about 1.5 s
#: (50,000 stages of one microbatch, within MAX_TASKS, took minutes).
MAX_STAGES = 1024


@dataclass(frozen=True)
class Task:
    """One forward or backward pass of one microbatch on one stage, in units of time."""

    stage: int  # 0 = first stage
    kind: str  # "F" or "B"
    microbatch: int
    start: float
    end: float


def _order(stage: int, stages: int, microbatches: int, schedule: str) -> list[tuple[str, int]]:
    if schedule == "gpipe":
        return [("F", m) for m in range(microbatches)] + [("B", m) for m in range(microbatches)]
    warm = min(stages - stage - 1, microbatches)
    order = [("F", m) for m in range(warm)]
    f, b = warm, 0
    while b < microbatches:
        if f < microbatches:
            order.append(("F", f))
            f += 1
        order.append(("B", b))
        b += 1
    return order


@checked
def simulate(
    stages: capped(MAX_STAGES),
    microbatches: capped(MAX_TASKS // 2),
    schedule: Annotated[str, OneOf(SCHEDULE_NAMES)] = "1f1b",
    forward_time: PositiveFloat = 1.0,
    backward_time: PositiveFloat = 2.0,
) -> list[Task]:
    """Every task of one pipelined step with its start and end time (see the module docstring). At most
    :data:`MAX_STAGES` stages and ``2 · stages · microbatches <=`` :data:`MAX_TASKS` tasks."""
    P, M, tf, tb = stages, microbatches, forward_time, backward_time
    if 2 * P * M > MAX_TASKS:
        raise ValueError(f"stages x microbatches = {P * M} is too large to simulate; keep 2·P·M <= {MAX_TASKS}")
    orders = [_order(s, P, M, schedule) for s in range(P)]
    done: dict[tuple[str, int, int], float] = {}
    nxt = [0] * P
    free = [0.0] * P
    tasks: list[Task] = []
    while len(tasks) < 2 * P * M:
        progressed = False
        for s in range(P):
            if nxt[s] == len(orders[s]):
                continue
            kind, m = orders[s][nxt[s]]
            deps = [("F", s - 1, m)] if kind == "F" and s > 0 else []
            if kind == "B":
                deps = [("F", s, m)] + ([("B", s + 1, m)] if s < P - 1 else [])
            if all(d in done for d in deps):
                start = max([free[s]] + [done[d] for d in deps])
                end = start + (tf if kind == "F" else tb)
                done[(kind, s, m)] = end
                free[s] = end
                tasks.append(Task(s, kind, m, start, end))
                nxt[s] += 1
                progressed = True
        if not progressed:  # pragma: no cover - the orders above never deadlock
            raise RuntimeError("pipeline schedule deadlocked")
    return tasks


def _check_tasks(tasks) -> list[Task]:
    if isinstance(tasks, (str, bytes)) or not hasattr(tasks, "__iter__"):
        raise TypeError(f"tasks must be a list of Task from simulate(); got {type(tasks).__name__}")
    tasks = list(tasks)
    if not tasks or not all(isinstance(t, Task) for t in tasks):
        raise ValueError("tasks must be a non-empty list of Task from simulate()")
    return tasks


def bubble_fraction(tasks: list[Task]) -> float:
    """Idle share of the stages' time between the first start and the last end."""
    tasks = _check_tasks(tasks)
    stages = 1 + max(t.stage for t in tasks)
    span = max(t.end for t in tasks) - min(t.start for t in tasks)
    busy = sum(t.end - t.start for t in tasks)
    return 1 - busy / (stages * span)


@checked
def peak_in_flight(tasks: list[Task], stage: NonNegativeInt = 0) -> int:
    """Most microbatches whose forward has run but whose backward has not, on ``stage`` (activations held)."""
    tasks = _check_tasks(tasks)
    if stage > max(t.stage for t in tasks):
        raise ValueError(f"stage {stage} is not in the schedule (stages 0..{max(t.stage for t in tasks)})")
    events = sorted(
        [(t.end, 1) for t in tasks if t.stage == stage and t.kind == "F"]
        + [(t.end, -1) for t in tasks if t.stage == stage and t.kind == "B"]
    )
    live = peak = 0
    for _, d in events:
        live += d
        peak = max(peak, live)
    return peak


@checked
def bubble_time(
    schedule: Annotated[str, OneOf(BUBBLE_SCHEDULES)],
    stages: PositiveInt,
    forward_time: PositiveFloat = 1.0,
    backward_time: PositiveFloat = 2.0,
    weight_time: NonNegativeFloat = 1.0,
    overlapped_time: PositiveFloat | None = None,
) -> float:
    """Idle time per device in one pipelined step, in the units of the pass times (see the module docstring for
    each formula and its source). ``forward_time`` and ``backward_time`` are one microbatch's forward and *whole*
    backward pass on one stage; ``weight_time`` is the weight-gradient part of the backward (at most
    ``backward_time``; ignored by ``"gpipe"`` and ``"1f1b"``, which cannot move it); ``overlapped_time`` (DualPipe
    only; ``None``: ``forward_time + backward_time``, no overlap) is a forward and a backward chunk run together,
    between ``max(forward_time, backward_time)`` and their sum. DualPipe needs an even number of stages. A formula
    that goes below zero (a weight pass longer than the gaps it fills) is clamped to 0."""
    P, tf, tb, tw = stages, forward_time, backward_time, weight_time
    if tw > tb:
        raise ValueError(f"weight_time ({tw}) must be at most backward_time ({tb}): it is a part of the backward pass")
    if overlapped_time is not None and schedule != "dualpipe":
        raise ValueError(f"overlapped_time applies to schedule 'dualpipe' only; got schedule {schedule!r}")
    if schedule in ("gpipe", "1f1b"):
        return (P - 1) * (tf + tb)
    if schedule == "zb-h1":
        return max(0.0, (P - 1) * (tf + tb - 2 * tw))
    if P % 2:
        raise ValueError(f"stages must be even for 'dualpipe' (it pairs stage i with stage P - 1 - i); got {P}")
    tfb = tf + tb if overlapped_time is None else overlapped_time
    if not max(tf, tb) <= tfb <= tf + tb:
        raise ValueError(
            f"overlapped_time must lie between max(forward_time, backward_time) = {max(tf, tb)} and "
            f"forward_time + backward_time = {tf + tb}; got {tfb}"
        )
    return max(0.0, (P // 2 - 1) * (tfb + tb - 3 * tw))


@checked
def schedule_bubble_fraction(
    schedule: Annotated[str, OneOf(BUBBLE_SCHEDULES)],
    stages: PositiveInt,
    microbatches: PositiveInt,
    forward_time: PositiveFloat = 1.0,
    backward_time: PositiveFloat = 2.0,
    weight_time: NonNegativeFloat = 1.0,
    overlapped_time: PositiveFloat | None = None,
) -> float:
    """Idle share of a step: ``bubble / (M (t_F + t_B) + bubble)`` with :func:`bubble_time`'s bubble and each
    device computing ``M`` microbatches' forward and backward passes of one stage. For ``"gpipe"`` and ``"1f1b"``
    this is ``(P − 1)/(M + P − 1)`` whatever the pass times. The zero-bubble formulas assume a full pipeline,
    ``microbatches >= stages``."""
    if schedule in ("zb-h1", "dualpipe") and microbatches < stages:
        raise ValueError(
            f"microbatches ({microbatches}) must be >= stages ({stages}) for {schedule!r}: its formula assumes the "
            "pipeline fills"
        )
    bubble = bubble_time(schedule, stages, forward_time, backward_time, weight_time, overlapped_time)
    return bubble / (microbatches * (forward_time + backward_time) + bubble)
