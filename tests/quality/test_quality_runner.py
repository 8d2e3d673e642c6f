"""The runner's quality block: B vs A for every output kind, the oracle, drift, determinism, the report."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from skimage.metrics import peak_signal_noise_ratio

REPO = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).resolve().parent / "programs" / "write_outputs.py"


def perfkit_run(case: dict, tmp_path: Path) -> dict:
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(case))
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", str(path), "--out", str(tmp_path / "run")],
                         capture_output=True, text=True, cwd=REPO, timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads((tmp_path / "run" / "summary.json").read_text())


def psnr_by_hand(a: np.ndarray, b: np.ndarray) -> float:
    mse = [np.mean((fa.astype(np.float64) - fb) ** 2) for fa, fb in zip(a, b)]
    return float(np.mean([10 * np.log10(255**2 / m) for m in mse if m > 0]))


def worst_frame_psnr(a: np.ndarray, b: np.ndarray) -> float:
    """The worst frame's PSNR, by scikit-image (an implementation perfkit does not use for PSNR)."""
    return min(peak_signal_noise_ratio(fa, fb, data_range=255) for fa, fb in zip(a, b))


def test_command_case_quality_oracle_drift_determinism(tmp_path):
    oracle = tmp_path / "oracle"
    oracle.mkdir()
    case = {
        "name": "quality-outputs", "command": [sys.executable, str(PROGRAM)], "warmup": 1,
        "repeats": {"min": 2, "max": 2}, "timeout": 120, "oracle": str(oracle),
        "variants": {"a": {}, "b": {"env": {"NOISE": "4", "NOISE_PER_TRIAL": "1"}}},
    }
    # The oracle holds what variant a writes (no noise): a matches it bit for bit.
    subprocess.run([sys.executable, str(PROGRAM)], check=True, timeout=120,
                   env={"PATH": "", "PERFKIT_OUTPUTS": str(oracle), "PERFKIT_TRIAL": "0"})
    s = perfkit_run(case, tmp_path)
    run = tmp_path / "run"
    first = {t: sorted(run.glob(f"trials/*-{t}"))[0] / "rank0" / "outputs" for t in ("a", "b")}
    fa, fb = (np.load(first[t] / "frames.npy") for t in ("a", "b"))

    q = s["quality"]
    assert q["file"] == "clip.mkv" and q["kind"] == "frames" and q["frames"] == 5  # the video is headlined
    assert q["psnr_db"] == pytest.approx(psnr_by_hand(fa, fb))
    assert q["bit_identical"] is False and q["identical_frames"] == 0
    assert set(q["files"]) == {"clip.mkv", "frames.npy", "pngs"}  # latents.npy is drift, not an output
    for name in ("frames.npy", "pngs"):  # lossless: every kind gives the same figures
        assert q["files"][name]["psnr_db"] == pytest.approx(q["psnr_db"])

    o = q["oracle"]
    assert o["variants"]["a"]["bit_identical"] is True and o["variants"]["a"]["psnr_db"] == "inf"
    assert o["variants"]["b"]["psnr_db"] == pytest.approx(q["psnr_db"])

    la, lb = (np.load(first[t] / "latents.npy").astype(np.float64) for t in ("a", "b"))
    rel = [np.linalg.norm(la[i] - lb[i]) / np.linalg.norm(la[i]) for i in range(4)]
    assert [r["rel_l2"] for r in q["drift"]] == pytest.approx(rel)
    assert rel[0] == 0 and rel[3] > rel[1] > 0

    da, db = s["determinism"]["a"], s["determinism"]["b"]
    assert da["runs"] == 2 and da["bit_identical"] is True
    assert db["runs"] == 2 and db["bit_identical"] is False and db["differing_runs"] == 1
    # b's two repeats wrote different noise (seeded by the trial): the worst frame between them, and the
    # largest |d|, from the frames they wrote (every output holds the same frames losslessly).
    rb = [np.load(d / "rank0" / "outputs" / "frames.npy") for d in sorted(run.glob("trials/*-b"))]
    assert db["psnr_min_db"] == pytest.approx(worst_frame_psnr(*rb), abs=1e-9)
    assert db["max_abs_diff"] == np.abs(rb[0].astype(np.int16) - rb[1]).max()

    report = (run / "report.md").read_text()
    assert "b vs oracle" in report and "Latent drift" in report and "not bit-identical" in report
    # no differing frame: no mean over them shown; the row names the file it compares, beside the other files' rows
    assert "| `clip.mkv`: a vs oracle | identical | inf | inf |" in report
    assert q["space"] == "rgb" and "PSNR mean, average and worst frame in RGB24" in report  # its headline's space
    assert (run / "plots" / "drift.png").read_bytes()[:4] == b"\x89PNG"


def test_worker_saves_latents_on_request(tmp_path):
    """The bundled worker's opt-in (variant option ``save_latents: true``): outputs/latents.npy holds
    every step's latents (steps, batch, tokens, channels) as float32; the last step decodes to the frames."""
    from perfkit.models import get
    from perfkit.models.pipeline import decode

    spec = {"model": {"name": "wan", "config": "tiny", "steps": 3, "dtype": "bfloat16"},
            "options": {"plan": "local", "save_latents": True}, "devices": 1, "seed": 0, "outputs": True}
    env = {"PATH": "", "JAX_PLATFORMS": "cpu", "PERFKIT_OUTPUTS": str(tmp_path),
           "PERFKIT_METRICS": str(tmp_path / "metrics.jsonl")}
    subprocess.run([sys.executable, "-m", "perfkit.run.model_rank", json.dumps(spec)], check=True, env=env, cwd=REPO,
                   timeout=120)
    latents, frames = np.load(tmp_path / "latents.npy"), np.load(tmp_path / "frames.npy")
    cfg = get("wan").configs["tiny"]
    assert latents.dtype == np.float32 and latents.shape == (3, 1, cfg.tokens, cfg.in_channels)
    assert not np.array_equal(latents[0], latents[1])
    assert np.array_equal(decode(latents[-1][0], cfg.grid), frames)


