"""The attribution of B's change (perfkit.analysis.attribution): hand-built TPU traces whose op durations
are drawn here with numpy, so every expected figure comes from those draws, never from the code under test."""

import gzip
import json
import re
import shutil

import numpy as np
import pytest
import yaml
from click.testing import CliRunner
from noted import LAUNCHLESS, noted
from scipy import stats as sps
from report.run_fixtures import whole_record
from trace_builders import U

from perfkit.analysis import attribution, stats
from perfkit.cli import cli
from perfkit.report.attribution import section
from perfkit.trace import events
from perfkit.trace.synthetic import XSpaceWriter

CHIPS, STEPS = 2, 2
ADDED = "all-reduce.7"  # B's planted collective: COUNT instances a step, each uniform in [3, 5) us
COUNT = 3
COMMON = [f"fusion.{i}" for i in range(1, 9)]  # both sides' compute ops


def trial_trace(path, rng, trial_scale, planted: bool, after_us: int = 0) -> np.ndarray:
    """One trial: CHIPS TPU chips, STEPS steps; per step the COMMON fusions (each ~10 us times the trial's
    scale, with 5% noise) and, ``planted``, COUNT all-reduces, then 2 us idle; ``after_us``: a fusion of that
    long on each chip after its last step, in no step. Returns the planted durations (us) per (chip, step,
    instance)."""
    space = XSpaceWriter("h")
    space.program(5, "jit_m", [(n, "fusion", "f32[8,128]") for n in COMMON] + [(ADDED, "all-reduce", "f32[1024]")])
    planted_us = rng.uniform(3, 5, size=(CHIPS, STEPS, COUNT)) if planted else np.zeros((CHIPS, STEPS, 0))
    for chip in range(CHIPS):
        plane = space.plane(f"/device:TPU:{chip}")
        steps, ops = plane.line("Steps", 0), plane.line("XLA Ops", 0)
        t = 0
        for step in range(STEPS):
            start = t
            for name in COMMON:
                d = int(10 * U * trial_scale * rng.normal(1, 0.05))
                ops.event(plane.op(name, program_id=5, hlo_category="loop fusion"), t, d)
                t += d
            for d in planted_us[chip, step]:
                ops.event(plane.op(ADDED, program_id=5, hlo_category="all-reduce"), t, int(d * U))
                t += int(d * U)
            t += 2 * U
            steps.event(plane.op(str(step)), start, t - start)
        if after_us:
            ops.event(plane.op(COMMON[0], program_id=5, hlo_category="loop fusion"), t + U, after_us * U)
    space.save(path)
    return planted_us


def side(tmp_path, name, trials, rng, planted, trial_sd=0.2):
    """``trials`` trial folders of one side and their parts frame; the planted durations (us) stacked."""
    parts, planted_us = [], []
    for i in range(trials):
        folder = tmp_path / "trials" / f"{name}{i}"
        planted_us.append(trial_trace(folder / "rank0" / "trace" / "h.xplane.pb", rng, rng.normal(1, trial_sd),
                                      planted))
        parts.append(attribution.trials_parts([folder]))
    return attribution.pd.concat(parts, ignore_index=True), np.stack(planted_us)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    rng = np.random.default_rng(7)
    tmp = tmp_path_factory.mktemp("planted")
    a, _ = side(tmp, "a", 4, rng, planted=False)
    b, us = side(tmp, "b", 4, rng, planted=True)
    return a, b, us


def row(frame, key):
    return frame.set_index("key").loc[key]


def test_planted_collectives_named_with_their_cost(planted):
    a, b, us = planted
    # the planted cost per chip and step: the drawn durations' sum per (chip, step), averaged
    drawn_ms = us.sum(axis=3).mean() / 1e3
    for by, key in (("op", ADDED), ("kind", "all-reduce")):
        rows = attribution.attribute(a, b, by)
        r = row(rows, key)
        assert r["change"] == "added" and r["category"] == "ici" and r["marked"]
        assert r["delta_ms"] == pytest.approx(drawn_ms, rel=1e-6)  # the traces' integer ps against the draws
        assert r["ci_lo_ms"] <= COUNT * 4e-3 <= r["ci_hi_ms"]  # covers the expected cost, 3 x 4 us
        assert rows.iloc[0]["key"] == key  # the largest change
    cat = attribution.attribute(a, b, "category")
    assert row(cat, "ici")["delta_ms"] == pytest.approx(drawn_ms, rel=1e-6)
    swapped = attribution.attribute(b, a, "op")
    assert row(swapped, ADDED)["change"] == "removed"
    assert row(swapped, ADDED)["delta_ms"] == pytest.approx(-drawn_ms, rel=1e-6)


@pytest.mark.parametrize("by", attribution.BYS)
def test_parts_add_up_to_the_total(planted, by):
    a, b, _ = planted
    rows = attribution.attribute(a, b, by, top=3)
    total = rows.iloc[-1]
    assert total["key"] == "total"
    assert rows.iloc[:-1]["delta_ms"].sum() == pytest.approx(total["delta_ms"], abs=1e-12)
    # the total against plain spans: each step's span is its ops plus 2 us idle, from the traces' frame
    spans = [p[p["by"] == "span"].groupby("trial")["time_ps"].mean().mean() / 1e9 for p in (a, b)]
    assert total["delta_ms"] == pytest.approx(spans[1] - spans[0], rel=1e-9)
    shown = rows.iloc[:-1]
    assert (shown["delta_ms"].abs().diff().dropna() <= 0).all()  # by |delta|
    if by == "op":  # 3 named of the 9 ops, the other 6 summed: against every op named
        every = attribution.attribute(a, b, by, top=100).set_index("key")["delta_ms"]
        ops = every.drop(["idle", "residual", "total"])
        top = ops.abs().sort_values(ascending=False).index[:3]
        assert set(shown["key"]) == {*top, "other", "idle", "residual"}
        assert row(rows, "other")["delta_ms"] == pytest.approx(ops.drop(top).sum(), abs=1e-12)


def test_other_says_what_it_sums(planted):
    """B gains one op of 1 ps on top of the planted fixture: with 3 of its 10 ops named (the planted
    all-reduce and the two fusions changed most), `other` sums the 6 other fusions, on both sides, and it."""
    a, b, _ = planted
    extra = b[(b["by"] == "op") & (b["key"] == COMMON[0])].assign(key="extra.1", time_ps=1)
    b = attribution.pd.concat([b, extra], ignore_index=True)
    rows = attribution.attribute(a, b, "op", top=3)
    assert rows.attrs["other_keys"] == {"added": 1, "changed": 6}
    assert attribution.attribute(b, a, "op", top=3).attrs["other_keys"] == {"removed": 1, "changed": 6}
    assert attribution.attribute(a, b, "op", top=100).attrs["other_keys"] == {}  # nothing left to sum
    record = attribution._records(rows)
    assert [r.get("other_keys") for r in record if r["key"] == "other"] == [{"added": 1, "changed": 6}]
    assert sum("other_keys" in r for r in record) == 1


