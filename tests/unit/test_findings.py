"""Every finding that must stop worker creation does (the decision, pure), and the ones that must not,
don't. The integration test (tests/integration/test_blocking.py) proves the same on the real control plane."""
import pytest

from rewardpool_operator.pool import builders, podsecurity, sizing, validate
from rewardpool_operator.api.findings import blocks_workers
from tests.factories import pool

NODE = {"metadata": {"name": "n"}, "status": {"allocatable": {"memory": "2Ti", "rdma/rdma_shared_device_a": "4"}}}


def findings(nodes=(NODE,), **spec):
    p = pool(**spec)
    s = sizing.compute(p.spec)
    return validate.findings(p.spec, s, list(nodes), builders.pod_template(p, s))


def worker(**sc):
    return {"spec": {"containers": [{"name": "worker", "securityContext": sc}]}}


def side(**c):
    return {"spec": {"containers": [{"name": "side", "image": "x", **c}]}}


def handler_at(where: str, kind: str, host: str | None) -> dict:
    """A sidecar's fields with one probe or lifecycle handler of `kind`, aimed at `host` (None: no host)."""
    action = {"path": "/", "port": 80} if kind == "httpGet" else {"port": 80}
    handler = {kind: {**action, **({"host": host} if host else {})}}
    if where in ("postStart", "preStop"):
        return {"lifecycle": {where: handler}}
    return {where: handler}


