"""Per-pool reconcile loops: each pool gets one task that runs `reconcile` whenever something about it
changes (the pool, its pods, its attachment) and at least every RESYNC seconds. One task per pool means
reconciles of a pool never overlap; a burst of events coalesces into one run. A change to the pool itself
(not its status, which this operator writes) or its attachment asks for a full reconcile, in which the
owned objects are read and ensured; a pod event asks only for pods and status to be looked at again.
Loops run only while this replica leads (see leader.py); pools are still tracked while it stands by, so a
takeover starts at once."""
from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

from rewardpool_worker.contract import OperatorMetricNames as M

from ..cluster.kube import ApiException, Kube
from ..cluster.podcache import PodCache
from ..cluster.watches import NodeCache
from . import metrics as pool_metrics
from .reconcile import PoolMemory, reconcile
from .workers import HttpWorkerClient, WorkerClient

log = logging.getLogger("rewardpool.operator")
RESYNC_SECONDS = 60.0
RECONCILES = M.RECONCILES.make()
RECONCILE_SECONDS = M.RECONCILE_SECONDS.make()
FAST_SECONDS = 5.0  # how often a pool that autoscales, drains or rolls workers is looked at again
MIN_GAP_SECONDS = 0.25


class Controller:
    def __init__(self, kube: Kube, pods: PodCache, nodes: NodeCache, resync: float = RESYNC_SECONDS,
                 workers: WorkerClient | None = None):
        self.kube = kube
        self.workers = workers or HttpWorkerClient()
        self.resync = resync
        self.pods = pods
        self.nodes = nodes
        self.leading = True
        self.bodies: dict[tuple[str, str], dict] = {}
        self.full: set[tuple[str, str]] = set()  # pools whose owned objects are to be ensured at the next pass
        self.memories: dict[tuple[str, str], PoolMemory] = {}
        self.wake: dict[tuple[str, str], asyncio.Event] = {}
        self.tasks: dict[tuple[str, str], asyncio.Task] = {}
        # told (key, body before, body after or None when deleted) on each pool event: the model cache's usedBy
        self.on_spec_change: Callable[[tuple[str, str], dict | None, dict | None], None] | None = None

    def pool_event(self, event_type: str | None, body: dict) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        gone = event_type == "DELETED" or body["metadata"].get("deletionTimestamp")
        before = self.bodies.get(key)
        if self.on_spec_change is not None:
            self.on_spec_change(key, before, None if gone else body)
        if gone:
            # Owned objects go with the pool through owner references (garbage collection).
            self.bodies.pop(key, None)
            self.memories.pop(key, None)
            self.pods.forget(*key)
            self._stop(key)
            pool_metrics.forget(*key)
            return
        self.keep(key, body)
        if before is not None and _identity(before) == _identity(self.bodies[key]):
            return  # only the status moved: this operator's own write, nothing to do
        self.full.add(key)
        self._start(key)

    def keep(self, key: tuple[str, str], body: dict) -> None:
        """Keep the newer copy of a pool: the watch's, or the one this operator's own status write returned
        (the watch delivers that a moment later, and an older event may still be on its way)."""
        before = self.bodies.get(key)
        if before is None or _version(body) >= _version(before):
            self.bodies[key] = dict(body)

    def _start(self, key: tuple[str, str]) -> None:
        if self.leading and key not in self.tasks:
            self.wake[key] = asyncio.Event()
            self.tasks[key] = asyncio.create_task(self._loop(key), name=f"reconcile {key[0]}/{key[1]}")
        self.trigger(*key)

    def _stop(self, key: tuple[str, str]) -> None:
        task = self.tasks.pop(key, None)
        if task:
            task.cancel()
        self.wake.pop(key, None)

    def trigger(self, namespace: str, name: str, full: bool = False) -> None:
        ev = self.wake.get((namespace, name))
        if ev is not None:
            if full:
                self.full.add((namespace, name))
            ev.set()

    def trigger_all(self, namespace: str | None) -> None:
        """Every pool in the namespace (all when None): after a pod relist, which may have dropped pods."""
        for ns, name in list(self.bodies):
            if namespace is None or ns == namespace:
                self.trigger(ns, name)

    async def lead(self) -> None:
        self.leading = True
        for key in list(self.bodies):
            self.full.add(key)
            self._start(key)

    async def stand_by(self) -> None:
        self.leading = False
        await self.stop()
        for key in list(self.bodies):  # the new leader exports them now: a stale copy would double a KEDA sum
            pool_metrics.forget(*key)

    async def _loop(self, key: tuple[str, str]) -> None:
        ev = self.wake[key]
        backoff = 1.0
        status: dict | None = None
        last = 0.0
        stale = False
        while key in self.bodies:
            period = look_again_in(self.bodies.get(key) or {}, status, self.resync)
            try:
                await asyncio.wait_for(ev.wait(), timeout=period * random.uniform(0.9, 1.1))
            except asyncio.TimeoutError:
                pass
            # A pool's pods change in bursts (created, scheduled, Ready one by one): coalesce what comes
            # within MIN_GAP_SECONDS of the last pass into the next one, so a burst is a write or two.
            await asyncio.sleep(max(0.0, last + MIN_GAP_SECONDS - time.monotonic()))
            ev.clear()
            body = self.bodies.get(key)
            if body is None:
                return
            full = key in self.full
            self.full.discard(key)
            done = False
            try:
                if stale:  # our copy lost a race (409): read the pool once instead of waiting for the watch
                    fresh = await self.kube.get_pool(*key)
                    stale = False
                    if fresh is None:
                        continue  # deleted: the watch says so in a moment
                    self.keep(key, fresh)
                    body = self.bodies.get(key) or fresh
                await self.nodes.synced.wait()
                await self.pods.synced.wait()
                with RECONCILE_SECONDS.time():
                    status, written = await reconcile(self.kube, self.workers, body, self.nodes.nodes, self.pods,
                                                      self.memories.setdefault(key, PoolMemory()), full=full)
                last = time.monotonic()
                if written is not None and key in self.bodies:
                    self.keep(key, written)
                    if _identity(written) != _identity(body):
                        # The write returned a pool changed since this pass read it (its own /scale, a user):
                        # the watch event for that change will look like news already seen, so act on it now.
                        self.full.add(key)
                        ev.set()
                RECONCILES.labels("ok").inc()
                backoff = 1.0
                done = True
            except asyncio.CancelledError:
                raise
            except Exception as e:  # never let one pool's failure stop the operator
                if isinstance(e, ApiException) and e.status == 409:
                    # the pool changed under this reconcile: look again with the new one
                    RECONCILES.labels("conflict").inc()
                    stale = True
                    ev.set()
                    continue
                self._failed(key, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60)
                ev.set()
            finally:
                if full and not done:  # the owned objects still want their look at the next pass
                    self.full.add(key)

    def _failed(self, key, e: Exception) -> None:
        RECONCILES.labels("error").inc()
        log.exception("reconcile of %s/%s failed: %s", *key, e)

    async def stop(self) -> None:
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.tasks.clear()
        self.wake.clear()


def look_again_in(body: dict, status: dict | None, resync: float) -> float:
    """How long a pool may go unlooked at without an event: FAST_SECONDS while what a pass reads is not watched
    (the autoscaler's signals; a drain's or a roll's progress, a shadow's samples and pinned groups; workers not
    yet Ready; a tenant's Secret, so a rotated token takes effect in seconds), else the resync."""
    spec, st = body.get("spec") or {}, status or {}
    busy = ((spec.get("autoscaling") or {}).get("enabled") or st.get("drainingReplicas") or st.get("roll")
            or st.get("readyReplicas") != st.get("replicas") or (spec.get("access") or {}).get("tenants"))
    return FAST_SECONDS if busy else resync


def _identity(body: dict) -> tuple:
    """What a change to the pool itself moves: spec (generation), labels, annotations (a demand hint, a poke)."""
    meta = body["metadata"]
    return meta.get("generation"), meta.get("labels"), meta.get("annotations"), meta.get("deletionTimestamp")


def _version(body: dict) -> int:
    """etcd's resourceVersions grow; the API calls them opaque, so one that is not a number never wins."""
    try:
        return int(body["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0
