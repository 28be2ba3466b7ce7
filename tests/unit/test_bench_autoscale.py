"""The autoscale bench's cache configurations, their pure pieces: the pool passes the operator's own checks with its
weights from the cache; the fleet's stand-in mount moves the scorer's model path to the copy on the pod's node (and
nothing else); the scorer reads every byte of its weights and refuses none."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from rewardpool_devcluster import bench_autoscale as ba
from rewardpool_devcluster.fleet import mount_paths
from rewardpool_devcluster.kwokcache import KwokCaches
from rewardpool_operator.pool import builders, sizing, validate
from rewardpool_operator.api.spec import Pool
from rewardpool_worker.contract import ENV_VAR, WorkerConfig


def _pool() -> Pool:
    spec = {"image": "rewardpool-worker:bench", "replicas": 1,
            "scorer": {"class": "rewardpool_devcluster.bench_autoscale:CachedTimingScorer", "batchSize": 1,
                       "model": {"cache": {"name": ba.CACHE}}},
            "store": {"master": "127.0.0.1:50051", "protocol": "tcp", "segmentSize": 0, "localBufferSize": "16Mi"},
            "ray": {"address": "127.0.0.1:6379", "namespace": "rewardpool"}}
    return Pool.from_object({"apiVersion": "rewardpool.io/v1alpha1", "kind": "RewardPool",
                             "metadata": {"name": "autoscaled-cache", "namespace": "bench", "uid": "u"}, "spec": spec})


def test_the_cache_pool_mounts_the_copy_on_its_node_and_the_fleet_reads_it_there(tmp_path):
    pool = _pool()
    pod = builders.pod_template(pool, sizing.compute(pool.spec))
    assert [p.reason for p in validate.check(pool.spec, pod) if p.blocking] == []
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "w-0", "namespace": "bench"},
           "spec": {**pod["spec"], "nodeName": "rdma-node-1"}}
    v1pod = client.ApiClient()._ApiClient__deserialize(pod, "V1Pod")
    caches = KwokCaches(Path("/k"), ["rdma-node-0", "rdma-node-1"], tmp_path, {})
    mounts = caches.mounts(v1pod)
    here = str(tmp_path / "rdma-node-1" / ba.CACHE / "data")
    assert mounts == {"/models/CachedTimingScorer": here}
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    cfg = WorkerConfig.model_validate(mount_paths(json.loads(env[ENV_VAR]), mounts))
    assert cfg.scorer.model_path == here and cfg.scorer.processor_path in (None, here)
    assert cfg.store == WorkerConfig.model_validate(json.loads(env[ENV_VAR])).store  # nothing else moved


@pytest.mark.parametrize("value,want", [
    ("/models/a", "/here/a"),                 # the mount path itself
    ("/models/a/sub/x.bin", "/here/a/sub/x.bin"),  # a path under it
    ("/models/ab", "/models/ab"),             # a sibling sharing its prefix is not under it
    ("models/a", "models/a"),                 # not a path at all
    (3, 3), (None, None),
])
def test_mount_paths_moves_only_paths_at_or_under_a_mount(value, want):
    assert mount_paths({"x": [value]}, {"/models/a": "/here/a"}) == {"x": [want]}


def test_the_cached_scorer_reads_its_weights_whole_and_refuses_none(tmp_path):
    ba.write_model(tmp_path / "m", (16 << 20) * 2 + 5)
    assert ba.CachedTimingScorer(str(tmp_path / "m")).bytes == (16 << 20) * 2 + 5
    (tmp_path / "empty").mkdir()
    with pytest.raises(RuntimeError, match="no weights"):
        ba.CachedTimingScorer(str(tmp_path / "empty"))


def test_the_model_is_clip_h_scaled_by_the_time_compression():
    assert ba.model_bytes(5.0) == 748_000_000 and ba.model_bytes(1.0) == ba.CLIP_H_BYTES
