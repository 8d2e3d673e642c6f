"""Honest timing statistics: per-trial medians, a B/A ratio with a hierarchical bootstrap CI, a
Mann-Whitney U p-value over trial medians, and a verdict against a minimum effect.

Machines are noisy and trials drift, so the unit of evidence is the trial: the bootstrap resamples
trials, then steps within each resampled trial, which keeps between-trial noise in the interval. A run
that reads the verdict after each round and stops once it is known looks more than once, so each look's
interval is held at a stricter level (``look_confidence``), for all of them to hold together at 95%.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Sequence

import numpy as np
from scipy import stats as sps

from perfkit.common.comparison import FEW_TRIALS


# Resamples of ``compare``'s bootstrap: a CI endpoint wanders by its Monte Carlo error from one seed to another,
# which falls as 1/sqrt(resamples); the seed (the case's) keeps a run's figures reproducible.
N_BOOT = 20_000
# Random walks ``look_confidence`` reads its level from: their Monte Carlo error moves the level's z by about 0.005.
WALKS = 1 << 17


@dataclasses.dataclass(frozen=True)
class Comparison:
    """B relative to A: ``ratio`` < 1 means B takes less time per step."""

    metric: str
    ratio: float
    ci: tuple[float, float]  # at ``look_confidence``: with the other looks' intervals, ``confidence``
    p_value: float | None
    verdict: str  # faster | slower | same | unknown (B against A, by the CI and min_effect)
    min_effect: float
    n_a: int
    n_b: int
    n_boot: int  # the bootstrap's resamples (0: none drawn, no CI)
    seed: int    # its random generator's seed
    confidence: float       # what the intervals of all the verdict's looks hold together
    look_confidence: float  # each look's interval's own level (``confidence`` where the verdict is read once)
    looks_at: tuple[int, int] | None  # the trials a side at the verdict's first and last look (None: read once)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["ci"] = list(self.ci)
        d["looks_at"] = self.looks_at and list(self.looks_at)
        return d


def summarize(values: Sequence[float]) -> dict:
    """median, p25, p75 and n of a sample (NaN-free); ``None`` fields for an empty one."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return {"median": None, "p25": None, "p75": None, "n": 0}
    p25, med, p75 = np.percentile(v, [25, 50, 75])
    return {"median": float(med), "p25": float(p25), "p75": float(p75), "n": int(v.size)}


def _resampled_medians(steps: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """n_boot draws of the median of a size-n resample (with replacement) of ``steps`` (shape (n,)),
    drawn exactly from order statistics: O(n log n + n_boot) rather than O(n_boot * n).

    A resample index is floor(s * V), V uniform on (0, 1), s the number of values to pick from; the map is
    monotone, so the resample's k-th smallest value is sorted[floor(s * V_(k))], where V_(k), the k-th
    smallest of n uniforms, is Beta(k, n - k + 1). An even n's median also needs V_(k+1): given V_(k) = v,
    it is the least of the other n - k uniforms, which lie in (v, 1): v + (1 - v) * Beta(1, n - k).
    As in np.median, a NaN step makes a resample's median NaN: a resample holds none with probability
    (s / n) ** n, and is then n uniform picks among the s steps that are not NaN.
    """
    n = steps.size
    values = np.sort(steps[~np.isnan(steps)])
    s = values.size
    if s == 0:
        return np.full(n_boot, np.nan)

    def value_at(v: np.ndarray) -> np.ndarray:
        return values[np.minimum((s * v).astype(np.intp), s - 1)]

    k = (n + 1) // 2  # 1-based rank of the (lower) middle value
    lower = rng.beta(k, n - k + 1, size=n_boot)
    if n % 2:
        meds = value_at(lower)
    else:
        meds = (value_at(lower) + value_at(lower + (1.0 - lower) * rng.beta(1, n - k, size=n_boot))) / 2
    if s < n:
        meds[rng.random(n_boot) >= (s / n) ** n] = np.nan
    return meds


def _bootstrap_medians(trials: list[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """n_boot draws of the median of per-trial medians, resampling trials and then, for each trial picked, its
    steps: a trial picked twice in a draw is resampled twice (the two-stage bootstrap; one resample used for
    both would widen the interval: a newcomer's all-slower trials read as unknown)."""
    k = len(trials)
    picks = rng.integers(0, k, size=(n_boot, k))
    chosen = np.empty((n_boot, k))
    for i, steps in enumerate(trials):
        at = picks == i
        chosen[at] = _resampled_medians(steps, int(at.sum()), rng)
    return np.median(chosen, axis=1)


def hierarchical_means(trials: list[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, P) draws of the mean over trials of each trial's mean step (``trials``: one (steps, P)
    array each), resampling trials and then the steps of each: one set of picks for all P columns.
    ``_bootstrap_medians``' scheme (trials picked with replacement, each pick's steps resampled) for means: the
    attribution's parts must add up in every draw, so every column shares one draw of indices, where medians
    are drawn from order statistics column by column."""
    k = len(trials)
    picks = rng.integers(0, k, size=(n_boot, k))
    times = (picks[:, :, None] == np.arange(k)).sum(axis=1)  # (n_boot, k): how often each trial was drawn
    # a trial drawn c times: c resamples of its n steps, whose step counts summed are one multinomial of c * n
    sums = sum(rng.multinomial(times[:, i] * len(t), np.full(len(t), 1 / len(t))) @ t / len(t)
               for i, t in enumerate(trials))
    return sums / k


def welch_interval(a: np.ndarray, b: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The ``confidence`` interval of mean(b) - mean(a), column by column (``a``: (k_a, P), ``b``: (k_b, P), one
    row per trial, k >= 2 each): Welch's t, its degrees of freedom Welch-Satterthwaite's. With three trials a side
    a bootstrap over trials reads their spread as the whole population's and marks an A/A difference about one
    time in five at 95%, where Welch's t keeps near 5% (tests/trace/test_attribution.py simulates both). Where
    both sides' trials agree exactly the interval is the difference alone."""
    va, vb = a.var(axis=0, ddof=1) / len(a), b.var(axis=0, ddof=1) / len(b)
    se2 = va + vb
    spread = se2 > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(spread, se2**2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)), 1.0)
    half = np.where(spread, sps.t.ppf((1 + confidence) / 2, df) * np.sqrt(se2), 0.0)
    delta = b.mean(axis=0) - a.mean(axis=0)
    return delta - half, delta + half


