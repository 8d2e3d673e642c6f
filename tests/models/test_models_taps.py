"""The bundled models' taps (``perfkit.models.taps``, ``Denoiser.taps``) on the simulated CPU devices: every
plan gives the whole logical array of each tap, equal to the plain model's (one device, plan ``local``);
a planted RoPE defect in one block (``rope_fault_block``) departs first at that block's attention, and
the plan without it departs nowhere (``perfkit.quality.departure``)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib

import jax
import numpy as np
import pandas as pd
import pytest
from model_testing import CONFIGS

from perfkit import models
from perfkit.models.pipeline import DenoiseConfig, Denoiser
from perfkit.models.plans import make_plan
from perfkit.quality.departure import compare_taps, dtype_allowance, first_departure

# Two blocks (the defect goes in the second); 64 rows split over 4 devices; 45 rows need pad.
WAN = dataclasses.replace(models.get("wan").configs["tiny"], blocks=2, grid=(2, 4, 8))
WAN_ODD = dataclasses.replace(WAN, grid=(3, 3, 5))
NAMES = [f"block{i}.{part}" for i in range(2) for part in ("attn", "mlp", "out")]


@functools.cache  # a plan's program compiles once for every test here
def taps_at_step0(family, config, plan, devices: int) -> dict[str, np.ndarray]:
    den = Denoiser(family, config, plan, jax.devices()[:devices], DenoiseConfig(steps=2, seed=5))
    before = {k: np.asarray(v) for k, v in den.state.items()}
    out = {name: np.asarray(x) for name, x in den.taps()}
    assert all(np.array_equal(np.asarray(den.state[k]), v) for k, v in before.items())  # state left alone
    return out


@pytest.fixture(scope="module")
def plain():
    """The referee: the plain model on one device."""
    return {"even": taps_at_step0("wan", WAN, make_plan("local"), 1),
            "odd": taps_at_step0("wan", WAN_ODD, make_plan("local"), 1)}


def frame(taps: dict[str, np.ndarray], tag: str, arrays: dict) -> pd.DataFrame:
    """Taps as ``perfkit.quality.departure.read_taps`` gives them; each array kept in ``arrays`` under
    its ``path`` (the loader is a lookup)."""
    arrays.update({(tag, n): x for n, x in taps.items()})
    return pd.DataFrame([{"index": i, "name": n, "step": 0, "dtype": str(x.dtype), "shape": list(x.shape),
                          "sha256": hashlib.sha256(x.tobytes()).hexdigest(), "path": (tag, n)}
                         for i, (n, x) in enumerate(taps.items())])


@pytest.mark.parametrize("plan, options, kind", [
    ("tp", {}, "even"),
    ("sp", {"impl": "xla"}, "even"),
    ("ulysses", {"pad": "shards"}, "odd"),  # 45 rows padded to 48: pad rows cut, plain order
])
def test_every_plan_taps_the_whole_array_of_the_plain_model(plain, plan, options, kind):
    config = WAN if kind == "even" else WAN_ODD
    got = taps_at_step0("wan", config, make_plan(plan, **options), 4)
    assert list(got) == NAMES
    for name, ref in plain[kind].items():
        assert got[name].shape == ref.shape == (1, config.tokens, config.dim)
        rel = np.linalg.norm(got[name] - ref) / np.linalg.norm(ref)
        assert rel < 1e-5, (name, rel)  # float32 rounding; a row out of place is O(1)


def test_a_planted_rope_defect_departs_first_at_its_block(plain):
    """tp (A) against sp with block 1's RoPE one row off on ranks > 0 (B): block 0 agrees to float32
    rounding, block1.attn is the first departure; the shipped sp plan departs nowhere."""
    a = taps_at_step0("wan", WAN, make_plan("tp"), 4)
    faulty = taps_at_step0("wan", WAN, make_plan("sp", impl="xla", rope_fault_block=1), 4)
    shipped = taps_at_step0("wan", WAN, make_plan("sp", impl="xla"), 4)
    arrays: dict = {}
    fa, fb, fs = frame(a, "a", arrays), frame(faulty, "b", arrays), frame(shipped, "s", arrays)

    table, mismatch = compare_taps(fa, fb, load=arrays.__getitem__)
    assert mismatch is None
    assert first_departure(table)["name"] == "block1.attn"
    assert (table.rel_l2[:3] < 1e-5).all() and table.rel_l2[3] > 100 * dtype_allowance("float32")
    # the referee: plain numpy on the arrays
    fa64, fb64 = a["block1.attn"].astype(np.float64), faulty["block1.attn"].astype(np.float64)
    ref = np.linalg.norm(fb64 - fa64) / np.linalg.norm(fa64)
    assert table.rel_l2[3] == pytest.approx(ref, rel=1e-9)

    table, _ = compare_taps(fa, fs, load=arrays.__getitem__)
    assert first_departure(table) is None and not table.departs.any()


def test_the_fault_option_is_checked():
    from perfkit.errors import BadInput

    with pytest.raises(BadInput, match="rope_fault_block must be a block index"):
        make_plan("sp", rope_fault_block=-1)


@pytest.mark.parametrize("family", ["flux", "hunyuan", "ltx2"])
def test_joined_and_whole_streams_tap_in_plain_order(family):
    """FLUX's interleaved joint (rows in gathered order [text 0, image 0, text 1, ...]), HunyuanVideo's
    contiguous one and LTX-2's whole audio stream: under sp every tap equals the plain model's."""
    config = CONFIGS[family]["even"]
    ref = taps_at_step0(family, config, make_plan("local"), 1)
    got = taps_at_step0(family, config, make_plan("sp", impl="xla"), 4)
    assert list(got) == list(ref) and any(n.startswith(("single", "block0.audio")) for n in got)
    for name, x in ref.items():
        rel = np.linalg.norm(got[name].astype(np.float64) - x) / np.linalg.norm(x.astype(np.float64))
        assert rel < 1e-5, (name, rel)
