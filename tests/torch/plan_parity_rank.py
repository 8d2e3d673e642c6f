"""One rank of the plan parity check (started by test_torch_plans.py with the launcher variables).

Every rank computes the single-rank model on the whole inputs itself (the reference), then, for each
plan, a fresh copy of the same model with the plan applied, on its shard of the inputs, gathered back.
It does so for the tiny config (256 rows: splits over 2 and 4 ranks) and for token counts that do not
split, so the sequence plans pad: 5 rows (on 4 ranks the last shard is all pad), 37 and 2310 (the
seeds' Wan length; 2312 rows on 4 ranks; one block).

Beside the plans themselves it measures what shows the checks can fail:
- ``ring_without_exchange`` (each rank attends to its own keys only) and ``tp_without_all_reduce``;
- ``<plan>_pad_content``: the plan again with large noise in the input's pad rows instead of zeros,
  against the zero-padded run: dropped pad keys leave every real row unchanged, bit for bit;
- ``<plan>_leaking_pad``: that noisy run with the plan's attention not told about the padding (pad
  keys reach the softmax: the planted leak), against the reference.
Writes ``{config: {name: max |result - reference|}, ...}`` with each reference's scale to ``OUT/rank<R>.json``.
"""

import dataclasses
import json
import os
import sys
from functools import partial

import torch
import torch.distributed as dist

from perfkit.models import torch_wan

TINY = torch_wan.CONFIGS["tiny"]
CONFIGS = {"256 rows": TINY, "5 rows": dataclasses.replace(TINY, grid=(1, 1, 5)),
           "37 rows": dataclasses.replace(TINY, grid=(1, 1, 37)),
           "2310 rows": dataclasses.replace(TINY, grid=(2, 33, 35), blocks=1)}  # one block: seconds, not tens


def poison_pad_rows(shard, placement, gen):
    """This rank's shard with its pad rows (zeros from ``Placement.shard``) replaced by N(0, 100^2) noise."""
    rows = placement.pad.shard_rows
    is_pad = placement.rank * rows + torch.arange(rows) >= placement.pad.length
    noise = 100 * torch.randn(shard.shape, generator=gen)
    return torch.where(is_pad[None, :, None], noise, shard)


def compare(cfg, gen):
    # Batch 2 with different times, as classifier-free guidance runs it.
    x = torch.randn(2, cfg.tokens, cfg.in_channels, generator=gen)
    t = torch.tensor([0.25, 0.8])
    ctx = torch.randn(2, cfg.text_len, cfg.text_dim, generator=gen)

    def run(plan, break_it=None, poison=False):
        model = torch_wan.build_model(cfg, seed=3)
        placement = torch_wan.apply_plan(model, plan)
        if break_it:
            break_it(model, placement)
        shard = placement.shard(x)
        if poison:
            shard = poison_pad_rows(shard, placement, gen)
        return placement.gather(model(shard, t, ctx))

    def no_exchange(model, placement):
        for blk in model.blocks:
            blk.self_attention = torch_wan.attention

    def no_all_reduce(model, placement):
        for module in model.modules():
            module._forward_hooks.clear()

    def leaking_pad(model, placement):  # the plan's attention with the pad keys left in
        for blk in model.blocks:
            blk.self_attention = partial(blk.self_attention, pad=None)

    reference = torch_wan.build_model(cfg, seed=3)(x, t, ctx)
    results = {plan: run(plan) for plan in ("tp", "ulysses", "ring")}
    out = {name: (got - reference).abs().max().item() for name, got in results.items()}
    if cfg.tokens % dist.get_world_size():
        for plan in ("ulysses", "ring"):
            out[f"{plan}_pad_content"] = (run(plan, poison=True) - results[plan]).abs().max().item()
            out[f"{plan}_leaking_pad"] = (run(plan, leaking_pad, poison=True) - reference).abs().max().item()
    if cfg is TINY:
        for name, broken in (("ring_without_exchange", run("ring", no_exchange)),
                             ("tp_without_all_reduce", run("tp", no_all_reduce))):
            out[name] = (broken - reference).abs().max().item()
    out["scale"] = reference.abs().max().item()
    return out


def main(out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    gen = torch.Generator().manual_seed(7)  # the same draws on every rank
    with torch.no_grad():
        out = {name: compare(cfg, gen) for name, cfg in CONFIGS.items()}
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(out, f)
    dist.barrier()  # every rank past its last collective before any tears down (see torch_bench)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
