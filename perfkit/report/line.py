"""The one line ``perfkit run`` prints at the end of a run (and ``perfkit check`` repeats): each
variant's step time, B/A with its CI and verdict, PSNR, divergent ranks, failures, and the report's path.

The step times it shows are the ones the ratio divides: each variant's median of per-trial medians
(``perfkit.analysis.stats.compare``), not the median of all steps pooled, which weighs long trials more
and need not divide to the ratio."""

from __future__ import annotations

import math
from pathlib import Path

from perfkit.common.comparison import (aa_called, compared_variant, inside_noise_floor, noise_range,
                                       one_trial_call, trial_median, unreadable_text, without_ci)
from perfkit.common.digits import digits
from perfkit.common.json_figures import from_json
from perfkit.hlo.render import ranks_text
from perfkit.report.serving import headline
from perfkit.rundata.exits import at_exit, crash_reason


def _differ(ranks: list[int]) -> str:
    """``rank 3 differs``, ``ranks 1-3 differ``; ``programs differ`` where no rank compiled another program (a
    module with collectives missing on some ranks)."""
    return "programs differ" if not ranks else f"{ranks_text(ranks)} differ{'s' if len(ranks) == 1 else ''}"


def rounds_run(summary: dict) -> int:
    """The rounds a run ran (its variants' most trials): twice that in ``repeats.max`` asks for more."""
    return max(v["trials"] for v in summary["variants"].values())


def multi_host(summary: dict) -> bool:
    """Whether the run's ranks ran on several hosts (``perfkit run --hosts``)."""
    return ((summary.get("env") or {}).get("hosts") or {}).get("count", 1) > 1


def more_rounds(summary: dict) -> str:
    """The ``--set`` that asks a run's case again for twice its rounds: ``repeats.max`` where rounds go on while
    the verdict is unknown; ``repeats.min`` on several hosts, which run that many rounds and no more (with
    ``repeats.max`` as high: a case refuses a minimum above its maximum, and such a run reads no other); a serve
    case's server processes a variant, its rounds."""
    if summary.get("serve"):
        return f"--set serve.server_restarts={2 * summary['serve']['server_restarts']}"
    n = 2 * rounds_run(summary)
    return f"--set repeats.min={n} --set repeats.max={n}" if multi_host(summary) else f"--set repeats.max={n}"


def hung_at_timeout(summary: dict, variants: list[str] | None = None) -> tuple[str, str | None] | None:
    """Where trials of a model or command case hung: ``("3 of 4 trials hung at the 30 s timeout", "--set
    timeout=60")``, the ``--set`` giving them twice the timeout they ran past; None where none hung. Not more
    rounds: a trial that hangs adds no figure, whether its ranks were stuck or slow (a start under load), and each
    costs the timeout again. Where every hung trial is a named deadlock (``deadlocked``) no longer timeout ends them:
    the second is None. ``variants``: those variants' trials alone, named where they hung (``2 of b's 2 trials
    hung ...``)."""
    failed = [t for t in summary["trials"]["failed"] if variants is None or t["variant"] in variants]
    hung = [t for t in failed if t["status"] == "hung"]
    if not hung or summary.get("serve"):
        return None
    timeout = summary["trials"].get("timeout_s")  # absent in older summaries
    hung_in = [v for v in variants or () if any(t["variant"] == v for t in hung)]
    ran = sum(summary["variants"][v].get("trials", 0) for v in hung_in)
    of = (f"{summary['trials']['total']} trials" if variants is None
          else f"{' and '.join(hung_in)}'s {ran} trial{'s' * (ran != 1)}")
    said = f"{len(hung)} of {of} hung at the {f'{timeout:g} s ' if timeout else ''}timeout"
    stuck = sum(deadlocked(summary, t) for t in hung)
    if stuck == len(hung):
        return said, None
    said += f" ({stuck} of them where the chips part: a deadlock)" if stuck else ""
    return said, f"--set timeout={2 * timeout:g}" if timeout else "a longer `timeout`"


def timeout_advice(hangs: tuple[str, str | None]) -> str:
    """``hung_at_timeout``'s figures as the line says them: the longer timeout, for ranks that were slow, or where
    every hung trial's chips part (a deadlock), that no timeout ends it."""
    said, longer = hangs
    return (f"{said}: where their ranks were slow, not stuck, {longer}" if longer else
            f"{said}, where the chips part: a deadlock, which a longer timeout would not end")


# how a chip parts from the others that no wait ends: it ran another collective than theirs, or none where they did
_STUCK = {"skipped", "different collective", "extra collective"}