def test_aa_marks_no_more_than_chance(tmp_path):
    """Two sides drawn alike, with a trial effect (20% sd) far above the step noise: resampling steps
    without trials first would give intervals too narrow and mark many."""
    rng = np.random.default_rng(11)
    a, _ = side(tmp_path, "a", 6, rng, planted=False)
    b, _ = side(tmp_path, "b", 6, rng, planted=False)
    rows = attribution.attribute(a, b, "op", top=len(COMMON))
    tested = rows[~rows["change"].isin(["residual", "total", "other"])]
    assert len(tested) == len(COMMON) + 1  # each fusion and idle
    assert tested["marked"].sum() <= attribution.chance_allows(len(tested))


def _aa_parts(rng, trials: int, trial_sd: float = 0.2) -> "attribution.pd.DataFrame":
    """A side's parts by hand, no trace: `trials` trials of 2 chips x 4 steps, each step 10 us of compute times
    the trial's own factor (sd `trial_sd`, the trials' spread a machine shows) with 1% step noise, and 2 us idle."""
    rows = []
    for trial in range(trials):
        scale = rng.normal(1, trial_sd)
        for chip in range(2):
            for step in range(4):
                compute = int(10 * U * scale * rng.normal(1, 0.01))
                rows += [(f"t{trial}", 0, chip, step, "span", "span", "", compute + 2 * U),
                         (f"t{trial}", 0, chip, step, "category", "compute", "compute", compute),
                         (f"t{trial}", 0, chip, step, "category", "idle", "idle", 2 * U)]
    return attribution.pd.DataFrame(rows, columns=attribution.PART_COLUMNS)


def test_three_trials_a_side_mark_an_aa_difference_one_time_in_twenty():
    """300 A/A pairs of 3 trials a side, drawn alike: the share whose compute CI excludes 0 is near the nominal 5%
    (binomial 95% range 2.7-7.7%: up to 23 of 300). A bootstrap over the trials marked about 22% here (it reads
    three trials' spread as the population's), as a newcomer's A/A run marked 5 of 19 parts."""
    rng = np.random.default_rng(21)
    marked = 0
    for _ in range(300):
        rows = attribution.attribute(_aa_parts(rng, 3), _aa_parts(rng, 3), "category").set_index("key")
        assert rows.attrs["interval"] == "welch"
        marked += bool(rows.loc["compute", "marked"])
    assert 5 <= marked <= 23, marked


def _op_parts(op_ms: dict[str, list[float]]) -> "attribution.pd.DataFrame":
    """A side's parts by hand: per op, its time in each trial (ms, one chip, one step a trial), the span their sum."""
    rows = []
    for trial in range(len(next(iter(op_ms.values())))):
        times = {op: round(ms[trial] * 1e9) for op, ms in op_ms.items()}
        rows += [(f"t{trial}", 0, 0, 0, "span", "span", "", sum(times.values())),
                 (f"t{trial}", 0, 0, 0, "category", "ici", "ici", sum(times.values()))]
        rows += [(f"t{trial}", 0, 0, 0, "op", op, "ici", t) for op, t in times.items()]
    return attribution.pd.DataFrame(rows, columns=attribution.PART_COLUMNS)


def test_an_op_on_one_side_only_changes_with_that_sign():
    """A newcomer's: tp's all-reduce took 3.187, 2.083 and 7.005 ms in its three trials, sp ran none; Welch's t
    about tp's trials alone (scipy's one-sample t) puts the change at [-10.507, +2.324], beside "removed". The
    interval is cut at 0, both for a removed op and for an added one."""
    tp = [3.187, 2.083, 7.005]
    mean, half = np.mean(tp), sps.t.ppf(0.975, 2) * np.std(tp, ddof=1) / np.sqrt(3)
    assert (round(-mean - half, 3), round(-mean + half, 3)) == (-10.507, 2.324)
    a = _op_parts({"all-reduce": tp, "ppermute": [1.0, 1.0, 1.0]})
    b = _op_parts({"ppermute": [1.0, 1.0, 1.0], "collective-permute": [0.1, 4.0, 2.0]})
    rows = attribution.attribute(a, b, "op").set_index("key")
    assert rows.loc["all-reduce", "change"] == "removed" and rows.loc["collective-permute", "change"] == "added"
    assert rows.loc["all-reduce", ["ci_lo_ms", "ci_hi_ms"]].tolist() == pytest.approx([-mean - half, 0.0])
    assert rows.loc["collective-permute", "ci_lo_ms"] == 0.0 and rows.loc["collective-permute", "ci_hi_ms"] > 4


def test_one_trial_a_side_is_a_bootstrap_over_its_steps():
    """One trial on a side has no spread of trials to measure: the steps are resampled, and the split says so."""
    rng = np.random.default_rng(5)
    rows = attribution.attribute(_aa_parts(rng, 1), _aa_parts(rng, 3), "category")
    assert rows.attrs["interval"] == "steps"
    assert "a bootstrap over trials, then steps (a side of one trial gives its steps' noise alone" in "\n".join(
        section({"baseline": "a", "top": 10, "variants": {"b": {
            "trials": [1, 3], "chip_steps": [8, 24], "confidence": 0.95, "interval": "steps",
            "total": attribution._records(rows.iloc[-1:])[0], "category": attribution._records(rows.iloc[:-1]),
            "kind": [], "op": [], "marked": {"rows": 0, "marked": 0, "chance_allows": 0}}}}))


def test_hierarchical_means_spread():
    """Each draw is the mean of k trials picked with replacement, each pick's steps resampled (as the verdict's
    bootstrap): Var = Var(mean of the picks' means) + E[sum over picks of v_pick] / k^2 = (var of the trial
    means + mean v_i) / k, v_i = var_i / n_i (population variances). (One resample a trial a draw, used for
    each of its picks, gave (var + (2 - 1/k) mean v_i) / k.)"""
    rng = np.random.default_rng(3)
    trials = [rng.normal(m, s, size=(n, 2)) for m, s, n in ((10, 1, 4), (12, 2, 6), (9, 0.5, 3))]
    draws = stats.hierarchical_means(trials, 40000, np.random.default_rng(0))
    means = np.array([t.mean(axis=0) for t in trials])
    within = np.mean([t.var(axis=0) / len(t) for t in trials], axis=0)
    k = len(trials)
    expected = (means.var(axis=0) + within) / k
    assert draws.mean(axis=0) == pytest.approx(means.mean(axis=0), rel=2e-3)
    assert draws.var(axis=0) == pytest.approx(expected, rel=0.04)


