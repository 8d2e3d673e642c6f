"""The per-rank torch bench in one process (plan local): metrics, recompile counts, traces, frames,
and its one-line refusals."""

import contextlib
import json
import types

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from perfkit.models import torch_bench
from perfkit.models.wan import CONFIGS
from perfkit.rundata.metrics import read_metrics


@pytest.fixture
def rank_env(tmp_path, monkeypatch):
    for var in ("MASTER_ADDR", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PERFKIT_METRICS", str(tmp_path / "metrics.jsonl"))
    monkeypatch.setenv("PERFKIT_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.setenv("PERFKIT_TRACE_DIR", str(tmp_path / "trace"))
    monkeypatch.setenv("PERFKIT_TRACE_STEPS", "")
    torch._dynamo.reset()  # compiled code of earlier tests in this process would count as recompiles
    return tmp_path


def _bench(**over):
    args = dict(plan="local", config="tiny", steps=3, guidance=None, dtype="float32", seed=0,
                compile_backend="none", input_layout="contiguous", device_kind="cpu")
    torch_bench.run(**{**args, **over})


def test_compiled_steps_count_a_stride_recompile(rank_env):
    _bench(steps=2, compile_backend="eager", input_layout="transposed")
    m = read_metrics(rank_env / "metrics.jsonl")
    assert len(m.steps_ms) == 2 and m.values["recompiles"] == [1.0]  # step 1's new strides, once


def test_contiguous_steps_trace_frames_and_no_recompile(rank_env, monkeypatch):
    monkeypatch.setenv("PERFKIT_TRACE_STEPS", "1,2")
    _bench(steps=4, compile_backend="eager", guidance=3.0)
    m = read_metrics(rank_env / "metrics.jsonl")
    assert m.values["recompiles"] == [0.0] and len(m.steps_ms) == 4
    events = [json.loads(line) for line in (rank_env / "metrics.jsonl").read_text().splitlines()]
    assert [e["index"] for e in events if e.get("traced")] == [0, 1, 2]  # the profiler's warm-up step too

    trace = json.loads((rank_env / "trace" / "rank0.json").read_text())
    steps = sorted(e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
    assert steps == ["ProfilerStep#1", "ProfilerStep#2"]  # the listed steps, nothing else

    frames = np.load(rank_env / "outputs" / "frames.npy")
    t, h, w = CONFIGS["tiny"].grid
    assert frames.dtype == np.uint8 and frames.shape == (t, h * 8, w * 8, 3) and frames.std() > 10


def test_steps_are_not_marked_traced_without_a_trace_folder(rank_env, monkeypatch):
    monkeypatch.setenv("PERFKIT_TRACE_STEPS", "1")
    monkeypatch.delenv("PERFKIT_TRACE_DIR")
    _bench(steps=2)
    events = [json.loads(line) for line in (rank_env / "metrics.jsonl").read_text().splitlines()]
    assert [e.get("traced") for e in events if e["event"] == "step" and e.get("kind") != "natural"] == [None, None]
    assert not (rank_env / "trace").exists()


@pytest.mark.parametrize("args,env,message", [
    (["--plan", "tp"], {}, "--plan: plan tp needs the launcher variables"),
    (["--plan", "local"], {"WORLD_SIZE": "2"}, "--plan: plan local runs on one process, but WORLD_SIZE is 2"),
    (["--config", "huge"], {}, "--config: unknown config 'huge'"),
])
def test_bad_input_is_one_line_exit_2(rank_env, monkeypatch, args, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    res = CliRunner().invoke(torch_bench.main, ["--device", "cpu", *args])
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2 and len(lines) == 1 and lines[0].startswith(f"torch_bench: {message}"), res.output


def test_tpu_profile_goes_to_the_trace_dir_as_xspace(tmp_path, monkeypatch):
    """On TPU (faked: torch_tpu has no CPU mode) the profiler gets torch_tpu's config for the trace dir
    and no Kineto export, so the XSpace is the rank's one trace."""
    from torch.profiler import ProfilerActivity

    from perfkit.adapters import torch_tpu

    configs = []
    monkeypatch.setattr(torch_tpu, "profiler_activity", lambda: ProfilerActivity.CUDA)  # any non-CPU one
    monkeypatch.setattr(torch_tpu, "profiler_config", lambda run_dir: configs.append(run_dir))
    tpu = types.SimpleNamespace(type="tpu")  # no "tpu" device type without torch_tpu
    prof = torch_bench._profiler(tpu, [2], str(tmp_path / "trace"), rank=1)
    assert configs == [tmp_path / "trace"] and prof.on_trace_ready is None
    assert isinstance(torch_bench._profiler(torch.device("cpu"), [], str(tmp_path), rank=0), contextlib.nullcontext)
