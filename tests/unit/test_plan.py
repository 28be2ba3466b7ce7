"""The reconcile's plan, table-driven (pure: no API server). Each case is a set of observed pods and nodes;
the assertions are on the writes the operator would make."""
from __future__ import annotations

import pytest

from rewardpool_operator.pool import builders, sizing
from rewardpool_operator.pool.observed import Network, Observed, Signals
from rewardpool_operator.pool.plan import NODE_LOST_SECONDS, lost_reason, plan
from tests.factories import NET, NOW, pod, pool, ready_node, rfc3339, run_plan

def deleted(pl):
    return sorted(n for n, *_ in pl.delete)


def drained(pl):
    return [n for n, _ in pl.drain]


def test_steady_pool_does_nothing():
    pl = run_plan([pod("a"), pod("b")])
    assert (pl.delete, pl.drain, pl.create) == ([], [], 0) and pl.ready == 2 and pl.active == 2


@pytest.mark.parametrize("lost", [
    pod("b", phase="Failed", reason="Evicted"),
    pod("b", phase="Succeeded"),
    pod("b", node_name="gone-node"),
    pod("b", node_name="n1"),  # n1 NotReady for longer than the grace
], ids=["evicted", "succeeded", "node-deleted", "node-not-ready"])
def test_lost_worker_is_deleted_and_replaced_and_not_counted(lost):
    nodes = [ready_node(), ready_node("n1", ready=False, since=NOW - NODE_LOST_SECONDS - 1)]
    pl = run_plan([pod("a"), lost], nodes=nodes)
    assert deleted(pl) == ["b"] and pl.create == 1 and pl.lost == 1
    assert pl.delete[0][2] == "WorkerLost" and pl.delete[0][1] == "Warning"
    assert pl.ready == 1  # the lost worker is not counted


def test_node_briefly_not_ready_is_not_lost_yet():
    nodes = [ready_node(), ready_node("n1", ready=False, since=NOW - 5)]
    assert lost_reason(pod("b", node_name="n1"), {n["metadata"]["name"]: n for n in nodes}, NOW) is None
    assert run_plan([pod("a"), pod("b", node_name="n1")], nodes=nodes).create == 0


DRAIN_FIRST = {"maxSurge": 0, "maxUnavailable": 1}  # the roll of a pool with no room to spare


@pytest.mark.parametrize("rollout,steps", [
    # the defaults (25%/25%: surge 1, unavailable 0 at 2 replicas): a new worker first, an old one once it is Ready
    ({}, [
        (["old:a", "old:b"], [], 1),
        (["old:a", "old:b", "new:c~"], [], 0),  # c not Ready: nothing drains, nothing more starts
        (["old:a", "old:b", "new:c"], ["b"], 0),  # c Ready: the newest old one drains
        (["old:a", "old:b*", "new:c"], [], 1),  # b draining: the next new worker starts (draining is not counted)
        (["old:a", "new:c", "new:d~"], [], 0),
        (["old:a", "new:c", "new:d"], ["a"], 0),
    ]),
    # no surge: an old worker drains first, its replacement starts once it drains
    (DRAIN_FIRST, [
        (["old:a", "old:b"], ["b"], 0),
        (["old:a", "old:b*"], [], 1),
        (["old:a", "new:c~"], [], 0),  # the replacement is not Ready yet
        (["old:a", "new:c"], ["a"], 0),
    ]),
    ({"maxSurge": 2, "maxUnavailable": 0}, [(["old:a", "old:b"], [], 2), (["old:a", "old:b", "new:c", "new:d"],
                                                                          ["b", "a"], 0)]),
    ({"maxSurge": "100%", "maxUnavailable": "100%"}, [(["old:a", "old:b"], ["b", "a"], 2)]),  # all at once
], ids=["defaults", "drain-first", "surge-2", "all-at-once"])
def test_a_roll_moves_within_max_surge_and_max_unavailable(rollout, steps):
    """Each row: the pods (template:name, ~ not Ready, * draining), what drains, how many start."""
    for pods, drains, creates in steps:
        made = [pod(n, hash_="old" if t == "old" else "H", ready="~" not in n, drain=1 if "*" in n else None,
                    created=i) for i, (t, n) in enumerate(x.split(":") for x in pods)]
        for x in made:
            x["metadata"]["name"] = x["metadata"]["name"].strip("~*")
        pl = run_plan(made, rollout=rollout)
        assert (drained(pl), pl.create) == (drains, creates), pods


