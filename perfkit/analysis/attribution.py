"""Where B's change in step time goes: the change in mean device step time per chip, B against A, split
by category (compute, exposed ICI, exposed DCN, local DMA, idle), by op kind and by op, each part with a
95% CI: Welch's t over each side's trial means where both sides have two trials or more (``welch``), else a
bootstrap over the steps (``steps``).

The parts of one split add up to the total change: the categories exactly (the breakdown's parts add up
to the span); ops and kinds with idle and a ``residual`` (span less idle less the ops' exclusive time:
kernels running at once on several GPU streams, ops partly outside a step window), the ops past the top N
summed as ``other``. Mean step time adds up where medians do not, so the attribution works with means: a
trial's figure is the mean over its steps of the mean over a step's chips, a side's the mean over its trials.
The trials are the units: a run's trials differ by more than its steps do (the machine's state, the compile),
and with three a side a bootstrap over them marks about one A/A part in five at 95% (Welch's t: one in twenty;
tests/trace/test_attribution.py simulates both). With one trial on a side there is no spread of trials to
measure: the steps are resampled (within the trial; one draw of indices shared by every part, so each draw's
parts add up to its total), which the report says is the steps' noise alone.

Frames in, frames out (as HTA's analyzers): ``chip_step_parts`` turns one trial's events into a tidy frame
of its parts per chip and step, ``attribute`` two sides' stacked frames into the attribution;
``run_attribution`` does both for the variants of a run directory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats as sps

from perfkit.analysis import stats
from perfkit.common.units import PS_PER_MS
from perfkit.cost.programs import folder_costs, step_cost
from perfkit.errors import BadInput
from perfkit.hlo.diff import compare_ab
from perfkit.hlo.dumps import variant_dumps
from perfkit.hlo.fingerprint import entry_names_matched
from perfkit.hlo.parse import read_module
from perfkit.rundata import case as case_mod
from perfkit.rundata.rundir import read_trials
from perfkit.trace import breakdown, diff, runs, timeline

BYS = ("category", "kind", "op")
TOP = 10  # ops or kinds named one by one; the rest are summed as "other"
N_BOOT = 4000  # draws of the one-trial steps bootstrap: (draws, parts) arrays, fewer than the verdict's (stats.compare)
CONFIDENCE = 0.95
PART_COLUMNS = ["trial", "rank", "device", "step", "by", "key", "category", "time_ps"]
COLUMNS = ["by", "key", "category", "change", "a_ms", "b_ms", "delta_ms", "ci_lo_ms", "ci_hi_ms", "marked"]
OTHER, IDLE, RESIDUAL, TOTAL = "other", "idle", "residual", "total"
CHANGES = ("added", "removed", "changed")  # of a key on one side only, or on both


def chip_step_parts(frame: pd.DataFrame, trial: str = "", window: str = "step") -> pd.DataFrame:
    """One trial's events as its parts per (rank, device, step) span (``diff.span_parts``): a tidy frame of
    ``PART_COLUMNS``; ``attrs["outside"]``: the device ops no step's span holds, per chip
    (``timeline.Layout.outside``)."""
    laid = timeline.layout(frame, window)  # one sweep for the breakdown and both op tables
    rows = breakdown.breakdown(frame, window, laid)
    if rows.empty:
        raise BadInput("no device ops in the trace", path=", ".join(frame.attrs.get("files", [])) or None)
    out = diff.span_parts(frame, rows, window, laid)
    out.insert(0, "trial", trial)
    return out


def _units(parts: pd.DataFrame, by: str) -> tuple[pd.DataFrame, pd.Series, pd.Series]:
    """Per (trial, step): each key's time summed over chips, the chips, and the spans summed over chips."""
    spans = parts[parts["by"] == "span"].groupby(["trial", "step"])["time_ps"].agg(["sum", "size"])
    mine = parts[parts["by"] == by]
    table = mine.pivot_table(index=["trial", "step"], columns="key", values="time_ps", aggfunc="sum", fill_value=0)
    return table.reindex(spans.index, fill_value=0), spans["size"], spans["sum"]


