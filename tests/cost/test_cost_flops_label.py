"""`perfkit cost` names what its FLOPs split counts: ``dot_flops`` holds convolutions too, so a program whose
only costed op is a convolution must not read as "dots". The real MI300 conv program (tests/data/real/hlo,
README there): ``__cudnn$convForward``, 16 -> 5120 features, kernel 1x2x2, stride 1x2x2, padding 1, input
32x60x104; the kernel-output positions that read an input element are 32 x 60 x 104 (the padded ends read
nothing), so 2 x 16 x 5120 x 32 x 60 x 104 = 32715571200 FLOPs by hand, none of them a dot."""

import json
from pathlib import Path

from click.testing import CliRunner

from perfkit.cli import cli

CONV = Path(__file__).resolve().parents[1] / "data" / "real" / "hlo" / "mi300_jax_conv_08"
BY_HAND = 2 * 16 * 5120 * 32 * 60 * 104


def test_a_convolution_is_counted_as_one():
    res = CliRunner().invoke(cli, ["cost", str(CONV)])
    assert res.exit_code == 0, res.output
    assert f"{BY_HAND:.3g}" == "3.27e+10"
    assert res.stdout.splitlines()[1].startswith("  FLOPs 3.27e+10 (dots and convolutions 3.27e+10, other 0; ")
    step = json.loads(CliRunner().invoke(cli, ["cost", str(CONV), "--json"]).stdout)["cost"][str(CONV)]["step"]
    assert step["dot_flops"] == step["flops"] == BY_HAND  # the key keeps its name (docs/architecture.md)


def test_a_count_prints_as_report_md_prints_it():
    """A newcomer's demo: sp's dot FLOPs read `(2.40e+07)` in report.md's Cost table and `dots and convolutions
    2.4e+07` in `perfkit cost`: one figure, two ways. Both keep the trailing zero of three digits now."""
    from perfkit.cli.cost import program_lines

    step = json.loads(CliRunner().invoke(cli, ["cost", str(CONV), "--json"]).stdout)["cost"][str(CONV)]["step"]
    step.update(flops=24_000_000, dot_flops=24_000_000)
    assert "  FLOPs 2.40e+07 (dots and convolutions 2.40e+07, other 0; " in program_lines("sp", step, None)[1]
