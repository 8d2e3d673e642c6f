"""Holistic Trace Analysis (HTA 0.5.0) as the referee of perfkit's Kineto figures, on HTA's own traces
(tests/data/real/kineto): compute / non-compute (ICI + DMA) / idle of the kernel time, and the
comm-comp overlap share of ``perfkit trace breakdown``.

HTA's definitions (hta/analyzers/breakdown_analysis.py, communication_analysis.py): per rank, the
kernel time is the first GPU event's start to the last one's end (perfkit: ``window="trace"``);
compute = the union of compute kernels; idle = kernel time minus the union of all kernels, memcpys
and memsets; non-compute = the rest; overlap = |union(comm) & union(compute)| / |union(comm)|.
Three things HTA does that perfkit does not, on purpose (docs/architecture.md), each pinned here with
a transformed copy of the file that makes the figures equal:

- HTA rounds every event of a trace with sub-microsecond timestamps inward to whole microseconds
  (start up, end down: hta/common/trace_parser.py, ``round_down_time_stamps``; off with
  ``HTA_DISABLE_NS_ROUNDING=1``); perfkit keeps the file's nanoseconds.
- HTA keeps only GPU events whose launch (``cuda_runtime``, by correlation id) is in the trace
  (hta/common/trace.py, ``_filter_irrelevant_gpu_kernels``); perfkit counts every kernel that ran
  in the window, also those queued before the profiler started.
- HTA takes every event with a ``stream`` argument (>= 0) for a GPU event, host events too: Inductor's
  Triton launcher ``cpu_op`` (``args.stream`` 0, its host time counted as compute) and a ``cuda_sync``
  Stream Sync (stream 7, non-compute); perfkit takes the device categories only.

The HTA figures below were recorded with HTA 0.5.0 (``pip install HolisticTraceAnalysis==0.5.0``,
Python 3.11, pandas 3.1.1) on 2026-12-01: ``TraceAnalysis(trace_dir=D, include_last_profiler_step=K)``
with D a folder holding only that file, ``get_temporal_breakdown(visualize=False)`` and
``get_comm_comp_overlap(visualize=False)``. Where ``hta`` is importable (not in CI) it also runs live.
"""

import functools
import gzip
import json
import math
import re
import shutil
from decimal import Decimal

import pytest

from click.testing import CliRunner
from hta_rounding import between_us, rounded_off_us, rounding_notes
from noted import HOST_STREAMS, LAUNCHLESS, noted

from perfkit.cli import cli
from perfkit.trace import breakdown, events

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
# file -> (idle, compute, non-compute, kernel time) in us, comp_comm_overlap_pctg; every step kept
HTA_ALL_STEPS = {
    "rank-0.json.gz": ((675191, 210320, 337336, 1222847), 14.95),
    "rank-1.json.gz": ((651136, 271973, 308077, 1231186), 19.93),
    "hta_nccl_data.json.gz": ((506512, 113012, 41026, 660550), 15.14),
    "hta_trace_diff_test.json.gz": ((51692, 514576, 178246, 744514), 69.07),
}
# HTA's default (include_last_profiler_step=False): each rank's last ProfilerStep dropped
HTA_LAST_STEP_DROPPED = {
    "rank-0.json.gz": ((321378, 106252, 172428, 600058), 11.81),
    "rank-1.json.gz": ((328671, 135548, 136455, 600674), 20.05),
    "hta_nccl_data.json.gz": ((338781, 75169, 21636, 435586), 14.31),
}
# hta_nccl_data.json.gz with HTA_DISABLE_NS_ROUNDING=1: every step kept, and last step dropped
HTA_NCCL_UNROUNDED = ((503050.9914063759, 115655.84700000286, 41844.167226433754, 660551.0056328125), 15.61)
# HTA_DISABLE_NS_ROUNDING=1, every step kept, on a copy of hta_nccl_data whose 21 NCCL kernels (stream 40) carry no
# stream argument; the same on a copy without them: HTA takes them for no GPU events (no collective left: no overlap)
HTA_NCCL_STREAMLESS = ((542241.6606327839, 115655.8470000029, 2653.4980000257, 660551.0056328125), None)
HTA_NCCL_UNROUNDED_LAST_DROPPED = ((336419.7146875525, 76935.82800000906, 22232.018992125988, 435587.5616796875), 14.76)

