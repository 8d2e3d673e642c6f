"""Protobuf wire format decoded for many small messages at once, with numpy.

A trace line holds up to millions of ``XEvent`` messages. Touching each through protobuf's Python
objects costs about a microsecond per field; here every message of a batch advances one field per
numpy round instead (messages have 3 to 12 fields), and a varint is decoded from the 8 bytes at its
position read as one little-endian word (bit tricks, no per-byte loop). Used by
``perfkit.trace.xplane`` for events and their stats.
"""

from __future__ import annotations

from typing import Iterator, NamedTuple

import numpy as np

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_PAD = 16  # zero bytes after the data: 8-byte word reads near the end stay inside the buffer
_U = np.uint64
_HIGH_BITS, _LOW7 = _U(0x8080808080808080), _U(0x7F7F7F7F7F7F7F7F)
# Three rounds of merging neighbouring 7-bit groups turn the 8 payload bytes into one 56-bit value.
_COMPACT = [(_U(0x007F007F007F007F), _U(0x7F007F007F007F00), _U(1)),
            (_U(0x00003FFF00003FFF), _U(0x3FFF00003FFF0000), _U(2)),
            (_U(0x000000000FFFFFFF), _U(0x0FFFFFFF00000000), _U(4))]


class WireError(ValueError):
    """The bytes are not the protobuf messages they should be (truncated or foreign)."""


class Fields(NamedTuple):
    """The k-th field of every message that has one, as parallel arrays of one decoding round."""

    msg: np.ndarray     # (m,) int64: index of the message the field belongs to
    number: np.ndarray  # (m,) int64: field number
    wire: np.ndarray    # (m,) int64: wire type
    value: np.ndarray   # (m,) uint64: varint value, fixed64/32 raw bits, or payload length (LENGTH)
    data: np.ndarray    # (m,) int64: position of the payload (LENGTH) in the buffer

    def put(self, number: int, target: np.ndarray) -> None:
        """``target[msg] = value`` (as target's dtype bits) for this round's fields numbered ``number``."""
        value = self.value.view(np.int64) if target.dtype == np.int64 else self.value
        if (self.number == number).all():
            target[self.msg] = value
        else:
            sel = self.number == number
            target[self.msg[sel]] = value[sel]


def padded(chunks: list[bytes] | bytes) -> np.ndarray:
    """Bytes as a uint8 array with zero padding after the end (needed by ``varints``)."""
    joined = chunks if isinstance(chunks, bytes) else b"".join(chunks)
    return np.frombuffer(joined + bytes(_PAD), np.uint8)


def _words(buf: np.ndarray) -> np.ndarray:
    """The little-endian uint64 starting at every byte of ``buf`` (an overlapping, unaligned view)."""
    return np.ndarray(shape=(buf.size - 7,), dtype="<u8", buffer=buf, strides=(1,))


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each of ``pos`` (m,) int64 in ``buf`` (n,) uint8 (padded); returns the
    values (m,) uint64 and the positions just after them (m,) int64."""
    word = _words(buf)[pos]
    stop = ~word & _HIGH_BITS                  # high bit clear: the varint's last byte
    first_stop = stop & (~stop + _U(1))        # lowest such bit
    keep = (first_stop << _U(1)) - _U(1)       # all bits up to it (all ones when no stop in 8 bytes)
    value = word & keep & _LOW7
    for low, high, shift in _COMPACT:
        value = (value & low) | ((value & high) >> shift)
    end = pos + (np.bitwise_count(keep) >> 3).astype(np.int64)
    long = np.flatnonzero(stop == 0)           # 9 or 10 bytes: negative int64, values >= 2**56
    if long.size:
        tail = buf[pos[long] + 8].astype(_U)
        last = buf[pos[long] + 9].astype(_U)
        if ((tail >= 0x80) & (last >= 0x80)).any():
            raise WireError("a varint longer than 10 bytes")
        value[long] |= (tail & _U(0x7F)) << _U(56)
        tenth = tail >= 0x80
        value[long[tenth]] |= (last[tenth] & _U(1)) << _U(63)
        end[long] += 1 + tenth
    return value, end


def fields(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> Iterator[Fields]:
    """Walk the messages ``buf[starts[i]:ends[i]]`` (starts, ends: (n,) int64) field by field: round k
    yields the k-th field of every message that has at least k fields."""
    pos = starts.astype(np.int64, copy=True)
    live = np.flatnonzero(pos < ends)
    while live.size:
        at = pos[live]
        tag = buf[at]
        if (tag >= 0x80).any():  # field numbers >= 16: multi-byte tags
            wide, after = varints(buf, at)
        else:
            wide, after = tag.astype(_U), at + 1
        number, wire = (wide >> _U(3)).astype(np.int64), (wide & _U(7)).astype(np.int64)
        kinds = np.bincount(wire, minlength=8)
        if kinds[FIXED64] or kinds[FIXED32]:  # decode varints only where there are some
            value, nxt = np.zeros(live.size, _U), after.copy()
            sel = (wire == VARINT) | (wire == LENGTH)
            value[sel], nxt[sel] = varints(buf, after[sel])
        else:
            value, nxt = varints(buf, after)
        data = nxt
        if kinds[LENGTH]:
            nxt = nxt + np.where(wire == LENGTH, value.view(np.int64), 0)
        for wtype, size in ((FIXED64, 8), (FIXED32, 4)):
            if kinds[wtype]:
                sel = wire == wtype
                raw = _words(buf)[after[sel]]
                value[sel] = raw if size == 8 else raw & _U(0xFFFFFFFF)
                nxt[sel] = after[sel] + size
        if kinds[[3, 4, 6, 7]].any() or (nxt > ends[live]).any() or (value.view(np.int64)[wire == LENGTH] < 0).any():
            raise WireError("a field runs past the end of its message, or has an unknown wire type")
        yield Fields(live, number, wire, value, data)
        pos[live] = nxt
        live = live[nxt < ends[live]]


def lengths_to_bounds(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end positions (n,) int64 of consecutive chunks of the given lengths (n,)."""
    ends = np.cumsum(lengths, dtype=np.int64)
    return ends - lengths, ends
