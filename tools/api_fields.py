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

It also prints each parameter's type plainly. The package declares what an argument allows as an annotated kind
(``PositiveFloat = Annotated[float, Positive()]``, :mod:`tpu_notes.units`), and autodoc printed that annotation
whole: ``Annotated[float, Positive(integer=False, ...)]``. After autodoc records a signature's types
(``autodoc-process-signature``), every annotation holding a kind is replaced by the type and the constraint in
words (:func:`plain_type`: ``float > 0``, ``int >= 1``, ``int in [1, 4096]``, ``one of 'data', 'fsdp'``), and that
text is shown as written rather than read as the name of a class to link (``object-description-transform``).

    plain_type(annotation) -> str | None   # None: the annotation holds no kind (autodoc's own text is kept)
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import math
import re
import textwrap
import tokenize
import types
import typing

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


# ------------------------------------------------------------------------------------------ plain parameter types
#: The type texts :func:`_plain_signature` wrote: shown as written, never looked up as a class name.
_PLAIN: set[str] = set()


def _number(x: float) -> str:
    """A bound as a reader writes it: ``4096``, ``67,108,864``, ``0.5``, ``1.2e15``."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))
    return f"{x:.4g}".replace("e+0", "e").replace("e+", "e")


def _name(tp) -> str:
    """A type's short name: ``float``, ``TransformerConfig``, ``tuple[int, ...]``."""
    if tp is type(None):
        return "None"
    if tp is Ellipsis:
        return "..."
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_name(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join(_name(a) for a in typing.get_args(tp))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]" if args else getattr(origin, "__name__", str(tp))
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _kind_text(base, kind) -> str:
    """One kind of :mod:`tpu_notes.units` on a ``base`` type, in words."""
    from tpu_notes import units

    if isinstance(kind, units.Positive):
        name = "int" if kind.integer or base is int else _name(base)
        low = ("0" if kind.allow_zero else "1") if name == "int" else "0"
        if kind.maximum is not None and math.isfinite(kind.maximum):
            opening = "[" if kind.allow_zero or name == "int" else "("
            return f"{name} in {opening}{low}, {_number(kind.maximum)}]"
        if name == "int":
            return f"int >= {low}"
        return f"{name} {'>=' if kind.allow_zero else '>'} 0"
    if isinstance(kind, units.Range):
        name = "int" if kind.integer or base is int else _name(base)
        if math.isinf(kind.high):
            return f"{name} {'>' if kind.low_open else '>='} {_number(kind.low)}"
        if math.isinf(kind.low):
            return f"{name} {'<' if kind.high_open else '<='} {_number(kind.high)}"
        lo, hi = "(" if kind.low_open else "[", ")" if kind.high_open else "]"
        return f"{name} in {lo}{_number(kind.low)}, {_number(kind.high)}{hi}"
    if isinstance(kind, units.OneOf):
        return "one of " + ", ".join(repr(c) for c in kind.choices)
    if isinstance(kind, units.Flag):
        return "bool"
    if isinstance(kind, units.Shape):
        low = "0" if kind.allow_zero else "1"
        size = "" if kind.min_len == 1 else " (may be empty)" if kind.min_len == 0 else f" (at least {kind.min_len})"
        return f"tuple of int >= {low}{size}"
    if isinstance(kind, units.DType):
        return "dtype name (" + ", ".join(repr(d) for d in units.DTYPE_BYTES) + ")"
    if type(kind).describe is not units.Kind.describe:  # a module's own kind says what it allows
        return kind.describe()
    return _name(base)


def plain_type(annotation) -> str | None:
    """``annotation`` as the API pages print it: a kind of :mod:`tpu_notes.units` in words (``Annotated[float,
    Positive()]`` -> ``"float > 0"``; ``PositiveInt | None`` -> ``"int >= 1, or None"``); ``None`` when the annotation
    holds no kind, so autodoc's own text (and its links) stays."""
    from tpu_notes import units

    def holds_kind(tp) -> bool:
        if typing.get_origin(tp) is typing.Annotated:
            return any(isinstance(m, units.Kind) for m in tp.__metadata__)
        return any(holds_kind(a) for a in typing.get_args(tp))

    def text(tp) -> str:
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            kind = next((m for m in tp.__metadata__ if isinstance(m, units.Kind)), None)
            base = typing.get_args(tp)[0]
            return _kind_text(base, kind) if kind is not None else text(base)
        if origin in (typing.Union, types.UnionType):
            parts = [a for a in typing.get_args(tp) if a is not type(None)]
            shown = " or ".join(text(a) for a in parts)
            return f"{shown}, or None" if len(parts) < len(typing.get_args(tp)) else shown
        if origin is not None and typing.get_args(tp):
            return f"{getattr(origin, '__name__', str(origin))}[{', '.join(text(a) for a in typing.get_args(tp))}]"
        return _name(tp)

    return text(annotation) if holds_kind(annotation) else None


def _plain_signature(app, what, name, obj, options, signature, return_annotation):
    """After autodoc recorded ``name``'s types: each one that holds a kind, in words (:func:`plain_type`)."""
    recorded = app.env.temp_data.get("annotations", {}).get(name)
    if not recorded or not callable(obj):
        return
    from sphinx.util import inspect as sphinx_inspect

    try:
        sig = sphinx_inspect.signature(obj, type_aliases=app.config.autodoc_type_aliases)
    except (TypeError, ValueError):
        return
    found = {p.name: p.annotation for p in sig.parameters.values() if p.annotation is not p.empty}
    if sig.return_annotation is not sig.empty:
        found["return"] = sig.return_annotation
    for key, annotation in found.items():
        text = plain_type(annotation) if key in recorded else None
        if text is not None:
            recorded[key] = text
            _PLAIN.add(text)


def _show_plain_types(app, domain, objtype, contentnode):
    """A type field written by :func:`_plain_signature` stays text: Sphinx would otherwise read ``float > 0`` as the
    name of a class and link (and warn about) it."""
    from docutils import nodes
    from sphinx import addnodes

    for field in contentnode.findall(nodes.field):
        label = field[0].astext()
        if not label.startswith(("type ", "rtype")):
            continue
        body = field[1]
        if len(body) == 1 and isinstance(body[0], nodes.paragraph) and body[0].astext() in _PLAIN:
            para = body[0]
            text = para.astext()
            para.children = []
            para += addnodes.literal_emphasis(text, text)


def setup(app):
    app.connect("autodoc-process-docstring", _add_field_comments)
    app.connect("autodoc-process-signature", _plain_signature, priority=600)  # after autodoc's record_typehints
    app.connect("object-description-transform", _show_plain_types, priority=600)  # after merge_typehints
    return {"parallel_read_safe": True, "parallel_write_safe": True}
