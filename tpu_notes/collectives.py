"""How long a collective takes on a TPU ring or torus: AllGather, ReduceScatter, AllReduce, AllToAll (Chapter 3).

The model, derived in Chapter 3 and restated here:

* ``N`` devices sit on one mesh axis, each holding ``V / N`` bytes of a ``V``-byte array (``nbytes`` is always the
  size of the *whole* array: the gathered result of an AllGather, the unreduced input of a ReduceScatter).
* **With wraparound** the axis is a ring and every link carries traffic both ways. In each hop, every device
  passes one shard of ``V / N`` bytes to each neighbour, at the one-way link bandwidth ``W_bidi / 2``. After
  ``h`` hops a device holds ``2h + 1`` shards, so an AllGather needs ``h = ⌈(N − 1) / 2⌉`` hops and takes
  ``⌈(N − 1) / 2⌉ · 2V / (N · W_bidi)``: exactly ``V / W_bidi`` for even ``N`` (independent of ``N``) and
  ``(N − 1)/N · V / W_bidi`` for odd ``N``.
* **Without wraparound** the axis is a line. An end device has a single link, so it must receive the other
  ``N − 1`` shards through it at the one-way bandwidth ``W_bidi / 2``: ``N − 1`` hops of ``V / N`` bytes,
  ``2 (N − 1) V / (N W_bidi)`` (the scaling book's worked v5e example), 1.5x the ring on 4 chips, about 2x on long axes.
* **Several axes** (an AllGather over ``X`` and ``Y`` at once) use ``n_axes`` times as many links, so the bandwidth
  term is divided by ``n_axes``; the hops of the axes add up.
* **Latency**: every hop costs at least ``hop_latency`` (about 1 µs on TPU ICI), so the latency term is
  ``hops × hop_latency`` and the collective takes ``max(bandwidth term, latency term)``.
* **A one-way ring** (``bidirectional=False``, which needs wraparound) sends every shard the same way round: an
  AllGather needs ``N − 1`` hops of ``V / N`` at ``W_bidi / 2``, ``2 (N − 1) V / (N W_bidi)`` (the line's bandwidth
  term), and an AllToAll moves each block ``k`` hops for ``k = 1 .. N − 1``, half the one-way AllGather's bytes
  per link: the scaling book's "half an AllGather", which becomes a quarter on a bidirectional ring.
* ReduceScatter is the transpose (the derivative) of AllGather and costs the same; AllReduce = ReduceScatter +
  AllGather (twice the cost); AllToAll moves each block only to its destination: 1/4 of an AllGather on a
  bidirectional ring; on a line it is limited by the middle link, ``V / (2 W_bidi)`` for even ``N`` (twice the
  ring's AllToAll; the "half an AllGather" of the scaling book is for a one-way ring). On several axes the
  AllToAll bandwidth term is
  ``V · max(X_i) / (4 · N · W_bidi)`` (the scaling book's torus form; it equals ``V / (4 W_bidi)`` for one axis).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Integral

from .hardware import ICI_HOP_LATENCY
from .units import check_bool, check_choice, check_positive, fmt

AxisSizes = int | Sequence[int]
Wraparound = bool | Sequence[bool]

#: The collectives this module prices, by the names the book uses.
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all")

#: Largest axis :func:`ring_all_gather_schedule` simulates: its states grow as ``N³`` (a picture, not a model;
#: the closed forms above price any size).
MAX_SCHEDULE_DEVICES = 256


@dataclass(frozen=True)
class CollectiveTime:
    """Time of one collective, in seconds."""

    bandwidth_time: float  # bytes over links: the bandwidth-bound estimate, seconds
    latency_time: float  # hops x per-hop latency: the latency-bound estimate, seconds
    total: float  # max(bandwidth_time, latency_time), seconds
    bound: str  # "bandwidth" or "latency": which term sets the total (ties count as bandwidth)

    def __repr__(self) -> str:
        return (
            f"CollectiveTime(bandwidth_time={fmt(self.bandwidth_time, 's')}, "
            f"latency_time={fmt(self.latency_time, 's')}, total={fmt(self.total, 's')}, bound={self.bound!r})"
        )


#: The most axes one collective may span: a TPU torus has three, a GPU fat tree a few levels (a count beyond this is
#: a mistake, and a list of that many axes would not fit in memory).
MAX_AXES = 64


def _axes(axis_size: AxisSizes, n_axes: int, wraparound: Wraparound) -> tuple[list[int], list[bool]]:
    """Per-axis sizes and wraparound flags from the flexible arguments."""
    n_axes = check_positive("n_axes", n_axes, integer=True, maximum=MAX_AXES)
    if isinstance(axis_size, (Integral, float)) and not isinstance(axis_size, bool):
        sizes = [check_positive("axis_size", axis_size, integer=True)] * n_axes
    elif isinstance(axis_size, (list, tuple)):
        if not axis_size:
            raise ValueError("axis_size must be a positive integer or a non-empty sequence of them")
        sizes = [check_positive(f"axis_size[{i}]", s, integer=True) for i, s in enumerate(axis_size)]
        if n_axes not in (1, len(sizes)):
            raise ValueError(f"n_axes={n_axes} does not match the {len(sizes)} axis sizes {tuple(axis_size)}")
    else:
        raise TypeError(f"axis_size must be a positive integer or a sequence of them; got {type(axis_size).__name__}")
    if isinstance(wraparound, bool):
        wraps = [wraparound] * len(sizes)
    elif isinstance(wraparound, (list, tuple)) and all(isinstance(w, bool) for w in wraparound):
        if len(wraparound) != len(sizes):
            raise ValueError(f"wraparound has {len(wraparound)} flags for {len(sizes)} axes")
        wraps = list(wraparound)
    else:
        raise TypeError(f"wraparound must be True/False or a sequence of them; got {wraparound!r}")
    return sizes, wraps


def gather_hops(axis_size: int, wraparound: bool = True, bidirectional: bool = True) -> int:
    """Hops an AllGather (or ReduceScatter) needs on one axis of ``axis_size`` devices.

    ``⌈(N − 1) / 2⌉`` on a bidirectional ring (with wraparound), ``N − 1`` on a line (without) or on a one-way
    ring (``bidirectional=False``).
    """
    n = check_positive("axis_size", axis_size, integer=True)
    check_bool("wraparound", wraparound)
    check_bool("bidirectional", bidirectional)
    if not bidirectional and not wraparound:
        raise ValueError("bidirectional=False (a one-way ring) needs wraparound=True: a one-way line cannot gather")
    return math.ceil((n - 1) / 2) if (wraparound and bidirectional) else n - 1


def _result(bandwidth_time: float, latency_time: float) -> CollectiveTime:
    total = max(bandwidth_time, latency_time)
    return CollectiveTime(
        bandwidth_time=bandwidth_time,
        latency_time=latency_time,
        total=total,
        bound="bandwidth" if bandwidth_time >= latency_time else "latency",
    )


def _gather_parts(
    nbytes, axis_size, link_bw_bidi, wraparound, n_axes, hop_latency, bidirectional=True
) -> tuple[float, float, list, list]:
    v = check_positive("nbytes", nbytes, allow_zero=True)
    w = check_positive("link_bw_bidi", link_bw_bidi)
    lat = check_positive("hop_latency", hop_latency, allow_zero=True)
    check_bool("bidirectional", bidirectional)
    sizes, wraps = _axes(axis_size, n_axes, wraparound)
    if not bidirectional and not all(wraps):
        raise ValueError("bidirectional=False (a one-way ring) needs wraparound=True on every axis")
    n = math.prod(sizes)
    if n == 1:
        return 0.0, 0.0, sizes, wraps
    if all(wraps) and bidirectional:  # bidirectional ring: ⌈(N−1)/2⌉ hops of V/N bytes at W_bidi/2 each way
        bw = math.ceil((n - 1) / 2) * (v / n) / (w / 2)
    else:  # a line or a one-way ring: N−1 hops of V/N bytes at the one-way bandwidth W_bidi/2
        bw = (n - 1) * (v / n) / (w / 2)
    bw /= len(sizes)
    hops = sum(gather_hops(s, wr, bidirectional) for s, wr in zip(sizes, wraps))
    return bw, hops * lat, sizes, wraps


def all_gather_time(
    nbytes: float,
    axis_size: AxisSizes,
    link_bw_bidi: float,
    *,
    wraparound: Wraparound = True,
    n_axes: int = 1,
    hop_latency: float = ICI_HOP_LATENCY,
    bidirectional: bool = True,
) -> CollectiveTime:
    """Time to AllGather a ``nbytes``-byte array (the *gathered* size) over ``axis_size`` devices.

    ``link_bw_bidi`` is the bidirectional bandwidth of one link in bytes/s (``Chip.ici_bw_bidi``). With
    ``wraparound`` the bandwidth term is ``⌈(N−1)/2⌉ · 2V / (N · W_bidi)`` (``V / W_bidi`` for even ``N``); without it
    ``2 (N−1) V / (N · W_bidi)``. ``n_axes`` axes at once (``axis_size`` an int per axis, or a sequence of sizes)
    divide the bandwidth term by ``n_axes``. The latency term is hops × ``hop_latency`` (seconds).
    ``bidirectional=False`` prices a one-way ring (with wraparound): ``N − 1`` hops, ``2 (N−1) V / (N · W_bidi)``.
    """
    bw, lat, _, _ = _gather_parts(nbytes, axis_size, link_bw_bidi, wraparound, n_axes, hop_latency, bidirectional)
    return _result(bw, lat)


def reduce_scatter_time(
    nbytes: float,
    axis_size: AxisSizes,
    link_bw_bidi: float,
    *,
    wraparound: Wraparound = True,
    n_axes: int = 1,
    hop_latency: float = ICI_HOP_LATENCY,
    bidirectional: bool = True,
) -> CollectiveTime:
    """Time to ReduceScatter a ``nbytes``-byte array (the *unreduced* size on each device) over ``axis_size``
    devices: the transpose of an AllGather, with the same hops and bytes (see :func:`all_gather_time`)."""
    bw, lat, _, _ = _gather_parts(nbytes, axis_size, link_bw_bidi, wraparound, n_axes, hop_latency, bidirectional)
    return _result(bw, lat)


def all_reduce_time(
    nbytes: float,
    axis_size: AxisSizes,
    link_bw_bidi: float,
    *,
    wraparound: Wraparound = True,
    n_axes: int = 1,
    hop_latency: float = ICI_HOP_LATENCY,
    bidirectional: bool = True,
) -> CollectiveTime:
    """Time to AllReduce a ``nbytes``-byte array: a ReduceScatter then an AllGather (twice the time of either)."""
    bw, lat, _, _ = _gather_parts(nbytes, axis_size, link_bw_bidi, wraparound, n_axes, hop_latency, bidirectional)
    return _result(2 * bw, 2 * lat)


def all_to_all_time(
    nbytes: float,
    axis_size: AxisSizes,
    link_bw_bidi: float,
    *,
    wraparound: Wraparound = True,
    n_axes: int = 1,
    hop_latency: float = ICI_HOP_LATENCY,
    bidirectional: bool = True,
) -> CollectiveTime:
    """Time to AllToAll a ``nbytes``-byte array (the whole array; each device holds ``nbytes / N``).

    On one axis with wraparound: 1/4 of an AllGather's bandwidth term (``V / (4 W_bidi)`` for even ``N``; for odd
    ``N`` the exact ``(N² − 1) V / (4 N² W_bidi)``, which the book's quarter rule undershoots by ``N / (N + 1)``).
    On one
    axis without wraparound (a line) the middle link is the bottleneck: ``⌊N/2⌋·⌈N/2⌉`` blocks of ``V/N²`` cross it
    in each direction at ``W_bidi / 2``, i.e. ``V / (2 W_bidi)`` for even ``N``: twice the ring's AllToAll, and
    ``N / (4 (N − 1))`` of the line's own AllGather (1/3 on 4 chips). The scaling book's "half an AllGather" is
    for a *one-way* ring, a different network. On several axes ``V · max(X_i) / (4 · N · W_bidi)`` (doubled
    without wraparound, as on one axis). Same hops as an AllGather.

    On a one-way ring (``bidirectional=False``) each block travels ``k`` hops for ``k = 1 .. N − 1`` one way:
    ``(N − 1) V / (2N)`` bytes per link at ``W_bidi / 2``, i.e. ``(N − 1) V / (N W_bidi)``, half of that ring's
    AllGather (doubled on several axes, as on a line).
    """
    v = check_positive("nbytes", nbytes, allow_zero=True)
    w = check_positive("link_bw_bidi", link_bw_bidi)
    _, lat, sizes, wraps = _gather_parts(
        nbytes, axis_size, link_bw_bidi, wraparound, n_axes, hop_latency, bidirectional
    )
    n = math.prod(sizes)
    if n == 1:
        return _result(0.0, 0.0)
    if not bidirectional:
        bw = (n - 1) * v / (n * w) if len(sizes) == 1 else v * max(sizes) / (2 * n * w)
        return _result(bw, lat)
    if len(sizes) == 1:
        # ⌊N/2⌋·⌈N/2⌉ blocks of V/N² must cross the middle of the axis in each direction. A ring (N > 2; a ring
        # of 2 is a single link) is cut at two links, so they cross at 2 · W_bidi/2 = W_bidi: V / (4 W_bidi) for
        # even N, a quarter of the AllGather. A line is cut at one link: W_bidi / 2, twice as long.
        cut_bw = w if (wraps[0] and n > 2) else w / 2
        bw = (n // 2) * ((n + 1) // 2) * (v / n**2) / cut_bw
    else:
        bw = v * max(sizes) / (4 * n * w) * (1 if all(wraps) else 2)
    return _result(bw, lat)


_FUNCS = {
    "all-gather": all_gather_time,
    "reduce-scatter": reduce_scatter_time,
    "all-reduce": all_reduce_time,
    "all-to-all": all_to_all_time,
}


def collective_time(kind: str, nbytes: float, axis_size: AxisSizes, link_bw_bidi: float, **kwargs) -> CollectiveTime:
    """Dispatch on ``kind`` (one of :data:`KINDS`; ``"allgather"``, ``"AllGather"``... also accepted); ``kwargs``
    are the keyword arguments of :func:`all_gather_time`."""
    allowed = ("wraparound", "n_axes", "hop_latency", "bidirectional")
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"collective_time got unknown keyword argument(s) {unknown}; allowed: {list(allowed)}")
    return _FUNCS[canonical_kind(kind)](nbytes, axis_size, link_bw_bidi, **kwargs)


_KIND_ALIASES = {k.replace("-", ""): k for k in KINDS}


def canonical_kind(kind: str) -> str:
    """``"AllGather"``, ``"all_gather"``, ``"all-gather"`` -> ``"all-gather"``; raises ValueError otherwise."""
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a string, one of {KINDS}; got {type(kind).__name__}")
    key = kind.strip().lower().replace("_", "").replace("-", "").replace(" ", "")
    if key not in _KIND_ALIASES:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    return _KIND_ALIASES[key]


#: What :func:`latency_bound_bytes` measures: the whole gathered array, or the shard one hop carries.
LATENCY_BOUND_PER = ("array", "hop")


def latency_bound_bytes(
    axis_size: int,
    link_bw_bidi: float,
    hop_latency: float = ICI_HOP_LATENCY,
    wraparound: bool = True,
    per: str = "array",
) -> float:
    """The size (bytes) below which an AllGather over ``axis_size`` devices is latency-bound.

    Setting the bandwidth term equal to the latency term: each hop moves one ``V / N`` shard in ``hop_latency``
    at the one-way bandwidth ``W_bidi / 2``, so

    * ``per="array"`` (default): the whole gathered array, ``V* = N · hop_latency · W_bidi / 2`` (360 kB for 8 v5e
      chips); it grows with ``N``;
    * ``per="hop"``: the shard each hop carries, ``V* / N = hop_latency · W_bidi / 2`` (45 kB on v5e), the same
      for every ``N``.

    Both hold with and without wraparound (the hop count cancels).
    """
    n = check_positive("axis_size", axis_size, integer=True)
    w = check_positive("link_bw_bidi", link_bw_bidi)
    lat = check_positive("hop_latency", hop_latency)
    check_bool("wraparound", wraparound)
    per = check_choice("per", per, LATENCY_BOUND_PER)
    shard = lat * w / 2
    return shard if per == "hop" else n * shard


# --------------------------------------------------------------------------------------------------------------
# A ring AllGather hop by hop (for the figure and the tests); tpu_notes.bench runs them for real (shard_map)
# --------------------------------------------------------------------------------------------------------------
def ring_all_gather_schedule(axis_size: int, wraparound: bool = True) -> list[list[frozenset]]:
    """Which shards each device holds after each hop of a ring AllGather (a pure simulation, no JAX).

    Returns ``states`` with ``states[h][d]`` = the set of shard indices device ``d`` holds after ``h`` hops
    (``states[0][d] == {d}``). With wraparound every device forwards, in each hop, the shard it received last
    from the left to the right and the one from the right to the left: ``⌈(N−1)/2⌉`` hops. Without wraparound
    the shards also move one per hop per direction, but along a line, so the end devices wait ``N − 1`` hops for
    the shard of the far end. Either way each link carries one ``V / N`` shard per direction per hop.
    ``axis_size`` is at most :data:`MAX_SCHEDULE_DEVICES` (the states grow as ``N³``).
    """
    n = check_positive("axis_size", axis_size, integer=True, maximum=MAX_SCHEDULE_DEVICES)
    check_bool("wraparound", wraparound)
    states = [[frozenset({d}) for d in range(n)]]
    if wraparound:
        right = {d: d for d in range(n)}  # shard moving rightwards that device d will forward next
        left = {d: d for d in range(n)}
        while any(len(s) < n for s in states[-1]):
            cur = [set(s) for s in states[-1]]
            new_right, new_left = {}, {}
            for d in range(n):
                new_right[(d + 1) % n] = right[d]
                new_left[(d - 1) % n] = left[d]
            for d in range(n):
                cur[d].add(new_right[d])
                cur[d].add(new_left[d])
            right, left = new_right, new_left
            states.append([frozenset(s) for s in cur])
        return states
    # line: one shard per hop per direction; a device forwards the shards in arrival order
    queue_r = {d: [d] for d in range(n)}  # shards waiting to go right from d
    queue_l = {d: [d] for d in range(n)}
    while any(len(s) < n for s in states[-1]):
        cur = [set(s) for s in states[-1]]
        moves = []
        for d in range(n):
            if d + 1 < n and queue_r[d]:
                moves.append((d + 1, queue_r[d].pop(0), "r"))
            if d - 1 >= 0 and queue_l[d]:
                moves.append((d - 1, queue_l[d].pop(0), "l"))
        for dest, shard, way in moves:
            cur[dest].add(shard)
            (queue_r if way == "r" else queue_l)[dest].append(shard)
        states.append([frozenset(s) for s in cur])
    return states


#: Largest axis the hop-by-hop simulations below accept (they build one state per device per hop).
MAX_SIMULATED_DEVICES = 64


def _simulated_axis(axis_size) -> int:
    n = check_positive("axis_size", axis_size, integer=True)
    if n > MAX_SIMULATED_DEVICES:
        raise ValueError(f"axis_size must be at most {MAX_SIMULATED_DEVICES} for a hop-by-hop simulation; got {n}")
    return n


def ring_link_bytes(kind: str, axis_size: int, nbytes: float, *, bidirectional: bool = True) -> float:
    """Bytes the busiest link of a ring carries in one direction during one collective (Chapter 3, Question 10).

    ``nbytes`` is the whole array ``V``, as everywhere in this module; ``kind`` is "all-gather", "reduce-scatter"
    (the same traffic reversed) or "all-to-all". Each block takes the shortest way round the ring; with
    ``bidirectional=False`` every link carries traffic one way only, so every block goes the same way round. By
    the ring's symmetry every link in a direction carries the same load: the total block-distance travelled in that
    direction divided by the ``N`` links. The results are

    * AllGather: ``(N−1)/N · V`` one-way, ``⌈(N−1)/2⌉ · V/N`` (``V/2`` for even ``N``) bidirectional;
    * AllToAll (``N²`` blocks of ``V/N²``): ``(N−1)/(2N) · V`` one-way (half the AllGather's), ``V/8`` bidirectional
      for even ``N`` (a quarter of the AllGather's: each block also travels at most half-way round).

    Divide by the one-way bandwidth of a link (``W_bidi / 2``) for the bandwidth term of the time.
    """
    kind = canonical_kind(kind)
    if kind == "all-reduce":
        raise ValueError(
            "kind must be 'all-gather', 'reduce-scatter' or 'all-to-all' (an AllReduce is a "
            "ReduceScatter then an AllGather: twice the AllGather's load)"
        )
    n = check_positive("axis_size", axis_size, integer=True, maximum=10**6)  # its loop is O(N)
    v = check_positive("nbytes", nbytes, allow_zero=True)
    if not isinstance(bidirectional, bool):
        raise TypeError(f"bidirectional must be True or False; got {bidirectional!r}")
    if n == 1:
        return 0.0
    if kind in ("all-gather", "reduce-scatter"):
        # every shard of V/N must cross N−1 links; one-way all of them go the same way, else ⌈(N−1)/2⌉ one way
        per_shard = (n - 1) if not bidirectional else math.ceil((n - 1) / 2)
        return n * per_shard * (v / n) / n
    # all-to-all: from each source one block of V/N² to each destination at distance d = 1 .. N−1
    distance = 0.0
    for d in range(1, n):
        if not bidirectional:
            distance += d  # one way round, the long way included
        elif 2 * d < n:
            distance += d  # the short way, clockwise
        elif 2 * d == n:  # half-way round: half the blocks each way (a ring of 2 has
            distance += d / 2 if n > 2 else d  # one link, whose two directions are the two ways round)
    return n * distance * (v / n**2) / n


def ring_reduce_scatter_schedule(axis_size: int) -> list[list[dict]]:
    """A bidirectional ring ReduceScatter hop by hop: the transpose of :func:`ring_all_gather_schedule`.

    Returns ``states`` with ``states[h][d]`` = ``{shard: frozenset(contributors)}``, the partial sums device ``d``
    still holds after ``h`` hops and which devices' addends each one already includes. At the start every device
    holds every shard with only its own addend; the addends of shard ``s`` flow towards device ``s`` from both
    sides, summed on the way, and each device forwards one shard per direction per hop. After
    ``⌈(N−1)/2⌉`` hops device ``s`` holds only shard ``s``, summed over all ``N`` devices.
    """
    n = _simulated_axis(axis_size)
    right, left = math.ceil((n - 1) / 2), (n - 1) // 2  # arms of the ring feeding each shard
    held = [{s: frozenset({d}) for s in range(n)} for d in range(n)]
    states = [[dict(h) for h in held]]
    for k in range(1, right + 1):
        moves = []
        for s in range(n):
            moves.append(((s + right - k + 1) % n, (s + right - k) % n, s))  # flowing back from the right arm
            if k <= left:
                moves.append(((s - left + k - 1) % n, (s - left + k) % n, s))  # and from the left arm
        for src, dst, s in moves:
            held[dst][s] = held[dst][s] | held[src].pop(s)
        states.append([dict(h) for h in held])
    return states


def ring_all_to_all_schedule(axis_size: int) -> list[list[dict]]:
    """A bidirectional ring AllToAll hop by hop: each block goes the shortest way to its destination.

    Returns ``states`` with ``states[h][d]`` = ``{destination: number of blocks}`` device ``d`` holds after ``h``
    hops (blocks in transit included). Device ``s`` starts with one block for every destination; a block for a
    destination half-way round goes clockwise from an even source and counter-clockwise from an odd one. After
    ``⌊N/2⌋`` hops device ``d`` holds the ``N`` blocks addressed to it.
    """
    n = _simulated_axis(axis_size)
    blocks = []  # (position, destination, step: +1 clockwise or −1)
    for s in range(n):
        for t in range(n):
            d = (t - s) % n
            step = 1 if (2 * d < n or (2 * d == n and s % 2 == 0)) else -1
            blocks.append([s, t, step])

    def snapshot():
        out = [dict() for _ in range(n)]
        for pos, t, _ in blocks:
            out[pos][t] = out[pos].get(t, 0) + 1
        return out

    states = [snapshot()]
    while any(pos != t for pos, t, _ in blocks):
        for b in blocks:
            if b[0] != b[1]:
                b[0] = (b[0] + b[2]) % n
        states.append(snapshot())
    return states
