"""GEMM efficiency with a physical account: tiles, padding, waves, a fixed cost per call, and the bytes.

The efficiency model (:mod:`tpu_notes.efficiency`, Chapter 6) gives a large matmul a plateau fraction of peak and
shrinks it for small dimensions with a stated knee. This module replaces the knee with the mechanisms that make a
small or badly shaped matmul slow, and checks them against **published GEMM sweeps** (:data:`GEMM_SWEEPS`):

- **Tiles and padding.** A TPU's systolic array (the MXU, ``chip.mxu_size`` wide) consumes the contraction ``k`` and
  the output columns ``n`` in whole MXU-edge tiles and the rows ``m`` in groups of 8 (a sublane group); a GPU kernel
  computes its output in CTA tiles of ``GemmModel.gpu_tile`` (128 × 256, CUTLASS's Hopper default) and pads
  the last one. Padded work is paid for at full price.
- **Waves.** Output tiles are dealt to the compute units (a GPU's SMs; a TPU's TensorCores × MXUs, by row groups).
  The last wave runs part-empty: 133 tiles on 132 SMs take two waves. When there are fewer output tiles than SMs, a
  GPU library splits ``k`` over the idle SMs (split-K), down to ``GemmModel.split_k_min`` per split.
- **A fixed cost per call** (``GemmModel.fixed``, seconds): kernel launch and the pipeline's fill and drain,
  the same for a 1024³ matmul as for a 32768³ one.
- **Bytes.** The operands and output cross HBM once (``(mk + kn)·b + 2mn`` bytes); a matmul too thin to be
  compute bound takes that time at the HBM bandwidth. In a compute-bound one, ``GemmModel.exposed_bytes`` of
  that time is not hidden (the first operand tiles load before the array starts, the last output tile is written
  after it stops).
- **The plateau** (``GemmModel.plateau``): the fraction of peak the chip's sweep reaches at its best shape
  (``GemmModel.plateau_shape``). The rate of the array inside the kernel is not a free parameter: it is the
  rate that makes the model return exactly the plateau at that shape, so the plateau is what the sweep says and the
  other effects (quantisation, fixed cost) are explained on top of it, not a second time below it.

    t = max(fixed + max(work_padded / (rate · peak) + exposed_bytes · t_bytes, t_bytes), 2mkn / (plateau · peak))

Fitted parameters, few and stated (:data:`SOURCES`): per chip family the exposed-bytes share, per chip the fixed
cost, and per host-timed sweep the host's dispatch time; each fitted on the sweep points with every dimension
≥ 1024 (``benchmarks/gemm.py`` prints the errors). Tile sizes, SM counts and MXU edges are hardware facts
(:mod:`tpu_notes.hardware`).

:func:`shape_factor` is :func:`gemm_fraction` over the plateau, in (0, 1]: the share of the large-matmul rate a
matmul of that shape keeps, what the efficiency model's ``shape_factor`` stands for.

**FP8.** An FP8 GEMM has its own plateau (``GemmModel.fp8_plateau``, a fraction of the FP8 peak, from the FP8
sweep's best point: MAMF's e4m3 rows, 0.709 on H100 and 0.763 on B200 against bf16's 0.803 and 0.776), so an
H100 FP8 matmul runs 1.77x its bf16 twin, not the datasheet's 2x; the fixed cost, tiles and exposed bytes are the
bf16 fit's, with one-byte operands. XLA's B200 FP8 table checks the shapes below the plateau. A chip without an FP8
sweep of its own or its family's (TPUs), and int8, is priced at its bf16 plateau against that dtype's peak.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Annotated

from .hardware import CHIPS, Chip, get_chip
from .units import OneOf, Positive, checked, fmt

#: Dtypes a GEMM is priced in, with the bytes of one operand element (the output is written in bf16).
DTYPE_BYTES: Mapping[str, float] = MappingProxyType({"bf16": 2.0, "fp8": 1.0, "int8": 1.0})
#: How a sweep timed its calls: "device" (a profiler's kernel time) or "host" (wall clock around the call, which
#: adds the host's dispatch).
TIMINGS = ("device", "host")

# ------------------------------------------------------------------------------------------------ the sweeps
#: Where each sweep comes from (key: ``GemmMeasurement.source``).
SWEEP_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "ironwood-readme": "github.com/AI-Hypercomputer/accelerator-microbenchmarks, "
        "Ironwood/Ironwood_Microbenchmarks_readme.md, 'GEMM Results' table (commit ee16a1c8, 2026-02-10; first "
        "published in bd5ecee4, 2025-11-24): gemm_multiple_run, m = k = n, bf16 in and out with fp32 accumulation, "
        "config Ironwood/configs/collectives/1x1x1/gemm_multiple_run_more.yaml; TFLOP/s per JAX device, which on "
        "TPU7x is one of the chip's two TensorCores (chip_share 0.5); timed from the xprof profile",
        "xla-perf-table": "github.com/openxla/xla, xla/service/gpu/model/matmul_interpolator_data.h (commit "
        "71feeddf7cc3c9c7878eee18ea43c983631e6e84, 2025-10-21): XLA:GPU's measured GEMM table, bf16 x bf16 -> bf16, "
        "batch 1, m, n, k in {256 ... 4096}; key sm_90 (H100 SXM) and sm_100 (B200)",
        "mamf": "github.com/stas00/ml-engineering, compute/accelerator/README.md, 'Maximum Achievable Matmul FLOPS "
        "comparison table' (BF16; best shape printed MxNxK, mean of 100 iterations after 50 warm-up): A100 SXM "
        "271.2 TFLOP/s at 1024x10240x5120, H100 SXM 794.5 at 2048x2048x13312, B200 SXM 1745.0 at 1792x16128x3072",
        "xla-perf-table-fp8": "github.com/ROCm/xla (a fork carrying openxla/xla's file), "
        "xla/service/gpu/model/matmul_interpolator_data.h (commit ea2c45f2cacc930dcfa4e7bb0773616b8e353c34, "
        "2026-07-31; its bf16 entries for sm_90 and sm_100 equal xla-perf-table's): key sm_100_B200, "
        "f8e4m3fn x f8e4m3fn -> bf16, batch 1, m, n, k in {256 ... 4096}",
        "mamf-fp8": "github.com/stas00/ml-engineering, compute/accelerator/README.md (commit b9e29720), 'Maximum "
        "Achievable Matmul FLOPS comparison table', FP8 (float8_e4m3fn) rows (best shape printed MxNxK): H100 SXM "
        "1402.6 of 1979 TFLOP/s at 1024x9216x14336, B200 SXM 3432.5 of 4500 at 15360x4096x3072. Its H200 SXM row "
        "(1453.4 at 1280x4096x12032) is not used: the model, with the bf16 CTA tile, puts 160 tiles in two waves on "
        "132 SMs there and gives 21% less; the FP8 kernels' own tiles are not modelled",
        "gpu-tpu-pedia": "github.com/yangwhale/gpu-tpu-pedia, tpu/v7_perf/chay_gemm_benchmark_simple/results_v6e.csv "
        "(commit 66f72bde, 2026-02-09; a third party's JAX sweep, timed by the host's wall clock, so each call "
        "carries the host's dispatch) and results_trace_test.csv (commit 6744feed, 2026-02-11; 8192^3 timed from "
        "the profiler trace)",
    }
)


@dataclass(frozen=True)
class GemmMeasurement:
    """One published GEMM measurement: ``[m, k] @ [k, n]`` in ``dtype`` on (a share of) ``chip``."""

    chip: str  # chip name of tpu_notes.hardware.CHIPS
    m: int  # rows of the left operand and of the output
    k: int  # contraction dimension
    n: int  # columns of the right operand and of the output
    dtype: str  # operand dtype, "bf16"
    flops_per_s: float  # achieved FLOP/s, 2·m·k·n / seconds, as published
    source: str  # key of SWEEP_SOURCES
    chip_share: float = 1.0  # share of the chip the benchmark ran on (0.5: one of TPU7x's two TensorCores)
    timing: str = "device"  # "device" (profiler kernel time) or "host" (wall clock, with the dispatch)

    def __post_init__(self):
        if self.chip not in CHIPS:
            raise ValueError(f"chip must be one of {', '.join(CHIPS)}; got {self.chip!r}")
        for f in ("m", "k", "n"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{f} must be a whole number >= 1; got {v!r}")
        if self.dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}; got {self.dtype!r}")
        v = self.flops_per_s
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0 < v < 1e18):
            raise ValueError(f"flops_per_s must be a finite number > 0; got {v!r}")
        if self.source not in SWEEP_SOURCES:
            raise ValueError(f"source must be one of {', '.join(SWEEP_SOURCES)}; got {self.source!r}")
        s = self.chip_share
        if isinstance(s, bool) or not isinstance(s, (int, float)) or not (0 < s <= 1):
            raise ValueError(f"chip_share must be a fraction in (0, 1]; got {s!r}")
        if self.timing not in TIMINGS:
            raise ValueError(f"timing must be one of {', '.join(TIMINGS)}; got {self.timing!r}")

    @property
    def flops(self) -> float:
        """FLOPs of the matmul: ``2·m·k·n``."""
        return 2.0 * self.m * self.k * self.n

    @property
    def seconds(self) -> float:
        """Seconds of one call: FLOPs over the achieved rate."""
        return self.flops / self.flops_per_s

    @property
    def fraction(self) -> float:
        """Achieved fraction of the datasheet peak of the share of the chip it ran on."""
        return self.flops_per_s / (get_chip(self.chip).peak_flops(self.dtype) * self.chip_share)

    @property
    def size(self) -> int:
        """The smallest of the three dimensions (the sweep's "size" for the 1024-and-up target)."""
        return min(self.m, self.k, self.n)


#: TPU7x, one TensorCore, m = k = n (TFLOP/s per device), from the Ironwood README.
_IRONWOOD = (
    (128, 2.589961271),
    (256, 18.28645367),
    (512, 105.0783466),
    (1024, 349.7270639),
    (2048, 679.284728),
    (4096, 892.9445127),
    (16384, 950.1286983),
    (32768, 956.3824592),
)
#: TPU v6e, host-timed bf16 rows of results_v6e.csv: (m, k, n, TFLOP/s) (the CSV's columns are m, n, k).
_V6E_HOST = (
    (128, 4096, 4096, 28.59), (256, 4096, 4096, 54.61), (512, 4096, 4096, 118.9), (1024, 4096, 4096, 206.4),
    (2048, 4096, 4096, 336.4), (4096, 4096, 4096, 476.3), (8192, 4096, 4096, 612.0), (128, 8192, 8192, 81.17),
    (256, 8192, 8192, 162.2), (512, 8192, 8192, 300.9), (1024, 8192, 8192, 461.3), (2048, 8192, 8192, 596.4),
    (4096, 8192, 8192, 688.9), (8192, 8192, 8192, 668.1), (128, 7168, 4096, 53.83), (256, 7168, 4096, 101.8),
    (512, 7168, 4096, 182.5), (1024, 7168, 4096, 287.5), (2048, 7168, 4096, 416.3), (4096, 7168, 4096, 559.6),
    (8192, 7168, 4096, 637.5), (128, 4096, 7168, 55.43), (256, 4096, 7168, 105.5), (512, 4096, 7168, 187.0),
    (1024, 4096, 7168, 278.9), (2048, 4096, 7168, 422.6), (4096, 4096, 7168, 550.2), (8192, 4096, 7168, 681.2),
)  # fmt: skip
#: XLA:GPU's measured tables, batch 1: (m, k, n, TFLOP/s), rounded to 0.1 TFLOP/s.
_XLA_SM90 = (
    (256, 256, 256, 6.7), (256, 256, 512, 12.4), (256, 256, 1024, 23.7), (256, 256, 2048, 43.8),
    (256, 256, 4096, 82.6), (256, 512, 256, 11.5), (256, 512, 512, 23.0), (256, 512, 1024, 43.8),
    (256, 512, 2048, 83.1), (256, 512, 4096, 146.2), (256, 1024, 256, 18.9), (256, 1024, 512, 41.1),
    (256, 1024, 1024, 75.1), (256, 1024, 2048, 141.6), (256, 1024, 4096, 237.6), (256, 2048, 256, 31.9),
    (256, 2048, 512, 63.9), (256, 2048, 1024, 119.6), (256, 2048, 2048, 222.6), (256, 2048, 4096, 345.9),
    (256, 4096, 256, 90.9), (256, 4096, 512, 93.1), (256, 4096, 1024, 177.1), (256, 4096, 2048, 296.3),
    (256, 4096, 4096, 418.4), (512, 256, 256, 12.3), (512, 256, 512, 23.6), (512, 256, 1024, 45.7),
    (512, 256, 2048, 84.5), (512, 256, 4096, 141.3), (512, 512, 256, 23.0), (512, 512, 512, 43.6),
    (512, 512, 1024, 85.4), (512, 512, 2048, 147.5), (512, 512, 4096, 243.6), (512, 1024, 256, 41.5),
    (512, 1024, 512, 73.4), (512, 1024, 1024, 146.5), (512, 1024, 2048, 241.8), (512, 1024, 4096, 381.3),
    (512, 2048, 256, 61.7), (512, 2048, 512, 116.3), (512, 2048, 1024, 231.0), (512, 2048, 2048, 342.8),
    (512, 2048, 4096, 530.0), (512, 4096, 256, 92.8), (512, 4096, 512, 187.5), (512, 4096, 1024, 300.9),
    (512, 4096, 2048, 460.4), (512, 4096, 4096, 661.6), (1024, 256, 256, 23.6), (1024, 256, 512, 45.5),
    (1024, 256, 1024, 80.9), (1024, 256, 2048, 144.3), (1024, 256, 4096, 219.7), (1024, 512, 256, 43.7),
    (1024, 512, 512, 84.3), (1024, 512, 1024, 149.1), (1024, 512, 2048, 244.0), (1024, 512, 4096, 347.7),
    (1024, 1024, 256, 69.8), (1024, 1024, 512, 144.0), (1024, 1024, 1024, 252.8), (1024, 1024, 2048, 384.0),
    (1024, 1024, 4096, 494.4), (1024, 2048, 256, 116.1), (1024, 2048, 512, 235.5), (1024, 2048, 1024, 359.8),
    (1024, 2048, 2048, 529.5), (1024, 2048, 4096, 639.1), (1024, 4096, 256, 187.2), (1024, 4096, 512, 312.1),
    (1024, 4096, 1024, 472.6), (1024, 4096, 2048, 665.7), (1024, 4096, 4096, 751.9), (2048, 256, 256, 45.3),
    (2048, 256, 512, 84.3), (2048, 256, 1024, 145.6), (2048, 256, 2048, 219.7), (2048, 256, 4096, 303.3),
    (2048, 512, 256, 79.0), (2048, 512, 512, 150.1), (2048, 512, 1024, 244.9), (2048, 512, 2048, 348.6),
    (2048, 512, 4096, 449.3), (2048, 1024, 256, 142.8), (2048, 1024, 512, 257.6), (2048, 1024, 1024, 386.8),
    (2048, 1024, 2048, 498.0), (2048, 1024, 4096, 596.5), (2048, 2048, 256, 231.4), (2048, 2048, 512, 354.1),
    (2048, 2048, 1024, 535.3), (2048, 2048, 2048, 641.0), (2048, 2048, 4096, 725.5), (2048, 4096, 256, 333.9),
    (2048, 4096, 512, 458.1), (2048, 4096, 1024, 663.6), (2048, 4096, 2048, 752.2), (2048, 4096, 4096, 752.3),
    (4096, 256, 256, 84.5), (4096, 256, 512, 141.9), (4096, 256, 1024, 223.0), (4096, 256, 2048, 308.2),
    (4096, 256, 4096, 398.6), (4096, 512, 256, 144.9), (4096, 512, 512, 240.1), (4096, 512, 1024, 354.6),
    (4096, 512, 2048, 449.6), (4096, 512, 4096, 551.8), (4096, 1024, 256, 229.0), (4096, 1024, 512, 377.5),
    (4096, 1024, 1024, 497.6), (4096, 1024, 2048, 604.6), (4096, 1024, 4096, 685.2), (4096, 2048, 256, 314.3),
    (4096, 2048, 512, 531.0), (4096, 2048, 1024, 643.7), (4096, 2048, 2048, 727.5), (4096, 2048, 4096, 735.6),
    (4096, 4096, 256, 398.9), (4096, 4096, 512, 662.0), (4096, 4096, 1024, 751.7), (4096, 4096, 2048, 759.4),
    (4096, 4096, 4096, 780.2),
)  # fmt: skip

_XLA_SM100 = (
    (256, 256, 256, 6.8), (256, 256, 512, 13.4), (256, 256, 1024, 18.6), (256, 256, 2048, 46.1),
    (256, 256, 4096, 89.2), (256, 512, 256, 12.6), (256, 512, 512, 21.0), (256, 512, 1024, 39.1),
    (256, 512, 2048, 88.7), (256, 512, 4096, 163.3), (256, 1024, 256, 20.2), (256, 1024, 512, 33.2),
    (256, 1024, 1024, 81.2), (256, 1024, 2048, 156.8), (256, 1024, 4096, 292.3), (256, 2048, 256, 34.6),
    (256, 2048, 512, 69.0), (256, 2048, 1024, 136.7), (256, 2048, 2048, 266.8), (256, 2048, 4096, 464.4),
    (256, 4096, 256, 53.1), (256, 4096, 512, 104.7), (256, 4096, 1024, 205.9), (256, 4096, 2048, 394.1),
    (256, 4096, 4096, 651.4), (512, 256, 256, 13.6), (512, 256, 512, 23.5), (512, 256, 1024, 47.1),
    (512, 256, 2048, 90.9), (512, 256, 4096, 165.2), (512, 512, 256, 17.9), (512, 512, 512, 48.5),
    (512, 512, 1024, 89.5), (512, 512, 2048, 162.5), (512, 512, 4096, 291.7), (512, 1024, 256, 44.1),
    (512, 1024, 512, 80.3), (512, 1024, 1024, 157.2), (512, 1024, 2048, 289.3), (512, 1024, 4096, 492.4),
    (512, 2048, 256, 69.7), (512, 2048, 512, 135.3), (512, 2048, 1024, 263.1), (512, 2048, 2048, 471.6),
    (512, 2048, 4096, 761.3), (512, 4096, 256, 103.4), (512, 4096, 512, 204.9), (512, 4096, 1024, 396.4),
    (512, 4096, 2048, 669.3), (512, 4096, 4096, 990.5), (1024, 256, 256, 26.2), (1024, 256, 512, 42.5),
    (1024, 256, 1024, 90.4), (1024, 256, 2048, 166.9), (1024, 256, 4096, 274.4), (1024, 512, 256, 47.9),
    (1024, 512, 512, 88.3), (1024, 512, 1024, 164.1), (1024, 512, 2048, 293.7), (1024, 512, 4096, 467.6),
    (1024, 1024, 256, 77.3), (1024, 1024, 512, 152.8), (1024, 1024, 1024, 288.0), (1024, 1024, 2048, 492.5),
    (1024, 1024, 4096, 723.4), (1024, 2048, 256, 135.3), (1024, 2048, 512, 263.6), (1024, 2048, 1024, 468.5),
    (1024, 2048, 2048, 760.3), (1024, 2048, 4096, 981.3), (1024, 4096, 256, 204.3), (1024, 4096, 512, 394.1),
    (1024, 4096, 1024, 675.3), (1024, 4096, 2048, 1014.9), (1024, 4096, 4096, 1214.0), (2048, 256, 256, 41.0),
    (2048, 256, 512, 90.7), (2048, 256, 1024, 165.3), (2048, 256, 2048, 276.1), (2048, 256, 4096, 406.1),
    (2048, 512, 256, 86.5), (2048, 512, 512, 162.1), (2048, 512, 1024, 231.8), (2048, 512, 2048, 470.1),
    (2048, 512, 4096, 647.5), (2048, 1024, 256, 150.1), (2048, 1024, 512, 284.4), (2048, 1024, 1024, 496.1),
    (2048, 1024, 2048, 725.4), (2048, 1024, 4096, 911.4), (2048, 2048, 256, 261.1), (2048, 2048, 512, 466.0),
    (2048, 2048, 1024, 760.4), (2048, 2048, 2048, 985.8), (2048, 2048, 4096, 1172.8), (2048, 4096, 256, 397.1),
    (2048, 4096, 512, 666.9), (2048, 4096, 1024, 1017.7), (2048, 4096, 2048, 1208.5),
    (2048, 4096, 4096, 1342.5), (4096, 256, 256, 89.7), (4096, 256, 512, 161.7), (4096, 256, 1024, 271.1),
    (4096, 256, 2048, 403.6), (4096, 256, 4096, 514.7), (4096, 512, 256, 160.9), (4096, 512, 512, 287.9),
    (4096, 512, 1024, 465.2), (4096, 512, 2048, 652.3), (4096, 512, 4096, 805.3), (4096, 1024, 256, 283.7),
    (4096, 1024, 512, 490.6), (4096, 1024, 1024, 715.6), (4096, 1024, 2048, 913.8), (4096, 1024, 4096, 1075.6),
    (4096, 2048, 256, 458.8), (4096, 2048, 512, 762.4), (4096, 2048, 1024, 990.3), (4096, 2048, 2048, 1170.0),
    (4096, 2048, 4096, 1277.8), (4096, 4096, 256, 645.1), (4096, 4096, 512, 991.5), (4096, 4096, 1024, 1204.9),
    (4096, 4096, 2048, 1343.5), (4096, 4096, 4096, 1416.9),
)  # fmt: skip

#: XLA:GPU's measured table for B200, f8e4m3fn x f8e4m3fn -> bf16, batch 1: (m, k, n, TFLOP/s), rounded to 0.1
#: TFLOP/s. (The same file's sm_90 FP8 entries are left out: at 4096^3 they give 2424 TFLOP/s, above the H100's
#: 1979 TFLOP/s dense FP8 peak and 3.1x its own bf16 entry, which no FP8 tensor core can do.)
_XLA_SM100_FP8 = (
    (256, 256, 256, 6.9), (256, 256, 512, 12.4), (256, 256, 1024, 21.3), (256, 256, 2048, 41.7),
    (256, 256, 4096, 92.2), (256, 512, 256, 13.2), (256, 512, 512, 26.5), (256, 512, 1024, 50.7),
    (256, 512, 2048, 94.8), (256, 512, 4096, 157.9), (256, 1024, 256, 21.0), (256, 1024, 512, 48.8),
    (256, 1024, 1024, 81.2), (256, 1024, 2048, 148.4), (256, 1024, 4096, 311.4), (256, 2048, 256, 44.0),
    (256, 2048, 512, 84.7), (256, 2048, 1024, 162.4), (256, 2048, 2048, 309.2), (256, 2048, 4096, 566.2),
    (256, 4096, 256, 68.8), (256, 4096, 512, 135.3), (256, 4096, 1024, 260.6), (256, 4096, 2048, 488.9),
    (256, 4096, 4096, 930.5), (512, 256, 256, 12.9), (512, 256, 512, 26.2), (512, 256, 1024, 41.5),
    (512, 256, 2048, 93.5), (512, 256, 4096, 169.5), (512, 512, 256, 25.9), (512, 512, 512, 39.3),
    (512, 512, 1024, 91.7), (512, 512, 2048, 161.7), (512, 512, 4096, 329.0), (512, 1024, 256, 41.6),
    (512, 1024, 512, 81.6), (512, 1024, 1024, 154.3), (512, 1024, 2048, 312.1), (512, 1024, 4096, 584.7),
    (512, 2048, 256, 84.5), (512, 2048, 512, 151.5), (512, 2048, 1024, 300.9), (512, 2048, 2048, 579.6),
    (512, 2048, 4096, 972.4), (512, 4096, 256, 131.3), (512, 4096, 512, 265.7), (512, 4096, 1024, 477.6),
    (512, 4096, 2048, 920.8), (512, 4096, 4096, 1472.9), (1024, 256, 256, 21.9), (1024, 256, 512, 41.6),
    (1024, 256, 1024, 93.2), (1024, 256, 2048, 175.2), (1024, 256, 4096, 243.1), (1024, 512, 256, 51.3),
    (1024, 512, 512, 101.7), (1024, 512, 1024, 163.3), (1024, 512, 2048, 333.9), (1024, 512, 4096, 547.7),
    (1024, 1024, 256, 82.6), (1024, 1024, 512, 156.0), (1024, 1024, 1024, 333.0), (1024, 1024, 2048, 586.0),
    (1024, 1024, 4096, 863.1), (1024, 2048, 256, 131.3), (1024, 2048, 512, 304.3), (1024, 2048, 1024, 575.9),
    (1024, 2048, 2048, 979.5), (1024, 2048, 4096, 1431.7), (1024, 4096, 256, 250.4), (1024, 4096, 512, 487.1),
    (1024, 4096, 1024, 923.8), (1024, 4096, 2048, 1470.9), (1024, 4096, 4096, 1937.6), (2048, 256, 256, 52.1),
    (2048, 256, 512, 88.5), (2048, 256, 1024, 174.7), (2048, 256, 2048, 293.6), (2048, 256, 4096, 489.0),
    (2048, 512, 256, 89.7), (2048, 512, 512, 179.9), (2048, 512, 1024, 329.7), (2048, 512, 2048, 503.6),
    (2048, 512, 4096, 818.3), (2048, 1024, 256, 166.1), (2048, 1024, 512, 314.2), (2048, 1024, 1024, 504.5),
    (2048, 1024, 2048, 970.6), (2048, 1024, 4096, 1423.9), (2048, 2048, 256, 305.7), (2048, 2048, 512, 567.5),
    (2048, 2048, 1024, 985.1), (2048, 2048, 2048, 1427.7), (2048, 2048, 4096, 2035.2), (2048, 4096, 256, 502.7),
    (2048, 4096, 512, 856.0), (2048, 4096, 1024, 1484.7), (2048, 4096, 2048, 1955.8), (2048, 4096, 4096, 2491.3),
    (4096, 256, 256, 84.5), (4096, 256, 512, 169.4), (4096, 256, 1024, 225.6), (4096, 256, 2048, 487.1),
    (4096, 256, 4096, 666.9), (4096, 512, 256, 176.1), (4096, 512, 512, 322.6), (4096, 512, 1024, 538.9),
    (4096, 512, 2048, 871.3), (4096, 512, 4096, 1172.1), (4096, 1024, 256, 312.8), (4096, 1024, 512, 510.3),
    (4096, 1024, 1024, 850.8), (4096, 1024, 2048, 1332.2), (4096, 1024, 4096, 1895.4), (4096, 2048, 256, 471.8),
    (4096, 2048, 512, 979.5), (4096, 2048, 1024, 1462.6), (4096, 2048, 2048, 1833.5), (4096, 2048, 4096, 2485.0),
    (4096, 4096, 256, 861.8), (4096, 4096, 512, 1485.0), (4096, 4096, 1024, 1951.8), (4096, 4096, 2048, 2499.4),
    (4096, 4096, 4096, 2765.0),
)  # fmt: skip


def _build_sweeps() -> tuple[GemmMeasurement, ...]:
    out = [GemmMeasurement("tpu7x", s, s, s, "bf16", t * 1e12, "ironwood-readme", chip_share=0.5) for s, t in _IRONWOOD]
    out += [
        GemmMeasurement("v6e", m, k, n, "bf16", t * 1e12, "gpu-tpu-pedia", timing="host") for m, k, n, t in _V6E_HOST
    ]
    out.append(GemmMeasurement("v6e", 8192, 8192, 8192, "bf16", 727.70e12, "gpu-tpu-pedia"))
    for chip, table in (("h100", _XLA_SM90), ("b200", _XLA_SM100)):
        out += [GemmMeasurement(chip, m, k, n, "bf16", t * 1e12, "xla-perf-table") for m, k, n, t in table]
    # MAMF prints the shape MxNxK: (m, n, k) below are its columns in that order.
    for chip, m, n, k, t in (("a100", 1024, 10240, 5120, 271.2), ("h100", 2048, 2048, 13312, 794.5),
                             ("b200", 1792, 16128, 3072, 1745.0)):  # fmt: skip
        out.append(GemmMeasurement(chip, m, k, n, "bf16", t * 1e12, "mamf"))
    out += [GemmMeasurement("b200", m, k, n, "fp8", t * 1e12, "xla-perf-table-fp8") for m, k, n, t in _XLA_SM100_FP8]
    for chip, m, n, k, t in (("h100", 1024, 9216, 14336, 1402.6), ("b200", 15360, 4096, 3072, 3432.5)):
        out.append(GemmMeasurement(chip, m, k, n, "fp8", t * 1e12, "mamf-fp8"))
    return tuple(out)


#: Every published GEMM measurement this module is checked against (:data:`SWEEP_SOURCES` says where each is from).
#: No public sweep was found for TPU v5e, v5p or v4: those chips use their family's figures (:class:`GemmModel`).
GEMM_SWEEPS: tuple[GemmMeasurement, ...] = _build_sweeps()

# ------------------------------------------------------------------------------------------------ the model
_FAMILIES = ("tpu", "gpu")
_KEYS = _FAMILIES + tuple(CHIPS)


def _frozen_map(name: str, value, keys, low: float, high: float, open_low: bool) -> Mapping:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of names to numbers; got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or k not in keys:
            raise ValueError(f"{name} has an unknown key {k!r}; allowed: {', '.join(keys)}")
        bad_low = v <= low if open_low else v < low
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or bad_low or v > high:
            span = f"{'(' if open_low else '['}{low:g}, {high:g}]"
            raise ValueError(f"{name}[{k!r}] must be a number in {span}; got {v!r}")
    return MappingProxyType(dict(value))


def _check_shape(name: str, key: str, shape) -> None:
    if (
        not isinstance(shape, tuple)
        or len(shape) != 4
        or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape[:3])
        or isinstance(shape[3], bool)
        or not isinstance(shape[3], (int, float))
        or not 0 < shape[3] <= 1
    ):
        raise ValueError(f"{name}[{key!r}] must be (m, k, n, chip_share) with whole m, k, n >= 1 and a share in "
                         f"(0, 1]; got {shape!r}")  # fmt: skip


