"""The book's chapters, in order, and which of them the table of contents lists.

The one place both ``tools/nbcells.py`` (generated cells) and ``tools/status.py`` (the status page) read the list
of chapters from, so neither imports the other's internals (``nbcells`` uses ``status``; ``status`` uses only
this module).
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The whole book, in order: (file stem, chapter title). A stem whose notebook does not exist yet is "coming".
CHAPTERS = [
    ("01_rooflines", "Rooflines"),
    ("02_tpus", "How TPUs compute and talk"),
    ("03_sharded_matmuls", "Sharded matmuls and collectives"),
    ("04_transformer_math", "Transformer math"),
    ("05_training_parallelism", "Training parallelism"),
    ("06_training_llama3", "Training Llama 3"),
    ("07_inference", "Inference"),
    ("08_serving_llama3", "Serving Llama 3"),
    ("09_profiling", "Profiling"),
    ("10_jax_programming", "Programming TPUs in JAX"),
    ("11_gpus", "GPUs"),
    ("12_conclusion", "Conclusion"),
]


#: What each chapter's analysis is checked against that nobody here wrote (the book's "oracles"), with the test file
#: that holds the check. The status page counts and lists them; a test checks every test file exists.
ORACLES = {
    "01_rooflines": [("measured matmul FLOP/s and memory bandwidth of the machine running the chapter, beside the "
                      "roofline's prediction", "tests/test_bench.py")],
    "02_tpus": [("hop counts against a breadth-first search over an explicit torus graph", "tests/test_topology.py"),
                ("the systolic-array simulator against numpy's matmul", "tests/test_systolic.py")],
    "03_sharded_matmuls": [("the collectives XLA inserts for 25 sharded matmuls (kind, mesh axes, bytes)",
                            "tests/test_hlo_oracle.py"),
                           ("collectives run on 8 devices against numpy", "tests/test_collectives.py")],
    "04_transformer_math": [("XLA's cost_analysis() FLOPs of the JAX model, forward and backward",
                             "tests/test_model_oracle.py"),
                            ("published parameter counts of Llama 3 8B/70B/405B, Llama 2 13B and DeepSeek-V3",
                             "tests/test_transformer.py")],
    "05_training_parallelism": [("the collectives XLA inserts into compiled training steps, 11 layouts",
                                 "tests/test_training_oracle.py"),
                                ("sharded training equal to single-device training, loss by loss",
                                 "tests/test_parallel.py"),
                                ("the scaling book's worked training numbers", "tests/test_training.py")],
    "06_training_llama3": [("12 published, measured training runs (Llama 3 on H100, MaxText on TPU): MFU from our "
                            "FLOP count, step-time model as an upper bound", "tests/test_published.py")],
    "07_inference": [("XLA's cost_analysis() bytes of a decode step against weights + KV cache",
                      "tests/test_generate.py"),
                     ("the cached decoder against the uncached forward pass, token by token", "tests/test_generate.py"),
                     ("speculative sampling's output distribution against the target's, exactly",
                      "tests/test_generate.py")],
}


def toc_stems(root: Path = ROOT) -> set[str]:
    """Stems of the chapter notebooks listed in ``root``'s _toc.yml (only those become pages of the book)."""
    toc = root / "_toc.yml"
    text = toc.read_text() if toc.exists() else ""
    return set(re.findall(r"^\s*-\s*file:\s*notebooks/(\w+)\s*$", text, re.M))
