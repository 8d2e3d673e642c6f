"""Run directories built by hand (case.yaml, env.json, run.json, trials.jsonl, output frames), so the
report and the check see known numbers: every figure they print can be worked out here with numpy.
Test modules import the ``make_run`` fixture from here (no conftest: the runner tests import theirs by name)."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

A_STEPS = [[50.0, 10.0, 10.2, 9.8, 10.1], [55.0, 10.4, 10.0, 10.3, 9.9], [52.0, 9.7, 10.1, 10.0, 10.2]]
WARMUP = 1
ENV = {"python": "3.11.7", "host": "tpu-vm-7", "cpus": 96, "platform": "Linux-x86_64",
       "packages": {"perfkit": "0.1.0", "jax": "0.10.2", "torch": None},
       "source": {"git": True, "commit": "c0ffee" + "0" * 34, "tree": "7ree00000000", "dirty": False,
                  "dirty_hash": None},
       "flags": {"XLA_FLAGS": "--xla_tpu_enable_async_all_gather=true"},
       "devices": {"platform": "tpu", "kind": "TPU v5 lite", "count": 4, "process_count": 1}}


def frames(seed: int = 0) -> np.ndarray:
    """The fixture's output clip: 3 frames of 8x8 RGB noise."""
    return np.random.default_rng(seed).integers(0, 256, size=(3, 8, 8, 3), dtype=np.uint8)


def shifted(clip: np.ndarray, frame: int, pixels: int, by: int = 4) -> np.ndarray:
    """``clip`` with ``pixels`` values of one frame moved by ``by`` (a known MSE)."""
    out = clip.astype(np.int16)
    flat = out[frame].reshape(-1)
    flat[:pixels] = np.where(flat[:pixels] >= 128, flat[:pixels] - by, flat[:pixels] + by)
    return out.astype(np.uint8)


def trial(index: int, variant: str, steps: list[float], *, status: str = "ok", values: dict | None = None,
          ranks: list[dict] | None = None, natural: list[float] | None = None) -> dict:
    return {"index": index, "variant": variant, "round": index // 2, "dir": f"trials/{index:02d}-{variant}",
            "status": status, "wall_s": 1.0, "warmup": WARMUP, "steps_ms": steps, "natural_ms": natural or [],
            "values": values or {}, "ranks": ranks or [{"rank": 0, "exit_code": 0, "running_at_end": False,
                                                        "steps_done": len(steps), "last_step_ms": steps[-1] if steps
                                                        else None, "last_mark": None}]}


def whole_record(index: int, variant: str, status: str = "ok", **keys) -> dict:
    """A whole trials.jsonl record (every key ``TrialRecord`` requires, as every reader holds it to), ``keys`` over
    neutral values: for a test whose trials matter in a few keys alone."""
    return {"index": index, "variant": variant, "round": 0, "dir": f"trials/{index:02d}-{variant}", "status": status,
            "wall_s": 1.0, "warmup": 0, "steps_ms": [], "natural_ms": [], "values": {}, "ranks": [], **keys}


def write_run(run: Path, trials: list[dict], outputs: dict[int, np.ndarray] | None = None, *,
              case_extra: dict | None = None) -> Path:
    """A finished run of the command case ``fixture`` (variants a, b) holding ``trials``; ``outputs``:
    the frames each trial index wrote to ``rank0/outputs/frames.npy``."""
    run.mkdir(parents=True)
    case = {"name": "fixture", "description": "Two variants of a hand-made bench.",
            "command": ["python", "bench.py"], "warmup": WARMUP, "repeats": {"min": 3, "max": 3},
            "capture": {"xla_dump": "none", "trace": [], "outputs": True},
            "variants": {"a": {"description": "the old kernel"}, "b": {"description": "the new kernel"}},
            **(case_extra or {})}
    (run / "case.yaml").write_text(yaml.safe_dump(case, sort_keys=False))
    (run / "env.json").write_text(json.dumps(ENV))
    (run / "run.json").write_text(json.dumps({"only": None, "salt": True, "hosts": 1, "host_index": 0,
                                              "coordinator": None, "run_id": run.name, "cwd": str(run.parent)}))
    (run / "trials.jsonl").write_text("".join(json.dumps(t) + "\n" for t in trials))
    for index, clip in (outputs or {}).items():
        t = next(t for t in trials if t["index"] == index)
        out = run / t["dir"] / "rank0" / "outputs"
        out.mkdir(parents=True)
        np.save(out / "frames.npy", clip)
    return run


def ab_trials(b_scale: float = 1.2, values: bool = True) -> list[dict]:
    """Three rounds of a (``A_STEPS``) and b (``A_STEPS`` x ``b_scale``) in abba order; each trial's
    natural pass: 0.9 x its last step."""
    out = []
    for r, steps in enumerate(A_STEPS):
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        for i, v in enumerate(order):
            scale = 1.0 if v == "a" else b_scale
            vals = {"denoise_s": 4.0 * scale + 0.01 * r, "compile_s": 2.0} if values else {}
            out.append(trial(2 * r + i, v, [s * scale for s in steps], values=vals, natural=[0.9 * steps[-1] * scale]))
    return out


def outputs_for(trials: list[dict], a_clip: np.ndarray, b_clip: np.ndarray) -> dict[int, np.ndarray]:
    return {t["index"]: a_clip if t["variant"] == "a" else b_clip for t in trials}


@pytest.fixture
def make_run(tmp_path):
    """``make_run(name, trials, outputs, case_extra)`` -> a rendered run directory under tmp_path."""
    from perfkit.run import finish

    def make(name: str = "run", trials: list[dict] | None = None, outputs=None, case_extra=None) -> Path:
        trials = ab_trials() if trials is None else trials
        if outputs is None:
            outputs = outputs_for(trials, frames(), shifted(frames(), 1, 20))
        run = write_run(tmp_path / name, trials, outputs, case_extra=case_extra)
        finish.render(run)
        return run

    return make
