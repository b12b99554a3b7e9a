"""Find exercises whose accepted answer a chapter already prints above the question.

    python tools/exercise_scan.py                 # list every exercise answered above, chapter by chapter
    python tools/exercise_scan.py --out FILE      # ... and write the list to FILE
    python tools/exercise_scan.py --shuffled      # false-positive rate: answers of one chapter vs another's outputs

An exercise is *answered above* when a number printed in an output of its chapter, before the markdown cell that
asks the question, matches one numeric element of the exercise's reference answer (``exercises.solution``):

- within the checker's tolerance (``Exercise.rtol`` / ``Exercise.atol``), and
- to the printed number's own precision: the reference rounded to the printed digits is the printed number
  (at most half a unit of the last printed digit away), so ``11.2`` restates 11.24 but ``11`` and ``10.9`` do not, and
- in a compatible unit: the exercise's ``unit`` (seconds, bytes, FLOPs, tokens, chips, a ratio...) against the unit
  printed after the number (``µs``, ``GB``, ``1.97e14 FLOP/s``, ``%``, ``x``, ``tokens``...), scaled by its SI prefix
  as :func:`tpu_notes.units.fmt` prints it. A bare number matches a count or a ratio, never a time or a size.

Without the precision and unit checks nearly every answer would "match" some printed number by chance; the
``--shuffled`` pairing (answers of chapter A against the outputs of chapter B) measures what coincidences remain.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from numbers import Real
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

# --- units ------------------------------------------------------------------------------------------------------

#: Dimensions with a physical unit: a printed number matches a reference of one of these only when the same
#: dimension is printed after it (a bare ``4096`` is not 4096 bytes).
DIMENSIONED = frozenset({"time", "bytes", "bandwidth", "flops", "flop_rate", "intensity", "freq", "dollars"})

_SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BIN = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}


def _printed_units() -> dict[str, tuple[str, float]]:
    """Printed unit text -> (dimension, scale to the base unit: s, B, B/s, FLOPs, FLOP/s, FLOPs/B, Hz, 1)."""
    u: dict[str, tuple[str, float]] = {}
    for name, scale in {
        "ps": 1e-12,
        "ns": 1e-9,
        "µs": 1e-6,  # micro sign (what units.fmt prints)
        "μs": 1e-6,  # Greek mu
        "us": 1e-6,
        "ms": 1e-3,
        "s": 1.0,
        "sec": 1.0,
        "secs": 1.0,
        "second": 1.0,
        "seconds": 1.0,
        "min": 60.0,
        "minutes": 60.0,
        "h": 3600.0,
        "hours": 3600.0,
        "day": 86400.0,
        "days": 86400.0,
        "year": 365.25 * 86400,
        "years": 365.25 * 86400,
    }.items():
        u[name] = ("time", scale)
    for prefix, scale in {**_SI, **_BIN}.items():
        u[f"{prefix}B"] = ("bytes", scale)
        u[f"{prefix}B/s"] = ("bandwidth", scale)
        for word in ("FLOPs", "FLOP", "OPs", "OP"):
            u[f"{prefix}{word}"] = ("flops", scale)
            u[f"{prefix}{word}/s"] = ("flop_rate", scale)
        u[f"{prefix}FLOPS"] = ("flop_rate", scale)
        u[f"{prefix}Hz"] = ("freq", scale)
    for name in ("bytes", "byte"):
        u[name] = ("bytes", 1.0)
        u[f"{name}/s"] = ("bandwidth", 1.0)
    for word in ("FLOPs", "FLOP", "OPs", "OP"):
        for per in ("B", "byte", "bytes"):
            u[f"{word}/{per}"] = ("intensity", 1.0)
    u["%"] = ("ratio", 0.01)
    u["x"] = ("ratio", 1.0)
    u["×"] = ("ratio", 1.0)
    u["USD"] = ("dollars", 1.0)
    for words, group in (
        (("tokens", "token"), "tokens"),
        (("tokens/s", "tok/s"), "tokens/s"),
        (("chips", "chip", "GPUs", "GPU", "devices", "device"), "chips"),
        (("sequences", "sequence", "seqs"), "sequences"),
        (("params", "parameters", "parameter"), "params"),
        (("hosts", "host"), "hosts"),
        (("cores", "core"), "cores"),
        (("hops", "hop"), "hops"),
        (("cycles", "cycle"), "cycles"),
        (("FLOPs/cycle",), "flops/cycle"),
        (("copies", "copy"), "copies"),
        (("elements", "element"), "elements"),
        (("rows", "row"), "rows"),
        (("levels", "level"), "levels"),
        (("pods", "pod"), "pods"),
        (("QPS", "requests/s", "req/s"), "qps"),
    ):
        for w in words:
            u[w] = (f"count:{group}", 1.0)
    return u


PRINTED_UNITS = _printed_units()

#: Unit strings of ``Exercise.unit`` (one item of a comma-separated list) -> (dimension, scale of the reference to
#: the base unit). ``None``: no unit to go by (``"mixed"``, ``"per step"``), read the answer's key instead.
EXERCISE_UNITS: dict[str, tuple[str, float] | None] = {
    "s": ("time", 1.0),
    "s for 'step'": ("time", 1.0),
    "days": ("time", 86400.0),
    "years": ("time", 365.25 * 86400),
    "bytes": ("bytes", 1.0),
    "B": ("bytes", 1.0),
    "B per link direction": ("bytes", 1.0),
    "B/s": ("bandwidth", 1.0),
    "FLOPs": ("flops", 1.0),
    "OPs": ("flops", 1.0),
    "FLOPs per token": ("flops", 1.0),
    "FLOP/s": ("flop_rate", 1.0),
    "FLOPs/byte": ("intensity", 1.0),
    "OPs/byte": ("intensity", 1.0),
    "FLOPs/cycle": ("count:flops/cycle", 1.0),
    "Hz": ("freq", 1.0),
    "$": ("dollars", 1.0),
    "$ per million tokens": ("dollars", 1.0),
    "": ("ratio", 1.0),
    "x": ("ratio", 1.0),
    "ratio": ("ratio", 1.0),
    "ratios": ("ratio", 1.0),
    "fraction": ("ratio", 1.0),
    "fractions": ("ratio", 1.0),
    "fraction of the training FLOPs": ("ratio", 1.0),
    "tokens": ("count:tokens", 1.0),
    "tokens per chip": ("count:tokens", 1.0),
    "tokens/GPU": ("count:tokens", 1.0),
    "tokens/s": ("count:tokens/s", 1.0),
    "tokens/s per chip": ("count:tokens/s", 1.0),
    "tokens/s/chip": ("count:tokens/s", 1.0),
    "chips": ("count:chips", 1.0),
    "GPUs": ("count:chips", 1.0),
    "sequences": ("count:sequences", 1.0),
    "parameters": ("count:params", 1.0),
    "params": ("count:params", 1.0),
    "hosts": ("count:hosts", 1.0),
    "cores": ("count:cores", 1.0),
    "hops": ("count:hops", 1.0),
    "cycles": ("count:cycles", 1.0),
    "copies": ("count:copies", 1.0),
    "elements": ("count:elements", 1.0),
    "rows": ("count:rows", 1.0),
    "levels": ("count:levels", 1.0),
    "pods": ("count:pods", 1.0),
    "shapes": ("count:shapes", 1.0),
    "device ids": ("count:device ids", 1.0),
    "requests/s": ("count:qps", 1.0),
    "QPS/chip": ("count:qps", 1.0),
    "mixed": None,
    "per step": None,
}

#: What a key of a mapping answer says about its unit, checked in order (``"step_4x2_s"`` is a time).
_KEY_HINTS: tuple[tuple[str, tuple[str, float]], ...] = (
    (r"bytes|hbm", ("bytes", 1.0)),
    (r"dollars", ("dollars", 1.0)),
    (r"days", ("time", 86400.0)),
    (r"years", ("time", 365.25 * 86400)),
    (r"(^|_)s$|seconds|^step$", ("time", 1.0)),
    (r"tokens_per_s", ("count:tokens/s", 1.0)),
    (r"flops_per|flops$", ("flops", 1.0)),
    (r"ratio|fraction|mfu|imbalance|speedup", ("ratio", 1.0)),
    (r"tokens|critical_batch|crit", ("count:tokens", 1.0)),
    (r"chips|gpus|tensor|tp|fsdp", ("count:chips", 1.0)),
    (r"batch|sequences", ("count:sequences", 1.0)),
    (r"params", ("count:params", 1.0)),
)

#: Any count (a key with no hint under a unit of ``"mixed"``): matches a bare number or any counted word.
ANY_COUNT = ("count:*", 1.0)


def compatible(reference_dim: str, printed_dim: str) -> bool:
    """Whether a number printed in ``printed_dim`` can state a reference in ``reference_dim``.

    ``printed_dim`` is ``"bare"`` for a number printed without a unit: it states a count or a ratio (a table's
    column, ``Y < 11.2``), never a time, a size or a rate, whose unit units.fmt always prints.
    """
    if reference_dim in DIMENSIONED:
        return printed_dim == reference_dim
    if printed_dim == "bare":
        return True
    if reference_dim == "ratio":
        return printed_dim == "ratio"
    if reference_dim == "count:*":
        return printed_dim.startswith("count:")
    return printed_dim == reference_dim or printed_dim == "count:*"


# --- printed numbers --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Printed:
    """A number printed in an output: its value in the base unit and the half-unit of its last printed digit."""

    value: float  # in the base unit of ``dim`` (seconds, bytes, ...; a fraction for %)
    dim: str  # a dimension of PRINTED_UNITS, or "bare"
    half_ulp: float  # half a unit of the last printed digit, in the base unit
    text: str  # the number as printed, with its unit
    integer_like: bool  # printed without a decimal point, an exponent or a prefix
    digits: int  # significant digits printed ("0.25": 2, "560": 3, "8 GB": 1)


_UNIT_ALT = "|".join(re.escape(k) for k in sorted(PRINTED_UNITS, key=len, reverse=True))
_NUMBER = re.compile(
    r"(?<![\w.\-/^])(?P<dollar>\$\s?)?"
    r"(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?(?:[eE](?P<exp>[-+]?\d+))?"
    r"(?:(?P<mult>[kKMBT])(?![\w])|(?P<space>\s?)(?P<unit>" + _UNIT_ALT + r")(?![\w]))?"
    r"(?P<after>[\w.@]?)"
)


def printed_numbers(text: str) -> list[Printed]:
    """Every number in ``text`` with its unit, scaled to the base unit (``"560 µs"`` -> 5.6e-4 s).

    A number glued to letters (``v5p``, ``llama3-70b``, ``16x16x16`` after the first 16) or to a dot is part of a
    name and is skipped; ``16M``/``70B`` after a number is a count in millions/billions; ``$`` before it is dollars.
    """
    found = []
    for m in _NUMBER.finditer(text):
        if m["after"]:  # e.g. "3rd", "1.2.3", "2048@Y": part of a word, version or shape, not a quantity
            continue
        digits = m["int"].replace(",", "")
        frac = m["frac"] or ""
        exp = int(m["exp"]) if m["exp"] else 0
        mantissa = float(digits + frac)
        half = 0.5 * 10.0 ** (-(len(frac) - 1 if frac else 0))
        dim, scale = "bare", 1.0
        if m["mult"]:
            dim, scale = "count:*", {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[m["mult"]]
        elif m["unit"]:
            unit = m["unit"]
            if unit in ("x", "×") and m["space"]:  # "8 x H100", "16 × 16": a product, not a ratio
                unit = None
            if unit is not None:
                dim, scale = PRINTED_UNITS[unit]
        if m["dollar"]:
            dim = "dollars"
        scale *= 10.0**exp
        integer_like = not frac and not m["exp"] and not m["mult"] and scale == 1.0
        start = m.start("int")
        if dim == "bare":
            label = re.search(r"(\w+)\s*=\s*$", text[:start])
            if label and label[1] in _LABELS:  # "batch=32", "n_chips=16": the field names the count
                if integer_like and _power_of_two(mantissa):
                    continue  # "seq_len=4096", "batch=64": a setting of a repr, see matches()
                dim = _LABELS[label[1]]
        if dim == "bare" and integer_like:
            end = m.end("int")
            if _in_shape(text, start, end):
                continue  # "(32, 8)", "float32[8, 1024]", "[64, 32, 16]": a shape or a list of settings
            if re.match(r"\s*[×x]\s", text[end:]) or re.search(r"[×x]\s+$", text[:start]):
                continue  # "32 × 8192 × ...", "8960 x v5p": a factor of a product, a setting
        found.append(
            Printed(
                value=mantissa * scale,
                dim=dim,
                half_ulp=half * scale,
                text=m.group(0).strip(),
                integer_like=integer_like,
                digits=len((digits + frac.lstrip(".")).lstrip("0")) or 1,
            )
        )
    return found


#: Field names before ``=`` that say what a bare count counts (reprs print ``batch=32, n_chips=16``).
_LABELS = {
    "batch": "count:sequences",
    "n_chips": "count:chips",
    "chips": "count:chips",
    "seq_len": "count:tokens",
    "tokens": "count:tokens",
}


def _in_shape(text: str, start: int, end: int) -> bool:
    """Whether the whole number at text[start:end] is an item of a bracketed tuple, list or shape."""
    before, after = text[:start].rstrip(), text[end:].lstrip()
    return (before[-1:] in ("(", "[") and after[:1] in (",", ")", "]")) or (
        before[-1:] == "," and after[:1] in (",", ")", "]") and re.search(r"[(\[][^()\[\]]*$", before) is not None
    )


#: A grade's verdict line (``· ch05.q7 (title): not attempted yet.``, ``✓ ...``, ``✗ ...``): it names the exercise's
#: title, which quotes the question's givens (a "3.5M-token batch"), never a computed answer.
_VERDICT = re.compile(r"^\s*[·✓✗] ch\d+\.\w+ \(")

_TAG = re.compile(r"<[^>]+>")


def output_lines(cell: Mapping[str, Any]) -> list[str]:
    """The text lines a reader sees in ``cell``'s outputs: streams, text/plain, and text/html with tags stripped."""
    lines: list[str] = []
    for out in cell.get("outputs", []):
        chunks = []
        if out.get("output_type") == "stream":
            chunks.append(_join(out.get("text", "")))
        data = out.get("data", {})
        if "text/plain" in data:
            chunks.append(_join(data["text/plain"]))
        if "text/html" in data:
            raw = _join(data["text/html"])
            raw = re.sub(r"(?is)<(script|style)\b.*?</\1>", "", raw)
            raw = re.sub(r"(?i)</t[dh]>", "  ", raw)
            raw = re.sub(r"(?i)<br\s*/?>|</tr>|</p>|</div>|</caption>", "\n", raw)
            chunks.append(html.unescape(_TAG.sub("", raw)))
        for chunk in chunks:
            lines += [ln for ln in chunk.splitlines() if ln.strip()]
    return lines


