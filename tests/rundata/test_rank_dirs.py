"""A trial's rank folders and a matrix run's combination folders, as every stage that reads them lists them."""

from perfkit.rundata import rundir
from perfkit.rundata.rundir import rank_dirs


def test_rank_dirs_are_by_rank_number_and_folders_only(tmp_path):
    for name in ["rank10", "rank9", "rank0", "rank2x", "ranks"]:
        (tmp_path / name).mkdir()
    (tmp_path / "rank3").write_text("")  # a file named like a rank is no rank folder
    assert [p.name for p in rank_dirs(tmp_path)] == ["rank0", "rank9", "rank10"]
    assert rank_dirs(tmp_path / "missing") == []


def test_cell_dirs_are_in_combination_order_past_a_hundred(tmp_path):
    """A matrix of more than 100 combinations (up to 10,000 are allowed): cells/100 comes after cells/99, not
    between cells/10 and cells/11 as its name sorts; ``perfkit report --progression`` lists them in this order."""
    for i in [101, 11, 0, 100, 99, 10, 9]:
        (tmp_path / "cells" / f"{i:02d}").mkdir(parents=True)
    (tmp_path / "cells" / "12").write_text("")  # a file is no combination
    assert [p.name for p in rundir.cell_dirs(tmp_path)] == ["00", "09", "10", "11", "99", "100", "101"]
    assert rundir.cell_dirs(tmp_path / "missing") == []


def test_a_cell_dir_is_its_index_in_two_digits_or_more(tmp_path):
    assert [rundir.cell_dir(tmp_path, i) for i in (0, 7, 42, 100)] == [
        tmp_path / "cells" / name for name in ("00", "07", "42", "100")]


def test_a_merged_trial_names_the_hosts_that_recorded_no_part_of_it(tmp_path):
    """Host 1 of 2 was stopped after trial 0: trial 1 is incomplete, and names host 1 (report.md says why)."""
    def record(index: int, rank: int) -> dict:
        return {"index": index, "variant": "a", "round": 0, "dir": f"trials/{index:02d}-a", "status": "ok",
                "wall_s": 1.0 + rank, "warmup": 0, "steps_ms": [], "natural_ms": [], "values": {},
                "ranks": [{"rank": rank, "exit_code": 0, "running_at_end": False, "steps_done": 1,
                           "last_step_ms": 1.0, "last_mark": None}]}
    for host, indexes in ((0, [0, 1]), (1, [0])):
        part = tmp_path / "hosts" / f"host{host}"
        part.mkdir(parents=True)
        for i in indexes:
            rundir.append_trial(part, record(i, host))
    merged = rundir.merge_hosts(tmp_path, 2)
    assert [(t["status"], [r["rank"] for r in t["ranks"]], t["wall_s"], t.get("missing_hosts")) for t in merged] == [
        ("ok", [0, 1], 2.0, None), ("incomplete", [0], 1.0, [1])]
    assert rundir.read_trials(tmp_path) == merged
