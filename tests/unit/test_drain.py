import pytest

from rewardpool_operator.pool.drain import UNREACHABLE_SECONDS, verdict


def v(health, lent=True, used=0, waited=10, timeout=600, silent=0.0, ready=True):
    return verdict("w-1", health, lent, used, waited, timeout, silent, ready)


def test_one_failed_probe_deletes_nothing():
    for used in (0, None, 4096):
        for ready in (True, False):
            assert v(None, used=used, silent=0, ready=ready).action == "wait"
            assert v(None, used=used, silent=UNREACHABLE_SECONDS - 1, ready=ready).action == "wait"


@pytest.mark.parametrize("lent,used,ready,action", [
    (True, 0, True, "delete"),       # the master shows its segment empty
    (False, None, True, "delete"),   # it lends no segment
    (True, None, False, "delete"),   # not Ready, segment unknown
    (True, None, True, "wait"),      # Ready but unreachable from here, segment unknown: wait for the timeout
    (True, 4096, False, "wait"),     # its segment holds outputs: never deleted for silence
    (True, 4096, True, "wait"),
])
def test_sustained_silence(lent, used, ready, action):
    r = v(None, lent=lent, used=used, silent=UNREACHABLE_SECONDS + 1, ready=ready)
    assert r.action == action, r
    if action == "delete":
        assert r.reason == "WorkerUnreachable"


def test_the_timeout_governs_once_passed():
    assert v(None, used=None, silent=1, waited=700).action == "delete"  # the user's timeout, not the window


def test_silent_past_the_timeout():
    r = v(None, used=None, silent=700, waited=700)
    assert (r.action, r.reason) == ("delete", "DrainTimedOut") and "not known" in r.message
    r = v(None, used=4096, silent=700, waited=700, ready=False)
    assert (r.action, r.reason) == ("stuck", "DrainStuck")


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


@pytest.mark.parametrize("health, used, waited, ready, action, reason", [
    # the pool names the master's metrics: an unknown usage is the master not answering, never an empty segment
    ({"phase": "drained"}, None, 10, True, "wait", "Draining"),
    ({"phase": "drained"}, None, 700, True, "stuck", "DrainStuck"),
    ({"phase": "drained"}, 0, 10, True, "delete", "Drained"),
    ({"phase": "drained"}, 4096, 10, True, "wait", "Draining"),
    ({"phase": "draining", "in_flight": 1}, None, 700, True, "stuck", "DrainStuck"),
    # a worker gone silent and not Ready: its process (and the segment it served) is gone, nothing to keep
    (None, None, 10, False, "wait", "Draining"),
    (None, None, 700, False, "delete", "DrainTimedOut"),
])
def test_an_unknown_usage_with_store_metrics_set_never_deletes_a_live_worker(health, used, waited, ready, action,
                                                                              reason):
    r = verdict("w-1", health, True, used, waited, 600, 0.0 if health else 1.0, ready, usage_watched=True)
    assert (r.action, r.reason) == (action, reason), r
    if used is None and health is not None:
        assert "could not be read from the master" in r.message


def test_without_store_metrics_an_unknown_usage_deletes_as_before_and_says_so():
    r = verdict("w-1", {"phase": "drained"}, True, None, 10, 600)
    assert r.action == "delete" and "set store.metricsAddress" in r.message
    r = verdict("w-1", {"phase": "drained"}, False, None, 10, 600, usage_watched=True)  # lends no segment
    assert r.action == "delete"
