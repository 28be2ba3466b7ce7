"""Warning events are told once per problem (when its condition turns bad or changes reason), not on every
resync."""
from rewardpool_operator.api import conditions as C
from rewardpool_operator.pool import status


def st(*conds):
    return {"conditions": C.merge([], list(conds), 1, at="2026-01-01T00:00:00Z")}


def test_a_standing_problem_is_told_once():
    bad = st(C.cond("InvalidSpec", True, "UnknownScorer", "x"))
    assert status.warnings({}, bad) == [("Warning", "UnknownScorer", "x")]
    assert status.warnings(bad, bad) == []  # the next resync: nothing new
    other = st(C.cond("InvalidSpec", True, "ForbiddenPodSetting", "y"))
    assert status.warnings(bad, other) == [("Warning", "ForbiddenPodSetting", "y")]
    assert status.warnings(other, st(C.cond("InvalidSpec", False, "SpecValid", "ok"))) == []


def test_unparsable_spec_is_told_once():
    first = status.invalid("bad", {}, 1)
    assert [w[1] for w in status.warnings({}, first)] == ["SpecNotUnderstood"]
    assert status.warnings(first, status.invalid("bad", first, 1)) == []


def test_replica_failure_is_told_again_only_when_its_message_changes():
    a = st(C.cond("ReplicaFailure", True, "FailedCreate", "quota"))
    assert status.warnings({}, a) == [("Warning", "FailedCreate", "quota")]
    assert status.warnings(a, a) == []
    b = st(C.cond("ReplicaFailure", True, "FailedCreate", "webhook denied"))
    assert status.warnings(a, b) == [("Warning", "FailedCreate", "webhook denied")]


def _roll_status(pods, old, now, deadline=600):
    from rewardpool_operator.pool import sizing
    from rewardpool_operator.pool.observed import Signals
    from tests.factories import NET, pool, run_plan

    p = pool(replicas=2, progressDeadlineSeconds=deadline)
    s = sizing.compute(p.spec)
    pl = run_plan(pods)
    return status.compute(p, s, [], NET, pl, Signals(0, 0, None, 2), [], old, 1, "", now=now)


def test_a_roll_that_stops_changing_says_progress_deadline_exceeded_and_a_change_resets_it():
    from tests.factories import pod

    stuck = [pod("a", hash_="old"), pod("new", ready=False)]  # the new template's pod never gets Ready
    t0 = 1_900_000_000.0
    first = _roll_status(stuck, {}, t0)
    cond = lambda s: next(c for c in s["conditions"] if c["type"] == "Progressing")  # noqa: E731
    assert cond(first)["status"] == "True" and cond(first)["reason"] == "RollingUpdate"
    later = _roll_status(stuck, first, t0 + 599)
    assert cond(later)["status"] == "True" and later["progress"] == first["progress"]
    late = _roll_status(stuck, later, t0 + 601)
    assert cond(late)["status"] == "False" and cond(late)["reason"] == "ProgressDeadlineExceeded"
    assert "no progress for 601s" in cond(late)["message"] and "1/2 ready, 1 to replace" in cond(late)["message"]
    assert ("Warning", "ProgressDeadlineExceeded") in [w[:2] for w in status.warnings(later, late)]
    assert status.warnings(late, _roll_status(stuck, late, t0 + 700)) == []  # told once
    moved = _roll_status([pod("a", hash_="old"), pod("new")], late, t0 + 702)  # the new pod got Ready
    assert moved["progress"]["time"] != first["progress"]["time"] and cond(moved)["status"] == "True"
    from rewardpool_operator.cli import statusview
    assert "ProgressDeadlineExceeded" in [c["reason"] for c in statusview.unhappy(late)]


def test_a_roll_held_for_pinned_groups_says_so_and_is_not_a_stalled_roll():
    from rewardpool_operator.pool import sizing
    from rewardpool_operator.pool.observed import Signals
    from tests.factories import NET, NOW, pod, pool, rfc3339, run_plan

    held = [pod("a", hash_="old", ip="10.0.0.1"), pod("c", ip="10.0.0.3")]
    for p_ in held:
        p_["metadata"]["labels"]["rewardpool.io/scorer-version"] = "v2" if p_ is held[1] else "v1"
    rollout = {"maxVersionSkewSeconds": 900, "maxSurge": 0, "maxUnavailable": 1}  # the hold, not the surge, keeps a
    p = pool(replicas=2, progressDeadlineSeconds=60, rollout=rollout)
    old = {"roll": {"to": "H", "since": rfc3339(NOW - 100)},
           "progress": {"key": "stale", "time": rfc3339(NOW - 100)}}  # nothing changed for longer than 60 s
    pl = run_plan(held, groups={"10.0.0.1": 4}, old_status=old, rollout=rollout)
    new = status.compute(p, sizing.compute(p.spec), [], NET, pl, Signals(0, 0, None, 2), [], old, 1, "", now=NOW)
    cond = next(c for c in new["conditions"] if c["type"] == "Progressing")
    assert (cond["status"], cond["reason"]) == ("True", "WaitingForPinnedGroups")
    assert "4 caller group(s) pinned to scorer version v1, whose last worker a is kept" in cond["message"]
    assert "800s more" in cond["message"]
    assert new["roll"]["since"] == old["roll"]["since"] and new["roll"]["phase"] == "Replacing"
    assert status.compute(p, sizing.compute(p.spec), [], NET, run_plan([pod("c"), pod("d")]),
                          Signals(0, 0, None, 2), [], new, 1, "", now=NOW)["roll"] is None  # over: removed


