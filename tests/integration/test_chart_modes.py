"""The Helm chart per mode, with the real helm binary and the real API server.

Render: every RBAC scope and values combination the README and values.yaml document is rendered with
`helm template`, and the exact grants each produces are asserted: which kinds (ClusterRole, Role, bindings),
in which namespaces, over which (apiGroup, resource, verb). A namespace-scoped install must grant nothing
cluster-wide over what lives in namespaces: only the node and CRD reads and the cluster-scoped model cache's
objects (RewardModelCaches, PersistentVolumes). The model cache's node agent has its own identity and grants.

Install: the chart is installed into the real control plane in both modes (and with rbac.create=false), and
`kubectl auth can-i --as=<the chart's ServiceAccount>` checks what that identity may and may not do there,
per namespace, against the API server's own RBAC authorizer; a few real requests confirm it.
"""
from __future__ import annotations

import json
import subprocess
import uuid

import pytest
import yaml

from rewardpool_devcluster.stack import CHART, helm_install, kubectl, tool

NAME = "rewardpool-operator"  # the chart's name; a release named r gets objects named r-rewardpool-operator


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([tool("helm"), *args], capture_output=True, text=True, check=check, timeout=120)


def render(*sets: str, release: str = "rp", namespace: str = "rp-system") -> list[dict]:
    args = []
    for s in sets:
        args += ["--set", s]
    res = helm("template", release, str(CHART), "--namespace", namespace, *args, check=False)
    assert res.returncode == 0, res.stderr
    return [d for d in yaml.safe_load_all(res.stdout) if d]


def grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    """RBAC rules flattened to (apiGroup, resource, verb) triples; resourceNames and nonResourceURLs would
    narrow or widen a rule, so the chart must not use them unnoticed."""
    out = set()
    for r in rules:
        assert set(r) <= {"apiGroups", "resources", "verbs"}, f"unexpected rule fields: {r}"
        for g in r["apiGroups"]:
            for res in r["resources"]:
                for v in r["verbs"]:
                    out.add((g, res, v))
    return out


def expand(groups, resources, verbs) -> set[tuple[str, str, str]]:
    return {(g, r, v) for g in groups for r in resources for v in verbs}


READ = ["get", "list", "watch"]
# What the operator needs cluster-wide in every mode: node capacity (placement), namespace labels (the Pod
# Security level) and CRD discovery (kopf).
CLUSTER_READS = (expand([""], ["nodes"], READ) | expand([""], ["namespaces"], ["get"])
                 | expand(["apiextensions.k8s.io"], ["customresourcedefinitions"], READ))
# The model cache, cluster-scoped: caches (their summary, the deletion guard's finalizer) and their local volumes.
CACHE_CLUSTER = (expand(["rewardpool.io"], ["rewardmodelcaches"], READ + ["patch"])
                 | expand(["rewardpool.io"], ["rewardmodelcaches/status"], ["patch"])
                 | expand([""], ["persistentvolumes"], ["get", "list", "create", "patch", "delete"]))
CLUSTER_WIDE = CLUSTER_READS | CACHE_CLUSTER
# The node agent: its node's labels, cache status and which copies its node's pods mount (a list of pods, no
# more) cluster-wide; its copy pods and their sources at home.
AGENT_CLUSTER = (expand(["rewardpool.io"], ["rewardmodelcaches"], READ)
                 | expand(["rewardpool.io"], ["rewardmodelcaches/status"], ["patch"])
                 | expand([""], ["nodes"], ["get", "patch"])
                 | expand([""], ["pods"], ["list"]))
