"""Kineto traces off the mainstream CUDA shape, each read as Holistic Trace Analysis (HTA 0.5.0) reads it or
refused in one line (exit 2), on real public files (tests/data/real/kineto, rows in its README):

- MTIA (a PrivateUse1 device): device events under ``mtia_ccp_events``, never the host's CPU ops;
- the 2021 Kineto schema of the TensorBoard plugin's samples (``Kernel`` / ``Memcpy`` / ``Memset`` /
  ``Operator`` / ``Runtime``);
- a CUPTI profiler-range trace (runtime calls and per-kernel counters, no kernel timeline): refused;
- ROCm with GPU-side ProfilerSteps that are instants: the host's ProfilerSteps span the steps;
- a CPU (gloo) trace: its host ops stand in, and the output says so;
- device ops outside every step (ROCm on an MI250: its one GPU-side ProfilerStep holds half of them): not in
  the per-step rows, and the output says how many and how long;
- HTA's last-step convention (``--last-step``), named in the output;
- a time that is no finite number (NaN, Infinity, as Python's json writes them), or no JSON number (a string, null):
  refused.

The HTA figures were recorded with HTA 0.5.0 (Python 3.11; pandas 3.1.1, and 2.3.3 for the ROCm file, on
which HTA's parser fails under pandas 3): ``TraceAnalysis(trace_dir=D, include_last_profiler_step=K)`` with D a
folder holding only that file, ``get_temporal_breakdown`` and ``get_comm_comp_overlap``; HTA's GPU events are
its rows with a stream. Two differences of definition are as in test_trace_hta.py: HTA rounds sub-microsecond
times inward (figures here also with ``HTA_DISABLE_NS_ROUNDING=1``) and counts only kernels whose launch is in
the trace (``_launched_only``). Where ``hta`` is importable it also runs live.
"""

import gzip
from collections import Counter
import importlib.util
import json
import math
import shutil
from decimal import Decimal

import pytest
from click.testing import CliRunner
from hta_rounding import rounding_notes
from test_trace_hta import _hta, _launched_only

from perfkit.cli import cli
from perfkit.cli.trace import HOST_OPS
from perfkit.errors import BadInput

MTIA = "hta_mtia_inference_rank0.json.gz"
SCHEMA_2021 = "tb_plugin_resnet50_2021_worker0.json.gz"
ARRAY_2020 = "tb_plugin_resnet50_2020_worker0.json.gz"
ROCM = "tracelens_mi300_resnet_act_checkpoint.json.gz"
PROFILER_RANGE = "hta_cupti_profiler_range.json.gz"
ROCPROFV3 = "tracelens_rocprofv3_gfx950_results.json.gz"  # under rocprof/: rocprofv3's own JSON, no Chrome trace
CPU_ONLY = "hta_rank_non_gpu.json.gz"
MI250 = "hta_amd_mi250_minitoy.json.gz"
ANNOTATED = "hta_gpu_user_annotation_step_based.json.gz"  # GPU-side Optimizer.step annotations, no ProfilerStep
NCCL = "hta_nccl_data.json.gz"
# GPU-side annotations named MoE[experts=64, ...], three occurrences, each with two expert_ffn[w1=(64,...)] ones
MOE = "tracelens_b300_moe_annotations.json.gz"
# HTA 0.5.0 on MOE, HTA_DISABLE_NS_ROUNDING=1, the last step kept or dropped (the file has no ProfilerStep):
# idle, compute, non-compute, kernel time (us); no collectives, no overlap. (Rounding on: 1348, 197, 0, 1545.)
HTA_MOE = ((1314.687242, 231.454, 0.0, 1546.141242), None)
# one host ProfilerStep#6 and its GPU-side copy, which spans the GPU's 156 device ops: the host's holds for no device
FALCONSAI = "tracelens_h100_falconsai.json.gz"

# file -> {(include_last_profiler_step, ns rounding): ((idle, compute, non-compute, kernel time) us, overlap %)}
MTIA_DMA = "hta_mtia_single_rank0.json.gz"
HTA = {
    # HTA_DISABLE_NS_ROUNDING=1, include_last_profiler_step=True (one ProfilerStep)
    MTIA_DMA: {(True, False): ((5627274.390437013, 7309063.135997772, 391734.2095222473, 13328071.735957032), None)},
    MTIA: {(True, False): ((19045.764695310616, 419693.06331542693, 4536.876066410914, 443275.70407714846), None),
           (True, True): ((19235, 419614, 4426, 443275), None)},  # no ProfilerStep: the default is the same
    SCHEMA_2021: {(True, True): ((116323, 594263, 17895, 728481), None),  # whole microseconds: no rounding
                  (False, True): ((96148, 495333, 14806, 606287), None)},
    # kernels launched in the trace only (2685 of its 3653 device events); HTA's default drops nothing here:
    # it takes the GPU-side ProfilerStep#17 instant, after every launch, for the last step's start
    ROCM: {(True, False): ((283.53512108969153, 19234.094000011683, 36999.97391796112, 56517.603039062495), 25.25),
           (False, False): ((283.53512108969153, 19234.094000011683, 36999.97391796112, 56517.603039062495), 25.25),
           (True, True): ((1541, 17018, 37958, 56517), 22.45)},
    # its host ProfilerStep#2 launches nothing: the default drops nothing
    MI250: {(True, False): ((8762.844761718748, 110.88099999999395, 38.161000000007334, 8911.88676171875), None),
            (False, False): ((8762.844761718748, 110.88099999999395, 38.161000000007334, 8911.88676171875), None)},
    # whole microseconds, no ProfilerStep: rounding and the last step change nothing
    ANNOTATED: {(True, False): ((7446, 290, 1, 7737), None), (False, False): ((7446, 290, 1, 7737), None)},
    # one ProfilerStep: the default drops nothing
    FALCONSAI: {(True, False): ((6334.534111, 1220.926, 4.384, 7559.844111), None),
                (False, False): ((6334.534111, 1220.926, 4.384, 7559.844111), None)},
}
# HTA 0.5.0 on ARRAY_2020's events in a {"traceEvents": [...]} object (HTA does not read the bare array), the last
# step kept; whole microseconds: no rounding
HTA_ARRAY_2020_WRAPPED = ((619747, 595564, 14206, 1229517), None)
HTA_GPU_EVENTS = {MTIA: 1313, SCHEMA_2021: 9258, ROCM: 2685, PROFILER_RANGE: 0, CPU_ONLY: 0, MI250: 16, ANNOTATED: 140,
                  FALCONSAI: 156}
SCHEMA_2021_KEPT = 7715  # HTA's GPU events with the last step dropped
# ROCm file: the host's ProfilerStep#15..17 (start from the trace's first event, duration; us) and the GPU-side
# ones, 16-18 us instants, starting 32-38 ms after the host's (the GPU runs behind)
ROCM_HOST_STEPS = {15: (375.873046875, 16798.984), 16: (17195.2158203125, 15950.958), 17: (33163.51416015625, 15887.029)}
ROCM_GPU_STEP_US = (16.241, 17.361, 18.001)
# HTA_DISABLE_NS_ROUNDING=1, include_last_profiler_step=False (pandas 2.3.3), on the ROCm file's launched kernels
# without its GPU-side ProfilerStep annotations (``_without_gpu_steps``): HTA's cut at the host's last ProfilerStep
HTA_ROCM_HOST_CUT = ((174.915543, 12788.957, 24999.399777, 37963.27232), 24.97)


def _breakdown(*args):
    return CliRunner().invoke(cli, ["trace", "breakdown", *map(str, args)])


