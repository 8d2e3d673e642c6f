"""The numpy wire decoder against protobuf's own encoder, and op nesting against a plain stack walk."""

import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfkit.trace import timeline, wire
from perfkit.trace.protos import XLINE, XSPACE

INT64 = st.integers(-(2**63), 2**63 - 1)
STAT = st.one_of(st.tuples(st.just("int64_value"), INT64), st.tuples(st.just("uint64_value"), st.integers(0, 2**64 - 1)),
                 st.tuples(st.just("double_value"), st.floats(allow_nan=False)),
                 st.tuples(st.just("str_value"), st.text(max_size=40)), st.tuples(st.just("ref_value"), st.integers(0, 2**64 - 1)))


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
    return chunks, padded(chunks), ends - [len(c) for c in chunks], ends


@settings(max_examples=60, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=30))
def test_events_and_stats_decode_like_protobuf(specs):
    chunks, buf, starts, ends = serialized(specs)
    got = {k: np.zeros(len(chunks), np.int64) for k in (1, 2, 3)}
    stat_spans = []
    for f in wire.fields(buf, starts, ends):
        for k in got:
            f.put(k, got[k])
        sel = f.number == 4
        stat_spans += zip(f.msg[sel].tolist(), f.data[sel].tolist(), (f.data[sel] + f.value[sel].astype(np.int64)).tolist())
    assert got[1].tolist() == [s[0] for s in specs]
    assert got[2].tolist() == [s[1] for s in specs]
    assert got[3].tolist() == [s[2] for s in specs]
    stat_spans.sort()
    s_start, s_end = np.array([s[1] for s in stat_spans], np.int64), np.array([s[2] for s in stat_spans], np.int64)
    decoded = [dict() for _ in stat_spans]
    for f in wire.fields(buf, s_start, s_end):
        for m, number, value, data in zip(f.msg.tolist(), f.number.tolist(), f.value.tolist(), f.data.tolist()):
            decoded[m][number] = (value, data)
    expected = [(sid, field, value) for _, _, _, stats in specs for sid, (field, value) in stats]
    number_of = {"double_value": 2, "uint64_value": 3, "int64_value": 4, "str_value": 5, "ref_value": 7}
    assert len(decoded) == len(expected)
    for fields_, (sid, field, value) in zip(decoded, expected):
        assert fields_[1][0] == sid
        raw, data = fields_[number_of[field]]
        if field == "int64_value":
            assert np.array([raw], np.uint64).view(np.int64)[0] == value
        elif field == "double_value":
            assert np.array([raw], np.uint64).view(np.float64)[0] == value
        elif field == "str_value":
            assert bytes(buf[data:data + raw]).decode() == value
        else:
            assert raw == value


@settings(max_examples=80, deadline=None)
@given(st.lists(EVENT, min_size=1, max_size=30))
def test_leading_varints_are_the_events_metadata_id_offset_and_duration(specs):
    """An event's leading fields as protobuf wrote them (varints of 1 to 10 bytes), as far as every event has
    them: protobuf leaves out a metadata id or duration of 0 (the offset, in a oneof, it always writes)."""
    _, buf, starts, ends = serialized(specs)
    values, rest = wire.leading_varints(buf, starts, ends, (1, 2, 3))
    md, offset, dur = (np.array([s[k] for s in specs], np.int64) for k in range(3))
    expected = [] if (md == 0).any() else [md, offset] if (dur == 0).any() else [md, offset, dur]
    assert [v.view(np.int64).tolist() for v in values] == [e.tolist() for e in expected]
    if len(expected) == 3:
        heads = [len(XLINE(events=[dict(metadata_id=s[0], offset_ps=s[1], duration_ps=s[2])]).events[0]
                     .SerializeToString()) for s in specs]
        assert (rest - starts).tolist() == heads


LONG_STAT = st.one_of(STAT, st.tuples(st.just("str_value"), st.text(min_size=100, max_size=200)))  # 128 bytes or more


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), INT64, st.integers(0, 2**62),
                          st.lists(st.tuples(st.integers(1, 300), LONG_STAT), max_size=4)), min_size=1, max_size=30))
