"""One key for dumps that differ only in naming: ranks that printed one program, each numbering its own way.

Separate processes may name one program's instructions apart (``fusion.12`` on one rank, ``fusion.20``
on another) and print different metadata and source sections. What ranks are compared by (the
fingerprint, the counts, the receive offsets, the temp size) reads none of that, so such files are one
input: ``load`` parses one of them, not each. The key is a digest of a module's three files with

- every ``%name`` replaced by the order in which it first appears (so the operands' order still counts:
  ``add(%a, %b)`` and ``add(%b, %a)`` differ) and, in the buffer assignment and memory report, where
  names print bare, every word that is one of those names;
- what the parser drops left out: ``metadata={...}`` (cut where the parser cuts it), a computation's
  parameter list on its first line (the parser reads only its name there) and the FileNames /
  FunctionNames / FileLocations / StackFrames sections before the first computation.

Equal keys mean the files are equal but for a one-to-one renaming: their parses differ in names only.
Two readings differ from the fingerprint's, both toward "the same program": a line the parser keeps whole
as opaque text is compared as printed by the fingerprint, names included, and renamed here; and a
computation's first line is taken to be what XLA prints there, an unindented line ending in ``{`` (its
parameter list is left out wherever such a line is). A key costs about a third of a parse: it pays off
wherever two ranks' files are one program (benchmarks/hlo_rank_diff.py; its scenario 8-programs is the case
where none are, every file keyed and then parsed).
"""

from __future__ import annotations

import hashlib
import re
from array import array

from perfkit.hlo.dumps import DumpFiles
from perfkit.hlo.parse import read_text

_NAME = re.compile(r"%([\w.\-]+)")
_WORD = re.compile(r"([A-Za-z_][\w.\-]*)")
# The parser's metadata pattern, kept within one line (the parser cuts it line by line); the comma before it
# stays, as cheap to keep as to match (a pattern starting at an optional comma is tried at every character).
_METADATA = re.compile(r'metadata=\{(?:[^{}"\n]++|"(?:[^"\\\n]++|\\.)*+")*+\}')
# A computation's first line, ``%fused_add.3 (param_0.7: f32[8], param_1.2: f32[8]) -> f32[8] {``: its
# parameters print without ``%`` (their instructions, below it, print with one).
_PARAMETER_LIST = re.compile(r"\n((?:ENTRY[^\S\n]+)?%?[^\s(]+[^\S\n]*)\(.*\)([^\S\n]*->.*\{[^\S\n]*)(?=\n)")
_SECTION = re.compile(r"\n(?:FileNames|FunctionNames|FileLocations|StackFrames)\n(?:\d[^\n]*\n)*")
_COMPUTATION_START = re.compile(r"\n\S[^\n]*\{[^\S\n]*\n")


def renamed_key(files: DumpFiles) -> str:
    """The digest of ``files`` that ranks printing one program under other names share (BadInput where a
    file cannot be read as text)."""
    digest = hashlib.blake2b(digest_size=16)

    def feed(data: bytes) -> None:  # each part with its length: no two different sequences of parts alike
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)

    text = read_text(files.hlo)
    first = _COMPUTATION_START.search(text)
    cut = first.start() if first else len(text)
    text = _SECTION.sub("\n", text[:cut]) + _PARAMETER_LIST.sub(r"\n\1\2", _METADATA.sub("", text[cut:]))
    parts = _NAME.split(text)
    order: dict[str, int] = {}
    _feed_parts(feed, parts[::2])
    feed(array("q", [order.setdefault(name, len(order)) for name in parts[1::2]]).tobytes())
    for path in (files.buffer_assignment, files.memory_report):
        if path is None:
            feed(b"")
            continue
        parts = _WORD.split(read_text(path))
        words = parts[1::2]
        _feed_parts(feed, parts[::2])
        _feed_parts(feed, ["" if word in order else word for word in words])
        feed(array("q", [order.get(word, -1) for word in words]).tobytes())
    return digest.hexdigest()


def _feed_parts(feed, parts: list[str]) -> None:
    feed(array("q", map(len, parts)).tobytes())
    feed("".join(parts).encode())
