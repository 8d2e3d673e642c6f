# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""The wire format's loops over many small messages, compiled: the fields of a run of one repeated field (an
XLine's events) and each event's leading fields and stats, one message after the other as protobuf's own parser
walks them. A field's length says where the next begins, so finding the events of a line is a chain that numpy
can only follow in many passes over all the bytes; here each byte is read once (``benchmarks/trace_breakdown.py``
measures the reader). ``perfkit.trace.wire`` is the module to import: it re-exports what is public here."""

import sys

from libc.stdint cimport int64_t, uint64_t, uint8_t
from libc.string cimport memcpy

import numpy as np


cdef extern from *:
    int __builtin_ctzll(unsigned long long) nogil  # (GCC's and Clang's: the index of the lowest set bit)


if sys.byteorder != "little":  # (the varints' word reads; every TPU and GPU host is little-endian)
    raise ImportError("perfkit's wire decoder reads words as little-endian; this machine is big-endian")

cdef enum:
    VARINT = 0
    FIXED64 = 1
    LENGTH = 2
    FIXED32 = 5
    PAST_END = -1  # a field's bytes run past the end of its message
    TOO_LONG = -2  # a varint of more than 10 bytes
    WIRE_TYPE = -3  # a wire type that is none of the four, or not the one the field's number has

# XEvent's fields (tensorflow/tsl/profiler/protobuf/xplane.proto) and XStat's value fields, with their wire types.
cdef enum:
    EVENT_METADATA = 1
    EVENT_OFFSET = 2
    EVENT_DURATION = 3
    EVENT_STATS = 4
    EVENT_OCCURRENCES = 5
    STAT_METADATA = 1
    STAT_DOUBLE = 2
    STAT_UINT64 = 3
    STAT_INT64 = 4
    STAT_STR = 5
    STAT_BYTES = 6
    STAT_REF = 7


class WireError(ValueError):
    """The bytes are not the protobuf messages they should be (truncated or foreign)."""


_MESSAGES = {PAST_END: "a field runs past the end of its message", TOO_LONG: "a varint longer than 10 bytes",
             WIRE_TYPE: "a field of an unknown wire type, or not its number's"}


cdef inline int64_t _varint(const uint8_t *buf, int64_t pos, int64_t end, int64_t size, uint64_t *value
                            ) noexcept nogil:
    """The varint at ``buf[pos]`` (of ``size`` bytes) of a message ending at ``end`` into ``value``: the position after
    it, or an error code (negative). One of up to 8 bytes is decoded from the 8 bytes at its position read as one
    little-endian word, without a branch on its length (lengths vary from field to field, so a loop's exit would be
    mispredicted at almost every one)."""
    cdef uint64_t word, stop, result = 0
    cdef int64_t length
    cdef int shift = 0
    cdef uint8_t byte
    if pos < end and buf[pos] < 0x80:  # one byte: a tag, a length, a small id
        value[0] = buf[pos]
        return pos + 1
    if pos + 8 <= size:
        memcpy(&word, buf + pos, 8)
        stop = ~word & 0x8080808080808080ULL  # high bit clear: a varint's last byte
        if stop:
            stop &= ~stop + 1  # the first of them
            length = (__builtin_ctzll(stop) >> 3) + 1
            if pos + length > end:
                return PAST_END
            word &= ((stop << 1) - 1) & 0x7F7F7F7F7F7F7F7FULL  # its bytes' payload bits (stop << 1: 0 past bit 63)
            word = (word & 0x007F007F007F007FULL) | ((word & 0x7F007F007F007F00ULL) >> 1)  # 7-bit groups merged
            word = (word & 0x00003FFF00003FFFULL) | ((word & 0x3FFF00003FFF0000ULL) >> 2)  # into 14, 28, 56 bits
            word = (word & 0x000000000FFFFFFFULL) | ((word & 0x0FFFFFFF00000000ULL) >> 4)
            value[0] = word
            return pos + length
    while pos < end:  # 9 or 10 bytes (a negative int64, a value of 2**56 or more), or near the buffer's end
        byte = buf[pos]
        result |= <uint64_t>(byte & 0x7F) << shift  # (a 10th byte's bits past the 64th are dropped, as protobuf does)
        pos += 1
        if byte < 0x80:
            value[0] = result
            return pos
        shift += 7
        if shift > 63:
            return TOO_LONG
    return PAST_END


cdef inline int64_t _field(const uint8_t *buf, int64_t pos, int64_t end, int64_t size, uint64_t *tag,
                           uint64_t *value, int64_t *data) noexcept nogil:
    """The field at ``buf[pos]``: its tag, its value (a varint's value, fixed bits, or a LENGTH payload's length) and
    where a payload starts; the position after it, or an error code."""
    cdef int64_t wire, at = _varint(buf, pos, end, size, tag)
    cdef int width, k
    if at < 0:
        return at
    wire = tag[0] & 7
    if wire == VARINT:
        return _varint(buf, at, end, size, value)
    if wire == LENGTH:
        at = _varint(buf, at, end, size, value)
        if at < 0:
            return at
        if value[0] > <uint64_t>(end - at):
            return PAST_END
        data[0] = at
        return at + <int64_t>value[0]
    if wire == FIXED64 or wire == FIXED32:
        width = 8 if wire == FIXED64 else 4
        if end - at < width:
            return PAST_END
        value[0] = 0
        for k in range(width - 1, -1, -1):  # little-endian
            value[0] = value[0] << 8 | buf[at + k]
        return at + width
    return WIRE_TYPE


cdef inline bint _stat_wire(int64_t number, int64_t wire) noexcept nogil:
    """Whether an XStat field of ``number`` has the wire type protobuf writes it with (other numbers: any)."""
    if number == STAT_METADATA or number == STAT_UINT64 or number == STAT_INT64 or number == STAT_REF:
        return wire == VARINT
    if number == STAT_DOUBLE:
        return wire == FIXED64
    if number == STAT_STR or number == STAT_BYTES:
        return wire == LENGTH
    return True


cdef int64_t _stat(const uint8_t *buf, int64_t pos, int64_t end, int64_t size, int64_t *sid, int64_t *field,
                   uint64_t *value, int64_t *data) noexcept nogil:
    """The XStat ``buf[pos:end]``: its metadata id, value field number (0: none), value and payload position (as
    ``_field`` gives them; the last of each, as protobuf keeps them); 0, or an error code."""
    cdef uint64_t tag = 0, v = 0
    cdef int64_t number, at = 0
    sid[0] = field[0] = data[0] = 0
    value[0] = 0
    while pos < end:
        pos = _field(buf, pos, end, size, &tag, &v, &at)
        if pos < 0:
            return pos
        number = <int64_t>(tag >> 3)
        if not _stat_wire(number, tag & 7):
            return WIRE_TYPE
        if number == STAT_METADATA:
            sid[0] = <int64_t>v
        elif STAT_DOUBLE <= number <= STAT_REF:
            field[0], value[0], data[0] = number, v, at
    return 0


def run(const uint8_t[::1] buf, int64_t pos, int64_t end, int tag):
    """The consecutive LENGTH fields whose tag is the one byte ``tag`` from ``pos`` of a message ending at ``end``
    (a repeated message's run: an XLine's events): their payloads' starts and ends (k,) int64 each, and the position
    after the last."""
    cdef const uint8_t *data = &buf[0]
    cdef int64_t n = 0, i, at = pos, limit = buf.shape[0]
    cdef uint64_t size = 0
    if not 0 <= pos <= end <= buf.shape[0]:
        raise WireError(_MESSAGES[PAST_END])
    while at < end and data[at] == tag:
        at = _varint(data, at + 1, end, limit, &size)
        if at < 0:
            raise WireError(_MESSAGES[at])
        if size > <uint64_t>(end - at):
            raise WireError(_MESSAGES[PAST_END])
        at += <int64_t>size
        n += 1
    starts, ends = np.empty(n, np.int64), np.empty(n, np.int64)
    cdef int64_t[::1] s = starts, e = ends
    at = pos
    for i in range(n):
        at = _varint(data, at + 1, end, limit, &size)
        s[i] = at
        at += <int64_t>size
        e[i] = at
    return starts, ends, at


def events(const uint8_t[::1] buf, const int64_t[::1] starts, const int64_t[::1] ends, const int64_t[::1] wanted):
    """The XEvents ``buf[starts[i]:ends[i]]`` (starts, ends: (n,) int64; ``wanted``: (w,) int64 stat metadata ids)
    decoded: their metadata ids, offsets and durations ((n,) int64 each; 0 where absent, as protobuf leaves out a
    field of 0), their stats whose metadata id is one of ``wanted`` (five (m,) arrays: the event's index, the stat's
    metadata id, its value field number (0: none), its value (uint64: a varint, a double's bits, or a string's length)
    and its payload's position (strings)), and the num_occurrences of the first event that has one (an aggregated
    line's), -1 where none has."""
    cdef const uint8_t *data = &buf[0]
    cdef int64_t limit = buf.shape[0]
    cdef Py_ssize_t n = starts.shape[0], w = wanted.shape[0]
    cdef int64_t i, k, pos, end, at = 0, kept = 0, occurrences = -1, number, wire, sid, field, payload, err
    cdef uint64_t tag = 0, value = 0, v = 0
    columns = [np.zeros(n, np.int64) for _ in range(3)]
    cdef int64_t[::1] metadata = columns[0], offset = columns[1], duration = columns[2]
    table = np.empty((n * w + 64, 5), np.int64)  # a row per stat kept (one per event and id wanted, but for repeats)
    cdef int64_t[:, ::1] stats = table
    for i in range(n):
        pos, end = starts[i], ends[i]
        if not 0 <= pos <= end <= buf.shape[0]:
            raise WireError(_MESSAGES[PAST_END])
        while pos < end:
            pos = _field(data, pos, end, limit, &tag, &value, &at)
            if pos < 0:
                raise WireError(_MESSAGES[pos])
            number, wire = <int64_t>(tag >> 3), tag & 7
            if EVENT_METADATA <= number <= EVENT_OCCURRENCES and wire != (LENGTH if number == EVENT_STATS else VARINT):
                raise WireError(_MESSAGES[WIRE_TYPE])
            if number == EVENT_METADATA:
                metadata[i] = <int64_t>value
            elif number == EVENT_OFFSET:
                offset[i] = <int64_t>value
            elif number == EVENT_DURATION:
                duration[i] = <int64_t>value
            elif number == EVENT_OCCURRENCES and occurrences < 0:
                occurrences = <int64_t>value
            elif number == EVENT_STATS:
                if value >= 2 and data[at] == STAT_METADATA << 3 and data[at + 1] < 0x80:
                    for k in range(w):  # (a stat whose one-byte metadata id comes first, as protobuf writes it)
                        if wanted[k] == data[at + 1]:
                            break
                    else:  # not wanted: skipped unread (real TPU ops carry a dozen stats, the reader wants a few)
                        continue
                err = _stat(data, at, at + <int64_t>value, limit, &sid, &field, &v, &payload)
                if err < 0:
                    raise WireError(_MESSAGES[err])
                for k in range(w):
                    if wanted[k] == sid:
                        if kept == stats.shape[0]:
                            table = np.concatenate([table, table])
                            stats = table
                        stats[kept, 0], stats[kept, 1], stats[kept, 2] = i, sid, field
                        stats[kept, 3], stats[kept, 4] = <int64_t>v, payload
                        kept += 1
                        break
    kept_stats = table[:kept]
    return (*columns, kept_stats[:, 0], kept_stats[:, 1], kept_stats[:, 2], kept_stats[:, 3].view(np.uint64),
            kept_stats[:, 4], occurrences)
