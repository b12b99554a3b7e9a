"""The hostile and impossible inputs named in issue 21, tried again: each line says what it gives now
(JAX is imported after the analysis probes, on purpose).

JAX_NUM_CPU_DEVICES=8 JAX_PLATFORMS=cpu .venv/bin/python benchmarks/hostile_examples.py
"""

import dataclasses
import subprocess
import sys
import time

from tpu_notes import gpu, transformer
from tpu_notes import inference as I
from tpu_notes import training as T
from tpu_notes.inference.engine import deploy
from tpu_notes.inference.simulator import simulate as serve_sim
from tpu_notes.inference.workload import Workload
from tpu_notes.topology import Slice
from tpu_notes.training import Parallelism, pipeline
from tpu_notes.training import published as TP
from tpu_notes.units import check_positive


def probe(label, fn):
    t = time.perf_counter()
    try:
        out = fn()
        print(f"ACCEPTED  {label}: {str(out)[:80]}")
    except (ValueError, TypeError) as e:
        print(f"refused   {label} ({time.perf_counter() - t:.2f} s): {type(e).__name__}: {str(e)[:150]}")
    except Exception as e:
        print(f"PYTHON    {label}: {type(e).__name__}: {str(e)[:150]}")


v5p = Slice("v5p", (4, 4, 4))
probe("pipeline.simulate(50000, 1)", lambda: pipeline.simulate(50000, 1))
probe("gpu.link_loads at 4096 GPUs", lambda: gpu.link_loads(gpu.dgx_superpod("h100", 4096), "all_gather", 1e9, 4096))
probe(
    "step_time tensor=64 on llama3-8b (8 KV heads)",
    lambda: T.step_time("llama3-8b", Parallelism(fsdp=1, tensor=64), Slice("v5p", (4, 4, 4)), 2**20, 4096),
)
probe(
    "step_time 64 stages on 32 layers",
    lambda: T.step_time("llama3-8b", Parallelism(pipeline=64, microbatches=64), v5p, 2**20, 4096),
)
probe(
    "step_time expert=4 on a dense model",
    lambda: T.step_time("llama3-8b", Parallelism(fsdp=16, expert=4), v5p, 2**20, 4096),
)
probe(
    "step_time circular_repeats=10**9",
    lambda: T.step_time(
        "llama3-8b", Parallelism(fsdp=16, pipeline=4, microbatches=8), v5p, 2**20, 4096, circular_repeats=10**9
    ),
)
probe(
    "step_time batch_tokens=1000 seq_len=4096", lambda: T.step_time("llama3-8b", Parallelism(fsdp=64), v5p, 1000, 4096)
)
probe(
    "serving simulator: 405B on one v5e",
    lambda: serve_sim(deploy("llama3-405b", "v5e", 1), Workload.poisson(1.0)),
)
probe(
    "published run at 10^5 x its figure",
    lambda: dataclasses.replace(
        TP.RUNS[0], **{TP.RUNS[0].measured_field: getattr(TP.RUNS[0], TP.RUNS[0].measured_field) * 1e5}
    ),
)
probe(
    "duplicate fat-tree level names",
    lambda: gpu.GpuCluster("h100", 512, levels=(gpu.FatTreeLevel("leaf", 32), gpu.FatTreeLevel("leaf", 2))),
)
probe("check_positive(10**400)", lambda: check_positive("n_chips", 10**400))
probe("get_model('llama2-70b')", lambda: transformer.get_model("llama2-70b").n_layers)
probe(
    "best_deployment with 10^6 batches",
    lambda: I.best_deployment("llama3-8b", "v5e", 2048, 0.05, batches=tuple(range(1, 10**6))),
)
import jax
import jax.numpy as jnp

from tpu_notes import generate
from tpu_notes import model as M

cfg = transformer.get_model("tiny-gqa")
probe("generate.init_cache(..., 2**20, 2**16)", lambda: generate.init_cache(cfg, 2**20, 2**16))
params = M.init_params(cfg, jax.random.PRNGKey(0))
probe("generate with token ids >= vocab", lambda: generate.generate(params, jnp.full((1, 4), cfg.vocab + 5), cfg, 2))
one = dataclasses.replace(cfg, n_layers=1)
probe(
    "1-layer cache with 2-layer params",
    lambda: generate.decode_step(params, generate.init_cache(one, 1, 8), jnp.zeros((1,), jnp.int32), 0, cfg),
)
from tpu_notes import parallel

probe("parallel.train('llama3-8b', ...)", lambda: parallel.train("llama3-8b", Parallelism(), 1, 1, 16))
for args in (
    ["bench", "--repeats", "0"],
    ["bench", "--chip", "nosuch"],
    [
        "plan",
        "--model",
        "llama3-8b",
        "--slice",
        "v5p:4x4x4",
        "--batch-tokens",
        "4Mi",
        "--seq-len",
        "4096",
        "--top",
        "0",
    ],
):
    r = subprocess.run([sys.executable, "-m", "tpu_notes", *args], capture_output=True, text=True, timeout=120)
    print(
        f"CLI {' '.join(args)}: exit {r.returncode}, stderr lines {len(r.stderr.strip().splitlines())}: {r.stderr.strip().splitlines()[-1][:120] if r.stderr.strip() else ''}"
    )
