"""Tables for the page: rows under typed columns with units, shown as a real HTML table and as plain text.

A :class:`Table` is what every chapter and the CLI print when they print more than one row of numbers. It has two
renderings of the same cells:

- ``table.html()`` (what Jupyter, Colab and the HTML book show): a ``<table class="tn-table">`` with the unit in
  each column's header, numbers right-aligned in ``td.num`` cells, and a ``data-label`` on every cell so the book's
  stylesheet can stack a row's cells at phone width instead of scrolling sideways;
- ``table.text()`` (``str(table)``, what ``print`` and the CLI show, and what nbval compares): the same cells in
  aligned monospace columns.

Values are given in SI base units (seconds, bytes, FLOPs, FLOP/s, B/s, Hz) and a column picks one display prefix
for all its rows, from its largest value, so numbers in a column compare at a glance: ``Column("step", "s")``
over 0.0123 and 0.0045 prints ``step`` with ``(ms)`` under it, over 12.3 and 4.5. ``unit="%"`` takes fractions
(0.53 prints as 53). Any other unit (``"tokens/s"``, ``"$"``, ``"x"``) is printed as given, in the header.

>>> hbm = Column("HBM", "B", digits=2)
>>> cols = [Column("chip"), hbm, Column("step", "s")]
>>> rows = [("v5e", 16e9, 0.0123), ("v5p", 95e9, 0.0045)]
>>> t = Table(cols, rows, caption="Two chips")
>>> print(t)
Two chips
chip   HBM  step
      (GB)  (ms)
----  ----  ----
v5e     16  12.3
v5p     95   4.5
"""

from __future__ import annotations

import html
import math
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from numbers import Integral, Real

__all__ = ["Column", "Table"]

