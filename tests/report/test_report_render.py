"""report.md from hand-made run directories: its sections in the issue's order, the figures (worked out
here with numpy), the plots it links, a hung trial, `perfkit report` and `--progression`."""

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from run_fixtures import (A_STEPS, ENV, WARMUP, ab_trials, frames, make_run, outputs_for,  # noqa: F401 (a fixture)
                          shifted, trial, write_run)

from perfkit.cli import cli
from perfkit.rundata import case as case_mod

SECTIONS = ["Environment", "Timing", "Quality", "Rank consistency", "Trace breakdown", "Plots", "Reproduce",
            "Not verified"]


def headings(report: str) -> list[str]:
    return re.findall(r"^## (.+)$", report, flags=re.M)


def table_row(report: str, label: str) -> list[str]:
    """The cells of the Markdown table row whose first cell is ``label``."""
    line = next(x for x in report.splitlines() if x.startswith(f"| {label} |"))
    return [c.strip() for c in line.strip("|").split("|")][1:]


def psnr(mse: float) -> float:
    return 10 * math.log10(255 ** 2 / mse)


def test_sections_and_figures(make_run):
    run = make_run()
    report = (run / "report.md").read_text()
    assert headings(report) == SECTIONS

    # Timing: the median of per-trial medians (what the ratio divides) with B's change, then the median and
    # p25 - p75 of all timed steps pooled (warmup dropped), then the natural pass (one a trial).
    a_steps = [s for t in A_STEPS for s in t[WARMUP:]]
    b_steps = [1.2 * s for s in a_steps]
    a_med, b_med = np.median(a_steps), np.median(b_steps)
    a_trials = np.median([np.median(t[WARMUP:]) for t in A_STEPS])
    b_trials = np.median([np.median([1.2 * s for s in t[WARMUP:]]) for t in A_STEPS])
    assert table_row(report, "**step, synced: median of trial medians (ms)**") == [
        f"{a_trials:.2f}", f"{b_trials:.2f} ({b_trials / a_trials - 1:+.1%})"]
    assert table_row(report, "step, synced: median of all timed steps pooled (ms)") == [f"{a_med:.2f}", f"{b_med:.2f}"]
    p25, p75 = np.percentile(a_steps, [25, 75])
    assert table_row(report, "step, synced: p25 - p75 of all timed steps pooled (ms)")[0] == f"{p25:.2f} - {p75:.2f}"
    natural = [0.9 * t[-1] for t in A_STEPS]
    lo, hi = np.percentile(natural, [25, 75])
    assert table_row(report, "step, natural: median of trials (ms, a pass's mean step, one pass each)") == [
        f"{np.median(natural):.2f}", f"{1.2 * np.median(natural):.2f} (+20.0%)"]
    assert table_row(report, "step, natural: p25 - p75 of trials (ms)")[0] == f"{lo:.2f} - {hi:.2f}"
    # a command case's program may compile before its first step: the label said "compile included" (a newcomer's)
    assert table_row(report, "first step (ms)") == ["52.00", "62.40 (+20.0%)"] and "compile included" not in report
    denoise_a, denoise_b = np.median([4.0, 4.01, 4.02]), np.median([4.8, 4.81, 4.82])
    assert table_row(report, "denoise_s (median over trials)") == [f"{denoise_a:.2f} s",
                                                        f"{denoise_b:.2f} s ({denoise_b / denoise_a - 1:+.1%})"]
    assert table_row(report, "timed steps (trials)") == ["12 (3)", "12 (3)"]
    assert "A synced step waits for its results before the next starts; the natural pass runs" in report
    # why natural can read above synced, where a newcomer expected it below (the demo's natural 9.30 ms, synced 7.82)
    assert ("as a program runs them; its figure is that pass's mean step, a slow step counted in full, where the "
            "synced one is a median: so natural can read above synced.") in report
    # the natural ratio's Mann-Whitney ranks each trial's pass, not a median of its steps (a reviewer's)
    natural_line = next(line for line in report.splitlines() if line.startswith("- b/a, natural step time"))
    assert natural_line.endswith("over 3 + 3 trials' natural passes (a pass's mean step; a trial's median where it "
                                 "ran more than one).")
    ratio = np.median([np.median([1.2 * s for s in t[WARMUP:]]) for t in A_STEPS]) / \
        np.median([np.median(t[WARMUP:]) for t in A_STEPS])
    assert f"- b/a, median step time (synced): **{ratio:.3f}**" in report
    assert f"**b is slower than a**: b/a step time **{ratio:.3f}**" in report
    assert "- A: **a**, the old kernel" in report and "- B: **b**, the new kernel" in report

    # Quality: frame 1 has 20 of 192 values moved by 4, the others are identical.
    mse = 20 * 16 / (8 * 8 * 3)
    assert table_row(report, "b vs a")[:3] == [f"{psnr(mse):.2f}", f"{psnr(mse / 3):.2f}", f"{psnr(mse):.2f}"]
    assert "a: 3 runs bit-identical" in report and "b: 3 runs bit-identical" in report

    # Environment, reproduce, not verified: from env.json, run.json and the case.
    assert "commit `c0ffee000000`, tree `7ree00000000`, clean" in report
    assert "4 x TPU v5 lite (platform tpu), 1 process" in report
    assert "`XLA_FLAGS=--xla_tpu_enable_async_all_gather=true`" in report
    assert "git checkout c0ffee000000" in report and "perfkit run run/case.yaml --salt" in report
    assert f"```sh\ncd {run.parent}\ngit checkout c0ffee000000" in report  # the checkout in the run's tree
    not_verified = report[report.index("## Not verified"):]
    assert "no A/A control" in not_verified and "no oracle" in not_verified
    assert "CPU devices" not in not_verified and "failed" not in not_verified
    # a command takes no seed from perfkit: the case's seed orders trials and draws the bootstrap, no inputs
    assert "- one set of inputs only: the command's own (perfkit passes it no seed)" in not_verified
    assert "one seed only" not in not_verified

    # summary.json keeps its contract keys next to the report's.
    s = json.loads((run / "summary.json").read_text())
    assert s["variants"]["a"]["step_ms"] == pytest.approx({"median": a_med, "p25": p25, "p75": p75, "n": 12})
    assert s["comparison"]["ratio"] == pytest.approx(ratio) and s["comparison"]["verdict"] == "slower"
    assert s["quality"]["psnr_db"] == pytest.approx(psnr(mse))
    # a command's one process is one rank, said as a model's one process is (a newcomer's 4-device command case
    # read "not checked: one process" beside a model case's "yes / single SPMD program"); its one rank named as a
    # rank (a lone "0" read as no groups)
    one = "one process: no other rank to compile another program"
    assert s["ranks"]["a"] == {"consistent": True, "groups": [[0]], "checked": one}
    assert table_row(report, "a") == ["one rank: nothing to compare", "rank 0", "-", one]
    assert "rank consistency" not in not_verified
    assert s["reproduce"]["command"] == "perfkit run run/case.yaml --salt"


def test_reproduce_names_the_checkout_the_commit_is_of(tmp_path):
    """A newcomer ran perfkit from one clone (its venv's) in another: the block said `cd <the other clone>` then
    `git checkout <a commit of the first>`, which that folder does not hold. The checkout's folder is named where
    the run's folder is not inside it."""
    from perfkit.run import finish

    for i, (root, line) in enumerate((("/opt/perfkit-clone", "git -C /opt/perfkit-clone checkout c0ffee000000"),
                                      (str(tmp_path), "git checkout c0ffee000000"))):
        run = write_run(tmp_path / f"run{i}", ab_trials())
        env = json.loads((run / "env.json").read_text())
        env["source"]["root"] = root
        (run / "env.json").write_text(json.dumps(env))
        finish.render(run)
        assert f"```sh\ncd {tmp_path}\n{line}   # tree 7ree00000000\n" in (run / "report.md").read_text()


def test_headline_figures_divide_to_the_ratio(tmp_path):
    """The line and the verdict show the figures the ratio divides: each variant's median of per-trial
    medians. By hand: a's trial medians 10, 12, 11 (median 11.00), b's 16, 17.6, 18 (median 17.60), so
    b/a = 1.600. The long trials (seven steps) pull the pooled medians to 10.00 and 18.00 (1.800)."""
    from perfkit.report.line import summary_line
    from perfkit.run import finish

    w = 50.0  # the warmup step, dropped
    steps = {"a": [[w] + [10.0] * 7, [w] + [12.0] * 3, [w] + [11.0] * 3],
             "b": [[w] + [16.0] * 3, [w] + [17.6] * 3, [w] + [18.0] * 7]}
    trials = [trial(2 * r + i, v, steps[v][r]) for r in range(3) for i, v in enumerate(("a", "b") if r % 2 == 0
                                                                                      else ("b", "a"))]
    run = write_run(tmp_path / "run", trials)
    finish.render(run)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["variants"]["a"]["step_ms"]["median"] == 10.0 and summary["variants"]["b"]["step_ms"]["median"] == 18.0
    assert summary["comparison"]["ratio"] == pytest.approx(1.6)

    line = summary_line(summary, run / "report.md")
    shown = re.search(r"a ([\d.]+) ms, b ([\d.]+) ms \(medians of trial medians\), b/a ([\d.]+) ", line)
    assert shown, line
    a, b, ratio = map(float, shown.groups())
    assert (a, b, ratio) == (11.0, 17.6, 1.6)
    assert f"{b / a:.3f}" == shown.group(3)
    report = (run / "report.md").read_text()
    assert "b/a step time **1.600**, 95% CI" in report and "(17.60 / 11.00 ms, medians of trial medians)" in report
    assert "recompiles" not in line
    # torch.compile's recompiles, where the variants' differ (a newcomer read the stride-guard case's headline
    # without them): each variant's median over its trials
    for name, count in (("a", 0.0), ("b", 1.0)):
        summary["variants"][name]["values"] = {"recompiles": {"median": count, "p25": count, "p75": count, "n": 3}}
    assert "; recompiles (a trial's, median) a 0, b 1; report" in summary_line(summary, run / "report.md")
    assert table_row(report, "**step, synced: median of trial medians (ms)**") == ["11.00", "17.60 (+60.0%)"]


def test_headline_figures_divide_to_the_ratio_where_rounding_would_not(tmp_path):
    """A demo run's trial medians (ms): a 7.0229, 5.1719, 8.0020 (median 7.0229), b 14.6327, 11.2596, 10.6665
    (median 11.2596): b/a = 1.60327, shown 1.603. Rounded to 2 decimals the medians are 7.02 and 11.26, which
    divide to 1.604: the line and the verdict show them to 3 (7.023 and 11.260), which divide to 1.603."""
    from perfkit.report.line import summary_line
    from perfkit.run import finish

    medians = {"a": [7.022906000202056, 5.1719430048251525, 8.002025002497248],
               "b": [14.632670005084947, 11.259582999628037, 10.666524001862854]}
    trials = [trial(2 * r + i, v, [50.0] + [medians[v][r]] * 3) for r in range(3) for i, v in enumerate(("a", "b"))]
    run = write_run(tmp_path / "run", trials)
    finish.render(run)
    summary = json.loads((run / "summary.json").read_text())
    line = summary_line(summary, run / "report.md")
    shown = re.search(r"a ([\d.]+) ms, b ([\d.]+) ms \(medians of trial medians\), b/a ([\d.]+) ", line)
    assert shown.groups() == ("7.023", "11.260", "1.603"), line
    assert f"{11.260 / 7.023:.3f}" == "1.603" and f"{11.26 / 7.02:.3f}" == "1.604"
    report = (run / "report.md").read_text()
    assert "b/a step time **1.603**, 95% CI" in report and "(11.260 / 7.023 ms, medians of trial medians)" in report
    # the Timing table's bold row and the progression show them so too (they showed 7.02 and 11.26)
    assert table_row(report, "**step, synced: median of trial medians (ms)**") == ["7.023", "11.260 (+60.3%)"]
    res = CliRunner().invoke(cli, ["report", "--progression", str(run)])
    assert res.exit_code == 0 and table_row(res.output, "`run`")[1:3] == ["7.023", "11.260"], res.output



def _change_follows(shown_a: str, shown_b: str) -> bool:
    """Whether ``shown_b``'s "(+x.x%)" is what its figure and ``shown_a``'s, as printed, divide to."""
    a, b, change = re.match(r"([\d.]+).*?\|\s*([\d.]+)[^(]*\(([+-][\d.]+)%\)", f"{shown_a} | {shown_b}").groups()
    return f"{100 * (float(b) / float(a) - 1):+.1f}" == change


def test_every_change_in_the_timing_table_follows_from_its_figures(tmp_path):
    """A demo run's figures: natural steps 4.7125 and 10.8479 ms (+130.2%), which to 2 decimals show as 4.71 and
    10.85 (+130.4%); setup times 7.593 and 7.916 ms (+4.3%), which to 2 decimals in seconds show as 0.01 and
    0.01. Each change shown divides from the figures beside it."""
    from perfkit.run import finish

    values = {"a": {"setup_s": 0.007593, "compile_s": 0.007593438},
              "b": {"setup_s": 0.007916, "compile_s": 0.007915788}}
    natural = {"a": 4.7125, "b": 10.8479}
    trials = [trial(2 * r + i, v, [50.0, 5.0 * (1 + i), 5.0 * (1 + i)], values=values[v], natural=[natural[v]])
              for r in range(3) for i, v in enumerate(("a", "b"))]
    run = write_run(tmp_path / "run", trials)
    finish.render(run)
    report = (run / "report.md").read_text()
    for label in ("step, natural: median of trials (ms, a pass's mean step, one pass each)", "setup_s (median over trials)",
                  "compile_s (median over trials)", "**step, synced: median of trial medians (ms)**"):
        assert _change_follows(*table_row(report, label)), (label, table_row(report, label))
    assert table_row(report, "step, natural: median of trials (ms, a pass's mean step, one pass each)") == ["4.713", "10.848 (+130.2%)"]
    assert table_row(report, "setup_s (median over trials)") == ["0.00759 s", "0.00792 s (+4.3%)"]
    # the demo's setup times: +4.2%, which to 6 decimals (0.007593, 0.007916) would read +4.3%
    assert table_row(report, "compile_s (median over trials)") == ["0.0075934 s", "0.0079158 s (+4.2%)"]
    assert "Recorded by the trials: `setup_s` building the model and its parameters; `compile_s` compiling" in report


@pytest.mark.parametrize("rounds, floor", [(2, "0.333"), (4, "0.0286")])
def test_the_mann_whitney_floor_is_the_runs(tmp_path, rounds, floor):
    """The report says how low the Mann-Whitney p can go with the run's own trial counts (it said "with 3 + 3
    trials it cannot go below 0.1" whatever they were): 2 / C(2n, n), all of b's trial medians above a's; and
    that ties let scipy's approximate p go lower (a newcomer's natural steps, alike in every trial: p 0.194 beside
    "cannot go below 0.333")."""
    trials = [trial(2 * r + i, v, [50.0] + [(10.0 if v == "a" else 12.0) + 0.1 * r] * 3)
              for r in range(rounds) for i, v in enumerate(("a", "b"))]
    run = write_run(tmp_path / "run", trials)
    from perfkit.run import finish

    finish.render(run)
    report = (run / "report.md").read_text()
    assert f"Mann-Whitney p = {floor} over {rounds} + {rounds} trial medians" in report
    assert (f"with {rounds} + {rounds} trials and no two trial medians alike it cannot go below {floor}, where tied "
            "medians make scipy's p an approximation that can)") in report


