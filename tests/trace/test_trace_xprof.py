"""xprof as the referee of perfkit's xplane figures: per (program, HLO op) occurrences, total and self
time against xprof's ``hlo_stats`` tool, per-category self time against its ``op_profile``, on the real
MI300 fixture, on TPU-shaped XSpaces (uint64 program ids above 2**63) and on a CPU profile captured here
(xprof has no hlo_stats for CPU planes: there its ``trace_viewer`` events are the reference, nesting
walked by a plain stack below).

xprof writes ``ALL_HOSTS.op_stats_v2.pb`` beside its input and reuses it for any file of that folder,
so every call gets a copy in a fresh folder."""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from perfkit.trace import breakdown, events, hlo_stats
from perfkit.trace.synthetic import FINGERPRINT, tpu_profile

US = 1_000_000  # picoseconds per microsecond
MI300 = Path("xplane") / "mi300_jax_conv_8gpu.xplane.pb"
TE_ATTN = Path("xplane") / "amd_te_fused_attn.xplane.pb"
TPU_INFERENCE = Path("xplane") / "xprof_tpu_inference_2.xplane.pb"
ROCM_COPIES = Path("xplane") / "mi300_jax_conv_legacy.xplane.pb"
TF_GPU = Path("xplane") / "tf_gpu_multi_worker.xplane.pb"


def xprof_tool(path: Path, tool: str):
    from xprof.convert import raw_to_tool_data  # heavy (TensorFlow-sized C++ extension): only where used

    with tempfile.TemporaryDirectory() as fresh:
        copy = Path(fresh) / path.name
        shutil.copyfile(path, copy)
        data, _ = raw_to_tool_data.xspace_to_tool_data([str(copy)], tool, {})
    return json.loads(data)


def xprof_hlo_stats(path: Path) -> dict:
    """(program id as text, op name) -> (occurrences, total ps, self ps) of xprof's hlo_stats."""
    table = xprof_tool(path, "hlo_stats")
    ids = [c["id"] for c in table["cols"]]
    rows = [dict(zip(ids, (cell["v"] for cell in r["c"]))) for r in table["rows"]]
    return {(r["program_id"], r["hlo_op_name"]): (int(r["occurrences"]), r["total_time"] * US,
                                                  r["total_self_time"] * US) for r in rows}


def perfkit_hlo_stats(path: Path) -> dict:
    rows = hlo_stats.hlo_stats(events.load([path]))
    return {(str(r.program_id), r.hlo_op): (r.occurrences, r.total_ps, r.self_ps) for r in rows.itertuples()}


def assert_same_rows(ours: dict, theirs: dict) -> None:
    assert theirs and sorted(ours) == sorted(theirs)
    for key, (n, total, self_) in theirs.items():
        assert ours[key][0] == n, key
        assert ours[key][1] == pytest.approx(total, rel=1e-3), key
        assert ours[key][2] == pytest.approx(self_, rel=1e-3), key


def test_mi300_fixture_matches_hlo_stats(fixtures_dir):
    path = fixtures_dir / MI300
    theirs = xprof_hlo_stats(path)
    assert_same_rows(perfkit_hlo_stats(path), theirs)
    # the author's reading of the same file: 198 occurrences, 27.551 ms of HLO ops
    assert sum(n for n, _, _ in theirs.values()) == 198
    assert sum(t for _, t, _ in theirs.values()) / 1e9 == pytest.approx(27.551, abs=5e-4)
    # perfkit reads 235 kernels: the other 37 have no HLO op and are named apart
    apart = hlo_stats.unattributed(events.load([path])).set_index("name")["count"].to_dict()
    assert apart == {"__amd_rocclr_copyBuffer.kd": 35, "Im3d2Col.kd": 1, "input_transpose_fusion_1.kd": 1}
    assert len(events.device_ops(events.load([path]))) == 198 + 37


@pytest.mark.parametrize("name, occurrences, total_ms, copies", [("gemm", 42, 3.415244, 12), ("attention", 87, 3.763002, 18),
                                                                 ("elementwise", 65, 3.835924, 10)])
