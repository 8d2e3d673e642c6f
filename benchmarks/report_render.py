"""What rendering a run's report costs: summary.json (statistics, quality of the outputs), the plots,
report.md, and `perfkit check` against a baseline, on a hand-made run of realistic size.

    .venv/bin/python benchmarks/report_render.py [--trials 8] [--steps 40] [--frames 121] [--repeats 3]

The run: two variants, ``--trials`` trials each of ``--steps`` synced steps, each trial writing a
``--frames`` x 272 x 480 RGB clip (B's slightly off). Figures are medians over ``--repeats`` (wall clock,
this machine as loaded as it is); the first import of matplotlib and pandas is reported apart.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml


def make_run(run: Path, trials: int, steps: int, frames: int) -> None:
    rng = np.random.default_rng(0)
    clip = rng.integers(0, 256, size=(frames, 272, 480, 3), dtype=np.uint8)
    off = clip.copy()
    off[:, :8, :8] ^= 1
    run.mkdir(parents=True)
    case = {"name": "bench", "command": ["python", "bench.py"], "warmup": 2, "variants": {"a": {}, "b": {}},
            "capture": {"xla_dump": "none", "trace": [], "outputs": True}}
    (run / "case.yaml").write_text(yaml.safe_dump(case))
    (run / "env.json").write_text(json.dumps({"source": {"git": False}, "devices": {}}))
    records = []
    for i in range(2 * trials):
        variant = "ab"[i % 2] if (i // 2) % 2 == 0 else "ba"[i % 2]
        ms = (10.0 if variant == "a" else 11.0) + rng.normal(0, 0.3, steps)
        out = run / f"trials/{i:02d}-{variant}/rank0/outputs"
        out.mkdir(parents=True)
        np.save(out / "frames.npy", clip if variant == "a" else off)
        records.append({"index": i, "variant": variant, "round": i // 2, "dir": f"trials/{i:02d}-{variant}",
                        "status": "ok", "wall_s": 1.0, "warmup": 2, "steps_ms": ms.tolist(), "natural_ms": [],
                        "values": {"compile_s": 2.0}, "ranks": []})
    (run / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--frames", type=int, default=121)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    t = time.perf_counter()
    import matplotlib.figure  # noqa: F401
    import pandas  # noqa: F401
    imports_s = time.perf_counter() - t
    from perfkit.analysis import summary as analyze
    from perfkit.report import check
    from perfkit.report import plots
    from perfkit.report import markdown as report
    from perfkit.analysis import timing
    from perfkit.rundata.rundir import read_trials

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        make_run(run, args.trials, args.steps, args.frames)
        times: dict[str, list[float]] = {"summary": [], "plots": [], "report.md": [], "check": []}
        for _ in range(args.repeats):
            t = time.perf_counter()
            _, summary = analyze.summarize_run(run)
            times["summary"].append(time.perf_counter() - t)
            t = time.perf_counter()
            made = plots.write_plots(run, summary, timing.steps_frame(read_trials(run)))
            times["plots"].append(time.perf_counter() - t)
            t = time.perf_counter()
            (run / "report.md").write_text(report.render(summary, made))
            times["report.md"].append(time.perf_counter() - t)
            t = time.perf_counter()
            frame = check.check_frame(check.baseline_from_summary(summary), summary,
                                      check.Thresholds(ratio_tolerance=0.1, psnr_drop_db=0.5))
            times["check"].append(time.perf_counter() - t)
        assert frame.passed.all()
    print(f"run: 2 variants x {args.trials} trials x {args.steps} steps, {args.frames} frames of 272x480 per trial")
    print(f"first import of matplotlib + pandas: {imports_s:.2f} s")
    for name, values in times.items():
        print(f"{name:<10} {statistics.median(values) * 1e3:8.1f} ms (median of {len(values)})")
    print(f"plots written: {', '.join(made)}", file=sys.stderr)


if __name__ == "__main__":
    main()
