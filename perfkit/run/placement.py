"""Rank placement: which chips each rank process of a trial owns, and the variables that tell its
platform's runtime so (a case's ``placement``).

Without placement every rank process opens every chip of its host; on a TPU VM only one process can
hold a chip, so the second process of ``processes: 4`` fails at start. With ``placement``, local rank
``l`` owns chips ``l*c .. l*c+c-1`` (``c`` chips per process):

- ``by: chip`` (``placement: chip``): perfkit tells the runtime. GPUs: ``CUDA_VISIBLE_DEVICES`` /
  ``HIP_VISIBLE_DEVICES`` (the rank then sees its chips as devices 0..c-1). TPU: libtpu's process grid,
  as JAX's "several processes on one TPU VM" and pytorch/xla's single-host multi-process tests set it
  (``TPU_CHIPS_PER_PROCESS_BOUNDS``, ``TPU_PROCESS_BOUNDS``, ``TPU_VISIBLE_CHIPS``, ``CLOUD_TPU_TASK_ID``,
  ``TPU_PROCESS_PORT``, ``TPU_PROCESS_ADDRESSES``).
- ``by: local_rank``: the program picks its own chips from ``LOCAL_RANK`` (a torch program's
  ``torch.cuda.set_device(local_rank)``); perfkit sets nothing and records which chips that means.

The host is described by the case (``platform``, ``accelerator`` or ``topology``, ``host_chips``; read by
``perfkit.rundata.placement``) or found here: ``TPU_ACCELERATOR_TYPE`` (set on Cloud TPU VMs), ``nvidia-smi``, ROCm's KFD topology.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import subprocess
from pathlib import Path

from perfkit.errors import BadInput
from perfkit.run.trial import RunOptions
from perfkit.rundata.case import Case
from perfkit.rundata.placement import Host, parse_grid, tpu_host

GPU_VISIBLE = {"cuda": "CUDA_VISIBLE_DEVICES", "rocm": "HIP_VISIBLE_DEVICES"}
TPU_VARS = ("TPU_CHIPS_PER_PROCESS_BOUNDS", "TPU_PROCESS_BOUNDS", "TPU_VISIBLE_CHIPS", "CLOUD_TPU_TASK_ID",
            "TPU_PROCESS_PORT", "TPU_PROCESS_ADDRESSES")
TPU_BASE_PORT = 8476  # libtpu's first process port (pytorch/xla's default too)


@dataclasses.dataclass(frozen=True)
class Placement:
    """One rank process's chips (host-local indices) and the variables that give them to it."""

    chips: tuple[int, ...]
    env: dict[str, str]

    def record(self) -> dict:
        return {"chips": list(self.chips), "env": dict(self.env)}


