"""Scorers: the interface (`base.Scorer`), the built-ins (one module each, listed in the contract's
`BUILTIN_SCORERS`), and how a worker builds what it hosts. Custom scorers are named by import path
`package.module:Class`. `build_scorer(ScorerConfig)` is the one way a scorer is built; `build_scorers(WorkerConfig)`
builds one scorer, or a weighted mixture of several that score the same read (`mixture.py`)."""
from __future__ import annotations

import importlib
import inspect
import os

from ..contract import BUILTIN_SCORERS, SECRET_ARGS, ScorerConfig, WorkerConfig
from .base import Scorer, ScorerOptions, option, warm_up
from .mixture import WeightedMixture

__all__ = ["Scorer", "ScorerOptions", "WeightedMixture", "build_scorer", "build_scorers", "frames_declared",
           "scorer_class", "warm_up"]


def scorer_class(ref: str):
    """A built-in's class by name (imported only when asked for), else `package.module:Class`."""
    builtin = BUILTIN_SCORERS.get(ref)
    module, sep, name = (builtin.cls if builtin else ref).partition(":")
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
    """Instantiate one configured scorer, built-in or custom alike: it gets `args` plus model_path,
    processor_path (default model_path), device (resolved: cpu or cuda), num_frames, dtype and
    frames_per_forward, each when its constructor accepts it (and, for a scorer whose engine the pool hosts,
    base_url, model and hosted: it must accept them). `args` must all be accepted: a misspelt one is an
    error, not ignored."""
    from .device import resolve_device

    cls = scorer_class(cfg.ref)
    standard = {"model_path": cfg.model_path, "device": resolve_device(cfg.device), "num_frames": cfg.num_frames,
                "dtype": cfg.dtype, "frames_per_forward": cfg.frames_per_forward,
                "processor_path": cfg.processor_path or cfg.model_path}
    if cfg.engine is not None:  # a judge the pool hosts: pointed at its engine, never at a URL in args
        standard.update(base_url=cfg.engine.url, model=cfg.engine.model, hosted=cfg.engine.kind)
        # a whole batch in flight at once unless args say otherwise: the engine's scheduler batches what its KV
        # cache holds and queues the rest, so no request it could have batched waits here to be sent alone
        if "concurrency" not in cfg.args:
            standard["concurrency"] = cfg.batch_size
    clash = set(cfg.args) & set(standard)
    if clash:
        raise ValueError(f"{cfg.ref}: args {sorted(clash)} are set by the pool (scorer fields), not in args")
    secret = set(cfg.args) & SECRET_ARGS
    if secret:
        raise ValueError(f"{cfg.ref}: args {sorted(secret)} would put a secret in the pool's spec: name a Secret in "
                         "apiKeySecret instead")
    unknown = set(cfg.args) - set(_accepted(cls, dict(cfg.args)))
    if unknown:
        raise TypeError(f"{cfg.ref}: its constructor takes no argument(s) {sorted(unknown)} given in args")
    if cfg.api_key_env:
        if "api_key" not in _accepted(cls, {"api_key": None}):
            raise TypeError(f"{cfg.ref}: the pool names an apiKeySecret but its constructor takes no api_key")
        key = os.environ.get(cfg.api_key_env)
        if not key:
            raise ValueError(f"{cfg.ref}: {cfg.api_key_env} (from the pool's apiKeySecret) is empty or unset")
        standard["api_key"] = key
    if cfg.engine is not None and {"base_url", "model", "hosted"} - set(_accepted(cls, standard)):
        raise TypeError(f"{cfg.ref}: the pool hosts an engine for it, but its constructor takes no base_url, model "
                        "and hosted (a judge such as openai-judge does)")
    return cls(**cfg.args, **_accepted(cls, standard))


def build_scorers(cfg: WorkerConfig):
    """What a worker hosts: `scorer` alone, or the weighted mixture of `scorers`."""
    if not cfg.scorers:
        return build_scorer(cfg.scorer)
    return WeightedMixture([(c.component, c.weight, build_scorer(c)) for c in cfg.scorers],
                           optional={c.component for c in cfg.scorers if not c.required})


def frames_declared(scorer) -> list[int] | None:
    """The num_frames of each scorer a worker hosts (a mixture's components) when every one picks frames with a
    count set; None when any needs whole outputs (then inline outputs are sent whole)."""
    parts = [s for _, _, s in scorer.components] if isinstance(scorer, WeightedMixture) else [scorer]
    counts = [option(s, "num_frames") if option(s, "picks_frames") else None for s in parts]
    return None if any(k is None for k in counts) else counts
