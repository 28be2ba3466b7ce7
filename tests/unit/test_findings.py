"""Every finding that must stop worker creation does (the decision, pure), and the ones that must not,
don't. The integration test (tests/integration/test_blocking.py) proves the same on the real control plane."""
import pytest

from rewardpool_operator import sizing, validate
from tests.unit.test_builders import pool

NODE = {"metadata": {"name": "n"}, "status": {"allocatable": {"memory": "2Ti", "rdma/rdma_shared_device_a": "4"}}}


def findings(**spec):
    p = pool(**spec)
    return validate.findings(p.spec, sizing.compute(p.spec), [NODE])


def worker(**sc):
    return {"spec": {"containers": [{"name": "worker", "securityContext": sc}]}}


BLOCKING = {
    "unknown scorer": ({"scorer": {"name": "pikscore"}}, "UnknownScorer"),
    "privileged": (worker(privileged=True), "ForbiddenPodSetting"),
    "privilege escalation": (worker(allowPrivilegeEscalation=True), "ForbiddenPodSetting"),
    "SYS_ADMIN": (worker(capabilities={"add": ["SYS_ADMIN", "NET_ADMIN"]}), "ForbiddenPodSetting"),
    "IPC_LOCK dropped by add": (worker(capabilities={"add": []}), "ForbiddenPodSetting"),
    "IPC_LOCK dropped by drop": (worker(capabilities={"drop": ["IPC_LOCK"]}), "ForbiddenPodSetting"),
    "sidecar privileged": ({"spec": {"containers": [{"name": "side", "image": "x",
                                                      "securityContext": {"privileged": True}}]}},
                           "ForbiddenPodSetting"),
    "init container capability": ({"spec": {"initContainers": [{"name": "i", "image": "x", "securityContext": {
        "capabilities": {"add": ["NET_RAW"]}}}]}}, "ForbiddenPodSetting"),
    "hostNetwork": ({"spec": {"hostNetwork": True}}, "ForbiddenPodSetting"),
    "hostPID": ({"spec": {"hostPID": True}}, "ForbiddenPodSetting"),
    "hostIPC": ({"spec": {"hostIPC": True}}, "ForbiddenPodSetting"),
    "hostPath": ({"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}}, "ForbiddenPodSetting"),
    "serviceAccountName": ({"spec": {"serviceAccountName": "admin"}}, "ForbiddenPodSetting"),
    "automount token": ({"spec": {"automountServiceAccountToken": True}}, "ForbiddenPodSetting"),
    "nodeName": ({"spec": {"nodeName": "n"}}, "ForbiddenPodSetting"),
    "procMount": (worker(procMount="Unmasked"), "ForbiddenPodSetting"),
    "restartPolicy (not allow-listed)": ({"spec": {"restartPolicy": "Never"}}, "ForbiddenPodSetting"),
    "hostUsers (not allow-listed)": ({"spec": {"hostUsers": True}}, "ForbiddenPodSetting"),
    "worker command": ({"spec": {"containers": [{"name": "worker", "command": ["sh"]}]}}, "ForbiddenPodSetting"),
    "worker resources": ({"spec": {"containers": [{"name": "worker", "resources": {"limits": {"memory": "1Gi"}}}]}},
                         "ForbiddenPodSetting"),
    "sysctls": ({"spec": {"securityContext": {"sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]}}},
                "ForbiddenPodSetting"),
    "pool label": ({"metadata": {"labels": {"rewardpool.io/pool": "other"}}}, "ReservedLabel"),
    "hash label": ({"metadata": {"labels": {"rewardpool.io/template-hash": "x"}}}, "ReservedLabel"),
    "component label": ({"metadata": {"labels": {"app.kubernetes.io/component": "x"}}}, "ReservedLabel"),
    "drain annotation": ({"metadata": {"annotations": {"rewardpool.io/drain-requested-at": "now"}}},
                         "ReservedAnnotation"),
}


@pytest.mark.parametrize("name", list(BLOCKING))
def test_blocking_finding_blocks(name):
    over, reason = BLOCKING[name]
    if "scorer" in over:
        found = findings(**over)
    else:
        found = findings(podTemplate=over)
    hits = [p for p in found if p.reason == reason]
    assert hits and all(p.blocking for p in hits), found
    assert validate.blocks_workers(found)


def test_memory_limit_below_the_sizing_blocks():
    found = findings(resources={"limits": {"memory": "1Gi"}})
    assert [p.reason for p in found if p.blocking] == ["MemoryLimitTooSmall"]


def test_workers_that_fit_no_node_block():
    p = pool()
    found = validate.findings(p.spec, sizing.compute(p.spec), [])
    assert [p.reason for p in found if p.blocking] == ["WorkersDoNotFit"]
    small = {"metadata": {"name": "s"}, "status": {"allocatable": {"memory": "1Gi", "rdma/rdma_shared_device_a": "1"}}}
    assert validate.blocks_workers(validate.findings(p.spec, sizing.compute(p.spec), [small]))


@pytest.mark.parametrize("over", [
    {"spec": {"containers": [{"name": "worker", "env": [{"name": "X", "value": "1"}],
                              "securityContext": {"capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]}}}]}},
    {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}], "priorityClassName": "high"}},
    {"spec": {"containers": [{"name": "side", "image": "busybox", "securityContext": {"privileged": False}}]}},
    {"metadata": {"labels": {"team": "rl"}, "annotations": {"prometheus.io/scrape": "true"}}},
], ids=["worker env", "tolerations", "unprivileged sidecar", "own labels"])
def test_allowed_template_changes_do_not_block(over):
    assert not validate.blocks_workers(findings(podTemplate=over))


def test_advisory_findings_do_not_block():
    found = findings(store={"master": "mc:50051", "segmentSize": "1Mi", "devices": ["mlx5_0"]})
    assert [p.reason for p in found] == ["SegmentTooSmall"] and not validate.blocks_workers(found)
    assert not validate.blocks_workers(findings(network={}))  # NoRoceNetwork: advisory
