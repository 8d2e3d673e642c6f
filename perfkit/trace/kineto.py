"""PyTorch Kineto chrome-trace JSON (``.json`` or ``.json.gz``) into columnar events.

Device ops are the events of ``DEVICE_CATS``: GPU kernels, memcpys and memsets (``kernel``, ``gpu_memcpy``,
``gpu_memset``; ``Kernel``, ``Memcpy``, ``Memset`` in the 2021 schema of the TensorBoard plugin's samples) and
MTIA's ``mtia_ccp_events``, of which, as HTA counts them, only those with a ``stream`` arg; each of device
``args.device`` (else its pid) on line ``stream <tid>``. ``ProfilerStep#N`` annotations are step markers
(``gpu_user_annotation`` ones per device, host ones for the whole rank); everything else is host activity, the
GPU-side annotations on their device (which ``--steps`` may name as the steps).
The rank is ``distributedInfo.rank`` when the file has it. A device op whose launch (the runtime call of its
``args.correlation``) ran inside a host ProfilerStep carries that step in column ``launch_step`` (HTA's
iteration of a kernel: how HTA leaves out the last step). What HTA reads otherwise is counted for notes
that say so: host events with a ``stream`` argument, which HTA takes for GPU events (``RawTrace.host_streams``),
device ops without a launch in the trace up to its last ProfilerStep's end, which HTA drops
(``RawTrace.unlaunched``), device ops that start or end between whole microseconds, which HTA's default rounds
inward (``RawTrace.between_us``), and, with the last step dropped, ops launched before a later GPU-side
ProfilerStep, which HTA keeps (``RawTrace.late_cut``). A time written as a string is refused.

A trace without device events is one of two things. Where it holds device runtime calls (``*_runtime``,
``Runtime``, ``cuda_driver``) or a CUPTI profiler range (``cuda_profiler_range``: counters per kernel, no
timeline), the device ran but the file does not show it: refused. Otherwise it is a CPU (gloo) trace: its
CPU ops stand in for device ops (device 0; ``c10d::`` ops and gloo's ``gloo:*`` spans are its ICI, the spans,
which outlive the calls that start them, on lines of their own: ``_gloo_lines``), and the trace says it
measured host ops (``RawTrace.measured``). Timestamps are float microseconds in the file, read as float64
(sub-microsecond digits of epoch-sized values are lost); Kineto's whole nanoseconds come out whole (``_picoseconds``).
"""

from __future__ import annotations

import json
import re
import warnings
import zlib
from collections import Counter
from pathlib import Path

import numpy as np

from perfkit.errors import BadInput, DefinitionNote
from perfkit.trace.programs import Programs
from perfkit.trace.raw import ROLES, RawTrace, StringTable, file_host

DEVICE_CATS = ("kernel", "gpu_memcpy", "gpu_memset", "Kernel", "Memcpy", "Memset", "mtia_ccp_events")
_PS_PER_US = 10**6  # (an int: the times are int64 ps)
STREAM_ONLY_CATS = ("mtia_ccp_events",)  # device events only where they carry a stream (HTA's rule)
HOST_OP_CATS = ("cpu_op", "Operator")  # torch operators (2021 schema: Operator)
STEP_PREFIX = "ProfilerStep#"
PROFILER_RANGE_CAT = "cuda_profiler_range"
_NUMBER = re.compile(r"\d+")


ARRAY_FORMAT = "perfkit: array format"  # a key no trace writes: the document was the events alone (``load_json``)
ROCPROF_KEY = "rocprofiler-sdk-tool"  # the top-level key of rocprofv3's JSON output, which holds no traceEvents
MAX_JSON_BYTES = 2 << 30  # inflated text of a .json.gz; past it the file is refused (a gzip bomb)


