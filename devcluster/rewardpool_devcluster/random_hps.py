"""HPS checkpoints built locally with random weights through open_clip's own architecture code (nothing is
downloaded): `vit-h-14` is HPS v2's real architecture (open_clip's ViT-H-14: timings, memory and code paths of
the real model, not its scores); `tiny` is a small open_clip config that two cores score quickly, written
next to its weights as `hps-tiny.json` (the hps scorer registers a directory's `<architecture>.json`).
A directory is laid out as the hps scorer loads it: the state dict in HPS's file name for the version."""
from __future__ import annotations

import json
from pathlib import Path

from rewardpool_worker.scorers.hps import CHECKPOINTS

TINY = "hps-tiny"
TINY_CONFIG = {
    "embed_dim": 64,
    "vision_cfg": {"image_size": 224, "layers": 2, "width": 128, "head_width": 64, "patch_size": 32},
    "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 128, "heads": 2, "layers": 2},
}
ARCHITECTURES = {"tiny": TINY, "vit-h-14": "ViT-H-14"}


def build(path: Path, size: str = "tiny", seed: int = 0, version: str = "v2.1") -> tuple[Path, str]:
    """Write an HPS model directory to `path`; returns it and the architecture name (the scorer's
    `args.architecture`)."""
    import open_clip
    import torch

    architecture = ARCHITECTURES[size]
    path.mkdir(parents=True, exist_ok=True)
    if size == "tiny":
        config = path / f"{TINY}.json"
        config.write_text(json.dumps(TINY_CONFIG))
        open_clip.add_model_config(config)
    torch.manual_seed(seed)
    model = open_clip.create_model(architecture, pretrained=None, precision="amp", jit=False, output_dict=True)
    # as HPS's released files: {"state_dict": ...}
    torch.save({"state_dict": model.state_dict()}, path / CHECKPOINTS[version])
    return path, architecture
