"""The collectives of one training step, derived from the weight shapes and the layout rules (Chapter 5).

Pure Python, no JAX: the analysis layer. :func:`predicted_collectives` lists what each device sends and receives in
one SGD step of :mod:`tpu_notes.model`'s architecture (a dense pre-norm decoder: embedding, ``L`` layers of
attention and MLP, final norm, unembedding) laid out by a :class:`~tpu_notes.training.Parallelism` with the rules
of :mod:`tpu_notes.parallel`. The rules are those XLA compiles (checked on 8 simulated CPU devices by
``tests/test_training_oracle.py`` for :data:`tpu_notes.parallel.TRAINING_CASES` and by
``tests/test_training_oracle_drawn.py`` for drawn configs and layouts; ``tpu_notes.parallel.FINDINGS`` tells where
they depart from the textbook count and ``FOLDED`` how this model counts each departure):

- **data**: an AllReduce over ``"data"`` of every gradient (each device holds whole gradients of its weights).
- **fsdp** (ZeRO-3): an AllGather over ``"fsdp"`` of every weight before its use, and a ReduceScatter over
  ``"fsdp"`` of every gradient. Without rematerialisation (``remat=False``, what XLA does then) the gathered
  weight stays alive for the backward pass and is gathered once; with ``remat=True`` (each layer recomputed in
  the backward pass, as :func:`tpu_notes.parallel.layout_loss` does it) each layer's weights are gathered a
  second time there; the embedding, final norm and unembedding, outside the layers, once.
- **data x fsdp**: one reduction of each gradient over both axes, kept as the fsdp shard: a ReduceScatter over
  ``("data", "fsdp")`` of the whole (tensor-split) gradient, not the textbook two steps (a ReduceScatter over
  ``"fsdp"``, then an AllReduce over ``"data"`` of the ``1/fsdp`` shard). XLA's SPMD partitioner emits an
  ``all-reduce`` over all ``data x fsdp`` devices whose result only a ``dynamic-slice`` reads (the fsdp shard, the
  same on every data replica); :func:`tpu_notes.hlo.normalize_cpu_collectives` folds that spelling into the
  ``reduce-scatter`` listed here, and ``bytes_per_device`` (the unreduced gradient) is the all-reduce's too. What
  another backend makes of that HLO: the pass that turns an all-reduce + dynamic-slice into a reduce-scatter
  (``ReduceScatterCreator`` through ``MatchReduceScatter``, openxla/xla ``xla/service/collective_opt_utils.cc``)
  declines when the number of slices (``fsdp``) differs from the group size (``data x fsdp``), so it stays an
  AllReduce of the whole gradient over ``data x fsdp`` and a local slice, about twice a ReduceScatter's traffic;
  XLA's GPU pipeline also has ``AllReduceSplitter`` (openxla/xla ``all_reduce_splitter.h``, tested in
  ``xla/service/gpu/transforms/all_reduce_splitter_test.cc``), which splits such an all-reduce back into the two
  textbook steps when other collectives already use their groups. The TPU compiler is not public: which of these
  a TPU runs is not known here, and this model gives the CPU's.
- **tensor** (Megatron): per layer, an AllReduce over ``"tensor"`` of the activations ``[tokens, D]`` after the
  attention output projection and after the MLP down projection (forward), and in the backward pass one for the
  input gradient of *each* input projection, reduced before they are added: ``wq``, ``wk`` and ``wv`` (3, whatever
  ``n_kv_heads``), ``w_gate`` and ``w_up`` (2; a plain MLP has only ``w_up``: 1). That is 7 per layer for a gated
  MLP, 6 for a plain one; ``remat=True`` adds the attention output's again (the recomputed MLP needs its input).
  ``fused_projections=True`` counts instead a model with one fused QKV weight and one fused gate-up weight (one
  matmul each, so one input gradient per block to reduce: 4 per layer): :mod:`tpu_notes.model` has separate
  weights, so XLA checks only the default. Weights split over ``"tensor"`` need no gradient collective over it;
  the embedding, unembedding and norm gains are replicated over it.
- **tied embeddings**: the one table ``[V, D]`` gets a gradient from the lookup and one from the unembedding, and
  XLA reduces the two apart (two AllReduces, or two ReduceScatters under fsdp, of the table), then adds them. In
  the pipeline, where :func:`tpu_notes.parallel.pipeline_loss` sums each top weight's gradient inside the stage
  before its one reduction, the table is reduced once.
- **pipeline** (GPipe as :func:`tpu_notes.parallel.pipeline_loss` runs it): ``M + S - 2`` collective-permutes of
  one microbatch's activations forward and as many backward. The embedding, final norm and unembedding are held by
  every stage (used by the first and the last), so their gradients are summed over ``"pipeline"`` as well, in
  the same AllReduce as over ``"data"``; layer weights live on one stage and are reduced over ``"data"`` only.
- the **loss**: an AllReduce of one fp32 scalar over the batch axes (and ``"pipeline"``: the last stage has it).
- **dcn**: an AllReduce over ``"dcn"`` of every gradient shard a device holds (slices are data parallel; not run
  by :mod:`tpu_notes.parallel`, so not checked against XLA).

``context`` (context parallelism) is priced by the analytical step time only (:mod:`tpu_notes.training`): the JAX
trainer does not run it, and this model refuses ``context > 1``.

``bytes_per_device`` follows :attr:`tpu_notes.hlo.HloCollective.bytes`: the larger of the bytes a device puts in
and gets out (the gathered size of an AllGather, the unreduced size of a ReduceScatter). ``count`` is how many such
collectives one step runs (XLA may fuse several into one tuple-shaped op; :func:`tpu_notes.parallel.xla_collectives`
splits them back so the two can be compared array by array).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import rules
from ..transformer import TransformerConfig, as_config
from ..units import Bool, DTypeName, PositiveInt, SeqLen, checked, dtype_bytes, fmt
from .parallelism import Parallelism

#: Collective kinds, spelled as in HLO (and :data:`tpu_notes.hlo.KINDS`).
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "collective-permute")


@dataclass(frozen=True)
class PredictedCollective:
    """Collectives of one kind, over the same mesh axes and of the same size, in one training step."""

    kind: str  # "all-gather", "reduce-scatter", "all-reduce" or "collective-permute"
    axes: tuple[str, ...]  # mesh axes of the groups, e.g. ("fsdp",); ("pipeline",) for a stage-to-stage permute
    bytes_per_device: float  # bytes, the larger of what one device puts in and gets out of one collective
    count: int  # how many of them one step runs
    what: str  # what is moved and why, e.g. "gradient of wq, per layer"

    def __repr__(self) -> str:
        over = ",".join(self.axes) or "-"
        return f"PredictedCollective({self.count} x {self.kind}[{over}] {fmt(self.bytes_per_device, 'B')}: {self.what})"


#: Layer weights, by their short name in :mod:`tpu_notes.model` (and the fused ones of ``fused_projections``).
_LAYER_WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wqkv", "wo", "mlp_norm", "w_gate", "w_up", "w_gate_up", "w_down")


def _weights(c: TransformerConfig, p: Parallelism, fused: bool = False) -> list[tuple[str, float, int]]:
    """``(name, elements per device, copies per device)`` of every weight a device holds in use (tensor split,
    not fsdp split). Layer weights count once per layer of the device's pipeline stage. ``fused``: ``wq``, ``wk``
    and ``wv`` as one ``wqkv``, and (gated MLP) ``w_gate`` and ``w_up`` as one ``w_gate_up``."""
    t = p.tensor
    D, V = c.d_model, c.vocab
    layers = c.n_layers // p.pipeline
    sizes = {}
    for name, shape in c.layer_shapes(moe=False).items():
        n = math.prod(shape)
        short = name.split("/")[-1]
        if short not in ("attn_norm", "mlp_norm"):
            n /= t  # heads of wq/wk/wv/wo, F of the MLP
        sizes[short] = n
    if fused:
        sizes = _fuse(sizes, ("wq", "wk", "wv"), "wqkv")
        if "w_gate" in sizes:
            sizes = _fuse(sizes, ("w_gate", "w_up"), "w_gate_up")
    out = [(name, n, layers) for name, n in sizes.items()]
    out.append(("embed", V * D, 1))
    out.append(("final_norm", D, 1))
    if not c.tied_embeddings:
        out.append(("unembed", D * V, 1))
    return out


def _fuse(sizes: dict, names: tuple, into: str) -> dict:
    """``sizes`` with the entries ``names`` replaced by one entry ``into`` of their summed size, where the first was."""
    out = {}
    for k, v in sizes.items():
        if k == names[0]:
            out[into] = sum(sizes[n] for n in names)
        elif k not in names:
            out[k] = v
    return out


def _check(model, parallelism, batch_tokens, seq_len):
    c = as_config(model)
    if not isinstance(parallelism, Parallelism):
        raise TypeError(f"parallelism must be a tpu_notes.training.Parallelism; got {type(parallelism).__name__}")
    p = parallelism
    if p.context > 1:
        raise ValueError(
            f"parallelism.context must be 1 here ({p.context} given): context parallelism is priced by the "
            "analytical step time only (tpu_notes.training), and neither this model of collectives nor the JAX "
            "trainer runs it. Allowed: context=1"
        )
    if c.is_moe or p.expert > 1:
        raise ValueError(
            "predicted_collectives covers dense models with expert=1 (expert parallelism's "
            f"AllToAll is Chapter 7's); got {c.name or 'a MoE model'} with expert={p.expert}"
        )
    if c.is_mla:
        raise ValueError("predicted_collectives covers GQA attention (tpu_notes.model's); MLA is not supported")
    # the rules of :mod:`tpu_notes.rules`, with the stricter forms tpu_notes.model's layers need: KV heads split
    # (not replicated) over tensor, stages of equal depth, and FSDP sharding d_model
    rules.split_kv_heads(c, p.tensor)
    if p.tensor > 1 and c.d_ff % p.tensor:
        raise rules.Illegal("whole heads", f"tensor ({p.tensor}) must divide d_ff ({c.d_ff:,})")
    rules.even_stages(c, p.pipeline)
    rules.training_layout(c, p, batch_tokens, seq_len)
    if p.fsdp > 1 and c.d_model % p.fsdp:
        raise ValueError(f"fsdp ({p.fsdp}) must divide d_model ({c.d_model})")
    return c, p


@checked
def predicted_collectives(
    model,
    parallelism: Parallelism,
    batch_tokens: PositiveInt,
    seq_len: SeqLen,
    dtype: DTypeName = "bf16",
    *,
    remat: Bool = False,
    fused_projections: Bool = False,
) -> list[PredictedCollective]:
    """The collectives one training step of ``model`` runs per device, laid out per ``parallelism``.

    ``batch_tokens`` is the global batch in tokens (a whole number of ``seq_len`` sequences); ``dtype`` the type of
    weights, activations and gradients (the loss is always one fp32 scalar). See the module docstring for the
    rules; ``remat`` is whether each layer is recomputed in the backward pass (FSDP gathers its weights again
    there, Megatron redoes the attention output's AllReduce). ``fused_projections=True`` prices a model whose
    q/k/v projections are one fused weight and whose gate and up projections are another: one weight to gather and
    reduce each, and one Megatron input-gradient AllReduce per block instead of one per projection (not what
    :mod:`tpu_notes.model` compiles: its weights are separate, and the oracle checks the default only). Entries
    with the same kind, axes, size and meaning are merged (``count``); the list is in the order kind, axes, size.
    ``parallelism.context`` must be 1.
    """
    c, p = _check(model, parallelism, batch_tokens, seq_len)
    if remat and p.pipeline > 1:
        raise ValueError(
            "remat=True is modelled for layouts without pipeline (as tpu_notes.parallel runs them); "
            "allowed with pipeline > 1: remat=False"
        )
    b = dtype_bytes(dtype)
    tokens = batch_tokens / p.batch_shards  # tokens through one device's layers per step
    out: dict[tuple, int] = {}
    _weight_collectives(out, c, p, b, remat, fused_projections)
    loss_axes = tuple(a for a in ("data", "fsdp") if getattr(p, a) > 1) + (("pipeline",) if p.pipeline > 1 else ())
    if loss_axes:
        _add(out, "all-reduce", loss_axes, 4, 1, "the loss (fp32 sum over the batch shards and the last stage)")
    if p.tensor > 1:
        _tensor_collectives(out, c, tokens * c.d_model * b, c.n_layers // p.pipeline, remat, fused_projections)
    if p.pipeline > 1:
        S, Mb = p.pipeline, p.microbatches
        mb = tokens / Mb * c.d_model * b
        for what in (
            "fwd: a microbatch's activations to the next stage",
            "bwd: a microbatch's gradients to the stage before",
        ):
            _add(out, "collective-permute", ("pipeline",), mb, Mb + S - 2, what)
    order = {k: i for i, k in enumerate(KINDS)}
    rows = [PredictedCollective(k, a, nb, n, w) for (k, a, nb, w), n in out.items()]
    return sorted(rows, key=lambda r: (order[r.kind], r.axes, r.bytes_per_device, r.what))


def _add(out: dict, kind: str, axes, nbytes: float, count: int, what: str) -> None:
    """Count ``count`` more collectives of one kind, axes, size and meaning in ``out``."""
    key = (kind, tuple(axes), float(nbytes), what)
    out[key] = out.get(key, 0) + int(count)


def _weight_collectives(out: dict, c, p: Parallelism, b: float, remat: bool, fused: bool) -> None:
    """The gathers of each weight and the reductions of its gradient (over fsdp, data, pipeline and dcn)."""
    for name, n, copies in _weights(c, p, fused):
        w = n * b
        per = "per layer" if name in _LAYER_WEIGHTS else "once"
        # the embedding, final norm and unembedding sit on every pipeline stage: their gradients are summed over the
        # stages too (the stages that do not use them add zeros), in the same reduction as over data
        over = ("data",) if p.data > 1 else ()
        if p.pipeline > 1 and per == "once":
            over += ("pipeline",)
        # a tied table's two gradients (lookup and unembedding) are reduced apart, except in the pipeline, whose
        # stage sums them before its one reduction (tpu_notes.parallel.pipeline_loss)
        grads = 2 if (name == "embed" and c.tied_embeddings and p.pipeline == 1) else 1
        of = f"gradient of {name}" if grads == 1 else f"gradient of {name} (lookup and unembedding, apart)"
        if p.fsdp > 1:
            again = remat and per == "per layer"
            kept = "fwd and recomputed fwd" if again else "kept for the backward"
            _add(
                out,
                "all-gather",
                ("fsdp",),
                w,
                (2 if again else 1) * copies,
                f"{name} gathered before use ({kept}), {per}",
            )
            # with data (or pipeline) too: one reduction over all the axes, sliced to the fsdp shard
            axes = tuple(a for a in ("data", "fsdp", "pipeline") if a == "fsdp" or a in over)
            _add(out, "reduce-scatter", axes, w, grads * copies, f"{of}, {per}")
        elif over:
            _add(out, "all-reduce", over, w, grads * copies, f"{of}, {per}")
        if p.dcn > 1:
            _add(out, "all-reduce", ("dcn",), w / p.fsdp, copies, f"gradient shard of {name} across slices, {per}")


def _tensor_collectives(out: dict, c, act: float, L: int, remat: bool, fused: bool) -> None:
    """Megatron's AllReduces of ``act`` bytes ([tokens, D] activations) over ``L`` layers of one stage."""
    _add(out, "all-reduce", ("tensor",), act, 2 * L, "fwd: attention and MLP outputs [tokens, D], per layer")
    if remat:
        _add(out, "all-reduce", ("tensor",), act, L, "bwd: recomputed attention output [tokens, D], per layer")
    if fused:
        _add(out, "all-reduce", ("tensor",), act, L, "bwd: input gradient of the fused QKV [tokens, D], per layer")
        mlp_in = "fused gate-up" if c.gated_mlp else "w_up"
        _add(out, "all-reduce", ("tensor",), act, L, f"bwd: input gradient of the {mlp_in} [tokens, D], per layer")
    else:
        _add(out, "all-reduce", ("tensor",), act, 3 * L, "bwd: input gradients of wq, wk, wv [tokens, D], per layer")
        n_in, names = (2, "w_gate, w_up") if c.gated_mlp else (1, "w_up")
        _add(out, "all-reduce", ("tensor",), act, n_in * L, f"bwd: input gradients of {names} [tokens, D], per layer")


def collective_totals(predicted) -> dict[tuple[str, tuple[str, ...], float], int]:
    """``{(kind, axes, bytes per device): count}`` summed over the ``what`` of a prediction (the oracle's rows)."""
    if isinstance(predicted, (str, bytes)) or not hasattr(predicted, "__iter__"):
        raise TypeError(f"predicted must be a list of PredictedCollective; got {type(predicted).__name__}")
    predicted = list(predicted)
    if not all(isinstance(r, PredictedCollective) for r in predicted):
        raise TypeError("predicted must be a list of PredictedCollective (from predicted_collectives)")
    totals: dict = {}
    for r in predicted:
        key = (r.kind, r.axes, r.bytes_per_device)
        totals[key] = totals.get(key, 0) + r.count
    return totals
