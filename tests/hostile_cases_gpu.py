"""Baseline calls of Chapter 11's GPU model (tpu_notes.gpu.cluster, tpu_notes.gpu.routing) and of the System both
machines are (tpu_notes.system) for tests/test_hostile_input.py. The GPU rooflines live in training.rooflines (see
hostile_cases_training.py).

Merged into ``hostile_cases.CASES`` at the end of that file; see its docstring for the kinds of argument. Arguments
whose kind the signature declares (``@checked``) are given as plain valid values.
"""

from __future__ import annotations

from hostile_cases import ODD, Case, ChipArg, Choice, Int, Num, Raw, lazy

G = "tpu_notes.gpu.cluster."
R = "tpu_notes.gpu.routing."
S = "tpu_notes.system."


def _cluster():
    from tpu_notes.gpu import GpuCluster

    return GpuCluster("h100", 64)


def _slice():
    from tpu_notes.topology import Slice

    return Slice("v5e", (4, 4))


def _big():
    from tpu_notes.gpu import MAX_DIRECT_GPUS, GpuCluster

    return GpuCluster("h100", MAX_DIRECT_GPUS)


_BIG = Raw(
    _big, ["h100", None, 3, ODD, lazy(lambda: __import__("tpu_notes.gpu").gpu.GpuCluster("h100", 1024))], lazy=True
)
#: ``group`` of a collective: a size, None (every GPU) or a run of axis names; these are none of those.
_GROUP = Raw(
    16,
    [
        0,
        -1,
        2.5,
        float("nan"),
        float("inf"),
        "abc",
        ("node", "abc"),
        ("node", "node"),
        (),
        [3],
        ODD,
        True,
        10**400,
        128,
    ],
)
_AXIS = Raw("node", ["abc", "", None, 3, ("node",), ODD])