def _columns(parts: pd.DataFrame, by: str, keys: list[str] | None) -> pd.DataFrame:
    """Per (trial, step) unit, the mean over its chips of each column the split of ``by`` shows: every
    key of ``keys`` (None: all), ``other`` (the rest), and for ops and kinds idle and ``residual``."""
    table, chips, spans = _units(parts, by)
    if by == "category":
        out = table.reindex(columns=list(breakdown.PARTS), fill_value=0)
    else:
        idle = _units(parts, "category")[0].reindex(columns=[IDLE], fill_value=0)[IDLE]
        shown = table.columns if keys is None else keys
        out = table.reindex(columns=shown, fill_value=0)
        if keys is not None:
            out[OTHER] = table.drop(columns=[k for k in keys if k in table.columns]).sum(axis=1)
        out[IDLE] = idle
    out[RESIDUAL] = spans - out.sum(axis=1)
    return out.div(chips, axis=0).astype(float)


def _per_trial(units: pd.DataFrame) -> list[np.ndarray]:
    return [g.to_numpy() for _, g in units.groupby(level="trial", sort=False)]


def _mean(trials: list[np.ndarray]) -> np.ndarray:
    return np.mean([t.mean(axis=0) for t in trials], axis=0)


def attribute(a: pd.DataFrame, b: pd.DataFrame, by: str = "category", top: int = TOP, n_boot: int = N_BOOT,
              confidence: float = CONFIDENCE, seed: int = 0) -> pd.DataFrame:
    """B's change in mean device step time per chip against A's, split ``by`` category, op kind or op
    (``a``, ``b``: ``chip_step_parts`` frames of each side's trials, stacked). One row per part
    (``COLUMNS``: times in ms, B less A; ``ci_*``: the ``confidence`` interval of the delta; ``marked``:
    it excludes 0; ``change``: ``changed``, ``added`` / ``removed`` for a key on one side only (its interval
    cut at 0: the change has that sign), or
    ``other`` / ``idle`` / ``residual``), largest |delta| first, then the ``total`` row (the parts add up
    to it). ``top``: ops or kinds named one by one; ``attrs["other_keys"]``: how many of the keys ``other``
    sums are added, removed or changed (those with any); ``attrs["interval"]``: how the CIs were had,
    ``welch`` or ``steps`` (``seed`` and ``n_boot`` for the latter's bootstrap)."""
    if by not in BYS:
        raise BadInput(f"must be one of {', '.join(BYS)}", field="--by")
    for side, frame in (("A", a), ("B", b)):
        if not (frame["by"] == "span").any():
            raise BadInput(f"side {side} has no traced step")
    present = [set(p.loc[p["by"] == by, "key"]) for p in (a, b)]
    keys, rest = None, []
    if by != "category":  # the top keys by |delta| of the point estimates; the rest summed
        every = [_columns(p, by, None) for p in (a, b)]
        full = [_mean(_per_trial(u)) for u in every]
        names = [u.columns for u in every]
        ops = sorted((set(names[0]) | set(names[1])) - {IDLE, RESIDUAL})
        delta = pd.Series({k: (full[1][names[1].get_loc(k)] if k in names[1] else 0)
                          - (full[0][names[0].get_loc(k)] if k in names[0] else 0) for k in ops}, dtype=float)
        ranked = list(delta.abs().sort_values(ascending=False, kind="stable").index)
        keys, rest = ranked[:top], ranked[top:]
    units = [_columns(p, by, keys) for p in (a, b)]
    columns = list(units[0].columns)
    trials = [_per_trial(u[columns]) for u in units]
    means = [_mean(t) for t in trials]
    # one traced step on a side in all: nothing measured its noise, a bootstrap of it has no width
    interval = ("welch" if min(map(len, trials)) >= 2 else "steps" if min(sum(map(len, side)) for side in trials) >= 2
                else "none")
    if interval == "none":
        lo = hi = np.full(len(columns) + 1, np.nan)
    elif interval == "welch":
        per_trial = [np.array([t.mean(axis=0) for t in side]) for side in trials]  # (k, parts) each
        lo, hi = stats.welch_interval(*(np.concatenate([m, m.sum(axis=1, keepdims=True)], axis=1)  # and the total
                                        for m in per_trial), confidence)
    else:
        rng = np.random.default_rng(seed)
        draws = stats.hierarchical_means(trials[1], n_boot, rng) - stats.hierarchical_means(trials[0], n_boot, rng)
        draws = np.concatenate([draws, draws.sum(axis=1, keepdims=True)], axis=1)  # the total, from the same draws
        alpha = (1 - confidence) / 2
        lo, hi = np.quantile(draws, [alpha, 1 - alpha], axis=0)
    categories = pd.concat([a, b]).loc[lambda p: p["by"] == by].groupby("key")["category"].agg(
        lambda c: c.mode().iloc[0])

    def change(key: str) -> str:
        if key in (OTHER, IDLE, RESIDUAL) and by != "category":
            return key
        if by == "category":
            return RESIDUAL if key == RESIDUAL else "changed"
        return "added" if key not in present[0] else "removed" if key not in present[1] else "changed"

    rows = pd.DataFrame({
        "by": by, "key": columns + [TOTAL],
        "category": [categories.get(k, IDLE if k == IDLE else "") for k in columns] + [""],
        "change": [change(k) for k in columns] + [TOTAL],
        "a_ms": np.append(means[0], means[0].sum()) / PS_PER_MS, "b_ms": np.append(means[1], means[1].sum()) / PS_PER_MS,
        "ci_lo_ms": lo / PS_PER_MS, "ci_hi_ms": hi / PS_PER_MS,
    })
    rows["delta_ms"] = rows["b_ms"] - rows["a_ms"]
    # a key on one side only changes with that sign for certain: its interval is cut at 0 (Welch's t about one
    # side's trials alone, a spread one, reaches past it: an all-reduce tp ran in every trial, "removed" by
    # [-10.5, +2.3] ms)
    rows.loc[rows["change"] == "added", "ci_lo_ms"] = rows["ci_lo_ms"].clip(lower=0)
    rows.loc[rows["change"] == "removed", "ci_hi_ms"] = rows["ci_hi_ms"].clip(upper=0)
    rows["marked"] = (rows["ci_lo_ms"] > 0) | (rows["ci_hi_ms"] < 0)
    parts = rows.iloc[:-1]
    parts = parts[(parts["a_ms"] != 0) | (parts["b_ms"] != 0) | (parts["key"] == RESIDUAL)]  # dcn only where any
    order = np.argsort(-parts["delta_ms"].abs().to_numpy(), kind="stable")
    out = pd.concat([parts.iloc[order], rows.iloc[-1:]], ignore_index=True)[COLUMNS]
    # what `other` sums: a change spread over many small ops reads as one large `other` without it
    other_keys = {c: n for c in CHANGES if (n := sum(change(k) == c for k in rest))}
    out.attrs.update(trials_a=len(trials[0]), trials_b=len(trials[1]), confidence=confidence, n_boot=n_boot,
                     interval=interval,
                     chip_steps_a=int((a["by"] == "span").sum()), chip_steps_b=int((b["by"] == "span").sum()),
                     other_keys=other_keys)
    return out


