"""``report.md``: the page a reviewer reads. It only formats what ``perfkit.analysis.summary`` computed."""

from __future__ import annotations

import math
import os
import shlex
import signal
from pathlib import Path

from perfkit.common.comparison import (FEW_TRIALS, NO_SPREAD, aa_called, ci_level, ci_name, compared_variant,
                                       inside_noise_floor, looks, one_trial_call, trial_median, without_ci)
from perfkit.common.devices import on_cpu_devices
from perfkit.common.digits import change_text, digits, ratio_text, share_text, shown_difference, whole_shares
from perfkit.common.json_figures import db_cell
from perfkit.hlo.render import counts_text, rank_list, ranks_report, ranks_text
from perfkit.report import attribution
from perfkit.report import cost
from perfkit.report import hangs
from perfkit.report.departure import departure_section
from perfkit.report.line import hung_at_timeout, more_rounds, multi_host, rounds_run, step_times_text, summary_line
from perfkit.report.serving import section
from perfkit.rundata import rundir
from perfkit.rundata.exits import at_exit, exit_text, where_threads_wait
from perfkit.rundata.rundir import matrix_of, resume_command
from perfkit.trace import marker_notes
from perfkit.trace.names import labels
from perfkit.trace.straggler import SKEW_PAST_STEP, STRAGGLER_SHARE


