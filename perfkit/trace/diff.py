"""Two traces side by side: device time per step by op kind, op, or kind and output shape, with deltas.

Device time is exclusive (a ``while`` does not count its body twice), summed over a trace's measured
(device, step) spans and divided by their number: the time one chip spends per step in that key. GPU
kernels never nest: an op on a GPU stream counts its whole duration (CUPTI's records of back-to-back
kernels on one stream overlap by a microsecond or two, which nesting would take off the first), as
HTA's TraceDiff counts it.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd

from perfkit.errors import BadInput, DefinitionNote
from perfkit.trace import breakdown, clocks, timeline
from perfkit.trace.classify import CATEGORIES

KEYS = ("kind", "op", "shape")
SPAN_PART_COLUMNS = ["rank", "device", "step", "by", "key", "category", "time_ps"]
BEYOND_COLUMNS = ["rank", "device", "step", "past_marker_ps", "joined_markers"]  # of ``beyond_markers``' records
EMPTY_COLUMNS = ["rank", "device", "step", "span_ps"]  # of the records of the spans of 0 ns (``breakdown.empty_spans``)


# grouping columns of each key, and how a group's values read as one label; an op's ``program``: where several
# programs share its module's name, which of them (``_programs``), as XLA numbers ops per program
_GROUPS = {"kind": ["kind"], "op": ["hlo_op", "name", "program"], "shape": ["kind", "shape"]}
_READS = {"kind": ("kind",), "op": ("hlo_op", "name", "hlo_module", "program_id"), "shape": ("kind", "shape")}
EVENT_COLUMNS = {by: tuple(dict.fromkeys(timeline.COLUMNS + clocks.COLUMNS + _READS[by])) for by in KEYS}  # it reads
PROGRAM_PLACE = re.compile(r" \((?P<module>[^()]+) #(?P<place>\d+)\)$")  # an op key's program, as ``_label`` adds it


def _grouping(by: str, frame: pd.DataFrame) -> list[str]:
    """The grouping columns of ``by`` that ``frame`` has: an op's ``program`` only where ``_programs`` gave one."""
    return [c for c in _GROUPS[by] if c in frame.columns]


def _label(by: str, values: tuple) -> str:
    if by == "op":  # the HLO instruction name, or the kernel / event name when there is none; its program's place
        name = str(values[0]) if isinstance(values[0], str) and values[0] else str(values[1])
        return f"{name} ({values[2]})" if len(values) > 2 and isinstance(values[2], str) and values[2] else name
    return " ".join(str(v) for v in values if isinstance(v, str) and v)


def _programs(ops: pd.DataFrame) -> pd.Categorical | None:
    """Per op, ``<module> #<k>`` where its span ran several programs of its module's name (8 layers each jitted as
    ``jit_f``, each with its ``ynn_fusion``): the k-th of them to start in the span, a place a changed build of
    the same program keeps where its id (a TPU program's fingerprint) would not; else ``""``. None where no two
    programs share a name: the usual trace, its ops keyed by name alone."""
    ids, programs = pd.factorize(ops["program_id"].array)  # -1: unknown
    if len(programs) < 2:
        return None
    codes = ops["hlo_module"].cat.codes.to_numpy().astype(np.int64)
    known = (codes >= 0) & (ids >= 0)
    # (span, module) of each (span, module, program) run: a module twice is one a span ran several programs of
    # (one name on two chips or ranks with ids of their own, each one program, is no such module)
    n_modules, n_programs = len(ops["hlo_module"].cat.categories), len(programs)
    runs = pd.unique((ops["span"].to_numpy()[known].astype(np.int64) * n_modules + codes[known]) * n_programs
                     + ids[known]) // n_programs
    shared = known & np.isin(codes, runs[pd.Series(runs).duplicated().to_numpy()] % n_modules)
    if not shared.any():
        return None
    mine = pd.DataFrame({"span": ops["span"].to_numpy()[shared], "module": codes[shared], "program": ids[shared],
                         "start": ops["start_ps"].to_numpy()[shared]})
    grouped = mine.groupby(["span", "module", "program"])
    first = grouped["start"].min()
    place = first.groupby(level=["span", "module"]).rank(method="first").astype(np.int64).to_numpy()
    names = ops["hlo_module"].cat.categories.to_numpy()[first.index.get_level_values("module")]
    labels = pd.Categorical([""] + [f"{n} #{k}" for n, k in zip(names, place)])  # "" sorts first: code 0
    out = np.zeros(len(ops), np.int64)
    out[shared] = labels.codes[1:][grouped.ngroup().to_numpy()]
    return pd.Categorical.from_codes(out, labels.categories)