def test_a_one_replica_pool_keeps_its_worker_until_the_new_one_is_ready():
    pl = run_plan([pod("a", hash_="old")], replicas=1)
    assert (pl.drain, pl.create) == ([], 1)
    pl = run_plan([pod("a", hash_="old"), pod("b", ready=False)], replicas=1)
    assert (pl.drain, pl.create, pl.ready) == ([], 0, 1)  # not a surplus to scale in: the surge is the roll's
    pl = run_plan([pod("a", hash_="old"), pod("b")], replicas=1)
    assert (drained(pl), pl.create) == (["a"], 0)


def test_a_terminating_pod_holds_up_nothing():
    pods = [pod("a", hash_="old"), pod("b", hash_="old"), pod("c", hash_="old", deleted=1)]
    assert (drained(run_plan(pods, rollout=DRAIN_FIRST)), run_plan(pods).create) == (["b"], 1)


def test_a_rollback_replaces_the_unavailable_pods_of_the_bad_template_at_once():
    # spec.image was set to a tag that is not there and back: the bad template's pod never became Ready
    pl = run_plan([pod("good", hash_="H"), pod("bad", hash_="bad-image", ready=False)])
    assert drained(pl) == ["bad"] and pl.create == 1  # within the surge, its replacement starts beside it
    pl = run_plan([pod("good", hash_="H"), pod("bad", hash_="bad-image", ready=False)], rollout=DRAIN_FIRST)
    assert drained(pl) == ["bad"] and pl.create == 0  # no surge: once it is marked
    pl = run_plan([pod("good", hash_="H"), pod("bad", hash_="bad-image", ready=False, drain=1)],
             silent={"bad": 11.0})
    assert deleted(pl) == ["bad"] and pl.create == 1  # not Ready, silent: deleted; replaced at once


def test_unavailable_stale_pods_go_outside_the_budget():
    pods = [pod("r0", hash_="old"), pod("r1", hash_="old"), pod("u0", hash_="old", ready=False),
            pod("u1", hash_="old", ready=False)]
    pl = run_plan(pods, replicas=4, rollout=DRAIN_FIRST)  # 2 Ready of 4, the floor 3: no Ready one may go
    assert sorted(drained(pl)) == ["u0", "u1"]
    pl = run_plan([pod(f"r{i}", hash_="old", created=i) for i in range(4)] + [pod("u", hash_="old", ready=False)],
             replicas=5, rollout=DRAIN_FIRST)
    assert drained(pl) == ["u"]  # 4 Ready of 5, the floor 4


def test_a_roll_to_a_template_that_never_gets_ready_stops_at_the_budget():
    pl = run_plan([pod("a", hash_="old"), pod("new", ready=False)], rollout=DRAIN_FIRST)
    assert pl.drain == [] and pl.create == 0  # the new pod is not stale: it keeps its place, a stays serving
    pl = run_plan([pod("a", hash_="old"), pod("b", hash_="old"), pod("new", ready=False)])
    assert pl.drain == [] and pl.create == 0  # the surge is spent on a worker that is not Ready


def test_big_roll_starts_and_drains_a_quarter():
    pods = [pod(f"w{i}", hash_="old", created=i) for i in range(16)]
    pl = run_plan(pods, replicas=16)
    assert (len(pl.drain), pl.create) == (4, 4)


def test_scale_in_drains_the_newest_idle_and_creates_nothing():
    pods = [pod("a", created=1), pod("b", created=2), pod("c", created=3), pod("d", created=4)]
    pl = run_plan(pods, replicas=2)
    assert drained(pl) == ["d", "c"] and pl.create == 0 and pl.delete == []


