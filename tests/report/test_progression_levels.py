"""`perfkit report --progression` of runs whose B/A intervals are at different levels: one read once (95%), one of
the adaptive rounds, whose interval is each look's (``look_confidence``) so that all its looks' hold together at
95%. The table's header said "95% CI" of both."""

import json

from click.testing import CliRunner
from run_fixtures import make_run  # noqa: F401 (a fixture)

from perfkit.cli import cli


def _looked(run, level: float, looks_at: list[int]):
    """``run``'s summary.json as the adaptive rounds write it: its B/A step-time interval held at ``level`` a look,
    read after every round from ``looks_at[0]`` to ``looks_at[1]`` trials a side."""
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    for c in [summary["comparison"], *summary["comparisons"]]:
        c |= {"look_confidence": level, "looks_at": looks_at}
    path.write_text(json.dumps(summary))


def test_each_row_s_interval_says_its_level_where_the_rows_differ(make_run):
    once, looked = make_run("once"), make_run("looked")
    _looked(looked, 0.9834, [2, 6])
    res = CliRunner().invoke(cli, ["report", "--progression", str(once), str(looked)])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert "| b/a [CI] |" in lines[0] and "95% CI" not in lines[0], lines[0]
    # the fixture's b/a: 1.2 by construction, its CI [1.170, 1.230] as its own report gives it
    assert "| 1.200 [1.170, 1.230] 95% |" in lines[2], lines[2]
    assert "| 1.200 [1.170, 1.230] 98.3% (5 looks) |" in lines[3], lines[3]  # rounds 2..6: five looks
    assert ("in brackets, the ratio's CI at its level: 95% where the verdict was read once; (n looks): the rounds "
            "read it after each of n rounds, and the interval is each look's, at the level at which the intervals of "
            "all n looks hold together at 95%") in lines[-1], lines[-1]
    rows = json.loads(CliRunner().invoke(cli, ["report", "--progression", str(once), str(looked), "--json"]).output)
    assert [(r["ci_level"], r["looks"]) for r in rows["rows"]] == [(0.95, 1), (0.9834, 5)]


def test_a_header_true_of_every_row_stays_where_it_is(make_run):
    """Rows all read once (and one of a summary from before the looks were kept): the header's 95% is each one's."""
    first, second = make_run("first"), make_run("second")
    path = second / "summary.json"
    summary = json.loads(path.read_text())
    for c in [summary["comparison"], *summary["comparisons"]]:
        for key in ("confidence", "look_confidence", "looks_at"):
            c.pop(key, None)
    path.write_text(json.dumps(summary))
    lines = CliRunner().invoke(cli, ["report", "--progression", str(first), str(second)]).output.splitlines()
    assert "| b/a [95% CI] |" in lines[0] and all("| 1.200 [1.170, 1.230] |" in line for line in lines[2:4])
    assert "in brackets, the ratio's 95% CI" in lines[-1]


def test_looks_out_of_order_are_refused_as_check_refuses_them(make_run):
    """A hand-edited ``looks_at: [5, 3]`` (two trial counts, the first after the last; its JSON Schema cannot order
    them) was read as -1 looks and shown as a level read once: the one line, naming the file and the key, exit 2, that
    ``perfkit check`` gives of it."""
    run = make_run("looked")
    _looked(run, 0.9834, [2, 6])
    path = run / "summary.json"
    summary = json.loads(path.read_text())
    summary["comparison"]["looks_at"] = [5, 3]
    path.write_text(json.dumps(summary))
    res = CliRunner().invoke(cli, ["report", "--progression", str(run)])
    assert res.exit_code == 2 and res.output.splitlines() == [res.output.strip()], res.output
    assert res.output.startswith(f"perfkit: {path}: comparison.looks_at: [5, 3]: its first look is after its last"), \
        res.output