def _join(text: str | list[str]) -> str:
    return "".join(text) if isinstance(text, list) else text


# --- references -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Element:
    """One number of an exercise's reference answer, in the base unit of its dimension."""

    path: str  # "" for a single number, else the key or index ("days", "[2]", "batch[0]")
    value: float  # the reference, scaled to the base unit (days -> seconds)
    scale: float  # the base units per reference unit, to scale the tolerance's atol
    dims: tuple[str, ...]  # the dimensions it may be printed in


def _unit_items(unit: str) -> list[str]:
    return [p.strip() for p in unit.strip().strip("[]{}").split(",")] if unit.strip() else [""]


def _key_dims(key: str) -> tuple[str, float] | None:
    k = key.lower()
    for pattern, dim in _KEY_HINTS:
        if re.search(pattern, k):
            return dim
    return None


def trivial(value: Any) -> bool:
    """Numbers no scan can judge: booleans and small whole numbers (|x| <= 16).

    A small whole number (a tensor degree of 4, 8 stages, 3 ring shapes) is printed all over a chapter as
    a count of something else, so a printed ``4`` is no evidence that the answer 4 was given away; these
    exercises are judged by reading, not by this scan.
    """
    return isinstance(value, bool) or (float(value).is_integer() and abs(float(value)) <= 16)


