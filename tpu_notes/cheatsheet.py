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
from .table import Column, Table
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


def _check_rows(rows) -> None:
    if not isinstance(rows, (list, tuple)) or not all(isinstance(r, Number) for r in rows):
        raise TypeError("rows must be a list of Number from numbers_to_know()")


def _by_subject(rows: Sequence[Number]) -> dict[str, dict[str, Number]]:
    """{subject: {name: Number}}, a GPU's NVLink/InfiniBand rows also filed under the TPU columns they stand in for."""
    by: dict[str, dict[str, Number]] = {}
    for r in rows:
        by.setdefault(r.subject, {})[r.name] = r
    ag = next((r.name for r in rows if r.name.startswith("AllGather") and "ring" in r.name), None)
    stand_in = {v: k for k, v in GPU_ROW_NAMES.items()}
    for d in by.values():
        for name in list(d):
            target = stand_in.get(name)
            if name.startswith("AllGather") and "NVLink" in name:
                target = ag or "AllGather of 1 GB"
            if target and target not in d:
                d[target] = d[name]
    return by


def chips_table(rows: Sequence[Number]) -> Table:
    """The chip rows of ``rows`` as a :class:`tpu_notes.table.Table`: peak, HBM, and the critical batches of each
    resource, with a note under it saying what a GPU's columns measure."""
    _check_rows(rows)
    by = _by_subject(rows)
    ag = next((r.name for r in rows if r.name.startswith("AllGather") and "ring" in r.name), None)
    if ag is None and any("NVLink" in r.name and r.name.startswith("AllGather") for r in rows):
        ag = "AllGather of 1 GB"
    cols = [
        ("peak bf16", Column("bf16 peak", "FLOP/s", scale="TFLOP/s")),
        ("HBM bandwidth", Column("HBM", "B/s", scale="TB/s")),
        ("HBM capacity", Column("HBM size", "B", scale="GB", digits=2)),
        ("critical batch (HBM, bf16)", Column("B_crit HBM", "tokens")),
        ("data/FSDP critical batch per chip, one axis", Column("ICI α", "tokens")),
        ("DCN critical batch per slice", Column("DCN per slice", "tokens")),
    ]
    if ag:
        cols.append((ag, Column("AllGather 1 GB", "s")))
    chips = [s for s, d in by.items() if "peak bf16" in d]

    def cell(chip: str, name: str):
        r = by[chip].get(name)
        if r is None or r.value is None:
            return None
        return round(r.value) if r.unit == "tokens" else r.value

    body = [(chip, *(cell(chip, name) for name, _ in cols)) for chip in chips]
    notes = []
    gpus = [chip for chip in chips if any(name in by[chip] for name in GPU_ROW_NAMES.values())]
    if gpus:
        notes.append(
            f"GPU rows ({', '.join(gpus)}): ICI α is C / W_nvlink inside one NVLink node; DCN per slice is per node "
            "over its InfiniBand NICs; the AllGather is over one NVLink node (Chapter 11)."
        )
    bare = [chip for chip in chips if by[chip]["peak bf16"].group == "chip" and chip not in gpus]
    bare = [chip for chip in bare if get_chip(chip).kind == "gpu"]
    if bare:
        notes.append(f"{', '.join(bare)}: –, no NVSwitch node or no NIC figure for the GPU network model.")
    return Table([Column("chip"), *(c for _, c in cols)], body, caption="Chips", notes=notes)


def models_table(rows: Sequence[Number]) -> Table:
    """The model rows of ``rows`` as a :class:`tpu_notes.table.Table`: parameters, training FLOPs per token and
    KV cache per token (bf16)."""
    _check_rows(rows)
    by = _by_subject(rows)
    models = [s for s, d in by.items() if "parameters" in d]
    body = [
        (
            m,
            by[m]["parameters"].value / 1e9,
            by[m]["training FLOPs per token"].value,
            by[m]["KV cache per token (bf16)"].value,
        )
        for m in models
    ]
    cols = [
        Column("model"),
        Column("parameters", "billion", digits=4),
        Column("training per token", "FLOPs", scale="GFLOP"),
        Column("KV cache per token", "B", scale="kB"),
    ]
    return Table(cols, body, caption="Models")


def formulas_table() -> Table:
    """:data:`FORMULAS` as a :class:`tpu_notes.table.Table`: the formula, the chapter and the function."""
    return Table(
        [Column("quantity", wrap=True), Column("formula", wrap=True), Column("chapter"), Column("function")],
        [(name, formula, chapter, function) for name, formula, chapter, function in FORMULAS],
        caption="The formulas behind the numbers",
    )


def format_numbers(rows: Sequence[Number]) -> str:
    """The rows as two plain-text tables (:func:`chips_table`, then :func:`models_table`) with the GPU note."""
    _check_rows(rows)
    return f"{chips_table(rows).text()}\n\n{models_table(rows).text()}"
