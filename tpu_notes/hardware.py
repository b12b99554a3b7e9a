"""Chips and their numbers: the one table of hardware constants in the book (Chapters 1, 2 and 11).

Every figure is per chip (per GPU) unless its field says otherwise, in SI units, and carries a source note in
``Chip.sources``. "The scaling book" below is the public *How To Scale Your Model* (jax-ml/scaling-book, commit
e5de31b, 2026-06-24); its chapters are named by file (``tpus.md``, ``roofline.md``...). Where that book quotes two
figures for one quantity, the one used here is named and the other is recorded in the source note.

Byte units: HBM capacities and every bandwidth are decimal, as the spec tables print them (16e9 bytes = 16 GB;
the v5e's "16 GiB" of the body text is recorded in its note); on-chip VMEM is binary on every chip (128 MiB =
128 · 2**20 bytes), as the scaling book's tpus.md gives it; vector registers are 4 KiB (4096 bytes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

from .units import canonical_dtype, check_choice, check_positive

#: One vector register (VREG) of a TPU TensorCore: 8 sublanes × 128 lanes of 32-bit words (scaling book, tpus.md
#: Appendix A), so 4 KiB; the VPU works on whole registers.
VREG_SHAPE = (8, 128)
VREG_BYTES = 8 * 128 * 4

_TABLE = "scaling book, tpus.md (TPU specs tables)"
_GPU_TABLE = "scaling book, gpus.md (Summary of GPU specs tables)"


@dataclass(frozen=True)
class Chip:
    """One accelerator chip (TPU) or GPU. ``None`` marks a figure that does not apply or is not published."""

    name: str                                   # canonical short name, e.g. "v5e"
    kind: str                                   # "tpu" or "gpu"
    long_name: str                              # e.g. "TPU v5e"
    bf16_flops: float                           # peak dense bf16 matmul FLOP/s
    int8_flops: Optional[float]                 # peak int8 matmul OP/s
    fp8_flops: Optional[float]                  # peak dense fp8 matmul FLOP/s
    hbm_bytes: float                            # HBM capacity, bytes
    hbm_bw: float                               # HBM bandwidth, bytes/s
    vmem_bytes: Optional[float] = None          # on-chip vector memory (TPU VMEM), bytes
    vmem_bw: Optional[float] = None             # VMEM bandwidth, bytes/s (where the book gives one)
    ici_bw_oneway: Optional[float] = None       # ICI bandwidth per link, one direction, bytes/s
    ici_bw_bidi: Optional[float] = None         # ICI bandwidth per link, both directions together, bytes/s
    ici_dims: Optional[int] = None              # 2 (2D torus) or 3 (3D torus)
    pod_shape: Optional[tuple[int, ...]] = None  # largest ICI-connected slice, chips per axis
    host_shape: Optional[tuple[int, ...]] = None  # chips attached to one host, per axis
    pcie_bw: Optional[float] = None             # host<->chip PCIe bandwidth, one direction, bytes/s
    dcn_bw: Optional[float] = None              # data-centre network bandwidth PER CHIP (per GPU), bytes/s
    mxu_size: Optional[int] = None              # systolic array edge (128 or 256)
    cores_per_chip: Optional[int] = None        # TensorCores per chip
    mxus_per_core: Optional[int] = None         # MXUs per TensorCore
    clock_hz: Optional[float] = None            # core clock, Hz
    vpu_alus_per_lane: Optional[int] = None     # TPU: VPU ALUs in each of the 8 × 128 lanes (4 on v5p, 2 on v4)
    vregs_per_core: Optional[int] = None        # TPU: vector registers per TensorCore, each VREG_BYTES (4 KiB)
    nvlink_bw: Optional[float] = None           # GPU: NVLink egress per GPU, one direction, bytes/s
    node_size: Optional[int] = None             # GPU: GPUs per NVLink node
    dollars_per_hour: Optional[float] = None    # on-demand cloud price per chip-hour, USD
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        # A Chip built by hand must be as sound as the table's: names are strings, figures finite and positive.
        for f in ("name", "long_name"):
            v = getattr(self, f)
            if not isinstance(v, str) or not v.strip():
                raise TypeError(f"{f} must be a non-empty string; got {v!r}")
        if self.kind not in ("tpu", "gpu"):
            raise ValueError(f"kind must be 'tpu' or 'gpu'; got {self.kind!r}")
        for f in ("bf16_flops", "hbm_bytes", "hbm_bw"):
            check_positive(f, getattr(self, f))
        for f in ("int8_flops", "fp8_flops", "vmem_bytes", "vmem_bw", "ici_bw_oneway", "ici_bw_bidi", "pcie_bw",
                  "dcn_bw", "clock_hz", "nvlink_bw", "dollars_per_hour"):
            if getattr(self, f) is not None:
                check_positive(f, getattr(self, f))
        for f in ("mxu_size", "cores_per_chip", "mxus_per_core", "node_size", "vpu_alus_per_lane",
                  "vregs_per_core"):
            if getattr(self, f) is not None:
                check_positive(f, getattr(self, f), integer=True)
        if self.ici_dims is not None and self.ici_dims not in (1, 2, 3):
            raise ValueError(f"ici_dims must be 1, 2 or 3 (torus axes); got {self.ici_dims!r}")
        for f in ("pod_shape", "host_shape"):
            v = getattr(self, f)
            if v is None:
                continue
            if not isinstance(v, tuple) or not v or any(isinstance(n, bool) or not isinstance(n, int) or n < 1
                                                         for n in v):
                raise ValueError(f"{f} must be a non-empty tuple of positive integers; got {v!r}")
            if self.ici_dims is not None and len(v) != self.ici_dims:
                raise ValueError(f"{f} {v} must have ici_dims={self.ici_dims} axes")
        if self.ici_bw_oneway is not None and self.ici_bw_bidi is not None and \
                not math.isclose(self.ici_bw_bidi, 2 * self.ici_bw_oneway):
            raise ValueError(f"ici_bw_bidi ({self.ici_bw_bidi}) must be twice ici_bw_oneway ({self.ici_bw_oneway})")
        if not isinstance(self.sources, Mapping):
            raise TypeError(f"sources must be a mapping of field name -> source note; got {self.sources!r}")

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Peak matmul throughput in FLOP/s (OP/s for int8) for ``dtype`` ("bf16", "int8" or "fp8")."""
        d = canonical_dtype(dtype)
        value = {"bf16": self.bf16_flops, "int8": self.int8_flops, "fp8": self.fp8_flops}.get(d)
        if value is None:
            have = [n for n, v in (("bf16", self.bf16_flops), ("int8", self.int8_flops),
                                   ("fp8", self.fp8_flops)) if v is not None]
            raise ValueError(f"{self.long_name} has no published {d} matmul peak; dtype must be one of {have}")
        return value

    def bandwidth(self, kind: str = "hbm") -> float:
        """Bandwidth in bytes/s of ``kind``: "hbm", "vmem", "ici" (bidirectional, per link), "ici_oneway",
        "pcie", "dcn" (per chip) or "nvlink" (per GPU)."""
        kind = check_choice("kind", kind, BANDWIDTH_KINDS)
        value = {"hbm": self.hbm_bw, "vmem": self.vmem_bw, "ici": self.ici_bw_bidi,
                 "ici_oneway": self.ici_bw_oneway, "pcie": self.pcie_bw, "dcn": self.dcn_bw,
                 "nvlink": self.nvlink_bw}[kind]
        if value is None:
            raise ValueError(f"{self.long_name} has no {kind} bandwidth figure")
        return value

    def critical_intensity(self, dtype: str = "bf16", bandwidth="hbm") -> float:
        """FLOPs per byte above which an op on this chip is compute-bound against ``bandwidth``.

        ``bandwidth`` is a kind (one of :data:`BANDWIDTH_KINDS`) or an explicit figure in bytes/s, e.g. a measured
        bandwidth or a different generation's: ``critical_intensity("bf16", 1.23e12)``. ``bandwidth="ici"`` uses the
        bidirectional per-link figure: the alpha of the training chapters (2550 on v5p).
        """
        if isinstance(bandwidth, str):
            bw = self.bandwidth(check_choice("bandwidth", bandwidth, BANDWIDTH_KINDS))
        else:
            bw = check_positive("bandwidth", bandwidth)
        return self.peak_flops(dtype) / bw

    @property
    def vreg_file_bytes(self) -> Optional[int]:
        """Bytes of one TensorCore's vector register file: ``vregs_per_core × 4 KiB`` (256 KiB on v5p)."""
        return None if self.vregs_per_core is None else self.vregs_per_core * VREG_BYTES

    @property
    def n_cores(self) -> Optional[int]:
        """TensorCores per chip (alias of ``cores_per_chip``)."""
        return self.cores_per_chip


