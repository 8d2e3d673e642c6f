"""Rank consistency: ``perfkit hlo-diff``'s rank mode over the paths given (``check_all``), and the runner's
check, hlo-diff on one trial of each variant.

Compiling is deterministic, so the first trial of a variant whose ranks wrote XLA dumps says whether
that variant's ranks compile the same programs. The result goes to ``summary.json`` as
``ranks.<variant>`` (see docs/architecture.md) with the full hlo-diff result under ``hlo_diff``.
"""

from __future__ import annotations

from pathlib import Path

from perfkit.errors import BadInput
from perfkit.hlo.diff import compare_ranks
from perfkit.hlo.dumps import resolve, run_trials, variant_dumps


def first_difference(result: dict) -> dict | None:
    """The first divergent module's first divergent rank group, and its first differing instruction (and the
    device counts each side was compiled for, where they differ)."""
    for m in result["modules"]:
        for d in m["divergences"]:
            first = d["first_difference"] or {}
            moved = [r for r in d["buffers"].get("receive", []) if r["moved"]]
            return {"module": m["name"], "ranks": d["ranks"], "against_rank": d["against_rank"],
                    "majority": first.get("majority"), "rank": first.get("rank"),
                    "same_program": d["same_program"], "counts": d["counts"], "receive_moved": moved[:3]}
    return None


def variant_check(run_dir: Path, variant: str) -> dict:
    """``ranks.<variant>`` of summary.json for a multi-process case."""
    dumps = next((d for d in run_trials(run_dir) if d.variant == variant), None)
    if dumps is None:  # where its ranks dumped something else (before optimizations only, say), what they did
        unread = variant_dumps(run_dir).get(variant)
        why = unread.line() if isinstance(unread, BadInput) else "no trial of this variant wrote XLA dumps"
        return {"consistent": None, "groups": [], "checked": f"not checked: {why}"}
    try:
        result = compare_ranks(dumps)
    except BadInput as exc:
        return {"consistent": None, "groups": [], "trial": dumps.label, "checked": f"not checked: {exc.line()}"}
    n = len(result["modules"])
    checked = f"hlo-diff of {dumps.label}: {len(result['ranks'])} ranks, {n} module{'s' if n != 1 else ''}"
    if not result["compared"]:  # every module one rank's own: nothing says the ranks agree
        return {"consistent": None, "groups": [], "trial": dumps.label,
                "checked": f"not checked: no module compiled by two or more ranks ({checked})"}
    return {"consistent": result["consistent"], "groups": result["groups"], "trial": dumps.label, "checked": checked,
            "divergent_ranks": result["divergent_ranks"], "roles": result["roles"],
            "first_difference": first_difference(result),
            "hlo_diff": result}


def check_all(paths: list[str], module_filter: str | None = None) -> dict:
    """Every rank set the paths name, compared; the ``--json`` result of the rank mode."""
    # workers=None: distinct dump files parse in a process per core (this process is single-threaded).
    checks = [compare_ranks(d, module_filter, workers=None) for d in resolve(paths)]
    return {"consistent": all(c["consistent"] for c in checks),
            "modules": [{**m, "source": c["source"]} for c in checks for m in c["modules"]],
            "checks": checks}
