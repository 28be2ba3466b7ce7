"""What a training job imports to score outputs through a RewardPool.

- `RewardPoolClient` (blocking.py) and `AsyncRewardPoolClient` (async_client.py): score refs to stored outputs
  or inline tensors; split, spread, retried, per-sample results.
- `HttpRewardPoolClient` (http_client.py): the same calls over HTTP, with no Ray cluster of the pool's; `connect`
  picks the transport.
- `Router` (router.py): the pool's live workers and the choice of one for each batch.
- `Releaser` (releaser.py): removes stored outputs after their last reward, and reads media back.
- `demand.expect` (demand.py): tells the operator how many outputs are coming.
- The errors a call can return or raise (from `rewardpool_worker.errors`)."""
from ..errors import Draining, Overloaded, PoolUnavailable, SampleError, ScorerError
from .async_client import AsyncRewardPoolClient, ScoreReport
from .blocking import RewardPoolClient
from .releaser import ReleaseStats, Releaser
from .router import Router

TRANSPORTS = ("ray", "http")


def connect(pool: str, namespace: str = "default", *, transport: str = "ray", url: str | None = None,
            token: str | None = None, **kw):
    """The pool's asyncio client: over Ray (its workers' actors, in the Ray cluster they joined) or over HTTP (its
    workers from the `<pool>-score` Service's EndpointSlices in a pod that may list them, else `url`, by default the
    Service's in-cluster name). Both have `score`, `score_detailed` and `describe`."""
    if transport == "ray":
        return AsyncRewardPoolClient(pool, namespace, **kw)
    if transport == "http":
        from ..contract import HTTP_PORT, score_service_name
        from .http_client import HttpRewardPoolClient

        url = url or f"http://{score_service_name(pool)}.{namespace}.svc:{HTTP_PORT}"
        return HttpRewardPoolClient(url, token, pool=pool, namespace=namespace, **kw)
    raise ValueError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")


__all__ = ["AsyncRewardPoolClient", "Draining", "Overloaded", "PoolUnavailable", "ReleaseStats", "Releaser",
           "RewardPoolClient", "Router", "SampleError", "ScoreReport", "ScorerError", "connect"]
