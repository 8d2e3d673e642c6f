"""A compiled program's ops from its ``HloProto`` (the ``/host:metadata`` plane of an XSpace): op name ->
opcode, output shape, the collective a fusion or an async wrapper runs, so trace events are
classified by what the op is, never by its name, and a collective's groups as its proto records them.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from google.protobuf.message import DecodeError

from perfkit.errors import BadInput
from perfkit.trace.protos import HLO_PROTO, PRIMITIVE_TYPES

# Collective opcodes (sync, or the base of an async -start / -done pair): their time is ICI.
COLLECTIVES = frozenset({
    "all-gather", "all-reduce", "reduce-scatter", "all-to-all", "ragged-all-to-all", "collective-permute",
    "collective-broadcast", "send", "recv", "all-reduce-scatter",
})
# collectives whose bytes sent need no group size: their groups are not read
_UNGROUPED = frozenset({"collective-permute", "send", "recv"})


class Groups(NamedTuple):
    """A collective's replica groups as its ``HloInstructionProto`` records them, in HLO text's terms."""

    opcode: str
    replica_groups: str  # "{{0,1},{2,3}}", the iota form "[4,2]<=[8]", or "{}" (every replica or partition)
    channel: bool        # a channel_id
    global_ids: bool     # use_global_device_ids


class Op(NamedTuple):
    """One HLO instruction as a trace needs it."""

    opcode: str  # as in HLO text; an async wrapper is named by what it wraps ("reduce-scatter-start")
    shape: str   # output shape without layout: "f32[64,128]", "(f32[8], u32[])"
    inner: str   # a collective run inside a fusion / call ("" when none)
    groups: Groups | None = None  # those of the collective it is or runs (an async pair's done: its start's)


class Program(NamedTuple):
    module: str
    ops: dict[str, Op]
    counts: tuple[int, int] | None = None  # (replicas, partitions) as its device assignment records them

    def group(self, name: str) -> int:
        """Devices in each group of the collective op ``name`` is or runs, as XLA forms them from its groups
        (``perfkit.hlo.program_cost.group_size``); 0 unknown: no such op or groups, or groups that only the module's
        counts size (empty ones: every replica or partition) where its device assignment records none."""
        # (off the breakdown's path: HLO text's group rules are imported only where collectives are sized)
        from perfkit.hlo.parse import Instruction
        from perfkit.hlo.program_cost import group_size

        op = self.ops.get(name)
        if op is None or op.groups is None:
            return 0
        g = op.groups
        attrs = (("replica_groups", g.replica_groups), *((("channel_id", "1"),) if g.channel else ()),
                 *((("use_global_device_ids", "true"),) if g.global_ids else ()))
        inst = Instruction(name, "", g.opcode, (), "", attrs, (), False, 0, "")
        try:
            if self.counts is None:
                return group_size(inst, 0)
            return group_size(inst, self.counts[0] * self.counts[1], self.counts[0])
        except BadInput:  # groups that the module's counts size, which it does not record, or that XLA refuses
            return 0


def base_opcode(opcode: str) -> str:
    """``all-gather-start`` -> ``all-gather``; other opcodes unchanged."""
    for suffix in ("-start", "-done", "-update"):
        if opcode.endswith(suffix):
            return opcode[: -len(suffix)]
    return opcode


def shape_text(shape) -> str:
    """A ShapeProto as HLO text prints it, without layout."""
    if shape.element_type == 13:  # TUPLE
        return "(" + ", ".join(shape_text(s) for s in shape.tuple_shapes) + ")"
    dtype = PRIMITIVE_TYPES.get(shape.element_type, f"type{shape.element_type}")
    return f"{dtype}[{','.join(map(str, shape.dimensions))}]"


def _groups(inst) -> Groups | None:
    """A collective ``HloInstructionProto``'s groups, in HLO text's form: listed (its ``collective_device_list``,
    else the older ``replica_groups``), in iota form (the list's own iota field, which newer XLA leaves unwritten,
    or the instruction's ``iota_collective_device_list``) or over a mesh's axes (``mesh_axes_replica_group_list``);
    None for one whose bytes sent need none."""
    if base_opcode(inst.opcode) in _UNGROUPED:
        return None
    iota = next((i for i in (inst.iota_collective_device_list, inst.collective_device_list.iota_replica_group_list)
                 if i.num_devices_per_group > 0), None)
    mesh = inst.mesh_axes_replica_group_list
    listed = inst.collective_device_list.replica_groups or inst.replica_groups
    if iota is not None:
        count, size = iota.num_replica_groups, iota.num_devices_per_group
        groups = f"[{count},{size}]<=[{count * size}]"
    elif mesh.axes:
        groups = _mesh_text(mesh)
        if groups is None:  # not read as every device: n unknown
            return None
    else:
        groups = "{" + ",".join("{" + ",".join(map(str, g.replica_ids)) + "}" for g in listed) + "}"
    return Groups(inst.opcode, groups, inst.channel_id > 0, bool(inst.use_global_device_ids))


def _mesh_text(groups) -> str | None:
    """A ``MeshAxesReplicaGroupListProto`` in HLO text's form, ``mesh['a0'=2,'a1'=4] {'a1'}`` (the axes named by
    place: only sizes count here): a group runs over the axes listed, each whole or a sub-axis ``'a1':(1)2`` (its
    pre-size, then its size). None where an axis it lists is not the mesh's or has no size."""
    sizes = [a.size for a in groups.mesh.axes]
    axes = []
    for ref in groups.axes:
        sub = ref.sub_axis_info if ref.HasField("sub_axis_info") else None
        if not 0 <= ref.mesh_axis_index < len(sizes) or sizes[ref.mesh_axis_index] < 1 or sub and sub.size < 1:
            return None
        axes.append(f"'a{ref.mesh_axis_index}'" + (f":({sub.pre_size}){sub.size}" if sub else ""))
    return "mesh[" + ",".join(f"'a{k}'={size}" for k, size in enumerate(sizes)) + "] {" + ",".join(axes) + "}"


