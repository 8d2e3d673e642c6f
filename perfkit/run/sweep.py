"""Matrix cases: one row of results per combination of the ``matrix`` values.

Each combination runs as a complete run directory of its own, ``cells/NN/`` (NN in the order of
``perfkit.rundata.case.expand_matrix``); the top of the run directory gets ``matrix.csv`` (one row per
combination), ``summary.json`` (a ``perfkit.rundata.summary.MatrixSummary``: ``kind: "matrix"``, a row per
combination, ``combinations``, ``missing``, ``trials.failed``: the cells with failed trials) and a
``report.md`` with the table, links to each combination's report and what the combinations did not verify.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from perfkit.common.digits import digits, ratio_text
from perfkit.report.line import trial_median
from perfkit.rundata import case as case_mod, rundir
from perfkit.rundata.summary import MatrixRow, MatrixSummary, MatrixTrials


def matrix_rows(run_dir: Path, assignments: list[dict]) -> list[MatrixRow]:
    """A row per combination (``assignments``, in ``expand_matrix`` order) that has a summary: its values,
    each variant's median of trial medians (the figures the B/A ratio divides), the ratio, CI and verdict, and
    its failed-trial count."""
    rows = []
    for i, assignment in enumerate(assignments):
        path = run_dir / "cells" / f"{i:02d}" / "summary.json"
        if not path.exists():
            continue
        s = json.loads(path.read_text())
        c = s["comparison"]
        rows.append(MatrixRow(cell=f"{i:02d}", values=assignment,
                              step_ms={v: trial_median(fig) for v, fig in s["variants"].items()},
                              ratio=c["ratio"], ci=c["ci"] or [None, None], verdict=c["verdict"],
                              failed=len(s["trials"]["failed"]),
                              interrupted=bool(s.get("interrupted"))))
    return rows


def matrix_frame(rows: list[MatrixRow]) -> pd.DataFrame:
    """matrix.csv: the rows with their values, step times and CI as columns of their own."""
    return pd.DataFrame([{"cell": r["cell"], **r["values"], **{f"{v}_ms": ms for v, ms in r["step_ms"].items()},
                          "ratio": r["ratio"], "ci_lo": r["ci"][0], "ci_hi": r["ci"][1], "verdict": r["verdict"],
                          "failed": r["failed"],
                          "interrupted": r["interrupted"]} for r in rows])


def _markdown(rows: list[MatrixRow]) -> list[str]:
    """The rows as a table: each row's step times with the decimals it takes to divide to its ratio as shown."""
    def ratio(x: float | None) -> str:
        return "-" if x is None else ratio_text(x)

    fields, variants = list(rows[0]["values"]), list(rows[0]["step_ms"])
    head = ["cell", *fields, *(f"{v} ms" for v in variants), "ratio", "95% CI", "verdict", "failed trials", "stopped"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        ms = list(r["step_ms"].values())
        n = digits([(ms[0], m) for m in ms[1:] if ms[0] is not None and m is not None], at_least=3)
        ci = r["ci"]
        cells = [r["cell"], *(str(r["values"][f]) for f in fields), *("-" if m is None else f"{m:.{n}f}" for m in ms),
                 ratio(r["ratio"]), "no CI" if None in ci else f"[{ratio(ci[0])}, {ratio(ci[1])}]", r["verdict"],
                 str(r["failed"]), "yes" if r["interrupted"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    b = variants[1] if len(variants) > 1 else variants[0]
    return lines + ["", f"`ms`: each variant's median of its trials' median step times, the figures the ratio ({b} / "
                        f"{variants[0]}) divides; its 95% CI and verdict as each combination's own report gives them."]


def _not_verified(run_dir: Path, cells: list[str]) -> list[str]:
    """The matrix report's last section, as every report's: what its combinations did not verify, each item with
    the combinations it holds for."""
    held: dict[str, list[str]] = {}
    for cell in cells:
        for item in json.loads((run_dir / "cells" / cell / "summary.json").read_text()).get("not_verified", []):
            held.setdefault(item, []).append(cell)
    lines = ["## Not verified", ""] if held else []
    for item, where in held.items():
        named = "combination" + "s" * (len(where) > 1) + " " + ", ".join(where)
        lines.append(f"- {item} ({'every combination' if len(where) == len(cells) else named})")
    return lines + [""] * bool(held)


def finish(run_dir: Path) -> bool:
    """Write the matrix's summary.json, matrix.csv and report.md; returns whether any combination
    failed, stopped early, or never ran."""
    case = case_mod.load(run_dir / "case.yaml")
    assignments = [assignment for assignment, _ in case_mod.expand_matrix(case)]
    rows = matrix_rows(run_dir, assignments)
    frame = matrix_frame(rows)
    total = len(assignments)
    missing = total - len(rows)
    failed = bool(missing or any(r["failed"] or r["interrupted"] for r in rows))
    frame.to_csv(run_dir / "matrix.csv", index=False)
    summary = MatrixSummary(case=case.name, kind="matrix", run_dir=str(run_dir), matrix=rows, combinations=total,
                            missing=missing, interrupted=bool(missing) or any(r["interrupted"] for r in rows),
                            trials=MatrixTrials(failed=[r["cell"] for r in rows if r["failed"]]))
    rundir.write_summary(run_dir, summary)
    lines = [f"# perfkit run: {case.name} (matrix of {total} combinations)", ""]
    if missing:
        lines += [f"> {missing} combination(s) did not run (the run was stopped).", ""]
    lines += _markdown(rows) if rows else ["No combination finished."]
    lines += ["", *(f"- [{r['cell']}](cells/{r['cell']}/report.md)" for r in rows), ""]
    lines += _not_verified(run_dir, [r["cell"] for r in rows])
    (run_dir / "report.md").write_text("\n".join(lines))
    print(f"{case.name}: {len(frame)} of {total} combinations, {sum(r['failed'] > 0 for r in rows)} with "
          f"failed trials; report {run_dir / 'report.md'}", flush=True)
    return failed
