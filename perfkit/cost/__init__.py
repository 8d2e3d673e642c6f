"""What a program costs and how fast a chip could run it.

``perfkit.hlo.cost`` counts one compiled program (HLO text); here: ``chips`` (vendor figures),
``roofline`` (lower bounds per step), ``programs`` (the programs of a dump folder or a run, and the
step), ``paper`` (a bundled model lowered at any size, no weights, no run; needs jax) and ``cli``
(``perfkit cost``). Everything but ``paper`` is stdlib only.
"""
