"""Traces a run captured (``trials/NN-variant/rank<R>/trace/``), analysed per variant for the run's
summary: the mean step per chip split into compute / ICI / DCN / DMA / idle (``measured``: "host ops" where
a trace had no device events and its CPU ops stood in; ``outside_*``: the device ops no step's span holds;
``*_marker_*``: the spans more than their step markers, ``marker_notes.beyond``), and the op kinds whose
device time per step moved most from the baseline to each other variant."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from perfkit.common.units import PS_PER_MS
from perfkit.errors import BadInput
from perfkit.rundata.rundir import rank_dirs
from perfkit.trace import breakdown, collectives, diff, events, marker_notes, shards, timeline

TOP_DELTAS = 8


def _traced(folder: Path) -> bool:
    return any(any(t.glob("**/*.xplane.pb")) or any(t.glob("**/*.json*")) for t in rank_trace_dirs(folder))


def rank_trace_dirs(folder: Path) -> list[Path]:
    """A trial folder's ``rank<R>/trace`` paths that exist, by rank number."""
    return [r / "trace" for r in rank_dirs(folder) if (r / "trace").exists()]


def trial_trace_dirs(run_dir: Path, trials: list[dict], variant: str) -> list[Path]:
    """The trace folders of a variant's good trials that hold any trace file."""
    return [run_dir / t["dir"] for t in trials
            if t["variant"] == variant and t["status"] == "ok" and _traced(run_dir / t["dir"])]


def untraced(run_dir: Path, trials: list[dict], variant: str) -> str:
    """Why a variant has no good trial's traces to measure, naming a trial that failed or hung and left traces
    (where it stopped is ``trace tail``'s to read)."""
    left = [t for t in trials if t["variant"] == variant and t["status"] != "ok" and _traced(run_dir / t["dir"])]
    if not left:
        return "no trace captured"
    return (f"no good trial traced: its trial {Path(left[0]['dir']).name} ({left[0]['status']}) left traces, "
            f"where it stopped: `perfkit trace tail {run_dir / left[0]['dir']}`")


def _trial_parts(parts: pd.DataFrame, folder: Path) -> pd.DataFrame:
    """A trial's span parts (``diff.span_parts``) with its folder's name as ``trial``; BadInput without a span."""
    if not (parts["by"] == "span").any():
        raise BadInput("no device ops in the trace", path=folder)
    out = parts.assign(trial=folder.name)[["trial", *diff.SPAN_PART_COLUMNS]]
    out.attrs["outside"] = parts.attrs["outside"]
    return out


def trial_parts(folder: Path) -> pd.DataFrame:
    """``diff.span_parts`` of a trial folder's traces (``rank*/trace``), with ``trial``: the attribution's units."""
    with events.notes_left_out():
        return _trial_parts(shards.parts_traces(rank_trace_dirs(folder)), folder)


def _variant(folders: list[Path]) -> tuple[dict, pd.DataFrame, dict, list[pd.DataFrame] | BadInput]:
    """Mean step parts and collective time in flight / hidden (ms) over every chip-step of the folders'
    traces, their overlap share (hidden / in flight, of the sums; None without collectives), the mean
    per-step op table, the collectives (``collectives.summarize``) and each trial's span parts (``trial_parts``,
    or why not): each trial's traces read once for all four."""
    rows, tables, sources, analysed, measured, spans, unparted = [], [], set(), [], set(), [], None
    programs: Counter[str] = Counter()  # device time (ps) in steps, per program
    for folder in folders:  # one trial at a time: its ranks' traces belong together, trials do not
        with events.notes_left_out():
            found = shards.trial_traces(rank_trace_dirs(folder))
        rows.append(found.rows.assign(trial=folder.name))  # (the first span joining markers named by its trial)
        tables.append(found.table)
        analysed.append((folder.name, found.collectives))
        sources.update(found.steps_from)
        measured.update(found.measured)
        programs.update(found.programs)
        try:
            spans.append(_trial_parts(found.parts, folder))
        except BadInput as exc:  # the attribution's to say; the breakdown stands
            unparted = unparted or exc
    outside_ops, outside_ps = timeline.outside_total([chip for r in rows for chip in r.attrs["outside"]])
    clock = [chip for r in rows for chip in r.attrs["clock"]]
    rows = pd.concat(rows)
    parts = {c.replace("_ps", "_ms"): float(rows[c].mean() / PS_PER_MS) for c in breakdown.TIMES + breakdown.COMM}
    comm = int(rows["comm_ps"].sum())
    parts["overlap"] = int(rows["hidden_ps"].sum()) / comm if comm else None
    table = pd.concat(tables).groupby(level=0).agg(category=("category", "first"), time_ps=("time_ps", "mean"),
                                                   count=("count", "mean"))
    comms = collectives.summarize(analysed)
    return ({"trials": len(folders), "chip_steps": len(rows), **parts, "steps_from": sorted(sources),
             "step_programs": sorted(programs, key=lambda m: (-programs[m], m)),
             "measured": "host ops" if "host" in measured else "device ops",
             **({"cpu_devices": True} if "cpu" in measured else {}),
             "outside_ops": outside_ops, "outside_ms": outside_ps / PS_PER_MS,
             **({"clock_ops": sum(c["ops"] for c in clock), "clock_parted_ops": sum(c["parted"] for c in clock),
                 "clock_parted_ms": sum(c["parted_ps"] for c in clock) / PS_PER_MS} if clock else {}),
             **marker_notes.beyond(rows)},
            table, comms, unparted or spans)


def summarize(run_dir: Path, trials: list[dict], variants: list[str]) -> dict | None:
    """``{"variants": {v: parts or {"error": ...}}, "op_deltas": {v: [rows vs the first variant]},
    "by": "kind"}``; None when no variant has a trace."""
    return summarize_with_parts(run_dir, trials, variants)[0]


def summarize_with_parts(run_dir: Path, trials: list[dict], variants: list[str]
                         ) -> tuple[dict | None, dict[str, list[pd.DataFrame] | BadInput]]:
    """``summarize``'s, and from the same reading of the traces each traced variant's trials' span parts
    (``trial_parts``: the attribution's units), or why it has none."""
    found = {v: trial_trace_dirs(run_dir, trials, v) for v in variants}
    if not any(found.values()):
        return None, {}
    parts, tables, comms, spans = {}, {}, {}, {}
    for v, folders in found.items():
        if not folders:
            parts[v] = {"error": untraced(run_dir, trials, v)}
            continue
        try:
            parts[v], tables[v], comms[v], spans[v] = _variant(folders)
        except BadInput as exc:
            parts[v] = comms[v] = {"error": exc.line()}
            spans[v] = exc
    base = variants[0]
    deltas = {}
    for v in variants[1:]:
        if base in tables and v in tables:
            table = diff.compare(tables[base], tables[v]).head(TOP_DELTAS)
            deltas[v] = [{"key": r.key, "category": r.category, "a_ms": r.a_ps / PS_PER_MS, "b_ms": r.b_ps / PS_PER_MS,
                          "delta_ms": r.delta_ps / PS_PER_MS} for r in table.itertuples()]
    return {"variants": parts, "op_deltas": deltas, "by": "kind", "baseline": base,
            "collectives": comms}, spans
