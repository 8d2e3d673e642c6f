"""The bundled models costed on paper at their published sizes (``perfkit cost --model``), against FLOPs
counted by hand and against the step times measured on a v5e-4 in pull request #153 of the difflet project,
"TPU sequence parallelism: Pallas collective-matmul kernels, LTX-2 /
HunyuanVideo SP, Wan padding + split RoPE".

Sizes are that PR's: Wan 2.1 14B at 480x832x9
(4680 video rows, 512 text tokens), FLUX.1-dev at 1024x1024 (4096 image + 512 text rows), HunyuanVideo at
320x512x61 (10240 video + 256 text rows), LTX-2 at 480x704x49 (2310 video rows, padded to 2312 at 4
devices; 51 audio rows, 1024 text tokens). No CFG: that PR's bench ran LTX-2 at guidance 1.0 and none of
the others with a batch of 2. Each is lowered at 1 and 2 blocks of each kind and extrapolated to the
published block counts (perfkit.cost.paper), in seconds on a CPU.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from perfkit import models
from perfkit.cost.chips import chip
from perfkit.cost.paper import paper_cost, with_rows
from perfkit.cost.roofline import roofline
from perfkit.models.plans import make_plan

DEVICES = 4
# That PR's v5e-4 step times under SP, with its defaults (ms a denoise step).
SEED_MS = {"wan": 249.2, "flux": 140.6, "hunyuan": 478.0, "ltx2": 192.1}


def linear(rows, params_per_row):
    return 2 * rows * params_per_row


def attention(rows, keys, width):
    return 4 * rows * keys * width


def hand_wan():
    d, f, text, rows, blocks = 5120, 13824, 512, 4680, 40
    per_block = (linear(rows, 4 * d * d + 2 * d * d + 2 * d * f)   # self q k v o, cross q o, FFN
                 + linear(text, 2 * d * d)                          # cross k v over the text
                 + attention(rows, rows, d) + attention(rows, text, d))
    return blocks * per_block


def hand_mmdit(rows, blocks):
    # every token of every block (dual: its stream's weights; single: the joined one's) meets 4 d^2 of
    # attention projections and 2 d ffn of MLP; one attention over all rows.
    d, f = 3072, 12288
    return blocks * (linear(rows, 4 * d * d + 2 * d * f) + attention(rows, rows, d))


def hand_ltx2():
    dv, fv, da, fa = 4096, 16384, 2048, 8192
    video, audio, text, blocks = 2310, 51, 1024, 48
    per_block = (linear(video, 4 * dv * dv + 2 * dv * dv + 2 * dv * fv   # self, text cross q o, FFN
                        + 2 * dv * da + 2 * dv * da)                       # a2v q o, v2a k v
                 + linear(text, 2 * dv * dv + 2 * da * da)                 # text k v, both streams
                 + linear(audio, 4 * da * da + 2 * da * da + 2 * da * fa + 2 * da * da + 2 * da * da)
                 + attention(video, video, dv) + attention(video, text, dv) + attention(video, audio, da)
                 + attention(audio, audio, da) + attention(audio, text, da) + attention(audio, video, da))
    return blocks * per_block


HAND = {"wan": hand_wan(), "flux": hand_mmdit(4096 + 512, 19 + 38), "hunyuan": hand_mmdit(10240 + 256, 20 + 40),
        "ltx2": hand_ltx2()}
SETUP = {"wan": (4680, {}), "flux": (None, {}), "hunyuan": (None, {}), "ltx2": (None, {"pad": "shards"})}


def _paper(folder: Path) -> None:
    out = {}
    for name, (rows, options) in SETUP.items():
        family = models.get(name)
        cfg = family.whole("real")
        if rows is not None:
            cfg = with_rows(cfg, rows)
        out[name] = paper_cost(name, cfg, make_plan("sp", **options), DEVICES)
    (folder / "paper.json").write_text(json.dumps(out))


@pytest.fixture(scope="module")
def paper(built_once):
    return json.loads((built_once("paper_cost", _paper) / "paper.json").read_text())


@pytest.mark.parametrize("name", SEED_MS)
def test_flops_per_step_match_the_hand_count(paper, name):
    # perfkit's figure is one device's program: the step's FLOPs are DEVICES times it (sp splits every dot).
    # The issue asks for 10%; measured 0.02% (hunyuan) to 0.43% (ltx2: pad rows, embeddings, adaLN), so
    # it is held to 1%, where one block more or less (1/40 of Wan, 1/48 of LTX-2) fails.
    assert DEVICES * paper[name]["dot_flops"] == pytest.approx(HAND[name], rel=0.01)


def test_wan_hand_check_of_the_issue(paper):
    # "about 1.3e14 FLOPs a step, so about 170 ms of v5e-4 compute at 197 TFLOP/s a chip"
    assert DEVICES * paper["wan"]["dot_flops"] == pytest.approx(1.3e14, rel=0.05)
    assert roofline(paper["wan"], chip("v5e"))["compute_ms"] == pytest.approx(170, rel=0.05)


@pytest.mark.parametrize("name", SEED_MS)
def test_seed_step_times_lie_above_the_bound(paper, name):
    r = roofline(paper[name], chip("v5e"), measured_ms=SEED_MS[name])
    assert r["bound_ms"] < SEED_MS[name], r
    # and the bound is no empty figure: within 3x of the measured step (README states each ratio)
    assert r["measured_over_bound"] < 3, r


def test_whole_models_have_published_block_counts():
    assert models.get("wan").whole("real").blocks == 40
    flux = models.get("flux").whole("real")
    assert (flux.double_blocks, flux.single_blocks) == (19, 38)
    hunyuan = models.get("hunyuan").whole("real")
    assert (hunyuan.double_blocks, hunyuan.single_blocks) == (20, 40)
    assert models.get("ltx2").whole("real").blocks == 48
    assert models.get("wan").config("real").blocks == 2  # the runnable real config keeps its 2 blocks


def test_cost_command_on_paper():
    """The issue's command line, in a fresh process (it sets up its own 4 simulated devices)."""
    args = ["cost", "--model", "wan", "--config", "real", "--rows", "4680", "--plan", "sp", "--devices", "4",
            "--chip", "v5e"]
    env = {"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu"}
    repo = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, "-m", "perfkit.cli", *args, "--json"], capture_output=True, text=True,
                         cwd=repo, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    (label,) = out["roofline"]
    r = out["roofline"][label]
    assert r["binding"] == "compute" and r["bound_ms"] == pytest.approx(170, rel=0.05)
    assert out["cost"][label]["step"]["blocks"] == {"blocks": 40}
