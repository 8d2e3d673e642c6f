"""Every reader of a run's trials.jsonl holds its lines to ``TrialRecord``, as the report does: --resume, check,
quality's taps, trace attribution, the trial a trace folder belongs to and the notebook frames. A line that is not a
record this perfkit writes is refused in one line naming the file, the line and the field; before, each of these
took it on trust (a traceback, or a figure read from it)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from report.run_fixtures import ab_trials, write_run

from perfkit.analysis import frames
from perfkit.errors import BadInput
from perfkit.rundata import rundir

REPO = Path(__file__).resolve().parents[2]


def perfkit(*args):
    return subprocess.run([sys.executable, "-m", "perfkit.cli", *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def damaged_run(tmp_path: Path, kept: int = 6, **edit) -> Path:
    """A run of ``ab_trials`` (its first ``kept`` trials), its line 3 (trial 2, b) edited: ``edit``'s keys set, or
    dropped where the value is KeyError. Its command's program is there (--resume looks for it before anything)."""
    (tmp_path / "bench.py").write_text("")
    trials = ab_trials()[:kept]
    for key, value in edit.items():
        if value is KeyError:
            del trials[2][key]
        else:
            trials[2][key] = value
    return write_run(tmp_path / "run", trials)


def refusal(run: Path, said: str) -> list[str]:
    return [f"perfkit: {run / 'trials.jsonl'}: line 3: {said} (not a trial record this perfkit writes)"]


def test_resume_refuses_a_damaged_record_before_it_runs_a_trial(tmp_path):
    """Four of six trials recorded, trial 2's warmup -3: --resume took it as done and ran trials 4 and 5 on it."""
    run = damaged_run(tmp_path, kept=4, warmup=-3)
    before = (run / "trials.jsonl").read_bytes()
    res = perfkit("run", "--resume", run)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == refusal(run, "warmup: -3 is less than the minimum of 0")
    assert (run / "trials.jsonl").read_bytes() == before and not (run / "trials" / "04-b").exists()


def test_resume_refuses_a_record_without_its_variant(tmp_path):
    run = damaged_run(tmp_path, kept=4, variant=KeyError)
    res = perfkit("run", "--resume", run)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == refusal(run, "'variant' is a required property")


def test_check_refuses_a_record_damaged_after_the_report(tmp_path):
    """The summary written from whole records, then trial 2's step time made a string: check's count of the
    records agreed with the summary's and it passed the run."""
    run = damaged_run(tmp_path)
    assert perfkit("report", run).returncode == 0
    (tmp_path / "baseline.json").write_text((run / "summary.json").read_text())
    trials = ab_trials()
    trials[2]["steps_ms"][2] = "24.485"
    (run / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    res = perfkit("check", run, "--baseline", tmp_path / "baseline.json")
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == refusal(run, "steps_ms[2]: '24.485' is not of type 'number'")


@pytest.mark.parametrize("command", [("quality",), ("trace", "attribution")], ids=["quality", "trace-attribution"])
def test_an_analysis_command_refuses_a_record_without_its_variant(tmp_path, command):
    run = damaged_run(tmp_path, variant=KeyError)
    res = perfkit(*command, run)
    assert res.returncode == 2, res.stderr
    assert res.stderr.strip().splitlines() == refusal(run, "'variant' is a required property")


def test_the_trial_a_trace_folder_lies_in_is_read_from_checked_records(tmp_path):
    """``trace tail``'s read of a trial folder's record: trial 2's status "okay" was taken as its status."""
    run = damaged_run(tmp_path, status="okay")
    (run / "trials" / "02-b" / "rank0").mkdir(parents=True)
    with pytest.raises(BadInput) as refused:
        rundir.trial_of([run / "trials" / "02-b" / "rank0"])
    assert refused.value.line().startswith(f"{run / 'trials.jsonl'}: line 3: status: 'okay' is not one of ")


def test_the_notebook_frames_refuse_a_damaged_record(tmp_path):
    run = damaged_run(tmp_path, wall_s="1.0")
    with pytest.raises(BadInput) as refused:
        frames.trials_frame(run)
    assert refused.value.line() == refusal(run, "wall_s: '1.0' is not of type 'number'")[0].removeprefix("perfkit: ")


def test_a_file_read_again_unchanged_is_not_validated_again_but_an_edited_one_is(tmp_path, monkeypatch):
    """A run's end reads trials.jsonl three times (its plan, its summary, its frames): validated each time, a long
    run's 200 trials of 1000 steps cost seconds. Validated once while the file stands as it was; an edit is caught."""
    from perfkit.rundata import schema

    run = damaged_run(tmp_path)
    calls = []
    monkeypatch.setattr(schema, "validate", lambda record, *a: calls.append(record["index"]))
    assert len(rundir.read_trials(run)) == len(rundir.read_trials(run)) == 6
    assert calls == [0, 1, 2, 3, 4, 5]
    monkeypatch.undo()
    text = (run / "trials.jsonl").read_text().splitlines()
    text[2] = text[2].replace('"warmup": 1', '"warmup": -3', 1)
    assert '"warmup": -3' in text[2]
    (run / "trials.jsonl").write_text("\n".join(text) + "\n")
    with pytest.raises(BadInput, match="line 3: warmup: -3 is less than the minimum of 0"):
        rundir.read_trials(run)
