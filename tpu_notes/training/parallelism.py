"""How one training step is split over chips: the degrees of each kind of parallelism (Chapter 5).

A :class:`Parallelism` names how many ways each kind of parallelism splits the work. Its degrees multiply to the
chips of one ICI slice (``data × fsdp × context × tensor × pipeline × expert``), and ``dcn`` copies of that slice
train as pure data parallelism over the data-centre network. The JAX layouts of :mod:`tpu_notes.parallel` name
their mesh axes after the fields (:data:`MESH_AXES`), so XLA's collectives can be compared with the model's axis
by axis.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..units import Bool, PositiveInt, check_fields, checked

#: Mesh axis names of the parallelism kinds, in the order a mesh lists them (outermost first).
MESH_AXES = ("data", "fsdp", "context", "pipeline", "expert", "tensor")
#: The abbreviations of :meth:`Parallelism.short` (and the planner's table).
SHORT_NAMES = {"data": "dp", "fsdp": "fsdp", "context": "cp", "pipeline": "pp", "expert": "ep", "tensor": "tp"}


@dataclass(frozen=True)
class Parallelism:
    """Degrees of parallelism of one training step (each ≥ 1; 1 means "not used").

    ``data``: pure data parallelism (weights replicated, gradients AllReduced). ``fsdp``: data parallelism with
    weights, gradients and optimizer state sharded (ZeRO-3: weights AllGathered before use, gradients
    ReduceScattered). ``tensor``: Megatron tensor parallelism of the MLP and attention (activations AllGathered
    and ReduceScattered). ``pipeline``: stages of consecutive layers, ``microbatches`` per step. ``expert``:
    experts of a MoE layer spread over chips (AllToAll dispatch). ``context``: context (sequence) parallelism, each
    sequence split into ``context`` chunks on as many chips, which exchange their keys and values in every attention
    layer (ring attention; weights replicated over it, gradients reduced over it as over ``data``). ``dcn``: slices
    joined by pure data parallelism over DCN (the other degrees are per slice).
    """

    data: PositiveInt = 1  # pure data-parallel degree (within a slice)
    fsdp: PositiveInt = 1  # fully-sharded data-parallel degree (ZeRO-3)
    tensor: PositiveInt = 1  # tensor (Megatron) parallel degree
    pipeline: PositiveInt = 1  # pipeline stages
    expert: PositiveInt = 1  # expert-parallel degree (MoE)
    microbatches: PositiveInt = 1  # microbatches per step (pipeline schedule, gradient accumulation)
    dcn: PositiveInt = 1  # slices in data parallelism over DCN
    context: PositiveInt = 1  # context-parallel degree: chips that split each sequence (ring attention)

    def __post_init__(self):
        check_fields(self)
        if self.pipeline > 1 and self.microbatches < self.pipeline:
            raise ValueError(
                f"microbatches ({self.microbatches}) must be >= pipeline ({self.pipeline}) so every "
                "stage has work; use at least as many microbatches as stages"
            )

    @property
    def chips_per_slice(self) -> int:
        """Chips of one ICI slice: ``data × fsdp × context × tensor × pipeline × expert``."""
        return self.data * self.fsdp * self.context * self.tensor * self.pipeline * self.expert

    @property
    def n_chips(self) -> int:
        """All chips: ``chips_per_slice × dcn``."""
        return self.chips_per_slice * self.dcn

    @property
    def batch_shards(self) -> int:
        """Ways the global batch of whole sequences is split: ``data × fsdp × expert × dcn`` (tensor, pipeline and
        context ranks share a shard's sequences; context ranks each take a chunk of every one)."""
        return self.data * self.fsdp * self.expert * self.dcn

    @property
    def token_shards(self) -> int:
        """Ways the batch's tokens are split: ``batch_shards × context``."""
        return self.batch_shards * self.context

    @checked
    def mesh_shape(self, drop_ones: Bool = True) -> dict[str, int]:
        """The mesh of one slice as ``{axis name: size}`` in :data:`~tpu_notes.training.parallelism.MESH_AXES` order
        (size-1 axes dropped)."""
        shape = {a: getattr(self, a) for a in MESH_AXES}
        return {a: n for a, n in shape.items() if n > 1 or not drop_ones}

    def label(self) -> str:
        """A short name, e.g. ``"fsdp=64 x tensor=4"`` (``"single chip"`` when nothing is split)."""
        parts = [f"{a}={n}" for a, n in self.mesh_shape().items()]
        if self.dcn > 1:
            parts.append(f"dcn={self.dcn}")
        if self.pipeline > 1:
            parts.append(f"mb={self.microbatches}")
        return " x ".join(parts) or "single chip"

    def short(self) -> str:
        """A compact name for tables, e.g. ``"dp2 fsdp64 tp4"``, ``"cp4 pp8 tp8 mb16"`` (``"1 chip"``): the
        abbreviations of :data:`SHORT_NAMES`."""
        parts = [f"{SHORT_NAMES[a]}{n}" for a, n in self.mesh_shape().items()]
        if self.dcn > 1:
            parts.append(f"dcn{self.dcn}")
        if self.pipeline > 1 or self.microbatches > 1:
            parts.append(f"mb{self.microbatches}")
        return " ".join(parts) or "1 chip"

    def __str__(self) -> str:
        """The layout as a practitioner writes it: ``"fsdp=1024 tp=2"``, the degrees above 1 in
        :data:`MESH_AXES` order under the abbreviations of :data:`SHORT_NAMES`, then ``dcn=N`` and ``mb=N``
        (``"1 chip"`` when nothing is split). :meth:`label` spells the axes out (``"fsdp=1024 x tensor=2"``)."""
        parts = [f"{SHORT_NAMES[a]}={n}" for a, n in self.mesh_shape().items()]
        if self.dcn > 1:
            parts.append(f"dcn={self.dcn}")
        if self.pipeline > 1 or self.microbatches > 1:
            parts.append(f"mb={self.microbatches}")
        return " ".join(parts) or "1 chip"