def elements(unit: str, reference: Any) -> list[Element]:
    """The numeric elements of ``reference`` with the dimensions ``unit`` allows for each.

    Strings, booleans, programs and small whole numbers (:func:`trivial`) are left out: a string ("compute") or a
    boolean cannot be "printed above" in a way a scan of numbers could judge, a program is code, and a small whole
    number matches half the counts on any page.
    """
    items = _unit_items(unit)
    known = [EXERCISE_UNITS.get(i, ANY_COUNT) for i in items]
    out: list[Element] = []

    def visit(path: str, value: Any, dim: tuple[str, float] | None) -> None:
        if isinstance(value, bool) or isinstance(value, str) or callable(getattr(value, "check_program", None)):
            return
        if isinstance(value, Mapping):
            for k, v in value.items():
                visit(f"{path}.{k}" if path else str(k), v, dim)
            return
        if isinstance(value, (list, tuple)) or hasattr(value, "__array__") and getattr(value, "ndim", 0):
            for n, v in enumerate(list(value)):
                visit(f"{path}[{n}]", v, dim)
            return
        try:
            x = float(value)
        except (TypeError, ValueError):
            return
        if not math.isfinite(x) or trivial(value):
            return
        dims = [dim] if dim is not None else [d for d in known if d is not None] or [ANY_COUNT]
        for d in dims:
            out.append(Element(path=path, value=x * d[1], scale=d[1], dims=(d[0],)))

    top = list(reference.items()) if isinstance(reference, Mapping) else None
    if top is None and isinstance(reference, (list, tuple)):
        top = [(f"[{n}]", v) for n, v in enumerate(reference)]
    if top is None:
        visit("", reference, known[0] if len(known) == 1 else None)
        return out
    for n, (key, value) in enumerate(top):
        path = key if isinstance(reference, (list, tuple)) else str(key)
        hint = _key_dims(str(key)) if isinstance(reference, Mapping) else None
        if len(known) == 1 and known[0] is not None:
            dim = known[0]
        elif hint is not None and (len(known) != len(top) or known[n] is None):
            dim = hint  # a list of units that does not line up: the key says it
        elif len(known) == len(top):
            dim = known[n] if known[n] is not None else (hint or ANY_COUNT)
        else:
            dim = None  # any unit of the list
        visit(path, value, dim)
    return out


