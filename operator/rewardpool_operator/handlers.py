"""kopf wiring, kept thin: watch pools and their attachments through kopf, pods (server-side label
selector) and nodes through the operator's own watches, and hand every change to the Controller. Event
handlers store nothing on the objects (no annotations, no finalizers), so an unchanged pool costs no API
writes and deleting a pool never waits for the operator. With a lease namespace configured, only the
replica holding the Lease reconciles.

Operator-wide state lives in kopf's memo, not in module globals: the CLI starts it with the options
(`namespaces`: those watched, empty for all; `lease_namespace`: None for no leader election), startup adds
the `controller`, its `tasks` and the `elector`, and each handler reads them from the memo it is passed (kopf
copies the operator's memo into a resource's when it first sees the resource, which is after startup)."""
from __future__ import annotations

import asyncio
import logging
import os
import socket

import kopf

from rewardpool_worker.contract import GROUP, PLURAL, POOL_LABEL, VERSION

from .cluster.kube import NAD, Kube
from .cluster.leader import LeaderElector
from .cluster.podcache import PodCache
from .cluster.watches import NodeCache, watch_pool_pods
from .controller.loop import Controller
from .modelcache.controller import CacheController
from .modelcache.layout import PLURAL as CACHE_PLURAL

log = logging.getLogger("rewardpool.operator")
LEASE_NAME = "rewardpool-operator"


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_):
    settings.peering.standalone = True  # one writer is ensured by the Lease below, not by kopf's peering
    settings.posting.level = logging.WARNING
    # Against silently dead watch streams: the server closes them, and the client gives up on silence.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60
    if memo.namespaces:
        # A namespace-scoped install (chart rbac.scope=namespace) may not list namespaces cluster-wide; without
        # this kopf retries that list for about a minute, logging Forbidden, before it serves any pool.
        # The cost: a CRD installed after startup (e.g. Multus's) is watched only after a restart.
        settings.scanning.disabled = True
    kube = await Kube.connect()
    nodes = NodeCache()
    pods = PodCache(scopes=max(1, len(memo.namespaces)))
    controller = Controller(kube, pods, nodes)
    caches = CacheController(kube, controller.bodies, lambda ns, name: controller.trigger(ns, name, full=True),
                             lambda: controller.leading)
    controller.on_spec_change = caches.pool_changed
    tasks = [nodes.start(kube.core)]

    def pod_handler(scope: str | None):
        cache = pods.handler(scope)

        def changed(type_: str, pod: dict) -> None:
            cache(type_, pod)
            if type_ == "LISTED":
                controller.trigger_all(scope)
                return
            pool = (pod["metadata"].get("labels") or {}).get(POOL_LABEL)
            if pool and type_ != "SYNC":
                controller.trigger(pod["metadata"]["namespace"], pool)
        return changed

    tasks += watch_pool_pods(kube.core, memo.namespaces, pod_handler)
    elector = None
    if memo.lease_namespace:
        controller.leading = False
        identity = f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"
        elector = LeaderElector(kube.api, memo.lease_namespace, LEASE_NAME, identity)
        tasks.append(asyncio.create_task(elector.run(controller.lead, controller.stand_by), name="leader election"))
    memo.update(controller=controller, caches=caches, tasks=tasks, elector=elector)
    log.info("rewardpool operator started (%s)", f"leader election in {memo.lease_namespace}"
             if elector else "no leader election: run one replica")


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_):
    controller = memo.pop("controller", None)
    for task in memo.pop("tasks", []):
        task.cancel()
    if controller:
        await controller.stop()
        if memo.get("elector"):
            await memo.elector.release()
        await controller.kube.close()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def pool_changed(event, body, memo: kopf.Memo, **_):
    memo.controller.pool_event(event.get("type"), body)


@kopf.on.event(GROUP, VERSION, CACHE_PLURAL)
async def cache_changed(event, body, memo: kopf.Memo, **_):
    await memo.caches.changed(event.get("type"), body["metadata"]["name"], body)


@kopf.on.delete(GROUP, VERSION, CACHE_PLURAL)
async def cache_deleted(name, body, retry: int, memo: kopf.Memo, **_):
    """A cache a pool uses is not deleted from under it: the deletion waits until no pool names it."""
    if not memo.controller.leading:
        raise kopf.TemporaryError("only the leader removes a cache", delay=15)
    held = await memo.caches.delete(name, body, retry)
    if held:
        raise kopf.TemporaryError(held, delay=30)


@kopf.on.event(*NAD, labels={POOL_LABEL: kopf.PRESENT})
async def attachment_changed(namespace, labels, memo: kopf.Memo, **_):
    memo.controller.trigger(namespace, labels[POOL_LABEL], full=True)