def _run_dir(tmp_path, rng, after_us: int = 0):
    """A run directory of a two-variant command case, two good trials a side with traces (``after_us``: b's
    with an op after the last step, ``trial_trace``)."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "case.yaml").write_text(yaml.safe_dump({
        "name": "planted", "command": ["python", "x.py"], "devices": 2, "seed": 0,
        "variants": {"a": {"env": {}}, "b": {"env": {}}}}))
    lines = []
    for i, v in enumerate(["a", "b", "b", "a"]):
        folder = tmp_path / "trials" / f"{i:02d}-{v}"
        trial_trace(folder / "rank0" / "trace" / "h.xplane.pb", rng, 1.0, v == "b", after_us if v == "b" else 0)
        lines.append(json.dumps(whole_record(i, v)))
    (tmp_path / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_trace_attribution_of_a_run_dir(tmp_path):
    run_dir = _run_dir(tmp_path, np.random.default_rng(5))
    result = CliRunner().invoke(cli, ["trace", "attribution", str(run_dir), "--json", "-n", "4"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["attribution"]
    b = doc["variants"]["b"]
    assert doc["baseline"] == "a" and doc["top"] == 4 and b["trials"] == [2, 2] and b["chip_steps"] == [8, 8]
    assert b["op"][0]["key"] == ADDED and b["op"][0]["change"] == "added" and len(b["op"]) == 4 + 3
    text = CliRunner().invoke(cli, ["trace", "attribution", str(run_dir)])
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith(f"### Where b's {b['total']['delta_ms']:+.3f} ms a step goes")
    # the report's Markdown, its tables in columns for a terminal: every row of a table as long as its head
    lines = text.stdout.splitlines()
    full = json.loads(CliRunner().invoke(cli, ["trace", "attribution", str(run_dir), "--json"]).stdout)["attribution"]
    def plain(line: str) -> str:  # (a separator's dashes as many as its column is wide)
        return re.sub(r"-{3,}", "---", " ".join(line.split()))

    assert [plain(line) for line in lines] == [plain(line) for line in section(full, full.get("aa"), False)[1:]]
    assert "prints the same" not in text.stdout  # (the report names the command; the command does not)
    tables = [[line for line in block.splitlines() if line.startswith("|")] for block in text.stdout.split("\n\n")]
    assert sum(1 for t in tables if t) == 3 and all(len({len(row) for row in t}) == 1 for t in tables if t)
    assert any(line.startswith(f"| `{ADDED}` | ici ") and " | added " in line for line in lines)
    # 9 ops (8 fusions and the planted all-reduce), 4 named: the other 5 fusions run on both sides
    assert [r["other_keys"] for r in b["op"] if r["key"] == "other"] == [{"changed": 5}]
    four = CliRunner().invoke(cli, ["trace", "attribution", str(run_dir), "-n", "4"]).stdout.splitlines()
    assert any(plain(line).startswith("| other (5 ops: 5 changed) | - | other ") for line in four)
    frame = attribution.run_attribution(run_dir, top=4)  # the Python API: the same rows as a frame
    ops = frame[(frame["variant"] == "b") & (frame["by"] == "op")]
    assert ops.iloc[0]["delta_ms"] == pytest.approx(b["op"][0]["delta_ms"])
    # trace diff compares two traces: given a run directory alone, it names the command for one (exit 2)
    refused = CliRunner().invoke(cli, ["trace", "diff", str(run_dir)])
    assert refused.exit_code == 2 and refused.output == (
        f"perfkit: {run_dir}: trace diff compares two traces, A and B; a run directory's variants against its "
        "baseline: perfkit trace attribution RUN_DIR\n")
    # and the attribution has no options of two traces' (a newcomer's --by shape had gone unread)
    refused = CliRunner().invoke(cli, ["trace", "attribution", str(run_dir), "--by", "shape"])
    assert refused.exit_code == 2 and "No such option '--by'" in refused.output


def test_ops_after_the_last_step_are_named_not_attributed(tmp_path):
    """b's trials each ran a 7 us fusion on each chip after their last step: in no figure of the attribution
    (its total is the steps' alone either way), and counted beside it: 2 trials x 2 chips, 28 us."""
    plain = attribution.summarize(_run_dir(tmp_path / "plain", np.random.default_rng(5)), _trials(tmp_path / "plain"),
                                  ["a", "b"])["variants"]["b"]
    doc = attribution.summarize(_run_dir(tmp_path / "after", np.random.default_rng(5), after_us=7),
                                _trials(tmp_path / "after"), ["a", "b"])
    b = doc["variants"]["b"]
    assert (b["outside_ops"], b["outside_ms"]) == ([0, 2 * CHIPS], [0, pytest.approx(2 * CHIPS * 7e-3, abs=1e-12)])
    assert (plain["outside_ops"], plain["outside_ms"]) == ([0, 0], [0, 0])
    assert b["total"]["delta_ms"] == pytest.approx(plain["total"]["delta_ms"], abs=1e-12)
    text = "\n".join(section(doc))
    assert ("Not in these figures: device ops outside every traced step's span, a 0 (0.000 ms), b 4 (0.028 ms) over "
            "their trials;") in text
    assert "Not in these figures" not in "\n".join(section({**doc, "variants": {"b": plain}}))
    # a newcomer's: the report's changes differ in the last digit from summary.json's, unsaid
    assert ("each change is the difference of the two figures shown (summary.json and the notebook frames keep them "
            "unrounded)") in text


def _trials(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "trials.jsonl").read_text().splitlines()]


