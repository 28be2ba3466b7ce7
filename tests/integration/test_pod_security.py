"""The operator's pod privilege decision, judged by Kubernetes itself: for a generated corpus of podTemplates
(every field the Pod Security Standards name, at pod and container level, on the worker, sidecars and init
containers, mixed with benign fields), the operator refuses a template (at admission, by the CRD's rules, or
with a blocking finding) if and only if the real API server's PodSecurity admission rejects the pod the
operator would create, with the worker's IPC_LOCK (the one exception) taken out, in a namespace that
enforces the pool's level. The oracle is the API server's dry-run create; nothing here restates the standard.
"""
from __future__ import annotations

import copy
import json
import uuid
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from rewardpool_operator.pool import builders, sizing, validate
from rewardpool_operator.api.spec import Pool

G, V, P = "rewardpool.io", "v1alpha1", "rewardpools"
EXAMPLES = 500
CORPUS_SEED = 20261201  # fixed: CI judges the same corpus every run

POOL = {"image": "rewardpool-worker:test", "scorer": {"name": "mean-intensity"},
        "store": {"master": "127.0.0.1:50051", "protocol": "tcp"},
        "sizing": {"samplesPerRollout": 8, "outputBytesPerSample": "10Mi"}}


# ---- the corpus ------------------------------------------------------------------------------------------------
def maybe(strategy):
    return st.one_of(st.none(), strategy)


# Forbidden values are drawn less often than allowed ones, so that most templates reach the operator's own
# checks instead of stopping at the CRD's rules.
profile = st.sampled_from([{"type": "RuntimeDefault"}, {"type": "RuntimeDefault"}, {"type": "Unconfined"},
                           {"type": "Localhost", "localhostProfile": "profiles/worker.json"}])
apparmor = st.sampled_from([{"type": "RuntimeDefault"}, {"type": "RuntimeDefault"}, {"type": "Unconfined"},
                            {"type": "Localhost", "localhostProfile": "k8s-worker"}])
rarely_true = st.sampled_from([False, False, False, True])
selinux = st.sampled_from([{"type": "container_t"}, {"type": "spc_t"}, {"type": "container_engine_t"},
                           {"user": "system_u"}, {"role": "system_r"}, {"level": "s0:c1,c2"}])
capabilities = st.fixed_dictionaries({}, optional={
    "add": st.lists(st.sampled_from(["CHOWN", "NET_BIND_SERVICE", "KILL", "NET_RAW", "SYS_ADMIN", "IPC_LOCK",
                                     "SYS_PTRACE"]), unique=True, max_size=3),
    "drop": st.lists(st.sampled_from(["ALL", "NET_RAW", "KILL"]), unique=True, max_size=2)})