# HTA on the file and on the copy without the host events' stream (``_host_streams_dropped``), rounding off:
# (idle, compute, non-compute, kernel time) us; and its GPU events on each
HTA_HOST_STREAMS = {
    "hta_triton_example.json.gz": ((0.0, 95.812, 0.0, 95.812), (0.0, 1.76, 0.0, 1.76), (2, 1)),
    "hta_cuda_event_sync.json.gz": ((207.0, 49.0, 7.0, 263.0), (212.0, 49.0, 2.0, 263.0), (6, 5)),
    # vLLM on an NVIDIA B200: one Inductor Triton launcher's cpu_op (74.391 us) with ``stream`` 0. HTA's float64 sums
    # are off the file's whole ns by up to half a ns (compute 10771.684482 on the copy; 10771.685 by Decimal sums)
    "tracelens_b200_vllm_eager.json.gz": ((72817.99641992735, 10844.384433589876, 824.7969999983907, 84487.17785351562),
                                          (72890.69637109923, 10771.684482418, 824.7969999983907, 84487.17785351562),
                                          (930, 929)),
}


def _hta_view(rows) -> tuple[tuple[float, ...], float]:
    """perfkit's rows summed, as HTA reports them: (idle, compute, non-compute, span) in us, overlap %."""
    s = rows[breakdown.TIMES + breakdown.COMM].sum()
    parts = tuple(float(v) / 1e6 for v in (s["idle_ps"], s["compute_ps"], s["ici_ps"] + s["dma_ps"], s["span_ps"]))
    return parts, 100 * float(s["hidden_ps"]) / float(s["comm_ps"])


def _load(path, *notes):
    """The trace at ``path`` read, giving the DefinitionNotes that ``notes`` (regular expressions) match."""
    with noted(*notes):
        return events.load([path])


def _rounding(path) -> list[str]:
    """The note of HTA's rounding the trace at ``path`` gives, word for word (hta_rounding's plain reading), as a
    regular expression: none where its rounding moves no device op."""
    return [re.escape(note) for note in rounding_notes(path)]


def _rounded_like_hta(src, dst):
    """A copy of a Kineto trace with its GPU events rounded inward to whole us, as HTA's parser does."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") in GPU_CATS:
            start, end = math.ceil(e["ts"]), math.floor(e["ts"] + e["dur"])
            e["ts"], e["dur"] = start, end - start
    dst.write_text(json.dumps(doc))
    return dst


def _launched_only(src, dst):
    """A copy of a Kineto trace without the GPU events whose launch the trace does not hold (HTA's filter)."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    launched = {e["args"]["correlation"] for e in doc["traceEvents"]
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if e.get("cat") not in GPU_CATS or e["args"].get("correlation") in launched]
    dst.write_text(json.dumps(doc))
    return dst


def _host_streams_dropped(src, dst):
    """A copy of a Kineto trace whose host events (no GPU category) carry no ``stream`` argument."""
    doc = json.loads(gzip.decompress(src.read_bytes()))
    for e in doc["traceEvents"]:
        if e.get("cat") not in GPU_CATS and isinstance(e.get("args"), dict):
            e["args"].pop("stream", None)
    dst.write_text(json.dumps(doc))
    return dst


def _parts(rows) -> tuple[float, ...]:
    """A whole-trace breakdown's one row as HTA reports it, without collectives: (idle, compute, non-compute,
    span) us."""
    (r,) = rows.itertuples()
    return tuple(float(v) / 1e6 for v in (r.idle_ps, r.compute_ps, r.ici_ps + r.dma_ps, r.span_ps))


def _assert_equal(got, expected):
    (parts, overlap), (hta_parts, hta_overlap) = got, expected
    assert parts == pytest.approx(hta_parts, abs=1e-3)  # to the nanosecond
    assert overlap == pytest.approx(hta_overlap, abs=0.005)  # HTA rounds its percentage to 2 decimals


@pytest.mark.parametrize("name", ["rank-0.json.gz", "rank-1.json.gz"])
def test_whole_trace_equals_hta(fixtures_dir, name):
    """Whole-microsecond traces: perfkit's whole-trace window is HTA's figure exactly; its per-step rows
    add up to HTA's compute and non-compute, every step kept or the last one dropped."""
    ev = _load(fixtures_dir / "kineto" / name)
    _assert_equal(_hta_view(breakdown.breakdown(ev, "trace")), HTA_ALL_STEPS[name])
    rows = breakdown.breakdown(ev)
    parts, overlap = _hta_view(rows)
    assert parts[1:3] == HTA_ALL_STEPS[name][0][1:3] and overlap == pytest.approx(HTA_ALL_STEPS[name][1], abs=0.005)
    parts, overlap = _hta_view(rows[rows["step"] < rows["step"].max()])
    dropped = HTA_LAST_STEP_DROPPED[name]
    assert parts[1:3] == dropped[0][1:3] and overlap == pytest.approx(dropped[1], abs=0.005)
    assert parts[0] > dropped[0][0]  # perfkit's step span opens at the ProfilerStep, HTA's at the first kernel


