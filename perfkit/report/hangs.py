"""report.md's lines for a hung trial with traces: each chip's completed collectives, the one it waits at,
and where the chips' collectives first part (``summary["hangs"]``, ``perfkit.trace.parting``); where the traces
end before the step the trial hung in, no chip's wait is read from them."""

from __future__ import annotations


def lines(hang: dict | None, folder: str, left: list[int] = ()) -> list[str]:
    """Markdown lines under the trial's entry in Failed trials (none without a hang analysis); ``left``: the ranks
    whose programs had returned (exited, or at exit in their stack dumps), whose chips wait at none of its
    collectives, whatever their traces would name next."""
    if not hang:
        return []
    if "error" in hang:
        return [f"  - where the chips part: {hang['error']}"]
    out = [f"  - where the chips part (`perfkit trace tail {folder}/rank*/trace`): {hang['text']}"]
    # traces that end before the hung step: what each chip ran next there is not where it waits in the hang
    before = "hung_step" in hang
    out.append(f"  - collectives completed per chip in the traces (to step {hang['last_traced_step']}; the chips went "
               "on past them):" if before else "  - collectives completed per chip in the traces, and the one each "
               "waits at:")
    for c in hang["chips"]:
        # where the name comes from, in words: "(from program)" read as a program of that name
        source = {"program": "its program's next collective",
                  "own": f"the collective it ran after `{c['last_op']}` the time before",
                  "others": "the others' first (it completed none)",
                  "ended": "its trace ends after its last collective, its step's marker closed with no op after it"
                  }.get(c["waiting_from"], c["waiting_from"])
        at = ("none: its program had returned, past these" if c["rank"] in left
              else f"`{c['waiting_at']}`, {source}" if c["waiting_at"]
              else f"unknown: {source} (whether it waits at its program's next collective or has left the program, "
              "its trace cannot say)" if c["waiting_from"] == "ended" else "-")
        last = f", the last `{c['last_op']}`" if c["last_op"] else ""
        out.append(f"    - rank {c['rank']} device {c['device']}: {c['completed']} completed{last}"
                   + ("" if before else f"; waiting at {at}"))
    return out
