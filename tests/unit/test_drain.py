from rewardpool_operator.drain import verdict


def v(health, lent=True, used=0, waited=10, timeout=600):
    return verdict("w-1", health, lent, used, waited, timeout)


def test_unreachable_worker_is_deleted_at_once():
    assert (v(None).action, v(None).reason) == ("delete", "WorkerUnreachable")


def test_drained_with_an_empty_segment_is_deleted():
    assert v({"phase": "drained"}, used=0).action == "delete"
    assert v({"phase": "drained"}, lent=False, used=None).action == "delete"
    unchecked = v({"phase": "drained"}, used=None)
    assert unchecked.action == "delete" and "not checked" in unchecked.message


def test_outputs_in_the_segment_keep_the_worker_until_they_are_gone():
    r = v({"phase": "drained"}, used=4096)
    assert (r.action, r.reason) == ("wait", "Draining") and "4096 bytes" in r.message
    late = v({"phase": "drained"}, used=4096, waited=700)
    assert (late.action, late.reason) == ("stuck", "DrainStuck") and "kept" in late.message


def test_in_flight_work_waits_then_times_out():
    assert v({"phase": "draining", "in_flight": 2}).action == "wait"
    r = v({"phase": "draining", "in_flight": 2}, waited=601)
    assert (r.action, r.reason) == ("delete", "DrainTimedOut")
