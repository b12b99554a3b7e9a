"""Look at the built book in a real browser: headless Debian Chromium driven by Playwright.

    python tools/browser.py            # screenshot every page of _toc.yml into _build/screenshots/ (``make book``)
    python tools/browser.py --measure OUT.json  # the chapters' heights, wrapped outputs/table rows, sideways scroll
    python tools/browser.py --measure OUT.json --all-pages  # the same for every page

Shared by ``tests/test_browser.py``: the list of pages (from ``_toc.yml``), a quiet HTTP server for
``_build/html`` on 127.0.0.1 (a free port), and a Chromium context that can reach nothing but that server.
Playwright is used only as a driver for the system browser (``/usr/bin/chromium``, Debian's package, installed by
``make browser`` where apt-get can; ``$CHROMIUM`` names another); it never downloads a browser of its own (no
``playwright install``). Without Chromium the screenshots are skipped with a line saying so (exit status 0: the
HTML book is built all the same), and tests/test_browser.py is skipped unless ``make browser`` could have installed
it (apt-get as root: CI), where it fails.
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
#: The browser: $CHROMIUM, else Debian's /usr/bin/chromium, else a chromium found on PATH.
CHROMIUM = os.environ.get("CHROMIUM") or next(
    (
        c
        for c in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
        if c and Path(c).is_file()
    ),
    "/usr/bin/chromium",
)
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
        how = "`make browser` installs it" if can_install_chromium() else "install Chromium, or set CHROMIUM=<path>"
        return f"no Chromium at {CHROMIUM} ({how})"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "the Python package playwright is not installed (requirements.txt)"
    return None


def can_install_chromium() -> bool:
    """Whether ``make browser`` installs Chromium here: apt-get is present and we are root or may use sudo without a
    password (Debian and its derivatives; CI runs as root in a Debian container). Where this is false, the
    screenshots and the browser test are skipped when Chromium is absent; where it is true, they need it."""
    import subprocess

    if shutil.which("apt-get") is None:
        return False
    if os.geteuid() == 0:
        return True
    if shutil.which("sudo") is None:
        return False
    return subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0


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


def _open_details(page) -> int:
    return page.evaluate("""() => {
        const closed = Array.from(document.querySelectorAll('details:not([open])'));
        closed.forEach(d => { d.setAttribute('data-opened-for-overflow', ''); d.open = true; });
        return closed.length;
    }""")


def _close_details(page) -> None:
    page.evaluate("""() => document.querySelectorAll('details[data-opened-for-overflow]')
        .forEach(d => { d.open = false; d.removeAttribute('data-opened-for-overflow'); })""")


def overflowing_blocks(page, root: str = "main") -> list[str]:
    """Code and output blocks and prose tables of ``page`` (under the CSS selector ``root``) whose content is wider
    than their box.

    Collapsed ``<details>`` (hidden solution cells, dropdowns) are opened for the measurement and closed again,
    so a hidden solution cannot hide an overflow. Measured in the browser: ``scrollWidth > clientWidth``.
    """
    opened = _open_details(page)
    try:
        return page.evaluate(OVERFLOW_JS, [root, OVERFLOW_SELECTOR])
    finally:
        if opened:
            _close_details(page)


#: The narrow window of the reading checks: a phone held upright (CSS px).
PHONE = {"width": 390, "height": 844}
#: The widths the page measurements are taken at (tests/test_browser.py, ``--measure``).
WIDTHS = (VIEWPORT["width"], PHONE["width"])

#: Reading measurements of the page shown (see measure_page): its height, its wrapped output blocks and table
#: rows, and what scrolls sideways.
MEASURE_JS = r"""() => {
    const root = document.querySelector('main') || document.body;
    const describe = (el) => {
        const text = (el.innerText || '').trim().split('\n')[0];
        const id = el.closest('div.cell') ? (el.closest('div.cell').id || '') : '';
        return `<${el.tagName.toLowerCase()} class="${el.className}">${id ? ' in cell ' + id : ''}: ` +
            JSON.stringify(text.slice(0, 60));
    };
    // Line boxes of an element's text: the tops of its text fragments, merged when closer than half a line.
    const lineCount = (el) => {
        const tops = [];
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let n = walker.nextNode(); n; n = walker.nextNode()) {
            if (!n.textContent.trim()) continue;
            const r = document.createRange();
            r.selectNodeContents(n);
            for (const b of r.getClientRects()) if (b.width > 0 && b.height > 0) tops.push(b.top);
        }
        tops.sort((a, b) => a - b);
        const half = parseFloat(getComputedStyle(el).fontSize) / 2;
        let lines = 0, last = -Infinity;
        for (const t of tops) { if (t - last > half) { lines += 1; last = t; } }
        return lines;
    };
    // Monospace text whose columns line up: >= 3 lines that share where a run of 2+ spaces starts or ends.
    const looksLikeTable = (text) => {
        const lines = text.split('\n').filter(l => l.trim());
        if (lines.length < 3) return false;
        const seen = new Map();
        for (const line of lines) {
            const marks = new Set();
            for (const m of line.matchAll(/(\S)( {2,})(?=\S)/g)) {
                marks.add('e' + (m.index + 1));
                marks.add('s' + (m.index + 1 + m[2].length));
            }
            for (const k of marks) seen.set(k, (seen.get(k) || 0) + 1);
        }
        return Math.max(0, ...seen.values()) >= 3;
    };
    const out = {
        height: Math.round(document.documentElement.scrollHeight),
        document_scroll_width: document.documentElement.scrollWidth,
        viewport_width: window.innerWidth,
        output_blocks: 0, wrapped_output_blocks: 0, table_like_blocks: 0, wrapped_table_like_blocks: [],
        html_tables: 0, wrapped_html_table_rows: [], tn_tables: 0, wrapped_tn_table_rows: [],
        clipped_tn_tables: [], sideways_blocks: [],
    };
    out.page_scrolls_sideways = out.document_scroll_width > out.viewport_width;
    // Printed outputs (<pre>): wrapped when they are taller than the same text left unwrapped.
    for (const pre of root.querySelectorAll('div.cell_output pre')) {
        if (pre.clientWidth === 0) continue;
        out.output_blocks += 1;
        const wrapped = pre.getBoundingClientRect().height;
        const keep = pre.style.whiteSpace;
        pre.style.whiteSpace = 'pre';
        const unwrapped = pre.getBoundingClientRect().height;
        pre.style.whiteSpace = keep;
        const table = looksLikeTable(pre.textContent);
        out.table_like_blocks += table;
        if (wrapped > unwrapped + 1) {
            out.wrapped_output_blocks += 1;
            if (table) out.wrapped_table_like_blocks.push(describe(pre));
        }
    }
    // HTML tables in outputs; table.tn-table (tpu_notes.table.Table) separately: rows with a cell on 2+ lines,
    // and tables wider than their box.
    for (const table of root.querySelectorAll('div.cell_output table')) {
        if (table.clientWidth === 0) continue;
        const tn = table.classList.contains('tn-table');
        if (tn) out.tn_tables += 1; else out.html_tables += 1;
        const rows = tn ? out.wrapped_tn_table_rows : out.wrapped_html_table_rows;
        for (const tr of table.querySelectorAll('tr')) {
            // data cells only: a header cell puts its unit on a line of its own (span.tn-unit)
            const cells = Array.from(tr.children).filter(c => c.tagName === 'TD' && c.clientWidth > 0);
            const bad = cells.filter(c => !c.classList.contains('wrap') && lineCount(c) > 1);  // td.wrap: prose
            if (bad.length) rows.push(describe(bad[0]) + ` (row ${tr.rowIndex})`);
        }
        if (tn) {
            const box = table.parentElement;
            if (table.scrollWidth > table.clientWidth + 1 || table.offsetWidth > box.clientWidth + 1) {
                out.clipped_tn_tables.push(describe(table) + ` ${table.offsetWidth}px in ${box.clientWidth}px`);
            }
        }
    }
    // Blocks that scroll sideways: a scroll container (overflow-x auto or scroll) wider inside than its box.
    for (const el of root.querySelectorAll('*')) {
        if (el.clientWidth === 0 || el.scrollWidth <= el.clientWidth + 1) continue;
        const ox = getComputedStyle(el).overflowX;
        if (ox !== 'auto' && ox !== 'scroll') continue;
        out.sideways_blocks.push(describe(el) + ` ${el.scrollWidth}px in ${el.clientWidth}px`);
    }
    // What makes the page wider than the window: the outermost elements reaching past its right edge.
    // (Only what the page shows: nothing inside a box that clips or scrolls its content.)
    out.past_the_window = [];
    const edge = window.innerWidth + 1;
    const walk = (el) => {
        for (const child of el.childNodes) {
            if (out.past_the_window.length >= 5) return;
            if (child.nodeType === Node.TEXT_NODE) {  // a long word (a URL) in the prose
                const range = document.createRange();
                range.selectNodeContents(child);
                const right = Math.max(0, ...Array.from(range.getClientRects()).map(b => b.right));
                if (right > edge) out.past_the_window.push(`text in ${describe(el)} reaches ${Math.round(right)}px`);
                continue;
            }
            if (child.nodeType !== Node.ELEMENT_NODE) continue;
            const style = getComputedStyle(child);
            if (style.position === 'fixed') continue;  // drawers (the theme's sidebars) slide in over the page
            const r = child.getBoundingClientRect();
            if (r.width > 0 && r.right > edge) {
                out.past_the_window.push(describe(child) + ` reaches ${Math.round(r.right)}px`);
            } else if (style.overflowX === 'visible') {
                walk(child);
            }
        }
    };
    if (out.page_scrolls_sideways) walk(document.body);
    return out;
}"""


def measure_page(page) -> dict:
    """Reading measurements of the page loaded in ``page`` at its current window width (CSS px).

    ``height``: the page's full length as first shown (solutions collapsed). The rest are counted with every
    collapsed ``<details>`` opened (hidden solutions included), then closed again:

    * ``output_blocks`` / ``wrapped_output_blocks``: printed outputs (``<pre>`` in a cell output), and those whose
      lines wrap (taller than the same text unwrapped);
    * ``table_like_blocks``: outputs that look like a table (3+ lines sharing where a run of 2+ spaces starts or
      ends); ``wrapped_table_like_blocks``: those that wrap (each described);
    * ``tn_tables`` / ``wrapped_tn_table_rows`` / ``clipped_tn_tables``: HTML tables of
      :class:`tpu_notes.table.Table` (``table.tn-table``), their rows with a cell on 2+ lines (a ``td.wrap``
      cell, a column of prose, may wrap), and the tables wider than their box;
    * ``html_tables`` / ``wrapped_html_table_rows``: the same for other HTML tables in outputs;
    * ``page_scrolls_sideways``: the document is wider than the window, and ``past_the_window``: what reaches
      past its right edge; ``sideways_blocks``: elements under ``<main>`` that scroll sideways (overflow-x auto
      or scroll), wider inside than their box.
    """
    page.evaluate("window.scrollTo(0, 0)")
    height = page.evaluate("() => Math.round(document.documentElement.scrollHeight)")
    opened = _open_details(page)
    try:
        result = page.evaluate(MEASURE_JS)
    finally:
        if opened:
            _close_details(page)
    result["height"] = height
    return result


_NOT_SUMMED = ("height", "page_scrolls_sideways", "document_scroll_width", "viewport_width", "past_the_window")


def measure(pages: list[BookPage] | None = None, widths=WIDTHS, progress=print) -> dict:
    """measure_page for each of ``pages`` (default: the chapters) at each window width; ``{docname: {width:
    measurements}}`` with a ``summary`` per width (totals over the pages)."""
    pages = [p for p in book_pages() if p.is_notebook] if pages is None else pages
    result: dict = {"pages": {}, "summary": {}}
    with serve() as base, launch() as context:
        page = context.new_page()
        for i, p in enumerate(pages, 1):
            progress(f"measure {i}/{len(pages)} {p.docname}")
            result["pages"][p.docname] = {}
            for width in widths:
                page.set_viewport_size({"width": width, "height": VIEWPORT["height"]})
                page.goto(base + p.html)
                wait_until_rendered(page)
                result["pages"][p.docname][str(width)] = measure_page(page)
    for width in widths:
        rows = [m[str(width)] for m in result["pages"].values()]
        result["summary"][str(width)] = {
            "pages": len(rows),
            "height_total": sum(r["height"] for r in rows),
            "pages_scrolling_sideways": sum(r["page_scrolls_sideways"] for r in rows),
            **{
                k: sum(r[k] if isinstance(r[k], int) else len(r[k]) for r in rows)
                for k in rows[0]
                if k not in _NOT_SUMMED
            },
        }
    return result


def screenshot_all(out: Path = SCREENSHOTS, progress=print) -> list[Path]:
    """Screenshot every page of the book into ``out`` (its top, and ``-full`` its whole length)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    pages = book_pages()
    with serve() as base, launch() as context:
        page = context.new_page()
        for i, p in enumerate(pages, 1):
            progress(f"screenshot {i}/{len(pages)} {p.docname}")
            page.goto(base + p.html)
            wait_until_rendered(page)
            path, full = out / f"{p.slug}.png", out / f"{p.slug}-full.png"
            page.screenshot(path=str(path))  # the top: header, sidebars and title (sticky sidebars vanish in full)
            page.screenshot(path=str(full), full_page=True)
            written += [path, full]
    return written


def main(argv=None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measure", metavar="OUT.json", help="measure the chapter pages (measure()) into OUT.json")
    parser.add_argument("--all-pages", action="store_true", help="with --measure: every page, not only the chapters")
    args = parser.parse_args(argv)
    why = chromium_missing()
    if why:
        print(f"{'page measurements' if args.measure else 'screenshots'} skipped: {why}")
        return 1 if args.measure else 0  # `make book` builds the HTML all the same
    if not (HTML / "index.html").exists():
        print("no book at _build/html: run `make book` first")
        return 1
    if args.measure:
        pages = book_pages() if args.all_pages else None
        result = measure(pages, progress=lambda line: print(line, flush=True))
        Path(args.measure).write_text(json.dumps(result, indent=1) + "\n")
        for width, totals in result["summary"].items():
            print(f"{width} px: " + ", ".join(f"{k} {v}" for k, v in totals.items()))
        print(f"wrote {args.measure}")
        return 0
    written = screenshot_all(progress=lambda line: print(line, flush=True))
    print(f"{len(written)} screenshots in {SCREENSHOTS.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