@pytest.mark.parametrize("last_step", ["keep", "drop"])
def test_trace_diff_whole_traces_take_htas_last_step_option(fixtures_dir, last_step):
    """`trace diff --window trace --last-step`: each side's compute time is HTA's, with its last step kept or
    (HTA's default) dropped. Its help named the option before it took it. (Non-compute differs by definition:
    the diff's exclusive time per op against HTA's time not under a compute kernel.)"""
    paths = [str(fixtures_dir / "kineto" / f"rank-{r}.json.gz") for r in (0, 1)]
    result = CliRunner().invoke(cli, ["trace", "diff", *paths, "--window", "trace", "--last-step", last_step, "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["last_step"] == last_step
    hta = HTA_ALL_STEPS if last_step == "keep" else HTA_LAST_STEP_DROPPED
    for side, name in (("a", "rank-0.json.gz"), ("b", "rank-1.json.gz")):
        assert sum(r[f"{side}_ps"] for r in doc["rows"] if r["category"] == "compute") / 1e6 == hta[name][0][1]
    text = CliRunner().invoke(cli, ["trace", "diff", *paths, "--window", "trace", "--last-step", last_step]).stdout
    assert text.count("(1 chip, whole traces)") == 2
    assert ("; last step dropped where there are two or more;" in text) == (last_step == "drop")
    # (a newcomer's: the header said "per chip and step (means)" of whole traces)
    assert text.startswith("device time (ms) and ops per chip over its whole trace, by kind: ")


def test_nanosecond_trace_hta_rounds_inward(fixtures_dir, tmp_path):
    """hta_nccl_data has sub-microsecond timestamps: perfkit keeps them (= HTA with its rounding off);
    rounded inward as HTA's parser does, perfkit gives HTA's default figures."""
    src = fixtures_dir / "kineto" / "hta_nccl_data.json.gz"
    ev = _load(src, *_rounding(src))
    _assert_equal(_hta_view(breakdown.breakdown(ev, "trace")), HTA_NCCL_UNROUNDED)
    rows = breakdown.breakdown(ev)
    parts, overlap = _hta_view(rows[rows["step"] < rows["step"].max()])
    assert parts[1:3] == pytest.approx(HTA_NCCL_UNROUNDED_LAST_DROPPED[0][1:3], abs=1e-3)
    assert overlap == pytest.approx(HTA_NCCL_UNROUNDED_LAST_DROPPED[1], abs=0.005)
    got = _hta_view(breakdown.breakdown(ev, "trace"))
    assert got[0][1] == pytest.approx(115655.847, abs=1e-3)  # the ISSUE's "+2.3%" against HTA's 113012
    rounded = _load(_rounded_like_hta(src, tmp_path / "rounded.json"))
    _assert_equal(_hta_view(breakdown.breakdown(rounded, "trace")), HTA_ALL_STEPS["hta_nccl_data.json.gz"])


def test_device_ops_without_a_stream_are_counted_and_named(fixtures_dir, tmp_path):
    """HTA takes an event for a GPU event by its stream argument: a kernel without one is none of its (HTA 0.5.0
    on a copy of hta_nccl_data whose 21 NCCL kernels lost theirs gives its figures without them). perfkit counts
    them, as it does with their stream, and says so in one note."""
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / "hta_nccl_data.json.gz").read_bytes()))
    nccl = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e["args"].get("stream") == 40]
    assert len(nccl) == 21 and all(e["name"].startswith("ncclKernel_") for e in nccl)
    for e in nccl:
        del e["args"]["stream"]
    (tmp_path / "streamless.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["trace", "breakdown", "--window", "trace", str(tmp_path / "streamless.json")])
    (rounding,) = rounding_notes(tmp_path / "streamless.json")  # (its times' ns: a note of their own)
    assert result.exit_code == 0 and result.stderr == (f"perfkit: note: {tmp_path / 'streamless.json'}: 21 device ops "
                                                       "have no stream argument (or one that is not a number): "
                                                       "counted here; HTA takes only events with one for GPU events\n"
                                                       f"perfkit: note: {rounding}\n")
    with events.notes_left_out():
        _assert_equal(_hta_view(breakdown.breakdown(_load(tmp_path / "streamless.json"), "trace")), HTA_NCCL_UNROUNDED)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not any(e is k for k in nccl)]
    (tmp_path / "without.json").write_text(json.dumps(doc))
    without = breakdown.breakdown(_load(tmp_path / "without.json", *_rounding(tmp_path / "without.json")), "trace")
    assert _parts(without) == pytest.approx(HTA_NCCL_STREAMLESS[0], abs=1e-3) and without["comm_ps"].sum() == 0
    doc["traceEvents"].append(nccl[0])  # one: "1 device op has"
    (tmp_path / "one.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["trace", "breakdown", "--window", "trace", str(tmp_path / "one.json")])
    assert result.stderr.startswith(f"perfkit: note: {tmp_path / 'one.json'}: 1 device op has no stream argument (")


def test_kernels_queued_before_the_profiler(fixtures_dir, tmp_path):
    """hta_trace_diff_test: 614 GPU events (56.5 ms of kernel time, in the first 40 ms) were launched
    before the trace begins. perfkit counts them (they ran in the window); without them it is HTA."""
    src = fixtures_dir / "kineto" / "hta_trace_diff_test.json.gz"
    ev = _load(src, LAUNCHLESS + r" \(queued before the profiler started, or launched after\): counted here; HTA "
               "drops them")
    parts, overlap = _hta_view(breakdown.breakdown(ev, "trace"))
    assert parts == pytest.approx((27296, 548148, 169795, 745239), abs=1e-3) and overlap == pytest.approx(70.84, abs=0.005)
    kept = _launched_only(src, tmp_path / "launched.json")
    assert len(events.device_ops(ev)) - len(events.device_ops(_load(kept))) == 614
    _assert_equal(_hta_view(breakdown.breakdown(_load(kept), "trace")), HTA_ALL_STEPS["hta_trace_diff_test.json.gz"])


@pytest.mark.parametrize("name", list(HTA_HOST_STREAMS))
def test_host_events_with_a_stream_are_not_device_time(fixtures_dir, tmp_path, name):
    """HTA counts host events with a stream (a Triton launcher's cpu_op: 95.8 us of host time as compute; a
    Stream Sync: 5 us as non-compute); perfkit counts device events only: HTA's figures on a copy without
    those streams, not on the file."""
    on_file, without, _ = HTA_HOST_STREAMS[name]
    src = fixtures_dir / "kineto" / name
    parts = _parts(breakdown.breakdown(_load(src, HOST_STREAMS, *_rounding(src)), "trace"))
    assert parts == pytest.approx(without, abs=1e-3) and parts != pytest.approx(on_file, abs=1e-3)
    dropped = _host_streams_dropped(src, tmp_path / "copy.json")
    copy = _parts(breakdown.breakdown(_load(dropped, *_rounding(dropped)), "trace"))
    assert copy == parts


@pytest.mark.parametrize("name", [*HTA_HOST_STREAMS, "rank-0.json.gz", "hta_amd_mi250_minitoy.json.gz"])
def test_host_events_with_a_stream_are_named_on_stderr(fixtures_dir, name):
    """Where the definitions part, the output says so: one note per file naming its host events with a stream,
    as many as HTA's GPU events on the file outnumber those on the copy without them (a Triton launcher's
    cpu_op, a cuda_sync Stream Sync); none on a file without such events, nor on ROCm's runtime calls, whose
    stream "0x0" HTA reads as none (its GPU events there are the 16 kernels, test_trace_formats.py)."""
    path = fixtures_dir / "kineto" / name
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace", "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]  # stdout stays JSON, the note in it for scripts
    said = "".join(f"perfkit: note: {n}\n" for n in notes)
    if name not in HTA_HOST_STREAMS:
        assert result.stderr == said and notes == rounding_notes(path)  # (its times' ns: a note of their own)
        return
    on_file, on_copy = HTA_HOST_STREAMS[name][2]
    category = {"hta_triton_example.json.gz": "cpu_op", "hta_cuda_event_sync.json.gz": "cuda_sync",
                "tracelens_b200_vllm_eager.json.gz": "cpu_op"}[name]
    note = (f"{path}: host events with a stream argument ({on_file - on_copy} {category}) are not device ops here; "
            "HTA's temporal breakdown counts every event with a stream as GPU time")
    assert result.stderr == said and notes == [note] + rounding_notes(path)


