"""The few Kubernetes API calls the reconciler makes, as plain dicts (kubernetes_asyncio underneath). Every
write is counted in rewardpool_operator_api_writes by kind. The objects a pool owns besides its pods (the
Service, the PodDisruptionBudget, the NetworkAttachmentDefinition) are written by server-side apply as
FIELD_MANAGER; whether to write at all is decided by the caller (owned.py), so an unchanged pool sends none."""
from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException  # every call's refusal; other rooms import it here

from rewardpool_worker.contract import GROUP, PLURAL, VERSION
from rewardpool_worker.contract import OperatorMetricNames as M

from ..modelcache.layout import CACHE_LABEL
from ..modelcache.layout import PLURAL as CACHE_PLURAL

log = logging.getLogger("rewardpool.operator")
NAD = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")
MERGE = "application/merge-patch+json"
APPLY = "application/apply-patch+yaml"  # JSON is YAML: the client sends the dict as JSON
FIELD_MANAGER = "rewardpool-operator"
API_WRITES = M.API_WRITES.make()


async def read_json(coro) -> dict:
    """Await a raw (_preload_content=False) call; raise ApiException on a non-2xx answer, as the typed
    path would, and return the JSON body as a dict."""
    resp = await coro
    raw = await resp.read()
    if not 200 <= resp.status < 300:
        err = ApiException(status=resp.status, reason=resp.reason)
        err.body = raw.decode(errors="replace")
        raise err
    return json.loads(raw) if raw else {}


