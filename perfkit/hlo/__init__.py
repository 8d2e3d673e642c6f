"""XLA HLO text dumps, stdlib only (``perfkit hlo-diff`` never imports jax, torch or pandas).

``parse`` reads ``*after_optimizations.txt``; ``fingerprint`` gives name-free canonical forms; ``buffers``
reads buffer assignments (temp size, collective receive offsets); ``dumps`` finds dump folders;
``renaming`` keys files equal up to naming; ``load`` parses each distinct program once; ``diff`` compares
ranks (``compare_ranks``) or variants (``compare_ab``); ``program_cost`` counts a program's FLOPs, bytes
and collectives; ``render`` prints the results; ``consistency`` compares the ranks of the paths given
(``perfkit hlo-diff``'s rank mode, the command being ``perfkit.cli.hlo``) and is the runner's per-variant
check.

In a notebook::

    from perfkit import hlo
    r = hlo.diff_ranks(["reports/runs/x/trials/00-a"])  # as `hlo-diff --json`: consistent, modules, checks
    hlo.diff_ab(Path("a/xla_dump"), Path("b/xla_dump"))  # B's programs against A's

(``perfkit.cost`` gives what each program costs.)
"""

from perfkit.common.lazy import exports

__all__ = ["diff_ranks", "diff_ab"]
__getattr__, __dir__ = exports(__name__, {"diff_ranks": "consistency:check_all", "diff_ab": "diff:compare_ab"})
