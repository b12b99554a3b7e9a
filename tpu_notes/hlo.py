"""Read what XLA compiled: the collectives in an HLO module and XLA's own cost analysis (Chapters 3 and 9).

This is the package's one reader of HLO text. :func:`parse_module` reads a module, in either of XLA's printings
(``compiled.as_text()`` or the short parsable one), into an :class:`HloModule`: every :class:`HloInstruction` with
its name, result shape, opcode, operand names and attributes, the computations and what each instruction calls.
Everything else that reads HLO builds on it: :func:`collectives`, :func:`normalize_cpu_collectives`,
:func:`single_op_module` (one instruction cut out as a module, what :mod:`tpu_notes.profile` costs op by op), and
:mod:`tpu_notes.parallel`'s split of combined collectives.

``collectives(compiled)`` parses the text of a compiled (partitioned, per-device) HLO module and returns every
collective with its operand and result shapes, bytes per device and replica groups. It understands the
synchronous ops (``all-gather``), the asynchronous pairs (``all-gather-start`` / ``-done``; the ``-done`` is
skipped), tuple-shaped results, and the three spellings of replica groups: explicit ``{{0,1},{2,3}}``, iota
``[2,4]<=[8]`` (optionally with a transpose, ``[4,2]<=[2,4]T(1,0)``), and the mesh form
``mesh['axis_0'=2,'axis_1'=4] {'axis_1'}``. ``mesh_axes(groups, mesh)`` maps groups back to mesh axis names.

On CPU, XLA's SPMD partitioner spells a reduce-scatter as an ``all-reduce`` followed by a ``dynamic-slice``
(there is no reduce-scatter-creating pass in the CPU pipeline); :func:`normalize_cpu_collectives` folds that
back (Chapter 3 explains it).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated

from .units import Bool, OneOf, capped, checked

#: Most devices a module's replica groups or a mesh may name, and most axes a mesh may have (mesh_axes tries every
#: subset of the axes).
MAX_DEVICES = 2**24
MAX_MESH_AXES = 8
#: Largest dimension of a matmul oracle case (compile_case allocates its arrays).
MAX_CASE_DIM = 2**14

#: Collective opcodes recognised (the ``-start`` forms map to these).
KINDS = (
    "all-gather",
    "reduce-scatter",
    "all-reduce",
    "all-to-all",
    "collective-permute",
    "collective-broadcast",
    "ragged-all-to-all",
)

#: Bytes per element of HLO element types.
HLO_DTYPE_BYTES = {
    "pred": 1,
    "s4": 0.5,
    "u4": 0.5,
    "s8": 1,
    "u8": 1,
    "s16": 2,
    "u16": 2,
    "s32": 4,
    "u32": 4,
    "s64": 8,
    "u64": 8,
    "f16": 2,
    "bf16": 2,
    "f32": 4,
    "f64": 8,
    "c64": 8,
    "c128": 16,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "f8e4m3": 1,
    "f8e4m3b11fnuz": 1,
    "f8e5m2fnuz": 1,
    "f8e4m3fnuz": 1,
    "f4e2m1fn": 0.5,
}


@dataclass(frozen=True)
class HloShape:
    """One array shape in HLO text, e.g. ``f32[64,128]``."""

    dtype: str  # HLO element type, e.g. "f32", "bf16"
    dims: tuple[int, ...]  # dimension sizes

    @property
    def nbytes(self) -> float:
        return math.prod(self.dims) * HLO_DTYPE_BYTES.get(self.dtype, 0)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@dataclass(frozen=True)
class HloCollective:
    """One collective op of a compiled (per-device) HLO module."""

    kind: str  # "all-gather", "all-reduce", ... (without -start)
    name: str  # the instruction name, e.g. "all-gather.3"
    operand_shapes: tuple[HloShape, ...]  # per-device inputs
    result_shapes: tuple[HloShape, ...]  # per-device outputs (a tuple result gives several)
    replica_groups: tuple[tuple[int, ...], ...]  # device ids of each group; () for collective-permute
    source_target_pairs: tuple[tuple[int, int], ...] = ()  # collective-permute only
    dimensions: tuple[int, ...] = ()  # all-gather / all-to-all / reduce-scatter dimension(s)
    asynchronous: bool = False  # True for the -start form

    @property
    def dtype(self) -> str:
        """Element type of the (first) result."""
        return self.result_shapes[0].dtype if self.result_shapes else ""

    @property
    def operand_bytes(self) -> float:
        """Bytes per device going in."""
        return sum(s.nbytes for s in self.operand_shapes)

    @property
    def result_bytes(self) -> float:
        """Bytes per device coming out."""
        return sum(s.nbytes for s in self.result_shapes)

    @property
    def bytes(self) -> float:
        """The larger of operand and result bytes per device (the gathered or the unreduced size)."""
        return max(self.operand_bytes, self.result_bytes)

    @property
    def group_size(self) -> int:
        return len(self.replica_groups[0]) if self.replica_groups else 0

    def __str__(self) -> str:
        ops = ", ".join(map(str, self.operand_shapes))
        res = ", ".join(map(str, self.result_shapes))
        return f"{self.kind}({ops}) -> {res} groups={[list(g) for g in self.replica_groups]}"


_SHAPE_RE = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,\s]*)\]")
#: One instruction line, in both of XLA's printings: the long one of ``compiled.as_text()`` (``%name``, operand
#: shapes, metadata) and the short parsable one (bare names). A tuple result shape may nest; ``.*?`` stops at the
#: first ``) opcode(`` (the ``/*index=5*/`` comments are stripped before matching).
_INSTR_RE = re.compile(
    r"^\s*(?P<root>ROOT\s+)?%?(?P<name>[\w.\-]+)\s*=\s*(?P<shape>\(.*?\)|[a-z][a-z0-9]*\[[^\]]*\](?:\{[^}]*\})?)"
    r"\s+(?P<op>[a-z][\w\-]*)\((?P<rest>.*)$"
)
#: The first line of a computation: ``%add (a: f32[], b: f32[]) -> f32[] {``, ``ENTRY main.5 {``.
_HEADER_RE = re.compile(r"^\s*(?P<entry>ENTRY\s+)?%?(?P<name>[\w.\-]+)(?:\s.*)?\{\s*$")
_TOKEN_RE = re.compile(r"[A-Za-z_][\w.\-]*")
#: Opcodes whose parenthesised "operands" are literals, not instructions: ``parameter(0)``, ``constant(1.5)``.
_LITERAL_OPCODES = ("parameter", "constant")


def _shapes(text: str) -> tuple[HloShape, ...]:
    out = []
    for dt, dims in _SHAPE_RE.findall(text):
        if dt in HLO_DTYPE_BYTES:
            out.append(HloShape(dt, tuple(int(x) for x in dims.replace(" ", "").split(",") if x)))
    return tuple(out)


def _split_call(rest: str) -> tuple[str, str]:
    """Split ``a, b), attr=...`` into (operands, attributes) at the parenthesis closing the call."""
    depth = 1
    for i, ch in enumerate(rest):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return rest[:i], rest[i + 1 :]
    return rest, ""


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside any (), [] or {} (an operand list: ``f32[8,16]{1,0} %p, %q``)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _strip_comments(text: str) -> str:
    """Drop the ``/*index=5*/`` comments XLA prints inside long tuple shapes (their ``=`` cut the shape short, and
    the instruction, e.g. a combined all-reduce of every gradient, was silently skipped)."""
    return re.sub(r"/\*.*?\*/", "", text)


def _attr(attrs: str, key: str) -> str | None:
    """The raw value of ``key=`` in an attribute string (balanced braces/brackets)."""
    m = re.search(r"\b" + re.escape(key) + r"=", attrs)
    if not m:
        return None
    i, depth, start = m.end(), 0, m.end()
    while i < len(attrs):
        ch = attrs[i]
        if ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
        elif ch == "," and depth == 0:
            # the mesh form continues after a space with {'axis'}: keep it
            if not attrs[start:i].startswith("mesh["):
                break
            if attrs[start:i].rstrip().endswith("}"):
                break
        i += 1
    return attrs[start:i].strip()


@dataclass(frozen=True)
class HloInstruction:
    """One instruction of an HLO module, as :func:`parse_module` reads its line."""

    name: str  # instruction name without "%", e.g. "all-gather.3"
    shape: str  # result shape as printed (layout kept, /*index=N*/ comments dropped): "f32[8]{0}"
    opcode: str  # e.g. "fusion", "all-gather-start", "get-tuple-element"
    operands: tuple[str, ...]  # names of the operand instructions, in order (() for parameter and constant)
    operand_text: str  # the operand list as printed (the long printing puts each operand's shape in it)
    attributes: str  # the text after the operand list, e.g. ", replica_groups={{0,1}}, to_apply=%add"
    computation: str  # name of the computation holding it ("" for a line outside any computation)
    root: bool  # True for the ROOT of its computation
    text: str  # the whole line, stripped

    @property
    def result_shapes(self) -> tuple[HloShape, ...]:
        """The array shapes of the result (several for a tuple)."""
        return _shapes(self.shape)

    @property
    def printed_operand_shapes(self) -> tuple[HloShape, ...]:
        """The shapes printed in the operand list (empty in the short printing, which gives names only)."""
        return _shapes(self.operand_text)

    def attribute(self, key: str) -> str | None:
        """The raw text of attribute ``key`` (``"{{0,1},{2,3}}"`` for ``replica_groups``), None when absent."""
        if not isinstance(key, str) or not key:
            raise TypeError(f"key must be an attribute name such as 'replica_groups'; got {key!r}")
        return _attr(self.attributes, key)


@dataclass(frozen=True)
class HloModule:
    """An HLO module read by :func:`parse_module`: its computations and every instruction in text order."""

    name: str  # module name, e.g. "jit_step" ("" without an HloModule line)
    entry: str | None  # name of the ENTRY computation (None when there is none)
    num_partitions: int | None  # devices the SPMD program runs on, when the header says
    instructions: tuple[HloInstruction, ...]  # every instruction of every computation, in text order
    computations: dict  # computation name -> its instructions (a tuple), in order
    computation_text: dict  # computation name -> its text, header to closing brace

    def computation(self, name: str) -> tuple[HloInstruction, ...]:
        """The instructions of computation ``name``, in order."""
        if name not in self.computations:
            raise ValueError(
                f"name must be a computation of the module, one of {sorted(self.computations)}; got {name!r}"
            )
        return self.computations[name]

    def callees(self, instruction: HloInstruction) -> tuple[str, ...]:
        """The computations ``instruction`` calls (``calls=``, ``to_apply=``, ``body=``, ...), in order of mention;
        the entry computation excluded."""
        if not isinstance(instruction, HloInstruction):
            raise TypeError(f"instruction must be an HloInstruction; got {type(instruction).__name__}")
        attrs = re.sub(r'"(?:[^"\\]|\\.)*"', "", instruction.attributes)  # strings (metadata, configs) name nothing
        return tuple(
            dict.fromkeys(t for t in _TOKEN_RE.findall(attrs) if t in self.computation_text and t != self.entry)
        )

    def called_computations(self, instruction: HloInstruction) -> tuple[str, ...]:
        """Every computation ``instruction`` needs, directly or through the computations it calls, ordered so that
        each comes after the ones it calls (the order a module's text defines them in)."""
        called: list[str] = []
        todo = list(self.callees(instruction))
        while todo:
            c = todo.pop()
            if c in called:
                continue
            called.append(c)
            todo += [t for i in self.computation(c) for t in self.callees(i) if t not in called]
        return tuple(reversed(called))


def _text_of(compiled_or_text, argument: str = "compiled_or_hlo_text") -> str:
    if isinstance(compiled_or_text, str):
        return compiled_or_text
    if hasattr(compiled_or_text, "as_text"):
        text = compiled_or_text.as_text()
        if isinstance(text, str):
            return text
    raise TypeError(
        f"{argument} must be HLO text or a compiled JAX object with .as_text(); got {type(compiled_or_text).__name__}"
    )


def _module_of(compiled_or_text, argument: str = "compiled_or_hlo_text") -> HloModule:
    if isinstance(compiled_or_text, HloModule):
        return compiled_or_text
    return _parse_text(_text_of(compiled_or_text, argument))


#: Most characters of HLO text parse_module reads (a 10^5-op program prints about 10^7 characters).
MAX_TEXT_CHARS = 2**28


def parse_module(compiled_or_hlo_text) -> HloModule:
    """Read HLO text (``compiled.as_text()``, the short parsable printing, or a compiled object) into an
    :class:`HloModule`: every instruction with its name, result shape, opcode, operand names and attributes, and
    the text of each computation. The one reader of HLO text in the package: :func:`collectives`,
    :func:`normalize_cpu_collectives`, :mod:`tpu_notes.parallel` and :mod:`tpu_notes.profile` all use it.
    ``/*index=5*/`` comments are dropped from the parsed fields (``text`` and ``computation_text`` keep them);
    lines that are neither instructions nor computation headers are skipped."""
    return _module_of(compiled_or_hlo_text)


#: The start of an instruction line: ``name = shape`` (a tuple shape opens with "(", an array with ``dtype[``).
_START_RE = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?:\(|[a-z][a-z0-9]*\[)")


def _join_wrapped(text: str) -> list[str]:
    """The lines of ``text`` with hand-wrapped instructions joined back into one line each (XLA's tests and
    papers wrap long instructions; XLA's own printing never does): a line that starts no instruction, opens no
    computation and closes none continues the instruction above it."""
    out: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        cont = (
            out
            and stripped
            and stripped != "}"
            and not stripped.startswith(("//", "HloModule", "ENTRY"))
            and not _START_RE.match(line)
            and not (_HEADER_RE.match(line) and "=" not in line.split("(")[0])
            and _START_RE.match(out[-1])
        )
        if cont:
            out[-1] = out[-1].rstrip() + " " + stripped
        else:
            out.append(line)
    return out


def _parse_text(text: str) -> HloModule:
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"compiled_or_hlo_text holds {len(text)} characters; at most {MAX_TEXT_CHARS} are read")
    head = re.search(r"^\s*HloModule\s+([^\s,]+)", text, re.M)
    num = re.search(r"num_partitions=(\d+)", text)
    instructions, blocks, entry = [], {}, None
    comp, comp_lines = "", []
    for line in _join_wrapped(text):
        im = _INSTR_RE.match(_strip_comments(line))
        if im is None:
            hm = _HEADER_RE.match(line)
            if hm and "=" not in line.split("(")[0]:
                comp, comp_lines = hm.group("name"), [line]
                if hm.group("entry"):
                    entry = comp
                continue
            if comp and line.strip() == "}":
                comp_lines.append(line)
                blocks[comp] = "\n".join(comp_lines).strip()
                comp, comp_lines = "", []
            continue
        if comp:
            comp_lines.append(line)
        op, (operand_text, attrs) = im.group("op"), _split_call(im.group("rest"))
        operands = () if op in _LITERAL_OPCODES else tuple(p.split()[-1].lstrip("%") for p in _split_top(operand_text))
        instructions.append(
            HloInstruction(
                name=im.group("name"),
                shape=im.group("shape"),
                opcode=op,
                operands=operands,
                operand_text=operand_text,
                attributes=attrs,
                computation=comp,
                root=bool(im.group("root")),
                text=line.strip(),
            )
        )
    by_computation: dict[str, list[HloInstruction]] = {c: [] for c in blocks}
    for ins in instructions:
        if ins.computation in by_computation:
            by_computation[ins.computation].append(ins)
    return HloModule(
        name=head.group(1) if head else "",
        entry=entry,
        num_partitions=int(num.group(1)) if num else None,
        instructions=tuple(instructions),
        computations={c: tuple(v) for c, v in by_computation.items()},
        computation_text=blocks,
    )


def single_op_module(module, name: str) -> str | None:
    """Instruction ``name`` of the entry computation of ``module`` (an :class:`HloModule` or what
    :func:`parse_module` reads) cut out into an HLO module of its own: its operands become parameters, the
    computations it calls come along, control dependencies are dropped. None when an operand's shape is unknown.
    What :func:`tpu_notes.profile.op_costs` hands to XLA's cost analysis, one op at a time."""
    module = _module_of(module, "module")
    if module.entry is None:
        raise ValueError("module has no ENTRY computation")
    entry = module.computation(module.entry)
    shapes = {i.name: i.shape for i in entry}
    found = [i for i in entry if i.name == name]
    if not found:
        raise ValueError(f"name must be an instruction of the entry computation; got {name!r}")
    ins = found[0]
    params = []
    for k, o in enumerate(dict.fromkeys(ins.operands)):
        if o not in shapes:
            return None
        params.append(f"  {o} = {shapes[o]} parameter({k})")
    body = ins.text[5:] if ins.text.startswith("ROOT ") else ins.text
    body = re.sub(r",\s*control-predecessors=\{[^}]*\}", "", body)
    return "\n\n".join(
        [f"HloModule single_{ins.name}"]
        + [module.computation_text[c] for c in module.called_computations(ins)]
        + ["ENTRY e {\n" + "\n".join(params) + f"\n  ROOT {body}\n}}"]
    )


@checked
def parse_replica_groups(
    text: str | None, num_devices: capped(MAX_DEVICES) | None = None
) -> tuple[tuple[int, ...], ...]:
    """Expand any spelling of ``replica_groups`` into explicit groups of device ids.

    ``{{0,1},{2,3}}`` (explicit), ``[2,4]<=[8]`` and ``[4,2]<=[2,4]T(1,0)`` (iota), ``mesh['a'=2,'b'=4] {'b'}``
    (mesh axes). ``{}`` (or nothing) means one group of all ``num_devices`` devices.

    The whole text must be one of these spellings: truncated or malformed text (``{{0,1},{2,``), a device listed
    twice, or (with ``num_devices``) a device id out of range raises ``ValueError`` rather than a wrong answer.
    """
    import numpy as np

    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be the replica_groups string of an HLO op, or None; got {type(text).__name__}")
    if text is None or text.strip() in ("", "{}"):
        if num_devices is None:
            return ()
        return (tuple(range(num_devices)),)
    groups = _parse_groups(text.strip(), np)
    ids = [i for g in groups for i in g]
    if len(set(ids)) != len(ids):
        raise ValueError(f"text {text!r} lists a device in more than one group (or twice in one)")
    if num_devices is not None and any(i >= num_devices for i in ids):
        raise ValueError(f"text {text!r} names device {max(ids)}, but num_devices={num_devices}")
    return groups


_INT_LIST = r"\s*\d+\s*(?:,\s*\d+\s*)*"
_EXPLICIT_RE = re.compile(r"^\{\s*(?:\{(?:" + _INT_LIST + r")?\}\s*(?:,\s*\{(?:" + _INT_LIST + r")?\}\s*)*)?\}$")
_IOTA_RE = re.compile(r"^\[(" + _INT_LIST + r")\]\s*<=\s*\[(" + _INT_LIST + r")\](?:\s*T\((" + _INT_LIST + r")\))?$")
_MESH_IOTA_RE = re.compile(r"^mesh\[([^\]]*)\],\s*device_ids=\(\[([0-9,\s]*)\](?:T\(([0-9,\s]*)\))?\)\s*(\{.*\})$")
_MESH_RE = re.compile(r"^mesh\[(.*?)\]\s*\{(\s*(?:'[^']+'\s*(?:,\s*'[^']+'\s*)*)?)\}$")


def _parse_groups(t: str, np) -> tuple[tuple[int, ...], ...]:
    """The groups of a non-empty replica_groups spelling ``t`` (whole-string matches only)."""
    text = t
    if t.startswith("mesh["):
        iota = _MESH_IOTA_RE.match(t)
        if iota:  # mesh['a'=4,'b'=2], device_ids=([2,4]T(1,0)) {'a'}: the device order is an iota; write it out
            src = [int(x) for x in iota.group(2).split(",") if x.strip()]
            ids = np.arange(math.prod(src)).reshape(src)
            if iota.group(3):
                ids = ids.transpose([int(x) for x in iota.group(3).split(",") if x.strip()])
            t = f"mesh[{iota.group(1)},device_ids=[{','.join(str(int(x)) for x in ids.ravel())}]] {iota.group(4)}"
        m = _MESH_RE.match(t)
        if not m:
            raise ValueError(f"cannot parse text {text!r} as mesh replica groups (truncated?)")
        body = m.group(1)
        dev_ids = None
        dm = re.search(r"device_ids=\[([0-9,\s]*)\]", body)
        if dm:
            dev_ids = [int(x) for x in dm.group(1).split(",") if x.strip()]
            body = body[: dm.start()]
        axes = re.findall(r"'([^']+)'\s*=\s*(\d+)", body)
        if not axes or re.sub(r"'[^']+'\s*=\s*\d+", "", body).strip(" ,"):
            raise ValueError(f"cannot parse the mesh of text {text!r}: expected mesh['a'=2,'b'=4]")
        names = [a for a, _ in axes]
        shape = [int(s) for _, s in axes]
        chosen = re.findall(r"'([^']+)'", m.group(2))
        for c in chosen:
            if c not in names:
                raise ValueError(f"text {text!r}: replica group axis {c!r} is not in the mesh {names}")
        n = math.prod(shape)
        if dev_ids is not None and len(dev_ids) != n:
            raise ValueError(f"text {text!r}: device_ids lists {len(dev_ids)} devices for a mesh of {n}")
        ids = np.asarray(dev_ids if dev_ids is not None else range(n)).reshape(shape)
        keep = [names.index(c) for c in chosen]
        other = [i for i in range(len(names)) if i not in keep]
        arr = ids.transpose(other + keep).reshape(-1, math.prod(shape[i] for i in keep) if keep else 1)
        return tuple(tuple(int(x) for x in row) for row in arr)
    if t.startswith("["):
        m = _IOTA_RE.match(t)
        if not m:
            raise ValueError(f"cannot parse text {text!r} as iota replica groups [G,S]<=[N] (truncated?)")
        out_shape = [int(x) for x in m.group(1).split(",") if x.strip()]
        src = [int(x) for x in m.group(2).split(",") if x.strip()]
        if math.prod(out_shape) != math.prod(src) or len(out_shape) < 1 or math.prod(src) > 2**24:
            raise ValueError(
                f"text {text!r}: the group shape {out_shape} does not hold the {math.prod(src)} devices of the iota"
            )
        arr = np.arange(math.prod(src)).reshape(src)
        if m.group(3):
            perm = [int(x) for x in m.group(3).split(",") if x.strip()]
            if sorted(perm) != list(range(len(src))):
                raise ValueError(f"text {text!r}: T{tuple(perm)} is not a permutation of the {len(src)} iota axes")
            arr = arr.transpose(perm)
        arr = arr.reshape(out_shape)
        return tuple(tuple(int(x) for x in row) for row in arr.reshape(out_shape[0], -1))
    if t.startswith("{"):
        if not _EXPLICIT_RE.match(t):
            raise ValueError(
                f"cannot parse text {text!r} as explicit replica groups {{{{0,1}},{{2,3}}}} (truncated or malformed)"
            )
        groups = re.findall(r"\{([0-9,\s]*)\}", t[1:-1])
        return tuple(tuple(int(x) for x in g.split(",") if x.strip()) for g in groups)
    raise ValueError(f"cannot parse text {text!r} as replica groups: expected {{{{...}}}}, [..]<=[..] or mesh[..]")


def collectives(compiled_or_hlo_text) -> list[HloCollective]:
    """Every collective in a compiled module (or its HLO text), in program order, with per-device shapes.

    ``compiled_or_hlo_text`` is ``jax.jit(f).lower(...).compile()``, the string of ``.as_text()``, or the
    :class:`HloModule` :func:`parse_module` read from either.
    """
    module = _module_of(compiled_or_hlo_text)
    num = module.num_partitions
    shapes_of: dict[str, tuple[HloShape, ...]] = {}  # result shapes of the instructions read so far, by name
    found = []
    for ins in module.instructions:
        name, shape_text, op, attrs = ins.name, ins.shape, ins.opcode, ins.attributes
        result = ins.result_shapes
        shapes_of[name] = result
        base = op[:-6] if op.endswith("-start") else op
        if op.endswith("-done") or base not in KINDS:
            continue
        operand_shapes = ins.printed_operand_shapes
        if not operand_shapes:
            operand_shapes = tuple(s for n in ins.operands for s in shapes_of.get(n, ()))
        if (
            op.endswith("-start")
            and shape_text.startswith("(")
            and base in ("all-gather", "collective-permute", "all-to-all")
        ):
            # async start ops return (operands..., results...[, context]): keep the results part
            n_in = len(operand_shapes)
            result = result[n_in : 2 * n_in] if len(result) >= 2 * n_in else result[-1:]
        pairs = ()
        pt = _attr(attrs, "source_target_pairs")
        if pt:
            pairs = tuple((int(a), int(b)) for a, b in re.findall(r"\{\s*(\d+)\s*,\s*(\d+)\s*\}", pt))
        groups = () if base == "collective-permute" else parse_replica_groups(_attr(attrs, "replica_groups"), num)
        dims_text = _attr(attrs, "dimensions")
        dims = tuple(int(x) for x in re.findall(r"\d+", dims_text)) if dims_text else ()
        found.append(
            HloCollective(
                kind=base,
                name=name,
                operand_shapes=operand_shapes,
                result_shapes=result,
                replica_groups=groups,
                source_target_pairs=pairs,
                dimensions=dims,
                asynchronous=op.endswith("-start"),
            )
        )
    return found


def _mesh_ids(mesh) -> tuple[list[str], object]:
    import numpy as np

    if isinstance(mesh, Mapping):
        if not mesh:
            raise ValueError("mesh must name at least one axis, e.g. {'X': 2, 'Y': 4}")
        for a, s in mesh.items():
            if not isinstance(a, str) or isinstance(s, bool) or not isinstance(s, int) or not 1 <= s <= 2**20:
                raise ValueError(f"mesh entries must be axis name -> positive integer size; got {a!r}: {s!r}")
        names = list(mesh)
        shape = [int(mesh[n]) for n in names]
        if math.prod(shape) > MAX_DEVICES:
            raise ValueError(f"mesh {dict(mesh)} has more than {MAX_DEVICES} devices")
        return names, np.arange(math.prod(shape)).reshape(shape)
    if hasattr(mesh, "devices") and hasattr(mesh, "axis_names"):
        ids = np.vectorize(lambda d: d.id)(mesh.devices)
        return list(mesh.axis_names), ids
    raise TypeError(f"mesh must be a dict of axis sizes or a jax.sharding.Mesh; got {type(mesh).__name__}")


def axis_groups(mesh, axes: Sequence[str]) -> frozenset:
    """The replica groups a collective over mesh ``axes`` uses: a frozenset of frozensets of device ids."""
    names, ids = _mesh_ids(mesh)
    if isinstance(axes, (str, bytes)) or not isinstance(axes, (list, tuple)):
        raise TypeError(f"axes must be a list of mesh axis names, e.g. ['X']; got {axes!r}")
    if len(set(axes)) != len(axes):
        raise ValueError(f"axes {axes!r} names an axis twice")
    for a in axes:
        if a not in names:
            raise ValueError(f"axes: axis {a!r} is not in the mesh; mesh axes are {names}")
    keep = [names.index(a) for a in axes]
    other = [i for i in range(len(names)) if i not in keep]
    arr = ids.transpose(other + keep).reshape(-1, math.prod(ids.shape[i] for i in keep) if keep else 1)
    return frozenset(frozenset(int(x) for x in row) for row in arr)


def mesh_axes(groups: Sequence[Sequence[int]], mesh) -> tuple[str, ...] | None:
    """Which mesh axes a set of replica groups spans, e.g. ``(("X",))`` or ``("X", "Y")``; None if no subset of
    axes produces exactly these groups. ``mesh`` is a ``jax.sharding.Mesh`` or a dict of axis sizes (devices
    numbered in row-major order)."""
    names, _ = _mesh_ids(mesh)
    if len(names) > MAX_MESH_AXES:
        raise ValueError(f"mesh has {len(names)} axes; mesh_axes tries every subset of at most {MAX_MESH_AXES}")
    if (
        isinstance(groups, (str, bytes))
        or not isinstance(groups, (list, tuple))
        or not all(
            isinstance(g, (list, tuple)) and all(not isinstance(i, bool) and isinstance(i, int) and i >= 0 for i in g)
            for g in groups
        )
    ):
        raise TypeError(f"groups must be a sequence of groups of device ids (non-negative integers); got {groups!r}")
    target = frozenset(frozenset(g) for g in groups)
    for r in range(len(names) + 1):
        for combo in itertools.combinations(names, r):
            if axis_groups(mesh, combo) == target:
                return combo
    return None


def normalize_cpu_collectives(found: Sequence[HloCollective], hlo_text=None) -> list[HloCollective]:
    """Rewrite CPU's spelling of a reduce-scatter (``all-reduce`` whose result is only ``dynamic-slice``d) into a
    ``reduce-scatter`` with the sliced result shape.

    With ``hlo_text`` (or a compiled object) the dataflow is checked: an all-reduce is folded only when a
    ``dynamic-slice`` (possibly inside a fusion that takes the all-reduce as an operand) reads it and produces a
    smaller array. Without it, the list is returned unchanged.
    """
    _check_found("found", found)
    if hlo_text is None:
        return list(found)
    module = _module_of(hlo_text, "hlo_text")
    users: dict[str, list[HloInstruction]] = {}
    for ins in module.instructions:
        for n in ins.operands:
            users.setdefault(n, []).append(ins)
    has_slice = {i.computation for i in module.instructions if i.opcode == "dynamic-slice"}
    out = []
    for c in found:
        if c.kind == "all-reduce":
            sliced = None
            for user in users.get(c.name, []):
                called = (user.attribute("calls") or "").lstrip("%")
                is_slice = user.opcode == "dynamic-slice" or (
                    user.opcode == "fusion" and bool(called) and called in has_slice
                )
                shp = user.result_shapes
                if is_slice and shp and sum(s.nbytes for s in shp) < c.result_bytes:
                    sliced = shp
            if sliced is not None:
                c = HloCollective(
                    kind="reduce-scatter",
                    name=c.name,
                    operand_shapes=c.operand_shapes,
                    result_shapes=sliced,
                    replica_groups=c.replica_groups,
                    source_target_pairs=(),
                    dimensions=c.dimensions,
                    asynchronous=c.asynchronous,
                )
        out.append(c)
    return out


def cost(compiled, keys: Sequence[str] | None = ("flops", "bytes accessed", "transcendentals")) -> dict:
    """XLA's own cost analysis of a compiled (per-device) or lowered (global) computation, keys sorted.

    ``keys=None`` keeps every numeric entry. Missing keys are left out.
    """
    if not hasattr(compiled, "cost_analysis"):
        raise TypeError(f"compiled must be a jax Compiled or Lowered object; got {type(compiled).__name__}")
    if keys is not None and (
        isinstance(keys, (str, bytes))
        or not isinstance(keys, (list, tuple))
        or not all(isinstance(k, str) for k in keys)
    ):
        raise TypeError(f"keys must be a list of cost_analysis key names, e.g. ['flops'], or None; got {keys!r}")
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):
        ca = ca[0] if ca else {}
    ca = dict(ca or {})
    wanted = sorted(ca) if keys is None else sorted(k for k in keys if k in ca)
    return {k: float(ca[k]) for k in wanted if isinstance(ca[k], (int, float))}