def deadlocked(summary: dict, trial: dict) -> bool:
    """Whether a hung trial's chips are named waiting where the others never come: its traces show a chip part at
    another collective than the others' (``_STUCK``; or, none completed, waiting at collectives of other kinds), or
    its ranks' programs differ in a collective (the parting's programs, else hlo-diff's first). A chip whose trace
    lacks a collective the others completed may be inside it, slow: that alone names no deadlock."""
    parting = ((summary.get("hangs") or {}).get(trial["dir"]) or {}).get("parting") or {}
    return bool(parting.get("waiting") or parting.get("programs")
                or any(p["how"] in _STUCK for p in parting.get("parted", ()))
                or first_collective((summary.get("ranks") or {}).get(trial["variant"])))


def step_times_text(va: float, *vs: float) -> tuple[str, ...]:
    """A's step time and each other's as text, with as many decimals as it takes each to divide to its / A's
    ratio shown to 3."""
    n = digits([(va, v) for v in vs])
    return tuple(f"{v:.{n}f}" for v in (va, *vs))


_HOW = {"skipped": "skipped", "not completed": "has no record in its trace of",
        "different collective": "ran {mine} where the others ran", "extra collective": "ran an extra"}


def parted(parting: dict) -> str:
    """Where a hang's chips part, short: ``rank 1 skipped ppermute.11 (collective 3 of 3 in step 0)``, counted
    against the majority's program, or without one, ``(collective 3 of 3 in rank 0's trace ...)``. Where a
    parted rank's program lacks or adds a collective at or before that place (the traces pair collectives in
    order, by count), the programs part the chips and the ranks that run the majority's wait on them: only
    that, ``rank 3's program lacks ppermute.10 (collective 2 of 3)``, ``rank 2's program runs psum.7 where the
    others' run ppermute.10 (collective 2 of 3)``."""
    step = (", in traces with no step marker" if parting["step"] is None else f" in step {parting['step']}"
            if parting["step"] >= 0 else ", before the first step marker")
    programs = {str(r): c for r, c in (parting.get("programs") or {}).items()}
    said, by_program = [], []
    counts = {c["majority_count"] for c in programs.values()}
    if parting.get("program_count") is not None:
        counts.add(parting["program_count"])
    # the step's collectives, where a program says; else as many as the majority's first chip's trace holds there (a
    # hung step's, cut short)
    of_step = (f" of {counts.pop()}" if len(counts) == 1 else
               f" of {parting['in_step']} in rank {parting['majority'][0]['rank']}'s trace")
    for p in parting["parted"]:
        change = programs.get(str(p["rank"])) or {}
        lacks, adds = change.get("lacks", ()), change.get("adds", ())
        index = min((c["index"] for c in (*lacks, *adds)), default=None)
        if index is not None and index <= parting["index"]:
            lacked = next((c["op"] for c in lacks if c["index"] == index), None)
            added = next((c["op"] for c in adds if c["index"] == index), None)
            n = change["majority_count"]
            # an added collective's index is in its own rank's program: placed against the others' collectives
            where = (f"collective {index + 1} of {n}" if lacked else f"before the others' collective {index + 1} of {n}"
                     if index < n else f"after the others' {n} collectives")
            attrs = next((c.get("attrs") for c in adds if c["index"] == index), None)
            how = (f"runs {added} with other {', '.join(attrs)} than the others'" if lacked and added and attrs
                   else f"runs {added} where the others' run {lacked}" if lacked and added
                   else f"lacks {lacked}" if lacked else f"adds {added}")
            by_program.append(f"rank {p['rank']}'s program {how} ({where}{step})")
            continue
        # the collective named is the majority's there, or where the majority ran none, the first extra one (of
        # no count of the majority's); a step the majority's program counts, else as far as its trace went
        of = "" if p["how"] == "extra collective" else of_step
        said.append(f"rank {p['rank']} {_HOW.get(p['how'], p['how']).format(mine=p['op'])} {parting['op']} "
                    f"(collective {parting['index'] + 1}{of}{step})")
    return ", ".join(dict.fromkeys(by_program or said))  # a rank's chips part alike: said once


def hung(summary: dict) -> list[str]:
    """Each variant with a hung trial, and where its first hung trial with traces parted (``skip hung: rank 1
    skipped ppermute.11 (collective 3 of 3 in step 0)``); where no trace shows a parting, the first collective its
    ranks' programs differ in (``first_collective``), else whether it hung at exit (every rank still running past
    its program, ``exits.at_exit``): the one line said only that trials failed."""
    out: dict[str, str] = {}
    hangs, ranks = summary.get("hangs") or {}, summary.get("ranks") or {}
    for t in summary["trials"]["failed"]:
        if t["status"] != "hung" or out.get(t["variant"]):  # a variant's first hung trial that says more, said
            continue
        hang = hangs.get(t["dir"]) or {}
        parting = hang.get("parting")
        running = [r for r in t["ranks"] if r.get("running_at_end")]
        if parting and parting.get("parted"):
            out[t["variant"]] = f"{t['variant']} hung: {parted(parting)}"
        elif differs := first_collective(ranks.get(t["variant"])):
            # no trace shows where its chips part: the programs' first differing collective is the lead
            reach = " (its traces end before the hang)" if "hung_step" in hang else ""
            out[t["variant"]] = f"{t['variant']} hung{reach}: {differs}"
        elif running and all(r.get("stacks") and at_exit(r["stacks"]) for r in running):
            out[t["variant"]] = f"{t['variant']} hung at exit (its ranks' programs had returned)"
        else:
            out[t["variant"]] = ""
    return [text or f"{name} hung" for name, text in out.items()]