def _compact(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


@st.composite
def security_context(draw, container: bool):
    """Any mix of the standard's fields; half the time starting from what restricted asks for, so the corpus
    has templates each level accepts, not only ones both refuse."""
    base = ({"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True}
            if container and draw(st.booleans()) else {})
    fields = {"seccompProfile": maybe(profile), "appArmorProfile": maybe(apparmor), "seLinuxOptions": maybe(selinux),
              "runAsNonRoot": maybe(st.booleans()), "runAsUser": maybe(st.sampled_from([0, 1000, 65532]))}
    if container:
        fields.update(privileged=maybe(rarely_true), allowPrivilegeEscalation=maybe(st.booleans()),
                      capabilities=maybe(capabilities), procMount=maybe(st.sampled_from(["Default", "Unmasked"])))
    else:
        fields.update(sysctls=maybe(st.lists(st.sampled_from(
            ["kernel.shm_rmid_forced", "net.ipv4.tcp_keepalive_time", "net.ipv4.ip_local_port_range",
             "kernel.msgmax", "net.core.somaxconn"]), unique=True, min_size=1, max_size=2)))
    drawn = _compact({k: draw(v) for k, v in fields.items()})
    if "sysctls" in drawn:
        values = {"net.ipv4.ip_local_port_range": "32768 60999"}
        drawn["sysctls"] = [{"name": n, "value": values.get(n, "1")} for n in drawn["sysctls"]]
    return {**base, **drawn}


host = st.sampled_from(["", "127.0.0.1", "10.1.2.3"])


@st.composite
def sidecar(draw, name: str, port: int):
    c = {"name": name, "image": "rewardpool-worker:test"}
    if draw(st.booleans()):
        c["securityContext"] = draw(security_context(True))
    if draw(st.booleans()):
        c["ports"] = [{"containerPort": port, "hostPort": draw(st.sampled_from([0, 0, port]))}]
    h = draw(maybe(host))
    if h is not None:
        kind = draw(st.sampled_from(["livenessProbe", "readinessProbe", "startupProbe", "preStop"]))
        handler = draw(st.sampled_from([{"httpGet": {"path": "/", "port": port, "host": h}},
                                        {"tcpSocket": {"port": port, "host": h}}]))
        if not h:
            handler = {k: {kk: vv for kk, vv in v.items() if kk != "host"} for k, v in handler.items()}
        if kind == "preStop":
            c["lifecycle"] = {"preStop": handler}
        else:
            c[kind] = handler
    if draw(st.booleans()):
        c["env"] = [{"name": "SIDE_MODE", "value": "on"}]
    return c


volume = st.sampled_from([
    {"name": "host", "hostPath": {"path": "/var/tmp"}},
    {"name": "scratch", "emptyDir": {}},
    {"name": "cache", "emptyDir": {"medium": "Memory"}},
    {"name": "creds", "secret": {"secretName": "s"}},
    {"name": "cfg", "configMap": {"name": "c"}},
    {"name": "models", "persistentVolumeClaim": {"claimName": "models"}},
    {"name": "shared", "nfs": {"server": "10.0.0.1", "path": "/exports"}},
    {"name": "bundle", "projected": {"sources": [{"configMap": {"name": "c"}}]}},
])
benign = st.fixed_dictionaries({}, optional={
    "tolerations": st.just([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]),
    "affinity": st.just({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}),
    "dnsPolicy": st.just("ClusterFirst"),
    "shareProcessNamespace": st.booleans(),
})


@st.composite
def pod_template(draw):
    spec = draw(benign)
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if (v := draw(maybe(rarely_true))) is not None:
            spec[key] = v
    if (users := draw(maybe(st.booleans()))) is not None:
        spec["hostUsers"] = users
    if draw(st.booleans()):
        spec["securityContext"] = draw(security_context(False))
    worker = {"name": "worker"}
    if draw(st.booleans()):
        worker["securityContext"] = draw(security_context(True))
    if draw(st.booleans()):
        worker["env"] = [{"name": "HF_HOME", "value": "/tmp/hf"}]
    containers = [worker] + [draw(sidecar(f"side{i}", 9090 + i)) for i in range(draw(st.integers(0, 2)))]
    spec["containers"] = containers
    if draw(st.booleans()):
        init = {"name": "init0", "image": "rewardpool-worker:test", "command": ["true"]}
        if draw(st.booleans()):
            init["securityContext"] = draw(security_context(True))
        spec["initContainers"] = [init]
    vols = draw(st.lists(volume, unique_by=lambda v: v["name"], max_size=3))
    if vols:
        spec["volumes"] = vols
    meta = {"labels": {"team": "rl"}} if draw(st.booleans()) else {}
    if draw(st.booleans()):
        meta["annotations"] = {"container.apparmor.security.beta.kubernetes.io/worker":
                               draw(st.sampled_from(["runtime/default", "unconfined", "localhost/k8s-worker"]))}
    return _valid({"metadata": meta, "spec": spec})


def _valid(tpl: dict) -> dict:
    """What the API server's validation (not its Pod Security) would reject, taken out, so that every pod in
    the corpus is a valid pod and PodSecurity is the only judge: Unmasked /proc needs a user namespace, a user
    namespace excludes host namespaces, a shared process namespace excludes the host's, privileged implies escalation, net.* and IPC sysctls are refused with host network and host IPC, and
    an AppArmor annotation must agree with the fields of the container it names."""
    spec = tpl["spec"]
    every = spec["containers"] + spec.get("initContainers", [])
    for c in every:  # a privileged container escalates by definition (the worker's own default says false)
        if (c.get("securityContext") or {}).get("privileged") is True:
            c["securityContext"]["allowPrivilegeEscalation"] = True
    if any((c.get("securityContext") or {}).get("procMount") == "Unmasked" for c in every):
        spec["hostUsers"] = False
    if spec.get("hostUsers") is False:
        for key in ("hostNetwork", "hostPID", "hostIPC"):
            spec.pop(key, None)
    if spec.get("hostPID"):
        spec.pop("shareProcessNamespace", None)
    sc = spec.get("securityContext") or {}
    if "sysctls" in sc:
        sc["sysctls"] = [s for s in sc["sysctls"]
                         if not (spec.get("hostNetwork") and s["name"].startswith("net."))
                         and not (spec.get("hostIPC") and s["name"] in ("kernel.shm_rmid_forced", "kernel.msgmax"))]
        if not sc["sysctls"]:
            del sc["sysctls"]
    if "annotations" in tpl["metadata"]:
        sc.pop("appArmorProfile", None)
        (spec["containers"][0].get("securityContext") or {}).pop("appArmorProfile", None)
    return tpl


# ---- the two judges ----------------------------------------------------------------------------------------
def operator_refuses(co, ns: str, manifest: dict) -> tuple[bool, str, bool]:
    """(refused, why, refused at admission): the CRD's rules first, as for any kubectl apply, then the
    operator's findings on the pool as the API server stored it."""
    try:
        stored = co.create_namespaced_custom_object(G, V, ns, P, manifest, dry_run="All")
    except ApiException as e:
        assert e.status == 422, e.body
        # `rewardpool render`, which no API server checks, must refuse what admission does
        assert blocking_findings({**manifest, "metadata": {"name": "corpus", "namespace": ns}}), e.body
        return True, json.loads(e.body)["message"], True
    blocking = blocking_findings(stored)
    return bool(blocking), "; ".join(f"{p.reason}: {p.message}" for p in blocking), False


def blocking_findings(obj: dict) -> list:
    pool = Pool.from_object({**obj, "metadata": {**obj["metadata"], "uid": "u-corpus"}})
    size = sizing.compute(pool.spec)
    return [p for p in validate.check(pool.spec, builders.pod_template(pool, size)) + size.problems if p.blocking]


def without_the_exception(pod: dict) -> dict:
    """The operator's pod with IPC_LOCK (the one capability it adds beyond the standard) off the worker."""
    pod = copy.deepcopy(pod)
    for c in pod["spec"]["containers"]:
        if c["name"] == "worker":
            caps = c["securityContext"]["capabilities"]
            caps["add"] = [x for x in caps.get("add") or [] if x != "IPC_LOCK"]
    return pod


def pod_security_rejects(core, ns: str, manifest: dict) -> tuple[bool | None, str]:
    """(rejected, message), or (None, message) when the pod is not even valid (a generator bug)."""
    pool = Pool.from_object({**manifest, "metadata": {**manifest["metadata"], "namespace": ns, "uid": "u-corpus"}})
    pod = without_the_exception(builders.pod_template(pool, sizing.compute(pool.spec)))
    try:
        core.create_namespaced_pod(ns, pod, dry_run="All")
        return False, ""
    except ApiException as e:
        message = json.loads(e.body).get("message", e.body)
        if e.status == 403 and "violates PodSecurity" in message:
            return True, message
        return None, f"{e.status} {message}"


# ---- the test ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def enforcing(api, chart):
    """One namespace per level, each enforcing it (the operator's decision is taken for pools in it too)."""
    core = client.CoreV1Api(api)
    names = {}
    for level in ("baseline", "restricted"):
        name = f"psa-{level}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": name, "labels": {
            "pod-security.kubernetes.io/enforce": level, "pod-security.kubernetes.io/enforce-version": "latest"}}})
        names[level] = name
    yield names
    for name in names.values():
        core.delete_namespace(name)


