"""Statistics and timing frames against hand-computed cases, numpy and scipy."""

import math

import numpy as np
import pandas as pd
import pytest

from perfkit.analysis import stats
from perfkit.analysis import timing


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


def test_two_trials_a_side_take_in_welchs_interval_of_their_medians():
    """A bootstrap that resamples two trials draws each pick from those two: its interval reached no further than
    they did, and simulated A/A runs of two trials a side (trial levels spread 10%, steps 2%) were called faster or
    slower one time in four at 95%. The CI now takes in Welch's interval of the ratio of the trials' geometric mean
    medians (scipy's here), and those runs are called so about as often as a 95% interval allows."""
    from scipy.stats import ttest_ind

    a = [[10, 11, 12], [9, 10, 11]]  # trial medians 11, 10
    b = [[20, 21, 22], [18, 19, 20]]  # 21, 19
    c = stats.compare(a, b)
    welch = ttest_ind(np.log([21, 19]), np.log([11, 10]), equal_var=False).confidence_interval(0.95)
    assert c.ci == pytest.approx((math.exp(welch.low), math.exp(welch.high)), rel=1e-12)  # wider than the bootstrap's
    assert c.verdict == "slower" and c.ratio == 20 / 10.5
    rng = np.random.default_rng(1)
    called = 0
    for seed in range(200):
        a, b = ([10 * np.exp(rng.normal(0, 0.1)) * np.exp(rng.normal(0, 0.02, 10)) for _ in range(2)] for _ in "ab")
        called += stats.compare(a, b, n_boot=2000, seed=seed).verdict in ("faster", "slower")
    assert called <= 10, called  # 5% of 200; 51 before


def test_verdict_rule():
    assert stats.verdict_for((0.90, 0.95), 0.02) == "faster"
    assert stats.verdict_for((1.03, 1.10), 0.02) == "slower"
    assert stats.verdict_for((0.99, 1.01), 0.02) == "same"
    assert stats.verdict_for((0.97, 1.01), 0.02) == "unknown"
    assert stats.verdict_for((float("nan"), 1.0), 0.02) == "unknown"


def test_constant_trials_give_an_exact_ratio_and_a_point_ci():
    c = stats.compare([[10.0] * 5] * 3, [[12.5] * 5] * 3, min_effect=0.02)
    assert c.ratio == 1.25 and c.ci == (1.25, 1.25) and c.verdict == "slower"


def test_one_timed_step_a_side_gives_the_ratio_and_no_ci():
    """One value a side measured no noise: no zero-width CI and confident verdict from it (the same values
    twice over are a point CI, as above: there the noise was measured, and was none)."""
    c = stats.compare([[10.0]], [[17.68]], min_effect=0.02)
    assert c.ratio == 1.768 and all(map(math.isnan, c.ci)) and c.verdict == "unknown" and c.p_value is None
    c = stats.compare([[10.0]], [[17.68, 17.68]], min_effect=0.02)  # one side is enough to have no spread
    assert c.ratio == 1.768 and all(map(math.isnan, c.ci)) and c.verdict == "unknown"
    assert stats.compare([[10.0], [10.0]], [[17.68, 17.68]]).ci == (1.768, 1.768)


def test_ratio_is_of_medians_of_trial_medians_and_p_is_mann_whitney_on_them():
    from scipy.stats import mannwhitneyu

    a = [[10, 11, 50], [9, 10, 10], [10, 12, 13]]  # trial medians 11, 10, 12
    b = [[20, 21, 22], [19, 1, 19], [30, 22, 22]]  # trial medians 21, 19, 22
    c = stats.compare(a, b)
    assert c.ratio == 21 / 11
    assert c.p_value == mannwhitneyu([11, 10, 12], [21, 19, 22], alternative="two-sided").pvalue
    assert c.ci[0] <= c.ratio <= c.ci[1] and (c.n_a, c.n_b) == (3, 3)


