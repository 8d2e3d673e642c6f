"""A torch.profiler Kineto trace of 2 annotated steps of matmul + GELU + all_reduce on a 1-rank gloo group.

argv: out.json port
"""

import os
import sys

import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, record_function

os.environ.update(MASTER_ADDR="localhost", MASTER_PORT=sys.argv[2])
dist.init_process_group("gloo", rank=0, world_size=1)
x, w = torch.randn(128, 128), torch.randn(128, 128)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for i in range(2):
        with record_function(f"ProfilerStep#{i}"):
            dist.all_reduce(torch.nn.functional.gelu(x @ w))
prof.export_chrome_trace(sys.argv[1])
dist.destroy_process_group()
# Ends without the interpreter's teardown: a gloo worker thread can still be freeing the last all_reduce's work,
# whose tensors need the GIL, while the interpreter finalizes; the thread is then unwound inside a noexcept
# destructor and the process aborts ("terminate called without an active exception", a core's backtrace showed
# it: Py_FinalizeEx beside ProcessGroupGloo::runLoop in ~AsyncAllreduceWork). The trace is written by now.
os._exit(0)
