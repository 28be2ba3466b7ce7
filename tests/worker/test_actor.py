"""The worker on real Ray: named actors per pod, the pool client (least outstanding work, retries when an
actor dies mid-batch), release exactly once, media keep-N, and the entrypoint started with the config the
operator renders."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import ray
import torch

from rewardpool_worker.client import Releaser, RewardPoolClient
from rewardpool_worker.contract import RayConfig, ScorerConfig, StoreConfig, WorkerConfig
from rewardpool_worker.runtime.actor import start_actor
from rewardpool_worker.runtime.reader import RegisteredTensorReader
from rewardpool_worker.store import Store
from rewardpool_devcluster.mooncake import Master, Producer
from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.frames import to_uint8
from tests.worker.conftest import KEY


def worker_cfg(master, pool: str, scorer: dict, ns: str = "t") -> WorkerConfig:
    return WorkerConfig(pool=pool, namespace=ns,
                        store=StoreConfig(master=master.address, protocol="tcp", segment_bytes=32 << 20,
                                          local_buffer_bytes=16 << 20),
                        scorer=ScorerConfig(**scorer), ray=RayConfig(namespace="rewardpool"),
                        read_buffer_bytes=1 << 20)


@pytest.fixture()
def actors(ray_cluster, master, request):
    made, count = [], {}

    def make(pool, n, scorer=None):
        cfg = worker_cfg(master, pool, scorer or {"name": "mean-intensity"})
        for _ in range(n):
            i = count[pool] = count.get(pool, -1) + 1
            made.append(start_actor(cfg, f"{pool}-pod-{i}", "127.0.0.1", control_key=KEY))
        return made[-n:]
    yield make
    for a in made:
        ray.kill(a)


def test_client_spreads_batches_by_least_outstanding_work(actors, producer):
    actors("spread", 2, {"class": "tests.worker.custom_scorer:SlowScorer"})
    client = RewardPoolClient("spread", "t")
    assert client.refresh() == ["rewardpool:t/spread:spread-pod-0", "rewardpool:t/spread:spread-pod-1"]
    refs = [producer.put(f"spread-{i}", seed=300 + i, shape=(3, 2, 8, 8)) for i in range(4)]
    futures = [client.submit([r], ["p"]) for r in refs]
    scores = [f.result(60)[0] for f in futures]
    assert scores == [pytest.approx(float(make_tensor(300 + i, [3, 2, 8, 8], "float32").mean())) for i in range(4)]
    # 4 concurrent batches on 2 actors that score one at a time: least outstanding work gives each actor 2.
    assert sorted(client.served.values()) == [2, 2], client.served


def test_membership_follows_the_pool(actors):
    client = RewardPoolClient("grow", "t", refresh_seconds=0)
    first = actors("grow", 1)
    assert client.members() == ["rewardpool:t/grow:grow-pod-0"]
    actors("grow", 1)  # the pool scaled up
    assert client.members() == ["rewardpool:t/grow:grow-pod-0", "rewardpool:t/grow:grow-pod-1"]
    ray.kill(first[0])  # and a worker went away
    deadline = time.monotonic() + 20
    while client.members() != ["rewardpool:t/grow:grow-pod-1"]:
        assert time.monotonic() < deadline, client.members()
        time.sleep(0.2)


def test_actor_killed_mid_batch_loses_nothing(actors, producer, master):
    victims = actors("kill", 2, {"class": "tests.worker.custom_scorer:SlowScorer"})
    client = RewardPoolClient("kill", "t")
    refs = [producer.put(f"kill-{i}", seed=400 + i, shape=(3, 2, 8, 8)) for i in range(2)]
    futures = [client.submit([r], ["p"]) for r in refs]
    time.sleep(1.0)  # both actors are mid-batch now
    ray.kill(victims[0])
    actors("kill", 1, {"class": "tests.worker.custom_scorer:SlowScorer"})  # a replacement joins
    scores = [f.result(90)[0] for f in futures]
    assert scores == [pytest.approx(float(make_tensor(400 + i, [3, 2, 8, 8], "float32").mean())) for i in range(2)]
    assert client.retries >= 1
    assert {r.key for r in refs} <= master.keys()  # still stored: only the releaser removes outputs


def test_drain_and_promote_over_ray_are_refused_without_the_entrypoints_key(actors, producer):
    """Any driver in the Ray cluster can reach a worker's actor: drain and promote, which change what it serves,
    answer only the key its pod's entrypoint drew; a refused call changes nothing."""
    from rewardpool_worker.errors import Forbidden

    (w,) = actors("ctl", 1)
    for call in (lambda: w.drain.remote(), lambda: w.drain.remote("guess"), lambda: w.promote.remote("guess")):
        with pytest.raises(Forbidden):
            ray.get(call())
    assert ray.get(w.stats.remote())["draining"] is False
    ref = producer.put("ctl-out", seed=351, shape=(3, 2, 4, 4))
    assert len(RewardPoolClient("ctl", "t").score([ref], ["p"])) == 1  # still serving
    assert ray.get(w.drain.remote(KEY))["draining"] is True


