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
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .units import canonical_dtype, check_choice, check_positive

#: One vector register (VREG) of a TPU TensorCore: 8 sublanes × 128 lanes of 32-bit words (scaling book, tpus.md
#: Appendix A), so 4 KiB; the VPU works on whole registers.
VREG_SHAPE = (8, 128)
VREG_BYTES = 8 * 128 * 4

#: Where the TPU prices per chip-hour come from: Google's on-demand list price, dated.
_TPU_PRICE = (
    "on-demand, cloud.google.com/tpu/pricing (cheapest US region), Feb 2025 as the scaling book's "
    "applied-inference.md quotes it; read 2026-12-06"
)
_TABLE = "scaling book, tpus.md (TPU specs tables)"
_GPU_TABLE = "scaling book, gpus.md (Summary of GPU specs tables)"

# What Cloud TPU schedules as one slice (Chip.max_slice_chips, Chip.slice_topologies), from its documentation.
_V5P_DOC = (
    "Google Cloud TPU v5p documentation (cloud.google.com/tpu/docs/v5p, System architecture and Configurations): "
    "'The largest job that can be scheduled is a 96 cube (6144 chip) job'; 'The maximum v5p shape is 16x16x24'"
)
_V5P_SMALL_DOC = (
    "Google Cloud TPU v5p documentation (cloud.google.com/tpu/docs/v5p): the slice shapes smaller than a cube, "
    "2x2x1, 2x2x2, 2x4x4, and the v5p-32 accelerator type (16 chips, 2x2x4); larger slices are whole 4x4x4 cubes"
)
_V4_DOC = (
    "Google Cloud TPU v4 documentation (cloud.google.com/tpu/docs/v4: 'TPU Pod size 4096 chips'; "
    "cloud.google.com/tpu/docs/types-topologies: a v4 topology AxBxC has A, B, C all <= 4 or all multiples of 4, "
    "the accelerator types below a cube being 2x2x1, 2x2x2, 2x2x4, 2x4x4)"
)
_V5E_DOC = (
    "Google Cloud TPU v5e documentation (cloud.google.com/tpu/docs/v5e, Configurations: the 2D slice shapes "
    "1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16; training on up to 256 chips)"
)
_V6E_DOC = (
    "Google Cloud TPU v6e documentation (docs.cloud.google.com/tpu/docs/v6e: 'TPU Pod size 256 chips', a 2D torus "
    "sharing v5e's 256-chip footprint); the shapes are taken as v5e's list (1x1 ... 16x16)"
)
#: Shapes of a 2D v5e/v6e slice Cloud TPU offers, axes sorted.
_2D_TOPOLOGIES = ((1, 1), (2, 2), (2, 4), (4, 4), (4, 8), (8, 8), (8, 16), (16, 16))
#: Shapes of a 3D slice smaller than one 4x4x4 cube that Cloud TPU offers (v4, v5p), axes sorted.
_SUBCUBE_TOPOLOGIES = ((1, 2, 2), (2, 2, 2), (2, 2, 4), (2, 4, 4))
_SM = (
    "scaling book, gpus.md (4 subpartitions per SM, each 32 fp32 CUDA cores, one tensor core, 16k 32-bit "
    "registers: 256 KiB of registers per SM on every generation)"
)
_TC = "scaling book, gpus.md tensor-core footnote (an estimate: V100 256, A100 512, H100 1024, B200 ~2048)"
_NVL = "scaling book, gpus.md NVLink table"
_TITAN_HW = (
    "torchtitan benchmarks/llama3_h100_202412_torchtitan.md (commit b5bcd76) and "
    "benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md, Hardware: Meta Grand Teton hosts, 8 H100s each with "
    "96GB HBM2e at 2.4 TB/sec peak, default 500W power limit (700W TDP not used)"
)
_NODE_IB = "scaling book, gpus.md (8 x 400 Gb/s InfiniBand NICs per node = 400 GB/s)"
_V100_WP = (
    "NVIDIA Tesla V100 GPU Architecture whitepaper (WP-08608-001), Table 1, Tesla V100 SXM2 column "
    "(https://images.nvidia.com/content/volta-architecture/pdf/volta-architecture-whitepaper.pdf)"
)
_V100_DS = "NVIDIA Tesla V100 datasheet, V100 SXM2 column"
_DGX1 = (
    "NVIDIA DGX-1 System Architecture whitepaper (WP-08437-002), section 3.1 'DGX-1 NVLink Network Topology' "
    "(the Tesla V100 edition)"
)
#: Hopper's two clocks: NVIDIA rates the tensor cores at 1.83 GHz and the fp32/fp64 units at the 1.98 GHz boost.
_HOPPER_TC_CLOCK = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper, peak-rate table: 989.4 TFLOP/s dense bf16 = 132 SMs x 4 "
    "tensor cores x 1024 FLOPs/cycle x 1.830 GHz, while its fp32 66.9 TFLOP/s = 16,896 x 2 x 1.98 GHz uses the "
    "boost clock (the two clocks as tabulated at https://glennklockwood.com/garden/processors/h100); the scaling "
    "book's 1.76 GHz estimate gives 9.5e14, 4% short of the datasheet"
)
_H100_BOOST = (
    "NVIDIA H100 SXM5 specifications (final, Oct 2022): GPU boost clock 1.98 GHz, the clock of the 67 TFLOP/s "
    "fp32 figure; the scaling book's table agrees"
)
_H800_NVL = (
    "NVIDIA H800 SXM5 datasheet: NVLink 400 GB/s counting both directions (DeepSeek, 'Insights into DeepSeek-V3', "
    "arXiv:2505.09343, sec. 2: 'reduced from 900 GB/s to 400 GB/s'), so 200 GB/s each way, 8 links of 25 GB/s; "
    "the scaling book's gpus.md says 300 GB/s, which matches neither convention. DeepSeek-V3's report "
    "(arXiv:2412.19437, sec. 3.2.2) measures about 160 GB/s achievable"
)
_H100_WP = (
    "NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5 vs H100 PCIe table (tensor-core rows "
    "'with sparsity': dense = / 2; the table as reproduced at "
    "https://archive-lib.hpctech.co.jp/gpuproduct/nvidia-h100.html); max TDP 300-350 W"
)
_H100_DS = (
    "NVIDIA H100 product page / datasheet, H100 NVL column (https://www.nvidia.com/en-us/data-center/h100/; "
    "tensor-core rows '* with sparsity': dense = / 2); max TDP 350-400 W (configurable)"
)

#: The host link of an SXM-socketed Hopper GPU (H100, H800, H200): PCIe Gen5 x16 to the host CPU, 128 GB/s counting
#: both directions, 64e9 bytes/s each way (the rate NVIDIA's H100 whitepaper gives its PCIe card).
_HOPPER_HOST = (
    "PCIe Gen5 x16 to the host: MLCommons inference system descriptions list 'accelerator_host_interconnect: "
    "PCIe Gen5 x16' for H100-SXM-80GB (Dell XE9680, inference_results_v3.1) and H200-SXM-141GB (NVIDIA, "
    "inference_results_v4.1); Gen5 x16 carries 128 GB/s counting both directions (NVIDIA H100 whitepaper, PCIe "
    "card column), so 64e9 bytes/s each way"
)

#: Latency of one ICI hop (one link between neighbouring TPU chips), seconds: every TPU's ``Chip.hop_latency``.
ICI_HOP_LATENCY = 1e-6
_ICI_HOP = "scaling book, sharding.md ('about 1 us per hop' of ICI)"

#: Latency of one step of a GPU ring collective (NCCL over NVLink or InfiniBand), seconds: every GPU's
#: ``Chip.hop_latency``.
GPU_HOP_LATENCY = 5e-6
_GPU_HOP = (
    "assumed: a few us per NCCL ring step over NVLink/InfiniBand (the scaling book, gpus.md, gives no "
    "figure); 5 us is this book's default"
)


