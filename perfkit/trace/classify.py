"""What a device op is: its kind (opcode, or what a GPU kernel does) and its category, one of

- ``compute``: any other op;
- ``ici``: a collective, sync or either half of an async ``X-start`` / ``X-done`` pair (time in
  ``X-done`` is the exposed wait), and fusions that run one (a TPU reduce-scatter can be a fusion);
- ``dcn``: such a collective across TPU slices (its ``hlo_category`` names Megascale: the data
  centre network, not ICI);
- ``dma``: local copies (``copy-start`` / ``copy-done``), GPU memcpy / memset, MTIA ``dma_*`` events.

Decided by the op's HLO (opcode from the program's HloProto, or the HLO text some tools put in the
name), then the TPU ``hlo_category`` stat (for a GPU op, "memcpy" or "memset" where its tracer marked it so:
``xplane.COPY_STATS``), and for GPU kernels without either by the kernel name
(``ncclDevKernel_*``, ``rcclKernel*``, ``Memcpy*``, ``dma*``). An op is classified once per distinct identity,
not per event.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from perfkit.trace.programs import COLLECTIVES, Program, base_opcode

CATEGORIES = ("compute", "ici", "dcn", "dma")  # the breakdown's order of precedence too
_COLLECTIVE_CATEGORY = re.compile(r"all-gather|all-reduce|reduce-scatter|all-to-all|collective|send|recv|megascale")
# NCCL / RCCL kernels (``ncclDevKernel_AllGather_RING_LL``) and torch.distributed on CPU (``c10d::allreduce_``
# ops, ``gloo:all_reduce`` spans).
_COMM_KERNEL = re.compile(r"(nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)|(nccl|rccl)|(c10d)::(\w+)|^(gloo):(\w+)", re.IGNORECASE)
_COPY_KERNEL = re.compile(r"\s*(memcpy|memset|(?-i:dma))", re.IGNORECASE)  # dma: MTIA's dma_request (HTA's rule)
_COPY_CATEGORIES = ("memcpy", "memset")  # the category a GPU tracer's mark on a copy or fill gives it (the reader's)
# a torch op or annotation (aten::mm, autograd::engine::evaluate_function: ...), not a GPU kernel's C++ signature
# (void at::native::elementwise_kernel<...>(...))
_KERNEL_SIGNATURE = re.compile(r"^void |[<(]")
_HLO_TEXT = re.compile(r"%?([\w.\-]+)\s*=\s*(\S.*?)\s+([a-z][\w\-]*)\(")


class OpClass(NamedTuple):
    hlo_op: str    # the HLO instruction name ("" for a kernel without one)
    kind: str      # "fusion", "all-gather-done", "reduce-scatter fusion", "nccl AllGather", "memcpy", "kernel"
    category: str  # one of CATEGORIES
    shape: str     # output shape where known ("" otherwise)


def _category_of_opcode(opcode: str, inner: str) -> str:
    base = base_opcode(opcode)
    if base in COLLECTIVES or inner:
        return "ici"
    if base == "copy" and base != opcode:
        return "dma"
    return "compute"


def _network(hlo_category: str) -> str:
    """The network a collective crosses: DCN where its TPU ``hlo_category`` says Megascale (cross-slice)."""
    return "dcn" if "megascale" in hlo_category.lower() else "ici"


def classify(name: str, hlo_op: str, program: Program | None, hlo_category: str) -> OpClass:
    """One op identity -> its class. ``name`` is the event name, ``hlo_op`` the ``hlo_op`` stat ("" when
    absent), ``program`` the HLO of its ``program_id`` when the trace holds it."""
    shape = opcode = inner = ""
    text = _HLO_TEXT.match(hlo_op or name)
    op_name = text.group(1) if text else (hlo_op or name)
    if text:
        shape, opcode = re.sub(r"\{[^{}]*\}", "", text.group(2)), text.group(3)
    op = program.ops.get(op_name) if program else None
    if op is not None:
        opcode, shape, inner = op.opcode, op.shape, op.inner
    if opcode:
        kind = f"{inner} fusion" if inner and opcode == "fusion" else opcode
        category = _category_of_opcode(opcode, inner)
        if category == "ici" or (category == "compute" and _COLLECTIVE_CATEGORY.search(hlo_category.lower())):
            category = _network(hlo_category)
        return OpClass(op_name, kind, category, shape)
    if hlo_category:
        low = hlo_category.lower()
        category = (_network(low) if _COLLECTIVE_CATEGORY.search(low)
                    else "dma" if "copy-" in low or low in _COPY_CATEGORIES else "compute")
        return OpClass(op_name, hlo_category, category, shape)
    comm = _COMM_KERNEL.search(name)
    if comm:
        library = next(g for g in comm.group(1, 3, 4, 6) if g)
        return OpClass(hlo_op, f"{library.lower()} {comm.group(2) or comm.group(5) or comm.group(7) or 'collective'}",
                       "ici", shape)
    copy = _COPY_KERNEL.match(name)
    if copy:
        return OpClass(hlo_op, copy.group(1).lower(), "dma", shape)
    # a torch op (aten::mm, a CPU trace's) is its own kind; a GPU kernel whose C++ name has a namespace is a kernel
    return OpClass(hlo_op, name if "::" in name and not _KERNEL_SIGNATURE.search(name) else "kernel", "compute", shape)
