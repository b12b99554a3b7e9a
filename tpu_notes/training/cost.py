"""FLOPs, time, utilisation and money of a training run (Chapters 5 and 6).

Conventions (stated once, used everywhere in the book):

- **Model FLOPs** per token are :meth:`~tpu_notes.transformer.TransformerConfig.flops_per_token` with
  ``training=True``: ``6 ×`` the weights a token multiplies by (the unembedding included, the input-embedding
  lookup not), plus attention when asked (``include_attention=True``, causal by default: each query sees
  ``seq_len / 2`` keys on average).
- **MFU** (model FLOPs utilisation) divides the model FLOPs a run achieves per second by the chips' dense bf16
  peak. FLOPs spent recomputing activations (rematerialisation) do not count: they count in **HFU** (hardware
  FLOPs utilisation), which is always ``>= MFU``.
- A chip is a name or a :class:`~tpu_notes.hardware.Chip`; the peak is ``chip.peak_flops(dtype)``.
"""

from __future__ import annotations

from typing import Annotated

from .. import rules
from ..hardware import get_chip
from ..transformer import ALL_REMAT_POLICIES, as_config
from ..units import Bool, DTypeName, Fraction, OneOf, PositiveFloat, PositiveInt, SeqLen, checked

SECONDS_PER_DAY = 86_400.0
SECONDS_PER_HOUR = 3_600.0


Remat = Annotated[str, OneOf(ALL_REMAT_POLICIES)]


@checked
def flops_per_token(
    model,
    *,
    include_attention: Bool = False,
    seq_len: SeqLen | None = None,
    causal: Bool = True,
    remat: Remat = "none",
) -> float:
    """Training FLOPs per token (forward + backward) of ``model`` (a preset name or a ``TransformerConfig``).

    ``include_attention`` adds the dot-product attention of sequences of ``seq_len`` tokens. ``remat`` adds the
    forward work a rematerialisation policy repeats (``"full_block"``: the layers' forward again, about
    ``8·params`` instead of ``6·params``; the other policies:
    :meth:`~tpu_notes.transformer.TransformerConfig.recompute_flops`); those are hardware FLOPs, not model FLOPs.
    """
    m = as_config(model)
    if include_attention or remat != "none":
        if seq_len is None:
            raise ValueError("seq_len is needed when include_attention=True or remat is not 'none'")
    s = seq_len if seq_len is not None else 1
    f = m.flops_per_token(s, training=True, causal=causal, include_attention=include_attention)
    if remat != "none":
        f += m.recompute_flops(s, policy=remat, causal=causal)
    return f


@checked
def training_flops(
    model,
    tokens: PositiveFloat,
    *,
    include_attention: Bool = False,
    seq_len: SeqLen | None = None,
    causal: Bool = True,
) -> float:
    """Model FLOPs to train ``model`` on ``tokens`` tokens: ``tokens × flops_per_token`` (about ``6·params·tokens``)."""
    return tokens * flops_per_token(model, include_attention=include_attention, seq_len=seq_len, causal=causal)


@checked
def training_time(
    model,
    tokens: PositiveFloat,
    chip,
    n_chips: PositiveInt,
    mfu: Fraction,
    *,
    dtype: DTypeName = "bf16",
    include_attention: Bool = False,
    seq_len: SeqLen | None = None,
) -> float:
    """Seconds to train ``model`` on ``tokens`` tokens with ``n_chips`` chips running at ``mfu`` of peak (a
    fraction in (0, 1]): ``training_flops / (n_chips · peak · mfu)``."""
    c = get_chip(chip)
    flops = training_flops(model, tokens, include_attention=include_attention, seq_len=seq_len)
    return flops / (n_chips * c.peak_flops(dtype) * mfu)


@checked
def mfu(
    model,
    tokens_per_s: PositiveFloat,
    chip,
    n_chips: PositiveInt,
    *,
    dtype: DTypeName = "bf16",
    include_attention: Bool = False,
    seq_len: SeqLen | None = None,
) -> float:
    """Model FLOPs utilisation of a run that trains ``tokens_per_s`` tokens per second on ``n_chips`` chips.

    ``tokens_per_s × flops_per_token / (n_chips × peak)``; remat FLOPs are not counted (see :func:`hfu`). A
    throughput that would need more than the chips' peak is impossible and refused, naming ``tokens_per_s``.
    """
    c = get_chip(chip)
    f = flops_per_token(model, include_attention=include_attention, seq_len=seq_len)
    return rules.at_most_peak(tokens_per_s * f / (n_chips * c.peak_flops(dtype)), argument="tokens_per_s")


@checked
def hfu(
    model,
    tokens_per_s: PositiveFloat,
    chip,
    n_chips: PositiveInt,
    *,
    seq_len: SeqLen,
    remat: Remat = "full_block",
    dtype: DTypeName = "bf16",
    include_attention: Bool = True,
) -> float:
    """Hardware FLOPs utilisation: like :func:`mfu` but counting the FLOPs ``remat`` recomputes (refused above 1,
    naming ``tokens_per_s``)."""
    c = get_chip(chip)
    f = flops_per_token(model, include_attention=include_attention, seq_len=seq_len, remat=remat)
    return rules.at_most_peak(tokens_per_s * f / (n_chips * c.peak_flops(dtype)), argument="tokens_per_s", what="HFU")


@checked
def chip_hours(model, tokens: PositiveFloat, chip, mfu: Fraction, **kwargs) -> float:
    """Chip-hours to train on ``tokens`` tokens at ``mfu`` (independent of how many chips share the work)."""
    return training_time(model, tokens, chip, 1, mfu, **kwargs) / SECONDS_PER_HOUR


@checked
def training_cost(
    model, tokens: PositiveFloat, chip, mfu: Fraction, dollars_per_chip_hour: PositiveFloat | None = None, **kwargs
) -> float:
    """US dollars to train on ``tokens`` tokens at ``mfu``: chip-hours × price (default: the chip's on-demand
    price in :mod:`tpu_notes.hardware`; a ``ValueError`` if it has none and none is given)."""
    c = get_chip(chip)
    if dollars_per_chip_hour is None:
        if c.dollars_per_hour is None:
            raise ValueError(f"{c.long_name} has no price in tpu_notes.hardware; pass dollars_per_chip_hour")
        dollars_per_chip_hour = c.dollars_per_hour
    return chip_hours(model, tokens, c, mfu, **kwargs) * dollars_per_chip_hour
