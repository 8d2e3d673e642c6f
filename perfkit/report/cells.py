"""Table cells that every Markdown section spells alike."""

from __future__ import annotations

import math

from perfkit.common.summary import from_json


def db_cell(x) -> str:
    """A dB figure (a float, or as read back from JSON) for a table cell."""
    x = from_json(x)
    return "-" if x is None else "inf" if x == math.inf else f"{x:.2f}"
