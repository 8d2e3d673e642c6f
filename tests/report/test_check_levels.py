"""`perfkit check` of a run of the adaptive rounds, whose B/A interval is each look's (``look_confidence``), held
higher so that all its looks' hold together at 95%: the gate said "95% CI" of it (a newcomer reproduced the demo's
interval exactly at 97.39%). And the gate's other contracts around such figures: no baseline from a run whose A/A
control called a change; the units its --json rows carry, as documented."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from run_fixtures import make_run  # noqa: F401 (a fixture)
from test_check_aa import aa_run

from perfkit.cli import cli

ROOT = Path(__file__).resolve().parents[2]


def check(*args, env=None):
    return CliRunner().invoke(cli, ["check", *map(str, args)], env=env)


def test_a_rounds_run_s_timing_rows_say_their_interval_s_level(make_run, tmp_path):
    """Rounds from 3 to 5 trials a side read the verdict 3 times, each look's interval at 97.39% (the demo's figure,
    which the newcomer's own interval matched). The fixture's 3 rounds run all 3 looks' plan through."""
    run = make_run("rounds", case_extra={"repeats": {"min": 3, "max": 5}})
    c = json.loads((run / "summary.json").read_text())["comparisons"][0]
    assert c["looks_at"] == [3, 5] and round(c["look_confidence"], 4) == 0.9739
    base = tmp_path / "base.json"
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    summary_md = tmp_path / "step_summary.md"
    res = check(run, "--baseline", base, env={"GITHUB_STEP_SUMMARY": str(summary_md)})
    assert res.exit_code == 0, res.output
    timing = [line for line in res.output.splitlines() if " timing " in line]
    assert len(timing) == 2 and all("; 97.4% CI (3 looks) [" in line and "95%" not in line for line in timing), timing
    text = summary_md.read_text().splitlines()
    assert "| | check | figure | this run | CI | baseline | required | note |" in text
    lo, hi = c["ci"]
    (row,) = [line for line in text if "| b/a step_ms |" in line]
    assert f"| [{lo:.3f}, {hi:.3f}] 97.4% (3 looks) |" in row, row
    assert any(line.startswith("CI: the run's at its level: 95% where the verdict was read once; (n looks)")
               for line in text), text


def test_a_run_read_once_keeps_its_95_percent(make_run, tmp_path):
    """Read once at 95% (no rounds): the text and the step summary's header and rows as they were."""
    run = make_run("once")
    base = tmp_path / "base.json"
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    summary_md = tmp_path / "step_summary.md"
    res = check(run, "--baseline", base, env={"GITHUB_STEP_SUMMARY": str(summary_md)})
    assert all("; 95% CI [" in line for line in res.output.splitlines() if " timing " in line)
    text = summary_md.read_text()
    assert "| this run | 95% CI |" in text and "looks" not in text and "CI: the run's" not in text


def test_no_baseline_is_written_from_a_run_whose_aa_control_called_a_change(make_run, tmp_path):
    """The control ran 1.5x the baseline's steps: called slower, and no timing verdict of the run is to be trusted.
    Before, --update-baseline wrote its ratios as the baseline all the same (exit 0). Refused as an incomplete run is:
    one line, exit 2, nothing written; its summary.json is refused in place of a baseline alike."""
    run = aa_run(make_run, "drifted", 1.5)
    base = tmp_path / "base.json"
    res = check(run, "--baseline", base, "--update-baseline")
    assert res.exit_code == 2, res.output
    assert not base.exists()
    (line,) = res.output.strip().splitlines()
    assert line.startswith(f"perfkit: {run}: the A/A control (a-aa) was called slower than the baseline itself (1.500"
                           ), line
    assert line.endswith("no timing verdict of the run is to be trusted, nor a baseline written from it (run again, "
                         "on a quieter machine)"), line
    res = check(aa_run(make_run, "steady", 1.0), "--baseline", run / "summary.json")
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert "a run's summary.json, but the A/A control (a-aa) was called slower" in res.output, res.output


def _documented_units() -> set[str]:
    """The units docs/architecture.md gives check --json's rows: ``unit (count|ratio|...; ...)``."""
    text = " ".join((ROOT / "docs" / "architecture.md").read_text().split())
    (units,) = re.findall(r"`perfkit check RUN --baseline F --json`: .*? unit \(([^;)]*)", text)
    return {u.strip().strip('"') if u.strip() == '""' else u.strip() for u in units.split("|")}