@dataclass(frozen=True)
class GemmModel:
    """The parameters of the GEMM model (see the module docstring); :data:`DEFAULT` is the book's, :data:`SOURCES`
    says where each comes from. Per-chip mappings take a chip name or a family ("tpu", "gpu") a chip without its
    own figure falls back to."""

    plateau: Mapping[str, float]  # fraction of bf16 peak the chip's sweep reaches at its best shape
    plateau_shape: Mapping[str, tuple]  # (m, k, n, chip_share) of that best shape, per key of plateau
    fixed: Mapping[str, float]  # seconds every call costs on the device (launch, pipeline fill and drain)
    exposed_bytes: Mapping[str, float]  # per family: share of the HBM time not hidden under a compute-bound call
    host_dispatch: Mapping[str, float] = field(default_factory=dict)  # per sweep source: seconds a host timer adds
    fp8_plateau: Mapping[str, float] = field(default_factory=dict)  # fraction of FP8 peak at the FP8 sweep's best
    fp8_plateau_shape: Mapping[str, tuple] = field(default_factory=dict)  # (m, k, n, chip_share), per fp8_plateau key
    gpu_tile: tuple = (128, 256)  # GPU output tile (CTA) rows × columns
    split_k_min: int = 256  # GPU: the smallest k one split-K slice gets
    row_tile: int = 8  # TPU: rows (m) are padded to groups of this (a sublane group)
    name: str = "custom"  # label for tables

    def __post_init__(self):
        object.__setattr__(self, "plateau", _frozen_map("plateau", self.plateau, _KEYS, 0.0, 1.0, True))
        object.__setattr__(self, "fp8_plateau", _frozen_map("fp8_plateau", self.fp8_plateau, _KEYS, 0.0, 1.0, True))
        for shapes, plateaus in (("plateau_shape", self.plateau), ("fp8_plateau_shape", self.fp8_plateau)):
            value = getattr(self, shapes)
            if not isinstance(value, Mapping):
                raise TypeError(f"{shapes} must be a mapping of names to (m, k, n, chip_share); got {value!r}")
            for key in plateaus:
                _check_shape(shapes, key, value.get(key))
            object.__setattr__(self, shapes, MappingProxyType(dict(value)))
        object.__setattr__(self, "fixed", _frozen_map("fixed", self.fixed, _KEYS, 0.0, 1e-3, False))
        object.__setattr__(
            self, "exposed_bytes", _frozen_map("exposed_bytes", self.exposed_bytes, _FAMILIES, 0.0, 1.0, False)
        )
        object.__setattr__(
            self,
            "host_dispatch",
            _frozen_map("host_dispatch", self.host_dispatch, tuple(SWEEP_SOURCES), 0.0, 1.0, False),
        )
        t = self.gpu_tile
        if (
            not isinstance(t, tuple)
            or len(t) != 2
            or any(isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 4096 for d in t)
        ):
            raise ValueError(f"gpu_tile must be (rows, columns), whole numbers in [1, 4096]; got {t!r}")
        for f in ("split_k_min", "row_tile"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 4096:
                raise ValueError(f"{f} must be a whole number in [1, 4096]; got {v!r}")
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string; got {type(self.name).__name__}")

    def with_(self, **changes) -> GemmModel:
        """A copy with some parameters changed (checked like the original)."""
        return replace(self, **changes)

    # -- per-chip figures -----------------------------------------------------------------------------------------
    def _key(self, table: Mapping, c: Chip, what: str) -> str:
        for key in (c.name, c.kind):
            if key in table:
                return key
        raise ValueError(f"the GEMM model {self.name!r} has no {what} for {c.long_name} or its family ({c.kind!r})")

    def _plateau_table(self, c: Chip, dtype: str) -> tuple[Mapping, Mapping, str]:
        """(plateaus, their shapes, key) a ``dtype`` GEMM on ``c`` is priced with: the FP8 sweep's for "fp8" where
        the chip or its family has one, else the bf16 sweep's (int8, and FP8 on a chip without an FP8 sweep)."""
        if dtype == "fp8":
            for key in (c.name, c.kind):
                if key in self.fp8_plateau:
                    return self.fp8_plateau, self.fp8_plateau_shape, key
        return self.plateau, self.plateau_shape, self._key(self.plateau, c, "plateau")

    def plateau_of(self, chip, dtype: str = "bf16") -> float:
        """The plateau fraction of ``chip``'s ``dtype`` peak (its own, else its family's; "fp8" uses the FP8
        sweep's plateau where there is one, else the bf16 one)."""
        c = _chip(chip)
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}; got {dtype!r}")
        table, _, key = self._plateau_table(c, dtype)
        return float(table[key])

    def fixed_of(self, chip) -> float:
        """Seconds every GEMM call costs on ``chip`` beyond its work (its own figure, else its family's)."""
        c = _chip(chip)
        return float(self.fixed[self._key(self.fixed, c, "fixed cost")])

    # -- the physics (unchecked: checked callers pass clean numbers) -------------------------------------------
    def _work_seconds(self, c: Chip, m: float, k: float, n: float, peak: float, share: float) -> float:
        """Seconds of the padded, wave-quantised work at the full ``peak`` (FLOP/s of the share ran on)."""
        if c.kind == "tpu":
            edge = c.mxu_size or 128
            units = max(1, round((c.cores_per_chip or 1) * share)) * (c.mxus_per_core or 1)
            groups = math.ceil(m / self.row_tile)
            rows = math.ceil(groups / units) * units * self.row_tile
            return 2.0 * rows * math.ceil(k / edge) * edge * math.ceil(n / edge) * edge / peak
        tm, tn = self.gpu_tile
        sms = max(1, round((c.sms or 1) * share))
        tiles = math.ceil(m / tm) * math.ceil(n / tn)
        split = 1
        if tiles < sms:
            split = max(1, min(sms // tiles, int(k // self.split_k_min)))
        waves = math.ceil(tiles * split / sms)
        return waves * 2.0 * tm * tn * math.ceil(k / split) / (peak / sms)

    def _parts(self, c: Chip, m, k, n, dtype: str, share: float) -> tuple[float, float, float]:
        """(work seconds at full peak, HBM seconds, fixed seconds) of one call on ``share`` of ``c``."""
        peak = c.peak_flops(dtype) * share
        b = DTYPE_BYTES[dtype]
        t_bytes = (b * (m * k + k * n) + 2.0 * m * n) / (c.hbm_bw * share)
        return self._work_seconds(c, m, k, n, peak, share), t_bytes, self.fixed_of(c)

    def rate(self, chip, dtype: str = "bf16") -> float:
        """The array's rate inside the kernel, a fraction of the ``dtype`` peak: the one that makes the model
        return exactly the plateau at the plateau's own shape (derived, not fitted)."""
        c = _chip(chip)
        if dtype not in DTYPE_BYTES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPE_BYTES)}; got {dtype!r}")
        table, shapes, key = self._plateau_table(c, dtype)
        if table is self.plateau:
            dtype = "bf16"  # priced at the bf16 plateau: the rate is the bf16 sweep's, a fraction of any peak
        m, k, n, share = shapes[key]
        if key in _FAMILIES:
            share = 1.0
        work, t_bytes, fixed = self._parts(c, m, k, n, dtype, share)
        t = 2.0 * m * k * n / (table[key] * c.peak_flops(dtype) * share)
        busy = t - fixed - self._exposed(c) * t_bytes
        if busy <= 0 or t_bytes >= t - fixed:
            raise ValueError(
                f"the GEMM model {self.name!r} cannot reach plateau {table[key]} at {m}x{k}x{n} on "
                f"{c.long_name}: the fixed cost and the bytes alone take longer"
            )
        return work / busy

    def _exposed(self, c: Chip) -> float:
        return float(self.exposed_bytes.get(c.kind, 0.0))

    def seconds(self, chip, m: float, k: float, n: float, dtype: str = "bf16", share: float = 1.0) -> float:
        """:func:`gemm_seconds` for dimensions already checked, on ``share`` of the chip."""
        c = _chip(chip)
        work, t_bytes, fixed = self._parts(c, m, k, n, dtype, share)
        t = fixed + max(work / self.rate(c, dtype) + self._exposed(c) * t_bytes, t_bytes)
        # No shape beats the plateau: the sweep's best is the most the chip was seen to reach.
        return max(t, 2.0 * m * k * n / (self.plateau_of(c, dtype) * c.peak_flops(dtype) * share))

    def fraction(self, chip, m: float, k: float, n: float, dtype: str = "bf16") -> float:
        """:func:`gemm_fraction` for dimensions already checked."""
        c = _chip(chip)
        return 2.0 * m * k * n / (self.seconds(c, m, k, n, dtype) * c.peak_flops(dtype))

    def shape_factor(self, chip, m: float, k: float, n: float) -> float:
        """:func:`shape_factor` for dimensions already checked (what ``EfficiencyModel.shape_factor`` may call)."""
        c = _chip(chip)
        return min(1.0, self.fraction(c, m, k, n) / self.plateau_of(c))

    def predict(self, record: GemmMeasurement) -> float:
        """The FLOP/s the model expects for a published measurement (its chip share, and the host's dispatch if
        the sweep was timed on the host)."""
        if not isinstance(record, GemmMeasurement):
            raise TypeError(f"record must be a GemmMeasurement; got {type(record).__name__}")
        t = self.seconds(record.chip, record.m, record.k, record.n, record.dtype, record.chip_share)
        if record.timing == "host":
            t += float(self.host_dispatch.get(record.source, 0.0))
        return record.flops / t


