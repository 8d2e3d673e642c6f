"""report.md's lines for a hung trial with traces: each chip's completed collectives, the one it waits at,
and where the chips' collectives first part (``summary["hangs"]``, ``perfkit.trace.parting``)."""

from __future__ import annotations


def lines(hang: dict | None, folder: str) -> list[str]:
    """Markdown lines under the trial's entry in Failed trials (none without a hang analysis)."""
    if not hang:
        return []
    if "error" in hang:
        return [f"  - where the chips part: {hang['error']}"]
    out = [f"  - where the chips part (`perfkit trace tail {folder}/rank*/trace`): {hang['text']}",
           "  - collectives completed per chip in the traces, and the one each waits at (its program's next, else the "
           "one it ran after its last the time before):"]
    for c in hang["chips"]:
        at = f"`{c['waiting_at']}` (from {c['waiting_from']})" if c["waiting_at"] else "-"
        last = f", the last `{c['last_op']}`" if c["last_op"] else ""
        out.append(f"    - rank {c['rank']} device {c['device']}: {c['completed']} completed{last}; waiting at {at}")
    return out
