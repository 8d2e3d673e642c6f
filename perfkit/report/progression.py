"""``perfkit report --progression RUN...``: one table across runs, in the order given, like the per-PR
progression table of a stack of PRs: per run its commit, both variants' median step times (and their
change against the row before), the B/A ratio with CI and verdict, first step and compile time, the
output PSNR of B against A and its failed trials. Read from each run's ``summary.json``; a matrix run
gives one row per combination."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

import pandas as pd
import yaml

from perfkit.common.comparison import (LEVEL_NOTE, ci_level, compared_variant, level_words, looks, looks_hold,
                                       read_once_at_95, trial_median)
from perfkit.common.digits import digits, lone_decimals
from perfkit.common.json_figures import from_json
from perfkit.errors import BadInput
from perfkit.rundata.rundir import cell_dirs, read_summary


def load_runs(run_dirs: list[Path]) -> list[list[tuple[str, dict]]]:
    """``load_summaries`` of each run, in the order given; a run given twice, or a matrix and one of its combinations,
    is refused (its second row read as a change of +0.0% against itself)."""
    first: dict[Path, int] = {}
    runs = []
    for i, run_dir in enumerate(run_dirs, 1):
        found = _summaries(run_dir)
        for folder, _ in found:
            if (earlier := first.setdefault(folder.resolve(), i)) != i:
                raise BadInput(f"given twice (runs {earlier} and {i} of the progression)", path=str(folder))
        runs.append([(_label(folder, s), s) for folder, s in found])
    return runs


def _swept(case: str) -> tuple[str, str]:
    """A case's name and a matrix combination's ``[key=value]`` after it ("" for a case without a matrix)."""
    at = case.find("[") if case.endswith("]") else len(case)
    return case[:at], case[at:]


def _label(run_dir: Path, summary: dict) -> str:
    """A run's name in the table: its folder's; a matrix combination's, ``matrix/cells/NN [key=value]``."""
    swept = _swept(summary["case"])[1]
    if run_dir.parent.name != "cells" or not swept:
        return run_dir.name
    return f"{run_dir.parent.parent.name}/cells/{run_dir.name} {swept}"


def load_summaries(run_dir: Path) -> list[tuple[str, dict]]:
    """``(label, summary)`` of a run, or of each finished combination of a matrix run."""
    return [(_label(folder, s), s) for folder, s in _summaries(run_dir)]


def _summaries(run_dir: Path) -> list[tuple[Path, dict]]:
    """``(folder, summary)`` of a run, or of each finished combination of a matrix run."""
    summary = read_summary(run_dir)
    if summary.get("kind") != "matrix":
        return [(run_dir, _looks_held(run_dir, summary))]
    return [(cell, _looks_held(cell, read_summary(cell))) for cell in cell_dirs(run_dir)
            if (cell / "summary.json").is_file()]


def _looks_held(run_dir: Path, summary: dict) -> dict:
    """``summary``, refused where its looks are none a run gives (``looks_hold``), as ``perfkit check`` refuses
    them: a row would show [5, 3] as a level read once."""
    looks_hold({"comparison": summary.get("comparison") or {},
                **{f"comparisons[{i}]": c for i, c in enumerate(summary.get("comparisons") or [])}},
               run_dir / "summary.json", f" (`perfkit report {run_dir}` writes it again)")
    return summary