def _sm_parts(tc_flops_per_cycle: int) -> dict:
    """The SM layout of Hopper and Blackwell (4 subpartitions of 32 fp32 cores and one tensor core); the A100
    (16 fp32 cores per subpartition) and the V100 (16, with 2 tensor cores) override parts of it."""
    return dict(
        subpartitions_per_sm=4,
        fp32_cores_per_subpartition=32,
        tensor_cores_per_sm=4,
        tc_flops_per_cycle=tc_flops_per_cycle,
        register_bytes_per_sm=4 * 16384 * 4,
    )


def _fp32(sms: int, clock_hz: float) -> dict:
    """Vector fp32 peaks derived from parts x clock: one op per CUDA core per cycle, x2 when an FMA counts."""
    return dict(fp32_flops=sms * 4 * 32 * clock_hz, fp32_fma_flops=2 * sms * 4 * 32 * clock_hz)


_GPU_DERIVED = {
    "fp32_flops": "derived: SMs x 4 x 32 CUDA cores x boost clock (scaling book, gpus.md Q2)",
    "fp32_fma_flops": "derived: 2 x fp32_flops (an FMA counts as 2 FLOPs; NVIDIA's datasheet figure)",
    "subpartitions_per_sm": _SM,
    "fp32_cores_per_subpartition": _SM,
    "tensor_cores_per_sm": _SM,
    "register_bytes_per_sm": _SM,
    "tc_flops_per_cycle": _TC,
    "clock_hz": _GPU_TABLE + " (the boost clock)",
    "base_clock_hz": _GPU_TABLE + " (the base clock)",
}


# The optional real-valued figures of a Chip: when set, finite and positive.
_OPTIONAL_FIGURES = (
    "int8_flops",
    "fp8_flops",
    "vmem_bytes",
    "vmem_bw",
    "ici_bw_oneway",
    "ici_bw_bidi",
    "pcie_bw",
    "dcn_bw",
    "clock_hz",
    "nvlink_bw",
    "dollars_per_hour",
    "base_clock_hz",
    "tensor_clock_hz",
    "fp32_flops",
    "fp32_fma_flops",
    "register_bytes_per_sm",
    "smem_bytes_per_sm",
    "l2_bytes",
    "l2_bw",
    "nvlink_link_bw",
    "node_egress_bw",
    "hop_latency",
)
# The optional counts of a Chip: when set, positive integers.
_OPTIONAL_COUNTS = (
    "mxu_size",
    "cores_per_chip",
    "mxus_per_core",
    "node_size",
    "vpu_alus_per_lane",
    "vregs_per_core",
    "sms",
    "subpartitions_per_sm",
    "fp32_cores_per_subpartition",
    "tensor_cores_per_sm",
    "tc_flops_per_cycle",
    "nvlink_links",
    "nvswitches_per_node",
    "nvswitch_ports",
    "max_slice_chips",
)


#: How :meth:`Chip.__str__` spells the variant suffixes of GPU names (``"h100-pcie"`` -> ``"H100 PCIe"``).
_GPU_VARIANTS = {"pcie": "PCIe", "nvl": "NVL", "40g": "40GB", "500w": "500W"}


