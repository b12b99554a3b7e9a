"""Run every chapter on a one-device runtime, pinned to one core: the notebook half of `make test`.

    python tools/device_matrix.py                      # what `make test` runs (two lanes, each pinned to a core)
    python tools/device_matrix.py --full               # also the 2- and 4-device runs of the mesh chapters
    python tools/device_matrix.py cpu1:05 nbval-pinned:10
    python tools/device_matrix.py --list

Two kinds of job, each in its own process pinned to one core:

- ``nbval-pinned:NN``: the strict nbval comparison of chapter NN (every stored output, as pytest.ini configures
  nbval), with one XLA thread and one BLAS thread, on a 1-device runtime (see :func:`pinned_nbval_command`). This is
  the only place `make test` compares a chapter's outputs, and it compares them on the smallest machine the book
  supports, so no committed output may depend on the thread count, the core or the device count (the setup cell's
  device count aside).
- ``<scenario>:NN``: chapter NN executed (not compared) after a scenario's preamble cell, in the chapter's own
  kernel. A chapter passes when every cell runs without an error; the executed copy is thrown away.

The scenarios (a preamble cell run before the chapter's first cell):

- ``cpu<k>``: JAX starts with ``k`` simulated CPU devices before the setup cell can ask for 8 (a kernel where
  something used JAX first, or a machine set up with ``JAX_NUM_CPU_DEVICES=k``). The demos must shrink to ``k``.
- ``accel1``: the default backend pretends to have one device (``jax.devices()`` and friends are trimmed to one)
  while the CPU backend keeps 8: a 1-chip Colab TPU or a 1-GPU box. Every mesh must come from the setup cell's
  devices (the CPU fallback); a hidden ``jax.devices()`` fails here.

Which runs where: a chapter that builds no mesh runs its pinned comparison on ``cpu1`` (JAX started on one CPU
device), so it needs nothing else. A chapter that builds meshes (``MESH_CHAPTERS``) runs its pinned comparison
under ``accel1`` (its meshes come from the 8 CPU devices behind a 1-device default backend) and is also executed on
``cpu1``, where every mesh must shrink to one device. ``--full`` adds ``cpu2`` and ``cpu4`` executions of the mesh
chapters (about five more minutes on 2 cores): run it after changing a mesh chapter or ``tpu_notes.devices``.
Jobs start longest first (seconds from book/status.json), each lane taking the next when it is free.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

#: Chapters that build meshes: compared under accel1 and executed on cpu1 (and cpu2 and cpu4 with ``--full``).
MESH_CHAPTERS = ("03", "05", "09", "10", "11")

_CPU_PREAMBLE = """\
import jax
jax.config.update("jax_num_cpu_devices", {k})
assert len(jax.devices()) == {k}  # JAX has started: tpu_notes.devices.setup(8) can no longer add devices
"""

_ACCEL_PREAMBLE = """\
import jax
from jax._src import xla_bridge
_all_devices, _all_local = xla_bridge.devices, xla_bridge.local_devices
def _trimmed(backend=None):  # the default backend pretends to have one device; jax.devices("cpu") keeps 8
    return _all_devices(backend) if backend is not None else _all_devices()[:1]
def _trimmed_local(process_index=None, backend=None, host_id=None):
    found = _all_local(process_index, backend, host_id)
    return found if backend is not None else found[:1]
def _count(backend=None):
    return len(_trimmed(backend))
def _local_count(backend=None):
    return len(_trimmed_local(backend=backend))
for _where in (jax, xla_bridge):  # the public names and the ones jax.make_mesh and friends call inside JAX
    _where.devices, _where.local_devices = _trimmed, _trimmed_local
    _where.device_count, _where.local_device_count = _count, _local_count
