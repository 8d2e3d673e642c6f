"""The "First departure" part of report.md's Quality section, which ``perfkit quality RUN_DIR`` prints
too, in plain text: B's taps against A's (the summary's ``taps``, ``perfkit.quality.departure``), the first tap
where B departs by more than the allowance, which allowance that was, and every tap's figures. Rendered from
the summary alone (no numpy)."""

from __future__ import annotations

import math

from perfkit.common.json_figures import db_cell, from_json


def _figure(x) -> float:
    """A figure as the summary holds it (``"inf"``, None for NaN) as a float, NaN for None."""
    x = from_json(x)
    return math.nan if x is None else x


def _cell(x, significant: int) -> str:
    """A figure to ``significant`` figures, trailing zeros kept so that a column's figures read alike (0.00260
    beside 0.00485, not 0.0026); 0 (bit-identical) as 0, NaN as "-"."""
    x = _figure(x)
    if math.isnan(x):
        return "-"
    return "0" if x == 0 else format(x, f"#.{significant}g").rstrip(".")  # (# leaves 100. for 100)


def allowance_words(t: dict) -> str:
    """Which allowance the comparison used, in a sentence."""
    a, rows, repeats = t["a"]["variant"], t["rows"], t["repeats"]
    own = ", ".join(f"{d} {_cell(x, 2)}" for d, x in t["allowances"].items()) or "-"
    rule = ("A tap departs when B's relative L2 against A exceeds its allowance, derived from the dtype: "
            f"sqrt(machine epsilon) of the tap's dtype ({own})")
    if not repeats:
        return rule + f"; no repeat of {a} tapped to measure one from."
    differ = [r for r in rows if _figure(r["repeat_rel_l2"]) != 0]
    if not differ:
        return rule + (f"; {a}'s {repeats + 1} trials (the compared one and {repeats} more) were bit-identical at "
                       "every tap, so it stays the dtype's.")
    unmeasured = sum(math.isnan(_figure(r["repeat_rel_l2"])) for r in differ)
    measured = sum(r["basis"] == "repeats" for r in rows)
    return (rule + f", or measured from {a}'s other {repeats} trial(s) where that is larger "
            f"({t['repeat_factor']:g}x their largest relative L2 against the compared trial): {len(differ)} tap(s) "
            "differ between trials, "
            f"{measured} take the measured allowance"
            + (f", {unmeasured} differ with no arrays kept to measure (the dtype's used)" if unmeasured else "") + ".")


def _code(text: str, markdown: bool) -> str:
    """A name as the output spells it: a code span in Markdown, as it is in plain text."""
    return f"`{text}`" if markdown else text


def first_words(t: dict, markdown: bool) -> str:
    """The answer in a sentence: the first tap where B departs, or none."""
    a, b = t["a"]["variant"], t["b"]["variant"]
    first, rows = t["first"], t["rows"]
    if first is None:
        identical = sum(bool(r["bit_identical"]) for r in rows)
        worst = max((_figure(r["rel_l2"]) for r in rows), default=0.0)
        every = f"at all {len(rows)} taps" if len(rows) != 1 else "at its one tap"
        answer = (f"No departure: {b} stays within the allowance {every} ({identical} bit-identical, "
                  f"largest relative L2 {_cell(worst, 3)}).")
    elif first["departs"] is None:
        answer = (f"First difference: {_code(first['name'], markdown)} at step {first['step']} (tap {first['index']}) "
                  f"is not bit-identical; no arrays were kept to measure by how much "
                  f"({_code('capture.tap_arrays', markdown)}).")
    else:
        where = f"{_code(first['name'], markdown)} at step {first['step']}"
        answer = (f"First departure: {f'**{where}**' if markdown else where} (tap {first['index']}): relative "
                  f"L2 {_cell(first['rel_l2'], 3)} against an allowance of {_cell(first['allowance'], 2)} "
                  f"(from the {first['basis']}), PSNR {db_cell(first['psnr_db'])} dB over {a}'s range.")
        if first["step"] and first["index"] == next(r["index"] for r in rows if r["step"] == first["step"]):
            answer += (f" It is step {first['step']}'s first tap: that step's input may differ already; tap step 0 "
                       "to find where.")
    m = t.get("mismatch")
    if m:
        answer += f" The taps part at tap {m['index']} ({a}: {m['a']}; {b}: {m['b']}): compared up to there."
    return answer


# the table's columns: heading (A's variant for {a}) and alignment, as Python's format spells it
_COLUMNS = (("tap", ">"), ("step", ">"), ("name", "<"), ("relative L2", ">"),
            ("PSNR over {a}'s range, max - min (dB)", ">"), ("allowance", ">"), ("from", "<"), ("bit-identical", "^"),
            ("departs", "^"))
_MARKDOWN_RULE = {">": "---:", "<": "---", "^": ":---:"}


def _row(r: dict, markdown: bool) -> list[str]:
    departs = {True: "**yes**" if markdown else "yes", False: "no", None: "?"}[r["departs"]]
    return [str(r["index"]), str(r["step"]), _code(r["name"], markdown), _cell(r["rel_l2"], 3), db_cell(r["psnr_db"]),
            _cell(r["allowance"], 2), r["basis"], "yes" if r["bit_identical"] else "no", departs]


def table(rows: list[dict], a: str, markdown: bool) -> list[str]:
    """Every tap's figures as a Markdown table, or as plain text in aligned columns (``a``: A's variant, whose
    range, max - min, the PSNR is over)."""
    head = [name.format(a=a) for name, _ in _COLUMNS]
    body = [_row(r, markdown) for r in rows]
    if markdown:
        rule = [_MARKDOWN_RULE[align] for _, align in _COLUMNS]
        return [f"| {' | '.join(cells)} |" for cells in (head, rule, *body)]
    widths = [max(map(len, column)) for column in zip(head, *body)]
    return ["  ".join(f"{cell:{align}{width}}" for cell, (_, align), width in zip(cells, _COLUMNS, widths)).rstrip()
            for cells in (head, *body)]


def lines(t: dict, plot: str | None, markdown: bool) -> list[str]:
    """What was compared, the allowance, the answer, and every tap's row (``t``: the summary's ``taps``), in
    Markdown for report.md or in plain text for the terminal."""
    if "error" in t:
        return [f"Taps not compared: {t['error']}"]
    a, b = t["a"], t["b"]
    shown = (f"; plot [{plot}]({plot})" if markdown else f"; plot {plot}") if plot else ""
    return [f"{b['variant']}'s taps (trial {b['trial']}, {_code(b['dir'], markdown)}) against {a['variant']}'s "
            f"(trial {a['trial']}, {_code(a['dir'], markdown)}), {t['taps']} tap{'s' * (t['taps'] != 1)} matched in "
            f"order{shown}. " + allowance_words(t), "", first_words(t, markdown), "",
            *table(t["rows"], a["variant"], markdown)]


def departure_section(summary: dict, plots: dict[str, str] | None = None) -> list[str]:
    """The part's lines (none when no trial tapped), every tap's row folded; ``plots``: for the plot's link."""
    t = summary.get("taps")
    if not t:
        return []
    body = lines(t, (plots or {}).get("taps"), markdown=True)
    if "error" not in t:  # the answer stays in view; the table folds
        cut = body.index("", 2) + 1
        body = [*body[:cut], "<details><summary>every tap</summary>", "", *body[cut:], "", "</details>"]
    return ["", "### First departure", "", *body]
