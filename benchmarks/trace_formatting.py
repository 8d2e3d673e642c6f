"""The trace commands' two formatting helpers against the plain pandas and json calls whose bytes they
write: ``cli.trace.text_table`` against ``DataFrame.to_string(index=False)`` on ``perfkit trace
breakdown``'s step table, and ``cli.trace._echo_json`` against ``json.dumps(..., indent=1)`` of the rows
on ``perfkit trace collectives --json``'s instances; each checked byte-identical, timed in one process,
interleaved, --repeats times (medians).

    .venv/bin/python benchmarks/trace_formatting.py                       # 6M events, the benchmark's shape
    .venv/bin/python benchmarks/trace_formatting.py --shape xprof --instances 200000

The profile is ``trace_breakdown.build``'s. json's indenting encoder is pure Python and keeps the whole
document: on all of a 6M-event profile's instances it takes minutes and gigabytes, so the instances are
cut to --instances rows for both (the helper's time on all of them is printed too).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from trace_breakdown import build  # noqa: E402

from perfkit.cli import trace as cli  # noqa: E402
from perfkit.trace.breakdown import COLUMNS, COMM, TIMES, shown_parts  # noqa: E402
from perfkit.trace.shards import breakdown_traces, collectives_traces  # noqa: E402


def _timed(call) -> tuple[float, str]:
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        call()
    return time.perf_counter() - start, out.getvalue()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=6_000_000)
    ap.add_argument("--shape", choices=["benchmark", "xprof"], default="benchmark")
    ap.add_argument("--instances", type=int, default=200_000, help="collective instances json.dumps formats")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="trace-format-") as folder:
        path = Path(folder) / "bench.xplane.pb"
        build(path, args.events, shape=args.shape)
        rows, _ = breakdown_traces([path])
        found, steps_from = collectives_traces([path])
    # the step table as `perfkit trace breakdown` prints it
    hidden = [c for c in TIMES if c != "span_ps" and c.removesuffix("_ps") not in shown_parts(rows)]
    table = cli._ms(rows[COLUMNS].drop(columns=hidden), [c for c in TIMES + COMM if c not in hidden])
    table["overlap"] = rows["overlap"].map(lambda v: "-" if v != v else f"{100 * v:.1f}%")
    instances = found["instances"].head(args.instances)
    doc = {"steps_from": steps_from, "ops": cli._json_rows(found["ops"]), "steps": cli._json_rows(found["steps"])}
    times: dict[str, list[float]] = {k: [] for k in ("text_table", "to_string", "_echo_json", "json.dumps")}
    for _ in range(args.repeats):  # interleaved: the machine's drift slows both alike
        t, ours = _timed(lambda: print(cli.text_table(table)))
        times["text_table"].append(t)
        t, plain = _timed(lambda: print(table.to_string(index=False)))
        times["to_string"].append(t)
        assert ours == plain, "text_table differs from to_string"
        t, ours = _timed(lambda: cli._echo_json(doc, "instances", instances))
        times["_echo_json"].append(t)
        t, plain = _timed(lambda: print(json.dumps({**doc, "instances": cli._json_rows(instances)}, indent=1)))
        times["json.dumps"].append(t)
        assert ours == plain, "_echo_json differs from json.dumps"
    whole, _ = _timed(lambda: cli._echo_json(doc, "instances", found["instances"]))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{args.events:,} events ({args.shape} shape); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"breakdown's step table, {len(table):,} rows: text_table {med['text_table']:.3f} s, "
          f"to_string(index=False) {med['to_string']:.3f} s ({med['to_string'] / med['text_table']:.0f}x), the same text")
    print(f"collectives --json, {len(instances):,} instances: _echo_json {med['_echo_json']:.2f} s, json.dumps(indent=1) "
          f"{med['json.dumps']:.2f} s ({med['json.dumps'] / med['_echo_json']:.1f}x), the same text; _echo_json on all "
          f"{len(found['instances']):,}: {whole:.2f} s")


if __name__ == "__main__":
    main()