@dataclass(frozen=True)
class Chip:
    """One accelerator chip (TPU) or GPU. ``None`` marks a figure that does not apply or is not published."""

    name: str  # canonical short name, e.g. "v5e"
    kind: str  # "tpu" or "gpu"
    long_name: str  # e.g. "TPU v5e"
    bf16_flops: float  # peak dense bf16 matmul FLOP/s
    int8_flops: float | None  # peak int8 matmul OP/s
    fp8_flops: float | None  # peak dense fp8 matmul FLOP/s
    hbm_bytes: float  # HBM capacity, bytes
    hbm_bw: float  # HBM bandwidth, bytes/s
    vmem_bytes: float | None = None  # on-chip vector memory (TPU VMEM), bytes
    vmem_bw: float | None = None  # VMEM bandwidth, bytes/s (where the book gives one)
    ici_bw_oneway: float | None = None  # ICI bandwidth per link, one direction, bytes/s
    ici_bw_bidi: float | None = None  # ICI bandwidth per link, both directions together, bytes/s
    ici_dims: int | None = None  # 2 (2D torus) or 3 (3D torus)
    pod_shape: tuple[int, ...] | None = None  # largest ICI-connected slice, chips per axis
    host_shape: tuple[int, ...] | None = None  # chips attached to one host, per axis
    max_slice_chips: int | None = None  # TPU: most chips of one slice Cloud TPU schedules (None: the whole pod)
    slice_topologies: tuple[tuple[int, ...], ...] | None = None  # TPU: offered shapes, axes sorted (3D: sub-cube)
    pcie_bw: float | None = None  # host<->chip link (PCIe), one direction, bytes/s: what host offload crosses
    dcn_bw: float | None = None  # data-centre network bandwidth PER CHIP (per GPU), bytes/s
    mxu_size: int | None = None  # systolic array edge (128 or 256)
    cores_per_chip: int | None = None  # TensorCores per chip
    mxus_per_core: int | None = None  # MXUs per TensorCore
    clock_hz: float | None = None  # core clock, Hz
    vpu_alus_per_lane: int | None = None  # TPU: VPU ALUs in each of the 8 × 128 lanes (4 on v5p, 2 on v4)
    vregs_per_core: int | None = None  # TPU: vector registers per TensorCore, each VREG_BYTES (4 KiB)
    nvlink_bw: float | None = None  # GPU: NVLink egress per GPU, one direction, bytes/s
    node_size: int | None = None  # GPU: GPUs per NVLink node
    dollars_per_hour: float | None = None  # on-demand cloud price per chip-hour, USD
    # -- GPU parts (Chapter 11); clock_hz above is a GPU's BOOST clock ------------------------------------------
    base_clock_hz: float | None = None  # GPU: base (sustained) clock, Hz
    tensor_clock_hz: float | None = None  # GPU: the clock the scaling book uses for tensor-core FLOPs/cycle
    sms: int | None = None  # GPU: streaming multiprocessors
    subpartitions_per_sm: int | None = None  # GPU: SM subpartitions (each a warp scheduler + a tensor core)
    fp32_cores_per_subpartition: int | None = None  # GPU: fp32 CUDA cores (ALUs) per subpartition
    tensor_cores_per_sm: int | None = None  # GPU: tensor cores per SM
    tc_flops_per_cycle: int | None = None  # GPU: dense bf16/fp16 FLOPs per tensor core per cycle
    fp32_flops: float | None = None  # GPU: vector fp32 FLOP/s WITHOUT FMA (one op per core per cycle)
    fp32_fma_flops: float | None = None  # GPU: vector fp32 FLOP/s counting an FMA as 2 (the datasheet)
    register_bytes_per_sm: float | None = None  # GPU: register file per SM, bytes
    smem_bytes_per_sm: float | None = None  # GPU: shared memory / L1 per SM, bytes
    l2_bytes: float | None = None  # GPU: L2 cache per chip, bytes
    l2_bw: float | None = None  # GPU: L2 bandwidth, bytes/s (measured; NVIDIA publishes none)
    nvlink_links: int | None = None  # GPU: NVLink links (ports) per GPU
    nvlink_link_bw: float | None = None  # GPU: one NVLink link, one direction, bytes/s
    nvswitches_per_node: int | None = None  # GPU: NVSwitch chips in one NVLink node (0: none, a direct NVLink mesh)
    nvswitch_ports: int | None = None  # GPU: NVLink ports of one NVSwitch
    node_egress_bw: float | None = None  # GPU: scale-out (InfiniBand) bandwidth of a WHOLE NODE, bytes/s
    hop_latency: float | None = None  # seconds per ring-collective hop: an ICI link / an NCCL ring step
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        # A Chip built by hand must be as sound as the table's: names are strings, figures finite and positive.
        self._check_names()
        self._check_figures()
        self._check_counts()
        self._check_shapes()
        self._check_ici_bandwidths()
        if not isinstance(self.sources, Mapping):
            raise TypeError(f"sources must be a mapping of field name -> source note; got {self.sources!r}")

    def _check_names(self) -> None:
        """The names are non-empty strings and the kind is "tpu" or "gpu"."""
        for f in ("name", "long_name"):
            v = getattr(self, f)
            if not isinstance(v, str) or not v.strip():
                raise TypeError(f"{f} must be a non-empty string; got {v!r}")
        if self.kind not in ("tpu", "gpu"):
            raise ValueError(f"kind must be 'tpu' or 'gpu'; got {self.kind!r}")

    def _check_figures(self) -> None:
        """The real-valued figures are finite and positive: the three every chip has, and those set of the rest."""
        for f in ("bf16_flops", "hbm_bytes", "hbm_bw"):
            check_positive(f, getattr(self, f))
        for f in _OPTIONAL_FIGURES:
            if getattr(self, f) is not None:
                check_positive(f, getattr(self, f))

    def _check_counts(self) -> None:
        """The counts that are set are positive integers (a node may have no NVSwitch)."""
        for f in _OPTIONAL_COUNTS:
            v = getattr(self, f)
            if f == "nvswitches_per_node" and type(v) is int and v == 0:
                continue  # a GPU node without NVSwitch (a direct NVLink mesh, as the V100's DGX-1)
            if v is not None:
                check_positive(f, v, integer=True)

    def _check_shapes(self) -> None:
        """The torus: 1 to 3 axes, and slice, pod and host shapes of positive integers with that many axes."""
        if self.ici_dims is not None and self.ici_dims not in (1, 2, 3):
            raise ValueError(f"ici_dims must be 1, 2 or 3 (torus axes); got {self.ici_dims!r}")
        if self.slice_topologies is not None and (
            not isinstance(self.slice_topologies, tuple)
            or not self.slice_topologies
            or any(
                not isinstance(t, tuple) or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in t)
                for t in self.slice_topologies
            )
        ):
            raise ValueError(
                f"slice_topologies must be a tuple of shapes (tuples of positive integers); got "
                f"{self.slice_topologies!r}"
            )
        for f in ("pod_shape", "host_shape"):
            v = getattr(self, f)
            if v is None:
                continue
            if (
                not isinstance(v, tuple)
                or not v
                or any(isinstance(n, bool) or not isinstance(n, int) or n < 1 for n in v)
            ):
                raise ValueError(f"{f} must be a non-empty tuple of positive integers; got {v!r}")
            if self.ici_dims is not None and len(v) != self.ici_dims:
                raise ValueError(f"{f} {v} must have ici_dims={self.ici_dims} axes")

    def _check_ici_bandwidths(self) -> None:
        """Where both ICI bandwidths are given, the bidirectional one is twice the one-way one."""
        if (
            self.ici_bw_oneway is not None
            and self.ici_bw_bidi is not None
            and not math.isclose(self.ici_bw_bidi, 2 * self.ici_bw_oneway)
        ):
            raise ValueError(f"ici_bw_bidi ({self.ici_bw_bidi}) must be twice ici_bw_oneway ({self.ici_bw_oneway})")

    def __str__(self) -> str:
        """The name a practitioner writes: ``"v5p"`` for a TPU (``"TPU7x"``), ``"H100"`` for a GPU (its variants
        spelled out: ``"H100 PCIe"``, ``"A100 40GB"``); :attr:`long_name` is the full one, ``repr`` every field."""
        if self.kind == "tpu":
            return "TPU" + self.name[3:] if self.name.lower().startswith("tpu") else self.name
        head, *variants = self.name.split("-")
        return " ".join([head.upper(), *(_GPU_VARIANTS.get(v.lower(), v.upper()) for v in variants)])

    def peak_flops(self, dtype: str = "bf16") -> float:
        """Peak throughput in FLOP/s (OP/s for int8) for ``dtype``: the matmul units for "bf16", "int8" and "fp8";
        for "fp32" the vector units (a GPU's CUDA cores, one op per core per cycle, no FMA: see ``fp32_fma_flops``
        for the datasheet's doubled figure)."""
        d = canonical_dtype(dtype)
        value = {"bf16": self.bf16_flops, "int8": self.int8_flops, "fp8": self.fp8_flops, "fp32": self.fp32_flops}.get(
            d
        )
        if value is None:
            have = [
                n
                for n, v in (
                    ("bf16", self.bf16_flops),
                    ("int8", self.int8_flops),
                    ("fp8", self.fp8_flops),
                    ("fp32", self.fp32_flops),
                )
                if v is not None
            ]
            raise ValueError(f"{self.long_name} has no published {d} matmul peak; dtype must be one of {have}")
        return value

    def bandwidth(self, kind: str = "hbm") -> float:
        """Bandwidth in bytes/s of ``kind``: "hbm", "vmem", "ici" (bidirectional, per link), "ici_oneway",
        "pcie", "dcn" (a TPU's share of its host's DCN, per chip), "nvlink" (per GPU), "l2", and for GPUs the
        two scale-out figures, named so the choice is explicit: "nic" (one GPU's NIC) and "node_egress" (the
        whole node's NICs together). On a GPU "dcn" is refused: a per-GPU NIC figure used where the node's
        bandwidth belongs was a real bug (a cross-node critical batch 8x too high on H100)."""
        kind = check_choice("kind", kind, BANDWIDTH_KINDS)
        if kind == "dcn" and self.kind == "gpu":
            raise ValueError(
                f"kind 'dcn' is ambiguous on a GPU ({self.long_name}): use 'nic' for one GPU's NIC "
                f"or 'node_egress' for the node's scale-out bandwidth (the cross-node data-parallel "
                f"threshold is C / node_egress)"
            )
        value = {
            "hbm": self.hbm_bw,
            "vmem": self.vmem_bw,
            "ici": self.ici_bw_bidi,
            "ici_oneway": self.ici_bw_oneway,
            "pcie": self.pcie_bw,
            "dcn": self.dcn_bw,
            "nvlink": self.nvlink_bw,
            "l2": self.l2_bw,
            "nic": self.dcn_bw if self.kind == "gpu" else None,
            "node_egress": self.node_egress_bw,
        }[kind]
        if value is None:
            raise ValueError(f"{self.long_name} has no {kind} bandwidth figure")
        return value

    def critical_intensity(self, dtype: str = "bf16", bandwidth="hbm") -> float:
        """FLOPs per byte above which an op on this chip is compute-bound against ``bandwidth``.

        ``bandwidth`` is a kind (one of ``BANDWIDTH_KINDS``) or an explicit figure in bytes/s, e.g. a measured
        bandwidth or a different generation's: ``critical_intensity("bf16", 1.23e12)``. ``bandwidth="ici"`` uses the
        bidirectional per-link figure: the alpha of the training chapters (2550 on v5p).
        """
        if isinstance(bandwidth, str):
            bw = self.bandwidth(check_choice("bandwidth", bandwidth, BANDWIDTH_KINDS))
        else:
            bw = check_positive("bandwidth", bandwidth)
        return self.peak_flops(dtype) / bw

    @property
    def vreg_file_bytes(self) -> int | None:
        """Bytes of one TensorCore's vector register file: ``vregs_per_core × 4 KiB`` (256 KiB on v5p)."""
        return None if self.vregs_per_core is None else self.vregs_per_core * VREG_BYTES

    @property
    def cuda_cores(self) -> int | None:
        """GPU: fp32 CUDA cores, ``SMs × subpartitions × cores per subpartition`` (16,896 on H100)."""
        parts = (self.sms, self.subpartitions_per_sm, self.fp32_cores_per_subpartition)
        return None if None in parts else math.prod(parts)

    @property
    def tensor_cores(self) -> int | None:
        """GPU: tensor cores per chip, ``SMs × tensor cores per SM`` (528 on H100)."""
        return None if self.sms is None or self.tensor_cores_per_sm is None else self.sms * self.tensor_cores_per_sm

    @property
    def nvlink_node_bw(self) -> float | None:
        """GPU: the node's NVLink bandwidth, ``min(GPUs × egress, switches × ports × link)`` (3.6 TB/s on H100); a
        node without NVSwitch (``nvswitches_per_node == 0``, the V100's DGX-1 cube-mesh) counts its GPUs' egress."""
        if None in (self.node_size, self.nvlink_bw):
            return None
        gpus = self.node_size * self.nvlink_bw
        if not self.nvswitches_per_node or None in (self.nvswitch_ports, self.nvlink_link_bw):
            return gpus
        return min(gpus, self.nvswitches_per_node * self.nvswitch_ports * self.nvlink_link_bw)

    @property
    def n_cores(self) -> int | None:
        """TensorCores per chip (alias of ``cores_per_chip``)."""
        return self.cores_per_chip


