"""PSNR and friends against hand-computed cases, numpy and scikit-image."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra.numpy import arrays
from skimage.metrics import mean_squared_error, peak_signal_noise_ratio

from perfkit.common.json_figures import json_safe
from perfkit.quality import compare as quality
from perfkit.quality import planes
from perfkit.errors import BadInput


def test_known_mse_and_an_identical_frame():
    a = np.zeros((2, 4, 4, 3), np.uint8)
    b = a.copy()
    b[0] += 10  # frame 0: every value off by 10 -> MSE 100; frame 1 identical
    r = quality.compare(a, b, per_frame=True)
    psnr_100 = 10 * math.log10(255**2 / 100)  # 28.1308 dB
    assert [row["psnr_db"] for row in r["per_frame"]] == pytest.approx([psnr_100, math.inf])
    assert r["psnr_mean_db"] == pytest.approx(psnr_100)  # the identical frame is counted, not averaged
    assert r["identical_frames"] == 1 and r["frames"] == 2
    assert r["psnr_pooled_db"] == pytest.approx(10 * math.log10(255**2 / 50))  # pooled MSE (100 + 0) / 2
    assert r["psnr_min_db"] == pytest.approx(psnr_100) and r["worst_frame"] == 0
    assert r["mean_abs_diff"] == 5.0 and r["max_abs_diff"] == 10 and r["share_over_16"] == 0
    assert r["bit_identical"] is False


def test_one_value_off_by_255():
    a = np.zeros((16, 16, 3), np.uint8)  # one frame (H, W, C)
    b = a.copy()
    b[3, 5, 1] = 255
    r = quality.compare(a, b)
    # MSE = 255^2 / 768 -> PSNR = 10 log10(768)
    assert r["psnr_pooled_db"] == pytest.approx(10 * math.log10(768)) == r["psnr_mean_db"]
    assert r["share_over_16"] == pytest.approx(1 / 768) and r["max_abs_diff"] == 255


def test_identical_inputs_are_inf_and_written_as_the_string():
    a = np.full((3, 8, 8, 3), 7, np.uint8)
    r = quality.compare(a, a.copy())
    assert r["psnr_mean_db"] == r["psnr_pooled_db"] == r["psnr_min_db"] == math.inf
    assert r["identical_frames"] == 3 and r["bit_identical"] and r["sha256"][0] == r["sha256"][1]
    safe = json_safe(r)
    assert safe["psnr_mean_db"] == "inf" and safe["psnr_pooled_db"] == "inf"


@pytest.mark.parametrize("shape", [(1, 3, 5, 3), (2, 37, 41, 3), (1, 16, 16, 4), (1, 9, 7, 1), (1, 545, 961, 3),
                                   (1, 1100, 961, 1)])
def test_frame_sums_are_exact(shape):
    """The float32 block sums equal int64 numpy exactly, per channel and per (strided) plane, extremes
    (0 vs 255) and ragged tails included; the last two shapes are summed in chunks of rows (4 and 3, the
    last one short)."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    b = rng.integers(0, 256, shape, dtype=np.uint8)
    b.reshape(-1)[::5] = 255 - a.reshape(-1)[::5]

    def by_hand(x, y):
        d = x.astype(np.int64) - y
        return float((d * d).sum()), float(np.abs(d).sum()), int(np.abs(d).max()), int((np.abs(d) > 16).sum())

    for fa, fb in zip(a, b):
        assert planes.frame_sums(fa, fb) == [by_hand(fa[..., c], fb[..., c]) for c in range(shape[-1])]
        pa, pb = (np.pad(f[..., 0], ((0, 0), (0, 7)))[:, :shape[2]] for f in (fa, fb))  # a decoder's line padding
        assert planes.yuv_sums((pa, pb), (pb, pa)) == [by_hand(pa, pb)] * 2


@pytest.mark.parametrize("apart", [0, 1, 16, 17], ids=["equal", "at most 1 apart", "at most 16 apart", "up to 17 apart"])
def test_close_planes_sum_exactly(apart):
    """Planes equal, or apart by at most 1, 16 or 17 (a good encode's chroma): the sums skipped for them (all
    of them where the planes are equal, the count over 16 where none is) are what int64 numpy gives."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 256, (544, 960), dtype=np.uint8)
    b = np.clip(a.astype(np.int64) + rng.integers(-apart, apart + 1, a.shape), 0, 255).astype(np.uint8)
    d = np.abs(a.astype(np.int64) - b).reshape(-1)
    assert d.max() == apart
    assert planes.plane_sums(planes.abs_diff(a, b)) == (float(d @ d), float(d.sum()), apart, int((d > 16).sum()))


def test_chunks_of_a_frame_pool_into_its_sums():
    """Differences in the first and in the last chunk of rows only: each channel's max and counts come from
    the chunk that holds them, the others' add nothing."""
    a, b = np.zeros((1100, 961, 3), np.uint8), np.zeros((1100, 961, 3), np.uint8)
    a[0, 0, 1], b[-1, -1, 2] = 200, 20
    assert planes.frame_sums(a, b) == [(0.0, 0.0, 0, 0), (40000.0, 200.0, 200, 1), (400.0, 20.0, 20, 1)]
    assert planes.frame_sums(a[..., 1], b[..., 1]) == [(40000.0, 200.0, 200, 1)]


