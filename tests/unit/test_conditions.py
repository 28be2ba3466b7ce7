from rewardpool_operator.api import conditions as C


def test_merge_keeps_transition_time_unless_status_flips():
    first = C.merge(None, [C.cond("Ready", False, "WorkersNotReady", "0/2")], 1, at="t1")
    same = C.merge(first, [C.cond("Ready", False, "WorkersNotReady", "1/2")], 2, at="t2")
    flipped = C.merge(same, [C.cond("Ready", True, "AllWorkersReady", "2/2")], 2, at="t3")
    assert first[0]["lastTransitionTime"] == "t1" and first[0]["observedGeneration"] == 1
    assert same[0]["lastTransitionTime"] == "t1" and same[0]["observedGeneration"] == 2
    assert flipped[0]["lastTransitionTime"] == "t3" and flipped[0]["status"] == "True"
