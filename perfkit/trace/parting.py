"""Where chips part, for hangs and divergence: each chip's collectives in order, how many each completed,
the collective each waits at, and the first place in the sequence where the chips disagree.

From per-chip traces (a hung trial's, cut by a timer, or any set of per-chip profiles), each chip's
collective instances (``perfkit.trace.collectives``) are taken in its own time order and placed by step
and by their index within the step; those after its last marked step are in the step after it (a hung
step's marker never closes, so the profiler never writes it), a chip with no marker's in the traces' first, and in
traces with no marker at all none is in a step. The first place, in step and index order,
where the chips that ran the step do not all show one collective (same kind and bytes sent: instruction
names differ between ranks whose programs differ) is where they part: a chip there with another collective ran a
``different collective``; a chip with none there ``skipped`` it when it has later collectives, else it has ``not
completed`` it (its trace ends before one there: the profiler writes an op when it ends, so a chip cut inside the
collective shows as one that never reached it). The majority's instruction is the one named; where more chips went
on past the place with none there (a later collective, or the step's marker closed) than ran any one collective,
the majority is theirs, and the chips with one ran an ``extra collective`` (named).

Where each rank's compiled program is given (its XLA dump folder), the programs say more than the trace
can: a chip waits at the collective its program runs after the last one it completed (without programs:
the one it ran after that one the time before), and a rank whose program's collectives differ from the
majority's names the instructions its program lacks or adds (aligned by opcode, shape, the attributes hlo-diff
compares a collective by (groups, pairs, reducer) and operands, a collective's operands read through the collectives
feeding it, as ``difflib`` aligns two sequences, then where those part by all but operands), which traces cannot tell
apart when the collectives look alike (a hop with other pairs). Where the
traces agree but the chips wait at collectives of other kinds or shapes (a hang at the very place where they
part, which no chip completes), the programs' next collectives part them there (``waiting``). A chip whose trace
ends after its last collective, its last step's marker closed with nothing after it (a finished trial's, or a rank
that ran ahead and waits at shutdown), is not said to wait (``ended``): its trace cannot show whether it waits at
its program's next collective or has left the program; nor is a chip where the run's record says the trial ended
ok (its ``waiting_from`` null too: nothing it waits at comes from anywhere).
Where nothing says whether the chips hung (traces of no recorded trial, or of a trial recorded neither ok nor hung),
the text gives where each would wait if they did, not that it waits.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from perfkit.errors import BadInput
from perfkit.hlo.dumps import dump_files
from perfkit.hlo.parse import Instruction, collective_attrs, read_module
from perfkit.rundata.rundir import rank_dirs
from perfkit.trace import collectives, shards
from perfkit.trace.events import chip_frame, chip_key, is_device_op, notes_left_out

EVENT_COLUMNS = (*collectives.EVENT_COLUMNS, "hlo_module")  # all it reads
CHIP_COLUMNS = ["rank", "device", "completed", "last_step", "last_op", "last_kind", "waiting_at", "waiting_from"]
_COLLECTIVES = {"all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute",
                "collective-broadcast", "send", "recv", "ragged-all-to-all"}
_LAYOUT = re.compile(r"\{[^}]*\}")


def _chip_label(rank, device) -> str:
    return f"rank {rank} device {device}"


def sequences(events: pd.DataFrame) -> pd.DataFrame:
    """Each chip's collective instances in its time order: ``rank, device, step, index`` (within the step),
    ``position`` (on the chip), ``op, kind, bytes, module, start_ps, end_ps``."""
    return _sequenced(collectives.instances(events), _modules(events))


def _modules(events: pd.DataFrame) -> pd.Series:
    """Each program's module (program_id -> hlo_module), as the first device op of the program names it."""
    program = events["program_id"]
    rows = np.flatnonzero(is_device_op(events) & program.notna().to_numpy())
    ids = program.to_numpy(np.uint64, na_value=0)[rows]
    heads = _run_heads(ids)
    first = rows[heads][~pd.Index(ids[heads]).duplicated()]
    return events.iloc[first].set_index("program_id")["hlo_module"]


def _run_heads(key: np.ndarray) -> np.ndarray:
    """Where (n,) bool a run of equal keys starts: each key's first row is one, and there are few (a
    program's ops, a chip's, come in runs), so the keys' firsts are sought among them only."""
    heads = np.ones(key.size, bool)
    heads[1:] = key[1:] != key[:-1]
    return heads


def _sequenced(inst: pd.DataFrame, modules: pd.Series) -> pd.DataFrame:
    """``sequences`` from the chips' collective instances (``collectives.instances``) and ``_modules``."""
    out = inst[["rank", "device", "step", "op", "kind", "bytes", "program_id", "start_ps", "end_ps"]].copy()
    out["op"], out["kind"] = out["op"].astype(str), out["kind"].astype(str)
    out["module"] = out["program_id"].map(modules).astype(object).where(out["program_id"].notna(), None)
    out = out.sort_values(["rank", "device", "start_ps"], kind="stable", ignore_index=True)
    # a chip's ops after its last marked step belong to the step after it: a hung step's marker never closes; a
    # chip with no marker hung in the traces' first step; in traces with no marker at all, no step is invented (-1)
    marked = out["step"] >= 0
    chip = out.groupby(["rank", "device"])
    last_step = out["step"].where(marked).groupby([out["rank"], out["device"]]).transform("max")
    last_start = out["start_ps"].where(marked).groupby([out["rank"], out["device"]]).transform("max")
    after = ~marked & ~(out["start_ps"] < last_start)
    first = out["step"].where(marked).min() if marked.any() else -1
    out["step"] = out["step"].where(~after, (last_step + 1).fillna(first)).astype(np.int64)
    out["closed"] = marked  # in a step whose marker closed: the chip finished that step
    out["position"] = chip.cumcount()
    out["index"] = out.groupby(["rank", "device", "step"]).cumcount()
    return out.drop(columns="program_id")


