"""The chapters' half of `make test` (tools/device_matrix.py), the way tools/run_tests.py schedules it, and the
device script (tools/device_check.py): what they run, and that the matrix's scenarios really catch what they are
there to catch. `make test` runs the chapter jobs beside pytest; these tests hold their definition and their teeth."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import device_matrix  # noqa: E402


def test_every_chapter_is_compared_once_pinned_and_mesh_chapters_run_on_one_device():
    names = [j.name for j in device_matrix.jobs()]
    chapters = sorted(p.name[:2] for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert len(names) == len(set(names))
    # every chapter compared exactly once, and the mesh chapters executed on one CPU device: nothing else
    assert sorted(n for n in names if n.startswith("nbval-pinned:")) == [f"nbval-pinned:{c}" for c in chapters]
    assert sorted(n for n in names if not n.startswith("nbval-pinned:")) == sorted(
        f"cpu1:{c}" for c in device_matrix.MESH_CHAPTERS
    )
    # --full adds the 2- and 4-device runs of the mesh chapters
    full = {j.name for j in device_matrix.jobs(full=True)}
    assert full - set(names) == {f"{sc}:{c}" for sc in ("cpu2", "cpu4") for c in device_matrix.MESH_CHAPTERS}
    costs = [j.cost for j in device_matrix.jobs(full=True)]
    assert costs == sorted(costs, reverse=True)  # longest first
    import tempfile

    with tempfile.TemporaryDirectory() as work:
        for ch, marker in (("05", "_trimmed"), ("04", "jax_num_cpu_devices")):
            (path,) = (ROOT / "notebooks").glob(f"{ch}_*.ipynb")
            cmd, env = device_matrix.pinned_nbval_command(path, Path(work))
            startup = Path(env["IPYTHONDIR"]) / "profile_default" / "startup" / "00-one-device.py"
            assert marker in startup.read_text() and "intra_op_parallelism_threads=1" in env["XLA_FLAGS"]
            assert "--nbval" in cmd[cmd.index("-o") + 1] and cmd[-1] == str(path)


def test_make_test_runs_pytest_over_tests_only_and_the_chapters_beside_it():
    """The notebooks are compared once, by the pinned pass: pytest's own run (tools/run_tests.py) and a plain
    `pytest` (pytest.ini's testpaths) collect tests/ only."""
    import configparser

    import run_tests

    cmd = run_tests.pytest_command(1, [])
    assert not [a for a in cmd[cmd.index("pytest") + 1 :] if (ROOT / a).exists()]  # no path: testpaths decides
    assert run_tests.pytest_command(3, ["-x"])[-1] == "-x" and "-n" in run_tests.pytest_command(3, [])
    ini = configparser.ConfigParser()
    ini.read(ROOT / "pytest.ini")
    assert ini["pytest"]["testpaths"].split() == ["tests"]
    assert "--nbval" in ini["pytest"]["addopts"]  # `pytest notebooks/NN_slug.ipynb` still compares one chapter


def test_lanes_run_the_lead_first_then_share_the_queue(tmp_path, monkeypatch):
    """run_lanes: lane 0 runs the lead (pytest, in `make test`) on cores no other lane uses, then takes jobs from
    the same queue; every job runs once and a failure is counted."""
    import io
    import subprocess as sp

    ran, leads = [], []

    class Done:
        def __init__(self, rc):
            self.returncode, self.stdout, self.stderr = rc, "", ""

    def fake_run(cmd, **kwargs):
        job = cmd[cmd.index("--job") + 1]
        ran.append((job, cmd[: cmd.index(sys.executable)]))
        return Done(1 if job == "b" else 0)

    monkeypatch.setattr(sp, "run", fake_run)
    todo = [device_matrix.Job(n, c) for n, c in (("a", 3.0), ("b", 2.0), ("c", 1.0))]
    out = io.StringIO()
    failed = device_matrix.run_lanes(todo, 2, lead=leads.append, lead_cores=1, out=out)
    assert failed == 1 and sorted(j for j, _ in ran) == ["a", "b", "c"] and len(leads) == 1
    assert out.getvalue().count("FAIL") == 1 and out.getvalue().count("ok  ") == 2
    pins = {tuple(p) for _, p in ran} | {tuple(leads[0])}
    assert all(p == () or p[:2] == ("taskset", "-c") for p in pins)


def test_mesh_chapters_are_exactly_those_that_build_meshes():
    """A chapter that builds a mesh (or trains/compiles over DEVICES) must be in MESH_CHAPTERS, so it is compared
    under accel1 and executed on cpu1 (and on 2 and 4 devices with --full)."""
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
