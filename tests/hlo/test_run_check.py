"""`perfkit run` on the demonstration case checks every multi-process variant with hlo-diff: the Python
constant variant is reported divergent (rank and instruction named), the runtime array one consistent."""

import json
import subprocess
import sys

from hlo_dumps import PROGRAM, REPO

CASE = REPO / "cases" / "repro" / "rank_constant.yaml"


def test_run_reports_divergent_and_consistent_variants(tmp_path):
    run = tmp_path / "run"
    # The case's `python` is the interpreter perfkit runs in; spelt out here so the test holds either way.
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", str(CASE), "--out", str(run),
                          "--set", f"command=[{sys.executable}, {PROGRAM}, '3']", "--set", "repeats.max=1",
                          "--set", "repeats.min=1"],
                         capture_output=True, text=True, cwd=REPO, timeout=240)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "DIVERGENT programs: constant (rank 3 differs)" in res.stdout
    dumps = list(run.glob("trials/*/rank*/xla_dump/*"))
    assert dumps and not [p for p in dumps if p.suffix in (".ll", ".o")]  # the CPU backend's IR is pruned
    ranks = json.loads((run / "summary.json").read_text())["ranks"]
    a, b = ranks["constant"], ranks["array"]
    assert a["consistent"] is False and a["groups"] == [[0, 1, 2], [3]] and a["divergent_ranks"] == [3]
    assert a["trial"] == "trials/00-constant" and a["checked"].startswith("hlo-diff of trials/00-constant")
    first = a["first_difference"]
    assert first["module"] == "jit_step" and first["ranks"] == [3] and first["rank"]["opcode"] == "slice"
    assert b["consistent"] is True and b["groups"] == [[0, 1, 2, 3]] and b["first_difference"] is None
    report = (run / "report.md").read_text()
    section = report[report.index("## Rank consistency"):]
    assert "| constant | **no** | ranks 0-2 / rank 3 | `jit_step`: rank 3 ``ROOT %slice" in section
    assert "| array | yes | ranks 0-3 |" in section
    assert "### constant: programs per rank" in section and "rank 3 against rank 0" in section