CASES = {
    G + "FatTreeLevel": Case(name=Raw("leaf", ["", 3, None, "node", "NODE"]), degree=Int(4), oversubscription=Num(1.0)),
    G + "GpuCluster": Case(
        chip=ChipArg("h100"),
        n_gpus=Int(64),
        node_size=Int(8, zero=True),
        levels=Raw(
            (("leaf", 8),), [3, "leaf", (("leaf", 3),), ("x",), [ODD], ODD, (("leaf", 2), ("leaf", 4)), (("node", 8),)]
        ),
    ),
    G + "GpuCluster.subtree_sizes": Case(self_=_cluster),
    G + "GpuCluster.per_gpu_bw": Case(self_=_cluster),
    G + "GpuCluster.level_table": Case(self_=_cluster),
    G + "GpuCluster.bisection_bandwidth": Case(self_=_cluster),
    G + "GpuCluster.describe": Case(self_=_cluster),
    G + "GpuCluster.axis_size": Case(self_=_cluster, axis=_AXIS),
    G + "GpuCluster.bandwidth": Case(self_=_cluster, axis=_AXIS),
    G + "GpuCluster.latency": Case(self_=_cluster, axis=_AXIS),
    G + "GpuCluster.collective_terms": Case(
        self_=_cluster, kind=Choice("all-gather"), nbytes=1e8, group=_GROUP, inner=8, span=None, sharp=False, top_k=None
    ),
    G + "GpuCluster.collective_time": Case(
        self_=_cluster,
        kind=Choice("all-gather"),
        nbytes=1e8,
        group=_GROUP,
        inner=8,
        span=None,
        hop_latency=5e-6,
        sharp=False,
        top_k=None,
    ),
    G + "GpuCluster.check_schedulable": Case(self_=_cluster, argument="system"),
    G + "GpuCluster.place": Case(
        self_=_cluster,
        degrees=Raw({"tensor": 8, "data": 8}, [None, {}, "tensor", {"tensor": 0}, {"tensor": 2.5}, {"data": 3}]),
    ),
    G + "GpuCluster.group_collective": Case(
        self_=_cluster,
        op=Choice("all-gather"),
        nbytes=1e8,
        parts=Raw(lambda: _cluster().place({"tensor": 16, "data": 4})["tensor"], [], lazy=True),
        group=16,
        span=16,
        hop_latency=5e-6,
        phases=Choice("sequence"),
    ),
    G + "GpuCluster.stage_send_time": Case(
        self_=_cluster,
        nbytes=1e8,
        parts=Raw(lambda: _cluster().place({"pipeline": 64})["pipeline"], [], lazy=True),
        hop_latency=5e-6,
    ),
    G + "GpuCluster.link": Case(
        self_=_cluster, parts=Raw(lambda: _cluster().place({"tensor": 16, "data": 4})["tensor"], [], lazy=True)
    ),
    G + "GpuCluster.send_time": Case(self_=_cluster, nbytes=1e8, across_nodes=True, hop_latency=5e-6),
    G + "dgx_superpod": Case(chip=ChipArg("h100"), n_gpus=1024, nodes_per_su=32, sus_per_spine=8),
    G + "ragged_fraction": Case(top_k=4, n_shards=8, exact=True),
    # on a cluster as large as link_loads takes, so that its cap on group can be reached (tests/test_bounded_work)
    R + "link_loads": Case(cluster=_BIG, kind=Choice("all-gather"), nbytes=1e8, group=16, inner=8, span=None),
    R + "direct_collective_time": Case(
        cluster=_BIG, kind=Choice("all-gather"), nbytes=1e8, group=16, inner=8, span=None
    ),
    # the System protocol: each method called on a Slice (a GpuCluster's have their own entries above)
    S + "parse_system": Case(
        text=Raw(
            "h100:1024",
            ["", "h100", "h100:x", "h100:100", "h100:-8", "nosuch:8", "v5p:4xx4", None, 3, ODD],
            names=("system", "slice", "chip"),
        )
    ),
    S + "check_system": Case(
        value=Raw(_slice, ["v5e", None, 3, ODD, (4, 4)], lazy=True, names=("system",)), argument="system"
    ),
    S + "System.axis_size": Case(self_=_slice, axis=Raw("x", ["w", "", None, ("x",), 5, -1, ODD])),
    S + "System.bandwidth": Case(self_=_slice, axis=Raw("x", ["w", "", None, ("x",), 5, ODD])),
    S + "System.latency": Case(self_=_slice, axis=Raw("y", ["w", "", None, ("y",), 5, ODD])),
    S + "check_group_collective": Case(op=Choice("all_gather"), phases=Choice("sequence")),
    S + "System.check_schedulable": Case(self_=_slice, argument="system"),
    S + "System.place": Case(
        self_=_slice, degrees=Raw({"tensor": 4, "fsdp": 4}, [None, {}, "tensor", {"tensor": 0}, {"fsdp": 3}])
    ),
    S + "System.group_collective": Case(
        self_=_slice,
        op=Choice("all-gather"),
        nbytes=1e8,
        parts=Raw(lambda: _slice().place({"tensor": 4, "fsdp": 4})["tensor"], [], lazy=True),
        group=4,
        span=4,
        hop_latency=1e-6,
        phases=Choice("max"),
    ),
    S + "System.stage_send_time": Case(
        self_=_slice,
        nbytes=1e8,
        parts=Raw(lambda: _slice().place({"pipeline": 16})["pipeline"], [], lazy=True),
        hop_latency=1e-6,
    ),
    S + "System.collective_time": Case(
        self_=_slice,
        kind=Choice("all_gather"),
        nbytes=Raw(1e8, [-1.0, None]),
        axes=Raw(("x",), ["w", ("x", "x"), (), 7, ODD]),
    ),
}

COVERED = ("gpu.cluster", "gpu.routing", "system")

#: Records the library builds itself (their fields are computed): constructors not fuzzed; methods have entries.
#: ``system.System`` is a Protocol (it has no instances of its own; its methods are tried on a Slice).
RESULT_RECORDS = {"gpu.cluster.LevelInfo", "gpu.routing.LinkLoad", "system.System", "system.AxisPart"}
