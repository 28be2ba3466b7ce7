"""The node-local model cache on kwok nodes, for benchmarks: kwok runs no pods, so each node's agent runs here (the
chart's agent code, one per node, each with its own folder standing for the node's cache root), and a copy pod's
copy is made here by the copy pod's own code (cachecopy.copy) from the folder its source claim stands for. Workers
started by WorkerFleet read the copy of the node their pod is on through `mounts` (what a kubelet would mount)."""
from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

from rewardpool_operator.modelcache import copier as cachecopy
from rewardpool_operator.modelcache.layout import CACHE_LABEL, CLAIM_PREFIX, GROUP, PLURAL, ROOT, VERSION, data_dir, \
    ready_file, source_identity

from .stack import OPERATOR_NS

log = logging.getLogger("rewardpool.kwokcache")


class KwokCaches:
    def __init__(self, kubeconfig: Path, nodes: list[str], workdir: Path, sources: dict[str, Path]):
        """`sources`: {claim name in the operator's namespace: the folder it stands for}."""
        self.kubeconfig, self.nodes, self.sources = kubeconfig, nodes, sources
        self.roots = {n: workdir / n for n in nodes}

    async def _pass(self) -> None:
        from kubernetes_asyncio import client, config

        from rewardpool_operator.modelcache.agent import Agent

        cfg = client.Configuration()
        await config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=cfg)
        async with client.ApiClient(cfg) as api:
            core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
            caches = {c["metadata"]["name"]: c for c in
                      (await custom.list_cluster_custom_object(GROUP, VERSION, PLURAL))["items"]}
            for node in self.nodes:
                agent = Agent(api, node, OPERATOR_NS, "rewardpool-operator:bench", self.roots[node], ROOT, {})
                await agent.step()
                pods = await core.list_namespaced_pod(OPERATOR_NS, label_selector=CACHE_LABEL,
                                                      field_selector=f"spec.nodeName={node}")
                copied = False
                for pod in pods.items:
                    name = pod.metadata.labels[CACHE_LABEL]
                    spec = (caches.get(name) or {}).get("spec") or {}
                    pvc = (spec.get("source") or {}).get("pvc")
                    if not pvc or (self.roots[node] / ready_file(name, source_identity(spec))).exists():
                        continue
                    src = self.sources[pvc["claimName"]] / (pvc.get("subPath") or "")
                    made = await asyncio.to_thread(cachecopy.copy, src, self.roots[node], name,
                                                   source_identity(spec), spec.get("digest"))
                    log.info("cache %s copied on %s: %s bytes in %s s", name, node, made["bytes"], made["seconds"])
                    copied = True
                if copied:
                    await agent.step()  # the copy is Ready: the node's label and the cache's entry say so

    def step(self) -> None:
        asyncio.run(self._pass())

    def fill(self, co, cache: str, timeout: float = 600) -> float:
        """Passes until every node's copy of `cache` is Ready; the seconds it took."""
        t0 = time.monotonic()
        while True:
            self.step()
            nodes = (co.get_cluster_custom_object(GROUP, VERSION, PLURAL, cache).get("status") or {}).get("nodes")
            if nodes and len(nodes) == len(self.nodes) and all(e["phase"] == "Ready" for e in nodes):
                return time.monotonic() - t0
            failed = [e for e in nodes or [] if e["phase"] == "Failed"]
            if failed or time.monotonic() - t0 > timeout:
                raise SystemExit(f"cache {cache} not Ready on every node: {nodes}")
            time.sleep(1)

    def mounts(self, pod) -> dict[str, str]:
        """{mount path in the worker's container: the folder on this machine} for each cache the pod mounts: the
        copy on the pod's node, as its local volume would mount it."""
        claims = {v.name: v.persistent_volume_claim.claim_name for v in pod.spec.volumes or []
                  if v.persistent_volume_claim and v.persistent_volume_claim.claim_name.startswith(CLAIM_PREFIX)}
        out = {}
        for m in pod.spec.containers[0].volume_mounts or []:
            if m.name in claims:
                data = self.roots[pod.spec.node_name] / data_dir(claims[m.name][len(CLAIM_PREFIX):])
                out[m.mount_path] = str(data / (m.sub_path or ""))
        return out
