"""`perfkit check` on hand-made runs against a baseline written from another: passing, each kind of
regression failing with its row listed, thresholds from the case and from flags, the GitHub step
summary, --update-baseline, and bad input."""

import json
import os
import re
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from run_fixtures import (ab_trials, frames, make_run, outputs_for, shifted, trial,  # noqa: F401 (a fixture)
                          write_run)

from perfkit.report.check import COLUMNS, Thresholds, baseline_from_summary, check_frame, markdown, text_lines
from perfkit.cli import cli
from perfkit.errors import BadInput


def check(*args, env=None):
    return CliRunner().invoke(cli, ["check", *map(str, args)], env=env)


@pytest.fixture
def baseline(make_run, tmp_path):
    """A baseline written by --update-baseline from the standard fixture run (b/a 1.2, frame 1 off)."""
    path = tmp_path / "baselines" / "fixture.json"
    res = check(make_run("base"), "--baseline", path, "--update-baseline")
    assert res.exit_code == 0, res.output
    return path


def failing(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("FAIL")]


def test_update_then_pass(baseline, make_run, tmp_path):
    data = json.loads(baseline.read_text())
    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    assert data["case"] == "fixture" and data["determinism"] == {"a": True, "b": True}
    assert data["comparisons"][0]["ratio"] == pytest.approx(summary["comparison"]["ratio"])
    assert data["quality"]["psnr_db"] == pytest.approx(summary["quality"]["psnr_db"])
    step_summary = tmp_path / "step_summary.md"
    step_summary.write_text("earlier step\n")
    res = check(make_run("same"), "--baseline", baseline, env={"GITHUB_STEP_SUMMARY": str(step_summary)})
    assert res.exit_code == 0, res.output
    assert not failing(res.output) and res.output.splitlines()[-1].startswith("check: passed, 0 of ")
    text = step_summary.read_text()
    assert text.startswith("earlier step\n### perfkit check, fixture: passed")
    assert "| ok | timing | b/a step_ms |" in text
    timing = next(line for line in res.output.splitlines() if " timing " in line)
    assert "limit: the baseline x 1.1 (ratio_tolerance 0.1); 95% CI [" in timing  # the default's, said
    # Another run's summary.json serves as a baseline too.
    assert check(tmp_path / "same", "--baseline", tmp_path / "base" / "summary.json").exit_code == 0


def test_slower_b_fails_the_timing_row(baseline, make_run, tmp_path):
    run = make_run("slow", trials=ab_trials(b_scale=2.0))
    step_summary = tmp_path / "step_summary.md"
    res = check(run, "--baseline", baseline, env={"GITHUB_STEP_SUMMARY": str(step_summary)})
    assert res.exit_code == 1
    assert [line.split(" (")[0] for line in failing(res.output)] == [
        "FAIL timing      b/a step_ms: 2.000", "FAIL timing      b/a natural_step_ms: 2.000"]
    assert "lies above the limit" in res.output and "check: FAILED, 2 of" in res.output
    assert "**failed**: 2 of" in step_summary.read_text() and "| **FAIL** | timing | b/a step_ms | 2.000 |" in \
        step_summary.read_text()
    # Looser from the case's check block; a flag overrides the case.
    loose = make_run("slow-loose", trials=ab_trials(b_scale=2.0), case_extra={"check": {"ratio_tolerance": 1.0}})
    assert check(loose, "--baseline", baseline).exit_code == 0
    assert check(loose, "--baseline", baseline, "--ratio-tolerance", "0.5").exit_code == 1


def test_a_timing_row_carries_the_ci_its_verdict_is_decided_on(baseline, make_run, tmp_path):
    """--json's timing row gave the point ratio alone, while the verdict is decided on the CI's end: a script had to
    read the CI out of the note's text. It is a field, [low, high], equal to the run's own summary.json; null on a
    row of another check."""
    res = check(make_run("ci", trials=ab_trials(b_scale=2.0)), "--baseline", baseline, "--json")
    rows = json.loads(res.output)["rows"]
    row = next(r for r in rows if r["subject"] == "b/a step_ms")
    own = next(c for c in json.loads((tmp_path / "ci" / "summary.json").read_text())["comparisons"]
               if (c["variant"], c["metric"]) == ("b", "step_ms"))
    assert row["ci"] == own["ci"] and row["ci"][0] > row["limit"] and not row["passed"]
    assert all(r["ci"] is None for r in rows if r["check"] != "timing")


def test_the_step_summary_gives_a_timing_row_s_ci_a_column_of_its_own(baseline, make_run, tmp_path):
    """The step summary's table gave a timing row's CI, the figure its verdict is decided on, only inside its note's
    text: it has a column, the run's own summary.json's CI to 3 decimals; "-" on a row that has none."""
    step_summary = tmp_path / "step_summary.md"
    check(make_run("slow", trials=ab_trials(b_scale=2.0)), "--baseline", baseline,
          env={"GITHUB_STEP_SUMMARY": str(step_summary)})
    lines = step_summary.read_text().splitlines()
    assert "| | check | figure | this run | 95% CI | baseline | required | note |" in lines
    lo, hi = next(c["ci"] for c in json.loads((tmp_path / "slow" / "summary.json").read_text())["comparisons"]
                  if (c["variant"], c["metric"]) == ("b", "step_ms"))
    assert f"| **FAIL** | timing | b/a step_ms | 2.000 | [{lo:.3f}, {hi:.3f}] | 1.200 | CI low end <= 1.320 |" in \
        step_summary.read_text()
    trials_row = next(line for line in lines if line.startswith("| ok | trials |"))
    assert trials_row.startswith("| ok | trials | failed or hung trials | 0 | - | 0 | 0 |"), trials_row


def test_one_timed_step_a_side_fails_the_timing_row_saying_why(baseline, make_run):
    """No CI to hold to the limit: the row fails, its ratio shown, and says why (it said there was no ratio)."""
    run = make_run("one", trials=[trial(0, "a", [50.0, 10.0]), trial(1, "b", [50.0, 12.0])], outputs={})
    res = check(run, "--baseline", baseline, "--json")
    row = next(r for r in json.loads(res.output)["rows"] if r["subject"] == "b/a step_ms")
    assert (row["passed"], row["current"]) == (False, 1.2)
    assert row["note"] == "a side has one timed step: nothing measured how much a step varies, so no CI"


def test_a_change_inside_the_tolerance_passes(baseline, make_run):
    """b/a 1.25 against the baseline's 1.2 (limit 1.32): the CI reaches below the limit, so it passes."""
    res = check(make_run("noisy", trials=ab_trials(b_scale=1.25)), "--baseline", baseline)
    assert res.exit_code == 0, res.output


def test_quality_regressions(baseline, make_run):
    # 80 values off instead of 20: MSE x4, PSNR 6.02 dB lower (45.9 -> 39.9 dB), pooled over the frames too;
    # 6.5 dB of tolerance lets it pass, unless a floor of 40 dB is set.
    worse = make_run("worse", outputs=outputs_for(ab_trials(), frames(), shifted(frames(), 1, 80)))
    res = check(worse, "--baseline", baseline)
    assert res.exit_code == 1 and [line.split(":")[0] for line in failing(res.output)] == \
        ["FAIL quality     PSNR b vs a (frames.npy)",
         "FAIL quality     PSNR b vs a pooled over the frames (frames.npy)"]
    assert check(worse, "--baseline", baseline, "--psnr-drop", "6.5").exit_code == 0
    assert check(worse, "--baseline", baseline, "--psnr-drop", "6.5", "--min-psnr", "40").exit_code == 1

    # b's repeats no longer bit-identical: determinism fails.
    trials = ab_trials()
    outputs = outputs_for(trials, frames(), shifted(frames(), 1, 20))
    outputs[5] = shifted(frames(), 1, 21)  # the last b trial (index 5)
    res = check(make_run("flaky", trials=trials, outputs=outputs), "--baseline", baseline)
    assert res.exit_code == 1 and any("determinism b: repeats bit-identical: no" in x for x in failing(res.output))

    # No outputs at all: neither quality nor determinism can be compared.
    res = check(make_run("blind", outputs={}), "--baseline", baseline)
    assert [line.split(":")[0] for line in failing(res.output)] == [
        "FAIL quality     outputs b vs a", "FAIL determinism a", "FAIL determinism b"]
    assert "not checked in this run" in failing(res.output)[1]


def test_the_same_error_spread_over_more_frames_fails_the_pooled_psnr(baseline, make_run):
    # The baseline's b has 20 values of frame 1 (of 3) off by 4: that frame's MSE 20 x 16 / 192, its PSNR
    # 10 log10(255^2 / 1.667) = 45.91 dB, the headline (the mean over the frames that differ); pooled over all
    # 3 frames the MSE is a third of that: 50.68 dB. Now every frame is off so: the headline stays 45.91 dB,
    # the pooled PSNR drops 4.77 dB to 45.91 dB, past the 0.5 dB allowed.
    spread = shifted(shifted(shifted(frames(), 0, 20), 1, 20), 2, 20)
    res = check(make_run("spread", outputs=outputs_for(ab_trials(), frames(), spread)), "--baseline", baseline)
    assert res.exit_code == 1, res.output
    (fail,) = failing(res.output)
    assert fail.startswith("FAIL quality     PSNR b vs a pooled over the frames (frames.npy): 45.91 dB (baseline "
                           "50.68 dB; required >= 50.18 dB)"), fail
    headline = next(line for line in res.output.splitlines() if "PSNR b vs a (frames.npy)" in line)
    assert headline.startswith("ok   quality     PSNR b vs a (frames.npy): 45.91 dB (baseline 45.91 dB"), headline
    # a baseline written before the pooled figure was kept gates the headline alone
    old = json.loads(baseline.read_text())
    del old["quality"]["psnr_pooled_db"]
    baseline.write_text(json.dumps(old))
    assert check(baseline.parent.parent / "spread", "--baseline", baseline).exit_code == 0


