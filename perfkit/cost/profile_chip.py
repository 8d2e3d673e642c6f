"""The chip a profile ran on, from an xplane device plane's stats (``device_type_string``,
``peak_teraflops_per_second``, ``peak_hbm_bw_gigabytes_per_second``).

Reads plane headers only, through ``perfkit.trace.xplane``'s plane reader (its lines are not decoded).
"""

from __future__ import annotations

from pathlib import Path

from perfkit.cost.chips import Chip, from_plane_stats
from perfkit.trace import xplane


def plane_stats(path: Path) -> list[dict]:
    """The stats of each ``/device:`` plane of an ``*.xplane.pb``, by name."""
    _, jobs = xplane.planes(path)
    named = (xplane.plane_stats(job) for job in jobs if job.name is None or job.name.startswith("/device:"))
    return [stats for name, stats in named if name.startswith("/device:")]


def profile_chip(paths: list[Path]) -> Chip | None:
    """The first chip any of the profiles names in a device plane's stats, or None."""
    for path in paths:
        for stats in plane_stats(path):
            found = from_plane_stats(stats)
            if found is not None:
                return found
    return None
