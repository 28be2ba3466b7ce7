"""Which frames a scorer sees, and the uint8 quantisation, by the training framework's conventions (a run that
moves its reward to a RewardPool must log the same rewards). Shared by the stored and the inline paths, so
both give the same frames and the same scores."""
from __future__ import annotations

from dataclasses import dataclass

import torch

# The framework treats an output whose largest value is at most 1 (+ this slack for float noise) as [0, 1]
# and scales it to [0, 255]; anything larger is taken as already in [0, 255].
UNIT_RANGE_SLACK = 1e-3


def frame_indices(total: int, num_frames: int | None) -> list[int]:
    """All frames when `num_frames` is unset or the video has no more; one frame: `total // 2`; otherwise
    `num_frames` evenly spaced, first and last included. The step is computed first, then each index is
    `round(i * step)`, exactly as the framework does: `round(i * (total - 1) / (num_frames - 1))` is not the
    same float, and at exact halves Python's round (to even) then picks another frame (n=30, k=15, i=7)."""
    if total <= 0:
        raise ValueError("a video needs at least one frame")
    if num_frames is None or total <= num_frames:
        return list(range(total))
    if num_frames == 1:
        return [total // 2]
    step = (total - 1) / (num_frames - 1)
    return [int(round(i * step)) for i in range(num_frames)]


QUANTISE = ("truncate", "round")


def to_uint8(frames: torch.Tensor, quantise: str = "truncate") -> torch.Tensor:
    """As float; [0, 1] (max <= 1 + 1e-3) scaled to [0, 255] and, with quantise="round", rounded (half to even);
    clamped to [0, 255]; converted by `.to(torch.uint8)`, which truncates. So "truncate" is the framework's
    PickScore and "round" its HPS, OCR and API rewards (`round_normalized=True`); values already in [0, 255] are
    truncated either way, as there."""
    if quantise not in QUANTISE:
        raise ValueError(f"quantise must be one of {QUANTISE}, not {quantise!r}")
    x = frames.float()
    if x.numel() and float(x.max()) <= 1 + UNIT_RANGE_SLACK:
        x = x * 255
        if quantise == "round":
            x = x.round()
    return x.clamp(0, 255).to(torch.uint8)


@dataclass(frozen=True)
class FrameSubset:
    """Some frames of a (C, F, H, W) video, as the caller sent them: `frames` is (C, len(indices), H, W), the
    video's frames at `indices` (ascending) of its `total`. The client sends an inline video this way when every
    scorer of the pool picks frames, so only the frames that will be scored cross the wire (as when the
    framework slices `generated_output[:, indices]` in its rollout process)."""
    frames: torch.Tensor
    total: int
    indices: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return self.frames.numel() * self.frames.element_size()


def union_indices(total: int, frame_counts: list[int | None]) -> list[int]:
    """The frames any of several scorers picks (each with its own num_frames), ascending."""
    return sorted({i for k in frame_counts for i in frame_indices(total, k)})


def picked_frames(shape: tuple[int, ...], frame_counts: list[int | None] | None) -> list[int] | None:
    """The frames of a stored (C, F, H, W) output its scorers pick, when that is fewer than all of them: what a
    ranged read fetches. None: read it whole (an image, scorers that need whole outputs, or every frame)."""
    if frame_counts is None or len(shape) != 4:
        return None
    idx = union_indices(shape[1], frame_counts)
    return idx if len(idx) < shape[1] else None


def frame_ranges(shape: tuple[int, ...], itemsize: int, indices: list[int]) -> list[tuple[int, int, int]]:
    """(dst, src, size) byte ranges that read frames `indices` (ascending) of a contiguous (C, F, H, W) tensor
    into a contiguous (C, len(indices), H, W) one: frame f of channel c starts at (c * F + f) * H * W * itemsize;
    consecutive frames are one range, so k frames are at most C x k ranges."""
    c, f, h, w = shape
    frame = h * w * itemsize
    runs: list[tuple[int, int]] = []  # (first frame, count)
    for i in indices:
        if runs and runs[-1][0] + runs[-1][1] == i:
            runs[-1] = (runs[-1][0], runs[-1][1] + 1)
        else:
            runs.append((i, 1))
    out, dst = [], 0
    for ch in range(c):
        for first, n in runs:
            out.append((dst, (ch * f + first) * frame, n * frame))
            dst += n * frame
    return out


def subset(video: torch.Tensor, frame_counts: list[int | None]) -> torch.Tensor | FrameSubset:
    """A (C, F, H, W) video cut to the frames its scorers pick; the video itself when that is every frame (or
    it is an image)."""
    if video.dim() != 4:
        return video
    idx = union_indices(video.shape[1], frame_counts)
    if len(idx) == video.shape[1]:
        return video
    return FrameSubset(video[:, idx].contiguous(), video.shape[1], tuple(idx))


def single_frame(output, who: str, refused: type[Exception] = ValueError, rgb: bool = False) -> torch.Tensor:
    """The one frame (C, H, W) of an image output, as sent: (C, H, W), (C, 1, H, W) or a FrameSubset of one frame.
    `refused(...)` names `who` for a video (more than one frame), another shape, or (`rgb`) not 3 channels: the
    images-only scorers refuse that sample with it."""
    if isinstance(output, FrameSubset):
        frames, total = output.frames, output.total
    else:
        frames = output if output.dim() == 4 else output.unsqueeze(1) if output.dim() == 3 else None
        if frames is None:
            raise refused(f"{who} expects an image (C,H,W) or (C,1,H,W), got shape {tuple(output.shape)}")
        total = frames.shape[1]
    if total != 1:
        raise refused(f"{who} scores images: this output has {total} frames")
    if rgb and frames.shape[0] != 3:
        raise refused(f"{who} scores RGB images: this output has {frames.shape[0]} channels")
    return frames[:, 0]


def inline_bytes(output) -> int:
    """Bytes of an inline output sent to a worker (0 for a stored output, which the worker reads itself)."""
    if isinstance(output, FrameSubset):
        return output.nbytes
    if isinstance(output, torch.Tensor):
        return output.numel() * output.element_size()
    return 0


def pick_frames(output: torch.Tensor | FrameSubset, num_frames: int | None,
                quantise: str = "truncate") -> torch.Tensor:
    """Frames of an output as uint8 (F, H, W, C). A video is (C, F, H, W); an image (C, H, W) is one frame; a
    FrameSubset gives the frames the rule picks from the whole video it came from. Frames are picked before
    quantising, so only the picked frames are converted (and the [0, 1] test looks at the picked frames, as it
    does when the rollout process picks them inline); `quantise` is the scorer's (see to_uint8)."""
    if isinstance(output, FrameSubset):
        want = frame_indices(output.total, num_frames)
        at = {f: j for j, f in enumerate(output.indices)}
        missing = [f for f in want if f not in at]
        if missing:
            raise ValueError(f"frames {missing} of {output.total} were not sent (sent {list(output.indices)})")
        return to_uint8(output.frames[:, [at[f] for f in want]], quantise).permute(1, 2, 3, 0).contiguous()
    if output.dim() == 3:
        output = output.unsqueeze(1)
    if output.dim() != 4:
        raise ValueError(f"expected an image (C,H,W) or a video (C,F,H,W), got shape {tuple(output.shape)}")
    idx = frame_indices(output.shape[1], num_frames)
    picked = output[:, idx]
    return to_uint8(picked, quantise).permute(1, 2, 3, 0).contiguous()
