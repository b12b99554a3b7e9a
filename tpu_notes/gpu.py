"""GPU clusters: NVLink nodes under a multi-level fat tree, collective times on them, and the GPU rooflines of
LLM scaling (Chapters 6 and 11).

**The topology.** A :class:`GpuCluster` is ``n_gpus`` GPUs of one kind in NVLink nodes of ``node_size`` (8 for
H100/B200 boards, 72 for a GB200 NVL72), every GPU reaching its node's NVSwitches at ``Chip.nvlink_bw`` bytes/s
each way, and its own NIC at ``Chip.dcn_bw`` (the "nic" bandwidth: 50 GB/s for a 400 Gb/s InfiniBand port). Above
the node sit the levels of a fat tree (:class:`FatTreeLevel`: leaf, spine, core...), each with a *degree* (how many
subtrees of the level below one unit joins) and an *oversubscription* (how much less bandwidth each child gets
into that level than it has below; 1 is full bisection). The degrees multiply to the number of nodes. The default
is one level joining every node with full bisection, the model Chapter 6 uses; :func:`dgx_superpod` builds
NVIDIA's reference design (32-node scalable units under leaf switches, then spine and core levels).

**The collective model.** A collective runs over a *group* of ``g`` GPUs placed like one axis of a mesh: ``inner``
members share a node and the group's members are spread over ``span`` GPUs (the group times the mesh axes inside
it), every GPU of the cluster running its own group's copy at the same time. For an AllGather (or ReduceScatter)
of a ``V``-byte array (``V`` is the whole gathered array of one group), every subtree must bring in, through its
one uplink, the shards its members lack:

- the node level (NVLink): each GPU receives ``V (inner - 1) / inner`` from its node-mates at ``W_nvlink``;
- scale-out level ``l`` whose child subtrees hold ``S_l`` GPUs and ``s_l = max(1, g S_l / span)`` members of the
  group: ``V (1 - s_l / g) / (s_l · w_l)``, where ``w_l`` is the per-GPU share of the child's uplink
  (``W_nic`` divided by the oversubscription of this level and every level below);
- the collective takes the slowest level: ``T = max_l`` of those terms.

With every node whole in the group (``inner = 8`` on H100) the first scale-out term is ``V (M - 1)/M / W_node``
(``W_node`` = 8 NICs = 400 GB/s): the scaling book's ``V / W_node``. An axis sharded inside (``span > g``)
divides ``V`` by the number of nodes it spans and no more (the book's "reductions over an axis sharded on an inner
axis"). AllReduce = ReduceScatter + AllGather (twice); with ``sharp=True`` (in-network reduction in the
switches) each level moves ``V / (s_l w_l)`` once, not twice. An AllToAll sends ``V / g²`` from every member to
every other: ``(inner - 1) V / (g² W_nvlink)`` inside the node, ``V (1 - s_l / g) / (g w_l)`` through each
uplink; ``top_k`` makes it ragged (each token goes to ``k`` of ``g`` shards: the dense time × ``1 - ((g-1)/g)^k``).
Every ring step also pays ``hop_latency`` (``g - 1`` steps, twice for an AllReduce).

:func:`link_loads` checks those closed forms the slow way: it builds the explicit graph (each GPU's NVLink and
NIC links, each subtree's uplink), routes every shard of every group over it (multicast up and down the tree,
one entry per node, copies over NVLink) and adds up the bytes on each directed link; the busiest link divided by
its bandwidth is :func:`direct_collective_time`. The tests and Chapter 11 hold the two to 1e-9.

**Rooflines.** :func:`critical_batch_per_gpu`, :func:`max_tensor_parallelism`, :func:`expert_parallel_times`,
:func:`pipeline_comms_time` and :func:`strategy_times` are the formulas of the scaling book's GPU chapter
(``gpus.md``), with the bandwidths taken from the chip table (``nvlink`` per GPU inside a node, ``node_egress``
per node across nodes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Optional

from .collectives import CollectiveTime, _result, canonical_kind
from .hardware import Chip, get_chip
from .units import check_bool, check_choice, check_positive, fmt

#: Default latency of one step of a GPU ring collective, seconds (NCCL over NVLink/IB is a few µs).
GPU_HOP_LATENCY = 5e-6

#: Measured gain of SHARP in-network AllReduce inside an H100 node (scaling book, gpus.md: about 30% more
#: bandwidth with NCCL 2.27, where the model predicts up to 2x).
SHARP_MEASURED_GAIN = 0.30

#: Measured NVLink AllReduce bus bandwidth of an 8xH100 node with ~10 GB messages (scaling book, gpus.md), B/s.
H100_MEASURED_ALLREDUCE_BW = 370e9

#: Largest cluster :func:`link_loads` enumerates (it visits every shard of every group).
MAX_DIRECT_GPUS = 4096


@dataclass(frozen=True)
class FatTreeLevel:
    """One level of switches above the NVLink nodes."""

    name: str                      # "leaf", "spine", "core"...
    degree: int                    # children (subtrees of the level below) joined by one unit of this level
    oversubscription: float = 1.0  # child bandwidth below / child bandwidth into this level (1: full bisection)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise TypeError(f"name must be a non-empty string; got {self.name!r}")
        object.__setattr__(self, "degree", check_positive("degree", self.degree, integer=True))
        o = check_positive("oversubscription", self.oversubscription)
        if o < 1:
            raise ValueError(f"oversubscription must be >= 1 (1 is full bisection); got {self.oversubscription!r}")
        object.__setattr__(self, "oversubscription", float(o))


@dataclass(frozen=True)
class LevelInfo:
    """Bandwidth of one level of a :class:`GpuCluster`, as the scaling book's SuperPod table lists it."""

    name: str                 # "node" or the fat-tree level's name
    gpus: int                 # GPUs in one unit of this level
    degree: int               # children per unit (GPUs for the node)
    per_gpu_bw: float         # bytes/s each GPU has into this level (one direction)
    child_uplink_bw: float    # bytes/s of one child's link into this level (one direction)
    collective_bw: float      # bytes/s the level gives a collective spanning it: uplink of a whole child

    def __repr__(self) -> str:
        return (f"LevelInfo({self.name!r}, gpus={self.gpus}, degree={self.degree}, "
                f"per_gpu={fmt(self.per_gpu_bw, 'B/s')}, collective={fmt(self.collective_bw, 'B/s')})")


