"""Faults around a run: perfkit itself killed mid-trial, a torn last line in trials.jsonl, a full disk, and
a rank that prints a flood. Each keeps what finished and leaves no process behind."""

import json
import os
import resource
import signal
import subprocess
import sys

from runner_testing import PROGRAMS, REPO, perfkit, processes_with, read_jsonl, sleeper_case, wait_for


def resume_advice(host: int) -> str:
    """The end of the line that names a host part's lost trial: what --resume of that host does, and what runs it
    on every host."""
    return (f"--resume --host-index {host} would run it again on host {host} alone (a host that recorded it runs it no "
            "more), its ranks meeting none of the other hosts'; to run it again on every host, remove its line from "
            "each host's trials.jsonl (hosts/host<I>/trials.jsonl), then --resume every host\n")


def test_kill_9_of_perfkit_mid_trial_leaves_no_process_and_resume_completes(tmp_path, write_case):
    """Trial 1's rank 1 hangs holding a child process; perfkit gets SIGKILL (no handler runs). The rank
    (parent-death signal) and its child (the group's watcher) must go at once, not when their work ends:
    they would never end. --resume then runs the trials left, this time without the hang."""
    tag, release = f"kill9-{tmp_path.name}", tmp_path / "release"
    case = sleeper_case(steps=4, sleep_ms=5, processes=2, timeout=600, repeats={"min": 2, "max": 2}, variants={
        "a": {}, "b": {"env": {"HANG_AT": "2", "FAULT_RANKS": "1", "SPAWN_CHILD": tag, "HANG_UNLESS": str(release)}}})
    case["command"].append(tag)  # every rank's argv carries the tag, so leftovers are found by it
    path, run = write_case(case), tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "run", str(path), "--out", str(run)], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        hung_child = f"time.sleep(600)\0{tag}"
        wait_for(lambda: processes_with(hung_child), 60, "the hung rank's child")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    wait_for(lambda: not processes_with(tag), 5, f"no process left (still: {processes_with(tag)})")
    kept = read_jsonl(run / "trials.jsonl")
    assert [t["index"] for t in kept] == [0]

    release.touch()
    res = perfkit("run", "--resume", run, timeout=120)
    assert res.returncode == 0, res.stderr
    trials = read_jsonl(run / "trials.jsonl")
    assert [t["index"] for t in trials] == [0, 1, 2, 3] and all(t["status"] == "ok" for t in trials)
    assert trials[0] == kept[0]
    assert not processes_with(tag)


