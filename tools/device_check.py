"""The one prepared script for a machine with an accelerator (``make device-check``): measure it, once, in ≤ 10 min.

    python tools/device_check.py              # on a TPU or GPU machine: writes book/measured/<device>/
    python tools/device_check.py --dry-run    # anywhere (make test runs it): the same steps, small, into a temp dir

What it runs, in order, each step bounded and its failure recorded rather than fatal:

1. ``python -m tpu_notes bench --json``: the roofline of the device (matmul peak, memory bandwidth) against the
   datasheet (Chapter 1).
2. The multi-device checks on the default backend's devices: an AllGather and an AllReduce over all of them timed
   against the ring model (Chapters 3 and 11), the Pallas matmul compiled (not interpreted) and timed against
   ``jnp.dot`` (Chapter 10), and one of Chapter 5's layouts trained over all devices against one device.
3. The measured cells of Chapters 1, 3, 9, 10 and 11 (those tagged ``nbval-ignore-output``): each chapter is
   executed on a copy and those cells' outputs are kept.

Everything lands in ``<out>/<platform>-<device kind>/``: ``results.json`` (the device, the command, the commit, each
step's result or error) and ``cells.md`` (the measured cells' outputs, by chapter), which ``tools/status.py`` lists on
the book's "Measured on real hardware" page. The dry run does steps 1 and 2 with small sizes on the CPU, lists the
cells of step 3 without executing them, and writes to a temporary directory unless ``--out`` is given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEASURED_CHAPTERS = ("01", "03", "09", "10", "11")
BUDGET_S = 540  # the whole run, leaving a minute of a 10-minute device slot for start-up


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


def step_bench(dry: bool, timeout: float) -> dict:
    cmd = [sys.executable, "-m", "tpu_notes", "bench", "--json"] + (["--repeats", "1"] if dry else [])
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[1:])} exited {done.returncode}: {done.stderr[-1500:]}")
    return {"command": "python " + " ".join(cmd[1:]), "result": json.loads(done.stdout)}


def step_multi_device(dry: bool) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from tpu_notes import bench, collectives, devices, hardware, kernels, parallel
    from tpu_notes.training import Parallelism

    info = devices.describe()
    devs = devices.default_devices() if not dry else devices.demo_devices(8)
    n = len(devs)
    out = {"devices": n, "platform": info.platform, "device_kind": info.device_kind}
    chip = hardware.get_chip(info.chip) if info.chip else None
    nbytes = 2**20 if dry else 2**28
    coll = []
    if n >= 2:
        for kind in ("all-gather", "all-reduce"):
            m = bench.measure_collective(
                kind, nbytes, n_devices=n, dtype="fp32" if dry else "bf16", repeats=2 if dry else 5
            )
            row = {"kind": kind, "nbytes": m.nbytes, "measured_s": m.seconds}
            if chip is not None and chip.ici_bw_bidi:
                row["model_s"] = collectives.collective_time(kind, m.nbytes, n, chip.ici_bw_bidi).total
            coll.append(row)
    out["collectives"] = coll
    size = 256 if dry else 2048
    x = jnp.ones((size, size), jnp.float32 if dry else jnp.bfloat16)
    if info.platform in ("cpu", "tpu"):  # the TPU kernel, interpreted on a CPU
        kernel = jax.jit(lambda a, b: kernels.matmul(a, b, bm=128, bn=128, bk=128))
    else:  # the Mosaic GPU kernel, bf16 in (its default blocks fit an H100's shared memory)
        call = jax.jit(kernels.matmul_call(size, size, size, platform="cuda"))
        kernel = lambda a, b: call(a.astype(jnp.bfloat16), b.astype(jnp.bfloat16))  # noqa: E731
    t_kernel = bench.time_fn(kernel, x, x, repeats=2 if dry else 5)
    t_dot = bench.time_fn(jax.jit(jnp.dot), x, x, repeats=2 if dry else 5)
    same = bool(np.allclose(np.asarray(kernel(x, x), np.float32), np.asarray(jnp.dot(x, x), np.float32), rtol=2e-2))
    out["pallas"] = {
        "shape": [size, size, size],
        "interpreted": info.platform == "cpu",
        "kernel_s": t_kernel.median_s,
        "jnp_dot_s": t_dot.median_s,
        "equal": same,
    }
    if n >= 2:
        layout = Parallelism(data=n)
        kw = dict(steps=3, batch=max(16, n), seq_len=16, seed=0)
        losses = parallel.train(parallel.ORACLE_CONFIG, layout, devices=devs, **kw)
        one = parallel.train(parallel.ORACLE_CONFIG, Parallelism(), devices=devs[:1], **kw)
        out["train"] = {
            "layout": layout.label(),
            "losses": [float(v) for v in losses],
            "equal_to_one_device": bool(np.allclose(losses, one, rtol=1e-3, atol=1e-3)),
        }
    return out


def measured_cells(chapter: str) -> tuple[Path, list[int]]:
    """The notebook of ``chapter`` and the indices of its measured cells (tagged nbval-ignore-output)."""
    import nbformat

    (path,) = (ROOT / "notebooks").glob(f"{chapter}_*.ipynb")
    nb = nbformat.read(path, as_version=4)
    return path, [
        i
        for i, c in enumerate(nb.cells)
        if c.cell_type == "code" and "nbval-ignore-output" in c.metadata.get("tags", [])
    ]


def step_cells(dry: bool, deadline: float) -> dict:
    import nbclient
    import nbformat

    found = {}
    for ch in MEASURED_CHAPTERS:
        path, cells = measured_cells(ch)
        entry = {"notebook": path.name, "cells": cells}
        if not dry:
            left = deadline - time.perf_counter()
            if left < 30:
                entry["error"] = "skipped: the run's time budget was spent"
                found[ch] = entry
                continue
            nb = nbformat.read(path, as_version=4)
            client = nbclient.NotebookClient(
                nb,
                timeout=int(min(300, left)),
                kernel_name="python3",
                allow_errors=True,
                resources={"metadata": {"path": str(path.parent)}},
            )
            try:
                client.execute()
            except Exception as err:  # noqa: BLE001 - a timed-out chapter is recorded, the run goes on
                entry["error"] = f"{type(err).__name__}: {str(err)[-500:]}"
            entry["outputs"] = {
                i: "".join(
                    o.get("text", "") for o in nb.cells[i].get("outputs", []) if o.get("output_type") == "stream"
                )
                for i in cells
            }
        found[ch] = entry
    return found


def run(dry: bool, out_root: Path) -> Path:
    start = time.perf_counter()
    deadline = start + (60 if dry else BUDGET_S)
    from tpu_notes import devices

    devices.setup(8)
    info = devices.describe()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    results = {
        "device": str(info),
        "platform": info.platform,
        "device_kind": info.device_kind,
        "chip": info.chip,
        "jax": info.jax_version,
        "commit": commit or None,
        "dry_run": dry,
        "command": "python tools/device_check.py" + (" --dry-run" if dry else ""),
        "when_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "steps": {},
    }
    steps = [
        ("bench", lambda: step_bench(dry, timeout=max(30.0, deadline - time.perf_counter()))),
        ("multi_device", lambda: step_multi_device(dry)),
        ("cells", lambda: step_cells(dry, deadline)),
    ]
    for name, fn in steps:
        t0 = time.perf_counter()
        try:
            results["steps"][name] = {"ok": True, **fn()} if name != "cells" else {"ok": True, "chapters": fn()}
        except Exception as err:  # noqa: BLE001 - record and go on: one failed step must not lose the others
            results["steps"][name] = {"ok": False, "error": f"{type(err).__name__}: {err}"[-2000:]}
        results["steps"][name]["seconds"] = round(time.perf_counter() - t0, 1)
    results["seconds"] = round(time.perf_counter() - start, 1)
    where = out_root / _slug(f"{info.platform}-{info.device_kind}")
    where.mkdir(parents=True, exist_ok=True)
    (where / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    lines = [f"# {results['device']}", "", f"`{results['command']}` at commit {commit[:12] or '?'}", ""]
    for ch, entry in results["steps"].get("cells", {}).get("chapters", {}).items():
        lines.append(f"## Chapter {ch} ({entry['notebook']})")
        for i, text in entry.get("outputs", {}).items():
            lines += ["", f"Cell {i}:", "", "```", text.rstrip(), "```"]
        if "error" in entry:
            lines += ["", f"Error: {entry['error']}"]
        lines.append("")
    (where / "cells.md").write_text("\n".join(lines))
    return where


BEGIN, END = "<!-- device-check results: begin -->", "<!-- device-check results: end -->"


def write_measured_page(page: Path, measured: Path) -> None:
    """List every ``measured/*/results.json`` on ``page`` (book/measured.md), between the BEGIN and END markers:
    the device, the command, the commit, and each step's outcome, with links to the results and the cells."""
    lines = [BEGIN, ""]
    found = sorted(measured.glob("*/results.json"))
    if not found:
        lines.append("No results yet: the first `make device-check` on an accelerator writes them here.")
    for path in found:
        r = json.loads(path.read_text())
        rel = path.parent.relative_to(page.parent)
        steps = ", ".join(f"{name} {'ok' if s.get('ok') else 'failed'}" for name, s in r.get("steps", {}).items())
        lines += [
            f"- **{r.get('device', path.parent.name)}** ({r.get('when_utc', '?')} UTC, commit "
            f"`{(r.get('commit') or '?')[:12]}`): `{r.get('command', '?')}`; {steps}. "
            f"[results.json]({rel}/results.json), [measured cells]({rel}/cells.md)"
        ]
    lines += ["", END]
    text = page.read_text() if page.exists() else "# Measured on real hardware\n"
    block = "\n".join(lines)
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n## Results of `make device-check`\n\n" + block + "\n"
    page.write_text(text)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="small sizes, CPU, no chapter execution")
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results folder (default: book/measured, or a temporary folder with --dry-run)",
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONHASHSEED", "0")
    out = args.out or (Path(tempfile.mkdtemp(prefix="device-check-")) if args.dry_run else ROOT / "book" / "measured")
    where = run(args.dry_run, out)
    if not args.dry_run and out == ROOT / "book" / "measured":
        write_measured_page(ROOT / "book" / "measured.md", out)
    results = json.loads((where / "results.json").read_text())
    for name, step in results["steps"].items():
        print(
            f"{name:13s} {'ok' if step['ok'] else 'FAILED':7s} {step['seconds']:6.1f} s"
            + ("" if step["ok"] else f"  {step['error'][:200]}")
        )
    print(f"wrote {where} in {results['seconds']:.0f} s")
    return 0 if all(s["ok"] for s in results["steps"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