def _json(*args) -> dict:
    result = _breakdown(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _hta_view(doc: dict) -> tuple[tuple[float, ...], float | None]:
    """A whole-trace breakdown's one row as HTA reports it: (idle, compute, non-compute, span) us, overlap %."""
    (r,) = doc["rows"]
    parts = tuple(v / 1e6 for v in (r["idle_ps"], r["compute_ps"], r["ici_ps"] + r["dcn_ps"] + r["dma_ps"], r["span_ps"]))
    return parts, None if r["overlap"] is None else 100 * r["overlap"]


def _assert_hta(got, expected):
    (parts, overlap), (hta_parts, hta_overlap) = got, expected
    assert parts == pytest.approx(hta_parts, abs=1e-3)  # to the nanosecond
    assert overlap == (None if hta_overlap is None else pytest.approx(hta_overlap, abs=0.005))


def test_mtia_device_events_are_hta_s(fixtures_dir):
    """The MTIA trace's device ops are its mtia_ccp_events with a stream (HTA's GPU events: 1313), its
    dma_* events non-compute: HTA's temporal breakdown to the nanosecond. Its 10346 cpu_ops are host
    activity, never compute (read as such before: the host's ops were the device compute)."""
    doc = _json(fixtures_dir / "kineto" / MTIA, "--window", "trace")
    assert doc["measured"] == "device ops" and [r["device"] for r in doc["rows"]] == [17]
    _assert_hta(_hta_view(doc), HTA[MTIA][(True, False)])


def test_mtia_events_without_a_stream_are_left_out_and_said_to_be(fixtures_dir):
    """HTA's MTIA training trace: 137 of its 25814 mtia_ccp_events (dma_request, device to host) carry no stream.
    Left out as HTA leaves them out (its figures to the nanosecond), but said: a reviewer found the read silent,
    where a kernel without a stream is noted."""
    path = fixtures_dir / "kineto" / MTIA_DMA
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    left = Counter(e["name"] for e in events if e.get("cat") == "mtia_ccp_events" and "stream" not in e.get("args", {}))
    assert left == {"dma_request": 137}
    doc = _json(path, "--window", "trace")
    # HTA's figures within 2 ns: its float64 microseconds of starts near 3.6e12 us hold half a ns each; the exact
    # union of the events counted (Decimal, as the file writes them) is perfkit's to the ns
    (parts, overlap), (hta_parts, _) = _hta_view(doc), HTA[MTIA_DMA][(True, False)]
    assert parts == pytest.approx(hta_parts, abs=2e-3) and overlap is None
    counted = sorted((Decimal(str(e["ts"])), Decimal(str(e["ts"])) + Decimal(str(e["dur"]))) for e in events
                     if e.get("cat") == "mtia_ccp_events" and "stream" in e.get("args", {}))
    busy, (start, end) = Decimal(0), counted[0]
    for a, b in counted[1:]:
        if a > end:
            busy, start, end = busy + end - start, a, b
        else:
            end = max(end, b)
    span = max(b for _, b in counted) - counted[0][0]
    assert (parts[3], parts[0]) == pytest.approx((float(span), float(span - busy - end + start)), abs=1e-3)
    assert (f"137 mtia_ccp_events without a stream argument (137 dma_request) not counted, as HTA counts that "
            "category's events only with a stream") in doc["notes"][0]


def test_2021_schema_is_read_as_hta_reads_it(fixtures_dir):
    """The TensorBoard plugin's 2021 sample (cat Kernel / Memcpy / Memset; ProfilerStep#16..21 as Operator):
    its six steps, and HTA's figures with the last step kept and dropped (the ops launched in it)."""
    path = fixtures_dir / "kineto" / SCHEMA_2021
    steps = _json(path)
    assert [r["step"] for r in steps["rows"]] == [16, 17, 18, 19, 20, 21]
    assert steps["steps_from"] == ["ProfilerStep on the host"] and steps["last_step"] == "keep"
    assert [r["step"] for r in _json(path, "--last-step", "drop")["rows"]] == [16, 17, 18, 19, 20]
    for keep in (True, False):
        doc = _json(path, "--window", "trace", "--last-step", "keep" if keep else "drop")
        assert doc["last_step"] == ("keep" if keep else "drop") and doc["steps_from"] == ["whole trace"]
        _assert_hta(_hta_view(doc), HTA[SCHEMA_2021][(keep, True)])


def test_2021_schema_device_ops_are_hta_s(fixtures_dir):
    """Every Kernel / Memcpy / Memset event is a device op (HTA: 9258); with the last step dropped perfkit
    measures the ops a plain reading finds launched (Runtime call of the same correlation) before the last
    ProfilerStep's start, HTA's rule, which finds HTA's 7715 (perfkit's layout holds the ops with a duration)."""
    from perfkit.trace import events, timeline

    path = fixtures_dir / "kineto" / SCHEMA_2021
    doc = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    last_start = max(e["ts"] for e in doc if str(e.get("name", "")).startswith("ProfilerStep#"))
    launched = {e["args"]["correlation"]: e["ts"] for e in doc if e.get("cat") == "Runtime"}
    device = [e for e in doc if e.get("cat") in ("Kernel", "Memcpy", "Memset")]
    kept = [e for e in device if launched[e["args"]["correlation"]] < last_start]
    assert (len(device), len(kept)) == (HTA_GPU_EVENTS[SCHEMA_2021], SCHEMA_2021_KEPT)
    ev = events.load([path])
    assert len(events.device_ops(ev)) == len(device)
    assert timeline.layout(ev, "trace").ops.row.size == sum(e["dur"] > 0 for e in device)
    assert timeline.layout(ev, "trace" + timeline.LAST_STEP_DROPPED).ops.row.size == sum(e["dur"] > 0 for e in kept)


def test_json_array_trace_is_read(fixtures_dir, tmp_path):
    """The plugin's 2020 sample is Chrome's JSON Array Format, the events alone with no ``traceEvents`` object, as
    the PyTorch profiler wrote it then: read (it was refused). Without the 765 device ops no Runtime call launches
    by the last ProfilerStep's end (HTA's filter, a plain reading), HTA's figures; the file itself says it counts
    them."""
    path = fixtures_dir / "kineto" / ARRAY_2020
    doc = json.loads(gzip.decompress(path.read_bytes()))
    assert isinstance(doc, list)
    end = max(e["ts"] + e["dur"] for e in doc if str(e.get("name", "")).startswith("ProfilerStep#"))
    launched = {e["args"]["correlation"] for e in doc if e.get("cat") == "Runtime" and e["ts"] <= end}
    kept = [e for e in doc if e.get("cat") not in ("Kernel", "Memcpy", "Memset") or e["args"]["correlation"] in launched]
    assert len(doc) - len(kept) == 765
    (tmp_path / "launched.json").write_text(json.dumps(kept))
    _assert_hta(_hta_view(_json(tmp_path / "launched.json", "--window", "trace")), HTA_ARRAY_2020_WRAPPED)
    whole = _breakdown(path, "--window", "trace")
    assert whole.exit_code == 0 and "765 device ops have no launch in the trace" in whole.stderr


def test_a_file_hta_does_not_read_is_said_so(fixtures_dir, tmp_path):
    """HTA 0.5.0 does not read Chrome's JSON Array Format (``TraceAnalysis`` on a folder of the plugin's 2020 sample
    raises AttributeError: 'list' object has no attribute 'items', checked live), where its notes of the file spoke
    of HTA's figures of it ('765 device ops have no launch ...: counted here; HTA drops them') as if HTA read it: the
    first note says HTA does not, and that those that follow are of its events in a traceEvents object, which HTA
    reads (the README's pinned figures); in one, that note is gone and the others stay."""
    path = fixtures_dir / "kineto" / ARRAY_2020
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--json"])
    assert result.exit_code == 0, result.output
    notes = json.loads(result.stdout)["notes"]
    assert notes[0] == (f"{path}: HTA 0.5.0 does not read this file, Chrome's JSON Array Format (the events alone; it "
                        "reads a traceEvents object): the notes on HTA that follow are of its events in one")
    assert len(notes) == 2 and "765 device ops have no launch in the trace" in notes[1]
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"traceEvents": json.loads(gzip.decompress(path.read_bytes()))}))
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(wrapped), "--json"])
    assert result.exit_code == 0 and [n.replace(str(wrapped), str(path)) for n in json.loads(result.stdout)["notes"]
                                      ] == notes[1:]


def test_a_json_array_that_is_no_trace_is_refused(tmp_path):
    """With the array form read, a JSON array without complete events is refused in one line, never a breakdown
    of nothing."""
    path = tmp_path / "array.json"
    path.write_text(json.dumps([1, 2, {"ph": "B", "name": "x", "ts": 0}]))
    result = _breakdown(path)
    assert result.exit_code == 2 and result.output == f"perfkit: {path}: no complete ('X') events in traceEvents\n"
    path.write_text(json.dumps([[0, 1024], [5, 2048]]))  # a memory timeline's rows: no events at all
    result = _breakdown(path)
    assert result.exit_code == 2 and result.output == (
        f"perfkit: {path}: not a Kineto / chrome trace: a JSON array without trace events (no 'ph')\n")


