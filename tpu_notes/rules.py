"""What may be combined: the legality rules of a layout, written once and called by every entry point.

Each argument of a public function is checked on its own by :mod:`tpu_notes.units` (a count is a positive whole
number, a dtype is one of five names). The rules here judge *combinations*: a tensor degree against the heads it
splits, batch shards against the sequences they share, pipeline stages against layers, an expert degree against the
experts, a mesh against the devices it is laid on, a measured rate against the peak it cannot exceed. The planner,
the step-time and memory models, the collectives of a step, the MFU helpers, serving deployments and their steps,
the meshes of the JAX chapters and the command line all call these functions, so a rule cannot be forgotten by one
of them and worded differently by another.

Every rule raises :class:`Illegal`, a ``ValueError`` whose message names the argument *the caller passed* (each
rule takes that name as ``argument``) and the values that would be allowed; ``Illegal.kind`` is a short label
("too few sequences", "uneven batch", "whole heads", ...) that the planner uses to group its rejected candidates.

The ground layer: plain integers and duck-typed model configurations (anything with ``n_heads``, ``n_kv_heads``,
``d_ff``, ``n_layers``, ``n_experts``, ``is_moe``, ``is_mla`` and ``name``, as
:class:`~tpu_notes.transformer.TransformerConfig` has); nothing here imports the analysis.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

#: The most work a single search or simulation may take on, in candidates or events; :func:`bounded_work` refuses
#: more before the work starts (a count nobody capped is how a search hangs).
MAX_WORK = 10_000_000


class Illegal(ValueError):
    """A combination of arguments no layout can take. ``kind`` groups refusals ("too few sequences", ...); the
    message names the caller's argument and the allowed values."""

    def __init__(self, kind: str, message: str, detail: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.detail = message if detail is None else detail  # the message without the argument's name


def _model_name(model) -> str:
    return getattr(model, "name", "") or "the model"


def _divisors(n: int, limit: int = 12) -> str:
    """The divisors of ``n`` as text, the first ``limit`` of them (a message lists what is allowed)."""
    if n > 10**12:
        return f"a divisor of {n:,}"
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    divs = sorted(set(small + [n // d for d in small]))
    shown = ", ".join(str(d) for d in divs[:limit])
    return f"one of {shown}" + (", ..." if len(divs) > limit else "")


# ---------------------------------------------------------------------------------------------------------------
# Model-splitting degrees against the model
# ---------------------------------------------------------------------------------------------------------------
def whole_heads(model, tensor: int, *, argument: str = "tensor", d_ff: bool = True) -> None:
    """Tensor parallelism of degree ``tensor`` gives each rank whole query heads (and, with ``d_ff``, an equal part
    of the MLP width); its KV heads divide over the ranks or are replicated on ``tensor / n_kv_heads`` of them.
    An MLA model (one shared latent) has no KV-head rule."""
    if tensor <= 1:
        return
    name = _model_name(model)
    heads, kv, width = model.n_heads, model.n_kv_heads, model.d_ff
    if heads % tensor or (d_ff and width % tensor):
        both = math.gcd(heads, width) if d_ff else heads
        what = f"the {heads} query heads and d_ff ({width:,})" if d_ff else f"the {heads} query heads"
        raise Illegal(
            "whole heads",
            f"{argument} ({tensor}) must divide {what} of {name} (each rank holds whole heads); allowed: "
            f"{_divisors(both)}",
        )
    if not getattr(model, "is_mla", False) and kv % tensor and tensor % kv:
        raise Illegal(
            "whole heads",
            f"{argument} ({tensor}) must divide the {kv} KV heads of {name} or be a multiple of them (each KV "
            f"head then replicated on {argument} / {kv} ranks)",
        )


def pipeline_stages(model, stages: int, repeats: int = 1, *, argument: str = "pipeline") -> None:
    """``stages`` pipeline stages, each holding ``repeats`` groups of layers, need at least one layer per group."""
    if stages * repeats > model.n_layers:
        raise Illegal(
            "too many stages",
            f"{argument} ({stages}) x circular_repeats ({repeats}) must be at most the {model.n_layers} layers of "
            f"{_model_name(model)}: every stage holds at least one layer",
        )


def _must_divide(kind: str, argument: str, degree: int, count: int, what: str, why: str) -> None:
    """Refuse a ``degree`` that does not divide ``count`` (``what``: "the 32 layers of llama3-8b"), saying ``why``
    and listing the degrees allowed."""
    if degree > 1 and count % degree:
        raise Illegal(kind, f"{argument} ({degree}) must divide {what} ({why}); allowed: {_divisors(count)}")


def even_stages(model, stages: int, *, argument: str = "pipeline") -> None:
    """Stages of equal depth: ``stages`` must divide the layers (what a JAX pipeline of stacked layers, and the
    collectives model of one, can lay out)."""
    what = f"the {model.n_layers} layers of {_model_name(model)}"
    why = "every stage holds the same number of consecutive layers"
    _must_divide("uneven stages", argument, stages, model.n_layers, what, why)


def pipeline_schedule(
    model,
    stages: int,
    repeats: int,
    microbatches: int,
    *,
    framework: str,
    even_layers: bool,
    microbatches_per_stage: str,
    uneven_edges: bool = False,
    argument: str = "pipeline",
) -> None:
    """A pipeline schedule ``framework`` will launch: ``stages`` stages of ``repeats`` interleaved layer groups each,
    fed ``microbatches`` microbatches.

    - ``even_layers``: stages x repeats must divide the layers (MaxText: stages x repeats x layers per stage =
      layers; Megatron without uneven stages); with ``uneven_edges`` the first and last stages may hold fewer layers
      than the others (Megatron's ``--decoder-first/last-pipeline-num-layers``; Llama 3 405B ran 126 layers on 16
      stages: 7 on each edge stage, 8 on the 14 others);
    - ``microbatches_per_stage``: ``"always"`` (MaxText: the microbatches are a multiple of the stages),
      ``"interleaved"`` (Megatron's interleaved schedule needs it; its plain 1F1B does not) or ``"never"``.
    """
    if stages <= 1:
        return
    pipeline_stages(model, stages, repeats, argument=argument)
    L, name, groups = model.n_layers, _model_name(model), stages * repeats
    if even_layers and L % groups:
        per = math.ceil(L / stages)
        edges = L - (stages - 2) * per  # what the first and last stages share when the middle ones hold `per`
        if not (uneven_edges and 2 <= edges <= 2 * per and per % repeats == 0):
            why = "" if uneven_edges else f"; {framework} gives every stage the same layers"
            raise Illegal(
                "uneven stages",
                f"{argument} ({stages}) x circular_repeats ({repeats}) must divide the {L} layers of {name}{why} "
                f"(allowed stage counts: {_divisors(L)})",
            )
    need = microbatches_per_stage == "always" or (microbatches_per_stage == "interleaved" and repeats > 1)
    if need and microbatches % stages:
        what = "an interleaved schedule" if microbatches_per_stage == "interleaved" else "its pipeline"
        raise Illegal(
            "microbatches per stage",
            f"microbatches ({microbatches}) must be a multiple of {argument} ({stages}): {framework} requires it of "
            f"{what}",
        )


def scale_up_domain(tensor: int, domain: int, *, argument: str = "tensor", where: str = "an NVLink node") -> None:
    """Tensor parallelism stays inside the scale-up domain (the ``domain`` devices of ``where``), as practitioners
    run it: its collectives come every layer and do not hide under compute over a scale-out network."""
    if tensor > 1 and domain % tensor:
        raise Illegal(
            "tensor across nodes",
            f"{argument} ({tensor}) must divide the {domain} devices of {where} (tensor parallelism stays in the "
            f"scale-up domain; pass tensor_across_nodes=True to price it over the network); allowed: "
            f"{_divisors(domain)}",
        )


def split_kv_heads(model, tensor: int, *, argument: str = "tensor") -> None:
    """A tensor degree that splits the KV heads themselves (no replication): what :mod:`tpu_notes.model`'s layers
    shard, and so what its compiled collectives assume. Stricter than :func:`whole_heads`."""
    whole_heads(model, tensor, argument=argument, d_ff=False)
    what = f"the {model.n_kv_heads} KV heads of {_model_name(model)}"
    why = "this layout splits KV heads, it does not replicate them"
    _must_divide("whole heads", argument, tensor, model.n_kv_heads, what, why)


def expert_degree(model, expert: int, *, argument: str = "expert") -> None:
    """Expert parallelism needs a mixture-of-experts model whose experts divide evenly over ``expert`` ranks."""
    if expert <= 1:
        return
    name = _model_name(model)
    if not getattr(model, "is_moe", False):
        raise Illegal("not MoE", f"{argument} ({expert}) needs a mixture-of-experts model; {name} is dense (expert=1)")
    what = f"the {model.n_experts} experts of {name}"
    _must_divide("uneven experts", argument, expert, model.n_experts, what, "each rank holds whole experts")


def context_degree(seq_len: int, context: int, *, argument: str = "context", seq_argument: str = "seq_len") -> None:
    """Context parallelism gives each of ``context`` ranks an equal chunk of every sequence."""
    what = f"{seq_argument} ({seq_len:,})"
    _must_divide("uneven context", argument, context, seq_len, what, "each context rank holds an equal chunk of it")


# ---------------------------------------------------------------------------------------------------------------
# The batch against the shards that split it
# ---------------------------------------------------------------------------------------------------------------
def whole_sequences(batch_tokens: int, seq_len: int, *, argument: str = "batch_tokens") -> int:
    """The number of sequences in a batch of ``batch_tokens`` tokens of ``seq_len`` each; refuses a remainder."""
    if batch_tokens % seq_len:
        raise Illegal(
            "partial sequence",
            f"{argument} ({batch_tokens:,}) must be a whole number of sequences of seq_len ({seq_len:,}): at least "
            f"{seq_len:,} tokens",
        )
    return batch_tokens // seq_len


def batch_shards(
    sequences: int,
    shards: int,
    *,
    argument: str = "parallelism",
    microbatches: int = 1,
    stages: int = 1,
    advice: str = "split sequences with context parallelism or use fewer data/fsdp/expert ranks",
) -> int:
    """Whole sequences per batch shard: ``sequences`` split over ``shards`` (data x fsdp x expert x dcn) must give
    every shard the same whole number of sequences, at least one per microbatch. Returns the sequences per shard."""
    if sequences < shards:
        detail = f"{sequences:,} sequences for {shards:,} batch shards ({advice})"
        raise Illegal("too few sequences", f"{argument}: {detail}", detail)
    if sequences % shards:
        detail = f"{sequences:,} sequences do not divide over {shards:,} batch shards ({sequences / shards:.3g} each)"
        raise Illegal("uneven batch", f"{argument}: {detail}", detail)
    per_shard = sequences // shards
    if microbatches > per_shard or per_shard % microbatches:
        what = f"{stages} pipeline stages" if stages > 1 else f"{microbatches} microbatches"
        raise Illegal(
            "too few sequences" if microbatches > per_shard else "uneven microbatches",
            f"{argument}: {per_shard:,} sequences per batch shard cannot make {microbatches} equal microbatches of "
            f"whole sequences for {what} (microbatches must divide {per_shard:,}: {_divisors(per_shard)})",
        )
    return per_shard


def model_layout(model, parallelism, seq_len: int, circular_repeats: int = 1) -> None:
    """The rules of a layout that do not depend on the batch: whole heads for ``tensor``, equal context chunks,
    stages against layers, experts against the expert degree (refusals name the field of ``parallelism``, a
    :class:`~tpu_notes.training.Parallelism`)."""
    p = parallelism
    whole_heads(model, p.tensor)
    context_degree(seq_len, p.context)
    pipeline_stages(model, p.pipeline, circular_repeats)
    expert_degree(model, p.expert)


def training_layout(
    model,
    parallelism,
    batch_tokens: int,
    seq_len: int,
    circular_repeats: int = 1,
    *,
    argument: str = "parallelism",
) -> int:
    """Every rule a training layout obeys, in one call: whole heads for ``tensor``, equal context chunks, stages
    against layers, experts against the expert degree, whole sequences, and batch shards against the sequences
    (with whole microbatches). ``parallelism`` is a :class:`~tpu_notes.training.Parallelism` (read by field);
    refusals name its field (``tensor``, ``pipeline``, ...) or ``argument``. Returns the sequences per batch shard."""
    p = parallelism
    model_layout(model, p, seq_len, circular_repeats)
    sequences = whole_sequences(batch_tokens, seq_len)
    return batch_shards(sequences, p.batch_shards, argument=argument, microbatches=p.microbatches, stages=p.pipeline)


# ---------------------------------------------------------------------------------------------------------------
# Meshes against devices and systems
# ---------------------------------------------------------------------------------------------------------------
def mesh_axes(shape: Mapping[str, int], allowed: Iterable[str], *, argument: str = "axes") -> None:
    """Every axis of ``shape`` is one of ``allowed`` (a mesh of one layout names its axes after the parallelism
    kinds) and has a positive whole size."""
    allowed = tuple(allowed)
    for name, size in shape.items():
        if name not in allowed:
            raise Illegal("unknown axis", f"{argument} names axis {name!r}; allowed: {', '.join(allowed)}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise Illegal("bad axis size", f"{argument}[{name!r}] must be a whole number >= 1; got {size!r}")


def mesh_names(names, n_axes: int, *, argument: str = "names") -> tuple[str, ...]:
    """A mesh's axis names: one distinct, non-empty string per axis of its shape. Returns them as a tuple."""
    if isinstance(names, str) or not isinstance(names, (tuple, list)):
        raise TypeError(f"{argument} must be a tuple of axis names (e.g. ('data', 'model')); got {names!r}")
    if len(names) != n_axes:
        raise Illegal("mesh names", f"{argument} must name each of the {n_axes} mesh axes once; got {tuple(names)!r}")
    for n in names:
        if not isinstance(n, str) or not n.isidentifier():
            raise TypeError(f"{argument} must hold axis names that are identifiers (e.g. 'data'); got {n!r}")
    if len(set(names)) != len(names):
        raise Illegal("mesh names", f"{argument} must not repeat an axis name; got {tuple(names)!r}")
    return tuple(names)


def mesh_devices(
    degrees: Mapping[str, int], n_devices: int, *, argument: str = "parallelism", advice: str = ""
) -> None:
    """The degrees of a mesh multiply to exactly the devices it is laid on (``advice``: how to get there)."""
    product = math.prod(degrees.values())
    if product != n_devices:
        shown = " x ".join(f"{k}={v}" for k, v in degrees.items()) or "1"
        raise Illegal(
            "mesh size",
            f"{argument}: the degrees ({shown}) multiply to {product:,} devices, but there are {n_devices:,}; "
            "they must be equal" + (f" ({advice})" if advice else ""),
        )


# ---------------------------------------------------------------------------------------------------------------
# Physical limits of a result
# ---------------------------------------------------------------------------------------------------------------
#: Rounding a fraction of peak may leave above 1 (a throughput computed from the roofline itself): this much is
#: forgiven, and the fraction returned as 1.
PEAK_TOLERANCE = 1e-9


def at_most_peak(fraction: float, *, argument: str, what: str = "MFU") -> float:
    """A measured rate cannot beat the hardware: ``fraction`` of peak (an MFU, an HFU, a bandwidth share) must be at
    most 1 (within :data:`PEAK_TOLERANCE` of rounding). The refusal names the caller's ``argument`` whose value
    implied it."""
    if math.isfinite(fraction) and 1.0 < fraction <= 1.0 + PEAK_TOLERANCE:
        return 1.0
    if not math.isfinite(fraction) or fraction > 1.0:
        raise Illegal(
            "above peak",
            f"{argument} implies {what} {fraction:.3g}, above the hardware's peak (at most 1): check its units and "
            "the chips it ran on",
        )
    return fraction


def bounded_work(count: float, *, argument: str, limit: int = MAX_WORK, unit: str = "candidates") -> int:
    """Refuse a search or a simulation whose work (``count`` of ``unit``) exceeds ``limit`` before it starts,
    naming the argument to lower. Returns ``count`` as an int."""
    if not math.isfinite(count) or count > limit:
        raise Illegal(
            "too much work",
            f"{argument} asks for {count:.3g} {unit}; at most {limit:,} are searched or simulated in one call: "
            f"lower {argument}",
        )
    return int(count)


def finite_result(value: float, *, argument: str, what: str) -> float:
    """A figure computed from finite inputs that over- or underflowed: refuse by the argument that caused it rather
    than return ``inf``, ``nan`` or an exact zero the caller did not ask for."""
    if not math.isfinite(value) or value == 0.0:
        raise Illegal(
            "out of range",
            f"{argument} is too large or too small: {what} comes out as {value!r}; use a value nearer real sizes",
        )
    return value


def product_within(factors: Mapping[str, float], limit: float, *, what: str) -> float:
    """Arguments whose product is one size (``batch x seq_len`` tokens of cache in a step, ``batch x (k + 1)`` rows
    of a verify step) must keep it at most ``limit``. ``factors`` maps each argument's name, as the caller passed
    it, to its value; the refusal names them all. Returns the product."""
    product = math.prod(factors.values())
    if not math.isfinite(product) or product > limit:
        names = " x ".join(factors)
        shown = " x ".join(f"{k} ({v:,})" for k, v in factors.items())
        raise Illegal(
            "too large",
            f"{shown} = {product:.3g} {what}; at most {limit:,} fit one call: lower {names.replace(' x ', ' or ')}",
        )
    return product