def _inputs(i: Instruction, producers: dict[str, Instruction]) -> tuple[str, ...]:
    """``i``'s operands, each collective among them (an async one's done too) read as its own inputs."""
    return tuple(name for o in i.operands for name in (
        _inputs(producers[o], producers)
        if o in producers and producers[o].opcode.removesuffix("-start").removesuffix("-done") in _COLLECTIVES
        else (o,)))


def program_collectives(folder: Path) -> dict[str, list[Instruction]]:
    """Per module name, the collectives of its entry computation in printed (scheduled) order, from one
    rank's XLA dump folder; an async pair counts once, by its start. Their operands are read through the
    collectives that feed them (``_inputs``): a collective added before another feeds it, and the one after would
    otherwise align as another collective. Their attributes are those that make a collective what it is, as hlo-diff
    compares them (``parse.collective_attrs``: groups, pairs, reducer): a hop whose pairs differ is another hop."""
    out = {}
    for files in dump_files(Path(folder)):
        module = read_module(files.hlo)
        producers, roots = {i.name: i for i in module.entry_computation.instructions}, module.root_opcodes()
        found = [i._replace(operands=_inputs(i, producers), attrs=collective_attrs(i, roots))
                 for i in module.entry_computation.instructions if i.opcode.removesuffix("-start") in _COLLECTIVES]
        out.setdefault(module.name, found)
    return out


def _kind(i: Instruction) -> tuple:
    return i.opcode, _LAYOUT.sub("", i.shape), i.attrs


def _signature(i: Instruction) -> tuple:
    return *_kind(i), i.operands


def _program_change(majority: list[Instruction], mine: list[Instruction]) -> dict:
    """The collectives ``mine`` lacks and adds against ``majority``, aligned by opcode, shape, attributes
    (``program_collectives``) and operands; where those part, realigned by opcode, shape and attributes alone: a
    collective fed through other ops by an added one (a psum, then a divide) is the same collective with new operands,
    not one lacked and one added. A lacked and an added one of one opcode at one place (a hop with other pairs) each
    carry their ``attrs`` that differ, ``{name: value}``: what tells them apart."""
    lacks, adds = [], []
    for _, a0, a1, b0, b1 in _unequal(majority, mine, _signature):
        for _, c0, c1, d0, d1 in _unequal(majority[a0:a1], mine[b0:b1], _kind):
            lacks += [{"op": i.name, "opcode": i.opcode, "index": a0 + c0 + k}
                      for k, i in enumerate(majority[a0 + c0:a0 + c1])]
            adds += [{"op": i.name, "opcode": i.opcode, "index": b0 + d0 + k}
                     for k, i in enumerate(mine[b0 + d0:b0 + d1])]
    by_index = {c["index"]: c for c in adds}
    for lacked in lacks:
        added = by_index.get(lacked["index"])
        if added is not None and added["opcode"] == lacked["opcode"]:
            theirs, ours = (dict(i.attrs) for i in (majority[lacked["index"]], mine[added["index"]]))
            differ = [k for k in dict.fromkeys([*theirs, *ours]) if theirs.get(k) != ours.get(k)]
            if differ:
                lacked["attrs"] = {k: theirs.get(k) for k in differ}
                added["attrs"] = {k: ours.get(k) for k in differ}
    return {"lacks": lacks, "adds": adds, "majority_count": len(majority), "count": len(mine)}


def _unequal(a: list[Instruction], b: list[Instruction], key: Callable[[Instruction], tuple]) -> list[tuple]:
    """``difflib``'s opcodes aligning ``a`` with ``b`` by ``key``, less the equal runs."""
    matcher = difflib.SequenceMatcher(None, [key(i) for i in a], [key(i) for i in b], autojunk=False)
    return [op for op in matcher.get_opcodes() if op[0] != "equal"]


def _chips(events: pd.DataFrame) -> pd.DataFrame:
    """The chips (rank, device) with device ops, sorted, with how far each one's trace goes: ``marked`` (the
    last step whose marker spans its ops; -1 none) and ``reached`` (that step, or the next where its ops run on
    past the marker: a hung step's marker never closes, and its ops may be no collective)."""
    dev = is_device_op(events)
    rank, device = events["rank"].to_numpy()[dev], events["device"].to_numpy()[dev]
    key = chip_key(rank, device)
    keys = np.unique(key[_run_heads(key)])
    chips = chip_frame(keys, rank.dtype, device.dtype)
    ops = pd.DataFrame({"key": key, "step": events["step"].to_numpy()[dev],
                        "start": events["start_ps"].to_numpy()[dev]})
    inside = ops["step"].to_numpy() >= 0
    last = ops[inside].groupby("key").agg(step=("step", "max"), start=("start", "max"))
    later = ops[~inside].groupby("key")["start"].max().reindex(last.index) > last["start"]
    chips["marked"] = last["step"].reindex(keys).fillna(-1).to_numpy(np.int64)
    chips["reached"] = chips["marked"] + later.reindex(keys, fill_value=False).to_numpy()
    return chips


