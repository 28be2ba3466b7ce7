"""The client's version and group pins, on fake worker handles (no Ray): calls that share a group and run at the
same time are scored by one version, reserved at the group's first pick; a group whose version left moves whole."""
from __future__ import annotations

import asyncio

import torch

from tests.unit.fakes import FakeRef, FakeWorkerHandle, client_over


def outputs(n):
    return [torch.zeros(3, 1, 4, 4) for _ in range(n)]


def test_concurrent_calls_of_one_group_are_scored_by_one_version():
    handles = {"w-old": FakeWorkerHandle("v1-a", score=1.0), "w-new": FakeWorkerHandle("v2-b", score=2.0)}
    client = client_over(handles, batch_size=2, max_outstanding_per_worker=8)

    async def main():
        return await asyncio.gather(*(client.score_detailed(outputs(2), ["p"] * 2, group="g", timeout=10)
                                      for _ in range(4)))
    reports = asyncio.run(main())
    assert len({r.version for r in reports}) == 1, [r.version for r in reports]
    # the least-outstanding routing would have spread them over both workers: the pin kept them on one
    used = [name for name, h in handles.items() if h.calls]
    assert len(used) == 1 and all(g == "g" for _, _, g in handles[used[0]].calls)
    # calls with no group, or another group, are free to go elsewhere
    other = asyncio.run(client.score_detailed(outputs(2), ["p"] * 2, group="h", timeout=10))
    assert other.version in ("v1-a", "v2-b")


def test_a_group_whose_version_left_moves_whole_and_its_calls_follow_one_new_pin():
    handles = {"w-old": FakeWorkerHandle("v1-a"), "w-new": FakeWorkerHandle("v2-b")}
    client = client_over(handles, batch_size=2, max_outstanding_per_worker=8)
    first = asyncio.run(client.score_detailed(outputs(2), ["p"] * 2, group="g", timeout=10))
    gone = next(n for n, h in handles.items() if h.version == first.version)
    client.router.mark_draining(gone)  # a roll drains that version's last worker

    async def main():
        return await asyncio.gather(*(client.score_detailed(outputs(2), ["p"] * 2, group="g", timeout=10)
                                      for _ in range(3)))
    later = asyncio.run(main())
    assert {r.version for r in later} == {next(h.version for n, h in handles.items() if n != gone)}
    assert client.group_moves == 1  # one move for the group, not one per call


def test_the_group_registry_is_bounded_and_a_pin_is_shared_until_its_version_leaves():
    from collections import Counter

    from rewardpool_worker.client.pins import MAX_GROUPS, GroupPins
    from rewardpool_worker.client.router import ANY

    pins = GroupPins("ns/p")
    serving = Counter({"v1": 2})
    first = pins.pin("g", serving)
    assert pins.pin("g", serving) is first and first.version is ANY  # shared before any pick
    first.version = "v1"  # the first pick of any of the group's calls
    assert pins.pin("g", serving) is first and pins.pin(None, serving) is not first
    moved = pins.pin("g", Counter({"v2": 1}))  # v1 left
    assert moved is not first and moved.version is ANY and pins.moves == 1
    assert pins.repin("g", first, serving) is moved and pins.moves == 1  # a call that saw v1 gone late follows
    for i in range(MAX_GROUPS + 10):
        pins.pin(f"g{i}", serving)
    assert len(pins) == MAX_GROUPS and "g0" not in pins


