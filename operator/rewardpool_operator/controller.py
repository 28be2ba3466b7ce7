"""Per-pool reconcile loops: each pool gets one task that runs `reconcile` whenever something about it
changes (the pool, its pods, its attachment) and at least every RESYNC seconds. One task per pool means
reconciles of a pool never overlap; a burst of events coalesces into one run."""
from __future__ import annotations

import asyncio
import logging
import random

from prometheus_client import Counter, Histogram

from .kube import Kube
from .reconcile import reconcile

log = logging.getLogger("rewardpool.operator")
RESYNC_SECONDS = 60.0
RECONCILES = Counter("rewardpool_operator_reconciles", "Reconciles run", ["result"])
RECONCILE_SECONDS = Histogram("rewardpool_operator_reconcile_seconds", "Time of one reconcile")
FAST_SECONDS = 5.0  # how often a pool that autoscales or drains workers is looked at again


class Controller:
    def __init__(self, kube: Kube, resync: float = RESYNC_SECONDS):
        self.kube = kube
        self.resync = resync
        self.bodies: dict[tuple[str, str], dict] = {}
        self.wake: dict[tuple[str, str], asyncio.Event] = {}
        self.tasks: dict[tuple[str, str], asyncio.Task] = {}

    def pool_event(self, event_type: str | None, body: dict) -> None:
        key = (body["metadata"]["namespace"], body["metadata"]["name"])
        if event_type == "DELETED" or body["metadata"].get("deletionTimestamp"):
            # Owned objects go with the pool through owner references (garbage collection).
            self.bodies.pop(key, None)
            task = self.tasks.pop(key, None)
            if task:
                task.cancel()
            self.wake.pop(key, None)
            return
        self.bodies[key] = dict(body)
        if key not in self.tasks:
            self.wake[key] = asyncio.Event()
            self.tasks[key] = asyncio.create_task(self._loop(key), name=f"reconcile {key[0]}/{key[1]}")
        self.trigger(*key)

    def trigger(self, namespace: str, name: str) -> None:
        ev = self.wake.get((namespace, name))
        if ev is not None:
            ev.set()

    async def _loop(self, key: tuple[str, str]) -> None:
        ev = self.wake[key]
        backoff = 1.0
        status: dict | None = None
        while key in self.bodies:
            auto = ((self.bodies.get(key) or {}).get("spec") or {}).get("autoscaling") or {}
            busy = auto.get("enabled") or (status or {}).get("drainingReplicas")
            period = FAST_SECONDS if busy else self.resync
            try:
                await asyncio.wait_for(ev.wait(), timeout=period * random.uniform(0.9, 1.1))
            except asyncio.TimeoutError:
                pass
            ev.clear()
            body = self.bodies.get(key)
            if body is None:
                return
            try:
                with RECONCILE_SECONDS.time():
                    status = await reconcile(self.kube, body)
                RECONCILES.labels("ok").inc()
                backoff = 1.0
            except asyncio.CancelledError:
                raise
            except Exception as e:  # never let one pool's failure stop the operator
                RECONCILES.labels("error").inc()
                log.exception("reconcile of %s/%s failed (retry in %.0fs): %s", *key, backoff, e)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60)
                ev.set()

    async def stop(self) -> None:
        for task in self.tasks.values():
            task.cancel()
        await asyncio.gather(*self.tasks.values(), return_exceptions=True)
        self.tasks.clear()