def _unsettled(seq: pd.DataFrame, chips: int) -> list[tuple[int, int]]:
    """The (step, index) places, in order, that not every one of ``chips`` chips shows with one signature
    (kind, bytes): found in one pass over the table, so that only these are looked at one by one."""
    kind, sent = (pd.factorize(seq[c])[0] for c in ("kind", "bytes"))  # unknown bytes (NaN): -1, alike
    signature = kind.astype(np.int64) * (int(sent.max(initial=-1)) + 2) + sent + 1
    places = seq.assign(signature=signature).groupby(["step", "index"], sort=True)["signature"]
    ends = places.agg(["size", "min", "max"])  # one signature at a place: its least equals its greatest
    settled = (ends["size"] == chips) & (ends["min"] == ends["max"])
    return [(int(step), int(index)) for step, index in settled.index[~settled.to_numpy()]]


def first_parting(seq: pd.DataFrame, chips: pd.DataFrame) -> dict | None:
    """The first (step, index) where the chips that ran the step do not all show one collective: ``step,
    index, op, kind, bytes, module`` (the majority's, or with ``extra`` the first extra collective's), ``majority``
    (its chips), ``parted``: ``[{rank, device, how (different collective | extra collective | skipped | not
    completed), op, in_step}]``, ``extra`` (the majority ran none there and went on); None where they never part."""
    everyone = [(int(r), int(d)) for r, d in zip(chips["rank"], chips["device"])]
    keys = _unsettled(seq, len(everyone))
    if not keys:
        return None
    by_chip = {c: g.set_index(["step", "index"]) for c, g in seq.groupby(["rank", "device"])}
    last = {c: max(zip(g["step"], g["index"])) for c, g in seq.groupby(["rank", "device"])}
    closed = {c: set(g["step"]) for c, g in seq[seq["closed"]].groupby(["rank", "device"])}
    steps = seq.groupby(["rank", "device", "step"]).size()  # collectives per chip and step
    for step, index in keys:
        here = {c: g.loc[(step, index)] for c, g in by_chip.items() if (step, index) in g.index}
        # unknown bytes (NaN) alike: NaN equals nothing, not even another chip's NaN
        signatures = {c: (r["kind"], None if pd.isna(r["bytes"]) else r["bytes"]) for c, r in here.items()}
        # a chip that went on past this place without a collective here (a later one, or its step finished) votes for
        # none: the others ran an extra one
        went_on = [c for c in everyone if c not in here and (last.get(c, (-2, 0)) > (step, index)
                                                             or step in closed.get(c, ()))]
        counts = pd.Series(list(signatures.values()), dtype=object).value_counts(sort=True)
        if len(here) == len(everyone) and len(counts) == 1:
            continue
        extra = len(went_on) > int(counts.iloc[0])  # (a tie goes to the collective)
        top = counts.index[0]
        majority = went_on if extra else [c for c in everyone if signatures.get(c) == top]
        parted = []
        for c in everyone:
            if c in majority:
                continue
            if c in here:
                how = "extra collective" if extra else "different collective"
                parted.append({"rank": c[0], "device": c[1], "how": how, "op": here[c]["op"], "kind": here[c]["kind"],
                               "in_step": int(steps.get((*c, step), 0))})
            else:
                parted.append({"rank": c[0], "device": c[1], "how": "skipped" if c in went_on else "not completed",
                               "op": None, "kind": None, "in_step": int(steps.get((*c, step), 0))})
        if not parted:
            continue
        # the collective named: the majority's, or where the majority ran none here, the first extra one
        ref = here[next(c for c in everyone if c in here and c not in majority) if extra else majority[0]]
        return {"step": _step(seq, step), "index": int(index), "op": ref["op"], "kind": ref["kind"],
                "in_step": int(steps.get((*majority[0], step), 0)),
                "bytes": None if pd.isna(ref["bytes"]) else float(ref["bytes"]), "module": ref["module"],
                "majority": [{"rank": r, "device": d} for r, d in majority], "parted": parted, "extra": extra}
    return None


def _step(seq: pd.DataFrame, step) -> int | None:
    """A place's step as the output gives it: None where the traces hold no step marker (their -1), where -1
    is otherwise before a chip's first marker."""
    return int(step) if step >= 0 or seq["closed"].any() else None


def _waiting(seq: pd.DataFrame, mine: pd.DataFrame, programs: dict | None, rank: int) -> tuple[str | None, str | None]:
    """The collective a chip waits at: the one its program runs after its last completed one; else the one
    it ran after that one the time before (``own``); else, for a chip with none, the others' first."""
    if mine.empty:
        first = seq.sort_values(["step", "index"]).head(1)
        return (first["op"].iloc[0], "others") if len(first) else (None, None)
    last = mine.iloc[-1]
    listed = (programs or {}).get(rank, {}).get(last["module"])
    if listed:
        names = [i.name for i in listed]
        if last["op"] in names:
            return names[(names.index(last["op"]) + 1) % len(names)], "program"
    before = mine["position"].to_numpy()[(mine["op"] == last["op"]).to_numpy()][:-1]
    if before.size:
        return mine["op"].iloc[int(before[-1]) + 1], "own"
    return None, None


