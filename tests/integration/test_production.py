"""What a production cluster does to a pool, on the real control plane: `kubectl scale` of an auto-sized
pool, an evicted worker, a node that disappears, a quota that refuses a pod, a namespace whose Pod Security
level forbids IPC_LOCK, a network edit, and two operator replicas of which only the leader writes."""
from __future__ import annotations

from kubernetes import client

from rewardpool_devcluster.nodes import kwok_node
from rewardpool_devcluster.stack import OperatorProcess, service_account_kubeconfig
from tests.conftest import wait_for
from tests.factories import pool_manifest

HASH = "rewardpool.io/template-hash"


def _hashes(pools, name):
    return {p.metadata.name: p.metadata.labels[HASH] for p in pools.pods(name)}


def test_scaling_an_auto_sized_pool_never_replaces_a_worker(pools, ns):
    pools.create(pool_manifest("grow", replicas=2))
    pools.wait_ready("grow", 2)
    before = _hashes(pools, "grow")
    seg = pools.get("grow")["status"]["segment"]
    assert seg["mode"] == "auto" and seg["basisReplicas"] == 2
    pools.co.patch_namespaced_custom_object_scale("rewardpool.io", "v1alpha1", ns, "rewardpools", "grow",
                                                  {"spec": {"replicas": 3}})
    pools.wait_ready("grow", 3)
    after = _hashes(pools, "grow")
    assert {k: after[k] for k in before} == before, "scaling up replaced an existing worker"
    assert len(set(after.values())) == 1  # the new worker has the same template
    st = pools.get("grow")["status"]
    assert st["segment"]["perWorkerBytes"] == seg["perWorkerBytes"] and st["segment"]["basisReplicas"] == 2
    assert not any(r == "WorkerDraining" for _, r, _ in pools.events("grow"))


def test_autoscaled_pool_divides_its_segment_over_the_minimum(pools, ns):
    auto = {"enabled": True, "minReplicas": 2, "maxReplicas": 6, "targetQueueDepth": 4}
    pools.create(pool_manifest("auto", replicas=2, autoscaling=auto))
    pools.wait_ready("auto", 2)
    before = _hashes(pools, "auto")
    pools.co.patch_namespaced_custom_object_scale("rewardpool.io", "v1alpha1", ns, "rewardpools", "auto",
                                                  {"spec": {"replicas": 4}})
    pools.wait_ready("auto", 4, timeout=90)
    after = _hashes(pools, "auto")
    assert {k: after[k] for k in before} == before
    seg = pools.get("auto")["status"]["segment"]
    assert seg["basisReplicas"] == 2 and "over 2 worker(s)" in seg["rule"]


def test_network_edit_rolls_the_workers(pools, ns):
    pools.create(pool_manifest("net", replicas=1))
    pools.wait_ready("net", 1)
    old = set(_hashes(pools, "net").values())
    m = pool_manifest("net")["spec"]["network"]
    m["ipvlan"]["mtu"] = 9000
    pools.patch("net", {"spec": {"network": m}})
    wait_for(lambda: (h := _hashes(pools, "net")) and not (set(h.values()) & old) and h, 90,
             what="the worker replaced after the network edit")
    pools.wait_ready("net", 1)


def test_evicted_worker_is_replaced_and_cleaned_up(pools, ns):
    pools.create(pool_manifest("evicted", replicas=2))
    pools.wait_ready("evicted", 2)
    victim = pools.pods("evicted")[0].metadata.name
    pools.core.patch_namespaced_pod_status(victim, ns, {"status": {
        "phase": "Failed", "reason": "Evicted", "message": "The node was low on resource: memory."}})
    wait_for(lambda: victim not in [p.metadata.name for p in pools.pods("evicted", include_terminating=True)]
             and len(pools.pods("evicted")) == 2, 60, what="the evicted worker deleted and replaced")
    pools.wait_ready("evicted", 2)
    lost = [m for t, r, m in pools.events("evicted") if r == "WorkerLost"]
    assert lost and victim in lost[0] and "Evicted" in lost[0]