def _op_times(events: pd.DataFrame, by: str, window: str, layout: timeline.Layout | None) -> timeline.Measured:
    """The measured device ops with the key columns of ``by`` and ``time_ps``: exclusive device time (a GPU
    stream's kernel its whole duration)."""
    if by not in KEYS:
        raise BadInput(f"must be one of {', '.join(KEYS)}", field="--by")
    spans, ops = timeline.measured(events, window, [*_READS[by], "category", "line", "start_ps"], layout)
    if by == "op" and (programs := _programs(ops)) is not None:
        ops = ops.assign(program=programs)
    if spans.empty:
        return timeline.Measured(spans, ops.assign(time_ps=np.zeros(0, np.int64)))
    ops = ops.assign(time_ps=np.where(timeline.on_gpu_stream(ops["line"]), ops["end_ps"] - ops["start_ps"],
                                      ops["self_ps"]))
    return timeline.Measured(spans, ops)


def beyond_markers(spans: pd.DataFrame) -> list[dict]:
    """The ``spans`` (``timeline.spans``) that are more than their step markers, running past them or joining
    markers of one step number, as records of ``BEYOND_COLUMNS`` (the chips' order)."""
    beyond = spans[(spans["past_marker_ps"] > 0) | (spans["joined_markers"] > 0)]
    return beyond[BEYOND_COLUMNS].to_dict("records")


def op_time(events: pd.DataFrame, by: str = "kind", window: str = "step", layout: timeline.Layout | None = None
            ) -> tuple[pd.DataFrame, int]:
    """Exclusive device time summed per (key columns of ``by``, category): ``sum`` (ps) and ``size`` (ops),
    ``attrs["outside"]`` the device ops no span holds (``timeline.Layout.outside``), ``attrs["clock"]`` where
    their trace and chip clocks part (``timeline.Layout.clock``), ``attrs["beyond_markers"]`` the spans more than
    their step markers (``beyond_markers``), ``attrs["empty_spans"]`` those of 0 ns (records of ``EMPTY_COLUMNS``),
    ``attrs["chips"]`` the chips measured and ``attrs["no_duration"]`` the device ops of no duration in the spans
    measured (in no sum);
    and the number of (device, step) spans measured. Sums of disjoint sets of chips add up (the shards of a profile,
    ``perfkit.trace.shards``). ``layout``: ``timeline.layout(events, window)`` where the caller has it already."""
    laid = timeline.layout(events, window) if layout is None else layout
    spans, ops = _op_times(events, by, window, laid)
    if spans.empty:
        groups = pd.DataFrame(columns=[*_GROUPS[by], "category", "sum", "size"])
    else:
        groups = (ops.groupby(_grouping(by, ops) + ["category"], observed=True, dropna=False)["time_ps"]
                  .agg(["sum", "size"]).reset_index())
    groups.attrs["chips"] = len(spans[["rank", "device"]].drop_duplicates())
    groups.attrs["no_duration"] = laid.no_duration
    groups.attrs["outside"] = laid.outside
    groups.attrs["clock"] = laid.clock
    groups.attrs["beyond_markers"] = beyond_markers(spans)
    empty = spans[spans["end_ps"] == spans["start_ps"]]
    groups.attrs["empty_spans"] = empty[EMPTY_COLUMNS[:-1]].assign(span_ps=0).to_dict("records")
    return groups, len(spans)