def test_between_trial_noise_widens_the_ci():
    """The hierarchical bootstrap keeps trial-to-trial spread: the same steps split into trials whose
    levels differ give a wider interval than trials that agree."""
    rng = np.random.default_rng(2)
    steady = [10 + rng.normal(0, 0.1, 30) for _ in range(4)]
    drifting = [lvl + rng.normal(0, 0.1, 30) for lvl in (9.0, 10.0, 11.0, 10.0)]
    base = [10 + rng.normal(0, 0.1, 30) for _ in range(4)]
    narrow, wide = stats.compare(base, steady), stats.compare(base, drifting)
    assert (wide.ci[1] - wide.ci[0]) > 5 * (narrow.ci[1] - narrow.ci[0])


TRIALS = [  # two variants; a failed trial and warmup steps must not count; natural passes where given
    {"index": 0, "variant": "a", "round": 0, "status": "ok", "warmup": 1, "steps_ms": [90, 10, 12, 11],
     "natural_ms": [9.0]},
    {"index": 1, "variant": "b", "round": 0, "status": "ok", "warmup": 1, "steps_ms": [80, 20, 22, 21],
     "natural_ms": [18.0]},
    {"index": 2, "variant": "b", "round": 1, "status": "hung", "warmup": 1, "steps_ms": [70, 500], "natural_ms": []},
    {"index": 3, "variant": "a", "round": 1, "status": "ok", "warmup": 1, "steps_ms": [95, 14, 13, 15],
     "natural_ms": [11.0]},
]


def test_timing_frames_against_numpy():
    steps = timing.steps_frame(TRIALS)
    assert len(steps) == 4 + 4 + 2 + 4 + 3  # every reported step and natural pass is a row
    table = timing.variant_timing(steps).set_index(["variant", "metric"])
    a_timed = [10, 12, 11, 14, 13, 15]
    assert table.loc[("a", "step_ms"), "median"] == np.median(a_timed)
    assert table.loc[("a", "step_ms"), "p25"] == np.percentile(a_timed, 25)
    assert table.loc[("b", "step_ms"), "n"] == 3  # the hung trial's steps are out
    assert table.loc[("a", "natural_step_ms"), "median"] == 10.0
    assert table.loc[("b", "first_step_ms"), "n"] == 2  # first steps of every trial, failed or not
    rows = timing.compare_variants(steps, "a", ["b"], min_effect=0.02, seed=0).set_index("metric")
    assert rows.loc["step_ms", "ratio"] == 21 / np.median([11, 14])
    assert rows.loc["natural_step_ms", "ratio"] == 18.0 / 10.0


def test_noise_floor_is_the_aa_ci_half_width():
    """Hand-computed: A/A trials 5% slower (or faster) than A, every step alike, give the point CI
    (1.05, 1.05) (or (0.95, 0.95)): a half-width of 0.05. A CI of (0.97, 1.01) is 0.03 on its wider side."""
    for aa_ms in (10.5, 9.5):
        trials = [{"index": i, "variant": v, "round": i // 2, "status": "ok", "warmup": 0,
                   "steps_ms": [10.0 if v == "a" else aa_ms] * 4, "natural_ms": []}
                  for i, v in enumerate(["a", "a-aa", "a-aa", "a"])]
        rows = timing.compare_variants(timing.steps_frame(trials), "a", ["a-aa"], min_effect=0.02, seed=0)
        nf = timing.noise_floor(rows, "a-aa")
        assert nf["variant"] == "a-aa" and nf["ci"] == [aa_ms / 10] * 2
        assert abs(nf["half_width"] - 0.05) < 1e-12
    hand = pd.DataFrame([{"variant": "a-aa", "metric": "step_ms", "ratio": 0.99, "ci": (0.97, 1.01), "verdict": "unknown"}])
    assert abs(timing.noise_floor(hand, "a-aa")["half_width"] - 0.03) < 1e-12
    assert timing.noise_floor(hand, "missing") is None
    steps = timing.steps_frame(TRIALS)
    none = timing.compare_variants(steps, "a", [], min_effect=0.02, seed=0)  # no other variant: no rows
    assert none.empty and timing.noise_floor(none, "a-aa") is None