BANDWIDTH_KINDS = ("hbm", "vmem", "ici", "ici_oneway", "pcie", "dcn", "nvlink", "l2", "nic", "node_egress")


def _tpu(**kw) -> Chip:
    kw.setdefault("hop_latency", ICI_HOP_LATENCY)
    kw["sources"] = {"hop_latency": _ICI_HOP, **kw.get("sources", {})}
    return Chip(kind="tpu", **kw)


def _gpu(**kw) -> Chip:
    kw.setdefault("hop_latency", GPU_HOP_LATENCY)
    kw["sources"] = {"hop_latency": _GPU_HOP, **kw.get("sources", {})}
    return Chip(kind="gpu", **kw)


_B200_PARTS = dict(
    clock_hz=8e13 / (2 * 148 * 4 * 32),
    tensor_clock_hz=1.86e9,
    sms=148,
    **_sm_parts(2048),
    fp32_flops=4e13,
    fp32_fma_flops=8e13,
    smem_bytes_per_sm=256e3,
    l2_bytes=126e6,
    nvlink_links=18,
    nvlink_link_bw=5e10,
)
_B200_SOURCES = {
    **_GPU_DERIVED,
    "nvlink_links": _NVL,
    "nvlink_link_bw": _NVL,
    "clock_hz": "derived, not published: 8e13 fp32 FMA FLOP/s / (2 x 148 x 4 x 32 cores) = 2.11 GHz "
    "(scaling book, gpus.md Q6)",
    "tensor_clock_hz": "scaling book, gpus.md tensor-core footnote (1.86 GHz)",
    "fp32_fma_flops": "NVIDIA Blackwell architecture brief (80 TFLOP/s fp32, FMA counted as 2)",
    "fp32_flops": "derived: fp32_fma_flops / 2",
}

#: Scale-out NICs of an NVIDIA DGX A100: one single-port 200 Gb/s HDR InfiniBand ConnectX-6 per GPU for the
#: compute fabric; the dual-port ConnectX-6 card(s) serve storage and in-band management and are not counted.
_DGX_A100_IB = (
    "NVIDIA DGX A100 datasheet, Networking row of the 320 GB system (8 x A100 40GB): 8x single-port ConnectX-6 "
    "VPI 200 Gb/s HDR InfiniBand, one per GPU (the dual-port storage NIC is not counted)"
)
_DGX_A100_80G = " (the 640 GB system, 8 x A100 80GB, is taken to keep the same eight compute NICs)"

_A100_WP = "NVIDIA A100 Tensor Core GPU Architecture whitepaper (GA100 SM; A100 SXM4 specifications table)"

# The GA100 die as the A100 SXM4 40 GB and 80 GB share it: same SMs, clocks, L2 and NVLink, different HBM.
_A100_PARTS = dict(
    bf16_flops=3.12e14,
    int8_flops=6.24e14,
    fp8_flops=None,
    dcn_bw=200e9 / 8,
    pcie_bw=64e9 / 2,
    nvlink_bw=3e11,
    node_size=8,
    clock_hz=1.41e9,
    base_clock_hz=1.10e9,
    tensor_clock_hz=1.41e9,
    sms=108,
    **{**_sm_parts(512), "fp32_cores_per_subpartition": 16},
    fp32_flops=108 * 64 * 1.41e9,
    fp32_fma_flops=2 * 108 * 64 * 1.41e9,
    smem_bytes_per_sm=192e3,
    l2_bytes=40e6,
    nvlink_links=12,
    nvlink_link_bw=2.5e10,
    nvswitches_per_node=6,
    node_egress_bw=8 * 200e9 / 8,
)
_A100_SOURCES = {
    "*": _GPU_TABLE,
    **_GPU_DERIVED,
    "nvlink_links": _NVL,
    "nvlink_link_bw": _NVL,
    "nvswitches_per_node": _NVL,
    "tensor_clock_hz": "the boost clock (108 x 4 x 512 x 1.41e9 = 3.12e14)",
    "fp32_cores_per_subpartition": _A100_WP + ": 64 FP32 cores per SM (16 per processing block), 6,912 per "
    "GPU; the scaling book's 32 per subpartition holds from Hopper on, not for GA100",
    "fp32_flops": "derived: 6,912 CUDA cores x 1.41 GHz, one op per core per cycle",
    "fp32_fma_flops": "NVIDIA A100 datasheet (FP32 19.5 TFLOP/s = 2 x 6,912 x 1.41 GHz)",
    "bf16_flops": "NVIDIA A100 datasheet (312 TFLOP/s dense); the scaling book's table rounds to 3.1e14",
    "int8_flops": "NVIDIA A100 datasheet (624 TOP/s dense)",
    "nvlink_bw": "scaling book, gpus.md NVLink table (12 x 25 GB/s)",
    "dcn_bw": _DGX_A100_IB + ": one 200 Gb/s NIC per GPU = 200e9 / 8 = 25e9 bytes/s each way",
    "node_egress_bw": _DGX_A100_IB + ": 8 x 200 Gb/s = 1.6 Tb/s = 2e11 bytes/s each way",
    "pcie_bw": "NVIDIA A100 datasheet (PCIe Gen4: 64 GB/s counting both directions; / 2 for one way)",
}
_A100_80G_SOURCES = {
    **_A100_SOURCES,
    "dcn_bw": _A100_SOURCES["dcn_bw"] + _DGX_A100_80G,
    "node_egress_bw": _A100_SOURCES["node_egress_bw"] + _DGX_A100_80G,
    "hbm_bw": _GPU_TABLE + " (2.0e12; NVIDIA's A100 80GB datasheet prints 2,039 GB/s for the SXM card)",
}

#: The H100 SXM's die, clocks, host link, NVLink and node as both of its records state them (the 80 GB part and
#: torchtitan's 96 GB HBM2e part at 500 W differ in memory, price and sources only).
_H100_SXM = dict(
    bf16_flops=9.89e14,
    int8_flops=1.979e15,
    fp8_flops=1.979e15,
    pcie_bw=128e9 / 2,
    dcn_bw=5e10,
    nvlink_bw=4.5e11,
    node_size=8,
    clock_hz=1.98e9,
    base_clock_hz=1.59e9,
    tensor_clock_hz=1.83e9,
    sms=132,
    **_sm_parts(1024),
    **_fp32(132, 1.98e9),
    smem_bytes_per_sm=256e3,
    l2_bytes=50e6,
    l2_bw=5.5e12,
    nvlink_links=18,
    nvlink_link_bw=2.5e10,
    nvswitches_per_node=4,
    nvswitch_ports=64,
    node_egress_bw=4e11,
)

