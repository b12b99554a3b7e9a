"""The Colab path works, without Colab: every chapter's setup and import cells run in a Colab-like environment.

A virtual environment holding exactly ``tools/nbcells.py``'s ``COLAB_IMAGE`` (what a Colab runtime already has:
JAX at the oldest version ``tpu_notes`` supports, numpy, matplotlib, IPython, ipywidgets, rich, pandas, plotly,
and neither ``tpu_notes`` nor the project's extras such as ``xprof``) stands in for the Colab runtime. It is built
once and cached under ``.venv/colab-sim`` (keyed on that list and the Python version); each test run lays a thin
environment over it (a ``.pth`` line naming its site-packages), so what the setup cells install lands in the
thin one and the cache stays as Colab ships it.

Each chapter then runs, in its own Python process, under IPython, with ``TPU_NOTES_FORCE_COLAB=1``: its generated
setup cell (which installs ``tpu_notes`` with ``pip --no-deps`` from ``TPU_NOTES_REPO``, here a wheel built from
this checkout instead of the ``git+`` URL, plus what the chapter needs beyond Colab's image), then every cell
before its first section heading (the imports). The cells that call an optional tool are also run with that tool
hidden, and must say so in one line and go on.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import nbcells  # noqa: E402

CACHE = ROOT / ".venv" / "colab-sim"
PIP_CACHE = ROOT / ".venv" / "colab-sim-pip"  # wheels the setup cells download (xprof), kept between runs
BUILD_PRODUCTS = (".venv/", "venv/", "_build/", "_vendor/", "node_modules/")
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

#: The cells (by id) that call an optional tool, run with the tool hidden: each must print one line naming it.
GUARDED = {
    "03_sharded_matmuls": [("rich", "185f1417"), ("rich", "9a6b1dd2")],
    "09_profiling": [("xprof", "5b443b9d"), ("xprof", "09-xprof-steps")],
}

RUN_CELLS = r"""
import json, os, sys
from IPython.terminal.interactiveshell import TerminalInteractiveShell as Shell

path, hidden = sys.argv[1], json.loads(sys.argv[2])
shell = Shell.instance(colors="NoColor", term_title=False)
os.chdir(os.path.dirname(path))
cells = json.load(open(path))["cells"]
by_id = {c.get("id"): c for c in cells}
src = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
run = []
for c in cells[2:]:  # after the badge and the title (whose "## What you will learn" is no section)
    if c["cell_type"] == "markdown" and any(l.startswith("## ") for l in src(c).splitlines()):
        break
    if c["cell_type"] == "code":
        run.append(c)
for c in run:
    print(f"--- cell {c['id']}", flush=True)
    result = shell.run_cell(src(c))
    if not result.success:
        sys.exit(f"cell {c['id']} failed")
for tool, cid in hidden:
    sys.modules[tool] = None  # importlib.util.find_spec(tool) is None, import fails: as if not installed
    print(f"--- hidden {tool}: cell {cid}", flush=True)
    result = shell.run_cell(src(by_id[cid]))
    if not result.success:
        sys.exit(f"cell {cid} failed without {tool}")
    del sys.modules[tool]
print("--- done", flush=True)
"""


def _git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _tracked_build_products() -> dict[str, int]:
    counts: dict[str, int] = {}
    for line in _git("ls-files").splitlines():
        for prefix in BUILD_PRODUCTS:
            if line.startswith(prefix):
                counts[prefix] = counts.get(prefix, 0) + 1
    return counts


def test_repository_tracks_no_build_products():
    """Colab's pip and CI clone the repository: it must not carry a virtual environment or build output."""
    tracked = _tracked_build_products()
    assert not tracked, (
        f"git tracks build products {tracked}: `git rm -r --cached` them (they are in .gitignore); "
        "every clone, including pip's on Colab, would copy them"
    )


