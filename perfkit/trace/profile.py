"""``Profile``: one facade over the trace analyses for notebooks and scripts, as HTA's
``TraceAnalysis`` is over its analyzers. It only loads the events once and hands the frame to the
analysis functions (each a function from the events frame to a tidy frame, usable on its own)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from perfkit.trace import breakdown, collectives, diff, events, export, hlo_stats, tail


class Profile:
    """The traces at ``paths`` (xplane.pb and Kineto JSON files, or folders of them) as one events frame
    (``self.events``: one row per event, ``perfkit.trace.events.COLUMNS``)."""

    def __init__(self, paths: str | Path | list[str | Path], steps: str | None = None):
        self.events = events.load([paths] if isinstance(paths, (str, Path)) else list(paths), steps)

    def breakdown(self, window: str = "step") -> pd.DataFrame:
        """Per (rank, device, step): compute / exposed ICI / local DMA / idle adding up to the span, and the
        collectives' time with the part hidden under compute (``window="trace"``: one span per chip)."""
        return breakdown.breakdown(self.events, window)

    def mean_step(self, window: str = "step") -> pd.DataFrame:
        """The breakdown's mean step per (rank, device)."""
        return breakdown.mean_per_device(self.breakdown(window))

    def collectives(self) -> dict[str, pd.DataFrame]:
        """Each collective instance (``instances``), per op (``ops``) and per step with its straggler
        (``steps``): bytes sent per device, GB/s, exposed and hidden time, arrival skew."""
        return collectives.analyse(self.events)

    def hlo_stats(self) -> pd.DataFrame:
        """Per (program, HLO op): occurrences, total and self time, as xprof's hlo_stats tool counts them."""
        return hlo_stats.hlo_stats(self.events)

    def diff(self, other: Profile, by: str = "kind", window: str = "step") -> pd.DataFrame:
        """Device time per chip and step keyed ``by`` (kind, op, shape), ``other`` (B) against this (A)."""
        return diff.diff(self.events, other.events, by, window)

    def last_ops(self, k: int = 5) -> pd.DataFrame:
        """Each chip's last ``k`` device ops (where a hang left each chip)."""
        return tail.last_ops(self.events, k)

    def chips(self) -> pd.DataFrame:
        """One row per chip, earliest stop first, with the op each was in when the first chip stopped."""
        return tail.chips(self.events)

    def write_perfetto(self, path: str | Path) -> int:
        """Every rank and chip merged into one Perfetto / Chrome trace; returns the events written."""
        return export.write_perfetto(self.events, path)