def _chip(chip) -> Chip:
    """``chip`` (a name, a Chip or a System) as a Chip; a TypeError or ValueError naming ``chip`` otherwise."""
    return get_chip(chip, "chip")


#: Where every parameter of :data:`DEFAULT` comes from.
SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "plateau[tpu7x]": "measured: 956.4 TFLOP/s per TensorCore at 32768^3 of 1150 (half the chip's 2300): 0.832 "
        "(ironwood-readme)",
        "plateau[v6e]": "measured: 727.7 TFLOP/s at 8192^3, profiler-timed, of 920: 0.791 (gpu-tpu-pedia)",
        "plateau[h100]": "measured: MAMF 794.5 of 989 TFLOP/s at M=2048, N=2048, K=13312: 0.803 (mamf)",
        "plateau[b200]": "measured: MAMF 1745 of 2250 TFLOP/s at M=1792, N=16128, K=3072: 0.776 (mamf)",
        "plateau[a100]": "measured: MAMF 271.2 of 312 TFLOP/s at M=1024, N=10240, K=5120: 0.869 (mamf); the only "
        "A100 point, so its check is no check",
        "plateau[tpu]": "TPUs without a sweep (v5e, v5p, v4, v3): the TPU7x plateau, at the same shape on the whole "
        "chip; no public v5e/v5p GEMM sweep was found",
        "plateau[gpu]": "GPUs without a sweep: the H100 plateau and shape",
        "fp8_plateau[h100]": "measured: MAMF FP8 (e4m3) 1402.6 of 1979 TFLOP/s at M=1024, N=9216, K=14336: 0.709 "
        "(mamf-fp8), against bf16's 0.803: an H100 FP8 GEMM runs 1.77x its bf16 twin, not 2x",
        "fp8_plateau[b200]": "measured: MAMF FP8 3432.5 of 4500 TFLOP/s at M=15360, N=4096, K=3072: 0.763 "
        "(mamf-fp8); XLA's B200 FP8 table (up to 4096^3, 2765 TFLOP/s) checks the shapes below it",
        "fp8_plateau[gpu]": "GPUs with an FP8 peak and no FP8 sweep of their own (H200, H800): the H100 figure",
        "fp8_plateau[tpu]": "none: a TPU, or a GPU family without one, prices FP8 at its bf16 plateau",
        "fixed[tpu]": "fitted with exposed_bytes[tpu] on the TPU7x sweep points >= 1024 (1024^3 ... 32768^3): 3.0 us "
        "(XLA's per-program launch and the MXU pipeline's fill, on the device)",
        "fixed[h100]": "fitted with exposed_bytes[gpu] on the H100 points >= 1024 of xla-perf-table and MAMF: 5.8 us",
        "fixed[b200]": "fitted with exposed_bytes[gpu] on the B200 points >= 1024 of xla-perf-table and MAMF: 6.4 us",
        "fixed[gpu]": "GPUs without a sweep of several sizes (A100): the H100 figure",
        "exposed_bytes[tpu]": "fitted on the TPU7x sweep with fixed[tpu]: 0.56 of the operand and output HBM time is "
        "not hidden under a compute-bound call",
        "exposed_bytes[gpu]": "fitted on the H100 and B200 points >= 1024 with their fixed costs: 0.21",
        "host_dispatch[gpu-tpu-pedia]": "fitted on the host-timed v6e points >= 1024: 92 us of Python and dispatch "
        "per call, outside the device (the same sweep's profiler-timed 8192^3 is 8% faster than its host-timed one)",
        "gpu_tile": "CUTLASS's default Hopper warp-specialised GEMM tile, 128 x 256 (x 64 in k); cuBLAS picks "
        "kernels of this class for large bf16 GEMMs",
        "split_k_min": "stated: cuBLAS and CUTLASS split k over idle SMs when the output has fewer tiles than SMs; "
        "a slice shorter than 256 is not worth its reduction",
        "row_tile": "a TPU vreg is 8 sublanes x 128 lanes: rows are processed in groups of 8",
    }
)

