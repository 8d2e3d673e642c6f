"""Serve figures from hand-made request rows, checked against numpy and hand-computed values."""

import json

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ttest_ind

from perfkit.analysis.serving import REQUEST_COLUMNS, level_comparisons, per_process, pooled, requests_frame


def stream(trial, variant, level, latencies_ms, status="ok", failed=(), warmup=1, start=0.0):
    """Requests of one level sent one after another (concurrency 1): ``warmup`` of 50 ms first."""
    rows, t = [], start
    for i, ms in enumerate([50.0] * warmup + list(latencies_ms)):
        phase = "warmup" if i < warmup else "measured"
        ok = (i - warmup) not in failed if phase == "measured" else True
        rows.append({"trial": trial, "variant": variant, "round": trial // 2, "trial_status": status, "level": level,
                     "phase": phase, "index": i, "prompt": f"p{i % 2:02d}", "seed": i % 2, "worker": 0,
                     "start_s": t, "end_s": t + ms / 1e3, "latency_ms": ms, "status": 200 if ok else 500, "ok": ok,
                     "error": None if ok else "HTTP 500: boom", "timed_out": False, "output": None, "sha256": None})
        t += ms / 1e3
    return rows


A0, A2 = [100, 110, 120, 130], [104, 114, 124, 134]
B1, B3 = [50, 55, 60, 65], [52, 57, 62, 67]


@pytest.fixture
def requests():
    rows = (stream(0, "a", 1, A0) + stream(1, "b", 1, B1) + stream(2, "a", 1, A2) + stream(3, "b", 1, B3, failed={3})
            + stream(4, "b", 1, [500, 500], status="crashed"))
    return pd.DataFrame(rows, columns=REQUEST_COLUMNS)


def test_per_process_figures_are_over_measured_requests_with_failed_ones_counted_apart(requests):
    procs = per_process(requests).set_index("trial")
    a0 = procs.loc[0]
    assert (a0.sent, a0.ok, a0.failed) == (4, 4, 0)
    assert a0.latency_p50_ms == pytest.approx(np.percentile(A0, 50)) and a0.latency_max_ms == 130
    assert a0.latency_p90_ms == pytest.approx(np.percentile(A0, 90))
    # Back to back: the span is the sum of the measured latencies (the 50 ms warmup is not in it).
    assert a0.span_s == pytest.approx(sum(A0) / 1e3) and a0.outputs_per_min == pytest.approx(4 / 0.46 * 60)
    b3 = procs.loc[3]  # its last request failed: not a latency, not an output, but part of the span
    assert (b3.sent, b3.ok, b3.failed) == (4, 3, 1) and b3.latency_max_ms == 62
    assert b3.outputs_per_min == pytest.approx(3 / (sum(B3) / 1e3) * 60)
    assert procs.loc[4].trial_status == "crashed"


def test_pooled_rows_use_good_processes_only(requests):
    rows = pooled(requests, per_process(requests)).set_index("variant")
    a, b = rows.loc["a"], rows.loc["b"]
    assert a.processes == 2 and a.latency_p50_ms == pytest.approx(np.percentile(A0 + A2, 50))
    assert a.outputs_per_min == pytest.approx(np.median([4 / (sum(A0) / 1e3) * 60, 4 / (sum(A2) / 1e3) * 60]))
    assert a.outputs_per_min_min == pytest.approx(4 / (sum(A2) / 1e3) * 60)
    # The crashed process (trial 4, 500 ms requests) is left out; b's failed request is counted.
    assert b.processes == 2 and b.latency_max_ms == 65 and b.failed == 1 and b.sent == 8
    assert b.latency_p50_ms == pytest.approx(np.percentile(B1 + B3[:3], 50))