def test_rocm_instant_gpu_markers_give_way_to_the_host_steps(fixtures_dir):
    """ROCm's GPU-side ProfilerSteps are 16-18 us instants (read as the steps, every step was 0.016-0.022 ms
    and all compute): the host's ProfilerSteps (15.9-16.8 ms) are the steps, and the header says so. A step's
    span opens at its host marker and runs to its end or, later, to the end of the last op that started in
    it (step 15: an all-reduce kernel runs 3.75 ms past the marker)."""
    path = fixtures_dir / "kineto" / ROCM
    doc = json.loads(gzip.decompress(path.read_bytes()))
    marks = sorted(e["dur"] for e in doc["traceEvents"]
                   if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#"))
    assert marks == list(ROCM_GPU_STEP_US)
    got = _json(path)
    assert got["steps_from"] == ["ProfilerStep on the host (the ProfilerSteps on device 2 are instants, not spans)"]
    rows = {r["step"]: r for r in got["rows"]}
    assert list(rows) == list(ROCM_HOST_STEPS)
    for step, (_, dur_us) in ROCM_HOST_STEPS.items():
        assert rows[step]["span_ps"] >= round(dur_us * 1e6) - 1000  # (float64 us of the file: a ns)
    assert [round(rows[s]["span_ps"] / 1e9, 3) for s in rows] == [20.551, 15.971, 15.960]
    text = _breakdown(path).stdout
    assert text.startswith("steps from: ProfilerStep on the host (the ProfilerSteps on device 2 are instants")


def test_rocm_launched_kernels_equal_hta(fixtures_dir, tmp_path):
    """HTA counts the 2685 kernels launched in the trace: on a copy without the others, perfkit's whole-trace
    breakdown is HTA's (ns rounding off), the last step kept."""
    launched = _launched_only(fixtures_dir / "kineto" / ROCM, tmp_path / "launched.json")
    _assert_hta(_hta_view(_json(launched, "--window", "trace")), HTA[ROCM][(True, False)])


def _without_gpu_steps(src, dst):
    """A copy of a Kineto trace without its GPU-side ProfilerStep annotations."""
    doc = json.loads(src.read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"]
                          if not (e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#"))]
    dst.write_text(json.dumps(doc))
    return dst


def test_rocm_last_step_dropped_where_hta_cuts_at_a_gpu_annotation(fixtures_dir, tmp_path):
    """With the last step dropped HTA cuts at the latest ProfilerStep it reads as a CPU event, here a GPU-side
    annotation's, 37.5 ms after the host's last ProfilerStep starts: its default drops nothing of the ROCm file
    (HTA[ROCM], kept and dropped alike). perfkit cuts at the host's: its figures are HTA's on a copy without the
    GPU-side annotations, whose cut is the host's, and a note names the ops launched between the two cuts, which
    HTA keeps (a hunt's file, 1 op of a T4 trace, had shown the difference unnamed)."""
    launched = _launched_only(fixtures_dir / "kineto" / ROCM, tmp_path / "launched.json")
    host_cut = _without_gpu_steps(launched, tmp_path / "host_cut.json")
    for path in (launched, host_cut):
        _assert_hta(_hta_view(_json(path, "--window", "trace", "--last-step", "drop")), HTA_ROCM_HOST_CUT)
    # the ops between the cuts, by a plain reading of the file: launched at or after the host's last ProfilerStep's
    # start, before the GPU-side ones' latest start
    doc = json.loads(launched.read_text())["traceEvents"]
    steps = [e for e in doc if e.get("name", "").startswith("ProfilerStep#")]
    own = max(e["ts"] for e in steps if e["cat"] != "gpu_user_annotation")
    hta = max(e["ts"] for e in steps)
    between = {e["args"]["correlation"] for e in doc if e.get("cat") == "cuda_runtime" and own <= e["ts"] < hta}
    device = [e for e in doc if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    moved = sum(e["args"].get("correlation") in between for e in device)
    assert moved == 895 and round((hta - own) / 1000, 3) == 37.511
    result = _breakdown(launched, "--window", "trace", "--last-step", "drop")
    note = (f"perfkit: note: {launched}: the last step dropped from the host's last ProfilerStep's start, {moved} "
            "device ops launched after it are left out here; HTA cuts 37.511 ms later, at the latest ProfilerStep it "
            "reads as a CPU event (a GPU-side annotation's), and keeps them\n")
    assert result.stderr.endswith(note) and result.stderr.count("HTA cuts") == 1
    assert "HTA cuts" not in _breakdown(launched, "--window", "trace").stderr  # (kept: nothing to part them)
    assert "HTA cuts" not in _breakdown(host_cut, "--window", "trace", "--last-step", "drop").stderr


def test_device_ops_outside_every_step_are_counted_and_named(fixtures_dir):
    """ROCm 6.2 on an MI250: its GPU-side ProfilerStep#1 holds 8 of the 16 device ops; the other 8 ran after
    it, in no step. The per-step rows (breakdown, diff) leave them out, and the text and JSON say how many and
    their summed durations (as a plain reading of the file finds them); the whole trace measures all 16, HTA's
    figures to the nanosecond."""
    path = fixtures_dir / "kineto" / MI250
    doc = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    (mark,) = [e for e in doc if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("ProfilerStep#")]
    device = [e for e in doc if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    apart = [e for e in device if e["ts"] + e["dur"] <= mark["ts"] or e["ts"] >= mark["ts"] + mark["dur"]]
    assert (len(device), len(apart)) == (HTA_GPU_EVENTS[MI250], 8)
    steps = _json(path)
    assert [r["step"] for r in steps["rows"]] == [1]
    assert steps["outside_steps"] == [{"rank": 0, "device": 2, "ops": 8,
                                       "op_ps": round(sum(e["dur"] for e in apart) * 1e6)}]
    line = ("outside every step's span (--window trace measures the whole trace): rank 0 device 2: 8 ops, 0.057 ms "
            "(device ops, their durations summed)\n")
    assert f"\nnot measured, {line}" in _breakdown(path).stdout
    diff = CliRunner().invoke(cli, ["trace", "diff", str(fixtures_dir / "kineto" / SCHEMA_2021), str(path)])
    assert f"\nnot measured in B, {line}" in diff.stdout and "not measured in A" not in diff.stdout
    diff = json.loads(CliRunner().invoke(cli, ["trace", "diff", "--json", str(path), str(path)]).stdout)
    assert diff["outside_steps_a"] == diff["outside_steps_b"] == steps["outside_steps"]
    for keep in ("keep", "drop"):
        whole = _json(path, "--window", "trace", "--last-step", keep)
        assert whole["outside_steps"] == []
        _assert_hta(_hta_view(whole), HTA[MI250][(keep == "keep", False)])
    assert "not measured" not in _breakdown(path, "--window", "trace").stdout


def _device_ops(doc: list[dict]) -> list[dict]:
    return [e for e in doc if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e["dur"] > 0]


def test_steps_named_by_a_pattern_are_the_steps_measured(fixtures_dir):
    """--steps REGEX: the events it names are the steps, and nothing else. ProfilerStep#4 and #5 of three: two rows,
    each its marker's span, and step 6's device ops outside, counted (they had made a step -1 of their own, averaged
    in). The GPU-side Optimizer.step annotations of a trace without ProfilerSteps: five steps, each its annotation's
    span holding its kernels (they had read as ops outside, and every other op as the one step). Spans and ops by a
    plain reading of the file; the whole trace is HTA's."""
    path = fixtures_dir / "kineto" / NCCL
    doc = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    marks = {int(e["name"].split("#")[1]): e for e in doc if e.get("name", "").startswith("ProfilerStep#")}
    got = _json(path, "--steps", r"ProfilerStep#[45]$")
    assert [(r["step"], r["span_ps"]) for r in got["rows"]] == [(k, round(marks[k]["dur"] * 1e6)) for k in (4, 5)]
    after = [e for e in _device_ops(doc) if e["ts"] >= marks[6]["ts"]]
    assert [(o["ops"], o["op_ps"]) for o in got["outside_steps"]] == [
        (len(after), pytest.approx(sum(e["dur"] for e in after) * 1e6, abs=len(after)))]
    path = fixtures_dir / "kineto" / ANNOTATED
    doc = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc
                     if e.get("cat") == "gpu_user_annotation" and e["name"] == "Optimizer.step#SGD.step")
    held = [[e for e in _device_ops(doc) if a <= e["ts"] < b] for a, b in windows]
    got = _json(path, "--steps", "Optimizer.step")
    assert [r["step"] for r in got["rows"]] == [0, 1, 2, 3, 4]
    for row, (a, b), ops in zip(got["rows"], windows, held):
        assert row["span_ps"] == max(b, max(e["ts"] + e["dur"] for e in ops)) * 10**6 - a * 10**6
        assert row["compute_ps"] + row["dma_ps"] == sum(e["dur"] for e in ops) * 10**6 and len(ops) == 4
    # outside: every other device op, the 9 of no duration among them (none lies in a window)
    every = [e for e in doc if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    assert (len(every), len(every) - len(_device_ops(doc))) == (140, 9)
    assert not [e for e in every if e["dur"] == 0 and any(a <= e["ts"] < b for a, b in windows)]
    (outside,) = got["outside_steps"]
    assert outside["ops"] == len(every) - 20
    _assert_hta(_hta_view(_json(path, "--window", "trace")), HTA[ANNOTATED][(True, False)])


def test_steps_named_by_a_pattern_are_told_apart_where_their_names_share_a_number(fixtures_dir):
    """--steps REGEX naming annotations whose names carry a number that is no step's (Inductor's graph hash, a
    layer's size): each occurrence (its External id, shared by a host annotation's GPU-side copies) is a step,
    numbered by order, and the output says so. The three GPU-side MoE[experts=64, ...] annotations of a B300 trace
    had read as one step 64 spanning all three and the gaps between them (1.546 ms, against 1.058, 0.178 and 0.157
    by a plain reading). Spans and ops by a plain reading of the file; the whole trace is HTA's."""
    path = fixtures_dir / "kineto" / MOE
    # (exact decimals: epoch-sized microseconds as floats are off by hundreds of ps; perfkit's by under a ns)
    doc = json.loads(gzip.decompress(path.read_bytes()), parse_float=Decimal)["traceEvents"]
    windows = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc
                     if e.get("cat") == "gpu_user_annotation" and e["name"].startswith("MoE[experts=64,"))
    held = [[e for e in _device_ops(doc) if a <= e["ts"] < b] for a, b in windows]
    got = _json(path, "--steps", r"MoE\[")
    assert [r["step"] for r in got["rows"]] == [0, 1, 2] and got["outside_steps"] == []
    assert got["steps_from"] == [r"events named /MoE\[/ (numbered by their order: no step number of their own, as "
                                 "ProfilerStep#N has)"]
    for row, (a, b), ops in zip(got["rows"], windows, held):
        end = max(b, max(e["ts"] + e["dur"] for e in ops))
        assert row["span_ps"] == pytest.approx(int((end - a) * 10**6), abs=1000)
        assert row["compute_ps"] == int(sum(e["dur"] for e in ops) * 10**6) and len(ops) == 12
    _assert_hta(_hta_view(_json(path, "--window", "trace")), HTA_MOE)


def test_steps_named_by_a_pattern_drop_their_own_last(tmp_path):
    """--steps REGEX --last-step drop: the last of the steps it names goes, by time (HTA's rule goes by the
    ProfilerStep that launched an op, and ProfilerSteps number no step here: step 1's kernel, launched in
    ProfilerStep#2, was dropped as the last step's and the last step's kept outside). Three host ProfilerSteps of
    100 us, each with a host and a GPU-side "fwd" annotation and one 20 us kernel launched in it."""
    events = []
    for i in range(3):
        t = 100 * i
        events += [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "pid": 1, "tid": 1, "ts": t,
                    "dur": 100},
                   {"ph": "X", "cat": "user_annotation", "name": "fwd", "pid": 1, "tid": 1, "ts": t + 1, "dur": 90},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2,
                    "dur": 1, "args": {"correlation": i + 1}},
                   {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": t + 10, "dur": 20,
                    "args": {"correlation": i + 1, "device": 0, "stream": 7}},
                   {"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 0, "tid": 7, "ts": t + 5, "dur": 80,
                    "args": {"device": 0}}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    got = _json(path, "--steps", "^fwd$", "--last-step", "drop")
    assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in got["rows"]] == [(0, 80 * 10**6, 20 * 10**6),
                                                                                 (1, 80 * 10**6, 20 * 10**6)]
    assert got["outside_steps"] == []


def _sglang_decode(path, batch_sizes: list[int]) -> None:
    """A hand-built trace shaped as sglang's decode profile: host ProfilerStep#12 holding one host
    ``step[DECODE bs=N]`` annotation a decode step, each with its GPU-side copy (one External id) and one 150 us
    kernel launched in it; decode steps 250 us apart."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#12", "pid": 1, "tid": 1, "ts": 1000,
               "dur": 250 * len(batch_sizes), "args": {"External id": 1}}]
    for k, bs in enumerate(batch_sizes):
        t, name = 1010 + 250 * k, f"step[DECODE bs={bs}]"
        events += [{"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": t, "dur": 200,
                    "args": {"External id": 10 + k}},
                   {"ph": "X", "cat": "gpu_user_annotation", "name": name, "pid": 0, "tid": 7, "ts": t + 20, "dur": 200,
                    "args": {"External id": 10 + k, "device": 0}},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 5,
                    "dur": 5, "args": {"correlation": 100 + k}},
                   {"ph": "X", "cat": "kernel", "name": "decode", "pid": 0, "tid": 7, "ts": t + 30, "dur": 150,
                    "args": {"correlation": 100 + k, "device": 0, "stream": 7}}]
    path.write_text(json.dumps({"traceEvents": events}))


def test_steps_named_by_a_pattern_take_their_own_step_number_never_a_batch_size(tmp_path):
    """--steps 'step\\[' on sglang's decode annotations: ``step[DECODE bs=32]`` carries a batch size, no step
    number; its one step had read as step 32 (and steps of batch sizes 32 and 31 as 32 and 31, out of their order).
    They are numbered by their order, and the header says so; ProfilerStep#12 named by a pattern is step 12. Spans
    and kernels by the hand-built trace: each GPU-side annotation's 200 us, its 150 us kernel."""
    path = tmp_path / "decode.json"
    for sizes in ([32], [32, 31]):
        _sglang_decode(path, sizes)
        got = _json(path, "--steps", r"step\[")
        assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in got["rows"]] == [
            (k, 200 * 10**6, 150 * 10**6) for k in range(len(sizes))]
        assert got["steps_from"] == [r"events named /step\[/ (numbered by their order: no step number of their own, "
                                     "as ProfilerStep#N has)"]
        assert "(numbered by their order: no step number of their own" in _breakdown(path, "--steps", r"step\[").stdout
    got = _json(path, "--steps", "ProfilerStep")
    assert [(r["step"], r["span_ps"]) for r in got["rows"]] == [(12, 500 * 10**6)]
    assert got["steps_from"] == ["events named /ProfilerStep/ (numbered by their own step numbers)"]


def _profiler_steps(path, launched_in: list[int], steps: int, rank: int | None = None, shift_us: int = 0) -> None:
    """A hand-built CUDA trace: ``steps`` host ProfilerSteps of 100 us (#1 on), a 20 us kernel launched in each step of
    ``launched_in`` (0: the first); ``rank``: its distributedInfo's; ``shift_us``: every time that much later."""
    events = []
    for i in range(steps):
        t = 100 * i + shift_us
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 1}", "pid": 1, "tid": 1,
                       "ts": t, "dur": 100})
        if i in launched_in:
            events += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t + 2,
                        "dur": 1, "args": {"correlation": i + 1}},
                       {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": t + 10, "dur": 20,
                        "args": {"correlation": i + 1, "device": 0, "stream": 7}}]
    ranked = {} if rank is None else {"distributedInfo": {"rank": rank}}
    path.write_text(json.dumps({"traceEvents": events, **ranked}))


