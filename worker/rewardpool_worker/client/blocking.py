"""`RewardPoolClient`: the blocking client, a thin wrapper over `AsyncRewardPoolClient` (which splits,
dispatches concurrently, retries, applies the deadline and returns per-sample results) running on its own
event loop thread."""
from __future__ import annotations

import asyncio
import threading
from collections import Counter

from .async_client import AsyncRewardPoolClient
from .router import Router


class RewardPoolClient:
    """Blocking client: the same calls as AsyncRewardPoolClient, run on a private event loop thread.
    `score` blocks; `submit` returns a concurrent.futures.Future (no thread per call, no cap)."""

    def __init__(self, pool: str, namespace: str = "default", ray_namespace: str = "rewardpool",
                 refresh_seconds: float = 5.0, attempts: int = 4, batch_size: int | None = None,
                 timeout: float | None = None, **kw):
        self.aio = AsyncRewardPoolClient(pool, namespace, ray_namespace, refresh_seconds=refresh_seconds,
                                         attempts=attempts, batch_size=batch_size, timeout=timeout, **kw)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="rewardpool-client")
        self._thread.start()

    @property
    def router(self) -> Router:
        return self.aio.router

    @property
    def served(self) -> Counter:
        return self.aio.served

    @property
    def retries(self) -> int:
        return self.aio.retries

    @property
    def store_outages(self) -> int:
        return self.aio.store_outages

    @property
    def batch_size(self) -> int | None:
        return self.aio.batch_size

    def refresh(self) -> list[str]:
        return self.router.refresh()

    def members(self) -> list[str]:
        return self.router.members()

    def submit(self, outputs: list, prompts: list[str], **kw):
        """Score in the background; a concurrent.futures.Future of the per-sample results."""
        return asyncio.run_coroutine_threadsafe(self.aio.score(outputs, prompts, **kw), self._loop)

    def submit_detailed(self, outputs: list, prompts: list[str], **kw):
        return asyncio.run_coroutine_threadsafe(self.aio.score_detailed(outputs, prompts, **kw), self._loop)

    def score(self, outputs: list, prompts: list[str], *, timeout: float | None = None,
              raise_errors: bool = False, group: str | None = None) -> list:
        """Scores in input order; a SampleError in the slot of a sample that failed (or raise the first,
        with raise_errors). Past `timeout`, TimeoutError (the remote work is cancelled). One scorer version
        per call, and per `group` while its version has workers."""
        return self.submit(outputs, prompts, timeout=timeout, raise_errors=raise_errors, group=group).result()

    def close(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
