"""Case schema: one-line refusals naming file and key, --set overrides, matrix expansion, the A/A control."""

from pathlib import Path

import pytest
import yaml
from runner_testing import perfkit, sleeper_case

from perfkit.errors import BadInput
from perfkit.rundata import case as case_mod

GOOD = {"name": "x", "model": {"name": "wan"}, "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {}}}


def refusal(raw: dict) -> str:
    with pytest.raises(BadInput) as err:
        case_mod.validate(raw, "c.yaml")
    return err.value.line()


@pytest.mark.parametrize("raw,line", [
    (dict(GOOD, repeets={"min": 2}), "c.yaml: repeets: unknown key (did you mean 'repeats'?)"),
    (dict(GOOD, capture={"xla_dmp": "all"}), "c.yaml: capture.xla_dmp: unknown key (did you mean 'xla_dump'?)"),
    (dict(GOOD, variants={"tp": {"evn": {}}, "sp": {}}), "c.yaml: variants.tp.evn: unknown key (did you mean 'env'?)"),
    # a key spelt out that the case abbreviates (a newcomer's; no key is near it by spelling)
    (dict(GOOD, variants={"tp": {"enviroment": {}}, "sp": {}}),
     "c.yaml: variants.tp.enviroment: unknown key (did you mean 'env'?)"),
    (dict(GOOD, model={"name": "wan", "stesp": 4}), "c.yaml: model.stesp: unknown key (did you mean 'steps'?)"),
])
def test_unknown_key_names_it_and_the_nearest_valid_key(raw, line):
    assert refusal(raw) == line


@pytest.mark.parametrize("raw,line", [
    (dict(GOOD, devices="four"), "c.yaml: devices: must be an integer, got str 'four'"),
    (dict(GOOD, model={"name": "wan", "steps": True}), "c.yaml: model.steps: must be an integer, got bool True"),
    (dict(GOOD, timeout=[1]), "c.yaml: timeout: must be an integer or a number, got list [1]"),
    (dict(GOOD, variants={"tp": 3, "sp": {}}), "c.yaml: variants.tp: must be a mapping (options, env, args), got int"),
    (dict(GOOD, order="abab"), "c.yaml: order: must be one of abba, random"),
    (dict(GOOD, step_regex="step ("),
     "c.yaml: step_regex: not a valid regular expression (missing ), unterminated subpattern at position 5)"),
    (dict(GOOD, step_regex=r"step \d+ ms"), "c.yaml: step_regex: needs a group that captures the step time in ms"),
])
def test_wrong_type_or_value_names_the_field(raw, line):
    assert refusal(raw) == line


@pytest.mark.parametrize("raw,line", [
    ({k: v for k, v in GOOD.items() if k != "name"}, "c.yaml: name: missing (every case has a name)"),
    ({k: v for k, v in GOOD.items() if k != "variants"},
     "c.yaml: variants: need at least two variants (the first is the baseline A)"),
    (dict(GOOD, variants={"tp": {}}), "c.yaml: variants: need at least two variants (the first is the baseline A)"),
    ({k: v for k, v in GOOD.items() if k != "model"},
     "c.yaml: model: a case has exactly one of 'model', 'command' and 'serve'"),
    (dict(GOOD, model={"config": "tiny"}), "c.yaml: model.name: missing (the bundled model to run, e.g. wan)"),
    (dict(GOOD, devices=4, processes=3), "c.yaml: processes: 4 devices do not split evenly over 3 processes"),
])
def test_missing_or_inconsistent_fields(raw, line):
    assert refusal(raw) == line


@pytest.mark.parametrize("body,args,line", [
    (dict(sleeper_case(), ordr="abba"), [], "ordr: unknown key (did you mean 'order'?)"),
    (sleeper_case(), ["--set", "warmup=two"], "--set warmup=two: must be an integer, got str 'two'"),
    (sleeper_case(), ["--set", "repeats.mx=4"], "--set repeats.mx=4: unknown key (did you mean 'max'?)"),
    # a newcomer's typo added a variant of its own (12 trials, the typo's all crashed)
    (sleeper_case(), ["--set", "variants.sloww.env.X=1"],
     "--set variants.sloww.env.X=1: no variant 'sloww' in this case (its variants: a, b)"),
    (sleeper_case(), ["--set", "variants.bb.env.X=1"], "--set variants.bb.env.X=1: no variant 'bb' in this case (did "
                                                         "you mean 'b'?)"),
    ({k: v for k, v in sleeper_case().items() if k != "name"}, [], "name: missing (every case has a name)"),
    (sleeper_case(processes=2), ["--coordinator", "node0:abc"], "--coordinator: must be HOST:PORT, got 'node0:abc'"),
])
def test_cli_refuses_with_one_line_and_exit_2(tmp_path, body, args, line):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(body))
    res = perfkit("run", path, *args, "--out", tmp_path / "run")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"perfkit: {path}: {line}"]
    assert not (tmp_path / "run").exists()  # refused before anything ran