# HTA's GPU events against the device events in the file (kernel / gpu_memcpy / gpu_memset): 15018 of 15632
# (HTA 0.5.0, live), and 2685 of 3653 on the ROCm file (test_trace_formats.py); none dropped on
# rank-0.json.gz (1204 of 1204) and the MI250 file (16 of 16)
UNLAUNCHED = {"hta_trace_diff_test.json.gz": 15632 - 15018, "tracelens_mi300_resnet_act_checkpoint.json.gz": 3653 - 2685,
              "rank-0.json.gz": 0, "hta_amd_mi250_minitoy.json.gz": 0}


@pytest.mark.parametrize("name", list(UNLAUNCHED))
def test_device_ops_without_a_launch_are_named_on_stderr(fixtures_dir, name):
    """HTA drops the device ops whose launch is not in the trace by the last ProfilerStep's end (kernels queued
    before the profiler started); perfkit counts them, and says how many in one note, as many as HTA drops."""
    path = fixtures_dir / "kineto" / name
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace", "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    note = (f"{path}: {UNLAUNCHED[name]} device ops have no launch in the trace up to its last ProfilerStep's end "
            "(queued before the profiler started, or launched after): counted here; HTA drops them")
    assert notes == ([note] if UNLAUNCHED[name] else []) + rounding_notes(path)  # (its times' ns: a note of their own)
    assert result.stderr == "".join(f"perfkit: note: {n}\n" for n in notes)


