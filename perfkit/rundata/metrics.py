"""The metrics protocol: what a rank program writes to ``PERFKIT_METRICS``, one JSON object a line
(``perfkit.record`` writes them), as types, and the reader of what a rank reported: those lines, or a
regex over stdout as a fallback.

A step event is synced (the program waited for the device every step) unless it says
``"kind": "natural"``: then ``ms`` is the mean step time of a pass dispatched asynchronously with one
wait at the end (``"steps"`` says how many steps it averaged). A synced step with ``"traced": true`` ran
under a profiler: it is kept but never timed, since profiling slows it. A step event whose ``ms`` is no finite
number (NaN, Infinity, null, a string) is left out, never given a time, and counted (``unreadable_steps``).
"""

from __future__ import annotations

import codecs
import dataclasses
import itertools
import json
import math
import re
from pathlib import Path
from typing import Literal, NotRequired, TypedDict

from perfkit.rundata.trials import TrialRecord


class StepEvent(TypedDict):
    """A step waited for (synced); ``traced``: it ran under a profiler (kept, never timed)."""
    event: Literal["step"]
    ms: float
    traced: NotRequired[bool]


class NaturalStepEvent(TypedDict):
    """A pass dispatched without waiting: ``ms`` is its mean step, over ``steps`` steps."""
    event: Literal["step"]
    kind: Literal["natural"]
    ms: float
    steps: int


class ValueEvent(TypedDict):
    event: Literal["value"]
    name: str
    value: float


class MarkEvent(TypedDict):
    """Progress: a hung rank's last mark is reported."""
    event: Literal["mark"]
    name: str
    device_kind: NotRequired[str]


@dataclasses.dataclass
class RankMetrics:
    """A rank's report: synced step times, natural step times, other values, progress marks."""

    steps_ms: list[float]  # one per step, each waited for (synced)
    values: dict[str, list[float]]
    marks: list[MarkEvent]  # each whole, as the rank wrote it (a hung rank's last is reported)
    natural_ms: list[float] = dataclasses.field(default_factory=list)  # mean step of an unsynced pass
    traced: list[int] = dataclasses.field(default_factory=list)  # positions in steps_ms run under a profiler
    late_steps: int = 0  # synced steps written after ``read_metrics``'s ``until``, left out
    # step events whose ms is no finite number, left out: positions (warmup, traced) count over the steps kept
    unreadable_steps: int = 0

    @property
    def last_mark(self) -> str | None:
        return self.marks[-1]["name"] if self.marks else None


METRICS_LINE_CHARS = 1 << 20  # no event is longer; a longer line is read in pieces and skipped


def figure(x) -> bool:
    """A finite int or float (JSON's true/false, NaN and Infinity are no figure)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def read_metrics(path: Path, until: float | None = None) -> RankMetrics:
    """Parse a metrics.jsonl a user program wrote: a torn last line (a rank killed mid-write), bytes that
    are not UTF-8, lines that are no JSON event or carry no finite figure are skipped, not fatal. A line is
    kept where its fields are those of an event type: a ``StepEvent``'s or ``NaturalStepEvent``'s ``ms`` and a
    ``ValueEvent``'s ``value`` finite numbers (kept as floats), a ``ValueEvent``'s or ``MarkEvent``'s ``name`` a
    string (a mark kept whole, ``RankMetrics.marks``). With ``until`` (Unix time, s), a line whose ``t`` is later
    is left out, its step counted in ``late_steps``: a rank that ran on after perfkit stopped its trial (a program
    that catches SIGTERM) did not get that far before the stop. A step event (synced or natural) whose ``ms`` is
    no finite number is left out too, counted in ``unreadable_steps``: perfkit invents no time for it. The steps
    after it move up a position (``traced`` counts over the steps kept), so where one lies in the warmup, one
    more real step is taken as warmup: never a warmup step as timed."""
    steps: list[float] = []  # StepEvent's ms
    natural: list[float] = []  # NaturalStepEvent's ms
    values: dict[str, list[float]] = {}  # ValueEvent's value by name
    marks: list[MarkEvent] = []
    traced: list[int] = []
    late = unreadable = 0
    try:
        f = open(path, encoding="utf-8", errors="replace")
    except OSError:
        return RankMetrics(steps, values, marks, natural, traced)
    with f:
        for line in iter(lambda: f.readline(METRICS_LINE_CHARS), ""):
            try:
                ev = json.loads(line)  # any JSON: held to an event type below, field by field
            except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
                continue
            if not isinstance(ev, dict):
                continue
            kind = ev.get("event")
            if until is not None and figure(ev.get("t")) and ev["t"] > until:
                late += kind == "step" and figure(ev.get("ms")) and ev.get("kind") != "natural"
                continue
            if kind == "step" and figure(ev.get("ms")):
                if ev.get("kind") == "natural":
                    natural.append(float(ev["ms"]))
                    continue
                if ev.get("traced"):
                    traced.append(len(steps))
                steps.append(float(ev["ms"]))
            elif kind == "step":
                unreadable += 1
            elif kind == "value" and isinstance(ev.get("name"), str) and figure(ev.get("value")):
                values.setdefault(ev["name"], []).append(float(ev["value"]))
            elif kind == "mark" and isinstance(ev.get("name"), str):
                marks.append(ev)
    return RankMetrics(steps, values, marks, natural, traced, late, unreadable)


def is_timed(trial: TrialRecord, i: int) -> bool:
    """Whether synced step ``i`` of a trial record counts: trial ok, after warmup, not profiled."""
    return trial["status"] == "ok" and i >= trial["warmup"] and i not in trial.get("traced", ())


STDOUT_LINE_CHARS = 1 << 16  # a longer line is matched in pieces of this size (bytes)


def steps_from_stdout(path: Path, pattern: str, until: int | None = None
                      ) -> tuple[list[float], int, int]:
    """Step times from a program nobody can change: ``pattern``'s first group (or named group ``ms``;
    a case's ``step_regex`` has one, checked at load), matched line by line (a rank may print gigabytes:
    never all in memory at once). A capture that is empty or no number is skipped; one that reads as NaN or an
    infinity is left out and counted (the third figure), as ``read_metrics`` counts a step event with no finite
    ``ms``. With ``until`` (the file's size, in bytes, when perfkit stopped the trial: stdout has no clock), a line
    ending past it is left out, its steps counted (the second figure), as ``read_metrics`` leaves out lines whose
    ``t`` is after the stop."""
    rx = re.compile(pattern)
    out, late, unreadable, read = [], 0, 0, 0
    # a long line's pieces may split a character: the decoder keeps its first bytes for the next piece
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        f = open(path, "rb")
    except OSError:
        return out, late, unreadable
    with f:
        # the last b"": the end of the file, where the decoder gives up what it still holds
        for piece in itertools.chain(iter(lambda: f.readline(STDOUT_LINE_CHARS), b""), [b""]):
            read += len(piece)
            for m in rx.finditer(decoder.decode(piece, final=not piece)):
                try:
                    ms = float(m.group("ms") if "ms" in rx.groupindex else m.group(1))
                except (TypeError, ValueError):  # TypeError: an optional group that took no part in the match
                    continue
                if until is not None and read > until:
                    late += 1
                elif math.isfinite(ms):
                    out.append(ms)
                else:
                    unreadable += 1
    return out, late, unreadable