def test_a_one_step_trace_s_step_is_kept_with_the_last_step_dropped_and_said_so(tmp_path, fixtures_dir):
    """--last-step drop on a trace of one ProfilerStep: HTA drops the last step only of a trace with two or more
    (0.5.0 on hta_cuda_event_sync, ProfilerStep#100 alone: idle 207, compute 49, non-compute 7 of 263 us by default
    as with include_last_profiler_step=True), so perfkit keeps it too; the header had said "last step dropped (HTA's
    default)" over that step's figures. It says the rule, and a note names the step kept and why. Where every device
    op is in the last of two steps, nothing is left: refused in one line (it had said "no device ops in these
    traces"). Figures by hand: the step's 100 us span, its 20 us kernel."""
    path = tmp_path / "one.json"
    _profiler_steps(path, [0], 1)
    result = _breakdown(path, "--last-step", "drop")
    assert result.exit_code == 0, result.output
    assert ("perfkit: note: rank 0 has one step (1): kept with --last-step drop, as HTA keeps it (it drops the last "
            "step only where there are two or more); --last-step keep measures the same") in result.stderr
    assert "; last step dropped where there are two or more (HTA's default);" in result.stdout.splitlines()[0]
    got = _json(path, "--last-step", "drop")
    assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in got["rows"]] == [(1, 100 * 10**6, 20 * 10**6)]
    assert got["rows"] == _json(path)["rows"] and any("has one step (1): kept" in n for n in got["notes"])
    two = tmp_path / "two.json"
    _profiler_steps(two, [0, 1], 2)
    assert not any("has one step" in n for n in _json(two, "--last-step", "drop")["notes"])
    _profiler_steps(two, [1], 2)
    refused = _breakdown(two, "--last-step", "drop")
    assert refused.exit_code == 2 and refused.output == (
        f"perfkit: {two}: every device op is in the last step, which --last-step drop leaves out (HTA's default): "
        "nothing left to measure; --last-step keep measures it\n")


def test_a_host_step_that_holds_for_no_device_is_not_named_as_kept(tmp_path):
    """One host ProfilerStep#6 and its GPU-side copy, which spans the GPU's kernel (as TraceLens' h100 Falconsai
    trace has): the GPU's own marker is its step, and the host's holds for no device. --last-step drop named both,
    the host's as "rank 0 has one step (-1)", a step that numbers nothing; only the GPU's step is kept."""
    path = tmp_path / "gpu_step.json"
    _profiler_steps(path, [0], 1)
    doc = json.loads(path.read_text())
    host = doc["traceEvents"][0]
    doc["traceEvents"].append({**host, "cat": "gpu_user_annotation", "pid": 0, "tid": 7, "ts": 5, "dur": 30})
    path.write_text(json.dumps(doc))
    result = _breakdown(path, "--last-step", "drop")
    assert result.exit_code == 0, result.output
    assert [line for line in result.stderr.splitlines() if "has one step" in line] == [
        "perfkit: note: rank 0 device 0 has one step (1): kept with --last-step drop, as HTA keeps it (it drops the "
        "last step only where there are two or more); --last-step keep measures the same"]
    got = _json(path, "--last-step", "drop")
    assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in got["rows"]] == [(1, 30 * 10**6, 20 * 10**6)]


def test_a_real_gpu_side_step_is_the_one_named_as_kept(fixtures_dir):
    """TraceLens' H100 trace of one ProfilerStep#6, on the host and GPU-side: its whole trace is HTA's, the last step
    kept or dropped (one step: nothing dropped), and --last-step drop names the GPU's step 6 alone as kept (it also
    named "rank 0 has one step (-1)"). The step is the GPU-side marker's span (7559.846 us by a plain reading)."""
    path = fixtures_dir / "kineto" / FALCONSAI
    for keep in (True, False):
        doc = _json(path, "--window", "trace", "--last-step", "keep" if keep else "drop")
        _assert_hta(_hta_view(doc), HTA[FALCONSAI][(keep, False)])
    result = _breakdown(path, "--last-step", "drop")
    assert result.exit_code == 0 and [line for line in result.stderr.splitlines() if "has one step" in line] == [
        "perfkit: note: rank 0 device 0 has one step (6): kept with --last-step drop, as HTA keeps it (it drops the "
        "last step only where there are two or more); --last-step keep measures the same"]
    assert [(r["step"], r["span_ps"]) for r in _json(path)["rows"]] == [(6, 7559846000)]


