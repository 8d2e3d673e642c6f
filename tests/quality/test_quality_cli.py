"""``perfkit quality``: the --json contract, text output, codec floor, drift, imports, ffmpeg agreement."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from skimage import io as skio

CONTRACT = {"frames", "psnr_mean_db", "psnr_pooled_db", "psnr_min_db", "identical_frames", "mean_abs_diff",
            "max_abs_diff", "bit_identical"}


def test_json_contract(tmp_path, clip, noisy, quality_cli):
    a = clip(frames=4)
    b = noisy(a, 12)
    b[2] = a[2]  # one identical frame
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--json", "--per-frame")
    assert res.exit_code == 0, res.stderr
    r = res.json()
    assert CONTRACT <= set(r) and r["frames"] == 4 and r["identical_frames"] == 1
    assert [row["frame"] for row in r["per_frame"]] == [0, 1, 2, 3] and r["per_frame"][2]["psnr_db"] == "inf"
    finite = [row["psnr_db"] for row in r["per_frame"] if row["psnr_db"] != "inf"]
    assert r["psnr_mean_db"] == pytest.approx(np.mean(finite))
    assert "per_frame" not in quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--json").json()


def test_text_names_its_conventions(tmp_path, clip, noisy, quality_cli):
    a = clip(frames=3)
    b = noisy(a, 5)
    b[0] = a[0]
    for name, frames in (("a", a), ("b", b)):  # PNG frames, which ffmpeg reads (it reads no .npy)
        (tmp_path / name).mkdir()
        for i, frame in enumerate(frames):
            skio.imsave(tmp_path / name / f"{i:03d}.png", frame, check_contrast=False)
    out = quality_cli(tmp_path / "a", tmp_path / "b", "--ssim").stdout
    assert "1 of 3 frames identical" in out and "over the 2 differing frames" in out
    assert "PSNR in RGB24: r " in out and "format=rgb24" in out  # named by the ffmpeg command that gives it
    assert "/255" in out and "SSIM in RGB channels: R " in out and "bit-identical: no (sha256 of the RGB24 frames" in out


def test_codec_floor_alone_and_bad_settings(tmp_path, clip, quality_cli):
    np.save(tmp_path / "a.npy", clip(frames=3, height=32, width=48))
    res = quality_cli(tmp_path / "a.npy", "--codec-floor", "--json")
    assert res.exit_code == 0, res.stderr
    floor = res.json()["codec_floor"]
    assert floor["codec"] == "libx264 yuv420p crf=18" and floor["frames"] == 3 and not floor["bit_identical"]
    # B is the encode held in memory: no ffmpeg command names it (one with B a file that is not there was given)
    assert (floor["rgb"]["reproduce"], floor["rgb"]["no_reproduce"]) == (
        None, "no ffmpeg command: B is A's encode, held in memory")
    res = quality_cli(tmp_path / "a.npy", "--codec-floor", "--codec", "libx264rgb:crf=0", "--json")
    assert res.json()["codec_floor"]["bit_identical"]
    res = quality_cli(tmp_path / "a.npy", "--codec-floor", "--codec", "nosuchcodec")
    assert res.exit_code == 2 and "--codec: no encoder 'nosuchcodec'" in res.stderr
    res = quality_cli(tmp_path / "a.npy")
    assert res.exit_code == 2 and "give B" in res.stderr


def test_drift_table_and_plot(tmp_path, quality_cli, fixtures_dir):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 8, 3)).astype(np.float32)
    b = a * np.float32(1.001)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--drift", "--json", "--plot", tmp_path / "d.png")
    assert res.exit_code == 0, res.stderr
    rows = res.json()["rows"]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    assert all(r["rel_l2"] == pytest.approx(0.001, rel=1e-3) and r["cosine"] == pytest.approx(1) for r in rows)
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy")  # without --drift: one tensor comparison
    assert "rel L2 1.000e-03" in res.stdout
    res = quality_cli(tmp_path / "a.npy", "--drift", "--codec-floor")  # no B: refused in a line, no traceback
    assert res.exit_code == 2 and "--drift compares A's per-step latents with B's: give B" in res.stderr
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--plot", tmp_path / "q.png")  # no plot to draw: said
    assert res.exit_code == 2 and "--plot draws --drift's steps" in res.stderr and not (tmp_path / "q.png").exists()
    # frames are not latents: a video, or uint8 frames saved as .npy (drift's PSNR would be over A's range, not 255)
    np.save(tmp_path / "frames.npy", np.zeros((4, 16, 16, 3), np.uint8))
    video = fixtures_dir / "video" / "cogvideox_horse_720x480_49f.mp4"
    for frames in (tmp_path / "frames.npy", video):
        res = quality_cli(frames, frames, "--drift")
        assert res.exit_code == 2 and res.stderr == (f"perfkit: {frames}: holds frames, not per-step latents: compare "
                                                     "them without --drift (--per-frame gives a row per frame)\n")


def test_tensor_nonfinite_values_are_said(tmp_path, quality_cli):
    """A NaN in B: the text says how many non-finite values each side holds before the figures, which are over
    the values finite in both; --json counts them and leaves the figures over all values null."""
    a = np.linspace(-1, 3, 4096, dtype=np.float32)
    b = a.copy()
    b[5] = np.nan
    np.save(tmp_path / "f32.npy", a)
    np.save(tmp_path / "f32nan.npy", b)
    res = quality_cli(tmp_path / "f32.npy", tmp_path / "f32nan.npy")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == ("non-finite values of 4096: A none, B 1 (1 NaN, 0 inf); they part at 1 place: no figure is "
                        "defined over all values; these are over the 4095 values finite in both:")
    assert lines[1].startswith("tensor float32[4096]: rel L2 0.000e+00, cosine 1.00000000, max |d| 0, mean |d| 0, "
                               "PSNR inf dB (data range 4, A's max - min over the values finite in both)")
    r = quality_cli(tmp_path / "f32.npy", tmp_path / "f32nan.npy", "--json").json()
    assert (r["nonfinite"], r["nan"], r["nonfinite_parted"]) == ([0, 1], [0, 1], 1)
    assert r["rel_l2"] is None and r["psnr_db"] is None and r["finite"]["values"] == 4095
    assert r["finite"]["rel_l2"] == 0 and r["finite"]["psnr_db"] == "inf"
    res = quality_cli(tmp_path / "f32nan.npy", tmp_path / "f32nan.npy")  # the same NaN: alike, and said
    assert res.stdout.splitlines()[0] == ("non-finite values of 4096: A 1 (1 NaN, 0 inf), B 1 (1 NaN, 0 inf); at the "
                                          "same places: the figures are over the 4095 values finite in both")
    assert "bit-identical: yes" in res.stdout
    res = quality_cli(tmp_path / "f32.npy", tmp_path / "f32.npy")  # none: no such line
    assert res.stdout.startswith("tensor float32[4096]: rel L2 0.000e+00")



def test_tensor_with_no_value_finite_in_both_names_no_data_range(tmp_path, quality_cli):
    """B all NaN: the line read "data range nan, A's max - min" though A's max - min is 4 (numpy); the range is
    over the values finite in both, as the figures beside it are, and there are none."""
    a = np.linspace(-1, 3, 4096, dtype=np.float32)
    np.save(tmp_path / "f32.npy", a)
    np.save(tmp_path / "nan.npy", np.full_like(a, np.nan))
    res = quality_cli(tmp_path / "f32.npy", tmp_path / "nan.npy")
    assert res.exit_code == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].endswith("no figure is defined over all values, and no value is finite in both"), lines
    assert lines[1] == ("tensor float32[4096]: rel L2 nan, cosine nan, max |d| nan, mean |d| nan, PSNR nan dB (no data "
                        "range: no value is finite in both)"), lines
    assert quality_cli(tmp_path / "f32.npy", tmp_path / "nan.npy", "--json").json()["data_range"] is None

def test_help_imports_no_figures():
    """``perfkit quality --help`` needs click alone: numpy, PyAV and pandas load when the command runs."""
    code = ("import sys\nfrom click.testing import CliRunner\nfrom perfkit.cli import cli\n"
            "assert CliRunner().invoke(cli, ['quality', '--help']).exit_code == 0\n"
            "print(sorted(m for m in ('numpy', 'av', 'pandas', 'perfkit.quality.compare') if m in sys.modules))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_video_pair_imports_no_pandas_and_leaves_one_thread(tmp_path, clip, noisy):
    """The default comparison of two videos is numpy and PyAV only (pandas costs ~0.3 s to import). Afterwards
    the process holds its main thread alone (Linux: /proc): the decoding threads are joined, and numpy's
    OpenBLAS loaded without its pool (a spinning thread per core, CPU the decoders need); the variable that
    kept the pool off is unset again."""
    from perfkit.quality import media

    for name, frames in (("a", clip(frames=3)), ("b", noisy(clip(frames=3), 8))):
        media.write_video(iter(frames), tmp_path / f"{name}.mp4")
    code = ("import os, sys\nfrom click.testing import CliRunner\nfrom perfkit.cli import cli\n"
            f"res = CliRunner().invoke(cli, ['quality', {str(tmp_path / 'a.mp4')!r}, {str(tmp_path / 'b.mp4')!r}])\n"
            "assert res.exit_code == 0 and 'PSNR in yuv420p planes' in res.stdout, res.stdout\n"
            "import time\nthreads, end = 1, time.monotonic() + 2\n"  # a joined thread may linger in /proc a moment
            "while os.path.isdir('/proc/self/task') and time.monotonic() < end:\n"
            "    threads = len(os.listdir('/proc/self/task'))\n"
            "    if threads == 1:\n        break\n    time.sleep(0.01)\n"
            "print('pandas' in sys.modules, threads, 'OPENBLAS_NUM_THREADS' in os.environ)\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False 1 False"


def test_quality_imports_neither_jax_nor_torch(tmp_path, clip):
    np.save(tmp_path / "a.npy", clip(frames=2, height=32, width=32))
    np.save(tmp_path / "l.npy", np.zeros((2, 3), np.float32))
    code = (
        "import sys\nfrom click.testing import CliRunner\nfrom perfkit.cli import cli\n"
        f"a, l = {str(tmp_path / 'a.npy')!r}, {str(tmp_path / 'l.npy')!r}\n"
        "runs = ([a, a, '--ssim', '--per-frame'], [a, '--codec-floor'], [l, l, '--drift', '--plot', a + '.png'])\n"
        "for args in runs:\n"
        "    assert CliRunner().invoke(cli, ['quality', *args]).exit_code == 0, args\n"
        "print(sorted(m for m in ('jax', 'torch') if m in sys.modules))\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="no ffmpeg binary on this machine")
def test_agrees_with_ffmpeg_psnr_filter(tmp_path, clip, noisy, quality_cli):
    """ffmpeg's psnr filter on RGB PNG frames: its average is the pooled-MSE PSNR, its min the worst frame."""
    a = clip(frames=5)
    b = noisy(a, 10)
    for name, frames in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        for i, f in enumerate(frames):
            skio.imsave(tmp_path / name / f"{i:03d}.png", f, check_contrast=False)
    ff = subprocess.run(["ffmpeg", "-hide_banner", "-i", str(tmp_path / "a/%03d.png"), "-i",
                         str(tmp_path / "b/%03d.png"), "-lavfi", "psnr", "-f", "null", "-"],
                        capture_output=True, text=True, timeout=120)
    average = float(re.search(r"average:([0-9.]+)", ff.stderr).group(1))
    worst = float(re.search(r"min:([0-9.]+)", ff.stderr).group(1))
    r = quality_cli(tmp_path / "a", tmp_path / "b", "--json").json()
    assert r["psnr_pooled_db"] == pytest.approx(average, abs=0.01)
    assert r["psnr_min_db"] == pytest.approx(worst, abs=0.01)


