"""Releases on a real mooncake_master: all refs checked before any is marked, failed samples released and
counted, media keep-N per rollout, exactly once under retried and concurrent calls, and the sweep that
recovers what a crashed caller left in the store."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.runtime.reader import RegisteredTensorReader
from rewardpool_worker.records import OutputRef
from rewardpool_worker.client.releaser import Releaser, sweep_stale


def test_a_bad_ref_changes_nothing(store, producer, master):
    refs = [producer.put(f"val-{i}", seed=i, shape=(16,)) for i in range(3)]
    rel = Releaser(store)
    rel.expect(refs)
    stranger = OutputRef("val-stranger", 64, "float32", (16,))
    with pytest.raises(ValueError, match="never expected"):
        rel.rewarded([refs[0], refs[1], stranger])
    with pytest.raises(ValueError, match="listed twice"):
        rel.rewarded([refs[0], refs[0]])
    with pytest.raises(ValueError, match="listed twice"):
        rel.expect([stranger, stranger])
    assert rel.pending == 3 and {r.key for r in refs} <= master.keys()  # nothing marked, nothing removed
    assert rel.rewarded(refs) == [r.key for r in refs]
    assert rel.stats.released == 3 and not {r.key for r in refs} & master.keys()


def test_failed_samples_are_released_and_counted(store, producer, master):
    refs = [producer.put(f"failrel-{i}", seed=10 + i, shape=(16,)) for i in range(4)]
    rel = Releaser(store, media_keep=4, reader=RegisteredTensorReader(store))
    rel.expect(refs, rewards=2)
    assert rel.rewarded(refs) == []
    assert rel.failed(refs[:2]) == [refs[0].key, refs[1].key]  # their second reward will never come
    assert rel.failed(refs[:1]) == [] and rel.stats.duplicates == 1  # said again: nothing happens
    assert rel.rewarded(refs[2:]) == [refs[2].key, refs[3].key]
    assert rel.stats.released == 4 and rel.stats.failed_released == 2 and rel.stats.release_failures == 0
    assert [k for k, _ in rel.take_media(None)] == [refs[2].key, refs[3].key]  # failed samples are no media
    assert not {r.key for r in refs} & master.keys()
    with pytest.raises(ValueError, match="never expected"):
        rel.failed([OutputRef("failrel-x", 64, "float32", (16,))])


def test_media_keeps_n_per_rollout(store, producer, master):
    rel = Releaser(store, media_keep=2, reader=RegisteredTensorReader(store))
    for r in range(3):
        refs = [producer.put(f"roll{r}-{i}", seed=100 * r + i, shape=(3, 4, 4)) for i in range(5)]
        rel.expect(refs, rollout=r)
        rel.rewarded(refs)
    assert rel.stats.media_kept == 6 and rel.stats.released == 15
    for r in range(3):
        kept = rel.take_media(r)
        assert [k for k, _ in kept] == [f"roll{r}-0", f"roll{r}-1"]
        for i, (_, t) in enumerate(kept):
            assert torch.equal(t, make_tensor(100 * r + i, [3, 4, 4], "float32"))
        assert rel.take_media(r) == []


def test_exactly_once_under_retries_and_concurrent_callers(store, producer, master):
    refs = [producer.put(f"once-{i}", seed=200 + i, shape=(16,)) for i in range(48)]
    rel = Releaser(store)
    rel.expect(refs, rewards=2)  # a per-sample reward and a group reward
    batches = [refs[i:i + 6] for i in range(0, 48, 6)]
    # Every batch gets both rewards, and every call is made twice (a retry after a lost answer), all at once.
    calls = [(b, tok) for b in batches for tok in ("sample", "group") for _ in range(2)]
    with ThreadPoolExecutor(8) as pool:
        released = [k for keys in pool.map(lambda c: rel.rewarded(*c), calls) for k in keys]
    assert sorted(released) == sorted(r.key for r in refs)  # each once
    assert rel.stats.released == 48 and rel.stats.release_failures == 0 and rel.stats.duplicates == 96
    assert rel.pending == 0 and not {r.key for r in refs} & master.keys()


def test_a_sweep_recovers_what_a_crashed_caller_left(store, producer, master):
    crashed = Releaser(store)
    stale = [producer.put(f"run-a/r0/{i}", seed=300 + i, shape=(16,)) for i in range(5)]
    crashed.expect(stale)
    del crashed  # the caller died between scoring and release
    other = producer.put("run-b/r0/0", seed=310, shape=(16,))
    rel = Releaser(store)  # the restarted caller, already waiting on its next rollout
    live = producer.put("run-a/r1/0", seed=311, shape=(16,))
    rel.expect([live])
    http = f"127.0.0.1:{master.metrics_port}"
    removed = rel.sweep(http, "run-a/")
    assert sorted(removed) == sorted(r.key for r in stale) and rel.stats.swept == 5
    keys = master.keys()
    assert not {r.key for r in stale} & keys and live.key in keys and other.key in keys
    with pytest.raises(ValueError, match="prefix"):
        sweep_stale(store, http, "")
    assert rel.rewarded([live]) == [live.key]
    store.remove(other.key, force=True)


def test_a_remove_a_failover_undid_is_found_later_and_made_again(store, producer, master):
    """Against a highly available master a remove is confirmed later (Mooncake acknowledges it before its op
    log entry is durable). The failover that undoes one is played here by putting the key back after its
    release, as the new leader would hold it; the killed-leader case itself is tests/worker/test_store_ha.py."""
    assert not store.follows_leader and not Releaser(store).confirm_removals  # a plain master: nothing to do
    rel = Releaser(store, confirm_removals=True, confirm_after=0.5)
    refs = [producer.put(f"undone-{i}", seed=400 + i, shape=(16,)) for i in range(3)]
    rel.expect(refs)
    assert rel.rewarded(refs) == [r.key for r in refs] and not {r.key for r in refs} & master.keys()
    back = producer.put("undone-1", seed=401, shape=(16,))  # the leader's death lost this remove
    assert rel.stats.confirmed == 0  # not due yet: nothing asked
    assert rel.settle(timeout=10) == 0
    assert rel.stats.confirmed == 4 and rel.stats.resurrected == 1 and back.key not in master.keys()  # and 1 again
    assert rel.stats.released == 3 and rel.stats.release_failures == 0  # released once, as the caller sees it
    assert rel.settle(timeout=0) == 0 and rel.stats.confirmed == 4  # each remove is confirmed once
