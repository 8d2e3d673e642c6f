"""`perfkit cost RUN_DIR --step-module TEXT` where only some variants compiled the program TEXT names (sp pads
its rows, tp never does): the variants that have it are costed, the others said in their place, exit 0; where
no variant has it, one line naming what each has, exit 2, as on a dump folder. The run is written by hand as a
one-process case leaves it (trials/<NN>-<variant>/rank0/xla_dump/); FLOPs below are counted by hand."""

import json

from click.testing import CliRunner

from perfkit.cli import cli

# A dot of f32[8,16] by f32[16,4]: 2 x 8 x 4 output-element products x 16 contracted = 1024 FLOPs.
STEP = ("HloModule jit__euler_step\n\nENTRY main {\n  x = f32[8,16]{1,0} parameter(0)\n"
        "  w = f32[16,4]{1,0} parameter(1)\n"
        "  ROOT d = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
# sp's pad of its rows: an add of two f32[12] (12 FLOPs, no dot).
PAD = ("HloModule jit__pad\n\nENTRY main {\n  x = f32[12]{0} parameter(0)\n"
       "  ROOT a = f32[12]{0} add(x, x)\n}\n")


def run_dir(root):
    """tp compiled the step; sp the step and its pad."""
    programs = {"tp": {"module_0002.jit__euler_step": STEP},
                "sp": {"module_0002.jit__euler_step": STEP, "module_0004.jit__pad": PAD}}
    for k, (variant, files) in enumerate(programs.items()):
        folder = root / "trials" / f"{k:02d}-{variant}" / "rank0" / "xla_dump"
        folder.mkdir(parents=True)
        for stem, text in files.items():
            (folder / f"{stem}.cpu_after_optimizations.txt").write_text(text)
    return root


def cost(*args):
    return CliRunner().invoke(cli, ["cost", *map(str, args)])


def test_the_variants_with_the_program_are_costed_the_others_said(tmp_path):
    run = run_dir(tmp_path / "run")
    res = cost(run, "--step-module", "jit__pad")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == ("tp: not costed: --step-module: no program whose name contains 'jit__pad' "
                        "(have: jit__euler_step)")
    assert lines[1].startswith("sp: step program jit__pad (")
    assert lines[2].startswith("  FLOPs 12 (")
    out = json.loads(cost(run, "--step-module", "jit__pad", "--json").stdout)
    assert out["cost"]["tp"] == {"dumps": str(run / "trials" / "00-tp" / "rank0" / "xla_dump"),
                                 "error": lines[0].removeprefix("tp: not costed: ")}
    assert out["cost"]["sp"]["step"]["flops"] == 12
    assert out["change"] == {}  # nothing to hold sp's pad against


def test_a_program_no_variant_has_is_one_line_and_exit_2(tmp_path):
    run = run_dir(tmp_path / "run")
    res = cost(run, "--step-module", "nomatch")
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr == (f"perfkit: {run}: variant tp: --step-module: no program whose name contains 'nomatch' "
                          "(have: jit__euler_step); variant sp: --step-module: no program whose name contains "
                          "'nomatch' (have: jit__euler_step, jit__pad)\n")


def test_the_step_by_default_is_unchanged(tmp_path):
    res = cost(run_dir(tmp_path / "run"), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [out["cost"][v]["step"]["flops"] for v in ("tp", "sp")] == [1024, 1024]
    assert out["change"]["sp"]["flops"] == [1024, 1024]
