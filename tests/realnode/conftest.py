"""The real nodes: one LocalCluster (its own control plane, kwok nodes next to two real nodes: `realnode` in the
namespace `make test` runs in, `realnode2` in its own, joined by a bridge) for this package, the chart installed
as a user installs it (the operator runs from its image, in-cluster config), the store master and Ray head as
pods on the first node; pools' workers on both. Torn down after the package."""
from __future__ import annotations

import json
import time
import uuid
import warnings

import pytest
import yaml

from tests.conftest import wait_for


@pytest.fixture(scope="package")
def node(tmp_path_factory):
    from rewardpool_devcluster.nodes import default_nodes
    from rewardpool_devcluster.realnode import RealNode
    from rewardpool_devcluster.realnode_host import SYSCTLS, sysctl

    host_before = {k: sysctl(k) for k in SYSCTLS}
    n = RealNode.create(tmp_path_factory.mktemp("realnode"), kwok_nodes=default_nodes(), peers=1)
    keys = [x.key for x in n.nodes]
    yield n
    n.stop()
    # the host-wide sysctls the kubelet rewrote are back, and no cgroup of the node is left in any hierarchy
    assert {k: sysctl(k) for k in SYSCTLS} == host_before
    from rewardpool_devcluster.realnode_config import cgroup_root
    from rewardpool_devcluster.realnode_host import cgroup_hierarchies

    left = [str(h / cgroup_root(k).lstrip("/")) for h in cgroup_hierarchies() for k in keys
            if (h / cgroup_root(k).lstrip("/")).exists()]
    assert not left, f"cgroups left after the nodes stopped: {left}"
    from pathlib import Path

    from rewardpool_devcluster.realnode_host import MOUNT_NS_DIR
    assert not [k for k in keys[1:] if Path(f"/run/netns/{k}").exists() or (MOUNT_NS_DIR / k).exists()], \
        "a peer's network or mount namespace outlived it"


@pytest.fixture(scope="package")
def peer(node):
    """The second real node (realnode2)."""
    return node.peers[0]


def node_of(node, pod):
    """The real node (first or peer) a pod runs on: its containerd is the one that knows the pod's containers."""
    return next(n for n in node.nodes if n.spec.name == pod["spec"]["nodeName"])


class Kube:
    """kubectl against the real node's cluster, with JSON out."""

    def __init__(self, node):
        self.node = node
        self.cluster = node.cluster

    def __call__(self, *args, check=True, input=None, timeout=120):
        from rewardpool_devcluster.stack import kubectl

        res = kubectl(self.cluster, *args, check=False, input=input, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {res.stderr.strip()}")
        return res

    def json(self, *args):
        return json.loads(self("get", *args, "-o", "json").stdout)

    def apply(self, objs):
        return self("apply", "-f", "-", input=yaml.safe_dump_all(objs))

    def pods(self, ns, selector):
        return self.json("pods", "-n", ns, "-l", selector)["items"]

    def exec(self, ns, pod, *cmd, container="worker"):
        return self("exec", "-n", ns, pod, "-c", container, "--", *cmd).stdout


@pytest.fixture(scope="package")
def kube(node):
    return Kube(node)


@pytest.fixture(scope="package")
def incluster_operator(node, kube):
    from rewardpool_devcluster.incluster import FIRST_REAL_NODE
    from rewardpool_devcluster.realnode_config import NODE_LABEL, TOLERATION
    from rewardpool_devcluster.stack import helm_install_incluster

    # the operator on the first node (the second one is drained and lost under pools); the cache agent on both
    helm_install_incluster(node.cluster, node.images.operator, FIRST_REAL_NODE, [TOLERATION],
                           agent_node_selector={NODE_LABEL: "real"})
    node.cluster.wait_crd_established("rewardpools.rewardpool.io")
    return node


@pytest.fixture(scope="package")
def infra(node, kube):
    from rewardpool_devcluster.incluster import INFRA_NS, infra_objects

    # the Ray head on the workers' store network too (ray_head_objects says why)
    objs = infra_objects(node.images.worker, ray_attachment=f"{INFRA_NS}/macvlan-store")
    kube.apply(objs[:1] + [node.macvlan_attachment(INFRA_NS)] + objs[1:])
    for d in ("mooncake-master", "ray-head"):
        kube("rollout", "status", "-n", INFRA_NS, f"deployment/{d}", "--timeout=180s", timeout=200)
    return INFRA_NS


@pytest.fixture()
def rns(kube):
    name = f"rn-{uuid.uuid4().hex[:6]}"
    kube("create", "namespace", name)
    yield name
    kube("delete", "namespace", name, "--wait=false", check=False)


def store_namespace(kube, operator, name):
    """A namespace for a pool's workers with the macvlan attachment their store traffic uses; a module fixture
    yields from it and the namespace goes when the module is done."""
    kube("create", "namespace", name, check=False)
    kube.apply([operator.macvlan_attachment(name)])
    yield name
    kube("delete", "namespace", name, "--wait=false", check=False)


def pool_ready(kube, ns, name, replicas):
    def ready():
        pods = [p for p in kube.pods(ns, f"rewardpool.io/pool={name}")
                if p["metadata"].get("deletionTimestamp") is None]
        ok = [p for p in pods if p["status"].get("phase") == "Running" and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))]
        return ok if len(ok) == replicas and len(pods) == replicas else None
    return ready