def test_bit_identical_baseline_must_stay_so(make_run, tmp_path):
    same = make_run("same", outputs=outputs_for(ab_trials(), frames(), frames()))
    path = tmp_path / "b.json"
    assert check(same, "--baseline", path, "--update-baseline").exit_code == 0
    res = check(make_run("off", outputs=outputs_for(ab_trials(), frames(), shifted(frames(), 0, 1, by=1))),
                "--baseline", path)
    assert res.exit_code == 1 and "FAIL quality     outputs b vs a bit-identical: no" in res.output
    # with a floor stated in place of bit-identity (the quickstart's 40 dB), the row says why no drop applies
    floored = check(make_run("floored", outputs=outputs_for(ab_trials(), frames(), shifted(frames(), 0, 1, by=1))),
                    "--baseline", path, "--min-psnr", "30")
    # the floor holds the PSNR pooled over all frames too (it had held the headline alone: the pooled row was
    # dropped where the baseline's pooled PSNR was infinite)
    headline, pooled = [line for line in floored.output.splitlines() if " quality " in line]
    assert headline.startswith("ok   quality     PSNR b vs a (") and pooled.startswith(
        "ok   quality     PSNR b vs a pooled over the frames (")
    for row in (headline, pooled):
        assert row.endswith("(baseline inf dB; required >= 30.00 dB); the baseline's outputs were bit-identical: no "
                            "drop from inf to hold, so the floor alone applies (min_psnr_db, in place of "
                            "bit-identity)"), row


def test_failed_trials_and_divergent_ranks(baseline, make_run):
    trials = ab_trials() + [trial(6, "b", [], status="crashed",
                                  ranks=[{"rank": 0, "exit_code": 7, "running_at_end": False, "steps_done": 0,
                                         "last_step_ms": None, "last_mark": None}])]
    run = make_run("crashed", trials=trials)
    res = check(run, "--baseline", baseline)
    assert res.exit_code == 1 and "FAIL trials      failed or hung trials: 1" in res.output
    assert "trial 6 (b) crashed" in res.output
    res = check(run, "--baseline", baseline, "--update-baseline")
    assert res.exit_code == 2 and "a baseline needs a complete run" in res.output

    summary = json.loads((run.parent / "base" / "summary.json").read_text())
    summary["ranks"]["b"] = {"consistent": False, "groups": [[0, 1, 2], [3]], "checked": "hlo-diff"}
    th = Thresholds(ratio_tolerance=0.1, psnr_drop_db=0.5)
    rows = check_frame(baseline_from_summary(json.loads((run.parent / "base" / "summary.json").read_text())),
                       summary, th)
    bad = rows[~rows.passed]
    assert bad[["check", "subject"]].values.tolist() == [["ranks", "b: one program on every rank"]]
    # the row names the rank that went its own way, as the report's Rank consistency does
    summary["ranks"]["b"] |= {"divergent_ranks": [3], "trial": "trials/01-b"}
    (line,) = [x for x in text_lines(check_frame(baseline_from_summary(json.loads(
        (run.parent / "base" / "summary.json").read_text())), summary, th)) if x.startswith("FAIL")]
    assert line.endswith("; rank 3 compiled another program (programs by rank: 0, 1, 2 / 3; the report's "
                         "Rank consistency, `perfkit hlo-diff` on trials/01-b)"), line


def _older(path, than):
    """``path``'s modification time set a minute before ``than``'s (a file written earlier, whatever the clock's
    resolution)."""
    os.utime(path, (than.stat().st_mtime - 60,) * 2)


def test_a_summary_that_trials_jsonl_contradicts_is_refused(baseline, tmp_path):
    """The gate reads summary.json; trials.jsonl is what the trials recorded. A summary written before a resumed
    run's last trials (one crashed), or edited to drop a failed trial, passed the gate (exit 0): refused, exit 2,
    saying what each file holds, for the check and for --update-baseline. (Written before them, older than
    trials.jsonl: the run has not finished, test_a_run_still_going_is_refused_as_not_finished.)"""
    run = tmp_path / "base"
    crashed = trial(6, "b", [], status="crashed", ranks=[{"rank": 0, "exit_code": 7, "running_at_end": False,
                                                           "steps_done": 0, "last_step_ms": None, "last_mark": None}])
    with open(run / "trials.jsonl", "a") as f:
        f.write(json.dumps(crashed) + "\n")
    _older(run / "trials.jsonl", run / "summary.json")
    said = (f"perfkit: {run / 'summary.json'}: trials: 6 trials, none failed, but {run / 'trials.jsonl'} records 7, "
            "trial 6 failed: written before the run's last trials, or edited (`perfkit report "
            f"{run}` writes it again)\n")
    for update in ([], ["--update-baseline"]):
        res = check(run, "--baseline", baseline, *update)
        assert (res.exit_code, res.output) == (2, said)
    # the summary written again from the trials: the crash fails the gate, as a check
    from perfkit.run import finish

    finish.render(run)
    assert check(run, "--baseline", baseline).exit_code == 1
    summary = json.loads((run / "summary.json").read_text())
    summary["trials"] |= {"ok": 7, "failed": []}
    (run / "summary.json").write_text(json.dumps(summary))
    res = check(run, "--baseline", baseline)
    assert (res.exit_code, res.output) == (2, said.replace("6 trials", "7 trials"))


def test_a_run_still_going_is_refused_as_not_finished(baseline, tmp_path):
    """A run whose trials are still being written has no summary.json yet, or (resumed) one older than trials.jsonl
    counting fewer trials. check said to write the summary with `perfkit report`: done while the run went on, that
    summary's partial trials passed the gate. It says the run has not finished, in one line, exit 2, for the check
    and for --update-baseline, and names the command that finishes a run killed before its summary."""
    trials = ab_trials()
    run = write_run(tmp_path / "going", trials[:4])
    resume = f"`perfkit run --resume {run.absolute()}`"
    going = (f"perfkit: {run}: the run has not finished: {{}}: wait for it to end ({resume} finishes one that was "
             "killed before it wrote its summary)\n")
    for update in ([], ["--update-baseline"]):
        res = check(run, "--baseline", tmp_path / "new.json" if update else baseline, *update)
        assert (res.exit_code, res.output) == (2, going.format("trials.jsonl records 4 trials, no summary.json yet"))
    assert not (tmp_path / "new.json").exists()
    # resumed: the summary of its first 4 trials (interrupted), then a 5th recorded after it
    from perfkit.run import finish

    finish.render_one(run, interrupted=True)
    with open(run / "trials.jsonl", "a") as f:
        f.write(json.dumps(trials[4]) + "\n")
    _older(run / "summary.json", run / "trials.jsonl")
    res = check(run, "--baseline", baseline)
    assert (res.exit_code, res.output) == (2, going.format(
        "trials.jsonl records 5 trials, its summary.json (older) 4"))
    # a multi-host run going: each host's part holds its trials, the top nothing yet
    (run / "summary.json").unlink()
    (run / "trials.jsonl").rename(run / "part.jsonl")
    for host in (0, 1):
        (run / "hosts" / f"host{host}").mkdir(parents=True)
    (run / "part.jsonl").rename(run / "hosts" / "host1" / "trials.jsonl")
    res = check(run, "--baseline", baseline)
    assert res.exit_code == 2 and "trials.jsonl records 5 trials, no summary.json yet" in res.output


def test_a_resumed_run_going_is_not_finished_before_its_first_new_trial(baseline, tmp_path):
    """A resumed run keeps its last stop's summary.json, of the trials in trials.jsonl, until it records a new
    trial: check gated it as stopped (exit 1, "perfkit run --resume finishes it") while it ran. The perfkit running a
    run holds its folder (the lock a second perfkit is refused by, tests/runner): check reads that as not finished,
    exit 2; once the run ends, its summary is gated."""
    from perfkit.run import finish
    from perfkit.rundata import rundir

    run = write_run(tmp_path / "resumed", ab_trials()[:4])
    finish.render_one(run, interrupted=True)
    with rundir.held(run, run):  # as `perfkit run --resume` holds it from its start
        res = check(run, "--baseline", baseline)
        assert (res.exit_code, res.output.split(": wait")[0]) == (
            2, f"perfkit: {run}: the run has not finished: a perfkit is running it"), res.output
    assert check(run, "--baseline", baseline).exit_code == 1  # stopped, its 4 trials gated as such


def test_a_baseline_keeps_its_run_s_name_not_a_path_of_one_machine(baseline, make_run, tmp_path):
    """A baseline kept the absolute path of the run it was written from (the committed quickstart's, /tmp/qs), a
    folder of one machine that no other checkout has. It keeps the run directory's name; a baseline written before,
    holding an absolute path that is nowhere here, is read and checks a run as one holding the name does."""
    data = json.loads(baseline.read_text())
    assert data["from"]["run_dir"] == "base"
    run = make_run("same")
    rows = []
    for run_dir in ("base", "/nowhere/on/this/machine/base"):
        data["from"]["run_dir"] = run_dir
        (tmp_path / "old.json").write_text(json.dumps(data))
        res = check(run, "--baseline", tmp_path / "old.json", "--json")
        assert res.exit_code == 0, res.output
        rows.append(json.loads(res.output)["rows"])
    assert rows[0] == rows[1]


def test_a_failing_psnr_row_says_how_far_below_its_limit_it_is(baseline, make_run):
    # 80 values of frame 1 off by 4 in place of 20: the frame's MSE 80 x 16 / 192 = 6.667, 39.89 dB, against the
    # baseline's 45.91 dB (20 values): 6.02 dB lower, where 0.5 is allowed; with a floor of 42 dB, 2.11 below it
    # (pooled over the 3 frames, 44.66 dB, above the floor: that row passes).
    worse = make_run("worse", outputs=outputs_for(ab_trials(), frames(), shifted(frames(), 1, 80)))
    (line, _) = failing(check(worse, "--baseline", baseline).output)
    assert line.endswith("required >= 45.41 dB); 6.02 dB below the baseline's (psnr_drop_db 0.5)"), line
    (line,) = failing(check(worse, "--baseline", baseline, "--psnr-drop", "9", "--min-psnr", "42").output)
    assert line.endswith("required >= 42.00 dB); 2.11 dB below min_psnr_db"), line
    # where the headline output is another file, the row says so beside how far below it is (it had replaced it)
    summary = json.loads((worse / "summary.json").read_text())
    base = baseline_from_summary(json.loads((worse.parent / "base" / "summary.json").read_text()))
    base["quality"]["file"] = "other.npy"
    rows = check_frame(base, summary, Thresholds(ratio_tolerance=0.1, psnr_drop_db=0.5))
    notes = rows[(rows.check == "quality") & ~rows.passed].note.tolist()
    assert notes == ["6.02 dB below the baseline's (psnr_drop_db 0.5); the baseline's headline output was "
                     "other.npy"] * 2  # the headline and the pooled PSNR: 4 times the MSE both ways


