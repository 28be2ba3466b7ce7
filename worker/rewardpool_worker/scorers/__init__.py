"""Scorers: anything with `score_batch(outputs, prompts) -> list[float]`. Built-ins by name, custom ones by
import path `package.module:Class`. `build_scorer(ScorerConfig)` is the one way a scorer is built;
`build_scorers(WorkerConfig)` builds what a worker hosts: one scorer, or a weighted mixture of several that
score the same read.

The contract for a custom scorer's `score_batch`: the outputs it receives are views of the worker's
registered read buffer, valid only until `score_batch` returns (the next batch is read into the same memory).
Keep nothing that references them (no tensors, no slices, no `.numpy()` arrays) past the return: copy what
must outlive the call (`t.clone()`). Do not write into them. A scorer that needs a copy anyway can say
`copy_outputs = True` on its class and gets its own copies.

A scorer that looks only at `frames.pick_frames(output, self.num_frames)` says `picks_frames = True`: when every
scorer of a pool does (with num_frames set), the client sends an inline video cut to those frames (a
`frames.FrameSubset`, which `pick_frames` takes like a tensor). Its `quantise` ("truncate", the default, or
"round") is the uint8 conversion it passes to `pick_frames`, as the framework's reward of that kind does."""
from __future__ import annotations

import importlib
import inspect

from ..config import BUILTIN_SCORERS, ScorerConfig, WorkerConfig
from ..device import resolve_device
from .mixture import WeightedMixture


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


def _accepted(cls, offered: dict) -> dict:
    """The keywords of `offered` that the constructor takes (all of them when it takes **kwargs), so a custom
    scorer declares only what it needs and older ones without arguments keep working."""
    params = inspect.signature(cls).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return offered
    return {k: v for k, v in offered.items() if k in params}


def build_scorer(cfg: ScorerConfig):
    """Instantiate one configured scorer. Built-ins take what they use; a custom scorer gets `args` plus
    model_path, processor_path (default model_path), device (resolved: cpu or cuda), num_frames, dtype and
    frames_per_forward, each when its constructor accepts it. `args` must all be accepted: a misspelt one is an
    error, not ignored."""
    cls = scorer_class(cfg.ref)
    if cfg.name == "pickscore":
        return cls(model_path=cfg.model_path, num_frames=cfg.num_frames, device=cfg.device, dtype=cfg.dtype,
                   frames_per_forward=cfg.frames_per_forward, processor_path=cfg.processor_path)
    if cfg.name is not None:
        return cls(num_frames=cfg.num_frames)
    standard = {"model_path": cfg.model_path, "device": resolve_device(cfg.device), "num_frames": cfg.num_frames,
                "dtype": cfg.dtype, "frames_per_forward": cfg.frames_per_forward,
                "processor_path": cfg.processor_path or cfg.model_path}
    clash = set(cfg.args) & set(standard)
    if clash:
        raise ValueError(f"{cfg.ref}: args {sorted(clash)} are set by the pool (scorer fields), not in args")
    unknown = set(cfg.args) - set(_accepted(cls, dict(cfg.args)))
    if unknown:
        raise TypeError(f"{cfg.ref}: its constructor takes no argument(s) {sorted(unknown)} given in args")
    return cls(**cfg.args, **_accepted(cls, standard))


def build_scorers(cfg: WorkerConfig):
    """What a worker hosts: `scorer` alone, or the weighted mixture of `scorers`."""
    if not cfg.scorers:
        return build_scorer(cfg.scorer)
    return WeightedMixture([(c.component, c.weight, build_scorer(c)) for c in cfg.scorers])


def frames_declared(scorer) -> list[int] | None:
    """The num_frames of each scorer a worker hosts (a mixture's components) when every one picks frames with a
    count set; None when any needs whole outputs (then inline outputs are sent whole)."""
    parts = [s for _, _, s in scorer.components] if isinstance(scorer, WeightedMixture) else [scorer]
    counts = [getattr(s, "num_frames", None) if getattr(s, "picks_frames", False) else None for s in parts]
    return None if any(k is None for k in counts) else counts
