"""Rollout arithmetic: maxSurge and maxUnavailable resolved, the removal order, and the PodDisruptionBudget."""
import pytest
from pydantic import ValidationError

from rewardpool_operator.api.spec import HASH_LABEL, Rollout
from rewardpool_operator.pool import owned, rollout
from tests.factories import pool


@pytest.mark.parametrize("surge,unavailable,replicas,want", [
    ("25%", "25%", 0, (0, 1)),  # both 0: one may go, as a Deployment resolves it
    ("25%", "25%", 1, (1, 0)),  # the defaults keep a 1-replica pool serving: a surge, nothing unavailable
    ("25%", "25%", 2, (1, 0)),
    ("25%", "25%", 4, (1, 1)),
    ("25%", "25%", 7, (2, 1)),  # surge rounds up, unavailable down
    ("25%", "25%", 16, (4, 4)),
    (0, 1, 4, (0, 1)),
    (0, "10%", 4, (0, 1)),  # both resolve to 0
    (2, 0, 4, (2, 0)),
    ("100%", "100%", 3, (3, 3)),
    ("50%", 3, 5, (3, 3)),
])
def test_the_budget_resolves_as_a_deployments(surge, unavailable, replicas, want):
    b = rollout.budget(Rollout(maxSurge=surge, maxUnavailable=unavailable), replicas)
    assert (b.surge, b.unavailable) == want
    assert b.floor(replicas) == max(replicas - want[1], 0)


@pytest.mark.parametrize("surge,unavailable,message", [
    (0, 0, "cannot both be 0"), ("0%", 0, "cannot both be 0"), ("0%", "0%", "cannot both be 0"),
    ("25", 1, "a percentage of replicas"), ("x%", 1, "a percentage of replicas"), (1, -1, "must not be negative"),
])
def test_a_budget_that_cannot_roll_is_refused(surge, unavailable, message):
    with pytest.raises(ValidationError, match=message):
        Rollout(maxSurge=surge, maxUnavailable=unavailable)


def _pod(name, ts, hash_="new", ready=True, ip=None):
    return {"metadata": {"name": name, "creationTimestamp": ts, "labels": {HASH_LABEL: hash_}},
            "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_removal_order_stale_then_not_ready_then_least_work_then_newest():
    pods = [_pod("old-busy", "2026-01-01T00:00:01Z", ip="a"), _pod("old-idle", "2026-01-01T00:00:02Z", ip="b"),
            _pod("new-idle", "2026-01-01T00:00:09Z", ip="c"), _pod("unready", "2026-01-01T00:00:00Z", ready=False),
            _pod("stale", "2026-01-01T00:00:00Z", hash_="old")]
    order = [p["metadata"]["name"] for p in rollout.removal_order(pods, "new", {"a": 3, "b": 0, "c": 0})]
    assert order == ["stale", "unready", "new-idle", "old-idle", "old-busy"]


@pytest.mark.parametrize("replicas,rollout_spec,allowed", [
    (1, {}, 1), (2, {}, 1), (8, {}, 2), (16, {}, 4),  # the roll's maxUnavailable, at least one
    (8, {"maxUnavailable": 0}, 1), (8, {"maxUnavailable": 3}, 3), (10, {"maxUnavailable": "50%"}, 5),
])
def test_disruption_budget_is_the_rolls_at_least_one(replicas, rollout_spec, allowed):
    pdb = owned.disruption_budget(pool(replicas=replicas, rollout=rollout_spec))
    assert pdb["spec"]["maxUnavailable"] == allowed
    assert pdb["spec"]["selector"]["matchLabels"] == {"rewardpool.io/pool": "p",
                                                      "app.kubernetes.io/component": "worker"}
    assert pdb["metadata"]["ownerReferences"][0]["uid"] == "u-1"