def chance_allows(rows: int, confidence: float = CONFIDENCE, level: float = 0.95) -> int:
    """The most rows of an A/A attribution that chance marks at ``level``: the binomial quantile of
    ``rows`` intervals each missing 0 with probability 1 - ``confidence``."""
    return int(sps.binom.ppf(level, rows, 1 - confidence)) if rows else 0


def trials_parts(folders: list[Path] | list[pd.DataFrame]) -> pd.DataFrame:
    """The span parts of trials (``runs.trial_parts`` of each trial folder, or those frames), stacked; ``attrs``:
    ``outside_ops`` and ``outside_ps``, the trials' device ops outside every step's span and their durations
    summed."""
    frames = [runs.trial_parts(f) if isinstance(f, Path) else f for f in folders]
    ops, ps = timeline.outside_total([chip for f in frames for chip in f.attrs["outside"]])
    out = pd.concat(frames, ignore_index=True)
    out.attrs = {"outside_ops": ops, "outside_ps": ps}
    return out


def run_summary(run_dir: str | Path, top: int | None = None, seed: int | None = None) -> dict:
    """``summarize`` of a run directory's variants (the A/A control too, its name as ``aa``), as
    ``perfkit trace attribution RUN_DIR`` prints it; seed: the case's."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise BadInput("no such file or folder", path=str(run_dir))
    if not (run_dir / "trials.jsonl").is_file():
        raise BadInput("not a run directory (no trials.jsonl)", path=str(run_dir))
    case = case_mod.load(run_dir / "case.yaml")
    trials = read_trials(run_dir)
    doc = summarize(run_dir, trials, [v.name for v in case.run_variants()], top=top or TOP,
                    seed=case.seed if seed is None else seed, refuse=True)
    if doc is None:
        why = "; ".join(f"{v}: " + ("traced" if runs.trial_trace_dirs(run_dir, trials, v) else
                                    runs.untraced(run_dir, trials, v)) for v in (v.name for v in case.run_variants()))
        raise BadInput(f"no traces of the baseline and another variant (a case's `capture.trace`; {why})",
                       path=str(run_dir))
    return {**doc, "aa": case.aa_name}


def run_attribution(run_dir: str | Path, top: int = TOP, seed: int | None = None) -> pd.DataFrame:
    """Every variant of a run (the A/A control too) against its baseline, split by category, kind and op:
    ``attribute``'s rows stacked with a ``variant`` column, over each side's good trials with traces, ops named as
    summary.json's (``_named_as_baseline``); ``seed``: the case's, as the run's summary draws it."""
    run_dir = Path(run_dir)
    trials = read_trials(run_dir)
    case = case_mod.load(run_dir / "case.yaml")
    seed = case.seed if seed is None else seed
    variants = [v.name for v in case.run_variants()]
    found = {v: runs.trial_trace_dirs(run_dir, trials, v) for v in variants}
    if not found[variants[0]]:
        raise BadInput(f"the baseline {variants[0]} has no good trial with traces", path=str(run_dir))
    # read as the run's summary reads them: the breakdown's step programs name each side's step program
    bd, parts = runs.summarize_with_parts(run_dir, trials, variants)
    base = _parts_of(parts[variants[0]])
    dumps, out = _dumps(run_dir), []
    for v in (v for v in variants[1:] if found[v]):
        mine = _named_as_baseline(_parts_of(parts[v]), dumps.get(variants[0]), dumps.get(v),
                                  (_traced(bd, variants[0]), _traced(bd, v)))[0]
        out += [attribute(base, mine, by, top, seed=seed).assign(variant=v) for by in BYS]
    if not out:
        raise BadInput("no variant but the baseline has a good trial with traces", path=str(run_dir))
    return pd.concat(out, ignore_index=True)[["variant", *COLUMNS]]


