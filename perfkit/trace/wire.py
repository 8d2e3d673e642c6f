"""Protobuf wire format decoded for many small messages at once, with numpy.

A trace line holds up to millions of ``XEvent`` messages. Touching each through protobuf's Python
objects costs a Python call or more per field; here every message of a batch advances one field per
numpy round instead (messages have 3 to 12 fields), and a varint is decoded from the 8 bytes at its
position read as one little-endian word (bit tricks, no per-byte loop). Used by
``perfkit.trace.xplane`` for events and their stats.

``split`` finds the fields of one large message (an XLine's events, an XPlane's lines) in place, so the
events are decoded straight from the file's bytes: no protobuf object or Python ``bytes`` per event.
"""

from __future__ import annotations

import contextlib
import os
from typing import BinaryIO, Iterator, NamedTuple

import numpy as np

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
PEEL_ROUNDS = 16  # small rounds of dropping unreachable nodes before following the chain instead
PAD = 16  # zero bytes after the data: 8-byte word reads near the end stay inside the buffer
_U = np.uint64
# A varint of up to 4 (8) bytes is decoded from the 4 (8) bytes at its position read as one little-endian
# word: each byte's high bit says whether another follows; rounds of merging neighbouring 7-bit groups
# (two in 4 bytes, three in 8) turn the payload bytes into one value.
_WIDTHS = {width: (kind(int("80" * width, 16)), kind(int("7F" * width, 16)),
                   [(kind(low), kind(high), kind(shift)) for low, high, shift in rounds])
           for width, kind, rounds in (
               (4, np.uint32, [(0x007F007F, 0x7F007F00, 1), (0x00003FFF, 0x3FFF0000, 2)]),
               (8, np.uint64, [(0x007F007F007F007F, 0x7F007F007F007F00, 1), (0x00003FFF00003FFF, 0x3FFF00003FFF0000, 2),
                               (0x000000000FFFFFFF, 0x0FFFFFFF00000000, 4)]))}


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


def read_padded(file: BinaryIO, offset: int, size: int) -> np.ndarray:
    """``size`` bytes of an open file from ``offset`` as a uint8 array with ``PAD`` zero bytes after the
    end (the varint decoder reads a word past a field), read straight into it (no intermediate bytes)."""
    buf = np.zeros(size + PAD, np.uint8)
    file.seek(offset)
    if file.readinto(memoryview(buf)[:size]) != size:
        raise WireError("the file is shorter than its fields say")
    return buf


def _words(buf: np.ndarray, width: int = 8) -> np.ndarray:
    """The little-endian unsigned ints of ``width`` bytes starting at every byte of ``buf`` (an overlapping,
    unaligned view)."""
    return np.ndarray(shape=(buf.size - width + 1,), dtype=f"<u{width}", buffer=buf, strides=(1,))