def test_every_unit_the_rows_carry_is_documented(make_run, tmp_path):
    """The A/A control's row, the taps' and a baseline's outputs missing from the run carry unit "", which the
    documented list lacked."""
    run = aa_run(make_run, "steady", 1.0)
    base = tmp_path / "base.json"
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    rows = json.loads(check(run, "--baseline", base, "--json").output)["rows"]
    units = {r["unit"] for r in rows}
    assert "" in units and units <= _documented_units(), (units, _documented_units())


def _cell(run_dir, i: int, ratio: float, looked: dict):
    """A combination's summary.json, as much as a matrix's report reads: its headline comparison ``looked`` at."""
    summary = {"variants": {"tp": {"step_ms": {"median": 1.0}, "trial_medians_ms": [1.0]},
                            "sp": {"step_ms": {"median": ratio}, "trial_medians_ms": [ratio]}},
               "comparison": {"ratio": ratio, "ci": [ratio - 0.01, ratio + 0.01], "verdict": "slower", **looked},
               "trials": {"failed": []}, "interrupted": False, "not_verified": []}
    (run_dir / "cells" / f"{i:02d}").mkdir(parents=True)
    (run_dir / "cells" / f"{i:02d}" / "summary.json").write_text(json.dumps(summary))


def test_a_matrix_s_cells_of_the_rounds_say_their_interval_s_level(tmp_path):
    """A matrix of two combinations, one read once at 95% and one over the rounds 3 to 5 (3 looks at 97.39%): its
    table's header said "95% CI" of both."""
    from perfkit.run import matrix

    (tmp_path / "case.yaml").write_text(json.dumps({"name": "m", "command": ["python", "x.py"], "matrix": {
        "seed": [1, 2]}, "variants": {"tp": {}, "sp": {}}}))
    (tmp_path / "run.json").write_text("{}")
    _cell(tmp_path, 0, 1.5, {"confidence": 0.95, "look_confidence": 0.95, "looks_at": None})
    _cell(tmp_path, 1, 1.25, {"confidence": 0.95, "look_confidence": 0.9739, "looks_at": [3, 5]})
    matrix.finish(tmp_path)
    lines = (tmp_path / "report.md").read_text().splitlines()
    head = next(line for line in lines if line.startswith("| cell |"))
    assert "| ratio | CI | verdict |" in head, head
    assert any(line.startswith("| 00 | 1 |") and "| [1.490, 1.510] 95% |" in line for line in lines), lines
    assert any(line.startswith("| 01 | 2 |") and "| [1.240, 1.260] 97.4% (3 looks) |" in line for line in lines)
    assert any("its CI at its level: 95% where the verdict was read once; (n looks)" in line for line in lines)


def test_a_baseline_records_its_ci_s_level_and_the_gate_names_it(make_run, tmp_path):
    """A baseline written from a rounds run holds each look's interval, at 97.39% (the demo's level, its interval
    reproduced by hand at it), and the gate called it "the baseline's own 95% CI" where it reached past the limit:
    the file recorded no level. --update-baseline records the run's (``look_confidence``, ``looks_at``), and every
    line that names the baseline's CI gives it. At ratio_tolerance 0.01 the fixture's b/a 1.2 sets a limit of
    1.212, which its CI's high end passes."""
    run = make_run("rounds", case_extra={"repeats": {"min": 3, "max": 5}})
    own = {c["metric"]: c for c in json.loads((run / "summary.json").read_text())["comparisons"]}
    base = tmp_path / "base.json"
    res = check(run, "--baseline", base, "--update-baseline", "--ratio-tolerance", "0.01")
    assert res.exit_code == 0, res.output
    lo, hi = own["step_ms"]["ci"]
    assert res.stderr.splitlines()[0].startswith(f"perfkit: note: b/a step_ms: its 97.4% CI (3 looks) [{lo:.3f}, "
                                                 f"{hi:.3f}] reaches past the limit 1.212"), res.stderr
    written = json.loads(base.read_text())["comparisons"]
    assert [(c["look_confidence"], c["looks_at"]) for c in written] == [
        (own[c["metric"]]["look_confidence"], [3, 5]) for c in written]
    assert round(written[0]["look_confidence"], 4) == 0.9739
    said = f"the baseline's own 97.4% CI (3 looks) [{lo:.3f}, {hi:.3f}] reaches past the limit 1.212"
    summary_md = tmp_path / "step_summary.md"
    res = check(run, "--baseline", base, "--ratio-tolerance", "0.01", env={"GITHUB_STEP_SUMMARY": str(summary_md)})
    (row,) = [line for line in res.output.splitlines() if " b/a step_ms: " in line]
    assert said in row and "95%" not in row, row
    assert res.output.splitlines()[-1].endswith("could not tell: their baseline's CI reaches past their limit (write "
                                                "the baseline from more repeats)"), res.output
    assert said in summary_md.read_text()
    rows = json.loads(check(run, "--baseline", base, "--ratio-tolerance", "0.01", "--json").output)["rows"]
    assert said in next(r["note"] for r in rows if r["subject"] == "b/a step_ms")