AGENT_HOME = expand([""], ["pods"], ["get", "list", "create", "delete"]) | expand([""], ["persistentvolumeclaims"], ["get"])
# What it does inside a namespace it manages.
NAMESPACED = (expand(["rewardpool.io"], ["rewardpools"], READ)
              | expand(["rewardpool.io"], ["rewardpools/status", "rewardpools/scale"], ["get", "patch", "update"])
              | expand([""], ["pods"], READ + ["create", "delete", "patch"])
              | expand([""], ["services"], READ + ["create", "patch"])
              | expand(["k8s.cni.cncf.io"], ["network-attachment-definitions"], READ + ["create", "patch"])
              | expand(["", "events.k8s.io"], ["events"], ["create", "patch"])
              | expand(["rewardpool.io"], ["rewardpools/finalizers"], ["update"])
              | expand(["policy"], ["poddisruptionbudgets"], READ + ["create", "patch"])
              | expand([""], ["secrets"], ["get", "create"])  # the pools' control tokens; no list/watch
              # scorer.model.pvc (it exists) and scorer.model.cache (the claim bound to the cache's volume)
              | expand([""], ["persistentvolumeclaims"], ["get", "create", "patch", "delete"]))
# Leader election, in the release namespace only, in every mode.
LEADER = expand(["coordination.k8s.io"], ["leases"], ["get", "create", "update"])
# Resources that live in namespaces: never granted cluster-wide by a namespace-scoped install.
NAMESPACED_RESOURCES = {r for _, r, _ in NAMESPACED}

RBAC_KINDS = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def rbac_objects(docs: list[dict]) -> set[tuple[str, str | None, str]]:
    return {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]) for d in docs if d["kind"] in RBAC_KINDS}


def subjects(binding: dict) -> list[tuple[str, str, str]]:
    return [(s["kind"], s["name"], s.get("namespace")) for s in binding["subjects"]]


def operator_args(docs: list[dict]) -> list[str]:
    (dep,) = by_kind(docs, "Deployment")
    return dep["spec"]["template"]["spec"]["containers"][0]["args"]


def agent_objects(full, namespace):
    return {(k, None, f"{full}-agent") for k in ("ClusterRole", "ClusterRoleBinding")} | \
        {(k, namespace, f"{full}-agent") for k in ("Role", "RoleBinding")}


def named(docs, kind, name):
    (d,) = [d for d in by_kind(docs, kind) if d["metadata"]["name"] == name]
    return d


def assert_agent(docs, full, namespace):
    """The agent's grants, bound to its own ServiceAccount only."""
    assert grants(named(docs, "ClusterRole", f"{full}-agent")["rules"]) == AGENT_CLUSTER
    assert grants(named(docs, "Role", f"{full}-agent")["rules"]) == AGENT_HOME
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        assert subjects(named(docs, kind, f"{full}-agent")) == [("ServiceAccount", f"{full}-agent", namespace)]
    (ds,) = by_kind(docs, "DaemonSet")
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == f"{full}-agent"


def assert_cluster_scope(docs, release="rp", namespace="rp-system", sa=None):
    full = f"{release}-{NAME}"
    sa = sa or full
    assert rbac_objects(docs) == {("ClusterRole", None, f"{full}-cluster"), ("ClusterRoleBinding", None, f"{full}-cluster"),
                                  ("Role", namespace, f"{full}-leader"), ("RoleBinding", namespace, f"{full}-leader")} \
        | agent_objects(full, namespace)
    cr = named(docs, "ClusterRole", f"{full}-cluster")
    assert grants(cr["rules"]) == CLUSTER_WIDE | NAMESPACED
    assert_leader_role(docs, full, namespace, sa)
    assert_agent(docs, full, namespace)
    crb = named(docs, "ClusterRoleBinding", f"{full}-cluster")
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": f"{full}-cluster"}
    assert subjects(crb) == [("ServiceAccount", sa, namespace)]