_CHIP_LIST = [
    _tpu(
        name="v3",
        long_name="TPU v3",
        bf16_flops=1.4e14,
        int8_flops=1.4e14,
        fp8_flops=None,
        hbm_bytes=32e9,
        hbm_bw=9e11,
        ici_bw_oneway=1e11,
        ici_bw_bidi=2e11,
        ici_dims=2,
        pod_shape=(32, 32),
        host_shape=(4, 2),
        mxu_size=128,
        cores_per_chip=2,
        mxus_per_core=2,
        sources={
            "*": _TABLE,
            "mxus_per_core": "scaling book, tpus.md Appendix B",
            "host_shape": _TABLE + " (4x2; a Cloud TPU v3-8 host has 4 chips, so the table may count cores)",
            "cores_per_chip": "scaling book, tpus.md (two cores with separate memory)",
        },
    ),
    _tpu(
        name="v4p",
        long_name="TPU v4p",
        bf16_flops=2.75e14,
        int8_flops=2.75e14,
        fp8_flops=None,
        hbm_bytes=32e9,
        hbm_bw=1.2e12,
        ici_bw_oneway=4.5e10,
        ici_bw_bidi=9e10,
        ici_dims=3,
        pod_shape=(16, 16, 16),
        host_shape=(2, 2, 1),
        pcie_bw=1.6e10,
        dcn_bw=6.25e9,
        mxu_size=128,
        cores_per_chip=2,
        mxus_per_core=4,
        clock_hz=1.05e9,
        vpu_alus_per_lane=2,
        vregs_per_core=32,
        max_slice_chips=4096,
        slice_topologies=_SUBCUBE_TOPOLOGIES,
        sources={
            "*": _TABLE,
            "max_slice_chips": _V4_DOC,
            "slice_topologies": _V4_DOC,
            "hbm_bw": _TABLE + "; tpus.md Q1 uses 1.23e12",
            "pcie_bw": "scaling book, tpus.md ('16GB/s each way' for v4)",
            "dcn_bw": "scaling book, tpus.md TPU Specs ('typically around 6.25e9 bytes / second per TPU', the "
            "figure it gives every chip but v5e and v6e); its earlier text and training.md give 2.5e10 bytes/s per "
            "host, and a v4 host holds 4 chips (host_shape 2x2x1): 2.5e10 / 4 = 6.25e9. Cross-check, a measured "
            "burst and not a capacity: PaLM (Chowdhery et al. 2022, sec. 4) saw 81 Tb/s across the 1536 hosts of "
            "two 3072-chip v4 pods, 81e12 / 8 / 1536 = 6.6e9 bytes/s per host, 1.6e9 per chip",
            "mxus_per_core": "scaling book, tpus.md Appendix B",
            "clock_hz": "TPU v4 paper (Jouppi et al., ISCA 2023: 1050 MHz); also 2.75e14 / (2 cores x 4 MXUs "
            "x 32768 FLOPs/cycle)",
            "vpu_alus_per_lane": "scaling book, tpus.md Appendix A (2 ALUs per lane on v4)",
            "vregs_per_core": "scaling book, tpus.md Appendix A (32 VREGs on v4)",
        },
    ),
    _tpu(
        name="v5p",
        long_name="TPU v5p",
        bf16_flops=4.59e14,
        int8_flops=9.18e14,
        fp8_flops=None,
        hbm_bytes=96e9,
        hbm_bw=2.8e12,
        vmem_bytes=128 * 2**20,
        ici_bw_oneway=9e10,
        ici_bw_bidi=1.8e11,
        ici_dims=3,
        pod_shape=(16, 20, 28),
        host_shape=(2, 2, 1),
        pcie_bw=1.6e10,
        dcn_bw=6.25e9,
        mxu_size=128,
        cores_per_chip=2,
        mxus_per_core=4,
        clock_hz=1.75e9,
        vpu_alus_per_lane=4,
        vregs_per_core=64,
        dollars_per_hour=4.2,
        max_slice_chips=6144,
        slice_topologies=_SUBCUBE_TOPOLOGIES,
        sources={
            "*": _TABLE,
            "max_slice_chips": _V5P_DOC,
            "slice_topologies": _V5P_SMALL_DOC,
            "vpu_alus_per_lane": "scaling book, tpus.md Appendix A ((8, 128) lanes x 4 ALUs = 4096 ALUs)",
            "vregs_per_core": "scaling book, tpus.md Appendix A (64 VREGs of 4 KiB = 256 KiB)",
            "bf16_flops": _TABLE + "; training.md sometimes rounds to 4.6e14",
            "hbm_bw": _TABLE + "; older versions of the book use 2.5e12",
            "vmem_bytes": "scaling book, gpus.md chip comparison table ('128MB'), read as the 128 MiB that "
            "tpus.md gives for v5e: VMEM sizes are binary on every chip here",
            "dcn_bw": "scaling book, training.md (25 GB/s per host shared by 4 chips)",
            "pcie_bw": "scaling book, tpus.md (typical PCIe per TPU)",
            "clock_hz": "scaling book, tpus.md Appendix A",
            "dollars_per_hour": _TPU_PRICE,
        },
    ),
    _tpu(
        name="v5e",
        long_name="TPU v5e",
        bf16_flops=1.97e14,
        int8_flops=3.94e14,
        fp8_flops=None,
        hbm_bytes=16e9,
        hbm_bw=8.2e11,
        vmem_bytes=128 * 2**20,
        vmem_bw=1.8e13,
        ici_bw_oneway=4.5e10,
        ici_bw_bidi=9e10,
        ici_dims=2,
        pod_shape=(16, 16),
        host_shape=(4, 2),
        pcie_bw=1.6e10,
        dcn_bw=3.125e9,
        mxu_size=128,
        cores_per_chip=1,
        mxus_per_core=4,
        clock_hz=1.5e9,
        dollars_per_hour=1.2,
        max_slice_chips=256,
        slice_topologies=_2D_TOPOLOGIES,
        sources={
            "*": _TABLE,
            "max_slice_chips": _V5E_DOC,
            "slice_topologies": _V5E_DOC,
            "hbm_bw": _TABLE + "; older versions of the book use 8.1e11",
            "hbm_bytes": _TABLE + " (16e9; the body text says 16 GiB)",
            "vmem_bytes": "scaling book, tpus.md (128 MiB)",
            "vmem_bw": "scaling book, tpus.md (about 22x HBM; Q4 uses 1.8e13 B/s)",
            "mxus_per_core": "derived: 1.97e14 / (32768 FLOPs/cycle x 1.5e9 Hz) ~ 4",
            "clock_hz": "scaling book, tpus.md (MXU clock 1.5 GHz)",
            "dcn_bw": "scaling book, tpus.md",
            "pcie_bw": "scaling book, tpus.md",
            "dollars_per_hour": _TPU_PRICE,
        },
    ),
    _tpu(
        name="v6e",
        long_name="TPU v6e (Trillium)",
        bf16_flops=9.2e14,
        int8_flops=1.84e15,
        fp8_flops=None,
        hbm_bytes=32e9,
        hbm_bw=1.6e12,
        ici_bw_oneway=9e10,
        ici_bw_bidi=1.8e11,
        ici_dims=2,
        pod_shape=(16, 16),
        host_shape=(4, 2),
        pcie_bw=3.2e10,
        dcn_bw=1.25e10,
        mxu_size=256,
        cores_per_chip=1,
        mxus_per_core=2,
        clock_hz=9.2e14 / (1 * 2 * 2 * 256**2),
        max_slice_chips=256,
        slice_topologies=_2D_TOPOLOGIES,
        sources={
            "*": _TABLE,
            "max_slice_chips": _V6E_DOC,
            "slice_topologies": _V6E_DOC,
            "bf16_flops": _TABLE + "; roofline.md uses 9.1e14",
            "mxu_size": "scaling book, tpus.md (256x256 MXU; pad to 256)",
            "cores_per_chip": "Google Cloud TPU v6e documentation (one TensorCore per chip); the scaling "
            "book gives no separate v6e count",
            "mxus_per_core": "Google Cloud TPU v6e documentation (two 256x256 MXUs per TensorCore)",
            "clock_hz": "derived, not published: 9.2e14 / (1 core x 2 MXUs x 2 x 256^2 FLOPs/cycle)",
            "vpu_alus_per_lane": "not published for v6e: left unset (pass alus_per_lane to vpu_flops)",
        },
    ),
    _tpu(
        name="tpu7x",
        long_name="TPU7x (Ironwood)",
        bf16_flops=2.3e15,
        int8_flops=4.61e15,
        fp8_flops=None,
        hbm_bytes=192e9,
        hbm_bw=7.4e12,
        ici_bw_oneway=9e10,
        ici_bw_bidi=1.8e11,
        ici_dims=3,
        pod_shape=(4, 4, 576),
        host_shape=(2, 2, 1),
        dcn_bw=1.25e10,
        mxu_size=256,
        cores_per_chip=2,
        sources={
            "*": _TABLE,
            "pod_shape": _TABLE + " (corrected May 2026)",
            "cores_per_chip": "scaling book, tpus.md (2 TensorCores without megacore)",
            "mxu_size": "Google Cloud TPU7x documentation (256x256 MXU)",
        },
    ),
    _gpu(
        name="v100",
        long_name="NVIDIA V100 SXM2",
        bf16_flops=1.25e14,
        int8_flops=None,
        fp8_flops=None,
        hbm_bytes=32e9,
        hbm_bw=9e11,
        pcie_bw=32e9 / 2,
        nvlink_bw=1.5e11,
        node_size=8,
        clock_hz=1.53e9,
        base_clock_hz=None,
        tensor_clock_hz=1.53e9,
        sms=80,
        subpartitions_per_sm=4,
        fp32_cores_per_subpartition=16,
        tensor_cores_per_sm=8,
        tc_flops_per_cycle=128,
        register_bytes_per_sm=4 * 16384 * 4,
        fp32_flops=80 * 64 * 1.53e9,
        fp32_fma_flops=2 * 80 * 64 * 1.53e9,
        smem_bytes_per_sm=96e3,
        l2_bytes=6e6,
        nvlink_links=6,
        nvlink_link_bw=2.5e10,
        nvswitches_per_node=0,
        sources={
            "*": _V100_WP,
            "bf16_flops": _V100_DS + ": 125 TFLOP/s fp16 tensor (V100 has no bf16) = 80 SMs x 8 tensor cores x "
            "128 FLOPs/cycle x 1.53 GHz; the PCIe card's 112 TFLOP/s (1.38 GHz) is not this part",
            "hbm_bytes": _V100_DS + " (32 GB HBM2; a 16 GB SXM2 part also exists)",
            "hbm_bw": _V100_DS + " (900 GB/s)",
            "clock_hz": _V100_WP + " (GPU boost clock 1530 MHz for the SXM2 part; the scaling book's 1.38 GHz is "
            "the PCIe card's)",
            "base_clock_hz": "left unset: NVIDIA's V100 SXM2 documents state the boost clock only (the scaling "
            "book's 1.25 GHz is the PCIe card's base clock)",
            "tensor_clock_hz": "the boost clock: 80 x 8 x 128 x 1.53e9 = 1.253e14, the datasheet's 125 TFLOP/s",
            "subpartitions_per_sm": _V100_WP + " (4 processing blocks per SM)",
            "fp32_cores_per_subpartition": _V100_WP + " (64 FP32 cores per SM = 16 per processing block)",
            "tensor_cores_per_sm": _V100_WP + " (8 tensor cores per SM, 2 per processing block; 640 per GPU)",
            "tc_flops_per_cycle": _V100_WP + " (each tensor core does 64 fp16 FMAs = 128 FLOPs per clock; the "
            "scaling book's footnote estimate of 256 assumes 4 tensor cores per SM)",
            "register_bytes_per_sm": _V100_WP + " (256 KB register file per SM)",
            "fp32_flops": "derived: 5,120 CUDA cores x 1.53 GHz, one op per core per cycle",
            "fp32_fma_flops": _V100_DS + " (15.7 TFLOP/s fp32 = 2 x 5,120 x 1.53 GHz)",
            "smem_bytes_per_sm": _V100_WP + " (shared memory configurable up to 96 KB per SM)",
            "l2_bytes": _V100_WP + " (6,144 KB L2)",
            "nvlink_bw": _V100_DS + " (NVLink 300 GB/s counting both directions: 6 links x 25 GB/s each way = "
            "1.5e11 one way); the scaling book's NVLink table starts at Ampere",
            "pcie_bw": _V100_DS + " (interconnect bandwidth, bi-directional: PCIe 32 GB/s; / 2 for one way)",
            "nvlink_links": _DGX1 + " (six NVLink connection points per V100)",
            "nvlink_link_bw": _DGX1 + " (25 GB/s per link in each direction)",
            "node_size": _DGX1 + " (8 x V100 SXM2)",
            "nvswitches_per_node": _DGX1 + ": no NVSwitch; a hybrid cube-mesh (a cube's 12 edges, some doubled, "
            "plus the diagonals of two faces), so each GPU reaches 4 of its 7 peers in one NVLink hop and the "
            "other 3 in two",
        },
    ),
    _gpu(
        name="a100",
        long_name="NVIDIA A100 SXM",
        hbm_bytes=80e9,
        hbm_bw=2.0e12,
        **_A100_PARTS,
        sources=_A100_80G_SOURCES,
    ),
    _gpu(
        name="a100-40g",
        long_name="NVIDIA A100 SXM 40GB",
        hbm_bytes=40e9,
        hbm_bw=1.555e12,
        **_A100_PARTS,
        sources={
            **_A100_SOURCES,
            "*": "as the A100 SXM 80GB (same GA100 die, SMs, clocks, L2 and NVLink): " + _GPU_TABLE,
            "hbm_bytes": "NVIDIA A100 datasheet, A100 40GB SXM column (40 GB HBM2)",
            "hbm_bw": "NVIDIA A100 datasheet, A100 40GB SXM column (1,555 GB/s HBM2); also the NVIDIA A100 "
            "Tensor Core GPU Architecture whitepaper (1555 GB/s)",
        },
    ),
    _gpu(
        name="h100",
        long_name="NVIDIA H100 SXM",
        **_H100_SXM,
        hbm_bytes=80e9,
        hbm_bw=3.35e12,
        dollars_per_hour=10.8,
        sources={
            "*": _GPU_TABLE,
            **_GPU_DERIVED,
            "nvlink_links": _NVL,
            "nvlink_link_bw": _NVL,
            "nvswitches_per_node": _NVL + " (4 NVSwitches, 5+4+4+5 links)",
            "nvswitch_ports": "scaling book, gpus.md (64 NVLink ports per NVSwitch)",
            "node_egress_bw": _NODE_IB,
            "tensor_clock_hz": _HOPPER_TC_CLOCK,
            "clock_hz": _H100_BOOST,
            "l2_bw": "scaling book, gpus.md (measured by Chips and Cheese, about 5.5 TB/s)",
            "bf16_flops": "NVIDIA H100 datasheet, 989 TFLOP/s dense (scaling book roofline.md); "
            "the 1979 figure is with sparsity",
            "hbm_bw": "NVIDIA H100 SXM datasheet 3.35 TB/s (roofline.md); gpus.md's table rounds to 3.4e12",
            "fp8_flops": "NVIDIA H100 datasheet (1979 TFLOP/s dense)",
            "dcn_bw": "scaling book, gpus.md (one 400 Gb/s InfiniBand NIC per GPU)",
            "nvlink_bw": "scaling book, gpus.md (18 links x 25 GB/s)",
            "pcie_bw": _HOPPER_HOST,
            "dollars_per_hour": "on-demand cloud price per GPU-hour, scaling book, applied-inference.md (early "
            "2025; read 2026-12-06); no committed-use list price found",
        },
    ),
    _gpu(
        name="h100-500w",
        long_name="NVIDIA H100 SXM 96GB HBM2e at 500 W (Grand Teton)",
        **_H100_SXM,
        hbm_bytes=96e9,
        hbm_bw=2.4e12,
        sources={
            **_GPU_DERIVED,
            "*": "as the H100 SXM (same GH100 die, 132 SMs, clocks, L2 and NVLink): " + _GPU_TABLE,
            "hbm_bytes": _TITAN_HW + " (96GB HBM2e per GPU)",
            "hbm_bw": _TITAN_HW + " (2.4 TB/s peak); Ujeniya, Eitzinger, Hager, Wellein, arXiv:2604.11391 "
            "(2026) state 2.41 TB/s for the HBM2e H100 they power-cap",
            "bf16_flops": "the H100 SXM's datasheet peak, 989 TFLOP/s dense at the 1.83 GHz tensor clock, "
            "NOT lowered for the 500 W limit " + _TITAN_HW + " states: no public measurement of the bf16 "
            "tensor-core clock or GEMM rate an H100 sustains at 500 W was found",
            "fp8_flops": "H100 SXM dense fp8, 1.979e15 (not lowered for the 500 W limit, as bf16_flops)",
            "int8_flops": "H100 SXM dense int8, 1.979e15 (not lowered for the 500 W limit, as bf16_flops)",
            "tensor_clock_hz": "as H100 (same Hopper die; the 500 W limit's sustained clock is not "
            "published): " + _HOPPER_TC_CLOCK,
            "clock_hz": "as H100: " + _H100_BOOST,
            "nvlink_links": _NVL + " (" + _TITAN_HW + ": 8 GPUs per host fully connected with NVLink)",
            "nvlink_link_bw": _NVL,
            "nvlink_bw": "scaling book, gpus.md (18 links x 25 GB/s), as H100 SXM",
            "nvswitches_per_node": _NVL + ", as H100 SXM",
            "nvswitch_ports": "scaling book, gpus.md (64 NVLink ports per NVSwitch)",
            "dcn_bw": _TITAN_HW + " (backend RDMA network, 400 Gb/s per GPU)",
            "node_egress_bw": _TITAN_HW + " (8 GPUs x 400 Gb/s = 400 GB/s per host)",
            "l2_bw": "as H100: scaling book, gpus.md (measured by Chips and Cheese, about 5.5 TB/s)",
            "pcie_bw": "assumed as H100 SXM: " + _HOPPER_HOST,
        },
    ),
    _gpu(
        name="h800",
        long_name="NVIDIA H800 SXM",
        bf16_flops=9.89e14,
        int8_flops=1.979e15,
        fp8_flops=1.979e15,
        hbm_bytes=80e9,
        hbm_bw=3.35e12,
        pcie_bw=128e9 / 2,
        nvlink_bw=2e11,
        node_size=8,
        clock_hz=1.98e9,
        base_clock_hz=1.59e9,
        tensor_clock_hz=1.83e9,
        sms=132,
        **_sm_parts(1024),
        **_fp32(132, 1.98e9),
        smem_bytes_per_sm=256e3,
        l2_bytes=50e6,
        nvlink_links=8,
        nvlink_link_bw=2.5e10,
        sources={
            **_GPU_DERIVED,
            "nvlink_links": _H800_NVL,
            "nvlink_link_bw": _NVL + " (NVLink 4, as H100)",
            "tensor_clock_hz": "as H100 (same Hopper die): " + _HOPPER_TC_CLOCK,
            "clock_hz": "as H100: " + _H100_BOOST,
            "*": "NVIDIA H800 SXM: the H100 SXM's compute and memory with NVLink cut down (DeepSeek-V3 "
            "technical report trained on it)",
            "fp8_flops": "H100 SXM dense fp8, 1.979e15 (3958 TFLOP/s sparse / 2)",
            "nvlink_bw": _H800_NVL,
            "pcie_bw": "assumed as H100 SXM (the same SXM5 module and HGX baseboard): " + _HOPPER_HOST,
        },
    ),
    _gpu(
        name="h800-pcie",
        long_name="NVIDIA H800 PCIe",
        bf16_flops=7.56e14,
        int8_flops=1.513e15,
        fp8_flops=1.513e15,
        hbm_bytes=80e9,
        hbm_bw=2.0e12,
        sources={
            "*": "NVIDIA H800 PCIe 80GB datasheet (dense = sparse / 2)",
            "fp8_flops": "scaling book, transformers.md Q7 (3026 TFLOP/s sparse / 2), the figure its "
            "DeepSeek-V3 question uses",
            "hbm_bw": "NVIDIA H800 PCIe datasheet (2.0 TB/s, HBM2e)",
        },
    ),
    _gpu(
        name="h100-pcie",
        long_name="NVIDIA H100 PCIe 80GB",
        bf16_flops=1.513e15 / 2,
        int8_flops=3.026e15 / 2,
        fp8_flops=3.026e15 / 2,
        hbm_bytes=80e9,
        hbm_bw=2.0e12,
        pcie_bw=128e9 / 2,
        nvlink_bw=600e9 / 2,
        sms=114,
        l2_bytes=50e6,
        sources={
            "*": _H100_WP,
            "bf16_flops": _H100_WP + ": 1,513 TFLOP/s bf16 with sparsity / 2 = 756.5 TFLOP/s dense",
            "int8_flops": _H100_WP + ": 3,026 TOP/s int8 with sparsity / 2",
            "fp8_flops": _H100_WP + ": 3,026 TFLOP/s fp8 with sparsity / 2",
            "hbm_bw": _H100_WP + " (2,000 GB/s, HBM2e)",
            "pcie_bw": _H100_WP + " (PCIe Gen5 128 GB/s counting both directions; / 2 for one way)",
            "nvlink_bw": _H100_WP + " (NVLink 600 GB/s counting both directions, over an NVLink bridge; / 2 "
            "for one way, as the SXM's 900 GB/s becomes 4.5e11)",
            "sms": _H100_WP + " (114 SMs on the PCIe card)",
            "l2_bytes": _H100_WP + " (50 MB)",
        },
    ),
    _gpu(
        name="h100-nvl",
        long_name="NVIDIA H100 NVL (94GB PCIe card)",
        bf16_flops=1.671e15 / 2,
        int8_flops=3.341e15 / 2,
        fp8_flops=3.341e15 / 2,
        hbm_bytes=94e9,
        hbm_bw=3.9e12,
        pcie_bw=128e9 / 2,
        nvlink_bw=600e9 / 2,
        sources={
            "*": _H100_DS,
            "bf16_flops": _H100_DS + ": 1,671 TFLOP/s bf16 with sparsity / 2 = 835.5 TFLOP/s dense",
            "int8_flops": _H100_DS + ": 3,341 TOP/s int8 with sparsity / 2",
            "fp8_flops": _H100_DS + ": 3,341 TFLOP/s fp8 with sparsity / 2",
            "hbm_bytes": _H100_DS + " (94 GB HBM3 per card)",
            "hbm_bw": _H100_DS + " (3.9 TB/s; NVIDIA's H100 NVL product brief PB-11773 gives 3,938 GB/s)",
            "pcie_bw": _H100_DS + " (PCIe Gen5 128 GB/s counting both directions; / 2 for one way)",
            "nvlink_bw": _H100_DS + " (NVLink 600 GB/s counting both directions; / 2 for one way)",
        },
    ),
    _gpu(
        name="h200",
        long_name="NVIDIA H200 SXM",
        bf16_flops=9.89e14,
        int8_flops=1.979e15,
        fp8_flops=1.979e15,
        hbm_bytes=141e9,
        hbm_bw=4.8e12,
        pcie_bw=128e9 / 2,
        dcn_bw=5e10,
        nvlink_bw=4.5e11,
        node_size=8,
        clock_hz=1.98e9,
        dollars_per_hour=10.0,
        base_clock_hz=1.59e9,
        tensor_clock_hz=1.83e9,
        sms=132,
        **_sm_parts(1024),
        **_fp32(132, 1.98e9),
        smem_bytes_per_sm=256e3,
        l2_bytes=50e6,
        nvlink_links=18,
        nvlink_link_bw=2.5e10,
        nvswitches_per_node=4,
        nvswitch_ports=64,
        node_egress_bw=4e11,
        sources={
            "*": _GPU_TABLE,
            **_GPU_DERIVED,
            "nvlink_links": _NVL,
            "nvlink_link_bw": _NVL,
            "nvswitches_per_node": _NVL,
            "nvswitch_ports": "scaling book, gpus.md",
            "node_egress_bw": _NODE_IB,
            "tensor_clock_hz": "as H100 (same Hopper die, same SM count): " + _HOPPER_TC_CLOCK,
            "clock_hz": "as H100: " + _H100_BOOST,
            "bf16_flops": "NVIDIA H200 datasheet (same Hopper compute as H100)",
            "pcie_bw": _HOPPER_HOST,
            "dcn_bw": "scaling book, gpus.md (one 400 Gb/s NIC per GPU)",
            "dollars_per_hour": "on-demand cloud price per GPU-hour, approximate: scaling book, gpus.md (early "
            "2025; read 2026-12-06); no committed-use list price found",
        },
    ),
    _gpu(
        name="b200",
        long_name="NVIDIA B200",
        bf16_flops=2.25e15,
        int8_flops=4.5e15,
        fp8_flops=4.5e15,
        hbm_bytes=192e9,
        hbm_bw=8e12,
        pcie_bw=128e9 / 2,
        dcn_bw=5e10,
        nvlink_bw=9e11,
        node_size=8,
        **_B200_PARTS,
        nvswitches_per_node=2,
        node_egress_bw=4e11,
        sources={
            "*": _GPU_TABLE,
            **_B200_SOURCES,
            "nvswitches_per_node": _NVL + " (2 for an 8-GPU B200 node)",
            "pcie_bw": "assumed, conservative: PCIe Gen5 x16, 64e9 bytes/s each way, as the HGX/DGX B200 hosts' "
            "x86 CPUs run Gen5; Blackwell itself supports Gen6 (256 GB/s counting both directions, as tabulated at "
            "https://glennklockwood.com/garden/processors/B200), a host link this table does not assume",
            "node_egress_bw": "scaling book, gpus.md node-type table (400 GB/s, as H100)",
            "bf16_flops": "scaling book, gpus.md quizzes (2250e12; the table rounds to 2.3e15)",
            "hbm_bw": _GPU_TABLE + " (the body text says 'about 9TB/s'; quizzes use 8e12); NVIDIA's HGX B200 "
            "datasheet gives 62 TB/s for 8 GPUs, 7.7e12 each",
            "hbm_bytes": _GPU_TABLE + " (192 GB, NVIDIA's GTC 2024 Blackwell figure); the DGX/HGX B200 datasheets "
            "ship 180 GB per GPU (1,440 GB for 8)",
            "nvlink_bw": "scaling book, gpus.md (NVLink 5: 18 x 50 GB/s); NVIDIA HGX B200 datasheet: 1.8 TB/s per "
            "GPU counting both directions",
        },
    ),
    _gpu(
        name="gb200",
        long_name="NVIDIA GB200 NVL72 (B200 in a 72-GPU NVLink domain)",
        bf16_flops=2.25e15,
        int8_flops=4.5e15,
        fp8_flops=4.5e15,
        hbm_bytes=192e9,
        hbm_bw=8e12,
        dcn_bw=5e10,
        nvlink_bw=9e11,
        node_size=72,
        **_B200_PARTS,
        nvswitches_per_node=18,
        node_egress_bw=3.6e12,
        sources={
            "*": _GPU_TABLE + " (the B200's figures; the NVL72 rack is the node)",
            **_B200_SOURCES,
            "node_size": _NVL + " (GB200 NVL72: 72 GPUs in one NVLink domain)",
            "nvswitches_per_node": _NVL + " (18 NVSwitches per NVL72)",
            "node_egress_bw": "scaling book, gpus.md (4 x 18 x 400 Gb/s = 3.6 TB/s per NVL72)",
            "dcn_bw": "one 400 Gb/s NIC per GPU (3.6 TB/s / 72 = 50 GB/s)",
            "bf16_flops": "as B200 (scaling book quizzes: 2250e12)",
        },
    ),
]

