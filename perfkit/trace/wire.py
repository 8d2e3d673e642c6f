"""Protobuf wire format: where the fields of a large message are, found in place.

``split`` finds the fields of one large message (an XSpace's planes, an XPlane's lines, an XLine's events) without
parsing it, so the events are decoded straight from the file's bytes: no protobuf object or Python ``bytes`` per
event. A run of one repeated field (a line's events) and the events' own fields are walked by the compiled loops of
``_wire`` (``run``, ``events``); a message's few other fields here, one at a time. Used by ``perfkit.trace.xplane``.
"""

from __future__ import annotations

import contextlib
import os
from typing import BinaryIO

import numpy as np

try:
    from perfkit.trace._wire import WireError, events, run
except ImportError as exc:  # a source tree run without its install step (PYTHONPATH=clone)
    raise ImportError("perfkit's compiled reader (perfkit/trace/_wire.pyx) is not built: install perfkit "
                      "(pip install -e .) or build it in place (python setup.py build_ext --inplace)") from exc

__all__ = ["VARINT", "FIXED64", "LENGTH", "FIXED32", "WireError", "events", "run", "read", "FileBytes", "field_ahead",
           "split"]

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5


def read(file: BinaryIO, offset: int, size: int) -> np.ndarray:
    """``size`` bytes of an open file from ``offset`` as a uint8 array, read straight into it (no intermediate
    bytes)."""
    buf = np.empty(size, np.uint8)
    file.seek(offset)
    if file.readinto(memoryview(buf)) != size:
        raise WireError("the file is shorter than its fields say")
    return buf


class FileBytes:
    """An open file's bytes, read where they are indexed (a block around each position, ``os.pread``):
    the heads of a large file's fields (an XSpace's planes) without reading the rest."""

    BLOCK = 1 << 16

    def __init__(self, file: BinaryIO):
        self.fd, self.size = file.fileno(), os.fstat(file.fileno()).st_size
        self._start, self._block = 0, b""

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, key: int | slice) -> int | bytes:
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.size)
            return os.pread(self.fd, max(stop - start, 0), start)
        if not self._start <= key < self._start + len(self._block):
            if not 0 <= key < self.size:
                raise IndexError(key)
            self._start = key - key % self.BLOCK
            self._block = os.pread(self.fd, self.BLOCK, self._start)
        return self._block[key - self._start]


def _varint(data: memoryview, pos: int, end: int) -> tuple[int, int]:
    """One varint at ``data[pos]`` (a message ending at ``end``) and the position after it."""
    value = shift = 0
    while pos < end and shift < 70:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if byte < 0x80:
            return value & (2**64 - 1), pos
    raise WireError("a varint runs past the end of its message")


def field_ahead(data, start: int, end: int, number: int) -> bytes | None:
    """The payload of LENGTH field ``number`` of the message ``data[start:end]`` when it comes before any
    higher-numbered field (protobuf writes fields in number order: an XPlane's name before its lines), so
    a large message's head is read without walking the rest; None where it does not."""
    with contextlib.nullcontext(data) if isinstance(data, FileBytes) else memoryview(data) as view:
        try:
            return _field_ahead(view, start, end, number)
        except WireError:  # a damaged head: the full read of the message says what is wrong
            return None


def _field_ahead(view: memoryview, start: int, end: int, number: int) -> bytes | None:
    pos = start
    while pos < end:
        tag, pos = _varint(view, pos, end)
        if tag >> 3 > number:
            return None
        wire = tag & 7
        if wire == LENGTH:
            size, pos = _varint(view, pos, end)
            if tag >> 3 == number:
                return bytes(view[pos:min(pos + size, end)])
            pos += size
        elif wire == VARINT:
            pos = _varint(view, pos, end)[1]
        elif wire in (FIXED64, FIXED32):
            pos += 8 if wire == FIXED64 else 4
        else:
            return None
    return None


def split(buf, start: int, end: int, number: int) -> tuple[np.ndarray, np.ndarray, bytes]:
    """The message ``buf[start:end]`` as the payload starts and ends (k,) int64 of its LENGTH fields
    numbered ``number`` (a repeated message: an XLine's events) and its other fields as the bytes of a
    message of their own (for protobuf: they are few and small). ``buf``: a uint8 array (runs of one
    field walked by ``run``), or any bytes-like or a ``FileBytes`` (read field by field, touching only
    the fields' heads)."""
    bulk = isinstance(buf, np.ndarray)
    data = buf.data if bulk else buf if isinstance(buf, FileBytes) else memoryview(buf)
    starts, ends, rest = [], [], []
    pos = start
    while pos < end:
        tag, after = _varint(data, pos, end)
        wire = tag & 7
        if wire == LENGTH and bulk and tag < 0x80:  # a run of one field in one go
            s, e, nxt = run(buf, pos, end, tag)
        elif wire == LENGTH:
            size, payload = _varint(data, after, end)
            nxt = payload + size
            s, e = np.array([payload]), np.array([nxt])
        elif wire == VARINT:
            nxt = _varint(data, after, end)[1]
        elif wire in (FIXED64, FIXED32):
            nxt = after + (8 if wire == FIXED64 else 4)
        else:
            raise WireError(f"a field of unknown wire type {wire}")
        if nxt > end:
            raise WireError("a field runs past the end of its message")
        if wire == LENGTH and tag >> 3 == number:
            starts.append(s)
            ends.append(e)
        else:
            rest.append(data[pos:nxt])
        pos = nxt
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), b"".join(rest)
    return np.concatenate(starts), np.concatenate(ends), b"".join(rest)
