"""A run's summary as JSON holds it, for every reader of summary.json (reports, the gate, progression,
plots, the quality command): infinite PSNR spelt "inf", dB cells, and which variant is B. Imports no
numpy, so `perfkit quality --help` stays light."""

from __future__ import annotations

import math


def json_safe(value):
    """JSON for the contracts: infinite PSNR is the string "inf"; NaN (undefined) is null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if getattr(value, "shape", None) == () and hasattr(value, "item"):  # a numpy scalar
        return json_safe(value.item())
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def from_json(value) -> float | None:
    """A figure as ``json_safe`` wrote it, as a float again: "inf" -> inf, null -> None."""
    if value is None:
        return None
    return {"inf": math.inf, "-inf": -math.inf}.get(value, value) if isinstance(value, str) else float(value)


# Why a comparison with a ratio has no CI (``perfkit.analysis.stats.compare``), where reports say so.
NO_SPREAD = "a side has one timed step: nothing measured how much a step varies, so no CI"


def without_ci(comparison: dict) -> bool:
    """Whether a summary's comparison (``comparison``, a ``comparisons`` row) has no CI: no timed steps on a side,
    or one (``NO_SPREAD``)."""
    return None in (comparison.get("ci") or [None])


def db_cell(x) -> str:
    """A dB figure (a float, or as read back from JSON) as every table and line spells it: two
    decimals, "inf", or "-" for none."""
    x = from_json(x)
    return "-" if x is None else "inf" if x == math.inf else f"{x:.2f}"


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


def compared_variant(summary: dict) -> str:
    """B: the variant of the headline comparison, the first after the baseline A (A itself if alone)."""
    a = summary["baseline"]
    return next((n for n in summary["variants"] if n != a), a)
