"""The miles hook against a real pool (real mooncake_master, real Ray, the worker's own actors), called the
way miles calls a --custom-rm-path function: an args namespace carrying --custom-rm-args (and miles' own
--reward-key), samples whose generated_output is a stored-tensor ref (key, shape, dtype, size) or an inline
(C, F, H, W) tensor, micro-groups awaited concurrently on one event loop, the returned rewards set on the
samples in order, and then what miles' rollout does with them (tests/worker/miles_reference.py): its perf
depths, get_reward_value, the per-component panels. Every mode must get through that without error."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import torch

from rewardpool_devcluster.producer import make_tensor
from rewardpool_worker.client.async_client import AsyncRewardPoolClient
from rewardpool_worker.integrations.miles import rewardpool_rm
from tests.worker.miles_reference import Sample, image_or_video_to_uint8, rollout_log, sample_frame_indices

MIX = [{"class": "tests.worker.custom_scorer:MeanScorer", "args": {"seconds": 0.0}, "batch_size": 2},
       {"class": "tests.worker.custom_scorer:PromptLengthScorer", "weight": 0.5, "batch_size": 2}]


@dataclass
class StoredTensor:  # the framework's ref shape: key, shape, dtype, size (bytes)
    key: str
    shape: tuple
    dtype: torch.dtype
    size: int


def stored(producer, key, seed, shape=(3, 2, 8, 8)) -> StoredTensor:
    ref = producer.put(key, seed=seed, shape=shape)
    return StoredTensor(ref.key, tuple(ref.shape), torch.float32, ref.nbytes)


def expected(video: torch.Tensor, prompt: str) -> dict:
    mean, length = float(video.float().mean()), float(len(prompt) + video.shape[0])
    return {"MeanScorer": pytest.approx(mean), "PromptLengthScorer": length,
            "weighted": pytest.approx(mean + 0.5 * length)}


def miles_args(custom_rm_args: str, reward_key: str | None = None, **kw) -> SimpleNamespace:
    return SimpleNamespace(custom_rm_args=custom_rm_args, reward_key=reward_key, **kw)


async def framework_rollout(args, groups: list[list[Sample]]) -> dict:
    """What the framework does with a custom rm: await it per micro-group, concurrently, set the rewards, then
    log the rollout."""
    async def one(group):
        rewards = await rewardpool_rm(args, group)
        assert len(rewards) == len(group)
        for s, r in zip(group, rewards, strict=True):
            s.reward = r
    await asyncio.gather(*(one(g) for g in groups))
    return rollout_log(args, [s for g in groups for s in g])


@pytest.fixture()
def mix_pool(pool_actors):
    return pool_actors("mix", 2, {"batch_size": 2}, scorers=MIX)


def test_stored_and_inline_outputs_with_miles_reward_key(mix_pool, producer, master):
    videos = {i: make_tensor(2000 + i, [3, 2, 8, 8], "float32") for i in range(5)}
    samples = [Sample(f"prompt number {i}", stored(producer, f"miles-{i}", 2000 + i)) for i in range(4)]
    samples.insert(2, Sample("an inline eval video", videos[4]))  # public miles: the tensor itself
    args = miles_args("pool=mix,namespace=t,ray_namespace=rewardpool,timeout=120", reward_key="weighted")
    log = asyncio.run(framework_rollout(args, [samples]))
    order = [0, 1, 4, 2, 3]
    assert [s.reward for s in samples] == [expected(videos[i], samples[k].prompt) for k, i in enumerate(order)]
    assert set(log) >= {"perf/reward_max_queue_depth_mix", "rollout/reward/weighted_mean",
                        "rollout/reward/MeanScorer_mean", "rollout/reward/PromptLengthScorer_mean"}
    assert all(isinstance(s.reward_max_queue_depth["mix"], float) for s in samples)
    assert {f"miles-{i}" for i in range(4)} <= master.keys()  # not released: the framework does that
    assert all(isinstance(s.generated_output, (StoredTensor, torch.Tensor)) for s in samples)


def test_component_dicts_without_any_reward_key_are_refused_clearly(mix_pool, producer):
    samples = [Sample("x", stored(producer, "nokey-0", 2100))]
    with pytest.raises(ValueError, match="--reward-key"):
        asyncio.run(framework_rollout(miles_args("pool=mix,namespace=t,timeout=60"), [samples]))


def test_the_hooks_reward_key_and_miles_reward_key_together_are_refused(mix_pool, producer):
    samples = [Sample("x", stored(producer, "both-0", 2200))]
    with pytest.raises(ValueError, match="drop reward_key"):
        asyncio.run(rewardpool_rm(miles_args("pool=mix,namespace=t,reward_key=weighted", reward_key="weighted"),
                                  samples))


def test_reward_key_and_group_rm_groups_on_one_loop(mix_pool, producer, master, monkeypatch):
    monkeypatch.setenv("REWARDPOOL_POOL", "mix")  # the pool from the environment, the rest from the args
    monkeypatch.setenv("REWARDPOOL_NAMESPACE", "t")
    groups = [[Sample(f"g{g} s{i}", stored(producer, f"grp-{g}-{i}", 3000 + 10 * g + i)) for i in range(4)]
              for g in range(3)]
    args = miles_args("reward_key=weighted,timeout=120", group_rm=True)
    log = asyncio.run(framework_rollout(args, groups))  # --group-rm: one call per whole group, concurrently
    for g, group in enumerate(groups):
        for i, s in enumerate(group):
            video = make_tensor(3000 + 10 * g + i, [3, 2, 8, 8], "float32")
            assert s.reward == expected(video, s.prompt)["weighted"] and isinstance(s.reward, float)
    assert "perf/reward_max_queue_depth_mix" in log and "rollout/reward/weighted_mean" not in log
    single = Sample("one", stored(producer, "grp-single", 3100))
    assert asyncio.run(rewardpool_rm(args, single)) == pytest.approx(
        expected(make_tensor(3100, [3, 2, 8, 8], "float32"), "one")["weighted"])


def test_one_scorer_pool_plain_and_with_miles_reward_key(pool_actors, producer):
    pool_actors("plain", 1, {"name": "mean-intensity", "batch_size": 4})
    videos = [make_tensor(3200 + i, [3, 4, 8, 8], "float32") for i in range(3)]
    want = [float(v.mul(255).clamp(0, 255).to(torch.uint8).float().mean() / 255) for v in videos]
    plain = [Sample(f"p{i}", videos[i]) for i in range(3)]
    log = asyncio.run(framework_rollout(miles_args("pool=plain,namespace=t"), [plain]))
    assert [s.reward for s in plain] == pytest.approx(want) and log["rollout/raw_reward"] == pytest.approx(sum(want) / 3)
    keyed = [Sample(f"k{i}", videos[i]) for i in range(3)]
    log = asyncio.run(framework_rollout(miles_args("pool=plain,namespace=t", reward_key="pickscore"), [keyed]))
    assert [s.reward for s in keyed] == [{"pickscore": pytest.approx(w)} for w in want]
    assert log["rollout/reward/pickscore_mean"] == pytest.approx(sum(want) / 3)


def test_queue_depth_is_a_dict_entry_zero_when_idle_and_merged(pool_actors):
    pool_actors("idle", 1, {"name": "mean-intensity", "batch_size": 4})
    s = Sample("d", torch.rand(3, 2, 4, 4), reward_max_queue_depth={"hps": 2.0})
    asyncio.run(framework_rollout(miles_args("pool=idle,namespace=t"), [[s]]))
    # one batch on an idle worker waited for nothing: under the pool's name and its scorer's, as miles' own
    # reward pools record theirs; what was there is kept
    assert s.reward_max_queue_depth == {"hps": 2.0, "idle": 0.0, "mean-intensity": 0.0}


def test_release_on_request_and_errors_as_a_default_reward(mix_pool, producer, master):
    samples = [Sample(f"rel {i}", stored(producer, f"mrel-{i}", 4000 + i)) for i in range(3)]
    args = miles_args(f"pool=mix,namespace=t,release=true,store_master={master.address}", reward_key="weighted")
    asyncio.run(framework_rollout(args, [samples]))
    assert not {f"mrel-{i}" for i in range(3)} & master.keys()
    assert all(s.generated_output is None and s.reward is not None for s in samples)

    def pair(tag):
        gone = Sample("missing", stored(producer, f"mrel-gone-{tag}", 4100))
        producer.remove(f"mrel-gone-{tag}")
        return gone, Sample("fine", stored(producer, f"mrel-ok-{tag}", 4101))
    fine = expected(make_tensor(4101, [3, 2, 8, 8], "float32"), "fine")
    gone, ok = pair("a")  # the hook's reward_key: floats, the failed one too
    asyncio.run(framework_rollout(miles_args("pool=mix,namespace=t,reward_key=weighted,on_error=-1"), [[gone, ok]]))
    assert gone.reward == -1.0 and ok.reward == fine["weighted"]
    gone, ok = pair("b")  # miles' --reward-key: dicts, the failed one a dict of every component
    log = asyncio.run(framework_rollout(miles_args("pool=mix,namespace=t,on_error=-1", reward_key="weighted"),
                                        [[gone, ok]]))
    assert gone.reward == {"MeanScorer": -1.0, "PromptLengthScorer": -1.0, "weighted": -1.0} and ok.reward == fine
    assert log["rollout/reward/PromptLengthScorer_mean"] == pytest.approx((-1.0 + fine["PromptLengthScorer"]) / 2)
    gone, ok = pair("c")
    from rewardpool_worker.store import ObjectNotFound
    with pytest.raises(ObjectNotFound):
        asyncio.run(framework_rollout(miles_args("pool=mix,namespace=t", reward_key="weighted"), [[gone, ok]]))


def _mean_of(video, k, rounded):
    """A frame-picking mean-intensity score by miles' rules."""
    picked = video[:, sample_frame_indices(video.shape[1], k)]
    return float(image_or_video_to_uint8(picked, round_normalized=rounded).float().mean() / 255)


