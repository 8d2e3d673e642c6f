"""What the taps tests share: ``perfkit.record``'s taps state made fresh for a rank folder, and its
open file closed after."""

from __future__ import annotations

import pytest

from perfkit import record


@pytest.fixture
def tap_into(monkeypatch):
    """tap_into(folder, arrays=False): ``record.tap`` writes into ``folder`` as a rank's would."""
    handles = []

    def point(folder, arrays: bool = False):
        monkeypatch.setenv("PERFKIT_METRICS", str(folder / "metrics.jsonl"))
        monkeypatch.setenv("PERFKIT_TAP_ARRAYS", "1" if arrays else "0")
        state = {"path": None, "handle": None, "count": 0}
        monkeypatch.setattr(record, "_taps", state)
        handles.append(state)
        return folder

    yield point
    for state in handles:
        if state["handle"] is not None:
            state["handle"].close()
