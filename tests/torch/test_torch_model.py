"""The torch Wan model against the JAX model it ports (same parameter tree, same inputs)."""

import functools

import jax
import numpy as np
import pytest
import torch

from perfkit.models import layers, torch_wan, wan
from perfkit.models.plans import make_plan

CFG = wan.CONFIGS["tiny"]


def test_local_model_matches_jax_model():
    tree = torch_wan.init_params(CFG, seed=0)
    params = jax.tree.map(lambda w: w.numpy(), tree)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, CFG.tokens, CFG.in_channels)).astype(np.float32)
    t = np.array([0.3, 0.7], np.float32)
    ctx = rng.standard_normal((2, CFG.text_len, CFG.text_dim)).astype(np.float32)
    plan = make_plan("local").bind(wan.streams(CFG), 1)
    forward = jax.jit(functools.partial(wan.forward, cfg=CFG, plan=plan))  # one compile, not one per op
    expected = np.asarray(forward(params, {"video": x, "text": ctx}, t)["video"])

    model = torch_wan.WanModel(CFG).load_params(tree)
    with torch.no_grad():
        got = model(torch.from_numpy(x), torch.from_numpy(t), torch.from_numpy(ctx)).numpy()
    assert np.abs(expected).max() > 1
    # float32 in both; XLA and torch order the sums differently (measured max 1.0e-6).
    np.testing.assert_allclose(got, expected, rtol=0, atol=2e-5)


def test_load_params_refuses_a_wrong_shape():
    tree = torch_wan.init_params(CFG, seed=0)
    tree["blocks"][1]["wk"] = tree["blocks"][1]["wk"][:, :32]
    with pytest.raises(ValueError, match=r"parameter blocks\.1\.wk: shape \(64, 32\), expected \(64, 64\)"):
        torch_wan.WanModel(CFG).load_params(tree)


def test_init_is_seeded_and_follows_the_specs():
    a, b, c = (torch_wan.init_params(CFG, seed=s) for s in (0, 0, 1))
    assert torch.equal(a["blocks"][0]["wq"], b["blocks"][0]["wq"])
    assert not torch.equal(a["blocks"][0]["wq"], c["blocks"][0]["wq"])
    specs = jax.tree.leaves(wan.param_specs(CFG), is_leaf=layers.is_weight)
    for spec, value in zip(specs, jax.tree.leaves(a), strict=True):
        assert tuple(value.shape) == spec.shape
        if spec.ones:  # norm gains: 1 + 0.1 N(0, 1)
            assert value.mean().item() == pytest.approx(1.0, abs=0.1)
        elif value.numel() >= 1024:  # scale, or 1 / sqrt(fan_in) by default
            want = spec.scale if spec.scale is not None else spec.shape[0] ** -0.5
            assert value.std().item() == pytest.approx(want, rel=0.1)
