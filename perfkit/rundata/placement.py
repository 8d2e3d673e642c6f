"""A case's ``placement`` as the case file spells it: ``chip``, ``local_rank`` or a mapping (``by``,
``per_process``, ``platform``, ``accelerator``, ``topology``, ``host_chips``), checked and filled; and the
host grids it names: a chip grid (``2x4``) or a Cloud TPU single-host slice by accelerator type.
``perfkit.run.placement`` gives each rank its chips from it."""

from __future__ import annotations

import dataclasses
import math
import re

from perfkit.common.keys import check_keys
from perfkit.errors import BadInput

PLATFORMS = ("tpu", "cuda", "rocm")
MODES = ("chip", "local_rank")

# One host's chips as an x,y,z grid, by accelerator type (Cloud TPU's published single-host slices). The
# number in the name counts chips on v5e / v6e, TensorCores (two a chip) on v4, v5p and tpu7x.
TPU_HOSTS = {
    "v5litepod-1": (1, 1, 1), "v5litepod-4": (2, 2, 1), "v5litepod-8": (2, 4, 1),
    "v6e-1": (1, 1, 1), "v6e-4": (2, 2, 1), "v6e-8": (2, 4, 1),
    "v4-8": (2, 2, 1), "v5p-8": (2, 2, 1), "tpu7x-8": (2, 2, 1),
}
TPU_ALIASES = {"v5e": "v5litepod"}  # the short name users write


@dataclasses.dataclass(frozen=True)
class Host:
    """What placement needs of this host: its platform, its chips and, on TPU, their grid."""

    platform: str
    chips: int
    grid: tuple[int, int, int] | None = None  # TPU: chips along x, y, z
    accelerator: str | None = None  # TPU: the accelerator type as named (TPU_ACCELERATOR_TYPE or the case)
    kind: str | None = None  # the chip as its driver names it, where read (nvidia-smi: "NVIDIA H200")


def parse_grid(text: str, source: str, field: str) -> tuple[int, int, int]:
    """``2x4`` or ``2x2x1`` -> (2, 4, 1)."""
    if not re.fullmatch(r"[1-9]\d*(x[1-9]\d*){1,2}", str(text)):
        raise BadInput(f"must be a chip grid like 2x4 or 2x2x1, got {text!r}", path=source, field=field)
    dims = [int(d) for d in str(text).split("x")]
    return tuple(dims + [1] * (3 - len(dims)))  # type: ignore[return-value]


def tpu_host(accelerator: str, source: str = "<case>", field: str = "placement.accelerator") -> Host:
    """A single-host TPU slice by accelerator type (``v5litepod-4``, ``v5e-8``, ``v6e-8``, ...)."""
    name = str(accelerator).strip().lower()
    family, _, size = name.partition("-")
    name = f"{TPU_ALIASES.get(family, family)}-{size}"
    if name not in TPU_HOSTS:
        raise BadInput(f"{accelerator!r} is no single-host TPU slice perfkit knows ({', '.join(TPU_HOSTS)}); "
                       "name the host's chip grid as placement.topology (e.g. 2x4)", path=source, field=field)
    grid = TPU_HOSTS[name]
    return Host("tpu", math.prod(grid), grid, str(accelerator))


PLACEMENT_KEYS = {"by": (str, "chip"), "per_process": (int, None), "platform": (str, None),
                  "accelerator": (str, None), "topology": (str, None), "host_chips": (int, None)}


def normalize(value, source: str) -> dict | None:
    """A case's ``placement`` (``chip``, ``local_rank`` or a mapping) with every key filled; None without."""
    if value is None:
        return None
    spec = check_keys({"by": value} if isinstance(value, str) else value, PLACEMENT_KEYS, "placement.", source)
    if spec["by"] not in MODES:
        raise BadInput(f"must be one of {', '.join(MODES)}", path=source, field="placement.by")
    if spec["platform"] is not None and spec["platform"] not in PLATFORMS:
        raise BadInput(f"must be one of {', '.join(PLATFORMS)}", path=source, field="placement.platform")
    for key in ("per_process", "host_chips"):
        if spec[key] is not None and spec[key] < 1:
            raise BadInput("must be >= 1", path=source, field=f"placement.{key}")
    if spec["topology"] is not None:
        parse_grid(spec["topology"], source, "placement.topology")
    if spec["accelerator"] is not None:
        tpu_host(spec["accelerator"], source)
    return spec