def test_trace_attribution_not_a_run_dir(tmp_path):
    result = CliRunner().invoke(cli, ["trace", "attribution", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0 and "not a run directory" in result.output


def test_trace_attribution_of_a_path_that_is_not_there(tmp_path):
    """A newcomer's typo is named as such, not as a folder that lacks a run's records."""
    result = CliRunner().invoke(cli, ["trace", "attribution", str(tmp_path / "nonexist")])
    assert result.exit_code == 2 and result.output == f"perfkit: {tmp_path / 'nonexist'}: no such file or folder\n"


def test_trace_attribution_of_a_damaged_trace_is_bad_input(tmp_path):
    """A newcomer's: with a trial's xplane.pb cut in half, the command printed the reading's error on stdout as the
    variant's attribution and exited 0 (with --json, in variants.b.error): bad input, one line naming the file on
    stderr and exit 2, nothing on stdout (as perfkit report of that run), whichever side's trace it is."""
    for damaged in ("01-b", "00-a"):
        run_dir = _run_dir(tmp_path / damaged, np.random.default_rng(5))
        trace = run_dir / "trials" / damaged / "rank0" / "trace" / "h.xplane.pb"
        whole = trace.read_bytes()
        trace.write_bytes(whole[: len(whole) // 2])
        for json_flag in ([], ["--json"]):
            result = CliRunner().invoke(cli, ["trace", "attribution", str(run_dir), *json_flag])
            assert (result.exit_code, result.stdout) == (2, ""), (damaged, json_flag, result.output)
            assert result.stderr == (f"perfkit: {trace}: not a complete XSpace protobuf (truncated, damaged, or not "
                                     "an xplane.pb)\n"), (damaged, json_flag)


def test_report_section_marks_and_aa_line():
    r = {"key": "x", "category": "ici", "change": "added", "a_ms": 0.0, "b_ms": 2.0, "delta_ms": 2.0,
         "ci_lo_ms": 1.0, "ci_hi_ms": 3.0, "marked": True}
    quiet = {**r, "key": "y", "change": "changed", "a_ms": 1.0, "b_ms": 1.1, "delta_ms": 0.1, "ci_lo_ms": -0.2,
             "ci_hi_ms": 0.4, "marked": False}
    # the demo's concatenate: its CI excludes 0 below the table's 0.001 ms: its row takes the decimals that show it
    tiny = {**r, "key": "z", "change": "changed", "a_ms": 0.0011, "b_ms": 0.0014, "delta_ms": 0.0003,
            "ci_lo_ms": 0.0002, "ci_hi_ms": 0.0004, "marked": True}
    v = {"trials": [3, 3], "chip_steps": [12, 12], "confidence": 0.95, "total": {**r, "key": "total"},
         "category": [r], "kind": [r, quiet], "op": [r, quiet, tiny],
         "marked": {"rows": 5, "marked": 0, "chance_allows": 1}}
    lines = section({"baseline": "tp", "top": 10, "variants": {"sp": v, "tp-aa": v}}, "tp-aa")
    text = "\n".join(lines)
    assert "### Where sp's +2.000 ms a step goes" in text
    assert "| `x` | ici | added | 0.000 | 2.000 | +2.000 | [+1.000, +3.000] | **\\*** |" in text
    assert "| `y` | ici | changed | 1.000 | 1.100 | +0.100 | [-0.200, +0.400] |  |" in text
    assert "| `z` | ici | changed | 0.0011 | 0.0014 | +0.0003 | [+0.0002, +0.0004] | **\\*** |" in text
    assert text.count("A/A control: 0 of 5 parts have a CI excluding 0 (before rounding; the tables star only those "
                      "whose interval, as printed, still excludes 0); chance allows up to 1") == 1
    assert "not to be trusted" not in text  # the control marked no more than chance allows
    # a newcomer read `ynn_fusion.46` of tp and of sp as one op: the legend says what a name matches
    assert "an op is matched across sides by its name, which is one op only where both ran the same program" in text
    # a control that over-marks (a newcomer's: 5 of 19 where chance allows 3): every other variant's tables say so
    loud = {**v, "marked": {"rows": 19, "marked": 5, "chance_allows": 3}}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"tp-aa": loud, "sp": v, "ulysses": v}},
                              "tp-aa"))
    warning = ("**Marks here are not to be trusted on this machine**: the A/A control (tp-aa against tp, the same "
               "program) had 5 of 19 parts with a CI excluding 0 where chance allows up to 3")
    assert text.count(warning) == 2 and text.index(warning) > text.index("### Where sp's")
    at_limit = {**v, "marked": {"rows": 19, "marked": 3, "chance_allows": 3}}
    # no A/A control: a planted padding's run starred `ynn_fusion.46` alone, 1 of 20 parts where chance marks up to
    # 3, and nothing said how much one star weighs
    chance = ("1 of 20 parts have a CI excluding 0, no more than chance marks where nothing changed (up to 3, the "
              "95% binomial quantile of 20 intervals at 95%): a starred part may be chance; an A/A control (`perfkit "
              "run --aa`) measures this machine's noise.")
    one = {**v, "category": [quiet], "kind": [quiet], "op": [quiet, tiny],
           "marked": {"rows": 20, "marked": 1, "chance_allows": 3}}
    assert "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": one}})).count(chance) == 1
    added = {**one, "op": [r, quiet]}  # the one star an op B alone runs: there whatever its interval
    assert "chance marks" not in "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": added}}))
    many = {**v, "marked": {"rows": 20, "marked": 4, "chance_allows": 3}}
    none = {**v, "marked": {"rows": 20, "marked": 0, "chance_allows": 3}}
    for marks in (many, none):  # more marks than chance gives, or none: nothing to weigh
        assert "chance marks" not in "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": marks}}))
    with_control = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": one, "tp-aa": v}}, "tp-aa"))
    assert "no more than chance marks" not in with_control  # the control's own line says what chance did
    assert "not to be trusted" not in "\n".join(section({"baseline": "tp", "top": 10, "variants": {
        "sp": v, "tp-aa": at_limit}}, "tp-aa"))
    other = {**quiet, "key": "other", "category": "", "change": "other", "other_keys": {"added": 1, "changed": 6}}
    one = {**other, "other_keys": {"removed": 1}}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": {**v, "kind": [one], "op": [other]}}}))
    assert "| other (7 ops: 1 added, 6 changed) | - | other | 1.000 | 1.100 | +0.100 |" in text
    assert "| other (1 kind: 1 removed) | - | other |" in text


def test_each_change_shown_is_the_difference_of_the_figures_beside_it():
    """A newcomer's: tp 9.030 ms, sp 12.995 ms, change +3.964 ms (12.995 - 9.030 = 3.965). Every figure to the
    microsecond, as the CIs beside them, and each change the difference of the two figures shown (within a
    microsecond of B - A), the header and the tables alike; more decimals for exact changes had read 12.114899
    beside a category table's 12.115."""
    total = {"key": "total", "category": "", "change": "", "a_ms": 9.0304, "b_ms": 12.9946,
             "delta_ms": 12.9946 - 9.0304,
             "ci_lo_ms": 3.5, "ci_hi_ms": 4.4, "marked": True}
    plain = {**total, "key": "compute", "a_ms": 5.0, "b_ms": 6.5, "delta_ms": 1.5, "ci_lo_ms": 1.0, "ci_hi_ms": 2.0}
    v = {"trials": [3, 3], "chip_steps": [12, 12], "confidence": 0.95, "interval": "welch", "total": total,
         "category": [{**total, "key": "ici"}, plain], "kind": [plain], "op": [],
         "marked": {"rows": 3, "marked": 2, "chance_allows": 1}}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": v}}))
    assert "### Where sp's +3.965 ms a step goes" in text
    assert "Mean traced device step per chip: tp 9.030 ms, sp 12.995 ms, change +3.965 ms [+3.500, +4.400]" in text
    assert "| ici | 9.030 | 12.995 | +3.965 |" in text and "| compute | 5.000 | 6.500 | +1.500 |" in text
    # a change a hair below 0 shows as -0.000 beside two figures that differ by 0.000
    hair = {**plain, "key": "idle", "a_ms": 1.0000003, "b_ms": 1.0, "delta_ms": 1.0 - 1.0000003}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": {**v, "kind": [plain, hair]}}}))
    assert "| 1.000 | 1.000 | -0.000 |" in text and "| 5.000 | 6.500 | +1.500 |" in text
    # the demo's: categories +9.433, +0.856 and -0.010 sum to +10.279 under a header of +10.281 (36.212 - 25.931):
    # rows of three shown here sum to +0.999 under +1.000, so the split adds up before rounding only, as said
    third = {**plain, "a_ms": 0.0, "b_ms": 1 / 3, "delta_ms": 1 / 3}
    whole = {**total, "a_ms": 0.0, "b_ms": 1.0, "delta_ms": 1.0}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": {**v, "total": whole,
                                                                             "category": [third] * 3}}}))
    assert "### Where sp's +1.000 ms a step goes" in text and text.count("| 0.000 | 0.333 | +0.333 |") == 3
    assert ("Each split adds up to the change before rounding (its rows as shown may sum to a last digit or so "
            "apart)") in text
    # means of a third of a nanosecond (HTA's pair, by category): 91.717 - 47.205 = 44.512 where B - A is 44.5115
    kernels = {**plain, "key": "kernel", "a_ms": 47.2051666667, "b_ms": 91.7166666667, "delta_ms": 44.5115}
    nccl = {**plain, "key": "nccl", "a_ms": 27.2558333333, "b_ms": 41.8901666667,
            "delta_ms": 41.8901666667 - 27.2558333333}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": {**v, "kind": [kernels, nccl]}}}))
    assert "| 47.205 | 91.717 | +44.512 |" in text and "| 27.256 | 41.890 | +14.634 |" in text


