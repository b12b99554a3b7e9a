"""tpu_notes: the analytical model, measurements and exercises behind the book *Scale Your Model*.

Importing the package does not import JAX (so a notebook can still choose its device count); the modules that
measure or compile (``devices``, ``bench``, ``hlo``, ``model``...) import JAX when they are used.

    from tpu_notes import hardware, roofline
    roofline.matmul_time(256, 8192, 8192, "v5e")
"""
from . import hardware, roofline, units  # noqa: F401  (pure Python + numpy)
from .units import dtype_bytes, fmt  # noqa: F401

__version__ = "0.1.0"
