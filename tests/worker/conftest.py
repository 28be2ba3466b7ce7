"""A real mooncake_master on loopback, real store clients (one in this process, producers in their own),
all pinned to 127.0.0.1 (MC_TCP_BIND_ADDRESS) so no traffic leaves loopback."""
from __future__ import annotations

import os
import subprocess

import pytest

from rewardpool_devcluster.mooncake import Master, Producer


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
    from rewardpool_worker.config import StoreConfig
    from rewardpool_worker.store import Store

    s = Store.connect(StoreConfig(master=master.address, protocol="tcp", segment_bytes=64 << 20,
                                  local_buffer_bytes=16 << 20), "127.0.0.1")
    yield s
    s.close()


def isolated_network() -> bool:
    """True inside a network namespace with only loopback addresses (where `make test` runs the suite)."""
    out = subprocess.run(["ip", "-o", "addr", "show"], capture_output=True, text=True).stdout
    addrs = [line.split()[3] for line in out.splitlines() if " inet" in line]
    return all(a.startswith("127.") or a.startswith("::1") for a in addrs)


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
    ray.init(num_cpus=4, object_store_memory=256 << 20, include_dashboard=False, namespace="rewardpool",
             log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()