def test_cli_refuses_missing_file_and_bad_yaml(tmp_path):
    res = perfkit("run", tmp_path / "nope.yaml")
    assert (res.returncode, res.stderr.strip()) == (2, f"perfkit: {tmp_path / 'nope.yaml'}: no such case file or "
                                                       "bundled case; `perfkit cases` lists the bundled ones")
    # a mistyped bundled name: the nearest one, and where the list is
    for typed, meant in (("quickstar", "quickstart"), ("kernels/wan-qvk", "kernels/wan-qkv")):
        res = perfkit("run", typed)
        assert (res.returncode, res.stderr.strip()) == (2, f"perfkit: {typed}: no such case file or bundled case "
                                                           f"(did you mean `{meant}`?); `perfkit cases` lists the "
                                                           "bundled ones")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    res = perfkit("run", bad)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "not valid YAML" in res.stderr



@pytest.mark.parametrize("body, line", [
    # the newcomer's: YAML kept the last `a`, so the case read as one variant
    ("variants: {a: {}, a: {}}\n", "line 3: not valid YAML (duplicated key 'a', first on line 3)"),
    ("variants:\n  a:\n    env: {X: '1'}\n  b:\n    env:\n      X: '1'\n      X: '2'\n",
     "line 9: not valid YAML (duplicated key 'X', first on line 8)"),
    ("name: y\nvariants: {a: {}, b: {}}\n", "line 3: not valid YAML (duplicated key 'name', first on line 1)"),
])
def test_a_key_given_twice_anywhere_in_a_case_file_is_refused_naming_it_and_its_line(tmp_path, body, line):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\ncommand: [python, x.py]\n" + body)
    with pytest.raises(BadInput) as err:
        case_mod.load(path)
    assert err.value.line() == f"{path}: {line}"


def test_a_merge_may_still_be_overridden_beside_it(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\ncommand: [python, x.py]\nvariants:\n  a: &a {env: {X: '1'}}\n"
                    "  b: {<<: *a, env: {X: '2'}}\n")
    assert [v.env for v in case_mod.load(path).variants] == [{"X": "1"}, {"X": "2"}]

def test_set_overrides_any_field_before_validation():
    raw = case_mod.apply_overrides(GOOD, ["devices=4", "model.config=real", "capture.trace=[3]",
                                          "variants.sp.env.SWITCH=1", "repeats.max=5"], "c")
    c = case_mod.validate(raw, "c")
    assert c.devices == 4 and c.model["config"] == "real" and c.capture["trace"] == [3]
    assert c.variant("sp").env == {"SWITCH": "1"} and c.repeats == {"min": 3, "max": 5}
    assert c.warmup == 2 and c.variants[0].name == "tp"  # defaults kept
    with pytest.raises(BadInput, match="--set expects key=value"):
        case_mod.apply_overrides(GOOD, ["devices"], "c")
    with pytest.raises(BadInput, match=r"^c: variants.sq.env.X: no variant 'sq' in this case \(its variants: tp, "
                                       r"sp\)$"):  # a matrix's keys are --set's
        case_mod.expand_matrix(case_mod.validate(dict(GOOD, matrix={"variants.sq.env.X": ["0", "1"]}), "c"))