@pytest.mark.parametrize("command", [["tail"], ["collectives"], ["diff", "A"]])
def test_every_trace_commands_json_holds_its_notes(fixtures_dir, command):
    """The notes on stderr are in each trace command's --json too, each said once (trace diff of a file against
    itself reads it twice, with the same note)."""
    path = str(fixtures_dir / "kineto" / "hta_trace_diff_test.json.gz")
    result = CliRunner().invoke(cli, ["trace", *[path if arg == "A" else arg for arg in command], path, "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    note = (f"{path}: 614 device ops have no launch in the trace up to its last ProfilerStep's end (queued before the "
            "profiler started, or launched after): counted here; HTA drops them")
    # diff also says, of each side alike, that its steps run past their host ProfilerSteps (its GPU work lags them)
    past = [n for n in notes if " run past their step markers " in n]
    assert [n.replace(" in B ", " in A ") for n in past[1:]] == past[:1] if command[0] == "diff" else not past
    # by a plain reading of the JSON: 42 SendRecv and 18 AllReduce kernels launched under record_param_comms (which
    # records no In msg nelems nor Group size here) and nccl:all_to_all / nccl:all_reduce (which record their input);
    # the file lists no process groups (no distributedInfo pg_config); 3 AllReduce and 1 SendRecv launched before the
    # profiler started (no cuda_runtime call of their correlation)
    kernels = ("communication kernels without bytes and GB/s (?): 60 (42 all-to-all, 18 all-reduce) record no group "
               "size (Group size), nor do the torch.distributed spans around their launch, nor does their trace list "
               "its process groups (distributedInfo pg_config): n is unknown, not taken from the ranks given (a job's "
               "collectives may run on groups of fewer of its ranks); "
               "4 (3 all-reduce, 1 collective-permute) record none and have no launch in "
               "the trace under record_param_comms (queued before the profiler started, or launched outside "
               "torch.distributed)")
    assert [n for n in notes if n not in past] == ([note] if command[0] == "diff" else [note, kernels])
    assert result.stderr == "".join(f"perfkit: note: {n}\n" for n in notes)


def _event(cat, name, ts, dur, **args) -> dict:
    """A hand-made Kineto event: device events on stream 7's thread, the rest on the host's."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 7 if cat in GPU_CATS else 100, "ts": ts,
            "dur": dur, "args": args}


def test_device_ops_without_a_launch_by_hand(tmp_path):
    """By hand: host ProfilerSteps #1 [0, 100) and #2 [100, 200) us; launches at 50, 150 and 250 us (correlations
    1-3); kernels of correlation 4 (no launch: queued before), 1, 2, 3 (launched after the last step's end) and
    one without a correlation. HTA keeps k1 and k2 (checked live with HTA 0.5.0): three dropped."""
    event = _event
    kernel = functools.partial(event, "kernel", dur=20, device=0, stream=7)
    trace = [event("user_annotation", "ProfilerStep#1", 0, 100), event("user_annotation", "ProfilerStep#2", 100, 100),
             *(event("cuda_runtime", "cudaLaunchKernel", ts, 5, correlation=c) for c, ts in ((1, 50), (2, 150), (3, 250))),
             kernel(name="k_before", ts=10, correlation=4), kernel(name="k1", ts=60, correlation=1),
             kernel(name="k2", ts=160, correlation=2), kernel(name="k3", ts=260, correlation=3),
             kernel(name="k_no_id", ts=300)]
    path = tmp_path / "hand.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": trace}))
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace"])
    assert result.exit_code == 0, result.output
    assert result.stderr == (f"perfkit: note: {path}: 3 device ops have no launch in the trace up to its last "
                             "ProfilerStep's end (queued before the profiler started, or launched after): counted "
                             "here; HTA drops them\n")


def test_skewed_ops_on_one_stream_run_side_by_side(tmp_path):
    """By hand: on stream 7 a compute kernel [10, 20) us and a DtoH memcpy [18, 30) us that starts 2 us before it
    ends (the clocks' skew: a stream runs one op at a time). The 2 us are compute, as in HTA's union of compute
    kernels (HTA 0.5.0 live: idle 0, compute 10, non-compute 10, kernel time 20), not the memcpy's as nesting
    would have it. The real case: HTA's negative_queue_length_values_check trace, stream 27."""
    trace = [_event("cuda_runtime", "cudaLaunchKernel", 0, 1, correlation=1),
             _event("cuda_runtime", "cudaMemcpyAsync", 2, 1, correlation=2),
             _event("kernel", "reduce_kernel", 10, 10, device=0, stream=7, correlation=1),
             _event("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", 18, 12, device=0, stream=7, correlation=2)]
    path = tmp_path / "skew.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": trace}))
    assert _parts(breakdown.breakdown(_load(path), "trace")) == (0, 10, 10, 20)


