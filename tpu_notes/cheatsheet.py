"""The numbers worth knowing by heart, computed by the library (Chapter 12).

:func:`numbers_to_know` gathers, for a few chips and models, the constants the book keeps coming back to: each chip's
peak and HBM bandwidth with its critical batch, the ICI and DCN critical batches of training, the time a collective
takes per gigabyte, and each model's parameters, training FLOPs per token and KV cache per token. Every value comes
from the function named beside it, so the table in the book can never drift from the library. :data:`FORMULAS`
restates the step-time formulas with the chapter and function behind each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from .hardware import get_chip
from .transformer import as_config
from .units import Positive, checked, fmt


@dataclass(frozen=True)
class Number:
    """One number to know."""

    group: str  # "chip", "training", "collective" or "model"
    subject: str  # the chip or model it is about
    name: str  # what it is
    value: float | None  # SI units (None: the figure does not apply to this subject)
    unit: str  # unit for tpu_notes.units.fmt ("FLOP/s", "B/s", "tokens", "s", ...)
    chapter: int  # the chapter that teaches it
    function: str  # the tpu_notes function that computes it

    def shown(self) -> str:
        """The value through :func:`tpu_notes.units.fmt` (or "–")."""
        if self.value is None:
            return "–"
        if self.unit == "tokens":
            return f"{self.value:,.0f} tokens"
        return fmt(self.value, self.unit)


#: The step-time formulas of the book: (name, formula, chapter, function).
FORMULAS = (
    ("roofline of one op", "T = max(FLOPs / C, bytes / W)", 1, "roofline.roofline"),
    (
        "AllGather / ReduceScatter on a ring",
        "T ≈ V / W_ici on a bidirectional ring of any length",
        3,
        "collectives.all_gather_time",
    ),
    ("AllReduce", "T ≈ 2 V / W_ici", 3, "collectives.all_reduce_time"),
    ("training FLOPs", "≈ 6 · params · tokens (+ attention)", 4, "training.training_flops"),
    (
        "data parallel / FSDP compute-bound",
        "tokens per chip > C / W_ici per axis",
        5,
        "training.critical_batch_per_chip",
    ),
    (
        "FSDP + tensor compute-bound",
        "tokens per chip > α² / (M_X M_Y F) (axes overlap: the slower sets the time)",
        5,
        "training.critical_batch_per_chip",
    ),
    ("training step", "max(compute, communication) + bubble", 5, "training.step_time"),
    ("generation step", "KV load + max(weight load, FLOPs)", 7, "inference.decode_step_time"),
)


@checked
def numbers_to_know(
    chips: Sequence[str] = ("v5e", "v5p", "v6e", "h100"),
    models: Sequence[str] = ("llama3-8b", "llama3-70b", "llama3-405b"),
    ring: Annotated[int, Positive(integer=True, maximum=2**16)] = 16,
) -> list[Number]:
    """The rows of Chapter 12's table for ``chips`` (names) and ``models`` (preset names); collectives are priced on a
    ``ring``-chip ICI ring with wraparound of each TPU."""
    for name, seq in (("chips", chips), ("models", models)):
        if isinstance(seq, (str, bytes)) or not isinstance(seq, (list, tuple)):
            raise TypeError(f"{name} must be a list of names, e.g. ['v5e'] or ['llama3-8b']; got {seq!r}")
        if len(seq) > 64:
            raise ValueError(f"{name} may name at most 64 entries; got {len(seq)}")
    rows: list[Number] = []
    for name in chips:
        c = get_chip(name, "chips")
        rows += _chip_rows(c)
        rows += _tpu_rows(c, ring) if c.kind == "tpu" else _gpu_rows(c)
    for name in models:
        rows += _model_rows(as_config(name, "models"))
    return rows


def _chip_rows(c) -> list[Number]:
    """Any chip's peak, HBM bandwidth and capacity, and critical batch (Chapters 1 and 2)."""
    from .roofline import critical_batch_size

    return [
        Number("chip", c.name, "peak bf16", c.peak_flops("bf16"), "FLOP/s", 1, "hardware.Chip.peak_flops"),
        Number("chip", c.name, "HBM bandwidth", c.hbm_bw, "B/s", 1, "hardware.Chip.bandwidth"),
        Number("chip", c.name, "HBM capacity", c.hbm_bytes, "B", 2, "hardware.Chip"),
        Number(
            "chip",
            c.name,
            "critical batch (HBM, bf16)",
            critical_batch_size(c),
            "tokens",
            1,
            "roofline.critical_batch_size",
        ),
    ]


