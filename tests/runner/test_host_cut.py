"""A multi-host run whose host part holds a trial's line cut short or damaged: what report.md says of the trial,
and how every host runs it again."""

import json
import subprocess
import sys

from runner_testing import PROGRAMS, REPO, free_ports, perfkit, read_jsonl
from test_runner_faults import resume_advice, two_host_run


def failed_lines(run):
    return [line for line in (run / "report.md").read_text().splitlines() if line.startswith("- trial ")]


def test_a_host_whose_line_of_a_trial_is_cut_is_said_to_have_recorded_it(tmp_path, write_case):
    """Host 1's last line cut short: report.md said host 1 'recorded no part of it (never started, stopped before
    it, or wrote elsewhere)', none of which was so. It says the host recorded it and its record is cut short."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host1/trials.jsonl"
    text = part.read_text()
    part.write_text(text[: len(text) - len(text.splitlines(True)[-1])] + text.splitlines(True)[-1][:60])
    assert perfkit("report", run).returncode == 3
    assert failed_lines(run) == ["- trial 3 (a): **incomplete**: host 1 recorded it, but its record (its line in "
                                 "`hosts/host1/trials.jsonl`) is cut short or damaged, so it lacks its ranks"]
    merged = read_jsonl(run / "trials.jsonl")[3]
    assert merged.get("cut_hosts") == [1] and "missing_hosts" not in merged
    failed = json.loads((run / "summary.json").read_text())["trials"]["failed"]
    assert [(f["index"], f.get("cut_hosts"), f.get("missing_hosts")) for f in failed] == [(3, [1], None)]


def test_a_damaged_middle_line_and_a_host_with_no_record_are_told_apart(tmp_path, write_case):
    """Host 0's line of trial 1 damaged, host 1's record of trial 3 gone (stopped before it): each named for what
    befell it."""
    run = two_host_run(tmp_path / "run", write_case)
    lines = (run / "hosts/host0/trials.jsonl").read_text().splitlines(True)
    (run / "hosts/host0/trials.jsonl").write_text("".join([lines[0], lines[1][:40] + "\n", *lines[2:]]))
    lines = (run / "hosts/host1/trials.jsonl").read_text().splitlines(True)
    (run / "hosts/host1/trials.jsonl").write_text("".join(lines[:3]))
    assert perfkit("report", run).returncode == 3
    assert failed_lines(run) == [
        "- trial 1 (b): **incomplete**: host 0 recorded it, but its record (its line in `hosts/host0/trials.jsonl`) "
        "is cut short or damaged, so it lacks its ranks",
        "- trial 3 (a): **incomplete**: host 1 recorded no part of it (never started, stopped before it, or wrote "
        "elsewhere), so it lacks its ranks"]


def test_the_way_the_line_gives_to_run_a_cut_trial_again_on_every_host_works(tmp_path, write_case):
    """Two hosts whose ranks meet (rendezvous.py): host 1's line of trial 1 cut short. Its --resume alone runs the
    trial on host 1 alone, the rank waiting for a rank 0 that host 0 (which recorded it) never starts again; the line
    had gone on to the timeout. It says what does run it on every host, and doing so gives a whole trial."""
    case = {"name": "hosts", "command": ["python", str(PROGRAMS / "rendezvous.py"), "3", "1"], "processes": 2,
            "warmup": 1, "repeats": {"min": 1, "max": 1}, "timeout": 60, "variants": {"a": {}, "b": {}}}
    path, run = write_case(case), tmp_path / "run"
    port = free_ports(2)

    def all_hosts(*args):
        hosts = [subprocess.Popen([sys.executable, "-m", "perfkit.cli", "run", *map(str, args), "--host-index", str(i)],
                                  cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (0, 1)]
        outputs = [h.communicate(timeout=120) for h in hosts]
        assert [h.returncode for h in hosts] == [0, 0], outputs

    all_hosts(path, "--out", run, "--hosts", "2", "--coordinator", f"127.0.0.1:{port}")
    kept = read_jsonl(run / "trials.jsonl")
    assert [(t["index"], t["status"]) for t in kept] == [(0, "ok"), (1, "ok")]
    part = run / "hosts/host1/trials.jsonl"
    text = part.read_text()
    part.write_text(text[: len(text) - len(text.splitlines(True)[-1])] + text.splitlines(True)[-1][:60])
    res = perfkit("report", run)
    assert res.returncode == 3
    assert res.stderr == (f"perfkit: {part}: no whole record of trial 1 (b): the file's last line is cut short "
                          "(perfkit killed while writing it, or the file cut since): the run is read as interrupted: "
                          + resume_advice(1))
    assert "timeout" not in res.stderr
    for host in (0, 1):  # as the line says
        lines = (run / f"hosts/host{host}/trials.jsonl").read_text().splitlines(True)
        (run / f"hosts/host{host}/trials.jsonl").write_text("".join(lines[:1]))
    all_hosts("--resume", run)
    trials = read_jsonl(run / "trials.jsonl")
    assert trials[0] == kept[0]
    assert [(t["index"], t["status"], [r["rank"] for r in t["ranks"]]) for t in trials] == [(0, "ok", [0, 1]),
                                                                                            (1, "ok", [0, 1])]
    assert trials[1]["wall_s"] != kept[1]["wall_s"]  # run again, not the old record
    assert json.loads((run / "summary.json").read_text())["interrupted"] is False


def test_a_host_whose_damaged_line_names_no_trial_is_not_said_to_have_recorded_no_part(tmp_path, write_case):
    """Host 0's line of trial 1 damaged before its number ('{"inde'): nothing can tell which trial it held, and
    report.md said host 0 'recorded no part of it (never started, stopped before it, or wrote elsewhere)', none of
    which was so. It says host 0 holds a damaged line whose trial cannot be told, not which cause."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host0/trials.jsonl"
    lines = part.read_text().splitlines(True)
    part.write_text("".join([lines[0], lines[1][:6] + "\n", *lines[2:]]))
    assert perfkit("report", run).returncode == 3
    assert failed_lines(run) == [
        "- trial 1 (b): **incomplete**: host 0 holds a line in `hosts/host0/trials.jsonl` damaged before it names its "
        "trial: whether that line was its record of this trial cannot be told, so it lacks its ranks"]
    merged = read_jsonl(run / "trials.jsonl")[1]
    assert merged.get("untold_hosts") == [0] and "missing_hosts" not in merged and "cut_hosts" not in merged
    failed = json.loads((run / "summary.json").read_text())["trials"]["failed"]
    assert [(f["index"], f.get("untold_hosts"), f.get("missing_hosts")) for f in failed] == [(1, [0], None)]


def test_a_host_whose_last_line_is_cut_before_its_number_is_said_to_have_recorded_the_trial_stderr_names(
        tmp_path, write_case):
    """Host 1's last line (trial 3, a) cut to '{"ind': stderr named trial 3, the plan's first host 1 did not record,
    but report.md said host 1's trial 'cannot be told' (untold_hosts). The same reasoning holds for the merge: the
    line is the file's last, every whole record of host 1 lies below trial 3, the lowest it lacks; so report.md says
    host 1 recorded trial 3 and its line is cut short. A damaged line with a whole record after it stays untold (the
    test above)."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host1/trials.jsonl"
    text = part.read_text()
    part.write_text(text[: len(text) - len(text.splitlines(True)[-1])] + '{"ind')
    res = perfkit("report", run)
    assert res.returncode == 3 and "no whole record of trial 3 (a), the plan's first not recorded" in res.stderr
    assert failed_lines(run) == ["- trial 3 (a): **incomplete**: host 1 recorded it, but its record (its line in "
                                 "`hosts/host1/trials.jsonl`) is cut short or damaged, so it lacks its ranks"]
    merged = read_jsonl(run / "trials.jsonl")[3]
    assert merged.get("cut_hosts") == [1] and "untold_hosts" not in merged and "missing_hosts" not in merged


def test_a_damaged_line_whose_record_still_names_its_trial_is_told(tmp_path, write_case):
    """Host 0's line of trial 1 damaged in its first bytes, before its number, the rest of the record whole, and host 0
    stopped before trial 3: report.md said of trials 1 and 3 alike that whether the damaged line was host 0's record
    of them cannot be told, though the record's rest names its trial (its variant, round and folder: trial 1's, which
    trial 3's are not). Each is said for what befell it."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host0/trials.jsonl"
    lines = part.read_text().splitlines(True)
    assert lines[1].startswith('{"index": 1, "variant": "b", "round": 0, "dir": "trials/01-b", ')
    part.write_text("".join([lines[0], "#" * 12 + lines[1][12:], lines[2]]))
    assert perfkit("report", run).returncode == 3
    assert failed_lines(run) == [
        "- trial 1 (b): **incomplete**: host 0 recorded it, but its record (its line in `hosts/host0/trials.jsonl`) "
        "is cut short or damaged, so it lacks its ranks",
        "- trial 3 (a): **incomplete**: host 0 recorded no part of it (never started, stopped before it, or wrote "
        "elsewhere), so it lacks its ranks"]
    merged = read_jsonl(run / "trials.jsonl")
    assert [(t.get("cut_hosts"), t.get("untold_hosts"), t.get("missing_hosts")) for t in merged] == [
        (None, None, None), ([0], None, None), (None, None, None), (None, None, [0])]


def test_a_damaged_line_that_names_nothing_is_said_once_for_the_trials_it_may_have_held(tmp_path, write_case):
    """Host 0's line of trial 1 cut to its first bytes, nothing of its record left, and host 0 stopped before trial 3:
    the line may have held either (a resume runs a lost trial again after later ones, so its place in the file does
    not tell). report.md said why at each trial, each time as if that trial were the only one; it says it once, naming
    both trials, and the other trial's line points to it."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host0/trials.jsonl"
    lines = part.read_text().splitlines(True)
    part.write_text("".join([lines[0], lines[1][:6] + "\n", lines[2]]))
    assert perfkit("report", run).returncode == 3
    assert failed_lines(run) == [
        "- trial 1 (b): **incomplete**: host 0 holds a line in `hosts/host0/trials.jsonl` damaged before it names its "
        "trial: which of trials 1, 3 that line was its record of, if either, cannot be told, so it lacks its ranks",
        "- trial 3 (a): **incomplete**: host 0 may have recorded it in its damaged line (trial 1 says so), so it lacks "
        "its ranks"]
    merged = read_jsonl(run / "trials.jsonl")
    assert [t.get("untold_hosts") for t in merged] == [None, [0], None, [0]]
