"""``perfkit trace breakdown | diff | attribution | collectives | tail | export``: the commands only format what
the analyses return."""

from __future__ import annotations

import gc
import json
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import click

from perfkit.cli import OneLineGroup, hold_notes, notes as _notes
from perfkit.common.digits import difference_digits, shown_difference, whole_shares
from perfkit.common.figures import plot_file
from perfkit.common.units import PS_PER_MS
from perfkit.errors import BadInput, DefinitionNote
from perfkit.trace import marker_notes

if TYPE_CHECKING:
    import pandas as pd

PS_PER_US = 1e6
# a chip of one step keeps it, as HTA keeps a one-step trace's (``timeline.layout`` notes which)
LAST_DROPPED = "dropped where there are two or more"
_STEPS_HELP = ("Regex: events whose name matches mark the steps (default: a device's own markers, a TPU's Steps line "
               "or GPU-side ProfilerSteps that span its ops, else the host's step annotations or ProfilerSteps).")
paths_argument = click.argument("paths", nargs=-1, required=True, type=click.Path())
steps_option = click.option("--steps", "step_pattern", metavar="REGEX", help=_STEPS_HELP)
window_option = click.option("--window", type=click.Choice(["step", "trace"]), default="step", show_default=True,
                             help="Spans: each step, or each device's whole trace (first to last device op: HTA's "
                                  "kernel time, with the last step as --last-step says).")
last_step_option = click.option("--last-step", type=click.Choice(["keep", "drop"]), default="keep", show_default=True,
                                help="Measure the last step (HTA with include_last_profiler_step=True), or leave out "
                                     "the ops launched in it as HTA does by default (Kineto; elsewhere: from its "
                                     "marker's start on).")
HOST_OPS = ("host ops: the trace has no device events, its CPU ops stand in for device ops (compute here is CPU "
            "time on the host; on each thread the innermost op running owns an instant, so nested ops count once)")
# (the run report's words for the same traces)
CPU_DEVICES = ("these chips are XLA's CPU devices, threads sharing the host's cores: the arrival skew is the host's "
               "scheduling, not a slow chip, so the chip that arrived last is not flagged a straggler")
# (a multi-process CPU job's collectives go between processes, through gloo or MPI)
CPU_CHIPS = ("these chips are XLA's CPU devices, threads sharing the host's cores: their ICI is the threads' exchange "
             "within a process, or processes' through gloo or MPI, not an interconnect's")
KINETO_DIFF = "device ops of no duration ({}) are neither timed nor counted here (HTA's TraceDiff counts them)"
OPS_BY_NAME = ("ops are matched by name, which XLA gives per program: where A and B compiled different programs, "
               "one name may be different ops on each side (perfkit trace attribution RUN_DIR aligns a run's two "
               "step programs by their structure, from its XLA dumps)")
LAST_STEP_ONLY = ("every device op is in the last step, which --last-step drop leaves out (HTA's default): nothing "
                  "left to measure; --last-step keep measures it")
# the table's columns, said once under it: the wait is only the exposed part of a chip's time before the last arrival
COLLECTIVE_COLUMNS = ("columns: count: instances per chip; chips: the chips that ran one; time: from its start to its "
                      "end; exposed: its part not under compute; hidden: the part under it; skew: the last chip's "
                      "arrival minus the first's; wait: the exposed wait, a chip's time in the collective before the "
                      "last chip arrived during which it ran nothing else (its part under compute is hidden); "
                      "transfer: the exposed time after the last chip arrived (exposed = wait + transfer); -: not on "
                      "two chips that share a clock")
GLOO_RANKS = ("these ranks' collectives ran on host CPUs (gloo): where the ranks share a machine, as a perfkit run's "
              "do, the arrival skew is its scheduling, not a slow rank, so the rank that arrived last is not flagged a "
              "straggler")


def _prepare() -> None:
    """What every trace command does first: the libraries of every analysis loaded, and this process's
    allocator set for big arrays."""
    # Only once a command runs (`--help` stays light). Loading makes hundreds of thousands of objects and no
    # garbage: the collector, which would walk them again and again meanwhile, is off until they are loaded,
    # and then they are set aside (``gc.freeze``), walked by no later collection here or in the worker
    # processes started after, which share these pages until something writes to them: a walk would copy
    # them (benchmarks/trace_breakdown.py times the whole command).
    enabled = gc.isenabled()
    gc.disable()
    try:
        # the analyses' libraries, kept off --help's path (see above)
        import pandas  # noqa: F401
        from perfkit.trace import shards  # noqa: F401
        from perfkit.trace.memory import reuse_freed_memory
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
    reuse_freed_memory()


def _measured(measured) -> str:
    """``host ops`` where a trace's host ops stood in for device ops, else ``device ops``; on XLA's CPU devices,
    a note saying what their chips are."""
    if "cpu" in measured:
        warnings.warn(CPU_CHIPS, DefinitionNote, stacklevel=2)
    return "host ops" if "host" in measured else "device ops"


def _load(paths, step_pattern):
    # the analyses (numpy sweeps, protobuf schemas) load only for the command that runs them
    from perfkit.trace.events import load

    return load(list(paths), step_pattern)


def _ms(frame: pd.DataFrame, columns: list[str], per: float = PS_PER_MS, digits: int = 3) -> pd.DataFrame:
    """A copy with ``columns`` (picoseconds) as text in units of ``per`` ps (milliseconds), renamed
    without ``_ps``; ``-`` where not measured (NaN)."""
    shown = f"{{:.{digits}f}}".format

    def text(value: float) -> str:
        return "-" if math.isnan(value) else shown(value)

    # (a list comprehension: Series.map's per-value call costs twice as much on a large profile's steps)
    return frame.assign(**{c: [text(v) for v in (frame[c] / per).tolist()] for c in columns}).rename(
        columns={c: c.removesuffix("_ps") for c in columns})