def test_an_unknown_verdict_says_how_to_ask_for_more_trials(make_run):
    run = make_run(trials=ab_trials(b_scale=1.03))  # CI about [0.995, 1.067] over 3 + 3 trials: unknown at 2%
    report = (run / "report.md").read_text()
    assert "**No verdict**" in report
    assert "(this run: 3 rounds), e.g. `perfkit run run/case.yaml --salt --set repeats.max=6`." in report
    # the terminal's one line too (a newcomer's 2-trial run said "-> unknown" there and nothing more)
    assert "-> unknown (more rounds would narrow it: --set repeats.max=6)" in report.splitlines()[2]


def test_an_unknown_verdict_where_trials_hung_asks_for_a_longer_timeout_not_more_rounds(make_run):
    """A newcomer's 4-process case: most trials hung under load (one at `import jax`, 0 steps), and the line asked
    for `--set repeats.max=4`: more rounds that would each hang at the same timeout."""
    trials = ab_trials(b_scale=1.03)
    hung = {"rank": 0, "exit_code": -9, "running_at_end": True, "steps_done": 0, "last_step_ms": None,
            "last_mark": None}
    trials += [trial(i, v, [], status="hung", ranks=[hung]) for i, v in ((6, "a"), (7, "b"), (8, "b"))]
    report = (make_run(trials=trials, case_extra={"timeout": 45}) / "report.md").read_text()
    assert "repeats.max" not in report
    # the case's timeout as the fixture's case.yaml sets it, twice that asked for
    assert report.splitlines()[2].count("-> unknown (3 of 9 trials hung at the 45 s timeout: where their ranks were "
                                        "slow, not stuck, --set timeout=90)") == 1
    assert ("3 of 9 trials hung at the 45 s timeout (Failed trials says where their ranks waited): more trials would "
            "hang alike where they were stuck; where they were slow (a start under load), a longer timeout would "
            "narrow it: e.g. `perfkit run run/case.yaml --salt --set timeout=90`.") in report


def test_a_variant_whose_every_trial_hung_is_told_the_timeout(make_run):
    """Every trial of b hung (a start slower than the timeout): no ratio, and the report said only "a variant has no
    timed steps", the line "no timed steps for b -> unknown", with no word of the timeout they all ran past."""
    hung = {"rank": 0, "exit_code": -9, "running_at_end": True, "steps_done": 0, "last_step_ms": None,
            "last_mark": None}
    trials = [t if t["variant"] == "a" else trial(t["index"], "b", [], status="hung", ranks=[hung])
              for t in ab_trials()]
    report = (make_run(trials=trials, case_extra={"timeout": 45}) / "report.md").read_text()
    assert report.splitlines()[2].count("no timed steps for b -> unknown (3 of b's 3 trials hung at the 45 s "
                                        "timeout: where their ranks were slow, not stuck, --set timeout=90)") == 1
    assert ("**No verdict**: a variant has no timed steps. 3 of b's 3 trials hung at the 45 s timeout (Failed trials "
            "says where their ranks waited): more trials would hang alike where they were stuck; where they were slow "
            "(a start under load), a longer timeout would time its steps: e.g. `perfkit run run/case.yaml --salt "
            "--set timeout=90`.") in report
    # a variant whose trials crashed is no matter for the timeout: nothing said of one
    crashed = [dict(t, status="crashed") if t["variant"] == "b" else t for t in trials]
    report = (make_run("crashed", trials=crashed, case_extra={"timeout": 45}) / "report.md").read_text()
    assert "timeout" not in report.splitlines()[2] and "**No verdict**: a variant has no timed steps.\n" in report


def test_a_multi_host_run_with_no_verdict_asks_for_more_rounds_by_repeats_min(tmp_path):
    """A newcomer's two-host run ended unknown and was told `--set repeats.max=4`: a run on several hosts runs
    `repeats.min` rounds and no more (docs/multi-host.md), so raising the maximum asked for nothing."""
    from perfkit.run import finish

    run = write_run(tmp_path / "run", ab_trials(b_scale=1.03), case_extra={"repeats": {"min": 3, "max": 3}})
    (run / "env.json").write_text(json.dumps({**ENV, "hosts": {"count": 2, "index": 0}}))
    options = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**options, "hosts": 2, "coordinator": "node0:29500"}))
    finish.render(run)
    report = (run / "report.md").read_text()
    assert "**No verdict**" in report and "up to `repeats.max`" not in report
    assert "a run on several hosts runs `repeats.min` rounds (this run: 3 rounds), e.g. `perfkit run " in report
    assert "--set repeats.min=6 --set repeats.max=6`." in report
    line = report.splitlines()[2]
    asked = "-> unknown (more rounds would narrow it: --set repeats.min=6 --set repeats.max=6)"
    assert asked in line
    # what it asks for is a case that loads: its repeats.max is 3, and a minimum above the maximum is refused
    overrides = asked.removesuffix(")").split(": ", 1)[1].removeprefix("--set ").split(" --set ")
    assert case_mod.load(run / "case.yaml", overrides).repeats == {"min": 6, "max": 6}


def test_a_multi_host_matrix_combination_points_to_the_matrix_s_host_env_files(tmp_path):
    """Each host writes its env.json once, into the matrix's hosts/host<I>/ (runner.run_case); a combination's
    folder holds host 0's alone. Its report pointed to its own hosts/host<I>/env.json, which no host writes."""
    from perfkit.run import finish

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "case.yaml").write_text("name: fixture\n")
    cell = write_run(tmp_path / "m" / "cells" / "00", ab_trials())
    (cell / "env.json").write_text(json.dumps({**ENV, "hosts": {"count": 2, "index": 0}}))
    finish.render(cell)
    assert "\n- hosts: 2; the lines here are host 0's, each host's own in the matrix's `hosts/host<I>/env.json`\n" \
        in (cell / "report.md").read_text()


def test_a_stopped_run_with_no_verdict_asks_for_the_rest_of_its_plan(tmp_path):
    """A newcomer's Ctrl-C after 2 of a case's up to 4 rounds: the line and the report asked for `--set
    repeats.max=4`, the case's own limit (a fresh run of the same plan); the rest of this run is `--resume`'s."""
    from perfkit.run import finish

    run = write_run(tmp_path / "run", ab_trials(b_scale=1.03)[:4], case_extra={"repeats": {"min": 2, "max": 4}})
    finish.render_one(run, interrupted=True)
    report = (run / "report.md").read_text()
    assert "**No verdict**" in report
    assert "repeats.max=4" not in report
    assert f"The run was stopped before its plan was done: `perfkit run --resume {run}` runs the rest of it" in report
    assert report.splitlines()[2].endswith("-> unknown (the rest of its plan may narrow it: --resume); interrupted")


def test_the_first_step_row_says_where_failed_trials_count_in_it(make_run):
    """A newcomer's rank crashed at exit after all its steps: the first-step row (A 19.16 ms, every trial's)
    read as over good trials (14.44 ms), as the sentence under the table says values are; that sentence did not
    say which trials are good (another newcomer's)."""
    trials = ab_trials()
    trials[0]["status"] = "crashed"
    report = (make_run(trials=trials) / "report.md").read_text()
    first_a = [t["steps_ms"][0] for t in trials if t["variant"] == "a"]
    assert table_row(report, "first step (ms; every trial's, failed ones too)")[0] == f"{np.median(first_a):.2f}"
    assert ("Values are medians over good trials (those whose every rank ran to its end; hung, crashed and "
            "interrupted ones are listed under Failed trials) unless a row says otherwise." in " ".join(report.split()))
    report = (make_run("good", trials=ab_trials()) / "report.md").read_text()
    assert table_row(report, "first step (ms)")
    # a run of good trials alone has no Failed trials section to point at (a reviewer's)
    assert "listed under Failed trials, none in this run) unless a row says otherwise." in " ".join(report.split())


def test_one_timed_step_a_side_is_no_verdict_and_says_why(tmp_path):
    """A trial of two steps with one of warmup: one timed step a side (it read as "slower" with a CI of no width)."""
    from perfkit.run import finish

    run = write_run(tmp_path / "run", [trial(0, "a", [50.0, 10.0]), trial(1, "b", [50.0, 17.68])],
                    case_extra={"repeats": {"min": 1, "max": 1}})
    finish.render(run)
    summary = json.loads((run / "summary.json").read_text())
    c = summary["comparison"]
    assert (c["ratio"], c["ci"], c["verdict"]) == (1.768, [None, None], "unknown")
    report = (run / "report.md").read_text()
    assert report.splitlines()[2] == ("fixture: a 10.00 ms, b 17.68 ms (medians of trial medians), b/a 1.768 "
                                      "[no CI: one timed step] -> unknown (more rounds would give a CI: --set "
                                      "repeats.max=2)")
    assert ("minimum effect 2%; a side has one timed step: nothing measured how much a step varies, so no CI. More "
            "trials would give one:") in report
    assert "the B/A timing verdict: unknown (a side has one timed step: nothing measured how much a step varies, " \
           "so no CI)" in summary["not_verified"]


def test_a_run_cut_short_or_empty_does_not_read_as_complete(make_run, tmp_path):
    """A newcomer's: trials.jsonl's last line cut short (perfkit killed while writing a trial) re-rendered as a
    finished run; a run with no trial at all gave the wrong reason for its verdict and passed its ranks."""
    run = make_run()
    with open(run / "trials.jsonl", "a") as f:
        f.write('{"index": 6, "variant": "a", "sta')
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 3, res.output
    assert json.loads((run / "summary.json").read_text())["interrupted"] is True
    # killed during a trial, between lines: whole lines, no summary, fewer trials than the plan's 3 + 3
    killed = make_run("killed")
    (killed / "trials.jsonl").write_text("".join((killed / "trials.jsonl").read_text().splitlines(True)[:5]))
    (killed / "summary.json").unlink()
    assert CliRunner().invoke(cli, ["report", str(killed)]).exit_code == 3
    assert json.loads((killed / "summary.json").read_text())["interrupted"] is True
    assert f"> Interrupted: this report covers the trials finished before the stop; `perfkit run --resume {run}`" \
        in (run / "report.md").read_text()
    empty = make_run("empty", trials=[], outputs={})
    summary = json.loads((empty / "summary.json").read_text())
    assert "the B/A timing verdict: unknown (a variant has no timed steps)" in summary["not_verified"]
    assert {v: r["consistent"] for v, r in summary["ranks"].items()} == {"a": None, "b": None}
    assert summary["ranks"]["a"]["checked"] == "not checked: no trial of this variant finished"
    assert ("rank consistency (a: not checked: no trial of this variant finished; b: not checked: no trial of this "
            "variant finished)") in summary["not_verified"]  # it said "no XLA dumps compared"


def test_one_trial_a_side_says_its_ci_is_the_steps_noise_alone(make_run):
    """A newcomer's run stopped after one trial a side read "sp/tp 1.609 [1.175, 2.458] -> slower": a CI from one
    trial's steps, nothing of how trials differ. Not verified says so; with two trials a side it does not (their CI
    takes in Welch's interval of the trials: tests/runner/test_runner_stats.py)."""
    one_run = make_run("one", trials=ab_trials()[:2])
    one = json.loads((one_run / "summary.json").read_text())
    assert (one["comparison"]["n_a"], one["comparison"]["n_b"], one["comparison"]["verdict"]) == (1, 1, "slower")
    assert ("the B/A timing CI: a side has one trial, so the CI holds that trial's steps' noise alone, not the trials' (a "
            "run's trials differ by more than its steps do): the slower verdict may not hold on another run"
            ) in one["not_verified"]
    # a reviewer's: the headline and the run's line called it with no caveat, the note at the page's end alone did
    head = (one_run / "report.md").read_text().split("## ")[0]  # the run's line, then the headline
    assert "-> slower (one trial a side: it may not hold on another run)" in head
    assert "A side has one trial: the verdict may not hold on another run (Not verified says why)." in head
    two_run = make_run("two", trials=ab_trials()[:4])
    two = json.loads((two_run / "summary.json").read_text())
    assert (two["comparison"]["n_a"], two["comparison"]["n_b"]) == (2, 2)
    assert not any(note.startswith("the B/A timing CI") for note in two["not_verified"])
    assert ("gives it again; it also takes in Welch's t interval of the trials' medians (a bootstrap of a few trials "
            "reaches no further than they do)") in " ".join((two_run / "report.md").read_text().split())


def test_a_trial_whose_record_is_damaged_is_not_dropped_silently(make_run):
    """A newcomer's: trials.jsonl's third line cut short, with whole records after it (more than the plan's
    first rounds): re-rendered without that trial and without a word, the gate then passing "0 failed trials".
    Its trial is lost: the run is interrupted, and stderr names the trial."""
    run = make_run()
    lines = (run / "trials.jsonl").read_text().splitlines(True)
    index = json.loads(lines[2])["index"]
    lines[2] = lines[2][:60] + "\n"
    (run / "trials.jsonl").write_text("".join(lines))
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 3, res.output
    assert json.loads((run / "summary.json").read_text())["interrupted"] is True
    assert (f"perfkit: {run / 'trials.jsonl'}: no whole record of trial {index} (a line damaged or cut short): the "
            "run is read as interrupted, and --resume runs it again") in res.stderr


def test_a_last_record_cut_short_is_named_on_stderr(make_run):
    """A newcomer's: trials.jsonl less its last 200 bytes re-rendered with other figures and nothing on stderr (a
    damaged middle line is named). The cut last line is named as the trial its beginning gives, and where the cut
    left too little to say which, as the plan's first trial not recorded (it said "the trial its last line began",
    naming none); a whole file is named by neither."""
    run = make_run()
    text = (run / "trials.jsonl").read_text()
    last = text.splitlines(True)[-1]
    assert last.startswith('{"index": 5, "variant": "b", ')  # (ab_trials: abba over 3 rounds, 0-5, b last)
    (run / "trials.jsonl").write_text(text[:-200])
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 3, res.output
    assert json.loads((run / "summary.json").read_text())["interrupted"] is True
    assert res.stderr == (f"perfkit: {run / 'trials.jsonl'}: no whole record of trial 5 (b): the file's last line "
                          "is cut short (perfkit killed while writing it, or the file cut since): the run is read as "
                          "interrupted, and --resume runs it again\n")
    (run / "trials.jsonl").write_text(text[: len(text) - len(last)] + '{"ind')
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 3 and res.stderr == (
        f"perfkit: {run / 'trials.jsonl'}: no whole record of trial 5 (b), the plan's first not recorded, which its "
        "last line began: the line, cut before its trial's number, is cut short (perfkit killed while writing it, or "
        "the file cut since): the run is read as interrupted, and --resume runs it again\n"), res.output
    (run / "trials.jsonl").write_text(text)
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.stderr == "", res.output  # (still interrupted: the summary.json before says so)


def test_the_summary_line_says_which_ranks_differ(make_run):
    from perfkit.report.line import summary_line  # (the line alone, without a report around it)

    summary = json.loads((make_run() / "summary.json").read_text())
    for ranks, said in (([3], "a (rank 3 differs)"), ([1, 2, 3], "a (ranks 1-3 differ)"), ([], "a (programs differ)")):
        summary["ranks"]["a"] = {"consistent": False, "groups": [[0]], "divergent_ranks": ranks}
        assert f"; DIVERGENT programs: {said}" in summary_line(summary, Path("report.md"))


