"""Step times of a run as tidy frames, and the figures the summary takes from them.

``steps_frame`` turns trial records into one row per reported step; ``variant_timing`` and
``compare_variants`` reduce it to one row per (variant, metric). Metrics: ``step_ms`` (synced steps
after warmup, every one waited for), ``natural_step_ms`` (mean step of a pass dispatched without
waiting, one per trial) and ``first_step_ms`` (step 0: compile and first-touch costs).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from perfkit.analysis import stats
from perfkit.rundata.metrics import is_timed

STEP_COLUMNS = ["trial", "variant", "round", "ok", "kind", "step", "ms", "timed"]
COMPARED = ("step_ms", "natural_step_ms")  # metrics that get a B/A ratio
COMPARISON_COLUMNS = ["variant", *(f.name for f in dataclasses.fields(stats.Comparison))]


def steps_frame(trials: list[dict]) -> pd.DataFrame:
    """One row per step a trial reported. ``kind`` is ``synced`` or ``natural``; ``timed`` marks the
    synced steps after warmup and not profiled, and the natural passes, of trials that finished ok."""
    rows = []
    for t in trials:
        ok = t["status"] == "ok"
        base = (t["index"], t["variant"], t["round"], ok)
        rows += [(*base, "synced", i, ms, is_timed(t, i)) for i, ms in enumerate(t["steps_ms"])]
        rows += [(*base, "natural", i, ms, ok) for i, ms in enumerate(t.get("natural_ms", []))]
    return pd.DataFrame(rows, columns=STEP_COLUMNS)


def metric_rows(steps: pd.DataFrame) -> pd.DataFrame:
    """``steps`` relabelled by metric (variant, trial, metric, ms): the rows each figure is taken over."""
    synced = steps[steps.kind == "synced"]
    parts = [synced[synced.timed].assign(metric="step_ms"),
             steps[(steps.kind == "natural") & steps.timed].assign(metric="natural_step_ms"),
             synced[synced.step == 0].assign(metric="first_step_ms")]
    return pd.concat(parts)[["variant", "trial", "metric", "ms"]]


def variant_timing(steps: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, metric): median, p25, p75 and n of the metric's rows."""
    rows = [{"variant": v, "metric": m, **stats.summarize(g.ms.to_numpy())}
            for (v, m), g in metric_rows(steps).groupby(["variant", "metric"], sort=False)]
    return pd.DataFrame(rows, columns=["variant", "metric", "median", "p25", "p75", "n"])


def per_trial(steps: pd.DataFrame, variant: str, metric: str) -> list[np.ndarray]:
    """The metric's values of each trial of ``variant`` (the unit the bootstrap resamples)."""
    rows = metric_rows(steps)
    mine = rows[(rows.variant == variant) & (rows.metric == metric)]
    return [g.ms.to_numpy() for _, g in mine.groupby("trial")]


def compare_variants(steps: pd.DataFrame, baseline: str, others: list[str], *, min_effect: float,
                     seed: int, rounds: tuple[int, int] | None = None) -> pd.DataFrame:
    """One row per (variant, metric) of ``COMPARED``: the variant against the baseline, as
    ``stats.compare`` (ratio of medians, bootstrap CI at each look's level of ``rounds``, Mann-Whitney p,
    verdict). Metrics that neither side reported are left out."""
    rows = []
    for metric in COMPARED:
        base = per_trial(steps, baseline, metric)
        for v in others:
            mine = per_trial(steps, v, metric)
            if metric != "step_ms" and not (base or mine):
                continue
            c = stats.compare(base, mine, metric=metric, min_effect=min_effect, rounds=rounds, seed=seed).as_dict()
            # No data gives NaN figures: None in summary.json (NaN is not JSON).
            c["ratio"] = c["ratio"] if np.isfinite(c["ratio"]) else None
            c["ci"] = [x if np.isfinite(x) else None for x in c["ci"]]
            rows.append({"variant": v, **c})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS, dtype=object)


def noise_floor(comparisons: pd.DataFrame, aa_variant: str) -> dict | None:
    """The A/A control against the baseline: its ratio and CI, and ``half_width``, how far the CI reaches from 1
    (no change) on its farther side, max(1 - lo, hi - 1): the smallest B/A change this run could tell from noise
    either way. Not half the CI's width: the A/A ratio need not sit at 1."""
    row = comparisons[(comparisons.variant == aa_variant) & (comparisons.metric == "step_ms")]
    if not len(row):
        return None
    r = row.iloc[0]
    lo, hi = r.ci
    half = None if lo is None or hi is None else max(1 - lo, hi - 1)
    return {"variant": aa_variant, "ratio": r.ratio, "ci": [lo, hi], "half_width": half, "verdict": r.verdict}