def inflate(raw: bytes, path: Path) -> bytes:
    """A gzip file's text (every member), refused as soon as it passes ``MAX_JSON_BYTES``."""
    parts, size = [], 0
    while raw:
        member, data = zlib.decompressobj(wbits=31), raw
        while not member.eof:
            piece = member.decompress(data, 1 << 24)
            size += len(piece)
            if size > MAX_JSON_BYTES:
                raise BadInput(f"inflates to more than {MAX_JSON_BYTES:,} bytes (a gzip bomb?)", path=path)
            parts.append(piece)
            data = member.unconsumed_tail
            if not data and not piece:
                raise EOFError("the gzip stream ends before its end marker")
        raw = member.unused_data
    return b"".join(parts)


class NotATrace(BadInput):
    """A whole JSON document that holds no trace perfkit reads (a config file beside the traces, rocprofv3's JSON
    beside the program's torch.profiler trace): where a folder was given, skipped; a damaged file, which may be a
    rank's trace, is refused instead."""


def load_json(path: Path) -> dict:
    """A chrome-trace JSON document, gzip or not; BadInput when truncated or damaged, NotATrace when whole
    but not a trace."""
    try:
        raw = path.read_bytes()
        text = inflate(raw, path) if raw[:2] == b"\x1f\x8b" else raw
        doc = json.loads(text)
    except RecursionError:
        raise BadInput("not a readable chrome-trace JSON (nested too deep)", path=path) from None
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadInput(f"not a readable chrome-trace JSON ({type(exc).__name__}: {str(exc)[:80]})",
                       path=path) from None
    if isinstance(doc, list):  # Chrome's JSON Array Format, the events alone: PyTorch's profiler wrote it in 2020
        if not any(isinstance(e, dict) and "ph" in e for e in doc):
            raise NotATrace("not a Kineto / chrome trace: a JSON array without trace events (no 'ph')", path=path)
        doc = {"traceEvents": doc, ARRAY_FORMAT: True}
    if isinstance(doc, dict) and ROCPROF_KEY in doc:  # (its records are no timeline perfkit reads: say what it is)
        raise NotATrace("a rocprofiler-sdk output (rocprofv3 --output-format json), not a Chrome / Kineto trace: "
                        "perfkit reads none of rocprofv3's formats (rocpd, csv, json, pftrace, otf2); it reads the "
                        "program's torch.profiler (Kineto JSON) or JAX profiler (*.xplane.pb) trace", path=path)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise NotATrace("not a Kineto / chrome trace: no traceEvents list", path=path)
    return doc


def _counted(labels: list[str], which: np.ndarray) -> tuple[tuple[str, int], ...]:
    """(label, count) of the events ``which`` ((n,) bool) picks, most first."""
    counts = Counter(labels[i] for i in np.flatnonzero(which))
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _host_streams(cats: list[str], hta_host: np.ndarray) -> tuple[tuple[str, int], ...]:
    """(category, count) of the host events HTA takes for GPU events (``hta_host``: (n,) bool), most first."""
    return _counted(cats, hta_host)


def _hta_steps(names: list[str], cpu: np.ndarray) -> list[int]:
    """The ProfilerSteps HTA reads as CPU events (``cpu``: (n,) bool, stream -1 to it), which it filters device
    ops by (``hta.common.trace``, ``_filter_irrelevant_gpu_kernels``); none where the trace names fewer than two
    ProfilerSteps, of which HTA filters nothing."""
    if len({n for n in names if "ProfilerStep" in n}) < 2:
        return []
    return [i for i in np.flatnonzero(cpu) if "ProfilerStep" in names[i]]


def _unlaunched(events: list[dict], steps: list[int], on_gpu: np.ndarray, cpu: np.ndarray, ts_us: np.ndarray,
                end_us: np.ndarray) -> int:
    """How many device ops HTA leaves out as not launched in the traced steps (``include_last_profiler_step=True``):
    those without a correlation id, or whose id no CPU event started by the end of the last of HTA's ``steps``
    (``_hta_steps``) carries."""
    if not steps:
        return 0
    early = np.flatnonzero(cpu & (ts_us <= end_us[steps].max()))
    ids = (_args(events[i]).get("correlation") for i in early)
    launched = {c for c in ids if isinstance(c, int) and c >= 0}
    return sum(_args(events[i]).get("correlation") not in launched for i in np.flatnonzero(on_gpu))


