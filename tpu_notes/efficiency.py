"""The efficiency model: what fraction of each datasheet rate a real program reaches, stated in one place.

The chapters teach the **roofline**: matmuls at the chip's peak, bytes at the HBM bandwidth, collectives at the
links' datasheet bandwidth, everything that can overlap hidden. It is an upper bound on speed, and Chapters 6 and 8
keep it. A reader who asks "how long will my run take" needs the **expected** time beside it, and this module holds
every figure that turns one into the other. There are no per-run knobs: an :class:`EfficiencyModel` is a handful of
global parameters, each with its source (a published microbenchmark, a vendor's achieved number) or, for the few
no public measurement gives, a fit on a stated group of published runs (:data:`SOURCES` says which is which).

What the expected time adds to the roofline (:mod:`tpu_notes.training.expected` and
:func:`tpu_notes.inference.expected_decode_step` use these functions):

- **Matmuls** run at the large-matmul figure of the chip (``matmul``) times a shape factor. The training step and
  :func:`matmul_seconds` take it from the GEMM tile model (:mod:`tpu_notes.gemm`: padding to the MXU or
  tensor-core tile, waves over the cores, a fixed cost per call, the operands' bytes; 1 at the shape its plateau
  was measured at, checked against published GEMM sweeps). The serving engine still uses the older
  :func:`shape_factor` here (``Π d / (d + knee)`` over the weight's two dimensions times their tile
  quantisation ``d / (⌈d / tile⌉ · tile)``, rows padded to :data:`ROW_TILE`).
- **Attention** (the score and value matmuls of a fused, flash-style kernel) runs at ``attention`` of peak, in
  bf16 even in an FP8 run.
- **Memory-bound work** (norms, residual adds, rotary, the MLP activation, casts, the softmax over the vocabulary,
  the optimizer update) moves its bytes (:func:`layer_elementwise_bytes`, :func:`optimizer_bytes`,
  :func:`logits_bytes`) at ``hbm`` of the HBM bandwidth; it does not overlap the matmuls.
- **Collectives** reach ``links[link]`` of each interconnect's datasheet bandwidth (ICI, DCN, NVLink,
  InfiniBand), and each call pays ``collective_latency[link]`` seconds.
- **Overlap**: ``exposed[kind]`` of each parallelism kind's communication sits on the critical path (tensor and
  expert parallel collectives wait for the matmul that needs them); the rest hides under compute as far as compute
  lasts. FSDP and data-parallel gradient traffic have one layer exposed (the first gather, the last bucket),
  which the step model adds from the layer count.
- **Sustained rates**: a whole step keeps ``sustained`` of those compute rates (the GPU microbenchmarks run one
  matmul alone, at its clocks and with every SM).
- **Per step**, a fixed ``step_overhead`` (host dispatch, the optimizer's launch, the loss), and in serving a
  ``decode_overhead`` per layer of a generation step (the kernels that are not weight reads: they cannot start
  before the previous one).

Bad parameters are refused when the model is built: every fraction must lie in (0, 1], every time be finite and
at least 0, and a chip with no matmul figure (neither its own nor its family's) is refused by name when asked.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Annotated

from .hardware import CHIPS, Chip, get_chip
from .transformer import Model
from .units import Bool, OneOf, Positive, SeqLen, checked

#: The interconnects the model has an achieved fraction for.
LINKS = ("ici", "dcn", "nvlink", "ib", "pcie")
#: The parallelism kinds whose exposed fraction the model states.
EXPOSED_KINDS = ("tensor", "expert", "context", "pipeline", "fsdp", "data", "dcn")
#: Keys of the per-chip mappings: a family ("tpu", "gpu") or a chip name of tpu_notes.hardware.CHIPS.
_CHIP_KEYS = ("tpu", "gpu") + tuple(CHIPS)
_EXPOSED_KEYS = EXPOSED_KINDS + tuple(f"{fam}:{k}" for fam in ("tpu", "gpu") for k in EXPOSED_KINDS)
#: Attention kernels: "flash" (fused, scores never leave the chip's fast memory) or "materialized" (the scores
#: are written to HBM and read back: what Megatron-LM did before FlashAttention).
ATTENTION_KERNELS = ("flash", "materialized")


def _frozen(d: Mapping) -> Mapping:
    return MappingProxyType(dict(d))


def _check_fraction_map(name: str, value, keys=None, zero: bool = False) -> Mapping:
    span = "[0, 1]" if zero else "(0, 1]"
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of names to fractions in {span}; got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or (keys is not None and k not in keys):
            raise ValueError(f"{name} has an unknown key {k!r}; allowed: {', '.join(keys or ('chip names',))}")
        low_ok = v >= 0.0 if zero else v > 0.0
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (low_ok and v <= 1.0):
            raise ValueError(f"{name}[{k!r}] must be a fraction in {span}; got {v!r}")
    return _frozen(value)


def _check_time_map(name: str, value, keys) -> Mapping:
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a mapping of names to seconds; got {type(value).__name__}")
    for k, v in value.items():
        if k not in keys:
            raise ValueError(f"{name} has an unknown key {k!r}; allowed: {', '.join(keys)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
            raise ValueError(f"{name}[{k!r}] must be seconds in [0, 1); got {v!r}")
    return _frozen(value)


@dataclass(frozen=True)
class EfficiencyModel:
    """The global parameters of the expected-time model (see the module docstring); :data:`DEFAULT` is the one the
    book uses, :data:`SOURCES` says where each figure comes from. Keys ``"tpu"`` and ``"gpu"`` of the per-chip
    mappings are the family figures a chip without its own falls back to."""

    matmul: Mapping[str, float]  # large bf16 matmul, fraction of peak: chip name or family ("tpu", "gpu")
    matmul_knee: Mapping[str, float]  # per family: the dimension (elements) at which one axis halves efficiency
    attention: Mapping[str, float]  # flash attention (fwd + bwd), fraction of bf16 peak: chip name or family
    hbm: float  # fraction of the HBM bandwidth streaming, memory-bound work reaches
    links: Mapping[str, float]  # fraction of each interconnect's datasheet bandwidth a large collective reaches
    collective_latency: Mapping[str, float]  # seconds one collective call costs on each link, whatever its size
    exposed: Mapping[
        str, float
    ]  # fraction of each kind's communication on the critical path ("gpu:tensor": a family's)
    sustained: Mapping[str, float] = field(default_factory=dict)  # share of the compute rates a whole step keeps
    collective_matmul: tuple = ()  # families whose compiler decomposes tensor-parallel matmuls ("tpu"): 1/t exposed
    slice_jitter: float = 0.0  # coefficient of variation of one slice's step time: n slices over DCN wait for the
    # slowest, E[max of n] = jitter × the expected maximum of n standard normals, times the step
    step_overhead: float = 0.0  # seconds added to every training step (host dispatch, optimizer launch)
    decode_overhead: float = 0.0  # seconds per layer of one generation step that are neither reads nor FLOPs
    name: str = "custom"  # label for tables

    def __post_init__(self):
        object.__setattr__(self, "matmul", _check_fraction_map("matmul", self.matmul, _CHIP_KEYS))
        if not isinstance(self.matmul_knee, Mapping):
            raise TypeError(f"matmul_knee must be a mapping of families to elements; got {self.matmul_knee!r}")
        object.__setattr__(self, "matmul_knee", _frozen(self.matmul_knee))
        for k, v in self.matmul_knee.items():
            if k not in ("tpu", "gpu"):
                raise ValueError(f"matmul_knee has an unknown key {k!r}; allowed: tpu, gpu")
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1e6:
                raise ValueError(f"matmul_knee[{k!r}] must be elements in [0, 1e6); got {v!r}")
        object.__setattr__(self, "attention", _check_fraction_map("attention", self.attention, _CHIP_KEYS))
        if isinstance(self.hbm, bool) or not isinstance(self.hbm, (int, float)) or not 0.0 < self.hbm <= 1.0:
            raise ValueError(f"hbm must be a fraction in (0, 1] (of the HBM bandwidth); got {self.hbm!r}")
        object.__setattr__(self, "links", _check_fraction_map("links", self.links, LINKS))
        object.__setattr__(self, "sustained", _check_fraction_map("sustained", self.sustained, _CHIP_KEYS))
        object.__setattr__(
            self, "collective_latency", _check_time_map("collective_latency", self.collective_latency, LINKS)
        )
        object.__setattr__(self, "exposed", _check_fraction_map("exposed", self.exposed, _EXPOSED_KEYS, zero=True))
        if not isinstance(self.collective_matmul, tuple) or not all(
            f in ("tpu", "gpu") for f in self.collective_matmul
        ):
            raise ValueError(
                f"collective_matmul must be a tuple of families ('tpu', 'gpu'); got {self.collective_matmul!r}"
            )
        v = self.slice_jitter
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
            raise ValueError(f"slice_jitter must be a fraction in [0, 1) (of the step); got {v!r}")
        for f in ("step_overhead", "decode_overhead"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v < 1.0:
                raise ValueError(f"{f} must be seconds in [0, 1); got {v!r}")
        if not isinstance(self.name, str):
            raise TypeError(f"name must be a string; got {type(self.name).__name__}")

    def with_(self, **changes) -> EfficiencyModel:
        """A copy with some parameters changed (checked like the original), e.g. ``DEFAULT.with_(hbm=0.8)``."""
        return replace(self, **changes)

    # -- the figures, per chip --------------------------------------------------------------------------------
    def _chip_figure(self, field: str, chip, name_key: bool = True) -> float:
        """``chip``'s figure in the table ``field`` ("matmul", "attention", "sustained"): its own, else its
        family's; the error for a missing one names the chip's key too when ``name_key``."""
        c = _chip(chip)
        table = getattr(self, field)
        for key in (c.name, c.kind):
            if key in table:
                return float(table[key])
        key_note = f" (key {c.name!r})" if name_key else ""
        raise ValueError(
            f"the efficiency model {self.name!r} has no {field} figure for {c.long_name}{key_note} or its "
            f"family ({c.kind!r}): add one to EfficiencyModel.{field}"
        )

    def large_matmul(self, chip) -> float:
        """The fraction of peak a large bf16 matmul reaches on ``chip`` (its own figure, else its family's)."""
        return self._chip_figure("matmul", chip)

    def attention_fraction(self, chip) -> float:
        """The fraction of bf16 peak flash attention (forward and backward) reaches on ``chip`` (its own figure,
        else its family's)."""
        return self._chip_figure("attention", chip)

    def sustained_fraction(self, chip) -> float:
        """The share of the matmul and attention rates a whole compute-bound step sustains on ``chip`` (its own
        figure, else its family's): 1 for a family the microbenchmarks already describe."""
        return self._chip_figure("sustained", chip, name_key=False)

    def link(self, link: str) -> float:
        """The achieved fraction of ``link``'s datasheet bandwidth ("ici", "dcn", "nvlink", "ib", "pcie")."""
        if link not in LINKS:
            raise ValueError(f"link must be one of {', '.join(LINKS)}; got {link!r}")
        if link not in self.links:
            raise ValueError(f"the efficiency model {self.name!r} has no achieved-bandwidth figure for {link!r}")
        return float(self.links[link])

    def latency(self, link: str) -> float:
        """Seconds one collective call costs on ``link`` beyond its bytes (0 when the model states none)."""
        if link not in LINKS:
            raise ValueError(f"link must be one of {', '.join(LINKS)}; got {link!r}")
        return float(self.collective_latency.get(link, 0.0))

    def exposed_fraction(self, kind: str, chip=None) -> float:
        """The fraction of parallelism ``kind``'s communication that sits on the critical path (on ``chip``'s
        family, when the model states a family's own figure, e.g. ``"gpu:tensor"``)."""
        if kind not in EXPOSED_KINDS:
            raise ValueError(f"kind must be one of {', '.join(EXPOSED_KINDS)}; got {kind!r}")
        if chip is not None and f"{_chip(chip).kind}:{kind}" in self.exposed:
            return float(self.exposed[f"{_chip(chip).kind}:{kind}"])
        if kind not in self.exposed:
            raise ValueError(f"the efficiency model {self.name!r} has no exposed fraction for {kind!r}")
        return float(self.exposed[kind])

    # -- matmul shapes (unchecked: the library's inner loops call these; the module functions check) -----------
    def shape_factor(self, chip: Chip, m: float, k: float, n: float) -> float:
        """:func:`shape_factor` for a resolved :class:`~tpu_notes.hardware.Chip` and dimensions already checked."""
        if not isinstance(chip, Chip):
            raise TypeError(f"chip must be a tpu_notes.hardware.Chip; got {type(chip).__name__}")
        knee = float(self.matmul_knee.get(chip.kind, 0.0))
        tile = _tile(chip)
        out = m / (math.ceil(m / ROW_TILE) * ROW_TILE) if m >= 1 else 1.0
        for d in (k, n):
            out *= d / (d + knee) if knee else 1.0
            if d >= 1:
                out *= d / (math.ceil(d / tile) * tile)
        return out

    def fraction(self, chip: Chip, m: float, k: float, n: float) -> float:
        """:func:`matmul_fraction` for a resolved Chip: the large-matmul figure times :meth:`shape_factor`."""
        return self.large_matmul(chip) * self.shape_factor(chip, m, k, n)


def _chip(chip) -> Chip:
    """``chip`` (a name, a Chip or a System) as a Chip; a TypeError or ValueError naming ``chip`` otherwise."""
    return get_chip(chip, "chip")


#: Rows (the ``m`` dimension) a matmul is padded to: 8 (a TPU sublane group, a GPU mma fragment). A matmul of few
#: rows (a decode step's batch) is weight-streaming, not array-filling: its time is the weights' bytes.
ROW_TILE = 8


def _tile(c: Chip) -> int:
    """The tile a matmul dimension is padded to: the MXU edge on a TPU, 128 on a GPU (a tensor-core CTA tile)."""
    return c.mxu_size or 128


#: Where every parameter of :data:`DEFAULT` comes from. "fitted" figures name the group of published runs they were
#: fitted on (``tpu_notes.runs.GROUPS``) and the fit; the rest are sourced.
SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "attention[h200]": "as H100 (the same die): 0.35",
        "attention[h800]": "as H100 (the same die): 0.35",
        "matmul[a100]": "measured maximum achievable bf16 matmul (MAMF finder), A100 SXM: 271 of 312 TFLOP/s "
        "(shared/facts/models.md)",
        "matmul[h100]": "MAMF, H100 SXM: 794.5 of 989 TFLOP/s (shared/facts/models.md); also used for H200 and "
        "H800 (the same die and clocks)",
        "matmul[b200]": "MAMF, B200: 1745 of 2250 TFLOP/s (shared/facts/models.md)",
        "matmul[gpu]": "GPUs without a measurement of their own: the H100 figure",
        "matmul[tpu]": "fitted: the median over the 'maxtext-synthetic' group of measured / expected throughput "
        "with every other parameter as stated (tpu_notes.validation.FITS; benchmarks/efficiency.py prints it); "
        "no public TPU matmul microbenchmark states one",
        "matmul[v6e]": "fitted: the median over the TPU v6e training runs (all in 'maxtext-recipes') of measured / "
        "expected throughput; no public v6e matmul microbenchmark, and the v4/v5 figure leaves every v6e run "
        "slower than expected (benchmarks/efficiency.py prints the fit and its leave-one-group-out check)",
        "matmul_knee": "stated, for the serving engine's shape factor only (the training step and matmul_seconds use "
        "tpu_notes.gemm): a dimension of 128 elements halves its share of the large-matmul rate, 1024 keeps 89%",
        "attention[a100]": "FlashAttention-2 reaches 50-73% of A100 peak forward and somewhat less backward (Dao "
        "2023, arXiv 2307.08691): 0.55 over forward and backward",
        "attention[h100]": "FlashAttention-2, the kernel behind PyTorch SDPA and most 2024 H100 runs, reaches 'only "
        "35% utilization on the H100' (FlashAttention-3 paper, Shah et al. 2024, arXiv 2407.08608, abstract): 0.35; "
        "FlashAttention-3 reaches 75% forward, which a run using it would state",
        "attention[gpu]": "other GPUs: the H100 figure (the same FlashAttention-2 kernels)",
        "attention[tpu]": "stated: TPU splash / flash attention has no public utilisation figure; the A100 figure, "
        "0.55 (a fused kernel on a systolic array, no warp specialisation needed)",
        "hbm": "Azure measured 92% of the datasheet HBM bandwidth on GB200 (shared/facts, Chapter 8); STREAM-like "
        "kernels on H100 reach about 90%: 0.9",
        "links[ici]": "v5e 4x4, AllGather of 34 MB over a 4-chip line: 560 us by the ring model, 680 us measured "
        "(shared/facts/models.md): 0.82",
        "links[nvlink]": "8xH200 NVLink all-reduce bus bandwidth peaks near 482 GB/s with in-switch reduction "
        "(shared/facts/models.md); the ring collectives priced here reach about 80% of the one-way NVLink rate",
        "links[ib]": "stated: 0.8 of the NIC's line rate (nccl-tests bus bandwidth across nodes on 400 Gb/s NDR "
        "reaches about 40 of 50 GB/s per GPU)",
        "links[dcn]": "stated: 0.5 of the per-chip DCN share (hosts share NICs with input and checkpoint traffic; "
        "no public per-chip achieved figure)",
        "links[pcie]": "stated: 0.8 of the PCIe one-way rate",
        "collective_latency[ici]": "the same v5e measurement: a 32 kB shard takes about 8 us where the hop model "
        "says 3 us: 5 us per call beyond the hops",
        "collective_latency[nvlink]": "stated: 10 us per NCCL call on one NVLink node (small-message all-reduce "
        "latency of nccl-tests on 8 GPUs is of that order)",
        "collective_latency[ib]": "stated: 20 us per NCCL call across nodes",
        "collective_latency[pcie]": "stated: 10 us per call over PCIe, as over NVLink",
        "collective_latency[dcn]": "stated: 100 us per call over the data-centre network",
        "exposed[tensor]": "tensor-parallel activation reductions feed the next matmul (Megatron-LM, Shoeybi 2019: "
        "two all-reduces per layer forward, two backward, on the critical path): 1",
        "exposed[expert]": "the dispatch and combine all-to-alls wait for this layer's routing: 1",
        "exposed[context]": "ring attention passes the next key/value chunk while the current one's attention runs "
        "(Liu, Zaharia, Abbeel 2023, 'Ring Attention with Blockwise Transformers', arXiv 2310.01889): 0, hidden as "
        "far as compute lasts; a framework that all-gathers the keys and values instead (MaxText: "
        "Framework.context_exchange) leaves all of it exposed (tpu_notes.training.expected)",
        "collective_matmul": "families whose compiler decomposes a tensor-sharded matmul and its all-gather or "
        "reduce-scatter into tensor-many overlapped steps (XLA on TPU: Wang et al., ASPLOS 2023, 'Overlap "
        "Communication with Dependent Computation via Decomposition'): the first of the t chunks cannot overlap, "
        "so 1/t of the tensor traffic is exposed: tpu. A GPU run states it (step_time's async_tensor: torchtitan's "
        "async TP)",
        "slice_jitter": "fitted: the coefficient of variation of one slice's step time that reproduces the per-chip "
        "loss of MaxText's v4 multi-slice series (22B on 1 to 8 x v4-128) as the expected maximum of n slices "
        "(tpu_notes.validation.FITS); the v5e series (1 to 32 x v5e-256) is held out and checks it",
        "exposed[pipeline]": "a stage's send is waited for by the next stage: 1",
        "exposed[fsdp]": "prefetched behind the previous layer (XLA, PyTorch FSDP); the first gather and last "
        "reduce-scatter of each microbatch are added by the step model from the layer count: 0",
        "exposed[data]": "bucketed behind the backward pass; the last bucket is added from the layer count: 0",
        "exposed[dcn]": "as data parallelism: 0, plus the last layer's share",
        "sustained[tpu]": "1: the TPU matmul figures are fitted on whole training steps already",
        "sustained[gpu]": "fitted: the median over the 'megatron' group (Megatron-LM, Megatron-Core / NeMo, Llama 3) "
        "of measured / expected throughput; what a whole step keeps of the matmul-only microbenchmark (clocks under a "
        "step's full power draw, SMs lent to NCCL while it overlaps: DeepSeek-V3 gives 20 of 132 to communication)",
        "step_overhead": "stated: 0 (the runs' steps are seconds long; a figure would be per framework)",
        "decode_overhead": "fitted: the per-layer time that makes the median measured / expected speed 1 over the "
        "'gpu-serving' rows measured at batch 1 (latency: gpt-fast, NIM), what the reads and FLOPs leave unexplained "
        "(tpu_notes.validation.FITS; benchmarks/efficiency.py prints it)",
    }
)

