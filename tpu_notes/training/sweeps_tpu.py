"""Published TPU scaling series and communication-bound TPU runs, as :class:`~tpu_notes.training.sweeps.LayoutSweep`
records (Chapter 6; issue 37).

Every figure below was read in its source; the tables are restated in code, not copied. Sources:

- ``maxtext@e47fa1b5d``: github.com/google/maxtext (now AI-Hypercomputer/maxtext), commit e47fa1b5d (2023-10-31,
  "Modify results table"), README "TPU v5e" table: TFLOP/s per chip and MFU of the synthetic 16B, 32B, 64B and 128B
  models on 1, 2, 4, 8, 16 and 32 slices of v5e-256 (the multislice runs behind Google Cloud's Nov. 2023 blog on
  training over 50,000+ TPU v5e chips); run configs ``MaxText/configs/largest_job/{16b,64b,128b}.sh`` at the same
  commit (per-device batch 6, 2 and 1; remat ``full``; 128B with ``ici_fsdp_parallelism=16``,
  ``ici_tensor_parallelism=16``; sequence 2048). The models are those of that commit's ``base.yml`` scaled by
  ``global_parameter_scale`` (:func:`maxtext_2023`); ``train.py``'s ``calculate_training_tflops`` at that commit
  counts the full (non-causal) attention matrix.
- ``maxtext-v5p@632f651``: the same repository, commit 632f651 (authored 2023-12-15, "Refactor MaxText/configs/ and
  documentation"), ``MaxText/configs/v5p/README.md``: TFLOP/s per chip and MFU of the synthetic 32B to 1024B models
  on one and two slices of v5p-128 to v5p-4096; run configs ``MaxText/configs/v5p/*.sh`` at that commit
  (per-device batch 8, 4, 2, 2, 2, 2; remat ``minimal`` up to 256B, ``full`` above; ``ici_tensor_parallelism`` 4,
  4, 8, 8, 16, 16; FSDP over the rest of the slice; DCN data parallelism across slices). That commit's ``train.py``
  counts causal attention (half the score matrix, since 64ee4e938, 2023-11-29), so ``counting="causal"``. Later
  configs changed the batches and layouts without re-measuring the table: the configs of the table's own commit
  are used.
- ``maxtext@f70c643b``: the same repository, commit f70c643b (2023-08-30), README TPU v4 table, the 52B rows (1 and
  2 slices of v4-384) and ``MaxText/configs/{1,2}xv4-384.sh`` (FSDP 192, per-device batch 10, remat ``full``,
  d_model 12288, 32 heads of 256, d_ff 49152, 32 layers; base.yml's ReLU MLP, vocabulary 32,768 and sequence 1024).
- ``maxtext PR #1323``: github.com/AI-Hypercomputer/maxtext pull request 1323 ("Add pure FSDP config for
  llama405b", 2025-02-28): Llama 3.1 405B on two v6e-256 slices at about 400 TFLOP/s per chip with pure ICI FSDP
  256 (and DCN FSDP 2), against about 365 with ICI tensor parallelism 4; the two configs
  (``llama3_1_405b_8192_fsdp_dcn``, ``llama3_1_405b_8192_pure_fsdp_ici``) in
  ``benchmarks/maxtext_trillium_model_configs.py`` at 91cb00b01 (2025-03-01).
- ``tpu-recipes@c8cfe2f``: github.com/AI-Hypercomputer/tpu-recipes, commit c8cfe2f (2026-08-07),
  ``training/ironwood/README.md`` summary table (chips, global batch, sequence length, step time, TFLOP/s and
  tokens/s per chip) and ``training/ironwood/llama3.1-70b/{8k-bf16-tpu7x-4x4x4,8k-bf16-tpu7x-4x8x8,
  128k-bf16-tpu7x-4x8x8}/xpk/run_recipe.sh`` (MaxText arguments: per-device batch, ``ici_fsdp_parallelism=-1``,
  ``ici_context_parallelism=8`` at 131,072 tokens, the custom remat policy).

What the sources state that the model does not price is in each sweep's ``notes``; ``TPU_SWEEPS`` holds them
all. Nothing here is fitted.
"""

from __future__ import annotations

import math

from ..hardware import get_chip
from ..topology import Slice
from ..transformer import TransformerConfig
from ..units import PositiveInt, checked
from .parallelism import Parallelism
from .published import PublishedRun
from .sweep_record import LayoutSweep