def test_a_run_against_itself_passes_what_its_baseline_already_had_but_not_a_failed_trial(make_run):
    """Checked against its own summary.json: b's ranks, divergent in the baseline too, are no regression and
    pass; the crashed trial still fails, its row showing the baseline's own count (1, not 0); ranks the
    baseline did not check that diverge now fail."""
    trials = ab_trials() + [trial(6, "b", [], status="crashed",
                                  ranks=[{"rank": 0, "exit_code": 7, "running_at_end": False, "steps_done": 0,
                                         "last_step_ms": None, "last_mark": None}])]
    summary = json.loads((make_run("crashed", trials=trials) / "summary.json").read_text())
    summary["ranks"]["b"] = {"consistent": False, "groups": [[0, 1, 2], [3]], "checked": "hlo-diff"}
    th = Thresholds(ratio_tolerance=0.1, psnr_drop_db=0.5)
    rows = check_frame(baseline_from_summary(summary), summary, th).set_index("subject")
    assert rows.loc["failed or hung trials", ["baseline", "current", "passed"]].tolist() == [1, 1, False]
    assert rows.loc["b: one program on every rank", ["baseline", "current", "passed"]].tolist() == [False, False, True]
    assert rows[~rows.passed].index.tolist() == ["failed or hung trials"]
    unchecked = baseline_from_summary(summary) | {"ranks": {"a": None, "b": None}}
    rows = check_frame(unchecked, summary, th).set_index("subject")
    assert rows[~rows.passed].index.tolist() == ["failed or hung trials", "b: one program on every rank"]


def test_bad_input(baseline, make_run, tmp_path):
    run = tmp_path / "base"
    (tmp_path / "broken.json").write_text("{not json")
    for args, words in [((run, "--baseline", tmp_path / "broken.json"), "not a readable JSON file"),
                        ((run, "--baseline", tmp_path / "none.json"), "no such baseline file"),
                        ((tmp_path, "--baseline", baseline), "no summary.json")]:
        res = check(*args)
        assert res.exit_code == 2 and words in res.output and len(res.output.splitlines()) == 1, res.output
    other = json.loads(baseline.read_text()) | {"case": "another"}
    (tmp_path / "other.json").write_text(json.dumps(other))
    res = check(run, "--baseline", tmp_path / "other.json")
    assert res.exit_code == 2 and "other.json: case: a baseline of case 'another'" in res.output


def test_the_quickstart_timing_gate_fails_a_threefold_slowdown_and_passes_the_noise_seen():
    """The shipped gate (cases/quickstart.yaml's check: block, reports/baselines/quickstart.json): on a
    loaded 2-core runner sp/tp was seen from 1.4 to 4.0 with the CI's low end up to 2.4, which must pass;
    sp three times slower than the baseline's ratio, its CI as wide as a noisy run's (x0.7 to x1.35),
    must fail."""
    from pathlib import Path

    from perfkit.report.check import _timing_rows, load_baseline
    from perfkit.rundata import case as case_mod

    repo = Path(__file__).resolve().parents[2]
    th = Thresholds(**case_mod.load(repo / "cases" / "quickstart.yaml").check)
    base = load_baseline(repo / "reports" / "baselines" / "quickstart.json")
    ratio = next(c["ratio"] for c in base["comparisons"] if c["metric"] == "step_ms")

    def timing(r: float, lo: float, hi: float) -> bool:
        summary = {"baseline": "tp", "comparisons": [{"variant": "sp", "metric": "step_ms", "ratio": r,
                                                      "ci": [lo, hi]}]}
        return next(row for row in _timing_rows(base, summary, th) if row["subject"] == "sp/tp step_ms")["passed"]

    slower = 3 * ratio
    assert not timing(slower, 0.7 * slower, 1.35 * slower)
    assert timing(4.0, 2.4, 5.2)


def test_cost_rows_show_whole_bytes_with_their_unit():
    """A step's bytes 4 apart (the demo's HBM bytes against its baseline): both shown whole, in bytes, so the
    change beside them (+0.00%) reads as the few bytes it is."""
    import pandas as pd

    from perfkit.report.cost_check import cost_rows
    from perfkit.report.check import text_lines

    base = {"cost": {"sp": {"collectives": {}, "flops": 26520000.0, "hbm_bytes": 14968600,
                            "interconnect_bytes": 589824, "temp_bytes": 1136640}}}
    step = {"module": "m", "collectives": {}, "flops": 26520000.0, "hbm_bytes": 14968604,
            "interconnect_bytes": 589824, "temp_bytes": 1136640}
    lines = text_lines(pd.DataFrame(cost_rows(base, {"cost": {"sp": {"step": step}}}, 0.01)))
    assert "sp: HBM bytes per step: 14968604 B (baseline 14968600 B; required within 1.0%); +0.00%" in lines[1]
    assert "sp: temp memory: 1136640 B (baseline 1136640 B" in lines[3]
    assert "sp: FLOPs per step: 26520000 (baseline 26520000;" in lines[0]


def test_a_cost_row_s_change_and_tolerance_show_the_digits_its_verdict_follows_from():
    """A failing cost row read "required within 1.0%); +1.00%": FLOPs 101004 against 100000 are 1.004% over, past
    the 1% tolerance, shown to 2 decimals as the tolerance itself. The change takes the decimals that put it on
    its verdict's side of the tolerance as shown (+1.004%), a change exactly at it passes (+1.00%), and a tolerance
    of 1.25% shows as 1.25%, not 1.2% (a passing +1.24% read above it)."""
    import pandas as pd

    from perfkit.report.cost_check import cost_rows
    from perfkit.report.check import text_lines

    base = {"cost": {"sp": {"collectives": {}, "flops": 100000.0, "hbm_bytes": None, "interconnect_bytes": None,
                            "temp_bytes": None}}}

    def line(flops: float, tolerance: float) -> str:
        step = {"module": "m", "collectives": {}, "flops": flops, "hbm_bytes": 1, "interconnect_bytes": 1,
                "temp_bytes": 1}
        (row,) = text_lines(pd.DataFrame(cost_rows(base, {"cost": {"sp": {"step": step}}}, tolerance)))
        return row

    assert line(101004.0, 0.01) == ("FAIL cost        sp: FLOPs per step: 101004 (baseline 100000; required within "
                                    "1.0%); +1.004%")
    assert line(101000.0, 0.01).startswith("ok   ") and line(101000.0, 0.01).endswith("within 1.0%); +1.00%")
    assert line(101240.0, 0.0125).endswith("(baseline 100000; required within 1.25%); +1.24%")


def test_a_cost_figure_of_0_in_the_baseline_says_what_the_run_got():
    """No percentage of 0 to give: the failing row names the run's figure against 0 (its note was empty)."""
    from perfkit.report.cost_check import cost_rows

    base = {"cost": {"b": {"collectives": {}, "flops": 0.0, "hbm_bytes": 0, "interconnect_bytes": 0,
                           "temp_bytes": 0}}}
    step = {"collectives": {}, "flops": 2097152.0, "hbm_bytes": 0, "interconnect_bytes": 0, "temp_bytes": 32768}
    rows = cost_rows(base, {"cost": {"b": {"step": step}}}, 0.01)
    assert [(r["subject"], r["passed"], r["note"]) for r in rows] == [
        ("b: FLOPs per step", False, "2097152 FLOPs against the baseline's 0: within any share of 0 is 0 alone"),
        ("b: HBM bytes per step", True, ""), ("b: bytes sent a device per step", True, ""),
        ("b: temp memory", False, "32768 B against the baseline's 0: within any share of 0 is 0 alone")]


@pytest.mark.parametrize("which, change, said", [
    ("baseline", lambda b: b["comparisons"][0].update(ratio="fast"), "comparisons[0].ratio: 'fast' is not of type"),
    ("baseline", lambda b: b.update(cost=[1, 2]), "cost: [1, 2] is not of type 'object'"),
    ("baseline", lambda b: b.update(determinism=None), "determinism: None is not of type 'object'"),
    ("baseline", lambda b: b["quality"].update(psnr_db="high"), "quality.psnr_db: 'high' is not valid"),
    ("baseline", lambda b: b.update(perfkit_baseline=2), "perfkit_baseline: 2 is not one of [1]"),
    ("summary", lambda s: s.update(comparisons=None), "comparisons: None is not of type 'array'"),
    ("summary", lambda s: s.pop("variants"), "'variants' is a required property"),
], ids=lambda value: value if isinstance(value, str) and " " not in value else "")
def test_a_baseline_or_summary_of_the_wrong_shape_is_refused_in_one_line(baseline, tmp_path, which, change, said):
    """Validated against the shipped schemas, not read until a TypeError: exit 2 (bad input), never 1 (a failed
    gate), in one line naming the file and the field."""
    run = tmp_path / "base"
    path = baseline if which == "baseline" else run / "summary.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    res = check(run, "--baseline", baseline)
    assert res.exit_code == 2 and res.output.splitlines() == [res.output.strip()], res.output
    assert res.output.startswith(f"perfkit: {path}: {said}")