def test_scale_up_creates():
    pl = run_plan([pod("a")], replicas=4)
    assert pl.create == 3 and pl.drain == []


def test_blocked_pool_only_cleans_up_dead_workers():
    pods = [pod("a", hash_="old"), pod("b", phase="Failed")]
    for pl in (run_plan(pods, blocking=True), run_plan(pods, network=Network(False, "AttachmentNotFound", "x"))):
        assert (deleted(pl), pl.drain, pl.create, pl.managed) == (["b"], [], 0, False)
        assert "replacing" not in pl.delete[0][3]


def test_drain_verdicts_delete_only_when_nothing_is_lost():
    pods = [pod("a"), pod("b"), pod("c", drain=30), pod("d", drain=30), pod("e", drain=30)]
    pl = run_plan(pods, health={"c": {"phase": "drained"}, "d": {"phase": "drained"}, "e": None},
             used={"c": 0, "d": 4096}, silent={"e": 1})
    assert deleted(pl) == ["c"]  # d's segment holds outputs; e went silent a moment ago


def test_oldest_drain_age_is_planned_for_the_metric():
    assert run_plan([pod("a"), pod("b")]).oldest_drain_seconds == 0.0
    pl = run_plan([pod("a"), pod("b", drain=30), pod("c", drain=90)], health={"b": None, "c": None})
    assert pl.oldest_drain_seconds == pytest.approx(90, abs=1)


def test_a_scale_up_during_a_roll_starts_new_workers_within_the_surge():
    pl = run_plan([pod("a", hash_="old"), pod("b", hash_="old")], replicas=3)  # surge 1 at 3 replicas
    assert pl.create == 2 and pl.drain == []
    pl = run_plan([pod("a", hash_="old"), pod("b", hash_="old")], replicas=3, rollout=DRAIN_FIRST)
    assert pl.create == 1 and pl.drain == []  # the floor (2) is the two Ready old workers


def test_status_counts_the_scorer_versions_serving():
    def versioned(name, version, **kw):
        p = pod(name, **kw)
        p["metadata"]["labels"]["rewardpool.io/scorer-version"] = version
        return p
    pl = run_plan([versioned("a", "v1"), versioned("b", "v1", ready=False), versioned("c", "v2"), pod("d")],
                  replicas=4)
    assert pl.versions == [{"version": "unknown", "label": "unknown", "workers": 1, "ready": 1},
                           {"version": "v1", "label": "v1", "workers": 2, "ready": 1},
                           {"version": "v2", "label": "v2", "workers": 1, "ready": 1}]


def test_versions_are_counted_by_what_workers_report_and_a_new_checkpoint_at_the_same_path_is_said():
    pods = [_versioned("a", "v1", ip="10.0.0.1"), _versioned("b", "v1", ip="10.0.0.2"),
            _versioned("c", "v1", ip="10.0.0.3", ready=False)]
    p = pool(replicas=3, drainTimeoutSeconds=600)
    s = sizing.compute(p.spec)
    reported = {"10.0.0.1": "v1-0a1b2c3d", "10.0.0.2": "v1-99887766"}  # b read other model files at its start
    obs = Observed(pods=pods, nodes={"n0": ready_node()}, signals=Signals(0, 0, None, 2, versions=reported), now=NOW)
    pl = plan(p, s, builders.pod_template(p, s), "H", obs, False, NET, {})
    assert pl.versions == [{"version": "v1", "label": "v1", "workers": 1, "ready": 0},  # c reports nothing yet
                           {"version": "v1-0a1b2c3d", "label": "v1", "workers": 1, "ready": 1},
                           {"version": "v1-99887766", "label": "v1", "workers": 1, "ready": 1}]
    assert [x.reason for x in pl.problems] == ["ModelFilesDiffer"]
    assert "v1-0a1b2c3d, v1-99887766" in pl.problems[0].message and not pl.problems[0].blocking
    same = Observed(pods=pods, nodes={"n0": ready_node()}, now=NOW,
                    signals=Signals(0, 0, None, 2, versions={"10.0.0.1": "v1-0a1b2c3d", "10.0.0.2": "v1-0a1b2c3d"}))
    assert plan(p, s, builders.pod_template(p, s), "H", same, False, NET, {}).problems == []


