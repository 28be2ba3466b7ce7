"""What miles' rollout does with the rewards and depths a custom reward function leaves on its samples, written
from miles_diffusion's code (its Sample.get_reward_value, record_reward_queue_depth, the rollout's perf metrics and
per-component reward panels), not from the hook: the consumer the hook's results must survive."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Sample:
    prompt: str
    generated_output: object
    reward: object = None
    reward_max_queue_depth: dict | None = None

    def get_reward_value(self, args, *, reward_key: str | None = None) -> float:
        key = reward_key if reward_key is not None else getattr(args, "reward_key", None)
        if isinstance(self.reward, dict):
            if not key:
                raise ValueError("sample.reward is a dict but no reward_key configured")
            return float(self.reward[key])
        if self.reward is None:
            raise ValueError("sample.reward is None")
        return float(self.reward)


def record_reward_queue_depth(samples, name: str, max_queue_depth: int) -> None:
    for sample in samples:
        depths = sample.reward_max_queue_depth or {}
        depths[name] = float(max_queue_depth)
        sample.reward_max_queue_depth = depths


def rollout_log(args, samples: list[Sample]) -> dict:
    """The rollout's logging: perf depths per reward name, raw rewards, and (with --reward-key) the mean of
    every component over the samples that carry it."""
    log = {}
    reward_depths = [s.reward_max_queue_depth for s in samples if s.reward_max_queue_depth]
    for name in sorted({name for depths in reward_depths for name in depths}):
        log[f"perf/reward_max_queue_depth_{name}"] = max(depths[name] for depths in reward_depths if name in depths)
    raw = [s.get_reward_value(args) for s in samples]
    log["rollout/raw_reward"] = float(np.mean(raw))
    if getattr(args, "reward_key", None):
        for key in sorted({key for sample in samples for key in sample.reward}):
            values = [sample.reward[key] for sample in samples if key in sample.reward]
            log[f"rollout/reward/{key}_mean"] = float(np.mean(values))
    return log
