"""Hand-made TPU- and GPU-shaped XSpaces: readers, classification, steps, and breakdowns / diffs / tails
checked against values worked out by hand (trace_builders.py)."""

import gzip
import json
import struct

import pandas as pd
import pytest
from click.testing import CliRunner
from google.protobuf.message import DecodeError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trace_builders import GPU_EXPECTED, TPU_EXPECTED, U, gpu_trace, one_step_trace, tpu_trace

from perfkit.cli import cli
from perfkit.errors import BadInput
from perfkit.trace import breakdown, clocks, diff, events, tail, xplane
from perfkit.trace.export import write_perfetto
from perfkit.trace.protos import XSPACE
from perfkit.trace.synthetic import FINGERPRINT, TPU_STEP, Inline, Uint64, XSpaceWriter, tpu_profile


def _rows(frame):
    return {(int(r.device), int(r.step)): tuple(int(getattr(r, c)) // U for c in
                                                ("span_ps", "compute_ps", "ici_ps", "dma_ps", "idle_ps"))
            for r in frame.itertuples()}


def test_tpu_events_are_classified_by_opcode_and_category(tmp_path):
    ev = events.load([tpu_trace(tmp_path / "tpu.xplane.pb")])
    ops = events.device_ops(ev).set_index("name")
    assert ops.loc["all-gather-done.1", ["kind", "category"]].tolist() == ["all-gather-done", "ici"]
    assert ops.loc["copy-start.1", ["kind", "category"]].tolist() == ["copy-start", "dma"]  # not "data formatting"
    assert ops.loc["fusion.4", ["kind", "category"]].tolist() == ["reduce-scatter fusion", "ici"]
    assert ops.loc["fusion.1", ["kind", "category", "shape", "stall_ps"]].tolist() == ["fusion", "compute",
                                                                                        "f32[8,128]", 2 * U]
    text_op = ops[ops["device"] == 1].iloc[0]
    assert (text_op["hlo_op"], text_op["kind"], text_op["shape"]) == ("fusion.9", "fusion", "bf16[8,128]")
    assert ops.loc["while.1", ["hlo_module", "program_id"]].tolist() == ["jit_step", 1]  # from the program's HLO
    steps = ev[ev["category"] == "step"]
    assert sorted(zip(steps["device"], steps["step"])) == [(0, 0), (0, 1), (0, 2), (1, 0)]
    assert ops.loc["fusion.4", "step"] == 1 and ops.loc["copy-done.1", "step"] == 0
    assert ev.attrs["steps_from"] == ["Steps line"]


def test_tpu_breakdown_matches_hand_computed(tmp_path):
    rows = breakdown.breakdown(events.load([tpu_trace(tmp_path / "tpu.xplane.pb")]))
    assert _rows(rows) == TPU_EXPECTED
    parts = rows[["compute_ps", "ici_ps", "dma_ps", "idle_ps"]].sum(axis=1)
    assert (parts == rows["span_ps"]).all()
    means = breakdown.mean_per_device(rows).set_index("device")
    assert means.loc[0, "steps"] == 3 and means.loc[0, "ici_ps"] == (6 + 11 + 0) * U / 3