def _versioned(name, version, **kw):
    p = pod(name, **kw)
    p["metadata"]["labels"]["rewardpool.io/scorer-version"] = version
    return p


def _rolling_since(seconds_ago):
    return {"roll": {"to": "H", "since": rfc3339(NOW - seconds_ago)}}


SKEW = {"rollout": {"maxVersionSkewSeconds": 300, **DRAIN_FIRST}}  # the hold, not the surge, keeps a
# the old version's last Ready worker, and a Ready worker of the new template
LAST_OLD = [_versioned("a", "v1", hash_="old", ip="10.0.0.1"), _versioned("c", "v2", ip="10.0.0.3")]


def test_a_roll_keeps_the_old_versions_last_worker_while_groups_are_pinned_to_it():
    pl = run_plan(LAST_OLD, groups={"10.0.0.1": 3}, old_status=_rolling_since(10), **SKEW)
    assert pl.drain == [] and "3 caller group(s) pinned to scorer version v1, whose last worker a is kept" in pl.held
    # the clock is kept across reconciles (a roll recorded before phases existed is in its Replacing phase)
    assert pl.roll == {"to": "H", "since": rfc3339(NOW - 10), "phase": "Replacing", "phaseSince": rfc3339(NOW - 10),
                       "pins": {"v1": rfc3339(NOW)}}


@pytest.mark.parametrize("case", [
    dict(groups={"10.0.0.1": 3}, old_status=_rolling_since(301), **SKEW),  # held long enough: the groups move
    dict(groups={"10.0.0.1": 0}, old_status=_rolling_since(10), **SKEW),  # nothing pinned to v1
    dict(groups={"10.0.0.3": 5}, old_status=_rolling_since(10), **SKEW),  # groups pinned to the new version
    dict(groups={"10.0.0.1": 3}, old_status=_rolling_since(10), rollout=DRAIN_FIRST),  # no maxVersionSkewSeconds
], ids=["skew-passed", "no-groups", "groups-on-new", "no-hold-asked"])
def test_a_roll_goes_on_when_nothing_pinned_is_left_on_the_old_version_or_the_skew_is_spent(case):
    pl = run_plan(LAST_OLD, **case)
    assert drained(pl) == ["a"] and pl.held == ""


def test_only_a_versions_last_worker_is_held_and_a_new_roll_starts_its_own_clock():
    pods = [_versioned("a", "v1", hash_="old", ip="10.0.0.1", created=1),
            _versioned("b", "v1", hash_="old", ip="10.0.0.2", created=2)]
    pl = run_plan(pods, groups={"10.0.0.1": 2, "10.0.0.2": 2}, **SKEW)
    assert drained(pl) == ["b"] and pl.held == ""  # a still serves v1's groups
    assert pl.roll == {"to": "H", "since": rfc3339(NOW), "phase": "Replacing", "phaseSince": rfc3339(NOW),
                       "pins": {"v1": rfc3339(NOW)}}  # first seen now
    old = {"roll": {"to": "another-template", "since": rfc3339(NOW - 999)}}
    assert run_plan(LAST_OLD, groups={"10.0.0.1": 1}, old_status=old, **SKEW).roll["since"] == rfc3339(NOW)
    assert run_plan([pod("c"), pod("d")], old_status=_rolling_since(5), **SKEW).roll is None  # no roll: cleared


# ---- shadow scoring (spec.rollout.shadow) ------------------------------------------------------------------------
SHADOW = {"rollout": {"shadow": True, "shadowSamples": 100}}
OLD_TWO = [_versioned("a", "v1", hash_="old", ip="10.0.0.1", created=1),
           _versioned("b", "v1", hash_="old", ip="10.0.0.2", created=2)]


def _shadow_pod(name="s", hash_="H", ready=True):
    from rewardpool_worker.contract import SHADOW_ANNOTATION

    p = pod(name, hash_=hash_, ready=ready, ip="10.0.0.9")
    p["metadata"]["annotations"][SHADOW_ANNOTATION] = rfc3339(NOW - 60)
    return p