def run_job(kube, node, ns, name, pool, timeout=300, **kw):
    """Run the rollout job to completion; returns its JSON result (fails with its log on error)."""
    from rewardpool_devcluster.incluster import rollout_job_objects

    kube.apply(rollout_job_objects(name, ns, node.images.worker, pool, **kw))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = kube.json("job", "-n", ns, name)
        st = job.get("status", {})
        if st.get("succeeded") or st.get("failed"):
            break
        time.sleep(1)
    logs = kube("logs", "-n", ns, f"job/{name}", "--tail=200", check=False).stdout
    assert st.get("succeeded"), (f"rollout job {name} did not succeed ({st}); net1 addresses: {net1_addresses(kube)}"
                                 f"; log tail:\n{logs}")
    from rewardpool_devcluster.incluster import job_result
    return job_result(logs)


def start_job(kube, node, ns, name, pool, **kw):
    """Start the rollout job against `pool` (store traffic on the namespace's macvlan attachment); returns
    once its pod runs."""
    from rewardpool_devcluster.incluster import rollout_job_objects

    kube.apply(rollout_job_objects(name, ns, node.images.worker, pool, attachment=f"{ns}/macvlan-store", **kw))
    wait_for(lambda: any(p["status"].get("phase") == "Running" for p in kube.pods(ns, f"job-name={name}")),
             timeout=120, what=f"job {name} running")


def job_result_of(kube, ns, name, timeout=400):
    """Wait for a started rollout job to finish; its JSON result (fails with its log unless it succeeded)."""
    def done():
        st = kube.json("job", "-n", ns, name).get("status", {})
        return st if (st.get("succeeded") or st.get("failed")) else None
    st = wait_for(done, timeout=timeout, interval=1, what=f"job {name} finished")
    logs = kube("logs", "-n", ns, f"job/{name}", "--tail=200", check=False).stdout
    assert st.get("succeeded"), f"job {name} failed ({st}); net1 addresses: {net1_addresses(kube)}; log tail:\n{logs}"
    from rewardpool_devcluster.incluster import job_result
    return job_result(logs)


def net1_addresses(kube) -> dict[str, list[str]]:
    """Every live pod's secondary-network addresses (Multus' network-status), by pod: a failing job's message
    shows whether two pods hold one address (the store's reads then reach the wrong pod)."""
    out: dict[str, list[str]] = {}
    for p in kube.json("pods", "-A")["items"]:
        raw = p["metadata"].get("annotations", {}).get("k8s.v1.cni.cncf.io/network-status")
        if not raw or p["status"].get("phase") not in ("Running", "Pending"):
            continue
        for net in json.loads(raw):
            if not net.get("default"):
                for ip in net.get("ips", []):
                    out.setdefault(ip, []).append(f"{p['metadata']['namespace']}/{p['metadata']['name']}")
    return out


@pytest.fixture(autouse=True)
def _no_shared_net1_address(request):
    """After each test: two live pods holding one net1 address would break the store traffic of the tests after
    it in ways that look like anything else; say so where it happened."""
    yield
    if "kube" not in request.fixturenames:
        return
    kube = request.getfixturevalue("kube")
    shared = {ip: pods for ip, pods in net1_addresses(kube).items() if len(pods) > 1}
    if shared:
        warnings.warn(f"net1 addresses held by more than one pod after {request.node.name}: {shared}")


FAULT_SAMPLES = 8


def fault_under_job(kube, node, ns, name, pool, fault, *, rounds, pause=0.0, hold=0.0, **job):
    """Run a rollout job, inject `fault` once its first round is scored, and check the job's outcome: every
    output scored exactly once, each released once after its reward, nothing left in the store. Returns the
    job's result and the time to recover: from the fault to the first batch scored after it."""
    start_job(kube, node, ns, name, pool, samples=FAULT_SAMPLES, batch=2, rounds=rounds, pause=pause, hold=hold,
              **job)
    wait_for(lambda: "ROUND 0 scored" in kube("logs", "-n", ns, f"job/{name}", check=False).stdout,
             timeout=240, interval=1, what=f"{name}'s first round scored")
    t_fault = time.time()
    fault()
    result = job_result_of(kube, ns, name, timeout=900)
    n = FAULT_SAMPLES * rounds
    assert result["scored"] == n and result["left"] == 0 and result["pending"] == 0, result
    # every output put was released once (the scored ones after their reward, the lost ones through failed());
    # a release fails only where the store had already forgotten the output (a master restart)
    assert result["released"] + result["release_failures"] == n + result["asked_again"], result
    after = [t for t in result["scored_at"] if t > t_fault]
    assert after, f"no batch scored after the fault: {result}"
    return result, min(after) - t_fault
