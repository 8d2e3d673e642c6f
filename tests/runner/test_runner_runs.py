"""``perfkit run`` end to end on tiny command cases: the run-directory contract, verdicts, adaptive
rounds, matrix rows, hung and crashed ranks, Ctrl-C and --resume, 2 hosts x 2 ranks."""

import json
import math
import signal
import subprocess
import sys
import time

import jsonschema
import numpy as np
import pandas as pd
import pytest
from scipy.optimize import brentq
from scipy.stats import multivariate_normal, norm, ttest_ind
from runner_testing import PROGRAMS, REPO, free_ports, perfkit, processes_with, read_jsonl, sleeper_case

from perfkit.rundata import schema


def test_command_case_writes_the_run_directory_contract(tmp_path, write_case):
    # Both sides report 5.0 ms a step (and sleep it): the figures below are exact, not windows.
    case = sleeper_case(steps=6, sleep_ms=5, variants={"a": {"env": {"FRAME_SEED": "0", "REPORT_MS": "5.0"}},
                                                       "b": {"env": {"FRAME_SEED": "0", "REPORT_MS": "5.0"}}})
    case["command"].append("--frames")
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    run = tmp_path / "run"
    for name in ("case.yaml", "env.json", "run.json", "trials.jsonl", "summary.json", "report.md"):
        assert (run / name).exists(), name
    trials = read_jsonl(run / "trials.jsonl")
    assert [t["variant"] for t in trials] == ["a", "b", "b", "a"]  # abba interleaving
    assert [t["index"] for t in trials] == [0, 1, 2, 3] and [t["round"] for t in trials] == [0, 0, 1, 1]
    assert all(len(t["steps_ms"]) == 6 and t["status"] == "ok" for t in trials)
    assert (run / "trials/00-a/rank0/metrics.jsonl").exists()
    assert not list(run.glob("trials/*/rank0/stacks*.txt"))  # nothing hung: no empty dump files left

    s = json.loads((run / "summary.json").read_text())
    assert s["case"] == "sleepers"
    for v in ("a", "b"):
        step = s["variants"][v]["step_ms"]
        assert set(step) >= {"median", "p25", "p75", "n"} and step["n"] == 10  # 2 trials x (6 - 1 warmup)
        assert step["median"] == step["p25"] == step["p75"] == 5.0
    c = s["comparison"]
    assert set(c) >= {"metric", "ratio", "ci", "p_value", "verdict"} and c["metric"] == "step_ms"
    assert (c["ratio"], c["ci"], c["verdict"]) == (1.0, [1.0, 1.0], "same")
    assert s["quality"]["bit_identical"] is True
    env = json.loads((run / "env.json").read_text())
    assert {"python", "packages", "source", "host", "flags"} <= set(env)
    assert set(env["packages"]) >= {"jax", "jaxlib", "torch", "torch_tpu", "libtpu"}
    assert env["source"]["git"] and len(env["source"]["tree"]) == 12
    assert "sleepers: a " in res.stdout and "report" in res.stdout
    assert "[4/4] a" in res.stderr  # the progress line


def test_own_program_outside_a_checkout_claims_no_commit_and_no_program(tmp_path, write_case):
    """A newcomer's own pure-Python bench in a folder that is not a git repository: the report gave perfkit's own
    commit as its source, a Reproduce step `git checkout` that fails there, and rank consistency as a 'single
    SPMD program' though the program compiled none (one process: one rank, said without naming a program)."""
    mine = tmp_path / "mine"
    mine.mkdir()
    case = write_case(sleeper_case(steps=3, sleep_ms=1, repeats={"min": 1, "max": 1}))
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", case, "--out", tmp_path / "run"], cwd=mine,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    run = tmp_path / "run"
    assert json.loads((run / "env.json").read_text())["source"] == {"git": False}
    summary = json.loads((run / "summary.json").read_text())
    assert {(r["consistent"], r["checked"]) for r in summary["ranks"].values()} == {
        (True, "one process: no other rank to compile another program")}
    report = (run / "report.md").read_text()
    assert "- source: not a git checkout" in report and "\ngit checkout" not in report
    assert f"```sh\ncd {mine}\nperfkit run " in report


