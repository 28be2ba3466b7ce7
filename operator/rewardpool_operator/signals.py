"""The scaling signals, read over HTTP: each Ready worker's /metrics (queue depth, pending bytes) and the
Mooncake master's /metrics (allocated / total capacity). A source that does not answer is left out; when no
worker answers, the queue is unknown (None), which the autoscaler treats as "hold"."""
from __future__ import annotations

import asyncio
import json
import logging

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from rewardpool_worker.config import HTTP_PORT, control_header

from .autoscaler import Signals

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
        texts = await asyncio.gather(*(_get(session, f"http://{ip}:{HTTP_PORT}/metrics") for ip in pod_ips))
        master = await _get(session, f"http://{master_metrics}/metrics") if master_metrics else None
    queue = pending = 0
    per_worker: dict[str, int] = {}
    for ip, text in zip(pod_ips, texts):
        if text is None:
            continue
        m = parse(text, {"rewardpool_worker_queue_depth", "rewardpool_worker_pending_bytes"})
        if "rewardpool_worker_queue_depth" in m:
            per_worker[ip] = int(m["rewardpool_worker_queue_depth"])
            queue += per_worker[ip]
            pending += int(m.get("rewardpool_worker_pending_bytes", 0))
    answered = len(per_worker)
    fill = None
    if master is not None:
        m = parse(master, {"master_allocated_bytes", "master_total_capacity_bytes"})
        if m.get("master_total_capacity_bytes"):
            fill = m.get("master_allocated_bytes", 0.0) / m["master_total_capacity_bytes"]
    return Signals(queue if answered else None, pending if answered else None, fill, answered, per_worker)


async def worker_health(pod_ip: str) -> dict | None:
    """The worker's /healthz (phase, in_flight, store_hostname), or None when it does not answer."""
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        text = await _get(session, f"http://{pod_ip}:{HTTP_PORT}/healthz")
    return json.loads(text) if text else None


async def request_drain(pod_ip: str, token: str) -> bool:
    """POST /drain with the pool's control token. A refusal is logged; the drain annotation the operator
    wrote first still reaches the worker through its Downward API file."""
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.post(f"http://{pod_ip}:{HTTP_PORT}/drain", headers=control_header(token)) as resp:
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