# --------------------------------------------------------------------------------------------------------------
# The oracle: the collectives matmul_plan predicts vs the ones XLA's SPMD partitioner inserts (Chapter 3)
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MatmulCase:
    """A sharded computation to compile: one matmul, or a chain of two (a Megatron-style MLP)."""

    id: str  # short name, e.g. "case3-rs-1d"
    mesh: tuple[tuple[str, int], ...]  # mesh axes and sizes, e.g. (("X", 2), ("Y", 4))
    matmuls: tuple[str, ...]  # "A[I, J_X] · B[J_X, K] -> C[I, K_X]"; a chain reuses the previous output
    sizes: tuple[tuple[str, int], ...]  # dimension sizes
    note: str = ""  # what XLA does differently from the plan, if it does

    def __post_init__(self):
        if not isinstance(self.id, str) or not self.id:
            raise TypeError(f"id must be a non-empty string; got {self.id!r}")
        for argument, pairs in (("mesh", self.mesh), ("sizes", self.sizes)):
            if (
                not isinstance(pairs, tuple)
                or not pairs
                or not all(
                    isinstance(p, tuple)
                    and len(p) == 2
                    and isinstance(p[0], str)
                    and not isinstance(p[1], bool)
                    and isinstance(p[1], int)
                    and p[1] > 0
                    for p in pairs
                )
            ):
                raise ValueError(f"{argument} must be a non-empty tuple of (name, positive int) pairs; got {pairs!r}")
        if any(s > MAX_CASE_DIM for _, s in self.sizes) or math.prod(s for _, s in self.mesh) > 4096:
            raise ValueError(
                f"sizes must be at most {MAX_CASE_DIM} (MAX_CASE_DIM) and the mesh at most 4096 devices; "
                f"got sizes={self.sizes!r}, mesh={self.mesh!r}"
            )
        if not isinstance(self.matmuls, tuple) or not self.matmuls or not all(isinstance(t, str) for t in self.matmuls):
            raise TypeError(f"matmuls must be a non-empty tuple of 'LHS · RHS -> OUT' strings; got {self.matmuls!r}")
        for t in self.matmuls:
            try:
                _split_matmul(t)
            except (TypeError, ValueError) as err:
                raise ValueError(f"matmuls: {err}") from None
        if not isinstance(self.note, str):
            raise TypeError(f"note must be a string; got {self.note!r}")

    @property
    def mesh_dict(self) -> dict[str, int]:
        return dict(self.mesh)

    @property
    def label(self) -> str:
        return " ; ".join(self.matmuls)