#: The expected training step's out-of-sample error per platform family, a fraction: the median over the family's
#: training groups of each group's median |error| when the fitted parameters are refitted without that group
#: (:func:`tpu_notes.validation.leave_one_group_out`; TPU: maxtext-synthetic and maxtext-recipes, GPU: megatron and
#: torchtitan). tests/test_planner.py recomputes it. The planner calls layouts this close to the fastest one tier.
OUT_OF_SAMPLE_ERROR = {"tpu": 0.224, "gpu": 0.203}

#: The model the book uses (its figures and their sources: :data:`SOURCES`).
DEFAULT = EfficiencyModel(
    matmul={
        "a100": 271 / 312,
        "h100": 794.5 / 989,
        "h200": 794.5 / 989,
        "h800": 794.5 / 989,
        "b200": 1745 / 2250,
        "gpu": 794.5 / 989,
        "tpu": 0.884,
        "v6e": 0.611,
    },
    matmul_knee={"tpu": 128.0, "gpu": 128.0},
    attention={"a100": 0.55, "h100": 0.35, "h200": 0.35, "h800": 0.35, "gpu": 0.35, "tpu": 0.55},
    hbm=0.9,
    links={"ici": 0.82, "nvlink": 0.8, "ib": 0.8, "dcn": 0.5, "pcie": 0.8},
    collective_latency={"ici": 5e-6, "nvlink": 10e-6, "ib": 20e-6, "dcn": 100e-6, "pcie": 10e-6},
    exposed={
        "tensor": 1.0,
        "expert": 1.0,
        "context": 0.0,
        "pipeline": 1.0,
        "fsdp": 0.0,
        "data": 0.0,
        "dcn": 0.0,
    },
    sustained={"tpu": 1.0, "gpu": 0.74},
    collective_matmul=("tpu",),
    slice_jitter=0.0454,
    step_overhead=0.0,
    decode_overhead=73e-6,
    name="default",
)