def test_identical_frames_name_no_command(tmp_path, clip, quality_cli):
    """A folder of frames and a lossless video of them (libx264rgb, 8 a second): every frame identical, so no
    ffmpeg command is printed, and no line refers to one (the pairing and the FFmpeg release read "the commands
    given" with none given)."""
    from lavfi_referee import encode

    frames = clip(frames=6)
    folder = tmp_path / "frames"
    folder.mkdir()
    for i, frame in enumerate(frames):
        skio.imsave(folder / f"{i:03d}.png", frame, check_contrast=False)
    video = encode(list(frames), tmp_path / "v.mkv", "libx264rgb", "rgb24", {"crf": "0"})
    res = quality_cli(folder, video)
    assert res.exit_code == 0, res.stderr
    assert "6 of 6 frames identical" in res.stdout and "frames paired by index" in res.stdout
    assert "command" not in res.stdout and "ffmpeg -" not in res.stdout, res.stdout


def test_the_ffmpeg_release_of_the_figures_is_named(tmp_path, clip, noisy, quality_cli):
    """The figures are libavfilter's as PyAV holds it (5.1's ssim gave U 0.999696 where PyAV's 8.1 gives
    0.999993 on the same pair): the text names the release beside its commands, the JSON in ``ffmpeg``."""
    import av

    frames = clip(frames=3)
    np.save(tmp_path / "a.npy", frames)
    np.save(tmp_path / "b.npy", noisy(frames, 8))
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy")
    assert f"figures as the filters of FFmpeg {av.ffmpeg_version_info} (PyAV's libavfilter " in res.stdout
    assert quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--json").json()["ffmpeg"].startswith(
        f"FFmpeg {av.ffmpeg_version_info} ")


