"""One rank of the plan parity check (started by test_torch_plans.py with the launcher variables).

Every rank computes the single-rank model on the whole inputs itself (the reference), then, for each
plan, a fresh copy of the same model with the plan applied, on its shard of the inputs, gathered back.
Two broken plans are measured too, to show the check can fail: ``ring`` with the exchange taken out
(each rank attends to its own keys only) and ``tp`` without its all-reduces.
Writes ``{name: max |result - reference|}`` and the reference's scale to ``OUT/rank<R>.json``.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

from perfkit.models import torch_wan


def main(out_dir: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    cfg = torch_wan.CONFIGS["tiny"]
    gen = torch.Generator().manual_seed(7)
    # Batch 2 with different times, as classifier-free guidance runs it.
    x = torch.randn(2, cfg.tokens, cfg.in_channels, generator=gen)
    t = torch.tensor([0.25, 0.8])
    ctx = torch.randn(2, cfg.text_len, cfg.text_dim, generator=gen)

    def run(plan, break_it=None):
        model = torch_wan.build_model(cfg, seed=3)
        placement = torch_wan.apply_plan(model, plan)
        if break_it:
            break_it(model)
        return placement.gather(model(placement.shard(x), t, ctx))

    def no_exchange(model):
        for blk in model.blocks:
            blk.self_attention = torch_wan.attention

    def no_all_reduce(model):
        for module in model.modules():
            module._forward_hooks.clear()

    with torch.no_grad():
        reference = torch_wan.build_model(cfg, seed=3)(x, t, ctx)
        results = {"tp": run("tp"), "ulysses": run("ulysses"), "ring": run("ring"),
                   "ring_without_exchange": run("ring", no_exchange), "tp_without_all_reduce": run("tp", no_all_reduce)}
    out = {name: (got - reference).abs().max().item() for name, got in results.items()}
    out["scale"] = reference.abs().max().item()
    with open(os.path.join(out_dir, f"rank{dist.get_rank()}.json"), "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
