"""Rollout arithmetic: the budget, the removal order, and the budget's use in the PodDisruptionBudget."""
import pytest

from rewardpool_operator.pool import owned, rollout
from rewardpool_operator.api.spec import HASH_LABEL
from tests.factories import pool


@pytest.mark.parametrize("replicas,budget", [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (7, 1), (8, 2), (16, 4)])
def test_max_unavailable_is_a_quarter_at_least_one(replicas, budget):
    assert rollout.max_unavailable(replicas) == budget


@pytest.mark.parametrize("replicas,unavailable,allowed", [(2, 0, 1), (2, 1, 0), (2, 2, 0), (16, 0, 4), (16, 3, 1),
                                                          (16, 5, 0)])
def test_roll_allowance_never_exceeds_the_budget(replicas, unavailable, allowed):
    assert rollout.roll_allowance(replicas, unavailable) == allowed


def _pod(name, ts, hash_="new", ready=True, ip=None):
    return {"metadata": {"name": name, "creationTimestamp": ts, "labels": {HASH_LABEL: hash_}},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_removal_order_stale_then_not_ready_then_least_work_then_newest():
    pods = [_pod("old-busy", "2026-01-01T00:00:01Z", ip="a"), _pod("old-idle", "2026-01-01T00:00:02Z", ip="b"),
            _pod("new-idle", "2026-01-01T00:00:09Z", ip="c"), _pod("unready", "2026-01-01T00:00:00Z", ready=False),
            _pod("stale", "2026-01-01T00:00:00Z", hash_="old")]
    order = [p["metadata"]["name"] for p in rollout.removal_order(pods, "new", {"a": 3, "b": 0, "c": 0})]
    assert order == ["stale", "unready", "new-idle", "old-idle", "old-busy"]


def test_disruption_budget_matches_the_roll_budget():
    for replicas in (1, 2, 8, 16):
        pdb = owned.disruption_budget(pool(replicas=replicas))
        assert pdb["spec"]["maxUnavailable"] == rollout.max_unavailable(replicas)
        assert pdb["spec"]["selector"]["matchLabels"] == {"rewardpool.io/pool": "p",
                                                          "app.kubernetes.io/component": "worker"}
        assert pdb["metadata"]["ownerReferences"][0]["uid"] == "u-1"
