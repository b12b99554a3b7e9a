"""tpu_notes.gpu: collective times on NVLink nodes and the scale-out network, and GPU layouts in step_time."""
import pytest

from tpu_notes import training as T
from tpu_notes.gpu import GpuCluster
from tpu_notes.hardware import get_chip

H100 = get_chip("h100")


def test_inside_a_node_is_the_nvlink_ring():
    c = GpuCluster("h100", 8)
    t = c.collective_time("all-gather", 1e9, 8, hop_latency=0)
    assert t.total == pytest.approx(1e9 * 7 / (8 * H100.nvlink_bw))
    assert c.collective_time("all-reduce", 1e9, 8, hop_latency=0).total == pytest.approx(2 * t.total)


def test_across_nodes_whole_nodes_use_the_node_bandwidth():
    c = GpuCluster("h100", 1024)
    t = c.collective_time("all-gather", 1e9, 1024, inner=8, hop_latency=0).total
    # the scaling book's H100 figure: a node of 8 GPUs x 400 Gb/s NICs moves 400 GB/s
    assert t == pytest.approx(1e9 / 400e9, rel=0.01)
    one_per_node = c.collective_time("all-gather", 1e9, 128, inner=1, hop_latency=0).total
    assert one_per_node == pytest.approx(8 * t, rel=0.02)


def test_critical_batches_match_the_book_for_h100():
    # DP over one node: C / W_nvlink ~ 2200 tokens per GPU; across nodes with whole nodes: C / W_node ~ 2475
    assert H100.peak_flops() / H100.nvlink_bw == pytest.approx(2200, rel=0.01)
    assert H100.peak_flops() / (8 * H100.dcn_bw) == pytest.approx(2475, rel=0.01)


def test_gpu_layout_fills_the_node_with_tensor_parallelism_first():
    c = GpuCluster("h100", 8192)
    lay = T.map_to_slice(T.Parallelism(tensor=8, pipeline=16, data=64, microbatches=16), c)
    assert lay.describe() == "tensor: node8; data: net64; pipeline: net16"
    mixed = T.map_to_slice(T.Parallelism(tensor=2, fsdp=4096), c)
    assert mixed.describe() == "tensor: node2; fsdp: node4 net1024"


def test_step_time_on_gpus_interleaving_shrinks_the_bubble():
    c = GpuCluster("h100", 8192)
    p = T.Parallelism(tensor=8, pipeline=16, data=64, microbatches=64)
    plain = T.step_time("llama3-405b", p, c, 16 * 2**20, 8192, remat="none")
    inter = T.step_time("llama3-405b", p, c, 16 * 2**20, 8192, remat="none", circular_repeats=4)
    assert inter.bubble == pytest.approx(plain.bubble / 4)
    assert inter.mfu > plain.mfu


@pytest.mark.parametrize("call, match", [
    (lambda: GpuCluster("v5p", 8), "GPU"),
    (lambda: GpuCluster("h100", 12), "multiple of node_size"),
    (lambda: GpuCluster("h100", 16).collective_time("all-gather", 1e6, 32), "group"),
    (lambda: GpuCluster("h100", 16).collective_time("all-gather", 1e6, 16, inner=3), "inner"),
    (lambda: GpuCluster("h100", 16).collective_time("broadcast", 1e6, 16), "kind"),
    (lambda: T.map_to_slice(T.Parallelism(data=8, dcn=2), GpuCluster("h100", 8)), "dcn"),
    (lambda: T.plan("llama3-8b", GpuCluster("h100", 64), 2**20, 4096, n_slices=2), "n_slices"),
])
def test_bad_input(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
