"""Baseline calls of Chapters 5–6's modules (tpu_notes.training.*) for tests/test_hostile_input.py (gpu: its own file).

Merged into ``hostile_cases.CASES`` at the end of that file; see its docstring for the kinds of argument.
"""

from __future__ import annotations

from hostile_cases import ODD, Case, ChipArg, Choice, Flag, Int, Model, Num, Opt, Raw, lazy

T = "tpu_notes."
TR = T + "training."


def _par(**kw):
    from tpu_notes.training import Parallelism

    return Parallelism(**kw)


def _cfg8b():
    from tpu_notes.transformer import get_model

    return get_model("llama3-8b")


def _par16():
    from tpu_notes.training import Parallelism

    return Parallelism(fsdp=4, tensor=16)


def _slice_options():
    from tpu_notes.training.subslices import plan_slices

    return plan_slices("llama3-8b", "v5e", 2**20, 4096, min_fraction=1.0)


def _cube():
    from tpu_notes.topology import Slice

    return Slice("v5p", (4, 4, 4))


def _cluster():
    from tpu_notes.gpu import GpuCluster

    return GpuCluster("h100", 64)


def _layout():
    from tpu_notes.training import map_to_slice

    return map_to_slice(_par(fsdp=16, tensor=4), _cube())


def _memory():
    from tpu_notes.training import training_memory

    return training_memory("llama3-8b", _par(fsdp=64), 2**20, 4096)


def _plan_result():
    from tpu_notes.training import plan

    return plan("llama3-8b", _cube(), 2**20, 4096)


def _tasks():
    from tpu_notes.training.pipeline import simulate

    return simulate(4, 8)


def _run():
    from tpu_notes.training.published import RUNS

    return RUNS[6]


def _rows():
    from tpu_notes.training.published import reconcile

    return reconcile()[:2]


def _bench_result():
    from tpu_notes import bench

    mm = bench.Measurement(kind="matmul", label="m", flops=2e9, nbytes=1e7, seconds=0.01, dtype="fp32", shape=(8, 8, 8))
    cp = bench.Measurement(
        kind="copy", label="c", flops=1e6, nbytes=1e9, seconds=0.02, dtype="fp32", shape=(250_000_000,), op="add"
    )
    return bench.RooflineMeasurement(
        platform="cpu",
        device_kind="cpu",
        chip=None,
        dtype="fp32",
        matmuls=(mm,),
        copies=(cp,),
        fit=bench.fit_roofline([mm, cp], min_copy_bytes=1),
        wall_s=1.0,
    )


def _numbers():
    from tpu_notes.cheatsheet import numbers_to_know

    return numbers_to_know(("v5e",), ("llama3-8b",))


_NOT_PAR = ["abc", None, 3, ODD, {"fsdp": 8}]
#: Layouts llama3-8b (32 query heads, 8 KV heads, 32 layers, dense) cannot take on 64 chips: refused by name.
_IMPOSSIBLE_PAR = [
    lazy(lambda: _par(tensor=64)),
    lazy(lambda: _par(pipeline=64, microbatches=64)),
    lazy(lambda: _par(fsdp=16, expert=4)),
]
_NOT_SLICE = ["v5p:4x4x4", None, 3, ODD, (4, 4, 4)]
REMAT = Choice("full_block", names=("remat", "policy"))
#: A remat argument that also takes a number of D-sized checkpoints per layer (3 is valid there).
REMAT_ANY = Raw("full_block", ["sometimes", "", None, ODD, -1, 0, float("nan"), float("inf"), True, [3]])

