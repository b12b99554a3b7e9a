"""One system abstraction: a TPU Slice and a GpuCluster answer the same questions; one roofline API for both; the hop
latency in the chip table; the impossible layouts and unbounded calls of issue 21 refused by name."""

import math

import pytest

from tpu_notes import collectives, hardware, topology
from tpu_notes import training as T
from tpu_notes.gpu import MAX_DIRECT_GPUS, GpuCluster, dgx_superpod, link_loads
from tpu_notes.system import System, check_system
from tpu_notes.topology import Slice
from tpu_notes.training import pipeline

SYSTEMS = [
    Slice("v5e", (4, 4)),
    Slice("v5p", (4, 4, 8)),
    GpuCluster("h100", 64),
    dgx_superpod("h100", 1024),
    dgx_superpod("gb200", 576, nodes_per_su=8),
]


@pytest.mark.parametrize("system", SYSTEMS, ids=repr)
def test_both_machines_answer_the_same_questions(system):
    assert isinstance(system, System)
    assert check_system(system) is system
    assert system.n_devices == system.n_chips
    sizes = [system.axis_size(a) for a in system.axes]
    if isinstance(system, Slice):
        assert tuple(sizes) == system.shape
        assert all(system.bandwidth(a) == system.chip.ici_bw_bidi for a in system.axes)  # bidirectional, per link
    else:
        assert sizes[0] == system.node_size and math.prod(sizes) == system.n_gpus
        assert system.bandwidth("node") == system.chip.nvlink_bw  # one way, per GPU
        assert list(system.bandwidth(a) for a in system.axes[1:]) == list(system.per_gpu_bw())
    for a in system.axes:
        assert system.latency(a) == system.chip.hop_latency
    whole = system.collective_time("all_gather", 1e9, None)
    assert isinstance(whole, collectives.CollectiveTime) and whole.total > 0
    assert system.collective_time("all-reduce", 1e9, system.axes[:1]).total > 0


