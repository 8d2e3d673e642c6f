"""Each torch plan on 2 and 4 gloo ranks against the single-rank model (same weights, same inputs), at
token counts that split and at ones that do not (the sequence plans pad, drop pad keys, cut pad rows)."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch

from perfkit.models import torch_wan
from torch_ranks import launch

HERE = Path(__file__).resolve().parent
# The configs of plan_parity_rank.py whose rows do not split over the ranks (5, 37 rows; 2310 on 4 only).
PADDED = {2: {"5 rows", "37 rows"}, 4: {"5 rows", "37 rows", "2310 rows"}}


@pytest.mark.parametrize("world", [2, 4])
def test_plans_match_single_rank(tmp_path, world):
    launch(HERE / "plan_parity_rank.py", world, [tmp_path])
    for rank in range(world):
        results = json.loads((tmp_path / f"rank{rank}.json").read_text())
        assert set(results) == {"256 rows", "5 rows", "37 rows", "2310 rows"}
        for config, got in results.items():
            where = (rank, config, got)
            assert got["scale"] > 1, where  # outputs of order one: the tolerances below are relative to that
            # float32; the plans reorder sums only (measured <= 1.6e-6 on 2 and 4 ranks, padded or not).
            for plan in ("tp", "ulysses", "ring"):
                assert got[plan] < 1e-5, where
        # The same check catches a plan that skips its communication (adaLN gates start small, as in the
        # JAX model, so attention moves the output by ~1e-2: still 1000x the tolerance).
        tiny = results["256 rows"]
        assert tiny["ring_without_exchange"] > 1e-3 and tiny["tp_without_all_reduce"] > 1e-3, tiny

        # Pad keys never reach the softmax: noise in the pad rows changes no real row, bit for bit; with the
        # pad keys left in (the planted leak) the same noisy run misses the reference by >= 2.6e-3 (2310
        # rows on 4 ranks: 2 pad keys among 2312) to 0.34 (5 rows).
        assert {c for c, got in results.items() if "ring_pad_content" in got} == PADDED[world]
        for config in PADDED[world]:
            got = results[config]
            for plan in ("ulysses", "ring"):
                assert got[f"{plan}_pad_content"] == 0.0, (rank, config, got)
                assert got[f"{plan}_leaking_pad"] > 1e-4, (rank, config, got)


def test_sequence_plan_pads_the_tail_and_zeroes_pad_angles():
    cfg = dataclasses.replace(torch_wan.CONFIGS["tiny"], grid=(1, 1, 37))  # 37 rows over 4 ranks: 40, 10 each
    model = torch_wan.build_model(cfg, seed=0)
    angles = model.angles.clone()
    placement = torch_wan.Placement("ring", rank=3, world=4, pad=torch_wan.PAD_MODES["shards"](37, 4))
    torch_wan._apply_sequence(model, placement)
    assert (placement.pad.padded, placement.pad.shard_rows) == (40, 10)
    torch.testing.assert_close(model.angles[:7], angles[30:37], rtol=0, atol=0)  # rows 30..36 real
    assert not model.angles[7:].any()  # rows 37..39: pad, no rotation

    x = torch.randn(2, 37, 4)
    shard = placement.shard(x)
    assert shard.shape == (2, 10, 4) and torch.equal(shard[:, :7], x[:, 30:]) and not shard[:, 7:].any()
    with pytest.raises(ValueError, match="ring: a stream of 36 rows, the plan was applied for 37"):
        placement.shard(x[:, :36])


def test_tensor_parallel_refuses_uneven_heads():
    model = torch_wan.build_model("tiny", seed=0)  # dim 64
    with pytest.raises(ValueError, match="not divisible by 3"):
        torch_wan._apply_tp(model, 0, 3, group=None)


def test_unknown_plan():
    with pytest.raises(ValueError, match="unknown plan 'sp'"):
        torch_wan.apply_plan(torch_wan.build_model("tiny", seed=0), "sp")
