"""`perfkit cost RUN_DIR` (and the report's Cost section) compare A's step with B's as their first ranks compiled
them: B "runs collectives of the same kinds, sizes and group sizes" was said of the variants while B's rank 1
compiled another program. Where the run's rank check (summary.json's ``ranks``) found a side's ranks apart, the
sentence says whose programs it compares."""

import json

from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.hlo.consistency import variant_check

ADD = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n"
HEADER = "HloModule jit__euler_step, num_partitions=2\n\n"
ALL_REDUCE = ("f32[1024]{0} all-reduce(p), channel_id=1, replica_groups={{0,1}}, use_global_device_ids=true, "
              "to_apply=add")
# rank 1 of b: an all-gather where rank 0 runs an all-reduce (a rank-dependent branch traced into its program)
ALL_GATHER = ("f32[1024]{0} all-gather(f32[512]{0} q), channel_id=1, replica_groups={{0,1}}, dimensions={0}, "
              "use_global_device_ids=true")


def _program(op: str) -> str:
    return (f"{HEADER}{ADD}ENTRY e {{\n  p = f32[1024]{{0}} parameter(0)\n"
            f"  q = f32[512]{{0}} slice(p), slice={{[0:512]}}\n  ROOT c = {op}\n}}\n")


def test_the_change_says_it_compares_first_ranks_where_b_s_rank_1_compiled_another(tmp_path):
    for trial, rank, op in [("00-a", 0, ALL_REDUCE), ("00-a", 1, ALL_REDUCE), ("01-b", 0, ALL_REDUCE),
                            ("01-b", 1, ALL_GATHER)]:
        folder = tmp_path / "trials" / trial / f"rank{rank}" / "xla_dump"
        folder.mkdir(parents=True)
        (folder / "module_0001.jit__euler_step.cpu_after_optimizations.txt").write_text(_program(op))
    ranks = {v: variant_check(tmp_path, v) for v in ("a", "b")}
    assert (ranks["a"]["consistent"], ranks["b"]["consistent"]) == (True, False)
    (tmp_path / "summary.json").write_text(json.dumps({"baseline": "a", "ranks": ranks}))
    result = CliRunner().invoke(cli, ["cost", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    sentence = json.loads(result.output)["change"]["b"]["sentence"]
    assert ranks["b"]["divergent_ranks"] == [1]
    assert sentence == ("b runs collectives of the same kinds, sizes and group sizes (against a; their first ranks' "
                        "programs: b's rank 1 compiled another); FLOPs unchanged; HBM bytes unchanged; bytes sent a "
                        "device unchanged")