def test_matrix_expands_to_every_combination_in_order():
    c = case_mod.validate(dict(GOOD, matrix={"devices": [1, 2], "model.steps": [4, 6, 8]}), "c")
    cells = case_mod.expand_matrix(c)
    assert [a for a, _ in cells] == [{"devices": d, "model.steps": s} for d in (1, 2) for s in (4, 6, 8)]
    for assignment, cell in cells:
        assert (cell.devices, cell.model["steps"]) == (assignment["devices"], assignment["model.steps"])
        assert cell.matrix == {} and cell.name == f"x[devices={cell.devices},model.steps={cell.model['steps']}]"


def test_a_matrix_value_given_twice_is_refused():
    """A newcomer's: `seed: [1, 1]` ran two combinations of one case, both named x[seed=1], two rows of one setting."""
    assert refusal(dict(GOOD, matrix={"seed": [1, 2, 1]})) == "c.yaml: matrix.seed: 1 is given twice"
    assert refusal(dict(GOOD, matrix={"variants.sp.env": [{"K": "1"}, {"K": "1"}]})) == \
        "c.yaml: matrix.variants.sp.env: {'K': '1'} is given twice"


def test_two_matrix_values_named_alike_are_refused():
    """`variants.sp.env.K: ["1", 1]` ran two combinations of one setting (env values are text: K=1 in both), both
    named x[variants.sp.env.K=1]."""
    assert refusal(dict(GOOD, matrix={"variants.sp.env.K": ["1", 1]})) == \
        "c.yaml: matrix.variants.sp.env.K: '1' and 1 both read 1 in a combination's name"


def test_matrix_mappings_with_keys_of_several_types_are_compared_not_sorted():
    """YAML's mapping keys may be of several types (`{1: a, K: b}`): the repeat check sorted them, a TypeError's
    traceback where two different mappings are no repeat; keys in another order are still one mapping."""
    raw = dict(GOOD, matrix={"variants.sp.env": [{1: "a", "K": "b"}, {"K": "b"}]})
    assert case_mod.validate(raw, "c.yaml").matrix == raw["matrix"]
    assert refusal(dict(GOOD, matrix={"variants.sp.env": [{1: "a", "K": "b"}, {"K": "b", 1: "a"}]})) == \
        "c.yaml: matrix.variants.sp.env: {'K': 'b', 1: 'a'} is given twice"


def test_matrix_combination_that_is_invalid_is_refused_at_load(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(dict(GOOD, warmup=2, matrix={"model.steps": [8, 2]})))
    with pytest.raises(BadInput) as err:
        case_mod.load(path)
    assert err.value.line() == (f"{path}: model.steps: 2 steps leave none after warmup 2 "
                                "(in matrix combination model.steps=2)")


def test_a_matrix_combination_that_cannot_run_is_refused_before_any_runs(tmp_path):
    """A newcomer's: a script missing in one combination only (a case without a matrix is refused so) ran the
    combinations before it, then failed every trial of its own; each combination is checked as its case is."""
    from perfkit.run import runner

    (tmp_path / "bench.py").write_text("")
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump({"name": "m", "command": ["python", "{case_dir}/bench.py"], "matrix": {
        "command": [["python", "{case_dir}/bench.py"], ["python", "{case_dir}/bnech.py"]]},
        "variants": {"a": {}, "b": {}}}))
    with pytest.raises(BadInput) as err:
        runner.run_case(case_mod.load(path), tmp_path / "run")
    missing = tmp_path / "bnech.py"
    assert err.value.line() == (f"{path}: command: no such file {missing} ({{case_dir}}/bnech.py) (in matrix "
                                f"combination command=['python', '{missing}'])")
    assert not (tmp_path / "run").exists()


def test_aa_appends_the_baseline_again_and_refuses_a_clash():
    c = case_mod.validate(dict(GOOD, aa=True), "c")
    assert [v.name for v in c.run_variants()] == ["tp", "sp", "tp-aa"]
    assert c.variant("tp-aa").options == c.variant("tp").options and c.aa_name == "tp-aa"
    assert [v.name for v in c.variants] == ["tp", "sp"]  # the comparison's A and B are unchanged
    assert "A/A control" in refusal(dict(GOOD, aa=True, variants={"tp": {}, "tp-aa": {}}))