CASES = {
    # -- training.parallelism ------------------------------------------------------------------------------------
    TR + "parallelism.Parallelism": Case(
        data=Int(2), fsdp=Int(4), tensor=Int(2), pipeline=Int(1), expert=Int(1), microbatches=Int(1), dcn=Int(1)
    ),
    TR + "parallelism.Parallelism.label": Case(self_=lambda: _par(fsdp=4, tensor=2)),
    TR + "parallelism.Parallelism.mesh_shape": Case(self_=lambda: _par(fsdp=4, tensor=2), drop_ones=Flag(True)),
    # -- training.cost --------------------------------------------------------------------------------------------
    TR + "cost.flops_per_token": Case(
        model=Model("llama3-8b"), include_attention=Flag(True), seq_len=Opt(Int(4096)), causal=Flag(True), remat=REMAT
    ),
    TR + "cost.training_flops": Case(
        model=Model("llama3-8b"),
        tokens=Num(1e12),
        include_attention=Flag(False),
        seq_len=Opt(Int(4096)),
        causal=Flag(True),
    ),
    TR + "cost.training_time": Case(
        model=Model("llama3-8b"),
        tokens=Num(1e12),
        chip=ChipArg("v5p"),
        n_chips=Int(256),
        mfu=Num(0.4, top=1.0),
        dtype=Choice("bf16"),
        include_attention=Flag(False),
        seq_len=Opt(Int(4096)),
    ),
    TR + "cost.mfu": Case(
        model=Model("llama3-8b"),
        tokens_per_s=Num(1e6),
        chip=ChipArg("v5p"),
        n_chips=Int(256),
        dtype=Choice("bf16"),
        include_attention=Flag(False),
        seq_len=Opt(Int(4096)),
    ),
    TR + "cost.hfu": Case(
        model=Model("llama3-8b"),
        tokens_per_s=Num(1e6),
        chip=ChipArg("v5p"),
        n_chips=Int(256),
        seq_len=Int(4096),
        remat=REMAT,
        dtype=Choice("bf16"),
        include_attention=Flag(True),
    ),
    TR + "cost.chip_hours": Case(
        model=Model("llama3-8b"), tokens=Num(1e12), chip=ChipArg("v5p"), mfu=Num(0.4, top=1.0)
    ),
    TR + "cost.training_cost": Case(
        model=Model("llama3-8b"),
        tokens=Num(1e12),
        chip=ChipArg("v5p"),
        mfu=Num(0.4, top=1.0),
        dollars_per_chip_hour=Opt(Num(4.2)),
    ),
    # -- training.memory --------------------------------------------------------------------------------------------
    TR + "memory.check_remat": Case(remat=Raw("full_block", ["sometimes", "", None, ODD, -1, float("nan"), True])),
    TR + "memory.activation_values_per_token_layer": Case(model=Model("llama3-8b"), remat=REMAT_ANY),
    TR + "memory.offloaded_values_per_token_layer": Case(model=Model("llama3-8b"), remat=REMAT_ANY),
    TR + "memory.optimizer_bytes_per_param": Case(
        optimizer=Choice("adam"), moment_dtype=Choice("fp32"), master_weights=Flag(False)
    ),
    TR + "memory.training_memory": Case(
        model=Model("llama3-8b"),
        parallelism=Opt(Raw(lambda: _par(fsdp=64), _NOT_PAR, lazy=True)),
        batch_tokens=Int(2**20),
        seq_len=Int(4096),
        optimizer=Choice("adam"),
        param_dtype=Choice("bf16"),
        grad_dtype=Opt(Choice("bf16")),
        moment_dtype=Choice("fp32"),
        master_weights=Flag(False),
        remat=REMAT_ANY,
        activation_dtype=Choice("bf16"),
        zero=Int(0, zero=True, top=3),
        offload_optimizer=Flag(False),
        schedule=Choice("1f1b"),
        recipe=Opt(Choice("maxtext")),
        over_context=Choice("all"),
        gather_once=Flag(True),
    ),
    TR + "memory.min_chips_for_memory": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5p"),
        batch_tokens=Int(2**20),
        seq_len=Int(4096),
        include_grads=Flag(True),
        fraction=Num(1.0),
    ),
    TR + "memory.batch_split": Case(
        batch_tokens=Int(2**20), seq_len=Int(4096), parallelism=Raw(lambda: _par(fsdp=64), _NOT_PAR, lazy=True)
    ),
    TR + "memory.MemoryBreakdown.fits": Case(self_=_memory, chip=ChipArg("v5p"), fraction=Num(1.0)),
    # -- training.rooflines ------------------------------------------------------------------------------------------
    TR + "rooflines.ici_intensity": Case(chip=ChipArg("v5p", tpu=True), dtype="bf16"),
    TR + "rooflines.collective_bandwidth": Case(chip=ChipArg("h100"), across_nodes=True, n_axes=1),
    TR + "rooflines.critical_batch_per_chip": Case(
        strategy="fsdp+tp",
        chip=ChipArg("v5p", tpu=True),
        n_axes=1,
        d_ff=28672,
        fsdp_axes=2,
        tp_axes=1,
        dtype="bf16",
        across_nodes=None,
        experts=1,
        experts_per_token=1,
        nodes=None,
        model_parallel_nodes=1,
        combine="max",
    ),
    TR + "rooflines.critical_batch_per_gpu": Case(
        chip=ChipArg("h100"),
        across_nodes=True,
        experts=8,
        experts_per_token=2,
        nodes=2,
        model_parallel_nodes=1,
        dtype="bf16",
    ),
    TR + "rooflines.max_tensor_parallelism": Case(
        chip=ChipArg("v5p"), d_ff=28672, n_axes=1, dtype="bf16", across_nodes=False
    ),
    TR + "rooflines.two_node_tensor_parallelism_ok": Case(chip=ChipArg("h100"), d_ff=28672, degree=16, dtype="bf16"),
    TR + "rooflines.optimal_fsdp_degree": Case(
        batch_tokens=4e6, n_chips=8960, d_ff=28672, fsdp_axes=2, tp_axes=1, combine="max"
    ),
    TR + "rooflines.mlp_layer_times": Case(
        strategy="fsdp+tensor",
        chip=ChipArg("v5p"),
        batch_tokens=2**20,
        d_model=8192,
        d_ff=28672,
        data=1,
        fsdp=64,
        tensor=4,
        fsdp_axes=2,
        tp_axes=1,
        dtype="bf16",
        across_nodes=False,
        combine="max",
    ),
    TR + "rooflines.pipeline_bubble_fraction": Case(stages=4, microbatches=16, circular_repeats=1),
    TR + "rooflines.expert_parallel_times": Case(
        chip=ChipArg("h100"), batch_tokens=1e6, d_model=7168, d_ff=2048, experts_per_token=8, degree=64, dtype="bf16"
    ),
    TR + "rooflines.pipeline_comms_time": Case(
        batch_tokens=1e6, d_model=8192, bandwidth=5e10, microbatches=16, stages=8, bytes_per_value=2
    ),
    TR + "rooflines.strategy_times": Case(
        cluster=Raw(_cluster, ["h100", None, 3, ODD, _cube], lazy=True),
        model=Model("llama3-8b"),
        batch_tokens=2**17,
        dtype="bf16",
        microbatches=16,
    ),
    # -- training.step -----------------------------------------------------------------------------------------------
    TR + "step.map_to_slice": Case(
        parallelism=Raw(lambda: _par(fsdp=16, tensor=4), _NOT_PAR, lazy=True),
        slc=Raw(_cube, _NOT_SLICE, lazy=True, names=("slice",)),
    ),
    TR + "step.step_time": Case(
        model=Model("llama3-8b"),
        parallelism=Raw(
            lambda: _par(fsdp=16, tensor=4),
            _NOT_PAR + _IMPOSSIBLE_PAR,
            lazy=True,
            names=("tensor", "pipeline", "expert"),
        ),
        slice=Raw(_cube, _NOT_SLICE, lazy=True),
        batch_tokens=Raw(2**20, [1000, 4097]),
        seq_len=4096,
        remat=REMAT_ANY,
        dtype="bf16",
        overlap=True,
        hop_latency=1e-6,
        circular_repeats=1,
        matmul_efficiency=0.8,
        layout=Opt(Raw(_layout, ["abc", 3, ODD], lazy=True)),
        framework=Opt(Choice("maxtext")),
        gather_once=Flag(True),
    ),
    TR + "step.Layout.sizes": Case(self_=_layout, kind=Choice("fsdp")),
    TR + "step.Layout.wraps": Case(self_=_layout, kind=Choice("fsdp")),
    TR + "step.Layout.describe": Case(self_=_layout),
    TR + "step.Layout.collective": Case(
        self_=_layout,
        kind=Choice("fsdp"),
        op=Choice("all-gather"),
        nbytes=Num(1e8, zero=True),
        hop_latency=Num(1e-6, zero=True),
    ),
    # -- training.planner --------------------------------------------------------------------------------------------
    TR + "planner.plan": Case(
        model=Model("llama3-8b"),
        system=Raw(_cube, _NOT_SLICE, lazy=True),
        batch_tokens=Int(2**20),
        seq_len=Int(4096),
        n_slices=Int(1),
        remat=Raw(("full_block",), ["sometimes", (), ("x",), None, ODD, -1]),
        max_context=Int(4),
        max_pipeline=Int(16),
        interleave=Raw((1, 2), [(), (0,), (-1,), (1.5,), ("x",), None, ODD, (True,)]),
        optimizer=Choice("adam"),
        dtype=Opt(Choice("bf16")),
        hbm_fraction=Num(1.0),
        overlap=Flag(True),
        max_microbatches=Int(64),
        matmul_efficiency=Num(1.0, top=1.0),
        fused_projections=Opt(Flag(False)),
        reshard_after_forward=Opt(Flag(False)),
        rank_by=Choice("expected"),
        framework=Opt(Choice("maxtext")),
        recipe=Opt(Choice("bf16")),
        tensor_across_nodes=Flag(False),
        uneven_stages=Flag(False),
        disable=Raw(("context",), ["sometimes", ("x",), None, ODD, 3, ("tensor", 1)]),
        tie_within=Opt(Num(0.1, zero=True, top=1.0)),
    ),
    TR + "frameworks.get_framework": Case(name=Choice("maxtext")),
    TR + "frameworks.default_framework": Case(system=Raw(_cube, _NOT_SLICE, lazy=True)),
    TR + "precision.get_recipe": Case(name=Choice("megatron")),
    TR + "subslices.slice_shapes": Case(chip=ChipArg("v5p"), min_chips=Int(4096)),
    TR + "subslices.plan_slices": Case(
        model=Model("llama3-8b"),
        chip=ChipArg("v5e"),
        batch_tokens=Int(2**20),
        seq_len=Int(4096),
        n_slices=Int(1),
        min_fraction=Num(1.0, top=1.0),
    ),
    TR + "subslices.format_slices": Case(
        options=Raw(_slice_options, ["abc", None, 3, [ODD], ODD], lazy=True), top=Int(3)
    ),
    TR + "parallelism.Parallelism.short": Case(self_=_par16),
    TR + "memory.stage_layers": Case(model=Model("llama3-405b"), pipeline=Int(16), circular_repeats=Int(1)),
    TR + "step.Layout.collective_over": Case(
        self_=_layout,
        kinds=Raw(("fsdp",), ["fsdp", (), ("magic",), None, ODD, 3]),
        op=Choice("all-gather"),
        nbytes=Num(1e8, zero=True),
        hop_latency=Num(1e-6, zero=True),
    ),
    TR + "planner.PlanResult.table": Case(self_=_plan_result, top=Int(5)),
    TR + "planner.PlanResult.legend": Case(self_=_plan_result, top=Int(5)),
    TR + "planner.PlanResult.distinct": Case(self_=_plan_result, top=Int(5)),
    TR + "planner.PlanResult.reasons": Case(self_=_plan_result),
    TR + "planner.Plan.row": Case(self_=lambda: _plan_result()[0]),
    # -- training.pipeline -------------------------------------------------------------------------------------------
    TR + "pipeline.simulate": Case(stages=1, microbatches=8, schedule="1f1b", forward_time=1.0, backward_time=2.0),
    TR + "pipeline.bubble_fraction": Case(tasks=Raw(_tasks, ["abc", None, 3, [], [ODD], ODD], lazy=True)),
    TR + "pipeline.peak_in_flight": Case(
        tasks=Raw(_tasks, ["abc", None, 3, [], [ODD], ODD], lazy=True), stage=Raw(0, [4])
    ),
    # -- training.published ------------------------------------------------------------------------------------------
    TR + "published.PublishedRun": Case(
        name=Raw("run", [3, None, ODD, ["x"], True]),
        source=Raw("a paper", [3, None, ODD, ["x"], True]),
        model=Model("llama3-8b"),
        system=Raw(_cube, _NOT_SLICE, lazy=True),
        parallelism=Raw(lambda: _par(fsdp=64), _NOT_PAR, lazy=True),
        batch_tokens=Int(2**20),
        seq_len=Int(4096),
        remat=REMAT,
        reported_mfu=Num(0.5, top=1.0),
        reported_tokens_per_s=Opt(Num(1000.0)),
        reported_flops_per_s=Opt(Num(2e14), none_baseline=True),
        counting=Choice("causal"),
        circular_repeats=Int(1),
        dtype=Choice("bf16"),
        attention=Choice("flash"),
        group=Raw("maxtext-synthetic", ["", "synthetic", 3, None, ODD]),
        notes=Raw("", [3, None, ODD, ["x"], True]),
    ),
    TR + "published.PublishedRun.reported_tokens_per_chip": Case(self_=_run),
    TR + "published.stated_step": Case(run=Raw(_run, ["abc", None, 3, ODD], lazy=True)),
    TR + "published.stated_memory": Case(run=Raw(_run, ["abc", None, 3, ODD], lazy=True)),
    TR + "published.predict": Case(
        run=Raw(_run, ["abc", None, 3, ODD], lazy=True),
        efficiency=Num(0.8, top=1.0),
        model=Raw(None, ["default", 3, {}, True, ODD]),
    ),
    TR + "published.reconcile": Case(
        runs=Raw(lambda: [_run()], ["abc", None, 3, [], [ODD], ODD], lazy=True), efficiency=Num(0.8, top=1.0)
    ),
    TR + "published.fitted_efficiency": Case(runs=Raw(lambda: [_run()], ["abc", None, 3, [], [ODD], ODD], lazy=True)),
    TR + "published.format_table": Case(rows=Raw(_rows, ["abc", None, 3, [ODD], ODD], lazy=True)),
    # Chapter 12's numbers to know
    T + "cheatsheet.numbers_to_know": Case(
        chips=Raw(("v5e",), ["v5e", ("nochip",), (3,), None, ODD]),
        models=Raw(("llama3-8b",), ["llama3-8b", ("nomodel",), (3,), None, ODD]),
        ring=Int(16),
    ),
    T + "cheatsheet.format_numbers": Case(rows=Raw(lambda: _numbers(), ["abc", [3], [ODD], 3], lazy=True)),
    T + "cheatsheet.chips_table": Case(rows=Raw(lambda: _numbers(), ["abc", [3], [ODD], 3], lazy=True)),
    T + "cheatsheet.models_table": Case(rows=Raw(lambda: _numbers(), ["abc", [3], [ODD], 3], lazy=True)),
    T + "cheatsheet.formulas_table": Case(),
    T + "cheatsheet.Number.shown": Case(self_=lambda: _numbers()[0]),
    # the JSON that `python -m tpu_notes bench --json` prints (added with the command-line entry)
    T + "bench.result_json": Case(
        result=Raw(_bench_result, ["abc", None, 3, ODD], lazy=True), chip=Opt(ChipArg("v5e"))
    ),
}