def _op(shown: dict) -> str:
    """An instruction's name as hlo-diff shows it (``%all-reduce.5 = f32[8]{0} ...``): ``all-reduce.5``."""
    return shown["text"].split(" = ")[0].strip().removeprefix("ROOT ").lstrip("%")


def first_collective(check: dict | None) -> str | None:
    """The first collective a variant's divergent ranks' program differs in (summary.json's ``ranks.<variant>``, its
    hlo-diff's ``first_collective``): ``rank 3's program adds all-reduce.5 (its collective 2 of 3 in jit_step,
    hlo-diff)``; None where hlo-diff names none."""
    for module in ((check or {}).get("hlo_diff") or {}).get("modules", ()):
        for d in module["divergences"]:
            c = d.get("first_collective")
            if not c:
                continue
            if c["only_on"] == "rank":
                how = f"adds {_op(c['rank'])}"
            elif c["only_on"] == "majority":
                how = f"lacks {_op(c['majority'])}"
            else:
                how = f"runs {_op(c['rank'])} where the others' run {_op(c['majority'])}"
            side = "rank" if c["only_on"] == "rank" else "majority"  # the side whose collectives its index counts
            whose = "its" if side == "rank" else "the others'"
            return (f"{ranks_text(d['ranks'])}'s program {how} ({whose} collective {c['index']} of {c['count'][side]} "
                    f"in {module['name']}, the first collective the programs differ in: hlo-diff)")
    return None


def departed_at(taps: dict) -> str:
    """Where B's taps first depart from A's (summary.json's ``taps``): ``block1.attn at step 0``, or none."""
    first = taps["first"]
    return "none" if first is None else f"{first['name']} at step {first['step']}"


def _departure(summary: dict, a: str, b: str) -> str:
    """The first tap where B departs from A, where one does (a tap not bit-identical, where no arrays were kept to
    measure it, as such): the other half of why B differs, beside the PSNR; nothing where none departs."""
    taps = summary.get("taps")
    if not taps or "error" in taps or taps["first"] is None:
        return ""
    what = "first departure" if taps["first"]["departs"] else "first tap not bit-identical (no arrays kept)"
    return f"; {what} {b} vs {a} (taps): {departed_at(taps)}"


def _identical(quality: dict, taps: dict | None) -> str:
    """What bit-identical outputs are said to be, beside taps that are not: 8-bit frames hide float differences
    below their step (rounding), so "bit-identical" alone would contradict the taps."""
    rows = (taps or {}).get("rows") or []
    differ = sum(not r["bit_identical"] for r in rows)
    if not differ:
        return "bit-identical"
    what = "frames bit-identical (8-bit)" if quality.get("kind") == "frames" else "outputs bit-identical"
    return f"{what}; {differ} of {len(rows)} taps not bit-identical"


def _first_crash(failed: list) -> str:
    """The first crashed trial's reason, the exception (or last stderr line) of the rank that failed first
    (``crash_reason``): where every trial failed alike (a module missing, a typo in the command), the line says why
    without the report."""
    for t in failed:
        found = crash_reason(t)
        if found:
            rank, last = found
            reason = last if len(last) <= 160 else last[:159] + "…"
            return f" (first crash: trial {t['index']} ({t['variant']}) rank {rank}: {reason})"
    return ""


def _ci(comparison: dict) -> str:
    return "[no CI: one timed step]" if without_ci(comparison) else \
        f"[{comparison['ci'][0]:.3f}, {comparison['ci'][1]:.3f}]"


