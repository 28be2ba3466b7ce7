"""The Helm chart with the real helm binary on the real control plane: lint, template + server-side dry run,
install, and the chart's RBAC as the operator's identity (enough to reconcile, nothing more)."""
from __future__ import annotations

import subprocess

import pytest

from rewardpool_devcluster.stack import CHART, OPERATOR_NS, RELEASE, kubectl, tool


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run([tool("helm"), *args], capture_output=True, text=True, check=check, timeout=120)


def test_helm_lint():
    res = helm("lint", str(CHART), "--strict")
    assert "1 chart(s) linted, 0 chart(s) failed" in res.stdout


def test_values_schema_rejects_bad_values():
    res = helm("template", "x", str(CHART), "--set", "rbac.scope=everywhere", check=False)
    assert res.returncode != 0 and "scope" in res.stderr
    res = helm("template", "x", str(CHART), "--set", "rbac.scope=namespace", check=False)
    assert res.returncode != 0 and "watchNamespaces" in res.stderr


@pytest.mark.parametrize("sets", [[], ["--set", "rbac.scope=namespace", "--set", "watchNamespaces={team-a,team-b}",
                                       "--set", "serviceMonitor.enabled=false"]],
                         ids=["cluster-scope", "namespace-scope"])
def test_template_passes_server_side_dry_run(chart, sets):
    rendered = helm("template", "dry", str(CHART), "--namespace", OPERATOR_NS, *sets).stdout
    for ns in ("team-a", "team-b"):  # the namespaces the namespace-scoped Roles go to
        kubectl(chart, "create", "namespace", ns, check=False)
    res = kubectl(chart, "apply", "--dry-run=server", "--server-side", "-f", "-", input=rendered, check=False)
    assert res.returncode == 0, res.stderr
    assert "deployment.apps/dry-rewardpool-operator serverside-applied (server dry run)" in res.stdout


def test_install_created_the_chart_objects(chart):
    out = helm("list", "-n", OPERATOR_NS, "--kubeconfig", str(chart.kubeconfig)).stdout
    assert RELEASE in out and "deployed" in out
    kubectl(chart, "get", "crd", "rewardpools.rewardpool.io")
    dep = kubectl(chart, "get", "deployment", f"{RELEASE}-rewardpool-operator", "-n", OPERATOR_NS,
                  "-o", "jsonpath={.spec.strategy.type} {.spec.template.spec.securityContext.runAsNonRoot} "
                  "{.spec.template.spec.containers[0].livenessProbe.httpGet.path}").stdout
    assert dep.split() == ["RollingUpdate", "true", "/healthz"]


SA = f"system:serviceaccount:{OPERATOR_NS}:{RELEASE}-rewardpool-operator"


@pytest.mark.parametrize("verb,resource,allowed", [
    ("create", "pods", True), ("delete", "pods", True), ("watch", "rewardpools.rewardpool.io", True),
    ("patch", "rewardpools.rewardpool.io --subresource=status", True), ("create", "network-attachment-definitions.k8s.cni.cncf.io", True),
    ("list", "nodes", True), ("create", "events", True), ("patch", "rewardpools.rewardpool.io --subresource=scale", True),
    ("update", "rewardpools.rewardpool.io --subresource=finalizers", True), ("create", "poddisruptionbudgets.policy", True),
    ("get", "secrets", True), ("list", "secrets", False), ("get", "persistentvolumeclaims", True),
    ("list", "persistentvolumeclaims", False), ("create", "persistentvolumeclaims", True), ("delete", "secrets", False), ("update", "rewardpools.rewardpool.io", False),
    ("create", "deployments.apps", False), ("delete", "nodes", False), ("create", "clusterrolebindings", False),
    ("create", "persistentvolumes", True), ("delete", "persistentvolumes", True), ("watch", "rewardmodelcaches.rewardpool.io", True),
    ("patch", "rewardmodelcaches.rewardpool.io --subresource=status", True), ("delete", "rewardmodelcaches.rewardpool.io", False),
    ("patch", "nodes", False), ("create", "daemonsets.apps", False),
])
def test_chart_rbac_is_least_privilege(chart, verb, resource, allowed):
    res = kubectl(chart, "auth", "can-i", verb, *resource.split(), f"--as={SA}", "-n", "default", check=False)
    assert res.stdout.strip() == ("yes" if allowed else "no"), (verb, resource, res.stdout, res.stderr)


AGENT = f"system:serviceaccount:{OPERATOR_NS}:{RELEASE}-rewardpool-operator-agent"


