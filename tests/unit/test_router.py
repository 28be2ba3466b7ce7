"""The router's choice of a worker (pure: members set by hand, no Ray calls)."""
from collections import Counter

from rewardpool_worker.client.router import Member, Router


def router(n: int, **kw) -> Router:
    r = Router("rewardpool:t/p:", seed=1, **kw)
    for i in range(n):
        r._members[f"w{i}"] = Member(f"w{i}", None, last_used=r._rng.random())
    r._refreshed = float("inf")  # no Ray listing in these tests
    return r


def run(r: Router, picks: int, seconds: dict[str, float]) -> Counter:
    got = Counter()
    for _ in range(picks):
        m = r.pick()
        got[m.name] += 1
        r.done(m, seconds[m.name])
    return got


def test_one_batch_at_a_time_goes_round_the_pool_despite_noise():
    r = router(4)
    noisy = {"w0": 0.05, "w1": 0.09, "w2": 0.06, "w3": 0.08}  # within 2x of each other: ties
    assert sorted(run(r, 100, noisy).values()) == [25, 25, 25, 25]


def test_a_clearly_slower_worker_gets_fewer_batches_when_they_pile_up():
    r = router(2)
    r._members["w0"].batch_seconds, r._members["w1"].batch_seconds = 0.1, 0.5
    held = [r.pick() for _ in range(12)]  # 12 batches out at once
    got = Counter(m.name for m in held)
    assert got["w0"] >= 2 * got["w1"] and got["w1"] >= 1, got


def test_draining_and_excluded_workers():
    r = router(3)
    r.mark_draining("w0")
    r.exclude("w1", 60)
    assert {r.pick().name for _ in range(5)} == {"w2"}  # w1 skipped while another is left
    r.mark_draining("w2")
    assert r.pick().name == "w1"  # excluded, but the only one not draining: used rather than waiting
    r.mark_draining("w1")
    assert r.pick() is None and not r.eligible(set())


def test_room_per_worker_is_backpressure():
    r = router(2)
    r.max_outstanding = 2
    held = [r.pick() for _ in range(4)]
    assert all(held) and r.pick() is None and r.eligible(set())  # full, not gone: the caller waits
    r.done(held[0], 0.1)
    assert r.pick().name == held[0].name


def test_a_stale_price_is_tried_again():
    r = router(2)
    r._members["w1"].batch_seconds = 5.0  # priced out once (a hiccup)
    r._members["w0"].batch_seconds = 0.1
    got = run(r, 40, {"w0": 0.1, "w1": 0.1})
    assert got["w1"] >= 4  # retried every few picks, then its price is back to normal


def test_a_pool_with_no_live_worker_is_waited_for_until_a_longer_deadline():
    from rewardpool_worker.client.async_client import patience

    assert patience(30.0, 100.0, None) == 30.0  # no deadline: the pool's own patience
    assert patience(30.0, 100.0, 110.0) == 30.0  # a shorter deadline ends the call first, as a timeout
    assert patience(30.0, 100.0, 700.0) == 600.0  # a longer one: the pool may recover within it


def test_a_version_limits_the_pick_to_its_workers():
    r = Router("p:", seed=3)
    for i, v in enumerate(["old", "old", "new"]):
        r._members[f"w{i}"] = Member(f"w{i}", None, last_used=i / 10, version=v)
    picks = Counter()
    for _ in range(30):
        m = r.pick(version="old")
        picks[m.name] += 1
        r.done(m, 0.1)
    assert set(picks) == {"w0", "w1"}
    assert r.pick(version="new").name == "w2" and r.pick(version="gone") is None
    r._members["w0"].draining = True
    assert r.versions() == Counter({"old": 1, "new": 1})  # ready, not draining
    assert not r.eligible(set(), version="gone") and r.eligible(set(), version="old")


def test_a_listing_the_gcs_does_not_answer_keeps_the_known_workers(monkeypatch):
    """A Ray head restarting (GCS fault tolerance): the workers still answer through their handles, so a
    refresh that cannot list them keeps them; once the listing answers, membership follows it again."""
    import rewardpool_worker.client.router as rt

    r = router(2)

    def unanswered(**_):
        raise rt.ray.exceptions.RpcError("failed to connect to the GCS")
    monkeypatch.setattr(rt.ray.util, "list_named_actors", unanswered)
    assert r.refresh() == ["w0", "w1"] and r.gcs_unanswered == 1
    assert r.pick() is not None
    monkeypatch.setattr(rt.ray.util, "list_named_actors",
                        lambda **_: [{"namespace": "rewardpool", "name": "rewardpool:t/p:w1"}])
    r._members = {"rewardpool:t/p:w1": Member("rewardpool:t/p:w1", None)}
    assert r.refresh() == ["rewardpool:t/p:w1"]


def test_a_shadow_worker_gets_no_call_and_one_shadow_batch_at_a_time():
    r = Router("p:", seed=4)
    for i, (v, shadow) in enumerate([("old", False), ("old", False), ("new", True)]):
        r._members[f"w{i}"] = Member(f"w{i}", None, last_used=i / 10, version=v, shadow=shadow)
    picks = Counter(r.pick().name for _ in range(30))
    assert set(picks) == {"w0", "w1"}  # calls never go to the shadow
    assert r.versions() == Counter({"old": 2})  # a call pinned to "new" finds no serving worker of it
    assert r.pick(version="new") is None and not r.eligible(set(), version="new")
    s = r.pick_shadow("old")
    assert s.name == "w2" and s.outstanding == 1
    assert r.pick_shadow("old") is None  # it has this client's batch: no queue behind a shadow
    r.done(s, None)
    assert r.pick_shadow("new") is None  # a shadow of the serving version itself compares nothing
    r._members["w2"].shadow = False  # promoted
    assert r.pick_shadow("old") is None and r.versions() == Counter({"old": 2, "new": 1})