def read_program(data: bytes, path: Path | str) -> Program:
    try:
        proto = HLO_PROTO.FromString(data)
    except DecodeError:
        raise BadInput("a program's Hlo Proto in /host:metadata does not parse", path=path) from None
    module = proto.hlo_module
    assigned = module.device_assignment
    counts = (assigned.replica_count, assigned.computation_count) if min(
        assigned.replica_count, assigned.computation_count) > 0 else None
    by_id = {c.id: c for c in module.computations}

    def collective_in(comp_ids, seen: set[int]) -> tuple[str, Groups | None]:
        for cid in comp_ids:
            comp = by_id.get(cid)
            if comp is None or cid in seen:
                continue
            seen.add(cid)
            for inst in comp.instructions:
                if base_opcode(inst.opcode) in COLLECTIVES:
                    return base_opcode(inst.opcode), _groups(inst)
                found = collective_in(inst.called_computation_ids, seen)
                if found[0]:
                    return found
        return "", None

    ops: dict[str, Op] = {}
    started: dict[int, tuple[str, Groups | None]] = {}  # a start's instruction id -> what it runs, its groups
    for comp in module.computations:
        for inst in comp.instructions:
            opcode, inner, groups = inst.opcode, "", None
            if opcode in ("async-start", "async-update", "async-done"):
                roots = [i for cid in inst.called_computation_ids if cid in by_id
                         for i in by_id[cid].instructions if i.id == by_id[cid].root_id]
                if roots:
                    what = roots[0].opcode
                    groups = _groups(roots[0]) if base_opcode(what) in COLLECTIVES else None
                else:
                    what, groups = started.get(inst.operand_ids[0] if inst.operand_ids else -1, ("async", None))
                opcode = what + opcode[len("async"):]
            elif opcode in ("fusion", "call", "custom-call"):
                inner, groups = collective_in(inst.called_computation_ids, set())
            elif opcode.endswith(("-done", "-update")):  # its groups are its start's
                groups = started.get(inst.operand_ids[0] if inst.operand_ids else -1, ("", None))[1]
            elif base_opcode(opcode) in COLLECTIVES:
                groups = _groups(inst)
            if opcode.endswith("-start"):
                started[inst.id] = (opcode.removesuffix("-start"), groups)
            ops[inst.name] = Op(opcode, shape_text(inst.shape), inner, groups)
    return Program(module.name, ops, counts)


class Programs:
    """program id -> ``Program``, parsed from its HloProto bytes when first asked for (a trace's metadata
    may hold many programs that none of its ops ran)."""

    def __init__(self, protos: dict[int, bytes], path: Path | str):
        self.protos, self.path = protos, path
        self._parsed: dict[int, Program] = {}

    def get(self, program_id: int) -> Program | None:
        if program_id not in self._parsed and program_id in self.protos:
            self._parsed[program_id] = read_program(self.protos[program_id], self.path)
        return self._parsed.get(program_id)
