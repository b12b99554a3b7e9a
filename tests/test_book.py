"""The HTML book builds from the committed outputs with no warning, and has a page per chapter."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_book_builds_without_warnings(built_book):
    assert (built_book / "index.html").is_file()
    log = (ROOT / "_build" / "build.log").read_text()
    assert not re.search(r"\bWARNING\b", log), log[-3000:]


def test_every_toc_entry_has_a_page(built_book):
    toc = (ROOT / "_toc.yml").read_text()
    for entry in re.findall(r"file:\s*(\S+)", toc):
        page = built_book / f"{entry}.html"
        assert page.is_file(), f"missing page {page}"
        html = page.read_text()
        assert "<h1" in html


def test_chapter_pages_keep_figures_and_collapse_solutions(built_book):
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        html = (built_book / "notebooks" / f"{nb.stem}.html").read_text()
        assert re.search(r'<img[^>]+src="\.\./_images/', html), f"{nb.stem}: no figure"
        assert "tag_solution" in html and "tag_hide-cell" in html, f"{nb.stem}: solutions not hidden"
        assert "colab.research.google.com/github/" in html and f"notebooks/{nb.stem}.ipynb" in html
        assert "remove-cell" not in html and "colab-badge.svg" not in html


def test_a_build_is_reused_until_an_input_changes(tmp_path):
    """`make book` then `make test` builds once: build_book.py --if-stale (the built_book fixture) skips the build
    when the hash of its inputs matches the one the last build recorded. The hash covers every input the build
    reads: the config, the table of contents, every page it lists (notebooks and Markdown, the API pages' glob
    included), the vendored JS stamp, the book's CSS and the package's docstrings (tpu_notes/**/*.py)."""
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    import build_book

    files = {
        "_config.yml": "title: t\n",
        "_toc.yml": "format: jb-book\nroot: book/intro\nchapters:\n- file: notebooks/01_a\n- glob: book/api/*\n",
        "book/intro.md": "# Intro\n",
        "notebooks/01_a.ipynb": "{}",
        "book/api/tpu_notes.x.md": "# x\n",
        "_vendor/.stamp": "v1\n",
        "book/assets/book.css": "body {}\n",
        "tpu_notes/x.py": '"""Doc."""\n',
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    listed = [p.relative_to(tmp_path).as_posix() for p in build_book.toc_files(tmp_path)]
    assert listed == ["book/intro.md", "notebooks/01_a.ipynb", "book/api/tpu_notes.x.md"]
    first = build_book.inputs_digest(tmp_path)
    assert build_book.inputs_digest(tmp_path) == first  # nothing changed: the last build is reused
    for name in files:
        before = (tmp_path / name).read_text()
        (tmp_path / name).write_text(before + "\n")
        assert build_book.inputs_digest(tmp_path) != first, f"a change to {name} would not rebuild the book"
        (tmp_path / name).write_text(before)
    assert build_book.inputs_digest(tmp_path) == first