def _agreeing(n, sx=10.0, sy=12.0, sxx=30.0, syy=40.0, sxy=34.0):
    return {"s": {"agreement": {"v1-0a1b2c3d": {"n": n, "sx": sx, "sy": sy, "sxx": sxx, "syy": syy, "sxy": sxy}}}}


def _in_shadow_since(seconds_ago, promoted=None):
    since = rfc3339(NOW - seconds_ago)
    return {"roll": {"to": "H", "since": since, "phase": "Shadow", "phaseSince": since, "from": ["v1"]},
            "shadow": {"to": "H", "since": since, "promoted": promoted}}


def test_a_roll_to_another_scorer_version_starts_one_shadow_worker_and_drains_nothing():
    pl = run_plan(OLD_TWO, **SHADOW)
    assert (pl.create_shadow, pl.create, pl.drain, pl.promote) == (1, 0, [], [])
    assert pl.shadow_state == "scoring" and pl.shadow["against"] == ["v1"] and pl.shadow["samples"] == 0
    assert pl.shadow["since"] == rfc3339(NOW) and pl.shadow["promoted"] is None


def test_with_no_surge_the_shadow_takes_an_old_workers_place_but_never_the_last_one():
    no_surge = {"rollout": {"shadow": True, "shadowSamples": 100, "maxSurge": 0, "maxUnavailable": 1}}
    pl = run_plan(OLD_TWO, **no_surge)
    assert (pl.phase, drained(pl), pl.create_shadow, pl.create) == ("Shadow", ["b"], 1, 0)
    pl = run_plan(OLD_TWO[:1], replicas=1, **no_surge)  # the last one stays: the shadow needs it to compare with
    assert (pl.phase, pl.drain, pl.create_shadow, pl.create) == ("Shadow", [], 1, 0)


def test_while_the_shadow_gathers_samples_the_old_version_serves_alone():
    pl = run_plan(OLD_TWO + [_shadow_pod()], health=_agreeing(37), old_status=_in_shadow_since(60), **SHADOW)
    assert (pl.create_shadow, pl.create, pl.drain, pl.promote) == (0, 0, [], [])
    assert "37/100 samples" in pl.shadow_message and pl.shadow["since"] == rfc3339(NOW - 60)
    assert pl.versions == [{"version": "v1", "label": "v1", "workers": 2, "ready": 2}]  # the shadow serves nothing
    assert pl.active == 2 and pl.stale == 2  # nor one of the replicas
    # its agreement, from the sums the worker reported: r and the mean difference as the contract computes them
    from rewardpool_worker.contract import Agreement
    a = Agreement(n=37, sx=10.0, sy=12.0, sxx=30.0, syy=40.0, sxy=34.0)
    assert pl.shadow["correlation"] == round(a.correlation, 4) and pl.shadow["meanDifference"] == round(2 / 37, 6)


def test_enough_samples_promote_the_shadow_then_the_roll_goes_on_with_an_old_worker_first():
    pl = run_plan(OLD_TWO + [_shadow_pod()], health=_agreeing(100), old_status=_in_shadow_since(60), **SHADOW)
    assert pl.promote == ["s"] and pl.promoted_now and pl.shadow["promoted"] == rfc3339(NOW)
    # the status says what the gate passed on (the real node showed the pass before's 24 of 40 samples)
    assert pl.shadow["samples"] == 100 and pl.shadow["since"] == rfc3339(NOW - 60)
    assert pl.drain == [] and pl.create == 0
    # the next pass: promoted in the status, the annotation not yet gone from the cache: promoted again (no
    # event), and it is a surplus worker of the new template, so an old one drains
    assert pl.phase_changed and pl.roll["phase"] == "Replacing" and pl.roll["phaseSince"] == rfc3339(NOW)
    after = run_plan(OLD_TWO + [_shadow_pod()], old_status={"roll": pl.roll, "shadow": pl.shadow}, **SHADOW)
    assert after.promote == ["s"] and not after.promoted_now and after.shadow_state == ""
    assert drained(after) == ["b"] and after.create == 0 and after.shadow == pl.shadow


