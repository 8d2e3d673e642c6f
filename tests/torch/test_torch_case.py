"""A shipped torch case through ``perfkit run`` end to end: 2 gloo ranks per trial, Ulysses vs ring,
frames compared, a Kineto trace per rank; then those traces through ``perfkit trace breakdown``."""

import json
import subprocess
import sys
from pathlib import Path

import torch  # noqa: F401  (the ranks import it: a broken torch fails here, not as a skip)

REPO = Path(__file__).resolve().parents[2]
CASE = REPO / "cases" / "torch" / "wan_ulysses_vs_ring.yaml"
TRACED_STEP = 2


def perfkit(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=300)


def test_torch_case_end_to_end(tmp_path):
    # One test, not a module fixture: under xdist each worker would run the case again.
    run_dir = tmp_path / "run"
    res = perfkit("run", CASE, "--out", run_dir, "--set", "repeats.min=1", "--set", "repeats.max=1",
                  "--set", f"capture.trace=[{TRACED_STEP}]",
                  "--set", 'command=[python, -m, perfkit.models.torch_bench, --steps, "4"]')
    assert res.returncode == 0, res.stderr[-3000:]

    trials = [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]
    assert [t["variant"] for t in trials] == ["ulysses", "ring"]
    for t in trials:
        assert t["status"] == "ok" and len(t["steps_ms"]) == 4
        assert [r["exit_code"] for r in t["ranks"]] == [0, 0]
    summary = json.loads((run_dir / "summary.json").read_text())
    quality = summary["quality"]
    # Same model and weights; the two plans reorder float32 sums only, below uint8 resolution.
    assert quality["bit_identical"] or quality["psnr_db"] > 50, quality
    for variant in ("ulysses", "ring"):  # the run's trace analysis (perfkit.trace) read every rank
        part = summary["breakdown"]["variants"][variant]
        assert part["chip_steps"] == 2 and part["ici_ms"] > 0, part

    for variant, collectives in (("ulysses", {"gloo:all_to_all"}), ("ring", {"gloo:send", "gloo:recv"})):
        trial = next((run_dir / "trials").glob(f"*-{variant}"))
        for rank in (0, 1):
            doc = json.loads((trial / f"rank{rank}" / "trace" / f"rank{rank}.json").read_text())
            info = doc["distributedInfo"]
            assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", rank, 2)
            names = {e.get("name") for e in doc["traceEvents"]}
            assert f"ProfilerStep#{TRACED_STEP}" in names and not {"ProfilerStep#1", "ProfilerStep#3"} & names
            assert collectives <= names, sorted(n for n in names if n and n.startswith("gloo"))

    traces = sorted(str(p) for p in (run_dir / "trials").glob("*-ring/rank*/trace/rank*.json"))
    res = perfkit("trace", "breakdown", *traces, "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)["rows"]
    assert {(r["rank"], r["step"]) for r in rows} == {(0, TRACED_STEP), (1, TRACED_STEP)}
    for r in rows:
        assert r["compute_ps"] + r["ici_ps"] + r["dma_ps"] + r["idle_ps"] == r["span_ps"]
        assert r["ici_ps"] > 0  # the ring's send / recv
