"""Honest timing statistics: per-trial medians, a B/A ratio with a hierarchical bootstrap CI, a
Mann-Whitney U p-value over trial medians, and a verdict against a minimum effect.

Machines are noisy and trials drift, so the unit of evidence is the trial: the bootstrap resamples
trials, then steps within each resampled trial, which keeps between-trial noise in the interval.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
from scipy import stats as sps

VERDICTS = ("faster", "slower", "same", "unknown")


@dataclasses.dataclass(frozen=True)
class Comparison:
    """B relative to A: ``ratio`` < 1 means B takes less time per step."""

    metric: str
    ratio: float
    ci: tuple[float, float]
    p_value: float | None
    verdict: str
    min_effect: float
    n_a: int
    n_b: int

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ci"] = list(self.ci)
        return d


def summarize(values: Sequence[float]) -> dict:
    """median, p25, p75 and n of a sample (NaN-free); ``None`` fields for an empty one."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"median": None, "p25": None, "p75": None, "n": 0}
    p25, med, p75 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "p25": float(p25), "p75": float(p75), "n": int(v.size)}


def _bootstrap_medians(trials: list[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """n_boot draws of the median of per-trial medians, resampling trials and then steps."""
    k = len(trials)
    picks = rng.integers(0, k, size=(n_boot, k))
    per_trial = np.empty((n_boot, k))
    for t, steps in enumerate(trials):
        # Draws of this trial's median, used wherever the trial was picked.
        idx = rng.integers(0, steps.size, size=(n_boot, steps.size))
        per_trial[:, t] = np.median(steps[idx], axis=1)
    chosen = np.take_along_axis(per_trial, picks, axis=1)
    return np.median(chosen, axis=1)


def verdict_for(ci: tuple[float, float], min_effect: float) -> str:
    lo, hi = ci
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "unknown"
    if hi < 1.0 - min_effect:
        return "faster"
    if lo > 1.0 + min_effect:
        return "slower"
    if lo >= 1.0 - min_effect and hi <= 1.0 + min_effect:
        return "same"
    return "unknown"


def compare(
    a_trials: Sequence[Sequence[float]],
    b_trials: Sequence[Sequence[float]],
    *,
    metric: str = "step_ms",
    min_effect: float = 0.02,
    confidence: float = 0.95,
    n_boot: int = 4000,
    seed: int = 0,
) -> Comparison:
    """Compare B's per-step times with A's; each argument is one list of step times per trial."""
    a = [np.asarray(t, float) for t in a_trials if len(t)]
    b = [np.asarray(t, float) for t in b_trials if len(t)]
    if not a or not b:
        return Comparison(metric, float("nan"), (float("nan"), float("nan")), None, "unknown",
                          min_effect, len(a), len(b))
    med_a = float(np.median([np.median(t) for t in a]))
    med_b = float(np.median([np.median(t) for t in b]))
    rng = np.random.default_rng(seed)
    ratios = _bootstrap_medians(b, n_boot, rng) / _bootstrap_medians(a, n_boot, rng)
    alpha = (1.0 - confidence) / 2
    ci = (float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha)))
    p = None
    if len(a) >= 2 and len(b) >= 2:
        p = float(sps.mannwhitneyu([np.median(t) for t in a], [np.median(t) for t in b],
                                   alternative="two-sided").pvalue)
    return Comparison(metric, med_b / med_a, ci, p, verdict_for(ci, min_effect), min_effect, len(a), len(b))
