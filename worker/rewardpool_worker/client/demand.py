"""A client's demand hint: "N outputs are coming" (at a rollout's start), written as an annotation on the
RewardPool so the operator's autoscaler grows the pool before the queue builds, and can start a pool that has
no workers at all (no worker, no queue to read). The hint expires on its own (`ttl`); `expect(0)` withdraws
it. The training job's ServiceAccount needs `patch` on `rewardpools` in the pool's namespace."""
from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta, timezone

from ..contract import EXPECTED_OUTPUTS_ANNOTATION, GROUP, PLURAL, VERSION


def hint_value(outputs: int, ttl_seconds: float, now: datetime | None = None) -> str | None:
    if outputs <= 0:
        return None
    until = (now or datetime.now(timezone.utc)) + timedelta(seconds=ttl_seconds)
    return json.dumps({"outputs": int(outputs), "until": until.strftime("%Y-%m-%dT%H:%M:%SZ")})


async def expect_async(pool: str, namespace: str, outputs: int, ttl_seconds: float = 900) -> None:
    from kubernetes_asyncio import client, config

    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()
    else:
        # KUBECONFIG as it is now: kubernetes_asyncio reads it once, when it is first imported
        await config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
    async with client.ApiClient() as api:
        await client.CustomObjectsApi(api).patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, pool,
            {"metadata": {"annotations": {EXPECTED_OUTPUTS_ANNOTATION: hint_value(outputs, ttl_seconds)}}},
            _content_type="application/merge-patch+json")


def expect(pool: str, namespace: str, outputs: int, ttl_seconds: float = 900) -> None:
    """Tell the pool `outputs` outputs are coming within `ttl_seconds` (0 withdraws the hint)."""
    asyncio.run(expect_async(pool, namespace, outputs, ttl_seconds))
