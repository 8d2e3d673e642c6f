"""`perfkit check` of a run with an A/A control (``perfkit run --aa``): where the control, the baseline run again, was
called faster or slower than the baseline itself, no timing verdict of the run is to be trusted (its report.md says
so), and the gate says so too: a failing row of its own, and every timing row inconclusive."""

import json

from click.testing import CliRunner
from run_fixtures import A_STEPS, frames, make_run, outputs_for, shifted, trial  # noqa: F401 (a fixture)

from perfkit.cli import cli


def check(*args, env=None):
    return CliRunner().invoke(cli, ["check", *map(str, args)], env=env)


def aa_trials(aa_scale: float) -> list[dict]:
    """Three rounds of a (``A_STEPS``), b (x 1.2) and the control a-aa (x ``aa_scale``): the A/A ratio is
    ``aa_scale`` by construction."""
    out = []
    for r, steps in enumerate(A_STEPS):
        for i, v in enumerate(("a", "b", "a-aa") if r % 2 == 0 else ("a-aa", "b", "a")):
            scale = {"a": 1.0, "b": 1.2, "a-aa": aa_scale}[v]
            out.append(trial(3 * r + i, v, [s * scale for s in steps], natural=[0.9 * steps[-1] * scale]))
    return out


def aa_run(make_run, name: str, aa_scale: float):
    trials = aa_trials(aa_scale)
    return make_run(name, trials=trials, outputs=outputs_for(trials, frames(), shifted(frames(), 1, 20)),
                    case_extra={"aa": True})


def test_a_run_whose_aa_control_was_called_slower_fails_the_gate_and_trusts_no_timing_row(make_run, tmp_path):
    """The control ran 1.5x the baseline's steps: called slower. Before, the gate passed b/a 1.200 against its
    baseline's 1.200 with nothing said, though the run's report.md said no timing verdict of it was to be trusted.
    The A/A row fails (exit 1), naming the control's ratio, 1.500 (a-aa's steps are a's x 1.5), and its CI as the
    report's Not verified gives it; each timing row keeps its verdict, inconclusive, saying why; the last line and
    the step summary count them with the remedy."""
    base = tmp_path / "base.json"
    assert check(aa_run(make_run, "steady", 1.0), "--baseline", base, "--update-baseline").exit_code == 0
    run = aa_run(make_run, "drifted", 1.5)
    nf = json.loads((run / "summary.json").read_text())["noise_floor"]
    assert nf["verdict"] == "slower"
    lo, hi = (f"{x - 1:+.1%}" for x in nf["ci"])
    step_summary = tmp_path / "step_summary.md"
    res = check(run, "--baseline", base, env={"GITHUB_STEP_SUMMARY": str(step_summary)})
    assert res.exit_code == 1, res.output
    lines = res.output.splitlines()
    (aa,) = [line for line in lines if line.startswith("FAIL")]
    assert aa == (
        "FAIL timing      a-aa/a step_ms, the A/A control: slower (baseline -; required neither faster nor slower); "
        f"the A/A control (a-aa) was called slower than the baseline itself (1.500, A/A {lo}..{hi}): the run's "
        "conditions drifted between trials, or chance made a false call; no timing verdict of this run is to be "
        "trusted: run again, on a quieter machine")
    timing = [line for line in lines if line.startswith("ok   timing")]
    assert len(timing) == 2 and all(line.endswith(
        "; not to be trusted: the run's A/A control was called slower than the baseline itself") for line in timing)
    tail = "2 rows could not tell: the run's A/A control called a change (run again, on a quieter machine)"
    assert lines[-1].startswith("check: FAILED, 1 of ") and lines[-1].endswith(f"; {tail}"), lines[-1]
    text = step_summary.read_text()
    assert f"; **{tail}**" in text.splitlines()[0]
    assert "| **ok, A/A control called a change** | timing | b/a step_ms |" in text
    assert "| **FAIL** | timing | a-aa/a step_ms, the A/A control |" in text
    rows = json.loads(check(run, "--baseline", base, "--json").output)["rows"]
    assert [(r["subject"], r["passed"], r["inconclusive"]) for r in rows if r["check"] == "timing"] == [
        ("a-aa/a step_ms, the A/A control", False, False), ("b/a step_ms", True, True),
        ("b/a natural_step_ms", True, True)]


def test_a_control_that_called_no_change_passes_its_row(make_run, tmp_path):
    """The control ran a's steps again (A/A 1.000): no call either way; its row passes, and the timing rows are as
    without a control."""
    base = tmp_path / "base.json"
    run = aa_run(make_run, "steady", 1.0)
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    nf = json.loads((run / "summary.json").read_text())["noise_floor"]
    lo, hi = (f"{x - 1:+.1%}" for x in nf["ci"])
    res = check(run, "--baseline", base, "--json")
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["rows"]
    (aa,) = [r for r in rows if r["subject"] == "a-aa/a step_ms, the A/A control"]
    assert (aa["passed"], aa["inconclusive"], aa["current"]) == (True, False, nf["verdict"])
    assert aa["note"] == f"A/A 1.000, {lo}..{hi}"
    assert not any(r["inconclusive"] for r in rows)