def test_ops_of_one_name_in_other_programs_are_said_not_to_be_one_op(fixtures_dir):
    """A newcomer's demo: `ynn_fusion.20 | compute | changed | 0.345 | 0.002` paired tp's reduce_max with sp's
    reduce_sum, which XLA had named alike in their own programs. Whether the variants compiled the same programs
    is their dumps' (as hlo-diff --ab has it), and the by-op table says where they did not."""
    gemm, attention = fixtures_dir / "hlo" / "mi300_jax08_gemm", fixtures_dir / "hlo" / "amd_te_fused_attn"
    assert attribution._same_programs(gemm, gemm) is True
    assert attribution._same_programs(gemm, attention) is False and attribution._same_programs(gemm, None) is None
    row = {"key": "fusion.1", "category": "compute", "change": "changed", "a_ms": 1.0, "b_ms": 2.0, "delta_ms": 1.0,
           "ci_lo_ms": 0.5, "ci_hi_ms": 1.5, "marked": True}
    v = {"trials": [3, 3], "chip_steps": [12, 12], "confidence": 0.95, "interval": "welch", "total": row,
         "category": [row], "kind": [row], "op": [row], "marked": {"rows": 3, "marked": 3, "chance_allows": 1}}
    said = "**tp and sp ran different programs**: XLA names its ops per program, so an op of one name"
    for same, shown in ((False, True), (True, False), (None, False)):
        text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": {**v, "same_programs": same}}}))
        assert (said in text) is shown and (not shown or text.index(said) < text.index("By op:"))


def test_the_category_residual_is_shown_only_where_it_is_not_0():
    """The breakdown's parts add up to the span, so the category split's residual is 0 on both sides; shown, it sat
    beside the op kinds' residual (the busy time the ops' exclusive times leave over), another figure."""
    row = {"key": "ici", "category": "ici", "change": "changed", "a_ms": 1.0, "b_ms": 2.0, "delta_ms": 1.0,
           "ci_lo_ms": 0.5, "ci_hi_ms": 1.5, "marked": True}
    zero = {**row, "key": "residual", "category": "", "change": "residual", "a_ms": 0.0, "b_ms": 0.0,
            "delta_ms": 0.0, "ci_lo_ms": 0.0, "ci_hi_ms": 0.0, "marked": False}
    kinds = [row, {**zero, "a_ms": -0.078, "b_ms": -0.045, "delta_ms": 0.033}]
    v = {"trials": [3, 3], "chip_steps": [12, 12], "confidence": 0.95, "interval": "welch", "total": row,
         "category": [row, zero], "kind": kinds, "op": [row], "marked": {"rows": 3, "marked": 3, "chance_allows": 1}}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": v}}))
    categories = text.split("By category:")[1].split("By op kind:")[0]
    assert "| residual |" not in categories and "| residual | - | residual | -0.078 | -0.045 | +0.033 |" in text
    v["category"] = [row, {**zero, "a_ms": 0.001}]  # (summaries of a breakdown that did not add up: shown)
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": v}}))
    assert "| residual |" in text.split("By category:")[1].split("By op kind:")[0]


# HTA 0.5.0's TraceDiff sums on its own pair (pinned in test_trace_cli.py): name -> (control us, test us)
HTA_TRACE_DIFF_US = {
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": (32880, 92082),
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)": (130655, 159259),
    "Memcpy DtoD (Device -> Device)": (2735, 92932),
    "volta_sgemm_32x128_nt": (0, 15924),
}


def test_op_deltas_equal_hta_trace_diff(fixtures_dir):
    """One trial a side and one span each (``window="trace"``, HTA's kernel time): each kernel's delta is
    HTA TraceDiff's total-duration change, to its whole microseconds; a kernel of the test side only is added."""
    with noted(LAUNCHLESS):  # the test side's kernels queued before its profile started, which HTA drops
        sides = [attribution.chip_step_parts(events.load([fixtures_dir / f"kineto/hta_trace_diff_{s}.json.gz"],
                                                         columns=attribution.diff.EVENT_COLUMNS["op"]),
                                             s, window="trace") for s in ("control", "test")]
    rows = attribution.attribute(*sides, "op", top=500).set_index("key")
    for name, (control_us, test_us) in HTA_TRACE_DIFF_US.items():
        assert rows.loc[name, "delta_ms"] * 1e3 == pytest.approx(test_us - control_us, abs=1.0), name
        # one trial of one span a side: nothing measured their noise, so no CI and no part marked (a newcomer's
        # one-trial run had every part starred in a CI of no width, [+6.120, +6.120])
        assert np.isnan(rows.loc[name, ["ci_lo_ms", "ci_hi_ms"]].astype(float)).all() and not rows.loc[name, "marked"]
    assert rows.loc["volta_sgemm_32x128_nt", "change"] == "added" and rows.attrs["interval"] == "none"


_STEP_A = """HloModule jit_step

ENTRY %main (p: f32[8,16], w: f32[16,16]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  %w = f32[16,16]{1,0} parameter(1)
  %dot.1 = f32[8,16]{1,0} dot(%p, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %dot.2 = f32[8,16]{1,0} dot(%dot.1, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %tanh.3 = f32[8,16]{1,0} tanh(%dot.2)
}
"""
# B: one more matmul first (an f32[8,8] product), and XLA's numbering moved on by it: B's dot.2 is A's dot.1
_STEP_B = """HloModule jit_step

ENTRY %main (p: f32[8,16], w: f32[16,16], v: f32[16,8]) -> f32[8,16] {
  %p = f32[8,16]{1,0} parameter(0)
  %w = f32[16,16]{1,0} parameter(1)
  %v = f32[16,8]{1,0} parameter(2)
  %dot.1 = f32[8,8]{1,0} dot(%p, %v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %dot.2 = f32[8,16]{1,0} dot(%p, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %dot.3 = f32[8,16]{1,0} dot(%dot.2, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT %tanh.4 = f32[8,16]{1,0} tanh(%dot.3)
}
"""


# B: A's program at another sequence length (a padding), its ops numbered apart: every shape differs
_STEP_PADDED = _STEP_A.replace("f32[8,16]", "f32[12,16]").replace("dot.1", "dot.7").replace("dot.2", "dot.8")


def test_ops_whose_shapes_alone_changed_are_matched_to_a_s(tmp_path):
    """A newcomer's Ulysses padding on/off: the padded program ran A's ops at other shapes, and all of B's
    collectives, 239 of its 574 ops, were marked B's own (B adding collectives, read the table). Ops whose shapes
    alone changed take A's names; an op B adds past every op of A's (a dot of A's structure, none of A's left to
    pair it with) stays its own."""
    from perfkit.hlo.fingerprint import entry_names_matched
    from perfkit.hlo.parse import parse_module

    assert entry_names_matched(parse_module(_STEP_A), parse_module(_STEP_PADDED)) == {"dot.7": "dot.1",
                                                                                       "dot.8": "dot.2"}
    added = _STEP_PADDED.replace("  ROOT %tanh.3 = f32[12,16]{1,0} tanh(%dot.8)",
                                 "  %tanh.3 = f32[12,16]{1,0} tanh(%dot.8)\n"
                                 "  ROOT %dot.2 = f32[12,16]{1,0} dot(%tanh.3, %w), lhs_contracting_dims={1}, "
                                 "rhs_contracting_dims={0}")
    assert entry_names_matched(parse_module(_STEP_A), parse_module(added)) == {
        "dot.7": "dot.1", "dot.8": "dot.2", "dot.2": "dot.2 (B's own)"}