def test_mi300_jax08_traces_match_hlo_stats(fixtures_dir, name, occurrences, total_ms, copies):
    """JAX 0.8 on ROCm (GEMMs as hipBLAS custom-calls and Triton fusions, attention, elementwise): every
    (program, HLO op) row of xprof's hlo_stats; the ROCm copy kernels (``__amd_rocclr_copyBuffer.kd``, no HLO
    op) named apart."""
    path = fixtures_dir / "xplane" / f"mi300_jax08_{name}.xplane.pb"
    theirs, ours = xprof_hlo_stats(path), perfkit_hlo_stats(path)
    assert_same_rows(ours, theirs)
    for table in (theirs, ours):  # xprof's figures, when recorded: to the nanosecond
        assert sum(n for n, _, _ in table.values()) == occurrences
        assert sum(t for _, t, _ in table.values()) / 1e9 == pytest.approx(total_ms, abs=1e-6)
    apart = hlo_stats.unattributed(events.load([path])).set_index("name")["count"].to_dict()
    assert apart == {"__amd_rocclr_copyBuffer.kd": copies}


def test_kernels_overlapping_on_a_stream_do_not_nest(fixtures_dir):
    """TransformerEngine's fused attention on an AMD GPU: on Stream #2 six kernels start 41-193 ns before the
    one before them ends (the clocks' skew). Kernels never nest: each one's self time is its whole time, as
    xprof's hlo_stats has it (read as nesting, gemm_fusion_dot.1 lost 32.7 us of its 485.3)."""
    path = fixtures_dir / TE_ATTN
    theirs = xprof_hlo_stats(path)
    assert_same_rows(perfkit_hlo_stats(path), theirs)
    assert theirs[("17", "gemm_fusion_dot.1")][1:] == (485285000, 485285000)


def _two_clocks(path: Path) -> list[tuple[str, str, int, int]]:
    """Every TPU op by a plain protobuf reading: (plane, HLO text, its duration in the trace (the
    host-synchronized clock), its ``device_duration_ps`` stat (the chip's clock))."""
    from perfkit.trace.protos import XSPACE

    out = []
    for plane in XSPACE.FromString(path.read_bytes()).planes:
        names = {k: v.name for k, v in plane.stat_metadata.items()}
        for line in plane.lines:
            for e in line.events if line.name == "XLA Ops" else ():
                chip = next(s.int64_value or s.uint64_value for s in e.stats if names[s.metadata_id] == "device_duration_ps")
                out.append((plane.name, plane.event_metadata[e.metadata_id].name, e.duration_ps, chip))
    return out


def test_tpu_ops_timed_on_the_chips_clock_as_xprof(fixtures_dir):
    """xprof's own 4-chip TPU profile: each op carries its time on the chip's clock (device_offset_ps,
    device_duration_ps) beside the host-synchronized one of the event, and on 614 of TPU 0's 1504 ops the two
    durations part by more than 1%. xprof's hlo_stats counts the chip's; so does perfkit's (read by the
    trace's, copy-done.2's 400 runs summed to 87957.8 ms where xprof has 77642.8)."""
    path = fixtures_dir / TPU_INFERENCE
    theirs = xprof_hlo_stats(path)
    assert_same_rows(perfkit_hlo_stats(path), theirs)
    ops = [(trace, chip) for _, name, trace, chip in _two_clocks(path) if name.startswith("%copy-done.2 ")]
    trace_ms, chip_ms = (sum(clock) / 1e9 for clock in zip(*ops))
    assert (round(trace_ms, 1), round(chip_ms, 1)) == (87957.8, 77642.8)
    program = next(program for program, op in theirs if op == "copy-done.2")
    assert theirs[(program, "copy-done.2")][1] / 1e9 == pytest.approx(chip_ms, abs=1e-6)


