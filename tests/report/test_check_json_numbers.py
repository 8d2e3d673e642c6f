"""`perfkit check` reads numbers as JSON spells them: Python's json reads NaN, Infinity and 3.0 from a file, JSON
Schema's "number" took a NaN and jsonschema took 3.0 for an integer, so a baseline or a run's summary.json holding
one was read as a figure (a NaN PSNR compares false with every limit, and passed). Each is refused in one line
naming the file and the key (exit 2); what perfkit writes (null for unknown) is read."""

import json

import pytest
from click.testing import CliRunner
from run_fixtures import make_run  # noqa: F401 (a fixture)

from perfkit.cli import cli


def check(*args):
    return CliRunner().invoke(cli, ["check", *map(str, args)])


def _refused(res, path, dotted: str) -> str:
    """The one line of a refusal naming ``path`` and the key ``dotted`` (``comparisons.0.ci``), as a JSON path
    spells it (``comparisons[0].ci``)."""
    assert res.exit_code == 2, res.output
    (line,) = res.output.strip().splitlines()
    field = ".".join(f"[{k}]" if k.isdigit() else k for k in dotted.split(".")).replace(".[", "[")
    assert line.startswith(f"perfkit: {path}: {field}: "), line
    return line


def _plant(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    for key in parents:
        data = data[int(key)] if isinstance(data, list) else data[key]
    data[int(last) if isinstance(data, list) else last] = value


@pytest.mark.parametrize("field, value", [
    ("quality.psnr_db", float("nan")), ("quality.psnr_pooled_db", float("inf")), ("failed_trials", 0.0)])
def test_a_baseline_with_a_nan_an_infinity_or_a_float_count_is_refused(make_run, tmp_path, field, value):
    run = make_run()
    base = tmp_path / "base.json"
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    assert check(run, "--baseline", base).exit_code == 0  # as written: read
    data = json.loads(base.read_text())
    _plant(data, field, value)
    base.write_text(json.dumps(data))
    line = _refused(check(run, "--baseline", base), base, field)
    assert "write one with --update-baseline" in line, line


@pytest.mark.parametrize("field, value", [
    ("variants.a.step_ms.median", float("nan")), ("variants.b.step_ms.n", 12.0), ("trials.total", 6.0),
    ("comparisons.0.p_value", float("-inf")),
])
def test_a_run_s_summary_with_a_nan_an_infinity_or_a_float_count_is_refused(make_run, tmp_path, field, value):
    run = make_run()
    base = tmp_path / "base.json"
    assert check(run, "--baseline", base, "--update-baseline").exit_code == 0
    summary = json.loads((run / "summary.json").read_text())
    _plant(summary, field, value)
    (run / "summary.json").write_text(json.dumps(summary))
    _refused(check(run, "--baseline", base), run / "summary.json", field)
    # and the same summary.json given as the baseline
    other = make_run("other")
    _refused(check(other, "--baseline", run / "summary.json"), run / "summary.json", field)
