"""The pod cache the reconciles read, and its expectations: a pod write the operator made and the watch has
not yet shown holds back the pool's next writes, never longer than the TTL."""
from __future__ import annotations

from rewardpool_operator.cluster.podcache import CREATE, DELETE, DRAIN, EXPECTATION_TTL, PodCache
from rewardpool_worker.contract import DRAIN_ANNOTATION


def pod(name: str, pool: str = "a", ns: str = "ns", **meta) -> dict:
    return {"metadata": {"name": name, "namespace": ns, "labels": {"rewardpool.io/pool": pool}, **meta}}


class Clock:
    t = 0.0

    def __call__(self) -> float:
        return self.t


def listed(cache: PodCache, scope, *pods) -> None:
    h = cache.handler(scope)
    for p in pods:
        h("SYNC", p)
    h("LISTED", {"items": list(pods)})


def names(cache: PodCache, pool="a", ns="ns") -> list[str]:
    return sorted(p["metadata"]["name"] for p in cache.pods(ns, pool))


def test_list_then_events_index_pods_by_pool_and_follow_a_relabel():
    c = PodCache()
    assert not c.synced.is_set()
    listed(c, None, pod("a-1"), pod("b-1", "b"), pod("a-2", ns="other"))
    assert c.synced.is_set()
    assert names(c) == ["a-1"] and names(c, "b") == ["b-1"] and names(c, ns="other") == ["a-2"]
    h = c.handler(None)
    h("ADDED", pod("a-3"))
    h("MODIFIED", pod("a-1", "b"))  # a user moved it to another pool's label
    assert names(c) == ["a-3"] and names(c, "b") == ["a-1", "b-1"]
    h("DELETED", pod("a-3"))
    assert names(c) == []


def test_a_relist_drops_pods_deleted_while_the_watch_was_down_in_its_own_scope_only():
    c = PodCache(scopes=2)
    listed(c, "ns", pod("a-1"), pod("a-2"))
    assert not c.synced.is_set()  # one of two namespaces listed
    listed(c, "other", pod("a-9", ns="other"))
    assert c.synced.is_set()
    c.expect("ns", "a", "a-2", DELETE)
    listed(c, "ns", pod("a-1"))  # a-2 went while the watch was down: no DELETED event ever comes
    assert names(c) == ["a-1"] and names(c, ns="other") == ["a-9"]
    assert c.unsettled("ns", "a") == []  # the relist showed the delete


def test_a_create_is_waited_for_until_any_event_names_the_pod():
    c = PodCache()
    listed(c, None)
    c.expect("ns", "a", "a-new", CREATE)
    assert c.unsettled("ns", "a") == ["a-new"]
    assert c.unsettled("ns", "b") == []  # other pools are not held back
    c.handler(None)("ADDED", pod("a-new"))
    assert c.unsettled("ns", "a") == []


def test_a_create_seen_only_as_its_deletion_is_settled():
    c = PodCache()
    listed(c, None)
    c.expect("ns", "a", "a-new", CREATE)
    c.handler(None)("DELETED", pod("a-new"))  # created and deleted before the watch showed it
    assert c.unsettled("ns", "a") == []


def test_a_refused_write_is_not_waited_for():
    c = PodCache()
    listed(c, None, pod("a-1"))
    c.expect("ns", "a", "a-new", CREATE)
    c.settle("ns", "a", "a-new")
    assert c.unsettled("ns", "a") == []


def test_a_delete_is_done_when_the_pod_terminates_or_goes():
    c = PodCache()
    listed(c, None, pod("a-1"), pod("a-2"))
    h = c.handler(None)
    c.expect("ns", "a", "a-1", DELETE)
    c.expect("ns", "a", "a-2", DELETE)
    h("MODIFIED", pod("a-1", labels={"rewardpool.io/pool": "a", "x": "y"}))  # not yet terminating
    assert c.unsettled("ns", "a") == ["a-1", "a-2"]
    h("MODIFIED", pod("a-1", deletionTimestamp="2026-11-30T00:00:00Z"))
    h("DELETED", pod("a-2"))
    assert c.unsettled("ns", "a") == []


def test_a_drain_is_done_when_the_annotation_shows_and_is_not_waited_for_when_it_already_does():
    c = PodCache()
    annotated = pod("a-2", annotations={DRAIN_ANNOTATION: "2026-11-30T00:00:00Z"})
    listed(c, None, pod("a-1"), annotated)
    c.expect("ns", "a", "a-1", DRAIN)
    c.expect("ns", "a", "a-2", DRAIN)  # already shows it
    c.expect("ns", "a", "gone", DELETE)  # not in the cache at all: nothing to wait for
    assert c.unsettled("ns", "a") == ["a-1"]
    c.handler(None)("MODIFIED", pod("a-1", annotations={DRAIN_ANNOTATION: "2026-11-30T00:00:01Z"}))
    assert c.unsettled("ns", "a") == []


def test_an_expectation_lapses_after_the_ttl_so_a_lost_event_never_stops_a_pool():
    clock = Clock()
    c = PodCache(clock=clock)
    listed(c, None)
    c.expect("ns", "a", "a-new", CREATE)
    clock.t = EXPECTATION_TTL - 1
    assert c.unsettled("ns", "a") == ["a-new"]
    clock.t = EXPECTATION_TTL + 1
    assert c.unsettled("ns", "a") == []


def test_forgetting_a_deleted_pool_drops_its_expectations():
    c = PodCache()
    listed(c, None)
    c.expect("ns", "a", "a-new", CREATE)
    c.forget("ns", "a")
    assert c.unsettled("ns", "a") == []