def text_table(frame: pd.DataFrame) -> str:
    """``frame.to_string(index=False)`` of a frame of int and str columns, the same text (a numeric
    column's header one space wider, cells right-aligned) a column at a time: pandas formats a cell at
    a time, many times slower on a large profile's step table (benchmarks/trace_formatting.py)."""
    columns = []
    for name, values in frame.items():
        numeric = values.dtype.kind in "iu"  # numpy's and pandas' nullable integers
        cells = values.astype(str).tolist() if numeric else values.tolist()
        head = f" {name}" if numeric else str(name)
        width = max(len(head), max(map(len, cells), default=0))
        columns.append([head.rjust(width)] + [c.rjust(width) for c in cells])
    return "\n".join(" ".join(row) for row in zip(*columns))


def _json_rows(frame: pd.DataFrame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


JSON_CHUNK = 50_000  # rows of a frame written at a time by _echo_json


def _cell_texts(column: pd.Series) -> list[str]:
    """Each value of a column as ``json.dumps`` writes what ``_json_rows`` reads of it: integers and
    booleans as they are, texts once per distinct value, anything else through ``to_json`` (floats: its
    10 digits)."""
    # numpy and pandas: loaded by then (the command's analysis), never for --help
    import numpy as np
    import pandas as pd

    if column.dtype == bool:
        return np.where(column.to_numpy(), "true", "false").tolist()
    if column.dtype.kind in "iu" and not column.hasnans:  # Python's ints' text: faster than numpy's or pandas'
        return list(map(str, column.to_numpy(dtype=np.dtype(column.dtype.kind + "8")).tolist()))
    if isinstance(column.dtype, pd.CategoricalDtype) or column.dtype == object:
        codes, uniques = pd.factorize(column)
        if all(isinstance(u, str) for u in uniques):
            texts = [json.dumps(u) for u in uniques] + ["null"]  # code -1: missing
            return [texts[c] for c in codes]
    return [repr(v) if type(v) is float and math.isfinite(v) else json.dumps(v)  # repr: json's text of a float
            for v in json.loads(column.to_json(orient="values"))]


def _echo_json(doc: dict, key: str, frame: pd.DataFrame) -> None:
    """``click.echo(json.dumps({**doc, key: _json_rows(frame)}, indent=1))`` (``key`` where ``doc`` has it, else
    last), the same text, with the frame's rows formatted and written a chunk at a time: json's indenting encoder
    is pure Python, and the 1.5M collective instances of a large profile took minutes and gigabytes as one
    document (benchmarks/trace_formatting.py)."""
    head = json.dumps({**doc, key: []}, indent=1)
    if frame.empty:
        click.echo(head)
        return
    fields = ",\n".join(f"   {json.dumps(str(c)).replace('%', '%%')}: %s" for c in frame.columns)
    record = "  {\n" + fields + "\n  }"  # at json.dumps' depth of a list's items under the document's key
    # a line break then one space: a key of the document itself (json.dumps escapes a break inside a text)
    at = head.index(f"\n {json.dumps(key)}: []") + len(f"\n {json.dumps(key)}: [")
    click.echo(head[:at], nl=False)
    for start in range(0, len(frame), JSON_CHUNK):
        chunk = frame.iloc[start:start + JSON_CHUNK]
        rows = zip(*(_cell_texts(chunk[c]) for c in chunk.columns))
        click.echo(("\n" if not start else ",\n") + ",\n".join(record % row for row in rows), nl=False)
    click.echo("\n ]" + head[at + len("]"):])


@click.group(cls=OneLineGroup)
def trace():
    """Trace analysis of xplane.pb (TPU, GPU, CPU) and Kineto JSON profiles."""
    hold_notes()  # (a trace's notes, and then its refusal: the refusal alone)


@trace.command()
@paths_argument
@steps_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON: rows (per step) and mean (per device).")
@click.option("--plot", type=click.Path(dir_okay=False), callback=plot_file,
              help="Write a stacked-bar plot of the mean step per chip (PNG; a suffix matplotlib writes, e.g. .svg, "
                   "that format).")
@window_option
@last_step_option
def breakdown(paths, step_pattern, as_json, plot, window, last_step):
    """Per chip and step: compute / exposed ICI / exposed DCN (where any) / local DMA wait / idle, adding
    up to the step span; and the collectives' time in flight, the part of it hidden under compute, and
    that share.

    PATHS are trace files or folders (every *.xplane.pb under a folder, else every Kineto *.json[.gz])."""
    _one_trial(paths)
    _prepare()
    # pandas and the analyses load only for the command that runs them (``_prepare``)
    import pandas as pd

    from perfkit.trace.breakdown import COLUMNS, COMM, TIMES, empty_spans, mean_per_device, plot as draw, shown_parts
    from perfkit.trace.events import is_xplane
    from perfkit.trace.shards import breakdown_traces
    from perfkit.trace.timeline import LAST_STEP_DROPPED

    rows, steps_from = breakdown_traces(list(paths), step_pattern,
                                        window + (LAST_STEP_DROPPED if last_step == "drop" else ""))
    if rows.empty and last_step == "drop" and not breakdown_traces(list(paths), step_pattern, window)[0].empty:
        raise BadInput(LAST_STEP_ONLY, path=" ".join(paths))
    if rows.empty:
        raise BadInput("no device ops in these traces" + _why_no_device_ops(paths), path=" ".join(paths))
    measured = _measured(rows.attrs.get("measured", ()))
    for note in _span_notes(rows, len(rows)) + empty_spans(rows):
        warnings.warn(note, DefinitionNote, stacklevel=2)
    means = mean_per_device(rows)
    if plot:
        draw(means, plot, title=f"step time per chip ({HOST_OPS.split(':')[0]})" if measured == "host ops" else "")
    spans = steps_from if window == "step" else ["whole trace"]
    outside, clock = rows.attrs["outside"], rows.attrs["clock"]
    if as_json:  # (the rows: a step each, thousands on a large profile)
        _echo_json({"measured": measured, "steps_from": spans, "window": window, "last_step": last_step, "rows": [],
                    "mean": _json_rows(means), "outside_steps": outside, "device_clock": clock, "notes": _notes()},
                   "rows", rows[COLUMNS])
        return
    share = lambda v: "-" if pd.isna(v) else f"{100 * v:.1f}%"  # noqa: E731
    if measured == "host ops":
        click.echo(f"measured: {HOST_OPS}")
    # (where HTA's rounding moves a Kineto trace's figures, a note says so of that trace: ``events._hta_notes``)
    kineto = any(not is_xplane(Path(f)) for f in rows.attrs["files"])
    hta_reads = kineto and measured != "host ops"  # (HTA measures a trace's GPU events: a CPU trace has none)
    # HTA's option named where HTA reads the trace; no last step to keep where there are no steps
    hta = (" (HTA's default)" if last_step == "drop" else " (HTA's include_last_profiler_step=True)") if hta_reads \
        else ""
    last = "" if steps_from == ["none"] else f"last step {LAST_DROPPED if last_step == 'drop' else 'kept'}{hta}; "
    unmarked = (rows["step"] < 0).any() and not (rows["step"] < 0).all()  # some chips without step markers
    said = ("none (no step markers: one span a chip, its first device op to its last, as --window trace)"
            if spans == ["none"] else ", ".join(spans)
            + ("; step none: a chip without step markers, one span from its first device op to its last"
               if unmarked and window == "step" else ""))
    click.echo(f"steps from: {said}; {last}times in ms{', to the ns' if kineto else ''}; "
               "comm: collectives in flight, hidden: the part of it under compute")
    if outside:
        click.echo(_outside_line(outside, measured=measured))
    if any(c["parted"] for c in clock):
        click.echo(_clock_line(clock))
    parts = shown_parts(rows)  # DCN only where a profile has cross-slice collectives
    hidden_parts = [c for c in TIMES if c != "span_ps" and c.removesuffix("_ps") not in parts]
    table = _ms(rows[COLUMNS].drop(columns=hidden_parts), [c for c in TIMES + COMM if c not in hidden_parts])
    if (rows["step"] < 0).all():  # one span a chip, no step (JSON: -1)
        table["step"] = "whole" if window == "trace" else "none"
    elif unmarked:
        table["step"] = table["step"].astype(str).where(rows["step"].to_numpy() >= 0, "none")
    table["overlap"] = rows["overlap"].map(share)
    click.echo(text_table(table))
    shares = _ms(means.drop(columns=hidden_parts), [c for c in TIMES + COMM if c not in hidden_parts])
    # the parts add up to the span (DCN, where left out, is 0): each chip's shares, to 100.0%
    percent = [whole_shares(row, 1) if sum(row) else [None] * len(parts)
               for row in means[[f"{p}_ps" for p in parts]].itertuples(index=False)]
    for i, p in enumerate(parts):
        shares[p] += ["" if row[i] is None else f" ({row[i]:.1f}%)" for row in percent]
    shares["overlap"] = means["overlap"].map(share)
    click.echo("\nmean step per chip (ms, % of the span, rounded to add up to 100%):")
    click.echo(text_table(shares))
    if plot:
        click.echo(f"\nplot: {plot}")


def _span_notes(spans: pd.DataFrame, measured: int, side: str = "") -> list[str]:
    """Where ``spans`` (rows of rank, device, step, past_marker_ps and joined_markers: breakdown rows, or
    ``diff.beyond_markers``' records) of the ``measured`` spans are more than their step markers (``timeline.spans``),
    which a profiler's step time is (xprof's of a StepTraceAnnotation): a line saying so for each way."""
    return marker_notes.notes(measured, marker_notes.beyond(spans), side)


def _why_no_device_ops(paths) -> str:
    """Where traces given hold no device ops, what they are: perfkit's own Perfetto export (``export.is_export``, a
    view of traces merged, which holds their events under categories of its own); else, where a JSON trace given was
    written beside an XSpace by JAX's profiler (``events.xspaces_beside``; the JSON holds the host's events only), a
    hint naming it, the first one perfkit reads the planes of (a file it refuses is no place to look)."""
    # readers: loaded by the commands that have read the traces
    from perfkit.trace.events import is_xplane, xspaces_beside
    from perfkit.trace.export import is_export
    from perfkit.trace.xplane import planes

    exports = [p for p in map(Path, paths) if p.is_file() and not is_xplane(p) and is_export(p)]
    if exports:
        return (f"; {'it' if len(paths) == 1 else exports[0]} is perfkit's own export (perfkit trace export "
                "--perfetto), a view to open in ui.perfetto.dev, not a trace to analyse: give the traces it merged")
    for p in map(Path, paths):
        for xspace in xspaces_beside(p) if p.is_file() else []:
            try:
                planes(xspace)
            except BadInput:
                continue
            return f"; its device ops are in the XSpace beside it, {xspace} (JAX's profiler writes both)"
    return ""


def _outside_line(outside: list[dict], side: str = "", measured: str = "device ops") -> str:
    """The ops (``measured``: device ops, or the host ops standing in for them) outside every step's span
    (``timeline.Layout.outside``), per chip, in one line."""
    chips = [f"rank {c['rank']} device {c['device']}: {c['ops']} ops, {c['op_ps'] / PS_PER_MS:.3f} ms" for c in outside]
    more = f"; and {len(chips) - 4} more chips" if len(chips) > 4 else ""
    return (f"not measured{side}, outside every step's span (--window trace measures the whole trace): "
            f"{'; '.join(chips[:4])}{more} ({measured}, their durations summed)")


def _clock_line(clock: list[dict], side: str = "") -> str:
    """Where the ops' trace and chip clocks part (``clocks.parted``), in one line."""
    from perfkit.trace.clocks import PARTED  # an analysis module: loaded by the command that has its records

    ops, parted, ps = (sum(c[k] for c in clock) for k in ("ops", "parted", "parted_ps"))
    return (f"clock{side}: times here are the trace's (host-synchronized, as xprof's trace viewer shows them); on "
            f"{parted} of {ops} ops they part by over {PARTED:.0%} from the chip's own (device_duration_ps, which "
            f"xprof's op_profile and hlo_stats count): {ps / PS_PER_MS:.3f} ms of difference in all")


@trace.command()
@click.argument("run_dir", type=click.Path())
@click.option("-n", "--top", type=click.IntRange(min=1), help="Ops and op kinds named (default 10).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (summary.json's attribution, the A/A control's too).")
def attribution(run_dir, top, as_json):
    """Where each variant's change goes: its change in mean step per chip against the baseline's, by category,
    op kind and op, with CIs over its trials (a run directory's traces; the report's section)."""
    # the attribution (analysis stage, scipy) and its report lines: only for the command that runs them
    from perfkit.analysis.attribution import run_summary
    from perfkit.report.attribution import text

    doc = run_summary(run_dir, top)
    click.echo(json.dumps({"attribution": doc, "notes": _notes()}, indent=1) if as_json else text(doc))


@trace.command()
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path(), required=False)
@click.option("--by", type=click.Choice(["kind", "op", "shape"]), default="kind", show_default=True,
              help="Key ops by opcode / kernel kind, by op name, or by kind and output shape.")