def test_a_shadow_phase_says_its_agreement_and_a_disagreeing_one_is_held_and_warned():
    from rewardpool_operator.pool import sizing
    from rewardpool_operator.pool.observed import Signals
    from rewardpool_worker.contract import SHADOW_ANNOTATION
    from tests.factories import NET, NOW, pod, pool, rfc3339, run_plan

    def pods():
        old = [pod("a", hash_="old"), pod("b", hash_="old")]
        for x in old:
            x["metadata"]["labels"]["rewardpool.io/scorer-version"] = "v1"
        s = pod("s", ip="10.0.0.9")
        s["metadata"]["annotations"][SHADOW_ANNOTATION] = rfc3339(NOW)
        return old + [s]
    health = {"s": {"agreement": {"v1-0a1b2c3d": {"n": 30, "sx": 30.0, "sy": 31.0, "sxx": 40.0, "syy": 50.0, "sxy": 20.0}}}}
    old = {"progress": {"key": "stale", "time": rfc3339(NOW - 10_000)}}  # long past any progress deadline
    for spec, want in [({"shadow": True, "shadowSamples": 100}, ("True", "ShadowScoring")),
                       ({"shadow": True, "shadowSamples": 10, "shadowMinCorrelation": 0.5},
                        ("False", "ShadowDisagrees"))]:
        p = pool(replicas=2, progressDeadlineSeconds=60, rollout=spec)
        pl = run_plan(pods(), health=health, old_status=old, rollout=spec)
        new = status.compute(p, sizing.compute(p.spec), [], NET, pl, Signals(0, 0, None, 2), [], old, 1, "", now=NOW)
        cond = next(c for c in new["conditions"] if c["type"] == "Progressing")
        assert (cond["status"], cond["reason"]) == want, cond
        assert "30/" in cond["message"] and "in shadow of v1" in cond["message"]
        assert new["shadow"]["samples"] == 30 and new["shadow"]["workers"] == ["s"]
        # the old version serves every call, and all its workers are Ready: the pool can score (a job that waits
        # for Ready before it sends traffic must not wait on a shadow that needs traffic)
        assert next(c for c in new["conditions"] if c["type"] == "Ready")["status"] == "True"
    degraded = next(c for c in new["conditions"] if c["type"] == "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "ShadowDisagrees")
    assert ("Warning", "ShadowDisagrees") in [(t, r) for t, r, _ in status.warnings(old, new)]


def test_the_shadow_status_is_a_merge_patch_that_settles():
    """A null in a merge patch deletes the key: the status sends none it means to keep, and once written, the
    next pass computes the same object (no write every pass)."""
    from rewardpool_operator.pool.status import _as_patch

    new = {"to": "H", "samples": 3, "correlation": None, "promoted": None}
    sent = _as_patch(new, {"to": "G", "samples": 9, "promoted": "2026-12-01T00:00:00Z", "correlation": 0.5})
    assert sent == {"to": "H", "samples": 3, "correlation": None, "promoted": None}  # the old values go
    stored = {k: v for k, v in sent.items() if v is not None}  # what the API server keeps
    assert _as_patch(new, stored) == stored
    assert _as_patch(None, stored) is None


def test_ready_during_a_roll_only_in_the_shadow_phase_where_the_old_version_serves_every_call():
    from rewardpool_operator.pool import sizing
    from rewardpool_operator.pool.observed import Signals
    from tests.factories import NET, pod, pool, run_plan

    p = pool(replicas=2)
    old = [pod("a", hash_="old"), pod("b", hash_="old")]
    for x in old:
        x["metadata"]["labels"]["rewardpool.io/scorer-version"] = "v1"
    # an ordinary roll, both serving workers Ready, one of them stale: its workers are being replaced, Ready says so
    pl = run_plan([old[0], pod("b", hash_="old", drain=1), pod("c")])
    assert pl.phase == "Replacing" and pl.ready == 2 and pl.stale == 1
    new = status.compute(p, sizing.compute(p.spec), [], NET, pl, Signals(0, 0, None, 2), [], {}, 1, "")
    assert next(c for c in new["conditions"] if c["type"] == "Ready")["status"] == "False"
    pl = run_plan(old, rollout={"shadow": True})
    assert pl.phase == "Shadow"
    new = status.compute(p, sizing.compute(p.spec), [], NET, pl, Signals(0, 0, None, 2), [], {}, 1, "")
    assert next(c for c in new["conditions"] if c["type"] == "Ready")["status"] == "True"
    pl = run_plan([old[0], {**old[1], "status": {**old[1]["status"], "conditions": [{"type": "Ready", "status": "False"}]}}],
                  rollout={"shadow": True})
    new = status.compute(p, sizing.compute(p.spec), [], NET, pl, Signals(0, 0, None, 2), [], {}, 1, "")
    assert next(c for c in new["conditions"] if c["type"] == "Ready")["status"] == "False"  # one old one not Ready
