"""A fast non-neural scorer for tests and demos: the mean brightness of the picked frames, in [0, 1]."""
from __future__ import annotations

import torch

from ..frames import pick_frames


class MeanIntensityScorer:
    picks_frames = True  # looks only at pick_frames(output, num_frames)
    quantise = "truncate"

    def __init__(self, num_frames: int | None = None):
        self.num_frames = num_frames

    def score_batch(self, outputs: list[torch.Tensor], prompts: list[str]) -> list[float]:
        return [float(pick_frames(o, self.num_frames, self.quantise).float().mean() / 255.0) for o in outputs]
