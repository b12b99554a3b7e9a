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
