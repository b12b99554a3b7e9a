"""Write the API reference pages of the book: one page per module of ``tpu_notes`` (``book/api/*.md``).

Each page is a title, the layer the module belongs to, and a Sphinx ``automodule`` directive (autodoc + napoleon,
enabled in ``_config.yml``), so the reference is generated from the docstrings at build time. ``tools/build_book.py``
runs this before every build; ``tests/test_api_pages.py`` fails when a module has no page or a page is stale.

    python tools/api_pages.py          # (re)write book/api/*.md and book/api.md
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
API_DIR = ROOT / "book" / "api"
INDEX = ROOT / "book" / "api.md"

#: The layers of ../shared/DESIGN.md, in reading order, and the modules of each (subpackages list their modules).
LAYERS = {
    "Ground": ["units", "hardware", "compat"],
    "Systems": ["system", "topology", "gpu", "collectives"],
    "Analysis": [
        "roofline",
        "systolic",
        "sharding",
        "transformer",
        "efficiency",
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
        "jaxprog",
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
    doc = (importlib.import_module(dotted).__doc__ or "").strip()
    return doc.splitlines()[0].strip() if doc else ""


def page(dotted: str) -> str:
    """The Markdown of one module's page.

    Every object is documented once, on the page of the module that defines it. A package's page documents only
    what the package itself defines (``:ignore-module-all:``); references written with the package's public name
    (``tpu_notes.training.plan``) are sent to the defining module by ``tools/book_assets.py``.
    """
    title = "python -m tpu_notes" if dotted == "tpu_notes.__main__" else dotted
    is_package = hasattr(importlib.import_module(dotted), "__path__")
    options = "   :members:\n   :show-inheritance:\n" + ("   :ignore-module-all:\n" if is_package else "")
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
