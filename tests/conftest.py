"""Session fixtures: one real local control plane, the Helm chart installed into it, and the real operator
process running with the chart ServiceAccount's identity; a real mooncake_master on loopback with store
clients (one in this process, producers in their own), all pinned to 127.0.0.1; and a real Ray cluster."""
from __future__ import annotations

import os
import subprocess
import time
import uuid
import warnings
from pathlib import Path

import pytest

from rewardpool_devcluster.mooncake import Master, Producer

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


@pytest.fixture(scope="session")
def master(tmp_path_factory):
    m = Master(tmp_path_factory.mktemp("mooncake"))
    yield m
    m.stop()


@pytest.fixture(scope="session")
def producer(master):
    p = Producer(master)
    yield p
    p.close()


@pytest.fixture(scope="session")
def store(master):
    from rewardpool_worker.contract import StoreConfig
    from rewardpool_worker.store import Store

    s = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=64 << 20,
                                  local_buffer_bytes=16 << 20), "127.0.0.1")
    yield s
    s.close()


# The dev cluster's real node adds its own links to the namespace (node veth 10.250.0.1, the pod bridge
# 10.244.0.1, the secondary network's 10.252.0.254): all of them inside it, none reaching the host.
NAMESPACE_LOCAL = ("127.", "::1", "fe80:", "10.244.", "10.250.", "10.252.")


def isolated_network() -> bool:
    """True inside the network namespace `make test` runs the suite in: loopback, plus only the real node's
    links, which live inside the namespace too."""
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout
    addrs = [line.split()[3] for line in out.splitlines() if " inet" in line]
    return all(a.startswith(NAMESPACE_LOCAL) for a in addrs)


@pytest.fixture(scope="session")
def ray_cluster():
    """A real local Ray cluster. Ray picks this machine's external address unless that address does not
    exist, so these tests insist on the loopback-only network namespace `make test` runs them in."""
    if not isolated_network():
        pytest.fail("Ray tests must run in a loopback-only network namespace (run them with `make test`): "
                    "outside one, Ray would use this machine's external address")
    import ray

    repo = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))
    if ray.is_initialized():
        # Ray connects itself on first use (ray.get_actor, .remote()): a test that used it before this fixture
        # would otherwise make every later Ray test fail with "ray.init twice". Start clean instead.
        warnings.warn("Ray was initialised before the ray_cluster fixture (a test used Ray without it)")
        ray.shutdown()
    # address="local": a new instance even when /tmp/ray names another cluster (a `ray start` left behind)
    ray.init(address="local", num_cpus=4, object_store_memory=256 << 20, include_dashboard=False,
             namespace="rewardpool", log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
