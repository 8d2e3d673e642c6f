"""`perfkit --help` lists every command from perfkit.cli.COMMANDS without importing one: each line
there must say what the command's own help says, and the listing must stay import-free and fast."""

from __future__ import annotations

import subprocess
import sys

import pytest
from click.testing import CliRunner

from perfkit.cli import COMMANDS, cli

SHORT_HELP_LIMIT = 110


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_the_listed_help_is_the_commands_own(name):
    own = cli.get_command(None, name).get_short_help_str(limit=SHORT_HELP_LIMIT)
    assert COMMANDS[name][1] == own


def test_the_listing_names_every_command():
    out = CliRunner().invoke(cli, ["--help"]).output
    assert all(f"  {name}" in out for name in COMMANDS)


def test_top_level_help_imports_no_command():
    """No command module, and none of the heavy libraries they use, is imported to print the list."""
    probe = ("import sys; from perfkit.cli import main; sys.argv = ['perfkit', '--help']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "heavy = {'jax', 'numpy', 'pandas', 'torch', 'av', 'perfkit.run.runner', 'perfkit.trace.cli',"
             " 'perfkit.quality.cli', 'perfkit.hlo.cli', 'perfkit.cost.cli', 'importlib.metadata'}\n"
             "print(sorted(heavy & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
