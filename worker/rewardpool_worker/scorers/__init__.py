"""Scorers: anything with `score_batch(outputs, prompts) -> list[float]`. Built-ins by name, custom ones by
import path `package.module:Class`."""
from __future__ import annotations

import importlib

from ..config import BUILTIN_SCORERS, ScorerConfig


def scorer_class(ref: str):
    if ref == "pickscore":
        from .pickscore import PickScoreScorer
        return PickScoreScorer
    if ref == "mean-intensity":
        from .intensity import MeanIntensityScorer
        return MeanIntensityScorer
    module, sep, name = ref.partition(":")
    if not sep:
        raise ValueError(f"unknown scorer {ref!r}: use a built-in ({', '.join(BUILTIN_SCORERS)}) "
                         "or package.module:Class")
    cls = getattr(importlib.import_module(module), name, None)
    if cls is None or not callable(getattr(cls, "score_batch", None)):
        raise ValueError(f"{ref}: no class with a score_batch(outputs, prompts) method")
    return cls


def build_scorer(cfg: ScorerConfig):
    """Instantiate the configured scorer; built-ins take their frame count and model path."""
    cls = scorer_class(cfg.ref)
    kwargs = {}
    if cfg.name is not None:
        kwargs = {"num_frames": cfg.num_frames}
        if cfg.name == "pickscore":
            kwargs["model_path"] = cfg.model_path
    return cls(**kwargs)