def _split_matmul(text: str):
    from .sharding import parse

    m = re.match(r"^(.*?)\s*(?:·|\*|@)\s*(.*?)\s*->\s*(.*)$", text)
    if not m:
        raise ValueError(f"matmul must read 'LHS · RHS -> OUT'; got {text!r}")
    return tuple(parse(x) for x in m.groups())


def _check_case(case) -> None:
    if not isinstance(case, MatmulCase):
        raise TypeError(f"case must be a MatmulCase (see matmul_cases()); got {type(case).__name__} {case!r}")


def _check_found(argument: str, found) -> None:
    if (
        isinstance(found, (str, bytes))
        or not isinstance(found, (list, tuple))
        or not all(isinstance(c, HloCollective) for c in found)
    ):
        raise TypeError(f"{argument} must be a list of HloCollective (from collectives()); got {found!r}")


#: Dtypes the oracle compiles in.
ORACLE_DTYPES = ("fp32", "bf16")
OracleDType = Annotated[str, OneOf(ORACLE_DTYPES)]


@checked
def predict(case: MatmulCase, dtype: OracleDType = "fp32") -> list:
    """The plan's collectives for ``case`` (a list of ``sharding.Step``), chained matmuls in order."""
    from .sharding import matmul_plan

    _check_case(case)
    steps = []
    for text in case.matmuls:
        lhs, rhs, out = _split_matmul(text)
        plan = matmul_plan(lhs, rhs, out, mesh=case.mesh_dict, sizes=dict(case.sizes), dtype=dtype)
        steps += list(plan.collectives)
    return steps


