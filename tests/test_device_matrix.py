"""The device-count matrix (tools/device_matrix.py) and the device script (tools/device_check.py): what they run,
and that the matrix's scenarios really catch what they are there to catch. `make test` runs the matrix itself after
pytest; these tests hold its definition and its teeth."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import device_matrix  # noqa: E402


def test_every_chapter_is_in_the_pinned_pass_and_mesh_chapters_in_every_scenario():
    names = {j.name for j in device_matrix.jobs()}
    chapters = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert {f"nbval-pinned:{c}" for c in chapters} <= names
    for sc in ("cpu1", "cpu2", "cpu4"):
        assert {f"{sc}:{c}" for c in device_matrix.MESH_CHAPTERS} <= names
    # the pinned, output-compared pass runs the chapters without meshes on one CPU device and those with meshes
    # under accel1: those runs are not repeated
    assert not [n for n in names if n.startswith("cpu1:") and n[-2:] not in device_matrix.MESH_CHAPTERS]
    assert not [n for n in names if n.startswith("accel1:")]
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        for ch, marker in (("05", "_trimmed"), ("04", "jax_num_cpu_devices")):
            (path,) = (ROOT / "notebooks").glob(f"{ch}_*.ipynb")
            cmd, env = device_matrix.pinned_nbval_command(path, Path(work))
            startup = Path(env["IPYTHONDIR"]) / "profile_default" / "startup" / "00-one-device.py"
            assert marker in startup.read_text() and "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]


def test_mesh_chapters_are_exactly_those_that_build_meshes():
    """A chapter that builds a mesh (or trains/compiles over DEVICES) must be in MESH_CHAPTERS, so the 2-, 4- and
    accel1 runs cover it."""
    import re

    builds = set()
    for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(p.read_text())["cells"] if c["cell_type"] == "code")
        if re.search(r"demo_mesh\(|ring_mesh\(|parallel\.(train|compiled_step|oracle_summary)\(|n_devices=len", code):
            builds.add(p.name[:2])
    assert builds == set(device_matrix.MESH_CHAPTERS)


def _notebook(tmp_path, *cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    return path


def _scenario(name):
    (sc,) = [s for s in device_matrix.scenarios() if s.name == name]
    return sc


def test_accel1_catches_a_mesh_of_jax_devices(tmp_path):
    """On a 1-chip runtime a mesh of jax.devices() has one device: the accel1 scenario makes that fail, while the
    setup cell's DEVICES still hold 8 (the CPU fallback)."""
    setup = "from tpu_notes import devices\nDEVICES = devices.setup(8)\nassert len(DEVICES) == 8"
    good = _notebook(tmp_path, setup, "from tpu_notes import devices\ndevices.demo_mesh((8,), ('x',), DEVICES)")
    device_matrix.execute(_scenario("accel1"), good)
    bad = _notebook(tmp_path, setup, "import jax\njax.make_mesh((8,), ('x',))")
    with pytest.raises(Exception, match="devices"):
        device_matrix.execute(_scenario("accel1"), bad)


def test_cpu1_starts_jax_with_one_device_before_the_setup_cell(tmp_path):
    probe = _notebook(
        tmp_path, "from tpu_notes import devices\nDEVICES = devices.setup(8)\nassert len(DEVICES) == 1, DEVICES"
    )
    device_matrix.execute(_scenario("cpu1"), probe)
    with pytest.raises(Exception):  # noqa: B017 - whatever nbclient raises for a failed cell is the finding
        device_matrix.execute(_scenario("cpu2"), probe)  # two devices there: the assertion fails


def test_device_check_dry_run(tmp_path):
    """The prepared accelerator script, in its dry mode: every step runs and the results name the device and the
    command."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "device_check.py"), "--dry-run", "--out", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (results,) = tmp_path.glob("*/results.json")
    r = json.loads(results.read_text())
    assert r["dry_run"] and r["command"] == "python tools/device_check.py --dry-run"
    assert r["device"].startswith("JAX ") and all(s["ok"] for s in r["steps"].values())
    assert r["steps"]["bench"]["result"]  # bench --json's own output
    multi = r["steps"]["multi_device"]
    assert multi["pallas"]["equal"] and multi["pallas"]["interpreted"]
    assert multi["train"]["equal_to_one_device"] and len(multi["collectives"]) == 2
    chapters = r["steps"]["cells"]["chapters"]
    assert sorted(chapters) == list(__import__("device_check").MEASURED_CHAPTERS)
    assert all(entry["cells"] for entry in chapters.values())  # every listed chapter has measured cells
    assert (results.parent / "cells.md").read_text().startswith("# JAX ")


def test_the_measured_page_lists_device_check_results(tmp_path):
    """book/measured.md fills itself: write_measured_page lists each results folder between its markers, and a
    second call replaces the list instead of appending another."""
    import device_check

    page, measured = tmp_path / "measured.md", tmp_path / "measured"
    page.write_text("# Measured on real hardware\n\nProse stays.\n")
    device_check.write_measured_page(page, measured)
    assert "No results yet" in page.read_text()
    (measured / "gpu-nvidia-h200").mkdir(parents=True)
    (measured / "gpu-nvidia-h200" / "results.json").write_text(
        json.dumps(
            {
                "device": "JAX 0.10.2 on 1 NVIDIA H200 devices",
                "command": "python tools/device_check.py",
                "commit": "0123456789abcdef",
                "when_utc": "2026-12-01 12:00",
                "steps": {"bench": {"ok": True}, "cells": {"ok": False}},
            }
        )
    )
    device_check.write_measured_page(page, measured)
    device_check.write_measured_page(page, measured)
    text = page.read_text()
    assert text.startswith("# Measured on real hardware\n\nProse stays.")
    assert text.count(device_check.BEGIN) == 1 and "No results yet" not in text
    assert "**JAX 0.10.2 on 1 NVIDIA H200 devices**" in text and "bench ok, cells failed" in text
    assert "(measured/gpu-nvidia-h200/results.json)" in text
