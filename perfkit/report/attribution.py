"""report.md's attribution tables: where each variant's change in mean step time per chip goes, by
category, op kind and op, with the bootstrap CI of each part (``summary["attribution"]``,
``perfkit.analysis.attribution``)."""

from __future__ import annotations

from perfkit.common.digits import shown_difference, signed_decimals
from perfkit.hlo.fingerprint import OWN
from perfkit.trace.names import IN_FLIGHT_MARK, IN_FLIGHT_NOTE, in_flight, labels

MARK = "**\\***"  # a part whose CI, as shown, excludes 0
# ms to the microsecond, as the CIs beside them: each delta the difference of the two figures shown (within a
# microsecond of B - A), where the decimals an exact delta takes would set six beside the category table's three
DECIMALS = 3
INTERVALS = {"welch": "Welch's t over each side's trial means",  # summary.json's attribution ``interval``
             "steps": "a bootstrap over trials, then steps (a side of one trial gives its steps' noise alone: no "
                      "spread of trials to measure)",
             "none": "a side has one traced step in all, so nothing measured its noise; more trials, or more steps "
                     "in `capture.trace`, give it one"}
SPLITS = (("category", "category"), ("kind", "op kind"), ("op", "op"))
NOT_NAMED = ("other", "idle", "residual")  # the changes of rows that sum or stand for ops, naming none


def _ms(v: float, decimals: int = DECIMALS) -> str:
    return f"{v + 0.0:+.{decimals}f}"  # + 0.0: a bound of -0.0 reads +0.000


def _ci(row: dict, decimals: int) -> str:
    """A row's CI as shown, ``no CI`` where none was had (``INTERVALS["none"]``)."""
    if row["ci_lo_ms"] is None or row["ci_hi_ms"] is None:
        return "no CI"
    return f"[{_ms(row['ci_lo_ms'], decimals)}, {_ms(row['ci_hi_ms'], decimals)}]"


def _decimals(row: dict) -> int:
    """A row's decimals: more than ``DECIMALS`` where its CI excludes 0 but its delta would read 0 or a CI bound
    -0.000 (a change of -0.0005 ms, CI [-0.0009, -0.0001], read +0.000 [-0.001, -0.000])."""
    bounds = [row[k] for k in ("ci_lo_ms", "ci_hi_ms") if row[k] is not None]
    return signed_decimals(lambda n: [(x, x) for x in bounds] + (
        [(row["b_ms"] - row["a_ms"], shown_difference(row["a_ms"], row["b_ms"], n))] if row["marked"] else []),
        at_least=DECIMALS)


def _table(rows: list[dict], by: str, title: str, baseline: str, name: str) -> list[str]:
    """One split's rows; a category's own category and change go unsaid, and its residual where it is 0 on both
    sides, as the breakdown's parts add up to the span (a newcomer read it beside the op kinds' residual, another
    figure)."""
    about = by != "category"
    # the mark of an op of B's own read with B's name, as the text around it names the variants
    rows = [{**r, "key": r["key"].replace(OWN, f"({name}'s own)")} for r in rows]
    short = labels(r["key"] for r in rows)  # kernel and HLO names shortened; summary.json keeps them whole
    if not about:
        rows = [r for r in rows if r["change"] != "residual" or r["a_ms"] or r["b_ms"]]
    out = ["", f"By {title}:", "", f"| {title} | " + ("category | change | " if about else "")
           + f"{baseline} (ms) | {name} (ms) | delta (ms) | 95% CI (ms) | |",
           "| --- | " + ("--- | --- | " if about else "") + "---: | ---: | ---: | ---: | --- |"]
    for r in rows:
        named = about and r["change"] not in NOT_NAMED
        key = f"`{short[r['key']]}`" if named else _other(r, title) if "other_keys" in r else r["key"]
        key += f" {IN_FLIGHT_MARK}" if named and in_flight(r["key"]) else ""
        n = _decimals(r)
        out.append(f"| {key} | " + (f"{r['category'] or '-'} | {r['change']} | " if about else "")
                   + f"{r['a_ms']:.{n}f} | {r['b_ms']:.{n}f} | {_ms(shown_difference(r['a_ms'], r['b_ms'], n), n)} | "
                   f"{_ci(r, n)} | {MARK if _shown_apart(r, n) else ''} |")
    if about and any(in_flight(r["key"]) for r in rows if r["change"] not in NOT_NAMED):
        out += ["", IN_FLIGHT_NOTE + "the residual takes it back."]
    return out


