"""The op-level bench and the cases that drive it: every case loads and names a real preset and
options the bench accepts; one run speaks the metrics protocol and agrees with the xla level."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfkit.kernels import bench
from perfkit.rundata import case as case_mod

CASES = sorted((Path(__file__).resolve().parents[2] / "cases" / "kernels").glob("*.yaml"))


def test_there_are_kernel_cases():
    assert len(CASES) >= 7


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_case_loads_and_its_argv_parses(path):
    case = case_mod.load(path)
    argv = case.command
    assert argv[:3] == ["python", "-m", "perfkit.kernels.bench"]
    for variant in case.variants:
        ctx = bench.main.make_context("bench", [*argv[3:], *variant.args])  # raises on a bad option
        assert ctx.params["preset"] in bench.PRESETS


@pytest.mark.parametrize("args", [["--preset", "flux-single-out", "--impl", "pallas"],
                                  ["--preset", "wan-attention", "--op", "ulysses_attention"]])
def test_bench_records_steps_and_matches_xla(tmp_path, monkeypatch, args):
    metrics = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("PERFKIT_METRICS", str(metrics))
    monkeypatch.setenv("PERFKIT_DETECT_RACES", "1")
    result = CliRunner().invoke(bench.main, [*args, "--steps", "2", "--dtype", "float32"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [e["event"] for e in events].count("step") == 2
    values = {e["name"]: e["value"] for e in events if e["event"] == "value"}
    assert values["max_abs_diff_vs_xla"] < 1e-4 and values["races_found"] == 0


def test_bench_refuses_an_op_of_another_kind():
    result = CliRunner().invoke(bench.main, ["--preset", "wan-qkv", "--op", "ring_attention", "--steps", "1"])
    assert result.exit_code == 2 and "does not take the shapes of preset wan-qkv" in result.output


def test_bench_as_a_program_on_simulated_devices(tmp_path):
    """``python -m perfkit.kernels.bench --devices 2``, as a case runs it (jax starts in the process),
    without NPROC in the environment: the bench must set it, or the interpreted kernel hangs. The
    race detector runs, as in every Pallas test."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "NPROC"}
    env.update(PERFKIT_METRICS=str(tmp_path / "m.jsonl"), PERFKIT_DETECT_RACES="1",
               PERFKIT_TRACE_DIR=str(tmp_path / "trace"), PERFKIT_TRACE_STEPS="1")
    out = subprocess.run([sys.executable, "-m", "perfkit.kernels.bench", "--preset", "wan-attn-out", "--impl",
                          "pallas", "--steps", "2", "--devices", "2"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "on 2 x cpu" in out.stdout and "max |pallas - xla| = 0" in out.stdout
    assert "races found: none" in out.stdout
    # capture.trace: step 1 profiled, as the bundled worker does it, and marked for the timing to leave out (a
    # newcomer's kernel case asked for traces and got none)
    steps = [e for e in map(json.loads, (tmp_path / "m.jsonl").read_text().splitlines()) if e["event"] == "step"]
    assert [e.get("traced", False) for e in steps] == [False, True]
    assert [p.name for p in (tmp_path / "trace").iterdir()] == ["step1"]


def test_the_cost_of_a_pallas_case_is_its_kernel_s(tmp_path):
    """The bench compiles the op it times and, after, the XLA reference it checks it against: interpreted, a
    Pallas kernel's FLOPs (its callbacks uncosted) fall below the reference's, and the cost of the step, the
    program with the most FLOPs, was the reference's (a newcomer's `pallas adds 1 all-gather`, which only the
    reference runs). The timed program is jit_kernel_step, the step `perfkit cost` reads."""
    import os
    import subprocess
    import sys

    from perfkit.cost.programs import folder_costs, step_cost

    dump = tmp_path / "dump"
    env = {**os.environ, "PERFKIT_METRICS": str(tmp_path / "m.jsonl"),
           "XLA_FLAGS": f"--xla_force_host_platform_device_count=2 --xla_dump_to={dump} --xla_dump_hlo_as_text"}
    out = subprocess.run([sys.executable, "-m", "perfkit.kernels.bench", "--preset", "wan-qkv", "--impl", "pallas",
                          "--steps", "1"], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    costs = {c.module: c for c in folder_costs(dump)}
    step, reference = costs["jit_kernel_step"], costs["jit_reference"]
    assert step.dot_flops + step.other_flops < reference.dot_flops + reference.other_flops  # the trap
    assert step_cost(list(costs.values())).module == "jit_kernel_step"
    assert not step.collectives and reference.collectives  # (the kernel's remote DMAs are callbacks, no HLO op)
