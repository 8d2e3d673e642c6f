"""XLA HLO text (``*after_optimizations.txt``) into modules, computations and instructions.

Written for the dumps XLA writes on CPU, GPU and TPU: operands printed with or without their shapes and
``%`` sigils, tuple shapes, tiled layouts with memory spaces (``{1,0:T(8,128)(2,1)S(1)}``), async
``*-start`` / ``*-done`` pairs, ``backend_config`` JSON (bare or quoted), ``control-predecessors``,
``replica_groups`` (list, iota or mesh-axes form), ``source_target_pairs`` and computations called by fusions,
while, conditional and async ops. ``metadata={...}`` and the FileNames / FunctionNames / FileLocations /
StackFrames sections are dropped: they hold source paths and line numbers, not the program.

An instruction line the parser does not understand is kept whole as opaque text (``opcode == ""``),
never a crash. A file that is not HLO text as XLA dumps it is refused, as ``BadInput`` naming the file and
the line: no ``HloModule`` line, or a second one (a dump holds one module); no ENTRY computation; a
computation left open at the end; an instruction that goes on over the next line (a line ending in a comma,
or leaving a bracket open before a line that is no instruction: hand-written HLO, whose later lines would be
misread); a name defined twice in
a computation; a call of a computation the file does not hold (its ops would be left out of every figure).
Stdlib only: ``perfkit hlo-diff`` must start fast and never import jax, torch or pandas.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import NamedTuple

from perfkit.errors import BadInput

# Attributes whose values name computations (``calls=%fused_computation``, ``branch_computations={..}``).
CALLED_COMPUTATION_KEYS = frozenset({
    "calls", "to_apply", "condition", "body", "branch_computations", "true_computation",
    "false_computation", "called_computations", "select", "scatter", "comparator",
})
# Attributes whose values name instructions of the same computation.
INSTRUCTION_REF_KEYS = frozenset({"control-predecessors"})
# The attributes that make a collective what it is beside its opcode and shape: who it exchanges with, along which
# dimensions, reducing how (``collective_attrs``).
COLLECTIVE_ATTRS = ("replica_groups", "source_target_pairs", "dimensions", "to_apply")
# Ops whose parenthesised text is a literal, not operand names.
LITERAL_OPCODES = frozenset({"constant", "parameter"})

_MODULE = re.compile(r"HloModule\s+([^\s,]+)")
# The device counts an HloModule line names (XLA prints each only where it is not 1).
_COUNTS = {key: re.compile(rf"\b{key}=(\d+)") for key in ("replica_count", "num_partitions")}
_COMPUTATION = re.compile(r"(ENTRY\s+)?%?([^\s(]+)\s*(?:\(.*\))?(?:\s*->\s*.*?)?\s*\{\s*$")
_LHS = re.compile(r"\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*")
_ARRAY_SHAPE = re.compile(r"[A-Za-z][A-Za-z0-9]*\[[^\]]*\](?:\{[^{}]*\})?")
# A tuple of array shapes whose layouts hold parentheses at most one deep (``(bf16[8]{0:T(8)(2,1)}, u32[]{:S(2)})``):
# the brackets ``_split_top`` would balance, so it ends where _split_top says the tuple ends.
_TUPLE_ELEMENT = r'[A-Za-z][A-Za-z0-9]*\[[^\[\](){}"]*\](?:\{[^{}()\[\]"]*(?:\([^{}()\[\]"]*\)[^{}()\[\]"]*)*\})?'
_FLAT_TUPLE = rf'\((?:{_TUPLE_ELEMENT}(?:,\s*{_TUPLE_ELEMENT})*)?\)'
_OPCODE = re.compile(r"\s*([a-z][a-z0-9_\-]*)\(")
# Possessive (*+, ++): an unclosed metadata={... (a truncated line) fails in linear time; backtracking
# into the nested repeats took exponential time (minutes for one 200-character line).
_METADATA = re.compile(r',?\s*metadata=\{(?:[^{}"]++|"(?:[^"\\]++|\\.)*+")*+\}')
# The usual instruction in one match (what _LHS, _ARRAY_SHAPE and _OPCODE match one after the other):
# ``name = f32[8]{0} opcode(`` then operands without brackets or quotes, up to the first ``)``.
_SIMPLE = re.compile(r'\s*(ROOT\s+)?%?([^\s=]+)\s*=\s*(' + _ARRAY_SHAPE.pattern + '|' + _FLAT_TUPLE + r')'
                     r'\s*([a-z][a-z0-9_\-]*)\(([^({")]*)\)')
_ATTRIBUTE_START = re.compile(r",\s*(?=[\w\-]+=)")
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[()\[\]{},]')
_BRACKET = re.compile(r'[()\[\]{}"]')
_NAME_REF = re.compile(r"%([\w.\-]+)")
_BARE_REF = re.compile(r"[A-Za-z_][\w.\-]*")
_CLOSE = {"(": ")", "[": "]", "{": "}"}


class Instruction(NamedTuple):
    """One HLO instruction as printed, ``metadata`` dropped."""

    name: str
    shape: str                          # as printed, layout included: ``f32[8,128]{1,0}``, ``(f32[], u32[])``
    opcode: str                         # "" for a line kept as opaque text
    operands: tuple[str, ...]           # names of the operand instructions
    literal: str                        # the parenthesised text of constant / parameter ("0", "{1, 2}")
    attrs: tuple[tuple[str, str], ...]  # (key, value) in printed order
    calls: tuple[str, ...]              # names of the computations it calls (fusion, while, async ...)
    root: bool
    line: int                           # 1-based line in the file
    text: str                           # the line without metadata, for display


# Builds an Instruction without its NamedTuple ``__new__``, a Python function called once a line
# (benchmarks/hlo_rank_diff.py).
_new = tuple.__new__
# Shapes, opcodes and attribute keys repeat on every line of a module: interned, each is one object, not one a
# line: less memory and fewer page faults (benchmarks/hlo_rank_diff.py).
_intern = sys.intern


class Computation(NamedTuple):
    name: str
    entry: bool
    instructions: list[Instruction]
    line: int


class Module(NamedTuple):
    """One HLO module: its computations in printed order (callees come before their callers)."""

    name: str
    path: str
    computations: dict[str, Computation]
    entry: str
    header: str         # its HloModule line, which names the module's replica_count and num_partitions

    @property
    def entry_computation(self) -> Computation:
        return self.computations[self.entry]

    @property
    def counts(self) -> dict[str, int] | None:
        """The devices it was compiled for, off its HloModule line: ``{replica_count, num_partitions}``, 1 where one
        is unsaid beside the other (XLA prints each only where it is not 1); None where neither is said (a
        one-device program, or one printed from its HloProto, which keeps no module config)."""
        found = {key: count.search(self.header) for key, count in _COUNTS.items()}
        if not any(found.values()):
            return None
        return {key: int(m.group(1)) if m else 1 for key, m in found.items()}

    def root_opcodes(self) -> dict[str, str]:
        """Each computation's ROOT opcode (what an ``async-start`` wraps)."""
        return {c.name: next((i.opcode for i in c.instructions if i.root), "") for c in self.computations.values()}