def _places(placed: dict[str, list[int]], base: str, name: str) -> str:
    """The sentence on ops keyed by their program's place: several programs of one name in a step, each with ops
    XLA numbers apart (8 layers each jitted as ``jit_f``)."""
    counts = ", ".join(f"`{m}`: {a} in {base}'s step, {b} in {name}'s" for m, (a, b) in placed.items())
    m = next(iter(placed))
    return (f"**Several programs of one name** ran in a step ({counts}): XLA names ops per program, so an op is "
            f"named here with its program's place among them, the order they start in a step (`({m} #2)`: of the "
            f"second `{m}` to start), and matched across sides by that place, not summed with the ops of its name in "
            "the others.")


def _other(row: dict, title: str) -> str:
    """``other (7 ops: 1 added, 6 changed)``: what the row sums."""
    counts = row["other_keys"]
    n = sum(counts.values())
    noun = title.split()[-1] + ("" if n == 1 else "s")
    return f"other ({n} {noun}: " + ", ".join(f"{k} {c}" for c, k in counts.items()) + ")"


def starred(row: dict) -> bool:
    """Whether a part's row is starred in the tables: its CI, as shown, excludes 0."""
    return _shown_apart(row, _decimals(row))


def _shown_apart(row: dict, decimals: int) -> bool:
    """Whether a part's CI excludes 0 as the table shows it (one that does only below its last decimal: unmarked,
    as [+0.000, +0.000] would read)."""
    return row["marked"] and (float(_ms(row["ci_lo_ms"], decimals)) > 0 or float(_ms(row["ci_hi_ms"], decimals)) < 0)


def section(attribution: dict | None, aa_name: str | None = None, command: bool = True) -> list[str]:
    """The attribution's Markdown lines (none without it): per variant, the total change and its CI, then
    a table per split, parts by |delta|, those whose CI excludes 0 marked; for the A/A control, how many
    rows were marked against how many chance allows; with ``command``, the command that prints them."""
    if not attribution:
        return []
    if "error" in attribution:
        return ["", f"Attribution of the change: {attribution['error']}"]
    base = attribution["baseline"]
    control = attribution["variants"].get(aa_name) or {}
    over = control.get("marked") if "error" not in control else None
    over = over if over and over["marked"] > over["chance_allows"] else None
    out = []
    for name, v in attribution["variants"].items():
        if "error" in v:
            out += ["", f"Attribution of {name} against {base}: {v['error']}"]
            continue
        t = v["total"]
        n = _decimals(t)
        change = _ms(shown_difference(t["a_ms"], t["b_ms"], n), n)
        lead, ops = _measured(v.get("measured"), base, name)
        out += ["", f"### Where {name}'s {change} ms a step goes",
                "", f"{lead}: {base} {t['a_ms']:.{n}f} ms, "
                f"{name} {t['b_ms']:.{n}f} ms, "
                f"change {change} ms {_ci(t, n)} ({'' if t['ci_lo_ms'] is None else '95% CI, '}"
                f"{INTERVALS.get(v.get('interval'), 'a bootstrap over trials, then steps')}: {v['trials'][0]} and "
                f"{v['trials'][1]} trials, {v['chip_steps'][0]} and {v['chip_steps'][1]} chip-steps). Each split "
                "adds up to the change before rounding (its rows as shown may sum to a last digit or so apart): "
                f"the top {attribution['top']} ops or kinds by |delta|, `other` the rest (how "
                "many, and how they changed), `residual` the busy time less the ops' exclusive times (below 0 where "
                "ops run at once on several lines, each counting its own time; "
                "above 0 where ops reach outside the step); each change is the difference of the two figures shown "
                f"(summary.json and the notebook frames keep them unrounded); {MARK}: the part's CI, as shown, "
                "excludes 0; added / "
                "removed: on one side only (its CI cut at 0: the change has that sign); an op is matched across "
                "sides by its name, which is one op only where both ran the same program (XLA numbers its ops per "
                "program)."
                + (" `perfkit trace attribution RUN_DIR` prints the same." if command else "")]
        if any(v.get("outside_ops", ())):  # (summaries from before it)
            (a_ops, b_ops), (a_ms, b_ms) = v["outside_ops"], v["outside_ms"]
            out += ["", f"Not in these figures: {ops} outside every traced step's span, {base} {a_ops} "
                    f"({a_ms:.3f} ms), {name} {b_ops} ({b_ms:.3f} ms) over their trials; `perfkit trace breakdown "
                    "--window trace` on a trial's `rank*/trace` folders measures them."]
        if name == aa_name and v.get("interval") == "none":  # (no CI excludes 0 where none was had: no test passed)
            out += ["", "A/A control: no CI (one traced step on a side), so the machine's noise was not tested."]
        elif name == aa_name:
            m = v["marked"]
            out += ["", f"A/A control: {m['marked']} of {m['rows']} parts have a CI excluding 0 (before rounding; the "
                    "tables star only those whose interval, as printed, still excludes 0); chance allows up to "
                    f"{m['chance_allows']} (95% binomial quantile of {m['rows']} intervals at 95%)."]
        elif over:
            out += ["", f"**Marks here are not to be trusted on this machine**: the A/A control ({aa_name} against "
                    f"{base}, the same program) had {over['marked']} of {over['rows']} parts with a CI excluding 0 "
                    f"where chance allows up to {over['chance_allows']}, so these intervals are narrower than the "
                    "machine's noise."]
        elif (not control and 0 < (m := v.get("marked") or {}).get("marked", 0) <= m["chance_allows"]
              and not any(r["marked"] and r["change"] in ("added", "removed") for by, _ in SPLITS for r in v[by])):
            # (no A/A control ran: how many marks chance gives is all a reader has to weigh one star by; an op on
            # one side only is there whatever its interval)
            out += ["", f"{m['marked']} of {m['rows']} parts have a CI excluding 0, no more than chance marks where "
                    f"nothing changed (up to {m['chance_allows']}, the 95% binomial quantile of {m['rows']} intervals "
                    "at 95%): a starred part may be chance; an A/A control (`perfkit run --aa`) measures this "
                    "machine's noise."]
        for by, title in SPLITS:
            if by == "op" and v.get("same_programs") is False and v.get("ops_renamed") == 0:
                out += ["", f"**{base} and {name} ran different programs**, which XLA numbers apart: the ops of "
                        f"{name}'s step program that align with {base}'s, by their place and structure, carry the "
                        f"same names already (none renamed); ops outside the step program are matched by name "
                        "(`perfkit hlo-diff` compares the programs)."]
            elif by == "op" and v.get("same_programs") is False and "ops_renamed" in v:
                # the mark said only where a row of the table carries it (one summed in other does not)
                own = any(r["key"].endswith(OWN) and r["change"] not in NOT_NAMED for r in v[by])
                out += ["", f"**{base} and {name} ran different programs**, which XLA numbers apart: an op of "
                        f"{name}'s step program is named here as {base}'s names the op it aligns with, by its place "
                        f"and structure ({v['ops_renamed']} renamed"
                        + (f"; one of {name}'s own that {base} gives another op is marked `({name}'s own)`" if own
                           else "") + "); ops outside the step program are matched by name (`perfkit hlo-diff` "
                        "compares the programs)."]
            elif by == "op" and v.get("same_programs") is False:  # (summaries from before ops_renamed)
                out += ["", f"**{base} and {name} ran different programs**: XLA names its ops per program, so an op "
                        "of one name on both sides need not be one op, and its `changed` row may set two ops' times "
                        "side by side (`perfkit hlo-diff` compares the programs); the category and op-kind splits "
                        "hold."]
            if by == "op" and v.get("programs_placed"):
                out += ["", _places(v["programs_placed"], base, name)]
            out += _table(v[by], by, title, base, name)
    return out


