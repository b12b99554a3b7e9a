"""The planner ranks only legal layouts, with memory as compiled and collectives as XLA compiles them (issue 23)."""

from __future__ import annotations

import pytest
from planner_checks import assert_tiered

from tpu_notes import training as T
from tpu_notes.system import parse_system
from tpu_notes.topology import Slice
from tpu_notes.training.parallelism import SHORT_NAMES
from tpu_notes.transformer import get_model

CUBE16 = Slice("v5p", (16, 16, 16))
FOUR_M = 4 * 2**20


def _legal(plan_, model, batch_tokens, seq_len):
    m, p = get_model(model), plan_.parallelism
    seqs = batch_tokens // seq_len
    assert seqs % p.batch_shards == 0, p
    assert (seqs // p.batch_shards) % p.microbatches == 0, p
    assert seq_len % p.context == 0, p
    assert m.n_heads % p.tensor == 0 and m.d_ff % p.tensor == 0, p
    assert m.n_kv_heads % p.tensor == 0 or p.tensor % m.n_kv_heads == 0, p
    assert p.pipeline * plan_.circular_repeats <= m.n_layers, p


@pytest.mark.parametrize(
    "model, system, batch, seq",
    [
        ("llama3-70b", "v5p:16x16x16", FOUR_M, 4096),
        ("llama3-8b", "v5p:8x8x8", 2**20, 8192),
        ("llama3-70b", "h100:1024", FOUR_M, 4096),
        ("llama2-13b", "v5e:16x16", 2**20, 32768),
    ],
)
def test_every_ranked_layout_is_legal_and_fits_at_its_compiled_peak(model, system, batch, seq):
    s = parse_system(system)
    r = T.plan(model, s, batch, seq)
    assert len(r) > 0
    for p in r:
        _legal(p, model, batch, seq)
        assert p.memory.peak <= s.chip.hbm_bytes
        assert p.memory.peak >= p.memory.total


def test_uneven_splits_are_rejected_not_averaged():
    # 1024 sequences over 560 batch shards (the old planner ranked 0.457 sequences per shard): 8x20x28 is 70 cubes,
    # 4480 = 2^7 x 35 chips, as the full 8960-chip pod (which Cloud TPU does not schedule as one slice) was
    r = T.plan("llama3-70b", parse_system("v5p:8x20x28"), FOUR_M, 4096)
    assert len(r) == 0
    reasons = [p.reason for p in r.rejected]
    assert any(x.startswith("uneven batch") for x in reasons)
    assert not any("0.457" in x and not x.startswith(("uneven", "too few")) for x in reasons)


def test_context_parallelism_is_priced_not_free():
    # Llama 2 13B at 32k on 4096 chips: 128 sequences, so splitting each over 16 chips needs context=16
    m = "llama2-13b"
    p = T.Parallelism(fsdp=128, context=16, tensor=2)
    st = T.step_time(m, p, CUBE16, 128 * 32768, 32768)
    assert st.collectives.get("context", 0) > 0
    kv_bytes = 32768 * 2 * get_model(m).n_kv_heads / 2 * get_model(m).d_head * 2  # one layer's K and V, gathered
    assert st.collectives["context"] >= get_model(m).n_layers * kv_bytes / CUBE16.chip.bandwidth("ici") * 0.5
    with pytest.raises(ValueError, match="context"):
        T.step_time(m, T.Parallelism(fsdp=128, context=3 * 16 // 3 + 1, tensor=2), CUBE16, 128 * 32768, 32768)


def test_kv_heads_are_replicated_in_memory_and_time():
    m = get_model("llama3-8b")  # 8 KV heads
    s = Slice("v5p", (4, 4, 8))
    p8, p16 = T.Parallelism(fsdp=16, tensor=8), T.Parallelism(fsdp=8, tensor=16)
    mem8 = T.training_memory(m, p8, 2**20, 4096)
    mem16 = T.training_memory(m, p16, 2**20, 4096)
    # params per chip: tensor and fsdp multiply to 128 either way, but tensor=16 holds each KV head twice
    kv = m.n_layers * 2 * m.d_model * m.n_kv_heads * m.d_head
    assert mem16.params - mem8.params == pytest.approx(kv / 128 * 2, rel=1e-9)
    st8 = T.step_time(m, p8, s, 2**20, 4096, remat="none")
    st16 = T.step_time(m, p16, s, 2**20, 4096, remat="none")
    assert st16.flops_time > st8.flops_time
    with pytest.raises(ValueError, match="whole heads"):
        T.step_time("llama3-8b", T.Parallelism(fsdp=11, tensor=12), Slice("v5p", (4, 4, 8)), 2**20, 4096)


def test_gathered_weights_without_remat_are_counted():
    m = get_model("llama3-405b")
    p = T.Parallelism(fsdp=2048, tensor=4)
    none = T.training_memory(m, p, 16 * 2**20, 8192, remat="none")
    full = T.training_memory(m, p, 16 * 2**20, 8192, remat="full_block")
    stage = m.param_count() * 2 / 4  # bf16 weights of one tensor rank
    assert none.gathered == pytest.approx(stage * (1 - 1 / 2048), rel=1e-2)  # every layer kept: ~200 GB
    assert none.gathered > 150e9 and full.gathered < 10e9
    assert none.peak > Slice("v5p").chip.hbm_bytes  # so the planner refuses it


def test_fsdp_gathers_once_without_remat_and_twice_with_it():
    p = T.Parallelism(fsdp=64)
    s = Slice("v5p", (4, 4, 4))
    none = T.step_time("llama3-8b", p, s, 2**20, 4096, remat="none").collectives["fsdp"]
    full = T.step_time("llama3-8b", p, s, 2**20, 4096, remat="full_block").collectives["fsdp"]
    assert none / full == pytest.approx(2 / 3, rel=1e-6)  # (AG + RS) / (2 AG + RS), each the same bytes


def test_tensor_backward_reduces_each_projection_unless_fused():
    p = T.Parallelism(fsdp=16, tensor=4)
    s = Slice("v5p", (4, 4, 4))
    sep = T.step_time("llama3-8b", p, s, 2**20, 4096, remat="none", fused_projections=False).collectives["tensor"]
    fused = T.step_time("llama3-8b", p, s, 2**20, 4096, remat="none", fused_projections=True).collectives["tensor"]
    assert sep / fused == pytest.approx(11 / 8)  # 4 forward + 2 + (3 + 2) backward, against 4 + 2 + 2


def test_data_fsdp_gradients_are_one_reduction_over_both_axes():
    s = Slice("v5p", (4, 4, 4))
    lay = T.map_to_slice(T.Parallelism(data=4, fsdp=16), s)
    st = T.step_time("llama3-8b", lay.parallelism, s, 2**20, 4096, remat="full_block", layout=lay)
    assert "data" not in st.collectives  # folded into the fsdp kind's one all-reduce over data x fsdp
    nbytes = get_model("llama3-8b").param_count() * 2
    both = lay.collective_over(("data", "fsdp"), "all-reduce", nbytes, 1e-6)
    gather = lay.collective("fsdp", "all-gather", nbytes, 1e-6)
    assert st.collectives["fsdp"] == pytest.approx(2 * gather + both, rel=1e-6)


def test_fractions_above_one_are_refused():
    with pytest.raises(ValueError, match="hbm_fraction"):
        T.plan("llama3-8b", CUBE16, FOUR_M, 4096, hbm_fraction=1000)
    with pytest.raises(ValueError, match="fraction"):
        T.min_chips_for_memory("llama3-8b", "v5p", 2**20, 4096, fraction=1000)


def test_a_pod_offers_only_the_slices_cloud_tpu_schedules():
    options = T.plan_slices("llama3-70b", "v5p", FOUR_M, 4096)
    assert options and all(o.slice.schedulable and o.per_pod == 1 for o in options)
    assert max(o.slice.n_chips for o in options) == 6144  # 16x16x24, not the 8960-chip pod
    assert any(not o.ok for o in options)  # 8x20x28 (35 in its chip count) has no legal layout
    best = options[0]
    assert best.ok and best.idle_chips == 8960 - best.chips
    assert best.tokens_per_s == pytest.approx(FOUR_M / best.step_s)
    assert best.dollars_per_mtoken_pod > best.dollars_per_mtoken_used
    assert all(a.tokens_per_s >= b.tokens_per_s for a, b in zip(options, options[1:]) if a.ok and b.ok)
    assert "idle" in T.format_slices(options)


def test_slice_shapes_are_buildable_and_fit():
    shapes = T.slice_shapes("v5p", 4096)
    assert Slice("v5p", (16, 16, 16)).shape in [s.shape for s in shapes]
    assert all(s.n_chips >= 4096 for s in shapes)
    assert len({s.shape for s in shapes}) == len(shapes)
    assert [s.shape for s in T.slice_shapes("v5e", 256)] == [(16, 16)]


def test_gpu_clusters_plan_with_the_same_rules():
    r = T.plan("llama3-405b", parse_system("h100:16384"), 16 * 2**20, 8192)
    assert len(r) > 0
    for p in r[:20]:
        _legal(p, "llama3-405b", 16 * 2**20, 8192)
    assert r.rank_by == "expected"
    assert_tiered([p.expected.total for p in r], [p.tier for p in r], r.tie_within)
    assert all(p.parallelism.tensor <= 8 for p in r)  # tensor parallelism stays inside the NVLink node


def test_uneven_pipeline_stages_are_priced_at_the_busiest():
    # Llama 3 405B ran 126 layers on 16 stages: the busiest holds 8
    assert T.stage_layers("llama3-405b", 16) == 8 and T.stage_layers("llama3-405b", 2) == 63
    with pytest.raises(ValueError, match="layers"):
        T.stage_layers("llama3-8b", 33)
    cluster = parse_system("h100:16384")

    def step(parallelism):
        return T.step_time("llama3-405b", parallelism, cluster, 16 * 2**20, 8192, remat="none")

    even = step(T.Parallelism(data=1024, pipeline=2, tensor=8, microbatches=2))
    uneven = step(T.Parallelism(data=128, pipeline=16, tensor=8, microbatches=16))
    assert uneven.flops_time / even.flops_time == pytest.approx(8 * 16 / 126, rel=1e-9)
    r = T.plan("llama3-405b", cluster, 16 * 2**20, 8192, remat="none")
    seen = [p.parallelism for p in (*r.ranked, *r.rejected)]
    assert any(p.pipeline == 16 and p.tensor == 8 and p.data == 128 for p in seen)  # Llama 3's own degrees


def test_fsdp_reshards_after_forward_by_default_on_gpus_only():
    p = T.Parallelism(fsdp=64)
    gpu, tpu = parse_system("h100:64"), Slice("v5p", (4, 4, 4))
    for system, gathers in ((gpu, 2), (tpu, 1)):
        st = T.step_time("llama3-8b", p, system, 2**20, 4096, remat="none")
        lay = T.map_to_slice(p, system)
        nbytes = get_model("llama3-8b").param_count() * 2
        ag = lay.collective("fsdp", "all-gather", nbytes, system.latency(system.axes[0]))
        rs = lay.collective("fsdp", "reduce-scatter", nbytes, system.latency(system.axes[0]))
        assert st.collectives["fsdp"] == pytest.approx(gathers * ag + rs, rel=1e-6)
    kept = T.training_memory("llama3-8b", p, 2**20, 4096, remat="none")
    dropped = T.training_memory("llama3-8b", p, 2**20, 4096, remat="none", reshard_after_forward=True)
    assert kept.gathered > 10 * dropped.gathered


def test_ranking_table_shows_the_distinct_layouts_at_their_modelled_peak():
    """The page's plan table (issue 40): one row per distinct layout in ranking order, named as a practitioner
    writes it, with the modelled peak HBM (the figure the fit check uses, not the total) in bytes and both steps
    in seconds; with nothing legal, the rejection reasons adding up to the candidates searched."""
    r = T.plan("llama3-8b", Slice("v5p", (8, 8, 8)), 2**20, 8192)
    t = r.ranking_table(6)
    shown = r.distinct(6)
    assert t.column("HBM") == [p.memory.peak for p in shown]
    assert all(peak > p.memory.total for peak, p in zip(t.column("HBM"), shown) if p.memory.transient)
    assert t.column("roof") == [p.step.total for p in shown]
    assert t.column("exp") == [p.expected.total for p in shown]
    for label, p in zip(t.column("layout"), shown):
        degrees = dict(part.split("=") for part in label.split() if "=" in part)
        assert "(" not in label and "Parallelism" not in label
        assert {k: int(v) for k, v in degrees.items() if k != "mb"} == {
            SHORT_NAMES[a]: n for a, n in p.parallelism.mesh_shape().items()
        } | ({"dcn": p.parallelism.dcn} if p.parallelism.dcn > 1 else {})
    assert any("(GB)" in line for line in str(t).splitlines()[1:3])  # the unit under or beside "HBM"
    none = T.plan("llama2-13b", CUBE16, 3 * 2**20, 32768, max_context=1)
    assert len(none) == 0
    table = none.ranking_table(4)
    assert sum(table.column("candidates")) == none.searched
    assert str(none.searched) in table.caption


def test_slices_table_lists_the_options_in_order():
    options = T.plan_slices("llama3-70b", "v5p", FOUR_M, 4096)
    t = T.slices_table(options, 4)
    assert t.column("chips") == [o.chips for o in options[:4]]
    assert t.column("step") == [o.step_s for o in options[:4]]
    assert t.column("slice")[0] == "x".join(map(str, options[0].slice.shape))
    assert [b == "(none legal)" for b in t.column("best layout")] == [not o.ok for o in options[:4]]
    assert max(len(line) for line in str(t).splitlines()) <= 88
    with pytest.raises(TypeError, match="options"):
        T.slices_table("abc")
