"""``perfkit.adapters.torch_taps``: hooks tap named modules in the order they run and go away after; the
torch Wan model's taps (``torch_wan.tap_modules``) equal the JAX model's taps of the same parameters
and inputs, an independent implementation of the same blocks."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture
def rank_dir(tmp_path, tap_into):
    return tap_into(tmp_path, arrays=True)


def taps_of(folder) -> dict[str, np.ndarray]:
    lines = [json.loads(x) for x in (folder / "taps.jsonl").read_text().splitlines()]
    return {x["name"]: np.load(folder / x["array"]) for x in lines}


def test_hooks_tap_in_run_order_and_go_away(rank_dir):
    from perfkit.adapters import torch_taps

    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    x = torch.tensor([[1.0, -2.0]])
    assert torch_taps.module_names(model, r"\d") == ["0", "1", "2"]
    with torch.no_grad(), torch_taps.tapping(model, {"2": "last", "0": "first"}, step=4, gather=lambda t: t * 2):
        model(x)
    lines = [json.loads(s) for s in (rank_dir / "taps.jsonl").read_text().splitlines()]
    assert [(x["name"], x["step"]) for x in lines] == [("first", 4), ("last", 4)]  # run order, not given order
    with torch.no_grad():
        assert np.allclose(np.load(rank_dir / lines[0]["array"]), 2 * model[0](x).numpy())
        model(x)  # hooks removed: no more lines
    assert len((rank_dir / "taps.jsonl").read_text().splitlines()) == 2
    with pytest.raises(KeyError, match="no module nope"):
        with torch_taps.tapping(model, ["nope"]):
            pass


def test_torch_wan_taps_equal_the_jax_models(rank_dir):
    import jax

    from perfkit import models
    from perfkit.adapters import torch_taps
    from perfkit.models import layers as L
    from perfkit.models import torch_wan
    from perfkit.models.pipeline import DenoiseConfig, Denoiser
    from perfkit.models.plans import make_plan
    from perfkit.models.wan import param_specs

    cfg = dataclasses.replace(models.get("wan").configs["tiny"], blocks=2, grid=(2, 4, 8))
    seed = 5
    den = Denoiser("wan", cfg, make_plan("local"), jax.devices()[:1], DenoiseConfig(steps=2, seed=seed))
    ref = {name: np.asarray(x) for name, x in den.taps()}

    model = torch_wan.WanModel(cfg).load_params(L.init_params(param_specs(cfg), seed)).eval()
    draws = np.random.default_rng(seed + 1)  # the pipeline's draws: video noise, then text
    noise = torch.from_numpy(draws.standard_normal((1, cfg.tokens, cfg.in_channels)).astype(np.float32))
    text = torch.from_numpy(draws.standard_normal((1, cfg.text_len, cfg.text_dim)).astype(np.float32))
    with torch.no_grad(), torch_taps.tapping(model, torch_wan.tap_modules(model), step=0):
        model(noise, torch.ones(1), text)  # step 0: t = sigma_0 = 1
    got = taps_of(rank_dir)
    assert list(got) == list(ref) == [f"block{i}.{p}" for i in range(2) for p in ("attn", "mlp", "out")]
    for name, x in ref.items():
        rel = np.linalg.norm(got[name].astype(np.float64) - x) / np.linalg.norm(x.astype(np.float64))
        assert rel < 1e-5, (name, rel)
