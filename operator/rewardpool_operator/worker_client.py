"""The scaling signals, read over HTTP: each Ready worker's /metrics (queue depth, pending bytes) and the
Mooncake master's /metrics (allocated / total capacity). A source that does not answer is left out; when no
worker answers, the queue is unknown (None), which the autoscaler treats as "hold"."""
from __future__ import annotations

import asyncio
import json
import logging

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from rewardpool_worker.contract import (DRAIN_PATH, HEALTH_PATH, HTTP_PORT, METRICS_PATH, PENDING_BYTES_METRIC,
                                      QUEUE_DEPTH_METRIC, WorkerHealth, control_header)

from .observed import Signals

log = logging.getLogger("rewardpool.operator")
TIMEOUT = aiohttp.ClientTimeout(total=2)


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


async def read(pod_ips: list[str], master_metrics: str | None) -> Signals:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        texts = await asyncio.gather(*(_get(session, f"http://{ip}:{HTTP_PORT}{METRICS_PATH}") for ip in pod_ips))
        master = await _get(session, f"http://{master_metrics}/metrics") if master_metrics else None
    queue = pending = 0
    per_worker: dict[str, int] = {}
    for ip, text in zip(pod_ips, texts):
        if text is None:
            continue
        m = parse(text, {QUEUE_DEPTH_METRIC, PENDING_BYTES_METRIC})
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
    return Signals(queue if answered else None, pending if answered else None, fill, answered, per_worker)


async def worker_health(pod_ip: str) -> dict | None:
    """The worker's /healthz (the contract's WorkerHealth: phase, in_flight, store_hostname, live), also when
    it answers 503 (wedged but there); None when it does not answer or answers something else."""
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.get(f"http://{pod_ip}:{HTTP_PORT}{HEALTH_PATH}") as resp:
                if resp.status not in (200, 503):
                    return None
                return WorkerHealth.model_validate_json(await resp.read()).model_dump()
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
        return None


async def request_drain(pod_ip: str, token: str) -> bool:
    """POST /drain with the pool's control token. A refusal is logged; the drain annotation the operator
    wrote first still reaches the worker through its Downward API file."""
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.post(f"http://{pod_ip}:{HTTP_PORT}{DRAIN_PATH}", headers=control_header(token)) as resp:
                if resp.status in (401, 403):
                    log.warning("worker %s refused the drain request (%s): %s", pod_ip, resp.status,
                                await resp.text())
                return resp.status == 202
    except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
        return False


async def segment_used_bytes(master_metrics: str, segment: str) -> int | None:
    """Bytes the master says are allocated in one client's segment (None if unknown)."""
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        text = await _get(session, f"http://{master_metrics}/get_segments_detail")
    if not text:
        return None
    for seg in json.loads(text).get("segments", []):
        if seg.get("segment_name") == segment:
            return int(seg.get("allocator_used_bytes", 0))
    return 0  # the master no longer lists it: nothing is stored there
