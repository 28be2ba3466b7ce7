"""kopf wiring, kept thin: watch pools, their pods and attachments, and hand every change to the
Controller. Event handlers store nothing on the objects (no annotations, no finalizers), so an unchanged
pool costs no API writes and deleting a pool never waits for the operator."""
from __future__ import annotations

import logging

import kopf

from .controller import Controller
from .kube import NAD, Kube
from .spec import GROUP, PLURAL, POOL_LABEL, VERSION

log = logging.getLogger("rewardpool.operator")
_state: dict[str, Controller] = {}
# Set by `rewardpool operator --namespace ...`: serve exactly those namespaces.
NAMESPACES: list[str] = []


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, **_):
    settings.peering.standalone = True  # one replica (Deployment strategy Recreate)
    settings.posting.level = logging.WARNING
    # Against silently dead watch streams: the server closes them, and the client gives up on silence.
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 30
    settings.networking.request_timeout = 60
    if NAMESPACES:
        # A namespace-scoped install (chart rbac.scope=namespace) may not list namespaces cluster-wide; without
        # this kopf retries that list for about a minute, logging Forbidden, before it serves any pool.
        # The cost: a CRD installed after startup (e.g. Multus's) is watched only after a restart.
        settings.scanning.disabled = True
    _state["controller"] = Controller(await Kube.connect())
    log.info("rewardpool operator started")


@kopf.on.cleanup()
async def cleanup(**_):
    controller = _state.pop("controller", None)
    if controller:
        await controller.stop()
        await controller.kube.close()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def pool_changed(event, body, **_):
    _state["controller"].pool_event(event.get("type"), body)


@kopf.on.event("v1", "pods", labels={POOL_LABEL: kopf.PRESENT})
async def pod_changed(namespace, labels, **_):
    _state["controller"].trigger(namespace, labels[POOL_LABEL])


@kopf.on.event(*NAD, labels={POOL_LABEL: kopf.PRESENT})
async def attachment_changed(namespace, labels, **_):
    _state["controller"].trigger(namespace, labels[POOL_LABEL])
