"""A tiny CLIP model built locally from a config (no hub download): random weights, a byte-level vocabulary,
the PIL image processor. Real transformers code paths, small enough for CPU tests."""
from __future__ import annotations

import math
from pathlib import Path

from rewardpool_devcluster import random_clip


def build(path: Path, seed: int = 0) -> Path:
    # A trained CLIP's temperature (100), so score differences are as large as a real model's.
    return random_clip.build(path, "tiny", seed=seed, logit_scale=math.log(100.0))