"""


@dataclass(frozen=True)
class Scenario:
    name: str  # "cpu1", "cpu2", "cpu4", "accel1"
    preamble: str  # the cell run before the chapter
    chapters: tuple  # chapter numbers ("01", ...) it applies to


def scenarios() -> list[Scenario]:
    every = tuple(p.name[:2] for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
    return [
        Scenario("cpu1", _CPU_PREAMBLE.format(k=1), every),
        Scenario("cpu2", _CPU_PREAMBLE.format(k=2), MESH_CHAPTERS),
        Scenario("cpu4", _CPU_PREAMBLE.format(k=4), MESH_CHAPTERS),
        Scenario("accel1", _ACCEL_PREAMBLE, MESH_CHAPTERS),
    ]


def runs() -> list[tuple[Scenario, Path]]:
    """Every (scenario, notebook) pair of the matrix."""
    out = []
    for sc in scenarios():
        for ch in sc.chapters:
            (path,) = NOTEBOOKS.glob(f"{ch}_*.ipynb")
            out.append((sc, path))
    return out


def execute(scenario: Scenario, path: Path, timeout: int = 300) -> float:
    """Run ``path`` after ``scenario``'s preamble in a fresh kernel; return the wall time (s). Raises
    ``nbclient.exceptions.CellExecutionError`` naming the cell when one fails."""
    import nbclient
    import nbformat

    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONHASHSEED": "0",
        "JAX_NUM_CPU_DEVICES": "8",
        "TPU_NOTES_DEVICE_MATRIX": scenario.name,
    }
    env.pop("MPLBACKEND", None)
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(scenario.preamble))
    start = time.perf_counter()
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute(env=env)  # jupyter_client starts the kernel with exactly this environment
    return time.perf_counter() - start


# -- the strict nbval pass, on one core with one thread and one device: outputs must not depend on the machine -----

#: Rules the pinned pass adds to tests/nbval_sanitize.cfg: the device count of the setup cell (1 in that pass for the
#: chapters that build no mesh) and the note setup() prints when JAX started with fewer devices.
PINNED_SANITIZE = """
[the setup cell's device count]
regex: on \\d+ simulated CPU devices
replace: on N simulated CPU devices

[the note of a runtime with fewer devices]
regex: Note: JAX started before tpu_notes.devices.setup[^\\n]*\\n
replace: \n"""  # nbval reads "replace: " then the text: here nothing


def pinned_nbval_command(path: Path, work: Path) -> tuple[list[str], dict]:
    """The pytest command (and environment) of the pinned strict nbval pass over ``path``: one thread, and a
    1-device runtime set up by an IPython startup file before the setup cell: for a chapter that builds no mesh,
    JAX started with one CPU device (``cpu1``); for one that does, a default backend of one device beside 8 CPU
    devices (``accel1``, a 1-chip TPU). Either way the chapter's outputs must be those committed."""
    sanitize = work / "nbval_sanitize_pinned.cfg"
    sanitize.write_text((ROOT / "tests" / "nbval_sanitize.cfg").read_text() + PINNED_SANITIZE)
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONHASHSEED": "0",
        "JAX_NUM_CPU_DEVICES": "8",
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    }
    env.pop("MPLBACKEND", None)
    startup = work / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    one_device = _ACCEL_PREAMBLE if path.name[:2] in MESH_CHAPTERS else _CPU_PREAMBLE.format(k=1)
    (startup / "00-one-device.py").write_text(one_device)
    env["IPYTHONDIR"] = str(work / "ipython")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:xdist",
        "-o",
        f"addopts=--nbval --nbval-current-env --nbval-cell-timeout=300 --nbval-sanitize-with {sanitize}",
        str(path),
    ]
    return cmd, env


@dataclass(frozen=True)
class Job:
    name: str  # "nbval-pinned:05" or "cpu2:05"
    cost: float  # a rough cost in seconds, to start the long jobs first


#: Rough seconds per chapter, from book/status.json when it has them.
def _chapter_seconds() -> dict:
    import json

    status = ROOT / "book" / "status.json"
    data = json.loads(status.read_text()) if status.exists() else {}
    return {k[:2]: v.get("seconds", 20.0) for k, v in data.items()}


#: Scenarios executed only with ``--full`` (not in `make test`).
FULL_ONLY = ("cpu2", "cpu4")


def jobs(full: bool = False) -> list[Job]:
    """The jobs to run, longest first: every chapter's pinned comparison, the mesh chapters on ``cpu1``, and with
    ``full`` their ``cpu2`` and ``cpu4`` runs too."""
    secs = _chapter_seconds()
    out = [
        Job(f"nbval-pinned:{p.name[:2]}", secs.get(p.name[:2], 20.0))
        for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    ]
    # the pinned pass already runs the chapters without meshes on one device, and those with meshes under accel1
    out += [
        Job(f"{sc.name}:{p.name[:2]}", secs.get(p.name[:2], 20.0))
        for sc, p in runs()
        if sc.name != "accel1"
        and not (sc.name == "cpu1" and p.name[:2] not in MESH_CHAPTERS)
        and (full or sc.name not in FULL_ONLY)
    ]
    return sorted(out, key=lambda j: -j.cost)


