"""``perfkit trace collectives``: hand-built 4-chip TPU-shaped XSpaces with a planted late chip (expected
values worked out in trace_builders.straggler_trace), bytes per device from HLO text and from real Kineto
NCCL kernel args (read here from the raw JSON), and a captured 4-chip profile of the quickstart's sp
variant checked against its compiled program."""

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from noted import HOST_STREAMS, KERNELS_UNSIZED, LAUNCHLESS, ROUNDED, UNSIZED, noted
from trace_builders import STRAGGLER_EXPECTED, U, straggler_trace

from perfkit.cli import cli
from perfkit.trace import collectives, events
from perfkit.trace.synthetic import XSpaceWriter

TIMES = ("time_ps", "exposed_ps", "hidden_ps", "wait_ps", "transfer_ps")
REAL_KINETO = Path(__file__).resolve().parents[1] / "data" / "real" / "kineto"


def run(*args):
    return CliRunner().invoke(cli, ["trace", "collectives", *map(str, args)])


def test_planted_late_chip_is_the_straggler(tmp_path):
    result = run(straggler_trace(tmp_path / "s.xplane.pb"), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    got = {(r["step"], r["op"], r["device"]): tuple(r[c] // U for c in TIMES) for r in doc["instances"]}
    assert got == STRAGGLER_EXPECTED
    assert all(r["time_ps"] % U == 0 and r["chips"] == 4 for r in doc["instances"])
    skew = {(r["step"], r["op"]): r["skew_ps"] // U for r in doc["instances"]}
    assert skew == {(0, "all-gather-start.1"): 20, (0, "fusion.4"): 4, (0, "collective-permute-start.1"): 2,
                    (1, "all-gather-start.1"): 8, (1, "fusion.4"): 4, (1, "collective-permute-start.1"): 2}
    last = {(r["step"], r["op"]): r["device"] for r in doc["instances"] if r["last"]}
    assert last == {(0, "all-gather-start.1"): 3, (0, "fusion.4"): 3, (0, "collective-permute-start.1"): 1,
                    (1, "all-gather-start.1"): 1, (1, "fusion.4"): 1, (1, "collective-permute-start.1"): 2}
    # bytes per device: step 0's all-gather (its text's groups) 3/4 of f32[256,128]; permute f32[64,128], no n needed;
    # the reduce-scatter fusion's text and step 1's op names record no n: unknown, not the 4 chips matched
    sent = {(r["step"], r["op"]): r["bytes"] for r in doc["ops"]}
    assert sent == {(0, "all-gather-start.1"): 98304, (0, "fusion.4"): None, (0, "collective-permute-start.1"): 32768,
                    (1, "all-gather-start.1"): None, (1, "fusion.4"): None, (1, "collective-permute-start.1"): 32768}
    ag0 = next(r for r in doc["ops"] if r["step"] == 0 and r["op"] == "all-gather-start.1")
    assert ag0["gbps"] == pytest.approx(4 * 98304 / (3 * 26 + 6) / 1e3)  # bytes / us -> GB/s
    steps = [(s["step"], s["device"], s["times_last"], s["matched"], s["skew_ps"] / U, s["span_ps"] / U)
             for s in doc["steps"]]
    assert steps == [(0, 3, 2, 3, 26, 60), (1, 1, 2, 3, 14, 60)]
    assert [s["wait_ps"] / U for s in doc["steps"]] == pytest.approx([73 / 3, 37 / 3])
    assert [s["skew_share"] for s in doc["steps"]] == pytest.approx([26 / 60, 14 / 60])
    text = run(tmp_path / "s.xplane.pb").stdout
    assert "step 0: rank 0 device 3 arrived last at 2 of 3 collectives (straggler); skew 26.0 us summed" in text
    assert "step 1: rank 0 device 1 arrived last at 2 of 3 collectives (straggler)" in text


def test_cpu_devices_name_no_straggler(tmp_path):
    """The same collectives as XLA's CPU devices run them (threads of the host plane, as the demo's traces hold
    them): the same skews, and no straggler named, as the run report says for such chips (the command named
    one before: the newcomer's demo read "(straggler)" here and "no straggler is named" in report.md)."""
    path = straggler_trace(tmp_path / "cpu.xplane.pb", cpu=True)
    result = run(path, "--json")
    assert result.exit_code == 0, result.output
    assert [(s["step"], s["device"], s["skew_ps"] / U) for s in json.loads(result.stdout)["steps"]] == [
        (0, 3, 26), (1, 1, 14)]
    text = run(path)
    # the chip left out of the wait is named, how often it was last too, but not flagged (its docstring: chip 3 last at
    # 2 of step 0's 3; the others' waits, 73 / 3 us each, as test_the_report_s_wait_is_the_step_lines_wait adds them)
    assert "step 0: 3 collectives matched across chips; rank 0 device 3 arrived last most often (2 of 3, the host's " \
           "scheduling: not flagged a straggler); skew 26.0 us summed" in text.stdout
    assert "; the other chips' exposed wait 24.3 us on average" in text.stdout
    assert "(straggler)" not in text.stdout and "but the one last" not in text.stdout
    assert "these chips are XLA's CPU devices" in text.stderr and ("not a slow chip, so the chip that arrived last is "
                                                                   "not flagged a straggler") in text.stderr


@pytest.mark.parametrize("command", [["breakdown"], ["tail"], ["diff", "A"]])
def test_the_other_trace_commands_say_the_chips_are_cpu_devices(tmp_path, command):
    """breakdown, tail and diff of XLA's CPU devices say what their chips are, as collectives and the run report
    do (a hunt on the bundled models' own profiles: their --json said "device ops" and nothing more)."""
    from perfkit.cli import cli

    path = str(straggler_trace(tmp_path / "cpu.xplane.pb", cpu=True))
    note = ("these chips are XLA's CPU devices, threads sharing the host's cores: their ICI is the threads' exchange "
            "within a process, or processes' through gloo or MPI, not an interconnect's")
    args = ["trace", *[path if a == "A" else a for a in command], path]
    result = CliRunner().invoke(cli, args)
    # tail gives its collectives' bytes sent, so it also notes those whose group size the trace does not record
    unsized = "XLA collectives without bytes and GB/s (?): "
    lines = result.stderr.splitlines()
    assert [line.startswith(f"perfkit: note: {unsized}") for line in lines] == [True] * (command[0] == "tail") + [False]
    assert result.exit_code == 0 and lines[-1] == f"perfkit: note: {note}", result.stderr
    notes = json.loads(CliRunner().invoke(cli, [*args, "--json"]).stdout)["notes"]
    assert [n for n in notes if not n.startswith(unsized)] == [note]
    plain = CliRunner().invoke(cli, ["trace", *command[:1], str(straggler_trace(tmp_path / "tpu.xplane.pb")),
                                     *([str(tmp_path / "tpu.xplane.pb")] if command[0] == "diff" else [])])
    assert plain.exit_code == 0 and "CPU devices" not in plain.stderr


def _one_chip(path, ops, chips=1, groups=None, counts=None):
    """One TPU chip (or ``chips`` of one host, each alike), one step [0, 100) us; ``ops``: (HLO text, opcode,
    shape, start_us, end_us); ``groups`` and ``counts``: the program's (``XSpaceWriter.program``)."""
    space = XSpaceWriter("h")
    space.program(3, "jit_c", [(t.split(" ")[0].lstrip("%"), op, shape) for t, op, shape, _, _ in ops], groups, counts)
    for c in range(chips):
        chip = space.plane(f"/device:TPU:{c}")
        chip.line("Steps", 0).event(chip.op("0"), 0, 100 * U)
        line = chip.line("XLA Ops", 0)
        for text, _, _, a, b in ops:
            line.event(chip.op(text, program_id=3), a * U, (b - a) * U)
    return space.save(path)


def test_bytes_from_replica_groups_in_hlo_text(tmp_path):
    """One chip: the group size comes from the text alone (no other chip ran these)."""
    path = _one_chip(tmp_path / "one.xplane.pb", [
        ("%all-gather.1 = f32[256,128]{1,0} all-gather(f32[128,128]{1,0} %p), replica_groups={{0,1}}, dimensions={0}",
         "all-gather", "f32[256,128]", 0, 10),
        ("%all-reduce.2 = f32[1024]{0} all-reduce(f32[1024]{0} %p), replica_groups=[1,4]<=[4], to_apply=%add",
         "all-reduce", "f32[1024]", 10, 20),
        ("%all-to-all.3 = f32[1024]{0} all-to-all(f32[1024]{0} %p), replica_groups={{0,1,2,3}}, dimensions={0}",
         "all-to-all", "f32[1024]", 20, 30),
        ("%reduce-scatter.4 = f32[256]{0} reduce-scatter(f32[1024]{0} %p), replica_groups={{0,1,2,3}}, dimensions={0}",
         "reduce-scatter", "f32[256]", 30, 40),
        ("all-gather.5", "all-gather", "f32[256,128]", 40, 50),  # no text, no peer: the group is unknown
    ])
    doc = json.loads(run(path, "--json").stdout)
    sent = {r["op"]: r["bytes"] for r in doc["instances"]}
    assert sent == {"all-gather.1": 131072 / 2, "all-reduce.2": 2 * 3 / 4 * 4096, "all-to-all.3": 3 / 4 * 4096,
                    "reduce-scatter.4": 3 / 4 * 4096, "all-gather.5": None}
    assert doc["steps"] == [] and all(r["skew_ps"] == 0 and r["wait_ps"] == 0 for r in doc["instances"])
    assert "GB/s" in run(path).stdout and "no skew or straggler" in run(path).stdout


def test_groups_the_text_cannot_size_are_unknown(tmp_path):
    """One chip, no program counts (a trace's HLO text has no HloModule line): a channel_id with no
    use_global_device_ids makes {{0}} replica 0 on every partition, and flattened ids left empty are every device;
    neither group's size is in the text, so their bytes are unknown (the first read as a group of 1: 0 bytes sent)."""
    path = _one_chip(tmp_path / "one.xplane.pb", [
        ("%all-reduce.1 = f32[1024]{0} all-reduce(f32[1024]{0} %p), channel_id=1, replica_groups={{0}}, to_apply=%add",
         "all-reduce", "f32[1024]", 0, 10),
        ("%all-reduce.2 = f32[1024]{0} all-reduce(f32[1024]{0} %p), channel_id=2, replica_groups={}, "
         "use_global_device_ids=true, to_apply=%add", "all-reduce", "f32[1024]", 10, 20),
    ])
    doc = json.loads(run(path, "--json").stdout)
    assert {r["op"]: r["bytes"] for r in doc["instances"]} == {"all-reduce.1": None, "all-reduce.2": None}


def test_n_is_never_the_chips_in_the_profile(tmp_path):
    """One host's 4 chips of a 16-chip program: its all-reduce of f32[1024] over replica_groups={{0,...,15}} sends,
    by hand, 2 x 15/16 x 4096 B = 7680 B a device. The same all-reduce where the text names no groups (a fusion
    running it, an op named by name only, or replica_groups={}, every replica, which the program's counts size and
    the op's text does not record) has no n: its bytes are unknown, with a note why. They read as a group of the 4
    chips matched (2 x 3/4 x 4096 = 6144 B, and 3/4 of 4 x 1024 B for the reduce-scatter fusion)."""
    everyone = ",".join(map(str, range(16)))
    path = _one_chip(tmp_path / "host0.xplane.pb", [
        (f"%all-reduce.1 = f32[1024]{{0}} all-reduce(f32[1024]{{0}} %p), replica_groups={{{{{everyone}}}}}, "
         "to_apply=%add", "all-reduce", "f32[1024]", 0, 10),
        ("%all-reduce.2 = f32[1024]{0} all-reduce(f32[1024]{0} %p), replica_groups={}, to_apply=%add",
         "all-reduce", "f32[1024]", 10, 20),
        ("all-reduce.3", "all-reduce", "f32[1024]", 20, 30),
        ("%fusion.4 = f32[256]{0} fusion(f32[1024]{0} %p), kind=kOutput, calls=%rs", "fusion:reduce-scatter",
         "f32[256]", 30, 40),
    ], chips=4)
    result = run(path, "--json")
    doc = json.loads(result.stdout)
    assert {r["chips"] for r in doc["instances"]} == {4}
    assert {(r["op"], r["bytes"], r["group"]) for r in doc["instances"]} == {
        ("all-reduce.1", 2 * 15 / 16 * 4096, 16), ("all-reduce.2", None, 0), ("all-reduce.3", None, 0),
        ("fusion.4", None, 0)}
    (note,) = [n for n in doc["notes"] if n.startswith("XLA collectives without bytes")]
    assert "3 ops (2 all-reduce, 1 reduce-scatter) have a group size n that neither their HLO text" in note
    assert "not taken from the chips in the profile" in note


@pytest.mark.parametrize("counts", [(16, 1), None])
def test_n_from_the_program_s_hloproto(tmp_path, counts):
    """One host's 4 chips of a 16-chip program whose ops the profile names by name only: n as the program's HloProto
    records it. all-reduce.1 of f32[1024] over replica_groups {{0,...,15}}: 2 x 15/16 x 4096 = 7680 B a device;
    fusion.2 runs a reduce-scatter over {{0..7},{8..15}} into f32[256]: 7/8 of 8 x 1024 B = 7168 B; all-reduce.3's
    groups are empty (every replica): 16 where the module's device assignment records 16 replicas, else unknown."""
    path = _one_chip(tmp_path / "host0.xplane.pb", [
        ("all-reduce.1", "all-reduce", "f32[1024]", 0, 10),
        ("fusion.2", "fusion:reduce-scatter", "f32[256]", 10, 20),
        ("all-reduce.3", "all-reduce", "f32[1024]", 20, 30),
    ], chips=4, groups={"all-reduce.1": [list(range(16))], "fusion.2": [list(range(8)), list(range(8, 16))]},
        counts=counts)
    doc = json.loads(run(path, "--json").stdout)
    assert {r["chips"] for r in doc["instances"]} == {4}
    every = (7680.0, 16) if counts else (None, 0)
    assert {(r["op"], r["bytes"], r["group"]) for r in doc["instances"]} == {
        ("all-reduce.1", 7680.0, 16), ("fusion.2", 7168.0, 8), ("all-reduce.3", *every)}
    unsized = [n for n in doc["notes"] if n.startswith("XLA collectives without bytes")]
    assert unsized == ([] if counts else [unsized[0]]) and (counts or "1 ops (1 all-reduce)" in unsized[0])


def _instruction(comp, name, opcode, groups=(), **fields):
    inst = comp.instructions.add(name=name, opcode=opcode, id=len(comp.instructions) + 100 * comp.id, **fields)
    for group in groups:
        inst.replica_groups.add().replica_ids.extend(group)
    return inst


def test_group_sizes_as_an_hloproto_records_them():
    """XLA's group modes (xla_data.proto's CollectiveOpGroupMode), by hand: flattened ids (a channel_id and
    use_global_device_ids) {{0,1,2,3}}: 4; the iota form [4,2]<=[8]: groups of 2; replica ids with a channel_id, no
    use_global_device_ids, on an all-reduce: {{0,1}} spans every partition, 2 replicas x 4 partitions = 8 (unknown
    without the device assignment); an all-to-all's empty groups with a channel_id: every partition, 4 of 2 x 4 and
    8 of 1 x 8, unknown without the device assignment; an
    async pair's done is its start's size; a collective-permute needs none (0)."""
    from perfkit.trace.programs import read_program
    from perfkit.trace.protos import HLO_PROTO

    def program(counts):
        hlo = HLO_PROTO()
        module = hlo.hlo_module
        if counts:
            module.device_assignment.replica_count, module.device_assignment.computation_count = counts
        wrapped = module.computations.add(name="wrapped", id=2, root_id=200)
        _instruction(wrapped, "all-gather.0", "all-gather", [[0, 1, 2, 3]], channel_id=1, use_global_device_ids=1)
        main = module.computations.add(name="main", id=1)
        _instruction(main, "flat", "all-reduce", [[0, 1, 2, 3]], channel_id=1, use_global_device_ids=1)
        iota = _instruction(main, "iota", "all-reduce", channel_id=1, use_global_device_ids=1)
        iota.collective_device_list.iota_replica_group_list.num_replica_groups = 4
        iota.collective_device_list.iota_replica_group_list.num_devices_per_group = 2
        _instruction(main, "spans", "all-reduce", [[0, 1]], channel_id=1)
        _instruction(main, "a2a", "all-to-all", channel_id=1)
        start = _instruction(main, "ar-start", "all-reduce-start", [[0, 1]])
        _instruction(main, "ar-done", "all-reduce-done", operand_ids=[start.id])
        start = _instruction(main, "ag-start", "async-start", called_computation_ids=[2])
        _instruction(main, "ag-done", "async-done", operand_ids=[start.id], called_computation_ids=[2])
        _instruction(main, "cp", "collective-permute", channel_id=1)
        read = read_program(hlo.SerializeToString(), "p")
        return {name: (op.opcode, read.group(name)) for name, op in read.ops.items()}

    assert program((2, 4)) == {
        "all-gather.0": ("all-gather", 4), "flat": ("all-reduce", 4), "iota": ("all-reduce", 2),
        "spans": ("all-reduce", 8), "a2a": ("all-to-all", 4), "ar-start": ("all-reduce-start", 2),
        "ar-done": ("all-reduce-done", 2), "ag-start": ("all-gather-start", 4), "ag-done": ("all-gather-done", 4),
        "cp": ("collective-permute", 0)}
    assert program((1, 8))["a2a"] == ("all-to-all", 8)
    assert {k: n for k, (_, n) in program(None).items() if k in ("spans", "a2a", "flat")} == {
        "spans": 0, "a2a": 0, "flat": 4}


def test_a_cpu_profile_s_all_reduces_are_sized_by_their_program():
    """The quickstart's tp trial (tests/data/jax_cpu_psum): its CPU events name the all-reduces by name only; their
    program's HloProto gives n. Referee: XLA's dump of the same program, by hand: each psum's f32 output shape x 4 B
    x 2 (n-1)/n, n the count of its first replica group."""
    data = Path(__file__).resolve().parents[1] / "data" / "jax_cpu_psum"
    expected = {}
    for line in (data / "psum.hlo.txt").read_text().splitlines():
        name, dims, first = re.match(r"%(\S+) = f32\[([\d,]+)\].*replica_groups=\{\{([\d,]+)\}", line).groups()
        n = len(first.split(","))
        expected[name] = np.prod([int(d) for d in dims.split(",")]) * 4 * 2 * (n - 1) / n
    assert expected == {f"psum.{k}": 98304.0 for k in range(48, 54)}
    inst = collectives.instances(events.load([data / "tp.xplane.pb"]))
    assert {(r.op, r.bytes) for r in inst.itertuples()} == set(expected.items())
    assert (inst["chips"] == 4).all() and (inst["group"] == 4).all()


def _nccl_bytes_by_hand(raw: dict) -> tuple[list[dict], list[float]]:
    """HTA's NCCL fixture's kernels in start order and each one's bytes from its own args, by hand: an all-reduce
    2(n-1)/n of In msg nelems times its dtype's size, a broadcast the buffer."""
    kernels = sorted((e for e in raw["traceEvents"]
                      if e.get("cat") == "kernel" and "Collective name" in e.get("args", {})), key=lambda e: e["ts"])
    expected = []
    for e in kernels:
        a = e["args"]
        n, size = a["Group size"], a["In msg nelems"] * {"Float": 4, "Long": 8, "Byte": 1}[a["dtype"]]
        expected.append(2 * (n - 1) / n * size if a["Collective name"] == "allreduce" else size)
    return kernels, expected


def test_nccl_kernel_bytes_from_kineto_args(fixtures_dir):
    """HTA's NCCL fixture: every kernel's message size, dtype and group size read straight from the JSON."""
    path = fixtures_dir / "kineto/hta_nccl_data.json.gz"
    raw = json.loads(gzip.decompress(path.read_bytes()))
    kernels, expected = _nccl_bytes_by_hand(raw)
    assert {e["args"]["Collective name"] for e in kernels} == {"allreduce", "broadcast"} and len(kernels) == 21
    with noted(ROUNDED):  # its kernels' ns times
        inst = collectives.instances(events.load([path]))
    assert inst.sort_values("start_ps")["bytes"].tolist() == expected
    assert (inst["chips"] == 1).all() and (inst["exposed_ps"] + inst["hidden_ps"] <= inst["time_ps"]).all()


# TraceLens' B200 vLLM trace (rank 0 of 8, NCCL 2.27): its one NCCL kernel, ncclDevKernel_AllGather_RING_LL, records
# "Collective name" _allgather_base, "In msg nelems" 25136, "Out msg nelems" 201088, dtype BFloat16 (2 bytes),
# "Group size" 8: each device sends (n-1)/n of the gathered buffer, 7 / 8 * 201088 * 2, by hand
B200_ALL_GATHER_BYTES = 351904


def test_a_real_nccl_all_gather_is_sized_from_its_output(fixtures_dir):
    """The suite's first real all-gather: sized from the output the kernel's args record, (n-1)/n of it."""
    with noted(HOST_STREAMS, ROUNDED):  # a cpu_op with a stream; its kernels' ns times
        inst = collectives.instances(events.load([fixtures_dir / "kineto/tracelens_b200_vllm_eager.json.gz"]))
    assert inst["kind"].astype(str).tolist() == ["all-gather"]
    assert inst["bytes"].tolist() == [B200_ALL_GATHER_BYTES] and inst["chips"].tolist() == [1]
    assert inst["time_ps"].tolist() == [21_953_000]  # the kernel's dur, 21.953 us


@pytest.mark.parametrize("dropped", [("Group size",), ("Group size", "Process Group Ranks")])
def test_a_kernel_s_n_is_the_process_group_its_args_name(tmp_path, dropped):
    """TraceLens' B200 vLLM trace (rank 0 of 8; its distributedInfo lists process groups of 8 and of 1 rank) with
    Group size (then Process Group Ranks too) taken off its all-gather kernel and the record_param_comms of its
    launch: they still name the group, by its ranks '[0, 1, 2, 3, 4, 5, 6, 7]' (8) or its name '3', which pg_config
    lists with pg_size 8. So n = 8, and by hand each device sends 7/8 of Out msg nelems x 2 bytes (BFloat16). The
    bytes were unknown (the trace is 1 of the job's 8 ranks: the chips matched are not n)."""
    raw = json.loads(gzip.decompress((REAL_KINETO / "tracelens_b200_vllm_eager.json.gz").read_bytes()))
    named = [e for e in raw["traceEvents"] if "Group size" in e.get("args", {})]
    assert [e.get("cat") for e in named] == ["cpu_op", "kernel"] and named[0]["name"] == "record_param_comms"
    for e in named:
        assert (e["args"]["Process Group Name"], e["args"]["Process Group Ranks"]) == ("3", "[0, 1, 2, 3, 4, 5, 6, 7]")
        for key in dropped:
            del e["args"][key]
    groups = raw["distributedInfo"]["pg_config"]
    assert [g["pg_size"] for g in groups if g["pg_name"] == "3"] == [8] and {g["pg_size"] for g in groups} == {8, 1}
    assert raw["distributedInfo"]["world_size"] == 8 and named[1]["args"]["dtype"] == "BFloat16"
    expected = 7 / 8 * named[1]["args"]["Out msg nelems"] * 2
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    result = run("--json", path)
    assert result.exit_code == 0, result.output
    assert [(r["bytes"], r["group"]) for r in json.loads(result.stdout)["instances"]] == [(expected, 8)]
    assert "communication kernels without bytes" not in result.stderr


def test_a_kernel_that_names_no_group_of_groups_of_one_size_takes_that_size(tmp_path):
    """The same trace with every group arg taken off its kernel and record_param_comms (Group size, Process Group
    Name, Ranks, Description), its pg_config cut to its groups of 8 ranks: the kernel names none, but every group
    it may have run on gives n = 8 (as a gloo trace's do): by hand 7/8 of Out msg nelems x 2 bytes. It was unknown
    (1 of the job's 8 ranks given)."""
    raw = json.loads(gzip.decompress((REAL_KINETO / "tracelens_b200_vllm_eager.json.gz").read_bytes()))
    keys = ("Group size", "Process Group Name", "Process Group Ranks", "Process Group Description")
    named = [e for e in raw["traceEvents"] if "Group size" in e.get("args", {})]
    for e in named:
        e["args"] = {k: v for k, v in e["args"].items() if k not in keys}
    info = raw["distributedInfo"]
    info["pg_config"] = [g for g in info["pg_config"] if g["pg_size"] == 8]
    assert len(info["pg_config"]) == 7 and len(named) == 2 and named[1]["args"]["dtype"] == "BFloat16"
    path = tmp_path / "rank0.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    result = run("--json", path)
    assert result.exit_code == 0, result.output
    assert [(r["bytes"], r["group"]) for r in json.loads(result.stdout)["instances"]] == [
        (7 / 8 * named[1]["args"]["Out msg nelems"] * 2, 8)]
    assert "communication kernels without bytes" not in result.stderr


def _nccl_two_ranks(folder: Path, raw: dict) -> tuple[list[dict], object]:
    """HTA's NCCL fixture as rank 0 and a copy of it as rank 1 (its spans 1 us later), written in a new folder: its
    instances in rank and start order, and the run."""
    folder.mkdir()
    for rank in (0, 1):
        raw["distributedInfo"]["rank"] = rank
        for e in raw["traceEvents"]:
            e["ts"] += rank if e.get("ph") == "X" else 0
        (folder / f"rank{rank}.json.gz").write_bytes(gzip.compress(json.dumps(raw).encode()))
    result = run("--json", folder / "rank0.json.gz", folder / "rank1.json.gz")
    assert result.exit_code == 0, result.output
    return sorted(json.loads(result.stdout)["instances"], key=lambda r: (r["rank"], r["start_ps"])), result


def test_a_kernel_that_names_no_group_of_groups_of_several_sizes_has_no_n(fixtures_dir, tmp_path):
    """HTA's NCCL fixture (rank 0 of 2; pg_config lists one group, default_pg, of 2 ranks) with every group arg
    taken off its kernels and the record_param_comms of their launches (Group size, Process Group Name, Ranks,
    Description, Global rank start and stride), given with a copy of it as rank 1: every rank of the job. Its one
    group gives n = 2: by hand each all-reduce 2(n-1)/n of In msg nelems x its dtype's size, a broadcast the buffer.
    With a second group of 1 rank listed (vLLM's traces list groups of 1 beside those of 8), a kernel that names
    none may have run on either: its n is unknown (bytes ?), a note says why, where the 2 chips matched were taken
    for n; a broadcast's bytes need no n."""
    raw = json.loads(gzip.decompress((fixtures_dir / "kineto/hta_nccl_data.json.gz").read_bytes()))
    kernels, expected = _nccl_bytes_by_hand(raw)
    assert {e["args"]["Group size"] for e in kernels} == {2} and len(kernels) == 21
    assert [(g["pg_name"], g["pg_size"]) for g in raw["distributedInfo"]["pg_config"]] == [("0", 2)]
    keys = ("Group size", "Process Group Name", "Process Group Ranks", "Process Group Description",
            "Global rank start", "Global rank stride")
    for e in raw["traceEvents"]:
        if e.get("cat") == "kernel" or e.get("name") == "record_param_comms":
            e["args"] = {k: v for k, v in e["args"].items() if k not in keys}
    inst, result = _nccl_two_ranks(tmp_path / "one", raw)
    assert [r["bytes"] for r in inst] == expected * 2 and {r["chips"] for r in inst} == {2}
    assert "communication kernels without bytes" not in result.stderr
    raw["distributedInfo"]["pg_config"].append({"pg_name": "1", "pg_desc": "undefined", "backend_config": "cuda:nccl",
                                                "pg_size": 1, "ranks": [0]})
    inst, result = _nccl_two_ranks(tmp_path / "several", raw)
    broadcast = [e["args"]["Collective name"] == "broadcast" for e in kernels]
    assert [r["bytes"] for r in inst] == [b if cast else None for b, cast in zip(expected, broadcast)] * 2
    assert sum(broadcast) == 6
    assert ("communication kernels without bytes and GB/s (?): 30 (30 all-reduce) ran on one of their trace's "
            "process groups, which are of several sizes, and neither they nor the torch.distributed spans around "
            "their launch say which") in result.stderr


def test_nccl_kernels_without_args_leave_the_others_sized(fixtures_dir):
    """TraceLens' MI300 trace (8 ranks, RCCL): of its 17 ``ncclDevKernel_Generic`` kernels the first 5, queued
    before the profiler started, carry no args; the other 12 name their collective, message size, dtype (BFloat16,
    Long) and group of 8. Those 12 are sized by hand (NCCL's bus bytes: all-reduce 2(n-1)/n of the buffer, broadcast
    the buffer), the 5 unknown. Every kernel had lost its bytes and kind where some kernels had no args."""
    path = fixtures_dir / "kineto/tracelens_mi300_resnet_act_checkpoint.json.gz"
    # the kernels queued before the profiler started (the 5 unsized); their ns times
    with noted(LAUNCHLESS, ROUNDED, KERNELS_UNSIZED + r": 5 \(5 unknown\) record none and have no launch"):
        inst = collectives.instances(events.load([path]))
    inst = inst.sort_values("start_ps")
    per_step = [9600 * 2, 20 * 8, 2 * 7 / 8 * 2873320 * 2, 2 * 7 / 8 * 8816192 * 2]
    assert inst["bytes"].iloc[5:].tolist() == per_step * 3 and inst["bytes"].iloc[:5].isna().all()
    assert inst["kind"].astype(str).tolist() == [""] * 5 + (["collective-broadcast"] * 2 + ["all-reduce"] * 2) * 3
    # the text table gives their kind as unknown, as their bytes (it had left the cell blank)
    out = run(path).output
    rows = [line.split() for line in out.splitlines() if "ncclDevKernel" in line]  # step, op, kind, count, chips, bytes
    assert [row[2] for row in rows if row[5] == "?"] == ["?", "?"]


def test_header_names_the_bandwidth_definition(fixtures_dir):
    """GB/s is bytes sent over time, which is nccl-tests' bus bandwidth (busbw = algbw x 2(n-1)/n for all-reduce,
    (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast and send/recv; its PERFORMANCE.md), not
    its algorithm bandwidth: the header says which. HTA's NCCL fixture (2 ranks): an all-reduce's bus bytes are its
    buffer, its first kernel 2049000 floats in 3306.963 us, 2.478 GB/s busbw by hand."""
    path = fixtures_dir / "kineto/hta_nccl_data.json.gz"
    header = run(path).stdout.splitlines()[0]
    assert ("bytes sent per device of n: all-reduce 2(n-1)/n of the buffer, all-gather, reduce-scatter and all-to-all "
            "(n-1)/n, broadcast and send the buffer, recv none; GB/s: those bytes over the time, nccl-tests' bus "
            "bandwidth, busbw)") in header, header
    first = min((r for r in json.loads(run(path, "--json").stdout)["instances"] if r["kind"] == "all-reduce"),
                key=lambda r: r["start_ps"])
    assert first["bytes"] / first["time_ps"] * 1e3 == pytest.approx(2.478, abs=0.0005)


GLOO = "torch_gloo"  # tests/data/torch_gloo: an attention + MLP block's step on 2 gloo ranks, record_shapes on and off


def test_gloo_collectives_bytes_from_their_recorded_input_shapes(fixtures_dir):
    """A newcomer's block on 2 gloo ranks: with record_shapes=True each gloo span records its input's shape and type,
    read here straight from the JSON: all-gather's whole buffer is n of its input, bytes sent (n-1)/n of it,
    all-reduce's 2(n-1)/n of its input, n the trace's one process group; as for NCCL. One rank's trace alone gives
    the same. Before, every gloo collective's bytes and GB/s read "?" with no reason given."""
    folder = fixtures_dir.parent / GLOO / "shapes"
    expected = {}
    for rank in (0, 1):
        raw = json.loads(gzip.decompress((folder / f"rank{rank}.json.gz").read_bytes()))
        (group,) = raw["distributedInfo"]["pg_config"]
        n = group["pg_size"]
        spans = sorted((e for e in raw["traceEvents"] if e.get("name", "").startswith("gloo:")), key=lambda e: e["ts"])
        for e in spans:
            assert e["args"]["Input type"] == ["float"]
            size = 4 * np.prod(e["args"]["Input Dims"][0])
            sent = {"gloo:all_gather": (n - 1) / n * n * size, "gloo:all_reduce": 2 * (n - 1) / n * size}[e["name"]]
            expected.setdefault(rank, []).append((e["name"], sent))
    assert {r: [name for name, _ in rows] for r, rows in expected.items()} == {
        r: ["gloo:all_gather", "gloo:all_gather", "gloo:all_reduce"] for r in (0, 1)}
    both = run(folder, "--json")
    assert both.exit_code == 0, both.output
    got = {}
    for r in sorted(json.loads(both.stdout)["instances"], key=lambda r: (r["rank"], r["start_ps"])):
        got.setdefault(r["rank"], []).append((r["op"], r["bytes"]))
    assert got == expected
    alone = json.loads(run(folder / "rank1.json.gz", "--json").stdout)["instances"]
    assert [(r["op"], r["bytes"]) for r in sorted(alone, key=lambda r: r["start_ps"])] == expected[1]
    assert all(r["chips"] == 1 for r in alone)
    assert "gloo collectives without bytes" not in both.stderr
    ops = json.loads(both.stdout)["ops"]
    assert all(o["gbps"] is not None and o["gbps"] > 0 for o in ops)


GLOO_300 = "hta_cpu_only_gloo_rank34.json.gz"  # rank 34 of 300 (HTA's CPU-only trace): 11 process groups, all of 300


def test_gloo_bytes_where_every_process_group_has_one_size(fixtures_dir):
    """A real gloo trace (rank 34 of 300) lists 11 process groups in ``distributedInfo``, each of 300 ranks: a span
    does not say which group it ran on, but every one gives n = 300. Each all-reduce's bytes by hand from the JSON:
    2(n-1)/n of its recorded input. Before, every one read "?" with no reason given (the group size was known only
    where the trace lists one group)."""
    raw = json.loads(gzip.decompress((fixtures_dir / "kineto" / GLOO_300).read_bytes()))
    assert {g["pg_size"] for g in raw["distributedInfo"]["pg_config"]} == {300}
    assert len(raw["distributedInfo"]["pg_config"]) == 11
    spans = sorted((e for e in raw["traceEvents"] if e.get("name") == "gloo:all_reduce"), key=lambda e: e["ts"])
    assert len(spans) == 10 and all(e["args"]["Input type"] == ["float"] for e in spans)
    expected = [2 * 299 / 300 * 4 * np.prod(e["args"]["Input Dims"][0]) for e in spans]
    result = run(fixtures_dir / "kineto" / GLOO_300, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    got = [r["bytes"] for r in sorted(doc["instances"], key=lambda r: r["start_ps"])]
    assert got == pytest.approx(expected, rel=1e-12)
    assert not [n for n in doc["notes"] if n.startswith("gloo collectives without bytes")]


def test_gloo_collectives_of_process_groups_of_several_sizes_say_why_they_have_no_bytes(fixtures_dir, tmp_path):
    """The same trace with one of its process groups of 150 ranks, given with a copy of it as rank 35 (its spans
    1 us later): which group a span ran on (n) is not known, so bytes and GB/s stay unknown (?), never the 2 chips
    given taken for n, and one note says why, where the table read "?" with no reason."""
    raw = json.loads(gzip.decompress((fixtures_dir / "kineto" / GLOO_300).read_bytes()))
    raw["distributedInfo"]["pg_config"][3]["pg_size"] = 150
    (tmp_path / "rank34.json.gz").write_bytes(gzip.compress(json.dumps(raw).encode()))
    raw["distributedInfo"]["rank"] = 35
    for e in raw["traceEvents"]:
        e["ts"] += 1 if e.get("ph") == "X" else 0
    (tmp_path / "rank35.json.gz").write_bytes(gzip.compress(json.dumps(raw).encode()))
    doc = json.loads(run(tmp_path, "--json").stdout)
    assert len(doc["instances"]) == 20 and {r["chips"] for r in doc["instances"]} == {2}
    assert all(r["bytes"] is None and r["group"] == 0 for r in doc["instances"])
    (note,) = [n for n in doc["notes"] if n.startswith("gloo collectives without bytes")]
    assert note == ("gloo collectives without bytes and GB/s (?): 20 (20 all-reduce) ran on one of their trace's "
                    "process groups, which are of several sizes, and a span does not say which")


def test_gloo_collectives_without_recorded_shapes_say_why_they_have_no_bytes(fixtures_dir):
    """The same block profiled with record_shapes off: no span records a size, so bytes and GB/s stay unknown (?),
    and one note says why (and how to get them), counting the collectives by kind as the JSON holds them."""
    folder = fixtures_dir.parent / GLOO / "plain"
    spans = [e["name"] for rank in (0, 1) for e in json.loads(gzip.decompress(
        (folder / f"rank{rank}.json.gz").read_bytes()))["traceEvents"] if e.get("name", "").startswith("gloo:")]
    assert sorted(spans) == ["gloo:all_gather"] * 4 + ["gloo:all_reduce"] * 2
    result = run(folder, "--json")
    doc = json.loads(result.stdout)
    assert all(r["bytes"] is None for r in doc["instances"]) and len(doc["instances"]) == 6
    (note,) = [n for n in doc["notes"] if n.startswith("gloo collectives without bytes")]
    assert note == ("gloo collectives without bytes and GB/s (?): 6 (4 all-gather, 2 all-reduce) have no recorded "
                    "input shape (torch.profiler records them with record_shapes=True) or none of a known type")
    text = run(folder)
    assert text.stderr.count("record_shapes=True") == 1 and " ? " in text.stdout


def test_gloo_ranks_name_no_chip_for_arriving_last(fixtures_dir):
    """The newcomer's block's step on 2 gloo ranks of one machine: which rank's gloo span starts last is the host's
    scheduling, and the README says no straggler is named there; the step's line named one ("rank 1 device 0 arrived
    last at 2 of 3 collectives"). Now it names none and keeps the skew: each span's start on rank 0 against the same
    span's on rank 1 (k-th in start order), summed, by hand from the JSON."""
    folder = fixtures_dir.parent / GLOO / "shapes"
    starts = []
    for rank in (0, 1):
        raw = json.loads(gzip.decompress((folder / f"rank{rank}.json.gz").read_bytes()))
        starts.append(sorted((e["ts"], e["name"]) for e in raw["traceEvents"] if e.get("name", "").startswith("gloo:")))
    assert [n for _, n in starts[0]] == [n for _, n in starts[1]] and len(starts[0]) == 3
    skew_us = sum(abs(a - b) for (a, _), (b, _) in zip(*starts))
    last = [int(b > a) for (a, _), (b, _) in zip(*starts)]  # the rank whose span starts later
    often = max((0, 1), key=last.count)
    result = run(folder)
    assert result.exit_code == 0, result.output
    (line,) = [row for row in result.stdout.splitlines() if row.startswith("step ")]
    # the rank left out of the wait is named, not flagged
    assert line.startswith(f"step 1: 3 collectives matched across chips; rank {often} device 0 arrived last most "
                           f"often ({last.count(often)} of 3, the host's scheduling: not flagged a straggler); skew "
                           f"{skew_us:.1f} us summed")
    assert "(straggler)" not in line and "; the other chips' exposed wait " in line
    assert "these ranks' collectives ran on host CPUs (gloo)" in result.stderr


@pytest.fixture(scope="module")
def sp_profile(built_once):
    """The quickstart's sp variant (bundled model wan/tiny, plan sp, ring) on 4 fake CPU devices: two
    profiled steps, as the worker captures them; returns the trace folder and the compiled step's HLO."""
    folder = built_once("sp_profile", _sp_profile)
    return folder / "trace", (folder / "step.hlo.txt").read_text()


def _sp_profile(folder):
    import jax  # (jax and the models only for this fixture: the rest of the module reads files)
    import jax.numpy as jnp

    from perfkit.models import plan_for
    from perfkit.models.pipeline import DenoiseConfig, Denoiser
    from perfkit.record import jax_trace

    out = folder / "trace"
    plan = plan_for("wan", "tiny", {"plan": "sp", "impl": "ring"}, 4)
    den = Denoiser("wan", "tiny", plan, jax.devices()[:4], DenoiseConfig(steps=4, guidance=None, seed=0,
                                                                        dtype="bfloat16"))
    t, t_next = den.sigmas[0], den.sigmas[1]
    hlo = den.program.lower(den.params, den.state, den.conditions, jnp.float32(t),  # the step program itself
                            jnp.float32(t_next - t)).compile().as_text()
    den.step().block_until_ready()
    for i in (1, 2):
        with jax_trace(str(out), i):
            den.step().block_until_ready()
    (folder / "step.hlo.txt").write_text(hlo)


def test_quickstart_sp_collective_permutes(sp_profile):
    folder, hlo = sp_profile
    permutes = dict(re.findall(r"%?(\S+) = (\S+) collective-permute\(", hlo))  # name -> shape with layout
    assert permutes and not re.search(r"all-gather\(|reduce-scatter\(|all-reduce\(", hlo)
    found = collectives.analyse(events.load([folder]))
    inst, ops, steps = found["instances"], found["ops"], found["steps"]
    assert set(inst["kind"]) == {"collective-permute"}
    per_chip = inst.groupby(["step", "device"]).size()
    assert per_chip.index.get_level_values("device").unique().tolist() == [0, 1, 2, 3]
    assert (per_chip == len(permutes)).all()  # each permute of the program once per chip and step
    assert set(inst["op"]) == set(permutes)
    buffer = {name: 4 * np.prod([int(d) for d in re.search(r"\[([\d,]*)\]", shape).group(1).split(",")])
              for name, shape in permutes.items()}  # f32 on CPU: 4 bytes an element
    assert (inst["bytes"] == inst["op"].map(buffer)).all()
    assert (inst["chips"] == 4).all() and (inst["wait_ps"] + inst["transfer_ps"] == inst["exposed_ps"]).all()
    assert (inst["exposed_ps"] + inst["hidden_ps"] <= inst["time_ps"]).all() and (inst["wait_ps"] >= 0).all()
    assert inst.groupby(["step", "op"])["last"].sum().le(1).all()
    # the skew of an instance is its last arrival minus its first, the same on every chip
    spread = inst.groupby(["step", "op"])["start_ps"].agg(lambda s: s.max() - s.min())
    assert (inst.groupby(["step", "op"])["skew_ps"].first() == spread).all()
    assert steps["step"].tolist() == [1, 2] and (steps["matched"] == len(permutes)).all()
    for s in steps.itertuples():  # the straggler is the chip most often last in that step
        counts = inst[(inst["step"] == s.step) & inst["last"]].groupby("device").size()
        assert s.device == counts.idxmax() and s.times_last == counts.max()
    assert (ops["gbps"] > 0).all() and (ops["count"] == 1).all()
    text = run(folder).stdout
    assert "collective-permute" in text and "arrived last most often (" in text and "GB/s" in text


def test_no_collectives_is_a_result_in_one_line(tmp_path):
    """A whole trace without collectives is a result, not bad input: one line, exit 0; --json has empty tables."""
    from trace_builders import one_step_trace

    path = one_step_trace(tmp_path / "c.xplane.pb", [("fusion.1", "fusion", 0, 10)])
    result = run(path)
    assert result.exit_code == 0 and result.stdout == "no collectives in these traces\n"
    doc = json.loads(run(path, "--json").stdout)
    assert doc["ops"] == doc["steps"] == doc["instances"] == []


def test_no_collectives_on_a_gpu_says_what_a_collective_is(fixtures_dir):
    """A Kineto GPU trace without NCCL / RCCL kernels (a real Triton example): the line says what a GPU's
    collectives are, and HTA's own rule beside it (a hunt's DeepSeek trace: DeepEP's all-to-all kernels read as compute and
    "no collectives", with nothing saying communication meant NCCL's kernels only)."""
    result = run(fixtures_dir / "kineto" / "hta_triton_example.json.gz")
    assert result.exit_code == 0 and result.stdout == (
        "no collectives in these traces (a GPU's collectives are NCCL's and RCCL's kernels, those whose names contain "
        "nccl or rccl; HTA takes those matching ^nccl.*Kernel, as RCCL's ncclDevKernel_* do: other libraries' "
        "communication kernels, DeepEP's dispatch and combine, are compute here)\n")


def test_the_report_s_wait_is_the_step_lines_wait(tmp_path):
    """report.md's column "waiting for the last chip" (summary.json's wait_ms) was a mean over every chip, the last
    one's 0 too, where `perfkit trace collectives` says a step's chips but the last waited N us each: a newcomer's
    tp all-reduce read 2.166 ms in the report and 3770.1, 2015.2 and 1731.9 us in its trials' step lines. One
    figure now, by hand from straggler_trace's ops (its docstring): each chip's wait (us) per step and kind, the
    step's last most often chip 3 in step 0, chip 1 in step 1, left out."""
    from perfkit.report.markdown import _collectives
    from perfkit.trace.runs import summarize

    waits = [  # chip 0, 1, 2, 3
        {"all-gather": (17, 20, 20, 0), "reduce-scatter": (4, 4, 4, 0), "collective-permute": (2, 0, 2, 2)},
        {"all-gather": (5, 0, 8, 8), "reduce-scatter": (4, 0, 4, 4), "collective-permute": (2, 2, 0, 2)}]
    others = [(0, 1, 2), (0, 2, 3)]
    expected = {kind: sum(sum(step[kind][c] for c in chips) / 3 for step, chips in zip(waits, others)) / 2
                for kind in waits[0]}
    assert expected == pytest.approx({"all-gather": 13, "reduce-scatter": 4, "collective-permute": 4 / 3})
    for trial in ("00-sp", "01-sp"):  # two trials alike: their steps' mean is one trial's
        straggler_trace(tmp_path / f"trials/{trial}/rank0/trace/step0/h.xplane.pb")
    trials = [{"variant": "sp", "status": "ok", "dir": f"trials/{d}"} for d in ("00-sp", "01-sp")]
    got = summarize(tmp_path, trials, ["sp"])["collectives"]
    assert {k["kind"]: k["wait_ms"] * 1e3 for k in got["sp"]["kinds"]} == pytest.approx(expected)
    # summed over the kinds, the step lines' wait, each step's (73 / 3 and 37 / 3 us) averaged
    lines = run(tmp_path / "trials/00-sp")
    assert "the other chips' exposed wait 24.3 us on average" in lines.stdout
    assert "the other chips' exposed wait 12.3 us on average" in lines.stdout
    assert sum(expected.values()) == pytest.approx((73 / 3 + 37 / 3) / 2)
    text = "\n".join(_collectives(got))
    assert "| all-gather | 1 | - | 0.017 | 0.016 | 0.001 | 0.013 | - |" in text
    assert text.count("Exposed wait of the others: in a traced step, each chip's exposed wait at the kind's "
                      "collectives") == 1
    assert "averaged over the step's chips other than the one that arrived last most often" in text


def test_run_summary_and_report_lines(tmp_path):
    """collectives.summarize over a run's trial folders (each trial's traces loaded once, for the
    breakdown too: perfkit.trace.runs), and the report's lines from it. Per chip-step of
    straggler_trace (4 chips x 2 steps): all-gather time (3 x 26 + 6 + 3 x 14 + 6) / 8 = 16.5 us, exposed
    (23 + 26 + 26 + 6 + 11 + 14 + 14 + 6) / 8 = 15.75, hidden 6 / 8; reduce-scatter 56 / 8 us; permute 44 / 8, 8 x
    32768 bytes over 44 us; the waits per step of the chips but the step's last, as
    test_the_report_s_wait_is_the_step_lines_wait works them out: all-gather 13 us, reduce-scatter 4, permute 4 / 3."""
    from trace_builders import one_step_trace

    from perfkit.report.markdown import _collectives, _host_scheduled
    from perfkit.trace.runs import summarize

    sp = tmp_path / "trials/00-sp"
    straggler_trace(sp / "rank0/trace/step0/h.xplane.pb")
    tp = tmp_path / "trials/01-tp"
    one_step_trace(tp / "rank0/trace/step0/h.xplane.pb", [("fusion.1", "fusion", 0, 10)])
    trials = [{"variant": v, "status": "ok", "dir": f"trials/{d}"} for v, d in (("sp", "00-sp"), ("tp", "01-tp"))]
    summary = summarize(tmp_path, trials, ["sp", "tp", "none"])
    got, got_variants = summary["collectives"], summary["variants"]
    assert set(got) == {"sp", "tp"} and got["tp"] == {"kinds": [], "steps": []}
    kinds = {k["kind"]: k for k in got["sp"]["kinds"]}
    assert list(kinds) == ["all-gather", "reduce-scatter", "collective-permute"]  # most exposed first
    ms = 1e-3
    assert [kinds["all-gather"][c] for c in ("count", "time_ms", "exposed_ms", "hidden_ms", "wait_ms")] == \
        pytest.approx([1, 16.5 * ms, 15.75 * ms, 0.75 * ms, 13 * ms])
    # step 1 names its all-gather by name only: no n, so the kind's bytes and GB/s are unknown, not partly summed
    assert (kinds["all-gather"]["bytes"], kinds["all-gather"]["gbps"]) == (None, None)
    assert (kinds["collective-permute"]["bytes"], kinds["collective-permute"]["gbps"]) == pytest.approx(
        (32768, 8 * 32768 / 44e3))
    assert (kinds["reduce-scatter"]["time_ms"], kinds["reduce-scatter"]["wait_ms"]) == pytest.approx((7 * ms, 4 * ms))
    assert (kinds["collective-permute"]["time_ms"], kinds["collective-permute"]["wait_ms"]) == pytest.approx(
        (5.5 * ms, 4 / 3 * ms))
    assert [(s["trial"], s["step"], s["device"]) for s in got["sp"]["steps"]] == [("00-sp", 0, 3), ("00-sp", 1, 1)]
    text = "\n".join(_collectives(got))
    assert "| all-gather | 1 | - | 0.017 | 0.016 | 0.001 | 0.013 | - |" in text
    assert "| collective-permute | 1 | 32768 | 0.005 | 0.005 | 0.000 | 0.001 | 5.96 |" in text
    assert "| time (ms) | exposed (ms) | hidden (ms) | exposed wait of the others (ms) | GB/s |" in text  # units
    skew = ("Arrival skew (last chip's arrival minus the first's, summed over a step's collectives) passes 5% of "
            "the step in 2 of 2 traced steps of sp; the most, 43.3% of step 0 of 00-sp (0.026 ms).")
    assert f"{skew} Straggler: rank 0 device 3, last to arrive at 2 of that step's 3 collectives." in text
    # the step of the largest share need not be that of the largest skew: a planted padding's run read 'at most
    # 10.925 ms, 67.0% of step 4 of 04-nopad' where step 4 of 03-nopad had a skew of 14.119 ms (47.0%)
    long_step = {**got["sp"], "steps": [{**got["sp"]["steps"][0], "skew_ms": 0.05, "skew_share": 0.2},
                                        {**got["sp"]["steps"][1], "skew_ms": 0.01, "skew_share": 0.5}]}
    mixed = "\n".join(_collectives({"sp": long_step}))
    assert "traced steps of sp; the most, 50.0% of step 1 of 00-sp (0.010 ms)." in mixed and "at most" not in mixed
    assert "Collectives of tp: none in its traces" in text
    calm = {"sp": {**got["sp"], "steps": [{**s, "skew_share": 0.01} for s in got["sp"]["steps"]]}}
    assert "skew" not in "\n".join(_collectives(calm))
    # CPU devices are threads on the host's cores: the skew is said to be the host's, no straggler named
    cpu = "\n".join(_collectives(got, "These are CPU devices: the chips are threads sharing the host's cores"))
    assert f"{skew} These are CPU devices" in cpu and "Straggler" not in cpu
    # a command case probes no devices (env.json's devices null): its traces say they ran on XLA's CPU devices
    straggler_trace(tmp_path / "cpu/trials/00-sp/rank0/trace/step0/h.xplane.pb", cpu=True)
    one_step_trace(tmp_path / "cpu/trials/01-tp/rank0/trace/step0/h.xplane.pb", [("fusion.1", "fusion", 0, 10)])
    on_cpu = summarize(tmp_path / "cpu", trials, ["sp", "tp"])
    assert on_cpu["variants"]["sp"]["cpu_devices"] and "cpu_devices" not in got_variants["sp"]
    assert _host_scheduled({"env": {"devices": None}, "breakdown": on_cpu})
    assert _host_scheduled({"env": {"devices": None}, "breakdown": {"variants": got_variants}}) is None
    # a newcomer's skipped-collective run: 4 processes over gloo, which the report called threads
    four = {"env": {"devices": None}, "breakdown": on_cpu, "variants": {"sp": {"ranks": 4}, "tp": {"ranks": 4}}}
    assert _host_scheduled(four) == ("These are CPU devices: the chips are threads of 4 processes sharing the host's "
                                     "cores, their collectives the processes' exchange (gloo)")
    # a torch case's ranks over gloo: processes of this machine (a newcomer's ring run named one a straggler, at a
    # summed skew of 261.5% of the step: its sends and recvs were in flight at once)
    gloo = {"variants": {v: {**got_variants[v], "measured": "host ops"} for v in got_variants}}
    why = _host_scheduled({"env": {"devices": None, "hosts": {"count": 1, "index": 0}}, "breakdown": gloo})
    assert why == "These ranks' collectives ran on the host's CPUs (gloo): processes sharing one machine's cores"
    assert _host_scheduled({"env": {"devices": None}, "breakdown": gloo}) == why  # (summaries from before hosts)
    # ranks on two hosts (perfkit run --hosts 2): a rank that arrives last may be a slow one
    assert _host_scheduled({"env": {"devices": None, "hosts": {"count": 2, "index": 0}}, "breakdown": gloo}) is None
    past = {"sp": {**got["sp"], "steps": [{**s, "skew_share": 2.615} for s in got["sp"]["steps"]]}}
    text = "\n".join(_collectives(past, why))
    assert ("261.5% of step 0 of 00-sp (0.026 ms; more than the step: collectives in flight at once each count "
            f"their own skew). {why}, so the skew is the host's scheduling, not a slow chip or rank; none is flagged a "
            "straggler.") in text
    assert "Straggler" not in text
    # a step with instances that never overlapped on their chips (pairs matched by order): no straggler named
    parted = {"sp": {**got["sp"], "steps": [{**s, "apart": 2} for s in got["sp"]["steps"]]}}
    text = "\n".join(_collectives(parted))
    assert f"{skew} 2 of that step's collectives, matched across ranks by their order, never overlapped" in text
    assert "Straggler" not in text


def test_async_done_pairs_with_the_start_its_text_names(tmp_path):
    """Two permutes in flight, finished in reverse order: each done names its start in its HLO text, so
    permute 1 runs [0, 9) and permute 2 [1, 5) (first in first out would give [0, 5) and [1, 9))."""
    def text(name, opcode, operand):
        return f"%{name} = f32[64,128]{{1,0}} {opcode}(f32[64,128]{{1,0}} %{operand}), source_target_pairs={{{{0,1}}}}"

    start, done, shape = "collective-permute-start", "collective-permute-done", "f32[64,128]"
    path = _one_chip(tmp_path / "pairs.xplane.pb", [
        (text(f"{start}.1", start, "p"), start, shape, 0, 1),
        (text(f"{start}.2", start, "q"), start, shape, 1, 2),
        (text(f"{done}.2", done, f"{start}.2"), done, shape, 2, 5),
        (text(f"{done}.1", done, f"{start}.1"), done, shape, 5, 9),
    ])
    inst = collectives.instances(events.load([path]))
    got = {r.op: (r.start_ps // U, r.end_ps // U, r.exposed_ps // U) for r in inst.itertuples()}
    assert got == {"collective-permute-start.1": (0, 9, 1 + 4), "collective-permute-start.2": (1, 5, 1 + 3)}


START, DONE, SYNC = collectives._START, collectives._DONE, collectives._SYNC


def test_pairs_oldest_first_by_hand():
    """One chip, kinds a (0) and b (1), ops in start order: a-start, b-start, a-done, a-done (none open:
    alone), sync, a-start, b-done, b-start, a-start. Instances come as their last op does; then the
    starts left open, kind by kind in the order each kind first started (a's 5 and 8 before b's 7)."""
    role = np.array([START, START, DONE, DONE, SYNC, START, DONE, START, START])
    kind = np.array([0, 1, 0, 0, 2, 0, 1, 1, 0])
    got = collectives._pairs_oldest_first(np.zeros(9, np.int64), role, kind)
    assert got.tolist() == [[0, 2], [3, 3], [4, 4], [1, 6], [5, 5], [8, 8], [7, 7]]


def test_pairs_without_starts():
    """Sync ops (NCCL kernels) and dones whose start was before the trace: each an instance alone."""
    role = np.array([SYNC, DONE, SYNC, DONE])
    got = collectives._pairs_oldest_first(np.array([0, 0, 1, 1]), role, np.array([0, 1, 0, 1]))
    assert got.tolist() == [[0, 0], [1, 1], [2, 2], [3, 3]]


@pytest.mark.parametrize("seed", range(60))
def test_pairs_oldest_first_as_the_rule_reads(seed):
    """The linear pairing gives what the op-by-op rule gives (the queues of ``_pairs_named``) on random
    runs of starts, dones and sync ops of 1-3 kinds on 1-3 chips where no done names its start."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 200))
    chip = np.sort(rng.integers(0, int(rng.integers(1, 4)), n))  # ops in chip order, as instances gives them
    role = rng.choice([START, DONE, SYNC], n, p=[0.45, 0.45, 0.1])
    kind = rng.integers(0, int(rng.integers(1, 4)), n)
    op = rng.integers(0, 5, n)
    expected = collectives._pairs_named(chip.tolist(), role.tolist(), kind.tolist(), op.tolist(), [-1] * n)
    assert collectives._pairs(chip, role, kind, op, np.full(n, -1)).tolist() == expected.tolist()


def _random_chips(rng, chips: int, span: int):
    """Compute ops on two lines of each chip (each line's ops apart; one op nested in another on line 0)
    and one collective instance per chip: its start op [a1, b1) and done op [a2, b2), a2 >= b1."""
    chip, line, start, end = [], [], [], []
    for c in range(chips):
        for ln in (0, 1):
            cuts = np.sort(rng.choice(np.arange(span), 2 * int(rng.integers(1, 6)), replace=False))
            for a, b in cuts.reshape(-1, 2):
                chip.append(c), line.append(ln), start.append(a), end.append(b)
                if ln == 0 and b - a > 4 and rng.random() < 0.5:  # a child inside: still compute
                    chip.append(c), line.append(ln), start.append(a + 1), end.append(b - 1)
    own = np.sort(rng.integers(0, span, (chips, 4)), axis=1)  # a1 <= b1 <= a2 <= b2 per chip
    return tuple(map(np.array, (chip, line, start, end))), own


@pytest.mark.parametrize("seed", range(40))
def test_exposed_time_until_any_instant_by_brute_force(seed):
    """The waits' exposed time from an instance's start to an instant (its points, ``_exposure``, read at
    the instant) against a per-picosecond timeline: each own op's instants before then that no compute
    op of its chip covers; on random compute ops (some nested) and instants inside, between and after the
    own ops."""
    rng = np.random.default_rng(seed)
    chips, span = int(rng.integers(1, 4)), 120
    (chip, line, start, end), own = _random_chips(rng, chips, span)
    compute = np.ones(chip.size + 2 * chips, bool)
    compute[chip.size:] = False  # the collective's own ops (line 2) are device ops too
    chip = np.concatenate([chip, np.repeat(np.arange(chips), 2)])
    line = np.concatenate([line, np.full(2 * chips, 2)])
    start, end = np.concatenate([start, own[:, [0, 2]].ravel()]), np.concatenate([end, own[:, [1, 3]].ravel()])
    order = np.lexsort((start, line, chip))  # as the device ops come: by chip and line, then start
    chip, line, start, end, compute = chip[order], line[order], start[order], end[order], compute[order]
    coverage = collectives._Coverage(chip, start, end, line, compute)
    until = own[:, 0] + rng.integers(0, span, chips)
    segments = [(own[:, 0], own[:, 1]), (own[:, 2], own[:, 3])]
    points, exposed = collectives._exposure(segments, np.arange(chips), coverage)
    got = collectives._exposed_until(points, chips, until)
    covered = np.zeros((chips, 2 * span + 1), bool)
    for c, a, b in zip(chip[compute], start[compute], end[compute]):
        covered[c, a:b] = True
    expected = [sum(int((~covered[c, a[c]:min(b[c], until[c])]).sum()) for a, b in segments if until[c] > a[c])
                for c in range(chips)]
    assert got.tolist() == expected
    assert exposed.tolist() == [sum(int((~covered[c, a[c]:b[c]]).sum()) for a, b in segments) for c in range(chips)]


# HTA 0.5.0 (its own venv), `TraceAnalysis(trace_dir=<rank-0 and rank-1 of tests/data/real/kineto>,
# include_last_profiler_step=True).get_potential_stragglers(profiler_steps=[s], num_candidates=1)`:
# step 551 -> [1], step 552 -> [1] (HTA ranks by the normalized start of significant NCCL kernels).
HTA_STRAGGLERS = {551: 1, 552: 1}


def test_straggler_of_two_real_ranks_agrees_with_hta(fixtures_dir, tmp_path):
    files = [fixtures_dir / f"kineto/rank-{r}.json.gz" for r in (0, 1)]
    doc = json.loads(run(*files, "--json").stdout)
    ours = {s["step"]: s["rank"] for s in doc["steps"]}
    assert ours == HTA_STRAGGLERS
    # NCCL SendRecv kernels, each launched under an nccl:* annotation (by hand: _launch_annotations)
    assert {r["kind"] for r in doc["instances"]} == {"all-to-all", "all-reduce", "all-gather"}
    assert all(r["chips"] == 2 for r in doc["instances"])  # both ranks: one time base (epoch microseconds)
    try:
        from hta.trace_analysis import TraceAnalysis
    except ImportError:
        return
    for f in files:
        (tmp_path / f.name).symlink_to(f)
    hta = TraceAnalysis(trace_dir=str(tmp_path), include_last_profiler_step=True)
    assert {s: hta.get_potential_stragglers(profiler_steps=[s], num_candidates=1)[0] for s in ours} == ours


def test_point_to_point_pairs_that_never_overlapped_are_left_out(fixtures_dir):
    """The two real ranks' SendRecv kernels are matched by their order in a step; a newcomer found pairs where one
    rank's kernel ended before the other's began (961.088 ms against 1007.595 ms), counted as skew, and the step's
    'straggler' named from them. Each matched pair's overlap, checked here from its instances' own times: those
    without one are `apart`, in no step's skew, wait or last arrival, and the text names no straggler."""
    files = [fixtures_dir / f"kineto/rank-{r}.json.gz" for r in (0, 1)]
    doc = json.loads(run(*files, "--json").stdout)
    pairs = {}
    for r in doc["instances"]:
        pairs.setdefault((r["step"], r["op"], r["kind"], r["occurrence"]), []).append(r)
    apart = {key: min(r["end_ps"] for r in rows) < max(r["start_ps"] for r in rows) for key, rows in pairs.items()}
    assert all(len(rows) == 2 for rows in pairs.values()) and any(apart.values()) and not all(apart.values())
    for key, rows in pairs.items():
        assert all(r["apart"] == apart[key] for r in rows)
        if apart[key]:
            assert all(r["skew_ps"] == 0 and r["wait_ps"] == 0 and not r["last"] for r in rows)
    for s in doc["steps"]:
        mine = [k for k in apart if k[0] == s["step"]]
        assert (s["apart"], s["matched"]) == (sum(apart[k] for k in mine), sum(not apart[k] for k in mine))
        assert s["skew_ps"] == sum(max(r["start_ps"] for r in pairs[k]) - min(r["start_ps"] for r in pairs[k])
                                   for k in mine if not apart[k])
    text = run(*files).stdout
    assert "(straggler)" not in text and text.count("never overlapped across chips, so are not one transfer (left out; "
                                                    "the chip that arrived last is not flagged a straggler)") == 2
    # the steps' wait is a sum per chip, the table's a mean per instance: a newcomer could not derive one from the other
    assert text.count("us on average, summed over the step's collectives (the table's wait: a mean per instance over "
                      "every chip, the last one's too)") == 2


def test_gpu_kernel_of_an_async_start_is_the_collective(tmp_path):
    """trace_builders.gpu_trace: the NCCL kernel of XLA's all-reduce-start.1 on stream 20 [5, 15) us is
    the whole collective (a GPU's done is a host-side wait); fusion_1 [0, 10) on stream 7 hides its first
    5 us, so exposed 5 (the breakdown's ICI of that step), hidden 5."""
    from trace_builders import gpu_trace

    with noted(UNSIZED + r": 1 ops \(1 all-reduce\)"):  # its bytes below
        inst = collectives.instances(events.load([gpu_trace(tmp_path / "g.xplane.pb")]))
    got = [(r.op, r.kind, r.step, r.time_ps // U, r.exposed_ps // U, r.hidden_ps // U) for r in inst.itertuples()]
    assert got == [("all-reduce-start.1", "all-reduce", 0, 10, 5, 5)]
    assert np.isnan(inst["bytes"].iloc[0])  # one GPU, no groups in the trace: the group size is unknown


def test_v6e_shaped_profile(tmp_path):
    """synthetic.tpu_profile (whole HLO text names, op stats on metadata), 2 chips x 2 steps of TPU_STEP:
    all-reduce-start.1 [40, 42) .. all-reduce-done.1 [60, 70) us around fusion.2 [42, 60): time 30, hidden
    18, exposed 2 + 10; fusion.3 (a fusion running reduce-scatter, 6 us); all-reduce.2 (8 us). Their texts name no
    replica_groups; the program's HloProto records {{0,1}} for each (the fusion's, on the reduce-scatter it runs):
    all-reduce-start.1's f32[4096,1024] 2 (2-1)/2 x 16 MiB sent, fusion.3's output f32[256,1024] 1/2 of 2 x 1 MiB,
    all-reduce.2's f32[1024] 2 (2-1)/2 x 4 KiB."""
    from perfkit.trace.synthetic import tpu_profile

    inst = collectives.instances(events.load([tpu_profile(tmp_path / "v6e.xplane.pb", chips=2, steps=2)]))
    rows = {(r.op, r.kind, r.time_ps // U, r.exposed_ps // U, r.hidden_ps // U, r.bytes, r.group)
            for r in inst.itertuples()}
    assert rows == {("all-reduce-start.1", "all-reduce", 30, 12, 18, 16 * 2**20, 2),
                    ("fusion.3", "reduce-scatter", 6, 6, 0, 2**20, 2), ("all-reduce.2", "all-reduce", 8, 8, 0, 4096, 2)}
    assert len(inst) == 2 * 2 * 3 and (inst["skew_ps"] == 0).all() and not inst["last"].any()


def test_a_variant_whose_traced_trial_hung_names_it(tmp_path):
    """A newcomer's hung run: the hung trial's traces read as "no trace captured" in the report, though `trace tail`
    reads them (it is how one finds where the trial stopped). The variant's row names the trial and the command."""
    from trace_builders import one_step_trace

    from perfkit.trace.runs import summarize

    one_step_trace(tmp_path / "trials/00-ring/rank0/trace/step0/h.xplane.pb", [("fusion.1", "fusion", 0, 10)])
    one_step_trace(tmp_path / "trials/01-skip/rank0/trace/step0/h.xplane.pb", [("fusion.1", "fusion", 0, 10)])
    (tmp_path / "trials/02-skip").mkdir(parents=True)
    trials = [{"variant": v, "status": s, "dir": f"trials/{d}"}
              for v, s, d in (("ring", "ok", "00-ring"), ("skip", "hung", "01-skip"), ("skip", "failed", "02-skip"))]
    got = summarize(tmp_path, trials, ["ring", "skip"])["variants"]
    assert "error" not in got["ring"] and got["skip"] == {"error": (
        "no good trial traced: its trial 01-skip (hung) left traces, where it stopped: "
        f"`perfkit trace tail {tmp_path / 'trials/01-skip'}`")}
    got = summarize(tmp_path, trials[:1] + trials[2:], ["ring", "skip"])["variants"]
    assert got["skip"] == {"error": "no trace captured"}


def test_nccl_reduce_scatter_bytes_are_its_input_s_share(fixtures_dir, tmp_path):
    """PyTorch records a reduce-scatter's ``In msg nelems`` as its whole input (its output's count times the group
    size, ProcessGroupNCCL's ``_reduce_scatter_base``): a device sends (n-1)/n of that input. The whole had been
    taken n times over (the input's count read as the output's). One of the HTA fixture's all-reduce kernels,
    made a reduce-scatter of 4096 floats into 1024 on 4 ranks: 3/4 x 4096 x 4 = 12288 bytes sent."""
    raw = json.loads(gzip.decompress((fixtures_dir / "kineto/hta_nccl_data.json.gz").read_bytes()))
    kernel = min((e for e in raw["traceEvents"] if e.get("cat") == "kernel"
                  and e.get("args", {}).get("Collective name") == "allreduce"), key=lambda e: e["ts"])
    kernel["name"] = "ncclDevKernel_ReduceScatter_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"
    kernel["args"].update({"Collective name": "reduce_scatter", "In msg nelems": 4096, "Out msg nelems": 1024,
                           "Group size": 4, "dtype": "Float"})
    path = tmp_path / "rs.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    with noted(ROUNDED):  # the fixture's kernels' ns times
        inst = collectives.instances(events.load([path]))
    assert inst.loc[inst["kind"] == "reduce-scatter", "bytes"].tolist() == [3 / 4 * 4096 * 4]


def _launch_annotations(trace: list[dict]) -> dict[int, list[str]]:
    """A Kineto trace's NCCL kernels by correlation -> the names of the ``nccl:*`` annotations on the thread of their
    launch (the cuda_runtime call of the same correlation) that hold it, a plain reading of the JSON."""
    launches = {e["args"]["correlation"]: e for e in trace
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    notes = [e for e in trace if e.get("ph") == "X" and str(e.get("name", "")).startswith("nccl:")]
    out = {}
    for k in trace:
        launch = launches.get(k.get("args", {}).get("correlation")) if k.get("cat") == "kernel" else None
        if launch is not None and "nccl" in k["name"]:
            out[k["args"]["correlation"]] = [e["name"] for e in notes if (e["pid"], e["tid"]) == (
                launch["pid"], launch["tid"]) and e["ts"] <= launch["ts"] <= e["ts"] + e["dur"]]
    return out


def _sendrecv_by_step(path) -> dict[int, list[tuple[int, int, str]]]:
    """A Kineto file's SendRecv kernels (start, end us, the nccl:* annotation their launch ran under) per ProfilerStep
    their launch ran in, in time order."""
    trace = json.load(gzip.open(path))["traceEvents"]
    steps = {int(e["name"][13:]): (e["ts"], e["ts"] + e["dur"]) for e in trace
             if e.get("name", "").startswith("ProfilerStep#")}
    launched = {e["args"]["correlation"]: e["ts"] for e in trace
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    under = _launch_annotations(trace)
    kernels = [e for e in trace if e.get("cat") == "kernel" and "SendRecv" in e["name"]]
    return {step: sorted((e["ts"], e["ts"] + e["dur"], *under[e["args"]["correlation"]]) for e in kernels
                         if a <= launched.get(e["args"].get("correlation"), -1) < b) for step, (a, b) in steps.items()}


def test_the_table_s_skew_is_a_mean_over_the_instances_that_are_one_transfer():
    """HTA's two sampled ranks: each step's 5 SendRecv kernels, paired by order, overlap in 2 pairs alone; the step
    line leaves the 3 others out (not one transfer), while the table's skew, a mean per instance, counted them as 0
    (step 551: 3386 / 5 = 677.2 us). By hand from the JSON: per collective (the nccl:* annotation each kernel's
    launch ran under), the k-th kernel of a collective on one rank paired with the k-th of it on the other, the mean
    |start difference| of the overlapping pairs; none where no pair of it overlaps."""
    real = REAL_KINETO
    ranks = [_sendrecv_by_step(real / f"rank-{r}.json.gz") for r in (0, 1)]
    doc = json.loads(run("--json", str(real / "rank-0.json.gz"), str(real / "rank-1.json.gz")).stdout)
    kinds = {"nccl:all_to_all": "all-to-all", "nccl:all_reduce": "all-reduce", "nccl:_all_gather_base": "all-gather"}
    for step in (551, 552):
        paired = [p for k in kinds for p in zip(*([a for a in r[step] if a[2] == k] for r in ranks))]
        pairs = [(a, b) for a, b in paired if min(a[1], b[1]) >= max(a[0], b[0])]
        assert len(paired) == 5 and len(pairs) == 2
        rows = {r["kind"]: r["skew_ps"] for r in doc["ops"] if r["step"] == step}
        assert rows.keys() == {kinds[a[2]] for a in ranks[0][step]}
        for kind, skew in rows.items():
            mine = [abs(a[0] - b[0]) for a, b in pairs if kinds[a[2]] == kind]
            assert skew == (pytest.approx(np.mean(mine) * 1e6) if mine else None)


def test_kernels_take_the_collective_their_launch_ran_under():
    """HTA's negative_queue_length_values_check rank 0 (16 ranks, NCCL): its 80 NCCL kernels are all named
    ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t, read as collective-permutes by name alone. By a plain reading of the
    JSON (each kernel's correlation -> the cudaLaunchKernel of that correlation -> the nccl:* annotation around it on
    its thread): 45 are launched under nccl:all_to_all, 10 under nccl:_reduce_scatter_base, 10 under nccl:all_reduce,
    10 under nccl:_all_gather_base, and 5 have no launch in the trace (queued before the profiler started): those
    alone stay point-to-point. No record_param_comms there records In msg nelems or Group size (their args: Input
    Dims, Input type, Ev Idx, External id), and no kernel a Collective name: the nccl:* spans' inputs are the 75
    launched ones' buffers, but nothing in the trace says their group's size (no pg_config either), so n is unknown,
    never the chips matched: every kernel's bytes are unknown, and a note says why."""
    path = REAL_KINETO / "hta_negative_queue_rank0.json.gz"
    trace = json.load(gzip.open(path))["traceEvents"]
    under = _launch_annotations(trace)
    kernels = sorted((e for e in trace if e.get("cat") == "kernel" and "nccl" in e["name"]), key=lambda e: e["ts"])
    kinds = {"nccl:all_to_all": "all-to-all", "nccl:_reduce_scatter_base": "reduce-scatter",
             "nccl:all_reduce": "all-reduce", "nccl:_all_gather_base": "all-gather"}
    expected = [kinds[under[k["args"]["correlation"]][-1]] if under.get(k["args"]["correlation"])
                else "collective-permute" for k in kernels]
    assert len(kernels) == 80 and {k["name"] for k in kernels} == {
        "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"}
    assert Counter(expected) == {"all-to-all": 45, "reduce-scatter": 10, "all-reduce": 10, "all-gather": 10,
                                 "collective-permute": 5}
    assert not any({"In msg nelems", "Group size"} & e["args"].keys() for e in trace
                   if e.get("name") == "record_param_comms")
    result = CliRunner().invoke(cli, ["trace", "collectives", "--json", str(path)])
    assert result.exit_code == 0, result.output
    inst = sorted(json.loads(result.stdout)["instances"], key=lambda r: r["start_ps"])
    assert [r["kind"] for r in inst] == expected and all(r["bytes"] is None for r in inst)
    assert ("communication kernels without bytes and GB/s (?): 75 (45 all-to-all, 10 reduce-scatter, 10 all-reduce, "
            "10 all-gather) record no group size (Group size), nor do the torch.distributed spans around their "
            "launch, nor does their trace list its process groups (distributedInfo pg_config): n is unknown, not "
            "taken from the ranks given (a job's collectives may run on groups of fewer of its ranks); 5 (5 "
            "collective-permute) record none and have no launch in the trace under record_param_comms") in result.stderr


def test_kernel_bytes_from_the_record_param_comms_of_their_launch(fixtures_dir, tmp_path):
    """HTA's NCCL fixture with its kernels' collective args taken off (as kernels queued by older profilers carry
    none): the record_param_comms each kernel's launch ran under still holds them (Kineto copies them from there onto
    the kernel), so each kernel's bytes are the same as from its own args, by hand: an all-reduce 2(n-1)/n of
    In msg nelems times its dtype's size, a broadcast the buffer. They were all unknown."""
    raw = json.loads(gzip.decompress((fixtures_dir / "kineto/hta_nccl_data.json.gz").read_bytes()))
    kernels, expected = _nccl_bytes_by_hand(raw)
    for e in kernels:
        a = e["args"]
        e["args"] = {"correlation": a["correlation"], "stream": a["stream"], "device": a["device"]}
    path = tmp_path / "bare.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    with noted(ROUNDED):  # the fixture's kernels' ns times
        inst = collectives.instances(events.load([path]))
    assert inst.sort_values("start_ps")["bytes"].tolist() == expected and len(expected) == 21


def _no_chip_last_alone(path: Path) -> Path:
    """test_a_step_with_no_chip_last_alone_says_its_wait_is_every_chip_s_mean's trace (its docstring)."""
    space = XSpaceWriter("tpu-host")
    space.program(5, "jit_m", [("all-reduce.1", "all-reduce", "f32[8,128]")])
    for chip, (first, second) in enumerate([(10, 34), (14, 34), (14, 30)]):
        plane = space.plane(f"/device:TPU:{chip}")
        plane.line("Steps", 0).event(plane.op("0"), 0, 100 * U)
        ops = plane.line("XLA Ops", 0)
        for start, end in ((first, 20), (second, 40)):
            ops.event(plane.op("all-reduce.1", program_id=5), start * U, (end - start) * U)
    return space.save(path)


def test_a_step_with_no_chip_last_alone_says_its_wait_is_every_chip_s_mean(tmp_path):
    """Three TPU chips of one clock, one step [0, 100) us, two sync all-reduces (f32[8,128]) at which two chips arrive
    last together: the first, chip 0 [10, 20), chips 1 and 2 [14, 20): chip 0 waits 4 us; the second, chip 2
    [30, 40), chips 0 and 1 [34, 40): chip 2 waits 4 us. No chip is last alone, so none is left out of the wait: its
    mean over the 3 chips is (4 + 0 + 4) / 3 = 2.667 us, skew 4 + 4 = 8 us. The line said "the other chips waited"
    of that mean, as if one chip were left out."""
    path = _no_chip_last_alone(tmp_path / "tie.xplane.pb")
    (step,) = json.loads(run(path, "--json").stdout)["steps"]
    assert (step["rank"], step["device"], step["times_last"]) == (-1, -1, 0)
    assert (step["skew_ps"] / U, step["wait_ps"] / U) == (8, pytest.approx(8 / 3))
    (line,) = [row for row in run(path).stdout.splitlines() if row.startswith("step ")]
    assert line.startswith("step 0: no chip arrived last alone at its 2 collectives; skew 8.0 us summed")
    assert "other chips" not in line
    assert ("; every chip's exposed wait 2.7 us on average, none left out (no chip arrived last alone), summed over "
            "the step's collectives") in line


def test_the_step_wait_is_named_the_exposed_wait_and_the_columns_are_defined(fixtures_dir):
    """A newcomer's hand check of the two real ranks' step 551 from their traces' kernels: rank 0's all-reduce
    kernel starts 3302 us before rank 1's, 1505 us of them under rank 0's other kernels (1797 us exposed), and its
    all-gather 84 us before rank 1's, under none: 3386 us in the collectives before the last chip arrived, 1881 of
    them exposed. The line said "the other chips waited 1881.0 us each", all of the wait in words, and the table's
    wait and transfer columns were defined nowhere."""
    files = [fixtures_dir / f"kineto/rank-{r}.json.gz" for r in (0, 1)]
    text = run(*files).stdout
    (line,) = [row for row in text.splitlines() if row.startswith("step 551:")]
    assert "; the other chips' exposed wait 1881.0 us on average, summed over the step's collectives" in line
    assert "waited" not in text and "3386.0 us summed" in line  # (the skew: all of the time before the last arrival)
    (legend,) = [row for row in text.splitlines() if row.startswith("columns: ")]
    assert ("wait: the exposed wait, a chip's time in the collective before the last chip arrived during which it "
            "ran nothing else (its part under compute is hidden)") in legend
    assert "transfer: the exposed time after the last chip arrived (exposed = wait + transfer)" in legend
    assert "skew: the last chip's arrival minus the first's" in legend


def test_the_report_s_wait_is_defined_as_the_step_lines_give_it_in_both_cases(tmp_path):
    """report.md's columns said its wait is what `perfkit trace collectives` "says a step's other chips waited each",
    where a step with no chip last alone says every chip's mean, none left out. Two variants: sp, straggler_trace
    (chip 3 last most often in step 0, chip 1 in step 1, left out: 73 / 3 and 37 / 3 us, as
    test_the_report_s_wait_is_the_step_lines_wait works them out), and tie, _no_chip_last_alone's three chips, none
    last alone: (4 + 0 + 4) / 3 us, every chip's mean. The report's definition names both, as the step lines word
    them, and the wait the exposed wait."""
    from perfkit.report.markdown import _collectives
    from perfkit.trace.runs import summarize

    straggler_trace(tmp_path / "trials/00-sp/rank0/trace/step0/h.xplane.pb")
    _no_chip_last_alone(tmp_path / "trials/01-tie/rank0/trace/step0/h.xplane.pb")
    trials = [{"variant": v, "status": "ok", "dir": f"trials/{d}"} for v, d in (("sp", "00-sp"), ("tie", "01-tie"))]
    got = summarize(tmp_path, trials, ["sp", "tie"])["collectives"]
    assert [k["wait_ms"] * 1e3 for k in got["tie"]["kinds"]] == pytest.approx([8 / 3])
    assert sum(k["wait_ms"] * 1e3 for k in got["sp"]["kinds"]) == pytest.approx((73 / 3 + 37 / 3) / 2)
    assert "the other chips' exposed wait 24.3 us on average" in run(tmp_path / "trials/00-sp").stdout
    assert "every chip's exposed wait 2.7 us on average, none left out" in run(tmp_path / "trials/01-tie").stdout
    text = "\n".join(_collectives(got))
    assert "| time (ms) | exposed (ms) | hidden (ms) | exposed wait of the others (ms) | GB/s |" in text
    assert ("Exposed wait of the others: in a traced step, each chip's exposed wait at the kind's collectives, its "
            "time in them before their last chip arrived during which it ran nothing else (its part under compute is "
            "hidden)") in text
    assert ("summed over the kinds, it is the exposed wait `perfkit trace collectives` gives a step: the other chips' "
            "mean, or every chip's on average where no chip arrived last alone") in text
    assert "waited" not in text


def test_the_report_names_no_straggler_where_no_chip_arrived_last_alone(tmp_path):
    """_no_chip_last_alone's step: skew 4 + 4 = 8 us of its 100 us, past STRAGGLER_SHARE, yet no chip arrived last
    alone at either all-reduce, and `perfkit trace collectives` names none. report.md said "Straggler: rank -1 device
    -1, last to arrive at 0 of that step's 2 collectives"."""
    from perfkit.report.markdown import _collectives
    from perfkit.trace.runs import summarize

    _no_chip_last_alone(tmp_path / "trials/00-tie/rank0/trace/step0/h.xplane.pb")
    got = summarize(tmp_path, [{"variant": "tie", "status": "ok", "dir": "trials/00-tie"}], ["tie"])["collectives"]
    text = "\n".join(_collectives(got))
    assert ("passes 5% of the step in 1 of 1 traced steps of tie; the most, 8.0% of step 0 of 00-tie (0.008 ms). No "
            "chip arrived last alone at that step's 2 collectives: none is flagged a straggler.") in text
    assert "Straggler" not in text and "-1" not in text


_INPUT_TYPE_BYTES = {"float": 4, "long": 8, "int": 4, "unsigned char": 1, "signed char": 1}


def _nccl_inputs_by_hand(trace: list[dict]) -> list[tuple[float, str, float]]:
    """A Kineto trace's NCCL kernels in start order: (start us, the innermost nccl:* annotation on the thread of
    their launch that holds it, the bytes of that annotation's recorded inputs), a plain reading of the JSON; those
    without a launch in the trace left out."""
    launches = {e["args"]["correlation"]: e for e in trace
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    notes = [e for e in trace if e.get("ph") == "X" and str(e.get("name", "")).startswith("nccl:")]
    out = []
    for k in sorted((e for e in trace if e.get("cat") == "kernel" and "nccl" in e["name"]), key=lambda e: e["ts"]):
        launch = launches.get(k["args"]["correlation"])
        if launch is None:
            continue
        note = max((e for e in notes if (e["pid"], e["tid"]) == (launch["pid"], launch["tid"])
                    and e["ts"] <= launch["ts"] <= e["ts"] + e["dur"]), key=lambda e: e["ts"])
        size = sum(int(np.prod(d)) * _INPUT_TYPE_BYTES[t] for d, t in zip(note["args"]["Input Dims"],
                                                                           note["args"]["Input type"]))
        out.append((k["ts"], note["name"], size))
    return out


def test_kernels_sized_by_their_nccl_span_s_input_say_their_group_size_is_what_is_unknown():
    """HTA's two sampled ranks of a 128-rank job: no kernel or record_param_comms records a message size or a group
    size, but the nccl:* span around each kernel's launch records its input tensor (Input Dims, Input type): by hand
    every one of the 20 has one, of a known type. The group size is what is missing (the job has 128 ranks,
    distributedInfo world_size, the two traces hold 2 of them; no pg_config): the 2 chips matched are not n. The note
    said the spans recorded no message size."""
    real = REAL_KINETO
    for r in (0, 1):
        raw = json.load(gzip.open(real / f"rank-{r}.json.gz"))
        assert raw["distributedInfo"]["world_size"] == 128 and len(_nccl_inputs_by_hand(raw["traceEvents"])) == 10
        assert not any({"Group size", "In msg nelems"} & e["args"].keys() for e in raw["traceEvents"]
                       if e.get("name") == "record_param_comms" or e.get("cat") == "kernel")
    result = run("--json", real / "rank-0.json.gz", real / "rank-1.json.gz")
    assert result.exit_code == 0, result.output
    assert all(r["bytes"] is None for r in json.loads(result.stdout)["instances"])
    assert ("communication kernels without bytes and GB/s (?): 20 (8 all-to-all, 8 all-reduce, 4 all-gather) record "
            "no group size (Group size), nor do the torch.distributed spans around their launch, nor does their "
            "trace list its process groups (distributedInfo pg_config): n is unknown, not taken from the ranks given"
            ) in result.stderr
    assert "record no message size" not in result.stderr


def test_kernel_bytes_from_the_nccl_span_s_input_where_the_trace_lists_its_group(tmp_path):
    """The same two ranks, their distributedInfo world_size made 2 and a process group of 2 ranks listed (pg_config,
    as torch records it; the traces are then the whole job, n that group's 2, not the chips matched): each kernel's
    buffer is the input of the nccl:* span around its launch, by hand: an all-reduce 2(n-1)/n of it, an all-to-all
    (n-1)/n of it (its whole send buffer), an _all_gather_base's input one rank's part, (n-1)/n of n of them."""
    paths, expected = [], {}
    share = {"nccl:all_reduce": 1.0, "nccl:all_to_all": 0.5, "nccl:_all_gather_base": 1.0}  # n = 2
    for r in (0, 1):
        raw = json.load(gzip.open(REAL_KINETO / f"rank-{r}.json.gz"))
        raw["distributedInfo"]["world_size"] = 2
        raw["distributedInfo"]["pg_config"] = [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl",
                                                "pg_size": 2, "ranks": [0, 1]}]
        expected[r] = [share[name] * size for _, name, size in _nccl_inputs_by_hand(raw["traceEvents"])]
        paths.append(tmp_path / f"rank-{r}.json.gz")
        paths[-1].write_bytes(gzip.compress(json.dumps(raw).encode()))
    result = run("--json", *paths)
    assert result.exit_code == 0, result.output
    inst = sorted(json.loads(result.stdout)["instances"], key=lambda i: (i["rank"], i["start_ps"]))
    assert {r: [i["bytes"] for i in inst if i["rank"] == r] for r in (0, 1)} == expected
    assert expected[0][:3] == [384 * 8 / 2, 419430400 / 2, 19618307 * 4] and len(expected[0]) == 10
    assert "communication kernels without bytes" not in result.stderr


def test_a_reduce_scatter_s_nccl_input_is_n_of_its_output_and_an_all_gather_s_one_of_n(tmp_path):
    """HTA's negative_queue_length_values_check rank 0 with Group size 8 written onto its reduce-scatter and
    all-gather kernels (FSDP's: by a plain reading, each nccl:_reduce_scatter_base records an input of 65536 rows,
    each nccl:_all_gather_base one of 8192, of the same widths: a shard is 1/8 of the whole). A reduce-scatter's input
    is the whole, each device sending (n-1)/n of it; an all-gather's input is one rank's part, each device sending
    (n-1)/n of n of them: by hand 7/8 x and 7 x the input's bytes."""
    raw = json.loads(gzip.decompress((REAL_KINETO / "hta_negative_queue_rank0.json.gz").read_bytes()))
    trace = raw["traceEvents"]
    share = {"nccl:_reduce_scatter_base": 7 / 8, "nccl:_all_gather_base": 7.0}
    kernels = {k["ts"]: k for k in trace if k.get("cat") == "kernel" and "nccl" in k["name"]}
    expected = []
    for ts, name, size in _nccl_inputs_by_hand(trace):
        if name in share:
            kernels[ts]["args"]["Group size"] = 8
            expected.append(share[name] * size)
    assert len(expected) == 20 and expected[:3] == [7 / 8 * 65536 * 384 * 4, 7 / 8 * 65536 * 64 * 4, 7 * 8192 * 64 * 4]
    path = tmp_path / "fsdp.json.gz"
    path.write_bytes(gzip.compress(json.dumps(raw).encode()))
    # the fixture's kernels queued before its profile started; its all-to-alls and all-reduces of no group size
    with noted(LAUNCHLESS, KERNELS_UNSIZED + r": 55 \(45 all-to-all, 10 all-reduce\) record no group size"):
        inst = collectives.instances(events.load([path])).sort_values("start_ps")
    assert inst.loc[inst["kind"].isin(["reduce-scatter", "all-gather"]), "bytes"].tolist() == expected
