"""The sharding notation and sharded matmuls (Chapter 3).

``A[I_X, J_YZ]`` names an array ``A`` with dimensions ``I`` and ``J``; the subscripts are the *mesh axes* that
split each dimension (``J`` is split over ``Y`` and ``Z`` together, ``Y`` the major one). Mesh axes not named
anywhere replicate the array. ``{U_X}`` after the brackets marks an *unreduced* array: each device along ``X``
holds a partial sum and the true value is their sum.

A mesh is a plain ``dict`` of axis name -> size, e.g. ``{"X": 2, "Y": 4}``; dimension sizes are a ``dict`` of
dimension name -> size, e.g. ``{"I": 64, "J": 128}``.

``matmul_plan(lhs, rhs, out, mesh=..., sizes=...)`` says which of the four cases of a sharded matmul applies and
lists the collectives needed before and after the local matmul, each with its bytes per device. The predictions
are checked against the collectives XLA's SPMD partitioner inserts (``tests/test_hlo_oracle.py``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from . import collectives as _coll
from . import compat, hardware, roofline
from .topology import Slice
from .units import NonNegativeFloat, canonical_dtype, checked, dtype_bytes, fmt

Mesh = Mapping[str, int]
Sizes = Mapping[str, int] | Sequence[int]


# --------------------------------------------------------------------------------------------------------------
# The notation
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Dim:
    """One dimension of a sharded array."""

    name: str  # dimension name, e.g. "I" or "D"
    axes: tuple[str, ...] = ()  # mesh axes splitting it, major first; () = not split

    def __post_init__(self):
        _check_name("name", self.name, "a dimension name")
        object.__setattr__(self, "axes", _check_axes("axes", self.axes))

    def __str__(self) -> str:
        return self.name + ("_" + "".join(self.axes) if self.axes else "")


@dataclass(frozen=True)
class ShardedArray:
    """An array written in the sharding notation, e.g. ``A[I_X, J]`` or ``C[I, K]{U_Y}``."""

    name: str  # the array's name, e.g. "A"
    dims: tuple[Dim, ...]  # its dimensions, in order
    unreduced: tuple[str, ...] = ()  # mesh axes over which it holds partial sums ({U_X}); () = fully reduced

    def __post_init__(self):
        # The same rules as parse(): a name, distinct dimensions, each mesh axis used at most once.
        _check_name("name", self.name, "an array name")
        dims = self.dims
        if (
            isinstance(dims, (str, bytes))
            or not isinstance(dims, (tuple, list))
            or not dims
            or not all(isinstance(d, Dim) for d in dims)
        ):
            raise TypeError(f"dims must be a non-empty tuple of Dim; got {dims!r}")
        names = [d.name for d in dims]
        if len(set(names)) != len(names):
            raise ValueError(f"dims repeat a dimension name: {names}")
        unreduced = _check_axes("unreduced", self.unreduced)
        used = [a for d in dims for a in d.axes] + list(unreduced)
        twice = sorted({a for a in used if used.count(a) > 1})
        if twice:
            raise ValueError(
                f"dims/unreduced: mesh axis {twice[0]!r} is used twice; each mesh axis may split one "
                "dimension (or hold partial sums) at most"
            )
        object.__setattr__(self, "dims", tuple(dims))
        object.__setattr__(self, "unreduced", unreduced)

    def __str__(self) -> str:
        text = f"{self.name}[{', '.join(map(str, self.dims))}]"
        return text + ("{U_" + "".join(self.unreduced) + "}" if self.unreduced else "")

    def __repr__(self) -> str:
        return f"ShardedArray({str(self)!r})"

    # -- structure ------------------------------------------------------------------------------------------
    @property
    def dim_names(self) -> tuple[str, ...]:
        """Names of the dimensions, in order."""
        return tuple(d.name for d in self.dims)

    @property
    def used_axes(self) -> tuple[str, ...]:
        """Mesh axes that split a dimension or hold partial sums, in order of appearance."""
        return tuple(a for d in self.dims for a in d.axes) + self.unreduced

    def dim(self, name: str) -> Dim:
        """The dimension called ``name``."""
        for d in self.dims:
            if d.name == name:
                return d
        raise ValueError(f"name {name!r} is not a dimension of {self}; its dimensions are {self.dim_names}")

    def with_dims(self, **axes: Sequence[str]) -> ShardedArray:
        """A copy with the named dimensions' mesh axes replaced, e.g. ``a.with_dims(J=())``."""
        for n, v in axes.items():
            if n not in self.dim_names:
                raise ValueError(f"{n} is not a dimension of {self}; its dimensions are {self.dim_names}")
            try:
                _check_axes(n, v)
            except (TypeError, ValueError) as err:
                raise type(err)(str(err)) from None
        dims = tuple(Dim(d.name, tuple(axes[d.name])) if d.name in axes else d for d in self.dims)
        try:
            return ShardedArray(self.name, dims, self.unreduced)
        except ValueError as err:
            raise ValueError(f"{', '.join(axes)}: {err}") from None

    def renamed(self, name: str) -> ShardedArray:
        return ShardedArray(name, self.dims, self.unreduced)

    # -- validation -----------------------------------------------------------------------------------------
    def validate(self, mesh: Mesh, sizes: Sizes | None = None) -> ShardedArray:
        """Check the sharding against ``mesh`` (and the dimension sizes, if given); return ``self``.

        Raises ``ValueError`` for an axis not in the mesh, an axis used twice, or a dimension the product of
        its mesh axes does not divide.
        """
        mesh = _check_mesh(mesh)
        for a in self.used_axes:
            if a not in mesh:
                raise ValueError(f"{self}: mesh axis {a!r} is not in the mesh; mesh axes are {sorted(mesh)}")
        if sizes is not None:
            full = self._sizes(sizes)
            for d in self.dims:
                k = math.prod(mesh[a] for a in d.axes)
                if full[d.name] % k:
                    raise ValueError(
                        f"sizes: {self}: dimension {d.name}={full[d.name]} is not divisible by the "
                        f"{k} shards of mesh axes {''.join(d.axes)}"
                    )
        return self

    def _sizes(self, sizes: Sizes) -> dict[str, int]:
        if isinstance(sizes, (str, bytes)):
            raise TypeError(f"sizes must be a dict of dimension sizes or a sequence; got {sizes!r}")
        if isinstance(sizes, Mapping):
            missing = [n for n in self.dim_names if n not in sizes]
            if missing:
                raise ValueError(f"sizes lacks dimension(s) {missing} of {self}; give sizes for {self.dim_names}")
            out = {n: sizes[n] for n in self.dim_names}
        else:
            try:
                seq = list(sizes)
            except TypeError:
                raise TypeError(
                    f"sizes must be a dict of dimension sizes or a sequence; got {type(sizes).__name__}"
                ) from None
            if len(seq) != len(self.dims):
                raise ValueError(f"sizes has {len(seq)} entries for the {len(self.dims)} dimensions of {self}")
            out = dict(zip(self.dim_names, seq))
        for n, v in out.items():
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"sizes[{n!r}] (the size of dimension {n}) must be a positive integer; got {v!r}")
        return out

    # -- what each device holds -----------------------------------------------------------------------------
    def shard_shape(self, sizes: Sizes, mesh: Mesh) -> tuple[int, ...]:
        """Shape of the block each device holds: each dimension divided by the sizes of its mesh axes."""
        self.validate(mesh, sizes)
        full = self._sizes(sizes)
        return tuple(full[d.name] // math.prod(mesh[a] for a in d.axes) for d in self.dims)

    def bytes_per_device(self, sizes: Sizes, mesh: Mesh, dtype: str = "bf16") -> float:
        """Bytes of the block each device holds, for elements of ``dtype``."""
        return math.prod(self.shard_shape(sizes, mesh)) * dtype_bytes(dtype)

    def total_bytes(self, sizes: Sizes, mesh: Mesh, dtype: str = "bf16") -> float:
        """Bytes held across the whole mesh (every copy counted): one copy times the replication."""
        return self.bytes_per_device(sizes, mesh, dtype) * math.prod(_check_mesh(mesh).values())

    def replication(self, mesh: Mesh) -> int:
        """How many devices hold each element: the product of the mesh axes the array does not use."""
        self.validate(mesh)
        used = set(self.used_axes)
        return math.prod(s for a, s in _check_mesh(mesh).items() if a not in used)

    def partition_spec(self):
        """The ``jax.sharding.PartitionSpec`` of this sharding (``{U_X}`` has no PartitionSpec and is dropped;
        built by :func:`tpu_notes.compat.partition_spec`, which imports JAX)."""
        entries = []
        for d in self.dims:
            entries.append(None if not d.axes else d.axes[0] if len(d.axes) == 1 else tuple(d.axes))
        return compat.partition_spec(*entries)


_ARRAY_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9]*)\s*\[(.*)\]\s*(\{\s*U_([A-Za-z]+)\s*\})?\s*$")
_DIM_RE = re.compile(r"^([A-Za-z][A-Za-z0-9]*)(?:_([A-Za-z]+))?$")