@click.option("-n", "--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to show.")
@steps_option
@window_option
@last_step_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON (every row).")
def diff(a, b, by, top, step_pattern, window, last_step, as_json):
    """Device time per chip and step of trace B against trace A, largest changes first (with --window
    trace, per chip over its whole trace: HTA's TraceDiff sums per kernel). A run directory's variants
    against its baseline: perfkit trace attribution RUN_DIR."""
    if b is None:  # (B is optional only to point a run directory to its command)
        raise BadInput("trace diff compares two traces, A and B; a run directory's variants against its baseline: "
                       "perfkit trace attribution RUN_DIR", path=a)
    _one_trial([a])
    _one_trial([b])
    _prepare()
    # pandas and the analyses load only for the command that runs them (``_prepare``)
    import pandas as pd

    from perfkit.trace.breakdown import empty_spans
    from perfkit.trace.diff import BEYOND_COLUMNS, EMPTY_COLUMNS
    from perfkit.trace.events import is_xplane, trace_files
    from perfkit.trace.names import IN_FLIGHT_MARK, IN_FLIGHT_NOTE, in_flight, readable
    from perfkit.trace.shards import NoDeviceOps, diff_traces
    from perfkit.trace.timeline import LAST_STEP_DROPPED

    try:
        table = diff_traces([a], [b], by, step_pattern, window + (LAST_STEP_DROPPED if last_step == "drop" else ""))
    except NoDeviceOps as none:
        if last_step == "drop":
            try:
                diff_traces([a], [b], by, step_pattern, window)
            except NoDeviceOps as kept:  # none with the last step kept either
                none = kept
            else:
                raise BadInput(LAST_STEP_ONLY, path=none.path) from None
        # (the refusal of the side that has none, as breakdown's: what the traces are, where it knows)
        raise BadInput(none.reason + _why_no_device_ops((none.path or "").split(", ")), path=none.path) from None
    measured = _measured(table.attrs.get("measured", ()))
    for side in ("a", "b"):
        beyond = pd.DataFrame(table.attrs[f"beyond_markers_{side}"], columns=BEYOND_COLUMNS)
        empty = pd.DataFrame(table.attrs[f"empty_spans_{side}"], columns=EMPTY_COLUMNS)
        for note in (_span_notes(beyond, table.attrs[f"spans_{side}"], f" in {side.upper()}")
                     + empty_spans(empty, f" in {side.upper()}")):
            warnings.warn(note, DefinitionNote, stacklevel=1)
    xspace_a, xspace_b = ([is_xplane(f) for f in trace_files([side])] for side in (a, b))
    if unlike := _unlike(table.attrs, xspace_a, xspace_b):
        warnings.warn(f"A and B differ: {unlike}; the deltas compare their means per chip"
                      f"{' and step' if window == 'step' else ''} all the same", DefinitionNote, stacklevel=1)
    still = [f"{table.attrs[f'no_duration_{side}']} in {side.upper()}" for side in "ab"
             if table.attrs[f"no_duration_{side}"]]
    if not all(xspace_a + xspace_b):
        if still:  # (where there are none, nothing parts from HTA's counts)
            warnings.warn(KINETO_DIFF.format(", ".join(still)), DefinitionNote, stacklevel=1)
    elif by == "op":
        warnings.warn(OPS_BY_NAME, DefinitionNote, stacklevel=1)
    if as_json:
        click.echo(json.dumps({"measured": measured, "by": by, "window": window, "last_step": last_step,
                               "spans_a": table.attrs["spans_a"],
                               "spans_b": table.attrs["spans_b"], "rows": _json_rows(table),
                               "outside_steps_a": table.attrs["outside_a"], "outside_steps_b": table.attrs["outside_b"],
                               "device_clock_a": table.attrs["clock_a"], "device_clock_b": table.attrs["clock_b"],
                               "notes": _notes()}, indent=1))
        return
    if measured == "host ops":
        click.echo(f"measured: {HOST_OPS}")
    def spans(n: int) -> str:
        return f"{n} chip{'-step' if window == 'step' else ''}{'' if n == 1 else 's'}" + (
            "" if window == "step" else ", whole traces")

    # (traces without step markers have no last step to drop)
    stepped = any(f != "none" for side in "ab" for f in table.attrs[f"steps_from_{side}"])
    dropped = f"; last step {LAST_DROPPED}" if last_step == "drop" and stepped else ""
    per = "per chip and step (means)" if window == "step" else "per chip over its whole trace"
    click.echo(f"device time (ms) and ops {per}, by {by}: A {a} ({spans(table.attrs['spans_a'])}"
               f"), B {b} ({spans(table.attrs['spans_b'])}){dropped}; delta % of the times shown (new: none in A, "
               "gone: none in B)")
    for side in ("a", "b"):
        if table.attrs[f"outside_{side}"]:
            click.echo(_outside_line(table.attrs[f"outside_{side}"], f" in {side.upper()}", measured))
        if any(c["parted"] for c in table.attrs[f"clock_{side}"]):
            click.echo(_clock_line(table.attrs[f"clock_{side}"], f" in {side.upper()}"))
    totals = table.groupby("category")[["a_ps", "b_ps", "delta_ps"]].sum()
    shown = _as_shown(table.head(top).copy())
    a_ms, b_ms = shown.attrs["a_ms"], shown.attrs["b_ms"]
    # of the times shown, signed as the delta: times that differ by a hair show alike, -0.0000 and -0.0
    shown["delta %"] = [("new" if a_ps == 0 else "-") if a == 0 else "gone" if b_ps == 0 else
                        f"{math.copysign(100 * (b / a - 1), delta):+.1f}"
                        for a, b, a_ps, b_ps, delta in zip(a_ms, b_ms, shown["a_ps"], shown["b_ps"], shown["delta_ps"])]
    for c in ("a_count", "b_count"):
        shown[c] = shown[c].map(lambda v: f"{v:.4g}")
    marked = shown["key"].map(in_flight)
    rows = readable(shown, ["key"])
    rows["key"] = [f"{k} {IN_FLIGHT_MARK}" if m else k for k, m in zip(rows["key"], marked)]
    click.echo(_ms(rows, ["a_ps", "b_ps", "delta_ps"], digits=shown.attrs["digits"]).to_string(index=False))
    if len(table) > top:
        click.echo(f"... {len(table) - top} more rows (-n, --json)")
    if marked.any():
        click.echo(IN_FLIGHT_NOTE + "the ici totals below hold it too")
    click.echo("\ntotals by category (ms):")
    # the rows' decimals, each delta the difference of the figures shown: decimals of their own read 47.205167 under
    # a table of 47.205 (no count up to six had made the delta both; the run's attribution shows microseconds too)
    totals = _as_shown(totals.reset_index(), shown.attrs["digits"])
    click.echo(_ms(totals, ["a_ps", "b_ps", "delta_ps"], digits=totals.attrs["digits"]).to_string(index=False))