def test_inline_videos_are_sent_cut_to_the_picked_frames(pool_actors):
    """As miles' pickscore_rm slices generated_output[:, indices] before its actors: only the scored frames
    cross Ray; a mixture sends the union of its components' frames and each scores its own."""
    pool_actors("cut", 1, {"name": "mean-intensity", "num_frames": 3, "batch_size": 4})
    pool_actors("cutmix", 1, {"batch_size": 4}, scorers=[
        {"name": "mean-intensity", "num_frames": 3},
        {"class": "tests.worker.custom_scorer:RoundedFrameMean", "num_frames": 8}])
    videos = [make_tensor(5000 + i, [3, 121, 16, 24], "float32") for i in range(2)]
    frame = 3 * 16 * 24 * 4

    async def call(pool):
        client = AsyncRewardPoolClient(pool, "t", "rewardpool", timeout=60)
        return await client.score_detailed(videos, ["a", "b"])
    one = asyncio.run(call("cut"))
    assert one.sent_bytes == 2 * 3 * frame  # before: 2 x 121 frames
    assert one.results == [pytest.approx(_mean_of(v, 3, False)) for v in videos]
    mix = asyncio.run(call("cutmix"))
    union = len(set(sample_frame_indices(121, 3)) | set(sample_frame_indices(121, 8)))
    assert mix.sent_bytes == 2 * union * frame
    assert [r["mean-intensity"] for r in mix.results] == [pytest.approx(_mean_of(v, 3, False)) for v in videos]
    assert [r["RoundedFrameMean"] for r in mix.results] == [pytest.approx(_mean_of(v, 8, True)) for v in videos]
    print(f"inline bytes per call of 2 videos (3, 121, 16, 24) float32: whole {2 * 121 * frame}, "
          f"pickscore-like k=3 {one.sent_bytes}, mixture k=3+8 {mix.sent_bytes}")


