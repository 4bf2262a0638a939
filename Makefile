# Tailwatch — the commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.installed
# NOTE: extra options for `tailwatch up` in `make run`, e.g. make run ARGS='--console-port 8600'.
ARGS   ?=
# NOTE: the suite's workers (pytest-xdist); CI is a 2-core machine. Three, not two: one
# runs the drills' group (tests/conftest.py), whose stacks mostly wait on real time, so the
# other two keep both cores busy meanwhile (572 s with two workers, near the 10-minute mark).
TEST_WORKERS ?= 3

.PHONY: run test bench lint format install clean

# NOTE: a new top-level package needs the editable install redone, hence the __init__ files.
$(STAMP): pyproject.toml $(wildcard */__init__.py)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# torch first: here it resolves to the CPU build on disk; the engine uses CUDA when present.
	$(PIP) install --quiet torch==2.13.0
	# xgrammar without its triton requirement (pyproject.toml says why); its other deps come next.
	$(PIP) install --quiet --no-deps xgrammar==0.2.9
	$(PIP) install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/tailwatch up --demo $(ARGS)

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

bench: $(STAMP)
	$(PY) -m bench

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