#: All chips by canonical name, read-only.
CHIPS: Mapping[str, Chip] = MappingProxyType({c.name: c for c in _CHIP_LIST})

ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "v4": "v4p",
        "tpu v4": "v4p",
        "tpu v4p": "v4p",
        "tpuv4": "v4p",
        "trillium": "v6e",
        "tpu v6e": "v6e",
        "tpu v5e": "v5e",
        "tpu v5p": "v5p",
        "tpu v3": "v3",
        "v5litepod": "v5e",
        "v5lite": "v5e",
        "ironwood": "tpu7x",
        "v7": "tpu7x",
        "tpu v7": "tpu7x",
        "h800 sxm": "h800",
        "h800-sxm": "h800",
        "h800 pcie": "h800-pcie",
        "h800pcie": "h800-pcie",
        "h100 pcie": "h100-pcie",
        "h100pcie": "h100-pcie",
        "h100 nvl": "h100-nvl",
        "h100nvl": "h100-nvl",
        "a100 40gb": "a100-40g",
        "a100-40gb": "a100-40g",
        "a100 40g": "a100-40g",
        "a100 80gb": "a100",
        "a100-80gb": "a100",
    }
)


def get_chip(name, argument: str = "chip") -> Chip:
    """Look a chip up by name, case-insensitively (``"v5e"``, ``"v4"``, ``"trillium"``, ``"H100"``...).

    A ``Chip`` passes through unchanged and a system (a ``Slice`` or a ``GpuCluster``) stands for its chip, so
    every function that takes a chip accepts any of them. ``argument`` is the name error messages give it (e.g.
    ``"chip_or_slice"``).
    """
    if isinstance(name, Chip):
        return name
    if isinstance(getattr(name, "chip", None), Chip):  # a System
        return name.chip
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


