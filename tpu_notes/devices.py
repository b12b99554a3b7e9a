"""Which devices a notebook runs on: real accelerators when present, else simulated CPU devices.

``setup(8)`` must run before JAX does anything (it shapes the CPU client). On a TPU or GPU runtime the
accelerator stays the default backend; the 8-way sharding demos then use ``demo_devices(8)``, which falls back to
simulated CPU devices when the accelerator has fewer chips (a 1-chip Colab TPU, say). Every mesh the book and the
library build comes from these functions (``demo_devices``, ``demo_mesh``, or a ``devices=`` argument), never from
a bare ``jax.devices()``; a hygiene test holds ``notebooks/`` and ``tpu_notes/`` to that.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass

from . import rules
from .units import Bool, capped, check_sizes, checked

#: Most devices :func:`setup` asks for: simulated CPU devices each cost memory and threads.
MAX_DEVICES = 4096
#: A device count, 1 to MAX_DEVICES.
DeviceCount = capped(MAX_DEVICES)


def in_colab() -> bool:
    """True inside Google Colab (or when ``TPU_NOTES_FORCE_COLAB=1`` forces the Colab code path for testing)."""
    if os.environ.get("TPU_NOTES_FORCE_COLAB", "") not in ("", "0"):
        return True
    return "google.colab" in sys.modules


@checked
def setup(n: DeviceCount = 8) -> list:
    """Ask JAX for ``n`` simulated CPU devices and return the devices the chapter's demos run on.

    Real accelerators are returned when there are at least ``n`` of them; otherwise the simulated CPU devices are
    (a 1-chip Colab TPU or a 1-GPU box still gets its ``n``-way demos, on the CPU). Safe to re-run. If JAX already
    started with fewer CPU devices (a cell used JAX before this one), this prints how to get ``n`` and returns the
    devices there are: the demos then shrink to them (:func:`demo_mesh`) instead of failing.
    """
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError:  # backend already initialised: fine if it already has enough CPU devices
        have = len(cpu_devices())
        if have < n and len(default_devices()) < n:
            print(
                f"Note: JAX started before tpu_notes.devices.setup({n}), with {have} CPU device(s); the "
                f"{n}-device demos run on {have}. For {n}: restart the kernel and run this cell first, or set "
                f"JAX_NUM_CPU_DEVICES={n} before starting Python."
            )
    return demo_devices(n)


def default_devices() -> list:
    """Every device of JAX's default backend (all processes' devices in a multi-process job): the one place
    ``tpu_notes`` asks JAX which devices exist. Library functions take a ``devices=`` argument instead."""
    import jax

    return list(jax.devices())


def cpu_devices() -> list:
    """JAX's CPU devices (the simulated ones :func:`setup` asked for)."""
    import jax

    return list(jax.devices("cpu"))


@checked
def demo_devices(n: DeviceCount = 8, *, backend: str | None = None, devices=None) -> list:
    """The devices a demo of ``n`` devices runs on; the one rule every notebook and library mesh follows.

    - ``devices`` given (a sequence of JAX devices, e.g. the setup cell's ``DEVICES``): its first ``n``.
    - ``backend="cpu"``: the first ``n`` CPU devices (compiler oracles whose stored output is XLA's CPU program).
    - otherwise: the default backend's first ``n`` if it has ``n`` (a TPU slice, a GPU node), else the first ``n``
      simulated CPU devices.

    Fewer than ``n`` come back only when no choice has ``n`` (JAX started with fewer): the longest list there is.
    Callers that need exactly ``n`` check the length (:func:`enough`, or the ``ValueError`` of the function that
    builds the mesh).
    """
    if devices is not None:
        devs = _device_list(devices)
        return devs[:n]
    if backend not in (None, "cpu"):
        raise ValueError(
            f"backend must be None (the default backend, falling back to the CPU) or 'cpu'; got {backend!r}"
        )
    cpu = cpu_devices()
    if backend == "cpu":
        return cpu[:n]
    default = default_devices()
    if len(default) >= n:
        return default[:n]
    if len(cpu) >= n:
        return cpu[:n]
    return (default if len(default) >= len(cpu) else cpu)[:n]


def _device_list(devices) -> list:
    """``devices`` as a non-empty list of JAX devices, or a ``TypeError``/``ValueError`` naming the argument."""
    if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
        raise TypeError(
            f"devices must be a sequence of JAX devices (e.g. the setup cell's DEVICES); got {type(devices).__name__}"
        )
    devs = list(devices)
    if not devs:
        raise ValueError("devices must hold at least one JAX device; got an empty sequence")
    bad = [d for d in devs if not (hasattr(d, "id") and hasattr(d, "platform"))]
    if bad:
        raise TypeError(f"devices must hold JAX devices (e.g. the setup cell's DEVICES); got {bad[0]!r}")
    return devs


@checked
def fit_shape(shape, n_devices: DeviceCount) -> tuple[int, ...]:
    """The mesh shape a demo of ``shape`` uses on ``n_devices`` devices: ``shape`` itself when it fits, else the
    axes shrunk, first axis first, by their smallest prime factor until the product fits.

    ``fit_shape((2, 4), 8) == (2, 4)``; ``fit_shape((2, 4), 4) == (1, 4)``; ``fit_shape((2, 4), 1) == (1, 1)``.
    """
    shape = list(_check_shape(shape))
    n = n_devices
    while math.prod(shape) > n:
        i = next(i for i, s in enumerate(shape) if s > 1)
        shape[i] //= next(p for p in range(2, shape[i] + 1) if shape[i] % p == 0)
    return tuple(shape)


