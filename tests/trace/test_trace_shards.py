"""``perfkit.trace.shards``: shards analysed apart in worker processes give the breakdown rows, the diff
tables, the tail and the collectives of the files read together (``breakdown(load(...))``,
``diff(load(...), load(...))``, ``tail.chips(load(...))``, ``collectives.analyse(load(...))``: what every
other test checks against HTA, xprof and hand-made cases); planes that need each other are cut into one
shard before anything is decoded, and what cannot be cut apart exactly is refused in one line."""

import multiprocessing
import os
import signal

import pandas as pd
import pytest
from click.testing import CliRunner
from noted import UNSIZED, noted
from trace_builders import TPU_START_NS, on_host, started

from perfkit.cli import cli
from perfkit.errors import BadInput
from perfkit.trace import breakdown, collectives, diff, events, shards, tail, xplane
from perfkit.trace.synthetic import FINGERPRINT, Uint64, XSpaceWriter, tpu_profile

pytestmark = pytest.mark.filterwarnings("ignore:os.fork:RuntimeWarning")  # JAX's, where other tests imported it
US = 1_000_000


@pytest.fixture
def forking(monkeypatch):
    """Workers for these small files (the size threshold lowered), a plane each (a small file is otherwise
    one task), also after other tests imported JAX."""
    monkeypatch.setattr(xplane, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(shards, "SMALL_PLANE_BYTES", 0)
    monkeypatch.setattr(xplane, "may_start_workers", lambda: True)
    monkeypatch.setattr(shards, "may_start_workers", lambda: True)


def _read_together(paths, window):
    frame = events.load(paths, columns=breakdown.EVENT_COLUMNS, workers=1)
    return breakdown.breakdown(frame, window), frame.attrs["steps_from"]


def _host_annotated(path, chips=2, steps=3, host="h"):
    """TPU chips without ``Steps`` lines whose host marks the steps (``StepTraceAnnotation``'s step_num)."""
    space = XSpaceWriter(host)
    space.program(FINGERPRINT, "jit_step", [("fusion.1", "fusion", "f32[8]"), ("all-gather-done.1", "all-gather-done",
                                                                                "f32[8]")])
    for chip in range(chips):
        plane = space.plane(f"/device:TPU:{chip}")
        ops = plane.line("XLA Ops", 10 + 1000 * chip)  # each plane's clock from its own first line
        ids = [plane.op(n, program_id=Uint64(FINGERPRINT), hlo_category=c)
               for n, c in (("fusion.1", "convolution fusion"), ("all-gather-done.1", "all-gather"))]
        for s in range(steps):
            ops.event(ids[0], (100 * s + 5) * US, 40 * US)
            ops.event(ids[1], (100 * s + 50) * US, (20 + 10 * chip) * US)
    cpu = space.plane("/host:CPU")
    host = cpu.line("python3", 10)
    for s in range(steps):
        host.event(cpu.op("train"), 100 * s * US, 90 * US, step_num=s, _r=1)
    return started(space, TPU_START_NS).save(path)  # (two hosts' profiles started together)


@pytest.mark.parametrize("window", ["step", "trace"])
@pytest.mark.parametrize("profile", ["4 TPU chips with Steps lines", "1 TPU chip, no markers", "3 hosts of 2 chips",
                                     "8 MI300 GPUs (real)"])
def test_planes_apart_give_the_rows_of_the_files_read_together(tmp_path, monkeypatch, forking, request,
                                                               profile, window):
    paths = {"4 TPU chips with Steps lines": lambda: [tpu_profile(tmp_path / "t.xplane.pb", chips=4, steps=3)],
             "1 TPU chip, no markers": lambda: [tpu_profile(tmp_path / "t.xplane.pb", chips=1, steps=3)],
             "3 hosts of 2 chips": lambda: [tpu_profile(tmp_path / f"host{h}.xplane.pb", chips=2, steps=2, host=f"h{h}")
                                            for h in range(3)],
             "8 MI300 GPUs (real)": lambda: [request.getfixturevalue("fixtures_dir") / "xplane"
                                             / "mi300_jax_conv_8gpu.xplane.pb"]}[profile]()
    rows, steps_from = _read_together(paths, window)

    def together(*args, **kwargs):
        raise AssertionError("read together, not plane by plane")

    by_kind = diff.diff(*(events.load(p, workers=1) for p in (paths, paths[:1])), "kind", window)
    by_op = diff.diff(*(events.load(p, workers=1) for p in (paths[:1], paths)), "op", window)
    whole = events.load(paths, workers=1)
    chips, last = tail.chips(whole), tail.last_ops(whole, 3)
    comms = collectives.analyse(whole) if window == "step" else None  # (collectives count in steps only)
    monkeypatch.setattr(events, "load", together)
    apart, apart_from = shards.breakdown_traces(paths, window=window)
    pd.testing.assert_frame_equal(apart, rows)
    assert apart_from == steps_from
    pd.testing.assert_frame_equal(shards.diff_traces(paths, paths[:1], "kind", window=window), by_kind)
    pd.testing.assert_frame_equal(shards.diff_traces(paths[:1], paths, "op", window=window), by_op)
    apart_chips, apart_last = shards.tail_traces(paths, 3)  # (categories merged in another order)
    pd.testing.assert_frame_equal(apart_chips, chips, check_categorical=False)
    pd.testing.assert_frame_equal(apart_last, last, check_categorical=False)
    if comms is not None:
        apart_comms, comms_from = shards.collectives_traces(paths)
        for table in ("instances", "ops", "steps"):
            pd.testing.assert_frame_equal(apart_comms[table], comms[table])
        assert apart_comms["chip_steps"] == comms["chip_steps"] and comms_from == whole.attrs["steps_from"]
        assert len(comms["instances"]) == {"4 TPU chips with Steps lines": 4 * 3 * 3, "1 TPU chip, no markers": 9,
                                           "3 hosts of 2 chips": 3 * 2 * 2 * 3, "8 MI300 GPUs (real)": 0}[profile]
    chips = {"4 TPU chips with Steps lines": 4, "1 TPU chip, no markers": 1, "3 hosts of 2 chips": 2,
             "8 MI300 GPUs (real)": 8}[profile]
    assert len(rows) > 0 and rows["device"].nunique() == chips


def test_chips_without_markers_take_the_hosts_annotations(tmp_path, forking):
    """The chips' steps are on another plane (the host's): cut into one shard with it, before anything is
    decoded (the host's ``step_num`` stat, the chips' lack of a Steps line), the steps are the host's 0, 1,
    2, not one span over the whole trace as each chip's plane alone would say."""
    path = _host_annotated(tmp_path / "a.xplane.pb")
    cut = shards.cut([path], window="step")
    assert [sorted(job.name for job in shard.planes or ()) for shard in cut.shards] == [[]]  # the file read whole
    assert [[job.name for job in shard.planes] for shard in shards.cut([path], window="trace").shards] == [
        ["/device:TPU:0"], ["/device:TPU:1"], ["/host:CPU"]]  # no markers needed: apart
    rows, steps_from = shards.breakdown_traces([path])
    assert rows["step"].tolist() == [0, 1, 2, 0, 1, 2] and steps_from == ["step annotations"]
    pd.testing.assert_frame_equal(rows, _read_together([path], "step")[0])
    # every chip's ICI per step, by hand: its all-gather-done of 20 + 10 * chip us
    assert (rows["ici_ps"] // US).tolist() == [20, 20, 20, 30, 30, 30]
    whole = shards.breakdown_traces([path], window="trace")[0]  # no markers needed: apart again
    pd.testing.assert_frame_equal(whole, _read_together([path], "trace")[0])
    assert whole["step"].tolist() == [-1, -1] and (whole["start_ps"] // US).tolist() == [5, 6]


SMALL_FILE_PROFILES = {"3 hosts of 2 chips with Steps lines": 3 * 2 * 2, "2 hosts, chips marked by the host": 2 * 2 * 3,
                       "2 ranks of 8 MI300 GPUs (real)": 2 * 8}  # -> breakdown rows: chips x steps


@pytest.mark.parametrize("profile", SMALL_FILE_PROFILES)
def test_files_of_small_planes_are_a_task_each(tmp_path, monkeypatch, forking, request, profile):
    """Each file read whole in a worker gives the rows, diff and tail of the files read together, also where
    its chips take their steps from its host's annotations (which planes apart could not), and on the real
    MI300 profile (whose op times test_trace_xprof holds to xprof's hlo_stats and op_profile), one file per
    rank folder."""
    if profile.startswith("3"):
        paths = [tpu_profile(tmp_path / f"host{h}.xplane.pb", chips=2, steps=2, host=f"h{h}") for h in range(3)]
    elif profile.startswith("2 hosts"):
        paths = [_host_annotated(tmp_path / f"{h}.xplane.pb", chips=2, host=h) for h in "ab"]
    else:
        real = request.getfixturevalue("fixtures_dir") / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"
        paths = []
        for rank in range(2):
            (tmp_path / f"rank{rank}").mkdir()
            paths.append(tmp_path / f"rank{rank}" / real.name)
            on_host(real, paths[-1], f"worker{rank}")  # each rank's profile its own process's, as no copy is
    rows, steps_from = _read_together(paths, "step")
    whole = events.load(paths, workers=1)
    by_kind = diff.diff(whole, whole, "kind")  # (one file alone is one task: read together)
    chips, last = tail.chips(whole), tail.last_ops(whole, 3)

    def refused(*args, **kwargs):
        raise AssertionError("read together, not a file a task")

    def one_task_a_file(jobs, *args):
        assert len(jobs) > 1 and len({job.path for job in jobs}) == 1  # a file's planes together
        return read_planes(jobs, *args)

    monkeypatch.setattr(shards, "SMALL_PLANE_BYTES", 1 << 30)
    monkeypatch.setattr(events, "load", refused)
    read_planes = xplane.read_planes
    monkeypatch.setattr(xplane, "read_planes", one_task_a_file)  # the forked workers inherit it
    apart, apart_from = shards.breakdown_traces(paths)
    pd.testing.assert_frame_equal(apart, rows)
    assert apart_from == steps_from and len(rows) == SMALL_FILE_PROFILES[profile]
    pd.testing.assert_frame_equal(shards.diff_traces(paths, paths, "kind"), by_kind)
    apart_chips, apart_last = shards.tail_traces(paths, 3)
    pd.testing.assert_frame_equal(apart_chips, chips, check_categorical=False)
    pd.testing.assert_frame_equal(apart_last, last, check_categorical=False)


def _hang(path):
    """Chip 0 stops after 10 ops of 10 us; chips 1 and 2 run 40 and then wait 3.6 ms in an all-gather."""
    space = XSpaceWriter("h")
    space.program(FINGERPRINT, "jit_step", [("fusion.1", "fusion", "f32[8]"), ("all-gather-done.1", "all-gather-done",
                                                                                "f32[8]")])
    for chip in range(3):
        plane = space.plane(f"/device:TPU:{chip}")
        ops = plane.line("XLA Ops", 10)
        for i in range(10 if chip == 0 else 40):  # each op its own name: which one a chip was in shows
            ops.event(plane.op(f"fusion.{i}", hlo_category="convolution fusion"), 10 * i * US, 10 * US)
        if chip:
            ops.event(plane.op("all-gather-done.1", program_id=Uint64(FINGERPRINT), hlo_category="all-gather"),
                      400 * US, 3600 * US)
    return space.save(path)


def _collectives_apart(path, monkeypatch) -> tuple[dict, list[str]]:
    """``shards.collectives_traces`` of one file, its planes apart (reading it together fails the test),
    checked equal to ``collectives.analyse`` of the file read together."""
    whole = collectives.analyse(events.load([path], workers=1))
    monkeypatch.setattr(events, "load", lambda *args, **kwargs: pytest.fail("read together"))
    found, steps_from = shards.collectives_traces([path])
    for table in ("instances", "ops", "steps"):
        pd.testing.assert_frame_equal(found[table], whole[table])
    return found, steps_from


def test_collectives_apart_match_across_planes(tmp_path, monkeypatch, forking):
    """Each chip's plane apart, its collective instances are matched with the other planes' as in the file
    read together: trace_builders.straggler_trace's hand-worked waits, skews and late chips (4 chips, a
    plane each, the planted late chip's waits inside the others' collectives)."""
    from trace_builders import STRAGGLER_EXPECTED, U, straggler_trace

    # its reduce-scatter's text names no groups, nor its step 1 all-gather's: their group size unknown, read either way
    with noted(UNSIZED + r": 2 ops \(1 reduce-scatter, 1 all-gather\)"):
        found, steps_from = _collectives_apart(straggler_trace(tmp_path / "s.xplane.pb"), monkeypatch)
    inst = found["instances"]
    times = ("time_ps", "exposed_ps", "hidden_ps", "wait_ps", "transfer_ps")
    got = {(r.step, r.op, r.device): tuple(getattr(r, c) // U for c in times) for r in inst.itertuples()}
    assert got == STRAGGLER_EXPECTED and inst["device"].nunique() == 4 and steps_from == ["Steps line"]
    assert found["steps"]["device"].tolist() == [3, 1]  # the late chip of each step


def _two_clocks(path):
    """2 TPU chips, step [0, 100) us each; chip c: fusion.1 [5, 45 + 10c), all-gather-done.1 [50 + 10c, 70)
    (times from the first line of the file); chip 1's plane counts its lines from 20 us later. Its program holds the
    gather's done alone, whose groups are its start's: its group size, so its bytes, unknown."""
    space = XSpaceWriter("h")
    space.program(FINGERPRINT, "jit_step", [("fusion.1", "fusion", "f32[8]"), ("all-gather-done.1", "all-gather-done",
                                                                                "f32[8]")])
    for chip in range(2):
        plane = space.plane(f"/device:TPU:{chip}")
        base_ns = 10 + 20_000 * chip
        back = 20 * US * chip  # the plane's own clock
        plane.line("Steps", base_ns).event(plane.op("0"), 0 - back, 100 * US)
        ops = plane.line("XLA Ops", base_ns)
        ops.event(plane.op("fusion.1", program_id=Uint64(FINGERPRINT), hlo_category="convolution fusion"),
                  5 * US - back, (40 + 10 * chip) * US)
        ops.event(plane.op("all-gather-done.1", program_id=Uint64(FINGERPRINT), hlo_category="all-gather"),
                  (50 + 10 * chip) * US - back, (20 - 10 * chip) * US)
    return space.save(path)


def test_collectives_apart_on_planes_of_their_own_clocks(tmp_path, monkeypatch, forking):
    """Planes whose lines count from different instants: the instances are matched on the file's one clock.
    By hand: chip 0 arrives at 50 us, chip 1 at 60; skew 10; chip 0 waits 10 of its 20 exposed us."""
    with noted(UNSIZED + r": 1 ops \(1 all-gather\)"):  # its done's start not in its program
        inst = _collectives_apart(_two_clocks(tmp_path / "c.xplane.pb"), monkeypatch)[0]["instances"]
    got = [(r.device, r.start_ps // US, r.skew_ps // US, r.last, r.wait_ps // US, r.transfer_ps // US)
           for r in inst.itertuples()]
    assert got == [(0, 50, 10, False, 10, 10), (1, 60, 10, True, 0, 10)]


def test_a_run_summary_from_planes_apart(tmp_path, monkeypatch, forking):
    """A run's trace summary (breakdown parts, op deltas, collectives) from each trial's planes apart, as
    from its traces read together: two variants, a trial each of two rank processes (a's: the 4 chips of
    trace_builders.straggler_trace, whose chips differ; b's: 2 TPU chips of tpu_profile)."""
    from trace_builders import straggler_trace

    from perfkit.trace import runs

    trials = []
    for index, variant in enumerate("ab"):
        for rank in range(2):
            path = tmp_path / f"trials/{index:02d}-{variant}/rank{rank}/trace/h.xplane.pb"
            path.parent.mkdir(parents=True)
            host = f"h{rank}"  # each rank's profile its own process's, as no copy is
            straggler_trace(path, host) if variant == "a" else tpu_profile(path, chips=2, steps=3, host=host)
        trials.append({"index": index, "variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"})
    assert all(len(shards.cut(sorted((tmp_path / t["dir"]).glob("rank*/trace"))).shards) > 2 for t in trials)
    got = runs.summarize(tmp_path, trials, ["a", "b"])
    monkeypatch.setattr(xplane, "PARALLEL_BYTES", 1 << 40)  # one shard: the files read together
    together = runs.summarize(tmp_path, trials, ["a", "b"])
    assert got == together
    assert got["variants"]["b"]["chip_steps"] == 2 * 2 * 3 and got["collectives"]["b"]["kinds"]


def test_a_chip_stopping_long_before_the_others_is_read_again(tmp_path, forking):
    """The first stop (100 us) is long before the others' last eighth: what they were in then (the fusion
    100-110 us) is not among their planes' candidates, so a second round over the shards finds it."""
    path = _hang(tmp_path / "hang.xplane.pb")
    chips, last = shards.tail_traces([path], 2)
    assert chips["device"].tolist() == [0, 1, 2] and chips["last_end_ps"].tolist() == [100 * US, 4000 * US, 4000 * US]
    assert chips["at_first_stop_name"].tolist() == ["fusion.9", "fusion.10", "fusion.10"]
    assert (last["end_ps"] // US).tolist() == [90, 100, 400, 4000, 400, 4000]
    whole = events.load([path], workers=1)
    pd.testing.assert_frame_equal(chips, tail.chips(whole), check_categorical=False)
    pd.testing.assert_frame_equal(last, tail.last_ops(whole, 2), check_categorical=False)


def test_a_plane_refused_in_a_worker_is_the_commands_one_line(tmp_path, monkeypatch, forking):
    """A worker's BadInput is the command's: of the planes refused, the first in the file's order (as reading
    the file whole would say), whichever worker finished first."""
    path = tpu_profile(tmp_path / "t.xplane.pb", chips=2, steps=2)

    def refuse(jobs, *args):
        raise BadInput(f"refused {jobs[0].name}", path=jobs[0].path)

    monkeypatch.setattr(xplane, "read_planes", refuse)  # the forked workers inherit it
    first = next(job.name for job in xplane.planes(path)[1] if xplane.events_read(job.name))
    with pytest.raises(BadInput) as refused:
        shards.breakdown_traces([path])
    assert refused.value.line() == f"{path}: refused {first}" and first == "/device:TPU:0"


def test_a_worker_killed_mid_plane_ends_the_command_with_one_line(tmp_path, monkeypatch, forking):
    """The out-of-memory killer's SIGKILL of a worker: one line, exit 2, no worker left (multiprocessing's
    pool alone would wait for the lost plane forever)."""
    path = tpu_profile(tmp_path / "t.xplane.pb", chips=4, steps=2)
    monkeypatch.setattr(xplane, "read_planes", lambda *args: os.kill(os.getpid(), signal.SIGKILL))  # (inherited)
    for command in ("breakdown", "collectives"):
        result = CliRunner().invoke(cli, ["trace", command, str(path)])
        assert result.exit_code == 2 and result.output.strip().splitlines() == [
            "perfkit: a worker process ended before its task was done (killed? out of memory?)"]
    assert not multiprocessing.active_children()


def test_the_command_prints_the_same_either_way(tmp_path, monkeypatch, forking):
    a = str(tpu_profile(tmp_path / "a.xplane.pb", chips=4, steps=3))
    b = str(tpu_profile(tmp_path / "b.xplane.pb", chips=2, steps=2))
    commands = [["trace", "breakdown", "--json", a, b], ["trace", "diff", a, b], ["trace", "diff", "--json", a, b],
                ["trace", "tail", a, b], ["trace", "tail", "--json", "-n", "2", a, b], ["trace", "collectives", a, b],
                ["trace", "collectives", "--json", a, b]]
    apart = [CliRunner().invoke(cli, c) for c in commands]
    monkeypatch.setattr(xplane, "PARALLEL_BYTES", 1 << 40)  # one shard: the files read together
    together = [CliRunner().invoke(cli, c) for c in commands]
    for one, other in zip(apart, together):
        assert one.exit_code == other.exit_code == 0, one.output
        assert one.output == other.output


HELD_READS = ("from perfkit.trace import shards, xplane\n"
              "xplane.PARALLEL_BYTES, shards.SMALL_PLANE_BYTES = 0, 0  # workers for a small file, a plane each\n"
              "os.sched_getaffinity = lambda pid: {0, 1}  # two, whatever the machine has\n"
              "xplane.read_planes = busy  # the workers busy until stopped\n")


@pytest.mark.parametrize("stop", ["Ctrl-C", "the command killed"])  # as HeldCommand.ends_with_its_workers takes them
def test_workers_end_with_the_command(tmp_path, held_command, stop):
    """Ctrl-C (to the process group, as a terminal sends it) stops the command with one line and no worker's
    traceback, also when it comes while the workers are still being set up; a SIGKILL of the command (a CI
    timeout's) takes its workers with it."""
    path = tpu_profile(tmp_path / "t.xplane.pb", chips=4, steps=2)
    held_command.ends_with_its_workers(HELD_READS, ["trace", "breakdown", str(path)], stop)


def _two_chips_and_host(path, host_ops: bool, instants: bool = False):
    """2 TPU chips with ``Steps`` and ``XLA Ops`` lines (3 steps of 100 us; ``instants``: 1 ps markers) and a
    host plane annotating the steps; ``host_ops``: the host also runs an op of device 0 (``hlo_op`` and
    ``device_ordinal`` stats), 60-80 us of each step."""
    space = XSpaceWriter("h")
    space.program(FINGERPRINT, "jit_step", [("fusion.1", "fusion", "f32[8]")])
    for chip in range(2):
        plane = space.plane(f"/device:TPU:{chip}")
        marks, ops = plane.line("Steps", 10), plane.line("XLA Ops", 10)
        fusion = plane.op("fusion.1", program_id=Uint64(FINGERPRINT), hlo_category="convolution fusion")
        for s in range(3):
            marks.event(plane.op(str(s)), 100 * s * US, 1 if instants else 100 * US, step_num=s)
            ops.event(fusion, (100 * s + 5) * US, 40 * US)
    cpu = space.plane("/host:CPU")
    line = cpu.line("python3", 10)
    for s in range(3):
        line.event(cpu.op("train"), 100 * s * US, 90 * US, step_num=s, _r=1)
        if host_ops:
            line.event(cpu.op("dot.2"), (100 * s + 60) * US, 20 * US, hlo_op="dot.2", device_ordinal=0)
    return space.save(path)


def test_a_host_running_a_chips_ops_keeps_its_file_one_shard(tmp_path, forking):
    """Device 0's ops on two planes (its own and the host's): the host plane's stats say so before anything
    is decoded, and the file is one shard; device 0's compute counts both (40 + 20 us a step, by hand)."""
    path = _two_chips_and_host(tmp_path / "h.xplane.pb", host_ops=True)
    assert [shard.planes for shard in shards.cut([path]).shards] == [None]
    rows, steps_from = shards.breakdown_traces([path])
    pd.testing.assert_frame_equal(rows, _read_together([path], "step")[0])
    assert (rows["compute_ps"] // US).tolist() == [60, 60, 60, 40, 40, 40] and steps_from == ["Steps line"]
    apart = _two_chips_and_host(tmp_path / "a.xplane.pb", host_ops=False)
    assert [[job.name for job in shard.planes] for shard in shards.cut([apart]).shards] == [
        ["/device:TPU:0"], ["/device:TPU:1"], ["/host:CPU"]]  # chips with Steps lines: apart from the annotations
    rows, steps_from = shards.breakdown_traces([apart])
    pd.testing.assert_frame_equal(rows, _read_together([apart], "step")[0])
    assert (rows["compute_ps"] // US).tolist() == [40] * 6 and steps_from == ["Steps line"]


def test_a_plane_apart_whose_markers_yield_to_the_hosts_is_refused(tmp_path, forking):
    """Chips whose Steps markers are instants take the host's annotations when the file is read whole
    (``steps.demote_instants``); their planes apart cannot, so the command says so in one line; with
    ``--steps`` the file is one shard, and the steps are the events it names alone."""
    path = _two_chips_and_host(tmp_path / "i.xplane.pb", host_ops=False, instants=True)
    with pytest.raises(BadInput) as refused:
        shards.breakdown_traces([path])
    assert refused.value.line() == (f"{path}: device 0's steps are its host's step annotations, which its plane read "
                                    "apart does not hold: pass --steps to name the step markers")
    rows, steps_from = shards.breakdown_traces([path], step_pattern="^train$")
    pd.testing.assert_frame_equal(rows, breakdown.breakdown(events.load([path], "^train$", workers=1,
                                                                        columns=breakdown.EVENT_COLUMNS)))
    # the host's three "train" annotations of 90 us are each chip's steps (the chips' instants are markers no more)
    assert (rows["span_ps"] // US).tolist() == [90] * 6 and (rows["compute_ps"] // US).tolist() == [40] * 6
    assert steps_from == ["events named /^train$/ (numbered by their own step numbers)"]
