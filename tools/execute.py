"""Re-execute chapter notebooks in place, deterministically, on 8 simulated CPU devices (``make execute``).

    python tools/execute.py                      # every notebook in notebooks/
    python tools/execute.py notebooks/01_rooflines.ipynb

Generated cells are refreshed first (tools/nbcells.py). Execution metadata (timestamps) is not recorded, so a
re-run changes a notebook only where its outputs change. Each chapter's wall time, the JAX version and the device
kind are written to book/status.json, from which the status page is made.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import nbcells  # noqa: E402

STATUS = ROOT / "book" / "status.json"
# Before anything imports JAX (device_summary() does, in this process): the devices the kernels get too.
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")


def execute(path: Path, timeout: int = 300) -> float:
    """Execute one notebook in place; return its wall time in seconds."""
    import nbclient
    import nbformat

    os.environ.setdefault("JAX_NUM_CPU_DEVICES", "8")
    # The kernel inherits this environment. MPLBACKEND=Agg there silently drops every figure (plt.show() draws
    # nothing and no image is stored), so the kernel must keep its default inline backend.
    os.environ.pop("MPLBACKEND", None)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # store_widget_state=False: no ipywidgets state in the notebook metadata (it bloats the file; chapters show a
    # static figure beside each explorer for readers without a kernel).
    client = nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,
        store_widget_state=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()
    elapsed = time.perf_counter() - start
    for cell in nb.cells:  # nothing machine-specific in metadata
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
    nb.metadata.pop("widgets", None)  # widget state left by an earlier execution
    nbformat.write(nb, path)
    return elapsed


def coalesce_streams(outputs: list) -> list:
    """Merge consecutive stdout (or stderr) chunks into one output.

    How a kernel splits a cell's printed text into chunks depends on timing; merging them keeps a re-executed
    notebook's diff down to the outputs that really changed.
    """
    merged = []
    for out in outputs:
        if (
            merged
            and out.get("output_type") == "stream"
            and merged[-1].get("output_type") == "stream"
            and merged[-1].get("name") == out.get("name")
        ):
            merged[-1]["text"] = "".join(merged[-1]["text"]) + "".join(out["text"])
        else:
            merged.append(out)
    return merged


def device_summary() -> dict:
    import jax

    devs = jax.devices()
    return {"jax": jax.__version__, "device": f"{len(devs)} x {devs[0].device_kind} ({jax.default_backend()})"}


def main(argv: list[str]) -> int:
    nbcells.main([])
    paths = [Path(p).resolve() for p in argv] or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    status = json.loads(STATUS.read_text()) if STATUS.exists() else {}
    info = device_summary()
    for path in paths:
        seconds = execute(path)
        print(f"{path.relative_to(ROOT)}: executed in {seconds:.1f} s")
        status[path.stem] = {"seconds": round(seconds, 1), **info}
    STATUS.write_text(json.dumps(dict(sorted(status.items())), indent=1) + "\n")
    import status as status_page  # tools/status.py: book/status.md follows book/status.json

    status_page.write()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
