"""A matrix run's rows (``perfkit.analysis.matrix``), table (``perfkit.report.matrix``) and files
(``perfkit.run.matrix``): the step times beside each ratio are the figures it divides (each variant's median of
trial medians, not the median of every step pooled), shown with the decimals it takes to divide to it."""

import json
import re

from perfkit.analysis.matrix import matrix_rows
from perfkit.report.matrix import matrix_table
from perfkit.run import matrix
from perfkit.rundata import rundir


def cell(run_dir, i, a_trials, b_trials, pooled, ratio, interrupted=False, not_verified=()):
    summary = {"variants": {"tp": {"step_ms": {"median": pooled[0]}, "trial_medians_ms": a_trials},
                            "sp": {"step_ms": {"median": pooled[1]}, "trial_medians_ms": b_trials}},
               "comparison": {"ratio": ratio, "ci": [ratio - 0.01, ratio + 0.01], "verdict": "slower"},
               "trials": {"failed": []}, "interrupted": interrupted, "not_verified": list(not_verified)}
    (run_dir / "cells" / f"{i:02d}").mkdir(parents=True)
    (run_dir / "cells" / f"{i:02d}" / "summary.json").write_text(json.dumps(summary))


def test_rows_hold_the_medians_the_ratio_divides_and_the_table_shows_them_dividing(tmp_path):
    # trial medians: tp 1.0, 1.2, 1.4 -> 1.2; sp 1.5, 1.9, 2.0 -> 1.9; pooled steps' medians differ (1.25, 1.8)
    cell(tmp_path, 0, [1.0, 1.2, 1.4], [1.5, 1.9, 2.0], (1.25, 1.8), 1.9 / 1.2)
    cell(tmp_path, 1, [1.0004], [1.0015], (1.0, 1.0), 1.0015 / 1.0004)
    rows = matrix_rows(tmp_path, [{"model.steps": 8}, {"model.steps": 16}, {"model.steps": 32}])
    assert [(r["cell"], r["values"], r["step_ms"]) for r in rows] == [
        ("00", {"model.steps": 8}, {"tp": 1.2, "sp": 1.9}), ("01", {"model.steps": 16}, {"tp": 1.0004, "sp": 1.0015})]
    table = matrix_table(rows)
    assert table[0] == "| cell | model.steps | tp ms | sp ms | ratio | 95% CI | verdict | failed trials | stopped |"
    for line in table[2:4]:
        tp, sp, ratio = (float(x) for x in re.split(r"\s*\|\s*", line)[3:6])
        assert f"{sp / tp:.3f}" == f"{ratio:.3f}", line  # 1.000 and 1.002, at 3 decimals, would divide to 1.002
    assert table[2] == "| 00 | 8 | 1.200 | 1.900 | 1.583 | [1.573, 1.593] | slower | 0 | no |"
    assert table[3].startswith("| 01 | 16 | 1.0004 | 1.0015 | 1.001 |")


def test_a_stop_in_the_last_cell_is_an_interrupted_matrix_and_says_where_to_resume(tmp_path):
    """Every cell has a summary, the last one stopped: the matrix was interrupted (it said not: none missing), and
    the resume command names the matrix's folder (a cell's own folder has no run.json to resume from)."""
    (tmp_path / "case.yaml").write_text(json.dumps({"name": "m", "command": ["python", "x.py"], "matrix": {
        "seed": [1, 2]}, "variants": {"tp": {}, "sp": {}}}))
    (tmp_path / "run.json").write_text("{}")
    cell(tmp_path, 0, [1.0], [1.5, 1.6], (1.0, 1.55), 1.55)
    cell(tmp_path, 1, [1.0], [1.5], (1.0, 1.5), 1.5, interrupted=True)
    assert matrix.finish(tmp_path)  # failed: stopped
    top = json.loads((tmp_path / "summary.json").read_text())
    assert (top["missing"], top["interrupted"]) == (0, True)
    assert rundir.resume_command(tmp_path / "cells" / "01") == f"perfkit run --resume {tmp_path}"
    (tmp_path / "hosts").mkdir()
    assert rundir.resume_command(tmp_path) == f"perfkit run --resume {tmp_path} --host-index <this host, 0..>"


