from rewardpool_operator.pool.podstatus import container_problems


def pod(name, reason=None, message="", deleting=False, image="localhost/w:missing"):
    cs = {"name": "worker", "image": image, "state": {"waiting": {"reason": reason, "message": message}}
          if reason else {"running": {}}}
    meta = {"name": name, **({"deletionTimestamp": "2026-01-01T00:00:00Z"} if deleting else {})}
    return {"metadata": meta, "status": {"containerStatuses": [cs]}}


def test_an_image_the_node_cannot_pull_is_a_named_problem():
    probs = container_problems([pod("p-1", "ErrImagePull", "failed to resolve reference"), pod("p-2", "ImagePullBackOff"),
                                pod("p-3")])
    assert [p.reason for p in probs] == ["WorkerImagePullFailed", "WorkerImagePullFailed"]
    assert "p-1 (image localhost/w:missing): failed to resolve reference" in probs[0].message
    assert not any(p.blocking for p in probs)


def test_crash_loops_are_reported_and_running_or_deleting_pods_are_not():
    probs = container_problems([pod("a", "CrashLoopBackOff", "back-off 10s"), pod("b", "ErrImagePull", deleting=True),
                                pod("c"), pod("d", "ContainerCreating")])
    assert [(p.reason, p.message.split(":")[0]) for p in probs] == [
        ("WorkerContainerFailing", "1 worker pod(s) CrashLoopBackOff")]


def test_workers_kept_out_of_ready_by_ray_or_the_store_are_said_with_the_workers_own_reason():
    """The health is what the worker's own State answers on /healthz (the contract's payload), not a dict
    written here."""
    import time

    from rewardpool_operator.pool.podstatus import unready_problems
    from rewardpool_worker.runtime.main import REGISTRATION_STALE_SECONDS, State

    def worker(**stats):
        s = State()
        s.phase, s.stats_at, s.registered_at = "ready", time.monotonic(), time.monotonic()
        s.detail = {"store": True, "buffer_registered": True, "model_loaded": True, "warmup_seconds": 0.1}
        s.stats = {"in_flight": 0, "store_ok": True, **stats}
        return s
    lost = worker()
    lost.registered_at = time.monotonic() - REGISTRATION_STALE_SECONDS - 5
    lost.registration_error = "ValueError: Failed to look up actor with name 'rewardpool:ns/p:p-1'"
    no_store = worker(store_ok=False)
    fine = worker()
    no_model = State()  # still starting: its model path is not there (the volume not mounted)
    no_model.model_problem = "pickscore: /models/pickscore does not exist (is the model volume mounted?)"
    health = {name: s.health(time.monotonic()).model_dump() for name, s in
              (("p-1", lost), ("p-2", no_store), ("p-3", fine), ("p-5", no_model))}
    pods = [{"metadata": {"name": n}} for n in ("p-1", "p-2", "p-3", "p-4", "p-5")]  # p-4: no answer
    probs = unready_problems(pods, health)
    assert [p.reason for p in probs] == ["ModelUnavailable", "WorkersNotFoundInRay", "WorkersCannotReachStore"]
    assert probs[0].message == ("1 worker pod(s) cannot load their model: p-5: pickscore: /models/pickscore does "
                                "not exist (is the model volume mounted?)")
    assert "1 worker pod(s) cannot be found in Ray: p-1: the actor's name does not resolve" in probs[1].message
    assert "p-2" in probs[2].message and not any(p.blocking for p in probs)
    assert health["p-5"]["live"] and health["p-5"]["phase"] == "starting"  # alive: no restart, no crash loop


def test_a_worker_restarted_to_rejoin_ray_is_said_as_that_until_ready_not_as_a_crash_loop():
    """The kubelet's container status after the worker exited with EXIT_REJOIN: its last state terminated with
    that code, the back-off, then running while it starts again."""
    from rewardpool_operator.pool.podstatus import container_problems, unready_problems
    from rewardpool_worker.contract import EXIT_REJOIN

    def pod(name, state, exit_code, ready=False):
        return {"metadata": {"name": name}, "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": [{"name": "worker", "image": "w:1", "restartCount": 1, "state": state,
                                   "lastState": {"terminated": {"exitCode": exit_code, "reason": "Error"}}}]}}
    backoff = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}}
    running = {"running": {"startedAt": "2026-12-02T00:00:00Z"}}
    pods = [pod("a", backoff, EXIT_REJOIN), pod("b", running, EXIT_REJOIN), pod("c", running, EXIT_REJOIN, True),
            pod("d", backoff, 1)]
    probs = unready_problems(pods, {})
    assert [p.reason for p in probs] == ["WorkersNotFoundInRay"] and probs[0].message.startswith("2 worker pod(s)")
    assert "a: restarted to rejoin the Ray cluster" in probs[0].message and "c:" not in probs[0].message
    crash = container_problems(pods)  # only the real crash loop is one
    assert [p.reason for p in crash] == ["WorkerContainerFailing"] and "d (image" in crash[0].message
    assert "a (image" not in crash[0].message
