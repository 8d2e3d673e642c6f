"""A run directory given to a trace command that reads one run's traces (breakdown, collectives, diff): it is
refused, and the line names the trial folders whose traces the paths held, as tail names a run's trials, where it
named the first trial alone."""

import json

from click.testing import CliRunner

from perfkit.cli import cli
from perfkit.trace.synthetic import tpu_profile

TRIALS = [(0, "a", "ok"), (1, "b", "ok"), (2, "b", "hung"), (3, "a", "ok")]


def _run(root):
    """A run of 4 trials, each with one rank's trace of the same steps (its host named apart: not one file twice)."""
    (root / "trials").mkdir(parents=True)
    (root / "case.yaml").write_text("name: pointer\n")
    records = [{"index": i, "variant": v, "round": i // 2, "dir": f"trials/{i:02d}-{v}", "status": status,
                "wall_s": 1.0, "warmup": 0, "steps_ms": [1.0], "natural_ms": [], "values": {},
                "ranks": [{"rank": 0, "exit_code": 0, "running_at_end": False, "steps_done": 1, "last_step_ms": 1.0,
                           "last_mark": None}]} for i, v, status in TRIALS]
    (root / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    for i, v, _ in TRIALS:
        tpu_profile(root / "trials" / f"{i:02d}-{v}" / "rank0" / "trace" / "h.xplane.pb", chips=2, host=f"h{i}")
    return root


def test_a_run_s_trials_given_together_are_named_as_read(tmp_path):
    run = _run(tmp_path / "run")
    every = (f"these paths hold the traces of all 4 of its traced trials: pass one trial's folder: "
             f"{run / 'trials/00-a'} (ok), {run / 'trials/01-b'} (ok), {run / 'trials/02-b'} (hung) and 1 more; or "
             f"the run to `perfkit trace attribution {run}` for its A/B attribution")
    two = (f"these paths hold the traces of 2 of its 4 traced trials: pass one trial's folder: {run / 'trials/01-b'} "
           f"(ok), {run / 'trials/03-a'} (ok); or the run to `perfkit trace attribution {run}`")
    for args, said in [(["breakdown", run], every), (["collectives", run], every), (["diff", run, run / "trials/00-a"],
                       every), (["breakdown", run / "trials/01-b", run / "trials/03-a/rank0"], two)]:
        res = CliRunner().invoke(cli, ["trace", *map(str, args)])
        assert res.exit_code == 2 and res.output.count("\n") == 1, res.output
        assert said in res.output, res.output
    assert CliRunner().invoke(cli, ["trace", "breakdown", str(run / "trials/02-b")]).exit_code == 0