def _split_top(text: str, start: int = 0) -> tuple[list[str], int]:
    """Split ``text[start:]`` at top-level commas, stopping at an unmatched closing bracket.

    Returns the parts and the index of that closing bracket (``len(text)`` when there is none).
    Raises ValueError when the brackets do not balance."""
    parts, depth, stack, begin = [], 0, [], start
    for m in _TOKENS.finditer(text, start):
        tok = m.group()
        if tok == ",":
            if depth == 0:
                parts.append(text[begin:m.start()])
                begin = m.end()
        elif tok in _CLOSE:
            stack.append(_CLOSE[tok])
            depth += 1
        elif tok in ")]}":
            if depth == 0:
                parts.append(text[begin:m.start()])
                return parts, m.start()
            if stack.pop() != tok:
                raise ValueError("brackets do not match")
            depth -= 1
    if depth:
        raise ValueError("brackets are not closed")
    parts.append(text[begin:])
    return parts, len(text)


def tuple_elements(shape: str) -> list[str]:
    """The top-level elements of a printed tuple shape: ``((f32[2], f32[4]), u32[])`` holds ``(f32[2], f32[4])``
    and ``u32[]``. ValueError where its brackets do not balance."""
    return [part.strip() for part in _split_top(shape, 1)[0]]


def _balanced(text: str) -> bool:
    return (text.count("{") == text.count("}") and text.count("(") == text.count(")")
            and text.count("[") == text.count("]") and text.count('"') % 2 == 0)