def _hta_streams(events: list[dict]) -> np.ndarray:
    """(n,) int64: each event's ``stream`` argument as HTA reads it (``hta.utils.utils.
    normalize_gpu_stream_numbers``): -1 where it has none or ``int()`` does not take it (ROCm's ``"0x0"``). HTA
    takes every event whose stream is not -1 for a GPU event, perfkit the device categories only."""
    out = np.full(len(events), -1, np.int64)
    for i, event in enumerate(events):
        value = _args(event).get("stream")
        if value is not None:  # most host events have none: no exception raised for them
            try:
                out[i] = int(value)
            except (TypeError, ValueError, OverflowError):
                pass
    return out


def _args(event: dict) -> dict:
    """An event's ``args``; none where it has none or they are not an object (a writer's list)."""
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def _is_runtime(cat: str) -> bool:
    """Whether events of ``cat`` are a device runtime's calls (``cuda_runtime``, ``mtia_runtime``, 2021's ``Runtime``)."""
    return cat.endswith("_runtime") or cat in ("Runtime", "cuda_driver")


def _device_ran_unseen(cats: set[str]) -> str | None:
    """Why a trace without device events still had a device at work (None: a CPU trace)."""
    if PROFILER_RANGE_CAT in cats:
        return (f"a CUPTI profiler-range trace ({PROFILER_RANGE_CAT}: counters per kernel, no kernel timeline): "
                "nothing on the device to measure")
    runtime = sorted(c for c in cats if _is_runtime(c))
    if runtime:
        return (f"device runtime calls ({', '.join(runtime)}) but no device events perfkit reads (cat "
                f"{', '.join(DEVICE_CATS)}): a device or trace kind perfkit does not support")
    return None


_ABSENT = object()


def _numbers(events: list[dict], key: str, names: list[str], path: Path) -> np.ndarray:
    """(n,) float64: each event's ``key``; refused where absent. A number written as a string (``"dur": "4.864"``) is
    refused, not read as the number numpy would make of it: the format's times are JSON numbers, and a
    writer that quoted one is not one whose other fields can be trusted (HTA fails on such a file)."""
    values = [e.get(key, _ABSENT) for e in events]
    if not set(map(type, values)) <= {int, float}:  # (a bool is no number here)
        i = next(i for i, v in enumerate(values) if type(v) not in (int, float))
        if values[i] is _ABSENT:  # (HTA drops such an event: a complete event's time unknown)
            raise BadInput(f"complete ('X') event {names[i]!r} has no {key}", path=path, field="traceEvents")
        raise BadInput(f"event {names[i]!r} has a {key} that is not a JSON number ({json.dumps(values[i])})",
                       path=path, field="traceEvents")
    return np.array(values, np.float64)


def _late_cut(events: list[dict], steps: list[int], on_gpu: np.ndarray, cpu: np.ndarray, host_steps: np.ndarray,
              ts_us: np.ndarray) -> tuple[int, float]:
    """With the last step dropped, the device ops HTA keeps and perfkit does not, and how much later HTA's cut
    is (us). HTA cuts at the latest start of a ProfilerStep it reads as a CPU event (``cpu``: stream -1 to it),
    a GPU-side annotation's where the trace has them (``_filter_irrelevant_gpu_kernels``); perfkit at its last
    host ProfilerStep's start: ops launched between the two are HTA's, not perfkit's. ``steps``: ``_hta_steps``."""
    if not steps or not host_steps.any():
        return 0, 0.0
    own, hta = float(ts_us[host_steps].max()), float(ts_us[steps].max())
    if hta <= own:
        return 0, 0.0
    between = np.flatnonzero(cpu & (ts_us >= own) & (ts_us < hta))
    ids = {c for c in (_args(events[i]).get("correlation") for i in between) if isinstance(c, int)}
    moved = sum(_args(events[i]).get("correlation") in ids for i in np.flatnonzero(on_gpu))
    return moved, (hta - own if moved else 0.0)


