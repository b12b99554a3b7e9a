"""What a training framework will launch, and how it runs what it launches (Chapters 5, 6 and 11).

A layout that is legal by the model's rules (:mod:`tpu_notes.rules`: whole heads, whole sequences...) can still be
one no framework accepts, and the same degrees run differently in different frameworks. A :class:`Framework` holds
the rules and habits the step model and the planner need, each with its source:

- **pipeline schedules**: MaxText builds a pipeline of ``stages × repeats`` equal groups of layers and wants a
  multiple of ``stages`` microbatches; Megatron-LM splits the layers evenly unless told the sizes of the first and
  last stages, and wants a multiple of ``stages`` microbatches only for its interleaved schedule;
- **fused projections**: Megatron fuses the q/k/v and the gate/up weights (one tensor-parallel reduction per block in
  the backward pass); MaxText and torchtitan keep them apart (one per projection);
- **resharding**: whether FSDP drops a gathered weight after the forward pass (PyTorch FSDP's default) or keeps it
  for the backward pass (what XLA compiles when nothing is rematerialised);
- **FP8 scaling**: whether the amax of each tensor is taken inside its cast kernel (Transformer Engine, XLA) or
  in passes of its own with transposed fp8 copies (torchao's tensorwise dynamic scaling, torchtitan's float8);
- **context parallelism**: the exchange its attention uses (an all-gather of keys and values, or a ring of
  point-to-point passes), and what it shards over the context ranks too: all the state, as over ``fsdp`` (MaxText,
  torchtitan), or the distributed optimizer's state (Megatron);
- **its default precision recipe** (:mod:`tpu_notes.training.precision`).

:func:`default_framework` picks MaxText on a TPU and Megatron-LM on a GPU cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..system import check_system
from ..units import OneOf, checked

__all__ = ["FRAMEWORKS", "Framework", "default_framework", "get_framework"]


@dataclass(frozen=True)
class Framework:
    """The launch rules and habits of one training framework (see the module docstring)."""

    name: str
    even_layers: bool  # stages x repeats must divide the layers
    uneven_edges: bool  # may the first and last stages hold fewer layers, when the caller asks for it
    microbatches_per_stage: str  # "always", "interleaved" (only that schedule needs it) or "never"
    fused_projections: bool  # q/k/v and gate/up weights fused: one tensor-parallel backward reduction per block
    reshard_after_forward: bool  # FSDP drops gathered weights after the forward pass (gathers again for backward)
    context_exchange: str  # "all-gather" of keys and values, or "ring" of point-to-point passes
    over_context: str  # what is sharded over the context ranks too: "all" state (as over fsdp) or "optimizer"
    recipe: str  # default precision recipe, a key of tpu_notes.training.precision.RECIPES
    source: str  # where the rules come from
    fp8_scaling: str = "fused"  # FP8 scaling: "fused" (the amax is taken inside the cast kernels: Transformer
    # Engine, XLA) or "tensorwise" (torchao's dynamic tensorwise scaling: separate amax passes and transposed fp8
    # copies, priced by efficiency.fp8_scaling_bytes)


FRAMEWORKS: dict[str, Framework] = {
    "maxtext": Framework(
        name="maxtext",
        even_layers=True,
        uneven_edges=False,
        microbatches_per_stage="always",
        fused_projections=False,
        reshard_after_forward=False,
        context_exchange="all-gather",
        over_context="all",
        recipe="maxtext",
        source="MaxText, MaxText/pyconfig.py pipeline checks (num_layers = stages x repeats x layers per stage; "
        "num_pipeline_microbatches a multiple of the stages) and configs/base.yml (weight_dtype float32)",
    ),
    "megatron": Framework(
        name="megatron",
        even_layers=True,
        uneven_edges=True,
        microbatches_per_stage="interleaved",
        fused_projections=True,
        reshard_after_forward=True,
        context_exchange="ring",
        over_context="optimizer",
        recipe="megatron",
        source="Megatron-LM arguments (--decoder-first/last-pipeline-num-layers; the interleaved schedule's "
        "microbatches a multiple of the pipeline size), Megatron-Core's fused linear_qkv and linear_fc1, "
        "TransformerEngine's point-to-point context parallelism",
    ),
    "torchtitan": Framework(
        name="torchtitan",
        even_layers=False,
        uneven_edges=True,
        microbatches_per_stage="interleaved",
        fused_projections=False,
        reshard_after_forward=True,
        context_exchange="ring",
        over_context="all",
        recipe="fsdp_mixed",
        fp8_scaling="tensorwise",
        source="torchtitan (FSDP2 with reshard_after_forward, separate wq/wk/wv, torch.distributed.pipelining "
        "stages split by module; the FSDP mesh is dp_shard x cp: weights sharded over the context ranks too)",
    ),
}
#: The framework each kind of chip defaults to.
DEFAULT_BY_CHIP_KIND = {"tpu": "maxtext", "gpu": "megatron"}


@checked
def get_framework(name: Annotated[str, OneOf(tuple(FRAMEWORKS))]) -> Framework:
    """The :class:`Framework` called ``name`` (a key of ``FRAMEWORKS``)."""
    return FRAMEWORKS[name]


def default_framework(system) -> Framework:
    """MaxText on a TPU slice, Megatron-LM on a GPU cluster (by the kind of the system's chip)."""
    check_system(system, "system")
    return FRAMEWORKS[DEFAULT_BY_CHIP_KIND[system.chip.kind]]