def test_diff_with_every_device_op_in_the_last_step_dropped_says_so(tmp_path):
    """trace diff --last-step drop where every device op of B is in its last step had said "no device ops in the
    trace" (B has a 20 us kernel, in step 2 of 2); it says what breakdown says, in one line, exit 2. Where the last
    step kept leaves none either, that side has none."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _profiler_steps(a, [0, 1], 2)
    _profiler_steps(b, [1], 2)
    refused = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--last-step", "drop"])
    assert refused.exit_code == 2 and refused.output == (
        f"perfkit: {b}: every device op is in the last step, which --last-step drop leaves out (HTA's default): "
        "nothing left to measure; --last-step keep measures it\n")
    assert CliRunner().invoke(cli, ["trace", "diff", str(a), str(b)]).exit_code == 0
    _profiler_steps(b, [], 2)
    none = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--last-step", "drop"])
    assert none.exit_code == 2 and none.output == f"perfkit: {b}: no device ops in the trace\n"


def test_two_kineto_files_recording_one_rank_are_refused(tmp_path):
    """Two processes' Kineto files whose names carry no rank are told apart by their distributedInfo.rank; two that
    record one rank at the same time are refused in one line, whose reason is the rank they record (with the same
    step it had blamed files named for one host; with other steps they were read as one rank's four steps). One
    rank's two profiling sessions, one after another, are its."""
    a, b = tmp_path / "worker_a.json", tmp_path / "worker_b.json"
    _profiler_steps(a, [0, 1], 2, rank=0)
    _profiler_steps(b, [0, 1], 2, rank=1)
    assert [(r["rank"], r["step"]) for r in _json(a, b)["rows"]] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    _profiler_steps(b, [0, 1], 2, rank=0)
    refused = _breakdown(a, b)
    assert refused.exit_code == 2 and refused.output == (
        f"perfkit: {b}: rank 0 step 1 is also in {a}: both files record distributedInfo.rank 0: two processes' (or "
        "runs') traces claiming one rank; pass one run's traces at a time\n")
    later = json.loads(b.read_text())
    for event in later["traceEvents"]:
        event["name"] = event["name"].replace("#1", "#3").replace("#2", "#4")
    b.write_text(json.dumps(later))
    refused = _breakdown(a, b)
    assert refused.exit_code == 2 and refused.output == (
        f"perfkit: {b}: it runs at the same time as {a}: both files record distributedInfo.rank 0: two processes' (or "
        "runs') traces claiming one rank; pass one run's traces at a time\n")
    for event in later["traceEvents"]:
        event["ts"] += 1000
    b.write_text(json.dumps(later))
    assert [(r["rank"], r["step"]) for r in _json(a, b)["rows"]] == [(0, 1), (0, 2), (0, 3), (0, 4)]


def test_profiler_range_trace_is_refused_in_one_line(fixtures_dir):
    """A CUPTI profiler-range trace holds runtime calls and per-kernel counters, no device timeline (HTA: no
    GPU event): nothing on the device to measure, never its host's 11.7 s as compute."""
    path = fixtures_dir / "kineto" / PROFILER_RANGE
    for args in ((), ("--window", "trace")):
        result = _breakdown(path, *args)
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1 and "CUPTI profiler-range trace" in result.output
        assert "nothing on the device to measure" in result.output


def test_a_rocprofv3_json_output_is_refused_by_name(fixtures_dir, tmp_path):
    """rocprofv3's ``--output-format json`` (rocprofiler-sdk's own records under ``rocprofiler-sdk-tool``, the key
    TraceLens reads it by; no ``traceEvents``) is named for what it is, with what perfkit reads instead: before, the
    line said only that it held no traceEvents list. In a folder beside a Kineto trace it is skipped, so named."""
    path = fixtures_dir / "rocprof" / ROCPROFV3
    what = ("a rocprofiler-sdk output (rocprofv3 --output-format json), not a Chrome / Kineto trace: "
            "perfkit reads none of rocprofv3's formats (rocpd, csv, json, pftrace, otf2); it reads the program's "
            "torch.profiler (Kineto JSON) or JAX profiler (*.xplane.pb) trace\n")
    result = _breakdown(path)
    assert result.exit_code == 2 and result.output == f"perfkit: {path}: {what}"
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(fixtures_dir / "kineto" / SCHEMA_2021, folder / "worker0.pt.trace.json.gz")
    shutil.copy(path, folder / path.name)
    beside = _breakdown(folder, "--window", "trace", "--json")
    assert beside.exit_code == 0 and beside.stderr == f"perfkit: skipped {folder / path.name}: {what}"


def test_runtime_calls_without_device_events_are_refused(tmp_path):
    """Runtime calls of a device whose events perfkit does not read (another PrivateUse1 backend, or an MTIA
    trace without its ccp events): one line naming them, exit 2, never the host's ops as compute."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 50},
              {"ph": "X", "cat": "privateuse1_runtime", "name": "launch", "pid": 1, "tid": 1, "ts": 10, "dur": 5,
               "args": {"correlation": 1}},
              {"ph": "X", "cat": "npu_kernel", "name": "MatMul", "pid": 2, "tid": 7, "ts": 20, "dur": 30,
               "args": {"device": 0, "stream": 7, "correlation": 1}}]
    path = tmp_path / "npu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = _breakdown(path)
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert "device runtime calls (privateuse1_runtime) but no device events perfkit reads" in result.output


def test_cpu_trace_says_it_measured_host_ops(fixtures_dir):
    """A CPU trace (HTA: no GPU event) is measured on its host ops, and breakdown's, tail's and diff's header
    and JSON say so (diff: of two such traces; one against a device trace is refused, the test below)."""
    path = fixtures_dir / "kineto" / CPU_ONLY
    assert _json(path)["measured"] == "host ops"
    assert _json(path, "--window", "trace")["measured"] == "host ops"
    assert _breakdown(path).stdout.startswith("measured: host ops: the trace has no device events")
    # HTA measures none of it: its conventions are not named (a newcomer's gloo trace: the header quoted them)
    assert "HTA" not in _breakdown(path).stdout.splitlines()[1]
    assert "HTA" not in _breakdown(path).stderr
    # (a device trace, which HTA reads: its times' ns, which HTA's rounding moves, are said)
    mtia = fixtures_dir / "kineto" / MTIA
    assert _breakdown(mtia).stderr == f"perfkit: note: {rounding_notes(mtia)[0]}\n"
    # the ops outside every step are the host ops too (the line called them device ops); by a plain reading, 8
    # cpu_ops start outside ProfilerStep#1009, two of them aten::zero_ of 0 us, 46 us in all
    assert "rank 0 device 0: 8 ops, 0.046 ms (host ops, their durations summed)" in _breakdown(path).stdout
    gpu = _json(fixtures_dir / "kineto" / SCHEMA_2021)
    assert gpu["measured"] == "device ops" and "measured:" not in _breakdown(fixtures_dir / "kineto" / MTIA).stdout
    tail = CliRunner().invoke(cli, ["trace", "tail", str(path)])
    assert tail.exit_code == 0 and tail.stdout.startswith("measured: host ops: the trace has no device events")
    tail = CliRunner().invoke(cli, ["trace", "tail", str(fixtures_dir / "kineto" / MTIA), "--json"])
    assert json.loads(tail.stdout)["measured"] == "device ops"
    mtia = fixtures_dir / "kineto" / MTIA
    for a, b, measured in ((path, path, "host ops"), (mtia, mtia, "device ops")):
        diff = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--json"])
        assert diff.exit_code == 0 and json.loads(diff.stdout)["measured"] == measured, (a.name, b.name)
    diff = CliRunner().invoke(cli, ["trace", "diff", str(path), str(path)])
    assert diff.exit_code == 0 and diff.stdout.startswith("measured: host ops: the trace has no device events")
    assert "8 ops, 0.046 ms (host ops, their durations summed)" in diff.stdout


def test_collectives_of_a_cpu_trace_say_host_ops(fixtures_dir, tmp_path):
    """``trace collectives`` labels host ops as breakdown does: HTA's CPU-only trace (its nccl calls are host
    launches, no device transfer) has none, said under the host ops' label (a result, exit 0: a newcomer's script
    took exit 2 for a broken file); a gloo trace's collective, run on the host, is shown under the label, with its
    ProfilerStep named as the host's (logged as a cpu_op)."""
    none = CliRunner().invoke(cli, ["trace", "collectives", str(fixtures_dir / "kineto" / CPU_ONLY)])
    assert none.exit_code == 0, none.output
    assert none.stdout.splitlines() == [f"measured: {HOST_OPS}", "no collectives in these traces run on the host "
                                        "(gloo's spans, c10d calls); a GPU's collectives (an nccl: annotation on the "
                                        "host launches one) are on no device these traces hold"]
    events = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 5, "dur": 40},
              {"ph": "X", "cat": "cpu_op", "name": "gloo:all_reduce", "pid": 1, "tid": 1, "ts": 50, "dur": 30}]
    path = tmp_path / "gloo.json"
    path.write_text(json.dumps({"traceEvents": events}))
    text = CliRunner().invoke(cli, ["trace", "collectives", str(path)])
    assert text.exit_code == 0 and text.stdout.startswith("measured: host ops: the trace has no device events")
    doc = json.loads(CliRunner().invoke(cli, ["trace", "collectives", str(path), "--json"]).stdout)
    assert doc["measured"] == "host ops" and doc["steps_from"] == ["ProfilerStep on the host"]
    assert [(r["op"], r["time_ps"]) for r in doc["ops"]] == [("gloo:all_reduce", 30_000_000)]
    # torch.distributed's call that hands it to gloo's thread (c10d::allreduce_, around it on the main thread):
    # one all-reduce, not two (a newcomer's torch run counted 12 for 6)
    events += [{"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "pid": 1, "tid": 1, "ts": 48, "dur": 34},
               {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "pid": 1, "tid": 2, "ts": 60,
                "dur": 20}]
    events[2] = {**events[2], "name": "aten::add", "cat": "cpu_op"}
    path.write_text(json.dumps({"traceEvents": events}))
    doc = json.loads(CliRunner().invoke(cli, ["trace", "collectives", str(path), "--json"]).stdout)
    assert [(r["op"], r["count"], r["time_ps"]) for r in doc["ops"]] == [("gloo:all_reduce", 1, 20_000_000)]


def test_last_step_convention_is_named(fixtures_dir):
    """The text header names the convention applied, as --json's ``last_step`` does."""
    path = fixtures_dir / "kineto" / "rank-0.json.gz"
    assert "; last step kept (HTA's include_last_profiler_step=True);" in _breakdown(path, "--window", "trace").stdout
    dropped = _breakdown(path, "--window", "trace", "--last-step", "drop").stdout
    assert dropped.startswith("steps from: whole trace; last step dropped where there are two or more (HTA's default);")


def test_stray_json_in_a_trace_folder_is_skipped_with_a_note(fixtures_dir, tmp_path):
    """A folder of traces with a JSON file that is no trace: skipped, one note on stderr; the figures are the
    trace's alone. A folder with nothing readable: one line, exit 2."""
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(fixtures_dir / "kineto" / SCHEMA_2021, folder / "worker0.pt.trace.json.gz")
    (folder / "config.json").write_text(json.dumps({"lr": 0.1}))
    result = _breakdown(folder, "--window", "trace", "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr == f"perfkit: skipped {folder / 'config.json'}: not a Kineto / chrome trace: no traceEvents list\n"
    _assert_hta(_hta_view(json.loads(result.stdout)), HTA[SCHEMA_2021][(True, True)])
    (folder / "worker0.pt.trace.json.gz").unlink()
    alone = _breakdown(folder)
    assert alone.exit_code == 2 and alone.output.count("\n") == 1 and "no traceEvents list" in alone.output
    named = _breakdown(folder / "config.json")  # a file named on the command line is never skipped
    assert named.exit_code == 2 and "no traceEvents list" in named.output


def test_a_damaged_trace_in_a_folder_is_refused_not_skipped(fixtures_dir, tmp_path):
    """A rank's trace copied in part (a cut gzip, JSON cut mid-string) beside whole ones: one line naming it,
    exit 2, as for a damaged XSpace; skipping it left a 2-rank breakdown of rank 1 alone, exit 0."""
    whole = fixtures_dir / "kineto" / "rank-1.json.gz"
    raw = (fixtures_dir / "kineto" / "rank-0.json.gz").read_bytes()
    for name, damaged in (("rank-0.json.gz", raw[:60_000]), ("rank-0.json", gzip.decompress(raw)[:60_000])):
        folder = tmp_path / name.replace(".", "_")
        folder.mkdir()
        shutil.copy(whole, folder / "rank-1.json.gz")
        (folder / name).write_bytes(damaged)
        result = _breakdown(folder)
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"perfkit: {folder / name}: not a readable chrome-trace JSON (")


@pytest.mark.parametrize("name", [MTIA, SCHEMA_2021, ROCM, PROFILER_RANGE, CPU_ONLY, MI250, ANNOTATED, FALCONSAI])
def test_hta_live(fixtures_dir, tmp_path, monkeypatch, name):
    """HTA itself, where installed: its GPU events and figures are the pinned ones."""
    pytest.importorskip("hta", reason="HTA is not installed (pip install HolisticTraceAnalysis==0.5.0)")
    from hta.trace_analysis import TraceAnalysis

    folder = tmp_path / "one"
    folder.mkdir()
    shutil.copy(fixtures_dir / "kineto" / name, folder / name)
    if name == ROCM and int(pytest.importorskip("pandas").__version__.split(".")[0]) >= 3:
        pytest.skip("HTA 0.5.0's parser fails on this file under pandas 3 (its figures: pandas 2.3.3)")
    analysis = TraceAnalysis(trace_dir=str(folder), include_last_profiler_step=True)
    trace = analysis.t.get_trace(next(iter(analysis.t.traces)))
    assert int(trace["stream"].ne(-1).sum()) == HTA_GPU_EVENTS[name]
    for (keep, rounding), expected in HTA.get(name, {}).items():
        monkeypatch.setenv("HTA_DISABLE_NS_ROUNDING", "0" if rounding else "1")
        parts, overlap = _hta(folder, keep)
        _assert_hta((parts, None if overlap != overlap else overlap), expected)  # NaN: no collectives


def test_last_step_dropped_on_an_xspace_from_its_marker_on(tmp_path):
    """Without launches (an XSpace), the last step is left out from its marker's start on, per device: chip 0's
    Steps 0-2 keep 0 and 1; chip 1 has one step, which stays (HTA drops nothing of a one-step trace)."""
    from trace_builders import U, tpu_trace

    path = tpu_trace(tmp_path / "t.xplane.pb")
    kept = _json(path, "--last-step", "drop")
    assert kept["last_step"] == "drop" and [(r["device"], r["step"]) for r in kept["rows"]] == [(0, 0), (0, 1), (1, 0)]
    whole = _json(path, "--window", "trace", "--last-step", "drop")["rows"]
    # chip 0: fusion.1 [0,10) to fusion.4 [60,65), the last op before step 2 (at 70); chip 1: its op [5,14)
    assert [r["span_ps"] // U for r in whole] == [65, 9]


def test_run_summary_says_which_ops_were_measured(fixtures_dir, tmp_path):
    """A run's trace summary names host ops where a variant's traces had no device events (a CPU trace)."""
    from perfkit.trace import runs

    trials = []
    for index, (variant, name) in enumerate([("cpu", CPU_ONLY), ("gpu", MTIA)]):
        folder = tmp_path / "trials" / f"{index:02d}-{variant}" / "rank0" / "trace"
        folder.mkdir(parents=True)
        shutil.copy(fixtures_dir / "kineto" / name, folder / name)
        trials.append({"variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"})
    got = runs.summarize(tmp_path, trials, ["cpu", "gpu"])["variants"]
    assert (got["cpu"]["measured"], got["gpu"]["measured"]) == ("host ops", "device ops")


def test_run_summary_and_report_count_the_ops_outside_the_steps(fixtures_dir, tmp_path):
    """A run's trace summary counts, per variant over its trials, the device ops outside every step's span (the
    MI250 trace's 8, 56.961 us, in each of two trials), and report.md names them under the breakdown."""
    from perfkit.report.markdown import _breakdown
    from perfkit.trace import runs

    trials = []
    for index, (variant, name) in enumerate([("mtia", MTIA), ("mi250", MI250), ("mi250", MI250)]):
        folder = tmp_path / "trials" / f"{index:02d}-{variant}" / "rank0" / "trace"
        folder.mkdir(parents=True)
        shutil.copy(fixtures_dir / "kineto" / name, folder / name)
        trials.append({"variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"})
    got = runs.summarize(tmp_path, trials, ["mtia", "mi250"])
    assert (got["variants"]["mtia"]["outside_ops"], got["variants"]["mtia"]["outside_ms"]) == (0, 0)
    assert got["variants"]["mi250"]["outside_ops"] == 16
    assert got["variants"]["mi250"]["outside_ms"] == pytest.approx(2 * 0.056961, abs=1e-9)
    lines = _breakdown({"breakdown": got})
    assert ("Not in these figures: device ops outside every traced step's span (mi250: 16 ops, 0.114 ms over its 2 "
            "trials); `perfkit trace breakdown --window trace` on a trial's `rank*/trace` folders measures them.") in lines


def _mtia_shaped(path):
    """A hand-made MTIA trace: a kernel [10,30) us and a dma_request [30,40) on stream 5 of device 9, and a
    dma_request [50,90) without a stream (HTA counts only events with one: not a device op), under a host
    cpu_op [0,100). Whole trace: span 30 us = compute 20 + non-compute 10, idle 0."""
    ccp = {"ph": "X", "cat": "mtia_ccp_events", "pid": 9}
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
              {"ph": "X", "cat": "mtia_runtime", "name": "runFunction", "pid": 1, "tid": 1, "ts": 5, "dur": 2,
               "args": {"correlation": 7}},
              {**ccp, "name": "fc-dtype_Float", "tid": 4, "ts": 10, "dur": 20, "args": {"stream": 5, "correlation": 7}},
              {**ccp, "name": "dma_request", "tid": 4, "ts": 30, "dur": 10, "args": {"stream": 5}},
              {**ccp, "name": "dma_request", "tid": 801, "ts": 50, "dur": 40, "args": {"direction": "DEVICE_TO_HOST"}}]
    path.write_text(json.dumps({"traceEvents": events, "distributedInfo": {"rank": 0}}))
    return path


def test_mtia_events_without_a_stream_are_not_device_ops(tmp_path):
    path = _mtia_shaped(tmp_path / "mtia.json")
    _assert_hta(_hta_view(_json(path, "--window", "trace")), ((0, 20, 10, 30), None))
    if importlib.util.find_spec("hta"):  # HTA where installed: the same figures
        folder = tmp_path / "one"
        folder.mkdir()
        shutil.copy(path, folder / path.name)
        parts, _ = _hta(folder, True)
        assert parts == pytest.approx((0, 20, 10, 30))


@pytest.mark.parametrize("name", ["rank-0.json.gz", "rank-1.json.gz", "hta_nccl_data.json.gz"])
def test_last_step_dropped_is_hta_s_default(fixtures_dir, name):
    """HTA's default figures (include_last_profiler_step=False, pinned in test_trace_hta.py) are perfkit's
    whole-trace breakdown with --last-step drop, to the nanosecond (hta_nccl_data: HTA's ns rounding off)."""
    from test_trace_hta import HTA_LAST_STEP_DROPPED, HTA_NCCL_UNROUNDED_LAST_DROPPED

    expected = HTA_NCCL_UNROUNDED_LAST_DROPPED if name == "hta_nccl_data.json.gz" else HTA_LAST_STEP_DROPPED[name]
    doc = _json(fixtures_dir / "kineto" / name, "--window", "trace", "--last-step", "drop")
    assert doc["last_step"] == "drop"
    _assert_hta(_hta_view(doc), expected)


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_a_duration_that_is_no_finite_number_is_refused(fixtures_dir, tmp_path, value):
    """JSON as Python writes it may hold NaN and Infinity: a kernel of such a duration is refused in one line by
    every command, never a kernel ending 9.2e9 ms before it starts (tail, export) nor left out unsaid
    (breakdown: HTA drops it)."""
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / SCHEMA_2021).read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "Kernel")
    kernel["dur"] = float(value.replace("Infinity", "inf"))
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    assert value in path.read_text()
    line = f"perfkit: {path}: traceEvents: event {kernel['name']!r} has a ts or dur that is not a finite number"
    for command in (["breakdown"], ["tail"], ["export", "--perfetto", tmp_path / "out.json"]):
        result = CliRunner().invoke(cli, ["trace", *map(str, command), str(path)])
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(line), result.output