def _gloo_lines(tids: list[str], names: list[str], role: np.ndarray, ts_us: np.ndarray, dur_us: np.ndarray) -> None:
    """A CPU trace's gloo spans moved off their thread's line (in place): a span runs from inside the call that
    starts a transfer (``c10d::send``) until the transfer is done, past that call's end and across the calls
    after it, nesting in none; on the thread's line it would read as a child of the call it started in, cut at
    that call's end (a ring's sends and recvs in flight for most of its step read as 1% of it). Each goes to the
    first line ``<thread> gloo <k>`` whose last span has ended, so spans on a line never overlap and as many
    lines as spans run at once; across lines compute beats ICI (``perfkit.trace.breakdown``)."""
    spans = [i for i in np.flatnonzero(role == ROLES["op"]) if names[i].startswith("gloo:")]
    free: dict[str, list[float]] = {}  # thread -> each of its gloo lines' last end
    for i in sorted(spans, key=lambda i: ts_us[i]):
        ends = free.setdefault(tids[i], [])
        k = next((k for k, end in enumerate(ends) if end <= ts_us[i]), len(ends))
        ends[k:k + 1] = [ts_us[i] + dur_us[i]]
        tids[i] = f"{tids[i]} gloo {k}"


def _launch_steps(events: list[dict], cats: list[str], names: list[str], on_gpu: np.ndarray, host_steps: np.ndarray,
                  ts_us: np.ndarray, dur_us: np.ndarray) -> np.ndarray:
    """(n,) int32: for each device op whose launch (the runtime call of the same ``args.correlation``) ran
    inside a host ProfilerStep, that step's number (HTA's iteration of a kernel, by which it drops the last
    step); -1 for every other event."""
    out = np.full(len(events), -1, np.int32)
    marks = np.flatnonzero(host_steps)
    if not marks.size or not on_gpu.any():
        return out
    launches = {}
    for e, c in zip(events, cats):
        if _is_runtime(c):
            corr = _args(e).get("correlation")
            if corr is not None:
                launches[corr] = e["ts"]
    marks = marks[np.argsort(ts_us[marks], kind="stable")]
    starts, ends = ts_us[marks], ts_us[marks] + dur_us[marks]
    numbers = [int(m.group()) if (m := _NUMBER.search(names[i])) else -1 for i in marks]
    ops = np.flatnonzero(on_gpu)
    at = np.array([launches.get(_args(events[i]).get("correlation"), np.nan) for i in ops], np.float64)
    k = np.searchsorted(starts, at, side="right") - 1  # (NaN, no launch: past every start, then not inside)
    inside = (k >= 0) & (at < ends[np.maximum(k, 0)])
    out[ops[inside]] = np.array(numbers, np.int32)[k[inside]]
    return out


