"""A step program whose remote copies run as host callbacks (a Pallas TPU kernel in interpret mode, off TPU): its
time read as compute and "Collectives of pallas: none", true of what ran but read as a kernel making no remote
copies. The report says what ran instead. The program is written by hand: two io_callback custom-calls, as jax
lowers them on CPU, and a dot."""

from perfkit.cost.programs import cost_block
from perfkit.report import cost
from perfkit.report.markdown import _collectives

STEP = """HloModule jit_kernel_step, is_scheduled=true

ENTRY main {
  x = f32[8,16]{1,0} parameter(0)
  w = f32[16,4]{1,0} parameter(1)
  i = s32[] constant(0)
  a = (s32[]) custom-call(i, i), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true
  b = (s32[]) custom-call(i, i), custom_call_target="xla_ffi_python_cpu_callback", custom_call_has_side_effect=true
  ROOT d = f32[8,4]{1,0} dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def test_a_step_of_host_callbacks_says_what_ran_instead_of_collectives(tmp_path):
    folder = tmp_path / "xla_dump"
    folder.mkdir()
    (folder / "module_0004.jit_kernel_step.cpu_after_optimizations.txt").write_text(STEP)
    block = cost_block(folder, None)
    block.pop("roofline")
    assert cost.host_callbacks(block["step"]) == 2
    lines = cost.section({"baseline": "pallas", "cost": {"pallas": block}})
    assert ("pallas's step program runs 2 host callbacks a step and no collective: Python called on the host from "
            "inside the program; a Pallas TPU kernel run in interpret mode (off TPU) runs its DMAs, remote copies "
            "included, and its semaphores as such callbacks, so its remote copies are no collectives here and their "
            "time is compute.") in lines
    rows = _collectives({"pallas": {"kinds": [], "steps": []}, "xla": {"kinds": [], "steps": []}}, None,
                        {"pallas": 2, "xla": 0})
    assert rows == ["", "Collectives of pallas: none in its traces; its step program runs 2 host callbacks a step "
                    "(Cost): a Pallas TPU kernel run in interpret mode (off TPU) runs its DMAs, remote copies included, "
                    "and its semaphores as such callbacks, so its remote copies are no collectives here and their time "
                    "is compute", "", "Collectives of xla: none in its traces"]