def per_span(events: pd.DataFrame, by: str = "kind", window: str = "step", layout: timeline.Layout | None = None
             ) -> pd.DataFrame:
    """Exclusive device time per (rank, device, step) span and key: ``rank, device, step, key, category,
    time_ps`` (ps), one row per key a span ran (keys labelled as ``per_key`` labels them)."""
    spans, ops = _op_times(events, by, window, layout)
    columns = ["rank", "device", "step", "key", "category", "time_ps"]
    if spans.empty:
        return pd.DataFrame(columns=columns)
    groups = (ops.groupby(["span", *_grouping(by, ops), "category"], observed=True, dropna=False)["time_ps"].sum()
              .reset_index())
    where = spans.iloc[groups["span"].to_numpy()]
    return pd.DataFrame({
        "rank": where["rank"].to_numpy(), "device": where["device"].to_numpy(), "step": where["step"].to_numpy(),
        "key": [_label(by, v) for v in zip(*(groups[c] for c in _grouping(by, groups)))],
        "category": groups["category"].astype(str).to_numpy(), "time_ps": groups["time_ps"].to_numpy(np.int64),
    })[columns]


def span_parts(events: pd.DataFrame, rows: pd.DataFrame, window: str = "step",
               layout: timeline.Layout | None = None) -> pd.DataFrame:
    """The parts of each (rank, device, step) span that ``rows`` (``breakdown.breakdown`` of ``events``) measured,
    a tidy frame of ``SPAN_PART_COLUMNS`` where ``by`` is ``span`` (the span's length), ``category`` (the
    breakdown's parts, adding up to the span), ``kind`` or ``op`` (``per_span``); ``attrs["outside"]``: ``rows``'.
    ``layout`` as ``op_time`` takes it."""
    laid = timeline.layout(events, window) if layout is None else layout
    parts = [rows.assign(by="span", key="span", category="", time_ps=rows["span_ps"])]
    parts += [rows.assign(by="category", key=p, category=p, time_ps=rows[f"{p}_ps"]) for p in breakdown.PARTS]
    if not rows.empty:  # (no spans: no op rows to add)
        parts += [per_span(events, by, window, laid).assign(by=by) for by in ("kind", "op")]
    out = pd.concat([p[SPAN_PART_COLUMNS] for p in parts], ignore_index=True)
    out["time_ps"] = out["time_ps"].astype(np.int64)
    out.attrs["outside"] = rows.attrs.get("outside", [])
    return out


def per_key(groups: pd.DataFrame, spans: int, by: str = "kind") -> pd.DataFrame:
    """``op_time``'s sums (of one trace or of several sets of chips, stacked) per key: ``category`` (of the
    most time, a tie to the first of compute / ici / dcn / dma), ``time_ps`` and ``count`` per chip and
    step; ``attrs["spans"]``. By shape, where no op has one (a Kineto trace's kernels carry none): the kinds,
    and a note that says so."""
    keys = [_label(by, v) for v in zip(*(groups[c] for c in _grouping(by, groups)))]
    if by == "shape" and len(groups) and not any(isinstance(s, str) and s for s in groups["shape"]):
        warnings.warn("no op in these traces has a shape (a Kineto trace's kernels carry none): keyed by kind "
                      "alone", DefinitionNote, stacklevel=2)
    if by == "op" and any(PROGRAM_PLACE.search(k) for k in keys):
        warnings.warn("ops of programs that share a name are keyed by the program's place among them in a step: "
                      "`(jit_f #2)` the second `jit_f` to start", DefinitionNote, stacklevel=2)
    sums = groups.assign(key=keys).groupby(["key", "category"], observed=True)[["sum", "size"]].sum().reset_index()
    order = pd.Categorical(sums["category"].astype(str), categories=list(CATEGORIES), ordered=True)
    main = sums.assign(order=order).sort_values(["key", "sum", "order"], ascending=[True, False, True], kind="stable")
    table = main.groupby("key").agg(category=("category", "first"), time_ps=("sum", "sum"), count=("size", "sum"))
    table["category"] = table["category"].astype(str)
    table["time_ps"] = table["time_ps"].astype(float) / spans
    table["count"] = table["count"] / spans
    table.attrs["spans"] = spans
    return table