HANDLER_PLACES = ("livenessProbe", "readinessProbe", "startupProbe", "postStart", "preStop")
PSS, OWNED = "ForbiddenPodSetting", "OwnedPodField"
BLOCKING = {
    "unknown scorer": ({"scorer": {"name": "pikscore"}}, "UnknownScorer"),
    "privileged": (worker(privileged=True), PSS),
    "SYS_ADMIN": (worker(capabilities={"add": ["SYS_ADMIN", "NET_ADMIN"]}), PSS),
    "IPC_LOCK dropped by drop": (worker(capabilities={"drop": ["IPC_LOCK"]}), OWNED),
    "sidecar privileged": (side(securityContext={"privileged": True}), PSS),
    "init container capability": ({"spec": {"initContainers": [{"name": "i", "image": "x", "securityContext": {
        "capabilities": {"add": ["NET_RAW"]}}}]}}, PSS),
    "sidecar IPC_LOCK (the exception is the worker's)": (side(securityContext={"capabilities": {"add": ["IPC_LOCK"]}}),
                                                        PSS),
    "hostNetwork": ({"spec": {"hostNetwork": True}}, PSS),
    "hostPID": ({"spec": {"hostPID": True}}, PSS),
    "hostIPC": ({"spec": {"hostIPC": True}}, PSS),
    "hostPath": ({"spec": {"volumes": [{"name": "h", "hostPath": {"path": "/"}}]}}, PSS),
    "sidecar hostPort": (side(ports=[{"containerPort": 80, "hostPort": 80}]), PSS),
    "worker seccomp Unconfined": (worker(seccompProfile={"type": "Unconfined"}), PSS),
    "pod seccomp Unconfined": ({"spec": {"securityContext": {"seccompProfile": {"type": "Unconfined"}}}}, PSS),
    "pod AppArmor Unconfined": ({"spec": {"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}}, PSS),
    "sidecar AppArmor Unconfined": (side(securityContext={"appArmorProfile": {"type": "Unconfined"}}), PSS),
    "AppArmor annotation": ({"metadata": {"annotations": {
        "container.apparmor.security.beta.kubernetes.io/worker": "unconfined"}}}, PSS),
    "SELinux custom type": ({"spec": {"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}}, PSS),
    "sidecar SELinux user": (side(securityContext={"seLinuxOptions": {"user": "system_u"}}), PSS),
    "procMount": (worker(procMount="Unmasked"), PSS),
    "sidecar probe host": (side(livenessProbe={"httpGet": {"path": "/", "port": 80, "host": "10.0.0.1"}}), PSS),
    **{f"sidecar {where} {kind}.host": (side(**handler_at(where, kind, "10.0.0.1")), PSS)
       for where in HANDLER_PLACES for kind in ("httpGet", "tcpSocket")},
    "unsafe sysctl": ({"spec": {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}}, PSS),
    "Windows host process": ({"spec": {"securityContext": {"windowsOptions": {"hostProcess": True}}}}, PSS),
    "projected token": ({"spec": {"volumes": [{"name": "t", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}}]}}]}}, OWNED),
    "serviceAccountName": ({"spec": {"serviceAccountName": "admin"}}, OWNED),
    "automount token": ({"spec": {"automountServiceAccountToken": True}}, OWNED),
    "nodeName": ({"spec": {"nodeName": "n"}}, OWNED),
    "restartPolicy": ({"spec": {"restartPolicy": "Never"}}, OWNED),
    "grace period": ({"spec": {"terminationGracePeriodSeconds": 1}}, OWNED),
    "worker command": ({"spec": {"containers": [{"name": "worker", "command": ["sh"]}]}}, OWNED),
    "worker probe": ({"spec": {"containers": [{"name": "worker", "readinessProbe": {"exec": {"command": ["true"]}}}]}},
                     OWNED),
    "worker resources": ({"spec": {"containers": [{"name": "worker", "resources": {"limits": {"memory": "1Gi"}}}]}},
                         OWNED),
    "worker contract env": ({"spec": {"containers": [{"name": "worker", "env": [
        {"name": "REWARDPOOL_WORKER_CONFIG", "value": "{}"}]}]}}, OWNED),
    "owned volume": ({"spec": {"volumes": [{"name": "dshm", "emptyDir": {}}]}}, OWNED),
    "mount over /dev/shm": ({"spec": {"containers": [{"name": "worker", "volumeMounts": [
        {"name": "mine", "mountPath": "/dev/shm"}]}]}}, OWNED),
    "nameless container": ({"spec": {"containers": [{"image": "x"}]}}, OWNED),
    "init container named worker": ({"spec": {"initContainers": [{"name": "worker", "image": "x"}]}}, OWNED),
    "pool label": ({"metadata": {"labels": {"rewardpool.io/pool": "other"}}}, "ReservedLabel"),
    "hash label": ({"metadata": {"labels": {"rewardpool.io/template-hash": "x"}}}, "ReservedLabel"),
    "component label": ({"metadata": {"labels": {"app.kubernetes.io/component": "x"}}}, "ReservedLabel"),
    "drain annotation": ({"metadata": {"annotations": {"rewardpool.io/drain-requested-at": "now"}}},
                         "ReservedAnnotation"),
}
# Refused only when the pool asks for the restricted level.
RESTRICTED = {
    "sidecar may escalate": side(securityContext={"capabilities": {"drop": ["ALL"]}}),
    "sidecar keeps capabilities": side(securityContext={"allowPrivilegeEscalation": False}),
    "worker may escalate": worker(allowPrivilegeEscalation=True),
    "pod runs as root": {"spec": {"securityContext": {"runAsUser": 0}}},
    "runAsNonRoot false": {"spec": {"securityContext": {"runAsNonRoot": False}}},
    "nfs volume": {"spec": {"volumes": [{"name": "n", "nfs": {"server": "s", "path": "/"}}]}},
    "sidecar NET_RAW": side(securityContext={"allowPrivilegeEscalation": False,
                                             "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}),
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
    assert blocks_workers(found)


@pytest.mark.parametrize("where", HANDLER_PLACES)
@pytest.mark.parametrize("kind", ["httpGet", "tcpSocket"])
def test_a_handler_without_a_host_is_allowed_at_both_levels(where, kind):
    """The other side of the host check: the same handler aimed at the pod itself blocks nothing."""
    fields = {**handler_at(where, kind, None), "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"}}}
    for level in ("baseline", "restricted"):
        assert not [p for p in findings(podTemplate=side(**fields), podSecurity=level, store={
            "master": "127.0.0.1:50051", "protocol": "tcp"}) if p.blocking], (where, kind, level)


@pytest.mark.parametrize("name", list(RESTRICTED))
def test_restricted_refuses_what_baseline_allows(name):
    assert not blocks_workers(findings(podTemplate=RESTRICTED[name]))
    found = findings(podTemplate=RESTRICTED[name], podSecurity="restricted")
    assert [p.reason for p in found if p.blocking] and {p.reason for p in found if p.blocking} == {PSS}, found


def test_the_operators_own_pod_meets_both_levels_but_for_ipc_lock():
    for level in ("baseline", "restricted"):
        p = pool(podSecurity=level)
        s = sizing.compute(p.spec)
        pod = builders.pod_template(p, s)
        found = validate.findings(p.spec, s, [NODE], pod)
        assert [(x.reason, x.blocking) for x in found] == (
            [] if level == "baseline" else [("RestrictedCannotPinMemory", False)])  # this pool's store is rdma
        (v,) = podsecurity.violations(pod, level)  # nothing excepted: the worker's IPC_LOCK is all there is
        assert v.where == 'container "worker"' and "IPC_LOCK" in v.field
    ctx = builders.pod_template(p, s)["spec"]["securityContext"]
    assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] == ctx["runAsGroup"] == 65532
    # the control token's volume (0440, group-readable) is group-owned by the worker's own group: it can read it
    control = next(v for v in builders.pod_template(p, s)["spec"]["volumes"] if v["name"] == "control")
    assert ctx["fsGroup"] == ctx["runAsGroup"] and control["secret"]["defaultMode"] & 0o040
    tcp = pool(podSecurity="restricted", store={"master": "mc:50051", "protocol": "tcp"})
    assert "RestrictedCannotPinMemory" not in [x.reason for x in validate.findings(
        tcp.spec, sizing.compute(tcp.spec), [NODE], builders.pod_template(tcp, sizing.compute(tcp.spec)))]


def test_a_finding_names_the_level_the_check_and_the_field():
    (p,) = [x for x in findings(podTemplate=side(ports=[{"containerPort": 80, "hostPort": 8080}])) if x.blocking]
    assert "Pod Security 'baseline'" in p.message and "hostPorts" in p.message and 'container "side"' in p.message
    assert "8080" in p.message
    (p,) = [x for x in findings(podTemplate={"spec": {"containers": [{"name": "worker", "ports": []}]}}) if x.blocking]
    assert p.reason == OWNED and "containers[0] (worker).ports" in p.message


def test_memory_limit_below_the_sizing_blocks():
    found = findings(resources={"limits": {"memory": "1Gi"}})
    assert [p.reason for p in found if p.blocking] == ["MemoryLimitTooSmall"]


def test_workers_that_fit_no_node_block():
    assert [p.reason for p in findings(nodes=()) if p.blocking] == ["WorkersDoNotFit"]
    small = {"metadata": {"name": "s"}, "status": {"allocatable": {"memory": "1Gi", "rdma/rdma_shared_device_a": "1"}}}
    assert blocks_workers(findings(nodes=(small,)))


@pytest.mark.parametrize("over", [
    {"spec": {"containers": [{"name": "worker", "env": [{"name": "X", "value": "1"}],
                              "securityContext": {"capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]}}}]}},
    {"spec": {"containers": [{"name": "worker", "securityContext": {"capabilities": {"add": []}}}]}},
    {"spec": {"containers": [{"name": "worker", "securityContext": {"allowPrivilegeEscalation": True,
                                                                    "capabilities": {"add": ["CHOWN"]}}}]}},
    {"spec": {"tolerations": [{"key": "gpu", "operator": "Exists"}], "priorityClassName": "high"}},
    {"spec": {"containers": [{"name": "side", "image": "busybox", "securityContext": {"privileged": False}}]}},
    {"metadata": {"labels": {"team": "rl"}, "annotations": {"prometheus.io/scrape": "true"}}},
    {"spec": {"securityContext": {"sysctls": [{"name": "net.ipv4.tcp_keepalive_time", "value": "60"}],
                                  "seccompProfile": {"type": "Localhost", "localhostProfile": "w.json"},
                                  "seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"}},
              "hostUsers": False, "shareProcessNamespace": True, "restartPolicy": "Always"}},
    {"spec": {"volumes": [{"name": "models", "persistentVolumeClaim": {"claimName": "m"}}],
              "containers": [{"name": "worker", "volumeMounts": [{"name": "models", "mountPath": "/models"}]}]}},
], ids=["worker env", "worker add [] keeps IPC_LOCK", "baseline allows escalation and CHOWN", "tolerations",
        "unprivileged sidecar", "own labels", "what baseline allows", "a model volume"])
def test_allowed_template_changes_do_not_block(over):
    assert not blocks_workers(findings(podTemplate=over))


def test_the_worker_keeps_ipc_lock_whatever_the_template_adds():
    for add in ([], ["CHOWN"], ["IPC_LOCK", "KILL"]):
        p = pool(podTemplate=worker(capabilities={"add": add}))
        caps = builders.pod_template(p, sizing.compute(p.spec))["spec"]["containers"][0]["securityContext"]
        assert "IPC_LOCK" in caps["capabilities"]["add"] and set(add) <= set(caps["capabilities"]["add"])


def test_advisory_findings_do_not_block():
    found = findings(store={"master": "mc:50051", "segmentSize": "1Mi", "devices": ["mlx5_0"]})
    assert [p.reason for p in found] == ["SegmentTooSmall"] and not blocks_workers(found)
    assert not blocks_workers(findings(network={}))  # NoRoceNetwork: advisory
