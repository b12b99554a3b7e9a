"""Build the HTML book from the committed notebook outputs (``make book``) and fail loudly on any warning.

    python tools/build_book.py             # vendor the JS, write the status page, build (Sphinx is incremental)
    python tools/build_book.py --if-stale  # the same, but do nothing when the last build used the same inputs

Steps: ``tools/vendor_js.py`` (MathJax and the widget manager into ``_vendor/``; a no-op when current),
``tools/status.py`` (``book/status.md``), then ``jupyter-book build`` with warnings as errors (``-W -n``), and a check
that ``_build/html/index.html`` exists. Notebooks are never executed here: pages show the committed outputs.

Idempotent and cheap to call from tests: a successful build records a hash of everything it read (the config, the
table of contents, every page listed there, the vendored JS, the CSS in book/assets/) in ``_build/.book_inputs``;
``--if-stale`` compares against it (content, not mtimes, so a fresh ``git clone`` is handled). A file lock
serialises concurrent callers, e.g. two test sessions, so they never build into the same folder at once.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))


def toc_files(root: Path = ROOT) -> list[Path]:
    """Source files of every page listed in _toc.yml (root first, then in reading order)."""
    import yaml

    toc = yaml.safe_load((root / "_toc.yml").read_text())
    names = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                names.append(node["file"])
            if "glob" in node:  # e.g. book/api/*: the API reference pages, sorted by name as Jupyter Book does
                names.extend(
                    sorted(p.with_suffix("").relative_to(root).as_posix() for p in root.glob(node["glob"] + ".md"))
                )
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []) or []:
                    walk(child)

    walk(toc)
    paths = []
    for name in names:
        candidates = [root / f"{name}{ext}" for ext in (".ipynb", ".md", ".rst")] + [root / name]
        found = next((c for c in candidates if c.is_file()), None)
        paths.append(found if found is not None else root / f"{name}.ipynb")  # missing: hashed as absent
    return paths


def inputs_digest(root: Path = ROOT) -> str:
    h = hashlib.sha256()
    files = [root / "_config.yml", root / "_toc.yml", root / "_vendor" / ".stamp"] + toc_files(root)
    files += sorted((root / "book" / "assets").glob("*"))  # the book's own CSS
    files += sorted((root / "tpu_notes").rglob("*.py"))  # docstrings: the API reference pages render them
    for f in files:
        h.update(str(f.relative_to(root)).encode() + b"\0")
        h.update(f.read_bytes() if f.is_file() else b"<missing>")
        h.update(b"\0")
    return h.hexdigest()


def build(builddir: Path, if_stale: bool = False) -> int:
    import api_pages
    import status
    import vendor_js

    out = builddir / "_build"
    out.mkdir(parents=True, exist_ok=True)
    index = out / "html" / "index.html"
    record = out / ".book_inputs"
    with open(out / ".book_lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        vendor_js.vendor()
        status.write()
        api_pages.main()
        digest = inputs_digest()
        if if_stale and index.exists() and record.exists() and record.read_text().strip() == digest:
            print("book is up to date: " + str(index))
            return 0
        missing = [p.relative_to(ROOT) for p in toc_files() if not p.is_file()]
        if missing:
            print("_toc.yml lists pages that do not exist: " + ", ".join(map(str, missing)))
            return 1
        record.unlink(missing_ok=True)
        jb = Path(sys.executable).with_name("jupyter-book")
        cmd = [str(jb), "build", str(ROOT), "--path-output", str(builddir), "-W", "-n", "--keep-going"]
        start = time.perf_counter()
        result = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True)
        seconds = time.perf_counter() - start
        log = result.stdout + result.stderr
        (out / "build.log").write_text(log)
        if result.returncode != 0 or not index.exists():
            # Sphinx re-reads only changed pages: after a failed build the pages that warned are not read again,
            # so the next build would pass without the warning. Forget the environment so it re-reads them all.
            shutil.rmtree(out / ".doctrees", ignore_errors=True)
            print(log[-6000:])
            print(f"book build failed (rc={result.returncode}); index.html exists: {index.exists()}")
            return 1
        record.write_text(digest + "\n")
    shown = index.relative_to(ROOT) if index.is_relative_to(ROOT) else index
    print(f"built {shown} in {seconds:.1f} s")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--builddir", default=str(ROOT), help="folder that receives _build/ (default: repo root)")
    parser.add_argument("--if-stale", action="store_true", help="skip the build when its inputs are unchanged")
    args = parser.parse_args(argv)
    return build(Path(args.builddir).resolve(), if_stale=args.if_stale)


if __name__ == "__main__":
    sys.exit(main())
