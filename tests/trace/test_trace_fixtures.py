"""Real profiles from other projects (tests/data/real): they parse, their ops are what its
README says, their breakdowns add up to the step spans, and every xplane goes through every trace
command with xprof's figures."""

import gzip
import json
import shutil

import pytest
from click.testing import CliRunner
from test_trace_xprof import assert_same_rows, perfkit_hlo_stats, xprof_hlo_stats
from trace_builders import on_host

from perfkit.cli import cli
from perfkit.trace import breakdown, events
from perfkit.trace.protos import XSPACE

PARTS = ["compute_ps", "ici_ps", "dma_ps", "idle_ps"]
MI300 = "mi300_jax_conv_8gpu.xplane.pb"
NO_HLO = {"tf_gpu_multi_worker.xplane.pb"}  # a TensorFlow GPU profile: kernels, no XLA


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
        if path.name in NO_HLO:  # both read no HLO op there
            assert perfkit_hlo_stats(path) == xprof_hlo_stats(path) == {}
        else:
            assert_same_rows(perfkit_hlo_stats(path), xprof_hlo_stats(path))


def _copy(src, dst, host: str, later_ns: int = 0) -> None:
    """The XSpace at ``src`` written to ``dst`` as machine ``host``'s (its recorded hostname), every line's
    timestamp ``later_ns`` later (another session's)."""
    space = XSPACE.FromString(src.read_bytes())
    space.hostnames[:] = [host]
    for plane in space.planes:
        for line in plane.lines:
            line.timestamp_ns += later_ns
    dst.write_bytes(space.SerializeToString())


def test_two_hosts_traces_named_as_one_rank_are_refused(fixtures_dir, tmp_path):
    """Two hosts' profiles whose names end in one rank (``a_1``, ``b_1``: torch_tpu names its files
    ``<host>_<rank>``) hold the same chips at the same time: refused in one line naming both, not read as one
    rank's 8 chips (their ops merged)."""
    for host in ("a", "b"):
        _copy(fixtures_dir / "xplane" / MI300, tmp_path / f"{host}_1.xplane.pb", host)
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert (f"{tmp_path / 'b_1.xplane.pb'}: rank 1 device 0's events of no step overlap in time those in "
            f"{tmp_path / 'a_1.xplane.pb'}") in result.output


def test_one_ranks_sessions_in_two_files_are_read_together(fixtures_dir, tmp_path):
    """One rank's two profiling sessions, the second 10 s after the first (``host_1`` in two session
    folders): read together as rank 1's, each chip's span from its first op in the first to its last in the
    second."""
    real = fixtures_dir / "xplane" / MI300
    for session in ("s1", "s2"):
        (tmp_path / session).mkdir()
    _copy(real, tmp_path / "s1" / "host_1.xplane.pb", "host")
    _copy(real, tmp_path / "s2" / "host_1.xplane.pb", "host", 10 * 10**9)
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    ops = events.device_ops(events.load([real]))
    alone = (ops["start_ps"] + ops["dur_ps"]).groupby(ops["device"]).max() - ops.groupby("device")["start_ps"].min()
    assert [(r["rank"], r["device"]) for r in rows] == [(1, d) for d in range(8)]
    assert [r["span_ps"] for r in rows] == [10**13 + int(alone[d]) for d in range(8)]


@pytest.mark.parametrize("host, rank", [("tw003", 2), ("other", 0), (None, 0)])
def test_a_name_ending_in_a_number_is_a_rank_where_it_is_the_recorded_host_s(fixtures_dir, tmp_path, host, rank):
    """torch_tpu's ``<host>_<rank>.xplane.pb`` names rank 2 where the XSpace was profiled on ``<host>`` (the
    MI300 profile records tw003); a name that only ends in a number (xprof's own ``tpu_inference_2`` records no
    machine) is a host's file, numbered among the hosts from 0."""
    src = fixtures_dir / "xplane" / (MI300 if host else "xprof_tpu_inference_2.xplane.pb")
    path = tmp_path / "tw003_2.xplane.pb"
    if host == "other":
        _copy(src, path, host)
    else:
        shutil.copy(src, path)
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert {r["rank"] for r in json.loads(result.stdout)["rows"]} == {rank}


