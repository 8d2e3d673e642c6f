"""A trial's rank folders, as every stage that reads them lists them."""

from perfkit.rundata.rundir import rank_dirs


def test_rank_dirs_are_by_rank_number_and_folders_only(tmp_path):
    for name in ["rank10", "rank9", "rank0", "rank2x", "ranks"]:
        (tmp_path / name).mkdir()
    (tmp_path / "rank3").write_text("")  # a file named like a rank is no rank folder
    assert [p.name for p in rank_dirs(tmp_path)] == ["rank0", "rank9", "rank10"]
    assert rank_dirs(tmp_path / "missing") == []
