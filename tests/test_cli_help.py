"""`perfkit --help` lists every command from perfkit.cli.COMMANDS without importing one: each line
there must say what the command's own help says, and the listing must stay import-free and fast."""

from __future__ import annotations

import json
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


HEAVY = {"jax", "numpy", "pandas", "torch", "av", "yaml", "matplotlib", "google.protobuf", "skimage"}
COMMAND_MODULES = {"perfkit.run.runner", "perfkit.cli.trace", "perfkit.cli.quality", "perfkit.cli.hlo",
                   "perfkit.cli.cost", "importlib.metadata"}


def _imported_for_help(argv: list[str], watched: set[str]) -> list[str]:
    """Which of ``watched`` a fresh process has imported once ``perfkit ARGV --help`` has printed."""
    probe = ("import json, sys; from perfkit.cli import main\n"
             f"sys.argv = ['perfkit', *{argv!r}, '--help']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             f"print(json.dumps(sorted(set({sorted(watched)!r}) & set(sys.modules))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_top_level_help_imports_no_command():
    """No command module, and none of the heavy libraries they use, is imported to print the list."""
    assert _imported_for_help([], HEAVY | COMMAND_MODULES) == []


TRACE_COMMANDS = [["trace", name] for name in ("breakdown", "diff", "attribution", "tail", "collectives", "export")]


@pytest.mark.parametrize("argv", [[name] for name in sorted(COMMANDS)] + TRACE_COMMANDS, ids=" ".join)
def test_each_commands_help_imports_no_heavy_library(argv):
    """`perfkit CMD --help` is click and the command's own module: the libraries its work needs (pandas
    alone is 0.3 s) load only when it runs, so every help prints in well under 0.3 s."""
    assert _imported_for_help(argv, HEAVY) == []


@pytest.mark.parametrize("argv, said", [
    (["trace", "breakdown", "--bogus", "x"], "perfkit trace breakdown: No such option '--bogus'."),
    (["quality"], "perfkit quality: Missing argument 'A'."),
    (["--bogus"], "perfkit: No such option '--bogus'."),
    (["nosuch"], "perfkit: No such command 'nosuch'."),
    # click raises an option's missing value without a context: the subcommand is named all the same
    (["check", "run", "--baseline"], "perfkit check: Option '--baseline' requires an argument."),
    (["trace", "diff", "a", "b", "--by"], "perfkit trace diff: Option '--by' requires an argument."),
], ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_a_command_line_click_cannot_parse_is_one_line(argv, said):
    """As any bad input: exit 2 and one line saying the command, what is wrong and where its help is."""
    done = CliRunner().invoke(cli, argv, prog_name="perfkit")
    command = said.split(":")[0]
    assert done.exit_code == 2
    assert done.stderr.splitlines() == [f"{said} See '{command} --help'."]


def test_a_bare_group_still_shows_its_help():
    done = CliRunner().invoke(cli, ["trace"], prog_name="perfkit")
    assert done.output.startswith("Usage: perfkit trace [OPTIONS] COMMAND")


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize("argv, target", [
    (["cases"], "perfkit.cli.bundled_cases"),
    (["check", "run", "--baseline", "b.json"], "perfkit.rundata.rundir.read_summary"),
    (["trace", "breakdown", "t.xplane.pb"], "perfkit.trace.shards.breakdown_traces"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_ctrl_c_on_any_command_exits_as_stopped(argv, target, monkeypatch):
    """Ctrl-C while a command runs: one line and the contract's "stopped" (3), as `perfkit run` gives; never
    click's `Aborted!` and 1, which a CI script reads as a failed check (`perfkit check`'s regression)."""
    monkeypatch.setattr(target, _interrupted)
    done = CliRunner().invoke(cli, argv, prog_name="perfkit")
    assert (done.exit_code, done.stderr) == (3, "perfkit: stopped\n")


def test_a_ctrl_c_while_the_command_line_loads_is_a_stop_not_a_failed_check():
    """A newcomer's: SIGINT in the first tens of milliseconds of ``perfkit check`` (click and perfkit.cli still
    loading) gave a KeyboardInterrupt traceback and exit 1, the code of a failed check. The console script
    catches it: one line, exit 3. Here the load itself raises it, as a Ctrl-C there would."""
    interrupt = ("import sys\n"
                 "class Interrupt:\n"
                 "    def find_spec(self, name, path=None, target=None):\n"
                 "        if name == 'perfkit.cli':\n"
                 "            raise KeyboardInterrupt\n"
                 "sys.meta_path.insert(0, Interrupt())\n"
                 "from perfkit.console import main\n"
                 "main()\n")
    res = subprocess.run([sys.executable, "-c", interrupt, "check"], capture_output=True, text=True, timeout=60)
    assert (res.returncode, res.stderr) == (3, "perfkit: stopped\n")