def check_efficiency(efficiency, argument: str = "efficiency") -> EfficiencyModel:
    """``efficiency`` if it is an :class:`EfficiencyModel` (None: :data:`DEFAULT`), else a TypeError naming
    ``argument``."""
    if efficiency is None:
        return DEFAULT
    if not isinstance(efficiency, EfficiencyModel):
        raise TypeError(
            f"{argument} must be a tpu_notes.efficiency.EfficiencyModel (e.g. efficiency.DEFAULT) or None; "
            f"got {type(efficiency).__name__}"
        )
    return efficiency


# ------------------------------------------------------------------------------------------------ matmuls
_Dim = Annotated[float, Positive(maximum=2**40)]


@checked
def shape_factor(chip, m: _Dim, k: _Dim, n: _Dim, efficiency: EfficiencyModel | None = None) -> float:
    """The share of the large-matmul rate a matmul of ``[m, k] @ [k, n]`` keeps on ``chip``, in (0, 1]: over the
    weight's two dimensions ``k`` and ``n``, ``d / (d + knee)`` times the tile quantisation ``d / (⌈d / tile⌉ ·
    tile)`` (the MXU edge on a TPU, 128 on a GPU); the rows ``m`` are padded to :data:`ROW_TILE`."""
    return check_efficiency(efficiency).shape_factor(_chip(chip), m, k, n)


