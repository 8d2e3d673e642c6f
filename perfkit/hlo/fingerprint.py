"""Canonical forms of a parsed HLO module: a fingerprint per computation, and per-instruction signatures.

Two ranks that compiled the same program print it with different instruction names and numbering
(``constant.0.clone.1`` on one, ``constant.2.clone.1`` on another), different metadata and a different
FileNames / StackFrames header. The canonical forms ignore all of those:

- the **fingerprint** names every instruction by its position in its computation and every called
  computation by its own fingerprint, so it is equal exactly when the programs are the same, in the
  same order (order matters: scheduled modules print the schedule, and collectives pair by order); ENTRY's
  holds the device counts the HloModule line names too (``Module.counts``): a program compiled for other
  counts is another program, which hangs or computes wrongly where ranks mix them;
- the **signature** of an instruction describes it by opcode, shape, attributes and its operands'
  opcodes and shapes, not by positions, so that one inserted instruction changes its own signature and
  its users', not every signature after it. Diffs align signatures.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from typing import Callable, Iterator, NamedTuple

from perfkit.hlo.parse import (CALLED_COMPUTATION_KEYS, INSTRUCTION_REF_KEYS, Instruction,
                               Module, referenced_names)

SHORT_LITERAL = 40  # operand literals up to this length are part of a user's signature
_NAMING_KEYS = CALLED_COMPUTATION_KEYS | INSTRUCTION_REF_KEYS  # attributes whose values name something
_PEER_KEYS = ("source_target_pairs", "replica_groups")  # who a collective exchanges data with
_SEND_RECV_PEERS = re.compile(r'_xla_send_recv_source_target_pairs="([^"]*)"')  # a send's or recv's, XLA's note

OWN = "(B's own)"  # the mark of a name of B's own that A gives another instruction (``entry_names_matched``)


class FlatInstruction(NamedTuple):
    """An instruction in the module's canonical order, with the computation it lives in."""

    computation: str
    inst: Instruction


def _digest(lines: list[str]) -> str:
    return hashlib.blake2b("\n".join(lines).encode(), digest_size=8).hexdigest()


def _canonical_value(key: str, value: str, ref: Callable[[str], str], fps: dict[str, str]) -> str:
    """An attribute value with called computations replaced by their fingerprints and referenced
    instructions by ``ref`` (a position or a description)."""
    if key in CALLED_COMPUTATION_KEYS:
        return ",".join(fps.get(n, "?" + n) for n in referenced_names(value))
    if key in INSTRUCTION_REF_KEYS:
        return ",".join(ref(n) for n in referenced_names(value))
    return value


def computation_fingerprints(module: Module) -> dict[str, str]:
    """Fingerprint of every computation reachable from ENTRY (callees folded into their callers')."""
    fps: dict[str, str] = {}
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in fps or name in visiting or name not in module.computations:
            return
        visiting.add(name)
        comp = module.computations[name]
        for inst in comp.instructions:
            for callee in inst.calls:
                visit(callee)
        position = {inst.name: f"#{i}" for i, inst in enumerate(comp.instructions)}

        def ref(n: str) -> str:
            return position.get(n, "?" + n)

        lines = []
        for inst in comp.instructions:
            if not inst.opcode:
                lines.append(inst.text)  # opaque: compared as printed
                continue
            operands = ",".join([position.get(n) or "?" + n for n in inst.operands])
            lines.append(f"{'ROOT ' if inst.root else ''}{inst.shape} {inst.opcode}({operands}{inst.literal}) "
                         + ", ".join([f"{k}={_canonical_value(k, v, ref, fps) if k in _NAMING_KEYS else v}"
                                      for k, v in inst.attrs]))
        if name == module.entry:
            lines.append(f"counts {module.counts}")
        fps[name] = _digest(lines)
        visiting.discard(name)

    visit(module.entry)
    del visit  # the closure refers to itself: a cycle holding the module until a cyclic collection
    return fps


def flatten(module: Module) -> list[FlatInstruction]:
    """Every reachable instruction once, in canonical order: ENTRY's instructions in printed order, each
    preceded by the computations it calls (recursively, each computation at its first call)."""
    out: list[FlatInstruction] = []
    done: set[str] = set()

    def emit(name: str) -> None:
        if name in done or name not in module.computations:
            return
        done.add(name)
        for inst in module.computations[name].instructions:
            for callee in inst.calls:
                emit(callee)
            out.append(FlatInstruction(name, inst))

    emit(module.entry)
    del emit  # the closure refers to itself: a cycle holding the module until a cyclic collection
    return out


class Call(NamedTuple):
    """Where a computation is first called in canonical order: the calling instruction, its computation and the
    attribute naming the callee (``calls``, ``body``, ``condition``, ``to_apply`` ...)."""

    computation: str
    inst: Instruction
    via: str


