"""`perfkit cost --model` says the size it costed: --rows and --guidance change every figure, so the header and
the --json step (``shape``) carry the grid, each stream's rows and the batch. Tiny Wan (``perfkit models``):
grid (4, 8, 8) of latent tokens, so 4 x 8 x 8 = 256 video rows, and 16 text rows; --rows 128 keeps a frame's
8 x 8 tokens, so 128 / 64 = 2 frames; guidance runs the conditional and unconditional halves as a batch of 2.
Lowered in this process on the suite's simulated CPU devices (tests/conftest.py), in seconds."""

import json

from click.testing import CliRunner

from perfkit.cli import cli

TINY = ["cost", "--model", "wan", "--config", "tiny", "--devices", "4"]


def paper(*args):
    res = CliRunner().invoke(cli, [*TINY, *args])
    assert res.exit_code == 0, res.output
    return res.stdout


def test_the_header_names_the_rows_asked_for():
    header = paper("--rows", "128").splitlines()[0]
    assert header == "wan tiny sp x4: step program wan step (blocks=40) at grid (2, 8, 8): video 128 rows, text 16 rows"


def test_json_records_the_shape():
    (block,) = json.loads(paper("--json"))["cost"].values()
    assert block["step"]["shape"] == {"batch": 1, "grid": [4, 8, 8], "rows": {"video": 256, "text": 16}}
    (block,) = json.loads(paper("--rows", "128", "--guidance", "5", "--json"))["cost"].values()
    assert block["step"]["shape"] == {"batch": 2, "grid": [2, 8, 8], "rows": {"video": 128, "text": 16}}