def _records(rows: pd.DataFrame) -> list[dict]:
    """A split's rows as summary.json's (the total's too); the ``other`` row with ``other_keys``."""
    out = [{k: (None if isinstance(v, float) and not np.isfinite(v) else v) for k, v in r.items()}
           for r in rows.drop(columns="by").to_dict("records")]
    for r in out:
        if r["change"] == OTHER:
            r["other_keys"] = rows.attrs["other_keys"]
    return out


def _same_programs(a: Path | None, b: Path | None) -> bool | None:
    """Whether two variants compiled the same programs (their XLA dumps, ``hlo-diff --ab``): ops are matched by
    name, which XLA gives per program, so a name is one op on both sides only then. None without both dumps."""
    if a is None or b is None:
        return None
    try:
        return compare_ab(a, b)["consistent"]
    except BadInput:  # (dumps that do not parse: the report's cost and rank sections say so)
        return None


def _names_matched(a: Path | None, b: Path | None, traced: tuple[tuple[str, ...], tuple[str, ...]]) -> dict[str, str]:
    """B's step-program op names as A's step program names the ops they align with
    (``fingerprint.entry_names_matched``), each side's step program chosen as its cost is (``step_cost``: with the
    programs its traced steps ran, ``traced``, and none dumped only before optimizations); none without both dumps,
    or where one does not parse or its step program was not compiled."""
    if a is None or b is None:
        return {}
    try:
        return entry_names_matched(*(read_module(step_cost(folder_costs(d), traced=t, folder=d).file)
                                     for d, t in zip((a, b), traced)))
    except (BadInput, ValueError):  # (no program in a folder: max() of none; the cost and rank sections say so)
        return {}


