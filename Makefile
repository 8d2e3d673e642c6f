# Two commands on a fresh machine: `make demo` and `make test`. Each sets up .venv when missing.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.perfkit-installed
# Fake CPU devices for the demo and tests; NPROC above the device count keeps Pallas interpret-mode
# kernels from deadlocking on 2 cores.
export NPROC ?= 16

.PHONY: demo test setup clean

setup: $(STAMP)

# torch first, pinned: the CPU build lies on this disk; a bare `torch` fetches a multi-GB CUDA build.
$(STAMP): pyproject.toml setup.py perfkit/trace/_wire.pyx
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install -q --disable-pip-version-check -e '.[torch,jax,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/perfkit run cases/quickstart.yaml

test: $(STAMP)
	$(PY) -m pytest -q -n 2 --dist worksteal tests

clean:
	rm -rf $(VENV) reports/runs