def assert_namespace_scope(docs, watched, release="rp", namespace="rp-system", sa=None):
    full = f"{release}-{NAME}"
    sa = sa or full
    expected = {("ClusterRole", None, f"{full}-cluster"), ("ClusterRoleBinding", None, f"{full}-cluster"),
                ("Role", namespace, f"{full}-leader"), ("RoleBinding", namespace, f"{full}-leader")}
    expected |= {(k, ns, full) for ns in watched for k in ("Role", "RoleBinding")}
    assert rbac_objects(docs) == expected | agent_objects(full, namespace)
    cr = named(docs, "ClusterRole", f"{full}-cluster")
    cluster_wide = grants(cr["rules"])
    # the whole point of the mode: nothing cluster-wide over what lives in namespaces
    assert not {g for g in cluster_wide if g[1] in NAMESPACED_RESOURCES}, sorted(cluster_wide)
    assert cluster_wide == CLUSTER_WIDE
    assert_agent(docs, full, namespace)
    crb = named(docs, "ClusterRoleBinding", f"{full}-cluster")
    assert crb["roleRef"]["name"] == f"{full}-cluster" and subjects(crb) == [("ServiceAccount", sa, namespace)]
    for role in by_kind(docs, "Role"):
        if role["metadata"]["name"] == full:
            assert grants(role["rules"]) == NAMESPACED, role["metadata"]["namespace"]
    for rb in by_kind(docs, "RoleBinding"):
        if rb["metadata"]["name"] == full:
            assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": full}
            assert subjects(rb) == [("ServiceAccount", sa, namespace)]
    assert_leader_role(docs, full, namespace, sa)


def assert_leader_role(docs, full, namespace, sa):
    (role,) = [r for r in by_kind(docs, "Role") if r["metadata"]["name"] == f"{full}-leader"]
    assert role["metadata"]["namespace"] == namespace and grants(role["rules"]) == LEADER
    (rb,) = [b for b in by_kind(docs, "RoleBinding") if b["metadata"]["name"] == f"{full}-leader"]
    assert rb["roleRef"]["name"] == f"{full}-leader" and subjects(rb) == [("ServiceAccount", sa, namespace)]


# ---- render: every documented combination -------------------------------------------------------------------

def test_cluster_scope_is_the_default_one_cluster_role_over_everything_the_operator_does():
    docs = render()
    assert_cluster_scope(docs)
    assert not any(a.startswith("--namespace") for a in operator_args(docs))  # watches every namespace
    assert [d["metadata"]["name"] for d in by_kind(docs, "ServiceAccount")] == [f"rp-{NAME}-agent", f"rp-{NAME}"]
    assert not by_kind(docs, "ServiceMonitor")


def test_cluster_scope_explicit_equals_the_default():
    assert render("rbac.scope=cluster") == render()


def test_cluster_scope_with_watch_namespaces_grants_cluster_wide_and_watches_only_those():
    docs = render("watchNamespaces={rl-team,rl-eval}")
    assert_cluster_scope(docs)
    assert [a for a in operator_args(docs) if a.startswith("--namespace")] == ["--namespace=rl-team", "--namespace=rl-eval"]


@pytest.mark.parametrize("watched", [["rl-team"], ["team-a", "team-b", "team-c"]], ids=["one", "three"])
def test_namespace_scope_grants_a_role_per_watched_namespace_and_only_reads_cluster_wide(watched):
    docs = render("rbac.scope=namespace", "watchNamespaces={%s}" % ",".join(watched))
    assert_namespace_scope(docs, watched)
    assert [a for a in operator_args(docs) if a.startswith("--namespace")] == [f"--namespace={n}" for n in watched]


def test_namespace_scope_without_namespaces_is_refused():
    res = helm("template", "rp", str(CHART), "--set", "rbac.scope=namespace", check=False)
    assert res.returncode != 0 and "rbac.scope=namespace needs watchNamespaces" in res.stderr


@pytest.mark.parametrize("sets", [[], ["rbac.scope=namespace", "watchNamespaces={rl-team}"]], ids=["cluster", "namespace"])
def test_rbac_create_false_renders_no_rbac_but_keeps_the_service_account(sets):
    docs = render("rbac.create=false", *sets)
    assert rbac_objects(docs) == set()
    assert [d["metadata"]["name"] for d in by_kind(docs, "ServiceAccount")] == [f"rp-{NAME}-agent", f"rp-{NAME}"]