def test_outputs_name_where_the_two_clocks_part(fixtures_dir):
    """breakdown and diff measure the trace's (host-synchronized) times; on xprof's TPU profile they say, per
    chip, on how many ops those part by over 1% from the chip's own and by how much: as counted by a plain
    protobuf reading of the file (614 of TPU 0's 1504 ops)."""
    from click.testing import CliRunner

    from perfkit.cli import cli

    path = fixtures_dir / TPU_INFERENCE
    expected = []
    for plane in sorted({p for p, *_ in _two_clocks(path)}):
        ops = [(t, c) for p, _, t, c in _two_clocks(path) if p == plane]
        gaps = [abs(t - c) for t, c in ops if abs(t - c) > 0.01 * c]
        expected.append({"rank": 0, "device": int(plane.rsplit(":", 1)[1]), "ops": len(ops), "parted": len(gaps),
                         "parted_ps": sum(gaps)})
    assert expected[0]["ops"] == 1504 and expected[0]["parted"] == 614
    run = lambda *args: CliRunner().invoke(cli, ["trace", *map(str, args)])  # noqa: E731
    assert json.loads(run("breakdown", path, "--json").stdout)["device_clock"] == expected
    diff = json.loads(run("diff", path, fixtures_dir / MI300, "--json").stdout)
    assert (diff["device_clock_a"], diff["device_clock_b"]) == (expected, [])
    total = sum(c["parted_ps"] for c in expected) / 1e9
    line = (f"on 2461 of 6013 ops they part by over 1% from the chip's own (device_duration_ps, which xprof's "
            f"op_profile and hlo_stats count): {total:.3f} ms of difference in all")
    assert line in run("breakdown", path).output
    assert "clock in A: times here are the trace's" in run("diff", path, fixtures_dir / MI300).output
    assert "clock" not in run("breakdown", fixtures_dir / MI300).output


def test_run_summary_and_report_name_where_the_two_clocks_part(fixtures_dir, tmp_path):
    """A run whose trials traced TPU ops that carry their chip's clock: the summary counts, per variant over its
    trials, those ops and the ones whose two durations part (the plain reading's 2461 of 6013 in each of two
    trials), and report.md says so under the breakdown; a GPU variant carries none of it."""
    import shutil

    from perfkit.report.markdown import _breakdown
    from perfkit.trace import runs

    trials = []
    for index, (variant, name) in enumerate([("gpu", MI300), ("tpu", TPU_INFERENCE), ("tpu", TPU_INFERENCE)]):
        folder = tmp_path / "trials" / f"{index:02d}-{variant}" / "rank0" / "trace"
        folder.mkdir(parents=True)
        shutil.copy(fixtures_dir / name, folder / name.name)
        trials.append({"variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"})
    got = runs.summarize(tmp_path, trials, ["gpu", "tpu"])
    gaps = [abs(t - c) for _, _, t, c in _two_clocks(fixtures_dir / TPU_INFERENCE) if abs(t - c) > 0.01 * c]
    tpu = got["variants"]["tpu"]
    assert (tpu["clock_ops"], tpu["clock_parted_ops"]) == (2 * 6013, 2 * len(gaps)) and len(gaps) == 2461
    assert tpu["clock_parted_ms"] == pytest.approx(2 * sum(gaps) / 1e9, abs=1e-9)
    assert "clock_ops" not in got["variants"]["gpu"]
    assert (f"These times are the traces' (host-synchronized, as xprof's trace viewer shows them); they part by over "
            f"1% from the chip's own clock (`device_duration_ps`, which xprof's op_profile counts) on 4922 of tpu's "
            f"12026 ops ({2 * sum(gaps) / 1e9:.3f} ms of difference over its 2 trials).") in _breakdown({"breakdown": got})


@pytest.mark.parametrize("chips", [1, 4])
def test_tpu_shaped_profile_matches_hlo_stats(tmp_path, chips):
    """The whole uint64 program id survives, Async XLA Ops are not counted again, the while's body is
    taken out of its self time."""
    path = tpu_profile(tmp_path / "tpu.xplane.pb", chips=chips, steps=3)
    theirs = xprof_hlo_stats(path)
    assert {program for program, _ in theirs} == {str(FINGERPRINT)}
    assert_same_rows(perfkit_hlo_stats(path), theirs)
    total, self_ = theirs[(str(FINGERPRINT), "while.1")][1:]
    assert (total, self_) == (3 * chips * 30 * US, 3 * chips * 8 * US)  # hand-computed: 30 us around 12 + 10


def _category_self_ps(op_profile: dict) -> dict:
    """xprof's op_profile by program: category -> (self ps, its ops' names)."""
    out = {}
    for program in op_profile["byProgram"]["children"]:
        for category in program.get("children", []):
            names = {op["name"] for op in category.get("children", [])}
            if names:
                time, ops = out.get(category["name"], (0, set()))
                out[category["name"]] = (time + category["metrics"]["rawTime"], ops | names)
    return out


