"""``timeline.spans`` (numpy, on chip keys) against the plain pandas reference below, which says what a span is
in merges and groupbys (and how far it runs past its markers, how many of them ran apart), on random chips, steps
and markers (own, shared by a rank's chips, none; of one step overlapping or apart)."""

import numpy as np
import pandas as pd
import pytest

from perfkit.trace.timeline import spans


def spans_reference(extents: pd.DataFrame, markers: pd.DataFrame) -> pd.DataFrame:
    keys = ["rank", "device", "step"]
    devices = extents[["rank", "device"]].drop_duplicates()
    win = markers.assign(end_ps=markers["start_ps"] + markers["dur_ps"])[keys + ["start_ps", "end_ps"]]
    own = win[win["device"] >= 0].merge(devices, on=["rank", "device"])
    has_own = pd.MultiIndex.from_frame(own[["rank", "device"]])
    shared = win[win["device"] < 0].drop(columns="device").merge(devices, on="rank")
    shared = shared[~pd.MultiIndex.from_frame(shared[["rank", "device"]]).isin(has_own)]
    each = pd.concat([own, shared[own.columns]]).sort_values("start_ps", kind="stable")
    # a marker joined: it begins after every marker of its step that began before it has ended
    each["joined_markers"] = each["start_ps"] > each.groupby(keys)["end_ps"].transform(lambda e: e.cummax().shift())
    windows = each.groupby(keys).agg(start_ps=("start_ps", "min"), end_ps=("end_ps", "max"),
                                     joined_markers=("joined_markers", "sum"))
    op_end = extents.set_index(keys)
    measured = windows.join(op_end, how="left")
    measured["past_marker_ps"] = np.maximum(measured["op_end"].fillna(0) - measured["end_ps"], 0)
    measured["end_ps"] = np.maximum(measured["end_ps"], measured["op_end"].fillna(0)).astype(np.int64)
    covered = pd.MultiIndex.from_frame(windows.reset_index()[["rank", "device"]]).unique()
    whole = op_end.reset_index()
    whole = whole[(whole["step"] == -1) & ~pd.MultiIndex.from_frame(whole[["rank", "device"]]).isin(covered)]
    whole = whole.rename(columns={"op_start": "start_ps"}).assign(end_ps=whole["op_end"]).set_index(keys)
    whole = whole.assign(past_marker_ps=0, joined_markers=0)
    columns = ["start_ps", "end_ps", "past_marker_ps", "joined_markers"]
    out = pd.concat([measured[columns], whole[columns]]).astype(np.int64)
    return out.sort_index().reset_index()


def _case(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Extents of 1-2 ranks' 1-3 chips, each with 1-4 distinct steps (-1: no step), and 0-11 markers, some of
    a rank (device -1), some of a chip or rank without ops."""
    ranks = int(rng.integers(1, 3))
    extents = []
    for rank in range(ranks):
        for device in range(int(rng.integers(1, 4))):
            for step in rng.choice(np.arange(-1, 5), int(rng.integers(1, 5)), replace=False):
                start = int(rng.integers(0, 1000))
                extents.append((rank, device, int(step), start, start + int(rng.integers(0, 300))))
    markers = [(int(rng.integers(0, ranks + 1)), int(rng.integers(-1, 4)), int(rng.integers(0, 5)),
                int(rng.integers(0, 1000)), int(rng.integers(0, 400))) for _ in range(int(rng.integers(0, 12)))]
    ints = {"rank": np.int32, "device": np.int32, "step": np.int32}
    return (pd.DataFrame(extents, columns=["rank", "device", "step", "op_start", "op_end"]).astype(ints),
            pd.DataFrame(markers, columns=["rank", "device", "step", "start_ps", "dur_ps"]).astype(
                {**ints, "start_ps": np.int64, "dur_ps": np.int64}))


@pytest.mark.parametrize("seed", range(2))
def test_spans_are_the_references(seed):
    rng = np.random.default_rng(seed)
    for _ in range(150):
        extents, markers = _case(rng)
        pd.testing.assert_frame_equal(spans(extents, markers), spans_reference(extents, markers))