def _as_level(x, i: int) -> FatTreeLevel:
    if isinstance(x, FatTreeLevel):
        return x
    if isinstance(x, tuple) and len(x) in (2, 3):
        return FatTreeLevel(*x)
    raise TypeError(f"levels[{i}] must be a FatTreeLevel or a (name, degree[, oversubscription]) tuple; got {x!r}")


@dataclass(frozen=True)
class GpuCluster:
    """``n_gpus`` GPUs of ``chip`` in NVLink nodes of ``node_size``, nodes joined by the fat tree ``levels``."""

    chip: Chip          # a GPU of tpu_notes.hardware (name or Chip; stored as the Chip)
    n_gpus: int         # GPUs in the cluster
    node_size: int = 0  # GPUs per NVLink node (0: the chip's node_size, 8 for H100, 72 for GB200)
    levels: Optional[tuple] = None  # fat-tree levels above the node, bottom first (None: one full-bisection level)

    def __post_init__(self):
        c = get_chip(self.chip)
        if c.kind != "gpu":
            raise ValueError(f"chip must be a GPU (e.g. 'h100'); {c.long_name} is a {c.kind.upper()}: use "
                             "tpu_notes.topology.Slice for TPUs")
        n = check_positive("n_gpus", self.n_gpus, integer=True)
        node = check_positive("node_size", self.node_size, integer=True, allow_zero=True) or c.node_size
        if node is None:
            raise ValueError(f"{c.long_name} has no node size in tpu_notes.hardware; pass node_size")
        if n > node and n % node:
            raise ValueError(f"n_gpus ({n}) must be a multiple of node_size ({node}) when it spans several nodes")
        if c.nvlink_bw is None or c.dcn_bw is None:
            raise ValueError(f"{c.long_name} needs nvlink_bw and dcn_bw figures in tpu_notes.hardware")
        node = min(node, n)
        nodes = n // node
        if self.levels is None:
            levels = (FatTreeLevel("network", nodes),) if nodes > 1 else ()
        else:
            if not isinstance(self.levels, (tuple, list)):
                raise TypeError(f"levels must be a tuple of FatTreeLevel (or None); got {type(self.levels).__name__}")
            levels = tuple(_as_level(x, i) for i, x in enumerate(self.levels))
            if math.prod(lv.degree for lv in levels) != nodes:
                raise ValueError(f"levels: the degrees {[lv.degree for lv in levels]} must multiply to the "
                                 f"{nodes} nodes of {n} GPUs in nodes of {node}")
        object.__setattr__(self, "chip", c)
        object.__setattr__(self, "n_gpus", n)
        object.__setattr__(self, "node_size", node)
        object.__setattr__(self, "levels", levels)

    def __repr__(self) -> str:
        tree = " > ".join(f"{lv.name}{lv.degree}" + (f"(1:{lv.oversubscription:g})" if lv.oversubscription > 1
                                                       else "") for lv in self.levels)
        return (f"GpuCluster({self.chip.name!r}, {self.n_gpus} GPUs, {self.node_size} per node"
                + (f", {tree}" if tree else "") + ")")

    @property
    def n_chips(self) -> int:
        """GPUs in the cluster (the name ``Slice`` uses, so code can take either)."""
        return self.n_gpus

    @property
    def n_nodes(self) -> int:
        return self.n_gpus // self.node_size

    @property
    def nic_bw(self) -> float:
        """One GPU's NIC, bytes/s each way."""
        return self.chip.dcn_bw

    @property
    def node_egress_bw(self) -> float:
        """The node's scale-out bandwidth, bytes/s each way: its GPUs' NICs together (400 GB/s on H100)."""
        return self.node_size * self.nic_bw

    def subtree_sizes(self) -> tuple[int, ...]:
        """GPUs in one child subtree of each fat-tree level, bottom first (the node, then leaf units...)."""
        out, s = [], self.node_size
        for lv in self.levels:
            out.append(s)
            s *= lv.degree
        return tuple(out)

    def per_gpu_bw(self) -> tuple[float, ...]:
        """Each GPU's share of its subtree's uplink into each fat-tree level, bytes/s, bottom first."""
        out, o = [], 1.0
        for lv in self.levels:
            o *= lv.oversubscription
            out.append(self.nic_bw / o)
        return tuple(out)

    def level_table(self) -> list[LevelInfo]:
        """The node and every fat-tree level with its bandwidths (the scaling book's SuperPod table)."""
        rows = [LevelInfo("node", self.node_size, self.node_size, self.chip.nvlink_bw, self.chip.nvlink_bw,
                          self.chip.nvlink_bw)]
        for lv, s, w in zip(self.levels, self.subtree_sizes(), self.per_gpu_bw()):
            rows.append(LevelInfo(lv.name, s * lv.degree, lv.degree, w, s * w, s * w))
        return rows

    def bisection_bandwidth(self) -> float:
        """Bytes/s crossing the worst even split of the cluster, both directions counted (3.6 TB/s for one H100
        node): inside a node ``node_size × W_nvlink``; above it the narrowest level's ``n_gpus × w``."""
        if self.n_gpus == 1:
            return 0.0
        if not self.levels:
            return self.n_gpus * self.chip.nvlink_bw
        return self.n_gpus * min(self.per_gpu_bw())

    def _placement(self, group: int, inner: Optional[int], span: Optional[int]) -> tuple[int, int]:
        """Check a group's placement; return ``(inner, span)`` with the defaults filled in."""
        g = check_positive("group", group, integer=True)
        N = self.node_size
        if g > self.n_gpus:
            raise ValueError(f"group ({g}) cannot exceed the cluster's {self.n_gpus} GPUs")
        if inner is not None:
            inner = check_positive("inner", inner, integer=True)
            if inner > N or g % inner or N % inner:
                raise ValueError(f"inner ({inner}) must divide group ({g}) and node_size ({N})")
        if span is None:
            inner = min(g, N) if inner is None else inner
            span = g if inner == min(g, N) else g * N // inner
            if self.n_gpus % span:
                raise ValueError(f"inner ({inner}) spreads the group of {g} over {span} GPUs, which must divide "
                                 f"n_gpus ({self.n_gpus})")
            return inner, span
        span = check_positive("span", span, integer=True)
        if span % g or self.n_gpus % span:
            raise ValueError(f"span ({span}) must be a multiple of group ({g}) and divide n_gpus ({self.n_gpus})")
        stride = span // g
        if (stride < N and N % stride) or (stride >= N and stride % N):
            raise ValueError(f"span ({span}) / group ({g}) = {stride} GPUs between members must divide node_size "
                             f"({N}) or be a multiple of it")
        for S in self.subtree_sizes()[1:]:
            if S < span and S % stride and stride % S:
                raise ValueError(f"span ({span}) / group ({g}) = {stride} GPUs between members does not line up "
                                 f"with the fat tree's units of {S} GPUs (one must divide the other)")
        expect = min(max(1, N // stride), g)
        if inner is not None and inner != expect:
            raise ValueError(f"inner ({inner}) must be {expect} for span {span}: members every {stride} GPUs put "
                             f"{expect} in each node")
        return expect, span

    def collective_terms(self, kind: str, nbytes: float, group: int, inner: int | None = None, *,
                         span: int | None = None, sharp: bool = False, top_k: int | None = None) -> dict:
        """Seconds of collective ``kind`` at each level (``"node"``, then each fat-tree level by name): the
        bandwidth terms whose maximum :meth:`collective_time` reports. See the module docstring."""
        kind = canonical_kind(kind)
        v = check_positive("nbytes", nbytes, allow_zero=True)
        check_bool("sharp", sharp)
        if sharp and kind != "all-reduce":
            raise ValueError(f"sharp (in-network reduction) applies to an all-reduce only; kind is {kind!r}")
        if top_k is not None:
            top_k = check_positive("top_k", top_k, integer=True)
            if kind != "all-to-all":
                raise ValueError(f"top_k (a ragged dispatch) applies to an all-to-all only; kind is {kind!r}")
        inner, span = self._placement(group, inner, span)
        g = int(group)
        terms = {"node": 0.0}
        for lv in self.levels:
            terms[lv.name] = 0.0
        if g == 1:
            return terms
        w_nv = self.chip.nvlink_bw
        if kind == "all-to-all":
            terms["node"] = v * (inner - 1) / (g * g * w_nv)
        elif sharp:
            terms["node"] = v / w_nv if inner > 1 else 0.0
        else:
            terms["node"] = v * (inner - 1) / (inner * w_nv)
        for lv, S, w in zip(self.levels, self.subtree_sizes(), self.per_gpu_bw()):
            if S >= span:
                continue
            s = max(1, g * S // span)
            if kind == "all-to-all":
                terms[lv.name] = v * (1 - s / g) / (g * w)
            elif sharp:
                terms[lv.name] = v / (s * w)
            else:
                terms[lv.name] = v * (1 - s / g) / (s * w)
        if kind == "all-reduce" and not sharp:
            terms = {k: 2 * t for k, t in terms.items()}
        if top_k is not None:
            f = ragged_fraction(top_k, g)
            terms = {k: f * t for k, t in terms.items()}
        return terms

    def collective_time(self, kind: str, nbytes: float, group: int, inner: int | None = None, *,
                        span: int | None = None, hop_latency: float = GPU_HOP_LATENCY, sharp: bool = False,
                        top_k: int | None = None) -> CollectiveTime:
        """Time of collective ``kind`` on a ``nbytes``-byte array over ``group`` GPUs, ``inner`` of them per node
        (default: as many as fit in one node), spread over ``span`` GPUs (default: ``group`` times the node GPUs
        ``inner`` leaves to other groups). ``sharp``: in-network AllReduce; ``top_k``: a ragged AllToAll. See the
        module docstring for the formulas."""
        terms = self.collective_terms(kind, nbytes, group, inner, span=span, sharp=sharp, top_k=top_k)
        lat = check_positive("hop_latency", hop_latency, allow_zero=True)
        g = int(group)
        if g == 1:
            return _result(0.0, 0.0)
        steps = (g - 1) * (2 if canonical_kind(kind) == "all-reduce" and not sharp else 1)
        return _result(max(terms.values()), steps * lat)

    def send_time(self, nbytes: float, across_nodes: bool = True, *, hop_latency: float = GPU_HOP_LATENCY) -> float:
        """Seconds for one GPU to send ``nbytes`` to another (a pipeline stage boundary): NIC or NVLink."""
        v = check_positive("nbytes", nbytes, allow_zero=True)
        if not isinstance(across_nodes, bool):
            raise TypeError(f"across_nodes must be True or False; got {across_nodes!r}")
        hop_latency = check_positive("hop_latency", hop_latency, allow_zero=True)
        return v / (self.nic_bw if across_nodes else self.chip.nvlink_bw) + hop_latency


def dgx_superpod(chip="h100", n_gpus: int = 1024, *, nodes_per_su: int = 32, sus_per_spine: int = 8) -> GpuCluster:
    """NVIDIA's reference DGX SuperPod: nodes in scalable units of ``nodes_per_su`` under leaf switches, units
    joined by spine switches in groups of up to ``sus_per_spine`` (8: 2048 GPUs; the 1024-GPU pod has 4), and a
    core level above when there are more. Full bisection everywhere (scaling book, gpus.md). A GB200 NVL72 pod: ``dgx_superpod("gb200",
    576, nodes_per_su=8)``."""
    c = get_chip(chip)
    if c.kind != "gpu" or c.node_size is None:
        raise ValueError(f"chip must be a GPU with a node size (e.g. 'h100'); got {c.long_name}")
    n = check_positive("n_gpus", n_gpus, integer=True)
    su = check_positive("nodes_per_su", nodes_per_su, integer=True)
    sps = check_positive("sus_per_spine", sus_per_spine, integer=True)
    if n % c.node_size:
        raise ValueError(f"n_gpus ({n}) must be a multiple of the {c.long_name} node of {c.node_size}")
    nodes = n // c.node_size
    if nodes <= su:
        return GpuCluster(c, n, levels=(FatTreeLevel("leaf", nodes),) if nodes > 1 else ())
    if nodes % su:
        raise ValueError(f"n_gpus ({n}) must fill whole scalable units of {su} nodes ({su * c.node_size} GPUs)")
    sus = nodes // su
    if sus <= sps:
        return GpuCluster(c, n, levels=(FatTreeLevel("leaf", su), FatTreeLevel("spine", sus)))
    if sus % sps:
        raise ValueError(f"n_gpus ({n}) must fill whole spine groups of {sps} scalable units")
    return GpuCluster(c, n, levels=(FatTreeLevel("leaf", su), FatTreeLevel("spine", sps),
                                    FatTreeLevel("core", sus // sps)))


def ragged_fraction(top_k: int, n_shards: int, exact: bool = True) -> float:
    """Fraction of a dense AllToAll's bytes a ragged one moves when each token goes to ``top_k`` of ``n_shards``
    shards picked at random: ``1 - ((n - 1)/n)^k`` (the expected share of shards a token reaches), or the scaling
    book's approximation ``min(k / n, 1)`` with ``exact=False``."""
    k = check_positive("top_k", top_k, integer=True)
    n = check_positive("n_shards", n_shards, integer=True)
    check_bool("exact", exact)
    return 1 - ((n - 1) / n) ** k if exact else min(k / n, 1.0)


# ---------------------------------------------------------------------------------------------------------------
# The explicit graph: every link, every shard, routed and counted.
# ---------------------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class LinkLoad:
    """Bytes one directed link of the explicit graph carries during a collective."""

    link: tuple         # (from, to): ("gpu", i) / ("nvswitch", node) / (level name, unit index)
    bandwidth: float    # bytes/s, one direction
    nbytes: float       # bytes routed over it

    @property
    def time(self) -> float:
        return self.nbytes / self.bandwidth


def _graph_ids(cluster: GpuCluster, gpu: int):
    """The unit of each level that GPU ``gpu`` sits under (node, then each fat-tree level's unit)."""
    out, s = [gpu // cluster.node_size], cluster.node_size
    for lv in cluster.levels:
        s *= lv.degree
        out.append(gpu // s)
    return out


def link_loads(cluster: GpuCluster, kind: str, nbytes: float, group: int, inner: int | None = None, *,
               span: int | None = None) -> list[LinkLoad]:
    """Route one collective over the explicit graph of ``cluster`` and return the bytes on every directed link.

    The graph: each GPU has an NVLink link to and from its node's NVSwitch (``W_nvlink``) and a NIC link to and
    from its leaf unit (``W_nic`` over the first level's oversubscription); each subtree has one link to and from
    its parent unit of ``GPUs × per-GPU share`` bytes/s. The cluster is a mesh ``[rest, group, span/group]``: GPU
    ``z·span + x·(span/g) + y`` is member ``x`` of group ``(z, y)``. An AllGather sends every member's ``V/g``
    shard to every other member: inside the node over the sender's NVLink, one copy per receiver; to other nodes
    once up the tree to the lowest common unit and once down into each subtree that needs it, entering each node
    through one member's NIC (member ``x mod inner`` of that node), which copies it to its node-mates over
    NVLink. ReduceScatter is the reverse (the same loads), AllReduce both (twice); an AllToAll sends ``V/g²`` from
    every member to every other, NVLink inside a node, NIC to NIC across the tree.
    """
    if not isinstance(cluster, GpuCluster):
        raise TypeError(f"cluster must be a GpuCluster; got {type(cluster).__name__}")
    kind = canonical_kind(kind)
    v = check_positive("nbytes", nbytes, allow_zero=True)
    if cluster.n_gpus > MAX_DIRECT_GPUS:
        raise ValueError(f"cluster has {cluster.n_gpus} GPUs; link_loads enumerates at most {MAX_DIRECT_GPUS}")
    inner, span = cluster._placement(group, inner, span)
    g = int(group)
    stride = span // g
    N = cluster.node_size
    bw: dict[tuple, float] = {}
    load: dict[tuple, float] = {}
    per_gpu = cluster.per_gpu_bw()
    sizes = cluster.subtree_sizes()
    names = ["nvswitch"] + [lv.name for lv in cluster.levels]
    for i in range(cluster.n_gpus):
        ids = _graph_ids(cluster, i)
        bw[(("gpu", i), ("nvswitch", ids[0]))] = bw[(("nvswitch", ids[0]), ("gpu", i))] = cluster.chip.nvlink_bw
        if cluster.levels:
            bw[(("gpu", i), (names[1], ids[1]))] = bw[((names[1], ids[1]), ("gpu", i))] = per_gpu[0]
    for li in range(1, len(cluster.levels)):      # subtree of level li-1 (name names[li]) -> unit of level li
        child, parent = names[li], names[li + 1]
        for u in range(cluster.n_gpus // (sizes[li])):
            up = u // cluster.levels[li].degree
            bw[((child, u), (parent, up))] = bw[((parent, up), (child, u))] = sizes[li] * per_gpu[li]

    def add(link, b):
        load[link] = load.get(link, 0.0) + b

    def tree_route(src_gpu, dst_nodes, shard):
        """Multicast ``shard`` bytes from GPU ``src_gpu`` to the nodes ``dst_nodes``; return nothing."""
        if not dst_nodes:
            return
        s_ids = _graph_ids(cluster, src_gpu)
        d_ids = [_graph_ids(cluster, nd * N) for nd in dst_nodes]
        add((("gpu", src_gpu), (names[1], s_ids[1])), shard)
        used = set()
        for d in d_ids:
            # climb from the source's level-1 unit until it contains d; go down on the way back
            lvl = 1
            while s_ids[lvl] != d[lvl]:
                lvl += 1
            for li in range(1, lvl):
                used.add(((names[li], s_ids[li]), (names[li + 1], s_ids[li + 1])))
                used.add(((names[li + 1], d[li + 1]), (names[li], d[li])))
        for link in used:
            add(link, shard)

    members_of_node: dict[tuple, list] = {}
    groups: dict[tuple, list] = {}
    for i in range(cluster.n_gpus):
        z, r = divmod(i, span)
        x, y = divmod(r, stride)
        groups.setdefault((z, y), []).append(i)
    for key, mem in groups.items():
        for rank, i in enumerate(mem):
            members_of_node.setdefault((key, i // N), []).append((rank, i))
    if kind == "all-to-all":
        piece = v / (g * g)
        for mem in groups.values():
            for s in mem:
                for d in mem:
                    if s == d:
                        continue
                    if s // N == d // N:
                        add((("gpu", s), ("nvswitch", s // N)), piece)
                        add((("nvswitch", d // N), ("gpu", d)), piece)
                    else:
                        tree_route(s, [d // N], piece)
                        add(((names[1], _graph_ids(cluster, d)[1]), ("gpu", d)), piece)
    else:
        shard = v / g
        for key, mem in groups.items():
            nodes = sorted({i // N for i in mem})
            for rank, s in enumerate(mem):
                home = s // N
                for (_, d) in members_of_node[(key, home)]:
                    if d != s:
                        add((("gpu", s), ("nvswitch", home)), shard)
                        add((("nvswitch", home), ("gpu", d)), shard)
                remote = [nd for nd in nodes if nd != home]
                tree_route(s, remote, shard)
                for nd in remote:
                    local = members_of_node[(key, nd)]
                    _, entry = local[rank % len(local)]
                    add(((names[1], _graph_ids(cluster, entry)[1]), ("gpu", entry)), shard)
                    for (_, d) in local:
                        if d != entry:
                            add((("gpu", entry), ("nvswitch", nd)), shard)
                            add((("nvswitch", nd), ("gpu", d)), shard)
        if kind == "all-reduce":
            load = {k: 2 * b for k, b in load.items()}
    return [LinkLoad(link, bw[link], load.get(link, 0.0)) for link in bw]


def direct_collective_time(cluster: GpuCluster, kind: str, nbytes: float, group: int, inner: int | None = None,
                           *, span: int | None = None) -> float:
    """Seconds of the busiest link of :func:`link_loads`: the bandwidth time of the collective counted link by
    link, to compare with :meth:`GpuCluster.collective_time`'s closed form."""
    loads = link_loads(cluster, kind, nbytes, group, inner, span=span)
    return max((ld.time for ld in loads), default=0.0)


# ---------------------------------------------------------------------------------------------------------------
# Rooflines of LLM scaling on GPUs (scaling book, gpus.md)
# ---------------------------------------------------------------------------------------------------------------

def _gpu_chip(chip) -> Chip:
    if isinstance(chip, GpuCluster):
        return chip.chip
    c = get_chip(chip)
    if c.kind != "gpu":
        raise ValueError(f"chip must be a GPU (e.g. 'h100') or a GpuCluster; {c.long_name} is a TPU")
    return c


def collective_bandwidth(chip, across_nodes: bool) -> float:
    """The scaling book's ``W_collective``: a GPU's NVLink egress inside a node (450 GB/s on H100), the node's
    scale-out egress across nodes (400 GB/s), bytes/s."""
    c = _gpu_chip(chip)
    check_bool("across_nodes", across_nodes)
    return c.bandwidth("node_egress") if across_nodes else c.bandwidth("nvlink")


def critical_batch_per_gpu(chip, *, across_nodes: bool = True, experts: int = 1, experts_per_token: int = 1,
                           nodes: int | None = None, model_parallel_nodes: int = 1, dtype: str = "bf16") -> float:
    """Tokens per GPU above which data parallelism or FSDP stays compute-bound: ``C / W_collective`` (2200 inside
    an H100 node, 2475 across nodes), times ``E / k`` for a MoE, times ``(X - 1) / X`` when only ``nodes = X``
    nodes take part, divided by the nodes a model-parallel group spans (its shards each cross on their own NICs).
    """
    c = _gpu_chip(chip)
    e = check_positive("experts", experts, integer=True)
    k = check_positive("experts_per_token", experts_per_token, integer=True)
    if k > e:
        raise ValueError(f"experts_per_token ({k}) cannot exceed experts ({e})")
    mp = check_positive("model_parallel_nodes", model_parallel_nodes, integer=True)
    b = c.peak_flops(dtype) / collective_bandwidth(c, across_nodes) * e / k / mp
    if nodes is not None:
        x = check_positive("nodes", nodes, integer=True)
        if x < 2:
            raise ValueError(f"nodes must be at least 2 (the data-parallel degree in nodes); got {nodes!r}")
        b *= (x - 1) / x
    return b


def max_tensor_parallelism(chip, d_ff: int, *, across_nodes: bool = False, dtype: str = "bf16") -> float:
    """Largest tensor-parallel degree ``Y = F W_collective / C`` that keeps the MLP compute-bound (about
    ``F / 2200`` inside an H100 node, ``F / 2475`` across nodes). A float: round down to a usable degree."""
    c = _gpu_chip(chip)
    f = check_positive("d_ff", d_ff, integer=True)
    return f * collective_bandwidth(c, across_nodes) / c.peak_flops(dtype)


def two_node_tensor_parallelism_ok(chip, d_ff: int, degree: int, *, dtype: str = "bf16") -> bool:
    """Whether ``degree``-way TP over two nodes stays compute-bound: ``F > (C / W_node) (Y - node_size)``
    (the two nodes' halves exchange over the scale-out network at twice one node's egress)."""
    c = _gpu_chip(chip)
    f = check_positive("d_ff", d_ff, integer=True)
    y = check_positive("degree", degree, integer=True)
    return f > c.peak_flops(dtype) / c.bandwidth("node_egress") * (y - c.node_size)


@dataclass(frozen=True)
class RooflineTimes:
    """Compute and communication time of one MLP block under one strategy, seconds."""

    strategy: str     # "dp", "tp", "ep" or "pp"
    degree: int       # GPUs the strategy spans
    math: float       # seconds of matmul FLOPs per GPU
    comms: float      # seconds of the strategy's collectives
    bound: str        # "compute" or "comms"

    @property
    def ratio(self) -> float:
        return self.comms / self.math if self.math else math.inf

    def __repr__(self) -> str:
        return (f"RooflineTimes({self.strategy}, degree={self.degree}, math={fmt(self.math, 's')}, "
                f"comms={fmt(self.comms, 's')}, {self.bound}-bound)")


def _times(strategy, degree, t_math, t_comms) -> RooflineTimes:
    return RooflineTimes(strategy, degree, t_math, t_comms, "compute" if t_math >= t_comms else "comms")


def expert_parallel_times(chip, batch_tokens: float, d_model: int, d_ff: int, experts_per_token: int,
                          degree: int, *, dtype: str = "bf16") -> RooflineTimes:
    """The scaling book's expert-parallel roofline over ``Z = degree`` GPUs spanning nodes:
    ``T_math = 4 B k D F / (Z C)``, ``T_comms = 4 B D (Z - n) / (W_node Z) · min(n k / Z, 1)`` with ``n`` the
    node size (the two AllToAlls of the forward pass; only the cross-node part counts)."""
    c = _gpu_chip(chip)
    B = check_positive("batch_tokens", batch_tokens)
    D = check_positive("d_model", d_model, integer=True)
    F = check_positive("d_ff", d_ff, integer=True)
    k = check_positive("experts_per_token", experts_per_token, integer=True)
    Z = check_positive("degree", degree, integer=True)
    n = c.node_size
    t_math = 4 * B * k * D * F / (Z * c.peak_flops(dtype))
    t_comms = 4 * B * D * max(Z - n, 0) / (c.bandwidth("node_egress") * Z) * min(n * k / Z, 1.0)
    return _times("ep", Z, t_math, t_comms)


def pipeline_comms_time(batch_tokens: float, d_model: int, bandwidth: float, microbatches: int, stages: int,
                        *, bytes_per_value: int = 2) -> float:
    """Seconds of a pipeline's activation sends: ``2 B D / (W N_mb) × (N_mb + N_stages - 2)`` hops (with 2-byte
    values; the scaling book's formula), ``bandwidth`` the link between stages in bytes/s."""
    B = check_positive("batch_tokens", batch_tokens)
    D = check_positive("d_model", d_model, integer=True)
    W = check_positive("bandwidth", bandwidth)
    M = check_positive("microbatches", microbatches, integer=True)
    P = check_positive("stages", stages, integer=True)
    b = check_positive("bytes_per_value", bytes_per_value, integer=True)
    return b * B * D / (W * M) * (M + P - 2)


def strategy_times(cluster: GpuCluster, model, batch_tokens: float, *, dtype: str = "bf16",
                   microbatches: int = 16) -> list[RooflineTimes]:
    """Comms vs compute of one MLP block (``x[B, D] W_in[D, F] W_out[F, D]``, expert MLPs for a MoE) for each
    strategy, priced on the cluster's topology with :meth:`GpuCluster.collective_time` (no latency): DP over
    every GPU (the backward pass's weight AllReduce vs its ``8 B D F k / X`` FLOPs, ``E`` expert copies), TP
    over one node (AllGather + ReduceScatter of the activations per forward pass), EP over ``gcd(GPUs,
    experts)`` GPUs (two ragged AllToAlls of the routed tokens), PP with a stage per node or group of nodes
    (its activation sends, in at least as many microbatches as stages, spread over the layers)."""
    from .transformer import as_config

    if not isinstance(cluster, GpuCluster):
        raise TypeError(f"cluster must be a GpuCluster; got {type(cluster).__name__}")
    m = as_config(model)
    B = check_positive("batch_tokens", batch_tokens)
    M = check_positive("microbatches", microbatches, integer=True)
    c = cluster.chip
    C = c.peak_flops(dtype)
    from .units import dtype_bytes

    b = dtype_bytes(dtype)
    D = m.d_model
    E = m.n_experts if m.is_moe else 1
    k = m.experts_per_token if m.is_moe else 1
    F = m.expert_ff if m.is_moe else m.d_ff
    n = cluster.n_gpus
    rows = []
    t = cluster.collective_time("all-reduce", 2 * D * F * E * b, n, hop_latency=0).total
    rows.append(_times("dp", n, 2 * 2 * 2 * B * D * F * k / (n * C), t))
    y = cluster.node_size
    t = 2 * cluster.collective_time("all-gather", B * D * b / max(n // y, 1), y, hop_latency=0).total
    rows.append(_times("tp", y, 2 * 2 * B * D * F * k / (n * C), t))
    if m.is_moe:
        z = math.gcd(n, E)                 # experts split evenly over GPUs that split the cluster evenly
        span = z
        # each EP group's tokens, one D-vector slot per shard (the dense [B, D, Z] array), k slots filled
        t = 2 * cluster.collective_time("all-to-all", B * z / n * D * b * z, z, span=span, hop_latency=0,
                                        top_k=k).total
        rows.append(_times("ep", z, 2 * 2 * B * D * F * k / (n * C), t))
    if cluster.n_nodes > 1:
        p = max(d for d in range(1, m.n_layers + 1) if cluster.n_nodes % d == 0)   # one stage per node(s)
        w = cluster.nic_bw
        # one pipeline carries B p / n tokens in at least p microbatches; its sends spread over the layers
        t = pipeline_comms_time(B * p / n, D, w, max(M, p), p, bytes_per_value=b) / m.n_layers
        rows.append(_times("pp", p, 2 * 2 * B * D * F * k / (n * C), t))
    return rows
