"""The pools' pods as the operator's pod watch last saw them, and the pod writes it has made but not yet seen
come back (expectations, as the ReplicaSet controller keeps them). Reconciles read pods from here instead of
listing them: at thousands of workers a label-selector LIST per reconcile makes the API server filter every
pod in the namespace each time. A cache lags behind the operator's own writes, so before a reconcile makes a
pod write it asks `unsettled`: while a create, delete or drain it made is not yet in the cache, it makes none
(a worker is never created twice, a drain never restarted). An expectation lapses after EXPECTATION_TTL
seconds, as the ReplicaSet controller's does, so one lost watch event can never stop a pool for good.

The operator names the pods it creates itself (generateName's rule, on the client), so an expectation is
recorded before the write goes out and the watch event can never arrive before it."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

from rewardpool_worker.contract import DRAIN_ANNOTATION

from ..api.spec import POOL_LABEL

log = logging.getLogger("rewardpool.operator")
EXPECTATION_TTL = 300.0
CREATE, DELETE, DRAIN = "create", "delete", "drain"
Key = tuple[str, str]  # (namespace, pool)


def _key(pod: dict) -> Key | None:
    pool = (pod["metadata"].get("labels") or {}).get(POOL_LABEL)
    return (pod["metadata"]["namespace"], pool) if pool else None


def _done(kind: str, pod: dict | None) -> bool:
    """Does the pod as an event shows it (None: gone) show the write of this kind? Any event about a pod
    the operator created shows the create."""
    if kind == CREATE:
        return True
    if pod is None or pod["metadata"].get("deletionTimestamp"):
        return True  # gone or going: a delete is done, a drain no longer needed
    return kind == DRAIN and DRAIN_ANNOTATION in (pod["metadata"].get("annotations") or {})


class PodCache:
    def __init__(self, scopes: int = 1, clock: Callable[[], float] = time.monotonic):
        self._pods: dict[Key, dict[str, dict]] = {}
        self._where: dict[tuple[str, str], Key] = {}  # (namespace, pod) -> its pool, to follow a relabel
        self._pending: dict[Key, dict[str, tuple[str, float]]] = {}  # pool -> pod -> (kind, deadline)
        self._fresh: dict[str | None, list[dict]] = {}
        self._listed: set[str | None] = set()
        self._scopes = scopes
        self._clock = clock
        self.synced = asyncio.Event()

    # ---- fed by the watch (watches.watch_pool_pods), one handler per watched scope ----------------------------
    def handler(self, scope: str | None) -> Callable[[str, dict], None]:
        """The handler for one watch: `scope` is its namespace, None for all namespaces."""
        def handle(type_: str, obj: dict) -> None:
            if type_ == "SYNC":
                self._fresh.setdefault(scope, []).append(obj)
            elif type_ == "LISTED":
                self._relisted(scope, self._fresh.pop(scope, []))
            elif type_ == "DELETED":
                self._remove(obj["metadata"]["namespace"], obj["metadata"]["name"])
                key = _key(obj)
                if key:
                    self._observe(key, obj["metadata"]["name"], None)
            else:
                self._put(obj)
        return handle

    def _put(self, pod: dict) -> None:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        key = _key(pod)
        if key is None:
            return
        if self._where.get((ns, name), key) != key:
            self._remove(ns, name)
        self._pods.setdefault(key, {})[name] = pod
        self._where[(ns, name)] = key
        self._observe(key, name, pod)

    def _remove(self, ns: str, name: str) -> None:
        key = self._where.pop((ns, name), None)
        if key is not None:
            self._pods.get(key, {}).pop(name, None)
            if not self._pods.get(key):
                self._pods.pop(key, None)

    def _relisted(self, scope: str | None, items: list[dict]) -> None:
        """A (re)list replaces what the scope held: pods deleted while the watch was down disappear here."""
        for ns, name in [w for w in self._where if scope is None or w[0] == scope]:
            self._remove(ns, name)
        for pod in items:
            self._put(pod)
        for key, pending in self._pending.items():
            if scope is None or key[0] == scope:
                present = self._pods.get(key, {})
                for name in [n for n, (kind, _) in pending.items() if kind != CREATE and n not in present]:
                    pending.pop(name)
        self._listed.add(scope)
        if len(self._listed) >= self._scopes:
            self.synced.set()

    def _observe(self, key: Key, name: str, pod: dict | None) -> None:
        pending = self._pending.get(key)
        if pending and name in pending and _done(pending[name][0], pod):
            del pending[name]

    # ---- read and expect by the reconciles -------------------------------------------------------------------
    def pods(self, namespace: str, pool: str) -> list[dict]:
        return list(self._pods.get((namespace, pool), {}).values())

    def expect(self, namespace: str, pool: str, name: str, kind: str) -> None:
        """Call before the write goes out. A delete or drain the cache already shows is not waited for."""
        key = (namespace, pool)
        if kind != CREATE and _done(kind, self._pods.get(key, {}).get(name)):
            return
        self._pending.setdefault(key, {})[name] = (kind, self._clock() + EXPECTATION_TTL)

    def settle(self, namespace: str, pool: str, name: str) -> None:
        """The write failed (the API server refused it): nothing to wait for."""
        self._pending.get((namespace, pool), {}).pop(name, None)

    def unsettled(self, namespace: str, pool: str) -> list[str]:
        """The pool's pods whose writes this operator has not yet seen, lapsed ones dropped (and logged)."""
        pending = self._pending.get((namespace, pool))
        if not pending:
            return []
        now = self._clock()
        for name, (kind, deadline) in list(pending.items()):
            if deadline <= now:
                log.warning("pool %s/%s: the %s of pod %s was not seen within %.0fs; acting without it",
                            namespace, pool, kind, name, EXPECTATION_TTL)
                del pending[name]
        return sorted(pending)

    def forget(self, namespace: str, pool: str) -> None:
        self._pending.pop((namespace, pool), None)