def first_calls(module: Module) -> dict[str, Call]:
    """Each computation reachable from ENTRY, ENTRY aside, by its first call in ``flatten``'s order: the call
    ``flatten`` places it at. Following them up from a computation gives the path from ENTRY to it."""
    out: dict[str, Call] = {}
    done: set[str] = set()

    def visit(name: str) -> None:
        done.add(name)
        for inst in module.computations[name].instructions:
            for key, value in inst.attrs if inst.calls else ():
                if key not in CALLED_COMPUTATION_KEYS:
                    continue
                for callee in referenced_names(value):
                    if callee not in done and callee in module.computations:
                        out[callee] = Call(name, inst, key)
                        visit(callee)

    visit(module.entry)
    del visit  # the closure refers to itself: a cycle holding the module until a cyclic collection
    return out


class Signer:
    """Signatures of a module's instructions: what an instruction is, independent of names and positions.

    ``parts`` splits one into comparable fields (opcode, shape, operands, literal, each attribute), so
    a diff can say which field changed; ``signature`` joins them."""

    def __init__(self, module: Module, fps: dict[str, str]):
        self.module = module
        self.fps = fps
        self._describers: dict[str, Callable[[str], str]] = {}

    def _describe(self, computation: str) -> Callable[[str], str]:
        """How an operand of ``computation`` is described: opcode, short literal and shape (each
        instruction described once, on the first call)."""
        describe = self._describers.get(computation)
        if describe is None:
            described = {}
            for op in self.module.computations[computation].instructions:
                lit = f"({op.literal})" if op.literal and len(op.literal) <= SHORT_LITERAL else ""
                described[op.name] = f"{op.opcode}{lit} {op.shape}" if op.opcode else "?"
            describe = self._describers[computation] = lambda n: described.get(n, "?")
        return describe

    def parts(self, flat: FlatInstruction) -> dict[str, str]:
        inst = flat.inst
        if not inst.opcode:
            return {"opcode": "", "text": inst.text}
        describe = self._describe(flat.computation)
        out = {"opcode": inst.opcode, "shape": inst.shape,
               "operands": "; ".join(describe(n) for n in inst.operands), "literal": inst.literal}
        for key, value in inst.attrs:
            out[key] = _canonical_value(key, value, describe, self.fps)
        return out

    def signature(self, flat: FlatInstruction) -> str:
        return " | ".join(map("=".join, self.parts(flat).items()))

    def signatures(self, flat: list[FlatInstruction], known: dict[str, list[str]]) -> list[str]:
        """``signature`` of each of ``flat``, worked out once per computation fingerprint: computations of
        equal fingerprints hold equal instructions (a layer stack's fusions; the other module's, where
        ``known`` is shared with its Signer)."""
        pending: dict[str, Iterator[str]] = {}  # computation -> its signatures, in flat's order
        out = []
        for f in flat:
            left = pending.get(f.computation)
            if left is None:
                fp = self.fps[f.computation]
                if fp not in known:
                    known[fp] = [self.signature(FlatInstruction(f.computation, inst))
                                 for inst in self.module.computations[f.computation].instructions]
                left = pending[f.computation] = iter(known[fp])
            out.append(next(left))
        return out


