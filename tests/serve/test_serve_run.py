"""Serve cases end to end through ``perfkit run`` against real test servers on loopback: figures that match
what the servers' configuration implies, served quality against an oracle with the codec floor, and
servers that never get ready, exit, crash mid-level, answer errors or hang a request, each reported with
no process left behind."""

import json
import re
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import yaml
from serve_testing import REPO, perfkit, processes_with, read_jsonl, serve_case, server_module, wait_for

SLEEP_MS = 200  # long against the per-request overhead (HTTP, a small video) on a loaded 2-core box


def write(tmp_path, case: dict):
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case, sort_keys=False))
    return path


def test_a_serve_run_end_to_end(tmp_path):
    """serial (one request at a time) against batched (four at a time, +-20 noise on its frames), both
    SLEEP_MS per request, at concurrency 1 and 4, two server processes each, against an oracle folder.
    One run (servers take seconds), checked in three parts."""
    tag = f"serve-figures-{uuid.uuid4().hex[:8]}"
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    frames = server_module().frames
    for name, seed in (("fox", 3), ("owl", 4)):
        np.save(oracle / f"{name}.npy", frames(seed, 64, 48, 6))
    case = serve_case({"serial": {"args": ["--max-concurrency", "1"]},
                       "batched": {"args": ["--max-concurrency", "4", "--noise", "20"]}},
                      tag=tag, concurrency=[1, 4], requests=8, server_restarts=2)
    case["serve"]["server"] += ["--sleep-ms", str(SLEEP_MS), "--spawn-child"]
    case["oracle"] = str(oracle)
    res = perfkit("run", write(tmp_path, case), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    assert not processes_with(tag)  # every server and the child it started were ended
    check_run_directory_and_report(tmp_path / "run", res.stdout)
    check_latency_and_throughput(json.loads((tmp_path / "run/summary.json").read_text())["serve"])
    check_first_come_first_served(tmp_path / "run")
    check_served_quality(tmp_path / "run")


def check_first_come_first_served(run):
    """serial queues first come first served: at concurrency 4 no request waits for more than the three others
    in flight, so no more than three others end between its start and its end. Counted from the requests'
    own times, not bounded in milliseconds (a max latency bound failed where the loaded machine stalled once)."""
    for trial in (t for t in read_jsonl(run / "trials.jsonl") if t["variant"] == "serial"):
        rows = [r for r in read_jsonl(run / trial["dir"] / "rank0" / "requests.jsonl")
                if r["level"] == 4 and r["phase"] == "measured"]
        assert len(rows) == 8
        for r in rows:
            ahead = sum(r["start_s"] < o["end_s"] < r["end_s"] for o in rows if o is not r)
            assert ahead <= 3, (trial["dir"], r["index"], ahead)


def check_run_directory_and_report(run, stdout):
    for name in ("case.yaml", "env.json", "trials.jsonl", "summary.json", "report.md", "plots/serve_latency.png"):
        assert (run / name).exists(), name
    trials = read_jsonl(run / "trials.jsonl")
    assert [t["variant"] for t in trials] == ["serial", "batched", "batched", "serial"]
    assert all(t["status"] == "ok" and t["serve"]["failure"] is None for t in trials)
    first = run / trials[0]["dir"] / "rank0"
    rows = read_jsonl(first / "requests.jsonl")
    assert len(rows) == 2 * (1 + 8) and all(r["ok"] for r in rows)
    assert sorted(p.name for p in (first / "outputs").iterdir()) == ["fox.mkv", "owl.mkv"]
    assert len(list((first / "requests").glob("c*/*.mkv"))) == 18  # every request's output kept
    # The trial's steps are its concurrency-1 latencies, warmup first.
    assert trials[0]["warmup"] == 1 and trials[0]["steps_ms"] == [r["latency_ms"] for r in rows if r["level"] == 1]

    s = json.loads((run / "summary.json").read_text())
    assert s["kind"] == "serve" and s["comparison"]["metric"] == "step_ms"
    assert set(s["variants"]["serial"]["step_ms"]) >= {"median", "p25", "p75", "n"}
    assert s["variants"]["serial"]["step_ms"]["n"] == 16  # 2 servers x 8 measured requests at c=1
    report = (run / "report.md").read_text()
    assert "## Serving" in report and "| variant | latency c=1 (s) | outputs/min c=1 | outputs/min c=4 |" in report
    assert "![Request latency per concurrency level](plots/serve_latency.png)" in report
    # the latency ratio divides the medians shown beside it, not the pooled medians in the table above it (a
    # newcomer divided those)
    lat = next(r for r in s["serve"]["comparisons"] if r["level"] == 1 and r["metric"] == "latency_ms")
    row = next(line for line in report.splitlines() if line.startswith("| batched | 1 |"))
    b_s, a_s, ratio = re.search(r"\| ([\d.]+) / ([\d.]+) = ([\d.]+) ", row).groups()
    assert ratio == f"{lat['ratio']:.3f}" == f"{float(b_s) / float(a_s):.3f}"
    assert (run / "plots/serve_latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "c=1 latency serial" in stdout and "c=4 outputs/min serial" in stdout
    # a served system's figure is its latency per server process, not a step time (a newcomer's)
    assert "(medians of server processes' medians), batched/serial" in stdout and "trial medians" not in stdout
    assert "batched/serial c=1 latency **" in report and "step time" not in report.split("## ", 1)[0]


def check_latency_and_throughput(s):
    """SLEEP_MS per request. serial works on one at a time: 60000 / SLEEP_MS outputs/min at any
    concurrency, and at c=4 a request waits for up to three others (8 measured from an empty queue:
    1, 2, 3, 4, 4, 4, 4, 4 x SLEEP_MS, median 4 x SLEEP_MS). batched works on four: four times the
    outputs/min at c=4 with no wait. Figures can only be slower than the sleep implies; the bounds allow
    a loaded 2-core machine up to 2x slower and still separate serial from batched at c=4 (1x vs 2x-4x)."""
    levels = {(r["variant"], r["level"]): r for r in s["levels"]}
    one = 60000 / SLEEP_MS
    ideal = {("serial", 1): one, ("serial", 4): one, ("batched", 1): one, ("batched", 4): 4 * one}
    for key, rate in ideal.items():
        row = levels[key]
        assert row["processes"] == 2 and row["failed"] == 0 and row["sent"] == 16
        assert 0.5 * rate <= row["outputs_per_min"] <= 1.02 * rate, (key, row)
    for key in (("serial", 1), ("batched", 1), ("batched", 4)):
        assert SLEEP_MS <= levels[key]["latency_p50_ms"] <= SLEEP_MS * 2, (key, levels[key])
    assert 3.5 * SLEEP_MS <= levels[("serial", 4)]["latency_p50_ms"] <= 4 * SLEEP_MS * 2
    assert 4 * SLEEP_MS <= levels[("serial", 4)]["latency_max_ms"]  # (a full queue: three ahead of it)
    ratios = {(r["level"], r["metric"]): r for r in s["comparisons"]}
    lat, out = ratios[(4, "latency_ms")], ratios[(4, "outputs_per_min")]
    # batched at most 2x its sleep on a loaded machine (the bound above) against serial's at least 3.5x: 0.571 at
    # most, where no batching reads about 1 (0.45 failed at 0.477 with another test on the second core)
    # its verdict: faster, or unknown where one of a side's two server processes stalled under the load beside it
    # (its median then reaches the other side's: a CI over two processes a side rightly spans the minimum effect;
    # seen in a clean-clone CI run at 0.499): the ratio above is what tells batching from none
    assert lat["ratio"] <= 2 / 3.5 and lat["verdict"] in ("faster", "unknown")
    # outputs/min of two processes a side: its CI takes in Welch's interval of the two (a bootstrap of two reaches no
    # further than they do), faster only where they agree closely (4.13x read unknown, its CI from 0.35): the ratio
    # tells batching from none
    assert 2.5 < out["ratio"] < 4.5 and out["ci_lo"] is not None and out["verdict"] in ("faster", "unknown")
    # At c=1 both serve one request per SLEEP_MS; batched also adds noise to its frames, which a loaded
    # machine can show as a small but real difference, so only the size is bounded, not the verdict: within the
    # 2x the rows' own bounds above allow a loaded machine (0.75 failed at 0.672 with another test's load beside it),
    # a sanity bound only: the rows above bound each side's rate
    assert 0.5 < ratios[(1, "outputs_per_min")]["ratio"] < 2 and 0.5 < ratios[(1, "latency_ms")]["ratio"] < 2
    assert len(s["processes"]) == 8 and {p["trial_status"] for p in s["processes"]} == {"ok"}


def check_served_quality(run):
    """Both servers encode with perfkit's default x264 settings, the codec floor's own: serial's clean
    frames score the floor itself; batched's noisy frames score well below it."""
    q = json.loads((run / "summary.json").read_text())["serve"]["quality"]
    assert q["reference"] == "oracle" and q["codec"] == "libx264:crf=18:pix_fmt=yuv420p"
    rows = {(r["prompt"], r["variant"]): r for r in q["rows"]}
    assert set(rows) == {("fox", "serial"), ("fox", "batched"), ("owl", "serial"), ("owl", "batched")}
    for prompt in ("fox", "owl"):
        serial, batched = rows[(prompt, "serial")], rows[(prompt, "batched")]
        assert serial["reference"].endswith(f"oracle/{prompt}.npy")
        assert 30 < serial["codec_floor_db"] < 60 and not serial["bit_identical"]
        assert abs(serial["psnr_db"] - serial["codec_floor_db"]) < 0.2
        assert batched["psnr_db"] < serial["codec_floor_db"] - 1
    report = (run / "report.md").read_text()
    assert "Served outputs against the oracle, per prompt" in report
    # `report` keeps the floor the run measured (x264 gives another on each encode): fox's, set to 12.5 here,
    # stays; owl's, set to 11.5 against another reference file, is measured again
    summary = json.loads((run / "summary.json").read_text())
    for row in summary["serve"]["quality"]["rows"]:
        row["codec_floor_db"] = 12.5 if row["prompt"] == "fox" else 11.5
        row["reference"] = row["reference"].replace("owl.npy", "elsewhere.npy")
    (run / "summary.json").write_text(json.dumps(summary))
    res = perfkit("report", run)
    assert res.returncode == 0, res.stderr
    rows = json.loads((run / "summary.json").read_text())["serve"]["quality"]["rows"]
    again = {(r["prompt"], r["variant"]): r for r in rows}
    assert again[("fox", "serial")]["codec_floor_db"] == again[("fox", "batched")]["codec_floor_db"] == 12.5
    owl = again[("owl", "serial")]
    assert 30 < owl["codec_floor_db"] < 60 and owl["reference"].endswith("owl.npy")
    assert "| 12.50 |" in (run / "report.md").read_text()


def test_failing_servers_are_each_reported_and_nothing_is_left_behind(tmp_path):
    tag = f"serve-failing-{uuid.uuid4().hex[:8]}"
    # Its own start-up timeout: 5 s, as a loaded 2-core machine may take seconds to start Python and numpy.
    never = {"args": ["--never-ready"], "serve": {"ready": {"timeout": 5}}}
    case = serve_case({"good": {}, "never": never, "refuses": {"args": ["--exit-at-start", "4"]},
                       "crashes": {"args": ["--crash-after", "3"]}, "errors": {"args": ["--fail-every", "3"]},
                       "hangs": {"args": ["--hang-after", "2"]}},
                      tag=tag, request_timeout=2, output={"kind": "base64", "field": "video", "suffix": ".mkv"})
    case["serve"]["server"] += ["--sleep-ms", "20", "--reply", "base64", "--spawn-child"]
    res = perfkit("run", write(tmp_path, case), "--out", tmp_path / "run")
    assert res.returncode == 3, res.stderr
    assert not processes_with(tag)
    run = tmp_path / "run"
    trials = {t["variant"]: t for t in read_jsonl(run / "trials.jsonl")}
    assert {v: t["status"] for v, t in trials.items()} == {"good": "ok", "never": "hung", "refuses": "crashed",
                                                           "crashes": "crashed", "errors": "ok", "hangs": "hung"}
    failure = {v: t["serve"]["failure"] for v, t in trials.items()}
    assert failure["never"].startswith("not ready within 5 s (last answer of http://127.0.0.1:") and \
        failure["never"].endswith('/health: HTTP 503: {"status": "loading"})')
    assert failure["refuses"].startswith("the server exited (exit code 4) before it was ready")
    assert failure["crashes"] == "the server exited (exit code 3) at c=1"
    assert failure["hangs"] == "request 2 at c=1 got no answer within 2 s"
    assert failure["good"] is None and failure["errors"] is None
    assert trials["refuses"]["ranks"][0]["stderr_tail"] == "test server: refusing to start"
    assert trials["crashes"]["ranks"][0]["stderr_tail"] == "crashing on request 4"
    assert "do_POST" in trials["hangs"]["ranks"][0]["stacks"]  # where the hung request waits

    s = json.loads((run / "summary.json").read_text())["serve"]
    errors = [r for r in s["failed_requests"] if r["variant"] == "errors"]
    # Every third request the server saw (warmup included) failed: 3, 6 and 9 of 10 over two levels.
    assert [(r["level"], r["phase"], r["index"], r["status"]) for r in errors] == [
        (1, "measured", 2, 500), (2, "warmup", 0, 500), (2, "measured", 3, 500)]
    assert errors[0]["error"] == 'HTTP 500: {"error": "injected failure on request 3"}'
    crashed = [r for r in s["failed_requests"] if r["variant"] == "crashes"]
    assert len(crashed) == 1 and crashed[0]["status"] is None and crashed[0]["index"] == 3
    levels = {(r["variant"], r["level"]): r for r in s["levels"]}
    assert levels[("errors", 1)]["failed"] == 1 and levels[("errors", 2)]["failed"] == 1
    assert not any(v in ("never", "refuses", "crashes", "hangs") for v, _ in levels)
    report = (run / "report.md").read_text()
    for text in ("trial 1 (never): **hung**: not ready within 5 s", "trial 2 (refuses): **crashed**",
                 "trial 3 (crashes): **crashed**: the server exited (exit code 3) at c=1",
                 "trial 5 (hangs): **hung**: request 2 at c=1", "Failed requests (5):",
                 'HTTP 500: {"error": "injected failure on request 6"}', "crashing on request 4"):
        assert text in report, text


def test_what_a_server_perfkit_stopped_printed_in_answer_to_its_signals_is_left_out_of_its_tails(tmp_path):
    """A server that never gets ready and logs its shutdown on perfkit's SIGTERM: the trial's record keeps in its
    tails what it printed before perfkit stopped it, as a rank's (its shutdown line read like the cause of the hang);
    the file keeps the line."""
    from perfkit.run import stackdump
    from perfkit.run.serve_trial import run_trial
    from perfkit.run.trial import RunOptions, Trial
    from perfkit.rundata.case import validate

    server = tmp_path / "server.py"
    server.write_text("import signal, sys, threading\n"
                      "def term(*_):\n    print('ERROR shutting down: request cancelled', file=sys.stderr, flush=True)"
                      "\n    print('bye', flush=True)\n    sys.exit(1)\n"
                      "signal.signal(signal.SIGTERM, term)\n"
                      "print('loading weights', file=sys.stderr, flush=True)\nprint('listening', flush=True)\n"
                      "threading.Event().wait(60)\n")
    case = validate(serve_case({"a": {}, "b": {}}, server=["python", str(server)],
                               ready={"url": "/health", "timeout": 1}), "c.yaml")
    record = run_trial(case, Trial(0, "a", 0), tmp_path / "trial", RunOptions(), stackdump.hook_dir(tmp_path / "hook"),
                       0, lambda: None)
    [rank] = record["ranks"]
    assert record["status"] == "hung" and rank["running_at_end"] and rank["stacks"]
    assert "shutting down" in (tmp_path / "trial/rank0/stderr.log").read_text()  # it did answer: the file keeps it
    assert rank["stderr_tail"] == "loading weights" and rank["stdout_tail"] == "listening"


def test_ctrl_c_ends_the_server_and_resume_finishes_the_run(tmp_path):
    tag = f"serve-stopped-{uuid.uuid4().hex[:8]}"
    case = serve_case({"a": {}, "b": {"args": ["--sleep-ms", "300"]}}, tag=tag, concurrency=[1], requests=3)
    path = write(tmp_path, case)
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "run", str(path), "--out", str(run)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # b's server answering: trial 0 is done, trial 1 under way
        if (run / "trials/01-b/rank0/requests.jsonl").exists():
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert not processes_with(tag)
    assert [t["variant"] for t in read_jsonl(run / "trials.jsonl")] == ["a"]
    assert json.loads((run / "summary.json").read_text())["interrupted"] is True
    res = perfkit("run", "--resume", run)
    assert res.returncode == 0, res.stderr
    trials = read_jsonl(run / "trials.jsonl")
    assert [(t["variant"], t["status"]) for t in trials] == [("a", "ok"), ("b", "ok")]
    assert len(read_jsonl(run / "trials/01-b/rank0/requests.jsonl")) == 1 + 3  # the stopped attempt's rows gone


def test_kill_9_of_perfkit_ends_a_hung_server_and_its_child(tmp_path):
    """The server hangs on its first request holding a child process; perfkit gets SIGKILL. The server
    (parent-death signal) and its child (the group's watcher) are gone at once, not after the 600 s
    request timeout, nor ever."""
    tag = f"serve-killed-{uuid.uuid4().hex[:8]}"
    case = serve_case({"a": {"args": ["--hang-after", "0", "--spawn-child"]}, "b": {}}, tag=tag, concurrency=[1],
                      requests=1, request_timeout=600)
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", "run", str(write(tmp_path, case)), "--out",
                             str(tmp_path / "run")], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = tmp_path / "run/trials/00-a/rank0/stderr.log"
        wait_for(lambda: log.exists() and "hanging on request" in log.read_text(), 60, "the server's request")
        assert len(processes_with(tag)) == 2  # the server and its child
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    deadline = time.monotonic() + 5
    while processes_with(tag):
        assert time.monotonic() < deadline, f"left running: {processes_with(tag)}"
        time.sleep(0.05)
