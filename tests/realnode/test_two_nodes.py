"""Issue 34 (6): across two real nodes. realnode2 runs its own kubelet and containerd in a network namespace of its
own, joined to the first node's by a bridge that carries the node addresses and the macvlan store network. A
pool's workers spread over both and score outputs that a training job on the first node put in the store (the
reads cross the node boundary); `kubectl drain` of the second node under a rollout moves its worker and loses
nothing; the loss of the second node (every process of it killed, its namespaces gone: a machine that died)
under a rollout gets its worker replaced once the node is lost, and loses nothing. Runs last in the package:
the second node stays lost (and its Node object deleted)."""
from __future__ import annotations

import subprocess
import time

import pytest

from tests.conftest import wait_for
from tests.realnode.conftest import fault_under_job, pool_ready, run_job, store_namespace

POOL = "spread"


@pytest.fixture(scope="module")
def ns(kube, incluster_operator, infra):
    yield from store_namespace(kube, incluster_operator, "two-nodes")


@pytest.fixture(scope="module")
def spread_pool(kube, node, peer, ns):
    from rewardpool_devcluster.incluster import real_node_pool

    kube.apply([real_node_pool(POOL, ns, node.images.worker, replicas=2, attachment=f"{ns}/macvlan-store")])
    return wait_for(pool_ready(kube, ns, POOL, 2), timeout=300, interval=1, what="2 workers Ready")


def _workers(kube, ns):
    """The pool's workers not Terminating, Ready or not."""
    return [p for p in kube.pods(ns, f"rewardpool.io/pool={POOL}") if not p["metadata"].get("deletionTimestamp")]


def _on(pods):
    return sorted(p["spec"]["nodeName"] for p in pods)


def _ready_on(kube, ns, nodes: list[str]):
    """For wait_for: the pool's 2 workers Ready, on `nodes` (sorted), or None."""
    def ready():
        pods = pool_ready(kube, ns, POOL, 2)()
        return pods if pods and _on(pods) == nodes else None
    return ready


def test_a_pools_workers_spread_over_both_nodes_and_score_outputs_stored_on_the_first(kube, node, peer, ns,
                                                                                      spread_pool):
    from rewardpool_devcluster.realnode_config import NODE_NAME

    # the operator's topology spread (kubernetes.io/hostname) over the two real nodes, both Ready
    assert _on(spread_pool) == [NODE_NAME, peer.spec.name]
    result = run_job(kube, node, ns, "spread-job", POOL, samples=8, frames=3, batch=2, timeout=300,
                     attachment=f"{ns}/macvlan-store")
    assert result["scored"] == 8 and result["left"] == 0 and result["pending"] == 0, result
    # both workers served: the one on realnode2 read its outputs from the job's segment on the first node
    assert len(result["served"]) == 2 and all(n > 0 for n in result["served"].values()), result["served"]
    (job,) = kube.pods(ns, "job-name=spread-job")
    assert job["spec"]["nodeName"] == NODE_NAME  # the job, like the store master and Ray head, on the first node


def test_kubectl_drain_of_the_second_node_under_a_rollout_moves_its_worker_and_loses_nothing(kube, node, peer, ns,
                                                                                             spread_pool):
    from rewardpool_devcluster.realnode_config import NODE_NAME

    other = peer.spec.name
    (victim,) = [p["metadata"]["name"] for p in _workers(kube, ns) if p["spec"]["nodeName"] == other]
    drained = {}

    def drain():
        # as an operator of the cluster would: evictions (the pool's budget honoured), DaemonSets (the cache
        # agent) left, emptyDir data (the workers' /dev/shm) let go
        drained["res"] = kube("drain", other, "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                              "--timeout=240s", check=False, timeout=300)
    try:
        result, recovered = fault_under_job(kube, node, ns, "drain-job", POOL, drain, rounds=20, pause=0.3)
        assert drained["res"].returncode == 0, drained["res"].stderr
        pods = wait_for(pool_ready(kube, ns, POOL, 2), timeout=300, interval=1, what="2 workers Ready again")
        assert victim not in {p["metadata"]["name"] for p in pods}
        assert _on(pods) == [NODE_NAME, NODE_NAME]  # the cordoned node gets none
        assert kube.json("node", other)["spec"].get("unschedulable") is True
        print(f"\nFAULT kubectl drain of {other}: first batch scored again {recovered:.1f}s after the drain began "
              f"(retries {result['retries']})")
    finally:
        kube("uncordon", other, check=False)


def test_the_loss_of_the_second_node_under_a_rollout_replaces_its_worker_and_loses_nothing(kube, node, peer, ns,
                                                                                           spread_pool):
    from rewardpool_devcluster.realnode_config import NODE_NAME

    other = peer.spec.name
    # a worker on the second node again: one of the first node's replaced goes there (spread, and room)
    if other not in _on(_workers(kube, ns)):
        kube("delete", "pod", "-n", ns, _workers(kube, ns)[0]["metadata"]["name"], "--wait=false")
        wait_for(_ready_on(kube, ns, sorted([NODE_NAME, other])), timeout=300, interval=1,
                 what=f"a worker on {other} again after the uncordon")
    (victim,) = [p["metadata"]["name"] for p in _workers(kube, ns) if p["spec"]["nodeName"] == other]

    def lose_the_node():
        # the machine dies: its containers, containerd and kubelet killed, its namespaces gone; its Node object
        # stays, and stops being renewed
        stopped = peer.stop()
        assert any("kubelet" in s for s in stopped), stopped
    result, recovered = fault_under_job(kube, node, ns, "lost-job", POOL, lose_the_node, rounds=30, pause=0.5)
    t_lost = time.monotonic()  # the job is done: the other worker took the lost one's batches meanwhile

    def not_ready():
        conds = kube.json("node", other)["status"].get("conditions") or []
        return next(c for c in conds if c["type"] == "Ready")["status"] != "True"
    wait_for(not_ready, timeout=180, interval=2, what=f"{other} no longer Ready")  # the node controller's grace
    pods = wait_for(pool_ready(kube, ns, POOL, 2), timeout=300, interval=1, what="2 workers Ready without the node")
    replaced_after = time.monotonic() - t_lost
    assert victim not in {p["metadata"]["name"] for p in pods} and _on(pods) == [NODE_NAME, NODE_NAME]
    # the lost worker's pod: deleted by the operator, and Terminating for as long as its node may come back (no
    # kubelet confirms it; the operator does not force it, as Kubernetes' own controllers do not). The node is
    # deleted, as an administrator does for a machine gone for good (the pod garbage collector then removes the
    # pod after its 40 s quarantine: Kubernetes' behaviour, not waited for here)
    lost = kube.json("pod", "-n", ns, victim)
    assert lost["metadata"].get("deletionTimestamp"), lost["metadata"]
    kube("delete", "node", other)
    assert not subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.count(peer.key)
    print(f"\nFAULT loss of {other}: first batch scored again {recovered:.1f}s after the node died "
          f"(retries {result['retries']}); the lost worker replaced {replaced_after:.0f}s after the job ended")