#: MaxText's synthetic base model before 2024-02-14 (``base.yml`` from af0067809, 2023-09-07): d_model 2560, 8
#: heads of 256, d_ff 8192 (ReLU, 2 matrices), 16 layers, vocabulary 32,768, logits via the embedding.
_BASE_2023 = {"emb": 2560, "heads": 8, "mlp": 8192, "layers": 16}
#: The largest ``global_parameter_scale`` :func:`maxtext_2023` builds (MaxText's tables stop at 1024).
MAX_SCALE = 4096


@checked
def maxtext_2023(scale: PositiveInt) -> TransformerConfig:
    """MaxText's 2023 synthetic model at ``global_parameter_scale=scale`` (a power of 2): the scale's log2 is split
    as ``3 q + r``; heads and d_ff double ``q + (r > 0)`` times, d_model ``q + (r > 1)`` times, layers ``q`` times
    (``pyconfig.get_individual_scales`` at af0067809); at most :data:`MAX_SCALE`."""
    if scale & (scale - 1) or scale > MAX_SCALE:
        raise ValueError(f"scale must be a power of 2 from 1 to {MAX_SCALE} (global_parameter_scale); got {scale!r}")
    q, r = divmod(int(math.log2(scale)), 3)
    heads = _BASE_2023["heads"] * 2 ** (q + (r > 0))
    return TransformerConfig(
        d_model=_BASE_2023["emb"] * 2 ** (q + (r > 1)),
        d_ff=_BASE_2023["mlp"] * 2 ** (q + (r > 0)),
        n_layers=_BASE_2023["layers"] * 2**q,
        n_heads=heads,
        n_kv_heads=heads,
        d_head=256,
        vocab=32_768,
        gated_mlp=False,
        tied_embeddings=True,
        name=f"maxtext-2023-{scale}b",
    )


#: MaxText's 2023 TPU v4 52B model (``configs/1xv4-384.sh`` at f70c643b).
MAXTEXT_V4_52B = TransformerConfig(
    d_model=12288,
    d_ff=49152,
    n_layers=32,
    n_heads=32,
    n_kv_heads=32,
    d_head=256,
    vocab=32_768,
    gated_mlp=False,
    tied_embeddings=True,
    name="maxtext-v4-52b",
)

# -- v5e multislice (maxtext@e47fa1b5d) ------------------------------------------------------------------------------

#: The README's v5e table: model scale -> (per-device batch, ICI layout, ((slices, TFLOP/s per chip, MFU), ...)).
_V5E_TABLE = {
    16: (
        6,
        Parallelism(fsdp=256),
        ((1, 120, 0.6110), (2, 117, 0.5937), (4, 117, 0.5914), (8, 115, 0.5827), (16, 111, 0.5656), (32, 108, 0.5465)),
    ),
    32: (
        4,
        Parallelism(fsdp=256),
        ((1, 132, 0.6686), (2, 128, 0.6481), (4, 126, 0.6410), (8, 125, 0.6367), (16, 123, 0.6226), (32, 119, 0.6040)),
    ),
    64: (
        2,
        Parallelism(fsdp=256),
        ((1, 118, 0.5990), (2, 112, 0.5666), (4, 110, 0.5585), (8, 108, 0.5496), (16, 105, 0.5329), (32, 99, 0.5018)),
    ),
    128: (
        1,
        Parallelism(fsdp=16, tensor=16),
        ((1, 110, 0.5606), (2, 110, 0.5582), (4, 108, 0.5493), (8, 104, 0.5293), (16, 100, 0.5086), (32, 91, 0.4625)),
    ),
}


def _v5e_run(scale: int, slices: int) -> PublishedRun:
    batch, ici, rows = _V5E_TABLE[scale]
    _, tflops, mfu = next(row for row in rows if row[0] == slices)
    layout = Parallelism(fsdp=ici.fsdp, tensor=ici.tensor, dcn=slices)
    return PublishedRun(
        f"{scale}B (2023) synthetic, {slices} x v5e-256",
        f"maxtext@e47fa1b5d, README v5e table ({slices}x v5e-256 row), configs/largest_job/{scale}b.sh",
        maxtext_2023(scale),
        Slice("v5e", (16, 16)),
        layout,
        slices * 256 * batch * 2048,
        2048,
        "full_block",
        reported_mfu=mfu,
        reported_flops_per_s=tflops * 1e12,
        group="maxtext-synthetic",
        notes=f"per-device batch {batch} of 2048 tokens, remat 'full', {ici.short()} in each slice and "
        "dcn_data_parallelism=-1 (the slices as data parallelism over DCN); the 2023 base.yml model "
        "(maxtext_2023), TFLOP/s counted with full attention.",
    )


