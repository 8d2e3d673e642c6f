"""Two programs that differ only in the device counts their HloModule line names (replica_count, num_partitions)
are two programs: compiled for other counts, they hang or compute wrongly where ranks mix them. `hlo-diff --ab`
and the rank check tell them apart and say where."""

from pathlib import Path

from perfkit.hlo import render
from perfkit.hlo.consistency import first_difference
from perfkit.hlo.diff import compare_ab, compare_ranks
from perfkit.hlo.dumps import RankDumps
from perfkit.report.markdown import _first_difference

DATA = Path(__file__).parent / "data"
NAME = "module_0003.jit_ulysses_attention.sm_9.0_gpu_after_optimizations.txt"
ONE_REPLICA = (DATA / "gpu_async.txt").read_text()  # its HloModule line names num_partitions=4 alone
TWO_REPLICAS = ONE_REPLICA.replace(", num_partitions=4,", ", replica_count=2, num_partitions=4,", 1)


def _dump(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True)
    (folder / NAME).write_text(text)
    return folder


def test_ab_tells_programs_of_other_replica_counts_apart(tmp_path):
    assert TWO_REPLICAS != ONE_REPLICA
    result = compare_ab(_dump(tmp_path / "a", ONE_REPLICA), _dump(tmp_path / "b", TWO_REPLICAS))
    (m,) = result["modules"]
    assert result["consistent"] is False and m["same_program"] is False
    assert m["counts"] == [{"replica_count": 1, "num_partitions": 4}, {"replica_count": 2, "num_partitions": 4}]
    assert m["opcodes"] == [] and m["collectives_added"] == [] == m["collectives_removed"]
    text = render.ab_report(result)
    assert "1 differ" in text
    assert "  module jit_ulysses_attention: device counts (HloModule line) replica_count 1, num_partitions 4 -> " \
           "replica_count 2, num_partitions 4; ENTRY ops 13 -> 13 (+0)" in text


def test_ab_of_equal_counts_is_one_program(tmp_path):
    result = compare_ab(_dump(tmp_path / "a", TWO_REPLICAS), _dump(tmp_path / "b", TWO_REPLICAS))
    (m,) = result["modules"]
    assert result["consistent"] is True and m["same_program"] is True
    assert m["counts"] == [{"replica_count": 2, "num_partitions": 4}] * 2


def test_a_rank_compiled_for_other_counts_is_found_apart(tmp_path):
    ranks = {r: _dump(tmp_path / f"rank{r}", TWO_REPLICAS if r == 3 else ONE_REPLICA) for r in range(4)}
    result = compare_ranks(RankDumps(str(tmp_path), None, ranks))
    (m,) = result["modules"]
    assert result["consistent"] is False and m["groups"] == [[0, 1, 2], [3]] and result["divergent_ranks"] == [3]
    (d,) = m["divergences"]
    assert d["same_program"] is False and d["first_difference"] is None
    assert d["counts"] == {"majority": {"replica_count": 1, "num_partitions": 4},
                           "rank": {"replica_count": 2, "num_partitions": 4}}
    text = render.ranks_report(result)
    assert ("      device counts (HloModule line): replica_count 1, num_partitions 4 on rank 0 -> replica_count 2, "
            "num_partitions 4 on rank 3") in text
    # summary.json's ranks.<v>.first_difference and report.md's cell of it: no instruction differs, the counts do
    first = first_difference(result)
    assert first["counts"] == d["counts"] and first["majority"] is None is first["rank"]
    assert _first_difference(first) == ("`jit_ulysses_attention`: rank 3 compiled for replica_count 2, num_partitions "
                                        "4, rank 0 for replica_count 1, num_partitions 4")


def test_a_header_naming_no_count_is_unknown_counts(tmp_path):
    """A header naming neither count (a program printed from its HloProto) against one naming them: apart, its
    counts unknown (null), never read as 1 and 1."""
    bare = ONE_REPLICA.replace(", num_partitions=4,", ",", 1)
    result = compare_ab(_dump(tmp_path / "a", bare), _dump(tmp_path / "b", ONE_REPLICA))
    (m,) = result["modules"]
    assert m["same_program"] is False and m["counts"] == [None, {"replica_count": 1, "num_partitions": 4}]
    assert "device counts (HloModule line) unknown -> replica_count 1, num_partitions 4" in render.ab_report(result)


def test_a_program_whose_header_names_no_count_has_unknown_devices(tmp_path):
    """``perfkit cost --json``'s ``devices`` of a program whose HloModule line names neither count (listed groups
    make it costable) read 1, a plausible count for an unknown one; where the line names them, their product."""
    from perfkit.hlo.dumps import dump_files
    from perfkit.hlo.program_cost import dump_cost

    text = ("HloModule m, is_scheduled=true\n\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n"
            "  ROOT s = f32[] add(x, y)\n}\n\nENTRY e {\n  p = f32[1024]{0} parameter(0)\n"
            "  ROOT ar = f32[1024]{0} all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add\n}\n")
    (files,) = dump_files(_dump(tmp_path / "bare", text))
    assert dump_cost(files).as_json()["devices"] is None
    named = text.replace("HloModule m,", "HloModule m, replica_count=4,", 1)
    (files,) = dump_files(_dump(tmp_path / "named", named))
    assert dump_cost(files).as_json()["devices"] == 4
