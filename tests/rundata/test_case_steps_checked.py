"""A model case's captured steps held to its step count before any trial: a traced or tapped step past its last
step, or traced steps that leave no step timed (a traced step is never timed: ``metrics.is_timed``), is refused in
one line naming the key; a figure written with an exponent (``1e9``) is the number it reads as."""

import pytest

from perfkit.errors import BadInput
from perfkit.rundata import case as case_mod

MODEL = {"name": "x", "model": {"name": "wan", "steps": 8}, "warmup": 2,
         "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {}}}


def refusal(raw: dict) -> str:
    with pytest.raises(BadInput) as err:
        case_mod.validate(raw, "c.yaml")
    return err.value.line()


@pytest.mark.parametrize(("steps", "warmup", "capture", "line"), [
    (8, 2, {"trace": [3, 30]}, "c.yaml: capture.trace: step 30 is past model.steps 8 (steps 0 to 7): no trial would "
                               "trace it"),
    (8, 2, {"trace": [8]}, "c.yaml: capture.trace: step 8 is past model.steps 8 (steps 0 to 7): no trial would "
                           "trace it"),
    (8, 2, {"taps": [0, 9]}, "c.yaml: capture.taps: step 9 is past model.steps 8 (steps 0 to 7): no trial would "
                             "tap it"),
    (3, 2, {"trace": [2]}, "c.yaml: capture.trace: no timed step left: steps 3, warmup 2, traced step 2 (a traced "
                           "step is never timed: trace fewer steps, or run more)"),
    (5, 2, {"trace": [4, 2, 3]}, "c.yaml: capture.trace: no timed step left: steps 5, warmup 2, traced steps 2, 3, "
                                 "4 (a traced step is never timed: trace fewer steps, or run more)"),
])
def test_captured_steps_the_model_cannot_give_are_refused(steps, warmup, capture, line):
    assert refusal(dict(MODEL, model={"name": "wan", "steps": steps}, warmup=warmup, capture=capture)) == line


@pytest.mark.parametrize(("steps", "warmup", "capture"), [
    (8, 2, {"trace": [7], "taps": [7]}),  # the last step
    (3, 2, {"trace": [0, 1]}),  # warmup steps traced: step 2 still timed
    (4, 2, {"trace": [2]}),  # step 3 timed
])
def test_captured_steps_that_leave_a_timed_step_are_taken(steps, warmup, capture):
    case = case_mod.validate(dict(MODEL, model={"name": "wan", "steps": steps}, warmup=warmup, capture=capture),
                             "c.yaml")
    assert case.capture["trace"] == capture.get("trace", [])


def test_a_command_case_keeps_its_captured_steps_unchecked():
    """A command case's step count is its program's own: perfkit cannot hold a traced step to it."""
    raw = {"name": "x", "command": ["python", "bench.py"], "capture": {"trace": [30]},
           "variants": {"a": {}, "b": {}}}
    assert case_mod.validate(raw, "c.yaml").capture["trace"] == [30]


@pytest.mark.parametrize(("text", "value"), [("1e9", 1e9), ("1.5e3", 1500.0), ("2E-1", 0.2), ("-1e2", -100.0),
                                             ("600", 600), ("1.0e+9", 1e9)])
def test_set_reads_a_figure_with_an_exponent_as_a_number(text, value):
    read = case_mod.parse_value(text)
    assert read == value and type(read) is type(value)


def test_set_timeout_with_an_exponent_is_taken(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\ncommand: [python, bench.py]\ntimeout: 2e3\nvariants: {a: {}, b: {}}\n")
    assert case_mod.load(path).timeout == 2000.0
    assert case_mod.load(path, ["timeout=1e9"]).timeout == 1e9