def _unlike(attrs: dict, xspace_a: list[bool], xspace_b: list[bool]) -> str:
    """How trace diff's two sides differ, where their chip counts (``diff.compare``'s ``chips_a``, ``chips_b``) or
    trace formats (``xspace_*``: each file's, an XSpace or not) do: "A 1 chip, B 8 chips; A Kineto JSON, B XSpace";
    else empty."""
    def chips(n: int) -> str:
        return f"{n} chip{'' if n == 1 else 's'}"

    def formats(xspace: list[bool]) -> str:
        return " and ".join(name for name, on in (("Kineto JSON", False), ("XSpace", True)) if on in xspace)

    unlike = []
    if attrs["chips_a"] != attrs["chips_b"]:
        unlike.append(f"A {chips(attrs['chips_a'])}, B {chips(attrs['chips_b'])}")
    if formats(xspace_a) != formats(xspace_b):
        unlike.append(f"A {formats(xspace_a)}, B {formats(xspace_b)}")
    return "; ".join(unlike)


def _as_shown(rows: pd.DataFrame, digits: int | None = None) -> pd.DataFrame:
    """``rows`` whose ``delta_ps`` is the difference of ``a_ps`` and ``b_ps`` as shown in ms to ``attrs["digits"]``
    decimals (``digits``, else ``difference_digits``'; ``shown_difference``)."""
    if digits is None:
        digits = difference_digits([(a / PS_PER_MS, b / PS_PER_MS) for a, b in zip(rows["a_ps"], rows["b_ps"])])
    shown = {c: [float(f"{v / PS_PER_MS:.{digits}f}") for v in rows[c]] for c in ("a_ps", "b_ps")}  # as _ms rounds
    rows = rows.assign(delta_ps=[shown_difference(a / PS_PER_MS, b / PS_PER_MS, digits) * PS_PER_MS
                                 for a, b in zip(rows["a_ps"], rows["b_ps"])])
    rows.attrs.update(digits=digits, a_ms=shown["a_ps"], b_ms=shown["b_ps"])
    return rows


