"""Several JAX processes, one mesh: multi-controller JAX on one machine (Chapters 5 and 10).

A TPU pod slice is many hosts, each running the same program on its own chips; ``jax.distributed.initialize``
joins them, and ``jax.devices()`` then lists every process's devices, so one mesh spans them all. This module
starts that on one machine: ``n_processes`` Python processes of ``devices_per_process`` simulated CPU devices
each, joined over 127.0.0.1, their CPU collectives carried by gloo. Each runs one *task* and reports a JSON
result, which :func:`launch` returns.

    from tpu_notes import multihost
    results = multihost.launch("train", n_processes=2, devices_per_process=4)
    results[0]["losses"]          # the losses of data=2 x fsdp=4 over both processes

Tasks:

- ``"train"``: :func:`tpu_notes.parallel.train` of :data:`~tpu_notes.parallel.ORACLE_CONFIG` with a layout over
  all the processes' devices (``data=2 x fsdp=4`` on 2 x 4); reports the loss curve.
- ``"collective_matmul"``: :func:`tpu_notes.jaxprog.collective_matmul` on a ring of every device (8 on 2 x 4),
  against the product in float64; reports the largest relative error and the collective-permutes XLA compiled.

Each process's devices are its own; collectives between processes go through gloo over loopback TCP, so this
proves the programs are correct across processes (what a pod slice needs), not how fast a real interconnect is.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Annotated

from .units import OneOf, Positive, capped, checked

TASKS = ("train", "collective_matmul")
#: Most processes (and devices per process) :func:`launch` starts: each is a Python process with JAX loaded.
MAX_PROCESSES = 8
MAX_DEVICES_PER_PROCESS = 16
#: The layout "train" uses, by total device count: data across the processes' groups, FSDP inside.
TRAIN_STEPS, TRAIN_BATCH, TRAIN_SEQ = 6, 16, 16


class GlooUnavailable(RuntimeError):
    """This JAX cannot run CPU collectives across processes (no gloo): the caller skips, saying so."""


@dataclass(frozen=True)
class ProcessResult:
    """What one process of :func:`launch` reported."""

    process_id: int  # 0 .. n_processes - 1
    result: dict  # the task's JSON result (the same keys in every process)
    seconds: float  # wall time of the process, start to exit


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@checked
def train_layout(n_devices: capped(MAX_PROCESSES * MAX_DEVICES_PER_PROCESS), n_processes: capped(MAX_PROCESSES)):
    """The layout the "train" task uses on ``n_devices`` devices in ``n_processes`` processes: data parallelism
    across the processes, FSDP over each process's devices (``data=2 x fsdp=4`` on 2 x 4)."""
    from .training import Parallelism

    if n_devices % n_processes:
        raise ValueError(f"n_devices ({n_devices}) must be a multiple of n_processes ({n_processes})")
    return Parallelism(data=n_processes, fsdp=n_devices // n_processes)


@checked
def launch(
    task: Annotated[str, OneOf(TASKS)],
    n_processes: capped(MAX_PROCESSES) = 2,
    devices_per_process: capped(MAX_DEVICES_PER_PROCESS) = 4,
    timeout_s: Annotated[float, Positive(maximum=3600)] = 240.0,
) -> list:
    """Start ``n_processes`` JAX processes joined by ``jax.distributed.initialize``, run ``task`` in each, and
    return their :class:`ProcessResult` in process order.

    Every process is killed if the whole run outlives ``timeout_s`` seconds (``TimeoutError``); a process that
    fails raises ``RuntimeError`` with the end of its output; a JAX without gloo raises :class:`GlooUnavailable`.
    """
    port = _free_port()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_NUM_CPU_DEVICES": str(devices_per_process), "PYTHONHASHSEED": "0"}
    procs = []
    start = time.perf_counter()
    for i in range(n_processes):
        cmd = [sys.executable, "-m", "tpu_notes.multihost", task, str(i), str(n_processes), str(port)]
        procs.append(
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
            )
        )
    outputs, ended = [None] * n_processes, [None] * n_processes
    try:
        for i, p in enumerate(procs):
            left = max(1.0, timeout_s - (time.perf_counter() - start))
            outputs[i], _ = p.communicate(timeout=left)
            ended[i] = time.perf_counter() - start
    except subprocess.TimeoutExpired:
        raise TimeoutError(
            f"multihost.launch({task!r}) ran past timeout_s={timeout_s:g} s; all {n_processes} processes were killed"
        ) from None
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    results = []
    for i, (p, out) in enumerate(zip(procs, outputs)):
        if "GLOO_UNAVAILABLE" in out:
            raise GlooUnavailable(out.strip().splitlines()[-1])
        if p.returncode != 0:
            raise RuntimeError(f"process {i} of {n_processes} ({task}) exited with {p.returncode}:\n{out[-3000:]}")
        line = next(ln for ln in reversed(out.splitlines()) if ln.startswith("RESULT "))
        results.append(ProcessResult(i, json.loads(line[len("RESULT ") :]), ended[i]))
    return results