def read(path: Path, rank: int) -> RawTrace:
    doc = load_json(path)
    info = doc.get("distributedInfo")
    recorded = isinstance(info, dict) and "rank" in info
    rank = info["rank"] if recorded else rank
    if type(rank) is not int or rank < 0:  # (a bool is no rank)
        raise BadInput(f"rank is not a rank number ({json.dumps(rank)})", path=path,
                       field="distributedInfo")
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e]
    if not events:
        raise BadInput("no complete ('X') events in traceEvents", path=path)
    pairs = sum(isinstance(e, dict) and e.get("ph") in ("B", "E") for e in doc["traceEvents"])
    if pairs:  # (Kineto writes none; a Chrome trace of another tool may time its spans so)
        warnings.warn(f"{path}: its {pairs} begin/end ('B'/'E') events are not read: perfkit reads the complete ('X') "
                      "events Kineto writes", DefinitionNote, stacklevel=2)
    cats = [str(e.get("cat", "")) for e in events]
    names = [str(e.get("name", "")) for e in events]
    try:
        ts_us, dur_us = _numbers(events, "ts", names, path), _numbers(events, "dur", names, path)
    except (TypeError, ValueError):
        raise BadInput("an event's ts or dur is not a number", path=path, field="traceEvents") from None
    bad = np.flatnonzero(~np.isfinite(ts_us) | ~np.isfinite(dur_us))
    if bad.size:  # (JSON as Python writes it may hold NaN and Infinity)
        raise BadInput(f"event {names[bad[0]]!r} has a ts or dur that is not a finite number "
                       f"({events[bad[0]]['ts']}, {events[bad[0]].get('dur', 0)})", path=path, field="traceEvents")
    bad = np.flatnonzero(dur_us < 0)
    if bad.size:  # an op that ends before it starts: no time to give any part of a step
        raise BadInput(f"event {names[bad[0]]!r} has a negative dur ({events[bad[0]]['dur']})", path=path,
                       field="traceEvents")
    past = np.flatnonzero((ts_us - np.floor(ts_us.min()) + dur_us) * 1e6 >= 2**62)
    if past.size:  # times are int64 picoseconds from the trace's first event: beyond them, a wrapped figure
        raise BadInput(f"event {names[past[0]]!r} ends {float(ts_us[past[0]] + dur_us[past[0]] - ts_us.min()):.4g} us "
                       "after the trace's first event: past what perfkit's picosecond times hold (53 days)",
                       path=path, field="traceEvents")
    streams = _hta_streams(events)
    # device categories; MTIA's events only where they carry a stream, as HTA counts them
    stream_only = np.array([c in STREAM_ONLY_CATS for c in cats], bool)
    on_gpu = np.array([c in DEVICE_CATS for c in cats], bool) & (~stream_only | (streams != -1))
    is_step = np.array([n.startswith(STEP_PREFIX) for n in names], bool)
    role = np.full(len(events), ROLES["host"], np.int8)
    device = np.full(len(events), -1, np.int32)
    measured = "device"
    if on_gpu.any():
        role[on_gpu] = ROLES["op"]
        # the device's annotations (its ProfilerSteps, and the events --steps may name) on it
        gpu_annotation = np.array([c == "gpu_user_annotation" for c in cats], bool)
        dev_of = [_args(e).get("device", e.get("pid")) for e in events]
        for i in np.flatnonzero(on_gpu | gpu_annotation):
            device[i] = int(dev_of[i]) if str(dev_of[i]).isdigit() else 0
    else:  # CPU-only trace: its CPU ops, and gloo's collective spans (on gloo's threads), stand in for device ops
        unseen = _device_ran_unseen(set(cats))
        if unseen:
            raise BadInput(unseen, path=path)
        role[np.array([c in HOST_OP_CATS or (c == "user_annotation" and n.startswith("gloo:"))
                       for c, n in zip(cats, names)], bool)] = ROLES["op"]
        device[role == ROLES["op"]] = 0
        measured = "host"
    role[is_step] = ROLES["step"]
    host_steps = is_step & np.array([c != "gpu_user_annotation" for c in cats], bool)
    device[host_steps] = -1  # (a CPU-only trace's ProfilerStep logged as an op: still the host's marker)
    launched_in = _launch_steps(events, cats, names, on_gpu, host_steps, ts_us, dur_us)
    origin_us = float(np.floor(ts_us.min()))
    strings = StringTable()
    tids = [_line(e) if g else f"{e.get('pid')}/{e.get('tid')}" for e, g in zip(events, on_gpu)]
    if measured == "host":
        _gloo_lines(tids, names, role, ts_us, dur_us)
    lines = StringTable()
    n = len(events)
    columns = {
        "name": strings.codes(names), "line": lines.codes(tids), "device": device, "role": role,
        **_picoseconds(ts_us, dur_us, origin_us),
        "step": np.full(n, -1, np.int32), "launch_step": launched_in, "program_id": np.zeros(n, np.uint64),
        "program_known": np.zeros(n, bool), "stall_ps": np.zeros(n, np.int64),
        "hlo_op": np.full(n, -1, np.int32), "hlo_module": np.full(n, -1, np.int32),
        "hlo_category": np.full(n, -1, np.int32), "occurrence": _occurrences(events),
    }
    hta_cpu = ~on_gpu & (streams == -1)  # the events HTA reads as CPU events
    hta_steps = _hta_steps(names, hta_cpu)
    # ns as an int: epoch microseconds * 1000 as a float is past 2**53 (off by up to 128 ns)
    return RawTrace(path=path, rank=rank, host=file_host(path), origin_ns=int(origin_us) * 1000, columns=columns,
                    strings=strings, lines=lines.values, programs=Programs({}, path), measured=measured,
                    hta_reads=ARRAY_FORMAT not in doc,
                    host_streams=_host_streams(cats, ~on_gpu & (streams != -1)) if measured == "device" else (),
                    unlaunched=_unlaunched(events, hta_steps, on_gpu, hta_cpu, ts_us, ts_us + dur_us),
                    streamless=int((on_gpu & (streams == -1)).sum()),
                    left_streamless=_counted(names, stream_only & (streams == -1)),
                    between_us=_between_us(columns, on_gpu, _before_last_step(names, host_steps, launched_in, ts_us))
                    if measured == "device" else (0, 0, 0),
                    late_cut=_late_cut(events, hta_steps, on_gpu, hta_cpu, host_steps, ts_us), rank_recorded=recorded)