def _fields(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """A case's fields as dotted names (``variants.b.env.IMPL``) and values; a list is one value, an empty mapping
    none (``env: {}`` is no setting: a run directory's case.yaml once wrote ``matrix: {}``, and now leaves it out)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _fields(value, f"{prefix}{key}.")
    else:
        yield prefix[:-1], node


def _case_fields(summary: dict) -> dict | None:
    """The run's resolved case (summary.json's ``reproduce.case_yaml``) as its dotted fields, its name left out
    (one case's rows share it); None where the summary holds no case."""
    text = (summary.get("reproduce") or {}).get("case_yaml")
    if text is None:
        return None
    return {k: v for k, v in _fields(yaml.safe_load(text) or {}) if k != "name"}


def _changed(before: dict | None, now: dict | None) -> list[str] | None:
    if before is None or now is None:
        return None
    missing = object()
    return sorted(k for k in before.keys() | now.keys() if before.get(k, missing) != now.get(k, missing))


def _value(variant: dict, name: str) -> float | None:
    return (variant.get("values") or {}).get(name, {}).get("median")


def progression_frame(runs: list[list[tuple[str, dict]]]) -> pd.DataFrame:
    """One row per run (``load_summaries`` of each, in order): each variant's step time as its median of
    per-trial medians (the figures the ratio divides); ``a_vs_previous`` / ``b_vs_previous``: that over
    the last earlier row's that ran the same case's same variant, as A or B (NaN where none did); ``changed``: the
    case's fields that differ from the last earlier row of the same case (None where there is none); ``ci_level``:
    the level ``ci_lo``..``ci_hi`` is held at, each look's where ``looks`` > 1 (the adaptive rounds)."""
    rows = []
    cases: dict[str, dict | None] = {}  # each case's fields in its last row so far
    for label, s in (pair for group in runs for pair in group):
        a = s["baseline"]
        b = compared_variant(s)
        va, vb, c = s["variants"][a], s["variants"][b], s["comparison"]
        src = (s.get("env") or {}).get("source") or {}
        q = s.get("quality") or {}
        psnr = q.get("psnr_db")
        fields = _case_fields(s)
        changed = _changed(cases[s["case"]], fields) if s["case"] in cases else None
        cases[s["case"]] = fields
        rows.append({"run": label, "case": s["case"], "commit": (src.get("commit") or "")[:12] or None,
                     "dirty": src.get("dirty"), "changed": changed, "a": a, "b": b,
                     "a_step_ms": trial_median(va), "b_step_ms": trial_median(vb),
                     "ratio": c["ratio"], "ci_lo": c["ci"][0], "ci_hi": c["ci"][1],
                     "ci_level": ci_level(c), "looks": looks(c), "verdict": c["verdict"],
                     "a_first_ms": va["first_step_ms"]["median"], "b_first_ms": vb["first_step_ms"]["median"],
                     "a_compile_s": _value(va, "compile_s"), "b_compile_s": _value(vb, "compile_s"),
                     "psnr_db": from_json(psnr), "bit_identical": q.get("bit_identical"),
                     "failed": len(s["trials"]["failed"]), "interrupted": bool(s.get("interrupted"))})
    last: dict[tuple[str, str], float] = {}  # each case's variant's step time in its last row so far, either side
    for row in rows:  # against the last row above that ran the same case's same variant (a reordered case's A as B)
        for side in ("a", "b"):
            before = last.get((row["case"], row[side]))
            row[f"{side}_vs_previous"] = math.nan if not before else _float(row[f"{side}_step_ms"]) / before
        last.update({(row["case"], row[side]): _float(row[f"{side}_step_ms"]) for side in ("a", "b")})
    return pd.DataFrame(rows)


def _float(x) -> float:
    return math.nan if x is None else float(x)


def _num(x, fmt: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _step(x, before: str | None, name: str | None, decimals: int = 2) -> str:
    """A step time as shown, and its change against ``before`` (the last row's of its case and variant, as shown
    there): the change of the figures shown, as a reader divides them."""
    shown = _num(x, f".{decimals}f")
    change = "" if before in (None, "-") or shown == "-" or not float(before) else \
        f" ({float(shown) / float(before) - 1:+.1%})"
    return f"{name + ' ' if name else ''}{shown}{change}"


def markdown(frame: pd.DataFrame) -> list[str]:
    """The table as GitHub Markdown: variant names in the headers when every run has the same two; each interval's
    level in its cell where the rows' are not all 95% read once (the adaptive rounds hold each look's higher)."""
    same = frame.a.nunique() == 1 and frame.b.nunique() == 1
    once = all(map(read_once_at_95, frame.ci_level, frame.looks))
    a, b = (frame.a.iloc[0], frame.b.iloc[0]) if same else ("A", "B")
    compile_cols = frame[["a_compile_s", "b_compile_s"]].notna().any().any()
    # a matrix's combinations are one case: their rows' names carry the values
    case_col = frame.case.map(lambda c: _swept(c)[0]).nunique() > 1
    changed_col = any(frame.changed.map(bool))
    head = ["run", *(["case"] if case_col else []), "commit", *(["case changed"] if changed_col else []),
            f"{a} step (ms)", f"{b} step (ms)", f"{b}/{a} [{'95% ' * once}CI]", "verdict",
            f"first step {a} / {b} (ms)", *([f"compile {a} / {b} (s)"] if compile_cols else []),
            f"PSNR {b} vs {a} (dB)", "failed trials"]
    words = 2 + case_col + changed_col
    lines = ["| " + " | ".join(head) + " |",
             "|" + " --- |" * words + " ---: |" * 3 + " --- |" + " ---: |" * (len(head) - words - 4)]
    shown: dict[tuple[str, str], str] = {}  # each case's variant's step time as its last row shows it
    changes = False  # whether a cell shows a change (a footnote says what it is)
    for r in frame.itertuples():
        commit = "-" if pd.isna(r.commit) else f"`{r.commit}`" + (" (dirty)" if r.dirty is True else "")
        ratio = "-" if r.ratio is None or math.isnan(r.ratio) else \
            f"{r.ratio:.3f} [{_num(r.ci_lo, '.3f')}, {_num(r.ci_hi, '.3f')}]" + (
                "" if once or _num(r.ci_lo) == "-" else f" {level_words(r.ci_level, r.looks)}")
        psnr = "inf (bit-identical)" if r.bit_identical else "inf" if r.psnr_db == math.inf else _num(r.psnr_db)
        steps = (r.a_step_ms, r.b_step_ms, r.ratio)
        known = not any(x is None or math.isnan(x) for x in steps)
        # the step times shown divide to the ratio shown; without a ratio, each shows 4 significant digits
        decimals = digits([steps[:2]]) if known else lone_decimals(list(steps[:2]))
        # a stopped run's figures are of fewer trials than its plan's: said beside its name
        changed = "-" if r.changed is None else ", ".join(f"`{k}`" for k in r.changed) or "none"
        step_cells = [_step(x, shown.get((r.case, v)), None if same else v, decimals)
                      for x, v in ((r.a_step_ms, r.a), (r.b_step_ms, r.b))]
        changes = changes or any(cell.endswith("%)") for cell in step_cells)
        cells = [f"`{r.run}`" + (" (stopped)" if r.interrupted else ""),
                 *([f"`{_swept(r.case)[0]}`"] if case_col else []), commit, *([changed] if changed_col else []),
                 *step_cells, ratio, r.verdict,
                 f"{_num(r.a_first_ms, '.1f')} / {_num(r.b_first_ms, '.1f')}",
                 *([f"{_num(r.a_compile_s)} / {_num(r.b_compile_s)}"] if compile_cols else []), psnr, str(r.failed)]
        lines.append("| " + " | ".join(cells) + " |")
        for x, v in ((r.a_step_ms, r.a), (r.b_step_ms, r.b)):
            shown[(r.case, v)] = _num(x, f".{decimals}f")
    lines += ["", "Step times are each variant's median of per-trial medians (timed synced steps), the figures "
              f"{b}/{a} divides; " + ("in parentheses, the change of the figure shown against the last row above of "
                                      "the same case and variant; " if changes else "")
              + ("in brackets, the ratio's 95% CI" if once
                 else f"in brackets, the ratio's CI at its level: {LEVEL_NOTE}")
              + ("; (stopped): a run stopped before its plan finished, of fewer trials"
                 if frame["interrupted"].any() else "")
              + ("; case changed: the fields of the run's case.yaml that differ from the last row above of the same "
                 "case" if changed_col else "") + "."]
    return lines
