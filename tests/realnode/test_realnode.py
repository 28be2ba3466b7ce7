"""On the dev cluster's real node (kubelet + containerd + runc + CNI bridge + kube-proxy + CoreDNS + Multus):
the operator runs from its chart and image, worker pods run the worker image as real containers, and a
training job's reward step (a pod) scores stored outputs through them. Tests run in file order: the later ones
disturb the pool (crash a container, delete the operator pod, scale in) and check that nothing is lost."""
from __future__ import annotations

import json

import pytest

from tests.conftest import wait_for
from tests.realnode.conftest import pool_ready, run_job

POOL = "rn"
IPC_LOCK_BIT = 14


@pytest.fixture(scope="module")
def pool_ns(kube, incluster_operator, infra):
    name = "realnode-pool"
    kube("create", "namespace", name, check=False)
    kube.apply([incluster_operator.macvlan_attachment(name)])
    yield name
    kube("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def pool(kube, node, pool_ns):
    from rewardpool_devcluster.incluster import real_node_pool

    kube.apply([real_node_pool(POOL, pool_ns, node.images.worker, replicas=2,
                               attachment=f"{pool_ns}/macvlan-store")])
    pods = wait_for(pool_ready(kube, pool_ns, POOL, 2), timeout=300, interval=1,
                    what="2 worker pods Running and Ready on the real node")
    return pods


def test_operator_runs_from_its_chart_with_in_cluster_config(kube, incluster_operator):
    pods = kube.pods("rewardpool-system", "app.kubernetes.io/name=rewardpool-operator")
    assert len(pods) == 1
    pod = pods[0]
    assert pod["spec"]["nodeName"] == "realnode"
    assert pod["spec"]["serviceAccountName"] == "rewardpool-rewardpool-operator"
    status = pod["status"]["containerStatuses"][0]
    assert status["ready"] and status["containerID"].startswith("containerd://")
    assert status["image"].endswith(incluster_operator.images.operator.split("/", 1)[1])
    # in-cluster config: it logged in with the ServiceAccount through the `kubernetes` Service (kube-proxy)
    logs = wait_for(lambda: (lambda out: out if "Initial authentication has finished" in out else None)(
        kube("logs", "-n", "rewardpool-system", pod["metadata"]["name"]).stdout), timeout=60,
        what="the operator's in-cluster login in its log")
    # and it can reach the API from inside: the pool CRD's watch is up (no login errors since)
    assert "Unauthorized" not in logs and "certificate verify failed" not in logs


def test_worker_pods_are_real_containers_with_the_pod_contract(kube, node, pool, pool_ns):
    pool_obj = kube.json("rewardpool", "-n", pool_ns, POOL)
    for pod in pool:
        name = pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] == "realnode"  # never a kwok node: selected and tolerated
        cs = pod["status"]["containerStatuses"][0]
        assert cs["containerID"].startswith("containerd://") and cs["image"].endswith(
            node.images.worker.split("/", 1)[1])
        # IPC_LOCK effective inside the container (and every other capability dropped)
        status = kube.exec(pool_ns, name, "cat", "/proc/1/status")
        cap_eff = int(next(line.split()[1] for line in status.splitlines() if line.startswith("CapEff")), 16)
        assert cap_eff == 1 << IPC_LOCK_BIT, hex(cap_eff)
        # /dev/shm is memory-backed (tmpfs), with the sizing's limit
        mounts = kube.exec(pool_ns, name, "cat", "/proc/mounts")
        shm = next(line for line in mounts.splitlines() if line.split()[1] == "/dev/shm")
        assert shm.split()[2] == "tmpfs", shm
        # the memory limit the kubelet enforces (the container's cgroup) is the pool's sizing
        limit = int(kube.exec(pool_ns, name, "cat", "/sys/fs/cgroup/memory/memory.limit_in_bytes"))
        spec_limit = pod["spec"]["containers"][0]["resources"]["limits"]["memory"]
        from rewardpool_operator.quantity import parse_bytes
        assert limit == parse_bytes(spec_limit)
        from rewardpool_operator import sizing
        from rewardpool_operator.spec import PoolSpec
        assert limit == sizing.compute(PoolSpec.model_validate(pool_obj["spec"])).memory_bytes
        # the Downward API annotations file, and the worker read the Multus network-status from it
        ann = kube.exec(pool_ns, name, "cat", "/etc/podinfo/annotations")
        assert "k8s.v1.cni.cncf.io/network-status" in ann
        status_ann = json.loads(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"])
        net1 = next(n["ips"][0] for n in status_ann if n.get("interface") == "net1")
        health = json.loads(kube.exec(pool_ns, name, "python3", "-c",
                                      "import urllib.request;print(urllib.request.urlopen("
                                      "'http://127.0.0.1:8000/healthz').read().decode())"))
        assert health["store_hostname"] == net1  # the store client is bound to the secondary network


def test_outputs_scored_through_real_pods_over_the_secondary_network(kube, node, pool, pool_ns):
    result = run_job(kube, node, pool_ns, "rollout-1", POOL, samples=16, batch=4,
                     attachment=f"{pool_ns}/macvlan-store")
    assert result["scored"] == 16 and result["released"] == 16 and result["left"] == 0, result
    assert result["workers"] == 2, result  # both real pods scored
    # store traffic: the job's segment is on its net1 address, and the workers that read from it connected
    # from theirs (secondary network), never from their pod (eth0) addresses
    worker_net1 = set()
    worker_eth0 = set()
    for pod in pool:
        st = json.loads(pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/network-status"])
        worker_net1.add(next(n["ips"][0] for n in st if n.get("interface") == "net1"))
        worker_eth0.add(pod["status"]["podIP"])
    assert result["store_hostname"].startswith("10.252."), result
    peers_on_net1 = {remote for local, remote in result["tcp_peers"] if local == result["store_hostname"]}
    assert peers_on_net1 & worker_net1, result["tcp_peers"]
    assert not peers_on_net1 & worker_eth0, result["tcp_peers"]
