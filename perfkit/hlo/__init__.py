"""XLA HLO text dumps, stdlib only (``perfkit hlo-diff`` never imports jax, torch or pandas).

``parse`` reads ``*after_optimizations.txt``; ``fingerprint`` gives name-free canonical forms; ``buffers``
reads buffer assignments (temp size, collective receive offsets); ``dumps`` finds dump folders;
``diff`` compares ranks (``compare_ranks``) or variants (``compare_ab``); ``render`` prints the results;
``check`` is the runner's per-variant check; ``cli`` is the ``perfkit hlo-diff`` command.
"""
