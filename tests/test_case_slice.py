"""Case schema: one-line refusals with file and key, overrides, defaults."""

import subprocess
import sys

import pytest
import yaml

from perfkit import case as case_mod
from perfkit.errors import BadInput

GOOD = {"name": "x", "model": {"name": "wan"}, "variants": {"tp": {"options": {"plan": "tp"}}, "sp": {}}}


def test_unknown_key_suggests_nearest(tmp_path):
    raw = dict(GOOD, repeets={"min": 2})
    with pytest.raises(BadInput) as err:
        case_mod.validate(raw, "c.yaml")
    assert err.value.line() == "c.yaml: repeets: unknown key (did you mean 'repeats'?)"


def test_wrong_type_names_field():
    with pytest.raises(BadInput, match=r"c.yaml: devices: must be an integer"):
        case_mod.validate(dict(GOOD, devices="four"), "c.yaml")
    with pytest.raises(BadInput, match=r"model.steps: must be an integer, got bool"):
        case_mod.validate(dict(GOOD, model={"name": "wan", "steps": True}), "c.yaml")


def test_set_overrides_and_defaults():
    c = case_mod.validate(case_mod.apply_overrides(GOOD, ["devices=4", "model.config=real", "capture.trace=[3]"], "c"), "c")
    assert c.devices == 4 and c.model["config"] == "real" and c.capture["trace"] == [3]
    assert c.warmup == 2 and c.repeats == {"min": 3, "max": 8} and c.variants[0].name == "tp"


def test_cli_bad_case_is_one_line_exit_2(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(dict(GOOD, ordr="abba")))
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", "run", str(path)], capture_output=True, text=True)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"perfkit: {path}: ordr: unknown key (did you mean 'order'?)"]