def _with_trials_spread(ci: tuple[float, float], a: list[np.ndarray], b: list[np.ndarray], confidence: float
                        ) -> tuple[float, float]:
    """``ci`` widened to take in Welch's interval of the ratio of the trials' geometric mean medians (``FEW_TRIALS``
    or more a side): a bootstrap resampling a few trials reaches no further than they do; in simulated A/A runs
    of two trials a side (tests/runner/test_runner_stats.py) it called one in four faster or slower at 95%."""
    lo, hi = welch_interval(np.log([[np.median(t)] for t in a]), np.log([[np.median(t)] for t in b]), confidence)
    if lo[0] == hi[0]:  # trials alike on both sides: no spread to take in (and exp(log) would move the point)
        return ci
    return min(ci[0], float(np.exp(lo[0]))), max(ci[1], float(np.exp(hi[0])))


@functools.lru_cache
def look_confidence(first: int, last: int, confidence: float = 0.95) -> float:
    """The level each look's interval is held at where the verdict is read at ``first``, ``first`` + 1, ...,
    ``last`` trials a side and the rounds stop at the first look that decides it, for the intervals of all the
    looks to hold together with ``confidence`` (repeated confidence intervals: Jennison and Turnbull, Group
    Sequential Methods with Applications to Clinical Trials, ch. 9), at one level for every look (Pocock's): the
    ``confidence`` quantile of the largest |z| over the looks, z a look's mean trial over its standard error, drawn
    as ``WALKS`` random walks of normal steps (seeded: a case gets the same level every time)."""
    if first == last:
        return confidence
    rng = np.random.default_rng(0)
    walk = rng.standard_normal(WALKS) * np.sqrt(first)  # the first look's sum of ``first`` steps
    peak = np.abs(walk) / np.sqrt(first)
    for n in range(first + 1, last + 1):
        walk += rng.standard_normal(WALKS)
        np.maximum(peak, np.abs(walk) / np.sqrt(n), out=peak)
    return float(1 - 2 * sps.norm.sf(np.quantile(peak, confidence)))


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


def median_of_medians(trials: Sequence[Sequence[float]]) -> float:
    """The median of the trials' medians: what ``compare``'s ratio divides (B's over A's)."""
    return float(np.median([np.median(t) for t in trials]))


def compare(
    a_trials: Sequence[Sequence[float]],
    b_trials: Sequence[Sequence[float]],
    *,
    metric: str = "step_ms",
    min_effect: float = 0.02,
    confidence: float = 0.95,
    rounds: tuple[int, int] | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> Comparison:
    """Compare B's per-step times with A's; each argument is one list of step times per trial. The CI is the
    percentile interval of ``n_boot`` two-stage resamples (trials, then steps within each) of the ratio of medians
    of trial medians, drawn from ``numpy.random.default_rng(seed)``, widened to take in Welch's interval of the
    trials (``_with_trials_spread``). ``rounds``: (first, last), the trials a side at which the verdict is read, one
    look a round (None: once); each look's interval is then at ``look_confidence``. Where a side has a single timed
    step in all, the ratio has no CI and no verdict (``common.comparison.NO_SPREAD``)."""
    first, last = rounds or (1, 1)
    level = look_confidence(first, last, confidence)
    a = [np.asarray(t, float) for t in a_trials if len(t)]
    b = [np.asarray(t, float) for t in b_trials if len(t)]

    def result(ratio: float, ci: tuple[float, float], p: float | None, resamples: int) -> Comparison:
        return Comparison(metric, ratio, ci, p, verdict_for(ci, min_effect), min_effect, len(a), len(b), resamples,
                          seed, confidence, level, rounds)

    nan = (float("nan"), float("nan"))
    if not a or not b:
        return result(float("nan"), nan, None, 0)
    med_a, med_b = median_of_medians(a), median_of_medians(b)
    if min(sum(map(len, a)), sum(map(len, b))) < 2:  # one value measures no noise: its interval would have no width
        return result(med_b / med_a, nan, None, 0)
    rng = np.random.default_rng(seed)
    ratios = _bootstrap_medians(b, n_boot, rng) / _bootstrap_medians(a, n_boot, rng)
    alpha = (1.0 - level) / 2
    ci = (float(np.quantile(ratios, alpha)), float(np.quantile(ratios, 1 - alpha)))
    if min(len(a), len(b)) >= FEW_TRIALS:
        ci = _with_trials_spread(ci, a, b, level)
    p = None
    if len(a) >= 2 and len(b) >= 2:
        p = float(sps.mannwhitneyu([np.median(t) for t in a], [np.median(t) for t in b],
                                   alternative="two-sided").pvalue)
    return result(med_b / med_a, ci, p, n_boot)
