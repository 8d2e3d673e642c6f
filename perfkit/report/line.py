"""The one line ``perfkit run`` prints at the end of a run (and ``perfkit check`` repeats): each
variant's step time, B/A with its CI and verdict, PSNR, divergent ranks, failures, and the report's path."""

from __future__ import annotations

import math
from pathlib import Path

from perfkit.common.summary import compared_variant, from_json
from perfkit.serve.report import headline


def summary_line(summary: dict, report: Path) -> str:
    c = summary["comparison"]
    a = summary["baseline"]
    b = compared_variant(summary)
    va, vb = summary["variants"][a]["step_ms"]["median"], summary["variants"][b]["step_ms"]["median"]
    parts = [f"{summary['case']}:"]
    if summary.get("serve"):
        parts.append(f"c={summary['serve']['concurrency'][0]} latency")
    if va is not None and vb is not None:
        parts.append(f"{a} {va:.2f} ms, {b} {vb:.2f} ms, {b}/{a} {c['ratio']:.3f} "
                     f"[{c['ci'][0]:.3f}, {c['ci'][1]:.3f}] -> {c['verdict']}")
    else:
        missing = " and ".join(n for n, v in ((a, va), (b, vb)) if v is None)
        parts.append(f"no timed steps for {missing} -> unknown")
    if summary.get("serve"):
        parts.append(headline(summary))
    q = summary.get("quality")
    if q:
        # A summary read back from JSON holds infinite PSNR as "inf" (perfkit.common.summary.json_safe).
        db = from_json(q["psnr_db"])
        psnr = "inf (bit-identical)" if q["bit_identical"] else "inf dB" if db == math.inf else f"{db:.1f} dB"
        parts.append(f"; PSNR {b} vs {a} {psnr}")
    nf = summary.get("noise_floor")
    if nf and nf["half_width"] is not None:
        parts.append(f"; A/A noise floor {nf['ci'][0] - 1:+.1%}..{nf['ci'][1] - 1:+.1%}")
    divergent = [f"{v} (ranks {', '.join(map(str, r.get('divergent_ranks') or []))})"
                 for v, r in (summary.get("ranks") or {}).items() if r.get("consistent") is False]
    if divergent:
        parts.append(f"; DIVERGENT programs: {', '.join(divergent)}")
    failed = summary["trials"]["failed"]
    if failed:
        parts.append(f"; {len(failed)} trial(s) failed")
    if summary.get("interrupted"):
        parts.append("; interrupted")
    parts.append(f"; report {report}")
    return " ".join(parts).replace(" ;", ";")
