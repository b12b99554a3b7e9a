"""tpu_notes.table: one table, two renderings that agree, a prefix per column, refusals that name the argument."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from tpu_notes.table import MISSING, Column, Table


def _cells_from_html(markup: str) -> list[list[tuple[str, str]]]:
    """(class, text) of every th/td, row by row, read back with the standard library's HTML parser."""

    class Reader(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.cell = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            if tag in ("td", "th"):
                self.cell = [dict(attrs).get("class", ""), ""]

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append(tuple(self.cell))
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell[1] += data

    reader = Reader()
    reader.feed(markup)
    return reader.rows


TABLE = Table(
    [Column("layout"), Column("step", "s"), Column("HBM", "B"), Column("MFU", "%"), Column("chips")],
    [("fsdp=1024 tp=2", 0.0123, 93.9e9, 0.532, 2048), ("dp=8", 0.0045, 22.9e9, None, 16)],
    caption="Two layouts",
    notes="Peak memory per chip.",
)


def test_text_and_html_show_the_same_cells():
    text_rows = [re.split(r"\s{2,}", line.strip()) for line in TABLE.text().splitlines()[4:6]]
    html_rows = [[c for _, c in row] for row in _cells_from_html(TABLE.html())[1:]]
    assert text_rows == html_rows
    assert html_rows[0] == ["fsdp=1024 tp=2", "12.3", "93.9", "53.2", "2048"]
    assert html_rows[1][3] == MISSING


def test_units_go_in_the_header_with_one_prefix_per_column():
    header = [c for _, c in _cells_from_html(TABLE.html())[0]]
    assert header == ["layout", "step (ms)", "HBM (GB)", "MFU (%)", "chips"]
    # the column's prefix follows its largest value: 12.3 ms sets ms, so 4.5 ms is not shown as 4500 µs
    t = Table([Column("t", "s")], [(2.0,), (0.004,)])
    assert [h.strip() for h in t.text().splitlines()[:2]] == ["t", "(s)"]  # unit under the name
    assert t.column("t") == [2.0, 0.004]


def test_numbers_are_right_aligned_and_text_left_aligned():
    classes = [[k for k, _ in row] for row in _cells_from_html(TABLE.html())]
    assert all(row == ["txt", "num", "num", "num", "num"] for row in classes)
    lines = TABLE.text().splitlines()
    assert lines[4].startswith("fsdp=1024 tp=2") and lines[5].startswith("dp=8 ")
    # right-aligned: every value of the chips column ends in the same text column
    ends = {line.rstrip().rfind(cell) + len(cell) for line, cell in zip(lines[4:6], ["2048", "16"])}
    assert len(ends) == 1


def test_every_cell_carries_its_header_for_the_stacked_phone_layout():
    labels = re.findall(r'data-label="([^"]*)"', TABLE.html())
    assert labels == ["layout", "step (ms)", "HBM (GB)", "MFU (%)", "chips"] * 2


def test_a_fixed_scale_and_a_collapsed_table():
    t = Table([Column("m", "B", scale="MB")], [(2e9,)], caption="Big", collapse=True)
    assert "(MB)" in t.text() and "2000" in t.text()
    markup = t.html()
    assert markup.startswith("<details") and "<summary>Big (1 rows)</summary>" in markup


def test_whole_numbers_group_thousands_alike_down_a_column():
    t = Table([Column("tokens")], [(2189,), (63040,)])
    assert t.column("tokens") == [2189, 63040]
    assert [c for _, c in _cells_from_html(t.html())[1:][0]] == ["2,189"]


def test_a_prose_column_may_wrap_in_html_but_numbers_never_do():
    t = Table([Column("formula", wrap=True), Column("chapter")], [("T = max(FLOPs / C, bytes / W)", 1)])
    classes = [k for k, _ in _cells_from_html(t.html())[1]]
    assert classes == ["txt wrap", "num"]


def test_long_notes_wrap_at_the_book_width_in_text():
    t = Table(["a"], [("x",)], notes="word " * 40)
    assert max(len(line) for line in t.text().splitlines()) <= 88 and len(t.text().splitlines()) > 4


def test_markup_is_escaped():
    t = Table(["name"], [("<b>&</b>",)])
    assert "<b>" not in t.html() and "&lt;b&gt;&amp;" in t.html()


def test_a_column_spanning_decades_keeps_significant_digits_in_every_cell():
    t = Table([Column("t", "s")], [(2.71,), (0.00087,), (1.3,)])
    assert [c for row in _cells_from_html(t.html())[1:] for _, c in row] == ["2.71", "0.000870", "1.30"]


def test_a_small_value_is_not_printed_as_zero():
    t = Table([Column("t", "s")], [(0.5,), (2e-6,)])
    assert "0.000" not in t.text().split()[-1] and float(t.text().split()[-1]) == pytest.approx(0.002, rel=0.01)


def test_notebooks_get_html_and_text_reprs():
    assert TABLE._repr_html_() == TABLE.html()

    class Printer:
        out = ""

        def text(self, s):
            Printer.out += s

    TABLE._repr_pretty_(Printer(), False)
    assert Printer.out == str(TABLE)


@pytest.mark.parametrize(
    "kwargs, arg",
    [
        (dict(columns=[], rows=[]), "columns"),
        (dict(columns=["a", "a"], rows=[]), "columns"),
        (dict(columns=["a"], rows=[(1, 2)]), "rows"),
        (dict(columns=["a"], rows=[(object(),)]), "rows"),
        (dict(columns=["a"], rows=[(float("inf"),)]), "rows"),
        (dict(columns=["a"], rows=[], caption=3), "caption"),
        (dict(columns=["a"], rows=[], notes=[3]), "notes"),
        (dict(columns=["a"], rows=[], collapse="yes"), "collapse"),
    ],
)
def test_refusals_name_the_argument(kwargs, arg):
    with pytest.raises((TypeError, ValueError), match=arg):
        Table(**kwargs)


def test_column_refusals():
    with pytest.raises(ValueError, match="scale"):
        Column("m", "B", scale="ms")
    with pytest.raises(ValueError, match="digits"):
        Column("m", digits=0)
    with pytest.raises(TypeError, match="wrap"):
        Column("m", wrap="yes")
    with pytest.raises(ValueError, match="name"):
        Table(["a"], []).column("b")