@checked
def compile_case(case: MatmulCase, devices=None, dtype: OracleDType = "fp32", *, return_inputs: Bool = False):
    """Compile ``case`` with ``jax.jit`` on a mesh with Auto axes (inputs placed with ``device_put``, the final
    output's sharding given as ``out_shardings``); returns ``(compiled, jax_mesh)``, plus the list of placed
    input arrays when ``return_inputs`` (call ``compiled(*inputs)`` to run it)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import NamedSharding

    from .compat import make_mesh

    _check_case(case)
    names = [a for a, _ in case.mesh]
    shape = [s for _, s in case.mesh]
    if devices is None:  # XLA's CPU program: the stored oracle outputs are the CPU compiler's
        from .devices import demo_devices

        devices = demo_devices(math.prod(shape), backend="cpu")
    if (
        isinstance(devices, (str, bytes))
        or not isinstance(devices, (list, tuple))
        or not all(hasattr(d, "platform") for d in devices)
    ):
        raise TypeError(f"devices must be a list of JAX devices or None; got {devices!r}")
    if len(devices) != math.prod(shape):
        raise ValueError(f"devices lists {len(devices)} devices; case {case.id} needs {math.prod(shape)}")
    mesh = make_mesh(shape, names, devices=devices)
    sizes = dict(case.sizes)
    jdtype = {"fp32": jnp.float32, "bf16": jnp.bfloat16}[dtype]
    chain = [_split_matmul(t) for t in case.matmuls]
    produced = {out.name for _, _, out in chain}
    inputs, order = {}, []
    rng = np.random.default_rng(0)
    for lhs, rhs, _ in chain:
        for arr in (lhs, rhs):
            if arr.name not in produced and arr.name not in inputs:
                data = rng.standard_normal([sizes[n] for n in arr.dim_names]).astype(np.float32)
                inputs[arr.name] = jax.device_put(jnp.asarray(data, jdtype), NamedSharding(mesh, arr.partition_spec()))
                order.append(arr.name)

    def f(*args):
        env = dict(zip(order, args))
        for i, (lhs, rhs, out) in enumerate(chain):
            spec = f"{''.join(_letters(lhs))},{''.join(_letters(rhs))}->{''.join(_letters(out))}"
            y = jnp.einsum(spec, env[lhs.name], env[rhs.name])
            env[out.name] = jnp.maximum(y, 0) if i + 1 < len(chain) else y
        return env[chain[-1][2].name]

    out_sharding = NamedSharding(mesh, chain[-1][2].partition_spec())
    args = [inputs[n] for n in order]
    compiled = jax.jit(f, out_shardings=out_sharding).lower(*args).compile()
    return (compiled, mesh, args) if return_inputs else (compiled, mesh)


def _letters(arr) -> list[str]:
    # einsum needs one letter per dimension: the (one-letter) dimension names, lower-cased
    out = []
    for n in arr.dim_names:
        if len(n) != 1:
            raise ValueError(f"oracle cases use one-letter dimension names; got {n!r}")
        out.append(n.lower())
    return out


@dataclass(frozen=True)
class CollectiveSig:
    """A collective reduced to what the plan and XLA can be compared on."""

    kind: str  # "all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute"
    axes: str  # mesh axes joined, e.g. "XY"; "?" when the groups match no axes; "" for a permute
    bytes_in: int  # bytes per device going in
    bytes_out: int  # bytes per device coming out

    def __str__(self) -> str:
        from .units import fmt

        over = f"[{self.axes}]" if self.axes else ""
        return f"{self.kind}{over} {fmt(self.bytes_in, 'B')}->{fmt(self.bytes_out, 'B')}"


def signatures_from_xla(found: Sequence[HloCollective], mesh) -> tuple[CollectiveSig, ...]:
    """Signatures of XLA's (normalised) collectives, with replica groups mapped to mesh axis names."""
    _check_found("found", found)
    _mesh_ids(mesh)
    out = []
    for c in found:
        axes = "" if c.kind == "collective-permute" else "".join(mesh_axes(c.replica_groups, mesh) or ("?",))
        out.append(CollectiveSig(c.kind, axes, int(c.operand_bytes), int(c.result_bytes)))
    return tuple(out)