@pytest.mark.parametrize("verb,resource,namespace,allowed", [
    ("patch", "nodes", "", True), ("get", "nodes", "", True), ("list", "nodes", "", False), ("delete", "nodes", "", False),
    ("list", "rewardmodelcaches.rewardpool.io", "", True), ("patch", "rewardmodelcaches.rewardpool.io", "", False),
    ("patch", "rewardmodelcaches.rewardpool.io --subresource=status", "", True),
    ("delete", "rewardmodelcaches.rewardpool.io", "", False),
    ("create", "pods", OPERATOR_NS, True), ("delete", "pods", OPERATOR_NS, True), ("create", "pods", "default", False),
    ("list", "pods", "default", True), ("get", "pods", "default", False), ("delete", "pods", "default", False),
    ("patch", "pods", "default", False),
    ("get", "persistentvolumeclaims", OPERATOR_NS, True), ("get", "persistentvolumeclaims", "default", False),
    ("get", "secrets", OPERATOR_NS, False), ("list", "rewardpools.rewardpool.io", "default", False),
    ("create", "persistentvolumes", "", False),
])
def test_the_cache_agent_may_touch_only_its_nodes_caches_status_and_copy_pods(chart, verb, resource, namespace,
                                                                               allowed):
    """The node agent's identity: its node's labels and its entries of cache status, copy pods and their source
    claims in the operator's namespace only, a list of pods anywhere (which copies its node's pods mount) and
    nothing more of them; no Secrets, no pools, no volumes."""
    ns = ["-n", namespace] if namespace else []
    res = kubectl(chart, "auth", "can-i", verb, *resource.split(), f"--as={AGENT}", *ns, check=False)
    assert res.stdout.strip() == ("yes" if allowed else "no"), (verb, resource, namespace, res.stdout, res.stderr)


def test_operator_identity_is_denied_secrets(operator):
    res = kubectl(operator.kubeconfig, "get", "secrets", "-n", "default", check=False)
    assert res.returncode != 0 and "Forbidden" in res.stderr and "cannot list resource \"secrets\"" in res.stderr


def test_network_policies_render_per_namespace_and_are_admitted(chart):
    """The workers' NetworkPolicies, admitted by the real API server. The dev cluster's kwok nodes have no CNI,
    so nothing enforces them here: the token check is proven on its own (tests/e2e/test_control_e2e.py)."""
    import yaml

    from rewardpool_worker.contract import HTTP_PORT

    for ns in ("np-a", "np-b"):
        kubectl(chart, "create", "namespace", ns, check=False)
    rendered = helm("template", "np", str(CHART), "--namespace", OPERATOR_NS, "--set", "rbac.create=false",
                    "--set", "networkPolicy.namespaces={np-a,np-b}", "--set", "networkPolicy.clientNamespaces={train}",
                    "--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.team=monitoring",
                    "--set", "networkPolicy.scoreNamespaces={evals}",
                    "--show-only", "templates/networkpolicy.yaml").stdout
    policies = [d for d in yaml.safe_load_all(rendered) if d]
    assert [p["metadata"]["namespace"] for p in policies] == ["np-a", "np-b"]
    res = kubectl(chart, "apply", "--server-side", "-f", "-", input=rendered, check=False)
    assert res.returncode == 0, res.stderr
    live = yaml.safe_load(kubectl(chart, "get", "networkpolicy", "np-rewardpool-operator-workers", "-n", "np-a",
                                  "-o", "yaml").stdout)["spec"]
    assert live["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "rewardpool-worker",
                                                  "app.kubernetes.io/component": "worker"}
    assert live["policyTypes"] == ["Ingress"]
    control, data = live["ingress"]
    # The HTTP port: the operator's pods, the named scraper and the HTTP scoring callers' namespace, nobody else.
    assert control["ports"] == [{"protocol": "TCP", "port": HTTP_PORT}]
    assert control["from"][0]["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": OPERATOR_NS}
    assert control["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == "rewardpool-operator"
    assert control["from"][1] == {"namespaceSelector": {"matchLabels": {"team": "monitoring"}}}
    assert control["from"][2] == {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "evals"}}}
    assert len(control["from"]) == 3
    # Every other port (store client, Ray): the pools' workers and the training namespace; never the control port.
    tcp = sorted((p["port"], p["endPort"]) for p in data["ports"] if p["protocol"] == "TCP")
    assert tcp == [(1, HTTP_PORT - 1), (HTTP_PORT + 1, 65535)]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "train"}}} in data["from"]
    # Nothing is rendered without namespaces to protect (cluster scope, none listed): NOTES says so.
    assert "kind: NetworkPolicy" not in helm("template", "np", str(CHART)).stdout
    assert "No NetworkPolicy rendered" in helm("install", "np", str(CHART), "--dry-run=client").stdout
