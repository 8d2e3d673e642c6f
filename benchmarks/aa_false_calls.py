"""How often the run's verdict calls an A/A comparison faster or slower: simulated trials of one program on both
sides, compared as ``perfkit run`` compares them (``perfkit.analysis.stats.compare``, the case's minimum effect),
at a fixed number of trials a side and with the adaptive rounds (one more trial a side while the verdict is
unknown, up to ``--most``), which look at the verdict again after each round, each look's interval at the level
the rounds get (``stats.look_confidence``).

    .venv/bin/python benchmarks/aa_false_calls.py --runs 2000 --most 8

A trial's level is drawn lognormal (``--trial-spread``: the spread between trials on a shared machine), its steps
around it (``--step-spread``). Each run's seed is its index, so a run of this script is reproducible. The figure
to hold against a 95% interval is the share called faster or slower: 5% where the interval covers as it says.
With ``--effect`` above 1 B's trials are that much slower, and the share called slower is what the rounds can see.
"""

from __future__ import annotations

import argparse

import numpy as np

from perfkit.analysis.stats import compare


def _trials(rng: np.random.Generator, n: int, trial_spread: float, step_spread: float, steps: int,
            level: float = 10.0) -> list[list]:
    return [list(level * np.exp(rng.normal(0, trial_spread) + rng.normal(0, step_spread, steps))) for _ in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--least", type=int, default=3, help="trials a side before the first look (repeats.min)")
    ap.add_argument("--most", type=int, default=8, help="trials a side the rounds may reach (repeats.max)")
    ap.add_argument("--trial-spread", type=float, default=0.10)
    ap.add_argument("--step-spread", type=float, default=0.02)
    ap.add_argument("--steps", type=int, default=15, help="timed steps a trial")
    ap.add_argument("--min-effect", type=float, default=0.02)
    ap.add_argument("--resamples", type=int, default=4000, help="bootstrap resamples a look")
    ap.add_argument("--effect", type=float, default=1.0,
                    help="B's level over A's (1: an A/A run; 1.1: B 10%% slower, and the share called is the power)")
    args = ap.parse_args()
    first, final = {}, {}
    for i in range(args.runs):
        rng = np.random.default_rng(i)

        def draw(n: int, effect: float = 1.0) -> list[list]:
            return _trials(rng, n, args.trial_spread, args.step_spread, args.steps, 10.0 * effect)

        a, b = draw(args.least), draw(args.least, args.effect)
        verdict = compare(a, b, min_effect=args.min_effect, n_boot=args.resamples, seed=i).verdict
        first[verdict] = first.get(verdict, 0) + 1
        rounds = (args.least, args.most)
        verdict = compare(a, b, min_effect=args.min_effect, rounds=rounds, n_boot=args.resamples, seed=i).verdict
        while verdict == "unknown" and len(a) < args.most:
            a, b = a + draw(1), b + draw(1, args.effect)
            verdict = compare(a, b, min_effect=args.min_effect, rounds=rounds, n_boot=args.resamples, seed=i).verdict
        final[verdict] = final.get(verdict, 0) + 1
    for name, counts in ((f"{args.least} trials a side, one look", first),
                         (f"adaptive rounds, {args.least} to {args.most} trials a side", final)):
        called = counts.get("faster", 0) + counts.get("slower", 0)
        share = called / args.runs
        se = (share * (1 - share) / args.runs) ** 0.5
        print(f"{name}: {called} of {args.runs} runs called faster or slower, {100 * share:.2f}% "
              f"(standard error {100 * se:.2f}%); {dict(sorted(counts.items()))}")


if __name__ == "__main__":
    main()
