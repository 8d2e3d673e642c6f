"""The bundled worker taps the steps ``PERFKIT_TAP_STEPS`` names from that step's input (the state saved
before its timed step), in a rank process as a trial runs it: its taps equal the plain model's
(``local`` plan, one device) after the same steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax
import numpy as np

from perfkit.models.pipeline import DenoiseConfig, Denoiser
from perfkit.models.plans import make_plan


def test_worker_taps_a_later_step_from_its_input(tmp_path):
    spec = {"model": {"name": "wan", "config": "tiny", "steps": 3}, "options": {"plan": "sp", "impl": "xla"},
            "devices": 4, "seed": 2, "trace_steps": [], "trace_dir": None, "outputs": False}
    env = {**os.environ, "PERFKIT_METRICS": str(tmp_path / "metrics.jsonl"), "PERFKIT_TAP_STEPS": "1",
           "PERFKIT_TAP_ARRAYS": "1", "XLA_FLAGS": "--xla_force_host_platform_device_count=4"}
    done = subprocess.run([sys.executable, "-m", "perfkit.run.model_rank", json.dumps(spec)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(x) for x in (tmp_path / "taps.jsonl").read_text().splitlines()]
    assert [(x["name"], x["step"]) for x in lines] == [(f"block{i}.{p}", 1) for i in range(2)
                                                      for p in ("attn", "mlp", "out")]
    steps = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines() if '"step"' in x]
    assert len(steps) == 4  # the timed steps and the natural pass, none added by the taps
    # the phases after the timed steps are marked, which the progress line of a trial running on reads
    events = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    order = [e["name"] if e["event"] == "mark" else e.get("kind", "step") for e in events if e["event"] != "value"]
    assert order == ["ready", "step", "step", "step", "taps", "natural", "natural"]

    den = Denoiser("wan", "tiny", make_plan("local"), jax.devices()[:1], DenoiseConfig(steps=3, seed=2))
    den.step()  # step 0; the taps are step 1's
    for line, (name, ref) in zip(lines, den.taps()):
        got, ref = np.load(tmp_path / line["array"]).astype(np.float64), np.asarray(ref, np.float64)
        assert np.linalg.norm(got - ref) / np.linalg.norm(ref) < 1e-5, name
