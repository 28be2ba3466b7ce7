"""Rolls, scale-ins and node drains observed on the way, on the real control plane: every pod state the
pool passes through is recorded from a watch, and the tests assert that spec.rollout's maxUnavailable and
maxSurge are never exceeded, that the operator marks a worker for draining before it deletes it, and that workers leave in the
documented order (stale template first, then the newest). Waiting is on the pool's status, never on sleeps."""
from __future__ import annotations

import time

from rewardpool_devcluster.stack import kubectl
from rewardpool_operator.api.spec import Rollout
from rewardpool_operator.pool.rollout import budget, disruptions
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
    b = budget(Rollout(), replicas)  # the defaults: 25% each, a surge of 1 and 1 unavailable at 4
    serving = tl.serving_counts()
    assert min(serving) >= b.floor(replicas), f"serving workers went {serving} (never below {b.floor(replicas)})"
    assert set(tl.deleted) == old, "exactly the stale workers were removed"
    assert all(tl.drain_then_delete[n] for n in tl.deleted), tl.drain_then_delete  # drained, then deleted
    assert tl.max_serving_present() <= replicas + b.surge  # no surge beyond maxSurge


def test_small_rolls_keep_their_budget(pools, ns):
    """A 1-replica pool with the defaults keeps its one worker serving until the new one is Ready (a surge of
    one); a 2-replica pool with no surge (maxSurge 0, maxUnavailable 1) never takes both down nor starts a third."""
    for name, replicas, rollout, floor, most in (("solo", 1, {}, 1, 2),
                                                 ("pair", 2, {"maxSurge": 0, "maxUnavailable": 1}, 1, 2)):
        pools.create(pool_manifest(name, replicas=replicas, rollout=rollout))
        pools.wait_ready(name, replicas)
        old_hashes = {p.metadata.labels["rewardpool.io/template-hash"] for p in pools.pods(name)}
        with Timeline(pools.core, ns, name) as tl:
            pools.patch(name, {"spec": {"image": "rewardpool-worker:v2"}})
            wait_for(lambda: _all_new(pools, name, replicas, old_hashes), 120, what=f"{name}'s workers replaced")
            pools.wait_ready(name, replicas)
        serving = tl.serving_counts()
        assert min(serving) >= floor, f"{name}: serving workers went {serving} (never below {floor})"
        assert tl.max_serving_present() <= most, f"{name}: {tl.max_serving_present()} workers at once"
        assert all(tl.drain_then_delete[n] for n in tl.deleted), tl.drain_then_delete


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
    assert out == str(disruptions(Rollout(), replicas))

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
    assert min(ready) >= replicas - disruptions(Rollout(), replicas), f"ready workers went {ready} during the drain"
    assert set(on_node0) <= set(tl.deleted)
    assert all(p.spec.node_name == "rdma-node-1" for p in pools.pods("evict") if p.metadata.name not in on_node0)
