"""The built book works in a real browser, offline: headless Debian Chromium (driven by Playwright) over HTTP.

For every page of _toc.yml (the preface, every chapter, the other pages) this checks that:
* no JavaScript error is logged and no request leaves 127.0.0.1 (everything the page needs ships with the book);
* every same-site resource and link resolves (no 404), every <img> has loaded (naturalWidth > 0);
* math is typeset by MathJax (mjx-container present) and no raw TeX (\\( \\[ $$) is left in the text;
* widgets with saved state render (the vendored ipywidgets manager), and no widget view is left empty;
* every explorer cell shows its Plotly figure (vendored plotly.js), drawn with a summary; on Chapter 1 the slider
  and buttons redraw it without a kernel (test_explorer_figure_follows_its_slider_and_buttons);
* hidden solutions (cells tagged hide-cell) start collapsed and open on a click; so do dropdown admonitions;
* the previous/next links lead to the neighbouring pages of _toc.yml;
* a chapter's Colab launch link targets this repository and branch and a notebook that exists in the repository;
* the search page, asked for a word of the page's title, lists the page;
* no code or output block is wider than its box (``scrollWidth > clientWidth``), hidden solutions included;
* a chapter shows a labelled "Open in Colab" link, its hidden solutions are labelled "Show solution", and every page
  has one search box.
Screenshots of each page (its top, and its full length as *-full.png) are saved in _build/screenshots/.
The table of contents (left sidebar) is visible and lists every page.

Reading at 1280 px and at 390 px (test_reading_at_desktop_and_phone_width, tools/browser.py's measure_page): the
page never scrolls sideways at 390 px, no row of a tpu_notes.table.Table (``table.tn-table``) wraps at 1280 px and
none is wider than its box; the other counts (wrapped printed outputs, wrapped table-like printouts, blocks that
scroll sideways, page heights) are printed per page and written to _build/reading/<page>.json.

Without Chromium the module is skipped, unless ``make browser`` could have installed it here (apt-get as root, as
on CI), where it fails.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import browser  # noqa: E402
import nbcells  # noqa: E402

PAGES = browser.book_pages()
STOP_WORDS = {"chapter", "about", "this", "book", "with", "from", "that", "what", "their", "these"}


@pytest.fixture(scope="module")
def chromium():
    """One headless Chromium context for the module (Playwright's sync API allows one at a time), and the list
    of requests it blocked (anything not on 127.0.0.1)."""
    why = browser.chromium_missing()
    if why and browser.can_install_chromium():
        pytest.fail(why + ": run `make browser` (or `make test`, which does)")
    if why:
        pytest.skip("browser test skipped: " + why)
    blocked: list[str] = []
    with browser.launch(blocked) as context:
        yield context, blocked


@pytest.fixture(scope="module")
def site(built_book, chromium):
    context, blocked = chromium
    with browser.serve(built_book) as base:
        yield {"base": base, "context": context, "blocked": blocked, "html": built_book}


def _local_file(html_dir: Path, base: str, url: str) -> Path | None:
    """The file under _build/html that a same-site URL points to (None for another site)."""
    if not url.startswith(base):
        return None
    path = urlsplit(url).path.lstrip("/") or "index.html"
    target = html_dir / path
    return target / "index.html" if target.is_dir() else target


RAW_TEX_JS = r"""() => {
    const walker = document.createTreeWalker(document.querySelector('main') || document.body, NodeFilter.SHOW_TEXT, {
        acceptNode: n => n.parentElement.closest('pre, code, script, style, mjx-container, textarea')
            ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT});
    const bad = [];
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (/\\\(|\\\[|\$\$/.test(n.textContent)) bad.push(n.textContent.trim().slice(0, 80));
    }
    return bad;
}"""


#: Visible search controls: the theme's search fields and search icon buttons.
SEARCH_BOXES_JS = """() => Array.from(document.querySelectorAll('.search-button__button, form.bd-search'))
    .filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0).length"""


def _title_word(title: str) -> str:
    words = [w for w in re.findall(r"[A-Za-z]{4,}", title) if w.lower() not in STOP_WORDS]
    return max(words, key=len) if words else title.split()[0]


@pytest.mark.parametrize("index", range(len(PAGES)), ids=[p.docname for p in PAGES])
def test_page_in_browser(site, index):
    p = PAGES[index]
    base, context, html_dir = site["base"], site["context"], site["html"]
    problems: list[str] = []
    errors: list[str] = []
    failed: list[str] = []
    page = context.new_page()
    page.on("console", lambda m: errors.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"uncaught: {e}"))
    page.on("requestfailed", lambda r: failed.append(f"{r.url} ({r.failure})") if r.url.startswith(base) else None)
    page.on("response", lambda r: failed.append(f"{r.url} (HTTP {r.status})") if r.status >= 400 else None)
    blocked_before = len(site["blocked"])
    try:
        url = base + p.html
        response = page.goto(url)
        assert response is not None and response.ok, f"{url}: {response and response.status}"
        browser.wait_until_rendered(page)

        # Math: typeset where the page has any, and no raw TeX left in the text.
        has_math = page.locator(".math, span.math, div.math").count() > 0
        if has_math and page.locator("mjx-container").count() == 0:
            problems.append("the page has math but MathJax rendered none (no mjx-container)")
        raw = page.evaluate(RAW_TEX_JS)
        if raw:
            problems.append(f"raw TeX left in the text: {raw[:3]}")

        # Images.
        for src, complete, width in page.evaluate(
            "() => Array.from(document.images).map(i => [i.currentSrc || i.src, i.complete, i.naturalWidth])"
        ):
            if not complete or width == 0:
                problems.append(f"image not loaded: {src}")

        # Widgets rendered from their saved state. (tools/execute.py stores no widget state: a chapter's
        # explorer shows its Plotly figure instead, below; a page that does carry state must render it with the
        # vendored manager, and a widget view without state would be an empty box.)
        views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
        has_state = page.locator('script[type="application/vnd.jupyter.widget-state+json"]').count() > 0
        if views and has_state and page.locator(".jupyter-widgets").count() == 0:
            problems.append(f"{views} widget view(s) with saved state but nothing rendered")
        if views and not has_state:
            problems.append(f"{views} empty widget box(es): a widget view without state (re-execute the notebook?)")

        # Explorers: every cell that calls one shows its Plotly figure, drawn (an SVG) with its summary.
        if p.is_notebook:
            want = _explorer_cells(p.source)
            figures = page.locator(browser.PLOTLY_SELECTOR)
            drawn = page.evaluate(
                "sel => Array.from(document.querySelectorAll(sel)).filter(gd => gd.querySelector('.main-svg') &&"
                " gd.data && gd.data.length && gd.nextElementSibling.textContent.length).length",
                browser.PLOTLY_SELECTOR,
            )
            loads_plotly = page.locator('script[src*="plotly"]').count() > 0
            if loads_plotly != bool(want):  # tools/book_assets.py: plotly.js (1.5 MB) only where a figure needs it
                problems.append(f"plotly.js loaded: {loads_plotly}, but the page has {len(want)} explorer(s)")
            if len(want) != page.locator(browser.EXPLORER_SELECTOR).count() or drawn != len(want):
                problems.append(
                    f"explorer cells {want}: {page.locator(browser.EXPLORER_SELECTOR).count()} explorer output(s), "
                    f"{figures.count()} Plotly figure(s), {drawn} drawn with data and a summary"
                )

        # Hidden solutions: labelled as solutions (tools/book_assets.py), collapsed by default, open on a click
        # (then closed again for the screenshot).
        labels = page.evaluate(
            "() => Array.from(document.querySelectorAll('div.cell.tag_solution details > summary'))"
            ".map(s => s.innerText.trim())"
        )
        if any(label != "Show solution" for label in labels):
            problems.append(f"hidden solutions not labelled 'Show solution': {sorted(set(labels))}")
        for i in range(page.locator("div.cell.tag_hide-cell").count()):
            details = page.locator("div.cell.tag_hide-cell").nth(i).locator("details").first
            body = details.locator(".cell_input, .cell_output").first
            if details.evaluate("d => d.open") or body.is_visible():
                problems.append(f"hide-cell #{i} is not collapsed by default")
                continue
            details.locator("summary").first.click()
            if not (details.evaluate("d => d.open") and body.is_visible()):
                problems.append(f"hide-cell #{i} does not open on click")
            details.locator("summary").first.click()
        for i in range(page.locator("div.admonition.dropdown").count()):
            box = page.locator("div.admonition.dropdown").nth(i)
            hidden = box.locator(".toggle-hidden")
            if hidden.count() == 0:
                problems.append(f"dropdown admonition #{i} is not collapsed by default")
                continue
            box.locator("button.toggle-button").first.click()
            if box.locator(".toggle-hidden").count() != 0:
                problems.append(f"dropdown admonition #{i} does not open on click")
            box.locator("button.toggle-button").first.click()

        # No code or output block is wider than its box (clipped or behind a scroll bar), solutions included.
        problems += [f"overflow: {o}" for o in browser.overflowing_blocks(page)]

        # One search box (the theme also put one in a header band; tools/book_assets.py keeps the sidebar's).
        boxes = page.evaluate(SEARCH_BOXES_JS)
        if boxes != 1:
            problems.append(f"{boxes} visible search boxes, expected 1")

        # The table of contents (left sidebar) is shown and lists every page of _toc.yml.
        nav = page.locator(".bd-sidebar-primary")
        if nav.count() == 0 or not nav.first.is_visible():
            problems.append("the table of contents (left sidebar) is not visible")
        else:
            listed = {
                urlsplit(h).path
                for h in nav.first.evaluate("n => Array.from(n.querySelectorAll('a[href]')).map(a => a.href)")
            }
            # the API reference's module pages sit in a collapsed section under its index page
            missing = [
                q.html
                for q in PAGES
                if q is not PAGES[0] and not q.docname.startswith("book/api/") and "/" + q.html not in listed
            ]
            if missing:
                problems.append(f"the table of contents lacks {missing}")

        # Previous/next links follow _toc.yml.
        for selector, neighbour in (("a.left-prev", index - 1), ("a.right-next", index + 1)):
            link = page.locator(f".prev-next-area {selector}")
            expected = PAGES[neighbour] if 0 <= neighbour < len(PAGES) else None
            if expected is None:
                continue
            if link.count() == 0:
                problems.append(f"no {selector} link (expected {expected.html})")
                continue
            target = urljoin(url, link.first.get_attribute("href"))
            if urlsplit(target).path != "/" + expected.html:
                problems.append(f"{selector} goes to {target}, expected {expected.html}")
            file = _local_file(html_dir, base, target.split("#")[0])
            if file is None or not file.is_file():
                problems.append(f"{selector} target {target} was not built")

        # Every same-site link in the page body resolves to a built file.
        hrefs = page.evaluate("() => Array.from(document.querySelectorAll('article a[href]')).map(a => a.href)")
        for href in sorted(set(hrefs)):
            file = _local_file(html_dir, base, href.split("#")[0].split("?")[0])
            if file is not None and not file.exists():
                problems.append(f"broken link {href}")

        # Colab launch button of a chapter: this repository, this branch, a notebook that exists.
        if p.is_notebook:
            repo, branch, _ = nbcells.repo_settings()
            links = page.evaluate(
                "() => Array.from(document.querySelectorAll('a[href*=\"colab.research.google.com\"]')).map(a => a.href)"
            )
            want = f"https://colab.research.google.com/github/{repo}/blob/{branch}/"
            if not links:
                problems.append("no Colab launch link")
            colab = page.locator('.article-header-buttons a[href*="colab.research.google.com"]')
            if (
                colab.count() != 1
                or not colab.first.is_visible()
                or colab.first.inner_text().strip() != "Open in Colab"
            ):
                problems.append("the header has no visible link labelled 'Open in Colab'")
            for link in links:
                if not link.startswith(want):
                    problems.append(f"Colab link {link} does not start with {want}")
                    continue
                target = link[len(want) :]
                if target != p.source.relative_to(ROOT).as_posix() or not (ROOT / target).is_file():
                    problems.append(f"Colab link targets {target}, not this page's notebook {p.source.name}")

        page.evaluate("window.scrollTo(0, 0)")  # the clicks above scrolled the page
        page.screenshot(path=str(_screenshot_path(p)))  # the top of the page: header, sidebars, title
        if not p.docname.startswith("book/api/"):  # reference pages: the top is enough (and much faster)
            page.screenshot(path=str(_screenshot_path(p, "-full")), full_page=True)
        title = page.locator("main h1").first.inner_text().strip().rstrip("#").strip()

        # Search finds the page by a word of its title (for the API reference, its index page stands for the rest).
        if p.docname.startswith("book/api/"):
            return _finish(problems, errors, failed, site, blocked_before, p)
        word = _title_word(title)
        page.goto(base + f"search.html?q={word}")
        page.wait_for_selector("#search-results p.search-summary", timeout=15_000)
        found = page.evaluate(
            "() => Array.from(document.querySelectorAll('#search-results ul.search li a'))"
            ".map(a => new URL(a.href).pathname)"
        )
        if "/" + p.html not in found:
            problems.append(f"search for {word!r} (from the title {title!r}) does not list the page: {found[:5]}")
    finally:
        page.close()
    _finish(problems, errors, failed, site, blocked_before, p)


#: The pages read at both widths: every page but the API reference's module pages (generated from docstrings).
READ_PAGES = [p for p in PAGES if not p.docname.startswith("book/api/")]
READING = browser.ROOT / "_build" / "reading"


@pytest.mark.parametrize("index", range(len(READ_PAGES)), ids=[p.docname for p in READ_PAGES])
def test_reading_at_desktop_and_phone_width(site, index):
    """Each page at 1280 px and at 390 px (tools/browser.py measure_page, hidden solutions opened).

    Strict: at 390 px the page never scrolls sideways; no row of a tpu_notes.table.Table (``table.tn-table``)
    wraps at 1280 px; no tn-table is wider than its box at either width. Reported (printed, and written to
    _build/reading/<page>.json) until every chapter prints its tables through tpu_notes.table: printed outputs and
    table-like printouts whose lines wrap, other HTML tables' wrapped rows, blocks that scroll sideways, the height.
    """
    p = READ_PAGES[index]
    page = site["context"].new_page()
    counts = {}
    try:
        for width in browser.WIDTHS:
            page.set_viewport_size({"width": width, "height": browser.VIEWPORT["height"]})
            page.goto(site["base"] + p.html)
            browser.wait_until_rendered(page)
            counts[width] = browser.measure_page(page)
    finally:
        page.close()
    READING.mkdir(parents=True, exist_ok=True)
    (READING / f"{p.slug}.json").write_text(json.dumps({str(w): m for w, m in counts.items()}, indent=1) + "\n")
    for width, m in counts.items():
        print(
            f"{p.docname} at {width} px: height {m['height']} px; wrapped outputs {m['wrapped_output_blocks']}"
            f"/{m['output_blocks']}, wrapped table-like printouts {len(m['wrapped_table_like_blocks'])}"
            f"/{m['table_like_blocks']}; tn-tables {m['tn_tables']}, wrapped rows "
            f"{len(m['wrapped_tn_table_rows'])}, clipped {len(m['clipped_tn_tables'])}; other HTML tables "
            f"{m['html_tables']}, wrapped rows {len(m['wrapped_html_table_rows'])}; sideways blocks "
            f"{len(m['sideways_blocks'])}; page scrolls sideways: {m['page_scrolls_sideways']}"
        )
    wide, phone = counts[browser.WIDTHS[0]], counts[browser.WIDTHS[1]]
    problems = []
    if phone["page_scrolls_sideways"]:
        problems.append(
            f"at {browser.WIDTHS[1]} px the page is {phone['document_scroll_width']} px wide: "
            f"{phone['past_the_window']}"
        )
    problems += [f"tn-table row wraps at {browser.WIDTHS[0]} px: {r}" for r in wide["wrapped_tn_table_rows"]]
    for width, m in counts.items():
        problems += [f"tn-table wider than its box at {width} px: {t}" for t in m["clipped_tn_tables"]]
    assert not problems, f"{p.html}:\n  " + "\n  ".join(problems)


def _explorer_cells(source: Path) -> list[str]:
    """Ids of the code cells of a notebook that display an explorer (``widgets.<name>_explorer(...)`` without
    ``static=True``)."""

    nb = json.loads(source.read_text())
    return [
        c.get("id", "?")
        for c in nb["cells"]
        if c["cell_type"] == "code"
        and re.search(r"\b\w+_explorer\(", "".join(c["source"]))
        and "static=True" not in "".join(c["source"])
        and any(o.get("output_type") in ("execute_result", "display_data") for o in c.get("outputs", []))
    ]


#: What the Chapter 1 figure's script reports: the grid cell drawn, the matmul point, the summary.
FIGURE_STATE_JS = """sel => {
    const gd = document.querySelector(sel);
    const dot = gd.data[gd.data.length - 1];
    return {cell: gd.getAttribute('data-cell'), x: dot.x[0], y: dot.y[0], name: dot.name,
            text: gd.nextElementSibling.textContent, path: (gd.querySelector('.scatterlayer .points path') || {})
            .getAttribute && gd.querySelector('.scatterlayer .points path').getAttribute('transform')};
}"""


def test_explorer_figure_follows_its_slider_and_buttons(site):
    """Chapter 1's roofline explorer, without a kernel: moving the B slider and clicking a chip button redraw
    the point (its data and its SVG marker) and the summary from the precomputed grid."""
    p = next(q for q in PAGES if q.docname.endswith("01_rooflines"))
    page = site["context"].new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(site["base"] + p.html)
        browser.wait_until_rendered(page)
        sel = browser.PLOTLY_SELECTOR
        assert page.locator(sel).count() >= 1, "no explorer figure on the Chapter 1 page"
        before = page.evaluate(FIGURE_STATE_JS, sel)
        assert before["text"].startswith("v5e bf16: [256, 8192]"), before
        # The B slider (the first slider; 9 steps from 1 to 65536 tokens): click near its left end.
        rail = page.locator(sel).first.locator(".slider-rail-touch-rect").first
        rail.scroll_into_view_if_needed()
        box = rail.bounding_box()
        page.mouse.click(box["x"] + box["width"] * 0.13, box["y"] + box["height"] / 2)
        page.wait_for_function(
            "([sel, c]) => document.querySelector(sel).getAttribute('data-cell') !== c",
            arg=[sel, before["cell"]],
            timeout=5_000,
        )
        after = page.evaluate(FIGURE_STATE_JS, sel)
        assert after["x"] < before["x"] and after["y"] < before["y"], (before, after)  # a smaller batch
        assert after["path"] != before["path"] and "bandwidth-bound" in after["name"], (before, after)
        assert after["text"].startswith("v5e bf16: [4, 8192]"), after["text"]
        # A chip button: v5p.
        page.locator(sel).first.locator(".updatemenu-button", has_text="v5p").first.click()
        page.wait_for_function(
            "([sel, c]) => document.querySelector(sel).getAttribute('data-cell') !== c",
            arg=[sel, after["cell"]],
            timeout=5_000,
        )
        chip = page.evaluate(FIGURE_STATE_JS, sel)
        assert chip["text"].startswith("v5p bf16: [4, 8192]") and chip["x"] == after["x"], chip
        assert not errors, errors
    finally:
        page.close()


def _finish(problems, errors, failed, site, blocked_before, p):
    problems = problems + errors + [f"failed request: {f}" for f in failed]
    problems += [f"request to another site (blocked): {u}" for u in site["blocked"][blocked_before:]]
    assert not problems, f"{p.html}:\n  " + "\n  ".join(problems)


def _screenshot_path(p: browser.BookPage, suffix: str = "") -> Path:
    browser.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return browser.SCREENSHOTS / f"{p.slug}{suffix}.png"


def test_every_chapter_notebook_is_a_page():
    """The browser test covers every chapter that exists: each notebook in notebooks/ is listed in _toc.yml."""
    listed = {p.source.name for p in PAGES if p.is_notebook}
    on_disk = {f.name for f in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert on_disk <= listed, f"notebooks missing from _toc.yml: {sorted(on_disk - listed)}"
    assert {p.docname for p in PAGES} >= {"book/intro", "book/status"}


def _overflow_page(body: str, css: str = "") -> str:
    """A page shaped like the book's (myst-nb's cell markup, the theme's scrolling <pre>) around ``body``."""
    return (
        f"<html><head><style>pre {{ overflow: auto; }} main {{ width: 420px; }}</style><style>{css}</style>"
        f"</head><body><main>{body}</main></body></html>"
    )


def _cell(code: str, output: str) -> str:
    return (
        '<div class="cell"><div class="cell_input"><div class="highlight"><pre>' + code + "</pre></div></div>"
        '<div class="cell_output"><div class="output stream"><div class="highlight"><pre>'
        + output
        + "</pre></div></div></div></div>"
    )


def test_the_overflow_check_flags_wide_blocks_and_the_css_wraps_outputs(chromium):
    """browser.overflowing_blocks catches a code line or an output line wider than its box (also inside a
    collapsed solution), and book/assets/book.css makes outputs wrap so they no longer overflow."""
    book_css = (ROOT / "book" / "assets" / "book.css").read_text()
    wide = "x = " + "1234567890 " * 20
    narrow = "x = 1"
    page = chromium[0].new_page()

    def check(body, css=""):
        page.set_content(_overflow_page(body, css))
        return browser.overflowing_blocks(page)

    try:
        assert check(_cell(narrow, narrow), book_css) == []
        code = check(_cell(wide, narrow), book_css)
        assert code and all(o.startswith("code cell") for o in code), code
        assert any(o.startswith("cell output") for o in check(_cell(narrow, wide)))  # without the book's CSS
        assert check(_cell(narrow, wide), book_css) == []  # the book's CSS wraps outputs
        assert check(_cell(narrow, "y" * 400), book_css) == []  # even a line without spaces
        assert check(f"<div class='highlight'><pre>{wide}</pre></div>", book_css)  # code in the prose
        hidden = check(f"<details><summary>Solution</summary>{_cell(wide, narrow)}</details>", book_css)
        assert hidden, "an overflow inside a collapsed solution must be found"
        assert page.evaluate("() => document.querySelector('details').open") is False, "details left open"
        # 88 columns (the hygiene test's limit for code cells) fit the narrowest cell box of the book at a
        # 1280px window (a collapsed solution's, ~666px) with the book's CSS, and not with the theme's 14px.
        line = "y" * 88
        assert check(_cell(line, narrow), book_css + " main { width: 666px; }") == []
        assert check(_cell(line, narrow), " main { width: 666px; } pre { font-size: 14px; padding: 0 16px; }")
    finally:
        page.close()


SIDEBAR_OVERFLOW_JS = """() => [...document.querySelectorAll('.bd-sidebar-primary nav a')]
    .filter(a => a.offsetParent !== null && a.scrollWidth > a.clientWidth + 1)
    .map(a => a.textContent.trim())"""


def test_no_sidebar_link_is_cut_off(site):
    """API pages are named after their modules; on one of them the left sidebar lists every module, the longest
    (``tpu_notes.training.practitioners``) included. Each must fit its column or wrap, never be clipped."""
    p = next(q for q in PAGES if q.docname.endswith("tpu_notes.inference.deployment"))
    page = site["context"].new_page()
    try:
        page.goto(site["base"] + p.html)
        browser.wait_until_rendered(page)
        links = page.locator(".bd-sidebar-primary nav a").count()
        assert links > 60, f"expected the API pages in the sidebar, found {links} links"
        clipped = page.evaluate(SIDEBAR_OVERFLOW_JS)
        assert not clipped, f"sidebar links wider than their column: {clipped}"
    finally:
        page.close()


def _tn_table(columns: int, rows: int = 2) -> str:
    """A table shaped like tpu_notes.table.Table's HTML: a caption, a header row, td.num cells with data-label."""
    cols = range(columns)
    head = "".join(f'<th class="num">column {j} (GB/s)</th>' for j in cols)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num" data-label="column {j} (GB/s)">{1000 * i + 1000 + j}.5 x 2</td>' for j in cols)
        + "</tr>"
        for i in range(rows)
    )
    return f'<table class="tn-table"><caption>c</caption><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def test_the_reading_counts_and_the_narrow_window_css(chromium):
    """browser.measure_page counts what it claims (a tn-table row whose cells wrap, a table-like printout whose lines
    wrap, a page wider than the window) and not what it should not (prose printouts, short tables), and
    book/assets/book.css keeps a wide tn-table and a long code line inside a 390 px window."""
    book_css = (ROOT / "book" / "assets" / "book.css").read_text()
    aligned = "\n".join(f"v5e-{i}   {'x' * 30}   {i * 123456:>12}   {'y' * 20}" for i in range(4))
    prose = "\n".join(f"this line says something about run {i} and ends" for i in range(4))
    page = chromium[0].new_page()

    def measure(width, body, css):
        page.set_viewport_size({"width": width, "height": 600})
        page.set_content(f"<html><head><style>{css}</style></head><body><main>{body}</main></body></html>")
        return browser.measure_page(page)

    def output(inner):
        return f'<div class="cell"><div class="cell_output"><div class="output stream">{inner}</div></div></div>'

    try:
        narrow_box = "main { width: 260px; } div.cell_output pre { white-space: pre-wrap; font: 13px monospace; }"
        m = measure(1280, output(f"<pre>{aligned}</pre><pre>{prose}</pre><pre>a  b\nc  d</pre>"), narrow_box)
        assert (m["output_blocks"], m["table_like_blocks"], m["wrapped_output_blocks"]) == (3, 1, 2), m
        assert len(m["wrapped_table_like_blocks"]) == 1 and "v5e-0" in m["wrapped_table_like_blocks"][0], m
        short = measure(1280, output(f"<pre>{aligned}</pre>"), "div.cell_output pre { white-space: pre-wrap; }")
        assert short["table_like_blocks"] == 1 and short["wrapped_table_like_blocks"] == [], short

        # A tn-table at a desktop width: with the book's CSS no cell wraps; squeezed without it, rows wrap.
        assert measure(1280, output(_tn_table(4)), book_css)["wrapped_tn_table_rows"] == []
        squeezed = measure(1280, output(_tn_table(4)), "main { width: 200px; } table { table-layout: fixed; }")
        assert squeezed["tn_tables"] == 1 and len(squeezed["wrapped_tn_table_rows"]) == 2, squeezed

        # A phone: a 12-column table and an 88-column code line widen the page, unless the book's CSS stacks the
        # table (one cell a line, after its column's name) and wraps the code.
        code = (
            '<div class="cell"><div class="cell_input"><div class="highlight"><pre>'
            + "z" * 88
            + "</pre></div></div></div>"
        )
        body = output(_tn_table(12)) + code
        bare = measure(390, body, "div.highlight pre { overflow: auto; } table.tn-table td { white-space: nowrap; }")
        assert bare["page_scrolls_sideways"] and bare["clipped_tn_tables"] and bare["sideways_blocks"], bare
        phone = measure(390, body, "div.highlight pre { overflow: auto; } " + book_css)
        assert not phone["page_scrolls_sideways"] and phone["document_scroll_width"] <= 390, phone
        assert phone["clipped_tn_tables"] == [] and phone["sideways_blocks"] == [], phone
        label = page.evaluate("() => getComputedStyle(document.querySelector('td.num'), '::before').content")
        assert label == '"column 0 (GB/s)"', label
    finally:
        page.close()
