"""The memory oracle of Chapter 5: XLA's ``compiled.memory_analysis()`` of a real training step beside the
modelled :func:`~tpu_notes.training.training_memory`.

:func:`memory_row` compiles one layout of :data:`tpu_notes.parallel.TRAINING_CASES` (the step of
:func:`tpu_notes.parallel.compiled_step`: loss, gradients and an SGD update, parameters and activations in fp32,
no optimizer state) and reads what XLA's buffer assignment reserves per device: the **arguments** (this device's
shard of the parameters, its tokens and the learning rate), the **outputs** (the updated parameters and the loss,
plus XLA's table of output pointers), the bytes **aliased** between them, the **temporaries** (gradients, saved
activations, gathered weights, the logits and every intermediate, packed by liveness into one allocation) and the
generated code. XLA's peak per device is ``argument + output − alias + temp``.

The model is asked about the same step: :func:`~tpu_notes.training.training_memory` with ``optimizer="sgd"``,
fp32 parameters, gradients and activations, ``remat="none"`` (or ``"full_block"`` for a ``jax.checkpoint`` per
layer) and the GPipe schedule for the pipelines. Like is compared with like: XLA's arguments with the modelled
parameters and optimizer state (the model leaves out the token batch, listed as ``inputs``), XLA's temporaries with
the modelled gradients, activations, gathered weights and largest transient.

Where the modelled peak and XLA's differ by more than :data:`TOLERANCE`, the row's ``MemoryRow.note`` says why,
from the named :data:`DEPARTURES`, each priced in bytes from the config and the layout alone (never from XLA's
figures): what this small trainer does differently from the layout the model assumes, and what XLA's buffer
assignment keeps that the model's sum does not. ``explained`` adds them to the modelled peak.

Run ``python -m tpu_notes.memory_oracle`` for the table. Importing this module imports JAX.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import jax

from . import parallel
from .training import MemoryBreakdown, Parallelism, training_memory
from .transformer import TransformerConfig
from .units import dtype_bytes, fmt

#: Relative gap between the modelled and XLA's peak within which a row needs no note.
TOLERANCE = 0.10

#: Why the modelled peak and XLA's differ, by name; :func:`memory_row` prices each in bytes per device.
DEPARTURES: dict[str, str] = {
    "inputs": (
        "XLA's arguments include the device's token batch (int32) and the learning rate; the model counts the "
        "state a step keeps, not its inputs."
    ),
    "replicated-weights": (
        "This trainer keeps the embedding, unembedding and norm gains replicated over the tensor axis and on every "
        "pipeline stage; the model divides every weight by tensor x pipeline (Megatron splits the vocabulary and "
        "puts the embedding on the first stage, the unembedding on the last). Counted twice: the weights and "
        "their gradients."
    ),
    "update-not-in-place": (
        "The SGD update writes the new parameters beside the old ones: XLA's outputs hold a second copy of the "
        "weights. The model counts one copy, as for a step whose parameters are donated and updated in place; "
        "on the CPU backend donating them (donate_argnums) moves the copy into the temporaries instead and "
        "leaves the sum unchanged."
    ),
    "vocab-not-split": (
        "The logits [tokens, V] and their gradient are fp32 and whole on every tensor rank (the unembedding is "
        "replicated); the model's largest transient splits the vocabulary over the tensor axis."
    ),
    "residual-replicated": (
        "The model divides all saved activations by the tensor degree (the residual stream In[B, D_Y], sequence "
        "parallelism). This trainer, like Megatron without sequence parallelism, keeps the block input, the two "
        "norm outputs and the residual after attention whole on every tensor rank (with remat: the block input)."
    ),
    "attention-scores": (
        "tpu_notes.model's attention materialises the softmax probabilities [B, N, T, T] and saves them for the "
        "backward pass (N x T values per token and layer); the model assumes a flash-style kernel that recomputes "
        "them. Small at T = 16, the term grows with the sequence: a real step needs flash attention."
    ),
    "gradients-replace-activations": (
        "The model's total adds every gradient and every saved activation as if all lived at once. XLA frees "
        "each layer's activations in the backward pass as that layer's gradients appear: the peak holds about "
        "the larger of the two, not their sum (less min(gradients, activations)). A conservative overcount that "
        "holds at scale too, except under gradient accumulation, where the accumulated gradients stay live."
    ),
    "fsdp-unreduced-gradients": (
        "Under FSDP each gathered weight's gradient is whole (unreduced) before its ReduceScatter. XLA combines "
        "every gradient reduction of the step into one op at its end (parallel.FINDINGS['combined']), so all the "
        "whole gradients live at once, and the CPU backend spells the ReduceScatter as an AllReduce (whose whole "
        "result is a second buffer) and a slice. The model counts only the sharded gradients."
    ),
    "cpu-working-buffers": (
        "The rest of XLA's temporaries: transposed copies of weights for the CPU's matmul kernels, fusion outputs, "
        "fp32 softmax and norm intermediates alive at the high-water mark. Under tensor parallelism most of it is "
        "whole [tokens, D] buffers (the buffer assignment lists a dozen alive at once for tensor=8): the partial "
        "sums entering Megatron's AllReduces and their results (the CPU's AllReduce is not in place), the "
        "backward's five input-gradient AllReduces per layer (parallel.FINDINGS['tp-backward-per-projection']), "
        "and norm inputs kept for the backward. Not priced: they depend on the backend's fusion and scheduling."
    ),
}


@dataclass(frozen=True)
class MemoryRow:
    """One layout's memory per device: XLA's buffer assignment of the compiled step beside the modelled breakdown
    (all bytes)."""

    id: str  # the oracle case, e.g. "fsdp=2 x tensor=4"
    parallelism: Parallelism  # the layout
    remat: bool  # each layer recomputed in the backward pass
    argument: int  # XLA: bytes of the step's arguments on one device (parameter shard, tokens, learning rate)
    output: int  # XLA: bytes of its outputs (new parameters, loss, the output pointer table)
    alias: int  # XLA: bytes of outputs that reuse an argument's buffer (0: the parameters are not donated)
    temp: int  # XLA: bytes of the temporaries' allocation (gradients, activations, gathered weights, ...)
    code: int  # XLA: bytes of generated code the backend reports (0 on the CPU backend)
    model: MemoryBreakdown  # training_memory(...) of the same step, per device
    inputs: float  # tokens (int32) and learning rate per device: in XLA's arguments, not in the model
    departures: tuple[tuple[str, float], ...]  # (name in DEPARTURES, bytes added to the modelled peak), priced
    note: str  # why the modelled and XLA's peak differ by more than TOLERANCE ("" when they agree)

    @property
    def xla_peak(self) -> int:
        """XLA's bytes at the step's high-water mark: ``argument + output − alias + temp``."""
        return self.argument + self.output - self.alias + self.temp

    @property
    def model_peak(self) -> float:
        """The modelled peak, :attr:`~tpu_notes.training.memory.MemoryBreakdown.peak`."""
        return self.model.peak

    @property
    def gap(self) -> float:
        """``model_peak / xla_peak − 1``: negative when the model counts less than XLA reserves."""
        return self.model_peak / self.xla_peak - 1.0

    @property
    def model_argument(self) -> float:
        """The modelled counterpart of XLA's arguments: parameters + optimizer state (+ the inputs)."""
        return self.model.params + self.model.optimizer + self.inputs

    @property
    def model_temp(self) -> float:
        """The modelled counterpart of XLA's temporaries: gradients + activations + gathered weights + transient."""
        m = self.model
        return m.grads + m.activations + m.gathered + m.transient

    @property
    def explained(self) -> float:
        """The modelled peak plus every priced departure: what the model would say of this trainer's step."""
        return self.model_peak + sum(b for _, b in self.departures)

    @property
    def explained_gap(self) -> float:
        """``explained / xla_peak − 1``: what the priced departures leave unexplained (CPU working buffers)."""
        return self.explained / self.xla_peak - 1.0

    @property
    def agrees(self) -> bool:
        """True when the modelled peak is within :data:`TOLERANCE` of XLA's."""
        return abs(self.gap) <= TOLERANCE

    def __repr__(self) -> str:
        return (
            f"MemoryRow({self.id!r}, xla_peak={fmt(self.xla_peak, 'B')}, model_peak={fmt(self.model_peak, 'B')}, "
            f"gap={self.gap:+.0%}, explained={fmt(self.explained, 'B')})"
        )


