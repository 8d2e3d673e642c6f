"""A summary's B/A comparison as the reports word it: which variant is B, the figure each side's ratio divides,
why a ratio has no CI, where its change lies inside the A/A control's noise floor (``--aa``), and the step events
left out of what it divides for want of a time. Read by the
analysis that writes the summary (and a matrix's rows) and by every report of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from perfkit.errors import BadInput


# Trials on a side from which a comparison's CI also takes in Welch's interval of the trials (``stats.compare``): a
# bootstrap resampling a few reaches no further than they do.
FEW_TRIALS = 2
# Why a comparison with a ratio has no CI (``perfkit.analysis.stats.compare``), where reports say so.
NO_SPREAD = "a side has one timed step: nothing measured how much a step varies, so no CI"


def one_trial_call(comparison: dict) -> str | None:
    """Why a verdict read from one trial on a side may not hold on another run (None where each side has more, or
    the verdict is unknown)."""
    if comparison.get("verdict") not in ("faster", "slower", "same") or min(comparison.get("n_a") or 0,
                                                                             comparison.get("n_b") or 0) != 1:
        return None
    return ("a side has one trial, so the CI holds that trial's steps' noise alone, not the trials' (a run's trials "
            f"differ by more than its steps do): the {comparison['verdict']} verdict may not hold on another run")


def without_ci(comparison: dict) -> bool:
    """Whether a summary's comparison (``comparison``, a ``comparisons`` row) has no CI: no timed steps on a side,
    or one (``NO_SPREAD``)."""
    return None in (comparison.get("ci") or [None])


def ci_level(comparison: dict) -> float:
    """The level a comparison's CI is held at: each look's (``look_confidence``) where the adaptive rounds read the
    verdict more than once, for the intervals of all its looks to hold together at 95%; 0.95 read once, and in a
    summary from before the level was kept."""
    return comparison.get("look_confidence", 0.95)


def looks(comparison: dict) -> int:
    """How many times the rounds read a comparison's verdict (``looks_at``: the trials a side at its first and last
    look); 1 read once, and in a summary from before the looks were kept."""
    first, last = comparison.get("looks_at") or (1, 1)
    return last - first + 1


def looks_hold(comparisons: dict[str, dict], path: str | Path, remedy: str = "") -> None:
    """BadInput where a comparison's ``looks_at`` (``comparisons``: each by its field, ``comparisons[0]``) is not two
    trial counts, the first look no later than the last: [5, 3] was read as -1 looks. Its JSON Schema cannot order
    them, and ``report --progression`` reads a summary.json without it: whatever reads a summary or a baseline holds
    its looks to this."""
    for field, c in comparisons.items():
        at = c.get("looks_at")
        if at is None:
            continue
        if not (isinstance(at, list) and len(at) == 2 and all(type(n) is int and n >= 1 for n in at)):
            raise BadInput(f"{at}: not two trial counts (a side's at the first look and at the last){remedy}",
                           path=str(path), field=f"{field}.looks_at")
        if at[0] > at[1]:
            raise BadInput(f"{at}: its first look is after its last{remedy}", path=str(path), field=f"{field}.looks_at")


def level_text(level: float) -> str:
    """A CI's level as a percentage: 95%, 98.3%."""
    return f"{level * 100:.1f}".removesuffix(".0") + "%"


def read_once_at_95(level: float, n_looks: int) -> bool:
    """Whether a CI is the plain 95% one, read once: where every shown is, a table says "95% CI" once for all."""
    return n_looks == 1 and level == 0.95


def level_words(level: float, n_looks: int) -> str:
    """A CI's level as a row gives it where the rows' differ: ``95%``, ``97.4% (3 looks)``."""
    return level_text(level) + (f" ({n_looks} looks)" if n_looks > 1 else "")


def ci_name(level: float, n_looks: int) -> str:
    """A CI named with its level as a sentence gives it: ``95% CI``, ``97.4% CI (3 looks)``."""
    return f"{level_text(level)} CI" + (f" ({n_looks} looks)" if n_looks > 1 else "")