def test_a_scorer_that_needs_whole_outputs_gets_them_whole(mix_pool):
    async def call():
        client = AsyncRewardPoolClient("mix", "t", "rewardpool", timeout=60)
        return await client.score_detailed([torch.rand(3, 5, 4, 4)], ["w"])
    report = asyncio.run(call())
    assert report.sent_bytes == 3 * 5 * 4 * 4 * 4  # its custom scorers declare no frames


def test_workers_that_pick_differently_each_get_their_own_frames(pool_actors):
    """During a roll (numFrames 3 -> 5) two workers of one pool pick different frames: each batch is cut for
    the worker it goes to, so no sample fails for frames that were not sent."""
    pool_actors("skew", 1, {"name": "mean-intensity", "num_frames": 3, "batch_size": 1})
    pool_actors("skew", 1, {"name": "mean-intensity", "num_frames": 5, "batch_size": 1})
    videos = [make_tensor(5100 + i, [3, 40, 8, 8], "float32") for i in range(12)]

    async def call():
        client = AsyncRewardPoolClient("skew", "t", "rewardpool", timeout=60)
        return await client.score_detailed(videos, [f"s{i}" for i in range(12)])
    report = asyncio.run(call())
    assert not report.errors and len(report.workers) == 2, report.workers
    for v, r in zip(videos, report.results):
        assert r in (pytest.approx(_mean_of(v, 3, False)), pytest.approx(_mean_of(v, 5, False)))


def test_the_scorer_version_goes_into_a_samples_metadata_dict(pool_actors):
    pool_actors("meta", 1, {"name": "mean-intensity", "batch_size": 4})

    @dataclass
    class WithMetadata(Sample):
        metadata: dict | None = None

    s = WithMetadata("m", torch.rand(3, 2, 4, 4), metadata={"source": "x"})
    plain = Sample("p", torch.rand(3, 2, 4, 4))  # no metadata attribute: left as it is
    asyncio.run(framework_rollout(miles_args("pool=meta,namespace=t"), [[s, plain]]))
    assert s.metadata["source"] == "x" and s.metadata["reward_scorer_version"]["meta"].startswith("unversioned-")
    assert not hasattr(plain, "metadata")