@pytest.mark.parametrize("field, value, said", [
    ("baseline_variant", "b",
     "baseline_variant: a baseline whose ratios are against 'b', but the run's are against 'a'"),
    ("from", {"platform": "tpu", "count": 8, "process_count": 2},
     "from.devices: a baseline run on 8 x tpu in 2 processes, but the run ran on 4 x tpu"),
    # the same count of chips of another kind (v5p's ratios are not v5e's): both record their kind
    ("from", {"platform": "tpu", "kind": "TPU v5p", "count": 4, "process_count": 1},
     "from.devices: a baseline run on 4 x TPU v5p, but the run ran on 4 x TPU v5 lite"),
])
def test_a_baseline_of_another_setup_is_refused(baseline, tmp_path, field, value, said):
    """The fixture's run: 4 TPU chips in one process, its ratios against a."""
    data = json.loads(baseline.read_text())
    if field == "from":
        data["from"]["devices"] = value
    else:
        data[field] = value
    baseline.write_text(json.dumps(data))
    res = check(tmp_path / "base", "--baseline", baseline)
    assert res.exit_code == 2 and res.output.startswith(f"perfkit: {baseline}: {said} (compare like with like"), \
        res.output


def test_a_baseline_recording_no_device_kind_is_matched_by_platform_and_count(baseline, tmp_path):
    """A hand-written ``from.devices`` without a kind: the kinds are not compared, the platform and count are."""
    data = json.loads(baseline.read_text())
    data["from"]["devices"] = {"platform": "tpu", "count": 4, "process_count": 1}
    baseline.write_text(json.dumps(data))
    assert check(tmp_path / "base", "--baseline", baseline).exit_code == 0


def test_a_baseline_keeps_no_cost_of_the_aa_control(tmp_path, baseline):
    """An --aa run's control (``a-aa``) is left out of the cost section as it is of the comparisons: a later
    run without it would fail the gate for a variant it does not run."""
    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    step = {"collectives": {"all-reduce": {"count": 6}}, "flops": 1.0, "hbm_bytes": 2.0, "interconnect_bytes": 3.0,
            "temp_bytes": 4}
    summary |= {"noise_floor": {"variant": "a-aa"}, "cost": {v: {"step": step} for v in ("a", "b", "a-aa")}}
    assert sorted(baseline_from_summary(summary)["cost"]) == ["a", "b"]


def test_a_step_summary_that_cannot_be_written_is_named(baseline, tmp_path):
    """The verdict and its exit code stand (0 here: passed); the CI's summary file is named on stderr."""
    res = check(tmp_path / "base", "--baseline", baseline, env={"GITHUB_STEP_SUMMARY": str(tmp_path / "no" / "s.md")})
    assert res.exit_code == 0 and res.stdout.splitlines()[-1].startswith("check: passed")
    assert res.stderr == (f"perfkit: {tmp_path / 'no' / 's.md'}: GITHUB_STEP_SUMMARY: the step summary cannot be "
                          "appended there (No such file or directory; the verdict above stands)\n")


def test_devices_unknown_on_a_side_are_not_compared(baseline, tmp_path):
    """env.json's probe failed (a timeout, no jax): its devices are an error, not "None x None" refused; a
    baseline without "from" records none either. Either passes, its devices row saying the match was not checked
    (it was skipped with nothing said); devices known on both sides give no such row."""
    def devices_rows() -> list[tuple]:
        res = check(tmp_path / "base", "--baseline", baseline, "--json")
        assert res.exit_code == 0, res.output
        return [(r["baseline"], r["current"], r["passed"], r["note"]) for r in json.loads(res.output)["rows"]
                if r["check"] == "devices"]

    assert devices_rows() == []
    data = json.loads(baseline.read_text())
    data["from"]["devices"] = {"error": "device probe failed: timed out"}
    baseline.write_text(json.dumps(data))
    assert devices_rows() == [(None, "4 x tpu", True, "the baseline records no devices (device probe failed: timed "
                               "out): the device match was not checked")]
    del data["from"]
    baseline.write_text(json.dumps(data))
    assert devices_rows() == [(None, "4 x tpu", True,
                               'the baseline records no devices (no "from"): the device match was not checked')]


def test_a_costed_variant_the_run_does_not_have_is_said_so(tmp_path, baseline):
    """Not 'no XLA dumps of this variant' (capture.xla_dump) for a variant the run never ran."""
    from perfkit.report.cost_check import cost_rows

    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    step = {"collectives": {}, "flops": 1.0, "hbm_bytes": 2.0, "interconnect_bytes": 3.0, "temp_bytes": 4}
    rows = cost_rows({"cost": {"a": step, "c": step}}, summary, 0.01)
    assert [(r["subject"], r["note"]) for r in rows] == [
        ("a: step cost", "no XLA dumps of this variant in this run (capture.xla_dump)"),
        ("c: step cost", "the variant is not in this run")]


def test_a_variant_whose_dumps_did_not_parse_says_so_not_that_it_had_none(tmp_path, baseline):
    """The dumps are there: the row gives the reason they could not be read (summary.json's cost error), where it
    said there were no dumps and sent the reader to capture.xla_dump."""
    from perfkit.report.cost_check import cost_rows

    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    summary["cost"] = {"b": {"dumps": "/r/trials/01-b/rank0/xla_dump",
                             "error": "/r/m.txt: not an HLO text dump: no 'HloModule' line"}}
    step = {"collectives": {}, "flops": 1.0, "hbm_bytes": 2.0, "interconnect_bytes": 3.0, "temp_bytes": 4}
    rows = cost_rows({"cost": {"b": step}}, summary, 0.01)
    assert [(r["subject"], r["passed"], r["note"]) for r in rows] == [
        ("b: step cost", False,
         "its XLA dumps in this run were not costed: /r/m.txt: not an HLO text dump: no 'HloModule' line")]


def _taps(first: str | None) -> dict:
    """A summary's taps (``perfkit.quality.departure``) whose first departure is the tap ``first`` at step 0."""
    row = {"index": 3, "step": 0, "name": first, "departs": True}
    return {"a": {"variant": "a"}, "b": {"variant": "b"}, "rows": [row] if first else [],
            "first": row if first else None}


def test_a_tap_departing_fails_the_gate_where_the_outputs_still_pass(tmp_path, baseline):
    """A newcomer's: sp's RoPE broken in block 1 left the frames at 53.5 dB, above the case's 40 dB floor, and
    check passed while the report said "First departure: block1.attn at step 0". The first departing tap is a
    row: none may appear that the baseline had not (a baseline without taps had none to allow); where the
    baseline's taps held, a run without taps has not checked them."""
    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    base = json.loads(baseline.read_text())
    th = Thresholds(0.1, 0.5)
    assert "taps" not in base and "taps" not in check_frame(base, summary, th)["check"].tolist()
    rows = check_frame(base, {**summary, "taps": _taps("block1.attn")}, th)
    (row,) = rows[rows["check"] == "taps"].to_dict("records")
    assert (row["subject"], row["current"], row["passed"]) == ("b: first tap departing from a",
                                                                "block1.attn at step 0", False)
    held = baseline_from_summary({**summary, "taps": _taps(None)})
    assert held["taps"] == {"variant": "b", "first": "none"}
    for taps, current, passed in ((_taps(None), "none", True), (_taps("block1.attn"), "block1.attn at step 0", False),
                                  (None, None, False)):
        rows = check_frame(held, {**summary, "taps": taps}, th)
        (row,) = rows[rows["check"] == "taps"].to_dict("records")
        assert (row["current"], row["passed"]) == (current, passed)
    known = baseline_from_summary({**summary, "taps": _taps("block1.attn")})  # a departure the baseline had
    rows = check_frame(known, {**summary, "taps": _taps("block1.attn")}, th)
    assert rows[rows["check"] == "taps"]["passed"].tolist() == [True]
    lines = text_lines(check_frame(held, {**summary, "taps": _taps("block1.attn")}, th))
    assert failing("\n".join(lines)) == [
        "FAIL taps        b: first tap departing from a: block1.attn at step 0 (baseline none; required none); the "
        "report's Quality section: First departure"]


def test_a_taps_row_of_a_run_where_a_variant_ran_no_trial_says_so(tmp_path, baseline):
    """A newcomer's `perfkit run quickstart --only sp`, checked against the baseline: the taps row read 'no taps in
    this run (the case's capture.taps)' where the case taps every block and sp wrote its taps; none were compared,
    as tp ran no trial. The note names the variant that ran none; a run whose variants both ran keeps the old
    note (its taps were off)."""
    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    held = baseline_from_summary({**summary, "taps": _taps(None)})
    th = Thresholds(0.1, 0.5)
    only_b = {**summary, "taps": None, "variants": {**summary["variants"],
                                                     "a": {**summary["variants"]["a"], "trials": 0}}}
    notes = {}
    for name, run in (("only b", only_b), ("both", {**summary, "taps": None})):
        rows = check_frame(held, run, th)
        (row,) = rows[rows["check"] == "taps"].to_dict("records")
        assert row["passed"] is False
        notes[name] = row["note"]
    assert notes == {"only b": "no taps compared in this run: a ran no trial",
                     "both": "no taps in this run (the case's capture.taps)"}
    # its determinism row said only 'not checked in this run', where a one-run variant's gives the reason
    rows = check_frame(held, {**only_b, "determinism": {**summary["determinism"], "a": None}}, th)
    (row,) = rows[(rows["check"] == "determinism") & rows["subject"].str.startswith("a:")].to_dict("records")
    assert (row["passed"], row["note"]) == (False, "not checked in this run (a ran no trial)")



def only_b_run(run: Path, outputs: bool = False) -> Path:
    """A rendered `perfkit run case.yaml --only b` of the fixture case: b's trials alone, numbered as such a run
    numbers them (from 0, one a round; tests/runner's --only runs), so it reads as finished; ``outputs``: each
    trial's rank 0 wrote frames."""
    from run_fixtures import write_run  # (where used, as this file's other tests import it)

    from perfkit.run import finish  # (the run stage, loaded by the tests that render a run)

    only = [{**t, "index": i, "round": i, "dir": f"trials/{i:02d}-b"}
            for i, t in enumerate(t for t in ab_trials() if t["variant"] == "b")]
    write_run(run, only, {t["index"]: shifted(frames(), 1, 20) for t in only} if outputs else {})
    (run / "run.json").write_text(json.dumps({**json.loads((run / "run.json").read_text()), "only": "b"}))
    finish.render(run)
    return run


