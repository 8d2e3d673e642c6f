"""``perfkit report --progression RUN...``: one table across runs, in the order given, like the per-PR
progression table of a stack of PRs: per run its commit, both variants' median step times (and their
change against the row before), the B/A ratio with CI and verdict, first step and compile time, the
output PSNR of B against A and its failed trials. Read from each run's ``summary.json``; a matrix run
gives one row per combination."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from perfkit.common.comparison import compared_variant, trial_median
from perfkit.common.digits import digits
from perfkit.common.json_figures import from_json
from perfkit.rundata.rundir import cell_dirs, read_summary


def load_summaries(run_dir: Path) -> list[tuple[str, dict]]:
    """``(label, summary)`` of a run, or of each finished combination of a matrix run."""
    summary = read_summary(run_dir)
    if summary.get("kind") != "matrix":
        return [(run_dir.name, summary)]

    out = []
    for cell in cell_dirs(run_dir):
        if (cell / "summary.json").is_file():
            s = read_summary(cell)
            swept = s["case"][s["case"].find("["):] if s["case"].endswith("]") else ""  # its name[key=value]
            out.append((f"{run_dir.name}/cells/{cell.name}{' ' + swept if swept else ''}", s))
    return out


def _value(variant: dict, name: str) -> float | None:
    return (variant.get("values") or {}).get(name, {}).get("median")


def progression_frame(runs: list[list[tuple[str, dict]]]) -> pd.DataFrame:
    """One row per run (``load_summaries`` of each, in order): each variant's step time as its median of
    per-trial medians (the figures the ratio divides); ``a_vs_previous`` / ``b_vs_previous``: that over
    the last earlier row's that ran the same case's same variant (NaN where none did)."""
    rows = []
    for label, s in (pair for group in runs for pair in group):
        a = s["baseline"]
        b = compared_variant(s)
        va, vb, c = s["variants"][a], s["variants"][b], s["comparison"]
        src = (s.get("env") or {}).get("source") or {}
        q = s.get("quality") or {}
        psnr = q.get("psnr_db")
        rows.append({"run": label, "case": s["case"], "commit": (src.get("commit") or "")[:12] or None,
                     "dirty": src.get("dirty"), "a": a, "b": b,
                     "a_step_ms": trial_median(va), "b_step_ms": trial_median(vb),
                     "ratio": c["ratio"], "ci_lo": c["ci"][0], "ci_hi": c["ci"][1], "verdict": c["verdict"],
                     "a_first_ms": va["first_step_ms"]["median"], "b_first_ms": vb["first_step_ms"]["median"],
                     "a_compile_s": _value(va, "compile_s"), "b_compile_s": _value(vb, "compile_s"),
                     "psnr_db": from_json(psnr), "bit_identical": q.get("bit_identical"),
                     "failed": len(s["trials"]["failed"]), "interrupted": bool(s.get("interrupted"))})
    frame = pd.DataFrame(rows)
    for side in ("a", "b"):  # against the last row above that ran the same case's same variant
        steps = frame[f"{side}_step_ms"].astype(float)
        frame[f"{side}_vs_previous"] = steps / steps.groupby([frame["case"], frame[side]]).shift(1)
    return frame


def _num(x, fmt: str = ".2f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _step(x, previous, name: str | None, decimals: int = 2) -> str:
    change = "" if previous is None or math.isnan(previous) else f" ({previous - 1:+.1%})"
    return f"{name + ' ' if name else ''}{_num(x, f'.{decimals}f')}{change}"


def markdown(frame: pd.DataFrame) -> list[str]:
    """The table as GitHub Markdown: variant names in the headers when every run has the same two."""
    same = frame.a.nunique() == 1 and frame.b.nunique() == 1
    a, b = (frame.a.iloc[0], frame.b.iloc[0]) if same else ("A", "B")
    compile_cols = frame[["a_compile_s", "b_compile_s"]].notna().any().any()
    head = ["run", "commit", f"{a} step (ms)", f"{b} step (ms)", f"{b}/{a} [95% CI]", "verdict",
            f"first step {a} / {b} (ms)", *([f"compile {a} / {b} (s)"] if compile_cols else []),
            f"PSNR {b} vs {a} (dB)", "failed trials"]
    lines = ["| " + " | ".join(head) + " |", "| --- | --- |" + " ---: |" * 3 + " --- |" + " ---: |" * (len(head) - 6)]
    for r in frame.itertuples():
        commit = "-" if pd.isna(r.commit) else f"`{r.commit}`" + (" (dirty)" if r.dirty is True else "")
        ratio = "-" if r.ratio is None or math.isnan(r.ratio) else \
            f"{r.ratio:.3f} [{_num(r.ci_lo, '.3f')}, {_num(r.ci_hi, '.3f')}]"
        psnr = "inf (bit-identical)" if r.bit_identical else "inf" if r.psnr_db == math.inf else _num(r.psnr_db)
        steps = (r.a_step_ms, r.b_step_ms, r.ratio)
        known = not any(x is None or math.isnan(x) for x in steps)
        decimals = digits([steps[:2]]) if known else 2  # the step times shown divide to the ratio shown
        # a stopped run's figures are of fewer trials than its plan's: said beside its name
        cells = [f"`{r.run}`" + (" (stopped)" if r.interrupted else ""), commit, _step(r.a_step_ms, r.a_vs_previous, None if same else r.a, decimals),
                 _step(r.b_step_ms, r.b_vs_previous, None if same else r.b, decimals), ratio, r.verdict,
                 f"{_num(r.a_first_ms, '.1f')} / {_num(r.b_first_ms, '.1f')}",
                 *([f"{_num(r.a_compile_s)} / {_num(r.b_compile_s)}"] if compile_cols else []), psnr, str(r.failed)]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Step times are each variant's median of per-trial medians (timed synced steps), the figures "
              f"{b}/{a} divides; in parentheses, the change against the last row above of the same case and variant; "
              "in brackets, the ratio's 95% CI" + ("; (stopped): a run stopped before its plan finished, of fewer "
                                                   "trials" if frame["interrupted"].any() else "") + "."]
    return lines
