"""Inline outputs held by one worker are bounded: a batch of inline tensors is held from the moment the call
arrives, also while it waits for a read slot, so past `max_inline_bytes` held at once another inline batch is
refused with Overloaded (the client waits and sends it again) instead of piling up (up to MAX_QUEUE batches
before the bound). READ_SLOTS inline batches (one scored, one waiting) are always taken, however large, so the
model never idles for the bound; stored refs do not count."""
from __future__ import annotations

import threading
import time

import pytest
import torch

from rewardpool_worker.errors import Overloaded
from rewardpool_worker.runtime.slots import StoredOutputRewardActor


class Gate:
    """A scorer that holds each batch until released."""

    def __init__(self):
        self.go = threading.Event()
        self.started = threading.Semaphore(0)

    def score_batch(self, outputs, prompts):
        self.started.release()
        self.go.wait(10)
        return [0.5] * len(outputs)


def batch(n: int, side: int = 16) -> list[torch.Tensor]:
    return [torch.zeros(3, side, side, dtype=torch.uint8) for _ in range(n)]  # 768 bytes each at 16x16


def run(actor, outputs, results, key):
    try:
        results[key] = actor.score_batch(outputs, ["p"] * len(outputs))
    except Exception as e:  # noqa: BLE001 - the test inspects it
        results[key] = e


def test_inline_batches_past_the_bound_are_refused_and_taken_once_room_is_made():
    g = Gate()
    actor = StoredOutputRewardActor(g, None, max_inline_bytes=3 * 768 * 2)  # room for three batches of 2 images
    results: dict = {}
    held = [threading.Thread(target=run, args=(actor, batch(2), results, i)) for i in range(3)]
    for t in held:
        t.start()
    assert g.started.acquire(timeout=5)  # one scores, the others wait for the model thread: all held
    deadline = time.monotonic() + 5
    while actor.inline_bytes < 3 * 1536 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert actor.inline_bytes == 4608 and actor.inline_batches == 3
    with pytest.raises(Overloaded, match="bytes of inline outputs held"):
        actor.score_batch(batch(1), ["p"])
    assert actor.stats()["refused"] == 1 and actor.in_flight == 3
    from prometheus_client import generate_latest

    from rewardpool_worker.runtime.metrics import WorkerMetrics
    m = WorkerMetrics("gate")
    m.update({**actor.stats(), "draining": False})
    assert "rewardpool_worker_inline_bytes 4608.0" in generate_latest(m.registry).decode()  # what /metrics says
    g.go.set()
    for t in held:
        t.join(10)
    assert results == {0: [0.5, 0.5], 1: [0.5, 0.5], 2: [0.5, 0.5]}
    assert actor.inline_bytes == 0 and actor.inline_batches == 0 and actor.stats()["peak_inline_bytes"] == 4608
    assert actor.score_batch(batch(1), ["p"]) == [0.5]  # room again


def test_two_inline_batches_are_always_taken_however_large():
    """A pool sized for uint8 stored outputs fed float32 inline ones: each batch passes the bound alone, yet one
    is scored while the next waits, as with reads; a third is refused."""
    g = Gate()
    actor = StoredOutputRewardActor(g, None, max_inline_bytes=100)
    results: dict = {}
    two = [threading.Thread(target=run, args=(actor, batch(4), results, i)) for i in range(2)]
    for t in two:
        t.start()
    deadline = time.monotonic() + 5
    while actor.inline_batches < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert actor.inline_batches == 2 and actor.inline_bytes == 2 * 3072
    with pytest.raises(Overloaded):
        actor.score_batch(batch(1), ["p"])
    g.go.set()
    for t in two:
        t.join(10)
    assert results == {0: [0.5] * 4, 1: [0.5] * 4}


def test_no_bound_means_none():
    unbounded = StoredOutputRewardActor(Gate(), None)
    assert unbounded.max_inline_bytes == 0
    gate = unbounded.scorer
    results: dict = {}
    threads = [threading.Thread(target=run, args=(unbounded, batch(2), results, i)) for i in range(5)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while unbounded.in_flight < 5 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert unbounded.in_flight == 5 and unbounded.inline_bytes == 5 * 1536  # nothing refused without a bound
    gate.go.set()
    for t in threads:
        t.join(10)
    assert all(r == [0.5, 0.5] for r in results.values()) and unbounded.inline_bytes == 0
