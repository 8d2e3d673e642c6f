"""The serving clause of the summary line and the report's comparison table, from a hand-made summary."""

from perfkit.report.serving import _comparisons, headline


def comparison(variant, level, metric, ratio, ci, verdict):
    return {"variant": variant, "level": level, "metric": metric, "ratio": ratio, "ci_lo": ci and ci[0],
            "ci_hi": ci and ci[1], "verdict": verdict, "n_a": 2, "n_b": 2}


def level(variant, level, per_min):
    return {"variant": variant, "level": level, "processes": 2, "outputs_per_min": per_min}


def summary(comparisons, failed=0):
    return {"baseline": "a", "variants": ["a", "b"],
            "serve": {"concurrency": [1, 4], "failed_count": failed, "comparisons": comparisons,
                      "levels": [level("a", 4, 12.0), level("b", 4, 18.3)]}}


def test_headline_names_the_top_level_rates_and_its_ratio_with_its_ci():
    rows = [comparison("b", 1, "outputs_per_min", 9.0, None, "unknown"),  # not the top level: left out
            comparison("b", 4, "latency_ms", 0.5, (0.4, 0.6), "faster"),  # not outputs/min: left out
            comparison("b", 4, "outputs_per_min", 1.5208, (1.25, 1.8), "faster")]
    assert headline(summary(rows, failed=3)) == \
        "; c=4 outputs/min a 12.0, b 18.3, b/a 1.521 [1.250, 1.800] -> faster; 3 failed request(s)"


def test_headline_without_a_ci_gives_the_ratio_alone():
    rows = [comparison("b", 4, "outputs_per_min", 2.0, None, "unknown")]
    assert headline(summary(rows)) == "; c=4 outputs/min a 12.0, b 18.3, b/a 2.000 -> unknown"


def test_comparison_table_has_a_row_per_variant_and_level_and_dashes_where_no_ratio():
    rows = [comparison("b", 1, "latency_ms", 0.812, (0.75, 0.9), "faster"),
            comparison("b", 1, "outputs_per_min", None, None, "unknown"),
            comparison("b", 4, "outputs_per_min", 1.1, None, "unknown")]
    table = _comparisons(summary(rows))
    assert table[2:] == ["| b | 1 | 0.812 [0.750, 0.900] faster | - |",
                         "| b | 4 | - | 1.100 unknown |"]