def test_the_operator_refuses_exactly_what_pod_security_rejects(api, enforcing):
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    tally: Counter = Counter()
    disagreements: list[str] = []
    invalid: list[str] = []

    @seed(CORPUS_SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(pod_template())
    def judge(template):
        tally["templates"] += 1
        for level, ns in enforcing.items():
            manifest = {"apiVersion": f"{G}/{V}", "kind": "RewardPool", "metadata": {"name": "corpus"},
                        "spec": {**copy.deepcopy(POOL), "podSecurity": level, "podTemplate": copy.deepcopy(template)}}
            ours, why, at_admission = operator_refuses(co, ns, manifest)
            theirs, message = pod_security_rejects(core, ns, manifest)
            if theirs is None:
                invalid.append(f"[{level}] {message}\n  {json.dumps(template, sort_keys=True)}")
                continue
            tally[f"{level}: refused by both" if ours and theirs else f"{level}: accepted by both"
                  if not (ours or theirs) else f"{level}: disagreements"] += 1
            tally[f"{level}: of which at admission"] += at_admission
            if ours != theirs:
                disagreements.append(f"[{level}] operator {'refuses' if ours else 'accepts'} ({why or '-'}), "
                                     f"PodSecurity {'rejects' if theirs else 'admits'} ({message or '-'}):\n"
                                     f"  {json.dumps(template, sort_keys=True)}")

    judge()
    print("\nPod Security corpus (seed %d):" % CORPUS_SEED)
    for key in sorted(tally):
        print(f"  {key:40s} {tally[key]}")
    assert not invalid, f"{len(invalid)} corpus pods are invalid (fix the generator):\n" + "\n".join(invalid[:20])
    assert not disagreements, f"{len(disagreements)} disagreements:\n" + "\n".join(disagreements[:20])
    for level in enforcing:  # a corpus one judge always refuses, or always accepts, would prove nothing
        assert tally[f"{level}: refused by both"] >= EXAMPLES // 10, tally
        assert tally[f"{level}: accepted by both"] >= EXAMPLES // 10, tally


@pytest.mark.parametrize("model", [None, {"pvc": {"claimName": "weights", "subPath": "clip"}},
                                   {"image": {"reference": "registry.example/models/pickscore:v1",
                                              "pullPolicy": "IfNotPresent"}},
                                   {"cache": {"name": "pick", "placement": "Preferred"}}, "engine"],
                         ids=["no-source", "pvc", "image", "cache", "hosted-judge-engine"])
def test_the_operators_own_pod_is_admitted_at_both_levels_once_ipc_lock_is_excepted(api, enforcing, model):
    """The other direction of the exception: the pod the operator renders from an empty podTemplate is
    rejected for IPC_LOCK alone, and admitted without it; with the scorer's model from a PVC or an OCI image
    volume (issue 34) too: both sources stay within restricted; and with a hosted judge's engine container
    beside the worker (issue 44), whose weights come from an image volume and which asks for a GPU."""
    core = client.CoreV1Api(api)
    for level, ns in enforcing.items():
        spec = {**POOL, "podSecurity": level}
        if model == "engine":
            spec["scorer"] = {"name": "openai-judge", "engine": {
                "kind": "vllm", "gpus": 1, "model": {"image": {"reference": "registry.example/models/qwen-vl:7b"}}}}
        elif model is not None:
            spec["scorer"] = {**POOL["scorer"], "model": model}
        manifest = {"metadata": {"name": "plain"}, "spec": spec}
        pool = Pool.from_object({**manifest, "metadata": {"name": "plain", "namespace": ns, "uid": "u-1"}})
        pod = builders.pod_template(pool, sizing.compute(pool.spec))
        with pytest.raises(ApiException) as e:
            core.create_namespaced_pod(ns, pod, dry_run="All")
        message = json.loads(e.value.body)["message"]
        assert e.value.status == 403 and '"IPC_LOCK"' in message and 'container "worker"' in message, message
        assert message.count("violates PodSecurity") == 1 and ("non-default capabilities" in message
                                                              or "unrestricted capabilities" in message), message
        if model is not None:
            assert any("rewardpool-model-0" == v["name"] for v in pod["spec"]["volumes"])
        if model == "engine":
            assert [c["name"] for c in pod["spec"]["containers"]] == ["worker", "engine-0"]
        core.create_namespaced_pod(ns, without_the_exception(pod), dry_run="All")


HANDLER_PLACES = ("livenessProbe", "readinessProbe", "startupProbe", "postStart", "preStop")


@pytest.mark.parametrize("kind", ["httpGet", "tcpSocket"])
@pytest.mark.parametrize("where", HANDLER_PLACES)
def test_a_probe_or_lifecycle_host_is_refused_at_baseline_as_pod_security_does(api, enforcing, where, kind):
    """Every place a handler can name a host, by both handler kinds, judged by the API server at each level
    (the corpus draws these only now and then): a host is refused by both judges, the same handler without
    one admitted by both."""
    co, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    for host in ("10.1.2.3", None):
        action = {"path": "/", "port": 9090} if kind == "httpGet" else {"port": 9090}
        handler = {kind: {**action, **({"host": host} if host else {})}}
        side = {"name": "side0", "image": "rewardpool-worker:test", "securityContext": {
            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": True,
            "seccompProfile": {"type": "RuntimeDefault"}}}
        side.update({"lifecycle": {where: handler}} if where in ("postStart", "preStop") else {where: handler})
        template = {"spec": {"containers": [{"name": "worker"}, side]}}
        for level, ns in enforcing.items():
            manifest = {"apiVersion": f"{G}/{V}", "kind": "RewardPool", "metadata": {"name": "handler"},
                        "spec": {**copy.deepcopy(POOL), "podSecurity": level, "podTemplate": template}}
            ours, why, _ = operator_refuses(co, ns, manifest)
            theirs, message = pod_security_rejects(core, ns, manifest)
            assert theirs is not None, message
            assert theirs == (host is not None), (level, message)  # the oracle sees what the test means
            assert ours == theirs, (level, host, why, message)
            if ours:
                assert f"{kind}.host" in why and "side0" in why, why