@pytest.mark.parametrize("key, value", [("dur", "4.864"), ("ts", "1600000000000.5"), ("dur", None), ("dur", True)])
def test_a_time_written_as_a_string_or_null_is_refused(fixtures_dir, tmp_path, key, value):
    """A kernel whose dur (or ts) is a JSON string holding a number: refused in one line naming the event and the
    value (a hunt's: numpy made 4.864 of "4.864" and the breakdown went on, where HTA fails on the file); null
    too (it had read as NaN, refused as no finite number)."""
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / SCHEMA_2021).read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "Kernel")
    kernel[key] = value
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    line = (f"perfkit: {path}: traceEvents: event {kernel['name']!r} has a {key} that is not a JSON number "
            f"({json.dumps(value)})\n")
    for command in (["breakdown"], ["collectives"], ["export", "--perfetto", tmp_path / "out.json"]):
        result = CliRunner().invoke(cli, ["trace", *map(str, command), str(path)])
        assert result.exit_code == 2 and result.output == line, result.output
    assert not (tmp_path / "out.json").exists()


def test_a_negative_duration_is_refused(fixtures_dir, tmp_path):
    """A kernel that ends before it starts (a newcomer's: one of dur -5 read as a step of all-zero figures) is
    refused in one line by every command, as a duration that is no number is."""
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / SCHEMA_2021).read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "Kernel")
    kernel["dur"] = -5
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    for command in (["breakdown"], ["tail"], ["export", "--perfetto", tmp_path / "out.json"]):
        result = CliRunner().invoke(cli, ["trace", *map(str, command), str(path)])
        assert result.exit_code == 2 and result.output == \
            f"perfkit: {path}: traceEvents: event {kernel['name']!r} has a negative dur (-5)\n", result.output


# HTA 0.5.0 on the 2021 sample with its first device op (a 2865 us copy) and its last (a 1 us kernel) of no
# duration: (idle, compute, non-compute, span) us, last step kept and dropped
HTA_ZERO_EDGES = {True: (119188.0, 594262.0, 15030.0, 728480.0), False: (99013.0, 495333.0, 11941.0, 606287.0)}


@pytest.mark.parametrize("keep", [True, False])
def test_device_ops_of_no_duration_bound_the_window(fixtures_dir, tmp_path, keep):
    """A device op of no duration (whole-microsecond traces round short ones to 0) ran, and where it is a device's
    first or last op the window starts or ends at it, as HTA counts the kernel time: the idle time before the
    second op is the device's (perfkit left such ops out: a span 2966 us short)."""
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / SCHEMA_2021).read_bytes()))
    device = [e for e in doc["traceEvents"] if e.get("cat") in ("Kernel", "Memcpy", "Memset")]
    first, last = min(device, key=lambda e: e["ts"]), max(device, key=lambda e: e["ts"] + e["dur"])
    assert (first["dur"], last["dur"]) == (2865, 1)
    first["dur"] = last["dur"] = 0
    folder = tmp_path / "one"
    folder.mkdir()
    (folder / "zero.json").write_text(json.dumps(doc))
    doc = _json(folder / "zero.json", "--window", "trace", "--last-step", "keep" if keep else "drop")
    _assert_hta(_hta_view(doc), (HTA_ZERO_EDGES[keep], None))
    if importlib.util.find_spec("hta") is not None:
        assert _hta(folder, keep)[0] == HTA_ZERO_EDGES[keep]