def _operand_names(text: str) -> tuple[str, ...]:
    """Operand names from ``%a, %b``, ``f32[8]{0} %a, f32[] %b`` or ``a, b`` (no sigils)."""
    if "%" in text:
        return tuple(_NAME_REF.findall(text))
    if not text.strip():
        return ()
    parts = text.split(",") if "[" not in text and "{" not in text else _split_top(text)[0]
    return tuple(p.split()[-1] for p in parts if p.strip())


def _attributes(text: str) -> tuple[tuple[str, str], ...]:
    """``, key=value, key={...}`` after the operands, split at top-level commas only."""
    text = text.strip()
    if not text:
        return ()
    # Fast path: split before each ``, key=``; checked by bracket balance (where there are brackets or
    # quotes at all), else split properly.
    text = text.lstrip(", ")
    parts = _ATTRIBUTE_START.split(text)
    if _BRACKET.search(text) and not all(map(_balanced, parts)):
        parts = _split_top(text)[0]
    out = []
    for part in parts:
        key, eq, value = part.strip().partition("=")
        if key == "device_ids" and out and out[-1][0] == "replica_groups" and out[-1][1].startswith("mesh["):
            # a mesh's device order inside mesh-axes replica groups (``mesh[a=2,b=2], device_ids=(..) {b}``)
            out[-1] = ("replica_groups", f"{out[-1][1]}, {part.strip()}")
        elif key:
            out.append((_intern(key), value) if eq else ("", key))
    return tuple(out)


def _without_metadata(line: str) -> str:
    """``line`` less ``metadata={...}``: the regex runs from the first ``metadata=`` (and the comma and
    spaces before it) only, where a match can start; scanning the whole line was a third of the parse."""
    at = line.find("metadata=")
    if at < 0:
        return line
    start = at
    while start and line[start - 1].isspace():
        start -= 1
    if start and line[start - 1] == ",":
        start -= 1
    # The usual ``metadata={op_type="add" source_line=9}``, with no braces or escapes before its first ``}``
    # and quotes in pairs, ends there (where the regex's match would), and no other follows: cut it out.
    close = line.find("}", at)
    body = line[at + 10:close]
    if (close > 0 and line.startswith("{", at + 9) and "{" not in body and "\\" not in body
            and body.count('"') % 2 == 0 and line.find("metadata=", close) < 0):
        return line[:start] + line[close + 1:]
    return line[:start] + _METADATA.sub("", line[start:])


def _head(text: str, pos: int) -> tuple[str, str, str, int]:
    """(shape, opcode, operand text, where the attributes start) of the text after ``name =`` at ``pos``;
    ValueError where that is not an instruction."""
    if text.startswith("(", pos):
        end = _split_top(text, pos + 1)[1]
        shape, pos = text[pos:end + 1], end + 1
    else:
        m = _ARRAY_SHAPE.match(text, pos)
        if m is None:
            raise ValueError("no shape")
        shape, pos = m.group(), m.end()
    op = _OPCODE.match(text, pos)
    if op is None:
        raise ValueError("no opcode")
    close = text.find(")", op.end())
    inner = text[op.end():close] if close >= 0 else ""
    if close < 0 or "(" in inner or "{" in inner or '"' in inner:
        close = _split_top(text, op.end())[1]
        inner = text[op.end():close]
    if close >= len(text):
        raise ValueError("operands are not closed")
    return shape, op.group(1), inner, close + 1


def parse_instruction(line: str, lineno: int) -> Instruction:
    """One instruction line; an opaque Instruction (``opcode == ""``) where the syntax is unknown."""
    text = _without_metadata(line).strip()
    simple = _SIMPLE.match(text)
    if simple is None:
        lhs = _LHS.match(text)
        if lhs is None:
            return Instruction("", "", "", (), "", (), (), False, lineno, text)
        root, name = bool(lhs.group(1)), lhs.group(2)
    else:
        root, name, shape, opcode, inner = simple.groups()
        root = bool(root)
    try:
        if simple is None:
            shape, opcode, inner, rest = _head(text, lhs.end())
        else:
            rest = simple.end()
        if opcode in LITERAL_OPCODES:
            operands, literal = (), inner.strip()
        else:
            operands, literal = _operand_names(inner), ""
        attrs = _attributes(text[rest:])
    except ValueError:
        return Instruction(name, "", "", (), "", (), (), root, lineno, text)
    calls = tuple([n for key, value in attrs if key in CALLED_COMPUTATION_KEYS for n in referenced_names(value)]
                  if attrs else ())
    return _new(Instruction, (name, _intern(shape), _intern(opcode), operands, literal, attrs, calls, root, lineno,
                              text))