def test_notebook_frames_refuse_a_folder_that_is_no_run(make_run, tmp_path):
    from perfkit import analysis
    from perfkit.errors import BadInput

    for call in (analysis.trials_frame, analysis.steps_frame, analysis.comparisons_frame):
        with pytest.raises(BadInput) as err:
            call(tmp_path / "nonexistent")
        assert err.value.line() == f"{tmp_path / 'nonexistent'}: no such run directory"
    with pytest.raises(BadInput) as err:
        analysis.trials_frame(tmp_path)
    assert err.value.line() == f"{tmp_path}: not a perfkit run directory (no case.yaml)"
    trials = analysis.trials_frame(make_run())  # the fixture's a trials: medians of their timed steps
    assert list(trials[trials.variant == "a"].median_ms) == [np.median(t[WARMUP:]) for t in A_STEPS]


def test_plots_are_linked_and_show_the_figures(make_run):
    from perfkit.report import plots
    from perfkit.analysis import timing
    from perfkit.rundata.rundir import read_trials

    run = make_run()
    report = (run / "report.md").read_text()
    for name in ("step_times", "psnr"):
        assert f"](plots/{name}.png)" in report
        assert (run / "plots" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "plots/breakdown.png" not in report  # no traces, no breakdown plot
    caption = "Step times per trial, in run order (timed synced steps; dotted: each variant's trial medians)"
    assert f"**{caption}**\n\n![{caption}](plots/step_times.png)" in report  # a serve run's reads otherwise

    # One box per trial, its median line at the trial's median.
    fig = plots.step_times(timing.steps_frame(read_trials(run)))
    assert (fig.axes[0].get_title(), fig.axes[0].get_ylabel()) == ("timed synced steps per trial", "step time (ms)")
    medians = [line.get_ydata()[0] for line in fig.axes[0].lines if line.get_linestyle() == "-"
               and len(line.get_xdata()) == 2 and line.get_ydata()[0] == line.get_ydata()[1]]
    trials = ab_trials()
    expected = [np.median(t["steps_ms"][WARMUP:]) for v in ("a", "b") for t in trials if t["variant"] == v]
    assert all(any(m == pytest.approx(e) for m in medians) for e in expected)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["0", "1", "2", "3", "4", "5"]  # run order
    dotted = {line.get_color(): list(line.get_ydata()) for line in fig.axes[0].lines if line.get_linestyle() == ":"}
    assert dotted["C0"] == pytest.approx([np.median(t["steps_ms"][WARMUP:]) for t in trials if t["variant"] == "a"])

    # PSNR per frame: finite frames drawn as values, identical ones as markers.
    fig = plots.psnr_per_frame([30.0, "inf", 40.0, float("inf")], "t")
    drawn, identical = fig.axes[0].lines
    assert list(drawn.get_xdata()) == [0, 2] and list(drawn.get_ydata()) == [30.0, 40.0]
    assert list(identical.get_xdata()) == [1, 3]

    # Breakdown: one stacked bar per variant, each part's width its milliseconds.
    parts = {"a": {"compute_ms": 3.0, "ici_ms": 1.0, "dma_ms": 0.5, "idle_ms": 0.5},
             "b": {"compute_ms": 2.0, "ici_ms": 2.5, "dma_ms": 0.0, "idle_ms": 1.0}, "c": {"error": "no trace"}}
    fig = plots.breakdown_bars({"variants": parts})
    widths = [p.get_width() for p in fig.axes[0].patches]
    assert widths == [2.0, 3.0, 2.5, 1.0, 0.0, 0.5, 1.0, 0.5]  # per part (compute, ici, dma, idle): b, a


def test_a_hung_trial_still_renders(tmp_path):
    trials = ab_trials(values=False)
    stacks = 'Thread 0x1 (most recent call first):\n  File "bench.py", line 9 in wait_for_peer\n'
    trials.append(trial(6, "a", [50.0, 10.0], status="hung",
                        ranks=[{"rank": 0, "exit_code": -9, "running_at_end": True, "steps_done": 2,
                                "last_step_ms": 10.0, "last_mark": "ready", "stacks": stacks},
                               {"rank": 1, "exit_code": -9, "running_at_end": True, "steps_done": 0,
                                "last_step_ms": None, "last_mark": None}]))
    run = write_run(tmp_path / "run", trials, outputs_for(trials[:6], frames(), frames()))
    res = CliRunner().invoke(cli, ["report", str(run)])
    assert res.exit_code == 3, res.output
    report = (run / "report.md").read_text()
    assert headings(report) == SECTIONS[:2] + ["Failed trials"] + SECTIONS[2:]
    assert "> 1 trial(s) failed or hung" in report and "trial 6 (a): **hung**" in report
    assert "waiting in `wait_for_peer (bench.py:9)`" in report
    # it said "last mark None"
    assert "  - rank 1: still running at the end, 0 steps done, last mark none (no mark reached)" in report
    assert "1 of 7 trials failed or hung" in report[report.index("## Not verified"):]
    assert table_row(report, "failed trials") == ["1", "0"]
    assert table_row(report, "timed steps (trials)") == ["12 (3)", "12 (3)"]  # the hung trial's steps left out
    assert "inf (bit-identical)" in report.splitlines()[2] and "plots/psnr.png" not in report  # nothing differs


def test_ranks_hung_on_their_way_out_are_said_to_be_past_their_steps(tmp_path):
    """A newcomer's ranks had written all their steps and hung in their shutdown ("Garbage-collecting", no Python
    frame): the report gave no "waiting in" line and no hint, the line "a hung"."""
    trials = ab_trials(values=False)
    shutdown = "Current thread 0x1 (most recent call first):\n  Garbage-collecting\n  <no Python frame>\n"
    in_step = 'Thread 0x1 (most recent call first):\n  File "bench.py", line 9 in <module>\n'
    ranks = [{"rank": r, "exit_code": -9, "running_at_end": True, "steps_done": 6, "last_step_ms": 10.0,
              "last_mark": None, "stacks": shutdown} for r in (0, 1)]
    trials += [trial(6, "a", [10.0] * 6, status="hung", ranks=ranks),
               trial(7, "b", [10.0] * 6, status="hung", ranks=[ranks[0], {**ranks[1], "stacks": in_step}])]
    run = write_run(tmp_path / "run", trials)
    res = CliRunner().invoke(cli, ["report", str(run)])
    report = (run / "report.md").read_text()
    assert res.exit_code == 3 and "    - waiting in `garbage-collecting: no Python frame (native code)`" in report
    at_exit = ("had returned from {} program (no thread in a module's top level) after 6 steps and hung on the way "
               "out, at exit (an atexit handler such as jax.distributed's shutdown, a thread it waits for, the last "
               "garbage collection): the program's shutdown, or a timeout too short for it, is the cause, not a step")
    assert f"  - ranks 0, 1 {at_exit.format('their')}" in report and at_exit.format("its") not in report
    # trial 7's rank 1 is still inside its program: rank 0 waits for it; not rank 0's way out the cause
    assert ("  - rank 0 had finished its program (no thread in a module's top level) after 6 steps and waits in its "
            "shutdown (jax.distributed's shutdown waits for every rank) for rank 1, which hung inside its program "
            "after 6 steps (a thread in a module's top level): neither the shutdown nor a timeout too short for it is "
            "the cause; the cause is why those ranks stopped, where the chips' collectives part (below) where traces "
            "say") in report
    # the line: a trial whose every rank still running was past its program; rank 1 of trial 7 was in its own
    assert report.splitlines()[2].endswith("; a hung at exit (its ranks' programs had returned); b hung")


def test_a_rank_killed_by_the_stack_dump_request_is_said_to_have_had_no_python_left(tmp_path):
    """A rank that hung past its interpreter's shutdown (a C exit handler) has no stack-dump handler left: the request
    (SIGUSR1) kills it without a dump, and the report said "still running at the end" alone."""
    trials = ab_trials(values=False)
    past = {"rank": 0, "exit_code": -10, "running_at_end": True, "steps_done": 6, "last_step_ms": 10.0,
            "last_mark": None}
    trials += [trial(6, "a", [10.0] * 6, status="hung", ranks=[past]),
               trial(7, "b", [10.0] * 6, status="hung", ranks=[dict(past, exit_code=-9)])]  # (SIGKILL: not said)
    run = write_run(tmp_path / "run", trials)
    CliRunner().invoke(cli, ["report", str(run)])
    report = (run / "report.md").read_text()
    failed = report[report.index("## Failed trials"):report.index("## Quality")]
    assert failed.count("  - rank 0 died of perfkit's stack-dump request (SIGUSR1) without a dump: no Python "
                        "stack-dump handler was left in it, so its Python had shut down and it hung past that in "
                        "native code (a C or C++ library's exit handler or destructor, on the way out), or it ran no "
                        "Python\n") == 1
    assert failed.index("SIGUSR1") < failed.index("trial 7 (b)")


def test_the_one_line_gives_the_first_crash_s_reason():
    """Every trial of a command case crashed alike (its script imports a module this machine lacks): the line read
    '6 trial(s) failed' alone; it gives the first failing rank's last stderr line, the report the rest."""
    from perfkit.report.line import summary_line

    ranks = [{"rank": 0, "exit_code": 0, "stderr_tail": "a warning before rank 1 failed"},
             {"rank": 1, "exit_code": 1, "stderr_tail": "Traceback (most recent call last):\n  File \"b.py\", "
                                                        "line 1\nModuleNotFoundError: No module named 'jax'\n"}]
    summary = {"case": "c", "baseline": "a", "comparison": {"verdict": "unknown", "ratio": None},
               "variants": {"a": {"trials": 1}, "b": {"trials": 1}},
               "trials": {"total": 2, "ok": 0, "failed": [
                   {"index": 0, "variant": "a", "status": "hung", "dir": "trials/00-a", "ranks": []},
                   {"index": 1, "variant": "b", "status": "crashed", "dir": "trials/01-b", "ranks": ranks}]}}
    assert summary_line(summary, Path("r/report.md")) == (
        "c: no timed steps for a and b -> unknown (1 of a's 1 trial hung at the timeout: where their ranks were slow, "
        "not stuck, a longer `timeout`); 2 trial(s) failed (first crash: trial 1 (b) rank 1: ModuleNotFoundError: No "
        "module named 'jax'); a hung; report r/report.md")


def test_the_one_line_s_first_crash_is_the_exception_not_what_follows_it():
    """A newcomer's ulysses plan on 3 devices: every trial crashed on `ValueError: ulysses: 4 heads do not split
    over 3 devices`, and the line gave what JAX prints after a filtered traceback ("For simplicity, JAX has removed
    its internal frames ..."), the same for every JAX error. It gives the exception the traceback ends on."""
    from perfkit.report.line import summary_line

    tail = ("  File \"/work/main/models/plans.py\", line 357, in attention\n"
            "    raise ValueError(f\"ulysses: {heads} heads do not split over {n} devices\")\n"
            "ValueError: ulysses: 4 heads do not split over 3 devices\n"
            "--------------------\n"
            "For simplicity, JAX has removed its internal frames from the traceback of the following exception. "
            "Set JAX_TRACEBACK_FILTERING=off to include these.")
    ranks = [{"rank": 0, "exit_code": 1, "exited_s": 3.5, "stderr_tail": tail}]
    summary = {"case": "c", "baseline": "a", "comparison": {"verdict": "unknown", "ratio": None},
               "variants": {"a": {"trials": 1}, "b": {"trials": 1}},
               "trials": {"total": 2, "ok": 1, "failed": [
                   {"index": 0, "variant": "a", "status": "crashed", "dir": "trials/00-a", "ranks": ranks}]}}
    assert ("1 trial(s) failed (first crash: trial 0 (a) rank 0: ValueError: ulysses: 4 heads do not split over 3 "
            "devices);") in summary_line(summary, Path("r/report.md"))
    # a stderr without a traceback: its last line, as before
    ranks[0]["stderr_tail"] = "python: can't open file '/x/bench.py': [Errno 2] No such file or directory"
    assert "rank 0: python: can't open file '/x/bench.py': [Errno 2] No such file or directory);" in \
        summary_line(summary, Path("r/report.md"))


def test_the_one_line_s_first_crash_is_the_rank_that_failed_first():
    """Rank 2 fails at its import; rank 1's rendezvous then breaks, and perfkit ends rank 0 (a signal, no exit
    time): the lowest failing rank's line is a consequence, the report's 'failed first' rank's is the cause."""
    from perfkit.report.line import summary_line

    ranks = [{"rank": 0, "exit_code": -15, "stderr_tail": "Terminated"},
             {"rank": 1, "exit_code": 1, "exited_s": 1.5, "stderr_tail": "RuntimeError: connection closed by peer"},
             {"rank": 2, "exit_code": 1, "exited_s": 0.25, "stderr_tail": "ModuleNotFoundError: No module named 'jax'"}]
    summary = {"case": "c", "baseline": "a", "comparison": {"verdict": "unknown", "ratio": None},
               "variants": {"a": {"trials": 1}, "b": {"trials": 1}},
               "trials": {"total": 2, "ok": 1, "failed": [
                   {"index": 1, "variant": "b", "status": "crashed", "dir": "trials/01-b", "ranks": ranks}]}}
    assert "1 trial(s) failed (first crash: trial 1 (b) rank 2: ModuleNotFoundError: No module named 'jax');" in \
        summary_line(summary, Path("r/report.md"))


def test_the_one_line_says_which_variant_hung_and_where_its_chips_parted():
    """A newcomer's hang (rank 1 skips the last ring hop): the line read "no timed steps for skip -> unknown; ...;
    1 trial(s) failed" while the report's hang section named where the chips parted. The line says it now, from
    summary.json's ``hangs`` (the parting as the run wrote it); a hung trial without traces says it hung alone."""
    from perfkit.report.line import summary_line

    parting = {"step": 0, "index": 2, "op": "ppermute.11", "kind": "collective-permute", "in_step": 3, "extra": False,
               "majority": [{"rank": 0, "device": 0}, {"rank": 2, "device": 4096}],
               "parted": [{"rank": 1, "device": 2048, "how": "skipped", "op": None, "in_step": 2}]}
    summary = {"case": "hop", "baseline": "ring", "comparison": {"verdict": "unknown", "ratio": None},
               "variants": {"ring": {"trial_medians_ms": [12.0], "trials": 1}, "skip": {"trials": 1}},
               "trials": {"total": 3, "ok": 1, "failed": [
                   {"index": 1, "variant": "skip", "status": "hung", "dir": "trials/01-skip", "ranks": []},
                   {"index": 2, "variant": "ring", "status": "hung", "dir": "trials/02-ring", "ranks": []}]},
               "hangs": {"trials/01-skip": {"chips": [], "parting": parting, "text": "..."}}}
    assert summary_line(summary, Path("r/report.md")) == (
        "hop: no timed steps for skip -> unknown (1 of skip's 1 trial hung at the timeout, where the chips part: a "
        "deadlock, which a longer timeout would not end); 2 trial(s) failed; skip hung: rank 1 skipped ppermute.11 "
        "(collective 3 of 3 in rank 0's trace in step 0); ring hung; report r/report.md")
    # the bundled repro: rank 3's program lacks the second of three hops; its traces, paired in order, part at the
    # third, so the line names the program's
    summary["hangs"]["trials/02-ring"] = {"chips": [], "text": "...", "parting": dict(
        parting, parted=[dict(parting["parted"][0], rank=3, device=6144)], programs={"3": {
            "lacks": [{"op": "ppermute.10", "opcode": "collective-permute", "index": 1}], "adds": [],
            "majority_count": 3, "count": 2}})}
    assert "; ring hung: rank 3's program lacks ppermute.10 (collective 2 of 3 in step 0); report" in \
        summary_line(summary, Path("r/report.md"))
    # a review's: a rank of two chips parts once in the line, not once a chip; an extra collective is the one past
    # the majority's count, of none of theirs ("collective 3 of 2" before)
    del summary["hangs"]["trials/02-ring"]
    two_chips = [{"rank": 1, "device": d, "how": "extra collective", "op": None, "in_step": 3} for d in (0, 1)]
    summary["hangs"]["trials/01-skip"]["parting"] = dict(parting, op="all-reduce.5", in_step=2, extra=True,
                                                        parted=two_chips)
    assert "; skip hung: rank 1 ran an extra all-reduce.5 (collective 3 in step 0); ring hung; report" in \
        summary_line(summary, Path("r/report.md"))
    # a newcomer's: rank 2's program runs a psum where the others' run the second hop. Rank 0 finished the hop, the
    # others' traces end before it; the line named ranks 1-3 as never arriving "(collective 2 of 2)", the cause
    # only in the report's sentence after. The program at fault is the line now, of the program's 3 collectives
    never = [{"rank": r, "device": 2048 * r, "how": "not completed", "op": None, "in_step": 1} for r in (1, 2, 3)]
    summary["hangs"]["trials/01-skip"]["parting"] = dict(
        parting, index=1, op="ppermute.10", in_step=2, majority=[{"rank": 0, "device": 0}], parted=never,
        majority_program=[1, 3], programs={"2": {
            "lacks": [{"op": "ppermute.10", "opcode": "collective-permute", "index": 1}],
            "adds": [{"op": "psum_invariant.7", "opcode": "all-reduce", "index": 1}], "majority_count": 3, "count": 3}})
    assert ("; skip hung: rank 2's program runs psum_invariant.7 where the others' run ppermute.10 (collective 2 of 3 "
            "in step 0); ring hung; report") in summary_line(summary, Path("r/report.md"))
    # without the programs, what the traces show: rank 0 completed the hop, the others' traces hold none (a rank's
    # trace ends inside an op it waits in, which the profiler never writes), not that they never arrived at it
    del summary["hangs"]["trials/01-skip"]["parting"]["programs"]
    # (the count is rank 0's trace's there, cut inside the step: "of 2" read as if the step held two)
    held = "(collective 2 of 2 in rank 0's trace in step 0)"
    assert (f"; skip hung: rank 1 has no record in its trace of ppermute.10 {held}, rank 2 has no record in its trace "
            f"of ppermute.10 {held}, rank 3 has no record in its trace of ppermute.10 {held}; ring hung; report") in \
        summary_line(summary, Path("r/report.md"))
    # a review's: rank 2's hop with other pairs, the same op's name; the program's count (3), not the trace's
    summary["hangs"]["trials/01-skip"]["parting"]["programs"] = {"2": {
        "lacks": [{"op": "ppermute.10", "opcode": "collective-permute", "index": 1,
                   "attrs": {"source_target_pairs": "{{0,1},{1,2},{2,3},{3,0}}"}}],
        "adds": [{"op": "ppermute.10", "opcode": "collective-permute", "index": 1,
                  "attrs": {"source_target_pairs": "{{1,0},{2,1},{3,2},{0,3}}"}}], "majority_count": 3, "count": 3}}
    assert ("; skip hung: rank 2's program runs ppermute.10 with other source_target_pairs than the others' "
            "(collective 2 of 3 in step 0); ring hung") in summary_line(summary, Path("r/report.md"))
    # every compared program the majority's: the count is still the program's
    summary["hangs"]["trials/01-skip"]["parting"].update(programs={}, program_count=3)
    assert "rank 1 has no record in its trace of ppermute.10 (collective 2 of 3 in step 0)" in \
        summary_line(summary, Path("r/report.md"))


def test_a_hang_whose_chips_part_is_not_told_a_longer_timeout():
    """A review's: beside a hang whose chips part (rank 1 skipped the last hop: the others wait at it for ever), the
    line and report.md asked for a longer timeout "where their ranks were slow, not stuck", which ends no deadlock."""
    from perfkit.report.line import summary_line
    from perfkit.report.markdown import _verdict

    skipped = {"step": 0, "index": 2, "op": "ppermute.11", "kind": "collective-permute", "in_step": 3, "extra": False,
               "majority": [{"rank": 0, "device": 0}], "parted": [{"rank": 1, "device": 1, "how": "skipped",
                                                                     "op": None, "in_step": 2}]}
    summary = {"case": "hop", "baseline": "ring", "comparison": {"verdict": "unknown", "ratio": None},
               "variants": {"ring": {"trial_medians_ms": [12.0], "trials": 1}, "skip": {"trials": 1}},
               "reproduce": {"command": "perfkit run c.yaml"},
               "trials": {"total": 2, "ok": 1, "timeout_s": 30, "failed": [
                   {"index": 1, "variant": "skip", "status": "hung", "dir": "trials/01-skip", "ranks": []}]},
               "hangs": {"trials/01-skip": {"chips": [], "parting": skipped, "text": "..."}}}
    line = summary_line(summary, Path("r/report.md"))
    assert ("no timed steps for skip -> unknown (1 of skip's 1 trial hung at the 30 s timeout, where the chips part: "
            "a deadlock, which a longer timeout would not end); 1 trial(s) failed; skip hung: rank 1 skipped") in line
    assert "--set" not in line
    assert _verdict(summary) == ("**No verdict**: a variant has no timed steps. 1 of skip's 1 trial hung at the 30 s "
                                 "timeout, where the chips part (Failed trials says where): a deadlock, which neither "
                                 "more trials nor a longer timeout would end.")
    # chips waiting at collectives of other kinds (none completed it): a deadlock too
    summary["hangs"]["trials/01-skip"]["parting"] = dict(skipped, waiting=True, parted=[
        {"rank": 1, "device": 1, "how": "different collective", "op": "ar.2", "in_step": 3}])
    assert "--set" not in summary_line(summary, Path("r/report.md"))
    # a chip whose trace lacks the others' collective may be inside it, slow: the longer timeout stays
    summary["hangs"]["trials/01-skip"]["parting"] = dict(skipped, parted=[dict(skipped["parted"][0],
                                                                               how="not completed")])
    assert ("(1 of skip's 1 trial hung at the 30 s timeout: where their ranks were slow, not stuck, --set timeout=60)"
            in summary_line(summary, Path("r/report.md")))
    # a second hung trial with no traces: it may have been slow, so the timeout is asked for, the deadlock counted
    summary["hangs"]["trials/01-skip"]["parting"] = skipped
    summary["variants"]["skip"]["trials"] = 2
    summary["trials"]["failed"].append({"index": 3, "variant": "skip", "status": "hung", "dir": "trials/03-skip",
                                        "ranks": []})
    assert ("(2 of skip's 2 trials hung at the 30 s timeout (1 of them where the chips part: a deadlock): where their "
            "ranks were slow, not stuck, --set timeout=60)") in summary_line(summary, Path("r/report.md"))
    # no traces, but the ranks' programs differ in a collective (hlo-diff's first): a deadlock
    first = {"index": 2, "count": {"majority": 2, "rank": 3}, "only_on": "rank", "majority": None,
             "rank": {"computation": "main", "line": 18, "opcode": "all-reduce",
                      "text": "%all-reduce.5 = f32[8]{0} all-reduce(%f), channel_id=3, to_apply=%sum"}}
    summary["ranks"] = {"skip": {"consistent": False, "hlo_diff": {"modules": [{"name": "jit_step", "divergences": [
        {"ranks": [1], "first_collective": first}]}]}}}
    del summary["hangs"]
    assert "2 of skip's 2 trials hung at the 30 s timeout, where the chips part: a deadlock" in \
        summary_line(summary, Path("r/report.md"))


def test_the_one_line_of_a_hang_its_traces_do_not_reach_names_the_programs_first_differing_collective():
    """A newcomer's capture traced steps 2-3, the hang came at step 0: the line said "rank3 hung" alone while Rank
    consistency named rank 3's extra all-reduce as the first collective its program differs in (hlo-diff's)."""
    from perfkit.report.line import summary_line

    extra = {"index": 2, "count": {"majority": 2, "rank": 3}, "only_on": "rank",
             "majority": {"computation": "main", "line": 17, "opcode": "collective-permute",
                          "text": "%cp = f32[8]{0} collective-permute(%f), source_target_pairs={{0,1}}"},
             "rank": {"computation": "main", "line": 18, "opcode": "all-reduce",
                      "text": "%all-reduce.5 = f32[8]{0} all-reduce(%f), channel_id=3, to_apply=%sum"}}
    check = {"consistent": False, "groups": [[0, 1, 2], [3]], "checked": "...", "divergent_ranks": [3],
             "hlo_diff": {"modules": [{"name": "jit_step", "divergences": [
                 {"ranks": [3], "against_rank": 0, "first_collective": extra}]}]}}
    summary = {"case": "c", "baseline": "ok", "comparison": {"verdict": "unknown", "ratio": None},
               "variants": {"ok": {"trials": 1}, "rank3": {"trials": 1}},
               "trials": {"total": 2, "ok": 1, "failed": [
                   {"index": 1, "variant": "rank3", "status": "hung", "dir": "trials/01-rank3", "ranks": []}]},
               "hangs": {"trials/01-rank3": {"chips": [], "parting": None, "text": "...", "last_traced_step": 3,
                                             "hung_step": 0}},
               "ranks": {"ok": {"consistent": True, "groups": [[0, 1, 2, 3]], "checked": "..."}, "rank3": check}}
    assert ("; rank3 hung (its traces end before the hang): rank 3's program adds all-reduce.5 (its collective 2 of 3 "
            "in jit_step, the first collective the programs differ in: hlo-diff); report") in \
        summary_line(summary, Path("r/report.md"))
    # a program that lacks the others' collective: placed among theirs
    check["hlo_diff"]["modules"][0]["divergences"][0]["first_collective"] = {
        **extra, "count": {"majority": 3, "rank": 2}, "only_on": "majority", "rank": None}
    del summary["hangs"]
    assert ("; rank3 hung: rank 3's program lacks cp (the others' collective 2 of 3 in jit_step, the first collective "
            "the programs differ in: hlo-diff); report") in summary_line(summary, Path("r/report.md"))


def test_the_one_line_of_a_run_of_one_variant_gives_its_figure_and_no_ratio():
    """A newcomer's `perfkit run CASE --only sp`: the line read "no timed steps for tp -> unknown", sp's own figure
    nowhere. It gives the figure of the variant that ran now, and says why there is no ratio; an A/A control beside
    it is no second variant, and a third variant that ran alone is named as sp is."""
    from perfkit.report.line import summary_line

    summary = {"case": "demo", "baseline": "tp", "comparison": {"verdict": "unknown", "ratio": None},
               "variants": {"tp": {"trial_medians_ms": [], "trials": 0, "failed": 0},
                            "sp": {"trial_medians_ms": [13.0, 12.0, 12.5], "trials": 3, "failed": 0}},
               "trials": {"total": 3, "ok": 3, "failed": []}}
    assert summary_line(summary, Path("r/report.md")) == (
        "demo: sp 12.500 ms (median of trial medians); no ratio: only sp ran; report r/report.md")
    only_a = {"tp": {"trial_medians_ms": [8.25], "trials": 1, "failed": 0}, "sp": {"trials": 0, "failed": 0},
              "tp-aa": {"trial_medians_ms": [8.5], "trials": 1, "failed": 0}}
    # `--aa --only tp` (a newcomer's: "only tp ran", its A/A control's trials and ratio unsaid)
    floor = {"variant": "tp-aa", "ratio": 1.03, "ci": [0.98, 1.09], "half_width": 0.09, "verdict": "unknown"}
    assert summary_line(dict(summary, variants=only_a, noise_floor=floor), Path("r/report.md")) == (
        "demo: tp 8.250 ms (median of trial medians); no B/A ratio: only tp and its A/A control tp-aa ran, tp-aa/tp "
        "1.030 [0.980, 1.090]; A/A noise floor -2.0%..+9.0%; report r/report.md")
    one_step = dict(floor, ci=[None, None], half_width=None)
    assert "; no B/A ratio: only tp and its A/A control tp-aa ran, tp-aa/tp 1.030 [no CI: one timed step]; report" in \
        summary_line(dict(summary, variants=only_a, noise_floor=one_step), Path("r/report.md"))
    untimed = dict(only_a, **{"tp-aa": {"trial_medians_ms": [], "trials": 1, "failed": 1}})
    assert ("; no B/A ratio: only tp and its A/A control tp-aa ran, no A/A ratio (a side has no timed steps); "
            "report") in summary_line(dict(summary, variants=untimed, noise_floor=dict(one_step, ratio=None)),
                                      Path("r/report.md"))
    unran = dict(only_a, **{"tp-aa": {"trials": 0, "failed": 0}})  # (stopped before the control's first trial)
    assert "demo: tp 8.250 ms (median of trial medians); no ratio: only tp ran; report" in summary_line(
        dict(summary, variants=unran, noise_floor=dict(one_step, ratio=None)), Path("r/report.md"))
    third = {"tp": {"trials": 0}, "sp": {"trials": 0}, "xla": {"trial_medians_ms": [1.5], "trials": 1}}
    assert "demo: xla 1.500 ms (median of trial medians); no ratio: only xla ran;" in \
        summary_line(dict(summary, variants=third), Path("r/report.md"))
    hung = {"tp": {"trials": 0}, "sp": {"trial_medians_ms": [], "trials": 1, "failed": 1}}
    failed = [{"index": 0, "variant": "sp", "status": "hung", "dir": "trials/00-sp", "ranks": []}]
    trials = {"total": 1, "ok": 0, "failed": failed}
    assert summary_line(dict(summary, variants=hung, trials=trials), Path("r/report.md")) == (
        "demo: no timed steps for sp; no ratio: only sp ran; 1 trial(s) failed; sp hung; report r/report.md")


def test_progression_table(make_run):
    first = make_run("r1")
    second = make_run("r2", trials=ab_trials(b_scale=1.5))
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["rows"]
    assert [r["run"] for r in rows] == ["r1", "r2"]
    # each run's b as its median of per-trial medians, the figures the ratio divides
    b1, b2 = (np.median(json.loads((r / "summary.json").read_text())["variants"]["b"]["trial_medians_ms"])
              for r in (first, second))
    assert rows[1]["b_vs_previous"] == pytest.approx(b2 / b1) and rows[0]["b_vs_previous"] is None
    assert rows[1]["a_vs_previous"] == pytest.approx(1.0)

    out = first.parent / "progression.md"
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second), "--out", str(out)])
    lines = out.read_text().splitlines()
    assert lines[0].startswith("| run | commit | a step (ms) | b step (ms) | b/a [95% CI] |")
    assert table_row(out.read_text(), "`r2`")[2] == f"{b2:.2f} ({float(f'{b2:.2f}') / float(f'{b1:.2f}') - 1:+.1%})"
    assert table_row(out.read_text(), "`r1`")[0] == "`c0ffee000000`"
    assert lines[-1].endswith("in parentheses, the change of the figure shown against the last row above of the same "
                              "case and variant; in brackets, the ratio's 95% CI.")
    # another case between them: none against a row of another case (it read +226% against another case's); the
    # second fixture run against the first, two rows up (a matrix's cells alternate so)
    other = make_run("r3", case_extra={"name": "other-case"})
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(other), str(second), "--json"])
    rows = [(r["case"], r["a_vs_previous"], r["b_vs_previous"]) for r in json.loads(res.output)["rows"]]
    assert rows[:2] == [("fixture", None, None), ("other-case", None, None)]
    assert rows[2][1] == pytest.approx(1.0) and rows[2][2] == pytest.approx(b2 / b1)


