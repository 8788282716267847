# pkletd: `make run` to try it, `make test` for the whole suite (what CI runs).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CTR_DIR ?= /tmp/pkletd-ctr
# make bench BENCH_ARGS='--only kubeletapi --containerd-dir /tmp/my-bench-ctr'
BENCH_ARGS ?=
# make soak SOAK_ARGS='--short' (a tenth of the counts, ~3 min; `make test` runs it too)
SOAK_ARGS ?=
STAMP := $(VENV)/.installed
# The real control plane (tests/harness/controlplane): `make cluster NODES=3`
K8S := $(BIN)/python -m tests.harness.controlplane
CLUSTER_DIR ?= /tmp/pkletd-cluster
NODES ?= 1

.PHONY: install deps binaries lint typecheck test unit bench soak run cluster cluster-kubeconfig \
	stop clean proto

install: $(STAMP)

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# System packages the runtime tests need (Debian 12); a no-op when present.
deps:
	$(BIN)/python tests/harness/containerd.py install

# kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kubelet, etcd and crictl,
# built from the Go modules pinned in tests/cluster/ into /var/cache/pkletd (once per
# machine; a no-op when built).
binaries: install
	$(K8S) build

lint: install
	$(BIN)/ruff check supervisor workers ipc etc tests setup.py
	$(BIN)/ruff format --check supervisor workers ipc etc tests setup.py
	$(BIN)/python tests/lint_imports.py

# mypy needs the installed package layout; mirror it with symlinks.
typecheck: install
	rm -rf .typecheck && mkdir -p .typecheck/pkletd
	for d in supervisor workers ipc; do ln -s ../../$$d .typecheck/pkletd/$$d; done
	cd .typecheck && ../$(BIN)/mypy -p pkletd

# The modules generated from proto/ (committed; tests check they match their .proto files):
# pod-resources for its worker, containerd's events for the PLEG, CSI and plugin registration
# for the CSI client.
CONTAINERD_PROTOS := services/events/v1/events events/task events/container
proto: install
	rm -rf .proto-out && mkdir .proto-out
	$(BIN)/python -m grpc_tools.protoc -I proto --python_out=.proto-out --pyi_out=.proto-out \
		proto/podresources/v1/api.proto $(CONTAINERD_PROTOS:%=proto/containerd/%.proto) \
		proto/csi/v1/csi.proto proto/pluginregistration/v1/api.proto
	cp .proto-out/podresources/v1/api_pb2.py workers/podresources/podresources_pb2.py
	cp .proto-out/podresources/v1/api_pb2.pyi workers/podresources/podresources_pb2.pyi
	for p in $(CONTAINERD_PROTOS); do \
		cp .proto-out/containerd/$${p}_pb2.py ipc/runtime/containerd/$$(basename $$p)_pb2.py; \
		cp .proto-out/containerd/$${p}_pb2.pyi ipc/runtime/containerd/$$(basename $$p)_pb2.pyi; \
	done
	cp .proto-out/csi/v1/csi_pb2.py .proto-out/csi/v1/csi_pb2.pyi ipc/csi/
	cp .proto-out/pluginregistration/v1/api_pb2.py ipc/csi/pluginregistration_pb2.py
	cp .proto-out/pluginregistration/v1/api_pb2.pyi ipc/csi/pluginregistration_pb2.pyi
	rm -rf .proto-out

unit: install
	$(BIN)/pytest -q -m "not slow"

test: install deps binaries lint typecheck
	$(BIN)/pytest -q

bench: install deps
	$(BIN)/python -m tests.bench $(BENCH_ARGS)

soak: install deps
	$(BIN)/python -m tests.soak $(SOAK_ARGS)

run: install deps
	$(BIN)/python tests/harness/containerd.py up --dir $(CTR_DIR)
	$(BIN)/pkletd start --config etc/kubelet-config.yaml

# A one-node cluster (NODES=3: three), the real control plane and pkletd, until `make stop`;
# prints the admin kubeconfig's path (again: make -s cluster-kubeconfig).
cluster: install deps binaries
	$(K8S) up --dir $(CLUSTER_DIR) --nodes $(NODES) --containerd-dir $(CTR_DIR)

cluster-kubeconfig:
	@$(K8S) kubeconfig --dir $(CLUSTER_DIR)

stop:
	-$(BIN)/pkletd stop
	-$(K8S) down --dir $(CLUSTER_DIR)
	$(BIN)/python tests/harness/containerd.py down --dir $(CTR_DIR)

clean:
	rm -rf $(VENV) .typecheck .pytest_cache .mypy_cache .ruff_cache *.egg-info dist