def test_resolved_case_round_trips():
    c = case_mod.validate(dict(GOOD, aa=True, devices=2, matrix={"seed": [1, 2]}), "c")
    again = case_mod.validate(yaml.safe_load(case_mod.to_yaml(c)), "c")
    assert case_mod.to_yaml(again) == case_mod.to_yaml(c)


def test_an_empty_matrix_is_a_case_without_one_and_the_resolved_case_leaves_it_out():
    """`matrix: {}` (or the key with its entries commented out) runs as one case: the run directory's case.yaml
    left it in, so running a run's own case again would read as a user's empty matrix (the note `perfkit run`
    prints for one)."""
    for given in ({}, None):
        c = case_mod.validate(dict(GOOD, matrix=given), "c")
        assert case_mod.empty_matrix(c) and case_mod.expand_matrix(c) == [({}, c)]
        resolved = yaml.safe_load(case_mod.to_yaml(c))
        assert "matrix" not in resolved and not case_mod.empty_matrix(case_mod.validate(resolved, "c"))
    assert not case_mod.empty_matrix(case_mod.validate(GOOD, "c"))
    assert not case_mod.empty_matrix(case_mod.validate(dict(GOOD, matrix={"seed": [1, 2]}), "c"))


def test_run_of_an_empty_matrix_says_it_runs_as_one_case_and_its_rerun_does_not(tmp_path, write_case):
    """A newcomer's `matrix: {}` (expecting a sweep) ran one case without a word."""
    path = write_case(sleeper_case(steps=2, sleep_ms=0, repeats={"min": 1, "max": 1}, matrix={}))
    res = perfkit("run", path, "--out", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    notes = [line for line in res.stderr.splitlines() if line.startswith("perfkit: note:")]
    assert notes == [f"perfkit: note: {path}: matrix: empty: the case runs once, as a case without a matrix (a "
                     "matrix maps dotted fields to lists of values, one run per combination: matrix: {seed: [0, 1]})"]
    assert not (tmp_path / "run/cells").exists()
    again = perfkit("run", tmp_path / "run/case.yaml", "--out", tmp_path / "again")
    assert again.returncode == 0 and "perfkit: note:" not in again.stderr, again.stderr


def test_mesh_sets_devices_and_must_match_them():
    cmd = {"name": "m", "command": ["prog"], "variants": {"a": {}, "b": {}}}
    assert case_mod.validate(dict(cmd, mesh={"dp": 2, "sp": 4}), "c").devices == 8
    assert refusal(dict(cmd, mesh={"dp": 2, "sp": 4}, devices=4)) == \
        "c.yaml: mesh: axes multiply to 8 devices, but devices is 4"
    assert refusal(dict(cmd, mesh={"dp": 0})).startswith("c.yaml: mesh: must map axis names to sizes >= 1")
    assert refusal(dict(GOOD, mesh={"dp": 2, "sp": 2})) == \
        "c.yaml: mesh: the bundled models run on a 1-D mesh (one axis larger than 1)"
    assert case_mod.validate(dict(GOOD, mesh={"x": 4}), "c").devices == 4


def test_model_variant_whose_plan_cannot_be_honoured_is_one_line_before_any_trial(write_case, tmp_path):
    case = {"name": "m", "model": {"name": "wan", "config": "tiny", "steps": 3}, "devices": 4,
            "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {"options": {"plan": "sp", "impl": "rung"}}}}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"perfkit: {tmp_path / 'case.yaml'}: variants.sp.options.impl: impl must be one of ['xla', 'ring', "
        "'pallas'], not 'rung'"]
    assert not (tmp_path / "run" / "trials.jsonl").exists()


@pytest.mark.parametrize("devices, pad, short", [(3, "shards", "4 heads, 64, 256"), (8, None, "4 heads")])
def test_a_device_count_the_model_does_not_split_over_is_one_line_before_any_trial(write_case, tmp_path, devices,
                                                                                    pad, short):
    """`devices: 3` with sp padded: the rows check passed and every trial crashed on jax's IndivisibleError (the
    tiny Wan's 64-wide weights over 3 devices); `devices: 8`, on a reshape (its 4 heads over 8). The tiny Wan's dim 64,
    FFN 256 and 4 heads all divide by 1, 2 and 4 alone (by hand)."""
    sp = {"plan": "sp", "impl": "ring", **({"pad": pad} if pad else {})}
    case = {"name": "m", "model": {"name": "wan", "config": "tiny", "steps": 3}, "devices": devices,
            "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {"options": sp}}}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"perfkit: {tmp_path / 'case.yaml'}: devices: variant tp: the wan model's dims sharded under plan tp ({short}) "
        f"do not divide by {devices}; use 1, 2 or 4"]
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_model_variant_option_misspelt_is_named_with_the_option_meant(write_case, tmp_path):
    """`plam: sp` was refused as `plan 'local' takes options ['split_rope'], not ['impl', 'plam']`: the default
    plan's options, with no word that `plam` is a typo of `plan`."""
    case = {"name": "m", "model": {"name": "wan", "config": "tiny", "steps": 3}, "devices": 2,
            "variants": {"xla": {"options": {"plam": "sp", "impl": "xla"}},
                         "ring": {"options": {"plan": "sp", "impl": "ring", "rope_fualt_block": 0}}}}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"perfkit: {tmp_path / 'case.yaml'}: variants.xla.options.plam: unknown option (did you mean 'plan'?)"]
    case["variants"]["xla"]["options"] = {"plan": "sp", "impl": "xla"}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.stderr.strip().splitlines() == [f"perfkit: {tmp_path / 'case.yaml'}: variants.ring.options."
                                               "rope_fualt_block: unknown option (did you mean 'rope_fault_block'?)"]
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_a_rope_fault_past_the_last_block_is_refused_before_any_trial(write_case, tmp_path):
    """`rope_fault_block: 2` on Wan's tiny config (blocks 0 and 1) planted no fault: the run passed and its taps
    said "No departure", a false all-clear for a user planting a defect."""
    case = {"name": "m", "model": {"name": "wan", "config": "tiny", "steps": 3}, "devices": 2,
            "variants": {"xla": {"options": {"plan": "sp", "impl": "xla"}},
                         "fault": {"options": {"plan": "sp", "impl": "xla", "rope_fault_block": 2}}}}
    res = perfkit("run", write_case(case), "--out", tmp_path / "run")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"perfkit: {tmp_path / 'case.yaml'}: variants.fault.options.rope_fault_block: rope_fault_block 2 is past "
        "the last block: wan tiny has blocks 0..1 (perfkit models lists them)"]
    assert not (tmp_path / "run" / "trials.jsonl").exists()


