"""`perfkit cost` refuses, in one line naming the file and the line, what it cannot cost (exit 2, no traceback).

An unbounded dynamic dimension (``f32[?,784]``), as XLA's StableHLO-to-HLO translation prints a shape-polymorphic
program (openxla/xla, Apache-2.0: the ``xla-translate --stablehlo-to-hlo-text`` test whose CHECK lines hold
``f32[?,784] parameter(4)`` and ``f32[?,784] abs(...)``): it has no size, so no bytes or FLOPs (it was a
ValueError traceback)."""

import subprocess
import sys
from pathlib import Path

import pytest

from perfkit.errors import BadInput
from perfkit.hlo.program_cost import program_cost
from perfkit.hlo.parse import parse_module

REPO = Path(__file__).resolve().parents[2]

UNBOUNDED = """HloModule main

ENTRY %main.35 (Arg_0.1: f32[3,4], Arg_4.5: f32[?,784]) -> (f32[3,4], f32[?,784]) {
  %Arg_0.1 = f32[3,4] parameter(0)
  %abs.6 = f32[3,4] abs(%Arg_0.1)
  %Arg_4.5 = f32[?,784] parameter(1)
  %abs.31 = f32[?,784] abs(%Arg_4.5)
  ROOT %tuple.34 = (f32[3,4], f32[?,784]) tuple(%abs.6, %abs.31)
}
"""


def test_an_unbounded_dimension_is_refused_naming_the_line():
    with pytest.raises(BadInput, match=r"line 6: Arg_4\.5 has an unbounded dynamic dimension \(f32\[\?,784\]\)"):
        program_cost(parse_module(UNBOUNDED, "m.txt"))
    bounded = UNBOUNDED.replace("?", "<=8")  # a bounded one is costed at its bound
    assert program_cost(parse_module(bounded)).other_flops == 12 + 8 * 784


def test_the_cost_command_refuses_it_in_one_line(tmp_path):
    (tmp_path / "module_0001.main.cpu_after_optimizations.txt").write_text(UNBOUNDED)
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "cost", str(tmp_path)], capture_output=True,
                         text=True, cwd=REPO, timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "module_0001.main.cpu_after_optimizations.txt" in res.stderr
