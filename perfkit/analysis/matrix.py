"""A matrix run's rows: one per combination of the ``matrix`` values that ran, read from its cell's summary.json
(``cells/NN/``, NN in the order of ``perfkit.rundata.case.expand_matrix``), and the same rows as matrix.csv's
frame."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from perfkit.common.comparison import trial_median
from perfkit.rundata.rundir import cell_dir
from perfkit.rundata.summary import MatrixRow


def matrix_rows(run_dir: Path, assignments: list[dict]) -> list[MatrixRow]:
    """A row per combination (``assignments``, in ``expand_matrix`` order) that has a summary: its values,
    each variant's median of trial medians (the figures the B/A ratio divides), the ratio, CI and verdict, and
    its failed-trial count."""
    rows = []
    for i, assignment in enumerate(assignments):
        path = cell_dir(run_dir, i) / "summary.json"
        if not path.exists():
            continue
        s = json.loads(path.read_text())
        c = s["comparison"]
        rows.append(MatrixRow(cell=path.parent.name, values=assignment,
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
