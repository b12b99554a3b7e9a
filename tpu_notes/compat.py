"""The one place that knows where JAX moved things between versions."""

from __future__ import annotations


def shard_map():
    """``jax.shard_map`` (JAX >= 0.7), else the older ``jax.experimental.shard_map.shard_map``."""
    import jax

    if hasattr(jax, "shard_map"):
        return jax.shard_map
    from jax.experimental.shard_map import shard_map as _shard_map  # pragma: no cover - old JAX only

    return _shard_map


def partition_spec(*entries):
    """``jax.sharding.PartitionSpec(*entries)``, for the JAX-free modules (``sharding``) that describe one."""
    from jax.sharding import PartitionSpec

    return PartitionSpec(*entries)


def make_mesh(shape, names, devices, *, explicit: bool = False):
    """A mesh of ``shape`` over exactly ``devices`` (a sequence of ``prod(shape)`` JAX devices), with *Auto* axes
    (classic GSPMD propagation), or Explicit axes when ``explicit``.

    ``jax.make_mesh`` defaults to Explicit axes since JAX 0.10; the chapters that let XLA choose the collectives
    want Auto axes. ``devices`` is required: meshes come from the chapter's devices
    (``tpu_notes.devices.demo_devices``), never from a hidden ``jax.devices()``.
    """
    import jax
    import numpy as np

    shape, names = tuple(shape), tuple(names)
    if len(shape) != len(names):
        raise ValueError(f"shape {shape} and names {names} must have the same length")
    if devices is None or isinstance(devices, (str, bytes)) or not hasattr(devices, "__len__"):
        raise TypeError(
            f"devices must be a sequence of {int(np.prod(shape))} JAX devices "
            f"(tpu_notes.devices.demo_devices(n)); got {type(devices).__name__}"
        )
    devices = list(devices)
    if len(devices) != int(np.prod(shape)):
        raise ValueError(
            f"devices must hold exactly prod(shape) = {int(np.prod(shape))} devices for shape "
            f"{shape}; got {len(devices)}"
        )
    try:
        from jax.sharding import AxisType

        kind = AxisType.Explicit if explicit else AxisType.Auto
        return jax.make_mesh(shape, names, axis_types=(kind,) * len(shape), devices=devices)
    except (ImportError, TypeError):  # pragma: no cover - JAX without axis types
        if explicit:
            raise
        return jax.sharding.Mesh(np.asarray(devices).reshape(shape), names)


def pvary(x, axis_name):
    """Mark ``x`` (a pytree) as varying over ``axis_name`` inside ``shard_map``: ``jax.lax.pvary`` (JAX 0.6-0.8),
    ``jax.lax.pcast(..., to="varying")`` in newer JAX; the identity in JAX without varying-axis tracking.

    Its transpose is one ``psum`` over ``axis_name``: pvary a weight once before a loop that uses it many times
    and the backward pass sums its gradient once, instead of once per use.
    """
    import jax

    if hasattr(jax.lax, "pcast"):
        return jax.lax.pcast(x, axis_name, to="varying")
    if hasattr(jax.lax, "pvary"):  # pragma: no cover - JAX 0.6-0.8
        return jax.lax.pvary(x, axis_name)
    return x  # pragma: no cover - old JAX: no varying-axis tracking, nothing to mark
