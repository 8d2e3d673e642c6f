"""The long bad-input campaign: thousands of damaged real inputs through every reader, in this process
under an address-space cap, each attempt in a fresh folder. Prints the count, the time, the slowest
attempt and every problem found (tests/campaign/campaign_inputs.py says what a problem is).

    .venv/bin/python benchmarks/bad_inputs.py [--count 5000] [--seed 0] [--readers xplane,case,...]

Exit status 1 when any attempt had a problem. The CI share of the same campaign runs in
tests/campaign/test_bad_inputs.py (Hypothesis, a few examples per reader).
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "campaign"))

import campaign_inputs as ci  # noqa: E402 - found through the path above

ADDRESS_SPACE_GB = 16  # the whole process, numpy, pandas, PyAV and protobuf included


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--count", type=int, default=5000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--readers", default=",".join(ci.READERS))
    p.add_argument("--no-memory", action="store_true", help="skip tracemalloc (faster; the address-space cap stays)")
    args = p.parse_args()
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_GB << 30, ADDRESS_SPACE_GB << 30))
    readers = args.readers.split(",")
    rng = random.Random(args.seed)
    counts = dict.fromkeys(readers, 0)
    seconds = dict.fromkeys(readers, 0.0)
    found, slowest = [], (0.0, "")
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="perfkit-campaign-"))
    try:
        for i in range(args.count):
            reader = readers[i % len(readers)]
            seed = rng.choice(ci.seeds(reader))
            data, ops = ci.mutate(seed.data, rng)
            work = root / f"{i:06d}"
            work.mkdir()
            out = ci.attempt(reader, seed, data, work, measure_memory=not args.no_memory)
            problems = ci.problems(out, work)
            seconds[reader] += out.seconds
            what = f"#{i} {reader}:{seed.name} {'+'.join(ops) or 'unchanged'}"
            if out.seconds > slowest[0]:
                slowest = (out.seconds, what)
            if problems:
                found.append((what, problems))
                print(f"PROBLEM {what}: {'; '.join(problems)}", flush=True)
            shutil.rmtree(work, ignore_errors=True)
            counts[reader] += 1
            if (i + 1) % 500 == 0:
                print(f"{i + 1} attempts, {time.monotonic() - t0:.0f} s, {len(found)} problem(s)", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    total = time.monotonic() - t0
    print(f"{sum(counts.values())} mutated inputs ({', '.join(f'{k} {v} in {seconds[k]:.0f} s' for k, v in counts.items())}) in "
          f"{total:.0f} s: {len(found)} with a problem (tracebacks, exit codes outside 0-3, caps, stray files); "
          f"slowest {slowest[0]:.2f} s ({slowest[1]})")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