def test_per_frame_text_gives_the_share_over_16_as_the_summary_does(tmp_path, clip, quality_cli):
    """--per-frame's table gives each frame's share of |d| > 16 as a percentage, as the summary line does (it gave a
    fraction, 0.0011, under a line giving 0.174%); --json keeps the fraction."""
    frames = clip(frames=2)
    b = frames.copy()
    b[0, :4, :4] ^= 0x80  # 48 of frame 0's 9216 values moved by more than 16: 0.5208%
    np.save(tmp_path / "a.npy", frames)
    np.save(tmp_path / "b.npy", b)
    text = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--per-frame").stdout
    head, first = next((line.split(), nxt.split()) for line, nxt in zip(text.splitlines(), text.splitlines()[1:])
                       if "over_16_%" in line)
    assert first[head.index("over_16_%")] == "0.5208"
    rows = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--per-frame", "--json").json()["per_frame"]
    assert rows[0]["share_over_16"] == pytest.approx(48 / 9216)


def test_a_run_directory_beside_b_is_refused_with_its_outputs_named(tmp_path, quality_cli):
    """A run directory holds the report's plots: given as A or B they were read as a folder of frames (a newcomer
    got 'frame sizes differ: 600x260 vs 600x280', and equal sizes would have given a PSNR of two charts)."""
    run = tmp_path / "run"
    outputs = run / "trials" / "00-tp" / "rank0" / "outputs"
    outputs.mkdir(parents=True)
    (run / "trials.jsonl").write_text("")
    frames = np.zeros((2, 8, 8, 3), np.uint8)
    np.save(outputs / "frames.npy", frames)
    for plot in ("step_times.png", "breakdown.png"):
        (run / "plots").mkdir(exist_ok=True)
        skio.imsave(run / "plots" / plot, np.zeros((8, 8, 3), np.uint8), check_contrast=False)
    np.save(tmp_path / "b.npy", frames)
    for args in ((run, tmp_path / "b.npy"), (tmp_path / "b.npy", run), (run, run)):
        res = quality_cli(*args)
        assert res.exit_code == 2 and res.stderr.count("\n") == 1, res.stderr
        assert res.stderr.startswith(f"perfkit: {run}: a run directory: compare a trial's outputs")
        assert str(outputs) in res.stderr
    assert quality_cli(outputs, tmp_path / "b.npy").exit_code == 0  # the outputs folder itself: compared
    gone = tmp_path / "missing.npy"  # a missing A is named first, not the run directory beside it (a newcomer's)
    res = quality_cli(gone, run)
    assert res.exit_code == 2 and res.stderr == f"perfkit: {gone}: no such file or folder\n"