def signatures_from_plan(steps) -> tuple[CollectiveSig, ...]:
    """Signatures of a plan's collective steps."""
    from .sharding import Step

    if (
        isinstance(steps, (str, bytes))
        or not isinstance(steps, (list, tuple))
        or not all(isinstance(s, Step) for s in steps)
    ):
        raise TypeError(f"steps must be a list of sharding.Step (e.g. MatmulPlan.collectives); got {steps!r}")
    return tuple(CollectiveSig(s.kind, "".join(s.axes), int(s.bytes_in), int(s.bytes_out)) for s in steps)


@dataclass(frozen=True)
class MatmulRow:
    """One line of the oracle table."""

    case: MatmulCase  # what was compiled
    predicted: tuple[CollectiveSig, ...]  # matmul_plan's collectives
    xla: tuple[CollectiveSig, ...]  # XLA's, after folding CPU's reduce-scatter spelling
    xla_raw_kinds: tuple[str, ...]  # XLA's kinds before folding (shows the all-reduce spelling)

    @property
    def agree(self) -> bool:
        return self.predicted == self.xla


@checked
def run_matmul_case(case: MatmulCase, devices=None, dtype: OracleDType = "fp32") -> MatmulRow:
    """Compile ``case``, parse and normalise its collectives, and pair them with the plan's prediction."""
    compiled, mesh = compile_case(case, devices, dtype)
    raw = collectives(compiled)
    found = normalize_cpu_collectives(raw, compiled)
    return MatmulRow(
        case, signatures_from_plan(predict(case, dtype)), signatures_from_xla(found, mesh), tuple(c.kind for c in raw)
    )