COVERED = (
    "cheatsheet",
    "training.parallelism",
    "training.cost",
    "training.memory",
    "training.rooflines",
    "training.step",
    "training.planner",
    "training.subslices",
    "training.pipeline",
    "training.published",
    "training.frameworks",
    "training.precision",
)

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
RESULT_RECORDS = {
    "cheatsheet.Number",
    "training.frameworks.Framework",
    "training.precision.PrecisionRecipe",
    "training.memory.MemoryBreakdown",
    "training.memory.BatchSplit",
    "training.rooflines.LayerTimes",
    "training.step.AxisPart",
    "training.step.Layout",
    "training.step.StepTime",
    "training.planner.Plan",
    "training.planner.PlanResult",
    "training.subslices.SliceOption",
    "training.pipeline.Task",
    "training.published.Reconciliation",
}


# practitioners (issue 23): the planner beside the published layouts (tpu_notes.training.practitioners)
def _small_runs():
    from tpu_notes.training.published import RUNS

    return [next(r for r in RUNS if r.parallelism.n_chips <= 8)]  # an 8-chip run: planned in well under a second


def _comparisons():
    from tpu_notes.training.practitioners import compare_with_practitioners

    return compare_with_practitioners(_small_runs())


_NOT_ROWS = ["abc", None, 3, [], [ODD], ODD]

