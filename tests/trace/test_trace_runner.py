"""The runner's use of traces: summary["breakdown"] and the report section, from a hand-made run folder
and from a real run of a command case that captures traces through PERFKIT_TRACE_DIR / _STEPS."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from trace_builders import one_step_trace

from perfkit.analysis.summary import trace_summary

REPO = Path(__file__).resolve().parents[2]


def _trial(run_dir: Path, index: int, variant: str, ops) -> dict:
    one_step_trace(run_dir / f"trials/{index:02d}-{variant}/rank0/trace/step0/h.xplane.pb", ops)
    return {"index": index, "variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"}


def test_trace_summary_and_report_section(tmp_path):
    trials = [_trial(tmp_path, 0, "a", [("fusion.1", "fusion", 0, 10), ("all-gather-done.1", "all-gather-done", 10, 15)]),
              _trial(tmp_path, 1, "b", [("fusion.1", "fusion", 0, 12), ("copy-done.1", "copy-done", 12, 13)]),
              _trial(tmp_path, 2, "b", [("fusion.1", "fusion", 0, 14), ("copy-done.1", "copy-done", 14, 17)]),
              {"index": 3, "variant": "a", "status": "hung", "dir": "trials/03-a"}]
    got = trace_summary(tmp_path, trials)
    a, b = got["variants"]["a"], got["variants"]["b"]
    assert (a["trials"], a["chip_steps"]) == (1, 1) and (b["trials"], b["chip_steps"]) == (2, 2)
    assert [a[k] for k in ("span_ms", "compute_ms", "ici_ms", "dma_ms", "idle_ms")] == pytest.approx(
        [0.1, 0.010, 0.005, 0, 0.085])
    assert [b[k] for k in ("compute_ms", "ici_ms", "dma_ms", "idle_ms")] == pytest.approx([0.013, 0, 0.002, 0.085])
    deltas = {d["key"]: d["delta_ms"] for d in got["op_deltas"]["b"]}
    assert deltas == pytest.approx({"all-gather-done": -0.005, "fusion": 0.003, "copy-done": 0.002})
    assert trace_summary(tmp_path, trials[3:]) is None

    from perfkit.report.markdown import _breakdown

    text = "\n".join(_breakdown({"breakdown": got}))
    assert "| a | 1 (1) | 0.100 | 0.010 (10.0%) | 0.005 (5.0%) | 0.000 (0.0%) | 0.085 (85.0%) |" in text
    assert "(a chip-step: one chip's one traced step)" in text and "exposed ICI (collectives not under" in text
    assert "| `all-gather-done` | ici | 0.005 | 0.000 | -0.005 |" in text
    # a newcomer found a kind (fusion 3.608 ms) above its category (compute 3.601): the table says how that can be
    assert "so a kind can exceed its category above, where an instant counts once" in text


def test_a_cpu_traces_breakdown_says_it_measured_host_ops(tmp_path, fixtures_dir):
    """A variant whose traces hold no device events (a torch CPU run's: HTA's real rank_non_gpu trace): its
    host ops stand in, and the report's section says so, as the command does (it said nothing)."""
    import shutil

    from perfkit.report.markdown import _breakdown

    trials = [_trial(tmp_path, 0, "a", [("fusion.1", "fusion", 0, 10)])]
    folder = tmp_path / "trials/01-b/rank0/trace"
    folder.mkdir(parents=True)
    shutil.copy(fixtures_dir / "kineto" / "hta_rank_non_gpu.json.gz", folder / "rank0.json.gz")
    trials.append({"index": 1, "variant": "b", "status": "ok", "dir": "trials/01-b"})
    got = trace_summary(tmp_path, trials)
    assert got["variants"]["b"]["measured"] == "host ops" and got["variants"]["a"]["measured"] == "device ops"
    text = "\n".join(_breakdown({"breakdown": got}))
    assert "Measured on host ops (b): the traces hold no device events" in text


def test_the_attribution_of_host_ops_says_host_not_device(tmp_path, fixtures_dir):
    """A torch CPU run, whose traces hold host ops only (HTA's real rank_non_gpu trace on both sides): the
    attribution read "Mean traced device step per chip" and "device ops outside every traced step's span", of a
    trace with no device event. It says host, as the breakdown does, and which side where one side is host ops."""
    import shutil

    from perfkit.analysis.summary import traces_summary
    from perfkit.report.attribution import section

    trials = []
    for index, variant in enumerate(("a", "b")):
        folder = tmp_path / f"trials/{index:02d}-{variant}/rank0/trace"
        folder.mkdir(parents=True)
        shutil.copy(fixtures_dir / "kineto" / "hta_rank_non_gpu.json.gz", folder / "rank0.json.gz")
        trials.append({"index": index, "variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"})
    _, attributed = traces_summary(tmp_path, trials, ["a", "b"], 0)
    assert attributed["variants"]["b"]["measured"] == ["host ops", "host ops"]
    text = "\n".join(section(attributed))
    assert "device step" not in text and "device ops" not in text
    assert ("Mean traced host step per chip (the traces hold no device events: their host ops stand in for the "
            "chips'): a ") in text
    # one side of device ops (a hand-made XSpace), the other host ops
    trials[0] = _trial(tmp_path, 2, "a", [("fusion.1", "fusion", 0, 10)])
    _, attributed = traces_summary(tmp_path, trials, ["a", "b"], 0)
    assert attributed["variants"]["b"]["measured"] == ["device ops", "host ops"]
    assert ("Mean traced step per chip (b's traces hold no device events: its host ops stand in for the chips', "
            "beside a's device ops): a ") in "\n".join(section(attributed))