def test_a_broken_output_is_reported_not_fatal(tmp_path, clip, noisy):
    from perfkit.quality import media
    from perfkit.quality import compare as quality
    from perfkit.report import markdown as report

    frames = clip(frames=3)
    for name, f in (("a", frames), ("b", noisy(frames, 3))):
        out = tmp_path / name / "rank0" / "outputs"
        out.mkdir(parents=True)
        np.save(out / "frames.npy", f)
        (out / "clip.mp4").write_bytes(b"\0" * 100)  # a trial that died while writing its video
    q = quality.outputs_quality(tmp_path / "a", tmp_path / "b", oracle=str(tmp_path / "missing"), names=("a", "b"))
    assert q["file"] == "frames.npy" and q["bit_identical"] is False and np.isfinite(q["psnr_db"])
    assert "clip.mp4: not a readable video" in q["files"]["clip.mp4"]["error"]
    assert "no such file" in q["oracle"]["error"]
    det = quality.repeats_quality([media.output_files(tmp_path / v) for v in ("a", "a")])
    assert det["bit_identical"] is None and det["differing_runs"] == 0 and "not a readable video" in det["error"]
    summary = {"quality": q, "baseline": "a", "variants": {"a": {}, "b": {}}, "run_dir": str(tmp_path),
               "determinism": {"a": det}}
    text = "\n".join(report.quality_section(summary))
    assert "`clip.mp4` not compared" in text and "Oracle" in text and "a: 2 runs not checked" in text


def test_a_repeat_whose_nan_parts_from_the_first_has_no_worst_relative_l2(tmp_path):
    """max(0.0, nan) is 0.0: a repeat with a NaN read as a worst relative L2 of 0 beside "1 differ from the
    first"; it is undefined, and the report says so."""
    from perfkit.common.json_figures import json_safe
    from perfkit.quality import compare as quality, media
    from perfkit.report import markdown as report

    latents = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    broken = latents.copy()
    broken[3, 3] = np.nan
    for name, arr in (("r0", latents), ("r1", latents * 1.01), ("r2", broken)):
        (tmp_path / name / "rank0" / "outputs").mkdir(parents=True)
        np.save(tmp_path / name / "rank0" / "outputs" / "out.npy", arr)  # (latents.npy is the drift's)
    det = quality.repeats_quality([media.output_files(tmp_path / r) for r in ("r0", "r1", "r2")])
    assert det["differing_runs"] == 2 and np.isnan(det["rel_l2_max"])
    q = quality.outputs_quality(tmp_path / "r0", tmp_path / "r1", names=("a", "b"))
    summary = json_safe({"quality": q, "baseline": "a", "variants": {"a": {}, "b": {}}, "run_dir": str(tmp_path),
                         "determinism": {"a": det}})
    assert "; tensors: worst relative L2 undefined (NaN or inf where the runs part)" in "\n".join(
        report.quality_section(summary))


def test_the_determinism_hash_says_what_it_hashed(tmp_path, clip):
    """'tp: 3 runs bit-identical (sha256 e2af2c395f79)' read as the file's hash, which `sha256sum frames.npy` does
    not give (a newcomer's): it is of the RGB24 frames' bytes, as hashlib gives it on the array here; of a tensor's
    bytes; and said so, in the summary and the report."""
    import hashlib

    from perfkit.quality import compare as quality, media
    from perfkit.report import markdown as report

    frames = clip(frames=3)
    latents = np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)
    for run in ("r0", "r1"):
        (tmp_path / run / "rank0" / "outputs").mkdir(parents=True)
        np.save(tmp_path / run / "rank0" / "outputs" / "frames.npy", frames)
        (tmp_path / "t" / run / "rank0" / "outputs").mkdir(parents=True)
        np.save(tmp_path / "t" / run / "rank0" / "outputs" / "out.npy", latents)
    rgb = hashlib.sha256(np.ascontiguousarray(frames).tobytes()).hexdigest()[:12]
    assert rgb != hashlib.sha256((tmp_path / "r0/rank0/outputs/frames.npy").read_bytes()).hexdigest()[:12]
    for runs, sha, of in ((["r0", "r1"], rgb, "RGB24 frames"), (["r0"], rgb, "RGB24 frames"),
                          (["t/r0", "t/r1"], hashlib.sha256(latents.tobytes()).hexdigest()[:12], "array's bytes")):
        det = quality.repeats_quality([media.output_files(tmp_path / r) for r in runs])
        assert (det["sha256"], det["sha256_of"]) == (sha, of)
    det = quality.repeats_quality([media.output_files(tmp_path / r) for r in ("r0", "r1")])
    q = quality.outputs_quality(tmp_path / "r0", tmp_path / "r1", names=("a", "b"))
    summary = {"quality": q, "baseline": "a", "variants": {"a": {}, "b": {}}, "run_dir": str(tmp_path),
               "determinism": {"a": det}}
    assert f"a: 2 runs bit-identical (sha256 of the RGB24 frames {rgb})" in "\n".join(report.quality_section(summary))