def _one_trial(paths, hangs: bool = False) -> None:
    """Refuse paths that lie in one run directory but in no one trial folder of it (the run, its ``trials`` folder,
    two trials' folders): its trials' chips never ran together, so their traces are no one run's. The folders to pass
    are named, each with its status where trials.jsonl records it: for tail (``hangs``), every trial recorded, those
    recorded hung or failed first, as tail is for hangs; for the other commands, where the paths hold traces of two
    trials or more, those trials, the ones the command would read, in order."""
    # the run's records and its trace files: read only where one is given
    from perfkit.rundata.rundir import read_trials, trial_of
    from perfkit.trace.events import trace_files

    runs = {next((q for q in (p, *p.parents) if (q / "case.yaml").is_file() and (q / "trials").is_dir()), None)
            for p in (Path(p).resolve() for p in paths)}
    if len(runs) != 1 or None in runs or trial_of(paths) is not None:
        return
    run = runs.pop()
    trials = sorted(read_trials(run), key=lambda t: (t["status"] == "ok", t["index"]))
    status = {t["dir"]: t["status"] for t in trials}
    if hangs:
        if not trials:
            return  # no trial recorded: the readers say what the folder holds
        named = [t["dir"] for t in trials]
        lead = "pass one trial's folder" + (", a failed one first" if trials[0]["status"] != "ok" else "")
    else:
        def traced(folders) -> set[str]:
            return {f"trials/{f.resolve().relative_to(run).parts[1]}" for f in trace_files(folders)
                    if f.resolve().relative_to(run).parts[0] == "trials"}

        named = sorted(traced(paths))
        if len(named) < 2:
            return  # one trial's traces (and files beside them): read as they are
        every = len(traced([run / "trials"]))
        lead = (f"these paths hold the traces of {'all ' * (len(named) == every)}{len(named)} of its "
                f"{'' if len(named) == every else f'{every} '}traced trials: pass one trial's folder")
    shown = [f"{run / d}" + (f" ({status[d]})" if d in status else "") for d in named[:3]]
    more = f" and {len(named) - 3} more" if len(named) > 3 else ""
    raise BadInput(f"a run directory holds a folder per trial, each a run of its own: {lead}: "
                   f"{', '.join(shown)}{more}; or the run to `perfkit trace attribution {run}` for its A/B attribution",
                   path=" ".join(map(str, paths)))