def test_a_draining_actor_gets_no_new_batches(actors, producer):
    draining, other = actors("drain", 2)
    client = RewardPoolClient("drain", "t")
    client.refresh()
    ray.get(draining.drain.remote(KEY))
    ref = producer.put("drain-out", seed=350, shape=(3, 2, 4, 4))
    for _ in range(3):  # each must end on pod-1, whichever the router tries first
        assert len(client.score([ref], ["p"])) == 1
    assert ray.get(other.stats.remote())["batches"] == 3 and ray.get(draining.stats.remote())["batches"] == 0


def test_release_exactly_once_after_the_last_reward(store, producer, master):
    refs = [producer.put(f"rel-{i}", seed=500 + i, shape=(64,)) for i in range(4)]
    rel = Releaser(store)
    rel.expect(refs, rewards=2)  # e.g. a per-sample reward and a group reward
    keys = {r.key for r in refs}
    assert rel.rewarded(refs) == [] and keys <= master.keys()
    assert rel.rewarded(refs) == [r.key for r in refs]
    assert not keys & master.keys()
    assert rel.stats.released == 4 and rel.stats.release_failures == 0
    from prometheus_client import REGISTRY
    assert REGISTRY.get_sample_value("rewardpool_client_releases_total") >= 4
    with pytest.raises(ValueError, match="not expecting"):
        rel.rewarded(refs[:1])
    with pytest.raises(ValueError, match="already released"):
        rel.expect(refs[:1])
    assert rel.stats.released == 4  # nothing released twice


def test_media_keeps_at_most_n_across_concurrent_batches(store, producer, master):
    refs = [producer.put(f"media-{i}", seed=600 + i, shape=(3, 4, 4)) for i in range(24)]
    rel = Releaser(store, media_keep=3, reader=RegisteredTensorReader(store))
    rel.expect(refs)
    batches = [refs[i:i + 3] for i in range(0, 24, 3)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(rel.rewarded, batches))
    media = rel.take_media(None)
    assert rel.stats.media_kept == 3 and len(media) == 3 and rel.take_media(None) == []  # handed over once
    for key, tensor in media:
        i = int(key.split("-")[1])
        assert torch.equal(tensor, make_tensor(600 + i, [3, 4, 4], "float32"))
    assert rel.stats.released == 24 and not {r.key for r in refs} & master.keys()


def test_failed_media_read_and_failed_delete_do_not_fail_the_rollout(store, producer):
    refs = [producer.put(f"bad-{i}", seed=700 + i, shape=(16,)) for i in range(3)]

    class BrokenReader:
        def read(self, ref):
            raise RuntimeError("media read failed")

    rel = Releaser(store, media_keep=1, reader=BrokenReader())
    rel.expect(refs)
    store.remove(refs[2].key, force=True)  # removed behind the releaser's back: its delete will fail
    assert rel.rewarded(refs) == [r.key for r in refs]
    assert rel.stats.media_failures == 1 and rel.stats.media_kept == 0
    assert rel.stats.released == 2 and rel.stats.release_failures == 1 and rel.stats.already_gone == 1


def test_release_inside_the_read_lease_removes_once_and_counts_it(tmp_path):
    m = Master(tmp_path, lease_ms=60_000)  # a lease far longer than the test
    p = Producer(m)
    try:
        s = Store.connect(StoreConfig(master=m.address, protocol="tcp", segment_bytes=0,
                                      local_buffer_bytes=16 << 20), "127.0.0.1")
        ref = p.put("fresh", seed=8, shape=(1024,))
        rel = Releaser(s)
        rel.expect([ref])
        RegisteredTensorReader(s).read(ref)  # the read takes a lease
        assert rel.rewarded([ref]) == ["fresh"]
        assert rel.stats.lease_forced == 1 and rel.stats.released == 1 and rel.stats.release_failures == 0
        assert "fresh" not in m.keys()
        s.close()
    finally:
        p.close()
        m.stop()


