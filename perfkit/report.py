"""``report.md``: the page a reviewer reads. It only formats what ``perfkit.analyze`` computed."""

from __future__ import annotations

from pathlib import Path


def _ms(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _timing(summary: dict) -> list[str]:
    c = summary["comparison"]
    rows = ["| variant | step median (ms) | p25 - p75 (ms) | timed steps | trials (failed) | first step (ms) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, v in summary["variants"].items():
        s = v["step_ms"]
        rows.append(f"| {name} | {_ms(s['median'])} | {_ms(s['p25'])} - {_ms(s['p75'])} | {s['n']} | "
                    f"{v['trials']} ({v['failed']}) | {_ms(v['first_step_ms']['median'])} |")
    p = "-" if c["p_value"] is None else f"{c['p_value']:.3g}"
    rows += ["", f"B/A ratio of median step time: **{c['ratio']:.3f}**, 95% CI [{c['ci'][0]:.3f}, "
             f"{c['ci'][1]:.3f}] (hierarchical bootstrap over trials and steps), Mann-Whitney p = {p} over "
             f"{c['n_a']} + {c['n_b']} trial medians; minimum effect {c['min_effect']:.0%} -> "
             f"**{c['verdict']}**."]
    return rows


def _quality(summary: dict) -> list[str]:
    q = summary.get("quality")
    a = summary["baseline"]
    if not q:
        return ["No comparable outputs."]
    b = next(n for n in summary["variants"] if n != a)
    psnr = "inf" if q["bit_identical"] else f"{q['psnr_db']:.2f}"
    lines = [f"`{q['file']}`, {b} against {a}, {q['frames']} frames, data range 255:", "",
             "| PSNR mean of frames (dB) | PSNR pooled MSE (dB) | worst frame (dB) | mean abs diff (/255) | max abs diff | bit-identical |",
             "| ---: | ---: | ---: | ---: | ---: | :---: |",
             f"| {psnr} | {q['psnr_pooled_db']:.2f} | {q['psnr_min_db']:.2f} | {q['mean_abs_diff']:.3f} | "
             f"{q['max_abs_diff']:.0f} | {'yes' if q['bit_identical'] else 'no'} |"]
    det = [f"{n}: {d['runs']} runs {'bit-identical' if d['bit_identical'] else 'differ'} (sha256 {d['sha256']})"
           for n, d in summary.get("determinism", {}).items() if d]
    if det:
        lines += ["", "Determinism: " + "; ".join(det) + "."]
    return lines


def _ranks(summary: dict) -> list[str]:
    rows = ["| variant | consistent | groups | checked |", "| --- | --- | --- | --- |"]
    for name, r in summary["ranks"].items():
        cons = {True: "yes", False: "**no**", None: "-"}[r["consistent"]]
        rows.append(f"| {name} | {cons} | {r['groups']} | {r['checked']} |")
    return rows


def _failures(summary: dict) -> list[str]:
    lines = []
    for f in summary["trials"]["failed"]:
        lines.append(f"- trial {f['index']} ({f['variant']}): **{f['status']}**")
        for r in f["ranks"]:
            if r.get("exit_code") not in (0,) or r.get("running_at_end"):
                where = "still running at the end" if r.get("running_at_end") else f"exit code {r['exit_code']}"
                lines.append(f"  - rank {r['rank']}: {where}, {r.get('steps_done', 0)} steps done, "
                             f"last mark {r.get('last_mark')}")
                if r.get("stderr_tail"):
                    lines += ["    ```", *("    " + s for s in r["stderr_tail"].splitlines()[-8:]), "    ```"]
    return lines


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
    out += ["## Rank consistency", "", *_ranks(summary), ""]
    out += ["## Not verified", "", *(f"- {n}" for n in summary["not_verified"]), ""]
    return "\n".join(out)


def write(run_dir: Path, summary: dict) -> Path:
    path = run_dir / "report.md"
    path.write_text(render(summary))
    return path