def test_a_variant_left_out_by_only_is_said_not_run_not_unfinished(baseline, tmp_path):
    """A newcomer's `perfkit run case.yaml --only b`, checked: a's ranks row read "not checked in this run (no trial
    of this variant finished)", as if a's trials had run and failed; a was never run (run.json's only). Its
    determinism row read "(a ran no trial)" and the b/a timing row "no ratio (a side has no timed trials)", neither
    naming --only; the three say it in one phrase. The rows still fail: nothing in this run accepted what the
    baseline held. b's trials are numbered as such a run numbers them (b's alone, from 0), so the run reads as
    finished: no trials row, and its report does not offer --resume."""
    run = only_b_run(tmp_path / "only-b")
    res = check(run, "--baseline", baseline)
    assert res.exit_code == 1, res.output
    assert not [line for line in failing(res.output) if line.startswith("FAIL trials")], res.output
    (row,) = [line for line in failing(res.output) if line.startswith("FAIL ranks")]
    assert row.endswith("not checked in this run (not run, the run was started with --only b)"), row
    (row,) = [line for line in failing(res.output) if line.startswith("FAIL determinism a: ")]
    assert row.endswith("; not checked in this run (not run, the run was started with --only b)"), row
    rows = [line for line in failing(res.output) if line.startswith("FAIL timing ")]
    assert [r.split(":")[0] for r in rows] == ["FAIL timing      b/a step_ms", "FAIL timing      b/a natural_step_ms"]
    assert all(r.endswith("; no ratio (a: not run, the run was started with --only b)") for r in rows), rows
    report = (run / "report.md").read_text()
    assert "rank consistency (a: not checked: not run, the run was started with --only b)" in report
    assert "--resume" not in report and "- the run was stopped before its plan was done" not in report


def test_a_run_with_only_names_it_on_its_quality_taps_and_report_ratio_rows(baseline, tmp_path):
    """The same `--only b` run, its outputs and taps on: its quality row read "no comparable outputs in this run",
    its taps row "no taps compared in this run: a ran no trial" and report.md's Timing lines "no ratio (a side has
    no timed trials)", none naming --only as the determinism, ranks and timing rows do. The trials are numbered as
    such a run numbers them (b's alone, from 0), so the run reads as finished; the rows still fail."""
    run = only_b_run(tmp_path / "only-b", outputs=True)
    held = tmp_path / "held.json"  # the fixture's baseline, its taps held (none departing)
    held.write_text(json.dumps({**json.loads(baseline.read_text()), "taps": {"variant": "b", "first": "none"}}))
    res = check(run, "--baseline", held)
    assert res.exit_code == 1, res.output
    said = "a: not run, the run was started with --only b"
    assert not [line for line in failing(res.output) if line.startswith("FAIL trials")], res.output
    (row,) = [line for line in failing(res.output) if line.startswith("FAIL quality")]
    assert row.endswith(f"; no comparable outputs in this run ({said})"), row
    (row,) = [line for line in failing(res.output) if line.startswith("FAIL taps")]
    assert row.endswith(f"; no taps compared in this run ({said})"), row
    lines = [line for line in (run / "report.md").read_text().splitlines() if line.startswith("- b/a, ")]
    assert [line.split(": ", 1)[1].split(" -> ")[0] for line in lines] == [f"no ratio ({said})"] * 2, lines


def test_a_run_with_only_names_it_in_its_report_s_verdict_quality_and_not_verified(tmp_path):
    """The same `--only b` run, its outputs on, b's rank 0 writing them: report.md's verdict read "a variant has no
    timed steps", its Quality section "No comparable outputs." and its Not verified "the B/A timing verdict: unknown
    (a variant has no timed steps)" and "output quality (no comparable outputs: `capture.outputs` is on, but no
    trial's rank 0 wrote a video, array or image folder ...)", the last wrong: b wrote them, a was never run. Each
    names the variant --only left out, in the phrase the check's rows give; a run without --only whose a ran no
    trial keeps the old words."""
    from perfkit.run import finish  # (the run stage, loaded by the tests that render a run)

    run = only_b_run(tmp_path / "only-b", outputs=True)
    said = "a: not run, the run was started with --only b"
    lines = (run / "report.md").read_text().splitlines()
    assert f"**No verdict**: a variant has no timed steps ({said})." in lines, lines
    assert f"No comparable outputs ({said})." in lines, lines
    assert f"- output quality (no comparable outputs: {said})" in lines, lines
    assert f"- the B/A timing verdict: unknown ({said})" in lines, lines
    assert not [line for line in lines if "rank 0 wrote" in line], lines
    # the same trials, run.json's only unset: nothing says --only
    (run / "run.json").write_text(json.dumps({**json.loads((run / "run.json").read_text()), "only": None}))
    finish.render(run)
    lines = (run / "report.md").read_text().splitlines()
    assert "**No verdict**: a variant has no timed steps." in lines and "No comparable outputs." in lines, lines
    assert "- the B/A timing verdict: unknown (a variant has no timed steps)" in lines, lines
    assert [line for line in lines if line.startswith("- output quality (")] == [
        "- output quality (no comparable outputs: `capture.outputs` is on, but no trial's rank 0 wrote a video, array "
        "or image folder to its outputs folder, `perfkit.record.outputs_dir()`)"], lines
    assert not [line for line in lines if "--only" in line], lines


def test_a_command_case_s_devices_are_the_ones_its_case_asked_for(tmp_path):
    """A command case probes no devices (env.json's devices null): its baseline keeps the devices its case asked
    for, and a run of the case on 2 devices against a baseline of 4 is refused, not gated (a newcomer's: its cost
    rows failed at -20% bytes sent, as if the program had changed)."""
    from run_fixtures import write_run

    from perfkit.run import finish

    runs = {}
    for devices in (4, 2):
        run = write_run(tmp_path / f"d{devices}", ab_trials(), case_extra={"devices": devices})
        env = json.loads((run / "env.json").read_text())
        (run / "env.json").write_text(json.dumps({**env, "devices": None}))
        finish.render(run)
        runs[devices] = run
    path = tmp_path / "baseline.json"
    assert check(runs[4], "--baseline", path, "--update-baseline").exit_code == 0
    assert json.loads(path.read_text())["from"]["devices"] == {"count": 4, "process_count": 1, "platform": None,
                                                               "asked": True}
    assert check(runs[4], "--baseline", path).exit_code == 0
    res = check(runs[2], "--baseline", path)
    assert res.exit_code == 2 and res.output.startswith(
        f"perfkit: {path}: from.devices: a baseline run on 4 devices, but the run ran on 2 devices"), res.output


def test_ranks_a_one_process_command_read_one_program_as_a_models_do(baseline, tmp_path):
    """The fixture is a one-process command case: one rank, which no other can part from, as a model case's one
    process (it read 'not checked' there, 'yes' in a model case). Against its own summary.json and against a
    baseline that recorded them consistent the rows read yes and pass."""
    rows = {}
    for recorded in (None, True):
        against = tmp_path / "base" / "summary.json"
        if recorded is not None:
            claimed = json.loads(baseline.read_text()) | {"ranks": {"a": recorded, "b": recorded}}
            baseline.write_text(json.dumps(claimed))
            against = baseline
        res = check(tmp_path / "base", "--baseline", against)
        rows[recorded] = (res.exit_code, [line for line in res.output.splitlines() if " ranks " in line])
    for recorded in (None, True):
        assert rows[recorded][0] == 0, rows
        assert [line.split(" (")[0] for line in rows[recorded][1]] == [
            f"ok   ranks       {v}: one program on every rank: yes" for v in ("a", "b")]


def _level(level: int, metric: str, ratio: float, lo: float | None, hi: float | None) -> dict:
    """A serve summary's comparison row of b against a (``summary["serve"]["comparisons"]``)."""
    return {"variant": "b", "level": level, "metric": metric, "baseline_median": 1.0, "variant_median": ratio,
            "ratio": ratio, "ci_lo": lo, "ci_hi": hi, "verdict": "unknown", "n_a": 2, "n_b": 2}