def _check_case(case) -> parallel.TrainingCase:
    if not isinstance(case, parallel.TrainingCase):
        raise TypeError(
            f"case must be a parallel.TrainingCase (see parallel.TRAINING_CASES); got {type(case).__name__}"
        )
    return case


def step_memory(case: parallel.TrainingCase, devices=None) -> MemoryBreakdown:
    """:func:`~tpu_notes.training.training_memory` of the step :func:`tpu_notes.parallel.compiled_step` compiles
    for ``case``: SGD (no optimizer state), parameters, gradients and activations in the step's fp32, remat
    ``"none"`` or ``"full_block"`` (``jax.checkpoint`` of each layer), the GPipe schedule for a pipeline."""
    case = _check_case(case)
    dtype = "fp32"  # run_training_case compiles in compiled_step's default dtype
    p = case.parallelism
    return training_memory(
        case.config,
        p,
        case.batch * case.seq_len,
        case.seq_len,
        optimizer="sgd",
        param_dtype=dtype,
        activation_dtype=dtype,
        remat="full_block" if case.remat else "none",
        schedule="gpipe",
    )


def trainer_param_bytes(config: TransformerConfig, parallelism: Parallelism, dtype: str = "fp32") -> float:
    """Bytes of parameters one device holds in :mod:`tpu_notes.parallel`'s layout, from the shapes of
    :func:`tpu_notes.model.param_shapes` and the specs of :func:`tpu_notes.parallel.param_specs` (each dimension
    divided by the sizes of the mesh axes that split it)."""
    from . import model as M
    from .transformer import as_config

    config = as_config(config, "config")
    if not isinstance(parallelism, Parallelism):
        raise TypeError(f"parallelism must be a tpu_notes.training.Parallelism; got {type(parallelism).__name__}")
    if not isinstance(dtype, str) or dtype not in parallel.STEP_DTYPES:
        raise ValueError(f"dtype must be one of {list(parallel.STEP_DTYPES)}; got {dtype!r}")
    parallel.param_specs(config, parallelism)  # refuses a layout the trainer cannot run
    if parallelism.pipeline > 1 and config.n_layers % parallelism.pipeline:
        raise ValueError(f"parallelism.pipeline ({parallelism.pipeline}) must divide the {config.n_layers} layers")
    shapes = M.param_shapes(config, parallel.STEP_DTYPES[dtype])
    if parallelism.pipeline > 1:
        shapes = jax.eval_shape(lambda s: parallel.stage_params(s, parallelism.pipeline), shapes)
    specs = parallel.param_specs(config, parallelism)
    sizes = parallelism.mesh_shape()
    leaves = jax.tree_util.tree_leaves(shapes)
    spec_leaves = jax.tree_util.tree_leaves(specs, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec))
    total = 0.0
    for shape, spec in zip(leaves, spec_leaves, strict=True):
        split = 1
        for entry in spec:
            for axis in (entry,) if isinstance(entry, str) else (entry or ()):
                split *= sizes.get(axis, 1)
        total += math.prod(shape.shape) / split
    return total * dtype_bytes(dtype)