def test_a_baseline_that_records_no_level_is_said_to(make_run, tmp_path):
    """A baseline written before its level was kept: its CI's level is not known (a rounds run's was higher than
    95%), and the gate says so rather than call it 95%."""
    run = make_run("rounds", case_extra={"repeats": {"min": 3, "max": 5}})
    base = tmp_path / "base.json"
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    data = json.loads(base.read_text())
    for c in data["comparisons"]:
        del c["look_confidence"], c["looks_at"]
    base.write_text(json.dumps(data))
    lo, hi = data["comparisons"][0]["ci"]
    res = check(run, "--baseline", base, "--ratio-tolerance", "0.01")
    (row,) = [line for line in res.output.splitlines() if " b/a step_ms: " in line]
    assert f"the baseline's own CI (level not recorded) [{lo:.3f}, {hi:.3f}] reaches past the limit 1.212" in row, row


@pytest.mark.parametrize("which, key, value, said", [
    ("baseline", "look_confidence", 5,
     "comparisons[0].look_confidence: 5 is greater than or equal to the maximum of 1"),
    ("baseline", "look_confidence", 0, "comparisons[0].look_confidence: 0 is less than or equal to the minimum of 0"),
    ("baseline", "look_confidence", 1, "comparisons[0].look_confidence: 1 is greater than or equal to the maximum"),
    ("baseline", "looks_at", [5, 3], "comparisons[0].looks_at: [5, 3]: its first look is after its last"),
    ("baseline", "looks_at", [0, 3], "comparisons[0].looks_at[0]: 0 is less than the minimum of 1"),
    ("baseline", "looks_at", [3], "comparisons[0].looks_at: [3] is too short"),
    ("summary", "look_confidence", 5, "comparisons[0].look_confidence: 5 is greater than or equal to the maximum"),
    ("summary", "confidence", 95, "comparisons[0].confidence: 95 is greater than or equal to the maximum of 1"),
    ("summary", "looks_at", [5, 3], "comparisons[0].looks_at: [5, 3]: its first look is after its last"),
    ("summary", "looks_at", [3, 4, 5], "comparisons[0].looks_at: [3, 4, 5] is too long"),
], ids=lambda value: value if isinstance(value, str) and " " not in value else "")
def test_a_level_or_looks_no_run_gives_is_refused(make_run, tmp_path, which, key, value, said):
    """A hand-edited ``look_confidence: 5`` was named "500% CI" by the gate, a level of 0 "0% CI", looks [5, 3] read
    as -1 looks: a level lies between 0 and 1, the looks are two trial counts, the first no later than the last.
    Bad input, one line naming the file and the key, exit 2."""
    run = make_run("rounds", case_extra={"repeats": {"min": 3, "max": 5}})
    base = tmp_path / "base.json"
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    path = base if which == "baseline" else run / "summary.json"
    data = json.loads(path.read_text())
    data["comparisons"][0][key] = value
    path.write_text(json.dumps(data))
    res = check(run, "--baseline", base)
    assert res.exit_code == 2 and res.output.splitlines() == [res.output.strip()], res.output
    assert res.output.startswith(f"perfkit: {path}: {said}"), res.output