def test_progression_shows_a_step_time_without_a_ratio_to_four_significant_digits(make_run):
    """A newcomer's: a row without a ratio (b crashed in every trial) showed a's 0.013443 ms step to 2 decimals,
    0.01, a figure that rounds to nothing. With no ratio to set its digits it shows 4 significant ones, as many
    as the figures a ratio divides get."""
    crashed = {"rank": 0, "exit_code": 1, "running_at_end": False, "steps_done": 0, "last_step_ms": None,
               "last_mark": None}
    trials = [trial(0, "a", [0.05, 0.013443, 0.013443, 0.013443]), trial(1, "b", [], status="crashed",
                                                                          ranks=[crashed])]
    run = make_run("r1", trials=trials, outputs={}, case_extra={"repeats": {"min": 1, "max": 1}})
    text = CliRunner().invoke(cli, ["report", "--progression", str(run)]).output
    assert table_row(text, "`r1`")[1:4] == ["0.01344", "-", "-"]  # a's step (by hand: 0.013443 to 4 digits), b's, ratio


def test_progression_marks_a_stopped_run_and_names_a_combinations_values(make_run):
    """A newcomer's: a run stopped after one trial a side read in the table as any other, and a matrix's rows as
    ``sweep/cells/00`` without the values swept."""
    first, second = make_run("r1"), make_run("r2")
    summary = json.loads((second / "summary.json").read_text())
    (second / "summary.json").write_text(json.dumps(dict(summary, interrupted=True)))
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second), "--json"])
    assert [r["interrupted"] for r in json.loads(res.output)["rows"]] == [False, True]
    text = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second)]).output
    assert table_row(text, "`r2` (stopped)")[0] == "`c0ffee000000`" and "`r1` (stopped)" not in text
    assert "; (stopped): a run stopped before its plan finished, of fewer trials." in text
    sweep = first.parent / "sweep"
    (sweep / "cells" / "00").mkdir(parents=True)
    (sweep / "summary.json").write_text(json.dumps({"kind": "matrix"}))
    (sweep / "cells" / "00" / "summary.json").write_text(json.dumps(dict(summary, case="fixture[devices=2]")))
    from perfkit.report.progression import load_summaries

    assert [label for label, _ in load_summaries(sweep)] == ["sweep/cells/00 [devices=2]"]
    # a combination given on its own is named so too (it read `00`)
    assert [label for label, _ in load_summaries(sweep / "cells" / "00")] == ["sweep/cells/00 [devices=2]"]


