"""Write the API reference pages of the book: one page per module of ``tpu_notes`` (``book/api/*.md``).

Each page is a title, the layer the module belongs to, and a Sphinx ``automodule`` directive (autodoc + napoleon,
enabled in ``_config.yml``), so the reference is generated from the docstrings at build time. ``tools/build_book.py``
runs this before every build; ``tests/test_api_pages.py`` fails when a module has no page or a page is stale.

    python tools/api_pages.py          # (re)write book/api/*.md and book/api.md
"""

from __future__ import annotations

import importlib
import pkgutil
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
API_DIR = ROOT / "book" / "api"
INDEX = ROOT / "book" / "api.md"

#: The layers of ../shared/DESIGN.md, in reading order, and the modules of each (subpackages list their modules).
LAYERS = {
    "Ground": ["units", "table", "rules", "hardware", "compat"],
    "Systems": ["system", "topology", "gpu", "collectives"],
    "Analysis": [
        "roofline",
        "systolic",
        "sharding",
        "transformer",
        "efficiency",
        "gemm",
        "runs",
        "validation",
        "training",
        "inference",
        "serving",
        "planner",
    ],
    "Measurement": [
        "devices",
        "bench",
        "transfer",
        "hlo",
        "model",
        "generate",
        "parallel",
        "memory_oracle",
        "jaxprog",
        "kernels",
        "profile",
        "multihost",
    ],
    "Book": ["exercises", "plots", "widgets", "cheatsheet", "__main__", "__init__"],
}
#: Chapter-specific exercise modules are documented through tpu_notes.exercises, not one page each.
SKIP_PREFIXES = ("tpu_notes.exercises.ch",)


def modules() -> list[str]:
    """Every module of tpu_notes, dotted, packages first then their submodules (exercise chapters left out)."""
    import tpu_notes

    names = ["tpu_notes"]
    for info in pkgutil.walk_packages(tpu_notes.__path__, "tpu_notes."):
        if not info.name.startswith(SKIP_PREFIXES):
            names.append(info.name)
    return sorted(names)


def _layer(dotted: str) -> str:
    top = dotted.split(".")[1] if "." in dotted else ""
    for layer, mods in LAYERS.items():
        if top in mods:
            return layer
    return "Package"


def _summary(dotted: str) -> str:
    """The module docstring's first paragraph, whole (a docstring's first line often stops mid-sentence), with its
    reStructuredText markup turned into the Markdown of the index page: ``:func:`x``` and ````x```` become `` `x` ``."""
    doc = (importlib.import_module(dotted).__doc__ or "").strip()
    text = " ".join(doc.split("\n\n")[0].split())

    def role(m):  # :func:`~a.b.c` shows as `c`, :func:`a.b.c` as `a.b.c`
        name = m.group(2)
        return f"`{name.split('.')[-1] if m.group(1) else name}`"

    text = re.sub(r":\w+:`(~?)([^`]+)`", role, text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _flag_entry(action) -> list[str]:
    """One flag of a subcommand as a MyST definition-list entry: the flag and its value, then what it means."""
    import argparse

    if action.option_strings:
        metavar = action.metavar or (action.dest.upper() if action.nargs != 0 else None)
        if action.choices is not None and action.metavar is None:
            metavar = "{" + ",".join(str(c) for c in action.choices) + "}"
        term = ", ".join(f"`{o}{' ' + metavar if metavar else ''}`" for o in action.option_strings)
    else:
        term = f"`{action.metavar or action.dest}`" + (" ..." if action.nargs in ("*", "+", argparse.REMAINDER) else "")
    help_text = (action.help or "") % {**vars(action), "default": action.default}
    notes = []
    if getattr(action, "required", False):
        notes.append("required")
    if action.option_strings and action.default not in (None, False, argparse.SUPPRESS) and "default" not in help_text:
        notes.append(f"default `{action.default}`")
    suffix = f" ({'; '.join(notes)})" if notes else ""
    return [term, f": {help_text}{suffix}", ""]


def cli_reference() -> str:
    """The Markdown of the command-line page's first half: every subcommand with its flags, read from the parsers
    themselves (``tpu_notes.__main__.build_parser`` and ``tpu_notes.bench.build_parser``), so it cannot go stale."""
    import argparse

    from tpu_notes import __main__ as cli
    from tpu_notes import bench

    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    lines = [parser.description or "", ""]
    for name, sub in subparsers.choices.items():
        if name == "bench":  # every flag after `bench` goes to the bench's own parser
            sub = bench.build_parser()
        lines += [f"## `python -m tpu_notes {name}`", "", sub.description or "", ""]
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction) or action.dest == "rest":
                continue
            lines += _flag_entry(action)
    return "\n".join(lines)


def page(dotted: str) -> str:
    """The Markdown of one module's page.

    Every object is documented once, on the page of the module that defines it. A package's page documents only
    what the package itself defines (``:ignore-module-all:``); references written with the package's public name
    (``tpu_notes.training.plan``) are sent to the defining module by ``tools/book_assets.py``.
    """
    title = "python -m tpu_notes" if dotted == "tpu_notes.__main__" else dotted
    is_package = hasattr(importlib.import_module(dotted), "__path__")
    options = "   :members:\n   :show-inheritance:\n" + ("   :ignore-module-all:\n" if is_package else "")
    if dotted == "tpu_notes.__main__":
        return (
            f"# `{title}`\n\n*{_layer(dotted)} layer.* Generated from the command's own parsers and docstrings by "
            f"`tools/api_pages.py`. Every subcommand prints the same text with `--help`.\n\n{cli_reference()}\n"
            f"## The module\n\n```{{eval-rst}}\n.. automodule:: {dotted}\n{options}```\n"
        )
    return (
        f"# `{title}`\n\n*{_layer(dotted)} layer.* Generated from the docstrings by `tools/api_pages.py`.\n\n"
        f"```{{eval-rst}}\n.. automodule:: {dotted}\n{options}```\n"
    )


def index(names: list[str]) -> str:
    lines = [
        "# API reference",
        "",
        "One page per module of `tpu_notes`, generated from its docstrings. Units are SI throughout (seconds, "
        "bytes, FLOPs, bytes/s); the chapter that teaches each idea is named in the module's docstring.",
        "",
    ]
    for layer, mods in LAYERS.items():
        lines += [f"## {layer}", ""]
        for name in names:
            top = name.split(".")[1] if "." in name else ""
            if top in mods:
                lines.append(f"- [`{name}`](api/{name}.md): {_summary(name)}")
        lines.append("")
    return "\n".join(lines)


def pages() -> dict[Path, str]:
    """Every file this tool writes, with its content."""
    names = [n for n in modules() if n != "tpu_notes"]
    out = {API_DIR / f"{name}.md": page(name) for name in names}
    out[INDEX] = index(names)
    return out


def main() -> int:
    API_DIR.mkdir(exist_ok=True)
    wanted = pages()
    for old in API_DIR.glob("*.md"):
        if old not in wanted:
            old.unlink()
    for path, text in wanted.items():
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
    print(f"wrote {len(wanted) - 1} API pages and book/api.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