def _departures(case: parallel.TrainingCase, m: MemoryBreakdown) -> list[tuple[str, float]]:
    """The priced departures of ``case`` from the modelled step, bytes per device (see :data:`DEPARTURES`)."""
    c, p = case.config, case.parallelism
    b = dtype_bytes("fp32")
    t = p.tensor
    tokens_mb = case.batch * case.seq_len / (p.token_shards * p.microbatches)
    layers = c.n_layers / p.pipeline
    in_flight = p.microbatches if p.pipeline > 1 else 1
    saved_tokens = tokens_mb * layers * in_flight
    held = trainer_param_bytes(c, p)
    out = [("inputs", 4.0 * case.batch * case.seq_len / p.batch_shards + 4.0)]
    out.append(("replicated-weights", 2.0 * (held - m.params)))
    out.append(("update-not-in-place", held))
    if t > 1:
        out.append(("vocab-not-split", 4.0 * tokens_mb * c.vocab * (1.0 - 1.0 / t)))
        k = 1 if case.remat else 4  # D-sized saves kept whole: block input (+ two norm outputs, mid residual)
        out.append(("residual-replicated", b * saved_tokens * k * c.d_model * (1.0 - 1.0 / t)))
    if not case.remat:
        out.append(("attention-scores", b * saved_tokens * c.n_heads * case.seq_len / t))
    grads = m.grads + (held - m.params)
    acts = m.activations + sum(v for k, v in out if k in ("residual-replicated", "attention-scores"))
    if p.microbatches == 1:
        out.append(("gradients-replace-activations", -min(grads, acts)))
    if p.fsdp > 1:
        whole = held * p.fsdp  # this device's tensor/pipeline share of every weight, gathered
        out.append(("fsdp-unreduced-gradients", whole))
    return out


def _note(row_gap: float, departures, xla_peak: int, explained: float) -> str:
    if abs(row_gap) <= TOLERANCE:
        return ""
    big = [(k, v) for k, v in departures if abs(v) >= 0.05 * xla_peak]
    parts = [f"{k} {'+' if v >= 0 else '-'}{fmt(abs(v), 'B')}" for k, v in sorted(big, key=lambda kv: -abs(kv[1]))]
    rest = xla_peak - explained
    parts.append(f"cpu-working-buffers {'+' if rest >= 0 else '-'}{fmt(abs(rest), 'B')} (unpriced)")
    return "; ".join(parts)