def test_progression_names_the_case_fields_changed_since_the_row_above(make_run):
    """A newcomer's: three runs of one case at one commit, at sizes 96, 128 and 160 (`--set command=...`), read as
    three rows of one setting whose step time changed +170% and +59% for nothing the table named. Each row names the
    fields of its resolved case that differ from the last row above of the same case (the row its change divides by);
    the column shows only where some row changed."""
    first = make_run("r1")
    second = make_run("r2", case_extra={"command": ["python", "bench.py", "128"]})
    third = make_run("r3", case_extra={"command": ["python", "bench.py", "128"], "warmup": 2,
                                       "variants": {"a": {"description": "the old kernel", "env": {"N": "1"}},
                                                    "b": {"description": "the new kernel"}}})
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second), str(third), "--json"])
    assert res.exit_code == 0, res.output
    changed = [r["changed"] for r in json.loads(res.output)["rows"]]
    assert changed == [None, ["command"], ["variants.a.env.N", "warmup"]]
    back = make_run("r4")  # r1's case again: its command back, against r2's
    text = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second), str(back)]).output
    assert text.startswith("| run | commit | case changed | a step (ms) |")
    assert [table_row(text, f"`{r}`")[1] for r in ("r1", "r2", "r4")] == ["-", "`command`", "`command`"]
    assert "case changed: the fields of the run's case.yaml that differ from the last row above of the same case" \
        in text


def test_progression_reads_an_empty_mapping_of_a_case_as_no_field(make_run):
    """A run directory's case.yaml once held `matrix: {}` and now leaves an empty matrix out: the two cases are one,
    no field changed (an empty mapping holds no field)."""
    first = make_run("r1", case_extra={"matrix": {}})
    second = make_run("r2")
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second), "--json"])
    assert res.exit_code == 0, res.output
    assert [r["changed"] for r in json.loads(res.output)["rows"]] == [None, []]


def test_progression_of_runs_of_several_cases_names_each_rows_case(make_run):
    """A newcomer's: runs of two cases in one table read as one series, the change column blank where a row's
    case had no row above for no reason shown; with more than one case, a column names each row's (a matrix's
    combinations are one case, whose values its rows' names carry)."""
    first, other = make_run("r1"), make_run("r3", case_extra={"name": "other-case"})
    text = CliRunner().invoke(cli, ["report", "--progression", str(first), str(other)]).output
    assert text.startswith("| run | case | commit |")
    assert table_row(text, "`r1`")[0] == "`fixture`" and table_row(text, "`r3`")[0] == "`other-case`"
    assert "| case |" not in CliRunner().invoke(cli, ["report", "--progression", str(first)]).output


def test_progression_refuses_a_run_given_twice(make_run):
    """A newcomer's: the same run given twice read as a second row, +0.0% against itself."""
    first = make_run("r1")
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(first.parent / "." / "r1")])
    assert res.exit_code == 2
    assert res.output == f"perfkit: {first.parent / '.' / 'r1'}: given twice (runs 1 and 2 of the progression)\n"


def test_progression_refuses_a_matrix_and_one_of_its_combinations_given_together(make_run):
    """The matrix gives a row per combination: its cells/00 given beside it read as a second row of that
    combination, +0.0% against itself."""
    summary = json.loads((make_run("r1") / "summary.json").read_text())
    sweep = make_run("r2").parent / "sweep"
    (sweep / "cells" / "00").mkdir(parents=True)
    (sweep / "summary.json").write_text(json.dumps({"kind": "matrix"}))
    (sweep / "cells" / "00" / "summary.json").write_text(json.dumps(dict(summary, case="fixture[devices=2]")))
    res = CliRunner().invoke(cli, ["report", "--progression", str(sweep), str(sweep / "cells" / "00")])
    assert (res.exit_code, res.output) == (2, f"perfkit: {sweep / 'cells' / '00'}: given twice (runs 1 and 2 of the "
                                              "progression)\n")


def test_bad_input_is_one_line(tmp_path):
    res = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "no case.yaml" in res.output and len(res.output.splitlines()) == 1
    res = CliRunner().invoke(cli, ["report", str(tmp_path / "nonexistent")])  # it said "no case.yaml" too
    assert res.exit_code == 2 and res.output == f"perfkit: {tmp_path / 'nonexistent'}: no such run directory\n"
    res = CliRunner().invoke(cli, ["report", "--progression", str(tmp_path)])  # it said "write it with perfkit
    # report", which then refused the folder
    assert res.output == f"perfkit: {tmp_path}: not a perfkit run directory (no summary.json, no case.yaml)\n"
    (tmp_path / "case.yaml").write_text("name: x\n")
    res = CliRunner().invoke(cli, ["report", "--progression", str(tmp_path)])
    # the command to run, with the folder in it (a newcomer's: it read `perfkit report RUN_DIR`)
    assert res.output == f"perfkit: {tmp_path}: no summary.json (write it with `perfkit report {tmp_path}`)\n"
    (tmp_path / "case.yaml").unlink()
    res = CliRunner().invoke(cli, ["report", "--progression", str(tmp_path / "nonexistent")])  # not "write it"
    assert res.exit_code == 2 and res.output == f"perfkit: {tmp_path / 'nonexistent'}: no such run directory\n"
    (tmp_path / "summary.json").write_text('{"case": "cut off')
    res = CliRunner().invoke(cli, ["report", "--progression", str(tmp_path)])
    assert res.exit_code == 2 and len(res.output.splitlines()) == 1
    assert res.output.startswith(f"perfkit: {tmp_path / 'summary.json'}: not valid JSON"), res.output


def test_a_changed_output_shows_in_quality_and_plot_title(tmp_path):
    """B's output frames off by one frame: the per-frame PSNR list the plot draws is the quality's."""
    from perfkit.run import finish

    trials = ab_trials(values=False)
    run = write_run(tmp_path / "run", trials, outputs_for(trials, frames(), shifted(frames(), 2, 192, by=1)))
    finish.render(run)
    per_frame = json.loads((run / "summary.json").read_text())["quality"]["per_frame_psnr_db"]
    assert per_frame[:2] == ["inf", "inf"] and per_frame[2] == pytest.approx(psnr(1.0))


def test_the_collectives_change_is_the_difference_of_the_figures_above_it():
    """A newcomer's: 7.848 and 3.258 ms of collectives above "+4.591 ms" (7.848 - 3.258 = 4.590). To the microsecond,
    as the report's other times, each change the difference of the two figures shown (B - A is 4.5892)."""
    from perfkit.report.markdown import _hidden

    bd = {"baseline": "tp", "variants": {"tp": {"comm_ms": 3.2584, "hidden_ms": 0.0, "overlap": 0.0},
                                         "sp": {"comm_ms": 7.8476, "hidden_ms": 0.5, "overlap": 0.0637}}}
    assert _hidden(bd) == ["", "- tp's collectives take 3.258 ms a step, 0.000 ms of it hidden under compute (0%).",
                           "- sp's collectives take 7.848 ms a step, 0.500 ms of it hidden under compute (6%).",
                           "- sp against tp: +4.590 ms of collectives a step, +0.500 ms hidden."]


def test_the_cost_sections_changes_follow_from_its_figures():
    """The tiny Wan's step costs of the demo (bytes and FLOPs by hand from its report): HBM bytes 12603392 and
    14973952 (12.02 and 14.28 MiB, +18.8%), which at 3 digits show as 12 and 14.3 MiB (+19.2%); FLOPs 26670000
    and 26520000 (-0.6%), at 3 digits 2.67e+07 and 2.65e+07 (-0.7%)."""
    from perfkit.report.cost import section

    def step(flops: int, hbm: int) -> dict:
        return {"module": "jit_step", "flops": flops, "dot_flops": flops, "hbm_bytes": hbm,
                "interconnect_bytes": 589824, "temp_bytes": 1 << 20, "peak_bytes": 2 << 20, "collectives": {},
                "collective_shapes": []}

    lines = section({"baseline": "tp", "cost": {"tp": {"step": step(26670000, 12603392)},
                                                "sp": {"step": step(26520000, 14973952)}}})
    assert table_row("\n".join(lines), "HBM bytes accessed") == ["12.02 MiB", "14.28 MiB"]
    assert table_row("\n".join(lines), "FLOPs (dots and convolutions)") == ["2.667e+07 (2.67e+07)",
                                                                           "2.652e+07 (2.65e+07)"]
    assert lines[-2].endswith("FLOPs -0.6%; HBM bytes +18.8%; bytes sent a device unchanged.")
    # the demo's sp: 2.83e+07 FLOPs, 24000000 of them in dots, showed as "(2.4e+07)" beside tp's "(2.42e+07)", as
    # if known to two digits (a newcomer's)
    lines = section({"cost": {"sp": {"step": {**step(28300000, 12603392), "dot_flops": 24000000}}}})
    assert table_row("\n".join(lines), "FLOPs (dots and convolutions)") == ["2.83e+07 (2.40e+07)"]


def test_the_cost_sections_bytes_divide_as_shown_in_mib():
    """A newcomer's ring against Pallas all-gather matmul: HBM bytes 5111824 and 7543913 (+47.6%) showed as 4.88
    and 7.19 MiB, which divide to +47.3%: the digits were found for the bytes (5.11e+06 and 7.54e+06 divide to
    +47.6%), not for the MiB shown. At 4 digits, 4.875 and 7.194 MiB divide to +47.6%."""
    from perfkit.report.cost import section

    def step(hbm: int) -> dict:
        return {"module": "jit_kernel_step", "flops": 1e6, "dot_flops": 1e6, "hbm_bytes": hbm,
                "interconnect_bytes": 0, "temp_bytes": 1 << 20, "peak_bytes": 2 << 20, "collectives": {},
                "collective_shapes": []}

    lines = section({"baseline": "ring", "cost": {"ring": {"step": step(5111824)}, "pallas": {"step": step(7543913)}}})
    assert table_row("\n".join(lines), "HBM bytes accessed") == ["4.875 MiB", "7.194 MiB"]
    assert "HBM bytes +47.6%" in lines[-2]


def test_the_cost_sections_bytes_print_as_perfkit_cost_prints_them():
    """A newcomer's: the demo's Cost table said "bytes sent a device 0.562 MiB" and "peak 1.06 MiB" where
    `perfkit cost RUN --chip v5e` said "0.5625 MiB sent a device" and "peak 1.056 MiB" (and temp memory to 3 digits
    in one, 4 in the other). By hand: 589824 B is 0.5625 MiB; tp's temp 858752 B 0.81897 MiB and peak 1107268 B
    1.05597 MiB; sp's 836100 B 0.79737 MiB and 1081472 B 1.03137 MiB: to 4 significant digits in both."""
    from perfkit.cli.cost import program_lines
    from perfkit.report.cost import section

    def step(temp: int, peak: int) -> dict:
        return {"module": "jit_step", "flops": 2.6e7, "dot_flops": 2.6e7, "other_flops": 0, "transcendentals": 0,
                "hbm_bytes": 12511876, "interconnect_bytes": 589824, "temp_bytes": temp, "peak_bytes": peak,
                "collectives": {"all-reduce": {"count": 6, "buffer_bytes": 393216, "sent_bytes": 589824}},
                "collective_shapes": []}

    tp, sp = step(858752, 1107268), step(836100, 1081472)
    report = "\n".join(section({"baseline": "tp", "cost": {"tp": {"step": tp}, "sp": {"step": sp}}}))
    assert table_row(report, "bytes sent a device") == ["0.5625 MiB", "0.5625 MiB"]
    assert table_row(report, "temp / peak memory") == ["0.8190 MiB / 1.056 MiB", "0.7974 MiB / 1.031 MiB"]
    command = "\n".join(program_lines("tp", tp, None))
    assert "temp 0.8190 MiB, peak 1.056 MiB" in command and "0.5625 MiB sent a device" in command


