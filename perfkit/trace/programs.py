"""A compiled program's ops from its ``HloProto`` (the ``/host:metadata`` plane of an XSpace): op name ->
opcode, output shape, and the collective a fusion or an async wrapper runs, so trace events are
classified by what the op is, never by its name.
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


class Op(NamedTuple):
    """One HLO instruction as a trace needs it."""

    opcode: str  # as in HLO text; an async wrapper is named by what it wraps ("reduce-scatter-start")
    shape: str   # output shape without layout: "f32[64,128]", "(f32[8], u32[])"
    inner: str   # a collective run inside a fusion / call ("" when none)


class Program(NamedTuple):
    module: str
    ops: dict[str, Op]


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


def read_program(data: bytes, path: Path | str) -> Program:
    try:
        proto = HLO_PROTO.FromString(data)
    except DecodeError:
        raise BadInput("a program's Hlo Proto in /host:metadata does not parse", path=path) from None
    module = proto.hlo_module
    by_id = {c.id: c for c in module.computations}

    def collective_in(comp_ids, seen: set[int]) -> str:
        for cid in comp_ids:
            comp = by_id.get(cid)
            if comp is None or cid in seen:
                continue
            seen.add(cid)
            for inst in comp.instructions:
                if base_opcode(inst.opcode) in COLLECTIVES:
                    return base_opcode(inst.opcode)
                found = collective_in(inst.called_computation_ids, seen)
                if found:
                    return found
        return ""

    ops: dict[str, Op] = {}
    wrapped: dict[int, str] = {}  # async-start instruction id -> the opcode it wraps
    for comp in module.computations:
        for inst in comp.instructions:
            opcode, inner = inst.opcode, ""
            if opcode in ("async-start", "async-update", "async-done"):
                roots = [i.opcode for cid in inst.called_computation_ids if cid in by_id
                         for i in by_id[cid].instructions if i.id == by_id[cid].root_id]
                what = roots[0] if roots else wrapped.get(inst.operand_ids[0] if inst.operand_ids else -1, "async")
                if opcode == "async-start":
                    wrapped[inst.id] = what
                opcode = what + opcode[len("async"):]
            elif opcode in ("fusion", "call", "custom-call"):
                inner = collective_in(inst.called_computation_ids, set())
            ops[inst.name] = Op(opcode, shape_text(inst.shape), inner)
    return Program(module.name, ops)


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
