"""``perfkit trace tail``: an op in no step reads null in every list of its --json that gives a step (``last_ops``'
step as ``collectives``' last_step), and a chip whose trace ends after its last step is not said to wait at a
collective its trace cannot show it reached, on hand-built TPU-shaped XSpaces whose steps and ops are written out
below."""

import json

from click.testing import CliRunner
from test_tail_parting import PERMUTES, dump, rank_trace
from trace_builders import U

from perfkit.cli import cli
from perfkit.trace import parting
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


def _ran_ahead(folder) -> list:
    """test_tail_parting's hang with rank 3 as the skipped-collective repro leaves it: its program lacks cp.2, so it
    runs two hops a step where ranks 0-2 run three, pairing with theirs in order; it ran steps 0 and 1 whole and its
    profile stopped after its last step (no op after step 1's marker), as a rank that finished its steps and waits in
    jax.distributed's shutdown leaves it. Ranks 0-2 ran step 0 whole and, in step 1 (whose marker never closed),
    cp.1 (rank 2 cp.1 and cp.2) before the cut."""
    for rank in range(4):
        trace = folder / f"rank{rank}" / "trace" / "h.xplane.pb"
        if rank == 3:
            rank_trace(trace, [["cp.1", "cp.3"]] * 2, None)
        else:
            rank_trace(trace, [list(PERMUTES)], ["cp.1", "cp.2"] if rank == 2 else ["cp.1"])
        dump(folder / f"rank{rank}" / "xla_dump", ("cp.1", "cp.3") if rank == 3 else PERMUTES)
    return sorted(folder.glob("rank*/trace"))


def test_a_chip_whose_trace_ends_after_its_step_is_not_said_to_wait(tmp_path):
    """By hand from the traces above: rank 3's last collective is cp.3, in step 1, whose marker closed, and its trace
    has no later op; ranks 0-2 ran on past step 0's marker. Rank 3's trace cannot show whether it waits at its
    program's next collective (cp.1) or has left the program (the repro's rank 3 had, waiting in shutdown): tail
    named it waiting at cp.1 (from its program). Ranks 0-2 each wait at their program's next (cp.2, cp.2, cp.3)."""
    paths = _ran_ahead(tmp_path)
    chips, first = parting.parting_traces(paths)
    table = chips[["rank", "completed", "last_step", "last_op", "waiting_at", "waiting_from"]].astype(object)
    assert table.where(table.notna(), None).values.tolist() == [
        [0, 4, 1, "cp.1", "cp.2", "program"], [1, 4, 1, "cp.1", "cp.2", "program"],
        [2, 5, 1, "cp.2", "cp.3", "program"], [3, 4, 1, "cp.3", None, "ended"]]
    assert [(p["rank"], p["how"]) for p in first["parted"]] == [(3, "skipped")]
    said = ("; rank 3 device 0's trace ends after its last collective (cp.3, step 1) with no later op, its step's "
            "marker closed: that trace cannot say whether the chip waits at its program's next collective or has "
            "left the program")
    assert parting.describe(first, chips, "hung").endswith(said)
    result = CliRunner().invoke(cli, ["trace", "tail", *map(str, paths)])
    assert result.exit_code == 0, result.output
    assert said in result.stdout.splitlines()[0]
    (row,) = [line.split() for line in result.stdout.splitlines() if line.split()[:2] == ["3", "0"]
              and line.split()[-1] in ("ended", "program")]
    assert row[-2:] == ["-", "ended"]
    doc = json.loads(CliRunner().invoke(cli, ["trace", "tail", "--json", *map(str, paths)]).stdout)
    assert [(c["rank"], c["waiting_at"], c["waiting_from"]) for c in doc["collectives"]] == [
        (0, "cp.2", "program"), (1, "cp.2", "program"), (2, "cp.3", "program"), (3, None, "ended")]


def test_the_legend_says_an_ended_chip_s_wait_is_not_known(tmp_path):
    """The table's legend read 'ended: none, its trace ends after its last', as if the chip waited at none: its trace
    cannot say that, nor that it waits at its program's next collective."""
    result = CliRunner().invoke(cli, ["trace", "tail", *map(str, _ran_ahead(tmp_path))])
    (legend,) = [line for line in result.stdout.splitlines() if line.startswith("waiting_from: ")]
    assert legend.endswith("; ended: none named: its trace ends after its last, its step's marker closed with no later "
                           "op, so it cannot say whether the chip waits at its program's next or left it")


def test_ops_in_traces_without_step_markers_are_not_said_to_follow_a_closed_marker(tmp_path):
    """A chip with no Steps line and no collective (as the public MI300 conv profile): its last ops are in no step,
    because its trace holds no step marker at all. The ops table's legend said `step -: outside every step's span,
    e.g. after the last step marker closed`, as if a marker had closed; the collectives-based check that words it
    `these traces hold no step marker` saw no collective. By hand: two fusions, no marker."""
    space = XSpaceWriter("h")
    space.program(5, "jit_step", [("fusion.1", "fusion", "f32[8,128]")])
    plane = space.plane("/device:TPU:0")
    ops = plane.line("XLA Ops", 0)
    for start in (0, 100):
        ops.event(plane.op("fusion.1", program_id=5, hlo_category="loop fusion"), start * U, 10 * U)
    space.save(tmp_path / "h.xplane.pb")
    result = CliRunner().invoke(cli, ["trace", "tail", str(tmp_path / "h.xplane.pb")])
    assert result.exit_code == 0, result.output
    assert "last 5 ops per chip (ms from the trace start; step -: these traces hold no step marker):" in result.stdout
    assert "marker closed" not in result.stdout
