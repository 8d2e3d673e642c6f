"""A two-process run whose variant b's ranks dumped only XLA's text before optimizations (a compile stopped before
its passes ended), beside variant a's full dumps: summary.json's rank check said b's trials "wrote no XLA dumps" and
its cost left b out, so the report's Rank consistency and Cost sections said nothing true of b. Both now say what
b's ranks dumped. The dumps are XLA's own (tests/hlo/data/custom_calls, one CPU program)."""

import json
import shutil
from pathlib import Path

from run_fixtures import ab_trials, write_run

from perfkit.run import finish

CUSTOM_CALLS = Path(__file__).resolve().parents[1] / "hlo" / "data" / "custom_calls"


def rendered_run(tmp_path: Path, full: tuple[str, ...] = ("a",)) -> tuple[Path, str]:
    """The run (variants ``full`` with full dumps), rendered, and why b's first trial's rank 0 holds no module perfkit
    reads (written out by hand)."""
    trials = ab_trials()
    run = write_run(tmp_path / "run", trials, case_extra={"processes": 2})
    for t in trials:
        for rank in (0, 1):
            folder = run / t["dir"] / f"rank{rank}" / "xla_dump"
            folder.mkdir(parents=True)
            for path in CUSTOM_CALLS.glob("module_*"):
                if t["variant"] in full or path.name.endswith(".before_optimizations.txt"):
                    shutil.copy(path, folder / path.name)
    finish.render(run)
    first_b = next(t["dir"] for t in trials if t["variant"] == "b")
    return run, (f"{run / first_b / 'rank0' / 'xla_dump'}: no *after_optimizations.txt here, only 1 "
                 "*.before_optimizations.txt: XLA writes a module's text after optimizations once its optimization "
                 "passes finish (the compile was stopped, failed or is still running, or those files were not kept)")


def test_its_cost_says_why_it_is_not_costed(tmp_path):
    run, why = rendered_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["cost"]["b"] == {"dumps": why.split(": ", 1)[0], "error": why}
    assert summary["cost"]["a"]["step"]["module"] == "jit_eigh_and_callback"
    report = (run / "report.md").read_text()
    assert f"- b: its XLA dumps could not be read: {why}" in report[report.index("## Cost"):].splitlines()


def test_no_variant_costed_is_not_read_as_a_chip_without_figures(tmp_path):
    """With no step costed there is nothing to bound: the run's chip (v5e) has figures, so no note says it has not."""
    run, why = rendered_run(tmp_path, full=())
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["env"]["devices"]["kind"], summary["cost"]["b"]["error"], summary["roofline"]) == ("TPU v5 lite",
                                                                                                      why, {})
    assert [n for n in summary["not_verified"] if "roofline" in n] == []
    assert "a: its XLA dumps could not be read: " in (run / "report.md").read_text()


def test_its_rank_check_says_why_it_is_not_checked(tmp_path):
    run, why = rendered_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["ranks"]["b"] == {"consistent": None, "groups": [], "checked": f"not checked: {why}"}
    assert summary["ranks"]["a"]["consistent"] is True  # a's ranks compiled one program: still checked
    assert f"| b | not checked | - | - | not checked: {why} |" in (run / "report.md").read_text().splitlines()