@checked
def matmul_fraction(chip, m: _Dim, k: _Dim, n: _Dim, efficiency: EfficiencyModel | None = None) -> float:
    """The fraction of ``chip``'s peak a ``[m, k] @ [k, n]`` matmul reaches: the large-matmul figure times
    :func:`shape_factor`."""
    return check_efficiency(efficiency).fraction(_chip(chip), m, k, n)


@checked
def matmul_seconds(
    chip,
    m: _Dim,
    k: _Dim,
    n: _Dim,
    dtype: Annotated[str, OneOf(("bf16", "fp8", "int8"))] = "bf16",
    efficiency: EfficiencyModel | None = None,
) -> float:
    """Expected seconds of one ``[m, k] @ [k, n]`` matmul in ``dtype`` on ``chip``: ``2mkn`` FLOPs at the
    large-matmul fraction times the GEMM tile model's shape factor (:func:`tpu_notes.gemm.shape_factor`, 1 at the
    shape its plateau was measured at) of the dtype's peak, or the operands' bytes at the achieved HBM rate if
    longer. At the MAMF finder's best H100 shape this is MAMF's 794.5 TFLOP/s."""
    from . import gemm

    e = check_efficiency(efficiency)
    c = _chip(chip)
    b = {"bf16": 2.0, "fp8": 1.0, "int8": 1.0}[dtype]
    shape = gemm.DEFAULT.shape_factor(c, m, k, n)
    flops_t = 2.0 * m * k * n / (c.peak_flops(dtype) * e.large_matmul(c) * shape)
    bytes_t = b * (m * k + k * n + m * n) / (c.hbm_bw * e.hbm)
    return max(flops_t, bytes_t)