def _check_shape(shape) -> tuple[int, ...]:
    shape = check_sizes("shape", shape)
    if math.prod(shape) > MAX_DEVICES:
        raise ValueError(f"shape {shape} asks for {math.prod(shape):,} devices; allowed: at most {MAX_DEVICES:,}")
    return shape


@checked
def demo_mesh(shape, names, devices=None, *, explicit: Bool = False, quiet: Bool = False):
    """A ``jax.sharding.Mesh`` of ``shape`` over the demo's devices (:func:`demo_devices`), for the chapters.

    ``devices`` is the setup cell's ``DEVICES`` (or None: :func:`demo_devices`). When there are fewer devices
    than ``shape`` needs, the mesh shrinks to :func:`fit_shape` and a one-line note says so (``quiet`` silences
    it): the demo runs, on fewer devices. ``explicit=True`` gives Explicit axes (JAX's sharding-in-types mode),
    else Auto axes (XLA propagates shardings).
    """
    from .compat import make_mesh

    shape = _check_shape(shape)
    names = rules.mesh_names(names, len(shape))
    devs = demo_devices(math.prod(shape), devices=devices)
    fitted = fit_shape(shape, len(devs))
    if fitted != shape and not quiet:
        print(
            f"Note: {len(devs)} device(s) here, so this demo's {'x'.join(map(str, shape))} mesh is "
            f"{'x'.join(map(str, fitted))}."
        )
    return make_mesh(fitted, names, devices=devs[: math.prod(fitted)], explicit=explicit)


class NotEnoughDevices(RuntimeError):
    """Raised by :func:`require` when a demo or an exercise needs more devices than this runtime has."""


@checked
def require(n: DeviceCount, devices=None, what: str = "this demo") -> list:
    """The first ``n`` of the demo's devices (:func:`demo_devices`), or :class:`NotEnoughDevices` saying how to
    get them. ``exercises.check`` reports that error as "needs n devices" instead of failing the cell."""
    devs = demo_devices(n, devices=devices)
    if len(devs) < n:
        raise NotEnoughDevices(
            f"{what} needs {n} devices and this runtime has {len(devs)}; restart the kernel "
            f"and run the setup cell (tpu_notes.devices.setup({max(n, 8)})) before anything "
            f"else uses JAX"
        )
    return devs


@checked
def enough(n: DeviceCount, devices, what: str = "this cell") -> bool:
    """True when ``devices`` holds at least ``n`` devices; else print why ``what`` is skipped and return False.

    For the few cells whose point is a fixed device count (an XLA oracle compiled for 8 devices, say).
    """
    have = len(_device_list(devices))
    if have >= n:
        return True
    print(
        f"Skipped: {what} needs {n} devices and this runtime has {have}. Restart the kernel and run the "
        f"setup cell first to get {n} simulated CPU devices."
    )
    return False


@dataclass(frozen=True)
class DeviceInfo:
    """What the notebook is running on."""

    platform: str  # "cpu", "tpu" or "gpu" (JAX's default backend)
    device_kind: str  # JAX's device_kind string of device 0, e.g. "TPU v5 lite" or "cpu"
    count: int  # devices of the default backend in this process
    simulated: bool  # True when the devices are simulated CPU devices
    chip: str | None  # the tpu_notes.hardware chip name for this device, or None (e.g. a CPU)
    jax_version: str

    def __str__(self) -> str:
        what = "simulated CPU devices" if self.simulated else f"{self.device_kind} devices"
        chip = f" (tpu_notes chip {self.chip!r})" if self.chip else ""
        return f"JAX {self.jax_version} on {self.count} {what}{chip}"


# Substrings of JAX's device_kind -> tpu_notes chip names. Checked in order.
_KIND_TO_CHIP = [
    ("v5 lite", "v5e"),
    ("v5e", "v5e"),
    ("v5p", "v5p"),
    ("v5", "v5p"),
    ("v6", "v6e"),
    ("v4", "v4p"),
    ("v3", "v3"),
    ("7x", "tpu7x"),
    ("a100", "a100"),
    ("h100", "h100"),
    ("h200", "h200"),
    ("b200", "b200"),
]


def chip_for_device_kind(device_kind: str) -> str | None:
    """Map JAX's ``device.device_kind`` (e.g. ``"TPU v5 lite"``, ``"NVIDIA H100 80GB HBM3"``) to a chip name."""
    if not isinstance(device_kind, str):
        raise TypeError(f"device_kind must be a string; got {type(device_kind).__name__}")
    kind = device_kind.lower()
    for key, chip in _KIND_TO_CHIP:
        if key in kind:
            return chip
    return None


def describe() -> DeviceInfo:
    """Describe the default JAX backend (starts JAX if it has not started)."""
    import jax

    devs = default_devices()
    kind = devs[0].device_kind
    platform = jax.default_backend()
    return DeviceInfo(
        platform=platform,
        device_kind=kind,
        count=len(devs),
        simulated=platform == "cpu",
        chip=chip_for_device_kind(kind),
        jax_version=jax.__version__,
    )
