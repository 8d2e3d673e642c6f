"""Text and Markdown views of ``perfkit.hlo.diff`` results. Formatting only: every figure comes from the dict.

One writer serves both: plain text indents, Markdown nests bullets and puts HLO in code spans. The
Markdown form is what run reports embed for a variant whose ranks diverged.
"""

from __future__ import annotations

from pathlib import Path

SHOWN = 8  # instructions / changes / offsets shown per list (the JSON has up to diff.MAX_LISTED)
SHAPES_SHOWN = 3  # shapes added, and removed, shown per opcode of an A/B line: one line each, kept short


def rank_list(ranks: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2, 5``."""
    runs: list[list[int]] = []
    for r in ranks:
        if runs and r == runs[-1][-1] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(f"{g[0]}-{g[-1]}" if len(g) > 2 else ", ".join(map(str, g)) for g in runs)


def ranks_text(ranks: list[int]) -> str:
    """``rank 3``, ``ranks 0-2``."""
    return f"rank{'s' if len(ranks) > 1 else ''} {rank_list(ranks)}"


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _signed(x: int) -> str:
    return f"{x:+,}"


class _Writer:
    def __init__(self, markdown: bool):
        self.markdown = markdown
        self.lines: list[str] = []

    def line(self, depth: int, text: str) -> None:
        if self.markdown:
            self.lines.append(("  " * (depth - 1) + "- " + text) if depth else text)
        else:
            self.lines.append("  " * depth + text)

    def code(self, text: str) -> str:
        return f"``{text}``" if self.markdown else text

    def bold(self, text: str) -> str:
        return f"**{text}**" if self.markdown else text

    def more(self, depth: int, total: int) -> None:
        if total > SHOWN:
            self.line(depth, f"... {total - SHOWN} more (see --json)")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def _instruction(w: _Writer, shown: dict | None) -> str:
    if shown is None:
        return "(no counterpart)"
    return f"{w.code(shown['text'])} ({shown['computation']}, line {shown['line']})"


def _inside(w: _Writer, depth: int, path: list[dict] | None) -> None:
    """A line under an instruction inside a called computation: the calls from ENTRY down to its computation, each
    as ``computation: %caller (line N) -attribute->``, ending at the computation the line above names."""
    if path:
        hops = " ".join(f"{s['computation']}: %{s['instruction']} (line {s['line']}) -{s['via']}->" for s in path)
        w.line(depth, "inside " + w.code(f"{hops} {path[-1]['calls']}"))


def counts_text(counts: dict | None) -> str:
    """``replica_count 2, num_partitions 4`` of a program (``Module.counts``), ``unknown`` where its HloModule line
    names neither."""
    return "unknown" if counts is None else ", ".join(f"{key} {n}" for key, n in counts.items())


def _divergence(w: _Writer, d: dict, majority: list[int]) -> None:
    who, ref = ranks_text(d["ranks"]), f"rank {d['against_rank']}"
    w.line(2, f"{who} against {ref} ({ranks_text(majority)}), file {w.code(d['file'])}:")
    if d["same_program"]:
        w.line(3, "same program (equal fingerprints); the buffer assignment differs")
    else:
        if d.get("counts"):  # (absent from results of older versions)
            w.line(3, f"device counts (HloModule line): {counts_text(d['counts']['majority'])} on {ref} -> "
                      f"{counts_text(d['counts']['rank'])} on {who}")
        e, n = d["entry_ops"], d["instructions"]
        w.line(3, f"ENTRY ops {e['majority']:,} -> {e['rank']:,} ({_signed(e['delta'])}); all instructions "
                  f"{n['majority']:,} -> {n['rank']:,} ({_signed(n['delta'])})")
        if d["opcodes"]:
            w.line(3, "opcodes: " + ", ".join(f"{o['opcode']} {o['majority']:,} -> {o['rank']:,}"
                                              for o in d["opcodes"]))
        first = d["first_difference"]
        if first:
            paths = first.get("paths", {})  # absent from results of older versions
            w.line(3, "first differing instruction:")
            w.line(4, f"{ref}: {_instruction(w, first['majority'])}"
                      + (f"; next there: {_instruction(w, first['majority_next'])}" if first.get("majority_next") else ""))
            _inside(w, 5, paths.get("majority") if first["majority"] else paths.get("majority_next"))
            w.line(4, f"{who}: {_instruction(w, first['rank'])}")
            _inside(w, 5, paths.get("rank"))
        coll = d.get("first_collective")  # absent from results of older versions
        if coll:
            only = {"majority": f", {ref}'s not on {who}", "rank": f", {who}'s not on {ref}"}.get(coll["only_on"], "")
            w.line(3, f"first differing collective: #{coll['index']} ({coll['count']['majority']} on {ref}, "
                      f"{coll['count']['rank']} on {who}{only}):")
            for side, name, other in (("majority", ref, who), ("rank", who, ref)):
                # (results of older versions showed the collective at that place on the side that lacks it)
                if coll["only_on"] and coll["only_on"] != side:
                    w.line(4, f"{name}: missing (no collective there pairs with {other}'s #{coll['index']})")
                else:
                    w.line(4, f"{name}: {_instruction(w, coll[side])}")
                    _inside(w, 5, coll.get("paths", {}).get(side))
        for key, side in (("only_rank", who), ("only_majority", ref)):
            if d[f"{key}_count"]:
                w.line(3, f"only on {side} ({d[f'{key}_count']}):")
                for item in d[key][:SHOWN]:
                    w.line(4, _instruction(w, item))
                w.more(4, d[f"{key}_count"])
        if d["changed_count"]:
            w.line(3, f"changed constants, attributes and operands ({d['changed_count']}):")
            for c in d["changed"][:SHOWN]:
                w.line(4, f"{c['opcode']} {c['field']} ({c['computation']}, lines {c['lines'][0]} / {c['lines'][1]}): "
                          f"{w.code(str(c['majority']))} -> {w.code(str(c['rank']))}")
            w.more(4, d["changed_count"])
    _buffers(w, d["buffers"], who, ref)


def _buffers(w: _Writer, b: dict, who: str, ref: str) -> None:
    parts = []
    for key, label in (("temp_bytes", "temp"), ("total_bytes", "all allocations")):
        t = b.get(key)
        if t:
            parts.append(f"{label} {t['majority']:,} -> {t['rank']:,} B ({_signed(t['delta'])})")
    # (results of older versions counted a buffer on one side only as moved and have no such counts)
    only_ref, only_who = b.get("receive_only_majority", 0), b.get("receive_only_rank", 0)
    undecided = b.get("receive_undecided", 0)  # (none in results of older versions)
    if b["receive_moved"] is None:
        parts.append("no buffer assignment to compare receive offsets")
    elif only_ref or only_who:
        parts.append(f"{b['receive_moved']} of {b['receive_count'] - only_ref - only_who} collective receive buffers "
                     "on both moved")
        parts += [f"{only_ref} missing on {who} (no such collective there)"] * bool(only_ref)
        parts += [f"{only_who} only on {who}"] * bool(only_who)
    elif b["receive_count"]:
        parts.append(f"{b['receive_moved']} of {b['receive_count']} collective receive buffers moved")
    parts += [f"{undecided} undecided (in allocations not paired across ranks)"] * bool(undecided)
    if parts:
        w.line(3, "buffers: " + "; ".join(parts))
    # the moved, the undecided and those on one side, else all (rows of older versions: no allocation, moved by offset)
    rows = [r for r in b.get("receive", []) if r["delta"] != 0 or r.get("moved", False) is not False]
    total = b["receive_moved"] + undecided + only_ref + only_who if rows else b.get("receive_count", 0)
    rows = rows or b.get("receive", [])
    for r in rows[:SHOWN]:
        index = f"{r['collective']}" + (f" {{{r['index']}}}" if r["index"] else "")
        if r["rank"] is None:
            w.line(4, f"{index} receive buffer missing on {who} (offset {r['majority']:,} on {ref}), {r['size']:,} B")
        elif r["majority"] is None:
            w.line(4, f"{index} receive buffer only on {who} (offset {r['rank']:,}), {r['size']:,} B")
        else:
            delta = f" ({_signed(r['delta'])})" if r["delta"] else ""
            alloc = r.get("allocation") or {}
            renumbered = alloc.get("majority") != alloc.get("rank")
            same = alloc.get("same", not renumbered)  # (results of older versions compared the numbers)
            numbers = f" in allocation {alloc.get('majority')} -> {alloc.get('rank')}"
            other = {True: numbers + " (its counterpart, renumbered)" if renumbered else "", False: numbers,
                     None: numbers + " (not paired across ranks: moved or not, undecided)"}[same]
            w.line(4, f"{index} receive offset {r['majority']:,} -> {r['rank']:,}{delta}{other}, {r['size']:,} B")
    w.more(4, total)


def _module(w: _Writer, m: dict) -> None:
    shape = (f"{_count(m['entry_ops'], 'ENTRY op')}, {_count(m['instructions'], 'instruction')}, "
             f"{_count(m['collectives'], 'collective')}")
    missing = f"; not compiled on {ranks_text(m['missing_ranks'])}" if m["missing_ranks"] else ""
    if m.get("renumbered_ranks"):  # (absent from results of older versions)
        missing += (f"; allocations numbered apart on {ranks_text(m['renumbered_ranks'])} (buffer assignment), "
                    "the same receive places")
    if len(m["groups"]) == 1:
        # one rank alone compiled it: nothing it could be identical to; ranks whose allocations are numbered apart
        # run one program with buffer assignments (temp sizes too) that differ
        alike = ("alone" if len(m["groups"][0]) == 1 else "one program" if m.get("renumbered_ranks")
                 else "identical")
        w.line(1, f"module {w.code(m['name'])}: {ranks_text(m['groups'][0])} {alike} "
                  f"(fingerprint {m['fingerprints'][0]}), {shape}{missing}")
        return
    groups = " | ".join(rank_list(g) for g in m["groups"])
    programs = w.bold(f"{len(m['groups'])} programs")
    w.line(1, f"module {w.code(m['name'])}: {programs}, ranks {groups}; majority {shape}{missing}")
    for d in m["divergences"]:
        _divergence(w, d, m["groups"][0])


def verdict(result: dict) -> str:
    """One line: consistent, or which ranks differ from which."""
    roles = result.get("roles") or []
    head = (f"{len(result['ranks'])} ranks" + (f" in {len(roles)} roles" if roles else "")
            + f", {_count(len(result['modules']), 'module')}")
    if result["consistent"] and not result.get("compared", 1):  # (a summary written before the count: compared)
        return (f"{head}: nothing compared (each module compiled by one rank only: these ranks share no program to "
                "differ in)")
    if result["consistent"]:
        # ranks whose allocations are numbered apart run one program, their buffer assignments not identical
        alike = "the same program" if any(m.get("renumbered_ranks") for m in result["modules"]) else "identical"
        return f"{head}: consistent (every module {alike} on every rank that compiled it)"
    bad = [m for m in result["modules"] if not m["consistent"]]
    first = bad[0]
    who = (f"{ranks_text(first['divergent_ranks'])} compiled a different {first['name']} than "
           f"{ranks_text(first['groups'][0])}" if first["divergent_ranks"] else
           f"{first['name']} missing on {ranks_text(first['missing_ranks'])}")
    return f"{head}: DIVERGENT in {_count(len(bad), 'module')}: {who}"


def ranks_report(result: dict, markdown: bool = False) -> str:
    """One rank comparison (``diff.compare_ranks``) as text or Markdown."""
    w = _Writer(markdown)
    w.line(0, f"{w.code(result['source'])}: {verdict(result)}")
    if result.get("roles"):
        w.line(1, "roles (ranks that compile modules of their own by design; each module compared across its "
                  "role): " + "; ".join(f"{ranks_text(r['ranks'])}: " + ", ".join(map(w.code, r["modules"]))
                                        for r in result["roles"]))
    for m in result["modules"]:
        if not m["consistent"] or not markdown:
            _module(w, m)
    return w.text()


def _shape_changes(w: _Writer, o: dict) -> list[str]:
    """An opcode's shapes added and removed, the SHAPES_SHOWN largest counts of each; those left out are counted and
    summed, so the parts printed add up to the opcode's change (the full lists are in --json)."""
    added, removed = (sorted(o[k], key=lambda s: -s["count"]) for k in ("shapes_added", "shapes_removed"))  # largest
    parts = [f"+{s['count']} {w.code(s['shape'])}" for s in added[:SHAPES_SHOWN]]
    parts += [f"-{s['count']} {w.code(s['shape'])}" for s in removed[:SHAPES_SHOWN]]
    left_out = len(added[SHAPES_SHOWN:]) + len(removed[SHAPES_SHOWN:])
    if left_out:
        rest = sum(s["count"] for s in added[SHAPES_SHOWN:]) - sum(s["count"] for s in removed[SHAPES_SHOWN:])
        parts.append(f"... {_count(left_out, 'more shape')} ({_signed(rest)})")
    return parts


def _step_program(w: _Writer, step: dict) -> str:
    """A step program by its module name and its dump's number (``module_0049``): the programs costed are
    named, as the modules compared are, for they need not be the same module."""
    return f"{w.code(step['module'])} ({Path(step['file']).name.split('.')[0]})"


def ab_report(result: dict, markdown: bool = False) -> str:
    """A against B (``diff.compare_ab``) as text or Markdown."""
    w = _Writer(markdown)
    differ = sum(not m["same_program"] for m in result["modules"])
    apart = " (no module name in common)" * bool(not result["modules"] and result["only_a"] and result["only_b"])
    w.line(0, f"A {w.code(result['a'])} against B {w.code(result['b'])}: {_count(len(result['modules']), 'module')} "
              f"compared{apart}, {differ} differ")
    if result.get("cost"):  # perfkit.cost.programs.ab_cost: the change, then each roofline, in words
        cost = result["cost"]
        w.line(1, f"step cost, A's step program {_step_program(w, cost['a'])} against B's "
                  f"{_step_program(w, cost['b'])}: " + cost["lines"][0])
        for line in result["cost"]["lines"][1:]:
            w.line(2, line)
    for key, side in (("only_a", "A"), ("only_b", "B")):
        if result[key]:
            w.line(1, f"only in {side}: " + ", ".join(map(w.code, result[key])))
    for m in result["modules"]:
        if m["same_program"]:
            w.line(1, f"module {w.code(m['name'])}: same program (fingerprint {m['fingerprints'][0]})")
            continue
        counts = [f"{label} {a:,} -> {b:,} ({_signed(b - a)})" for label, (a, b) in
                  (("ENTRY ops", m["entry_ops"]), ("instructions", m["instructions"]),
                   ("collectives", m["collectives"]))]
        if None not in m["temp_bytes"]:
            a, b = m["temp_bytes"]
            counts.append(f"temp {a:,} -> {b:,} B ({_signed(b - a)})")
        devices = m.get("counts") or [None, None]  # (absent from results of older versions)
        devices = (f"device counts (HloModule line) {counts_text(devices[0])} -> {counts_text(devices[1])}; "
                   if devices[0] != devices[1] else "")
        w.line(1, f"module {w.code(m['name'])}: {devices}" + ", ".join(counts))
        for o in m["opcodes"]:
            shapes = _shape_changes(w, o)
            w.line(2, f"{o['opcode']} {o['a']:,} -> {o['b']:,} ({_signed(o['delta'])})"
                      + (": " + ", ".join(shapes) if shapes else ""))
        for key, label in (("collectives_added", "collectives added in B"), ("collectives_removed", "collectives removed in B")):
            if m[key]:
                w.line(2, f"{label}:")
                for row in m[key][:SHOWN]:
                    w.line(3, f"{row['count']} x {w.code(row['what'])}")
                w.more(3, len(m[key]))
    return w.text()