@functools.lru_cache(maxsize=256)
def _expected_max_normal(n: int) -> float:
    """E[max of n independent standard normals] by the midpoint rule on [-9, 9] (error below 1e-9)."""
    if n == 1:
        return 0.0
    steps, lo, hi = 6000, -9.0, 9.0
    h = (hi - lo) / steps
    total = 0.0
    for i in range(steps):
        x = lo + (i + 0.5) * h
        cdf = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
        total += x * n * pdf * cdf ** (n - 1)
    return total * h


@checked
def expected_max_normal(n: Annotated[int, Positive(maximum=2**20)]) -> float:
    """The expected maximum of ``n`` independent standard normal variables (0 for one; 0.564 for two; 2.07 for
    32): how many standard deviations the slowest of ``n`` equally jittery slices lags the mean. ``n`` is a count."""
    if isinstance(n, bool) or int(n) != n:
        raise TypeError(f"n must be a whole number of slices; got {n!r}")
    return _expected_max_normal(int(n))


# ------------------------------------------------------------------------------------------------ bytes
@checked
def layer_elementwise_bytes(
    model: Model,
    seq_len: SeqLen,
    *,
    attention: Annotated[str, OneOf(ATTENTION_KERNELS)] = "flash",
    fp8: Bool = False,
) -> float:
    """Bytes of HBM traffic of the memory-bound (non-matmul) work of one layer's **forward** pass, per token.

    Each op reads its inputs and writes its output once, in bf16 (2 bytes): two RMSNorms (``4D``), two residual
    adds (``6D``), rotary embedding of queries and keys (``2(N + K)H``), the MLP activation (``3F`` gated, ``2F``
    not), a mixture of experts' token permutation in and out (``4kD``). ``attention="materialized"`` adds the
    score matrix written, softmaxed and read back (``4·N·S/2`` elements per token, causal). ``fp8=True`` adds the
    casts of the projection inputs to FP8 (read 2 bytes, write 1, for ``2D + N·H + F`` elements). The backward
    pass moves about twice this, and a rematerialised forward once more: the step model multiplies.
    """
    c = model
    D, F, N, K, H = c.d_model, (c.d_ff_expert or c.d_ff) if c.is_moe else c.d_ff, c.n_heads, c.n_kv_heads, c.d_head
    k = c.experts_per_token + c.n_shared_experts if c.is_moe else 1
    elements = 4 * D + 6 * D + 2 * (N + K) * H + (3 if c.gated_mlp else 2) * F * k
    if c.is_moe:
        elements += 4 * c.experts_per_token * D
    if attention == "materialized":
        elements += 4 * N * seq_len / 2
    out = 2.0 * elements
    if fp8:
        out += 3.0 * (2 * D + N * H + F * k)
    return float(out)


