"""Statistics against hand-computed cases."""

import numpy as np

from perfkit import stats


def test_summarize_matches_numpy():
    v = [1.0, 2.0, 3.0, 4.0, 100.0]
    s = stats.summarize(v)
    assert s == {"median": 3.0, "p25": 2.0, "p75": 4.0, "n": 5}
    assert stats.summarize([])["median"] is None


def test_clearly_slower_b_is_slower():
    rng = np.random.default_rng(0)
    a = [10 + rng.normal(0, 0.2, 20) for _ in range(4)]
    b = [13 + rng.normal(0, 0.2, 20) for _ in range(4)]
    c = stats.compare(a, b, min_effect=0.02)
    assert c.verdict == "slower" and abs(c.ratio - 1.3) < 0.02 and c.ci[0] > 1.02


def test_same_distribution_is_same_or_unknown_never_faster_or_slower():
    rng = np.random.default_rng(1)
    for seed in range(20):
        a = [10 + rng.normal(0, 0.3, 20) for _ in range(3)]
        b = [10 + rng.normal(0, 0.3, 20) for _ in range(3)]
        assert stats.compare(a, b, min_effect=0.05, seed=seed).verdict in ("same", "unknown")


def test_verdict_rule():
    assert stats.verdict_for((0.90, 0.95), 0.02) == "faster"
    assert stats.verdict_for((1.03, 1.10), 0.02) == "slower"
    assert stats.verdict_for((0.99, 1.01), 0.02) == "same"
    assert stats.verdict_for((0.97, 1.01), 0.02) == "unknown"
    assert stats.verdict_for((float("nan"), 1.0), 0.02) == "unknown"
