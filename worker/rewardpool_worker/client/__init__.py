"""What a training job imports to score outputs through a RewardPool.

- `RewardPoolClient` (blocking.py) and `AsyncRewardPoolClient` (async_client.py): score refs to stored outputs
  or inline tensors; split, spread, retried, per-sample results.
- `Router` (router.py): the pool's live workers and the choice of one for each batch.
- `Releaser` (releaser.py): removes stored outputs after their last reward, and reads media back.
- `demand.expect` (demand.py): tells the operator how many outputs are coming.
- The errors a call can return or raise (from `rewardpool_worker.errors`)."""
from ..errors import Draining, Overloaded, PoolUnavailable, SampleError, ScorerError
from .async_client import AsyncRewardPoolClient, ScoreReport
from .blocking import RewardPoolClient
from .releaser import ReleaseStats, Releaser
from .router import Router

__all__ = ["AsyncRewardPoolClient", "Draining", "Overloaded", "PoolUnavailable", "ReleaseStats", "Releaser",
           "RewardPoolClient", "Router", "SampleError", "ScoreReport", "ScorerError"]
