"""The Releaser over a long run, on a fake store (its bookkeeping is the code under test): 10,000 rollouts whose
media is read back and sometimes never taken, some rollouts never ended, a highly available master that stops
answering checks for a while. What it keeps stays bounded and the process's memory flat; every output is still
removed exactly once and a repeated reward is still recognised."""
from __future__ import annotations

import torch

from rewardpool_worker.client import releaser as rel_mod
from rewardpool_worker.client.releaser import Releaser
from rewardpool_worker.records import OutputRef
from rewardpool_worker.store import ObjectNotFound, StoreError


class Clock:
    def __init__(self):
        self.t = 1000.0

    def monotonic(self):
        return self.t

    def sleep(self, s):
        self.t += s


class FakeStore:
    follows_leader = True  # a highly available master: removes are checked later

    def __init__(self):
        self.keys: set[str] = set()
        self.removed: dict[str, int] = {}
        self.answering = True

    def put(self, key):
        self.keys.add(key)

    def remove(self, key, force=False):
        if key not in self.keys:
            raise ObjectNotFound(key)
        self.keys.discard(key)
        self.removed[key] = self.removed.get(key, 0) + 1

    def batch_exists(self, keys):
        if not self.answering:
            raise StoreError("the master does not answer")
        return [k in self.keys for k in keys]


class Reader:
    def read(self, ref):
        return torch.zeros(16 * 1024)  # 64 KB a media sample: 10,000 rollouts x 2 would be 1.3 GB if all kept


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_ten_thousand_rollouts_keep_the_releaser_bounded_and_memory_flat(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(rel_mod, "time", clock)
    monkeypatch.setattr(rel_mod, "RELEASED_MEMORY", 10_000)  # reached here: the rollouts never ended hold 53,000
    store = FakeStore()
    rel = Releaser(store, media_keep=2, reader=Reader())
    steps, per = 10_000, 8
    rss = {}
    for step in range(steps):
        refs = [OutputRef(f"run/r{step}/s{i}", 64 * 1024, "float32", (16 * 1024,)) for i in range(per)]
        for r in refs:
            store.put(r.key)
        rel.expect(refs, rollout=step)
        rel.rewarded(refs[:4], token=f"call-{step}-a")
        rel.rewarded(refs[:4], token=f"call-{step}-a")  # a retried call: recognised, nothing changes
        rel.rewarded(refs[4:], token=f"call-{step}-b")
        if step % 2 == 0:
            assert len(rel.take_media(step)) == 2  # handed over; odd rollouts' media is never taken
        if step % 3 == 0:
            rel.end_rollout(step)  # some callers end their rollouts, others never do
        store.answering = not (3000 <= step < 4000)  # a master that answers no check for 1000 s
        clock.t += 1.0
        if step in (2000, steps - 1):
            rss[step] = rss_bytes()
    assert rel.settle(timeout=60) == 0
    # every output removed exactly once; every repeated call recognised
    assert len(store.removed) == steps * per and set(store.removed.values()) == {1} and not store.keys
    assert rel.stats.duplicates == steps * 4 and rel.stats.released == steps * per
    # bounded: what it remembers of released outputs, media not taken, media budgets, checks outstanding
    assert rel_mod.RELEASED_MEMORY - per <= len(rel._released) <= rel_mod.RELEASED_MEMORY  # the newest only
    assert len(rel._media_by_rollout) <= rel_mod.MEDIA_ROLLOUTS
    assert len(rel._media_slots) <= rel_mod.MEDIA_BUDGETS
    assert not rel._unconfirmed and not rel._tokens and not rel._pending and not rel._refs
    assert not hasattr(rel, "media")  # no list of every media sample ever read
    # the outage's checks were given up after CONFIRM_GIVE_UP_SECONDS, counted; the rest confirmed
    assert rel.stats.confirms_abandoned > 0
    assert rel.stats.confirmed + rel.stats.confirms_abandoned == steps * per
    assert rel.stats.media_kept == steps * 2 and rel.stats.media_dropped > 0
    grew = rss[steps - 1] - rss[2000]
    print(f"rss at step 2000: {rss[2000] / 2**20:.0f} MiB, at {steps}: {rss[steps - 1] / 2**20:.0f} MiB "
          f"(+{grew / 2**20:.1f} MiB); media read back {rel.stats.media_kept * 64 / 1024:.0f} MiB in all")
    assert grew < 64 * 2**20  # flat: keeping the media read back would have added ~1 GB


def test_a_released_output_is_refused_a_second_release_until_its_rollout_ends():
    store = FakeStore()
    rel = Releaser(store, confirm_removals=False)
    ref = OutputRef("k", 16, "float32", (4,))
    store.put("k")
    rel.expect([ref], rollout="r1")
    rel.rewarded([ref], token="t")
    assert rel.rewarded([ref], token="t") == [] and rel.stats.duplicates == 1  # the retry of the last reward
    try:
        rel.expect([ref], rollout="r1")
        raise AssertionError("a released output was expected again")
    except ValueError as e:
        assert "already released" in str(e)
    rel.end_rollout("r1")  # forgotten with its rollout
    assert not rel._released
