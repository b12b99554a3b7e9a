"""The one place that knows where JAX moved things between versions."""
from __future__ import annotations


def shard_map():
    """``jax.shard_map`` (JAX >= 0.7), else the older ``jax.experimental.shard_map.shard_map``."""
    import jax

    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map as _shard_map  # pragma: no cover - old JAX only

    return _shard_map


def make_mesh(shape, names, devices=None):
    """A mesh with *Auto* axes (classic GSPMD propagation), over ``devices`` if given.

    ``jax.make_mesh`` defaults to Explicit axes since JAX 0.10; the chapters that let XLA choose the collectives
    want Auto axes.
    """
    import jax
    import numpy as np

    shape, names = tuple(shape), tuple(names)
    if len(shape) != len(names):
        raise ValueError(f"shape {shape} and names {names} must have the same length")
    try:
        from jax.sharding import AxisType

        return jax.make_mesh(shape, names, axis_types=(AxisType.Auto,) * len(shape), devices=devices)
    except (ImportError, TypeError):  # pragma: no cover - JAX without axis types
        devs = devices if devices is not None else jax.devices()[: int(np.prod(shape))]
        return jax.sharding.Mesh(np.asarray(devs).reshape(shape), names)