def per_step(events: pd.DataFrame, by: str = "kind", window: str = "step", layout: timeline.Layout | None = None
             ) -> pd.DataFrame:
    """One row per key: ``category``, ``time_ps`` (exclusive device time per chip and step), ``count``
    (ops per chip and step); ``attrs["spans"]``: how many (device, step) spans were averaged.
    ``window="trace"``: one span per device over its whole trace; ``layout`` as ``op_time`` takes it."""
    groups, spans = op_time(events, by, window, layout)
    if not spans:
        raise BadInput("no device ops in the trace", path=", ".join(events.attrs.get("files", [])) or None)
    table = per_key(groups, spans, by)
    table.attrs["measured"] = events.attrs.get("measured", ["device"])
    table.attrs["outside"] = groups.attrs["outside"]
    table.attrs["clock"] = groups.attrs["clock"]
    table.attrs["beyond_markers"] = groups.attrs["beyond_markers"]
    table.attrs["empty_spans"] = groups.attrs["empty_spans"]
    table.attrs["chips"], table.attrs["no_duration"] = groups.attrs["chips"], groups.attrs["no_duration"]
    return table


def compare(ta: pd.DataFrame, tb: pd.DataFrame) -> pd.DataFrame:
    """Two ``per_step`` tables side by side: per key ``a_ps``, ``b_ps``, ``delta_ps`` (b - a), ``a_count``,
    ``b_count``, ``category``; the largest changes first; ``attrs``: spans_a, spans_b, measured (both sides'
    ``events.load`` ``measured``: "host" where a side's host ops stood in for device ops), outside_a,
    outside_b (each side's device ops outside every span, ``timeline.Layout.outside``), clock_a, clock_b
    (where each side's ops' trace and chip clocks part, ``clocks.parted``), beyond_markers_a, beyond_markers_b
    (each side's spans more than their step markers, ``beyond_markers``), empty_spans_a, empty_spans_b (each
    side's spans of 0 ns), steps_from_a, steps_from_b (where each side's steps came from, "none" without markers,
    where known), chips_a, chips_b (each side's chips measured), no_duration_a, no_duration_b (each side's device ops
    of no duration, timed and counted by no key)."""
    out = ta.add_suffix("_a").join(tb.add_suffix("_b"), how="outer")
    result = pd.DataFrame({
        "key": out.index,
        "category": out["category_a"].fillna(out["category_b"]).to_numpy(),
        "a_ps": out["time_ps_a"].fillna(0).to_numpy(),
        "b_ps": out["time_ps_b"].fillna(0).to_numpy(),
        "a_count": out["count_a"].fillna(0).to_numpy(),
        "b_count": out["count_b"].fillna(0).to_numpy(),
    })
    result["delta_ps"] = result["b_ps"] - result["a_ps"]
    result = result.iloc[np.argsort(-result["delta_ps"].abs().to_numpy(), kind="stable")].reset_index(drop=True)
    result.attrs.update(spans_a=ta.attrs["spans"], spans_b=tb.attrs["spans"],
                        measured=sorted({*ta.attrs.get("measured", ["device"]), *tb.attrs.get("measured", ["device"])}),
                        outside_a=ta.attrs.get("outside", []), outside_b=tb.attrs.get("outside", []),
                        clock_a=ta.attrs.get("clock", []), clock_b=tb.attrs.get("clock", []),
                        beyond_markers_a=ta.attrs.get("beyond_markers", []),
                        beyond_markers_b=tb.attrs.get("beyond_markers", []),
                        empty_spans_a=ta.attrs.get("empty_spans", []), empty_spans_b=tb.attrs.get("empty_spans", []),
                        steps_from_a=ta.attrs.get("steps_from", []), steps_from_b=tb.attrs.get("steps_from", []),
                        chips_a=ta.attrs.get("chips", 0), chips_b=tb.attrs.get("chips", 0),
                        no_duration_a=ta.attrs.get("no_duration", 0), no_duration_b=tb.attrs.get("no_duration", 0))
    return result


def diff(a: pd.DataFrame, b: pd.DataFrame, by: str = "kind", window: str = "step") -> pd.DataFrame:
    """``compare`` of two events frames keyed ``by`` over ``window`` spans."""
    return compare(per_step(a, by, window), per_step(b, by, window))