def _power_of_two(x: float) -> bool:
    return x > 0 and float(x).is_integer() and (int(x) & (int(x) - 1)) == 0


def matches(element: Element, printed: Printed, rtol: float, atol: float) -> bool:
    """Whether ``printed`` states ``element``: same dimension, within the checker's tolerance, and equal to it
    at the printed precision (at most half a unit of the last printed digit away)."""
    if not any(compatible(d, printed.dim) for d in element.dims):
        return False
    if printed.digits < (3 if printed.dim == "bare" else 2):
        return False  # "8 GB", "6 µs", a bare "0.42" or "13": too few digits, they match a 5% answer by chance
    if printed.dim == "bare" and printed.integer_like and _power_of_two(element.value):
        return False  # a bare 1024 or 4096 is a size everything is configured in (shapes, batches, slices)
    ref, got = abs(element.value), printed.value
    if abs(ref - got) > printed.half_ulp * (1 + 1e-9) + 1e-12 * max(ref, got):
        return False
    return math.isclose(got, ref, rel_tol=rtol, abs_tol=atol * element.scale)


# --- chapters ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Offence:
    """An exercise whose answer a chapter prints above its question."""

    exercise_id: str
    element: Element
    unit: str  # the exercise's unit string
    cell_id: str  # the cell whose output prints it
    cell_index: int
    line: str  # the output line
    printed: Printed
    solution: bool  # the printing cell is an earlier exercise's (collapsed) solution

    def message(self) -> str:
        ref = self.element.value / self.element.scale
        what = f"{self.exercise_id}{'.' + self.element.path if self.element.path else ''}"
        where = f"cell {self.cell_id}" + (" (a solution)" if self.solution else "")
        return f"{what}'s answer {ref:.4g} {self.unit} is printed above it in {where}: {self.line.strip()!r}"