def test_a_serve_case_gates_every_level_s_latency_and_outputs_a_minute(tmp_path, baseline):
    """A newcomer's: batched served 3.6x the outputs a minute of serial at concurrency 4, then 1.0x, and the check
    passed, gating only the single request's latency. The baseline keeps every level; latency fails where its CI
    lies wholly above baseline x 1.1, outputs a minute (more is better) where its CI lies wholly below
    baseline / 1.1 (3.6 / 1.1 = 3.2727...)."""
    from perfkit.errors import BadInput
    from perfkit.report.check import same_setup

    summary = json.loads((tmp_path / "base" / "summary.json").read_text()) | {"kind": "serve"}
    levels = [_level(1, "latency_ms", 1.0, 0.98, 1.02), _level(1, "outputs_per_min", 1.0, 0.97, 1.03),
              _level(4, "latency_ms", 0.27, 0.26, 0.28), _level(4, "outputs_per_min", 3.6, 3.5, 3.7)]
    base = baseline_from_summary(summary | {"serve": {"comparisons": levels}})
    assert base["serve"][3] == {"variant": "b", "level": 4, "metric": "outputs_per_min", "ratio": 3.6, "ci": [3.5, 3.7]}
    th = Thresholds(0.1, 0.5)

    def timing(latency4: tuple, outputs4: tuple) -> dict:
        run = summary | {"serve": {"comparisons": levels[:2] + [_level(4, "latency_ms", *latency4),
                                                                _level(4, "outputs_per_min", *outputs4)]}}
        rows = check_frame(base, run, th)
        return {r["subject"]: r for r in rows[rows["check"] == "timing"].to_dict("records")}

    rows = timing((0.99, 0.73, 1.4), (1.0, 0.98, 1.02))  # the regression: all the batching's gain gone
    assert [s for s, r in rows.items() if not r["passed"]] == ["b/a latency_ms at concurrency 4",
                                                               "b/a outputs_per_min at concurrency 4"]
    assert rows["b/a outputs_per_min at concurrency 4"]["limit"] == pytest.approx(3.6 / 1.1)
    assert rows["b/a latency_ms at concurrency 4"]["limit"] == pytest.approx(0.297)
    # just inside each limit (CI low end 0.29 <= 0.297, high end 3.28 >= 3.2727), then just outside
    assert all(r["passed"] for r in timing((0.35, 0.29, 0.4), (3.2, 3.1, 3.28)).values())
    rows = timing((0.35, 0.30, 0.4), (3.2, 3.1, 3.27))
    assert [s for s, r in rows.items() if not r["passed"]] == ["b/a latency_ms at concurrency 4",
                                                               "b/a outputs_per_min at concurrency 4"]
    lines = text_lines(check_frame(base, summary | {"serve": {"comparisons": levels[:3] + [
        _level(4, "outputs_per_min", 1.0, 0.98, 1.02)]}}, th))
    assert failing("\n".join(lines)) == [
        "FAIL timing      b/a outputs_per_min at concurrency 4: 1.000 (baseline 3.600; required CI high end >= 3.273); "
        "limit: the baseline / 1.1 (ratio_tolerance 0.1); 95% CI [0.980, 1.020] lies below the limit: fewer outputs "
        "a minute than the baseline"]
    # a level missing from the run, or a side without a CI, fails too
    rows = timing((0.27, 0.26, 0.28), (3.6, None, None))
    assert rows["b/a outputs_per_min at concurrency 4"]["passed"] is False
    # one server process a side in the baseline's run and in this one: neither measured the spread of outputs a
    # minute, so the row is said not checked and passes (a serve run checked against its own summary.json failed)
    alone = [_level(1, "latency_ms", 0.94, 0.59, 1.53), _level(1, "outputs_per_min", 1.065, None, None)]
    rows = check_frame(baseline_from_summary(summary | {"serve": {"comparisons": alone}}),
                       summary | {"serve": {"comparisons": alone}}, th)
    row = rows[rows["subject"] == "b/a outputs_per_min at concurrency 1"].iloc[0]
    assert bool(row["passed"]) and row["note"] == (
        "not checked: neither run measured its spread (outputs a minute need two processes a side: server_restarts "
        ">= 2)")
    # a serve baseline written before the levels were kept would pass any loss of throughput: refused
    stale = {k: v for k, v in base.items() if k != "serve"}
    with pytest.raises(BadInput, match="serve case's baseline without its levels"):
        same_setup(stale, summary, "serve.json")


def test_a_baseline_that_checks_no_timing_or_holds_an_incomplete_run_is_refused(baseline, make_run, tmp_path):
    """A newcomer's: a baseline edited to no comparisons passed with no timing row, and a run's summary.json was
    taken as a baseline where that run had failed trials or was stopped, which --update-baseline refuses (its
    refusal said "failed trials or was stopped", not which). Each is one line, exit 2, saying which."""
    run = tmp_path / "base"
    untimed = tmp_path / "untimed.json"
    untimed.write_text(json.dumps(json.loads(baseline.read_text()) | {"comparisons": []}))
    trials = ab_trials() + [trial(6, "b", [], status="crashed",
                                  ranks=[{"rank": 0, "exit_code": 7, "running_at_end": False, "steps_done": 0,
                                         "last_step_ms": None, "last_mark": None}])]
    crashed = make_run("crashed", trials=trials)
    stopped = make_run("stopped")
    summary = json.loads((stopped / "summary.json").read_text())
    (stopped / "summary.json").write_text(json.dumps(summary | {"interrupted": True}))
    for args, said in [
        ((run, "--baseline", untimed), f"{untimed}: comparisons: a baseline with no B/A ratio checks no timing: "
         "write it from a run that compared its variants, with --update-baseline"),
        ((run, "--baseline", crashed / "summary.json"), f"{crashed / 'summary.json'}: trials.failed: a run's "
         "summary.json, but that run had 1 failed or hung trial (trial 6 (b) crashed): a baseline needs a "
         "complete run"),
        ((run, "--baseline", stopped / "summary.json"), f"{stopped / 'summary.json'}: interrupted: a run's "
         "summary.json, but that run was stopped before its plan finished: a baseline needs a complete run"),
        ((crashed, "--baseline", tmp_path / "new.json", "--update-baseline"),
         f"{crashed}: the run had 1 failed or hung trial (trial 6 (b) crashed): a baseline needs a complete run"),
        ((stopped, "--baseline", tmp_path / "new.json", "--update-baseline"),
         f"{stopped}: the run was stopped before its plan finished: a baseline needs a complete run")]:
        res = check(*args)
        assert (res.exit_code, res.output) == (2, f"perfkit: {said}\n")
    assert not (tmp_path / "new.json").exists()


@pytest.mark.parametrize("change, said", [
    (lambda c: c.update(ratio=-1),
     "comparisons[0].ratio: -1 is not a ratio of two times or rates (a finite number > 0)"),
    (lambda c: c.update(ratio=0), "comparisons[0].ratio: 0 is not a ratio of two times or rates"),
    # (NaN as JSON's NaN, which Python's reader takes: no number, as the schema has it)
    (lambda c: c.update(ratio=float("nan")), "comparisons[0].ratio: nan is not of type 'number'"),
    (lambda c: c.update(ci=[1.5, 1.2]), "comparisons[0].ci: [1.5, 1.2]: its low end is above its high end"),
    (lambda c: c.update(ci=[1.2]), "comparisons[0].ci: [1.2] is not a ratio's CI: [low, high], finite and > 0"),
    (lambda c: c.update(ci=[-0.5, 1.2]), "comparisons[0].ci: [-0.5, 1.2] is not a ratio's CI"),
], ids=["negative", "zero", "nan", "low-above-high", "one-end", "negative-ci"])
def test_an_impossible_baseline_ratio_is_refused(baseline, tmp_path, change, said):
    """A newcomer's: a baseline ratio of -1 passed the schema and failed every run ("required CI low end <=
    -1.100"), a CI [1.5, 1.2] was taken as it came. Bad input, one line naming the file and the entry."""
    data = json.loads(baseline.read_text())
    change(data["comparisons"][0])
    baseline.write_text(json.dumps(data))  # (NaN as JSON's NaN: Python's reader takes it)
    res = check(tmp_path / "base", "--baseline", baseline)
    assert res.exit_code == 2 and res.output.splitlines() == [res.output.strip()], res.output
    assert res.output.startswith(f"perfkit: {baseline}: {said}"), res.output


@pytest.mark.parametrize("change, said", [
    (lambda s: s["comparisons"][0].update(ci=[1.5, 1.2]), "comparisons[0].ci: [1.5, 1.2]: its low end is above"),
    (lambda s: s["comparisons"][0].update(ci=[-1.0, 0.5]), "comparisons[0].ci: [-1.0, 0.5] is not a ratio's CI"),
    (lambda s: s["comparisons"][0].update(ratio=-1), "comparisons[0].ratio: -1 is not a ratio of two times"),
], ids=["low-above-high", "negative-ci", "negative-ratio"])
def test_an_impossible_ratio_in_the_run_s_summary_is_refused(baseline, tmp_path, change, said):
    """A summary.json edited by hand is held to what a baseline is held to: its CI [1.5, 1.2] failed the run as
    slower (exit 1), a CI [-1.0, 0.5] passed it "faster". Bad input, one line naming the file and the entry."""
    path = tmp_path / "base" / "summary.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    res = check(tmp_path / "base", "--baseline", baseline)
    assert res.exit_code == 2 and res.output.splitlines() == [res.output.strip()], res.output
    assert res.output.startswith(f"perfkit: {path}: {said}"), res.output


def test_an_impossible_serve_level_ratio_in_the_run_s_summary_is_refused(tmp_path):
    """A serve level's CI is its ``ci_lo`` and ``ci_hi``: named so."""
    from perfkit.report.check import checks_run_ratios

    summary = {"comparisons": [], "serve": {"comparisons": [_level(1, "latency_ms", 1.0, 0.9, 1.1),
                                                            _level(4, "latency_ms", 0.3, 0.4, 0.2)]}}
    with pytest.raises(BadInput) as exc:
        checks_run_ratios(summary, tmp_path / "summary.json")
    assert exc.value.line() == (f"{tmp_path / 'summary.json'}: serve.comparisons[1].ci_lo, ci_hi: [0.4, 0.2]: its low "
                                "end is above its high end (`perfkit report " + str(tmp_path) + "` writes it again)")


@pytest.mark.parametrize("flag, value, said", [
    ("--ratio-tolerance", "nan", "nan is not a finite number."), ("--ratio-tolerance", "inf", "inf is not a finite "
     "number."), ("--psnr-drop", "nan", "nan is not a finite number."), ("--cost-tolerance", "inf", "inf is not a "
     "finite number."), ("--min-psnr", "nan", "nan is not a finite number.")])
def test_a_threshold_that_is_no_finite_number_is_refused(baseline, tmp_path, flag, value, said):
    """nan passed click's range (nan < 0 is false) and read "limit: the baseline x nan"; a tolerance of inf would
    pass any regression. So from the flags, and from the case's check: block (YAML's .nan, .inf)."""
    from perfkit.rundata import case as case_mod

    res = check(tmp_path / "base", "--baseline", baseline, flag, value)
    # (CliRunner names the program "cli", not perfkit)
    assert (res.exit_code, res.output) == (
        2, f"cli check: Invalid value for '{flag}': {said} See 'cli check --help'.\n")
    case = tmp_path / "base" / "case.yaml"
    text = case.read_text()
    for block, field, words in [("{ratio_tolerance: .nan}", "ratio_tolerance", "a finite number >= 0"),
                                ("{cost_tolerance: .inf}", "cost_tolerance", "a finite number >= 0"),
                                ("{min_psnr_db: .nan}", "min_psnr_db", "a finite number (dB)")]:
        case.write_text(text + f"check: {block}\n")
        with pytest.raises(BadInput, match=rf"case.yaml: check\.{field}: must be {re.escape(words)}$"):
            case_mod.load(case)


