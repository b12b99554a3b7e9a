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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..units import NonNegativeInt, OneOf, PositiveFloat, capped, checked

SCHEDULE_NAMES = ("gpipe", "1f1b")
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
