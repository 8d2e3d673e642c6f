"""Compare the programs that ranks compiled (``compare_ranks``), or variant A's against B's (``compare_ab``).

Modules are matched across ranks by name and content, never by the per-process ``module_NNNN``
counter. Ranks that compile differently named modules by design (pipeline stages: ranks 0-3 compile
``jit_stage0``, ranks 4-7 ``jit_stage1``) are grouped by role (``roles``): a module is compared across
its role's ranks and is not missing on the others. Per module, ranks are grouped by the canonical
fingerprint (names, numbering and metadata ignored) and by where their collectives receive (buffer
assignment: at the same offsets of allocations paired across ranks by what they are, not by number); every rank
outside the largest group is explained against it: ENTRY op count, opcode histogram, the first differing instruction in
canonical order, instructions only on one side, changed constants and attributes, temp size and
receive-buffer offsets. Both functions return plain JSON-able dicts (the ``--json`` contract);
``perfkit.hlo.render`` formats them.
"""

from __future__ import annotations

import difflib
from collections import Counter, deque
from itertools import zip_longest
from pathlib import Path
from typing import Callable, TypeVar

from perfkit.errors import BadInput
from perfkit.hlo.buffers import AllocationPairs, ReceiveBuffer, collectives
from perfkit.hlo.dumps import DumpFiles, RankDumps, dump_files, no_dumps_reason, note_unfinished
from perfkit.hlo.fingerprint import Call, FlatInstruction, Signer, first_calls
from perfkit.hlo.load import RankModule, RankModules, Summary, no_cyclic_gc
from perfkit.hlo.parse import CALLED_COMPUTATION_KEYS, collective_attrs

MAX_LISTED = 100       # instructions / changes kept per list in the result (counts are always complete)
MAX_TEXT = 400         # characters of an instruction's text kept for display
SMALL_ALIGNMENT = 4000  # above this many differing signatures a side, the aligner may skip popular ones

M = TypeVar("M", RankModule, Summary)  # what modules are matched as: a summary, or (A/B) the whole parse


def rank_files(folder: Path) -> list[DumpFiles]:
    """The modules a rank dumped; a rank without any is ``BadInput``, one with modules it dumped only before
    optimizations is noted (they read as not compiled on that rank)."""
    files = dump_files(folder) if folder.is_dir() else []
    if not files:
        raise BadInput(no_dumps_reason(folder), path=str(folder))
    note_unfinished(folder)
    return files


def _named(mods: list, module_filter: str | None, folder: Path) -> list:
    """The modules whose name contains ``module_filter`` (all without one); none is ``BadInput``."""
    if not module_filter:
        return mods
    mods = [m for m in mods if module_filter in m.name]
    if not mods:
        raise BadInput(f"no module whose name contains {module_filter!r}", path=str(folder))
    return mods


def match_modules(per_rank: dict[int, list[M]]) -> list[tuple[str, dict[int, M]]]:
    """Modules matched across ranks: by name, then among same-named ones by equal fingerprint, then in
    compile order. Returns (label, {rank: module}); the label is the name, ``name#k`` when repeated."""
    names = list(dict.fromkeys(m.name for r in sorted(per_rank) for m in per_rank[r]))
    out = []
    for name in names:
        same = {r: [m for m in mods if m.name == name] for r, mods in per_rank.items()}
        ref = max(sorted(same), key=lambda r: len(same[r]))
        slots: list[dict[int, M]] = [{ref: m} for m in same[ref]]
        for r in sorted(same):
            if r == ref:
                continue
            left = list(same[r])
            for slot in slots:
                hit = next((m for m in left if m.fingerprint == slot[ref].fingerprint), None) if ref in slot else None
                if hit is not None:
                    slot[r] = hit
                    left.remove(hit)
            free = [s for s in slots if r not in s]
            for slot, m in zip(free, left):
                slot[r] = m
            slots += [{r: m} for m in left[len(free):]]
        out += [(name if len(slots) == 1 else f"{name}#{k + 1}", slot) for k, slot in enumerate(slots)]
    return out


