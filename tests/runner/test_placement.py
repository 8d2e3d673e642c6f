"""Rank placement (perfkit.run.placement; the case's field read by perfkit.rundata.placement): the
variables each rank process receives, with the platform faked. Expected values are written by hand from the public topologies (v5e-4: 2x2 chips, v5e-8 and
v6e-8: 2x4, one host each) and the layout JAX's "multiple processes per TPU VM" docs and pytorch/xla's
tests of one process per chip use: libtpu's process grid, chip r for rank r, ports
from 8476. Chips are never checked here (not verified on real TPU / GPU hosts)."""

import json
import os
import stat
from pathlib import Path

import pytest

from perfkit.errors import BadInput
from perfkit.run import placement
from perfkit.run.placement import placements
from perfkit.run.ranks import rank_processes
from perfkit.run.runner import run_case
from perfkit.run.trial import RunOptions, Trial
from perfkit.rundata import case as case_mod
from perfkit.rundata.placement import Host

from runner_testing import read_jsonl

TPU_ONE_CHIP = [
    # (accelerator, processes, expected variables of each rank: bounds per process, process bounds)
    ("v5litepod-4", 4, "1,1,1", "2,2,1"),
    ("v5e-8", 8, "1,1,1", "2,4,1"),
    ("v6e-8", 8, "1,1,1", "2,4,1"),
]


def command_case(processes: int, spec, devices: int | None = None) -> case_mod.Case:
    return case_mod.validate({"name": "p", "command": ["python", "bench.py"], "processes": processes,
                              "devices": devices or processes, "placement": spec,
                              "variants": {"a": {}, "b": {}}}, "p.yaml")


def rank_vars(case, options=RunOptions()) -> list[dict]:
    ranks = rank_processes(case, case.variant("a"), Trial(0, "a", 0), Path("/r/trials/00-a"), False,
                           options=options, placed=placements(case, options)[1])
    keys = placement.TPU_VARS + tuple(placement.GPU_VISIBLE.values())
    return [{k: r.env[k] for k in keys if k in r.env} for r in ranks]


@pytest.mark.parametrize("accelerator,processes,per_process_bounds,process_bounds", TPU_ONE_CHIP)
def test_tpu_one_chip_per_process(accelerator, processes, per_process_bounds, process_bounds):
    got = rank_vars(command_case(processes, {"platform": "tpu", "accelerator": accelerator}))
    addresses = ",".join(f"localhost:{8476 + r}" for r in range(processes))
    assert got == [{"TPU_CHIPS_PER_PROCESS_BOUNDS": per_process_bounds, "TPU_PROCESS_BOUNDS": process_bounds,
                    "TPU_VISIBLE_CHIPS": str(r), "CLOUD_TPU_TASK_ID": str(r), "TPU_PROCESS_PORT": str(8476 + r),
                    "TPU_PROCESS_ADDRESSES": addresses} for r in range(processes)]


def test_v5e_4_exactly_as_written():
    """The v5e-4 layout spelled out once, nothing derived."""
    got = rank_vars(command_case(4, {"platform": "tpu", "accelerator": "v5litepod-4"}))
    assert got[3] == {"TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1", "TPU_PROCESS_BOUNDS": "2,2,1",
                      "TPU_VISIBLE_CHIPS": "3", "CLOUD_TPU_TASK_ID": "3", "TPU_PROCESS_PORT": "8479",
                      "TPU_PROCESS_ADDRESSES": "localhost:8476,localhost:8477,localhost:8478,localhost:8479"}


def test_tpu_accelerator_type_from_the_host(monkeypatch):
    """`placement: chip` on a TPU VM: the grid comes from TPU_ACCELERATOR_TYPE (set on Cloud TPU VMs)."""
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v6e-8")
    case = command_case(2, "chip", devices=8)  # 2 processes of 4 chips: a 2x2 block each of the 2x4 host
    got = rank_vars(case)
    assert got == [{"TPU_CHIPS_PER_PROCESS_BOUNDS": "2,2,1", "TPU_PROCESS_BOUNDS": "1,2,1",
                    "TPU_VISIBLE_CHIPS": chips, "CLOUD_TPU_TASK_ID": str(r), "TPU_PROCESS_PORT": str(8476 + r),
                    "TPU_PROCESS_ADDRESSES": "localhost:8476,localhost:8477"}
                   for r, chips in enumerate(["0,1,2,3", "4,5,6,7"])]