@pytest.mark.parametrize("source", ["tpu", "mi300"])
def test_category_totals_match_op_profile(tmp_path, request, source):
    """Each of xprof's op categories: perfkit's self time of its ops is xprof's, and perfkit's own
    category (compute / ici / dma) of its ops is the one the xprof category names."""
    path = (tpu_profile(tmp_path / "tpu.xplane.pb", chips=2) if source == "tpu"
            else request.getfixturevalue("fixtures_dir") / MI300)
    ev = events.load([path])
    stats = hlo_stats.hlo_stats(ev).set_index("hlo_op")
    ops = events.device_ops(ev)
    ours = ops.groupby(ops["hlo_op"].astype(str))["category"].agg(lambda c: set(c.astype(str)))
    expected = {"all-reduce": "ici", "reduce-scatter": "ici", "megascale all-reduce": "dcn",
                "data formatting": "dma", "control flow": "compute"}
    categories = _category_self_ps(xprof_tool(path, "op_profile"))
    assert categories
    for name, (time, names) in categories.items():
        assert stats.loc[sorted(names), "self_ps"].sum() == pytest.approx(time, rel=1e-3), name
        assert set().union(*ours[sorted(names)]) == {expected.get(name, "compute")}, name


def _stack_self_ps(evs: list[dict]) -> dict:
    """Self time (ps) of each trace_viewer event, by a plain walk: per thread, sorted by start (outer
    first), the open events are a stack."""
    out, by_thread = {}, {}
    for i, e in enumerate(evs):
        by_thread.setdefault((e["pid"], e["tid"]), []).append(i)
    for rows in by_thread.values():
        stack = []
        for i in sorted(rows, key=lambda i: (evs[i]["ts"], -evs[i]["dur"])):
            start, end = round(evs[i]["ts"] * US), round((evs[i]["ts"] + evs[i]["dur"]) * US)
            while stack and stack[-1][1] <= start:
                stack.pop()
            out[i] = end - start
            if stack:
                out[stack[-1][0]] -= end - start
            stack.append((i, end))
    return out


def test_rocm_copies_are_local_dma(fixtures_dir):
    """ROCm's tracer names its copies ``CopyDeviceToDevice`` (no ``Memcpy`` in the name) and marks each with a
    ``memcpy_details`` stat: on GPU 0 of this MI300 profile, the 53 events of xprof's trace_viewer, all marked,
    are memcpys, local DMA; the breakdown's DMA is the union of their spans there, and no compute."""
    path = fixtures_dir / ROCM_COPIES
    trace = xprof_tool(path, "trace_viewer")["traceEvents"]
    gpu0 = next(e["pid"] for e in trace if e.get("name") == "process_name" and e["args"]["name"] == "/device:GPU:0")
    copies = [e for e in trace if e.get("ph") == "X" and e["pid"] == gpu0]
    assert len(copies) == 53 and all("memcpy_details" in e["args"] for e in copies)
    union, end = 0, None  # of the copies' spans (four streams), ps
    for start, stop in sorted((round(e["ts"] * US), round((e["ts"] + e["dur"]) * US)) for e in copies):
        union += max(stop - max(start, end if end is not None else start), 0)
        end = stop if end is None else max(end, stop)
    ev = events.load([path])
    ops = events.device_ops(ev)
    mine = ops[ops["device"] == 0]
    assert len(mine) == 53
    assert set(mine["kind"].astype(str)) == {"memcpy"} and set(mine["category"].astype(str)) == {"dma"}
    row = breakdown.breakdown(ev, window="trace").set_index("device").loc[0]
    assert row["compute_ps"] == 0 and row["dma_ps"] == pytest.approx(union, abs=53)