def _measured(measured: list[str] | None, base: str, name: str) -> tuple[str, str]:
    """The total's lead and the ops it sums, in words, by what each side's traces measured (summary.json's
    ``measured``; device ops in summaries from before it): a torch CPU run's traces hold host ops alone."""
    host = [side for side, m in zip((base, name), measured or ()) if m == "host ops"]
    if not host:
        return "Mean traced device step per chip", "device ops"
    if len(host) == 2:
        return ("Mean traced host step per chip (the traces hold no device events: their host ops stand in for the "
                "chips')", "host ops")
    device = name if host == [base] else base
    return (f"Mean traced step per chip ({host[0]}'s traces hold no device events: its host ops stand in for the "
            f"chips', beside {device}'s device ops)", "ops")


def text(attribution: dict) -> str:
    """``perfkit trace attribution RUN_DIR``'s text: the report's lines (``attribution["aa"]``: the A/A control), its
    tables in columns."""
    return "\n".join(aligned(section(attribution, attribution.get("aa"), command=False))).strip()


def aligned(lines: list[str]) -> list[str]:
    """Markdown lines with each table's cells padded to their column's width (right-aligned where its separator
    says so): still Markdown, and in columns on a terminal. A table whose rows split into other counts of cells
    (a ``|`` in a name) stays as it is."""
    out: list[str] = []
    table: list[str] = []
    for line in [*lines, ""]:
        if line.startswith("|"):
            table.append(line)
            continue
        rows = [[cell.strip() for cell in row.strip()[1:-1].split("|")] for row in table]
        if len(rows) > 1 and len({len(row) for row in rows}) == 1:
            widths = [max(map(len, column)) for column in zip(*rows)]
            right = [cell.endswith(":") for cell in rows[1]]
            rows[1] = ["-" * (w - 1) + ":" if r else "-" * w for w, r in zip(widths, right)]
            table = ["| " + " | ".join(c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right)) + " |"
                     for row in rows]
        out += [*table, line]
        table = []
    return out[:-1]
