"""``perfkit models``: every family with its configs and streams, every plan with its options."""

import dataclasses
import json

import pytest
from click.testing import CliRunner

from perfkit import models
from perfkit.errors import BadInput
from perfkit.models.listing import block_order, block_text
from perfkit.cli import cli
from perfkit.models.plans import PLANS


def _invoke(*args):
    result = CliRunner().invoke(cli, ["models", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_json_lists_every_family_config_stream_and_plan():
    cat = json.loads(_invoke("--json"))
    assert [f["name"] for f in cat["families"]] == models.names() == ["flux", "hunyuan", "ltx2", "wan"]
    for fam in cat["families"]:
        family = models.get(fam["name"])
        assert set(fam["configs"]) == {"tiny", "real"}
        for name, cfg in fam["configs"].items():
            assert cfg["fields"]["dim"] == family.configs[name].dim
            assert list(cfg["streams"]) == list(family.streams(family.configs[name]))
    ltx = next(f for f in cat["families"] if f["name"] == "ltx2")["configs"]["real"]["streams"]
    assert ltx["video"] == {"rows": 2310, "channels": 128, "denoised": True, "sequence": True}
    assert ltx["audio"]["sequence"] is False and ltx["text"]["denoised"] is False
    plans = {p["name"]: p["options"] for p in cat["plans"]}
    assert list(plans) == list(PLANS) == ["local", "tp", "sp", "ulysses"]
    assert plans["sp"] == {"split_rope": False, "pad": None, "rope_fault_block": None, "impl": "ring",
                           "bidirectional": True, "assemble": "dus"}
    assert plans["ulysses"] == {"split_rope": False, "pad": None, "rope_fault_block": None}


def test_real_configs_carry_the_published_block_dimensions():
    """The numbers the issue names: Wan 2.1 14B (dim 5120, 40 heads, FFN 13824), FLUX.1-dev (3072, 24)."""
    wan, flux = models.get("wan").configs["real"], models.get("flux").configs["real"]
    assert (wan.dim, wan.heads, wan.ffn) == (5120, 40, 13824)
    assert (flux.dim, flux.heads, flux.head_dim) == (3072, 24, 128)


def test_text_names_families_configs_and_plans():
    out = _invoke()
    for name in models.names():
        assert f"\n  {name} " in out
    assert "joint = video | text (contiguous)" in out and "joint = text | image (interleaved)" in out
    assert "audio 51x128 (denoised, whole)" in out
    for plan in PLANS:
        assert f"\n  {plan} " in out


def test_a_configs_blocks_and_the_published_counts_are_told_apart():
    """A case runs wan real at 2 blocks; `perfkit cost --model` costs Wan 2.1 14B's 40: both are listed."""
    out = _invoke()
    wan = out[out.index("\n  wan "):]
    assert "`perfkit cost --model` costs the published model's: blocks 40" in wan
    assert "real   dim 5120" in wan and "blocks 2\n" in wan
    cat = json.loads(_invoke("--json"))
    assert next(f for f in cat["families"] if f["name"] == "flux")["published_blocks"] == \
        {"double_blocks": 19, "single_blocks": 38}


def test_options_of_a_few_names_list_them():
    """An engineer setting padding on for hunyuan's SP plan read `pad=None` in `perfkit models` and had to open
    models/plans.py to learn the values it takes; `impl`'s stood in the plan's description, `assemble`'s nowhere.
    Each option that takes one of a few names lists them, as make_plan takes them."""
    cat = json.loads(_invoke("--json"))
    choices = {p["name"]: p["choices"] for p in cat["plans"]}
    assert choices["sp"] == {"pad": ["shards", "halves", "tiles", "lanes"], "impl": ["xla", "ring", "pallas"],
                             "assemble": ["dus", "concat"]}
    assert choices["ulysses"] == {"pad": ["shards", "halves", "tiles", "lanes"]} and choices["tp"] == {}
    sp = next(line for line in _invoke().splitlines() if line.startswith("  sp "))
    assert sp.endswith("options: split_rope=False, pad=None (shards|halves|tiles|lanes), rope_fault_block=None, "
                       "impl=ring (xla|ring|pallas), bidirectional=True, assemble=dus (dus|concat)")
    from perfkit.models.plans import make_plan

    for name, options in choices.items():
        for option, values in options.items():
            for value in values:
                make_plan(name, **{option: value})  # each listed value is one the plan takes


def test_each_config_says_which_block_each_rope_fault_block_index_hits():
    """`rope_fault_block` counts FLUX's and HunyuanVideo's double-stream blocks, then their single-stream ones; the
    listing said nothing of it. Hand-counted: FLUX at 2 double and 4 single blocks runs double0 double1 (0, 1),
    then single0 .. single3 (2 .. 5); Wan's 2 blocks are 0 and 1."""
    flux = models.get("flux")
    cfg = dataclasses.replace(flux.configs["tiny"], double_blocks=2, single_blocks=4)
    names = block_order(flux, cfg)
    assert names == ["double0", "double1", "single0", "single1", "single2", "single3"]
    assert block_text(names) == "double0..double1 then single0..single3 counted 0..5"
    wan = models.get("wan")
    assert block_order(wan, wan.configs["tiny"]) == ["block0", "block1"]
    out = _invoke()
    hunyuan = out[out.index("\n  hunyuan "):out.index("\n  ltx2 ")]
    assert "    real   dim 3072" in hunyuan
    assert ("blocks (rope_fault_block's index): double0..double1 then single0..single1 counted 0..3"
            in hunyuan[hunyuan.index("    real "):])
    assert "blocks (rope_fault_block's index): double0 then single0 counted 0..1" in hunyuan
    cat = json.loads(_invoke("--json"))
    assert next(f for f in cat["families"] if f["name"] == "ltx2")["configs"]["tiny"]["blocks"] == ["block0", "block1"]


def test_rope_fault_block_takes_every_block_the_forward_numbers_and_no_more():
    """The bound `plan_for` puts on `rope_fault_block`, held to the blocks the forward itself numbers (traced,
    `block_order`) for every family's tiny config: the last one is taken, one past it refused."""
    for name in models.names():
        cfg = models.get(name).configs["tiny"]
        count = len(block_order(models.get(name), cfg))
        models.plan_for(name, "tiny", {"plan": "ulysses", "rope_fault_block": count - 1}, 1)
        with pytest.raises(BadInput, match=f"rope_fault_block {count} is past the last block: {name} tiny has "
                                           f"blocks 0..{count - 1}"):
            models.plan_for(name, "tiny", {"plan": "ulysses", "rope_fault_block": count}, 1)


def test_an_option_set_to_null_is_absent():
    """`--set variants.sp.options.plan=ulysses --set variants.sp.options.impl=null` was refused ("plan 'ulysses'
    takes options [...], not ['impl']"): a variant could not move to a plan without the case's options, though the
    repro case's comment says to drop an option with `=null`."""
    plan = models.plan_for("wan", "tiny", {"plan": "ulysses", "impl": None, "rope_fault_block": None}, 2)
    assert plan.name == "ulysses" and plan.rope_fault_block is None
    assert models.plan_for("wan", "tiny", {"plan": None}, 1).name == "local"