def _ms(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ratio(c: dict, a: str = "", left_out: dict[str, str] | None = None) -> str:
    """A comparison's ratio with its CI named at the level its verdict was read at: each look's, higher than 95%,
    where the adaptive rounds read it more than once (``97.4% CI (3 looks)``). Without one, which of its sides (``a``
    and its variant) the run's ``--only`` left out (``left_out``, ``rundir.left_out``), as ``perfkit check`` says."""
    if c["ratio"] is None:
        return f"no ratio ({rundir.left_out_text((a, c['variant']), left_out) or 'a side has no timed trials'})"
    if without_ci(c):
        return f"**{c['ratio']:.3f}**, no CI"
    return f"**{c['ratio']:.3f}**, {ci_name(ci_level(c), looks(c))} [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]"


METRIC_WORDS = {"step_ms": "median step time (synced)", "natural_step_ms": "natural step time (one sync per pass)"}
# what the bundled model's trials record beside their steps (perfkit.run.model_rank), in the Timing table's words
VALUE_WORDS = {"setup_s": "building the model and its parameters", "setup_compile_s": "the compiles in that set-up",
               "compile_s": "compiling the step programs", "compile_cache_hits": "programs read from jax's persistent "
               "compile cache", "compile_cache_writes": "programs written to it"}


def _unit(name: str) -> str:
    """The unit a recorded value's name says (``*_s``: seconds, ``*_ms``: milliseconds), or ""."""
    return " s" if name.endswith("_s") else " ms" if name.endswith("_ms") else ""


def _value(name: str, x, n: int | None = None) -> str:
    """A recorded value with its unit: to 2 decimals, or 4 significant digits without a unit (or ``n``)."""
    if x is None:
        return "-"
    unit = _unit(name)
    return f"{x:.{n or 2}f}{unit}" if unit else f"{x:.{n or 4}g}"


def _change(x, base) -> str:
    """B's figure against the baseline's, as a signed percentage (the reference PRs' "(-11.9%)")."""
    return "" if x is None or not base else f" ({change_text(x / base)})"


def _dividing(figures: list, significant: bool = False, text=change_text) -> int:
    """The digits each variant's figure needs for its change against the first's (``text``) to follow from the
    two shown."""
    at_least = 4 if significant else 2
    pairs = [(figures[0], x) for x in figures[1:] if None not in (figures[0], x)]
    return digits(pairs, at_least, significant, text, most=at_least + 6)


def _timing(summary: dict) -> list[str]:
    """The Timing section: the table of figures, then each B/A ratio with its CI, p and verdict, and the A/A
    noise floor."""
    return [*_timing_table(summary), "", *_sat_out(summary), *_ratio_lines(summary), *_noise_floor_lines(summary)]


def _sat_out(summary: dict) -> list[str]:
    """A sentence for each variant that ran fewer rounds than it could, which the trial counts alone do not say
    (``perfkit.run.plan``): one whose first two trials crashed alike ran none after them, and where nothing was left
    to compare the run ended there; one with fewer trials than the run's rounds, all of them failed, sat out the rounds
    past ``repeats.min`` that the others went on with."""
    rounds = rounds_run(summary)
    end = summary["trials"].get("ended_after_round")
    out = []
    for name, v in summary["variants"].items():
        if alike := v.get("crashed_alike"):
            out.append(f"{name} ran no trial after round {alike['round']}: its first two trials crashed alike "
                       f"({_code(alike['error'])})" + ("; nothing was left to compare, so the run ended there."
                                                       if alike["round"] == end else "."))
        elif 0 < v["trials"] == v["failed"] and v["trials"] < rounds:
            out.append(f"{name} ran {v['trials']} trial{'s' if v['trials'] != 1 else ''} of the run's {rounds} rounds: "
                       f"none of its trials ran (each crashed or hung), so it sat out the rounds past `repeats.min` "
                       f"({_span(v['trials'] + 1, rounds)}) that the other variants' unknown verdicts went on with.")
    return [*out, ""] if out else []


def _code(text: str) -> str:
    """``text`` as a Markdown code span (a rank's error may hold ``*`` or ``_``), doubled where it holds a backtick."""
    return f"`` {text} ``" if "`" in text else f"`{text}`"


def _span(first: int, last: int) -> str:
    return f"round {first}" if first == last else f"rounds {first}-{last}"


def _timing_table(summary: dict) -> list[str]:
    """One column per variant (the baseline first), one row per figure: the synced step's median of
    per-trial medians with B's change against A (what the B/A ratio divides), the median and p25 - p75 of
    all timed steps pooled, the natural step, first step, every recorded value (``compile_s``,
    ``denoise_s``, ...), the timed steps and failed trials."""
    a = summary["baseline"]
    variants = summary["variants"]
    rows = ["| | " + " | ".join(f"{n} (A)" if n == a else n for n in variants) + " |",
            "| --- |" + " ---: |" * len(variants)]

    def row(label: str, figures: list, change: bool = True, decimals: int | None = None) -> str:
        decimals = decimals or (_dividing(figures) if change else 2)
        return f"| {label} | " + " | ".join(
            ("-" if x is None else f"{x:.{decimals}f}") + ("" if n == a or not change else _change(x, figures[0]))
            for n, x in zip(variants, figures)) + " |"

    def spread(label: str, metric: str) -> str:
        return f"| {label} | " + " | ".join(
            "-" if v[metric]["p25"] is None else f"{_ms(v[metric]['p25'])} - {_ms(v[metric]['p75'])}"
            for v in variants.values()) + " |"

    if any(v["step_ms"]["n"] for v in variants.values()):
        medians = {n: trial_median(v) for n, v in variants.items()}
        # as many decimals as the figures need to divide to each B/A ratio shown (``line.step_times_text``)
        rows += [row("**step, synced: median of trial medians (ms)**", list(medians.values()),
                     decimals=_dividing(list(medians.values()), text=ratio_text)),
                 row("step, synced: median of all timed steps pooled (ms)",
                     [v["step_ms"]["median"] for v in variants.values()], change=False),
                 spread("step, synced: p25 - p75 of all timed steps pooled (ms)", "step_ms")]
    if any(v["natural_step_ms"]["n"] for v in variants.values()):
        # One pass a trial: the median of passes is the median of per-trial values, which the ratio divides.
        one_each = all(v["natural_step_ms"]["n"] == v["trials"] - v["failed"] for v in variants.values())
        # a pass's mean step (its whole time over its steps, any slow one in it), not a median of steps
        label = "step, natural: median of trials (ms, a pass's mean step, one pass each)" if one_each else \
            "step, natural: median of all passes pooled (ms)"
        rows += [row(label, [v["natural_step_ms"]["median"] for v in variants.values()], change=one_each),
                 spread(f"step, natural: p25 - p75 of {'trials' if one_each else 'all passes'} (ms)",
                        "natural_step_ms")]
    if any(v["first_step_ms"]["n"] for v in variants.values()):
        # the bundled model compiles in its first step; a user's command may compile before it, or not at all
        label = "first step (ms)" if summary.get("kind") == "command" else "first step (ms, compile included)"
        # a failed trial's first step is kept (it ran, and may be what failed), where values are good trials' only
        if any(v["first_step_ms"]["n"] > v["trials"] - v["failed"] for v in variants.values()):
            label = label.replace(")", "; every trial's, failed ones too)")
        rows.append(row(label, [v["first_step_ms"]["median"] for v in variants.values()]))
    for name in dict.fromkeys(k for v in variants.values() for k in v["values"]):
        figures = [v["values"].get(name, {}).get("median") for v in variants.values()]
        shown = _dividing(figures, significant=not _unit(name))
        rows.append(f"| {name} (median over trials) | " + " | ".join(
            _value(name, x, shown) + ("" if n == a else _change(x, figures[0])) for n, x in zip(variants, figures))
            + " |")
    ranks = max((v.get("ranks", 1) for v in variants.values()), default=1)  # (a trial's steps are rank 0's)
    whose = f"; rank 0's of {ranks} ranks" if ranks > 1 else ""
    rows.append(f"| timed steps (trials{whose}) | " + " | ".join(
        f"{v['step_ms']['n']} ({v['trials'] - v['failed']})" for v in variants.values()) + " |")
    rows.append("| failed trials | " + " | ".join(str(v["failed"]) for v in variants.values()) + " |")
    return rows


def _resamples(c: dict) -> str:
    """How the CI was drawn, so that another bootstrap can give it again (absent in older summaries)."""
    if not c.get("n_boot"):
        return ""
    trials = min(c.get("n_a") or 0, c.get("n_b") or 0)
    # (a summary written before looks_at took in Welch's interval at two trials a side alone)
    welch = trials >= FEW_TRIALS if "looks_at" in c else trials == FEW_TRIALS
    rounds = f", rounds=({c['looks_at'][0]}, {c['looks_at'][1]})" if c.get("looks_at") else ""
    return (f"; its percentile interval over {c['n_boot']:,} resamples drawn by numpy's default_rng({c['seed']}), "
            f"the case's seed: `perfkit.analysis.stats.compare(a, b{rounds}, seed={c['seed']})` gives it again"
            + ("; it also takes in Welch's t interval of the trials' medians (a bootstrap of a few trials reaches no "
               "further than they do)") * welch)


def _looks(c: dict) -> str:
    """Why a CI is held above 95%, where the rounds read the verdict more than once (``stats.look_confidence``)."""
    first, last = c.get("looks_at") or (1, 1)
    if first == last:
        return ""
    return (f" The run reads the verdict after every round from {first} to {last} trials a side, stopping at the "
            f"first look that decides it, so each look's interval is at {c['look_confidence']:.1%}: the intervals of "
            f"all {last - first + 1} looks hold together at {c['confidence']:.0%} (repeated confidence intervals, "
            "Pocock's level); 95% at every look would call more A/A runs faster or slower than one in twenty.")


def _ratio_lines(summary: dict) -> list[str]:
    """Each B/A ratio with its CI, p and verdict, and how to read them (the values the trials recorded named)."""
    a, variants = summary["baseline"], summary["variants"]
    left_out = rundir.left_out_of(summary)
    rows = []
    for c in summary["comparisons"]:
        p = "-" if c["p_value"] is None else f"{c['p_value']:.3g}"
        rows.append(f"- {c['variant']}/{a}, {METRIC_WORDS[c['metric']]}: {_ratio(c, a, left_out)} -> "
                    f"**{c['verdict']}** (minimum effect {c['min_effect']:.0%}); Mann-Whitney p = {p} over "
                    f"{c['n_a']} + {c['n_b']} "
                    + ("trial medians." if c["metric"] == "step_ms" else
                       "trials' natural passes (a pass's mean step; a trial's median where it ran more than one)."))
    rows += ["", "The ratio divides the variants' medians of per-trial medians (the bold row). The verdict comes "
             "from the ratio's CI alone, a hierarchical bootstrap (trials resampled, then steps within each"
             f"{_resamples(summary['comparison'])}): *faster* or *slower* when the whole CI lies beyond the minimum "
             "effect on that side, *same* when it lies within it, else *unknown*. The Mann-Whitney p is a second view "
             "that only ranks the trial medians "
             f"(steps within a trial and the minimum effect play no part{_p_floor(summary['comparison'])}), "
             f"so the two can disagree: the verdict is the CI's.{_looks(summary['comparison'])} Values are medians "
             "over good trials (those whose "
             "every rank ran to its end; hung, crashed and interrupted ones are listed under Failed trials"
             + ("" if summary["trials"]["failed"] else ", none in this run") + ") unless a row says otherwise. "
             "A synced step waits for its results before the next starts"
             # the natural rows explained where the table has them (a plain command case's program prints none)
             + ("; the natural pass runs the same steps dispatched without waiting, one wait at its end, as a program "
                "runs them; its figure is that pass's mean step, a slow step counted in full, where the synced one is "
                "a median: so natural can read above synced."
                if any(v["natural_step_ms"]["n"] for v in variants.values()) else ".")]
    named = [f"`{k}` {VALUE_WORDS[k]}" for v in variants.values() for k in v["values"] if k in VALUE_WORDS]
    if named:
        rows[-1] += " Recorded by the trials: " + "; ".join(dict.fromkeys(named)) + "."
    return rows


def _noise_floor_lines(summary: dict) -> list[str]:
    """The A/A control's CI, and whether B's change lies inside it; none without an A/A control."""
    a, rows = summary["baseline"], []
    nf = summary.get("noise_floor")
    if nf:
        # the control's comparison, read over the same looks as B's: its interval at each look's level
        aa = next((c for c in summary["comparisons"] if (c["variant"], c["metric"]) == (nf["variant"], "step_ms")), {})
        width = ("unknown (too few trials)" if nf["half_width"] is None else
                 f"{nf['ci'][0] - 1:+.1%} to {nf['ci'][1] - 1:+.1%} ({ci_name(ci_level(aa), looks(aa))} of A/A)")
        rows += ["", f"A/A noise floor ({nf['variant']}, the baseline run again): {width}. A B/A change "
                 "inside this range cannot be told from run-to-run noise on this machine."]
        if called := aa_called(summary):
            rows[-1] = (f"A/A control ({nf['variant']}, the baseline run again): **{called}** than the baseline "
                        f"itself, {nf['ratio']:.3f}, {width}: the run's conditions drifted between its trials (load, "
                        "clocks, heat), or chance made the call a 95% interval makes in a few A/A runs of a hundred; "
                        "either way no timing verdict of this run is to be trusted alone: run again, on a quieter "
                        "machine.")
        inside = inside_noise_floor(summary)
        if inside:
            rows[-1] += (f" {compared_variant(summary)}/{a}'s {inside} lies inside it: its verdict "
                         f"({summary['comparison']['verdict']}) is its own CI's, "
                         "and the A/A control varied as much in this run; run again (more repeats, a quieter "
                         "machine) before trusting it.")
    return rows


def _quality_row(label: str, q: dict) -> str:
    if q["kind"] == "tensor":
        return (f"| {label} | {db_cell(q['psnr_db'])} | - | - | - | - | {q['mean_abs_diff']:.3g} | "
                f"{q['max_abs_diff']:.3g} | - | {'yes' if q['bit_identical'] else 'no'} |")
    # no frame differs: there is no mean over differing frames to show (it would read "inf")
    mean = "identical" if q["identical_frames"] == q["frames"] else db_cell(q["psnr_db"])
    return (f"| {label} | {mean} | {db_cell(q['psnr_pooled_db'])} | {db_cell(q['psnr_min_db'])} | "
            f"{db_cell(q.get('psnr_y_db'))} | {db_cell(q.get('psnr_yuv_db'))} | "
            f"{q['mean_abs_diff']:.3f} | {q['max_abs_diff']:.0f} | {share_text(q['share_over_16'], 2)} | "
            f"{'yes' if q['bit_identical'] else 'no'} |")


# Which ffmpeg command gives the headline figures of each space (perfkit.quality.planes.REPRODUCE).
_SPACE_SENTENCE = {
    "rgb": "PSNR mean, average and worst frame in RGB24, as ffmpeg's psnr gives them after `format=rgb24` on both "
           "inputs",
    "yuv": "PSNR mean, average and worst frame in the videos' own planes, as `ffmpeg -i A -i B -lavfi psnr` gives them",
}


def quality_section(summary: dict, plots: dict[str, str] | None = None) -> list[str]:
    """report.md's Quality section (the quality tests read it too). Conventions as in ``perfkit.quality``:
    mean PSNR over differing frames, average as ffmpeg's psnr gives it. ``plots``: ``perfkit.report.plots.write_plots``'s result, for the drift plot's link."""
    q = summary.get("quality")
    a = summary["baseline"]
    if not q and summary.get("serve"):
        return ["No comparable outputs: the Serving section's table of served outputs says why each was not compared."]
    b = compared_variant(summary)
    if not q:  # which of A and B the run's --only left out, as perfkit check's quality row says
        why = rundir.left_out_text((a, b), rundir.left_out_of(summary))
        return [f"No comparable outputs ({why})." if why else "No comparable outputs."]
    # a tensor's differences are in its own units, a frame's in codes of 255
    scale = "/255" if q["kind"] == "frames" else "in A's units; /255 for frames"
    header = ["| comparison | PSNR mean of differing frames (dB) | PSNR average (dB) | worst frame (dB) | "
              f"Y (dB) | YUV average (dB) | mean abs diff ({scale}) | max abs diff | abs diff > 16 | bit-identical |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | :---: |"]
    if q["kind"] == "frames":
        lines = [f"`{q['file']}`: {q['frames']} frame{'' if q['frames'] == 1 else 's'}, data range 255; "
                 f"{q['identical_frames']} of {q['frames']} "
                 f"frames identical.", "", f"{_SPACE_SENTENCE[q.get('space', 'rgb')]}. Y and YUV average "
                 "(pixel-weighted) are as `ffmpeg -i A -i B -lavfi psnr` gives them for two videos of one YUV format."]
    else:
        # NaN where NaN or inf part the outputs; a cosine to ten digits (0.9999999999 read 1.00000000 at eight)
        undefined = "undefined (NaN or inf where they part)"
        own = ", ".join(f"{name} {undefined if math.isnan(q[key]) else format(q[key], spec)}"
                        for key, name, spec in (("rel_l2", "relative L2", ".3g"), ("cosine", "cosine", ".10g"))
                        if q.get(key) is not None)
        lines = [f"`{q['file']}`: a tensor; PSNR over A's range{'; ' + own if own else ''}."]
    broken = {name: fq["error"] for name, fq in q["files"].items() if "error" in fq}
    others = {name: fq for name, fq in q["files"].items() if name != q["file"] and name not in broken}
    # beside other files' rows the headline's names its file too (alone, the line above names it), as do the oracle's
    named = f"`{q['file']}`: " if others else ""
    lines += ["", *header, _quality_row(f"{named}{b} vs {a}", q),
              *(_quality_row(f"`{name}`: {b} vs {a}", fq) for name, fq in others.items())]
    oracle = q.get("oracle") or {}
    lines += [_quality_row(f"{named}{v} vs oracle", oq) for v, oq in oracle.get("variants", {}).items()]
    notes = [f"`{name}` not compared: {error}" for name, error in broken.items()]
    if oracle:
        notes.append(f"Oracle `{oracle['path']}`" + (f" not compared: {oracle['error']}" if "error" in oracle else "."))
    if q.get("drift_error"):
        notes.append(f"Latent drift not computed: {q['drift_error']}")
    lines += ["", *(f"- {n}" for n in notes)] if notes else []
    drift = q.get("drift")
    if drift:
        plot = (plots or {}).get("drift")
        lines += ["", f"Latent drift of {b} against {a} per step (PSNR over {a}'s range"
                  + (f"; plot [{plot}]({plot})" if plot else "") + "):", "",
                  "| step | relative L2 | cosine | PSNR (dB) | max abs diff |", "| ---: | ---: | ---: | ---: | ---: |",
                  *(f"| {r['step']} | {r['rel_l2']:.3e} | {'-' if r['cosine'] is None else format(r['cosine'], '.8f')}"
                    f" | {db_cell(r['psnr_db'])} | {r['max_abs_diff']:.3g} |" for r in drift)]
    det = []
    for n, d in summary.get("determinism", {}).items():
        if d:
            spread = ""
            if d["bit_identical"] is False:
                spread = f", {d['differing_runs']} differ from the first"
                if "psnr_min_db" in d:
                    spread += f": worst PSNR {db_cell(d['psnr_min_db'])} dB, max abs diff {d['max_abs_diff']}"
                if "rel_l2_max" in d:
                    worst = d["rel_l2_max"]
                    spread += "; tensors: worst relative L2 " + (
                        f"{worst:.3e}" if worst is not None else "undefined (NaN or inf where the runs part)")
            if "error" in d:
                spread += f" ({d['error']})"
            verdict = {True: "bit-identical", False: "not bit-identical", None: "not checked"}[d["bit_identical"]]
            runs = "1 run, nothing to compare" if d["runs"] < 2 else f"{d['runs']} runs {verdict}"
            det.append(f"{n}: {runs} ({_sha256(d)}){spread}")
    if det:
        lines += ["", "Determinism: " + "; ".join(det) + "."]
    return lines


def _sha256(d: dict) -> str:
    """A determinism entry's hash, with what it hashed (the RGB24 frames, a video's planes, an array's bytes: not
    the file's bytes, which ``sha256sum`` gives) where the summary says."""
    return f"sha256 of the {d['sha256_of']} {d['sha256']}" if d.get("sha256_of") else f"sha256 {d['sha256']}"


def _compile_cache(cc: dict) -> list[str]:
    """Cold against warm compile caches side by side, and whether their outputs are bit-identical."""
    rows = ["| variant | cache | first step (ms) | compile_s | cache hits | entries at start | entries written | "
            "server ready_s | priming |", "| --- | --- |" + " ---: |" * 6 + " --- |"]
    for name, r in cc["variants"].items():
        p = r["priming"]
        primed = "-" if p is None else f"{p['status']}, {p['wall_s']:.1f} s, {p['entries']} entries"
        rows.append(f"| {name} | {r['mode']} | {_ms(r['first_step_ms'])} | {_value('compile_s', r['compile_s'])} | "
                    + " | ".join(_value("", r[k]) for k in ("cache_hits", "entries_at_start", "entries_written"))
                    + f" | {_value('ready_s', r['ready_s'])} | {primed} |")
    o = cc["outputs"]
    if o is None:
        said = "no outputs to compare."
    elif o["bit_identical"]:
        said = f"yes, all {o['runs']} good trials ({_sha256(o)})."
    elif o["bit_identical"] is None:
        said = f"not known ({'one good trial: nothing to compare' if o['runs'] < 2 else o.get('error', 'unread')})."
    else:
        said = f"**no**: {o['differing_runs']} of {o['runs']} good trials differ from the first."
    return [*rows, "", "Medians over good trials. Cache hits: the program's count (jax's monitoring events); entries: "
            "jax cache files on disk. Outputs bit-identical across cold and warm: " + said]


def _moved(m: dict) -> str:
    """Where a receive buffer moved, as hlo-diff gives it: by how much in its allocation, and to which other allocation
    (one moved only to another at the same offset read "+0 B"); rows of older summaries have no allocation."""
    alloc = m.get("allocation") or {}
    other = alloc.get("majority") != alloc.get("rank")
    return " ".join([m["collective"], *([f"{m['delta']:+,} B"] if m["delta"] or not other else []),
                     *([f"in allocation {alloc['majority']} -> {alloc['rank']}"] if other else [])])


def _first_difference(first: dict | None) -> str:
    """A table cell: where the first divergent rank's program first differs from the majority's."""
    if not first:
        return "-"
    rank, ref = f"rank {first['ranks'][0]}", f"rank {first['against_rank']}"
    if first["same_program"]:
        moved = ", ".join(_moved(m) for m in first["receive_moved"])
        return f"`{first['module']}`: same program, receive buffers moved on {rank}: {moved}"
    counts = first.get("counts")  # (absent from older summaries)
    devices = (f"{rank} compiled for {counts_text(counts['rank'])}, {ref} for {counts_text(counts['majority'])}"
               if counts else "")
    if devices and first["majority"] is None and first["rank"] is None:  # no instruction differs
        return f"`{first['module']}`: {devices}"

    # Both cells show the same 100 characters, from a little before where the two texts first differ: cut at their
    # start, two instructions that differ only in a long attribute (source_target_pairs) read as the same.
    texts = [inst["text"] for inst in (first["rank"], first["majority"]) if inst is not None]
    same = len(os.path.commonprefix(texts)) if len(texts) == 2 else 0
    start = max(0, min(same - 40, max(map(len, texts)) - 100))

    def code(inst: dict | None) -> str:
        if inst is None:
            return "(no counterpart)"
        text = inst["text"]
        shown = ("... " if start else "") + text[start:start + 100] + (" ..." if len(text) > start + 100 else "")
        return f"``{shown.replace('|', '&#124;')}``"

    return (f"`{first['module']}`: {devices}{'; ' * bool(devices)}{rank} {code(first['rank'])}; "
            f"{ref} {code(first['majority'])}")


def _ranks(summary: dict) -> list[str]:
    """Rank consistency per variant; for a variant whose ranks diverged, hlo-diff's Markdown detail."""
    rows = ["| variant | consistent | ranks by program | first differing instruction | checked |",
            "| --- | --- | --- | --- | --- |"]
    details = []
    for name, r in summary["ranks"].items():
        # one process: one rank, consistent whatever it ran, but with no other to compare it with
        cons = "one rank: nothing to compare" if r["consistent"] and r["groups"] == [[0]] else \
            {True: "yes", False: "**no**", None: "not checked"}[r["consistent"]]
        groups = " / ".join(f"rank{'s' * (len(g) > 1)} {rank_list(g)}" for g in r["groups"]) or "-"
        rows.append(f"| {name} | {cons} | {groups} | {_first_difference(r.get('first_difference'))} | {r['checked']} |")
        if r["consistent"] is False and r.get("hlo_diff"):
            details += ["", f"### {name}: programs per rank", "", ranks_report(r["hlo_diff"], markdown=True).rstrip()]
    return rows + details


def _no_steps(failed: dict) -> str:
    """Why a trial that ended well timed no step: none recorded, or all of them warmup."""
    done = next((r.get("steps_done") for r in failed["ranks"] if r.get("rank") == 0), None)
    if failed["status"] != "no_steps" or done is None:
        return ""
    if not done:
        return (": rank 0 recorded no step (the program calls `perfkit.record.step(ms)` once a step, or prints a line "
                "the case's `step_regex` matches)")
    return f": rank 0's {done} steps are all warmup (the case drops the first {failed.get('warmup', '?')})"


def _missing_hosts(failed: dict, untold: dict[int, list[int]]) -> str:
    """Why a multi-host run's trial is incomplete: the hosts that recorded no part of it, those whose record of it is
    cut short or damaged, and those holding a damaged line that names no trial (which it held cannot be told), whose
    ranks it lacks. ``untold``: each such host's trials (the run's failed ones it may have held), said why at the
    first of them, which the others point to."""
    missing, cut, hosts_untold = (failed.get(k, []) for k in ("missing_hosts", "cut_hosts", "untold_hosts"))
    said = []
    if missing:
        said.append(f"host{'s' * (len(missing) > 1)} {', '.join(map(str, missing))} recorded no part of it (never "
                    "started, stopped before it, or wrote elsewhere)")
    if len(cut) == 1:
        said.append(f"host {cut[0]} recorded it, but its record (its line in `hosts/host{cut[0]}/trials.jsonl`) is cut "
                    "short or damaged")
    elif cut:
        said.append(f"hosts {', '.join(map(str, cut))} recorded it, but their records (their lines in "
                    "`hosts/host<I>/trials.jsonl`) are cut short or damaged")
    for h in hosts_untold:
        first, *others = untold[h]
        if first != failed["index"]:
            said.append(f"host {h} may have recorded it in its damaged line (trial {first} says so)")
            continue
        which = (f"which of trials {', '.join(map(str, untold[h]))} that line was its record of, if "
                 f"{'either' if len(others) == 1 else 'any'}," if others
                 else "whether that line was its record of this trial")
        said.append(f"host {h} holds a line in `hosts/host{h}/trials.jsonl` damaged before it names its trial: "
                    f"{which} cannot be told")
    hosts = len(missing) + len(cut) + len(hosts_untold)
    return f": {'; '.join(said)}, so it lacks {'their' if hosts > 1 else 'its'} ranks" if said else ""


def _first_failed(failed: dict) -> str:
    """Which rank failed first, where ranks failed at different times (the others' errors may only follow it)."""
    ended = sorted((r["exited_s"], r["rank"]) for r in failed["ranks"] if r.get("exit_code") not in (0, None)
                   and r.get("exited_s") is not None)
    if len(ended) < 2 or ended[0][0] == ended[1][0]:
        return ""
    return (f"; rank {ended[0][1]} failed first, {ended[1][0] - ended[0][0]:.2f} s before any other (the others' "
            "errors may follow from it)")


def _failures(summary: dict) -> list[str]:
    """Each failed or hung trial: its ranks that did not end well, where their threads wait, their last stderr."""
    lines = []
    untold: dict[int, list[int]] = {}  # a host's failed trials that its damaged line naming no trial may have held
    for f in summary["trials"]["failed"]:
        for h in f.get("untold_hosts", []):
            untold.setdefault(h, []).append(f["index"])
    for f in summary["trials"]["failed"]:
        lines.append(f"- trial {f['index']} ({f['variant']}): **{f['status']}**" + _no_steps(f)
                     + _missing_hosts(f, untold) + _first_failed(f))
        for r in f["ranks"]:
            if r.get("exit_code") != 0 or r.get("running_at_end"):
                where = ("still running at the end" if r.get("running_at_end")
                         else exit_text(r["exit_code"], r.get("stacks")))
                lines.append(f"  - rank {r['rank']}: {where}, {r.get('steps_done', 0)} steps done, "
                             f"last mark {r.get('last_mark') or 'none (no mark reached)'}")
                if r.get("stacks"):
                    lines += [f"    - waiting in `{w}`" for w in where_threads_wait(r["stacks"])[:6]]
                    lines.append(f"    (every thread's stack: `{f.get('dir', 'trials/..')}/rank{r['rank']}/stacks.txt`)")
                if r.get("stderr_tail"):
                    lines += ["    ```", *("    " + s for s in r["stderr_tail"].splitlines()[-8:]), "    ```"]
        lines += _at_exit(f) + _no_dump(f) + _late(f)
        # a rank whose program returned (exited, or hung on the way out) waits at no collective of it
        left = [r["rank"] for r in f["ranks"] if r.get("exit_code") == 0 and not r.get("running_at_end")]
        lines += hangs.lines((summary.get("hangs") or {}).get(f["dir"]), f["dir"],
                             left + [r["rank"] for r in _returned(f)])
    return lines


def _returned(failed: dict) -> list[dict]:
    """Ranks still running whose programs had returned (``exits.at_exit``)."""
    return [r for r in failed["ranks"] if r.get("running_at_end") and r.get("stacks") and at_exit(r["stacks"])]


def _steps(ranks: list[dict]) -> str:
    """``8 steps``, ``5-7 steps``: the steps the ranks had done."""
    done = sorted({r.get("steps_done", 0) for r in ranks})
    return f"{done[0]} step{'s' * (done[0] != 1)}" if len(done) == 1 else f"{done[0]}-{done[-1]} steps"


def _at_exit(failed: dict) -> list[str]:
    """Ranks still running whose programs had returned (``_returned``): past their steps, which no "waiting in" line
    of a step says. Where other ranks hung inside their programs (a thread in a module's top level), these wait for
    them (jax.distributed's shutdown waits for every rank), and the cause is why those stopped, which may be these
    ranks' own (a collective one of them skipped); else they hung on the way out."""
    out = _returned(failed)
    if not out:
        return []
    inside = [r for r in failed["ranks"] if r.get("running_at_end") and r.get("stacks") and not at_exit(r["stacks"])]
    its = "its" if len(out) == 1 else "their"
    if inside:
        theirs = "its" if len(inside) == 1 else "their"
        return [f"  - {ranks_text([r['rank'] for r in out])} had finished {its} program (no thread in a module's top "
                f"level) after {_steps(out)} and wait{'s' * (len(out) == 1)} in {its} shutdown (jax.distributed's "
                f"shutdown waits for every rank) for {ranks_text([r['rank'] for r in inside])}, which hung inside "
                f"{theirs} program after {_steps(inside)} (a thread in a module's top level): neither the shutdown nor "
                "a timeout too short for it is the cause; the cause is why those ranks stopped, where the chips' "
                "collectives part (below) where traces say"]
    return [f"  - {ranks_text([r['rank'] for r in out])} had returned from {its} program (no thread in a module's top "
            f"level) after {_steps(out)} and hung on the way out, at exit (an atexit handler such as jax.distributed's "
            "shutdown, a thread it waits for, the last garbage collection): the program's shutdown, or a timeout too "
            "short for it, is the cause, not a step"]


def _no_dump(failed: dict) -> list[str]:
    """Ranks still running that the stack-dump request (SIGUSR1) killed, with no dump: no Python handler was left in
    them (the hook's goes with the interpreter's shutdown), which "still running" alone did not say."""
    out = [r["rank"] for r in failed["ranks"] if r.get("running_at_end") and not r.get("stacks")
           and r.get("exit_code") == -signal.SIGUSR1]
    if not out:
        return []
    it, its = ("it", "its") if len(out) == 1 else ("they", "their")
    return [f"  - {ranks_text(out)} died of perfkit's stack-dump request (SIGUSR1) without a dump: no Python "
            f"stack-dump handler was left in {'it' if len(out) == 1 else 'them'}, so {its} Python had shut down and "
            f"{it} hung past that in native code (a C or C++ library's exit handler or destructor, on the way out), "
            f"or {it} ran no Python"]


def _late(failed: dict) -> list[str]:
    """The steps ranks wrote after perfkit stopped the trial, left out of its steps done: a program that catches
    SIGTERM (jax.distributed does) runs on until SIGKILL, past where its stack dump shows it."""
    late = [(r["rank"], r["late_steps"]) for r in failed["ranks"] if r.get("late_steps")]
    if not late:
        return []
    when = "at its timeout" if failed["status"] == "hung" else "after a rank failed"
    each = ", ".join(f"rank {rank} {n}" for rank, n in late)
    return [f"  - {sum(n for _, n in late)} step(s) written after perfkit stopped the trial {when} (and took the "
            f"stack dumps) are left out of the steps done ({each}): the ranks ran on past SIGTERM"]


def _breakdown(summary: dict) -> list[str]:
    """The traced steps split per chip (``perfkit trace breakdown``) and the op kinds that moved most."""
    bd = summary["breakdown"]

    def cells(v: dict) -> list[str]:
        if not v["span_ms"]:
            return ["-"] * len(parts)
        # the parts add up to the span (DCN, left out, is 0): their shares to 0.1%, to 100.0%, as trace breakdown's
        # (whole ones stray up to a point from the figures beside them)
        shares = whole_shares([v.get(f"{p}_ms") or 0.0 for p in parts], 1)
        return [f"{v[p + '_ms']:.3f} ({share:.1f}%)" for p, share in zip(parts, shares)]

    # exposed DCN (cross-slice collectives) only where some variant has any
    dcn = any(v.get("dcn_ms") for v in bd["variants"].values())  # dcn_ms: summaries from before it
    parts = ("compute", "ici", "dcn", "dma", "idle") if dcn else ("compute", "ici", "dma", "idle")
    rows = ["| variant | chip-steps (trials) | step span (ms) | compute | exposed ICI | "
            + ("exposed DCN | " if dcn else "") + "local DMA | idle |", "| --- | ---: | ---: |" + " ---: |" * len(parts)]
    for name, v in bd["variants"].items():
        if "error" in v:
            rows.append(f"| {name} | {v['error']} |" + " |" * (len(parts) + 1))
        else:
            rows.append(f"| {name} | {v['chip_steps']} ({v['trials']}) | {v['span_ms']:.3f} | "
                        + " | ".join(cells(v)) + " |")
    rows += ["", "Mean traced step per chip (a chip-step: one chip's one traced step); each instant goes to compute, "
             "else exposed ICI (collectives not under compute), " + ("else exposed DCN, " if dcn else "")
             + "else local DMA (copies), else idle; in parentheses, shares of the span rounded to add up to 100% "
             "(`perfkit trace breakdown` on the trial folders gives every chip and step).", "",
             "The traced steps (the case's `capture.trace`) run with the profiler recording and are left out of the "
             f"timed steps{_profiled(summary, list(bd['variants']))}: their span is that step's window on each chip, "
             "the profiler's own cost inside it. So it is usually longer than the timed medians above and is not "
             "compared with them; read the shares, and the changes between variants."]
    host = [name for name, v in bd["variants"].items() if v.get("measured") == "host ops"]
    if host:
        rows += ["", f"Measured on host ops ({', '.join(host)}): the traces hold no device events, so their CPU ops "
                 "stand in for the chips' (torch.distributed's collectives, gloo's on CPU, for the ICI), as "
                 "`perfkit trace breakdown` says (`measured: host ops`)."]
    outside = [(name, v) for name, v in bd["variants"].items() if v.get("outside_ops")]  # (summaries from before it)
    if outside:
        rows += ["", "Not in these figures: device ops outside every traced step's span ("
                 + "; ".join(f"{name}: {v['outside_ops']} ops, {v['outside_ms']:.3f} ms over its {v['trials']} trials"
                             for name, v in outside)
                 + "); `perfkit trace breakdown --window trace` on a trial's `rank*/trace` folders measures them."]
    # where spans are more than their step markers, as trace breakdown notes it (summaries from before it: none)
    rows += [line for name, v in bd["variants"].items() if "error" not in v
             for note in marker_notes.notes(v["chip_steps"], v, f" in {name}") for line in ("", f"{note}.")]
    parted = [(name, v) for name, v in bd["variants"].items() if v.get("clock_parted_ops")]
    if parted:
        rows += ["", "These times are the traces' (host-synchronized, as xprof's trace viewer shows them); they part by "
                 "over 1% from the chip's own clock (`device_duration_ps`, which xprof's op_profile counts) on "
                 + "; ".join(f"{v['clock_parted_ops']} of {name}'s {v['clock_ops']} ops ({v['clock_parted_ms']:.3f} ms "
                             f"of difference over its {v['trials']} trials)" for name, v in parted) + "."]
    rows += _hidden(bd)
    for name, deltas in bd["op_deltas"].items():
        short = labels(d["key"] for d in deltas)  # kernel names shortened; summary.json keeps them whole
        n = attribution.DECIMALS  # each delta the difference of the two figures shown
        rows += ["", f"Largest changes of device time per chip and step, {name} against {bd['baseline']}, "
                 f"by op {bd['by']} (ms; each op's own time, on every line where ops run at once, so a kind can "
                 "exceed its category above, where an instant counts once):", "",
                 f"| op {bd['by']} | category | {bd['baseline']} | {name} | delta |",
                 "| --- | --- | ---: | ---: | ---: |",
                 *(f"| `{short[d['key']]}` | {d['category']} | {d['a_ms']:.{n}f} | {d['b_ms']:.{n}f} | "
                   f"{shown_difference(d['a_ms'], d['b_ms'], n):+.{n}f} |" for d in deltas)]
    rows += attribution.section(summary.get("attribution"), (summary.get("noise_floor") or {}).get("variant"))
    rows += _traced_against_timed(summary)
    callbacks = {v: cost.host_callbacks(c["step"]) for v, c in (summary.get("cost") or {}).items() if "step" in c}
    return rows + _collectives(bd.get("collectives") or {}, _host_scheduled(summary), callbacks)


def _profiled(summary: dict, names: list[str]) -> str:
    """How many steps a trial each variant left out of its timing as run under a profiler (``profiled_steps``:
    the traced ones and any the program ran it on besides); "" for summaries from before it."""
    counts = [(name, summary.get("variants", {}).get(name, {}).get("profiled_steps")) for name in names]
    if any(n is None for _, n in counts):
        return ""
    return (", with any other step the program ran under its profiler (at most "
            + ", ".join(f"{name} {n}" for name, n in counts) + " such steps a trial)")


def _traced_against_timed(summary: dict) -> list[str]:
    """A line for each variant whose traced steps changed against the baseline's with the other sign than its
    timed steps where these have a direction, a verdict of faster or slower (a few traced steps, one an outlier, can
    say B is faster where many timed ones say slower); else where they were too few to place the change
    (``_too_few_traced``). The A/A control's changes are noise."""
    attributed = summary.get("attribution") or {}
    control = (summary.get("noise_floor") or {}).get("variant")  # (the A/A control's changes are noise)
    verdicts = {c["variant"]: c["verdict"] for c in summary.get("comparisons", ()) if c["metric"] == "step_ms"}
    # a ratio whose CI spans the minimum effect has no direction for traced steps to go against
    timed = {c["variant"]: c["ratio"] for c in summary.get("comparisons", ())
             if c["metric"] == "step_ms" and c["ratio"] and c["variant"] != control
             and verdicts[c["variant"]] in ("faster", "slower")}
    out = []
    for name, v in attributed.get("variants", {}).items():
        t = v.get("total") if "error" not in v else None
        if t is None or name == control:
            continue
        if name not in timed or (t["b_ms"] - t["a_ms"]) * (timed[name] - 1) >= 0:
            out += _too_few_traced(name, v, verdicts.get(name))
            continue
        change = shown_difference(t["a_ms"], t["b_ms"], attribution.DECIMALS)
        out += ["", f"**{name}'s traced steps changed the other way from its timed steps**: "
                f"{change:+.{attribution.DECIMALS}f} ms a traced step against {timed[name] - 1:+.1%} a timed "
                f"one. The traced steps are few ({v['chip_steps'][0]} and {v['chip_steps'][1]} chip-steps, "
                "`capture.trace`), so one outlier turns them; `perfkit trace breakdown` on each trial's folder "
                "gives every chip-step."]
    return out


def _too_few_traced(name: str, v: dict, verdict: str | None) -> list[str]:
    """A line where the attribution's total CI spans 0 while the timing gives a verdict, or is wider than the step:
    its trials of a traced step or two could not place the change, or (the CI excluding 0) only its sign (without it,
    a run timed slower whose traced total's CI was several steps wide, no part starred, said nothing of it)."""
    t = v["total"]
    if t["ci_lo_ms"] is None:  # no CI at all: the section's own line says why
        return []
    spans = not t["marked"] and verdict in ("slower", "faster")
    wide = t["ci_hi_ms"] - t["ci_lo_ms"] > max(t["a_ms"], t["b_ms"])
    if not (spans or wide):
        return []
    why = f"spans 0 where the timing says {verdict}" if spans else "is wider than the step"
    # categories whose own CIs exclude 0 are placed, whatever the total's (a total whose CI spanned 0 read 'too few
    # to place' beside ici and compute starred)
    placed = [r["key"] for r in v.get("category", ()) if attribution.starred(r)]
    # a wide CI that excludes 0 places the change's sign, not its size
    said = ("places its change only roughly" if t["marked"] else "places only parts of its change" if placed
            else "had too few traced steps to place its change")
    if placed and not t["marked"]:
        verb = "excludes" if len(placed) == 1 else "exclude"
        why += f", while {', '.join(placed)} {verb} 0 on {'its' if len(placed) == 1 else 'their'} own (starred above)"
    n, rounds = attribution.DECIMALS, 2 * max(v["trials"])
    # the maximum too: a case refuses a minimum above its maximum (the demo's is 5)
    return ["", f"**{name}'s attribution {said}**: its total's CI "
            f"[{t['ci_lo_ms']:+.{n}f}, {t['ci_hi_ms']:+.{n}f}] ms {why}, from {v['trials'][0]} and {v['trials'][1]} "
            f"trials of {v['chip_steps'][0]} and {v['chip_steps'][1]} chip-steps; more steps in `capture.trace` and "
            f"more rounds (`--set repeats.min={rounds} --set repeats.max={rounds}`) give it more."]


def _host_scheduled(summary: dict) -> str | None:
    """Why the run's arrival skew is its host's scheduling, where it is: its chips were XLA's CPU devices (as its
    devices were probed, else, a command case probing none, as its traces say), or its ranks' collectives ran on
    the CPUs (host ops measured: gloo) of the one host the run had; else None."""
    if on_cpu_devices(summary):
        processes = max((v.get("ranks", 1) for v in summary.get("variants", {}).values()), default=1)
        return ("These are CPU devices: the chips are threads sharing the host's cores" if processes == 1 else
                f"These are CPU devices: the chips are threads of {processes} processes sharing the host's cores, "
                "their collectives the processes' exchange (gloo)")
    env = summary.get("env") or {}
    variants = summary["breakdown"]["variants"].values()
    one_host = (env.get("hosts") or {}).get("count", 1) == 1
    if one_host and any(v.get("measured") == "host ops" for v in variants):
        return "These ranks' collectives ran on the host's CPUs (gloo): processes sharing one machine's cores"
    return None


def _hidden(bd: dict) -> list[str]:
    """Each variant's collectives in flight a step and the part hidden under compute, and each against
    the baseline; nothing when no variant has collectives."""
    ok = {n: v for n, v in bd["variants"].items() if "error" not in v and v.get("comm_ms")}
    base = bd["variants"].get(bd["baseline"], {})
    against = [(n, v) for n, v in ok.items() if n != bd["baseline"] and "comm_ms" in base]
    d = attribution.DECIMALS  # each change below the difference of the figures above
    lines = [f"- {n}'s collectives take {v['comm_ms']:.{d}f} ms a step, {v['hidden_ms']:.{d}f} ms of it hidden "
             f"under compute ({100 * v['overlap']:.0f}%)." for n, v in ok.items()]
    lines += [f"- {n} against {bd['baseline']}: {shown_difference(base['comm_ms'], v['comm_ms'], d):+.{d}f} ms of "
              f"collectives a step, {shown_difference(base['hidden_ms'], v['hidden_ms'], d):+.{d}f} ms hidden."
              for n, v in against]
    return ["", *lines] if lines else []


# the collectives tables' columns, said once under the first (the wait as `perfkit trace collectives`' steps give it)
_COLLECTIVE_COLUMNS = (
    "Per chip and step: count, instances; bytes sent per device; time, from a collective's start to its end; exposed, "
    "its part not under compute; hidden, the part under it. Exposed wait of the others: in a traced step, each chip's "
    "exposed wait at the kind's collectives, its time in them before their last chip arrived during which it ran "
    "nothing else (its part under compute is hidden), summed over the step, averaged over the step's chips other than "
    "the one that arrived last most often (every chip where none was last alone), then over the traced steps; summed "
    "over the kinds, it is the exposed wait `perfkit trace collectives` gives a step: the other chips' mean, or every "
    "chip's on average where no chip arrived last alone; - where no two chips of one clock ran the kind. GB/s: the "
    "bytes over the time.")


def _collectives(variants: dict, host_scheduled: str | None = None, callbacks: dict[str, int] | None = None
                 ) -> list[str]:
    """Each variant's collectives by kind (``perfkit.trace.collectives.summarize``), and its worst
    straggler step when the arrival skew passes ``STRAGGLER_SHARE`` of the step. On the host's CPUs
    (``host_scheduled``: why, ``_host_scheduled``) the skew is the host's scheduling: it is reported as such,
    never as a straggling chip. ``callbacks``: the host callbacks each variant's step program runs a step
    (``cost.host_callbacks``), said beside none: an interpreted Pallas kernel's remote copies."""
    rows = []
    for name, c in variants.items():
        if "error" in c or not c["kinds"]:
            calls = (callbacks or {}).get(name) if "error" not in c else None
            rows += ["", f"Collectives of {name}: {c.get('error', 'none in its traces')}" + (
                f"; its step program runs {calls} host callback{'s' * (calls != 1)} a step (Cost): "
                f"{cost.INTERPRETED}" if calls else "")]
            continue
        rows += ["", f"Collectives of {name} per chip and step (`perfkit trace collectives` on a trial folder "
                 "lists each one):", "",
                 "| kind | count | bytes sent | time (ms) | exposed (ms) | hidden (ms) | "
                 "exposed wait of the others (ms) | GB/s |",
                 "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for k in c["kinds"]:
            sent = "-" if k["bytes"] is None else f"{k['bytes']:.0f}"
            gbps = "-" if k["gbps"] is None else f"{k['gbps']:.3g}"
            wait = "-" if k["wait_ms"] is None else f"{k['wait_ms']:.3f}"  # (not measured: no two chips of one clock)
            rows.append(f"| {k['kind']} | {k['count']:.3g} | {sent} | {k['time_ms']:.3f} | {k['exposed_ms']:.3f} | "
                        f"{k['hidden_ms']:.3f} | {wait} | {gbps} |")
        if _COLLECTIVE_COLUMNS not in rows:
            rows += ["", _COLLECTIVE_COLUMNS]
        late = [s for s in c["steps"] if s["skew_share"] > STRAGGLER_SHARE]
        if not late:
            continue
        s = max(late, key=lambda s: s["skew_share"])
        skew = (f"Arrival skew (last chip's arrival minus the first's, summed over a step's collectives) passes "
                f"{100 * STRAGGLER_SHARE:.0f}% of the step in {len(late)} of {len(c['steps'])} traced steps of "
                f"{name}; the most, {100 * s['skew_share']:.1f}% of step {s['step']} of {s['trial']} "
                f"({s['skew_ms']:.3f} ms" + (f"; {SKEW_PAST_STEP})" if s["skew_share"] > 1 else ")"))
        if host_scheduled:
            rows += ["", f"{skew}. {host_scheduled}, so the skew is the host's scheduling, not a slow chip or rank; "
                     "none is flagged a straggler."]
        elif s.get("apart"):
            rows += ["", f"{skew}. {s['apart']} of that step's collectives, matched across ranks by their order, never "
                     "overlapped on their chips, so are not one transfer: they are left out, and the chip that "
                     "arrived last is not flagged a straggler."]
        elif not s["times_last"]:  # (its rank and device -1: two or more chips arrived last together each time)
            rows += ["", f"{skew}. No chip arrived last alone at that step's {s['matched']} collectives: none is "
                     "flagged a straggler."]
        else:
            rows += ["", f"{skew}. Straggler: rank {s['rank']} device {s['device']}, last to arrive at "
                     f"{s['times_last']} of that step's {s['matched']} collectives."]
    return rows


def _p_floor(c: dict) -> str:
    """How low the Mann-Whitney p can go with these trial counts, where it is exact (scipy's test is below 8
    trials a side, without ties): 2 / C(n_a + n_b, n_a), every trial median of one variant below the other's."""
    n_a, n_b = c.get("n_a") or 0, c.get("n_b") or 0
    if not 2 <= min(n_a, n_b) < 8:
        return ""
    return (f"; with {n_a} + {n_b} trials and no two trial medians alike it cannot go below "
            f"{min(1.0, 2 / math.comb(n_a + n_b, n_a)):.3g}, where tied medians make scipy's p an approximation that "
            "can")


def _verdict(summary: dict) -> str:
    """The verdict in one sentence, B against A on synced step time (a served system's: its first level's
    latency)."""
    c, a = summary["comparison"], summary["baseline"]
    b = compared_variant(summary)
    if c["ratio"] is None:
        missing = [n for n in (a, b) if trial_median(summary["variants"][n]) is None]
        # every trial of a variant hung: a longer timeout, not more rounds, may give it timed steps (not a deadlock)
        hung = " " + _more_trials(summary, "time its steps", missing) if hung_at_timeout(summary, missing) else ""
        why = rundir.left_out_text((a, b), rundir.left_out_of(summary))
        return "**No verdict**: a variant has no timed steps" + (f" ({why})." if why else ".") + hung
    shown_a, shown_b = step_times_text(trial_median(summary["variants"][a]), trial_median(summary["variants"][b]))
    serve = summary.get("serve")  # (a served system's figure: its first level's latency, per server process)
    what, of = (f"c={serve['concurrency'][0]} latency", "server processes'") if serve else ("step time", "trial")
    figures = (f"{b}/{a} {what} {_ratio(c)} ({shown_b} / {shown_a} ms, medians of {of} medians); "
               f"minimum effect {c['min_effect']:.0%}")
    once = " A side has one trial: the verdict may not hold on another run (Not verified says why)." \
        if one_trial_call(c) else ""
    return {"faster": f"**{b} is faster than {a}**: {figures}.{once}",
            "slower": f"**{b} is slower than {a}**: {figures}.{once}",
            "same": f"**{b} and {a} take the same time** (within the minimum effect): {figures}.",
            }.get(c["verdict"], f"**No verdict**: {figures}; " + (
                f"{NO_SPREAD}. " + _more_trials(summary, "give one") if without_ci(c)
                else "the CI reaches both sides of the minimum effect. " + _more_trials(summary)))


def _more_trials(summary: dict, aim: str = "narrow it", variants: list[str] | None = None) -> str:
    """How to ask for more trials when the verdict is unknown: the run's case again, with more rounds (that
    would ``aim``: narrow the CI, or give one), or where trials (of ``variants``, where given) hung a longer
    timeout; a stopped run, the rest of its own plan."""
    if summary.get("interrupted"):
        return (f"The run was stopped before its plan was done: `{resume_command(Path(summary['run_dir']))}` runs "
                f"the rest of it, which may {aim}.")
    command = (summary.get("reproduce") or {}).get("command", "perfkit run CASE")
    if hangs := hung_at_timeout(summary, variants):  # more rounds would each hang at the same timeout
        if hangs[1] is None:  # every one a deadlock: neither more trials nor a longer timeout ends it
            return (f"{hangs[0]}, where the chips part (Failed trials says where): a deadlock, which neither more "
                    "trials nor a longer timeout would end.")
        longer = f"e.g. `{command} {hangs[1]}`" if hangs[1].startswith("--set") else hangs[1]
        return (f"{hangs[0]} (Failed trials says where their ranks waited): more trials would hang alike where they "
                f"were stuck; where they were slow (a start under load), a longer timeout would {aim}: {longer}.")
    if summary.get("serve"):  # a serve case's rounds are its server restarts
        restarts = summary["serve"]["server_restarts"]
        return (f"More server restarts would {aim} (this run: {restarts} server process{'es' if restarts != 1 else ''}"
                f" a variant), e.g. `{command} {more_rounds(summary)}`.")
    rounds = rounds_run(summary)
    how = ("a run on several hosts runs `repeats.min` rounds" if multi_host(summary)
           else "rounds go on while the verdict is unknown, up to `repeats.max`")
    return (f"More trials would {aim}: {how} (this run: {rounds} round{'s' if rounds != 1 else ''}), e.g. "
            f"`{command} {more_rounds(summary)}`.")


def _described(summary: dict) -> list[str]:
    """The case and its variants in the case file's words (A is the baseline)."""
    a = summary["baseline"]
    lines = [summary["description"], ""] if summary.get("description") else []
    return lines + [f"- {'A' if n == a else 'B' if i == 1 else 'also'}: **{n}**"
                    + (f", {v['description']}" if v.get("description") else "")
                    for i, (n, v) in enumerate(summary["variants"].items())]


def environment_lines(summary: dict) -> list[str]:
    """The Environment section's lines: source tree, devices, host, packages, flags (a run's or a matrix's)."""
    env = summary.get("env") or {}
    src = env.get("source") or {}
    if src.get("git"):
        state = f"uncommitted changes (hash `{src.get('dirty_hash')}`)" if src.get("dirty") else "clean"
        source = f"commit `{src['commit'][:12]}`, tree `{src['tree']}`, {state}"
    else:
        source = "not a git checkout" if src else "-"
    dev = env.get("devices") or {}
    processes = dev.get("process_count", 1)
    devices = dev.get("error") or (f"{dev['count']} x {dev['kind']} (platform {dev['platform']}), {processes} "
                                   f"{'process' if processes == 1 else 'processes'}" if dev else
                                   "not probed (a command or served case: perfkit leaves its devices to the program "
                                   "it runs)")
    lines = [f"- source: {source}", f"- devices: {devices}"]
    if env.get("host"):
        lines.append(f"- host: `{env['host']}`, {env.get('cpus')} CPUs, Python {env.get('python')}, "
                     f"{env.get('platform')}")
    hosts = (env.get("hosts") or {}).get("count", 1)
    if hosts > 1:  # the run's env.json is its host 0's; each host writes its own once, a matrix's at its top
        of = "the matrix's " if summary.get("run_dir") and matrix_of(Path(summary["run_dir"])) else ""
        lines.append(f"- hosts: {hosts}; the lines here are host 0's, each host's own in {of}`hosts/host<I>/env.json`")
    lines.append(f"- packages: {', '.join(f'{k} {v}' for k, v in (env.get('packages') or {}).items() if v) or '-'}")
    lines += [f"- `{k}={v}`" for k, v in (env.get("flags") or {}).items()]
    return lines


PLOT_TITLES = {"step_times": "Step times per trial, in run order (timed synced steps; dotted: each variant's "
                             "trial medians)",
               "breakdown": "Mean traced step per chip: compute / ICI / DMA / idle (profiler on)",
               "psnr": "PSNR per frame, B vs A", "drift": "Latent drift per step, B vs A",
               "taps": "Agreement by layer (taps), B vs A"}
# a serve run's trials keep its lowest level's request latencies as their steps (``plots.step_times``)
SERVE_STEP_TIMES_TITLE = ("Request latencies at c={level}, one box per server process (trial), in run order "
                          "(good measured requests; dotted: each variant's process medians)")


def _plot_title(name: str, summary: dict) -> str:
    serve = summary.get("serve")
    if name == "step_times" and serve:
        return SERVE_STEP_TIMES_TITLE.format(level=serve["concurrency"][0])
    return PLOT_TITLES[name]


def _plots(plots: dict[str, str], summary: dict) -> list[str]:
    if not plots:
        return ["No plots (no timed steps)."]
    lines = []
    for name, path in plots.items():
        title = _plot_title(name, summary)
        # the title as a caption too: a rendered page shows an image's alt text only when it fails to load
        lines += [f"**{title}**", "", f"![{title}]({path})", ""]
    return lines[:-1]


def reproduce_lines(summary: dict) -> list[str]:
    """The Reproduce section's lines: checkout, command, the case as it ran (a run's or a matrix's)."""
    r = summary.get("reproduce")
    if not r:
        return ["Not recorded."]
    lines = ["```sh"] + ([f"cd {r['cwd']}"] if r.get("cwd") else [])  # the checkout, then, in the run's tree
    if r.get("commit"):
        at = f"-C {shlex.quote(r['checkout'])} " if r.get("checkout") else ""  # perfkit's checkout, not this folder
        lines.append(f"git {at}checkout {r['commit'][:12]}   # tree {r['tree']}")
    lines += [r["command"], "```", ""]
    if r.get("dirty"):
        lines += [f"The run's tree had uncommitted changes (hash `{r['dirty_hash']}`): the commit alone is "
                  "not the code that ran.", ""]
    lines.append(f"`{r['case_file']}` is the case as it ran (defaults and `--set` overrides applied).")
    for script in r.get("outside_tree") or []:  # (the commit and its dirty hash cover the checkout's files alone)
        where = ("is ignored by git in the checkout" if script.get("ignored") else
                 f"lies outside {'the checkout' if r.get('commit') else 'any git checkout'}")
        lines += ["", f"`{script['path']}` {where}: no commit holds it; it ran as sha256 `{script['sha256']}`, which a "
                      "copy must match."]
    if r.get("case_yaml"):
        lines += ["", "<details><summary>case.yaml</summary>", "", "```yaml", r["case_yaml"].rstrip(), "```", "",
                  "</details>"]
    return lines


def render(summary: dict, plots: dict[str, str] | None = None) -> str:
    """report.md, sections in a fixed order; ``plots`` as ``perfkit.report.plots.write_plots`` returns them."""
    plots = plots or {}
    out = [f"# perfkit run: {summary['case']}", "", summary_line(summary, Path("report.md")).rsplit(";", 1)[0], "",
           _verdict(summary), ""]
    out += [*_described(summary), ""]
    if summary.get("interrupted"):
        out += [f"> Interrupted: this report covers the trials finished before the stop; "
                f"`{resume_command(Path(summary['run_dir']))}` runs the rest of its plan.", ""]
    if summary["trials"]["failed"]:
        out += [f"> {len(summary['trials']['failed'])} trial(s) failed or hung: see Failed trials; the figures "
                "come from the trials that finished.", ""]
    out += ["## Environment", "", *environment_lines(summary), ""]
    if summary.get("serve"):  # a serve case: latency and outputs/min per concurrency level
        out += ["## Serving", "", *section(summary), ""]
    else:
        out += ["## Timing", "", *_timing(summary), ""]
    if summary.get("compile_cache"):
        out += ["## Compile cache", "", *_compile_cache(summary["compile_cache"]), ""]
    if summary["trials"]["failed"]:
        out += ["## Failed trials", "", *_failures(summary), ""]
    out += ["## Quality", "", *quality_section(summary, plots), *departure_section(summary, plots), ""]
    out += ["## Rank consistency", "", *_ranks(summary), ""]
    out += ["## Trace breakdown", "", *(_breakdown(summary) if summary.get("breakdown") else
                                        ["No profiler traces captured (a case's `capture.trace: [step, ...]` "
                                         "splits those steps into compute / ICI / DMA / idle)."]), ""]
    out += cost.section(summary)  # '## Cost', where a variant's trials wrote XLA dumps
    out += ["## Plots", "", *_plots(plots, summary), ""]
    out += ["## Reproduce", "", *reproduce_lines(summary), ""]
    out += ["## Not verified", "", *(f"- {n}" for n in summary["not_verified"]), ""]
    return "\n".join(out)


def write(run_dir: Path, summary: dict, steps) -> Path:
    """report.md and its plots (``plots/*.png``) of a run directory whose summary is ``summary``;
    ``steps``: its ``perfkit.analysis.timing.steps_frame`` (the step-time plot's rows)."""
    # matplotlib: only when a report is written
    from perfkit.report import plots

    made = plots.write_plots(run_dir, summary, steps)
    path = run_dir / "report.md"
    path.write_text(render(summary, made))
    return path
