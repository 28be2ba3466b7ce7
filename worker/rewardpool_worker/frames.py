"""Which frames a scorer sees, and the uint8 quantisation, by the training framework's conventions (a run that
moves its reward to a RewardPool must log the same rewards). Shared by the stored and the inline paths, so
both give the same frames and the same scores."""
from __future__ import annotations

import torch

# The framework treats an output whose largest value is at most 1 (+ this slack for float noise) as [0, 1]
# and scales it to [0, 255]; anything larger is taken as already in [0, 255].
UNIT_RANGE_SLACK = 1e-3


def frame_indices(total: int, num_frames: int | None) -> list[int]:
    """All frames when `num_frames` is unset or the video has no more; one frame: `total // 2`; otherwise
    `num_frames` evenly spaced, first and last included (Python's round: halves go to the even index)."""
    if total <= 0:
        raise ValueError("a video needs at least one frame")
    if num_frames is None or total <= num_frames:
        return list(range(total))
    if num_frames == 1:
        return [total // 2]
    return [int(round(i * (total - 1) / (num_frames - 1))) for i in range(num_frames)]


def to_uint8(frames: torch.Tensor) -> torch.Tensor:
    """As float; [0, 1] (max <= 1 + 1e-3) scaled to [0, 255]; clamped to [0, 255]; converted by truncation,
    not rounding (the framework's `.to(torch.uint8)`). Values already in [0, 255] go through the same steps."""
    x = frames.float()
    if x.numel() and float(x.max()) <= 1 + UNIT_RANGE_SLACK:
        x = x * 255
    return x.clamp(0, 255).to(torch.uint8)


def pick_frames(output: torch.Tensor, num_frames: int | None) -> torch.Tensor:
    """Frames of an output as uint8 (F, H, W, C). A video is (C, F, H, W); an image (C, H, W) is one frame.
    Frames are picked before quantising, so only the picked frames are converted (and the [0, 1] test looks
    at the picked frames, as it does when the rollout process picks them inline)."""
    if output.dim() == 3:
        output = output.unsqueeze(1)
    if output.dim() != 4:
        raise ValueError(f"expected an image (C,H,W) or a video (C,F,H,W), got shape {tuple(output.shape)}")
    idx = frame_indices(output.shape[1], num_frames)
    picked = output[:, idx]
    return to_uint8(picked).permute(1, 2, 3, 0).contiguous()
