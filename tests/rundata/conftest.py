"""The demo's run, once a session: the quickstart case with one trial a variant (its traces, XLA dumps and
outputs, so summary.json holds breakdown, attribution, cost and quality)."""

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("demo") / "quickstart"
    done = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", "cases/quickstart.yaml", "--out", str(run),
                           "--set", "repeats.min=1", "--set", "repeats.max=1"],
                          cwd=REPO, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return run