def parse(text: str | ShardedArray) -> ShardedArray:
    """Parse the notation: ``parse("A[I_X, J_YZ]")``, ``parse("C[I, K]{U_X}")``.

    Dimension names are letters and digits; each mesh axis in a subscript is one letter (``J_YZ`` = ``J`` split
    over ``Y`` then ``Z``). A ``ShardedArray`` passes through unchanged. A mesh axis may split only one dimension
    of one array (``A[I_X, J_X]`` is refused): a device has one coordinate along ``X``, so it cannot hold a
    different block of ``I`` and of ``J`` for it.
    """
    return _parse(text, "text")


def _parse(text, argument: str) -> ShardedArray:
    """:func:`parse`, with error messages that call the input ``argument``."""
    if isinstance(text, ShardedArray):
        return text
    if not isinstance(text, str):
        raise TypeError(f"{argument} must be notation like 'A[I_X, J]' or a ShardedArray; got {type(text).__name__}")
    m = _ARRAY_RE.match(text)
    if not m:
        raise ValueError(
            f"cannot parse {argument} {text!r}: expected NAME[DIM, DIM_AXES, ...] optionally followed by {{U_AXES}}"
        )
    name, body, _, unreduced = m.groups()
    dims = []
    for part in body.split(","):
        dm = _DIM_RE.match(part.strip())
        if not dm:
            raise ValueError(
                f"cannot parse dimension {part.strip()!r} in {argument} {text!r}: expected NAME or NAME_AXES"
            )
        dims.append(Dim(dm.group(1), tuple(dm.group(2) or "")))
    names = [d.name for d in dims]
    if len(set(names)) != len(names):
        raise ValueError(f"{argument} {text!r} repeats a dimension name")
    used = [a for d in dims for a in d.axes] + list(unreduced or "")
    for a in used:
        if used.count(a) > 1:
            raise ValueError(
                f"{argument} {text!r}: mesh axis {a!r} is used twice; each mesh axis may split one dimension"
            )
    return ShardedArray(name, tuple(dims), tuple(unreduced or ""))


