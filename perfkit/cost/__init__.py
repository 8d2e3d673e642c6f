"""What a program costs and how fast a chip could run it.

``perfkit.hlo.program_cost`` counts one compiled program (HLO text); here: ``chips`` (vendor figures),
``roofline`` (lower bounds per step), ``programs`` (the programs of a dump folder or a run, and the
step), ``paper`` (a bundled model lowered at any size, no weights, no run; needs jax); the command
``perfkit cost`` is ``perfkit.cli.cost``. Everything but ``paper`` is stdlib only.

In a notebook::

    from perfkit import cost
    programs = cost.folder_costs(Path("trial/rank0/xla_dump"))  # each program: FLOPs, HBM bytes, collectives, memory
    step = cost.step_cost(programs).as_json()                  # the program one denoise step runs
    cost.step_roofline(step, cost.chip("v5e"))                 # compute / memory / interconnect bounds, binding
"""

from perfkit.common.lazy import exports

__all__ = ["folder_costs", "step_cost", "chip", "step_roofline", "paper_cost"]
__getattr__, __dir__ = exports(__name__, {"folder_costs": "programs", "step_cost": "programs", "chip": "chips",
                                          "step_roofline": "roofline:roofline", "paper_cost": "paper"})