def test_a_diff_of_host_ops_against_device_ops_is_refused(fixtures_dir):
    """A CPU-only trace (its host ops stand in) against a GPU trace: CPU time against kernel time, which do not
    compare (the diff printed their deltas under one 'measured: host ops' line): refused in one line, either way
    round, the refusal alone."""
    cpu, gpu = fixtures_dir / "kineto" / CPU_ONLY, fixtures_dir / "kineto" / "hta_nccl_data.json.gz"
    for a, b, host in ((cpu, gpu, "A"), (gpu, cpu, "B")):
        result = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b)])
        # (the refusal alone: the GPU trace's note, said as it was read, had come first)
        assert result.exit_code == 2 and result.output == (
            f"perfkit: {a} vs {b}: {host} has no device events (its CPU ops stand in, host time), {'AB'[host == 'A']} "
            "has: their times do not compare\n")
    assert CliRunner().invoke(cli, ["trace", "diff", str(cpu), str(cpu)]).exit_code == 0


def test_point_to_point_kernels_matched_by_order_are_named(fixtures_dir, tmp_path):
    """Two ranks of a pipeline job (HTA's sampled traces, 10 SendRecv kernels each), their kernels' launches taken out
    of their nccl:* and record_param_comms spans (renamed): perfkit matches these point-to-point kernels across ranks
    by order in the step, not by peer, and says so. As recorded, each runs a collective (the span its launch ran
    under names it), matched as one: no note. A TPU program's
    collective-permutes (the hand-built 4-chip straggler profile), one order on every chip, get no such note."""
    real = [fixtures_dir / "kineto" / f"rank-{r}.json.gz" for r in (0, 1)]
    ranks = [tmp_path / p.name for p in real]
    for path, copy in zip(real, ranks):
        trace = gzip.decompress(path.read_bytes()).replace(b'"name": "nccl:', b'"name": "other:')
        copy.write_bytes(gzip.compress(trace.replace(b'"record_param_comms"', b'"other"')))
    note = "perfkit: note: point-to-point kernels (SendRecv, Send, Recv) are matched across ranks by their order in " \
           "a step, not by peer"
    result = CliRunner().invoke(cli, ["trace", "collectives", *map(str, ranks)])
    assert result.exit_code == 0, result.output
    assert note in result.stderr
    assert note not in CliRunner().invoke(cli, ["trace", "collectives", *map(str, real)]).stderr
    from trace_builders import straggler_trace

    tpu = CliRunner().invoke(cli, ["trace", "collectives", str(straggler_trace(tmp_path / "tpu.xplane.pb"))])
    assert tpu.exit_code == 0 and "collective-permute" in tpu.stdout and "point-to-point" not in tpu.stderr


def test_a_cpu_trace_counts_nested_ops_once_and_says_so(tmp_path):
    """A CPU-only trace's ops nest on a thread (an aten op inside a module's): the innermost op running owns each
    instant, so by hand a 100 us op holding a 30 us one is 100 us of compute (not 130), and the output says how."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "outer", "pid": 1, "tid": 1, "ts": 1000, "dur": 100},
              {"ph": "X", "cat": "cpu_op", "name": "inner", "pid": 1, "tid": 1, "ts": 1020, "dur": 30},
              {"ph": "X", "cat": "cpu_op", "name": "later", "pid": 1, "tid": 1, "ts": 1150, "dur": 50}]
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (row,) = _json(path, "--window", "trace")["rows"]
    assert (row["compute_ps"], row["idle_ps"], row["span_ps"]) == (150_000_000, 50_000_000, 200_000_000)
    assert "on each thread the innermost op running owns an instant, so nested ops count once" in _breakdown(
        path).stdout.splitlines()[0]


def _union_us(spans: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals."""
    total, end = 0.0, -math.inf
    for a, b in sorted(spans):
        total += max(b, end) - max(a, end) if b > end else 0.0
        end = max(end, b)
    return total


def test_gloo_spans_in_flight_across_a_thread_s_calls_are_collectives_in_flight(fixtures_dir):
    """A torch ring step over gloo (tests/data/torch_ring: the bundled torch model's ring plan, 2 ranks): each
    gloo:send / gloo:recv span starts inside the c10d call that starts its transfer and runs on for 10-14 ms across
    the thread's next calls, nesting in none. As the call's child it had been cut at the call's end (comm 0.935 of
    the 28.798 ms step, idle 24.333); its own line's, its whole time is in flight: comm is the union of the step's
    gloo spans and c10d calls, by a plain reading of the file, and splits into exposed ICI and hidden."""
    path = fixtures_dir.parent / "torch_ring" / "rank0.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    (step,) = [e for e in doc if e.get("name") == "ProfilerStep#3"]
    lo, hi = step["ts"], step["ts"] + step["dur"]
    comm = _union_us([(max(e["ts"], lo), min(e["ts"] + e["dur"], hi)) for e in doc if e.get("ph") == "X"
                      and e["name"].startswith(("gloo:", "c10d::")) and e["ts"] < hi and e["ts"] + e["dur"] > lo])
    assert round(comm) == 23475
    (row,) = _json(path)["rows"]
    assert row["comm_ps"] == pytest.approx(comm * 1e6, abs=1000)  # (float us of the file: a ns)
    assert row["ici_ps"] + row["hidden_ps"] == row["comm_ps"]
    assert row["span_ps"] == round(step["dur"] * 1e6) and row["ici_ps"] > 0.9 * row["comm_ps"]


def test_gloo_ranks_name_no_straggler_and_say_why_their_skew_passes_the_step(fixtures_dir):
    """The torch ring step's two ranks (processes of one machine): the rank that arrived last is no straggler, as
    on XLA's CPU devices, a note says why; the step's skew, summed over its 8 sends and recvs in flight at once, is
    261.5% of it, and the line says how a sum can pass the step (a newcomer's run had named a straggler there)."""
    result = CliRunner().invoke(cli, ["trace", "collectives", str(fixtures_dir.parent / "torch_ring")])
    assert result.exit_code == 0 and "(straggler)" not in result.stdout
    assert "perfkit: note: these ranks' collectives ran on host CPUs (gloo): where the ranks share a machine" in (
        result.stderr)
    assert ("261.5% of the 29810.9 us step (more than the step: collectives in flight at once each count their own "
            "skew)") in result.stdout


@pytest.mark.parametrize("change, line", [
    ({"distributedInfo": "rank 3"}, None),
    ({"distributedInfo": {"rank": "abc"}}, 'distributedInfo: rank is not a rank number ("abc")'),
    ({"distributedInfo": {"rank": None}}, "distributedInfo: rank is not a rank number (null)"),
    ({"args": ["stream", 7]}, None),
    ({"ts": 2.0**70}, "ends 1.181e+21 us after the trace's first event: past what perfkit's picosecond times hold"),
    ({"dur": 1e30}, "ends 1e+30 us after the trace's first event: past what perfkit's picosecond times hold"),
    ({"dur": None}, "has no dur"),
], ids=["distributedInfo a string", "rank a string", "rank null", "args a list", "ts past int64 ps",
        "dur past int64 ps", "no dur"])
def test_odd_field_types_and_out_of_range_times(fixtures_dir, tmp_path, change, line):
    """A hunt's copies of a real trace with one field changed: a ``distributedInfo`` or a kernel's ``args`` that is
    not an object is as none (a traceback before: their ``.get``); a rank that is no number, a kernel that ends past
    what int64 picoseconds hold (its figures had wrapped: a span of -9223372032 ms) and a complete event without a
    duration (read as 0 before; HTA drops it) are refused in one line."""
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / SCHEMA_2021).read_bytes()))
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "Kernel")
    for key, value in change.items():
        if key == "distributedInfo":
            doc[key] = value
        elif value is None:
            del kernel[key]
        else:
            kernel[key] = value
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(doc))
    result = CliRunner().invoke(cli, ["trace", "breakdown", "--window", "trace", str(path)])
    if line is None:
        clean = CliRunner().invoke(cli, ["trace", "breakdown", "--window", "trace",
                                         str(fixtures_dir / "kineto" / SCHEMA_2021)])
        assert result.exit_code == 0 and result.stdout == clean.stdout, result.output
    else:
        assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
        assert result.output.startswith(f"perfkit: {path}: ") and line in result.output, result.output


def test_a_kineto_diff_names_where_it_parts_from_hta_tracediff(fixtures_dir):
    """The counts and times equal HTA TraceDiff's with its rounding off and zero-duration kernels left out; both are
    said (they were in breakdown's header, not in diff's), and only for Kineto input: zero-duration kernels where a
    side holds some (the 2021 trace's 643 GPU events of dur 0; hta_nccl_data has none), the rounding of each trace
    whose device ops it moves (a trace of whole us, none: the diff said HTA rounds of every Kineto pair alike)."""
    zeros = {SCHEMA_2021: ["device ops of no duration (643 in A, 643 in B) are neither timed nor counted here (HTA's "
                           "TraceDiff counts them)"], "hta_nccl_data.json.gz": []}
    for name, zero in zeros.items():
        path = fixtures_dir / "kineto" / name
        result = CliRunner().invoke(cli, ["trace", "diff", str(path), str(path), "--json"])
        assert result.exit_code == 0, result.output
        notes = json.loads(result.stdout)["notes"]
        assert [n for n in notes if " run past their step markers " not in n] == rounding_notes(path) + zero
        assert len(rounding_notes(path)) == (name != SCHEMA_2021)
    xspace = str(next((fixtures_dir / "xplane").glob("*.xplane.pb")))
    notes = json.loads(CliRunner().invoke(cli, ["trace", "diff", xspace, xspace, "--json"]).stdout)["notes"]
    assert not any("TraceDiff" in n for n in notes)


def test_an_xspace_diff_by_op_says_ops_are_matched_by_name(fixtures_dir):
    """A newcomer's diff by op of two trials whose programs differ read one fusion's name as the same op on both
    sides: a diff of XSpaces by op says names are per program (folders of XSpaces too: no Kineto note there)."""
    ring = str(fixtures_dir.parent / "jax_cpu_ring")
    by_op = json.loads(CliRunner().invoke(cli, ["trace", "diff", ring, ring, "--by", "op", "--json"]).stdout)["notes"]
    assert any(n.startswith("ops are matched by name, which XLA gives per program") for n in by_op)
    assert not any("TraceDiff" in n for n in by_op)
    by_kind = json.loads(CliRunner().invoke(cli, ["trace", "diff", ring, ring, "--json"]).stdout)["notes"]
    assert not any("matched by name" in n for n in by_kind)