def test_tensorflow_gpu_kernels_match_kernel_stats(fixtures_dir):
    """A TensorFlow (not XLA) GPU profile, no HLO: per kernel name, perfkit's compute ops are xprof's
    kernel_stats rows (occurrences, total time); its 226 CUPTI memcpys (MemcpyH2D / MemcpyD2H, no kernel there)
    are local DMA."""
    table = xprof_tool(fixtures_dir / TF_GPU, "kernel_stats")
    ids = [c["id"] for c in table["cols"]]
    theirs = {}
    for row in table["rows"]:
        r = dict(zip(ids, (cell["v"] for cell in row["c"])))
        n, total = theirs.get(r["kernel_name"], (0, 0))
        theirs[r["kernel_name"]] = (n + int(r["occurrences"]), total + r["total_duration_us"] * US)
    ops = events.device_ops(events.load([fixtures_dir / TF_GPU]))
    kernels = ops[ops["category"] == "compute"].groupby(ops["name"].astype(str))["dur_ps"].agg(["size", "sum"])
    assert len(theirs) == 11 and sorted(kernels.index) == sorted(theirs)
    for name, (n, total) in theirs.items():
        assert kernels.loc[name, "size"] == n and kernels.loc[name, "sum"] == pytest.approx(total, abs=n), name
    copies = ops[ops["category"] != "compute"]
    assert len(copies) == 226 and set(copies["kind"].astype(str)) == {"memcpy"}
    assert set(copies["category"].astype(str)) == {"dma"} and copies["name"].astype(str).str.startswith("Memcpy").all()


def cpu_ops_of_trace_viewer(path: Path) -> dict:
    """(module, HLO op) -> (occurrences, total ps, self ps) of a CPU profile's device ops as xprof's trace_viewer
    gives them (its events with an ``hlo_op`` and a ``device_ordinal``; self time by ``_stack_self_ps``)."""
    evs = [e for e in xprof_tool(path, "trace_viewer")["traceEvents"]
           if e.get("ph") == "X" and "hlo_op" in e.get("args", {}) and "device_ordinal" in e["args"]]
    self_ps = _stack_self_ps(evs)
    theirs = {}
    for i, e in enumerate(evs):
        n, total, self_ = theirs.get((e["args"]["hlo_module"], e["args"]["hlo_op"]), (0, 0, 0))
        key = (e["args"]["hlo_module"], e["args"]["hlo_op"])
        theirs[key] = (n + 1, total + round(e["dur"] * US), self_ + self_ps[i])
    return theirs


