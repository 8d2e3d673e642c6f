"""A run's plan: its trials in order, each with its index (its place in the plan) and round.

Every variant runs once a round, in ``abba`` or seeded ``random`` order, and round r holds the places r*V ..
r*V+V-1 for V variants. The rounds past ``repeats.min`` (while a verdict is unknown) leave out each variant none of
whose trials ran (every one crashed or hung): its next trials would fail alike, a hang each costing the timeout.
Its places there stay empty, so every other trial keeps its index, and a resumed run, or a run's report, derives
the same plan from the records. A variant whose first two trials crashed with one error runs none after the round
of the second, even within ``repeats.min``, and where no comparison is left (the baseline, or every variant compared
with it, ended) neither does any other: the run ends there (``perfkit.rundata.exits.ended``, which the run's summary
reads too).
"""

from __future__ import annotations

import math
import random

from perfkit.run.trial import Trial


def round_order(variants: list[str], round_index: int, order: str, seed: int) -> list[str]:
    """Variants in one round: ``abba`` alternates forward and reversed rounds (A B, B A, ...), which
    cancels linear drift; ``random`` shuffles each round with a seeded generator."""
    if order == "random":
        rng = random.Random(seed * 1_000_003 + round_index)
        out = list(variants)
        rng.shuffle(out)
        return out
    return list(variants) if round_index % 2 == 0 else list(reversed(variants))


def sat_out(variants: list[str], trials: list[dict]) -> frozenset[str]:
    """The variants with a finished trial and none that ran (every one crashed or hung): the rounds past the
    minimum go on without them."""
    finished = {t.get("variant") for t in trials}
    ran = {t.get("variant") for t in trials if t.get("status") == "ok"}
    return frozenset(v for v in variants if v in finished and v not in ran)


def plan_trials(variants: list[str], rounds: int, order: str, seed: int, *, min_rounds: int = 0,
                out: frozenset[str] = frozenset(), stop: dict[str, int] | None = None) -> list[Trial]:
    """The first ``rounds`` rounds; a longer plan starts with the same trials. Past the first ``min_rounds``,
    the variants ``out`` (``sat_out``) have none, nor from its round on a variant in ``stop`` (``exits.ended``): their
    places stay empty."""
    stop = stop or {}
    return [Trial(r * len(variants) + i, name, r)
            for r in range(rounds) for i, name in enumerate(round_order(variants, r, order, seed))
            if (r < min_rounds or name not in out) and r < stop.get(name, math.inf)]
