"""`perfkit cost --model`: a device count, chip or model it cannot cost is refused in one line, exit 2, before
jax starts the devices. Expected lines by hand from the published Wan 2.1 14B sizes: dim 5120 = 2^10 x 5, FFN
13824 = 2^9 x 3^3, 40 heads = 2^3 x 5, 21 x 30 x 52 = 32760 = 2^3 x 3^2 x 5 x 7 x 13 video rows; sp and tp
split the dim, the FFN and the heads, so 1, 2, 4 and 8 (their common divisors) work; ulysses splits the heads
and the rows alone."""

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perfkit import models
from perfkit.cli import cli
from perfkit.models import splits
from perfkit.models.plans import make_plan

REPO = Path(__file__).resolve().parents[2]
WAN_SP = "the wan model's dims sharded under plan sp"


def test_a_count_the_model_does_not_divide_by_is_one_line(tmp_path):
    """The issue's command, in a fresh process that asks for its 3 simulated devices itself."""
    env = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "cost", "--model", "wan", "--chip", "v5e",
                          "--devices", "3"], capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr == f"perfkit: --devices: {WAN_SP} (40 heads, 5120) do not divide by 3; use 1, 2, 4 or 8\n"


@pytest.mark.parametrize("args, line", [
    (["--devices", "7"], f"--devices: {WAN_SP} (40 heads, 5120, 13824) do not divide by 7; use 1, 2, 4 or 8"),
    (["--devices", "1000"], f"--devices: {WAN_SP} (40 heads, 5120, 13824) do not divide by 1000; use 1, 2, 4 or 8"),
    (["--devices", "16"], f"--devices: {WAN_SP} (40 heads) do not divide by 16; use 1, 2, 4 or 8"),
    (["--devices", "3", "--plan", "ulysses"], "--devices: the wan model's dims sharded under plan ulysses (40 heads) "
                                              "do not divide by 3; use 1, 2, 4, 5, 8, 10, 20 or 40"),
    (["--devices", "0"], "--devices: 0 devices; give 1 or more"),
    (["--devices", "-1"], "--devices: -1 devices; give 1 or more"),
    (["--chip", "nochip"], "--chip: unknown chip 'nochip'; known: v4, v5e, v5p, v6e, h100, h200, b200, mi300x"),
    (["--model", "nomodel"], "--model: unknown model 'nomodel'; known: flux, hunyuan, ltx2, wan"),
    (["--plan", "nope"], "--plan: unknown plan 'nope'; known: local, tp, sp, ulysses"),
    # LTX-2's dims all divide by 4 (4096, 2048, 32 heads ...), its 2310 video rows (2 x 3 x 5 x 7 x 11) do not.
    (["--model", "ltx2", "--devices", "4"], "--option pad: sp: stream 'video' has 2310 rows, which do not split "
                                            "over 4 devices; set the plan option pad (shards, halves, tiles, lanes)"),
    # LTX-2 (video dim 4096, FFN 16384, audio 2048 and 8192, 32 heads each) has no dim 3 divides; over 4 to 32
    # devices its video rows need padding.
    (["--model", "ltx2", "--devices", "3"], "--devices: the ltx2 model's dims sharded under plan sp (32 audio heads, "
                                            "32 heads, 2048, 4096, 8192, 16384) do not divide by 3; use 1 or 2 (also "
                                            "4, 8, 16 or 32 with the plan option pad)"),
])
def test_what_cannot_be_costed_is_one_line_and_exit_2(args, line):
    args = ["--model", "wan", *args] if "--model" not in args else args
    res = CliRunner().invoke(cli, ["cost", *args])
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == f"perfkit: {line}\n"


def test_the_counts_named_are_taken():
    """The counts a refusal names pass the check (tests/models lowers wan under sp at 4 devices)."""
    wan = models.get("wan").whole("real")
    for n in (1, 2, 4, 8):
        splits.check_devices(models.get("wan"), wan, make_plan("sp"), n)
    for n in (1, 2, 4, 5, 8, 10, 20, 40):
        splits.check_devices(models.get("wan"), wan, make_plan("ulysses"), n)