class Kube:
    def __init__(self, api: client.ApiClient):
        self.api = api
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.policy = client.PolicyV1Api(api)
        # What an owned object is read with; NetworkAttachmentDefinitions by get_nad (it tells a missing CRD).
        self._reads = {"Service": self.core.read_namespaced_service,
                       "PodDisruptionBudget": self.policy.read_namespaced_pod_disruption_budget,
                       "PersistentVolumeClaim": self.core.read_namespaced_persistent_volume_claim,
                       "PersistentVolume": lambda name, _ns, **kw: self.core.read_persistent_volume(name, **kw)}
        # kind -> (the API-writes label, patch(name, namespace, body)) of the kinds the operator applies
        self._patches = {
            "Service": ("service", self.core.patch_namespaced_service),
            "PodDisruptionBudget": ("disruptionbudget", self.policy.patch_namespaced_pod_disruption_budget),
            "NetworkAttachmentDefinition": ("attachment", lambda name, ns, body, **kw: (
                self.custom.patch_namespaced_custom_object(*NAD[:2], ns, NAD[2], name, body, **kw))),
            # a model cache's local volume (cluster-scoped) and its claim in the pool's namespace
            "PersistentVolumeClaim": ("modelcache", self.core.patch_namespaced_persistent_volume_claim),
            "PersistentVolume": ("modelcache", lambda name, _ns, body, **kw: (
                self.core.patch_persistent_volume(name, body, **kw))),
        }

    @classmethod
    async def connect(cls) -> "Kube":
        if os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config()
        else:
            # KUBECONFIG as it is now: kubernetes_asyncio reads it once, when it is first imported
            await config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        return cls(client.ApiClient())

    async def close(self) -> None:
        await self.api.close()

    # pods
    async def create_pod(self, namespace: str, pod: dict) -> dict:
        API_WRITES.labels("pod").inc()
        return await read_json(self.core.create_namespaced_pod(namespace, pod, _preload_content=False))

    async def annotate_pod(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        API_WRITES.labels("pod").inc()
        await read_json(self.core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": annotations}},
                                                   _preload_content=False, _content_type=MERGE))

    async def delete_pod(self, namespace: str, name: str) -> None:
        API_WRITES.labels("pod").inc()
        try:
            await read_json(self.core.delete_namespaced_pod(name, namespace, _preload_content=False))
        except ApiException as e:
            if e.status != 404:
                raise

    # secrets: the pool's control token only (RBAC grants get and create, never list or watch)
    async def get_secret(self, namespace: str, name: str) -> dict | None:
        try:
            return await read_json(self.core.read_namespaced_secret(name, namespace, _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def get_pvc(self, namespace: str, name: str) -> dict | None:
        try:
            return await read_json(self.core.read_namespaced_persistent_volume_claim(name, namespace,
                                                                                    _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def delete_volume(self, name: str) -> None:
        """A model cache's local volume whose claim was deleted (Released: it binds no new claim)."""
        API_WRITES.labels("modelcache").inc()
        try:
            await read_json(self.core.delete_persistent_volume(name, _preload_content=False))
        except ApiException as e:
            if e.status != 404:
                raise

    async def get_cache(self, name: str) -> dict | None:
        try:
            return await read_json(self.custom.get_cluster_custom_object(GROUP, VERSION, CACHE_PLURAL, name,
                                                                         _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def patch_cache_status(self, name: str, fields: dict) -> None:
        API_WRITES.labels("modelcache").inc()
        await read_json(self.custom.patch_cluster_custom_object_status(
            GROUP, VERSION, CACHE_PLURAL, name, {"status": fields}, _preload_content=False, _content_type=MERGE))

    async def delete_cache_objects(self, name: str) -> None:
        """A deleted cache's local volumes and the claims bound to them (each volume's claimRef names its claim)."""
        volumes = await read_json(self.core.list_persistent_volume(label_selector=f"{CACHE_LABEL}={name}",
                                                                   _preload_content=False))
        for v in volumes.get("items") or []:
            ref = v["spec"].get("claimRef") or {}
            if ref.get("name") and ref.get("namespace"):
                API_WRITES.labels("modelcache").inc()
                try:
                    await read_json(self.core.delete_namespaced_persistent_volume_claim(
                        ref["name"], ref["namespace"], _preload_content=False))
                except ApiException as e:
                    if e.status != 404:
                        raise
            await self.delete_volume(v["metadata"]["name"])

    async def create_secret(self, secret: dict) -> dict:
        """Created, never applied: applying needs `patch` on Secrets, which the chart does not grant (an
        existing token is never rewritten; deleting the Secret is how it is rotated)."""
        API_WRITES.labels("secret").inc()
        return await read_json(self.core.create_namespaced_secret(secret["metadata"]["namespace"], secret,
                                                              field_manager=FIELD_MANAGER, _preload_content=False))

    # owned objects: read, and server-side apply
    async def get_owned(self, kind: str, namespace: str, name: str) -> dict | None:
        """The live object, or None if it does not exist (a missing NAD CRD raises NadCrdMissing)."""
        if kind == "NetworkAttachmentDefinition":
            return await self.get_nad(namespace, name)
        try:
            return await read_json(self._reads[kind](name, namespace, _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def apply(self, obj: dict) -> dict:
        """Server-side apply: the object becomes what `obj` says in every field it sets, created if missing.
        Forced, so a field someone else changed comes back to the operator. Returns the object as applied."""
        label, patch = self._patches[obj["kind"]]
        API_WRITES.labels(label).inc()
        meta = obj["metadata"]
        return await read_json(patch(meta["name"], meta.get("namespace"), obj, field_manager=FIELD_MANAGER, force=True,
                                     _preload_content=False, _content_type=APPLY))

    # network attachments
    async def get_nad(self, namespace: str, name: str) -> dict | None:
        """The attachment, or None if it does not exist. Raises NadCrdMissing when the CRD is absent."""
        try:
            return await read_json(self.custom.get_namespaced_custom_object(*NAD[:2], namespace, NAD[2], name,
                                                                        _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                if await self._nad_crd_missing(namespace):
                    raise NadCrdMissing() from None
                return None
            raise

    async def _nad_crd_missing(self, namespace: str) -> bool:
        try:  # a list answers 200 (maybe empty) when the CRD exists, 404 when it does not
            await read_json(self.custom.list_namespaced_custom_object(*NAD[:2], namespace, NAD[2], limit=1,
                                                                  _preload_content=False))
            return False
        except ApiException as e:
            return e.status == 404

    # pools
    async def get_pool(self, namespace: str, name: str) -> dict | None:
        try:
            return await read_json(self.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name,
                                                                        _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    async def patch_pool_status(self, namespace: str, name: str, status: dict,
                                resource_version: str | None = None) -> dict:
        """With a resourceVersion, the write fails (409) if the pool changed since it was read. Returns the
        pool as written."""
        API_WRITES.labels("status").inc()
        body: dict = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        return await read_json(self.custom.patch_namespaced_custom_object_status(GROUP, VERSION, namespace, PLURAL, name,
                                                                      body, _preload_content=False,
                                                                      _content_type=MERGE))

    async def patch_pool_scale(self, namespace: str, name: str, replicas: int,
                               resource_version: str | None = None) -> None:
        """Change spec.replicas through /scale, the way HPA or `kubectl scale` would; with a resourceVersion it
        fails (409) if someone else changed the pool since it was read, so a decision is never made on a
        stale size."""
        API_WRITES.labels("scale").inc()
        body: dict = {"spec": {"replicas": replicas}}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        await read_json(self.custom.patch_namespaced_custom_object_scale(
            GROUP, VERSION, namespace, PLURAL, name, body, _preload_content=False, _content_type=MERGE))

    # namespaces
    async def get_namespace_labels(self, name: str) -> dict[str, str] | None:
        try:
            ns = await read_json(self.core.read_namespace(name, _preload_content=False))
        except ApiException as e:
            if e.status in (403, 404):  # not allowed to look: the create, if refused, says why instead
                return None
            raise
        return ns["metadata"].get("labels") or {}

    async def event(self, pool: dict, type_: str, reason: str, message: str) -> None:
        """A core/v1 Event on the pool (or on a cluster-scoped object such as a RewardModelCache: in namespace
        default, as nodes' are), as `kubectl describe` shows them."""
        meta = pool["metadata"]
        ns = meta.get("namespace") or "default"
        ts = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"metadata": {"generateName": f"{meta['name']}.", "namespace": ns},
                "involvedObject": {"apiVersion": pool["apiVersion"], "kind": pool["kind"], "name": meta["name"],
                                   **({"namespace": meta["namespace"]} if meta.get("namespace") else {}),
                                   "uid": meta.get("uid")},
                "type": type_, "reason": reason, "message": message[:1024], "source": {"component": "rewardpool-operator"},
                "firstTimestamp": ts, "lastTimestamp": ts, "count": 1, "reportingComponent": "rewardpool-operator"}
        API_WRITES.labels("event").inc()
        try:
            await read_json(self.core.create_namespaced_event(ns, body, _preload_content=False))
        except ApiException as e:  # an event is best effort; losing one must not stop a reconcile
            log.warning("event not posted: %s %s (%s)", reason, message, e.status)


def api_message(e: ApiException) -> str:
    """The API server's own words for a refusal (its Status message), else the HTTP reason."""
    try:
        return json.loads(e.body).get("message") or f"{e.status} {e.reason}"
    except (TypeError, ValueError):
        return f"{e.status} {e.reason}"


class NadCrdMissing(Exception):
    """The cluster has no k8s.cni.cncf.io/v1 NetworkAttachmentDefinition CRD (Multus is not installed)."""