def _traced(breakdown: dict | None, variant: str) -> tuple[str, ...]:
    """The programs a variant's traced steps ran, most device time first, as its breakdown names them
    (``step_programs``), which its cost takes for the step program."""
    return tuple(_breakdown_of(breakdown, variant).get("step_programs") or ())


def _measured(breakdown: dict | None, variant: str) -> str:
    """What a variant's traces measured, as its breakdown says: ``device ops``, or ``host ops`` where they hold no
    device events (a torch CPU run's: its host ops stand in for the chips')."""
    return _breakdown_of(breakdown, variant).get("measured") or "device ops"


def _breakdown_of(breakdown: dict | None, variant: str) -> dict:
    return ((breakdown or {}).get("variants") or {}).get(variant) or {}


def _parts_of(given: list[pd.DataFrame] | BadInput) -> pd.DataFrame:
    """A variant's trials' span parts (``runs.summarize_with_parts``) stacked, or why it has none raised."""
    if isinstance(given, BadInput):
        raise given
    return trials_parts(given)


def _dumps(run_dir: Path) -> dict[str, Path]:
    """Each variant's first trial's XLA dumps; a variant whose ranks dumped no module after optimizations reads as
    one without dumps (its cost says why)."""
    return {v: d for v, d in variant_dumps(run_dir).items() if isinstance(d, Path)}


def _named_as_baseline(parts: pd.DataFrame, a: Path | None, b: Path | None,
                       traced: tuple[tuple[str, ...], tuple[str, ...]]
                       ) -> tuple[pd.DataFrame, bool | None, dict[str, str]]:
    """B's span parts with its ops named as A's step program names the ops they align with, where the two compiled
    other programs (``_same_programs``, ``_names_matched``: XLA numbers ops per program); whether they compiled the
    same, and the renaming (empty where they did). ``traced``: A's and B's traced step programs (``_traced``)."""
    same = _same_programs(a, b)
    renamed = _names_matched(a, b, traced) if same is False else {}
    if renamed:
        ops = parts["by"] == "op"
        parts.loc[ops, "key"] = parts.loc[ops, "key"].map(lambda k: renamed.get(k, k))
    return parts, same, renamed


def _program_places(parts: pd.DataFrame) -> dict[str, int]:
    """Per module name that several programs of a step share, how many of them its op keys place
    (``diff.PROGRAM_PLACE``)."""
    out: dict[str, int] = {}
    for key in parts.loc[parts["by"] == "op", "key"].unique():
        if found := diff.PROGRAM_PLACE.search(key):
            out[found["module"]] = max(out.get(found["module"], 0), int(found["place"]))
    return out