def _ended(seq: pd.DataFrame, chips: pd.DataFrame) -> np.ndarray:
    """Per chip (``chips``' order), whether its trace ends after its last collective: that one is in the chip's last
    marked step, whose marker closed, and no op of the chip runs on past that marker (``_chips``' ``reached``). A
    chip that did run on past it began another step, so it may be inside a collective of it (an op is written when
    it ends); traces with no step marker cannot say. Where it ends so, its trace cannot say either whether the chip
    waits at its program's next collective (the first op of a step not written) or has left the program."""
    last = seq.groupby(["rank", "device"], sort=False).tail(1)  # (a chip's collectives in its time order)
    last = last[last["closed"].to_numpy()]
    ends = chips.merge(last[["rank", "device", "step"]], on=["rank", "device"], how="left")
    return ((ends["step"] == ends["marked"]) & (ends["reached"] == ends["marked"])).to_numpy()


def chip_parts(events: pd.DataFrame) -> tuple[collectives.ChipInstances, pd.Series, pd.DataFrame]:
    """What ``parting`` reads of one shard's events (``parting_traces``): its chips' collective instances
    (``collectives.chip_instances``), its programs' modules (``_modules``) and its chips (rank, device)."""
    return collectives.chip_instances(events), _modules(events), _chips(events)


def parting(events: pd.DataFrame, programs: dict[int, Path] | None = None) -> tuple[pd.DataFrame, dict | None]:
    """Per chip (``CHIP_COLUMNS``): completed collectives, its last one, and the one it waits at (from its
    program, else from the others); and ``first_parting`` (with ``programs``, each parted rank's program
    against the majority's: ``programs: {rank: {lacks, adds, majority_count, count}}``). ``programs``:
    each rank's XLA dump folder."""
    return parting_of(sequences(events), _chips(events), programs)


def parting_of(seq: pd.DataFrame, chips: pd.DataFrame, programs: dict[int, Path] | None = None,
               status: str | None = None) -> tuple[pd.DataFrame, dict | None]:
    """``parting`` from the chips' ``sequences`` and the chips (rank, device) with device ops, sorted; ``status``: the
    trial's in its run's trials.jsonl (None: no record), where ``ok`` no chip waits (``waiting_at`` and
    ``waiting_from`` None)."""
    listed = {rank: program_collectives(folder) for rank, folder in (programs or {}).items()}
    rows = []
    for rank, device in zip(chips["rank"], chips["device"]):
        mine = seq[(seq["rank"] == rank) & (seq["device"] == device)]
        at, source = _waiting(seq, mine, listed, int(rank))
        rows.append({"rank": int(rank), "device": int(device), "completed": len(mine),
                     "last_step": _step(seq, mine["step"].iloc[-1]) if len(mine) else None,
                     "last_op": mine["op"].iloc[-1] if len(mine) else None,
                     "last_kind": mine["kind"].iloc[-1] if len(mine) else None,
                     "waiting_at": at, "waiting_from": source})
    first = first_parting(seq, chips)
    if status == "ok":  # the trial ended: its traces' last ops, an eval or copy program's, wait at nothing
        for row in rows:
            row["waiting_at"], row["waiting_from"] = None, None
    else:  # a trace that shows its chip begun on no other collective names no wait: it may have left its program
        for row, done in zip(rows, _ended(seq, chips).tolist()):
            if done:
                row["waiting_at"], row["waiting_from"] = None, "ended"
    if first is None and listed:  # a hang at the place where they part: no chip completed it, their programs say it
        first = _waiting_parting(seq, pd.DataFrame(rows, columns=CHIP_COLUMNS), listed)
    if first is not None and listed:
        # the majority's program from its first rank with a dump of the module: one rank's missing dump hides no
        # other's; none where no majority rank has one, which the text says
        ref = next((c["rank"] for c in first["majority"] if first["module"] in listed.get(c["rank"], {})), None)
        first["program_rank"] = ref
        if ref is not None:
            base = listed[ref][first["module"]]
            first["program_count"] = len(base)  # what the collective's place counts against: the program's, a step's
            changes = {str(p["rank"]): _program_change(base, listed[p["rank"]][first["module"]]) for p in first["parted"]
                       if first["module"] in listed.get(p["rank"], {})}
            first["programs"] = {r: c for r, c in changes.items() if c["lacks"] or c["adds"]}
            # the parted ranks whose program is the majority's: they part where the others' do, not by their own
            first["majority_program"] = sorted(int(r) for r, c in changes.items() if not (c["lacks"] or c["adds"]))
            # a parted rank with no dump of the program is neither: its program is not known to be the majority's
            unknown = sorted(p["rank"] for p in first["parted"] if str(p["rank"]) not in changes)
            if unknown:
                first["program_unknown"] = unknown
    return pd.DataFrame(rows, columns=CHIP_COLUMNS), first


