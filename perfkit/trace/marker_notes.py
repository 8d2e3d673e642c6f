"""Where steps' spans are more than their step markers (``timeline.spans``: run past them to the end of the last op
started in them, or join markers of one step number), counted as summary.json's breakdown keeps it and said in the
words ``perfkit trace breakdown``'s and ``trace diff``'s notes and report.md's breakdown share. It imports no
analysis: the report reads it without loading the trace readers."""

from __future__ import annotations

from perfkit.common.units import PS_PER_MS

FIRST_JOINED = ("trial", "rank", "device", "step")  # what names the first span joining markers, where its rows have it


def beyond(spans) -> dict:
    """Of ``spans`` (a frame of rank, device, step, past_marker_ps, joined_markers and, a run's, trial: breakdown
    rows, or ``diff.beyond_markers``' records), only where non-zero: ``past_marker_steps`` (the spans past their
    markers), ``past_marker_ms`` (how far past, in all), ``joined_marker_steps`` (the spans joining markers) and
    ``first_joined`` (the first of those, by its ``FIRST_JOINED`` columns)."""
    out = {}
    past = spans["past_marker_ps"].to_numpy()
    if (past > 0).any():
        out["past_marker_steps"] = int((past > 0).sum())
        out["past_marker_ms"] = float(past.sum() / PS_PER_MS)
    joined = spans[spans["joined_markers"] > 0]
    if len(joined):
        first = joined[[k for k in FIRST_JOINED if k in joined]].iloc[0]
        out["joined_marker_steps"] = len(joined)
        out["first_joined"] = {k: v if k == "trial" else int(v) for k, v in first.items()}
    return out


def notes(measured: int, counts: dict, side: str = "") -> list[str]:
    """Where ``counts`` (``beyond``'s) of the ``measured`` spans are more than their step markers, which a profiler's
    step time is (xprof's of a StepTraceAnnotation): a line saying so for each way; ``side`` follows "steps"."""
    out = []
    if counts.get("past_marker_steps"):
        out.append(f"{counts['past_marker_steps']} of {measured} steps{side} run past their step markers to the end "
                   f"of the last op started in them ({counts['past_marker_ms']:.3f} ms past in all): a span here runs "
                   "from its marker's start to the later of its end and that op's end, where xprof's step time, or a "
                   "ProfilerStep's, is the marker's own")
    if counts.get("joined_marker_steps"):
        first = " ".join(f"{k} {v}" for k, v in counts["first_joined"].items())
        out.append(f"{counts['joined_marker_steps']} of {measured} steps{side} join step markers of one number that "
                   f"ran apart, one after another has ended (first: {first}; a retried step): a span here runs from "
                   "the first's start to the last's end, the time between them counted to it, where xprof counts "
                   "each marker a step of its own")
    return out
