"""Reshaping a 3D TPU slice with optical circuit switches: which tori a set of cubes can form, and what the shape does
to a collective's time (Chapter 5).

TPU v4 and v5p pods are built from cubes of 4 × 4 × 4 chips wired with copper inside; the faces of every cube go to
optical circuit switches (OCS), which join cubes into a torus of whole cubes and close each axis into a ring (Jouppi
et al., "TPU v4: An Optically Reconfigurable Supercomputer for Machine Learning with Hardware Support for
Embeddings", ISCA 2023, arXiv 2304.01433; the scaling book's tpus.md). A slice of ``n`` cubes can therefore be any
``4a × 4b × 4c`` torus with ``a · b · c = n``, not only the box it would occupy in the pod's nominal arrangement
(16 × 20 × 28 for v5p): the scaling book's training chapter reshapes a 4096-chip slice to give tensor parallelism
an axis of exactly 8 chips. Cloud TPU's v5p page (cloud.google.com/tpu/docs/v5p) lists the common shapes (for 4096
chips, 16 × 16 × 16) and caps one slice at 6144 chips (96 cubes); this module assumes every arrangement of whole
cubes up to that cap can be built, an upper bound on what a scheduler offers.

:class:`tpu_notes.topology.Slice` keeps to the pod's nominal box (it accepts 16 × 16 × 16 but not 8 × 16 × 32), so the
functions here price collectives with :mod:`tpu_notes.collectives` directly, with the same per-axis rule: a group of
chips that spans a whole axis of a slice of whole cubes uses its ring (wraparound); a group on part of an axis is a
line without one.
"""

from __future__ import annotations

from typing import Annotated

from .. import collectives
from ..hardware import get_chip
from ..topology import COLLECTIVE_KINDS, CUBE, largest_slice_chips
from ..units import NonNegativeFloat, OneOf, PositiveFloat, PositiveInt, check_sizes, checked

__all__ = ["cube_shapes", "group_collective_time", "largest_slice", "one_axis_group"]


def _ocs_chip(chip):
    c = get_chip(chip, "chip")
    if c.kind != "tpu" or c.ici_dims != 3:
        raise ValueError(
            f"chip must be a 3D-torus TPU generation built from optically switched cubes (e.g. 'v5p', 'v4p'); "
            f"got {c.name!r}"
        )
    return c


def largest_slice(chip) -> int:
    """Most chips one slice of ``chip`` (a 3D-torus TPU) may have: what Cloud TPU schedules
    (:func:`tpu_notes.topology.largest_slice_chips`, from ``Chip.max_slice_chips``; v5p: 6,144)."""
    return largest_slice_chips(_ocs_chip(chip))


@checked
def cube_shapes(chip, n_chips: PositiveInt) -> list[tuple[int, int, int]]:
    """Every torus shape ``(a, b, c)``, ``a <= b <= c``, each a multiple of 4 chips, with ``a · b · c = n_chips``: the
    arrangements of ``n_chips / 64`` cubes the optical switches can wire (see the module docstring), most compact
    (smallest longest axis) first. ``n_chips`` must be a whole number of cubes and at most :func:`largest_slice`."""
    c = _ocs_chip(chip)
    cube = CUBE**3
    top = largest_slice(c)
    if n_chips % cube or n_chips > top:
        raise ValueError(
            f"n_chips must be a whole number of {CUBE}x{CUBE}x{CUBE} cubes ({cube} chips each) and at most "
            f"{top:,} on {c.name}; got {n_chips:,}"
        )
    n = n_chips // cube
    shapes = [
        (CUBE * a, CUBE * b, CUBE * (n // (a * b)))
        for a in range(1, n + 1)
        for b in range(a, n + 1)
        if n % (a * b) == 0 and b <= n // (a * b)
    ]
    return sorted(shapes, key=lambda s: (s[2], s[1]))


@checked
def one_axis_group(shape, degree: PositiveInt) -> tuple[int, ...]:
    """Where a ``degree``-way group (a tensor-parallel group, say) goes if it must stay on one axis of ``shape``:
    an axis of exactly ``degree`` chips (its own ring) if there is one, else the shortest axis ``degree`` divides
    (part of it: a line). Returns the group's extent per axis, e.g. ``(1, 1, 8)``."""
    shape = check_sizes("shape", shape)
    exact = [i for i, s in enumerate(shape) if s == degree]
    fits = sorted((s, i) for i, s in enumerate(shape) if s % degree == 0)
    if not exact and not fits:
        raise ValueError(f"degree {degree} divides no axis of shape {shape}")
    axis = exact[0] if exact else fits[0][1]
    return tuple(degree if i == axis else 1 for i in range(len(shape)))


@checked
def group_collective_time(
    chip,
    shape,
    group,
    kind: Annotated[str, OneOf(COLLECTIVE_KINDS)],
    nbytes: NonNegativeFloat,
    hop_latency: PositiveFloat | None = None,
):
    """Time of a collective among the chips of one ``group`` of a torus ``shape`` of whole cubes (``group``: the
    group's extent per axis, each dividing the axis, e.g. ``(1, 1, 8)`` for 8 chips along the last axis). An axis
    the group spans entirely is a ring (the optical switches close it); an axis it spans in part is a line; all the
    group's axes work at once (:mod:`tpu_notes.collectives`, ``n_axes`` = axes with extent > 1). ``nbytes``: the
    gathered / unreduced array, as :meth:`tpu_notes.topology.Slice.collective_time` takes it. Returns a
    ``tpu_notes.collectives.CollectiveTime``."""
    c = _ocs_chip(chip)
    shape = check_sizes("shape", shape)
    group = check_sizes("group", group)
    if len(shape) != 3 or any(s % CUBE for s in shape):
        raise ValueError(f"shape must be 3 axes, each a multiple of {CUBE} (whole cubes); got {shape}")
    if len(group) != 3 or any(s % g for s, g in zip(shape, group)):
        raise ValueError(f"group must have 3 extents, each dividing its axis of shape {shape}; got {group}")
    axes = [i for i, g in enumerate(group) if g > 1]
    if not axes:
        return collectives.all_gather_time(0.0, 1, c.bandwidth("ici"))
    sizes = tuple(group[i] for i in axes)
    wraps = tuple(group[i] == shape[i] for i in axes)
    fn = getattr(collectives, f"{kind}_time")
    lat = c.hop_latency if hop_latency is None else hop_latency
    if len(axes) == 1:
        sizes, wraps = sizes[0], wraps[0]
    return fn(nbytes, sizes, c.bandwidth("ici"), wraparound=wraps, n_axes=len(axes), hop_latency=lat)
