"""report.md names the level of the CI its verdict was decided on. A run of the adaptive rounds reads the verdict at
each look at ``look_confidence``, higher than 95% (the demo's 97.39%), and its ratio lines said "95% CI" of that
interval, the next sentence giving each look's level; a run read once keeps its "95% CI"."""

import json
import re

import numpy as np
from run_fixtures import A_STEPS, WARMUP, frames, make_run, outputs_for, shifted  # noqa: F401 (a fixture)
from scipy import stats
from test_check_aa import aa_trials


def _welch(level: float, b_scale: float = 1.2) -> tuple[float, float]:
    """Welch's t interval of the ratio of the fixture's trials' geometric mean medians, worked out here: b's trials
    are a's (``A_STEPS``) scaled by ``b_scale``, so their log medians differ by log(b_scale) with a's spread."""
    a = np.log([np.median(t[WARMUP:]) for t in A_STEPS])
    b = a + np.log(b_scale)
    se = np.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    df = se**4 / ((a.var(ddof=1) / len(a)) ** 2 / (len(a) - 1) + (b.var(ddof=1) / len(b)) ** 2 / (len(b) - 1))
    half = stats.t.ppf((1 + level) / 2, df) * se
    return float(np.exp(b.mean() - a.mean() - half)), float(np.exp(b.mean() - a.mean() + half))


def _ratio_lines(report: str) -> list[str]:
    """The headline and the ratio lines: each B/A ratio with its CI."""
    return [line for line in report.splitlines() if re.search(r"\*\*\d\.\d{3}\*\*, ", line)]


def test_a_rounds_run_s_ratio_lines_name_each_look_s_level(make_run):
    """Rounds from 3 to 5 trials a side: each look's interval at 97.39%. The CI shown takes in Welch's interval of
    the three trials a side at that level (worked out here), wider than Welch's at 95%, which it is not."""
    run = make_run("rounds", case_extra={"repeats": {"min": 3, "max": 5}})
    c = json.loads((run / "summary.json").read_text())["comparisons"][0]
    lo, hi = c["ci"]
    welch_97, welch_95 = _welch(0.97394), _welch(0.95)
    assert lo <= welch_97[0] < welch_95[0] and hi >= welch_97[1] > welch_95[1], (c["ci"], welch_97, welch_95)
    lines = _ratio_lines((run / "report.md").read_text())
    assert len(lines) == 3, lines  # the headline, step_ms, natural_step_ms
    assert all("97.4% CI (3 looks) [" in line and "95%" not in line for line in lines), lines
    assert f"**{c['ratio']:.3f}**, 97.4% CI (3 looks) [{lo:.3f}, {hi:.3f}]" in lines[0], lines[0]
    report = (run / "report.md").read_text()
    assert "The verdict comes from the ratio's CI alone" in report
    assert "each look's interval is at 97.4%: the intervals of all 3 looks hold together at 95%" in report


def test_a_run_read_once_keeps_its_95_percent_ci(make_run):
    run = make_run("once")
    lines = _ratio_lines((run / "report.md").read_text())
    assert len(lines) == 3 and all(", 95% CI [" in line and "looks" not in line for line in lines), lines


def test_a_rounds_run_s_aa_noise_floor_names_its_level(make_run):
    """The A/A control is compared over the same looks: its noise floor's interval is each look's too (the a-aa/a
    ratio line above it says 97.4% CI (3 looks) of the same figures), and the line said "95% CI of A/A"."""
    trials = aa_trials(1.0)
    run = make_run("aa", trials=trials, outputs=outputs_for(trials, frames(), shifted(frames(), 1, 20)),
                   case_extra={"aa": True, "repeats": {"min": 3, "max": 5}})
    summary = json.loads((run / "summary.json").read_text())
    (aa,) = [c for c in summary["comparisons"] if (c["variant"], c["metric"]) == ("a-aa", "step_ms")]
    assert summary["noise_floor"]["ci"] == aa["ci"] and aa["looks_at"] == [3, 5]
    lo, hi = (f"{x - 1:+.1%}" for x in aa["ci"])
    (line,) = [x for x in (run / "report.md").read_text().splitlines() if x.startswith("A/A noise floor (a-aa")]
    assert f": {lo} to {hi} (97.4% CI (3 looks) of A/A)." in line, line
