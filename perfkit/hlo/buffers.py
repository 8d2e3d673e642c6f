"""Buffer assignment (``*-buffer-assignment.txt``, ``*-memory-usage-report.txt``): where collectives receive.

A collective writes into its peer at the receive offset of the *writer's* program. When one rank's
program grows (an extra copy, a pad fusion), its temp allocation grows and its receive buffers move;
peers then write onto live buffers. So per rank we read the total temp size and the offset of every
collective's receive buffer, and compare them across ranks.

Formats read (XLA ``BufferAssignment::ToString``):
``allocation 3: size 69632, preallocated-temp:`` then
`` value: <14 ppermute.3 @0> (size=4096,offset=65536): f32[8,128]{1,0}``; a tuple-shaped value carries
its shape index after the name (``<7 collective-permute-start.1{1} @0>``).

Nothing marks where a whole file ends: XLA writes the allocations alone there, the last one's last value its
last line, and the totals in the files beside it. It places the temp allocations last, so a file cut at a line end
loses them first and reads as a smaller temp. So its allocations must add up to the total of the memory-usage
report beside it (``Total bytes: N``, one per memory space); a file whose do not is refused.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import NamedTuple, Sequence

from perfkit.errors import BadInput
from perfkit.hlo.fingerprint import FlatInstruction
from perfkit.hlo.parse import read_text

# Collective opcodes (sync, async start, and the generic async wrapper) and which part of their output
# is the receive buffer: a shape-index prefix. Sync ops receive into their whole output; tuple-shaped
# ``*-start`` ops return (operands, output, ...contexts), so output {1}; recv returns (buffer, context,
# token), send (data, context, token).
COLLECTIVES = ("collective-permute", "all-gather", "all-to-all", "ragged-all-to-all", "reduce-scatter",
               "all-reduce", "collective-broadcast", "send", "recv")
RECEIVE_INDEX = {**{c: "" for c in COLLECTIVES}, **{c + "-start": "1" for c in COLLECTIVES},
                 "send": "0", "recv": "0", "async-start": "1"}

_ALLOCATION = re.compile(r"^allocation (\d+): size (\d+)(.*)$", re.M)
_VALUE = re.compile(r"^ value: <\d+ ([^\s{>]+)(\{[\d,]*\})?[^>]*> \(size=(\d+),offset=(\d+)\)(?:: (.*))?", re.M)
_TOTAL = re.compile(r"^Total bytes: (\d+)", re.M)  # one per memory space


class Value(NamedTuple):
    """One HLO value placed in an allocation."""

    allocation: int
    index: str    # shape index inside a tuple-shaped output, "" for the whole output ("1", "1,0")
    size: int
    offset: int


class Allocation(NamedTuple):
    """One allocation as it is told apart from the others of its program across ranks. XLA numbers allocations in
    order, so one more on a rank renumbers every later one: the number names it in its own file only."""

    number: int
    size: int
    kind: str  # what the head line says after the size: ``preallocated-temp, color 1``, ``parameter 0, shape ...``
    # its values' (offset, size, shape), sorted; a digest of them in a rank's summary (``load.Summary``)
    contents: tuple[tuple[int, int, str], ...] | bytes


class BufferAssignment(NamedTuple):
    temp_bytes: int                          # all preallocated-temp allocations
    allocated_bytes: int                     # all allocations
    values: dict[str, list[Value]]           # by defining instruction name
    allocations: list[Allocation]


class ReceiveBuffer(NamedTuple):
    """A collective's receive buffer, named so that it matches across ranks."""

    label: str    # ``collective-permute #2`` (the kind and its place among that kind, canonical order)
    instruction: str
    index: str
    size: int
    allocation: int  # where it receives is (allocation, offset): one offset in two allocations is two places
    offset: int


def parse_buffer_assignment(text: str, path: str = "<text>") -> BufferAssignment:
    heads = list(_ALLOCATION.finditer(text))
    if not heads:
        raise BadInput("no 'allocation N: size S' lines: not a buffer-assignment dump", path=path)
    temp = allocated = 0
    values: dict[str, list[Value]] = {}
    allocations = []
    for k, head in enumerate(heads):
        alloc, size, flags = int(head.group(1)), int(head.group(2)), head.group(3)
        allocated += size
        if "preallocated-temp" in flags:
            temp += size
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        contents = []
        for v in _VALUE.finditer(text, head.end(), end):
            index = (v.group(2) or "{}")[1:-1]
            values.setdefault(v.group(1), []).append(Value(alloc, index, int(v.group(3)), int(v.group(4))))
            contents.append((int(v.group(4)), int(v.group(3)), v.group(5) or ""))
        allocations.append(Allocation(alloc, size, flags.strip(" ,:"), tuple(sorted(contents))))
    return BufferAssignment(temp, allocated, values, allocations)


def read_buffer_assignment(path: str | Path, memory_report: Path | None = None) -> BufferAssignment:
    """A buffer-assignment file, checked whole against the memory-usage report beside it where there is one."""
    text = read_text(path)
    if text and not text.endswith("\n"):
        # XLA ends every line it writes: a last line without its end is a file cut short
        raise BadInput("its last line is cut short (truncated file?)", path=str(path))
    assignment = parse_buffer_assignment(text, str(path))
    total = None if memory_report is None else read_total_bytes(memory_report)
    if total is not None and assignment.allocated_bytes != total:
        raise BadInput(f"its allocations add up to {assignment.allocated_bytes:,} B where the memory-usage report "
                       f"beside it ({memory_report.name}) says {total:,} B: lines are missing (a file cut short at a "
                       "line end?)", path=str(path))
    return assignment


