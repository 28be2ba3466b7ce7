"""The data-path verdict (datapath.py), its window over scrapes, the counters crossing from a worker's /metrics to
the operator, and the plan's use of it: a worker whose store reads fail while its peers' succeed is drained and
replaced, through the roll's hold; a pool whose every worker fails (the outputs' owner gone) loses no worker."""
from __future__ import annotations

import pytest

from rewardpool_operator.pool import datapath
from rewardpool_operator.pool.datapath import Reads, broken, remember, window
from tests.factories import NOW, pod, rfc3339, run_plan

R = Reads
# (reads per worker, the workers judged broken)
TABLE = [
    ({"a": R(0, 5), "b": R(10, 0)}, {"a"}),  # fails everything, its peer reads well
    ({"a": R(5, 5), "b": R(10, 1), "c": R(10, 0)}, {"a"}),  # half its reads; peers' share 1/21
    ({"a": R(6, 4), "b": R(10, 0)}, set()),  # fails less than half its reads
    ({"a": R(0, 2), "b": R(10, 0)}, set()),  # too few failures to judge
    ({"a": R(0, 5), "b": R(2, 0)}, set()),  # its peers read too little to compare with
    ({"a": R(0, 5), "b": R(0, 5), "c": R(0, 5)}, set()),  # every worker fails: the outputs' owner or the store
    ({"a": R(0, 5), "b": R(8, 2)}, set()),  # the peer fails 20% too: not clearly this worker's
    ({"a": R(0, 5)}, set()),  # a pool of one: nothing to compare with
    ({"a": R(0, 5), "b": R(0, 4), "c": R(20, 0)}, {"a", "b"}),  # two broken, one good peer
    ({}, set()),
]


@pytest.mark.parametrize("reads,want", TABLE)
def test_broken_table(reads, want):
    assert set(broken(reads)) == want


def test_the_verdict_says_the_figures():
    (why,) = broken({"a": R(1, 4), "b": R(10, 0)}).values()
    assert why.startswith("4 of its 5 batch reads failed in the last 120s while its 1 peer(s) read 10 with 0 failed")


def test_the_window_counts_increases_forgets_old_scrapes_and_restarts_count_from_zero():
    samples: datapath.Samples = {}
    remember(samples, {"a": (100, 10), "b": (50, 0)}, NOW - 500)  # past the window by the last scrape
    remember(samples, {"a": (110, 12), "b": (60, 0)}, NOW - 100)
    remember(samples, {"a": (111, 20), "b": (70, 0)}, NOW)
    assert window(samples) == {"a": R(1, 8), "b": R(10, 0)}
    remember(samples, {"a": (3, 1), "b": (75, 0)}, NOW + 10)  # a restarted: its counters from zero
    assert window(samples)["a"] == R(1 + 3, 8 + 1)
    remember(samples, {"b": (80, 0)}, NOW + 20)  # a no longer answers: forgotten
    assert set(samples) == {"b"}
    assert window({"c": [(NOW, 5, 5)]}) == {"c": R(0, 0)}  # one scrape: no increase seen yet


def test_a_workers_read_counters_cross_to_the_operator():
    from prometheus_client import generate_latest

    from rewardpool_operator.controller.workers import store_reads
    from rewardpool_worker.runtime.metrics import WorkerMetrics

    m = WorkerMetrics("pickscore")
    base = {"queue_depth": 0, "pending_bytes": 0, "draining": False}
    assert store_reads(generate_latest(m.registry).decode()) == (0, 0)  # both series from the start
    m.update({**base, "reads_ok": 7, "read_failures": 2})
    m.update({**base, "reads_ok": 9, "read_failures": 2})
    assert store_reads(generate_latest(m.registry).decode()) == (9, 2)
    assert store_reads("# nothing\n") is None  # a worker too old to count them


PODS = [pod("a", ip="10.0.0.1"), pod("b", ip="10.0.0.2"), pod("c", ip="10.0.0.3")]


def test_a_broken_worker_is_drained_and_replaced_and_said():
    pl = run_plan(PODS, replicas=3, reads={"10.0.0.1": R(0, 6), "10.0.0.2": R(12, 0), "10.0.0.3": R(9, 0)})
    assert [n for n, _ in pl.drain] == ["a"] and "its data path is broken" in pl.drain[0][1]
    assert pl.create == 1  # its replacement starts now
    (problem,) = [x for x in pl.problems if x.reason == "DataPathBroken"]
    assert problem.message.startswith("worker a: 6 of its 6 batch reads failed") and "replacement" in problem.message


@pytest.mark.parametrize("reads", [
    {"10.0.0.1": R(0, 6), "10.0.0.2": R(0, 6), "10.0.0.3": R(0, 6)},  # every worker: the outputs' owner gone
    {"10.0.0.1": R(0, 6)},  # no peer read anything
    {"10.0.0.9": R(0, 6), "10.0.0.2": R(12, 0)},  # an IP no serving worker has (gone since the scrape)
], ids=["all-fail", "no-peer-reads", "unknown-ip"])
def test_no_worker_is_taken_without_a_peer_to_compare_with(reads):
    pl = run_plan(PODS, replicas=3, reads=reads)
    assert pl.drain == [] and pl.create == 0 and not [x for x in pl.problems if x.reason == "DataPathBroken"]


def test_the_holds_pinned_worker_is_kept_and_the_reason_said():
    old = {"roll": {"to": "H", "since": rfc3339(NOW - 10)}}
    a = pod("a", hash_="old", ip="10.0.0.1")
    a["metadata"]["labels"]["rewardpool.io/scorer-version"] = "v1"
    c = pod("c", ip="10.0.0.3")
    c["metadata"]["labels"]["rewardpool.io/scorer-version"] = "v2"
    pl = run_plan([a, c], groups={"10.0.0.1": 3}, old_status=old, rollout={"maxVersionSkewSeconds": 300},
                  reads={"10.0.0.1": R(0, 6), "10.0.0.3": R(12, 0)})
    assert pl.drain == []  # the last worker of v1, groups pinned to it: kept until the window ends
    (problem,) = [x for x in pl.problems if x.reason == "DataPathBroken"]
    assert "the roll's hold keeps it for now" in problem.message


def test_a_worker_counts_its_batch_reads_by_result():
    """What the verdict reads: each batch read from the store, ok or failed (inline batches read nothing)."""
    import torch

    from rewardpool_worker.records import OutputRef
    from rewardpool_worker.runtime.slots import StoredOutputRewardActor
    from rewardpool_worker.store import TransferFailed

    from rewardpool_worker.runtime.reader import ReaderStats

    class Reader:
        fail = False
        stats = ReaderStats()

        def view_many(self, refs, picks):
            if self.fail:
                raise TransferFailed("transfer failed", -800)

            class Lease:
                tensors = [torch.zeros(3, 4, 4, dtype=torch.uint8) for _ in refs]

                def release(self):
                    pass
            return Lease()

    class Scorer:
        def score_batch(self, outputs, prompts):
            return [0.5] * len(outputs)

    reader = Reader()
    actor = StoredOutputRewardActor(Scorer(), [reader, reader])
    ref = OutputRef("k", 48, "uint8", (3, 4, 4))
    assert actor.score_batch([ref], ["p"]) == [0.5]
    reader.fail = True
    with pytest.raises(TransferFailed):
        actor.score_batch([ref], ["p"])
    actor.score_batch([torch.zeros(3, 4, 4, dtype=torch.uint8)], ["p"])  # inline: no read
    s = actor.stats()
    assert (s["reads_ok"], s["read_failures"]) == (1, 1)
