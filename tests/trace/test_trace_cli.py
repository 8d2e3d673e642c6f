"""The ``perfkit trace`` commands: JSON contract, text output, plots, and bad input as one line, exit 2."""

import gc
import gzip
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from trace_builders import TPU_EXPECTED, U, gpu_trace, one_step_trace, straggler_trace, tpu_trace

from perfkit.cli import cli
from perfkit.trace.synthetic import XSpaceWriter


def run(*args):
    return CliRunner().invoke(cli, ["trace", *map(str, args)])


def test_no_collection_runs_while_a_trace_command_loads_its_libraries():
    """Loading pandas and the analyses makes hundreds of thousands of objects and no garbage: in a fresh
    process, the collector does not run while they load, and they are set aside after (frozen: no later
    collection walks them), the collector on again."""
    probe = ("import gc, sys\n"
             "runs = []\n"
             "gc.callbacks.append(lambda phase, info: phase == 'start' and runs.append(info['generation']))\n"
             "from perfkit.cli.trace import _prepare\n"
             "runs.clear()\n"
             "_prepare()\n"
             "print(len(runs), 'pandas' in sys.modules, gc.get_freeze_count() > 0, gc.isenabled())")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["0", "True", "True", "True"]


@pytest.mark.parametrize("enabled", [True, False], ids=["on", "off"])
def test_a_trace_command_leaves_the_collector_as_it_found_it(tmp_path, enabled):
    (gc.enable if enabled else gc.disable)()
    try:
        result = run("breakdown", tpu_trace(tmp_path / "t.xplane.pb"))
        assert result.exit_code == 0, result.output
        assert gc.isenabled() is enabled
    finally:
        gc.enable()