#: The book's GEMM model; :data:`SOURCES` gives each figure's origin.
DEFAULT = GemmModel(
    plateau={
        "tpu7x": 956.3824592 / 1150.0,
        "v6e": 727.70 / 920,
        "h100": 794.5 / 989,
        "b200": 1745 / 2250,
        "a100": 271.2 / 312,
        "tpu": 956.3824592 / 1150.0,
        "gpu": 794.5 / 989,
    },
    plateau_shape={
        "tpu7x": (32768, 32768, 32768, 0.5),
        "v6e": (8192, 8192, 8192, 1.0),
        "h100": (2048, 13312, 2048, 1.0),
        "b200": (1792, 3072, 16128, 1.0),
        "a100": (1024, 5120, 10240, 1.0),
        "tpu": (32768, 32768, 32768, 1.0),
        "gpu": (2048, 13312, 2048, 1.0),
    },
    fixed={"tpu": 3.0e-6, "h100": 5.8e-6, "b200": 6.4e-6, "gpu": 5.8e-6},
    exposed_bytes={"tpu": 0.56, "gpu": 0.21},
    host_dispatch={"gpu-tpu-pedia": 92e-6},
    fp8_plateau={"h100": 1402.6 / 1979, "b200": 3432.5 / 4500, "gpu": 1402.6 / 1979},
    fp8_plateau_shape={
        "h100": (1024, 14336, 9216, 1.0),
        "b200": (15360, 3072, 4096, 1.0),
        "gpu": (1024, 14336, 9216, 1.0),
    },
    name="default",
)


