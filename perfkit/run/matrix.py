"""Matrix cases: one row of results per combination of the ``matrix`` values.

Each combination runs as a complete run directory of its own, ``cells/NN/`` (NN in the order of
``perfkit.rundata.case.expand_matrix``); once they have run, the top of the run directory gets ``matrix.csv``
(one row per combination: ``perfkit.analysis.matrix``), ``summary.json`` (a
``perfkit.rundata.summary.MatrixSummary``: ``kind: "matrix"``, a row per combination, ``combinations``,
``missing``, ``trials.failed``: the cells with failed trials, ``env`` and ``reproduce`` as a run's) and a
``report.md`` (``perfkit.report.matrix``) with the table, links to each combination's report, the environment,
how to run the matrix again and what the combinations did not verify.
"""

from __future__ import annotations

from pathlib import Path

from perfkit.analysis.matrix import matrix_frame, matrix_rows
from perfkit.analysis.summary import reproduce, run_env
from perfkit.report.matrix import matrix_report
from perfkit.rundata import case as case_mod, rundir
from perfkit.rundata.summary import MatrixSummary, MatrixTrials


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
    env, kept = run_env(run_dir)
    summary = MatrixSummary(case=case.name, kind="matrix", run_dir=str(run_dir), matrix=rows, combinations=total,
                            missing=missing, interrupted=bool(missing) or any(r["interrupted"] for r in rows),
                            trials=MatrixTrials(failed=[r["cell"] for r in rows if r["failed"]]),
                            env=kept, reproduce=reproduce(run_dir, env))
    rundir.write_summary(run_dir, summary)
    (run_dir / "report.md").write_text(matrix_report(run_dir, summary))
    print(f"{case.name}: {len(frame)} of {total} combinations, {sum(r['failed'] > 0 for r in rows)} with "
          f"failed trials; report {run_dir / 'report.md'}", flush=True)
    return failed
