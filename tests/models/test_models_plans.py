"""Every plan against the plain model (plan ``local`` on one device, float64), for every family: on one
device in float64 and on 4 simulated devices in float32, with padded and unpadded streams, CFG on and
off; and the guards (pad keys dropped, q / k norm gains permuted for split-halves RoPE, a stream that
does not split refused without ``pad``).

Tolerances. perfkit.kernels computes in float32, or in the input's type where wider
(perfkit.kernels.precision), so a float64 run is float64 throughout but for the timestep features
(float32 on both sides): one device in float64 agrees with the plain model to 1e-10 whatever the plan
changes (pad rows, summation order of split-halves channels). On 4 devices in float32 the collectives
regroup sums (measured up to 3.3e-6). The logic errors the guards plant (pad keys attended to, norm
gains not permuted) move outputs by 0.05-0.09."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from model_testing import CONFIGS, FAMILIES, GUIDANCE, STEPS, denoise, outputs

from perfkit import models
from perfkit.errors import BadInput
from perfkit.kernels import collective_matmul as cm
from perfkit.models import layers as L
from perfkit.models.pipeline import DenoiseConfig, Denoiser, decode
from perfkit.models.plans import Plan, make_plan

FLOAT64_ATOL = 1e-10
FLOAT32_ATOL = 2e-5
LOGIC_ERROR = 1e-2

# (plan, options, config kind, CFG scale): each plan padded and unpadded, CFG on and off.
ONE_DEVICE_FLOAT64 = [
    ("tp", {}, "odd", GUIDANCE),
    ("sp", {"impl": "ring", "pad": "lanes", "split_rope": True}, "even", GUIDANCE),  # 64 rows padded to 128
    ("ulysses", {"pad": "lanes"}, "odd", None),
]
FOUR_DEVICES_FLOAT32 = [
    ("tp", {}, "even", GUIDANCE),
    ("sp", {"impl": "xla"}, "even", None),
    ("sp", {"impl": "ring", "pad": "halves"}, "odd", GUIDANCE),
    ("ulysses", {}, "even", GUIDANCE),
    ("ulysses", {"pad": "tiles", "split_rope": True}, "odd", None),
]


def _id(case):
    plan, options, kind, guidance = case
    return "-".join([plan, *(f"{k}={v}" for k, v in options.items()), kind, "cfg" if guidance else "nocfg"])


def _assert_close(got: dict, want: dict, atol: float) -> None:
    assert got.keys() == want.keys()
    for name in want:
        assert got[name].shape == want[name].shape, name
        np.testing.assert_allclose(got[name], want[name], rtol=0, atol=atol, err_msg=name)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", ONE_DEVICE_FLOAT64, ids=_id)
def test_plan_matches_the_plain_model_on_one_device_in_float64(reference, family, case):
    plan, options, kind, guidance = case
    want = reference(family, kind, guidance)
    with jax.enable_x64(True):
        den = denoise(family, CONFIGS[family][kind], make_plan(plan, **options), 1, guidance=guidance, dtype="float64")
        _assert_close(outputs(den), want, FLOAT64_ATOL)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("case", FOUR_DEVICES_FLOAT32, ids=_id)
def test_plan_matches_the_plain_model_on_four_devices_in_float32(reference, family, case):
    plan, options, kind, guidance = case
    cfg = CONFIGS[family][kind]
    den = denoise(family, cfg, make_plan(plan, **options), 4, guidance=guidance)
    want = reference(family, kind, guidance)
    _assert_close(outputs(den), want, FLOAT32_ATOL)
    frames, want_frames = den.frames(), decode(want[den.primary][0].astype(np.float32), cfg.grid)
    assert frames.dtype == np.uint8 and frames.shape == (cfg.grid[0], cfg.grid[1] * 8, cfg.grid[2] * 8, 3)
    assert np.abs(frames.astype(int) - want_frames).max() <= 1  # a rounding step of the uint8 decode
    assert frames.std() > 10  # not a constant image


def test_guard_pad_keys_are_dropped(monkeypatch, reference):
    """Without the pad-key cut the padded plans attend to pad rows and miss the plain model by far:
    the parity tests above would fail. FLUX's joined stream has pad rows inside the gathered order."""
    monkeypatch.setattr(Plan, "_real_keys", lambda self, stream, k, v: (k, v))
    den = denoise("flux", CONFIGS["flux"]["odd"], make_plan("sp", pad="halves"), 4)
    got, want = outputs(den)["image"], reference("flux", "odd", None)["image"]
    assert np.abs(got - want).max() > LOGIC_ERROR


def test_guard_split_rope_permutes_the_qk_norm_gains(monkeypatch, reference):
    """Permuting only the q / k projections (not the per-head norm gains) breaks split-halves RoPE:
    the split_rope parity tests above would fail."""
    permute = L.permute_for_split_rope

    def projections_only(params, specs):
        specs = jax.tree.map(lambda w: dataclasses.replace(w, rope_head_dim=None) if len(w.shape) == 1 else w,
                             specs, is_leaf=L.is_weight)
        return permute(params, specs)

    monkeypatch.setattr(L, "permute_for_split_rope", projections_only)
    den = denoise("wan", CONFIGS["wan"]["even"], make_plan("sp", split_rope=True), 4)
    assert np.abs(outputs(den)["video"] - reference("wan", "even", None)["video"]).max() > LOGIC_ERROR


