"""The miles hook against a real pool (real mooncake_master, real Ray, the worker's own actors), called the
way miles calls a --custom-rm-path function: an args namespace carrying --custom-rm-args, Sample-like objects
whose generated_output is a stored-tensor ref (key, shape, dtype, size) or an inline (C, F, H, W) tensor,
micro-groups awaited concurrently on one event loop, and the returned rewards set on the samples in order."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch

from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.integrations.miles import rewardpool_rm

MIX = [{"class": "tests.worker.custom_scorer:MeanScorer", "args": {"seconds": 0.0}, "batch_size": 2},
       {"class": "tests.worker.custom_scorer:PromptLengthScorer", "weight": 0.5, "batch_size": 2}]


@dataclass
class StoredTensor:  # the framework's ref shape: key, shape, dtype, size (bytes)
    key: str
    shape: tuple
    dtype: torch.dtype
    size: int


@dataclass
class Sample:
    prompt: str
    generated_output: object
    reward: object = None


def stored(producer, key, seed, shape=(3, 2, 8, 8)) -> StoredTensor:
    ref = producer.put(key, seed=seed, shape=shape)
    return StoredTensor(ref.key, tuple(ref.shape), torch.float32, ref.nbytes)


def expected(video: torch.Tensor, prompt: str) -> dict:
    mean, length = float(video.float().mean()), float(len(prompt) + video.shape[0])
    return {"MeanScorer": pytest.approx(mean), "PromptLengthScorer": length,
            "weighted": pytest.approx(mean + 0.5 * length)}


async def framework_rollout(args, groups: list[list[Sample]]):
    """What the framework does with a custom rm: await it per micro-group, concurrently, set the rewards."""
    async def one(group):
        rewards = await rewardpool_rm(args, group)
        assert len(rewards) == len(group)
        for s, r in zip(group, rewards):
            s.reward = r
    await asyncio.gather(*(one(g) for g in groups))


@pytest.fixture()
def mix_pool(pool_actors):
    return pool_actors("mix", 2, {"batch_size": 2}, scorers=MIX)


def test_stored_and_inline_outputs_in_one_call_get_component_dicts(mix_pool, producer, master):
    videos = {i: make_tensor(2000 + i, [3, 2, 8, 8], "float32") for i in range(5)}
    samples = [Sample(f"prompt number {i}", stored(producer, f"miles-{i}", 2000 + i)) for i in range(4)]
    samples.insert(2, Sample("an inline eval video", videos[4]))  # evaluation: the tensor itself
    args = SimpleNamespace(custom_rm_args="pool=mix,namespace=t,ray_namespace=rewardpool,timeout=120")
    asyncio.run(framework_rollout(args, [samples]))
    order = [0, 1, 4, 2, 3]
    assert [s.reward for s in samples] == [expected(videos[i], samples[k].prompt) for k, i in enumerate(order)]
    assert all(s.reward_max_queue_depth >= 1 for s in samples)
    assert {f"miles-{i}" for i in range(4)} <= master.keys()  # not released: the framework does that
    assert all(isinstance(s.generated_output, (StoredTensor, torch.Tensor)) for s in samples)


def test_reward_key_and_group_rm_groups_on_one_loop(mix_pool, producer, master, monkeypatch):
    monkeypatch.setenv("REWARDPOOL_POOL", "mix")  # the pool from the environment, the rest from the args
    monkeypatch.setenv("REWARDPOOL_NAMESPACE", "t")
    groups = [[Sample(f"g{g} s{i}", stored(producer, f"grp-{g}-{i}", 3000 + 10 * g + i)) for i in range(4)]
              for g in range(3)]
    args = SimpleNamespace(custom_rm_args="reward_key=weighted,timeout=120", group_rm=True)
    asyncio.run(framework_rollout(args, groups))  # --group-rm: one call per whole group, groups concurrently
    for g, group in enumerate(groups):
        for i, s in enumerate(group):
            video = make_tensor(3000 + 10 * g + i, [3, 2, 8, 8], "float32")
            assert s.reward == expected(video, s.prompt)["weighted"] and isinstance(s.reward, float)
    single = Sample("one", stored(producer, "grp-single", 3100))
    assert asyncio.run(rewardpool_rm(args, single)) == pytest.approx(
        expected(make_tensor(3100, [3, 2, 8, 8], "float32"), "one")["weighted"])


def test_release_on_request_and_errors_as_a_default_reward(mix_pool, producer, master):
    samples = [Sample(f"rel {i}", stored(producer, f"mrel-{i}", 4000 + i)) for i in range(3)]
    args = SimpleNamespace(custom_rm_args=f"pool=mix,namespace=t,release=true,store_master={master.address}")
    asyncio.run(framework_rollout(args, [samples]))
    assert not {f"mrel-{i}" for i in range(3)} & master.keys()
    assert all(s.generated_output is None and s.reward is not None for s in samples)

    gone = Sample("missing", stored(producer, "mrel-gone", 4100))
    producer.remove("mrel-gone")
    ok = Sample("fine", stored(producer, "mrel-ok", 4101))
    lenient = SimpleNamespace(custom_rm_args="pool=mix,namespace=t,reward_key=weighted,on_error=-1")
    asyncio.run(framework_rollout(lenient, [[gone, ok]]))
    assert gone.reward == -1.0 and ok.reward == expected(make_tensor(4101, [3, 2, 8, 8], "float32"), "fine")["weighted"]
    strict = SimpleNamespace(custom_rm_args="pool=mix,namespace=t")
    from rewardpool_worker.store import ObjectNotFound
    with pytest.raises(ObjectNotFound):
        asyncio.run(framework_rollout(strict, [[gone, ok]]))
