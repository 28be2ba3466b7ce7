"""The controller's bookkeeping of pools, without a cluster: which copy of a pool it keeps, and which changes
ask for a full reconcile (the owned objects read and ensured) rather than a look at pods and status."""
from __future__ import annotations

from rewardpool_operator.controller import Controller
from rewardpool_operator.podcache import PodCache
from rewardpool_operator.watches import NodeCache

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