def _source(cell: Mapping[str, Any]) -> str:
    return _join(cell.get("source", ""))


def exercise_cells(nb: Mapping[str, Any]) -> dict[str, int]:
    """Exercise id -> index of the markdown cell that asks it (the ``Exercise N.M`` heading above its first
    ``exercises.check``); outputs before that cell are "printed above" the exercise."""
    cells = nb["cells"]
    where: dict[str, int] = {}
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        for ex_id in re.findall(r'exercises\.check\(\s*"([\w.]+)"', _source(cell)):
            if ex_id in where:
                continue
            m = re.match(r"ch(\d+)\.q(\d+)", ex_id)
            heading = None
            for j in range(i - 1, -1, -1):
                if cells[j]["cell_type"] != "markdown":
                    continue
                src = _source(cells[j])
                if m and re.search(rf"Exercise {int(m[1])}\.{int(m[2])}(?!\d)", src):
                    heading = j
                    break
                if heading is None and re.search(r"Exercise \d+\.\d+", src):
                    heading = j  # the nearest exercise heading, if none names this number
            where[ex_id] = heading if heading is not None else i
    return where


def scan(nb: Mapping[str, Any], references: Mapping[str, tuple[Any, Any]]) -> list[Offence]:
    """Every (exercise, printed number) pair where an output above the exercise's question states its answer.

    ``references`` maps exercise id -> (Exercise, reference answer); ids the notebook does not check are ignored.
    """
    cells = nb["cells"]
    printed_by_cell = []
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        is_solution = _source(cell).lstrip().startswith("# Solution")
        if "nbval-ignore-output" in cell.get("metadata", {}).get("tags", []):
            # a measured timing: this machine's number, not the library's, so a match there is chance
            continue
        for line in output_lines(cell):
            if _VERDICT.match(line):
                continue
            for p in printed_numbers(line):
                printed_by_cell.append((i, cell.get("id", f"#{i}"), line, p, is_solution))
    found = []
    for ex_id, asked in exercise_cells(nb).items():
        if ex_id not in references:
            continue
        ex, ref = references[ex_id]
        for el in elements(ex.unit, ref):
            for i, cid, line, p, sol in printed_by_cell:
                if i < asked and matches(el, p, ex.rtol, ex.atol):
                    found.append(Offence(ex_id, el, ex.unit, cid, i, line, p, sol))
    return found