def test_a_tensors_quality_row_says_its_units():
    """A tensor's differences are in its own units: its header said "/255" (a newcomer's rows.npy)."""
    from perfkit.report.markdown import quality_section

    tensor = {"kind": "tensor", "file": "rows.npy", "psnr_db": 61.5, "mean_abs_diff": 0.25, "max_abs_diff": 2.0,
              "rel_l2": 1.58e-07, "cosine": 0.9999999999, "bit_identical": False, "files": {}}
    lines = quality_section({"baseline": "a", "variants": {"a": {}, "b": {}}, "quality": tensor})
    # a tensor's own figures, beside the frames' columns it leaves empty (a newcomer's out.npy: no relative L2)
    assert lines[0] == "`rows.npy`: a tensor; PSNR over A's range; relative L2 1.58e-07, cosine 0.9999999999."
    # where NaN or inf part the outputs, their figures are NaN: said so, not printed 'nan' (a reviewer's)
    apart = quality_section({"baseline": "a", "variants": {"a": {}, "b": {}},
                             "quality": {**tensor, "rel_l2": float("nan"), "cosine": float("nan")}})
    assert apart[0].endswith("relative L2 undefined (NaN or inf where they part), cosine undefined (NaN or inf where "
                             "they part).")
    assert "| mean abs diff (in A's units; /255 for frames) |" in lines[2]
    assert lines[4] == "| b vs a | 61.50 | - | - | - | - | 0.25 | 2 | - | no |"


def test_a_variant_without_timed_steps_has_one_dash_for_its_spread(make_run):
    """A run stopped after tp's first trial: sp's p25 - p75 read "- - -"."""
    report = (make_run("half", trials=ab_trials()[:1]) / "report.md").read_text()
    assert "| step, synced: p25 - p75 of all timed steps pooled (ms) | " in report
    row = next(line for line in report.splitlines() if line.startswith("| step, synced: p25 - p75"))
    assert row.endswith(" | - |") and "- - -" not in report


def test_report_writes_the_paths_a_run_writes(make_run, tmp_path, monkeypatch):
    """`perfkit report RUN` with a relative RUN wrote summary.json's paths relative, where the run (and --resume)
    write them absolute: the file changed with whichever command wrote it last."""
    make_run("rel")
    monkeypatch.chdir(tmp_path)
    assert CliRunner().invoke(cli, ["report", "rel"]).exit_code == 0
    assert json.loads((tmp_path / "rel" / "summary.json").read_text())["run_dir"] == str(tmp_path / "rel")


def test_a_verdict_inside_the_aa_noise_floor_is_not_to_be_trusted_alone(make_run):
    """A newcomer's --aa run: sp/tp 1.437 [1.216, 2.682] -> slower beside an A/A noise floor of -21.9%..+78.0%, and
    "a change inside this range cannot be told from noise". Here b runs 1.4x a in every trial (its CI excludes 1:
    slower), and the A/A control's trials run 1.0x, 1.8x and 0.75x a: its CI holds +40%. The headline, the timing
    section and Not verified say the verdict lies inside the floor."""
    trials = ab_trials(b_scale=1.4)
    trials += [trial(6 + r, "a-aa", [s * scale for s in steps], natural=[0.9 * steps[-1] * scale])
               for r, (steps, scale) in enumerate(zip(A_STEPS, (1.0, 1.8, 0.75)))]
    run = make_run("aa", trials=trials, case_extra={"aa": True})
    summary = json.loads((run / "summary.json").read_text())
    c, nf = summary["comparison"], summary["noise_floor"]
    assert c["verdict"] == "slower" and nf["ci"][0] <= c["ratio"] <= nf["ci"][1], (c, nf)
    report = (run / "report.md").read_text()
    change = f"{c['ratio'] - 1:+.1%}"
    assert f"(b/a's {change} inside it: not to be trusted alone)" in report.splitlines()[2]
    assert f"b/a's {change} lies inside it: its verdict (slower) is its own CI's" in report
    assert f"- the B/A timing verdict: slower by its CI, but its change ({change}) lies inside the A/A noise floor" \
        in report


def test_an_aa_control_called_faster_says_no_verdict_of_the_run_is_to_be_trusted(make_run):
    """A newcomer's --aa run on a loaded machine: `tp-aa/tp 0.487 [0.321, 0.956] -> faster`, and the report went on
    "A/A noise floor: -67.9% to -4.4%. A B/A change inside this range cannot be told from run-to-run noise": a
    range without 0%, in which B = A would count as told from noise. Here the control's trials run 0.6x a's in each
    round: the baseline faster than itself. The timing section, the line and Not verified say so, drift or chance."""
    trials = ab_trials(b_scale=1.4)
    trials += [trial(6 + r, "a-aa", [s * 0.6 for s in steps], natural=[0.9 * steps[-1] * 0.6])
               for r, steps in enumerate(A_STEPS)]
    run = make_run("aa", trials=trials, case_extra={"aa": True})
    summary = json.loads((run / "summary.json").read_text())
    assert summary["noise_floor"]["verdict"] == "faster"
    report = " ".join((run / "report.md").read_text().split())
    assert "A/A control (a-aa, the baseline run again): **faster** than the baseline itself, 0.600" in report
    assert ("the run's conditions drifted between its trials (load, clocks, heat), or chance made the call a 95% "
            "interval makes in a few A/A runs of a hundred; either way no timing verdict of this run is to be trusted "
            "alone") in report
    assert "cannot be told from run-to-run noise" not in report
    assert "(A/A itself faster: no verdict of this run to be trusted)" in report
    assert "- every timing verdict: the A/A control (a-aa) was called faster than the baseline itself (0.600" in report


def test_traced_steps_that_changed_the_other_way_are_said_so():
    """The same --aa run: "Where sp's -2.044 ms a step goes" (tp 15.246, sp 13.202 ms traced) under sp/tp 1.437
    timed: one traced tp step of 30.1 ms turned it. Said beside it; the A/A control's own changes are noise."""
    from perfkit.report.markdown import _traced_against_timed

    total = {"a_ms": 15.246, "b_ms": 13.202, "ci_lo_ms": -3.0, "ci_hi_ms": -1.0, "marked": True}
    summary = {"comparisons": [{"variant": "sp", "metric": "step_ms", "ratio": 1.437, "verdict": "slower"},
                               {"variant": "tp-aa", "metric": "step_ms", "ratio": 1.1, "verdict": "unknown"}],
               "noise_floor": {"variant": "tp-aa"},
               "attribution": {"variants": {v: {"total": total, "chip_steps": [12, 12]} for v in ("sp", "tp-aa")}}}
    assert _traced_against_timed(summary) == [
        "", "**sp's traced steps changed the other way from its timed steps**: -2.044 ms a traced step against "
        "+43.7% a timed one. The traced steps are few (12 and 12 chip-steps, `capture.trace`), so one outlier turns "
        "them; `perfkit trace breakdown` on each trial's folder gives every chip-step."]
    summary["comparisons"][0]["ratio"] = 0.9
    assert _traced_against_timed(summary) == []


def test_traced_steps_are_not_said_to_go_the_other_way_from_an_unknown_timing():
    """A command case whose B nudges layer 3 of 4 through an added all-reduce: timed nudge/base 0.827, CI [0.215,
    1.423], verdict unknown; traced +6.380 ms, CI [-61.228, +73.987]. The report said the traced steps "changed the
    other way from its timed steps" and that "one outlier turns them", as if the timing had a direction: it has none
    (its CI spans 1). The traced total's CI, wider than the step, is what is said."""
    from perfkit.report.markdown import _traced_against_timed

    total = {"a_ms": 43.391, "b_ms": 49.771, "ci_lo_ms": -61.2283, "ci_hi_ms": 73.9872, "marked": False}
    summary = {"comparisons": [{"variant": "nudge", "metric": "step_ms", "ratio": 0.827, "verdict": "unknown"}],
               "attribution": {"variants": {"nudge": {"total": total, "trials": [3, 3], "chip_steps": [36, 36]}}}}
    assert _traced_against_timed(summary) == [
        "", "**nudge's attribution had too few traced steps to place its change**: its total's CI [-61.228, +73.987] "
        "ms is wider than the step, from 3 and 3 trials of 36 and 36 chip-steps; more steps in `capture.trace` and "
        "more rounds (`--set repeats.min=6 --set repeats.max=6`) give it more."]
    # a timing the same within its minimum effect has no direction either; a traced CI that places the change: nothing
    total.update(ci_lo_ms=1.0, ci_hi_ms=11.0, marked=True)
    summary["comparisons"][0]["verdict"] = "same"
    assert _traced_against_timed(summary) == []


def test_the_breakdown_says_how_many_steps_a_trial_ran_under_the_profiler():
    """The steps left out of the timing as profiled, each variant's (torch.profiler's warm-up too); none said for a
    summary from before the count. It read "(steps a trial left out: tp 2, sp 1)", which a newcomer could not read:
    left out of what, and in which trial (a newcomer's, on the demo); then "(profiled steps each trial left out of its
    timing: tp 2, sp 1, the most of any trial)", still hard to parse (another newcomer's)."""
    from perfkit.report.markdown import _profiled

    summary = {"variants": {"tp": {"profiled_steps": 2}, "sp": {"profiled_steps": 1}}}
    assert _profiled(summary, ["tp", "sp"]) == (", with any other step the program ran under its profiler (at most "
                                                "tp 2, sp 1 such steps a trial)")
    del summary["variants"]["sp"]["profiled_steps"]
    assert _profiled(summary, ["tp", "sp"]) == ""


def test_a_change_whose_ci_excludes_0_shows_its_sign_and_no_bound_reads_minus_0():
    """A newcomer's LTX-2 run: `concatenate | compute | changed | 0.001 | 0.001 | +0.000 | [-0.001, -0.000]` where
    summary.json held 0.001214 and 0.000678625 ms (-0.000535375), CI [-0.00094, -0.00013]: a change shown +0.000
    whose CI excludes 0. That row takes a fourth decimal: 0.0012, 0.0007, -0.0005, [-0.0009, -0.0001], starred as
    its printed CI excludes 0; a bound of -0.00004 in an interval across 0 shows -0.00004; the other rows keep
    three."""
    from perfkit.report.attribution import section

    def row(key, a, b, lo, hi, marked):
        return {"key": key, "category": "compute", "change": "changed", "a_ms": a, "b_ms": b, "delta_ms": b - a,
                "ci_lo_ms": lo, "ci_hi_ms": hi, "marked": marked}

    kinds = [row("fusion", 0.842, 0.617, -3.238, 2.787, False),
             row("concatenate", 0.001214, 0.000678625, -0.00094, -0.00013, True),
             row("copy", 0.1, 0.2, -0.00004, 0.2, False)]
    total = dict(row("total", 8.3209, 6.8097, -34.3527, 31.3302, False), category="", change="total")
    attribution = {"baseline": "tp", "top": 10, "variants": {"sp": {
        "total": total, "interval": "welch", "trials": [2, 2], "chip_steps": [8, 8],
        "category": [dict(row("compute", 0.891, 0.654, -3.406, 2.931, False), category="")], "kind": kinds,
        "op": kinds}}}
    report = "\n".join(section(attribution))
    assert table_row(report, "`concatenate`") == ["compute", "changed", "0.0012", "0.0007", "-0.0005",
                                                  "[-0.0009, -0.0001]", "**\\***"]
    assert table_row(report, "`copy`") == ["compute", "changed", "0.10000", "0.20000", "+0.10000",
                                           "[-0.00004, +0.20000]", ""]
    assert table_row(report, "`fusion`") == ["compute", "changed", "0.842", "0.617", "-0.225", "[-3.238, +2.787]", ""]
    assert "change -1.511 ms [-34.353, +31.330]" in report and not re.search(r"[-+]0\.0+(?![0-9])", report)


def test_a_bound_too_small_for_any_decimals_leaves_the_rest_their_decimals():
    """A review's: a marked change of -0.0005 ms whose CI's upper bound is -1e-9 ms, below the sixth decimal: no
    number of decimals shows that bound not 0, and the row fell back to three (-0.000 [-0.001, -0.000]). Such a
    figure is left out of the choice: the change and the other bound take their fourth decimal, the tiny bound its
    sign."""
    from perfkit.report.attribution import section

    def row(key, a, b, lo, hi, marked):
        return {"key": key, "category": "compute", "change": "changed", "a_ms": a, "b_ms": b, "delta_ms": b - a,
                "ci_lo_ms": lo, "ci_hi_ms": hi, "marked": marked}

    kinds = [row("tiny", 0.0012, 0.0007, -0.0009, -1e-9, True)]
    total = dict(row("total", 8.3209, 6.8097, -34.3527, 31.3302, False), category="", change="total")
    attribution = {"baseline": "tp", "top": 10, "variants": {"sp": {
        "total": total, "interval": "welch", "trials": [2, 2], "chip_steps": [8, 8],
        "category": [dict(row("compute", 0.891, 0.654, -3.406, 2.931, False), category="")], "kind": kinds,
        "op": kinds}}}
    assert table_row("\n".join(section(attribution)), "`tiny`") == [
        "compute", "changed", "0.0012", "0.0007", "-0.0005", "[-0.0009, -0.0000]", ""]


def test_an_attribution_too_few_to_place_the_change_is_said_so():
    """A newcomer's command case: timed 2.03x slower, the attribution `change +32.471 ms [-56.206, +121.147]` from 3
    and 3 trials of one traced step, no part starred, and nothing said. Where the total's CI spans 0 while the timing
    gives a verdict, or is wider than the step (the torch case's [-201.465, +298.402] in a 97 ms step), one sentence
    says the traced steps were too few and how to get more; a CI that places the change, or the A/A control's, none."""
    from perfkit.report.markdown import _traced_against_timed

    def summary(total, verdict):
        return {"comparisons": [{"variant": "slow", "metric": "step_ms", "ratio": 2.03, "verdict": verdict},
                                {"variant": "base-aa", "metric": "step_ms", "ratio": 1.0, "verdict": "unknown"}],
                "noise_floor": {"variant": "base-aa"},
                "attribution": {"variants": {v: {"total": total, "trials": [3, 3], "chip_steps": [6, 6]}
                                             for v in ("slow", "base-aa")}}}

    spans = {"a_ms": 32.799, "b_ms": 65.270, "ci_lo_ms": -56.2059, "ci_hi_ms": 121.1473, "marked": False}
    assert _traced_against_timed(summary(spans, "slower")) == [
        "", "**slow's attribution had too few traced steps to place its change**: its total's CI [-56.206, +121.147] ms "
        "spans 0 where the timing says slower, from 3 and 3 trials of 6 and 6 chip-steps; more steps in `capture.trace` "
        "and more rounds (`--set repeats.min=6 --set repeats.max=6`) give it more."]
    wide = {"a_ms": 48.588, "b_ms": 97.057, "ci_lo_ms": -201.4649, "ci_hi_ms": 298.4023, "marked": False}
    assert "[-201.465, +298.402] ms is wider than the step, from" in _traced_against_timed(summary(wide, "unknown"))[1]
    placed = {"a_ms": 32.799, "b_ms": 65.270, "ci_lo_ms": 20.0, "ci_hi_ms": 45.0, "marked": True}
    assert _traced_against_timed(summary(placed, "slower")) == []
    # a newcomer's ring against Pallas: a CI wider than the step that excludes 0 places the sign, if not the size
    rough = {"a_ms": 5.810, "b_ms": 382.357, "ci_lo_ms": 125.5441, "ci_hi_ms": 743.0912, "marked": True}
    assert _traced_against_timed(summary(rough, "slower"))[1].startswith(
        "**slow's attribution places its change only roughly**: its total's CI [+125.544, +743.091] ms is wider than "
        "the step, from 3 and 3 trials")
    # a newcomer's: a total spanning 0 read 'too few traced steps to place its change' beside two categories starred
    parts = {"a_ms": 7.0, "b_ms": 16.5, "ci_lo_ms": -0.1481, "ci_hi_ms": 19.1324, "marked": False}
    placed = summary(parts, "slower")
    def part(key, lo, hi):
        return {"key": key, "a_ms": 1.0, "b_ms": 2.0, "ci_lo_ms": lo, "ci_hi_ms": hi, "marked": lo > 0 or hi < 0}

    # ici and compute starred in the tables above; idle not
    placed["attribution"]["variants"]["slow"]["category"] = [part("ici", 1.426, 10.61), part("compute", 0.969, 4.699),
                                                             part("idle", -0.1, 0.2)]
    assert _traced_against_timed(placed)[1].startswith(
        "**slow's attribution places only parts of its change**: its total's CI [-0.148, +19.132] ms spans 0 where the "
        "timing says slower, while ici, compute exclude 0 on their own (starred above), from 3 and 3 trials")
    # and where a side had one traced step in all, no CI: no line (the section says why)
    assert _traced_against_timed(summary({**parts, "ci_lo_ms": None, "ci_hi_ms": None}, "slower")) == []


