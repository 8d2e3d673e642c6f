"""The serving clause of the summary line and the report's comparison table, from a hand-made summary."""

from serve_testing import serve_case

from perfkit.analysis.summary import not_verified
from perfkit.report.markdown import quality_section
from perfkit.report.serving import _comparisons, headline
from perfkit.rundata.case import validate

RATES = {"a": 12.04, "b": 18.31}  # outputs/min per variant at c=4: 18.31 / 12.04 = 1.5208


def comparison(variant, level, metric, ratio, ci, verdict, medians=(None, None)):
    return {"variant": variant, "level": level, "metric": metric, "baseline_median": medians[0],
            "variant_median": medians[1], "ratio": ratio, "ci_lo": ci and ci[0], "ci_hi": ci and ci[1],
            "verdict": verdict, "n_a": 2, "n_b": 2}


def level(variant, level, per_min):
    return {"variant": variant, "level": level, "processes": 2, "outputs_per_min": per_min}


def summary(comparisons, failed=0):
    return {"baseline": "a", "variants": ["a", "b"],
            "serve": {"concurrency": [1, 4], "failed_count": failed, "comparisons": comparisons,
                      "levels": [level("a", 4, RATES["a"]), level("b", 4, RATES["b"])]}}


def test_headline_names_the_top_level_rates_with_the_decimals_that_divide_to_its_ratio():
    """18.3 / 12.0 would read 1.525 beside the ratio's 1.521: the rates take a second decimal."""
    rows = [comparison("b", 1, "outputs_per_min", 9.0, None, "unknown", (1.0, 9.0)),  # not the top level: left out
            comparison("b", 4, "latency_ms", 0.5, (0.4, 0.6), "faster", (2.0, 1.0)),  # not outputs/min: left out
            comparison("b", 4, "outputs_per_min", 18.31 / 12.04, (1.25, 1.8), "faster", (12.04, 18.31))]
    assert headline(summary(rows, failed=3)) == \
        "; c=4 outputs/min a 12.04, b 18.31, b/a 1.521 [1.250, 1.800] -> faster; 3 failed request(s)"


def test_headline_without_a_ci_gives_the_ratio_alone():
    rows = [comparison("b", 4, "outputs_per_min", 2.0, None, "unknown", (10.0, 20.0))]
    assert headline(summary(rows)) == "; c=4 outputs/min a 12.0, b 18.3, b/a 2.000 -> unknown"


def test_comparison_table_shows_the_medians_each_ratio_divides_and_dashes_where_no_ratio():
    """Latency in seconds: 0.1218 / 0.1500 s divide to 0.812 at 3 decimals (0.122 / 0.150 reads 0.813), so
    they take 4."""
    rows = [comparison("b", 1, "latency_ms", 121.8 / 150.0, (0.75, 0.9), "faster", (150.0, 121.8)),
            comparison("b", 1, "outputs_per_min", None, None, "unknown"),
            comparison("b", 4, "outputs_per_min", 1.1, None, "unknown", (10.0, 11.0))]
    table = _comparisons(summary(rows))
    assert table[0] == ("| variant / a | concurrency | median latency (s): variant / a = ratio [95% CI] | "
                        "outputs/min: variant / a = ratio [95% CI] |")
    assert table[2:] == ["| b | 1 | 0.1218 / 0.1500 = 0.812 [0.750, 0.900] faster | - |",
                         "| b | 4 | - | 11.0 / 10.0 = 1.100 unknown |"]


def unknown_latency_summary(restarts):
    """A serve run whose c=1 latency ratio's CI reaches both sides of the minimum effect."""
    s = summary([comparison("b", 4, "outputs_per_min", 1.5, (1.4, 1.6), "faster", (12.0, 18.0))])
    s["serve"]["server_restarts"] = restarts
    return {**s, "case": "srv", "variants": {"a": {"trial_medians_ms": [100.0, 102.0], "trials": restarts},
                                             "b": {"trial_medians_ms": [101.0, 103.0], "trials": restarts}},
            "comparison": {"ratio": 102.0 / 101.0, "ci": [0.99, 1.05], "verdict": "unknown", "min_effect": 0.02},
            "trials": {"failed": []}, "reproduce": {"command": "perfkit run srv/case.yaml"}}