BANDWIDTH_KINDS = ("hbm", "vmem", "ici", "ici_oneway", "pcie", "dcn", "nvlink")


def _tpu(**kw) -> Chip:
    return Chip(kind="tpu", **kw)


def _gpu(**kw) -> Chip:
    return Chip(kind="gpu", **kw)


_CHIP_LIST = [
    _tpu(name="v3", long_name="TPU v3", bf16_flops=1.4e14, int8_flops=1.4e14, fp8_flops=None,
         hbm_bytes=32e9, hbm_bw=9e11, ici_bw_oneway=1e11, ici_bw_bidi=2e11, ici_dims=2,
         pod_shape=(32, 32), host_shape=(4, 2), mxu_size=128, cores_per_chip=2, mxus_per_core=2,
         sources={"*": _TABLE, "mxus_per_core": "scaling book, tpus.md Appendix B",
                  "host_shape": _TABLE + " (4x2; a Cloud TPU v3-8 host has 4 chips, so the table may count cores)",
                  "cores_per_chip": "scaling book, tpus.md (two cores with separate memory)"}),
    _tpu(name="v4p", long_name="TPU v4p", bf16_flops=2.75e14, int8_flops=2.75e14, fp8_flops=None,
         hbm_bytes=32e9, hbm_bw=1.2e12, ici_bw_oneway=4.5e10, ici_bw_bidi=9e10, ici_dims=3,
         pod_shape=(16, 16, 16), host_shape=(2, 2, 1), pcie_bw=1.6e10, mxu_size=128, cores_per_chip=2,
         mxus_per_core=4, clock_hz=1.05e9, vpu_alus_per_lane=2, vregs_per_core=32,
         sources={"*": _TABLE, "hbm_bw": _TABLE + "; tpus.md Q1 uses 1.23e12",
                  "pcie_bw": "scaling book, tpus.md ('16GB/s each way' for v4)",
                  "mxus_per_core": "scaling book, tpus.md Appendix B",
                  "clock_hz": "TPU v4 paper (Jouppi et al., ISCA 2023: 1050 MHz); also 2.75e14 / (2 cores x 4 MXUs "
                              "x 32768 FLOPs/cycle)",
                  "vpu_alus_per_lane": "scaling book, tpus.md Appendix A (2 ALUs per lane on v4)",
                  "vregs_per_core": "scaling book, tpus.md Appendix A (32 VREGs on v4)"}),
    _tpu(name="v5p", long_name="TPU v5p", bf16_flops=4.59e14, int8_flops=9.18e14, fp8_flops=None,
         hbm_bytes=96e9, hbm_bw=2.8e12, vmem_bytes=128 * 2**20, ici_bw_oneway=9e10, ici_bw_bidi=1.8e11,
         ici_dims=3, pod_shape=(16, 20, 28), host_shape=(2, 2, 1), pcie_bw=1.6e10, dcn_bw=6.25e9,
         mxu_size=128, cores_per_chip=2, mxus_per_core=4, clock_hz=1.75e9, vpu_alus_per_lane=4,
         vregs_per_core=64, dollars_per_hour=4.2,
         sources={"*": _TABLE,
                  "vpu_alus_per_lane": "scaling book, tpus.md Appendix A ((8, 128) lanes x 4 ALUs = 4096 ALUs)",
                  "vregs_per_core": "scaling book, tpus.md Appendix A (64 VREGs of 4 KiB = 256 KiB)",
                  "bf16_flops": _TABLE + "; training.md sometimes rounds to 4.6e14",
                  "hbm_bw": _TABLE + "; older versions of the book use 2.5e12",
                  "vmem_bytes": "scaling book, gpus.md chip comparison table ('128MB'), read as the 128 MiB that "
                                "tpus.md gives for v5e: VMEM sizes are binary on every chip here",
                  "dcn_bw": "scaling book, training.md (25 GB/s per host shared by 4 chips)",
                  "pcie_bw": "scaling book, tpus.md (typical PCIe per TPU)",
                  "clock_hz": "scaling book, tpus.md Appendix A",
                  "dollars_per_hour": "scaling book, applied-inference.md (Google Cloud, Feb 2025)"}),
    _tpu(name="v5e", long_name="TPU v5e", bf16_flops=1.97e14, int8_flops=3.94e14, fp8_flops=None,
         hbm_bytes=16e9, hbm_bw=8.2e11, vmem_bytes=128 * 2**20, vmem_bw=1.8e13, ici_bw_oneway=4.5e10,
         ici_bw_bidi=9e10, ici_dims=2, pod_shape=(16, 16), host_shape=(4, 2), pcie_bw=1.6e10,
         dcn_bw=3.125e9, mxu_size=128, cores_per_chip=1, mxus_per_core=4, clock_hz=1.5e9,
         dollars_per_hour=1.2,
         sources={"*": _TABLE, "hbm_bw": _TABLE + "; older versions of the book use 8.1e11",
                  "hbm_bytes": _TABLE + " (16e9; the body text says 16 GiB)",
                  "vmem_bytes": "scaling book, tpus.md (128 MiB)",
                  "vmem_bw": "scaling book, tpus.md (about 22x HBM; Q4 uses 1.8e13 B/s)",
                  "mxus_per_core": "derived: 1.97e14 / (32768 FLOPs/cycle x 1.5e9 Hz) ~ 4",
                  "clock_hz": "scaling book, tpus.md (MXU clock 1.5 GHz)",
                  "dcn_bw": "scaling book, tpus.md", "pcie_bw": "scaling book, tpus.md",
                  "dollars_per_hour": "scaling book, applied-inference.md"}),
    _tpu(name="v6e", long_name="TPU v6e (Trillium)", bf16_flops=9.2e14, int8_flops=1.84e15, fp8_flops=None,
         hbm_bytes=32e9, hbm_bw=1.6e12, ici_bw_oneway=9e10, ici_bw_bidi=1.8e11, ici_dims=2,
         pod_shape=(16, 16), host_shape=(4, 2), pcie_bw=3.2e10, dcn_bw=1.25e10, mxu_size=256,
         cores_per_chip=1, mxus_per_core=2, clock_hz=9.2e14 / (1 * 2 * 2 * 256**2),
         sources={"*": _TABLE, "bf16_flops": _TABLE + "; roofline.md uses 9.1e14",
                  "mxu_size": "scaling book, tpus.md (256x256 MXU; pad to 256)",
                  "cores_per_chip": "Google Cloud TPU v6e documentation (one TensorCore per chip); the scaling "
                                    "book gives no separate v6e count",
                  "mxus_per_core": "Google Cloud TPU v6e documentation (two 256x256 MXUs per TensorCore)",
                  "clock_hz": "derived, not published: 9.2e14 / (1 core x 2 MXUs x 2 x 256^2 FLOPs/cycle)",
                  "vpu_alus_per_lane": "not published for v6e: left unset (pass alus_per_lane to vpu_flops)"}),
    _tpu(name="tpu7x", long_name="TPU7x (Ironwood)", bf16_flops=2.3e15, int8_flops=4.61e15, fp8_flops=None,
         hbm_bytes=192e9, hbm_bw=7.4e12, ici_bw_oneway=9e10, ici_bw_bidi=1.8e11, ici_dims=3,
         pod_shape=(4, 4, 576), host_shape=(2, 2, 1), dcn_bw=1.25e10, mxu_size=256, cores_per_chip=2,
         sources={"*": _TABLE, "pod_shape": _TABLE + " (corrected May 2026)",
                  "cores_per_chip": "scaling book, tpus.md (2 TensorCores without megacore)",
                  "mxu_size": "Google Cloud TPU7x documentation (256x256 MXU)"}),
    _gpu(name="a100", long_name="NVIDIA A100 SXM", bf16_flops=3.12e14, int8_flops=6.24e14, fp8_flops=None,
         hbm_bytes=80e9, hbm_bw=2.0e12, nvlink_bw=3e11, node_size=8, clock_hz=1.41e9,
         sources={"*": _GPU_TABLE,
                  "bf16_flops": "NVIDIA A100 datasheet (312 TFLOP/s dense); the scaling book's table rounds to 3.1e14",
                  "int8_flops": "NVIDIA A100 datasheet (624 TOP/s dense)",
                  "nvlink_bw": "scaling book, gpus.md NVLink table (12 x 25 GB/s)"}),
    _gpu(name="h100", long_name="NVIDIA H100 SXM", bf16_flops=9.89e14, int8_flops=1.979e15, fp8_flops=1.979e15,
         hbm_bytes=80e9, hbm_bw=3.35e12, dcn_bw=5e10, nvlink_bw=4.5e11, node_size=8, clock_hz=1.98e9,
         dollars_per_hour=10.8,
         sources={"*": _GPU_TABLE,
                  "bf16_flops": "NVIDIA H100 datasheet, 989 TFLOP/s dense (scaling book roofline.md); "
                                "the 1979 figure is with sparsity",
                  "hbm_bw": "NVIDIA H100 SXM datasheet 3.35 TB/s (roofline.md); gpus.md's table rounds to 3.4e12",
                  "fp8_flops": "NVIDIA H100 datasheet (1979 TFLOP/s dense)",
                  "dcn_bw": "scaling book, gpus.md (one 400 Gb/s InfiniBand NIC per GPU)",
                  "nvlink_bw": "scaling book, gpus.md (18 links x 25 GB/s)",
                  "dollars_per_hour": "scaling book, applied-inference.md"}),
    _gpu(name="h800", long_name="NVIDIA H800 SXM", bf16_flops=9.89e14, int8_flops=1.979e15, fp8_flops=1.979e15,
         hbm_bytes=80e9, hbm_bw=3.35e12, nvlink_bw=3e11, node_size=8, clock_hz=1.98e9,
         sources={"*": "NVIDIA H800 SXM: the H100 SXM's compute and memory with NVLink cut down (DeepSeek-V3 "
                       "technical report trained on it)",
                  "fp8_flops": "H100 SXM dense fp8, 1.979e15 (3958 TFLOP/s sparse / 2)",
                  "nvlink_bw": "scaling book, gpus.md (DeepSeek discussion: 300 GB/s per H800)"}),
    _gpu(name="h800-pcie", long_name="NVIDIA H800 PCIe", bf16_flops=7.56e14, int8_flops=1.513e15,
         fp8_flops=1.513e15, hbm_bytes=80e9, hbm_bw=2.0e12,
         sources={"*": "NVIDIA H800 PCIe 80GB datasheet (dense = sparse / 2)",
                  "fp8_flops": "scaling book, transformers.md Q7 (3026 TFLOP/s sparse / 2), the figure its "
                               "DeepSeek-V3 question uses",
                  "hbm_bw": "NVIDIA H800 PCIe datasheet (2.0 TB/s, HBM2e)"}),
    _gpu(name="h200", long_name="NVIDIA H200 SXM", bf16_flops=9.89e14, int8_flops=1.979e15, fp8_flops=1.979e15,
         hbm_bytes=141e9, hbm_bw=4.8e12, dcn_bw=5e10, nvlink_bw=4.5e11, node_size=8, clock_hz=1.98e9,
         dollars_per_hour=10.0,
         sources={"*": _GPU_TABLE, "bf16_flops": "NVIDIA H200 datasheet (same Hopper compute as H100)",
                  "dcn_bw": "scaling book, gpus.md (one 400 Gb/s NIC per GPU)",
                  "dollars_per_hour": "scaling book, gpus.md (approximate)"}),
    _gpu(name="b200", long_name="NVIDIA B200", bf16_flops=2.25e15, int8_flops=4.5e15, fp8_flops=4.5e15,
         hbm_bytes=192e9, hbm_bw=8e12, dcn_bw=5e10, nvlink_bw=9e11, node_size=8,
         sources={"*": _GPU_TABLE,
                  "bf16_flops": "scaling book, gpus.md quizzes (2250e12; the table rounds to 2.3e15)",
                  "hbm_bw": _GPU_TABLE + " (the body text says 'about 9TB/s'; quizzes use 8e12)",
                  "nvlink_bw": "scaling book, gpus.md (NVLink 5: 18 x 50 GB/s)"}),
]