def first_per_element(offences: Iterable[Offence]) -> list[Offence]:
    """One offence per (exercise, element): the first output that prints it."""
    seen, out = set(), []
    for o in offences:
        key = (o.exercise_id, o.element.path)
        if key not in seen:
            seen.add(key)
            out.append(o)
    return out


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def chapter_of(path: Path) -> str:
    return "ch" + path.name[:2]


def references(chapter: str | None = None) -> dict[str, tuple[Any, Any]]:
    """Exercise id -> (Exercise, reference answer) for ``chapter`` (all chapters if None); unsolvable ones skipped."""
    from tpu_notes import exercises

    out = {}
    for ex_id in exercises.all_ids(chapter):
        try:
            out[ex_id] = (exercises.get(ex_id), exercises.solution(ex_id))
        except RuntimeError as err:  # too few devices here: the test runs with 8
            if type(err).__name__ != "NotEnoughDevices":
                raise
    return out


def report(offences: list[Offence]) -> str:
    lines = []
    by_chapter: dict[str, list[Offence]] = {}
    for o in first_per_element(offences):
        by_chapter.setdefault(o.exercise_id.split(".")[0], []).append(o)
    for chapter in sorted(by_chapter):
        found = by_chapter[chapter]
        ids = sorted(
            {o.exercise_id for o in found}, key=lambda i: [int(n) if n.isdigit() else n for n in re.split(r"(\d+)", i)]
        )
        lines.append(f"{chapter}: {len(ids)} exercise(s) answered above: {', '.join(ids)}")
        for o in sorted(found, key=lambda o: (ids.index(o.exercise_id), o.element.path)):
            lines.append(f"  {o.message()}")
        lines.append("")
    return "\n".join(lines)