# what each chip's waiting_from in trace tail's table says of its wait
_WAITING_FROM = {"program": "its program's next", "own": "the one it ran after its last the time before",
                 "others": "it completed none, the others' first",
                 "ended": "none named: its trace ends after its last, its step's marker closed with no later op, so it "
                          "cannot say whether the chip waits at its program's next or left it"}


@trace.command()
@paths_argument
@click.option("-n", "k", type=click.IntRange(min=1), default=5, show_default=True, help="Last ops per chip.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: chips, last_ops, collectives and parting.")
@click.option("--hlo", "programs", multiple=True, type=click.Path(),
              help="Each rank's XLA dump folder (a folder of rank<R>/ folders, or one per rank); default: the "
                   "rank<R>/xla_dump folders beside rank<R>/trace PATHS.")
def tail(paths, k, as_json, programs):
    """The last K device ops of each chip; whose trace ends earliest and what the others' traces were in then; each
    chip's completed collectives, the one it waits at, and where the chips' collectives first part. A run's trial
    folder (or its rank folders) is read with the trial's record: one that ended ok has no chip waiting."""
    _prepare()
    # the analyses load only for the command that runs them (``_prepare``)
    from perfkit.hlo.dumps import resolve
    from perfkit.rundata.rundir import trial_of
    from perfkit.trace import parting
    from perfkit.trace.names import readable
    from perfkit.trace.shards import tail_along

    _one_trial(paths, hangs=True)
    dumps = resolve(list(programs))[0].ranks if programs else None
    # each shard's events read once for its tail and for where the chips' collectives part
    chips, last, parts = tail_along(list(paths), k, parting.chip_parts, parting.EVENT_COLUMNS)
    if chips.empty:
        raise BadInput("no device ops in these traces" + _why_no_device_ops(paths), path=" ".join(paths))
    # whether the chips hung, where the traces are a run's trial's: its record says (a healthy trial's traces end in
    # ops after its last collective, an eval or copy program's, as a hung one's may)
    trial = trial_of(paths)
    status = trial[2]["status"] if trial and trial[2] else None
    sequence, parted = parting.parting_of_shards(parts, list(paths), dumps, status)
    measured = _measured(last.attrs.get("measured", ()))
    # nothing says whether the chips hung (no trial record, or one neither ok nor hung): each wait is where it would be
    if_hung = status not in ("hung", "ok")
    ended = bool((sequence["waiting_from"] == "ended").all())  # (every chip's trace ends after its last collective)
    if as_json:
        # why no chip waits, for a script: each chip's waiting_at null says only that none does
        why = "trial ok" if status == "ok" else "traces ended" if ended else None
        # no step: null, as collectives' last_step (breakdown's rows' -1 is a step key, not said here)
        steps = last["step"].astype(object).where(last["step"] >= 0, None)
        click.echo(json.dumps({"measured": measured, "trial": trial and {"run": str(trial[0]), "dir": trial[1],
                                                                         "status": status}, "if_hung": if_hung,
                               "why_none_waits": why,
                               "chips": _json_rows(chips), "last_ops": _json_rows(last.assign(step=steps)),
                               "collectives": _json_rows(sequence), "parting": parted, "notes": _notes()}, indent=1))
        return
    if measured == "host ops":
        click.echo(f"measured: {HOST_OPS}")
    # whether the chips' collectives part first: the cause (the chip that parts, not the one whose trace ends first,
    # often another), or that none did (a healthy run's chips stop apart too); one chip has none to part from
    if len(chips) > 1:
        click.echo(f"{parting.describe(parted, sequence, status)}\n")
    chips = readable(chips, ["at_first_stop_name", "at_first_stop_kind"])
    first = chips.iloc[0]
    others = chips.iloc[1:]
    # a trial that finished (recorded ok, or every trace ends after its last collective, its step's marker closed, in
    # traces not recorded hung): its traces end apart as any run's do, no chip stopped inside an op
    finished = status == "ok" or (status != "hung" and ended)
    symptom = ("; where the traces end is a symptom, the parting above the cause" if parted is not None
               and status != "ok" else "")
    if len(others):  # (one chip: no other trace to end before)
        ends = (f"trace ends first: rank {first['rank']} device {first['device']}, "
                f"{first['before_last_ps'] / PS_PER_MS:.3f} ms before the last chip's")
        # where a trace ends, not where its chip stopped: the chip may be inside an op the profiler never wrote
        click.echo(ends if finished else f"{ends} (at its last op to end: a profiler writes an op when it ends, so "
                   f"one still running, a collective it waits in, is not in it{symptom})")
    if len(others) and not finished:
        what = others.groupby(["at_first_stop_kind", "at_first_stop_category"], observed=True).size()
        click.echo("the other traces were then in: "
                   + ", ".join(f"{kind} ({cat}) x{n}" for (kind, cat), n in what.items()))
    click.echo("\n" * bool(len(others)) + "chips, earliest trace end first (ms):")
    shown = chips.rename(columns={f"at_first_stop_{c}": f"at_first_end_{c}" for c in ("name", "kind", "category")})
    click.echo(_ms(shown, ["last_end_ps", "before_last_ps"]).to_string(index=False))
    # collectives with no step: the traces hold no step marker (a chip with none in marked traces is in their first);
    # traces without a collective say so by where their steps came from
    files_steps = last.attrs.get("steps_from", [])
    unmarked = (bool(((sequence["completed"] > 0) & sequence["last_step"].isna()).any())
                or (bool(files_steps) and all(f == "none" for f in files_steps)))
    outside = ("; step -: these traces hold no step marker" if unmarked else "; step -: outside every step's "
               "span, e.g. after the last step marker closed") * bool((last["step"] < 0).any())
    click.echo(f"\nlast {k} ops per chip (ms from the trace start{outside}):")
    shown = readable(last, ["name", "kind"])
    shown["step"] = shown["step"].astype(object).where(shown["step"] >= 0, "-")  # no step: '-', as last_step's
    click.echo(_ms(shown, ["start_ps", "end_ps", "dur_ps"]).to_string(index=False))
    if sequence["completed"].any():  # (with none, the line below says so: a table of blanks says nothing)
        steps = ("-, these traces hold no step marker" if unmarked else "after a chip's last step marker, the next"
                 + ", as a hung step's marker never closes" * (not finished))
        column = "if_hung_at" if if_hung and sequence["waiting_at"].notna().any() else "waiting_at"
        # (each waiting_from the rows show, once)
        whence = "; ".join(f"{w}: {_WAITING_FROM[w]}" for w in _WAITING_FROM if (sequence["waiting_from"] == w).any())
        at = ("where each chip would wait if they hung, which nothing here says" if column == "if_hung_at" else
              "the collective each chip waits at")
        waits = ("waiting_at, waiting_from: none, the trial ended ok per trials.jsonl" if status == "ok"
                 else f"{column}: {at}")
        click.echo(f"\ncollectives per chip (completed in the traces; last_step: {steps}; {waits}; -: none)")
        if status != "ok":  # (a line of its own: the legend fits a terminal's width twice)
            click.echo(f"waiting_from: {whence}")
        shown = readable(sequence, ["last_op", "waiting_at"]).rename(columns={"waiting_at": column})
        if shown.isna().any(axis=None):
            shown = shown.astype(object).where(shown.notna(), "-")
        click.echo(shown.to_string(index=False))