def test_a_span_of_nothing_is_said_to_measure_nothing(tmp_path):
    """By hand: one host ProfilerStep#1 [0, 100) us whose launch at 10 us runs one kernel of 0 us at 20 us. Its whole
    trace spans 0 ns: HTA 0.5.0 (checked live, rounding on or off, the last step kept or dropped) gives idle,
    compute, non-compute and kernel time 0 us, its percentages and overlap NaN. perfkit's row is those zeros, and a
    note says they measure no time (before, the row of zeros came without a word); the step's own row, 100 us
    idle, is a measurement and has none."""
    trace = [_event("user_annotation", "ProfilerStep#1", 0, 100),
             _event("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
             _event("kernel", "k0", 20, 0, device=0, stream=7, correlation=1)]
    path = tmp_path / "instant.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": trace}))
    note = ("rank 0 device 0 whole trace: a span of 0 ns (its device ops all start and end at one instant): it "
            "measures no time, its zeros counted in the means over spans")
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    (row,) = doc["rows"]
    assert (row["idle_ps"], row["compute_ps"], row["ici_ps"] + row["dma_ps"], row["span_ps"]) == (0, 0, 0, 0)
    assert row["overlap"] is None and doc["notes"] == [note] and result.stderr == f"perfkit: note: {note}\n"
    step = CliRunner().invoke(cli, ["trace", "breakdown", str(path)])
    assert step.exit_code == 0 and step.stderr == "", step.output
    ranks = []
    for rank in (0, 1):  # two ranks' alike: one line names both
        ranks.append(tmp_path / f"rank{rank}.json")
        ranks[-1].write_text(json.dumps({"distributedInfo": {"rank": rank}, "traceEvents": trace}))
    both = CliRunner().invoke(cli, ["trace", "breakdown", *map(str, ranks), "--window", "trace"])
    assert both.exit_code == 0 and both.stderr == (
        "perfkit: note: 2 spans of 0 ns (rank 0 device 0 whole trace; rank 1 device 0 whole trace): their device "
        "ops all start and end at one instant: they measure no time, their zeros counted in the means over spans\n")
    # trace diff's means per chip over its whole trace count it too (A and B: 1 chip, whole traces): it says so,
    # once a side, beside its note that it times no op of no duration
    diff = CliRunner().invoke(cli, ["trace", "diff", "--window", "trace", str(ranks[0]), str(path), "--json"])
    assert diff.exit_code == 0, diff.output
    doc = json.loads(diff.stdout)
    assert (doc["spans_a"], doc["spans_b"], doc["rows"]) == (1, 1, [])
    assert doc["notes"][:2] == [note.replace(" whole trace:", f" whole trace in {side}:") for side in "AB"]


@pytest.mark.parametrize("name", ["hta_nccl_data.json.gz", "rank-0.json.gz"])
def test_htas_rounding_is_said_of_the_traces_it_moves(fixtures_dir, name):
    """HTA 0.5.0 rounds each event inward to whole us unless HTA_DISABLE_NS_ROUNDING=1. hta_nccl_data's device ops
    start and end between whole us, and the rounding moves HTA's figures (compute 113012 us, 115655.847 with it
    off, perfkit's: HTA_ALL_STEPS, HTA_NCCL_UNROUNDED); rank-0's times are whole us, and nothing moves (HTA's
    figures equal with it on and off, checked live). A note says so of the first, on stderr and in --json's notes,
    and nothing of the second, where a line in the header said HTA rounds of every Kineto trace alike."""
    path = fixtures_dir / "kineto" / name
    assert between_us(path) == (3774 if name == "hta_nccl_data.json.gz" else 0)  # by a plain reading of the JSON
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace", "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert notes == rounding_notes(path) and len(notes) == (name == "hta_nccl_data.json.gz")
    assert result.stderr == "".join(f"perfkit: note: {n}\n" for n in notes)
    text = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace"])
    assert text.exit_code == 0 and text.stderr == result.stderr, text.output
    assert "HTA rounds" not in text.stdout and "; times in ms, to the ns; " in text.stdout.splitlines()[0]