def _nvidia_chips(path: str | None) -> list[str]:
    """Each GPU's name as nvidia-smi lists it (empty without nvidia-smi)."""
    exe = shutil.which("nvidia-smi", path=path)
    if exe is None:
        return []
    try:
        res = subprocess.run([exe, "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [line.strip() for line in res.stdout.splitlines() if line.strip()] if res.returncode == 0 else []


def _rocm_chips(kfd: Path) -> int:
    """GPUs in ROCm's KFD topology (nodes with a non-zero gpu_id; node 0 of a host is its CPU)."""
    count = 0
    for node in sorted(kfd.glob("nodes/*/gpu_id")):
        try:
            count += node.read_text().strip() not in ("", "0")
        except OSError:
            continue
    return count


def detect(environ: dict[str, str] | None = None, root: Path = Path("/")) -> Host | None:
    """This host as its variables and devices show it: a TPU VM by ``TPU_ACCELERATOR_TYPE``, NVIDIA GPUs
    by ``nvidia-smi``, AMD GPUs by ``/sys/class/kfd``; None when none is found. ``root``: a fake file
    system root for tests."""
    environ = os.environ if environ is None else environ
    if environ.get("TPU_ACCELERATOR_TYPE"):
        return tpu_host(environ["TPU_ACCELERATOR_TYPE"], "TPU_ACCELERATOR_TYPE", "placement.accelerator")
    names = _nvidia_chips(environ.get("PATH"))
    if names:
        return Host("cuda", len(names), kind=names[0])
    rocm = _rocm_chips(root / "sys" / "class" / "kfd" / "kfd" / "topology")
    if rocm:
        return Host("rocm", rocm)
    return None


def host_for(spec: dict, source: str, environ: dict[str, str] | None = None, root: Path = Path("/")) -> Host:
    """The host a case's placement runs on: what the case names, the rest detected."""
    if spec["platform"] == "tpu" or spec["accelerator"] or spec["topology"]:
        if spec["topology"]:
            grid = parse_grid(spec["topology"], source, "placement.topology")
            return Host("tpu", math.prod(grid), grid, spec["accelerator"])
        if spec["accelerator"]:
            return tpu_host(spec["accelerator"], source)
    if spec["platform"] in GPU_VISIBLE and spec["host_chips"]:
        return Host(spec["platform"], spec["host_chips"])
    found = detect(environ, root)
    if found is None:
        raise BadInput("found no TPU (TPU_ACCELERATOR_TYPE), NVIDIA (nvidia-smi) or ROCm GPUs on this host; "
                       "name them (placement.platform with placement.accelerator or placement.host_chips)",
                       path=source, field="placement")
    if spec["platform"] and found.platform != spec["platform"]:
        raise BadInput(f"the case asks for {spec['platform']}, this host has {found.platform}", path=source,
                       field="placement.platform")
    return dataclasses.replace(found, chips=spec["host_chips"] or found.chips)


def process_block(grid: tuple[int, int, int], chips: int) -> tuple[int, int, int] | None:
    """The x,y,z block of ``chips`` chips each process owns on a TPU host grid, filling x first, then y
    (None when no block of that size tiles the grid)."""
    for bz in (1, grid[2]):
        for by in range(1, grid[1] + 1):
            bx = chips // (by * bz)
            if bx * by * bz == chips and not (grid[0] % bx or grid[1] % by or grid[2] % bz):
                return bx, by, bz
    return None


def tpu_chips(grid: tuple[int, int, int], block: tuple[int, int, int], process: int) -> tuple[int, ...]:
    """Host-local chip indices of one process: processes and chips both numbered x fastest, then y, z."""
    counts = [g // b for g, b in zip(grid, block)]
    px, py, pz = process % counts[0], process // counts[0] % counts[1], process // (counts[0] * counts[1])
    return tuple(sorted(x + grid[0] * (y + grid[1] * z)
                        for z in range(pz * block[2], (pz + 1) * block[2])
                        for y in range(py * block[1], (py + 1) * block[1])
                        for x in range(px * block[0], (px + 1) * block[0])))


def place(spec: dict, host: Host, per_process: int, local_ranks: int, source: str = "<case>") -> list[Placement]:
    """Each local rank's chips and variables (index = local rank). Refused: more chips than the host has;
    on TPU, processes that leave chips idle (libtpu waits for every process of its grid) or a chip count
    that no block of the grid holds."""
    if per_process * local_ranks > host.chips:
        raise BadInput(f"{local_ranks} processes x {per_process} chips need {per_process * local_ranks} chips, "
                       f"this host has {host.chips}", path=source, field="placement")
    if host.platform != "tpu":
        chip_sets = [tuple(range(l * per_process, (l + 1) * per_process)) for l in range(local_ranks)]
        if spec["by"] == "local_rank":
            return [Placement(c, {}) for c in chip_sets]
        return [Placement(c, {GPU_VISIBLE[host.platform]: ",".join(map(str, c))}) for c in chip_sets]
    if spec["by"] == "local_rank":
        raise BadInput("a TPU chip is given to a process by libtpu's variables: use placement: chip", path=source,
                       field="placement.by")
    if per_process * local_ranks != host.chips:
        raise BadInput(f"{local_ranks} processes x {per_process} chips leave chips of this {host.chips}-chip TPU "
                       "host idle: libtpu waits for a process on every block", path=source, field="placement")
    block = process_block(host.grid, per_process)
    if block is None:
        raise BadInput(f"{per_process} chips are no block of the host's {'x'.join(map(str, host.grid))} grid",
                       path=source, field="placement.per_process")
    bounds = tuple(g // b for g, b in zip(host.grid, block))
    ports = [TPU_BASE_PORT + l for l in range(local_ranks)]
    out = []
    for l in range(local_ranks):
        chips = tpu_chips(host.grid, block, l)
        out.append(Placement(chips, {
            "TPU_CHIPS_PER_PROCESS_BOUNDS": ",".join(map(str, block)),
            "TPU_PROCESS_BOUNDS": ",".join(map(str, bounds)),
            "TPU_VISIBLE_CHIPS": ",".join(map(str, chips)),
            "CLOUD_TPU_TASK_ID": str(l),
            "TPU_PROCESS_PORT": str(ports[l]),
            "TPU_PROCESS_ADDRESSES": ",".join(f"localhost:{p}" for p in ports),
        }))
    return out


def host_ranks(processes: int, hosts: int, host_index: int) -> range:
    """The global ranks one host runs: an equal, contiguous share."""
    per_host = processes // hosts
    return range(host_index * per_host, (host_index + 1) * per_host)


def devices_per_process(case: Case) -> int:
    """The devices each rank process sees (XLA's fake CPU device count): at least one, since a command
    case may start more processes than it names devices."""
    return max(1, case.devices // case.processes)


def placements(case: Case, options: RunOptions = RunOptions()) -> tuple[Host, dict[int, Placement]] | None:
    """This host and the chips of each of its ranks (global rank -> Placement); None without a case
    ``placement``. A TPU slice of several hosts is refused: TPU_PROCESS_ADDRESSES would have to name
    every host's workers."""
    if case.placement is None:
        return None
    host = host_for(case.placement, case.source)
    if host.platform == "tpu" and options.hosts > 1:
        raise BadInput("chip placement on TPU runs on one host (TPU_PROCESS_ADDRESSES would name every host)",
                       path=case.source, field="placement")
    mine = host_ranks(case.processes, options.hosts, options.host_index)
    per_process = case.placement["per_process"] or devices_per_process(case)
    return host, dict(zip(mine, place(case.placement, host, per_process, len(mine), case.source)))


def placement_record(case: Case, options: RunOptions) -> dict | None:
    """What env.json keeps of the placement: the host as perfkit saw it and each rank's chips and
    variables."""
    placed = placements(case, options)
    if placed is None:
        return None
    host, by_rank = placed
    return {"by": case.placement["by"], "platform": host.platform, "accelerator": host.accelerator,
            "grid": list(host.grid) if host.grid else None, "host_chips": host.chips, "kind": host.kind,
            "ranks": [{"rank": r, **p.record()} for r, p in by_rank.items()]}