def test_a_stopped_run_s_row_says_so_and_one_device_is_singular(tmp_path, baseline):
    """A newcomer's: a stopped run read "FAIL trials failed or hung trials: 0 (baseline 0; required 0); the run was
    stopped early" (0 = 0, yet FAIL); a command case asking for 1 device read "a baseline run on 1 devices"."""
    from perfkit.report.check import _devices_text

    summary = json.loads((tmp_path / "base" / "summary.json").read_text()) | {"interrupted": True}
    lines = text_lines(check_frame(json.loads(baseline.read_text()), summary, Thresholds(0.1, 0.5)))
    assert lines[:2] == [
        "ok   trials      failed or hung trials: 0 (baseline 0; required 0)",
        "FAIL trials      the run finished its plan: no (baseline yes; required yes); the run was stopped before its "
        "plan finished (Ctrl-C, SIGTERM): the trials it did not run are missing from its figures (`perfkit run "
        "--resume` finishes it)"]
    assert failing("\n".join(lines)) == lines[1:2]
    asked = {"process_count": 1, "platform": None, "asked": True}
    assert [_devices_text(asked | {"count": n}, counts_only=True) for n in (1, 2)] == ["1 device", "2 devices"]


def test_a_variant_run_once_is_no_evidence_of_determinism(baseline, make_run, tmp_path):
    """A newcomer's one-round run: its report said 'a: 1 runs bit-identical', `--update-baseline` recorded the
    repeats as bit-identical and a later one-run check passed them: one run compares with nothing."""
    once = make_run("once", trials=ab_trials()[:2], case_extra={"repeats": {"min": 1, "max": 1}})
    assert "Determinism: a: 1 run, nothing to compare (sha256 " in (once / "report.md").read_text()
    # summary.json says so too: not known, where it said bit-identical (a reviewer's)
    determinism = json.loads((once / "summary.json").read_text())["determinism"]
    assert {v: (d["runs"], d["bit_identical"]) for v, d in determinism.items()} == {"a": (1, None), "b": (1, None)}
    res = check(once, "--baseline", baseline)
    assert [line.split(":")[0] for line in failing(res.output)][-2:] == ["FAIL determinism a", "FAIL determinism b"]
    assert failing(res.output)[-1].endswith("not checked in this run (one good run: nothing to compare, at least two "
                                            "repeats check it)")
    path = tmp_path / "once.json"
    assert check(once, "--baseline", path, "--update-baseline").exit_code == 0
    assert json.loads(path.read_text())["determinism"] == {"a": None, "b": None}


def test_a_pipe_in_a_figure_s_name_keeps_the_step_summary_s_table_whole():
    # a tap or output file named by the user's program may hold "|", which would split a Markdown cell in two
    frame = pd.DataFrame([{"check": "taps", "subject": "b: first tap departing from a", "unit": "",
                           "baseline": "none", "current": "attn|k at step 0", "limit": "none", "passed": False,
                           "inconclusive": False, "note": "the report's Quality section: First departure"}],
                         columns=COLUMNS, dtype=object)
    frame["passed"] = frame["passed"].astype(bool)
    row = markdown(frame, "fixture", "line")[-2]
    assert row == ("| **FAIL** | taps | b: first tap departing from a | attn\\|k at step 0 | - | none | none | "
                   "the report's Quality section: First departure |"), row
    frame.loc[0, "current"] = "attn\nk at step 0"  # a line end would end the row
    assert markdown(frame, "fixture", "line")[-2].startswith(
        "| **FAIL** | taps | b: first tap departing from a | attn k at step 0 | - | none |")


def test_a_passing_timing_row_whose_ci_reaches_past_its_limit_says_it_could_not_rule_a_regression_out(
        baseline, tmp_path):
    """A newcomer's B 3.4x slower passed on a CI of [0.61, 12.9] (two repeats), its row reading as a clean pass.
    It still passes (the gate fails a regression it can show), but the row, the step summary's verdict and the
    JSON say the run could not rule one out; a CI wholly inside the limit says nothing of the kind."""
    from perfkit.report.check import _timing_row

    base = json.loads(baseline.read_text())
    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    base["comparisons"] = [c for c in base["comparisons"] if c["metric"] == "step_ms"]
    for c in summary["comparisons"]:
        c |= {"ratio": 3.38, "ci": [0.61, 12.9]} if c["metric"] == "step_ms" else {}
    frame = check_frame(base, summary, Thresholds(0.1, 0.5))
    row = frame[frame.check == "timing"].iloc[0]
    limit = base["comparisons"][0]["ratio"] * 1.1
    assert (row.passed, row.inconclusive) == (True, True)
    assert row.note.endswith(f"; passed, not ruled out: CI reaches 12.900, above the limit {limit:.3f}; "
                             "more repeats would tell")
    assert frame.inconclusive.sum() == 1  # the other rows ruled theirs out, or are not ratios
    lines = markdown(frame, "fixture", "line")
    assert lines[0] == (f"### perfkit check, fixture: passed ({len(frame)} rows); **1 row could not rule a "
                        "regression out: more repeats would tell**")
    assert any(line.startswith("| **ok, not ruled out** | timing | b/a step_ms | 3.380 |") for line in lines)
    res = check(tmp_path / "base", "--baseline", baseline, "--json")  # a clean pass: nothing to say
    assert not any(r["inconclusive"] for r in json.loads(res.output)["rows"]), res.output
    assert "could not rule" not in check(tmp_path / "base", "--baseline", baseline).output.splitlines()[-1]
    # the command's own text and JSON, on the wide run
    (tmp_path / "base" / "summary.json").write_text(json.dumps(summary))
    last = check(tmp_path / "base", "--baseline", baseline).output.splitlines()[-1]
    assert last.startswith("check: passed, 0 of ") and last.endswith(
        f" rows failed against {baseline}; 1 row could not rule a regression out: more repeats would tell"), last
    rows = json.loads(check(tmp_path / "base", "--baseline", baseline, "--json").output)["rows"]
    assert [r["subject"] for r in rows if r["inconclusive"]] == ["b/a step_ms"], rows
    # outputs a minute (more is better): its CI reaching below the floor
    th = Thresholds(0.1, 0.5)
    wide = _timing_row("b/a outputs_per_min at concurrency 4", 1.0, {"ratio": 1.0, "ci": [0.5, 1.6]}, th)
    assert (wide["passed"], wide["inconclusive"]) == (True, True)
    assert wide["note"].endswith("; passed, not ruled out: CI reaches 0.500, below the limit 0.909; more repeats "
                                 "would tell")
    assert not _timing_row("b/a outputs_per_min at concurrency 4", 1.0, {"ratio": 1.0, "ci": [0.95, 1.05]},
                           th)["inconclusive"]


def test_a_ratio_s_baseline_shows_the_decimals_its_limit_follows_from():
    """A newcomer's, on the demo's gate: "1.887 (baseline 1.654; required CI low end <= 3.307)", where 1.654 x 2
    reads 3.308 (the baseline is 1.65364, its limit 3.30727; natural steps: 1.589 x 2 = 3.178 against 3.179). The
    baseline gets the decimals it takes for the limit shown to follow from it; where 3 do, it keeps 3."""
    from perfkit.report.check import _timing_row

    def line(base: float, tol: float, subject: str = "sp/tp step_ms") -> str:
        row = _timing_row(subject, base, {"ratio": 1.887, "ci": [1.504, 2.159]}, Thresholds(tol, 0.5))
        return text_lines(pd.DataFrame([row]))[0]

    assert "(baseline 1.6536; required CI low end <= 3.307)" in line(1.6536375436174706, 1.0)  # 3.30727
    assert "(baseline 1.5894; required CI low end <= 3.179)" in line(1.5894004928275776, 1.0)  # 3.17880
    assert "(baseline 1.654; required CI low end <= 3.308)" in line(1.654, 1.0)
    assert "(baseline 1.654; required CI low end <= 1.819)" in line(1.6536375436174706, 0.1)  # 1.81900, 1.8194
    # more outputs a minute is better: the baseline / (1 + tolerance); 0.90556 / 1.1 = 0.82324, 0.906 / 1.1 = 0.82364
    per_min = "b/a outputs_per_min at concurrency 4"
    assert "(baseline 0.910; required CI high end >= 0.827)" in line(0.91, 0.1, per_min)
    assert "(baseline 0.9056; required CI high end >= 0.823)" in line(0.90556, 0.1, per_min)
    frame = pd.DataFrame([_timing_row("sp/tp step_ms", 1.6536375436174706, {"ratio": 1.887, "ci": [1.504, 2.159]},
                                      Thresholds(1.0, 0.5))])
    frame["passed"], frame["inconclusive"] = frame["passed"].astype(bool), False
    assert "| sp/tp step_ms | 1.887 | [1.504, 2.159] | 1.6536 | CI low end <= 3.307 |" in markdown(
        frame, "quickstart", "line")[-2]


def test_a_timing_row_s_ci_and_limit_show_the_digits_its_verdict_follows_from():
    """A CI's low end 1.10004 against the limit 1.1 (the baseline 1.0 x 1.1) fails the row, which read "95% CI
    [1.100, 1.300] lies above the limit" and "required CI low end <= 1.100": the end shown equal to the limit it
    failed. The CI and the limit take the decimals, 3 or more, that set the end apart from the limit as the verdict
    does, in the note, the rule and the step summary's CI column alike."""
    from perfkit.report.check import _timing_row

    row = _timing_row("b/a step_ms", 1.0, {"ratio": 1.2, "ci": [1.10004, 1.3]}, Thresholds(0.1, 0.5))
    assert not row["passed"]
    assert row["note"] == ("limit: the baseline x 1.1 (ratio_tolerance 0.1); 95% CI [1.10004, 1.30000] lies above "
                           "the limit: slower than the baseline")
    frame = pd.DataFrame([row], columns=COLUMNS, dtype=object).fillna({"inconclusive": False})
    frame["passed"], frame["inconclusive"] = frame["passed"].astype(bool), frame["inconclusive"].astype(bool)
    (line,) = text_lines(frame)
    assert line.startswith("FAIL timing      b/a step_ms: 1.200 (baseline 1.000; required CI low end <= 1.10000)")
    assert "| b/a step_ms | 1.200 | [1.10004, 1.30000] | 1.000 | CI low end <= 1.10000 |" in markdown(
        frame, "fixture", "line")[-2]
    # a CI whose ends lie clear of the limit keeps 3 decimals
    assert "95% CI [1.050, 1.300]; passed, not ruled out: CI reaches 1.300, above the limit 1.100" in _timing_row(
        "b/a step_ms", 1.0, {"ratio": 1.2, "ci": [1.05, 1.3]}, Thresholds(0.1, 0.5))["note"]


