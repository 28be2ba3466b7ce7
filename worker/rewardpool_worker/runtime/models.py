"""The scorers' model files as the worker finds them before it loads them: what is missing (the model volume not
mounted, an empty claim, a wrong subPath), and how many bytes the weights are (the start-up timeline's weight
load). A custom scorer's model path may be a hub id it resolves itself: only the built-in scorers' paths must be
on disk."""
from __future__ import annotations

import os
from pathlib import Path

from ..contract import WorkerConfig

ON_DISK = frozenset({"pickscore", "hps", "ocr"})  # built-in scorers that load their model from model_path


def missing_models(cfg: WorkerConfig) -> list[str]:
    """One line per scorer whose model is not there to load, naming the component and the path."""
    out = []
    for c in cfg.components:
        if c.name not in ON_DISK or not c.model_path:
            continue
        p = Path(c.model_path)
        try:
            if not p.exists():
                out.append(f"{c.component}: {p} does not exist (is the model volume mounted? scorer.model or "
                           "modelPath)")
            elif p.is_dir() and not any(p.iterdir()):
                out.append(f"{c.component}: {p} is empty (the claim or image holds no model files there)")
        except PermissionError as e:
            out.append(f"{c.component}: {p} cannot be read ({e})")
    return out


def weight_bytes(cfg: WorkerConfig) -> int:
    """Bytes of the files under every scorer's model path (0 for a path not on disk)."""
    total = 0
    for root in {Path(c.model_path) for c in cfg.components if c.model_path}:
        if root.is_file():
            total += root.stat().st_size
        elif root.is_dir():
            for dirpath, _, files in os.walk(root):
                total += sum((Path(dirpath) / f).stat().st_size for f in files)
    return total
