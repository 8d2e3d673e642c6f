"""The serving part of ``report.md`` and of the summary line, formatted from ``summary["serve"]``
(``perfkit.analysis.serving``), and the latency plot per concurrency level."""

from __future__ import annotations

from pathlib import Path

from perfkit.common.digits import digits
from perfkit.common.json_figures import db_cell

LATENCY_PLOT = "plots/serve_latency.png"


def _s(ms) -> str:
    """Milliseconds as seconds, 3 decimals below 10 s."""
    return "-" if ms is None else f"{ms / 1e3:.3f}" if ms < 1e4 else f"{ms / 1e3:.1f}"


def _per_min(x, decimals: int = 1) -> str:
    return "-" if x is None else f"{x:.{decimals}f}"


def _ratio_ci(row: dict) -> str:
    """A comparison row's ratio with its CI where it has one: ``1.234 [1.100, 1.400]``."""
    ci = "" if row["ci_lo"] is None else f" [{row['ci_lo']:.3f}, {row['ci_hi']:.3f}]"
    return f"{row['ratio']:.3f}{ci}"


def _ratio(row: dict) -> str:
    return "-" if row["ratio"] is None else f"{_ratio_ci(row)} {row['verdict']}"


def _by(rows: list[dict], *keys: str) -> dict:
    return {tuple(r[k] for k in keys): r for r in rows}


def _dividing(rows: list[dict], scale: float = 1.0, at_least: int = 1) -> int:
    """The decimals with which each comparison row's two medians (over ``scale``) divide to its ratio shown."""
    return digits([(r["baseline_median"] / scale, r["variant_median"] / scale) for r in rows
                   if None not in (r["ratio"], r["baseline_median"], r["variant_median"])], at_least)


def headline(summary: dict) -> str:
    """The summary line's serving clause: outputs/min at the highest level (medians over processes, with the
    decimals it takes to divide to the ratios beside them), failed requests, and served outputs of good servers
    that could not be compared with the reference."""
    s = summary["serve"]
    top, base = s["concurrency"][-1], summary["baseline"]
    levels = _by(s["levels"], "variant", "level")
    shown = [r for r in s["comparisons"] if r["level"] == top and r["metric"] == "outputs_per_min"
             and r["ratio"] is not None]
    decimals = _dividing(shown)
    rates = [f"{v} {_per_min(levels[(v, top)]['outputs_per_min'], decimals)}" for v in summary["variants"]
             if (v, top) in levels]
    parts = [f"; c={top} outputs/min " + (", ".join(rates) or "-")]
    for r in shown:
        parts.append(f", {r['variant']}/{base} {_ratio_ci(r)} -> {r['verdict']}")
    if s["failed_count"]:
        parts.append(f"; {s['failed_count']} failed request(s)")
    # An answer that is no video (JSON where a body was expected) is no failed request: say so here, where a
    # reader looks. Servers that failed are named in the line already.
    good = {r["variant"] for r in s["levels"]}
    uncompared = [r for r in (s.get("quality") or {}).get("rows", ()) if r.get("error") and r["variant"] in good]
    if uncompared:
        first = uncompared[0]
        parts.append(f"; {len(uncompared)} served output(s) not compared ({first['variant']} {first['prompt']}: "
                     f"{first['error']})")
    return "".join(parts)


def plot_latency(samples: dict[str, dict[str, list[float]]], levels: list[int], path: Path) -> Path:
    """One panel per concurrency level: each variant's request latencies (box and points)."""
    # numpy and matplotlib: only when a report draws the latency plot
    import numpy as np
    from matplotlib.figure import Figure

    from perfkit.common.figures import save_figure

    fig = Figure(figsize=(3.2 * len(levels) + 1, 3.6))
    axes = fig.subplots(1, len(levels), sharey=True, squeeze=False)
    names = list(samples)
    for ax, level in zip(axes[0], levels):
        data = [np.asarray(samples[v].get(str(level), []), float) / 1e3 for v in names]
        ax.boxplot([d if d.size else [np.nan] for d in data], showfliers=False)
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20)
        for i, d in enumerate(data, start=1):
            ax.plot(np.full(d.size, i) + np.linspace(-0.15, 0.15, d.size), d, ".", alpha=0.6)
        ax.set_title(f"concurrency {level}")
    axes[0][0].set_ylabel("request latency (s)")
    return save_figure(fig, path)


def _main_table(summary: dict) -> list[str]:
    s = summary["serve"]
    first, levels = s["concurrency"][0], _by(s["levels"], "variant", "level")
    head = (f"| variant | latency c={first} (s) | " + " | ".join(f"outputs/min c={c}" for c in s["concurrency"])
            + " | failed requests |")
    rows = [head, "| --- |" + " ---: |" * (len(s["concurrency"]) + 2)]
    for v in summary["variants"]:
        mine = [levels.get((v, c)) for c in s["concurrency"]]
        if not any(mine):
            rows.append(f"| {v} | no good server process |" + " |" * (len(s["concurrency"]) + 1))
            continue

        def rate(r: dict | None) -> str:
            if r is None:
                return "-"
            spread = "" if r["processes"] < 2 else \
                f" ({_per_min(r['outputs_per_min_min'])}-{_per_min(r['outputs_per_min_max'])})"
            return _per_min(r["outputs_per_min"]) + spread

        failed = sum(r["failed"] for r in mine if r)
        rows.append(f"| {v} | {_s(mine[0]['latency_p50_ms']) if mine[0] else '-'} | "
                    + " | ".join(rate(r) for r in mine) + f" | {failed} |")
    return rows


