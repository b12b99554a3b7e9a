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


def toc_stems(root: Path = ROOT) -> set[str]:
    """Stems of the chapter notebooks listed in ``root``'s _toc.yml (only those become pages of the book)."""
    toc = root / "_toc.yml"
    text = toc.read_text() if toc.exists() else ""
    return set(re.findall(r"^\s*-\s*file:\s*notebooks/(\w+)\s*$", text, re.M))
