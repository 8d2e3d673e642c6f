"""B's step cost against A's, in words and numbers (stdlib only): "sp adds 72 collective-permutes of
8 KiB a step and removes 6 all-reduces of 64 KiB"."""

from __future__ import annotations

from collections import Counter

KIB = 1024


def _size(n: float) -> str:
    for unit, scale in (("GiB", KIB ** 3), ("MiB", KIB ** 2), ("KiB", KIB)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def _phrase(rows: Counter) -> str:
    """``72 collective-permutes of 8 KiB and 3 all-gathers of 64 KiB``, largest count first."""
    return " and ".join(f"{n} {kind}{'s' if n != 1 else ''} of {_size(size)}"
                        for (kind, size), n in sorted(rows.items(), key=lambda kv: (-kv[1], kv[0])))


def _by_size(cost: dict) -> Counter:
    out: Counter = Counter()
    for r in cost["collective_shapes"]:
        out[(r["kind"], r["buffer_bytes"])] += r["count"]
    return out


def _percent(a: float, b: float) -> str:
    return "unchanged" if a == b else ("from 0" if not a else f"{(b - a) / a:+.1%}")


def change(a_name: str, a: dict, b_name: str, b: dict) -> dict:
    """``{sentence, collectives_added, collectives_removed, flops, hbm_bytes, interconnect_bytes}``: the
    collectives B's step runs more or less often than A's (by kind and buffer size), and the totals [A, B]."""
    ca, cb = _by_size(a), _by_size(b)
    added, removed = cb - ca, ca - cb
    parts = []
    if added:
        parts.append(f"adds {_phrase(added)} a step")
    if removed:
        parts.append(f"removes {_phrase(removed)}")
    words = f"{b_name} " + (" and ".join(parts) if parts else "runs the same collectives") + f" (against {a_name})"
    totals = {k: [a[k], b[k]] for k in ("flops", "hbm_bytes", "interconnect_bytes")}
    numbers = "; ".join(f"{label} {_percent(*totals[k])}" for k, label in (
        ("flops", "FLOPs"), ("hbm_bytes", "HBM bytes"), ("interconnect_bytes", "bytes sent a device")))
    return {"sentence": f"{words}; {numbers}",
            "collectives_added": [{"kind": k, "buffer_bytes": s, "count": n} for (k, s), n in sorted(added.items())],
            "collectives_removed": [{"kind": k, "buffer_bytes": s, "count": n} for (k, s), n in sorted(removed.items())],
            **totals}
