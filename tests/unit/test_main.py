"""The worker's liveness and readiness decisions (pure: the entrypoint's State from the stats it saw)."""
import time

from rewardpool_worker.runtime.main import REJOIN_AFTER_SECONDS, REGISTRATION_STALE_SECONDS, STATS_STALE_SECONDS, State

READY = {"store": True, "buffer_registered": True, "model_loaded": True, "warmup_seconds": 0.4}
STATS = {"in_flight": 1, "wedged": False, "store_ok": True, "model_busy_seconds": 3.0, "wedged_after_seconds": 300.0}


def state(**stats) -> State:
    s = State()
    s.phase, s.detail, s.stats, s.stats_at = "ready", dict(READY), {**STATS, **stats}, time.monotonic()
    s.registered_at = time.monotonic()
    return s


def test_a_started_worker_with_fresh_stats_is_live_and_ready():
    ok, fields = state().readiness()
    assert ok and state().liveness() == (True, "ok")
    assert fields["store"] and fields["in_flight"] == 1 and fields["warmup_seconds"] == 0.4


def test_starting_is_live_but_not_ready():
    s = State()
    assert s.liveness() == (True, "starting") and not s.ready


def test_no_warm_up_no_readiness():
    s = state()
    s.detail["warmup_seconds"] = None
    assert not s.ready and s.liveness()[0]


def test_a_pool_with_tenants_is_ready_only_once_the_worker_holds_them():
    from rewardpool_worker.contract import Tenant, Tenants

    s = state()
    s.tenants.required = True  # WorkerConfig.tenant_auth
    ok, fields = s.readiness()
    assert not ok and s.liveness()[0] and "waiting for the pool's tenants" in fields["reason"]
    assert s.health(time.monotonic()).tenants is None
    s.tenants.update(Tenants(tenants=[Tenant(name="a", sha256="0" * 64)]))
    assert s.ready and s.health(time.monotonic()).tenants == s.tenants.version
    assert state().ready  # an open pool needs none


def test_store_unreachable_is_not_ready_but_live():
    s = state(store_ok=False)
    assert not s.ready and s.liveness()[0]


def test_wedged_batch_fails_liveness():
    s = state(wedged=True, model_busy_seconds=3100.0, wedged_after_seconds=3000.0)
    live, why = s.liveness()
    assert not live and "3100s" in why and "3000s" in why and not s.ready


def test_silent_or_gone_actor_fails_liveness():
    s = state()
    s.stats_at = time.monotonic() - STATS_STALE_SECONDS - 1
    assert not s.liveness()[0] and "has not answered" in s.liveness()[1]
    s = state()
    s.actor_gone = "ActorDiedError"
    assert s.liveness() == (False, "the Ray actor is gone: ActorDiedError") and not s.ready


def test_health_payload_of_an_older_worker_parses_with_the_new_fields_defaulted():
    from rewardpool_worker.contract import WorkerHealth

    old = WorkerHealth.model_validate_json('{"phase": "ready", "live": true, "in_flight": 2, "future": 1}')
    assert (old.queue_depth, old.last_batch_seconds_ago, old.in_flight) == (0, None, 2)
    new = WorkerHealth.model_validate_json(
        WorkerHealth(phase="draining", queue_depth=5, last_batch_seconds_ago=1.5).model_dump_json())
    assert (new.phase, new.queue_depth, new.last_batch_seconds_ago) == ("draining", 5, 1.5)


def test_health_reports_queue_depth_and_the_time_since_the_batches_counter_last_moved():
    s = State()
    s.phase, s.detail = "ready", dict(READY)
    s.observe({**STATS, "queue_depth": 3, "batches": 0}, at=time.monotonic())
    h = s.health(now=s.stats_at + 5)
    assert (h.queue_depth, h.in_flight, h.last_batch_seconds_ago, h.live) == (3, 1, None, True)  # none finished
    s.observe({**STATS, "queue_depth": 4, "in_flight": 2, "batches": 2}, at=100.0)
    s.observe({**STATS, "queue_depth": 1, "in_flight": 1, "batches": 2}, at=101.0)  # counter still: no new batch
    h = s.health(now=107.5)
    assert (h.queue_depth, h.in_flight, h.last_batch_seconds_ago, h.phase) == (1, 1, 7.5, "ready")
    s.observe({**STATS, "batches": 3}, at=110.0)
    assert s.health(now=110.25).last_batch_seconds_ago == 0.2  # rounded to tenths


def test_an_actor_clients_cannot_find_by_name_is_not_ready_and_in_time_not_live():
    s = state()
    s.registered_at = time.monotonic() - REGISTRATION_STALE_SECONDS - 1
    s.registration_error = "ValueError: Failed to look up actor"
    ok, fields = s.readiness()
    assert not ok and fields["ray_registered"] is False and "does not resolve" in fields["reason"]
    assert s.liveness()[0]  # not yet: the worker drains and exits by itself first (main.run)
    s.registered_at = time.monotonic() - 2 * REJOIN_AFTER_SECONDS - 5
    assert not s.liveness()[0] and "has not resolved" in s.liveness()[1]
    s.registered_at = time.monotonic()
    assert s.readiness()[0] and s.readiness()[1]["ray_registered"] is True