def read_total_bytes(path: str | Path) -> int | None:
    """All allocated bytes from a memory-usage report, summed over memory spaces (None when it does not say)."""
    totals = [int(m.group(1)) for m in _TOTAL.finditer(read_text(path))]
    return sum(totals) if totals else None


def collective_kind(flat: FlatInstruction, root_opcodes: dict[str, str]) -> str | None:
    """The collective an instruction performs (``all-gather`` for ``all-gather-start`` and for an
    ``async-start`` wrapping one), or None."""
    op = flat.inst.opcode
    if op == "async-start":
        wrapped = root_opcodes.get(flat.inst.calls[0]) if flat.inst.calls else None
        return wrapped if wrapped in COLLECTIVES else None
    if op in RECEIVE_INDEX:
        return op.removesuffix("-start")
    return None


def collectives(flat: list[FlatInstruction], root_opcodes: dict[str, str]) -> list[tuple[str, FlatInstruction]]:
    """(kind, instruction) of every collective in canonical order; the collective inside a computation
    that an ``async-start`` wraps is counted once, as its ``async-start``."""
    wrapped = {c for f in flat if f.inst.opcode == "async-start" for c in f.inst.calls}
    out = []
    for f in flat:
        kind = collective_kind(f, root_opcodes)
        if kind is not None and f.computation not in wrapped:
            out.append((kind, f))
    return out


def receive_buffers(flat: list[FlatInstruction], root_opcodes: dict[str, str],
                    assignment: BufferAssignment, path: str = "<text>") -> list[ReceiveBuffer]:
    """Every collective's receive buffer(s), labelled by kind and order (``all-gather #1``). A collective
    outside fusions that the assignment gives no buffer is ``BadInput``: the file was cut short (else its
    receive buffers would read as moved) or belongs to another program."""
    fused = {c for f in flat if f.inst.opcode == "fusion" for c in f.inst.calls}
    seen: dict[str, int] = {}
    out = []
    for kind, f in collectives(flat, root_opcodes):
        seen[kind] = seen.get(kind, 0) + 1
        if f.inst.name not in assignment.values and f.computation not in fused:
            raise BadInput(f"no buffer for {f.inst.name}, a collective of the program beside it "
                           "(truncated file, or another program's buffer assignment?)", path=path)
        # A start op with an array output (all-reduce-start) receives into all of it.
        prefix = RECEIVE_INDEX[f.inst.opcode] if f.inst.shape.startswith("(") else ""
        for v in assignment.values.get(f.inst.name, ()):
            if v.index == prefix or v.index.startswith(prefix + ",") or not prefix:
                out.append(ReceiveBuffer(f"{kind} #{seen[kind]}", f.inst.name, v.index, v.size, v.allocation,
                                         v.offset))
    return out


class AllocationPairs:
    """Two ranks' allocations paired by what they are, not by number. Within a kind (the head line but for the
    size), one on each side pairs; of several, the one alike in contents, then the one alike in size, where it is
    the only such on each side; the last of a kind on each side pairs with the other's. The rest stay unpaired:
    which is which cannot be told from the files."""

    def __init__(self, a: Sequence[Allocation], b: Sequence[Allocation]):
        self.kind_a, self.kind_b = ({x.number: x.kind for x in side} for side in (a, b))
        self.pairs: dict[int, int] = {}
        by_kind: tuple[dict[str, list[Allocation]], ...] = ({}, {})
        for side, allocations in zip(by_kind, (a, b)):
            for x in allocations:
                side.setdefault(x.kind, []).append(x)
        for kind, la in by_kind[0].items():
            lb = by_kind[1].get(kind, [])
            for key in (lambda x: (x.size, x.contents), lambda x: x.size):
                count_a, count_b = Counter(map(key, la)), Counter(map(key, lb))
                of_b = {key(y): y.number for y in lb}
                self.pairs.update({x.number: of_b[key(x)] for x in la if count_a[key(x)] == count_b[key(x)] == 1})
                taken = set(self.pairs.values())
                la, lb = [x for x in la if x.number not in self.pairs], [y for y in lb if y.number not in taken]
            if len(la) == len(lb) == 1:
                self.pairs[la[0].number] = lb[0].number
        self.paired_b = set(self.pairs.values())

    def same(self, xa: ReceiveBuffer, xb: ReceiveBuffer) -> bool | None:
        """Whether A's buffer and B's sit in one allocation (its counterpart), False where B's is another kind of
        allocation or one paired with another of A's; None where A's has no counterpart and B's could be it."""
        paired = self.pairs.get(xa.allocation)
        if paired is not None:
            return paired == xb.allocation
        if self.kind_a[xa.allocation] != self.kind_b[xb.allocation] or xb.allocation in self.paired_b:
            return False
        return None

    def same_places(self, a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> bool:
        """Whether B's receive places, (allocation number, offset) each, are A's: each at A's offset, in the
        allocation paired with A's (``same`` True of every one); False where one moved or cannot be told."""
        return len(a) == len(b) and all(self.pairs.get(na) == nb and oa == ob for (na, oa), (nb, ob) in zip(a, b))