def test_breakdown_json_contract(tmp_path):
    result = run("breakdown", tpu_trace(tmp_path / "t.xplane.pb"), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    keys = ["rank", "device", "step", "span_ps", "compute_ps", "ici_ps", "dcn_ps", "dma_ps", "idle_ps", "comm_ps",
            "hidden_ps", "overlap"]
    assert all(list(r) == keys for r in doc["rows"]) and all(r["dcn_ps"] == 0 for r in doc["rows"])
    got = {(r["device"], r["step"]): tuple(r[k] // U for k in keys[3:6] + keys[7:9]) for r in doc["rows"]}
    assert got == TPU_EXPECTED
    assert {m["device"]: m["steps"] for m in doc["mean"]} == {0: 3, 1: 1}
    assert doc["steps_from"] == ["Steps line"]


def test_breakdown_text_and_plot(tmp_path):
    png = tmp_path / "b.png"
    result = run("breakdown", gpu_trace(tmp_path / "g.xplane.pb"), "--plot", png)
    assert result.exit_code == 0, result.output
    assert "steps from: step annotations" in result.stdout
    assert "0.011 (46.7%)" in result.stdout  # mean compute over both steps: (11 + 10) / 2 of (20 + 25) / 2 us
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_diff_tail_export_commands(tmp_path):
    a = one_step_trace(tmp_path / "a.xplane.pb", [("fusion.1", "fusion", 0, 10), ("all-gather-done.1", "all-gather-done", 10, 15)])
    b = one_step_trace(tmp_path / "b.xplane.pb", [("fusion.1", "fusion", 0, 12), ("all-gather-done.1", "all-gather-done", 12, 13)])
    result = run("diff", a, b, "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert [(r["key"], r["delta_ps"] / U) for r in rows] == [("all-gather-done", -4), ("fusion", 2)]
    text = run("diff", a, b, "--by", "shape").stdout
    assert "all-gather-done f32[8,128]" in text and "-80.0" in text  # 5 us -> 1 us
    tail = run("tail", a, b, "-n", "1")
    assert tail.exit_code == 0 and "trace ends first: rank 1 device 0, 0.002 ms before the last" in tail.stdout
    # a newcomer read last_step 552 in a trace whose last marker was 551 (a collective after it): said (of traces that
    # end after their last collective, their step's marker closed, without a hang's reason)
    assert "last_step: after a chip's last step marker, the next;" in tail.stdout
    out = tmp_path / "new" / "merged.json"  # its folder made, as for a --plot
    assert run("export", a, b, "--perfetto", out).exit_code == 0
    names = {e["args"]["name"] for e in json.loads(out.read_text())["traceEvents"] if e["name"] == "process_name"}
    assert names == {"rank 0 device 0", "rank 1 device 0"}


def test_a_chip_whose_ops_all_take_no_time(tmp_path):
    """One TPU op of no duration (the case a fuzzed XSpace found): a span of 0 at its time, no share of it (nan%
    before), where the breakdown raised IndexError once the ops of no duration were set aside."""
    space = XSpaceWriter("zero")
    plane = space.plane("/device:TPU:0")
    plane.line("XLA Ops", 0).event(plane.op("fusion.1"), 5000, 0)
    result = run("breakdown", space.save(tmp_path / "zero.xplane.pb"))
    assert result.exit_code == 0, result.output
    assert "    0       0      1 0.000   0.000 0.000 0.000 0.000 0.000  0.000       -" in result.stdout, result.stdout


def test_diff_kinds_and_changes_read_from_the_table(tmp_path):
    """HTA's TraceDiff pair (real CUDA traces): a kernel whose C++ name has a namespace is of kind ``kernel``, not
    a kind of its own (fbgemm's split_embedding kernels were rows among the kinds); each delta % follows from the
    two times shown beside it; a kind gone from B says so (it read -100.0 beside new's "new")."""
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "kineto"
    a, b = real / "hta_trace_diff_control.json.gz", real / "hta_trace_diff_test.json.gz"
    text = run("diff", a, b, "-n", "40").stdout
    rows = [line.split() for line in text.splitlines() if line.split()[:1] and line.split()[-1][:1] in "+-ng"
            and len(line.split()) >= 8]
    kinds = {" ".join(r[:-7]) for r in rows}
    assert kinds and all(k in ("kernel", "memcpy", "memset") or k.startswith("nccl ") for k in kinds), kinds
    for r in rows:
        shown_a, shown_b, change = float(r[-6]), float(r[-5]), r[-1]
        if change not in ("new", "gone", "-"):
            assert f"{100 * (shown_b / shown_a - 1):+.1f}" == change, r
    cpu = real / "hta_rank_non_gpu.json.gz"  # a CPU trace's torch ops and annotations stay kinds of their own
    keys = [line.split("  compute")[0].strip() for line in run("diff", cpu, cpu, "-n", "400").stdout.splitlines()]
    assert "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad" in keys
    gone = run("diff", a, b, "--by", "op", "-n", "400").stdout
    assert any(line.split()[-1] == "gone" and float(line.split()[-5]) == 0 for line in gone.splitlines()
               if line.split())
    # each delta is the difference of the two times shown beside it (-0.065 beside 0.066 and 0.000 was not),
    # by op and in the totals, which take more decimals where they must
    table = [line.split() for line in gone.splitlines()[2:] if len(line.split()) >= 8 and "." in line.split()[-2]]
    totals = [line.split() for line in gone.split("totals by category (ms):")[1].splitlines()[2:]]
    assert len(table) > 100 and len({len(r[-6].split(".")[1]) for r in table}) == 1
    for shown_a, shown_b, delta, decimals in [(r[-6], r[-5], r[-2], len(r[-2].split(".")[1])) for r in table + rows] + \
            [(r[1], r[2], r[3], len(r[3].split(".")[1])) for r in totals]:
        assert round(float(shown_b) - float(shown_a), decimals) == float(delta), (shown_a, shown_b, delta)



def test_diff_totals_take_the_decimals_of_the_rows_above():
    """HTA's TraceDiff pair by kind: the rows read 3 decimals and the totals below them 6 (47.205167), no count up to
    six making their deltas the figures' difference. By category (as test_attribution's referee means have it):
    compute 47.2051666667 -> 91.7166666667 ms, ici 27.2558333333 -> 41.8901666667 ms; shown to the microsecond,
    91.717 - 47.205 = 44.512 and 41.890 - 27.256 = 14.634."""
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "kineto"
    text = run("diff", real / "hta_trace_diff_control.json.gz", real / "hta_trace_diff_test.json.gz").stdout
    head, totals = text.split("totals by category (ms):")
    rows = [line.split() for line in head.splitlines() if line.split()[-1:] and line.split()[-1][:1] in "+-ng"
            and len(line.split()) >= 8]
    assert rows and {len(r[-6].split(".")[1]) for r in rows} == {3}
    lines = [line.split() for line in totals.strip().splitlines()]
    assert lines[0] == ["category", "a", "b", "delta"]
    assert ["compute", "47.205", "91.717", "44.512"] in lines and ["ici", "27.256", "41.890", "14.634"] in lines
    assert {len(x.split(".")[1]) for r in lines[1:] for x in r[1:]} == {3}

def _one_op(path: Path, dur_ps: int) -> Path:
    space = XSpaceWriter("h")
    space.program(5, "jit_m", [("fusion.1", "fusion", "f32[8,128]")])
    chip = space.plane("/device:TPU:0")
    chip.line("Steps", 0).event(chip.op("0"), 0, 100 * U)
    chip.line("XLA Ops", 0).event(chip.op("fusion.1", program_id=5), 0, dur_ps)
    return space.save(path)


def test_diff_times_a_hair_apart_keep_one_sign(tmp_path):
    """0.01551 against 0.01549 ms show alike to the 4 decimals their delta takes: the delta -0.0000 and its
    percent -0.0 (the percent of the times shown had read +0.0 beside -0.0000)."""
    a, b = _one_op(tmp_path / "a.xplane.pb", 15_510_000), _one_op(tmp_path / "b.xplane.pb", 15_490_000)
    row = run("diff", a, b, "--by", "op").stdout.splitlines()[2].split()
    assert row == ["fusion.1", "compute", "0.0155", "0.0155", "1", "1", "-0.0000", "-0.0"]
    row = run("diff", b, a, "--by", "op").stdout.splitlines()[2].split()
    assert row[-2:] == ["0.0000", "+0.0"]


def test_breakdown_header_names_hta_only_for_what_hta_reads(tmp_path):
    """HTA reads Kineto traces, not XSpaces: an XSpace's header names no HTA option; one without steps has no last
    step to keep (both read "last step kept (HTA's include_last_profiler_step=True)")."""
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "xplane" / "mi300_jax08_gemm.xplane.pb"
    unstepped = run("breakdown", real).stdout
    assert unstepped.startswith("steps from: none (no step markers: one span a chip, its first device op to its "
                                "last, as --window trace); times in ms; comm:")
    # its rows' step: said, not the JSON's -1 (a newcomer met "-1" unexplained); --window trace: no last step
    assert unstepped.splitlines()[2].split()[2] == "none"
    whole = run("breakdown", real, "--window", "trace").stdout
    assert whole.startswith("steps from: whole trace; times in ms;") and whole.splitlines()[2].split()[2] == "whole"
    stepped = run("breakdown", tpu_trace(tmp_path / "t.xplane.pb")).stdout
    assert stepped.startswith("steps from: ") and "; last step kept; times in ms;" in stepped and "HTA" not in stepped


# tpu_trace's chip 1 runs [5,14) past its Steps marker [0,10) (its docstring): by hand, 4 us past in 1 of 4 steps
TPU_PAST = ("perfkit: note: 1 of 4 steps run past their step markers to the end of the last op started in them "
            "(0.004 ms past in all): a span here runs from its marker's start to the later of its end and that op's "
            "end, where xprof's step time, or a ProfilerStep's, is the marker's own\n")


def test_a_folder_of_both_kinds_says_which_it_read(tmp_path):
    """A folder holding an XSpace and a Kineto trace is read as XSpaces; the JSON left out is said, once (it was
    left out unsaid)."""
    tpu_trace(tmp_path / "both" / "t.xplane.pb")
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "kineto" / "rank-0.json.gz"
    shutil.copy(real, tmp_path / "both" / "rank-0.json.gz")
    result = run("breakdown", tmp_path / "both")
    assert result.exit_code == 0, result.output
    assert result.stderr == (f"perfkit: note: {tmp_path / 'both'}: its 1 *.xplane.pb read, its 1 *.json[.gz] left out "
                             "(a folder is read as one kind of trace: name the JSON files to read them)\n" + TPU_PAST)


def test_the_viewer_copy_beside_an_xspace_is_not_a_trace_left_out(tmp_path):
    """JAX's profiler writes <host>.trace.json.gz beside <host>.xplane.pb (the same events, for the trace
    viewer): no note on such a folder, every JAX profile's (it was noted on each), nor for a run directory's
    run.json, env.json and summary.json. Another host's JSON is noted."""
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "kineto" / "rank-0.json.gz"
    tpu_trace(tmp_path / "jax" / "vm.xplane.pb")
    shutil.copy(real, tmp_path / "jax" / "vm.trace.json.gz")
    result = run("breakdown", tmp_path / "jax")
    assert result.exit_code == 0 and result.stderr == TPU_PAST, result.output
    for record in ("run.json", "env.json", "summary.json"):  # a run directory's own records are no traces either
        (tmp_path / "jax" / record).write_text("{}")
    result = run("breakdown", tmp_path / "jax")
    assert result.exit_code == 0 and result.stderr == TPU_PAST, result.output
    shutil.move(tmp_path / "jax" / "vm.trace.json.gz", tmp_path / "jax" / "other.trace.json.gz")
    result = run("breakdown", tmp_path / "jax")
    assert result.exit_code == 0 and "its 1 *.json[.gz] left out" in result.stderr, result.output


def test_a_torch_run_folder_reads_its_traces_and_not_its_records(tmp_path):
    """A run directory of Kineto traces (a torch case's): its run.json, env.json and summary.json are not read as
    traces (each was skipped with a line of its own)."""
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "kineto" / "rank-0.json.gz"
    (tmp_path / "run" / "trials" / "00-a" / "rank0").mkdir(parents=True)
    shutil.copy(real, tmp_path / "run" / "trials" / "00-a" / "rank0" / "rank-0.json.gz")
    for record in ("run.json", "env.json", "summary.json"):
        (tmp_path / "run" / record).write_text("{}")
    result = run("breakdown", tmp_path / "run")
    assert result.exit_code == 0 and result.stderr == "", result.output


def test_tail_of_a_healthy_run_says_so_first(tmp_path):
    """A finished, healthy trial's tail read as a hang's: "first to stop: ..." led, and only its last line said the
    chips' collectives agreed. Whether they part leads, as where they do; and that no chip waits at a collective,
    each one's trace ending after its step 1 (three a step) closed."""
    out = run("tail", straggler_trace(tmp_path / "s.xplane.pb")).stdout
    assert out.startswith("the chips' collectives agree: no chip parts from the others in the traced sequence, and "
                          "every chip's trace ends after its last collective (6 completed each, the last in step 1, "
                          "whose marker closed with no op after it): none is waiting at one\n\ntrace ends first: ")


def test_tail_says_where_the_traces_end_not_where_the_chips_stopped(tmp_path):
    """A newcomer's: "first to stop: rank 2 device 4096, 2.914 ms before the last chip" named where the chip's trace
    ends as where the chip stopped, though a profiler writes an op when it ends: a chip inside a collective it never
    leaves has a trace ending at the op before. The lines say where the traces end. By hand: A's last op ends at
    15 us, B's at 13 us, 0.002 ms before; at 13 us A's trace is in all-gather-done.1 [10, 15). Both traces end after
    their last collective, their step's marker closed (``ended``): no chip waits, so the line says no more than where
    they end (test_a_finished_trial_s_trace_ends_are_not_worded_as_a_hang has a hung trial's)."""
    a, b = (one_step_trace(tmp_path / f"{side}.xplane.pb", [("fusion.1", "fusion", 0, split),
                                                           ("all-gather-done.1", "all-gather-done", split, end)])
            for side, split, end in (("a", 10, 15), ("b", 12, 13)))
    out = run("tail", a, b).stdout
    assert ("trace ends first: rank 1 device 0, 0.002 ms before the last chip's\n\n"
            "chips, earliest trace end first (ms):\n"
            " rank  device last_end before_last at_first_end_name at_first_end_kind at_first_end_category\n"
            "    1       0    0.013       0.002 all-gather-done.1   all-gather-done                   ici\n"
            "    0       0    0.015       0.000 all-gather-done.1   all-gather-done                   ici\n") in out
    assert "stop" not in out.split("\nlast 5 ops per chip")[0]


def test_tail_of_one_chip_names_no_chip_whose_trace_ends_first(fixtures_dir):
    """One chip's trace ends before no other: no "trace ends first: ..., 0.000 ms before the last chip's" line, and
    the chips' table leads."""
    out = run("tail", fixtures_dir / "kineto" / "hta_nccl_data.json.gz").stdout
    assert "ends first:" not in out and out.startswith("chips, earliest trace end first (ms):\n")


def test_tail_without_collectives_prints_no_table_of_blanks():
    """A real 8-GPU profile with no collectives (a convolution): tail says there are none, with no per-chip table of
    None and NaN (it printed 8 such rows)."""
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "xplane" / "mi300_jax_conv_8gpu.xplane.pb"
    result = run("tail", real, "-n", "1")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("no collectives in these traces: nothing to compare across chips\n")
    assert "collectives per chip" not in result.stdout and "NaN" not in result.stdout and "None" not in result.stdout


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field of a payload under 128 bytes (its length is one byte)."""
    return bytes([number << 3 | 2, len(payload)]) + payload


def _bad_inputs(tmp_path):
    good = tpu_trace(tmp_path / "good.xplane.pb").read_bytes()
    truncated = tmp_path / "truncated.xplane.pb"
    truncated.write_bytes(good[: len(good) // 2])
    foreign = tmp_path / "notes.xplane.pb"
    foreign.write_text("these are notes, not a profile\n" * 20)
    # XSpace{planes: {name, lines: {name, events: two cut short}}}, written field by field
    line = _field(2, b"XLA Ops") + _field(4, b"\x08\x01\x10") + _field(4, b"\x08")
    broken = tmp_path / "broken-event.xplane.pb"
    broken.write_bytes(_field(1, _field(2, b"/device:TPU:0") + _field(3, line)))
    ends_first = XSpaceWriter("h")
    ends_first.plane("/device:TPU:0").line("XLA Ops").event(1, 200, -50)  # an op that ends before it starts
    negative = ends_first.save(tmp_path / "negative.xplane.pb")
    no_ops = XSpaceWriter("h")
    no_ops.plane("/host:CPU").line("python").event(1, 0, 10)
    host_only = no_ops.save(tmp_path / "host-only.xplane.pb")
    kineto = json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}]}).encode()
    cut_gz = tmp_path / "cut.json.gz"
    cut_gz.write_bytes(gzip.compress(kineto)[:-12])
    no_events = tmp_path / "other.json"
    no_events.write_text(json.dumps({"schemaVersion": 1}))
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    # xprof's own demo profile as its repository now holds it: every byte that is not UTF-8 replaced by U+FFFD
    # (a text-mode commit; xprof cannot parse it either)
    real = Path(__file__).resolve().parents[1] / "data" / "real" / "xplane" / "xprof_tpu_inference_2.xplane.pb"
    mangled = tmp_path / "mangled.xplane.pb"
    mangled.write_bytes(real.read_bytes().decode("utf-8", errors="replace").encode())
    return [
        (["breakdown", mangled], mangled, "damaged"),
        (["breakdown", truncated], truncated, "truncated"),
        (["breakdown", foreign], foreign, "XSpace"),
        (["breakdown", broken], broken, "malformed event"),
        (["breakdown", negative], negative, "an event of negative duration (-50 ps) on line 'XLA Ops'"),
        (["breakdown", host_only], host_only, "no device ops"),
        (["tail", cut_gz], cut_gz, "chrome-trace JSON"),
        (["diff", no_events, cut_gz], no_events, "traceEvents"),
        (["export", tmp_path / "missing.xplane.pb", "--perfetto", tmp_path / "o.json"], "missing.xplane.pb", "no such"),
        (["breakdown", empty_dir], empty_dir, "no *.xplane.pb"),
        # an output under a file: the OS's reason, in one line
        (["export", tmp_path / "good.xplane.pb", "--perfetto", cut_gz / "x.json"], cut_gz, "File exists"),
        (["breakdown", tmp_path / "good.xplane.pb", "--steps", "(unclosed"], "--steps", "regular expression"),
        # markers asked for and none found: not the whole trace as one step, unsaid
        (["breakdown", tmp_path / "good.xplane.pb", "--steps", "nomatch"], "good.xplane.pb", "no event's name"),
    ]


def test_bad_input_is_one_line_exit_2(tmp_path):
    for args, names, words in _bad_inputs(tmp_path):
        result = run(*args)
        assert result.exit_code == 2, (args, result.output, result.exception)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("perfkit: "), (args, result.stderr)
        assert str(names) in lines[0] and words in lines[0], (args, lines[0])


@pytest.mark.parametrize("command", ["breakdown", "diff", "collectives", "tail", "export"])
def test_help(command):
    assert run(command, "--help").exit_code == 0


# HTA 0.5.0 (HolisticTraceAnalysis==0.5.0, in its own venv, 2026-12-01) on the TraceDiff pair of
# tests/data/real/kineto: `LabeledTrace(trace_dir=d).get_ops_summary(ops)`, the per-name sum that
# `TraceDiff.compare_traces` compares, over every GPU kernel of the trace (`stream != -1`; TraceDiff's own
# iteration filter would drop kernels HTA leaves at iteration -1). Per trace: distinct kernel names, kernels,
# total duration (us), and sha256 of the lines "name<TAB>count<TAB>total_us" sorted by name.
HTA_TRACE_DIFF = {
    "control": (174, 9450, 501567, "3614edbffb1b78ae29b326cd46fb0784c0f1249340567828e371812c84d83269"),
    "test": (135, 15632, 963762, "edccb38348073299346743c7eb9e78ea63c06ef6669534bd120bc19dd0395a96"),
}
HTA_ROWS = {  # name: (control count, control us, test count, test us), from the same run
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)": (18, 32880, 21, 92082),
    "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)": (42, 130655, 43, 159259),
    "Memcpy DtoD (Device -> Device)": (18, 2735, 4645, 92932),
    "volta_sgemm_32x128_nt": (0, 0, 188, 15924),
}


def _summary_lines(rows: dict) -> str:
    return "\n".join(f"{name}\t{count}\t{us}" for name, (count, us) in sorted(rows.items()))


def _hta_summaries(tmp_path, files) -> dict:
    """HTA's per-name summary of every GPU kernel, live (each trace in a folder of its own, as HTA reads)."""
    from hta.trace_diff import LabeledTrace

    out = {}
    for label, f in files.items():
        (tmp_path / label).mkdir()
        (tmp_path / label / f.name).symlink_to(f)
        lt = LabeledTrace(label=label, trace_dir=str(tmp_path / label))
        df = lt.t.get_trace(lt.ranks()[0])
        s = lt.get_ops_summary(df[df["stream"].ne(-1)]).groupby("name")[["counts", "total_duration"]].sum()
        out[label] = {n: (int(r.counts), int(r.total_duration)) for n, r in s.iterrows()}
    return out


def test_diff_counts_and_durations_equal_hta_trace_diff(fixtures_dir, tmp_path):
    """`trace diff --by op --window trace` (one span per chip, its whole trace) gives each kernel's count
    and total time as HTA's TraceDiff sums them."""
    files = {side: fixtures_dir / f"kineto/hta_trace_diff_{side}.json.gz" for side in ("control", "test")}
    result = run("diff", files["control"], files["test"], "--by", "op", "--window", "trace", "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["spans_a"] == doc["spans_b"] == 1 and doc["window"] == "trace"
    ours = {side: {r["key"]: (round(r[f"{x}_count"]), round(r[f"{x}_ps"] / U)) for r in doc["rows"] if r[f"{x}_count"]}
            for side, x in (("control", "a"), ("test", "b"))}
    for side, (names, count, total, digest) in HTA_TRACE_DIFF.items():
        rows = ours[side]
        assert (len(rows), sum(c for c, _ in rows.values()), sum(t for _, t in rows.values())) == (names, count, total)
        assert hashlib.sha256(_summary_lines(rows).encode()).hexdigest() == digest, side
    for name, (cc, cus, tc, tus) in HTA_ROWS.items():
        assert ours["control"].get(name, (0, 0)) == (cc, cus) and ours["test"][name] == (tc, tus), name
    try:
        import hta  # noqa: F401  (HTA where it is installed; CI has the figures above)
    except ImportError:
        return
    assert _hta_summaries(tmp_path, files) == ours


_ALLOCATION_PROBE = """
import ctypes, sys
import numpy as np
from perfkit.cli import cli

class MallInfo2(ctypes.Structure):  # glibc's struct mallinfo2: ten size_t fields
    _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                               "fsmblks", "uordblks", "fordblks", "keepcost")]

mallinfo2 = ctypes.CDLL(None).mallinfo2
mallinfo2.restype = MallInfo2
if "--trace" in sys.argv:
    try:
        cli(["trace", "breakdown", sys.argv[1]])
    except SystemExit:
        pass
before = mallinfo2().hblks
big = np.ones(8 << 20)  # 64 MB: past glibc's largest mmap threshold
print(mallinfo2().hblks - before, np._core.multiarray._get_madvise_hugepage(), file=sys.stderr)
"""


def test_trace_commands_reuse_freed_memory(tmp_path):
    """A trace command's process takes big arrays from the heap and no huge-page advice on them
    (perfkit.trace.memory; glibc's count of mmapped blocks and numpy's switch), a plain process does not."""
    import subprocess
    import sys

    path = one_step_trace(tmp_path / "a.xplane.pb", [("fusion.1", "fusion", 0, 10)])
    probe = lambda *a: subprocess.run([sys.executable, "-c", _ALLOCATION_PROBE, str(path), *a], capture_output=True,  # noqa: E731
                                      text=True, check=True).stderr.split()[-2:]
    assert probe() == ["1", "True"]  # the 64 MB array: one more mmapped block
    assert probe("--trace") == ["0", "False"]


def test_text_table_is_pandas_to_string():
    """The breakdown's fast table printer against pandas' to_string(index=False): int columns (negative,
    wider than their header, int32 / int64), str columns shorter and longer than their header."""
    import numpy as np
    import pandas as pd

    from perfkit.cli.trace import text_table

    frame = pd.DataFrame({"rank": np.array([0, 12], np.int32), "step": [-1, 123456], "verylongname": ["a", "bb"],
                          "s": ["0.417 (45.6%)", "-"], "n": np.array([7, -70000], np.int64)})
    assert text_table(frame) == frame.to_string(index=False)
    assert text_table(frame.iloc[:1, :2]) == frame.iloc[:1, :2].to_string(index=False)


def test_a_frame_written_a_chunk_at_a_time_is_the_document_json_writes(monkeypatch, capsys):
    """``_echo_json`` (the collectives' instances, a chunk of rows at a time) against the standard library's
    ``json.dumps(indent=1)`` of the same document, on every kind of column the frames hold: ints, program ids
    above 2**63, nullable ints with gaps, floats with NaN and long fractions, booleans, texts with quotes,
    escapes and non-ASCII, categoricals with missing values, a column name with a percent sign."""
    import pandas as pd

    from perfkit.cli import trace as trace_cli

    n = 11
    frame = pd.DataFrame({
        "rank": range(n), "program_id": pd.array([2**64 - 1 - i for i in range(n)], dtype="UInt64"),
        "known": pd.array([i if i % 3 else None for i in range(n)], dtype="UInt64"),
        "bytes": [float("nan") if i % 4 == 0 else 2 / (i + 1) * 1e6 for i in range(n)],
        "last": [i % 2 == 0 for i in range(n)], "op": [f'op "{i}" \\ é' for i in range(n)],
        "kind": pd.Categorical([None if i == 5 else "all-gather" for i in range(n)]), "share %s": range(n)})
    doc = {"steps_from": ["Steps line"], "ops": [{"step": 0}]}
    expected = json.dumps({**doc, "instances": trace_cli._json_rows(frame)}, indent=1) + "\n"
    monkeypatch.setattr(trace_cli, "JSON_CHUNK", 4)  # three chunks
    trace_cli._echo_json(doc, "instances", frame)
    assert capsys.readouterr().out == expected
    trace_cli._echo_json(doc, "instances", frame.iloc[:0])
    assert capsys.readouterr().out == json.dumps({**doc, "instances": []}, indent=1) + "\n"


def test_a_frame_written_at_its_key_inside_the_document(monkeypatch, capsys):
    """``_echo_json`` with the frame's key among the document's (breakdown --json: the rows before the means and
    the notes): the rows at that key, the keys after it after them, as ``json.dumps(indent=1)`` writes the
    document; a text holding the key's own line (escaped by json) does not move them."""
    import pandas as pd

    from perfkit.cli import trace as trace_cli

    frame = pd.DataFrame({"step": [0, 1, 2], "overlap": [0.25, float("nan"), 1.0]})
    rows = [{"step": 0, "overlap": 0.25}, {"step": 1, "overlap": None}, {"step": 2, "overlap": 1.0}]
    doc = {"window": 'a\n "rows": []', "rows": [], "mean": [{"step": 1}], "notes": ["n"]}
    monkeypatch.setattr(trace_cli, "JSON_CHUNK", 2)  # two chunks
    trace_cli._echo_json(doc, "rows", frame)
    assert capsys.readouterr().out == json.dumps({**doc, "rows": rows}, indent=1) + "\n"
    trace_cli._echo_json(doc, "rows", frame.iloc[:0])
    assert capsys.readouterr().out == json.dumps(doc, indent=1) + "\n"


def test_diff_by_shape_says_where_no_op_has_one(fixtures_dir, tmp_path):
    """Kineto kernels carry no shape: `--by shape` gave `--by kind`'s table under a 'by shape' header, unsaid
    (a newcomer's finding); a note now says so. A TPU trace's ops have shapes: no note."""
    sides = [str(fixtures_dir / f"kineto/hta_trace_diff_{s}.json.gz") for s in ("control", "test")]
    note = "no op in these traces has a shape (a Kineto trace's kernels carry none): keyed by kind alone"
    for by, expected in (("shape", True), ("kind", False)):
        doc = json.loads(run("diff", *sides, "--by", by, "--json").stdout)
        assert (note in doc["notes"]) == expected
    tpu = tpu_trace(tmp_path / "t.xplane.pb")
    doc = json.loads(run("diff", str(tpu), str(tpu), "--by", "shape", "--json").stdout)
    assert note not in doc["notes"] and any("[" in r["key"] for r in doc["rows"])


def test_traces_decades_apart_are_said_in_years(fixtures_dir, tmp_path):
    """A trace timed from 0 beside one timed in epoch microseconds (2023): refused as before, the gap said in
    years (a newcomer read '19476 days' as a bug)."""
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7}}]}))
    epoch = fixtures_dir / "kineto" / "rank-0.json.gz"
    first_ts = min(e["ts"] for e in json.loads(gzip.decompress(epoch.read_bytes()))["traceEvents"] if "ts" in e)
    years = round((first_ts - 10) / 1e6 / 86400 / 365.25)
    result = run("breakdown", zero, epoch)
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output == f"perfkit: {epoch}: starts {years} years after another trace given: pass one run's " \
                            "traces at a time\n"