def test_captured_cpu_ring_matches_trace_viewer(tmp_path):
    """The bundled ring kernel's CPU profile (4 simulated devices): per (module, HLO op), perfkit's count,
    total and self time against xprof's own reading of the file (its trace_viewer events)."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4", "JAX_PLATFORMS": "cpu",
           "IMPL": "ring", "PERFKIT_TRACE_DIR": str(tmp_path), "PERFKIT_TRACE_STEPS": "1"}
    program = Path(__file__).parent / "programs" / "traced_ring.py"
    subprocess.run([sys.executable, str(program), "2"], env=env, check=True, capture_output=True, timeout=120)
    path = next(tmp_path.rglob("*.xplane.pb"))
    assert xprof_hlo_stats(path) == {}  # xprof's hlo_stats reads device planes only
    theirs = cpu_ops_of_trace_viewer(path)
    ev = events.load([path])
    rows = hlo_stats.hlo_stats(ev)
    ours = {(r.hlo_module, r.hlo_op): (r.occurrences, r.total_ps, r.self_ps) for r in rows.itertuples()}
    assert_same_rows(ours, theirs)
    ops = events.device_ops(ev)
    hops = 2 * (4 - 1) * 4  # bidirectional ring: two halves of n - 1 hops, on each of 4 devices
    assert (ops["kind"] == "collective-permute").sum() == hops and len(ops) == sum(n for n, _, _ in theirs.values())


def test_two_cpu_processes_match_trace_viewer(tmp_path):
    """A two-process JAX CPU job (gloo collectives, one CPU device a process, three annotated steps), each process's
    own profile (in a rank<R> folder): per (module, HLO op) against xprof's trace_viewer; read together, each rank
    one chip (the device's global id: 0, 2048), its ICI a step the all-reduce's span there as trace_viewer times it;
    and the note says the chips' ICI may be processes' exchange (it said 'within one process', wrong for such a
    job)."""
    from click.testing import CliRunner

    from perfkit.cli import cli

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    program = Path(__file__).parent / "programs" / "gloo_psum.py"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}  # one CPU device a process, not the suite's 8
    procs = [subprocess.Popen([sys.executable, str(program), str(i), str(port), str(tmp_path / f"rank{i}")], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in (0, 1)]
    try:
        errors = [p.communicate(timeout=120)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0], errors
    paths = [next((tmp_path / f"rank{i}").rglob("*.xplane.pb")) for i in (0, 1)]
    spans = {}
    for rank, path in enumerate(paths):
        theirs = cpu_ops_of_trace_viewer(path)
        rows = hlo_stats.hlo_stats(events.load([path]))
        assert_same_rows({(r.hlo_module, r.hlo_op): (r.occurrences, r.total_ps, r.self_ps) for r in rows.itertuples()},
                         theirs)
        psums = sorted((e["ts"], e["dur"]) for e in xprof_tool(path, "trace_viewer")["traceEvents"]
                       if e.get("ph") == "X" and e.get("args", {}).get("hlo_op", "").startswith("psum"))
        spans[rank] = [round(dur * US) for _, dur in psums]
    result = CliRunner().invoke(cli, ["trace", "breakdown", *map(str, paths), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(m["rank"], m["device"], m["steps"]) for m in out["mean"]] == [(0, 0, 3), (1, 2048, 3)]
    for rank, ici in spans.items():
        assert [r["ici_ps"] for r in sorted(out["rows"], key=lambda r: r["step"]) if r["rank"] == rank] == ici
    assert out["notes"] == ["these chips are XLA's CPU devices, threads sharing the host's cores: their ICI is the "
                            "threads' exchange within a process, or processes' through gloo or MPI, not an "
                            "interconnect's"]
    # as JAX lays them out (a log folder each, a file named for the machine): one rank's, refused saying why
    for i, path in enumerate(paths):
        (tmp_path / f"log{i}").mkdir()
        shutil.copy(path, tmp_path / f"log{i}" / path.name)
    apart = [str(tmp_path / f"log{i}" / paths[i].name) for i in (0, 1)]
    refused = CliRunner().invoke(cli, ["trace", "breakdown", *apart])
    assert refused.exit_code == 2 and refused.output.count("\n") == 1, refused.output
    assert refused.output.endswith("its processes' files named for one host are one rank's unless each is in a "
                                   "rank<R> folder\n"), refused.output


def test_step_annotations_nested_in_one_are_its_step(tmp_path):
    """An epoch's StepTraceAnnotation around its steps' on one thread (as JAX 0.10 writes them, in time order): xprof
    groups each inner one under the outer (trace_viewer's group_id), so the outer ones are the steps, each holding
    its inner ones' ops and its own. Read as six steps, the outer two had 0 compute (their ops went to the inner
    ones) and the mean step was 2/3 idle; ``--steps`` still makes the inner ones the steps, by their numbers.
    By hand (us): epoch 0 [0,100) runs fusion [10,40) [60,90) [96,99): compute 63, idle 37; epoch 1 [100,200)
    [110,140) [160,190): 60, 40."""
    from click.testing import CliRunner

    from perfkit.cli import cli
    from perfkit.trace.synthetic import XSpaceWriter

    space = XSpaceWriter("h")
    host = space.plane("/host:CPU")
    python, pool = host.line("python"), host.line("tf_XLAEigen/1")
    for name, n, a, b in [("epoch", 0, 0, 100), ("train", 100, 5, 45), ("train", 101, 50, 95), ("epoch", 1, 100, 200),
                          ("train", 102, 105, 150), ("train", 103, 155, 195)]:
        python.event(host.op(name), a * US, (b - a) * US, step_num=n, _r=1)
    for a, b in [(10, 40), (60, 90), (96, 99), (110, 140), (160, 190)]:
        pool.event(host.op("fusion"), a * US, (b - a) * US, hlo_op="fusion", hlo_module="jit_f", device_ordinal=0)
    path = space.save(tmp_path / "h.xplane.pb")
    marks = [e["args"] for e in xprof_tool(path, "trace_viewer")["traceEvents"]
             if e.get("ph") == "X" and "step_num" in e.get("args", {})]
    groups = {m["group_id"]: m["step_num"] for m in marks if "step_name" in m}  # a group's own marker names it
    assert groups == {"0": "0", "1": "1"} and {m["group_id"] for m in marks} == {"0", "1"}
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [(r["step"], r["span_ps"], r["compute_ps"], r["idle_ps"]) for r in rows] == [
        (0, 100 * US, 63 * US, 37 * US), (1, 100 * US, 60 * US, 40 * US)]
    inner = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--json", "--steps", "^train"])
    assert [(r["step"], r["compute_ps"]) for r in json.loads(inner.stdout)["rows"]] == [
        (100, 30 * US), (101, 30 * US), (102, 30 * US), (103, 30 * US)]


def xprof_step_times(path: Path) -> list[float]:
    """The step times (us) of xprof's step-time graph (input_pipeline_analyzer: the steps its overview counts)."""
    tables = xprof_tool(path, "input_pipeline_analyzer")
    for table in tables if isinstance(tables, list) else [tables]:
        ids = [c.get("id") for c in table.get("cols", [])]
        if "stepTimeMs" in ids:
            return [round(row["c"][ids.index("stepTimeMs")]["v"] * 1000, 6) for row in table.get("rows", [])]
    return []


def _cpu_steps(path: Path, marks: list[tuple[str, int, int, int]], ops: list[tuple[int, int]], **root) -> Path:
    """A CPU profile as JAX writes it: ``marks`` (name, step_num, start, end us) on the python thread, with the
    ``root`` stats given (StepTraceAnnotation's ``_r=1``), each with a dispatch inside its first us (xprof's steps
    are of annotations that hold host events), and fusion ops of device 0 at ``ops`` (us)."""
    from perfkit.trace.synthetic import XSpaceWriter

    space = XSpaceWriter("h")
    host = space.plane("/host:CPU")
    python, pool = host.line("python"), host.line("tf_XLAEigen/1")
    for name, n, a, b in marks:
        python.event(host.op(name), a * US, (b - a) * US, step_num=n, **root)
        python.event(host.op("PjitFunction(f)"), a * US, US)
    for a, b in ops:
        pool.event(host.op("fusion"), a * US, (b - a) * US, hlo_op="fusion", hlo_module="jit_f", device_ordinal=0)
    return space.save(path)


def _breakdown_json(path: Path, *args: str) -> dict:
    from click.testing import CliRunner

    from perfkit.cli import cli

    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize("root", [False, True])
def test_only_a_step_annotation_s_root_mark_makes_a_step(tmp_path, root):
    """``jax.profiler.TraceAnnotation("eval", step_num=i)`` writes ``step_num`` without the root mark ``_r`` that
    ``StepTraceAnnotation`` adds: xprof counts no step by it (they were read as three steps); with ``_r`` three.
    Without: one span, the first op's start to the last op's end; ``--steps`` still makes them the steps, by their
    numbers. By hand (us): eval [0,40) [50,90) [100,140), fusion [10,30) [60,80) [110,130): span [10,130) 120,
    compute 60; as steps each 40, compute 20."""
    path = _cpu_steps(tmp_path / "h.xplane.pb", [("eval", 0, 0, 40), ("eval", 1, 50, 90), ("eval", 2, 100, 140)],
                      [(10, 30), (60, 80), (110, 130)], **({"_r": 1} if root else {}))
    assert xprof_step_times(path) == ([40, 40, 40] if root else [])
    doc = _breakdown_json(path)
    rows = [(r["step"], r["span_ps"], r["compute_ps"]) for r in doc["rows"]]
    if root:
        assert doc["steps_from"] == ["step annotations"] and rows == [(s, 40 * US, 20 * US) for s in range(3)]
    else:
        assert doc["steps_from"] == ["none"] and rows == [(-1, 120 * US, 60 * US)]
    named = _breakdown_json(path, "--steps", "^eval$")
    assert named["steps_from"] == ["events named /^eval$/ (numbered by their own step numbers)"]
    assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in named["rows"]] == [(s, 40 * US, 20 * US)
                                                                                  for s in range(3)]


