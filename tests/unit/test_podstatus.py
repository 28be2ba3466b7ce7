from rewardpool_operator.podstatus import container_problems


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