CASES.update(
    {
        TR + "practitioners.compare_with_practitioners": Case(
            runs=Raw(_small_runs, ["abc", None, 3, [], [ODD], ODD, [None]], lazy=True), same_remat=Flag(True)
        ),
        TR + "practitioners.summarize": Case(rows=Raw(_comparisons, _NOT_ROWS, lazy=True)),
        TR + "practitioners.format_comparison": Case(rows=Raw(_comparisons, _NOT_ROWS, lazy=True)),
        TR + "practitioners.describe_system": Case(system=Raw(_cube, _NOT_SLICE, lazy=True), n_slices=Int(2)),
    }
)
COVERED = COVERED + ("training.practitioners",)
RESULT_RECORDS = RESULT_RECORDS | {"training.practitioners.PractitionerComparison"}


# Chapter 5's additions (zero-bubble pipelines, the optimisation batch, optically reshaped tori)
_BAD_SHAPES = ["16x16x16", None, 3, ODD, (16, 16), (6, 8, 8), (0, 4, 4), (4.5, 4, 4), ("4", 4, 4)]
_PASS_TIMES = {"forward_time": Num(1.0), "backward_time": Num(2.0), "weight_time": Num(1.0, zero=True)}
CASES.update(
    {
        TR + "pipeline.bubble_time": Case(
            schedule=Choice("zb-h1"),
            stages=Int(8),
            **_PASS_TIMES,
            overlapped_time=Opt(Num(3.0), none_baseline=True),
        ),
        TR + "pipeline.schedule_bubble_fraction": Case(
            schedule=Choice("1f1b"),
            stages=Int(8),
            microbatches=Int(32),
            **_PASS_TIMES,
            overlapped_time=Opt(Num(3.0), none_baseline=True),
        ),
        TR + "batch_size.noise_scale": Case(grad_sq_norm=Num(2.0), trace_cov=Num(30.0)),
        TR + "batch_size.noise_scale_from_batches": Case(
            batch_small=Num(8.0), sq_norm_small=Num(5.75), batch_big=Num(512.0), sq_norm_big=Num(2.06)
        ),
        TR + "batch_size.batch_tradeoff": Case(batch=Num(2e6), critical_batch=Num(1e6)),
        TR + "batch_size.kaplan_critical_batch": Case(loss=Num(2.2)),
        TR + "ocs.largest_slice": Case(chip=ChipArg("v5p", tpu=True)),
        TR + "ocs.cube_shapes": Case(chip=ChipArg("v5p", tpu=True), n_chips=Int(4096, top=6144)),
        TR + "ocs.one_axis_group": Case(
            shape=Raw((16, 16, 16), ["16x16x16", None, 3, ODD, (0, 4, 4), (4.5, 4, 4)]), degree=Int(8)
        ),
        TR + "ocs.group_collective_time": Case(
            chip=ChipArg("v5p", tpu=True),
            shape=Raw((16, 16, 16), _BAD_SHAPES),
            group=Raw((8, 1, 1), ["8x1x1", None, 8, ODD, (8, 1), (3, 1, 1), (0, 1, 1), (8.0, 1.5, 1)]),
            kind=Choice("all_gather"),
            nbytes=Num(64e6, zero=True),
            hop_latency=Opt(Num(1e-6), none_baseline=True),
        ),
    }
)
COVERED = COVERED + ("training.batch_size", "training.ocs")
RESULT_RECORDS = RESULT_RECORDS | {"training.batch_size.NoiseScale", "training.batch_size.BatchTradeoff"}