def _v5e_series(scale: int) -> LayoutSweep:
    slices = tuple(row[0] for row in _V5E_TABLE[scale][2])
    return LayoutSweep(
        f"{scale}B (2023) synthetic, 1-32 x v5e-256",
        f"maxtext@e47fa1b5d, README v5e table ({scale}B columns), configs/largest_job/{scale}b.sh",
        "slices",
        "slices over DCN (data parallelism across slices; the per-chip batch is fixed, weak scaling)",
        tuple(_v5e_run(scale, n) for n in slices),
        comm_bound=True,
        notes="Weak scaling: each slice does the same work, so the per-chip loss from 1 to 32 slices is the DCN "
        "gradient reduction the slices add and its exposure. The README's reproduction notes say a 9k-MTU network "
        "and its rto_setup.sh (TCP retransmission tuning) reduce the DCN degradation: the network stack's tuning, "
        "per-slice step jitter and the hierarchical (ICI reduce-scatter, DCN all-reduce, ICI all-gather) schedule "
        "are not modelled beyond DCN bandwidth."
        + (
            " The 128B runs keep tensor parallelism 16 inside each slice (small batch per chip: one sequence), so "
            "their per-slice step is itself communication-heavy."
            if scale == 128
            else ""
        ),
    )


# -- v5p one and two slices (maxtext-v5p@632f651) -------------------------------------------------------------------

#: configs/v5p/<scale>b.sh at 632f651: scale -> (per-device batch, tensor degree, remat as this package prices it).
_V5P_CONFIGS = {
    32: (8, 4, "save_matmul_outputs"),
    64: (4, 4, "save_matmul_outputs"),
    128: (2, 8, "save_matmul_outputs"),
    256: (2, 8, "save_matmul_outputs"),
    512: (2, 16, "full_block"),
    1024: (2, 16, "full_block"),
}
#: The v5p README's rows: (scale, v5p-N (cores), slice shape, ((slices, TFLOP/s per chip, MFU), ...)).
_V5P_TABLE = (
    (32, 128, (4, 4, 4), ((1, 328, 0.7147), (2, 319, 0.6943))),
    (64, 128, (4, 4, 4), ((1, 323, 0.7031), (2, 309, 0.6726))),
    (128, 256, (4, 4, 8), ((1, 315, 0.6868), (2, 305, 0.6634))),
    (128, 512, (4, 8, 8), ((1, 316, 0.6883), (2, 274, 0.5966))),
    (256, 1024, (8, 8, 8), ((1, 308, 0.6709), (2, 289, 0.6299))),
    (512, 1024, (8, 8, 8), ((1, 294, 0.6399), (2, 282, 0.6145))),
    (1024, 2048, (8, 8, 16), ((1, 254, 0.5535), (2, 237, 0.5155))),
    (1024, 4096, (8, 16, 16), ((1, 297, 0.6480), (2, 279, 0.6083))),
)


