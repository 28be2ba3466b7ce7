"""A worker stopped by SIGTERM waits for the segment it lends to empty (the master's usage on
store.metricsAddress), until its drain deadline, as the operator's drain does: the one decision, table-tested
with the master's answers given directly."""
from __future__ import annotations

import time

import pytest

from rewardpool_worker.contract import StoreConfig
from rewardpool_worker.runtime import main

LENDS = StoreConfig(master="m:1", protocol="tcp", segment_bytes=64 << 20, local_buffer_bytes=0,
                    metrics_address="m:9003")


@pytest.fixture()
def answers(monkeypatch):
    seen: list = []

    def feed(values):
        it = iter(values)

        def usage(address, segment):
            seen.append((address, segment))
            return next(it, values[-1])
        monkeypatch.setattr(main, "segment_usage", usage)
        return seen
    return feed


@pytest.mark.parametrize("values, deadline_in, empty, polls", [
    ([0], 60, True, 1),                   # empty at once
    ([4096, 4096, 0], 60, True, 3),       # read and released while it waits
    ([None, None, 0], 60, True, 3),       # a standby master says nothing for a while: waited through
    ([4096], 0.05, False, None),          # still holding at the deadline: lost with it, said (exit 1)
    ([None], 0.05, False, None),          # unknown at the deadline: not taken for empty
])
def test_the_wait_ends_when_the_segment_is_empty_or_the_deadline_passes(answers, values, deadline_in, empty, polls):
    seen = answers(values)
    got = main.wait_for_segment(LENDS, "10.0.0.5:17000", time.monotonic() + deadline_in, period=0.01)
    assert got is empty
    assert seen[0] == ("m:9003", "10.0.0.5:17000")
    if polls is not None:
        assert len(seen) == polls


@pytest.mark.parametrize("store", [LENDS.model_copy(update={"segment_bytes": 0}),
                                   LENDS.model_copy(update={"metrics_address": None})])
def test_nothing_to_wait_for_without_a_segment_or_a_master_to_ask(answers, store):
    seen = answers([4096])
    assert main.wait_for_segment(store, "s", time.monotonic() + 60, period=0.01) is True and seen == []