def test_a_multi_process_runs_timed_steps_are_said_to_be_rank_0s(make_run):
    """A newcomer's repro/rank_constant: "timed steps (trials) 10 (2)" for 4 ranks x 5 steps: a trial's steps are
    its first rank's (a step's collectives wait for every rank), and the row says so."""
    trials = ab_trials()
    for t in trials:
        t["ranks"] = [{**t["ranks"][0], "rank": r} for r in range(2)]
    run = make_run("two", trials=trials)
    summary = json.loads((run / "summary.json").read_text())
    assert [v["ranks"] for v in summary["variants"].values()] == [2, 2]
    assert table_row((run / "report.md").read_text(), "timed steps (trials; rank 0's of 2 ranks)") == ["12 (3)",
                                                                                                      "12 (3)"]


def test_the_cost_section_says_a_variant_whose_ranks_parted_is_costed_by_its_first():
    """A newcomer's skipped-collective run: the Cost section said skip ran "the same collectives" as ring (3 a step,
    its rank 0's program), while Rank consistency named rank 3 with 2."""
    from perfkit.report.cost import section

    step = {"module": "jit_step", "flops": 1e6, "dot_flops": 1e6, "hbm_bytes": 1e6, "interconnect_bytes": 65536,
            "temp_bytes": 1 << 15, "peak_bytes": 1 << 16, "collectives": {"collective-permute": {"count": 3}},
            "collective_shapes": [{"kind": "collective-permute", "buffer_bytes": 32768, "count": 3}]}
    summary = {"baseline": "ring", "cost": {"ring": {"step": step}, "skip": {"step": step}},
               "ranks": {"ring": {"consistent": True}, "skip": {"consistent": False, "divergent_ranks": [3]}}}
    lines = section(summary)
    assert ("skip's ranks compiled different programs (Rank consistency): its cost is its first rank's program's; "
            "rank 3 compiled another.") in lines
    summary["ranks"]["skip"] = {"consistent": True}
    assert not any("compiled different programs" in line for line in section(summary))


def test_devices_not_probed_say_why(make_run, monkeypatch):
    """A command case's env.json has no devices (perfkit runs none of its own code on them): "devices: not
    probed" had read as a step perfkit skipped."""
    import run_fixtures

    monkeypatch.setattr(run_fixtures, "ENV", {k: v for k, v in run_fixtures.ENV.items() if k != "devices"})
    report = (make_run("unprobed") / "report.md").read_text()
    assert "- devices: not probed (a command or served case: perfkit leaves its devices to the program it runs)" \
        in report


def test_outputs_of_other_ranks_are_named_as_not_compared(tmp_path):
    """A run compares rank 0's outputs: a program whose rank 1 wrote outputs of its own (a newcomer's, a fault
    planted on rank 1 alone) reads them named under Not verified, not passed over."""
    from perfkit.run import finish

    trials = ab_trials()
    run = write_run(tmp_path / "run", trials, outputs_for(trials, frames(), frames()))
    other = run / trials[1]["dir"] / "rank1" / "outputs"
    other.mkdir(parents=True)
    np.save(other / "out_rank1.npy", np.zeros(4))
    finish.render(run)
    assert ("the outputs of ranks other than 0 (rank 1's out_rank1.npy): a run compares rank 0's outputs"
            in json.loads((run / "summary.json").read_text())["not_verified"])


@pytest.mark.parametrize("steps, said", [
    ([], "rank 0 recorded no step (the program calls `perfkit.record.step(ms)` once a step, or prints a line the "
         "case's `step_regex` matches)"),
    ([1.0] * 6, "rank 0's 6 steps are all warmup (the case drops the first 10)"),
])
def test_a_trial_without_timed_steps_says_why(tmp_path, steps, said):
    """A newcomer's program that never called record.step, and one whose steps were all warmup: each trial had read
    `no_steps` alone."""
    from perfkit.run import finish

    trials = [{**trial(i, v, steps), "status": "no_steps", "warmup": 10} for i, v in enumerate("ab")]
    for t in trials:
        t["ranks"] = [{**t["ranks"][0], "steps_done": len(steps)}] if t.get("ranks") else [
            {"rank": 0, "exit_code": 0, "steps_done": len(steps)}]
    run = write_run(tmp_path / "run", trials, case_extra={"warmup": 10})
    finish.render(run)
    assert f"- trial 0 (a): **no_steps**: {said}" in (run / "report.md").read_text()


def test_outputs_asked_for_and_not_written_say_where_they_go(tmp_path):
    """capture.outputs on, and no trial wrote any (a newcomer's program wrote them to its working folder): Not
    verified says where perfkit looks."""
    from perfkit.run import finish

    run = write_run(tmp_path / "run", ab_trials())
    finish.render(run)
    assert ("output quality (no comparable outputs: `capture.outputs` is on, but no trial's rank 0 wrote a video, "
            "array or image folder to its outputs folder, `perfkit.record.outputs_dir()`)"
            in json.loads((run / "summary.json").read_text())["not_verified"])


def _three_variants_line(tmp_path, steps: dict[str, float], drift: float) -> tuple[str, dict]:
    """The one line of a rendered run of variants a, b, c (3 rounds, each trial's steps ``steps[v]`` plus ``drift``
    a round) and c's comparison."""
    from perfkit.report.line import summary_line
    from perfkit.run import finish  # the run's rendering, as perfkit run ends

    trials = [trial(3 * r + i, v, [50.0] + [steps[v] + drift * r] * 3) for r in range(3) for i, v in enumerate("abc")]
    run = write_run(tmp_path / "run", trials, case_extra={"variants": {v: {} for v in "abc"}})
    finish.render(run)
    summary = json.loads((run / "summary.json").read_text())
    return summary_line(summary, run / "report.md"), next(o for o in summary["comparisons"] if o["variant"] == "c")


def test_a_third_variant_s_verdict_is_in_the_one_line(tmp_path):
    """A case of three variants: the line leads with B against A and names C's ratio and verdict after it (a
    newcomer's third variant, slower by 2x, was in the Timing table alone)."""
    line, c = _three_variants_line(tmp_path, {"a": 10.0, "b": 10.1, "c": 20.0}, 0.01)
    assert f"c/a {c['ratio']:.3f} [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}] -> slower; " in line
    assert line.index("b/a") < line.index("; also c ") < line.index("c/a")
    assert c["ratio"] == pytest.approx(2.0, abs=0.01)


def test_the_rank_that_failed_first_is_named(tmp_path):
    """Rank 1 crashed and rank 0's gloo peer then failed too (a newcomer's: rank 0's 'Connection closed by peer'
    led the failure, the planted crash second): the rank seen to exit first is named."""
    from perfkit.run import finish

    trials = ab_trials()
    trials[1] = {**trials[1], "status": "crashed", "ranks": [
        {"rank": 0, "exit_code": 1, "running_at_end": False, "exited_s": 2.24, "steps_done": 0, "last_step_ms": None,
         "last_mark": None},
        {"rank": 1, "exit_code": 1, "running_at_end": False, "exited_s": 2.04, "steps_done": 0, "last_step_ms": None,
         "last_mark": None}]}
    run = write_run(tmp_path / "run", trials)
    finish.render(run)
    assert (f"- trial 1 ({trials[1]['variant']}): **crashed**; rank 1 failed first, 0.20 s before any other (the "
            "others' errors may follow from it)") in (run / "report.md").read_text()


def test_a_progression_change_is_that_of_the_figures_shown():
    """A newcomer's: tp `17.21 (+120.0%)` under a row showing 7.82, where 17.21 / 7.82 = 2.2008 (+120.1%): the change
    came from the unrounded medians (17.2108 / 7.8217). A row with nothing above it shows none."""
    from perfkit.report.progression import _step

    assert _step(17.2108, "7.82", None, 2) == "17.21 (+120.1%)"
    assert _step(17.2108, None, "tp", 2) == "tp 17.21"


def test_the_breakdown_says_its_shares_are_rounded_to_add_up_to_100():
    """idle 13.384 of 13.417 ms is 99.75%, shown 99.7% beside 0.3% (0.034 ms: 0.25%) so that they add up to 100%: a
    newcomer read it as a wrong share; the section says how they are rounded."""
    from perfkit.report.markdown import _breakdown

    chip = {"span_ms": 13.417, "compute_ms": 0.0, "ici_ms": 0.0, "dma_ms": 0.034, "idle_ms": 13.383, "chip_steps": 1,
            "trials": 1}
    summary = {"breakdown": {"variants": {"a": chip}, "baseline": "a", "op_deltas": {}}, "variants": {"a": {}}}
    text = "\n".join(_breakdown(summary))
    assert "| a | 1 (1) | 13.417 | 0.000 (0.0%) | 0.000 (0.0%) | 0.034 (0.3%) | 13.383 (99.7%) |" in text
    assert "in parentheses, shares of the span rounded to add up to 100%" in text


def test_progression_pairs_a_variant_with_its_own_last_figure_where_the_baseline_changed(make_run):
    """A case whose variants were reordered between runs (b the baseline of the second): each variant's change is
    against its own figure in the row above, whichever side it stands on. By hand: b's medians 1.2 and 1.5 x a's,
    so b 1.5 / 1.2 = 1.25 (+25.0%), a 1.0; the table's footnote says what the parentheses are."""
    first = make_run("r1", trials=ab_trials(b_scale=1.2))
    second = make_run("r2", trials=ab_trials(b_scale=1.5), case_extra={"variants": {
        "b": {"description": "the new kernel"}, "a": {"description": "the old kernel"}}})
    res = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second), "--json"])
    row = json.loads(res.output)["rows"][1]
    assert (row["a"], row["b"]) == ("b", "a")
    assert (row["a_vs_previous"], row["b_vs_previous"]) == (pytest.approx(1.25), pytest.approx(1.0))
    text = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second)]).output
    assert table_row(text, "`r2`")[1].endswith("(+25.0%)")
    assert "in parentheses, the change of the figure shown" in text


def test_a_quality_row_s_share_over_16_too_small_to_show_reads_below_its_last_digit():
    """The codec floor's 4 of 25,401,600 samples past 16 (max |d| 18) read "0.00%" in the run's Quality table, as
    none; `perfkit quality` says "<0.001%" of them, the table "<0.01%"."""
    from perfkit.report.markdown import _quality_row

    q = {"kind": "video", "identical_frames": 0, "frames": 49, "psnr_db": 51.3, "psnr_pooled_db": 51.2,
         "psnr_min_db": 49.0, "mean_abs_diff": 0.4, "max_abs_diff": 18, "share_over_16": 4 / 25_401_600,
         "bit_identical": False}
    assert _quality_row("b vs a", q).endswith("| 0.400 | 18 | <0.01% | no |")
    assert _quality_row("b vs a", dict(q, share_over_16=0.0)).endswith("| 18 | 0.00% | no |")


def test_a_multi_file_quality_table_s_oracle_rows_name_the_file_they_compare():
    """Beside other files' rows the headline's row names its file; the oracle's rows, which compare that same file
    against the oracle, read "b vs oracle" alone, as if of no file (a newcomer's)."""
    from perfkit.report.markdown import quality_section

    same = {"kind": "frames", "frames": 8, "identical_frames": 8, "psnr_db": "inf", "psnr_pooled_db": "inf",
            "psnr_min_db": "inf", "psnr_y_db": "inf", "psnr_yuv_db": "inf", "mean_abs_diff": 0.0, "max_abs_diff": 0,
            "share_over_16": 0.0, "bit_identical": True}
    quality = {**same, "file": "clip.mkv", "space": "rgb", "files": {"clip.mkv": same, "frames.npy": same},
               "oracle": {"path": "oracle.mkv", "variants": {"a": same, "b": same}}}
    rows = [line.split(" | ")[0] for line in quality_section({"baseline": "a", "variants": ["a", "b"],
                                                               "quality": quality}) if line.startswith("| ")][2:]
    assert rows == ["| `clip.mkv`: b vs a", "| `frames.npy`: b vs a", "| `clip.mkv`: a vs oracle",
                    "| `clip.mkv`: b vs oracle"]


def test_the_cost_section_names_dumps_it_could_not_read():
    """A newcomer's command case whose dumps perfkit refused: summary.json held each variant's error, and report.md
    had no Cost section and no word of why."""
    from perfkit.report.cost import section

    error = "d/module_0002.txt: line 5: all-gather has use_global_device_ids but no replica groups, which XLA refuses"
    lines = section({"baseline": "f32", "cost": {"f32": {"dumps": "d", "error": error},
                                                 "bf16": {"dumps": "e", "error": error}}})
    assert lines[0] == "## Cost"
    assert f"- f32: its XLA dumps were not costed: {error}" in lines
    assert f"- bf16: its XLA dumps were not costed: {error}" in lines


def test_the_one_line_places_an_added_collective_before_the_others_one():
    """A newcomer's hang: rank 3's program adds an all-reduce before the second of the others' three hops. The line
    read 'rank 3's program adds psum_invariant.7 (collective 2 of 3 in step 0)', an index into rank 3's four
    collectives given as one of the others' three; the added one comes before the others' second, which the line
    says now, and one added after all of theirs comes after them."""
    from perfkit.report.line import parted

    never = [{"rank": r, "device": 2048 * r, "how": "not completed", "op": None, "in_step": 1} for r in (0, 2, 3)]
    added = {"op": "psum_invariant.7", "opcode": "all-reduce", "index": 1}
    parting = {"step": 0, "index": 1, "op": "ppermute.10", "kind": "collective-permute", "in_step": 2,
               "extra": False, "majority": [{"rank": 1, "device": 2048}], "parted": never, "majority_program": [0, 2],
               "programs": {"3": {"lacks": [], "adds": [added], "majority_count": 3, "count": 4}}}
    assert parted(parting) == ("rank 3's program adds psum_invariant.7 (before the others' collective 2 of 3 in "
                               "step 0)")
    parting["programs"]["3"]["adds"][0]["index"] = 3
    parting["index"] = 3
    assert parted(parting) == "rank 3's program adds psum_invariant.7 (after the others' 3 collectives in step 0)"