def test_the_codec_floor_verdict_follows_from_the_figures_beside_it(tmp_path, quality_cli):
    """B with 3 of its 10 frames identical to A: its mean over differing frames leaves those out, the floor's
    takes all of its frames, so a newcomer saw 'B 0.51 dB below the floor' beside averages that put B 1.06 dB above.
    The verdict is now the averages' (each over all frames), its gap the difference of the two figures shown."""
    rng = np.random.default_rng(4)
    y, x = np.mgrid[0:64, 0:64]
    a = np.stack([np.stack([(x * 3 + y + 9 * f) % 256, (y * 2 + 5 * f) % 256, (x + y) % 256], -1)
                  for f in range(10)]).astype(np.uint8)
    b = a.copy()
    b[3:] = np.clip(a[3:] + rng.normal(0, 2.5, a[3:].shape).round(), 0, 255).astype(np.uint8)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--codec-floor")
    assert res.exit_code == 0, res.stderr
    line = res.stdout.splitlines()[-1]
    m = re.fullmatch(r"against the codec floor, both in RGB24: PSNR average over all frames ([\d.]+) dB against the "
                     r"floor's ([\d.]+) dB \(B ([\d.]+) dB (below|above) the floor\); means over each one's differing "
                     r"frames ([\d.]+) dB against ([\d.]+) dB", line)
    assert m, line
    b_avg, floor_avg, gap, side = float(m[1]), float(m[2]), float(m[3]), m[4]
    assert gap == pytest.approx(abs(floor_avg - b_avg), abs=1e-9)
    assert side == ("below" if floor_avg > b_avg else "above")
    assert "3 of 10 frames identical" in res.stdout


def test_a_b_identical_to_a_has_no_mean_over_differing_frames_beside_the_floor(horse_pair, quality_cli):
    """A newcomer's: B identical to A beside the codec floor read 'means over each one's differing frames inf dB
    against ...': with no differing frame there is no such mean, none infinite. The line says B has none and gives
    the floor's; --json keeps its contract (psnr_mean_db "inf" where all frames are identical, never a bare
    Infinity)."""
    video = horse_pair[0]
    res = quality_cli(video, video, "--codec-floor", "--frames", "0:4")
    assert res.exit_code == 0, res.stderr
    line = res.stdout.splitlines()[-1]
    assert re.fullmatch(r"against the codec floor, both in yuv420p planes: PSNR average over all frames inf dB against "
                        r"the floor's \d+\.\d\d dB \(B is identical to A\); the floor's mean over its differing frames "
                        r"\d+\.\d\d dB \(B has no differing frames\)", line), line
    text = quality_cli(video, video, "--codec-floor", "--frames", "0:4", "--json").stdout

    def refuse(token):
        raise AssertionError(f"bare {token} in --json")

    r = json.loads(text, parse_constant=refuse)
    assert r["bit_identical"] and r["identical_frames"] == 4 and r["psnr_mean_db"] == "inf"
    assert not r["codec_floor"]["bit_identical"] and isinstance(r["codec_floor"]["psnr_mean_db"], float)


def test_a_floor_the_codec_could_not_keep_says_so(tmp_path, clip, quality_cli):
    """A newcomer's noise frames: A's own encode scored 12.78 dB and B read '44.40 dB above the floor', nothing
    saying that a codec floor of incompressible frames judges nothing. Uniform noise through the default codec is
    far below 20 dB; a smooth clip's floor is far above it and gets no such line."""
    note = ("  the floor is below 20 dB: the codec keeps little of A (frames like noise do not compress), so it is no "
            "floor to judge B by")
    noise = np.random.default_rng(0).integers(0, 256, (4, 32, 48, 3), dtype=np.uint8)
    np.save(tmp_path / "noise.npy", noise)
    np.save(tmp_path / "smooth.npy", clip(frames=4, height=32, width=48))
    res = quality_cli(tmp_path / "noise.npy", tmp_path / "noise.npy", "--codec-floor")
    assert res.exit_code == 0, res.stderr
    assert res.stdout.splitlines()[-2] == note and res.stdout.splitlines()[-1].startswith("against the codec floor")
    assert note not in quality_cli(tmp_path / "smooth.npy", "--codec-floor").stdout


def test_a_floor_encoder_that_leaves_as_planes_says_so(tmp_path, clip, noisy, quality_cli):
    """--codec without pix_fmt takes the encoder's RGB format where it has one: B and the floor are then measured in
    RGB24, not A's yuv420p planes, which a newcomer found changed unsaid (libx265 took gbrp)."""
    from perfkit.quality.media import write_video

    frames = clip(frames=3, height=32, width=48)
    write_video(frames, tmp_path / "a.mp4")
    write_video(noisy(frames, 4), tmp_path / "b.mp4")
    res = quality_cli(tmp_path / "a.mp4", tmp_path / "b.mp4", "--codec-floor", "--codec", "ffv1", "--json")
    assert res.exit_code == 0 and res.json()["space"] == "rgb"
    fmt = res.json()["codec_floor"]["codec"].split()[1]
    assert res.stderr == (f"perfkit: note: the floor's encoder takes {fmt}, not A's yuv420p: B and the floor are "
                          "measured in RGB24 (--codec ffv1:pix_fmt=yuv420p:... keeps A's planes)\n")
    kept = quality_cli(tmp_path / "a.mp4", tmp_path / "b.mp4", "--codec-floor", "--codec", "ffv1:pix_fmt=yuv420p",
                       "--json")
    assert kept.json()["space"] == "yuv" and kept.stderr == ""


