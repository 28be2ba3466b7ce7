"""The pool client on real Ray, real workers and a real mooncake_master: load spreads evenly (one caller one
batch at a time, and several callers at once), draining workers cost no attempts, a worker killed mid-batch
loses nothing, a hung worker costs the caller its deadline and no more, the worker's errors arrive as types,
a failed sample fails alone, and the workers' queues carry the caller's whole demand."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest
import ray
import torch

from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.client.async_client import AsyncRewardPoolClient
from rewardpool_worker.client import RewardPoolClient
from tests.worker.conftest import KEY
from rewardpool_worker.errors import Draining, PoolUnavailable, SampleError, ScorerError, unwrap
from rewardpool_worker.records import OutputRef
from rewardpool_worker.store import InvalidParams, ObjectNotFound

MEAN = {"class": "tests.worker.custom_scorer:MeanScorer", "batch_size": 1}


def mean_of(seed, shape):
    return pytest.approx(float(make_tensor(seed, list(shape), "float32").mean()))


def batches_per_worker(handles) -> list[int]:
    return [ray.get(h.stats.remote())["batches"] for h in handles]


def within_a_quarter_of_even(counts: list[int]) -> bool:
    return within_of_even(counts, 0.25)


def within_of_even(counts: list[int], fraction: float) -> bool:
    even = sum(counts) / len(counts)
    return all(abs(c - even) <= fraction * even for c in counts)


def test_one_caller_scoring_batch_after_batch_spreads_over_the_pool(pool_actors, producer):
    workers = pool_actors("seq", 4, MEAN)
    ref = producer.put("seq-out", seed=1, shape=(3, 2, 4, 4))
    client = RewardPoolClient("seq", "t")
    for _ in range(100):  # one at a time: every worker is idle at each choice
        assert client.score([ref], ["p"]) == [mean_of(1, (3, 2, 4, 4))]
    counts = batches_per_worker(workers)
    print("sequential caller, batches per worker:", counts)
    assert sum(counts) == 100 and within_a_quarter_of_even(counts), counts


def test_several_concurrent_callers_spread_over_the_pool(pool_actors, producer):
    workers = pool_actors("conc", 4, MEAN)
    refs = [producer.put(f"conc-{i}", seed=10 + i, shape=(3, 2, 4, 4)) for i in range(4)]
    clients = [RewardPoolClient("conc", "t") for _ in range(4)]  # 4 callers, each its own client
    errors = []

    def caller(c: RewardPoolClient, i: int):
        try:
            for _ in range(25):
                assert c.score([refs[i]], ["p"]) == [mean_of(10 + i, (3, 2, 4, 4))]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(c, i)) for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    counts = batches_per_worker(workers)
    print("4 concurrent callers, batches per worker:", counts, "per caller:",
          [sorted(c.served.values()) for c in clients])
    # Each caller prices the workers by its own round trips, which include the others' batches queued there:
    # a worker one caller sees as twice the median for a while gets fewer of its batches (by design, a slow
    # worker gets less). Independent callers on 2 shared cores so spread less evenly than one caller: CI saw
    # [18, 27, 27, 28]. Half of even still fails a router that starves or piles onto a worker.
    assert sum(counts) == 100 and within_of_even(counts, 0.5), counts

    # And one caller with 100 batches at once over the same 4 workers.
    client = RewardPoolClient("conc", "t")
    before = batches_per_worker(workers)
    scores = client.score([refs[0]] * 100, ["p"] * 100)
    assert scores == [mean_of(10, (3, 2, 4, 4))] * 100
    counts = [a - b for a, b in zip(batches_per_worker(workers), before)]
    print("one caller, 100 batches at once, per worker:", counts)
    assert within_a_quarter_of_even(counts), counts


def test_draining_workers_cost_no_attempts(pool_actors, producer):
    workers = pool_actors("drn", 5, MEAN)
    for w in workers[:4]:
        ray.get(w.drain.remote(KEY))
    ref = producer.put("drn-out", seed=20, shape=(3, 2, 4, 4))
    client = RewardPoolClient("drn", "t", attempts=1)  # one loss would fail a batch: draining is not a loss
    assert client.score([ref] * 10, ["p"] * 10, raise_errors=True) == [mean_of(20, (3, 2, 4, 4))] * 10
    assert batches_per_worker(workers) == [0, 0, 0, 0, 10]
    assert client.router.describe().count("(draining)") >= 1


def test_worker_errors_cross_ray_as_types(pool_actors):
    (w,) = pool_actors("typed", 1, {"class": "tests.worker.custom_scorer:FailOnPromptScorer"})
    with pytest.raises(ray.exceptions.RayTaskError) as e:
        ray.get(w.score_batch.remote([torch.zeros(3, 4, 4)], ["bad"]))
    cause = unwrap(e.value)
    assert type(cause) is ScorerError and cause.kind == "ZeroDivisionError" and isinstance(e.value, ScorerError)
    ray.get(w.drain.remote(KEY))
    with pytest.raises(Draining):  # the RayTaskError is also an instance of the worker's class
        ray.get(w.score_batch.remote([torch.zeros(3, 4, 4)], ["ok"]))


def test_a_ranged_read_past_the_stored_end_fails_that_sample_alone(pool_actors, producer):
    # mean-intensity picks 2 frames, so the workers read ranges; one ref claims more frames than were stored.
    pool_actors("rng", 2, {"name": "mean-intensity", "num_frames": 2, "batch_size": 4})
    refs = [producer.put(f"rng-{i}", seed=40 + i, shape=(3, 10, 4, 4), dtype="uint8") for i in range(4)]
    short = refs[2]
    refs[2] = OutputRef(short.key, short.nbytes * 3, short.dtype, (3, 30, 4, 4))
    res = RewardPoolClient("rng", "t").score(refs, ["p"] * 4)
    assert [type(r) for r in res] == [float, float, SampleError, float]
    assert isinstance(res[2].cause, InvalidParams) and "past the stored object's end" in str(res[2].cause)
    for i in (0, 1, 3):  # frames 0 and 9 of each, as the frame rule picks them
        picked = make_tensor(40 + i, [3, 10, 4, 4], "uint8")[:, [0, 9]]
        assert res[i] == pytest.approx(float(picked.float().mean() / 255.0))


def test_a_failed_sample_fails_alone(pool_actors, producer, store):
    pool_actors("fail", 2, {"class": "tests.worker.custom_scorer:FailOnPromptScorer", "batch_size": 4})
    refs = [producer.put(f"fail-{i}", seed=30 + i, shape=(3, 2, 4, 4)) for i in range(6)]
    producer.remove(refs[4].key)  # gone from the store before it was read
    prompts = ["p"] * 6
    prompts[1] = "bad"
    client = RewardPoolClient("fail", "t")
    res = client.score(refs, prompts)
    assert [type(r) for r in res] == [float, SampleError, float, float, SampleError, float]
    assert isinstance(res[1].cause, ScorerError) and res[1].index == 1
    assert isinstance(res[4].cause, ObjectNotFound)
    for i in (0, 2, 3, 5):
        assert res[i] == mean_of(30 + i, (3, 2, 4, 4))
    with pytest.raises(ScorerError):
        client.score(refs[:2], prompts[:2], raise_errors=True)


def test_worker_killed_mid_batch_loses_nothing(pool_actors, producer, master):
    slow = {"class": "tests.worker.custom_scorer:SlowScorer", "batch_size": 1}
    victims = pool_actors("kill2", 2, slow)
    refs = [producer.put(f"kill2-{i}", seed=40 + i, shape=(3, 2, 8, 8)) for i in range(4)]

    async def run():
        client = AsyncRewardPoolClient("kill2", "t")
        call = asyncio.ensure_future(client.score_detailed(refs, ["p"] * 4, timeout=120))
        while sum(m.outstanding for m in client.router._members.values()) < 4:  # all 4 batches sent
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)
        ray.kill(victims[0])  # mid-batch: it holds 2 of them
        return await call

    report = asyncio.run(run())
    assert report.results == [mean_of(40 + i, (3, 2, 8, 8)) for i in range(4)]
    assert report.retries >= 1 and sum(report.workers.values()) == 4
    assert {r.key for r in refs} <= master.keys()  # still stored: only the releaser removes outputs


def test_a_hung_worker_costs_the_caller_its_deadline_once(pool_actors):
    hang = {"class": "tests.worker.custom_scorer:HangingScorer", "args": {"seconds": 40}, "batch_size": 1}
    workers = pool_actors("hung", 2, hang)
    client = RewardPoolClient("hung", "t")
    client.score([torch.zeros(3, 4, 4)] * 2, ["ok"] * 2)  # both workers timed once
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match="1 of 1 samples not scored within the 3s deadline"):
        client.score([torch.zeros(3, 4, 4)], ["hang"], timeout=3)
    print(f"hung batch: TimeoutError after {time.monotonic() - t0:.2f}s (deadline 3s)")
    hung = [w for w in workers if ray.get(w.stats.remote())["model_busy_seconds"] > 0]
    assert len(hung) == 1
    # The hung worker is skipped from now on: the next call's batches all go to the other one and finish.
    before = batches_per_worker(workers)
    assert client.score([torch.zeros(3, 4, 4)] * 6, ["ok"] * 6, timeout=30) == [1.0] * 6
    after = batches_per_worker(workers)
    assert [a - b for a, b in zip(after, before)] == [0 if w in hung else 6 for w in workers]


def test_a_deadline_cancels_the_batches_still_waiting_on_the_worker(pool_actors):
    hang = {"class": "tests.worker.custom_scorer:HangingScorer", "args": {"seconds": 40}, "batch_size": 1}
    (w,) = pool_actors("cancel", 1, hang)
    client = RewardPoolClient("cancel", "t")
    with pytest.raises(TimeoutError, match="4 of 4 samples"):
        client.score([torch.zeros(3, 4, 4)] * 4, ["hang"] * 4, timeout=3)
    # One batch holds the model, one holds the other read slot waiting for it; the two waiting for a slot
    # were dropped by the cancel, before reading anything.
    deadline = time.monotonic() + 30
    while (st := ray.get(w.stats.remote()))["in_flight"] > 2:
        assert time.monotonic() < deadline, st
        time.sleep(0.2)
    assert st["in_flight"] == 2 and st["batches"] == 0


def test_the_workers_queues_carry_the_whole_demand(pool_actors, producer):
    workers = pool_actors("demand", 2, {"class": "tests.worker.custom_scorer:MeanScorer", "args": {"seconds": 0.3},
                                        "batch_size": 1})
    ref = producer.put("demand-out", seed=50, shape=(3, 2, 4, 4))
    client = RewardPoolClient("demand", "t")
    fut = client.submit_detailed([ref] * 40, ["p"] * 40)
    seen = 0
    while not fut.done():
        seen = max(seen, sum(ray.get(w.stats.remote())["in_flight"] for w in workers))
        time.sleep(0.05)
    report = fut.result()
    print(f"40 batches on 2 workers: deepest total worker queue seen {seen}, per-worker {report.max_queue_depth}")
    assert report.results == [mean_of(50, (3, 2, 4, 4))] * 40
    assert seen > 16  # the old client's cap: its backlog never reached the workers
    assert report.max_queue_depth >= 15 and client.aio.waiting == 0


def test_no_live_worker_is_pool_unavailable_and_a_longer_deadline_waits_for_it(ray_cluster):
    client = RewardPoolClient("nobody", "t", unavailable_seconds=1)
    with pytest.raises(PoolUnavailable):
        client.score([torch.zeros(3, 4, 4)], ["p"])
    # with a deadline past unavailable_seconds the call keeps waiting for the pool to recover, until then
    t0 = time.monotonic()
    with pytest.raises(TimeoutError):
        RewardPoolClient("nobody", "t", unavailable_seconds=1, timeout=4).score([torch.zeros(3, 4, 4)], ["p"])
    assert time.monotonic() - t0 >= 3.5


def test_a_backlog_moves_to_workers_that_join(pool_actors, producer):
    """All batches are sent at once to the one worker there is; workers that join take over the part of its
    queue it has not started on, so the backlog does not stay on the oldest worker."""
    slow = {"class": "tests.worker.custom_scorer:MeanScorer", "args": {"seconds": 0.5}, "batch_size": 1}
    (first,) = pool_actors("join", 1, slow)
    ref = producer.put("join-out", seed=60, shape=(3, 2, 4, 4))
    client = RewardPoolClient("join", "t", refresh_seconds=0.5)
    fut = client.submit_detailed([ref] * 48, ["p"] * 48)
    while ray.get(first.stats.remote())["in_flight"] < 48:  # the whole backlog is on the first worker
        assert not fut.done()
        time.sleep(0.1)
    joined = pool_actors("join", 2, slow)
    report = fut.result()
    counts = batches_per_worker([first, *joined])
    print("backlog of 48 on one worker, two joined: batches per worker", counts, "moved", client.aio.moved)
    assert report.results == [mean_of(60, (3, 2, 4, 4))] * 48 and sum(counts) == 48
    # Without moving, the joined workers would get nothing: all 48 were queued on the first before they came.
    assert all(c >= 4 for c in counts[1:]) and counts[0] <= 40 and client.aio.moved >= 8, counts


def test_a_full_worker_refuses_and_the_batches_wait_their_turn(pool_actors, producer):
    """Two callers that each allow themselves 40 batches on the one worker: past its queue limit the worker
    refuses (Overloaded, a type), and the refused batches come back later; nothing fails."""
    from rewardpool_worker.runtime.actor import MAX_QUEUE

    (w,) = pool_actors("full", 1, {"class": "tests.worker.custom_scorer:MeanScorer", "args": {"seconds": 0.02},
                                   "batch_size": 1})
    ref = producer.put("full-out", seed=70, shape=(3, 2, 4, 4))
    clients = [RewardPoolClient("full", "t", max_outstanding_per_worker=40) for _ in range(2)]
    futures = [c.submit([ref] * 40, ["p"] * 40) for c in clients]
    results = [f.result() for f in futures]
    assert results == [[mean_of(70, (3, 2, 4, 4))] * 40] * 2
    st = ray.get(w.stats.remote())
    print(f"queue limit {MAX_QUEUE}: {st['refused']} refusals, {sum(c.retries for c in clients)} resends")
    assert st["refused"] >= 1 and st["batches"] == 80 and sum(c.retries for c in clients) == st["refused"]