#: All chips by canonical name, read-only.
CHIPS: Mapping[str, Chip] = MappingProxyType({c.name: c for c in _CHIP_LIST})

ALIASES: Mapping[str, str] = MappingProxyType({
    "v4": "v4p", "tpu v4": "v4p", "tpu v4p": "v4p", "tpuv4": "v4p",
    "trillium": "v6e", "tpu v6e": "v6e", "tpu v5e": "v5e", "tpu v5p": "v5p", "tpu v3": "v3",
    "v5litepod": "v5e", "v5lite": "v5e",
    "ironwood": "tpu7x", "v7": "tpu7x", "tpu v7": "tpu7x",
    "h800 sxm": "h800", "h800-sxm": "h800", "h800 pcie": "h800-pcie", "h800pcie": "h800-pcie",
})


def get_chip(name, argument: str = "chip") -> Chip:
    """Look a chip up by name, case-insensitively (``"v5e"``, ``"v4"``, ``"trillium"``, ``"H100"``...).

    A ``Chip`` passes through unchanged, so every function that takes a chip accepts either. ``argument`` is the
    name error messages give it (e.g. ``"chip_or_slice"``).
    """
    if isinstance(name, Chip):
        return name
    if not isinstance(name, str):
        raise TypeError(f"{argument} must be a chip name or a Chip; got {type(name).__name__}")
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    if key not in CHIPS:
        known = ", ".join(list(CHIPS) + sorted(ALIASES))
        raise ValueError(f"unknown {argument} {name!r}; known chips and aliases: {known}")
    return CHIPS[key]


