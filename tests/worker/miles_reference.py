"""miles_diffusion's own rules, written from its code (not from the project's), for the tests to judge by:
its frame rule and uint8 conversion (processing_utils), and what its rollout does with the rewards and depths
a custom reward function leaves on its samples (Sample.get_reward_value, record_reward_queue_depth, the
rollout's perf metrics and per-component reward panels): the consumer the hook's results must survive."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def sample_frame_indices(num_total_frames: int, num_frames: int | None) -> list[int]:
    if num_total_frames <= 0:
        raise ValueError(f"video has no frames: {num_total_frames}")
    if num_frames is None or num_total_frames <= num_frames:
        return list(range(num_total_frames))
    if num_frames == 1:
        return [num_total_frames // 2]
    step = (num_total_frames - 1) / (num_frames - 1)
    return [int(round(i * step)) for i in range(num_frames)]


def image_or_video_to_uint8(tensor: torch.Tensor, *, round_normalized: bool = False) -> torch.Tensor:
    output = tensor.float()
    if float(output.max()) <= 1.0 + 1e-3:
        output = output * 255.0
        if round_normalized:
            output = output.round()
    return output.clamp(0, 255).to(torch.uint8)


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
