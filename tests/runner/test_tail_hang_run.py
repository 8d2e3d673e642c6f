"""`perfkit run` on the planted hang (cases/repro/skipped_collective.yaml): rank 3 compiles its ring step
without the second hop's collective-permute; the trial hangs, and its report and summary name rank 3 and
the instruction its program lacks."""

import json
import sys

import pytest
from runner_testing import REPO, perfkit

CASE = REPO / "cases" / "repro" / "skipped_collective.yaml"


@pytest.mark.slow
def test_the_hung_trial_names_the_rank_and_the_collective(tmp_path):
    run = tmp_path / "run"
    # the profile cut 3 s after it starts and the watchdog at 30 s: the hang costs the test half a minute
    res = perfkit("run", CASE, "--out", run, "--only", "skip",
                  "--set", f"command=[{sys.executable}, {REPO / 'cases/repro/skipped_collective.py'}, '8']",
                  "--set", "timeout=30", "--set", "variants.skip.env.CUT_S='3'", timeout=240)
    assert res.returncode == 3, res.stderr[-3000:]  # a trial hung
    summary = json.loads((run / "summary.json").read_text())
    [(folder, hang)] = summary["hangs"].items()
    assert summary["trials"]["failed"][0]["status"] == "hung" and summary["trials"]["failed"][0]["dir"] == folder
    first = hang["parting"]
    assert [c["rank"] for c in first["majority"]] == [0, 1, 2] and first["step"] == 0
    assert [(p["rank"], p["how"]) for p in first["parted"]] == [(3, "skipped")]
    lacks = first["programs"]["3"]["lacks"]
    assert [(c["opcode"], c["index"]) for c in lacks] == [("collective-permute", 1)]  # the second hop
    assert (first["programs"]["3"]["count"], first["programs"]["3"]["majority_count"]) == (2, 3)
    report = (run / "report.md").read_text()
    assert f"it lacks {lacks[0]['op']} (collective 2 of 3)" in report[report.index("## Failed trials"):]
