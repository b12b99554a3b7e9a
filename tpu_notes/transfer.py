"""Measure host → device copies with ``jax.device_put`` and hold them against a chip's PCIe figure (Chapter 2).

On a TPU or GPU runtime the copy crosses PCIe (or NVLink-C2C on a Grace-Hopper), so the measured bandwidth can be
compared with ``Chip.pcie_bw``. On a CPU "device" the bytes never leave host memory: the measurement is a memory
copy, and the notebook says so. Timing goes through :func:`tpu_notes.bench.time_fn` (warm-up,
``block_until_ready``, median). JAX is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .bench import MAX_COPY_BYTES, MAX_SWEEP, Repeats, check_fits, time_fn
from .units import check_positive, checked, fmt

#: Sizes in bytes measured by default: 1 MiB to 64 MiB, a few seconds in all on a 2-core CPU.
DEFAULT_SIZES = (2**20, 2**22, 2**24, 2**26)


@dataclass(frozen=True)
class HostTransfer:
    """One timed host → device copy."""

    nbytes: int  # bytes copied per call
    seconds: float  # median seconds per copy (block_until_ready included)
    platform: str  # JAX platform of the destination device: "cpu", "tpu" or "gpu"

    @property
    def bytes_per_s(self) -> float:
        """Achieved bandwidth, bytes/s."""
        return self.nbytes / self.seconds

    def __repr__(self) -> str:
        return (
            f"HostTransfer({fmt(self.nbytes, 'B')} in {fmt(self.seconds, 's')}: "
            f"{fmt(self.bytes_per_s, 'B/s')} on {self.platform})"
        )


@checked
def measure_host_to_device(
    sizes: Sequence[int] = DEFAULT_SIZES, repeats: Repeats = 5, device=None
) -> tuple[HostTransfer, ...]:
    """Time ``jax.device_put`` of a float32 numpy array of each size in ``sizes`` (bytes) onto ``device``
    (default: JAX's first default device). Returns one :class:`HostTransfer` per size, medians of ``repeats`` runs.
    At most ``bench.MAX_SWEEP`` sizes of at most ``bench.MAX_COPY_BYTES`` bytes each."""
    import jax
    import numpy as np

    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, (list, tuple)):
        raise TypeError(f"sizes must be a list of sizes in bytes; got {type(sizes).__name__} {sizes!r}")
    sizes = tuple(sizes)
    if not sizes:
        raise ValueError("sizes must list at least one size in bytes")
    if len(sizes) > MAX_SWEEP:
        raise ValueError(f"sizes lists {len(sizes)} sizes; at most {MAX_SWEEP} are measured in one call")
    for i, nbytes in enumerate(sizes):  # all checked before anything is measured
        nbytes = check_positive(f"sizes[{i}]", nbytes, integer=True, maximum=MAX_COPY_BYTES)
        if nbytes % 4:
            raise ValueError(f"each size must be a multiple of 4 bytes (float32 elements); got sizes[{i}]={nbytes}")
        check_fits(f"sizes[{i}]", 2 * nbytes)
    if device is not None and not hasattr(device, "platform"):
        raise TypeError(f"device must be a JAX device or None; got {type(device).__name__} {device!r}")
    if device is None:
        from .devices import demo_devices

        device = demo_devices(1)[0]
    out = []
    for nbytes in sizes:
        host = np.ones(nbytes // 4, dtype=np.float32)
        timing = time_fn(lambda host=host: jax.device_put(host, device), repeats=repeats)
        out.append(HostTransfer(nbytes=nbytes, seconds=timing.median_s, platform=device.platform))
        del host
    return tuple(out)


def predicted_host_to_device(nbytes: float, chip) -> float:
    """Seconds to copy ``nbytes`` bytes into one chip over its PCIe link (``nbytes / Chip.pcie_bw``)."""
    from .topology import host_transfer_time

    return host_transfer_time(nbytes, chip).total


def report(measured: Sequence[HostTransfer], chip: str | None = "v5e") -> str:
    """A small table: each measured copy beside the time ``chip``'s PCIe figure predicts, and their ratio."""
    from .hardware import get_chip

    c = get_chip(chip)
    if (
        isinstance(measured, (str, bytes))
        or not isinstance(measured, (list, tuple))
        or not all(isinstance(m, HostTransfer) for m in measured)
    ):
        raise TypeError(f"measured must be a list of HostTransfer (from measure_host_to_device); got {measured!r}")
    lines = [f"{'bytes':>8}  {'measured':>10}  {'achieved':>11}  {c.name + ' PCIe model':>15}  {'ratio':>6}"]
    for m in measured:
        pred = predicted_host_to_device(m.nbytes, c)
        lines.append(
            f"{fmt(m.nbytes, 'B'):>8}  {fmt(m.seconds, 's'):>10}  {fmt(m.bytes_per_s, 'B/s'):>11}  "
            f"{fmt(pred, 's'):>15}  {m.seconds / pred:>6.2f}"
        )
    return "\n".join(lines)
