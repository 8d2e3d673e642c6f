"""trace diff's note on the device ops of no duration (which HTA's TraceDiff counts and perfkit neither times nor
counts): said where a side holds some, with how many, and only there."""

import gzip
import json

from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.trace.synthetic import XSpaceWriter

U = 1_000_000  # picoseconds per microsecond
NOTE = "neither timed nor counted here (HTA's TraceDiff counts them)"


def _notes(a, b, *options):
    result = CliRunner().invoke(cli, ["trace", "diff", str(a), str(b), "--json", *options])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["notes"]


def test_htas_own_diff_pair_has_no_op_of_no_duration_and_no_note(fixtures_dir):
    """Every GPU event of HTA's TraceDiff pair lasts 1 us or more (read from the JSON below): the note said it of
    every Kineto diff before."""
    pair = [fixtures_dir / "kineto" / f"hta_trace_diff_{side}.json.gz" for side in ("control", "test")]
    for path in pair:
        events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
        gpu = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("ph") == "X"]
        assert gpu and min(e["dur"] for e in gpu) >= 1
    assert not any("neither timed nor counted" in n for n in _notes(*pair))


def test_ops_of_no_duration_are_counted_in_the_note(fixtures_dir, tmp_path):
    """Three of rank 0's kernels set to no duration in B (by hand, in its JSON): the note names the 3, in B alone."""
    source = fixtures_dir / "kineto" / "rank-0.json.gz"
    doc = json.loads(gzip.decompress(source.read_bytes()))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"]
    for e in kernels[100:103]:
        e["dur"] = 0
    changed = tmp_path / "zero.json"
    changed.write_text(json.dumps(doc))
    notes = [n for n in _notes(source, changed) if NOTE in n]
    assert notes == [f"device ops of no duration (3 in B) are {NOTE}"]
    notes = [n for n in _notes(changed, changed) if NOTE in n]
    assert notes == [f"device ops of no duration (3 in A, 3 in B) are {NOTE}"]


def test_a_whole_us_trace_says_how_many_of_its_ops_last_no_time(fixtures_dir):
    """A 2021 TensorBoard-plugin trace of whole microseconds: its GPU events of dur 0, counted from the JSON."""
    path = fixtures_dir / "kineto" / "tb_plugin_resnet50_2021_worker0.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    zero = sum(1 for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset") and e.get("dur") == 0)
    assert zero == 643
    notes = [n for n in _notes(path, path) if NOTE in n]
    assert notes == [f"device ops of no duration (643 in A, 643 in B) are {NOTE}"]


def test_the_last_step_dropped_counts_only_the_steps_measured(fixtures_dir):
    """With --last-step drop, the ops of no duration of the five steps measured, counted from the JSON: launched
    (their correlation's runtime call) in one of the first five of the six ProfilerSteps and starting in one of
    their windows. The note counted all 643, the dropped step's 109 with them."""
    path = fixtures_dir / "kineto" / "tb_plugin_resnet50_2021_worker0.json.gz"
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name", "").startswith("ProfilerStep#"))
    assert len(steps) == 6
    kept = steps[:-1]
    launched = {e["args"]["correlation"]: e["ts"] for e in events if e.get("cat") == "Runtime"}
    zero = [e for e in events if e.get("cat") in ("Kernel", "Memcpy", "Memset") and e.get("dur") == 0]
    measured = sum(1 for e in zero
                   if any(a <= launched[e["args"]["correlation"]] <= b for a, b in kept)
                   and any(a <= e["ts"] < b for a, b in kept))
    assert measured == 534
    notes = [n for n in _notes(path, path, "--last-step", "drop") if NOTE in n]
    assert notes == [f"device ops of no duration (534 in A, 534 in B) are {NOTE}"]


def _zero_outside(path):
    """One TPU chip, its one step [10, 110) us; ops fusion.1 at 0 us of no duration and fusion.2 [5, 7) before the
    step, fusion.3 [20, 30) and fusion.4 at 30 us of no duration in it."""
    space = XSpaceWriter("h")
    space.program(5, "jit_m", [(f"fusion.{k}", "fusion", "f32[8]") for k in range(1, 5)])
    chip = space.plane("/device:TPU:0")
    chip.line("Steps", 0).event(chip.op("0"), 10 * U, 100 * U)
    line = chip.line("XLA Ops", 0)
    for name, start, dur in [("fusion.1", 0, 0), ("fusion.2", 5, 2), ("fusion.3", 20, 10), ("fusion.4", 30, 0)]:
        line.event(chip.op(name, program_id=5), start * U, dur * U)
    return space.save(path)


def test_an_op_of_no_duration_outside_every_step_is_counted_outside(tmp_path):
    """By hand: two of the four ops lie before the step (one of no duration), two in it (one of no duration). The
    outside line counts both before it, 2 ops of 2 us; the op of no duration there was counted nowhere (1 op)."""
    path = _zero_outside(tmp_path / "z.xplane.pb")
    result = CliRunner().invoke(cli, ["trace", "breakdown", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["outside_steps"] == [{"rank": 0, "device": 0, "ops": 2, "op_ps": 2 * U}]
    assert [(r["step"], r["span_ps"], r["compute_ps"]) for r in doc["rows"]] == [(0, 100 * U, 10 * U)]
    result = CliRunner().invoke(cli, ["trace", "diff", str(path), str(path), "--json"])
    doc = json.loads(result.stdout)
    assert doc["outside_steps_a"] == doc["outside_steps_b"] == [{"rank": 0, "device": 0, "ops": 2, "op_ps": 2 * U}]
    assert [(r["key"], r["a_count"]) for r in doc["rows"]] == [("fusion", 1)]  # fusion.3; fusion.4 takes no time


def test_a_kineto_op_of_no_duration_outside_every_step_is_in_the_outside_line_not_the_note(tmp_path):
    """A Kineto trace of one GPU, GPU-side ProfilerStep#1 [10, 110) us; kernels at 0 (no duration) and [5, 7) before
    it, [20, 30) and at 30 (no duration) in it: the note counts the one of no duration in the step, the outside
    line the two before it; the one kernel timed is the diff's one row (by hand: 1 + 2 + 1 = 4 kernels)."""
    step = {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#1", "pid": 0, "tid": 7, "ts": 10,
            "dur": 100, "args": {"stream": 7}}
    kernels = [{"ph": "X", "cat": "kernel", "name": f"k{n}", "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                "args": {"stream": 7}} for n, (ts, dur) in enumerate([(0, 0), (5, 2), (20, 10), (30, 0)])]
    path = tmp_path / "z.json"
    path.write_text(json.dumps({"traceEvents": [step, *kernels]}))
    result = CliRunner().invoke(cli, ["trace", "diff", str(path), str(path), "--json", "--by", "op"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["outside_steps_a"] == [{"rank": 0, "device": 0, "ops": 2, "op_ps": 2 * U}]
    assert [(r["key"], r["a_count"]) for r in doc["rows"]] == [("k2", 1)]
    assert [n for n in doc["notes"] if NOTE in n] == [f"device ops of no duration (1 in A, 1 in B) are {NOTE}"]
