"""Read what a rank reported: the metrics protocol's JSONL, or a regex over stdout as a fallback.

A step event is synced (the program waited for the device every step) unless it says
``"kind": "natural"``: then ``ms`` is the mean step time of a pass dispatched asynchronously with one
wait at the end (``"steps"`` says how many steps it averaged). A synced step with ``"traced": true`` ran
under a profiler: it is kept but never timed, since profiling slows it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path


@dataclasses.dataclass
class RankMetrics:
    """A rank's report: synced step times, natural step times, other values, progress marks."""

    steps_ms: list[float]  # one per step, each waited for (synced)
    values: dict[str, list[float]]
    marks: list[dict]
    natural_ms: list[float] = dataclasses.field(default_factory=list)  # mean step of an unsynced pass
    traced: list[int] = dataclasses.field(default_factory=list)  # positions in steps_ms run under a profiler

    @property
    def last_mark(self) -> str | None:
        return self.marks[-1]["name"] if self.marks else None


def read_metrics(path: Path) -> RankMetrics:
    """Parse a metrics.jsonl; a torn last line (a rank killed mid-write) is skipped, not fatal."""
    steps, natural, values, marks, traced = [], [], {}, [], []
    try:
        lines = path.read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        kind = ev.get("event")
        if kind == "step" and isinstance(ev.get("ms"), (int, float)):
            if ev.get("kind") == "natural":
                natural.append(float(ev["ms"]))
                continue
            if ev.get("traced"):
                traced.append(len(steps))
            steps.append(float(ev["ms"]))
        elif kind == "value" and "name" in ev and isinstance(ev.get("value"), (int, float)):
            values.setdefault(str(ev["name"]), []).append(float(ev["value"]))
        elif kind == "mark":
            marks.append(ev)
    return RankMetrics(steps, values, marks, natural, traced)


def is_timed(trial: dict, i: int) -> bool:
    """Whether synced step ``i`` of a trial record counts: trial ok, after warmup, not profiled."""
    return trial["status"] == "ok" and i >= trial["warmup"] and i not in trial.get("traced", ())


def steps_from_stdout(path: Path, pattern: str) -> list[float]:
    """Step times from a program nobody can change: ``pattern``'s first group (or named group ``ms``;
    a case's ``step_regex`` has one, checked at load). A capture that is empty or no number is skipped."""
    rx = re.compile(pattern)
    out = []
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for m in rx.finditer(text):
        try:
            out.append(float(m.group("ms") if "ms" in rx.groupindex else m.group(1)))
        except (TypeError, ValueError):  # TypeError: an optional group that took no part in the match
            continue
    return out
