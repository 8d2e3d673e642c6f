"""Real CPU traces captured here: the collective-matmul ring and its all-gather reference on 4 simulated
devices, 3 annotated steps each, checks tied to the compiled programs; and a torch gloo Kineto trace."""

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from perfkit.run.trial import free_port
from perfkit.trace import breakdown, diff, events, tail

DEVICES, STEPS = 4, 3


def _capture(out_dir, impl: str) -> tuple[str, str]:
    """Run all_gather_matmul(impl) for STEPS annotated steps under jax.profiler; returns the trace folder
    and the compiled HLO text."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh
    from jax.sharding import PartitionSpec as P

    from perfkit.kernels.collective_matmul import all_gather_matmul

    mesh = Mesh(np.array(jax.devices()[:DEVICES]), ("x",))

    def body(x, w):
        return all_gather_matmul(x, [w], axis_name="x", impl=impl)[0]

    step = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("x", None), P()), out_specs=P("x", None)))
    x, w = jnp.ones((DEVICES * 64, 128), jnp.float32), jnp.ones((128, 128), jnp.float32)
    x = jax.device_put(x, jax.sharding.NamedSharding(mesh, P("x", None)))
    hlo = step.lower(x, w).compile().as_text()
    step(x, w).block_until_ready()
    jax.profiler.start_trace(str(out_dir))
    try:
        for s in range(STEPS):
            with jax.profiler.StepTraceAnnotation("step", step_num=s):
                step(x, w).block_until_ready()
    finally:
        jax.profiler.stop_trace()
    return str(out_dir), hlo


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    root = tmp_path_factory.mktemp("captured")
    return {impl: _capture(root / impl, impl) for impl in ("ring", "xla")}


def _count_opcode(hlo: str, opcode: str) -> int:
    return len(re.findall(rf"= \S+ {re.escape(opcode)}\(", hlo))


def test_ring_collective_permutes_per_step(captured):
    folder, hlo = captured["ring"]
    hops = 2 * (DEVICES - 1)  # bidirectional ring: two halves, n - 1 hops each
    assert _count_opcode(hlo, "collective-permute") == hops
    ev = events.load([folder])
    ops = events.device_ops(ev)
    assert ops["hlo_module"].nunique() == 1  # the inputs were placed before tracing: one program runs
    permutes = ops[ops["kind"] == "collective-permute"]
    assert (permutes["category"] == "ici").all()
    per_step = permutes.groupby("step").size()
    assert per_step.to_dict() == {s: hops * DEVICES for s in range(STEPS)}  # ring hops x devices
    assert permutes.groupby(["device", "step"]).size().eq(hops).all()
    assert ev.attrs["steps_from"] == ["step annotations"]


def test_ring_breakdown_adds_up(captured):
    rows = breakdown.breakdown(events.load([captured["ring"][0]]))
    assert sorted(zip(rows["device"], rows["step"])) == [(d, s) for d in range(DEVICES) for s in range(STEPS)]
    parts = rows[["compute_ps", "ici_ps", "dma_ps", "idle_ps"]]
    assert (parts.sum(axis=1) == rows["span_ps"]).all() and (parts >= 0).all().all()
    assert (rows["ici_ps"] > 0).all() and (rows["compute_ps"] > 0).all()
    assert (rows["dma_ps"] == 0).all()  # no async copies on CPU


def test_ring_against_all_gather_reference(captured):
    ring, xla = (events.load([captured[k][0]]) for k in ("ring", "xla"))
    assert _count_opcode(captured["xla"][1], "all-gather") == 1
    table = diff.diff(ring, xla, "kind").set_index("key")
    assert table.loc["collective-permute", "b_count"] == 0
    assert table.loc["all-gather", ["a_count", "b_count", "category"]].tolist() == [0, 1, "ici"]
    assert table.loc["collective-permute", "a_count"] == 2 * (DEVICES - 1)  # per chip and step


def test_tail_and_export_of_a_real_trace(captured, tmp_path):
    from perfkit.trace.export import write_perfetto

    ev = events.load([captured["ring"][0]])
    chips = tail.chips(ev)
    assert sorted(chips["device"]) == list(range(DEVICES))
    assert chips["last_end_ps"].is_monotonic_increasing
    assert write_perfetto(ev, tmp_path / "t.json") == len(ev)


def test_torch_cpu_kineto_trace(tmp_path):
    """No GPU events: CPU ops stand in for device ops; c10d ops and gloo's spans are the ICI."""
    import torch  # noqa: F401  (a declared test dependency: a broken torch fails here, it does not skip)

    port = free_port()
    out = tmp_path / "rank0.json"
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "programs" / "torch_gloo_trace.py"), str(out),
                           str(port)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])  # (a crash says why)
    ev = events.load([out])
    ops = events.device_ops(ev)
    kinds = ops.groupby("kind", observed=True)["category"].agg(set).to_dict()
    assert kinds["c10d allreduce_"] == {"ici"} and kinds["gloo all_reduce"] == {"ici"}
    assert kinds["aten::mm"] == {"compute"} and kinds["aten::gelu"] == {"compute"}
    assert ops.groupby("step").size().index.tolist() == [0, 1]
    assert (ops.loc[ops["kind"] == "gloo all_reduce"].groupby("step").size() == 1).all()
    rows = breakdown.breakdown(ev)
    assert rows["step"].tolist() == [0, 1] and (rows["ici_ps"] > 0).all()
    assert (rows[["compute_ps", "ici_ps", "dma_ps", "idle_ps"]].sum(axis=1) == rows["span_ps"]).all()


def test_worker_traced_step_is_found_by_its_index(tmp_path):
    """The bundled worker's capture: trace/step<i>/ holds a profile whose step marker is numbered i."""
    import jax
    import jax.numpy as jnp

    from perfkit.record import jax_trace

    f = jax.jit(lambda x: (x @ x).sum())
    x = jnp.ones((64, 64))
    f(x).block_until_ready()
    with jax_trace(str(tmp_path), 5):
        f(x).block_until_ready()
    with jax_trace(None, 6):  # not a traced step: nothing written
        f(x).block_until_ready()
    assert [p.name for p in tmp_path.iterdir()] == ["step5"]
    ev = events.load([tmp_path])
    assert ev.loc[ev["category"] == "step", "step"].tolist() == [5]
    ops = events.device_ops(ev)
    assert len(ops) and (ops["step"] == 5).all()