def test_an_unknown_serve_verdict_says_how_many_server_restarts_to_ask_for():
    """A newcomer's serve/test_server run ended 'unknown (more server restarts would narrow it:
    serve.server_restarts)', naming the key but no value or command, where a model case's says --set repeats.max=N."""
    from perfkit.report.line import summary_line
    from perfkit.report.markdown import _more_trials

    line = summary_line(unknown_latency_summary(2), "srv/report.md")
    assert "-> unknown (more server restarts would narrow it: --set serve.server_restarts=4);" in line
    assert _more_trials(unknown_latency_summary(3)) == (
        "More server restarts would narrow it (this run: 3 server processes a variant), e.g. "
        "`perfkit run srv/case.yaml --set serve.server_restarts=6`.")


def test_headline_names_served_outputs_of_good_servers_that_could_not_be_compared():
    """A server that answers 200 with JSON where a video was expected has no failed request: only the quality
    table said so, and the run's line read as a clean A/B."""
    s = summary([comparison("b", 4, "outputs_per_min", 2.0, None, "unknown", (10.0, 20.0))])
    s["serve"]["quality"] = {"rows": [
        {"prompt": "fox", "variant": "b", "error": "b/fox.mkv: not a readable video"},
        {"prompt": "bird", "variant": "b", "error": "b/bird.mkv: not a readable video"},
        {"prompt": "fox", "variant": "c", "error": "c has no good output of 'fox'"},  # no good server: said elsewhere
        {"prompt": "sea", "variant": "b", "psnr_db": 40.0}]}
    assert headline(s) == ("; c=4 outputs/min a 12.0, b 18.3, b/a 2.000 -> unknown; 2 served output(s) not "
                           "compared (b fox: b/fox.mkv: not a readable video)")


def test_a_serve_run_without_a_compared_output_points_to_its_served_outputs_table():
    """No served output compared: Quality and Not verified named `capture.outputs` and a rank's outputs folder,
    a model case's, where the Serving section's table says why (a newcomer's JSON answers where a video was
    expected)."""
    s = summary([comparison("b", 4, "outputs_per_min", 2.0, None, "unknown")])
    s["serve"]["not_verified"] = []
    assert quality_section({**s, "quality": None}) == [
        "No comparable outputs: the Serving section's table of served outputs says why each was not compared."]
    run = {**s, "quality": None, "ranks": {}, "run_dir": "/nonexistent", "trials": {"total": 2, "failed": []},
           "comparison": {"verdict": "faster", "ratio": 0.5, "ci": [0.4, 0.6]}}
    notes = not_verified(validate(serve_case({"a": {}, "b": {}})), run)
    assert "output quality (no served output of B compared with A's: the Serving section's table of served " \
           "outputs says why)" in notes and not any("capture.outputs" in n for n in notes)


# A serve trial's steps: its lowest level's good latencies (ms), one warmup request first.
SERVED = [{"index": 0, "variant": "serial", "round": 0, "status": "ok", "warmup": 1,
           "steps_ms": [420.0, 182.0, 150.0, 356.0, 175.0, 190.0]},
          {"index": 1, "variant": "batched", "round": 0, "status": "ok", "warmup": 1,
           "steps_ms": [400.0, 110.0, 121.0, 118.0, 115.0, 130.0]}]


