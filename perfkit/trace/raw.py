"""What a trace reader hands over: one file's events as numpy columns with strings as codes, before
classification and step assignment (``perfkit.trace.events`` turns these into the tidy frame)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from perfkit.trace.programs import Programs

# What an event is, before classification: a device op (classified into compute / ici / dcn / dma), a step
# marker, a module span, host activity, another device-side event (async op spans, overlays), or a DCN
# (cross-slice, Megascale) transfer.
ROLES = {"op": 0, "step": 1, "module": 2, "host": 3, "other": 4, "dcn_transfer": 5}
# the host a trace file is named for: its name up to its first dot (host.xplane.pb beside host.trace.json.gz; a
# torch.profiler worker's <host>_<pid>.<timestamp>.pt.trace.json), an IPv4 address kept whole (TensorFlow's
# <ip>_<port>.xplane.pb: its first dot had made every address's host "10")
_HOST_NAME = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}(?:_\d+)?(?=\.)|[^.]*")


def file_host(path: Path) -> str:
    """The host a trace file's name says it is of (``_HOST_NAME``)."""
    return _HOST_NAME.match(path.name).group()


class StringTable:
    """Strings as int32 codes, each string stored once."""

    def __init__(self):
        self.values: list[str] = []
        self._codes: dict[str, int] = {}

    def code(self, s: str) -> int:
        c = self._codes.get(s)
        if c is None:
            c = self._codes[s] = len(self.values)
            self.values.append(s)
        return c

    def codes(self, strings) -> np.ndarray:
        return np.fromiter((self.code(s) for s in strings), np.int32)


class RawTrace(NamedTuple):
    """One trace file's events. Columns, all (n,) arrays, one row per event:

    name, hlo_op, hlo_module, hlo_category: int32 codes into ``strings`` (-1 absent); line: int32 index
    into ``lines``; device: int32 (-1 host); role: int8 (``ROLES``); start_ps: int64 from ``origin_ns``;
    dur_ps, stall_ps (local DMA stall inside the op): int64; step: int32 step number of a step marker, or of
    a step annotation nested in another (not a marker: ``--steps`` may make it one) (-1 otherwise or unknown);
    a Kineto trace's columns add launch_step: int32, of a device op the host
    ProfilerStep its launch ran in (-1 unknown), and occurrence: int64, an event's ``External id`` (-1 none), which
    tells the occurrences of an annotation apart (``steps.assign``); an XSpace's add device_offset_ps,
    device_duration_ps: int64, a TPU op's time on its chip's own clock as its stats give it (-1 absent);
    program_id: uint64 (a 64-bit fingerprint on TPUs), meaningful where the bool ``program_known`` is set (no
    value of the whole uint64 range is free to mean "unknown").
    """

    path: Path
    rank: int
    host: str
    origin_ns: int                  # wall-clock ns of start_ps == 0
    columns: dict[str, np.ndarray]
    strings: StringTable
    lines: list[str]
    programs: Programs              # program id -> its ops (xplane /host:metadata)
    # what its ops are: "device" ops, "host" ops standing in (a CPU trace), or "cpu" device ops all run on the host
    # (XLA's CPU devices: threads sharing the host's cores)
    measured: str = "device"
    hta_reads: bool = True          # whether HTA 0.5.0 reads the file (not Chrome's JSON Array Format: events alone)
    host_streams: tuple[tuple[str, int], ...] = ()  # (category, count) of host events with a stream argument
    unlaunched: int = 0             # device ops without a launch up to the last ProfilerStep's end (HTA drops them)
    streamless: int = 0             # device ops without a stream argument HTA reads (HTA drops them)
    # (name, count) of the events of a category counted only with a stream (MTIA's) that have none: left out here
    # as by HTA
    left_streamless: tuple[tuple[str, int], ...] = ()
    # (device ops that start or end between whole us, the ps HTA's rounding them inward takes off their union: of
    # every op, of the ops left with the last step dropped)
    between_us: tuple[int, int, int] = (0, 0, 0)
    # with the last step dropped: (device ops HTA keeps, us) where HTA cuts that much later (a GPU-side ProfilerStep's)
    late_cut: tuple[int, float] = (0, 0.0)
    rank_recorded: bool = True      # a Kineto trace's rank is its distributedInfo's (else its path's, or its host's
    #                                 order among the files)