def test_a_variant_that_sat_out_rounds_says_so(tmp_path):
    """b's every trial crashed in the 2 rounds of repeats.min, and a and c went on to round 4 (their verdict
    unknown): the table read b 2 trials, 2 failed, beside 4 and 4, with no word of why b had fewer."""
    from perfkit.run import finish

    steps = [50.0, 10.0, 10.2, 9.9]
    trials = [trial(0, "a", steps), trial(1, "b", [], status="crashed"), trial(2, "c", steps),
              trial(3, "c", steps), trial(4, "b", [], status="crashed"), trial(5, "a", steps),
              trial(6, "a", steps), trial(8, "c", steps), trial(9, "c", steps), trial(11, "a", steps)]
    variants = {v: {"description": v} for v in "abc"}
    run = write_run(tmp_path / "run", trials, case_extra={"repeats": {"min": 2, "max": 4}, "variants": variants})
    finish.render(run)
    report = (run / "report.md").read_text()
    assert table_row(report, "failed trials") == ["0", "2", "0"]
    assert ("b ran 2 trials of the run's 4 rounds: none of its trials ran (each crashed or hung), so it sat out the "
            "rounds past `repeats.min` (rounds 3-4) that the other variants' unknown verdicts went on with.") in report
    finish.render(write_run(tmp_path / "ab", ab_trials()))
    assert "sat out" not in (tmp_path / "ab" / "report.md").read_text()


NO_JAX = "ModuleNotFoundError: No module named 'jax'"


def crashed(index: int, variant: str, round_: int) -> dict:
    """A trial whose one rank crashed on a missing jax (its traceback's last line, ``NO_JAX``)."""
    tail = f'Traceback (most recent call last):\n  File "bench.py", line 3, in <module>\n    import jax\n{NO_JAX}\n'
    return trial(index, variant, [], status="crashed", ranks=[
        {"rank": 0, "exit_code": 1, "running_at_end": False, "exited_s": 0.4, "steps_done": 0, "last_step_ms": None,
         "last_mark": None, "stderr_tail": tail}]) | {"round": round_}


def test_a_variant_whose_first_two_trials_crashed_alike_says_so_where_it_read_sat_out(tmp_path):
    """b's first two trials crashed with one error, so it ran no trial after round 2 (within repeats.min, 5): the
    report said nothing of it with two variants (the run ended there, 2 of 5 rounds), and with three read that b "sat
    out the rounds past `repeats.min`", which it did not. It says why b stopped, and where the run ended with it; the
    summary holds both, so ``perfkit report`` on the run writes the same again."""
    from perfkit.run import finish

    steps = [50.0, 10.0, 10.2, 9.9]
    two = [trial(0, "a", steps), crashed(1, "b", 0), crashed(2, "b", 1), trial(3, "a", steps)]
    run = write_run(tmp_path / "two", two, case_extra={"repeats": {"min": 5, "max": 5}})
    finish.render(run)
    report = (run / "report.md").read_text()
    said = (f"b ran no trial after round 2: its first two trials crashed alike (`{NO_JAX}`); nothing was left to "
            "compare, so the run ended there.")
    assert said in report and "sat out" not in report, report
    summary = json.loads((run / "summary.json").read_text())
    assert summary["variants"]["b"]["crashed_alike"] == {"round": 2, "error": NO_JAX}
    assert summary["variants"]["a"]["crashed_alike"] is None
    assert summary["trials"]["ended_after_round"] == 2 and not summary["interrupted"]
    (run / "report.md").unlink()
    assert CliRunner().invoke(cli, ["report", str(run)]).exit_code == 3
    assert said in (run / "report.md").read_text()

    # three variants: a and c go on to round 4 without b, whose stop is no sat-out and ends nothing
    variants = {v: {"description": v} for v in "abc"}
    three = [trial(0, "a", steps) | {"round": 0}, crashed(1, "b", 0), trial(2, "c", steps) | {"round": 0},
             trial(3, "c", steps) | {"round": 1}, crashed(4, "b", 1), trial(5, "a", steps) | {"round": 1},
             *(trial(i, v, steps) | {"round": i // 3} for i, v in ((6, "a"), (8, "c"), (9, "c"), (11, "a")))]
    run = write_run(tmp_path / "three", three, case_extra={"repeats": {"min": 2, "max": 4}, "variants": variants})
    finish.render(run)
    report = (run / "report.md").read_text()
    assert f"b ran no trial after round 2: its first two trials crashed alike (`{NO_JAX}`).\n" in report, report
    assert "sat out" not in report and "the run ended there" not in report
    assert json.loads((run / "summary.json").read_text())["trials"]["ended_after_round"] is None


def test_one_process_reads_alike_in_a_model_case_and_a_command_case(tmp_path):
    """One process of 4 devices read "consistent: yes / single SPMD program" in a model case and "not checked: one
    process" in a command case: one process is one rank either way, said in the same words."""
    from types import SimpleNamespace

    from perfkit.analysis.summary import rank_summary

    trials = [{"variant": "a", "status": "ok"}, {"variant": "b", "status": "crashed"}]
    said = {kind: rank_summary(SimpleNamespace(kind=kind, processes=1, devices=4, variants=[
        SimpleNamespace(name="a"), SimpleNamespace(name="b")]), tmp_path, trials) for kind in ("model", "command")}
    assert said["model"] == said["command"] == {
        "a": {"consistent": True, "groups": [[0]], "checked": "one process: no other rank to compile another program"},
        "b": {"consistent": None, "groups": [], "checked": "not checked: no trial of this variant finished"}}


def test_the_method_line_names_the_bootstraps_resamples_and_seed(make_run):
    """A newcomer's own bootstrap of 5 + 6 trials converged to [0.392, 8.112] where the report said [0.400, 8.233]:
    it did not say how many resamples (20,000: a CI endpoint moves by its Monte Carlo error from one seed to the
    next) nor the seed. The report's method line and summary.json now say both (the case's seed, 7 here), and
    stats.compare with them, on the trials' steps, gives the summary's CI again: with the looks the case's rounds
    read the verdict at (3 to 6 trials a side), which the line names."""
    from perfkit.analysis import stats, timing
    from perfkit.rundata.rundir import read_trials

    run = make_run(case_extra={"seed": 7, "repeats": {"min": 3, "max": 6}})
    s = json.loads((run / "summary.json").read_text())
    assert (s["comparison"]["n_boot"], s["comparison"]["seed"]) == (20_000, 7)
    assert (s["comparison"]["looks_at"], s["comparison"]["confidence"]) == ([3, 6], 0.95)
    report = (run / "report.md").read_text()
    assert ("a hierarchical bootstrap (trials resampled, then steps within each; its percentile interval over 20,000 "
            "resamples drawn by numpy's default_rng(7), the case's seed: `perfkit.analysis.stats.compare(a, b, "
            "rounds=(3, 6), seed=7)` gives it again; it also takes in Welch's t interval") in " ".join(report.split())
    steps = timing.steps_frame(read_trials(run))
    again = stats.compare(timing.per_trial(steps, "a", "step_ms"), timing.per_trial(steps, "b", "step_ms"),
                          rounds=(3, 6), seed=7)
    assert list(again.ci) == s["comparison"]["ci"]


def test_the_too_few_traced_steps_line_asks_for_rounds_the_case_accepts():
    """The demo's report said `more rounds (--set repeats.min=6) give it more` under its attribution; its case's
    repeats.max is 5, and `perfkit run RUN/case.yaml --set repeats.min=6` was refused (need min <= max, exit 2).
    The `--set`s the line gives load on the demo's case, and ask for 6 rounds."""
    from perfkit.report.markdown import _traced_against_timed

    total = {"a_ms": 16.124, "b_ms": 28.500, "ci_lo_ms": -18.4454, "ci_hi_ms": 43.1984, "marked": False}
    summary = {"comparisons": [{"variant": "sp", "metric": "step_ms", "ratio": 1.768, "verdict": "slower"}],
               "attribution": {"variants": {"sp": {"total": total, "trials": [3, 3], "chip_steps": [12, 12]}}}}
    line = _traced_against_timed(summary)[1]
    sets = re.findall(r"--set (\S+?)[`\s]", line)
    assert sets, line
    case = case_mod.load("cases/quickstart.yaml", sets)
    assert case.repeats == {"min": 6, "max": 6}


def test_a_third_variant_s_ratio_in_the_one_line_divides_from_its_step_time_shown(tmp_path):
    """A newcomer's kernel case (ulysses, ring, xla) read '; also xla/ulysses 4.535 -> slower': xla's step time
    and the ratio's CI were in the report alone. The line gives C's median of trial medians and the CI beside
    its ratio, every step time with the decimals that divide to each ratio shown: 117.00 / 25.86 would read 4.524
    where C / A is 4.525, so all three take a third decimal (117.000 / 25.858)."""
    # + 0.001 a round: medians of trial medians 25.858, ...
    line, c = _three_variants_line(tmp_path, {"a": 25.857, "b": 27.037, "c": 116.999}, 0.001)
    assert f"{c['ratio']:.3f}" == "4.525" and f"{117.000 / 25.858:.3f}" == "4.525" != f"{117.00 / 25.86:.3f}"
    assert ": a 25.858 ms, b 27.038 ms (medians of trial medians), b/a 1.046 " in line, line
    assert f"; also c 117.000 ms, c/a 4.525 [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}] -> slower; " in line, line


def test_the_cost_sentence_says_it_compares_first_ranks_programs_where_rank_1_compiled_another():
    """The Cost section's B "runs collectives of the same kinds, sizes and group sizes" was rank 0's program against
    rank 0's, said as the variants', while B's rank 1 compiled another program: the sentence now says whose, where
    Rank consistency did not find every rank's program one (and stays as it was where it did)."""
    from perfkit.report.cost import section

    step = {"module": "jit_step", "flops": 1e6, "dot_flops": 1e6, "hbm_bytes": 1e6, "interconnect_bytes": 65536,
            "temp_bytes": 1 << 15, "peak_bytes": 1 << 16, "collectives": {"all-reduce": {"count": 2}},
            "collective_shapes": [{"kind": "all-reduce", "buffer_bytes": 4096, "count": 2, "group": 2}]}
    same = "b runs collectives of the same kinds, sizes and group sizes (against a"
    summary = {"baseline": "a", "cost": {"a": {"step": step}, "b": {"step": step}},
               "ranks": {"a": {"consistent": True}, "b": {"consistent": False, "divergent_ranks": [1]}}}
    assert f"{same}; their first ranks' programs: b's rank 1 compiled another); FLOPs unchanged; HBM bytes " \
           "unchanged; bytes sent a device unchanged." in section(summary)
    summary["ranks"] = {"a": {"consistent": None}, "b": {"consistent": False, "groups": [[0], [1]]}}
    assert any(line.startswith(f"{same}; their first ranks' programs: a's other ranks not compared and b's ranks "
                               "compiled different programs);") for line in section(summary))
    summary["ranks"] = {"a": {"consistent": True}, "b": {"consistent": True}}
    assert any(line.startswith(f"{same});") for line in section(summary))


def test_a_rank_that_left_its_program_waits_for_ranks_hung_inside_theirs():
    """The bundled repro (rank 3 skips a hop): rank 3 ran its 8 steps, returned from its program and waits in
    jax.distributed's shutdown for ranks 0-2, hung inside their step 5. The report said rank 3's shutdown or a short
    timeout was the cause and that rank 3 waited "at ppermute.6, its program's next collective", which it had left."""
    from perfkit.report.markdown import _failures

    lib = "/v/lib/python3.12/site-packages/jax/_src/distributed.py"
    shutdown = f'Thread 0x1 (most recent call first):\n  File "{lib}", line 199 in shutdown\n'
    in_step = 'Thread 0x1 (most recent call first):\n  File "skipped_collective.py", line 93 in <module>\n'
    ranks = [{"rank": r, "exit_code": -9, "running_at_end": True, "steps_done": 5, "last_mark": None,
              "stacks": in_step} for r in range(3)]
    ranks.append({"rank": 3, "exit_code": -9, "running_at_end": True, "steps_done": 8, "last_mark": None,
                  "stacks": shutdown})
    chips = [{"rank": r, "device": 2048 * r, "completed": n, "last_op": last, "waiting_at": at,
              "waiting_from": "program"}
             for r, n, last, at in [(0, 16, "ppermute.9", "ppermute.10"), (1, 17, "ppermute.10", "ppermute.11"),
                                    (2, 16, "ppermute.9", "ppermute.10"), (3, 12, "ppermute.7", "ppermute.6")]]
    summary = {"trials": {"failed": [{"index": 1, "variant": "skip", "status": "hung", "dir": "trials/01-skip",
                                      "ranks": ranks}]},
               "hangs": {"trials/01-skip": {"chips": chips, "parting": None, "text": "..."}}}
    lines = _failures(summary)
    assert ("  - rank 3 had finished its program (no thread in a module's top level) after 8 steps and waits in its "
            "shutdown (jax.distributed's shutdown waits for every rank) for ranks 0-2, which hung inside their "
            "program after 5 steps (a thread in a module's top level): neither the shutdown nor a timeout too short "
            "for it is the cause; the cause is why those ranks stopped, where the chips' collectives part (below) "
            "where traces say") in lines
    assert not any("on the way out" in line for line in lines)
    assert lines[-4:] == [
        "    - rank 0 device 0: 16 completed, the last `ppermute.9`; waiting at `ppermute.10`, its program's next "
        "collective",
        "    - rank 1 device 2048: 17 completed, the last `ppermute.10`; waiting at `ppermute.11`, its program's next "
        "collective",
        "    - rank 2 device 4096: 16 completed, the last `ppermute.9`; waiting at `ppermute.10`, its program's next "
        "collective",
        "    - rank 3 device 6144: 12 completed, the last `ppermute.7`; waiting at none: its program had returned, "
        "past these"]
    # two ranks that left theirs (one exited 0, whose program returned too) and one rank hung inside its own
    ranks[1] = dict(ranks[1], exit_code=0, running_at_end=False, stacks=None, steps_done=8)
    ranks[2] = dict(ranks[2], stacks=shutdown, steps_done=8)
    lines = _failures(summary)
    assert ("  - ranks 2, 3 had finished their program (no thread in a module's top level) after 8 steps and wait in "
            "their shutdown (jax.distributed's shutdown waits for every rank) for rank 0, which hung inside its "
            "program after 5 steps (a thread in a module's top level): neither the shutdown nor a timeout too short "
            "for it is the cause; the cause is why those ranks stopped, where the chips' collectives part (below) "
            "where traces say") in lines
    assert [line.split("; ")[-1] for line in lines[-4:]] == [
        "waiting at `ppermute.10`, its program's next collective"] + ["waiting at none: its program had returned, "
                                                                      "past these"] * 3
    # no rank left inside its program (rank 0's stack not dumped): the shutdown or the timeout is the cause, as before
    ranks[0] = dict(ranks[0], stacks=None)
    assert any(line.startswith("  - ranks 2, 3 had returned from their program") and line.endswith(
        "the program's shutdown, or a timeout too short for it, is the cause, not a step")
               for line in _failures(summary))
