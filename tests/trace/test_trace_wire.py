"""The wire decoder against protobuf's own encoder, and op nesting against a plain stack walk."""

import importlib
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.trace import timeline, wire
from perfkit.trace.protos import XLINE, XSPACE

INT64 = st.integers(-(2**63), 2**63 - 1)
STAT = st.one_of(st.tuples(st.just("int64_value"), INT64),
                 st.tuples(st.just("uint64_value"), st.integers(0, 2**64 - 1)),
                 st.tuples(st.just("double_value"), st.floats(allow_nan=False)),
                 st.tuples(st.just("str_value"), st.text(max_size=40)),
                 st.tuples(st.just("ref_value"), st.integers(0, 2**64 - 1)))


def events(ids):
    """XEvents (metadata id from ``ids``, offset, duration, stats) as the wire tests write them."""
    return st.tuples(ids, INT64, st.integers(0, 2**62), st.lists(st.tuples(st.integers(1, 300), STAT), max_size=4))


EVENT = events(st.integers(0, 2**40))


def serialized(specs) -> tuple[list[bytes], np.ndarray, np.ndarray, np.ndarray]:
    """XEvents (metadata id, offset, duration, [(stat id, (value field, value))]) as protobuf writes them: each
    event's bytes, all of them as the decoder takes them, and where each starts and ends."""
    line = XSPACE().planes.add().lines.add()
    for md, offset, dur, stats in specs:
        ev = line.events.add(metadata_id=md, offset_ps=offset, duration_ps=dur)
        for sid, (field, value) in stats:
            setattr(ev.stats.add(metadata_id=sid), field, value)
    chunks = [e.SerializeToString() for e in line.events]
    ends = np.cumsum([len(c) for c in chunks], dtype=np.int64)
    return chunks, as_array(chunks), ends - [len(c) for c in chunks], ends


@settings(max_examples=80, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=30), st.data())
def test_events_and_stats_decode_like_protobuf(specs, data):
    """Every event's metadata id, offset and duration (varints of 1 to 10 bytes, the last events' at the buffer's
    end) and the stats of the ids asked for, as protobuf's own encoder wrote them."""
    chunks, buf, starts, ends = serialized(specs)
    ids = sorted({sid for *_, stats in specs for sid, _ in stats})
    wanted = data.draw(st.lists(st.sampled_from(ids), unique=True) if ids else st.just([]))
    md, offset, dur, event, sid, field, value, payload, occurrences = wire.events(
        buf, starts, ends, np.array(wanted, np.int64))
    assert md.tolist() == [s[0] for s in specs]
    assert offset.tolist() == [s[1] for s in specs]
    assert dur.tolist() == [s[2] for s in specs]
    assert occurrences == -1
    expected = [(k, stat_id, kind, v) for k, (*_, stats) in enumerate(specs) for stat_id, (kind, v) in stats
                if stat_id in wanted]
    assert event.tolist() == [e[0] for e in expected] and sid.tolist() == [e[1] for e in expected]
    number_of = {"double_value": 2, "uint64_value": 3, "int64_value": 4, "str_value": 5, "ref_value": 7}
    assert field.tolist() == [number_of[e[2]] for e in expected]
    for raw, at, (_, _, kind, v) in zip(value.tolist(), payload.tolist(), expected):
        if kind == "int64_value":
            assert np.array([raw], np.uint64).view(np.int64)[0] == v
        elif kind == "double_value":
            assert np.array([raw], np.uint64).view(np.float64)[0] == v
        elif kind == "str_value":
            assert bytes(buf[at:at + raw]).decode() == v
        else:
            assert raw == v


def test_stats_past_one_an_event_for_each_id_asked_for_are_all_kept():
    """Events of 300 stats of the one id asked for each (more than the rows made ready at first): every one,
    in order."""
    specs = [(1, 10 * k, 5, [(9, ("int64_value", 1000 * k + j)) for j in range(300)]) for k in range(2)]
    _, buf, starts, ends = serialized(specs)
    out = wire.events(buf, starts, ends, np.array([9], np.int64))
    assert out[3].tolist() == [0] * 300 + [1] * 300
    assert out[6].view(np.int64).tolist() == [1000 * k + j for k in range(2) for j in range(300)]


def test_an_aggregated_events_occurrences_are_said():
    """An event that stands for several (``num_occurrences``, in place of its offset): the first one's count."""
    line = XLINE(events=[dict(metadata_id=1, offset_ps=5), dict(metadata_id=2, num_occurrences=7),
                         dict(metadata_id=3, num_occurrences=9)])
    chunks = [e.SerializeToString() for e in line.events]
    ends = np.cumsum([len(c) for c in chunks])
    out = wire.events(as_array(chunks), ends - [len(c) for c in chunks], ends, np.zeros(0, np.int64))
    assert out[0].tolist() == [1, 2, 3] and out[-1] == 7


