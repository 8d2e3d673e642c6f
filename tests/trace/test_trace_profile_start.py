"""Files of several processes on one clock: an XSpace's line timestamps count from its profile's start (TSL's
NormalizeTimestamps), which its ``Task Environment`` plane records; the ranks of one run are lined up by it.

The referee is protobuf's own parse of the files (tests/data/jax_cpu_ring: the XSpaces JAX's profiler wrote for the
4 processes of one ring program on one machine), each op's wall-clock time summed by hand below from its profile
start, its line's timestamp and its own offset and duration: no perfkit reader is involved.
"""

import json
from pathlib import Path

from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.trace.protos import XSPACE

RING = Path(__file__).parents[1] / "data" / "jax_cpu_ring"


def _space(path: Path):
    space = XSPACE()
    space.ParseFromString(path.read_bytes())
    return space


def _stat_names(plane) -> dict[int, str]:
    return {k: v.name for k, v in plane.stat_metadata.items()}


def _device_ops(rank: int) -> list[tuple[str, int, int]]:
    """(op name, wall-clock start ps, end ps) of a rank's CPU-device ops (``hlo_op`` and ``device_ordinal``
    stats, on the event or its metadata), in line order."""
    planes = {p.name: p for p in _space(RING / f"rank{rank}.xplane.pb").planes}
    env, cpu = planes["Task Environment"], planes["/host:CPU"]
    start = next(s.uint64_value for s in env.stats if _stat_names(env)[s.metadata_id] == "profile_start_time")
    names, ops = _stat_names(cpu), []
    for line in cpu.lines:
        for e in line.events:
            meta = cpu.event_metadata[e.metadata_id]
            if {"hlo_op", "device_ordinal"} <= {names[s.metadata_id] for s in (*e.stats, *meta.stats)}:
                at = (start + line.timestamp_ns) * 1000 + e.offset_ps
                ops.append((meta.name, at, at + e.duration_ps))
    return ops


def _json(args: list[str]) -> dict:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_ranks_files_are_lined_up_by_their_profile_starts():
    """The processes started profiling up to 362 ms apart: each file's times counted from 0 would make the
    rank that started last look 362 ms early to stop. By the clock, rank 2 stopped 3.892 ms before rank 0."""
    ends = {rank: max(end for _, _, end in _device_ops(rank)) for rank in range(4)}
    last = max(ends.values())
    chips = _json(["trace", "tail", "--json", str(RING)])["chips"]
    assert {c["rank"]: c["before_last_ps"] for c in chips} == {rank: last - end for rank, end in ends.items()}
    assert chips[0]["rank"] == 2 and chips[0]["before_last_ps"] == 3_892_265_000


def test_one_hosts_processes_share_a_clock_for_the_collectives_skew():
    """The ranks' first ring hop (``ppermute.9`` of step 0) matched across the 4 processes of one machine: its
    skew is the latest rank's arrival less the earliest's, by the clock."""
    starts = [next(at for name, at, _ in _device_ops(rank) if name == "ppermute.9") for rank in range(4)]
    ops = _json(["trace", "collectives", "--json", str(RING)])["ops"]
    first = next(o for o in ops if o["step"] == 0 and o["op"] == "ppermute.9")
    assert first["chips"] == 4
    assert first["skew_ps"] == max(starts) - min(starts)


def test_files_without_a_profile_start_are_noted_and_their_skews_unmeasured(tmp_path):
    """Without the ``Task Environment`` plane nothing says when each file's 0 was: the files are lined up at their
    first events, which the output says, and no skew or wait is measured across them (``-``, JSON null)."""
    for rank in (0, 1):
        space = _space(RING / f"rank{rank}.xplane.pb")
        kept = [p for p in space.planes if p.name != "Task Environment"]
        del space.planes[:]
        space.planes.extend(kept)
        (tmp_path / f"rank{rank}").mkdir()
        (tmp_path / f"rank{rank}" / "vm.xplane.pb").write_bytes(space.SerializeToString())
    result = CliRunner().invoke(cli, ["trace", "collectives", str(tmp_path / "rank0"), str(tmp_path / "rank1")])
    assert result.exit_code == 0, result.output
    assert "its timestamps count from its profile's start, which it does not record" in result.stderr
    assert "not by the clock: whose trace ends first across it and them is not known" in result.stderr  # not a chip's
    header, first = result.stdout.splitlines()[1:3]
    assert header.split()[-3:] == ["skew", "wait", "transfer"]
    assert first.split()[-3:] == ["-", "-", "-"]
    ops = _json(["trace", "collectives", "--json", str(tmp_path / "rank0"), str(tmp_path / "rank1")])["ops"]
    assert {(o["skew_ps"], o["wait_ps"], o["transfer_ps"]) for o in ops} == {(None, None, None)}


def test_a_file_without_a_profile_start_among_files_with_theirs(tmp_path):
    """A review's: rank 3's file without its ``Task Environment`` beside three with theirs. It is noted and placed as
    if its profile had started with the others' (refused before, as starting 57 years after them), and left out of
    the collectives' skews: ``ppermute.9``'s in step 0 is ranks 0-2's alone, by the clock (its mean had taken rank
    3's unmeasured 0 in)."""
    for rank in range(4):
        space = _space(RING / f"rank{rank}.xplane.pb")
        if rank == 3:
            kept = [p for p in space.planes if p.name != "Task Environment"]
            del space.planes[:]
            space.planes.extend(kept)
        (tmp_path / f"rank{rank}.xplane.pb").write_bytes(space.SerializeToString())
    result = CliRunner().invoke(cli, ["trace", "tail", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert f"{tmp_path / 'rank3.xplane.pb'}: its timestamps count from its profile's start" in result.stderr
    starts = [next(at for name, at, _ in _device_ops(rank) if name == "ppermute.9") for rank in range(3)]
    ops = _json(["trace", "collectives", "--json", str(tmp_path)])["ops"]
    first = next(o for o in ops if o["step"] == 0 and o["op"] == "ppermute.9")
    assert first["skew_ps"] == max(starts) - min(starts)


def test_a_profile_start_past_any_wall_clock_is_refused(tmp_path):
    """A review's: a damaged ``profile_start_time`` near 2**64 ns was taken, and ``trace export`` wrote an origin of
    18446744073709559444 ns (the year 2554); every command now refuses the file in one line."""
    space = _space(RING / "rank1.xplane.pb")
    env = next(p for p in space.planes if p.name == "Task Environment")
    stat = next(s for s in env.stats if _stat_names(env)[s.metadata_id] == "profile_start_time")
    stat.uint64_value = 2**64 - 6
    path = tmp_path / "rank1.xplane.pb"
    path.write_bytes(space.SerializeToString())
    for command in (["tail"], ["breakdown"], ["export", "--perfetto", str(tmp_path / "out.json")]):
        result = CliRunner().invoke(cli, ["trace", *command, str(path)])
        assert result.exit_code == 2, result.output
        assert result.stderr == (f"perfkit: {path}: its Task Environment plane's profile_start_time, 18446744073709551610 "
                                 "ns, is no epoch time (after 2116)\n")
    assert not (tmp_path / "out.json").exists()