def test_sums_of_a_whole_plane_are_exact():
    """960x544 planes 255 apart everywhere, and apart by random amounts (sums with low bits set): each
    block's float32 sums at or near their largest (256 x 255**2 < 2**24), the plane's far past float32's
    exact integers."""
    zero = np.zeros((544, 960), np.uint8)
    n = zero.size
    assert planes.plane_sums(planes.abs_diff(zero, np.full_like(zero, 255))) == (n * 255.0**2, n * 255.0, 255, n)
    apart = np.random.default_rng(5).integers(0, 256, zero.shape, dtype=np.uint8)
    d = apart.astype(np.int64).reshape(-1)
    assert planes.plane_sums(planes.abs_diff(apart, zero)) == (float(d @ d), float(d.sum()), int(d.max()),
                                                               int((d > 16).sum()))


def test_agrees_with_scikit_image(clip, noisy):
    a = clip(frames=5)
    b = noisy(a, 9)
    r = quality.compare(a, b, per_frame=True)
    for fa, fb, row in zip(a, b, r["per_frame"]):
        assert row["psnr_db"] == pytest.approx(peak_signal_noise_ratio(fa, fb, data_range=255), abs=1e-9)
        assert row["mse"] == pytest.approx(mean_squared_error(fa, fb), rel=1e-12)
    pooled = np.mean([mean_squared_error(fa, fb) for fa, fb in zip(a, b)])
    assert r["psnr_pooled_db"] == pytest.approx(10 * math.log10(255**2 / pooled))


@settings(max_examples=25, deadline=None)
@given(arrays(np.uint8, (3, 4, 5, 3)), arrays(np.uint8, (3, 4, 5, 3)))
def test_mean_of_frames_is_at_least_pooled_at_least_worst(a, b):
    """-log is convex, so over differing frames: mean of per-frame PSNR >= PSNR of pooled MSE >= worst."""
    r = quality.compare(a, b)
    if r["identical_frames"] == 0:
        assert r["psnr_mean_db"] >= r["psnr_pooled_db"] - 1e-9
    assert r["psnr_pooled_db"] >= r["psnr_min_db"] - 1e-9
    assert r["bit_identical"] == bool(np.array_equal(a, b))


def test_tensor_metrics_by_hand():
    a = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    b = np.array([[3.0, 4.0], [0.0, 1.0]], np.float32)
    r = quality.compare(a, b)
    assert r["kind"] == "tensor"
    assert r["rel_l2"] == pytest.approx(1 / 5)  # ||a - b|| = 1, ||a|| = 5
    assert r["cosine"] == pytest.approx(25 / (5 * math.sqrt(26)))
    assert r["max_abs_diff"] == 1 and r["mean_abs_diff"] == pytest.approx(0.25)
    assert r["psnr_db"] == pytest.approx(10 * math.log10(4**2 / 0.25))  # A's range 4, MSE 1/4
    assert r["bit_identical"] is False


def _figures_by_hand(a: np.ndarray, b: np.ndarray) -> dict:
    """The tensor figures of A and B, float64, over the places given (numpy alone)."""
    x, y = a.astype(np.float64), b.astype(np.float64)
    d = x - y
    return {"rel_l2": np.linalg.norm(d) / np.linalg.norm(x),
            "cosine": x @ y / (np.linalg.norm(x) * np.linalg.norm(y)),
            "max_abs_diff": np.abs(d).max(), "mean_abs_diff": np.abs(d).mean(),
            "psnr_db": 10 * math.log10(np.ptp(x) ** 2 / np.mean(d * d))}


