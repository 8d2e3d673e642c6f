"""The bundled-model worker as one process per rank (jax.distributed over gloo), against the plain
single-device model computed here."""

import json

import jax
import numpy as np
import pytest
from runner_testing import perfkit, read_jsonl

from perfkit.models.pipeline import DenoiseConfig, Denoiser
from perfkit.models.plans import make_plan

STEPS = 3


@pytest.mark.slow
def test_model_case_as_two_processes_matches_the_single_device_model(tmp_path, write_case):
    case = {"name": "wan-2proc", "model": {"name": "wan", "config": "tiny", "steps": STEPS}, "devices": 2,
            "processes": 2, "warmup": 1, "repeats": {"min": 1, "max": 1}, "timeout": 240,
            "capture": {"xla_dump": "first", "trace": [], "outputs": True},
            "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {"options": {"plan": "sp", "impl": "ring"}}}}
    res = perfkit("run", write_case(case), "--only", "sp", "--out", tmp_path / "run", timeout=600)
    assert res.returncode == 0, res.stderr + res.stdout

    den = Denoiser("wan", "tiny", make_plan("local"), jax.devices()[:1], DenoiseConfig(steps=STEPS, seed=0))
    for _ in range(STEPS):
        den.step()
    reference = den.frames()
    (t,) = read_jsonl(tmp_path / "run/trials.jsonl")  # --only sp: the ring plan over gloo
    assert t["status"] == "ok" and [r["rank"] for r in t["ranks"]] == [0, 1]
    assert len(t["steps_ms"]) == STEPS and len(t["natural_ms"]) == 1
    assert t["values"]["compile_s"] > 0 and t["values"]["compile_cache_hits"] == 0
    assert t["steps_ms"][0] > max(t["steps_ms"][1:])  # the first step compiles
    for rank in (0, 1):
        rdir = tmp_path / "run" / t["dir"] / f"rank{rank}"
        ready = [json.loads(x) for x in (rdir / "metrics.jsonl").read_text().splitlines()
                 if '"ready"' in x]
        assert ready and ready[0]["devices"] == 2  # the mesh spans both processes
        assert list((rdir / "xla_dump").glob("*after_optimizations.txt"))
        frames = np.load(rdir / "outputs/frames.npy")
        # float32; plans only reorder sums: at most a rounding step of the uint8 decode.
        assert frames.shape == reference.shape
        assert np.abs(frames.astype(int) - reference.astype(int)).max() <= 1
    s = json.loads((tmp_path / "run/summary.json").read_text())
    assert s["variants"]["sp"]["natural_step_ms"]["n"] == 1 and s["variants"]["sp"]["first_step_ms"]["n"] == 1
    assert s["variants"]["tp"]["trials"] == 0
