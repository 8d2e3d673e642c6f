"""A trials.jsonl line is held to ``TrialRecord`` where a run's report reads it: one that is not a record this
perfkit writes (a field of the wrong type, a key missing, a warmup below 0, a status not one of a trial's) is refused
in one line naming the file, the line and the field; a cut last line still reads as an interrupted run."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from report.run_fixtures import ab_trials, write_run

from perfkit.errors import BadInput
from perfkit.rundata import rundir

REPO = Path(__file__).resolve().parents[2]


def edit(record: dict, key: str, value) -> None:
    if value is KeyError:
        del record[key]
    elif key == "steps_ms":
        record["steps_ms"][2] = value
    else:
        record[key] = value


EDITS = [  # (key, value, the field named, what the line says is wrong)
    ("steps_ms", "24.485", "steps_ms[2]", "'24.485' is not of type 'number'"),
    ("steps_ms", None, "steps_ms[2]", "None is not of type 'number'"),
    ("steps_ms", math.nan, "steps_ms[2]", "nan is not of type 'number'"),
    ("steps_ms", math.inf, "steps_ms[2]", "inf is not of type 'number'"),
    ("variant", KeyError, None, "'variant' is a required property"),
    ("warmup", -3, "warmup", "-3 is less than the minimum of 0"),
    ("warmup", 2.5, "warmup", "2.5 is not of type 'integer'"),
    ("status", "okay", "status", "'okay' is not one of ['ok', 'hung', 'crashed', 'no_steps', 'incomplete']"),
]


@pytest.mark.parametrize(("key", "value", "field", "why"), EDITS, ids=[f"{e[0]}={e[1]}" for e in EDITS])
def test_a_record_not_as_perfkit_writes_it_is_refused_naming_its_line(tmp_path, key, value, field, why):
    trials = ab_trials()
    edit(trials[2], key, value)
    run = write_run(tmp_path / "run", trials)
    with pytest.raises(BadInput) as refused:
        rundir.read_trials(run)
    path = run / "trials.jsonl"
    assert refused.value.path == str(path)
    assert refused.value.field == "line 3" + (f": {field}" if field else "")
    assert refused.value.reason.startswith(why + " (")


def test_report_refuses_an_edited_record_in_one_line_and_keeps_the_file(tmp_path):
    trials = ab_trials()
    trials[2]["steps_ms"][2] = "24.485"
    run = write_run(tmp_path / "run", trials)
    before = (run / "trials.jsonl").read_bytes()
    done = subprocess.run([sys.executable, "-m", "perfkit.cli", "report", str(run)], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        f"perfkit: {run / 'trials.jsonl'}: line 3: steps_ms[2]: '24.485' is not of type 'number' (not a trial "
        "record this perfkit writes)"]
    assert (run / "trials.jsonl").read_bytes() == before and not (run / "summary.json").exists()


def test_a_cut_last_line_still_reads_as_an_interrupted_run(tmp_path):
    trials = ab_trials()
    run = write_run(tmp_path / "run", trials)
    with open(run / "trials.jsonl", "a") as f:
        f.write(json.dumps({**trials[0], "index": 6})[:40])  # perfkit killed while appending trial 6
    assert [t["index"] for t in rundir.read_trials(run)] == [t["index"] for t in trials]
    assert rundir.torn_end(run) == {"index": 6, "variant": "a"}


def test_a_record_perfkit_writes_with_every_optional_key_is_read(tmp_path):
    trials = ab_trials()
    trials[0] |= {"traced": [0], "finished": "2024-01-01T00:00:00+00:00", "missing_hosts": [1],
                  "compile_cache": {"mode": "cold", "before": {"jax_entries": 0, "inductor_files": 0},
                                    "after": {"jax_entries": 3, "inductor_files": 0}}}
    trials[1]["values"] = {"loss": 0.5}
    run = write_run(tmp_path / "run", trials)
    assert rundir.read_trials(run) == trials


def test_a_host_parts_record_is_checked_as_the_report_merges_it(tmp_path):
    trials = ab_trials()
    run = write_run(tmp_path / "run", [])
    for host in (0, 1):
        part = run / "hosts" / f"host{host}"
        part.mkdir(parents=True)
        records = [dict(t, ranks=[dict(t["ranks"][0], rank=host)]) for t in trials]
        if host == 1:
            del records[4]["ranks"][0]["steps_done"]
        (part / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in records))
    with pytest.raises(BadInput) as refused:
        rundir.merge_hosts(run, 2)
    assert refused.value.line() == (f"{run / 'hosts' / 'host1' / 'trials.jsonl'}: line 5: ranks[0]: 'steps_done' is "
                                    "a required property (not a trial record this perfkit writes)")
