"""How the operator reaches a pool's HTTP peers: each worker's /metrics, /healthz and /drain (the contract's
paths and port) and the Mooncake master's /metrics and /get_segments_detail. A reconcile asks a
`WorkerClient`; `HttpWorkerClient` is the real one (aiohttp, straight to pod IPs: the operator runs in the
cluster network), and unit tests pass a fake. A source that does not answer is left out; when no worker
answers, the queue is unknown (None), which the autoscaler treats as "hold". (`rewardpool status` reads
/healthz through the API server's pod proxy instead, from outside the cluster network: statusfetch.py.)"""
from __future__ import annotations

import asyncio
import logging
from typing import Protocol

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from rewardpool_worker.contract import (ACTIVE_GROUPS_METRIC, DRAIN_PATH, HEALTH_PATH, HTTP_PORT, MASTER_METRICS_PATH,
                                        METRICS_PATH, PENDING_BYTES_METRIC, PROMOTE_PATH, QUEUE_DEPTH_METRIC,
                                        SCORE_METRIC, SEGMENTS_DETAIL_PATH, STORE_READS_METRIC, TENANTS_PATH, Tenants,
                                        WorkerHealth, control_header, segment_used)

from ..pool.observed import Signals

log = logging.getLogger("rewardpool.operator")
TIMEOUT = aiohttp.ClientTimeout(total=2)


class WorkerClient(Protocol):
    async def signals(self, pod_ips: list[str], master_metrics: str | None) -> Signals:
        """The scaling signals: each worker's queue depth and pending bytes, and the store's fill."""

    async def health(self, pod_ip: str) -> dict | None:
        """The worker's /healthz (the contract's WorkerHealth, as a dict), also when it answers 503 (wedged
        but there); None when it does not answer or answers something else."""

    async def drain(self, pod_ip: str, token: str) -> bool:
        """Ask the worker to drain now, with the pool's control token; True when it accepted."""

    async def promote(self, pod_ip: str, token: str) -> bool:
        """Take a shadow worker out of shadow now, with the pool's control token; True when it accepted."""

    async def send_tenants(self, pod_ip: str, token: str, tenants: Tenants) -> bool:
        """Give the worker its pool's tenants (names, shares, token digests), with the control token; True when it
        took them."""

    async def segment_used_bytes(self, master_metrics: str, segment: str) -> int | None:
        """Bytes the master says are allocated in one client's segment (None if unknown)."""


def reported_version(text: str) -> str | None:
    """The scorer version a worker's /metrics says it scores with (the `version` label of its score series, which
    exist from Ready on): the full version, with its model files' digest."""
    for family in text_string_to_metric_families(text):
        if family.name == SCORE_METRIC:
            for sample in family.samples:
                if sample.labels.get("version"):
                    return sample.labels["version"]
    return None


def store_reads(text: str) -> tuple[int, int] | None:
    """A worker's batch reads since it started, (ok, failed), from its /metrics; None from a worker too old to
    count them."""
    counts: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == STORE_READS_METRIC:
                counts[sample.labels.get("result", "")] = sample.value
    return (int(counts.get("ok", 0)), int(counts.get("failed", 0))) if counts else None


def parse(text: str, names: set[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in names:
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


async def _get(session: aiohttp.ClientSession, url: str) -> str | None:
    try:
        async with session.get(url) as resp:
            if resp.status == 200:
                return await resp.text()
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        pass
    return None


class HttpWorkerClient:
    """WorkerClient over HTTP, a short-lived session per call (nothing held open between reconciles)."""

    async def signals(self, pod_ips: list[str], master_metrics: str | None) -> Signals:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            texts = await asyncio.gather(*(_get(session, f"http://{ip}:{HTTP_PORT}{METRICS_PATH}")
                                           for ip in pod_ips))
            master = await _get(session, f"http://{master_metrics}/metrics") if master_metrics else None
        queue = pending = 0
        per_worker: dict[str, int] = {}
        groups: dict[str, int] = {}
        versions: dict[str, str] = {}
        reads: dict[str, tuple[int, int]] = {}
        for ip, text in zip(pod_ips, texts):
            if text is None:
                continue
            if (r := store_reads(text)) is not None:
                reads[ip] = r
            if (v := reported_version(text)) is not None:
                versions[ip] = v
            m = parse(text, {QUEUE_DEPTH_METRIC, PENDING_BYTES_METRIC, ACTIVE_GROUPS_METRIC})
            if ACTIVE_GROUPS_METRIC in m:
                groups[ip] = int(m[ACTIVE_GROUPS_METRIC])
            if QUEUE_DEPTH_METRIC in m:
                per_worker[ip] = int(m[QUEUE_DEPTH_METRIC])
                queue += per_worker[ip]
                pending += int(m.get(PENDING_BYTES_METRIC, 0))
        answered = len(per_worker)
        fill = None
        if master is not None:
            m = parse(master, {"master_allocated_bytes", "master_total_capacity_bytes"})
            if m.get("master_total_capacity_bytes"):
                fill = m.get("master_allocated_bytes", 0.0) / m["master_total_capacity_bytes"]
        return Signals(queue if answered else None, pending if answered else None, fill, answered, per_worker,
                       groups, versions, reads)

    async def health(self, pod_ip: str) -> dict | None:
        try:
            async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
                async with session.get(f"http://{pod_ip}:{HTTP_PORT}{HEALTH_PATH}") as resp:
                    if resp.status not in (200, 503):
                        return None
                    return WorkerHealth.model_validate_json(await resp.read()).model_dump()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
            return None

    async def drain(self, pod_ip: str, token: str) -> bool:
        """POST /drain. A refusal is logged; the drain annotation the operator wrote first still reaches the
        worker through its Downward API file."""
        return await _control(pod_ip, DRAIN_PATH, token)

    async def promote(self, pod_ip: str, token: str) -> bool:
        """POST /promote. As with a drain, the annotation the operator removed first reaches the worker anyway."""
        return await _control(pod_ip, PROMOTE_PATH, token)

    async def send_tenants(self, pod_ip: str, token: str, tenants: Tenants) -> bool:
        return await _control(pod_ip, TENANTS_PATH, token, body=tenants.model_dump_json().encode(), ok=200)

    async def segment_used_bytes(self, master_metrics: str, segment: str) -> int | None:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            detail, metrics = await asyncio.gather(_get(session, f"http://{master_metrics}{SEGMENTS_DETAIL_PATH}"),
                                                   _get(session, f"http://{master_metrics}{MASTER_METRICS_PATH}"))
        return segment_used(detail, metrics, segment)


async def _control(pod_ip: str, path: str, token: str, body: bytes | None = None, ok: int = 202) -> bool:
    headers = control_header(token) | ({"Content-Type": "application/json"} if body is not None else {})
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.post(f"http://{pod_ip}:{HTTP_PORT}{path}", headers=headers, data=body) as resp:
                if resp.status in (400, 401, 403):
                    log.warning("worker %s refused %s (%s): %s", pod_ip, path, resp.status, await resp.text())
                return resp.status == ok
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        return False