# ------------------------------------------------------------------------------------------------------------
# What each process runs
# ------------------------------------------------------------------------------------------------------------


def _join(process_id: int, n_processes: int, port: int):
    import jax

    try:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    except (AttributeError, ValueError, KeyError) as err:  # pragma: no cover - a JAX without gloo
        print(f"GLOO_UNAVAILABLE: this JAX has no gloo CPU collectives ({err})", flush=True)
        sys.exit(3)
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=n_processes,
        process_id=process_id,
        initialization_timeout=120,
    )
    return jax


def _task_train(jax, n_processes: int) -> dict:
    from . import devices, parallel

    devs = devices.default_devices()  # every process's devices: the global mesh
    layout = train_layout(len(devs), n_processes)
    losses = parallel.train(
        parallel.ORACLE_CONFIG, layout, steps=TRAIN_STEPS, batch=TRAIN_BATCH, seq_len=TRAIN_SEQ, seed=0, devices=devs
    )
    return {
        "layout": layout.label(),
        "devices": len(devs),
        "local_devices": jax.local_device_count(),
        "losses": [float(v) for v in losses],
    }


def _task_collective_matmul(jax, n_processes: int) -> dict:
    import numpy as np
    from jax.experimental import multihost_utils

    from . import devices, jaxprog

    devs = devices.default_devices()
    ring = jaxprog.ring_mesh(devices=devs)
    rng = np.random.default_rng(1)  # the same inputs in every process
    n = ring.size
    x = rng.standard_normal((32, 16 * n)).astype(np.float32)
    w = rng.standard_normal((16 * n, 8 * n)).astype(np.float32)
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    xs = jax.device_put(x, NamedSharding(ring, P(None, "x")))
    ws = jax.device_put(w, NamedSharding(ring, P(None, "x")))
    out = jaxprog.collective_matmul(xs, ws, ring)
    full = np.asarray(multihost_utils.process_allgather(out, tiled=True))
    ref = x.astype(np.float64) @ w.astype(np.float64)
    kinds = jaxprog.matmul_hlo_collectives("collective", ring)  # XLA's compiled ops, by kind
    return {
        "devices": n,
        "local_devices": jax.local_device_count(),
        "shape": list(full.shape),
        "max_rel_error": float(np.max(np.abs(full - ref)) / np.max(np.abs(ref))),
        "collective_permutes": kinds.get("collective-permute", 0),
        "all_gathers": kinds.get("all-gather", 0),
    }


def _main(argv: list[str]) -> int:
    task, process_id, n_processes, port = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    jax = _join(process_id, n_processes, port)
    result = {"train": _task_train, "collective_matmul": _task_collective_matmul}[task](jax, n_processes)
    print("RESULT " + json.dumps(result), flush=True)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