@checked
def fp8_scaling_bytes(model: Model) -> float:
    """Bytes of HBM traffic per token, per layer and per **training step** (forward and backward) that FP8
    training with dynamic tensorwise scaling (torchao's Float8Linear, torchtitan's default float8 recipe) moves
    beyond the input casts :func:`layer_elementwise_bytes` counts with ``fp8=True`` (its ``3`` bytes per cast
    element, times the step model's passes).

    Read from pytorch/ao ``torchao/float8/float8_linear.py`` (commit 024fe94f) and ``float8_utils.py``: each cast
    (``hp_tensor_to_float8_dynamic``) first reduces ``max(abs(x))`` over the whole tensor (``tensor_to_amax``),
    which cannot fuse with the cast that needs its result, so the bf16 tensor is read twice: **2 bytes** per
    element beyond the cast. The forward casts each linear's input (``e_in = 2D + N·H + F`` elements per token,
    as in ``layer_elementwise_bytes``); the backward casts each linear's output gradient to e5m2 (amax 2 + cast 3
    bytes for ``e_out = (N + 2K)·H + D + F·(2 gated, else 1) + D`` elements), and its weight-gradient GEMM takes
    the fp8 output gradient and the saved fp8 input transposed (``.t()``: the FP8 tensor-core GEMM wants both
    operands k-major, so each is copied, read 1 + write 1 byte). Per token and layer:

        2·e_in (amax, forward) + 7·e_out (backward cast with its amax, and its transpose) + 2·e_in (input
        transpose)  −  2·3·e_in (the backward's share of the passes already priced by ``fp8=True``)

    which is ``7·e_out − 2·e_in``, floored at 0. Mixture-of-experts widths count ``k`` routed plus shared experts,
    as :func:`layer_elementwise_bytes` does. The weights' own amax, cast and transpose (7 bytes per parameter per
    microbatch) scale with the parameters, not the tokens: the step model adds them separately."""
    c = model
    D, F, N, K, H = c.d_model, (c.d_ff_expert or c.d_ff) if c.is_moe else c.d_ff, c.n_heads, c.n_kv_heads, c.d_head
    k = c.experts_per_token + c.n_shared_experts if c.is_moe else 1
    e_in = 2 * D + N * H + F * k
    e_out = (N + 2 * K) * H + 2 * D + F * k * (2 if c.gated_mlp else 1)
    return float(max(0.0, 7.0 * e_out - 2.0 * e_in))


