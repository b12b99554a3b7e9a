"""Exercises of Chapter 4 (ids ch04.*), registered with their reference solutions.

Numbered in the order the chapter meets them; each title names the question of the scaling book's Transformer
chapter it reworks ("book Q3", ...) or says "our own". Where the book's printed answer is rounded or uses another
dtype, the exercise asks for both readings (4.3 and 4.5), so the book's number is checked too.
"""

from __future__ import annotations

from ..collectives import all_to_all_time
from ..hardware import get_chip
from ..sharding import matmul_plan
from ..transformer import TransformerConfig, einsum_flops, get_model
from ..units import dtype_bytes
from . import Exercise, register

#: The fp8 peak the scaling book's transformers.md (question 7) uses for an H800: 3,026 TFLOP/s with 2:4 sparsity,
#: halved (facts/hardware.json "H800"). 3,026 TFLOP/s is the spec of the *PCIe* H800 (and H100) card. DeepSeek-V3 ran
#: on SXM boards (8 GPUs per node joined by NVLink and NVSwitch, arXiv 2412.19437 §3.1), and the H800 SXM is the
#: H100 SXM die with slower NVLink and FP64, so its dense fp8 peak is the H100 SXM's,
#: ``get_chip("h100").peak_flops("fp8")`` (1,979 TFLOP/s). Exercise 4.13 uses the SXM figure; the chapter prints both.
BOOK_H800_PCIE_FP8_DENSE_FLOPS = 1.513e15
#: DeepSeek-V3 training run (arXiv 2412.19437, Table 1 and §3): tokens and H800 GPU-hours (whole run: pre-training,
#: context extension and post-training), and the pre-training sequence length.
DEEPSEEK_V3_TOKENS = 14.8e12
DEEPSEEK_V3_GPU_HOURS = 2.788e6
DEEPSEEK_V3_SEQ_LEN = 4096


# ---- 4.1 (book Q3) ----------------------------------------------------------------------------------------------
def _q1():
    return einsum_flops("btnh,nhd->btd", b=8, t=1024, n=32, h=128, d=4096)


register(
    Exercise(
        id="ch04.q1",
        title="FLOPs of a general einsum (book Q3)",
        solve=_q1,
        unit="FLOPs",
        hint="2 × the product of every distinct index (b, t, n, h, d), each counted once.",
    )
)


# ---- 4.2 (book Q2) ----------------------------------------------------------------------------------------------
_Q2 = dict(sizes={"B": 4096, "D": 8192, "F": 32768}, mesh={"X": 4, "Y": 8, "Z": 4})


def _q2():
    plan = matmul_plan("In[B_X, D_Y]", "W[D_Y, F]", **_Q2)
    n_devices = 1
    for size in _Q2["mesh"].values():
        n_devices *= size
    return {"per_device": plan.flops_per_device, "mesh_total": plan.flops_per_device * n_devices}


register(
    Exercise(
        id="ch04.q2",
        title="FLOPs of a matmul on a 4×8×4 mesh (book Q2)",
        solve=_q2,
        unit="FLOPs",
        hint="2·B·D·F in total, divided by the product of the mesh axes that split the computation (a sharded "
        "contracting dim splits it too: each device makes partial sums); Z shards neither operand, so its 4 "
        "devices repeat the work. Answer {'per_device': ..., 'mesh_total': ... (all 128 devices)}.",
    )
)


# ---- 4.3 (book Q1) ----------------------------------------------------------------------------------------------
def q3_models():
    """Book Q1's model with its exact sizes (Llama 2 7B's attention and vocabulary, 64 layers, F = 4·D), and with
    the rounded sizes its printed answer uses (D ≈ 4e3, F ≈ 16e3)."""
    exact = get_model("llama2-7b").with_(d_ff=4 * 4096, n_layers=64, name="exercise-4.3")
    rounded = exact.with_(d_model=4000, d_ff=16_000, d_head=125, name="exercise-4.3, rounded sizes")
    return exact, rounded


def _q3():
    m, rounded = q3_models()
    b = m.param_breakdown()
    return {
        "params": b.total,
        "params_rounded_sizes": rounded.param_count(),
        "attention_fraction": b.attention / b.total,
        "kv_bytes_per_token_int8": m.kv_bytes_per_token("int8"),
    }