def test_entrypoint_with_the_operator_rendered_config_becomes_ready_scores_and_drains(
        ray_cluster, master, producer, tmp_path):
    from rewardpool_devcluster.cluster import free_port
    from rewardpool_operator.pool import builders, sizing
    from rewardpool_operator.api.spec import Pool

    pool = Pool.from_object({"metadata": {"name": "e2e", "namespace": "t", "uid": "u"}, "spec": {
        "replicas": 1, "image": "w", "scorer": {"name": "mean-intensity", "numFrames": 2, "batchSize": 2},
        "store": {"master": master.address, "protocol": "tcp", "segmentSize": "32Mi", "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": "1Mi"},
        "ray": {"address": ray_cluster, "namespace": "rewardpool"}}})
    pod = builders.pod_template(pool, sizing.compute(pool.spec))
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"] if "value" in e}
    cfg = json.loads(env["REWARDPOOL_WORKER_CONFIG"])
    port = free_port()
    cfg["http_port"] = port
    proc = subprocess.Popen([sys.executable, "-m", "rewardpool_worker.runtime.main"], env={
        **os.environ, "REWARDPOOL_WORKER_CONFIG": json.dumps(cfg), "POD_NAME": "e2e-abcde", "POD_IP": "127.0.0.1",
        "REWARDPOOL_HTTP_HOST": "127.0.0.1", "REWARDPOOL_ANNOTATIONS_FILE": str(tmp_path / "none")},
        stdout=open(tmp_path / "worker.log", "wb"), stderr=subprocess.STDOUT)
    try:
        def get(path):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as e:
                return e.code, e.read().decode()
        deadline = time.monotonic() + 90
        while True:
            try:
                code, body = get("/readyz")
                if code == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (tmp_path / "worker.log").read_text()[-3000:]
            time.sleep(0.5)
        ready = json.loads(body)
        assert ready["buffer_registered"] and ready["model_loaded"] and ready["store"] and ready["live"]
        assert ready["batch_size"] == 2 and ready["warmup_seconds"] >= 0

        client = RewardPoolClient("e2e", "t")
        assert client.refresh() == ["rewardpool:t/e2e:e2e-abcde"]
        ref = producer.put("e2e-out", seed=800, shape=(3, 5, 8, 8))
        video = make_tensor(800, [3, 5, 8, 8], "float32")
        from rewardpool_worker.frames import to_uint8
        assert client.score([ref], ["x"]) == [pytest.approx(float(to_uint8(video[:, [0, 4]]).float().mean() / 255))]
        time.sleep(1.5)
        metrics = get("/metrics")[1]
        assert "rewardpool_worker_batches_total 1.0" in metrics
        assert "rewardpool_worker_buffer_registrations_total 2.0" in metrics  # one buffer per read slot, registered at start
        assert "rewardpool_worker_scored_outputs_total{scorer=\"mean-intensity\"} 1.0" in metrics
        assert "rewardpool_worker_warmup_seconds " in metrics and ready["warmup_seconds"] is not None
        assert get("/healthz")[0] == 200

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        log = (tmp_path / "worker.log").read_text()
        assert "drained after 1 batches" in log
    finally:
        if proc.poll() is None:
            proc.kill()