def fake_nvidia_smi(folder: Path, gpus: int, name: str = "NVIDIA H200") -> str:
    exe = folder / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + "".join(f"echo '{name}'\n" for _ in range(gpus)))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return f"{folder}{os.pathsep}{os.environ['PATH']}"


def test_eight_gpu_host_one_and_two_chips_per_process(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path, 8))
    assert rank_vars(command_case(8, "chip")) == [{"CUDA_VISIBLE_DEVICES": str(r)} for r in range(8)]
    assert rank_vars(command_case(4, "chip", devices=8)) == \
        [{"CUDA_VISIBLE_DEVICES": c} for c in ("0,1", "2,3", "4,5", "6,7")]
    host, _ = placements(command_case(8, "chip"))
    assert (host.platform, host.chips, host.kind) == ("cuda", 8, "NVIDIA H200")


def test_rocm_and_local_rank():
    """ROCm gets HIP_VISIBLE_DEVICES; `by: local_rank` sets nothing (the program picks chip LOCAL_RANK)
    but records the chips that means."""
    assert rank_vars(command_case(2, {"platform": "rocm", "host_chips": 8})) == \
        [{"HIP_VISIBLE_DEVICES": "0"}, {"HIP_VISIBLE_DEVICES": "1"}]
    case = command_case(2, {"by": "local_rank", "platform": "cuda", "host_chips": 2})
    assert rank_vars(case) == [{}, {}]
    assert [p.chips for p in placements(case)[1].values()] == [(0,), (1,)]


def test_second_host_counts_its_own_chips(tmp_path, monkeypatch):
    """Host 1 of 2 runs global ranks 2, 3 on its local chips 0, 1."""
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path, 2))
    case = command_case(4, "chip")
    opts = RunOptions(hosts=2, host_index=1, coordinator="node0:29500")
    assert [r.rank for r in rank_processes(case, case.variant("a"), Trial(0, "a", 0), Path("/r/t"), False,
                                           options=opts)] == [2, 3]
    assert rank_vars(case, opts) == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]


def test_rocm_detected_from_kfd_topology(tmp_path):
    for node, gpu in (("0", "0"), ("1", "4242"), ("2", "4343")):  # node 0: the CPU
        d = tmp_path / "sys/class/kfd/kfd/topology/nodes" / node
        d.mkdir(parents=True)
        (d / "gpu_id").write_text(gpu + "\n")
    assert placement.detect({"PATH": str(tmp_path)}, root=tmp_path) == Host("rocm", 2)
    assert placement.detect({"PATH": str(tmp_path)}, root=tmp_path / "none") is None


@pytest.mark.parametrize("spec,processes,devices,field", [
    ({"platform": "tpu", "accelerator": "v5litepod-4"}, 2, 2, "placement"),  # two chips left idle
    ({"platform": "tpu", "accelerator": "v5litepod-4"}, 8, 8, "placement"),  # more processes than chips
    ({"platform": "tpu", "topology": "2x4", "per_process": 3}, 1, 3, "placement"),  # 3 of 8: chips idle
    ({"platform": "tpu", "accelerator": "v5e-4", "by": "local_rank"}, 4, 4, "placement.by"),
    ({"platform": "cuda", "host_chips": 2}, 4, 4, "placement"),
])
def test_placements_that_cannot_be_honoured_are_one_line(spec, processes, devices, field):
    with pytest.raises(BadInput) as exc:
        placements(command_case(processes, spec, devices))
    assert exc.value.field == field and exc.value.path == "p.yaml"