#: Units a column rescales with an SI prefix, and the prefixes it may pick: (factor, prefix), largest first.
_PREFIXES = {
    "s": [(1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"), (1e-12, "p")],
    "B": [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")],
    "B/s": [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")],
    "FLOPs": [(1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1.0, "")],
    "FLOP/s": [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1.0, "")],
    "OP/s": [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1.0, "")],
    "Hz": [(1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")],
    "W": [(1e6, "M"), (1e3, "k"), (1.0, "")],
}
#: Notes under a text table wrap at this many columns (or at the table's width, if wider): the book's code width.
NOTE_WIDTH = 88
#: A missing value (``None`` or NaN) prints as this.
MISSING = "—"


def _unit_with_prefix(unit: str, prefix: str) -> str:
    if unit == "FLOPs" and prefix:  # "TFLOPs" reads as a rate to many readers; "TFLOP" is the count
        return f"{prefix}FLOP"
    return f"{prefix}{unit}"


def _scales(unit: str) -> dict[str, float]:
    """Display unit → factor from the base unit, for ``unit``'s family (``{"ms": 1e-3, ...}``)."""
    return {_unit_with_prefix(unit, p): f for f, p in _PREFIXES.get(unit, [])}


@dataclass(frozen=True)
class Column:
    """One column of a :class:`Table`.

    ``name`` is the header; ``unit`` is the unit its numbers are given in (SI base units: ``"s"``, ``"B"``,
    ``"B/s"``, ``"FLOPs"``, ``"FLOP/s"``, ``"Hz"``, ``"W"`` are shown with one SI prefix for the column;
    ``"%"`` takes fractions and prints percent; anything else is a label printed as is). ``digits`` is the
    number of significant digits of the column's largest value (smaller values keep the same decimals).
    ``scale`` fixes the display unit (``"ms"``, ``"GB"``, ``"TFLOP/s"``) instead of choosing it from the values.
    ``wrap=True`` lets a column of prose (a formula, a caveat) wrap inside its cell in HTML; numbers never wrap.
    """

    name: str
    unit: str = ""
    digits: int = 3
    scale: str | None = None
    wrap: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValueError(f"name must be a non-empty string (the column's header); got {self.name!r}")
        if not isinstance(self.unit, str):
            raise TypeError(f"unit must be a string such as 's', 'B' or 'tokens/s'; got {type(self.unit).__name__}")
        if isinstance(self.digits, bool) or not isinstance(self.digits, int) or not 1 <= self.digits <= 12:
            raise ValueError(f"digits must be a whole number from 1 to 12; got {self.digits!r}")
        if self.scale is not None:
            allowed = _scales(self.unit)
            if not isinstance(self.scale, str) or self.scale not in allowed:
                choices = ", ".join(repr(s) for s in allowed) or "none: unit has no SI prefixes"
                raise ValueError(f"scale must be a display unit of {self.unit!r} ({choices}); got {self.scale!r}")
        if not isinstance(self.wrap, bool):
            raise TypeError(f"wrap must be True or False; got {type(self.wrap).__name__}")


def _significant(x: float, digits: int) -> str:
    """``x`` with ``digits`` significant digits in plain decimal notation (no exponent): 0.00087, 2710, 1.30."""
    if x == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{round(x, decimals):.{decimals}f}"


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _check_cell(row: int, column: str, value) -> None:
    if value is None or isinstance(value, (str, bool)) or _is_number(value):
        if _is_number(value) and math.isinf(float(value)):
            raise ValueError(f"rows[{row}] column {column!r}: infinite value; use None for a missing value")
        return
    raise TypeError(
        f"rows[{row}] column {column!r}: a cell must be a number, a string, a bool or None; got {type(value).__name__}"
    )


@dataclass(frozen=True)
class _Rendered:
    name: str  # "step"
    unit: str  # "ms" ("" for none)
    cells: tuple[str, ...]
    numeric: bool  # right-aligned
    wrap: bool  # HTML: prose that may wrap

    @property
    def header(self) -> str:
        return f"{self.name} ({self.unit})" if self.unit else self.name

    @property
    def css(self) -> str:
        return "num" if self.numeric else ("txt wrap" if self.wrap else "txt")


def _render_column(col: Column, values: Sequence) -> _Rendered:
    numbers = [float(v) for v in values if _is_number(v) and not math.isnan(float(v))]
    numeric = bool(numbers) or all(v is None for v in values)
    unit, factor = col.unit, 1.0
    if col.unit == "%":
        factor = 100.0
    elif col.scale is not None:
        unit, factor = col.scale, _scales(col.unit)[col.scale]
        factor = 1.0 / factor
    elif col.unit in _PREFIXES and numbers:
        largest = max(abs(v) for v in numbers)
        options = _PREFIXES[col.unit]
        f, p = next(((f, p) for f, p in options if largest >= f), options[-1])
        unit, factor = _unit_with_prefix(col.unit, p), 1.0 / f
    integral = all(isinstance(v, Integral) for v in values if _is_number(v)) and factor == 1.0
    grouped = integral and any(abs(int(v)) >= 10_000 for v in values if _is_number(v))  # 16,384 beside 2,189
    decimals = 0
    nonzero = [abs(v) * factor for v in numbers if v != 0]
    # A column whose values span more than two decades (0.87 ms beside 2710 ms) prints each with its own significant
    # digits; otherwise all share the decimals of the largest, so the column lines up on its decimal point.
    per_cell = bool(nonzero) and not integral and max(nonzero) > 100 * min(nonzero)
    if nonzero and not integral and not per_cell:
        decimals = max(0, col.digits - 1 - int(math.floor(math.log10(max(nonzero)))))
    cells = []
    for v in values:
        if v is None or (_is_number(v) and math.isnan(float(v))):
            cells.append(MISSING)
        elif isinstance(v, bool):
            cells.append("yes" if v else "no")
        elif isinstance(v, str):
            cells.append(v)
        elif integral:
            cells.append(f"{int(v):,}" if grouped else str(int(v)))
        else:
            x = float(v) * factor
            text = _significant(x, col.digits) if per_cell and x != 0 else f"{x:.{decimals}f}"
            if x != 0 and float(text) == 0:  # a small value the column's decimals would print as zero
                text = _significant(x, 2)
            cells.append(text)
    return _Rendered(col.name, unit, tuple(cells), numeric, col.wrap)


@dataclass(frozen=True)
class Table:
    """Rows of values under typed columns, with a caption, shown as HTML in a notebook and as text by ``print``.

    ``columns`` are :class:`Column` objects (a plain string is a column of that name without a unit); each row
    has one cell per column: a number in the column's SI base unit, a string, a bool (printed yes/no) or ``None``
    (printed as a dash). ``notes`` are lines printed under the table (sources, caveats). With ``collapse=True``
    the HTML rendering folds the rows under a one-line summary (the caption and the row count) that the reader
    opens; the text rendering is unchanged.
    """

    columns: tuple[Column, ...]
    rows: tuple[tuple, ...]
    caption: str = ""
    notes: tuple[str, ...] = field(default=())
    collapse: bool = False

    def __init__(
        self,
        columns: Iterable[Column | str],
        rows: Iterable[Sequence],
        caption: str = "",
        notes: Iterable[str] | str = (),
        collapse: bool = False,
    ) -> None:
        if isinstance(columns, (str, bytes)) or not isinstance(columns, Iterable):
            raise TypeError("columns must be a list of Column (or header strings)")
        cols = tuple(Column(c) if isinstance(c, str) else c for c in columns)
        if not cols:
            raise ValueError("columns must name at least one column")
        for c in cols:
            if not isinstance(c, Column):
                raise TypeError(f"columns must hold Column objects or strings; got {type(c).__name__}")
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            raise ValueError(f"columns must have distinct names; got {names}")
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
            raise TypeError("rows must be a list of rows, each a sequence of cells")
        checked = []
        for i, row in enumerate(rows):
            if isinstance(row, (str, bytes)) or not isinstance(row, Sequence):
                raise TypeError(f"rows[{i}] must be a sequence of {len(cols)} cells; got {type(row).__name__}")
            if len(row) != len(cols):
                raise ValueError(f"rows[{i}] has {len(row)} cells; the table has {len(cols)} columns ({names})")
            for c, v in zip(cols, row):
                _check_cell(i, c.name, v)
            checked.append(tuple(row))
        if not isinstance(caption, str):
            raise TypeError(f"caption must be a string; got {type(caption).__name__}")
        if not isinstance(notes, (str, Iterable)):
            raise TypeError(f"notes must be a string or a list of strings; got {type(notes).__name__}")
        note_lines = (notes,) if isinstance(notes, str) else tuple(notes)
        if not all(isinstance(n, str) for n in note_lines):
            raise TypeError("notes must be a string or a list of strings")
        if not isinstance(collapse, bool):
            raise TypeError(f"collapse must be True or False; got {type(collapse).__name__}")
        object.__setattr__(self, "columns", cols)
        object.__setattr__(self, "rows", tuple(checked))
        object.__setattr__(self, "caption", caption)
        object.__setattr__(self, "notes", note_lines)
        object.__setattr__(self, "collapse", collapse)

    def _rendered(self) -> list[_Rendered]:
        return [_render_column(c, [r[j] for r in self.rows]) for j, c in enumerate(self.columns)]

    def column(self, name: str) -> list:
        """The values of column ``name``, in row order, as given (base units)."""
        for j, c in enumerate(self.columns):
            if c.name == name:
                return [r[j] for r in self.rows]
        raise ValueError(f"name must be one of the table's columns {[c.name for c in self.columns]}; got {name!r}")

    def text(self) -> str:
        """The table as aligned plain text: caption, header, a rule, one line per row, then the notes.

        Units sit on a second header line, in parentheses, so a column is as wide as its name or its widest cell.
        """
        cols = self._rendered()
        units = [f"({c.unit})" if c.unit else "" for c in cols]
        widths = [max([len(c.name), len(u)] + [len(s) for s in c.cells]) for c, u in zip(cols, units)]

        def line(cells: Sequence[str]) -> str:
            parts = [s.rjust(w) if c.numeric else s.ljust(w) for s, w, c in zip(cells, widths, cols, strict=True)]
            return "  ".join(parts).rstrip()

        out = [self.caption] if self.caption else []
        out.append(line([c.name for c in cols]))
        if any(units):
            out.append(line(units))
        out.append("  ".join("-" * w for w in widths))
        out += [line([c.cells[i] for c in cols]) for i in range(len(self.rows))]
        width = max(NOTE_WIDTH, max(len(line) for line in out))
        out += [textwrap.fill(n, width=width, break_on_hyphens=False) for n in self.notes]
        return "\n".join(out)

    def html(self) -> str:
        """The table as an HTML ``<table class="tn-table">``: units in the headers, numbers right-aligned."""
        cols = self._rendered()
        esc = html.escape
        head = "".join(
            f'<th class="{c.css}">{esc(c.name)}'
            + (f' <span class="tn-unit">({esc(c.unit)})</span>' if c.unit else "")
            + "</th>"
            for c in cols
        )
        body = []
        for i in range(len(self.rows)):
            tds = "".join(f'<td class="{c.css}" data-label="{esc(c.header)}">{esc(c.cells[i])}</td>' for c in cols)
            body.append(f"<tr>{tds}</tr>")
        caption = f"<caption>{esc(self.caption)}</caption>" if self.caption and not self.collapse else ""
        table = f'<table class="tn-table">{caption}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'
        notes = "".join(f'<p class="tn-table-note">{esc(n)}</p>' for n in self.notes)
        if self.collapse:
            summary = f"{self.caption} ({len(self.rows)} rows)" if self.caption else f"{len(self.rows)} rows"
            return f'<details class="tn-table-details"><summary>{esc(summary)}</summary>{table}{notes}</details>'
        return f'<div class="tn-table-wrap">{table}{notes}</div>'

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        names = ", ".join(c.name for c in self.columns)
        return f"Table({self.caption!r}, columns=[{names}], {len(self.rows)} rows)"

    def _repr_html_(self) -> str:
        return self.html()

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        printer.text(self.text())
