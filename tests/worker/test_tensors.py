"""score_tensors and the verl / flow-GRPO adapters on a real pool: tensors put into the caller's own segment,
read by the workers from the store, scored, and every output released once, including failed ones."""
from __future__ import annotations

import asyncio

import pytest
import torch

from rewardpool_worker.client.async_client import AsyncRewardPoolClient
from rewardpool_worker.errors import SampleError, ScorerError
from rewardpool_worker.integrations.tensors import (TensorRewardClient, flow_grpo_reward_fn, score_tensors,
                                                    verl_compute_score)
from rewardpool_worker.client.releaser import Releaser

MEAN = {"class": "tests.worker.custom_scorer:MeanScorer", "args": {"seconds": 0.0}, "batch_size": 2}


def test_score_tensors_puts_scores_and_releases_everything(pool_actors, store, master):
    workers = pool_actors("tens", 2, MEAN)
    g = torch.Generator().manual_seed(5)
    tensors = [torch.rand(3, 2, 8, 8, generator=g) for _ in range(5)]
    prompts = ["p", "bad", "p", "p", "p"]  # the scorer fails on "bad"
    rel = Releaser(store)

    async def run():
        return await score_tensors(AsyncRewardPoolClient("tens", "t"), store, tensors, prompts,
                                   key_prefix="tens-call/", releaser=rel)
    results = asyncio.run(run())
    assert isinstance(results[1], SampleError) and isinstance(results[1].cause, ScorerError)
    assert [results[i] for i in (0, 2, 3, 4)] == [pytest.approx(float(tensors[i].mean())) for i in (0, 2, 3, 4)]
    assert rel.stats.released == 5 and rel.stats.failed_released == 1 and rel.stats.release_failures == 0
    assert not {k for k in master.keys() if k.startswith("tens-call/")}
    import ray
    assert sum(ray.get(w.stats.remote())["bytes_read"] for w in workers) >= sum(t.nbytes for t in tensors) - \
        tensors[1].nbytes  # the workers read them from the store


def test_flow_grpo_and_verl_adapters(pool_actors, master):
    pool_actors("adapt", 1, MEAN)
    scorer = TensorRewardClient("adapt", "t", store_master=master.address, segment_bytes=32 << 20, timeout=60)
    try:
        images = torch.rand(3, 3, 16, 16)  # a flow-GRPO batch: (N, C, H, W) in [0, 1]
        reward_fn = flow_grpo_reward_fn(scorer)
        scores, info = reward_fn(images, ["a", "b", "c"], [{}] * 3)
        assert scores == [pytest.approx(float(im.mean())) for im in images] and info == {}
        compute_score = verl_compute_score(scorer)
        video = torch.rand(3, 4, 8, 8)
        assert compute_score("t2v", "", "a prompt", {"image": video}) == pytest.approx(float(video.mean()))
        with pytest.raises(ScorerError):
            compute_score("t2v", "", "bad", {"image": video})
        assert scorer.releaser.stats.released == 5 and scorer.releaser.pending == 0
        assert not {k for k in master.keys() if k.startswith("rewardpool-tensors/")}
    finally:
        scorer.close()
