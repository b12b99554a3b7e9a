"""Baseline calls of Chapter 7's analysis modules (tpu_notes.inference.*) for tests/test_hostile_input.py.

Merged into ``hostile_cases.CASES`` at the end of that file; see its docstring for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import INF, NAN, ODD, Case, ChipArg, Choice, Fixed, Flag, Int, Model, Num, Opt, Raw, Sizes, lazy

I = "tpu_notes.inference."
DT = ("bf16", "fp32", "fp8", "int8", "int4")


def _step(**kw):
    return dict(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=Int(4, big=True),
        batch=Int(8, big=True),
        seq_len=Int(1024, big=True),
        **kw,
    )


def lazy_steps():
    from tpu_notes.inference import latency_throughput_curve

    return list(latency_throughput_curve("llama3-8b", "v5e", 4, 2048, [1, 8, 64]))


def _step_model():
    from tpu_notes.inference import decode_step_model

    return decode_step_model("llama3-8b", "v5e", 4, 16)


def _sim_deployment():
    from tpu_notes.inference.engine import deploy

    return deploy("llama3-8b", "v5e", 4)


def _sim_workload():
    from tpu_notes.inference.workload import LengthDistribution, Workload

    return Workload.poisson(
        2.0, n_requests=10, prompt=LengthDistribution.fixed(256), output=LengthDistribution.fixed(16)
    )


def _sim_result():
    from tpu_notes.inference.simulator import simulate

    return simulate(_sim_deployment(), _sim_workload())


def _slo():
    from tpu_notes.inference.slo import SLO

    return SLO(1.0, 0.05)


def _goodput_result():
    from tpu_notes.inference.goodput import max_rate_at_attainment

    return max_rate_at_attainment(_sim_deployment(), _sim_workload(), _slo(), max_probes=3)


_SLO_ARG = Raw(_slo, hostile=[None, 3, (1.0, 0.05), "slo", ODD], lazy=True)
_SHARE = Num(0.1, zero=True, top=0.9)


def _length():
    from tpu_notes.inference.workload import LengthDistribution

    return LengthDistribution.fixed(64)


def _scheduler():
    from tpu_notes.inference.simulator import Scheduler

    return Scheduler(token_budget=512, max_seqs=64)


def _speculation():
    from tpu_notes.inference.simulator import Speculation

    return Speculation("eagle", 4, 0.7)


def _disaggregation():
    from tpu_notes.inference.simulator import Disaggregation

    return Disaggregation(_sim_deployment(), 1, "ici")


def _rng():
    import numpy as np

    return np.random.default_rng(0)


W = I + "workload."
_COMPONENTS = Raw(
    ((1.0, 64.0, 0.5),),
    hostile=[None, "x", 3, (), ((0.5, 64.0, 0.5),), ((1.0, -1.0, 0.5),), ((1.0, 64.0, 9.0),), ((1.0, 64.0),), (3,)],
)
_LEN_ARG = Opt(Raw(_length, hostile=[3, "x", ODD], lazy=True), none_baseline=True)

CASES = {
    # step
    I + "formulas.machine": Case(chip=ChipArg("v5e"), compute_dtype=Choice("bf16")),
    I + "formulas.weight_params_read": Case(model=Model("tiny-moe"), batch=Int(4, big=True)),
    I + "formulas.kv_bytes_per_token": Case(
        model=Model("llama3-8b"),
        kv_dtype=Choice("int8"),
        local_window=Opt(Int(4096, big=True)),
        local_fraction=Num(0.5, zero=True, top=1.0),
        seq_len=Opt(Int(8192, big=True)),
    ),
    I + "step.step_time_from_counts": Case(
        weight_bytes=Num(1e9, zero=True),
        kv_bytes=Num(1e8, zero=True),
        flops=Num(1e10, zero=True),
        chip=ChipArg("v5e"),
        n_chips=Int(4, big=True),
        batch=Int(8, big=True),
        seq_len=Int(1024, big=True),
        compute_dtype=Choice("bf16"),
        resident_bytes=Opt(Num(2e9)),
    ),
    I + "step.decode_step_time": Case(
        **_step(
            weight_dtype=Choice("int8"),
            kv_dtype=Choice("bf16"),
            compute_dtype=Choice("bf16"),
            local_window=Opt(Int(512, big=True)),
            local_fraction=Num(0.5, zero=True, top=1.0),
        )
    ),
    I + "step.critical_batch": Case(
        model=Model("llama3-8b"), chip=ChipArg("v5e"), weight_dtype=Choice("int8"), compute_dtype=Choice("bf16")
    ),
    I + "step.serving_memory": Case(
        model=Model("llama3-8b"),
        batch=Int(8, big=True),
        seq_len=Int(1024, big=True),
        n_chips=Int(4, big=True),
        weight_dtype=Choice("bf16"),
        kv_dtype=Choice("int8"),
    ),
    I + "step.decode_step_model": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=4,
        max_batch=16,
        weight_dtype="bf16",
        kv_dtype="int8",
        compute_dtype="bf16",
    ),
    I + "step.DecodeStepModel.seconds": Case(
        self_=_step_model,
        batch=Raw(8, [0, -1, 2.5, 17, 10**12, "8", None, True, NAN]),
        kv_tokens=Raw(8192, [-1, 2.5, 2**60, "8", None, True, NAN, INF]),
    ),
    I + "step.prefill_time": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=Int(4, big=True),
        prompt_len=Int(2048, big=True),
        batch=Int(2, big=True),
        mfu=Num(0.5, top=1.0),
        weight_dtype=Choice("bf16"),
        compute_dtype=Choice("bf16"),
        cached_len=Int(512, zero=True, big=True),
    ),
    # serving
    I + "serving.max_batch": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=Int(4, big=True),
        seq_len=Int(8192, big=True),
        weight_dtype=Choice("bf16"),
        kv_dtype=Choice("bf16"),
        reserve_fraction=Num(0.1, zero=True, top=0.99),
    ),
    I + "serving.min_chips": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        batch=Opt(Int(8, big=True)),
        seq_len=Opt(Int(8192, big=True)),
        weight_dtype=Choice("bf16"),
        kv_dtype=Choice("bf16"),
        reserve_fraction=Num(0.1, zero=True, top=0.99),
    ),
    I + "engine.slice_shapes": Case(chip=ChipArg("v5p", tpu=True)),
    I + "serving.smallest_topology": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e", tpu=True),
        batch=Opt(Int(8, big=True)),
        seq_len=Opt(Int(8192, big=True)),
        weight_dtype=Choice("int8"),
        kv_dtype=Choice("int8"),
        reserve_fraction=Num(0.1, zero=True, top=0.99),
    ),
    I + "serving.throughput_per_chip": Case(
        **_step(
            decode_len=Opt(Int(512, big=True)),
            weight_dtype=Choice("bf16"),
            kv_dtype=Choice("bf16"),
            compute_dtype=Choice("bf16"),
        )
    ),
    I + "serving.latency_throughput_curve": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=Int(4, big=True),
        seq_len=Int(1024, big=True),
        batches=Opt(Sizes((1, 8, 64))),
        weight_dtype=Choice("bf16"),
        kv_dtype=Choice("bf16"),
        compute_dtype=Choice("bf16"),
        fitting_only=Flag(True),
    ),
    I + "serving.cost_per_million_tokens": Case(
        tokens_per_s_per_chip=Num(500.0),
        dollars_per_chip_hour=Opt(Num(1.2), none_baseline=True),
        chip=Opt(ChipArg("v5e")),
    ),
    I + "serving.pareto_frontier": Case(
        steps=Raw(lazy_steps, hostile=["abc", None, 3, [None], ("x",), ODD], lazy=True)
    ),
    I + "serving.disaggregation_ratio": Case(
        prefill_s=Num(0.9), step_s=Num(0.02), batch=Int(32, big=True), decode_len=Int(512)
    ),
    I + "serving.eviction_per_step": Case(batch=Int(32, big=True), prompt_len=Int(8192), decode_len=Int(4096)),
    # sharding
    I + "sharding.generation_matmul_times": Case(
        chip=ChipArg("v5e", tpu=True),
        batch=Int(64, big=True),
        d_model=Int(8192),
        d_ff=Int(28672),
        tp=Int(16),
        weight_dtype=Choice("bf16"),
    ),
    I + "sharding.max_tp_memory": Case(chip=ChipArg("v5e", tpu=True), d_ff=Int(16384), batch=Int(32, big=True)),
    I + "sharding.max_tp_ici": Case(chip=ChipArg("v5e", tpu=True), d_ff=Int(16384), n_axes=Int(2)),
    I + "sharding.latency_bound_tp": Case(
        chip=ChipArg("v5e", tpu=True), batch=Int(16, big=True), d_model=Int(8192), dtype=Choice("int8")
    ),
    I + "sharding.kv_sharding": Case(
        model=Model("llama3-70b"), n_chips=Int(16), heads=Opt(Int(8, big=True)), batch=Opt(Int(16, big=True))
    ),
    I + "sharding.weight_stationary_comms": Case(
        chip=ChipArg("v5p", tpu=True),
        batch=Int(64, big=True),
        d_model=Int(8192),
        d_ff=Int(32768),
        n_chips=Int(128),
        layout=Choice("2d"),
        n_axes=Int(3),
    ),
    I + "sharding.ws_2d_crossover": Case(d_model=Int(4096), d_ff=Int(16384)),
    # long context
    I + "formulas.decode_attention": Case(
        model=Model("deepseek-v3"), seq_len=Int(8192, big=True), batch=Int(4, big=True), kv_dtype=Choice("bf16")
    ),
    I + "long_context.cross_layer_kv": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=Int(4, big=True),
        seq_len=Int(8192, big=True),
        share=Raw(2, hostile=[0, -1, 2.5, 65, 10**12, "2", None, True, NAN]),
        batch=Opt(Int(8, big=True)),
        weight_dtype=Choice("int8"),
        kv_dtype=Choice("bf16"),
        reserve_fraction=Num(0.1, zero=True, top=0.99),
    ),
    I + "long_context.sequence_sharded_decode": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        n_chips=Int(8, big=True),
        seq_len=Int(2**20, big=True),
        batch=Int(1, big=True),
        weight_dtype=Choice("bf16"),
        kv_dtype=Choice("bf16"),
        partial_dtype=Choice("fp32"),
    ),
    I + "long_context.chunked_prefill": Case(
        deployment=Raw(_sim_deployment, hostile=[None, "llama3-8b", 3, ODD], lazy=True),
        decode=Int(8, big=True),
        context=Int(1024, big=True),
        prompt_len=Int(2048, big=True),
        chunk=Raw(512, hostile=[0, -1, 2.5, 10**12, "512", None, True, NAN]),
    ),
    # speculative
    I + "speculative.expected_tokens_per_round": Case(acceptance=Num(0.8, zero=True, top=1.0), k=Int(4, big=True)),
    I + "speculative.acceptance_from_mean_length": Case(
        tau=Raw(2.5, hostile=[0.999, 0.0, -1.0, 5.5, 1e300, NAN, INF, "2.5", None, True]), k=Int(4, big=True)
    ),
    I + "speculative.acceptance_from_draft_rate": Case(rate=Num(0.5, zero=True, top=1.0), k=Int(4, big=True)),
    I + "speculative.speculative_speedup": Case(
        acceptance=Num(0.8, zero=True, top=1.0),
        k=Int(4, big=True),
        draft_cost=Num(0.05, zero=True),
        verify_cost=Num(1.0),
    ),
    I + "speculative.best_k": Case(
        acceptance=Num(0.8, zero=True, top=1.0),
        draft_cost=Num(0.05, zero=True),
        k_max=Int(16, big=True),
        verify_cost=Num(1.0),
    ),
    # simulator
    I + "simulator.simulate": Case(
        deployment=Raw(_sim_deployment, hostile=[None, "llama3-8b", 3, ODD], lazy=True),
        workload=Raw(_sim_workload, hostile=[None, 3, "poisson", ODD], lazy=True),
        scheduler=Opt(Raw(_scheduler, hostile=[3, "chunked", ODD], lazy=True), none_baseline=True),
        disaggregation=Opt(Raw(_disaggregation, hostile=[3, "ici", ODD], lazy=True), none_baseline=True),
        router=Choice("least-loaded"),
        ttft_at=Choice("decode"),
        warmup=_SHARE,
        drain=_SHARE,
        speculative=Opt(Raw(_speculation, hostile=[3, "eagle", ODD], lazy=True), none_baseline=True),
    ),
    I + "simulator.SimResult.window": Case(self_=_sim_result),
    I + "simulator.SimResult.meets": Case(self_=_sim_result, slo=_SLO_ARG),
    I + "simulator.SimResult.attainment": Case(self_=_sim_result, slo=_SLO_ARG),
    I + "simulator.SimResult.slo_requests_per_s": Case(self_=_sim_result, slo=_SLO_ARG),
    # goodput
    I + "slo.SLO": Case(
        ttft_s=Num(1.0, top=86400.0),
        tpot_s=Num(0.05, top=86400.0),
        tbt_s=Opt(Num(0.2, top=86400.0), none_baseline=True),
    ),  # fmt: skip
    I + "goodput.GoodputResult.label": Case(self_=_goodput_result),
    I + "goodput.max_rate_at_attainment": Case(
        deployment=Raw(_sim_deployment, hostile=[None, "llama3-8b", 3, ODD], lazy=True),
        workload=Raw(_sim_workload, hostile=[None, 3, "poisson", ODD], lazy=True),
        slo=_SLO_ARG,
        attainment=Num(0.9, top=1.0),
        scheduler=Opt(Raw(_scheduler, hostile=[3, "chunked", ODD], lazy=True), none_baseline=True),
        disaggregation=Opt(Raw(_disaggregation, hostile=[3, "ici", ODD], lazy=True), none_baseline=True),
        router=Choice("least-loaded"),
        ttft_at=Choice("decode"),
        warmup=_SHARE,
        drain=_SHARE,
        rtol=Num(0.2, top=1.0),
        max_probes=Int(3, big=True),
    ),
    I + "goodput.best_serving": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        chips_budget=Int(4, big=True),
        workload=Raw(_sim_workload, hostile=[None, 3, "poisson", ODD], lazy=True),
        slo=_SLO_ARG,
        attainment=Num(0.9, top=1.0),
        weight_dtype=Choice("bf16"),
        kv_dtype=Choice("bf16"),
        compute_dtype=Opt(Choice("bf16"), none_baseline=True),
        scheduler=Opt(Raw(_scheduler, hostile=[3, "chunked", ODD], lazy=True), none_baseline=True),
        disaggregate=Flag(False),
        link=Opt(Choice("ici"), none_baseline=True),
        router=Choice("least-loaded"),
        rtol=Num(0.5, top=1.0),
        max_probes=Int(2, big=True),
        max_candidates=Int(1, big=True),
    ),
    I + "simulator.sweep": Case(
        deployment=Raw(_sim_deployment, hostile=[None, "llama3-8b", 3], lazy=True),
        workload=Raw(_sim_workload, hostile=[None, 3], lazy=True),
        # a subnormal rate (its stream would span inf seconds) and one whose gaps vanish: refused by rates[k]
        rates=Raw(
            [1.0, 4.0], hostile=[[], "1", None, 3, [0.0], [-1.0], [NAN], [INF], [1.0] * 65, [1.0, 5e-324], [1e300]]
        ),
        engines=Raw(
            lambda: {"chunked": (_scheduler(), None)},
            hostile=[{}, None, 3, {"a": 3}, {"a": (1, 2)}, {"a": (None,)}, {3: (None, None)}],
            lazy=True,
        ),
    ),
    I + "simulator.default_engines": Case(
        prefill=Opt(Raw(_sim_deployment, hostile=[3, "x", ODD], lazy=True), none_baseline=True),
        instances=Int(1, big=True),
        link=Opt(Choice("ici")),
    ),
    I + "simulator.Scheduler": Case(
        policy=Choice("chunked"),
        token_budget=Int(512, big=True),
        max_seqs=Int(64, big=True),
        kv=Choice("paged"),
        block_size=Int(16, big=True),
        preemption=Choice("recompute"),
        prefix_caching=Flag(False),
        slot_tokens=Opt(Int(4096, big=True), none_baseline=True),
    ),
    I + "simulator.Scheduler.label": Case(self_=_scheduler),
    I + "simulator.Speculation": Case(
        draft=Opt(Raw("eagle", hostile=[3, 4.5, ODD])),
        k=Int(4, big=True),
        acceptance=Num(0.7, zero=True, top=1.0),
    ),
    I + "simulator.Speculation.label": Case(self_=_speculation),
    I + "simulator.Disaggregation": Case(
        prefill=Raw(_sim_deployment, hostile=[None, "llama3-8b", 3, ODD], lazy=True),
        instances=Int(2, big=True),
        link=Opt(Choice("ici")),
    ),
    I + "simulator.Disaggregation.bandwidth": Case(
        self_=_disaggregation, decode=Raw(_sim_deployment, hostile=[None, "llama3-8b", 3], lazy=True)
    ),
    I + "simulator.Disaggregation.transfer_seconds": Case(
        self_=_disaggregation,
        decode=Raw(_sim_deployment, hostile=[None, 3], lazy=True),
        tokens=Int(1024, zero=True, big=True),
    ),
    I + "simulator.Disaggregation.label": Case(self_=_disaggregation),
    I + "simulator.SimResult.row": Case(self_=_sim_result),
    I + "simulator.SimResult.goodput": Case(self_=_sim_result, ttft_slo_s=Num(1.0), tpot_slo_s=Num(0.05)),
    # workload
    W + "LengthDistribution": Case(
        components=_COMPONENTS, low=Int(1, big=True), high=Int(4096, big=True), name=Raw("", hostile=[3, None])
    ),
    W + "LengthDistribution.mixture": Case(
        components=_COMPONENTS, low=Int(1, big=True), high=Int(4096, big=True), name=Raw("", hostile=[3, None])
    ),
    W + "LengthDistribution.fixed": Case(n=Int(64, big=True)),
    W + "LengthDistribution.lognormal": Case(
        median=Num(100.0), sigma=Num(0.5, zero=True, top=5.0), low=Int(1, big=True), high=Int(4096, big=True)
    ),
    W + "LengthDistribution.sharegpt_like": Case(part=Choice("prompt")),
    W + "LengthDistribution.sample": Case(
        self_=_length, rng=Raw(_rng, hostile=[None, 3, "x", ODD], lazy=True), n=Int(10, zero=True, big=True)
    ),
    W + "Workload": Case(
        n_requests=Int(20, big=True),
        arrival=Choice("poisson"),
        rate=Opt(Num(2.0)),
        prompt=Raw(_length, hostile=[None, 3, "x", ODD], lazy=True),
        output=Raw(_length, hostile=[None, 3, "x", ODD], lazy=True),
        cv=Num(2.0),
        concurrency=Opt(Int(4, big=True), none_baseline=True),
        prefix_share=Num(0.5, zero=True, top=1.0),
        prefix_len=Int(16, zero=True, big=True),
        seed=Int(3, zero=True, big=True),
        jitter=Opt(Num(0.1, zero=True, top=0.5), none_baseline=True),
    ),
    W + "Workload.poisson": Case(
        rate=Num(2.0), n_requests=Int(20, big=True), prompt=_LEN_ARG, output=_LEN_ARG, seed=Int(0, zero=True, big=True)
    ),
    W + "Workload.bursty": Case(
        rate=Num(2.0),
        cv=Num(2.0),
        n_requests=Int(20, big=True),
        prompt=_LEN_ARG,
        output=_LEN_ARG,
        seed=Int(0, zero=True, big=True),
    ),
    W + "Workload.closed": Case(
        concurrency=Int(4, big=True),
        n_requests=Int(20, big=True),
        prompt=_LEN_ARG,
        output=_LEN_ARG,
        seed=Int(0, zero=True, big=True),
        jitter=Num(0.1, zero=True, top=0.5),
    ),
    W + "Workload.draw": Case(self_=_sim_workload),
}

# -- tpu_notes.generate (JAX): model parameters, prompts and probability vectors are not fuzzed -----------------------
G = "tpu_notes.generate."
TINY = "tiny-gqa"


def _params():
    from tpu_notes import model

    return model.init_params(TINY, 0)


def _prompt():
    from tpu_notes import model

    return model.random_tokens(TINY, 1, 4, seed=1)


def _cache():
    from tpu_notes import generate

    return generate.prefill(_params(), _prompt(), TINY, 8)[1]


def _big_tokens():
    import jax.numpy as jnp

    return jnp.full((1, 4), 10**6, jnp.int32)  # ids past the vocabulary (JAX's gather would clamp them)


def _one_layer_cache():
    c = _cache()
    return {"k": c["k"][:1], "v": c["v"][:1]}  # a cache of fewer layers than the parameters


def _token():
    import jax.numpy as jnp

    return jnp.zeros((1,), jnp.int32)


def _probs(seed):
    def make():
        import numpy as np

        return np.random.default_rng(seed).dirichlet(np.ones(5))

    return make


def _logits():
    import jax.numpy as jnp

    return jnp.arange(6.0)


def _fit():
    class Fit:
        peak_flops = 1e11
        bandwidth = 1e10

    return Fit()


def _spec(**kw):
    return dict(
        target_params=Fixed(_params, lazy=True),
        target_config=Model(TINY),
        draft_params=Fixed(_params, lazy=True),
        draft_config=Model(TINY),
        prompt=Fixed(_prompt, lazy=True),
        new_tokens=Int(3, big=True),
        k=Int(2, big=True),
        temperature=Num(1.0, zero=True),
        seed=Int(0, zero=True, big=True),
        **kw,
    )


CASES.update(
    {
        G + "init_cache": Case(
            config=Model(TINY), batch=Int(2, big=True), max_len=Int(16, big=True), dtype=Choice("float32")
        ),
        G + "cache_bytes": Case(cache=Raw(_cache, hostile=["x", None, 3, {"k": 1}, ODD], lazy=True)),
        G + "prefill": Case(
            params=Fixed(_params, lazy=True),
            tokens=Raw(_prompt, [lazy(_big_tokens)], lazy=True),
            config=Model(TINY),
            max_len=Int(8, big=True),
        ),
        G + "decode_step": Case(
            params=Fixed(_params, lazy=True),
            cache=Raw(_cache, hostile=["x", None, 3, ODD, lazy(_one_layer_cache)], lazy=True),
            token=Fixed(_token, lazy=True),
            pos=Int(4, zero=True, big=True),
            config=Model(TINY),
        ),
        G + "generate": Case(
            params=Fixed(_params, lazy=True),
            prompt=Raw(_prompt, [lazy(_big_tokens)], lazy=True),
            config=Model(TINY),
            new_tokens=Int(3, big=True),
            temperature=Num(0.5, zero=True),
            seed=Int(0, zero=True, big=True),
        ),
        G + "generate_uncached": Case(
            params=Fixed(_params, lazy=True),
            prompt=Fixed(_prompt, lazy=True),
            config=Model(TINY),
            new_tokens=Int(2, big=True),
            temperature=Num(0.5, zero=True),
            seed=Int(0, zero=True, big=True),
        ),
        G + "token_probs": Case(logits=Fixed(_logits, lazy=True), temperature=Num(0.5, zero=True)),
        G + "acceptance_probability": Case(p=Fixed(_probs(1), lazy=True), q=Fixed(_probs(2), lazy=True)),
        G + "residual_distribution": Case(p=Fixed(_probs(1), lazy=True), q=Fixed(_probs(2), lazy=True)),
        G + "speculative_step_distribution": Case(p=Fixed(_probs(1), lazy=True), q=Fixed(_probs(2), lazy=True)),
        G + "speculative_generate": Case(**_spec()),
        G + "speculative_samples": Case(**_spec(n_samples=Int(4, big=True))),
        G + "target_distribution": Case(
            params=Fixed(_params, lazy=True),
            config=Model(TINY),
            prompt=Fixed(_prompt, lazy=True),
            new_tokens=Int(1, top=4),
            temperature=Num(1.0, zero=True),
        ),
        G + "decode_cost": Case(
            config=Model(TINY), batch=Int(2, big=True), seq_len=Int(16, big=True), dtype=Choice("float32")
        ),
        G + "measure_decode_step": Case(
            run_baseline=False,
            config=Model(TINY),
            batch=Int(2, big=True),
            seq_len=Int(16, big=True),
            dtype=Choice("float32"),
            repeats=Int(1, big=True),
            steps=Int(2, big=True),
        ),
        G + "measured_vs_predicted": Case(
            run_baseline=False,
            config=Model(TINY),
            fit=Raw(_fit, hostile=["no-such-chip", None, 3, ODD], lazy=True, names=("chip",)),
            cases=Raw([(1, 16)], hostile=["abc", None, 3, [(1,)], [("x", 16)], [(0, 16)], [(1, 2**40)], []]),
            dtype=Choice("float32"),
            repeats=Int(1, big=True),
        ),
        G + "decode_bytes_oracle": Case(
            cases=Raw(
                [(TINY, 1, 16)], hostile=["abc", None, 3, [(TINY, 1)], [("no-such-model", 1, 16)], [(TINY, 0, 16)], []]
            ),
            dtype=Choice("float32"),
        ),
    }
)

COVERED = (
    "inference.formulas",
    "inference.step",
    "inference.long_context",
    "inference.serving",
    "inference.sharding",
    "inference.speculative",
    "inference.simulator",
    "inference.goodput",
    "inference.slo",
    "inference.workload",
    "generate",
)

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {
    "inference.formulas.Machine",
    "inference.step.DecodeStepTime",
    "inference.step.ServingMemory",
    "inference.step.PrefillTime",
    "inference.sharding.GenerationMatmulTimes",
    "inference.sharding.KVSharding",
    "inference.sharding.WeightStationary",
    "inference.simulator.SimResult",
    "inference.goodput.GoodputResult",
    "inference.workload.Requests",
    "inference.step.DecodeStepModel",
    "inference.formulas.DecodeAttention",
    "inference.long_context.SharedKV",
    "inference.long_context.SequenceShardedDecode",
    "inference.long_context.ChunkedPrefill",
}
