"""`rewardpool agent`: the node agent of the model cache (a DaemonSet of the chart, in the operator's namespace).
Each pass: observe (the node, the caches, this node's copy pods, the copies the node's pods mount, the node's cache
directory) -> plan per cache (modelcache.plan_node: the current copy; modelcache.plan_copies: which copies to
offer and remove) -> apply (copy pods, the node's labels, removal of copies no cache wants and no pod mounts) ->
status (this node's entry of each cache's status.nodes, by server-side apply under a field manager of its own, so
agents on many nodes never overwrite each other's entries). It only ever removes folders it made (AGENT_MARKER)."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path

from ..cluster.agentapi import AgentKube, ApiClient, connected
from ..cluster.kube import ApiException
from .copier import intact, read_ready
from .layout import (AGENT_MARKER, API_VERSION, CACHE_LABEL, COPY_REASONS, KIND, NODE_LABEL_PREFIX, READY, Copies,
                     CopyPod, DiskState, copies_in_use, copy_dir, copy_label, copy_pod, data_dir, node_label,
                     node_selector, parse_copy_label, partial_dir, plan_copies, plan_node, progress_file, ready_file,
                     selects, source_identity)

log = logging.getLogger("rewardpool.agent")


def read_disk(root: Path, cache: str, identity: str) -> DiskState:
    """The copy of `identity` and a copy in progress."""
    ready = read_ready(root, cache, identity)
    progress = None
    try:
        progress = json.loads((root / progress_file(cache)).read_text())
    except (OSError, ValueError):
        pass
    partial = 0
    for dirpath, _, names in os.walk(root / partial_dir(cache)):
        for n in names:
            try:
                partial += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return DiskState(ready=ready, ready_intact=ready is not None and intact(root, cache, ready),
                     partial_bytes=partial, total_bytes=(progress or {}).get("totalBytes"))


def read_copies(root: Path, cache: str, offered: set[str]) -> Copies:
    """Every copy of a cache on the node, which of them are verified and intact, and which the node offered."""
    try:
        on_disk = {e.name for e in (root / data_dir(cache)).iterdir() if e.is_dir()}
    except OSError:
        on_disk = set()
    verified = {i for i in on_disk
                if (r := read_ready(root, cache, i)) is not None and r.get("identity") == i and intact(root, cache, r)}
    return Copies(frozenset(on_disk), frozenset(verified), frozenset(offered))


def pod_state(pod: dict, now: datetime) -> CopyPod:
    """The copy pod as plan_node reads it: its phase, and why it waits or how it ended."""
    status = pod.get("status") or {}
    reason = message = ""
    age = 0.0
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if "waiting" in state:
            reason, message = state["waiting"].get("reason", ""), state["waiting"].get("message", "")
        if "terminated" in state:
            term = state["terminated"]
            said = (term.get("message") or "").strip()
            head, sep, rest = said.partition(": ")
            reason, message = (head, rest) if sep and head in COPY_REASONS else (term.get("reason", ""), said)
            if term.get("finishedAt"):
                ended = datetime.fromisoformat(term["finishedAt"].replace("Z", "+00:00"))
                age = (now - ended).total_seconds()
    annotations = pod.get("metadata", {}).get("annotations") or {}
    return CopyPod(identity=annotations.get("rewardpool.io/cache-identity", ""),
                   phase=status.get("phase", "Pending"), reason=reason, message=message, finished_age=age)


class Agent:
    def __init__(self, api: ApiClient, node: str, namespace: str, image: str, root: Path, host_root: str,
                 default_selector: dict[str, str]):
        self.kube = AgentKube(api)
        self.node, self.namespace, self.image = node, namespace, image
        self.root, self.host_root, self.default_selector = root, host_root, default_selector
        self.manager = f"rewardpool-agent-{node}"[:128]
        self._said: dict[str, dict] = {}  # cache -> the entry last applied

    async def step(self) -> None:
        labels = await self.kube.node_labels(self.node)
        caches = await self.kube.caches()
        pods = await self.kube.node_pods(self.node, self.namespace, label_selector=CACHE_LABEL)
        pods = {p["metadata"]["labels"][CACHE_LABEL]: p for p in pods}
        in_use = copies_in_use(await self.kube.node_pods(self.node, None))  # every namespace's pods on this node
        now = datetime.now(timezone.utc)
        wanted: dict[str, str] = {}  # cache -> the identity of the copy it names now
        want_labels: dict[str, str | None] = {}
        for cache in caches:
            name = cache["metadata"]["name"]
            spec = cache.get("spec") or {}
            # a cache being deleted keeps its copy until it is gone: the operator holds the deletion while a pool
            # still reads it
            if not selects(node_selector(spec, self.default_selector), labels):
                continue
            identity = wanted[name] = source_identity(spec)
            (self.root / data_dir(name)).mkdir(parents=True, exist_ok=True)  # a local PV mounts it even when empty
            (self.root / name / AGENT_MARKER).touch()
            pod = pods.get(name)
            plan = plan_node(self.node, identity, spec.get("digest"), read_disk(self.root, name, identity),
                             pod_state(pod, now) if pod else None, await self._source_missing(spec))
            if plan.delete_pod and pod is not None:
                await self.kube.delete_pod(self.namespace, pod["metadata"]["name"])
            if plan.create_pod:
                await self.kube.create_pod(
                    self.namespace, copy_pod(cache, self.node, self.namespace, self.image, self.host_root, identity))
                log.info("copy of cache %s started on node %s", name, self.node)
            want_labels[node_label(name)] = plan.entry["phase"]
            await self._say(name, plan.entry)
        # The copies of every cache this agent keeps or kept: offered while wanted or mounted, then removed.
        offered: dict[str, set[str]] = {}
        for key in labels:
            if (parsed := parse_copy_label(key)) is not None:
                offered.setdefault(parsed[0], set()).add(parsed[1])
        for name in sorted(set(wanted) | self._folders()):
            plan_c = plan_copies(wanted.get(name), read_copies(self.root, name, offered.get(name, set())),
                                 in_use.get(name, set()))
            for identity in plan_c.remove:
                shutil.rmtree(self.root / copy_dir(name, identity), ignore_errors=True)
                (self.root / ready_file(name, identity)).unlink(missing_ok=True)
                log.info("copy %s of cache %s removed from node %s (no pod mounts it)", identity, name, self.node)
            want_labels.update({copy_label(name, i): READY for i in plan_c.offer})
            if name not in wanted and not in_use.get(name) and not read_copies(self.root, name, set()).on_disk:
                shutil.rmtree(self.root / name, ignore_errors=True)
                log.info("cache %s removed from node %s", name, self.node)
        # What no cache wants on this node any more: its copy pod, its labels, its status entry.
        for name, pod in pods.items():
            if name not in wanted:
                await self.kube.delete_pod(self.namespace, pod["metadata"]["name"])
        for key in labels:
            if (key.startswith(NODE_LABEL_PREFIX) and key[len(NODE_LABEL_PREFIX):] not in wanted) \
                    or (parse_copy_label(key) is not None and key not in want_labels):
                want_labels[key] = None
        for cache in caches:  # entries of this node in caches it no longer keeps (also from before a restart)
            name = cache["metadata"]["name"]
            if name not in wanted and any(e.get("node") == self.node
                                          for e in (cache.get("status") or {}).get("nodes") or []):
                self._said[name] = {}
                await self._say(name, None)
        change = {k: v for k, v in want_labels.items() if labels.get(k) != v}
        if change:
            await self.kube.label_node(self.node, change)

    def _folders(self) -> set[str]:
        """The cache folders this agent made (a folder it did not make, an administrator's, is never touched)."""
        if not self.root.is_dir():
            return set()
        return {e.name for e in self.root.iterdir() if e.is_dir() and (e / AGENT_MARKER).exists()}

    async def _source_missing(self, spec: dict) -> str | None:
        claim = ((spec.get("source") or {}).get("pvc") or {}).get("claimName")
        if not claim or await self.kube.claim_exists(self.namespace, claim):
            return None
        return f"PersistentVolumeClaim {claim} not found in namespace {self.namespace} (the cache's source)"

    async def _say(self, cache: str, entry: dict | None) -> None:
        """This node's entry of the cache's status.nodes (None: no entry), applied when it changed."""
        if self._said.get(cache) == entry:
            return
        body = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": cache},
                "status": {"nodes": [entry] if entry else []}}
        await self.kube.apply_cache_status(cache, body, self.manager)
        if entry is None:
            self._said.pop(cache, None)
        else:
            self._said[cache] = entry


async def run(args) -> int:
    selector = dict(kv.split("=", 1) for kv in args.default_node_selector or [])
    async with connected() as api:
        agent = Agent(api, args.node, args.namespace, args.image, Path(args.root), args.host_root, selector)
        while True:
            try:
                await agent.step()
            except (ApiException, OSError) as e:  # the API server blinked, a directory vanished: next pass
                log.warning("agent pass failed: %s", e)
            if args.once:
                return 0
            await asyncio.sleep(args.interval)
