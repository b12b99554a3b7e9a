"""Look at the built book in a real browser: headless Debian Chromium driven by Playwright.

    python tools/browser.py            # screenshot every page of _toc.yml into _build/screenshots/ (``make book``)

Shared by ``tests/test_browser.py``: the list of pages (from ``_toc.yml``), a quiet HTTP server for
``_build/html`` on 127.0.0.1 (a free port), and a Chromium context that can reach nothing but that server.
Playwright is used only as a driver for the system browser (``/usr/bin/chromium``, Debian's package, installed by
the Makefile); it never downloads a browser of its own (no ``playwright install``).
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
#: Offline, reproducible, no first-run or background traffic; a fresh profile per launch (see launch()).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
VIEWPORT = {"width": 1280, "height": 900}


@dataclass(frozen=True)
class BookPage:
    """One page of the book, as listed in _toc.yml."""

    docname: str  # Sphinx document name, e.g. "notebooks/01_rooflines"
    source: Path  # the .md / .ipynb it is built from
    html: str  # path of the built page relative to _build/html, e.g. "notebooks/01_rooflines.html"

    @property
    def is_notebook(self) -> bool:
        return self.source.suffix == ".ipynb"

    @property
    def slug(self) -> str:  # a file name for its screenshot
        return self.docname.replace("/", "__")


def book_pages(root: Path = ROOT) -> list[BookPage]:
    """Every page of _toc.yml in reading order (the root page first)."""
    sys.path.insert(0, str(root / "tools"))
    import build_book

    pages = []
    for source in build_book.toc_files(root):
        docname = source.relative_to(root).with_suffix("").as_posix()
        pages.append(BookPage(docname=docname, source=source, html=docname + ".html"))
    return pages


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep test output clean
        pass


@contextlib.contextmanager
def serve(directory: Path = HTML):
    """Serve ``directory`` on 127.0.0.1 at a free port; yields the base URL (ending in "/")."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def chromium_missing() -> str | None:
    """Why the browser cannot be used, or None when it can."""
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        return f"{CHROMIUM} not found: run `make test` (it installs Debian's chromium) or apt-get install chromium"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (requirements.txt)"
    return None


@contextlib.contextmanager
def launch(blocked: list[str] | None = None):
    """A headless Chromium browser context with a fresh profile that may only talk to 127.0.0.1.

    Any other request is aborted and its URL appended to ``blocked`` (so a page that needs a CDN fails the
    test instead of silently working online). Yields the Playwright BrowserContext.
    """
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="book-chromium-")
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile,
                executable_path=CHROMIUM,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport=VIEWPORT,
                service_workers="block",
                ignore_default_args=["--enable-automation"],
            )

            def route(r):
                host = urlsplit(r.request.url).hostname
                if host in ("127.0.0.1", None):
                    r.continue_()
                else:
                    if blocked is not None:
                        blocked.append(r.request.url)
                    r.abort()

            context.route("**/*", route)
            try:
                yield context
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


#: An explorer's static figure (tpu_notes.plots.interactive) and the element Plotly draws it into.
EXPLORER_SELECTOR = "div.tpu-notes-explorer"
PLOTLY_SELECTOR = "div.tpu-notes-explorer-figure.js-plotly-plot"


def wait_until_rendered(page) -> None:
    """Wait for MathJax's typesetting, the explorers' Plotly figures and the widget manager (when the page has
    any of them)."""
    page.wait_for_load_state("load")
    page.evaluate("""async () => {
        if (window.MathJax && MathJax.startup && MathJax.startup.promise) { await MathJax.startup.promise; }
    }""")
    explorers = page.locator(EXPLORER_SELECTOR).count()
    if explorers:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:  # Plotly.react is asynchronous: wait until every figure has its SVG
            page.wait_for_function(
                "([sel, n]) => document.querySelectorAll(sel + ' .main-svg').length >= n",
                arg=[PLOTLY_SELECTOR, explorers],
                timeout=15_000,
            )
        except PlaywrightTimeout:
            pass  # the caller sees which figure did not render (tests/test_browser.py reports it)
    if page.locator('script[type="application/vnd.jupyter.widget-state+json"]').count():  # saved widget state
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        try:
            page.wait_for_selector(".jupyter-widgets", timeout=10_000)
        except PlaywrightTimeout:
            pass  # the caller sees that no widget rendered (tests/test_browser.py reports it)


#: Blocks whose lines the reader must see whole: code (cell inputs and code in the prose) and cell outputs.
OVERFLOW_SELECTOR = (
    "pre, div.highlight, div.cell_output .output, div.cell_output table, "
    ".pst-scrollable-table-container"
)  # prose tables: the theme wraps each in this box

#: For each block of OVERFLOW_SELECTOR under ``root`` that is rendered (clientWidth > 0) and wider inside than its
#: box (scrollWidth > clientWidth: clipped, or hidden behind a scroll bar), a short description of it.
OVERFLOW_JS = """([root, selector]) => {
    const scope = document.querySelector(root) || document.body;
    const bad = [];
    for (const el of scope.querySelectorAll(selector)) {
        if (el.clientWidth === 0) continue;
        if (el.scrollWidth > el.clientWidth + 1) {
            const where = el.closest('div.cell_input') ? 'code cell' : el.closest('div.cell_output')
                ? 'cell output' : 'code block';
            const text = (el.innerText || '').split('\\n').reduce((a, b) => b.length > a.length ? b : a, '');
            bad.push(`${where} <${el.tagName.toLowerCase()} class="${el.className}"> is ${el.scrollWidth}px wide ` +
                     `in a ${el.clientWidth}px box; widest line: ${JSON.stringify(text.slice(0, 100))}`);
        }
    }
    return bad;
}"""


def overflowing_blocks(page, root: str = "main") -> list[str]:
    """Code and output blocks and prose tables of ``page`` (under the CSS selector ``root``) whose content is wider
    than their box.

    Collapsed ``<details>`` (hidden solution cells, dropdowns) are opened for the measurement and closed again,
    so a hidden solution cannot hide an overflow. Measured in the browser: ``scrollWidth > clientWidth``.
    """
    opened = page.evaluate("""() => {
        const closed = Array.from(document.querySelectorAll('details:not([open])'));
        closed.forEach(d => { d.setAttribute('data-opened-for-overflow', ''); d.open = true; });
        return closed.length;
    }""")
    try:
        return page.evaluate(OVERFLOW_JS, [root, OVERFLOW_SELECTOR])
    finally:
        if opened:
            page.evaluate("""() => document.querySelectorAll('details[data-opened-for-overflow]')
                .forEach(d => { d.open = false; d.removeAttribute('data-opened-for-overflow'); })""")


def screenshot_all(out: Path = SCREENSHOTS) -> list[Path]:
    """Screenshot every page of the book into ``out`` (its top, and ``-full`` its whole length)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with serve() as base, launch() as context:
        page = context.new_page()
        for p in book_pages():
            page.goto(base + p.html)
            wait_until_rendered(page)
            path, full = out / f"{p.slug}.png", out / f"{p.slug}-full.png"
            page.screenshot(path=str(path))  # the top: header, sidebars and title (sticky sidebars vanish in full)
            page.screenshot(path=str(full), full_page=True)
            written += [path, full]
    return written


def main() -> int:
    why = chromium_missing()
    if why:
        print("screenshots skipped: " + why)
        return 1
    if not (HTML / "index.html").exists():
        print("no book at _build/html: run `make book` first")
        return 1
    for path in screenshot_all():
        print(f"screenshot {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