def entry_names_matched(a: Module, b: Module) -> dict[str, str]:
    """Each of B's ENTRY instructions' names as A's program names the instruction it aligns with, by signature
    (as diffs align them: an inserted instruction changes its own and its users' signatures), the rest by structure
    (``_structures``: the same op at other shapes), then by kind (``_kind_of``: the same op reading another input, as
    where B pads its operand first), where the two differ; a name of B's that A gives another
    instruction, and B's aligns with none of A's, is marked
    ``<name> (B's own)``: two programs number their instructions apart, so a name is one op on both sides only
    where they align. A collective aligns only with one of its kind and peers (``_exchanges``): a ring's hop
    forward is never named after one backward."""
    flat = [[FlatInstruction(m.entry, i) for i in m.entry_computation.instructions] for m in (a, b)]
    known: dict[str, list[str]] = {}
    exchanges = [_exchanges(m) for m in (a, b)]
    # a done's signature names its start by opcode and shape alone, either direction's
    signed = [[f"{s} ~ {x}" if x else s for s, x in zip(Signer(m, computation_fingerprints(m)).signatures(f, known), e)]
              for m, f, e in zip((a, b), flat, exchanges)]
    names_a = {f.inst.name for f in flat[0]}
    matcher = difflib.SequenceMatcher(None, *signed, autojunk=False)
    pairs = {b0 + k: a0 + k for tag, a0, a1, b0, b1 in matcher.get_opcodes() if tag == "equal" for k in range(b1 - b0)}
    # the ops left, in order, aligned by structure alone: the same ops at other shapes (a padding, another length)
    left_a = sorted(set(range(len(flat[0]))) - set(pairs.values()))
    left_b = [k for k in range(len(flat[1])) if k not in pairs]
    structures = [_structures(m.entry_computation.instructions, e) for m, e in zip((a, b), exchanges)]
    inner = difflib.SequenceMatcher(None, [structures[0][i] for i in left_a], [structures[1][k] for k in left_b],
                                    autojunk=False)
    pairs |= {left_b[j + k]: left_a[i + k] for i, j, n in inner.get_matching_blocks() for k in range(n)}
    # and what is still left, each structure's ops in their order (ops the padding moved past others)
    pairs |= _in_order(left_a, left_b, pairs, structures[0].__getitem__, structures[1].__getitem__)
    # and last, each kind's ops in their order whatever their operands are: an op whose input an op B inserted
    # (a padding) now gives is still A's op in that place
    pairs |= _in_order(left_a, left_b, pairs, lambda i: _kind_of(a, structures[0][i], flat[0][i].inst),
                       lambda k: _kind_of(b, structures[1][k], flat[1][k].inst))
    out: dict[str, str] = {}
    for k, f in enumerate(flat[1]):
        name = f.inst.name
        if k in pairs:
            out[name] = flat[0][pairs[k]].inst.name
        elif name in names_a:
            out[name] = f"{name} {OWN}"
    return {b_name: a_name for b_name, a_name in out.items() if b_name != a_name}


def _exchanges(module: Module) -> list[str]:
    """What each ENTRY instruction exchanges, "" where nothing: a collective's opcode and peers (its
    source_target_pairs or replica_groups, a send's or recv's pairs), an ``async-start``'s those of the op it wraps,
    a done's or update's those of its start. A ring's hops forward and backward differ here alone."""
    out: dict[str, str] = {}
    for inst in module.entry_computation.instructions:
        if inst.opcode.endswith(("-done", "-update")) and inst.operands:
            out[inst.name] = out.get(inst.operands[0], "")
            continue
        said = inst
        if inst.opcode == "async-start" and inst.calls:
            wrapped = module.computations.get(inst.calls[0])
            said = next((i for i in wrapped.instructions if i.root), inst) if wrapped else inst
        attrs = dict(said.attrs)
        peers = [attrs[k] for k in _PEER_KEYS if k in attrs]
        peers += _SEND_RECV_PEERS.findall(attrs.get("frontend_attributes", ""))
        out[inst.name] = f"{said.opcode} {' '.join(peers)}" if peers or said is not inst else ""
    return [out[i.name] for i in module.entry_computation.instructions]


def _in_order(left_a: list[int], left_b: list[int], pairs: dict[int, int], key_a: Callable[[int], str],
              key_b: Callable[[int], str]) -> dict[int, int]:
    """B's ops of ``left_b`` not yet in ``pairs`` (B's index -> A's) paired with A's of ``left_a`` not yet paired
    that have their key, each key's ops in their order."""
    by_key: dict[str, tuple[list[int], list[int]]] = {}
    for i in sorted(set(left_a) - set(pairs.values())):
        by_key.setdefault(key_a(i), ([], []))[0].append(i)
    for k in left_b:
        if k not in pairs:
            by_key.setdefault(key_b(k), ([], []))[1].append(k)
    return {k: i for ours, theirs in by_key.values() for i, k in zip(ours, theirs)}


def _kind_of(module: Module, structure: str, inst: Instruction) -> str:
    """``_structures``' entry of ``inst`` with its operands' opcodes left out, their count kept, and what the
    computations it calls do (their opcodes, counted): a fusion's kind alone tells no loop fusion from another."""
    called = sorted(i.opcode for c in inst.calls if c in module.computations
                    for i in module.computations[c].instructions)
    return f"{structure[:structure.rindex(' (')]} /{len(inst.operands)} {' '.join(called)}"


def _structures(instructions: list[Instruction], exchanges: list[str]) -> list[str]:
    """Each instruction's opcode, fusion kind or custom-call target, what it exchanges (``_exchanges``) and its
    operands' opcodes: what it is, its shapes, constants and called computations left out."""
    opcodes = {i.name: i.opcode for i in instructions}
    out = []
    for inst, exchange in zip(instructions, exchanges):
        attrs = dict(inst.attrs)
        what = attrs.get("kind") or attrs.get("custom_call_target") or ""
        out.append(f"{inst.opcode} {what} {exchange} ({', '.join(opcodes.get(o, '?') for o in inst.operands)})")
    return out
