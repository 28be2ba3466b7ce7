"""Session fixtures: one real local control plane, the Helm chart installed into it, and the real operator
process running with the chart ServiceAccount's identity."""
from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def wait_for(fn, timeout: float = 60, interval: float = 0.5, what: str = "condition"):
    """Poll fn until it returns something truthy; fail with the last value seen."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as e:  # keep polling through transient API errors
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    from rewardpool_devcluster import LocalCluster

    workdir = Path(os.environ.get("REWARDPOOL_TEST_CLUSTER_DIR") or tmp_path_factory.mktemp("cluster"))
    c = LocalCluster(workdir).start()
    yield c
    c.stop()


@pytest.fixture(scope="session")
def chart(cluster):
    from rewardpool_devcluster.stack import helm_install

    helm_install(cluster)
    cluster.wait_crd_established("rewardpools.rewardpool.io")
    return cluster


@pytest.fixture(scope="session")
def operator(chart):
    from rewardpool_devcluster.stack import OperatorProcess, service_account_kubeconfig

    op = OperatorProcess(service_account_kubeconfig(chart), chart.workdir / "operator.log").start()
    yield op
    op.stop()


@pytest.fixture(scope="session")
def api(cluster):
    """Synchronous kubernetes client (admin) for the tests' own reads and writes."""
    from kubernetes import client, config

    return client.ApiClient(config.new_client_from_config(str(cluster.kubeconfig)).configuration)


@pytest.fixture()
def ns(api):
    from kubernetes import client

    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    yield name
    client.CoreV1Api(api).delete_namespace(name)