def test_ops_of_other_programs_are_matched_by_their_place_and_structure(tmp_path):
    """A newcomer's planted matmul: B's step program numbers its ops on from it, and by name the table had called
    A's first layer's matmul the added one. B's ops take the names A gives the ops they align with; B's own
    dot.1, a name A gives another op, is marked."""
    from perfkit.hlo.fingerprint import entry_names_matched
    from perfkit.hlo.parse import parse_module

    renamed = entry_names_matched(parse_module(_STEP_A), parse_module(_STEP_B))
    assert renamed == {"dot.1": "dot.1 (B's own)", "dot.2": "dot.1", "dot.3": "dot.2", "tanh.4": "tanh.3"}
    for side, text in (("a", _STEP_A), ("b", _STEP_B)):
        folder = tmp_path / side
        folder.mkdir()
        (folder / "module_0001.jit_step.cpu_after_optimizations.txt").write_text(text)
    assert attribution._names_matched(tmp_path / "a", tmp_path / "b", ((), ())) == renamed
    row = {"key": "dot.1 (B's own)", "category": "compute", "change": "added", "a_ms": 0.0, "b_ms": 2.0,
           "delta_ms": 2.0, "ci_lo_ms": 0.5, "ci_hi_ms": 1.5, "marked": True}
    v = {"trials": [3, 3], "chip_steps": [12, 12], "confidence": 0.95, "interval": "welch", "total": row,
         "category": [row], "kind": [row], "op": [row], "marked": {"rows": 3, "marked": 3, "chance_allows": 1},
         "same_programs": False, "ops_renamed": 4}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": v}}))
    assert ("**tp and sp ran different programs**, which XLA numbers apart: an op of sp's step program is named here "
            "as tp's names the op it aligns with, by its place and structure (4 renamed; one of sp's own that tp "
            "gives another op is marked `(sp's own)`)") in text
    assert "| `dot.1 (sp's own)` | compute | added |" in text and "B's own" not in text
    # a newcomer's: the note said how the mark reads where no row of the table carried it (it was summed in other)
    other = {**row, "key": "other", "change": "other", "other_keys": {"added": 1}}
    for rows in ([other], [{**row, "key": "dot.9"}]):
        text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": {**v, "op": rows}}}))
        assert "(4 renamed); ops outside the step program are matched by name" in text
        assert "own" not in text.split("**tp and sp ran different programs**")[1].split("By op:")[0]
    # a newcomer's: where the aligned ops carry A's names already, "B's ops are renamed ... (0 renamed; ...)" read oddly
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": {**v, "ops_renamed": 0}}}))
    assert ("**tp and sp ran different programs**, which XLA numbers apart: the ops of sp's step program that align "
            "with tp's, by their place and structure, carry the same names already (none renamed)") in text
    assert "0 renamed" not in text


def test_one_traced_step_a_side_has_no_ci_and_marks_nothing():
    """A newcomer's one-round run with one traced step: 'change +10.027 ms [+10.027, +10.027]' and every part
    starred, a CI of no width. Without a second step on a side nothing measured its noise: no CI, no mark, said."""
    row = {"key": "ici", "category": "ici", "change": "changed", "a_ms": 1.0, "b_ms": 7.12, "delta_ms": 6.12,
           "ci_lo_ms": None, "ci_hi_ms": None, "marked": False}
    total = {**row, "key": "total", "category": "", "change": "total"}
    v = {"trials": [1, 1], "chip_steps": [4, 4], "confidence": 0.95, "interval": "none", "total": total,
         "category": [row], "kind": [row], "op": [row], "marked": {"rows": 1, "marked": 0, "chance_allows": 1}}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"sp": v}}))
    assert ("change +6.120 ms no CI (a side has one traced step in all, so nothing measured its noise; more trials, "
            "or more steps in `capture.trace`, give it one: 1 and 1 trials, 4 and 4 chip-steps)") in text
    assert "| `ici` | ici | changed | 1.000 | 7.120 | +6.120 | no CI |  |" in text


def test_an_a_a_control_without_a_ci_is_said_untested():
    """A reviewer's: an A/A control of one traced step a side read '0 of 3 parts have a CI excluding 0 ... chance
    allows up to 1', a noise check passed, where no CI was had at all."""
    row = {"key": "ici", "category": "ici", "change": "changed", "a_ms": 1.0, "b_ms": 1.1, "delta_ms": 0.1,
           "ci_lo_ms": None, "ci_hi_ms": None, "marked": False}
    v = {"trials": [1, 1], "chip_steps": [4, 4], "confidence": 0.95, "interval": "none",
         "total": {**row, "key": "total", "category": "", "change": "total"}, "category": [row], "kind": [row],
         "op": [row], "marked": {"rows": 3, "marked": 0, "chance_allows": 1}}
    text = "\n".join(section({"baseline": "tp", "top": 10, "variants": {"tp-aa": v}}, "tp-aa"))
    assert "A/A control: no CI (one traced step on a side), so the machine's noise was not tested." in text
    assert "0 of 3 parts" not in text


def test_gloo_transfers_in_flight_are_said_to_overlap_beside_their_rows(fixtures_dir, tmp_path):
    """A ring over gloo (tests/data/torch_ring) against an all-gather block (tests/data/torch_gloo/plain), two trials
    a side of the same traces: the op-kind table's `gloo send` and `gloo recv` rows, the spans' whole time in flight
    on lines of their own, read as parts of a 29.811 ms step (+30.514 and +29.078 ms, a residual of -42.695 ms) with
    nothing beside them. Each such row is marked, and a line under its table says what the mark means; the figures
    are the spans' durations in the step summed over both ranks' files by hand, over 2 chip-steps."""
    data = fixtures_dir.parent
    (tmp_path / "case.yaml").write_text(yaml.safe_dump({"name": "gloo", "command": ["python", "x.py"], "devices": 2,
                                                        "variants": {"a": {"env": {}}, "b": {"env": {}}}}))
    lines, spans_us = [], {"gloo:send": 0.0, "gloo:recv": 0.0}
    for i, v in enumerate(["a", "b", "b", "a"]):
        for rank in (0, 1):
            source = data / ("torch_gloo/plain" if v == "a" else "torch_ring") / f"rank{rank}.json.gz"
            (tmp_path / "trials" / f"{i:02d}-{v}" / f"rank{rank}" / "trace").mkdir(parents=True)
            shutil.copy(source, tmp_path / "trials" / f"{i:02d}-{v}" / f"rank{rank}" / "trace" / source.name)
        lines.append(json.dumps(whole_record(i, v)))
    (tmp_path / "trials.jsonl").write_text("\n".join(lines) + "\n")
    for rank in (0, 1):
        doc = json.loads(gzip.decompress((data / "torch_ring" / f"rank{rank}.json.gz").read_bytes()))["traceEvents"]
        (step,) = [e for e in doc if e.get("name", "").startswith("ProfilerStep#")]
        for e in doc:
            if e.get("name") in spans_us and step["ts"] <= e["ts"] < step["ts"] + step["dur"]:
                spans_us[e["name"]] += e["dur"] / 2  # (a mean over the 2 chip-steps)
    assert round(spans_us["gloo:send"] / 1000, 6) == 30.514013 and round(spans_us["gloo:recv"] / 1000, 6) == 29.07801
    text = CliRunner().invoke(cli, ["trace", "attribution", str(tmp_path), "-n", "3"]).stdout
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    for kind, op in (("gloo send", "gloo:send"), ("gloo recv", "gloo:recv")):
        ms = f"{spans_us[op] / 1000:.3f}"
        for key in (kind, op):
            assert any(line.startswith(f"| `{key}` † ") and f" {ms} " in line for line in rows), (key, rows)
    assert all(" † " not in line for line in rows if not line.startswith("| `gloo"))
    note = ("†: gloo's transfers in flight (a CPU trace's spans, each on a line of its own beside the thread that "
            "started it): host-side time that overlaps the thread's ops and one another, so it is no part of the "
            "step's sum and may pass the step; the residual takes it back.")
    assert text.count(note) == 2  # under the op-kind and the op tables
    diffed = CliRunner().invoke(cli, ["trace", "diff", str(data / "torch_gloo" / "plain"), str(data / "torch_ring"),
                                      "-n", "3"]).stdout.splitlines()
    assert [line.split()[:3] for line in diffed[3:6]] == [["gloo", "send", "†"], ["gloo", "recv", "†"],
                                                           ["aten::cat", "compute", "0.267"]]
    assert any(line.startswith("†: gloo's transfers in flight") and line.endswith("the ici totals below hold it too")
               for line in diffed)


