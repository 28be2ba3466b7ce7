"""The RewardModelCache's controller, beside the pools' (it reads their specs, never their loops): the leader
keeps each cache's summary (ready, digest, usedBy) in its status, wakes the pools that use a cache when its copies
change, and holds a cache's deletion while a pool still names it; then its local volumes and claims go with it
(the agents remove the copies)."""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping

from ..api.reasons import MODEL_CACHE_IN_USE
from ..cluster.kube import Kube
from .layout import cache_summary, caches_named

log = logging.getLogger("rewardpool.operator")
PoolKey = tuple[str, str]


class CacheController:
    def __init__(self, kube: Kube, pools: Mapping[PoolKey, dict], wake_pool: Callable[[str, str], None],
                 leading: Callable[[], bool]):
        """`pools`: the pool controller's bodies (read only); `wake_pool(ns, name)`: a full look at a pool;
        `leading()`: whether this replica writes."""
        self.kube, self.pools, self.wake_pool, self.leading = kube, pools, wake_pool, leading

    def users(self, cache: str) -> list[str]:
        """The pools (namespace/name) whose scorer model is the RewardModelCache `cache`."""
        return sorted(f"{ns}/{name}" for (ns, name), body in self.pools.items()
                      if cache in caches_named(body.get("spec") or {}))

    async def changed(self, event_type: str | None, name: str, body: dict) -> None:
        """A cache's event: the pools using it look again (its copies changed: their placement finding and
        claims), and its summary is written anew."""
        for ns, pool in [k for k in self.pools if name in caches_named(self.pools[k].get("spec") or {})]:
            self.wake_pool(ns, pool)
        if event_type != "DELETED":
            await self.refresh(name, body)

    def pool_changed(self, key: PoolKey, before: dict | None, after: dict | None) -> None:
        """A pool's spec moved (`after` None: it is being deleted): the caches it starts or stops naming get
        their usedBy written."""
        old = caches_named((before or {}).get("spec") or {})
        new = caches_named((after or {}).get("spec") or {})
        for cache in old ^ new:
            self._spawn(self.refresh(cache, without=key if after is None else None), f"cache {cache} summary")

    async def refresh(self, name: str, body: dict | None = None, without: PoolKey | None = None) -> None:
        """The summary of cache `name` from its nodes' entries and its users (`without`: a pool being deleted);
        written only when it changed, and only by the leader."""
        if not self.leading():
            return
        body = body if body is not None else await self.kube.get_cache(name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return
        status = body.get("status") or {}
        users = [u for u in self.users(name) if without is None or u != "/".join(without)]
        want = cache_summary(status.get("nodes") or [], users)
        if any(status.get(k) != v for k, v in want.items()):
            await self.kube.patch_cache_status(name, want)

    async def delete(self, name: str, body: dict, retry: int) -> str | None:
        """A deleted cache: the message that holds its deletion while pools name it (a Warning event says it at
        once, then every tenth retry), else None once its volumes and claims are removed."""
        users = self.users(name)
        if users:
            message = (f"RewardModelCache {name} is the model of pool(s) {', '.join(users)}; its deletion waits "
                       "until they no longer name it")
            if retry % 10 == 0:
                await self.kube.event(body, "Warning", MODEL_CACHE_IN_USE, message)
            return f"{MODEL_CACHE_IN_USE}: {message}"
        await self.kube.delete_cache_objects(name)
        return None

    @staticmethod
    def _spawn(coro, what: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=what)
        task.add_done_callback(lambda t: t.cancelled() or t.exception() is None
                               or log.warning("%s: %s", what, t.exception()))