def test_short_payloads_are_the_stats_fields_finds(specs):
    """Past an event's leading fields: its stats as the general walk finds them, where every event holds
    nothing else and each stat is under 128 bytes; else None (the general walk then)."""
    _, buf, starts, ends = serialized(specs)
    _, rest = wire.leading_varints(buf, starts, ends, (1, 2, 3))
    rounds = list(wire.fields(buf, rest, ends))
    stats_only = all(((f.number == 4) & (f.wire == wire.LENGTH) & (f.value < 128)).all() for f in rounds)
    short = wire.short_payloads(buf, rest, ends, 4)
    if not stats_only:
        assert short is None
        return
    assert short is not None and len(short[0]) == len(rounds)
    for f, msg, data, end in zip(rounds, *short):
        assert msg.tolist() == f.msg.tolist() and data.tolist() == f.data.tolist()
        assert end.tolist() == (f.data + f.value.astype(np.int64)).tolist()


def padded(chunks: list[bytes]) -> np.ndarray:
    """Bytes as the decoder takes them: a uint8 array with zero padding after the end."""
    return np.frombuffer(b"".join(chunks) + bytes(wire.PAD), np.uint8)


# Stats whose bytes look like an event's tag (0x22) or length prefixes, or like a whole event's head (a metadata
# id and an offset: what the run finder's guess looks for), to tempt the bulk run finder.
EVENT_HEAD = st.tuples(st.integers(0, 2**21), st.integers(0, 2**40), st.binary(max_size=6)).map(
    lambda t: XLINE(events=[dict(metadata_id=t[0], offset_ps=t[1])]).SerializeToString() + t[2])
TEMPTING = st.one_of(STAT, st.tuples(st.just("bytes_value"), st.binary(max_size=12).map(lambda b: b"\x22" + b)),
                     st.tuples(st.just("bytes_value"), EVENT_HEAD))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**40), INT64, st.integers(0, 2**62),
                          st.lists(st.tuples(st.integers(1, 300), TEMPTING), max_size=4)), max_size=25),
       st.text(max_size=20), st.integers(0, 2**62), st.sampled_from(["bulk", "bytes", "file"]),
       st.sampled_from([None, (1, 2)]))