def _before_last_step(names: list[str], host_steps: np.ndarray, launched_in: np.ndarray, ts_us: np.ndarray
                      ) -> np.ndarray:
    """(n,) bool: the events left with the last step dropped, as ``timeline.layout`` drops it by the host's
    ProfilerSteps: a device op launched in an earlier one, or, launched in none, starting before the last one's
    start; every event where the host has fewer than two."""
    marks = np.flatnonzero(host_steps)
    if marks.size < 2:
        return np.ones(len(names), bool)
    last = marks[ts_us[marks].argmax()]
    number = int(m.group()) if (m := _NUMBER.search(names[last])) else -1
    return np.where(launched_in >= 0, launched_in != number, ts_us < ts_us[last])


def _between_us(columns: dict[str, np.ndarray], on_gpu: np.ndarray, before_last: np.ndarray
                ) -> tuple[int, int, int]:
    """How many device ops start or end between whole microseconds (``start_ps`` counts from a whole us): those
    HTA 0.5.0 moves, rounding each event's start up and end down unless ``HTA_DISABLE_NS_ROUNDING=1``
    (``hta.common.trace_parser.round_down_time_stamps``); and the ps that takes off the time the device ops run
    (their union, each device's), which HTA's compute plus non-compute time loses (an op rounded to nothing or
    less counts for none): of every op, and of those ``before_last`` ((n,) bool: the ops left with the last step
    dropped)."""
    start, device = columns["start_ps"][on_gpu], columns["device"][on_gpu]
    end = start + columns["dur_ps"][on_gpu]
    ops = int(((start % _PS_PER_US != 0) | (end % _PS_PER_US != 0)).sum())
    if not ops:
        return 0, 0, 0
    up, down = -(-start // _PS_PER_US) * _PS_PER_US, end // _PS_PER_US * _PS_PER_US
    kept = down > up
    left = before_last[on_gpu]
    return ops, *(_busy(device[of], start[of], end[of]) - _busy(device[of & kept], up[of & kept], down[of & kept])
                  for of in (np.ones_like(kept), left))


def _busy(device: np.ndarray, start: np.ndarray, end: np.ndarray) -> int:
    """The ps the intervals [start, end) cover, each device's union summed."""
    total = 0
    for dev in np.unique(device):
        mine = device == dev
        order = np.argsort(start[mine], kind="stable")
        s, e = start[mine][order], end[mine][order]
        reach = np.maximum.accumulate(e)  # the furthest any interval so far ends: what the next one adds starts there
        total += int(np.maximum(e - np.maximum(s, np.concatenate(([s[0]], reach[:-1]))), 0).sum())
    return total


def _picoseconds(ts_us: np.ndarray, dur_us: np.ndarray, origin_us: float) -> dict[str, np.ndarray]:
    """``start_ps`` (from ``origin_us``) and ``dur_ps``, int64. Kineto writes whole nanoseconds (``{us}.{ns:03}``),
    which the float64 of a start 3.6e12 us after its base holds to a quarter of a ns: where every time is a whole ns
    to within what its float holds, whole ns (x 1000), not the float's noise under them (a span of 12549032 ns read
    as 12549032082 ps); else (a writer of finer times: xprof's viewer JSON, in ps) the nearest ps."""
    start_ns, dur_ns = (ts_us - origin_us) * 1e3, dur_us * 1e3
    whole = np.rint(start_ns), np.rint(dur_ns)
    # a written whole ns lies within half its float's spacing (the largest's, in ns); 0.4 ps more for the products'
    # rounding, under the ps
    if all(np.abs(ns - w).max() <= 500 * np.spacing(np.abs(us).max()) + 4e-4
           for ns, w, us in zip((start_ns, dur_ns), whole, (ts_us, dur_us))):
        return {"start_ps": whole[0].astype(np.int64) * 1000, "dur_ps": whole[1].astype(np.int64) * 1000}
    return {"start_ps": np.rint((ts_us - origin_us) * 1e6).astype(np.int64),
            "dur_ps": np.rint(np.maximum(dur_us, 0) * 1e6).astype(np.int64)}


def launched_under(events: list[dict], ops: list[dict], spans) -> list[list[dict]]:
    """For each device op of ``ops``, the host spans (complete events whose name ``spans`` accepts) that its
    launch, the runtime call of the same ``args.correlation``, ran inside on its thread, outermost first; [] where
    the trace holds no launch (queued before the profiler started) or none of those spans around it."""
    wanted = {c for c in (_args(op).get("correlation") for op in ops) if isinstance(c, int)}
    launches, threads = {}, {}
    for e in events:
        ts, dur = e.get("ts"), e.get("dur")
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)):
            continue
        if _is_runtime(str(e.get("cat", ""))) and (c := _args(e).get("correlation")) in wanted:
            launches[c] = e
        elif e.get("ph") == "X" and spans(str(e.get("name", ""))):
            threads.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    calls: dict[tuple, list[tuple]] = {}  # thread -> its launches of ``ops``: (start, end, op)
    for i, op in enumerate(ops):
        if (launch := launches.get(_args(op).get("correlation"))) is not None:
            calls.setdefault((launch.get("pid"), launch.get("tid")), []).append(
                (launch["ts"], launch["ts"] + launch["dur"], i))
    out: list[list[dict]] = [[] for _ in ops]
    for thread, started in calls.items():
        found = sorted(threads.get(thread, []), key=lambda e: (e["ts"], -e["dur"]))  # outermost first at a tie
        around, j = [], 0
        for ts, end, i in sorted(started):  # one sweep: a span ended before a launch is around none after it
            while j < len(found) and found[j]["ts"] <= ts:
                around.append(found[j])
                j += 1
            around = [e for e in around if e["ts"] + e["dur"] >= ts]
            out[i] = [e for e in around if e["ts"] + e["dur"] >= end]
    return out


def _occurrences(events: list[dict]) -> np.ndarray:
    """(n,) int64: each event's ``External id`` (-1 none): a host annotation's and the GPU-side copies Kineto
    writes of it on each stream share it, so the markers ``--steps`` names are told apart by it where the
    number in their names repeats (``steps.assign``)."""
    ids = (_args(e).get("External id") for e in events)
    return np.fromiter((i if type(i) is int and 0 <= i < 2**63 else -1 for i in ids), np.int64, len(events))


def _line(event: dict) -> str:
    """A device event's line: its stream (the 2021 schema's tid is already ``stream N``)."""
    tid = str(event.get("tid"))
    return tid if tid.startswith("stream") else f"stream {tid}"
