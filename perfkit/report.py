"""``report.md``: the page a reviewer reads. It only formats what ``perfkit.analyze`` computed."""

from __future__ import annotations

from pathlib import Path


def _ms(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _ratio(c: dict) -> str:
    if c["ratio"] is None or None in c["ci"]:
        return "no ratio (a side has no timed trials)"
    return f"**{c['ratio']:.3f}**, 95% CI [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]"


METRIC_WORDS = {"step_ms": "median step time (synced)", "natural_step_ms": "natural step time (one sync per pass)"}


def _timing(summary: dict) -> list[str]:
    a = summary["baseline"]
    rows = ["| variant | step median (ms) | p25 - p75 (ms) | timed steps | natural step (ms) | first step (ms) | "
            "compile (s) | trials (failed) |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, v in summary["variants"].items():
        s, compile_s = v["step_ms"], v["values"].get("compile_s", {}).get("median")
        rows.append(f"| {name} | {_ms(s['median'])} | {_ms(s['p25'])} - {_ms(s['p75'])} | {s['n']} | "
                    f"{_ms(v['natural_step_ms']['median'])} | {_ms(v['first_step_ms']['median'])} | "
                    f"{_ms(compile_s)} | {v['trials']} ({v['failed']}) |")
    rows.append("")
    for c in summary["comparisons"]:
        p = "-" if c["p_value"] is None else f"{c['p_value']:.3g}"
        rows.append(f"- {c['variant']}/{a}, {METRIC_WORDS[c['metric']]}: {_ratio(c)}, Mann-Whitney p = {p} "
                    f"over {c['n_a']} + {c['n_b']} trials; minimum effect {c['min_effect']:.0%} -> "
                    f"**{c['verdict']}**.")
    rows += ["", "Ratios are of medians of per-trial medians; CIs come from a hierarchical bootstrap "
             "(trials, then steps within them)."]
    nf = summary.get("noise_floor")
    if nf:
        width = ("unknown (too few trials)" if nf["half_width"] is None else
                 f"{nf['ci'][0] - 1:+.1%} to {nf['ci'][1] - 1:+.1%} (95% CI of A/A)")
        rows += ["", f"A/A noise floor ({nf['variant']}, the baseline run again): {width}. A B/A change "
                 "inside this range cannot be told from run-to-run noise on this machine."]
    return rows


def _db(x) -> str:
    return "inf" if x in ("inf", float("inf")) else "-" if x is None else f"{x:.2f}"


def _quality_row(label: str, q: dict) -> str:
    if q["kind"] == "tensor":
        return (f"| {label} | {_db(q['psnr_db'])} | - | - | {q['mean_abs_diff']:.3g} | {q['max_abs_diff']:.3g} | "
                f"- | {'yes' if q['bit_identical'] else 'no'} |")
    return (f"| {label} | {_db(q['psnr_db'])} | {_db(q['psnr_pooled_db'])} | {_db(q['psnr_min_db'])} | "
            f"{q['mean_abs_diff']:.3f} | {q['max_abs_diff']:.0f} | {q['share_over_16']:.2%} | "
            f"{'yes' if q['bit_identical'] else 'no'} |")


def _quality(summary: dict) -> list[str]:
    """Conventions as in ``perfkit.quality``: mean PSNR over differing frames, pooled = ffmpeg's average."""
    import pandas as pd

    from perfkit.quality import plot_drift

    q = summary.get("quality")
    a = summary["baseline"]
    if not q:
        return ["No comparable outputs."]
    b = next(n for n in summary["variants"] if n != a)
    header = ["| comparison | PSNR mean of differing frames (dB) | PSNR pooled MSE (dB) | worst frame (dB) | "
              "mean abs diff (/255) | max abs diff | abs diff > 16 | bit-identical |",
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: | :---: |"]
    what = (f"{q['frames']} frames, data range 255, {q['identical_frames']} of {q['frames']} frames identical"
            if q["kind"] == "frames" else "tensor; PSNR over A's range")
    lines = [f"`{q['file']}` ({what}):", "", *header, _quality_row(f"{b} vs {a}", q)]
    broken = {name: fq["error"] for name, fq in q["files"].items() if "error" in fq}
    lines += [_quality_row(f"`{name}`: {b} vs {a}", fq) for name, fq in q["files"].items()
              if name != q["file"] and name not in broken]
    oracle = q.get("oracle") or {}
    lines += [_quality_row(f"{v} vs oracle", oq) for v, oq in oracle.get("variants", {}).items()]
    notes = [f"`{name}` not compared: {error}" for name, error in broken.items()]
    if oracle:
        notes.append(f"Oracle `{oracle['path']}`" + (f" not compared: {oracle['error']}" if "error" in oracle else "."))
    if q.get("drift_error"):
        notes.append(f"Latent drift not computed: {q['drift_error']}")
    lines += ["", *(f"- {n}" for n in notes)] if notes else []
    drift = q.get("drift")
    if drift:
        plot = plot_drift(pd.DataFrame(drift), Path(summary["run_dir"]) / "plots" / "drift.png", f"{b} against {a}")
        lines += ["", f"Latent drift of {b} against {a} per step (PSNR over {a}'s range; plot "
                  f"`{plot.relative_to(summary['run_dir'])}`):", "",
                  "| step | relative L2 | cosine | PSNR (dB) | max abs diff |", "| ---: | ---: | ---: | ---: | ---: |",
                  *(f"| {r['step']} | {r['rel_l2']:.3e} | {'-' if r['cosine'] is None else format(r['cosine'], '.8f')}"
                    f" | {_db(r['psnr_db'])} | {r['max_abs_diff']:.3g} |" for r in drift)]
    det = []
    for n, d in summary.get("determinism", {}).items():
        if d:
            spread = ""
            if not d["bit_identical"]:
                spread = f", {d['differing_runs']} differ from the first"
                if "psnr_min_db" in d:
                    spread += f": worst PSNR {_db(d['psnr_min_db'])} dB, max abs diff {d['max_abs_diff']}"
                if "rel_l2_max" in d:
                    spread += f"; tensors: worst relative L2 {d['rel_l2_max']:.3e}"
            if "error" in d:
                spread += f" ({d['error']})"
            verdict = {True: "bit-identical", False: "not bit-identical", None: "not checked"}[d["bit_identical"]]
            det.append(f"{n}: {d['runs']} runs {verdict} (sha256 {d['sha256']}){spread}")
    if det:
        lines += ["", "Determinism: " + "; ".join(det) + "."]
    return lines


def _first_difference(first: dict | None) -> str:
    """A table cell: where the first divergent rank's program first differs from the majority's."""
    if not first:
        return "-"
    rank, ref = f"rank {first['ranks'][0]}", f"rank {first['against_rank']}"
    if first["same_program"]:
        moved = ", ".join(f"{m['collective']} {m['delta']:+,} B" for m in first["receive_moved"])
        return f"`{first['module']}`: same program, receive buffers moved on {rank}: {moved}"

    def code(inst: dict | None) -> str:
        if inst is None:
            return "(no counterpart)"
        text = inst["text"] if len(inst["text"]) <= 100 else inst["text"][:100] + " ..."
        return f"``{text.replace('|', '&#124;')}``"

    return f"`{first['module']}`: {rank} {code(first['rank'])}; {ref} {code(first['majority'])}"


def _ranks(summary: dict) -> list[str]:
    """Rank consistency per variant; for a variant whose ranks diverged, hlo-diff's Markdown detail."""
    from perfkit.hlo.render import rank_list, ranks_report

    rows = ["| variant | consistent | rank groups | first differing instruction | checked |",
            "| --- | --- | --- | --- | --- |"]
    details = []
    for name, r in summary["ranks"].items():
        cons = {True: "yes", False: "**no**", None: "-"}[r["consistent"]]
        groups = " / ".join(rank_list(g) for g in r["groups"]) or "-"
        rows.append(f"| {name} | {cons} | {groups} | {_first_difference(r.get('first_difference'))} | {r['checked']} |")
        if r["consistent"] is False and r.get("hlo_diff"):
            details += ["", f"### {name}: programs per rank", "", ranks_report(r["hlo_diff"], markdown=True).rstrip()]
    return rows + details


def _failures(summary: dict) -> list[str]:
    from perfkit.launch import exit_text
    from perfkit.stackdump import where_threads_wait

    lines = []
    for f in summary["trials"]["failed"]:
        lines.append(f"- trial {f['index']} ({f['variant']}): **{f['status']}**")
        for r in f["ranks"]:
            if r.get("exit_code") not in (0,) or r.get("running_at_end"):
                where = "still running at the end" if r.get("running_at_end") else exit_text(r["exit_code"])
                lines.append(f"  - rank {r['rank']}: {where}, {r.get('steps_done', 0)} steps done, "
                             f"last mark {r.get('last_mark')}")
                if r.get("stacks"):
                    lines += [f"    - waiting in `{w}`" for w in where_threads_wait(r["stacks"])[:6]]
                    lines.append(f"    (every thread's stack: `{f.get('dir', 'trials/..')}/rank{r['rank']}/stacks.txt`)")
                if r.get("stderr_tail"):
                    lines += ["    ```", *("    " + s for s in r["stderr_tail"].splitlines()[-8:]), "    ```"]
    return lines


def _breakdown(summary: dict) -> list[str]:
    """The traced steps split per chip (``perfkit trace breakdown``) and the op kinds that moved most."""
    bd = summary["breakdown"]

    def cell(v: dict, part: str) -> str:
        return f"{v[part + '_ms']:.3f} ({100 * v[part + '_ms'] / v['span_ms']:.0f}%)" if v["span_ms"] else "-"

    rows = ["| variant | chip-steps (trials) | step span (ms) | compute | exposed ICI | local DMA | idle |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, v in bd["variants"].items():
        if "error" in v:
            rows.append(f"| {name} | {v['error']} | | | | | |")
        else:
            rows.append(f"| {name} | {v['chip_steps']} ({v['trials']}) | {v['span_ms']:.3f} | "
                        + " | ".join(cell(v, p) for p in ("compute", "ici", "dma", "idle")) + " |")
    rows += ["", "Mean traced step per chip; each instant goes to compute, else exposed ICI, else local DMA, "
             "else idle (`perfkit trace breakdown` on the trial folders gives every chip and step)."]
    for name, deltas in bd["op_deltas"].items():
        rows += ["", f"Largest changes of device time per chip and step, {name} against {bd['baseline']}, "
                 f"by op {bd['by']} (ms):", "", f"| op {bd['by']} | category | {bd['baseline']} | {name} | delta |",
                 "| --- | --- | ---: | ---: | ---: |",
                 *(f"| `{d['key']}` | {d['category']} | {d['a_ms']:.3f} | {d['b_ms']:.3f} | {d['delta_ms']:+.3f} |"
                   for d in deltas)]
    return rows


def render(summary: dict) -> str:
    from perfkit.analyze import summary_line

    src = (summary.get("env") or {}).get("source") or {}
    tree = f"{src.get('tree', '?')}{' (dirty ' + str(src.get('dirty_hash')) + ')' if src.get('dirty') else ''}"
    out = [f"# perfkit run: {summary['case']}", "", summary_line(summary, Path("report.md")).rsplit(";", 1)[0], ""]
    if summary.get("interrupted"):
        out += ["> Interrupted: this report covers the trials finished before the stop.", ""]
    out += ["## Environment", "", f"- tree: `{tree}`",
            f"- packages: {', '.join(f'{k} {v}' for k, v in (summary['env'].get('packages') or {}).items() if v)}",
            f"- devices: {summary['env'].get('devices')}", ""]
    out += ["## Timing", "", *_timing(summary), ""]
    if summary["trials"]["failed"]:
        out += ["## Failed trials", "", *_failures(summary), ""]
    out += ["## Quality", "", *_quality(summary), ""]
    if summary.get("breakdown"):
        out += ["## Trace breakdown", "", *_breakdown(summary), ""]
    out += ["## Rank consistency", "", *_ranks(summary), ""]
    out += ["## Not verified", "", *(f"- {n}" for n in summary["not_verified"]), ""]
    return "\n".join(out)


def write(run_dir: Path, summary: dict) -> Path:
    path = run_dir / "report.md"
    path.write_text(render(summary))
    return path