_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9]*")


def _check_name(argument: str, value, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{argument} must be {what} (a string); got {type(value).__name__} {value!r}")
    if not _NAME_RE.fullmatch(value):
        raise ValueError(f"{argument} must be {what}: letters and digits, starting with a letter; got {value!r}")
    return value


def _check_axes(argument: str, axes) -> tuple[str, ...]:
    """A tuple of distinct mesh axis names."""
    if isinstance(axes, (str, bytes)) or not isinstance(axes, (tuple, list)):
        raise TypeError(f"{argument} must be a tuple of mesh axis names, e.g. ('X',) or (); got {axes!r}")
    for a in axes:
        if not isinstance(a, str) or not _NAME_RE.fullmatch(a):
            raise ValueError(f"{argument} must hold mesh axis names (letters and digits); got {axes!r}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{argument} {tuple(axes)} names a mesh axis twice")
    return tuple(axes)


def _check_mesh(mesh: Mesh) -> dict[str, int]:
    if not isinstance(mesh, Mapping) or not mesh:
        raise TypeError(f"mesh must be a non-empty dict of axis name -> size, e.g. {{'X': 2, 'Y': 4}}; got {mesh!r}")
    for a, s in mesh.items():
        if not isinstance(a, str) or isinstance(s, bool) or not isinstance(s, int) or s <= 0:
            raise ValueError(f"mesh entries must be axis name -> positive integer size; got {a!r}: {s!r}")
    return dict(mesh)


# --------------------------------------------------------------------------------------------------------------
# Sharded matmuls
# --------------------------------------------------------------------------------------------------------------
#: Kinds of step in a plan: the four collectives, the local matmul, and a free local slice.
STEP_KINDS = _coll.KINDS + ("matmul", "slice")


@dataclass(frozen=True)
class Step:
    """One step of a sharded matmul: a collective, the local matmul, or a local slice (no communication)."""

    kind: str  # "all-gather", "reduce-scatter", "all-reduce", "all-to-all", "matmul" or "slice"
    axes: tuple[str, ...]  # mesh axes the collective runs over (() for the matmul)
    array: str  # the operand in the notation, e.g. "A[I, J_X]"
    result: str  # what it becomes, e.g. "A[I, J]"
    bytes_in: float  # bytes per device before the step
    bytes_out: float  # bytes per device after the step
    nbytes: float  # V: the whole array over the collective's group (the cost model's input), bytes
    group_size: int  # devices in each group (product of the axes' sizes); 1 for local steps
    flops: float = 0.0  # FLOPs per device (the matmul step only)

    @property
    def is_collective(self) -> bool:
        return self.kind in _coll.KINDS

    def __str__(self) -> str:
        if self.kind == "matmul":
            return f"matmul     {self.array} -> {self.result}  ({fmt(self.flops, 'FLOPs')} per device)"
        over = f" over {''.join(self.axes)}" if self.axes else ""
        return (
            f"{self.kind}{over}: {self.array} -> {self.result}  "
            f"({fmt(self.bytes_in, 'B')} -> {fmt(self.bytes_out, 'B')} per device)"
        )


@dataclass(frozen=True)
class StepTime:
    """Predicted time of one step of a plan."""

    step: Step  # the step
    time: float  # seconds (collective: max(bandwidth, latency); matmul: roofline lower bound)
    bound: str  # "bandwidth"/"latency" for a collective, "compute"/"bandwidth" for the matmul, "free"


@dataclass(frozen=True)
class MatmulPlan:
    """How to compute ``lhs · rhs`` on a mesh: the case, the collectives, the FLOPs."""

    lhs: ShardedArray  # left operand as given
    rhs: ShardedArray  # right operand as given
    out: ShardedArray  # the output sharding reached at the end
    case: int  # 1..4, the scaling book's cases (see matmul_plan)
    contracting: str  # name of the contracted dimension
    steps: tuple[Step, ...]  # every step in order, the local matmul included
    mesh: dict = field(repr=False)  # axis name -> size
    sizes: dict = field(repr=False)  # dimension name -> size
    dtype: str = "bf16"  # element dtype of operands and output

    @property
    def collectives(self) -> tuple[Step, ...]:
        """The communication steps only, in order."""
        return tuple(s for s in self.steps if s.is_collective)

    @property
    def flops_per_device(self) -> float:
        """FLOPs each device performs in the local matmul."""
        return sum(s.flops for s in self.steps)

    @property
    def comm_bytes(self) -> float:
        """Sum over collectives of ``nbytes`` (V), the quantity the bandwidth terms are proportional to."""
        return sum(s.nbytes for s in self.collectives)

    def describe(self) -> str:
        """A few lines: the case and each step."""
        lines = [f"{self.lhs} · {self.rhs} -> {self.out}   (case {self.case})"]
        lines += ["  " + str(s) for s in self.steps]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.describe()

    @checked
    def times(self, chip_or_slice, *, hop_latency: NonNegativeFloat | None = None) -> tuple[StepTime, ...]:
        """Predicted time of each step on a chip (every mesh axis a ring with wraparound, ICI links) or on a
        ``tpu_notes.topology.Slice`` (its ``collective_time`` decides per axis, mesh axes named like its axes).

        Collectives use :mod:`tpu_notes.collectives`; the local matmul uses the HBM roofline of the chip.
        ``hop_latency`` is seconds per ICI hop (>= 0; ``None``: the chip's ``hop_latency``, 1 µs).
        """
        slice_ = chip_or_slice if isinstance(chip_or_slice, Slice) else None
        chip = hardware.get_chip(slice_.chip if slice_ is not None else chip_or_slice, "chip_or_slice")
        if hop_latency is None:
            hop_latency = chip.hop_latency if chip.hop_latency is not None else hardware.ICI_HOP_LATENCY
        if self.collectives and slice_ is None and chip.ici_bw_bidi is None:
            raise ValueError(f"chip_or_slice {chip.long_name} has no ICI figure; pass a TPU chip or a Slice")
        out = []
        for s in self.steps:
            if s.kind == "matmul":
                r = roofline.roofline(s.flops, s.bytes_in + s.bytes_out, chip.peak_flops(self.dtype), chip.hbm_bw)
                out.append(StepTime(s, r.lower, r.bound))
            elif s.kind == "slice":
                out.append(StepTime(s, 0.0, "free"))
            else:
                if slice_ is not None:
                    t = slice_.collective_time(
                        s.kind.replace("-", "_"), s.nbytes, tuple(a.lower() for a in s.axes), hop_latency=hop_latency
                    )
                else:
                    if chip.ici_bw_bidi is None:
                        raise ValueError(f"{chip.long_name} has no ICI figure; pass a TPU chip or a Slice")
                    t = _coll.collective_time(
                        s.kind, s.nbytes, [self.mesh[a] for a in s.axes], chip.ici_bw_bidi, hop_latency=hop_latency
                    )
                out.append(StepTime(s, t.total, t.bound))
        return tuple(out)

    @checked
    def total_time(self, chip_or_slice, *, hop_latency: NonNegativeFloat | None = None) -> float:
        """Sum of the step times (no overlap of communication and compute), seconds."""
        return sum(t.time for t in self.times(chip_or_slice, hop_latency=hop_latency))


_COST_WEIGHT = {"all-gather": 1.0, "reduce-scatter": 1.0, "all-reduce": 2.0, "all-to-all": 0.25, "slice": 0.0}


class _Builder:
    """Accumulates steps while tracking the current sharding of an array."""

    def __init__(self, mesh: dict, sizes: dict, dtype: str):
        self.mesh, self.sizes, self.dtype, self.steps = mesh, sizes, dtype, []

    def nbytes(self, arr: ShardedArray) -> float:
        return arr.bytes_per_device({n: self.sizes[n] for n in arr.dim_names}, self.mesh, self.dtype)

    def group(self, axes) -> int:
        return math.prod(self.mesh[a] for a in axes)

    def gather(self, arr: ShardedArray, dim: str, axes: tuple[str, ...]) -> ShardedArray:
        """AllGather ``arr`` over ``axes`` along ``dim`` (those axes leave that dimension)."""
        if not axes:
            return arr
        new = arr.with_dims(**{dim: tuple(a for a in arr.dim(dim).axes if a not in axes)})
        b_in, b_out = self.nbytes(arr), self.nbytes(new)
        self.steps.append(Step("all-gather", tuple(axes), str(arr), str(new), b_in, b_out, b_out, self.group(axes)))
        return new

    def slice(self, arr: ShardedArray, dim: str, axes: tuple[str, ...]) -> ShardedArray:
        """Keep only this device's block along ``dim`` for ``axes`` (free: the data is already there)."""
        new = arr.with_dims(**{dim: tuple(arr.dim(dim).axes) + tuple(axes)})
        self.steps.append(Step("slice", tuple(axes), str(arr), str(new), self.nbytes(arr), self.nbytes(new), 0.0, 1))
        return new

    def all_to_all(self, arr: ShardedArray, axis: str, src: str, dst: str) -> ShardedArray:
        new = arr.with_dims(
            **{src: tuple(a for a in arr.dim(src).axes if a != axis), dst: tuple(arr.dim(dst).axes) + (axis,)}
        )
        b = self.nbytes(arr)
        self.steps.append(Step("all-to-all", (axis,), str(arr), str(new), b, b, b * self.mesh[axis], self.mesh[axis]))
        return new

    def reduce(self, arr: ShardedArray, axes: tuple[str, ...], dim: str | None) -> ShardedArray:
        """ReduceScatter ``{U_axes}`` onto ``dim`` (or AllReduce when ``dim`` is None)."""
        if not axes:
            return arr
        left = tuple(a for a in arr.unreduced if a not in axes)
        new = ShardedArray(arr.name, arr.dims, left)
        if dim is not None:
            new = new.with_dims(**{dim: tuple(new.dim(dim).axes) + tuple(axes)})
        kind = "reduce-scatter" if dim is not None else "all-reduce"
        b_in = self.nbytes(arr)
        self.steps.append(Step(kind, tuple(axes), str(arr), str(new), b_in, self.nbytes(new), b_in, self.group(axes)))
        return new

    def reshard(self, arr: ShardedArray, target: ShardedArray) -> ShardedArray:
        """Move ``arr`` (fully reduced) to the sharding of ``target``: slices, then AllToAlls, then AllGathers."""
        where_now = {a: d.name for d in arr.dims for a in d.axes}
        where_then = {a: d.name for d in target.dims for a in d.axes}
        # free slices first (they shrink the data)
        for d in target.dims:
            new_axes = tuple(a for a in d.axes if a not in where_now)
            if new_axes:
                arr = self.slice(arr, d.name, new_axes)
        for a in sorted(where_now, key=lambda x: list(self.mesh).index(x)):
            if a in where_then and where_then[a] != where_now[a]:
                arr = self.all_to_all(arr, a, where_now[a], where_then[a])
        for d in arr.dims:
            drop = tuple(a for a in d.axes if a not in where_then)
            if drop:
                arr = self.gather(arr, d.name, drop)
        return arr


def matmul_plan(lhs, rhs, out=None, *, mesh: Mesh, sizes: Mapping[str, int], dtype: str = "bf16") -> MatmulPlan:
    """Plan ``lhs · rhs`` contracting the one dimension name they share, e.g.
    ``matmul_plan("A[I_X, J]", "B[J, K_Y]", mesh={"X": 2, "Y": 4}, sizes={"I": 64, "J": 128, "K": 256})``.

    The cases (scaling book, sharding chapter):

    1. the contracting dimension is split in neither operand: multiply locally, no communication;
    2. it is split in one operand: AllGather that operand along it, or slice the replicated other operand,
       multiply locally and reduce the partial sums, whichever moves fewer bytes (weighting an AllReduce 2x and an
       AllToAll 1/4 as the cost model does); on a tie, the one whose largest per-device array is smaller;
    3. it is split identically in both: the local matmul gives partial sums ``{U_axes}``; AllReduce them, or
       ReduceScatter them onto an output dimension that ``out`` splits over those axes;
    4. both operands split non-contracting dimensions over the same mesh axis: AllGather one of them first
       (the one whose split ``out`` does not keep; else the smaller one).

    ``out`` (notation, optional) is the output sharding wanted; its dimension names must be the non-contracted
    dimensions. When it differs from what the matmul produces, resharding steps follow (slices, AllToAlls,
    AllGathers). Without ``out``, partial sums are AllReduced and nothing else moves.
    """
    lhs, rhs = _parse(lhs, "lhs"), _parse(rhs, "rhs")
    out = _parse(out, "out") if out is not None else None
    mesh = _check_mesh(mesh)
    dtype = canonical_dtype(dtype)
    k = _check_operands(lhs, rhs, out, mesh, sizes)
    out_name = out.name if out is not None else "C"
    b = _Builder(mesh, dict(sizes), dtype)

    # ---- case 4: the same mesh axis splits a free dimension of both operands
    clash = {a for d in lhs.dims if d.name != k for a in d.axes} & {a for d in rhs.dims if d.name != k for a in d.axes}
    la, ra = lhs.dim(k).axes, rhs.dim(k).axes
    if clash:
        case = 4
    elif la and ra:
        case = 3
    elif la or ra:
        case = 2
    else:
        case = 1
    lhs_now, rhs_now = _gather_clash(b, lhs, rhs, k, clash, out) if clash else (lhs, rhs)

    la, ra = lhs_now.dim(k).axes, rhs_now.dim(k).axes
    if la and ra and la != ra:
        raise ValueError(
            f"{lhs} and {rhs} split the contracting dimension {k} differently ({''.join(la)} vs "
            f"{''.join(ra)}); reshard one of them first"
        )
    if bool(la) != bool(ra):
        lhs_now, rhs_now = _gather_or_slice(b, lhs_now, rhs_now, k, out)

    local = _local_output(lhs_now, rhs_now, k, out_name)
    _append_local_matmul(b, lhs_now, rhs_now, local, k)
    final = _finish(b, local, out)
    return MatmulPlan(
        lhs=lhs,
        rhs=rhs,
        out=final,
        case=case,
        contracting=k,
        steps=tuple(b.steps),
        mesh=mesh,
        sizes=dict(sizes),
        dtype=dtype,
    )


def _check_operands(lhs: ShardedArray, rhs: ShardedArray, out, mesh: Mesh, sizes) -> str:
    """Check the operands (and ``out``) of :func:`matmul_plan` against the mesh and sizes; return the one
    dimension name they contract."""
    if not isinstance(sizes, Mapping):
        raise TypeError(f"sizes must be a dict of dimension name -> size; got {type(sizes).__name__}")
    for argument, arr in (("lhs", lhs), ("rhs", rhs)):
        for n in arr.dim_names:
            if n not in sizes:
                raise ValueError(f"sizes lacks dimension {n!r} of {argument} {arr}")
        for a in arr.used_axes:
            if a not in mesh:
                raise ValueError(f"{argument} {arr}: mesh axis {a!r} is not in the mesh; mesh axes are {sorted(mesh)}")
    lhs.validate(mesh, sizes)
    rhs.validate(mesh, sizes)
    if lhs.unreduced or rhs.unreduced:
        raise ValueError("operands must be fully reduced (no {U_...}); reduce them first")
    shared = [n for n in lhs.dim_names if n in rhs.dim_names]
    if len(shared) != 1:
        raise ValueError(f"{lhs} and {rhs} must share exactly one (contracting) dimension name; they share {shared}")
    k = shared[0]
    out_names = [d.name for d in lhs.dims if d.name != k] + [d.name for d in rhs.dims if d.name != k]
    if out is not None:
        if sorted(out.dim_names) != sorted(out_names):
            raise ValueError(f"out {out} must have the dimensions {out_names} (the non-contracted ones)")
        if out.unreduced:
            raise ValueError("out must be fully reduced; use the plan's intermediate for partial sums")
        out.validate(mesh, sizes)
    return k


def _gather_clash(b: _Builder, lhs: ShardedArray, rhs: ShardedArray, k: str, clash: set, out):
    """Case 4 of :func:`matmul_plan`: AllGather the ``clash`` axes out of one operand, the one whose split ``out``
    keeps on fewer dimensions (else the smaller one); return the operands after."""
    want = {a: dd.name for dd in (out.dims if out is not None else ()) for a in dd.axes}

    def keeps(arr):  # how many clashing axes of arr the output keeps on the same dimension
        return sum(1 for d in arr.dims if d.name != k for a in d.axes if a in clash and want.get(a) == d.name)

    kl, kr = keeps(lhs), keeps(rhs)
    if kl != kr:
        gather_rhs = kl > kr
    else:
        gather_rhs = b.nbytes(rhs) <= b.nbytes(lhs)
    victim = rhs if gather_rhs else lhs
    for d in victim.dims:
        drop = tuple(a for a in d.axes if a in clash)
        if drop:
            victim = b.gather(victim, d.name, drop)
    return (lhs, victim) if gather_rhs else (victim, rhs)


def _gather_or_slice(b: _Builder, lhs: ShardedArray, rhs: ShardedArray, k: str, out):
    """Case 2 of :func:`matmul_plan` (``k`` split in one operand only): AllGather the split operand, or slice the
    replicated one and reduce partial sums afterwards, whichever the cost model prices lower; return the operands
    after."""
    la, ra = lhs.dim(k).axes, rhs.dim(k).axes
    split, other = (lhs, rhs) if la else (rhs, lhs)
    axes = la or ra
    busy = {a for d in other.dims for a in d.axes}
    out_name = out.name if out is not None else "C"

    def cost(strategy: str) -> tuple[float, float]:
        trial = _Builder(b.mesh, dict(b.sizes), b.dtype)
        if strategy == "gather":
            s2, o2 = trial.gather(split, k, axes), other
        else:
            s2, o2 = split, trial.slice(other, k, axes)
        l2, r2 = (s2, o2) if la else (o2, s2)
        _finish(trial, _local_output(l2, r2, k, out_name), out)
        weighted = sum(_COST_WEIGHT[s.kind] * s.nbytes for s in trial.steps)
        peak = max(s.bytes_out for s in trial.steps) if trial.steps else 0.0
        return weighted, peak  # ties on bytes moved go to the smaller peak memory per device

    if not (set(axes) & busy) and cost("slice") < cost("gather"):
        other = b.slice(other, k, axes)
    else:
        split = b.gather(split, k, axes)
    return (split, other) if la else (other, split)


def _append_local_matmul(b: _Builder, lhs: ShardedArray, rhs: ShardedArray, local: ShardedArray, k: str) -> None:
    """Record the per-device matmul ``lhs · rhs -> local`` (contracting ``k``) and its FLOPs as a plan step."""
    fl = (
        2.0
        * math.prod(lhs.shard_shape(b.sizes, b.mesh))
        * math.prod(n for d, n in zip(rhs.dims, rhs.shard_shape(b.sizes, b.mesh)) if d.name != k)
    )
    b.steps.append(
        Step(
            "matmul",
            (),
            f"{lhs} · {rhs}",
            str(local),
            b.nbytes(lhs) + b.nbytes(rhs),
            b.nbytes(local.renamed(local.name)),
            0.0,
            1,
            fl,
        )
    )


def _local_output(lhs: ShardedArray, rhs: ShardedArray, k: str, name: str) -> ShardedArray:
    dims = tuple(d for d in lhs.dims if d.name != k) + tuple(d for d in rhs.dims if d.name != k)
    return ShardedArray(name, dims, tuple(lhs.dim(k).axes))


def _finish(b: _Builder, local: ShardedArray, out: ShardedArray | None) -> ShardedArray:
    """Reduce partial sums (ReduceScatter onto a dimension ``out`` splits over them, else AllReduce), then reshard."""
    arr = local
    if arr.unreduced:
        if out is None:
            arr = b.reduce(arr, arr.unreduced, None)
        else:
            want = {a: d.name for d in out.dims for a in d.axes}
            by_dim: dict[str, list[str]] = {}
            rest = []
            for a in arr.unreduced:
                dname = want.get(a)
                # scatter onto dname only when that dimension is split by exactly out's axes before a
                if dname is not None and _prefix_ok(
                    arr.dim(dname).axes + tuple(by_dim.get(dname, [])), out.dim(dname).axes, a
                ):
                    by_dim.setdefault(dname, []).append(a)
                else:
                    rest.append(a)
            for dname, axes in by_dim.items():
                arr = b.reduce(arr, tuple(axes), dname)
            arr = b.reduce(arr, tuple(rest), None)
    if out is not None:
        if arr.dim_names != out.dim_names:
            arr = ShardedArray(arr.name, tuple(arr.dim(n) for n in out.dim_names), arr.unreduced)
        arr = b.reshard(arr, out)
        arr = arr.renamed(out.name)
    return arr


def _prefix_ok(current: tuple[str, ...], target: tuple[str, ...], axis: str) -> bool:
    """True when appending ``axis`` to ``current`` keeps it a prefix of ``target``."""
    new = tuple(current) + (axis,)
    return tuple(target[: len(new)]) == new