def _run_job(name: str) -> int:
    """Run one job in this process (a lane's child, already pinned to its core)."""
    what, ch = name.split(":")
    (path,) = NOTEBOOKS.glob(f"{ch}_*.ipynb")
    if what == "nbval-pinned":
        import subprocess
        import tempfile

        with tempfile.TemporaryDirectory(prefix="nbval-pinned-") as work:
            cmd, env = pinned_nbval_command(path, Path(work))
            done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
            if done.returncode:
                print(done.stdout[-4000:], done.stderr[-2000:])
            return done.returncode
    (sc,) = [s for s in scenarios() if s.name == what]
    try:
        execute(sc, path)
        return 0
    except Exception as err:  # noqa: BLE001 - printed for the lane to report
        print(re.sub(r"\x1b\[[0-9;]*m", "", str(err))[-1500:])
        return 1


def run_lanes(todo: list[Job], lanes: int, lead=None, lead_cores: int = 1, out=None) -> int:
    """Run ``todo`` on ``lanes`` lanes, each a thread that pins its jobs to one core (``taskset``) when the machine
    has enough; longest jobs first, each lane taking the next when it is free. ``lead``, when given, is called first
    by lane 0 with a ``taskset`` prefix for ``lead_cores`` cores that no other lane uses (``[]`` when unpinned):
    `make test` runs pytest there, and lane 0 joins the queue, on the first of those cores, when it returns. Prints
    a line per job to ``out`` (default stdout). Returns the number of jobs failed."""
    import queue
    import shutil
    import subprocess
    import threading

    out = out if out is not None else sys.stdout
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    extra = lead_cores - 1 if lead is not None else 0  # the lead's cores beyond lane 0's own
    pin = shutil.which("taskset") is not None and len(cores) >= lanes + extra
    pending: queue.Queue[Job] = queue.Queue()
    for j in todo:
        pending.put(j)
    failed, lock = [], threading.Lock()

    def core_of(k: int) -> int:
        return cores[k + extra if k else 0]

    def lane(k: int):
        prefix = ["taskset", "-c", str(core_of(k))] if pin else []
        if lead is not None and k == 0:
            lead(["taskset", "-c", ",".join(map(str, cores[:lead_cores]))] if pin else [])
        while True:
            try:
                job = pending.get_nowait()
            except queue.Empty:
                return
            cmd = [*prefix, sys.executable, str(Path(__file__).resolve()), "--job", job.name]
            t0 = time.perf_counter()
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            with lock:
                ok = done.returncode == 0
                core = f"core {core_of(k)}" if pin else "unpinned"
                print(
                    f"{'ok  ' if ok else 'FAIL'}  {job.name:18s} {time.perf_counter() - t0:6.1f} s  ({core})",
                    file=out,
                    flush=True,
                )
                if not ok:
                    failed.append(job.name)
                    print(done.stdout[-3000:], done.stderr[-1000:], file=out, flush=True)

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(lanes)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return len(failed)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="jobs to run, e.g. cpu1:05 or nbval-pinned:10 (default: all)")
    parser.add_argument("--lanes", type=int, default=2, help="jobs at once, each pinned to its own core (default 2)")
    parser.add_argument("--full", action="store_true", help="also run the mesh chapters on 2 and 4 devices")
    parser.add_argument("--list", action="store_true", help="print the jobs and exit")
    parser.add_argument("--job", help=argparse.SUPPRESS)  # one job, in this process (what a lane runs)
    args = parser.parse_args(argv)
    if args.job:
        return _run_job(args.job)
    if args.lanes < 1:
        parser.error(f"--lanes must be at least 1; got {args.lanes}")
    todo = jobs(full=args.full or bool(args.only))
    if args.only:
        known = {j.name for j in todo}
        bad = [o for o in args.only if o not in known]
        if bad:
            parser.error(f"unknown job(s) {bad}; allowed: {sorted(known)}")
        todo = [j for j in todo if j.name in args.only]
    if args.list:
        for j in todo:
            print(j.name)
        return 0
    start = time.perf_counter()
    failed = run_lanes(todo, args.lanes)
    print(f"{len(todo) - failed} of {len(todo)} jobs passed in {time.perf_counter() - start:.0f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