def check_model(model, argument: str = "model") -> GemmModel:
    """``model`` if it is a :class:`GemmModel` (None: :data:`DEFAULT`), else a TypeError naming ``argument``."""
    if model is None:
        return DEFAULT
    if not isinstance(model, GemmModel):
        raise TypeError(f"{argument} must be a tpu_notes.gemm.GemmModel (e.g. gemm.DEFAULT) or None; "
                        f"got {type(model).__name__}")  # fmt: skip
    return model


# ------------------------------------------------------------------------------------------------ public functions
_Dim = Annotated[float, Positive(maximum=2**40)]
_DType = Annotated[str, OneOf(tuple(DTYPE_BYTES))]


@checked
def gemm_seconds(chip, m: _Dim, k: _Dim, n: _Dim, dtype: _DType = "bf16", model: GemmModel | None = None) -> float:
    """Expected seconds of one ``[m, k] @ [k, n]`` GEMM in ``dtype`` on the whole of ``chip``: the fixed cost, then
    the padded, wave-quantised work at the kernel's rate plus the exposed share of the HBM time, or the HBM time
    alone when that is longer (the module docstring gives the formula)."""
    return check_model(model).seconds(_chip(chip), m, k, n, dtype)


@checked
def gemm_fraction(chip, m: _Dim, k: _Dim, n: _Dim, dtype: _DType = "bf16", model: GemmModel | None = None) -> float:
    """The fraction of ``chip``'s datasheet ``dtype`` peak a ``[m, k] @ [k, n]`` GEMM reaches: ``2mkn`` over
    :func:`gemm_seconds` and the peak."""
    return check_model(model).fraction(_chip(chip), m, k, n, dtype)