def test_htas_rounding_is_said_only_where_it_moves_a_device_op(tmp_path):
    """By hand: host ProfilerStep#1 [0, 100) us, launches at 10.5 and 30.25 us, kernels [20, 40) and [50, 60) us:
    HTA 0.5.0's figures are the same with its rounding on and off (idle 10, compute 30 of 40 us; checked live), and
    no note. The first kernel at 20.0005 us instead (its launch at 10): HTA's rounding moves it (compute 29 of 39
    us, 30 of 39.999 with it off), and one note names one op."""
    def trace(kernel_us, launch_us):
        return [_event("user_annotation", "ProfilerStep#1", 0, 100),
                _event("cuda_runtime", "cudaLaunchKernel", launch_us, 5, correlation=1),
                _event("cuda_runtime", "cudaLaunchKernel", 30.25, 5, correlation=2),
                _event("kernel", "k1", kernel_us, 20, device=0, stream=7, correlation=1),
                _event("kernel", "k2", 50, 10, device=0, stream=7, correlation=2)]

    for name, events_, ops in (("host.json", trace(20, 10.5), 0), ("kernel.json", trace(20.0005, 10), 1)):
        path = tmp_path / name
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events_}))
        result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace", "--json"])
        assert result.exit_code == 0, result.output
        assert between_us(path) == ops and json.loads(result.stdout)["notes"] == rounding_notes(path)


# HTA 0.5.0, HTA_DISABLE_NS_ROUNDING=1 and not, every step kept, on tracelens_mi300_vllm_graph_replay.json.gz (one
# device, stream 0): (compute, non-compute) us
HTA_VLLM_GRAPH = {"unrounded": (10674.517, 43.191), "rounded": (10250, 34)}


@pytest.mark.parametrize("name, unrounded, rounded", [
    ("hta_nccl_data.json.gz", HTA_NCCL_UNROUNDED[0][1:3], HTA_ALL_STEPS["hta_nccl_data.json.gz"][0][1:3]),
    ("tracelens_mi300_vllm_graph_replay.json.gz", HTA_VLLM_GRAPH["unrounded"], HTA_VLLM_GRAPH["rounded"])])
def test_htas_rounding_note_says_how_much_its_figures_move(fixtures_dir, name, unrounded, rounded):
    """The rounding note says by how much HTA's figures move: HTA's compute plus non-compute time with its rounding
    off less with it on (157500.014 - 154038 = 3462.014 us on hta_nccl_data, 10717.708 - 10284 = 433.708 on the
    vLLM graph replay), where the note said only that they move. (HTA's idle time gains that less its kernel time's
    loss: 506512 - 503050.991 = 3461.009 = 3462.014 - 1.006.)"""
    moved = f"{sum(unrounded) - sum(rounded):.3f}"
    path = fixtures_dir / "kineto" / name
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--window", "trace", "--json"])
    assert result.exit_code == 0, result.output
    (note,) = [n for n in json.loads(result.stdout)["notes"] if "between whole us" in n]
    assert f"which takes {moved} us off the time the device ops run" in note
    assert f"{rounded_off_us(path):.3f}" == moved  # the test's own plain reading of the file agrees


def test_htas_rounding_note_says_its_amount_of_the_steps_kept(fixtures_dir):
    """With the last step dropped (HTA's default), hta_nccl_data's breakdown holds steps 4 and 5: the device ops
    launched in them run 99167.847 us unrounded (a Decimal reading of the JSON), 75169 + 21636 = 96805 rounded
    (HTA's default compute plus non-compute): the rounding takes 2362.847 us off them, where the note gave only the
    3462.014 us of every step's ops, as if of the table's steps."""
    path = fixtures_dir / "kineto" / "hta_nccl_data.json.gz"
    assert rounded_off_us(path, drop_last=True) == Decimal("99167.847") - (75169 + 21636)  # the test's own reading
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--last-step", "drop", "--json"])
    assert result.exit_code == 0, result.output
    assert sorted({r["step"] for r in json.loads(result.stdout)["rows"]}) == [4, 5]
    (note,) = [n for n in json.loads(result.stdout)["notes"] if "between whole us" in n]
    assert "which takes 3462.014 us off the time the device ops run (their union: " in note
    assert "at its ends) with every step kept, 2362.847 us with the last step dropped (the ops launched in it " \
        "left out, as by HTA's default); " in note
    assert json.loads(result.stdout)["notes"].count(note) == 1 and note in rounding_notes(path)


def _hta(folder, keep_last: bool):
    from hta.trace_analysis import TraceAnalysis

    ta = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=keep_last)
    t = ta.get_temporal_breakdown(visualize=False).iloc[0]
    o = ta.get_comm_comp_overlap(visualize=False).iloc[0]
    return (tuple(float(t[c]) for c in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)",
                                         "kernel_time(us)")), float(o["comp_comm_overlap_pctg"]))


