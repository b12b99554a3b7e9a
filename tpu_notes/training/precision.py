"""How frameworks keep a model's state in memory: named precision recipes (Chapters 5 and 6).

A training step keeps, per parameter, the weights, their gradients, the optimizer's moments and sometimes an fp32
master copy of bf16 weights. Which dtype each has is a framework's recipe, and it sets how many bytes per parameter
a layout needs before any activation:

======================  ========  =====  ======  =======  ========================================================
recipe                  weights   grads  master  moments  source
======================  ========  =====  ======  =======  ========================================================
``bf16``                2         2      0       8        the chapters' count: bf16 weights and gradients, fp32 Adam
``maxtext``             4         4      0       8        MaxText's default ``weight_dtype: float32`` (bf16 compute)
``bf16_master``         2         2      4       8        bf16 weights with an fp32 master copy
``fsdp_mixed``          4         4      0       8        PyTorch FSDP2 mixed precision: fp32 sharded parameters
``megatron``            2         4      4       8        Megatron mixed precision, fp32 main gradients, the
                                                          distributed optimizer (master and moments over data)
``fp8``                 2         4      4       8        as ``megatron``, the linear layers' matmuls in FP8
======================  ========  =====  ======  =======  ========================================================

Megatron's distributed optimizer shards the fp32 master weights and moments over the data-parallel ranks (ZeRO-1:
``6 + 12/d`` bytes per parameter instead of 18); an FSDP axis shards everything, whatever the recipe.

**What is priced in which dtype.** Memory follows the recipe. Communication and the gathered copies of FSDP
weights are priced in the compute dtype (bf16; FP8 recipes keep bf16 weights to gather): XLA moves a narrowing
cast before an all-gather, and Megatron reduces gradients in bf16 when asked (``--grad-reduce-in-bf16``). A recipe
that reduces fp32 gradients pays up to twice the data-parallel bytes priced here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ..units import OneOf, checked

__all__ = ["RECIPES", "PrecisionRecipe", "get_recipe"]


@dataclass(frozen=True)
class PrecisionRecipe:
    """Bytes per parameter of each piece of training state, and the dtype the matmuls run in."""

    name: str
    weights: float  # bytes per parameter of the stored weights
    grads: float  # bytes per parameter of the gradients (the accumulation buffer)
    master: float  # bytes per parameter of an fp32 master copy (0 when the weights are fp32 already)
    moments: float  # bytes per parameter of Adam's two moments
    matmul_dtype: str  # "bf16" or "fp8": the dtype of the linear layers' matmuls
    optimizer_over_data: bool  # master and moments sharded over the data-parallel ranks (ZeRO-1)
    source: str

    @property
    def bytes_per_param(self) -> float:
        """Bytes per parameter with nothing sharded: weights + gradients + master + moments."""
        return self.weights + self.grads + self.master + self.moments

    @property
    def optimizer(self) -> float:
        """Bytes per parameter of optimizer state: the master copy and the moments."""
        return self.master + self.moments


RECIPES: dict[str, PrecisionRecipe] = {
    "bf16": PrecisionRecipe("bf16", 2, 2, 0, 8, "bf16", False, "the chapters' count (Chapter 5)"),
    "maxtext": PrecisionRecipe(
        "maxtext", 4, 4, 0, 8, "bf16", False, "MaxText configs/base.yml: weight_dtype float32, dtype bfloat16"
    ),
    "bf16_master": PrecisionRecipe("bf16_master", 2, 2, 4, 8, "bf16", False, "bf16 weights, fp32 master copy"),
    "fsdp_mixed": PrecisionRecipe(
        "fsdp_mixed", 4, 4, 0, 8, "bf16", False, "PyTorch FSDP2 MixedPrecisionPolicy(param_dtype=bf16), fp32 params"
    ),
    "megatron": PrecisionRecipe(
        "megatron",
        2,
        4,
        4,
        8,
        "bf16",
        True,
        "Megatron-LM --bf16 --use-distributed-optimizer (docs: 18 bytes per parameter, 6 + 12/d sharded)",
    ),
    "fp8": PrecisionRecipe(
        "fp8", 2, 4, 4, 8, "fp8", True, "Megatron-LM with TransformerEngine --fp8-format hybrid (bf16 weights kept)"
    ),
}


@checked
def get_recipe(name: Annotated[str, OneOf(tuple(RECIPES))]) -> PrecisionRecipe:
    """The :class:`PrecisionRecipe` called ``name`` (a key of ``RECIPES``)."""
    return RECIPES[name]