def source(chip, field_name: str) -> str:
    """Where a figure comes from: ``source("v5e", "hbm_bw")``."""
    c = get_chip(chip)
    if not isinstance(field_name, str) or field_name not in Chip.__dataclass_fields__ or field_name == "sources":
        raise ValueError(f"field_name must be a Chip field; got {field_name!r}")
    return c.sources.get(field_name, c.sources.get("*", "unknown"))


SPEC_COLUMNS = ("chip", "bf16 FLOP/s", "int8 OP/s", "HBM bytes", "HBM B/s", "ICI B/s/link (one way)",
                "critical intensity (bf16, HBM)")


def spec_table(names=None) -> list[dict]:
    """Rows of headline figures (raw SI numbers, ``None`` where missing) for ``names`` (default: all chips).

    Pair with :func:`tpu_notes.units.fmt` or ``tpu_notes.plots.table`` for display.
    """
    if names is None:
        names = list(CHIPS)
    elif isinstance(names, (str, Chip)):
        raise TypeError(f"names must be a list of chip names, e.g. ['v5e', 'h100']; got {names!r} "
                        "(wrap a single chip in a list)")
    elif not isinstance(names, (list, tuple)):
        raise TypeError(f"names must be a list of chip names or None; got {type(names).__name__}")
    chips = []
    for n in names:
        try:
            chips.append(get_chip(n))
        except (TypeError, ValueError) as err:
            raise type(err)(f"names: {err}") from None
    rows = []
    for c in chips:
        rows.append({
            "chip": c.name, "bf16 FLOP/s": c.bf16_flops, "int8 OP/s": c.int8_flops, "HBM bytes": c.hbm_bytes,
            "HBM B/s": c.hbm_bw, "ICI B/s/link (one way)": c.ici_bw_oneway,
            "critical intensity (bf16, HBM)": c.critical_intensity("bf16", "hbm"),
        })
    return rows


def format_spec_table(names=None) -> str:
    """``spec_table`` as an aligned plain-text table with SI formatting."""
    from .units import fmt

    units = {"bf16 FLOP/s": "FLOP/s", "int8 OP/s": "OP/s", "HBM bytes": "B", "HBM B/s": "B/s",
             "ICI B/s/link (one way)": "B/s", "critical intensity (bf16, HBM)": "FLOPs/B"}
    rows = spec_table(names)
    cells = [list(SPEC_COLUMNS)]
    for r in rows:
        cells.append([r["chip"]] + ["—" if r[k] is None else fmt(r[k], units[k]) for k in SPEC_COLUMNS[1:]])
    widths = [max(len(row[i]) for row in cells) for i in range(len(SPEC_COLUMNS))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _check_table() -> None:
    # Import-time sanity: every chip has positive headline figures.
    for c in _CHIP_LIST:
        for f in ("bf16_flops", "hbm_bytes", "hbm_bw"):
            v = getattr(c, f)
            assert v > 0 and math.isfinite(v), (c.name, f)


_check_table()