SPEC_COLUMNS = (
    "chip",
    "bf16 FLOP/s",
    "int8 OP/s",
    "HBM bytes",
    "HBM B/s",
    "ICI B/s/link (one way)",
    "critical intensity (bf16, HBM)",
)


def spec_table(names=None) -> list[dict]:
    """Rows of headline figures (raw SI numbers, ``None`` where missing) for ``names`` (default: all chips).

    Pair with :func:`tpu_notes.units.fmt` or ``tpu_notes.plots.table`` for display.
    """
    if names is None:
        names = list(CHIPS)
    elif isinstance(names, (str, Chip)):
        raise TypeError(
            f"names must be a list of chip names, e.g. ['v5e', 'h100']; got {names!r} (wrap a single chip in a list)"
        )
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
        rows.append(
            {
                "chip": c.name,
                "bf16 FLOP/s": c.bf16_flops,
                "int8 OP/s": c.int8_flops,
                "HBM bytes": c.hbm_bytes,
                "HBM B/s": c.hbm_bw,
                "ICI B/s/link (one way)": c.ici_bw_oneway,
                "critical intensity (bf16, HBM)": c.critical_intensity("bf16", "hbm"),
            }
        )
    return rows


def format_spec_table(names=None):
    """``spec_table`` as a :class:`tpu_notes.table.Table`: values in SI base units, the unit in each header."""
    from .table import Column, Table  # a leaf module; imported here to keep this module's import light

    keys = SPEC_COLUMNS[1:]
    columns = [
        Column("chip"),
        Column("bf16", "FLOP/s", scale="TFLOP/s"),
        Column("int8", "OP/s", scale="TOP/s"),
        Column("HBM", "B"),
        Column("BW", "B/s", scale="GB/s"),
        Column("ICI", "B/s"),
        Column("I*", "FLOPs/B"),
    ]
    rows = [(r["chip"], *(r[k] for k in keys)) for r in spec_table(names)]
    return Table(
        columns,
        rows,
        caption="Headline figures of each chip",
        notes=["BW: HBM bandwidth; ICI: one link, one way; I*: critical intensity (bf16 FLOP/s over BW)"],
    )


def _check_table() -> None:
    # Import-time sanity: every chip has positive headline figures.
    for c in _CHIP_LIST:
        for f in ("bf16_flops", "hbm_bytes", "hbm_bw"):
            v = getattr(c, f)
            assert v > 0 and math.isfinite(v), (c.name, f)


_check_table()
