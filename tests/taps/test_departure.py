"""``perfkit.quality.departure`` and ``perfkit quality RUN_DIR``: B's taps against A's on run folders
written through ``perfkit.record.tap``, with hand-computed relative L2 and PSNR, the allowance from the
dtype or from A's repeats, taps without arrays, taps that part in name, and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from report.run_fixtures import whole_record

from perfkit import record
from perfkit.cli import cli
from perfkit.common.json_figures import json_safe
from perfkit.quality import departure
from perfkit.report.check import _taps_rows
from perfkit.report.departure import departure_section
from perfkit.rundata.rundir import read_trials

X = np.array([0.0, 1.0, 2.0, 3.0], np.float32)


@pytest.fixture
def make_run(tmp_path, tap_into):
    """make_run({trial dir name: [(name, array)]}, arrays=True) -> a run folder of variants tp (A),
    sp (B), each trial's rank0 tapped through ``record.tap`` as a rank would."""
    def make(trials: dict[str, list], arrays: bool = True):
        run = tmp_path / "run"
        run.mkdir(exist_ok=True)
        (run / "case.yaml").write_text("name: t\ncommand: [python, x.py]\nvariants:\n  tp: {}\n  sp: {}\n")
        lines = []
        for i, (name, taps) in enumerate(trials.items()):
            rank = run / "trials" / name / "rank0"
            rank.mkdir(parents=True)
            tap_into(rank, arrays)
            for tap_name, value in taps:
                record.tap(tap_name, value, step=0)
            lines.append(json.dumps(whole_record(i, name.split("-")[1], dir=f"trials/{name}")))
        (run / "trials.jsonl").write_text("\n".join(lines) + "\n")
        return run

    return make


def quality(*args):
    return CliRunner().invoke(cli, ["quality", *map(str, args)])


def result_of(run):
    return departure.run_departure(run, read_trials(run), "tp", "sp")