def test_a_script_missing_under_the_case_folder_is_one_line_before_any_trial(write_case, tmp_path):
    """A newcomer's case named `{case_dir}/mlp_missing.py`: all 6 trials ran and crashed alike ("can't open file ...
    [Errno 2]"), exit 3. Refused before any trial now; a file there that is no script (an output the command
    writes) is not."""
    from perfkit.run import ranks

    sleeper = sleeper_case(steps=3)
    sleeper["command"][1] = "{case_dir}/sleeper.py"
    (tmp_path / "sleeper.py").write_text((Path(__file__).parent / "programs" / "sleeper.py").read_text())
    sleeper["variants"]["b"] = {"args": ["--out", "{case_dir}/b.json"]}
    ranks.check_runnable(case_mod.load(write_case(sleeper)), str(tmp_path))  # b.json is for the command to write
    sleeper["command"][1] = "{case_dir}/mlp_missing.py"
    res = perfkit("run", write_case(sleeper), "--out", tmp_path / "run")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"perfkit: {tmp_path / 'case.yaml'}: command: no such file "
                                               f"{tmp_path / 'mlp_missing.py'} ({{case_dir}}/mlp_missing.py)"]
    assert not (tmp_path / "run" / "trials.jsonl").exists()
    sleeper["command"][1] = "{case_dir}/sleeper.py"
    sleeper["variants"]["b"] = {"args": ["{case_dir}/tools/extra.sh"]}
    with pytest.raises(BadInput) as err:
        ranks.check_runnable(case_mod.load(write_case(sleeper)), str(tmp_path))
    assert err.value.field == "variants.b.args" and err.value.reason.endswith("({case_dir}/tools/extra.sh)")