def test_the_system_form_delegates_to_the_existing_formulas():
    s = Slice("v5e", (4, 4))
    assert s.collective_time("all-gather", 1e9, ("x",)) == s.collective_time("all_gather", 1e9, "x")
    pod = dgx_superpod("h100", 1024)
    # the node and the leaf level together: the whole scalable units of 256 GPUs, 8 per node
    assert pod.collective_time("all-gather", 1e9, ("node", "leaf")) == pod.collective_time("all-gather", 1e9, 256, 8)
    # the leaf level alone: one GPU per node, 32 of them spread over 256 GPUs
    assert pod.collective_time("all-gather", 1e9, "leaf") == pod.collective_time("all-gather", 1e9, 32, 1, span=256)
    assert pod.collective_time("all-reduce", 1e9) == pod.collective_time("all-reduce", 1e9, 1024)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: check_system("v5e"), "system"),
        (lambda: GpuCluster("h100", 64).axis_size("spine"), "axis"),
        (lambda: Slice("v5e", (4, 4)).bandwidth("z"), "axis"),
        (lambda: dgx_superpod("h100", 1024).collective_time("all-gather", 1e9, ("node", "spine")), "group"),
        (lambda: GpuCluster("h100", 64).collective_time("all-gather", 1e9, ("node",), 8), "inner"),
        (lambda: GpuCluster("h100", 64, levels=(("leaf", 2), ("leaf", 4))), "levels"),
        (lambda: GpuCluster("h100", 64, levels=(("node", 8),)), "node"),
        (lambda: T.step_time("llama3-8b", T.Parallelism(tensor=64), Slice("v5p", (4, 4, 4)), 2**20, 4096), "tensor"),
        (
            lambda: T.step_time(
                "llama3-8b", T.Parallelism(pipeline=64, microbatches=64), Slice("v5p", (4, 4, 4)), 2**20, 4096
            ),
            "pipeline",
        ),
        (
            lambda: T.step_time("llama3-8b", T.Parallelism(fsdp=16, expert=4), Slice("v5p", (4, 4, 4)), 2**20, 4096),
            "expert",
        ),
        (
            lambda: T.step_time(
                "llama3-8b", T.Parallelism(fsdp=64), Slice("v5p", (4, 4, 4)), 2**20, 4096, circular_repeats=10**9
            ),
            "circular_repeats",
        ),
        (lambda: T.step_time("llama3-8b", T.Parallelism(fsdp=64), Slice("v5p", (4, 4, 4)), 1000, 4096), "batch_tokens"),
        (lambda: pipeline.simulate(50000, 1), "stages"),
        (lambda: link_loads(GpuCluster("h100", 1024), "all-gather", 1e9, 8), "cluster"),
        (lambda: T.critical_batch_per_chip("dcn", "h100"), "chip"),
        (lambda: T.critical_batch_per_chip("dp", "v5p", nodes=2), "nodes"),
        (lambda: T.max_tensor_parallelism("h100", 28672, 2), "n_axes"),
        (lambda: T.max_tensor_parallelism("v5p", 28672, across_nodes=True), "across_nodes"),
    ],
)
def test_impossible_inputs_are_refused_by_name(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_one_roofline_api_for_both_machines():
    # the TPU figures of Chapter 5 and the GPU figures of Chapter 11 from the same functions
    assert T.critical_batch_per_chip("dp", "v5p", n_axes=3) == pytest.approx(850, rel=1e-3)
    assert T.critical_batch_per_chip("dp", "h100") == T.critical_batch_per_gpu("h100") == pytest.approx(2472.5)
    assert T.critical_batch_per_chip("fsdp", GpuCluster("h100", 8)) == pytest.approx(2197.8, rel=1e-4)  # one node
    assert T.critical_batch_per_chip("fsdp", Slice("v5p", (4, 4, 4)), n_axes=3) == pytest.approx(850, rel=1e-3)
    assert T.max_tensor_parallelism("h100", 28672) == pytest.approx(28672 / 2197.8, rel=1e-4)
    assert T.max_tensor_parallelism(Slice("v5p", (4, 4, 4)), 28672) == pytest.approx(28672 / 2550, rel=1e-3)
    gpu = T.mlp_layer_times("data", "h100", 2**20, 8192, 28672, data=64)
    assert gpu.backward_comms == pytest.approx(2 * 2 * 8192 * 28672 * 2 / 450e9)
    ep = T.expert_parallel_times("h100", 1e6, 7168, 2048, 8, 64)
    assert isinstance(ep, T.LayerTimes) and ep.math == ep.compute and ep.degree == 64


def test_hop_latency_lives_in_the_chip_table():
    assert topology.HOP_LATENCY == hardware.ICI_HOP_LATENCY == 1e-6
    for c in hardware.CHIPS.values():
        assert c.hop_latency == (hardware.ICI_HOP_LATENCY if c.kind == "tpu" else hardware.GPU_HOP_LATENCY)
        assert hardware.source(c, "hop_latency") != "unknown"
    from tpu_notes.gpu import GPU_HOP_LATENCY
    from tpu_notes.inference import ICI_HOP_LATENCY

    assert GPU_HOP_LATENCY == hardware.GPU_HOP_LATENCY and ICI_HOP_LATENCY == hardware.ICI_HOP_LATENCY


def test_the_capped_simulations_do_bounded_work():
    """Both caps of the pipeline simulator at once, and the largest cluster link_loads enumerates: each returns in
    at most CAP_CALLS function calls (counted, not timed: the same on any machine; seconds: benchmarks/caps.py)."""
    from test_bounded_work import CAP_CALLS, count_calls

    P = pipeline.MAX_STAGES
    M = pipeline.MAX_TASKS // (2 * P)
    tasks, loads = [], []
    calls = count_calls(lambda: tasks.extend(pipeline.simulate(P, M)), CAP_CALLS)
    assert len(tasks) == 2 * P * M <= pipeline.MAX_TASKS and calls > len(tasks)
    pod = dgx_superpod("gb200", MAX_DIRECT_GPUS, nodes_per_su=8)
    calls = count_calls(lambda: loads.extend(link_loads(pod, "all-to-all", 1e9, MAX_DIRECT_GPUS)), CAP_CALLS)
    assert loads and calls > MAX_DIRECT_GPUS


# -- what Cloud TPU schedules, readable names, the scale-up domain, phases in sequence -----------------------------
def test_slices_cloud_tpu_schedules_and_those_it_refuses():
    from tpu_notes import topology as tp
    from tpu_notes.topology import Slice

    # the documented largest slices: 96 cubes of 64 chips on v5p, a 16x16 pod of 256 on v5e and v6e
    assert tp.largest_slice_chips("v5p") == 96 * 4**3 and tp.largest_shape("v5p") == (16, 16, 24)
    assert tp.largest_slice_chips("v4p") == 16**3 and tp.largest_shape("v4p") == (16, 16, 16)
    assert tp.largest_slice_chips("v5e") == tp.largest_slice_chips("v6e") == 16 * 16
    for ok in [("v5p", (16, 16, 24)), ("v5p", (2, 2, 1)), ("v5p", (2, 4, 4)), ("v5p", (8, 12, 28)), ("v5e", (16, 8))]:
        assert Slice(*ok).schedulable and Slice(*ok).why_not_schedulable == ""
        assert Slice(*ok).check_schedulable() == Slice(*ok)
    too_big = Slice("v5p", (16, 16, 28))
    assert too_big.n_chips > tp.largest_slice_chips("v5p") and not too_big.schedulable
    with pytest.raises(ValueError, match=r"^system: v5p 16x16x28 .*6,144 chips \(16x16x24\).*n_slices") as err:
        too_big.check_schedulable("system")
    assert err.value.kind == "not schedulable"
    for shape in [("v5e", (4, 16)), ("v5p", (1, 1, 4)), ("v6e", (2, 8))]:  # buildable, but not offered shapes
        slc = Slice(*shape)
        assert not slc.schedulable and "offers" in slc.why_not_schedulable
        with pytest.raises(ValueError, match="^slice: "):
            slc.check_schedulable("slice")
    assert all(Slice("v5p", s).schedulable for s in tp.schedulable_shapes("v5p"))


def test_training_refuses_an_unschedulable_slice_naming_the_argument():
    from tpu_notes import training as T
    from tpu_notes.topology import Slice

    big = Slice("v5p", (16, 16, 28))
    with pytest.raises(ValueError, match=r"^slice: .*16x16x24.*n_slices"):
        T.step_time("llama3-8b", T.Parallelism(fsdp=big.n_chips), big, 2**23, 4096)
    with pytest.raises(ValueError, match=r"^system: .*16x16x24.*n_slices"):
        T.plan("llama3-8b", big, 2**23, 4096)


def test_the_full_v5p_pod_is_planned_as_slices_over_dcn_in_a_second():
    import time

    from tpu_notes import training as T

    t = time.perf_counter()
    options = T.plan_slices("llama3-405b", "v5p", 16 * 2**20, 8192, min_fraction=1.0)
    took = time.perf_counter() - t
    assert options and all(o.per_pod >= 2 and o.slice.schedulable for o in options)
    assert all(o.n_slices == o.per_pod and o.chips == o.per_pod * o.slice.n_chips for o in options)
    assert any(o.ok for o in options) and took < 5.0  # about 0.5 s on the 2-core machine; margin for slow CI


def test_readable_names():
    from tpu_notes.gpu import GpuCluster
    from tpu_notes.topology import Slice
    from tpu_notes.training.practitioners import describe_system

    assert str(Slice("v5p", (16, 16, 16))) == "v5p 16x16x16"
    assert repr(Slice("v5p", (16, 16, 16))) == "Slice('v5p', (16, 16, 16))"  # the constructor, for debugging
    assert str(GpuCluster("h100", 8)) == "8 x H100" and str(GpuCluster("h100", 4)) == "4 x H100"
    assert str(GpuCluster("h100", 1024)) == "1024 x H100 (128 nodes)" == describe_system(GpuCluster("h100", 1024))
    assert repr(GpuCluster("h100", 1024)).startswith("GpuCluster('h100', 1024 GPUs")
    assert describe_system(Slice("v5e", (16, 16)), 4) == "4 x " + str(Slice("v5e", (16, 16)))


def test_readable_names_say_what_the_chip_is_and_how_the_tree_is_built():
    from tpu_notes.gpu import GpuCluster, dgx_superpod
    from tpu_notes.hardware import CHIPS, get_chip
    from tpu_notes.topology import Slice

    named = {n: str(c) for n, c in CHIPS.items()}
    assert named["v5e"] == "v5e" and named["h100"] == "H100" and named["gb200"] == "GB200"
    assert named["h100-pcie"] == "H100 PCIe" and named["a100-40g"] == "A100 40GB" and named["tpu7x"] == "TPU7x"
    assert len(set(named.values())) == len(named)  # no two chips print alike
    assert all("(" not in s and "=" not in s for s in named.values())  # a name, never the dataclass's repr
    assert repr(get_chip("h100")).startswith("Chip(name='h100'")
    assert str(Slice("tpu7x", (4, 4, 4))) == "TPU7x 4x4x4"
    node = GpuCluster("h100", 8)
    assert node.describe() == str(node)  # one node: no tree to describe
    tree = GpuCluster("h100", 256, levels=(("leaf", 8), ("spine", 4, 2.0)))
    pod = dgx_superpod("h100", 256)
    assert tree.describe() == "256 x H100 (32 nodes of 8; leaf 8 > spine 4 at 2:1)"
    assert str(tree) == str(pod) and tree.describe() != pod.describe()  # the tree tells them apart


def test_a_layout_prints_as_practitioners_write_it():
    from tpu_notes.training import Parallelism

    assert str(Parallelism(fsdp=1024, tensor=2)) == "fsdp=1024 tp=2"
    assert str(Parallelism(data=2, pipeline=8, tensor=16, microbatches=64, dcn=2)) == "dp=2 pp=8 tp=16 dcn=2 mb=64"
    assert str(Parallelism()) == "1 chip"
    assert Parallelism(fsdp=1024, tensor=2).label() == "fsdp=1024 x tensor=2"  # the spelled-out form stays


def test_scale_up_size_is_the_nvlink_node_or_the_whole_slice():
    from tpu_notes.gpu import GpuCluster, dgx_superpod
    from tpu_notes.hardware import get_chip
    from tpu_notes.topology import Slice

    assert GpuCluster("h100", 64).scale_up_size == get_chip("h100").node_size == 8
    assert dgx_superpod("gb200", 576, nodes_per_su=8).scale_up_size == 72
    assert GpuCluster("h100", 4).scale_up_size == 4  # a cluster smaller than a node is its own domain
    slc = Slice("v5p", (8, 8, 8))
    assert slc.scale_up_size == slc.n_chips == 512
    assert isinstance(slc, System) and isinstance(GpuCluster("h100", 64), System)


def test_a_cross_node_tensor_collective_in_sequence_is_the_sum_of_its_phases():
    from tpu_notes import training as T
    from tpu_notes.gpu import GpuCluster

    c = GpuCluster("h100", 64)
    v = 2.0**27
    terms = c.collective_terms("all_gather", v, 16, 8)  # 16 GPUs: two whole nodes
    assert terms["node"] > 0 and terms["network"] > 0
    most = c.collective_time("all_gather", v, 16, 8)
    seq = c.collective_time("all_gather", v, 16, 8, phases="sequence")
    assert seq.bandwidth_time == pytest.approx(sum(terms.values())) and seq.total >= most.total
    assert most.bandwidth_time == pytest.approx(max(terms.values()))  # the default (Chapter 11) is unchanged
    inside = c.collective_time("all_gather", v, 8, 8, phases="sequence")
    assert inside.total == pytest.approx(c.collective_time("all_gather", v, 8, 8).total)  # one node: they agree
    # in a layout, the tensor kind spanning nodes is priced in sequence; data is not
    lay = T.map_to_slice(T.Parallelism(tensor=16, data=4), c)
    assert lay.collective("tensor", "all-gather", v, 5e-6) == pytest.approx(
        c.collective_time("all_gather", v, 16, 8, span=16, hop_latency=5e-6, phases="sequence").total
    )
    assert lay.collective("data", "all-reduce", v, 5e-6) == pytest.approx(
        c.collective_time("all_reduce", v, 4, 1, span=64, hop_latency=5e-6).total
    )
    with pytest.raises(ValueError, match="phases"):
        c.collective_time("all_gather", v, 16, 8, phases="both")


def test_placement_and_pricing_are_the_systems_own():
    from tpu_notes.gpu import GpuCluster
    from tpu_notes.system import NETWORK, NODE, AxisPart
    from tpu_notes.topology import Slice
    from tpu_notes.training import step

    assert step.AxisPart is AxisPart  # re-exported for old imports
    slc = Slice("v5p", (4, 4, 8))
    parts = slc.place({"tensor": 4, "fsdp": 32})
    assert parts["tensor"] == (AxisPart(0, 4, True),) and sum(p.size > 1 for p in parts["fsdp"]) == 2
    g = GpuCluster("h100", 64).place({"tensor": 16, "data": 4})
    assert g["tensor"] == (AxisPart(NODE, 8, False), AxisPart(NETWORK, 2, False))
    assert g["data"] == (AxisPart(NODE, 1, False), AxisPart(NETWORK, 4, False))
    with pytest.raises(ValueError, match="multiply to"):
        slc.place({"fsdp": 64})
    assert slc.stage_send_time(1e6, parts["fsdp"], 1e-6) == pytest.approx(1e6 / slc.chip.ici_bw_oneway + 1e-6)