_HOW = {"extra collective": "ran an extra collective", "different collective": "ran a different collective",
        "not completed": "did not complete it in its trace"}
# a chip whose trace lacks the collective may be inside it: a rank that completed a receive from it proves it entered
_CUT_INSIDE = " (a profiler writes an op when it ends: a chip whose trace lacks it may be waiting inside it)"


def _cut_inside(first: dict) -> str:
    """The clause on chips that did not complete the collective: each may be waiting inside it (``_CUT_INSIDE``), but
    not one whose rank's program lacks it there (``first["programs"]``): what that program has in its place."""
    cut = [p for p in first["parted"] if p["how"] == "not completed"]
    if not cut:
        return ""
    programs = first.get("programs") or {}
    elsewhere = {}  # rank -> what its program has in the collective's place
    for p in cut:
        change = programs.get(str(p["rank"]))
        lacked = next((c for c in (change or {}).get("lacks", []) if c["op"] == first["op"]), None)
        if lacked is not None:
            swapped = next((c for c in change["adds"] if c["index"] == lacked["index"]), None)
            other = f" with other {', '.join(swapped['attrs'])}" if swapped and "attrs" in swapped else ""
            elsewhere[p["rank"]] = (f"runs {swapped['op']} ({swapped['opcode']}){other} in its place" if swapped
                                    else "lacks it")
    if not elsewhere:
        return _CUT_INSIDE
    said = "; ".join(f"rank {rank}'s program {has}" for rank, has in sorted(elsewhere.items()))
    inside = [_chip_label(p["rank"], p["device"]) for p in cut if p["rank"] not in elsewhere]
    if not inside:
        return f" ({said}, so {'its chip is' if len(elsewhere) == 1 else 'their chips are'} not inside it)"
    chips = ", ".join(inside[:-1]) + " and " * (len(inside) > 1) + inside[-1]
    return (f" (a profiler writes an op when it ends: {chips}, whose trace{'s' * (len(inside) > 1)} lack"
            f"{'s' * (len(inside) == 1)} it, may be waiting inside it; {said})")


def _waiting_parting(seq: pd.DataFrame, waits: pd.DataFrame, listed: dict) -> dict | None:
    """Where chips whose traces agree wait at collectives of other kinds, shapes or peers (their programs' next, as
    ``_waiting`` reads them): the place after the collectives they completed, ``first_parting``'s fields with
    ``waiting`` (no chip completed it, so the majority's is the collective its chips wait at); None where every
    chip waits at one alike, or a chip's wait is not from its program."""
    if seq.empty or not (waits["waiting_from"] == "program").all():
        return None
    last = seq.sort_values(["step", "index"]).iloc[-1]  # the traces agree: every chip's last is at this place
    module = last["module"]
    signature, at = {}, {}
    for w in waits.itertuples():
        program = {i.name: i for i in listed.get(w.rank, {}).get(module, [])}
        if w.waiting_at not in program:
            return None
        opcode, shape, attrs = _kind(program[w.waiting_at])
        signature[(w.rank, w.device)] = (opcode.removesuffix("-start"), shape, attrs)
        at[(w.rank, w.device)] = w.waiting_at
    counts = pd.Series(list(signature.values()), dtype=object).value_counts(sort=True)
    if len(counts) == 1:
        return None
    top = counts.index[0]
    majority = [c for c, sig in signature.items() if sig == top]
    in_step = int(last["index"]) + 1
    return {"step": _step(seq, last["step"]), "index": in_step, "op": at[majority[0]], "kind": top[0],
            "in_step": in_step, "bytes": None,
            "module": module, "majority": [{"rank": int(r), "device": int(d)} for r, d in majority],
            "parted": [{"rank": int(r), "device": int(d), "how": "different collective", "op": at[(r, d)],
                        "kind": sig[0], "in_step": in_step} for (r, d), sig in signature.items() if sig != top],
            "extra": False, "waiting": True}


def describe(first: dict | None, chips: pd.DataFrame | None = None, status: str | None = None) -> str:
    """The first parting in one sentence (the tail's text and the hung trial's report); ``chips``:
    ``parting``'s, to say when there were no collectives at all and where the chips wait; ``status``: the trial's in
    its run's trials.jsonl (None: no record): ``hung``, the chips wait; ``ok``, none does; else nothing says whether
    they hung, and their waits are said as where each would wait if they did."""
    if first is None and chips is not None and not chips["completed"].any():
        return "no collectives in these traces: nothing to compare across chips"
    text = _agreed(chips) if first is None else _parted(first, status)
    if status == "ok" and chips is not None:  # the trial's outcome first, then where its chips' collectives part
        return (f"the trial ended ok per trials.jsonl and its chips' traces end after {_counts(chips)}: none is "
                f"waiting at one; {'yet ' * (first is not None)}{text}")
    if first is None and status != "hung" and chips is not None:
        text += _if_hung(chips, status)
    if chips is not None and (first is not None or not (chips["waiting_from"] == "ended").all()):
        text += _ended_early(chips)
    return text