_Z = (("I", 64), ("J", 128), ("K", 256))
_M1 = (("X", 8),)
_M2 = (("X", 2), ("Y", 4))
_MLP = (("B", 64), ("D", 128), ("F", 256))

#: The sharding combinations the oracle compiles (tests/test_hlo_oracle.py and Chapter 3's table).
MATMUL_CASES: tuple[MatmulCase, ...] = (
    MatmulCase("c1-replicated", _M1, ("A[I, J] · B[J, K] -> C[I, K]",), _Z),
    MatmulCase("c1-rows", _M1, ("A[I_X, J] · B[J, K] -> C[I_X, K]",), _Z),
    MatmulCase("c1-rows-then-gather", _M1, ("A[I_X, J] · B[J, K] -> C[I, K]",), _Z),
    MatmulCase(
        "c1-move-to-cols",
        _M1,
        ("A[I_X, J] · B[J, K] -> C[I, K_X]",),
        _Z,
        note="XLA gathers A (32.8 kB per device) and slices B instead of an AllToAll of the output, which "
        "the model rates cheaper (an AllToAll of 65.5 kB costs a quarter of an AllGather of it)",
    ),
    MatmulCase("c2-gather-lhs", _M1, ("A[I, J_X] · B[J, K] -> C[I, K]",), _Z),
    MatmulCase("c2-reduce-instead", _M1, ("A[I, J_X] · B[J, K] -> C[I, K]",), (("I", 256), ("J", 256), ("K", 64))),
    MatmulCase("c2-rhs-split", _M1, ("A[I, J] · B[J_X, K] -> C[I, K]",), _Z),
    MatmulCase("c2-fsdp", _M1, ("A[I_X, J] · B[J_X, K] -> C[I_X, K]",), _Z),
    MatmulCase("c3-allreduce", _M1, ("A[I, J_X] · B[J_X, K] -> C[I, K]",), _Z),
    MatmulCase("c3-rs-cols", _M1, ("A[I, J_X] · B[J_X, K] -> C[I, K_X]",), _Z),
    MatmulCase("c3-rs-rows", _M1, ("A[I, J_X] · B[J_X, K] -> C[I_X, K]",), _Z),
    MatmulCase("c4-keep-rows", _M1, ("A[I_X, J] · B[J, K_X] -> C[I_X, K]",), _Z),
    MatmulCase("c4-keep-cols", _M1, ("A[I_X, J] · B[J, K_X] -> C[I, K_X]",), _Z),
    MatmulCase("2d-c1", _M2, ("A[I_X, J] · B[J, K_Y] -> C[I_X, K_Y]",), _Z),
    MatmulCase("2d-c1-XY", _M2, ("A[I_XY, J] · B[J, K] -> C[I_XY, K]",), _Z),
    MatmulCase("2d-c2", _M2, ("A[I_X, J_Y] · B[J, K] -> C[I_X, K]",), _Z),
    MatmulCase("2d-c2-fsdp-tp", _M2, ("A[I_X, J] · B[J_X, K_Y] -> C[I_X, K_Y]",), _Z),
    MatmulCase("2d-c3-ar", _M2, ("A[I_X, J_Y] · B[J_Y, K] -> C[I_X, K]",), _Z),
    MatmulCase("2d-c3-rs", _M2, ("A[I_X, J_Y] · B[J_Y, K] -> C[I_X, K_Y]",), _Z),
    MatmulCase("2d-c3-XY", _M2, ("A[I, J_XY] · B[J_XY, K] -> C[I, K]",), _Z),
    MatmulCase(
        "2d-c3-rs-spare-Y",
        _M2,
        ("A[I, J_X] · B[J_X, K] -> C[I, K_X]",),
        _Z,
        note="with Y idle, XLA AllReduces only the half of C that each Y-group needs (32.8 kB) and then "
        "permutes the halves into place: the same bytes per link as the predicted ReduceScatter",
    ),
    MatmulCase(
        "2d-c4-spare-Y",
        _M2,
        ("A[I_X, J] · B[J, K_X] -> C[I_X, K]",),
        _Z,
        note="with Y idle, XLA re-splits B over Y with a permute and gathers over the 4 devices of Y "
        "instead of the 2 of X: the same gathered bytes, one extra permute",
    ),
    MatmulCase("mlp-megatron-1d", _M1, ("X[B, D] · W[D, F_X] -> H[B, F_X]", "H[B, F_X] · V[F_X, D] -> O[B, D]"), _MLP),
    MatmulCase(
        "mlp-dp-tp-2d", _M2, ("X[B_X, D] · W[D, F_Y] -> H[B_X, F_Y]", "H[B_X, F_Y] · V[F_Y, D] -> O[B_X, D]"), _MLP
    ),
    MatmulCase(
        "mlp-megatron-rs-1d", _M1, ("X[B, D] · W[D, F_X] -> H[B, F_X]", "H[B, F_X] · V[F_X, D] -> O[B_X, D]"), _MLP
    ),
)