def _layers_trial(path, rng, programs: tuple[int, int], planted_us: float) -> np.ndarray:
    """One trial of two layers, each its own program named ``jit_f`` (ids ``programs``, in the order they run),
    each with an op ``fusion.1`` (~10 us, the second layer's ``planted_us`` longer), then 2 us idle; CHIPS chips,
    STEPS steps. Returns the durations (us) per (chip, step, layer)."""
    space = XSpaceWriter("h")
    for program in programs:
        space.program(program, "jit_f", [("fusion.1", "fusion", "f32[8,128]")])
    us = rng.uniform(8, 12, size=(CHIPS, STEPS, 2)) + [0, planted_us]
    for chip in range(CHIPS):
        plane = space.plane(f"/device:TPU:{chip}")
        steps, ops = plane.line("Steps", 0), plane.line("XLA Ops", 0)
        t = 0
        for step in range(STEPS):
            start = t
            for layer, program in enumerate(programs):
                d = int(us[chip, step, layer] * U)
                ops.event(plane.op("fusion.1", program_id=program, hlo_category="loop fusion"), t, d)
                t += d
            t += 2 * U
            steps.event(plane.op(str(step)), start, t - start)
    space.save(path)
    return us


def test_ops_of_programs_sharing_a_name_are_told_apart_by_their_place(tmp_path):
    """A newcomer's 8 layers, each jitted as its own `jit_f` with a `ynn_fusion`: the by-op table showed one row
    `ynn_fusion` 0.205 -> 0.282 ms, the 8 ops summed. Here two layers, each a `jit_f` with a `fusion.1`, B's second
    layer 5 us longer and a changed build (its id, a TPU program's fingerprint, other than A's, and below its first
    layer's): a row per layer, named by the order its program starts in the step, A's and B's paired by it; each
    figure the numpy mean (over trials, steps and chips) of the drawn durations."""
    rng = np.random.default_rng(11)
    (tmp_path / "case.yaml").write_text(yaml.safe_dump({
        "name": "layers", "command": ["python", "x.py"], "devices": CHIPS, "seed": 0,
        "variants": {"a": {"env": {}}, "b": {"env": {}}}}))
    lines, drawn = [], {"a": [], "b": []}
    for i, v in enumerate(["a", "b", "b", "a"]):
        folder = tmp_path / "trials" / f"{i:02d}-{v}"
        drawn[v].append(_layers_trial(folder / "rank0" / "trace" / "h.xplane.pb", rng,
                                      (6, 8) if v == "a" else (9, 3), 5.0 if v == "b" else 0.0))
        lines.append(json.dumps(whole_record(i, v)))
    (tmp_path / "trials.jsonl").write_text("\n".join(lines) + "\n")
    doc = attribution.summarize(tmp_path, _trials(tmp_path), ["a", "b"])
    b = doc["variants"]["b"]
    rows = {r["key"]: r for r in b["op"]}
    expected = {v: np.mean([d.mean(axis=(0, 1)) for d in drawn[v]], axis=0) / 1e3 for v in drawn}  # ms per layer
    for layer in range(2):
        r = rows[f"fusion.1 (jit_f #{layer + 1})"]
        assert (r["change"], r["a_ms"], r["b_ms"]) == ("changed", pytest.approx(expected["a"][layer], abs=1e-6),
                                                        pytest.approx(expected["b"][layer], abs=1e-6))
    assert "fusion.1" not in rows and b["programs_placed"] == {"jit_f": [2, 2]}
    text = "\n".join(section(doc))
    said = ("**Several programs of one name** ran in a step (`jit_f`: 2 in a's step, 2 in b's): XLA names ops per "
            "program, so an op is named here with its program's place among them, the order they start in a step "
            "(`(jit_f #2)`: of the second `jit_f` to start)")
    assert said in text and text.index(said) < text.index("By op:")
    assert "| `fusion.1 (jit_f #2)` | compute | changed |" in text
    # trace diff's by-op table keys them alike, and says how
    traces = [events.load([tmp_path / "trials" / t / "rank0" / "trace" / "h.xplane.pb"],
                          columns=attribution.diff.EVENT_COLUMNS["op"]) for t in ("00-a", "01-b")]
    with pytest.warns(attribution.diff.DefinitionNote, match=r"`\(jit_f #2\)` the second `jit_f` to start"):
        table = attribution.diff.diff(*traces, by="op").set_index("key")
    assert sorted(table.index) == ["fusion.1 (jit_f #1)", "fusion.1 (jit_f #2)"]
    assert table.loc["fusion.1 (jit_f #2)", "b_ps"] == pytest.approx(drawn["b"][0][..., 1].mean() * U, abs=1)


def test_one_program_of_a_name_per_chip_is_keyed_by_its_ops_alone(tmp_path):
    """Each chip runs one ``jit_f`` (one op, ``fusion.1``) under an id of its own, as separately compiled processes'
    programs may be numbered: no span ran two programs of that name, so no op is keyed by a program's place."""
    space = XSpaceWriter("h")
    for chip in range(2):
        space.program(40 + chip, "jit_f", [("fusion.1", "fusion", "f32[8,128]")])
    for chip in range(2):
        plane = space.plane(f"/device:TPU:{chip}")
        steps, ops = plane.line("Steps", 0), plane.line("XLA Ops", 0)
        for step in range(2):
            ops.event(plane.op("fusion.1", program_id=40 + chip, hlo_category="loop fusion"), step * 20 * U, 10 * U)
            steps.event(plane.op(str(step)), step * 20 * U, 20 * U)
    space.save(tmp_path / "h.xplane.pb")
    trace = events.load([tmp_path / "h.xplane.pb"], columns=attribution.diff.EVENT_COLUMNS["op"])
    assert sorted(attribution.diff.per_span(trace, by="op")["key"].unique()) == ["fusion.1"]


