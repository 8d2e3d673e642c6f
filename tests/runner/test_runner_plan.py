"""Trial planning and each rank's launch environment, without running anything."""

import sys
from pathlib import Path

from report.run_fixtures import whole_record

from perfkit.run import runner
from perfkit.run import placement
from perfkit.run import ranks as rank_kind
from perfkit.run.ranks import rank_processes
from perfkit.run.plan import plan_trials, round_order, sat_out
from perfkit.run.trial import RunOptions, Trial
from perfkit.rundata import case as case_mod
from perfkit.rundata import rundir

CMD = {"name": "c", "command": ["python", "bench.py"], "variants": {"a": {}, "b": {"env": {"K": "ring"}}}}


def test_abba_alternates_rounds():
    assert [t.variant for t in plan_trials(["a", "b"], 4, "abba", 0)] == list("abbaabba")
    assert [t.variant for t in plan_trials(["a", "b", "c"], 2, "abba", 0)] == list("abccba")


def test_random_order_is_seeded_and_each_round_runs_every_variant_once():
    names = ["a", "b", "c", "d"]
    plan = plan_trials(names, 6, "random", 7)
    assert plan == plan_trials(names, 6, "random", 7)
    rounds = [[t.variant for t in plan if t.round == r] for r in range(6)]
    assert all(sorted(r) == names for r in rounds)
    assert len({tuple(r) for r in rounds}) > 1  # not the same order every round
    assert rounds != [[t.variant for t in plan_trials(names, 6, "random", 8) if t.round == r] for r in range(6)]


def test_longer_plan_starts_with_the_same_trials():
    """Indices are places in the plan: a resumed or extended run re-derives the same trials."""
    for order in ("abba", "random"):
        short, longer = plan_trials(["a", "b"], 2, order, 3), plan_trials(["a", "b"], 5, order, 3)
        assert longer[:len(short)] == short
        assert [t.index for t in longer] == list(range(10))
        assert round_order(["a", "b"], 4, order, 3) == [t.variant for t in longer if t.round == 4]


def test_a_variant_none_of_whose_trials_ran_sits_out_the_rounds_past_the_minimum_leaving_its_places_empty():
    """b crashed in its two trials, c hung in one of its two: only b sits the later rounds out, and every other
    trial keeps its place (abba: a b c, c b a, a [b] c, c [b] a)."""
    trials = [{"variant": v, "status": s} for v, s in
              (("a", "ok"), ("b", "crashed"), ("c", "ok"), ("c", "hung"), ("b", "crashed"), ("a", "ok"))]
    assert sat_out(["a", "b", "c"], trials) == {"b"}
    assert sat_out(["a", "b", "c"], trials[:1]) == set()  # b and c have no finished trial yet: nothing known
    plan = plan_trials(["a", "b", "c"], 4, "abba", 0, min_rounds=2, out=frozenset({"b"}))
    assert [(t.index, t.variant, t.round) for t in plan] == [
        (0, "a", 0), (1, "b", 0), (2, "c", 0), (3, "c", 1), (4, "b", 1), (5, "a", 1),
        (6, "a", 2), (8, "c", 2), (9, "c", 3), (11, "a", 3)]


def test_single_process_rank_env():
    case = case_mod.validate(dict(CMD, devices=4), "c")
    trial = Trial(3, "b", 1)
    (r,) = rank_processes(case, case.variant("b"), trial, Path("/run/trials/03-b"), True,
                          hook=Path("/run/.perfkit/pyhook"))
    assert r.argv == [sys.executable, "bench.py"]  # "python" is the Python perfkit runs in
    e = r.env
    assert (e["PERFKIT_RANK"], e["PERFKIT_WORLD"], e["PERFKIT_TRIAL"], e["PERFKIT_VARIANT"], e["K"]) == \
        ("0", "1", "3", "b", "ring")
    assert e["PERFKIT_METRICS"] == "/run/trials/03-b/rank0/metrics.jsonl"
    assert e["PERFKIT_STACKS"] == "/run/trials/03-b/rank0/stacks.txt"
    assert "--xla_force_host_platform_device_count=4" in e["XLA_FLAGS"]
    assert "--xla_dump_to=/run/trials/03-b/rank0/xla_dump" in e["XLA_FLAGS"]
    assert e["PYTHONPATH"].split(":")[0] == "/run/.perfkit/pyhook"
    assert "MASTER_PORT" not in e and "PERFKIT_SALT" not in e


