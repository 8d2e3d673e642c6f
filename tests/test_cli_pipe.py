"""A command whose reader stops reading (``perfkit ... | head``) ends with its own exit status: click and Python
exited 1 on the broken pipe, nothing on stderr, which under ``set -o pipefail`` reads as a failed check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STEP = """HloModule jit_step, entry_computation_layout={{(f32[8]{{0}})->f32[8]{{0}}}}

ENTRY %main.3 (Arg_0.1: f32[8]) -> f32[8] {{
  %Arg_0.1 = f32[8]{{0}} parameter(0)
  ROOT %op.2 = f32[8]{{0}} {op}(%Arg_0.1)
}}
"""


def _unread(*args) -> tuple[int, bytes]:
    """The command's exit status and stderr, its stdout's reader gone before it writes (the read end closed)."""
    proc = subprocess.Popen([sys.executable, "-m", "perfkit.cli", *map(str, args)], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    return proc.wait(timeout=120), err


@pytest.mark.parametrize("op, status", [("log", 0), ("exponential", 1)])
def test_a_command_whose_reader_went_ends_with_its_own_status(tmp_path, op, status):
    """hlo-diff of two ranks: alike (0), rank 1's program another (1, the verdict): each as if read to the end."""
    for rank, rank_op in enumerate(("log", op)):
        folder = tmp_path / f"rank{rank}"
        folder.mkdir()
        (folder / "module_0000.jit_step.cpu_after_optimizations.txt").write_text(STEP.format(op=rank_op))
    assert _unread("hlo-diff", tmp_path) == (status, b"")


def test_a_trace_table_whose_reader_went_exits_0(fixtures_dir):
    assert _unread("trace", "breakdown", fixtures_dir / "kineto" / "rank-0.json.gz") == (0, b"")
