"""``Profile``: one facade over the trace analyses for notebooks and scripts, as HTA's
``TraceAnalysis`` is over its analyzers. Its analyses go the commands' one path (``perfkit.trace.shards``:
the traces cut into shards, each analysed apart, combined); ``events``, the whole events frame, is read on
first use (each analysis is also a function from that frame to a tidy frame, usable on its own)."""

from __future__ import annotations

import functools
from pathlib import Path

import pandas as pd

from perfkit.trace import events, export, hlo_stats, shards


class Profile:
    """The traces at ``paths`` (xplane.pb and Kineto JSON files, or folders of them); ``steps``: a step
    marker pattern, as ``--steps``."""

    def __init__(self, paths: str | Path | list[str | Path], steps: str | None = None):
        self.paths = [paths] if isinstance(paths, (str, Path)) else list(paths)
        self.steps = steps

    @functools.cached_property
    def events(self) -> pd.DataFrame:
        """Every event as one frame: one row per event, ``perfkit.trace.events.COLUMNS``."""
        return events.load(self.paths, self.steps)

    def breakdown(self, window: str = "step") -> pd.DataFrame:
        """Per (rank, device, step): compute / exposed ICI / local DMA / idle adding up to the span, and the
        collectives' time with the part hidden under compute (``window="trace"``: one span per chip)."""
        return shards.breakdown_traces(self.paths, self.steps, window)[0]

    def collectives(self) -> dict[str, pd.DataFrame]:
        """Each collective instance (``instances``), per op (``ops``) and per step with its straggler
        (``steps``): bytes sent per device, GB/s, exposed and hidden time, arrival skew."""
        return shards.collectives_traces(self.paths, self.steps)[0]

    def hlo_stats(self) -> pd.DataFrame:
        """Per (program, HLO op): occurrences, total and self time, as xprof's hlo_stats tool counts them."""
        return hlo_stats.hlo_stats(self.events)

    def diff(self, other: Profile, by: str = "kind", window: str = "step") -> pd.DataFrame:
        """Device time per chip and step keyed ``by`` (kind, op, shape), ``other`` (B) against this (A); BadInput
        where one side has no device events and the other has (host time against device time), as ``trace diff``."""
        ta, tb = (shards.op_table(p.paths, by, p.steps, window) for p in (self, other))
        return shards.compare_tables(ta, tb, self.paths, other.paths)  # refuses host time against device time

    def last_ops(self, k: int = 5) -> pd.DataFrame:
        """Each chip's last ``k`` device ops (where a hang left each chip)."""
        return shards.tail_traces(self.paths, k)[1]

    def chips(self) -> pd.DataFrame:
        """One row per chip, earliest trace end first, with the op each trace was in where the first one ends."""
        return shards.tail_traces(self.paths)[0]

    def write_perfetto(self, path: str | Path) -> int:
        """Every rank and chip merged into one Perfetto / Chrome trace; returns the events written."""
        return export.write_perfetto(self.events, path)
