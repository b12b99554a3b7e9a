"""The layouts of Chapter 5 run for real: one training step of :mod:`tpu_notes.model` split over a JAX mesh.

A :class:`~tpu_notes.training.Parallelism` becomes a mesh whose axes are named after its fields
(:data:`~tpu_notes.training.parallelism.MESH_AXES`: ``"data"``, ``"fsdp"``, ``"pipeline"``, ``"expert"``,
``"tensor"``; size-1
axes dropped) and a ``PartitionSpec`` for every weight (:func:`param_specs`):

- **data** (DP): every weight replicated; the batch split over ``"data"``; XLA AllReduces the gradients.
- **fsdp** (ZeRO-3): every weight, norm gains included, split over ``"fsdp"`` along its ``d_model`` dimension
  (``D`` always divides, and it is the dimension the book shards); the batch split over ``"fsdp"`` too. XLA
  AllGathers each weight before its matmul and ReduceScatters its gradient.
- **tensor** (Megatron): the heads of ``wq``/``wk``/``wv``/``wo`` and the hidden ``F`` of the MLP split over
  ``"tensor"``, so attention and MLP each need one activation reduction forward, and in the backward pass one per
  input projection (q, k and v; gate and up), as XLA compiles separate weights. The embedding,
  the unembedding and the norm gains stay replicated over ``"tensor"`` (Megatron also splits the vocabulary; at
  the book's tiny vocabularies that would add two small reductions to the loss for nothing).
- **mixtures** combine the rules: a weight's ``D`` over ``"fsdp"`` and its heads or ``F`` over ``"tensor"``; the
  batch over ``("data", "fsdp")``.
- **pipeline**: consecutive layers per stage, a GPipe schedule written with ``shard_map`` over ``"pipeline"`` and
  ``ppermute`` (:func:`pipeline_loss`; the first stage embeds, the last computes the loss); combines with ``data``.
  The embedding, final norm and unembedding are replicated on every stage.
- **expert** (MoE models only): the stacked experts split over ``"expert"``, the batch too (trained and checked
  for equal losses; the oracle and the model of collectives cover dense models only).

Without pipeline the loss is :func:`layout_loss`: :func:`tpu_notes.model.loss` plus two sharding constraints that
pin the layout (weights used gathered, residual stream split over the batch only), optionally with each layer
rematerialised (``remat=True``). :func:`compiled_step` lowers and compiles one SGD step (loss, gradients, update)
with those shardings: what the oracle (:func:`oracle_rows`, :data:`TRAINING_CASES`, :func:`oracle_summary`) parses
with :mod:`tpu_notes.hlo` and compares with :func:`tpu_notes.training.collectives.predicted_collectives`; where
they differ, :data:`FINDINGS` says why. :func:`train` runs a few steps and returns the losses, equal to a single
device's to fp32 rounding; :func:`measure_step` times a step with :func:`tpu_notes.bench.time_fn`.

Importing this module imports JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Annotated

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from . import hlo, rules
from . import model as M
from .compat import make_mesh as _compat_make_mesh
from .compat import pvary as _pvary
from .compat import shard_map as _shard_map
from .training.collectives import predicted_collectives
from .training.parallelism import MESH_AXES, Parallelism
from .transformer import TransformerConfig, as_config
from .units import Bool, OneOf, Positive, capped, checked, dtype_bytes

#: Caps of this trainer of small models, checked before anything is compiled or allocated: the most tokens
#: (batch x seq_len) in one step, the most sequences (batch) and tokens per sequence (seq_len), the most steps one
#: train() call runs, the most bytes of parameters in the step's dtype (llama3-8b's 32 GB in fp32 is refused; the
#: book's models take kilobytes to megabytes), and the most bytes of the logits [batch, seq_len, vocab] in fp32.
#: Each is sized so that a call at the cap finishes in seconds on a 2-core CPU.
MAX_TOKENS_PER_STEP = 2**16
MAX_BATCH = 4096
MAX_SEQ_LEN = 4096
MAX_STEPS = 256
MAX_PARAM_BYTES = 2**28
MAX_LOGIT_BYTES = 2**30
#: Most timed samples measure_step takes.
MAX_REPEATS = 100

#: Parameter dtypes a step can run in.
STEP_DTYPES = {"fp32": jnp.float32, "bf16": jnp.bfloat16}


@checked
def train_layouts(n_devices: capped(4096) = 8) -> dict[str, Parallelism]:
    """The layouts Chapter 5 trains side by side on ``n_devices`` devices, by name (``"fsdp=2 x tensor=4"``).

    On 8 devices: data, FSDP and tensor parallelism over all 8, FSDP x tensor (2 x 4) and data x pipeline (4 x 2,
    two microbatches). Fewer devices give the same kinds at smaller degrees, and only those that split anything
    (one device: none). ``tensor=n`` needs ``n`` to divide the heads (8 in :data:`ORACLE_CONFIG`).
    """
    n = n_devices
    layouts = [Parallelism(data=n), Parallelism(fsdp=n), Parallelism(tensor=n)]
    if n % 2 == 0 and n >= 4:
        layouts.append(Parallelism(fsdp=2, tensor=n // 2))
    if n % 2 == 0:
        layouts.append(Parallelism(data=n // 2, pipeline=2, microbatches=2))
    named = {}
    for p in layouts:
        if p != Parallelism() and p.chips_per_slice == n:
            named[" x ".join(f"{a}={k}" for a, k in p.mesh_shape().items())] = p
    return named


#: The layouts Chapter 5 trains side by side on its 8 devices (tensor=8 needs 8 heads, e.g. ORACLE_CONFIG).
TRAIN_LAYOUTS: dict[str, Parallelism] = train_layouts(8)


# ------------------------------------------------------------------------------------------------------------
# Checks
# ------------------------------------------------------------------------------------------------------------


def _check_devices(devices, n: int) -> list:
    """The devices to lay the mesh on: ``devices.demo_devices(n)`` when None, else a sequence of JAX devices."""
    if devices is None:
        from .devices import demo_devices

        return demo_devices(n)
    if isinstance(devices, (str, bytes)) or not isinstance(devices, Sequence):
        raise TypeError(
            f"devices must be None or a sequence of JAX devices (e.g. DEVICES[:{n}]); got {type(devices).__name__}"
        )
    devs = list(devices)
    bad = [d for d in devs if not isinstance(d, jax.Device)]
    if bad:
        raise TypeError(f"devices must hold JAX devices (e.g. DEVICES[:{n}]); got {bad[0]!r}")
    if len(set(devs)) != len(devs):
        raise ValueError("devices must not repeat a device")
    return devs


def _check_parallelism(parallelism) -> Parallelism:
    if not isinstance(parallelism, Parallelism):
        raise TypeError(f"parallelism must be a tpu_notes.training.Parallelism; got {type(parallelism).__name__}")
    if parallelism.dcn > 1:
        raise ValueError(
            f"parallelism.dcn must be 1 here ({parallelism.dcn} given): one process has no DCN; "
            "simulate slices over DCN as data parallelism (data=...)"
        )
    if parallelism.context > 1:
        raise ValueError(
            f"parallelism.context must be 1 here ({parallelism.context} given): context parallelism is priced by "
            "the analytical step time only (tpu_notes.training); this JAX trainer does not run it. Allowed: context=1"
        )
    if parallelism.pipeline > 1 and (parallelism.fsdp > 1 or parallelism.tensor > 1 or parallelism.expert > 1):
        raise ValueError(
            f"pipeline combines only with data in tpu_notes.parallel; got {parallelism.label()}. "
            "Allowed: data x pipeline"
        )
    if parallelism.pipeline == 1 and parallelism.microbatches > 1:
        raise ValueError(
            f"parallelism.microbatches ({parallelism.microbatches}) > 1 needs pipeline > 1 here "
            "(gradient accumulation is not implemented); use microbatches=1"
        )
    return parallelism


def _check_fits(c: TransformerConfig, p: Parallelism, batch: int, seq_len: int) -> None:
    """The sizes within the caps, and each degree dividing what it splits; a ValueError naming both."""
    if batch * seq_len > MAX_TOKENS_PER_STEP:
        raise ValueError(
            f"batch x seq_len = {batch} x {seq_len} tokens is more than this trainer of small models "
            f"takes in one step ({MAX_TOKENS_PER_STEP}); allowed: batch x seq_len <= "
            f"{MAX_TOKENS_PER_STEP}"
        )
    if seq_len < 2:
        raise ValueError(f"seq_len must be >= 2 (the loss predicts token t+1 from t); got {seq_len}")
    logits = batch * seq_len * c.vocab * 4
    if logits > MAX_LOGIT_BYTES:
        raise ValueError(
            f"batch x seq_len x vocab = {batch} x {seq_len} x {c.vocab}: the fp32 logits take "
            f"{logits:.3g} bytes, more than this trainer allows (MAX_LOGIT_BYTES = {MAX_LOGIT_BYTES}); use a smaller "
            "batch or seq_len"
        )
    # the rules of tpu_notes.rules, in the stricter forms this trainer's layers need: KV heads split (never
    # replicated) over tensor, the (expert) MLP width split by tensor, stages of equal depth, FSDP over d_model
    rules.expert_degree(c, p.expert, argument="parallelism.expert")
    rules.batch_shards(batch, p.data * p.fsdp * p.expert, argument="batch", microbatches=p.microbatches)
    rules.split_kv_heads(c, p.tensor, argument="parallelism.tensor")
    width = c.expert_ff if c.is_moe else c.d_ff
    if p.tensor > 1 and (width % p.tensor or (c.is_moe and c.n_dense_layers and c.d_ff % p.tensor)):
        raise rules.Illegal("whole heads", f"parallelism.tensor ({p.tensor}) must divide the MLP width ({width})")
    if p.fsdp > 1 and c.d_model % p.fsdp:
        raise ValueError(f"parallelism.fsdp ({p.fsdp}) must divide d_model ({c.d_model}), the dimension FSDP shards")
    if p.pipeline > 1:
        rules.even_stages(c, p.pipeline, argument="parallelism.pipeline")
        if c.is_moe:
            raise ValueError("pipeline > 1 runs dense models only here; allowed: a dense TransformerConfig")


# ------------------------------------------------------------------------------------------------------------
# Mesh and layouts
# ------------------------------------------------------------------------------------------------------------


def make_mesh(parallelism: Parallelism, devices=None):
    """The JAX mesh of ``parallelism``: axes named after :data:`~tpu_notes.training.parallelism.MESH_AXES` with
    size > 1, Auto axis types.

    ``devices`` defaults to ``devices.demo_devices(n)`` for the layout's ``n`` devices (the default backend's, or
    simulated CPU devices when it has fewer); their number must equal the product of the degrees. A
    single-device layout gets a one-device mesh with a size-1 ``"data"`` axis.
    """
    p = _check_parallelism(parallelism)
    devs = _check_devices(devices, p.chips_per_slice)
    n = p.chips_per_slice
    advice = f"pass devices=DEVICES[:{n}], or run devices.setup({n}) before JAX starts"
    rules.mesh_devices(p.mesh_shape(), len(devs), argument="parallelism", advice=advice)
    shape = p.mesh_shape() or {MESH_AXES[0]: 1}
    return _compat_make_mesh(tuple(shape.values()), tuple(shape), devices=devs)


def batch_spec(parallelism: Parallelism) -> P:
    """The ``PartitionSpec`` of the token batch ``[B, T]``: ``B`` over the batch axes (data, fsdp, expert)."""
    parallelism = _check_parallelism(parallelism)
    axes = tuple(a for a in ("data", "fsdp", "expert") if getattr(parallelism, a) > 1)
    return P(axes if axes else None, None)


def _weight_spec(name: str, ndim: int, p: Parallelism, moe_stack: bool = False) -> P:
    """The spec of one layer weight by its name in :mod:`tpu_notes.model` (``"wq"``, ``"w_up"``...)."""
    f = "fsdp" if p.fsdp > 1 else None
    t = "tensor" if p.tensor > 1 else None
    if name in ("attn_norm", "mlp_norm"):
        return P(f)
    if name in ("wq", "wk", "wv"):  # [D, heads, H]
        return P(f, t, None)
    if name == "wo":  # [N, H, D]
        return P(t, None, f)
    if name == "router":  # [D, E]
        return P(f, None)
    e = "expert" if (moe_stack and p.expert > 1) else None
    lead = (e,) if moe_stack else ()
    if name in ("w_gate", "w_up"):  # [(E,) D, F]
        return P(*lead, f, t)
    if name == "w_down":  # [(E,) F, D]
        return P(*lead, t, f)
    raise ValueError(f"unknown weight name {name!r}")


def param_specs(model, parallelism: Parallelism):
    """The ``PartitionSpec`` pytree of the parameters of ``model`` (a config or preset name) laid out per
    ``parallelism``.

    Same structure as :func:`tpu_notes.model.init_params` (for ``pipeline > 1``: :func:`stage_params`'s).
    See the module docstring for the rules.
    """
    c = as_config(model, "model")
    p = _check_parallelism(parallelism)
    f = "fsdp" if p.fsdp > 1 else None
    shapes = M.param_shapes(c)

    def layer_specs(layer, lead=()):
        out = {}
        for k, v in layer.items():
            if k == "mlp":
                moe = "router" in v
                out[k] = {}
                for kk, vv in v.items():
                    if kk == "shared":
                        out[k][kk] = {n: P(*lead, *_weight_spec(n, 2, p)) for n in vv}
                    else:
                        out[k][kk] = P(*lead, *_weight_spec(kk, len(vv.shape), p, moe_stack=moe and kk != "router"))
            else:
                out[k] = P(*lead, *_weight_spec(k, len(v.shape), p))
        return out

    specs = {"embed": P(None, f), "final_norm": P(f)}
    if "unembed" in shapes:
        specs["unembed"] = P(f, None)
    if p.pipeline > 1:
        per = c.n_layers // p.pipeline
        specs["stages"] = [layer_specs(shapes["layers"][i], ("pipeline",)) for i in range(per)]
    else:
        specs["layers"] = [layer_specs(layer) for layer in shapes["layers"]]
    return specs


@checked
def stage_params(params, n_stages: capped(4096)):
    """Regroup ``params`` for a pipeline of ``n_stages``: ``"layers"`` (a list of ``L`` layers) becomes
    ``"stages"``, a list of ``L / n_stages`` layers whose arrays gain a leading stage axis: entry ``j`` of stage
    ``s`` is layer ``s · L/n_stages + j`` (stages hold consecutive layers)."""
    if not isinstance(params, dict) or not isinstance(params.get("layers"), list):
        raise TypeError("params must be a parameter pytree of tpu_notes.model (a dict with a 'layers' list)")
    layers = params["layers"]
    L = len(layers)
    if L % n_stages:
        raise ValueError(f"n_stages ({n_stages}) must divide the number of layers ({L})")
    per = L // n_stages
    stages = [
        jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *[layers[s * per + j] for s in range(n_stages)])
        for j in range(per)
    ]
    out = {k: v for k, v in params.items() if k != "layers"}
    out["stages"] = stages
    return out


def unstage_params(params):
    """The inverse of :func:`stage_params`: back to the plain ``"layers"`` list of :mod:`tpu_notes.model`."""
    if not isinstance(params, dict) or not isinstance(params.get("stages"), list) or not params["stages"]:
        raise TypeError("params must be stage_params's pytree (a dict with a non-empty 'stages' list)")
    stages = params["stages"]
    n = jax.tree_util.tree_leaves(stages[0])[0].shape[0]
    layers = [jax.tree_util.tree_map(lambda x, s=s: x[s], stages[j]) for s in range(n) for j in range(len(stages))]
    out = {k: v for k, v in params.items() if k != "stages"}
    out["layers"] = layers
    return out


# ------------------------------------------------------------------------------------------------------------
# The pipeline (GPipe, shard_map over "pipeline" + ppermute)
# ------------------------------------------------------------------------------------------------------------


def pipeline_loss(params, tokens, model: TransformerConfig, parallelism: Parallelism, mesh):
    """The loss of :func:`tpu_notes.model.loss`, with the model run as a GPipe pipeline over ``"pipeline"``.

    ``params`` are :func:`stage_params`'s. The batch is cut into ``parallelism.microbatches`` microbatches; at
    tick ``t`` stage ``s`` works on microbatch ``t - s`` and passes its output to stage ``s + 1`` with a
    ``ppermute`` (``M + S - 1`` ticks, ``M + S - 2`` permutes; the ``S - 1`` idle ticks of each stage are the
    bubble). The first stage embeds each microbatch as it enters; the last stage applies the final norm, the
    unembedding and the cross-entropy to each microbatch as it leaves, so only one scalar, the summed loss, is
    reduced over the stages. Every device holds the embedding, final norm and unembedding (replicated), and the
    stages that do not use them contribute zero gradients to their one AllReduce over the stages. Differentiable
    with ``jax.grad``: the backward pass runs the permutes in reverse.
    """
    c, p = as_config(model, "model"), _check_parallelism(parallelism)
    S, Mb = p.pipeline, p.microbatches
    B, T = tokens.shape
    cos, sin = M.rotary_tables(T, c.d_head)
    batch_axes = tuple(a for a in ("data",) if p.data > 1)
    bspec = batch_axes if batch_axes else None
    # microbatch m takes rows m, m + Mb, ... of each data shard's rows: [B, T] -> [Mb, B/Mb, T]
    tm = jnp.swapaxes(tokens.reshape(B // Mb, Mb, T), 0, 1)
    top = {k: v for k, v in params.items() if k != "stages"}

    def run(stages, top, tm):
        s = jax.lax.axis_index("pipeline")
        local = [jax.tree_util.tree_map(lambda a: a[0], layer) for layer in stages]
        if batch_axes:  # one gradient psum over "data" per weight, not one per tick that uses it
            local = _pvary(local, batch_axes)
        top = _pvary(top, batch_axes + ("pipeline",))  # likewise, over the stages and the data shards

        def stage_fn(h):
            for layer in local:
                h = M.block(h, layer, c, cos, sin)
            return h

        def head_nll(h, toks):
            h = M.rms_norm(h, top["final_norm"])
            w_out = top["embed"].T if c.tied_embeddings else top["unembed"]
            return M._summed_nll(jnp.einsum("btd,dv->btv", h, w_out), toks)

        perm = [(i, i + 1) for i in range(S - 1)]
        state = jnp.zeros(tm.shape[1:] + (c.d_model,), top["embed"].dtype)
        total = jnp.zeros((), jnp.float32)
        for t in range(Mb + S - 1):
            if t < Mb:
                state = jnp.where(s == 0, top["embed"][tm[t]], state)
            state = stage_fn(state)
            if t >= S - 1:
                total = total + jnp.where(s == S - 1, head_nll(state, tm[t - (S - 1)]), 0.0)
            if t < Mb + S - 2:
                state = jax.lax.ppermute(state, "pipeline", perm)
        return jax.lax.psum(total, batch_axes + ("pipeline",))

    stage_specs = [jax.tree_util.tree_map(lambda _: P("pipeline"), layer) for layer in params["stages"]]
    top_specs = jax.tree_util.tree_map(lambda _: P(), top)
    total = _shard_map()(run, mesh=mesh, in_specs=(stage_specs, top_specs, P(None, bspec, None)), out_specs=P())(
        params["stages"], top, tm
    )
    return total / (B * (T - 1))


# ------------------------------------------------------------------------------------------------------------
# The training step
# ------------------------------------------------------------------------------------------------------------


def _check_param_bytes(c: TransformerConfig, dtype: str) -> None:
    nbytes = c.param_count() * dtype_bytes(dtype)
    if nbytes > MAX_PARAM_BYTES:
        raise ValueError(
            f"model {c.name or ''}: its {c.param_count():,} parameters take {nbytes:.3g} bytes in "
            f"{dtype}, more than this trainer of small models builds (MAX_PARAM_BYTES = {MAX_PARAM_BYTES} bytes); "
            "allowed: configs such as ORACLE_CONFIG or the tiny presets. Price large models with "
            "tpu_notes.training instead"
        )


def _prepare(model, parallelism, batch, seq_len, devices, dtype):
    c = M._check_supported(as_config(model, "model"))
    p = _check_parallelism(parallelism)
    _check_param_bytes(c, dtype)
    mesh = make_mesh(p, devices)
    _check_fits(c, p, batch, seq_len)
    return c, p, mesh


def _gathered_specs(c: TransformerConfig, p: Parallelism):
    """The parameter specs with the ``"fsdp"`` axis taken out: the layout each weight is used in (ZeRO-3)."""
    from dataclasses import replace

    return param_specs(c, replace(p, fsdp=1, data=p.data * p.fsdp))


@checked
def layout_loss(params, tokens, model: TransformerConfig, parallelism: Parallelism, mesh, remat: Bool = False):
    """:func:`tpu_notes.model.loss` with the layout's sharding constraints (``pipeline == 1``).

    Two ``with_sharding_constraint`` s pin the layout the chapter describes, instead of leaving the choice to
    XLA's propagation: each layer's weights are used in their gathered layout, constrained inside the layer
    (``"fsdp"`` removed from each spec: the ZeRO-3 AllGather), and the residual stream ``x[B, T, D]`` between
    layers is split over the batch axes only (replicated over ``"tensor"``: Megatron's AllReduce after the
    attention and MLP output projections). ``remat=True`` wraps each layer, its gathers included, in
    ``jax.checkpoint``: the backward pass recomputes the layer and gathers its weights again. The arithmetic is
    that of :func:`tpu_notes.model.forward` and :func:`tpu_notes.model.loss`.
    """
    c, p = as_config(model, "model"), _check_parallelism(parallelism)
    wsc = jax.lax.with_sharding_constraint
    gathered = None
    if p.fsdp > 1:
        gathered = jax.tree_util.tree_map(
            lambda s: NamedSharding(mesh, s), _gathered_specs(c, p), is_leaf=lambda x: isinstance(x, P)
        )
    resid = NamedSharding(mesh, P(batch_spec(p)[0], None, None))
    B, T = tokens.shape
    cos, sin = M.rotary_tables(T, c.d_head)

    def layer_fn(x, layer, spec):
        if spec is not None:
            layer = wsc(layer, spec)
        return wsc(M.block(x, layer, c, cos, sin), resid)

    def run_layer(x, layer, spec):
        fn = partial(layer_fn, spec=spec)
        return (jax.checkpoint(fn) if remat else fn)(x, layer)

    top = {k: v for k, v in params.items() if k != "layers"}
    if gathered is not None:
        top = wsc(top, {k: v for k, v in gathered.items() if k != "layers"})
    x = wsc(top["embed"][tokens], resid)
    for i, layer in enumerate(params["layers"]):
        x = run_layer(x, layer, None if gathered is None else gathered["layers"][i])
    x = M.rms_norm(x, top["final_norm"])
    w_out = top["embed"].T if c.tied_embeddings else top["unembed"]
    logits = jnp.einsum("btd,dv->btv", x, w_out)
    return M._summed_nll(logits, tokens) / (B * (T - 1))


def _step_fn(c: TransformerConfig, p: Parallelism, mesh, constrain: bool = True, remat: bool = False):
    if p.pipeline > 1:
        loss_fn = partial(pipeline_loss, model=c, parallelism=p, mesh=mesh)
    elif constrain:
        loss_fn = partial(layout_loss, model=c, parallelism=p, mesh=mesh, remat=remat)
    else:
        loss_fn = partial(M.loss, config=c)

    def step(params, tokens, lr):
        value, g = jax.value_and_grad(loss_fn)(params, tokens)
        new = jax.tree_util.tree_map(lambda w, d: w - lr.astype(w.dtype) * d.astype(w.dtype), params, g)
        return new, value

    return step


def _shapes(c: TransformerConfig, p: Parallelism, dtype: str):
    shapes = M.param_shapes(c, STEP_DTYPES[dtype])
    if p.pipeline > 1:
        S = p.pipeline
        per = c.n_layers // S
        stages = [
            jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct((S,) + a.shape, a.dtype), shapes["layers"][j])
            for j in range(per)
        ]
        shapes = {k: v for k, v in shapes.items() if k != "layers"}
        shapes["stages"] = stages
    return shapes


#: XLA options of a step compiled with ``optimize=False``: no LLVM optimisation of the generated code. The
#: collectives are chosen by the HLO passes before code generation, identical at every level (a test checks it);
#: on a CPU this halves the compile time of the oracle's steps and costs run time only.
FAST_COMPILE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@lru_cache(maxsize=64)
def _compiled(
    c: TransformerConfig,
    p: Parallelism,
    batch: int,
    seq_len: int,
    devices: tuple,
    dtype: str,
    constrain: bool,
    optimize: bool,
    remat: bool,
):
    """``(compiled step, parameter shardings, batch sharding, scalar sharding)``, compiled once per layout."""
    mesh = make_mesh(p, devices)
    pshard = jax.tree_util.tree_map(
        lambda s: NamedSharding(mesh, s), param_specs(c, p), is_leaf=lambda x: isinstance(x, P)
    )
    bshard = NamedSharding(mesh, batch_spec(p))
    scalar = NamedSharding(mesh, P())
    fn = jax.jit(
        _step_fn(c, p, mesh, constrain, remat), in_shardings=(pshard, bshard, scalar), out_shardings=(pshard, scalar)
    )
    args = (
        _shapes(c, p, dtype),
        jax.ShapeDtypeStruct((batch, seq_len), jnp.int32),
        jax.ShapeDtypeStruct((), jnp.float32),
    )
    lowered = fn.lower(*args)
    compiled = lowered.compile() if optimize else lowered.compile(compiler_options=dict(FAST_COMPILE_OPTIONS))
    return compiled, pshard, bshard, scalar


def _get(model, parallelism, batch, seq_len, devices, dtype, constrain=True, optimize=False, remat=False):
    c, p, _ = _prepare(model, parallelism, batch, seq_len, devices, dtype)
    devs = tuple(_check_devices(devices, p.chips_per_slice))
    if remat and (p.pipeline > 1 or not constrain):
        raise ValueError(
            "remat=True applies to the constrained layouts without pipeline (layout_loss); "
            f"got {p.label()} with constrain={constrain}. Allowed: remat=False there"
        )
    return (c, p) + _compiled(c, p, int(batch), int(seq_len), devs, dtype, constrain, optimize, remat)


#: Argument kinds shared by the step functions.
Batch = capped(MAX_BATCH)
SeqLen = capped(MAX_SEQ_LEN)
StepDType = Annotated[str, OneOf(tuple(STEP_DTYPES))]


@checked
def compiled_step(
    model,
    parallelism: Parallelism,
    batch: Batch,
    seq_len: SeqLen,
    devices=None,
    dtype: StepDType = "fp32",
    constrain: Bool = True,
    optimize: Bool = False,
    remat: Bool = False,
):
    """One SGD training step (loss, gradients, update) of :mod:`tpu_notes.model` laid out per ``parallelism``,
    jitted with in/out shardings, lowered from shapes alone and compiled: the object :func:`tpu_notes.hlo.collectives`
    parses. ``batch`` sequences of ``seq_len`` tokens, parameters in ``dtype`` (``"fp32"`` or ``"bf16"``).

    Call it as ``compiled(params, tokens, lr)`` → ``(new_params, loss)`` with arrays placed in the layout's
    shardings (:func:`train` does). ``constrain=False`` drops the layout's sharding constraints and lets XLA's
    propagation decide (see ``FINDINGS["propagation-without-constraints"]``). ``optimize=False`` skips the
    optimisation of the generated machine code (:data:`FAST_COMPILE_OPTIONS`: the same collectives, half the
    compile time on a CPU); :func:`measure_step` compiles with ``optimize=True``. ``remat=True`` recomputes each
    layer in the backward pass (``jax.checkpoint``, see :func:`layout_loss`). Compiled once per arguments
    (cached)."""
    return _get(model, parallelism, batch, seq_len, devices, dtype, constrain, optimize, remat)[2]


def _setup(model, parallelism, batch, seq_len, seed, lr, devices=None, dtype="fp32", optimize=False, remat=False):
    c, p, fn, pshard, bshard, scalar = _get(model, parallelism, batch, seq_len, devices, dtype, True, optimize, remat)
    params = M.init_params(c, seed, STEP_DTYPES[dtype])
    if p.pipeline > 1:
        params = stage_params(params, p.pipeline)
    params = jax.device_put(params, pshard)
    lr = jax.device_put(jnp.float32(lr), scalar)
    return c, fn, params, bshard, lr


def _default_devices(parallelism, devices):
    if devices is None and isinstance(parallelism, Parallelism) and parallelism == Parallelism():
        from .devices import demo_devices

        return demo_devices(1)
    return devices


@checked
def train(
    model,
    parallelism: Parallelism,
    steps: capped(MAX_STEPS),
    batch: Batch,
    seq_len: SeqLen,
    seed: Annotated[int, Positive(integer=True, allow_zero=True, maximum=2**62)] = 0,
    lr: Annotated[float, Positive(maximum=1e3)] = 0.5,
    devices=None,
    dtype: StepDType = "fp32",
    same_batch: Bool = True,
    remat: Bool = False,
) -> np.ndarray:
    """Train ``model`` (a config or preset name) for ``steps`` SGD steps (learning rate ``lr``) laid out per
    ``parallelism``; the loss before each step's update (nats), as a numpy array.

    Parameters from :func:`tpu_notes.model.init_params` with ``seed``; the tokens are
    :func:`tpu_notes.model.random_tokens` with seed ``seed`` at every step (``same_batch=True``: uniform random
    tokens hold nothing to learn, so the falling curve shows the model memorising its batch) or ``seed + i`` at
    step ``i``. ``Parallelism()`` runs on one device: the reference curve, which every layout reproduces to fp32
    rounding (tests/test_parallel.py). ``remat=True`` recomputes each layer in the backward pass (same losses).
    """
    if seed + steps >= 2**62:
        raise ValueError(f"seed must be < 2**62 - steps (it seeds a JAX PRNG key); got {seed}")
    devices = _default_devices(parallelism, devices)
    c, fn, params, bshard, lr_arr = _setup(model, parallelism, batch, seq_len, seed, lr, devices, dtype, remat=remat)
    losses = []
    for i in range(steps):
        tokens = jax.device_put(M.random_tokens(c, batch, seq_len, seed if same_batch else seed + i), bshard)
        params, value = fn(params, tokens, lr_arr)
        losses.append(float(value))
    return np.asarray(losses)


@checked
def measure_step(
    model,
    parallelism: Parallelism,
    batch: Batch,
    seq_len: SeqLen,
    repeats: capped(MAX_REPEATS) = 5,
    devices=None,
    dtype: StepDType = "fp32",
    timing: Bool = False,
):
    """Median seconds of one training step laid out per ``parallelism`` on the devices present, timed by
    :func:`tpu_notes.bench.time_fn` (warmed up, ``block_until_ready``, median of ``repeats`` samples). The step
    comes compiled, fully optimised, from :func:`compiled_step`'s cache. ``timing=True`` returns the whole
    :class:`~tpu_notes.bench.Timing` instead (min, max, samples; its ``compile_s`` is the first call). On
    simulated CPU devices this measures the host CPU running all of them, not a chip."""
    from .bench import time_fn

    devices = _default_devices(parallelism, devices)
    c, fn, params, bshard, lr = _setup(model, parallelism, batch, seq_len, 0, 1e-2, devices, dtype, optimize=True)
    tokens = jax.device_put(M.random_tokens(c, batch, seq_len, 0), bshard)
    result = time_fn(fn, params, tokens, lr, repeats=repeats)
    return result if timing else result.median_s


# ------------------------------------------------------------------------------------------------------------
# The oracle: XLA's collectives against tpu_notes.training.collectives.predicted_collectives
# ------------------------------------------------------------------------------------------------------------

#: A model small enough to compile every layout in a second or two, with 8 heads and F = 256 so that a tensor
#: degree of 8 divides them (tests/test_training_oracle.py and Chapter 5's table use it).
ORACLE_CONFIG = TransformerConfig(
    d_model=64, d_ff=256, n_layers=2, n_heads=8, n_kv_heads=8, d_head=8, vocab=256, name="oracle-tiny"
)


@dataclass(frozen=True)
class XlaCollective:
    """One collective of a compiled step, one array at a time: a combined (tuple-shaped) op gives one entry per
    array it moves, all with the same ``op``."""

    kind: str  # "all-gather", "reduce-scatter" (CPU's all-reduce + dynamic-slice), ...
    axes: tuple[str, ...]  # mesh axes of its replica groups (() for a collective-permute)
    bytes_per_device: float  # larger of operand and result bytes per device, as hlo.HloCollective.bytes
    op: str  # the HLO instruction it belongs to
    raw_kind: str  # the HLO opcode before folding CPU's reduce-scatter spelling


def _permute_axes(pairs, mesh) -> tuple[str, ...]:
    """The mesh axes along which a collective-permute's source and target devices differ."""
    where = {int(d.id): idx for idx, d in np.ndenumerate(mesh.devices)}
    axes = set()
    for a, b in pairs:
        axes |= {i for i, (x, y) in enumerate(zip(where[a], where[b])) if x != y}
    return tuple(mesh.axis_names[i] for i in sorted(axes))


def xla_collectives(compiled, mesh) -> list[XlaCollective]:
    """The collectives of ``compiled`` (a compiled step), split array by array and mapped onto ``mesh``'s axes.

    XLA's combiner passes merge many collectives of one kind into one tuple-shaped op (all the gradient
    AllReduces of a step become one); each array of such an op is listed on its own, and CPU's reduce-scatter
    spelling (an all-reduce whose result only a ``dynamic-slice`` reads) is folded per array with
    :func:`tpu_notes.hlo.normalize_cpu_collectives`.
    """
    if not isinstance(mesh, jax.sharding.Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh (parallel.make_mesh(...)); got {type(mesh).__name__}")
    if not isinstance(compiled, str) and not hasattr(compiled, "as_text"):
        raise TypeError(
            f"compiled must be a compiled step (compiled_step(...)) or its HLO text; got {type(compiled).__name__}"
        )
    module = hlo.parse_module(compiled)
    gte = {
        (i.operands[0], int(i.attribute("index"))): i.name
        for i in module.instructions
        if i.opcode == "get-tuple-element" and len(i.operands) == 1 and (i.attribute("index") or "").isdigit()
    }
    out = []
    for c in hlo.collectives(module):
        if len(c.operand_shapes) > 1 and len(c.operand_shapes) == len(c.result_shapes):
            pieces = [
                hlo.HloCollective(
                    kind=c.kind,
                    name=gte.get((c.name, i), f"{c.name}#{i}"),
                    operand_shapes=(o,),
                    result_shapes=(r,),
                    replica_groups=c.replica_groups,
                    source_target_pairs=c.source_target_pairs,
                    dimensions=c.dimensions,
                )
                for i, (o, r) in enumerate(zip(c.operand_shapes, c.result_shapes))
            ]
        else:
            pieces = [c]
        for piece in hlo.normalize_cpu_collectives(pieces, module):
            if c.kind == "collective-permute":
                axes = _permute_axes(c.source_target_pairs, mesh)
            else:
                axes = hlo.mesh_axes(c.replica_groups, mesh) or ("?",)
            out.append(XlaCollective(piece.kind, tuple(axes), float(piece.bytes), c.name, c.kind))
    return out


@dataclass(frozen=True)
class TrainingCase:
    """One layout the oracle compiles: a name, the degrees, and the model and batch it runs."""

    id: str  # e.g. "fsdp=2 x tensor=4"
    parallelism: Parallelism  # the layout (its degrees multiply to 8 devices)
    config: TransformerConfig = ORACLE_CONFIG
    batch: int = 16  # sequences per step
    seq_len: int = 16  # tokens per sequence
    findings: tuple[str, ...] = ()  # keys of FINDINGS that explain what XLA does with this layout (FOLDED: modelled)
    remat: bool = False  # each layer recomputed in the backward pass (jax.checkpoint)


#: Where XLA's compiled step departs from the textbook count of its collectives, by name: the history of why
#: :func:`~tpu_notes.training.collectives.predicted_collectives` counts as it does (:data:`FOLDED` says how it now
#: counts the departures it models); the chapter prints them and tests/test_training_oracle.py pins each one.
FINDINGS: dict[str, str] = {
    "combined": (
        "XLA merges collectives of one kind into one tuple-shaped op: every gradient AllReduce (or ReduceScatter) "
        "of a step, and the loss's scalar with them, leaves as a single all-reduce of all the arrays, placed at the "
        "end of the backward pass; so do the two or three activation AllReduces of a Megatron block that run back "
        "to back. The bytes are the model's, the number of launches is not: one large op pays the latency once. "
        "The oracle splits combined ops into their arrays before comparing, and counts the ops apart."
    ),
    "fsdp-gathers-once": (
        "FSDP (ZeRO-3) is usually costed with two AllGathers of every weight, one in the forward and one in the "
        "backward pass, because the gathered copy is dropped after use. Without rematerialisation XLA keeps the "
        "gathered weight alive from the forward pass to the backward pass and gathers it once, and the model "
        "counts one (remat=False). The price is memory: a full copy of every layer's weights per device until "
        "its backward pass, which is what ZeRO-3 set out to avoid. With remat=True each layer, its gathers "
        "included, is recomputed in the backward pass and XLA gathers its weights a second time, as the model "
        "then counts; the embedding, final norm and unembedding stay outside the recomputed layers and are "
        "gathered once. Megatron's attention-output AllReduce is redone too (the recomputed MLP needs its input; "
        "the MLP-output AllReduce is not needed again)."
    ),
    "tp-backward-per-projection": (
        "Megatron's backward pass needs one AllReduce of the input gradient of the attention block, the sum over "
        "the tensor shards of dQ·Wq\u1d40 + dK·Wk\u1d40 + dV·Wv\u1d40, and one of the MLP's, dGate·Wg\u1d40 + "
        "dUp·Wu\u1d40. XLA reduces each product on its own (three arrays of [tokens, D] for attention, two for a "
        "gated MLP, each combined into one op) and adds them afterwards: 5 AllReduces per layer in the backward "
        "pass instead of 2, 2.5x the predicted backward bytes (the HLO metadata names them: the transposes of the "
        "btd,dnh and btd,dkh projections). A fused QKV weight (one array, one matmul) or a fused gate-up weight "
        "would leave one product to reduce."
    ),
    "dp-fsdp-one-reduction": (
        "With data x fsdp, the gradient of a weight sharded over fsdp and replicated over data must be summed over "
        "all devices and kept as the fsdp shard. The model does it in two steps, a ReduceScatter over fsdp of the "
        "whole gradient and an AllReduce over data of the shard (fsdp times smaller). XLA does one reduction over "
        "both axes and slices out the fsdp shard (on CPU: an all-reduce over all 8 devices, then a dynamic-slice). "
        "Same result, different cost: XLA reduces the whole gradient over 8 devices, where the model's second "
        "step reduces only the 1/fsdp shard over data."
    ),
    "tied-embedding-reduced-twice": (
        "With tied embeddings the one table [V, D] gets two gradients, from the lookup at the input (a "
        "scatter-add) and from the unembedding matmul at the output. The model sums them and reduces the table's "
        "gradient once; XLA reduces each of the two on its own (two arrays of V x D in the combined AllReduce, "
        "or two ReduceScatters under FSDP) and adds them afterwards, twice the bytes for the largest weight of a "
        "small model."
    ),
    "propagation-without-constraints": (
        "The layouts pin two things with with_sharding_constraint (layout_loss): weights are used gathered and the "
        "residual stream stays split over the batch. Left to its own sharding propagation (compiled_step(..., "
        "constrain=False)), XLA compiles the fsdp=8 step very differently: it keeps some weights sharded and "
        "gathers the activations [B, T, D] and even the logits [B, T, V] instead, and adds well over a hundred "
        "small AllToAlls. The arithmetic is still right; the communication is not the ZeRO-3 "
        "the chapter costs, and no cost model of layouts can predict it."
    ),
    "cpu-bf16-in-f32": (
        "On the CPU backend, XLA moves bf16 collectives in f32: it converts each array up before the collective "
        "and back after, so every bf16 collective carries the bytes of the fp32 model (2x the bf16 prediction), "
        "and CPU's reduce-scatter spelling gains a convert between the all-reduce and the slice. A TPU runs bf16 "
        "collectives natively; the bf16 prediction is the one for a TPU."
    ),
}

#: The findings that :func:`~tpu_notes.training.collectives.predicted_collectives` now counts as XLA compiles them,
#: with how: the text in :data:`FINDINGS` stays as the history of why the model counts so. The others are not
#: folded: "combined" and "fsdp-gathers-once" were modelled already (the oracle splits combined ops into arrays; the
#: model gathers once without remat), "propagation-without-constraints" has no layout rule to model, and
#: "cpu-bf16-in-f32" is a CPU artefact the bf16 prediction (the one for a TPU) must not copy.
FOLDED: dict[str, str] = {
    "tp-backward-per-projection": (
        "modelled since issue 23: the backward pass AllReduces the input gradient of each projection over "
        '"tensor", wq, wk and wv apart (3, also with n_kv_heads < n_heads), w_gate and w_up apart (2; a plain MLP 1), '
        "so 7 per layer for a gated MLP and 6 for a plain one; fused_projections=True gives the fused count (4)."
    ),
    "dp-fsdp-one-reduction": (
        "modelled since issue 23: with data x fsdp each gradient is one reduction over both axes, a ReduceScatter "
        'over ("data", "fsdp") of the whole gradient (CPU: an all-reduce over all of them and a dynamic-slice), '
        'and no AllReduce over "data" of the shard.'
    ),
    "tied-embedding-reduced-twice": (
        "modelled since issue 23: a tied table's two gradients are counted as two reductions of [V, D] (AllReduces, "
        "or ReduceScatters under fsdp), except in the pipeline, whose stage sums them before its one reduction."
    ),
}

#: The layouts the oracle compares (tests/test_training_oracle.py and Chapter 5's table), 8 devices each.
TRAINING_CASES: tuple[TrainingCase, ...] = (
    TrainingCase("data=8", Parallelism(data=8), findings=("combined",)),
    TrainingCase("fsdp=8", Parallelism(fsdp=8), findings=("combined", "fsdp-gathers-once")),
    TrainingCase("tensor=8", Parallelism(tensor=8), findings=("combined", "tp-backward-per-projection")),
    TrainingCase(
        "fsdp=2 x tensor=4",
        Parallelism(fsdp=2, tensor=4),
        findings=("combined", "fsdp-gathers-once", "tp-backward-per-projection"),
    ),
    TrainingCase(
        "fsdp=4 x tensor=2",
        Parallelism(fsdp=4, tensor=2),
        findings=("combined", "fsdp-gathers-once", "tp-backward-per-projection"),
    ),
    TrainingCase(
        "data=2 x fsdp=4",
        Parallelism(data=2, fsdp=4),
        findings=("combined", "fsdp-gathers-once", "dp-fsdp-one-reduction"),
    ),
    TrainingCase(
        "data=2 x tensor=4", Parallelism(data=2, tensor=4), findings=("combined", "tp-backward-per-projection")
    ),
    TrainingCase(
        "data=8 tied",
        Parallelism(data=8),
        config=ORACLE_CONFIG.with_(tied_embeddings=True, name="oracle-tiny-tied"),
        findings=("combined", "tied-embedding-reduced-twice"),
    ),
    TrainingCase(
        "fsdp=2 x tensor=4 remat",
        Parallelism(fsdp=2, tensor=4),
        remat=True,
        findings=("combined", "fsdp-gathers-once", "tp-backward-per-projection"),
    ),
    TrainingCase(
        "data=2 x fsdp=2 x tensor=2 gqa",
        Parallelism(data=2, fsdp=2, tensor=2),
        config=ORACLE_CONFIG.with_(n_kv_heads=2, gated_mlp=False, tied_embeddings=True, name="oracle-tiny-gqa"),
        findings=(
            "combined",
            "fsdp-gathers-once",
            "tp-backward-per-projection",
            "dp-fsdp-one-reduction",
            "tied-embedding-reduced-twice",
        ),
    ),
    TrainingCase("data=4 x pipeline=2", Parallelism(data=4, pipeline=2, microbatches=2), findings=("combined",)),
    TrainingCase(
        "data=2 x pipeline=4",
        Parallelism(data=2, pipeline=4, microbatches=4),
        config=ORACLE_CONFIG.with_(n_layers=4, name="oracle-tiny-4l"),
        findings=("combined",),
    ),
)


def training_cases(ids: Sequence[str] | None = None) -> tuple[TrainingCase, ...]:
    """The oracle's layouts, all or those named by ``ids``."""
    if ids is None:
        return TRAINING_CASES
    by_id = {c.id: c for c in TRAINING_CASES}
    if isinstance(ids, str) or not isinstance(ids, Sequence):
        raise TypeError(f"ids must be None or a list of case ids from {list(by_id)}; got {ids!r}")
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise ValueError(f"unknown oracle case id(s) {unknown} in ids; known: {list(by_id)}")
    return tuple(by_id[i] for i in ids)


@dataclass(frozen=True)
class TrainingRow:
    """One line of the training oracle: collectives of one kind, axes and size, as many as predicted and found."""

    kind: str  # "all-gather", "reduce-scatter", "all-reduce", "collective-permute"
    axes: tuple[str, ...]  # mesh axes
    bytes_per_device: float  # bytes per device of one collective (hlo.HloCollective.bytes convention)
    predicted: int  # count from training.predicted_collectives
    xla: int  # count of arrays XLA moves this way (combined ops split into their arrays)
    ops: tuple[str, ...] = ()  # names of the HLO instructions those arrays travel in

    @property
    def xla_ops(self) -> int:
        """How many HLO instructions carry these arrays (fewer than ``xla`` when XLA combined them)."""
        return len(self.ops)

    @property
    def agree(self) -> bool:
        return self.predicted == self.xla


@checked
def oracle_rows(
    model,
    parallelism: Parallelism,
    batch: Batch,
    seq_len: SeqLen,
    devices=None,
    dtype: StepDType = "fp32",
    *,
    remat: Bool = False,
) -> list[TrainingRow]:
    """Compile the layout's training step and pair XLA's collectives with the model's, one row per
    (kind, axes, bytes per device), sorted. ``batch`` sequences of ``seq_len`` tokens."""
    c = as_config(model, "model")
    compiled = compiled_step(c, parallelism, batch, seq_len, devices=devices, dtype=dtype, remat=remat)
    mesh = make_mesh(parallelism, devices)
    from .training.collectives import collective_totals

    pred = collective_totals(predicted_collectives(c, parallelism, batch * seq_len, seq_len, dtype=dtype, remat=remat))
    found: dict = {}
    ops: dict = {}
    for x in xla_collectives(compiled, mesh):
        key = (x.kind, x.axes, x.bytes_per_device)
        found[key] = found.get(key, 0) + 1
        ops.setdefault(key, set()).add(x.op)
    kinds = ("all-gather", "reduce-scatter", "all-reduce", "collective-permute")
    keys = sorted(set(pred) | set(found), key=lambda k: (kinds.index(k[0]) if k[0] in kinds else 9, k[1], k[2]))
    return [TrainingRow(k[0], k[1], k[2], pred.get(k, 0), found.get(k, 0), tuple(sorted(ops.get(k, ())))) for k in keys]


def run_training_case(case: TrainingCase, devices=None) -> list[TrainingRow]:
    """:func:`oracle_rows` of one :class:`TrainingCase`."""
    if not isinstance(case, TrainingCase):
        raise TypeError(f"case must be a parallel.TrainingCase (see TRAINING_CASES); got {type(case).__name__}")
    return oracle_rows(case.config, case.parallelism, case.batch, case.seq_len, devices=devices, remat=case.remat)


def format_training_table(rows: Sequence[TrainingRow], title: str | None = None) -> str:
    """Rows as a plain-text table (at most 88 characters wide): kind, axes, bytes per device, the model's count,
    XLA's count of arrays (and of HLO ops, when combined), and whether they agree."""
    from .units import fmt

    short = {
        "all-gather": "AllGather",
        "reduce-scatter": "ReduceScatter",
        "all-reduce": "AllReduce",
        "collective-permute": "Permute",
    }
    rows = list(rows) if isinstance(rows, (list, tuple)) else rows
    if not isinstance(rows, list) or not all(isinstance(r, TrainingRow) for r in rows):
        raise TypeError("rows must be a list of parallel.TrainingRow (from oracle_rows)")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"title must be a string or None; got {title!r}")
    lines = [title] if title else []
    lines.append(f"{'collective':14s} {'axes':16s} {'bytes/device':>12s} {'model':>6s} {'XLA':>6s} {'ops':>4s}  agree")
    for r in rows:
        flag = "yes" if r.agree else "NO"
        lines.append(
            f"{short.get(r.kind, r.kind):14s} {','.join(r.axes) or '-':16s} "
            f"{fmt(r.bytes_per_device, 'B'):>12s} {r.predicted:6d} {r.xla:6d} {r.xla_ops:4d}  {flag}"
        )
    return "\n".join(lines)


def oracle_summary(cases: Sequence[TrainingCase] | None = None, devices=None) -> list[tuple[TrainingCase, list]]:
    """Run the oracle on ``cases`` (default :data:`TRAINING_CASES`): ``[(case, rows), ...]`` for
    :func:`format_oracle_summary`. Each layout is compiled once (and cached, so :func:`train` on the same layout,
    batch and sequence length reuses it)."""
    cases = TRAINING_CASES if cases is None else cases
    if (
        isinstance(cases, (str, bytes))
        or not isinstance(cases, Sequence)
        or not all(isinstance(c, TrainingCase) for c in cases)
    ):
        raise TypeError("cases must be None or a list of parallel.TrainingCase (see TRAINING_CASES, training_cases)")
    return [(case, run_training_case(case, devices)) for case in cases]


def format_oracle_summary(results) -> str:
    """One line per layout (at most 88 characters): how many (kind, axes, size) signatures agree, the
    collectives the model counts, the arrays XLA moves and the distinct HLO ops they travel in, and the findings
    that concern the layout ("combined", which concerns all, left out; a ``*`` marks those in :data:`FOLDED`,
    which the model now counts as XLA does)."""
    if (
        isinstance(results, (str, bytes))
        or not isinstance(results, (list, tuple))
        or not all(isinstance(r, tuple) and len(r) == 2 and isinstance(r[0], TrainingCase) for r in results)
    ):
        raise TypeError("results must be oracle_summary's list of (TrainingCase, rows)")
    import textwrap

    width = max([22] + [len(case.id) for case, _ in results])
    lines = [f"{'layout':{width}s} {'agree':>6s} {'model':>6s} {'XLA':>5s} {'ops':>4s}  findings (* folded)"]
    for case, rows in results:
        ok = sum(r.agree for r in rows)
        n_ops = len({op for r in rows for op in r.ops})
        head = (
            f"{case.id:{width}s} {ok:>3d}/{len(rows):<2d} {sum(r.predicted for r in rows):6d} "
            f"{sum(r.xla for r in rows):5d} {n_ops:4d}  "
        )
        diff = ", ".join(f + ("*" if f in FOLDED else "") for f in case.findings if f != "combined") or "-"
        wrapped = textwrap.wrap(
            diff, width=max(20, 88 - len(head)), break_on_hyphens=False, break_long_words=False
        ) or ["-"]
        lines.append(head + wrapped[0])
        lines += [" " * len(head) + more for more in wrapped[1:]]
    return "\n".join(lines)