#: Bytes the weight of a tensorwise-scaled FP8 linear moves per parameter per microbatch (torchao Float8Linear):
#: the amax read (2), the cast (read 2, write 1) and the transposed copy for the input-gradient GEMM (read 1,
#: write 1). :func:`fp8_scaling_bytes` gives the derivation.
FP8_WEIGHT_BYTES_PER_PARAM = 7.0


@checked
def logits_bytes(model: Model) -> float:
    """Bytes per token of the softmax cross-entropy over the vocabulary (forward and backward): the logits read
    and upcast to fp32, the gradient written back in bf16: ``8·V``."""
    return 8.0 * model.vocab


#: Bytes the Adam update moves per parameter with fp32 master weights: reads of the master weight, the two moments
#: and the fp32 gradient (16), writes of the three (12) and of the bf16 copy (2).
ADAM_BYTES_PER_PARAM = 30.0


@checked
def optimizer_bytes(params: Annotated[float, Positive(allow_zero=True, maximum=1e16)]) -> float:
    """Bytes of HBM traffic of one Adam update of ``params`` parameters (on one chip: its shard)."""
    return ADAM_BYTES_PER_PARAM * params


__all__ = [
    "ADAM_BYTES_PER_PARAM",
    "ATTENTION_KERNELS",
    "DEFAULT",
    "EXPOSED_KINDS",
    "LINKS",
    "ROW_TILE",
    "SOURCES",
    "EfficiencyModel",
    "check_efficiency",
    "FP8_WEIGHT_BYTES_PER_PARAM",
    "expected_max_normal",
    "fp8_scaling_bytes",
    "layer_elementwise_bytes",
    "logits_bytes",
    "matmul_fraction",
    "matmul_seconds",
    "optimizer_bytes",
    "shape_factor",
]