def test_profiled_steps_are_kept_but_never_timed(tmp_path):
    from perfkit.rundata.metrics import read_metrics
    from perfkit.run.runner import timed_steps

    lines = ['{"event": "step", "ms": 900}', '{"event": "step", "ms": 10}', '{"event": "step", "ms": 500, "traced": true}',
             '{"event": "step", "ms": 12}', '{"event": "step", "ms": 4, "kind": "natural"}']
    (tmp_path / "m.jsonl").write_text("\n".join(lines))
    m = read_metrics(tmp_path / "m.jsonl")
    assert m.steps_ms == [900, 10, 500, 12] and m.traced == [2] and m.natural_ms == [4]
    trial = {"index": 0, "variant": "a", "round": 0, "status": "ok", "warmup": 1, "steps_ms": m.steps_ms,
             "natural_ms": m.natural_ms, "traced": m.traced}
    assert timed_steps(trial) == [10, 12]
    frame = timing.steps_frame([trial])
    assert frame[frame.timed & (frame.kind == "synced")].ms.tolist() == [10, 12]


def test_a_variant_says_how_many_steps_a_trial_ran_under_its_profiler():
    """torch.profiler's warm-up step runs with the profiler on and is marked traced beside the traced step: two steps
    a trial left out of the timing, where the case traces one (a newcomer read "one step a trial")."""
    from perfkit.analysis.summary import variant_summary

    def trial(index, status, traced):
        return {"index": index, "variant": "a", "round": index, "status": status, "warmup": 1,
                "steps_ms": [900.0, 10.0, 50.0, 51.0, 11.0], "natural_ms": [], "traced": traced, "values": {}}

    trials = [trial(0, "ok", [2, 3]), trial(1, "ok", [3]), trial(2, "failed", [1, 2, 3, 4])]
    assert variant_summary(trials, "a")["profiled_steps"] == 2


def _brute_median_draws(steps, n_draws, rng):
    """Plain resampling: the reference the order-statistic draws must match in distribution."""
    steps = np.asarray(steps, float)
    return np.median(steps[rng.integers(0, steps.size, size=(n_draws, steps.size))], axis=1)


def test_resampled_median_draws_match_exact_enumeration_over_all_resamples():
    """Every one of the n**n equally likely resamples of small samples (odd and even n, with ties) gives
    the exact distribution of the resample median; 200k fast draws match it within 5 sigma per value."""
    import itertools

    rng = np.random.default_rng(3)
    for sample in ([5.0], [2.0, 1.0], [3.0, 1.0, 3.0], [3.0, 1.0, 3.0, 2.0, 7.0], [4.0, 4.0, 1.0, 9.0, 2.0, 4.0]):
        x = np.array(sample)
        every = np.array(list(itertools.product(range(x.size), repeat=x.size)))
        support, counts = np.unique(np.median(x[every], axis=1), return_counts=True)
        exact = counts / counts.sum()
        n_draws = 200_000
        draws = stats._resampled_medians(x, n_draws, rng)
        assert set(np.unique(draws)) <= set(support)
        freq = np.array([(draws == v).mean() for v in support])
        sigma = np.sqrt(exact * (1 - exact) / n_draws)
        assert np.all(np.abs(freq - exact) <= 5 * sigma + 1e-12), (sample, freq, exact)


def test_resampled_median_draws_match_brute_force_resampling_on_long_trials():
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(4)
    for n in (40, 41, 400):
        x = np.round(10 + rng.normal(0, 1, n), 1)  # rounded: many ties
        fast, brute = stats._resampled_medians(x, 20_000, rng), _brute_median_draws(x, 20_000, rng)
        assert ks_2samp(fast, brute).pvalue > 1e-3, n
        assert np.abs(np.quantile(fast, [0.05, 0.5, 0.95]) - np.quantile(brute, [0.05, 0.5, 0.95])).max() <= 0.05 + 1e-9