def summary_line(summary: dict, report: Path) -> str:
    c = summary["comparison"]
    a = summary["baseline"]
    b = compared_variant(summary)
    va, vb = trial_median(summary["variants"][a]), trial_median(summary["variants"][b])
    parts = [f"{summary['case']}:"]
    if summary.get("serve"):
        parts.append(f"c={summary['serve']['concurrency'][0]} latency")
    of = "server processes'" if summary.get("serve") else "trial"
    control = (summary.get("noise_floor") or {}).get("variant")
    ran = [n for n, v in summary["variants"].items() if v.get("trials", 1) and n != control]
    also = [o for o in summary.get("comparisons", ()) if o["variant"] not in (b, control) and o["ratio"] is not None
            and o["metric"] == c.get("metric")]  # a third variant's on the same figure: the report's timing table
    # every step time the line shows, with the decimals that divide to each ratio beside it
    others = {n: trial_median(summary["variants"][n]) for n in (b, *(o["variant"] for o in also))}
    others = {n: v for n, v in others.items() if v is not None}
    shown = dict(zip((a, *others), step_times_text(va, *others.values()))) if va is not None else {}
    if len(ran) == 1:  # --only, or a run stopped before the other variant's first trial: nothing to divide
        v = trial_median(summary["variants"][ran[0]])
        parts.append(f"{ran[0]} {v:.3f} ms (median of {of} medians)" if v is not None
                     else f"no timed steps for {ran[0]}")
        nf = summary.get("noise_floor") or {}
        if control and (summary["variants"].get(control) or {}).get("trials"):  # `--aa --only` the baseline
            aa = (f"{control}/{ran[0]} {nf['ratio']:.3f} {_ci(nf)}" if nf.get("ratio") is not None
                  else "no A/A ratio (a side has no timed steps)")
            parts.append(f"; no B/A ratio: only {ran[0]} and its A/A control {control} ran, {aa}")
        else:
            parts.append(f"; no ratio: only {ran[0]} ran")
    elif va is not None and vb is not None:
        verdict, serve = c["verdict"], summary.get("serve")
        if verdict == "unknown":
            aim = "give a CI" if without_ci(c) else "narrow it"
            more = more_rounds(summary)
            hangs = hung_at_timeout(summary)
            # a stopped run has rounds of its own plan left: asking for more would start that plan over
            verdict += f" (the rest of its plan may {aim}: --resume)" if summary.get("interrupted") else \
                f" ({timeout_advice(hangs)})" if hangs else \
                f" (more {'server restarts' if serve else 'rounds'} would {aim}: {more})"
        elif one_trial_call(c):
            verdict += " (one trial a side: it may not hold on another run)"
        parts.append(f"{a} {shown[a]} ms, {b} {shown[b]} ms (medians of {of} medians), {b}/{a} {c['ratio']:.3f} "
                     f"{_ci(c)} -> {verdict}")
    else:
        missing = [n for n, v in ((a, va), (b, vb)) if v is None]
        hangs = hung_at_timeout(summary, missing)  # (every trial of a variant hung: more rounds would hang alike)
        parts.append(f"no timed steps for {' and '.join(missing)} -> unknown"
                     + (f" ({timeout_advice(hangs)})" if hangs else ""))
    if summary.get("serve"):
        parts.append(headline(summary))
    if also:
        parts.append("; also " + ", ".join(f"{o['variant']} {shown[o['variant']]} ms, {o['variant']}/{a} "
                                           f"{o['ratio']:.3f} {_ci(o)} -> {o['verdict']}" for o in also))
    q = summary.get("quality")
    if q:
        # A summary read back from JSON holds infinite PSNR as "inf" (perfkit.common.json_figures.json_safe).
        db = from_json(q["psnr_db"])
        psnr = f"inf ({_identical(q, summary.get('taps'))})" if q["bit_identical"] else \
            "inf dB" if db == math.inf else f"{db:.1f} dB"
        parts.append(f"; PSNR {b} vs {a} {psnr}")
    if departure := _departure(summary, a, b):
        parts.append(departure)
    counts = [((summary["variants"][n].get("values") or {}).get("recompiles") or {}).get("median") for n in (a, b)]
    if None not in counts and counts[0] != counts[1]:  # torch.compile's recompiles (perfkit.adapters.torch_recompiles)
        parts.append(f"; recompiles (a trial's, median) {a} {counts[0]:g}, {b} {counts[1]:g}")
    nf = summary.get("noise_floor")
    if nf and nf["half_width"] is not None:
        inside = inside_noise_floor(summary)
        called = aa_called(summary)
        parts.append(f"; A/A noise floor {noise_range(nf)}"
                     + (f" (A/A itself {called}: no verdict of this run to be trusted)" if called else
                        f" ({b}/{a}'s {inside} inside it: not to be trusted alone)" if inside else ""))
    divergent = [f"{v} ({_differ(r.get('divergent_ranks') or [])})"
                 for v, r in (summary.get("ranks") or {}).items() if r.get("consistent") is False]
    if divergent:
        parts.append(f"; DIVERGENT programs: {', '.join(divergent)}")
    failed = summary["trials"]["failed"]
    if failed:
        parts.append(f"; {len(failed)} trial(s) failed{_first_crash(failed)}")
    parts += [f"; {hang}" for hang in hung(summary)]
    if unreadable := unreadable_text(summary):
        parts.append(f"; {unreadable}")
    if summary.get("interrupted"):
        parts.append("; interrupted")
    parts.append(f"; report {report}")
    return " ".join(parts).replace(" ;", ";")