def test_a_psnr_row_shows_the_digits_its_verdict_follows_from():
    """49.496 dB against a baseline of 50 dB less 0.5 (limit 49.5) fails, and read "49.50 dB (baseline 50.00 dB;
    required >= 49.50 dB); 0.50 dB below the baseline's (psnr_drop_db 0.5)": a figure shown at its limit, failing.
    The row's dB take the decimals, 2 or more, that set the figure apart from its limit (49.496, 49.500), and the
    drop its own (0.504); clear of the limit, 2."""
    from perfkit.report.check import _psnr_row

    th = Thresholds(0.1, 0.5)

    def line(current: float, t: Thresholds = th) -> str:
        frame = pd.DataFrame([_psnr_row("PSNR b vs a", 50.0, current, t)], columns=COLUMNS, dtype=object)
        frame["passed"] = frame["passed"].astype(bool)
        frame["inconclusive"] = False
        (text,) = text_lines(frame)
        figure = text.split(": ")[1].split(" (")[0]  # the step summary shows it alike
        assert markdown(frame, "f", "line")[-2].startswith(
            f"| {'ok' if frame.passed[0] else '**FAIL**'} | quality | PSNR b vs a | {figure} | - | ")
        return text

    assert line(49.496) == ("FAIL quality     PSNR b vs a: 49.496 dB (baseline 50.000 dB; required >= 49.500 dB); "
                            "0.504 dB below the baseline's (psnr_drop_db 0.5)")
    assert line(49.8) == "ok   quality     PSNR b vs a: 49.80 dB (baseline 50.00 dB; required >= 49.50 dB)"
    assert line(41.996, Thresholds(0.1, 9.0, min_psnr_db=42.0)) == (
        "FAIL quality     PSNR b vs a: 41.996 dB (baseline 50.000 dB; required >= 42.000 dB); 0.004 dB below "
        "min_psnr_db")


def test_a_timing_row_whose_baseline_s_own_ci_reaches_past_its_limit_says_so(baseline):
    """Two equal variants: a 4-round baseline read b/a 0.865 [0.845, 1.098], and a 12-round run of the same code,
    0.999 [0.961, 1.029], failed as slower (limit 0.865 x 1.1 = 0.9515). The limit is the baseline's ratio alone;
    where the baseline's own CI reaches past it, the row says the baseline was no surer than the tolerance. Here
    0.9 [0.8, 1.1], limit 0.99; the run 1.0 [0.995, 1.005] fails, as the contract has it, and says why."""
    data = json.loads(baseline.read_text())
    data["comparisons"] = [{"variant": "b", "metric": "step_ms", "ratio": 0.9, "ci": [0.8, 1.1],
                            "look_confidence": 0.95, "looks_at": None}]
    summary = {"baseline": "a", "comparisons": [{"variant": "b", "metric": "step_ms", "ratio": 1.0,
                                                 "ci": [0.995, 1.005]}]}
    from perfkit.report.check import _timing_rows

    (row,) = _timing_rows(data, summary, Thresholds(0.1, 0.5))
    assert not row["passed"]
    assert row["note"] == (
        "limit: the baseline x 1.1 (ratio_tolerance 0.1); 95% CI [0.995, 1.005] lies above the limit: slower than "
        "the baseline; the baseline's own 95% CI [0.800, 1.100] reaches past the limit 0.990: its ratio is no "
        "surer than the tolerance (write the baseline from a run whose CI is narrower: docs/ci.md)")
    # a baseline whose CI lies within its limit (the fixture's: 1.2 [1.17, 1.23], limit 1.32) adds nothing
    (row,) = _timing_rows({"comparisons": [{"variant": "b", "metric": "step_ms", "ratio": 1.2, "ci": [1.17, 1.23]}]},
                          summary, Thresholds(0.1, 0.5))
    assert "baseline's own" not in row["note"] and not row["inconclusive"]


def test_a_timing_row_against_a_baseline_no_surer_than_its_tolerance_cannot_tell(baseline, tmp_path):
    """The baseline's own CI reaching past the limit was said in the note alone: the row's verdict read as sure,
    inconclusive false, and a script reading --json, or the step summary's verdict, could not tell such a row from
    one that shows a regression. The gate cannot tell, failing or passing: the row is inconclusive whatever its
    verdict (a failing one still fails the gate: it needs a surer baseline either way), and the text's last line
    and the step summary count and mark it, naming the remedy. The fixture's b/a 1.2 [1.17, 1.23] with its
    baseline's CI widened to [1.0, 1.5], past the limit 1.32: a run read 1.2 passes; one read 1.5 [1.45, 1.55]
    fails."""
    data = json.loads(baseline.read_text())
    data["comparisons"] = [c | {"ci": [1.0, 1.5]} for c in data["comparisons"] if c["metric"] == "step_ms"]
    unsure = tmp_path / "unsure.json"
    unsure.write_text(json.dumps(data))
    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    tail = "1 row could not tell: its baseline's CI reaches past its limit (write the baseline from more repeats)"
    for ratio, ci, passed, mark in [(1.2, [1.17, 1.23], True, "**ok, baseline unsure**"),
                                    (1.5, [1.45, 1.55], False, "**FAIL, baseline unsure**")]:
        for c in summary["comparisons"]:
            c |= {"ratio": ratio, "ci": ci} if c["metric"] == "step_ms" else {}
        (tmp_path / "base" / "summary.json").write_text(json.dumps(summary))
        res = check(tmp_path / "base", "--baseline", unsure, "--json")
        assert res.exit_code == (0 if passed else 1), res.output
        (row,) = [r for r in json.loads(res.output)["rows"] if r["inconclusive"]]
        assert (row["subject"], row["passed"]) == ("b/a step_ms", passed)
        assert check(tmp_path / "base", "--baseline", unsure).output.splitlines()[-1].endswith(f"; {tail}")
        lines = markdown(check_frame(data, summary, Thresholds(0.1, 0.5)), "fixture", "line")
        assert lines[0].endswith(f"; **{tail}**"), lines[0]
        assert any(line.startswith(f"| {mark} | timing | b/a step_ms |") for line in lines), lines


def test_update_baseline_says_where_the_baseline_it_writes_cannot_tell(make_run, tmp_path):
    """--update-baseline wrote a baseline whose ratio's CI reached past the limit it sets with nothing said: the gate
    it was written for then could not tell a regression by it (a quickstart run on a loaded machine, sp/tp 2.466
    [1.300, 6.607], limit 4.933). It says so, on stderr, and writes it (exit 0). The fixture's b/a 1.2 [1.170,
    1.230]: at ratio_tolerance 0.01 the limit is 1.212, which the CI's high end passes; at 0.1 (1.32) nothing is
    said."""
    run = make_run("base")
    own = {c["metric"]: c["ci"] for c in json.loads((run / "summary.json").read_text())["comparisons"]}
    res = check(run, "--baseline", tmp_path / "tight.json", "--update-baseline", "--ratio-tolerance", "0.01")
    assert res.exit_code == 0 and (tmp_path / "tight.json").is_file(), res.output
    lo, hi = own["step_ms"]
    assert res.stderr.splitlines()[0] == (
        f"perfkit: note: b/a step_ms: its 95% CI [{lo:.3f}, {hi:.3f}] reaches past the limit 1.212 this baseline sets "
        "(ratio_tolerance 0.01): a check against it cannot tell a regression from its noise (docs/ci.md); a run "
        "of more repeats narrows it"), res.stderr
    res = check(run, "--baseline", tmp_path / "loose.json", "--update-baseline")
    assert res.exit_code == 0 and res.stderr == "", res.stderr
    # a summary.json kept without its case.yaml, which holds the thresholds: written as before, nothing to note by
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "summary.json").write_text((run / "summary.json").read_text())
    res = check(alone, "--baseline", tmp_path / "alone.json", "--update-baseline", "--ratio-tolerance", "0.01")
    assert (res.exit_code, res.stderr) == (0, ""), res.output
    assert json.loads((tmp_path / "alone.json").read_text())["comparisons"] == json.loads(
        (tmp_path / "tight.json").read_text())["comparisons"]
    # checked against a baseline, it needs the thresholds: said so, where it read "case.yaml: no such case file"
    res = check(alone, "--baseline", tmp_path / "loose.json")
    assert (res.exit_code, res.output) == (2, f"perfkit: {alone / 'case.yaml'}: no such file: the gate's thresholds "
                                              "are the run's case's (its check: block, else the defaults); keep "
                                              "case.yaml beside summary.json\n")


def test_a_psnr_row_with_no_baseline_figure_says_it_holds_none(baseline, tmp_path):
    """A baseline whose B-vs-A PSNR is null (its run's B output held NaN where A's did not: no figure) gave the row
    no limit, and it passed as "(baseline -; required -)" with nothing said; it says so now, and a floor
    (min_psnr_db) still holds."""
    data = json.loads(baseline.read_text())
    data["quality"]["psnr_db"] = None
    summary = json.loads((tmp_path / "base" / "summary.json").read_text())
    rows = check_frame(data, summary, Thresholds(0.1, 0.5))
    row = rows[rows.subject == "PSNR b vs a (frames.npy)"].iloc[0]
    assert (bool(row.passed), row.limit, row.note) == (
        True, None, "the baseline has no figure to hold this one to (its run measured none): only min_psnr_db would")
    rows = check_frame(data, summary, Thresholds(0.1, 0.5, min_psnr_db=50.0))
    row = rows[rows.subject == "PSNR b vs a (frames.npy)"].iloc[0]
    assert (bool(row.passed), row.limit) == (False, 50.0)
