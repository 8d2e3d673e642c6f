"""A run's traced steps whose spans are more than their step markers: summary.json counts them and report.md says
so in the words of `perfkit trace breakdown`'s notes (they had said nothing, from the same spans)."""

import json

from run_fixtures import ab_trials, write_run

from perfkit.run import finish
from perfkit.trace.synthetic import XSpaceWriter

U = 1_000_000  # picoseconds per microsecond


def _trace(path, past: bool) -> None:
    """One TPU chip, two steps (us). a (``past`` False): Steps 0 [0,20) 1 [30,50), fusions [5,15) [32,38).
    b: Steps 0 [0,20), 1 [30,40) and again [45,55) (a retried step: its markers joined), fusions [5,25) (started in
    step 0, 5 us past its marker), [32,38), [47,53)."""
    space = XSpaceWriter("h")
    space.program(5, "jit_m", [(f"fusion.{i}", "fusion", "f32[8,128]") for i in range(3)])
    plane = space.plane("/device:TPU:0")
    steps, ops = plane.line("Steps", 0), plane.line("XLA Ops", 0)
    marks = [(0, 0, 20), (1, 30, 40), (1, 45, 55)] if past else [(0, 0, 20), (1, 30, 50)]
    fusions = [(5, 25), (32, 38), (47, 53)] if past else [(5, 15), (32, 38)]
    for step, a, b in marks:
        steps.event(plane.op(str(step)), a * U, (b - a) * U)
    for i, (a, b) in enumerate(fusions):
        ops.event(plane.op(f"fusion.{i}", program_id=5, hlo_category="loop fusion"), a * U, (b - a) * U)
    space.save(path)


def test_spans_past_or_joining_their_markers_are_counted_and_said(tmp_path):
    """b's 3 trials (01-b, 02-b, 05-b) of 1 chip and 2 steps: 6 chip-steps, each trial's step 0 5 us past its
    marker (3 of 6, 0.015 ms in all) and its step 1 joining two markers (3 of 6, the first in trial 01-b); a's
    spans are their markers, and its breakdown keeps the keys it had."""
    trials = ab_trials()
    run = write_run(tmp_path / "run", trials)
    for t in trials:
        _trace(run / t["dir"] / "rank0" / "trace" / "h.xplane.pb", past=t["variant"] == "b")
    finish.render(run)
    variants = json.loads((run / "summary.json").read_text())["breakdown"]["variants"]
    a, b = variants["a"], variants["b"]
    assert (b["trials"], b["chip_steps"]) == (3, 6)
    assert {k: b[k] for k in ("past_marker_steps", "past_marker_ms", "joined_marker_steps", "first_joined")} == {
        "past_marker_steps": 3, "past_marker_ms": 3 * 5e-3, "joined_marker_steps": 3,
        "first_joined": {"trial": "01-b", "rank": 0, "device": 0, "step": 1}}
    assert list(a) == ["trials", "chip_steps", "span_ms", "compute_ms", "ici_ms", "dcn_ms", "dma_ms", "idle_ms",
                       "comm_ms", "hidden_ms", "overlap", "steps_from", "step_programs", "measured", "outside_ops",
                       "outside_ms"]
    report = (run / "report.md").read_text()
    breakdown = report[report.index("## Trace breakdown"):]
    assert ("\n\n3 of 6 steps in b run past their step markers to the end of the last op started in them (0.015 ms "
            "past in all): a span here runs from its marker's start to the later of its end and that op's end, where "
            "xprof's step time, or a ProfilerStep's, is the marker's own.\n\n3 of 6 steps in b join step "
            "markers of one number that ran apart, one after another has ended (first: trial 01-b rank 0 device 0 "
            "step 1; a retried step): a span here runs from the first's start to the last's end, the time between "
            "them counted to it, where xprof "
            "counts each marker a step of its own.\n") in breakdown
    assert "steps in a " not in report