def test_a_script_missing_from_the_folder_perfkit_runs_in_is_one_line_before_any_trial(write_case, tmp_path):
    """`command: [python, bench.py]` (relative to the folder perfkit was started in, where commands run) was not
    looked for: every trial crashed (`can't open file`), exit 3. Refused before any trial now, from the folder the
    launch starts the ranks in; the same script found there runs, and one beside the case file is named."""
    work = tmp_path / "work"
    (work / "tools").mkdir(parents=True)
    sleeper = sleeper_case(steps=3, repeats={"min": 1, "max": 1})
    sleeper["command"][1] = "tools/bench.py"
    path = write_case(sleeper)
    res = perfkit("run", path, "--out", tmp_path / "run", cwd=work)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"perfkit: {path}: command: no such file tools/bench.py (looked for "
                                               f"from {work}, where commands run)"]
    assert not (tmp_path / "run").exists()
    (tmp_path / "bench.py").write_text("")
    sleeper["command"][1] = "bench.py"
    res = perfkit("run", write_case(sleeper), "--out", tmp_path / "run", cwd=work)
    assert res.stderr.strip().splitlines() == [f"perfkit: {path}: command: no such file bench.py (looked for from "
                                               f"{work}, where commands run; the case's folder holds one: name it "
                                               "{case_dir}/bench.py)"]
    (work / "tools" / "bench.py").write_text((Path(__file__).parent / "programs" / "sleeper.py").read_text())
    sleeper["command"][1] = "tools/bench.py"
    res = perfkit("run", write_case(sleeper), "--out", tmp_path / "run", cwd=work)
    assert res.returncode == 0, res.stderr


def test_every_bundled_case_names_programs_that_exist_from_any_folder(tmp_path, monkeypatch):
    """A bundled case runs from any folder (`perfkit run repro/rank_constant` from elsewhere crashed every trial:
    its script was named relative to the repository's root): the scripts a case names are found from its file."""
    from perfkit.cli import bundled_cases

    monkeypatch.chdir(tmp_path)
    named = []
    for name, path in bundled_cases().items():
        case = case_mod.load(path)
        argvs = [case.command or []] + [v.serve.argv for v in case.variants if v.serve]
        named += [(name, arg) for argv in argvs for arg in argv if arg.endswith(".py")]
    assert {n for n, _ in named} >= {"repro/rank_constant", "repro/added_collectives", "serve/test_server"}
    assert [(n, arg) for n, arg in named if not Path(arg).is_file()] == []


def test_a_bundled_case_whose_scripts_import_jax_is_refused_where_jax_is_missing(tmp_path, monkeypatch, write_case):
    """Without jax, model, kernel and torch cases were refused before any trial, but the repro cases (their scripts
    import jax) ran: every trial crashed with ModuleNotFoundError (exit 3), added_collectives' 8 first. Each is refused
    in the line a model case gets, before anything is written; a user's own script that imports jax is not (perfkit
    cannot know how it finds it)."""
    from click.testing import CliRunner

    from perfkit.cli import bundled_cases, cli
    from perfkit.common import extras
    from perfkit.run import ranks

    monkeypatch.setattr(extras.importlib.util, "find_spec", lambda name: None)  # jax (and torch) not installed
    cases = bundled_cases()
    need = ": needs the 'jax' extra: pip install 'perfkit[jax]'"
    for name in ("repro/added_collectives", "repro/rank_constant", "repro/skipped_collective"):
        with pytest.raises(BadInput) as refused:
            ranks.check_runnable(case_mod.load(cases[name]), str(tmp_path))
        assert str(refused.value) == f"{cases[name]}: command: {Path(name).name}.py{need}"
    res = CliRunner().invoke(cli, ["run", "repro/added_collectives", "--out", str(tmp_path / "run")])
    assert (res.exit_code, res.output) == (2, f"perfkit: {cases['repro/added_collectives']}: command: "
                                              f"added_collectives.py{need}\n")
    assert not (tmp_path / "run").exists()
    mine = tmp_path / "mine.py"
    mine.write_text("import jax\n")
    ranks.check_runnable(case_mod.load(write_case({"name": "mine", "command": ["python", str(mine)],
                                                   "variants": {"a": {}, "b": {}}})), str(tmp_path))


