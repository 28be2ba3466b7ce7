"""Every blocking finding the CRD cannot express (the ones it can are rejected at admission:
tests/integration/test_admission.py) blocks on the real control plane: the pool reports it (InvalidSpec, or Degraded for
placement), posts a Warning event, and no worker pod is ever created, under the operator's own identity.
The status write comes after the pod decisions in the same reconcile, so once the condition shows, any pod
the operator was going to create would already exist."""
from __future__ import annotations

import pytest

from tests.conftest import wait_for
from tests.factories import pool_manifest

W = {"name": "worker"}
PSS, OWNED = "ForbiddenPodSetting", "OwnedPodField"
SIDE = {"name": "side", "image": "rewardpool-worker:test"}
CASES = {
    "unknown-scorer": ({"scorer": {"name": "pikscore"}}, "InvalidSpec", "UnknownScorer"),
    "sys-admin": ({"podTemplate": {"spec": {"containers": [{**W, "securityContext": {
        "capabilities": {"add": ["SYS_ADMIN", "NET_ADMIN"]}}}]}}}, "InvalidSpec", PSS),
    "selinux": ({"podTemplate": {"spec": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}}},
                "InvalidSpec", PSS),
    "probe-host": ({"podTemplate": {"spec": {"containers": [{**SIDE, "readinessProbe": {
        "tcpSocket": {"port": 80, "host": "10.0.0.1"}}}]}}}, "InvalidSpec", PSS),
    "restricted-escalation": ({"podSecurity": "restricted", "podTemplate": {"spec": {"containers": [{
        **W, "securityContext": {"allowPrivilegeEscalation": True}}]}}}, "InvalidSpec", PSS),
    "no-ipc-lock": ({"podTemplate": {"spec": {"containers": [{**W, "securityContext": {
        "capabilities": {"drop": ["IPC_LOCK"]}}}]}}}, "InvalidSpec", OWNED),
    "projected-token": ({"podTemplate": {"spec": {"volumes": [{"name": "t", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}]}}]}}}, "InvalidSpec", OWNED),
    "memory-limit": ({"resources": {"limits": {"memory": "1Gi"}}}, "InvalidSpec", "MemoryLimitTooSmall"),
    "too-big": ({"sizing": {"samplesPerRollout": 64, "outputBytesPerSample": "40G"}}, "Degraded", "WorkersDoNotFit"),
    "restart-policy": ({"podTemplate": {"spec": {"restartPolicy": "Never"}}}, "InvalidSpec", OWNED),
    "worker-command": ({"podTemplate": {"spec": {"containers": [{**W, "command": ["sh"]}]}}}, "InvalidSpec", OWNED),
}


@pytest.fixture(scope="module")
def blocked(api, operator):
    """All the blocked pools at once, in one namespace (the operator reconciles them in parallel)."""
    from kubernetes import client

    from tests.factories import Pools

    ns = "blocked-findings"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": ns}})
    pools = Pools(api, ns)
    for name, (over, _, _) in CASES.items():
        pools.create(pool_manifest(name, replicas=2, **over))
    yield pools
    core.delete_namespace(ns)


@pytest.mark.parametrize("name", list(CASES))
def test_blocking_finding_creates_no_pods(blocked, name):
    _, ctype, reason = CASES[name]
    c = wait_for(lambda: (x := blocked.condition(name, ctype)) and x["status"] == "True" and x, 60,
                 what=f"{ctype} on {name}")
    assert c["reason"] == reason, c
    assert blocked.pods(name, include_terminating=True) == []
    assert blocked.condition(name, "Ready")["status"] == "False"
    assert blocked.condition(name, "Progressing")["reason"] == "Blocked"
    assert ("Warning", reason) in [(t, r) for t, r, _ in blocked.events(name)]