def _show(f: FlatInstruction) -> dict:
    text = f.inst.text if len(f.inst.text) <= MAX_TEXT else f.inst.text[:MAX_TEXT] + " ..."
    return {"computation": f.computation, "line": f.inst.line, "opcode": f.inst.opcode, "text": text}


def _path(f: FlatInstruction | None, calls: dict[str, Call]) -> list[dict] | None:
    """The calls from ENTRY down to ``f``'s computation, outermost first (empty for an ENTRY instruction): which
    while body, fusion or called computation an instruction lives in, as its computation's name alone does not
    say (one computation's name is another's on the other side). A computation called from several places is
    reached through its first call in canonical order."""
    if f is None:
        return None
    steps, at = [], f.computation
    while at in calls:
        call = calls[at]
        steps.append({"computation": call.computation, "instruction": call.inst.name, "line": call.inst.line,
                      "via": call.via, "calls": at})
        at = call.computation
    return steps[::-1]


def _first_pair(a: list[FlatInstruction], i1: int, i2: int, b: list[FlatInstruction], j1: int, j2: int
                ) -> tuple[FlatInstruction | None, FlatInstruction | None]:
    """The first differing instructions of a block ``a[i1:i2]`` against ``b[j1:j2]``: each side's first, where
    both sides have some in one computation the first of each there. A collective run in another's place brings
    its reducer's computation first (a newcomer's rank 2 ran a psum where the others ran a ppermute, shown as the
    psum's reducer parameter against the ppermute)."""
    first_a, first_b = (a[i1] if i1 < i2 else None), (b[j1] if j1 < j2 else None)
    if first_a is None or first_b is None:
        return first_a, first_b
    names_a, names_b = {f.computation for f in a}, {f.computation for f in b}
    at = (first_a.computation if first_a.computation in names_b else
          first_b.computation if first_b.computation in names_a else None)
    return (next((f for f in a[i1:i2] if f.computation == at), first_a),
            next((f for f in b[j1:j2] if f.computation == at), first_b))


