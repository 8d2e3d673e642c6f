"""A matrix run's report.md: its rows (``perfkit.analysis.matrix``) as a table, a link to each combination's own
report, the environment, how to run it again, and what its combinations did not verify."""

from __future__ import annotations

import json
from pathlib import Path

from perfkit.common.comparison import LEVEL_NOTE, ci_level, level_words, looks, read_once_at_95
from perfkit.common.digits import digits, ratio_text
from perfkit.report.markdown import environment_lines, reproduce_lines
from perfkit.rundata.summary import MatrixRow, MatrixSummary


def matrix_table(rows: list[MatrixRow], levels: dict[str, tuple[float, int]] | None = None) -> list[str]:
    """The rows as a table: each row's step times with the decimals it takes to divide to its ratio as shown;
    ``levels``: each cell's CI level and looks (``_levels``), given in its cell where they are not all 95% read once
    (none given: all are)."""
    def ratio(x: float | None) -> str:
        return "-" if x is None else ratio_text(x)

    levels = levels or {}
    once = all(read_once_at_95(*x) for x in levels.values())
    fields, variants = list(rows[0]["values"]), list(rows[0]["step_ms"])
    head = ["cell", *fields, *(f"{v} ms" for v in variants), "ratio", f"{'95% ' * once}CI", "verdict", "failed trials",
            "stopped"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:
        ms = list(r["step_ms"].values())
        n = digits([(ms[0], m) for m in ms[1:] if ms[0] is not None and m is not None], at_least=3)
        ci = r["ci"]
        cells = [r["cell"], *(str(r["values"][f]) for f in fields), *("-" if m is None else f"{m:.{n}f}" for m in ms),
                 ratio(r["ratio"]), "no CI" if None in ci else f"[{ratio(ci[0])}, {ratio(ci[1])}]" + (
                     "" if once else f" {level_words(*levels.get(r['cell'], (0.95, 1)))}"), r["verdict"],
                 str(r["failed"]), "yes" if r["interrupted"] else "no"]
        lines.append("| " + " | ".join(cells) + " |")
    b = variants[1] if len(variants) > 1 else variants[0]
    return lines + ["", f"`ms`: each variant's median of its trials' median step times, the figures the ratio ({b} / "
                        f"{variants[0]}) divides; its {'95% CI' if once else f'CI at its level: {LEVEL_NOTE};'} and "
                        "verdict as each combination's own report gives them."]


def _levels(run_dir: Path, cells: list[str]) -> dict[str, tuple[float, int]]:
    """Each combination's CI level and looks, as its summary.json's headline comparison holds them (the rows keep
    its interval alone)."""
    comparisons = {cell: json.loads((run_dir / "cells" / cell / "summary.json").read_text())["comparison"]
                   for cell in cells}
    return {cell: (ci_level(c), looks(c)) for cell, c in comparisons.items()}


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


def matrix_report(run_dir: Path, summary: MatrixSummary) -> str:
    """report.md of a matrix run (its ``summary``): the combinations that did not run, the table, links to each
    combination's report.md, the Environment and Reproduce sections, and the Not verified section."""
    rows, combinations = summary["matrix"], summary["combinations"]
    missing = combinations - len(rows)
    lines = [f"# perfkit run: {summary['case']} (matrix of {combinations} combinations)", ""]
    if missing:
        lines += [f"> {missing} combination(s) did not run (the run was stopped).", ""]
    lines += matrix_table(rows, _levels(run_dir, [r["cell"] for r in rows])) if rows else ["No combination finished."]
    lines += ["", *(f"- [{r['cell']}](cells/{r['cell']}/report.md)" for r in rows), ""]
    lines += ["## Environment", "", *environment_lines(summary), ""]
    lines += ["## Reproduce", "", *reproduce_lines(summary), ""]
    lines += _not_verified(run_dir, [r["cell"] for r in rows])
    return "\n".join(lines)
