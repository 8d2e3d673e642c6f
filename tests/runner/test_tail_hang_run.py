"""`perfkit run` on the planted hang (cases/repro/skipped_collective.yaml): rank 3 compiles its ring step
without the second hop's collective-permute; the trial hangs, and its report and summary name rank 3 and
the instruction its program lacks."""

import json
import re
import sys

import pytest
from runner_testing import REPO, perfkit

CASE = REPO / "cases" / "repro" / "skipped_collective.yaml"


@pytest.mark.slow
def test_the_hung_trial_names_the_rank_and_the_collective(tmp_path):
    run = tmp_path / "run"
    # the profile cut 3 s after it starts and the watchdog at 20 s, which the hang costs the test: the ranks reach
    # the cut well within it, the rest is margin for a loaded machine
    res = perfkit("run", CASE, "--out", run, "--only", "skip",
                  "--set", f"command=[{sys.executable}, {REPO / 'cases/repro/skipped_collective.py'}, '8']",
                  "--set", "timeout=20", "--set", "variants.skip.env.CUT_S='3'", timeout=240)
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


@pytest.mark.slow
def test_a_hop_with_other_pairs_names_the_rank_whose_program_differs(tmp_path):
    """A review's hang: rank 2 runs the second hop with the ring's pairs reversed (SWAP_RANK), same count and shapes.
    The parting called ranks 1-3 the majority's program, comparing collectives by kind and bytes; rank 2's differs
    (its dump's pairs, read here by a regex, are the referee)."""
    run = tmp_path / "run"
    res = perfkit("run", CASE, "--out", run, "--only", "skip",
                  "--set", f"command=[{sys.executable}, {REPO / 'cases/repro/skipped_collective.py'}, '8']",
                  "--set", "timeout=20", "--set", "variants.skip.env.CUT_S='3'",
                  "--set", "variants.skip.env.SKIP_RANK='-1'", "--set", "variants.skip.env.SWAP_RANK='2'", timeout=240)
    assert res.returncode == 3, res.stderr[-3000:]  # a trial hung
    summary = json.loads((run / "summary.json").read_text())
    [(folder, hang)] = summary["hangs"].items()
    pairs = {r: re.findall(r"collective-permute\(.*source_target_pairs=(\{[{}0-9,]*\})", (
        run / folder / f"rank{r}" / "xla_dump" / "module_0000.jit_step.cpu_after_optimizations.txt").read_text())
        for r in range(4)}
    assert pairs[0] == pairs[1] == pairs[3] and len(pairs[2]) == 3 and pairs[2][1] != pairs[0][1]
    assert pairs[2][0] == pairs[0][0] and pairs[2][2] == pairs[0][2]  # the second hop alone differs
    first = hang["parting"]
    change = first["programs"]["2"]
    assert [(c["index"], c["attrs"]) for c in change["lacks"]] == [(1, {"source_target_pairs": pairs[0][1]})]
    assert [(c["index"], c["attrs"]) for c in change["adds"]] == [(1, {"source_target_pairs": pairs[2][1]})]
    assert list(first["programs"]) == ["2"] and 2 not in first.get("majority_program", [])
    report = (run / "report.md").read_text()
    assert f"source_target_pairs={pairs[2][1]}) in place of" in report[report.index("## Failed trials"):]
