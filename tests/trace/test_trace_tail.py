"""``perfkit.trace.tail`` (linear passes over the ops' arrays) against the plain pandas statement of what it
picks (sort every op, take the last per chip), on random frames full of ties and nested ops."""

import numpy as np
import pandas as pd
import pytest

from perfkit.trace import tail


def _frame(seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    category = rng.choice(["compute", "ici", "dma", "step", "host"], n, p=[0.5, 0.2, 0.1, 0.1, 0.1])
    return pd.DataFrame({
        "rank": rng.integers(0, 2, n).astype(np.int32),
        "device": rng.choice([-1, 0, 1, 7], n).astype(np.int32),
        "step": rng.integers(-1, 3, n).astype(np.int32),
        "name": pd.Categorical(rng.choice(["fusion.1", "all-gather-done.2", "copy-done.3", "while.4"], n)),
        "kind": pd.Categorical(rng.choice(["fusion", "all-gather-done", "copy-done", "while"], n)),
        "category": pd.Categorical(category),
        "start_ps": rng.integers(0, 60, n) * 10,  # coarse: many ops start and end together
        "dur_ps": rng.integers(0, 8, n) * 10,
    })


def _plain_last_ops(events, k):
    ops = events[events["category"].isin(["compute", "ici", "dcn", "dma"])]
    ops = ops.assign(end_ps=ops["start_ps"] + ops["dur_ps"]).sort_values(["rank", "device", "end_ps"], kind="stable")
    return ops.groupby(["rank", "device"]).tail(k)[tail.OP_COLUMNS].reset_index(drop=True)


def _plain_chips(events):
    ops = events[events["category"].isin(["compute", "ici", "dcn", "dma"])]
    ops = ops.assign(end_ps=ops["start_ps"] + ops["dur_ps"])
    last = ops.groupby(["rank", "device"])["end_ps"].max().rename("last_end_ps").reset_index()
    last = last.sort_values(["last_end_ps", "rank", "device"], kind="stable").reset_index(drop=True)
    stop = int(last["last_end_ps"].iloc[0])
    last["before_last_ps"] = int(last["last_end_ps"].max()) - last["last_end_ps"]
    ops = ops.assign(rank_key=np.where(ops["start_ps"] <= stop, np.where(ops["end_ps"] > stop, 2, 1), 0),
                     time_key=np.where(ops["start_ps"] <= stop, ops["end_ps"], -ops["start_ps"]))
    at = (ops.sort_values(["rank_key", "time_key"], kind="stable").groupby(["rank", "device"]).tail(1)
          [["rank", "device", "name", "kind", "category"]]
          .rename(columns={c: f"at_first_stop_{c}" for c in ("name", "kind", "category")}))
    return last.merge(at, on=["rank", "device"], how="left")


@pytest.mark.parametrize("seed", range(12))
def test_last_ops_and_chips_pick_what_sorting_every_op_picks(seed):
    events = _frame(seed)
    for k in (1, 3, 50):
        pd.testing.assert_frame_equal(tail.last_ops(events, k), _plain_last_ops(events, k))
    pd.testing.assert_frame_equal(tail.chips(events), _plain_chips(events))


def test_no_device_ops_no_chips():
    events = _frame(0)
    events = events[events["category"].isin(["step", "host"])]
    assert tail.chips(events).empty and tail.last_ops(events).empty
