"""A demand hint finds the cluster through KUBECONFIG as it is when the hint is sent: a training job may set
it after kubernetes_asyncio was imported (which reads it once, at import)."""
from __future__ import annotations

import asyncio

import aiohttp
import kubernetes_asyncio.config  # noqa: F401  imported first, as in any process that already used it
import pytest

from rewardpool_worker.client.demand import expect_async

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_kubeconfig_set_after_import_is_used(tmp_path, monkeypatch):
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("KUBECONFIG", str(path))
    # Nothing listens on 127.0.0.1:9: reaching for it shows the file was read (not a missing-config error).
    with pytest.raises(aiohttp.ClientConnectorError, match="127.0.0.1:9"):
        asyncio.run(expect_async("p", "ns", 1))
