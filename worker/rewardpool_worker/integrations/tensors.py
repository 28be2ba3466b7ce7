"""Scoring outputs held as tensors (frameworks without an output store: verl, flow-GRPO-style loops).

`score_tensors` puts each tensor into the Mooncake store, in the caller's own segment (its store client must
lend one: `segment_bytes` > 0), scores the refs through the pool (the workers read them over the store's
transport, RDMA where there is one, instead of through Ray's object store), and releases every output it
put, exactly once, whether the call succeeded, failed or timed out.

`TensorRewardClient` bundles the store client and the pool client for a process, and the two adapters give
the reward-function signatures those frameworks define:
- flow-GRPO: `reward_fn(images, prompts, metadata) -> (scores, info)`, images a (N, C, H, W) batch (or a list).
- verl: `compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float`, with the image
  (or video) in `extra_info["image"]` and the prompt in `extra_info["prompt"]` (default: ground_truth)."""
from __future__ import annotations

import asyncio
import os
import uuid

import torch

from ..client.async_client import AsyncRewardPoolClient
from ..client.releaser import Releaser
from ..errors import SampleError
from ..records import put_output


async def score_tensors(client: AsyncRewardPoolClient, store, tensors: list[torch.Tensor], prompts: list[str], *,
                        key_prefix: str | None = None, timeout: float | None = None,
                        raise_errors: bool = False, releaser: Releaser | None = None) -> list:
    """Scores of `tensors` (each (C, F, H, W), or (C, H, W) for an image) in order; see `client.score`."""
    if len(tensors) != len(prompts):
        raise ValueError(f"{len(tensors)} tensors but {len(prompts)} prompts")
    prefix = key_prefix or f"rewardpool-tensors/{uuid.uuid4().hex}/"
    rel = releaser or Releaser(store)
    refs: list = []

    def put_all():
        for i, t in enumerate(tensors):
            ref = put_output(store, f"{prefix}{i}", t.detach().cpu(), preferred_segment=store.hostname)
            rel.expect([ref])
            refs.append(ref)

    results = None
    try:
        await asyncio.to_thread(put_all)
        results = await client.score(refs, list(prompts), timeout=timeout, raise_errors=raise_errors)
        return results
    finally:
        ok = [r for r, s in zip(refs, results or []) if not isinstance(s, SampleError)]
        bad = [r for r in refs if r not in set(ok)]
        await asyncio.to_thread(lambda: (rel.rewarded(ok), rel.failed(bad)))


class TensorRewardClient:
    """A process's store client (lending `segment_bytes` for the outputs it puts) and pool client."""

    def __init__(self, pool: str, namespace: str = "default", *, store_master: str | None = None,
                 protocol: str = "tcp", segment_bytes: int = 1 << 30, local_hostname: str | None = None,
                 ray_namespace: str = "rewardpool", timeout: float | None = 600.0, devices: list[str] = ()):
        from ..client import RewardPoolClient
        from ..contract import StoreConfig
        from ..store import Store

        master = store_master or os.environ["REWARDPOOL_STORE_MASTER"]
        self.store = Store.connect(StoreConfig(master=master, protocol=protocol, devices=list(devices),
                                               segment_bytes=segment_bytes, local_buffer_bytes=16 << 20),
                                   local_hostname or os.environ.get("REWARDPOOL_LOCAL_HOSTNAME", "127.0.0.1"))
        self.client = RewardPoolClient(pool, namespace, ray_namespace, timeout=timeout)
        self.releaser = Releaser(self.store)

    async def ascore(self, tensors: list[torch.Tensor], prompts: list[str], **kw) -> list:
        return await score_tensors(self.client.aio, self.store, tensors, prompts, releaser=self.releaser, **kw)

    def score(self, tensors: list[torch.Tensor], prompts: list[str], **kw) -> list:
        return asyncio.run_coroutine_threadsafe(self.ascore(tensors, prompts, **kw), self.client._loop).result()

    def close(self) -> None:
        self.client.close()
        self.store.close()


def _as_video(t: torch.Tensor) -> torch.Tensor:
    return t.unsqueeze(1) if t.dim() == 3 else t  # an image (C, H, W) as a one-frame video (C, 1, H, W)


def flow_grpo_reward_fn(scorer: TensorRewardClient, reward_key: str | None = None):
    """A flow-GRPO-style `reward_fn(images, prompts, metadata) -> (scores, info)`."""
    def reward_fn(images, prompts, metadata):
        batch = [_as_video(torch.as_tensor(im)) for im in images]
        results = scorer.score(batch, list(prompts), raise_errors=True)
        scores = [r[reward_key] if reward_key and isinstance(r, dict) else r for r in results]
        return scores, {}
    return reward_fn


def verl_compute_score(scorer: TensorRewardClient, reward_key: str | None = None):
    """A verl-style `compute_score(data_source, solution_str, ground_truth, extra_info=None) -> float`, the
    output in `extra_info["image"]` and the prompt in `extra_info["prompt"]` (else ground_truth)."""
    def compute_score(data_source, solution_str, ground_truth, extra_info=None):
        info = extra_info or {}
        prompt = info.get("prompt", ground_truth)
        (r,) = scorer.score([_as_video(torch.as_tensor(info["image"]))], [str(prompt)], raise_errors=True)
        return float(r[reward_key] if reward_key and isinstance(r, dict) else r)
    return compute_score
