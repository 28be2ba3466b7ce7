"""The operator's own watches, where kopf would filter on the client: pods by a server-side label selector
(only the pools' pods stream in, not every pod in the cluster) into podcache.PodCache, and nodes into a
cache; the reconciles read both and list neither. Each is list-then-watch from the list's resourceVersion,
restarted on errors and on 410 Gone, as client-go's reflector does."""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Awaitable, Callable

from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from ..api.spec import POOL_LABEL

log = logging.getLogger("rewardpool.operator")
Handler = Callable[[str, dict], Awaitable[None] | None]


async def _reflect(list_fn, handler: Handler, what: str, **kw) -> None:
    backoff = 1.0
    while True:
        try:
            resp = await list_fn(_preload_content=False, **kw)
            listed = json.loads(await resp.read())
            if resp.status != 200:
                raise ApiException(status=resp.status, reason=listed.get("message", resp.reason))
            for obj in listed["items"]:
                await _call(handler, "SYNC", obj)
            await _call(handler, "LISTED", listed)
            rv = listed["metadata"]["resourceVersion"]
            backoff = 1.0
            while True:
                async with _RawWatch() as w:
                    async for ev in w.stream(list_fn, resource_version=rv, timeout_seconds=300,
                                             allow_watch_bookmarks=True, **kw):
                        obj = ev["raw_object"]
                        rv = obj.get("metadata", {}).get("resourceVersion", rv)
                        if ev["type"] == "ERROR":
                            raise ApiException(status=obj.get("code", 500), reason=obj.get("message"))
                        if ev["type"] != "BOOKMARK":
                            await _call(handler, ev["type"], obj)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # 410 Gone, a dropped connection, a refused watch: list again
            level = logging.DEBUG if isinstance(e, ApiException) and e.status == 410 else logging.WARNING
            log.log(level, "%s watch restarts in %.0fs: %s", what, backoff, e)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30)


class _RawWatch(watch.Watch):
    """Events as the plain dicts the handlers read: building typed models for every pod event took a
    tenth of the operator's CPU at thousands of pods (profiled), for objects nobody read."""

    def get_return_type(self, func) -> None:
        return None


async def _call(handler: Handler, type_: str, obj: dict) -> None:
    res = handler(type_, obj)
    if asyncio.iscoroutine(res):
        await res


def watch_pool_pods(core: client.CoreV1Api, namespaces: list[str],
                    handler_for: Callable[[str | None], Handler]) -> list[asyncio.Task]:
    """Pods that carry the pool label, in the given namespaces (all when empty); `handler_for(scope)` gives
    each watch its handler (scope: its namespace, None for all)."""
    if not namespaces:
        return [asyncio.create_task(_reflect(core.list_pod_for_all_namespaces, handler_for(None), "pod",
                                             label_selector=POOL_LABEL), name="watch pods")]
    return [asyncio.create_task(_reflect(core.list_namespaced_pod, handler_for(ns), f"pod ({ns})", namespace=ns,
                                         label_selector=POOL_LABEL), name=f"watch pods {ns}")
            for ns in namespaces]


class NodeCache:
    """Every node by name, kept current by a watch."""

    def __init__(self):
        self.nodes: dict[str, dict] = {}
        self.synced = asyncio.Event()
        self._fresh: dict[str, dict] = {}

    def handle(self, type_: str, obj: dict) -> None:
        if type_ == "SYNC":
            self._fresh[obj["metadata"]["name"]] = obj
        elif type_ == "LISTED":
            self.nodes, self._fresh = self._fresh, {}
            self.synced.set()
        elif type_ == "DELETED":
            self.nodes.pop(obj["metadata"]["name"], None)
        else:
            self.nodes[obj["metadata"]["name"]] = obj

    def start(self, core: client.CoreV1Api) -> asyncio.Task:
        return asyncio.create_task(_reflect(core.list_node, self.handle, "node"), name="watch nodes")