def _with_checks(nb: Mapping[str, Any], ids: Iterable[str]) -> dict[str, Any]:
    """``nb`` with a question after its last cell checking each of ``ids``: every output of ``nb`` is above them."""
    asks = [{"cell_type": "markdown", "source": "### the questions"}]
    asks += [{"cell_type": "code", "source": f'exercises.check("{i}", None)', "outputs": []} for i in ids]
    return {"cells": list(nb["cells"]) + asks}


def _numeric(refs: Mapping[str, tuple[Any, Any]]) -> list[str]:
    return [i for i, (ex, ref) in refs.items() if elements(ex.unit, ref)]


def shuffled_rate(refs: Mapping[str, tuple[Any, Any]]) -> tuple[int, int, list[str]]:
    """(matched, pairs, examples) over every (exercise of chapter A, all outputs of chapter B), A != B.

    An exercise of A is placed after every output of B. B never computed A's answers, so a match is either chance or
    a quantity both chapters print (the v5e critical batch, a pod's chip count): an upper bound on coincidences."""
    paths = notebooks()
    hits, pairs, examples = 0, 0, []
    for b in paths:
        nb_b = json.loads(b.read_text())
        for a in paths:
            if a == b:
                continue
            own = {i: refs[i] for i in _numeric(refs) if i.startswith(chapter_of(a) + ".")}
            got = first_per_element(scan(_with_checks(nb_b, own), own))
            matched = {o.exercise_id for o in got}
            pairs += len(own)
            hits += len(matched)
            examples += [f"{b.stem} vs {o.message()}" for o in got]
    return hits, pairs, examples


def _scaled(value: Any, factor: float) -> Any:
    if isinstance(value, Mapping):
        return {k: _scaled(v, factor) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scaled(v, factor) for v in value]
    if isinstance(value, Real) and not trivial(value):
        return float(value) * factor
    return value


def perturbed_rate(
    refs: Mapping[str, tuple[Any, Any]], factors: Iterable[float] = (0.7, 0.83, 1.21, 1.37)
) -> tuple[int, int, list[str]]:
    """(matched, tries, examples): every answer scaled by each factor, scanned against its own chapter.

    A scaled answer is a number nobody computed, so every match is a coincidence of the scan: the chance that an
    exercise is flagged although its page does not print its answer."""
    hits, tries, examples = 0, 0, []
    for path in notebooks():
        nb = json.loads(path.read_text())
        own = [i for i in _numeric(refs) if i.startswith(chapter_of(path) + ".")]
        for f in factors:
            fake = {i: (refs[i][0], _scaled(refs[i][1], f)) for i in own}
            got = first_per_element(scan(nb, fake))
            hits += len({o.exercise_id for o in got})
            tries += len(own)
            examples += [f"x{f}: {o.message()}" for o in got]
    return hits, tries, examples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="also write the list to this file")
    parser.add_argument("--shuffled", action="store_true", help="measure the false-positive rate on shuffled pairs")
    args = parser.parse_args(argv)
    refs = references()
    offences = []
    for path in notebooks():
        offences += scan(json.loads(path.read_text()), refs)
    text = report(offences)
    print(text)
    if args.out:
        args.out.write_text(text)
    if args.shuffled:
        hits, pairs, examples = shuffled_rate(refs)
        print(f"shuffled pairing: {hits} of {pairs} (exercise, other chapter) pairs match ({hits / pairs:.1%})")
        for e in examples:
            print("  " + e)
        hits, tries, examples = perturbed_rate(refs)
        print(f"perturbed answers: {hits} of {tries} (exercise, factor) tries match ({hits / tries:.1%})")
        for e in examples:
            print("  " + e)
    return 1 if offences else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