def summarize(run_dir: Path, trials: list[dict], variants: list[str],
              parts: dict[str, list[pd.DataFrame] | BadInput] | None = None, top: int = TOP, seed: int = 0,
              breakdown: dict | None = None, refuse: bool = False) -> dict | None:
    """summary.json's ``attribution``: per variant against the baseline, ``{trials: [a, b], chip_steps: [a,
    b], outside_ops: [a, b], outside_ms: [a, b] (device ops outside every step's span), confidence, total: <row>, category, kind, op: [<row>...], marked: {rows, marked, chance_allows}}``
    (``attribute``'s rows, the total left out of the lists; ``marked``: the parts of the three splits, idle
    once and residuals left out, whose CI excludes 0, and ``chance_allows`` of that many), or ``{error}``; None when
    the baseline or every other variant lacks traces. ``parts``: each variant's trials' span parts as the
    breakdown read them (``runs.summarize_with_parts``), or why it has none, and ``breakdown`` that breakdown (its
    step programs); None: both read here. ``refuse``: a trace or dump perfkit cannot read raises its ``BadInput``
    (a command's bad input, exit 2) rather than standing as the variant's ``error`` (a run's summary records it)."""
    found = {v: runs.trial_trace_dirs(run_dir, trials, v) for v in variants}
    if not found[variants[0]] or not any(found[v] for v in variants[1:]):
        return None
    if parts is None:
        breakdown, parts = runs.summarize_with_parts(run_dir, trials, variants)
    try:
        base = _parts_of(parts[variants[0]])
    except BadInput as exc:
        if refuse:
            raise
        return {"baseline": variants[0], "error": exc.line()}
    out, dumps = {}, _dumps(run_dir)
    for v in variants[1:]:
        if not found[v]:
            out[v] = {"error": runs.untraced(run_dir, trials, v)}
            continue
        try:
            mine, same, renamed = _named_as_baseline(_parts_of(parts[v]), dumps.get(variants[0]), dumps.get(v),
                                                     (_traced(breakdown, variants[0]), _traced(breakdown, v)))
            splits = {by: attribute(base, mine, by, top, seed=seed) for by in BYS}
        except BadInput as exc:
            if refuse:
                raise
            out[v] = {"error": exc.line()}
            continue
        first = splits["category"]
        places = [_program_places(p) for p in (base, mine)]
        placed = {m: [places[0].get(m, 0), places[1].get(m, 0)] for m in sorted(places[0].keys() | places[1].keys())}
        tested = pd.concat([rows.iloc[:-1][lambda r: (r["change"] != RESIDUAL) & ((by == "category") | (r["key"] != IDLE))]
                            for by, rows in splits.items()])
        out[v] = {"marked": {"rows": len(tested), "marked": int(tested["marked"].sum()),
                             "chance_allows": chance_allows(len(tested))},
                  "trials": [first.attrs["trials_a"], first.attrs["trials_b"]],
                  "chip_steps": [first.attrs["chip_steps_a"], first.attrs["chip_steps_b"]],
                  "outside_ops": [base.attrs["outside_ops"], mine.attrs["outside_ops"]],
                  "outside_ms": [base.attrs["outside_ps"] / PS_PER_MS, mine.attrs["outside_ps"] / PS_PER_MS],
                  "measured": [_measured(breakdown, variants[0]), _measured(breakdown, v)],
                  "same_programs": same, **({"ops_renamed": len(renamed)} if same is False else {}),
                  **({"programs_placed": placed} if placed else {}),
                  "confidence": first.attrs["confidence"], "interval": first.attrs["interval"],
                  "total": _records(first.iloc[-1:])[0],
                  **{by: _records(rows.iloc[:-1]) for by, rows in splits.items()}}
    return {"baseline": variants[0], "top": top, "variants": out}
