"""A Sphinx extension of the book: a dataclass field's source comment becomes its entry in the API pages.

The package documents a dataclass field where it is declared, in a trailing comment that carries the unit::

    bandwidth: float  # bytes/s, one direction

Autodoc keeps only the annotation, so the reference page said ``bandwidth (float)`` and the unit was lost. On
``autodoc-process-docstring`` this extension reads the class's source, takes each field's trailing comment (or,
when the line has none, the plain ``#`` comment block right above it; ``#:`` comments are autodoc's own and are left
to it) and appends ``:param field: comment`` to the class docstring, so the page reads
``bandwidth (float) – bytes/s, one direction``. A field the docstring already describes (``:param x:`` or a
Napoleon ``Args``/``Attributes`` entry naming it) is left as written.

    field_comments(cls) -> {field name: comment text}   # also used by tests/test_api_pages.py
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import re
import textwrap
import tokenize

#: characters that mean something in reStructuredText inline markup; a comment is plain text, so they are escaped
_RST_SPECIAL = re.compile(r"([\\`*|_])")


def field_comments(cls) -> dict[str, str]:
    """The comment of each field of dataclass ``cls``, keyed by field name, in declaration order.

    Only fields declared in ``cls`` itself are read (an inherited field is documented on its own class). A field
    without a comment is absent from the result.
    """
    if not (inspect.isclass(cls) and dataclasses.is_dataclass(cls)):
        raise TypeError(f"cls must be a dataclass type; got {cls!r}")
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comments: dict[int, str] = {}  # 1-based line -> comment text (without the leading '#')
    columns: dict[int, int] = {}  # 1-based line -> the comment's column
    trailing: set[int] = set()  # lines whose comment follows code
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            comments[row] = tok.string[1:].strip()
            columns[row] = col
            if lines[row - 1][:col].strip():
                trailing.add(row)
    tree = ast.parse(source)
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    own = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, str] = {}
    for node in body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        name = node.target.id
        if name not in own:
            continue
        text = ""
        if node.lineno in trailing:
            parts = [comments[node.lineno]]
            # a comment continued on the following comment-only lines, aligned with it
            row = node.end_lineno + 1
            while row in comments and row not in trailing and columns[row] == columns[node.lineno]:
                parts.append(comments[row])
                row += 1
            text = " ".join(p for p in parts if p)
        else:
            above, row = [], node.lineno - 1
            while row in comments and row not in trailing and not lines[row - 1].lstrip().startswith("#:"):
                above.insert(0, comments[row])
                row -= 1
            text = " ".join(p for p in above if p)
        if text and not text.startswith(("noqa", "type:", "pragma")):
            out[name] = text
    return out


def _escape(text: str) -> str:
    return _RST_SPECIAL.sub(r"\\\1", text)


def _documented(lines: list[str], name: str) -> bool:
    pattern = re.compile(rf"^\s*(:param\s+(\S+\s+)?{re.escape(name)}:|{re.escape(name)}\s*(\(.*\))?\s*:)")
    return any(pattern.match(line) for line in lines)


def _add_field_comments(app, what, name, obj, options, lines):
    if what != "class" or not (inspect.isclass(obj) and dataclasses.is_dataclass(obj)):
        return
    comments = field_comments(obj)
    extra = [f":param {field}: {_escape(text)}" for field, text in comments.items() if not _documented(lines, field)]
    if extra:
        if lines and lines[-1].strip():
            lines.append("")
        lines.extend(extra)


def setup(app):
    app.connect("autodoc-process-docstring", _add_field_comments)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
