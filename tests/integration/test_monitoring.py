"""The chart's ServiceMonitor, PodMonitor and PrometheusRule (and the dashboard ConfigMap) as rendered by helm
are valid against prometheus-operator's own CRDs (v0.85.0, fetched from the Go module proxy by the install
step) on the real API server, and a broken one is refused by the same schema. (That a real Prometheus scrapes what they select and loads the
rules is tests/realnode/test_observability.py.)"""
from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from rewardpool_devcluster.stack import CHART, OPERATOR_NS, kubectl, third_party_crds, tool


@pytest.fixture(scope="module")
def monitor_crds(chart):
    crds = third_party_crds()
    for kind in ("servicemonitors", "podmonitors", "prometheusrules"):
        kubectl(chart, "apply", "--server-side", "-f", str(crds / f"monitoring.coreos.com_{kind}.yaml"))
        chart.wait_crd_established(f"{kind}.monitoring.coreos.com")
    return crds


def _render(*sets: str) -> list[dict]:
    out = subprocess.run([tool("helm"), "template", "mon", str(CHART), "--namespace", OPERATOR_NS, *sets],
                         capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_monitors_are_valid_for_prometheus_operator(monitor_crds, chart):
    docs = [d for d in _render("--set", "serviceMonitor.enabled=true", "--set", "watchNamespaces={rl}",
                               "--set", "prometheusRule.enabled=true")
            if d["kind"] in ("ServiceMonitor", "PodMonitor", "PrometheusRule")]
    assert sorted(d["kind"] for d in docs) == ["PodMonitor", "PrometheusRule", "ServiceMonitor"]
    res = kubectl(chart, "apply", "--dry-run=server", "--server-side", "-f", "-", input=yaml.safe_dump_all(docs),
                  check=False)
    assert res.returncode == 0, res.stderr
    sm = next(d for d in docs if d["kind"] == "ServiceMonitor")
    assert sm["spec"]["namespaceSelector"] == {"matchNames": ["rl"]}
    assert {"sourceLabels": ["__meta_kubernetes_pod_label_rewardpool_io_pool"], "targetLabel": "pool"} in \
        sm["spec"]["endpoints"][0]["relabelings"]
    # the check can fail: the same schema refuses a monitor with an unknown endpoint field
    sm["spec"]["endpoints"][0]["scrapeEvery"] = "15s"
    res = kubectl(chart, "apply", "--dry-run=server", "-f", "-", input=json.dumps(sm), check=False)
    assert res.returncode != 0 and "scrapeEvery" in res.stderr


def test_dashboard_configmap_is_for_the_grafana_sidecar_and_off_by_default(chart):
    assert not [d for d in _render() if d["kind"] == "ConfigMap"]
    (cm,) = [d for d in _render("--set", "dashboard.enabled=true", "--set", "dashboard.namespace=monitoring")
             if d["kind"] == "ConfigMap"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1" and cm["metadata"]["namespace"] == "monitoring"
    dash = json.loads(cm["data"]["rewardpool.json"])
    assert dash["uid"] == "rewardpool" and dash["panels"]
    res = kubectl(chart, "apply", "--dry-run=server", "-f", "-", input=json.dumps({**cm, "metadata": {
        **cm["metadata"], "namespace": "default"}}), check=False)
    assert res.returncode == 0, res.stderr