def test_level_ratios_are_of_medians_with_cis_only_where_samples_allow(requests):
    procs = per_process(requests)
    rows = level_comparisons(requests, procs, "a", ["b"], min_effect=0.05, seed=0).set_index("metric")
    lat, out = rows.loc["latency_ms"], rows.loc["outputs_per_min"]
    # Latency: median of per-process medians, B over A (perfkit.analysis.stats.compare's ratio).
    expected = np.median([np.median(B1), np.median(B3[:3])]) / np.median([np.median(A0), np.median(A2)])
    assert lat.ratio == pytest.approx(expected) and lat.ci_lo <= lat.ratio <= lat.ci_hi
    assert lat.verdict == "faster" and (lat.n_a, lat.n_b) == (2, 2)
    good = procs[procs.trial_status == "ok"]
    rate = {v: np.median(good.outputs_per_min[good.variant == v]) for v in ("a", "b")}
    assert out.ratio == pytest.approx(rate["b"] / rate["a"]) and out.ratio > 1.5
    # two processes a side, b's 1043 and 756 outputs/min (its second lost a request): the CI takes in Welch's
    # interval of their log rates (scipy's here), which reaches both sides: no verdict from two so far apart
    welch = ttest_ind(np.log(good.outputs_per_min[good.variant == "b"]),
                      np.log(good.outputs_per_min[good.variant == "a"]), equal_var=False).confidence_interval(0.95)
    assert (out.ci_lo, out.ci_hi) == pytest.approx((np.exp(welch.low), np.exp(welch.high)))
    assert out.verdict == "unknown"
    alike = pd.concat([requests[requests.trial != 3], pd.DataFrame(stream(3, "b", 1, B3), columns=REQUEST_COLUMNS)])
    steady = level_comparisons(alike, per_process(alike), "a", ["b"], min_effect=0.05, seed=0).set_index(
        "metric").loc["outputs_per_min"]
    assert steady.verdict == "faster" and steady.ci_lo > 1.05  # more outputs per minute is faster (1043, 1011 vs 522, 504)
    # the medians each ratio divides
    assert (lat.baseline_median, lat.variant_median) == (np.median([np.median(A0), np.median(A2)]),
                                             np.median([np.median(B1), np.median(B3[:3])]))
    assert (out.baseline_median, out.variant_median) == pytest.approx((rate["a"], rate["b"]))
    # One process a side: a latency CI (over requests) but none for outputs/min.
    one = requests[requests.trial.isin([0, 1])]
    rows = level_comparisons(one, per_process(one), "a", ["b"], min_effect=0.05, seed=0).set_index("metric")
    assert np.isfinite(rows.loc["latency_ms"].ci_lo)
    assert np.isnan(rows.loc["outputs_per_min"].ci_lo) and rows.loc["outputs_per_min"].verdict == "unknown"


def test_requests_frame_reads_each_trials_file_and_skips_a_torn_line(tmp_path, requests):
    trials = []
    for trial, g in requests.groupby("trial"):
        folder = tmp_path / "trials" / f"{trial:02d}" / "rank0"
        folder.mkdir(parents=True)
        lines = [json.dumps({k: v for k, v in r.items() if k not in ("trial", "variant", "round", "trial_status")})
                 for r in g.to_dict("records")]
        (folder / "requests.jsonl").write_text("\n".join(lines) + ("\n" if trial else '\n{"level": 1, "pha'))
        trials.append({"index": int(trial), "variant": g.variant.iloc[0], "round": int(g["round"].iloc[0]),
                       "status": g.trial_status.iloc[0], "dir": f"trials/{trial:02d}",
                       "serve": {"requests": "rank0/requests.jsonl"}})
    trials.append({"index": 9, "variant": "b", "round": 4, "status": "crashed", "dir": "trials/09"})  # no file
    frame = requests_frame(tmp_path, trials)
    assert len(frame) == len(requests) and list(frame.columns) == REQUEST_COLUMNS
    pd.testing.assert_frame_equal(per_process(frame), per_process(requests), check_dtype=False)


def test_the_levels_outputs_per_min_is_the_median_the_comparison_divides(requests):
    """With a third, fast process of a (10 ms requests) the mean over a's processes is far from its median: the
    level's figure (the report's table and summary line) is the median, the one its ratio divides."""
    A6 = [10, 10, 10, 10]
    three = pd.concat([requests, pd.DataFrame(stream(6, "a", 1, A6), columns=REQUEST_COLUMNS)])
    procs = per_process(three)
    rates = [4 / (sum(t) / 1e3) * 60 for t in (A0, A2, A6)]
    level = pooled(three, procs).set_index("variant").loc["a"]
    out = level_comparisons(three, procs, "a", ["b"], min_effect=0.05, seed=0).set_index("metric").loc[
        "outputs_per_min"]
    assert level.outputs_per_min == pytest.approx(np.median(rates)) == pytest.approx(out.baseline_median)
    assert out.ratio == pytest.approx(out.variant_median / out.baseline_median)