def test_workers_on_a_lost_node_are_replaced(pools, ns, cluster):
    """A node that stops reporting (its kubelet gone, say): after NODE_LOST_SECONDS of NotReady/Unknown, its
    worker is deleted (it stays Terminating, nobody being there to confirm) and replaced on another node, and
    the stuck pod does not hold the pool back. (A node object deleted outright is handled by the
    controller-manager's pod GC before the operator looks; the plan's unit tests cover that case too.)"""
    import datetime

    core = pools.core
    label = "test.rewardpool.io/lossy"
    cluster.apply_objects([kwok_node(f"lossy-{x}", rdma=True, rdma_label=label) for x in "ab"])
    try:
        pools.create(pool_manifest("lossy", replicas=2, placement={"rdmaNodeSelector": {label: "true"}}))
        pools.wait_ready("lossy", 2)
        # The spread is ScheduleAnyway: both workers may share a node. Lose the node the first one is on.
        lost_node = pools.pods("lossy")[0].spec.node_name
        other = "lossy-b" if lost_node == "lossy-a" else "lossy-a"
        on_lost = {p.metadata.name for p in pools.pods("lossy") if p.spec.node_name == lost_node}
        # kwok stops standing in for that node's kubelet; its last word was Unknown, two minutes ago.
        core.patch_node(lost_node, {"metadata": {"annotations": {"kwok.x-k8s.io/node": None}},
                                    "spec": {"unschedulable": True}})
        since = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=2)).strftime(
            "%Y-%m-%dT%H:%M:%SZ")
        core.patch_node_status(lost_node, {"status": {"conditions": [
            {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "kubelet stopped posting",
             "lastTransitionTime": since, "lastHeartbeatTime": since}]}})
        wait_for(lambda: not (on_lost & {p.metadata.name for p in pools.pods("lossy")})
                 and len(pools.pods("lossy")) == 2, 90, what="the workers of the lost node replaced")
        pools.wait_ready("lossy", 2)
        assert all(p.spec.node_name == other for p in pools.pods("lossy"))
        lost = [m for _, r, m in pools.events("lossy") if r == "WorkerLost"]
        assert lost and "has not been Ready" in lost[0]
        assert pools.condition("lossy", "Progressing")["reason"] == "Stable"  # the Terminating pod holds nothing up
    finally:
        for x in "ab":
            try:
                core.delete_node(f"lossy-{x}")
            except client.ApiException:
                pass


def test_refused_pod_create_is_a_replica_failure(pools, ns):
    pools.core.create_namespaced_resource_quota(ns, {"metadata": {"name": "one-pod"}, "spec": {"hard": {"pods": "1"}}})
    pools.create(pool_manifest("quota", replicas=2))
    c = wait_for(lambda: (x := pools.condition("quota", "ReplicaFailure")) and x["status"] == "True" and x, 60,
                 what="ReplicaFailure")
    assert c["reason"] == "FailedCreate" and "exceeded quota" in c["message"]
    assert pools.condition("quota", "Ready")["status"] == "False"
    assert len(pools.pods("quota")) == 1
    failed = [m for t, r, m in pools.events("quota") if r == "FailedCreate" and t == "Warning"]
    assert len(failed) == 1 and "exceeded quota" in failed[0]
    pools.core.delete_namespaced_resource_quota("one-pod", ns)
    pools.patch("quota", {"metadata": {"annotations": {"poke": "1"}}})
    pools.wait_ready("quota", 2)
    assert pools.condition("quota", "ReplicaFailure")["status"] == "False"
    failed = [m for t, r, m in pools.events("quota") if r == "FailedCreate"]
    assert len(failed) == 1  # told once, not on every resync


def test_pod_security_baseline_is_reported_before_any_create(pools, ns):
    pools.core.patch_namespace(ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "baseline"}}})
    pools.create(pool_manifest("psa", replicas=1))
    c = wait_for(lambda: (x := pools.condition("psa", "InvalidSpec")) and x["status"] == "True" and x, 60,
                 what="InvalidSpec: Pod Security")
    assert c["reason"] == "PodSecurityForbidsIpcLock" and "pod-security.kubernetes.io/enforce=privileged" in c["message"]
    assert pools.pods("psa", include_terminating=True) == []
    assert pools.condition("psa", "ReplicaFailure")["status"] == "False"  # nothing was even tried
    pools.core.patch_namespace(ns, {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    pools.patch("psa", {"metadata": {"annotations": {"poke": "1"}}})
    pools.wait_ready("psa", 1)


def test_only_the_leader_writes_and_a_standby_takes_over(pools, ns, operator, chart):
    coord = client.CoordinationV1Api(pools.api)
    holder = lambda: coord.read_namespaced_lease("rewardpool-operator", "rewardpool-system").spec.holder_identity  # noqa: E731
    first = wait_for(holder, 30, what="a lease holder")
    standby = OperatorProcess(service_account_kubeconfig(chart), chart.workdir / "operator-standby.log").start()
    try:
        pools.create(pool_manifest("leader", replicas=2))
        pools.wait_ready("leader", 2)
        assert holder() == first and len(pools.pods("leader", include_terminating=True)) == 2  # no duplicates
        operator.kill()  # the leader dies without releasing the lease
        pools.create(pool_manifest("takeover", replicas=1))
        pools.wait_ready("takeover", 1, timeout=60)  # the standby reconciles after the lease runs out
        assert holder() != first and str(standby.proc.pid) in holder()
        assert len(pools.pods("leader", include_terminating=True)) == 2
    finally:
        standby.stop()  # releases the lease on its way out
        operator.start()
    wait_for(lambda: str(operator.proc.pid) in (holder() or ""), 30, what="the session operator leading again")