# the ops of _STEP_A and _STEP_B each trial's trace runs (name, opcode, shape, us): B's dot.2 and dot.3 are A's
# dot.1 and dot.2, B's tanh.4 A's tanh.3; B's own dot.1 (named as A names another op) is added
_RUN_A = [("dot.1", "dot", "f32[8,16]", 10), ("dot.2", "dot", "f32[8,16]", 20), ("tanh.3", "tanh", "f32[8,16]", 5)]
_RUN_B = [("dot.1", "dot", "f32[8,8]", 4), ("dot.2", "dot", "f32[8,16]", 10), ("dot.3", "dot", "f32[8,16]", 26),
          ("tanh.4", "tanh", "f32[8,16]", 5)]


def _programs_run_dir(tmp_path):
    """A two-variant run directory whose variants compiled _STEP_A and _STEP_B (each first trial's dumps) and traced
    their ops (``_RUN_A``, ``_RUN_B``) on 2 chips, 2 steps, 2 trials a side."""
    (tmp_path / "case.yaml").write_text(yaml.safe_dump({
        "name": "programs", "command": ["python", "x.py"], "devices": 2, "seed": 0,
        "variants": {"a": {"env": {}}, "b": {"env": {}}}}))
    lines = []
    for i, v in enumerate(["a", "b", "b", "a"]):
        folder = tmp_path / "trials" / f"{i:02d}-{v}" / "rank0"
        ops = _RUN_A if v == "a" else _RUN_B
        space = XSpaceWriter("h")
        space.program(5, "jit_step", [op[:3] for op in ops])
        for chip in range(CHIPS):
            plane = space.plane(f"/device:TPU:{chip}")
            steps, line = plane.line("Steps", 0), plane.line("XLA Ops", 0)
            t = 0
            for step in range(STEPS):
                start = t
                for name, _, _, us in ops:
                    d = int(us * U * (1 + 0.1 * i + 0.05 * chip + 0.02 * step))
                    line.event(plane.op(name, program_id=5, hlo_category="loop fusion"), t, d)
                    t += d
                steps.event(plane.op(str(step)), start, t - start)
                t += 2 * U
        space.save(folder / "trace" / "h.xplane.pb")
        if i < 2:  # each variant's first trial dumped its programs
            (folder / "xla_dump").mkdir()
            (folder / "xla_dump" / "module_0001.jit_step.cpu_after_optimizations.txt").write_text(
                _STEP_A if v == "a" else _STEP_B)
        lines.append(json.dumps(whole_record(i, v)))
    (tmp_path / "trials.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_the_notebook_frame_names_ops_as_the_summary_does(tmp_path):
    """hunyuan's SP ring, unpadded against padded to 128 rows a shard: summary.json's op rows took A's names for B's
    ops (406 renamed), `analysis.run_attribution` kept B's own, so the frame the report calls the same figures
    unrounded gave other rows (A's ppermute.126 removed, -1.876 ms, where summary.json had it changed, -1.696).
    Here B's dot.2 / dot.3 are A's dot.1 / dot.2, and B's own dot.1 is added (its own mark), in both."""
    run_dir = _programs_run_dir(tmp_path)
    doc = attribution.summarize(run_dir, _trials(run_dir), ["a", "b"])["variants"]["b"]
    assert doc["same_programs"] is False and doc["ops_renamed"] == 4
    frame = attribution.run_attribution(run_dir)
    for by in attribution.BYS:
        rows = frame[(frame["variant"] == "b") & (frame["by"] == by) & (frame["key"] != "total")]
        assert list(rows["key"]) == [r["key"] for r in doc[by]]
        assert list(rows["change"]) == [r["change"] for r in doc[by]]
        np.testing.assert_allclose(rows["delta_ms"], [r["delta_ms"] for r in doc[by]], rtol=0, atol=1e-12)
    # each op's figures, from the durations written above: (1 + 0.1 i + 0.05 chip + 0.02 step) x us, trials 0 and 3
    # of a, 1 and 2 of b; a mean over chips and steps of one trial is (1 + 0.1 i + 0.025 + 0.01) x us
    ops = {r["key"]: r for r in doc["op"]}
    scale = {side: np.mean([1.035 + 0.1 * i for i in trials]) for side, trials in (("a", (0, 3)), ("b", (1, 2)))}
    assert ops["dot.1"]["change"] == "changed" and ops["dot.1"]["a_ms"] == pytest.approx(10e-3 * scale["a"])
    assert ops["dot.1"]["b_ms"] == pytest.approx(10e-3 * scale["b"])  # B's dot.2
    assert ops["dot.2"]["b_ms"] == pytest.approx(26e-3 * scale["b"])  # B's dot.3
    assert ops["dot.1 (B's own)"]["change"] == "added" and ops["dot.1 (B's own)"]["b_ms"] == pytest.approx(
        4e-3 * scale["b"])


def _program(name: str, body: list[str]) -> str:
    return f"HloModule {name}\n\nENTRY main {{\n  x = f32[8,16]{{1,0}} parameter(0)\n" + "".join(
        f"  {line}\n" for line in body) + "}\n"


def test_ops_are_renamed_against_the_step_program_its_cost_takes(tmp_path):
    """The attribution named B's ops as A's step program names them, with the step taken by ``step_cost`` alone:
    not the programs the traced steps ran (the cost's choice), and a step dumped only before optimizations replaced by
    the program with the most FLOPs left (B's init's dot.3 renamed d, A's init's). Both sides now take their step as
    their cost does."""
    from perfkit.analysis.attribution import _names_matched

    def dump(folder, step_names, dot, finished=True):
        folder.mkdir(parents=True)
        init = _program("jit_init", ["w = f32[16,16]{1,0} parameter(1)",
                                     f"ROOT {dot} = f32[8,16]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, "
                                     "rhs_contracting_dims={0}"])
        step = _program("jit_step", [f"{step_names[0]} = f32[8,16]{{1,0}} add(x, x)",
                                     f"ROOT {step_names[1]} = f32[8,16]{{1,0}} multiply({step_names[0]}, x)"])
        (folder / "module_0001.jit_init.cpu_after_optimizations.txt").write_text(init)
        (folder / "module_0002.jit_step.before_optimizations.txt").write_text(step)
        if finished:
            (folder / "module_0002.jit_step.cpu_after_optimizations.txt").write_text(step)
        return folder

    a, b = dump(tmp_path / "a", ("add.1", "multiply.2"), "d"), dump(tmp_path / "b", ("add.7", "multiply.9"), "dot.3")
    traced = (("jit_step",), ("jit_step",))
    # the step the traced steps ran (jit_step), not jit_init, whose dot has the most FLOPs
    assert _names_matched(a, b, traced) == {"add.7": "add.1", "multiply.9": "multiply.2"}
    # B's step dumped only before optimizations: no step program to rename against, not jit_init's
    b = dump(tmp_path / "b2", ("add.7", "multiply.9"), "dot.3", finished=False)
    with pytest.warns(attribution.diff.DefinitionNote, match=r"1 module with no \*after_optimizations\.txt, only "
                      r"\*\.before_optimizations\.txt \(module_0002\.jit_step\), left out"):
        assert _names_matched(a, b, traced) == {}