def test_a_step_running_past_its_annotation_is_said(tmp_path):
    """Ops that run on after their step's annotation ends (JAX dispatches without waiting): xprof's step time is the
    annotation's own (10 us each); perfkit's span runs to the end of the last op started in it, which the output
    now says (it was left unsaid beside a 35 us step 0 and a step 1 idle under step 0's op). By hand (us): train
    [0,10) [20,30) [40,50); fusion [5,35) starts in step 0, [42,48) in step 2: spans 35, 10, 10; compute 30, 0, 6;
    25 past."""
    path = _cpu_steps(tmp_path / "h.xplane.pb", [("train", n, 20 * n, 20 * n + 10) for n in range(3)],
                      [(5, 35), (42, 48)], _r=1)
    assert xprof_step_times(path) == [10, 10, 10]
    doc = _breakdown_json(path)
    assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in doc["rows"]] == [
        (0, 35 * US, 30 * US), (1, 10 * US, 0), (2, 10 * US, 6 * US)]
    assert ("1 of 3 steps run past their step markers to the end of the last op started in them (0.025 ms past in "
            "all): a span here runs from its marker's start to the later of its end and that op's end, where xprof's "
            "step time, or a ProfilerStep's, is the marker's own") in doc["notes"]
    assert not [n for n in _breakdown_json(path, "--window", "trace")["notes"] if "past" in n]


