"""Exercises with checkers: ``check("ch01.q1", answer)`` grades a reader's answer.

Each chapter registers its exercises in ``tpu_notes/exercises/chNN.py``. An exercise's reference solution is
computed with ``tpu_notes`` (never typed in), and its checker compares a reader's answer against it with a relative
tolerance. ``None`` means "not attempted yet" and never fails a notebook.

Answers may be a number, a sequence of numbers (compared elementwise), a mapping of named numbers, or a string
(compared case-insensitively, e.g. ``"compute"`` vs ``"bandwidth"``). A reference with a ``check_program`` method
(``tpu_notes.jaxprog.ProgramCheck``) takes a function as the answer and runs it against the reference on random
inputs; its ``wrong_programs()`` are the perturbed answers the tests expect it to reject.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from numbers import Real
from typing import Any

#: Chapter modules that register exercises (``tpu_notes.exercises.chNN``), found in this package: a new chapter's
#: module (``tools/new_chapter.py`` writes it) is picked up without a list to edit.
CHAPTER_MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if re.fullmatch(r"ch\d\d", m.name)))


@dataclass(frozen=True)
class Exercise:
    """One exercise: how to compute its reference answer and how strictly to grade."""

    id: str  # "ch01.q3": chapter, then question number or name
    title: str  # a few words, shown in feedback
    solve: Callable[[], Any]  # computes the reference answer with tpu_notes
    hint: str  # shown when an answer is wrong or missing
    unit: str = ""  # unit of the answer, e.g. "s", "FLOPs", "bytes"
    rtol: float = 0.05  # relative tolerance for numbers (must stay < 1/3 so x1.5 is rejected)
    atol: float = 0.0  # absolute tolerance, for answers near zero


@dataclass(frozen=True)
class Grade:
    """The result of grading one answer."""

    exercise_id: str
    attempted: bool  # False when the answer was None
    correct: bool
    message: str  # what check() prints

    def __str__(self) -> str:
        return self.message


_REGISTRY: dict[str, Exercise] = {}
_loaded = False


def register(exercise: Exercise) -> Exercise:
    """Add ``exercise`` to the registry (ids must be unique; tolerances must reject a 1.5x error)."""
    if not isinstance(exercise, Exercise):
        raise TypeError(f"exercise must be an Exercise; got {type(exercise).__name__}")
    if exercise.id in _REGISTRY:
        raise ValueError(f"exercise id {exercise.id!r} is already registered")
    if not 0 <= exercise.rtol < 1 / 3:
        raise ValueError(f"rtol of {exercise.id} must be in [0, 1/3) so that a 1.5x error is rejected")
    _REGISTRY[exercise.id] = exercise
    return exercise


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for name in CHAPTER_MODULES:
            importlib.import_module(f"{__name__}.{name}")


def all_ids(chapter: str | None = None) -> list[str]:
    """Ids of every registered exercise, optionally only those of ``chapter`` (e.g. ``"ch01"``)."""
    _load()
    return sorted(i for i in _REGISTRY if chapter is None or i.split(".")[0] == chapter)


def get(exercise_id: str) -> Exercise:
    """The registered exercise ``exercise_id``."""
    _load()
    if not isinstance(exercise_id, str):
        raise TypeError(f"exercise_id must be a string like 'ch01.q1'; got {type(exercise_id).__name__}")
    if exercise_id not in _REGISTRY:
        chapter = exercise_id.split(".")[0]
        near = all_ids(chapter) or all_ids()
        raise ValueError(f"unknown exercise_id {exercise_id!r}; known ids include: {', '.join(near[:20])}")
    return _REGISTRY[exercise_id]


#: Reference answers already computed in this process, by exercise id. A reference is a pure function of the
#: library and the process's devices (which do not change once JAX has started), so it is computed once: grading an
#: answer (and each perturbed answer a test tries) then costs no new planner search or simulation. Failures (e.g.
#: too few devices) are not kept; a test that fakes other devices empties this store first.
_SOLVED: dict[str, tuple[Exercise, Any]] = {}


def _reference(ex: Exercise) -> Any:
    kept = _SOLVED.get(ex.id)
    if kept is None or kept[0] is not ex:  # an id registered again is solved again
        kept = _SOLVED[ex.id] = (ex, ex.solve())
    return kept[1]


def solution(exercise_id: str) -> Any:
    """The reference answer of ``exercise_id``, computed with tpu_notes (a copy: changing it changes nothing)."""
    import copy

    ref = _reference(get(exercise_id))
    if isinstance(ref, (dict, list)):
        return copy.deepcopy(ref)
    return ref


def _close(answer: float, ref: float, ex: Exercise) -> bool:
    return math.isclose(float(answer), float(ref), rel_tol=ex.rtol, abs_tol=ex.atol)


def _matches(answer: Any, ref: Any, ex: Exercise) -> tuple[bool, str]:
    """(correct, detail) comparing ``answer`` to ``ref``; raises TypeError for an answer of the wrong shape."""
    if callable(getattr(ref, "check_program", None)):  # code answers: e.g. tpu_notes.jaxprog.ProgramCheck
        return ref.check_program(answer)
    if isinstance(ref, str):
        if not isinstance(answer, str):
            raise TypeError(f"answer must be a string such as {ref!r}; got {type(answer).__name__}")
        return answer.strip().lower() == ref.strip().lower(), ""
    if isinstance(ref, bool):
        if not isinstance(answer, bool):
            raise TypeError(f"answer must be True or False; got {type(answer).__name__}")
        return answer == ref, ""
    if isinstance(ref, Real):
        if isinstance(answer, bool) or not isinstance(answer, Real):
            raise TypeError(f"answer must be a number; got {type(answer).__name__}")
        return _close(answer, ref, ex), ""
    if isinstance(ref, Mapping):
        if not isinstance(answer, Mapping) or set(answer) != set(ref):
            raise TypeError(f"answer must be a dict with keys {sorted(ref)}")
        wrong = [k for k in ref if not _matches(answer[k], ref[k], ex)[0]]
        return not wrong, (f" (check: {', '.join(map(str, wrong))})" if wrong else "")
    # a sequence of numbers (list, tuple, numpy array)
    try:
        answers = list(answer)
    except TypeError:
        raise TypeError(f"answer must be a sequence of {len(ref)} values; got {type(answer).__name__}") from None
    refs = list(ref)
    if len(answers) != len(refs):
        raise TypeError(f"answer must have {len(refs)} values; got {len(answers)}")
    wrong = [i for i, (a, r) in enumerate(zip(answers, refs)) if not _matches(a, r, ex)[0]]
    return not wrong, (f" (entries {wrong} are off)" if wrong else "")


HINT_WIDTH = 88  # columns: the book's content column shows this much without wrapping


def _hint_lines(hint: str) -> str:
    """The hint on its own lines under the verdict, indented and wrapped to ``HINT_WIDTH`` columns."""
    import textwrap

    return textwrap.fill(
        " ".join(hint.split()),
        width=HINT_WIDTH,
        initial_indent="  Hint: ",
        subsequent_indent="        ",
        break_on_hyphens=False,
    )


def _verdict(text: str) -> str:
    """A verdict line wrapped to ``HINT_WIDTH`` columns, continued two spaces in (hint lines follow unchanged)."""
    import textwrap

    first, _, rest = text.partition("\n")
    first = textwrap.fill(first, width=HINT_WIDTH, subsequent_indent="  ", break_on_hyphens=False)
    return f"{first}\n{rest}" if rest else first


def grade(exercise_id: str, answer: Any) -> Grade:
    """Grade ``answer`` for ``exercise_id`` without printing. ``None`` is "not attempted yet"."""
    ex = get(exercise_id)
    unit = f" {ex.unit}" if ex.unit else ""
    if answer is None:
        return Grade(
            exercise_id, False, False, _verdict(f"· {ex.id} ({ex.title}): not attempted yet.\n{_hint_lines(ex.hint)}")
        )
    try:
        ref = _reference(ex)
        correct, detail = _matches(answer, ref, ex)
    except TypeError as err:
        return Grade(exercise_id, True, False, _verdict(f"✗ {ex.id} ({ex.title}): {err}"))
    except RuntimeError as err:  # the reference needs devices this runtime lacks (devices.NotEnoughDevices)
        if type(err).__name__ != "NotEnoughDevices":
            raise
        return Grade(exercise_id, True, False, _verdict(f"· {ex.id} ({ex.title}): not graded here: {err}."))
    exact = isinstance(ref, (str, bool)) or not ex.rtol
    tol = "exactly" if exact else f"within {ex.rtol:.0%}"
    if callable(getattr(ref, "check_program", None)):
        tol, unit = "equal to the reference on random inputs", ""
    if correct:
        return Grade(exercise_id, True, True, _verdict(f"✓ {ex.id} ({ex.title}): correct ({tol}{unit})."))
    wrong = f"✗ {ex.id} ({ex.title}): not {tol} of the reference{detail}.\n{_hint_lines(ex.hint)}"
    return Grade(exercise_id, True, False, _verdict(wrong))


def check(exercise_id: str, answer: Any) -> None:
    """Grade ``answer`` and print ✓/✗ with the tolerance and, when wrong or missing, a hint."""
    print(grade(exercise_id, answer).message)


def wrong_answers(exercise_id: str) -> list:
    """Perturbed versions of the reference answer that the checker must reject (used by the tests).

    Numbers are scaled by 1.5, 2 and 0.5; sequences and mappings have one entry scaled at a time; strings and
    booleans use ``Exercise``-independent alternatives (the other roofline regime, the opposite truth value).
    """
    ref = solution(exercise_id)
    return list(_perturb(ref))


_OPPOSITES = {"compute": "bandwidth", "bandwidth": "compute", "memory": "compute", "comms": "compute"}


def _perturb(ref: Any):
    if callable(getattr(ref, "wrong_programs", None)):  # code answers: known-wrong programs
        yield from ref.wrong_programs()
    elif isinstance(ref, bool):
        yield not ref
    elif isinstance(ref, str):
        yield _OPPOSITES.get(ref.lower(), ref + " (wrong)")
    elif isinstance(ref, Real):
        if ref == 0:
            yield 1.0
        else:
            for factor in (1.5, 2.0, 0.5):
                yield ref * factor
    elif isinstance(ref, Mapping):
        for key in ref:
            for bad in _perturb(ref[key]):
                yield {**ref, key: bad}
    else:
        values = list(ref)
        for i, v in enumerate(values):
            for bad in _perturb(v):
                yield values[:i] + [bad] + values[i + 1 :]