def _align(a: list[str], b: list[str]) -> list[tuple[str, int, int, int, int]]:
    """The non-equal blocks of an alignment of two signature lists (difflib opcodes)."""
    n = min(len(a), len(b))
    head = 0
    while head < n and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < n - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    mid_a, mid_b = a[head:len(a) - tail], b[head:len(b) - tail]
    big = max(len(mid_a), len(mid_b)) > SMALL_ALIGNMENT
    matcher = difflib.SequenceMatcher(None, mid_a, mid_b, autojunk=big)
    return [(tag, i1 + head, i2 + head, j1 + head, j2 + head)
            for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"]


def _pair_by_opcode(a: list[FlatInstruction], b: list[FlatInstruction], fixed: dict[int, FlatInstruction | None],
                    fixed_b: set[int]):
    """Pair the two sides of a replaced block: the instructions of ``a`` that ``fixed`` holds (by id) as it pairs
    them (None: on one side only), those of ``b`` in ``fixed_b`` only so, the rest by opcode, in order; the rest is
    only on one side."""
    queues: dict[str, deque[FlatInstruction]] = {}
    for fb in b:
        if id(fb) not in fixed_b:
            queues.setdefault(fb.inst.opcode, deque()).append(fb)
    pairs, rest_a = [], []
    for fa in a:
        if id(fa) in fixed:
            got = fixed[id(fa)]
        else:
            queue = queues.get(fa.inst.opcode)
            got = queue.popleft() if queue else None
        if got is not None:
            pairs.append((fa, got))
        else:
            rest_a.append(fa)
    paired = {id(fb) for _, fb in pairs}
    return pairs, rest_a, [fb for fb in b if id(fb) not in paired]


def _display(f: FlatInstruction, key: str, canonical: str | None) -> str | None:
    raw = dict(f.inst.attrs).get(key)
    if canonical is None or raw is None:
        return canonical
    return f"{raw.strip()} (fingerprint {canonical})" if key in CALLED_COMPUTATION_KEYS else raw


def _changes(sa: Signer, sb: Signer, fa: FlatInstruction, fb: FlatInstruction) -> list[dict]:
    """Which fields of a paired instruction differ: shape, operands, literal (constants), attributes."""
    pa, pb = sa.parts(fa), sb.parts(fb)
    out = []
    for key in dict.fromkeys([*pa, *pb]):
        if pa.get(key) != pb.get(key):
            out.append({"opcode": fa.inst.opcode, "field": key, "computation": fb.computation,
                        "majority": _display(fa, key, pa.get(key)), "rank": _display(fb, key, pb.get(key)),
                        "lines": [fa.inst.line, fb.inst.line]})
    return out


def _capped(items: list, name: str) -> dict:
    return {name: items[:MAX_LISTED], f"{name}_count": len(items)}


def _opcodes(flat: list[FlatInstruction]) -> Counter:
    return Counter(f.inst.opcode for f in flat)


def _opcode_delta(a: list[FlatInstruction], b: list[FlatInstruction]) -> list[dict]:
    ca, cb = _opcodes(a), _opcodes(b)
    return [{"opcode": op, "majority": ca[op], "rank": cb[op], "delta": cb[op] - ca[op]}
            for op in sorted(set(ca) | set(cb)) if ca[op] != cb[op]]


def _delta(a: int | None, b: int | None) -> dict | None:
    return None if a is None or b is None else {"majority": a, "rank": b, "delta": b - a}


Pairs = list[tuple[FlatInstruction | None, FlatInstruction | None, bool]]


def _spans(blocks: list[tuple[str, int, int, int, int]], n_a: int, n_b: int) -> list[tuple[int, int, int, int, bool]]:
    """Two sequences of ``n_a`` and ``n_b`` items cut where an alignment's differing ``blocks`` lie: (i1, i2, j1, j2,
    in a block), the equal stretches between them included."""
    spans, i, j = [], 0, 0
    for _, i1, i2, j1, j2 in blocks:
        spans += [(i, i1, j, j1, False), (i1, i2, j1, j2, True)]
        i, j = i2, j2
    return spans + [(i, n_a, j, n_b, False)]


def collective_pairs(a: RankModule, b: RankModule, blocks: list[tuple[str, int, int, int, int]]) -> Pairs:
    """Each side's collectives, in canonical order, paired as the alignment's differing ``blocks`` leave them: in
    order between blocks (equal instructions); within a block as its collectives align by what they are
    (``_collective_signature``), so that [X, Y] against [Y] pairs Y with Y and leaves X on one side, those left in
    a differing stretch there in order, the longer side's rest on that side only (None on the other). The flag:
    the pair lies in a block."""
    ca, cb = ({id(f) for _, f in collectives(m.flat, m.roots)} for m in (a, b))
    pairs: Pairs = []
    for i1, i2, j1, j2, in_block in _spans(blocks, len(a.flat), len(b.flat)):
        la = [f for f in a.flat[i1:i2] if id(f) in ca]
        lb = [f for f in b.flat[j1:j2] if id(f) in cb]
        inner = _align([_collective_signature(f, a.roots) for f in la],
                       [_collective_signature(f, b.roots) for f in lb]) if in_block else []
        for k1, k2, l1, l2, _ in _spans(inner, len(la), len(lb)):
            pairs += [(fa, fb, in_block) for fa, fb in zip_longest(la[k1:k2], lb[l1:l2])]
    return pairs


def buffer_diff(a: RankModule, b: RankModule, pairs: Pairs) -> dict:
    """Temp size and where each collective receives (allocation and offset), majority against rank, the collectives
    paired as ``pairs`` pairs them (a collective one side skips does not shift the rest); how many moved (to another
    offset or allocation, allocations paired by what they are: ``AllocationPairs``), how many may have (allocations
    that cannot be paired), and how many are on one side only."""
    out = {"temp_bytes": _delta(a.temp_bytes, b.temp_bytes), "total_bytes": _delta(a.total_bytes, b.total_bytes)}
    if a.receive is None or b.receive is None:
        return {**out, "receive": [], "receive_moved": None}
    allocations = AllocationPairs(a.allocations or [], b.allocations or [])
    by_name: tuple[dict[str, list[ReceiveBuffer]], ...] = ({}, {})
    for side, receive in zip(by_name, (a.receive, b.receive)):
        for x in receive:
            side.setdefault(x.instruction, []).append(x)
    rows = []
    for fa, fb, _ in pairs:
        ra = {x.index: x for x in by_name[0].pop(fa.inst.name, [])} if fa else {}
        rb = {x.index: x for x in by_name[1].pop(fb.inst.name, [])} if fb else {}
        for index in dict.fromkeys([*ra, *rb]):
            xa, xb = ra.get(index), rb.get(index)
            same = allocations.same(xa, xb) if xa and xb else None
            # undecided where the allocations cannot be paired; on one side only: missing there, not moved
            moved = bool(xa and xb) and (None if same is None else not same or xa.offset != xb.offset)
            rows.append({"collective": (xa or xb).label, "index": index,
                         "majority": xa.offset if xa else None, "rank": xb.offset if xb else None,
                         "size": (xb or xa).size,
                         "delta": xb.offset - xa.offset if xa and xb else None,
                         "allocation": {"majority": xa.allocation if xa else None,
                                        "rank": xb.allocation if xb else None, "same": same},
                         "moved": moved})
    return {**out, **_capped(rows, "receive"), "receive_moved": sum(r["moved"] is True for r in rows),
            "receive_undecided": sum(r["moved"] is None for r in rows),
            "receive_only_majority": sum(r["rank"] is None for r in rows),
            "receive_only_rank": sum(r["majority"] is None for r in rows)}


def divergence(a: RankModule, b: RankModule, ranks: list[int], known: dict[str, list[str]]) -> dict:
    """Why ``ranks`` (represented by ``b``) differ from the majority (represented by ``a``). ``known``: the
    signatures of computations already signed, by fingerprint (``Signer.signatures``), shared by the
    divergences of one module: the majority's are signed once, not once per divergent group."""
    out = {"ranks": ranks, "against_rank": a.rank, "file": str(b.files.hlo),
           "same_program": a.fingerprint == b.fingerprint,
           "counts": None if a.module.counts == b.module.counts else {"majority": a.module.counts,
                                                                       "rank": b.module.counts},
           "entry_ops": _delta(a.entry_ops, b.entry_ops), "instructions": _delta(len(a.flat), len(b.flat)),
           "opcodes": _opcode_delta(a.flat, b.flat), "first_difference": None, "first_collective": None}
    only_a: list[dict] = []
    only_b: list[dict] = []
    changed: list[dict] = []
    blocks: list[tuple[str, int, int, int, int]] = []
    if not out["same_program"]:
        sa, sb = Signer(a.module, a.fps), Signer(b.module, b.fps)
        blocks = _align(sa.signatures(a.flat, known), sb.signatures(b.flat, known))
    pairs = collective_pairs(a, b, blocks)
    if blocks:
        _, i1, i2, j1, j2 = blocks[0]
        fa, fb = _first_pair(a.flat, i1, i2, b.flat, j1, j2)
        # Where only the rank has instructions: the majority's next one, for context.
        after = a.flat[i1] if i1 == i2 and i1 < len(a.flat) else None
        calls_a, calls_b = first_calls(a.module), first_calls(b.module)
        out["first_difference"] = {"majority": _show(fa) if fa else None, "rank": _show(fb) if fb else None,
                                   "majority_next": _show(after) if after else None,
                                   "paths": {"majority": _path(fa, calls_a), "rank": _path(fb, calls_b),
                                             "majority_next": _path(after, calls_a)}}
        out["first_collective"] = first_collective(a, b, pairs, calls_a, calls_b)
    # the collectives of the blocks pair as collective_pairs aligns them, the other instructions by opcode
    fixed = {id(fa): fb for fa, fb, in_block in pairs if in_block and fa}
    fixed_b = {id(fb) for _, fb, in_block in pairs if in_block and fb}
    for _, i1, i2, j1, j2 in blocks:
        paired, rest_a, rest_b = _pair_by_opcode(a.flat[i1:i2], b.flat[j1:j2], fixed, fixed_b)
        for fa, fb in paired:
            changed += _changes(sa, sb, fa, fb)
        only_a += map(_show, rest_a)
        only_b += map(_show, rest_b)
    return {**out, **_capped(only_a, "only_majority"), **_capped(only_b, "only_rank"),
            **_capped(changed, "changed"), "buffers": buffer_diff(a, b, pairs)}


def first_collective(a: RankModule, b: RankModule, pairs: Pairs, calls_a: dict[str, Call], calls_b: dict[str, Call]
                     ) -> dict | None:
    """The first collective in the alignment's differing blocks (either side's; ``collective_pairs``), as its place
    in that side's collectives, in canonical order: ranks pair collectives in order, so from there on they wait for
    one another at the wrong one or exchange the wrong data. The first differing instruction may come well before it
    (a fusion's body) or be no collective at all. ``only_on``: the side whose collective has no counterpart in its
    block (one rank lacks it), null where both sides have one there (changed). None: the same collectives, in
    the same order, where kind, shape, groups and pairs tell (``_collective_signature``). ``majority`` / ``rank``:
    the collective and its counterpart as ``pairs`` pairs them, null on the side that lacks it. ``calls_a`` /
    ``calls_b``: each side's ``first_calls``, for the path to each collective."""
    ca, cb = ([f for _, f in collectives(m.flat, m.roots)] for m in (a, b))
    place_a, place_b = ({id(f): k for k, f in enumerate(fs)} for fs in (ca, cb))
    for pa, pb, in_block in pairs:
        # the same collectives on other operands (another fusion around them) pair alike
        if not in_block or pa and pb and _collective_signature(pa, a.roots) == _collective_signature(pb, b.roots):
            continue
        if pa and pb:
            k, only = place_a[id(pa)], None
        else:
            k, only = (place_a[id(pa)], "majority") if pa else (place_b[id(pb)], "rank")
        # each side's is its counterpart by the alignment, none where it lacks one: the other side's collective at
        # that place would be another one (a later hop where one is skipped)
        return {"index": k + 1, "count": {"majority": len(ca), "rank": len(cb)}, "only_on": only,
                "majority": _show(pa) if pa else None, "rank": _show(pb) if pb else None,
                "paths": {"majority": _path(pa, calls_a), "rank": _path(pb, calls_b)}}
    return None


def _groups(keys: dict[int, tuple]) -> list[list[int]]:
    """Ranks with equal keys, the largest group first (ties: the group with the lowest rank)."""
    by_key: dict[tuple, list[int]] = {}
    for r in sorted(keys):
        by_key.setdefault(keys[r], []).append(r)
    return sorted(by_key.values(), key=lambda g: (-len(g), g[0]))


def roles(names: dict[int, set[str]]) -> list[dict]:
    """Ranks grouped by the modules only they compile, where that is by design: two or more groups, each
    with modules of its own that no other group compiles (pipeline stages). Empty otherwise: a rank that
    lacks a module the others compiled, or compiled one more, is not a role of its own."""
    common = set.intersection(*names.values()) if names else set()
    by_role: dict[frozenset, list[int]] = {}
    for r in sorted(names):
        by_role.setdefault(frozenset(names[r] - common), []).append(r)
    own = list(by_role)
    if len(own) < 2 or not all(own) or sum(map(len, own)) != len(frozenset().union(*own)):
        return []
    return [{"ranks": ranks, "modules": sorted(k)} for k, ranks in sorted(by_role.items(), key=lambda kv: kv[1][0])]


def _receive_places(m: Summary) -> list[tuple[int, int]]:
    return [(number, offset) for _, _, number, offset in m.receive or ()]


def _alike(a: Summary, b: Summary) -> bool:
    """Whether B runs A's program and receives where A does: at the same offsets of the allocations paired with
    A's by what they are (``AllocationPairs``), however numbered (one allocation more on a rank, of any kind,
    renumbers the later ones)."""
    return (a.fingerprint == b.fingerprint and [x[:2] for x in a.receive or ()] == [x[:2] for x in b.receive or ()]
            and AllocationPairs(a.allocations or (), b.allocations or ()).same_places(_receive_places(a),
                                                                                      _receive_places(b)))


def module_groups(slot: dict[int, Summary], with_buffers: bool) -> list[tuple[int, list[int]]]:
    """Ranks that run one program and receive alike, as (the rank they were compared against, all of them), the
    largest group first. Ranks whose buffer assignments are alike are one group at once; then each such group, the
    largest first, joins the first one before it whose rank it is ``_alike`` to. A receive buffer that moved, or that
    the pairing cannot place, keeps them apart, as the divergence says (explained against the same rank)."""
    groups: list[tuple[int, list[int]]] = []
    for g in _groups({r: m.key(with_buffers) for r, m in slot.items()}):
        home = next((h for r, h in groups if with_buffers and _alike(slot[r], slot[g[0]])), None)
        if home is None:
            groups.append((g[0], g))
        else:
            home += g
    return sorted(((r, sorted(g)) for r, g in groups), key=lambda rg: (-len(rg[1]), rg[1][0]))


def compare_module(label: str, slot: dict[int, Summary], all_ranks: list[int],
                   full: Callable[[Summary], RankModule]) -> dict:
    """One module across ``all_ranks`` (its role's ranks, or every rank); ``full`` gives the whole parse of the
    ranks a divergence is explained with."""
    with_buffers = all(m.receive is not None for m in slot.values())
    grouped = module_groups(slot, with_buffers)
    groups = [g for _, g in grouped]
    majority = slot[grouped[0][0]]
    missing = [r for r in all_ranks if r not in slot]
    # grouped by where they receive, not by the allocations' numbers: say where those alone differ
    renumbered = [r for ref, g in grouped for r in g if with_buffers and slot[r].receive != slot[ref].receive]
    known: dict[str, list[str]] = {}
    return {
        "name": label, "module": majority.name,
        # A module some ranks never compiled is harmless unless its collectives wait for them.
        "consistent": len(groups) == 1 and not (missing and majority.collectives),
        "groups": groups, "fingerprints": [slot[r].fingerprint for r, _ in grouped],
        "divergent_ranks": sorted(r for g in groups[1:] for r in g), "missing_ranks": missing,
        "renumbered_ranks": sorted(renumbered),
        "entry_ops": majority.entry_ops, "instructions": majority.instructions, "collectives": majority.collectives,
        "temp_bytes": majority.temp_bytes, "buffers_compared": with_buffers, "file": str(majority.files.hlo),
        "divergences": [divergence(full(majority), full(slot[r]), g, known) for r, g in grouped[1:]],
    }


def compare_ranks(dumps: RankDumps, module_filter: str | None = None, workers: int | None = 1) -> dict:
    """Every module of every rank in ``dumps`` compared across ranks (the ``--json`` result). Each distinct
    dump (up to naming) is parsed once, in ``workers`` processes (None: one per core; see
    ``load.RankModules``)."""
    if len(dumps.ranks) < 2:
        raise BadInput("needs the dumps of two or more ranks", path=dumps.label)
    files = {r: rank_files(folder) for r, folder in dumps.ranks.items()}
    # No cyclic GC while the parses live: they hold no cycles, and its collections would rescan every kept
    # one (benchmarks/hlo_rank_diff.py). RankModules.close frees them before it is back.
    with no_cyclic_gc(), RankModules(files, workers) as loaded:
        per_rank = {r: _named(loaded.summaries[r], module_filter, folder) for r, folder in dumps.ranks.items()}
        ranks = sorted(per_rank)
        found = roles({r: {m.name for m in mods} for r, mods in per_rank.items()})
        role_of = {name: role["ranks"] for role in found for name in role["modules"]}
        modules = [compare_module(label, slot, role_of.get(next(iter(slot.values())).name, ranks), loaded.full)
                   for label, slot in match_modules(per_rank)]
    # Whole-program groups: ranks whose every module landed in the same group.
    place = {r: tuple(next((k for k, g in enumerate(m["groups"]) if r in g), -1) for m in modules) for r in ranks}
    groups = _groups(place)
    return {"source": dumps.label, "variant": dumps.variant, "ranks": ranks, "roles": found,
            "consistent": all(m["consistent"] for m in modules), "groups": groups,
            "compared": sum(sum(map(len, m["groups"])) > 1 for m in modules),
            "divergent_ranks": sorted({r for m in modules for r in m["divergent_ranks"]}),
            "modules": modules}


def _collective_signature(f: FlatInstruction, roots: dict[str, str]) -> str:
    """Opcode, shape and the attributes that make a collective what it is (``parse.collective_attrs``)."""
    keys = ", ".join(f"{k}={v}" for k, v in collective_attrs(f.inst, roots))
    return f"{f.inst.opcode} {f.inst.shape}" + (f", {keys}" if keys else "")


def _counter_rows(counter: Counter) -> list[dict]:
    return [{"what": k, "count": n} for k, n in sorted(counter.items())]


def ab_module(label: str, a: RankModule, b: RankModule) -> dict:
    """B's module against A's: op counts and shapes by opcode, collectives added or removed."""
    ca, cb = _opcodes(a.flat), _opcodes(b.flat)
    sa, sb = Counter((f.inst.opcode, f.inst.shape) for f in a.flat), Counter((f.inst.opcode, f.inst.shape) for f in b.flat)
    rows = []
    for op in sorted(set(ca) | set(cb)):
        added = [{"shape": s, "count": n} for (o, s), n in sorted((sb - sa).items()) if o == op]
        removed = [{"shape": s, "count": n} for (o, s), n in sorted((sa - sb).items()) if o == op]
        if ca[op] != cb[op] or added or removed:
            rows.append({"opcode": op, "a": ca[op], "b": cb[op], "delta": cb[op] - ca[op],
                         "shapes_added": added, "shapes_removed": removed})
    coll_a = Counter(_collective_signature(f, a.roots) for _, f in collectives(a.flat, a.roots))
    coll_b = Counter(_collective_signature(f, b.roots) for _, f in collectives(b.flat, b.roots))
    return {"name": label, "same_program": a.fingerprint == b.fingerprint,
            "fingerprints": [a.fingerprint, b.fingerprint], "counts": [a.module.counts, b.module.counts],
            "entry_ops": [a.entry_ops, b.entry_ops], "instructions": [len(a.flat), len(b.flat)],
            "collectives": [sum(coll_a.values()), sum(coll_b.values())],
            "temp_bytes": [a.temp_bytes, b.temp_bytes], "opcodes": rows,
            "collectives_added": _counter_rows(coll_b - coll_a), "collectives_removed": _counter_rows(coll_a - coll_b)}


def compare_ab(a_folder: Path, b_folder: Path, module_filter: str | None = None) -> dict:
    """Variant A's compiled modules against variant B's (two dump folders), matched by name."""
    folders = {0: a_folder, 1: b_folder}
    with RankModules({r: rank_files(folder) for r, folder in folders.items()}) as loaded:
        matched = match_modules({r: [loaded.full(m) for m in _named(loaded.summaries[r], module_filter, folder)]
                                 for r, folder in folders.items()})
    modules = [ab_module(label, slot[0], slot[1]) for label, slot in matched if len(slot) == 2]
    only_a = [label for label, slot in matched if list(slot) == [0]]
    only_b = [label for label, slot in matched if list(slot) == [1]]
    return {"mode": "ab", "a": str(a_folder), "b": str(b_folder),
            "consistent": not only_a and not only_b and all(m["same_program"] for m in modules),
            "modules": modules, "only_a": only_a, "only_b": only_b}