def test_the_matrix_report_ends_with_what_its_combinations_did_not_verify(tmp_path):
    """A newcomer's: a matrix's report.md had no Not verified section, which every run's report ends with. Each item
    with the combinations it holds for."""
    (tmp_path / "case.yaml").write_text(json.dumps({"name": "m", "command": ["python", "x.py"], "matrix": {
        "seed": [1, 2]}, "variants": {"tp": {}, "sp": {}}}))
    (tmp_path / "run.json").write_text("{}")
    cell(tmp_path, 0, [1.0], [1.5], (1.0, 1.5), 1.5, not_verified=["one seed only (seed 1)", "output quality"])
    cell(tmp_path, 1, [1.0], [1.5], (1.0, 1.5), 1.5, not_verified=["one seed only (seed 2)", "output quality"])
    matrix.finish(tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert report.endswith("## Not verified\n\n- one seed only (seed 1) (combination 00)\n- output quality (every "
                           "combination)\n- one seed only (seed 2) (combination 01)\n")


def test_the_matrix_report_says_where_it_ran_and_how_to_run_it_again(tmp_path):
    """A newcomer's: a matrix's report.md had no Environment or Reproduce section, which every run's report has; the
    command reruns the whole matrix (the matrix's own case.yaml, from the folder it was started in)."""
    (tmp_path / "case.yaml").write_text(json.dumps({"name": "m", "command": ["python", "x.py"], "matrix": {
        "seed": [1, 2]}, "variants": {"tp": {}, "sp": {}}}))
    (tmp_path / "run.json").write_text(json.dumps({"cwd": str(tmp_path.parent), "hosts": 1}))
    (tmp_path / "env.json").write_text(json.dumps({"source": {"git": False}, "host": "box", "cpus": 2,
                                                   "python": "3.11.7", "platform": "Linux",
                                                   "packages": {"perfkit": "0.1.0", "torch": None}}))
    cell(tmp_path, 0, [1.0], [1.5], (1.0, 1.5), 1.5)
    matrix.finish(tmp_path)
    top = json.loads((tmp_path / "summary.json").read_text())
    assert top["env"]["host"] == "box" and top["reproduce"]["command"] == f"perfkit run {tmp_path.name}/case.yaml"
    report = (tmp_path / "report.md").read_text()
    environment = report[report.index("## Environment\n"):report.index("## Reproduce\n")]
    assert environment == ("## Environment\n\n- source: not a git checkout\n- devices: not probed (a command or served "
                           "case: perfkit leaves its devices to the program it runs)\n- host: `box`, 2 CPUs, Python "
                           "3.11.7, Linux\n- packages: perfkit 0.1.0\n\n")
    reproduce = report[report.index("## Reproduce\n"):]
    assert reproduce.startswith(f"## Reproduce\n\n```sh\ncd {tmp_path.parent}\nperfkit run {tmp_path.name}/case.yaml\n```")


def test_resuming_a_combination_names_the_matrix_to_resume(tmp_path):
    """A newcomer's: `perfkit run --resume RUN/cells/01` said "not a perfkit run directory (no run.json)" of a
    folder that is one (a combination's); and a multi-host matrix's combinations said to resume themselves (the
    matrix's run.json is each host's, in hosts/host<I>/), which refused so too."""
    from click.testing import CliRunner

    from perfkit.cli import cli

    (tmp_path / "case.yaml").write_text(json.dumps({"name": "m", "command": ["python", "x.py"], "matrix": {
        "seed": [1, 2]}, "variants": {"tp": {}, "sp": {}}}))
    (tmp_path / "hosts" / "host0").mkdir(parents=True)
    (tmp_path / "hosts" / "host0" / "run.json").write_text("{}")
    cell(tmp_path, 1, [1.0], [1.5], (1.0, 1.5), 1.5, interrupted=True)
    combination = tmp_path / "cells" / "01"
    (combination / "case.yaml").write_text("name: m[seed=2]\n")
    (combination / "hosts" / "host0").mkdir(parents=True)
    assert rundir.resume_command(combination) == f"perfkit run --resume {tmp_path} --host-index <this host, 0..>"
    res = CliRunner().invoke(cli, ["run", "--resume", str(combination), "--host-index", "0"])
    assert res.exit_code == 2 and res.output == (f"perfkit: {combination}: a combination of a matrix run: `perfkit "
                                                 f"run --resume {tmp_path} --host-index <this host, 0..>` runs the "
                                                 "rest of the matrix\n")
