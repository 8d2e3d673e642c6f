"""perfkit.adapters.torch_tpu with fakes (torch_tpu has no CPU mode): op names by source hash, the refusal of
one name with two codes, the profiler config it builds, and the XLA / libtpu flags."""

import functools
import importlib.util
import subprocess
import sys
import types

import pytest

from perfkit.adapters import torch_tpu


class FakeJaxOp:
    """Stands in for torch.tpu.pallas.jax_op: records each registration, returns a tagged callable."""

    def __init__(self):
        self.calls = []

    def __call__(self, name, fn, **kwargs):
        self.calls.append((name, fn, kwargs))
        return lambda *args: (name, fn(*args))


def _kernel_module(tmp_path, name, body):
    """A module file holding ``def kernel(x): return <body>`` (getsource needs a real file)."""
    path = tmp_path / f"{name}.py"
    path.write_text(f"def kernel(x):\n    return {body}\n")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_op_name_carries_the_source_hash(tmp_path):
    v1 = _kernel_module(tmp_path, "k_v1", "x + 1")
    fake = FakeJaxOp()
    reg = torch_tpu.KernelRegistry(jax_op=fake)
    op = reg.register("perfkit::ring_matmul", v1.kernel, donate_argnums=(0,))
    digest = torch_tpu.source_hash([v1.kernel])
    assert len(digest) == torch_tpu.HASH_CHARS
    assert fake.calls == [(f"perfkit::ring_matmul_{digest}", v1.kernel, {"donate_argnums": (0,)})]
    assert op(2) == (f"perfkit::ring_matmul_{digest}", 3)
    # The same code again: no second registration, the same op back.
    assert reg.register("perfkit::ring_matmul", v1.kernel) is op and len(fake.calls) == 1
    assert [k.op_name for k in reg.registered()] == [f"perfkit::ring_matmul_{digest}"]


def test_changed_code_gets_a_new_name_and_is_refused_under_the_old_one(tmp_path):
    v1 = _kernel_module(tmp_path, "k_a", "x + 1")
    v2 = _kernel_module(tmp_path, "k_b", "x + 2")  # the kernel edited between two runs
    first, second = FakeJaxOp(), FakeJaxOp()
    torch_tpu.KernelRegistry(jax_op=first).register("perfkit::op", v1.kernel)
    torch_tpu.KernelRegistry(jax_op=second).register("perfkit::op", v2.kernel)  # a later process
    assert first.calls[0][0] != second.calls[0][0]  # torch_tpu's name cache cannot serve stale code

    reg = torch_tpu.KernelRegistry(jax_op=FakeJaxOp())
    reg.register("perfkit::op", v1.kernel)
    with pytest.raises(torch_tpu.KernelConflict, match="op perfkit::op is already registered with other code"):
        reg.register("perfkit::op", v2.kernel)


def test_hash_covers_extra_sources_options_and_bound_arguments(tmp_path):
    body_a, body_b = _kernel_module(tmp_path, "body_a", "x"), _kernel_module(tmp_path, "body_b", "-x")
    base = torch_tpu.source_hash([torch_tpu.source_hash])
    assert torch_tpu.source_hash([torch_tpu.source_hash, body_a]) != torch_tpu.source_hash([torch_tpu.source_hash, body_b])
    assert torch_tpu.source_hash([torch_tpu.source_hash], {"assemble": "dus"}) != \
        torch_tpu.source_hash([torch_tpu.source_hash], {"assemble": "concat"})
    assert torch_tpu.source_hash([functools.partial(torch_tpu.source_hash, options={"a": 1})]) not in (
        base, torch_tpu.source_hash([functools.partial(torch_tpu.source_hash, options={"a": 2})]))


def test_refusals():
    reg = torch_tpu.KernelRegistry(jax_op=FakeJaxOp())
    with pytest.raises(ValueError, match="must be 'namespace::name'"):
        reg.register("ring_matmul", torch_tpu.source_hash)
    with pytest.raises(ValueError, match="no source text"):
        torch_tpu.source_hash([len])  # a builtin: nothing to hash, so no safe name


def test_profiler_config_writes_xspace_under_the_trace_dir(tmp_path):
    made = []
    fake_profiler = types.SimpleNamespace(TpuProfilerConfig=lambda **kw: made.append(kw) or "config")
    levels = torch_tpu.ProfileLevels(host_tracer_level=3)
    assert torch_tpu.profiler_config(tmp_path, levels, tpu_profiler=fake_profiler) == "config"
    assert made == [{"run_dir": tmp_path, "host_tracer_level": 3, "device_tracer_level": 1, "python_tracer_level": 0}]


def test_xla_env_adds_dump_flags_and_keeps_the_rest(tmp_path):
    env = {"XLA_FLAGS": "--xla_dump_to=/old --xla_force_host_platform_device_count=4",
           "LIBTPU_INIT_ARGS": "--xla_tpu_enable_async_collective_fusion=true --xla_enable_async_all_gather=false"}
    got = torch_tpu.xla_env(env, tmp_path / "dump", ["--xla_enable_async_all_gather=true"])
    assert got["XLA_FLAGS"].split() == ["--xla_force_host_platform_device_count=4", f"--xla_dump_to={tmp_path / 'dump'}",
                                        "--xla_dump_hlo_as_text"]
    assert got["LIBTPU_INIT_ARGS"].split() == ["--xla_tpu_enable_async_collective_fusion=true",
                                               "--xla_enable_async_all_gather=true"]
    assert torch_tpu.xla_env({}) == {"XLA_FLAGS": "", "LIBTPU_INIT_ARGS": ""}


def test_importing_the_adapter_imports_neither_torch_nor_torch_tpu():
    code = "import sys, perfkit.adapters.torch_tpu; print(sorted({'torch', 'torch_tpu', 'jax'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
