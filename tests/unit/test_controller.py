"""The controller's bookkeeping of pools, without a cluster: which copy of a pool it keeps, and which changes
ask for a full reconcile (the owned objects read and ensured) rather than a look at pods and status."""
from __future__ import annotations

import pytest

from rewardpool_operator.controller.loop import Controller
from rewardpool_operator.modelcache.controller import CacheController
from rewardpool_operator.cluster.podcache import PodCache
from rewardpool_operator.cluster.watches import NodeCache

KEY = ("ns", "p")


def body(rv: int, generation: int = 1, ready: int = 0, **meta) -> dict:
    return {"metadata": {"namespace": "ns", "name": "p", "resourceVersion": str(rv), "generation": generation,
                         **meta}, "spec": {"replicas": 2}, "status": {"readyReplicas": ready}}


def controller() -> Controller:
    c = Controller(kube=None, pods=PodCache(), nodes=NodeCache())
    c.leading = False  # no reconcile tasks: only the bookkeeping is looked at
    return c


def test_an_older_copy_never_replaces_a_newer_one():
    c = controller()
    c.pool_event("ADDED", body(10))
    c.keep(KEY, body(12, ready=2))  # what our own status write returned
    c.pool_event("MODIFIED", body(11, ready=1))  # the watch, a step behind
    assert c.bodies[KEY]["metadata"]["resourceVersion"] == "12"
    c.pool_event("MODIFIED", body(12, ready=2))
    c.pool_event("MODIFIED", body(13, generation=2))
    assert c.bodies[KEY]["metadata"]["generation"] == 2


def test_only_a_change_to_the_pool_itself_asks_for_a_full_reconcile():
    c = controller()
    c.pool_event("ADDED", body(10))
    assert KEY in c.full  # a new pool: ensure everything
    c.full.clear()
    c.pool_event("MODIFIED", body(11, ready=1))  # status only: this operator's own write
    assert KEY not in c.full
    c.pool_event("MODIFIED", body(12, ready=1, annotations={"rotate": "1"}))  # a user's poke
    assert KEY in c.full
    c.full.clear()
    c.pool_event("MODIFIED", body(13, generation=2, ready=1, annotations={"rotate": "1"}))  # a spec change
    assert KEY in c.full


def test_a_deleted_pool_is_forgotten_with_its_expectations():
    c = controller()
    c.pool_event("ADDED", body(10))
    c.pods.expect("ns", "p", "p-abcde", "create")
    c.pool_event("DELETED", body(11))
    assert KEY not in c.bodies and c.pods.unsettled("ns", "p") == []


def test_a_caches_summary_follows_its_nodes_and_the_pools_that_name_it():
    """The cache's controller, told of the pools' spec changes by theirs: the leader writes a cache's ready/digest/usedBy when its nodes change and when a pool starts or stops
    naming it (also on the pool's deletion); a standby writes nothing; an unchanged summary is not written."""
    import asyncio

    from tests.unit.fakes import FakeKube

    async def run():
        kube = FakeKube()
        c = Controller(kube=kube, pods=PodCache(), nodes=NodeCache())
        c._start = lambda key: None  # bookkeeping only: no reconcile loops
        caches = CacheController(kube, c.bodies, c.trigger, lambda: c.leading)
        c.on_spec_change = caches.pool_changed
        d = "sha256:" + "0" * 64
        kube.put({"kind": "RewardModelCache", "metadata": {"name": "pick"},
                  "status": {"nodes": [{"node": "a", "phase": "Ready", "digest": d}]}})
        written = []
        kube.patch_cache_status = lambda name, fields: asyncio.sleep(0, written.append((name, fields)))
        pool = lambda ns, name, cache: {"metadata": {"namespace": ns, "name": name, "resourceVersion": "1"},  # noqa
                                        "spec": {"scorer": {"model": {"cache": {"name": cache}}}}}
        c.pool_event("ADDED", pool("ns", "p1", "pick"))
        c.pool_event("ADDED", pool("ns2", "p2", "pick"))
        await asyncio.sleep(0.01)
        assert caches.users("pick") == ["ns/p1", "ns2/p2"]
        assert written[-1] == ("pick", {"ready": "1/1", "digest": d, "usedBy": "ns/p1, ns2/p2"})
        kube.put({"kind": "RewardModelCache", "metadata": {"name": "pick"},
                  "status": {"nodes": [{"node": "a", "phase": "Ready", "digest": d}], "ready": "1/1", "digest": d,
                             "usedBy": "ns/p1, ns2/p2"}})
        n = len(written)
        await caches.refresh("pick")
        assert len(written) == n  # nothing changed, nothing written
        c.pool_event("DELETED", pool("ns2", "p2", "pick"))
        await asyncio.sleep(0.01)
        assert written[-1][1]["usedBy"] == "ns/p1"
        kube.put({"kind": "RewardModelCache", "metadata": {"name": "other"}, "status": {}})
        c.pool_event("MODIFIED", {**pool("ns", "p1", "other"), "metadata": {
            "namespace": "ns", "name": "p1", "resourceVersion": "2", "generation": 2}})
        await asyncio.sleep(0.01)
        assert {w[0] for w in written[n:]} == {"pick", "other"} and caches.users("pick") == []
        c.leading = False
        n = len(written)
        await caches.refresh("pick")
        assert len(written) == n

    asyncio.run(run())


@pytest.mark.parametrize("spec,status,fast", [
    ({}, {"replicas": 2, "readyReplicas": 2}, False),  # settled: the resync
    ({"autoscaling": {"enabled": True}}, {"replicas": 2, "readyReplicas": 2}, True),  # signals are scraped
    ({}, {"replicas": 2, "readyReplicas": 1}, True),  # a worker not Ready yet
    ({}, {"replicas": 2, "readyReplicas": 2, "drainingReplicas": 1}, True),
    ({}, {"replicas": 2, "readyReplicas": 2, "roll": {"phase": "Shadow"}}, True),
    ({"access": {"tenants": [{"name": "a"}]}}, {"replicas": 2, "readyReplicas": 2}, True),  # a Secret may rotate
    ({"access": {"tenants": []}}, {"replicas": 2, "readyReplicas": 2}, False),
])
def test_a_pool_is_looked_at_often_while_what_it_reads_is_not_watched(spec, status, fast):
    from rewardpool_operator.controller.loop import FAST_SECONDS, look_again_in

    assert look_again_in({"spec": spec}, status, 60.0) == (FAST_SECONDS if fast else 60.0)
