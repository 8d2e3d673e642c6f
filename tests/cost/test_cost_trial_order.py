"""A run's variant is costed from its first trial with XLA dumps in trial order, as hlo-diff reads its trials:
past a hundred trials, trials/100-<v> comes after trials/11-<v>, not before it as its name sorts."""

from perfkit.hlo.dumps import run_trials, variant_dumps

PROGRAM = "HloModule jit__euler_step\n\nENTRY main {\n  ROOT x = f32[4]{0} parameter(0)\n}\n"


def test_a_variant_s_dumps_are_its_first_trial_s_by_index(tmp_path):
    for name in ["00-a", "11-b", "100-b"]:
        for rank in (0, 1):
            folder = tmp_path / "trials" / name / f"rank{rank}" / "xla_dump"
            folder.mkdir(parents=True)
            (folder / "module_0001.jit__euler_step.cpu_after_optimizations.txt").write_text(PROGRAM)
    assert variant_dumps(tmp_path) == {"a": tmp_path / "trials" / "00-a" / "rank0" / "xla_dump",
                                       "b": tmp_path / "trials" / "11-b" / "rank0" / "xla_dump"}
    assert [t.label for t in run_trials(tmp_path)] == ["trials/00-a", "trials/11-b", "trials/100-b"]