def test_gpu_breakdown_overlapping_streams(tmp_path):
    ev = events.load([gpu_trace(tmp_path / "gpu.xplane.pb")])
    ops = events.device_ops(ev)
    assert dict(zip(ops["name"], ops["category"])) == {
        "fusion_1.kd": "compute", "ncclDevKernel_AllReduce_Sum_f32_RING_LL": "ici", "MemcpyD2D": "dma",
        "loop_add_kernel": "compute"}
    assert ops.loc[ops["name"] == "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "kind"].item() == "all-reduce-start"
    rows = breakdown.breakdown(ev)
    assert _rows(rows) == {(0, s): v for s, v in GPU_EXPECTED.items()}
    assert ev.attrs["steps_from"] == ["step annotations"]


def test_step_pattern_overrides_markers(tmp_path):
    """--steps: the host "train" annotations by name, numbered by their step_num stats."""
    ev = events.load([gpu_trace(tmp_path / "gpu.xplane.pb")], step_pattern=r"^train$")
    assert ev.attrs["steps_from"] == ["events named /^train$/ (numbered by their own step numbers)"]
    assert _rows(breakdown.breakdown(ev)) == {(0, s): v for s, v in GPU_EXPECTED.items()}
    with pytest.raises(BadInput, match="no event's name matches"):  # asked for, none: not the whole trace unsaid
        events.load([gpu_trace(tmp_path / "gpu.xplane.pb")], step_pattern="no-such-event")


def test_diff_by_kind_op_and_shape(tmp_path):
    a = events.load([one_step_trace(tmp_path / "a.xplane.pb", [("fusion.1", "fusion", 0, 10),
                                                               ("all-gather-done.1", "all-gather-done", 10, 15)])])
    b = events.load([one_step_trace(tmp_path / "b.xplane.pb", [("fusion.1", "fusion", 0, 12),
                                                               ("all-gather-done.1", "all-gather-done", 12, 13),
                                                               ("copy-done.1", "copy-done", 13, 14)])])
    by_kind = diff.diff(a, b, "kind")
    assert by_kind["key"].tolist() == ["all-gather-done", "fusion", "copy-done"]  # largest |delta| first
    assert (by_kind["delta_ps"] / U).tolist() == [-4, 2, 1]
    assert by_kind["category"].tolist() == ["ici", "compute", "dma"]
    assert by_kind["b_count"].tolist() == [1, 1, 1] and by_kind["a_count"].tolist() == [1, 1, 0]
    assert diff.diff(a, b, "shape")["key"].tolist()[1] == "fusion f32[8,128]"
    assert set(diff.diff(a, b, "op")["key"]) == {"fusion.1", "all-gather-done.1", "copy-done.1"}


def test_diff_counts_exclusive_time_per_chip_step(tmp_path):
    ev = events.load([tpu_trace(tmp_path / "tpu.xplane.pb")])
    table = diff.per_step(ev, "kind")
    spans = 4  # chip 0: 3 steps, chip 1: 1 step
    assert table.attrs["spans"] == spans
    assert table.loc["while", "time_ps"] == 7 * U / spans  # 20 us minus its body's 13
    assert table.loc["fusion", "time_ps"] == (10 + 9 + 7 + 9) * U / spans


def test_tail_names_the_chip_that_stopped_first(tmp_path):
    """A hang: chip 3 is still in a fusion [0, 90) when chips 0-2, done with theirs at 80, wait in
    all-gather-done until 280 + chip."""
    space = XSpaceWriter("pod")
    space.program(2, "jit_ring", [("fusion.7", "fusion", "f32[8]"), ("all-gather-done.3", "all-gather-done", "f32[32]")])
    for chip in range(4):
        plane = space.plane(f"/device:TPU:{chip}")
        line = plane.line("XLA Ops", 0)
        line.event(plane.op("fusion.7", program_id=2), 0, (90 if chip == 3 else 80) * U)
        if chip != 3:
            line.event(plane.op("all-gather-done.3", program_id=2), 80 * U, (200 + chip) * U)
    ev = events.load([space.save(tmp_path / "hang.xplane.pb")])
    chips = tail.chips(ev)
    assert chips["device"].tolist() == [3, 0, 1, 2]
    assert chips["before_last_ps"].tolist() == [192 * U, 2 * U, 1 * U, 0]
    assert chips["at_first_stop_kind"].tolist() == ["fusion", "all-gather-done", "all-gather-done", "all-gather-done"]
    last = tail.last_ops(ev, k=1)
    assert last.set_index("device").loc[3, "name"] == "fusion.7" and len(last) == 4


def test_perfetto_export_holds_every_event(tmp_path):
    ev = events.load([tpu_trace(tmp_path / "tpu.xplane.pb"), gpu_trace(tmp_path / "gpu.xplane.pb")])
    assert sorted(ev["rank"].unique()) == [0, 1]  # two hosts -> two ranks
    out = tmp_path / "merged.json"
    assert write_perfetto(ev, out) == len(ev)
    doc = json.loads(out.read_text())
    complete = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(complete) == len(ev)
    processes = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert {"rank 0 device 0", "rank 0 device 1", "rank 1 device 0", "rank 1 host"} <= processes
    ag = next(e for e in complete if e["name"] == "all-gather-done.1")
    assert ag["dur"] == pytest.approx(5.0) and ag["cat"] == "ici" and ag["args"]["kind"] == "all-gather-done"
    # each host's profile placed by its own start: the GPU's lines (at 5 us) start 2 ms after the TPU's (at 1 us)
    first = next(e for e in complete if e["name"] == "fusion_1.kd")
    assert first["ts"] == pytest.approx(2004.0)


# --- real TPU profile shapes: every stat type, every line, well-formed never a traceback ---------------------

def test_tpu_profile_reads_whole_uint64_ids_and_every_line(tmp_path):
    ev = events.load([tpu_profile(tmp_path / "v6e.xplane.pb", chips=2, steps=3)])
    ops = events.device_ops(ev)
    assert str(ev["program_id"].dtype) == "UInt64" and set(ops["program_id"]) == {FINGERPRINT}
    assert ev.loc[ev["category"] == "module", "program_id"].eq(FINGERPRINT).all()  # from the module's metadata
    assert ev.loc[ev["category"] == "host", "program_id"].isna().all()  # none given: <NA>, not a number
    lines = ev.groupby("line", observed=True)["category"].agg(lambda c: set(c.astype(str))).to_dict()
    # Tensor Core, TC Overlay, XLA TraceMe, _counters_, the SparseCore plane, Task Environment: not read
    assert lines == {"XLA Ops": {"compute", "ici", "dcn", "dma"}, "XLA Modules": {"module"}, "Steps": {"step"},
                     "Async XLA Ops": {"other"}, "all-reduce.2": {"dcn_transfer"}, "python3": {"host"}}
    assert set(ops.loc[ops["category"] == "dcn", "hlo_op"]) == {"all-reduce.2"}  # hlo_category megascale all-reduce
    assert len(ops) == 2 * 3 * len(TPU_STEP)
    # whole HLO text as the event name: the op name and opcode are parsed from it
    fusion = ops[ops["hlo_op"] == "fusion.3"].iloc[0]
    assert (fusion["kind"], fusion["category"], fusion["shape"]) == ("reduce-scatter fusion", "ici", "f32[256,1024]")
    dcn = ev[ev["category"] == "dcn_transfer"]
    assert sorted(zip(dcn["device"], dcn["step"])) == [(c, s) for c in range(2) for s in range(3)]
    assert ops.loc[ops["hlo_op"] == "fusion.1", "stall_ps"].eq(2 * U).all()


def test_program_id_of_every_int_width(tmp_path):
    """int64 -1 (the uint64 2**64 - 1), 0, 2**63 - 1, 2**63, 2**64 - 1: each its own program, never "unknown"."""
    ids = [-1, 0, 2**63 - 1, Uint64(2**63), Uint64(2**64 - 1), 5.0]
    space = XSpaceWriter("h")
    chip = space.plane("/device:TPU:0")
    line = chip.line("XLA Ops")
    for i, pid in enumerate(ids):
        line.event(chip.op(f"fusion.{i}", program_id=pid), i * U, U)
    line.event(chip.op("fusion.9"), 9 * U, U, program_id=Uint64(2**64 - 2))  # per-event stat over metadata
    line.event(chip.op("fusion.10"), 10 * U, U)
    ops = events.device_ops(events.load([space.save(tmp_path / "ids.xplane.pb")])).set_index("name")["program_id"]
    assert ops.iloc[:6].tolist() == [2**64 - 1, 0, 2**63 - 1, 2**63, 2**64 - 1, 5]
    assert ops["fusion.9"] == 2**64 - 2 and ops.isna().tolist() == [False] * 7 + [True]


def test_an_event_of_metadata_the_plane_lacks_is_unnamed(tmp_path):
    """Events naming metadata ids the plane does not hold (past its last, negative) have no name, opcode or
    category of their own (an unnamed compute op, as by hand), not those of the plane's first or last op."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    ops = plane.line("XLA Ops", 1_000)
    first, last = plane.op("all-gather.1", hlo_category="all-gather"), plane.op("all-reduce.2", hlo_category="all-reduce")
    for k, metadata_id in enumerate((first, last + 97, -5, last)):
        ops.event(metadata_id, 10 * k * U, 5 * U)
    ev = events.load([space.save(tmp_path / "ids.xplane.pb")])
    assert ev["name"].isna().tolist() == [False, True, True, False]
    assert ev["category"].tolist() == ["ici", "compute", "compute", "ici"]
    assert ev["hlo_op"].isna().tolist() == [False, True, True, False]


@pytest.mark.parametrize("stat", ["step_num", "group_id"])
def test_device_step_markers_are_numbered_by_their_stat(tmp_path, stat):
    """A TPU's Steps markers named without a number (the profile started at step 7, a step skipped)
    take the numbers their ``step_num`` (or xprof's ``group_id``) stat holds, worked out by hand."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    marks, ops = plane.line("Steps", 1_000), plane.line("XLA Ops", 1_000)
    for k, number in enumerate((7, 8, 12)):
        marks.event(plane.op("train"), 100 * k * U, 100 * U, **{stat: number})
        ops.event(plane.op("fusion.1", hlo_category="convolution"), (100 * k + 10) * U, 50 * U)
    rows = breakdown.breakdown(events.load([space.save(tmp_path / "steps.xplane.pb")]))
    assert rows["step"].tolist() == [7, 8, 12]
    assert (rows["compute_ps"] == 50 * U).all()


_INT = st.integers(-(2**63), 2**63 - 1)
_VALUE = st.one_of(_INT, st.integers(0, 2**64 - 1).map(Uint64), st.floats(), st.binary(max_size=8),
                   st.text(max_size=8), st.text(max_size=8).map(Inline))
_STAT_NAMES = st.sampled_from(["program_id", "hlo_op", "hlo_module", "hlo_category", "step_num", "group_id",
                               "device_ordinal", "dma_stall_duration_ps", "_p", "symbol_id", "flops", "Hlo Proto"])
_PLANES = st.sampled_from(["/device:TPU:0", "/device:TPU:1", "/device:GPU:0", "/host:CPU", "/host:metadata",
                           "/device:CUSTOM:Megascale Trace", "Task Environment", "/device:TPU:0 SparseCore 0"])
_LINES = st.sampled_from(["XLA Ops", "Async XLA Ops", "XLA Modules", "Steps", "TC Overlay", "Tensor Core",
                          "XLA TraceMe", "_counters_", "Stream #7(Kernel)", "python"])
_STATS = st.dictionaries(_STAT_NAMES, _VALUE, max_size=4)
_EVENTS = st.lists(st.tuples(st.integers(0, 6), st.integers(-(2**40), 2**40), st.integers(-(2**40), 2**40), _STATS),
                   max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(_PLANES, _STATS, st.lists(st.tuples(st.text(max_size=6), _STATS), max_size=4),
                          st.lists(st.tuples(_LINES, st.integers(0, 2**61), _EVENTS), max_size=3)), max_size=4))
def test_any_well_formed_xspace_loads_or_is_refused_in_one_line(tmp_path, planes):
    """Random XSpaces of the planes and lines real profiles carry, stats of every value type on planes,
    event metadata and events: perfkit reads them, or says in one line why not (BadInput); never a
    traceback."""
    space = XSpaceWriter("fuzz")
    for name, plane_stats, metadata, lines in planes:
        plane = space.plane(name)
        for key, value in plane_stats.items():
            plane.stat(key, value)
        ids = [plane.op(n, **stats) for n, stats in metadata] or [plane.op("x")]
        for line_name, stamp, evs in lines:
            line = plane.line(line_name, stamp)
            for md, offset, dur, stats in evs:
                line.event(ids[md % len(ids)] if md < 6 else 99, offset, dur, **stats)
    path = space.save(tmp_path / "fuzz.xplane.pb")
    try:
        ev = events.load([path])
    except BadInput as exc:
        assert "\n" not in exc.line() and str(path) in exc.line()
        return
    breakdown.breakdown(ev)  # and the analysis of whatever was read
    assert set(ev.columns) >= {"program_id", "category", "start_ps", "dur_ps"}


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's, where other tests imported it
@pytest.mark.parametrize("workers", ["one process", "forked workers"])
def test_truncated_profile_is_one_line_exit_2(tmp_path, monkeypatch, workers):
    if workers == "forked workers":  # a refusal inside a worker reaches the command as one line too
        monkeypatch.setattr(xplane, "PARALLEL_BYTES", 0)
        monkeypatch.setattr(xplane, "may_start_workers", lambda: True)  # also after other tests imported JAX
    whole = tpu_profile(tmp_path / "whole.xplane.pb", chips=2).read_bytes()
    for cut in (1, 7, len(whole) // 3, len(whole) // 2, len(whole) - 3):
        path = tmp_path / f"cut{cut}.xplane.pb"
        path.write_bytes(whole[:cut])
        result = CliRunner().invoke(cli, ["trace", "breakdown", str(path)])
        assert result.exit_code == 2, (cut, result.output)
        assert result.output.count("\n") == 1 and str(path) in result.output, result.output


@pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's, where other tests imported it
def test_planes_decoded_by_worker_processes_equal_one_process(tmp_path, monkeypatch, fixtures_dir):
    """Several files, many planes, shared out over forked workers (threshold lowered to these small
    files): the same frame, string codes and line codes merged per file, as one process reads."""
    paths = [tpu_profile(tmp_path / f"host{h}.xplane.pb", chips=3, steps=2, host=f"host{h}") for h in range(3)]
    real = [fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"]
    one, real_one = events.load(paths, workers=1), events.load(real, workers=1)
    monkeypatch.setattr(xplane, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(xplane, "may_start_workers", lambda: True)  # also after other tests imported JAX
    pools, pool = [], xplane.Pool
    monkeypatch.setattr(xplane, "Pool", lambda *args: pools.append(args) or pool(*args))
    pd.testing.assert_frame_equal(one, events.load(paths, workers=2))
    pd.testing.assert_frame_equal(real_one, events.load(real, workers=2))
    assert len(pools) == 4  # both surveyed and decoded by workers
    assert one["rank"].nunique() == 3 and real_one["device"].nunique() == 9


def test_columns_not_asked_for_are_not_built(tmp_path):
    """``load(columns=...)``: what the breakdown reads, plus the required columns; the same values and the
    same breakdown as the whole frame."""
    path = tpu_profile(tmp_path / "t.xplane.pb", chips=2, steps=3)
    whole = events.load([path])
    some = events.load([path], columns=["start_ps", "dur_ps", "line", "kind", "stall_ps"])
    assert list(some.columns) == ["rank", "device", "line", "kind", "category", "start_ps", "dur_ps", "step", "stall_ps"]
    pd.testing.assert_frame_equal(some, whole[some.columns])
    pd.testing.assert_frame_equal(breakdown.breakdown(some), breakdown.breakdown(whole))
    with pytest.raises(ValueError, match="no such events columns"):
        events.load([path], columns=["nope"])


def _varint(value: int) -> bytes:
    out = b""
    while True:
        out, value = out + bytes([value & 0x7F | (0x80 if value > 0x7F else 0)]), value >> 7
        if not value:
            return out


def _length(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2]) + _varint(len(payload)) + payload


def _ops_of_stats(path, space: XSpaceWriter, md: int, stats: list[bytes]):
    """``space`` written to ``path`` with an ``XLA Ops`` line on its TPU 0 plane (written by hand: protobuf would
    lay the stats out its own way): an op of metadata ``md`` every 10 us, 5 us long, each carrying one stat of
    ``stats`` (an XStat's bytes; empty: none)."""
    body = b"\x08\x01" + _length(2, b"XLA Ops")
    for k, stat in enumerate(stats):
        body += _length(4, b"\x08" + _varint(md) + b"\x10" + _varint(10 * k * U) + b"\x18" + _varint(5 * U)
                        + (_length(4, stat) if stat else b""))
    planes = list(space.proto.planes)
    del space.proto.planes[:]
    lines = {"/device:TPU:0": _length(3, body)}
    path.write_bytes(b"".join(_length(1, p.SerializeToString() + lines.get(p.name, b"")) for p in planes)
                     + space.proto.SerializeToString())  # the hostnames after the planes, as protobuf writes them
    return path


def test_stats_of_every_layout_read_as_protobuf_reads_them(tmp_path):
    """Stats as protobuf writes them (a one-byte id, one value), and laid out otherwise: the value set
    twice (protobuf keeps the last), the id after the value, a two-byte id (128: its first byte, 0x80, is no
    one-byte id, though the 0 in its low bits is one not asked for). Each op's stall and chip-clock duration are
    the values protobuf's own parser gives for the same bytes."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    md = plane.op("fusion.1", hlo_category="convolution")
    stall, clock = plane.stat_id("dma_stall_duration_ps"), plane.stat_id("device_duration_ps")
    padding = 0
    while plane.stat_id(f"padding_{padding}") < 127:
        padding += 1
    wide = plane.stat_id("device_offset_ps")
    assert stall < 128 == wide
    layouts = [b"\x08" + _varint(stall) + b"\x18\x05",                    # as protobuf writes it
               b"\x08" + _varint(stall) + b"\x18\x05\x20\x07",            # set twice: the int64 7
               b"\x20\x09\x08" + _varint(stall),                          # the value first
               b"\x08" + _varint(clock) + b"\x20" + _varint(3 * 10**12),  # a 6-byte value
               b"\x08" + _varint(wide) + b"\x20\x0b"]                     # a 2-byte id
    path = _ops_of_stats(tmp_path / "stats.xplane.pb", space, md, layouts)
    names = {v.name: k for k, v in XSPACE.FromString(path.read_bytes()).planes[0].stat_metadata.items()}
    theirs = {"stall_ps": [], "device_duration_ps": [], "device_offset_ps": []}
    for e in XSPACE.FromString(path.read_bytes()).planes[0].lines[0].events:
        stat = {s.metadata_id: s.int64_value or s.uint64_value for s in e.stats}
        theirs["stall_ps"].append(stat.get(names["dma_stall_duration_ps"], 0))
        theirs["device_duration_ps"].append(stat.get(names["device_duration_ps"], -1))
        theirs["device_offset_ps"].append(stat.get(names["device_offset_ps"], -1))
    ops = events.device_ops(events.load([path]))
    assert theirs["stall_ps"] == [5, 7, 9, 0, 0]
    assert {c: ops[c].tolist() for c in theirs} == theirs


def test_a_stat_cut_inside_its_id_is_refused(tmp_path):
    """A stat of one byte, the tag of its metadata id and no id (protobuf's parser refuses it): one line, not a
    stat dropped as one not asked for by the byte after it (the next event's tag)."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    md = plane.op("fusion.1", hlo_category="convolution")
    path = _ops_of_stats(tmp_path / "cut.xplane.pb", space, md, [b"\x08", b"\x08" + _varint(plane.stat_id("group_id")) + b"\x20\x01"])
    with pytest.raises(DecodeError):
        XSPACE.FromString(path.read_bytes())
    with pytest.raises(BadInput, match="malformed event on line 'XLA Ops'"):
        events.load([path])


def test_a_chip_clock_no_chip_could_measure_is_absent(tmp_path):
    """A TPU op's ``device_duration_ps`` (its time on the chip's clock) that no chip could have measured is read
    as absent (-1), as none is: negative (int64 or double), past int64 (uint64), not a number (double); a double
    is truncated to whole picoseconds. Only the ops that carry one count where the chip's clock parts from the
    trace's (``clocks.parted``): the 5 us ops against 3 us and 4.5 us, 2 + 0.5 us apart, by hand."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    md = plane.op("fusion.1", hlo_category="convolution")
    clock = b"\x08" + _varint(plane.stat_id("device_duration_ps"))
    double = lambda value: clock + b"\x11" + struct.pack("<d", value)  # noqa: E731 (XStat.double_value)
    stats = [clock + b"\x20" + _varint(3 * U),          # int64_value 3 us
             clock + b"\x20" + _varint(2**64 - 7),      # int64_value -7 (ten bytes, two's complement)
             clock + b"\x18" + _varint(2**63 + 5),      # uint64_value past int64
             double(4.5 * U + 0.75), double(float("nan")), double(-2.0 * U), b""]
    frame = events.load([_ops_of_stats(tmp_path / "clock.xplane.pb", space, md, stats)])
    assert frame["device_duration_ps"].tolist() == [3 * U, -1, -1, 9 * U // 2, -1, -1, -1]
    assert clocks.parted(frame) == [{"rank": 0, "device": 0, "ops": 2, "parted": 2, "parted_ps": 2 * U + U // 2}]


def test_aggregated_events_are_refused_in_one_line(tmp_path):
    """An event that stands for several (``num_occurrences`` in place of ``offset_ps``: an aggregated line, whose
    ops xprof's op stats count by that number) has no start: refused, never an op placed at its line's start."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    ops = plane.line("XLA Ops", 1_000)
    fusion = plane.op("fusion.1", hlo_category="convolution fusion")
    ops.event(fusion, 10 * U, 5 * U)
    ops.proto.events.add(metadata_id=fusion, num_occurrences=3, duration_ps=15 * U)
    path = space.save(tmp_path / "aggregated.xplane.pb")
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and str(path) in result.output, result.output
    assert "3 occurrences in one event" in result.output and "'XLA Ops' of /device:TPU:0" in result.output


def test_metadata_ids_far_apart_are_read(tmp_path):
    """Event metadata numbered far apart (ids are the writer's to choose: 7 and 2**40 here) name their events as
    protobuf reads them, in a table the size of the metadata, not of its largest id (terabytes)."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    for mid, name, category in ((7, "fusion.1", "convolution fusion"), (2**40, "all-reduce.2", "all-reduce")):
        plane.proto.event_metadata[mid].id, plane.proto.event_metadata[mid].name = mid, name
        stat = plane.proto.event_metadata[mid].stats.add(metadata_id=plane.stat_id("hlo_category"))
        stat.ref_value = plane.stat_id(category)
    ops = plane.line("XLA Ops", 1_000)
    for k, mid in enumerate((7, 2**40, 2**40 + 1, 7)):
        ops.event(mid, 10 * k * U, 5 * U)
    ev = events.load([space.save(tmp_path / "sparse.xplane.pb")])
    assert ev["name"].tolist()[:2] == ["fusion.1", "all-reduce.2"] and ev["name"].iloc[3] == "fusion.1"
    assert ev["name"].isna().tolist() == [False, False, True, False]
    assert ev["category"].tolist() == ["compute", "ici", "compute", "compute"]


def test_an_event_of_metadata_the_plane_lacks_is_not_metadata_0_s(tmp_path):
    """Where the plane holds metadata numbered 0 (protobuf's default id, a writer's to use), an event naming an
    id past its last is still unnamed, not metadata 0's op."""
    space = XSpaceWriter("h")
    plane = space.plane("/device:TPU:0")
    plane.proto.event_metadata[0].name = "all-reduce.0"
    ops = plane.line("XLA Ops", 1_000)
    ops.event(0, 0, 5 * U)
    ops.event(99, 10 * U, 5 * U)
    ev = events.load([space.save(tmp_path / "zero.xplane.pb")])
    assert ev["name"].iloc[0] == "all-reduce.0" and ev["name"].isna().tolist() == [False, True]


def test_two_profiles_in_one_file_are_refused(tmp_path):
    """Two XSpaces one after another in one file (``cat a b``) parse as one whose planes are each there twice
    (protobuf merges them), a profiler naming each plane once: refused in one line, where every op was counted
    twice (xprof's hlo_stats on a real GPU profile so doubled: 84 occurrences of 42, 6830.488 of 3415.244 us)."""
    one = tpu_profile(tmp_path / "one.xplane.pb").read_bytes()
    path = tmp_path / "two.xplane.pb"
    path.write_bytes(one + one)
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and str(path) in result.output, result.output
    assert "two planes named '/device:TPU:0'" in result.output


def test_a_gzipped_profile_is_refused_as_gzipped(tmp_path):
    """An xplane.pb compressed whole (gzip, as a trace.json.gz beside it is): refused in one line that says so,
    not as a damaged profile."""
    path = tmp_path / "packed.xplane.pb"
    path.write_bytes(gzip.compress(tpu_profile(tmp_path / "one.xplane.pb").read_bytes()))
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path)])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and str(path) in result.output, result.output
    assert "gzip-compressed" in result.output