def test_a_worker_that_cannot_read_the_outputs_hands_the_batch_to_another_once():
    from rewardpool_worker.store import TransferFailed

    broken, fine = FakeWorkerHandle("v1-a", score=0.0), FakeWorkerHandle("v1-a", score=1.0)
    broken.error = TransferFailed("transfer failed: the segment owner is gone (TRANSFER_FAIL)", -800)
    client = client_over({"w-broken": broken, "w-fine": fine}, batch_size=2, max_outstanding_per_worker=8)
    for _ in range(3):  # wherever the router starts, every sample is scored by the worker that can read
        r = asyncio.run(client.score_detailed(outputs(2), ["p"] * 2, timeout=10))
        assert r.results == [1.0, 1.0] and not r.errors
    assert client.transfer_retries >= 1
    fine.error = TransferFailed("transfer failed", -800)  # the outputs' owner is gone: every worker fails
    r = asyncio.run(client.score_detailed(outputs(2), ["p"] * 2, timeout=10))
    assert len(r.errors) == 2 and all(isinstance(e.cause, TransferFailed) for e in r.errors)


def test_a_smaller_batch_size_after_a_roll_splits_the_batch_again_not_one_by_one():
    from rewardpool_worker.errors import BatchTooLarge

    class Small(FakeWorkerHandle):
        def _score(self, outputs, prompts, batch_id, group=None):
            self.calls.append((batch_id, len(outputs), group))
            if len(outputs) > 2:
                return FakeRef(error=BatchTooLarge("batch of 4 outputs exceeds this pool's scorer.batchSize 2", 2))
            return FakeRef([1.0] * len(outputs), delay=self.delay)
    w = Small("v2-b")
    client = client_over({"w": w}, batch_size=4, max_outstanding_per_worker=8)  # learned before the roll
    r = asyncio.run(client.score_detailed(outputs(8), ["p"] * 8, timeout=10))
    assert r.results == [1.0] * 8
    assert sorted(n for _, n, _ in w.calls) == [2, 2, 2, 2, 4, 4]  # two refused, then split by 2, none of 1
    assert client.batch_size == 2
    w.calls.clear()
    asyncio.run(client.score_detailed(outputs(4), ["p"] * 4, timeout=10))
    assert [n for _, n, _ in w.calls] == [2, 2]  # learned: no refusal any more


def test_a_sample_the_scorer_refused_fails_alone_and_the_batch_is_not_scored_again():
    """A worker answers a batch with one sample refused (a ScorerError in its place, as an API judge's bad reply):
    that sample is a SampleError with the scorer's message, the others keep their scores, and the batch is not
    sent again one sample at a time (a judge would be asked, and paid, twice)."""
    from rewardpool_worker.errors import SampleError, ScorerError

    class Refusing(FakeWorkerHandle):
        def _score(self, outputs, prompts, batch_id, group=None):
            self.calls.append((batch_id, len(outputs), group))
            return FakeRef([ScorerError("the judge's score 7.5 is outside [0.0, 4.0]", "JudgeRefused")
                            if "bad" in p else 0.5 for p in prompts], delay=self.delay)
    w = Refusing("v1-a")
    client = client_over({"w": w}, batch_size=4, max_outstanding_per_worker=8)
    r = asyncio.run(client.score_detailed(outputs(4), ["a", "bad", "c", "d"], timeout=10))
    assert [r.results[i] for i in (0, 2, 3)] == [0.5, 0.5, 0.5]
    assert isinstance(r.results[1], SampleError) and r.results[1].index == 1
    assert isinstance(r.results[1].cause, ScorerError) and "7.5 is outside" in str(r.results[1])
    assert [n for _, n, _ in w.calls] == [4]


def test_the_worker_turns_a_refusal_into_a_picklable_error():
    import pickle

    from rewardpool_worker.errors import ScorerError
    from rewardpool_worker.runtime.slots import sample_result

    class JudgeRefused(ValueError):  # a scorer's own class, which the client cannot import
        pass
    e = sample_result(JudgeRefused("reply 'x' is not JSON"))
    assert type(e) is ScorerError and e.kind == "JudgeRefused" and str(e) == "JudgeRefused: reply 'x' is not JSON"
    assert str(pickle.loads(pickle.dumps(e))) == str(e)
    assert sample_result(3) == 3.0 and type(sample_result(3)) is float
    assert sample_result({"a": 1.0, "weighted": 1.0}) == {"a": 1.0, "weighted": 1.0}