def test_an_alpha_plane_left_out_is_said(tmp_path, clip, quality_cli):
    """RGBA PNGs whose alpha alone differs (halved in B) read as 'bit-identical: yes': RGB24 drops the alpha plane, as
    the commands' format=rgb24 does (ffmpeg's plain psnr on the PNGs gives a 'a' figure). The text and --json say
    the alpha plane is not compared and the text claims only the colour planes bit-identical; RGB PNGs say nothing."""
    from PIL import Image

    rgb = clip(frames=1)[0]
    alpha = np.full(rgb.shape[:2], 200, np.uint8)
    for name, a in (("a", alpha), ("b", alpha // 2)):
        (tmp_path / name).mkdir()
        Image.fromarray(np.dstack([rgb, a]), "RGBA").save(tmp_path / name / "000.png")
    assert Image.open(tmp_path / "a" / "000.png").mode == Image.open(tmp_path / "b" / "000.png").mode == "RGBA"
    text = quality_cli(tmp_path / "a", tmp_path / "b").stdout.splitlines()
    said = (f"the alpha plane of {tmp_path / 'a'} (rgba) and {tmp_path / 'b'} (rgba) is not compared (RGB24 drops it, "
            "as the commands' format=rgb24 does): the figures and sha256 are of the colour planes")
    assert said in text and text[-1].startswith("colour planes bit-identical: yes ("), text
    assert not any(line.startswith("bit-identical") for line in text), text
    r = quality_cli(tmp_path / "a", tmp_path / "b", "--json").json()
    assert r["alpha"] == said
    Image.fromarray(rgb).save(tmp_path / "rgb.png")
    text = quality_cli(tmp_path / "rgb.png", tmp_path / "rgb.png").stdout
    assert "alpha plane" not in text and "\nbit-identical: yes" in text


def test_a_webm_tagged_with_alpha_says_its_alpha_plane_is_not_compared(tmp_path, clip, quality_cli):
    """VP9 WebMs with alpha (libvpx-vp9, yuva420p), one's alpha inverted, read as 'bit-identical: yes' with no word
    of alpha: FFmpeg's own vp9 decoder, which PyAV and ffmpeg -i use, gives yuv420p and skips the alpha, kept in
    Matroska BlockAdditional data; the stream is tagged alpha_mode=1 (ALPHA_MODE where a writer spells it so).
    The referee: libvpx's vp9 decoder, through PyAV, gives the alpha planes, and they differ. The text and --json
    now say that plane is not compared, whatever the tag's case; a WebM without alpha says nothing."""
    import av  # the writer and the referee decoder

    rgb = clip(frames=3)
    alpha = np.broadcast_to(np.arange(48, dtype=np.uint8)[:, None] * 5, rgb.shape[1:3])
    for name, plane, key in (("a", alpha, None), ("b", 255 - alpha, "ALPHA_MODE"), ("plain", None, None)):
        with av.open(tmp_path / f"{name}.webm", "w") as out:
            stream = out.add_stream("libvpx-vp9", rate=10)
            stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p" if plane is None else "yuva420p"
            if key:
                stream.metadata[key] = "1"
            for frame in rgb:
                pixels = frame if plane is None else np.dstack([frame, plane])
                out.mux(stream.encode(av.VideoFrame.from_ndarray(pixels, format="rgb24" if plane is None else "rgba")))
            out.mux(stream.encode())
    referee = {}
    for name in ("a", "b"):
        with av.open(tmp_path / f"{name}.webm") as container:
            stream, decoder = container.streams.video[0], av.CodecContext.create("libvpx-vp9", "r")
            assert stream.format.name == "yuv420p"  # FFmpeg's own decoder: no alpha plane
            referee[name] = (dict(stream.metadata), [frame.to_ndarray(format="rgba")[..., 3]
                                                     for packet in container.demux(stream)
                                                     for frame in decoder.decode(packet)])
    assert "alpha_mode" in referee["a"][0] and "ALPHA_MODE" in referee["b"][0] and len(referee["a"][1]) == 3
    assert all(np.abs(x.astype(int) - y).mean() > 50 for x, y in zip(referee["a"][1], referee["b"][1]))
    text = quality_cli(tmp_path / "a.webm", tmp_path / "b.webm").stdout.splitlines()
    said = (f"the alpha plane of {tmp_path / 'a.webm'} (tagged alpha_mode=1) and {tmp_path / 'b.webm'} (tagged "
            "ALPHA_MODE=1) is not compared (ffmpeg's vp9 decoder, the commands' too, does not decode it): the "
            "figures and sha256 are of the colour planes")
    assert said in text and text[-1].startswith("colour planes bit-identical: yes ("), text
    assert not any(line.startswith("bit-identical") for line in text), text
    assert quality_cli(tmp_path / "a.webm", tmp_path / "b.webm", "--json").json()["alpha"] == said
    text = quality_cli(tmp_path / "plain.webm", tmp_path / "plain.webm").stdout
    assert "alpha plane" not in text and "\nbit-identical: yes" in text


def test_gray_images_are_measured_as_the_commands_measure_them(tmp_path, clip, noisy, quality_cli):
    """Gray PNGs were measured as one channel labelled y ('PSNR in RGB24: y ...', 'SSIM in RGB channels: Y ...') while
    the command beside them (format=rgb24) gives r, g and b: they are now the three equal channels format=rgb24 makes,
    labelled r g b as a gray video's frames are, each with the gray plane's PSNR (computed here with numpy)."""
    from PIL import Image

    gray = clip(frames=1)[0, ..., 0]
    other = noisy(gray, 6)
    for name, frame in (("a", gray), ("b", other)):
        (tmp_path / name).mkdir()
        Image.fromarray(frame, "L").save(tmp_path / name / "000.png")
    r = quality_cli(tmp_path / "a", tmp_path / "b", "--ssim", "--json").json()
    mse = np.mean((gray.astype(np.float64) - other) ** 2)
    assert r["rgb"]["planes"] == r["ssim"]["planes"] == ["r", "g", "b"]
    for plane in ("r", "g", "b", "average"):
        assert r["rgb"]["psnr_db"][plane] == pytest.approx(10 * np.log10(255**2 / mse), abs=1e-9)
    text = quality_cli(tmp_path / "a", tmp_path / "b", "--ssim").stdout
    assert "PSNR in RGB24: r " in text and "SSIM in RGB channels: R " in text, text
    # against the same gray frame as a one-channel array: refused, the channels named (a review's: it read
    # 'frame sizes differ: 64x48 vs 64x48 (1 channel)', two equal sizes)
    np.save(tmp_path / "b.npy", other[None, ..., None])
    res = quality_cli(tmp_path / "a", tmp_path / "b.npy")
    assert res.exit_code == 2 and res.stderr.endswith(
        "frame channels differ: 3 vs 1 (images and videos are compared as RGB24, as ffmpeg's format=rgb24 makes "
        "them: 3)\n"), res.stderr


def test_no_command_is_given_for_an_input_ffmpeg_does_not_read(tmp_path, clip, noisy, quality_cli):
    """`ffmpeg -i A -i B ...` was given with B an .npy, or a folder of frames that are not one numbered sequence (a
    PNG and a JPEG): commands that cannot run. The text and --json say there is no ffmpeg command, and why."""
    from PIL import Image

    frames = clip(frames=2)
    np.save(tmp_path / "a.npy", frames)
    np.save(tmp_path / "b.npy", noisy(frames, 8))
    res = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--ssim")
    assert "ffmpeg -" not in res.stdout and "(no ffmpeg command: A is a NumPy array, B is a NumPy array)" in res.stdout
    r = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy", "--ssim", "--json").json()
    assert r["rgb"]["reproduce"] is None and r["ssim"]["reproduce"] is None
    assert r["rgb"]["no_reproduce"] == "no ffmpeg command: A is a NumPy array, B is a NumPy array"
    numbered, mixed = tmp_path / "numbered", tmp_path / "mixed"
    numbered.mkdir()
    mixed.mkdir()
    for i, frame in enumerate(noisy(frames, 8)):
        Image.fromarray(frame).save(numbered / f"{i:03d}.png")
    Image.fromarray(frames[0]).save(mixed / "000.png")
    Image.fromarray(frames[1]).save(mixed / "001.jpg", quality=95)
    r = quality_cli(numbered, mixed, "--json").json()
    assert r["rgb"]["reproduce"] is None and r["rgb"]["no_reproduce"] == (
        "no ffmpeg command: B is a folder of frames not named as one numbered sequence of one kind (000.png, "
        "001.png, ...)")
    r = quality_cli(numbered, numbered / "000.png", "--frames", "0:1", "--json").json()
    assert r["bit_identical"] and "no_reproduce" not in r.get("rgb", {})
    r = quality_cli(numbered, mixed / "000.png", "--frames", "0:1", "--json").json()  # one image file: -i reads it
    assert r["rgb"]["reproduce"].startswith("ffmpeg -i A/%03d.png -i B ")


def test_the_older_release_caveat_names_the_planes_it_parts_on(tmp_path, clip, noisy, quality_cli):
    """The text said an older ffmpeg parts on '5.1's ssim on chroma planes'. Measured (Debian's ffmpeg 5.1 against a
    static ffmpeg 9, which gives perfkit's figures): a 426-wide 4:2:0 h264 pair's Y parts (0.948319 against 0.947985)
    while U and V agree; so on the Y of 424-, 425- and 568-wide ones; all three planes of a 425-wide 4:4:4 pair; a
    720-wide 4:2:0 pair's U and V (0.999761 against 0.999993) while Y agrees: the planes whose width / 4 - 1 leaves 1
    divided by 4 (the x86 ssim_end_line fix). With --ssim the text names this pair's planes (it stated the rule
    alone, and --json held no field for it: a script could not tell a 720-wide video's U and V from a 640-wide one's
    planes, on which 5.1 agrees)."""
    measured = {426: "y", 424: "y", 425: "y", 568: "y", 213: "", 212: "", 284: "", 720: "", 360: "uv"}
    for width, parts in measured.items():  # the rule stated, against each measured plane width
        assert ((width // 4 - 1) % 4 == 1) == bool(parts), width
    frames = clip(frames=2)
    for name, f in (("a", frames), ("b", noisy(frames, 6))):
        (tmp_path / name).mkdir()
        for i, frame in enumerate(f):
            skio.imsave(tmp_path / name / f"{i:03d}.png", frame, check_contrast=False)
    rule = "(width // 4 - 1) mod 4 = 1"  # (it read 'width / 4 - 1 leaves 1 when divided by 4', of integer division)
    out = quality_cli(tmp_path / "a", tmp_path / "b", "--ssim").stdout  # 64 wide: 15 mod 4 = 3
    # (it read '(an older one may part: ... parts on none of these planes ...)': a part that parts on nothing;
    # then '... too (it parts only on ...))', its parentheses doubled)
    assert ("(FFmpeg 5.1's ssim, as Debian 12 builds it, gives these SSIM figures too: "
            f"it parts only where {rule})\n") in out, out
    from lavfi_referee import encode

    wide = clip(frames=2, height=32, width=720)  # 4:2:0 at 720 wide, as the measured pair: U and V 360 wide
    pair = [encode(wide, tmp_path / f"{name}.mkv", "libx264", "yuv420p", {"crf": crf}) for name, crf in
            (("a720", "12"), ("b720", "30"))]
    assert quality_cli(*pair, "--ssim", "--json").json()["ssim"]["older_ffmpeg_parts"] == ["u", "v"]
    assert (f"(an older one may part: FFmpeg 5.1's ssim, as Debian 12 builds it, gives other U and V figures here: "
            f"it parts on planes {rule} wide)\n") in quality_cli(*pair, "--ssim").stdout


@pytest.fixture(scope="module")
def horse_pair(fixtures_dir, tmp_path_factory):
    """The real video (A) and its re-encode through PyAV's x264 at crf 30 (B)."""
    from lavfi_referee import decoded, encode

    video = fixtures_dir / "video" / "cogvideox_horse_720x480_49f.mp4"
    lossy = tmp_path_factory.mktemp("horse") / "crf30.mp4"
    return video, encode(decoded(video), lossy, "libx264", "yuv420p", {"crf": "30", "preset": "ultrafast"})


@pytest.mark.parametrize("options", [(), ("--rgb",), ("--codec-floor", "--frames", "0:8"), ("--frames", "0:8")])
def test_the_caveat_names_ssim_only_where_ssim_is_shown(horse_pair, quality_cli, options):
    """A newcomer's: without --ssim the caveat read '(an older one may part: 5.1's ssim on a plane whose width / 4 - 1
    leaves 1 divided by 4, ...; its 16-bit to 8-bit conversion)', of an SSIM not asked for. Without --ssim it names
    no SSIM (nor, both 8 bits a sample, any conversion: no caveat at all); with it, the planes of this 720-wide 4:2:0
    pair 5.1's ssim parts on (U and V, 360 wide: 360 / 4 - 1 = 89 leaves 1 divided by 4)."""
    res = quality_cli(*horse_pair, *options)
    assert res.exit_code == 0, res.stderr
    assert "the commands give them with that release\n" in res.stdout, res.stdout
    assert "ssim" not in res.stdout.lower(), res.stdout
    out = quality_cli(*horse_pair, *options, "--ssim").stdout
    assert "(an older one may part: FFmpeg 5.1's ssim, as Debian 12 builds it, gives other U and V figures here" in out


def test_no_older_release_caveat_on_planes_a_and_b_hold_alike(horse_pair, quality_cli):
    """The real 720-wide 4:2:0 video against itself: its U and V, 360 wide, are where 5.1's ssim parts on a pair
    that differs (360 // 4 - 1 = 89, 89 mod 4 = 1), and the text said '(an older one may part: FFmpeg 5.1's ssim
    ... gives other U and V figures here ...)' beside SSIM 1.000000 on every plane. Planes bit-identical in every
    frame compared give equal block sums, so every window's SSIM is exactly 1 in any build: no plane parts."""
    video = horse_pair[0]
    r = quality_cli(video, video, "--ssim", "--frames", "0:8", "--json").json()
    assert r["bit_identical"] and r["ssim"]["older_ffmpeg_parts"] == [], r["ssim"]
    out = quality_cli(video, video, "--ssim", "--frames", "0:8").stdout
    assert "SSIM in yuv420p planes: Y 1.000000 U 1.000000 V 1.000000 All 1.000000" in out, out
    assert "gives other" not in out and ("(FFmpeg 5.1's ssim, as Debian 12 builds it, gives these SSIM figures too: "
                                         "it parts only where (width // 4 - 1) mod 4 = 1)\n") in out, out


def _png_depth(path) -> int:
    """A PNG's bit depth as its IHDR chunk states it (the byte after width and height)."""
    return path.read_bytes()[24]


def test_the_conversion_caveat_is_given_only_where_an_input_decodes_to_more_than_8_bits(
        tmp_path, horse_pair, clip, noisy, quality_cli):
    """A newcomer's: the real video against its PyAV x264 re-encode, both yuv420p at 8 bits a sample, ended its line
    '(an older one may part: FFmpeg 5.1 converts 16-bit frames to 8-bit otherwise)', of frames neither holds: it
    now ends with the release, and --json holds no over_8_bits. Where an input decodes to more than 8 bits a
    sample the caveat stays, naming it and its format, in the text and in --json: 16-bit gray PNGs (PIL's I;16,
    IHDR bit depth 16: ffmpeg's gray16be), a 10-bit pair (yuv420p10le through ffv1), a folder whose second frame
    alone is 16-bit, each format named where the two part; after the SSIM part where --ssim shows it."""
    from PIL import Image

    from lavfi_referee import encode

    res = quality_cli(*horse_pair)
    assert res.stdout.splitlines()[-2].endswith("the commands give them with that release"), res.stdout
    assert "older" not in res.stdout and "bit" not in res.stdout.replace("bit-identical", ""), res.stdout
    assert "over_8_bits" not in quality_cli(*horse_pair, "--json").json()
    frames = clip(frames=2)
    deep = {"a16": frames, "b16": noisy(frames, 6)}
    for name, f in deep.items():
        (tmp_path / name).mkdir()
        for i, frame in enumerate(f):
            Image.fromarray(frame[..., 0].astype(np.uint16) * 257).save(tmp_path / name / f"{i:03d}.png")
    assert _png_depth(tmp_path / "a16" / "000.png") == 16
    said = "(an older one may part: FFmpeg 5.1 converts A's and B's gray16be frames to 8 bits differently)\n"
    assert said in quality_cli(tmp_path / "a16", tmp_path / "b16").stdout
    assert quality_cli(tmp_path / "a16", tmp_path / "b16", "--json").json()["over_8_bits"] == {
        "A": "gray16be", "B": "gray16be"}
    (tmp_path / "a8").mkdir()
    (tmp_path / "mixed").mkdir()
    for i, frame in enumerate(frames):
        Image.fromarray(frame[..., 0]).save(tmp_path / "a8" / f"{i:03d}.png")
    shutil.copy(tmp_path / "a8" / "000.png", tmp_path / "mixed" / "000.png")
    shutil.copy(tmp_path / "b16" / "001.png", tmp_path / "mixed" / "001.png")
    assert [_png_depth(tmp_path / "mixed" / f"00{i}.png") for i in (0, 1)] == [8, 16]
    res = quality_cli(tmp_path / "a8", tmp_path / "mixed")
    assert "(an older one may part: FFmpeg 5.1 converts B's gray16be frames to 8 bits differently)\n" in res.stdout, \
        res.stdout
    assert quality_cli(tmp_path / "a8", tmp_path / "mixed", "--json").json()["over_8_bits"] == {"B": "gray16be"}
    ten = [encode(f, tmp_path / f"{name}.mkv", "ffv1", "yuv420p10le", {}) for name, f in deep.items()]
    out = quality_cli(*ten, "--ssim").stdout
    assert ("too: it parts only where (width // 4 - 1) mod 4 = 1; an older one may part: 5.1 converts A's and B's "
            "yuv420p10le frames to 8 bits differently)\n") in out, out
    assert ("(an older one may part: FFmpeg 5.1 converts A's yuv420p10le and B's gray16be frames to 8 bits "
            "differently)\n") in quality_cli(ten[0], tmp_path / "b16").stdout


def test_frames_of_more_than_8_bits_are_said_to_be_reduced_by_ffmpeg_s_conversion_not_rounded(tmp_path, quality_cli):
    """A newcomer's: scikit-image's chessboard_GRAY.png (8 bits) against chessboard_RGB.png (rgb48be) read 59.83 dB,
    max |d| 1, where the 16-bit values rounded to 8 bits are A's exactly (52690 / 257 = 205.02: FFmpeg's
    rgb48be->rgb24 conversion, swscale, gives 206). The text now says the deep side is reduced to 8 bits by that
    conversion, which can part from rounding by 1. So too a 16-bit gray PNG made here of those values against its
    rounding at 8 bits; an 8-bit pair says no such thing (the caveat test's horse pair)."""
    import av
    import skimage
    from PIL import Image

    data = Path(skimage.__file__).parent / "data"
    gray, rgb = data / "chessboard_GRAY.png", data / "chessboard_RGB.png"
    with av.open(str(rgb)) as container:  # (in its own format: as decoded, no conversion)
        frame = next(container.decode(video=0))
        deep = frame.to_ndarray()
    assert frame.format.name == "rgb48be" and deep.dtype == np.uint16 and 52690 in deep
    assert (np.round(deep / 257) == np.asarray(Image.open(gray))[..., None]).all()  # the referee: no |d| at all
    said = ("B's rgb48be frames are reduced to 8 bits by FFmpeg's conversion (swscale, as format=rgb24 makes "
            "them), which can differ from rounding by 1: a max |d| of 1 may be that conversion alone")
    out = quality_cli(gray, rgb).stdout
    assert "max |d| 1," in out and said in out.splitlines(), out
    values = np.tile(np.array([[0, 11411, 12845, 20655], [44880, 52690, 54124, 65535]], np.uint16), (4, 2))
    Image.fromarray(values).save(tmp_path / "deep.png")
    Image.fromarray(np.round(values / 257).astype(np.uint8)).save(tmp_path / "rounded.png")
    out = quality_cli(tmp_path / "rounded.png", tmp_path / "deep.png").stdout
    assert "max |d| 1," in out and said.replace("B's rgb48be", "B's gray16be") in out.splitlines(), out


def test_a_share_over_16_too_small_to_show_reads_below_its_last_digit(tmp_path, quality_cli):
    """A codec floor on a real video printed "max |d| 18" beside "|d| > 16 in 0.000%" (a newcomer's; a crf 18 encode
    of it has 4 of its 25,401,600 samples over 16). By hand: one value of 4 frames of 256 x 256 x 3 off by 20,
    1 / 786,432 = 0.000127%, shown "<0.001%"; 49 of them, 0.00623%, show 0.006%."""
    a = np.zeros((4, 256, 256, 3), np.uint8)
    b = a.copy()
    for over in ((2, 100, 7, 1), (0, slice(4), slice(4))):
        b[over] = 20
        np.save(tmp_path / "a.npy", a)
        np.save(tmp_path / "b.npy", b)
        text = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy").stdout
        shown = "<0.001%" if (b > 16).sum() == 1 else "0.006%"
        assert f"max |d| 20, |d| > 16 in {shown} of channel values" in text, text


def test_a_share_over_16_just_short_of_all_reads_below_100(tmp_path, quality_cli):
    """Every sample but one over 16 read "|d| > 16 in 100.000%", as if all were. By hand: 786,431 of 786,432
    = 99.99987%, shown ">99.999%"; all of them 100.000%."""
    a = np.zeros((4, 256, 256, 3), np.uint8)
    b = np.full_like(a, 20)
    for kept, shown in ((1, ">99.999%"), (0, "100.000%")):
        b[0, 0, 0, 0] = 0 if kept else 20
        np.save(tmp_path / "a.npy", a)
        np.save(tmp_path / "b.npy", b)
        text = quality_cli(tmp_path / "a.npy", tmp_path / "b.npy").stdout
        assert f"max |d| 20, |d| > 16 in {shown} of channel values" in text, text