def test_a_shadow_below_the_minimum_correlation_holds_the_roll_and_says_so():
    spec = {"rollout": {"shadow": True, "shadowSamples": 10, "shadowMinCorrelation": 0.99}}
    pl = run_plan(OLD_TWO + [_shadow_pod()], health=_agreeing(50), old_status=_in_shadow_since(60), **spec)
    assert pl.shadow_state == "disagrees" and pl.promote == [] and pl.drain == []
    assert [x.reason for x in pl.problems] == ["ShadowDisagrees"] and "shadowMinCorrelation 0.99" in pl.problems[0].message


def test_no_shadow_phase_when_a_worker_of_the_new_template_serves_already():
    pl = run_plan(OLD_TWO + [pod("c")], **SHADOW)
    assert pl.create_shadow == 0 and pl.shadow_state == "" and pl.phase == "Replacing"


def test_a_roll_begun_while_no_old_worker_is_ready_still_starts_in_shadow():
    # the one old worker of a replicas-1 pool restarting, or a store failover: the spec change still goes
    # through a shadow (skipping it would change the reward without a comparison)
    pods = [_versioned("a", "v1", hash_="old", ready=False)]
    pl = run_plan(pods, replicas=1, **SHADOW)
    assert pl.phase == "Shadow" and pl.create_shadow == 1 and pl.create == 0 and pl.drain == []
    assert pl.roll["from"] == ["v1"] and pl.phase_changed


def test_a_roll_that_keeps_the_scorer_version_needs_no_shadow():
    from rewardpool_operator.pool import builders, sizing as sizing_mod
    from tests.factories import pool
    p = pool(replicas=2, drainTimeoutSeconds=600, **SHADOW)
    same = builders.pod_template(p, sizing_mod.compute(p.spec))["metadata"]["labels"]["rewardpool.io/scorer-version"]
    pl = run_plan([_versioned("a", same, hash_="old"), _versioned("b", same, hash_="old")], **SHADOW)
    assert (pl.create_shadow, pl.create, pl.drain) == (0, 1, [])  # an ordinary roll (resources, say)


def test_in_the_shadow_phase_stale_shadows_go():
    pl = run_plan(OLD_TWO + [_shadow_pod(), _shadow_pod("t", hash_="older")], health=_agreeing(5),
                  old_status=_in_shadow_since(60), **SHADOW)
    assert drained(pl) == ["t"]  # the shadow of a template no longer wanted serves nothing: it goes at once
    assert pl.create == 0 and pl.create_like == [] and pl.create_shadow == 0


def test_turning_shadow_off_mid_way_promotes_the_shadow_worker():
    pl = run_plan(OLD_TWO + [_shadow_pod()], health=_agreeing(5), old_status=_in_shadow_since(60))
    assert pl.promote == ["s"] and pl.promoted_now and "turned off" in pl.shadow_message


# ---- the interactions: the gate and the hold under readiness blips, scale changes and lost workers -------------------
DISAGREEING = {"s": {"agreement": {"v1-0a1b2c3d": {"n": 100, "sx": 50.0, "sy": 50.0, "sxx": 40.0, "syy": 40.0,
                                                   "sxy": 22.0}}}}  # r = -0.2
STRICT = {"rollout": {"shadow": True, "shadowSamples": 100, "shadowMinCorrelation": 0.9}}


@pytest.mark.parametrize("old_ready", [[False], [False, False], [True, False]], ids=["one-restarting",
                                                                                     "failover", "one-blips"])
def test_a_disagreeing_shadow_is_never_promoted_by_old_workers_not_being_ready(old_ready):
    olds = [_versioned(f"o{i}", "v1", hash_="old", ready=r, created=i) for i, r in enumerate(old_ready)]
    pl = run_plan(olds + [_shadow_pod()], replicas=len(olds), health=DISAGREEING, old_status=_in_shadow_since(60),
                  **STRICT)
    assert pl.promote == [] and pl.phase == "Shadow" and pl.shadow_state == "disagrees"
    assert pl.drain == [] and pl.create == 0  # nothing of the new template serves, nothing old is rolled


