"""A two-process run whose variant b's ranks dumped only XLA's text before optimizations (a compile stopped before
its passes ended), beside variant a's full dumps: summary.json's rank check said b's trials "wrote no XLA dumps" and
its cost left b out, so the report's Rank consistency and Cost sections said nothing true of b. Both now say what
b's ranks dumped. The dumps are XLA's own (tests/hlo/data/custom_calls, one CPU program)."""

import json
import shutil
from pathlib import Path

import pytest
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
    assert f"- b: its XLA dumps were not costed: {why}" in report[report.index("## Cost"):].splitlines()


def test_no_variant_costed_is_not_read_as_a_chip_without_figures(tmp_path):
    """With no step costed there is nothing to bound: the run's chip (v5e) has figures, so no note says it has not."""
    run, why = rendered_run(tmp_path, full=())
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["env"]["devices"]["kind"], summary["cost"]["b"]["error"], summary["roofline"]) == ("TPU v5 lite",
                                                                                                      why, {})
    assert [n for n in summary["not_verified"] if "roofline" in n] == []
    assert "a: its XLA dumps were not costed: " in (run / "report.md").read_text()


def test_its_rank_check_says_why_it_is_not_checked(tmp_path):
    run, why = rendered_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["ranks"]["b"] == {"consistent": None, "groups": [], "checked": f"not checked: {why}"}
    assert summary["ranks"]["a"]["consistent"] is True  # a's ranks compiled one program: still checked
    assert f"| b | not checked | - | - | not checked: {why} |" in (run / "report.md").read_text().splitlines()


def test_check_fails_the_cost_of_a_variant_dumped_only_before_optimizations(tmp_path):
    """The baseline costed b; this run's b dumped only XLA's text before optimizations, so it has no step figures:
    check's cost row for b fails, giving no figure and saying what b's ranks dumped, while a's rows pass on a's
    unchanged program."""
    from click.testing import CliRunner

    from perfkit.cli import cli

    base, _ = rendered_run(tmp_path / "base", full=("a", "b"))
    baseline = tmp_path / "baseline.json"
    res = CliRunner().invoke(cli, ["check", str(base), "--baseline", str(baseline), "--update-baseline"])
    assert res.exit_code == 0, res.output
    assert set(json.loads(baseline.read_text())["cost"]) == {"a", "b"}
    run, why = rendered_run(tmp_path / "now")
    res = CliRunner().invoke(cli, ["check", str(run), "--baseline", str(baseline), "--json"])
    assert res.exit_code == 1, res.output
    rows = [r for r in json.loads(res.output)["rows"] if r["check"] == "cost"]
    b = [r for r in rows if r["subject"].startswith("b:")]
    assert b == [{"check": "cost", "subject": "b: step cost", "unit": "", "baseline": "costed", "current": None,
                  "ci": None, "limit": None, "passed": False, "inconclusive": False,
                  "note": f"its XLA dumps in this run were not costed: {why}"}]
    assert [r["subject"] for r in rows if not r["passed"]] == ["b: step cost"]


@pytest.mark.filterwarnings("ignore::perfkit.errors.DefinitionNote")  # (b's unfinished step, noted as analysed)
def test_check_gives_no_figure_for_a_step_dumped_only_before_optimizations(tmp_path):
    """b's step program was dumped only before optimizations beside a small program it finished: its cost rows held
    that program's figures against the baseline's step (12 FLOPs against 1024, "-98.83%"), figures of no step. The
    row says the step is not costed, and gives no figure."""
    from click.testing import CliRunner

    from perfkit.cli import cli

    step = ("HloModule jit__euler_step\n\nENTRY main {\n  x = f32[8,16]{1,0} parameter(0)\n"
            "  w = f32[16,4]{1,0} parameter(1)\n"
            "  ROOT d = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
    pad = "HloModule jit__pad\n\nENTRY main {\n  x = f32[12]{0} parameter(0)\n  ROOT a = f32[12]{0} add(x, x)\n}\n"
    runs = {}
    for name, finished in (("base", ("a", "b")), ("now", ("a",))):
        trials = ab_trials()
        run = write_run(tmp_path / name, trials, case_extra={"processes": 2})
        for t in trials:
            for rank in (0, 1):
                folder = run / t["dir"] / f"rank{rank}" / "xla_dump"
                folder.mkdir(parents=True)
                (folder / "module_0002.jit__euler_step.before_optimizations.txt").write_text(step)
                if t["variant"] in finished:
                    (folder / "module_0002.jit__euler_step.cpu_after_optimizations.txt").write_text(step)
                (folder / "module_0004.jit__pad.cpu_after_optimizations.txt").write_text(pad)
        finish.render(run)
        runs[name] = run
    baseline = tmp_path / "baseline.json"
    res = CliRunner().invoke(cli, ["check", str(runs["base"]), "--baseline", str(baseline), "--update-baseline"])
    assert res.exit_code == 0, res.output
    assert json.loads(baseline.read_text())["cost"]["b"]["flops"] == 1024
    res = CliRunner().invoke(cli, ["check", str(runs["now"]), "--baseline", str(baseline), "--json"])
    rows = [r for r in json.loads(res.output)["rows"] if r["check"] == "cost"]
    b = runs["now"] / "trials" / "01-b" / "rank0" / "xla_dump"
    assert [r for r in rows if r["subject"].startswith("b:")] == [{
        "check": "cost", "subject": "b: step cost", "unit": "", "baseline": "costed", "current": None, "ci": None,
        "limit": None, "passed": False, "inconclusive": False,
        "note": f"its XLA dumps in this run were not costed: {b}: the step program jit__euler_step "
                "(module_0002.jit__euler_step) was dumped only before optimizations, so it is not costed: XLA writes "
                "a module's text after optimizations once its optimization passes finish (the compile was stopped, "
                "failed or is still running, or those files were not kept)"}]
    assert (res.exit_code, [r["subject"] for r in rows if not r["passed"]]) == (1, ["b: step cost"])