def test_a_jax_json_trace_names_the_xspace_beside_it(fixtures_dir, tmp_path):
    """JAX's profiler writes a host-only JSON trace beside its XSpace; given the JSON, the refusal names the XSpace
    (it said only 'no device ops')."""
    folder = tmp_path / "plugins" / "profile" / "run1"
    folder.mkdir(parents=True)
    step = {"ph": "X", "pid": 701, "tid": 1, "ts": 10.365, "dur": 69.303, "name": "$worker.py:65 traced_step"}
    (folder / "vm.trace.json.gz").write_bytes(gzip.compress(json.dumps({"traceEvents": [step]}).encode()))  # no cat
    xspace = folder / "vm.xplane.pb"
    xspace.write_bytes((fixtures_dir / "xplane" / "mi300_jax_conv_8gpu.xplane.pb").read_bytes())
    result = run("breakdown", folder / "vm.trace.json.gz")
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert result.output.endswith(f"no device ops in these traces; its device ops are in the XSpace beside it, "
                                  f"{xspace} (JAX's profiler writes both)\n")
    assert run("breakdown", xspace).exit_code == 0
    # an .xplane.pb perfkit cannot read is no place to send the user to: the refusal says no more than it knows
    xspace.write_bytes(b"\x12\x05garbage")
    result = run("breakdown", folder / "vm.trace.json.gz")
    assert result.exit_code == 2 and result.output.endswith("no device ops in these traces\n"), result.output


