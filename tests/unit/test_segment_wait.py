"""A worker stopping on SIGTERM waits for its segment to empty (pure: the master's answers are given)."""
from __future__ import annotations

import time

from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.runtime import segment

LENDS = StoreConfig(master="m:50051", segment_bytes=1 << 20, local_buffer_bytes=0, metrics_address="m:9003")


def reads(*answers):
    seq = list(answers)
    seen = []

    def read(address, seg):
        seen.append((address, seg))
        return seq.pop(0) if len(seq) > 1 else seq[0]
    return read, seen


def test_it_waits_until_the_master_says_the_segment_is_empty(monkeypatch):
    monkeypatch.setattr(segment, "POLL_SECONDS", 0.01)
    read, seen = reads(4096, None, 1024, 0)  # a master that misses one answer is waited through
    assert segment.wait_until_empty(LENDS, "10.0.0.5:1234", time.monotonic() + 10, read) == 0
    assert seen == [("m:9003", "10.0.0.5:1234")] * 4


def test_past_the_deadline_it_says_what_is_left(monkeypatch):
    monkeypatch.setattr(segment, "POLL_SECONDS", 0.01)
    read, _ = reads(4096)
    assert segment.wait_until_empty(LENDS, "s", time.monotonic() + 0.05, read) == 4096
    read, _ = reads(None)
    assert segment.wait_until_empty(LENDS, "s", time.monotonic() + 0.05, read) is None  # unknown is not empty


def test_nothing_to_wait_for_without_a_segment_or_a_metrics_address():
    def never(*_):
        raise AssertionError("asked the master")
    assert segment.wait_until_empty(LENDS.model_copy(update={"metrics_address": None}), "s", 0, never) == 0
    assert segment.wait_until_empty(LENDS.model_copy(update={"segment_bytes": 0}), "s", 0, never) == 0
    assert segment.wait_until_empty(LENDS, None, 0, never) == 0


def test_the_operator_tells_the_worker_where_the_masters_metrics_are():
    from rewardpool_operator import builders, sizing
    from rewardpool_worker.contract import WorkerConfig
    from tests.factories import pool

    p = pool(store={"master": "mc:50051", "devices": ["mlx5_0"], "metricsAddress": "mc:9003"})
    env = {e["name"]: e.get("value") for e in builders.pod_template(p, sizing.compute(p.spec))["spec"]["containers"][0]["env"]}
    cfg = next(WorkerConfig.from_json(v) for v in env.values() if v and v.startswith("{"))
    assert cfg.store.metrics_address == "mc:9003"