@trace.command()
@paths_argument
@steps_option
@click.option("-n", "--top", type=click.IntRange(min=1), default=20, show_default=True, help="Rows to show.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: ops, steps (stragglers) and instances.")
def collectives(paths, step_pattern, top, as_json):
    """Each collective per step: count, bytes sent per device, bandwidth, exposed and hidden time; across
    chips that share a clock, arrival skew, waiting for the last chip, and each step's straggler."""
    _one_trial(paths)
    _prepare()
    # pandas and the analyses load only for the command that runs them (``_prepare``)
    import pandas as pd

    from perfkit.trace.events import is_xplane
    from perfkit.trace.names import readable
    from perfkit.trace.shards import collectives_traces
    from perfkit.trace.straggler import SKEW_PAST_STEP, STRAGGLER_SHARE

    found, steps_from = collectives_traces(list(paths), step_pattern)
    if not found["chip_steps"]:  # (as breakdown and tail refuse it: no ops, host ops standing in neither)
        raise BadInput("no device ops in these traces" + _why_no_device_ops(paths), path=" ".join(paths))
    ops, steps = found["ops"], found["steps"]
    measured = "host ops" if "host" in found["measured"] else "device ops"
    cpu = "cpu" in found["measured"] or measured == "host ops"  # (the skew is the host's scheduling)
    if cpu and not steps.empty:
        warnings.warn(CPU_DEVICES if "cpu" in found["measured"] else GLOO_RANKS, DefinitionNote, stacklevel=1)
    if as_json:
        _echo_json({"measured": measured, "steps_from": steps_from, "ops": _json_rows(ops),
                    "steps": _json_rows(steps), "notes": _notes()}, "instances", found["instances"])
        return
    if measured == "host ops":
        click.echo(f"measured: {HOST_OPS}")
    if ops.empty:  # a result, not bad input: a trace of one chip, or of a program without any
        why = (" run on the host (gloo's spans, c10d calls); a GPU's collectives (an nccl: annotation on the host "
               "launches one) are on no device these traces hold") if measured == "host ops" else ""
        if not why and not all(is_xplane(Path(p)) for p in found["files"]):
            # a Kineto GPU trace: what a collective is there, as HTA has it
            why = (" (a GPU's collectives are NCCL's and RCCL's kernels, those whose names contain nccl or rccl; HTA "
                   "takes those matching ^nccl.*Kernel, as RCCL's ncclDevKernel_* do: other libraries' communication "
                   "kernels, DeepEP's dispatch and combine, are compute here)")
        click.echo(f"no collectives in these traces{why}")
        return
    times = ["time_ps", "exposed_ps", "hidden_ps", "skew_ps", "wait_ps", "transfer_ps"]
    # which bandwidth GB/s is: NCCL's algorithm and bus bandwidths part by a factor of 2(n-1)/n or (n-1)/n
    click.echo("collectives per step (us, means per instance and chip; bytes sent per device of n: all-reduce 2(n-1)/n "
               "of the buffer, all-gather, reduce-scatter and all-to-all (n-1)/n, broadcast and send the buffer, recv "
               "none; GB/s: those bytes over the time, nccl-tests' bus bandwidth, busbw); steps from: "
               f"{', '.join(steps_from)}")
    shown = readable(ops.head(top), ["op"])
    shown["count"] = shown["count"].map(lambda v: f"{v:g}")
    shown["kind"] = shown["kind"].replace("", "?")  # a kernel without args (queued before the profiler started)
    shown["bytes"] = shown["bytes"].map(lambda v: "?" if pd.isna(v) else f"{v:.0f}")
    shown["gbps"] = shown["gbps"].map(lambda v: "?" if pd.isna(v) else f"{v:.3g}")
    click.echo(_ms(shown.rename(columns={"gbps": "GB/s"}), times, PS_PER_US, 1).to_string(index=False))
    if len(ops) > top:
        click.echo(f"... {len(ops) - top} more rows (-n, --json)")
    click.echo(COLLECTIVE_COLUMNS)
    if steps.empty:
        click.echo("\nno collective ran on two chips that share a clock: no skew or straggler")
    for s in steps.itertuples():
        flag = " (straggler)" if s.skew_share > STRAGGLER_SHARE and not cpu and not s.apart else ""
        # on a host's CPUs the order the chips arrive in is its scheduler's: the note says so, and no chip is flagged;
        # the one last most often is named all the same, as the wait below leaves it out
        who = (f"{s.matched} collectives matched across chips; rank {s.rank} device {s.device} arrived last most often "
               f"({s.times_last} of {s.matched}, the host's scheduling: not flagged a straggler)"
               if cpu and s.times_last
               else f"{s.matched} collectives matched across chips, no chip arrived last alone" if cpu
               else f"rank {s.rank} device {s.device} arrived last at {s.times_last} of {s.matched} collectives{flag}"
               if s.times_last else f"no chip arrived last alone at its {s.matched} collectives")
        # the wait leaves out the chip last most often; with none last alone it is the mean over every chip
        waited = ("the other chips' exposed wait {} us on average" if s.times_last else
                  "every chip's exposed wait {} us on average, none left out (no chip arrived last alone)")
        apart = (f"; {s.apart} more matched by order never overlapped across chips, so are not one transfer (left "
                 "out; the chip that arrived last is not flagged a straggler)" if s.apart else "")
        past = f" ({SKEW_PAST_STEP})" if s.skew_share > 1 else ""
        click.echo(f"step {s.step}: {who}{apart}; skew {s.skew_ps / PS_PER_US:.1f} us summed, "
                   f"{100 * s.skew_share:.1f}% of the {s.span_ps / PS_PER_US:.1f} us step{past}; "
                   f"{waited.format(f'{s.wait_ps / PS_PER_US:.1f}')}, summed over the step's collectives (the table's "
                   "wait: a mean per instance over every chip, the last one's too)")


@trace.command()
@paths_argument
@click.option("--perfetto", "out", required=True, type=click.Path(dir_okay=False), help="Output JSON file.")
@steps_option
def export(paths, out, step_pattern):
    """All ranks and chips merged into one Perfetto / Chrome trace (open in ui.perfetto.dev): every event
    perfkit reads (a TPU's Tensor Core, TC Overlay, XLA TraceMe and _counters_ lines are not read)."""
    _prepare()
    # the analyses load only for the command that runs them (``_prepare``)
    from perfkit.trace.export import write_perfetto
    from perfkit.trace.xplane import SKIPPED_LINES

    frame = _load(paths, step_pattern)
    tpu = "XLA Ops" in frame["line"].cat.categories
    n = write_perfetto(frame, out)
    unread = f" (a TPU's lines {', '.join(sorted(SKIPPED_LINES))} are not read)" if tpu else ""
    click.echo(f"{n} events -> {out}{unread}")
