"""Shadow scoring on real Ray and a real mooncake_master: while a pool's new scorer version shadows the serving
one (its pod annotated, as the operator does for spec.rollout.shadow), every call is scored by the serving
version alone, the shadow worker scores the same stored outputs beside it, and its reported agreement is the
one computed here from the tensors; once the annotation goes, the new version takes calls."""
from __future__ import annotations

import asyncio
import statistics
import time

import pytest
import ray

from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.client import AsyncRewardPoolClient
from rewardpool_worker.contract import SHADOW_ANNOTATION, Agreement, version_label
from rewardpool_worker.runtime.actor import start_actor
from tests.worker.conftest import KEY, pool_cfg

SHAPE = [3, 2, 4, 4]


def annotations(path, shadow: bool) -> None:
    """The pod's Downward API annotations file, in the kubelet's format (key="Go-quoted value" per line)."""
    lines = ['kubernetes.io/config.source="api"'] + ([f'{SHADOW_ANNOTATION}="2026-12-02T00:00:00Z"'] if shadow else [])
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    tmp.replace(path)  # as the kubelet swaps the file: never half written


def test_a_shadow_version_scores_beside_the_serving_one_and_takes_calls_once_promoted(ray_cluster, master,
                                                                                      producer, tmp_path):
    n = 6
    refs = [producer.put(f"shadow-{i}", seed=90 + i, shape=tuple(SHAPE)) for i in range(n)]
    tensors = [make_tensor(90 + i, SHAPE, "float32") for i in range(n)]
    old_scores = [float(t.mean()) for t in tensors]  # the serving version: ScaledMean(1)
    new_scores = [float(t.pow(2).mean()) for t in tensors]  # the shadow: MeanSquare(1)

    serving_cfg = pool_cfg(master, "shd", {"class": "tests.worker.custom_scorer:ScaledMean", "batch_size": 8})
    shadow_cfg = pool_cfg(master, "shd", {"class": "tests.worker.custom_scorer:MeanSquare", "batch_size": 8})
    serving = start_actor(serving_cfg.model_copy(update={"scorer_version": "v-old"}), "shd-pod-0", "127.0.0.1",
                          annotations_file=str(tmp_path / "absent"), control_key=KEY)
    podinfo = tmp_path / "annotations"
    annotations(podinfo, shadow=True)
    shadow = start_actor(shadow_cfg.model_copy(update={"scorer_version": "v-new"}), "shd-pod-1", "127.0.0.1",
                         annotations_file=str(podinfo), control_key=KEY)
    try:
        assert ray.get(shadow.ready.remote())["shadow"] is True
        assert ray.get(serving.ready.remote())["shadow"] is False
        old_version = ray.get(serving.ready.remote())["version"]
        with pytest.raises(ray.exceptions.RayTaskError, match="shadows the serving"):  # no serving batch
            ray.get(shadow.score_batch.remote(refs[:1], ["p"]))

        before = ray.get(shadow.stats.remote())["outputs"]

        async def run():
            client = AsyncRewardPoolClient("shd", "t", refresh_seconds=0.5)
            calls, seen = [], []
            while sum(m.ready for m in client.router.snapshot()) < 2:  # both workers known and probed first
                await client.refresh()
                await asyncio.sleep(0.1)
            for _ in range(8):  # one batch per call, one call at a time: the shadow worker is idle for each
                r = await client.score_detailed(refs, ["p"] * n, timeout=60)
                # the call waited for its shadow batch: nothing of it is still reading on the shadow worker
                calls.append((r, (await asyncio.to_thread(ray.get, shadow.stats.remote()))["in_flight"]))
            stats = await asyncio.to_thread(ray.get, shadow.stats.remote())
            # the operator promotes it (POST /promote reaches the actor; the annotation goes later, with the
            # kubelet's refresh of the file)
            assert await asyncio.to_thread(ray.get, shadow.promote.remote(KEY)) is True
            # the same client learns the promotion by asking the shadow worker again (every refresh_seconds)
            for _ in range(30):
                seen.append(await client.score_detailed(refs, ["p"] * n, timeout=60))
                await asyncio.sleep(0.1)
            return client, calls, seen, stats


        client, calls, seen, stats = asyncio.run(run())
        for r, shadow_in_flight in calls:
            assert r.version == old_version and r.results == [pytest.approx(s) for s in old_scores]
            assert r.shadowed == n and shadow_in_flight == 0
        assert client.shadow_failures == 0

        # the shadow worker's own account: what it scored, and the agreement of its scores with the serving ones
        got = Agreement(**stats["agreement"][old_version])
        # keyed by the serving worker's full version, whose label part is what the operator matches with the
        # old pods' rewardpool.io/scorer-version label
        assert version_label(old_version) == "v-old" and list(stats["agreement"]) == [old_version]
        assert got.n == 8 * n
        assert got.correlation == pytest.approx(statistics.correlation(old_scores, new_scores), abs=1e-9)
        assert got.mean_difference == pytest.approx(statistics.fmean(new_scores) - statistics.fmean(old_scores))

        versions = [r.version for r in seen]
        assert set(versions) == {old_version, ray.get(shadow.ready.remote())["version"]}, versions  # both serve
        for r in seen:  # and still no call mixes the two
            want = old_scores if r.version == old_version else new_scores
            assert r.results == [pytest.approx(s) for s in want] and r.shadowed in (0, n)
        assert all(r.shadowed == 0 for r in seen[-10:])  # the client learned the promotion: no more shadow
        new_calls = sum(v != old_version for v in versions)
        # what the promoted worker scored: the shadow batches, then the calls it served
        assert ray.get(shadow.stats.remote())["outputs"] - before == client.shadowed + new_calls * n
        assert ray.get(shadow.ready.remote())["shadow"] is False
        with pytest.raises(ray.exceptions.RayTaskError, match="Draining"):
            ray.get(shadow.drain.remote(KEY))
            ray.get(shadow.shadow_batch.remote(refs[:1], ["p"]))
    finally:
        for a in (serving, shadow):
            ray.kill(a)


def test_the_annotation_leaving_the_file_promotes_the_worker_too(ray_cluster, master, tmp_path):
    """Without the POST (a network policy that blocks it), the kubelet's refresh of the file is enough."""
    podinfo = tmp_path / "annotations"
    annotations(podinfo, shadow=True)
    cfg = pool_cfg(master, "shf", {"class": "tests.worker.custom_scorer:MeanSquare", "batch_size": 2})
    w = start_actor(cfg, "shf-pod-0", "127.0.0.1", annotations_file=str(podinfo), control_key=KEY)
    try:
        assert ray.get(w.ready.remote())["shadow"] is True
        annotations(podinfo, shadow=False)
        deadline = time.monotonic() + 10
        while ray.get(w.ready.remote())["shadow"] and time.monotonic() < deadline:
            time.sleep(0.2)
        assert ray.get(w.ready.remote())["shadow"] is False and ray.get(w.stats.remote())["shadow"] is False
    finally:
        ray.kill(w)