def test_each_chips_shares_add_up_to_100(tmp_path):
    """The mean table's shares of each chip's span, to 0.1%, add up to 100.0% as the parts add up to the span:
    rounded down, the tenths left to the largest remainders (a third each read 33.3% x 3 = 99.9%)."""
    from perfkit.common.digits import whole_shares

    assert whole_shares([1.0, 1.0, 1.0], 1) == [33.4, 33.3, 33.3]
    assert whole_shares([2.960, 3.301, 0.0, 2.072]) == [35, 40, 0, 25]  # 35.52, 39.61, 0, 24.86
    # over the whole trace: a fusion, an all-reduce and a gap, 1 us each (an op of no duration ends the window)
    ops = [("fusion.1", "fusion", 0, 1), ("all-reduce.1", "all-reduce", 1, 2), ("fusion.2", "fusion", 3, 3)]
    path = one_step_trace(tmp_path / "thirds.xplane.pb", ops)
    means = run("breakdown", path, "--window", "trace").stdout.split("mean step per chip")[1].splitlines()[2:]
    shares = [[float(x) for x in re.findall(r"\(([\d.]+)%\)", line)] for line in means if "%" in line]
    assert shares == [[33.4, 33.3, 0.0, 33.3]], means


@pytest.mark.parametrize("args", [["breakdown", "--steps", "nomatch", "{k}/hta_nccl_data.json.gz"],
                                  ["diff", "{k}/hta_nccl_data.json.gz", "{k}/hta_cupti_profiler_range.json.gz"]])
