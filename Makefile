# Every target installs what it needs (apt packages, helm/kubectl, a cached virtualenv, the control-plane
# binaries built from the Kubernetes Go modules) and is safe to run again.
SHELL := /bin/bash
.ONESHELL:
.SHELLFLAGS := -euo pipefail -c
PYTEST_ARGS ?=

.PHONY: demo down test unit integration worker deps deps-demo controlplane cold-check bench-ready bench-read render lint

# What the suite needs (scripts/install.sh: the Go builds and the Python side run side by side).
deps:
	bash scripts/install.sh test

# What the demo needs: the same without the suite's Prometheus and third-party CRDs.
deps-demo:
	bash scripts/install.sh demo

# Both README commands from nothing (an empty cache, fresh Go/pip/npm caches, buildah and containerd storage, a
# fresh copy of this tree), timed per phase; writes .ci/cold-verified when both pass. ~1 hour on 2 cores.
cold-check:
	bash scripts/cold-check.sh

# The demo's network namespace: the control plane, the real node and its pods live there.
DEMO_NETNS ?= rewardpool-demo

controlplane:
	bash devcluster/build.sh

# The main job on a real node: images from the Dockerfile, the operator from its chart, the store master and Ray
# head as pods, a 2-worker pool of real containers, and a rollout job scoring generated videos through it.
demo: deps-demo
	venv=$$(bash scripts/venv.sh); tools=$$(bash scripts/tools.sh)
	PATH="$$tools:$$venv/bin:$$PATH" REWARDPOOL_NETNS=$(DEMO_NETNS) bash scripts/in-netns.sh \
	  python -m rewardpool_devcluster demo

down:
	venv=$$(bash scripts/venv.sh)
	$$venv/bin/python -m rewardpool_devcluster down
	if [ -e /run/netns/$(DEMO_NETNS) ]; then ip netns del $(DEMO_NETNS); fi

# The whole suite (unit, worker on a real Mooncake master and Ray, integration on a real control plane),
# inside a loopback-only network namespace.
test: deps
	venv=$$(bash scripts/venv.sh); tools=$$(bash scripts/tools.sh)
	PATH="$$tools:$$venv/bin:$$PATH" bash scripts/in-netns.sh python -m pytest $(PYTEST_ARGS)

unit:
	venv=$$(bash scripts/venv.sh)
	$$venv/bin/python -m pytest tests/unit $(PYTEST_ARGS)

integration: deps
	venv=$$(bash scripts/venv.sh); tools=$$(bash scripts/tools.sh)
	PATH="$$tools:$$venv/bin:$$PATH" bash scripts/in-netns.sh python -m pytest tests/integration $(PYTEST_ARGS)

worker: deps
	venv=$$(bash scripts/venv.sh); tools=$$(bash scripts/tools.sh)
	PATH="$$tools:$$venv/bin:$$PATH" bash scripts/in-netns.sh python -m pytest tests/worker $(PYTEST_ARGS)

# apply-to-all-Ready latency of a 16-worker pool (median of runs) on the local control plane.
bench-ready: deps
	venv=$$(bash scripts/venv.sh); tools=$$(bash scripts/tools.sh)
	PATH="$$tools:$$venv/bin:$$PATH" rewardpool-bench ready --workers 16 --runs 5

# Store read paths compared in one run (269 MB and 1.23 GB outputs), in the loopback-only namespace.
bench-read: deps
	venv=$$(bash scripts/venv.sh)
	PATH="$$venv/bin:$$PATH" bash scripts/in-netns.sh rewardpool-bench read

lint:
	tools=$$(bash scripts/tools.sh)
	$$tools/helm lint charts/rewardpool-operator