@pytest.mark.parametrize("name", list(HTA_ALL_STEPS))
def test_hta_live(fixtures_dir, tmp_path, monkeypatch, name):
    """HTA itself, where installed: its figures are the pinned ones, and perfkit's equal them on the
    file (transformed as above where HTA's definition differs)."""
    pytest.importorskip("hta", reason="HTA is not installed (pip install HolisticTraceAnalysis==0.5.0)")
    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(fixtures_dir / "kineto" / name, folder / name)
    _assert_equal(_hta(folder, True), HTA_ALL_STEPS[name])
    if name in HTA_LAST_STEP_DROPPED:
        _assert_equal(_hta(folder, False), HTA_LAST_STEP_DROPPED[name])
    src = folder / name
    if name == "hta_nccl_data.json.gz":
        src = _rounded_like_hta(src, tmp_path / "rounded.json")
        monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
        _assert_equal(_hta(folder, True), HTA_NCCL_UNROUNDED)
    elif name == "hta_trace_diff_test.json.gz":
        src = _launched_only(src, tmp_path / "launched.json")
    _assert_equal(_hta_view(breakdown.breakdown(_load(src), "trace")), HTA_ALL_STEPS[name])


@pytest.mark.parametrize("name", list(HTA_HOST_STREAMS))
def test_hta_live_host_streams(fixtures_dir, tmp_path, monkeypatch, name):
    """HTA itself, where installed: its figures and GPU events on the file and on the copy are the pinned ones."""
    pytest.importorskip("hta", reason="HTA is not installed (pip install HolisticTraceAnalysis==0.5.0)")
    from hta.trace_analysis import TraceAnalysis

    monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "1")
    on_file, without, gpu_events = HTA_HOST_STREAMS[name]
    for expected, events_, make, copy in ((on_file, gpu_events[0], shutil.copy, name),
                                          (without, gpu_events[1], _host_streams_dropped, "copy.json")):
        folder = tmp_path / make.__name__
        folder.mkdir()
        make(fixtures_dir / "kineto" / name, folder / copy)
        ta = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
        t = ta.get_temporal_breakdown(visualize=False).iloc[0]
        got = tuple(float(t[c]) for c in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"))
        assert got == pytest.approx(expected, abs=1e-3)
        assert int(ta.t.get_trace(next(iter(ta.t.traces)))["stream"].ne(-1).sum()) == events_


# HTA 0.5.0 on rank-0 and rank-1 in one folder, include_last_profiler_step=True: get_gpu_kernel_breakdown's kernel
# types summed over both ranks (us), its NCCL kernels per rank (count, summed duration us), get_potential_stragglers
HTA_TWO_RANKS_KERNEL_TYPES = {"COMMUNICATION": 635528, "COMMUNICATION overlapping MEMORY": 4978,
                              "COMPUTATION overlapping COMMUNICATION": 126830,
                              "COMPUTATION overlapping COMMUNICATION overlapping MEMORY": 7916}
HTA_TWO_RANKS_NCCL = {0: (10, 396199), 1: (10, 379053)}
HTA_TWO_RANKS_STRAGGLER = 1


def test_two_ranks_communication_and_straggler_are_htas(fixtures_dir):
    """Two ranks of one job: each rank's collectives in flight are HTA's NCCL kernel time (they never overlap one
    another), their exposed part (ICI: not under compute, memory overlap included) HTA's communication not
    overlapped by compute, the instances HTA's NCCL kernels, and the rank that arrives last at every matched
    collective of both steps HTA's potential straggler."""
    paths = [fixtures_dir / "kineto" / f"rank-{r}.json.gz" for r in (0, 1)]
    rows = breakdown.breakdown(events.load(paths), "trace").set_index("rank")
    types = HTA_TWO_RANKS_KERNEL_TYPES
    assert rows["ici_ps"].sum() / 1e6 == types["COMMUNICATION"] + types["COMMUNICATION overlapping MEMORY"]
    assert rows["comm_ps"].sum() / 1e6 == sum(types.values())
    doc = json.loads(CliRunner().invoke(cli, ["trace", "collectives", *map(str, paths), "--json"]).stdout)
    for rank, (count, total_us) in HTA_TWO_RANKS_NCCL.items():
        mine = [r for r in doc["instances"] if r["rank"] == rank]
        assert rows.loc[rank, "comm_ps"] / 1e6 == total_us and len(mine) == count
        assert sum(r["time_ps"] for r in mine) / 1e6 == total_us
    assert {(s["rank"], s["times_last"], s["matched"]) for s in doc["steps"]} == {(HTA_TWO_RANKS_STRAGGLER, 2, 2)}