@pytest.mark.parametrize("spec,field", [
    ("everywhere", "placement.by"), ({"platform": "tpu", "accelerator": "v9-8"}, "placement.accelerator"),
    ({"topology": "2by4"}, "placement.topology"), ({"per_process": 0}, "placement.per_process"),
    ({"chips": 1}, "placement.chips"), ({"platform": "metal"}, "placement.platform"),
])
def test_bad_placement_fields(spec, field):
    with pytest.raises(BadInput) as exc:
        command_case(2, spec)
    assert exc.value.field == field


def test_nothing_found_names_the_fields(tmp_path, monkeypatch):
    monkeypatch.delenv("TPU_ACCELERATOR_TYPE", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi; this machine has no /sys/class/kfd GPUs
    with pytest.raises(BadInput, match="placement.platform"):
        placements(command_case(2, "chip"))


RANK_PROGRAM = ("import os; from perfkit import record; "
                "record.value('visible', int(os.environ['CUDA_VISIBLE_DEVICES'])); record.mark('ready', "
                "device_kind='fake chip ' + os.environ['LOCAL_RANK']); [record.step(1.0) for _ in range(3)]")


def test_a_run_records_each_ranks_chips_in_trials_and_env_json(tmp_path):
    """End to end on a faked 2-GPU host: each rank process sees its own chip, and the run keeps it per
    rank in trials.jsonl (with the chip kind the rank reported) and in env.json."""
    case = case_mod.validate({"name": "placed", "command": ["python", "-c", RANK_PROGRAM], "processes": 2,
                              "devices": 2, "placement": {"platform": "cuda", "host_chips": 2}, "warmup": 1,
                              "repeats": {"min": 1, "max": 1}, "timeout": 60, "variants": {"a": {}, "b": {}}},
                             "placed.yaml")
    result = run_case(case, tmp_path / "run")
    assert not result.failed
    trials = read_jsonl(tmp_path / "run" / "trials.jsonl")
    for t in trials:
        assert [(r["rank"], r["placement"]["chips"], r["placement"]["env"], r["device_kind"]) for r in t["ranks"]] \
            == [(0, [0], {"CUDA_VISIBLE_DEVICES": "0"}, "fake chip 0"), (1, [1], {"CUDA_VISIBLE_DEVICES": "1"},
                                                                          "fake chip 1")]
    assert trials[0]["values"]["visible"] == 0.0  # rank 0's own view of its variable
    env = json.loads((tmp_path / "run" / "env.json").read_text())
    assert env["placement"]["platform"] == "cuda" and env["placement"]["host_chips"] == 2
    assert [r["env"] for r in env["placement"]["ranks"]] == [{"CUDA_VISIBLE_DEVICES": "0"},
                                                             {"CUDA_VISIBLE_DEVICES": "1"}]


def test_bundled_worker_runs_one_process_per_chip_under_jax_distributed(tmp_path):
    """The bundled model, 2 processes x 1 chip on a faked 2-GPU host: each rank joins the jax.distributed
    job, reports the kind of its own device (here jax's CPU device) and keeps its chip variable."""
    case = case_mod.validate({"name": "placed-model", "model": {"name": "wan", "config": "tiny", "steps": 3},
                              "devices": 2, "processes": 2, "warmup": 1, "repeats": {"min": 1, "max": 1},
                              "timeout": 180, "placement": {"platform": "cuda", "host_chips": 2},
                              "capture": {"xla_dump": "none", "trace": [], "outputs": False},
                              "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {"options": {"plan": "sp"}}}},
                             "placed-model.yaml")
    assert not run_case(case, tmp_path / "run", RunOptions(only="tp")).failed
    (t,) = read_jsonl(tmp_path / "run" / "trials.jsonl")
    assert t["status"] == "ok" and len(t["steps_ms"]) == 3
    assert [(r["device_kind"], r["placement"]["env"]) for r in t["ranks"]] == \
        [("cpu", {"CUDA_VISIBLE_DEVICES": "0"}), ("cpu", {"CUDA_VISIBLE_DEVICES": "1"})]