@pytest.mark.parametrize("sets,scope", [([], "cluster"), (["rbac.scope=namespace", "watchNamespaces={rl-team}"], "namespace")])
def test_existing_service_account_is_bound_and_used_not_created(sets, scope):
    docs = render("serviceAccount.create=false", "serviceAccount.name=ops-sa", *sets)
    assert [d["metadata"]["name"] for d in by_kind(docs, "ServiceAccount")] == [f"rp-{NAME}-agent"]  # its own
    (dep,) = by_kind(docs, "Deployment")
    assert dep["spec"]["template"]["spec"]["serviceAccountName"] == "ops-sa"
    if scope == "cluster":
        assert_cluster_scope(docs, sa="ops-sa")
    else:
        assert_namespace_scope(docs, ["rl-team"], sa="ops-sa")


def test_named_service_account_is_created_and_bound():
    docs = render("serviceAccount.name=ops-sa", "serviceAccount.annotations.team=rl")
    sa = named(docs, "ServiceAccount", "ops-sa")
    assert (sa["metadata"]["name"], sa["metadata"]["namespace"], sa["metadata"]["annotations"]) == \
        ("ops-sa", "rp-system", {"team": "rl"})
    assert_cluster_scope(docs, sa="ops-sa")


@pytest.mark.parametrize("sets,selector", [
    ([], {"any": True}),
    (["rbac.scope=namespace", "watchNamespaces={rl-team,rl-eval}"], {"matchNames": ["rl-team", "rl-eval"]}),
], ids=["cluster", "namespace"])
def test_service_monitor_on(sets, selector):
    docs = render("serviceMonitor.enabled=true", "serviceMonitor.interval=30s", "serviceMonitor.labels.release=prom", *sets)
    (sm,) = by_kind(docs, "ServiceMonitor")
    assert sm["metadata"]["namespace"] == "rp-system" and sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["namespaceSelector"] == selector
    assert sm["spec"]["selector"]["matchLabels"] == {"app.kubernetes.io/name": "rewardpool-worker",
                                                     "app.kubernetes.io/component": "workers"}
    assert sm["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s", "relabelings": [
        {"sourceLabels": ["__meta_kubernetes_pod_label_rewardpool_io_pool"], "targetLabel": "pool"}]}]
    (pm,) = by_kind(docs, "PodMonitor")  # the operator's own metrics, per-pool series keeping their namespace
    assert pm["spec"]["podMetricsEndpoints"] == [{"port": "metrics", "path": "/metrics", "interval": "30s",
                                                  "honorLabels": True}]
    assert pm["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] == "rewardpool-operator"
    # monitors are read by Prometheus, they grant the operator nothing
    if sets:
        assert_namespace_scope(docs, ["rl-team", "rl-eval"])
    else:
        assert_cluster_scope(docs)


@pytest.mark.parametrize("sets", [[], ["rbac.scope=namespace", "watchNamespaces={rl-team}"]], ids=["cluster", "namespace"])
def test_service_monitor_off_renders_none(sets):
    docs = render("serviceMonitor.enabled=false", *sets)
    assert not by_kind(docs, "ServiceMonitor") and not by_kind(docs, "PodMonitor")
    assert not by_kind(docs, "PrometheusRule") and not by_kind(docs, "ConfigMap")


COMBINATIONS = [
    [], ["rbac.scope=cluster"], ["watchNamespaces={a}"], ["rbac.scope=namespace", "watchNamespaces={a,b}"],
    ["rbac.create=false"], ["serviceAccount.create=false", "serviceAccount.name=x"],
    ["serviceMonitor.enabled=true"], ["rbac.scope=namespace", "watchNamespaces={a}", "serviceMonitor.enabled=true"],
    ["logFormat=plain", "replicaCount=0"],
]


@pytest.mark.parametrize("sets", COMBINATIONS, ids=lambda s: ",".join(s) or "defaults")
def test_no_combination_grants_secrets_wildcards_or_rbac_writes(sets):
    docs = render(*sets)
    for d in docs:
        if d["kind"] in ("ClusterRole", "Role"):
            for g, r, v in grants(d["rules"]):
                assert "*" not in (g, r, v), d
                assert r not in ("configmaps", "serviceaccounts", "serviceaccounts/token"), d
                # Secrets: get and create of the pools' control tokens only, never list/watch/update/delete
                assert r != "secrets" or v in ("get", "create"), d
                assert g != "rbac.authorization.k8s.io", d
                assert (g, r, v) in CLUSTER_WIDE | NAMESPACED | LEADER | AGENT_CLUSTER | AGENT_HOME, (g, r, v)


# ---- install: what the ServiceAccount may do on the real API server ------------------------------------------

def can_i(cluster, sa: str, verb: str, resource: str, namespace: str | None) -> str:
    where = ["-A"] if namespace == "*" else (["-n", namespace] if namespace else [])
    res = kubectl(cluster, "auth", "can-i", verb, *resource.split(), *where, f"--as={sa}", check=False)
    answer = res.stdout.strip()
    assert answer in ("yes", "no"), (verb, resource, namespace, res.stdout, res.stderr)
    return answer


def install(cluster, release: str, namespace: str, values: dict[str, str]):
    helm_install(cluster, release=release, namespace=namespace, values=values)
    return f"system:serviceaccount:{namespace}:{release}-{NAME}"


def uninstall(cluster, release: str, namespace: str):
    helm("uninstall", release, "-n", namespace, "--kubeconfig", str(cluster.kubeconfig), "--wait", check=False)


@pytest.fixture(scope="module")
def spaces(chart):
    """Two watched namespaces and one that is not, unique to this module's run."""
    tag = uuid.uuid4().hex[:6]
    names = {"a": f"watched-a-{tag}", "b": f"watched-b-{tag}", "other": f"unwatched-{tag}"}
    for n in names.values():
        kubectl(chart, "create", "namespace", n)
    yield names
    for n in names.values():
        kubectl(chart, "delete", "namespace", n, "--wait=false", check=False)


@pytest.fixture(scope="module")
def namespaced_install(chart, spaces):
    release, ns = "rpns", "rpns-system"
    sa = install(chart, release, ns, {"rbac.scope": "namespace", "watchNamespaces": "{%s,%s}" % (spaces["a"], spaces["b"])})
    yield sa
    uninstall(chart, release, ns)


@pytest.fixture(scope="module")
def norbac_install(chart):
    release, ns = "rpnone", "rpnone-system"
    sa = install(chart, release, ns, {"rbac.create": "false"})
    yield sa
    uninstall(chart, release, ns)


def cluster_sa():
    from rewardpool_devcluster.stack import OPERATOR_NS, RELEASE
    return f"system:serviceaccount:{OPERATOR_NS}:{RELEASE}-{NAME}"


# (verb, resource, where) where: "a"/"b" watched, "other" unwatched, "release" the release's namespace,
# "kube-system", "*" all namespaces at once, None cluster-scoped.
NAMESPACE_MODE = [
    *[(v, r, w, True) for w in ("a", "b") for v, r in [
        ("create", "pods"), ("delete", "pods"), ("list", "pods"), ("watch", "pods"), ("patch", "pods"),
        ("watch", "rewardpools.rewardpool.io"), ("patch", "rewardpools.rewardpool.io --subresource=status"),
        ("patch", "rewardpools.rewardpool.io --subresource=scale"), ("create", "services"),
        ("create", "network-attachment-definitions.k8s.cni.cncf.io"), ("create", "events"),
        ("create", "events.events.k8s.io")]],
    ("list", "nodes", None, True), ("watch", "nodes", None, True),
    ("get", "customresourcedefinitions.apiextensions.k8s.io", None, True),
    # nothing in a namespace it does not watch, nor across all namespaces at once
    *[(v, r, w, False) for w in ("other", "release", "kube-system", "*") for v, r in [
        ("create", "pods"), ("delete", "pods"), ("list", "pods"), ("watch", "rewardpools.rewardpool.io"),
        ("patch", "rewardpools.rewardpool.io --subresource=status"), ("create", "services"),
        ("create", "network-attachment-definitions.k8s.cni.cncf.io"), ("create", "events")]],
    # and, even where it watches, only what it needs
    *[(v, r, "a", True) for v, r in [("get", "secrets"), ("create", "secrets"),
                                      ("create", "poddisruptionbudgets.policy")]],
    ("get", "secrets", "other", False), ("create", "secrets", "other", False),
    *[(v, r, "a", False) for v, r in [
        ("watch", "secrets"), ("delete", "secrets"), ("update", "secrets"), ("list", "secrets"), ("get", "configmaps"), ("update", "rewardpools.rewardpool.io"),
        ("delete", "rewardpools.rewardpool.io"), ("create", "rewardpools.rewardpool.io"), ("delete", "services"),
        ("create", "deployments.apps"), ("create", "roles.rbac.authorization.k8s.io"),
        ("create", "rolebindings.rbac.authorization.k8s.io"), ("create", "pods --subresource=exec"),
        ("create", "serviceaccounts --subresource=token")]],
    ("delete", "nodes", None, False), ("patch", "nodes", None, False),
    ("create", "customresourcedefinitions.apiextensions.k8s.io", None, False),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, False),
    ("create", "namespaces", None, False),
]

