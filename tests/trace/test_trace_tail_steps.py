"""``perfkit trace tail --json``: an op in no step reads null in every list that gives a step (``last_ops``' step as
``collectives``' last_step), on hand-built TPU-shaped XSpaces whose steps and ops are written out below."""

import json

from click.testing import CliRunner
from trace_builders import U

from perfkit.cli import cli
from perfkit.trace.synthetic import XSpaceWriter


def _chip(path, marked: bool) -> None:
    """One chip: a fusion [0, 10) us and an all-reduce [10, 15) us, in step 0's marker [0, 100) us where ``marked``,
    then a fusion [100, 110) and an all-reduce [110, 115) after it (after the last marker: no step)."""
    space = XSpaceWriter("h")
    space.program(5, "jit_step", [("fusion.1", "fusion", "f32[8,128]"), ("all-reduce.1", "all-reduce", "f32[8,128]")])
    plane = space.plane("/device:TPU:0")
    if marked:
        plane.line("Steps", 0).event(plane.op("0"), 0, 100 * U)
    ops = plane.line("XLA Ops", 0)
    for start in (0, 100):
        ops.event(plane.op("fusion.1", program_id=5, hlo_category="loop fusion"), start * U, 10 * U)
        ops.event(plane.op("all-reduce.1", program_id=5, hlo_category="all-reduce"), (start + 10) * U, 5 * U)
    space.save(path)


def _tail(path) -> dict:
    result = CliRunner().invoke(cli, ["trace", "tail", "--json", str(path)])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_an_op_in_no_step_reads_null_in_last_ops_as_in_collectives(tmp_path):
    """By hand: the marked chip's first two ops are in step 0, its last two after the marker closed, in no step; the
    unmarked chip's four are in no step. last_ops gave such an op step -1 (breakdown's rows' convention) where
    collectives gave its last_step null in the same document."""
    _chip(tmp_path / "marked.xplane.pb", marked=True)
    doc = _tail(tmp_path / "marked.xplane.pb")
    assert [(r["name"], r["step"]) for r in doc["last_ops"]] == [
        ("fusion.1", 0), ("all-reduce.1", 0), ("fusion.1", None), ("all-reduce.1", None)]
    _chip(tmp_path / "unmarked.xplane.pb", marked=False)
    doc = _tail(tmp_path / "unmarked.xplane.pb")
    assert [r["step"] for r in doc["last_ops"]] == [None] * 4
    assert [r["last_step"] for r in doc["collectives"]] == [None]