# Chapter 5's context parallelism and FP8 training
CASES.update(
    {
        TR + "context.kv_exchange": Case(model=Model("llama3-8b"), seq_len=8192, context=4, tensor=2),
        TR + "context.exchange_time": Case(
            model=Model("llama3-8b"),
            system=Raw(_cube, _NOT_SLICE, lazy=True),
            seq_len=8192,
            context=4,
            tensor=2,
            form=Choice("ring"),
        ),
        TR + "context.context_or_tensor": Case(
            model=Model("llama3-8b"),
            system=Raw(_cube, _NOT_SLICE, lazy=True),
            base=Raw(lambda: _par(fsdp=16, tensor=2, context=2), ["fsdp=16", None, 3, ODD], lazy=True),
            factor=Int(2),
            batch_tokens=2**20,
            seq_len=8192,
            take_from=Choice("fsdp"),
        ),
        TR + "fp8.fp8_gain": Case(model=Model("llama3-8b"), chip=ChipArg("h100"), seq_len=8192),
        TR + "fp8.fp8_runs": Case(),
    }
)
COVERED = COVERED + ("training.context", "training.fp8")
RESULT_RECORDS = RESULT_RECORDS | {
    "training.context.KVExchange",
    "training.context.ExchangeTime",
    "training.context.CausalBalance",
    "training.context.ContextOrTensor",
    "training.fp8.Fp8Gain",
}


# the launch check of the planner's answers (tpu_notes.training.launch)
def _odd_framework():
    import dataclasses

    return dataclasses.replace(_plan_result(), framework="nope")


CASES.update(
    {
        TR + "launch.launch_check": Case(
            plan=Raw(lambda: _plan_result()[0], ["abc", None, 3, ODD, lazy(_plan_result)], lazy=True),
            result=Raw(_plan_result, ["abc", None, 3, ODD, (), lazy(_odd_framework)], lazy=True),
            model=Model("llama3-8b"),
            system=Raw(_cube, _NOT_SLICE, lazy=True),
            batch_tokens=Int(2**20),
            seq_len=Int(4096),
        ),
    }
)
COVERED = COVERED + ("training.launch",)
