"""The reads of `rewardpool status`, with kubectl's credentials (KUBECONFIG or ~/.kube/config, --context; in a pod,
the in-cluster config): the pool, its pods and events, and each worker's /healthz through the API server's pod
proxy, so no port-forward or pod network access is needed."""
from __future__ import annotations

import asyncio
import json
import os

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from rewardpool_worker.contract import GROUP, HEALTH_PATH, HTTP_PORT, KIND, PLURAL, VERSION, WorkerHealth

from .kube import read_json

HEALTH_TIMEOUT_SECONDS = 2.0  # a worker that cannot answer in this long is shown as "-", not waited for
CONNECT_ERRORS = aiohttp.ClientError  # no connection to the API server
CONFIG_ERRORS = (config.ConfigException, OSError)  # a missing or broken kubeconfig
ApiClient = client.ApiClient


async def connect(kubeconfig: str | None, context: str | None) -> tuple[client.ApiClient, str]:
    """An API client and the default namespace, found as kubectl finds them; in a pod with no kubeconfig, the
    in-cluster ServiceAccount."""
    cfg = client.Configuration()
    path = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    have_file = any(os.path.exists(os.path.expanduser(p)) for p in path.split(os.pathsep) if p)
    if not have_file and not context and os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
        ns_file = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
        namespace = open(ns_file).read().strip() if os.path.exists(ns_file) else "default"
        return client.ApiClient(cfg), namespace
    if not have_file:
        raise config.ConfigException(f"no kubeconfig at {path}, and not running in a pod")
    loader = await config.load_kube_config(config_file=path, context=context, client_configuration=cfg)
    return client.ApiClient(cfg), _context_namespace(loader.current_context) or "default"


def _context_namespace(ctx) -> str | None:
    """The current context's namespace (a plain dict or the loader's ConfigNode, by library version)."""
    try:
        return ctx["context"]["namespace"]
    except (KeyError, TypeError, config.ConfigException):
        return None


async def read_pool(api: client.ApiClient, ns: str, name: str) -> dict | None:
    try:
        return await read_json(client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, name, _preload_content=False))
    except ApiException as e:
        if e.status == 404:
            return None
        raise


async def list_pools(api: client.ApiClient, ns: str | None) -> list[dict]:
    co = client.CustomObjectsApi(api)
    if ns is None:
        return (await read_json(co.list_cluster_custom_object(GROUP, VERSION, PLURAL, _preload_content=False)))["items"]
    return (await read_json(co.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL,
                                                         _preload_content=False)))["items"]


async def pool_pods(api: client.ApiClient, pool: dict, pod_selector: str) -> list[dict]:
    """The pool's worker pods: its label, and owned by this pool (not a same-named predecessor's leftovers)."""
    meta = pool["metadata"]
    items = (await read_json(client.CoreV1Api(api).list_namespaced_pod(
        meta["namespace"], label_selector=pod_selector, _preload_content=False)))["items"]
    uid = meta.get("uid")
    return [p for p in items if not uid or any(o.get("uid") == uid for o in p["metadata"].get("ownerReferences") or [])]


async def pool_events(api: client.ApiClient, pool: dict) -> list[dict]:
    meta = pool["metadata"]
    selector = f"involvedObject.kind={KIND},involvedObject.name={meta['name']}"
    return (await read_json(client.CoreV1Api(api).list_namespaced_event(
        meta["namespace"], field_selector=selector, _preload_content=False)))["items"]


def _proxy_error(status: int, body: bytes) -> str:
    """The API server's own words (its Status message) for a proxy call that did not reach the worker."""
    try:
        return f"{status}: {json.loads(body).get('message') or body.decode(errors='replace')}"
    except (ValueError, AttributeError):
        return f"{status}: {body.decode(errors='replace')[:200]}"


async def worker_health(api: client.ApiClient, pod: dict) -> tuple[WorkerHealth | None, str | None]:
    """(health, None) or (None, why not). A wedged worker answers 503 with a valid payload: that is health."""
    meta = pod["metadata"]
    if not (pod.get("status") or {}).get("podIP"):
        return None, "the pod has no IP yet"

    async def get() -> tuple[int, bytes]:
        resp = await client.CoreV1Api(api).connect_get_namespaced_pod_proxy_with_path(
            f"{meta['name']}:{HTTP_PORT}", meta["namespace"], HEALTH_PATH.lstrip("/"), _preload_content=False)
        return resp.status, await resp.read()

    try:
        status, body = await asyncio.wait_for(get(), HEALTH_TIMEOUT_SECONDS)
    except asyncio.TimeoutError:
        return None, f"no answer within {HEALTH_TIMEOUT_SECONDS:.0f}s"
    except (aiohttp.ClientError, ApiException, OSError) as e:
        return None, f"{type(e).__name__}: {e}"
    try:
        return WorkerHealth.model_validate_json(body), None
    except ValueError:
        return None, _proxy_error(status, body)


async def all_health(api: client.ApiClient, pods: list[dict]) -> tuple[dict, dict]:
    """Every worker asked at once, so one silent worker costs the view HEALTH_TIMEOUT_SECONDS, not one each."""
    answers = await asyncio.gather(*(worker_health(api, p) for p in pods))
    names = [p["metadata"]["name"] for p in pods]
    return {n: h for n, (h, _) in zip(names, answers)}, {n: why for n, (_, why) in zip(names, answers) if why}