CLUSTER_MODE = [
    *[(v, r, w, True) for w in ("a", "other", "kube-system", "*") for v, r in [
        ("create", "pods"), ("delete", "pods"), ("watch", "rewardpools.rewardpool.io"),
        ("patch", "rewardpools.rewardpool.io --subresource=status"), ("create", "services"),
        ("create", "network-attachment-definitions.k8s.cni.cncf.io"), ("create", "events")]],
    ("list", "nodes", None, True), ("get", "customresourcedefinitions.apiextensions.k8s.io", None, True),
    ("get", "secrets", "a", True), ("create", "secrets", "a", True),
    *[(v, r, w, False) for w in ("a", "other", "*") for v, r in [
        ("watch", "secrets"), ("delete", "secrets"), ("list", "secrets"), ("get", "configmaps"), ("update", "rewardpools.rewardpool.io"),
        ("delete", "rewardpools.rewardpool.io"), ("delete", "services"), ("create", "deployments.apps"),
        ("create", "roles.rbac.authorization.k8s.io"), ("create", "pods --subresource=exec")]],
    ("delete", "nodes", None, False), ("create", "customresourcedefinitions.apiextensions.k8s.io", None, False),
    ("create", "clusterrolebindings.rbac.authorization.k8s.io", None, False), ("create", "namespaces", None, False),
]