def matmul_cases(ids: Sequence[str] | None = None) -> tuple[MatmulCase, ...]:
    """The oracle's cases, all or those named by ``ids``."""
    if ids is None:
        return MATMUL_CASES
    if isinstance(ids, (str, bytes)) or not isinstance(ids, (list, tuple)):
        raise TypeError(f"ids must be a list of case ids, e.g. ['c1-rows'], or None; got {ids!r}")
    by_id = {c.id: c for c in MATMUL_CASES}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise ValueError(f"ids: unknown oracle case id(s) {unknown}; known: {sorted(by_id)}")
    return tuple(by_id[i] for i in ids)


def format_matmul_table(rows: Sequence[MatmulRow]):
    """The oracle's rows as a collapsed :class:`tpu_notes.table.Table`: case, agreement, the matmul, the
    plan's collectives and XLA's (with their bytes per device), and the HLO ops behind XLA's where they differ."""
    from .table import Column, Table

    if (
        isinstance(rows, (str, bytes))
        or not isinstance(rows, (list, tuple))
        or not all(isinstance(r, MatmulRow) for r in rows)
    ):
        raise TypeError(f"rows must be a list of MatmulRow (from run_matmul_case); got {rows!r}")

    def show(sigs):
        return " + ".join(map(str, sigs)) or "none"

    out = []
    for r in rows:
        raw = "" if list(r.xla_raw_kinds) == [s.kind for s in r.xla] else ", ".join(r.xla_raw_kinds)
        out.append((r.case.id, "agree" if r.agree else "DIFFER", r.case.label, show(r.predicted), show(r.xla), raw))
    return Table(
        [
            Column("case"),
            Column("verdict"),
            Column("matmul", wrap=True),
            Column("plan", wrap=True),
            Column("XLA", wrap=True),
            Column("HLO ops", wrap=True),
        ],
        out,
        caption="Every oracle case in detail (bytes per device before -> after each collective)",
        collapse=True,
    )


