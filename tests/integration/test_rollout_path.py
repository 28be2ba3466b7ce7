"""Rolls, scale-ins and node drains observed on the way, on the real control plane: every pod state the
pool passes through is recorded from a watch, and the tests assert that the unavailability budget is never
exceeded, that the operator marks a worker for draining before it deletes it, and that workers leave in the
documented order (stale template first, then the newest). Waiting is on the pool's status, never on sleeps."""
from __future__ import annotations

import time

from rewardpool_devcluster.stack import kubectl
from rewardpool_operator.pool.rollout import max_unavailable
from tests.conftest import wait_for
from tests.factories import pool_manifest
from tests.integration.timeline import Timeline

FIXED = {"master": "127.0.0.1:50051", "protocol": "rdma", "devices": ["mlx5_0"], "segmentSize": "4Gi"}


def _all_new(pools, name, replicas, old_hashes):
    pods = pools.pods(name, include_terminating=True)
    return (len(pods) == replicas and all(p.metadata.labels["rewardpool.io/template-hash"] not in old_hashes
                                          for p in pods))


def test_image_roll_keeps_the_budget_and_drains_before_deleting(pools, ns):
    replicas = 4
    pools.create(pool_manifest("roll", replicas=replicas))
    pools.wait_ready("roll", replicas)
    old = {p.metadata.name for p in pools.pods("roll")}
    old_hashes = {p.metadata.labels["rewardpool.io/template-hash"] for p in pools.pods("roll")}
    with Timeline(pools.core, ns, "roll") as tl:
        pools.patch("roll", {"spec": {"image": "rewardpool-worker:v2"}})
        wait_for(lambda: _all_new(pools, "roll", replicas, old_hashes), 120, what="every worker replaced")
        pools.wait_ready("roll", replicas)
    floor = replicas - max_unavailable(replicas)
    serving = tl.serving_counts()
    assert min(serving) >= floor, f"serving workers went {serving} (budget: never below {floor})"
    assert set(tl.deleted) == old, "exactly the stale workers were removed"
    assert all(tl.drain_then_delete[n] for n in tl.deleted), tl.drain_then_delete  # drained, then deleted
    assert tl.max_present() <= replicas + max_unavailable(replicas)  # no surge beyond the budget


def test_two_worker_roll_never_takes_both_down(pools, ns):
    pools.create(pool_manifest("pair", replicas=2))
    pools.wait_ready("pair", 2)
    old_hashes = {p.metadata.labels["rewardpool.io/template-hash"] for p in pools.pods("pair")}
    with Timeline(pools.core, ns, "pair") as tl:
        pools.patch("pair", {"spec": {"image": "rewardpool-worker:v2"}})
        wait_for(lambda: _all_new(pools, "pair", 2, old_hashes), 120, what="both workers replaced")
        pools.wait_ready("pair", 2)
    serving = tl.serving_counts()
    assert min(serving) >= 1, f"ready workers went {serving}: both were taken down at once"
    # One at a time: the second stale worker is marked only after the first has left.
    first, second = tl.deleted[:2]
    marks = [i for i, st in enumerate(tl.states) if second in st and st[second].drain_requested]
    gone = [i for i, st in enumerate(tl.states) if first not in st or st[first].terminating]
    assert marks and gone and gone[0] < marks[0]


def test_scale_in_drains_the_newest_and_keeps_the_target_serving(pools, ns):
    pools.create(pool_manifest("shrink", replicas=2, store=FIXED))
    pools.wait_ready("shrink", 2)
    first = {p.metadata.name for p in pools.pods("shrink")}
    time.sleep(1.1)  # creation timestamps have one-second resolution: the next workers must be newer
    pools.patch("shrink", {"spec": {"replicas": 4}})
    pools.wait_ready("shrink", 4)
    added = {p.metadata.name for p in pools.pods("shrink")} - first
    with Timeline(pools.core, ns, "shrink") as tl:
        pools.patch("shrink", {"spec": {"replicas": 2}})
        wait_for(lambda: len(pools.pods("shrink", include_terminating=True)) == 2, 90, what="two workers left")
        pools.wait_ready("shrink", 2)
    assert set(tl.deleted) == added, "the newest workers leave first"
    assert all(tl.drain_then_delete[n] for n in tl.deleted)
    assert min(tl.serving_counts()) >= 2
    assert {p.metadata.name for p in pools.pods("shrink")} == first  # scale-in rolled nobody


def test_node_drain_respects_the_disruption_budget(pools, ns, cluster):
    replicas = 4
    pools.create(pool_manifest("evict", replicas=replicas, store=FIXED))
    pools.wait_ready("evict", replicas)
    out = kubectl(cluster, "get", "pdb", "evict", "-n", ns, "-o", "jsonpath={.spec.maxUnavailable}").stdout
    assert out == str(max_unavailable(replicas))

    def pdb_allows_one():
        # The controller-manager maps the RewardPool kind (for the PDB's expected count) only after its
        # discovery cache refreshes (every 30 s) and recomputes a PDB only on a pod or PDB change: in a
        # cluster whose CRD is minutes old nothing is needed; here, touch the pods until it has caught up.
        got = kubectl(cluster, "get", "pdb", "evict", "-n", ns, "-o", "jsonpath={.status.disruptionsAllowed}").stdout
        if got != "1":
            for p in pools.pods("evict"):
                pools.core.patch_namespaced_pod(p.metadata.name, ns, {"metadata": {"annotations": {
                    "test/poke": str(time.monotonic())}}})
        return got == "1"
    wait_for(pdb_allows_one, 90, interval=3, what="the PDB's controller counting the pool's workers")
    on_node0 = [p.metadata.name for p in pools.pods("evict") if p.spec.node_name == "rdma-node-0"]
    assert on_node0, "topology spread puts workers on both RDMA nodes"
    try:
        with Timeline(pools.core, ns, "evict") as tl:
            res = kubectl(cluster, "drain", "rdma-node-0", "--pod-selector=rewardpool.io/pool=evict",
                          "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=150s", check=False, timeout=180)
            assert res.returncode == 0, res.stderr
            pools.wait_ready("evict", replicas)
    finally:
        kubectl(cluster, "uncordon", "rdma-node-0", check=False)
    ready = tl.ready_counts()
    assert min(ready) >= replicas - max_unavailable(replicas), f"ready workers went {ready} during the node drain"
    assert set(on_node0) <= set(tl.deleted)
    assert all(p.spec.node_name == "rdma-node-1" for p in pools.pods("evict") if p.metadata.name not in on_node0)