def test_each_trials_ops_are_laid_out_once(tmp_path, monkeypatch):
    """The summary's breakdown and op table measure one layout of a trial's ops (the sweep is ~0.3 s a
    trial at 6M events), and give what each gives on its own."""
    from perfkit.trace import breakdown, diff, events, timeline

    trials = [_trial(tmp_path, 0, "a", [("fusion.1", "fusion", 0, 10), ("all-gather-done.1", "all-gather-done", 10, 15)]),
              _trial(tmp_path, 1, "b", [("fusion.1", "fusion", 0, 12), ("copy-done.1", "copy-done", 12, 13)])]
    laid = []
    layout = timeline.layout
    monkeypatch.setattr(timeline, "layout", lambda *args, **kw: laid.append(1) or layout(*args, **kw))
    got = trace_summary(tmp_path, trials)
    assert len(laid) == 2  # one per trial
    monkeypatch.undo()
    ev = events.load([tmp_path / "trials/01-b/rank0/trace"])
    alone = breakdown.mean_per_device(breakdown.breakdown(ev))
    assert got["variants"]["b"]["compute_ms"] == pytest.approx(alone["compute_ps"].iloc[0] / 1e9)
    table = diff.per_step(ev, "kind")
    assert {d["key"]: d["b_ms"] for d in got["op_deltas"]["b"] if d["b_ms"]} == pytest.approx(
        (table["time_ps"] / 1e9).to_dict())


def test_a_runs_analysis_leaves_the_definition_notes_out(tmp_path, fixtures_dir):
    """A trace whose host events carry a stream gets a DefinitionNote where it is read alone, and none where a
    run's analysis reads it in each trial (a line per trial and rank file would bury the run's output)."""
    import shutil
    import warnings

    from perfkit.errors import DefinitionNote
    from perfkit.trace import events

    trials = []
    for index, variant in enumerate("ab"):
        folder = tmp_path / f"trials/{index:02d}-{variant}/rank0/trace"
        folder.mkdir(parents=True)
        shutil.copy(fixtures_dir / "kineto" / "hta_triton_example.json.gz", folder / "rank0.json.gz")
        trials.append({"index": index, "variant": variant, "status": "ok", "dir": f"trials/{index:02d}-{variant}"})
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert trace_summary(tmp_path, trials) is not None
        from perfkit.analysis.attribution import trials_parts

        assert set(trials_parts([tmp_path / t["dir"] for t in trials])["trial"]) == {"00-a", "01-b"}
        assert not [w for w in seen if issubclass(w.category, DefinitionNote)]
        events.load([tmp_path / "trials/00-a/rank0/trace"])
        notes = [str(w.message) for w in seen if issubclass(w.category, DefinitionNote)]
        # (and its kernel's times' ns, which HTA's rounding moves)
        assert len(notes) == 2 and "rank0.json.gz: host events with a stream argument (1 cpu_op)" in notes[0]
        assert "rank0.json.gz: 1 device op starts or ends between whole us: " in notes[1]


@pytest.mark.slow
def test_run_of_a_traced_command_case(tmp_path):
    case = {"name": "traced-ring", "command": ["python", str(Path(__file__).parent / "programs" / "traced_ring.py"), "4"],
            "devices": 4, "warmup": 1, "repeats": {"min": 1, "max": 1}, "timeout": 120,
            "capture": {"trace": [2], "xla_dump": "none", "outputs": False},
            "variants": {"ring": {"env": {"IMPL": "ring"}}, "xla": {"env": {"IMPL": "xla"}}}}
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case))
    run = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", str(path), "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    bd = summary["breakdown"]
    for v in ("ring", "xla"):
        parts = bd["variants"][v]
        assert parts["chip_steps"] == 4 and parts["steps_from"] == ["step annotations"]  # 4 devices x step 2
        assert parts["span_ms"] == pytest.approx(sum(parts[f"{p}_ms"] for p in ("compute", "ici", "dma", "idle")))
    deltas = {d["key"]: d for d in bd["op_deltas"]["xla"]}
    assert deltas["collective-permute"]["a_ms"] > 0 and deltas["collective-permute"]["b_ms"] == 0
    assert deltas["all-gather"]["a_ms"] == 0 and deltas["all-gather"]["b_ms"] > 0
    assert "## Trace breakdown" in (tmp_path / "run" / "report.md").read_text()


