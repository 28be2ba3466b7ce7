"""Warning events are told once per problem (when its condition turns bad or changes reason), not on every
resync."""
from rewardpool_operator import conditions as C
from rewardpool_operator import status


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
