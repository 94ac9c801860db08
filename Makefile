# Every install step lives here or in setup.py: a fresh clone needs only `make demo` / `make test`.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
NATIVE := ralp_tf/run/_native/libloopback_bind.so

.PHONY: setup demo test test-full test-fast test-release bench bench-quick horovod clean

setup: $(STAMP) $(NATIVE)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# Reinstall when setup.py changes (the stamp is older than it).
$(STAMP): setup.py | $(VENV)/bin/python
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,bench]'
	touch $(STAMP)

$(NATIVE): ralp_tf/run/_native/loopback_bind.c
	cc -O2 -shared -fPIC -o $@ $< -ldl

demo: setup
	$(VENV)/bin/ralp-tf run --model alexnet_cifar --workers 2 --ps 1 --steps 30 --compare

# Tiers are pytest markers (pytest.ini). `test` runs every tier CI can run but `extended` (.ci/run): a test whose
# requirement is missing (root, Horovod, shared data) skips, -rs lists why and tests/conftest.py
# prints one "skip summary:" line. Any non-zero pytest status fails, 5 (nothing collected) included.
FAST_TIER := not slow and not integration and not needs_root and not needs_horovod and not release and not extended

# Three passes (scripts/test_passes.py says why each runs as it does): the tests that start no
# cluster, namespace or Horovod job on every core, at the lowest CPU priority beside the other two; those that start
# local clusters two files at a time; those that build namespaces, CPU groups or Horovod jobs one at
# a time. The status is the first failing pass's, after all ran.
# `test` leaves out `extended` tests (sweeps, and second paths of a behaviour it pins once; each
# names its twin) to stay in its time budget; `test-full` runs them too (BUILD_NOTES.md, "Test tiers").
test: setup
	$(PY) scripts/test_passes.py

test-full: setup
	$(PY) scripts/test_passes.py --extended

# `release` tests rebuild shipped artifacts from their recipes (scheduler/weights: about 3 minutes
# each); `make test` keeps their small-budget twins (same code, same seed, bit-for-bit).
test-release: setup
	$(PY) -m pytest -q -rs -m release tests

# The quick tier, under 90 s: no real clusters, no root, no Horovod, no test over ~5 s; pure tests,
# so they run on every core (pytest-xdist).
test-fast: setup
	$(PY) -m pytest -q -rs -n auto -m "$(FAST_TIER)" tests

horovod: setup
	bash scripts/install_horovod.sh $(PY)

bench: setup horovod
	$(VENV)/bin/ralp-tf bench

bench-quick: setup
	$(VENV)/bin/ralp-tf bench --quick

clean:
	rm -rf $(VENV) $(NATIVE) build *.egg-info
