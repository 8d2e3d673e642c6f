"""This project's own CI gate (`make test` runs it): cases/quickstart.yaml, then `perfkit check` against
the committed reports/baselines/quickstart.json. Quality gates are the defaults (PSNR within 0.5 dB of
the baseline's, repeats bit-identical, one program per rank, no failed trial); the timing gate is loose
(ratio tolerance 1.0: only a B/A ratio whose whole CI lies above twice the baseline's fails), because
2-core CI machines are noisy. Two rounds instead of the case's 3-5 keep it under a minute: the ratio
does not depend on the number of trials, and two repeats still show determinism.

When a change moves the quickstart's numerics on purpose, write the baseline again:
    perfkit run cases/quickstart.yaml --out /tmp/qs
    perfkit check /tmp/qs --baseline reports/baselines/quickstart.json --update-baseline
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BASELINE = REPO / "reports" / "baselines" / "quickstart.json"


def perfkit(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=REPO, timeout=timeout)


@pytest.mark.slow
def test_quickstart_passes_its_baseline(tmp_path):
    run = tmp_path / "quickstart"
    res = perfkit("run", "cases/quickstart.yaml", "--out", run, "--set", "repeats.min=2", "--set", "repeats.max=2",
                  timeout=400)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    check = perfkit("check", run, "--baseline", BASELINE, "--ratio-tolerance", "1.0", "--json", timeout=60)
    rows = json.loads(check.stdout)["rows"]
    failed = [r for r in rows if not r["passed"]]
    assert check.returncode == 0 and not failed, f"{failed}\n(see this file's docstring to update the baseline)"
    assert {r["check"] for r in rows} == {"trials", "timing", "quality", "determinism", "ranks"}

    # Quality is gated tight: PSNR within 0.5 dB of the baseline's (or bit-identical, if it was).
    quality = next(r for r in rows if r["check"] == "quality")
    base = json.loads(BASELINE.read_text())["quality"]
    assert quality["limit"] == (True if base["bit_identical"] else pytest.approx(base["psnr_db"] - 0.5))

    # The gate is live: against a baseline whose B/A ratio is a tenth of this run's, the run fails.
    faster = json.loads(BASELINE.read_text())
    for c in faster["comparisons"]:
        c["ratio"] /= 10
    (tmp_path / "faster.json").write_text(json.dumps(faster))
    check = perfkit("check", run, "--baseline", tmp_path / "faster.json", "--ratio-tolerance", "1.0", timeout=60)
    assert check.returncode == 1 and "FAIL timing" in check.stdout
