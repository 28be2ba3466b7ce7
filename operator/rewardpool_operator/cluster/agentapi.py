"""The model cache agent's calls (it runs on each node with its own ServiceAccount): its node's labels and pods,
the caches, copy pods, and its node's entry of a cache's status by server-side apply under a manager of its own."""
from __future__ import annotations

import json
import os
from contextlib import asynccontextmanager

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from rewardpool_worker.contract import GROUP, VERSION

from ..modelcache.layout import PLURAL

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
ApiClient = client.ApiClient


@asynccontextmanager
async def connected():
    """An API client from the pod's ServiceAccount, or KUBECONFIG outside a pod."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
    else:
        await config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    async with client.ApiClient() as api:
        yield api


class AgentKube:
    def __init__(self, api: client.ApiClient):
        self.core, self.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)

    async def node_labels(self, node: str) -> dict[str, str]:
        return dict((await self.core.read_node(node)).metadata.labels or {})

    async def caches(self) -> list[dict]:
        return (await self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL))["items"]

    async def node_pods(self, node: str, namespace: str | None, **kw) -> list[dict]:
        """The node's pods, of one namespace or (None) of all."""
        selector = f"spec.nodeName={node}"
        if namespace is None:
            r = await self.core.list_pod_for_all_namespaces(field_selector=selector, _preload_content=False, **kw)
        else:
            r = await self.core.list_namespaced_pod(namespace, field_selector=selector, _preload_content=False, **kw)
        return json.loads(await r.read())["items"]

    async def claim_exists(self, namespace: str, claim: str) -> bool:
        try:
            await self.core.read_namespaced_persistent_volume_claim(claim, namespace)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True

    async def create_pod(self, namespace: str, pod: dict) -> None:
        await self.core.create_namespaced_pod(namespace, pod)

    async def delete_pod(self, namespace: str, name: str) -> None:
        try:
            await self.core.delete_namespaced_pod(name, namespace)
        except ApiException as e:
            if e.status != 404:
                raise

    async def label_node(self, node: str, labels: dict[str, str | None]) -> None:
        """Set (None: remove) the node's labels named."""
        await self.core.patch_node(node, {"metadata": {"labels": labels}}, _content_type=MERGE)

    async def apply_cache_status(self, cache: str, body: dict, manager: str) -> None:
        """Server-side apply of a cache's status as `manager` (a cache deleted meanwhile is no error)."""
        try:
            await self.custom.patch_cluster_custom_object_status(GROUP, VERSION, PLURAL, cache, body,
                                                                 field_manager=manager, force=True,
                                                                 _content_type=APPLY)
        except ApiException as e:
            if e.status != 404:
                raise
