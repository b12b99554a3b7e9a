"""A small Sphinx extension of the book (loaded through ``sphinx.local_extensions`` in ``_config.yml``).

It resolves cross-references written with a package's public name (``tpu_notes.training.plan``) to the object's
defining module, where the API reference documents it. It rebuilds every page when the book's own CSS
(book/assets/) or the table of contents changes, and removes exact duplicates from each
page's list of scripts: with Jupyter Book 1.0.4, sphinx-thebe 0.3 adds its inline configuration script twice (its
``env-before-read-docs`` handler runs twice), so every page declared
``const THEBE_JS_URL`` twice and the browser logged ``SyntaxError: Identifier 'THEBE_JS_URL' has already been
declared`` on every page (caught by tests/test_browser.py). It also loads the vendored plotly.js
(``_vendor/plotly/``, see tools/vendor_js.py) on the pages that show an explorer's static figure
(:mod:`tpu_notes.plots.interactive`), and only there: the bundle is 1.5 MB.

Navigation, as a reader meets it: a chapter's header shows a labelled "Open in Colab" link instead of the theme's
unlabelled rocket menu (whose one entry was Colab); a hidden solution (a code cell tagged ``solution`` and
``hide-cell``) is labelled "Show solution" / "Hide solution" instead of myst-nb's "Show code cell content"; and the
page has one search box, the one in the left sidebar (the theme also put one in a header band of its own).
"""

from __future__ import annotations

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform

#: Marks an explorer's static figure in a page's HTML (tpu_notes.plots.interactive.explorer_html writes it).
EXPLORER_MARK = 'class="tpu-notes-explorer"'
PLOTLY_JS = "plotly/plotly-cartesian.min.js"  # under html_static_path (_vendor/)


#: The words of a chapter's launch link, and of a hidden solution's toggle.
COLAB_TEXT = "Open in Colab"
SOLUTION_TAG = "tag_solution"  # myst-nb's class for a cell tagged "solution"
SOLUTION_PROMPTS = {"prompt_show": "Show solution", "prompt_hide": "Hide solution"}


def _one_search_box(app, config):
    """One search box: the theme's sidebar field. pydata-sphinx-theme adds another in a header band (its
    ``navbar_persistent`` default) unless the option is set; on a narrow window the article header's search icon
    stays."""
    config.html_theme_options.setdefault("navbar_persistent", [])


def _label_colab_link(app, pagename, templatename, context, doctree):
    """Replace the theme's launch menu (an unlabelled rocket icon) by its Colab link, labelled "Open in Colab".

    sphinx-book-theme adds the menu to ``header_buttons`` (priority 501); this runs after it. Other launch entries
    (Binder, JupyterHub, Thebe), should _config.yml ask for them, stay in the menu."""
    buttons = context.get("header_buttons")
    if not buttons:
        return
    for i, button in enumerate(buttons):
        if button.get("type") != "group" or button.get("label") != "launch-buttons":
            continue
        colab = [b for b in button["buttons"] if b.get("type") == "link" and "colab" in b.get("url", "")]
        if not colab:
            return
        link = dict(colab[0], text=COLAB_TEXT, tooltip="Run this chapter as a notebook on Google Colab")
        link["label"] = "open-in-colab"
        rest = [b for b in button["buttons"] if b is not colab[0]]
        buttons[i : i + 1] = [link] + ([dict(button, buttons=rest)] if rest else [])
        return


class _LabelSolutions(SphinxPostTransform):
    """Label a hidden solution's toggle "Show solution" / "Hide solution". myst-nb's post-transform (priority 199)
    turns a hidden cell's ``prompt_show`` / ``prompt_hide`` into the ``<summary>``; this runs just before it.
    Other hidden cells (a chapter's setup cell) keep myst-nb's labels."""

    default_priority = 190
    formats = ("html",)

    def run(self, **kwargs):
        for node in self.document.findall(nodes.container):
            if node.get("nb_element") == "cell_code" and node.get("hide_mode") and SOLUTION_TAG in node["classes"]:
                for key, text in SOLUTION_PROMPTS.items():
                    node[key] = text


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        # the same inline script arrives once with filename None and once with "" (Sphinx's two registries)
        key = (getattr(script, "filename", script) or "", repr(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def _add_plotly(app, pagename, templatename, context, doctree):
    """Load plotly.js on a page whose body holds an explorer figure. A plain, synchronous script in the page's
    head (before the body's inline scripts run; priority 200 puts it before RequireJS, should a page load it)."""
    if EXPLORER_MARK in (context.get("body") or ""):
        app.add_js_file(PLOTLY_JS, priority=200)


def _assets_digest(app) -> str:
    """A hash of what every page depends on beyond its own source: the book's static files (book/assets/: the
    CSS) and the table of contents (each page's sidebar lists every chapter)."""
    import hashlib
    from pathlib import Path

    h = hashlib.sha256()
    toc = Path(app.confdir) / "_toc.yml"
    h.update(toc.read_bytes() if toc.is_file() else b"<no _toc.yml>")
    for folder in app.config.html_static_path:
        root = Path(app.confdir) / folder
        if root.name != "assets" or not root.is_dir():  # _vendor has its own stamp (tools/vendor_js.py)
            continue
        for f in sorted(root.rglob("*")):
            if f.is_file():
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()


def _outdated_when_assets_change(app, env, added, changed, removed):
    """Rewrite every page when book/assets/ or _toc.yml changes. Sphinx copies static files only when some page
    is out of date, and each page links the CSS with a hash of its content (``book.css?v=...``): an incremental
    build after a CSS-only edit would otherwise keep the old CSS ("no targets are out of date"). Likewise a new
    chapter in _toc.yml must reach the sidebar of every page, not only of the pages that changed."""
    digest = _assets_digest(app)
    if getattr(env, "book_assets_digest", None) == digest:
        return []
    env.book_assets_digest = digest
    return sorted(env.found_docs)


def _resolve_public_name(app, env, node, contnode):
    """Resolve a Python cross-reference written with the name readers use for a re-exported object.

    ``tpu_notes.training.plan`` is defined in ``tpu_notes.training.planner`` and documented there (each object once,
    on its defining module's API page); a reference to the package name would otherwise be a missing target. Here
    the name is imported, and the reference is sent to ``<obj.__module__>.<obj.__qualname__>``.
    """
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target.startswith("tpu_notes."):
        return None
    import importlib

    parts = target.split(".")
    obj = None
    for i in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        break
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not qualname or f"{module}.{qualname}" == target:
        return None
    py = env.get_domain("py")
    return py.resolve_xref(
        env, node.get("refdoc", ""), app.builder, node.get("reftype", "obj"), f"{module}.{qualname}", node, contnode
    )


def setup(app):
    app.connect("config-inited", _one_search_box)
    app.connect("html-page-context", _label_colab_link, priority=600)  # after sphinx-book-theme's (501)
    app.add_post_transform(_LabelSolutions)
    app.connect("missing-reference", _resolve_public_name)
    # Late priority: after myst-nb and the theme have added their page-specific scripts.
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _add_plotly)  # default priority 500: before the dedupe above
    app.connect("env-get-outdated", _outdated_when_assets_change)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