def test_hosts_named_by_their_addresses_are_ranks_of_their_own(fixtures_dir, tmp_path):
    """TensorFlow names a worker's file <ip>_<port>.xplane.pb, and a profile may be named for its host's address:
    10.0.0.1 and 10.0.0.2 are two hosts, ranks 0 and 1 (the name's first dot had made both host "10", one rank,
    refused as one run's traces given twice). A Kineto writer's millisecond timestamp after the worker's name is no
    part of its host: one worker's two sessions are one rank's."""
    for host in ("10.0.0.1", "10.0.0.2"):  # each worker's profile recording its own host, as no copy does
        on_host(fixtures_dir / "xplane" / "tf_gpu_multi_worker.xplane.pb", tmp_path / f"{host}.xplane.pb", host)
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    assert {(r["rank"], r["device"]) for r in json.loads(result.stdout)["rows"]} == {
        (rank, device) for rank in (0, 1) for device in (1, 4, 6)}
    names = ["worker0.1623213129365.pt.trace.json.gz", "worker0.1623213199999.pt.trace.json.gz",
             "host.example.com.xplane.pb", "host.example.com.trace.json.gz", "34.83.195.179_6003.xplane.pb"]
    for name in names:
        (tmp_path / "names" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "names" / name).touch()
    assert [rank for _, rank in events.ranked_files([tmp_path / "names" / n for n in names])] == [0, 0, 1, 1, 2]
    # a Kineto file's host is the same rule's: two address-named hosts' NCCL messages are each file's (both had
    # been host "10": one file's messages overwrote the other's, and every collective's bytes were lost)
    doc = json.loads(gzip.decompress((fixtures_dir / "kineto" / "hta_nccl_data.json.gz").read_bytes()))
    doc.pop("distributedInfo", None)
    for shift, host in enumerate(("10.0.0.1", "10.0.0.2")):  # (the same ops at the same times: one trace twice)
        (tmp_path / "k").mkdir(exist_ok=True)
        shifted = [{**e, "ts": e["ts"] + shift} if "ts" in e else e for e in doc["traceEvents"]]
        (tmp_path / "k" / f"{host}_6003.1699999999999.pt.trace.json").write_text(
            json.dumps({**doc, "traceEvents": shifted}))
    found = json.loads(CliRunner().invoke(cli, ["trace", "collectives", str(tmp_path / "k"), "--json"]).stdout)
    assert found["ops"] and all(r["bytes"] is not None for r in found["ops"])


def test_a_run_directory_given_whole_is_refused_saying_what_to_pass(fixtures_dir, tmp_path, monkeypatch):
    """A newcomer's `perfkit trace breakdown RUN`: its trials' traces hold the same steps; the line names the two
    trials and what to pass instead (it said "pass one run's traces", and they had)."""
    run = tmp_path / "run"
    for trial in ("00-a", "01-b"):
        (run / "trials" / trial / "rank0" / "trace").mkdir(parents=True)
        shutil.copy(fixtures_dir / "kineto" / "rank-0.json.gz", run / "trials" / trial / "rank0" / "trace")
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(run)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert result.output.endswith(f": trials 00-a and 01-b of the run {run} (a run directory holds a folder per "
                                  f"trial): pass one trial's folder ({run / 'trials' / '00-a'}), or the run to "
                                  f"`perfkit trace attribution {run}` for its A/B attribution\n"), result.output
    # from inside the run directory the run is this folder, where the line read "of the run . (a run directory"
    monkeypatch.chdir(run)
    result = CliRunner().invoke(cli, ["trace", "breakdown", "trials/00-a", "trials/01-b"])
    assert result.exit_code == 2 and ": trials 00-a and 01-b of the run in this folder (a run directory holds" in (
        result.output), result.output


def test_one_ranks_step_in_two_files_is_refused(fixtures_dir, tmp_path):
    """A rank's Kineto trace given twice (two trials' folders): its steps 551 and 552 in both files, refused
    in one line by the first step they share."""
    for trial in ("a", "b"):
        (tmp_path / trial).mkdir()
        shutil.copy(fixtures_dir / "kineto" / "rank-0.json.gz", tmp_path / trial / "rank-0.json.gz")
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(tmp_path)])
    assert result.exit_code == 2 and result.output.count("\n") == 1, result.output
    assert (f"{tmp_path / 'b' / 'rank-0.json.gz'}: rank 0 step 551 is also in {tmp_path / 'a' / 'rank-0.json.gz'}"
            in result.output)


def test_a_chip_without_step_markers_among_chips_with_some_reads_step_none(fixtures_dir):
    """A newcomer's: TensorFlow's GPU 1 has no Steps line where GPUs 4 and 6 have one; its row read step `-1`, said
    nowhere. It reads `none`, and the header says what that is. The shares are rounded to add up to 100% (idle
    13.384 of 13.417 ms is 99.75%, shown 99.7%): the table's header says so."""
    path = fixtures_dir / "xplane" / "tf_gpu_multi_worker.xplane.pb"
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path)])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "; step none: a chip without step markers, one span from its first device op to its last;" in lines[0]
    table = [line.split()[:3] for line in lines if line.split()[:2] in (["0", "1"], ["0", "4"], ["0", "6"])]
    assert table[:3] == [["0", "1", "none"], ["0", "4", "0"], ["0", "6", "0"]]
    assert "mean step per chip (ms, % of the span, rounded to add up to 100%):" in lines