@pytest.mark.parametrize("family,plan,stream,rows", [
    ("ltx2", "sp", "video", 90),
    ("hunyuan", "ulysses", "video", 35),
    ("flux", "sp", "image", 35),
])
def test_guard_a_stream_that_does_not_split_needs_pad(family, plan, stream, rows):
    with pytest.raises(BadInput) as err:
        Denoiser(family, CONFIGS[family]["odd"], make_plan(plan), jax.devices()[:4], DenoiseConfig(steps=1))
    assert err.value.field == "options.pad"
    assert f"stream {stream!r} has {rows} rows, which do not split over 4 devices" in err.value.reason


def test_restarting_from_the_first_latents_repeats_the_run():
    """What the worker's natural pass does (``den.index, den.latents = 0, start``): every denoised
    stream restarts (LTX-2's audio from its seeded noise), padded video included."""
    den = Denoiser("ltx2", CONFIGS["ltx2"]["odd"], make_plan("sp", pad="halves"), jax.devices()[:4],
                   DenoiseConfig(steps=STEPS, seed=3))
    start = den.latents
    assert start.shape == (1, 90, 4)
    for _ in range(STEPS):
        den.step()
    first = outputs(den)
    den.index, den.latents = 0, start
    for _ in range(STEPS):
        den.step()
    again = outputs(den)
    for name in ("video", "audio"):
        np.testing.assert_array_equal(again[name], first[name])


def _collective_matmuls(monkeypatch, family, config) -> tuple[list[int], list[int]]:
    """Under ``sp`` on 4 devices, one traced step: the weights of each all-gather matmul and the (x, w)
    pairs of each matmul reduce-scatter."""
    gathers, scatters = [], []
    gather, scatter = cm.all_gather_matmul, cm.matmul_reduce_scatter
    monkeypatch.setattr(cm, "all_gather_matmul", lambda x, ws, **kw: gathers.append(len(ws)) or gather(x, ws, **kw))
    monkeypatch.setattr(cm, "matmul_reduce_scatter", lambda pairs, **kw: scatters.append(len(pairs)) or scatter(pairs, **kw))
    den = Denoiser(family, config, make_plan("sp", pad="halves"), jax.devices()[:4], DenoiseConfig(steps=1))
    jax.eval_shape(den.program, den.params, den.state, den.conditions, np.float32(1), np.float32(-1))
    return sorted(gathers), sorted(scatters)


@pytest.mark.parametrize("family", ["flux", "hunyuan"])
def test_sp_single_blocks_gather_once_and_scatter_once(monkeypatch, family):
    """Per stream, a dual-stream block gathers for q / k / v (3 weights) and the FFN (1) and scatters
    attention out and FFN down; the single block gathers q, k, v and the MLP input in one all-gather
    (4 weights) and scatters both output halves in one reduce-scatter (2 pairs)."""
    gathers, scatters = _collective_matmuls(monkeypatch, family, CONFIGS[family]["odd"])
    assert gathers == [1, 1, 3, 3, 4] and scatters == [1, 1, 1, 1, 2]


def test_sp_keeps_the_ltx2_audio_tensor_parallel(monkeypatch):
    """Video-facing projections ride the collective matmuls (self-attention q / k / v, text and a2v
    queries, v2a's video k / v in one two-weight gather, the FFN); the audio's never do: its outputs
    are all-reduced as under tp, and v2a's output goes to the audio."""
    gathers, scatters = _collective_matmuls(monkeypatch, "ltx2", CONFIGS["ltx2"]["odd"])
    assert gathers == [1, 1, 1, 2, 3] and scatters == [1, 1, 1, 1]


@pytest.mark.parametrize("family", FAMILIES)
def test_a_bfloat16_model_computes_in_bfloat16(family):
    """A newcomer's bfloat16 run: every tap was float32, and so was the velocity. The float32 timestep features
    promoted the time embedding, then every activation the adaLN modulation touched; the weights' dtype now holds
    throughout (dots accumulate in float32 and return the input's type, as perfkit.kernels.precision says)."""
    from perfkit.models import taps

    fam = models.get(family)
    cfg = CONFIGS[family]["even"]
    params = jax.tree.map(lambda w: jax.ShapeDtypeStruct(w.shape, jnp.bfloat16), fam.param_specs(cfg),
                          is_leaf=L.is_weight)
    streams = fam.streams(cfg)
    inputs = {n: jax.ShapeDtypeStruct((1, s.rows, s.channels), jnp.bfloat16) for n, s in streams.items()
              if hasattr(s, "rows")}
    plan = make_plan("local").bind(streams, 1)
    with taps.collecting() as found:
        out = jax.eval_shape(lambda p, x: fam.forward(p, x, jnp.zeros((1,), jnp.float32), cfg=cfg, plan=plan),
                             params, inputs)
    assert {name: str(x.dtype) for name, x in out.items()} == {name: "bfloat16" for name in out}
    assert found and {str(x.dtype) for _, x, _ in found} == {"bfloat16"}