def test_multi_process_ranks_share_a_coordinator_and_split_devices():
    case = case_mod.validate(dict(CMD, mesh={"dp": 2, "sp": 4}, processes=4), "c")
    ranks = rank_processes(case, case.variant("a"), Trial(0, "a", 0), Path("/r/trials/00-a"), False)
    assert {r.env["PERFKIT_MESH"] for r in ranks} == {"dp=2,sp=4"}
    assert [r.rank for r in ranks] == [0, 1, 2, 3]
    assert len({r.env["PERFKIT_COORDINATOR"] for r in ranks}) == 1
    for r in ranks:
        e = r.env
        assert (e["RANK"], e["LOCAL_RANK"], e["WORLD_SIZE"], e["PERFKIT_RANK"]) == (str(r.rank), str(r.rank), "4", str(r.rank))
        assert e["PERFKIT_COORDINATOR"] == f"{e['MASTER_ADDR']}:{e['MASTER_PORT']}"
        assert "--xla_force_host_platform_device_count=2" in e["XLA_FLAGS"] and "xla_dump_to" not in e["XLA_FLAGS"]


def test_multi_host_share_of_ranks_and_per_trial_port():
    case = case_mod.validate(dict(CMD, processes=4), "c")
    opts = RunOptions(hosts=2, host_index=1, coordinator="node0:29500", run_id="r")
    ranks = rank_processes(case, case.variant("a"), Trial(5, "a", 2), Path("/r/trials/05-a"), False, options=opts,
                           trial_port=12)
    assert [(r.rank, r.env["LOCAL_RANK"], r.env["LOCAL_WORLD_SIZE"]) for r in ranks] == [(2, "0", "2"), (3, "1", "2")]
    assert {r.env["PERFKIT_COORDINATOR"] for r in ranks} == {"node0:29512"}
    assert placement.host_ranks(8, 4, 3) == range(6, 8)


def test_salt_is_shared_by_ranks_and_new_per_trial():
    case = case_mod.validate(dict(CMD, processes=2), "c")
    opts = RunOptions(salt=True, run_id="run-1")

    def salts(index, run_id="run-1"):
        rs = rank_processes(case, case.variant("a"), Trial(index, "a", 0), Path(f"/x/run-1/trials/{index:02d}-a"),
                            False, options=RunOptions(salt=True, run_id=run_id))
        return {r.env["PERFKIT_SALT"] for r in rs}

    assert len(salts(0)) == 1 and salts(0) != salts(1) and salts(0) != salts(0, "run-2")
    (r, _) = rank_processes(case, case.variant("a"), Trial(0, "a", 0), Path("/x/t"), False, options=opts)
    assert r.env["JAX_ENABLE_COMPILATION_CACHE"] == "false" and r.env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] == "1"