def memory_row(case: parallel.TrainingCase, devices=None) -> MemoryRow:
    """Compile ``case``'s step (cached by :func:`tpu_notes.parallel.compiled_step`) and pair XLA's
    ``memory_analysis()`` per device with :func:`step_memory`, the departures priced and, where the peaks differ
    by more than :data:`TOLERANCE`, a note naming the departures that explain it."""
    case = _check_case(case)
    compiled = parallel.compiled_step(
        case.config, case.parallelism, case.batch, case.seq_len, devices=devices, remat=case.remat
    )
    ma = compiled.memory_analysis()
    if ma is None:
        raise RuntimeError("this JAX backend reports no memory_analysis() for a compiled step")
    m = step_memory(case)
    deps = _departures(case, m)
    inputs = dict(deps)["inputs"]
    argument, output = int(ma.argument_size_in_bytes), int(ma.output_size_in_bytes)
    alias, temp = int(ma.alias_size_in_bytes), int(ma.temp_size_in_bytes)
    code = int(ma.generated_code_size_in_bytes)
    xla_peak = argument + output - alias + temp
    gap = m.peak / xla_peak - 1.0
    explained = m.peak + sum(v for _, v in deps)
    return MemoryRow(
        id=case.id,
        parallelism=case.parallelism,
        remat=case.remat,
        argument=argument,
        output=output,
        alias=alias,
        temp=temp,
        code=code,
        model=m,
        inputs=inputs,
        departures=tuple(deps),
        note=_note(gap, deps, xla_peak, explained),
    )


def memory_rows(cases: Sequence[parallel.TrainingCase] | None = None, devices=None) -> list[MemoryRow]:
    """:func:`memory_row` of every layout in ``cases`` (default: :data:`tpu_notes.parallel.TRAINING_CASES`, the
    Chapter 5 oracle layouts), in order."""
    cases = parallel.TRAINING_CASES if cases is None else cases
    if (
        isinstance(cases, (str, bytes))
        or not isinstance(cases, Sequence)
        or not all(isinstance(c, parallel.TrainingCase) for c in cases)
    ):
        raise TypeError("cases must be None or a list of parallel.TrainingCase (see parallel.training_cases)")
    return [memory_row(c, devices) for c in cases]


def format_memory_table(rows: Sequence[MemoryRow], notes: bool = True) -> str:
    """Rows as a plain-text table at most 84 characters wide: per device, XLA's arguments, outputs and temporaries,
    its peak, the modelled peak and their gap, and the modelled peak with the priced departures added; then, with
    ``notes=True``, each row's note (what explains a gap over :data:`TOLERANCE`)."""
    import textwrap

    if (
        isinstance(rows, (str, bytes))
        or not isinstance(rows, Sequence)
        or not all(isinstance(r, MemoryRow) for r in rows)
    ):
        raise TypeError("rows must be a list of memory_oracle.MemoryRow (from memory_rows)")
    if not isinstance(notes, bool):
        raise TypeError(f"notes must be True or False; got {notes!r}")
    head = f"{'layout':24s} {'arg':>7s} {'out':>7s} {'temp':>7s} {'XLA':>7s} {'model':>7s} {'gap':>5s} {'explnd':>7s}"
    lines = [head]
    for r in rows:
        name = r.id if len(r.id) <= 24 else r.id[:23] + "…"
        lines.append(
            f"{name:24s} {fmt(r.argument, 'B'):>7s} {fmt(r.output, 'B'):>7s} {fmt(r.temp, 'B'):>7s} "
            f"{fmt(r.xla_peak, 'B'):>7s} {fmt(r.model_peak, 'B'):>7s} {r.gap:+5.0%} {fmt(r.explained, 'B'):>7s}"
        )
    if notes:
        noted = [r for r in rows if r.note]
        if noted:
            lines.append("")
            lines.append(f"Gaps over {TOLERANCE:.0%}, by departure (memory_oracle.DEPARTURES):")
        for r in noted:
            lines += textwrap.wrap(f"{r.id}: {r.note}", width=84, subsequent_indent="    ", break_on_hyphens=False)
    return "\n".join(lines)


def _main() -> None:
    """Print :func:`format_memory_table` of every Chapter 5 oracle layout on 8 (simulated) devices."""
    from .devices import setup

    setup(8)
    print(format_memory_table(memory_rows()))


if __name__ == "__main__":
    _main()
