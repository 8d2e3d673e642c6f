"""Figures as JSON holds them, for every writer and reader of summary.json and the commands' ``--json``
(reports, the gate, progression, plots, the quality command): infinite PSNR spelt "inf", NaN null, and a dB
figure as every table spells it. Imports no numpy, so `perfkit quality --help` stays light."""

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


def db_cell(x) -> str:
    """A dB figure (a float, or as read back from JSON) as every table and line spells it: two
    decimals, "inf", or "-" for none."""
    x = from_json(x)
    return "-" if x is None else "inf" if x == math.inf else f"{x:.2f}"