# --------------------------------------------------------------------------------------------------------------
# Layouts: dimension order, tiling and memory space of each array (Chapter 9)
# --------------------------------------------------------------------------------------------------------------
#: What the ``S(n)`` of a TPU layout names. ``S(1)`` is VMEM, the TPU core's on-chip vector memory (the scaling
#: book's profiling chapter, https://jax-ml.github.io/scaling-book/profiling/); no ``S`` (memory space 0) is the
#: default memory, HBM. Other numbers are backend-specific and are reported as ``"S(n)"``.
MEMORY_SPACES = {0: "HBM", 1: "VMEM"}

_LAYOUT_SHAPE_RE = re.compile(r"\b([a-z][a-z0-9]*)\[([0-9,\s]*)\](\{[^{}]*\})?")


@dataclass(frozen=True)
class HloLayout:
    """One array of an HLO module with its layout: ``bf16[3,1000]{1,0:T(8,128)(2,1)S(1)}`` reads as dtype
    ``bf16``, dims ``(3, 1000)``, minor-to-major ``(1, 0)`` (dimension 1 is contiguous), tiles ``((8, 128), (2,
    1))`` and memory space 1 (VMEM on a TPU)."""

    instruction: str  # the instruction whose result (or one element of a tuple result) this is; "" for a lone shape
    dtype: str  # HLO element type
    dims: tuple[int, ...]  # logical dimension sizes
    minor_to_major: tuple[int, ...]  # dimension order in memory, fastest-varying first (() when none is printed)
    tiles: tuple[tuple[int, ...], ...]  # the T(...) tiles, outermost first; () for an untiled layout
    memory_space: int  # the S(n) number; 0 (default memory, HBM) when absent

    @property
    def memory(self) -> str:
        """``"HBM"``, ``"VMEM"`` or ``"S(n)"`` (:data:`MEMORY_SPACES`)."""
        return MEMORY_SPACES.get(self.memory_space, f"S({self.memory_space})")

    @property
    def bytes(self) -> float:
        """Bytes of the logical array: elements x element size."""
        return math.prod(self.dims) * HLO_DTYPE_BYTES[self.dtype]

    @property
    def padded_dims(self) -> tuple[int, ...]:
        """The stored shape after tiling, in memory order (major to minor): each tile rounds the last dims of the
        shape so far up to its multiples and splits them into (tile count, tile size)."""
        order = self.minor_to_major or tuple(reversed(range(len(self.dims))))
        cur = [self.dims[i] for i in reversed(order)]
        for tile in self.tiles:
            k = len(tile)
            if len(cur) < k:
                cur = [1] * (k - len(cur)) + cur
            head, tail = cur[:-k], cur[-k:]
            cur = head + [-(-d // t) for d, t in zip(tail, tile)] + list(tile)
        return tuple(cur)

    @property
    def padded_bytes(self) -> float:
        """Bytes the array occupies once its tiles are padded (``bytes`` when untiled)."""
        return math.prod(self.padded_dims) * HLO_DTYPE_BYTES[self.dtype]

    @property
    def padding(self) -> float:
        """padded_bytes / bytes (1.0 for an untiled layout or a zero-size array)."""
        return self.padded_bytes / self.bytes if self.bytes else 1.0

    def __str__(self) -> str:
        tiles = "".join(
            f"T({','.join(map(str, t))})" if i == 0 else f"({','.join(map(str, t))})" for i, t in enumerate(self.tiles)
        )
        space = f"S({self.memory_space})" if self.memory_space else ""
        inner = ",".join(map(str, self.minor_to_major)) + (":" + tiles + space if tiles or space else "")
        dims = f"{self.dtype}[{','.join(map(str, self.dims))}]"
        return dims + (f"{{{inner}}}" if inner else "")


def _parse_layout(dtype: str, dims_text: str, layout_text: str | None, instruction: str, argument: str) -> HloLayout:
    dims = tuple(int(x) for x in dims_text.replace(" ", "").split(",") if x)
    m2m: tuple[int, ...] = ()
    tiles: list[tuple[int, ...]] = []
    space = 0
    if layout_text:
        body = layout_text[1:-1]
        order, _, rest = body.partition(":")
        if order.strip():
            try:
                m2m = tuple(int(x) for x in order.split(","))
            except ValueError:
                raise ValueError(f"{argument}: cannot read the dimension order {order!r} of {layout_text!r}") from None
            if sorted(m2m) != list(range(len(dims))):
                raise ValueError(
                    f"{argument}: layout {layout_text!r} must order each of the {len(dims)} dimensions once"
                )
        # T(8,128)(2,1): a tile, then sub-tiles written bare; S(n) the memory space; E(..), L(..), ... ignored
        for m in re.finditer(r"(T)?\(([0-9,\s]*)\)|S\((\d+)\)|([A-Z])\(([^)]*)\)", rest):
            if m.group(3) is not None:
                space = int(m.group(3))
            elif m.group(4) is None and (m.group(1) or tiles):
                tile = tuple(int(x) for x in m.group(2).split(",") if x.strip())
                if not tile or any(t < 1 for t in tile):
                    raise ValueError(f"{argument}: tile ({m.group(2)}) of {layout_text!r} must be positive sizes")
                tiles.append(tile)
    return HloLayout(instruction, dtype, dims, m2m, tuple(tiles), space)


def parse_layout(shape: str) -> HloLayout:
    """One array shape with its layout, as HLO prints it: ``parse_layout("bf16[3,1000]{1,0:T(8,128)(2,1)}")``.
    Without a layout (``"bf16[3,1000]"``) the array is untiled, row-major, in HBM."""
    if not isinstance(shape, str):
        raise TypeError(f"shape must be an HLO array shape such as 'bf16[3,1000]{{1,0:T(8,128)(2,1)}}'; got {shape!r}")
    m = _LAYOUT_SHAPE_RE.fullmatch(shape.strip())
    if not m or m.group(1) not in HLO_DTYPE_BYTES:
        raise ValueError(f"shape must be an HLO array shape such as 'bf16[3,1000]{{1,0:T(8,128)(2,1)}}'; got {shape!r}")
    return _parse_layout(m.group(1), m.group(2), m.group(3), "", "shape")


def layouts(compiled_or_hlo_text) -> list[HloLayout]:
    """The layout of every array an instruction of the module produces (each element of a tuple result
    separately), in text order: dimension order, ``T(...)`` tiles, ``S(n)`` memory space, logical and padded
    bytes. On a CPU or GPU the layouts carry no tiles (``{1,0}``); a TPU's compiled HLO tiles nearly every array
    (``{1,0:T(8,128)(2,1)}`` for bf16) and marks what lives in VMEM with ``S(1)``."""
    module = _module_of(compiled_or_hlo_text)
    out = []
    for ins in module.instructions:
        for dt, dims, lay in _LAYOUT_SHAPE_RE.findall(ins.shape):
            if dt in HLO_DTYPE_BYTES:
                out.append(_parse_layout(dt, dims, lay or None, ins.name, "compiled_or_hlo_text"))
    return out
