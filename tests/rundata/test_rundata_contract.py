"""The typed run contract (perfkit.rundata): the shipped JSON Schema is what the types generate, the
demo's summary.json validates against it and a wrong type in it does not, and docs/architecture.md's
summary.json and trials.jsonl sections name the keys the types define, no more and no fewer."""

import copy
import json
import re
from pathlib import Path

import jsonschema
import pytest

from contract_doc import doc_keys, section, spans, type_names
from perfkit.rundata import schema
from perfkit.rundata.summary import MatrixSummary, Summary
from perfkit.rundata.trials import TrialRecord

# Backticked in the summary.json section but no summary key: ffmpeg psnr's own names (`y`, `average`),
# hlo-diff --json's `checks`, the bundled worker's step program, the case option that saves latents.
NOT_SUMMARY_KEYS = {"y", "average", "checks", "jit__euler_step", "jit_kernel_step", "save_latents"}


def named(roots: tuple, module: str) -> tuple[set[str], set[str]]:
    """``type_names`` of several roots together: their keys, their values."""
    names = [type_names(root, module) for root in roots]
    return set().union(*(k for k, _ in names)), set().union(*(v for _, v in names))


def validator(which: str = "summary") -> jsonschema.protocols.Validator:
    """The shipped schema's validator as perfkit validates with it: its numbers finite, its integers no floats."""
    jsonschema.Draft202012Validator.check_schema(schema.shipped(which))
    return schema.validator(which)


@pytest.mark.parametrize("which", sorted(schema.SHIPPED))
def test_the_shipped_schema_is_what_the_types_generate(which):
    assert schema.shipped(which) == schema.generate(which), "write it again: python -m perfkit.rundata.schema"


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[2] / "reports" / "baselines").glob("*.json")),
                         ids=lambda path: path.name)
def test_the_committed_baselines_validate(path):
    baseline = json.loads(path.read_text())
    errors = [f"{e.json_path}: {e.message[:200]}" for e in validator("baseline").iter_errors(baseline)]
    assert not errors, "\n".join(errors)


@pytest.mark.slow
def test_the_demo_summary_validates(demo_run):
    summary = json.loads((demo_run / "summary.json").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator().iter_errors(summary)]
    assert not errors, "\n".join(errors)
    # the run held what makes the contract's deeper parts: traces, dumps, outputs
    assert summary["breakdown"] and summary["attribution"]["variants"] and summary["cost"] and summary["quality"]
    for line in (demo_run / "trials.jsonl").read_text().splitlines():
        trial = json.loads(line)
        assert set(trial) <= set(TrialRecord.__annotations__) and TrialRecord.__required_keys__ <= set(trial)


@pytest.mark.slow
@pytest.mark.parametrize("plant", ["ratio as text", "verdict unknown word", "cost group missing", "rank as float",
                                   "count as 3.0", "median as NaN"])
def test_a_wrong_type_in_the_demo_summary_fails(demo_run, plant):
    summary = json.loads((demo_run / "summary.json").read_text())
    wrong = copy.deepcopy(summary)
    if plant == "ratio as text":
        wrong["comparison"]["ratio"] = "1.2"
    elif plant == "verdict unknown word":
        wrong["comparisons"][0]["verdict"] = "quicker"
    elif plant == "cost group missing":
        del next(iter(wrong["cost"].values()))["step"]["collective_shapes"][0]["group"]
    elif plant == "rank as float":
        wrong["breakdown"]["collectives"][wrong["baseline"]]["steps"][0]["rank"] = 0.5
    elif plant == "count as 3.0":  # Python's json reads 3.0 from a file; jsonschema alone takes it for an integer
        step_ms = wrong["variants"][wrong["baseline"]]["step_ms"]
        step_ms["n"] = float(step_ms["n"])
    else:  # and NaN for a number
        wrong["variants"][wrong["baseline"]]["step_ms"]["median"] = float("nan")
    assert not list(validator().iter_errors(summary))
    assert list(validator().iter_errors(wrong))


@pytest.mark.parametrize("roots, module, contract, ignored", [
    ((Summary, MatrixSummary), "perfkit.rundata.summary", "summary.json", NOT_SUMMARY_KEYS),
    ((TrialRecord,), "perfkit.rundata.trials", "trials.jsonl", {"ready"}),  # a mark's name
])
def test_the_doc_names_the_keys_the_types_define(roots, module, contract, ignored):
    """Every key the types define is backticked in the doc's section, and every key the section names is
    a key (or a value) of the types: a key added to one and not the other fails here."""
    keys, values = named(roots, module)
    text = section(contract)
    ticked = " ".join(spans(text))
    unnamed_keys = sorted(k for k in keys if not re.search(rf"\b{k}\b", ticked))
    unnamed_values = sorted(v for v in values if not re.search(rf"(?<![\w-]){re.escape(v)}(?![\w-])", text))
    untyped = sorted(doc_keys(text, values) - keys - values - ignored)
    assert not unnamed_keys, f"keys the doc does not name: {unnamed_keys}"
    assert not unnamed_values, f"values the doc does not name: {unnamed_values}"
    assert not untyped, f"keys the doc names that the types lack: {untyped}"


def test_the_doc_check_sees_a_key_it_lacks_or_adds():
    """Not vacuous: a doc without one key, or with one more, fails the comparison."""
    keys, values = named((Summary, MatrixSummary), "perfkit.rundata.summary")
    doc = section("summary.json")
    assert "measured_over_bound" in doc
    lacking = doc.replace("measured_over_bound", "")
    assert "measured_over_bound" not in " ".join(spans(lacking))
    added = doc.replace("`{chip, compute_ms,", "`{chip, compute_ms, watts_ms,")
    assert doc_keys(added, values) - keys - values - NOT_SUMMARY_KEYS == {"watts_ms"}


def test_a_hand_made_run_with_a_hung_trial_validates(tmp_path):
    """Shapes the demo does not make: a command case, a hung trial (its ranks as trials.jsonl keeps
    them), outputs that differ (PSNR figures), no traces or dumps (breakdown, attribution, cost empty)."""
    from perfkit.run import finish
    from report.run_fixtures import ab_trials, frames, outputs_for, shifted, trial, write_run

    trials = ab_trials()
    trials.append(trial(6, "a", [50.0, 10.0], status="hung",
                        ranks=[{"rank": 0, "exit_code": -9, "running_at_end": True, "steps_done": 2,
                                "last_step_ms": 10.0, "last_mark": "ready", "stacks": "Thread 0x1\n"}]))
    run = write_run(tmp_path / "run", trials, outputs_for(trials[:6], frames(), shifted(frames(), 1, 20)))
    assert finish.render(run)  # failed: the hung trial
    summary = json.loads((run / "summary.json").read_text())
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in validator().iter_errors(summary)]
    assert not errors, "\n".join(errors)
    assert summary["trials"]["failed"][0]["ranks"][0]["stacks"] and summary["quality"]["psnr_db"] != "inf"
    assert summary["breakdown"] is None and summary["cost"] == {}
