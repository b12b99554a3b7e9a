"""Which devices a notebook runs on: real accelerators when present, else simulated CPU devices.

``setup(8)`` must run before JAX does anything (it shapes the CPU client). On a TPU or GPU runtime the
accelerator stays the default backend; the 8-way sharding demos then use ``demo_devices(8)``, which falls back to
simulated CPU devices when the accelerator has fewer chips (a 1-chip Colab TPU, say).
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

from .units import check_positive

#: Most devices :func:`setup` asks for: simulated CPU devices each cost memory and threads.
MAX_DEVICES = 4096


def in_colab() -> bool:
    """True inside Google Colab (or when ``TPU_NOTES_FORCE_COLAB=1`` forces the Colab code path for testing)."""
    if os.environ.get("TPU_NOTES_FORCE_COLAB", "") not in ("", "0"):
        return True
    return "google.colab" in sys.modules


def setup(n: int = 8) -> list:
    """Ask JAX for ``n`` simulated CPU devices and return ``n`` devices to shard over.

    Real accelerators are returned when there are at least ``n`` of them; otherwise the simulated CPU devices are.
    Safe to re-run with the same ``n``; raises ``RuntimeError`` with advice if JAX already started with fewer.
    """
    n = check_positive("n", n, integer=True, maximum=MAX_DEVICES)
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", n)
    except RuntimeError as err:  # backend already initialised: fine if it already has enough CPU devices
        if len(jax.devices("cpu")) < n:
            raise RuntimeError(
                f"JAX started before tpu_notes.devices.setup({n}) could ask for {n} CPU devices "
                f"(it has {len(jax.devices('cpu'))}). Restart the kernel and run the setup cell first, "
                f"or set JAX_NUM_CPU_DEVICES={n} in the environment."
            ) from err
    return demo_devices(n)


def demo_devices(n: int = 8) -> list:
    """``n`` devices for a sharding demo: the default backend's if it has ``n``, else simulated CPU devices."""
    n = check_positive("n", n, integer=True, maximum=MAX_DEVICES)
    import jax

    devs = jax.devices()
    if len(devs) < n:
        devs = jax.devices("cpu")
    if len(devs) < n:
        raise RuntimeError(f"only {len(devs)} devices available; call tpu_notes.devices.setup({n}) first")
    return list(devs[:n])


@dataclass(frozen=True)
class DeviceInfo:
    """What the notebook is running on."""

    platform: str          # "cpu", "tpu" or "gpu" (JAX's default backend)
    device_kind: str       # JAX's device_kind string of device 0, e.g. "TPU v5 lite" or "cpu"
    count: int             # devices of the default backend in this process
    simulated: bool        # True when the devices are simulated CPU devices
    chip: str | None       # the tpu_notes.hardware chip name for this device, or None (e.g. a CPU)
    jax_version: str

    def __str__(self) -> str:
        what = "simulated CPU devices" if self.simulated else f"{self.device_kind} devices"
        chip = f" (tpu_notes chip {self.chip!r})" if self.chip else ""
        return f"JAX {self.jax_version} on {self.count} {what}{chip}"


# Substrings of JAX's device_kind -> tpu_notes chip names. Checked in order.
_KIND_TO_CHIP = [
    ("v5 lite", "v5e"), ("v5e", "v5e"), ("v5p", "v5p"), ("v5", "v5p"), ("v6", "v6e"), ("v4", "v4p"),
    ("v3", "v3"), ("7x", "tpu7x"), ("a100", "a100"), ("h100", "h100"), ("h200", "h200"), ("b200", "b200"),
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

    devs = jax.devices()
    kind = devs[0].device_kind
    platform = jax.default_backend()
    return DeviceInfo(platform=platform, device_kind=kind, count=len(devs), simulated=platform == "cpu",
                      chip=chip_for_device_kind(kind), jax_version=jax.__version__)
