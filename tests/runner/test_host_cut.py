"""A multi-host run whose host part holds a trial's line cut short or damaged: what report.md says of the trial,
and its merged record."""

import json

from runner_testing import perfkit, read_jsonl
from test_runner_faults import two_host_run


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

