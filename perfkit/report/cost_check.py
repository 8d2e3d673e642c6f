"""``perfkit check``'s cost rows: each variant's step cost against the baseline's (stdlib only).

Compiling is deterministic, so these figures do not depend on the machine's load: collectives per step
by kind must match exactly (a gather added to a plan fails the gate even where timing cannot tell), and
FLOPs, HBM bytes, bytes sent a device and temp memory must stay within ``cost_tolerance`` (1% by
default, the case's ``check:`` block may say otherwise) of the baseline's.
"""

from __future__ import annotations

COST_TOLERANCE = 0.01
# (step figure, words, unit) gated within the tolerance
FIGURES = (("flops", "FLOPs per step", "FLOPs"), ("hbm_bytes", "HBM bytes per step", "bytes"),
           ("interconnect_bytes", "bytes sent a device per step", "bytes"), ("temp_bytes", "temp memory", "bytes"))


def baseline_cost(summary: dict) -> dict:
    """What a baseline keeps of a summary's ``cost``: per variant the step's collectives by kind (counts)
    and its gated figures."""
    out = {}
    for variant, block in (summary.get("cost") or {}).items():
        step = block.get("step")
        if step is None:  # its dumps did not parse (``error``)
            continue
        out[variant] = {"collectives": {k: c["count"] for k, c in step["collectives"].items()},
                        **{key: step[key] for key, _, _ in FIGURES}}
    return out


def cost_rows(baseline: dict, summary: dict, tolerance: float) -> list[dict]:
    """One row per collective kind and gated figure of each variant the baseline costed (none for a
    baseline written before costs were kept)."""
    current = baseline_cost(summary)
    rows = []
    for variant, base in (baseline.get("cost") or {}).items():
        now = current.get(variant)
        if now is None:
            # dumps that did not parse are there: "no dumps" would send the reader to capture.xla_dump
            error = ((summary.get("cost") or {}).get(variant) or {}).get("error")
            note = (f"its XLA dumps in this run were not costed: {error.splitlines()[0]}" if error
                    else "no XLA dumps of this variant in this run (capture.xla_dump)"
                    if variant in summary.get("variants", {}) else "the variant is not in this run")
            rows.append({"check": "cost", "subject": f"{variant}: step cost", "unit": "", "baseline": "costed",
                         "current": None, "limit": None, "passed": False, "note": note})
            continue
        for kind in sorted(set(base["collectives"]) | set(now["collectives"])):
            b, c = base["collectives"].get(kind, 0), now["collectives"].get(kind, 0)
            rows.append({"check": "cost", "subject": f"{variant}: {kind} per step", "unit": "count", "baseline": b,
                         "current": c, "limit": b, "passed": b == c,
                         "note": "" if b == c else f"{c - b:+d} a step: the compiled program changed"})
        for key, words, unit in FIGURES:
            b, c = base.get(key), now.get(key)
            if b is None:
                continue
            passed = c is not None and abs(c - b) <= tolerance * abs(b)
            note = ("not measured in this run" if c is None else "" if b == c
                    else _change(b, c, tolerance, passed) if b else (
                # no percentage of 0 to give: the figure itself, against 0, and why no tolerance lets it pass
                f"{c:.0f}{' B' if unit == 'bytes' else ' FLOPs'} against the baseline's 0: within any share of 0 "
                "is 0 alone"))
            rows.append({"check": "cost", "subject": f"{variant}: {words}", "unit": unit, "baseline": b,
                         "current": c, "limit": tolerance, "passed": passed, "note": note})
    return rows


def share_text(share: float) -> str:
    """A tolerance as a percentage with the decimals, 1 or more, it takes to show it whole (1.0%, 1.25%)."""
    n = next((n for n in range(1, 7) if round(float(f"{share * 100:.{n}f}"), 9) == round(share * 100, 9)), 6)
    return f"{share * 100:.{n}f}%"


def _change(base: float, current: float, tolerance: float, within: bool) -> str:
    """The change against the baseline, signed, in percent to the decimals, 2 or more, that put it on its verdict's
    side (``within`` the tolerance or not) as ``share_text`` shows the tolerance (1.004% over 1% read +1.00%, as if
    it were within)."""
    change, limit = (current - base) / base * 100, float(share_text(tolerance)[:-1])
    n = next((n for n in range(2, 7) if (abs(float(f"{change:.{n}f}")) <= limit) == within), 6)
    return f"{change:+.{n}f}%"