def _ended_early(chips: pd.DataFrame) -> str:
    """The clause on chips whose trace ends after their last collective (``ended``) beside chips that wait, or where
    the chips part: what their traces show, and that they cannot show whether the chip waits or left its program."""
    ended = chips[(chips["waiting_from"] == "ended").to_numpy()]
    if ended.empty:
        return ""
    said = "; ".join(f"{_chip_label(c.rank, c.device)}'s trace ends after its last collective ({c.last_op}, step "
                     f"{int(c.last_step)}) with no later op" for c in ended.itertuples())
    if len(ended) == 1:
        return (f"; {said}, its step's marker closed: that trace cannot say whether the chip waits at its program's "
                "next collective or has left the program")
    return (f"; {said}, each in a step whose marker closed: those traces cannot say whether each chip waits at its "
            "program's next collective or has left the program")


def _agreed(chips: pd.DataFrame | None) -> str:
    """``describe``'s sentence for chips whose collectives agree."""
    agree = "the chips' collectives agree: no chip parts from the others in the traced sequence"
    if chips is not None and (chips["waiting_from"] == "ended").all():
        # (traces that agree: every chip completed as many, the last at one place)
        return (f"{agree}, and every chip's trace ends after its last collective ({chips['completed'].iloc[0]} "
                f"completed each, the last in step {chips['last_step'].iloc[0]}, whose marker closed with no op after "
                "it): none is waiting at one")
    return agree


def _counts(chips: pd.DataFrame) -> str:
    """How many collectives the chips' traces hold: "6 collectives each", else each chip's, in order."""
    n = chips["completed"].tolist()
    if len(set(n)) == 1:
        return f"{n[0]} collective{'s' * (n[0] != 1)} each"
    return f"{', '.join(map(str, n[:-1]))} and {n[-1]} collectives (by rank and device)"


def _if_hung(chips: pd.DataFrame, status: str | None) -> str:
    """The clause on agreeing chips' waits where nothing says they hung (``describe``'s ``status``): where each would
    wait if they did; none where no chip has a wait."""
    waiting = chips[chips["waiting_at"].notna()]
    if waiting.empty:
        return ""
    why = f"trials.jsonl records the trial as {status}" if status else "no trials.jsonl records their trial"
    lasts, waits = set(chips["last_op"].dropna()), set(waiting["waiting_at"])
    each = "each" if len(waiting) == len(chips) else ", ".join(map(_chip_label, waiting["rank"], waiting["device"]))
    said = (f"the last collective each completed is {lasts.pop()}; if they hung, each would wait at {waits.pop()}"
            if len(lasts) == 1 and len(waits) == 1 and len(waiting) == len(chips) else
            f"if they did, {each} would wait at the collective after the last it completed (its program's next, else "
            "the one it ran after that one the time before)")
    return f"; nothing here says whether the chips hung ({why}): {said}"


def _parted(first: dict, status: str | None) -> str:
    """``describe``'s sentence for chips that part at ``first``; ``status``: ``hung``, the chips that part where none
    completed a collective (``waiting``) wait there, else they would if they hung; ``ok``, a chip whose trace lacks a
    collective is not waiting inside it."""
    hung = status == "hung"
    # (a chip's collective by its kind too where its name is the majority's: NCCL runs several kinds in kernels of
    # one name)
    who = "; ".join(f"{_chip_label(p['rank'], p['device'])} {_HOW.get(p['how'], p['how'])}"
                    + (f" ({p['op']}, {p['kind']})" if p["op"] == first["op"] and p.get("kind") and not first["extra"]
                       else f" ({p['op']})" if p["op"] else "")
                    + f", {p['in_step']} collective{'' if p['in_step'] == 1 else 's'} there against {first['in_step']}"
                    for p in first["parted"])
    who += _cut_inside(first) * (status != "ok")
    majority = ", ".join(_chip_label(c["rank"], c["device"]) for c in first["majority"])
    step, n = first["step"], first["index"] + 1
    where = (f"collective {n} of the traces (they hold no step marker)" if step is None
             else f"step {step}, collective {n} there" if step >= 0
             else f"before the first step marker, collective {n} there")
    if first.get("waiting"):  # none completed it: where each waits, from its program
        waits = "; ".join(f"{_chip_label(p['rank'], p['device'])} {'waits' if hung else 'would wait'} at another "
                          f"collective ({p['op']})" for p in first["parted"])
        wait = "they wait" if hung else "they would wait if they hung, which nothing here says"
        text = (f"chips part at {where}, where {wait} (no chip completed it; their programs name it): "
                f"{first['op']} ({first['kind']}) on {majority}; {waits}")
    elif first.get("extra"):  # (summaries from before it have no "extra")
        text = f"chips part at {where}: {majority} ran none and went on; {who}"
    else:
        text = f"chips part at {where}: {first['op']} ({first['kind']}) on {majority}; {who}"
    # the program compared against: the majority's, or where one chip alone got farthest (the others hung before
    # it), that rank's, named
    chips_seen = len(first["majority"]) + len(first["parted"])
    compared = first.get("program_rank", first["majority"][0]["rank"])  # (summaries from before it: the first's)
    theirs_is = "the majority's" if 2 * len(first["majority"]) > chips_seen else f"rank {compared}'s"
    for rank, change in (first.get("programs") or {}).items():
        # a collective added where one is lacked, at one place: the rank runs another collective there
        swapped = {c["index"]: c for c in change["adds"]}
        swapped = {c["index"]: swapped[c["index"]] for c in change["lacks"] if c["index"] in swapped}
        place = {c["op"]: f"{c['op']} (collective {c['index'] + 1} of {change['majority_count']})"
                 for c in change["lacks"]}
        runs = ", ".join(_in_place(swapped[c["index"]], c, place[c["op"]], theirs_is)
                         for c in change["lacks"] if c["index"] in swapped)
        lacks = ", ".join(place[c["op"]] for c in change["lacks"] if c["index"] not in swapped)
        adds = ", ".join(c["op"] for c in change["adds"] if c["index"] not in swapped)
        mine, theirs = change["count"], change["majority_count"]
        has = (f"as many collectives as {theirs_is} ({mine}), but" if mine == theirs
               else f"{mine} collectives where {theirs_is} has {theirs}:")
        text += (f". Rank {rank}'s program has {has} " + "; ".join(
            ([f"it runs {runs}"] if runs else []) + ([f"it lacks {lacks}"] if lacks else [])
            + ([f"it adds {adds}"] if adds else [])))
        earliest, what = min([(c["index"], "lacks") for c in change["lacks"]]
                             + [(c["index"], "adds") for c in change["adds"]], default=(first["index"], ""))
        what = "where it runs another" if earliest in swapped else f"the first it {what}"
        if earliest < first["index"]:  # the traces pair the chips' collectives in order, by count
            text += (f"; so the chips first differ at collective {earliest + 1}, {what} (the "
                     f"traces, paired in order, part only at {first['index'] + 1})")
    same = first.get("majority_program") if first.get("programs") else None
    if same:  # (the traces list them among the parted; the programs say whose program parts them)
        odd = sorted(map(int, first["programs"]))
        text += (f". Rank{'s' if len(same) > 1 else ''} {', '.join(map(str, same))} run{'' if len(same) > 1 else 's'} "
                 f"{theirs_is} program: rank{'s' if len(odd) > 1 else ''} {', '.join(map(str, odd))}'s "
                 f"differ{'' if len(odd) > 1 else 's'}")
    if first.get("programs") is not None and first.get("program_unknown"):
        unknown = first["program_unknown"]
        text += (f"; rank{'s' * (len(unknown) > 1)} {', '.join(map(str, unknown))}'s program is unknown (no dump of "
                 f"{first['module']} beside {'their traces' if len(unknown) > 1 else 'its trace'})")
    return text + _program_read(first)


