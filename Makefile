# pkletd: `make run` to try it, `make test` for the whole suite (what CI runs).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CTR_DIR ?= /tmp/pkletd-ctr
STAMP := $(VENV)/.installed

.PHONY: install deps lint typecheck test unit bench run stop clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# System packages the runtime tests need (Debian 12); a no-op when present.
deps:
	$(BIN)/python tests/harness/containerd.py install

lint: install
	$(BIN)/ruff check supervisor workers ipc tests
	$(BIN)/ruff format --check supervisor workers ipc tests
	$(BIN)/python tests/lint_imports.py

# mypy needs the installed package layout; mirror it with symlinks.
typecheck: install
	rm -rf .typecheck && mkdir -p .typecheck/pkletd
	for d in supervisor workers ipc; do ln -s ../../$$d .typecheck/pkletd/$$d; done
	cd .typecheck && ../$(BIN)/mypy -p pkletd

unit: install
	$(BIN)/pytest -q -m "not slow"

test: install deps lint typecheck
	$(BIN)/pytest -q

bench: install deps
	$(BIN)/python -m tests.bench

run: install deps
	$(BIN)/python tests/harness/containerd.py up --dir $(CTR_DIR)
	$(BIN)/pkletd start --config etc/kubelet-config.yaml

stop:
	-$(BIN)/pkletd stop
	$(BIN)/python tests/harness/containerd.py down --dir $(CTR_DIR)

clean:
	rm -rf $(VENV) .typecheck .pytest_cache .mypy_cache .ruff_cache *.egg-info
