"""The inference engines the pool runs beside this worker for its judges (a scorer's `engine`): whether each
serves its model. The entrypoint waits on this before it starts the actor (an engine takes seconds to minutes to
load its weights; the worker says so instead of building its actor again and again), and watches it once Ready,
so a crashed or restarting engine takes the worker out of Ready until it is back."""
from __future__ import annotations

import json
import logging
import threading
import urllib.error
import urllib.request

from ..contract import WorkerConfig

WATCH_SECONDS = 2.0  # how often a Ready worker asks its engines
log = logging.getLogger("rewardpool.worker")


def engine_problem(url: str, model: str, timeout: float = 2.0) -> str | None:
    """Why the engine at `url` (its /v1 URL) cannot judge with `model` yet, or None when it lists it."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=timeout) as r:
            served = [str(m.get("id")) for m in json.loads(r.read()).get("data", [])]
    except urllib.error.HTTPError as e:
        return f"the engine at {url} answers HTTP {e.code} to GET /models"
    except (OSError, ValueError, AttributeError) as e:
        return f"the engine at {url} does not answer yet ({type(e).__name__}: {str(e)[:200]})"
    if model not in served:
        return f"the engine at {url} serves {served}, not the model {model!r}"
    return None


def engine_problems(cfg: WorkerConfig) -> list[str]:
    """One line per hosted engine that does not serve its model, naming the component."""
    out = []
    for c in cfg.components:
        if c.engine is not None:
            why = engine_problem(c.engine.url, c.engine.model)
            if why:
                out.append(f"{c.component}: {why}")
    return out


def watch_engines(cfg: WorkerConfig, state, stop: threading.Event) -> threading.Thread | None:
    """A thread that keeps `state.engine_down` to the engines' problems (None while they all serve)."""
    if not any(c.engine for c in cfg.components):
        return None

    def loop():
        while not stop.wait(WATCH_SECONDS):
            was, state.engine_down = state.engine_down, "; ".join(engine_problems(cfg)) or None
            if state.engine_down and not was:
                log.warning("engine down, not Ready until it serves again: %s", state.engine_down)
            elif was and not state.engine_down:
                log.info("engine serves again")
    t = threading.Thread(target=loop, daemon=True, name="engine-watch")
    t.start()
    return t
