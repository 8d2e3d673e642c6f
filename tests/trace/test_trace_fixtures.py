"""Real profiles from other projects (tests/data/real): they parse, their ops are what its
README says, their breakdowns add up to the step spans, and every xplane goes through every trace
command with xprof's figures."""

import json

from click.testing import CliRunner
from test_trace_xprof import assert_same_rows, perfkit_hlo_stats, xprof_hlo_stats

from perfkit.cli import cli
from perfkit.trace import breakdown, events

PARTS = ["compute_ps", "ici_ps", "dma_ps", "idle_ps"]


def test_rocm_xplane_eight_gpus(fixtures_dir):
    ev = events.load([fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"])
    ops = events.device_ops(ev)
    assert ops.groupby("device").size().to_dict() == {0: 60, **{d: 25 for d in range(1, 8)}}
    # opcodes come from the program's HLO in /host:metadata, not from kernel names
    conv = ops[ops["hlo_op"].astype(str).str.startswith("cudnn-conv")]
    assert len(conv) and (conv["kind"] == "custom-call").all()
    assert set(ops.loc[ops["hlo_op"].astype(str).str.contains("fusion"), "kind"]) == {"fusion"}
    assert (ops["category"] == "compute").all()  # the README: no collectives
    rows = breakdown.breakdown(ev)
    assert sorted(rows["device"]) == list(range(8)) and (rows["step"] == -1).all()  # no step markers
    assert (rows[PARTS].sum(axis=1) == rows["span_ps"]).all() and (rows[PARTS] >= 0).all().all()
    first = ops.groupby("device")["start_ps"].min()
    last = (ops["start_ps"] + ops["dur_ps"]).groupby(ops["device"]).max()
    assert (rows.set_index("device")["span_ps"] == last - first).all()


def test_kineto_two_ranks(fixtures_dir):
    ev = events.load([fixtures_dir / "kineto" / f"rank-{r}.json.gz" for r in (0, 1)])
    ops = events.device_ops(ev)
    assert sorted(ops["rank"].unique()) == [0, 1]  # from distributedInfo.rank
    nccl = ops[ops["name"].astype(str).str.startswith("ncclKernel_SendRecv")]
    assert nccl.groupby("rank").size().to_dict() == {0: 10, 1: 10}
    assert (nccl["category"] == "ici").all() and (nccl["kind"] == "nccl SendRecv").all()
    assert set(ops.loc[ops["name"].astype(str).str.startswith("Memcpy"), "category"]) == {"dma"}
    steps = ev[ev["category"] == "step"]
    assert sorted(steps["step"].unique()) == [551, 552]
    rows = breakdown.breakdown(ev)
    assert sorted(zip(rows["rank"], rows["step"])) == [(0, 551), (0, 552), (1, 551), (1, 552)]
    assert (rows[PARTS].sum(axis=1) == rows["span_ps"]).all() and (rows[PARTS] >= 0).all().all()
    marked = steps.set_index(["rank", "step"])["dur_ps"]
    assert (rows.set_index(["rank", "step"])["span_ps"] >= marked).all()  # a span covers its annotation
    assert (rows["ici_ps"] > 0).all()


def test_every_real_xplane_through_every_trace_command(fixtures_dir, tmp_path):
    """Each real ``*.xplane.pb`` of tests/data/real: ``trace breakdown | diff | tail | export`` exit 0,
    breakdown parts add up to each span, a trace against itself differs by nothing, export holds every
    event, and the per (program, HLO op) figures are xprof's hlo_stats rows."""
    files = sorted(fixtures_dir.rglob("*.xplane.pb"))
    assert files
    for path in files:
        def run(*args):
            result = CliRunner().invoke(cli, ["trace", *map(str, args)])
            assert result.exit_code == 0, (path, args, result.output)
            return result.stdout

        rows = json.loads(run("breakdown", path, "--json"))["rows"]
        assert rows and all(r["compute_ps"] + r["ici_ps"] + r["dma_ps"] + r["idle_ps"] == r["span_ps"] for r in rows)
        assert all(min(r["compute_ps"], r["ici_ps"], r["dma_ps"], r["idle_ps"]) >= 0 for r in rows)
        same = json.loads(run("diff", path, path, "--json"))["rows"]
        assert same and all(r["delta_ps"] == 0 and r["a_count"] == r["b_count"] for r in same)
        chips = json.loads(run("tail", path, "--json"))["chips"]
        assert sorted(c["device"] for c in chips) == sorted({r["device"] for r in rows})
        out = tmp_path / f"{path.stem}.json"
        assert run("export", path, "--perfetto", out).startswith(f"{len(events.load([path]))} events")
        assert_same_rows(perfkit_hlo_stats(path), xprof_hlo_stats(path))