def _env(**extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MPLBACKEND", "VIRTUAL_ENV", "PIP_USER")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return env


def _key() -> str:
    text = "\n".join(nbcells.COLAB_IMAGE) + f"\npython {sys.version_info[:2]}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def colab_image() -> Path:
    """The cached Colab-like environment, built on first use (most of a cold run: JAX 0.7.0, scipy, numpy, ...)."""
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE.parent / "colab-sim.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time (pytest-xdist workers, parallel runs)
        stamp = CACHE / ".key"
        if stamp.exists() and stamp.read_text() == _key():
            return CACHE
        shutil.rmtree(CACHE, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(CACHE)], check=True)
        install = subprocess.run(
            [str(CACHE / "bin" / "python"), "-m", "pip", "install", "-q", *nbcells.COLAB_IMAGE],
            env=_env(PIP_CACHE_DIR=str(PIP_CACHE)),
            capture_output=True,
            text=True,
        )
        assert install.returncode == 0, f"could not build the Colab-like environment:\n{install.stderr[-4000:]}"
        stamp.write_text(_key())
        return CACHE


def _site(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(
        subprocess.run([str(python), "-c", code], cwd="/", check=True, capture_output=True, text=True).stdout.strip()
    )


def _runtime(base: Path, where: Path) -> Path:
    """A fresh environment over ``base``: sees its packages, installs into its own site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    (_site(python) / "colab_image.pth").write_text(str(_site(base / "bin" / "python")) + "\n")
    return python


def _wheel(tmp_path: Path, base: Path) -> Path:
    """tpu_notes as Colab's pip would build it from the repository: a wheel of this checkout's package files."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "tpu_notes", src / "tpu_notes", ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path / "wheels"
    subprocess.run(
        [str(base / "bin" / "python"), "-m", "pip", "wheel", "-q", "--no-deps", str(src), "-w", str(out)],
        check=True,
        capture_output=True,
        env=_env(PIP_CACHE_DIR=str(PIP_CACHE)),
    )
    return next(out.glob("tpu_notes-*.whl"))


def _chapter(stem: str, path: Path, tmp_path: Path, base: Path, wheel: Path) -> tuple[str, int, str, Path]:
    python = _runtime(base, tmp_path / f"rt-{stem}")
    hidden = GUARDED.get(stem, [])
    run = subprocess.run(
        [str(python), "-c", RUN_CELLS, str(path), json.dumps(hidden)],
        cwd=tmp_path,
        env=_env(
            JAX_PLATFORMS="cpu",
            JAX_NUM_CPU_DEVICES="8",
            TPU_NOTES_FORCE_COLAB="1",
            TPU_NOTES_REPO=str(wheel),
            PIP_CACHE_DIR=str(PIP_CACHE),
            # No package index for the setup cells: tpu_notes comes from the local wheel, and a chapter's extra tool
            # (xprof: a large tree of dependencies, a minute of every run) cannot install, so the cell must print
            # its one line and go on, the path a reader without the tool takes. The image itself is built online.
            PIP_NO_INDEX="1",
            MPLBACKEND="agg",
        ),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return stem, run.returncode, run.stdout + run.stderr, python


@pytest.fixture(scope="module")
def colab_runs(tmp_path_factory):
    if not NOTEBOOKS:
        pytest.skip("no chapters yet")
    tmp_path = tmp_path_factory.mktemp("colab")
    started = time.perf_counter()
    base = colab_image()
    wheel = _wheel(tmp_path, base)
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda p: _chapter(p.stem, p, tmp_path, base, wheel), NOTEBOOKS))
    print(f"Colab path: {len(runs)} chapters in {time.perf_counter() - started:.0f} s")
    return base, {stem: (rc, out, python) for stem, rc, out, python in runs}