def test_a_chrome_trace_of_another_tool(tmp_path):
    """A hunt's Chrome trace from TensorFlow's trace viewer (pytorch/kineto's copy of its test data): spans as
    begin/end pairs, a counter, complete events of no Kineto category. Every command refuses it as having no
    device ops (collectives had printed host ops standing in, and no collectives), the refusal alone; export, which
    reads it, says its begin/end events are not read (it had written its 4 complete events, the 16 others dropped
    unsaid)."""
    events = [{"cat": "PERF", "pid": 1, "tid": 1, "ts": 826, "ph": "C", "name": "counter", "args": {"value": 10}},
              {"cat": "PERF", "pid": 1, "tid": 1, "ts": 826, "ph": "B", "name": "A"},
              {"cat": "PERF", "pid": 1, "tid": 1, "ts": 827, "ph": "B", "name": "Asub"},
              {"cat": "PERF", "pid": 1, "tid": 1, "ts": 829, "ph": "E"},
              {"cat": "PERF", "pid": 1, "tid": 1, "ts": 833, "ph": "E"},
              {"cat": "PERF", "pid": 1, "tid": 2, "ts": 840, "ph": "X", "dur": 5, "name": "B"}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    note = f"perfkit: note: {path}: its 4 begin/end ('B'/'E') events are not read"
    for command in ("breakdown", "collectives", "tail"):
        result = CliRunner().invoke(cli, ["trace", command, str(path)])
        assert result.exit_code == 2, (command, result.output)
        assert result.stderr == f"perfkit: {path}: no device ops in these traces\n"
    result = CliRunner().invoke(cli, ["trace", "export", str(path), "--perfetto", str(tmp_path / "out.json")])
    assert result.exit_code == 0 and result.stderr.startswith(note), result.output
    (tmp_path / "out.json").unlink()


def test_one_trace_given_twice_is_not_two_ranks(fixtures_dir, tmp_path):
    """A hunt's copy of one real trace under another name (TraceLens' H100 trace, no distributedInfo) read as
    ranks 0 and 1 with the same figures each (and HTA's two copies of one trace, rank_not_found and
    distributed_info_not_found, as two host-op ranks). Files that record no rank and hold the same device ops at the
    same times are one trace given twice: refused in one line naming both."""
    doc = gzip.decompress((fixtures_dir / "kineto" / FALCONSAI).read_bytes())
    assert b"distributedInfo" not in doc  # (the premise)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(doc)
    b.write_bytes(doc)
    refused = _breakdown(a, b)
    assert refused.exit_code == 2 and refused.stdout == "", refused.output
    assert refused.stderr.splitlines()[-1] == (  # after the notes of the ranks given by order
        f"perfkit: {b}: it holds the same device ops, at the same times, as {a}: one trace given twice, not two "
        "ranks; pass it once")


@pytest.mark.parametrize("command", ["breakdown", "collectives", "tail"])
def test_one_xspace_given_twice_is_not_two_hosts(fixtures_dir, tmp_path, command):
    """Two byte-identical copies of a real XSpace under other names in one folder were read as two hosts, ranks 0
    and 1, of the same figures, unsaid. A profiler never writes two processes' profiles alike (each records its
    host, its pids, its times): two XSpace files of the same bytes are one profile given twice, refused in one line
    naming both, on both paths that read a folder's files (``events.load`` and ``shards.cut``)."""
    import perfkit.trace.shards as shards  # (the per-file path, which the CLI takes only past 8 MB a trace)

    a, b = tmp_path / "a.xplane.pb", tmp_path / "b.xplane.pb"
    for copy in (a, b):
        shutil.copyfile(fixtures_dir / "xplane" / "mi300_jax08_gemm.xplane.pb", copy)
    line = f"{b}: it is {a} byte for byte: one profile given twice, not two hosts' or ranks'; pass it once"
    refused = CliRunner().invoke(cli, ["trace", command, str(tmp_path)])
    assert refused.exit_code == 2 and refused.stdout == "", refused.output
    assert refused.stderr == f"perfkit: {line}\n"
    with pytest.raises(BadInput) as raised:
        shards.cut([a, b], workers=2)
    assert raised.value.line() == line



def test_one_xspace_named_twice_is_refused(fixtures_dir):
    """One XSpace named twice on the command line raised KeyError 'role' (its one decoded file read as two). It is
    one profile given twice: refused in one line."""
    path = fixtures_dir / "xplane" / "mi300_jax08_gemm.xplane.pb"
    refused = _breakdown(path, path)
    assert refused.exit_code == 2 and refused.stdout == "", refused.output
    assert refused.stderr == (f"perfkit: {path}: named twice: one profile given twice, not two hosts' or ranks'; "
                              "pass it once\n")

def test_an_xspace_against_its_copy_is_a_diff(fixtures_dir, tmp_path):
    """A file and its copy as the two sides of a diff are two profiles, not one given twice: nothing changes."""
    a, b = tmp_path / "a.xplane.pb", tmp_path / "b.xplane.pb"
    for copy in (a, b):
        shutil.copyfile(fixtures_dir / "xplane" / "mi300_jax08_gemm.xplane.pb", copy)
    result = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert len(rows) == 4 and all(r["a_ps"] == r["b_ps"] > 0 and r["delta_ps"] == 0 for r in rows), rows


def test_ranks_given_by_order_are_said(fixtures_dir, tmp_path):
    """A hunt's two traces without ``distributedInfo`` given together read as ranks 0 and 1 by their order, unsaid.
    Each such file's rank, and where it came from, is noted; a file that records its rank, or a file alone, is
    not."""
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / SCHEMA_2021).read_bytes()))
    assert "distributedInfo" not in doc  # (the premise)
    (tmp_path / "a.json").write_text(json.dumps(doc))
    later = [{**e, "ts": e["ts"] + 1e6} if "ts" in e else e for e in doc["traceEvents"]]  # another process's
    (tmp_path / "c.json").write_text(json.dumps({**doc, "traceEvents": later, "distributedInfo": {"rank": 5}}))
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(tmp_path / "a.json"), str(tmp_path / "c.json")])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines()[0] == (
        f"perfkit: note: {tmp_path / 'a.json'}: it records no rank (distributedInfo.rank): it is rank 0, from its path "
        "(a rank<R> folder) or else its host's order among the files given"), result.stderr
    assert "c.json: it records no rank" not in result.stderr
    alone = CliRunner().invoke(cli, ["trace", "breakdown", str(tmp_path / "a.json")])
    assert "records no rank" not in alone.stderr


def test_diff_last_step_drop_reads_a_malformed_file_once(tmp_path, monkeypatch):
    """Under --last-step drop, trace diff read both traces again with the last step kept after any refusal, to tell
    "every op is in the last step" from the rest: a malformed B (a JSON cut short) was read twice, and A with it
    (4 reads of 2 files). It is refused as it is, each file read once; only "no device ops" is read again."""
    import perfkit.trace.shards as shards

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    _profiler_steps(a, [0, 1], 2)
    _profiler_steps(b, [0, 1], 2)
    b.write_text(b.read_text()[:-40])
    reads = []
    read = shards.op_table
    monkeypatch.setattr(shards, "op_table", lambda paths, *rest: reads.append(paths) or read(paths, *rest))
    refused = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--last-step", "drop"])
    assert refused.exit_code == 2 and refused.output.startswith(f"perfkit: {b}: ") and "\n" == refused.output[-1:]
    assert reads == [[str(a)], [str(b)]]


# TraceLens' torch.compile trace on a ROCm MI300X (device 2): twelve kernels on stream 0 (Inductor's Triton kernels,
# hipBLASLt GEMMs, attn_fwd), their four Triton launchers as cpu_ops with a stream. HTA 0.5.0 does not read it
# (TraceAnalysis raises TypeError: Invalid value '[160 162 ... 182]' for dtype 'int8'). By a plain reading (Decimal
# sums of the kernels' ts and dur): the kernels' union 12549.021 us of the span 12549.032 (first start to last end)
TRITON_MI300 = "tracelens_mi300_compile_triton.json.gz"
TRITON_MI300_NS = {"span_ps": 12_549_032, "compute_ps": 12_549_021, "idle_ps": 11}


def test_a_trace_hta_cannot_read_is_read_as_a_plain_reading_reads_it(fixtures_dir):
    """Where the referee fails, a plain reading: the whole trace's span, compute and idle to the ns, the four
    launchers named as host events with a stream, not counted."""
    path = fixtures_dir / "kineto" / TRITON_MI300
    doc = _json(path, "--window", "trace")
    (row,) = doc["rows"]
    assert (row["rank"], row["device"]) == (0, 2)
    # whole ns, as Kineto writes them: its starts (3.6e12 us) as float64 microseconds hold a quarter of a ns, and
    # the picoseconds under it were noise (span 12549032082 ps)
    assert {k: row[k] for k in TRITON_MI300_NS} == {k: ns * 1000 for k, ns in TRITON_MI300_NS.items()}
    assert row["ici_ps"] == row["dma_ps"] == row["dcn_ps"] == 0
    assert doc["notes"] == [f"{path}: host events with a stream argument (4 cpu_op) are not device ops here; "
                            "HTA's temporal breakdown counts every event with a stream as GPU time",
                            *rounding_notes(path)]


def test_times_finer_than_the_ns_keep_their_picoseconds(tmp_path):
    """A chrome trace whose times are finer than Kineto's whole ns (xprof's viewer JSON writes ps) keeps them: by
    hand, a kernel at 1.0000004 us of 2.0012344 us (the trace's first event at 0) spans 2001234 ps, not the 2001000
    of whole ns."""
    events = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 1, "tid": 7, "ts": 1.0000004, "dur": 2.0012344,
               "args": {"device": 0, "stream": 7}},
              {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 100, "ts": 0, "dur": 0.5}]
    path = tmp_path / "ps.json"
    path.write_text(json.dumps({"traceEvents": events}))
    (row,) = _json(path, "--window", "trace")["rows"]
    assert row["span_ps"] == row["compute_ps"] == 2001234