def test_annotations_sharing_a_step_number_are_said_joined(tmp_path):
    """Step numbers 0, 1, 1, 2 on one thread (a retried step): xprof counts four steps (30, 20, 20, 30 us); perfkit
    measures step 1 once, from the first annotation's start to the second's end, and now says so (it was
    unsaid). By hand (us): train [0,30) [40,60) [70,90) [100,130), fusion [5,25) [45,55) [75,85) [105,125): step 1
    spans [40,90) 50, compute 20."""
    path = _cpu_steps(tmp_path / "h.xplane.pb", [("train", 0, 0, 30), ("train", 1, 40, 60), ("train", 1, 70, 90),
                                                ("train", 2, 100, 130)], [(5, 25), (45, 55), (75, 85), (105, 125)],
                      _r=1)
    assert xprof_step_times(path) == [30, 20, 20, 30]
    doc = _breakdown_json(path)
    assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in doc["rows"]] == [
        (0, 30 * US, 20 * US), (1, 50 * US, 20 * US), (2, 30 * US, 20 * US)]
    assert ("1 of 3 steps join step markers of one number that ran apart, one after another has ended (first: rank 0 "
            "device 0 step 1; a retried step): a span here runs from the first's start to the last's end, the time "
            "between them counted to it, where xprof counts each marker a step of its own") in doc["notes"]


def test_diff_says_where_a_span_is_more_than_its_markers(tmp_path):
    """trace diff measures breakdown's spans, and said nothing where they are more than their step markers; it now
    says what breakdown says, per side. A: the annotations of test_a_step_running_past_its_annotation_is_said
    (step 0's [0,10) runs to 35 us: 25 us past, 1 of 3 steps); B: those of
    test_annotations_sharing_a_step_number_are_said_joined (step 1's two markers joined: 1 of 3 steps)."""
    from click.testing import CliRunner

    from perfkit.cli import cli

    a = _cpu_steps(tmp_path / "a.xplane.pb", [("train", n, 20 * n, 20 * n + 10) for n in range(3)],
                   [(5, 35), (42, 48)], _r=1)
    b = _cpu_steps(tmp_path / "b.xplane.pb", [("train", 0, 0, 30), ("train", 1, 40, 60), ("train", 1, 70, 90),
                                             ("train", 2, 100, 130)], [(5, 25), (45, 55), (75, 85), (105, 125)],
                   _r=1)
    past = ("1 of 3 steps in A run past their step markers to the end of the last op started in them (0.025 ms past "
            "in all): a span here runs from its marker's start to the later of its end and that op's end, where "
            "xprof's step time, or a ProfilerStep's, is the marker's own")
    joined = ("1 of 3 steps in B join step markers of one number that ran apart, one after another has ended (first: "
              "rank 0 device 0 step 1; a retried step): a span here runs from the first's start to the last's end, "
              "the time between them counted to it, where xprof counts each marker a step of its own")
    result = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert f"perfkit: note: {past}\nperfkit: note: {joined}\n" in result.stderr
    doc = json.loads(CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--json"]).stdout)
    assert past in doc["notes"] and joined in doc["notes"]
    whole = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--window", "trace"])
    assert whole.exit_code == 0 and "step markers" not in whole.stderr, whole.output