def _tpu_rows(c, ring: int) -> list[Number]:
    """A TPU's ICI and DCN critical batches of training (Chapter 5) and its collectives of 1 GB over a ``ring``-chip
    ICI ring (Chapter 3)."""
    from .collectives import all_gather_time, all_reduce_time, all_to_all_time
    from .training import critical_batch_per_chip

    rows = [
        Number(
            "training",
            c.name,
            "data/FSDP critical batch per chip, one axis",
            critical_batch_per_chip("fsdp", c),
            "tokens",
            5,
            "training.critical_batch_per_chip",
        ),
        Number(
            "training",
            c.name,
            "DCN critical batch per slice",
            critical_batch_per_chip("dcn", c) if c.dcn_bw else None,
            "tokens",
            5,
            "training.critical_batch_per_chip",
        ),
    ]
    w = c.bandwidth("ici")
    for label, fn in (
        ("AllGather", all_gather_time),
        ("AllReduce", all_reduce_time),
        ("AllToAll", all_to_all_time),
    ):
        rows.append(
            Number(
                "collective",
                c.name,
                f"{label} of 1 GB over a {ring}-chip ring",
                fn(1e9, ring, w).total,
                "s",
                3,
                f"collectives.{fn.__name__}",
            )
        )
    return rows


def _model_rows(m) -> list[Number]:
    """A model's parameters, training FLOPs per token and KV cache per token (Chapter 4)."""
    from .training import flops_per_token

    return [
        Number(
            "model",
            m.name,
            "parameters",
            float(m.param_count()),
            "",
            4,
            "transformer.TransformerConfig.param_count",
        ),
        Number("model", m.name, "training FLOPs per token", flops_per_token(m), "FLOPs", 4, "training.flops_per_token"),
        Number(
            "model",
            m.name,
            "KV cache per token (bf16)",
            m.kv_bytes_per_token("bf16"),
            "B",
            4,
            "transformer.TransformerConfig.kv_bytes_per_token",
        ),
    ]


#: Row names of a GPU's communication numbers (Chapter 11), beside the TPU row each stands in for in the table.
GPU_ROW_NAMES = {
    "data/FSDP critical batch per chip, one axis": "data/FSDP critical batch per GPU, NVLink node",
    "DCN critical batch per slice": "data critical batch per node, InfiniBand",
}


def _gpu_rows(c) -> list[Number]:
    """A GPU's communication numbers, priced on its own network (Chapter 11): the data-parallel threshold per GPU
    inside one NVLink node (``C / W_nvlink``), the one per whole node across nodes (``node_size`` GPUs over the
    node's InfiniBand NICs, the counterpart of a TPU slice over DCN), and each collective of 1 GB over one NVLink
    node of :class:`tpu_notes.gpu.GpuCluster`. A GPU without an NVSwitch node (the V100) gets none."""
    from .gpu import GpuCluster
    from .training import critical_batch_per_gpu

    if not c.node_size or not c.nvswitches_per_node or c.nvlink_bw is None or c.dcn_bw is None:
        return []
    node = GpuCluster(c.name, c.node_size)
    rows = [
        Number(
            "training",
            c.name,
            GPU_ROW_NAMES["data/FSDP critical batch per chip, one axis"],
            critical_batch_per_gpu(c.name, across_nodes=False),
            "tokens",
            11,
            "training.critical_batch_per_gpu",
        ),
        Number(
            "training",
            c.name,
            GPU_ROW_NAMES["DCN critical batch per slice"],
            c.node_size * critical_batch_per_gpu(c.name, across_nodes=True),
            "tokens",
            11,
            "training.critical_batch_per_gpu",
        ),
    ]
    for label, kind in (("AllGather", "all-gather"), ("AllReduce", "all-reduce"), ("AllToAll", "all-to-all")):
        rows.append(
            Number(
                "collective",
                c.name,
                f"{label} of 1 GB over one {c.node_size}-GPU NVLink node",
                node.collective_time(kind, 1e9, c.node_size).total,
                "s",
                11,
                "gpu.GpuCluster.collective_time",
            )
        )
    return rows