register(
    Exercise(
        id="ch04.q3",
        title="a 64-layer MHA model (book Q1)",
        solve=_q3,
        unit="params, fraction, B",
        hint="Per layer: 4·D² attention (MHA, N·H = D) + 3·D·F gated MLP + 2·D norm gains; add 2·D·V for the "
        "untied embeddings and D for the final norm; 'params_rounded_sizes' redoes it with D = 4000, F = 16000 as "
        "the book's arithmetic does. KV cache: 2·L·K·H values per token, 1 byte each in int8. Answer "
        "{'params', 'params_rounded_sizes', 'attention_fraction', 'kv_bytes_per_token_int8'}.",
    )
)


# ---- 4.4 (book Q5) ----------------------------------------------------------------------------------------------
#: Exercise 4: the book's D = 8192 model, narrowed to D = 5120 (the chapter prints the answer for 8192).
Q4_D = 5120


def _q4():
    m = TransformerConfig(
        d_model=Q4_D, d_ff=4 * Q4_D, n_layers=1, n_heads=Q4_D // 128, n_kv_heads=Q4_D // 128, d_head=128, vocab=32_000
    )
    # attention FLOPs grow linearly in T: solve attention_flops(T) = 2 · (projection weights) per token
    per_unit_T = m.attention_flops(1, causal=False) / m.n_layers
    return 2.0 * m.attention_params_per_layer() / per_unit_T


register(
    Exercise(
        id="ch04.q4",
        title="attention equals projections (book Q5)",
        solve=_q4,
        unit="tokens",
        hint="Per token and layer the projections cost 2·4·D·N·H FLOPs and attention (full matrix) 4·T·N·H.",
    )
)


# ---- 4.5 (book Q8) ----------------------------------------------------------------------------------------------
#: Exercise 5: the book asks about DeepSeek-V3, whose numbers the chapter prints; we ask about Mixtral 8x7B.
Q5_MODEL = "mixtral-8x7b"


def _q5():
    m = get_model(Q5_MODEL)
    return {
        "active_fraction": m.active_param_count() / m.param_count(),
        "critical_batch_bf16": m.critical_batch("v5e"),
        "critical_batch_int8": m.critical_batch("v5e", "bf16", weight_dtype="int8"),
    }


register(
    Exercise(
        id="ch04.q5",
        title="Mixtral 8x7B (book Q8)",
        solve=_q5,
        unit="fraction, tokens",
        hint="Active parameters over total; the critical batch of a dense matmul on v5e with bf16 compute (about "
        "240 tokens with bf16 weights, 120 with int8 weights, which halve the bytes) times E/k. "
        "Answer {'active_fraction', 'critical_batch_bf16', 'critical_batch_int8'}.",
    )
)


# ---- 4.6 (our own): the AllToAlls of expert parallelism ---------------------------------------------------------
_Q6 = dict(model="deepseek-v3", chip="v5p", axis=16, tokens_per_chip=4096)


def _q6():
    m, chip, n, b = get_model(_Q6["model"]), get_chip(_Q6["chip"]), _Q6["axis"], _Q6["tokens_per_chip"]
    # every chip sends each of its tokens' activations to the k experts chosen for it: B·k·D bf16 values per chip
    whole = n * b * m.experts_per_token * m.d_model * dtype_bytes("bf16")
    dispatch = all_to_all_time(whole, n, chip.ici_bw_bidi).total
    # balanced routing: each chip's experts receive B·k token-copies and run one expert MLP on each
    compute = 2.0 * b * m.experts_per_token * m.expert_params() / chip.peak_flops("bf16")
    return {"dispatch": dispatch, "expert_compute": compute}


register(
    Exercise(
        id="ch04.q6",
        title="an expert-parallel AllToAll (our own)",
        solve=_q6,
        unit="s",
        hint="the AllToAll moves V = N·B·k·D·2 bytes (N chips, B tokens each, k experts per token) in V/(4·W_ici) on "
        "a ring; the routed experts do 2·B·k·3·D·F_e FLOPs per chip. Answer {'dispatch', 'expert_compute'}.",
    )
)


# ---- 4.7 (book Q6) and 4.8 (our own): remat --------------------------------------------------------------------
#: Exercises 7 and 8: the chapter prints Llama 3 8B's remat figures; these ask about Llama 3 70B.
Q7_MODEL = "llama3-70b"


def _q7():
    m = get_model(Q7_MODEL)
    T = 8192
    return m.recompute_flops(T, "save_matmul_outputs") / m.flops_per_token(T, training=True)


register(
    Exercise(
        id="ch04.q7",
        title="recompute cost of matmul outputs (book Q6)",
        solve=_q7,
        unit="fraction",
        hint="The two attention products are recomputed once: one forward attention pass (causal, T/2 keys on "
        "average) over the forward+backward FLOPs per token.",
    )
)