@checked
def shape_factor(chip, m: _Dim, k: _Dim, n: _Dim, model: GemmModel | None = None) -> float:
    """The share of the chip's plateau (its large-matmul rate) a bf16 ``[m, k] @ [k, n]`` GEMM keeps, in (0, 1]:
    :func:`gemm_fraction` over the plateau, capped at 1 (a shape a little better than the sweep's best)."""
    return check_model(model).shape_factor(_chip(chip), m, k, n)


@dataclass(frozen=True)
class GemmRow:
    """One published measurement beside the model's prediction."""

    record: GemmMeasurement  # the measurement
    measured: float  # FLOP/s, as published
    predicted: float  # FLOP/s the model expects
    error: float  # predicted / measured - 1

    @property
    def chip(self) -> str:
        """The measurement's chip."""
        return self.record.chip


def gemm_report(model: GemmModel | None = None, records=None) -> list[GemmRow]:
    """Every measurement of ``records`` (default :data:`GEMM_SWEEPS`) with the model's prediction and its error."""
    mdl = check_model(model)
    recs = GEMM_SWEEPS if records is None else records
    if isinstance(recs, (str, bytes)) or not hasattr(recs, "__iter__"):
        raise TypeError(f"records must be a sequence of GemmMeasurement; got {type(recs).__name__}")
    out = []
    for r in recs:
        if not isinstance(r, GemmMeasurement):
            raise TypeError(f"records must hold GemmMeasurement values; got {type(r).__name__}")
        p = mdl.predict(r)
        out.append(GemmRow(r, r.flops_per_s, p, p / r.flops_per_s - 1.0))
    return out


