"""The Colab path works, without Colab: a chapter's generated setup cell installs tpu_notes from the repository.

On Colab, the setup cell (tools/nbcells.py) runs ``pip install --no-deps git+<repo>@<ref>`` and never touches JAX.
Here we simulate that: a ``git clone`` of this repository's committed HEAD stands in for GitHub, a fresh virtual
environment that has JAX, ipykernel, matplotlib, ipywidgets and numpy but *not* tpu_notes stands in for the Colab
runtime, and ``TPU_NOTES_FORCE_COLAB=1`` + ``TPU_NOTES_REPO=file://<clone>`` make the setup cell take the Colab
branch. Chapter 1 must then run from top to bottom without an error, and tpu_notes must have come from the clone.

The fresh environment borrows the test environment's packages through a ``.pth`` line naming its site-packages
directory. A plain path line does not process the ``.pth`` files inside it, so the editable install of tpu_notes
there is not visible (asserted below).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAPTER = "notebooks/01_rooflines.ipynb"
BUILD_PRODUCTS = (".venv/", "venv/", "_build/", "_vendor/", "node_modules/")

EXECUTE = r"""
import sys, nbformat, nbclient
path, cwd = sys.argv[1], sys.argv[2]
nb = nbformat.read(path, as_version=4)
nbclient.NotebookClient(nb, timeout=120, kernel_name="colab-sim", resources={"metadata": {"path": cwd}}).execute()
errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
assert not errors, errors
print("setup cell output:", "".join(o.get("text", "") for o in nb.cells[2].outputs).strip())
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


def test_setup_cell_installs_tpu_notes_from_the_repository(tmp_path):
    if _tracked_build_products():
        pytest.skip(
            "the repository tracks build products (see test_repository_tracks_no_build_products); "
            "cloning it would check out ~1 GB"
        )
    clone = tmp_path / "clone"
    _git("clone", "--quiet", str(ROOT), str(clone))
    if not (clone / CHAPTER).exists():
        pytest.skip(f"{CHAPTER} is not committed yet (the test runs the committed state, as Colab would)")
    sys.path.insert(0, str(clone / "tools"))
    try:
        import nbcells
    finally:
        sys.path.pop(0)
    _, _, ref = nbcells.repo_settings()
    branch = _git("rev-parse", "--abbrev-ref", "HEAD", cwd=clone).strip()
    if branch != ref:  # e.g. CI on a detached checkout: give the clone the ref the setup cell installs from
        _git("branch", "-f", ref, "HEAD", cwd=clone)

    # A "Colab runtime": fresh venv + the test environment's packages, minus tpu_notes.
    venv = tmp_path / "colab-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MPLBACKEND", "VIRTUAL_ENV")}
    env.update(
        JUPYTER_PATH=str(tmp_path / "jupyter"),
        JUPYTER_DATA_DIR=str(tmp_path / "jupyter-data"),
        JAX_NUM_CPU_DEVICES="8",
        TPU_NOTES_FORCE_COLAB="1",
        TPU_NOTES_REPO=f"file://{clone}",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import importlib.util as u; "
            "print([m for m in ('jax', 'ipykernel', 'matplotlib', 'ipywidgets', 'numpy', "
            "'nbclient', 'pip') if u.find_spec(m) is None], u.find_spec('tpu_notes') is None)",
        ],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert probe == "[] True", f"the simulated runtime must have the stack but not tpu_notes; got {probe}"

    # A kernel that runs in that environment (and nowhere else).
    spec = tmp_path / "jupyter" / "kernels" / "colab-sim"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "simulated Colab",
                "language": "python",
            }
        )
    )

    notebook = clone / CHAPTER
    run = subprocess.run(
        [str(python), "-c", EXECUTE, str(notebook), str(notebook.parent)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert run.returncode == 0, f"{CHAPTER} failed on the Colab path:\n{run.stdout[-3000:]}\n{run.stderr[-5000:]}"

    # tpu_notes now lives in the "runtime", installed by the setup cell from the clone at the pinned ref.
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import tpu_notes, importlib.metadata as m; print(tpu_notes.__file__);"
            "print(m.distribution('tpu_notes').read_text('direct_url.json'))",
        ],
        cwd=tmp_path,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert Path(where[0]).is_relative_to(venv), f"tpu_notes imported from {where[0]}, not the simulated runtime"
    origin = json.loads(where[1])
    assert origin["url"] == f"file://{clone}" and origin["vcs_info"]["requested_revision"] == ref, origin
    assert origin["vcs_info"]["commit_id"] == _git("rev-parse", "HEAD", cwd=clone).strip()