def _short_varints(buf: np.ndarray, pos: np.ndarray, width: int = 8, whole: bool = False
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """``varints`` for varints of up to ``width`` (4 or 8) bytes, as that width's unsigned ints; the third
    array is zero where one is longer (its value and end are then those of its first ``width`` bytes).
    ``whole``: None as soon as one is longer."""
    high_bits = _WIDTHS[width][0]
    word = _words(buf, width)[pos]
    stop = np.invert(word)
    stop &= high_bits                          # high bit clear: the varint's last byte
    if whole and not stop.all():
        return None
    value, end = _word_varints(word, stop, width)
    end += pos
    return value, end, stop


def _word_varints(word: np.ndarray, stop: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """The varints that ``word`` (m,) (of ``width`` bytes, consumed) start with, whose last bytes' high bits
    ``stop`` (m,) marks (consumed): their values and lengths in bytes (int64)."""
    _, low7, rounds = _WIDTHS[width]
    keep = np.negative(stop)
    keep &= stop                               # its lowest such bit
    keep <<= 1
    keep -= 1                                  # all bits up to it (all ones when no stop in the word)
    value = word
    value &= keep
    value &= low7
    merged = np.empty_like(value)
    for low, high, shift in rounds:
        np.bitwise_and(value, high, out=merged)
        merged >>= shift
        value &= low
        value |= merged
    length = np.bitwise_count(keep).astype(np.int64)
    length >>= 3
    return value, length


def varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Decode one varint at each of ``pos`` (m,) int64 in ``buf`` (n,) uint8 (padded); returns the
    values (m,) uint64 and the positions just after them (m,) int64."""
    first = buf[pos]
    if (first < 0x80).all():  # one byte each (a stat's length, a small id): the bytes are the values
        return first.astype(_U), pos + 1
    short = _short_varints(buf, pos, 4, whole=True)
    if short is not None:  # up to 4 bytes each (an id, a duration): half the word of 8
        return short[0].astype(_U), short[1]
    value, end, stop = _short_varints(buf, pos)
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


def leading_varints(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, numbers: tuple[int, ...]
                    ) -> tuple[list[np.ndarray], np.ndarray]:
    """The varint fields ``numbers`` that every message ``buf[starts[i]:ends[i]]`` starts with, in that
    order (an XEvent's metadata id, offset, duration, as protobuf writes them): their values (m,) uint64
    each, as far as every message has them, and where each message's other fields start. Cheaper than a
    round of ``fields`` each: a field's tag and a varint of up to 7 bytes are one word read at its position."""
    pos = starts.astype(np.int64, copy=True)
    values = []
    for number in numbers:
        if not (pos < ends).all():
            break
        word = _words(buf)[pos]
        if not ((word & _U(0xFF)) == _U(number << 3 | VARINT)).all():
            break
        word >>= _U(8)
        stop = np.invert(word)
        stop &= _U(0x0080808080808080)  # the varint's last byte among the word's 7 after the tag
        if stop.all():
            value, length = _word_varints(word, stop, 8)
            pos += length
            pos += 1
        else:  # one of 8 bytes or more
            value, pos = varints(buf, pos + 1)
        values.append(value)
    if (pos > ends).any():
        raise WireError("a field runs past the end of its message")
    return values, pos


def short_payloads(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray, number: int
                   ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] | None:
    """Where each message ``buf[starts[i]:ends[i]]`` is nothing but LENGTH fields ``number`` of under 128
    bytes each (an XEvent's stats past its leading fields), their payloads, a round per field as ``fields``
    walks them: the messages' indices, payload starts and ends ((m,) int64 each, per round); None where one
    message is otherwise. Half the numpy passes of ``fields``: only the one-byte tag and length to read."""
    tag = number << 3 | LENGTH
    pos = starts.astype(np.int64, copy=True)
    live = np.flatnonzero(pos < ends)
    msgs, datas, ends_ = [], [], []
    while live.size:
        every = live.size == pos.size  # every message has another field (xprof's events: the same stats each)
        at, limit = (pos, ends) if every else (pos[live], ends[live])
        length = buf[at + 1]
        if not ((buf[at] == tag).all() and (length < 0x80).all()):
            return None
        data = at + 2
        end = data + length
        if (end > limit).any():
            raise WireError("a field runs past the end of its message")
        msgs.append(live)
        datas.append(data)
        ends_.append(end)
        more = end < limit
        if every:
            np.copyto(pos, end)
        else:
            pos[live] = end
        live = live if more.all() else live[more]
    return msgs, datas, ends_


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


def _reachable(jump: np.ndarray) -> np.ndarray:
    """Nodes reachable from node 0 along ``jump`` (n,) (each node's successor, always a later node; -1
    none), ascending. The other nodes without a predecessor are dropped, a round at a time, while the
    rounds are big; after ``PEEL_ROUNDS`` small ones (a long chain not reachable from 0: a window that
    reaches past its run into the next run of the same tag, as an XPlane's metadata runs into a line's
    events, or a stat value's byte equal to the tag on every event of a step) the chain from 0 is
    followed by pointer doubling instead, in ~log2(n) passes (benchmarks/trace_breakdown.py's
    --shape xprof measures it)."""
    n = jump.size
    indegree = np.bincount(jump[jump >= 0], minlength=n)
    indegree[0] += 1  # node 0 is never dropped
    alive = np.ones(n, bool)
    sources = np.flatnonzero(indegree == 0)
    small = 0
    while sources.size:
        alive[sources] = False
        targets = jump[sources]
        targets = targets[targets >= 0]
        if targets.size > n // 16:  # a big round: one pass over all nodes
            indegree -= np.bincount(targets, minlength=n)
            sources = np.flatnonzero(alive & (indegree == 0))
        elif (small := small + 1) > PEEL_ROUNDS:
            return _chain(jump)
        else:
            np.subtract.at(indegree, targets, 1)
            sources = np.unique(targets[indegree[targets] == 0])
    return np.flatnonzero(alive)


def _chain(jump: np.ndarray) -> np.ndarray:
    """The nodes ``0, jump[0], jump[jump[0]], ...`` ascending: successors 2**k apart for every k, then
    the chain's nodes filled in from the farthest jumps to the nearest."""
    n = jump.size
    step = np.append(np.where(jump >= 0, jump, n), n)  # n: past the end, its own successor
    powers = [step]
    while 1 << len(powers) <= n:
        powers.append(powers[-1][powers[-1]])
    on = np.zeros(n + 1, bool)
    on[0] = True
    for power in reversed(powers):
        on[power[np.flatnonzero(on)]] = True
    return np.flatnonzero(on[:n])


def _run(buf: np.ndarray, pos: int, end: int, tag: int, leading: tuple[int, int] | None
         ) -> tuple[np.ndarray, np.ndarray, int]:
    """The consecutive LENGTH fields with one-byte ``tag`` from ``pos`` of a message ending at ``end``:
    their payloads' starts and ends (k,) (int32 in a buffer under 2 GB: half the memory of a line's millions of
    events) and the position after the last. Every ``tag`` byte in a window is taken for a field; the true
    ones are the chain of field ends from ``pos``: sought among the fields whose payloads start with the
    ``leading`` varint fields (``_guessed``: a quarter of the candidates on an xprof-shaped line,
    benchmarks/trace_breakdown.py --shape xprof), else among all of them (``_reachable``)."""
    starts, ends = [], []
    kind = np.int32 if buf.size < 2**31 else np.int64
    window = 1 << 12
    while pos < end and buf[pos] == tag:
        stop = min(end, pos + window)
        window = min(window * 4, 1 << 20)  # one window for short runs, small temporaries for long ones
        cand = np.flatnonzero(buf[pos:stop] == tag)
        cand += pos
        size = buf[cand + 1].astype(np.int64)  # lengths under 128 (most): one byte
        data = cand + 2
        wide = np.flatnonzero(size >= 0x80)
        if wide.size:
            value, data[wide], short = _short_varints(buf, cand[wide] + 1)
            size[wide] = np.where((short != 0) & (value < _U(end)), value, _U(end)).view(np.int64)
        nxt = data + size - pos  # field ends, window-relative
        chain = None if leading is None else _guessed(buf, cand, data, nxt, pos, stop, tag, leading)
        if chain is None:
            index = np.full(stop - pos, -1, np.int32)
            index[cand - pos] = np.arange(cand.size, dtype=np.int32)
            jump = np.where(nxt < stop - pos, index[np.minimum(nxt, stop - pos - 1)], -1)
            chain = _reachable(jump)
        last = int(nxt[chain[-1]]) + pos
        if last > end:
            raise WireError("a field runs past the end of its message")
        starts.append(data[chain].astype(kind))
        ends.append((nxt[chain] + pos).astype(kind))
        pos = last
    return np.concatenate(starts), np.concatenate(ends), pos


def _led(buf: np.ndarray, data: np.ndarray, leading: tuple[int, int]) -> np.ndarray:
    """(m,) bool: whether the payload at each of ``data`` starts with varint field ``leading[0]`` (a value of
    up to 3 bytes) followed by the tag of varint field ``leading[1]``."""
    first, second = (number << 3 | VARINT for number in leading)
    word = _words(buf)[data]
    led = np.zeros(data.size, bool)
    for width in (1, 2, 3):  # the first field's value: width - 1 continuation bytes, then its last byte
        mask = 0xFF << 8 * (width + 1) | sum(0x80 << 8 * k for k in range(1, width + 1)) | 0xFF
        want = second << 8 * (width + 1) | sum(0x80 << 8 * k for k in range(1, width)) | first
        led |= (word & _U(mask)) == _U(want)
    return led


def _guessed(buf: np.ndarray, cand: np.ndarray, data: np.ndarray, nxt: np.ndarray, pos: int, stop: int, tag: int,
             leading: tuple[int, int]) -> np.ndarray | None:
    """``_run``'s chain in one window (indices into ``cand``), sought among the candidates whose payloads start
    with the ``leading`` fields (an event's metadata id and offset; its stats, the same tag byte, start with a
    metadata id and a value): from ``pos`` as far as each ends where the next begins, which is the chain so far
    (following the field ends from ``pos``). None where the field at ``pos`` does not start so, or where the
    chain goes on inside the window through a field the guess left out (a stat whose bytes look like an
    event: the window is then searched whole, not cut at each such event)."""
    kept = np.flatnonzero(_led(buf, data, leading))
    if not kept.size or cand[kept[0]] != pos:
        return None
    broken = np.flatnonzero(nxt[kept[:-1]] != cand[kept[1:]] - pos)
    chain = kept[:broken[0] + 1] if broken.size else kept
    last = int(nxt[chain[-1]])
    return None if last < stop - pos and buf[pos + last] == tag else chain

def split(buf, start: int, end: int, number: int, leading: tuple[int, int] | None = None
          ) -> tuple[np.ndarray, np.ndarray, bytes]:
    """The message ``buf[start:end]`` as the payload starts and ends (k,) ints of its LENGTH fields
    numbered ``number`` (a repeated message: an XLine's events) and its other fields as the bytes of a
    message of their own (for protobuf: they are few and small). ``buf``: a padded uint8 array (runs of
    one field found in bulk), or any bytes-like or a ``FileBytes`` (read field by field, touching only
    the fields' heads). ``leading``: the two varint fields the payloads usually start with (an XEvent's
    metadata id and offset, as protobuf writes them): a run is found faster where they do (``_run``), the
    same where they do not."""
    bulk = isinstance(buf, np.ndarray)
    data = buf.data if bulk else buf if isinstance(buf, FileBytes) else memoryview(buf)
    starts, ends, rest = [], [], []
    pos = start
    while pos < end:
        tag, after = _varint(data, pos, end)
        wire = tag & 7
        if wire == LENGTH and bulk and tag < 0x80:  # a run of one field in one go
            s, e, nxt = _run(buf, pos, end, tag, leading if tag >> 3 == number else None)
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