@pytest.mark.parametrize("event, what", [
    (b"\x08\x96", "past the end"),                     # a varint whose continuation byte runs past the event
    (b"\x10" + b"\xff" * 10 + b"\x01", "longer than 10 bytes"),
    (b"\x22\x05\x08\x01", "past the end"),             # a stat longer than its event
    (b"\x22\x02\x08\x80", "past the end"),             # a stat whose id runs past the stat
    (b"\x0a\x01\x00", "wire type"),                     # a metadata id written as a string
    (b"\x22\x03\x08\x05\x33", "wire type"),           # a stat of the id asked for whose value is no field
    (b"\x0b", "wire type")])                            # a group (wire type 3)
def test_a_damaged_event_is_refused(event, what):
    with pytest.raises(wire.WireError, match=what):
        wire.events(as_array([event]), np.array([0]), np.array([len(event)]), np.array([5], np.int64))


def test_a_run_past_its_message_or_buffer_is_refused():
    raw = XLINE(events=[dict(metadata_id=1, offset_ps=5)]).SerializeToString()
    with pytest.raises(wire.WireError, match="past the end"):
        wire.run(as_array([raw]), 0, len(raw) - 1, raw[0])
    with pytest.raises(wire.WireError, match="past the end"):
        wire.run(as_array([raw]), 0, len(raw) + 1, raw[0])


def as_array(chunks: list[bytes]) -> np.ndarray:
    """Bytes as the decoder takes them: a uint8 array, nothing after the end (the varints' word reads stop short of
    it)."""
    return np.frombuffer(b"".join(chunks), np.uint8)


# Stats whose bytes look like an event's tag (0x22) or length prefixes, or like a whole event's head (a metadata
# id and an offset): a reader that looked for events by their bytes, not along the chain of lengths, would take them
# for events.
EVENT_HEAD = st.tuples(st.integers(0, 2**21), st.integers(0, 2**40), st.binary(max_size=6)).map(
    lambda t: XLINE(events=[dict(metadata_id=t[0], offset_ps=t[1])]).SerializeToString() + t[2])
TEMPTING = st.one_of(STAT, st.tuples(st.just("bytes_value"), st.binary(max_size=12).map(lambda b: b"\x22" + b)),
                     st.tuples(st.just("bytes_value"), EVENT_HEAD))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), INT64, st.integers(0, 2**62),
                          st.lists(st.tuples(st.integers(1, 300), TEMPTING), max_size=4)), max_size=25),
       st.text(max_size=20), st.integers(0, 2**62), st.sampled_from(["bulk", "bytes", "file"]))
def test_split_finds_each_event_and_keeps_the_other_fields(specs, name, stamp, bulk):
    """wire.split against protobuf: the payload of every XLine event, in order, and the line's other
    fields as a message of their own; on an array (runs walked by ``wire.run``), on plain bytes and on a
    file's bytes read where indexed (``FileBytes``, a block of 64 bytes at a time here)."""
    line = XSPACE().planes.add().lines.add(id=7, name=name, timestamp_ns=stamp, duration_ps=5)
    for md, offset, dur, stats in specs:
        ev = line.events.add(metadata_id=md, offset_ps=offset, duration_ps=dur)
        for sid, (field, value) in stats:
            setattr(ev.stats.add(metadata_id=sid), field, value)
    raw = line.SerializeToString()
    with tempfile.TemporaryFile() as file:
        file.write(raw)
        file.flush()
        buf = {"bulk": as_array([raw]), "bytes": raw, "file": wire.FileBytes(file)}[bulk]
        if bulk == "file":
            buf.BLOCK = 64  # (an instance's: blocks end inside the events)
        starts, ends, rest = wire.split(buf, 0, len(raw), 4)
        assert wire.field_ahead(buf, 0, len(raw), 2) == (name.encode() if name else None)
    assert [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == [e.SerializeToString() for e in line.events]
    header = XLINE.FromString(rest)
    assert (header.id, header.name, header.timestamp_ns, header.duration_ps, len(header.events)) == \
        (7, name, stamp, 5, 0)


def _nested(draw_depth, rng, lo, hi, out, parent):
    """Random properly nested intervals inside [lo, hi), each with its parent's index; a child is never
    its parent's exact copy (then either could be the parent)."""
    t = lo
    while t < hi - 2 and rng.random() < 0.7:
        a = int(rng.integers(t, hi - 1))
        b = int(rng.integers(a + 1, hi + (a > lo or parent < 0)))
        out.append((a, b, parent))
        if draw_depth:
            _nested(draw_depth - 1, rng, a, b, out, len(out) - 1)
        t = b


@pytest.mark.parametrize("arrival", ["shuffled", "line by line", "by start across lines"])
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1))
def test_parents_match_nesting(arrival, seed):
    """Each op's innermost enclosing op on its line, whatever order the ops arrive in: shuffled, as traces
    write them (line by line, by start: no sort needed), or lines interleaved by start."""
    rng = np.random.default_rng(seed)
    rows = []
    for line in range(3):
        first = len(rows)
        _nested(3, rng, 0, 1000, rows, -1)
        rows[first:] = [(a, b, p, line) for a, b, p in rows[first:]]
    if not rows:
        return
    start, end, parent, group = (np.array(c, np.int64) for c in zip(*rows))
    perm = {"shuffled": rng.permutation(len(rows)), "line by line": np.arange(len(rows)),
            "by start across lines": np.argsort(start, kind="stable")}[arrival]
    inverse = np.argsort(perm)
    got = timeline.parents(group[perm], start[perm], end[perm])
    expected = np.where(parent[perm] >= 0, inverse[np.maximum(parent[perm], 0)], -1)
    assert (got == expected).all()


