"""A small Sphinx extension of the book (loaded through ``sphinx.local_extensions`` in ``_config.yml``).

It removes exact duplicates from each page's list of scripts. With Jupyter Book 1.0.4, sphinx-thebe 0.3 adds its
inline configuration script twice (its ``env-before-read-docs`` handler runs twice), so every page declared
``const THEBE_JS_URL`` twice and the browser logged ``SyntaxError: Identifier 'THEBE_JS_URL' has already been
declared`` on every page (caught by tests/test_browser.py).
"""
from __future__ import annotations


def _dedupe_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for script in scripts:
        # the same inline script arrives once with filename None and once with "" (Sphinx's two registries)
        key = (getattr(script, "filename", script) or "",
               repr(sorted(getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"] = unique


def setup(app):
    # Late priority: after myst-nb and the theme have added their page-specific scripts.
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