def test_the_breakdown_and_the_attribution_read_each_trials_traces_once(tmp_path, monkeypatch):
    """A review's: the attribution read every traced trial a second time (``events.load``, beside the breakdown's
    shards). Its units now come from the breakdown's reading, and equal those of a reading of their own."""
    from perfkit.analysis import attribution
    from perfkit.analysis.summary import traces_summary
    from perfkit.trace import shards

    trials = [_trial(tmp_path, i, v, [("fusion.1", "fusion", 0, 10 + i), ("all-gather-done.1", "all-gather-done",
                                                                          10 + i, 15 + 2 * i)])
              for i, v in enumerate("abab")]
    alone = attribution.summarize(tmp_path, trials, ["a", "b"])
    cut, cuts = shards.cut, []
    monkeypatch.setattr(shards, "cut", lambda paths, *args: cuts.append(paths) or cut(paths, *args))
    breakdown, attributed = traces_summary(tmp_path, trials, ["a", "b"], seed=0)
    assert len(cuts) == len(trials)
    assert breakdown["variants"]["b"]["trials"] == 2 and attributed == alone


def test_a_command_case_traced_on_cpu_devices_is_not_taken_for_a_chip_s_speed():
    """A command case's devices are not probed, but its traces say where its ops ran: on XLA's CPU devices (the
    breakdown's cpu_devices) Not verified says the timings are not a TPU's or GPU's. A newcomer's Pallas kernel,
    interpreted on CPU, read 'pallas is slower than ring' 157x with nothing saying the chips were host threads."""
    from perfkit.analysis.summary import not_verified
    from perfkit.rundata.case import validate

    case = validate({"name": "c", "command": ["true"], "capture": {"trace": [1]}, "variants": {"a": {}, "b": {}}})
    said = "speed on TPU or GPU: these timings come from CPU devices"
    for cpu, expected in ((True, True), (None, False)):
        summary = {"run_dir": "/nonexistent", "baseline": "a", "variants": {"a": {"trials": 1}, "b": {"trials": 1}},
                   "ranks": {}, "quality": None, "trials": {"total": 2, "failed": []},
                   "comparison": {"verdict": "slower", "ratio": 157.0, "ci": [101.7, 174.7], "n_a": 3, "n_b": 3},
                   "env": {"devices": None},
                   "breakdown": {"variants": {v: {"cpu_devices": cpu} if cpu else {} for v in ("a", "b")}}}
        assert (said in not_verified(case, summary)) is expected


# A dot of f32[8,16] by f32[16,4]: 2 x 8 x 4 x 16 = 1024 FLOPs, in each of two programs of one dump.
_DOT = ("HloModule {name}\n\nENTRY main {{\n  x = f32[8,16]{{1,0}} parameter(0)\n  w = f32[16,4]{{1,0}} parameter(1)\n"
        "  ROOT d = f32[8,4]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n")


def test_the_step_program_is_the_one_the_traced_steps_ran(tmp_path):
    """A command case's dump holds a tapping program compiled first (jit__lambda) and the step program (jit_m, the
    one_step_trace's ops' program), of equal FLOPs: the most-FLOPs guess took the first; the traced steps' program
    is the step, and the cost says it came from the traces."""
    from perfkit.cost.programs import run_costs
    from perfkit.report.cost import section

    trials = [_trial(tmp_path, 0, "a", [("fusion.1", "fusion", 0, 10)])]
    dump = tmp_path / "trials/00-a/rank0/xla_dump"
    dump.mkdir()
    for stem, name in (("module_0001.jit__lambda", "jit__lambda"), ("module_0002.jit_m", "jit_m")):
        (dump / f"{stem}.cpu_after_optimizations.txt").write_text(_DOT.format(name=name))
    summary = {"breakdown": trace_summary(tmp_path, trials), "variants": {"a": {}}}
    assert summary["breakdown"]["variants"]["a"]["step_programs"] == ["jit_m"]
    cost, _ = run_costs(tmp_path, summary)
    assert (cost["a"]["step"]["module"], cost["a"]["step_from"]) == ("jit_m", "traced")
    assert [p["flops"] for p in cost["a"]["programs"]] == [1024, 1024]
    text = "\n".join(section({**summary, "baseline": "a", "cost": cost, "roofline": {}}))
    assert "The step program of a is the one its traced steps ran (the most device time inside them)." in text
    assert "is a guess" not in text
    # without traces the tie still goes to the first compiled, said to be a guess
    cost, _ = run_costs(tmp_path, {"variants": {"a": {}}})
    assert (cost["a"]["step"]["module"], cost["a"]["step_from"]) == ("jit__lambda", "most_flops")
