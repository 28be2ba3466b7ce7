"""Which frames a scorer sees, and the uint8 quantisation, shared by the stored and the inline paths so both
give the same frames and the same scores."""
from __future__ import annotations

import torch


def frame_indices(total: int, num_frames: int | None) -> list[int]:
    """`num_frames` evenly spaced frames, first and last included; 1 means the middle; None means all."""
    if total <= 0:
        raise ValueError("a video needs at least one frame")
    if num_frames is None or num_frames >= total:
        return list(range(total))
    if num_frames == 1:
        return [(total - 1) // 2]
    return [round(i * (total - 1) / (num_frames - 1)) for i in range(num_frames)]


def to_uint8(frames: torch.Tensor) -> torch.Tensor:
    """[0, 1] floats to uint8 (uint8 passes through)."""
    if frames.dtype == torch.uint8:
        return frames
    return (frames.float().clamp(0, 1) * 255).round().to(torch.uint8)


def pick_frames(output: torch.Tensor, num_frames: int | None) -> torch.Tensor:
    """Frames of an output as uint8 (F, H, W, C). A video is (C, F, H, W); an image (C, H, W) is one frame.
    Frames are picked before quantising, so only the picked frames are converted."""
    if output.dim() == 3:
        output = output.unsqueeze(1)
    if output.dim() != 4:
        raise ValueError(f"expected an image (C,H,W) or a video (C,F,H,W), got shape {tuple(output.shape)}")
    idx = frame_indices(output.shape[1], num_frames)
    picked = output[:, idx]
    return to_uint8(picked).permute(1, 2, 3, 0).contiguous()