def test_a_torn_last_line_is_taken_as_unfinished_and_its_trial_runs_again(tmp_path, write_case):
    """Power lost mid-append: the last record is half a line. --resume keeps the whole ones, runs the torn
    trial again, and its new record starts a line of its own."""
    run = tmp_path / "run"
    case = sleeper_case(steps=3, sleep_ms=1)
    assert perfkit("run", write_case(case), "--out", run).returncode == 0
    text = (run / "trials.jsonl").read_text()
    whole, last = text.splitlines(keepends=True)[:3], text.splitlines(keepends=True)[3]
    (run / "trials.jsonl").write_text("".join(whole) + last[: len(last) // 2])
    (run / "summary.json").unlink()
    res = perfkit("run", "--resume", run)
    assert res.returncode == 0 and "cut short" not in res.stderr, res.stderr  # (its trial ran again: whole now)
    lines = (run / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 5 and lines[3] == last[: len(last) // 2]  # the torn half stays, unread
    trials = read_jsonl_skipping(run / "trials.jsonl")
    assert [t["index"] for t in trials] == [0, 1, 2, 3]
    assert [json.loads(line) for line in lines[:3]] == trials[:3]
    assert json.loads((run / "summary.json").read_text())["trials"]["total"] == 4


def two_host_run(run, write_case):
    """A run of 2 hosts of 1 rank each, both done, made by hand: sleepers a, b over 2 rounds (abba: trials 0-3 are
    a, b, b, a), each host's part recording its own rank of every trial."""
    run.mkdir()
    write_case(sleeper_case(steps=3, sleep_ms=1, processes=2), "run/case.yaml")
    for host in (0, 1):
        part = run / "hosts" / f"host{host}"
        part.mkdir(parents=True)
        (part / "run.json").write_text(json.dumps({"hosts": 2, "host_index": host, "coordinator": "127.0.0.1:1",
                                                   "run_id": "run", "cwd": str(REPO)}))
        (part / "done").write_text('{"interrupted": false}')
        records = [{"index": index, "variant": variant, "round": index // 2, "dir": f"trials/{index:02d}-{variant}",
                    "status": "ok", "wall_s": 1.0, "warmup": 1, "steps_ms": [1.0 + index, 1.5, 1.25], "natural_ms": [],
                    "values": {}, "ranks": [{"rank": host, "exit_code": 0, "running_at_end": False, "steps_done": 4,
                                             "last_step_ms": 1.0, "last_mark": None}]}
                   for index, variant in enumerate("abba")]
        (part / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


def test_a_host_parts_cut_last_line_is_named_and_the_run_read_as_interrupted(tmp_path, write_case):
    """One host's trials.jsonl cut short in its last line (that host's perfkit killed while writing it): the merge
    skipped the line with nothing said, the run read as finished (summary.json's interrupted false), trial 3 failed
    as incomplete alone. The line names the host's file and the trial, as a one-host run's does, and says what its
    --resume does: that host runs the trial again, alone."""
    run = two_host_run(tmp_path / "run", write_case)
    assert perfkit("report", run).returncode == 0  # (the run as made is whole: nothing said)
    part = run / "hosts/host1/trials.jsonl"
    text = part.read_text()
    last = text.splitlines(True)[-1]
    assert last.startswith('{"index": 3, "variant": "a", ')
    part.write_text(text[: len(text) - len(last)] + last[:60])
    res = perfkit("report", run)
    assert res.returncode == 3, res.stdout
    assert res.stderr == (f"perfkit: {part}: no whole record of trial 3 (a): the file's last line is cut short "
                          "(perfkit killed while writing it, or the file cut since): the run is read as interrupted: "
                          + resume_advice(1))
    assert json.loads((run / "summary.json").read_text())["interrupted"] is True
    assert [t.get("cut_hosts") for t in read_jsonl(run / "trials.jsonl")] == [None, None, None, [1]]

    res = perfkit("run", "--resume", run, "--host-index", "1")  # (sleepers: they meet no other host's ranks)
    assert res.returncode == 0 and "cut short" not in res.stderr, res.stderr
    assert [t["index"] for t in read_jsonl_skipping(part)] == [0, 1, 2, 3]
    assert [t.get("missing_hosts") for t in read_jsonl(run / "trials.jsonl")] == [None] * 4
    assert json.loads((run / "summary.json").read_text())["interrupted"] is False


def test_a_host_parts_damaged_middle_line_is_named_and_the_run_read_as_interrupted(tmp_path, write_case):
    """A damaged line in the middle of one host's trials.jsonl: its trial was merged without that host's ranks
    and nothing said which line of which file."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host0/trials.jsonl"
    lines = part.read_text().splitlines(True)
    part.write_text("".join([lines[0], lines[1][:40] + "\n", *lines[2:]]))
    res = perfkit("report", run)
    assert res.returncode == 3, res.stdout
    assert res.stderr == (f"perfkit: {part}: no whole record of trial 1 (a line damaged or cut short): the run is "
                          "read as interrupted: " + resume_advice(0))
    assert json.loads((run / "summary.json").read_text())["interrupted"] is True


def read_jsonl_skipping(path):
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def test_a_full_disk_while_a_trial_is_written_gives_one_line_and_keeps_earlier_trials(tmp_path, write_case):
    run = tmp_path / "run"
    path = write_case(sleeper_case(steps=3, sleep_ms=1))
    res = subprocess.run([sys.executable, str(PROGRAMS / "disk_fills.py"), "2", "run", str(path), "--out", str(run)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    lines = [line for line in res.stderr.splitlines() if not line.startswith("[")]  # progress lines apart
    assert lines == [f"perfkit: {run / 'trials.jsonl'}: no space left on device (finished trials are kept: "
                     "free some, then --resume)"], res.stderr
    assert [t["index"] for t in read_jsonl_skipping(run / "trials.jsonl")] == [0, 1]
    res = perfkit("run", "--resume", run)
    assert res.returncode == 0, res.stderr
    assert [t["index"] for t in read_jsonl_skipping(run / "trials.jsonl")] == [0, 1, 2, 3]


MEASURE_PEAK = """import resource, runpy, sys
sys.argv = ["perfkit", *sys.argv[1:]]
try:
    runpy.run_module("perfkit.cli", run_name="__main__")
finally:
    print("peak_kb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def peak_kb(*args) -> tuple[int, subprocess.CompletedProcess]:
    res = subprocess.run([sys.executable, "-c", MEASURE_PEAK, *map(str, args)], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    return int(res.stderr.rsplit("peak_kb", 1)[1]), res


def test_a_rank_printing_100_mb_does_not_grow_perfkits_memory(tmp_path, write_case):
    """Ranks write to files, never to a pipe perfkit holds; stdout is read as a tail, and step times
    from it (``step_regex``) line by line. perfkit's peak memory with a 100 MB flood stays within
    30 MB of a quiet run's (reading the flood whole costs >= 100 MB: text, then its lines)."""
    runs = {}
    for mb in (0, 100):
        env = {"PRINT_MB": str(mb), "STDOUT_STEPS": "1"}
        case = sleeper_case(steps=3, sleep_ms=1, repeats={"min": 1, "max": 1}, step_regex=r"step (\d+\.\d+) ms",
                            variants={"a": {"env": env}, "b": {"env": env}})
        runs[mb] = peak_kb("run", write_case(case, f"case{mb}.yaml"), "--out", tmp_path / f"run{mb}")
        assert runs[mb][1].returncode == 0, runs[mb][1].stderr
        assert [len(t["steps_ms"]) for t in read_jsonl(tmp_path / f"run{mb}/trials.jsonl")] == [3, 3]  # after the flood
    assert (tmp_path / "run100/trials/00-a/rank0/stdout.log").stat().st_size >= 100 << 20
    grown_mb = (runs[100][0] - runs[0][0]) / 1024
    assert grown_mb < 30, f"perfkit grew by {grown_mb:.0f} MB reading a 100 MB stdout"


def test_a_second_perfkit_on_a_running_run_is_refused(tmp_path, write_case):
    """`perfkit run --resume RUN` while another perfkit still ran RUN was not refused: both ran the trials left, and
    trials.jsonl ended with 24 records of a 16-trial plan, 3 of them spurious failures where the two wrote one
    trial's rank folders. The second is refused in one line (exit 2) and the first finishes its plan alone."""
    # b's trials wait while `hold` is there: the first perfkit runs until the refused commands have run, however
    # slow the machine
    hold = tmp_path / "hold"
    hold.touch()
    case = sleeper_case(steps=4, sleep_ms=5, timeout=300, repeats={"min": 2, "max": 2},
                        variants={"a": {}, "b": {"env": {"HOLD_WHILE": str(hold)}}})
    path, run = write_case(case), tmp_path / "run"
    first = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "run", str(path), "--out", str(run)], cwd=REPO,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (run / "trials.jsonl").exists(), 120, "the first trial's record")
        second = perfkit("run", "--resume", run, timeout=120)
        assert (second.returncode, second.stderr) == (
            2, f"perfkit: {run}: another perfkit is running this run: wait for it to end, or stop it (Ctrl-C) before "
               "--resume\n"), second.stderr[-2000:]
        again = perfkit("run", path, "--out", run, timeout=120)  # a new run into it: the same
        assert again.returncode == 2 and "another perfkit is running this run" in again.stderr, again.stderr[-2000:]
        hold.unlink()
        assert first.wait(timeout=120) == 0, first.stderr.read()[-2000:]
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        first.stderr.close()
    assert [t["index"] for t in read_jsonl(run / "trials.jsonl")] == [0, 1, 2, 3]
    assert perfkit("run", "--resume", run, timeout=120).returncode == 0  # the run over, its folder is free


def test_a_host_parts_several_damaged_lines_are_named_each_in_the_advice(tmp_path, write_case):
    """Host 0's lines of trials 1 and 2 damaged: the line read 'no whole record of trial 1, 2', then said of them
    'would run it again ... remove its line'. Each is named, and the advice speaks of them."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host0/trials.jsonl"
    lines = part.read_text().splitlines(True)
    part.write_text("".join([lines[0], lines[1][:40] + "\n", lines[2][:40] + "\n", lines[3]]))
    res = perfkit("report", run)
    assert res.returncode == 3, res.stdout
    assert res.stderr == (
        f"perfkit: {part}: no whole record of trials 1, 2 (a line damaged or cut short): the run is read as "
        "interrupted: --resume --host-index 0 would run trials 1, 2 again on host 0 alone (a host that recorded them "
        "runs them no more), their ranks meeting none of the other hosts'; to run them again on every host, remove "
        "their lines from each host's trials.jsonl (hosts/host<I>/trials.jsonl), then --resume every host\n")


def test_a_host_parts_last_line_cut_before_its_number_names_the_plans_next_trial(tmp_path, write_case):
    """Host 1's last line (trial 3, a) cut to '{"ind': the line named no trial ('the trial its last line began')."""
    run = two_host_run(tmp_path / "run", write_case)
    part = run / "hosts/host1/trials.jsonl"
    text = part.read_text()
    part.write_text(text[: len(text) - len(text.splitlines(True)[-1])] + '{"ind')
    res = perfkit("report", run)
    assert res.returncode == 3, res.stdout
    assert res.stderr == (f"perfkit: {part}: no whole record of trial 3 (a), the plan's first not recorded, which its "
                          "last line began: the line, cut before its trial's number, is cut short (perfkit killed "
                          "while writing it, or the file cut since): the run is read as interrupted: "
                          + resume_advice(1))