def test_the_simulated_runtime_is_colab_like(colab_runs):
    """The cached environment has Colab's stack at the pinned versions and neither tpu_notes nor xprof."""
    base, _ = colab_runs
    code = (
        "import importlib.metadata as m, importlib.util as u, json; "
        "print(json.dumps([m.version('jax'), u.find_spec('tpu_notes') is None, u.find_spec('xprof') is None]))"
    )
    jax_version, no_tpu_notes, no_xprof = json.loads(
        subprocess.run(
            [str(base / "bin" / "python"), "-c", code], cwd=base, check=True, capture_output=True, text=True
        ).stdout
    )
    assert f"jax=={jax_version}" in nbcells.COLAB_IMAGE
    assert no_tpu_notes and no_xprof, "the Colab-like image must not carry tpu_notes or the project's extras"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_setup_and_import_cells_run_on_the_colab_path(colab_runs, path):
    base, runs = colab_runs
    rc, out, python = runs[path.stem]
    assert rc == 0, f"{path.name} failed on the Colab path:\n{out[-5000:]}"
    assert "--- done" in out
    # tpu_notes came from the setup cell's install, into the runtime, not from this checkout
    code = "import tpu_notes; print(tpu_notes.__file__)"
    where = subprocess.run([str(python), "-c", code], cwd=python.parent.parent, env=_env(), capture_output=True)
    assert Path(where.stdout.decode().strip()).is_relative_to(python.parent.parent), where
    for requirement in nbcells.colab_needs(path.stem):
        name = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0]
        assert f"could not install {name}" in out, f"{path.stem}: no line saying {name} could not be installed"
    for tool, cid in GUARDED.get(path.stem, []):
        said = out.split(f"--- hidden {tool}: cell {cid}\n", 1)[1].split("\n---", 1)[0].strip().splitlines()
        missing = [line for line in said if "not installed" in line]
        assert len(missing) == 1 and f"pip install {tool}" in missing[0], f"cell {cid} without {tool} printed {said}"


def test_every_optional_call_is_guarded_and_exercised():
    """A cell that calls an optional tool checks for it first, and is listed in GUARDED (so the test hides it)."""
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text())["cells"]
        for cell in cells:
            src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            if cell["cell_type"] != "code" or cell["metadata"].get("tpu_notes", {}).get("generated"):
                continue
            for tool, calls in nbcells.OPTIONAL_TOOLS.items():
                if any(call in src for call in calls):
                    assert (tool, cell["id"]) in GUARDED.get(path.stem, []), f"{path.stem} {cell['id']} not in GUARDED"
                    assert f'find_spec("{tool}")' in src and f"pip install {tool}" in src, (
                        f"{path.stem} cell {cell['id']} calls {tool} without checking it is installed"
                    )


def test_colab_installs_what_the_chapter_needs_beyond_the_image():
    image = {re.split(r"[=<>]", r)[0] for r in nbcells.COLAB_IMAGE}
    extra = nbcells.notebooks_extra()
    for path in NOTEBOOKS:
        setup = nbcells.setup_source(path.stem)
        needs = nbcells.colab_needs(path.stem)
        for tool in nbcells.OPTIONAL_TOOLS:
            if tool in image:
                assert extra[tool] not in needs, f"{path.stem}: {tool} is in Colab's image, no install needed"
        for requirement in needs:
            assert f'"{requirement}"' in setup
    assert any("xprof" in r for r in nbcells.colab_needs("09_profiling")), "Chapter 9 needs xprof on Colab"


def test_oldest_jax_is_the_one_claimed_everywhere():
    """pyproject's JAX floor, the README's and the Colab image's JAX are one version."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    floors = {
        r.split(">=")[1] for deps in project["optional-dependencies"].values() for r in deps if r.startswith("jax>=")
    }
    pinned = [r.split("==")[1] for r in nbcells.COLAB_IMAGE if r.startswith(("jax==", "jaxlib=="))]
    assert len(floors) == 1 and len(set(pinned)) == 1, (floors, pinned)
    floor = floors.pop()
    assert pinned[0] == floor or pinned[0] == f"{floor}.0", f"Colab image JAX {pinned[0]} vs pyproject floor {floor}"
    assert f"JAX {floor} or newer" in (ROOT / "README.md").read_text()
