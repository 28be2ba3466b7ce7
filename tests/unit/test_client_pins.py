"""The client's version and group pins, on fake worker handles (no Ray): calls that share a group and run at the
same time are scored by one version, reserved at the group's first pick; a group whose version left moves whole."""
from __future__ import annotations

import asyncio

import torch

from tests.unit.fakes import FakeWorkerHandle, client_over


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


def test_the_group_registry_is_bounded():
    from rewardpool_worker.client import async_client

    client = client_over({"w": FakeWorkerHandle("v1-a")}, batch_size=2, max_outstanding_per_worker=8)
    for i in range(async_client.MAX_GROUPS + 10):
        client._group_pin(f"g{i}")
    assert len(client._groups) == async_client.MAX_GROUPS and "g0" not in client._groups
