"""Exercises of Chapter 4 (ids ch04.*), registered with their reference solutions."""
from __future__ import annotations

from . import Exercise, register  # noqa: F401

#: The fp8 peak the scaling book's transformers.md (question 7) uses for an H800: 3,026 TFLOP/s with 2:4 sparsity,
#: halved (facts/hardware.json "H800"). 3,026 TFLOP/s is the spec of the *PCIe* H800 (and H100) card. DeepSeek-V3 ran
#: on SXM boards (8 GPUs per node joined by NVLink and NVSwitch, arXiv 2412.19437 §3.1), and the H800 SXM is the
#: H100 SXM die with slower NVLink and FP64, so its dense fp8 peak is the H100 SXM's, ``get_chip("h100").peak_flops("fp8")``
#: (1,979 TFLOP/s). Exercise 4.7 uses the SXM figure; the chapter prints both.
BOOK_H800_PCIE_FP8_DENSE_FLOPS = 1.513e15
#: DeepSeek-V3 training run (arXiv 2412.19437, Table 1 and §3): tokens and H800 GPU-hours (whole run: pre-training,
#: context extension and post-training), and the pre-training sequence length.
DEEPSEEK_V3_TOKENS = 14.8e12
DEEPSEEK_V3_GPU_HOURS = 2.788e6
DEEPSEEK_V3_SEQ_LEN = 4096


def _q1_model():
    from ..transformer import TransformerConfig

    D = 4096
    return TransformerConfig(d_model=D, d_ff=4 * D, n_layers=64, n_heads=32, n_kv_heads=32, d_head=128,
                             vocab=32_000, name="exercise-4.1")


def _q1():
    m = _q1_model()
    b = m.param_breakdown()
    return {"params": b.total, "attention_fraction": b.attention / b.total,
            "kv_bytes_per_token_int8": m.kv_bytes_per_token("int8")}


def _q2():
    from ..transformer import einsum_flops

    total = einsum_flops("bd,df->bf", b=4096, d=8192, f=32768)
    X = Y = 4
    return {
        # In[B_X, D_Y] · W[D_Y, F]: each device multiplies a [B/X, D/Y] block by a [D/Y, F] block (partial sums,
        # reduced over Y afterwards): both axes split the work.
        "contracting_sharded": total / (X * Y),
        # In[B_X, D] · W[D, F_Y]: each device computes a [B/X, F/Y] block of the output.
        "output_sharded": total / (X * Y),
        # In[B_X, D] · W[D, F]: only X splits the work; the Y devices of a row all compute the same block.
        "replicated_over_y": total / X,
        # ... so the mesh as a whole does Y times the matmul's FLOPs.
        "replicated_mesh_total": total / X * (X * Y),
    }


def _q3():
    from ..transformer import einsum_flops

    return einsum_flops("btnh,nhd->btd", b=8, t=1024, n=32, h=128, d=4096)


def _q4():
    from ..transformer import get_model

    from ..hardware import get_chip

    m = get_model("llama3-70b")
    # prefill intensity is T·G/(G+1): linear in T, so the compute-bound length is critical intensity / (G/(G+1))
    min_prefill = get_chip("v5e").critical_intensity("bf16") / m.attention_intensity(1, 1)
    return [m.attention_intensity(8192, 8192), m.attention_intensity(1, 8192), min_prefill]


def _q5():
    from ..transformer import TransformerConfig

    m = TransformerConfig(d_model=8192, d_ff=4 * 8192, n_layers=1, n_heads=64, n_kv_heads=64, d_head=128,
                          vocab=32_000)
    # attention FLOPs grow linearly in T: solve attention_flops(T) = 2 · (projection weights) per token
    per_unit_T = m.attention_flops(1, causal=False) / m.n_layers
    return 2.0 * m.attention_params_per_layer() / per_unit_T


def _q6():
    from ..transformer import get_model

    m = get_model("llama3-8b")
    T = 8192
    return m.recompute_flops(T, "save_matmul_outputs") / m.flops_per_token(T, training=True)


def _q7():
    from ..hardware import get_chip
    from ..transformer import get_model

    m = get_model("deepseek-v3")
    useful = m.flops_per_token(DEEPSEEK_V3_SEQ_LEN, training=True) * DEEPSEEK_V3_TOKENS
    available = DEEPSEEK_V3_GPU_HOURS * 3600.0 * get_chip("h100").peak_flops("fp8")   # H800 SXM = H100 SXM compute
    return useful / available


def _q8():
    from ..transformer import get_model

    m = get_model("deepseek-v3")
    return {"active_fraction": m.active_param_count() / m.param_count(),
            "critical_batch_v5e": m.critical_batch("v5e")}


def _q9():
    from ..transformer import get_model

    m = get_model("llama3-70b")
    mha = m.with_(n_kv_heads=m.n_heads)
    return [m.kv_cache_bytes(32, 8192), mha.kv_cache_bytes(32, 8192) - m.kv_cache_bytes(32, 8192)]


