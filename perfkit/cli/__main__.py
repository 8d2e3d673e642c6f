"""``python -m perfkit.cli``: the ``perfkit`` command (tests and CI start it this way, in this venv)."""

from perfkit.cli import main

main()