def where(spaces, w, release_ns):
    if w is None or w in ("*", "kube-system"):
        return w
    return release_ns if w == "release" else spaces[w]


def check_all(cluster, sa, spaces, table, release_ns):
    wrong = []
    for verb, resource, w, allowed in table:
        got = can_i(cluster, sa, verb, resource, where(spaces, w, release_ns))
        if got != ("yes" if allowed else "no"):
            wrong.append(f"{verb} {resource} in {w}: {got}, expected {'yes' if allowed else 'no'}")
    assert not wrong, "\n".join(wrong)


def test_namespace_mode_service_account_on_the_api_server(chart, spaces, namespaced_install):
    check_all(chart, namespaced_install, spaces, NAMESPACE_MODE, "rpns-system")


def test_cluster_mode_service_account_on_the_api_server(chart, spaces):
    from rewardpool_devcluster.stack import OPERATOR_NS
    check_all(chart, cluster_sa(), spaces, CLUSTER_MODE, OPERATOR_NS)


def test_rbac_create_false_grants_nothing(chart, spaces, norbac_install):
    for verb, resource, ns in [("list", "nodes", None), ("create", "pods", spaces["a"]), ("create", "pods", "rpnone-system"),
                               ("watch", "rewardpools.rewardpool.io", "*"),
                               ("get", "customresourcedefinitions.apiextensions.k8s.io", None)]:
        assert can_i(chart, norbac_install, verb, resource, ns) == "no", (verb, resource, ns)
    # and helm made no RBAC object for the release
    out = kubectl(chart, "get", "clusterroles,clusterrolebindings,roles,rolebindings", "-A",
                  "-l", "app.kubernetes.io/instance=rpnone", "-o", "name").stdout
    assert out.strip() == ""