def format_numbers(rows: Sequence[Number]) -> str:
    """The rows as two plain-text tables, one line per chip and one per model, at most 88 characters wide."""
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, Number) for r in rows):
        raise TypeError("rows must be a list of Number from numbers_to_know()")
    by = {}
    for r in rows:
        by.setdefault(r.subject, {})[r.name] = r
    chip_cols = [
        ("peak bf16", "TFLOP/s"),
        ("HBM bandwidth", "HBM B/s"),
        ("HBM capacity", "HBM"),
        ("critical batch (HBM, bf16)", "B_crit"),
        ("data/FSDP critical batch per chip, one axis", "ICI α"),
        ("DCN critical batch per slice", "DCN/slice"),
    ]
    ag = next((r.name for r in rows if r.name.startswith("AllGather") and "ring" in r.name), None)
    gpu_ag = next((r.name for r in rows if r.name.startswith("AllGather") and "NVLink" in r.name), None)
    if ag or gpu_ag:
        chip_cols.append((ag or gpu_ag, "AG 1 GB"))
    # a GPU's row fills the TPU columns with its NVLink / InfiniBand counterparts
    stand_in = {v: k for k, v in GPU_ROW_NAMES.items()}
    for d in by.values():
        for name in list(d):
            target = stand_in.get(name)
            if name.startswith("AllGather") and "NVLink" in name:
                target = ag or gpu_ag
            if target and target not in d:
                d[target] = d[name]
    chips = [s for s, d in by.items() if "peak bf16" in d]
    models = [s for s, d in by.items() if "parameters" in d]
    widths = [6] + [10] * len(chip_cols)
    lines = [
        " ".join(
            h.rjust(w) if i else h.ljust(w)
            for i, (h, w) in enumerate(zip(["chip"] + [h for _, h in chip_cols], widths))
        )
    ]
    for chip in chips:
        cells = [chip.ljust(widths[0])]
        for (name, _), w in zip(chip_cols, widths[1:]):
            r = by[chip].get(name)
            if r is None or r.value is None:
                text = "–"
            elif r.unit == "tokens":
                text = f"{r.value:,.0f}"
            elif r.unit == "FLOP/s":
                text = f"{r.value / 1e12:,.0f}"
            else:
                text = r.shown()
            cells.append(text.rjust(w))
        lines.append(" ".join(cells))
    gpus = [chip for chip in chips if any(name in by[chip] for name in GPU_ROW_NAMES.values())]
    if gpus:
        lines += [
            f"GPU rows ({', '.join(gpus)}): ICI α is C / W_nvlink inside one NVLink node; DCN/slice is",
            "per node over its InfiniBand NICs; AG 1 GB is over one NVLink node (Chapter 11).",
        ]
    bare = [chip for chip in chips if by[chip]["peak bf16"].group == "chip" and chip not in gpus]
    bare = [chip for chip in bare if get_chip(chip).kind == "gpu"]
    if bare:
        lines.append(f"{', '.join(bare)}: –, no NVSwitch node or no NIC figure for the GPU network model.")
    lines += ["", f"{'model':<12} {'parameters':>12} {'training FLOPs/token':>22} {'KV cache/token (bf16)':>22}"]
    for model in models:
        d = by[model]
        lines.append(
            f"{model:<12} {d['parameters'].value / 1e9:>11.1f}B "
            f"{d['training FLOPs per token'].shown():>22} {d['KV cache per token (bf16)'].shown():>22}"
        )
    return "\n".join(lines)
