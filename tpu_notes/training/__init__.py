"""Training cost and parallelism (Chapters 5 and 6): FLOPs and time, memory, rooflines, collectives, planner.

Pure Python, no JAX (the analysis layer). The JAX side, the same layouts run for real, is :mod:`tpu_notes.parallel`.
"""
from __future__ import annotations

from .parallelism import MESH_AXES, Parallelism

__all__ = ["MESH_AXES", "Parallelism"]
