"""A worker whose model is not there (issue 34: the model volume not mounted yet, an empty claim, a wrong
subPath), as the real entrypoint runs from the operator's rendered config: it stays up (live, no crash loop), not
Ready, and says why on /healthz (unready_cause "model", the component and the path: what the operator turns into
ModelUnavailable); when the model arrives it loads it without a restart, becomes Ready, scores, and its start-up
steps (with the weights' bytes and load time) are on /healthz."""
from __future__ import annotations

import asyncio

import torch

from rewardpool_operator.api.spec import Pool
from tests.conftest import wait_for
from tests.worker import tiny_clip
from tests.worker.conftest import get_json as get
from tests.worker.conftest import start_entrypoint


def test_a_worker_waits_for_a_missing_model_says_why_and_starts_when_it_arrives(master, tmp_path):
    from rewardpool_worker.client.http_client import HttpRewardPoolClient

    model = tmp_path / "clip"
    pool = Pool.from_object({"metadata": {"name": "nomodel", "namespace": "t", "uid": "u"}, "spec": {
        "replicas": 1, "image": "w", "scorer": {"name": "pickscore", "batchSize": 2, "modelPath": str(model),
                                                "modelMemory": "256Mi"},
        "store": {"master": master.address, "protocol": "tcp", "segmentSize": "32Mi", "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": "1Mi"}}})
    proc, port, log_path, _ = start_entrypoint(pool, tmp_path, "nomodel-abcde", wait=False, REWARDPOOL_RAY_CPUS="1")
    try:
        def says_model():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            code, h = get(port, "/healthz")
            return h if h.get("unready_cause") == "model" else None
        health = wait_for(says_model, timeout=120, what="/healthz saying the model is missing")
        assert health["live"] and health["phase"] == "starting"
        assert health["unready_reason"] == f"pickscore: {model} does not exist (is the model volume mounted? " \
                                           "scorer.model or modelPath)"
        assert get(port, "/healthz")[0] == 200 and get(port, "/readyz")[0] == 503  # alive, not Ready

        tiny_clip.build(model)  # the model arrives (a volume populated, a claim bound)
        wait_for(lambda: get(port, "/readyz")[0] == 200 or None, timeout=120, what="Ready once the model is there")
        assert proc.poll() is None  # the same process: no restart
        health = get(port, "/healthz")[1]
        assert health["unready_cause"] is None
        steps = health["startup"]
        assert {"imports_seconds", "network_seconds", "ray_seconds", "model_wait_seconds", "actor_seconds",
                "registered_seconds", "total_seconds", "weight_load_seconds", "weight_bytes",
                "warmup_seconds"} <= set(steps), steps
        on_disk = sum(f.stat().st_size for f in model.rglob("*") if f.is_file())
        assert steps["weight_bytes"] == on_disk and steps["model_wait_seconds"] > 0, steps
        assert steps["total_seconds"] >= steps["actor_seconds"] >= steps["weight_load_seconds"]
        # beside the weight load, each measured from the same start: each within the actor's start
        assert 0 < steps["store_seconds"] <= steps["actor_seconds"], steps
        assert 0 < steps["digest_seconds"] <= steps["actor_seconds"], steps
        client = HttpRewardPoolClient(f"http://127.0.0.1:{port}", timeout=60)
        report = asyncio.run(client.score_detailed([torch.randint(0, 256, (3, 1, 32, 32), dtype=torch.uint8)], ["a cat"]))
        assert isinstance(report.results[0], float) and report.errors == []
    finally:
        proc.kill()
        proc.wait(10)


def test_a_model_that_does_not_load_is_said_and_the_worker_stays_up(master, tmp_path):
    model = tmp_path / "broken"
    model.mkdir()
    (model / "config.json").write_text("{not json")
    pool = Pool.from_object({"metadata": {"name": "badmodel", "namespace": "t", "uid": "u"}, "spec": {
        "replicas": 1, "image": "w", "scorer": {"name": "pickscore", "batchSize": 2, "modelPath": str(model),
                                                "modelMemory": "256Mi"},
        "store": {"master": master.address, "protocol": "tcp", "segmentSize": "32Mi", "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": "1Mi"}}})
    proc, port, log_path, _ = start_entrypoint(pool, tmp_path, "badmodel-abcde", wait=False, REWARDPOOL_RAY_CPUS="1")
    try:
        def says_model():
            assert proc.poll() is None, log_path.read_text()[-3000:]
            h = get(port, "/healthz")[1]
            return h if h.get("unready_cause") == "model" else None
        health = wait_for(says_model, timeout=180, what="/healthz saying the model does not load")
        assert health["live"] and health["unready_reason"].startswith(f"the model at {model} does not load: ")
        assert get(port, "/readyz")[0] == 503
    finally:
        proc.kill()
        proc.wait(10)

