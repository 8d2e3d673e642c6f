"""B's step cost against A's, in words and numbers (stdlib only): "sp adds 72 collective-permutes of
8 KiB a step and removes 6 all-reduces of 64 KiB". Collectives are told apart by kind, buffer size and
the number of devices in their groups: the same all-reduces over groups of 8 devices instead of 2 are
"regrouped", never alike (each device sends 2 x 7/8 of the buffer, not 2 x 1/2); groups of one size over other
devices read alike, which the sentence says (``hlo-diff --ab``'s module table lists their members)."""

from __future__ import annotations

from collections import Counter

from perfkit.common.digits import change_text

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
    """(kind, buffer bytes, devices in its group) -> count; the group is None in costs written before it was kept."""
    out: Counter = Counter()
    for r in cost["collective_shapes"]:
        out[(r["kind"], r["buffer_bytes"], r.get("group"))] += r["count"]
    return out


def _sizes(rows: Counter) -> Counter:
    out: Counter = Counter()
    for (kind, size, _), n in rows.items():
        out[(kind, size)] += n
    return out


def _regrouped(added: Counter, removed: Counter) -> list[dict]:
    """Collectives of one kind and size that B runs over groups of another size: taken out of ``added`` and
    ``removed``, as ``{kind, buffer_bytes, count, groups: [A's, B's]}``."""
    out = []
    for (kind, size, was), n in sorted(removed.items(), key=str):
        for (kind_b, size_b, now), m in sorted(added.items(), key=str):
            moved = min(n, m) if (kind_b, size_b) == (kind, size) and now != was else 0
            if moved:
                out.append({"kind": kind, "buffer_bytes": size, "count": moved, "groups": [was, now]})
                added[(kind, size, now)] -= moved
                removed[(kind, size, was)] -= moved
                n -= moved
    return out


def _percent(a: float, b: float) -> str:
    return "unchanged" if a == b else ("from 0" if not a else change_text(b / a))


def whose(checks: dict, a: str, b: str) -> str:
    """Which ranks' programs the change of ``b`` against ``a`` compares, where it is not every rank's: each side's cost
    is its first rank's program, which stands for its other ranks' only where their check (summary.json's ``ranks``:
    ``checks``) found them one."""
    apart = []
    for v in (a, b):
        check = checks.get(v)
        if check is None or check.get("consistent") is True:
            continue
        ranks = check.get("divergent_ranks") or []
        if check.get("consistent") is None:
            apart.append(f"{v}'s other ranks not compared")
        else:
            apart.append(f"{v}'s rank{'s' * (len(ranks) > 1)} {', '.join(map(str, ranks))} compiled another" if ranks
                         else f"{v}'s ranks compiled different programs")
    return f"their first ranks' programs: {' and '.join(apart)}" if apart else ""


def change(a_name: str, a: dict, b_name: str, b: dict, programs: str = "") -> dict:
    """``{sentence, collectives_added, collectives_removed, collectives_regrouped, flops, hbm_bytes,
    interconnect_bytes}``: the collectives B's step runs more or less often than A's (by kind, buffer size
    and group), those it runs over other groups, and the totals [A, B]. ``programs``: which ranks' programs ``a`` and
    ``b`` are, where not every rank's (``whose``), said inside the sentence."""
    ca, cb = _by_size(a), _by_size(b)
    added, removed = cb - ca, ca - cb
    regrouped = _regrouped(added, removed)
    added, removed = +added, +removed
    parts = []
    if added:
        parts.append(f"adds {_phrase(_sizes(added))} a step")
    if removed:
        parts.append(f"removes {_phrase(_sizes(removed))}")
    for r in regrouped:
        n = r["count"]
        parts.append(f"runs {n} {r['kind']}{'s' if n != 1 else ''} of {_size(r['buffer_bytes'])} over groups of "
                     f"{r['groups'][1]} devices, not {r['groups'][0]}")
    if ca or cb:
        # (a step's costs count a group's devices, not which: groups of the same size over other devices read alike)
        words = f"{b_name} " + (" and ".join(parts) if parts else "runs collectives of the same kinds, sizes and group "
                                "sizes") + f" (against {a_name}{'; ' + programs if programs else ''})"
    else:
        words = f"{b_name} runs no collective, nor does {a_name}" + (f" ({programs})" if programs else "")
    totals = {k: [a[k], b[k]] for k in ("flops", "hbm_bytes", "interconnect_bytes")}
    numbers = "; ".join(f"{label} {_percent(*totals[k])}" for k, label in (
        ("flops", "FLOPs"), ("hbm_bytes", "HBM bytes"), ("interconnect_bytes", "bytes sent a device")))
    return {"sentence": f"{words}; {numbers}",
            "collectives_added": [{"kind": k, "buffer_bytes": s, "group": g, "count": n}
                                  for (k, s, g), n in sorted(added.items(), key=str)],
            "collectives_removed": [{"kind": k, "buffer_bytes": s, "group": g, "count": n}
                                    for (k, s, g), n in sorted(removed.items(), key=str)],
            "collectives_regrouped": regrouped,
            **totals}
