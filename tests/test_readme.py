"""The README's "In a notebook" example and its summary-validation lines run as written, on a quickstart run
they name; its Commands table names every option of the commands it lists."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import click

from perfkit.cli import cli

REPO = Path(__file__).resolve().parent.parent


def notebook_example() -> str:
    text = (REPO / "README.md").read_text()
    section = text.split("## In a notebook", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    return code


def test_the_notebook_example_runs_on_a_quickstart_run(tmp_path, demo_run):
    # The session's quickstart run (one trial a side: the example reads tp's trial 00 and sp's trial 01), where the
    # README puts it, a copy: the example is run in that folder.
    shutil.copytree(demo_run, tmp_path / "reports/runs/quickstart")
    done = subprocess.run([sys.executable, "-c", notebook_example()], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # no note: the profiler's trace-viewer copy beside each XSpace is not a trace left out
    # The last line prints tp's and sp's median steps, the ratio, the mean compute and bit-identity.
    assert "tp" in done.stdout and "sp" in done.stdout and done.stdout.strip().endswith(("True", "False"))
    # The mean compute it prints is in ms, as the README says: less than sp's traced step as sp's own program timed
    # it (its metrics.jsonl), where the trace frame's picoseconds read 1e9 times that.
    compute_ms = float(done.stdout.split()[-2])
    metrics = tmp_path / "reports/runs/quickstart/trials/01-sp/rank0/metrics.jsonl"
    (traced_ms,) = [r["ms"] for r in map(json.loads, metrics.read_text().splitlines()) if r.get("traced")]
    assert 0 < compute_ms < traced_ms
    # "a CI script can validate a run's summary with `import ...` and `jsonschema.validate(...)`"
    text = " ".join((REPO / "README.md").read_text().split()).split("a CI script can validate", 1)[1]
    imports, validate = re.findall(r"`([^`]+)`", text)[:2]
    assert imports.startswith("import ") and validate.startswith("jsonschema.validate(")
    check = f"{imports}\npath = 'reports/runs/quickstart/summary.json'\n{validate}"
    done = subprocess.run([sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_readme_says_how_to_reach_perfkit_before_its_first_command():
    """`make demo` installs perfkit into .venv, which is not on PATH: a newcomer found every `perfkit ...` line
    failing with "command not found" until the README said so, before the first of them."""
    text = (REPO / "README.md").read_text()
    blocks = "".join(re.findall(r"```(?:sh|console)?\n(.*?)```", text, flags=re.S))
    first = re.search(r"(?m)^(\$ )?perfkit ", blocks)
    assert first is not None
    said = text.find("source .venv/bin/activate")
    assert 0 <= said < text.find(first.group(0) + blocks[first.end():].split("\n", 1)[0])


def test_the_commands_table_names_every_option_of_each_command_it_lists():
    """A newcomer reads the Commands table as the list of what each command takes: `trace diff` there showed
    two of its six options, `trace tail` none of `--hlo` / `--json`, and `--last-step`, which the traces section
    tells HTA users to pass, was in no row. Every option of a command (its long or its short form) is in one of
    the rows that name that command."""
    text = (REPO / "README.md").read_text()
    table = text.split("\n## Commands\n", 1)[1].split("\n\n", 1)[0]
    cells: dict[tuple[str, ...], str] = {}
    for row in table.splitlines():
        named = re.match(r"\| `perfkit ([a-z][a-z -]*?)(?= [A-Z\[-]|`)", row)
        if named:
            words = tuple(named.group(1).split())
            cells[words] = cells.get(words, "") + row.split(" | ", 1)[0]
    assert ("trace", "diff") in cells and ("check",) in cells
    missing = []
    for words, cell in cells.items():
        command = cli
        with click.Context(cli) as ctx:
            for word in words:
                command = command.get_command(ctx, word)
        for param in command.params:
            if isinstance(param, click.Option) and "--help" not in param.opts and "--version" not in param.opts:
                if not any(re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", cell) for o in param.opts):
                    missing.append(f"perfkit {' '.join(words)} {param.opts[-1]}")
    assert not missing, missing


def test_the_cost_section_names_the_pull_request_whose_step_times_it_compares():
    """"the step times the seed PR measured", "the seed's bench": a newcomer could not place the seed. The section
    names the public pull request, and its measured column holds that PR's step times (tests/models/test_cost_paper.py
    compares the bound with the same four)."""
    section = (REPO / "README.md").read_text().split("## Cost and roofline", 1)[1].split("\n## ", 1)[0]
    assert "seed" not in section
    assert "pull request #153 of the difflet project" in section
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ") and " ms |" in line]
    # that PR's table of v5e-4 step times, its defaults under SP: Wan, FLUX, HunyuanVideo, LTX-2 (ms a denoise step)
    assert [cells[2].strip() for cells in rows] == ["249.2 ms", "140.6 ms", "478.0 ms", "192.1 ms"]
