"""trace diff's note on the device ops of no duration (which HTA's TraceDiff counts and perfkit neither times nor
counts): said where a side holds some, with how many, and only there."""

import gzip
import json

from click.testing import CliRunner

from perfkit.cli import cli

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