def test_a_raylet_that_exited_is_not_a_ray_node_here(monkeypatch, tmp_path):
    """The pod's raylet exits on a new GCS (a Ray head restart) and stays a zombie under the worker (PID 1):
    it must not count as the node clients reach the worker through."""
    import rewardpool_worker.runtime.main as m

    def proc(entries):
        for pid, stat in entries.items():
            (tmp_path / pid).mkdir(parents=True, exist_ok=True)
            (tmp_path / pid / "stat").write_text(stat)
    proc({"1": "1 (python3) S 0 1", "26": "26 (raylet) Z 1 26"})
    real = m.Path
    monkeypatch.setattr(m, "Path", lambda p: tmp_path if p == "/proc" else real(p))
    assert m.local_raylet() is False
    proc({"27": "27 (raylet) S 1 27"})
    assert m.local_raylet() is True
    s = state()
    s.raylet_gone = True
    assert not s.readiness()[0] and s.liveness()[0]


def test_without_gcs_fault_tolerance_an_unanswered_lookup_rejoins_after_the_usual_bound():
    """A head restarted without fault tolerance is a new cluster: waiting for it gains nothing."""
    s = state()
    s.gcs_unanswered, s.registration_error = True, "lookup took over 5s"
    s.registered_at = time.monotonic() - REJOIN_AFTER_SECONDS - 5
    assert s.should_rejoin(time.monotonic()) and not s.waiting_for_gcs()


def test_with_gcs_fault_tolerance_an_unanswered_gcs_is_waited_for_and_keeps_the_actor():
    """Fault tolerant (the head reloads the names from Redis): no answer is waited out for the reconnect
    timeout, not Ready meanwhile and saying why; past it the worker rejoins and in time is not live."""
    s = state()
    s.gcs_reconnect_seconds = 600
    s.gcs_unanswered, s.registration_error = True, "lookup took over 5s"
    s.registered_at = time.monotonic() - 120
    ok, fields = s.readiness()
    assert not ok and "GCS does not answer" in fields["reason"] and "600s" in fields["reason"]
    assert not s.should_rejoin(time.monotonic()) and s.liveness()[0]
    s.registered_at = time.monotonic() - 600 - REGISTRATION_STALE_SECONDS
    assert s.should_rejoin(time.monotonic()) and s.liveness()[0]
    s.registered_at = time.monotonic() - 600 - REJOIN_AFTER_SECONDS - 10
    assert not s.liveness()[0]
    s.registered_at, s.gcs_unanswered = time.monotonic(), False  # the name resolved again
    assert s.readiness()[0] and not s.should_rejoin(time.monotonic())


def test_with_gcs_fault_tolerance_a_name_the_gcs_does_not_know_still_rejoins_soon():
    """The GCS answered "no such actor" (its Redis was emptied, a different cluster): waiting cannot help."""
    s = state()
    s.gcs_reconnect_seconds = 600
    s.gcs_unanswered, s.registration_error = False, "ValueError: Failed to look up actor"
    s.registered_at = time.monotonic() - REJOIN_AFTER_SECONDS - 5
    assert s.should_rejoin(time.monotonic()) and "does not resolve" in s.readiness()[1]["reason"]
    s.gcs_unanswered, s.raylet_gone = True, True  # the pod's raylet exited: nothing to wait for either
    s.registered_at = time.monotonic() - 3
    assert s.should_rejoin(time.monotonic())


def test_health_names_an_outside_cause_that_keeps_a_started_worker_out_of_ready():
    s = state()
    assert s.health(time.monotonic()).unready_cause is None
    s.registered_at = time.monotonic() - REGISTRATION_STALE_SECONDS - 1
    s.registration_error = "ValueError: Failed to look up actor"
    h = s.health(time.monotonic())
    assert h.unready_cause == "ray" and "does not resolve in the Ray cluster" in h.unready_reason
    s = state(store_ok=False)
    h = s.health(time.monotonic())
    assert h.unready_cause == "store" and "store master" in h.unready_reason
    s.phase = "starting"  # loading its model is not an outage
    assert s.health(time.monotonic()).unready_cause is None


def test_a_worker_drained_over_ray_is_no_longer_ready():
    """The actor owns the draining state: a drain that reached it over Ray (not through the entrypoint's
    /drain or the annotation) takes the pod out of Ready, as it refuses every batch."""
    s = state()
    s.observe({**STATS, "draining": False, "batches": 1}, at=time.monotonic())
    assert s.readiness()[0]
    s.observe({**STATS, "draining": True, "batches": 1}, at=time.monotonic())
    assert s.phase == "draining" and not s.readiness()[0]
