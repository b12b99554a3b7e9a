"""Execute chapters on runtimes with fewer devices than the book's 8: the device-count matrix of `make test`.

    python tools/device_matrix.py                      # every scenario of every chapter, in parallel
    python tools/device_matrix.py --jobs 1 cpu1:05     # one scenario of Chapter 5
    python tools/device_matrix.py --list

A scenario is a preamble cell run before the chapter's first cell, in the chapter's own kernel:

- ``cpu<k>``: JAX starts with ``k`` simulated CPU devices before the setup cell can ask for 8 (a kernel where
  something used JAX first, or a machine set up with ``JAX_NUM_CPU_DEVICES=k``). The demos must shrink to ``k``.
- ``accel1``: the default backend pretends to have one device (``jax.devices()`` and friends are trimmed to one)
  while the CPU backend keeps 8: a 1-chip Colab TPU or a 1-GPU box. Every mesh must come from the setup cell's
  devices (the CPU fallback); a hidden ``jax.devices()`` fails here.

Outputs are not compared (they legitimately differ); a chapter passes when every cell runs without an error.
The executed copies are thrown away; the committed notebooks are never written.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"

#: Chapters that build meshes: they also run with 2 and 4 devices and with a one-device default backend.
MESH_CHAPTERS = ("03", "05", "09", "10", "11")

_CPU_PREAMBLE = """\
import jax
jax.config.update("jax_num_cpu_devices", {k})
assert len(jax.devices()) == {k}  # JAX has started: tpu_notes.devices.setup(8) can no longer add devices
"""

_ACCEL_PREAMBLE = """\
import jax
_all_devices, _all_local = jax.devices, jax.local_devices
def _trimmed(backend=None):  # the default backend pretends to have one device; jax.devices("cpu") keeps 8
    return _all_devices(backend) if backend is not None else _all_devices()[:1]
def _trimmed_local(process_index=None, backend=None, host_id=None):
    found = _all_local(process_index, backend, host_id)
    return found if backend is not None else found[:1]
jax.devices, jax.local_devices = _trimmed, _trimmed_local
jax.device_count = lambda backend=None: len(_trimmed(backend))
jax.local_device_count = lambda backend=None: len(_trimmed_local(backend=backend))
"""


@dataclass(frozen=True)
class Scenario:
    name: str          # "cpu1", "cpu2", "cpu4", "accel1"
    preamble: str      # the cell run before the chapter
    chapters: tuple    # chapter numbers ("01", ...) it applies to


def scenarios() -> list[Scenario]:
    every = tuple(p.name[:2] for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")))
    return [Scenario("cpu1", _CPU_PREAMBLE.format(k=1), every),
            Scenario("cpu2", _CPU_PREAMBLE.format(k=2), MESH_CHAPTERS),
            Scenario("cpu4", _CPU_PREAMBLE.format(k=4), MESH_CHAPTERS),
            Scenario("accel1", _ACCEL_PREAMBLE, MESH_CHAPTERS)]


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

    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONHASHSEED": "0",
           "JAX_NUM_CPU_DEVICES": "8", "TPU_NOTES_DEVICE_MATRIX": scenario.name}
    env.pop("MPLBACKEND", None)
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(0, nbformat.v4.new_code_cell(scenario.preamble))
    start = time.perf_counter()
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                                     store_widget_state=False,
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute(env=env)  # jupyter_client starts the kernel with exactly this environment
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("only", nargs="*", help="scenario:chapter pairs to run, e.g. cpu1:05 (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="kernels at once (default 2)")
    parser.add_argument("--list", action="store_true", help="print the matrix and exit")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    todo = runs()
    if args.only:
        known = {f"{sc.name}:{p.name[:2]}" for sc, p in todo}
        bad = [o for o in args.only if o not in known]
        if bad:
            parser.error(f"unknown run(s) {bad}; allowed: {sorted(known)}")
        todo = [(sc, p) for sc, p in todo if f"{sc.name}:{p.name[:2]}" in args.only]
    if args.list:
        for sc, p in todo:
            print(f"{sc.name}:{p.name[:2]}  {p.name}")
        return 0

    def one(item):
        sc, p = item
        try:
            return sc, p, execute(sc, p), None
        except Exception as err:  # noqa: BLE001 - report every failure, then fail
            return sc, p, None, err

    failed = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for sc, p, seconds, err in pool.map(one, todo):
            if err is None:
                print(f"ok    {sc.name:7} {p.name:32} {seconds:6.1f} s", flush=True)
            else:
                failed += 1
                text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))   # the traceback without terminal colours
                print(f"FAIL  {sc.name:7} {p.name:32}\n{text[-1500:]}", flush=True)
    print(f"{len(todo) - failed} of {len(todo)} runs passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
