"""Worker-test fixtures: real worker actors (the worker's own Ray actor class, each with its own store client
against the session's real mooncake_master) started as a pod's entrypoint starts them. They lend no segment
(pure readers): a killed worker leaves no dead segment behind for the next test's puts to land in."""
from __future__ import annotations

import pytest
import ray

from rewardpool_worker.contract import RayConfig, ScorerConfig, StoreConfig, WorkerConfig
from rewardpool_worker.runtime.actor import start_actor

KEY = "test-control-key"  # what the tests' workers take drain and promote with (a pod's entrypoint draws its own)


def pool_cfg(master, pool: str, scorer: dict, ns: str = "t", scorers: list[dict] | None = None) -> WorkerConfig:
    return WorkerConfig(pool=pool, namespace=ns,
                        store=StoreConfig(master=master.address, protocol="tcp", segment_bytes=0,
                                          local_buffer_bytes=16 << 20),
                        scorer=ScorerConfig(**scorer), scorers=[ScorerConfig(**s) for s in scorers or []],
                        ray=RayConfig(namespace="rewardpool"), read_buffer_bytes=1 << 20)


@pytest.fixture()
def pool_actors(ray_cluster, master):
    """pool_actors(pool, n, scorer, scorers=None) -> handles of n new workers of that pool."""
    made, count = [], {}

    def make(pool, n, scorer=None, scorers=None):
        cfg = pool_cfg(master, pool, scorer or {"name": "mean-intensity"}, scorers=scorers)
        for _ in range(n):
            i = count[pool] = count.get(pool, -1) + 1
            made.append(start_actor(cfg, f"{pool}-pod-{i}", "127.0.0.1", control_key=KEY))
        return made[-n:]
    yield make
    for a in made:
        try:
            ray.kill(a)
        except Exception:
            pass