def test_hand_figures_and_the_first_departure(make_run):
    b1 = X.copy()
    b1[3] = 3.5  # d = (0, 0, 0, 0.5)
    run = make_run({"00-tp": [("t0", np.array([3.0, 4.0], np.float32)), ("t1", X), ("t2", X)],
                    "01-sp": [("t0", np.array([3.0, 4.0], np.float32)), ("t1", b1), ("t2", X)]})
    r = result_of(run)
    t0, t1, t2 = r["rows"]
    assert t0["bit_identical"] and t0["rel_l2"] == 0 and t0["psnr_db"] == math.inf and not t0["departs"]
    assert t1["rel_l2"] == pytest.approx(0.5 / math.sqrt(14), rel=1e-12)  # |d| / |A|
    assert t1["psnr_db"] == pytest.approx(20 * math.log10(12), rel=1e-12)  # range 3, MSE 0.0625
    assert t1["allowance"] == pytest.approx(2 ** -11.5) and t1["basis"] == "dtype" and t1["departs"]
    assert r["first"]["name"] == "t1" and r["mismatch"] is None and r["repeats"] == 0
    assert (r["a"]["variant"], r["b"]["variant"], r["a"]["dir"]) == ("tp", "sp", "trials/00-tp/rank0")

    text = "\n".join(departure_section({"taps": json_safe(r)}))
    assert "First departure: **`t1` at step 0** (tap 1): relative L2 0.134 against an allowance of 0.00035" in text
    assert "PSNR 21.58 dB" in text and "derived from the dtype" in text

    res = quality(run, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["first"]["name"] == "t1"
    res = quality(run, "--plot", run / "taps.png")
    assert res.exit_code == 0 and "First departure: t1 at step 0 (tap 1)" in res.output
    assert (run / "taps.png").stat().st_size > 0


def test_the_terminal_gets_plain_text_and_report_md_markdown(make_run):
    """A newcomer's: ``perfkit quality RUN_DIR`` printed report.md's Markdown to the terminal ('**`t1` at step 0**',
    backticked trial folders, a table of pipes). The terminal's is plain text, the table's columns aligned as the
    other commands' tables are; report.md's section keeps its Markdown."""
    b1 = X.copy()
    b1[3] = 3.5
    run = make_run({"00-tp": [("t0", X), ("block_one", X)], "01-sp": [("t0", X), ("block_one", b1)]},
                   arrays=False)
    res = quality(run)
    assert res.exit_code == 0, res.output
    out = res.output
    assert not {"`", "*", "|"} & set(out), out
    assert out.startswith("sp's taps (trial 1, trials/01-sp/rank0) against tp's (trial 0, trials/00-tp/rank0), 2 taps")
    assert ("First difference: block_one at step 0 (tap 1) is not bit-identical; no arrays were kept to measure by "
            "how much (capture.tap_arrays).") in out
    table = out.splitlines()[-3:]
    assert table == [
        "tap  step  name       relative L2  PSNR over tp's range, max - min (dB)  allowance  from   bit-identical  departs",
        "  0     0  t0                   0                                   inf    0.00035  dtype       yes         no",
        "  1     0  block_one            -                                     -    0.00035  dtype       no           ?",
    ], "\n".join(table)
    report = "\n".join(departure_section({"taps": json_safe(result_of(run))}))
    assert "First difference: `block_one` at step 0" in report and "| 1 | 0 | `block_one` | - | - |" in report


def test_the_allowance_measured_from_a_repeats(make_run):
    """A's repeat differs by relative L2 1e-3 at t1: B within 10x that there does not depart, though
    beyond float32's allowance; at t0, where the repeats agree, the dtype's allowance holds."""
    run = make_run({"00-tp": [("t0", X), ("t1", X)], "01-sp": [("t0", X * 1.01), ("t1", X * 1.005)],
                    "02-tp": [("t0", X), ("t1", X * 1.001)]})
    r = result_of(run)
    t0, t1 = r["rows"]
    assert (t0["basis"], t0["departs"]) == ("dtype", True)
    assert t1["repeat_rel_l2"] == pytest.approx(1e-3, rel=1e-4)  # float32 rounding of 1.001
    assert t1["basis"] == "repeats" and t1["allowance"] == pytest.approx(1e-2, rel=1e-4)
    assert t1["rel_l2"] == pytest.approx(5e-3, rel=1e-4) and t1["departs"] is False
    assert r["first"]["name"] == "t0"
    assert "1 take the measured allowance" in "\n".join(departure_section({"taps": json_safe(r)}))


def test_without_arrays_only_identity(make_run):
    run = make_run({"00-tp": [("t0", X), ("t1", X)], "01-sp": [("t0", X), ("t1", X + 1)]}, arrays=False)
    r = result_of(run)
    assert r["rows"][1]["departs"] is None and math.isnan(r["rows"][1]["rel_l2"])
    assert r["first"]["name"] == "t1" and not r["arrays"]
    assert "is not bit-identical; no arrays were kept" in quality(run).output


def test_taps_that_part_in_name_are_compared_up_to_there(make_run):
    run = make_run({"00-tp": [("t0", X), ("a", X), ("t2", X)], "01-sp": [("t0", X), ("b", X)]})
    r = result_of(run)
    assert len(r["rows"]) == 1 and r["first"] is None
    assert r["mismatch"] == {"index": 1, "a": "a (step 0)", "b": "b (step 0)"}
    assert "The taps part at tap 1 (tp: a (step 0); sp: b (step 0))" in quality(run).output


def test_a_departure_at_a_later_steps_first_tap_says_to_tap_step_0(make_run, tap_into):
    run = make_run({"00-tp": [], "01-sp": []})
    for trial, scale in (("00-tp", 1.0), ("01-sp", 1.1)):
        tap_into(run / "trials" / trial / "rank0", arrays=True)
        record.tap("t0", X * scale, step=2)
        record.tap("t1", X * scale, step=2)
    text = quality(run).output
    assert "First departure: t0 at step 2 (tap 0)" in text and "tap step 0 to find where" in text


def test_no_departure_when_b_matches(make_run):
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", X)]})
    out = quality(run).output
    assert "No departure: sp stays within the allowance at its one tap (1 bit-identical" in out  # (read "all 1 taps")
    assert ", 1 tap matched in order" in out


def test_a_run_whose_last_trial_line_is_torn_is_read_as_its_report_reads_it(make_run):
    """A review's: ``perfkit quality RUN_DIR`` read trials.jsonl itself and refused a run whose last line a killed
    perfkit had cut short, which the run's report reads (the torn line left out)."""
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", X)]})
    with open(run / "trials.jsonl", "a") as f:
        f.write('{"index": 2, "variant": "tp", "sta')
    res = quality(run)
    assert res.exit_code == 0, res.output
    assert "No departure: sp stays within the allowance at its one tap (1 bit-identical" in res.output


def test_bad_input_is_one_line(make_run):
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", X)]})
    taps = run / "trials/01-sp/rank0/taps.jsonl"
    taps.write_text(taps.read_text() + '{"index": 7}\n')
    res = quality(run)
    assert res.exit_code == 2
    assert res.output.strip() == f"perfkit: {taps}: line 2 lacks name, step, dtype, shape, sha256"
    assert result_of(run) == {"error": f"{taps}: line 2 lacks name, step, dtype, shape, sha256"}
    taps.write_bytes(b"\xff\xfe{}\n")
    res = quality(run)
    assert res.exit_code == 2 and res.output.startswith(f"perfkit: {taps}: cannot read taps (") and \
        len(res.output.splitlines()) == 1


def test_an_array_unlike_its_line_is_refused(make_run):
    b1 = X.copy()
    b1[0] = 9
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", b1)]})
    array = run / "trials/01-sp/rank0/taps/0000-t0.npy"
    np.save(array, X[:3])
    res = quality(run)
    assert res.exit_code == 2
    assert res.output.strip() == f"perfkit: {array}: holds a [3] array, its line says [4]"


def test_a_run_without_taps_is_one_line(make_run):
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", X)]})
    (run / "trials/01-sp/rank0/taps.jsonl").unlink()
    (run / "trials/00-tp/rank0/taps.jsonl").unlink()
    res = quality(run)
    assert res.exit_code == 2 and "no good trial of both tp and sp wrote taps" in res.output
    assert "run it again with them, e.g. `perfkit run " in res.output and "--set 'capture.taps=[0]'`" in res.output


def test_a_command_run_without_taps_says_its_program_taps_and_where_its_outputs_compare(make_run):
    """A newcomer's own bench script (a command case, no taps) asked `perfkit quality RUN_DIR` for its outputs and was
    told to rerun with `capture.taps=[0]` "(every block at denoise step 0)": a bundled model's taps, which a script
    that never calls record.tap does not write. The line says the program taps, and gives the command that compares
    the trials' outputs."""
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", X)]})
    for name in ("00-tp", "01-sp"):
        (run / f"trials/{name}/rank0/taps.jsonl").unlink()
        (run / f"trials/{name}/rank0/outputs").mkdir()
    res = quality(run)
    assert res.exit_code == 2 and len(res.output.splitlines()) == 1
    assert "every block" not in res.output and "record.tap" in res.output
    assert res.output.rstrip().endswith(
        f"`perfkit quality {run}/trials/00-tp/rank0/outputs {run}/trials/01-sp/rank0/outputs` compares their outputs)")


@pytest.mark.parametrize("dtype, expected", [("float32", 2 ** -11.5), ("bfloat16", 2 ** -3.5),
                                             ("float16", 2 ** -5), ("float64", 2 ** -26), ("int32", 0.0)])
def test_dtype_allowance_is_the_root_of_machine_epsilon(dtype, expected):
    assert departure.dtype_allowance(dtype) == pytest.approx(expected, rel=1e-12)


def test_a_case_that_asked_for_taps_names_the_variant_that_tapped_nothing(make_run):
    # A program that taps nothing (a module pattern that matched no module) under a case that asks for taps:
    # advising to add capture.taps would run it again to the same end.
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", X)]})
    (run / "case.yaml").write_text("name: t\ncommand: [python, x.py]\ncapture: {taps: [0]}\n"
                                   "variants:\n  tp: {}\n  sp: {}\n")
    (run / "trials/01-sp/rank0/taps.jsonl").unlink()
    res = quality(run)
    assert res.exit_code == 2 and len(res.output.splitlines()) == 1
    assert "asks for taps at steps [0], but no good trial of sp wrote any" in res.output
    assert "--set" not in res.output


def test_a_run_whose_one_side_tapped_nothing_says_so_in_its_summary(make_run):
    """Where the case asked for taps and one variant's program tapped nothing, the summary's taps were null, and
    report.md left out its First departure unsaid (a torch newcomer's); a check against a baseline without taps has
    nothing to hold it to."""
    run = make_run({"00-tp": [("t0", X)], "01-sp": [("t0", X)]})
    (run / "trials/01-sp/rank0/taps.jsonl").unlink()
    assert result_of(run) is None  # a case that did not ask: nothing expected
    taps = departure.run_departure(run, read_trials(run), "tp", "sp", [0])
    assert taps == {"error": "the case asks for taps at steps [0], but no good trial of sp wrote any: its program "
                             "tapped nothing on those steps (does it call perfkit.record.tap where "
                             "record.tapping(step) says so, on module names the model has?)"}
    stopped = [t for t in read_trials(run) if t["variant"] == "tp"]  # a run stopped before sp's first trial
    assert departure.run_departure(run, stopped, "tp", "sp", [0]) is None
    summary = {"baseline": "tp", "taps": taps, "variants": {"tp": {"trials": 2}, "sp": {"trials": 2}}}
    assert _taps_rows({}, summary) == []
    assert _taps_rows({"taps": {"variant": "sp", "first": "none"}}, summary)[0]["note"] == taps["error"]