def test_resampled_median_is_nan_as_often_as_np_median_of_a_resample_with_a_nan_step():
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(5)
    x = np.array([1.0, 2.0, np.nan, 4.0, 4.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    fast, brute = stats._resampled_medians(x, 40_000, rng), _brute_median_draws(x, 40_000, rng)
    p_nan = 1 - 0.9 ** 10
    assert abs(np.isnan(fast).mean() - p_nan) < 5 * np.sqrt(p_nan * (1 - p_nan) / 40_000)
    assert abs(np.isnan(brute).mean() - p_nan) < 5 * np.sqrt(p_nan * (1 - p_nan) / 40_000)
    assert ks_2samp(fast[~np.isnan(fast)], brute[~np.isnan(brute)]).pvalue > 1e-3
    assert np.isnan(stats._resampled_medians(np.array([np.nan, np.nan]), 10, rng)).all()


def _two_stage_draws(trials, n_boot, rng):
    """The two-stage bootstrap literally: trials picked with replacement, then each pick's steps resampled."""
    k = len(trials)
    return np.array([np.median([np.median(_brute_median_draws(trials[i], 1, rng)) for i in rng.integers(0, k, k)])
                     for _ in range(n_boot)])


@pytest.mark.parametrize("trials", [
    [np.round(lvl + np.random.default_rng(6).normal(0, 0.5, n), 1) for lvl, n in ((10, 15), (11, 20), (10.5, 9),
                                                                                   (12, 30))],
    # three alike trials: a trial picked twice in a draw is resampled twice. Resampled once and used for both
    # picks, the draws spread wider (sd 1.31 against 0.96): a newcomer's five all-slower trials read as unknown
    [np.arange(1.0, 11.0)] * 3])
def test_hierarchical_bootstrap_matches_plain_two_level_resampling(trials):
    """The median of per-trial medians over resampled trials, against resampling trials and then steps
    literally (trials of unequal, odd and even lengths)."""
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(6)
    brute = _two_stage_draws(trials, 10_000, rng)
    fast = stats._bootstrap_medians(trials, 20_000, rng)
    assert ks_2samp(fast, brute).pvalue > 1e-3
    assert fast.std() == pytest.approx(brute.std(), rel=0.05)


def test_same_seed_same_result_other_seed_other_draws():
    rng = np.random.default_rng(7)
    a = [10 + rng.normal(0, 0.3, 101) for _ in range(5)]
    b = [10.2 + rng.normal(0, 0.3, 100) for _ in range(5)]
    assert stats.compare(a, b, seed=3) == stats.compare(a, b, seed=3)
    assert stats.compare(a, b, seed=3).ci != stats.compare(a, b, seed=4).ci


def test_the_ci_moves_little_with_the_bootstraps_draws():
    """A newcomer's 3 + 3 trials: with 4000 draws, 40 seeds put the CI's upper bound anywhere from 1.915 to 1.997,
    the third decimal shown at the draws' mercy. Over 20 seeds of a run of that shape each bound now spreads under
    0.009 (4000 draws: 0.011 and 0.012; 20000: 0.006 and 0.007)."""
    rng = np.random.default_rng(3)
    a, b = [rng.normal(10, 1, 8) for _ in range(3)], [rng.normal(12, 3, 8) for _ in range(3)]
    cis = np.array([stats.compare(a, b, seed=seed).ci for seed in range(20)])
    assert (cis.max(axis=0) - cis.min(axis=0) < 0.009).all(), cis.max(axis=0) - cis.min(axis=0)


def test_lines_written_after_the_stop_are_left_out_and_their_steps_counted(tmp_path):
    """``until``: lines whose ``t`` is later are not read (a line without ``t`` is, having no time to compare)."""
    from perfkit.rundata.metrics import read_metrics

    lines = ['{"event": "step", "ms": 10, "t": 100.0}', '{"event": "mark", "name": "x", "t": 100.5}',
             '{"event": "step", "ms": 11}', '{"event": "step", "ms": 12, "t": 101.0}',
             '{"event": "step", "ms": 13, "t": 101.5}',
             '{"event": "step", "ms": 2, "kind": "natural", "steps": 3, "t": 102}',
             '{"event": "mark", "name": "late", "t": 102.0}', '{"event": "value", "name": "v", "value": 1, "t": 103}']
    (tmp_path / "m.jsonl").write_text("\n".join(lines))
    m = read_metrics(tmp_path / "m.jsonl", until=101.0)
    # by hand: steps at t 100, (none), 101 are not after 101; 101.5 is, the natural pass is no synced step
    assert (m.steps_ms, m.late_steps, m.last_mark, m.natural_ms, m.values) == ([10, 11, 12], 1, "x", [], {})
    assert read_metrics(tmp_path / "m.jsonl").late_steps == 0


def test_step_events_with_no_finite_time_are_left_out_and_counted(tmp_path):
    """A step's ``ms`` NaN, Infinity, null, a string or missing, synced or natural: no time is invented, each is
    counted; a late one is left out as late, not counted twice."""
    from perfkit.rundata.metrics import read_metrics

    lines = ['{"event": "step", "ms": 10}', '{"event": "step", "ms": NaN, "traced": true}',
             '{"event": "step", "ms": Infinity}', '{"event": "step", "ms": null}', '{"event": "step", "ms": "9"}',
             '{"event": "step"}', '{"event": "step", "ms": 11, "traced": true}',
             '{"event": "step", "ms": NaN, "kind": "natural", "steps": 3}', '{"event": "step", "ms": NaN, "t": 200}']
    (tmp_path / "m.jsonl").write_text("\n".join(lines))
    m = read_metrics(tmp_path / "m.jsonl", until=100.0)
    # by hand: 10 and 11 kept, 11 the second kept step (position 1) and traced; six unreadable, the late one not
    assert (m.steps_ms, m.traced, m.natural_ms, m.unreadable_steps, m.late_steps) == ([10, 11], [1], [], 6, 0)


@pytest.mark.parametrize("looks, pocock", [(2, 2.178), (3, 2.289), (4, 2.361), (5, 2.413)])
def test_each_looks_level_is_pococks(looks, pocock):
    """Looks at 1, 2, ..., K trials (equally spaced) at one level whose intervals hold together at 95%: Pocock's
    constants (Jennison and Turnbull, Group Sequential Methods, Table 2.1, two-sided 0.05). Bonferroni's level,
    0.05 / K a look, is 2.241 at K = 2 and 2.576 at K = 5; 95% at every look, 1.960."""
    from scipy.stats import norm

    assert norm.isf((1 - stats.look_confidence(1, looks)) / 2) == pytest.approx(pocock, abs=0.01)
    assert stats.look_confidence(3, 3) == 0.95  # read once


def test_the_rounds_call_an_aa_change_no_more_often_than_the_interval_allows():
    """Simulated A/A runs (trial levels spread 10%, steps 2%) read as the runner reads them: from 3 trials a side,
    one more a side while the verdict is unknown, up to 8, each look's interval at the level the rounds get. With no
    minimum effect, the verdict's false calls are the intervals' misses: at 95% every look (and a bootstrap alone
    past two trials) 72 of 400 runs were called faster or slower, where a 95% interval allows 20 (5%)."""
    called = 0
    for seed in range(400):
        rng = np.random.default_rng(seed)

        def trials(n):
            return [list(10 * np.exp(rng.normal(0, 0.1) + rng.normal(0, 0.02, 10))) for _ in range(n)]

        a, b = trials(3), trials(3)
        while (verdict := stats.compare(a, b, min_effect=0.0, rounds=(3, 8), n_boot=400, seed=seed).verdict
               ) == "unknown" and len(a) < 8:
            a, b = a + trials(1), b + trials(1)
        called += verdict in ("faster", "slower")
    assert called <= 20 + 9, called  # 5% of 400, and two standard errors of a 5% share (8.7)