def pod_manifest(name: str) -> str:
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                       "spec": {"containers": [{"name": "c", "image": "busybox"}]}})


def test_namespace_mode_real_requests_as_the_service_account(chart, spaces, namespaced_install):
    """Not only the authorizer's answer: real server-side dry-run requests made as that identity."""
    def create(ns):
        return kubectl(chart, "create", "--dry-run=server", "-n", ns, f"--as={namespaced_install}", "-f", "-",
                       input=pod_manifest("probe"), check=False)
    ok = create(spaces["a"])
    assert ok.returncode == 0 and "pod/probe created (server dry run)" in ok.stdout, ok.stderr
    denied = create(spaces["other"])
    assert denied.returncode != 0 and "Forbidden" in denied.stderr and 'cannot create resource "pods"' in denied.stderr
    res = kubectl(chart, "get", "pods", "-A", f"--as={namespaced_install}", check=False)
    assert res.returncode != 0 and "Forbidden" in res.stderr and "at the cluster scope" in res.stderr
    assert kubectl(chart, "get", "nodes", f"--as={namespaced_install}", check=False).returncode == 0


def test_the_installed_rules_are_the_rendered_rules(chart, spaces, namespaced_install):
    """What helm put in the API server is what the render tests asserted (nothing added or lost on the way)."""
    cr = json.loads(kubectl(chart, "get", "clusterrole", f"rpns-{NAME}-cluster", "-o", "json").stdout)
    assert grants(cr["rules"]) == CLUSTER_WIDE
    for w in ("a", "b"):
        role = json.loads(kubectl(chart, "get", "role", f"rpns-{NAME}", "-n", spaces[w], "-o", "json").stdout)
        assert grants(role["rules"]) == NAMESPACED
    assert kubectl(chart, "get", "role", f"rpns-{NAME}", "-n", spaces["other"], check=False).returncode != 0


@pytest.fixture()
def no_clusterwide_operator(request):
    """The session's cluster-wide operator, when an earlier test started it, would serve these namespaces
    too: stop it for this test and start it again afterwards."""
    defs = request.session._fixturemanager.getfixturedefs("operator", request.node) or []
    running = [d.cached_result[0] for d in defs if d.cached_result is not None and d.cached_result[0] is not None]
    for op in running:
        op.stop()
    yield
    for op in running:
        op.start()


def test_operator_works_with_only_the_namespaced_grants(chart, api, spaces, namespaced_install, tmp_path,
                                                        no_clusterwide_operator):
    """The real operator process, holding a token of the namespace-scoped ServiceAccount, runs a pool in a
    watched namespace to Ready (pods, service, attachment, events, status: every grant it needs is there)
    and leaves a pool in an unwatched namespace alone, with no Forbidden error on the way."""
    from rewardpool_devcluster.stack import OperatorProcess, service_account_kubeconfig
    from tests.factories import Pools, pool_manifest

    kc = service_account_kubeconfig(chart, release="rpns", namespace="rpns-system")
    log = tmp_path / "operator-namespaced.log"
    op = OperatorProcess(kc, log, namespaces=[spaces["a"], spaces["b"]], lease_namespace="rpns-system").start()
    try:
        outside, watched = Pools(api, spaces["other"]), Pools(api, spaces["b"])
        outside.create(pool_manifest("ignored", replicas=1))
        watched.create(pool_manifest("served", replicas=2))
        watched.wait_ready("served", 2, timeout=30)  # kopf once spent ~55 s retrying a namespace list first
        assert any(r == "WorkerCreated" for _, r, _ in watched.events("served"))
        assert op.metric("rewardpool_operator_reconciles_total") >= 1
        assert "status" not in outside.get("ignored") and outside.pods("ignored") == []
    finally:
        op.stop()
    text = log.read_text(errors="replace")
    assert "Forbidden" not in text and " 403" not in text, text[-3000:]