def error_summary(rows, min_size: int = 1024) -> dict[str, tuple[int, float, float]]:
    """Per chip, over the rows whose smallest dimension is at least ``min_size``: (count, median absolute error,
    worst absolute error)."""
    if isinstance(min_size, bool) or not isinstance(min_size, int) or min_size < 1:
        raise ValueError(f"min_size must be a whole number >= 1; got {min_size!r}")
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of GemmRow (from gemm_report); got {type(rows).__name__}")
    by: dict[str, list[float]] = {}
    for r in rows:
        if not isinstance(r, GemmRow):
            raise TypeError(f"rows must hold GemmRow values (from gemm_report); got {type(r).__name__}")
        if r.record.size >= min_size:
            by.setdefault(r.chip, []).append(abs(r.error))
    out = {}
    for chip, errs in by.items():
        s = sorted(errs)
        mid = len(s) // 2
        med = s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2
        out[chip] = (len(s), med, s[-1])
    return out


def format_gemm_report(rows) -> str:
    """The rows of :func:`gemm_report` as a text table (chip, m, k, n, measured, predicted, error, source)."""
    if isinstance(rows, (str, bytes)) or not hasattr(rows, "__iter__"):
        raise TypeError(f"rows must be a list of GemmRow (from gemm_report); got {type(rows).__name__}")
    lines = [f"{'chip':<7}{'m':>7}{'k':>7}{'n':>7}  {'measured':>14}{'predicted':>14}{'error':>8}  source"]
    for r in rows:
        if not isinstance(r, GemmRow):
            raise TypeError(f"rows must hold GemmRow values (from gemm_report); got {type(r).__name__}")
        d = r.record
        lines.append(
            f"{d.chip:<7}{d.m:>7}{d.k:>7}{d.n:>7}  {fmt(r.measured, 'FLOP/s'):>14}{fmt(r.predicted, 'FLOP/s'):>14}"
            f"{r.error:>+8.1%}  {d.source}{' (host-timed)' if d.timing == 'host' else ''}"
        )
    return "\n".join(lines)


__all__ = [
    "DEFAULT",
    "DTYPE_BYTES",
    "GEMM_SWEEPS",
    "SOURCES",
    "SWEEP_SOURCES",
    "TIMINGS",
    "GemmMeasurement",
    "GemmModel",
    "GemmRow",
    "check_model",
    "error_summary",
    "format_gemm_report",
    "gemm_fraction",
    "gemm_report",
    "gemm_seconds",
    "shape_factor",
]
