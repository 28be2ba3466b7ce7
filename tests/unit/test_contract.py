"""Metric names follow Prometheus conventions, are declared once (the contract), and what the dashboard, the
KEDA example and the operator read exists there."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from rewardpool_worker.contract import (QUEUE_DEPTH_METRIC, Metric, OperatorMetricNames, WorkerMetricNames,
                                      all_metrics)

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "charts" / "rewardpool-operator" / "dashboards" / "rewardpool.json"
UNITS = ("_seconds", "_bytes", "_ratio", "_replicas", "_outputs", "_depth", "_batches", "_total", "_in_use",
         "_registrations", "_draining", "_retries", "_timeouts", "_errors", "_releases", "_failures", "_swept",
         "_reconciles", "_writes", "_events", "_groups",
         "_score", "_squares")  # scores have no unit: the score itself, and the sum of its squares


@pytest.mark.parametrize("m", all_metrics(), ids=lambda m: m.name)
def test_names_follow_prometheus_conventions(m: Metric):
    assert re.fullmatch(r"rewardpool_(worker|client|operator|pool)_[a-z0-9_]+", m.name), m.name
    assert not m.name.endswith("_total"), "declare counters without _total: the client library adds it"
    assert not re.search(r"_(ms|milliseconds|kb|mb|gb|percent)(_|$)", m.name), "base units only"
    if "time" in m.help.lower() or "how long" in m.help.lower() or "age" in m.help.lower().split():
        assert m.name.endswith("_seconds"), m.name
    if "bytes" in m.help.lower() and m.kind != "counter":
        assert m.name.endswith("_bytes"), m.name
    assert m.name.endswith(UNITS), f"{m.name}: name its unit"
    if m.name.startswith("rewardpool_pool_"):
        assert m.labels[:2] == ("namespace", "pool"), "per-pool figures are told apart by namespace and pool"
    if m.name.startswith("rewardpool_worker_"):
        assert not {"namespace", "pool", "pod"} & set(m.labels), "the scrape adds these from the pod"


def test_names_are_unique_and_exposed_as_declared():
    names = [m.name for m in all_metrics()]
    assert len(names) == len(set(names))
    reg = CollectorRegistry()
    for m in all_metrics():
        c = m.make(reg)
        if m.labels:
            c = c.labels(*["x"] * len(m.labels))
        (c.inc if m.kind == "counter" else c.observe if m.kind == "histogram" else c.set)(1)
    text = generate_latest(reg).decode()
    for m in all_metrics():
        suffix = "_bucket" if m.kind == "histogram" else ""
        assert re.search(rf"^{m.exposed}{suffix}[{{ ]", text, re.M), m.exposed


def test_the_operator_reads_the_name_the_worker_exports():
    assert QUEUE_DEPTH_METRIC == WorkerMetricNames.QUEUE_DEPTH.name


def test_worker_metrics_fold_actor_stats_per_output():
    from rewardpool_worker.runtime.metrics import WorkerMetrics

    w = WorkerMetrics("pickscore")
    base = {"queue_depth": 0, "pending_bytes": 0, "draining": False}
    w.update({**base, "batches": 2, "outputs": 6, "batch_log": [(4, 0.5, 0.4, 2.0), (2, 0.0, 0.2, 1.0)]})
    w.update({**base, "batches": 3, "outputs": 7, "batch_log": [(1, 0.0, 0.1, 0.5)]})
    get = w.registry.get_sample_value
    assert get("rewardpool_worker_scored_outputs_total", {"scorer": "pickscore"}) == 7
    assert get("rewardpool_worker_batches_total") == 3
    assert get("rewardpool_worker_output_read_seconds_count") == 7  # one observation per output
    assert get("rewardpool_worker_output_read_seconds_sum") == pytest.approx(0.4 + 0.2 + 0.1)
    assert get("rewardpool_worker_output_score_seconds_sum", {"scorer": "pickscore"}) == pytest.approx(3.5)
    assert get("rewardpool_worker_batch_size_outputs_sum") == 7
    assert get("rewardpool_worker_queue_wait_seconds_count") == 3


def _dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def test_dashboard_queries_name_only_declared_metrics_and_filter_by_pool():
    exposed = {m.exposed for m in all_metrics()}
    for expr in _dashboard_exprs():
        for name in re.findall(r"\b(rewardpool_[a-z_]+)\b", expr):
            assert re.sub(r"_(bucket|sum|count)$", "", name) in exposed or name in exposed, name
        if "rewardpool_pool_" in expr or "rewardpool_worker_" in expr:
            assert 'pool=~"$pool"' in expr and 'namespace=~"$namespace"' in expr, expr


def test_dashboard_covers_what_an_sre_watches():
    exprs = " ".join(_dashboard_exprs())
    for m in (OperatorMetricNames.POOL_QUEUE_DEPTH, OperatorMetricNames.POOL_DESIRED, OperatorMetricNames.POOL_READY,
              OperatorMetricNames.POOL_STORE_FILL, OperatorMetricNames.POOL_STORE_WATERMARK,
              OperatorMetricNames.POOL_DRAINING, OperatorMetricNames.POOL_OLDEST_DRAIN,
              OperatorMetricNames.RECONCILES, OperatorMetricNames.API_WRITES, WorkerMetricNames.SCORED_OUTPUTS,
              WorkerMetricNames.OUTPUT_READ_SECONDS, WorkerMetricNames.OUTPUT_SCORE_SECONDS):
        assert m.exposed in exprs, m.exposed
    assert "master_put_start_failures_total" in exprs and "master_successful_evictions_total" in exprs
    dash = json.loads(DASHBOARD.read_text())
    assert {v["name"] for v in dash["templating"]["list"]} >= {"namespace", "pool"}
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def test_keda_example_reads_the_declared_pool_metrics():
    doc = yaml.safe_load((REPO / "examples" / "keda-scaledobject.yaml").read_text())
    query = doc["spec"]["triggers"][0]["metadata"]["query"]
    names = set(re.findall(r"\b(rewardpool_[a-z_]+)\b", query))
    assert names == {OperatorMetricNames.POOL_QUEUE_DEPTH.exposed, OperatorMetricNames.POOL_EXPECTED_OUTPUTS.exposed}


def test_monitors_translate_to_the_scrape_configs_prometheus_operator_would_write(tmp_path):
    from rewardpool_devcluster.prometheus import scrape_configs

    sm = {"kind": "ServiceMonitor", "metadata": {"name": "w", "namespace": "mon"},
          "spec": {"selector": {"matchLabels": {"app.kubernetes.io/name": "rewardpool-worker"}},
                   "namespaceSelector": {"any": True},
                   "endpoints": [{"port": "http", "path": "/metrics", "relabelings": [
                       {"sourceLabels": ["__meta_kubernetes_pod_label_rewardpool_io_pool"], "targetLabel": "pool"}]}]}}
    pm = {"kind": "PodMonitor", "metadata": {"name": "op", "namespace": "sys"},
          "spec": {"selector": {"matchLabels": {"app": "op"}},
                   "podMetricsEndpoints": [{"port": "metrics", "honorLabels": True}]}}
    s, p = scrape_configs([sm, pm], tmp_path / "kubeconfig")
    assert s["kubernetes_sd_configs"][0]["role"] == "endpointslice" and "namespaces" not in s["kubernetes_sd_configs"][0]
    keep = s["relabel_configs"][0]
    assert keep == {"action": "keep", "source_labels": ["__meta_kubernetes_service_label_app_kubernetes_io_name",
                                                        "__meta_kubernetes_service_labelpresent_app_kubernetes_io_name"],
                    "regex": "rewardpool\\-worker;true"}
    assert {"source_labels": ["__meta_kubernetes_pod_label_rewardpool_io_pool"], "target_label": "pool"} == \
        s["relabel_configs"][-1]
    assert p["kubernetes_sd_configs"][0] == {"role": "pod", "kubeconfig_file": str(tmp_path / "kubeconfig"),
                                             "namespaces": {"names": ["sys"]}}
    assert p["honor_labels"] is True and s["honor_labels"] is False
    assert {"target_label": "job", "replacement": "sys/op"} in p["relabel_configs"]