def test_split_finds_each_event_and_keeps_the_other_fields(specs, name, stamp, bulk, leading):
    """wire.split against protobuf: the payload of every XLine event, in order, and the line's other
    fields as a message of their own; on a padded array (runs found in bulk), on plain bytes and on a
    file's bytes read where indexed (``FileBytes``, a block of 64 bytes at a time here); told or not that
    events lead with their metadata id and offset (events with id 0 do not: protobuf leaves it out)."""
    line = XSPACE().planes.add().lines.add(id=7, name=name, timestamp_ns=stamp, duration_ps=5)
    for md, offset, dur, stats in specs:
        ev = line.events.add(metadata_id=md, offset_ps=offset, duration_ps=dur)
        for sid, (field, value) in stats:
            setattr(ev.stats.add(metadata_id=sid), field, value)
    raw = line.SerializeToString()
    with tempfile.TemporaryFile() as file:
        file.write(raw)
        file.flush()
        buf = {"bulk": padded([raw]), "bytes": raw, "file": wire.FileBytes(file)}[bulk]
        if bulk == "file":
            buf.BLOCK = 64  # (an instance's: blocks end inside the events)
        starts, ends, rest = wire.split(buf, 0, len(raw), 4, leading)
        assert wire.field_ahead(buf, 0, len(raw), 2) == (name.encode() if name else None)
    assert [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == [e.SerializeToString() for e in line.events]
    header = XLINE.FromString(rest)
    assert (header.id, header.name, header.timestamp_ns, header.duration_ps, len(header.events)) == \
        (7, name, stamp, 5, 0)


def test_truncated_field_is_refused():
    buf = padded([b"\x08\x96"])  # a varint whose continuation byte runs past the message
    try:
        list(wire.fields(buf, np.array([0]), np.array([2])))
    except wire.WireError:
        return
    raise AssertionError("no WireError")


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
    ``group_id`` 34 is: the first run's windows reach into a chain of thousands of candidates not
    reachable from its start, which ``wire._reachable`` follows from the start instead of dropping a
    round at a time (both give the same fields)."""
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
    buf = padded([raw])
    starts, ends, _ = wire.split(buf, 0, len(raw), 3)
    assert [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == [line_raw]
    ev_starts, ev_ends, _ = wire.split(buf, int(starts[0]), int(ends[0]), 4)
    assert [raw[a:b] for a, b in zip(ev_starts.tolist(), ev_ends.tolist())] == [e.SerializeToString() for e in line.events]


@settings(max_examples=60, deadline=None)
@given(st.lists(events(st.one_of(st.integers(0, 300), st.integers(0, 2**22), st.integers(0, 2**40))), min_size=1,
                max_size=30))
def test_led_tells_events_from_their_stats(specs):
    """What the run finder's guess takes for an event (``wire._led``): every event whose metadata id protobuf
    writes in up to 3 bytes (1 to 2**21 - 1), and none of their stats."""
    _, buf, starts, ends = serialized(specs)
    stats = [f.data[f.number == 4] for f in wire.fields(buf, starts, ends)]
    assert wire._led(buf, starts, (1, 2)).tolist() == [0 < md < 2**21 for md, *_ in specs]
    assert not wire._led(buf, np.concatenate([np.zeros(0, np.int64), *stats]), (1, 2)).any()


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), heads=st.integers(0, 3), unnamed=st.integers(0, 3))
def test_split_told_the_leading_fields_finds_the_events_of_a_long_line(seed, heads, unnamed):
    """A line of 20000 events (windows of every size) whose stats are the events' tag byte and, in ``heads``
    events, an event's head (the guess's chain then runs into a field it left out), ``unnamed`` events
    without a metadata id (not led by it): the events as protobuf wrote them, told the leading fields or not."""
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
    expected = [e.SerializeToString() for e in line.events]
    for leading in (None, (1, 2)):
        starts, ends, _ = wire.split(padded([raw]), 0, len(raw), 4, leading)
        assert [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == expected


def test_events_that_each_hold_an_events_head_are_searched_a_window_at_a_time(monkeypatch):
    """Where every event holds a stat whose bytes are an event's head, the guess breaks at every event: the
    window is then searched whole (a few windows for the line), not cut at each event (a window each)."""
    line = XSPACE().planes.add().lines.add(id=1, name="XLA Ops")
    fake = XLINE(events=[dict(metadata_id=3, offset_ps=40)]).SerializeToString()
    for k in range(20000):
        line.events.add(metadata_id=1 + k % 300, offset_ps=1000 * k, duration_ps=700).stats.add(
            metadata_id=6, bytes_value=fake)
    raw = line.SerializeToString()
    windows = []
    guessed = wire._guessed
    monkeypatch.setattr(wire, "_guessed", lambda *args: windows.append(guessed(*args)) or windows[-1])
    starts, ends, _ = wire.split(padded([raw]), 0, len(raw), 4, (1, 2))
    assert [raw[a:b] for a, b in zip(starts.tolist(), ends.tolist())] == [e.SerializeToString() for e in line.events]
    assert len(windows) < 10 and all(chain is None for chain in windows)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), unreachable=st.integers(0, 3000))
def test_reachable_nodes_are_the_chain_from_the_first(seed, unreachable):
    """wire._reachable against a walk along the successors from node 0, with a chain of ``unreachable``
    nodes that no round of dropping sources ends quickly."""
    rng = np.random.default_rng(seed)
    n = unreachable + int(rng.integers(1, 400))
    jump = np.full(n, -1, np.int64)
    for i in range(n - 1):
        if rng.random() < 0.97:
            jump[i] = rng.integers(i + 1, min(n, i + 30))
    jump[0] = -1 if unreachable == n - 1 else rng.integers(unreachable + 1, n)  # past the long chain
    jump[1:unreachable] = np.arange(2, unreachable + 1)
    walked = [0]
    while jump[walked[-1]] >= 0:
        walked.append(int(jump[walked[-1]]))
    assert wire._reachable(jump).tolist() == walked


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 1023, 1024, 1025])
def test_a_chain_through_every_node_is_followed_to_its_end(n):
    assert wire._chain(np.append(np.arange(1, n), -1)).tolist() == list(range(n))
