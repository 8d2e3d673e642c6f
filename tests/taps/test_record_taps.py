"""``perfkit.record.tap``: the line it writes (statistics against numpy and hand figures, sha256 against
hashlib), arrays only on request, numpy / torch / jax values alike (bfloat16 widened exactly), and
nothing outside perfkit."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from perfkit import record


@pytest.fixture
def rank_dir(tmp_path, tap_into):
    return tap_into(tmp_path)


def lines(folder) -> list[dict]:
    return [json.loads(x) for x in (folder / "taps.jsonl").read_text().splitlines()]


def test_a_tap_line_holds_hand_figures(rank_dir):
    record.tap("block0.attn", np.array([[3.0, -4.0]], np.float32), step=0)
    record.tap("block0.mlp", np.array([1.0, np.nan, np.inf, 3.0]), step=0)
    first, second = lines(rank_dir)
    assert first == {"index": 0, "name": "block0.attn", "step": 0, "dtype": "float32", "shape": [1, 2],
                     "mean": -0.5, "std": 3.5, "min": -4.0, "max": 3.0, "l2": 5.0, "nonfinite": 0,
                     "sha256": hashlib.sha256(np.array([3.0, -4.0], np.float32).tobytes()).hexdigest()}
    # non-finite values are counted and left out of the figures (JSON has no NaN)
    assert (second["index"], second["nonfinite"], second["mean"], second["l2"]) == (1, 2, 2.0, math.sqrt(10))
    assert not (rank_dir / "taps").exists()


def test_arrays_only_on_request(rank_dir, tap_into):
    tap_into(rank_dir, arrays=True)
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    record.tap("single0/out", x)
    (line,) = lines(rank_dir)
    assert line["array"] == "taps/0000-single0_out.npy" and line["step"] is None
    saved = np.load(rank_dir / line["array"])
    assert saved.dtype == np.int32 and np.array_equal(saved, x)


def test_torch_and_jax_bfloat16_widen_exactly_and_hash_alike(rank_dir, tap_into):
    torch = pytest.importorskip("torch")
    import jax.numpy as jnp

    tap_into(rank_dir, arrays=True)
    values = [1.0, -2.5, 0.1, 3e38]  # 0.1 and 3e38 round to bfloat16's nearest
    t = torch.tensor(values, dtype=torch.bfloat16, requires_grad=True) * 1  # a graph tensor: detached
    record.tap("t", t)
    record.tap("j", jnp.asarray(values, jnp.bfloat16))
    a, b = lines(rank_dir)
    assert a["dtype"] == b["dtype"] == "bfloat16" and a["sha256"] == b["sha256"]
    widened = np.load(rank_dir / a["array"])
    assert widened.dtype == np.float32
    assert np.array_equal(widened, t.detach().float().numpy())
    assert widened[2] == np.float32(0.10009765625)  # bfloat16's 0.1: 8 bits of mantissa


def test_torch_float_tensor(rank_dir):
    torch = pytest.importorskip("torch")
    record.tap("x", torch.ones(2, 2, dtype=torch.float64) * 2)
    (line,) = lines(rank_dir)
    assert (line["dtype"], line["l2"], line["mean"]) == ("float64", 4.0, 2.0)


def test_nothing_outside_perfkit(tmp_path, monkeypatch):
    monkeypatch.delenv("PERFKIT_METRICS", raising=False)
    monkeypatch.chdir(tmp_path)
    record.tap("x", np.ones(3))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("env, step, expected", [("0,3", 3, True), ("0,3", 1, False), ("13", 1, False),
                                                 ("", 0, False)])
def test_tapping_reads_the_case_steps(monkeypatch, env, step, expected):
    monkeypatch.setenv("PERFKIT_TAP_STEPS", env)
    assert record.tapping(step) is expected