def _q8():
    m = get_model(Q7_MODEL)
    tokens = 16 * 8192
    return {"none": m.checkpoint_bytes(tokens, "none"), "full_block": m.checkpoint_bytes(tokens, "full_block")}


register(
    Exercise(
        id="ch04.q8",
        title="activation memory and remat (our own)",
        solve=_q8,
        unit="bytes",
        hint="bytes × checkpoints per layer × d_model × tokens × layers; count the saved tensors with "
        "saved_activations(policy). Answer {'none': ..., 'full_block': ...}.",
    )
)


# ---- 4.9 (our own): the KV cache under MHA, GQA and MQA --------------------------------------------------------
def _q9():
    m = get_model("llama3-70b")
    mha, mqa = m.with_(n_kv_heads=m.n_heads), m.with_(n_kv_heads=1)
    gqa = m.kv_cache_bytes(32, 8192)
    return [gqa, mha.kv_cache_bytes(32, 8192) - gqa, mqa.kv_cache_bytes(32, 8192)]


register(
    Exercise(
        id="ch04.q9",
        title="Llama 3 70B KV cache, GQA/MHA/MQA (our own)",
        solve=_q9,
        unit="bytes",
        hint="2·L·K·H·2 bytes per token in bf16; multi-head attention would have K = N = 64 instead of 8, multi-query "
        "K = 1. Answer [GQA cache bytes, bytes MHA would need in addition, MQA cache bytes].",
    )
)


# ---- 4.10 (book Q4) and 4.11 (our own): flash attention --------------------------------------------------------
#: Exercise 10: Mixtral 8x7B (4 query heads per KV head); the chapter prints Llama 3's (8 per KV head).
Q10_MODEL = "mixtral-8x7b"


def _q10():
    m = get_model(Q10_MODEL)
    # prefill intensity is T·G/(G+1): linear in T, so the compute-bound length is critical intensity / (G/(G+1))
    min_prefill = get_chip("v5e").critical_intensity("bf16") / m.attention_intensity(1, 1)
    return [m.attention_intensity(8192, 8192), m.attention_intensity(1, 8192), min_prefill]


register(
    Exercise(
        id="ch04.q10",
        title="attention intensity (book Q4)",
        solve=_q10,
        unit="FLOPs/byte",
        hint="FLOPs 4·T·S·N·H; bytes 2·(2·T·N·H + 2·S·K·H) in bf16. Prefill gives T·G/(G+1), decode S·G/(S+G) with "
        "G = N/K; prefill is compute-bound once T·G/(G+1) exceeds v5e's C/W_hbm. "
        "Answer [prefill intensity, decode intensity, shortest compute-bound prompt in tokens].",
    )
)


def _q11():
    m = get_model("llama3-70b")
    T = 32768
    return dtype_bytes("fp32") * m.n_heads * T * T


register(
    Exercise(
        id="ch04.q11",
        title="what flash attention never stores (our own)",
        solve=_q11,
        unit="bytes",
        hint="One layer, one sequence: N heads × T × T scores, 4 bytes each in fp32.",
    )
)


# ---- 4.12 (our own) and 4.13 (book Q7), in the closing Exercises section ----------------------------------------
def _q12():
    m = get_model("tiny-moe")
    # FLOPs per token of the MoE layers' MLPs: router + k routed + shared experts, forward
    D, Fe = m.d_model, m.expert_ff
    return (
        m.n_moe_layers * 2.0 * (D * m.n_experts + (m.experts_per_token + m.n_shared_experts) * m.mlp_matrices * D * Fe)
    )


register(
    Exercise(
        id="ch04.q12",
        title="tiny-moe expert FLOPs (our own)",
        solve=_q12,
        unit="FLOPs",
        hint="Per MoE layer: router 2·D·E, plus 2·3·D·F_e for each of the k routed and each shared expert.",
    )
)


def _q13():
    m = get_model("deepseek-v3")
    useful = m.flops_per_token(DEEPSEEK_V3_SEQ_LEN, training=True) * DEEPSEEK_V3_TOKENS
    available = DEEPSEEK_V3_GPU_HOURS * 3600.0 * get_chip("h100").peak_flops("fp8")  # H800 SXM = H100 SXM compute
    return useful / available


register(
    Exercise(
        id="ch04.q13",
        title="DeepSeek-V3's MFU on H800s (book Q7)",
        solve=_q13,
        unit="fraction",
        hint="6 × active matmul weights + causal attention at 4096 tokens, times 14.8T tokens, over "
        "2.788M GPU-hours × 3600 s × the dense fp8 peak of an H800 SXM (the H100 SXM's, "
        "hardware.get_chip('h100').peak_flops('fp8')).",
    )
)