def test_a_model_dtype_the_models_do_not_take_is_refused_at_load():
    """`--set model.dtype=fp16` was taken, and each of the run's 6 trials crashed on it ("data type 'fp16' not
    understood"); it is refused before any trial, naming the types the models take."""
    assert refusal(dict(GOOD, model={"name": "wan", "dtype": "fp16"})) == \
        "c.yaml: model.dtype: 'fp16' is not one of float32, bfloat16, float16, float64"
    for dtype in ("float32", "bfloat16", "float16"):
        assert case_mod.validate(dict(GOOD, model={"name": "wan", "dtype": dtype}), "c.yaml").model["dtype"] == dtype


DTYPES_CASE = """\
name: dtypes
model: {name: wan, config: tiny, steps: 3}
warmup: 1
capture: {taps: [1], outputs: false, xla_dump: none}
variants:
  f32: {options: {plan: local}, model: {dtype: float32}}
  bf16: {options: {plan: local}, model: {dtype: bfloat16}}
"""


def test_a_variant_sets_its_model_dtype_and_its_ranks_build_the_model_in_it(tmp_path):
    """A user's A in float32 against B in bfloat16: ``model.dtype`` was the case's, one for every variant
    (``variants.<v>.model`` was an unknown key). Each variant's ranks now build its model in its own dtype: the taps
    its rank writes (``perfkit.record``, the dtype of the arrays the model computed) say so."""
    import json
    import subprocess

    from perfkit.run.plan import Trial
    from perfkit.run.ranks import rank_processes

    path = tmp_path / "dtypes.yaml"
    path.write_text(DTYPES_CASE)
    case = case_mod.load(str(path))
    assert [case.model_of(v)["dtype"] for v in case.variants] == ["float32", "bfloat16"]
    assert case.model["dtype"] == "float32" and case.model_of(case.variant("bf16"))["steps"] == 3
    again = case_mod.validate(yaml.safe_load(case_mod.to_yaml(case)), "run/case.yaml")  # a run's resolved case.yaml
    assert [again.model_of(v)["dtype"] for v in again.variants] == ["float32", "bfloat16"]
    over = case_mod.validate(case_mod.apply_overrides(case.raw, ["variants.f32.model.dtype=float16"], "c"), "c")
    assert [over.model_of(v)["dtype"] for v in over.variants] == ["float16", "bfloat16"]
    for index, v in enumerate(case.variants):
        trial_dir = tmp_path / "trials" / f"{index:02d}-{v.name}"
        (rank,) = rank_processes(case, v, Trial(index, v.name, 0), trial_dir, False)
        (trial_dir / "rank0").mkdir(parents=True)  # the launcher makes it before a rank starts
        done = subprocess.run(rank.argv, env=rank.env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        taps = [json.loads(x) for x in (trial_dir / "rank0" / "taps.jsonl").read_text().splitlines()]
        assert len(taps) == 6 and {t["dtype"] for t in taps} == {case.model_of(v)["dtype"]}, v.name


@pytest.mark.parametrize("variant,line", [
    ({"model": {"dtype": "bf16"}},
     "variants.sp.model.dtype: 'bf16' is not one of float32, bfloat16, float16, float64"),
    ({"model": {"config": "real"}}, "variants.sp.model.config: unknown key (valid: dtype)"),
])
def test_a_variant_model_field_it_cannot_set_is_refused_in_one_line(tmp_path, variant, line):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(dict(GOOD, variants={"tp": {"options": {"plan": "tp"}}, "sp": variant})))
    res = perfkit("run", path, "--out", tmp_path / "run", timeout=60)
    assert (res.returncode, res.stdout, res.stderr) == (2, "", f"perfkit: {path}: {line}\n")
    assert not (tmp_path / "run").exists()
    command = dict(sleeper_case(), variants={"a": {}, "b": {"model": {"dtype": "bfloat16"}}})
    assert refusal(command) == "c.yaml: variants.b.model: only a model case has per-variant model fields"