def test_a_serve_runs_step_time_plot_and_caption_say_its_boxes_are_request_latencies(tmp_path, monkeypatch):
    """A newcomer's serve run: plots/step_times.png read "timed synced steps per trial" over "step time (ms)",
    and its caption "Step times per trial ... (timed synced steps ...)", where its boxes are the c=1 request
    latencies of each server process (serial trial 0: median 182 ms, max 356 ms, the Serving table's)."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from perfkit.analysis.timing import steps_frame
    from perfkit.report import markdown, plots

    drawn = {}

    def keep(fig, path):  # laid out as save_figure lays it out, not written
        FigureCanvasAgg(fig)
        fig.tight_layout()
        drawn[path.name] = fig
        return path

    monkeypatch.setattr(plots, "save_figure", keep)
    run = {"baseline": "serial", "variants": ["serial", "batched"], "quality": None,
           "serve": {"concurrency": [1, 2, 4]}}
    made = plots.write_plots(tmp_path, run, steps_frame(SERVED))
    ax = drawn["step_times.png"].axes[0]
    assert (ax.get_title(), ax.get_ylabel()) == ("c=1 latencies per server process", "request latency (ms)")
    drawn_title = ax.title.get_window_extent()
    assert 0 <= drawn_title.x0 < drawn_title.x1 <= drawn["step_times.png"].bbox.x1  # not cut at the figure's edge
    dotted = [list(line.get_ydata()) for line in ax.lines if line.get_linestyle() == ":"]  # a variant's medians
    assert dotted == [[np.median(t["steps_ms"][1:])] for t in SERVED]  # 182 ms: serial trial 0's
    caption = ("Request latencies at c=1, one box per server process (trial), in run order (good measured requests; "
               "dotted: each variant's process medians)")
    assert markdown._plots(made, run) == [f"**{caption}**", "", f"![{caption}](plots/step_times.png)"]


def served_quality(*names):
    """A serve run's ``quality`` block: each output the same in both variants (8 frames identical)."""
    same = {"kind": "frames", "frames": 8, "identical_frames": 8, "psnr_db": "inf", "psnr_pooled_db": "inf",
            "psnr_min_db": "inf", "psnr_y_db": "inf", "psnr_yuv_db": "inf", "mean_abs_diff": 0.0,
            "max_abs_diff": 0, "share_over_16": 0.0, "bit_identical": True}
    return {**same, "file": names[0], "space": "rgb", "files": {n: same for n in names}}


def test_every_row_of_a_serve_runs_quality_table_names_its_file():
    """A newcomer's serve run: the Quality table's first row read "batched vs serial" (bird.mkv, named only in
    the line above it) where the rows below read "`city.mkv`: batched vs serial"."""
    run = {"baseline": "serial", "variants": ["serial", "batched"], "serve": {},
           "quality": served_quality("bird.mkv", "city.mkv", "fox.mkv")}
    rows = [line.split(" | ")[0] for line in quality_section(run) if line.startswith("| `")]
    assert rows == ["| `bird.mkv`: batched vs serial", "| `city.mkv`: batched vs serial",
                    "| `fox.mkv`: batched vs serial"]
    # one output alone: the line above names it, its row as before
    alone = quality_section({**run, "quality": served_quality("bird.mkv")})
    assert alone[0].startswith("`bird.mkv`: 8 frames")
    assert [line for line in alone if "vs serial" in line] == [
        "| batched vs serial | identical | inf | inf | inf | inf | 0.000 | 0 | 0.00% | yes |"]


def test_the_per_process_table_gives_every_server_s_ready_time_to_the_millisecond():
    """The readiness times kept (trials.jsonl, to the ms) read 0.493 beside 0.74 for 0.740: a column of seconds
    shows each with the same three decimals."""
    from perfkit.report.serving import _processes

    proc = {"variant": "a", "level": 1, "ok": 8, "sent": 8, "outputs_per_min": 505.4, "trial_status": "ok",
            "latency_p50_ms": 118.0, "latency_p90_ms": 125.0, "latency_max_ms": 132.0}
    s = {"serve": {"servers": [{"trial": 0, "ready_s": 0.74}, {"trial": 1, "ready_s": None}],
                   "processes": [{**proc, "trial": 0}, {**proc, "trial": 1, "trial_status": "crashed"}]}}
    cells = [row.split(" | ")[3] for row in _processes(s)[2:]]
    assert cells == ["0.740", "-"]