def test_tensor_nan_and_inf_are_counted_and_left_out():
    """NaN and inf are counted per side; the figures are over the places finite in both, and undefined (null)
    at the top level where one side's NaN or inf is not the other's: a NaN in B is a broken B, never a close one.
    The same NaN and inf at the same places are alike, and a tensor with a NaN is bit-identical to itself."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = a + np.float32(1e-3) * rng.standard_normal(a.shape).astype(np.float32)
    b[0, 7], b[3, 9] = np.nan, np.inf
    finite = np.isfinite(b)
    expect = _figures_by_hand(a[finite], b[finite])
    r = quality.compare(a, b)
    assert (r["nonfinite"], r["nan"], r["nonfinite_parted"]) == ([0, 2], [0, 1], 2)
    assert r["finite"] == pytest.approx({"values": a.size - 2, **expect})
    assert all(math.isnan(r[k]) for k in expect) and r["bit_identical"] is False
    assert r["data_range"] == pytest.approx(np.ptp(a[finite].astype(np.float64)))
    safe = json_safe(r)
    assert [safe[k] for k in expect] == [None] * 5 and safe["finite"]["values"] == a.size - 2
    a_too = a.copy()
    a_too[0, 7], a_too[3, 9] = np.nan, np.inf  # A holds the same: the figures are over the rest
    r = quality.compare(a_too, b)
    assert (r["nonfinite"], r["nan"], r["nonfinite_parted"]) == ([2, 2], [1, 1], 0)
    assert {k: r[k] for k in expect} == pytest.approx(expect) and r["finite"]["values"] == a.size - 2
    r = quality.compare(b, b.copy())
    assert r["bit_identical"] is True and r["rel_l2"] == 0 and r["psnr_db"] == math.inf
    other = b.copy()
    other[0, 7], other[3, 9] = np.inf, -np.inf  # NaN against inf, inf against -inf: both part
    r = quality.compare(b, other)
    assert (r["nonfinite"], r["nan"], r["nonfinite_parted"]) == ([2, 2], [1, 0], 2) and math.isnan(r["rel_l2"])
    r = quality.compare(a, a + np.float32(1))  # all finite: counted as none, no separate figures
    assert (r["nonfinite"], r["nan"], r["nonfinite_parted"]) == ([0, 0], [0, 0], 0) and "finite" not in r
    r = quality.compare(np.array([True, False, True]), np.array([True, True, True]))  # booleans: 0 and 1
    assert r["data_range"] == 1 and r["max_abs_diff"] == 1 and r["rel_l2"] == pytest.approx(1 / math.sqrt(2))


def test_tensors_of_other_shape_or_dtype_are_refused():
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(BadInput, match="shape or dtype"):
        quality.compare(a, np.zeros((3, 2), np.float32))
    with pytest.raises(BadInput, match="shape or dtype"):
        quality.compare(a, np.zeros((2, 3), np.float64))
    with pytest.raises(BadInput, match=r"holds frames.*: frames \(uint8, and images and videos\) compare with frames, "
                                       r"other arrays as tensors; convert one side"):
        quality.compare(np.zeros((2, 3, 4, 3), np.uint8), np.zeros((2, 3, 4, 3), np.float32))
    with pytest.raises(BadInput, match="not a numeric dtype"):  # how numpy saves bfloat16
        quality.compare(np.zeros(4, "V2"), np.zeros(4, "V2"))


def test_drift_per_step_against_numpy(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 1, 16, 4)).astype(np.float32)
    b = a + (np.arange(5) * 1e-3)[:, None, None, None] * rng.standard_normal(a.shape).astype(np.float32)
    table = quality.drift(a, b)
    assert list(table["step"]) == list(range(5))
    for s in range(5):
        d = a[s].astype(np.float64) - b[s]
        assert table["rel_l2"][s] == pytest.approx(np.linalg.norm(d) / np.linalg.norm(a[s].astype(np.float64)))
        mse = np.mean(d * d)
        expect = math.inf if mse == 0 else 10 * math.log10(np.ptp(a[s].astype(np.float64)) ** 2 / mse)
        assert table["psnr_db"][s] == pytest.approx(expect)
    assert table["rel_l2"][0] == 0 and (np.diff(table["rel_l2"]) > 0).all()
    png = quality.plot_drift(table, tmp_path / "plots" / "drift.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_json_safe():
    assert json_safe({"x": [math.inf, -math.inf, math.nan, np.int64(3), (1.5,)]}) == \
        {"x": ["inf", "-inf", None, 3, [1.5]]}


@pytest.mark.parametrize("text, expect", [("0:49", (0, 49)), (":10", (0, 10)), ("5:", (5, None)), (None, (0, None))])
def test_frame_range(text, expect):
    assert tuple(quality.parse_frame_range(text)) == expect


@pytest.mark.parametrize("text", ["5", "a:b", "5:5", "-1:3"])
def test_bad_frame_range(text):
    with pytest.raises(BadInput, match="--frames"):
        quality.parse_frame_range(text)
