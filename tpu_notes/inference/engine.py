"""The one serving step model (Chapters 7 and 8): what one step of a serving engine costs on a deployment.

A :class:`Deployment` is one model replica on a system (a TPU :class:`~tpu_notes.topology.Slice` or a
:class:`~tpu_notes.gpu.GpuCluster`), tensor-parallel over all of its devices, with its dtypes and the HBM it keeps
in reserve. Everything that prices serving asks it: the simulator, the frontier, the deployment search, the cost
sheet, speculative decoding and the CLI.

One engine step runs every layer once over a set of *rows*: one per sequence being decoded and one per prompt token
of the prefill chunks mixed into the step (chunked prefill). Its parts, in seconds:

- **weights**: the matmul weights the rows visit (every parameter but the input embedding; a mixture of experts
  reads only the experts the rows are expected to visit), from HBM;
- **kv**: the KV caches the step's attention reads (each decoded sequence's context, each prefill chunk's prefix and
  itself), from HBM. A decoded token's attention runs at the pace of that read: for grouped-query attention its
  FLOPs per byte (about ``N / K``) are far below any chip's critical intensity. Multi-head latent attention
  (MLA) computes every head against one shared latent, about ``N`` times as many FLOPs per byte read
  (:func:`~tpu_notes.inference.decode_attention`), so for an MLA model this part is the slower of the read and
  those FLOPs;
- **matmul**: ``2 × rows ×`` the matmul parameters per token;
- **attention**: a prefill chunk's causal attention FLOPs (a decoded token's attention runs at the KV load's pace
  and is the ``kv`` part);
- **elementwise**: a prefill chunk's memory-bound non-matmul traffic (norms, rotary, activations);
- **collectives**: per layer, two AllReduces of the ``[rows, D]`` activations over the tensor-parallel group, and
  when the KV heads are fewer than the devices (the caches are sharded over the batch,
  :func:`~tpu_notes.inference.kv_sharding`), two AllToAlls of the decoded rows' queries and attention outputs.
  A decoded row's collectives do not overlap (the next matmul needs them, and a thin matmul has nothing to hide
  them behind); a prefill chunk's AllReduce bytes hide behind its own matmuls as far as the efficiency model's
  tensor exposure says (on the families of ``collective_matmul``, TPU: XLA's collective matmuls, hidden as far as
  compute lasts; ``exposed["tensor"] = 1`` on GPU); the training step leaves the first of ``tensor`` chunks
  exposed, which a decode step's few rows make negligible;
- **dequant**: with weight-only quantisation (weights stored narrower than the matmuls compute), the vector work
  of widening each weight read; a pipelined kernel (Marlin, gpt-fast's int4/int8 kernels, JetStream's int8
  matmuls) widens one tile while the next loads and the previous multiplies, so it overlaps both and only bites
  when it is the slowest of the three;
- **overhead**: the efficiency model's per-layer decode overhead (kernel boundaries, sampling, scheduling).

``total = kv + max(weights, dequant, matmul + attention + elementwise) + collectives + overhead``.
The **roofline** is the same sum at datasheet rates, a lower bound: the collectives' bytes at the system's own
bandwidth formulas (``System.collective_time``'s bandwidth term; their hop latency is reported apart, as
``roofline_parts["collective_latency"]``, and left out of the bound), a prefill chunk's AllReduce bytes hidden
behind its FLOPs as far as they last, and no overhead; the **expected** time (what ``EngineStep.total`` is)
at the rates of an :class:`~tpu_notes.efficiency.EfficiencyModel` (default :data:`tpu_notes.efficiency.DEFAULT`):
HBM at its achieved fraction, matmuls at :func:`~tpu_notes.efficiency.matmul_fraction` of their real shape
(``rows`` by ``D`` by ``F / n``) times the sustained fraction, attention at the flash fraction, each collective's
bytes at the achieved link fraction plus one call's latency. With one device and no prefill the roofline is
:func:`~tpu_notes.inference.decode_step_time` exactly (a test holds them together): Chapter 7's teaching formula
(``KV + max(weights, FLOPs)``) is this step's roofline view, and its ``expected`` this step
(:func:`~tpu_notes.inference.expected_decode_step`).

Layering: this module builds on :mod:`tpu_notes.inference.formulas` (the argument kinds, what a step reads) and
:mod:`tpu_notes.inference.sharding`; the teaching views (:mod:`tpu_notes.inference.expected`,
:mod:`tpu_notes.inference.step`, :mod:`tpu_notes.inference.serving`, :mod:`.long_context`, :mod:`.deployment`) import
it, never the other way (``tests/test_layering.py``).

Memory: the weights (sharded over the devices) and the KV pool share HBM; ``reserve_fraction`` of it is kept for
activations and the runtime. ``Deployment.kv_capacity_tokens`` is what the pool holds; a step whose caches
exceed it is marked ``fits=False`` and :meth:`Deployment.decode_step` refuses it unless asked not to.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Annotated

from .. import efficiency as eff_mod
from .. import gemm as gemm_mod
from .. import rules
from ..efficiency import EfficiencyModel, check_efficiency
from ..gpu import GpuCluster
from ..hardware import Chip, get_chip
from ..system import System
from ..topology import Slice
from ..transformer import Model, TransformerConfig
from ..units import Bool, OneOf, Positive, Range, checked, dtype_bytes, fmt
from .formulas import (
    COMPUTE_DTYPES,
    MAX_CONTEXT,
    Batch,
    Chips,
    ComputeDType,
    Context,
    StorageDType,
    _kv_pool_tokens,
    decode_attention,
    weight_params_read,
)
from .sharding import kv_sharding

#: Most rows (decoded sequences + prefill tokens) one engine step may hold.
MAX_ROWS = 2**22
#: The share of HBM a deployment keeps out of the KV pool, by default: activations, the runtime, fragmentation.
DEFAULT_RESERVE = 0.1
_Reserve = Annotated[float, Range(0.0, 0.99)]
_Count = Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_ROWS)]
#: Most tokens of KV cache one step may hold (more than any pool of a whole pod: 2**36 ≈ 6.9e10).
MAX_STEP_TOKENS = 2**36
_Tokens = Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_STEP_TOKENS)]
_Pairs = Annotated[float, Positive(allow_zero=True, maximum=1e18)]


def slice_shapes(chip) -> tuple[tuple[int, ...], ...]:
    """The standard slice shapes of a TPU generation, smallest first: powers of two with axes at most 2:1 on a 2D
    torus (1x1, 2x2, 2x4, 4x4, 4x8, ... v5e's menu); on a 3D torus the sub-cube shapes 2x2x1 ... 4x4x4, then whole
    4x4x4 cubes (4x4x8, 4x8x8, 8x8x8, ...), up to the pod."""
    c = get_chip(chip)
    if c.kind != "tpu" or not c.pod_shape:
        raise ValueError(f"chip must be a TPU with a torus (slices are TPU shapes); got {c.long_name}")
    pod = sorted(c.pod_shape)
    if c.ici_dims == 2:
        shapes = [(1, 1)]
        a = 2
        while a <= pod[-1]:
            shapes += [(a, a), (a, 2 * a)]
            a *= 2
    else:
        shapes = [(1, 1, 1), (2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4)]
        while True:
            x, y, z = shapes[-1]
            nxt = (x, y, 2 * z) if x == y == z else ((x, 2 * y, z) if x == y else (2 * x, y, z))
            if nxt == shapes[-1] or any(a > b for a, b in zip(sorted(nxt), pod)) or len(shapes) > 64:
                break
            shapes.append(nxt)
    out = [s for s in shapes if all(a <= b for a, b in zip(sorted(s), pod))]
    return tuple(sorted(out, key=lambda s: (math.prod(s), s)))


@checked
def system_for(chip, n_chips: Chips) -> System:
    """The system ``n_chips`` devices of ``chip`` form: the standard TPU slice of that many chips
    (:func:`~tpu_notes.inference.slice_shapes`), or a GPU cluster (whole nodes past one node)."""
    c = get_chip(chip)
    if c.kind == "gpu":
        return GpuCluster(c, n_chips)
    shapes = [s for s in slice_shapes(c) if math.prod(s) == n_chips]
    if shapes:
        return Slice(c, shapes[0])
    line = (n_chips,) + (1,) * (c.ici_dims - 1)  # a non-standard count: one line of chips, if the pod has one
    try:
        return Slice(c, line)
    except ValueError:
        menu = sorted({math.prod(s) for s in slice_shapes(c)})
        raise ValueError(
            f"n_chips must be the size of a standard {c.long_name} slice ({menu}) or fit on one axis; got {n_chips}"
        ) from None


def _resolve_system(system, n_chips) -> System:
    if isinstance(system, System) and not isinstance(system, (str, Chip)):
        if n_chips is not None and n_chips != system.n_devices:
            raise ValueError(f"n_chips ({n_chips!r}) must be None or the system's {system.n_devices} devices")
        return system
    if isinstance(system, (str, Chip)):
        if n_chips is None:
            raise TypeError("n_chips must be a whole number of chips when system is a chip name or a Chip")
        try:
            get_chip(system)
        except ValueError as err:
            raise ValueError(f"system: {err}") from None
        return system_for(system, n_chips)
    raise TypeError(
        "system must be a tpu_notes.topology.Slice, a tpu_notes.gpu.GpuCluster, or a chip name with n_chips; "
        f"got {type(system).__name__}"
    )


def _link(system: System, n: int) -> str:
    """The efficiency model's link name for a collective over all ``n`` devices of ``system``."""
    c = system.chip
    if c.kind == "gpu":
        return "nvlink" if n <= system.node_size else "ib"
    return "ici"


@dataclass(frozen=True)
class EngineStep:
    """One engine step of a :class:`Deployment`: ``decode`` sequences plus ``prefill_tokens`` prompt tokens, in
    seconds at the efficiency model's rates (``roofline`` is the same step at datasheet rates)."""

    kv: float  # KV caches read, seconds
    weights: float  # matmul weights read, seconds
    matmul: float  # weight-matmul FLOPs, seconds
    attention: float  # prefill attention FLOPs, seconds
    elementwise: float  # prefill memory-bound non-matmul traffic, seconds
    collectives: float  # tensor-parallel AllReduces and KV AllToAlls, seconds
    overhead: float  # per-layer overhead, all layers, seconds
    total: float  # kv + max(weights, dequant, matmul + attention + elementwise) + collectives + overhead, seconds
    roofline: float  # the same step at datasheet rates (no overhead), seconds
    decode: int  # sequences decoded (one token each)
    prefill_tokens: int  # prompt tokens prefilled
    kv_tokens: int  # tokens of KV cache resident for the step's sequences
    n_chips: int  # devices sharing the step
    fits: bool  # weights + these caches fit the HBM the deployment gives them
    roofline_parts: dict = field(repr=False, default_factory=dict)  # the roofline's parts, by the names above
    dequant: float = 0.0  # weight-only quantisation: the narrow weights widened to the compute dtype, seconds

    @property
    def batch(self) -> int:
        """Sequences decoded (the name Chapter 7's :class:`~tpu_notes.inference.DecodeStepTime` uses)."""
        return self.decode

    @property
    def rows(self) -> int:
        """Tokens the step's matmuls process."""
        return self.decode + self.prefill_tokens

    @property
    def matmul_bound(self) -> str:
        """What sets the ``max`` term: ``"compute"`` when the matmuls (and prefill attention) outlast the weight
        reads and their widening, ``"dequant"`` when widening weight-only-quantised weights does, else
        ``"weights"``."""
        compute = self.matmul + self.attention + self.elementwise
        if compute > max(self.weights, self.dequant):
            return "compute"
        return "dequant" if self.dequant > self.weights else "weights"

    @property
    def bound(self) -> str:
        """The largest part of the sum: ``"kv"``, ``"weights"``, ``"dequant"`` or ``"compute"`` (the ``max`` term,
        named by :attr:`matmul_bound`), ``"collectives"`` or ``"overhead"``."""
        parts = {
            "kv": self.kv,
            self.matmul_bound: max(self.weights, self.dequant, self.matmul + self.attention + self.elementwise),
            "collectives": self.collectives,
            "overhead": self.overhead,
        }
        return max(parts, key=parts.get)

    @property
    def tokens_per_s_per_chip(self) -> float:
        """Decoded tokens per second per device at this step time (prefill tokens are not output)."""
        return self.decode / self.total / self.n_chips

    def __repr__(self) -> str:
        pre = f" + prefill {self.prefill_tokens:,} tokens" if self.prefill_tokens else ""
        return (
            f"EngineStep(total={fmt(self.total, 's')} (roofline {fmt(self.roofline, 's')}): kv={fmt(self.kv, 's')}"
            f" + max(weights={fmt(self.weights, 's')}, matmul={fmt(self.matmul, 's')}"
            + (f" + attention={fmt(self.attention, 's')}" if self.attention else "")
            + (f", dequant={fmt(self.dequant, 's')}" if self.dequant else "")
            + ")"
            + f" + collectives={fmt(self.collectives, 's')} + overhead={fmt(self.overhead, 's')}; "
            f"bound={self.bound}, matmuls {self.matmul_bound}-bound; decode {self.decode}{pre}; "
            f"n_chips={self.n_chips}" + ("" if self.fits else "; does NOT fit") + ")"
        )


@dataclass(frozen=True)
class Deployment:
    """One model replica on ``system``, tensor-parallel over all its devices (build it with :func:`deploy`).
    Its rates are precomputed so that pricing a step (the simulator's clock) is a few float operations."""

    model: TransformerConfig  # the model served
    system: System  # the devices one replica spans (a Slice or a GpuCluster)
    weight_dtype: str  # dtype the weights are stored in
    kv_dtype: str  # dtype the KV caches are stored in
    compute_dtype: str  # dtype the matmuls run in (the chip's peak for it)
    reserve_fraction: float  # share of HBM kept out of the weights + KV pool
    efficiency: EfficiencyModel  # the rates of the expected step
    weight_bytes: float  # every parameter in the weight dtype, all devices together, bytes
    kv_bytes_per_token: float  # KV cache of one token of context, all devices together, bytes
    kv_capacity_tokens: int  # tokens of KV cache the HBM left after the weights and the reserve holds
    replicas: int = 1  # identical copies of this replica behind one router (the simulator serves them all)
    prefill_sharding: str = "tensor"  # how a step's prompt tokens are laid over the replica: PREFILL_SHARDINGS
    _c: dict = field(repr=False, compare=False, default_factory=dict)  # precomputed rates (see deploy())

    @property
    def chip(self) -> Chip:
        """The chip every device is."""
        return self.system.chip

    @property
    def n_chips(self) -> int:
        """Devices in one replica (every step is priced on one replica)."""
        return self.system.n_devices

    @property
    def weight_only(self) -> bool:
        """Whether the weights are stored narrower than the matmuls run (weight-only quantisation: each step
        widens the weights it reads to ``compute_dtype``, the ``dequant`` part)."""
        return bool(self._c.get("dequant_per_param"))

    @property
    def total_chips(self) -> int:
        """Devices of all the replicas together: what the deployment is billed for."""
        return self.replicas * self.system.n_devices

    def kv_blocks(self, block_size: int) -> int:
        """Blocks of ``block_size`` tokens the KV pool holds (paged attention)."""
        if type(block_size) is not int or not 1 <= block_size <= 2**16:
            raise ValueError(f"block_size must be a whole number of tokens in [1, 65536]; got {block_size!r}")
        return self.kv_capacity_tokens // block_size

    def max_batch(self, seq_len: int) -> int:
        """Most sequences of ``seq_len`` tokens whose caches the pool holds at once (0 when not one fits): the
        pool's tokens ``// seq_len``, the arithmetic (``formulas._kv_pool_tokens``) of
        :func:`~tpu_notes.inference.max_batch` at this deployment's ``reserve_fraction``, which refuses a batch of
        0 and caps it at ``MAX_BATCH``."""
        if type(seq_len) is not int or not 1 <= seq_len <= MAX_CONTEXT:
            raise ValueError(f"seq_len must be a whole number of tokens in [1, {MAX_CONTEXT}]; got {seq_len!r}")
        return self.kv_capacity_tokens // seq_len

    # ------------------------------------------------------------------------------------------ the step
    def _parts(self, decode, kv_tokens, prefill_tokens, prefill_pairs, prefill_kv):
        """Both sets of parts, unchecked: ``(expected, roofline)`` dicts of seconds (the same formula as
        :meth:`_seconds`, spelled out part by part)."""
        c = self._c
        rows = decode + prefill_tokens
        names = ("kv", "weights", "matmul", "attention", "elementwise", "dequant", "collectives")
        if rows == 0:
            zero = dict.fromkeys(names, 0.0)
            return {**zero, "overhead": 0.0}, {**zero, "collective_latency": 0.0}
        seq = c["sequence"] and prefill_tokens > 0  # this step's prompt tokens are split over the devices
        params = self._params_read(rows)
        # sequence-parallel prefill: every device reads the whole (gathered) weights, not its 1/n share
        w_roof = params * c["wbytes"] / c["hbm_all"] * (c["n"] if seq else 1)
        kv_roof, kv_exp = self._kv_seconds(kv_tokens, prefill_kv)
        mm_roof = 2.0 * rows * c["matmul_params"] / c["peak_all"]
        at_roof = prefill_pairs * c["attn_flops_per_pair"] / c["peak_bf16_all"]
        el_roof = prefill_tokens * c["elem_bytes_per_token"] / c["hbm_all"]
        dq = params * c["dequant_per_param"]
        gathered = c["gather_bytes"] + (prefill_tokens + prefill_kv) * self.kv_bytes_per_token
        coll_roof, hops = self._roofline_collectives(decode, prefill_tokens, seq, gathered, mm_roof, at_roof)
        roof = {
            "kv": kv_roof,
            "weights": w_roof,
            "matmul": mm_roof,
            "attention": at_roof,
            "elementwise": el_roof,
            "dequant": dq,
            "collectives": coll_roof,
            "collective_latency": hops,
        }
        e_hbm = c["e_hbm"]
        mm = self._expected_matmul(decode, prefill_tokens, seq)
        at = at_roof / c["attention_fraction"]
        exp = {
            "kv": kv_exp,
            "weights": w_roof / e_hbm,
            "matmul": mm,
            "attention": at,
            "elementwise": el_roof / e_hbm,
            "dequant": dq,
            "collectives": self._expected_collectives(decode, prefill_tokens, seq, gathered, mm, at),
            "overhead": c["overhead"] + (c["launch"] if prefill_tokens else 0.0),
        }
        return exp, roof

    def _params_read(self, rows: int) -> float:
        """Parameters a step of ``rows`` rows reads, all devices together (a count, not bytes): the dense ones, the
        routed experts its rows are expected to visit (each row picks ``k`` of ``E``), and, with untied embeddings,
        one looked-up embedding row per row (at most the vocabulary's)."""
        c = self._c
        E, k = c["experts"]
        visited = c["dense_params"] + (c["expert_layer_params"] * E * (1.0 - (1.0 - k / E) ** rows) if E else 0.0)
        return visited + min(rows, c["vocab_rows"]) * c["embed_row"]

    def _kv_seconds(self, kv_tokens: int, prefill_kv: int) -> tuple[float, float]:
        """``(roofline, expected)`` seconds of the step's KV part: the decoded sequences' ``kv_tokens`` and the
        prefill's ``prefill_kv`` cached tokens read from HBM, or, where the decode attention's FLOPs take longer
        than its read (MLA), that excess added."""
        c = self._c
        dec_at = kv_tokens * c["decode_attn_flops_per_token"] / c["peak_bf16_all"]  # 0 unless MLA
        kv_read = kv_tokens * self.kv_bytes_per_token / c["hbm_all"]
        kv_roof = (kv_tokens + prefill_kv) * self.kv_bytes_per_token / c["hbm_all"]
        kv_roof += max(0.0, dec_at - kv_read)
        kv_exp = (kv_tokens + prefill_kv) * self.kv_bytes_per_token / c["hbm_all"] / c["e_hbm"]
        kv_exp += max(0.0, dec_at / c["attention_fraction"] - kv_read / c["e_hbm"])
        return kv_roof, kv_exp

    def _roofline_collectives(self, decode, prefill_tokens, seq, gathered, mm_roof, at_roof) -> tuple[float, float]:
        """``(bytes, latency)`` seconds of the step's collectives at datasheet rates: the decoded rows' AllReduces
        and AllToAlls in full, a prefill's AllReduce bytes (or, ``seq``, its ``gathered`` bytes of weight and KV
        AllGathers) hidden behind its own matmul (``mm_roof``) and attention (``at_roof``) seconds as far as they
        last; the latency is the hops, kept apart (module docstring)."""
        c = self._c
        ar_a, ar_b = c["all_reduce"]
        aa_a, aa_b = c["all_to_all"]
        ga_a, ga_b = c["all_gather"]
        tp_rows = decode if seq else decode + prefill_tokens  # rows whose activations are AllReduced over the replica
        # the ideal: a prefill's collective bytes hidden behind its own FLOPs as far as they last
        if not prefill_tokens:
            pre_roof = 0.0
        elif seq:
            pre_roof = max(0.0, ga_b * gathered - mm_roof - at_roof)
        else:
            pre_roof = max(0.0, c["n_reduces"] * ar_b * prefill_tokens - mm_roof - at_roof)
        coll_roof = c["n_reduces"] * ar_b * decode + pre_roof + (c["n_a2a"] * aa_b * decode if decode else 0.0)
        hops = (c["n_reduces"] * ar_a if tp_rows else 0.0) + (c["n_a2a"] * aa_a if decode else 0.0)
        hops += c["n_gathers"] * ga_a if seq else 0.0
        return coll_roof, hops

    def _expected_matmul(self, decode: int, prefill_tokens: int, seq: bool) -> float:
        """Expected seconds of the step's weight matmuls at the efficiency model's fraction of peak: all rows
        tensor-parallel, or (``seq``) the decoded rows tensor-parallel plus the prompt's rows split over the
        devices."""
        c = self._c
        if seq:
            return (decode * c["k_mm"] / self._matmul_fraction(decode) if decode else 0.0) + prefill_tokens * c[
                "k_mm"
            ] / self._matmul_fraction(-prefill_tokens)
        rows = decode + prefill_tokens
        return rows * c["k_mm"] / self._matmul_fraction(rows)

    def _expected_collectives(self, decode, prefill_tokens, seq, gathered, mm, at) -> float:
        """Expected seconds of the step's collectives: the decoded rows' AllReduces and AllToAlls in full, and a
        prefill's AllReduce bytes (or, ``seq``, its ``gathered`` bytes of AllGathers) hidden behind its matmul
        (``mm``) and attention (``at``) seconds as far as the efficiency model's exposure says."""
        c = self._c
        elat_ar, ebw_ar = c["e_all_reduce"]
        elat_aa, ebw_aa = c["e_all_to_all"]
        elat_ga, ebw_ga = c["e_all_gather"]
        tp_rows = decode if seq else decode + prefill_tokens  # rows whose activations are AllReduced over the replica
        # decoded rows' AllReduces and AllToAlls wait in full; a prefill chunk's AllReduce bytes hide behind its
        # matmuls as far as the efficiency model's tensor exposure says (collective matmuls on TPU: as far as
        # compute lasts; on GPU: not at all), as in the training step model; a sequence-parallel prefill's weight
        # gathers are prefetched a layer ahead (the model's "fsdp" exposure: hidden as far as compute lasts)
        coll = (c["n_reduces"] * elat_ar if tp_rows else 0.0) + c["n_reduces"] * ebw_ar * decode
        if decode and c["n_a2a"]:
            coll += c["n_a2a"] * (elat_aa + ebw_aa * decode)
        if prefill_tokens and seq:
            g = c["n_gathers"] * elat_ga + ebw_ga * gathered
            xs = c["exposed_gather"]
            coll += xs * g + (1.0 - xs) * max(0.0, g - mm - at)
        elif prefill_tokens:
            pre = c["n_reduces"] * ebw_ar * prefill_tokens
            x = c["exposed"]
            coll += x * pre + (1.0 - x) * max(0.0, pre - mm - at)
        return coll

    def _matmul_fraction(self, rows: int) -> float:
        """The fraction of the compute dtype's peak the step's weight matmuls reach with ``rows`` rows laid out
        tensor-parallel (``rows > 0``: each device multiplies all rows by its ``1/n`` of every weight) or, for a
        sequence-parallel prefill (``rows < 0``), ``|rows| / n`` rows by whole weights per device; cached."""
        cache = self._c["fraction_cache"]
        f = cache.get(rows)
        if f is None:
            c = self._c
            n = c["n"]
            if rows > 0:
                f = _gemm_fraction(self.model, self.chip, self.compute_dtype, rows, n, self.efficiency)
            else:
                f = _gemm_fraction(self.model, self.chip, self.compute_dtype, math.ceil(-rows / n), 1, self.efficiency)
            if len(cache) < 65536:
                cache[rows] = f
        return f

    def _seconds(self, decode: int, kv_tokens: int, prefill_tokens: int = 0, prefill_pairs: float = 0.0,
                 prefill_kv: int = 0) -> float:  # fmt: skip
        """Expected seconds of one step, unchecked: the simulator's clock, a few float operations (:meth:`step`
        checks its arguments, explains the parts and holds the same formula; a test keeps them equal):
        ``decode`` sequences with ``kv_tokens`` tokens of context between them, and ``prefill_tokens`` prompt
        tokens whose attention covers ``prefill_pairs`` (query, key) pairs and reads ``prefill_kv`` cached tokens."""
        (k_kv, k_w, dense, per_layer, E, k, vocab_rows, embed_row, k_mm, k_at, k_el, n_red, elat_ar, ebw_ar, n_a2a,
         elat_aa, ebw_aa, x, overhead, k_dec, k_dq, seq, n, n_ga, elat_ga, ebw_ga, xs, gather_bytes,
         kv_tok, launch) = self._c["fast"]  # fmt: skip
        rows = decode + prefill_tokens
        if rows == 0:
            return 0.0
        cache = self._c["fraction_cache"]
        visited = dense + (per_layer * E * (1.0 - (1.0 - k / E) ** rows) if E else 0.0)
        params = visited + min(rows, vocab_rows) * embed_row
        at = prefill_pairs * k_at
        coll = 0.0
        if seq and prefill_tokens:
            weights = params * k_w * n
            mm = prefill_tokens * k_mm / (cache.get(-prefill_tokens) or self._matmul_fraction(-prefill_tokens))
            if decode:
                mm += decode * k_mm / (cache.get(decode) or self._matmul_fraction(decode))
                coll = n_red * (elat_ar + ebw_ar * decode)
            g = n_ga * elat_ga + ebw_ga * (gather_bytes + (prefill_tokens + prefill_kv) * kv_tok)
            coll += xs * g + (1.0 - xs) * max(0.0, g - mm - at)
        else:
            weights = params * k_w
            mm = rows * k_mm / (cache.get(rows) or self._matmul_fraction(rows))
            coll = n_red * (elat_ar + ebw_ar * decode)
            if prefill_tokens:
                pre = n_red * ebw_ar * prefill_tokens
                coll += x * pre + (1.0 - x) * max(0.0, pre - mm - at)
        if decode and n_a2a:
            coll += n_a2a * (elat_aa + ebw_aa * decode)
        kv = (kv_tokens + prefill_kv) * k_kv + (max(0.0, kv_tokens * (k_dec - k_kv)) if k_dec else 0.0)
        if prefill_tokens:
            overhead += launch
        return kv + max(weights, params * k_dq, mm + at + prefill_tokens * k_el) + coll + overhead

    @checked
    def step(
        self,
        decode: _Count,
        kv_tokens: _Tokens,
        prefill_tokens: _Count = 0,
        prefill_pairs: _Pairs = 0.0,
        prefill_kv: _Tokens = 0,
    ) -> EngineStep:
        """One engine step (see the module docstring), checked: ``decode`` sequences whose contexts add up to
        ``kv_tokens`` tokens, plus ``prefill_tokens`` prompt tokens attending over ``prefill_pairs`` (query, key)
        pairs and reading ``prefill_kv`` tokens of cache. ``fits`` says whether those caches fit the KV pool."""
        if decode + prefill_tokens == 0:
            raise ValueError("a step needs at least one row: decode or prefill_tokens must be positive")
        if decode and kv_tokens < decode:
            raise ValueError(f"kv_tokens ({kv_tokens}) must be at least decode ({decode}): each sequence has a token")
        exp, roof = self._parts(decode, kv_tokens, prefill_tokens, prefill_pairs, prefill_kv)

        def total(p):
            return (
                p["kv"]
                + max(p["weights"], p["dequant"], p["matmul"] + p["attention"] + p["elementwise"])
                + p["collectives"]
                + p.get("overhead", 0.0)
            )

        resident = kv_tokens + prefill_kv + prefill_tokens
        return EngineStep(
            kv=exp["kv"],
            weights=exp["weights"],
            matmul=exp["matmul"],
            attention=exp["attention"],
            elementwise=exp["elementwise"],
            collectives=exp["collectives"],
            overhead=exp["overhead"],
            total=total(exp),
            roofline=total(roof),
            decode=decode,
            prefill_tokens=prefill_tokens,
            kv_tokens=resident,
            n_chips=self.n_chips,
            fits=resident <= self.kv_capacity_tokens,
            roofline_parts=roof,
            dequant=exp["dequant"],
        )

    @checked
    def decode_step(self, batch: Batch, seq_len: Context, *, allow_unfit: Bool = False) -> EngineStep:
        """A generation step of ``batch`` sequences of ``seq_len`` tokens of context each. Refuses (naming the
        largest batch that fits) a batch whose caches do not fit the pool, unless ``allow_unfit``; the step is then
        marked ``fits=False``."""
        _decode_point(batch, seq_len)
        s = self.step(batch, batch * seq_len)
        if not s.fits and not allow_unfit:
            raise ValueError(
                f"batch={batch} sequences of {seq_len:,} tokens do not fit beside the weights on "
                f"{self.n_chips} {self.chip.long_name} devices: at most {self.max_batch(seq_len)} "
                f"(pass allow_unfit=True to price it anyway)"
            )
        return s

    @checked
    def prefill_step(
        self,
        prompt_len: Context,
        batch: Batch = 1,
        *,
        cached_len: Annotated[int, Positive(integer=True, allow_zero=True, maximum=MAX_CONTEXT)] = 0,
    ) -> EngineStep:
        """One step prefilling ``batch`` whole prompts of ``prompt_len`` tokens, the first ``cached_len`` of each
        from a prefix cache (computed: the rest, each attending to the whole prompt so far)."""
        if cached_len >= prompt_len:
            raise ValueError(f"cached_len must be smaller than prompt_len ({prompt_len}); got {cached_len}")
        new = prompt_len - cached_len
        args = {"batch": batch, "prompt_len - cached_len": new}
        rules.product_within(args, MAX_ROWS, what="prompt tokens in one engine step (MAX_ROWS)")
        pairs = batch * (new * cached_len + new * (new + 1) / 2.0)
        return self.step(0, 0, batch * new, pairs, batch * cached_len)


def _check_deployment(value, name: str = "deployment") -> Deployment:
    """``value`` if it is an engine :class:`~tpu_notes.inference.engine.Deployment`, else a ``TypeError`` naming
    ``name``."""
    if not isinstance(value, Deployment):
        raise TypeError(
            f"{name} must be a tpu_notes.inference.engine.Deployment (build one with "
            f"tpu_notes.inference.engine.deploy(model, chip, n_chips, ...)); got {type(value).__name__}"
        )
    return value


def _decode_point(batch: int, seq_len: int, *, batch_arg: str = "batch", seq_arg: str = "seq_len") -> None:
    """A generation step of ``batch`` sequences of ``seq_len`` tokens must fit one engine step: at most
    :data:`MAX_ROWS` sequences and :data:`MAX_STEP_TOKENS` tokens of cache. Refusals name the caller's arguments
    (``batch_arg``, ``seq_arg``), before :meth:`Deployment.step` would name its own."""
    rules.product_within({batch_arg: batch}, MAX_ROWS, what="sequences in one engine step (MAX_ROWS)")
    rules.product_within({batch_arg: batch, seq_arg: seq_len}, MAX_STEP_TOKENS, what="tokens of KV cache in one step")


def _whole_heads(model, n: int, *, argument: str) -> None:
    """The rule a tensor-parallel replica over ``n`` devices obeys (:func:`tpu_notes.rules.whole_heads`): every
    device holds whole query heads, and ``n`` divides the KV heads or is a multiple of them (the caches then split
    over the batch too, :func:`~tpu_notes.inference.kv_sharding`): what vLLM asserts of its tensor-parallel size
    (github.com/vllm-project/vllm, ``vllm/model_executor/models/llama.py``, ``LlamaAttention``). The step prices each
    device's share of the MLP width as a fraction (``d_ff / n``), so ``d_ff`` is not held to the rule here. The
    refusal names ``argument``, the caller's."""
    rules.whole_heads(model, n, argument=argument, d_ff=False)


def _pool(m, c, n: int, weight_dtype: str, kv_dtype: str, reserve_fraction: float, check_memory: bool):
    """``(weight bytes, KV bytes per token, tokens of KV pool)`` of ``m`` on ``n`` devices of ``c``; refuses, naming
    ``n_chips``, devices that hold not even the weights and one token of cache (unless not ``check_memory``)."""
    weights = m.param_count() * dtype_bytes(weight_dtype)
    kv_tok = m.kv_bytes_per_token(kv_dtype)
    capacity = _kv_pool_tokens(n * c.hbm_bytes, reserve_fraction, weights, kv_tok)
    if capacity < 1 and check_memory:
        need = math.ceil((weights + kv_tok) / (c.hbm_bytes * (1.0 - reserve_fraction)))
        raise ValueError(
            f"n_chips={n} {c.long_name} devices cannot hold {m.name or 'the model'} ({weights / 1e9:.3g} GB of "
            f"weights in {weight_dtype}) with {reserve_fraction:.0%} of HBM in reserve; it needs at least {need}"
        )
    return weights, kv_tok, capacity


def _weight_rates(m) -> dict:
    """What a step of ``rows`` rows reads of the weights: a dense part, the experts visited, embedding rows."""
    total_params = float(weight_params_read(m, 1))
    embed_row = 0.0 if m.tied_embeddings else float(m.d_model)
    if not m.tied_embeddings:
        total_params -= embed_row  # the one looked-up row weight_params_read counted
    if m.is_moe:
        E, k = m.n_experts, m.experts_per_token
        per_layer = float(m.n_moe_layers * m.expert_params())
        visited_1 = E * (1.0 - (1.0 - k / E))
        dense = total_params - per_layer * visited_1
        experts = (E, k)
    else:
        per_layer, dense, experts = 0.0, total_params, (0, 1)
    return {
        "experts": experts,
        "dense_params": dense,
        "expert_layer_params": per_layer,
        "vocab_rows": m.vocab if not m.tied_embeddings else 0,
        "embed_row": embed_row,
    }


def _collective_rates(m, sysm: System, e: EfficiencyModel) -> dict:
    """The collectives of a step, each affine in its rows as ``(intercept, slope)`` seconds: the AllReduce of
    ``[rows, D]`` activations (2 per layer) and, with the KV caches sharded over the batch, the AllToAll of the
    decoded rows' queries and outputs (2 per layer); at datasheet rates and at the efficiency model's."""
    n = sysm.n_devices
    act = 2.0 * m.d_model  # bf16 activations, bytes per row
    link = _link(sysm, n)

    def affine(kind):
        if n == 1:
            return (0.0, 0.0), (0.0, 0.0)
        one, two = sysm.collective_time(kind, act), sysm.collective_time(kind, 2 * act)
        slope_bw = two.bandwidth_time - one.bandwidth_time
        roof = (one.latency_time, slope_bw)  # hops x the system's latency; bytes at the datasheet rate
        exp = (e.latency(link), slope_bw / e.link(link))  # one call's latency; bytes at the achieved rate
        return roof, exp

    ar_roof, ar_exp = affine("all_reduce")
    ga_roof, ga_exp = affine("all_gather")
    a2a = kv_sharding(m, n).all_to_alls if n > 1 else 0
    aa_roof, aa_exp = affine("all_to_all") if a2a else ((0.0, 0.0), (0.0, 0.0))
    return {
        "n_reduces": 2 * m.n_layers if n > 1 else 0,
        "all_reduce": ar_roof,
        "e_all_reduce": (ar_exp[0], ar_exp[1]),
        "n_a2a": a2a * m.n_layers,
        "all_to_all": aa_roof,
        "e_all_to_all": (aa_exp[0], aa_exp[1]),
        # a sequence-parallel prefill all-gathers each layer's weights (and the prompt's KV) over the replica:
        # one call per layer, seconds per byte of the gathered array ((n - 1) / n of it crosses to each device)
        "n_gathers": m.n_layers if n > 1 else 0,
        "all_gather": (ga_roof[0], ga_roof[1] / act),
        "e_all_gather": (ga_exp[0], ga_exp[1] / act),
    }


#: How a step's prompt tokens are laid over a replica's devices (:func:`deploy`'s ``prefill_sharding``).
PREFILL_SHARDINGS = ("tensor", "sequence")

#: Vector operations that widen one stored weight element to the compute dtype in a weight-only-quantised matmul:
#: convert to fp32, multiply by its scale, round to the compute dtype (three; int4 adds one to unpack two elements
#: from a byte). Our count of the kernels' inner loop (e.g. JetStream's int8 ``w.astype(bf16) * scale``), stated.
DEQUANT_OPS = {"bf16": 0, "fp32": 0, "fp8": 3, "int8": 3, "int4": 4}
#: VPU ALUs per lane assumed for a TPU whose record has none (v5e, v6e): v5p's 4 (scaling book, tpus.md
#: Appendix A); an assumption, stated where it is used.
DEFAULT_VPU_ALUS = 4


def _chip_compute_dtypes(chip) -> tuple:
    """The compute dtypes of :data:`~tpu_notes.inference.step.COMPUTE_DTYPES` ``chip`` has a matmul peak for."""
    c = get_chip(chip, "chip")
    return tuple(d for d in COMPUTE_DTYPES if {"bf16": c.bf16_flops, "int8": c.int8_flops, "fp8": c.fp8_flops}[d])


@checked
def resolve_compute_dtype(chip, weight_dtype: StorageDType, compute_dtype: ComputeDType | None = None) -> str:
    """The dtype a deployment's matmuls run in, as engines run them: ``compute_dtype`` when given (refused, naming
    it, where ``chip`` has no peak for it), else the weight dtype where the chip has a peak for it (FP8 weights on
    H100/H200/B200, int8 on any chip with an int8 peak), else bf16 (a storage dtype with no peak is weight-only
    quantisation: stored narrow, widened to bf16 each step)."""
    c = get_chip(chip)
    have = _chip_compute_dtypes(c)
    if compute_dtype is not None:
        if compute_dtype not in have:
            raise ValueError(
                f"compute_dtype={compute_dtype!r}: {c.long_name} has no {compute_dtype} matmul peak; "
                f"compute_dtype must be one of {list(have)} on it (or None: the weight dtype where it can)"
            )
        return compute_dtype
    return weight_dtype if weight_dtype in have else "bf16"


def vector_rate(chip) -> float:
    """Elementwise operations per second one device's vector units do (what widens weight-only-quantised weights):
    a GPU's CUDA cores at one op per cycle (``Chip.fp32_flops``); a TPU's VPUs, ``cores × 8 × 128 lanes × ALUs per
    lane × clock`` (:func:`tpu_notes.systolic.vpu_flops`; ``DEFAULT_VPU_ALUS`` where the record has no ALU
    count). 0 where the records give no rate (the dequantisation is then priced as one more pass over the narrow
    weights at the HBM rate)."""
    c = get_chip(chip, "chip")
    if c.kind == "gpu":
        return float(c.fp32_flops or 0.0)
    if not c.clock_hz:
        return 0.0
    return float((c.cores_per_chip or 1) * 8 * 128 * (c.vpu_alus_per_lane or DEFAULT_VPU_ALUS) * c.clock_hz)


def _dequant_per_param(c: Chip, n: int, weight_dtype: str, compute_dtype: str, e: EfficiencyModel) -> float:
    """Seconds per weight read (all ``n`` devices together) of widening weight-only-quantised weights: the vector
    units' :data:`DEQUANT_OPS` per element at :func:`vector_rate`, or one more pass over the narrow bytes at the
    achieved HBM rate where the chip's records give no vector rate; 0 when the weights are stored in the compute
    dtype or wider. The step overlaps it with the weight stream and the matmuls (it enters their ``max``)."""
    if dtype_bytes(weight_dtype) >= dtype_bytes(compute_dtype):
        return 0.0
    rate = vector_rate(c)
    if rate:
        return DEQUANT_OPS[weight_dtype] / (n * rate)
    return dtype_bytes(weight_dtype) / (n * c.hbm_bw * e.hbm)


#: Kernels one layer of an eager prefill launches: input norm, QKV GEMM, rotary, KV-cache write, attention, output
#: GEMM, residual + norm, gate/up GEMM, activation, down GEMM (10), and with tensor parallelism two AllReduces
#: (vLLM's and TensorRT-LLM's Llama layer, counted from their model code).
PREFILL_KERNELS = 10


def _prefill_launch(model, chip, n: int) -> float:
    """Seconds a step that carries prompt tokens pays beyond a decode step on a GPU: its kernels launched one by
    one. Engines replay a captured CUDA graph for decode batches (vLLM's ``cudagraph_capture_sizes``, TensorRT-LLM's
    CUDA-graph mode), so the fitted per-layer ``decode_overhead`` is a graph's; a prefill's token count varies and
    it runs eagerly: each of the layer's :data:`PREFILL_KERNELS` (+2 AllReduces with tensor parallelism) pays the
    GEMM model's fixed cost per call (:meth:`tpu_notes.gemm.GemmModel.fixed_of`, fitted on device-timed sweeps:
    launch and pipeline fill), taken for every kernel as the one per-call cost the records give. 0 on a TPU, where
    a prefill bucket is one compiled program like a decode step."""
    c = get_chip(chip)
    if c.kind != "gpu":
        return 0.0
    kernels = PREFILL_KERNELS + (2 if n > 1 else 0)
    return kernels * model.n_layers * gemm_mod.DEFAULT.fixed_of(c)


def _layer_matmuls(m, rows: float, tp: int) -> list:
    """``(m, k, n)`` of one device's weight matmuls in one layer (tensor-parallel over ``tp`` devices), each
    expert's at ``rows · k / E`` rows, and the unembedding: what :func:`matmul_fraction` weighs."""
    D, N, K, H, t = m.d_model, m.n_heads, m.n_kv_heads, m.d_head, max(float(rows), 1.0)
    mats = [(t, D, (N + 2 * K) * H / tp), (t, N * H / tp, D)]
    if m.is_moe:
        F = m.d_ff_expert or m.d_ff
        t = max(t * m.experts_per_token / m.n_experts, 1.0)
    else:
        F = m.d_ff
    mats += [(t, D, F / tp)] * (2 if m.gated_mlp else 1) + [(t, F / tp, D)]
    mats.append((max(float(rows), 1.0), D, m.vocab / tp))
    return mats


#: The fewest rows a GPU GEMM kernel's tile covers: the tensor cores' smallest matrix-multiply shape is 16 rows
#: (``mma.sync.m16n8k16``, PTX ISA), and the libraries pick smaller CTA tiles for thin matmuls (cuBLAS's and
#: CUTLASS's heuristics, TensorRT-LLM's GEMV-like decode kernels) rather than pad a decode batch to 128 rows.
MIN_GPU_TILE_ROWS = 16


def _small_tile_model(c: Chip, rows: int) -> gemm_mod.GemmModel:
    """The GEMM tile model a thin matmul of ``rows`` rows meets: on a GPU, when ``rows`` is under the model's CTA
    tile, the tile shrinks to the next power of two at least :data:`MIN_GPU_TILE_ROWS`; otherwise the default."""
    g = gemm_mod.DEFAULT
    tm, tn = g.gpu_tile
    if c.kind != "gpu" or rows >= tm:
        return g
    small = max(MIN_GPU_TILE_ROWS, 1 << max(0, math.ceil(math.log2(max(rows, 1)))))
    key = (small, tn)
    if key not in _TILE_MODELS:
        _TILE_MODELS[key] = replace(g, gpu_tile=key)
    return _TILE_MODELS[key]


_TILE_MODELS: dict = {}


def _gemm_fraction(model, chip, compute_dtype: str, rows: int, tp: int, efficiency: EfficiencyModel) -> float:
    """The fraction of ``chip``'s ``compute_dtype`` peak a step's weight matmuls reach at ``rows`` rows per device,
    tensor-parallel over ``tp`` devices: the efficiency model's large-matmul figure times its sustained fraction
    (the training step's path, :mod:`tpu_notes.training.expected`) times the GEMM tile model's shape factor
    (:mod:`tpu_notes.gemm`: tile padding, waves, split-K and the exposed share of the operands' bytes, at most
    the array's own time), the
    FLOP-weighted harmonic mean over the layer's matmuls. An FP8 step runs at the GEMM model's FP8 plateau
    (``plateau_of(chip, "fp8") / plateau_of(chip)`` of the bf16 figure). The per-call fixed cost and the HBM-bound
    floor are not here: the engine prices the weight stream (``weights``) and the per-layer kernel boundaries
    (``overhead``) as parts of their own."""
    c = get_chip(chip)
    g = _small_tile_model(c, rows)
    peak = c.peak_flops(compute_dtype)
    plateau = g.plateau_of(c, compute_dtype)
    rate = g.rate(c, compute_dtype)
    exposed = float(g.exposed_bytes.get(c.kind, 0.0))
    flops = time = 0.0
    for a, b, d in _layer_matmuls(model, rows, tp):
        f = 2.0 * a * b * d
        work, t_bytes, _fixed = g._parts(c, a, b, d, compute_dtype, 1.0)  # noqa: SLF001 (the array's share only)
        flops += f
        array = work / rate
        # the exposed share of the operands' bytes, at most of the array's own time: a bytes-bound call's stream
        # is the engine's weights part, priced apart
        array += exposed * min(t_bytes, array)
        time += max(array, f / (plateau * peak))
    shape = min(1.0, flops / (time * peak) / plateau)
    scale = plateau / g.plateau_of(c) if compute_dtype == "fp8" else 1.0
    return efficiency.large_matmul(c) * efficiency.sustained_fraction(c) * shape * scale


def _rates(m, sysm: System, e: EfficiencyModel, weight_dtype: str, compute_dtype: str, prefill_sharding: str) -> dict:
    """Every rate a step is priced from (see :meth:`Deployment._parts`), for ``m`` on all devices of ``sysm``."""
    c, n = sysm.chip, sysm.n_devices
    rates = {
        **_weight_rates(m),
        "n": n,
        "wbytes": dtype_bytes(weight_dtype),
        "hbm_all": n * c.hbm_bw,
        "peak_all": n * c.peak_flops(compute_dtype),
        "peak_bf16_all": n * c.peak_flops("bf16"),
        "matmul_params": float(m.matmul_params_per_token()),
        "attn_flops_per_pair": 2.0 * m.n_layers * m.n_heads * (m.qk_head_dim + m.v_dim),
        # a decoded token's attention FLOPs per cached token: only MLA's are worth pricing (see the module docstring)
        "decode_attn_flops_per_token": decode_attention(m, 1).flops if m.is_mla else 0.0,
        "elem_bytes_per_token": m.n_layers * eff_mod.layer_elementwise_bytes(m, 1),
        **_collective_rates(m, sysm, e),
        "e_hbm": e.hbm,
        "attention_fraction": e.attention_fraction(c) * e.sustained_fraction(c),
        "overhead": e.decode_overhead * m.n_layers,
        "launch": _prefill_launch(m, c, n),
        "exposed": 0.0 if c.kind in e.collective_matmul else e.exposed_fraction("tensor", c),
        "sequence": prefill_sharding == "sequence" and n > 1,
        "exposed_gather": e.exposed_fraction("fsdp", c),
        "gather_bytes": float(m.param_count()) * dtype_bytes(weight_dtype),
        "dequant_per_param": _dequant_per_param(c, n, weight_dtype, compute_dtype, e),
        "fraction_cache": {},
    }
    rates["k_mm"] = 2.0 * rates["matmul_params"] / rates["peak_all"]
    return rates


def _fast(rates: dict, kv_tok: float, e: EfficiencyModel) -> tuple:
    """The rates :meth:`Deployment._seconds` unpacks, in its order, with the achieved HBM rate folded in."""
    e_hbm_all = rates["hbm_all"] * e.hbm
    return (
        kv_tok / e_hbm_all,
        rates["wbytes"] / e_hbm_all,
        rates["dense_params"],
        rates["expert_layer_params"],
        rates["experts"][0],
        rates["experts"][1],
        rates["vocab_rows"],
        rates["embed_row"],
        rates["k_mm"],
        rates["attn_flops_per_pair"] / (rates["peak_bf16_all"] * rates["attention_fraction"]),
        rates["elem_bytes_per_token"] / e_hbm_all,
        rates["n_reduces"],
        rates["e_all_reduce"][0],
        rates["e_all_reduce"][1],
        rates["n_a2a"],
        rates["e_all_to_all"][0],
        rates["e_all_to_all"][1],
        rates["exposed"],
        rates["overhead"],
        rates["decode_attn_flops_per_token"] / (rates["peak_bf16_all"] * rates["attention_fraction"]),
        rates["dequant_per_param"],
        rates["sequence"],
        rates["n"],
        rates["n_gathers"],
        rates["e_all_gather"][0],
        rates["e_all_gather"][1],
        rates["exposed_gather"],
        rates["gather_bytes"],
        kv_tok,
        rates["launch"],
    )


@checked
def deploy(
    model: Model,
    system,
    n_chips: Chips | None = None,
    *,
    weight_dtype: StorageDType = "bf16",
    kv_dtype: StorageDType = "bf16",
    compute_dtype: ComputeDType | None = None,
    reserve_fraction: _Reserve = DEFAULT_RESERVE,
    efficiency: EfficiencyModel | None = None,
    check_memory: Bool = True,
    replicas: Annotated[int, Positive(integer=True, maximum=4096)] = 1,
    prefill_sharding: Annotated[str, OneOf(PREFILL_SHARDINGS)] = "tensor",
) -> Deployment:
    """A :class:`Deployment` of ``model`` on ``system``: a :class:`~tpu_notes.topology.Slice`, a
    :class:`~tpu_notes.gpu.GpuCluster`, or a chip name with ``n_chips`` (the standard slice of that many TPU
    chips, or that many GPUs). Refuses, naming ``n_chips`` (or ``system``), devices that cannot each hold whole query
    heads (:func:`tpu_notes.rules.whole_heads`: the device count must divide the query heads, and divide the KV
    heads or be a multiple of them); and, naming ``n_chips``, a system whose memory does not hold the weights and
    one token of cache; ``check_memory=False`` prices that anyway (a pool of 0 tokens: every step is marked
    unfit). ``replicas`` identical copies serve behind one router (:func:`~tpu_notes.inference.simulate`); each
    step is still priced on one replica.

    ``compute_dtype`` is the dtype the matmuls run in (:func:`resolve_compute_dtype`): None (the default) is the
    weight dtype where the chip has a peak for it, else bf16; a dtype the chip has no peak for is refused, naming
    ``compute_dtype``. Weights stored narrower than they are computed (int4 anywhere, FP8 on a TPU) are weight-only
    quantised: each step pays the ``dequant`` part (``_dequant_per_param``).

    ``prefill_sharding`` lays a step's prompt tokens over the replica: ``"tensor"`` (every device holds ``1/n`` of
    each weight and all the tokens; two activation AllReduces per layer, hidden behind the matmuls as far as the
    efficiency model's tensor exposure says) or ``"sequence"`` (every device holds ``1/n`` of the tokens and
    all-gathers each layer's weights, ``weights · (n − 1)/n`` bytes per device per step, and the prompt's KV,
    prefetched behind the compute as far as it lasts; no activation AllReduces; each device reads the whole
    weights). Decoded rows stay tensor-parallel either way. :func:`best_prefill_sharding` compares them."""
    m = model
    sysm = _resolve_system(system, n_chips)
    _whole_heads(m, sysm.n_devices, argument="n_chips" if n_chips is not None else "system")
    e = check_efficiency(efficiency)
    compute = resolve_compute_dtype(sysm.chip, weight_dtype, compute_dtype)
    weights, kv_tok, capacity = _pool(
        m, sysm.chip, sysm.n_devices, weight_dtype, kv_dtype, reserve_fraction, check_memory
    )
    rates = _rates(m, sysm, e, weight_dtype, compute, prefill_sharding)
    rates["fast"] = _fast(rates, kv_tok, e)
    return Deployment(
        model=m,
        system=sysm,
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        compute_dtype=compute,
        reserve_fraction=reserve_fraction,
        efficiency=e,
        weight_bytes=weights,
        kv_bytes_per_token=kv_tok,
        kv_capacity_tokens=int(min(max(capacity, 0), MAX_STEP_TOKENS)),
        replicas=replicas,
        prefill_sharding=prefill_sharding,
        _c=rates,
    )


@checked
def best_prefill_sharding(deployment, prompt_len: Context, batch: Batch = 1) -> str:
    """The :data:`PREFILL_SHARDINGS` layout whose :meth:`Deployment.prefill_step` of ``batch`` prompts of
    ``prompt_len`` tokens is faster on ``deployment``'s replica (ties go to ``"tensor"``): tensor parallelism pays
    per-token activation AllReduces, sequence parallelism a per-step weight gather, so long prompts on a large
    replica favour ``"sequence"`` and short ones ``"tensor"``."""
    if not isinstance(deployment, Deployment):
        raise TypeError(
            f"deployment must be a Deployment (tpu_notes.inference.deploy(...)); got {type(deployment).__name__}"
        )
    times = {}
    for layout in PREFILL_SHARDINGS:
        d = deployment if deployment.prefill_sharding == layout else _with_prefill_sharding(deployment, layout)
        times[layout] = d.prefill_step(prompt_len, batch).total
    return min(PREFILL_SHARDINGS, key=lambda k: (times[k], PREFILL_SHARDINGS.index(k)))


def _with_prefill_sharding(deployment, prefill_sharding: str):
    """``deployment`` with its prompt tokens laid out as ``prefill_sharding`` (:data:`PREFILL_SHARDINGS`)."""
    if not isinstance(deployment, Deployment):
        raise TypeError(
            f"deployment must be a Deployment (tpu_notes.inference.deploy(...)); got {type(deployment).__name__}"
        )
    if prefill_sharding not in PREFILL_SHARDINGS:
        raise ValueError(f"prefill_sharding must be one of {list(PREFILL_SHARDINGS)}; got {prefill_sharding!r}")
    d = deployment
    return deploy(
        d.model,
        d.system,
        weight_dtype=d.weight_dtype,
        kv_dtype=d.kv_dtype,
        compute_dtype=d.compute_dtype,
        reserve_fraction=d.reserve_fraction,
        efficiency=d.efficiency,
        check_memory=False,
        replicas=d.replicas,
        prefill_sharding=prefill_sharding,
    )


__all__ = [
    "DEFAULT_RESERVE",
    "MAX_ROWS",
    "MAX_STEP_TOKENS",
    "PREFILL_SHARDINGS",
    "Deployment",
    "EngineStep",
    "best_prefill_sharding",
    "deploy",
    "resolve_compute_dtype",
    "slice_shapes",
    "system_for",
    "vector_rate",
]