def _program_read(first: dict) -> str:
    """The clause on whose program the parted ranks' were compared with, where that is not the majority's first
    chip's rank's (whose dump is missing): that rank's; or, where no majority rank has a dump of the module, that the
    programs were not compared."""
    if "program_rank" not in first:  # no dumps given, or a summary from before it
        return ""
    ranks = list(dict.fromkeys(c["rank"] for c in first["majority"]))
    if first["program_rank"] is None:
        who = (f"no rank of the majority (ranks {', '.join(map(str, ranks))}) has" if len(ranks) > 1
               else f"rank {ranks[0]} has no")
        return f". Programs not compared: {who} a dump of {first['module']} beside its trace"
    missing = ranks[:ranks.index(first["program_rank"])]
    if not missing:
        return ""
    return (f"; the program compared with is rank {first['program_rank']}'s (rank"
            f"{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} {'have' if len(missing) > 1 else 'has'} no "
            f"dump of {first['module']} beside {'their traces' if len(missing) > 1 else 'its trace'})")


def _in_place(added: dict, lacked: dict, place: str, theirs_is: str) -> str:
    """What a rank's program runs at the place of the collective it lacks (``place``: that one and where it is):
    another collective, or where both have one opcode, that collective with the attributes that tell them apart."""
    if "attrs" not in added:
        return f"{added['op']} ({added['opcode']}) in place of {place}"
    mine, theirs = (", ".join(f"{k}={v}" if v is not None else f"no {k}" for k, v in c["attrs"].items())
                    for c in (added, lacked))
    return f"{added['op']} ({added['opcode']}, {mine}) in place of {place}, {theirs} in {theirs_is}"


def dumps_beside(paths: list[str | Path]) -> dict[int, Path]:
    """Each rank's XLA dump folder where the traces are a run's ``rank<R>/trace`` folders, its ``rank<R>``
    folders or a trial's folder holding them (``rank<R>/xla_dump`` beside the traces, with dumps); empty
    otherwise."""
    found = {}
    for p in map(Path, paths):
        for rank_dir in [p, p.parent, *rank_dirs(p)]:
            m = re.fullmatch(r"rank(\d+)", rank_dir.name)
            if m and any((rank_dir / "xla_dump").glob("*after_optimizations.txt")):
                found[int(m.group(1))] = rank_dir / "xla_dump"
    return found


def parting_traces(paths: list[str | Path], programs: dict[int, Path] | None = None) -> tuple[pd.DataFrame, dict | None]:
    """``parting`` of the traces at ``paths``, with ``programs`` or else the dumps beside them
    (``parting_of_shards``)."""
    return parting_of_shards(shards.analysed(list(paths), chip_parts, EVENT_COLUMNS), paths, programs)


