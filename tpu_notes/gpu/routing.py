"""The explicit link graph of a GPU cluster: every link, every shard of a collective routed and counted
(Chapter 11).

:func:`link_loads` checks the closed forms of :meth:`~tpu_notes.gpu.GpuCluster.collective_time` the slow way: it
builds the explicit graph (each GPU's NVLink and NIC links, each subtree's uplink), routes every shard of every
group over it (multicast up and down the tree, one entry per node, copies over NVLink) and adds up the bytes on
each directed link; the busiest link divided by its bandwidth is :func:`direct_collective_time`. The tests and
Chapter 11 hold the two to 1e-9.

Its work grows with the cluster: every GPU's links are built, and an AllToAll routes ``g`` pieces from each of
the ``n_gpus`` GPUs, each up and down the fat tree's levels. Two caps, checked up front, keep a call to a few
seconds on a laptop core (the closed form prices any size): at most :data:`MAX_DIRECT_GPUS` GPUs (and so a group of
at most as many), and ``n_gpus × group × (levels + 1) <=`` :data:`MAX_ROUTE_WORK` (a flat 576-GPU AllToAll is 0.7
million; the cap stops a deep tree of many levels, where each piece climbs further).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..collectives import canonical_kind
from ..units import NonNegativeFloat, PositiveInt, capped, checked
from .cluster import GpuCluster

__all__ = ["MAX_DIRECT_GPUS", "MAX_ROUTE_WORK", "LinkLoad", "direct_collective_time", "link_loads"]

#: Largest cluster (and group) :func:`link_loads` enumerates: Chapter 11's largest, the 576-GPU GB200 NVL72 pod
#: (4096 took about 40 s; an AllToAll over 576 GPUs under one level takes about 1 s).
MAX_DIRECT_GPUS = 576

#: Most ``n_gpus × group × (levels + 1)`` route steps :func:`link_loads` takes (about 2.5 s at the cap).
MAX_ROUTE_WORK = 1_500_000


@dataclass(frozen=True)
class LinkLoad:
    """Bytes one directed link of the explicit graph carries during a collective."""

    link: tuple  # (from, to): ("gpu", i) / ("nvswitch", node) / (level name, unit index)
    bandwidth: float  # bytes/s, one direction
    nbytes: float  # bytes routed over it

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


@checked
def link_loads(
    cluster: GpuCluster,
    kind: str,
    nbytes: NonNegativeFloat,
    group: capped(MAX_DIRECT_GPUS),
    inner: PositiveInt | None = None,
    *,
    span: PositiveInt | None = None,
) -> list[LinkLoad]:
    """Route one collective over the explicit graph of ``cluster`` and return the bytes on every directed link.

    The graph: each GPU has an NVLink link to and from its node's NVSwitch (``W_nvlink``) and a NIC link to and
    from its leaf unit (``W_nic`` over the first level's oversubscription); each subtree has one link to and from
    its parent unit of ``GPUs × per-GPU share`` bytes/s. The cluster is a mesh ``[rest, group, span/group]``: GPU
    ``z·span + x·(span/g) + y`` is member ``x`` of group ``(z, y)``. An AllGather sends every member's ``V/g``
    shard to every other member: inside the node over the sender's NVLink, one copy per receiver; to other nodes
    once up the tree to the lowest common unit and once down into each subtree that needs it, entering each node
    through one member's NIC (member ``x mod inner`` of that node), which copies it to its node-mates over
    NVLink. ReduceScatter is the reverse (the same loads), AllReduce both (twice); an AllToAll sends ``V/g²`` from
    every member to every other, NVLink inside a node, NIC to NIC across the tree. ``cluster`` has at most
    :data:`MAX_DIRECT_GPUS` GPUs.
    """
    if not isinstance(cluster, GpuCluster):
        raise TypeError(f"cluster must be a GpuCluster; got {type(cluster).__name__}")
    kind = canonical_kind(kind)
    _check_route_work(cluster, group)
    inner, span = cluster._placement(group, inner, span)
    g = int(group)
    routes = _Routes(cluster)
    bw = _link_bandwidths(cluster, routes)
    groups, members_of_node = _groups(cluster, span, span // g)
    if kind == "all-to-all":
        _route_all_to_all(routes, groups, nbytes / (g * g))
    else:
        _route_gather(routes, groups, members_of_node, nbytes / g)
    load = routes.load
    if kind == "all-reduce":
        load = {k: 2 * b for k, b in load.items()}
    return [LinkLoad(link, bw[link], load.get(link, 0.0)) for link in bw]


def _check_route_work(cluster: GpuCluster, group: int) -> None:
    """Refuse a cluster past :data:`MAX_DIRECT_GPUS` or a routing past :data:`MAX_ROUTE_WORK` steps."""
    if cluster.n_gpus > MAX_DIRECT_GPUS:
        raise ValueError(
            f"cluster has {cluster.n_gpus} GPUs; link_loads enumerates at most MAX_DIRECT_GPUS="
            f"{MAX_DIRECT_GPUS} (the closed form GpuCluster.collective_time prices any size)"
        )
    work = cluster.n_gpus * group * (len(cluster.levels) + 1)
    if work > MAX_ROUTE_WORK:
        raise ValueError(
            f"cluster ({cluster.n_gpus} GPUs, {len(cluster.levels)} levels) x group ({group}) is "
            f"{work:,} route steps; link_loads takes at most MAX_ROUTE_WORK={MAX_ROUTE_WORK:,} (use "
            "GpuCluster.collective_time, the closed form)"
        )


class _Routes:
    """The bytes routed onto each directed link so far, and the moves that add them."""

    def __init__(self, cluster: GpuCluster):
        self.N = cluster.node_size
        self.names = ["nvswitch"] + [lv.name for lv in cluster.levels]
        self.unit = [_graph_ids(cluster, i) for i in range(cluster.n_gpus)]  # each GPU's unit at every level
        self.load: dict[tuple, float] = {}

    def add(self, link, b):
        self.load[link] = self.load.get(link, 0.0) + b

    def nvlink(self, s, d, b):
        """``b`` bytes from GPU ``s`` to GPU ``d`` of the same node, through its NVSwitch."""
        self.add((("gpu", s), ("nvswitch", s // self.N)), b)
        self.add((("nvswitch", d // self.N), ("gpu", d)), b)

    def nic_in(self, d, b):
        """``b`` bytes down GPU ``d``'s NIC link from its leaf unit."""
        self.add(((self.names[1], self.unit[d][1]), ("gpu", d)), b)

    def tree(self, src_gpu, dst_nodes, shard):
        """Multicast ``shard`` bytes from GPU ``src_gpu`` to the nodes ``dst_nodes``; return nothing."""
        if not dst_nodes:
            return
        names, s_ids = self.names, self.unit[src_gpu]
        d_ids = [self.unit[nd * self.N] for nd in dst_nodes]
        self.add((("gpu", src_gpu), (names[1], s_ids[1])), shard)
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
            self.add(link, shard)


def _link_bandwidths(cluster: GpuCluster, routes: _Routes) -> dict:
    """Bytes/s of every directed link: each GPU's NVLink and NIC links, each subtree's uplink and downlink."""
    bw: dict[tuple, float] = {}
    per_gpu = cluster.per_gpu_bw()
    sizes = cluster.subtree_sizes()
    names = routes.names
    for i in range(cluster.n_gpus):
        ids = routes.unit[i]
        bw[(("gpu", i), ("nvswitch", ids[0]))] = bw[(("nvswitch", ids[0]), ("gpu", i))] = cluster.chip.nvlink_bw
        if cluster.levels:
            bw[(("gpu", i), (names[1], ids[1]))] = bw[((names[1], ids[1]), ("gpu", i))] = per_gpu[0]
    for li in range(1, len(cluster.levels)):  # subtree of level li-1 (name names[li]) -> unit of level li
        child, parent = names[li], names[li + 1]
        for u in range(cluster.n_gpus // (sizes[li])):
            up = u // cluster.levels[li].degree
            bw[((child, u), (parent, up))] = bw[((parent, up), (child, u))] = sizes[li] * per_gpu[li]
    return bw


def _groups(cluster: GpuCluster, span: int, stride: int):
    """The groups of the mesh ``[rest, group, span/group]`` (GPU ``z·span + x·stride + y`` is member ``x`` of group
    ``(z, y)``), and each group's ``(rank, gpu)`` members on each node."""
    members_of_node: dict[tuple, list] = {}
    groups: dict[tuple, list] = {}
    for i in range(cluster.n_gpus):
        z, r = divmod(i, span)
        x, y = divmod(r, stride)
        groups.setdefault((z, y), []).append(i)
    for key, mem in groups.items():
        for rank, i in enumerate(mem):
            members_of_node.setdefault((key, i // cluster.node_size), []).append((rank, i))
    return groups, members_of_node


def _route_all_to_all(routes: _Routes, groups: dict, piece: float) -> None:
    """Every member sends ``piece`` bytes to every other: NVLink inside a node, NIC to NIC across the tree."""
    N = routes.N
    for mem in groups.values():
        for s in mem:
            for d in mem:
                if s == d:
                    continue
                if s // N == d // N:
                    routes.nvlink(s, d, piece)
                else:
                    routes.tree(s, [d // N], piece)
                    routes.nic_in(d, piece)


def _route_gather(routes: _Routes, groups: dict, members_of_node: dict, shard: float) -> None:
    """Every member's ``shard`` to every other member: over NVLink to its node-mates, once up the tree and down into
    each other node, entering through one member's NIC, which copies it to its node-mates over NVLink."""
    N = routes.N
    for key, mem in groups.items():
        nodes = sorted({i // N for i in mem})
        for rank, s in enumerate(mem):
            home = s // N
            for _, d in members_of_node[(key, home)]:
                if d != s:
                    routes.nvlink(s, d, shard)
            remote = [nd for nd in nodes if nd != home]
            routes.tree(s, remote, shard)
            for nd in remote:
                local = members_of_node[(key, nd)]
                _, entry = local[rank % len(local)]
                routes.nic_in(entry, shard)
                for _, d in local:
                    if d != entry:
                        routes.nvlink(entry, d, shard)


@checked
def direct_collective_time(
    cluster: GpuCluster,
    kind: str,
    nbytes: NonNegativeFloat,
    group: capped(MAX_DIRECT_GPUS),
    inner: PositiveInt | None = None,
    *,
    span: PositiveInt | None = None,
) -> float:
    """Seconds of the busiest link of :func:`link_loads`: the bandwidth time of the collective counted link by
    link, to compare with :meth:`~tpu_notes.gpu.cluster.GpuCluster.collective_time`'s closed form."""
    loads = link_loads(cluster, kind, nbytes, group, inner, span=span)
    return max((ld.time for ld in loads), default=0.0)