def test_split_of_a_run_past_the_next_run_of_the_same_tag():
    """A plane's event metadata (field 4) followed by its stat metadata and then a line whose thousands of
    events (field 4 of the line, the same tag byte) each carry a stat whose value is that byte, as xprof's
    ``group_id`` 34 is: each run ends where the next field's tag differs, not where the byte next appears."""
    plane = XSPACE().planes.add(id=1, name="/device:TPU:0")
    for mid in range(1, 40):
        plane.event_metadata[mid].id, plane.event_metadata[mid].name = mid, f"fusion.{mid}"
    plane.stat_metadata[5].id, plane.stat_metadata[5].name = 5, "group_id"
    line = plane.lines.add(id=1, name="XLA Ops")
    for k in range(6000):
        ev = line.events.add(metadata_id=1 + k % 39, offset_ps=1000 * k, duration_ps=700 + k % 5)
        ev.stats.add(metadata_id=5, int64_value=34)  # 0x22, the events' own tag byte
    raw = plane.SerializeToString()
    line_raw = line.SerializeToString()
    buf = as_array([raw])
    starts, ends, _ = wire.split(buf, 0, len(raw), 3)
    assert [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == [line_raw]
    ev_starts, ev_ends, _ = wire.split(buf, int(starts[0]), int(ends[0]), 4)
    assert [raw[a:b] for a, b in zip(ev_starts.tolist(), ev_ends.tolist())] == \
        [e.SerializeToString() for e in line.events]


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), heads=st.integers(0, 3), unnamed=st.integers(0, 3))
def test_split_finds_the_events_of_a_long_line_whose_stats_look_like_events(seed, heads, unnamed):
    """A line of 20000 events whose stats are the events' tag byte and, in ``heads`` events, an event's head, and
    ``unnamed`` events without a metadata id: the events as protobuf wrote them."""
    rng = np.random.default_rng(seed)
    line = XSPACE().planes.add().lines.add(id=1, name="XLA Ops")
    fake = XLINE(events=[dict(metadata_id=3, offset_ps=40)]).SerializeToString()
    picked = rng.choice(20000, heads + unnamed, replace=False).tolist()
    headed, nameless = set(picked[:heads]), set(picked[heads:])
    for k in range(20000):
        ev = line.events.add(metadata_id=0 if k in nameless else 1 + k % 300, offset_ps=int(rng.integers(0, 2**40)),
                             duration_ps=int(rng.integers(0, 2**20)))
        ev.stats.add(metadata_id=5, int64_value=34)  # 0x22
        if k in headed:
            ev.stats.add(metadata_id=6, bytes_value=fake)
    raw = line.SerializeToString()
    starts, ends, _ = wire.split(as_array([raw]), 0, len(raw), 4)
    assert [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == [e.SerializeToString() for e in line.events]


def test_a_tree_whose_compiled_reader_is_not_built_says_how_to_build_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "perfkit.trace._wire", None)  # (an import of it then fails)
    try:
        with pytest.raises(ImportError, match=r"not built: install perfkit \(pip install -e \.\) or build it in place"):
            importlib.reload(wire)
    finally:
        monkeypatch.undo()
        importlib.reload(wire)