def test_20_concurrent_batches_stay_within_the_sized_memory(ray_cluster, master, producer):
    """One actor, 20 batches at once: the backlog holds refs, not outputs. Peak RSS over the RSS at Ready stays
    within the formula's read term (two slots of one batch) plus one batch of scorer work."""
    from rewardpool_operator.pool import builders, sizing
    from rewardpool_operator.api.spec import Pool

    MiB = 2**20
    shape = (3, 8, 1024, 512)  # float32: 48 MiB an output, large next to the process's own noise
    pool = Pool.from_object({"metadata": {"name": "mem", "namespace": "t", "uid": "u"}, "spec": {
        "image": "w", "scorer": {"name": "mean-intensity", "numFrames": 2, "batchSize": 2},
        "store": {"master": master.address, "protocol": "tcp", "segmentSize": 0, "localBufferSize": "16Mi"},
        "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": str(48 * MiB)},
        "ray": {"namespace": "rewardpool"}}})
    size = sizing.compute(pool.spec)
    cfg = builders.worker_config(pool, size)
    assert size.read_buffers == 2 and cfg.read_buffer_max_bytes == 2 * 48 * MiB
    actor = start_actor(cfg, "mem-pod-0", "127.0.0.1", control_key=KEY)
    try:
        refs = [producer.put(f"mem-{i}", seed=1000 + i, shape=shape) for i in range(4)]
        expected = [float(to_uint8(make_tensor(1000 + i, list(shape), "float32")[:, [0, 7]]).float().mean() / 255)
                    for i in range(4)]
        at_ready = ray.get(actor.memory.remote(reset_peak=True))
        batches = [[refs[i % 4], refs[(i + 1) % 4]] for i in range(20)]
        results = ray.get([actor.score_batch.remote(b, ["p", "p"]) for b in batches], timeout=300)
        peak = ray.get(actor.memory.remote())["peak_rss"]
        stats = ray.get(actor.stats.remote())
    finally:
        ray.kill(actor)
    assert results == [[pytest.approx(expected[i % 4], abs=1e-5), pytest.approx(expected[(i + 1) % 4], abs=1e-5)]
                       for i in range(20)]
    assert stats["batches"] == 20 and stats["peak_holding"] == 2 and stats["buffer_bytes"] <= 2 * 96 * MiB
    read_term = size.read_buffers * size.read_buffer_bytes  # 192 MiB: what the pod's memory counts for reads
    # The scorer's working memory for the one batch in the model (mean-intensity: the picked frames as float,
    # scaled, clamped, uint8 and float again), bounded by one batch; the pod formula counts it in its overhead.
    scorer_work = size.read_buffer_bytes
    grown = peak - at_ready["rss"]
    print(f"RSS at Ready {at_ready['rss'] / MiB:.0f} MiB, peak {peak / MiB:.0f} MiB, grown {grown / MiB:.0f} MiB "
          f"(read term {read_term / MiB:.0f} MiB; 20 batches held at once would be {20 * 96} MiB)")
    assert grown <= read_term + scorer_work
    assert peak <= size.memory_bytes


def test_the_client_splits_what_the_actor_refuses(actors, producer):
    (actor,) = actors("split", 1, {"name": "mean-intensity", "batch_size": 2})
    refs = [producer.put(f"split-{i}", seed=1100 + i, shape=(3, 2, 4, 4)) for i in range(5)]
    with pytest.raises(ray.exceptions.RayTaskError, match="batch of 5 outputs exceeds this pool's scorer.batchSize 2"):
        ray.get(actor.score_batch.remote(refs, ["p"] * 5))
    client = RewardPoolClient("split", "t")
    scores = client.score(refs, ["p"] * 5)
    assert scores == [pytest.approx(float(to_uint8(make_tensor(1100 + i, [3, 2, 4, 4], "float32")).float().mean()
                                        / 255)) for i in range(5)]
    assert client.batch_size == 2 and sum(client.served.values()) == 3  # 2 + 2 + 1
    assert ray.get(actor.stats.remote())["refused"] == 1


def test_liveness_fails_on_a_wedged_batch_and_on_a_gone_actor(ray_cluster, master, tmp_path):
    worker = Entrypoint(ray_cluster, master, tmp_path, "wedge", {"class": "tests.worker.custom_scorer:HangingScorer",
                                                                 "args": {"seconds": 600}}, wedge_floor_seconds=2)
    try:
        worker.wait_ready()
        assert worker.get("/healthz")[0] == 200
        client = RewardPoolClient("wedge", "t")
        assert client.score([torch.zeros(3, 4, 4)], ["fine"]) == [1.0]
        client.submit([torch.zeros(3, 4, 4)], ["hang"])  # holds the model for 600 s
        code, body = worker.poll("/healthz", lambda c, b: c == 503)
        assert "held the model" in json.loads(body)["reason"] and worker.get("/readyz")[0] == 503
        # the actor's process killed (an OOM kill, a crash): the entrypoint exits 1 within a stats round, so the
        # kubelet restarts the container now, not after its liveness probe has failed for about a minute (the
        # batches go to other actors by the client)
        ray.kill(ray.get_actor("rewardpool:t/wedge:wedge-abcde", namespace="rewardpool"))
        t0 = time.monotonic()
        assert worker.proc.wait(30) == 1
        print(f"\nexited {time.monotonic() - t0:.1f}s after its actor was killed")
        assert "the Ray actor is gone" in worker.log.read_text()
    finally:
        worker.stop()