def _v5p_run(scale: int, cores: int, shape: tuple, slices: int, tflops: float, mfu: float) -> PublishedRun:
    batch, tensor, remat = _V5P_CONFIGS[scale]
    chips = cores // 2
    return PublishedRun(
        f"{scale}B (2023) synthetic, {slices} x v5p-{cores}",
        f"maxtext-v5p@632f651, configs/v5p/README.md ({scale}B, {slices}x v5p-{cores} row), configs/v5p/{scale}b.sh",
        maxtext_2023(scale),
        Slice("v5p", shape),
        Parallelism(fsdp=chips // tensor, tensor=tensor, dcn=slices),
        slices * chips * batch * 2048,
        2048,
        remat,
        reported_mfu=mfu,
        reported_flops_per_s=tflops * 1e12,
        counting="causal",
        group="maxtext-synthetic",
        notes=f"{chips} chips per slice (v5p-{cores} counts cores); per-device batch {batch} of 2048 tokens; "
        f"ici_fsdp_parallelism=-1, ici_tensor_parallelism={tensor}; remat "
        + ("'minimal' (saves the matmul outputs)" if remat == "save_matmul_outputs" else "'full'")
        + "; the 2023 base.yml model (maxtext_2023); TFLOP/s counted with causal attention (train.py at 632f651).",
    )


def _v5p_pair(scale: int, cores: int, shape: tuple, rows: tuple) -> LayoutSweep:
    return LayoutSweep(
        f"{scale}B (2023) synthetic, 1-2 x v5p-{cores}",
        f"maxtext-v5p@632f651, configs/v5p/README.md ({scale}B table), configs/v5p/{scale}b.sh",
        "slices",
        "one slice, then two over DCN (data parallelism across slices; the per-chip batch is fixed)",
        tuple(_v5p_run(scale, cores, shape, *row) for row in rows),
        comm_bound=True,
        notes="Weak scaling over DCN: the per-chip work is the same, so the per-chip loss is the cross-slice "
        "gradient all-reduce left exposed. Two points: the trend only (no rank correlation)."
        + (
            " This pair loses 13%, against 3% for the same model on two v5p-256: twice the chips per slice halves "
            "each chip's DCN bytes in the model, yet the measurement is worse (per-host DCN links, not per chip, "
            "may bound it)."
            if cores == 512
            else ""
        ),
    )


# -- one slice, more chips over ICI (maxtext-v5p@632f651) -----------------------------------------------------------


def _v5p_nodes(scale: int, comm_bound: bool, notes: str) -> LayoutSweep:
    rows = [(cores, shape, rs[0]) for s, cores, shape, rs in _V5P_TABLE if s == scale]  # the 1-slice rows
    runs = tuple(_v5p_run(scale, cores, shape, *first) for cores, shape, first in rows)
    return LayoutSweep(
        f"{scale}B (2023) synthetic, 1 x v5p-{rows[0][0]} -> v5p-{rows[-1][0]}",
        f"maxtext-v5p@632f651, configs/v5p/README.md ({scale}B table, 1x rows), configs/v5p/{scale}b.sh",
        "nodes",
        "chips of one ICI slice (FSDP degree grows, tensor degree and per-chip batch fixed: weak scaling over ICI)",
        runs,
        comm_bound=comm_bound,
        notes=notes,
    )


# -- Ironwood, Llama 3.1 70B (tpu-recipes@c8cfe2f) -----------------------------------------------------------------

#: The Ironwood summary table's bf16 Llama 3.1 70B rows: (chips, global batch, sequence, tokens/s per chip, TFLOP/s).
_IRONWOOD_70B = {
    "8k-64": (64, 256, 8192, 2686.98, 1207.05),
    "8k-256": (256, 1024, 8192, 2670.55, 1199.67),
    "128k-256": (256, 64, 131_072, 963.03, 897.94),
}


def _ironwood_run(key: str) -> PublishedRun:
    chips, gbs, seq, tokens, tflops = _IRONWOOD_70B[key]
    long = seq > 8192
    # Ironwood shows each chip's two TensorCores as two JAX devices: per_device_batch_size and the ICI degrees count
    # devices. The package's tpu7x pod is (4, 4, 576), so the 4x8x8 slice is entered as (4, 4, 16): as many chips,
    # a different torus.
    system = Slice("tpu7x", (4, 4, 4) if chips == 64 else (4, 4, 16))
    layout = Parallelism(fsdp=chips // 4, context=4) if long else Parallelism(fsdp=chips)
    recipe = f"{'128k' if long else '8k'}-bf16-tpu7x-{'4x4x4' if chips == 64 else '4x8x8'}"
    return PublishedRun(
        f"Llama 3.1 70B, {seq} tokens, {chips} tpu7x",
        f"tpu-recipes@c8cfe2f, ironwood/README.md (llama3.1-70b, {chips} chips, {seq}, bf16 row), "
        f"ironwood/llama3.1-70b/{recipe}/xpk/run_recipe.sh",
        "llama3-70b",
        system,
        layout,
        gbs * seq,
        seq,
        "save_qkv_proj",
        reported_mfu=tflops * 1e12 / 2.3e15,
        reported_tokens_per_s=tokens,
        counting="causal",
        group="maxtext-recipes",
        notes=f"{2 * chips} devices (two TensorCores per chip); "
        + (
            "per-device batch 0.125 (64 sequences), ici_context_parallelism=8 devices = 4 chips (context is the "
            "inner mesh axis, so a chip's two cores share a context group), FSDP over the rest (64 chips); "
            "remat 'custom' keeping the layer input, attention context, q/k/v and MLP-out projections on device, "
            "priced as save_qkv_proj; vocabulary tiled 4 ways."
            if long
            else "per-device batch 2 (two devices per chip: 4 sequences per chip), FSDP over all devices; remat "
            "'custom' keeping the layer input, attention context and q/k/v projections, priced as save_qkv_proj."
        )
        + " reported_mfu: the table's TFLOP/s (causal count) over the 2.3 PFLOP/s bf16 peak.",
    )


# -- Llama 3.1 405B on 2 x v6e-256: tensor 4 or pure FSDP (maxtext PR #1323) --------------------------------------

#: PR #1323's two configs (``benchmarks/maxtext_trillium_model_configs.py`` at 91cb00b01): name -> (ICI layout,
#: remat as priced, approximate TFLOP/s per chip the PR states, what the config offloads).
_V6E_405B = {
    "llama3-1-405b-8192-fsdp-dcn": (Parallelism(fsdp=64, tensor=4, dcn=2), 365, "layer input, q, k, v, out"),
    "llama3-1-405b-8192-pure-fsdp-ici": (Parallelism(fsdp=256, dcn=2), 400, "layer input"),
}


def _v6e_405b_run(name: str) -> PublishedRun:
    layout, tflops, offloaded = _V6E_405B[name]
    return PublishedRun(
        f"Llama 3.1 405B, 2 x v6e-256, {layout.short()}",
        f"maxtext PR #1323 (2025-02-28) description; config {name} in benchmarks/maxtext_trillium_model_configs.py "
        "at 91cb00b01",
        "llama3-405b",
        Slice("v6e", (16, 16)),
        layout,
        512 * 8192,
        8192,
        "offload_layer_input",
        reported_mfu=tflops * 1e12 / get_chip("v6e").peak_flops("bf16"),
        reported_flops_per_s=tflops * 1e12,
        counting="causal",
        group="maxtext-recipes",
        notes=f"per-device batch 1 of 8192 tokens on 512 chips; dcn_fsdp_parallelism=2 priced as data parallelism "
        f"over DCN; remat 'custom' offloading the {offloaded} to host, priced as offload_layer_input. The PR "
        "states the throughput as approximate ('~') TFLOP/s, MaxText's causal count.",
    )


TPU_SWEEPS: tuple[LayoutSweep, ...] = (
    LayoutSweep(
        "Llama 3.1 405B, 2 x v6e-256: TP 4 vs FSDP",
        "maxtext PR #1323 (AI-Hypercomputer/maxtext, 2025-02-28): ~365 TFLOP/s with ici_tensor_parallelism=4, ~400 "
        "with pure ICI FSDP 256; configs at 91cb00b01",
        "layout",
        "the ICI layout (FSDP 64 x tensor 4 on a hybrid-ring mesh, or FSDP 256) and with it what is offloaded",
        tuple(_v6e_405b_run(n) for n in _V6E_405B),
        comm_bound=True,
        notes="Same model, chips, global batch and sequence: the PR credits the gain to dropping tensor "
        "parallelism (its collective matmuls 'do okay' but lose to FSDP's weight gathers) and to offloading only "
        "the layer inputs (offloading everything cost about 5 TFLOP/s). The custom 64x4 hybrid-ring mesh, "
        "collective-matmul decomposition and host-offload traffic are not priced; both points are priced with the "
        "same offload policy.",
    ),
    *(_v5e_series(s) for s in (16, 64, 128)),
    *(_v5p_pair(scale, cores, shape, rows) for scale, cores, shape, rows in _V5P_TABLE),
    _v5p_nodes(
        128,
        False,
        "The per-chip work is fixed (per-device batch 2, tensor 8) while FSDP grows 16 -> 32; the README shows "
        "no per-chip change (315 -> 316 TFLOP/s).",
    ),
    _v5p_nodes(
        1024,
        True,
        "The per-chip work is fixed (per-device batch 2, tensor 16) while FSDP grows 64 -> 128, yet the per-chip "
        "rate rises 17% (254 -> 297 TFLOP/s): communication, not the matmuls, sets the difference. The README "
        "gives no reason; the 8x8x16 and 8x16x16 tori differ in how the tensor-16 and FSDP rings map onto "
        "wrap-around links, which the model prices only through ring sizes and link counts.",
    ),
    LayoutSweep(
        "52B synthetic, 1-2 x v4-384",
        "maxtext@f70c643b, README TPU v4 table (52B rows), configs/1xv4-384.sh and 2xv4-384.sh",
        "slices",
        "one slice, then two over DCN (dcn_data_parallelism=2; the per-chip batch is fixed)",
        tuple(
            PublishedRun(
                f"52B synthetic, {n} x v4-384",
                f"maxtext@f70c643b, README TPU v4 table ({n}x v4-384 row), configs/{n}xv4-384.sh",
                MAXTEXT_V4_52B,
                Slice("v4", (4, 4, 12)),
                Parallelism(fsdp=192, dcn=n),
                n * 192 * 10 * 1024,
                1024,
                "full_block",
                reported_mfu=mfu,
                reported_flops_per_s=tflops * 1e12,
                group="maxtext-synthetic",
                notes="192 chips per slice (v4-384 counts cores); ici_fsdp_parallelism=192, per-device batch 10 "
                "of base.yml's 1024 tokens; remat 'full'.",
            )
            for n, tflops, mfu in ((1, 154, 0.560), (2, 162, 0.589))
        ),
        comm_bound=False,
        notes="Kept as a warning, not as evidence of a trend: the README says the 2-slice row is higher than one "
        "slice because of choices the compiler made, not for a fundamental reason. Compiler scheduling that "
        "differs between the 1- and 2-slice programs is outside the model.",
    ),
    LayoutSweep(
        "2023 synthetic 16B-128B, 1 x v5e-256",
        "maxtext@e47fa1b5d, README v5e table (1x v5e-256 row), configs/largest_job/*.sh",
        "model-size",
        "model size at fixed chips (each size with its own per-device batch; 128B adds tensor parallelism 16)",
        tuple(_v5e_run(s, 1) for s in (16, 32, 64, 128)),
        notes="The configs change with the model (per-device batch 6, 4, 2, 1; 128B switches to FSDP 16 x tensor "
        "16), so the axis is model size with its recipe, not model size alone.",
    ),
    LayoutSweep(
        "2023 synthetic 256B-512B, 1 x v5p-1024",
        "maxtext-v5p@632f651, configs/v5p/README.md (256B and 512B, 1x v5p-1024 rows)",
        "model-size",
        "model size at fixed chips (256B: tensor 8, remat minimal; 512B: tensor 16, remat full)",
        tuple(_v5p_run(s, 1024, (8, 8, 8), 1, *rows[0][1:]) for s, c, _, rows in _V5P_TABLE if c == 1024),
        notes="The recipe changes with the model (tensor degree and remat policy).",
    ),
    LayoutSweep(
        "Llama 3.1 70B, 64 -> 256 tpu7x",
        "tpu-recipes@c8cfe2f, ironwood/README.md (llama3.1-70b bf16, 64 and 256 chips, 8192 tokens)",
        "nodes",
        "chips of one slice, FSDP over all of them, per-device batch fixed (weak scaling over ICI)",
        (_ironwood_run("8k-64"), _ironwood_run("8k-256")),
        notes="4x4x4 then 4x8x8; the second entered as (4, 4, 16) because the package's tpu7x pod is (4, 4, 576).",
    ),
    LayoutSweep(
        "Llama 3.1 70B, 8K -> 128K tokens, 256 tpu7x",
        "tpu-recipes@c8cfe2f, ironwood/README.md (llama3.1-70b bf16, 256 chips, 8192 and 131072 rows)",
        "context",
        "sequence length at fixed chips and fixed tokens per step (8.4M): 1024 x 8192, then 64 x 131,072 with "
        "context parallelism over 8 devices (4 chips)",
        (_ironwood_run("8k-256"), _ironwood_run("128k-256")),
        notes="MaxText's TPU context parallelism all-gathers the keys and values and shards the queries (with "
        "load-balanced token reordering), while this package prices ring attention; the 128K recipe also tunes "
        "the splash-attention block sizes, reduces dQ in 3 steps and estimates the max logit, none of which the "
        "model sees beyond its attention-kernel efficiency. The measured TFLOP/s per chip falls from 1200 to 898.",
    ),
)

__all__ = ["MAXTEXT_V4_52B", "MAX_SCALE", "TPU_SWEEPS", "maxtext_2023"]
