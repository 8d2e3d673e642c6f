"""The runner end to end on a tiny command case, and the summary.json contract."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent


def write_case(tmp_path, **over):
    case = {
        "name": "sleepers",
        "command": [sys.executable, str(REPO / "tests/programs/sleeper.py"), "6", "5", "--frames"],
        "warmup": 1, "repeats": {"min": 2, "max": 2}, "timeout": 60,
        "variants": {"a": {"env": {"SLEEP_MS": "5"}}, "b": {"env": {"SLEEP_MS": "5", "FRAME_SEED": "0"}}},
    }
    case.update(over)
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case))
    return path


def perfkit(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=300)


def test_command_case_writes_contract(tmp_path):
    res = perfkit("run", write_case(tmp_path), "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    run = tmp_path / "run"
    for name in ("case.yaml", "env.json", "trials.jsonl", "summary.json", "report.md"):
        assert (run / name).exists(), name
    trials = [json.loads(line) for line in (run / "trials.jsonl").read_text().splitlines()]
    assert [t["variant"] for t in trials] == ["a", "b", "b", "a"]  # abba interleaving
    assert all(len(t["steps_ms"]) == 6 and t["status"] == "ok" for t in trials)
    assert (run / "trials/00-a/rank0/metrics.jsonl").exists()

    s = json.loads((run / "summary.json").read_text())
    assert s["case"] == "sleepers"
    for v in ("a", "b"):
        step = s["variants"][v]["step_ms"]
        assert set(step) >= {"median", "p25", "p75", "n"} and step["n"] == 10
        assert 4.5 < step["median"] < 50  # slept 5 ms per step
    c = s["comparison"]
    assert set(c) >= {"metric", "ratio", "ci", "p_value", "verdict"}
    assert c["verdict"] in ("faster", "slower", "same", "unknown")
    assert c["ci"][0] <= c["ratio"] <= c["ci"][1]
    q = s["quality"]
    assert q["bit_identical"] is True and q["psnr_db"] == "inf" and q["mean_abs_diff"] == 0
    assert s["ranks"]["a"]["consistent"] is True
    assert "report" in res.stdout and "sleepers" in res.stdout


def test_outputs_that_differ_give_finite_psnr(tmp_path):
    case = write_case(tmp_path, variants={"a": {}, "b": {"env": {"FRAME_SEED": "1"}}},
                      repeats={"min": 1, "max": 1})
    res = perfkit("run", case, "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    q = json.loads((tmp_path / "run/summary.json").read_text())["quality"]
    # Two independent uniform uint8 images: MSE = 2 * var(U{0..255}) ~= 10922.5 -> PSNR ~= 7.7 dB.
    assert 6.5 < q["psnr_db"] < 9.0 and q["bit_identical"] is False
