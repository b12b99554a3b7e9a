"""Copy the JavaScript the HTML book serves itself into ``_vendor/`` (no CDN at run time).

    python tools/vendor_js.py          # npm ci (when node_modules is stale), then copy; a no-op when up to date
    python tools/vendor_js.py --force  # copy again even if the stamp says it is up to date

What is vendored (versions pinned by package.json + package-lock.json at the repository root, from npm):

* MathJax 3 (``tex-mml-chtml.js`` with its woff-v2 fonts, the autoloaded TeX extensions, the menu/accessibility
  components and the speech rule engine they load lazily) -> ``_vendor/mathjax/``;
* the ipywidgets HTML manager (``@jupyter-widgets/html-manager``'s ``embed-amd.js`` with its chunks and fonts)
  and ``requirejs`` -> ``_vendor/widgets/``;
* plotly.js, its cartesian bundle (``plotly.js-cartesian-dist-min``: scatter, bar and heatmap, all the explorers'
  static figures use) -> ``_vendor/plotly/``. ``tools/book_assets.py`` loads it only on pages that show an
  explorer (:mod:`tpu_notes.plots.interactive`). Version 4 sets ``window.Plotly`` itself and registers no AMD
  module, so RequireJS on the same page (the widget manager) does not hide it.

``_config.yml`` publishes ``_vendor`` as Sphinx's ``html_static_path`` (so it lands in ``_build/html/_static/``),
points ``mathjax_path`` and myst-nb's ``nb_ipywidgets_js`` at these copies. ``_vendor/`` and ``node_modules/`` are
build products (gitignored); ``_vendor/.stamp`` records the lockfile hash they were made from.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NODE_MODULES = ROOT / "node_modules"
VENDOR = ROOT / "_vendor"
LOCK = ROOT / "package-lock.json"
STAMP = VENDOR / ".stamp"

#: (source under node_modules, destination under _vendor); a directory is copied whole.
COPIES = [
    ("mathjax/es5/tex-mml-chtml.js", "mathjax/tex-mml-chtml.js"),
    ("mathjax/es5/output/chtml/fonts/woff-v2", "mathjax/output/chtml/fonts/woff-v2"),
    ("mathjax/es5/input/tex/extensions", "mathjax/input/tex/extensions"),
    ("mathjax/es5/ui", "mathjax/ui"),
    ("mathjax/es5/a11y", "mathjax/a11y"),
    ("mathjax/es5/sre", "mathjax/sre"),
    ("requirejs/require.js", "widgets/require.js"),
    ("plotly.js-cartesian-dist-min/plotly-cartesian.min.js", "plotly/plotly-cartesian.min.js"),
    ("plotly.js-cartesian-dist-min/LICENSE", "plotly/LICENSE"),
]
#: every file of the html-manager's dist/ whose name ends like this goes to _vendor/widgets/ (the chunks
#: embed-amd.js loads, and the Font Awesome files its CSS refers to); source maps are left out.
WIDGET_SUFFIXES = (".js", ".woff2", ".woff", ".ttf", ".eot", ".svg", ".txt")
WIDGET_SKIP = ("embed.js", "libembed-amd.js")  # the non-AMD bundle and the library build: never loaded here
WIDGET_DIST = "@jupyter-widgets/html-manager/dist"


#: _vendor/widgets/config.js, loaded between require.js and embed-amd.js (see _config.yml). The manager computes
#: where its chunks and Font Awesome files are from the RequireJS address of its own module; by default that is
#: "<page folder>/@jupyter-widgets/html-manager/dist/", which does not exist (404s in the browser test).
#: It also bridges the manager's MathJax 2 call (``MathJax.Hub.Queue(["Typeset", MathJax.Hub, el])``, used for
#: widget labels) to the MathJax 3 the book loads; without it every labelled widget threw "Cannot read properties
#: of undefined (reading 'Queue')".
REQUIRE_CONFIG = """// Written by tools/vendor_js.py.
// The ipywidgets manager loads its chunks and fonts next to its own module:
// map that module to the vendored copy in _static/widgets/ of this book.
(function () {
  var root = document.documentElement.dataset.content_root || "";
  require.config({paths: {"@jupyter-widgets/html-manager/dist": root + "_static/widgets"}});
  // The manager typesets widget labels with MathJax 2's Hub.Queue; the book runs MathJax 3.
  // This listener is added before the manager's own, so the bridge exists when widgets render.
  window.addEventListener("load", function () {
    var mj = window.MathJax;
    if (!mj || mj.Hub || !mj.startup) return;
    mj.Hub = {Queue: function () {
      var elements = [];
      for (var i = 0; i < arguments.length; i++) {
        var job = arguments[i];
        if (Array.isArray(job) && job[0] === "Typeset" && job[2]) elements.push(job[2]);
      }
      return mj.startup.promise.then(function () { return mj.typesetPromise(elements); });
    }};
  });
})();
"""


def _digest() -> str:
    h = hashlib.sha256(LOCK.read_bytes())
    h.update(json.dumps([COPIES, WIDGET_SUFFIXES, WIDGET_SKIP, REQUIRE_CONFIG]).encode())
    return h.hexdigest()


def npm_ci() -> None:
    """Install node_modules exactly as package-lock.json says, unless it already is."""
    installed = NODE_MODULES / ".package-lock.json"  # npm writes this after every install
    if installed.exists() and installed.stat().st_mtime >= LOCK.stat().st_mtime:
        return
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm not found: install Node.js (Debian: apt-get install -y npm), then run this again")
    cmd = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    print("vendor_js: " + " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, cwd=ROOT, check=True)


def vendor(force: bool = False) -> bool:
    """Make ``_vendor/`` match package-lock.json; return True if anything was copied."""
    digest = _digest()
    if not force and STAMP.exists() and STAMP.read_text().strip() == digest:
        return False
    npm_ci()
    if VENDOR.exists():
        shutil.rmtree(VENDOR)
    for src, dst in COPIES:
        s, d = NODE_MODULES / src, VENDOR / dst
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d)
        else:
            shutil.copy2(s, d)
    widgets = VENDOR / "widgets"
    for f in sorted((NODE_MODULES / WIDGET_DIST).iterdir()):
        if f.is_file() and f.name.endswith(WIDGET_SUFFIXES) and f.name not in WIDGET_SKIP:
            shutil.copy2(f, widgets / f.name)
    (widgets / "config.js").write_text(REQUIRE_CONFIG)
    for required in (
        "mathjax/tex-mml-chtml.js",
        "widgets/require.js",
        "widgets/embed-amd.js",
        "plotly/plotly-cartesian.min.js",
    ):
        if not (VENDOR / required).is_file():
            raise SystemExit(f"vendor_js: {required} missing after copying; is package-lock.json intact?")
    STAMP.write_text(digest + "\n")
    size = sum(f.stat().st_size for f in VENDOR.rglob("*") if f.is_file())
    print(f"vendor_js: {VENDOR.relative_to(ROOT)}/ ready ({size / 1e6:.1f} MB)", flush=True)
    return True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="copy again even when the stamp is current")
    vendor(force=parser.parse_args(argv).force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
