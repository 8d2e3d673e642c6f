"""A step cost figure prints alike in report.md's Cost table and `perfkit cost RUN_DIR`: where the change sentence
takes more digits than the figures' own (4 for bytes, 3 for FLOPs) to follow from them, both print them, and both say
so. Before, the table printed HBM bytes 1.0004 and 1.0016 GiB and FLOPs 2.667e+07, the command 1.000 and 1.002 GiB
(which divide to +0.2%, beside its sentence's +0.1%) and 2.67e+07."""

from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.report.cost import section

# By hand: HBM 1074170000 B = 1.000396 GiB and 1075460000 B = 1.001597 GiB; 1075460000 / 1074170000 = 1.0012009,
# +0.1%; to 4 digits 1.000 and 1.002 divide to +0.2%, to 5 digits 1.0004 and 1.0016 to +0.11995%, +0.1%.
# FLOPs 26670000 and 26520000: -0.5624%, -0.6%; to 3 digits 2.67e+07 and 2.65e+07 divide to -0.75%, -0.7%; to 4,
# 2.667e+07 and 2.652e+07 to -0.5624%.
NOTE = ("FLOPs are shown to 4 significant digits (3 otherwise) and HBM bytes accessed to 5 (4 otherwise): the "
        "digits the change below takes to follow from the figures shown.")


def _step(flops: int, hbm: int) -> dict:
    return {"module": "jit_step", "flops": flops, "dot_flops": flops, "other_flops": 0, "transcendentals": 0,
            "hbm_bytes": hbm, "interconnect_bytes": 0, "temp_bytes": 1 << 20, "peak_bytes": 2 << 20,
            "collectives": {}, "collective_shapes": []}


STEPS = {"tp": _step(26670000, 1074170000), "sp": _step(26520000, 1075460000)}


def test_a_cost_figure_prints_alike_in_the_report_and_perfkit_cost(tmp_path, monkeypatch):
    report = section({"baseline": "tp", "cost": {v: {"step": s} for v, s in STEPS.items()}})
    assert "| HBM bytes accessed | 1.0004 GiB | 1.0016 GiB |" in report
    assert "| FLOPs (dots and convolutions) | 2.667e+07 (2.67e+07) | 2.652e+07 (2.65e+07) |" in report
    assert report[report.index(NOTE) + 2].endswith("FLOPs -0.6%; HBM bytes +0.1%; bytes sent a device unchanged.")

    # the command's own dump reading is another module's: here it finds the same two steps
    monkeypatch.setattr("perfkit.cli.cost.run_costs", lambda *args: ({v: {"step": s} for v, s in STEPS.items()}, {}))
    (tmp_path / "run" / "trials").mkdir(parents=True)
    res = CliRunner().invoke(cli, ["cost", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    for v, flops, hbm in (("tp", "2.667e+07", "1.0004 GiB"), ("sp", "2.652e+07", "1.0016 GiB")):
        figures = lines[lines.index(f"{v}: step program jit_step") + 1]
        assert figures.startswith(f"  FLOPs {flops} (dots and convolutions ") and f"accessed {hbm} a step" in figures
    assert lines[lines.index(NOTE) + 1].endswith("FLOPs -0.6%; HBM bytes +0.1%; bytes sent a device unchanged")


def test_figures_that_divide_to_their_change_as_they_are_add_no_note(tmp_path):
    """HBM 12603392 and 14973952 B (12.02 and 14.28 MiB: +18.8% either way), FLOPs 2.8e7 and 2.6e7 (-7.1%)."""
    report = section({"baseline": "tp", "cost": {"tp": {"step": _step(28000000, 12603392)},
                                                 "sp": {"step": _step(26000000, 14973952)}}})
    assert "| HBM bytes accessed | 12.02 MiB | 14.28 MiB |" in report
    assert not any("significant digits" in line for line in report)