def recorded_ci_name(comparison: dict) -> str:
    """A ``perfkit check`` baseline's CI (a ``comparisons`` entry) named with the level it records, its run's
    (``look_confidence``, ``looks_at``): ``97.4% CI (3 looks)``; ``CI (level not recorded)`` in a baseline written
    before the level was kept, whose run may have read its verdict over the rounds, above 95%."""
    if "look_confidence" not in comparison:
        return "CI (level not recorded)"
    return ci_name(ci_level(comparison), looks(comparison))


# What a CI's level and looks (``level_words``) mean, said under a table that gives them.
LEVEL_NOTE = ("95% where the verdict was read once; (n looks): the rounds read it after each of n rounds, and the "
              "interval is each look's, at the level at which the intervals of all n looks hold together at 95%")


def noise_range(noise_floor: dict) -> str:
    """The A/A control's CI as the changes it spans, as the headline and Not verified give it: ``-21.9%..+78.0%``."""
    lo, hi = noise_floor["ci"]
    return f"{lo - 1:+.1%}..{hi - 1:+.1%}"


def inside_noise_floor(summary: dict) -> str | None:
    """Where the headline comparison's verdict is faster or slower by its own CI but its change lies inside the A/A
    control's (``--aa``), that change as the reports spell it (``+43.7%``): the control varied as much in the same
    run, so the verdict is not to be trusted alone. None otherwise."""
    c, nf = summary["comparison"], summary.get("noise_floor")
    if not nf or None in nf["ci"] or c["ratio"] is None or c["verdict"] not in ("faster", "slower"):
        return None
    return f"{c['ratio'] - 1:+.1%}" if nf["ci"][0] <= c["ratio"] <= nf["ci"][1] else None


def aa_called(summary: dict) -> str | None:
    """The A/A control's verdict where it called the baseline faster or slower than itself (``perfkit run --aa``):
    the run's conditions drifted between its trials, or chance made a false call (a few A/A runs of a hundred), so
    no timing verdict of the run is to be trusted alone; None otherwise (no control, or one that called no change)."""
    nf = summary.get("noise_floor")
    return nf["verdict"] if nf and nf["verdict"] in ("faster", "slower") else None


def aa_call_text(summary: dict) -> str | None:
    """What ``aa_called`` found, in the words of report.md's Not verified and the gate's A/A row: ``the A/A control
    (a-aa) was called slower than the baseline itself (1.500, A/A +46.3%..+53.8%): the run's conditions drifted
    between trials, or chance made a false call``; None where it called no change."""
    called = aa_called(summary)
    if not called:
        return None
    nf = summary["noise_floor"]
    return (f"the A/A control ({nf['variant']}) was called {called} than the baseline itself ({nf['ratio']:.3f}, "
            f"A/A {noise_range(nf)}): the run's conditions drifted between trials, or chance made a false call")


def compared_variant(summary: dict) -> str:
    """B: the variant of the headline comparison, the first after the baseline A (A itself if alone)."""
    a = summary["baseline"]
    return next((n for n in summary["variants"] if n != a), a)


def trial_median(variant: dict) -> float | None:
    """A variant's median of per-trial step medians (``summary.json``'s ``trial_medians_ms``): the figure
    the B/A step-time ratio divides; None without a timed trial."""
    medians = variant.get("trial_medians_ms") or []
    return float(np.median(medians)) if medians else None


def unreadable_text(summary: dict) -> str | None:
    """The step events left out for want of a finite ``ms``, in words: how many, in which trials."""
    left = summary["trials"].get("unreadable_steps")
    if not left:
        return None
    where = ", ".join(f"trial {u['index']} ({u['variant']}, rank {u['rank']}): {u['steps']}" for u in left)
    n = sum(u["steps"] for u in left)
    return f"{n} step event{'s' * (n != 1)} with no finite ms (NaN, Infinity, null, no number) left out ({where})"
