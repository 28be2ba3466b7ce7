"""5,000 steps through real workers on real Ray and a real mooncake_master, as a week-long run scores them: a call
per step of stored outputs and inline tensors together, four rollouts at a time, each rollout's calls one group (a
new group every few steps, as miles' rollouts are). Memory stays flat in the worker processes and in the caller's process, and what the client
and the workers keep (pins, batches out, groups, inline bytes) stays bounded. The Releaser's own soak is
tests/unit/test_releaser_memory.py."""
from __future__ import annotations

import asyncio
import time

import ray
import torch

from rewardpool_worker.client.async_client import AsyncRewardPoolClient
from rewardpool_worker.client.pins import MAX_GROUPS

MiB = 2**20
STEPS = 5_000
WARM = 1_000  # steps before the first reading: allocators, Ray's buffers and the pins reach their working size
# About 6 KiB a step over the 4,000 measured: a call's inline tensors kept (4 x 3 KiB a step) cross it twice over;
# 10,000 steps grew the caller by 2 MiB and each worker by 6 MiB over their last 8,000 (2026-12-05).
BOUND = 24 * MiB
SCORER = {"class": "tests.worker.custom_scorer:MeanScorer", "batch_size": 8}
STREAMS = 4  # rollouts scored at once


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_five_thousand_steps_keep_client_and_worker_memory_flat(pool_actors, producer):
    workers = pool_actors("soak", 2, SCORER)
    refs = [producer.put(f"soak-{i}", seed=i, shape=(3, 2, 16, 16)) for i in range(32)]
    inline = [torch.rand(3, 16, 16) for _ in range(4)]
    client = AsyncRewardPoolClient("soak", "t", refresh_seconds=2.0)
    seen: dict[int, tuple[int, list[int]]] = {}

    async def stream(k: int, lo: int, hi: int):
        for step in range(lo + k, hi, STREAMS):
            stored = [refs[(step * 4 + i) % len(refs)] for i in range(4)]
            r = await client.score_detailed(stored + inline, ["p"] * 8, group=f"rollout-{step // 16}", timeout=60)
            assert not r.errors and len(r.results) == 8

    async def run():
        for lo, hi in ((0, WARM), (WARM, STEPS)):
            await asyncio.gather(*(stream(k, lo, hi) for k in range(STREAMS)))
            seen[hi] = (rss(), [ray.get(w.memory.remote())["rss"] for w in workers])
    t0 = time.monotonic()
    asyncio.run(run())
    took = time.monotonic() - t0
    (c0, w0), (c1, w1) = seen[WARM], seen[STEPS]
    print(f"{STEPS} steps in {took:.0f}s; caller rss {c0 / MiB:.0f} -> {c1 / MiB:.0f} MiB, workers "
          + ", ".join(f"{a / MiB:.0f} -> {b / MiB:.0f} MiB" for a, b in zip(w0, w1)))
    assert c1 - c0 < BOUND, "the caller's memory grows with the steps"
    assert all(b - a < BOUND for a, b in zip(w0, w1)), "a worker's memory grows with the steps"
    # what each side keeps is bounded, not a record of every step
    assert len(client.groups) <= MAX_GROUPS and not any(client.dispatcher.queued.values())
    assert not client.dispatcher.moved_ids and client.waiting == 0
    stats = [ray.get(w.stats.remote()) for w in workers]
    assert sum(s["batches"] for s in stats) == STEPS
    assert all(s["in_flight"] == 0 and s["inline_bytes"] == 0 and s["holding"] == 0 for s in stats)
