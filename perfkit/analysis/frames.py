"""A run directory as tidy frames, for notebooks and scripts: its trials, its steps, and the B/A
comparisons its summary holds. Each reads what the run wrote (``trials.jsonl``, ``summary.json``) and
nothing else, so it works on any run, finished or interrupted."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from perfkit.analysis import timing
from perfkit.rundata import rundir

TRIAL_COLUMNS = ["trial", "variant", "round", "status", "wall_s", "steps", "median_ms", "dir"]


def trials_frame(run_dir: str | Path) -> pd.DataFrame:
    """One row per finished trial: its index, variant, round, status, wall time, the number of timed
    synced steps and their median (NaN without any), and its folder relative to the run."""
    steps = steps_frame(run_dir)
    timed = steps[(steps.kind == "synced") & steps.timed].groupby("trial").ms
    rows = [(t["index"], t["variant"], t["round"], t["status"], t["wall_s"], t["dir"])
            for t in rundir.read_trials(rundir.run_folder(run_dir))]
    frame = pd.DataFrame(rows, columns=["trial", "variant", "round", "status", "wall_s", "dir"])
    frame["steps"] = frame.trial.map(timed.size()).fillna(0).astype(int)
    frame["median_ms"] = frame.trial.map(timed.median())
    return frame[TRIAL_COLUMNS]


def steps_frame(run_dir: str | Path) -> pd.DataFrame:
    """One row per step a trial reported (``perfkit.analysis.timing.STEP_COLUMNS``)."""
    return timing.steps_frame(rundir.read_trials(rundir.run_folder(run_dir)))


def read_summary(run_dir: str | Path) -> dict:
    """The run's ``summary.json`` as a dict (infinite PSNR as "inf"); refused in one line when the run
    has none yet."""
    return rundir.read_summary(rundir.run_folder(run_dir))


def comparisons_frame(run_dir: str | Path) -> pd.DataFrame:
    """The summary's B/A rows (``summary.json``'s ``comparisons``): variant, metric, ratio, its CI, p,
    verdict; a run not yet summarized is refused in one line (``BadInput``)."""
    rows = read_summary(run_dir)["comparisons"]
    frame = pd.DataFrame(rows, columns=timing.COMPARISON_COLUMNS)
    ci = frame.pop("ci") if "ci" in frame else pd.Series([None] * len(frame))
    frame["ci_lo"] = [c[0] if c else None for c in ci]
    frame["ci_hi"] = [c[1] if c else None for c in ci]
    return frame