def test_model_case_runs_the_bundled_worker():
    case = case_mod.validate({"name": "m", "model": {"name": "wan", "steps": 4}, "devices": 4, "processes": 2,
                              "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {"options": {"plan": "sp"}}}}, "m")
    ranks = rank_processes(case, case.variant("sp"), Trial(0, "sp", 0), Path("/r/t"), False)
    assert all(r.argv[:3] == [sys.executable, "-m", "perfkit.run.model_rank"] for r in ranks)
    assert '"plan": "sp"' in ranks[0].argv[3]
    assert "--xla_force_host_platform_device_count=2" in ranks[1].env["XLA_FLAGS"]


class FakeStream:
    def __init__(self, tty):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, s):
        self.text += s

    def flush(self):
        pass


def test_progress_line_says_trial_variant_median_and_time_left(tmp_path):
    trials = [{"variant": "a", "status": "ok", "warmup": 1, "steps_ms": [50, 10, 12, 11], "wall_s": 2.0}]
    log = FakeStream(tty=False)
    p = runner.Progress(log)
    p.running(1, 4, "a", [], tmp_path / "metrics.jsonl")  # not a terminal: no live redraw
    p.finished(1, 4, trials[0], trials)
    assert log.text == "[1/4] a            trial median 11.00 ms, a so far 11.00 ms   ~6 s left\n"
    tty = FakeStream(tty=True)
    (tmp_path / "metrics.jsonl").write_text('{"event": "step", "ms": 3}\n' * 2)
    runner.Progress(tty).running(2, 4, "b", trials, tmp_path / "metrics.jsonl", 60)
    assert tty.text.startswith("\r[2/4] b") and "running 0 s (ends as hung at 60 s): 2 steps" in tty.text


def test_a_trial_that_runs_on_is_seen_waiting_on_a_log(tmp_path, monkeypatch):
    """Not on a terminal, a trial that runs on (a hung one waits for its limit) gets a line each QUIET_S it runs,
    saying how long and when it ends as hung; a new trial starts its clock afresh."""
    clock = [100.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    (tmp_path / "metrics.jsonl").write_text('{"event": "step", "ms": 3}\n' * 2)
    log = FakeStream(tty=False)
    p = runner.Progress(log)
    for t in (100, 110, 114.9, 115, 125, 130.5):
        clock[0] = t
        p.running(1, 4, "a", [], tmp_path / "metrics.jsonl", 60)
    assert log.text.splitlines() == [
        "[1/4] a            still running after 15 s (ends as hung at 60 s): 2 steps so far, a so far -",
        "[1/4] a            still running after 30 s (ends as hung at 60 s): 2 steps so far, a so far -"]
    clock[0] = 140
    p.running(2, 4, "b", [], tmp_path / "metrics.jsonl", 60)
    assert len(log.text.splitlines()) == 2


def test_a_trial_past_its_steps_is_said_to_be(tmp_path, monkeypatch):
    """A trial whose steps are done and that takes its taps (a program of its own, compiled then) or times its
    natural pass says so: the line read '8 steps so far', as if the steps went on (a newcomer's)."""
    clock = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text('{"event": "mark", "name": "ready"}\n' + '{"event": "step", "ms": 3}\n' * 8
                       + '{"event": "value", "name": "compile_s", "value": 1.5}\n{"event": "mark", "name": "taps"}\n')
    log, tty = FakeStream(tty=False), FakeStream(tty=True)
    for stream in (log, tty):
        p = runner.Progress(stream)
        for t in (0, 15):
            clock[0] = t
            p.running(1, 4, "a", [], metrics, 60)
    assert log.text == ("[1/4] a            still running after 15 s (ends as hung at 60 s): its 8 steps done, taking "
                        "its taps, a so far -\n")
    assert "running 15 s (ends as hung at 60 s): 8 steps done, taking its taps, a so far -" in tty.text
    with metrics.open("a") as f:
        f.write('{"event": "mark", "name": "natural"}\n')
    clock[0] = 30
    p.running(1, 4, "a", [], metrics, 60)
    assert "running 30 s (ends as hung at 60 s): 8 steps done, timing its natural pass, a so far -" in tty.text


def test_a_command_trial_past_the_steps_its_variant_s_trials_ran_is_said_to_be_done_with_them(tmp_path, monkeypatch):
    """A command writes no mark past its steps, and perfkit is not told its count (its argv's ``--steps 8``): where
    every finished trial of its variant ran 8 steps, a trial at its 8th that runs on (a hang as it exits) read
    '8 steps so far', as if stepping still. Short of them, past them, or where the finished trials ran different
    counts, it reads as it did; another variant's trials, and one that hung, count for nothing."""
    clock = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    metrics = tmp_path / "metrics.jsonl"

    def line(steps: int, trials: list[dict], tty: bool = False) -> str:
        metrics.write_text('{"event": "step", "ms": 3}\n' * steps)
        stream, clock[0] = FakeStream(tty=tty), 0
        p = runner.Progress(stream)
        p.running(3, 4, "a", trials, metrics, 60)
        clock[0] = 15
        p.running(3, 4, "a", trials, metrics, 60)
        return stream.text.splitlines()[-1].split("60 s): ", 1)[1].split(", a so far")[0]  # what it says it does

    def ran(variant: str, steps: int, status: str = "ok") -> dict:
        return {"variant": variant, "status": status, "warmup": 2, "steps_ms": [3.0] * steps}

    trials = [ran("a", 8), ran("b", 5), ran("a", 3, "hung"), ran("a", 8)]
    assert line(8, trials) == "its 8 steps done, not yet exited"
    assert line(8, trials, tty=True) == "8 steps done, not yet exited"
    assert line(5, trials) == "5 steps so far"
    assert line(9, trials) == "9 steps so far"
    assert line(8, [ran("a", 8), ran("a", 9)]) == "8 steps so far"
    assert line(5, [ran("b", 5)]) == "5 steps so far"


def test_a_step_regex_trial_running_says_its_steps_are_counted_at_its_end(tmp_path, monkeypatch):
    """A command case timed by its ``step_regex`` writes no metrics.jsonl: its running line read '0 steps so far'
    from start to end, as if stuck before its first step. Its steps are matched in its stdout when it ends."""
    clock = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    for tty, said in ((False, "still running after 15 s (ends as hung at 60 s): its steps counted from its stdout "
                               "when it ends, a so far -"),
                      (True, "running 15 s (ends as hung at 60 s): steps counted at its end, a so far -")):
        stream, clock[0] = FakeStream(tty=tty), 0
        p = runner.Progress(stream)
        p.running(1, 4, "a", [], tmp_path / "metrics.jsonl", 60, from_stdout=True)
        clock[0] = 15
        p.running(1, 4, "a", [], tmp_path / "metrics.jsonl", 60, from_stdout=True)
        assert said in stream.text


def test_the_time_left_counts_the_running_trial_and_its_limit(tmp_path, monkeypatch):
    """Trials of 10 s, the 2nd of 2 running: 5 s in, ~5 s left; 45 s into its 60 s limit (the README's hang) it
    read '~0 s left' (a newcomer's finding), then '~0 s left (~15 s if this trial runs to its limit)', still '~0 s
    left' of a trial running (another's): ~0 s left after it, ~15 s if it runs to its limit."""
    clock = [0.0]
    monkeypatch.setattr(runner.time, "monotonic", lambda: clock[0])
    (tmp_path / "metrics.jsonl").write_text('{"event": "step", "ms": 3}\n' * 5)
    log = FakeStream(tty=False)
    p = runner.Progress(log)
    done = {"variant": "a", "status": "ok", "warmup": 1, "steps_ms": [50, 10], "wall_s": 10.0}
    p.finished(1, 2, done, [done])
    for t in (0, 15, 45):
        clock[0] = t
        p.running(2, 2, "skip", [done], tmp_path / "metrics.jsonl", 60)
    lines = log.text.splitlines()[1:]
    assert lines == [
        "[2/2] skip         still running after 15 s (ends as hung at 60 s): 5 steps so far, skip so far -   ~0 s "
        "left after this trial (~45 s if it runs to its limit)",
        "[2/2] skip         still running after 45 s (ends as hung at 60 s): 5 steps so far, skip so far -   ~0 s "
        "left after this trial (~15 s if it runs to its limit)"]
    clock[0] = 5
    p._running = None  # a new trial 2 of 3, 5 s in: this one's 5 s and the 3rd's 10 s left
    p.running(2, 3, "b", [done], tmp_path / "metrics.jsonl", 60)
    clock[0] = 20
    p.running(2, 3, "b", [done], tmp_path / "metrics.jsonl", 60)
    assert log.text.splitlines()[-1].endswith("   ~10 s left after this trial (~55 s if it runs to its limit)")


def test_progress_shows_each_trials_median_and_a_plan_that_grows():
    """The trial's own median (not a running pooled one), the variant's median of trial medians so far, and
    a count that says how far adaptive rounds may take the plan and when it grew."""
    def rec(steps):
        return {"variant": "a", "status": "ok", "warmup": 1, "steps_ms": [50, *steps], "wall_s": 1.0}

    first, second, third = rec([10, 10, 10, 10, 10]), rec([30]), rec([20, 21, 22])
    log = FakeStream(tty=False)
    p = runner.Progress(log)
    p.most = 8
    p.finished(1, 2, first, [first])
    p.finished(2, 2, second, [first, second])
    p.finished(3, 4, third, [first, second, third])
    # pooled over the 9 steps so far the median would be 10.00; the trial medians are 10, 30, 21
    assert log.text.splitlines() == [
        "[1/2, up to 8] a            trial median 10.00 ms, a so far 10.00 ms   ~1 s left",
        "[2/2, up to 8] a            trial median 30.00 ms, a so far 20.00 ms   ~0 s left",
        "[3/4, up to 8] a            trial median 21.00 ms, a so far 21.00 ms   ~1 s left   "
        "(plan grew from 2 to 4 trials: the verdict was still unknown)"]


def test_trial_records_survive_a_torn_last_line(tmp_path):
    rundir.append_trial(tmp_path, whole_record(0, "a"))
    with open(tmp_path / "trials.jsonl", "a") as f:
        f.write('{"index": 1, "vari')  # perfkit killed mid-write
    rundir.append_trial(tmp_path, whole_record(1, "b"))
    assert rundir.read_trials(tmp_path) == [whole_record(0, "a"), whole_record(1, "b")]


def test_a_resumed_host_of_several_with_nothing_left_does_not_promise_the_report():
    """One host of several may not take the report's claim: its line says none ran, and the claim decides the rest
    (a reviewer's: it said 'its summary.json and report.md are written again' of a host that wrote neither)."""
    alone, host = FakeStream(tty=False), FakeStream(tty=False)
    runner.Progress(alone).nothing_left(Path("r"), 4, rewrites=True)
    runner.Progress(host).nothing_left(Path("r"), 4, rewrites=False)
    assert alone.text == "every trial of r's plan (4) had finished: none ran; its summary.json and report.md are " \
                         "written again\n"
    assert host.text == "every trial of r's plan (4) had finished: none ran\n"


def test_of_hosts_finishing_at_once_one_claims_the_report_until_a_resume_releases_it(tmp_path):
    """Two hosts that mark their parts done at once each see every host done: one alone writes the report."""
    for i in (0, 1):
        part = rundir.part_dir(tmp_path, i, 2)
        part.mkdir(parents=True)
        rundir.mark_done(part, False)
    assert rundir.all_hosts_done(tmp_path, 2)
    assert [rundir.claim_report(tmp_path), rundir.claim_report(tmp_path)] == [True, False]
    rundir.release_report(tmp_path)
    assert rundir.claim_report(tmp_path)


def test_step_times_from_stdout_when_a_program_reports_none(tmp_path):
    """A program that cannot use the metrics protocol: ``step_regex`` reads its stdout instead (its first
    group, or the group named ``ms``); a capture that is no number is skipped."""
    from perfkit.run.launch import TrialOutcome

    (tmp_path / "rank0").mkdir()
    (tmp_path / "rank0" / "stdout.log").write_text("loading\nstep 0 took 12.5 ms\nstep 1 took n/a ms\n"
                                                   "step 2 took 7 ms\nstep 3 took 6.25 ms\ndone\n")
    outcome = TrialOutcome("ok", 1.0, [{"rank": 0, "exit_code": 0, "running_at_end": False}])
    for regex in (r"took (\S+) ms", r"step (\d+) took (?P<ms>\S+) ms", r"took (\d[\d.]*)?\S* ms"):
        case = case_mod.validate(dict(CMD, warmup=1, step_regex=regex), "c")
        record = rank_kind.trial_record(case, Trial(0, "a", 0), tmp_path, outcome)
        assert record["steps_ms"] == [12.5, 7.0, 6.25] and record["status"] == "ok"
        assert record["ranks"][0]["steps_done"] == 3 and record["ranks"][0]["last_step_ms"] == 6.25
    case = case_mod.validate(dict(CMD, warmup=3, step_regex=r"took (\S+) ms"), "c")
    assert rank_kind.trial_record(case, Trial(0, "a", 0), tmp_path, outcome)["status"] == "no_steps"


def test_stdout_steps_printed_after_the_stop_are_late(tmp_path):
    """stdout has no clock: what it held when perfkit stopped the trial (its size then) is what the rank did; a step
    line after it is late, as a metrics line whose ``t`` is after the stop (it was counted among the steps done)."""
    from perfkit.run.launch import TrialOutcome

    (tmp_path / "rank0").mkdir()
    before = "loading\nstep 0 took 12.5 ms\n"
    (tmp_path / "rank0" / "stdout.log").write_text(before + "step 1 took 7 ms\nstep 2 took 6.25 ms\n")
    hung = TrialOutcome("hung", 1.0, [{"rank": 0, "exit_code": -9, "running_at_end": True}], stopped_t=1.0,
                        stdout_at_stop={0: len(before)})
    case = case_mod.validate(dict(CMD, warmup=0, step_regex=r"took (\S+) ms"), "c")
    rank = rank_kind.trial_record(case, Trial(0, "a", 0), tmp_path, hung)["ranks"][0]
    assert (rank["steps_done"], rank["last_step_ms"], rank["late_steps"]) == (1, 12.5, 2)


def test_the_rounds_read_each_look_at_the_level_the_looks_get():
    """Trial medians 10.0, 10.4, 9.6 ms against 9% more: slower at one look's 95% ([1.028, 1.219] by the bootstrap
    and Welch's t), unknown at the level of a look of six, 3 to 8 trials a side ([0.992, 1.263]): the rounds go on
    where repeats.max allows them; where it does not, the one look is at 95% and decides."""
    def trial(index, variant, steps):
        return {"index": index, "variant": variant, "round": index // 2, "status": "ok", "warmup": 0,
                "steps_ms": steps}

    a = [[10.0, 10.1, 9.9], [10.4, 10.5, 10.3], [9.6, 9.7, 9.5]]
    b = [[x * 1.09 for x in t] for t in ([10.3, 10.4, 10.2], [10.6, 10.7, 10.5], [9.9, 10.0, 9.8])]
    trials = [trial(2 * i + j, v, steps[i]) for i in range(3) for j, (v, steps) in enumerate((("a", a), ("b", b)))]
    rounds = case_mod.validate(dict(CMD, repeats={"min": 3, "max": 8}), "c")
    once = case_mod.validate(dict(CMD, repeats={"min": 3, "max": 3}), "c")
    assert runner.undecided(rounds, ["a", "b"], trials)
    assert not runner.undecided(once, ["a", "b"], trials)
    assert rounds.looks(hosts=1) == (3, 8) and rounds.looks(hosts=2) == (3, 3)
    # `--aa --only a` (a reviewer's): the rounds have no B/A verdict to read, so the run stops at repeats.min and its
    # A/A interval is one look's, at 95%
    assert rounds.looks(hosts=1, only="a") == (3, 3)


def test_a_matrix_cell_on_several_hosts_reads_the_matrix_hosts_options(tmp_path):
    """A multi-host matrix writes its options in hosts/host0/run.json, none in the cell: a reviewer's cell read as one
    host's (its verdict said to be read after every round, each look at Pocock's level)."""
    (tmp_path / "mh/hosts/host0").mkdir(parents=True)
    (tmp_path / "mh/hosts/host0/run.json").write_text('{"hosts": 2}')
    (tmp_path / "mh/cells/00").mkdir(parents=True)
    assert rundir.started_options(tmp_path / "mh/cells/00") == {"hosts": 2}
