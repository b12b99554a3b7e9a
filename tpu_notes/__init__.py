"""tpu_notes: the analytical model, measurements and exercises behind the book *Scale Your Model*.

One module per idea, in layers that import only downwards (``tests/test_layering.py`` enforces them): ground
(``units``: dtypes, the one validator and the formatter; ``hardware``: the one chip and interconnect table;
``compat``), systems (``topology``: TPU slices; ``gpu``: GPU clusters; ``system``: what both answer;
``collectives``), analysis (``roofline``, ``systolic``, ``sharding``, ``transformer``, ``training`` for Chapters
5-6, ``inference`` for Chapters 7-8), measure (``devices``, ``bench``, ``transfer``, ``hlo``: the one HLO reader,
``model``, ``generate``, ``parallel``, ``jaxprog``, ``profile``, ``multihost``) and book (``exercises``, ``plots``,
``widgets``, ``cheatsheet``, ``python -m tpu_notes``), covering all twelve chapters.

Importing the package does not import JAX (so a notebook can still choose its device count); the modules that
measure or compile (``devices``, ``bench``, ``hlo``, ``model``...) import JAX when they are used.

    from tpu_notes import hardware, roofline
    roofline.matmul_time(256, 8192, 8192, "v5e")
"""

from . import hardware, roofline, units  # noqa: F401  (pure Python + numpy)
from .units import dtype_bytes, fmt  # noqa: F401

__version__ = "0.1.0"