class Entrypoint:
    """`rewardpool-worker` in its own process, started with the config the operator renders for a pool."""

    def __init__(self, ray_address, master, tmp_path, name: str, scorer: dict, **cfg_over):
        from rewardpool_devcluster.cluster import free_port
        from rewardpool_operator.pool import builders, sizing
        from rewardpool_operator.api.spec import Pool

        pool = Pool.from_object({"metadata": {"name": name, "namespace": "t", "uid": "u"}, "spec": {
            "replicas": 1, "image": "w", "scorer": {"batchSize": 2, **scorer},
            "store": {"master": master.address, "protocol": "tcp", "segmentSize": "32Mi", "localBufferSize": "16Mi"},
            "sizing": {"samplesPerRollout": 4, "outputBytesPerSample": "1Mi"},
            "ray": {"address": ray_address, "namespace": "rewardpool"}}})
        cfg = json.loads(builders.worker_config(pool, sizing.compute(pool.spec)).to_json())
        self.port = free_port()
        cfg.update(http_port=self.port, **cfg_over)
        self.log = tmp_path / f"{name}.log"
        self.proc = subprocess.Popen([sys.executable, "-m", "rewardpool_worker.runtime.main"], env={
            **os.environ, "REWARDPOOL_WORKER_CONFIG": json.dumps(cfg), "POD_NAME": f"{name}-abcde",
            "POD_IP": "127.0.0.1", "REWARDPOOL_HTTP_HOST": "127.0.0.1",
            "REWARDPOOL_ANNOTATIONS_FILE": str(tmp_path / "none")}, stdout=open(self.log, "wb"), stderr=subprocess.STDOUT)

    def get(self, path):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def poll(self, path, done, timeout: float = 90):
        deadline = time.monotonic() + timeout
        while True:
            try:
                code, body = self.get(path)
                if done(code, body):
                    return code, body
            except OSError:
                pass
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            assert time.monotonic() < deadline, self.log.read_text()[-3000:]
            time.sleep(0.3)

    def wait_ready(self):
        return self.poll("/readyz", lambda c, b: c == 200)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_a_store_outage_makes_the_worker_unready_not_dead(ray_cluster, tmp_path):
    own = Master(tmp_path)
    actor = None
    try:
        actor = start_actor(worker_cfg(own, "outage", {"name": "mean-intensity"}), "outage-pod-0", "127.0.0.1",
                            control_key=KEY)
        assert ray.get(actor.ready.remote())["store"] is True
        own.stop()
        deadline = time.monotonic() + 90
        while (ready := ray.get(actor.ready.remote(), timeout=30))["store"]:
            assert time.monotonic() < deadline, ready
            time.sleep(0.5)
        assert ready["store_error"]
        stats = ray.get(actor.stats.remote(), timeout=30)  # still answering: liveness holds
        assert stats["store_ok"] is False and not stats["wedged"]
    finally:
        if actor is not None:
            ray.kill(actor)
        own.stop()


def test_a_restarted_worker_takes_its_name_back_from_its_earlier_actor(ray_cluster, master):
    """A worker container restarted after its main process was killed finds its actor's name still registered
    (the cluster has not noticed the old actor's end): it ends that actor (the name is its pod's) and comes up,
    rather than crashing with ActorAlreadyExistsError until the name is freed."""
    from tests.worker.conftest import pool_cfg

    cfg = pool_cfg(master, "again", {"name": "mean-intensity"})
    first = start_actor(cfg, "again-pod-0", "127.0.0.1", control_key=KEY)
    second = start_actor(cfg, "again-pod-0", "127.0.0.1", control_key=KEY)  # the same pod, its next start
    try:
        assert ray.get(second.ready.remote())["model_loaded"]
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(first.ready.remote(), timeout=30)
        named = ray.get_actor(cfg.actor_name("again-pod-0"), namespace="rewardpool")
        assert named._actor_id == second._actor_id != first._actor_id  # clients find the new one by name
    finally:
        ray.kill(second)