def parse_module(text: str, path: str | Path = "<text>") -> Module:
    """Parse one module's HLO text. ``path`` names the file in errors."""
    path = str(path)
    name = header = None
    computations: dict[str, Computation] = {}
    entry = None
    current: Computation | None = None
    lines = text.splitlines()
    for lineno, line in enumerate(lines, 1):
        if current is not None:
            stripped = line.strip()
            if stripped.startswith("}"):
                computations[current.name] = current
                current = None
            elif stripped:
                inst = parse_instruction(line, lineno)
                if inst.text.endswith(",") or (not inst.opcode and not _balanced(inst.text)):
                    _goes_on(inst, lines, path)
                current.instructions.append(inst)
            continue
        m = _MODULE.match(line)
        if name is None:
            if m:
                name, header = m.group(1), line.rstrip()
            continue
        if m:
            raise BadInput(f"line {lineno}: a second HloModule ({m.group(1)} after {name}); a dump file holds one "
                           "module", path=path)
        if line[:1].isspace() or not line.rstrip().endswith("{"):
            continue  # FileNames / StackFrames sections, blank lines, anything else between computations
        m = _COMPUTATION.match(line.rstrip())
        if m is None:
            continue
        current = Computation(m.group(2), bool(m.group(1)), [], lineno)
        if current.entry:
            entry = current.name
    if name is None:
        raise BadInput("not an HLO text dump: no 'HloModule' line", path=path)
    if current is not None:
        raise BadInput(f"line {current.line}: computation {current.name} is not closed (truncated file?)",
                       path=path)
    if entry is None:
        raise BadInput("no ENTRY computation", path=path)
    _check_names(computations, path)
    return Module(name, path, computations, entry, header)


def _goes_on(inst: Instruction, lines: list[str], path: str) -> None:
    """BadInput where an instruction that ends in a comma or leaves a bracket open goes on over the next line (a
    line that is no instruction and closes no computation); an opaque line of its own (the next one an
    instruction) is kept, and so is the last line of a file cut inside it (its computation left open: refused as
    truncated)."""
    after = next((line.strip() for line in lines[inst.line:] if line.strip()), None)
    if after is None:
        return
    if inst.text.endswith(",") or not (after.startswith("}") or parse_instruction(after, 0).opcode):
        raise BadInput(f"line {inst.line}: an instruction goes on over the next line; perfkit reads HLO as XLA "
                       "dumps it, an instruction a line", path=path)


def _check_names(computations: dict[str, Computation], path: str) -> None:
    """BadInput where a computation defines a name twice or an instruction calls a computation the module
    does not hold."""
    for c in computations.values():
        seen: dict[str, int] = {}
        for i in c.instructions:
            if i.name in seen and i.name:
                raise BadInput(f"line {i.line}: {i.name} is defined twice in {c.name} (first at line {seen[i.name]})",
                               path=path)
            seen[i.name] = i.line
            missing = next((n for n in i.calls if n not in computations), None)
            if missing is not None:
                raise BadInput(f"line {i.line}: {i.name} calls {missing}, a computation this file does not hold",
                               path=path)


def read_text(path: str | Path) -> str:
    """A dump file's text; a missing, unreadable or binary file is ``BadInput``."""
    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise BadInput("no such file", path=str(path)) from None
    except UnicodeDecodeError:
        raise BadInput("not a text file: not UTF-8, as XLA's text dumps are", path=str(path)) from None
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror}", path=str(path)) from None


def read_module(path: str | Path) -> Module:
    """Parse an HLO text file."""
    return parse_module(read_text(path), path)


def collective_attrs(inst: Instruction, roots: dict[str, str]) -> tuple[tuple[str, str], ...]:
    """``inst``'s ``COLLECTIVE_ATTRS`` it has, in that order; its reducer (``to_apply``) by the opcode it computes
    (``add``, from ``Module.root_opcodes``' ``roots``), as its name differs from one program to the next."""
    attrs = dict(inst.attrs)
    if "to_apply" in attrs:
        attrs["to_apply"] = roots.get(attrs["to_apply"].lstrip("%"), attrs["to_apply"])
    return tuple((k, attrs[k]) for k in COLLECTIVE_ATTRS if k in attrs)


def referenced_names(value: str) -> list[str]:
    """Names of computations or instructions in an attribute value (``{%a, %b}``, ``%a``, ``a``)."""
    if "%" in value:
        return _NAME_REF.findall(value)
    return _BARE_REF.findall(value)
