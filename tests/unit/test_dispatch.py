"""The client's dispatch, on fake worker handles (no Ray): the table of what a failed try means for its batch,
and the one accounting of a batch sent to a worker whatever its end (scores, an error, a deadline, a cancel)."""
from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
import ray
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardpool_worker.client.dispatch import LOSSES, Dispatcher, Moved, Step, next_step
from rewardpool_worker.client.router import Member, Router
from rewardpool_worker.client.shadow import ShadowFanOut
from rewardpool_worker.errors import (BatchTooLarge, Cancelled, Draining, Overloaded, ScorerError, Shadowing)
from rewardpool_worker.store import MasterUnreachable, TransferFailed
from tests.unit.fakes import FakeWorkerHandle


def _unavailable():
    return ray.exceptions.ActorUnavailableError("unreachable", b"\0" * 16)


def _died():
    return ray.exceptions.ActorDiedError()


# (the exception, transfer already retried, the step)
TABLE = [
    (Moved("w"), False, Step.RESEND),
    (Cancelled("cancelled by its caller"), False, Step.RAISE),  # not taken back by this client: the batch's end
    (MasterUnreachable("no master", -1), False, Step.WAIT_STORE),
    (MasterUnreachable("no master", -1), True, Step.WAIT_STORE),
    (TransferFailed("transfer failed", -800), False, Step.ELSEWHERE_ONCE),
    (TransferFailed("transfer failed", -800), True, Step.RAISE),  # a second failure is the outputs'
    (Draining("draining"), False, Step.SKIP_DRAINING),
    (Shadowing("shadow"), False, Step.SKIP_SHADOW),
    (Overloaded("full"), False, Step.BACK_OFF),
    (_unavailable(), False, Step.LOST_UNREACHABLE),
    (_died(), False, Step.LOST),
    (ScorerError("boom", "RuntimeError"), False, Step.RAISE),
    (BatchTooLarge("too large", 2), False, Step.RAISE),
    (ValueError("bug"), False, Step.RAISE),
]


@pytest.mark.parametrize("error,retried,step", TABLE, ids=[f"{type(e).__name__}-{r}" for e, r, _ in TABLE])
def test_next_step_table(error, retried, step):
    assert next_step(error, transfer_retried=retried) is step


def test_only_a_lost_worker_spends_an_attempt():
    assert LOSSES == {Step.LOST_UNREACHABLE, Step.LOST}


def test_an_actor_error_wrapping_a_worker_refusal_is_sorted_by_the_refusal():
    # Ray raises an actor's exception as a RayTaskError that is also an instance of the original class
    wrapped = ray.exceptions.RayTaskError("score_batch", "tb", Draining("draining")).as_instanceof_cause()
    assert next_step(wrapped, transfer_retried=False) is Step.SKIP_DRAINING


class _Report:
    def __init__(self):
        self.max_queue_depth, self.sent_bytes, self.workers, self.shadow_tasks = 0, 0, Counter(), []


def _dispatcher(handle):
    router = Router("ns/p", refresh_seconds=3600.0)
    m = Member("w", handle, ready=True, version=handle.version)
    router._members["w"] = m

    async def members():
        return None
    return Dispatcher(router, ShadowFanOut(router, enabled=False), members), router, m


ENDS = st.sampled_from(["scores", "transfer", "draining", "died", "deadline", "cancel", "moved"])


@settings(max_examples=60, deadline=None)
@given(st.lists(ENDS, min_size=1, max_size=6))
def test_every_end_of_a_batch_is_accounted_once(ends):
    """Whatever each batch's end, it leaves the worker's queue, the router's outstanding count returns to zero,
    a deadline makes the worker suspect, and only a batch this client took back comes back as Moved."""
    async def main():
        h = FakeWorkerHandle("v1", delay=0.05)
        d, router, m = _dispatcher(h)
        for end in ends:
            router.pick()  # the router counts the batch out, as _acquire's pick does
            assert m.outstanding == 1
            errors = {"transfer": TransferFailed("t", -800), "draining": Draining("d"), "died": _died(),
                      "moved": Cancelled("dropped before reading")}
            h.error = errors.get(end)
            # where the test acts while the batch is out (takes it back, cancels it, lets its deadline pass), the
            # worker answers late enough that a loaded machine's stalled loop still acts first (CI saw 0.05 s lost)
            h.delay = 0.3 if end == "moved" else 2.0 if end in ("cancel", "deadline") else 0.05
            deadline = time.monotonic() + (0.01 if end == "deadline" else 3600)
            task = asyncio.ensure_future(d.send(m, [torch.zeros(1)], ["p"], None, _Report(), deadline))
            await asyncio.sleep(0.01)
            if end == "moved":
                d.moved_ids.update(d.queued["w"])  # rebalance() took it back
            if end == "cancel":
                task.cancel()
            outcome = (await asyncio.gather(task, return_exceptions=True))[0]
            if end == "scores":
                assert outcome == [1.0]
            elif end == "moved":
                assert isinstance(outcome, Moved)
            elif end == "deadline":
                assert isinstance(outcome, asyncio.TimeoutError) and m.excluded_until > time.monotonic()
                m.excluded_until = 0.0
            elif end == "cancel":
                assert isinstance(outcome, asyncio.CancelledError)
            else:
                assert isinstance(outcome, Exception) and not isinstance(outcome, Moved)
            assert m.outstanding == 0 and not any(d.queued.values()) and not d.moved_ids
        d.idle()
        assert d._rebalancer is None
    asyncio.run(main())


def test_a_waiting_caller_is_woken_when_a_batch_ends():
    async def main():
        h = FakeWorkerHandle("v1", delay=0.05)
        d, router, m = _dispatcher(h)
        router.pick()
        send = asyncio.ensure_future(d.send(m, [torch.zeros(1)], ["p"], None, _Report(), None))
        await asyncio.sleep(0)
        t0 = asyncio.get_running_loop().time()
        await d.wait_for_room(5.0)  # woken by the batch's end, not by the 5 s timeout
        assert asyncio.get_running_loop().time() - t0 < 1.0 and d.waiting == 0
        await send
    asyncio.run(main())