def parting_of_shards(done: shards.Combined, paths: list[str | Path], programs: dict[int, Path] | None = None,
                      status: str | None = None) -> tuple[pd.DataFrame, dict | None]:
    """``parting`` of the traces at ``paths`` from their shards' ``chip_parts`` (``perfkit.trace.shards``):
    the chips' instances matched across chips on one clock as ``collectives.instances`` matches them; with
    ``programs`` or else the dumps beside the traces; ``status`` as ``parting_of``'s."""
    inst = shards.matched([(found, shift) for (found, _, _), shift in zip(done.results, done.shifts)], done)
    modules = pd.concat([m for _, m, _ in done.results])
    chips = pd.concat([c for _, _, c in done.results]).sort_values(["rank", "device"], ignore_index=True)
    done.results.clear()  # the shards' instances, matched: freed before the sequences are built
    seq = _sequenced(inst, modules[~modules.index.duplicated()])  # a program's module: its first op's, in file order
    return parting_of(seq, chips, programs if programs else dumps_beside(paths), status)


def _hung_step(trial: dict) -> tuple[int, bool] | None:
    """(the first step a rank of a hung trial did not finish, whether every rank finished as many) from its records;
    None where no rank recorded its steps."""
    ranks = trial.get("ranks", [])
    done = [r["steps_done"] for r in ranks if r.get("steps_done") is not None]
    if not done:
        return None
    return min(done), len(done) == len(ranks) and min(done) == max(done)  # (every rank's record)


def _traces_end_before_hang(trial: dict, marks: pd.DataFrame) -> tuple[int, int, bool] | None:
    """(the last step the traces mark, the first step a rank did not finish, whether every rank finished as many)
    where a hung trial's traces end before that step (a profiler stopped before the hang): they then cannot show
    where the chips part. ``marks``: ``_chips``' ``marked`` and ``reached``, of traces with a step marker (those with
    none say no step, ``_unmarked``). The traces reach it where a chip's ops run in it (a profile cut by a timer
    inside the hung step)."""
    hung = _hung_step(trial)
    if hung is None:
        return None
    last, ends = int(marks["marked"].max()), int(marks["reached"].max())
    return None if ends >= hung[0] else (last, *hung)


def _unmarked(trial: dict) -> str:
    """What a hung trial's traces with no step marker cannot say, where its records name the step it hung in."""
    hung = _hung_step(trial)
    if hung is None:
        return ""
    step, alike = hung
    at = ("the hang, which came before any rank had finished a step" if alike and step == 0 else
          f"the hang, which came after every rank had finished step {step - 1}" if alike else
          f"the hang at step {step} (the first step a rank did not finish)")
    return (f"; these traces hold no step marker, so they cannot say whether they reach {at}: where they end before "
            "it, each rank's stack dump says where it waits")


def run_hangs(run_dir: Path, trials: list[dict]) -> dict | None:
    """summary.json's ``hangs``: per hung trial with traces (by its folder), ``{chips: [<CHIP_COLUMNS>],
    parting: first_parting or null, text}`` (with ``last_traced_step`` and ``hung_step`` where its traces end
    before the step it hung in, ``_traces_end_before_hang``) or ``{error}``; None without such a trial."""
    out = {}
    for t in trials:
        folder = Path(run_dir) / t["dir"]
        paths = [r / "trace" for r in rank_dirs(folder) if (r / "trace").exists()]
        if t["status"] != "hung" or not any(any(p.rglob("*.xplane.pb")) or any(p.rglob("*.json*")) for p in paths):
            continue
        try:
            with notes_left_out():
                done = shards.analysed(paths, chip_parts, EVENT_COLUMNS)
                marks = pd.concat([c for *_, c in done.results])  # (the parting frees the shards' results)
                chips, first = parting_of_shards(done, paths)
        except BadInput as exc:
            out[t["dir"]] = {"error": exc.line()}
            continue
        hang = {"chips": json.loads(chips.to_json(orient="records")), "parting": first,
                "text": describe(first, chips, t["status"])}
        # traces with no step marker are read as they are, as tail reads them: not by the record's traced steps, which
        # lists only the steps that finished under the profiler (a profile running when it hung would end before it)
        if not len(marks) or marks["marked"].max() < 0:
            hang["text"] += _unmarked(t)
        elif (before := _traces_end_before_hang(t, marks)) is not None:
            traced_to, hung, alike = before
            # every rank as far: it hung past its last step (its teardown, or a step it never began), no step to name
            ends = (f"the traces end at step {traced_to}, before the hang, which came after every rank had finished "
                    f"step {hung - 1}" if alike else f"the traces end at step {traced_to}, before the hang at step "
                    f"{hung} (the first step a rank did not finish)")
            # past every step no trace reaches: the stack dumps alone say where (its teardown, say)
            reach = "" if alike else (f" (a trace would have to reach step {hung}, `capture.trace`, and be written "
                                      "before the ranks are ended)")
            # traces that agree, or hold no collective, say nothing of a later step; a parting in them still holds
            hang["text"] = (f"{ends}, so they cannot say where the chips part: each rank's stack dump says where it "
                            f"waits{reach}" if first is None else f"{hang['text']}; {ends}")
            hang.update(last_traced_step=traced_to, hung_step=hung)
        out[t["dir"]] = hang
    return out or None