def _comparisons(summary: dict) -> list[str]:
    s, base = summary["serve"], summary["baseline"]
    table = _by(s["comparisons"], "variant", "level", "metric")
    of = {m: [r for r in s["comparisons"] if r["metric"] == m] for m in ("latency_ms", "outputs_per_min")}
    seconds, per_min = _dividing(of["latency_ms"], 1e3, 3), _dividing(of["outputs_per_min"])

    def cell(row: dict | None, text) -> str:
        if row is None or row["ratio"] is None:
            return "-"
        medians = "" if row["variant_median"] is None else \
            f"{text(row['variant_median'])} / {text(row['baseline_median'])} = "
        return medians + _ratio(row)

    rows = [f"| variant / {base} | concurrency | median latency (s): variant / {base} = ratio [95% CI] | "
            f"outputs/min: variant / {base} = ratio [95% CI] |", "| --- | ---: | --- | --- |"]
    for v in dict.fromkeys(r["variant"] for r in s["comparisons"]):
        for c in s["concurrency"]:
            lat = cell(table.get((v, c, "latency_ms")), lambda ms: f"{ms / 1e3:.{seconds}f}")
            out = cell(table.get((v, c, "outputs_per_min")), lambda x: _per_min(x, per_min))
            rows.append(f"| {v} | {c} | {lat} | {out} |")
    return rows


def _processes(summary: dict) -> list[str]:
    s = summary["serve"]
    servers = {x["trial"]: x for x in s["servers"]}
    rows = ["| variant | trial | server | ready (s) | concurrency | good / sent | latency p50 / p90 / max (s) | "
            "outputs/min |", "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in s["processes"]:
        ready = servers.get(r["trial"], {}).get("ready_s")
        ready = "-" if ready is None else f"{ready:.3f}"  # kept to the ms: 0.740, not 0.74 beside 0.493
        rows.append(f"| {r['variant']} | {r['trial']} | {r['trial_status']} | {ready} | "
                    f"{r['level']} | {r['ok']} / {r['sent']} | {_s(r['latency_p50_ms'])} / {_s(r['latency_p90_ms'])} / "
                    f"{_s(r['latency_max_ms'])} | {_per_min(r['outputs_per_min'])} |")
    return rows


def _quality(summary: dict) -> list[str]:
    q = summary["serve"]["quality"]
    if not q["rows"]:
        return ["No served outputs to compare."]
    against = "the oracle" if q["reference"] == "oracle" else f"{q['reference']}'s output"
    rows = [f"Served outputs against {against}, per prompt (first good output of the first good server process; "
            f"PSNR: mean over differing frames, data range 255; codec floor: the reference through "
            f"`{q['codec']}`, the best a video served through that codec can score):", "",
            "| prompt | variant | PSNR (dB) | pooled MSE (dB) | worst frame (dB) | codec floor (dB) | bit-identical |",
            "| --- | --- | ---: | ---: | ---: | ---: | :---: |"]
    for r in q["rows"]:
        if r.get("error"):
            rows.append(f"| {r['prompt']} | {r['variant']} | {r['error']} | | | {db_cell(r['codec_floor_db'])} | |")
            continue
        same = "yes" if r["bit_identical"] else "no"
        rows.append(f"| {r['prompt']} | {r['variant']} | {db_cell(r['psnr_db'])} | {db_cell(r.get('psnr_pooled_db'))} | "
                    f"{db_cell(r.get('psnr_min_db'))} | {db_cell(r['codec_floor_db'])} | {same} |")
    return rows


def section(summary: dict) -> list[str]:
    """The report's Serving section; writes the latency plot into the run directory."""
    s = summary["serve"]
    plot = plot_latency(s["latency_samples_ms"], s["concurrency"], Path(summary["run_dir"]) / LATENCY_PLOT) \
        if s["latency_samples_ms"] else None
    lines = [f"Closed loop: {s['prompts']} prompts with their seeds, {s['requests']} measured requests per "
             f"concurrency level after {s['warmup']} warmup request(s), {s['server_restarts']} fresh server "
             "process(es) per variant, interleaved. Latency is the median over the pooled requests of the good "
             "processes, measured at the client (sending the request to holding the output); outputs/min is the "
             "median over processes (min-max in parentheses).", "", *_main_table(summary), "",
             "Against the baseline, per level (latency: the median over processes of each process's median, "
             "not the pooled median above, its CI a bootstrap over processes, then requests; outputs/min: "
             "the median over processes, a CI only with two or more per side; *faster* means lower latency or "
             "more outputs/min):", "", *_comparisons(summary), "", "Per server process:", "", *_processes(summary)]
    failures = [x for x in s["servers"] if x["failure"]]
    if failures:
        lines += ["", "Servers that did not finish (log tails under Failed trials):", "",
                  *(f"- trial {x['trial']} ({x['variant']}): **{x['status']}**: {x['failure']}" for x in failures)]
    if s["failed_count"]:
        lines += ["", f"Failed requests ({s['failed_count']}"
                  + (f", the first {len(s['failed_requests'])} listed" if s["failed_count"] > len(s["failed_requests"])
                     else "") + "):", "",
                  *(f"- trial {r['trial']} ({r['variant']}), c={r['level']} {r['phase']} #{r['index']} "
                    f"({r['prompt']}): {r['error']}" for r in s["failed_requests"])]
    if plot is not None:
        lines += ["", f"![Request latency per concurrency level]({LATENCY_PLOT})"]
    lines += ["", *_quality(summary)]
    return lines
