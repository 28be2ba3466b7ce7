"""The worker's Ray actor: one per pod, named `rewardpool:<namespace>/<pool>:<pod>` so pool clients find it,
and pinned to the pod's own Ray node. It owns the store client, the registered reader and the scorer."""
from __future__ import annotations

import logging

import ray

from .actor import StoredOutputRewardActor
from .config import WorkerConfig
from .reader import RegisteredTensorReader
from .records import OutputRef
from .scorers import build_scorer
from .store import Store

log = logging.getLogger("rewardpool.worker")
# Calls beyond the first wait inside the actor (on the reader's lock), so in_flight is the true queue depth.
MAX_CONCURRENCY = 64


class Draining(RuntimeError):
    """The worker is draining: send the batch elsewhere."""


class RewardWorker:
    def __init__(self, cfg_json: str, local_hostname: str):
        self.cfg = WorkerConfig.from_json(cfg_json)
        self.store = Store.connect(self.cfg.store, local_hostname)
        self.reader = RegisteredTensorReader(self.store, initial_bytes=self.cfg.read_buffer_bytes)
        self.reader.warm()
        self.scorer = build_scorer(self.cfg.scorer)
        self.actor = StoredOutputRewardActor(self.scorer, self.reader)
        self.draining = False

    def ready(self) -> dict:
        """Readiness: the store answered setup, the buffer is registered (if sized), the model is loaded."""
        return {"store": True, "buffer_registered": self.reader.stats.registrations > 0 or self.cfg.read_buffer_bytes == 0,
                "model_loaded": self.scorer is not None, "store_hostname": self.store.hostname}

    def score_batch(self, outputs: list, prompts: list[str]) -> list[float]:
        if self.draining:
            raise Draining(f"{self.cfg.pool}: worker is draining")
        return self.actor.score_batch(outputs, prompts)

    def read_outputs(self, refs: list[OutputRef]):
        """Read outputs back as tensors (media logging)."""
        return self.reader.read_many(refs)

    def drain(self) -> dict:
        self.draining = True
        return self.stats()

    def stats(self) -> dict:
        return {**self.actor.stats(), "draining": self.draining}


def local_node_strategy():
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def start_actor(cfg: WorkerConfig, pod_name: str, local_hostname: str):
    """Create this pod's named actor on this node; returns its handle once constructed."""
    cls = ray.remote(RewardWorker)
    handle = cls.options(name=cfg.actor_name(pod_name), namespace=cfg.ray.namespace,
                         max_concurrency=MAX_CONCURRENCY, num_cpus=0,
                         scheduling_strategy=local_node_strategy()).remote(cfg.to_json(), local_hostname)
    ray.get(handle.ready.remote())
    return handle