def test_while_the_shadow_runs_lost_and_missing_workers_are_copies_of_an_old_one():
    lost = _versioned("b", "v1", hash_="old", phase="Failed")
    pl = run_plan([OLD_TWO[0], lost, _shadow_pod()], health=_agreeing(5), old_status=_in_shadow_since(60), **SHADOW)
    assert deleted(pl) == ["b"] and pl.create == 0 and pl.create_shadow == 0
    assert [x["metadata"]["labels"]["rewardpool.io/template-hash"] for x in pl.create_like] == ["old"]
    assert [x["metadata"]["labels"]["rewardpool.io/scorer-version"] for x in pl.create_like] == ["v1"]
    # a scale-up in the shadow phase adds old-version workers too (the old version serves every call)
    pl = run_plan(OLD_TWO + [_shadow_pod()], replicas=4, health=_agreeing(5), old_status=_in_shadow_since(60),
                  **SHADOW)
    assert pl.create == 0 and len(pl.create_like) == 2 and pl.active == 4 and pl.stale == 4


def test_a_shadow_with_no_sample_past_the_deadline_says_why():
    stuck = _shadow_pod(ready=False)
    stuck["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                          "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."})
    late = _in_shadow_since(700)  # progressDeadlineSeconds defaults to 600
    pl = run_plan(OLD_TWO + [stuck], old_status=late, **SHADOW)
    assert pl.shadow_state == "stalled" and "cannot be scheduled: 0/3 nodes are available" in pl.shadow_message
    assert [x.reason for x in pl.problems] == ["ShadowStalled"]
    # a quiet pool (a Ready shadow, no traffic) is said too, as such, and is not a fault
    pl = run_plan(OLD_TWO + [_shadow_pod()], old_status=late, **SHADOW)
    assert pl.shadow_state == "stalled" and "no call has reached it" in pl.shadow_message and pl.problems == []
    # within the deadline, or with samples, it is just scoring
    assert run_plan(OLD_TWO + [stuck], old_status=_in_shadow_since(60), **SHADOW).shadow_state == "scoring"
    assert run_plan(OLD_TWO + [_shadow_pod()], health=_agreeing(3), old_status=late,
                    **SHADOW).shadow_state == "scoring"


def _replacing(since_ago, promoted_ago, pins=None):
    roll = {"to": "H", "since": rfc3339(NOW - since_ago), "phase": "Replacing",
            "phaseSince": rfc3339(NOW - promoted_ago)}
    if pins:
        roll["pins"] = {v: rfc3339(NOW - ago) for v, ago in pins.items()}
    return {"roll": roll}


def test_the_skew_window_starts_when_the_new_version_takes_traffic_not_at_the_shadow():
    # the shadow phase took 1000 s; promoted 10 s ago: the 300 s window has barely begun
    pl = run_plan(LAST_OLD, groups={"10.0.0.1": 3}, old_status=_replacing(1000, 10), **SKEW)
    assert pl.drain == [] and "290s more" in pl.held
    pl = run_plan(LAST_OLD, groups={"10.0.0.1": 3}, old_status=_replacing(1000, 301), **SKEW)
    assert drained(pl) == ["a"] and pl.held == ""


def test_a_scale_in_during_a_roll_keeps_the_pinned_versions_last_worker():
    pods = LAST_OLD + [_versioned("d", "v2", ip="10.0.0.4", created=5)]
    pl = run_plan(pods, replicas=2, groups={"10.0.0.1": 3}, old_status=_replacing(100, 10), **SKEW)
    assert drained(pl) == ["d"] and "whose last worker a is kept" in pl.held  # another worker goes instead
    pl = run_plan(pods, replicas=1, groups={"10.0.0.1": 3}, old_status=_replacing(100, 10), **SKEW)
    assert sorted(drained(pl)) == ["c", "d"]


def test_a_held_worker_that_misses_readiness_probes_is_still_held():
    # not Ready: its groups are not read this pass, but the status remembers them for GROUP_ACTIVE_SECONDS
    blip = [_versioned("a", "v1", hash_="old", ip="10.0.0.1", ready=False), _versioned("c", "v2", ip="10.0.0.3")]
    pl = run_plan(blip, old_status=_replacing(100, 10, pins={"v1": 20}), **SKEW)
    assert pl.drain == [] and "caller groups (seen 20s ago; its workers are not read now) pinned to scorer " \
        "version v1, whose last worker a is kept" in pl.held
    assert pl.roll["pins"] == {"v1": rfc3339(NOW - 20)}  # kept as it was: no status write for it
    pl = run_plan(blip, old_status=_replacing(100, 10, pins={"v1": 61}), **SKEW)
    assert drained(pl) == ["a"] and "pins" not in pl.roll  # lapsed: nothing reported it for longer


def test_a_pinned_versions_lost_last_worker_is_replaced_by_a_copy_of_itself():
    lost = _versioned("a", "v1", hash_="old", ip="10.0.0.1", phase="Failed")
    pl = run_plan([lost, _versioned("c", "v2", ip="10.0.0.3")], old_status=_replacing(100, 10, pins={"v1": 5}),
                  **SKEW)
    assert deleted(pl) == ["a"] and pl.create == 0
    assert [x["metadata"]["labels"]["rewardpool.io/scorer-version"] for x in pl.create_like] == ["v1"]
    pl = run_plan([lost, _versioned("c", "v2", ip="10.0.0.3")], old_status=_replacing(100, 10), **SKEW)
    assert pl.create == 1 and pl.create_like == []  # nothing pinned: a worker of the new template


def test_the_pass_that_records_a_new_phase_says_so_and_a_kept_phase_does_not():
    pl = run_plan(OLD_TWO, **SHADOW)
    assert pl.phase_changed and pl.roll["phase"] == "Shadow"
    again = run_plan(OLD_TWO + [_shadow_pod()], health=_agreeing(5), old_status={"roll": pl.roll}, **SHADOW)
    assert not again.phase_changed and again.roll["phaseSince"] == pl.roll["phaseSince"]
    done = run_plan([pod("c"), pod("d")], old_status={"roll": pl.roll}, **SHADOW)
    assert done.roll is None and done.phase_changed


def test_a_blocked_pool_keeps_its_roll_record():
    old = _in_shadow_since(60)
    pl = run_plan(OLD_TWO + [_shadow_pod()], blocking=True, old_status=old, **SHADOW)
    assert pl.roll == old["roll"] and pl.shadow == old["shadow"] and not pl.phase_changed


def test_pins_survive_a_refused_status_write_and_a_new_roll_over_the_last():
    blip = [_versioned("a", "v1", hash_="old", ip="10.0.0.1", ready=False), _versioned("c", "v2", ip="10.0.0.3")]
    # the pin was never written (the status write was refused): the operator's own memory holds it
    p = pool(replicas=2, drainTimeoutSeconds=600, **SKEW)
    s = sizing.compute(p.spec)
    obs = Observed(pods=blip, nodes={"n0": ready_node()}, signals=Signals(0, 0, None, 2), now=NOW,
                   pins={"v1": NOW - 20})
    pl = plan(p, s, builders.pod_template(p, s), "H", obs, False, NET, _replacing(100, 10))
    assert pl.drain == [] and pl.pins == {"v1": NOW - 20} and pl.roll["pins"] == {"v1": rfc3339(NOW - 20)}
    # a roll begun over another (a second spec change) keeps the last record's pins
    other = {"roll": {"to": "another", "since": rfc3339(NOW - 100), "phase": "Replacing",
                      "phaseSince": rfc3339(NOW - 90), "pins": {"v1": rfc3339(NOW - 20)}}}
    pl = run_plan(blip, old_status=other, **SKEW)
    assert pl.roll["since"] == rfc3339(NOW) and pl.roll["pins"] == {"v1": rfc3339(NOW - 20)}
    assert pl.drain == [] and "whose last worker a is kept" in pl.held
