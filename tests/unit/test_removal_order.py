"""Which worker leaves first on scale-in or a roll (reconcile._removal_order): stale template, then not
ready, then the least queued work, then the newest (an old worker is warm: its model and registrations)."""
from rewardpool_operator.reconcile import _removal_order
from rewardpool_operator.spec import HASH_LABEL


def pod(name, created, hash_="new", ready=True, ip=None):
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": {HASH_LABEL: hash_}},
            "status": {"podIP": ip or f"10.0.0.{len(name)}",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def names(pods, queue=None):
    return [p["metadata"]["name"] for p in _removal_order(pods, "new", queue or {})]


def test_newest_leaves_first_when_all_else_is_equal():
    pods = [pod("old", "2026-01-01T00:00:00Z"), pod("mid", "2026-01-02T00:00:00Z"), pod("young", "2026-01-03T00:00:00Z")]
    assert names(pods) == ["young", "mid", "old"]


def test_stale_then_not_ready_then_least_work():
    pods = [pod("busy", "2026-01-01T00:00:00Z", ip="10.0.0.1"), pod("idle", "2026-01-01T00:00:01Z", ip="10.0.0.2"),
            pod("unready", "2026-01-01T00:00:02Z", ready=False), pod("stale", "2026-01-01T00:00:03Z", hash_="old")]
    assert names(pods, {"10.0.0.1": 5, "10.0.0.2": 0}) == ["stale", "unready", "idle", "busy"]