def _q10():
    from ..transformer import get_model

    m = get_model("llama3-8b")
    tokens = 16 * 8192
    return {"none": m.checkpoint_bytes(tokens, "none"), "full_block": m.checkpoint_bytes(tokens, "full_block")}


def _q11():
    from ..transformer import get_model
    from ..units import dtype_bytes

    m = get_model("llama3-70b")
    T = 32768
    return dtype_bytes("fp32") * m.n_heads * T * T


def _q12():
    from ..transformer import get_model

    m = get_model("tiny-moe")
    # FLOPs per token of the MoE layers' MLPs: router + k routed + shared experts, forward
    D, Fe = m.d_model, m.expert_ff
    return m.n_moe_layers * 2.0 * (D * m.n_experts
                                   + (m.experts_per_token + m.n_shared_experts) * m.mlp_matrices * D * Fe)


register(Exercise(
    id="ch04.q1", title="parameters of a 64-layer MHA model",
    solve=_q1, unit="params, fraction, bytes",
    hint="Per layer: 4·D² attention (MHA, N·H = D) + 3·D·F gated MLP + 2·D norm gains; add 2·D·V for the "
         "untied embeddings and D for the final norm. KV cache: 2·L·K·H values per token, 1 byte each in int8. "
         "Answer {'params': ..., 'attention_fraction': ..., 'kv_bytes_per_token_int8': ...}."))

register(Exercise(
    id="ch04.q2", title="FLOPs of a sharded matmul on a 4×4 mesh",
    solve=_q2, unit="FLOPs",
    hint="2·B·D·F in total, divided by the product of the mesh axes that split the computation (a sharded "
         "contracting dim splits it too: each device makes partial sums); an axis that shards neither operand "
         "repeats the work on each of its devices. Answer {'contracting_sharded', 'output_sharded', "
         "'replicated_over_y' (per device), 'replicated_mesh_total' (all 16 devices)}."))

register(Exercise(
    id="ch04.q3", title="FLOPs of a general einsum",
    solve=_q3, unit="FLOPs",
    hint="2 × the product of every distinct index (b, t, n, h, d), each counted once."))

register(Exercise(
    id="ch04.q4", title="arithmetic intensity of attention, prefill and decode",
    solve=_q4, unit="FLOPs/byte",
    hint="FLOPs 4·T·S·N·H; bytes 2·(2·T·N·H + 2·S·K·H) in bf16. Prefill gives T·G/(G+1), decode S·G/(S+G) with "
         "G = N/K; prefill is compute-bound once T·G/(G+1) exceeds v5e's C/W_hbm. "
         "Answer [prefill intensity, decode intensity, shortest compute-bound prompt in tokens]."))

register(Exercise(
    id="ch04.q5", title="context length where attention equals the projections",
    solve=_q5, unit="tokens",
    hint="Per token and layer the projections cost 2·4·D·N·H FLOPs and attention (full matrix) 4·T·N·H."))

register(Exercise(
    id="ch04.q6", title="recompute cost of saving only matmul outputs",
    solve=_q6, unit="fraction of the training FLOPs",
    hint="The two attention products are recomputed once: one forward attention pass (causal, T/2 keys on "
         "average) over the forward+backward FLOPs per token."))

register(Exercise(
    id="ch04.q7", title="DeepSeek-V3's MFU on H800s",
    solve=_q7, unit="fraction",
    hint="6 × active matmul weights + causal attention at 4096 tokens, times 14.8T tokens, over "
         "2.788M GPU-hours × 3600 s × the dense fp8 peak of an H800 SXM (the H100 SXM's, "
         "hardware.get_chip('h100').peak_flops('fp8'))."))

register(Exercise(
    id="ch04.q8", title="DeepSeek-V3: active share and critical batch",
    solve=_q8, unit="fraction, tokens",
    hint="Active parameters over total; the critical batch of a dense bf16 matmul on v5e (about 240) times E/k. "
         "Answer {'active_fraction': ..., 'critical_batch_v5e': ...}."))

register(Exercise(
    id="ch04.q9", title="KV cache of Llama 3 70B and what GQA saves",
    solve=_q9, unit="bytes",
    hint="2·L·K·H·2 bytes per token in bf16; multi-head attention would have K = N = 64 instead of 8. "
         "Answer [GQA cache bytes, bytes MHA would need in addition]."))

register(Exercise(
    id="ch04.q10", title="activation memory with and without remat",
    solve=_q10, unit="bytes",
    hint="bytes × checkpoints per layer × d_model × tokens × layers; count the saved tensors with "
         "saved_activations(policy). Answer {'none': ..., 'full_block': ...}."))

register(Exercise(
    id="ch04.q11", title="the score matrix flash attention never stores",
    solve=_q11, unit="bytes",
    hint="One layer, one sequence: N heads × T × T scores, 4 bytes each in fp32."))

register(Exercise(
    id="ch04.q12", title="forward FLOPs per token of tiny-moe's expert layers",
    solve=_q12, unit="FLOPs per token",
    hint="Per MoE layer: router 2·D·E, plus 2·3·D·F_e for each of the k routed and each shared expert."))