def test_a_refusal_comes_alone(fixtures_dir, args):
    """A trace command that refuses its input (exit 2) prints the refusal alone: hta_nccl_data's note (HTA's
    rounding, of a trace measured) came first, where --steps matched no event of it, and where trace diff's B was
    a CUPTI profiler-range trace, refused; read and measured, the trace still gets its note."""
    args = [a.format(k=fixtures_dir / "kineto") for a in args]
    result = CliRunner().invoke(cli, ["trace", *args])
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("perfkit: ") and not line.startswith("perfkit: note: ")
    measured = CliRunner().invoke(cli, ["trace", "breakdown", args[-1 if args[0] == "breakdown" else 1]])
    assert measured.exit_code == 0 and measured.stderr.startswith("perfkit: note: "), measured.output


def test_a_diff_of_traces_without_steps_drops_no_last_step(fixtures_dir):
    """The vLLM graph replay holds no ProfilerStep (by a plain reading of the JSON) and no other step marker: with
    --last-step drop, trace diff's header said 'last step dropped where there are two or more' of it, and there is
    no step to keep or drop; a trace with ProfilerSteps, hta_nccl_data, on either side still has the words."""
    replay = fixtures_dir / "kineto" / "tracelens_mi300_vllm_graph_replay.json.gz"
    events = json.loads(gzip.decompress(replay.read_bytes()))["traceEvents"]
    assert not any(str(e.get("name", "")).startswith("ProfilerStep") for e in events)
    for window in ("step", "trace"):
        result = CliRunner().invoke(cli, ["trace", "diff", "--last-step", "drop", "--window", window, str(replay),
                                          str(replay)])
        assert result.exit_code == 0 and "last step" not in result.stdout.splitlines()[0], result.output
    stepped = CliRunner().invoke(cli, ["trace", "diff", "--last-step", "drop", str(replay),
                                       str(fixtures_dir / "kineto" / "hta_nccl_data.json.gz")])
    assert "; last step dropped where there are two or more;" in stepped.stdout.splitlines()[0], stepped.output