def test_clearly_slower_b_is_slower_and_aa_is_never_faster_or_slower(tmp_path, write_case):
    """B sleeps (measured) three times longer per step than A, against a 10% minimum effect: slower on a
    loaded 2-core machine too. A and its A/A control report 10.0 ms in even trials and 10.4 ms in odd
    ones, so the noise floor is hand-computed: trial medians {10.0, 10.4} a side, bootstrap medians
    10.0 / 10.2 / 10.4 at 1/4, 1/2, 1/4, the ratio's extremes 10/10.4 and 10.4/10 each at 1/16 (over
    the 2.5% tails): (0.9615, 1.04); the CI takes in Welch's interval of their log medians (scipy's below) at the
    level of the verdict's two looks (2 and 3 trials a side): Pocock's c with P(|Z2| < c, |Z3| < c) = 0.95, their
    correlation sqrt(2/3) (scipy's bivariate normal), c = 2.1467, a level of 0.9682 a look (perfkit's own walks
    give it within their Monte Carlo error): exp(+-t(0.9841, 2) * log(1.04) / sqrt(2)) = (0.8592, 1.1639), unknown
    against the 10% effect (0.8875, 1.1267 at 95%)."""
    case = sleeper_case(steps=7, sleep_ms=10, min_effect=0.1, repeats={"min": 2, "max": 3},
                        variants={"a": {"env": {"REPORT_MS": "10.0", "REPORT_ODD_MS": "10.4"}},
                                  "b": {"env": {"SLEEP_MS": "30"}}})
    res = perfkit("run", write_case(case), "--aa", "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    s = json.loads((tmp_path / "run/summary.json").read_text())
    assert s["comparison"]["verdict"] == "slower" and 2.0 < s["comparison"]["ratio"] < 4.0
    rows = {(c["variant"], c["metric"]): c for c in s["comparisons"]}
    assert rows[("a-aa", "step_ms")]["verdict"] in ("same", "unknown")
    nf = s["noise_floor"]
    rho = math.sqrt(2 / 3)
    both = multivariate_normal(mean=[0, 0], cov=[[1, rho], [rho, 1]])
    c = brentq(lambda c: both.cdf([c, c], lower_limit=[-c, -c]) - 0.95, 1.96, 3.0)
    welch = ttest_ind(np.log([10.0, 10.4]), np.log([10.0, 10.4]), equal_var=False).confidence_interval(
        1 - 2 * norm.sf(c))
    assert (nf["variant"], nf["verdict"]) == ("a-aa", "unknown")
    assert abs(nf["ci"][0] - math.exp(welch.low)) < 1e-3 and abs(nf["ci"][1] - math.exp(welch.high)) < 1e-3
    assert abs(nf["half_width"] - (math.exp(welch.high) - 1)) < 1e-3 and abs(nf["ci"][0] - 0.8592) < 1e-3
    trials = read_jsonl(tmp_path / "run/trials.jsonl")
    assert [t["variant"] for t in trials[:6]] == ["a", "b", "a-aa", "a-aa", "b", "a"]
    report = (tmp_path / "run/report.md").read_text()
    assert "A/A noise floor (a-aa" in report and "A/A noise floor" in res.stdout


def test_adaptive_rounds_and_matrix_rows(tmp_path, write_case):
    """Reported (not measured) step times make the statistics deterministic. Combination 0: B is 2x A,
    decided after repeats.min rounds. Combination 1: B alternates 5.0 / 5.3 ms between trials against
    A's 5.0, a CI straddling the 2% line: unknown, so rounds go on to repeats.max (3)."""
    case = sleeper_case(steps=4, sleep_ms=0, repeats={"min": 2, "max": 3},
                        variants={"a": {"env": {"REPORT_MS": "5.0"}}, "b": {}},
                        matrix={"variants.b.env": [{"REPORT_MS": "10.0"}, {"REPORT_MS": "5.0", "REPORT_ODD_MS": "5.3"}]})
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    cells = [tmp_path / "run/cells/00", tmp_path / "run/cells/01"]
    # each progress line names its combination, shortened (they all read "[1/4] a ..." alike)
    assert "\ncells/01 variants.b.env={'REPORT_MS': '5.0', 'RE… [1/4, up to 6] a " in res.stderr
    decided_summary = json.loads((cells[0] / "summary.json").read_text())
    decided = decided_summary["comparison"]
    assert decided["verdict"] == "slower" and decided["ratio"] == decided["ci"][0] == decided["ci"][1] == 2.0
    assert len(read_jsonl(cells[0] / "trials.jsonl")) == 4  # 2 rounds x 2 variants
    undecided = json.loads((cells[1] / "summary.json").read_text())["comparison"]
    assert undecided["verdict"] == "unknown" and undecided["ci"][0] < 1.02 < undecided["ci"][1]
    assert len(read_jsonl(cells[1] / "trials.jsonl")) == 6  # went on to 3 rounds
    frame = pd.read_csv(tmp_path / "run/matrix.csv")
    assert list(frame.cell) == [0, 1] and list(frame.verdict) == ["slower", "unknown"]
    assert frame.a_ms.tolist() == [5.0, 5.0] and frame.b_ms.tolist() == [10.0, 5.3]  # B: 5.3, 5.0, 5.3
    top = json.loads((tmp_path / "run/summary.json").read_text())
    assert top["kind"] == "matrix" and top["missing"] == 0 and top["combinations"] == 2
    assert [(row["cell"], row["values"], row["step_ms"], row["verdict"]) for row in top["matrix"]] == [
        ("00", {"variants.b.env": {"REPORT_MS": "10.0"}}, {"a": 5.0, "b": 10.0}, "slower"),
        ("01", {"variants.b.env": {"REPORT_MS": "5.0", "REPORT_ODD_MS": "5.3"}}, {"a": 5.0, "b": 5.3}, "unknown")]
    # the one shipped schema holds the matrix's summary as it holds a run's (README: a CI script validates it)
    shipped = jsonschema.Draft202012Validator(schema.shipped())
    assert not list(shipped.iter_errors(top)) and not list(shipped.iter_errors(decided_summary))
    assert list(shipped.iter_errors({**top, "combinations": "2"}))


def test_hung_and_crashed_ranks_are_reported_and_the_run_goes_on(tmp_path, write_case):
    tag = f"orphan-{tmp_path.name}"
    case = sleeper_case(steps=5, sleep_ms=20, processes=2, timeout=3, repeats={"min": 1, "max": 1}, variants={
        "ok": {},
        "hang": {"env": {"HANG_AT": "2", "FAULT_RANKS": "1", "SPAWN_CHILD": tag}},
        "crash": {"env": {"CRASH_AT": "1", "FAULT_RANKS": "0"}}})
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 3, res.stderr
    ok, hung, crashed = read_jsonl(tmp_path / "run/trials.jsonl")
    assert ok["status"] == "ok" and len(ok["steps_ms"]) == 5  # kept, and the run went on past the hang
    assert hung["status"] == "hung" and 3 <= hung["wall_s"] < 3 + 4  # killed soon after the timeout
    r0, r1 = hung["ranks"]
    assert not r0["running_at_end"] and r0["exit_code"] == 0
    assert r1["running_at_end"] and (r1["steps_done"], r1["last_mark"]) == (2, "waiting")
    assert "in wait_for_peer" in r1["stacks"] and "in background_poll" in r1["stacks"]  # every thread
    assert "[child process" in r1["stacks"]  # the rank's child dumped too
    assert (tmp_path / "run/trials/01-hang/rank1/stacks.txt").read_text().count("most recent call first") == 2
    assert processes_with(tag) == []  # the rank's child did not outlive the trial
    assert crashed["status"] == "crashed"
    c0 = crashed["ranks"][0]
    assert c0["exit_code"] == 7 and "failing on purpose at step 1" in c0["stderr_tail"]
    report = (tmp_path / "run/report.md").read_text()
    assert "trial 1 (hang): **hung**" in report and "wait_for_peer (sleeper.py:" in report
    assert "trial 2 (crash): **crashed**" in report and "exit code 7" in report
    s = json.loads((tmp_path / "run/summary.json").read_text())
    assert [f["status"] for f in s["trials"]["failed"]] == ["hung", "crashed"]
    # B (hang) has no good trial: its one trial hung, so the line names the timeout
    assert ("no timed steps for hang -> unknown (1 of hang's 1 trial hung at the 3 s timeout: where their ranks were "
            "slow, not stuck, --set timeout=6); 2 trial(s) failed") in res.stdout


def test_one_variant_run_gives_its_figure_and_says_why_no_ratio(tmp_path, write_case):
    """`--only b`: the line read "no timed steps for a -> unknown", b's figure nowhere."""
    case = sleeper_case(steps=3, sleep_ms=5, repeats={"min": 1, "max": 1},
                        variants={"a": {}, "b": {"env": {"REPORT_MS": "5.0"}}})
    res = perfkit("run", write_case(case), "--only", "b", "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("sleepers: b 5.000 ms (median of trial medians); no ratio: only b ran; report ")


def test_ctrl_c_keeps_finished_trials_writes_a_partial_report_and_resume_finishes(tmp_path, write_case):
    """Ctrl-C while trial 1's rank hangs holding a child process: trial 0 is kept, the rank and its
    child are ended (each carries the test's tag in its argv), and --resume runs the rest (without the
    hang, released by a file), from another folder than the run's start (its trials crashed there, their
    metrics file named relative to the wrong folder)."""
    tag, release = f"ctrlc-{tmp_path.name}", tmp_path / "release"
    case = sleeper_case(steps=6, sleep_ms=5, repeats={"min": 2, "max": 2},
                        variants={"a": {}, "b": {"env": {"SPAWN_CHILD": tag, "HANG_AT": "2",
                                                         "HANG_UNLESS": str(release)}}})
    case["command"].append(tag)
    path, run = write_case(case), tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "run", str(path), "--out", str(run)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not processes_with(f"time.sleep(600)\0{tag}"):
        time.sleep(0.05)
    assert len(processes_with(tag)) == 2  # trial 1's hung rank and its child, both running
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    kept = read_jsonl(run / "trials.jsonl")
    assert [t["index"] for t in kept] == [0] and kept[0]["status"] == "ok"
    s = json.loads((run / "summary.json").read_text())
    assert s["interrupted"] is True and s["trials"]["total"] == len(kept)
    assert f"> Interrupted: this report covers the trials finished before the stop; `perfkit run --resume {run}` " \
           "runs the rest of its plan." in (run / "report.md").read_text()
    assert err.endswith(f"perfkit: stopped; `perfkit run --resume {run}` runs the rest\n"), err
    assert processes_with(tag) == []

    release.touch()
    res = perfkit("run", "--resume", run.name, cwd=run.parent)  # from elsewhere than the run's start, relative
    assert res.returncode == 0, res.stderr
    trials = read_jsonl(run / "trials.jsonl")
    assert [t["index"] for t in trials] == [0, 1, 2, 3] and [t["variant"] for t in trials] == list("abba")
    assert trials[:len(kept)] == kept  # finished trials kept as they were
    assert json.loads((run / "summary.json").read_text())["interrupted"] is False
    again = perfkit("run", "--resume", run)  # a finished run: it says so, where it had printed its line alone
    assert again.returncode == 0 and read_jsonl(run / "trials.jsonl") == trials
    assert again.stderr == f"every trial of {run}'s plan (4) had finished: none ran; its summary.json and report.md " \
                           "are written again\n"
    assert perfkit("run", write_case(case), "--out", run).returncode == 2  # no silent overwrite


def test_two_hosts_of_two_ranks_share_one_run_directory(tmp_path, write_case):
    """Each host runs its two ranks; all four meet at rank 0 over the launcher variables."""
    case = {"name": "hosts", "command": ["python", str(PROGRAMS / "rendezvous.py"), "4", "5"], "processes": 4,
            "warmup": 1, "repeats": {"min": 1, "max": 3}, "timeout": 60, "variants": {"a": {}, "b": {}}}
    path, run = write_case(case), tmp_path / "run"
    port = free_ports(4)  # trial k meets at port + k: the first 2 rounds' worth, all free now
    hosts = [subprocess.Popen([sys.executable, "-m", "perfkit.cli", "run", str(path), "--out", str(run), "--salt",
                               "--hosts", "2", "--host-index", str(i), "--coordinator", f"127.0.0.1:{port}"],
                              cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (0, 1)]
    outputs = [h.communicate(timeout=120) for h in hosts]
    assert [h.returncode for h in hosts] == [0, 0], outputs
    # the host that finishes last writes the report and prints its line; the other (its stdout empty before) says
    # where its trials went and where the report will be (of two that mark their parts done at once, one claims it)
    others = [i for i, (out, _) in enumerate(outputs) if not out.startswith("hosts: a ")]
    assert len(others) == 1, outputs
    for i in others:
        assert outputs[i][0] == (f"host {i}: its trials are in {run}/hosts/host{i}; the host that finishes last "
                                 f"writes the report, {run}/report.md\n")
    trials = read_jsonl(run / "trials.jsonl")
    assert [t["variant"] for t in trials] == ["a", "b"]  # repeats.min rounds: no adaptive rounds across hosts
    salts = []
    for t in trials:
        assert t["status"] == "ok" and [r["rank"] for r in t["ranks"]] == [0, 1, 2, 3]
        met = json.loads((run / t["dir"] / "rank0/outputs/ranks.json").read_text())
        assert [(m["rank"], m["local_rank"], m["perfkit_rank"]) for m in met] == [(0, 0, 0), (1, 1, 1), (2, 0, 2), (3, 1, 3)]
        assert len({m["salt"] for m in met}) == 1  # one program on every rank
        salts.append(met[0]["salt"])
    assert len(set(salts)) == 2  # a fresh salt per trial
    assert len(read_jsonl(run / "hosts/host1/trials.jsonl")) == 2
    assert json.loads((run / "summary.json").read_text())["variants"]["b"]["step_ms"]["n"] == 3
    # a newcomer's: the Environment named host 0 alone, never that the run had two
    assert "\n- hosts: 2; the lines here are host 0's, each host's own in `hosts/host<I>/env.json`\n" in \
        (run / "report.md").read_text()
    (run / "summary.json").unlink()
    res = perfkit("report", run)  # the merge step, by hand
    assert res.returncode == 0, res.stderr
    assert json.loads((run / "summary.json").read_text())["trials"]["total"] == 2


def test_a_host_that_never_started_leaves_its_trials_incomplete(tmp_path, write_case):
    """A newcomer's: host 1 of 2 never started (nothing in hosts/host1) and `perfkit report` merged host 0's part as
    the whole run: every trial ok with rank 0 alone of the case's 2, no failed trial, exit 0. The run's host count
    is its parts' run.json's, and the missing host is named."""
    path, run = write_case(sleeper_case(steps=3, sleep_ms=1, processes=2)), tmp_path / "run"
    res = perfkit("run", path, "--out", run, "--hosts", "2", "--host-index", "0", "--coordinator", "127.0.0.1:1")
    assert res.returncode == 0 and res.stdout.startswith("host 0: its trials are in"), res.stderr
    res = perfkit("report", run)
    assert res.returncode == 3, res.stdout
    assert res.stderr == (f"perfkit: {run / 'hosts'}: no part of host 1 of 2 (it never started, or wrote "
                          "elsewhere): the trials lack its ranks and read as incomplete\n")
    trials = read_jsonl(run / "trials.jsonl")
    assert [(t["status"], [r["rank"] for r in t["ranks"]]) for t in trials] == [("incomplete", [0])] * 4
    summary = json.loads((run / "summary.json").read_text())
    assert summary["interrupted"] and len(summary["trials"]["failed"]) == 4
    # its reason had been on stderr alone: report.md's Failed trials listed each trial as incomplete, no word why
    assert [t["missing_hosts"] for t in trials] == [[1]] * 4
    failed = [line for line in (run / "report.md").read_text().splitlines() if line.startswith("- trial ")]
    assert failed == [f"- trial {t['index']} ({t['variant']}): **incomplete**: host 1 recorded no part of it (never "
                      "started, stopped before it, or wrote elsewhere), so it lacks its ranks" for t in trials]


def test_salt_makes_every_trial_compile_fresh(tmp_path, write_case):
    """Both variants run the same jax program with a persistent compilation cache: without --salt the
    second trial loads the first one's executable, with --salt neither trial hits the cache."""
    cache = {"JAX_COMPILATION_CACHE_DIR": str(tmp_path / "cache"), "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
             "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}
    case = {"name": "cache", "command": ["python", str(PROGRAMS / "jax_steps.py"), "3"], "warmup": 1,
            "repeats": {"min": 1, "max": 1}, "variants": {"a": {"env": cache}, "b": {"env": cache}}}
    hits = {}
    for flags in ([], ["--salt"]):
        run = tmp_path / f"run{len(flags)}"
        res = perfkit("run", write_case(case), "--out", run, *flags)
        assert res.returncode == 0, res.stderr
        hits[bool(flags)] = [t["values"]["compile_cache_hits"] for t in read_jsonl(run / "trials.jsonl")]
    assert hits[False][0] == 0 and hits[False][1] >= 1
    assert hits[True] == [0, 0]


def test_a_variant_whose_every_trial_crashed_gets_no_more_rounds(tmp_path, write_case):
    """A newcomer's B crashed in every trial, and the plan grew round by round to repeats.max (16 trials; with a hang
    each a timeout long), though no round could give it a timed step. Two rounds (repeats.min), four trials."""
    case = sleeper_case(steps=3, sleep_ms=0, repeats={"min": 2, "max": 8},
                        variants={"a": {"env": {"REPORT_MS": "5.0"}}, "b": {"env": {"CRASH_AT": "1"}}})
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 3, res.stderr
    trials = read_jsonl(tmp_path / "run/trials.jsonl")
    assert [(t["variant"], t["status"]) for t in trials] == [("a", "ok"), ("b", "crashed"), ("b", "crashed"),
                                                             ("a", "ok")]


def test_a_variant_whose_first_two_trials_crashed_alike_ends_the_run_within_its_minimum_rounds(tmp_path, write_case):
    """B crashed with one error in every trial, and the run still ran its repeats.min rounds (5 here: 10 trials, 5 of
    them B's crashes), though no trial of A could be compared with anything. It ends with the round of B's second
    crash (abba: a b, b a), saying why; the trials that finished are kept, and the run reads as finished, not stopped,
    to perfkit report and --resume alike."""
    case = sleeper_case(steps=3, sleep_ms=0, repeats={"min": 5, "max": 5},
                        variants={"a": {"env": {"REPORT_MS": "5.0"}}, "b": {"env": {"CRASH_AT": "1"}}})
    run = tmp_path / "run"
    res = perfkit("run", write_case(case), "--out", run)
    assert res.returncode == 3, res.stderr
    assert [(t["index"], t["variant"], t["status"]) for t in read_jsonl(run / "trials.jsonl")] == [
        (0, "a", "ok"), (1, "b", "crashed"), (2, "b", "crashed"), (3, "a", "ok")]
    assert ("b: its first two trials crashed alike (sleeper: rank 0 failing on purpose at step 1): it runs no trial "
            "after round 2; none is left to compare, so the run ends with that round (its finished trials kept)\n"
            "[4/4] a ") in res.stderr, res.stderr
    assert not json.loads((run / "summary.json").read_text())["interrupted"]
    said = ("b ran no trial after round 2: its first two trials crashed alike (`sleeper: rank 0 failing on purpose at "
            "step 1`); nothing was left to compare, so the run ended there.")
    assert said in (run / "report.md").read_text()
    assert perfkit("report", run).returncode == 3 and not json.loads((run / "summary.json").read_text())["interrupted"]
    assert said in (run / "report.md").read_text()
    resumed = perfkit("run", "--resume", run)
    assert f"every trial of {run}'s plan (4) had finished: none ran" in resumed.stderr, resumed.stderr
    assert len(read_jsonl(run / "trials.jsonl")) == 4


def test_a_variant_whose_every_trial_crashed_sits_out_the_rounds_another_comparison_needs(tmp_path, write_case):
    """Three variants: b crashed in every trial, and the stop that keeps a crashing b from growing the plan ended c's
    rounds too, c against a left unknown after repeats.min. The rounds go on without b, its places empty (every other
    trial keeps its index: no lost trial). c reports 5.0 / 5.5 ms in even / odd trials against a's 5.0: unknown at
    every count, so the plan runs to repeats.max."""
    case = sleeper_case(steps=3, sleep_ms=0, repeats={"min": 2, "max": 4},
                        variants={"a": {"env": {"REPORT_MS": "5.0"}}, "b": {"env": {"CRASH_AT": "1"}},
                                  "c": {"env": {"REPORT_MS": "5.0", "REPORT_ODD_MS": "5.5"}}})
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 3, res.stderr
    trials = read_jsonl(tmp_path / "run/trials.jsonl")
    # abba over a b c: round 0 a b c (0-2), round 1 c b a (3-5); then without b: a c (6, 8), c a (9, 11)
    assert [(t["index"], t["variant"], t["status"]) for t in trials] == [
        (0, "a", "ok"), (1, "b", "crashed"), (2, "c", "ok"), (3, "c", "ok"), (4, "b", "crashed"), (5, "a", "ok"),
        (6, "a", "ok"), (8, "c", "ok"), (9, "c", "ok"), (11, "a", "ok")]
    # the plan grew by a and c only: 6 trials, then 8, up to 6 + 2 rounds x 2
    assert "\n[7/8, up to 10] a " in res.stderr and "no whole record" not in res.stderr
    summary = json.loads((tmp_path / "run/summary.json").read_text())
    assert not summary["interrupted"] and summary["variants"]["c"]["trials"] == 4
    c = next(r for r in summary["comparisons"] if r["variant"] == "c" and r["metric"] == "step_ms")
    assert c["ratio"] == pytest.approx(5.25 / 5.0) and c["verdict"] == "unknown"  # c: 5.0, 5.5, 5.0, 5.5
    # a record lost among the empty places is named alone, and --resume runs that trial only
    run = tmp_path / "run"
    (run / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials if t["index"] != 8))
    report = perfkit("report", run)
    assert f"{run / 'trials.jsonl'}: no whole record of trial 8 (" in report.stderr, report.stderr
    resumed = perfkit("run", "--resume", run)
    assert resumed.returncode == 3 and "no whole record" not in resumed.stderr, resumed.stderr
    assert [(t["index"], t["variant"]) for t in read_jsonl(run / "trials.jsonl")][9:] == [(8, "c")]
    assert not json.loads((run / "summary.json").read_text())["interrupted"]


@pytest.mark.parametrize("printed", [False, True])
def test_steps_written_after_perfkit_stopped_a_hung_trial_are_not_steps_done(tmp_path, write_case, printed):
    """A rank that catches SIGTERM (jax.distributed does) writes steps between the timeout's stack dump and
    SIGKILL: they were counted as done before the hang, the report's "4 steps done" beside a dump at step 1; and
    so they were where its steps are printed lines a ``step_regex`` reads, which carry no time."""
    env = {"LATE": "1", **({"STDOUT_STEPS": "1"} if printed else {})}
    regex = {"step_regex": r"step (\d+\.\d+) ms"} if printed else {}
    case = sleeper_case(steps=4, sleep_ms=5, timeout=2, repeats={"min": 1, "max": 1},
                        variants={"a": {"env": env}, "b": {}}, **regex)
    res = perfkit("run", write_case(case), "--only", "a", "--out", tmp_path / "run")
    assert res.returncode == 3, res.stderr
    [hung] = read_jsonl(tmp_path / "run/trials.jsonl")
    [r0] = hung["ranks"]
    # the program wrote step 0, waited for the dump, then wrote steps 1-3 (metrics.jsonl or stdout holds all four)
    rank = tmp_path / "run/trials/00-a/rank0"
    if printed:
        assert len((rank / "stdout.log").read_text().splitlines()) == 4
    else:
        assert [e["event"] for e in read_jsonl(rank / "metrics.jsonl")] == ["step"] * 4 + ["value"]
    assert hung["status"] == "hung" and (r0["steps_done"], r0["late_steps"]) == (1, 3)
    report = (tmp_path / "run/report.md").read_text()
    assert "  - rank 0: still running at the end, 1 steps done," in report
    assert ("  - 3 step(s) written after perfkit stopped the trial at its timeout (and took the stack dumps) are left "
            "out of the steps done (rank 0 3)") in report


def test_a_step_with_no_finite_time_is_left_out_counted_and_said(tmp_path, write_case):
    """A newcomer's B wrote one NaN step of 8: it was dropped without a word (7 steps, steps_done 7, a verdict and
    nothing in report.md or the line saying a step was left out). Now each trial rank counts them and both say so."""
    script = tmp_path / "nan_step.py"
    script.write_text("import os\nfrom perfkit import record\n\nms = float(os.environ['MS'])\nfor i in range(8):\n"
                      "    record.step(float('nan') if str(i) == os.environ.get('NAN_AT') else ms)\n")
    case = {"name": "nan-step", "command": ["python", str(script)], "warmup": 1, "repeats": {"min": 2, "max": 2},
            "timeout": 60, "variants": {"a": {"env": {"MS": "5.0"}}, "b": {"env": {"MS": "5.5", "NAN_AT": "2"}}}}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    trials = read_jsonl(tmp_path / "run/trials.jsonl")
    assert [t["variant"] for t in trials] == ["a", "b", "b", "a"]  # abba interleaving
    for t in trials:
        [r0] = t["ranks"]
        if t["variant"] == "a":
            assert (t["steps_ms"], r0["steps_done"], "unreadable_steps" in r0) == ([5.0] * 8, 8, False)
        else:  # 8 written, the one at position 2 no number
            assert (t["steps_ms"], r0["steps_done"], r0["unreadable_steps"]) == ([5.5] * 7, 7, 1)
    s = json.loads((tmp_path / "run/summary.json").read_text())
    assert s["trials"]["unreadable_steps"] == [{"index": 1, "variant": "b", "rank": 0, "steps": 1},
                                              {"index": 2, "variant": "b", "rank": 0, "steps": 1}]
    assert s["variants"]["b"]["step_ms"]["n"] == 12  # 2 trials x (7 kept - 1 warmup)
    said = ("2 step events with no finite ms (NaN, Infinity, null, no number) left out (trial 1 (b, rank 0): 1, "
            "trial 2 (b, rank 0): 1)")
    assert f"; {said}; report " in res.stdout, res.stdout
    report = (tmp_path / "run/report.md").read_text()
    assert (f"- the step times the program wrote: {said}; perfkit gives them no time, and the steps after them count "
            "their positions from the steps kept, so one left out within the warmup takes the next step as warmup "
            "too (a profiled step stays marked)\n") in report


def test_a_step_regex_line_with_no_finite_time_is_left_out_counted_and_said(tmp_path, write_case):
    """The same through a case's step_regex: b printed 'step nan ms' once of 8. The NaN was kept as a step time and
    written to trials.jsonl, whose check then refused the run's own record: exit 2, no report."""
    script = tmp_path / "nan_print.py"
    script.write_text("import os\nfor i in range(8):\n"
                      "    print('step', 'nan' if str(i) == os.environ.get('NAN_AT') else os.environ['MS'], 'ms')\n")
    case = {"name": "nan-print", "command": ["python", str(script)], "step_regex": r"step (\S+) ms", "warmup": 1,
            "repeats": {"min": 1, "max": 1}, "timeout": 60,
            "variants": {"a": {"env": {"MS": "5.0"}}, "b": {"env": {"MS": "5.5", "NAN_AT": "2"}}}}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    a, b = read_jsonl(tmp_path / "run/trials.jsonl")
    assert (a["steps_ms"], "unreadable_steps" in a["ranks"][0]) == ([5.0] * 8, False)
    assert (b["steps_ms"], b["ranks"][0]["unreadable_steps"]) == ([5.5] * 7, 1)
    assert "1 step event with no finite ms" in (tmp_path / "run/report.md").read_text()


def test_a_program_saving_into_its_outputs_folder_finds_it_made(tmp_path, write_case):
    """A newcomer's script saved frames to os.environ["PERFKIT_OUTPUTS"] without making the folder: every trial
    crashed (FileNotFoundError). perfkit makes it before each rank starts; one a rank wrote nothing into (b here) is
    left out of the run directory, as before."""
    (tmp_path / "save.py").write_text(
        "import os, sys\nimport numpy as np\nfrom perfkit import record\n"
        "if sys.argv[1:] == ['save']:\n"
        "    np.save(os.path.join(os.environ['PERFKIT_OUTPUTS'], 'frames.npy'), np.zeros((2, 4, 4, 3), np.uint8))\n"
        "for _ in range(3):\n    record.step(5.0)\n")
    case = {"name": "save", "command": ["python", "{case_dir}/save.py"], "warmup": 1, "repeats": {"min": 1, "max": 1},
            "timeout": 60, "variants": {"a": {"args": ["save"]}, "b": {}}}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    assert [t["status"] for t in read_jsonl(tmp_path / "run/trials.jsonl")] == ["ok", "ok"]
    assert (tmp_path / "run/trials/00-a/rank0/outputs/frames.npy").is_file()
    assert not (tmp_path / "run/trials/01-b/rank0/outputs").exists()
