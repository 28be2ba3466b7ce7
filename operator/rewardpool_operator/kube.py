"""The few Kubernetes API calls the reconciler makes, as plain dicts (kubernetes_asyncio underneath)."""
from __future__ import annotations

import json
import logging
import os
from datetime import datetime, timezone

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from rewardpool_worker.contract import OperatorMetricNames as M

from .spec import GROUP, PLURAL, VERSION

log = logging.getLogger("rewardpool.operator")
NAD = ("k8s.cni.cncf.io", "v1", "network-attachment-definitions")
MERGE = "application/merge-patch+json"
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

    async def create_secret(self, secret: dict) -> dict:
        API_WRITES.labels("secret").inc()
        return await read_json(self.core.create_namespaced_secret(secret["metadata"]["namespace"], secret,
                                                              _preload_content=False))

    # services and disruption budgets: create, or patch the spec when it lacks what we want
    async def _ensure(self, obj: dict, kind: str, read, create, patch) -> str:
        ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
        try:
            current = await read_json(read(name, ns, _preload_content=False))
        except ApiException as e:
            if e.status != 404:
                raise
            API_WRITES.labels(kind).inc()
            await read_json(create(ns, obj, _preload_content=False))
            return "created"
        if not _contains(current["spec"], obj["spec"]):
            API_WRITES.labels(kind).inc()
            await read_json(patch(name, ns, {"spec": obj["spec"]}, _preload_content=False, _content_type=MERGE))
            return "updated"
        return "unchanged"

    async def ensure_service(self, svc: dict) -> str:
        return await self._ensure(svc, "service", self.core.read_namespaced_service,
                                  self.core.create_namespaced_service, self.core.patch_namespaced_service)

    async def ensure_pdb(self, pdb: dict) -> str:
        return await self._ensure(pdb, "disruptionbudget", self.policy.read_namespaced_pod_disruption_budget,
                                  self.policy.create_namespaced_pod_disruption_budget,
                                  self.policy.patch_namespaced_pod_disruption_budget)

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

    async def ensure_nad(self, nad: dict) -> str:
        ns, name = nad["metadata"]["namespace"], nad["metadata"]["name"]
        current = await self.get_nad(ns, name)
        if current is None:
            API_WRITES.labels("attachment").inc()
            await read_json(self.custom.create_namespaced_custom_object(*NAD[:2], ns, NAD[2], nad, _preload_content=False))
            return "created"
        if current.get("spec") != nad["spec"]:
            API_WRITES.labels("attachment").inc()
            await read_json(self.custom.patch_namespaced_custom_object(*NAD[:2], ns, NAD[2], name, {"spec": nad["spec"]},
                                                               _preload_content=False, _content_type=MERGE))
            return "updated"
        return "unchanged"

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
        """A core/v1 Event on the pool, as `kubectl describe rewardpool` shows them."""
        meta = pool["metadata"]
        ts = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = {"metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {"apiVersion": pool["apiVersion"], "kind": pool["kind"], "name": meta["name"],
                                   "namespace": meta["namespace"], "uid": meta.get("uid")},
                "type": type_, "reason": reason, "message": message[:1024], "source": {"component": "rewardpool-operator"},
                "firstTimestamp": ts, "lastTimestamp": ts, "count": 1, "reportingComponent": "rewardpool-operator"}
        API_WRITES.labels("event").inc()
        try:
            await read_json(self.core.create_namespaced_event(meta["namespace"], body, _preload_content=False))
        except ApiException as e:  # an event is best effort; losing one must not stop a reconcile
            log.warning("event not posted: %s %s (%s)", reason, message, e.status)


def api_message(e: ApiException) -> str:
    """The API server's own words for a refusal (its Status message), else the HTTP reason."""
    try:
        return json.loads(e.body).get("message") or f"{e.status} {e.reason}"
    except (TypeError, ValueError):
        return f"{e.status} {e.reason}"


def _contains(have, want) -> bool:
    """Does the live object already hold everything we want? Fields the API server fills in (a port's
    protocol, say) are not differences: without this, every resync would patch again."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_contains(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(_contains, have, want))
    return have == want


class NadCrdMissing(Exception):
    """The cluster has no k8s.cni.cncf.io/v1 NetworkAttachmentDefinition CRD (Multus is not installed)."""
