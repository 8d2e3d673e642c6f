"""A dump folder whose step program XLA dumped only before optimizations (a compile stopped during the step's
passes: the init programs it compiled first are there, optimized) beside a smaller program it finished: cost took the
program with the most FLOPs of those left, the pad, for the step, and gave its figures as the step's. The step it
cannot cost is now refused, and said why. Programs written by hand; FLOPs counted by hand."""

import json

from click.testing import CliRunner

from perfkit.cli import cli

# A dot of f32[8,16] by f32[16,4]: 2 x 8 x 4 output-element products x 16 contracted = 1024 FLOPs.
STEP = ("HloModule jit__euler_step\n\nENTRY main {\n  x = f32[8,16]{1,0} parameter(0)\n"
        "  w = f32[16,4]{1,0} parameter(1)\n"
        "  ROOT d = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n")
# an add of two f32[12]: 12 FLOPs.
PAD = "HloModule jit__pad\n\nENTRY main {\n  x = f32[12]{0} parameter(0)\n  ROOT a = f32[12]{0} add(x, x)\n}\n"
AFTER_PASSES = ("XLA writes a module's text after optimizations once its optimization passes finish (the compile was "
                "stopped, failed or is still running, or those files were not kept)")


def dump(folder, step_finished: bool):
    folder.mkdir(parents=True)
    (folder / "module_0002.jit__euler_step.before_optimizations.txt").write_text(STEP)
    if step_finished:
        (folder / "module_0002.jit__euler_step.cpu_after_optimizations.txt").write_text(STEP)
    (folder / "module_0004.jit__pad.before_optimizations.txt").write_text(PAD)
    (folder / "module_0004.jit__pad.cpu_after_optimizations.txt").write_text(PAD)
    return folder


def cost(*args):
    return CliRunner().invoke(cli, ["cost", *map(str, args)])


def test_a_step_dumped_only_before_optimizations_is_refused_not_replaced(tmp_path):
    folder = dump(tmp_path / "d", step_finished=False)
    res = cost(folder)
    assert (res.exit_code, res.stdout) == (2, "")
    assert res.stderr.splitlines()[-1] == (
        f"perfkit: {folder}: the step program jit__euler_step (module_0002.jit__euler_step) was dumped only before "
        f"optimizations, so it is not costed: {AFTER_PASSES}")
    assert json.loads(cost(dump(tmp_path / "e", step_finished=True), "--json").stdout)[
        "cost"][str(tmp_path / "e")]["step"]["flops"] == 1024


def test_a_step_module_named_that_was_dumped_only_before_optimizations_says_so(tmp_path):
    folder = dump(tmp_path / "d", step_finished=False)
    res = cost(folder, "--step-module", "euler")
    assert res.exit_code == 2
    assert res.stderr.splitlines()[-1] == (
        f"perfkit: {folder}: --step-module: the program 'euler' names, jit__euler_step (module_0002.jit__euler_step), "
        f"was dumped only before optimizations, so it is not costed: {AFTER_PASSES}")


def test_a_run_variant_whose_step_is_unfinished_is_said_in_its_place(tmp_path):
    for k, (variant, finished) in enumerate((("a", True), ("b", False))):
        dump(tmp_path / "trials" / f"{k:02d}-{variant}" / "rank0" / "xla_dump", finished)
    b = tmp_path / "trials" / "01-b" / "rank0" / "xla_dump"
    out = json.loads(cost(tmp_path, "--json").stdout)
    assert out["cost"]["a"]["step"]["flops"] == 1024
    assert out["cost"]["b"] == {"dumps": str(b), "error": (
        f"{b}: the step program jit__euler_step (module_0002.jit__euler_step) was dumped only before optimizations, "
        f"so it is not costed: {AFTER_PASSES}")}
    assert out["change"] == {}


def test_a_variant_is_costed_from_a_trial_whose_dumps_are_whole(tmp_path):
    """b's first trial was killed while its step compiled (dumped only before optimizations), its next ran whole: the
    cost took the first and read b as not costed. A trial whose every module finished is taken; where none did, the
    first with dumps still says why."""
    for index, variant, finished in ((0, "a", True), (1, "b", False), (2, "b", True), (3, "a", True)):
        dump(tmp_path / "trials" / f"{index:02d}-{variant}" / "rank0" / "xla_dump", finished)
    out = json.loads(cost(tmp_path, "--json").stdout)
    assert out["cost"]["b"]["dumps"] == str(tmp_path / "trials" / "02-b" / "rank0" / "xla_dump")
    assert out["cost"]["b"]["step"]["flops"] == 1024
    assert out["cost"]["a"]["dumps"] == str(tmp_path / "trials" / "00-a" / "rank0" / "xla_dump")
    (tmp_path / "trials" / "02-b" / "rank0" / "xla_dump" / "module_0002.jit__euler_step.cpu_after_optimizations.txt"
     ).unlink()
    first = tmp_path / "trials" / "01-b" / "rank0" / "xla_dump"
    assert json.loads(cost(tmp_path, "--json").stdout)["cost"]["b"]["dumps"] == str(first)
